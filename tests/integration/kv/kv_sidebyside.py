"""Side-by-side helpers for the kv tests: a raw RESP client and checks that
brisk-kv and a real redis-server give byte-identical replies, in RESP2 and
RESP3."""
from __future__ import annotations

import socket

import pytest
import redis


# ---- a raw RESP client: compares replies byte for byte ----

def _resp_end(b: bytes, i: int):
    """Index just past the RESP value starting at b[i], or None if incomplete."""
    if i >= len(b):
        return None
    nl = b.find(b"\r\n", i)
    if nl < 0:
        return None
    t = b[i:i + 1]
    line = b[i + 1:nl]
    if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
        return nl + 2
    if t in (b"$", b"=", b"!"):
        n = int(line)
        if n < 0:
            return nl + 2
        end = nl + 2 + n + 2
        return end if end <= len(b) else None
    if t in (b"*", b"~", b">", b"%", b"|"):
        n = int(line)
        if n < 0:
            return nl + 2
        if t in (b"%", b"|"):
            n *= 2
        j = nl + 2
        for _ in range(n):
            j = _resp_end(b, j)
            if j is None:
                return None
        return j
    raise AssertionError(f"bad RESP type {t!r} in {b[i:i + 40]!r}")


class Raw:
    def __init__(self, port: int, resp3: bool = False):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""
        if resp3:
            self.call("HELLO", "3")  # server identity differs: not compared

    def call(self, *args) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.read_reply()

    def read_reply(self) -> bytes:
        """The next whole reply (or push) on the connection, as raw bytes."""
        while True:
            end = _resp_end(self.buf, 0)
            if end is not None:
                reply, self.buf = self.buf[:end], self.buf[end:]
                return reply
            chunk = self.s.recv(1 << 16)
            assert chunk, "connection closed"
            self.buf += chunk

    def close(self):
        self.s.close()


def _port(c: redis.Redis) -> int:
    return c.connection_pool.connection_kwargs["port"]


@pytest.fixture
def pair(kv, reference):
    """(brisk, redis) raw clients, RESP2 and RESP3."""
    conns = [Raw(kv.port), Raw(_port(reference)), Raw(kv.port, True), Raw(_port(reference), True)]
    yield conns
    for c in conns:
        c.close()


def same(pair, *cmd, resp3=True):
    b2, r2, b3, r3 = pair
    want = r2.call(*cmd)
    got = b2.call(*cmd)
    assert got == want, f"{cmd}: redis {want[:300]!r} brisk {got[:300]!r}"
    if resp3:
        want = r3.call(*cmd)
        got = b3.call(*cmd)
        assert got == want, f"RESP3 {cmd}: redis {want[:300]!r} brisk {got[:300]!r}"
    return want


def both(pair, *cmd):
    """Runs a write on both (RESP2 connections) and checks the replies."""
    return same(pair, *cmd, resp3=False)
