"""ZUNION/ZINTER/ZDIFF/ZDIFFSTORE/ZINTERCARD, the STORE forms, and LCS,
side by side with a real redis-server 7."""
from __future__ import annotations

import random

import pytest
import redis


def call(c, *args):
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return ("error", str(e))


@pytest.fixture
def both(kv, reference):
    kvc = kv.client()
    reference.flushall()

    def run(*args):
        a, b = call(kvc, *args), call(reference, *args)
        assert a == b, f"{args}: brisk-kv {a!r} != redis {b!r}"
        return a

    run.kv = kvc
    yield run
    kvc.close()


ZOPS = [
    "ZUNION 2 z1 z2", "ZUNION 2 z1 z2 WITHSCORES", "ZUNION 3 z1 z2 s1 WITHSCORES WEIGHTS 1 2 3",
    "ZINTER 3 z1 z2 s1 WITHSCORES", "ZINTER 2 z1 z2 WITHSCORES AGGREGATE MAX",
    "ZINTER 2 z1 z2 WITHSCORES AGGREGATE MIN WEIGHTS 2 inf", "ZDIFF 2 z1 z2 WITHSCORES",
    "ZDIFF 3 z1 z2 s1", "ZDIFF 1 nokey", "ZDIFFSTORE d 2 z1 z2", "ZRANGE d 0 -1 WITHSCORES",
    "ZDIFFSTORE d 2 z1 z1", "EXISTS d", "ZINTERCARD 2 z1 z2", "ZINTERCARD 2 z1 z2 LIMIT 1",
    "ZINTERCARD 2 z1 z2 LIMIT 0", "ZINTERCARD 2 z1 str", "ZUNION 2 z1 str WEIGHTS x",
    "ZUNION 0 z1", "ZUNION -1 z1", "ZUNION x z1", "ZUNION 9223372036854775807 z1", "ZUNION 2 z1",
    "ZUNION 1 z1 WEIGHTS x", "ZUNION 1 z1 AGGREGATE foo", "ZUNION 1 z1 WITHSCORES WITHSCORES",
    "ZDIFF 1 z1 WEIGHTS 2", "ZINTERCARD 0 z1", "ZINTERCARD 1 z1 LIMIT -1",
    "ZINTERCARD 1 z1 LIMIT 9223372036854775808", "ZINTERCARD 1 z1 WITHSCORES",
    "ZUNIONSTORE d 1 z1 WITHSCORES", "ZUNIONSTORE d 1 z1 WEIGHTS 1 2", "ZDIFFSTORE d 0 z1",
    "ZUNIONSTORE z1 2 z1 z2", "ZRANGE z1 0 -1 WITHSCORES", "ZINTERSTORE out 2 z2 s1 WEIGHTS 2 3",
    "ZRANGE out 0 -1 WITHSCORES", "ZUNION 2 zi zi WEIGHTS 0 1 WITHSCORES",
    "ZUNION 2 zi zi WEIGHTS -1 1 WITHSCORES", "ZINTERSTORE empty 2 z1 nokey", "EXISTS empty",
]


def test_zset_algebra_as_redis(both):
    both("ZADD", "z1", "1", "a", "2", "b", "3", "c")
    both("ZADD", "z2", "1", "b", "2", "c", "3", "d")
    both("ZADD", "zi", "1", "a", "inf", "b", "-inf", "c")
    both("SADD", "s1", "a", "c", "e")
    both("SET", "str", "x")
    for line in ZOPS:
        both(*line.split())


def test_zset_algebra_random(both):
    rnd = random.Random(3)
    for k in range(4):
        args = []
        for i in range(rnd.randint(0, 60)):
            args += [str(rnd.choice([rnd.randint(-5, 5), rnd.uniform(-10, 10)])), f"m{rnd.randint(0, 80)}"]
        if args:
            both("ZADD", f"k{k}", *args)
    for _ in range(60):
        n = rnd.randint(1, 4)
        keys = [f"k{rnd.randint(0, 4)}" for _ in range(n)]
        op = rnd.choice(["ZUNION", "ZINTER", "ZDIFF"])
        extra = ["WITHSCORES"]
        if op != "ZDIFF":
            extra += ["WEIGHTS", *[str(rnd.choice([1, 2, -1, 0.5])) for _ in keys]]
            extra += ["AGGREGATE", rnd.choice(["SUM", "MIN", "MAX"])]
        both(op, n, *keys, *extra)
        both("ZINTERCARD", n, *keys)


def test_lcs_as_redis(both):
    both("MSET", "a", "ohmytext", "b", "mynewtext",
         "r1", "GGCTAAGGCTAGTCTAACAAAGAAAAGGATCGACTAGTCGATCGACTACG",
         "r2", "AGTCGATCGGTCAGTACTGACTAGGGTAGGCCAGTCTAGTCTAGTCGACTAC")
    both("ZADD", "z", "1", "a")
    for line in ["LCS a b", "LCS a b LEN", "LCS a b IDX", "LCS a b IDX WITHMATCHLEN",
                 "LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN", "LCS a b IDX MINMATCHLEN -1",
                 "LCS a nokey IDX", "LCS a nokey", "LCS nokey nokey2 LEN", "LCS a z", "LCS z a",
                 "LCS a b IDX LEN", "LCS a b MINMATCHLEN", "LCS a b MINMATCHLEN x", "LCS a b FOO",
                 "LCS r1 r2", "LCS r1 r2 IDX WITHMATCHLEN", "LCS r1 r2 IDX MINMATCHLEN 3",
                 "LCS r2 r1 IDX", "LCS a a IDX"]:
        both(*line.split())
    rnd = random.Random(5)
    for _ in range(30):
        x = "".join(rnd.choice("ab") for _ in range(rnd.randint(0, 40)))
        y = "".join(rnd.choice("abc") for _ in range(rnd.randint(0, 40)))
        both("MSET", "x", x, "y", y)
        both("LCS", "x", "y", "IDX", "WITHMATCHLEN")
        both("LCS", "x", "y")


def test_lcs_table_is_bounded(kv):
    c = kv.client()
    c.set("x", "a" * 20000)
    c.set("y", "b" * 20000)
    with pytest.raises(redis.ResponseError, match="Insufficient memory"):
        c.execute_command("LCS", "x", "y")
    c.set("x", "ab" * 1000)
    assert c.execute_command("LCS", "x", "x", "LEN") == 2000
    assert c.ping()
