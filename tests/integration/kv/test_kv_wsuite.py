"""What Redis 7.0.15's suite checks in its server-starting mode (needs:debug,
needs:save, external:skip tests), side by side with a real redis-server:
shard subscribers in CLIENT LIST and ACL revocation, DEBUG RELOAD's options,
DEBUG LOADAOF."""
from __future__ import annotations

import socket
import time

import pytest
import redis

from kvlib import both as _both, call as _call, on_both, start_redis, stop_redis

LIB = "#!lua name=test\nredis.register_function('test', function() return 1 end)"
LIB2 = "#!lua name=t2\nredis.register_function('t2', function() return 2 end)"


def _subscriber(port: int, command: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"AUTH psuser pspass\r\nCLIENT SETNAME deathrow\r\n" + command + b"\r\n")
    got = b""
    while got.count(b"\r\n") < 5:  # +OK, +OK, then the 3-element confirmation
        got += s.recv(4096)
    return s


def _deathrow(c):
    return [x for x in c.client_list() if x["name"] == "deathrow"]


@pytest.mark.parametrize("command,rule", [(b"SSUBSCRIBE foo:1", "&foo:1"),
                                          (b"SUBSCRIBE foo:1", "&foo:1"),
                                          (b"PSUBSCRIBE bar:*", "&bar:*")])
def test_revoked_channel_kills_subscriber(kv_factory, tmp_path, command, rule):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        for c, port in ((r, kv.port), (ref, ref.connection_pool.connection_kwargs["port"])):
            c.execute_command("ACL", "SETUSER", "psuser", "on", ">pspass", "+@all",
                              "resetchannels", rule)
            s = _subscriber(port, command)
            try:
                row = _deathrow(c)
                assert len(row) == 1
                counts = (row[0]["flags"], row[0]["sub"], row[0]["psub"], row[0]["ssub"])
                if c is r:
                    kv_counts = counts
                else:
                    assert kv_counts == counts
                c.execute_command("ACL", "SETUSER", "psuser", "resetchannels")
                deadline = time.time() + 5
                while _deathrow(c) and time.time() < deadline:
                    time.sleep(0.02)
                assert _deathrow(c) == []
            finally:
                s.close()
    finally:
        stop_redis(proc, ref)


def test_client_list_counts_shard_channels(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        seen = []
        for c in (r, ref):
            p = c.pubsub()
            p.execute_command("SSUBSCRIBE", "a", "b")
            p.execute_command("SUBSCRIBE", "c")
            time.sleep(0.1)
            row = [x for x in c.client_list(_type="pubsub")]
            seen.append([(x["flags"], x["sub"], x["psub"], x["ssub"]) for x in row])
            p.close()
        assert seen[0] == seen[1] == [("P", "1", "0", "2")]
    finally:
        stop_redis(proc, ref)


def test_debug_reload_options(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        out = []
        for c in (r, ref):
            got = [_call(c, "FUNCTION", "LOAD", LIB)]
            # NOFLUSH: the file's library is already there: the load fails
            got.append(_call(c, "DEBUG", "RELOAD", "NOFLUSH"))
            got.append(_call(c, "FUNCTION", "LIST"))
            # NOFLUSH MERGE: the file's library replaces it
            got.append(_call(c, "DEBUG", "RELOAD", "NOFLUSH", "MERGE"))
            got.append(_call(c, "FCALL", "test", "0"))
            # MERGE alone still empties first: a key made after the save goes
            got.append(_call(c, "SET", "saved", "1"))
            got.append(_call(c, "SAVE"))
            got.append(_call(c, "SET", "later", "1"))
            got.append(_call(c, "DEBUG", "RELOAD", "NOSAVE", "MERGE"))
            got.append(sorted(c.keys("*")))
            # a plain reload keeps every library (emptied, then loaded)
            got.append(_call(c, "FUNCTION", "LOAD", LIB2))
            got.append(_call(c, "DEBUG", "RELOAD"))
            got.append(sorted(x[1] for x in c.execute_command("FUNCTION", "LIST")))
            got.append(_call(c, "DEBUG", "RELOAD", "BAD"))
            out.append(got)
        assert out[0] == out[1]
        assert out[0][1] == "ERR: Error trying to load the RDB dump"
    finally:
        stop_redis(proc, ref)


def test_debug_loadaof(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path, "--appendonly", "yes")
    try:
        out = []
        for c in (r, ref):
            got = [_call(c, "FUNCTION", "LOAD", LIB)]
            c.set("a", "1")
            c.rpush("l", *range(50))
            c.hset("h", mapping={"f": "v", "g": "w"})
            c.pexpire("a", 100000)
            digest = _call(c, "DEBUG", "DIGEST")
            got.append(_call(c, "DEBUG", "LOADAOF"))
            got.append(_call(c, "DEBUG", "DIGEST") == digest)
            got.append(_call(c, "FCALL", "test", "0"))
            got.append(c.pttl("a") > 90000)
            got.append(_call(c, "DEBUG", "LOADAOF", "extra"))
            out.append(got)
        # (further arguments are ignored)
        assert out[0] == out[1] == ["test", "OK", True, 1, True, "OK"]
    finally:
        stop_redis(proc, ref)


def test_lfu_policies(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        out = []
        for c in (r, ref):
            got = [_call(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"),
                   _call(c, "CONFIG", "GET", "maxmemory-policy")]
            c.set("foo", "bar")
            got.append(_call(c, "OBJECT", "FREQ", "foo"))  # a new key: 5, looking is no access
            got.append(_call(c, "OBJECT", "FREQ", "foo"))
            got.append(_call(c, "OBJECT", "IDLETIME", "foo"))
            c.get("foo")  # at 5 the counter grows for sure
            got.append(_call(c, "OBJECT", "FREQ", "foo"))
            c.set("foo", "baz")  # an overwrite keeps the counter (its lookup is an access)
            got.append(_call(c, "OBJECT", "FREQ", "foo") >= 6)
            dump = c.dump("foo")
            c.delete("foo")
            got.append(_call(c, "RESTORE", "foo", "0", dump, "FREQ", "100"))
            got.append(_call(c, "OBJECT", "FREQ", "foo"))
            got.append(_call(c, "RESTORE", "foo", "0", dump, "REPLACE", "IDLETIME", "1000"))
            got.append(_call(c, "OBJECT", "FREQ", "foo"))  # IDLETIME is no counter: 5
            got.append(_call(c, "RESTORE", "foo", "0", dump, "REPLACE", "FREQ", "256"))
            c.set("n", "5")
            got.append(_call(c, "OBJECT", "REFCOUNT", "n"))
            c.config_set("maxmemory", "100mb")
            c.set("n2", "6")
            got.append(_call(c, "OBJECT", "REFCOUNT", "n2"))  # no shared integers with LFU
            c.config_set("maxmemory", "0")
            got.append(_call(c, "CONFIG", "SET", "maxmemory-policy", "volatile-lfu"))
            got.append(_call(c, "CONFIG", "GET", "maxmemory-policy"))
            got.append(_call(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru"))
            got.append(_call(c, "OBJECT", "FREQ", "n"))
            got.append(_call(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfux"))
            out.append(got)
        assert out[0] == out[1]
        assert out[0][2] == 5 and out[0][5] == 6 and out[0][8] == 100
    finally:
        stop_redis(proc, ref)


@pytest.mark.parametrize("policy", ["allkeys-lfu", "volatile-lfu"])
def test_lfu_eviction_keeps_hot_keys(kv_factory, tmp_path, policy):
    kv = kv_factory("--maxmemory-policy", policy, workdir=tmp_path)
    r = kv.client(decode_responses=True)
    r.config_set("lfu-decay-time", "0")  # no decay while the test runs
    r.config_set("lfu-log-factor", "0")  # every access counts
    for i in range(20):
        r.set(f"hot:{i}", "x" * 1000, ex=10000)
        for _ in range(40):
            r.get(f"hot:{i}")
    assert min(r.object("freq", f"hot:{i}") for i in range(20)) == 45
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", str(used + 2_000_000))
    for i in range(6000):
        r.set(f"cold:{i}", "y" * 1000, ex=10000)
    assert int(r.info("stats")["evicted_keys"]) > 0
    assert sum(r.exists(f"hot:{i}") for i in range(20)) >= 18


def test_function_writes_refused_on_read_only_replica(kv_factory, tmp_path):
    master = kv_factory("--repl-diskless-sync-delay", "0", workdir=tmp_path / "m")
    replica = kv_factory(workdir=tmp_path / "r")
    (tmp_path / "rm").mkdir()
    (tmp_path / "rr").mkdir()
    pm, rm = start_redis(tmp_path / "rm", "--repl-diskless-sync-delay", "0",
                         decode_responses=True)
    pr, rr = start_redis(tmp_path / "rr", decode_responses=True)
    try:
        out = []
        for m, mport, rep in ((master.client(decode_responses=True), master.port,
                               replica.client(decode_responses=True)),
                              (rm, rm.connection_pool.connection_kwargs["port"], rr)):
            m.execute_command("FUNCTION", "LOAD", LIB)
            rep.execute_command("REPLICAOF", "127.0.0.1", str(mport))
            deadline = time.time() + 10
            while rep.info("replication").get("master_link_status") != "up":
                assert time.time() < deadline
                time.sleep(0.05)
            got = [_call(rep, "FUNCTION", "LOAD", LIB2), _call(rep, "FUNCTION", "DELETE", "test"),
                   _call(rep, "FUNCTION", "FLUSH"), _call(rep, "FUNCTION", "RESTORE", "x"),
                   _call(rep, "FUNCTION", "LIST", "LIBRARYNAME", "nope")]
            rep.execute_command("REPLICAOF", "NO", "ONE")
            out.append(got)
        assert out[0][:4] == out[1][:4] == ["ERR: You can't write against a read only replica."] * 4
        assert out[0][4:] == out[1][4:]
    finally:
        stop_redis(pm, rm)
        stop_redis(pr, rr)


def _watch_cases(c):
    """Redis 7.0's WATCH of keys that expire: (EXEC's reply) per case."""
    c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    out = []
    # expired after WATCH, not deleted yet: EXEC fails
    c.set("k", "1", px=100)
    c.execute_command("WATCH", "k")
    time.sleep(0.15)
    out.append(c.execute_command("MULTI") and None)
    c.execute_command("INCR", "k")
    out.append(c.execute_command("EXEC"))
    # already expired when WATCHed: neither its expiry nor its lazy deletion count
    for delete in (False, True):
        c.set("x", "foo", px=1)
        time.sleep(0.01)
        c.execute_command("WATCH", "x")
        if delete:
            out.append(c.exists("x"))
        c.execute_command("MULTI")
        c.execute_command("PING")
        out.append(c.execute_command("EXEC"))
    # already expired, then set again: a change
    c.set("y", "foo", px=1)
    time.sleep(0.01)
    c.execute_command("WATCH", "y")
    c.set("y", "bar")
    c.execute_command("MULTI")
    c.execute_command("PING")
    out.append(c.execute_command("EXEC"))
    c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    return out


def test_watch_and_expiry(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        # (one connection each: WATCH state is per connection)
        a = redis.Redis(port=kv.port, decode_responses=True, single_connection_client=True)
        b = redis.Redis(port=ref.connection_pool.connection_kwargs["port"],
                        decode_responses=True, single_connection_client=True)
        got = _watch_cases(a)
        assert got == _watch_cases(b)
        assert got == [None, None, ["PONG"], 0, ["PONG"], None]
    finally:
        stop_redis(proc, ref)


PROTOCOL_TYPES = ["string", "integer", "double", "bignum", "null", "array", "set", "map",
                  "attrib", "push", "verbatim", "true", "false", "bogus"]


def _raw_replies(port, proto, commands):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"HELLO %d\r\n" % proto)
    time.sleep(0.1)
    s.recv(65536)
    out = []
    for cmd in commands:
        s.sendall(cmd + b"\r\n")
        time.sleep(0.03)
        out.append(s.recv(65536))
    s.close()
    return out


@pytest.mark.parametrize("proto", [2, 3])
def test_debug_protocol(kv_factory, tmp_path, proto):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        cmds = [b"DEBUG PROTOCOL " + t.encode() for t in PROTOCOL_TYPES] + [b"DEBUG PROTOCOL"]
        got = _raw_replies(kv.port, proto, cmds)
        want = _raw_replies(ref.connection_pool.connection_kwargs["port"], proto, cmds)
        assert got == want
    finally:
        stop_redis(proc, ref)


def test_debug_suite_subcommands(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        out = []
        for c in (r, ref):
            got = [_call(c, "DEBUG", "QUICKLIST-PACKED-THRESHOLD", v)
                   for v in ("1b", "0", "4094mb", "4095mb", "4gb", "5gb", "abc", "-1",
                             "99999999999999999999999")]
            got.append(_call(c, "DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"))
            got.append(_call(c, "EVAL", "return redis.call('client','id') > 0", "0"))
            got.append(_call(c, "DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"))
            got.append(_call(c, "EVAL", "return redis.call('client','id')", "0").split(" script:")[0])
            got.append(_call(c, "DEBUG", "PAUSE-CRON", "1"))
            got.append(_call(c, "DEBUG", "PAUSE-CRON", "0"))
            got.append(_call(c, "DEBUG", "HTSTATS-KEY", "nokey"))
            c.rpush("l", "a")
            got.append(_call(c, "DEBUG", "HTSTATS-KEY", "l"))
            c.sadd("s", "a")
            got.append(_call(c, "DEBUG", "HTSTATS-KEY", "s").startswith(
                "Hash table 0 stats (main hash table):\n table size: 4\n number of elements: 1\n"))
            got.append(_call(c, "DEBUG", "HTSTATS", "99"))
            got.append(_call(c, "DEBUG", "HTSTATS", "x"))
            got.append(_call(c, "DEBUG", "HTSTATS", "0").startswith("[Dictionary HT]\n"))
            for args in (("PEAK-RESET-TIME", "100"), ("PEAK-RESET-TIME", "never"),
                         ("PEAK-RESET-TIME", "reset"), ("RESIZING", "0"), ("RESIZING", "1"),
                         ("FOO", "1")):
                got.append(_call(c, "DEBUG", "REPLYBUFFER", *args))
            got.append(_call(c, "DEBUG", "NOSUCH"))
            got.append(_call(c, "DEBUG", "SLEEP"))
            got.append(_call(c, "DEBUG", "HELP")[0])
            got.append(_call(c, "SHUTDOWN", "ABORT"))
            out.append(got)
        assert out[0] == out[1]
    finally:
        stop_redis(proc, ref)


def test_pause_cron_holds_sigterm_until_shutdown_abort(kv_factory, tmp_path):
    kv = kv_factory("--enable-debug-command", "yes", workdir=tmp_path)
    r = kv.client(decode_responses=True)
    assert r.execute_command("DEBUG", "PAUSE-CRON", "1") == "OK"
    kv.proc.send_signal(15)
    time.sleep(0.3)
    assert r.ping()
    assert r.execute_command("SHUTDOWN", "ABORT") is True  # (redis-py: +OK)
    assert r.execute_command("DEBUG", "PAUSE-CRON", "0") == "OK"
    time.sleep(0.3)
    assert r.ping()
    assert "Shutdown manually aborted" in kv.output()
    with pytest.raises(redis.ResponseError, match="No shutdown in progress"):
        r.execute_command("SHUTDOWN", "ABORT")


def test_slowlog_redacts_credentials(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        out = []
        for c in (r, ref):
            port = c.connection_pool.connection_kwargs["port"]
            c.config_set("slowlog-log-slower-than", 0)
            c.slowlog_reset()
            _call(c, "ACL", "SETUSER", "slowlog test user", "+get", "+set")
            c.config_set("masterauth", "")
            _call(c, "ACL", "GETUSER", "slowlog test user")
            _call(c, "ACL", "DELUSER", "slowlog test user")
            _call(c, "MIGRATE", "127.0.0.1", str(port), "key", "9", "5000")
            _call(c, "MIGRATE", "127.0.0.1", str(port), "key", "9", "5000", "AUTH", "user")
            _call(c, "MIGRATE", "127.0.0.1", str(port), "key", "9", "5000", "AUTH2", "u", "p")
            _call(c, "MIGRATE", "127.0.0.1", str(port), "key", "9", "5000", "KEYS")
            c.config_set("slowlog-log-slower-than", -1)
            out.append([e["command"].replace(str(port).encode(), b"P")
                        if isinstance(e["command"], bytes) else e["command"].replace(str(port), "P")
                        for e in c.slowlog_get(20)])
        assert out[0] == out[1]
        assert b"ACL SETUSER (redacted) (redacted) (redacted)" in out[0]
    finally:
        stop_redis(proc, ref)


class _ReplStream:
    """A SYNC connection's command stream (Redis's attach_to_replication_stream)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.f = self.s.makefile("rb")
        self.s.sendall(b"SYNC\r\n")
        while True:
            line = self.f.readline()
            if line.strip():
                break
        assert line.startswith(b"$"), line
        self.f.read(int(line[1:]))

    def command(self):
        line = self.f.readline()
        while line in (b"\n", b"\r\n"):
            line = self.f.readline()
        assert line.startswith(b"*"), line
        args = []
        for _ in range(int(line[1:])):
            n = int(self.f.readline()[1:])
            args.append(self.f.read(n + 2)[:-2].decode())
        return [a.lower() if i == 0 else a for i, a in enumerate(args)]

    def close(self):
        self.s.close()


def _multi_stream(c, port):
    c.config_set("repl-ping-replica-period", 3600)
    st = _ReplStream(port)
    try:
        with c.pipeline(transaction=True) as p:
            p.set("foo", "bar")
            p.get("foo")
            p.set("foo2", "bar2")
            p.execute()
        with c.pipeline(transaction=False) as p:
            p.execute_command("MULTI")
            p.execute_command("SELECT", "1")
            p.set("a", "1")
            p.execute_command("SELECT", "2")
            p.set("b", "2")
            p.execute_command("EXEC")
            p.execute_command("SELECT", "0")
            p.execute()
        c.set("after", "1")
        return [st.command() for _ in range(11)]
    finally:
        st.close()


def test_multi_propagates_select_before_multi(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        got = _multi_stream(r, kv.port)
        want = _multi_stream(ref, ref.connection_pool.connection_kwargs["port"])
        assert got == want
        assert got[:2] == [["select", "0"], ["multi"]]
    finally:
        stop_redis(proc, ref)


def _getdel_stream(c, port):
    c.config_set("repl-ping-replica-period", 3600)
    st = _ReplStream(port)
    try:
        c.set("foo", "bar")
        c.getdel("foo")
        c.getdel("nokey")
        c.set("after", "1")
        return [st.command() for _ in range(4)]
    finally:
        st.close()


def test_getdel_propagates_as_del(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        got = _getdel_stream(r, kv.port)
        assert got == _getdel_stream(ref, ref.connection_pool.connection_kwargs["port"])
        assert got[2] == ["del", "foo"]
    finally:
        stop_redis(proc, ref)


def test_swapdb_fails_xreadgroup_whose_stream_moved(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        out = []
        for c in (r, ref):
            port = c.connection_pool.connection_kwargs["port"]
            c9 = redis.Redis(port=port, db=9)
            for other in ("none", "list"):
                c.execute_command("SELECT", "4")
                c.flushdb()
                if other == "list":
                    c.lpush("mystream", "e1")
                c.execute_command("SELECT", "0")
                c9.delete("mystream")
                c9.xadd("mystream", {"f": "v"}, id="666")
                c9.xgroup_create("mystream", "mygroup", "$")
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(b"SELECT 9\r\nXREADGROUP GROUP mygroup Alice BLOCK 0 STREAMS mystream >\r\n")
                assert s.recv(100) == b"+OK\r\n"
                time.sleep(0.1)
                c.execute_command("SWAPDB", "4", "9")
                out.append(s.recv(1000))
                s.close()
                c.execute_command("SWAPDB", "4", "9")
            c9.close()
        assert out[:2] == out[2:] == [b"-UNBLOCKED the stream key no longer exists\r\n"] * 2
    finally:
        stop_redis(proc, ref)


import subprocess  # noqa: E402

from kvlib import KV_BIN, REDIS_SERVER, free_port  # noqa: E402

CLI_ERRORS = [
    ["--port"], ["--port", "6380", "--loglevel"], ["--port", "6379", "6380"],
    ["--port", "--loglevel", "verbose"], ["--port", "--bla", "--loglevel", "verbose"],
    ["--logfile", "--my--log--file", "--loglevel", "--bla"], ["--shutdown-on-sigint"],
    ["--shutdown-on-sigint", "now force", "--shutdown-on-sigterm"],
    ["--replicaof", "127.0.0.1", "abc"], ["--replicaof", "--127.0.0.1", "abc"],
    ["--replicaof", "--127.0.0.1", "--abc"], ["--port", 'a"b\\c'],
]


def _fatal(binary, args, tmp_path):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=10, cwd=tmp_path)
    assert p.returncode != 0
    lines = (p.stdout + p.stderr).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(">>> "))
    return lines[at:at + 2]


@pytest.mark.parametrize("args", CLI_ERRORS, ids=[" ".join(a) for a in CLI_ERRORS])
def test_command_line_errors_as_redis(tmp_path, args):
    if not REDIS_SERVER:
        pytest.skip("redis-server is not installed")
    assert _fatal(KV_BIN, args, tmp_path) == _fatal(REDIS_SERVER, args, tmp_path)


CLI_OK = [
    (["loglevel", "verbose", "--maxmemory '700mb'", "--maxmemory-policy 'volatile-lru'"],
     {"loglevel": "verbose", "maxmemory": "734003200", "maxmemory-policy": "volatile-lru"}),
    (["--proc-title-template", "--my--title--template", "--loglevel", "verbose"],
     {"proc-title-template": "--my--title--template", "loglevel": "verbose"}),
    (["--proc-title-template --my--title--template", "--loglevel verbose"],
     {"proc-title-template": "--my--title--template", "loglevel": "verbose"}),
    (["--save", "--loglevel", "verbose"], {"save": "", "loglevel": "verbose"}),
    (["--loglevel", "verbose", "--save"], {"save": "", "loglevel": "verbose"}),
    (["--proc-title-template", "--save", "--save", "", "--loglevel", "verbose"],
     {"proc-title-template": "--save", "save": "", "loglevel": "verbose"}),
    (["--shutdown-on-sigint", "nosave", "force", "now", "--shutdown-on-sigterm", "nosave force"],
     {"shutdown-on-sigint": "nosave now force", "shutdown-on-sigterm": "nosave force"}),
]


@pytest.mark.parametrize("args,want", CLI_OK, ids=[" ".join(a) for a, _ in CLI_OK])
def test_command_line_values_as_redis(tmp_path, args, want):
    """The arguments after a config file, read as Redis 7.0 reads them."""
    conf = tmp_path / "empty.conf"
    conf.write_text("")
    got = []
    for binary in (KV_BIN, REDIS_SERVER):
        port = free_port()
        p = subprocess.Popen([binary, str(conf), *args, "--port", str(port), "--dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            c = redis.Redis(port=port, decode_responses=True)
            deadline = time.time() + 10
            while True:
                try:
                    c.ping()
                    break
                except redis.ConnectionError:
                    assert p.poll() is None and time.time() < deadline
                    time.sleep(0.05)
            got.append({k: c.config_get(k)[k] for k in want})
            c.close()
        finally:
            p.terminate()
            p.wait(10)
    assert got[0] == got[1] == want


def _exec_expired_blocked(c, port):
    c.execute_command("SELECT", "9")
    c.config_set("repl-ping-replica-period", 3600)
    st = _ReplStream(port)
    try:
        c.flushall()
        c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"SELECT 9\r\nCLIENT ID\r\n")
        time.sleep(0.1)
        cid = int(s.recv(100).split(b":")[-1].split(b"\r")[0])
        s.sendall(b"BRPOP k 0\r\n")
        time.sleep(0.1)
        c.execute_command("MULTI")
        c.execute_command("RPUSH", "k", "hello")
        c.execute_command("PEXPIRE", "k", "100")
        c.execute_command("DEBUG", "SLEEP", "0.2")
        out = [c.execute_command("EXEC")]
        out.append([f for f in c.execute_command("CLIENT", "LIST", "ID", cid).split()
                    if f.startswith("flags=")])
        out.append(c.execute_command("CLIENT", "UNBLOCK", cid))
        out.append(s.recv(100))
        s.close()
        out.append([x[0] for x in (st.command() for _ in range(7))])
        c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        return out
    finally:
        st.close()


def test_key_expired_in_transaction_serves_no_blocked_client(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        a = redis.Redis(port=kv.port, decode_responses=True, single_connection_client=True)
        b = redis.Redis(port=ref.connection_pool.connection_kwargs["port"],
                        decode_responses=True, single_connection_client=True)
        got = _exec_expired_blocked(a, kv.port)
        assert got == _exec_expired_blocked(b, ref.connection_pool.connection_kwargs["port"])
        assert got[1:4] == [["flags=b"], 1, b"*-1\r\n"]
        assert got[4][-1] == "del"
    finally:
        stop_redis(proc, ref)


def _replica_source_ip(master, replica, mport):
    master.config_set("protected-mode", "no")
    assert replica.execute_command("CONFIG", "SET", "bind-source-addr", "127.0.0.2") in (True, "OK")
    replica.execute_command("REPLICAOF", "127.0.0.1", str(mport))
    deadline = time.time() + 10
    while replica.info("replication").get("master_link_status") != "up":
        assert time.time() < deadline
        time.sleep(0.05)
    ip = master.info("replication")["slave0"]["ip"]
    replica.execute_command("REPLICAOF", "NO", "ONE")
    return ip, replica.config_get("bind-source-addr")


def test_bind_source_addr(kv_factory, tmp_path):
    master = kv_factory("--repl-diskless-sync-delay", "0", workdir=tmp_path / "m")
    replica = kv_factory(workdir=tmp_path / "r")
    (tmp_path / "rm").mkdir()
    (tmp_path / "rr").mkdir()
    pm, rm = start_redis(tmp_path / "rm", "--repl-diskless-sync-delay", "0",
                         decode_responses=True)
    pr, rr = start_redis(tmp_path / "rr", decode_responses=True)
    try:
        got = _replica_source_ip(master.client(decode_responses=True),
                                 replica.client(decode_responses=True), master.port)
        want = _replica_source_ip(rm, rr, rm.connection_pool.connection_kwargs["port"])
        assert got == want == ("127.0.0.2", {"bind-source-addr": "127.0.0.2"})
    finally:
        stop_redis(pm, rm)
        stop_redis(pr, rr)


def _script_cmd(body):
    return b"*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0" % (len(body), body)


@pytest.mark.parametrize("proto", [2, 3])
def test_script_protocol_replies(kv_factory, tmp_path, proto):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        cmds = [b"DEBUG SET-DISABLE-DENY-SCRIPTS 1",
                _script_cmd(b"return {big_number='123\\r\\n123'}"),
                _script_cmd(b"return {big_number='1234567999999999999999999999999999999'}")]
        for lua_resp in (2, 3):
            for t in PROTOCOL_TYPES[:-1]:
                cmds.append(_script_cmd(b"redis.setresp(%d);return redis.call('debug', 'protocol', '%s')"
                                        % (lua_resp, t.encode())))
        cmds.append(b"DEBUG SET-DISABLE-DENY-SCRIPTS 0")
        got = _raw_replies(kv.port, proto, cmds)
        want = _raw_replies(ref.connection_pool.connection_kwargs["port"], proto, cmds)
        assert got == want
    finally:
        stop_redis(proc, ref)


def _oom_in_multi(port):
    a = redis.Redis(port=port, decode_responses=True, single_connection_client=True)
    b = redis.Redis(port=port, decode_responses=True)
    out = []
    a.delete("foo1", "foo2")
    # a command refused while queueing (OOM) fails the EXEC
    out.append(_call(a, "MULTI"))
    out.append(_call(a, "SET", "foo1", "bar1"))
    b.config_set("maxmemory", "1")
    out.append(_call(a, "LPUSH", "mylist", "v"))
    out.append(_call(a, "GET", "foo1"))  # inside MULTI even a read is refused
    b.config_set("maxmemory", "0")
    out.append(_call(a, "SET", "foo2", "bar2"))
    out.append(_call(a, "EXEC"))
    out.append([a.exists("foo1"), a.exists("foo2")])
    # DISCARD still works out of memory
    out.append(_call(a, "MULTI"))
    b.config_set("maxmemory", "1")
    out.append(_call(a, "SET", "x", "1"))
    out.append(_call(a, "DISCARD"))
    out.append(_call(a, "PING"))
    b.config_set("maxmemory", "0")
    a.close()
    b.close()
    return out


def test_oom_while_queueing_fails_the_transaction(kv_factory, tmp_path):
    got, want = on_both(kv_factory, tmp_path, lambda _c, port: _oom_in_multi(port))
    assert got == want
    assert got[5].startswith("ERR: Transaction discarded") and got[6] == [0, 0]


WATCH_FLUSH_CASES = [
    # (setup commands, command after WATCH x in db 1 / 0)
    ("swap stale for nothing", [("SELECT", "1"), ("SET", "x", "foo", "PX", "1")], ("SWAPDB", "0", "1")),
    ("swap nothing for stale", [("SELECT", "0"), ("SET", "x", "foo", "PX", "1"), ("SELECT", "1")],
     ("SWAPDB", "0", "1")),
    ("swap stale for stale", [("SELECT", "1"), ("SET", "x", "foo", "PX", "1"), ("SELECT", "0"),
                              ("SET", "x", "bar", "PX", "1"), ("SELECT", "1")], ("SWAPDB", "0", "1")),
    ("swap live away", [("SELECT", "1"), ("SET", "x", "30")], ("SWAPDB", "0", "1")),
    ("swap live in", [("SELECT", "0"), ("SET", "x", "30"), ("SELECT", "1")], ("SWAPDB", "0", "1")),
    ("flush stale", [("SELECT", "1"), ("SET", "x", "foo", "PX", "1")], ("FLUSHDB",)),
    ("flush live", [("SELECT", "1"), ("SET", "x", "foo")], ("FLUSHDB",)),
    ("flushall missing", [("SELECT", "1")], ("FLUSHALL",)),
]


def _watch_flush(port):
    c = redis.Redis(port=port, decode_responses=True, single_connection_client=True)
    out = []
    for _, setup, cmd in WATCH_FLUSH_CASES:
        c.flushall()
        c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        for s in setup:
            c.execute_command(*s)
        time.sleep(0.01)
        c.execute_command("WATCH", "x")
        c.execute_command(*cmd)
        c.execute_command("MULTI")
        c.execute_command("PING")
        out.append(c.execute_command("EXEC"))
        c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        c.execute_command("SELECT", "0")
    c.close()
    return out


def test_watch_with_flush_and_swapdb(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        got = _watch_flush(kv.port)
        want = _watch_flush(ref.connection_pool.connection_kwargs["port"])
        assert got == want, [c[0] for c, g, w in zip(WATCH_FLUSH_CASES, got, want) if g != w]
    finally:
        stop_redis(proc, ref)


def _noack_blocked_consumer(c, port):
    c.delete("mystream")
    c.execute_command("XGROUP", "CREATE", "mystream", "mygroup", "$", "MKSTREAM")
    c.xadd("mystream", {"f1": "v1"})
    c.execute_command("XREADGROUP", "GROUP", "mygroup", "Alice", "NOACK", "STREAMS", "mystream", ">")
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"XREADGROUP GROUP mygroup Bob BLOCK 0 NOACK STREAMS mystream >\r\n")
    time.sleep(0.1)
    c.xadd("mystream", {"f2": "v2"})
    time.sleep(0.1)
    s.close()
    before = c.execute_command("XINFO", "GROUPS", "mystream")
    assert c.execute_command("DEBUG", "LOADAOF") in (True, "OK")
    after = c.execute_command("XINFO", "GROUPS", "mystream")
    names = [x[1] for x in c.execute_command("XINFO", "CONSUMERS", "mystream", "mygroup")]
    return before == after, names


def test_blocked_noack_xreadgroup_consumer_survives_aof_reload(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path, "--appendonly", "yes")
    try:
        got = _noack_blocked_consumer(r, kv.port)
        assert got == _noack_blocked_consumer(ref, ref.connection_pool.connection_kwargs["port"])
        assert got == (True, ["Alice", "Bob"])
    finally:
        stop_redis(proc, ref)


def _function_oom_and_replica_loadaof(c):
    out = []
    c.execute_command("FUNCTION", "FLUSH")
    c.execute_command("FUNCTION", "LOAD", "REPLACE", LIB)
    raw = redis.Redis(port=c.connection_pool.connection_kwargs["port"])  # (binary payload)
    payload = raw.execute_command("FUNCTION", "DUMP")
    c.config_set("maxmemory", "1")
    c.execute_command("FUNCTION", "FLUSH")
    out.append(_call(c, "FUNCTION", "LOAD", "REPLACE", LIB))
    out.append(_call(raw, "FUNCTION", "RESTORE", payload))
    raw.close()
    c.config_set("maxmemory", "0")
    # an AOF holding FUNCTION LOAD and SET loads on a read-only replica too
    c.config_set("appendonly", "yes")
    deadline = time.time() + 10
    while c.info("persistence")["aof_rewrite_in_progress"] or \
            c.info("persistence")["aof_rewrite_scheduled"]:
        assert time.time() < deadline
        time.sleep(0.05)
    c.execute_command("FUNCTION", "LOAD", LIB)
    c.set("k", "v")
    c.execute_command("REPLICAOF", "127.0.0.1", "0")
    out.append(_call(c, "DEBUG", "LOADAOF"))
    c.execute_command("REPLICAOF", "NO", "ONE")
    out.append([x[1] for x in c.execute_command("FUNCTION", "LIST")])
    out.append(c.get("k"))
    return out


def test_function_oom_and_loadaof_on_replica(kv_factory, tmp_path):
    kv, r, proc, ref = _both(kv_factory, tmp_path)
    try:
        got = _function_oom_and_replica_loadaof(r)
        assert got == _function_oom_and_replica_loadaof(ref)
        assert got[0].startswith("ERR: command not allowed when used memory")
    finally:
        stop_redis(proc, ref)


def _exec_after_min_replicas(port):
    a = redis.Redis(port=port, decode_responses=True, single_connection_client=True)
    b = redis.Redis(port=port, decode_responses=True)
    a.set("xx", "1")
    out = [_call(a, "MULTI"), _call(a, "INCR", "xx")]
    b.config_set("min-replicas-to-write", "2")
    out.append(_call(a, "EXEC"))
    out.append(_call(a, "MULTI"))  # not in MULTI any more
    out.append(_call(a, "GET", "xx"))
    out.append(_call(a, "EXEC"))  # a read-only transaction runs
    b.config_set("min-replicas-to-write", "0")
    out.append(a.get("xx"))
    a.close()
    b.close()
    return out


def test_exec_aborts_when_writes_became_refused(kv_factory, tmp_path):
    got, want = on_both(kv_factory, tmp_path, lambda _c, port: _exec_after_min_replicas(port))
    assert got == want
    assert "NOREPLICAS" in got[2] and got[-1] == "1"


def _exec_after_stale(port):
    a = redis.Redis(port=port, decode_responses=True, single_connection_client=True)
    b = redis.Redis(port=port, decode_responses=True)
    b.config_set("replica-serve-stale-data", "no")
    a.set("xx", "1")
    out = [_call(a, "MULTI"), _call(a, "GET", "xx")]
    b.execute_command("REPLICAOF", "127.0.0.1", "0")  # a master that is never up
    out.append(_call(a, "EXEC"))
    out.append(_call(a, "MULTI"))
    out.append(_call(a, "PING"))
    out.append(_call(a, "EXEC"))
    b.execute_command("REPLICAOF", "NO", "ONE")
    b.config_set("replica-serve-stale-data", "yes")
    a.close()
    b.close()
    return out


def test_exec_aborts_when_replica_became_stale(kv_factory, tmp_path):
    got, want = on_both(kv_factory, tmp_path, lambda _c, port: _exec_after_stale(port))
    assert got == want
    assert "MASTERDOWN" in got[2]


def _exec_oom(port):
    a = redis.Redis(port=port, decode_responses=True, single_connection_client=True)
    b = redis.Redis(port=port, decode_responses=True)
    a.delete("foo")
    out = [_call(a, "MULTI"), _call(a, "SET", "foo", "bar"), _call(a, "GET", "foo")]
    b.config_set("maxmemory", "1")
    out.append(_call(a, "EXEC"))
    out.append(_call(a, "MULTI"))
    out.append(_call(a, "EXEC"))  # an empty transaction still runs
    b.config_set("maxmemory", "0")
    out.append(a.exists("foo"))
    a.close()
    b.close()
    return out


def test_exec_with_a_deny_oom_command_aborts_over_maxmemory(kv_factory, tmp_path):
    got, want = on_both(kv_factory, tmp_path, lambda _c, port: _exec_oom(port))
    assert got == want
    assert got[3].startswith("ERR: Transaction discarded because of: OOM")


def test_no_connection_reaches_a_server_past_shutdown(kv_factory):
    """Once SHUTDOWN NOSAVE has closed its client's connection, a new
    connection is refused (Redis's suite: 'SHUTDOWN NOSAVE can kill a
    timedout script anyway'); the listening sockets used to close after the
    clients, and with many clients open a connect in between succeeded."""
    import errno
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    n = min(3000, hard - 200)
    if soft < n + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + 100, hard))
    kv = kv_factory("--maxclients", str(n + 50))
    idle = [socket.create_connection(("127.0.0.1", kv.port)) for _ in range(n)]
    try:
        c = kv.client()
        c.ping()
        try:
            c.execute_command("SHUTDOWN", "NOSAVE")
        except redis.ConnectionError:
            pass
        kv.expect_exit = True
        with pytest.raises(OSError) as e:
            socket.create_connection(("127.0.0.1", kv.port), timeout=2).close()
        assert e.value.errno == errno.ECONNREFUSED
    finally:
        for s in idle:
            s.close()
        kv.proc.wait(10)
