"""Small hashes keep insertion order, as Redis 7.0's listpack encoding does.

Every test sends the same commands to brisk-kv and to a real redis-server 7
(`reference`) and compares the replies: field order of HGETALL / HKEYS /
HVALS / HSCAN / HRANDFIELD, OBJECT ENCODING at the conversion limits (also
after CONFIG SET of them), DUMP bytes, RESTORE of Redis's payloads, and the
order after DEBUG RELOAD, an AOF rewrite and a full sync to a replica.
"""
from __future__ import annotations

import time

import pytest
import redis


@pytest.fixture
def kb(kv):
    """brisk-kv with bytes replies (to compare with the reference)."""
    c = kv.client(decode_responses=False)
    yield c
    c.close()


def both(kb, ref, *cmd):
    """The reply (or error text) of one command on each server."""
    out = []
    for c in (kb, ref):
        try:
            out.append(c.execute_command(*cmd))
        except redis.ResponseError as e:
            out.append(("error", str(e)))
    return out


def same(kb, ref, *cmd):
    a, b = both(kb, ref, *cmd)
    assert a == b, f"{cmd!r}: brisk {a!r} != redis {b!r}"
    return a


def order_views(kb, ref, key):
    """Everything that shows the order of a hash, compared on both."""
    for cmd in (("HGETALL", key), ("HKEYS", key), ("HVALS", key), ("HSCAN", key, 0),
                ("HSCAN", key, 0, "COUNT", 1), ("HSCAN", key, 0, "MATCH", "f*"),
                ("HRANDFIELD", key, 100000), ("HRANDFIELD", key, 100000, "WITHVALUES"),
                ("OBJECT", "ENCODING", key), ("DUMP", key)):
        same(kb, ref, *cmd)


WRITES = [
    ("HSET", "h", "f3", "c", "f1", "a", "f2", "b"),
    ("HSET", "h", "f1", "overwritten-longer-value"),  # keeps its place
    ("HSETNX", "h", "f0", "new"),
    ("HSETNX", "h", "f3", "ignored"),
    ("HINCRBY", "h", "n", 5),
    ("HINCRBY", "h", "f2x", -7),
    ("HINCRBYFLOAT", "h", "fl", "1.5"),
    ("HINCRBYFLOAT", "h", "n", "0.25"),  # now a float, same place
    ("HDEL", "h", "f3"),  # the first one goes
    ("HSET", "h", "f3", "back at the end"),
    ("HMSET", "h", "f1", "x", "z", "1234567890123"),
    ("HDEL", "h", "f2x", "missing", "f0"),
    ("HSET", "h", "f1", ""),
]


def test_insertion_order_after_every_write(kb, reference):
    for cmd in WRITES:
        same(kb, reference, *cmd)
        order_views(kb, reference, "h")


def test_randfield_positive_counts_keep_order(kb, reference):
    fields = [f"f{i}" for i in range(50, 0, -1)]
    for c in (kb, reference):
        c.hset("h", mapping={f: f"v{f}" for f in fields})
    want = [f.encode() for f in fields]
    for count in (1, 5, 16, 17, 49, 50, 51):
        got = kb.execute_command("HRANDFIELD", "h", count)
        assert len(got) == min(count, 50) and len(set(got)) == len(got)
        assert got == [f for f in want if f in set(got)], "not in insertion order"
    got = kb.execute_command("HRANDFIELD", "h", -200, "WITHVALUES")
    assert len(got) == 400 and all(v == b"v" + f for f, v in zip(got[::2], got[1::2]))
    one = kb.execute_command("HRANDFIELD", "h")
    assert one in want


def fill(c, key, n, vlen=4):
    c.delete(key)
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.hset(key, f"field:{n - i}", "v" * vlen)
    p.execute()


@pytest.mark.parametrize("limit", [None, 128, 1, 0])
def test_conversion_at_the_entries_limit(kb, reference, limit):
    if limit is not None:
        same(kb, reference, "CONFIG", "SET", "hash-max-listpack-entries", limit)
    top = limit if limit is not None else 512
    for n in (max(top, 1), top + 1):
        for c in (kb, reference):
            fill(c, "h", n)
        same(kb, reference, "OBJECT", "ENCODING", "h")
        if n <= top:
            order_views(kb, reference, "h")
        else:
            assert sorted(kb.hgetall("h").items()) == sorted(reference.hgetall("h").items())
    # a hashtable never goes back, even when it shrinks
    for c in (kb, reference):
        if top:
            c.hdel("h", *[f"field:{i}" for i in range(2, top + 2)])
    same(kb, reference, "HLEN", "h")
    same(kb, reference, "OBJECT", "ENCODING", "h")


@pytest.mark.parametrize("cmd", [
    ("HSET", "h", "f", "v" * 65),
    ("HSET", "h", "f" * 65, "v"),
    ("HSET", "h", "f", "v" * 64, "g" * 64, "w"),
    ("HMSET", "h", "a", "1", "b", "x" * 65),
    ("HSETNX", "h", "f", "v" * 65),
    ("HSETNX", "h", "f" * 65, "v"),
    ("HINCRBY", "h", "f" * 65, 1),
    ("HINCRBYFLOAT", "h", "f" * 65, "1.5"),
])
def test_conversion_at_the_value_limit(kb, reference, cmd):
    for c in (kb, reference):
        c.hset("h", mapping={"z": "1", "a": "2"})
    same(kb, reference, *cmd)
    same(kb, reference, "OBJECT", "ENCODING", "h")
    assert sorted(kb.hgetall("h").items()) == sorted(reference.hgetall("h").items())


def test_new_key_converts_at_once(kb, reference):
    for cmd in (("HSET", "a", "f", "v" * 65), ("HSETNX", "b", "f" * 65, "v"),
                ("HINCRBY", "c", "f" * 65, 3), ("HINCRBYFLOAT", "d", "f" * 65, "0.5")):
        same(kb, reference, *cmd)
        same(kb, reference, "OBJECT", "ENCODING", cmd[1])
        same(kb, reference, "HGETALL", cmd[1])
    same(kb, reference, "CONFIG", "SET", "hash-max-listpack-entries", 0)
    same(kb, reference, "HSET", "e", "f", "v")
    same(kb, reference, "OBJECT", "ENCODING", "e")


def test_config_set_value_limit_and_aliases(kb, reference):
    same(kb, reference, "CONFIG", "SET", "hash-max-ziplist-value", 10)
    assert kb.config_get("hash-max-*") == reference.config_get("hash-max-*")
    for v in ("x" * 10, "x" * 11):
        for c in (kb, reference):
            c.delete("h")
            c.hset("h", "f", v)
        same(kb, reference, "OBJECT", "ENCODING", "h")
    same(kb, reference, "CONFIG", "SET", "hash-max-ziplist-entries", 3)
    assert kb.config_get("hash-max-*") == reference.config_get("hash-max-*")
    for c in (kb, reference):
        c.delete("h")
        c.hset("h", mapping={"c": "1", "b": "2", "a": "3"})
    order_views(kb, reference, "h")
    same(kb, reference, "HSET", "h", "d", "4")
    same(kb, reference, "OBJECT", "ENCODING", "h")
    # lowering the limit below an existing small hash: the next write converts
    same(kb, reference, "CONFIG", "SET", "hash-max-listpack-entries", 1)
    for c in (kb, reference):
        c.delete("s")
        c.hset("s", "one", "1")
        c.execute_command("CONFIG", "SET", "hash-max-listpack-entries", 0)
    same(kb, reference, "OBJECT", "ENCODING", "s")
    same(kb, reference, "HSET", "s", "one", "2")
    same(kb, reference, "OBJECT", "ENCODING", "s")


SHAPES = {
    "plain": {"name": "alice", "age": "33", "city": "paris"},
    "ints": {"1": "-1", "12345": "9223372036854775807", "-9223372036854775808": "0",
             "007": "1e3", "4294967296": "-129"},
    "empty": {"": "", "e": ""},
    "edge64": {"k" * 64: "v" * 64, "x": "y" * 63},
    "binary": {"\x00\xff": "\r\n\x01", "utf8 \u00e9": "\u2603"},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_dump_bytes_identical_and_restore(kb, reference, shape):
    m = SHAPES[shape]
    for c in (kb, reference):
        # reversed then overwritten: insertion order is not sorted order
        for f in reversed(list(m)):
            c.hset("h", f, m[f])
        c.hset("h", list(m)[-1], "changed")
    order_views(kb, reference, "h")
    dump = reference.dump("h")
    assert kb.dump("h") == dump
    for c in (kb, reference):
        c.restore("copy", 0, dump)
    same(kb, reference, "HGETALL", "copy")
    same(kb, reference, "OBJECT", "ENCODING", "copy")
    # a payload from brisk-kv restores the same on Redis
    reference.restore("back", 0, kb.dump("h"))
    assert reference.hgetall("back") == reference.hgetall("h")


def test_restore_hashtable_payload_with_few_fields(kb, reference):
    """Redis writes a hashtable-encoded hash as RDB_TYPE_HASH; restored with
    few fields it becomes a listpack again, in the payload's order."""
    same(kb, reference, "CONFIG", "SET", "hash-max-listpack-entries", 2)
    for c in (kb, reference):
        c.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    same(kb, reference, "OBJECT", "ENCODING", "h")
    dump = reference.dump("h")
    same(kb, reference, "CONFIG", "SET", "hash-max-listpack-entries", 128)
    for c in (kb, reference):
        c.restore("r", 0, dump)
    same(kb, reference, "OBJECT", "ENCODING", "r")
    same(kb, reference, "HGETALL", "r")


def test_copy_keeps_order_and_encoding(kb, reference):
    for c in (kb, reference):
        c.hset("h", mapping={"z": "1", "y": "2", "x": "3"})
    same(kb, reference, "COPY", "h", "h2")
    order_views(kb, reference, "h2")


def test_debug_reload_keeps_order(kv_factory, reference):
    kb = kv_factory("--enable-debug-command", "yes").client()
    for c in (kb, reference):
        c.hset("h", mapping={"z": "1", "m": "2", "a": "3", "q": "4"})
        c.hdel("h", "m")
        c.hset("h", "m", "5")
    order_views(kb, reference, "h")
    assert kb.execute_command("DEBUG", "RELOAD") == b"OK"
    order_views(kb, reference, "h")


def test_aof_rewrite_keeps_order(kv_factory, tmp_path):
    kv = kv_factory("--appendonly", "yes")
    c = kv.client(decode_responses=True)
    fields = [f"f{i}" for i in range(20, 0, -1)]
    c.hset("h", mapping={f: f.upper() for f in fields})
    c.hdel("h", "f10")
    c.hset("h", "f10", "last")
    want = c.hgetall("h")
    assert c.bgrewriteaof()
    deadline = time.time() + 20
    while c.info("persistence")["aof_rewrite_in_progress"] and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    kv.stop()
    c2 = kv_factory("--appendonly", "yes", workdir=tmp_path).client(decode_responses=True)
    assert list(c2.hgetall("h").items()) == list(want.items())
    assert c2.object("encoding", "h") == "listpack"


def test_full_sync_keeps_order(kv_factory):
    m = kv_factory()
    mc = m.client(decode_responses=True)
    for k in range(50):
        mc.hset(f"h{k}", mapping={f"f{(k * 7 + i) % 13}": str(i) for i in range(k % 13 + 1)})
    rc = kv_factory().client(decode_responses=True)
    rc.replicaof("127.0.0.1", m.port)
    mc.set("marker", "1")
    deadline = time.time() + 30
    while rc.get("marker") != "1" and time.time() < deadline:
        time.sleep(0.05)
    for k in range(50):
        assert list(rc.hgetall(f"h{k}").items()) == list(mc.hgetall(f"h{k}").items())
        assert rc.object("encoding", f"h{k}") == "listpack"


def test_hscan_small_options_and_errors(kb, reference):
    for c in (kb, reference):
        c.hset("h", mapping={"foo": "1", "bar": "2", "fob": "3"})
    for cmd in (("HSCAN", "h", 0, "MATCH", "fo*"), ("HSCAN", "h", 123, "COUNT", 1),
                ("HSCAN", "h", 0, "COUNT", 0), ("HSCAN", "h", 0, "COUNT", "x"),
                ("HSCAN", "h", 0, "BOGUS"),
                ("HSCAN", "h", "18446744073709551616"), ("HSCAN", "nokey", 0)):
        same(kb, reference, *cmd)


def test_hostile_counts_on_small_hash(kb, reference):
    for c in (kb, reference):
        c.hset("h", mapping={"a": "1", "b": "2"})
    for cmd in (("HRANDFIELD", "h", -9223372036854775808),
                ("HRANDFIELD", "h", -9223372036854775808, "WITHVALUES"),
                ("HRANDFIELD", "h", 9223372036854775807),
                ("HRANDFIELD", "h", 9223372036854775807, "WITHVALUES"),
                ("HRANDFIELD", "h", 0), ("HRANDFIELD", "h", -3)):
        a, b = both(kb, reference, *cmd)
        if isinstance(b, tuple) or cmd[2] >= 0:
            assert a == b, cmd
        else:
            assert len(a) == len(b), cmd
    assert kb.ping()


def test_mass_delete_then_refill_keeps_order(kb, reference):
    for c in (kb, reference):
        p = c.pipeline(transaction=False)
        for i in range(500):
            p.hset("h", f"f{i * 37 % 500}", "v" * (i % 64))
        p.execute()
        c.hdel("h", *[f"f{i}" for i in range(0, 500, 3)])
        c.hdel("h", *[f"f{i}" for i in range(1, 500, 3)])
        c.hset("h", mapping={f"f{i}": "x" * (i % 7) for i in range(0, 500, 9)})
    order_views(kb, reference, "h")
