#!/usr/bin/env python3
"""Fixed-count client for the per-request cost counts (syscalls under strace,
instructions under callgrind). It keeps every connection busy at once:

  each round, it writes DEPTH requests on every connection (one write per
  connection, all connections written before any is read), then reads every
  reply of every connection.

With DEPTH 1 that is CONNS requests in flight, one per connection, so a
server that batches its event loop wakes up once for several connections.
Fails (exit 1) on a wrong status or length, an error reply, or a closed
connection.

Usage:
  loadclient.py http|https HOST PORT PATH CONNS ROUNDS [--depth D] [--expect-len N]
                     [--expect-body TEXT]
      https: the same over TLS (certificate not verified)
  loadclient.py resp HOST PORT - CONNS ROUNDS [--depth D]
      resp: alternating SET key:<n> <64-byte value> and GET key:<n>, n < 1000
Prints one line: "ok <requests>".
"""
import argparse
import socket
import ssl
import sys


class Conn:
    def __init__(self, host, port, tls=None):
        self.sock = socket.create_connection((host, port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            self.sock = tls.wrap_socket(self.sock, server_hostname=host)
        self.buf = b""

    def fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError("server closed the connection")
        self.buf += chunk

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                out, self.buf = self.buf[:i], self.buf[i + 2:]
                return out
            self.fill()

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def read_http(c, expect_len, expect_body):
    while b"\r\n\r\n" not in c.buf:
        c.fill()
    head, c.buf = c.buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise RuntimeError(f"bad status line {lines[0]!r}")
    if parts[1] != "200":
        raise RuntimeError(f"status {parts[1]}")
    length = None
    for l in lines[1:]:
        name, _, value = l.partition(":")
        n = name.strip().lower()
        if n == "content-length":
            length = int(value)
        elif n == "transfer-encoding":
            raise RuntimeError("chunked response: expected Content-Length")
        elif n == "connection" and value.strip().lower() == "close":
            raise RuntimeError("server answered Connection: close")
    if length is None:
        raise RuntimeError("response without Content-Length")
    if expect_len is not None and length != expect_len:
        raise RuntimeError(f"Content-Length {length}, expected {expect_len}")
    # Drop big bodies chunk by chunk instead of keeping them.
    have = 0
    body = b""
    while have < length:
        if not c.buf:
            c.fill()
        take = min(length - have, len(c.buf))
        if expect_body is not None:
            body += c.buf[:take]
        c.buf = c.buf[take:]
        have += take
    if expect_body is not None and body != expect_body:
        raise RuntimeError(f"body {body[:60]!r}, expected {expect_body!r}")


def read_resp(c):
    l = c.line()
    kind = l[:1]
    if kind == b"+":
        return
    if kind == b"$":
        n = int(l[1:])
        if n >= 0:
            c.take(n + 2)
        return
    if kind == b":":
        return
    raise RuntimeError(f"unexpected reply {l[:80]!r}")


def resp_cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("proto", choices=("http", "https", "resp"))
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("path")
    ap.add_argument("conns", type=int)
    ap.add_argument("rounds", type=int)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--expect-len", type=int)
    ap.add_argument("--expect-body")
    a = ap.parse_args()
    expect_body = a.expect_body.encode() if a.expect_body is not None else None

    tls = None
    if a.proto == "https":
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
        a.proto = "http"
    conns = [Conn(a.host, a.port, tls) for _ in range(a.conns)]
    value = b"v" * 64
    total = 0
    n = 0
    for _ in range(a.rounds):
        for c in conns:
            if a.proto == "http":
                req = (f"GET {a.path} HTTP/1.1\r\nHost: {a.host}:{a.port}\r\n\r\n").encode()
                c.sock.sendall(req * a.depth)
            else:
                batch = []
                for _ in range(a.depth):
                    key = b"key:%d" % (n % 1000)
                    batch.append(resp_cmd(b"SET", key, value) if n % 2 == 0 else resp_cmd(b"GET", key))
                    n += 1
                c.sock.sendall(b"".join(batch))
        for c in conns:
            for _ in range(a.depth):
                if a.proto == "http":
                    read_http(c, a.expect_len, expect_body)
                else:
                    read_resp(c)
                total += 1
    for c in conns:
        if c.buf:
            raise RuntimeError("unexpected bytes after the last reply")
        c.sock.close()
    print(f"ok {total}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, ValueError) as e:
        print(f"loadclient: {e}", file=sys.stderr)
        sys.exit(1)
