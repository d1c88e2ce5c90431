"""Every command group of brisk-kv through redis-py: keys, strings, hashes,
lists, sets and sorted sets, with Redis's replies and error strings."""
from __future__ import annotations

import time

import pytest
import redis


def err(fn, *a, **kw) -> str:
    with pytest.raises(redis.ResponseError) as e:
        fn(*a, **kw)
    return str(e.value)


def test_strings(r):
    assert r.set("k", "v") is True
    assert r.get("k") == "v"
    assert r.set("k", "w", nx=True) is None
    assert r.set("nx", "1", nx=True) is True
    assert r.set("absent", "1", xx=True) is None
    assert r.set("k", "new", get=True) == "v"
    assert r.setnx("k", "x") is False
    assert r.getset("k", "gs") == "new"
    assert r.getdel("k") == "gs" and r.get("k") is None
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "c") == ["1", "2", None]
    assert r.msetnx({"a": "9", "z": "9"}) is False and r.get("z") is None
    assert r.incr("n") == 1 and r.incrby("n", 10) == 11
    assert r.decr("n") == 10 and r.decrby("n", 4) == 6
    assert r.incrbyfloat("f", "10.5") == 10.5
    assert r.incrbyfloat("f", "0.1") == pytest.approx(10.6)
    assert r.get("f") == "10.6"
    assert r.append("s", "Hello") == 5 and r.append("s", " World") == 11
    assert r.strlen("s") == 11 and r.strlen("missing") == 0
    assert r.getrange("s", 0, 4) == "Hello" and r.getrange("s", -5, -1) == "World"
    assert r.getrange("s", 20, 30) == ""
    assert r.setrange("s", 6, "Redis") == 11 and r.get("s") == "Hello Redis"
    assert r.setrange("pad", 3, "x") == 4 and r.get("pad") == "\x00\x00\x00x"
    r.set("big", "9223372036854775807")
    assert err(r.incr, "big") == "increment or decrement would overflow"
    assert err(r.setrange, "s", -1, "x") == "offset is out of range"
    assert err(r.setrange, "s", 512 * 1024 * 1024, "x") == \
        "string exceeds maximum allowed size (proto-max-bulk-len)"
    assert err(r.incrbyfloat, "s", "1") == "value is not a valid float"
    r.set("x", "1")
    assert r.object("encoding", "x") == "int"
    r.set("x", "a" * 10)
    assert r.object("encoding", "x") == "embstr"
    r.set("x", "a" * 100)
    assert r.object("encoding", "x") == "raw"
    # binary safe values, big values
    blob = bytes(range(256)) * 4000
    rb = redis.Redis(connection_pool=r.connection_pool.__class__(
        host="127.0.0.1", port=r.connection_pool.connection_kwargs["port"]))
    rb.set(b"bin\x00key", blob)
    assert rb.get(b"bin\x00key") == blob
    rb.close()


def test_set_expire_options(r):
    assert r.set("e", "v", ex=100) is True
    assert 99 <= r.ttl("e") <= 100
    assert r.set("e", "v", px=5000) and 4000 < r.pttl("e") <= 5000
    assert r.set("e", "v2", keepttl=True) and r.pttl("e") > 0
    assert r.set("e", "v3") and r.ttl("e") == -1
    at = int(time.time()) + 1000
    assert r.set("e", "v", exat=at) and r.expiretime("e") == at
    assert r.set("e", "v", pxat=at * 1000) and r.pexpiretime("e") == at * 1000
    assert err(r.set, "e", "v", ex=0) == "invalid expire time in 'set' command"
    assert err(r.execute_command, "SET", "e", "v", "EX", "x") == \
        "value is not an integer or out of range"
    assert err(r.execute_command, "SET", "e", "v", "NX", "XX") == "syntax error"
    assert err(r.execute_command, "SET", "e", "v", "EX", "1", "PX", "1") == "syntax error"
    assert r.setex("se", 50, "v") and 49 <= r.ttl("se") <= 50
    assert r.psetex("pse", 50000, "v") and r.pttl("pse") > 49000
    assert r.getex("se", persist=True) == "v" and r.ttl("se") == -1
    assert r.getex("se", ex=30) == "v" and 29 <= r.ttl("se") <= 30


def test_keys_and_expire(r):
    r.mset({"user:1": "a", "user:2": "b", "other": "c"})
    assert sorted(r.keys("user:*")) == ["user:1", "user:2"]
    assert r.exists("user:1", "user:2", "nope", "user:1") == 3
    assert r.type("user:1") == "string" and r.type("nope") == "none"
    assert r.delete("user:1", "nope") == 1
    assert r.unlink("user:2") == 1
    assert r.ttl("other") == -1 and r.ttl("nope") == -2
    assert r.expire("other", 100) is True and 99 <= r.ttl("other") <= 100
    assert r.expire("other", 50, gt=True) is False
    assert r.expire("other", 200, gt=True) is True
    assert r.expire("other", 300, nx=True) is False
    assert r.expire("other", 10, lt=True) is True and r.ttl("other") <= 10
    assert r.expire("nope", 10) is False
    assert r.pexpire("other", 100000) and r.pttl("other") > 99000
    assert r.persist("other") is True and r.persist("other") is False
    assert err(r.execute_command, "EXPIRE", "other", "10", "NX", "XX") == \
        "NX and XX, GT or LT options at the same time are not compatible"
    assert err(r.execute_command, "EXPIRE", "other", "10", "GT", "LT") == \
        "GT and LT options at the same time are not compatible"
    assert err(r.execute_command, "EXPIRE", "other", "10", "FOO") == "Unsupported option FOO"
    assert r.expireat("other", int(time.time()) - 1) is True
    assert r.exists("other") == 0
    # rename / renamenx / copy / randomkey
    r.set("src", "1")
    assert r.rename("src", "dst") is True and r.get("dst") == "1"
    assert err(r.rename, "nope", "x") == "no such key"
    r.set("other2", "2")
    assert r.renamenx("dst", "other2") is False
    r.expire("dst", 100)
    assert r.renamenx("dst", "dst2") is True and r.ttl("dst2") > 0
    assert r.copy("dst2", "cp") is True and r.get("cp") == "1"
    assert r.copy("dst2", "cp") is False
    assert r.copy("dst2", "cp", replace=True) is True
    assert r.randomkey() in {"other2", "dst2", "cp"}
    # SCAN covers all keys
    for i in range(300):
        r.set(f"scan:{i}", i)
    seen = set(r.scan_iter(match="scan:*", count=20))
    assert seen == {f"scan:{i}" for i in range(300)}
    r.rpush("alist", "x")
    assert set(r.scan_iter(_type="list")) == {"alist"}
    assert err(r.execute_command, "SCAN", "abc") == "invalid cursor"


def test_hashes(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "a", "10") == 0
    assert r.hget("h", "a") == "10" and r.hget("h", "zz") is None
    assert r.hmget("h", "a", "b", "c") == ["10", "2", None]
    assert r.hgetall("h") == {"a": "10", "b": "2"}
    assert sorted(r.hkeys("h")) == ["a", "b"] and sorted(r.hvals("h")) == ["10", "2"]
    assert r.hlen("h") == 2 and r.hexists("h", "a") and not r.hexists("h", "q")
    assert r.hincrby("h", "a", 5) == 15
    assert r.hincrbyfloat("h", "f", 1.5) == 1.5
    assert r.hsetnx("h", "a", "x") == 0 and r.hsetnx("h", "n", "x") == 1
    assert r.hstrlen("h", "n") == 1
    assert err(r.hincrby, "h", "n", 1) == "hash value is not an integer"
    assert r.hdel("h", "a", "nope") == 1
    assert err(r.execute_command, "HSET", "h", "a") == "wrong number of arguments for 'hset' command"
    for i in range(200):
        r.hset("big", f"f{i}", i)
    assert dict(r.hscan_iter("big")) == {f"f{i}": str(i) for i in range(200)}
    assert r.object("encoding", "big") == "listpack"  # 200 <= 512, redis-server's default
    assert r.hrandfield("big") in {f"f{i}" for i in range(200)}
    assert len(set(r.hrandfield("big", 5))) == 5
    r.hdel("h", *r.hkeys("h"))
    assert r.exists("h") == 0
    r.set("str", "x")
    assert err(r.hget, "str", "a").startswith("WRONGTYPE")


def test_lists(r):
    assert r.rpush("l", "a", "b", "c") == 3 and r.lpush("l", "z") == 4
    assert r.lrange("l", 0, -1) == ["z", "a", "b", "c"]
    assert r.lrange("l", -2, 100) == ["b", "c"] and r.lrange("l", 5, 10) == []
    assert r.llen("l") == 4 and r.lindex("l", 1) == "a" and r.lindex("l", -1) == "c"
    assert r.lindex("l", 10) is None
    assert r.lset("l", 0, "Z") is True
    assert err(r.lset, "l", 10, "x") == "index out of range"
    assert err(r.lset, "nolist", 0, "x") == "no such key"
    assert r.lpop("l") == "Z" and r.rpop("l") == "c"
    assert r.rpush("l", "a", "b", "a", "a") == 6
    assert r.lrem("l", 2, "a") == 2 and r.lrange("l", 0, -1) == ["b", "b", "a", "a"]
    assert r.lrem("l", -1, "a") == 1 and r.lrange("l", 0, -1) == ["b", "b", "a"]
    assert r.linsert("l", "before", "a", "x") == 4 and r.lrange("l", 0, -1) == ["b", "b", "x", "a"]
    assert r.lpos("l", "b") == 0 and r.lpos("l", "b", rank=2) == 1
    assert r.ltrim("l", 1, 2) is True and r.lrange("l", 0, -1) == ["b", "x"]
    assert r.lpop("l", 5) == ["b", "x"] and r.exists("l") == 0
    assert r.lpushx("l", "a") == 0 and r.rpop("nothing") is None
    r.rpush("src", "1", "2")
    assert r.rpoplpush("src", "dst") == "2" and r.lmove("src", "dst", "LEFT", "RIGHT") == "1"
    assert r.lrange("dst", 0, -1) == ["2", "1"] and r.exists("src") == 0
    for i in range(1000):
        r.rpush("long", i)
    assert r.lrange("long", 0, 599)[-1] == "599" and r.llen("long") == 1000
    assert err(r.lpop, "long", -1) == "value is out of range, must be positive"


def test_sets(r):
    assert r.sadd("s1", "a", "b", "c") == 3 and r.sadd("s1", "a") == 0
    r.sadd("s2", "b", "c", "d")
    assert r.smembers("s1") == {"a", "b", "c"}
    assert r.sismember("s1", "a") and not r.sismember("s1", "z")
    assert r.smismember("s1", ["a", "z"]) == [1, 0]
    assert r.scard("s1") == 3 and r.scard("nope") == 0
    assert r.sinter("s1", "s2") == {"b", "c"}
    assert r.sunion("s1", "s2") == {"a", "b", "c", "d"}
    assert r.sdiff("s1", "s2") == {"a"}
    assert r.sinterstore("d", "s1", "s2") == 2 and r.smembers("d") == {"b", "c"}
    assert r.sunionstore("d", "s1", "s2") == 4
    assert r.sdiffstore("d", "s1", "s2") == 1
    assert r.smove("s1", "s2", "a") is True and r.sismember("s2", "a")
    assert r.srem("s1", "b", "zz") == 1
    assert r.srandmember("s2") in {"a", "b", "c", "d"}
    assert len(r.srandmember("s2", 3)) == 3
    popped = r.spop("s2", 2)
    assert len(popped) == 2 and r.scard("s2") == 2
    for i in range(100):
        r.sadd("ints", i)
    assert r.object("encoding", "ints") == "intset"
    assert set(r.sscan_iter("ints")) == {str(i) for i in range(100)}
    assert r.execute_command("SINTERCARD", 2, "s1", "s2") >= 0


def test_sorted_sets(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd("z", {"a": 5}, nx=True) == 0 and r.zscore("z", "a") == 1
    assert r.zadd("z", {"a": 5, "d": 4}, xx=True, ch=True) == 1 and r.zscore("d", "d") is None
    assert r.zadd("z", {"a": 0.5}, gt=True, ch=True) == 0
    assert r.zadd("z", {"a": 0.5}, lt=True, ch=True) == 1
    assert r.zadd("z", {"a": 2}, incr=True) == 2.5
    assert r.zincrby("z", 1, "a") == 3.5
    assert r.zcard("z") == 3
    assert r.zrange("z", 0, -1, withscores=True) == [("b", 2.0), ("c", 3.0), ("a", 3.5)]
    assert r.zrange("z", 0, -1, desc=True) == ["a", "c", "b"]
    assert r.zrevrange("z", 0, 0) == ["a"]
    assert r.zrangebyscore("z", "(2", "+inf") == ["c", "a"]
    assert r.zrevrangebyscore("z", "+inf", "-inf", start=0, num=2) == ["a", "c"]
    assert r.zrange("z", "(2", "3.5", byscore=True, offset=1, num=1) == ["a"]
    assert r.zcount("z", 2, 3) == 2 and r.zcount("z", "(2", "(3") == 0
    assert r.zrank("z", "b") == 0 and r.zrevrank("z", "b") == 2 and r.zrank("z", "q") is None
    assert r.zmscore("z", ["a", "q"]) == [3.5, None]
    assert r.zrem("z", "b", "q") == 1
    r.zadd("lex", {m: 0 for m in "abcdefg"})
    assert r.zrangebylex("lex", "[b", "(e") == ["b", "c", "d"]
    assert r.zrevrangebylex("lex", "+", "[f") == ["g", "f"]
    assert r.zlexcount("lex", "-", "+") == 7
    assert r.zremrangebylex("lex", "[a", "[b") == 2
    assert r.zremrangebyrank("lex", 0, 0) == 1
    r.zadd("sc", {"x": 1, "y": 2, "z": 3})
    assert r.zremrangebyscore("sc", 2, 3) == 2
    assert r.zpopmin("lex") == [("d", 0.0)]
    assert r.zpopmax("lex", 2) == [("g", 0.0), ("f", 0.0)]
    assert r.zadd("inf", {"lo": "-inf", "hi": "inf"}) == 2
    assert r.zrange("inf", 0, -1, withscores=True) == [("lo", float("-inf")), ("hi", float("inf"))]
    assert err(r.zadd, "z", {"a": "nan"}) == "value is not a valid float"
    assert err(r.execute_command, "ZADD", "z", "NX", "XX", "1", "a") == \
        "XX and NX options at the same time are not compatible"
    assert err(r.execute_command, "ZADD", "z", "GT", "LT", "1", "a") == \
        "GT, LT, and/or NX options at the same time are not compatible"
    assert err(r.execute_command, "ZADD", "z", "INCR", "1", "a", "2", "b") == \
        "INCR option supports a single increment-element pair"
    assert err(r.execute_command, "ZADD", "z", "1", "a", "2") == "syntax error"
    assert err(r.execute_command, "ZADD", "z", "1") == "wrong number of arguments for 'zadd' command"
    assert err(r.zrangebyscore, "z", "x", "1") == "min or max is not a float"
    assert err(r.execute_command, "ZRANGE", "z", "0", "1", "LIMIT", "0", "1") == \
        "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    r.zadd("u1", {"a": 1, "b": 2})
    r.zadd("u2", {"b": 3, "c": 4})
    assert r.zunionstore("out", ["u1", "u2"]) == 3 and r.zscore("out", "b") == 5
    assert r.zinterstore("out", {"u1": 2, "u2": 1}, aggregate="MAX") == 1
    assert r.zscore("out", "b") == 4
    assert r.zrangestore("dst", "u2", 0, -1) == 2
    for i in range(500):
        r.zadd("bigz", {f"m{i}": i})
    assert r.object("encoding", "bigz") == "skiplist"
    assert dict(r.zscan_iter("bigz")) == {f"m{i}": float(i) for i in range(500)}
    assert r.zrange("bigz", 100, 102) == ["m100", "m101", "m102"]
    assert r.zrandmember("bigz") is not None and len(r.zrandmember("bigz", 5)) == 5
