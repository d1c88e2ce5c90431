"""Side-by-side regressions for what Redis 7.0.15's own test suite found
(unit/pubsub, unit/tracking, unit/introspection, ...): the same bytes go to
brisk-kv and a real redis-server, and everything each answers is compared."""
from __future__ import annotations

import socket
import time

import redis

from kv_sidebyside import Raw, _port, _resp_end, both, pair, same  # noqa: F401  (pair: fixture)


def _exchange(port: int, payload: bytes, settle: float = 0.3, hello3: bool = False) -> bytes:
    """Sends payload on a fresh connection and returns all it got back
    until the connection stayed quiet for settle seconds."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if hello3:
        r = Raw.__new__(Raw)
        r.s, r.buf = s, b""
        r.call("HELLO", "3")
    s.sendall(payload)
    out = b""
    s.settimeout(settle)
    while True:
        try:
            chunk = s.recv(1 << 16)
        except socket.timeout:
            break
        if not chunk:
            break
        out += chunk
    s.close()
    return out


def _cmds(*cmds) -> bytes:
    out = []
    for c in cmds:
        args = c.split() if isinstance(c, str) else c
        out.append(b"*%d\r\n" % len(args))
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def _same_stream(kv, reference, payload: bytes, hello3: bool = False, settle: float = 0.3):
    want = _exchange(_port(reference), payload, settle, hello3)
    got = _exchange(kv.port, payload, settle, hello3)
    assert got == want, f"redis {want[:600]!r}\nbrisk {got[:600]!r}"
    return want


# ---- unit/pubsub ----

def test_subscribe_confirmations_survive_client_reply_off(kv, reference):
    # The suite's "PubSub messages with CLIENT REPLY OFF" hung: brisk dropped
    # the (un)subscribe pushes with the command's reply.
    payload = _cmds("CLIENT REPLY OFF", "SUBSCRIBE channel", "PSUBSCRIBE ch*",
                    "CLIENT REPLY OFF", "UNSUBSCRIBE channel", "PUNSUBSCRIBE ch*",
                    "PUNSUBSCRIBE", "PING")
    for hello3 in (False, True):
        want = _same_stream(kv, reference, payload, hello3)
        assert b"punsubscribe" in want


def test_publish_to_self_with_reply_off_keeps_the_push(kv, reference):
    payload = _cmds("CLIENT REPLY OFF", "SUBSCRIBE channel", "PSUBSCRIBE ch*",
                    "PUBLISH channel hello", "CLIENT REPLY SKIP", "PUBLISH channel x",
                    "CLIENT REPLY ON", "PUBLISH channel y")
    _same_stream(kv, reference, payload, hello3=True)


def test_punsubscribe_without_subscriptions(kv, reference):
    payload = _cmds("PING", "PUNSUBSCRIBE foo.* bar.* quux.*", "UNSUBSCRIBE", "PUNSUBSCRIBE",
                    "SUNSUBSCRIBE", "PING")
    for hello3 in (False, True):
        _same_stream(kv, reference, payload, hello3)


# ---- unit/tracking ----

def test_script_reads_track_the_declared_keys(kv, reference):
    # A script that ran a read-only command tracks the keys EVAL declared;
    # one that only wrote, or called PING, tracks none.
    got = []
    for port in (_port(reference), kv.port):
        c = Raw(port, resp3=True)
        w = Raw(port)
        out = [c.call("CLIENT", "TRACKING", "on"), w.call("MSET", "k1", "1", "k2", "1")]
        out.append(c.call("EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2"))
        out.append(w.call("MSET", "k2", "2", "k1", "2"))
        out.append(c.call("EVAL_RO", "redis.call('ping')", "2", "k1", "k2"))
        out.append(w.call("MSET", "k2", "3", "k1", "3"))
        out.append(c.call("EVAL", "redis.call('get', 'k3')", "2", "k1", "k2"))
        out.append(w.call("MSET", "k2", "4", "k1", "4"))
        out.append(c.call("PING"))  # the two invalidations come first
        out.append(c.call("PING"))
        out.append(c.call("PING"))
        c.close()
        w.close()
        got.append(out)
    assert got[1] == got[0]
    assert b"invalidate" in got[0][-3] and b"invalidate" in got[0][-2]


def test_read_command_evicts_and_invalidates_before_its_reply(kv, reference):
    # Over maxmemory, any command (a read too) first evicts; the tracking
    # client hears of the evicted key before the reply of its command.
    got = []
    for port in (_port(reference), kv.port):
        r = redis.Redis(port=port)
        c = Raw(port, resp3=True)
        c.call("CLIENT", "TRACKING", "on")
        c.call("SETEX", "volatile-key", "10000", "x")
        c.call("GET", "volatile-key")
        used = r.info("memory")["used_memory"]
        r.config_set("maxmemory-policy", "volatile-random")
        r.config_set("maxmemory", str(used + 100 * 1024))
        # SETBIT (not SET: a big argument stays in Redis's query buffer)
        c.call("SETBIT", "big", "1600000", "0")
        got.append([c.call("GETBIT", "big", "0"), c.call("PING"), r.exists("volatile-key"),
                    r.exists("big")])
        r.config_set("maxmemory", "0")
        c.close()
        r.close()
    assert got[1] == got[0]
    assert got[0][0].startswith(b">2\r\n$10\r\ninvalidate")


# ---- unit/introspection ----

def _monitor_lines(port: int, cmds) -> list[bytes]:
    m = Raw(port)
    assert m.call("MONITOR") == b"+OK\r\n"
    c = Raw(port)
    for cmd in cmds:
        c.call(*cmd)
    lines = [m.read_reply() for _ in range(len(cmds))]
    m.close()
    c.close()
    # drop the timestamp and the client address (differs between servers)
    out = []
    for line in lines:
        head, _, rest = line.partition(b"] ")
        out.append(head.split(b"[")[1].split(b" ")[-1] + b"|" + rest)
    return out


def test_monitor_shows_script_call_before_its_commands(kv, reference):
    cmds = [("EVAL", "redis.call('set',KEYS[1],ARGV[1])", "1", "foo", "bar"),
            ("FUNCTION", "LOAD", "REPLACE",
             "#!lua name=t\nredis.register_function('t', function() "
             "return redis.call('set', 'foo', 'baz') end)"),
            ("FCALL", "t", "0")]
    want = _monitor_lines(_port(reference), cmds)
    got = _monitor_lines(kv.port, cmds)
    # the client address is an ip:port on both; only "lua" must match exactly
    norm = [(b"lua|" + x.partition(b"|")[2]) if x.startswith(b"lua|") else x.partition(b"|")[2]
            for x in want]
    gnorm = [(b"lua|" + x.partition(b"|")[2]) if x.startswith(b"lua|") else x.partition(b"|")[2]
             for x in got]
    assert gnorm == norm
    assert want[1].startswith(b"lua|")


def test_config_set_many_is_all_or_nothing(pair):
    for cmd in [("CONFIG", "SET", "maxmemory", "10000002"),
                ("CONFIG", "SET", "maxmemory", "10000001", "maxmemory-clients", "200%",
                 "client-query-buffer-limit", "invalid"),
                ("CONFIG", "GET", "maxmemory"),
                ("CONFIG", "SET", "maxmemory", "10000001", "maxmemory", "10000002"),
                ("CONFIG", "SET", "maxmemory", "10", "foo", "1"),
                ("CONFIG", "GET", "maxmemory"),
                ("CONFIG", "SET", "maxmemory", "10000001", "repl-backlog-size", "10000002",
                 "save", "3000 5"),
                ("CONFIG", "GET", "save"),
                ("CONFIG", "SET", "save", "1 x"),
                ("CONFIG", "SET", "save", "3000"),
                ("CONFIG", "SET", "save", ""),
                ("CONFIG", "GET", "save"),
                ("CONFIG", "SET", "maxmemory-clients", "5%"),
                ("CONFIG", "GET", "maxmemory-clients"),
                ("CONFIG", "SET", "maxmemory-clients", "10mb"),
                ("CONFIG", "GET", "maxmemory-clients"),
                ("CONFIG", "SET", "maxmemory-clients", "abc"),
                ("CONFIG", "SET", "maxmemory-clients", "0"),
                ("CONFIG", "GET", "key-load-delay"),
                ("CONFIG", "GET", "key-load-*"),
                ("CONFIG", "SET", "maxmemory", "0", "repl-backlog-size", "1048576")]:
        both(pair, *cmd)


def test_config_set_every_option_to_its_own_value(r):
    # CONFIG GET * then CONFIG SET of each to the same value (port and bind
    # included) succeeds and changes nothing.
    skip = {"daemonize", "databases", "logfile", "dir", "dbfilename", "requirepass",
            "appendfilename", "appenddirname", "tcp-backlog", "unixsocket", "pidfile", "aclfile",
            "replicaof", "slaveof",
            # immutable in Redis 7.0 (CONFIG SET refuses them even unchanged)
            "enable-debug-command", "enable-protected-configs", "enable-module-command"}
    before = r.config_get("*")
    for k, v in before.items():
        if k not in skip and not k.startswith("tls-"):
            r.execute_command("CONFIG", "SET", k, v)
    assert r.config_get("*") == before
    assert r.config_get("key-load-delay") == {"key-load-delay": "0"}
    assert "key-load-delay" not in before


# ---- unit/pause ----

def test_pause_write_lets_no_writes_scripts_run(kv, reference):
    lib = ("#!lua name=f1\nredis.register_function{function_name='f1', "
           "callback=function() return 'hello' end, flags={'no-writes'}}")
    ro_body = "#!lua flags=no-writes\nreturn 'unique script'"
    for port in (_port(reference), kv.port):
        r = redis.Redis(port=port)
        r.function_load(lib, replace=True)
        r.set("x", "y")
        r.execute_command("CLIENT", "PAUSE", "60000", "WRITE")
        c = redis.Redis(port=port, socket_timeout=3)  # a held call would time out
        assert c.eval(ro_body, 0) == b"unique script"
        assert c.eval(ro_body, 0) == b"unique script"
        assert c.eval_ro("return redis.call('GeT', 'x')..' unique script'", 1, "x") == \
            b"y unique script"
        sha = c.script_load("#!lua flags=no-writes\nreturn 2")
        assert c.evalsha(sha, 0) == 2
        assert c.fcall("f1", 0) == b"hello"
        assert c.function_list() != []
        r.execute_command("CLIENT", "UNPAUSE")
        c.close()
        r.close()


def test_may_replicate_commands_refused_in_read_only_scripts(pair):
    for cmd in [("EVAL_RO", "return redis.call('publish','ch','msg')", "0"),
                ("EVAL_RO", "return redis.call('pfcount','hll')", "1", "hll"),
                ("EVAL", "#!lua flags=no-writes\nreturn redis.call('spublish','ch','msg')", "0"),
                ("EVAL", "return redis.call('publish','ch','msg')", "0")]:
        both(pair, *cmd)


# ---- unit/slowlog ----

def test_served_blocked_command_reaches_the_slowlog(kv, reference):
    import threading
    got = []
    for port in (_port(reference), kv.port):
        r = redis.Redis(port=port)
        r.config_set("slowlog-log-slower-than", 0)
        r.slowlog_reset()
        popped = []
        c = redis.Redis(port=port)
        t = threading.Thread(target=lambda: popped.append(c.blpop("l", 0)))
        t.start()
        deadline = time.time() + 5
        while r.info("clients")["blocked_clients"] != 1:
            assert time.time() < deadline
            time.sleep(0.02)
        p = r.pipeline(transaction=True)
        p.lpush("l", "foo")
        p.execute_command("SLOWLOG", "RESET")
        p.execute()
        t.join(5)
        got.append((popped, [e["command"] for e in r.slowlog_get()]))
        r.config_set("slowlog-log-slower-than", 10000)
        c.close()
        r.close()
    assert got[1] == got[0]
    assert got[0][1][0] == b"BLPOP l 0"


# ---- unit/introspection-2 ----

def test_getkeysandflags_of_store_options(pair):
    for cmd in [("COMMAND", "GETKEYSANDFLAGS", "sort", "k1", "store", "k2"),
                ("COMMAND", "GETKEYSANDFLAGS", "sort", "k1"),
                ("COMMAND", "GETKEYSANDFLAGS", "georadius", "k1", "0", "0", "1", "km",
                 "storedist", "k2", "store", "k3"),
                ("COMMAND", "GETKEYS", "georadius", "k1", "0", "0", "1", "km", "store", "k2")]:
        same(pair, *cmd)


def test_cluster_module_asking_readwrite_answer_like_standalone_redis(pair):
    for cmd in [("CLUSTER", "INFO"), ("CLUSTER", "HELP"), ("CLUSTER", "foo"), ("CLUSTER",),
                ("CLUSTER", "INFO", "x"), ("CLUSTER", "KEYSLOT"), ("CLUSTER", "keyslot", "k"),
                ("ASKING",), ("ASKING", "x"), ("READWRITE",), ("READWRITE", "x"),
                ("MODULE", "LIST"), ("MODULE", "HELP"), ("MODULE", "LOAD", "/x.so"),
                ("MODULE", "UNLOAD", "m"), ("MODULE", "foo"), ("MODULE", "LIST", "x"),
                ("COMMAND", "GETKEYS", "cluster", "info")]:
        same(pair, *cmd)
    # Redis lists its commands in (seeded) hash order: compare as sets
    b2, r2 = pair[0], pair[1]
    for pat in ("cl*help", "cluster*", "module*", "asking", "readwrite"):
        want = sorted(r2.call("COMMAND", "LIST", "FILTERBY", "PATTERN", pat).split(b"\r\n"))
        got = sorted(b2.call("COMMAND", "LIST", "FILTERBY", "PATTERN", pat).split(b"\r\n"))
        assert got == want, pat


def test_config_set_port_and_bind_move_the_listener(kv, reference):
    from kvlib import free_port
    r = kv.client(decode_responses=True)
    hold = socket.socket()
    hold.bind(("127.0.0.1", 0))
    hold.listen(1)
    busy = hold.getsockname()[1]  # a port in use: refused, nothing changes
    for c in (reference, r):
        try:
            c.execute_command("CONFIG", "SET", "maxmemory", "10000001", "port", str(busy))
            raise AssertionError("port in use accepted")
        except redis.ResponseError as e:
            assert "Unable to listen on this port" in str(e)
        assert str(c.config_get("maxmemory")["maxmemory"]) in ("0", "b'0'")
        try:
            c.execute_command("CONFIG", "SET", "bind", "10.99.99.99")
            raise AssertionError("foreign address accepted")
        except redis.ResponseError as e:
            assert "Failed to bind to specified addresses." in str(e)
    assert r.ping()
    new = free_port()
    assert r.execute_command("CONFIG", "SET", "port", str(new)) == "OK"
    r2 = redis.Redis(port=new, decode_responses=True)
    assert r2.config_get("port") == {"port": str(new)}
    assert r2.execute_command("CONFIG", "SET", "bind", "127.0.0.1") == "OK"
    assert r2.config_get("bind") == {"bind": "127.0.0.1"}
    assert r2.execute_command("CONFIG", "SET", "port", str(kv.port)) == "OK"
    assert redis.Redis(port=kv.port).ping()
    r2.close()
    r.close()
    hold.close()


def test_subscribed_context_names_the_subcommand(kv, reference):
    payload = _cmds("SUBSCRIBE a", "CLIENT foo", "CLIENT", "CONFIG GET x", "client REPLY on",
                    "OBJECT HELP", "COMMAND", "SUBSCRIBE", "CONFIG GET", "config Get",
                    "COMMAND info", "GET k", "UNSUBSCRIBE", "PING")
    _same_stream(kv, reference, payload)
    # and the protocol sequences the suite's pubsub helpers use
    for seq in (["SUBSCRIBE a", "PING", "PING x", "GET k", "UNSUBSCRIBE", "PING"],
                ["SSUBSCRIBE s", "SPUBLISH s m", "SUNSUBSCRIBE", "SUNSUBSCRIBE s", "PING"],
                ["MULTI", "SUBSCRIBE a", "PUBLISH a x", "EXEC", "PING"],
                ["CLIENT REPLY SKIP", "SUBSCRIBE a", "PING", "CLIENT REPLY OFF", "PUBLISH a z",
                 "UNSUBSCRIBE a", "CLIENT REPLY ON", "PING"]):
        for hello3 in (False, True):
            _same_stream(kv, reference, _cmds(*seq), hello3, settle=0.2)


def test_cluster_reset_refused_in_scripts_other_subcommands_not(pair):
    # RESET is a noscript subcommand of CLUSTER in Redis; the container is not
    same(pair, "EVAL", "return redis.pcall('cluster', 'reset', 'hard')", "0")
    same(pair, "EVAL", "return redis.pcall('cluster', 'info')", "0")
