"""Malformed and hostile requests. Each must get exactly one error response,
after which the server closes the connection; a request smuggled behind the
bad one (appended to every case) must never be answered."""
from __future__ import annotations

import socket
import struct

import pytest

from brisk_testlib import req

SMUGGLED = req("GET", "/p/9.txt")
H = b"Host: localhost\r\n"


def post(headers: bytes, body: bytes = b"") -> bytes:
    return b"POST /hello.txt HTTP/1.1\r\n" + H + headers + b"\r\n" + body


def get(headers: bytes = b"", target=b"/hello.txt") -> bytes:
    return b"GET " + target + b" HTTP/1.1\r\n" + H + headers + b"\r\n"


CHUNKED = b"Transfer-Encoding: chunked\r\n"

CASES = [
    # --- request line
    ("garbage", b"GARBAGE\r\n\r\n", {400}),
    ("method-only", b"GET\r\n\r\n", {400}),
    ("tls-client-hello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40 + b"\r\n\r\n", {400}),
    ("extra-token", b"GET /hello.txt HTTP/1.1 extra\r\n" + H + b"\r\n", {400}),
    ("space-in-target", b"GET /a b.txt HTTP/1.1\r\n" + H + b"\r\n", {400}),
    ("target-no-slash", b"GET hello.txt HTTP/1.1\r\n" + H + b"\r\n", {400}),
    ("ctl-in-target", b"GET /hel\x01lo.txt HTTP/1.1\r\n" + H + b"\r\n", {400}),
    ("del-in-target", b"GET /hel\x7flo.txt HTTP/1.1\r\n" + H + b"\r\n", {400}),
    ("nul-in-target", b"GET /hel\x00lo.txt HTTP/1.1\r\n" + H + b"\r\n", {400}),
    ("lowercase-version", b"GET /hello.txt http/1.1\r\n" + H + b"\r\n", {400}),
    ("bad-version-1", b"GET /hello.txt HTTP/1.1x\r\n" + H + b"\r\n", {400}),
    ("bad-version-2", b"GET /hello.txt HTTP/11\r\n" + H + b"\r\n", {400}),
    ("bad-method-chars", b"G(T /hello.txt HTTP/1.1\r\n" + H + b"\r\n", {400, 501}),
    ("lowercase-method", b"get /hello.txt HTTP/1.1\r\n" + H + b"\r\n", {501}),
    ("unknown-method", b"FOO /hello.txt HTTP/1.1\r\n" + H + b"\r\n", {501}),
    ("http-2.0", b"GET / HTTP/2.0\r\n" + H + b"\r\n", {505}),
    ("http-3.0", b"GET / HTTP/3.0\r\n" + H + b"\r\n", {505}),
    ("request-line-too-long", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + H + b"\r\n", {414}),
    # --- headers
    ("missing-host", b"GET /hello.txt HTTP/1.1\r\nUser-Agent: t\r\n\r\n", {400}),
    ("invalid-host", b"GET /hello.txt HTTP/1.1\r\nHost: a b\r\n\r\n", {400}),  # RFC 9112 3.2
    ("two-hosts", b"GET /hello.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", {400}),
    ("obs-fold", get(b"X-A: a\r\n  folded\r\n"), {400}),
    ("obs-fold-tab", get(b"X-A: a\r\n\tfolded\r\n"), {400}),
    ("bare-cr-in-value", get(b"X-A: a\rb\r\n"), {400}),
    ("nul-in-value", get(b"X-A: a\x00b\r\n"), {400}),
    ("space-before-colon", b"GET /hello.txt HTTP/1.1\r\nHost : localhost\r\n\r\n", {400}),
    ("no-colon", get(b"NoColonHere\r\n"), {400}),
    ("empty-name", get(b": value\r\n"), {400}),
    ("bad-name-char", get(b"X(A): v\r\n"), {400}),
    ("header-too-big", get(b"X-Big: " + b"a" * 9000 + b"\r\n"), {431}),
    ("headers-total-too-big", get(b"".join(b"X-H%03d: %s\r\n" % (i, b"v" * 140) for i in range(60))), {431}),
    ("too-many-headers", get(b"".join(b"X-N%03d: v\r\n" % i for i in range(101))), {431, 400}),
    # --- body framing
    ("two-cl-same", post(b"Content-Length: 5\r\nContent-Length: 5\r\n", b"hello"), {400}),
    ("two-cl-different", post(b"Content-Length: 5\r\nContent-Length: 40\r\n", b"hello"), {400}),
    ("cl-negative", post(b"Content-Length: -1\r\n"), {400}),
    ("cl-plus", post(b"Content-Length: +5\r\n", b"hello"), {400}),
    ("cl-junk", post(b"Content-Length: 5x\r\n", b"hello"), {400}),
    ("cl-hex", post(b"Content-Length: 0x5\r\n", b"hello"), {400}),
    ("cl-empty", post(b"Content-Length: \r\n"), {400}),
    ("cl-overflow", post(b"Content-Length: 99999999999999999999999999\r\n"), {400, 413}),
    ("cl-and-te", post(b"Content-Length: 4\r\n" + CHUNKED, b"0\r\n\r\n"), {400}),
    ("te-and-cl", post(CHUNKED + b"Content-Length: 4\r\n", b"0\r\n\r\n"), {400}),
    ("te-chunked-identity", post(b"Transfer-Encoding: chunked, identity\r\n", b"0\r\n\r\n"), {400}),
    ("te-chunked-twice", post(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"), {400}),
    ("te-gzip", post(b"Transfer-Encoding: gzip\r\n", b"xxxx"), {400, 501}),
    ("te-gzip-chunked", post(b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n"), {400, 501}),
    ("te-garbage", post(b"Transfer-Encoding: xchunked\r\n", b"0\r\n\r\n"), {400, 501}),
    # chunk sizes: a server may reply 405 to the POST before it finds the bad
    # chunk, as long as it then closes without answering the smuggled GET.
    ("chunk-0x", post(CHUNKED, b"0x10\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n"), {400, 405}),
    ("chunk-underscore", post(CHUNKED, b"1_0\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n"), {400, 405}),
    ("chunk-negative", post(CHUNKED, b"-1\r\na\r\n0\r\n\r\n"), {400, 405}),
    ("chunk-20-hex-digits", post(CHUNKED, b"1" + b"0" * 19 + b"\r\naaaa\r\n0\r\n\r\n"), {400, 405, 413}),
    ("chunk-16-f", post(CHUNKED, b"f" * 16 + b"\r\naaaa\r\n0\r\n\r\n"), {400, 405, 413}),
    ("chunk-missing-crlf", post(CHUNKED, b"5\r\nhelloXX0\r\n\r\n"), {400, 405}),
    ("chunk-empty-size", post(CHUNKED, b"\r\nhello\r\n0\r\n\r\n"), {400, 405}),
]


@pytest.mark.parametrize("data,statuses", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_request(server, data, statuses):
    c = server.connect()
    c.send(data + SMUGGLED)
    r = c.read_response()
    try:
        assert r.status in statuses, r
        rest = c.read_to_close(timeout=3)
        assert b"HTTP/1." not in rest, f"second response after a bad request: {rest[:300]!r}"
        assert rest == b"", rest[:300]
    finally:
        c.close()
    assert r.header("Date") and (r.header("Server") or "").startswith("brisk"), r


def test_smuggled_request_in_body_never_answered(server):
    # CL vs TE: if the server used Content-Length 0 + the smuggled body as a
    # request, a second (200) response would appear.
    inner = req("GET", "/p/9.txt")
    body = b"0\r\n\r\n" + inner
    c = server.connect()
    c.send(post(b"Content-Length: %d\r\n" % len(body) + CHUNKED, body))
    r = c.read_response()
    rest = c.read_to_close(timeout=3)
    c.close()
    assert r.status == 400, r
    assert rest == b"", rest[:300]


def test_server_survives_malformed_corpus(server):
    """After the whole corpus on one server, it still serves normally."""
    for _, data, _ in CASES:
        c = server.connect()
        c.send(data)
        try:
            c.read_to_close(timeout=3)
        except AssertionError:
            pass
        c.close()
    status, _, body = server.get("/hello.txt")
    assert status == 200 and body == (server.root / "hello.txt").read_bytes()


def test_client_closing_early_does_not_break_server(server):
    # half requests, abrupt closes, RST
    for data in (b"GET /hel", b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n",
                 post(b"Content-Length: 100\r\n", b"abc")):
        c = server.connect()
        c.send(data)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
    # a big response whose reader disappears mid-way
    c = server.connect(rcvbuf=4096)
    c.send(req("GET", "/range.bin") * 50)
    c.close()
    status, _, body = server.get("/hello.txt")
    assert status == 200 and body == (server.root / "hello.txt").read_bytes()
