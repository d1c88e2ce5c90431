"""Lua-heavy client libraries driving brisk-kv unchanged, side by side with a
real redis-server 7: BullMQ (a job queue whose every state change is a Lua
script: jobs completed, delayed, retried then completed, failed after their
attempts, retried by hand, prioritised, a flow parent waiting for its
children, pause/resume, a rate limiter) and ioredis's defineCommand scripts
(EVALSHA with the EVAL fallback after SCRIPT FLUSH, in pipelines and MULTI)
from node_script/queue.mjs; redis-py's Lock (acquire, blocking acquire,
extend, reacquire, release, a lock not owned) and register_script here.

The npm packages are pinned in node_script/package-lock.json and installed
by scripts/deps.sh test (or here on first use); the node
test is skipped, with the reason, only when node/npm is missing or the
install fails (no registry).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError

NODE_DIR = Path(__file__).resolve().parent / "node_script"


@pytest.fixture(scope="module")
def node_queue():
    if not shutil.which("node"):
        pytest.skip("Node.js is not installed")
    if not (NODE_DIR / "node_modules" / "bullmq").is_dir():
        npm = shutil.which("npm")
        if not npm:
            pytest.skip("npm is not installed, BullMQ and ioredis cannot be installed")
        # npm install with the lock file (npm ci trips over the lock's
        # platform-optional packages of msgpackr-extract)
        r = subprocess.run([npm, "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund",
                            "--no-save", "--ignore-scripts"],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.skip("npm install failed (registry unreachable?), BullMQ is not available: "
                        + (r.stderr or r.stdout)[-500:])
    return NODE_DIR / "queue.mjs"


def run_queue(script: Path, port: int) -> dict:
    r = subprocess.run(["node", str(script), str(port)], capture_output=True, text=True,
                       timeout=180, cwd=NODE_DIR)
    assert r.returncode == 0, f"port {port}: " + r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_bullmq_and_ioredis_scripts(kv, reference, node_queue):
    ref_port = reference.connection_pool.connection_kwargs["port"]
    mine = run_queue(node_queue, kv.port)
    ref = run_queue(node_queue, ref_port)
    assert mine == ref
    # and what the run shows is a queue that worked, not two equal failures
    jobs = mine["jobs"]
    assert jobs["plain"]["state"] == "completed" and jobs["plain"]["returnvalue"] == {"doubled": 2}
    assert jobs["delayed"]["state"] == "completed" and mine["delayed_waited"]
    assert jobs["flaky"] == {"state": "completed", "attemptsMade": 3, "returnvalue": {"doubled": 6},
                             "failedReason": "flaky 2", "progress": 0}
    assert jobs["broken"]["state"] == "failed" and jobs["broken"]["attemptsMade"] == 2
    assert jobs["progress"]["progress"] == 50
    assert mine["counts"]["completed"] == 8 and mine["counts"]["failed"] == 1
    assert mine["manual_retry_tries"] == 3
    assert mine["flow_children"] == [22, 24]
    assert mine["removed"] and mine["rate_limited"]
    io = mine["ioredis"]
    assert io["cap"] == [4, 8, 10, 10] and io["after_flush"] == 10
    assert io["pipeline"] == [2, 4, 5, ["1", "2"]] and io["fails"] == "MYERR nope"
    # brisk-kv is alive and consistent after it all
    c = kv.client(decode_responses=True)
    assert c.ping() and c.get("c") == "10"
    c.close()


def lock_session(cli: redis.Redis) -> list:
    """redis-py's Lock (its acquire/extend/reacquire/release are Lua
    scripts) through the cases a lock user meets; returns what it saw."""
    seen = []
    lock = cli.lock("res", timeout=5)
    seen.append(lock.acquire(blocking=False))
    seen.append((lock.locked(), lock.owned()))
    other = cli.lock("res", timeout=5, thread_local=False)
    seen.append(other.acquire(blocking=False))
    seen.append(other.acquire(blocking=True, blocking_timeout=0.2))
    seen.append(lock.extend(10))
    seen.append(5000 < cli.pttl("res") <= 15000)
    seen.append(lock.extend(3, replace_ttl=True))
    seen.append(1000 < cli.pttl("res") <= 3000)
    seen.append(lock.reacquire())
    seen.append(4000 < cli.pttl("res") <= 5000)
    # a waiter gets the lock once the holder releases it
    got = []
    t = threading.Thread(target=lambda: got.append(
        other.acquire(blocking=True, blocking_timeout=5)))
    t.start()
    time.sleep(0.2)
    lock.release()
    t.join(10)
    seen.append(got)
    seen.append((lock.owned(), other.owned()))
    # a stale token: the scripts themselves refuse (LockNotOwnedError)
    lock.local.token = b"a-token-that-lost-the-lock"
    for op in (lambda: lock.extend(1), lock.reacquire, lock.release):
        try:
            op()
            seen.append("no error")
        except LockNotOwnedError as e:
            seen.append(("not owned", str(e)))
        except LockError as e:
            seen.append(("lock error", str(e)))
    # an expired lock cannot be extended by its old owner
    short = cli.lock("short", timeout=0.1)
    seen.append(short.acquire())
    time.sleep(0.3)
    try:
        short.extend(1)
        seen.append("extended")
    except LockNotOwnedError:
        seen.append("expired")
    other.release()
    seen.append(cli.exists("res"))
    # register_script: EVALSHA, and EVAL again after SCRIPT FLUSH
    incr = cli.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    seen.append([incr(keys=["n"], args=[2]) for _ in range(3)])
    cli.script_flush()
    seen.append(incr(keys=["n"], args=[1]))
    return seen


def test_redis_py_lock(r, reference):
    assert lock_session(r) == lock_session(reference)


def test_redis_py_lock_contention(r):
    """Eight threads take turns on one lock: at most one holds it at a time
    and every increment made under it lands."""
    kw = r.connection_pool.connection_kwargs
    holders = []
    errors = []

    def worker():
        c = redis.Redis(host=kw["host"], port=kw["port"], socket_timeout=10)
        try:
            for _ in range(10):
                with c.lock("busy", timeout=5, blocking_timeout=20, sleep=0.005):
                    holders.append(1)
                    if len(holders) > 1:
                        errors.append("two holders")
                    v = int(c.get("counter") or 0)
                    c.set("counter", v + 1)
                    holders.pop()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
        finally:
            c.close()

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert errors == []
    assert r.get("counter") == "80"


REDIS_PY_SUITE = ["tests/test_lock.py", "tests/test_scripting.py", "tests/test_function.py"]


@pytest.fixture(scope="module")
def redis_py_suite(tmp_path_factory):
    """redis-py's own tests of its Lock, scripting and function helpers, from
    the sdist of the installed redis-py (pip download; skipped, with the
    reason, when the registry cannot be reached)."""
    import sys
    d = tmp_path_factory.mktemp("redis-py-sdist")
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", f"redis=={redis.__version__}", "-d", str(d)],
                       capture_output=True, text=True, timeout=300)
    tars = list(d.glob("redis-*.tar.gz"))
    if r.returncode != 0 or not tars:
        pytest.skip("cannot download redis-py's sdist (registry unreachable?): "
                    + (r.stderr or r.stdout)[-300:])
    subprocess.run(["tar", "xzf", str(tars[0]), "-C", str(d)], check=True)
    return next(p for p in d.iterdir() if p.is_dir())


def run_redis_py_suite(src: Path, port: int, protocol: int) -> tuple[set, set]:
    import re
    import sys
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                        "-o", "addopts=", *REDIS_PY_SUITE, f"--redis-url=redis://127.0.0.1:{port}/0",
                        f"--protocol={protocol}"],
                       capture_output=True, text=True, timeout=600, cwd=src)
    passed = set(re.findall(r"^PASSED (\S+)", r.stdout, re.M))
    failed = set(re.findall(r"^(?:FAILED|ERROR) (\S+)", r.stdout, re.M))
    assert passed, r.stdout[-3000:] + r.stderr[-3000:]
    return passed, failed


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_own_suite(kv, reference, redis_py_suite, protocol):
    """redis-py's test_lock.py, test_scripting.py and test_function.py pass
    on brisk-kv wherever they pass on redis-server (the cluster-only ones
    fail on both: no cluster here)."""
    ref_port = reference.connection_pool.connection_kwargs["port"]
    ref_pass, ref_fail = run_redis_py_suite(redis_py_suite, ref_port, protocol)
    kv_pass, kv_fail = run_redis_py_suite(redis_py_suite, kv.port, protocol)
    print(f"redis-py suite RESP{protocol}: redis-server {len(ref_pass)} passed "
          f"{len(ref_fail)} failed; brisk-kv {len(kv_pass)} passed {len(kv_fail)} failed")
    assert ref_pass - kv_pass == set()
    assert len(ref_pass) >= 50
