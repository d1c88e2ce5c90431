"""The Lua debugger (SCRIPT DEBUG YES / SYNC, what redis-cli --ldb drives),
byte for byte against a real redis-server 7: the same debugger sessions sent
to both on raw sockets, every byte that comes back compared."""
from __future__ import annotations

import socket
import subprocess
import time

import pytest


def enc(*args) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def _values(data: bytes):
    """How many whole RESP values data holds, or None when it ends inside one."""
    n, i = 0, 0
    while i < len(data):
        todo = 1
        while todo:
            e = data.find(b"\r\n", i)
            if e < 0:
                return None
            kind, head = data[i:i + 1], data[i + 1:e]
            i = e + 2
            todo -= 1
            if kind in b"*~%" and head != b"-1":
                todo += int(head) * (2 if kind == b"%" else 1)
            elif kind == b"$" and head != b"-1":
                i += int(head) + 2
                if i > len(data):
                    return None
        n += 1
    return n


def read_reply(s: socket.socket) -> bytes:
    """One whole reply (and, once the session ended, everything up to the
    close: b"<EOF>" at the end; b"<RST>" when the server closed with our
    input unread, which may also drop what it sent last)."""
    s.settimeout(10)
    data = b""
    try:
        while True:
            if b"<endsession>" not in data and _values(data):
                return data
            d = s.recv(65536)
            if not d:
                return data + b"<EOF>"
            data += d
    except socket.timeout:
        return data
    except ConnectionResetError:
        return b"<RST>"


def session(port, steps):
    """Sends each step (a tuple of arguments, or raw bytes) and records
    what comes back (nothing more after the server closed)."""
    out = []
    with socket.create_connection(("127.0.0.1", port)) as s:
        for step in steps:
            s.sendall(step if isinstance(step, bytes) else enc(*step))
            out.append(read_reply(s))
            if out[-1].endswith((b"<EOF>", b"<RST>")):
                break
    return out


def same(mine, theirs, steps):
    assert len(mine) == len(theirs), (mine, theirs)
    for step, a, b in zip(steps, mine, theirs):
        if a == b"<RST>" or b == b"<RST>":  # what came before may be lost
            assert a.endswith((b"<EOF>", b"<RST>")) and b.endswith((b"<EOF>", b"<RST>"))
        else:
            assert a == b, (step, a, b)


def port_of(client) -> int:
    return client.connection_pool.connection_kwargs["port"]


SCRIPT = ("local a = 1\nlocal t = {1,'x',{k=2}}\nredis.call('set','x',a)\n"
          "redis.debug('hi', a, t)\nredis.breakpoint()\nlocal z = redis.pcall('nosuch')\n"
          "return a")

EVERY_COMMAND = [
    ("eval", SCRIPT, "0"), ("s",), ("p",), ("p", "t"), ("p", "ARGV"), ("p", "nope"), ("l",),
    ("l", "2", "1"), ("w",), ("b",), ("b", "4"), ("b", "99"), ("b", "-4"), ("b", "-9"),
    ("b", "x"), ("b", "0"), ("t",), ("e", "1+1"), ("e", "local q = 2"), ("e", "error('boom')"),
    ("e", "(("), ("r", "get", "x"), ("r", "nosuch"), ("r", "set", "k", "v"),
    ("r", "lpush", "l", "a", "b"), ("r", "lrange", "l", "0", "-1"), ("r", "hset", "h", "f", "v"),
    ("r", "hgetall", "h"), ("r", "incr", "h"), ("r",), ("m",), ("m", "10"),
    ("e", "string.rep('y', 200)"), ("e", "string.rep('z', 200)"), ("m", "0"), ("h",), ("xyz",),
    ("c",), ("s",), ("c",),
]


@pytest.mark.parametrize("mode", ["sync", "yes"])
def test_every_debugger_command_as_redis(kv, reference, mode):
    steps = [("script", "debug", mode)] + EVERY_COMMAND
    mine = session(kv.port, steps)
    theirs = session(port_of(reference), steps)
    same(mine, theirs, steps)
    assert mine[-1].endswith(b"<EOF>")  # the session ends the connection


@pytest.mark.parametrize("steps", [
    # abort in each mode: the reply is the script's error, the link closes
    [("script", "debug", "yes"), ("eval", "redis.call('set','fk','1')\nreturn 5", "0"), ("a",)],
    [("script", "debug", "sync"), ("eval", "redis.call('set','sk','1')\nreturn 5", "0"), ("a",)],
    # a script that does not compile ends the session at once
    [("script", "debug", "sync"), ("eval", "return {1,2", "0")],
    # a debugger command that is not an array: a protocol error ends it
    [("script", "debug", "sync"), ("eval", "local x = 1\nreturn x", "0"), b"PING\r\n"],
    # empty arguments, NULs, an oversized argument: protocol errors too
    [("script", "debug", "sync"), ("eval", "return 1", "0"), enc("")],
    [("script", "debug", "sync"), ("eval", "return 1", "0"), enc("x" * 1025)],
    [("script", "debug", "sync"), ("eval", "return 1", "0"), enc("hello\0world")],
    # stepping off the end, an error raised mid-way, KEYS and ARGV
    [("script", "debug", "sync"), ("eval", "local x = 1\nreturn x", "0"), ("s",), ("s",)],
    [("script", "debug", "sync"), ("eval", "local x = 1\nerror('bad')\nreturn x", "0"), ("c",)],
    [("script", "debug", "sync"), ("eval", "return redis.call('get', KEYS[1])", "1", "k", "a1"),
     ("p", "KEYS"), ("p", "ARGV"), ("t",), ("c",)],
    # nested functions: trace and print across frames, breakpoints
    [("script", "debug", "sync"),
     ("eval", "local function f(n)\n  local m = n * 2\n  return m\nend\nlocal r = f(3)\n"
              "return r", "0"), ("b", "3"), ("c",), ("t",), ("p",), ("p", "n"), ("b",), ("c",)],
    # redis.call errors while stepping
    [("script", "debug", "sync"), ("eval", "redis.call('set','s','x')\n"
                                          "return redis.pcall('incr','s')", "0"),
     ("s",), ("s",), ("c",)],
    # the stack: a debugger redis command of 100 arguments
    [("script", "debug", "sync"), ("eval", "return 'hello'", "0"),
     enc("redis", *(["test"] * 100)), ("c",)],
    # outside a session, the debugger functions do nothing; EVALSHA refused
    [("eval", "return redis.breakpoint()", "0"), ("eval", "return redis.debug('x')", "0"),
     ("script", "debug", "maybe"), ("multi",), ("script", "debug", "yes"), ("exec",),
     ("script", "debug", "yes"), ("evalsha", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"),
     ("script", "debug", "no"), ("eval", "return 1", "0")],
    # inside MULTI the script runs without the debugger
    [("script", "debug", "sync"), ("multi",), ("eval", "return 7", "0"), ("exec",)],
])
def test_sessions_as_redis(kv, reference, steps):
    same(session(kv.port, steps), session(port_of(reference), steps), steps)


def test_sync_keeps_changes_fork_does_not(kv, reference):
    for port, client in ((kv.port, kv.client()), (port_of(reference), reference)):
        session(port, [("script", "debug", "yes"), ("eval", "redis.call('set','f','1')", "0"),
                       ("c",)])
        session(port, [("script", "debug", "sync"), ("eval", "redis.call('set','s','1')", "0"),
                       ("c",)])
        assert client.get("f") is None
        assert client.get("s") == b"1"


def test_forked_session_leaves_server_serving_and_is_reaped(kv):
    """A forked session blocks only its child: the server answers others
    meanwhile, and the child is gone after the client leaves."""
    s = socket.create_connection(("127.0.0.1", kv.port))
    s.sendall(enc("script", "debug", "yes"))
    assert read_reply(s) == b"+OK\r\n"
    s.sendall(enc("eval", "local x = 1\nreturn x", "0"))
    assert b"Stopped at 1" in read_reply(s)
    c = kv.client()
    assert c.ping()
    kids = subprocess.run(["pgrep", "-P", str(kv.proc.pid)], capture_output=True, text=True)
    assert kids.stdout.split(), "no debugging child"
    s.close()  # the child runs the script to its end and exits
    deadline = time.time() + 10
    while time.time() < deadline:
        kids = subprocess.run(["pgrep", "-P", str(kv.proc.pid)], capture_output=True, text=True)
        if not kids.stdout.split():
            break
        time.sleep(0.1)
    assert not kids.stdout.split(), "the debugging child was not reaped"
    assert c.ping()


def test_sync_session_client_gone_mid_script(kv):
    """The client leaves at a stop: the script runs on to its end, the
    server serves again."""
    s = socket.create_connection(("127.0.0.1", kv.port))
    s.sendall(enc("script", "debug", "sync"))
    read_reply(s)
    s.sendall(enc("eval", "redis.call('set','gone','1')\nreturn 1", "0"))
    assert b"Stopped at 1" in read_reply(s)
    s.close()
    c = kv.client()
    deadline = time.time() + 10
    while time.time() < deadline and c.get("gone") is None:
        time.sleep(0.05)
    assert c.get("gone") == b"1"


def test_huge_debugger_input_fails_the_script(kv):
    """A command that never completes past 1 MB ends the script with an
    error, not unbounded memory."""
    s = socket.create_connection(("127.0.0.1", kv.port))
    s.sendall(enc("script", "debug", "sync"))
    read_reply(s)
    s.sendall(enc("eval", "return 1", "0"))
    read_reply(s)
    s.sendall(b"*1\r\n$1000\r\n" + b"x" * 100)  # stays incomplete: 1..1024 bytes allowed
    try:
        s.sendall(b"x" * (1 << 20))
    except (BrokenPipeError, ConnectionResetError):
        pass
    got = read_reply(s)
    assert got == b"<RST>" or b"max client buffer reached" in got or b"protocol error" in got, got
    assert kv.client().ping()
