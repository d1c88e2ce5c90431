"""OBJECT ENCODING of brisk-kv against a real redis-server 7.0 after the
commands that create or change a value: each list of commands runs on both
servers and every reply must agree."""
from __future__ import annotations

import redis

from kvlib import on_both, run_both


def _enc(key):
    return ("OBJECT", "ENCODING", key)


def _script(text):
    """One command a line, words split on blanks (no quoting needed here)."""
    return [tuple(line.split()) for line in text.strip().splitlines() if line.strip()]


INCRBYFLOAT = _script("""
INCRBYFLOAT a 3
OBJECT ENCODING a
SET b 10
INCRBYFLOAT b 1
OBJECT ENCODING b
INCRBYFLOAT b 0.5
OBJECT ENCODING b
INCRBYFLOAT b -0.5
OBJECT ENCODING b
INCRBYFLOAT c 1e25
OBJECT ENCODING c
INCRBYFLOAT d 1e50
OBJECT ENCODING d
SET e 7 EX 1000
INCRBYFLOAT e 1
OBJECT ENCODING e
TTL e
INCR b
OBJECT ENCODING b
INCRBYFLOAT f 5
APPEND f 0
OBJECT ENCODING f
INCRBYFLOAT g 6
COPY g g2
OBJECT ENCODING g2
RENAME g g3
OBJECT ENCODING g3
GETEX g3 EX 100
OBJECT ENCODING g3
MOVE g3 1
SELECT 1
OBJECT ENCODING g3
SELECT 0
INCRBYFLOAT h 7
SET h 7
OBJECT ENCODING h
INCRBYFLOAT i 8
GETSET i 8
OBJECT ENCODING i
INCRBYFLOAT j 9
EXPIRE j 100
OBJECT ENCODING j
PERSIST j
OBJECT ENCODING j
INCRBYFLOAT k 10
DEBUG RELOAD
OBJECT ENCODING k
INCRBYFLOAT l 11
LPUSH l x
INCRBYFLOAT m 12
SETRANGE m 0 1
OBJECT ENCODING m
""") + [
    # past SLAB_MAX the entry is on the heap: the flag survives there too
    ("SET", "n", "1" + "0" * 1999), ("INCRBYFLOAT", "n", "1"), _enc("n"), ("STRLEN", "n"),
    ("APPEND", "n", "5"), _enc("n"), ("INCRBYFLOAT", "o", "1e308"), _enc("o"),
    ("SET", "o", "1"), _enc("o"), ("INCRBYFLOAT", "p", "1e4000"), _enc("p"),
]


def test_incrbyfloat_result_is_embstr(kv_factory, tmp_path):
    got, want = run_both(kv_factory, tmp_path, INCRBYFLOAT)
    assert got == want
    assert want[1] == "embstr" and want.count("embstr") >= 8


ZSET_STICKY = _script("""
CONFIG SET zset-max-listpack-entries 4
CONFIG SET zset-max-listpack-value 10
ZADD f 1 a 2 b 3 c 4 d 5 e
OBJECT ENCODING f
ZREM f a b c
OBJECT ENCODING f
ZADD g 1 a 2 b 3 c 4 d 5 e
ZPOPMIN g 3
OBJECT ENCODING g
ZADD h 1 a 2 b 3 c 4 d 5 e
ZREMRANGEBYSCORE h 1 3
OBJECT ENCODING h
ZADD i 1 a 2 b 3 c 4 d 5 e
ZREMRANGEBYLEX i - [c
OBJECT ENCODING i
ZADD j 1 a 2 b 3 c 4 d 5 e
ZREMRANGEBYRANK j 0 2
OBJECT ENCODING j
ZADD k 1 a 2 b 3 c 4 d 5 e
ZMPOP 1 k MIN COUNT 3
OBJECT ENCODING k
COPY k k2
OBJECT ENCODING k2
RENAME k2 k3
OBJECT ENCODING k3
ZINCRBY k3 1 d
OBJECT ENCODING k3
ZUNIONSTORE k3 1 k3
OBJECT ENCODING k3
ZADD l 1 a 1 abcdefghijkl
ZREM l abcdefghijkl
OBJECT ENCODING l
ZINCRBY m 1 abcdefghijkl
ZREM m abcdefghijkl
ZADD m 1 a
OBJECT ENCODING m
GEOADD geo 0 0 a 1 1 b 2 2 c 3 3 d 4 4 e
ZREM geo a b c
OBJECT ENCODING geo
ZADD n 1 a 2 b 3 c 4 d 5 e
ZREM n a b c
ZRANGESTORE n2 n 0 -1
OBJECT ENCODING n2
ZUNIONSTORE n3 1 n
OBJECT ENCODING n3
ZINTERSTORE n4 2 n n
OBJECT ENCODING n4
ZDIFFSTORE n5 1 n
OBJECT ENCODING n5
GEORADIUS geo 0 0 1000 km STORE n6
OBJECT ENCODING n6
DEBUG RELOAD
OBJECT ENCODING f
OBJECT ENCODING geo
ZADD o 1 a 2 b 3 c
CONFIG SET zset-max-listpack-entries 2
OBJECT ENCODING o
ZADD o 5 a
ZINCRBY o 1 b
OBJECT ENCODING o
ZADD o 1 x
OBJECT ENCODING o
CONFIG SET zset-max-listpack-entries 4
CONFIG SET zset-max-listpack-value 100
ZADD p 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
CONFIG SET zset-max-listpack-value 10
OBJECT ENCODING p
DEBUG RELOAD
OBJECT ENCODING p
""")


def test_zset_stays_skiplist_when_members_go(kv_factory, tmp_path):
    got, want = run_both(kv_factory, tmp_path, ZSET_STICKY)
    assert got == want
    assert want.count("skiplist") >= 10


def test_shrunk_zset_dumps_as_skiplist(kv_factory, tmp_path):
    def dump_and_restore(c, port):
        c.config_set("zset-max-listpack-entries", 4)
        c.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
        c.zrem("z", "a", "b", "c")
        c.incrbyfloat("f", 3)
        r = redis.Redis(port=port)  # DUMP payloads are bytes
        dumped = r.dump("z"), r.dump("f")
        r.restore("z2", 0, dumped[0])
        r.restore("f2", 0, dumped[1])
        out = [dumped, c.object("encoding", "z2"), c.object("encoding", "f2")]
        r.close()
        return out
    got, want = on_both(kv_factory, tmp_path, dump_and_restore)
    assert got == want
    assert want[1:] == ["listpack", "int"]


def _debug_object_shape(reply):
    """DEBUG OBJECT without the address and the LRU fields."""
    if not isinstance(reply, str):
        return reply
    return " ".join(w for w in reply.split()
                    if not w.startswith(("at:", "lru:", "lru_seconds_idle:")) and w != "Value")


REFCOUNT = _script("""
SET a 5
OBJECT REFCOUNT a
DEBUG OBJECT a
SET b 12
APPEND b 3
OBJECT REFCOUNT b
DEBUG OBJECT b
INCRBYFLOAT c 3
OBJECT REFCOUNT c
DEBUG OBJECT c
SET d 10000
DEBUG OBJECT d
INCR e
DEBUG OBJECT e
APPEND f 12
DEBUG OBJECT f
CONFIG SET list-max-listpack-size 4
CONFIG SET list-compress-depth 2
RPUSH l a b c d e f g h i j k l m n o p q r s t u v w x y z
DEBUG OBJECT l
""")


def test_debug_object_refcount_and_list_compression(kv_factory, tmp_path):
    got, want = run_both(kv_factory, tmp_path, REFCOUNT)
    got, want = [_debug_object_shape(x) for x in got], [_debug_object_shape(x) for x in want]
    assert got == want
    assert want[1] == 2147483647 and "refcount:2147483647" in want[2]
    assert "ql_compressed:1" in want[-1]
