"""Regression tests for defects found in review, side by side with a real
redis-server 7 where its behaviour is bounded (the same commands go to both
and the replies, errors included, must be equal)."""
from __future__ import annotations

import random
import subprocess
from collections import Counter

import pytest
import redis

from kvlib import KV_BIN

LLONG_MIN = "-9223372036854775808"
LLONG_MAX = "9223372036854775807"


def call(c, *args):
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return ("error", str(e))


def same(kvc, ref, *args):
    a, b = call(kvc, *args), call(ref, *args)
    assert a == b, f"{args}: brisk-kv {a!r} != redis {b!r}"
    return a


@pytest.fixture
def both(kv, reference):
    kvc = kv.client()
    reference.flushall()

    def run(*args):
        return same(kvc, reference, *args)

    run.kv = kvc
    run.ref = reference
    yield run
    kvc.close()


# ---- counts of the random-member commands ----

def test_random_member_counts_in_redis_range(both):
    both("HSET", "h", "a", "1")
    both("SADD", "s", "a")
    both("ZADD", "z", "1", "a")
    for cmd in (["HRANDFIELD", "h"], ["SRANDMEMBER", "s"], ["ZRANDMEMBER", "z"]):
        assert both(*cmd, LLONG_MIN)[0] == "error"
        assert both(*cmd, "notanumber")[0] == "error"
    for cmd in (["HRANDFIELD", "h"], ["ZRANDMEMBER", "z"]):
        opt = "WITHVALUES" if cmd[0] == "HRANDFIELD" else "WITHSCORES"
        for n in (LLONG_MIN, "-9223372036854770000", "-4611686018427387904", "4611686018427387904"):
            assert both(*cmd, n, opt)[0] == "error"
        assert both(*cmd, "-4611686018427387904", "BADOPT")[0] == "error"
        assert len(both(*cmd, "-3", opt)) == 6
    # the count is checked before the key, as Redis
    both("SET", "str", "x")
    for cmd in ("HRANDFIELD", "SRANDMEMBER", "ZRANDMEMBER"):
        both(cmd, "str", LLONG_MIN)
        both(cmd, "str", "-2")
        both(cmd, "missing", "-9223372036854775807")


def test_huge_negative_counts_are_refused_not_buffered(kv):
    """Redis grows its output without bound for these; brisk-kv refuses."""
    c = kv.client()
    c.hset("h", "a", "1")
    c.sadd("s", "a")
    c.zadd("z", {"a": 1})
    for args in (("HRANDFIELD", "h", "-9223372036854775807"),
                 ("HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES"),
                 ("SRANDMEMBER", "s", "-9223372036854775807"),
                 ("ZRANDMEMBER", "z", "-9223372036854775807"),
                 ("ZRANDMEMBER", "z", "-4611686018427387903", "WITHSCORES")):
        with pytest.raises(redis.ResponseError, match="value is out of range"):
            c.execute_command(*args)
    assert len(c.srandmember("s", -100000)) == 100000
    assert c.ping()


# ---- signed overflow in SCAN COUNT ----

def test_scan_count_llong_max(both):
    for i in range(20):
        both("SET", f"k{i}", "v")
    both("SADD", "s", *[f"m{i}" for i in range(200)])
    both("HSET", "h", *[x for i in range(200) for x in (f"f{i}", "v")])
    both("ZADD", "z", *[x for i in range(200) for x in (str(i), f"m{i}")])
    kvc = both.kv
    cur, keys = kvc.execute_command("SCAN", "18446744073709551615", "COUNT", LLONG_MAX)
    cur, keys = kvc.execute_command("SCAN", "0", "COUNT", LLONG_MAX)
    assert int(cur) == 0 and len(keys) == 23
    for cmd, n in (("SSCAN", 200), ("HSCAN", 200), ("ZSCAN", 200)):  # pairs parsed by redis-py
        key = cmd[0].lower()
        cur, items = kvc.execute_command(cmd, key, "0", "COUNT", LLONG_MAX)
        assert int(cur) == 0 and len(items) == n
        kvc.execute_command(cmd, key, "18446744073709551615", "COUNT", LLONG_MAX)
    both("SCAN", "0", "COUNT", "0")
    both("SCAN", "0", "COUNT", "-1")
    both("SSCAN", "s", "0", "COUNT", LLONG_MIN)
    assert kvc.ping()


# ---- commands Redis refuses inside MULTI ----

@pytest.mark.parametrize("cmd", [["SHUTDOWN"], ["SHUTDOWN", "NOSAVE"], ["SAVE"], ["SYNC"],
                                 ["PSYNC", "?", "-1"]])
def test_no_multi_commands_refused_in_transaction(both, cmd):
    both("MULTI")
    both("SET", "a", "1")
    both(*cmd)
    both("EXEC")
    both("GET", "a")
    assert both.kv.ping()


# ---- INCRBYFLOAT / HINCRBYFLOAT range and formatting ----

def test_incrbyfloat_huge_values_and_formatting(both):
    values = ["1e308", "1.5", "-1.5", "0.1", "1e-400", "1e-300", "inf", "-inf", "nan",
              "1e4000", "5e4931", "1.7976931348623157e308", "3.0e-10", "10.5", "-0", "0",
              "abc", " 1", "1 ", "0x10", ".5", "5.", "-.5e3", "1" * 40]
    rnd = random.Random(7)
    values += [repr(rnd.uniform(-1e6, 1e6)) for _ in range(40)]
    values += [f"{rnd.randint(1, 9)}e{rnd.randint(-320, 320)}" for _ in range(40)]
    for i, v in enumerate(values):
        for base in (None, "1.5", "1e308", "5e4931"):
            both("DEL", "k", "h")
            if base:
                both("SET", "k", base)
                both("HSET", "h", "f", base)
            both("INCRBYFLOAT", "k", v)
            both("GET", "k")
            both("HINCRBYFLOAT", "h", "f", v)
            both("HGET", "h", "f")
            both("EXISTS", "h")
    # twice 1e308 is still a long double: a 309-digit integer, read back
    both("SET", "k", "1e308")
    both("INCRBYFLOAT", "k", "1e308")
    both("INCRBYFLOAT", "k", "1")
    assert len(both("GET", "k")) > 300


# ---- the AOF loader and checker agree ----

def test_check_aof_refuses_what_the_loader_refuses(kv_factory, tmp_path):
    aof = tmp_path / "appendonly.aof"
    good = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"
    aof.write_bytes(good + b"*1\r\n$2\r\nX3\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n")
    kv = kv_factory("--appendonly", "yes", workdir=tmp_path, start=False)
    kv.expect_exit = True
    kv.start(wait=False)
    assert kv.proc.wait(10) != 0
    assert "Unknown command 'X3'" in kv.output() and f"offset {len(good)}" in kv.output()
    aof = tmp_path / "appendonlydir" / "appendonly.aof"  # moved in as the base, as Redis 7
    chk = subprocess.run([KV_BIN, "--check-aof", str(aof)], capture_output=True, text=True)
    assert chk.returncode == 1 and f"ok_up_to={len(good)}" in chk.stdout
    fix = subprocess.run([KV_BIN, "--check-aof", "--fix", str(aof)], capture_output=True, text=True)
    assert fix.returncode == 0 and aof.read_bytes() == good
    ok = subprocess.run([KV_BIN, "--check-aof", str(aof)], capture_output=True, text=True)
    assert ok.returncode == 0 and "is valid" in ok.stdout
    kv2 = kv_factory("--appendonly", "yes", workdir=tmp_path)
    assert kv2.client().get("a") == b"1"


@pytest.mark.parametrize("body", [
    b"*1\r\n$4\r\nEXEC\r\n",
    b"*1\r\n$5\r\nMULTI\r\n*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nEXEC\r\n",
    b"SET a 1\r\n",
])
def test_check_aof_and_loader_same_verdict(kv_factory, tmp_path, body):
    aof = tmp_path / "appendonly.aof"
    aof.write_bytes(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n" + body)
    chk = subprocess.run([KV_BIN, "--check-aof", str(aof)], capture_output=True, text=True)
    assert chk.returncode == 1 and "ok_up_to=27" in chk.stdout
    kv = kv_factory("--appendonly", "yes", workdir=tmp_path, start=False)
    kv.expect_exit = True
    kv.start(wait=False)
    assert kv.proc.wait(10) != 0


# ---- uniform random picks (the chi-square bound of Redis's own tests) ----

def chi_square(samples):
    counts = Counter(samples)
    p = len(samples) / len(counts)
    return sum((v - p) ** 2 / p for v in counts.values())


def test_random_picks_are_uniform(kv):
    c = kv.client()
    members = [f"m{i}" for i in range(10)]
    c.sadd("s", *members)
    c.hset("h", mapping={m: "v" for m in members})
    c.zadd("z", {m: i for i, m in enumerate(members)})
    # df = 9: 40 has probability 1e-5
    assert chi_square(c.srandmember("s", -1000)) < 40
    assert chi_square(c.hrandfield("h", -1000)) < 40
    assert chi_square(c.zrandmember("z", -1000)) < 40
    assert chi_square([c.srandmember("s") for _ in range(1000)]) < 40
    assert chi_square([c.hrandfield("h") for _ in range(1000)]) < 40
    for size in (8, 2):
        picks = []
        for _ in range(1000 // size):
            picks += c.srandmember("s", size)
        assert chi_square(picks) < 40
    popped = []
    for _ in range(500):
        c.delete("p")
        c.sadd("p", *members)
        popped += c.spop("p", 2)
    assert chi_square(popped) < 40
    c.flushall()
    c.mset({m: 1 for m in members})
    assert chi_square([c.randomkey() for _ in range(1000)]) < 40


# ---- WATCH: which writes invalidate ----

WATCH_CASES = [
    ([("SADD", "s", "a"), ("SADD", "d", "a")], ["d"], [("SMOVE", "s", "d", "a")]),
    ([("SADD", "s", "a"), ("SADD", "d", "a")], ["s"], [("SMOVE", "s", "d", "a")]),
    ([("SADD", "s", "a"), ("SADD", "d", "b")], ["d"], [("SMOVE", "s", "d", "a")]),
    ([("SADD", "s", "a")], ["s"], [("SMOVE", "s", "s", "a")]),
    ([], ["x"], [("FLUSHALL",)]),
    ([("SET", "x", "1")], ["x"], [("FLUSHALL",)]),
    ([], ["x"], [("FLUSHDB",)]),
    ([("SET", "x", "1")], ["x"], [("FLUSHDB",)]),
    ([("SET", "y", "1")], ["x"], [("FLUSHDB",)]),
    ([("SET", "x", "1")], ["x"], [("SWAPDB", "0", "1")]),
    ([], ["x"], [("SWAPDB", "0", "1")]),
    ([("SELECT", "1"), ("SET", "x", "1"), ("SELECT", "0")], ["x"], [("SWAPDB", "0", "1")]),
    ([], ["d"], [("SINTERSTORE", "d", "nokey", "nokey2")]),
    ([("SET", "d", "1")], ["d"], [("SINTERSTORE", "d", "nokey")]),
    ([], ["d"], [("ZUNIONSTORE", "d", "1", "nokey")]),
    ([("SET", "d", "1")], ["d"], [("ZINTERSTORE", "d", "1", "nokey")]),
    ([("SADD", "s", "a")], ["d"], [("SDIFFSTORE", "d", "s", "s")]),
    ([], ["d"], [("ZRANGESTORE", "d", "nokey", "0", "-1")]),
    ([("SET", "d", "1")], ["d"], [("ZRANGESTORE", "d", "nokey", "0", "-1")]),
]


@pytest.mark.parametrize("setup,watch,action", WATCH_CASES)
def test_watch_invalidation_as_redis(kv, reference, setup, watch, action):
    def scenario(client_factory):
        c = client_factory()
        c.flushall()
        for cmd in setup:
            c.execute_command(*cmd)
        other = client_factory()
        c.execute_command("WATCH", *watch)
        for cmd in action:
            other.execute_command(*cmd)
        c.execute_command("MULTI")
        c.execute_command("PING")
        return c.execute_command("EXEC")

    ref_kw = reference.connection_pool.connection_kwargs
    got = scenario(lambda: kv.client(single_connection_client=True))
    want = scenario(lambda: redis.Redis(host=ref_kw["host"], port=ref_kw["port"],
                                        single_connection_client=True))
    assert got == want


def test_few_distinct_picks_are_distinct_and_uniform(kv):
    """Counts up to a third of the size draw without copying the collection."""
    c = kv.client()
    members = [f"m{i}" for i in range(30)]
    c.sadd("s", *members)
    c.hset("h", mapping={m: "v" for m in members})
    c.zadd("z", {m: i for i, m in enumerate(members)})
    for cmd, key in (("SRANDMEMBER", "s"), ("HRANDFIELD", "h"), ("ZRANDMEMBER", "z")):
        picks = []
        for _ in range(600):
            got = c.execute_command(cmd, key, 5)
            assert len(got) == 5 and len(set(got)) == 5
            picks += got
        assert set(picks) <= {m.encode() for m in members}
        # df = 29: 73 has probability 1e-5
        assert chi_square(picks) < 73
    assert len(c.execute_command("ZRANDMEMBER", "z", 10, "WITHSCORES")) == 20
    assert len(c.execute_command("HRANDFIELD", "h", 10, "WITHVALUES")) == 20


def test_randomkey_uniform_after_mass_deletion(kv):
    """A sparse key table used to favour the keys after long empty runs."""
    c = kv.client()
    p = c.pipeline(transaction=False)
    for i in range(0, 50000, 5000):
        p.mset({f"k{j}": 1 for j in range(i, i + 5000)})
    p.execute()
    keep = {f"k{j}" for j in range(0, 50000, 5000)}
    p = c.pipeline(transaction=False)
    for i in range(0, 50000, 5000):
        p.delete(*[f"k{j}" for j in range(i, i + 5000) if f"k{j}" not in keep])
    p.execute()
    assert c.dbsize() == 10
    p = c.pipeline(transaction=False)
    for _ in range(1000):
        p.randomkey()
    picks = p.execute()
    assert set(picks) == {k.encode() for k in keep}
    assert chi_square(picks) < 40
