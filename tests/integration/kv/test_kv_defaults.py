"""Defaults as Redis 7.0.15 has them, side by side with a real redis-server:
the save points, the order of integer sets (Redis keeps them as sorted
intsets), enable-debug-command / enable-protected-configs /
enable-module-command (their default "no", their errors, "local"), the
command count, and LOLWUT."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import redis

from kvlib import KV_BIN, free_port, start_redis, stop_redis

def start_redis_own(tmp_path, *args):
    """A real redis-server with exactly these options (no --save '' added)."""
    d = Path(tempfile.mkdtemp(prefix="redis-", dir=tmp_path))
    return start_redis(d, *args, plain=False)


@pytest.fixture
def redis_defaults(tmp_path):
    """A real redis-server 7 with its own defaults (save points included)."""
    proc, c = start_redis_own(tmp_path)
    yield c
    stop_redis(proc, c)


def call(c, *cmd):
    try:
        return c.execute_command(*cmd)
    except redis.ResponseError as e:
        return ("error", str(e))


def same(a, b, *cmd):
    x, y = call(a, *cmd), call(b, *cmd)
    assert x == y, f"{cmd!r}: brisk {x!r} != redis {y!r}"
    return x


def plain_kv(kv_factory, tmp_path, *args):
    """brisk-kv with its own defaults: a config file first keeps the test
    harness from adding --save ''."""
    conf = tmp_path / f"plain-{free_port()}.conf"
    conf.write_text("")
    return kv_factory(str(conf), *args)


def test_save_points_default(kv_factory, tmp_path, redis_defaults):
    kv = plain_kv(kv_factory, tmp_path)
    kb = kv.client()
    assert same(kb, redis_defaults, "CONFIG", "GET", "save") == [b"save", b"3600 1 300 100 60 10000"]
    # a save directive replaces the default points, save "" clears them
    kv2 = kv_factory("--save", "10 1")
    assert kv2.client().config_get("save") == {"save": "10 1"}
    kv3 = kv_factory("--save", "")
    assert kv3.client().config_get("save") == {"save": ""}


def test_default_save_points_dump_at_shutdown(kv_factory, tmp_path):
    """With the default points (as Redis) a SHUTDOWN writes dump.rdb in --dir."""
    d = tmp_path / "data"
    d.mkdir()
    conf = tmp_path / "plain.conf"
    conf.write_text("")
    kv = kv_factory(str(conf), workdir=d)
    c = kv.client()
    c.set("k", "v")
    kv.stop()
    assert (d / "dump.rdb").exists()


INTSETS = [
    ["5", "3", "10", "1"],
    ["-7", "100000", "0", "-9223372036854775808", "9223372036854775807", "42", "65536", "-32769"],
    [str(i * 7919 % 1000) for i in range(300)],
]


def raw3(c, *cmd):
    """The reply of a RESP3 client with its type (set or list) kept."""
    return c.execute_command(*cmd, **{"NEVER_DECODE": True})


def test_intset_order(r, reference):
    kb = r.connection_pool.connection_kwargs
    b = redis.Redis(host=kb["host"], port=kb["port"], socket_timeout=10)
    for i, members in enumerate(INTSETS):
        key = f"s{i}"
        same(b, reference, "SADD", key, *members)
        same(b, reference, "OBJECT", "ENCODING", key)
        same(b, reference, "SMEMBERS", key)
        same(b, reference, "SSCAN", key, "0")
        same(b, reference, "SSCAN", key, "0", "COUNT", "3")
        same(b, reference, "SSCAN", key, "0", "MATCH", "*1*")
        same(b, reference, "SRANDMEMBER", key, "1000")
        same(b, reference, "SRANDMEMBER", key, str(len(set(members))))
        same(b, reference, "SORT", key)
        same(b, reference, "DUMP", key)
        same(b, reference, "SUNION", key, "nokey")
        same(b, reference, "SDIFF", key, "nokey")
    same(b, reference, "SADD", "t", "3", "1", "2", "99")
    same(b, reference, "SINTER", "s0", "t")
    same(b, reference, "SUNION", "s0", "t")
    same(b, reference, "SDIFF", "t", "s0")
    # RESP3: SMEMBERS is a set, SRANDMEMBER with a count an array
    rk = reference.connection_pool.connection_kwargs
    b3 = redis.Redis(host=kb["host"], port=kb["port"], protocol=3)
    r3 = redis.Redis(host=rk["host"], port=rk["port"], protocol=3)
    assert raw3(b3, "SMEMBERS", "s1") == raw3(r3, "SMEMBERS", "s1")
    assert raw3(b3, "SRANDMEMBER", "s1", "100") == raw3(r3, "SRANDMEMBER", "s1", "100")
    b3.close()
    r3.close()
    # past set-max-intset-entries, or with a non-integer, it is a hashtable
    same(b, reference, "CONFIG", "SET", "set-max-intset-entries", "4")
    same(b, reference, "SADD", "u", "9", "8", "7", "6")
    same(b, reference, "OBJECT", "ENCODING", "u")
    same(b, reference, "SMEMBERS", "u")
    same(b, reference, "DUMP", "u")
    b.close()


def test_intset_order_big_and_mixed(r):
    r.sadd("big", *range(600, 0, -1))  # past 512: no order promised
    assert sorted(map(int, r.smembers("big"))) == list(range(1, 601))
    r.sadd("mixed", "3", "2", "x")
    assert r.object("encoding", "mixed") == "hashtable"
    assert set(r.smembers("mixed")) == {"3", "2", "x"}
    cur, got = 0, []
    while True:
        cur, part = r.sscan("big", cur, count=50)
        got += part
        if cur == 0:
            break
    assert sorted(map(int, got)) == list(range(1, 601))


DEBUG_REFUSED = ('DEBUG command not allowed. If the enable-debug-command option is set to "local", '
                 'you can run it from a local connection, otherwise you need to set this option '
                 'in the configuration file, and then restart the server.')


def test_protected_actions_default(kv_factory, tmp_path, redis_defaults):
    kb = plain_kv(kv_factory, tmp_path).client()
    ref = redis_defaults
    same(kb, ref, "PING")  # connected (redis-py's CLIENT SETINFO fails on 7.0)
    same(kb, ref, "CONFIG", "RESETSTAT")
    assert same(kb, ref, "DEBUG", "SLEEP", "0") == ("error", DEBUG_REFUSED)
    same(kb, ref, "DEBUG")  # arity comes first
    for opt in ("enable-debug-command", "enable-protected-configs", "enable-module-command"):
        assert same(kb, ref, "CONFIG", "GET", opt) == [opt.encode(), b"no"]
        same(kb, ref, "CONFIG", "SET", opt, "yes")
    same(kb, ref, "CONFIG", "SET", "dir", "/tmp")
    same(kb, ref, "CONFIG", "SET", "dbfilename", "x.rdb")
    same(kb, ref, "CONFIG", "SET", "hz", "11", "dir", "/tmp")
    same(kb, ref, "CONFIG", "GET", "hz")
    same(kb, ref, "MODULE", "LOAD", "/nonexistent.so")
    same(kb, ref, "MODULE", "LIST")
    # in a transaction the refusal aborts EXEC, as a rejected command does
    for c in (kb, ref):
        c.execute_command("MULTI")
    same(kb, ref, "DEBUG", "SLEEP", "0")
    same(kb, ref, "EXEC")
    same(kb, ref, "INFO", "errorstats")


@pytest.mark.parametrize("value", ["yes", "local"])
def test_protected_actions_enabled(kv_factory, tmp_path, value):
    _, ref = start_redis_own(tmp_path, "--save", "", "--enable-debug-command", value,
                         "--enable-protected-configs", value, "--enable-module-command", value)
    kb = kv_factory("--enable-debug-command", value, "--enable-protected-configs", value,
                    "--enable-module-command", value).client()
    try:
        assert same(kb, ref, "DEBUG", "SLEEP", "0") == b"OK"
        same(kb, ref, "CONFIG", "GET", "enable-debug-command")
        d = tmp_path / "newdir"
        d.mkdir(exist_ok=True)
        assert same(kb, ref, "CONFIG", "SET", "dir", str(d), "dbfilename", "n.rdb") == b"OK"
        same(kb, ref, "CONFIG", "GET", "dbfilename")
        same(kb, ref, "MODULE", "UNLOAD", "nosuchmodule")
    finally:
        ref.shutdown(nosave=True)


def test_protected_action_bad_value(kv_factory, tmp_path):
    kv = kv_factory("--enable-debug-command", "maybe", start=False)
    kv.expect_exit = True
    kv.start(wait=False)
    assert kv.proc.wait(10) != 0
    assert "argument(s) must be one of the following: no, yes, local" in kv.output()


def test_command_count_and_list(r, reference):
    assert r.execute_command("COMMAND COUNT") == reference.execute_command("COMMAND COUNT")
    mine = sorted(r.execute_command("COMMAND LIST"))
    theirs = sorted(x.decode() for x in reference.execute_command("COMMAND LIST"))
    assert mine == theirs


def test_lolwut(r, reference):
    version = r.info("server")["redis_version"]
    assert r.execute_command("LOLWUT") == f"Redis ver. {version}\n"
    assert r.execute_command("LOLWUT", "VERSION", "7") == f"Redis ver. {version}\n"
    assert r.execute_command("LOLWUT", "bogus") == f"Redis ver. {version}\n"
    art = r.execute_command("LOLWUT", "VERSION", "5", "20", "3", "2")
    lines = art.split("\n")
    assert lines[-1] == "" and lines[-3] == ""
    assert lines[-2] == f"Georg Nees - schotter, plotter on paper, 1968. Redis ver. {version}"
    assert all(len(line) == 20 for line in lines[:-3])
    assert all(0x2800 <= ord(ch) <= 0x28FF for line in lines[:-3] for ch in line)
    sky = r.execute_command("LOLWUT", "VERSION", "6", "10", "4")
    assert sky.endswith(f"Redis ver. {version}\n") and sky.count("\033[0m") == 40
    for cmd in (("LOLWUT", "VERSION", "x"), ("LOLWUT", "VERSION", "5", "x"),
                ("LOLWUT", "VERSION", "6", "10", "1.5")):
        theirs = call(reference, *cmd)
        assert call(r, *cmd) == theirs, cmd
    # hostile sizes: clamped and bounded (a few MB at most)
    big = r.execute_command("LOLWUT", "VERSION", "5", "1000", "1", "200")
    assert len(big.encode()) < 8 << 20
    r.execute_command("LOLWUT", "VERSION", "5", "-9223372036854775808", "9223372036854775807", "0")
    r.execute_command("LOLWUT", "VERSION", "6", "9223372036854775807", "-1")
    assert r.ping()
    assert KV_BIN  # the binary under test
