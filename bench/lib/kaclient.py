#!/usr/bin/env python3
"""Fixed-count keep-alive HTTP/1.1 client for the syscalls-per-request count.

Opens CONNS connections, then sends PER_CONN requests on each, round-robin,
with exactly one request in flight at a time, reading every response in full
(headers + Content-Length body). Fails (exit 1) on any non-200 status, wrong
body length, or a connection the server closed.

Usage: kaclient.py HOST PORT PATH CONNS PER_CONN [EXPECTED_LENGTH]
Prints one line: "ok <requests> <bytes>".
"""
import socket
import sys


def read_response(sock, buf, path):
    """Read one response from sock; buf holds bytes already received.
    Returns (status, body_length, leftover)."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            break
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"server closed the connection while reading headers of {path}")
        buf += chunk
    head = buf[:end].decode("latin-1")
    rest = buf[end + 4:]
    lines = head.split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise RuntimeError(f"bad status line: {lines[0]!r}")
    status = int(parts[1])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        n = name.strip().lower()
        if n == "content-length":
            length = int(value.strip())
        elif n == "connection" and value.strip().lower() == "close":
            raise RuntimeError("server answered Connection: close on a keep-alive request")
        elif n == "transfer-encoding":
            raise RuntimeError("chunked response: expected Content-Length")
    if length is None:
        raise RuntimeError("response without Content-Length")
    # Count the body and drop it; keep only bytes past its end.
    have = len(rest)
    leftover = rest[length:] if have > length else b""
    while have < length:
        chunk = sock.recv(min(1 << 20, max(65536, length - have)))
        if not chunk:
            raise RuntimeError("server closed the connection mid-body")
        have += len(chunk)
        if have > length:
            leftover = chunk[len(chunk) - (have - length):]
    return status, length, leftover


def main():
    if len(sys.argv) not in (6, 7):
        print(__doc__, file=sys.stderr)
        return 2
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    conns, per_conn = int(sys.argv[4]), int(sys.argv[5])
    expected = int(sys.argv[6]) if len(sys.argv) == 7 else None
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").encode()

    socks = []
    for _ in range(conns):
        s = socket.create_connection((host, port), timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks.append([s, b""])

    total_req = total_bytes = 0
    for _ in range(per_conn):
        for entry in socks:
            s, buf = entry
            s.sendall(request)
            status, length, leftover = read_response(s, buf, path)
            if status != 200:
                raise RuntimeError(f"status {status} for {path}")
            if expected is not None and length != expected:
                raise RuntimeError(f"Content-Length {length} for {path}, expected {expected}")
            if leftover:
                raise RuntimeError("unexpected bytes after the response")
            entry[1] = leftover
            total_req += 1
            total_bytes += length
    for s, _ in socks:
        s.close()
    print(f"ok {total_req} {total_bytes}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError) as e:
        print(f"kaclient: {e}", file=sys.stderr)
        sys.exit(1)
