"""A Node.js client against the real brisk-kv: node-redis (the `redis`
package, pinned in node/package-lock.json) runs node/session.mjs, a basic
session over RESP3 (HELLO 3, node-redis's default) and then RESP2: strings,
INCR, hashes, lists, sets, sorted sets, a pipeline, MULTI/EXEC, errors,
SCAN and CLIENT SETINFO.

node_modules is installed on first use with `npm ci`. The test is skipped,
with the reason, only when Node.js >= 20 or npm is missing or the install
fails (no registry).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"


def node_major() -> int:
    try:
        out = subprocess.run(["node", "--version"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
        return int(out.lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


@pytest.fixture(scope="module")
def node_client():
    if not shutil.which("node"):
        pytest.skip("Node.js is not installed")
    if node_major() < 20:
        pytest.skip("node-redis 6 needs Node.js >= 20")
    if not (NODE_DIR / "node_modules" / "redis").is_dir():
        npm = shutil.which("npm")
        if not npm:
            pytest.skip("npm is not installed, node-redis cannot be installed")
        r = subprocess.run([npm, "ci", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.skip("npm ci failed, node-redis is not available: "
                        + (r.stderr or r.stdout)[-500:])
    return NODE_DIR / "session.mjs"


def test_node_redis_session(kv, node_client):
    r = subprocess.run(["node", str(node_client), str(kv.port)], capture_output=True,
                       text=True, timeout=120, cwd=NODE_DIR)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("ok ") and int(last.split()[1]) >= 50, r.stdout
    # what node wrote is there for another client
    c = kv.client(decode_responses=True)
    assert c.get("node3:str") == "hello" and c.get("node2:n") == "42"
    assert c.hgetall("node3:h") == {"a": "10", "b": "2", "c": "3"}
    assert c.info("commandstats")["cmdstat_hello"]["calls"] >= 1  # the RESP3 client
    c.close()
