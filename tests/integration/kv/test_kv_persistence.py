"""AOF durability: appendfsync always + kill -9, truncated tails,
corruption, --check-aof, and BGREWRITEAOF under concurrent writers."""
from __future__ import annotations

import subprocess
import threading
import time

import pytest
import redis

from kvlib import KV_BIN


def dataset(c: redis.Redis) -> dict:
    """Every key of db 0 with its type and value."""
    out = {}
    for k in c.scan_iter(count=500):
        t = c.type(k)
        if t == b"string":
            out[k] = c.get(k)
        elif t == b"list":
            out[k] = c.lrange(k, 0, -1)
        elif t == b"hash":
            out[k] = c.hgetall(k)
        elif t == b"set":
            out[k] = sorted(c.smembers(k))
        elif t == b"zset":
            out[k] = c.zrange(k, 0, -1, withscores=True)
    return out


def test_always_kill9_keeps_every_acknowledged_write(kv_factory, tmp_path):
    kv = kv_factory("--appendonly", "yes", "--appendfsync", "always")
    c = kv.client()
    n = 2000
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.set(f"k{i}", f"v{i}")
        p.incr("counter")
        if i % 100 == 99:
            p.execute()
    p.rpush("list", *range(50))
    p.hset("hash", mapping={"f1": "a", "f2": "b"})
    p.zadd("zs", {"m1": 1.25, "m2": -3})
    p.sadd("set", "x", "y")
    p.expire("k0", 1000)
    p.execute()
    c.close()
    kv.kill9()
    kv.expect_exit = True
    kv2 = kv_factory("--appendonly", "yes", workdir=tmp_path)
    c2 = kv2.client()
    assert c2.dbsize() == n + 5
    assert c2.get("counter") == str(n).encode()
    for i in range(0, n, 97):
        assert c2.get(f"k{i}") == f"v{i}".encode()
    assert c2.lrange("list", 0, -1) == [str(i).encode() for i in range(50)]
    assert c2.zscore("zs", "m1") == 1.25 and c2.zscore("zs", "m2") == -3
    assert 900 < c2.ttl("k0") <= 1000


def test_truncated_tail_loads_and_is_truncated(kv_factory, tmp_path):
    aof = tmp_path / "appendonly.aof"
    good = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n"
    aof.write_bytes(good + b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$2\r\n3")
    kv = kv_factory("--appendonly", "yes", workdir=tmp_path)
    c = kv.client()
    assert c.get("a") == b"1" and c.get("b") == b"2" and c.get("c") is None
    assert "short read" in kv.output()
    # the server truncated the file and keeps appending after the good part
    c.set("d", "4")
    kv.restart()
    c = kv.client()
    assert [c.get(k) for k in ("a", "b", "c", "d")] == [b"1", b"2", None, b"4"]


def test_unfinished_transaction_at_tail_is_dropped(kv_factory, tmp_path):
    aof = tmp_path / "appendonly.aof"
    aof.write_bytes(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"
                    b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n")
    kv = kv_factory("--appendonly", "yes", workdir=tmp_path)
    c = kv.client()
    assert c.get("a") == b"1" and c.get("b") is None
    aof = tmp_path / "appendonlydir" / "appendonly.aof"  # moved in as the base, as Redis 7
    assert aof.stat().st_size == len(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n")


def test_corruption_in_the_middle_refuses_to_start(kv_factory, tmp_path):
    aof = tmp_path / "appendonly.aof"
    aof.write_bytes(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"
                    b"garbage!\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n")
    aof.write_bytes(aof.read_bytes().replace(b"garbage!\r\n", b"*x\r\n"))
    kv = kv_factory("--appendonly", "yes", workdir=tmp_path, start=False)
    kv.expect_exit = True
    kv.start(wait=False)
    rc = kv.proc.wait(10)
    assert rc != 0
    assert "Bad file format" in kv.output() and "offset 27" in kv.output()
    aof = tmp_path / "appendonlydir" / "appendonly.aof"  # moved in as the base, as Redis 7
    # --check-aof reports, --fix repairs
    chk = subprocess.run([KV_BIN, "--check-aof", str(aof)], capture_output=True, text=True)
    assert chk.returncode == 1 and "ok_up_to=27" in chk.stdout
    fix = subprocess.run([KV_BIN, "--check-aof", "--fix", str(aof)], capture_output=True, text=True)
    assert fix.returncode == 0 and aof.stat().st_size == 27
    ok = subprocess.run([KV_BIN, "--check-aof", str(aof)], capture_output=True, text=True)
    assert ok.returncode == 0 and "is valid" in ok.stdout


def test_bgrewriteaof_under_concurrent_writers_loses_nothing(kv_factory, tmp_path):
    kv = kv_factory("--appendonly", "yes", "--appendfsync", "everysec")
    c = kv.client()
    for i in range(3000):
        c.set(f"pre:{i}", "x" * 50)
    c.zadd("z", {f"m{i}": i for i in range(500)})
    c.hset("h", mapping={f"f{i}": i for i in range(300)})
    stop = threading.Event()
    counts = [0, 0]

    def writer(idx):
        w = kv.client()
        while not stop.is_set():
            p = w.pipeline(transaction=False)
            for _ in range(20):
                n = counts[idx]
                p.set(f"w{idx}:{n}", n)
                p.incr(f"ctr{idx}")
                p.rpush(f"l{idx}", n)
                counts[idx] += 1
            p.execute()
        w.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    assert c.bgrewriteaof()
    # connections closing while the child holds copies of their sockets
    # must be unregistered from epoll (regression: use after free)
    for _ in range(30):
        t = kv.client()
        t.ping()
        t.close()
    deadline = time.time() + 20
    while time.time() < deadline:
        if c.info("persistence")["aof_rewrite_in_progress"] == 0 and \
                c.info("persistence")["aof_rewrites"] >= 1:
            break
        time.sleep(0.05)
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    assert c.info("persistence")["aof_rewrites"] >= 1
    before = dataset(c)
    assert c.get("ctr0") == str(counts[0]).encode()
    kv.restart()
    c = kv.client()
    after = dataset(c)
    assert after == before
    assert c.llen("l1") == counts[1]


def test_appendonly_switched_on_at_runtime(kv_factory, tmp_path):
    kv = kv_factory()
    c = kv.client()
    c.set("before", "1")
    assert c.config_set("appendonly", "yes")
    deadline = time.time() + 10
    while not (tmp_path / "appendonlydir" / "appendonly.aof.manifest").exists() \
            and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    c.set("after", "2")
    kv.stop()
    kv2 = kv_factory("--appendonly", "yes", workdir=tmp_path)
    c2 = kv2.client()
    assert c2.get("before") == b"1" and c2.get("after") == b"2"
