"""HTTP/1.x connection handling: keep-alive, pipelining, IPv6, request
bodies on static resources, 100-continue."""
from __future__ import annotations

import http.client

import pytest

from brisk_testlib import free_port, ipv6_available, req


def pfile(server, i):
    return (server.root / "p" / f"{i}.txt").read_bytes()


# ------------------------------------------------------------ keep-alive
def test_http11_keepalive_reuses_connection(server):
    c = http.client.HTTPConnection(server.host, server.port, timeout=5)
    try:
        c.request("GET", "/hello.txt")
        r = c.getresponse()
        r.read()
        sock = c.sock
        local = sock.getsockname()
        for i in range(20):
            path = f"/p/{i % 10}.txt"
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            assert r.status == 200
            assert body == pfile(server, i % 10)
            assert (r.getheader("Connection") or "").lower() != "close"
            assert c.sock is sock and sock.getsockname() == local, "connection was not reused"
    finally:
        c.close()


def test_http10_closes_by_default(server):
    r, c = server.raw(req("GET", "/hello.txt", version="HTTP/1.0", host=None))
    assert r.status == 200, r
    assert r.body == (server.root / "hello.txt").read_bytes()
    assert r.version in ("HTTP/1.0", "HTTP/1.1")
    assert (r.header("Connection") or "").lower() != "keep-alive"
    closed, extra, _ = c.wait_closed(3)
    c.close()
    assert closed and extra == b"", "HTTP/1.0 connection not closed after response"


def test_http10_keepalive_requested(server):
    c = server.connect()
    for i in range(3):
        c.send(req("GET", f"/p/{i}.txt", version="HTTP/1.0", host=None,
                   headers={"Connection": "keep-alive"}))
        r = c.read_response()
        assert r.status == 200, r
        assert r.body == pfile(server, i)
        assert "keep-alive" in r.tokens("Connection"), r
        assert r.has("Content-Length")
    c.close()


def test_http11_connection_close(server):
    c = server.connect()
    c.send(req("GET", "/hello.txt", headers={"Connection": "close"}))
    r = c.read_response()
    assert r.status == 200
    assert "close" in r.tokens("Connection"), r
    closed, extra, _ = c.wait_closed(3)
    c.close()
    assert closed and extra == b""


def test_lowercase_header_names_accepted(server):
    r, c = server.raw(b"GET /hello.txt HTTP/1.1\r\nhost: x\r\nuser-agent: t\r\n\r\n")
    c.close()
    assert r.status == 200, r


# ------------------------------------------------------------ pipelining
def test_pipelined_requests_in_one_send(server):
    c = server.connect()
    c.send(b"".join(req("GET", f"/p/{i}.txt") for i in range(10)))
    for i in range(10):
        r = c.read_response()
        assert r.status == 200, (i, r)
        assert r.body == pfile(server, i), f"response {i} out of order"
    assert c.is_open(0.2) and c.buf == b"", "unexpected extra bytes"
    c.close()


def test_many_pipelined_requests(server):
    n = 200
    c = server.connect()
    c.send(b"".join(req("GET", f"/p/{i % 10}.txt") for i in range(n)))
    for i in range(n):
        r = c.read_response()
        assert r.status == 200, (i, r)
        assert r.body == pfile(server, i % 10), f"response {i} wrong"
    c.close()


def test_pipelined_mixed_methods_and_statuses(server):
    c = server.connect()
    c.send(req("GET", "/p/1.txt") + req("HEAD", "/p/2.txt") + req("GET", "/missing")
           + req("GET", "/dir") + req("GET", "/p/3.txt", headers={"Connection": "close"}))
    r = c.read_response()
    assert r.status == 200 and r.body == pfile(server, 1)
    r = c.read_response("HEAD")
    assert r.status == 200 and int(r.header("Content-Length")) == len(pfile(server, 2))
    r = c.read_response()
    assert r.status == 404
    r = c.read_response()
    assert r.status == 301
    r = c.read_response()
    assert r.status == 200 and r.body == pfile(server, 3)
    closed, extra, _ = c.wait_closed(3)
    c.close()
    assert closed and extra == b""


def test_request_sent_byte_by_byte(server):
    c = server.connect()
    c.send_slowly(req("GET", "/hello.txt", headers={"User-Agent": "slow"}), delay=0.001)
    r = c.read_response()
    c.close()
    assert r.status == 200 and r.body == (server.root / "hello.txt").read_bytes()


def test_request_split_across_pipelined_boundary(server):
    data = req("GET", "/p/4.txt") + req("GET", "/p/5.txt")
    c = server.connect()
    cut = len(req("GET", "/p/4.txt")) + 7  # mid-way through the 2nd request line
    c.send(data[:cut])
    r = c.read_response()
    assert r.status == 200 and r.body == pfile(server, 4)
    c.send(data[cut:])
    r = c.read_response()
    c.close()
    assert r.status == 200 and r.body == pfile(server, 5)


# ------------------------------------------------------------ listeners
def test_ipv6_and_ipv4_listeners(start_brisk):
    if not ipv6_available():
        pytest.skip("::1 not available")
    p6, p4 = free_port("::1"), free_port("127.0.0.1")
    srv = start_brisk(listens=[("::1", p6), ("127.0.0.1", p4)])
    expected = (srv.root / "hello.txt").read_bytes()
    for host, port in (("::1", p6), ("127.0.0.1", p4)):
        c = http.client.HTTPConnection(host, port, timeout=5)
        c.request("GET", "/hello.txt")
        r = c.getresponse()
        assert r.status == 200 and r.read() == expected, host
        c.close()


def test_two_ipv4_listeners(start_brisk):
    p1, p2 = free_port(), free_port()
    srv = start_brisk(listens=[("127.0.0.1", p1), ("127.0.0.1", p2)])
    for port in (p1, p2):
        c = srv.connect(port=port)
        c.send(req("GET", "/hello.txt"))
        r = c.read_response()
        c.close()
        assert r.status == 200, port


def test_multiple_workers(start_brisk):
    srv = start_brisk(workers="2")
    expected = (srv.root / "hello.txt").read_bytes()
    for _ in range(20):
        status, _, body = srv.get("/hello.txt")
        assert status == 200 and body == expected


# ------------------------------------------------------------ request bodies
def _assert_405(r):
    assert r.status == 405, r
    allow = r.tokens("Allow")
    assert "get" in allow and "head" in allow, r


@pytest.mark.parametrize("framing", ["content-length", "chunked", "chunked-ext-trailer"])
def test_post_to_static_file_405_and_body_consumed(server, framing):
    if framing == "content-length":
        body = b"hello world, this is a body"
        r1 = req("POST", "/hello.txt", headers={"Content-Length": str(len(body))}, body=body)
    elif framing == "chunked":
        r1 = req("POST", "/hello.txt", headers={"Transfer-Encoding": "chunked"},
                 body=b"5\r\nhello\r\n6\r\n world\r\na\r\n0123456789\r\n0\r\n\r\n")
    else:
        r1 = req("POST", "/hello.txt", headers={"Transfer-Encoding": "chunked"},
                 body=b"5;name=value\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n")
    c = server.connect()
    c.send(r1 + req("GET", "/index.html"))
    _assert_405(c.read_response())
    r = c.read_response()
    c.close()
    assert r.status == 200, r
    assert r.body == (server.root / "index.html").read_bytes()


def test_post_body_in_separate_segments(server):
    body = b"x" * 3000
    c = server.connect()
    c.send(req("POST", "/hello.txt", headers={"Content-Length": str(len(body))}))
    c.send(body[:1000])
    c.send(body[1000:] + req("GET", "/hello.txt"))
    _assert_405(c.read_response())
    r = c.read_response()
    c.close()
    assert r.status == 200 and r.body == (server.root / "hello.txt").read_bytes()


def test_body_over_default_limit_413(server):
    c = server.connect()
    c.send(req("POST", "/hello.txt", headers={"Content-Length": str(2 * 1024 * 1024)}))
    r = c.read_response()
    assert r.status == 413, r
    closed, _, _ = c.wait_closed(3)
    c.close()
    assert closed


def test_body_just_under_default_limit_accepted(server):
    body = b"y" * (1024 * 1024 - 1)
    c = server.connect(timeout=10)
    c.send(req("POST", "/hello.txt", headers={"Content-Length": str(len(body))}) + body
           + req("GET", "/hello.txt"))
    _assert_405(c.read_response())
    r = c.read_response()
    c.close()
    assert r.status == 200


def test_expect_100_continue(server):
    c = server.connect()
    c.send(req("POST", "/hello.txt", headers={"Content-Length": "5", "Expect": "100-continue"}))
    interim = c.read_response(skip_interim=False)
    assert interim.status == 100, interim
    assert interim.version == "HTTP/1.1"
    c.send(b"hello" + req("GET", "/hello.txt"))
    _assert_405(c.read_response())
    r = c.read_response()
    c.close()
    assert r.status == 200


def test_expect_100_continue_over_limit_gets_413_not_100(server):
    c = server.connect()
    c.send(req("POST", "/hello.txt", headers={"Content-Length": str(5 * 1024 * 1024),
                                               "Expect": "100-continue"}))
    r = c.read_response(skip_interim=False)
    c.close()
    assert r.status == 413, r


def test_get_with_body_is_consumed(server):
    c = server.connect()
    c.send(req("GET", "/p/1.txt", headers={"Content-Length": "4"}, body=b"GET ")
           + req("GET", "/p/2.txt"))
    r1 = c.read_response()
    r2 = c.read_response()
    c.close()
    assert r1.status == 200 and r1.body == pfile(server, 1)
    assert r2.status == 200 and r2.body == pfile(server, 2)
