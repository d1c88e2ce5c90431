"""Blocking commands of brisk-kv (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP,
BZPOPMIN, BZPOPMAX, BZMPOP, with LMPOP and ZMPOP), side by side with a real
redis-server where the replies are deterministic: errors, immediate pops,
wake-up order, MULTI, CLIENT UNBLOCK, timeouts, disconnects, and what a
served pop writes to the AOF."""
from __future__ import annotations

import socket
import time

import pytest
import redis


class Conn:
    """A raw RESP connection: send a command, collect what arrives."""

    def __init__(self, port: int):
        self.port = port
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.pending = bytearray()

    def send(self, *args: str | bytes) -> None:
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def cmd(self, *args: str | bytes) -> bytes:
        """Sends args; returns the raw bytes of one whole reply."""
        self.send(*args)
        return self.reply()

    def _fill(self, buf: bytearray, need: int) -> None:
        self.s.settimeout(5)
        while len(buf) < need:
            b = self.s.recv(65536)
            if not b:
                raise ConnectionError("closed")
            buf += b

    def reply(self) -> bytes:
        """Reads exactly one RESP2/RESP3 value (and keeps what follows)."""
        buf = self.pending
        pos = self._value(buf, 0)
        out, self.pending = bytes(buf[:pos]), buf[pos:]
        return out

    def _line(self, buf: bytearray, pos: int) -> int:
        while True:
            i = buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill(buf, len(buf) + 1)

    def _value(self, buf: bytearray, pos: int) -> int:
        self._fill(buf, pos + 1)
        end = self._line(buf, pos)
        t, head = buf[pos:pos + 1], buf[pos + 1:end]
        pos = end + 2
        if t in (b"$", b"=", b"!") and head != b"-1":
            self._fill(buf, pos + int(head) + 2)
            return pos + int(head) + 2
        if t in (b"*", b"~", b">", b"%", b"|") and head != b"-1":
            n = int(head) * (2 if t in (b"%", b"|") else 1)
            for _ in range(n):
                pos = self._value(buf, pos)
        return pos

    def read(self, wait: float = 0.15, first: float | None = None) -> bytes:
        """What arrives: waits up to first (or wait) s for the first bytes,
        then until wait s of silence."""
        got, self.pending = bytes(self.pending), bytearray()
        if got:
            first = wait
        self.s.settimeout(first or wait)
        while True:
            try:
                b = self.s.recv(65536)
            except socket.timeout:
                return got
            if not b:
                return got + b"<closed>"
            got += b
            self.s.settimeout(wait)

    def close(self):
        self.s.close()


def info_field(port: int, name: str) -> str:
    c = Conn(port)
    try:
        text = c.cmd("INFO", "clients").decode()
    finally:
        c.close()
    for line in text.split("\r\n"):
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    raise AssertionError(f"no {name} in INFO")


def wait_blocked(port: int, n: int, timeout: float = 5.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if int(info_field(port, "blocked_clients")) == n:
            return
        time.sleep(0.01)
    raise AssertionError(f"blocked_clients never reached {n}")


@pytest.fixture
def ref_port(reference) -> int:
    return reference.connection_pool.connection_kwargs["port"]


def same(kv_port: int, ref_port: int, cmds: list[tuple], resp3: bool = False) -> None:
    """Runs cmds on one connection to each server; replies must be equal."""
    a, b = Conn(kv_port), Conn(ref_port)
    try:
        if resp3:
            a.cmd("HELLO", "3")
            b.cmd("HELLO", "3")
        for cmd in cmds:
            got, want = a.cmd(*cmd), b.cmd(*cmd)
            assert got == want, f"{cmd}: redis {want!r}\nbrisk {got!r}"
    finally:
        a.close()
        b.close()


# ---- replies and errors that do not block ----

ARG_CASES = [
    ("DEL", "l", "l2", "z", "s", "dst"),
    ("SET", "s", "str"),
    ("RPUSH", "l", "a", "b", "c", "d", "e"),
    ("ZADD", "z", "1", "a", "2.5", "b", "3", "c", "-inf", "m", "inf", "M"),
    ("BLPOP", "l", "0"), ("BRPOP", "l", "l2", "0"), ("BLPOP", "nokey", "l", "0"),
    ("BLPOP", "s", "l", "0"), ("BLPOP", "nokey", "s", "0"),
    ("BLPOP", "l"), ("BLPOP",), ("BRPOP", "l", "abc"), ("BLPOP", "l", "-1"),
    ("BLPOP", "l", ""), ("BLPOP", "l", " 1"), ("BLPOP", "l", "1 "), ("BLPOP", "l", "nan"),
    ("BLPOP", "l", "inf"), ("BLPOP", "l", "-inf"), ("BLPOP", "l", "1e300"),
    ("BLPOP", "l", "1e16"), ("BLPOP", "l", "9.3e15"), ("BLPOP", "l", "1e5000"),
    ("BLPOP", "l", "-9223372036854775808"), ("BLPOP", "l", "9223372036854775807"),
    ("BLPOP", "l", "0x10"), ("BLPOP", "l", "-0.0001"), ("RPUSH", "l", "a", "b", "c", "d"),
    ("BLMPOP", "0", "1", "l", "LEFT"), ("BLMPOP", "0", "2", "nokey", "l", "right", "COUNT", "2"),
    ("LMPOP", "1", "l", "left", "count", "100"), ("LMPOP", "1", "l", "left"),
    ("RPUSH", "l", "a", "b", "c"),
    ("LMPOP", "0", "l", "left"), ("LMPOP", "-1", "l", "left"), ("LMPOP", "a", "l", "left"),
    ("LMPOP", "1.5", "l", "left"), ("LMPOP", "9223372036854775807", "l", "left"),
    ("LMPOP", "9223372036854775808", "l", "left"), ("LMPOP", "2", "l", "left"),
    ("LMPOP", "3", "l", "left"), ("LMPOP", "1", "l", "up"), ("LMPOP", "1", "l", "left", "x"),
    ("LMPOP", "1", "l", "left", "count"), ("LMPOP", "1", "l", "left", "count", "0"),
    ("LMPOP", "1", "l", "left", "count", "-1"),
    ("LMPOP", "1", "l", "left", "count", "-9223372036854775808"),
    ("LMPOP", "1", "l", "left", "count", "9223372036854775808"),
    ("LMPOP", "1", "l", "left", "count", "1", "count", "2"),
    ("LMPOP", "1", "l", "left", "count", "0", "count", "2"),
    ("LMPOP", "1", "s", "left"), ("LMPOP", "2", "nokey", "s", "right", "count", "3"),
    ("LMPOP", "1"), ("LMPOP", "1", "l"), ("LMPOP",),
    ("BLMPOP", "-1", "1", "l", "left"), ("BLMPOP", "x", "1", "l", "left"),
    ("BLMPOP", "-1", "0", "l", "left"), ("BLMPOP", "-1", "1", "l", "up"),
    ("BLMPOP", "0", "1", "l", "left", "count", "x"), ("BLMPOP", "0", "1", "s", "left"),
    ("BLMPOP", "0", "9223372036854775807", "l", "left"),
    ("BLMOVE", "l", "dst", "left", "up", "0"), ("BLMOVE", "l", "dst", "x", "left", "-1"),
    ("BLMOVE", "l", "dst", "left", "left", "x"), ("BLMOVE", "l", "dst", "left", "left", "-1"),
    ("BLMOVE", "l", "dst", "RIGHT", "LEFT", "0"), ("BLMOVE", "l", "s", "left", "left", "0"),
    ("BRPOPLPUSH", "l", "dst", "0"), ("BRPOPLPUSH", "l", "dst", "x"),
    ("BRPOPLPUSH", "s", "dst", "0"), ("LRANGE", "dst", "0", "-1"), ("LRANGE", "l", "0", "-1"),
    ("LMOVE", "nokey", "s", "left", "left"), ("RPOPLPUSH", "nokey", "s"),
    ("LMOVE", "l", "l", "left", "right"), ("LRANGE", "l", "0", "-1"),
    ("BZPOPMIN", "z", "0"), ("BZPOPMAX", "z", "0"), ("BZPOPMIN", "nokey", "z", "0"),
    ("BZPOPMIN", "s", "0"), ("BZPOPMAX", "z", "nan"), ("BZPOPMIN", "z", "-1"),
    ("BZMPOP", "0", "1", "z", "min", "count", "2"), ("ZADD", "z", "5", "q", "6", "r", "7", "s"),
    ("BZMPOP", "0", "2", "x", "z", "max"),
    ("ZMPOP", "1", "z", "max", "count", "10"), ("ZMPOP", "1", "z", "min"),
    ("ZADD", "z", "1", "a", "2", "b"),
    ("ZMPOP", "0", "z", "min"), ("ZMPOP", "1", "z", "mid"), ("ZMPOP", "1", "z", "MIN", "COUNT", "0"),
    ("ZMPOP", "1", "s", "min"), ("ZMPOP", "2", "nokey", "s", "max", "count", "1"),
    ("BZMPOP", "1", "0", "z", "min"), ("BZMPOP", "1", "1", "z", "min", "count", "a"),
    ("BZMPOP", "nan", "1", "z", "min"), ("BZMPOP", "0", "1", "s", "max"),
    ("ZMPOP", "1", "z", "max", "count", "9223372036854775807"), ("EXISTS", "z"),
    ("CLIENT", "UNBLOCK"), ("CLIENT", "UNBLOCK", "x"), ("CLIENT", "UNBLOCK", "1", "foo"),
    ("CLIENT", "UNBLOCK", "1", "timeout", "extra"), ("CLIENT", "UNBLOCK", "999999", "ERROR"),
    ("CLIENT", "UNBLOCK", "-5"),
]


@pytest.mark.parametrize("resp3", [False, True])
def test_replies_and_errors_like_redis(kv, ref_port, resp3):
    same(kv.port, ref_port, ARG_CASES, resp3=resp3)


def test_inside_multi_nothing_blocks(kv, ref_port):
    cmds = [("DEL", "e", "x", "t"), ("RPUSH", "x", "foo", "bar"), ("MULTI",),
            ("BLPOP", "e", "0"), ("BRPOP", "e", "0"), ("BRPOPLPUSH", "e", "t", "0"),
            ("BLMOVE", "e", "t", "LEFT", "LEFT", "0"), ("BZPOPMIN", "e", "0"),
            ("BZPOPMAX", "e", "0"), ("BLMPOP", "0", "1", "e", "left"),
            ("BZMPOP", "0", "1", "e", "min"), ("BRPOPLPUSH", "x", "t", "0"),
            ("BRPOPLPUSH", "x", "t", "0"), ("BRPOPLPUSH", "x", "t", "0"),
            ("LRANGE", "t", "0", "-1"), ("EXEC",)]
    same(kv.port, ref_port, cmds)
    same(kv.port, ref_port, cmds, resp3=True)


# ---- waking up ----

def scenario(port: int) -> list[bytes]:
    """A scripted session with several blocked clients; returns every
    reply in order (deterministic on Redis)."""
    c = [Conn(port) for _ in range(5)]
    out = []
    try:
        c[0].cmd("FLUSHALL")
        # FIFO: three clients on one key, one LPUSH of three elements
        for i in range(3):
            c[i + 1].send("BLPOP", "k", "0")
            wait_blocked(port, i + 1)
        out.append(c[0].cmd("LPUSH", "k", "a", "b", "c"))
        out += [c[i + 1].read(0.05, first=5) for i in range(3)]
        # BLMPOP clients on two keys; both filled in one transaction
        c[1].send("BLMPOP", "0", "2", "b1", "b2", "left", "count", "1")
        wait_blocked(port, 1)
        c[2].send("BLMPOP", "0", "2", "b1", "b2", "right", "count", "10")
        wait_blocked(port, 2)
        c[3].send("BLMPOP", "0", "2", "b1", "b2", "left", "count", "10")
        wait_blocked(port, 3)
        c[4].send("BLMPOP", "0", "2", "b1", "b2", "right", "count", "1")
        wait_blocked(port, 4)
        out.append(c[0].cmd("MULTI") + c[0].cmd("LPUSH", "b1", "a", "b", "c", "d", "e")
                   + c[0].cmd("LPUSH", "b2", "1", "2", "3", "4", "5") + c[0].cmd("EXEC"))
        out += [c[i].read(0.05, first=5) for i in (1, 2, 3)]
        out.append(c[0].cmd("LPUSH", "b2", "x", "y"))
        out.append(c[4].read(0.05, first=5))
        # a chain: BLMOVE into a key a BLPOP waits on, a circular pair
        c[1].send("BLPOP", "target", "0")
        wait_blocked(port, 1)
        c[2].send("BLMOVE", "src", "target", "RIGHT", "LEFT", "0")
        wait_blocked(port, 2)
        out.append(c[0].cmd("RPUSH", "src", "foo"))
        out += [c[2].read(0.05, first=5), c[1].read(0.05, first=5)]
        out.append(c[0].cmd("EXISTS", "src", "target"))
        c[1].send("BRPOPLPUSH", "l1", "l2", "0")
        wait_blocked(port, 1)
        c[2].send("BRPOPLPUSH", "l2", "l1", "0")
        wait_blocked(port, 2)
        out.append(c[0].cmd("RPUSH", "l1", "v"))
        out += [c[1].read(0.05, first=5), c[2].read(0.05, first=5)]
        out.append(c[0].cmd("LRANGE", "l1", "0", "-1") + c[0].cmd("LRANGE", "l2", "0", "-1"))
        # wrong destination type: an error, nothing moved, the next is served
        c[0].cmd("SET", "bad", "x")
        c[1].send("BRPOPLPUSH", "w", "bad", "0")
        wait_blocked(port, 1)
        c[2].send("BRPOPLPUSH", "w", "good", "0")
        wait_blocked(port, 2)
        out.append(c[0].cmd("RPUSH", "w", "a", "b"))
        out += [c[1].read(0.05, first=5), c[2].read(0.05, first=5)]
        out.append(c[0].cmd("LRANGE", "w", "0", "-1") + c[0].cmd("LRANGE", "good", "0", "-1"))
        # LPUSH + DEL (+ SET) in MULTI does not wake; the key created later does
        c[1].send("BZPOPMIN", "zk", "0")
        wait_blocked(port, 1)
        out.append(c[0].cmd("MULTI") + c[0].cmd("ZADD", "zk", "0", "foo")
                   + c[0].cmd("DEL", "zk") + c[0].cmd("SET", "zk", "s") + c[0].cmd("EXEC"))
        out.append(c[1].read(0.2))
        out.append(c[0].cmd("DEL", "zk") + c[0].cmd("ZADD", "zk", "1", "bar", "2", "baz"))
        out.append(c[1].read(0.05, first=5))
        # keys moved into place: RENAME, COPY, MOVE, SWAPDB
        c[1].send("BLPOP", "moved", "0")
        wait_blocked(port, 1)
        out.append(c[0].cmd("RPUSH", "tmp", "x", "y") + c[0].cmd("RENAME", "tmp", "moved"))
        out.append(c[1].read(0.05, first=5))
        c[1].send("BZMPOP", "0", "1", "copied", "max", "count", "5")
        wait_blocked(port, 1)
        out.append(c[0].cmd("ZADD", "zsrc", "1", "a", "2", "b") + c[0].cmd("COPY", "zsrc", "copied"))
        out.append(c[1].read(0.05, first=5))
        c[1].send("BRPOP", "inone", "0")
        wait_blocked(port, 1)
        out.append(c[0].cmd("SELECT", "1") + c[0].cmd("RPUSH", "inone", "q")
                   + c[0].cmd("MOVE", "inone", "0") + c[0].cmd("SELECT", "0"))
        out.append(c[1].read(0.05, first=5))
        c[1].send("SELECT", "9")
        out.append(c[1].read(0.05, first=5))
        c[1].send("BRPOP", "sw", "5")
        wait_blocked(port, 1)
        out.append(c[0].cmd("SELECT", "1") + c[0].cmd("RPUSH", "sw", "hello")
                   + c[0].cmd("SWAPDB", "1", "9") + c[0].cmd("SELECT", "0"))
        out.append(c[1].read(0.05, first=5))
        # pipelined after a blocking command: runs after it is served
        c[1].send("SELECT", "0")
        c[1].read(0.05, first=5)
        c[1].s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$1\r\np\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n"
                       b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n")
        wait_blocked(port, 1)
        out.append(c[1].read(0.1))
        out.append(c[0].cmd("RPUSH", "p", "1"))
        out.append(c[1].read(0.05, first=5))
        # same key twice in one command counts once
        c[1].send("BZPOPMIN", "z1", "z2", "z2", "z1", "0")
        wait_blocked(port, 1)
        out.append(c[0].cmd("ZADD", "z2", "1", "b"))
        out.append(c[1].read(0.05, first=5))
        out.append(c[0].cmd("INFO", "clients").split(b"blocked_clients:")[1].split(b"\r\n")[0])
    finally:
        for x in c:
            x.close()
    return out


def test_wake_up_order_like_redis(kv, ref_port):
    want = scenario(ref_port)
    got = scenario(kv.port)
    assert len(got) == len(want)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"step {i}: redis {w!r}\nbrisk {g!r}"


def test_timeouts(kv):
    c = Conn(kv.port)
    for cmd, reply in [(("BLPOP", "nokey", "0.1"), b"*-1\r\n"),
                       (("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.1"), b"*-1\r\n"),
                       (("BZMPOP", "0.1", "1", "nokey", "MIN"), b"*-1\r\n"),
                       (("BLPOP", "nokey", "0.001"), b"*-1\r\n")]:
        t0 = time.monotonic()
        assert c.cmd(*cmd) == reply
        took = time.monotonic() - t0
        want = float(cmd[-1] if cmd[0] != "BZMPOP" else cmd[1])
        assert want - 0.005 <= took < want + 0.5, (cmd, took)
    assert info_field(kv.port, "blocked_clients") == "0"
    assert info_field(kv.port, "clients_in_timeout_table") == "0"
    # 0 and a timeout past the end of time block until something arrives
    for t in ("0", "-0.0001", "9.2e15", "9223372036854775"):
        c.send("BRPOP", "k", t)
        wait_blocked(kv.port, 1)
        time.sleep(0.3)
        assert c.read(0.05) == b""
        assert kv.client().rpush("k", "v") == 1
        assert c.read(0.05, first=5) == b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n"
    c.close()


def test_client_unblock_and_list_flags(kv, ref_port):
    def run(port):
        a, b = Conn(port), Conn(port)
        out = []
        try:
            cid = a.cmd("CLIENT", "ID").strip()[1:]
            for how in ((), ("TIMEOUT",), ("ERROR",), ("timeout",), ("error",)):
                a.send("BLMPOP", "0", "1", "l", "RIGHT")
                wait_blocked(port, 1)
                info = b.cmd("CLIENT", "LIST", "ID", cid)
                out.append(b" flags=b " in info)
                out.append(b.cmd("CLIENT", "UNBLOCK", cid, *how))
                out.append(a.read(0.05, first=5))
                out.append(b.cmd("CLIENT", "UNBLOCK", cid, *how))
            out.append(b" flags=N " in b.cmd("CLIENT", "LIST", "ID", cid))
            # still usable afterwards
            a.send("BZPOPMAX", "z", "0")
            wait_blocked(port, 1)
            out.append(b.cmd("ZADD", "z", "3", "c"))
            out.append(a.read(0.05, first=5))
            out.append(b.cmd("CLIENT", "UNBLOCK", b.cmd("CLIENT", "ID").strip()[1:]))
        finally:
            a.close()
            b.close()
        return out

    assert run(kv.port) == run(ref_port)


def test_disconnect_while_blocked(kv):
    r = kv.client(decode_responses=True)
    conns = [Conn(kv.port) for _ in range(50)]
    for i, c in enumerate(conns):
        c.send("BLPOP", "k", f"k{i % 5}", "0" if i % 2 else "100")
    wait_blocked(kv.port, 50)
    assert info_field(kv.port, "total_blocking_keys") == "6"
    assert info_field(kv.port, "clients_in_timeout_table") == "25"
    for c in conns[:49]:
        c.close()
    wait_blocked(kv.port, 1)
    # the one left is served; the element goes to it, not to a dead client
    assert r.rpush("k", "a", "b") == 2
    assert conns[49].read(0.05, first=5) == b"*2\r\n$1\r\nk\r\n$1\r\na\r\n"
    assert r.lrange("k", 0, -1) == ["b"]
    assert info_field(kv.port, "total_blocking_keys") == "0"
    # a client killed while blocked and one closed between being served and
    # running its pipelined commands
    a = Conn(kv.port)
    aid = a.cmd("CLIENT", "ID").strip()[1:].decode()
    a.send("BLPOP", "q", "0")
    wait_blocked(kv.port, 1)
    assert r.execute_command("CLIENT", "KILL", "ID", aid) == 1
    wait_blocked(kv.port, 0)
    b = Conn(kv.port)
    b.s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n")
    wait_blocked(kv.port, 1)
    r.rpush("q", "1")
    b.close()
    assert r.ping()
    conns[49].close()


def test_serving_is_exact_with_many_waiters(kv):
    """200 clients on 3 keys, fed in one MULTI: each element goes to exactly
    one client, in FIFO order per key."""
    r = kv.client(decode_responses=True)
    conns = []
    for i in range(200):
        c = Conn(kv.port)
        c.send("BLPOP", f"k{i % 3}", "0")
        conns.append(c)
    wait_blocked(kv.port, 200)
    p = r.pipeline(transaction=True)
    for k in range(3):
        p.rpush(f"k{k}", *[f"{k}-{n}" for n in range(80)])
    p.execute()
    wait_blocked(kv.port, 0)
    seen = {0: 0, 1: 0, 2: 0}
    for i, c in enumerate(conns):
        k = i % 3
        want = f"{k}-{seen[k]}".encode()
        seen[k] += 1
        key = f"k{k}".encode()
        assert c.reply() == b"*2\r\n$2\r\n%s\r\n$%d\r\n%s\r\n" % (key, len(want), want)
        c.close()
    assert [r.llen(f"k{k}") for k in range(3)] == [80 - 67, 80 - 67, 80 - 66]


def test_served_pops_reach_the_aof_as_plain_pops(kv_factory, tmp_path):
    kv = kv_factory("--appendonly", "yes", "--appendfsync", "always")
    r = kv.client(decode_responses=True)
    a, b, z = Conn(kv.port), Conn(kv.port), Conn(kv.port)
    a.send("BLMPOP", "0", "1", "src", "right", "count", "2")
    wait_blocked(kv.port, 1)
    b.send("BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")
    wait_blocked(kv.port, 2)
    z.send("BZPOPMAX", "zz", "0")
    wait_blocked(kv.port, 3)
    r.rpush("src", "1", "2", "3", "4")
    r.zadd("zz", {"m": 1, "n": 2})
    assert a.read(0.05, first=5) == b"*2\r\n$3\r\nsrc\r\n*2\r\n$1\r\n4\r\n$1\r\n3\r\n"
    assert b.read(0.05, first=5) == b"$1\r\n1\r\n"
    assert z.read(0.05, first=5) == b"*3\r\n$2\r\nzz\r\n$1\r\nn\r\n$1\r\n2\r\n"
    assert r.blpop(["src"], 1) == ("src", "2")
    state = (r.lrange("src", 0, -1), r.lrange("dst", 0, -1), r.zrange("zz", 0, -1))
    for c in (a, b, z):
        c.close()
    kv.stop()
    aof = b"".join(p.read_bytes() for p in tmp_path.rglob("*.aof*") if p.is_file())
    for word in (b"BLMPOP", b"BLMOVE", b"BZPOPMAX", b"BLPOP", b"blpop"):
        assert word not in aof
    kv2 = kv_factory("--appendonly", "yes", workdir=tmp_path)
    r2 = kv2.client(decode_responses=True)
    assert (r2.lrange("src", 0, -1), r2.lrange("dst", 0, -1), r2.zrange("zz", 0, -1)) == state


def test_watch_sees_a_served_push(kv):
    r = kv.client(decode_responses=True)
    blocked, watcher = Conn(kv.port), kv.client(decode_responses=True)
    blocked.send("BRPOPLPUSH", "srcl", "dstl", "0")
    wait_blocked(kv.port, 1)
    p = watcher.pipeline(transaction=True)
    p.watch("dstl")
    p.multi()
    p.get("x")
    r.lpush("srcl", "e")
    with pytest.raises(redis.WatchError):
        p.execute()
    assert blocked.read(0.05, first=5) == b"$1\r\ne\r\n"
    blocked.close()


def test_hostile_timeouts_leave_the_server_alive(kv):
    c = Conn(kv.port)
    for t in ("1e300", "-1", "nan", "inf", "-inf", "1e-300", "1" * 300, "0." + "0" * 400 + "1",
              "-9223372036854775808", "18446744073709551616", "1e18", "\x00", "0x1p1000"):
        c.send("BLPOP", "nokey", t)
        c.send("PING")
        got = c.read(0.05, first=5)
        if not got.endswith(b"+PONG\r\n"):
            got += c.read(0.05, first=2)
        assert got.endswith(b"+PONG\r\n"), (t, got)
    assert info_field(kv.port, "blocked_clients") == "0"
    c.close()


def test_waiter_leaves_while_its_key_is_ready(kv, ref_port):
    """The key is made ready inside a transaction whose next command takes
    the only waiter away (CLIENT UNBLOCK, CLIENT KILL): nobody is served,
    the element stays, and the server keeps its bookkeeping straight."""
    def run(port):
        a, b, w = Conn(port), Conn(port), Conn(port)
        out = []
        try:
            w.cmd("FLUSHALL")
            aid = a.cmd("CLIENT", "ID").strip()[1:]
            bid = b.cmd("CLIENT", "ID").strip()[1:]
            a.send("BLPOP", "k", "0")
            wait_blocked(port, 1)
            out.append(w.cmd("MULTI") + w.cmd("RPUSH", "k", "x") + w.cmd("CLIENT", "UNBLOCK", aid)
                       + w.cmd("EXEC"))
            out.append(a.read(0.05, first=5))
            b.send("BZPOPMIN", "z", "0")
            wait_blocked(port, 1)
            out.append(w.cmd("MULTI") + w.cmd("ZADD", "z", "1", "m")
                       + w.cmd("CLIENT", "KILL", "ID", bid) + w.cmd("EXEC"))
            out.append(w.cmd("LRANGE", "k", "0", "-1") + w.cmd("ZRANGE", "z", "0", "-1"))
            # blocked again on the same keys afterwards: served normally
            a.send("BLPOP", "z", "k", "0")
            out.append(a.read(0.05, first=5))
        finally:
            for x in (a, b, w):
                x.close()
        return out

    assert run(kv.port) == run(ref_port)
    assert info_field(kv.port, "blocked_clients") == "0"
    assert info_field(kv.port, "total_blocking_keys") == "0"
