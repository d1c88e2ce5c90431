"""Leftover differences from Redis 7.0.15, each checked side by side with a
real redis-server: SCAN-family cursor parsing, replica-ignore-maxmemory, ACL
rule forms, redis.acl_check_cmd arity, DEBUG DIGEST, CONFIG REWRITE and the
log level of failed TLS handshakes."""
from __future__ import annotations

import time

import pytest
import redis

from kv_sidebyside import pair, same, both  # noqa: F401  (fixture)
from kvlib import start_redis, stop_redis

# ---- 1. SCAN cursors: strtoul semantics ----

CURSORS = ["-1", "18446744073709551615", "18446744073709551616", "abc", "1.5",
           " 1", "1 ", "\t1", "", "+5", "-0", "-18446744073709551615",
           "-18446744073709551616", "0x10", "00", "+", "-", "- 1", "+-1",
           "99999999999999999999999", "5\x00abc", "\x00"]


def test_scan_cursor_forms_like_redis(pair):
    # Empty keys: the reply does not depend on the hash layout.
    for cur in CURSORS:
        same(pair, "SCAN", cur)
        same(pair, "HSCAN", "nokey", cur)
        same(pair, "SSCAN", "nokey", cur)
        same(pair, "ZSCAN", "nokey", cur)
        same(pair, "SCAN", cur, "COUNT", "0")


def test_scan_cursor_checked_before_type_and_key(pair):
    both(pair, "SET", "str", "x")
    both(pair, "HSET", "h", "f", "v")
    both(pair, "SADD", "s", "1", "2", "3")
    both(pair, "ZADD", "z", "1", "m")
    for cmd in ("HSCAN", "SSCAN", "ZSCAN"):
        for cur in ("abc", "-1", "0", "", "18446744073709551616"):
            same(pair, cmd, "str", cur)
    # Small collections come back whole with cursor 0, whatever the cursor.
    for cur in ("-1", "", "+0", "18446744073709551615"):
        same(pair, "HSCAN", "h", cur)
        same(pair, "ZSCAN", "z", cur)
        # brisk-kv does not keep an intset's sorted order: compare as sets.
        got = pair[0].call("SSCAN", "s", cur).split(b"\r\n")
        want = pair[1].call("SSCAN", "s", cur).split(b"\r\n")
        assert got[:4] == want[:4] and sorted(got[4:]) == sorted(want[4:]), (got, want)


def test_scan_cursor_wraps_on_big_collections(pair):
    b2, r2 = pair[0], pair[1]
    for conn in (b2, r2):
        conn.call("MSET", *[f"key:{i}" if j == 0 else "v" for i in range(300) for j in (0, 1)])
        conn.call("SADD", "bigs", *[str(i) for i in range(300)])
    for cmd in (("SCAN",), ("SSCAN", "bigs")):
        for cur in ("-1", "-18446744073709551615", "+3"):
            for conn in (b2, r2):
                rep = conn.call(*cmd, cur)
                assert rep.startswith(b"*2\r\n$"), rep[:80]


# ---- 2. replica-ignore-maxmemory ----

def _wait(pred, timeout=20.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_replica_ignores_maxmemory_by_default(kv_factory):
    master = kv_factory()
    m = master.client(decode_responses=True)
    replica = kv_factory("--maxmemory-policy", "allkeys-random")
    rc = replica.client(decode_responses=True)
    assert rc.config_get("replica-ignore-maxmemory") == {"replica-ignore-maxmemory": "yes"}
    assert rc.config_get("slave-ignore-maxmemory") == {"slave-ignore-maxmemory": "yes"}
    rc.replicaof("127.0.0.1", master.port)
    _wait(lambda: rc.info("replication").get("master_link_status") == "up", what="link up")
    used = int(rc.info("memory")["used_memory"])
    rc.config_set("maxmemory", used + 512 * 1024)
    # ~4 MB of values: far past the replica's maxmemory.
    pipe = m.pipeline(transaction=False)
    for i in range(2000):
        pipe.set(f"k{i}", "x" * 2000)
    pipe.execute()
    _wait(lambda: rc.dbsize() == 2000, what="replica holds every key")
    assert int(rc.info("stats")["evicted_keys"]) == 0
    assert int(rc.info("memory")["used_memory"]) > int(rc.config_get("maxmemory")["maxmemory"])
    # Reads and a read-only script still work; nothing is evicted by them.
    assert rc.get("k1") == "x" * 2000
    assert rc.eval("return redis.call('get', KEYS[1])", 1, "k5") == "x" * 2000
    assert rc.dbsize() == 2000

    # The master's DEL frees the replica, as Redis relies on.
    m.delete(*[f"k{i}" for i in range(1000)])
    _wait(lambda: rc.dbsize() == 1000, what="DELs replicated")

    # With the option off the replica evicts on its own (and counts it).
    rc.config_set("replica-ignore-maxmemory", "no")
    assert rc.config_get("replica-ignore-maxmemory") == {"replica-ignore-maxmemory": "no"}
    rc.ping()
    _wait(lambda: rc.dbsize() < 1000, what="replica evicts")
    assert int(rc.info("stats")["evicted_keys"]) > 0
    assert m.dbsize() == 1000  # the master is not affected


def test_replica_ignore_maxmemory_config_forms(kv_factory, reference, tmp_path):
    kv = kv_factory()
    for c in (kv.client(), reference):
        with pytest.raises(redis.ResponseError) as e:
            c.config_set("replica-ignore-maxmemory", "maybe")
        assert "argument must be 'yes' or 'no'" in str(e.value)
        c.config_set("slave-ignore-maxmemory", "no")
        assert c.config_get("replica-ignore-maxmemory") in (
            {"replica-ignore-maxmemory": "no"}, {b"replica-ignore-maxmemory": b"no"})
    conf = tmp_path / "ignore.conf"
    conf.write_text("replica-ignore-maxmemory no\n")
    s = kv_factory(str(conf))
    assert s.client(decode_responses=True).config_get("replica-ignore-maxmemory") == {
        "replica-ignore-maxmemory": "no"}


# ---- 3. ACL rule forms Redis 7.0.15 accepts (and lists as it does) ----

ACL_RULES = [
    ["(+get ~a*) ~b)"], ["+select|a b"], ["(+get", "~a*)"], ["on", "(+select|a ~x))"],
    ["(+get ~a*)", ")"], ["(~x) )"], ["(+get &ch)) %R~k))"], ["+select|a)"],
    ["(+select|a) ~k)"], ["+select|a\tb"], ["(+select|a b)"], ["+select|a b c"],
    ["+select| b"], ["+select|a "], ["( )"], ["()"], ["(~x))"], ["(&x) ~y) resetkeys)"],
    ["+config|get x"], ['(+select|"a b")'], ["(~'a)' +get)"], ['(~"x y")'],
    [b"+select|\x00\x00b"], [b"+select|a\x00"], [b"+sel\x00ect|a"], [b"-get\x00x"],
    [b"+@all\x00x"], [b"(+select|\x00b ~k)"], [b"~a\x00b"], ["+select|"], ["~a b"],
]


def test_acl_rule_forms_like_redis(pair):
    for i, rules in enumerate(ACL_RULES):
        both(pair, "ACL", "SETUSER", f"u{i}", *rules)
        same(pair, "ACL", "GETUSER", f"u{i}")
    same(pair, "ACL", "LIST")
    for i in range(len(ACL_RULES)):
        for cmd in (("GET", "a)"), ("GET", "b)"), ("SELECT", "a b"), ("SELECT", "a"),
                    ("PUBLISH", "ch))", "m")):
            same(pair, "ACL", "DRYRUN", f"u{i}", *cmd, resp3=False)


def test_acl_file_with_paren_rules_like_redis(kv_factory, tmp_path):
    lines = ["user default on nopass ~* &* +@all",
             "user w on nopass (+select|a ~x))",
             "user v on nopass (~k resetchannels -@all +select|a))"]
    acl = tmp_path / "users.acl"
    acl.write_text("\n".join(lines) + "\n")
    kv = kv_factory("--aclfile", str(acl))
    proc, ref = start_redis(tmp_path, "--aclfile", str(acl))
    try:
        b = kv.client()
        assert b.execute_command("ACL", "LIST") == ref.execute_command("ACL", "LIST")
        assert b.execute_command("ACL", "LOAD") == ref.execute_command("ACL", "LOAD")
        # Redis's own listing of "(~a*) ~b ..." does not load back: neither does ours.
        acl.write_text(lines[0] + "\nuser u1 off resetchannels -@all (~a*) ~b resetchannels -@all +get)\n")
        errs = []
        for c in (b, ref):
            with pytest.raises(redis.ResponseError) as e:
                c.execute_command("ACL", "LOAD")
            errs.append(str(e.value))
        assert errs[0] == errs[1]
    finally:
        stop_redis(proc, ref)


def _pings(c):
    try:
        return c.ping()
    except redis.ConnectionError:
        return False


# ---- 4. redis.acl_check_cmd with too few arguments ----

def _as_user(port, user):
    c = redis.Redis(port=port, username=user, password="x")
    return c


def test_acl_check_cmd_too_few_args(kv, reference):
    ports = (kv.port, reference.connection_pool.connection_kwargs["port"])
    for p in ports:
        c = redis.Redis(port=p)
        c.execute_command("ACL", "SETUSER", "kr", "on", "nopass", "~foo*", "&ch*", "+@all")
        c.execute_command("ACL", "SETUSER", "ak", "on", "nopass", "~*", "-@all", "+set", "+eval")
    # What Redis 7.0.15 answers the same way every time: both servers agree.
    defined = ["'get'", "'set','foo'", "'set','bar'", "'set','foo','x'", "'config'", "'eval'",
               "'eval','x'", "'zunionstore'", "'xread'", "'publish'", "'object'", "'lmpop'",
               "'ping','a','b'", "'get','foo','x'"]
    for args in defined:
        got = []
        for p in ports:
            try:
                got.append(_as_user(p, "kr").eval(f"return redis.acl_check_cmd({args})", 0))
            except redis.ResponseError as e:
                got.append(str(e).split(" script:")[0])
        assert got[0] == got[1], (args, got)
    # A user with every key: no key is looked for, SET alone is allowed (7.0.15: 1).
    for p in ports:
        assert _as_user(p, "ak").eval("return redis.acl_check_cmd('set')", 0) == 1
    # SET, SORT, BITFIELD, GEORADIUS, MIGRATE without their first key: 7.0.15
    # reads past argv (SET and MIGRATE crash it); brisk answers as the fixed
    # Redis does, with an error, and stays up.
    c = _as_user(kv.port, "kr")
    for args in ("'set'", "'sort'", "'bitfield'", "'georadius'", "'migrate','h','1'"):
        with pytest.raises(redis.ResponseError) as e:
            c.eval(f"return redis.acl_check_cmd({args})", 0)
        assert str(e.value).startswith("Wrong number of args for redis.acl_check_cmd() script:")
    assert c.eval("return redis.pcall('ping')", 0) == b"PONG"


# ---- 5. DEBUG DIGEST / DIGEST-VALUE: Redis 7.0.15's hex ----

@pytest.fixture
def ref_debug(tmp_path):
    """A real redis-server with DEBUG enabled (the plain reference has it off)."""
    proc, c = start_redis(tmp_path, "--enable-debug-command", "yes")
    yield c.connection_pool.connection_kwargs["port"]
    stop_redis(proc, c)


def test_debug_digest_like_redis(kv_factory, ref_debug):
    kv = kv_factory("--enable-debug-command", "yes")
    from kv_sidebyside import Raw
    conns = [Raw(kv.port), Raw(ref_debug)]

    def same_all(*cmd):
        want = conns[1].call(*cmd)
        got = conns[0].call(*cmd)
        assert got == want, f"{cmd}: redis {want[:200]!r} brisk {got[:200]!r}"
        return want

    assert same_all("DEBUG", "DIGEST") == b"+" + b"0" * 40 + b"\r\n"
    same_all("DEBUG", "DIGEST-VALUE", "nokey", "other")
    same_all("DEBUG", "DIGEST-VALUE")
    writes = [
        ("SET", "s:int", "12345"), ("SET", "s:neg", "-7"), ("SET", "s:bin", b"\x00\xff\r\n"),
        ("SET", "s:big", "x" * 5000), ("SET", "s:ttl", "v", "EX", "1000"),
        ("RPUSH", "l", "a", "1", "", "bb"), ("RPUSH", "l:big", *[f"e{i}" for i in range(300)]),
        ("SADD", "set:int", "3", "1", "-2"), ("SADD", "set:str", "a", "b", "1"),
        ("SADD", "set:big", *[str(i) for i in range(600)]),
        ("HSET", "h", "f", "v", "n", "1"), ("HSET", "h:big", *[f"x{i % 2}{i}" for i in range(400)]),
        ("ZADD", "z", "1.5", "m", "3", "n", "0.1", "o", "-inf", "lo", "1e300", "hi"),
        ("ZADD", "z:big", *[x for i in range(200) for x in (str(i / 7), f"m{i}")]),
        ("XADD", "x", "1-1", "f", "v", "g", "w"), ("XADD", "x", "5-0", "a", "b"),
        ("XADD", "x", "6-0", "f", "v2", "g", "w2"), ("XDEL", "x", "5-0"),
        ("XGROUP", "CREATE", "x", "grp", "0"),
        ("PEXPIRE", "h", "500000"), ("EXPIRE", "z:big", "1000"),
        ("SELECT", "3"), ("SET", "k3", "v"), ("LPUSH", "l3", "x"),
        ("SELECT", "15"), ("HSET", "h15", "a", "b"), ("SELECT", "0"),
    ]
    for w in writes:
        same_all(*w)
        same_all("DEBUG", "DIGEST")
    keys = ["s:int", "s:neg", "s:bin", "s:big", "s:ttl", "l", "l:big", "set:int", "set:str",
            "set:big", "h", "h:big", "z", "z:big", "x", "nokey"]
    same_all("DEBUG", "DIGEST-VALUE", *keys)
    for k in keys:
        same_all("DEBUG", "DIGEST-VALUE", k)
    # Same data in another db: another digest; the value digest ignores the key name.
    same_all("SELECT", "3")
    same_all("DEBUG", "DIGEST-VALUE", "k3", "l3", "s:int")
    same_all("PERSIST", "k3")
    same_all("DEBUG", "DIGEST")
    same_all("SELECT", "0")
    same_all("FLUSHDB")
    same_all("DEBUG", "DIGEST")
    same_all("FLUSHALL")
    assert same_all("DEBUG", "DIGEST") == b"+" + b"0" * 40 + b"\r\n"


# ---- 6. CONFIG REWRITE: the lines Redis 7.0.15 writes ----

REWRITE_BASE = """# operator's comment
bind 127.0.0.1
save 900 1
save 300 10
save 60 10000
appendonly no
maxmemory 100mb
slaveof 127.0.0.1 9
slave-priority 10
rename-command FLUSHALL ""
loglevel notice
hz 15
timeout 0
hash-max-ziplist-entries 100
masterauth "old"
"""

REWRITE_SETS = [
    ("save", "120 5"), ("hz", "10"), ("masterauth", "x y"), ("masteruser", "sentinel-user"),
    ("replica-priority", "100"), ("maxmemory", "0"), ("hash-max-listpack-entries", "128"),
    ("notify-keyspace-events", "Ex"), ("appendfsync", "no"), ("maxmemory-policy", "allkeys-lru"),
    ("replica-announce-ip", '10.0.0.1 "q"'), ("replica-announce-port", "6390"),
    ("min-replicas-to-write", "1"), ("min-replicas-max-lag", "5"), ("requirepass", "s3cret"),
    ("repl-backlog-size", "10mb"), ("client-query-buffer-limit", "2097153"),
    ("slowlog-max-len", "64"), ("replica-read-only", "no"), ("maxclients", "5000"),
    ("client-output-buffer-limit", "replica 512mb 128mb 60 pubsub 32mb 8mb 60"),
    ("loglevel", "warning"), ("busy-reply-threshold", "6000"), ("tcp-keepalive", "60"),
]


def _option_lines(path, port):
    lines = [l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]
    return sorted(l for l in lines if l != f"port {port}")


def test_config_rewrite_like_redis(kv_factory, tmp_path):
    import subprocess
    from kvlib import free_port
    rdir, bdir = tmp_path / "redis", tmp_path / "brisk"
    rdir.mkdir()
    bdir.mkdir()
    rconf, bconf = rdir / "r.conf", bdir / "b.conf"
    rport = free_port()
    rconf.write_text(f"port {rport}\n" + REWRITE_BASE)
    bconf.write_text(REWRITE_BASE)
    proc = subprocess.Popen(["redis-server", str(rconf), "--dir", str(rdir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ref = redis.Redis(port=rport, decode_responses=True)
        _wait(lambda: _pings(ref), what="redis-server up")
        kv = kv_factory(str(bconf), workdir=bdir)
        b = kv.client(decode_responses=True)
        for c in (ref, b):
            c.replicaof("no", "one")
            for name, value in REWRITE_SETS:
                assert c.config_set(name, value)
            c.execute_command("ACL", "SETUSER", "ops", "on", ">pw", "~app:*", "+@read")
            c.execute_command("CONFIG", "REWRITE")
        def compare(bport):
            rl = [l.replace(str(rdir), "DIR") for l in _option_lines(rconf, rport)]
            bl = [l.replace(str(bdir), "DIR") for l in _option_lines(bconf, bport)]
            # brisk-kv's own default for normal clients is 512mb 128mb 60 (Redis: 0 0 0).
            rl = [l for l in rl if not l.startswith("client-output-buffer-limit normal")]
            bl = [l for l in bl if not l.startswith("client-output-buffer-limit normal")]
            assert bl == rl, "\n".join(["redis:", *rl, "brisk:", *bl])
        compare(kv.port)
        text = bconf.read_text()
        assert text.startswith("# operator's comment\n") and 'rename-command FLUSHALL ""' in text
        assert "slaveof" not in text and "replicaof" not in text and "save 300 10" not in text
        # Read back by brisk-kv: the same configuration, and a second rewrite changes nothing.
        want = b.config_get("*")
        kv.stop()
        kv2 = kv_factory(str(bconf), workdir=bdir)
        b2 = kv2.client(decode_responses=True, password="s3cret")
        got = b2.config_get("*")
        assert {k: v for k, v in got.items() if k != "port"} == \
            {k: v for k, v in want.items() if k != "port"}
        assert b2.execute_command("ACL", "GETUSER", "ops")
        # Both restarted from their files and rewritten again (the files now
        # hold every option, default or not, in place): still the same lines.
        proc.terminate()
        proc.wait(10)
        proc = subprocess.Popen(["redis-server", str(rconf), "--dir", str(rdir)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ref = redis.Redis(port=rport, decode_responses=True, password="s3cret")
        _wait(lambda: _pings(ref), what="redis-server up again")
        b2.execute_command("CONFIG", "REWRITE")
        ref.execute_command("CONFIG", "REWRITE")
        compare(kv2.port)
    finally:
        proc.terminate()
        proc.wait(10)


def test_config_rewrite_replicaof_for_sentinel(kv_factory, tmp_path):
    """What Sentinel relies on: REPLICAOF, masterauth and masteruser reach
    the file, and a promoted replica loses its replicaof line."""
    conf = tmp_path / "s.conf"
    conf.write_text("replica-priority 20\n")
    master = kv_factory()
    kv = kv_factory(str(conf))
    c = kv.client(decode_responses=True)
    c.config_set("masterauth", "p w")
    c.config_set("masteruser", "repl")
    c.replicaof("127.0.0.1", master.port)
    c.execute_command("CONFIG", "REWRITE")
    lines = conf.read_text().splitlines()
    assert f"replicaof 127.0.0.1 {master.port}" in lines
    assert 'masterauth "p w"' in lines and 'masteruser "repl"' in lines
    assert lines[0] == "replica-priority 20"
    c.replicaof("no", "one")
    c.execute_command("CONFIG", "REWRITE")
    assert not any(l.startswith("replicaof") for l in conf.read_text().splitlines())


# ---- LOADING: clients served while a big RDB loads at start-up ----

LOADING_PROBES = [
    ("PING",), ("PING", "x"), ("ECHO", "x"), ("GET", "key:1"), ("SET", "a", "b"), ("DBSIZE",),
    ("FLUSHALL",), ("SAVE",), ("SCRIPT", "FLUSH"), ("FUNCTION", "LIST"), ("MEMORY", "USAGE", "x"),
    ("CLIENT", "SETNAME", "x"), ("SELECT", "1"), ("MULTI",), ("EXEC",), ("LASTSAVE",),
    ("PUBLISH", "c", "m"), ("SUBSCRIBE", "c"), ("UNSUBSCRIBE", "c"), ("LATENCY", "LATEST"),
    ("SLOWLOG", "LEN"), ("CONFIG", "GET", "maxmemory"), ("TIME",), ("ROLE",),
]


def _start_loading(argv, port):
    import subprocess
    from kv_sidebyside import Raw
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while True:
        try:
            return proc, Raw(port)
        except OSError:
            assert time.time() < deadline, "no listener"
            time.sleep(0.01)


def test_loading_replies_like_redis(kv_factory, ref_debug, tmp_path):
    import shutil
    from kvlib import KV_BIN, free_port
    ref = redis.Redis(port=ref_debug)
    ref.execute_command("DEBUG", "POPULATE", "100000", "key", "100")
    ref.save()
    dump = tmp_path / "dump.rdb"
    assert dump.exists()
    servers = []
    for name, binary in (("redis", "redis-server"), ("brisk", KV_BIN)):
        d = tmp_path / name
        d.mkdir()
        shutil.copy(dump, d / "dump.rdb")
        port = free_port()
        servers.append(_start_loading(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d), "--save", "",
             "--key-load-delay", "40", "--loading-process-events-interval-bytes", "1024"], port))
    (rproc, rc), (bproc, bc) = servers
    try:
        time.sleep(0.2)
        for cmd in LOADING_PROBES:
            want, got = rc.call(*cmd), bc.call(*cmd)
            if cmd[0] in ("LASTSAVE", "TIME", "CONFIG"):
                assert got[:1] == want[:1], (cmd, want, got)
            else:
                assert got == want, (cmd, want, got)
        for c in (rc, bc):
            info = c.call("INFO", "persistence").decode()
            assert "loading:1" in info and "loading_total_bytes:" in info, info
            assert "loading_loaded_perc:" in info and "loading_eta_seconds:" in info
        # Once loaded: everything there, every command served.
        for c in (rc, bc):
            deadline = time.time() + 60
            while c.call("PING") != b"+PONG\r\n":
                assert time.time() < deadline, "still loading"
                time.sleep(0.05)
            assert c.call("SELECT", "0") == b"+OK\r\n"
            assert c.call("DBSIZE") == b":100000\r\n"
            assert "loading:0" in c.call("INFO", "persistence").decode()
    finally:
        for p in (rproc, bproc):
            p.terminate()
            assert p.wait(10) == 0


def test_shutdown_while_loading_keeps_the_dump(tmp_path, ref_debug):
    import os
    import signal
    from kvlib import KV_BIN, free_port
    ref = redis.Redis(port=ref_debug)
    ref.execute_command("DEBUG", "POPULATE", "50000", "key", "100")
    ref.save()
    size = (tmp_path / "dump.rdb").stat().st_size
    for how in ("SHUTDOWN", "SHUTDOWN SAVE", "SIGTERM"):
        port = free_port()
        proc, c = _start_loading([KV_BIN, "--port", str(port), "--dir", str(tmp_path),
                                  "--save", "60 1", "--key-load-delay", "40",
                                  "--loading-process-events-interval-bytes", "1024"], port)
        time.sleep(0.2)
        assert c.call("GET", "key:1").startswith(b"-LOADING")
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            try:
                c.call(*how.split())
            except (AssertionError, OSError):
                pass  # closed without a reply, as Redis
        assert proc.wait(10) == 0
        assert (tmp_path / "dump.rdb").stat().st_size == size, how
        assert not any(n.startswith("temp-") for n in os.listdir(tmp_path))


def test_config_rewrite_force_all_reads_back(kv_factory, tmp_path):
    """DEBUG CONFIG-REWRITE-FORCE-ALL (Redis's 'CONFIG REWRITE sanity'): a
    file naming every option starts a server with the same CONFIG GET *."""
    conf = tmp_path / "all.conf"
    conf.write_text("")
    kv = kv_factory(str(conf), "--enable-debug-command", "yes")
    c = kv.client(decode_responses=True)
    c.config_set("stream-node-max-bytes", "4kb")
    c.config_set("hash-max-ziplist-value", "1kb")
    assert c.execute_command("DEBUG", "CONFIG-REWRITE-FORCE-ALL") == "OK"
    want = c.config_get("*")
    assert want["stream-node-max-bytes"] == "4096"
    assert want["hash-max-listpack-value"] == want["hash-max-ziplist-value"] == "1024"
    assert want["propagation-error-behavior"] == "ignore"
    kv.stop()
    kv2 = kv_factory(str(conf))
    got = kv2.client(decode_responses=True).config_get("*")
    assert {k: v for k, v in got.items() if k != "port"} == \
        {k: v for k, v in want.items() if k != "port"}


def test_memory_options_like_redis(r, reference):
    for name, value in (("stream-node-max-bytes", "4kb"), ("client-query-buffer-limit", "2gb"),
                        ("zset-max-listpack-value", "1kb"), ("stream-node-max-bytes", "abc")):
        errs = []
        for c in (r, reference):
            try:
                c.config_set(name, value)
                errs.append(None)
            except redis.ResponseError as e:
                errs.append(str(e))
        assert errs[0] == errs[1], (name, value, errs)
        got = r.config_get(name)[name]
        want = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                for k, v in reference.config_get(name).items()}[name]
        assert got == want, (name, got, want)


def test_shutdown_on_signal_options(kv_factory, reference, tmp_path):
    """shutdown-on-sigterm / shutdown-on-sigint (Redis 7.0): parsed and shown
    as Redis does; save / nosave decide the final dump on that signal."""
    kv = kv_factory()
    for value in ("nosave now", "save", "default", "bogus", "save nosave", "now force",
                  "NOSAVE", "", "default save", "now bogus"):
        errs, shown = [], []
        for c in (kv.client(), reference):
            try:
                c.config_set("shutdown-on-sigint", value)
                errs.append(None)
            except redis.ResponseError as e:
                errs.append(str(e))
            v = list(c.config_get("shutdown-on-sigint").values())[0]
            shown.append(v.decode() if isinstance(v, bytes) else v)
        assert errs[0] == errs[1] and shown[0] == shown[1], (value, errs, shown)
    import signal
    for opt, sig, save, want_dump in (("shutdown-on-sigterm", signal.SIGTERM, "60 1", False),
                                      ("shutdown-on-sigint", signal.SIGINT, "", True),
                                      ("shutdown-on-sigterm", signal.SIGTERM, "", False)):
        d = tmp_path / f"{opt}-{save or 'none'}"
        d.mkdir()
        s = kv_factory("--save", save, workdir=d)
        c = s.client()
        c.set("k", "v")
        c.config_set(opt, "nosave" if save else "save")
        if not want_dump and not save:
            c.config_set(opt, "default")  # no save points, no SAVE flag: nothing written
        s.proc.send_signal(sig)
        assert s.proc.wait(10) == 0
        assert (d / "dump.rdb").exists() == want_dump, (opt, save)


def test_save_lines_add_up_at_start(kv_factory, tmp_path):
    """As Redis reads them: the first save directive replaces the default, the
    next ones (file, then command line) add points, save "" clears; so the
    one-line-per-point file CONFIG REWRITE writes reads back whole."""
    conf = tmp_path / "s.conf"
    conf.write_text("save 900 1\nsave 300 10\n")
    for args, want in (((), "900 1 300 10"), (("--save", "100 100"), "900 1 300 10 100 100"),
                       (("--save", ""), "")):
        s = kv_factory(str(conf), *args)
        assert s.client(decode_responses=True).config_get("save") == {"save": want}
        s.stop()
    s = kv_factory(str(conf))
    c = s.client(decode_responses=True)
    c.config_set("save", "3600 1 300 100 60 10000")
    c.execute_command("CONFIG", "REWRITE")
    s.stop()
    s = kv_factory(str(conf))
    assert s.client(decode_responses=True).config_get("save") == {"save": "3600 1 300 100 60 10000"}
