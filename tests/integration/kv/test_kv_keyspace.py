"""The compact keyspace (slab entries, open-addressing index) seen from a
client: the same random command sequence runs against brisk-kv and against
a real redis-server, and every reply must match. The sequence leans on what
moves or reshapes an entry: values around the 128-byte varint step and the
1 KiB slab limit, TTLs added to and dropped from keys of every size,
APPEND/SETRANGE growth, INCR, a string replaced by a hash and back, RENAME,
COPY and MOVE with TTLs. Then SCAN while the table grows and shrinks, and
the memory per key of a redis-benchmark-like load.
"""
from __future__ import annotations

import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from kvlib import KV_BIN, free_port


SIZES = [0, 1, 7, 60, 64, 100, 119, 120, 121, 127, 128, 129, 200, 500, 990, 1000, 1024,
         1100, 5000, 20000]


def value(rng: random.Random) -> bytes:
    n = rng.choice(SIZES) + rng.randint(-2, 2)
    return bytes(rng.getrandbits(8) for _ in range(max(n, 0)))


def key(rng: random.Random) -> bytes:
    # a few long keys as well: the key length is a varint too
    if rng.random() < 0.1:
        return b"long:" + b"k" * rng.choice([120, 130, 300]) + str(rng.randint(0, 5)).encode()
    return b"k:%d" % rng.randint(0, 40)


def one_command(rng: random.Random) -> list:
    k, k2 = key(rng), key(rng)
    ops = [
        lambda: ["SET", k, value(rng)],
        lambda: ["SET", k, value(rng), "EX", str(rng.randint(1000, 5000))],
        lambda: ["SET", k, value(rng), "KEEPTTL"],
        lambda: ["SET", k, value(rng), "GET"],
        lambda: ["SET", k, value(rng), rng.choice(["NX", "XX"])],
        lambda: ["GET", k],
        lambda: ["APPEND", k, value(rng)],
        lambda: ["SETRANGE", k, str(rng.choice([0, 5, 100, 127, 1000, 1030])), value(rng)],
        lambda: ["GETRANGE", k, str(rng.randint(-50, 50)), str(rng.randint(-50, 2000))],
        lambda: ["STRLEN", k],
        lambda: ["INCRBY", k, str(rng.choice([1, -1, 10**12, -(10**12)]))],
        lambda: ["EXPIRE", k, str(rng.randint(1000, 5000))],
        lambda: ["PERSIST", k],
        lambda: ["TTL", k],
        lambda: ["GETEX", k, "PERSIST"],
        lambda: ["GETEX", k, "EX", str(rng.randint(1000, 5000))],
        lambda: ["DEL", k],
        lambda: ["EXISTS", k, k2],
        lambda: ["TYPE", k],
        lambda: ["RENAME", k, k2],
        lambda: ["RENAMENX", k, k2],
        lambda: ["COPY", k, k2, "REPLACE"],
        lambda: ["MOVE", k, "1"],
        lambda: ["HSET", k, "f", value(rng)],
        lambda: ["HGETALL", k],
        lambda: ["RPUSH", k, value(rng)],
        lambda: ["GETDEL", k],
        lambda: ["MSET", k, value(rng), k2, value(rng)],
    ]
    return rng.choice(ops)()


def run(c: redis.Redis, cmd: list):
    try:
        reply = c.execute_command(*cmd)
    except redis.ResponseError as e:
        return ("error", str(e))
    if cmd[0] == "TTL" and isinstance(reply, int) and reply > 0:
        return ("ttl", "positive")  # the two servers started at different moments
    if cmd[0] == "HGETALL" and isinstance(reply, dict):
        return sorted(reply.items())
    return reply


def test_same_replies_as_redis(kv, reference):
    brisk = kv.client()
    rng = random.Random(20240611)
    for i in range(6000):
        cmd = one_command(rng)
        want = run(reference, cmd)
        got = run(brisk, cmd)
        assert got == want, f"command {i}: {cmd[:2]} -> redis {want!r}, brisk {got!r}"
    # and the final keyspaces agree, values and TTL presence included
    for db in (0, 1):
        for c in (reference, brisk):
            c.execute_command("SELECT", db)
        keys = sorted(reference.keys("*"))
        assert sorted(brisk.keys("*")) == keys
        for k in keys:
            assert brisk.type(k) == reference.type(k)
            if reference.type(k) == b"string":
                assert brisk.get(k) == reference.get(k)
            assert (brisk.ttl(k) > 0) == (reference.ttl(k) > 0)
    brisk.close()


def test_ttl_on_and_off_keeps_every_value(r):
    """A TTL added to a key whose slot has no room moves the entry; dropping
    it shifts the entry in place. Every size, both ways, many keys (so that
    the volatile-key index is reshuffled too)."""
    vals = {f"t:{i}": "v" * (i * 7 % 1500) for i in range(400)}
    r.mset(vals)
    for k in vals:
        assert r.pexpire(k, 10_000_000) is True
    for k, v in vals.items():
        assert r.get(k) == v and r.ttl(k) > 0
    for i, k in enumerate(vals):
        if i % 2:
            assert r.persist(k) is True
    assert r.info("keyspace")["db0"]["expires"] == 200
    for i, (k, v) in enumerate(vals.items()):
        assert r.get(k) == v
        assert (r.ttl(k) > 0) == (i % 2 == 0)
    # the TTLs still work: make them due and watch them go
    for i, k in enumerate(vals):
        if i % 2 == 0:
            r.pexpire(k, 1)
    time.sleep(0.05)
    assert sum(r.exists(k) for k in vals) == 200  # lazy expiry on access
    assert r.dbsize() == 200
    assert r.info("keyspace")["db0"]["expires"] == 0


def test_append_grows_across_every_boundary(r):
    s = ""
    for n in [1, 50, 70, 8, 1, 500, 400, 100, 2000, 70000]:
        piece = chr(ord("a") + n % 26) * n
        s += piece
        assert r.append("ap", piece) == len(s)
        assert r.get("ap") == s
    r.expire("ap", 1000)
    assert r.append("ap", "tail") == len(s) + 4 and r.ttl("ap") > 0
    assert r.get("ap") == s + "tail"
    assert r.setrange("sr", 130, "x") == 131
    assert r.get("sr") == "\x00" * 130 + "x"


@pytest.mark.timeout(120)  # ~120k SETs from Python: 30 s is short on a loaded 2-core machine
def test_scan_while_the_keyspace_grows_and_shrinks(kv):
    c = kv.client(decode_responses=True)
    stable = {f"stable:{i}" for i in range(3000)}
    p = c.pipeline(transaction=False)
    for k in stable:
        p.set(k, "1")
    p.execute()
    seen: set[str] = set()
    cursor, calls, extra = 0, 0, 0
    while True:
        cursor, keys = c.scan(cursor, count=50)
        seen.update(keys)
        calls += 1
        if calls % 3 == 0 and extra < 60000:
            p = c.pipeline(transaction=False)
            for _ in range(3000):
                p.set(f"extra:{extra}", "x")
                extra += 1
            p.execute()
        elif extra >= 60000 and calls % 3 == 0:
            c.delete(*[f"extra:{i}" for i in range(extra - 3000, extra)])
            extra -= 3000
            if extra == 0:
                extra = -1  # shrunk: stop adding
        if cursor == 0:
            break
    assert stable <= seen
    assert c.dbsize() >= 3000
    c.close()


def sanitized() -> bool:
    with open(KV_BIN, "rb") as f:
        return b"__asan_init" in f.read()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def test_memory_per_key_of_a_set_load(kv):
    """The issue's memory load, scaled down: 16-byte keys, 64-byte values.
    Redis needs about 175-190 bytes per key here; the target is 0.6x."""
    bench = shutil.which("redis-benchmark")
    if not bench:
        pytest.skip("redis-benchmark is not installed (redis-tools)")
    c = kv.client()
    before = rss_bytes(kv.proc.pid)
    subprocess.run([bench, "-p", str(kv.port), "-t", "set", "-r", "200000", "-n", "400000",
                    "-d", "64", "-P", "32", "-q"], check=True, stdout=subprocess.DEVNULL,
                   timeout=300)
    keys = c.dbsize()
    per_key = (rss_bytes(kv.proc.pid) - before) / keys
    used = c.info("memory")["used_memory"]
    print(f"\n{keys} keys: {per_key:.1f} bytes/key RSS, used_memory {used / keys:.1f}/key")
    assert keys > 150000
    if not sanitized():  # ASan's redzones and shadow memory change the figure
        assert per_key <= 112
    c.close()


def test_large_keyspace_through_growth_and_shrink(r):
    """50,000 keys of mixed sizes through several table resizes, then most
    deleted (a shrink), checked against a model after every phase."""
    rng = random.Random(7)
    model: dict[str, str] = {}

    def check():
        keys = list(model)
        for i in range(0, len(keys), 1000):
            chunk = keys[i:i + 1000]
            assert r.mget(chunk) == [model[k] for k in chunk]
        assert r.dbsize() == len(model)

    p = r.pipeline(transaction=False)
    for i in range(50_000):
        k, v = f"big:{i}", "v" * rng.choice([0, 5, 60, 130, 900, 1500])
        model[k] = v
        p.set(k, v)
        if i % 7 == 0:
            p.pexpire(k, 10_000_000)
    p.execute()
    check()
    for i in range(0, 50_000, 3):  # overwrite a third with other sizes
        k = f"big:{i}"
        model[k] = str(i) * rng.choice([1, 30, 300])
        p.set(k, model[k], keepttl=True)
    p.execute()
    check()
    doomed = [k for j, k in enumerate(model) if j % 20]
    for i in range(0, len(doomed), 1000):
        p.delete(*doomed[i:i + 1000])
    p.execute()
    for k in doomed:
        del model[k]
    check()
    time.sleep(0.3)  # the cron moves the shrink along
    check()
    assert r.info("keyspace")["db0"]["expires"] == sum(
        1 for k in model if int(k.split(":")[1]) % 7 == 0)
    seen = set()
    for k in r.scan_iter(count=500):
        seen.add(k)
    assert seen == set(model)
