"""What the TLS attack tests of brisk and brisk-kv share: /proc probes of the
server (open descriptors, CPU time, RSS), a ClientHello as bytes, and a TLS
client driven by hand that can stop at any byte of the handshake."""
from __future__ import annotations

import os
import socket
import ssl
import time

import pytest

HZ = os.sysconf("SC_CLK_TCK")


def fds(pid) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu(pid) -> float:
    """User + system CPU seconds of the process (all threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def rss_kib(pid, field="VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def anon_kib(pid) -> int:
    """Resident anonymous memory (heap, buffers): not the file pages a
    server maps to send from, which are the page cache's (RssFile)."""
    return rss_kib(pid, "RssAnon")


def wait_fds(pid, target, timeout=10.0) -> int:
    deadline = time.monotonic() + timeout
    n = fds(pid)
    while n > target and time.monotonic() < deadline:
        time.sleep(0.1)
        n = fds(pid)
    return n


def client_hello(ctx: ssl.SSLContext) -> bytes:
    """A real ClientHello of ctx (TLS 1.2 and 1.3 offered), as bytes."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


class Manual:
    """A TLS client driven by hand over a blocking socket (ssl.SSLObject),
    so that a test can stop and go on at any byte of the handshake."""

    def __init__(self, ctx: ssl.SSLContext, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname="localhost")

    def first_flight(self) -> bytes:
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.out.read()

    def finish(self):
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                data = self.out.read()
                if data:
                    self.sock.sendall(data)
                got = self.sock.recv(65536)
                if not got:
                    raise ConnectionError("closed during the handshake")
                self.inc.write(got)
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def send(self, data: bytes):
        self.obj.write(data)
        self.sock.sendall(self.out.read())

    def close(self):
        self.sock.close()
