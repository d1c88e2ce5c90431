"""RESP protocol, connection commands, exact error strings, HELLO 3, AUTH,
pipelining and the default bind, against the real brisk-kv binary."""
from __future__ import annotations

import socket
import subprocess
import time

import pytest
import redis

from kvlib import raw


def test_ping_echo_and_inline(kv):
    assert raw(kv.port, b"PING\r\n") == b"+PONG\r\n"
    assert raw(kv.port, b"*2\r\n$4\r\nECHO\r\n$5\r\nhe\r\no\r\n") == b"$5\r\nhe\r\no\r\n"
    # inline with quotes and escapes
    assert raw(kv.port, b'set k "a b\\x41"\r\nget k\r\n') == b"+OK\r\n$4\r\na bA\r\n"
    assert raw(kv.port, b"PING hello\n") == b"$5\r\nhello\r\n"


@pytest.mark.parametrize("data,msg", [
    (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*1\r\n$-5\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$999999999999\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*2\r\n$3\r\nGET\r\nx\r\n", b"-ERR Protocol error: expected '$', got 'x'\r\n"),
    (b'SET "abc\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    (b"*9999999\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
])
def test_protocol_errors_close_connection(kv, data, msg):
    out = raw(kv.port, data, read_until_close=True)
    assert out == msg
    # the server is still fine
    assert raw(kv.port, b"PING\r\n") == b"+PONG\r\n"


def test_exact_error_strings(r):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("foo", "a", "b")
    assert str(e.value) == "unknown command 'foo', with args beginning with: 'a' 'b' "
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("get")
    assert str(e.value) == "wrong number of arguments for 'get' command"
    r.rpush("list", "x")
    with pytest.raises(redis.ResponseError) as e:
        r.get("list")
    assert str(e.value) == "WRONGTYPE Operation against a key holding the wrong kind of value"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SET", "k", "v", "BOGUS")
    assert str(e.value) == "syntax error"
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError) as e:
        r.incr("s")
    assert str(e.value) == "value is not an integer or out of range"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SELECT", "16")
    assert str(e.value) == "DB index is out of range"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CLIENT", "BOGUS")
    assert str(e.value) == "unknown subcommand 'BOGUS'. Try CLIENT HELP."


def test_raw_error_prefixes(kv):
    out = raw(kv.port, b"*2\r\n$3\r\nfoo\r\n$3\r\nbar\r\n*1\r\n$3\r\nGET\r\n")
    assert out == (b"-ERR unknown command 'foo', with args beginning with: 'bar' \r\n"
                   b"-ERR wrong number of arguments for 'get' command\r\n")


def test_pipeline_1000_commands_in_one_write(kv):
    parts = []
    for i in range(1000):
        k, v = f"key:{i}", f"value-{i}"
        parts.append(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n${len(v)}\r\n{v}\r\n".encode())
    for i in range(1000):
        k = f"key:{i}"
        parts.append(f"*2\r\n$3\r\nGET\r\n${len(k)}\r\n{k}\r\n".encode())
    payload = b"".join(parts)
    expected = b"+OK\r\n" * 1000 + b"".join(
        f"${len(f'value-{i}')}\r\nvalue-{i}\r\n".encode() for i in range(1000))
    with socket.create_connection(("127.0.0.1", kv.port), timeout=10) as s:
        s.sendall(payload)  # one write
        got = b""
        while len(got) < len(expected):
            b = s.recv(1 << 16)
            assert b
            got += b
    assert got == expected


def test_redis_py_pipeline_and_transaction(r):
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.incr("ctr")
    assert p.execute()[-1] == 500
    with r.pipeline() as p:
        p.set("a", 1).incr("a").get("a")
        assert p.execute() == [True, 2, "2"]


def test_multi_exec_discard_watch(kv):
    c1 = kv.client(decode_responses=True)
    c2 = kv.client(decode_responses=True)
    assert raw(kv.port, b"MULTI\r\nSET x 1\r\nINCR x\r\nEXEC\r\n") == \
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:2\r\n"
    assert raw(kv.port, b"EXEC\r\n") == b"-ERR EXEC without MULTI\r\n"
    assert raw(kv.port, b"DISCARD\r\n") == b"-ERR DISCARD without MULTI\r\n"
    assert raw(kv.port, b"MULTI\r\nMULTI\r\nDISCARD\r\n") == \
        b"+OK\r\n-ERR MULTI calls can not be nested\r\n+OK\r\n"
    # a queueing error aborts EXEC
    assert raw(kv.port, b"MULTI\r\nSET y\r\nEXEC\r\nGET y\r\n") == (
        b"+OK\r\n-ERR wrong number of arguments for 'set' command\r\n"
        b"-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n")
    # WATCH: a write by another client makes EXEC fail
    c1.set("w", "0")
    with c1.pipeline() as p:
        p.watch("w")
        c2.set("w", "changed")
        p.multi()
        p.set("w", "mine")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert c1.get("w") == "changed"
    # WATCH without interference succeeds
    with c1.pipeline() as p:
        p.watch("w")
        p.multi()
        p.set("w", "mine")
        assert p.execute() == [True]
    assert c1.get("w") == "mine"
    # runtime errors inside EXEC do not abort the others
    c1.set("str", "x")
    with c1.pipeline() as p:
        p.incr("str")
        p.set("after", "1")
        res = p.execute(raise_on_error=False)
    assert isinstance(res[0], redis.ResponseError) and res[1] is True


def test_hello3_resp3_types(kv):
    c = kv.client(protocol=3, decode_responses=True)
    info = c.execute_command("HELLO", "3")
    assert info["server"] == "redis" and info["proto"] == 3 and info["version"].startswith("7.")
    c.hset("h", mapping={"a": "1", "b": "2"})
    assert c.hgetall("h") == {"a": "1", "b": "2"}
    c.zadd("z", {"m": 1.5, "n": 2})
    assert c.zscore("z", "m") == 1.5
    c.sadd("s", "x", "y")
    assert c.smembers("s") == {"x", "y"}
    assert c.get("missing") is None
    # raw RESP3 framing
    out = raw(kv.port, b"HELLO 3\r\nZSCORE z m\r\nGET nope\r\nHGETALL h\r\n")
    assert b",1.5\r\n_\r\n%2\r\n" in out
    assert out.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n")
    assert raw(kv.port, b"HELLO 4\r\n") == b"-NOPROTO unsupported protocol version\r\n"


def test_auth_and_requirepass(kv_factory):
    kv = kv_factory("--requirepass", "s3cret")
    assert raw(kv.port, b"GET x\r\n") == b"-NOAUTH Authentication required.\r\n"
    assert raw(kv.port, b"AUTH wrong\r\n") == \
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    assert raw(kv.port, b"AUTH s3cret\r\nSET x 1\r\nGET x\r\n") == b"+OK\r\n+OK\r\n$1\r\n1\r\n"
    assert raw(kv.port, b"AUTH default s3cret\r\nPING\r\n") == b"+OK\r\n+PONG\r\n"
    # unauthenticated clients get small request limits
    assert raw(kv.port, b"*20\r\n", read_until_close=True) == \
        b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    c = kv.client(password="s3cret", decode_responses=True)
    assert c.ping() is True
    c3 = kv.client(password="s3cret", protocol=3, decode_responses=True)
    assert c3.set("k", "v") and c3.get("k") == "v"
    with pytest.raises(redis.AuthenticationError):
        kv.client(password="nope").ping()


def test_auth_without_password_configured(r):
    with pytest.raises(redis.AuthenticationError) as e:
        r.execute_command("AUTH", "x")
    assert "AUTH <password> called without any password configured" in str(e.value)


def test_client_commands(kv):
    c = kv.client(decode_responses=True)
    cid = c.client_id()
    assert c.client_setname("worker-1")
    assert c.client_getname() == "worker-1"
    assert c.execute_command("CLIENT", "SETINFO", "LIB-NAME", "mylib") == "OK"
    lst = c.client_list()
    me = [x for x in lst if int(x["id"]) == cid][0]
    assert me["name"] == "worker-1" and me["lib-name"] == "mylib" and me["db"] == "0"
    with pytest.raises(redis.ResponseError) as e:
        c.client_setname("bad name")
    assert "Client names cannot contain spaces" in str(e.value)
    other = socket.create_connection(("127.0.0.1", kv.port), timeout=5)
    other.sendall(b"CLIENT ID\r\n")
    oid = int(other.recv(64)[1:].strip())
    assert c.client_kill_filter(_id=oid) == 1
    assert other.recv(64) == b""  # closed by the server
    other.close()
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command("CLIENT", "KILL", "1.2.3.4:5")
    assert str(e.value) == "No such client"


def test_select_dbsize_flush(r):
    r.set("a", 1)
    r.execute_command("SELECT", 3)
    assert r.dbsize() == 0
    r.set("b", 2)
    assert r.dbsize() == 1
    r.execute_command("SELECT", 0)
    assert r.get("b") is None and r.dbsize() == 1
    assert r.flushall() is True
    assert r.dbsize() == 0


def test_info_config_time_command(kv, r):
    info = r.info()
    assert info["redis_version"] == "7.2.0"
    for field in ("connected_clients", "used_memory", "aof_enabled", "total_commands_processed",
                  "expired_keys", "evicted_keys", "keyspace_hits", "maxmemory_policy"):
        assert field in info
    r.set("k", "v")
    assert r.info("keyspace")["db0"]["keys"] == 1
    stats = r.info("commandstats")
    assert stats["cmdstat_set"]["calls"] >= 1
    assert r.config_get("maxmemory") == {"maxmemory": "0"}
    assert r.config_set("maxmemory", "100mb") is True
    assert r.config_get("maxmemory")["maxmemory"] == str(100 * 1024 * 1024)
    assert r.config_set("hash-max-listpack-entries", "64") is True
    assert r.config_get("hash-max-*")["hash-max-listpack-entries"] == "64"
    with pytest.raises(redis.ResponseError) as e:
        r.config_set("no-such-option", "1")
    assert "Unknown option or number of arguments for CONFIG SET - 'no-such-option'" in str(e.value)
    r.config_set("maxmemory", "0")
    t = r.time()
    assert abs(t[0] - time.time()) < 5
    assert r.command_count() > 100
    info = r.command()["get"]
    assert info["arity"] == 2 and "readonly" in info["flags"]
    assert info["first_key_pos"] == 1 and info["step_count"] == 1
    assert "get" in r.execute_command("COMMAND", "INFO", "get")
    docs = raw(kv.port, b"COMMAND DOCS set\r\n")
    assert docs.startswith(b"*2\r\n$3\r\nset\r\n*8\r\n$7\r\nsummary\r\n")
    assert b"$5\r\ngroup\r\n$6\r\nstring\r\n" in docs


def test_redis_cli_one_shot_and_inline(kv):
    def cli(*args, stdin=None):
        return subprocess.run(["redis-cli", "-p", str(kv.port), *args], input=stdin,
                              capture_output=True, text=True, timeout=20).stdout

    assert cli("SET", "greeting", "hello world") == "OK\n"
    assert cli("GET", "greeting") == "hello world\n"
    assert cli("RPUSH", "l", "a", "b") == "2\n"
    assert cli("LRANGE", "l", "0", "-1") == "a\nb\n"
    assert cli("FOO") .startswith("ERR unknown command 'FOO'")
    # interactive-style session through stdin (redis-cli calls COMMAND DOCS)
    out = cli(stdin="SET x 5\nINCR x\nGET x\n")
    assert out.split() == ["OK", "6", "6"]


def test_default_bind_is_loopback(kv):
    # Only 127.0.0.1 (and ::1) are bound, never a wildcard.
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
    lines = [l for l in out.splitlines() if f":{kv.port} " in l + " "]
    assert lines, out
    for l in lines:
        local = l.split()[3]
        assert local.startswith("127.0.0.1:") or local.startswith("[::1]:"), l


def test_quit_and_max_clients(kv_factory):
    kv = kv_factory("--maxclients", "2")
    assert raw(kv.port, b"QUIT\r\nPING\r\n", read_until_close=True) == b"+OK\r\n"
    a = socket.create_connection(("127.0.0.1", kv.port), timeout=5)
    for _ in range(100):  # earlier connections may still be closing
        a.sendall(b"INFO clients\r\n")
        if b"connected_clients:1\r\n" in a.recv(4096):
            break
        time.sleep(0.02)
    b = socket.create_connection(("127.0.0.1", kv.port), timeout=5)
    a.sendall(b"PING\r\n"); assert a.recv(16) == b"+PONG\r\n"
    b.sendall(b"PING\r\n"); assert b.recv(16) == b"+PONG\r\n"
    # (send nothing: data arriving after the close would reset the socket)
    assert raw(kv.port, b"", read_until_close=True) == b"-ERR max number of clients reached\r\n"
    a.close(); b.close()


def test_busy_poll_setting(kv, r):
    assert r.config_get("busy-poll-us") == {"busy-poll-us": "50"}
    r.set("k", "1")
    for us in ("0", "200", "50"):
        assert r.config_set("busy-poll-us", us) is True
        assert r.config_get("busy-poll-us") == {"busy-poll-us": us}
        assert r.incr("k") >= 2  # still serving after each change
    with pytest.raises(redis.ResponseError):
        r.config_set("busy-poll-us", "-1")
    with pytest.raises(redis.ResponseError):
        r.config_set("busy-poll-us", "1000000")
