"""DUMP / RESTORE / MIGRATE / OBJECT against a real redis-server 7, side by side.

Payloads go both ways (brisk-kv -> Redis and Redis -> brisk-kv) for every type
and encoding size; DUMP bytes are compared where the encoding decides them
(strings, lists, intsets, zsets, one-field hashes); malformed, truncated and
fuzzed payloads must give an error and leave the server alive."""
from __future__ import annotations

import random
import time
import zlib

import pytest
import redis

from kvlib import start_redis, stop_redis

# ---- CRC-64/Jones, to make payloads whose checksum is right ----

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x95AC9329AC4BC9B5 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc64(data: bytes) -> int:
    crc = 0
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def payload(body: bytes, version: int = 10) -> bytes:
    """A DUMP payload around an object (type byte + value)."""
    head = body + version.to_bytes(2, "little")
    return head + crc64(head).to_bytes(8, "little")


def ref_port(ref: redis.Redis) -> int:
    return ref.connection_pool.connection_kwargs["port"]


def call(c: redis.Redis, *args):
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return "ERR: " + str(e)


def content(c: redis.Redis, key: str):
    t = c.type(key)
    t = t.decode() if isinstance(t, bytes) else t
    if t == "string":
        v = c.get(key)
    elif t == "list":
        v = c.lrange(key, 0, -1)
    elif t == "set":
        v = sorted(c.smembers(key))
    elif t == "zset":
        v = c.zrange(key, 0, -1, withscores=True)
    elif t == "hash":
        v = sorted(c.hgetall(key).items())
    else:
        v = None
    return t, v


@pytest.fixture
def kb(kv):
    """brisk-kv with bytes replies (to compare with the reference)."""
    c = kv.client()
    yield c
    c.close()


def test_crc64_check_value():
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


# ---- values of every type and encoding size ----

def _rand_str(rnd: random.Random, n: int) -> bytes:
    kind = rnd.random()
    if kind < 0.25:
        return str(rnd.choice([rnd.randint(-(2**63), 2**63 - 1), rnd.randint(-70000, 70000),
                               rnd.randint(0, 200)])).encode()
    if kind < 0.5:
        return bytes(rnd.choice(b"ab") for _ in range(n))
    if kind < 0.6:
        return b"item %d" % rnd.randint(0, 100)
    return bytes(rnd.randint(0, 255) for _ in range(n))


def build(c: redis.Redis, key: str, kind: str, n: int, size: int, seed: int):
    rnd = random.Random(seed)
    if kind == "string":
        c.set(key, _rand_str(rnd, size))
    elif kind == "list":
        vals = [_rand_str(rnd, rnd.randint(0, size)) for _ in range(n)]
        for i in range(0, n, 200):
            c.rpush(key, *vals[i:i + 200])
    elif kind == "set":
        c.sadd(key, *[_rand_str(rnd, rnd.randint(1, size)) for _ in range(n)])
    elif kind == "intset":
        c.sadd(key, *[rnd.choice([rnd.randint(-100, 100), rnd.randint(-70000, 70000),
                                  rnd.randint(-(2**40), 2**40)]) for _ in range(n)])
    elif kind == "zset":
        args = []
        for _ in range(n):
            score = rnd.choice([rnd.randint(-1000, 1000), rnd.random() * 100, rnd.randint(-8, 8) / 4,
                                "-inf", "inf", 1e300, -2.5e-300])
            args += [score, _rand_str(rnd, rnd.randint(1, size))]
        c.execute_command("ZADD", key, *args)
    elif kind == "hash":
        args = []
        for _ in range(n):
            args += [_rand_str(rnd, rnd.randint(1, size)), _rand_str(rnd, rnd.randint(0, size))]
        c.execute_command("HSET", key, *args)


SHAPES = [
    (kind, n, size)
    for kind in ("list", "set", "intset", "zset", "hash")
    for n, size in ((1, 5), (5, 30), (127, 10), (128, 64), (129, 65), (300, 20), (600, 100),
                    (3000, 40))
] + [("string", 1, s) for s in (0, 1, 11, 20, 21, 44, 45, 100, 5000, 70000)]


@pytest.mark.parametrize("kind,n,size", SHAPES)
def test_interchange_both_directions(kb, reference, kind, n, size):
    seed = zlib.crc32(repr((kind, n, size)).encode())
    build(kb, "k", kind, n, size, seed)
    build(reference, "k", kind, n, size, seed)
    assert content(kb, "k") == content(reference, "k")
    assert kb.object("encoding", "k") == reference.object("encoding", "k")
    mine, theirs = kb.dump("k"), reference.dump("k")
    # Redis's DUMP restores here, and ours there, with the same contents.
    assert kb.restore("from_redis", 0, theirs) in (True, b"OK")
    assert reference.restore("from_kv", 0, mine) in (True, b"OK")
    assert content(kb, "from_redis") == content(reference, "k")
    assert content(reference, "from_kv") == content(reference, "k")
    assert reference.object("encoding", "from_kv") == reference.object("encoding", "k")
    assert kb.object("encoding", "from_redis") == reference.object("encoding", "k")
    # Byte-identical where the value, not the insertion history, decides.
    enc = reference.object("encoding", "k")
    if kind in ("string", "list", "zset") or enc == b"intset" or (kind == "hash" and n == 1) \
            or (kind == "set" and n == 1):
        assert mine == theirs


@pytest.mark.parametrize("value", [
    b"", b"0", b"-1", b"127", b"-128", b"128", b"32767", b"-32768", b"32768", b"2147483647",
    b"-2147483648", b"2147483648", b"12345678901", b"9223372036854775807", b"-0", b"01", b"+1",
    b"a" * 21, b"abc" * 30, bytes(range(256)) * 4, b"x" * 100000,
])
def test_dump_string_bytes_identical(kb, reference, value):
    kb.set("s", value)
    reference.set("s", value)
    assert kb.dump("s") == reference.dump("s")
    assert kb.object("encoding", "s") == reference.object("encoding", "s")


def test_dump_bytes_identical_fixed_shapes(kb, reference):
    def both(*a):
        for c in (kb, reference):
            c.execute_command(*a)

    both("RPUSH", "l", "a", "b", 1, 300, -5, "x" * 70, "y" * 5000, 2**40, -(2**63))
    both("SADD", "i16", 1, 2, 3, -7)
    both("SADD", "i32", 1, 70000)
    both("SADD", "i64", 1, 2**40)
    both("ZADD", "z", 0.1, "a", 2, "b", 1.5, "c", "-inf", "d", "inf", "e", 0, "f", -0.0, "g")
    both("HSET", "h", "f", "v")
    both("SADD", "s1", "member")
    for k in ("l", "i16", "i32", "i64", "z", "h", "s1"):
        assert kb.dump(k) == reference.dump(k), k
    # A big list splits into quicklist nodes as Redis's RPUSH splits it.
    vals = ["v%05d" % i for i in range(5000)] + ["w" * 200] * 100
    for c in (kb, reference):
        for i in range(0, len(vals), 500):
            c.rpush("big", *vals[i:i + 500])
    assert kb.dump("big") == reference.dump("big")
    # A skiplist zset (ZSET_2, highest score first).
    for c in (kb, reference):
        c.zadd("bigz", {("m%d" % i): i / 3 for i in range(500)})
    assert kb.dump("bigz") == reference.dump("bigz")


def test_dump_missing_key_and_arity(kb, reference):
    for args in (("DUMP", "nokey"), ("DUMP",), ("DUMP", "a", "b"), ("RESTORE", "k", "0")):
        assert call(kb, *args) == call(reference, *args)


def test_restore_errors_match(kb, reference):
    for c in (kb, reference):
        c.set("foo", "bar")
    p = reference.dump("foo")
    bad_version = payload(p[:-10], version=11)
    cases = [
        ("RESTORE", "foo", 0, p),                        # BUSYKEY
        ("RESTORE", "foo", "abc", p),                    # BUSYKEY before the TTL check
        ("RESTORE", "new", "abc", p),
        ("RESTORE", "new", -1, p),
        ("RESTORE", "new", 0, p, "idletime", -1),
        ("RESTORE", "new", 0, p, "idletime", "x"),
        ("RESTORE", "new", 0, p, "freq", 256),
        ("RESTORE", "new", 0, p, "freq", -1),
        ("RESTORE", "new", 0, p, "freq", 1, "idletime", 5),
        ("RESTORE", "new", 0, p, "idletime", 5, "freq", 1),
        ("RESTORE", "new", 0, p, "idletime"),
        ("RESTORE", "new", 0, p, "bogus"),
        ("RESTORE", "new", 0, b""),
        ("RESTORE", "new", 0, b"..."),
        ("RESTORE", "new", 0, p[:-1]),
        ("RESTORE", "new", 0, p[:5]),
        ("RESTORE", "new", 0, bad_version),
        ("RESTORE", "new", 0, payload(b"\x00\x05ab")),    # string shorter than its length
        ("RESTORE", "new", 0, payload(b"\x07\x00")),      # module type
        ("RESTORE", "new", 0, payload(b"\x0f\x00")),      # stream
        ("RESTORE", "new", 0, payload(b"\x01\x00")),      # empty list
        ("RESTORE", "new", 0, payload(b"\x02\x02\x01a\x01a")),  # duplicate set members
        ("RESTORE", "new", 0, payload(b"\x04\x02\x01a\x01x\x01a\x01y")),  # duplicate fields
        ("RESTORE", "new", 0, payload(b"\x05\x01\x01a" + b"\x00\x00\x00\x00\x00\x00\xf8\x7f")),  # NaN
        ("RESTORE", "new", 0, payload(b"\x00\xc3\x05\x40\x00\x01ab")),  # LZF length lies
    ]
    for args in cases:
        assert call(kb, *args) == call(reference, *args), args
        assert content(kb, "new") == content(reference, "new"), args
        assert kb.get("foo") == reference.get("foo")
    assert kb.ping()


def test_restore_hostile_ttls(kb, reference):
    for c in (kb, reference):
        c.set("foo", "bar")
    p = reference.dump("foo")
    now = int(time.time() * 1000)
    cases = [
        ("DEL", "foo"), ("RESTORE", "foo", 9223372036854775807, p),          # wraps: expired
        ("SET", "foo", "x"), ("RESTORE", "foo", 9223372036854775807, p, "REPLACE"),
        ("RESTORE", "foo", 9223372036854775807, p, "ABSTTL"),
        ("DEL", "foo"), ("RESTORE", "foo", 1, p, "ABSTTL"),                  # in the past
        ("SET", "foo", "x"), ("RESTORE", "foo", now - 3000, p, "ABSTTL", "REPLACE"),
        ("RESTORE", "foo", -9223372036854775808, p, "REPLACE"),
        ("RESTORE", "foo", "9223372036854775808", p, "REPLACE"),
        ("RESTORE", "foo", 2569591501, p, "REPLACE"),
        ("RESTORE", "foo", 0, p, "REPLACE", "IDLETIME", 9223372036854775807),
    ]
    for args in cases:
        assert call(kb, *args) == call(reference, *args), args
        assert kb.exists("foo") == reference.exists("foo"), args
    assert kb.pttl("foo") == -1


def test_restore_ttl_and_absttl(kb, reference):
    kb.set("foo", "bar")
    p = kb.dump("foo")
    kb.delete("foo")
    assert kb.restore("foo", 5000, p) in (True, b"OK")
    assert 3000 <= kb.pttl("foo") <= 5000
    now = int(time.time() * 1000)
    assert kb.restore("foo", now + 3000, p, replace=True, absttl=True) in (True, b"OK")
    assert 2000 <= kb.pttl("foo") <= 3100
    assert kb.get("foo") == b"bar"


def test_restore_idletime_and_object(kb, reference):
    for c in (kb, reference):
        c.set("foo", "bar")
        p = c.dump("foo")
        c.delete("foo")
        c.restore("foo", 0, p, idletime=1000)
        # OBJECT is not an access; GET is.
        for cmd in (("OBJECT", "ENCODING", "foo"), ("OBJECT", "REFCOUNT", "foo"),
                    ("OBJECT", "FREQ", "foo")):
            call(c, *cmd)
        assert 1000 <= c.object("idletime", "foo") <= 1002
        c.get("foo")
        assert c.object("idletime", "foo") <= 1


def test_object_subcommands_match(kb, reference):
    for c in (kb, reference):
        c.set("n", 100)
        c.set("big", 100000)
        c.set("emb", "x" * 44)
        c.set("raw", "x" * 45)
        c.rpush("l", 1)
        c.sadd("si", 1, 2)
        c.sadd("sh", "a")
        c.hset("h", "f", "v")
        c.hset("hbig", "f", "v" * 65)
        c.zadd("z", {"a": 1})
        c.zadd("zbig", {"a" * 65: 1})
    cases = [("OBJECT", "HELP"), ("OBJECT", "help", "x"), ("OBJECT",), ("OBJECT", "foo"),
             ("OBJECT", "foo", "bar"), ("OBJECT", "encoding"), ("OBJECT", "encoding", "a", "b"),
             ("OBJECT", "freq", "n"), ("OBJECT", "freq", "nokey"), ("OBJECT", "idletime", "nokey"),
             ("OBJECT", "refcount", "n"), ("OBJECT", "refcount", "big"),
             ("OBJECT", "refcount", "l")]
    cases += [("OBJECT", "ENCODING", k) for k in
              ("n", "big", "emb", "raw", "l", "si", "sh", "h", "hbig", "z", "zbig", "nokey")]
    for args in cases:
        assert call(kb, *args) == call(reference, *args), args


def test_fuzzed_payloads_never_crash(kv, kb, reference):
    rnd = random.Random(7)
    seeds = []
    for kind, n, size in (("list", 5, 10), ("list", 600, 30), ("set", 20, 10), ("intset", 20, 5),
                          ("zset", 5, 10), ("zset", 200, 10), ("hash", 5, 10), ("hash", 600, 10),
                          ("string", 1, 300)):
        build(reference, "src", kind, n, size, n)
        seeds.append(reference.dump("src"))
        reference.delete("src")
    # Old encodings Redis 7 still reads: ziplist list (10), zipmap hash (9),
    # quicklist v1 (14), ziplist zset (12) and hash (13), plain list (1),
    # ZSET with string scores (3).
    entries = b"\x00\x01a" + b"\x03\x01b" + b"\x03\xfe\x07" + b"\x03\xf3"  # a, b, 7, 2
    zl = (10 + len(entries) + 1).to_bytes(4, "little") + (10 + len(entries) - 2).to_bytes(4, "little") \
        + (4).to_bytes(2, "little") + entries + b"\xff"
    zm = b"\x01\x01a\x01\x00b\xff"
    seeds += [payload(b"\x0a" + bytes([len(zl)]) + zl),
              payload(b"\x0e\x01" + bytes([len(zl)]) + zl),
              payload(b"\x0d" + bytes([len(zl)]) + zl),
              payload(b"\x0c" + bytes([len(zl)]) + zl),
              payload(b"\x01\x02\x01a\x01b"),
              payload(b"\x03\x01\x01a\x031.5"),
              payload(b"\x09" + bytes([len(zm)]) + zm)]
    for p in seeds[-7:]:
        kb.delete("x")
        assert call(kb, "RESTORE", "x", 0, p) == call(reference, "RESTORE", "x", 0, p)
        assert content(kb, "x") == content(reference, "x")
        reference.delete("x")
    for _ in range(3000):
        p = bytearray(rnd.choice(seeds)[:-10])
        op = rnd.random()
        if op < 0.4:
            for _ in range(rnd.randint(1, 4)):
                p[rnd.randrange(len(p))] = rnd.randrange(256)
        elif op < 0.7:
            del p[rnd.randrange(1, len(p)):]
        elif op < 0.85:
            i = rnd.randrange(len(p))
            p[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8)))
        else:
            p = bytearray(bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 40))))
        r = call(kb, "RESTORE", "fz", 0, payload(bytes(p)), "REPLACE")
        assert r is True or r == b"OK" or r == "ERR: Bad data format", r
    # Truncated payloads (checksum wrong) all fail the same way as Redis.
    p = seeds[1]
    for cut in range(0, len(p), max(1, len(p) // 50)):
        assert call(kb, "RESTORE", "t", 0, p[:cut]) == call(reference, "RESTORE", "t", 0, p[:cut])
    assert kb.ping()


def test_restore_propagates_to_aof(kv_factory, tmp_path):
    s = kv_factory("--appendonly", "yes")
    c = s.client()
    c.set("a", "1")
    p = c.dump("a")
    c.restore("b", 100000, p)
    c.restore("c", 0, p)
    c.execute_command("RESTORE", "a", 9223372036854775807, p, "REPLACE")  # expired: a DEL
    time.sleep(1.2)
    s.restart()
    c = s.client()
    assert c.get("b") == b"1" and c.get("c") == b"1" and c.exists("a") == 0
    assert 90000 < c.pttl("b") <= 100000


# ---- MIGRATE ----

def test_migrate_kv_to_redis_and_back(kv, kb, reference):
    rp = ref_port(reference)
    kb.rpush("list", "a", "b", "c")
    kb.set("s", "v")
    kb.expire("s", 100)
    assert kb.migrate("127.0.0.1", rp, "list", 0, 1000) == b"OK"
    assert kb.exists("list") == 0
    assert reference.lrange("list", 0, -1) == [b"a", b"b", b"c"]
    assert kb.execute_command("MIGRATE", "127.0.0.1", rp, "", 0, 1000, "KEYS", "nokey", "s") == b"OK"
    assert 95 <= reference.ttl("s") <= 100
    assert kb.info("stats")["migrate_cached_sockets"] == 1
    # Redis migrates into brisk-kv (db 3).
    reference.hset("h", mapping={"f%d" % i: "v" * i for i in range(10)})
    assert reference.migrate("127.0.0.1", kv.port, "h", 3, 1000) == b"OK"
    c3 = kv.client(db=3)
    assert sorted(c3.hgetall("h").items()) == sorted({(b"f%d" % i): b"v" * i for i in range(10)}.items())


def test_migrate_copy_replace_and_errors(kv, kb, reference):
    rp = ref_port(reference)
    kb.rpush("list", "a", "b")
    reference.set("list", "x")
    r1 = call(kb, "MIGRATE", "127.0.0.1", rp, "list", 0, 1000, "COPY")
    assert r1.startswith("ERR: Target instance replied with error: BUSYKEY")
    assert kb.execute_command("MIGRATE", "127.0.0.1", rp, "list", 0, 1000, "COPY", "REPLACE") == b"OK"
    assert kb.exists("list") == 1 and reference.lrange("list", 0, -1) == [b"a", b"b"]
    for args in (("MIGRATE", "127.0.0.1", rp, "nokey", 0, 1000),
                 ("MIGRATE", "127.0.0.1", rp, "x", 0, 1000, "KEYS", "a"),
                 ("MIGRATE", "127.0.0.1", rp, "list", "db", 1000),
                 ("MIGRATE", "127.0.0.1", rp, "list", 0, "t"),
                 ("MIGRATE", "127.0.0.1", rp, "list", 0, 1000, "bogus"),
                 ("MIGRATE", "127.0.0.1", rp, "list", 0, 1000, "AUTH"),
                 ("MIGRATE", "127.0.0.1", "1", "list", 0, 100)):
        assert call(kb, *args) == call(reference, *args), args
    assert call(kb, "MIGRATE", "127.0.0.1", 1, "list", 0, 100) == \
        "ERR: IOERR error or timeout writing to target instance"


def test_migrate_between_brisk_servers_with_auth(kv, kb, kv_factory):
    other = kv_factory("--requirepass", "foobar")
    oc = other.client(password="foobar")
    kb.lpush("list", "a", "b", "c", "d")
    assert kb.migrate("127.0.0.1", other.port, "list", 0, 5000, auth="foobar") == b"OK"
    assert oc.lrange("list", 0, -1) == [b"d", b"c", b"b", b"a"]
    kb.lpush("list", "a")
    oc.config_set("requirepass", "foobar2")
    r = call(kb, "MIGRATE", "127.0.0.1", other.port, "list", 0, 5000, "AUTH", "foobar")
    assert "WRONGPASS" in r
    # Several keys, two of them busy: only the acknowledged ones go.
    kb.flushall()
    kb.mset({k: k for k in "abcdefgh"})
    oc2 = other.client(password="foobar2")
    oc2.flushall()
    oc2.mset({"c": "_", "d": "_"})
    r = call(kb, "MIGRATE", "127.0.0.1", other.port, "", 0, 5000, "AUTH", "foobar2", "KEYS",
             *"abcdefgh")
    assert r.startswith("ERR: Target instance replied with error: BUSYKEY")
    assert kb.dbsize() == 2 and kb.exists("c", "d") == 2 and oc2.dbsize() == 8


def test_migrate_large_value(kv, kb, reference):
    for j in range(200):
        kb.rpush("key", *range(1, 11), *("item %d" % i for i in range(1, 11)))
    assert len(kb.dump("key")) > 400
    assert kb.migrate("127.0.0.1", ref_port(reference), "key", 9, 10000) == b"OK"
    c9 = redis.Redis(port=ref_port(reference), db=9)
    assert c9.llen("key") == 4000 and c9.ttl("key") == -1


# ---- SAVE / BGSAVE / dump.rdb ----

def _fill(c: redis.Redis):
    i = 0
    for kind in ("list", "set", "intset", "zset", "hash", "string"):
        for n, size in ((1, 5), (5, 30), (129, 65), (600, 100), (3000, 40)):
            build(c, "%s:%d:%d" % (kind, n, size), kind, n, size, i)
            i += 1
    c.set("ttl", "v", px=100000)
    c.execute_command("SELECT", 7)
    c.set("db7", "x")
    c.execute_command("SELECT", 0)


def _same_keyspace(a: redis.Redis, b: redis.Redis):
    for db in (0, 7):
        a.execute_command("SELECT", db)
        b.execute_command("SELECT", db)
        keys = sorted(a.keys("*"))
        assert keys == sorted(b.keys("*"))
        for k in keys:
            assert content(a, k) == content(b, k), k
            assert a.object("encoding", k) == b.object("encoding", k), k
            assert abs(a.pttl(k) - b.pttl(k)) < 5000, k
    for c in (a, b):
        c.execute_command("SELECT", 0)


def test_save_file_checked_and_loaded_by_redis(kv_factory, tmp_path):
    import shutil
    import subprocess
    s = kv_factory()
    c = s.client()
    _fill(c)
    assert c.execute_command("SAVE") in (True, b"OK")
    rdb = s.dir / "dump.rdb"
    if shutil.which("redis-check-rdb"):
        out = subprocess.run(["redis-check-rdb", str(rdb)], capture_output=True, text=True)
        assert "RDB looks OK" in out.stdout, out.stdout[-2000:]
    rdir = tmp_path / "redis"
    rdir.mkdir()
    shutil.copy(rdb, rdir / "dump.rdb")
    proc, rc = start_redis(rdir)
    try:
        _same_keyspace(c, rc)
        # And back: Redis's own dump.rdb loads into a fresh brisk-kv.
        assert rc.execute_command("SAVE") in (True, b"OK")
        kdir = tmp_path / "kv2"
        kdir.mkdir()
        shutil.copy(rdir / "dump.rdb", kdir / "dump.rdb")
        s2 = kv_factory(workdir=kdir)
        _same_keyspace(s2.client(), rc)
    finally:
        stop_redis(proc, rc)


def test_bgsave_and_restart(kv_factory):
    s = kv_factory()
    c = s.client()
    c.rpush("l", *range(100))
    c.hset("h", mapping={"a": "1", "b": "2"})
    assert c.bgsave() in (True, b"Background saving started")
    assert call(c, "BGSAVE", "x") == "ERR: syntax error"
    deadline = time.time() + 10
    while c.info("persistence")["rdb_bgsave_in_progress"] or \
            c.info("persistence")["rdb_changes_since_last_save"] != 0:
        assert time.time() < deadline
        time.sleep(0.05)
    assert c.info("persistence")["rdb_last_bgsave_status"] == "ok"
    assert c.lastsave()
    s.restart()
    c = s.client()
    assert c.lrange("l", 0, -1) == [str(i).encode() for i in range(100)]
    assert c.hgetall("h") == {b"a": b"1", b"b": b"2"}


def test_corrupt_rdb_refused_at_start(kv_factory, tmp_path):
    s = kv_factory()
    c = s.client()
    c.set("a", "b" * 100)
    c.execute_command("SAVE")
    s.stop()
    data = bytearray((s.dir / "dump.rdb").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (s.dir / "dump.rdb").write_bytes(bytes(data))
    s.expect_exit = True
    s.proc = None
    s2 = kv_factory(workdir=s.dir, start=False)
    s2.expect_exit = True
    s2.start(wait=False)
    assert s2.proc.wait(10) != 0


def test_shutdown_save_then_load(kv_factory):
    s = kv_factory()
    c = s.client()
    c.zadd("z", {"a": 1.5, "b": 2})
    try:
        c.execute_command("SHUTDOWN", "SAVE")
    except redis.ConnectionError:
        pass
    assert s.proc.wait(10) == 0
    assert (s.dir / "dump.rdb").exists()
    s.start()
    assert s.client().zrange("z", 0, -1, withscores=True) == [(b"a", 1.5), (b"b", 2.0)]


SUITE_TGZ = "/work/shared/redis-suite/redis-7.0.15-tests.tar.gz"


def _tcl_unescape(s: str) -> bytes:
    import re
    out = bytearray()
    i = 0
    while i < len(s):
        ch = s[i]
        if ch != "\\":
            out += ch.encode("latin1")
            i += 1
            continue
        i += 1
        c = s[i]
        if c == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", s[i + 1:])
            out.append(int(m.group(0), 16))
            i += 1 + len(m.group(0))
        elif c in "01234567":
            m = re.match(r"[0-7]{1,3}", s[i:])
            out.append(int(m.group(0), 8) & 0xFF)
            i += len(m.group(0))
        else:
            out += {"n": b"\n", "r": b"\r", "t": b"\t"}.get(c, c.encode("latin1"))
            i += 1
    return bytes(out)


def test_redis_corrupt_dump_payloads(kb, reference):
    """The payloads of Redis's integration/corrupt-dump.tcl (read from the suite
    tarball when present): brisk-kv accepts exactly those a sanitizing Redis
    accepts, and survives using what it accepted."""
    import os
    import re
    import tarfile
    if not os.path.exists(SUITE_TGZ):
        pytest.skip("no Redis test suite tarball")
    with tarfile.open(SUITE_TGZ) as t:
        src = t.extractfile("redis-7.0.15/tests/integration/corrupt-dump.tcl").read().decode("latin1")
    payloads = [_tcl_unescape(m.group(1))
                for m in re.finditer(r'restore \S+ 0 "((?:[^"\\]|\\.)*)"', src)]
    assert len(payloads) > 20
    reference.config_set("sanitize-dump-payload", "yes")
    for p in payloads:
        got = [call(c, "RESTORE", "key", 0, p, "REPLACE") for c in (kb, reference)]
        ok = [r in (True, b"OK") for r in got]
        assert ok[0] == ok[1], (got, p[:40])
        t = kb.type("key").decode()
        kb.dump("key")
        if t == "list":
            kb.lrange("key", 0, -1)
            kb.rpush("key", "x")
        elif t == "hash":
            kb.hgetall("key")
        elif t == "set":
            kb.smembers("key")
        elif t == "zset":
            kb.zrange("key", 0, -1, withscores=True)
    assert kb.ping()


def test_save_points_and_sigterm_snapshot(kv_factory):
    s = kv_factory("--save", "1 1")
    c = s.client()
    c.set("a", "1")
    deadline = time.time() + 10
    while not (s.dir / "dump.rdb").exists():
        assert time.time() < deadline
        time.sleep(0.1)
    c.set("b", "2")  # not yet saved: SIGTERM with save points snapshots it
    assert s.stop() == 0
    s.start()
    assert s.client().mget("a", "b") == [b"1", b"2"]


def test_migrate_hostile_numbers(kv, kb, reference):
    rp = ref_port(reference)
    for timeout in (9223372036854775807, -9223372036854775808, 0):
        kb.set("k", "v")
        assert kb.execute_command("MIGRATE", "127.0.0.1", rp, "k", 0, timeout, "REPLACE") == b"OK"
    # Both sides with a cached connection that last selected db 0 (a fresh
    # one starts at "no db", where a db of -1 sends no SELECT at all).
    reference.set("w", "v")
    assert reference.migrate("127.0.0.1", kv.port, "w", 0, 1000) == b"OK"
    for db in ("-1", "99999", "9223372036854775807"):
        kb.set("k", "v")
        r = call(kb, "MIGRATE", "127.0.0.1", rp, "k", db, 1000)
        reference.set("k", "v")
        assert r == call(reference, "MIGRATE", "127.0.0.1", kv.port, "k", db, 1000).replace(
            str(kv.port), str(rp)), db
    assert kb.ping()


def test_debug_reload_and_object(kv_factory):
    kb = kv_factory("--enable-debug-command", "yes").client()
    kb.rpush("l", "a", "b", "c")
    kb.set("s", "hello")
    kb.zadd("z", {"m": 1})
    assert kb.execute_command("DEBUG", "RELOAD") in (True, b"OK")
    assert kb.lrange("l", 0, -1) == [b"a", b"b", b"c"] and kb.get("s") == b"hello"
    kb.set("s", "changed")
    assert kb.execute_command("DEBUG", "RELOAD", "MERGE", "NOSAVE") in (True, b"OK")
    assert kb.get("s") == b"hello"  # the file's value wins
    assert call(kb, "DEBUG", "RELOAD", "bogus") == \
        "ERR: DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."
    for key, enc in ((b"l", "quicklist"), (b"s", "embstr"), (b"z", "listpack")):
        line = kb.execute_command("DEBUG", "OBJECT", key)
        line = line.decode() if isinstance(line, bytes) else line
        assert f"encoding:{enc} " in line
        assert f"serializedlength:{len(kb.dump(key)) - 11} " in line
    assert "ql_nodes:1 ql_avg_node:3.00 ql_listpack_max:-2" in \
        kb.execute_command("DEBUG", "OBJECT", "l").decode()
    assert call(kb, "DEBUG", "OBJECT", "nokey") == "ERR: no such key"
