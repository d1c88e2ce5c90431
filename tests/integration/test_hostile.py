"""Hostile clients against the brisk binary: request smuggling, path
traversal into static files and CGI, slowloris (header and body), and
10,000 idle keep-alive connections on one worker.

test_malformed.py holds the basic malformed-request corpus; the cases here
add what it lacks (bare LF and bare CR inside chunked framing, NUL bytes
in names and methods, over-long methods and names, whitespace and obs-fold
on the framing headers, Transfer-Encoding on HTTP/1.0 ...). Each case must
get one 400/414/431/501 and the connection closed, and the request sent
behind it must never be answered.

Everything is on loopback and bounded in count and time; the server's RSS
is printed where it matters (run pytest with -s to see it).
"""
from __future__ import annotations

import os
import socket
import time

import pytest

from brisk_testlib import SECRET, req
from hostile_lib import Swarm, exchange_all, is_sanitized, raise_nofile, rss_kb

SMUGGLED = req("GET", "/p/9.txt")
SMUGGLED_BODY = b"pipelined file number 9"
H = b"Host: localhost\r\n"
CHUNKED = b"Transfer-Encoding: chunked\r\n"


def post(headers: bytes, body: bytes = b"", version=b"HTTP/1.1") -> bytes:
    return b"POST /hello.txt " + version + b"\r\n" + H + headers + b"\r\n" + body


def get(headers: bytes = b"", target=b"/hello.txt") -> bytes:
    return b"GET " + target + b" HTTP/1.1\r\n" + H + headers + b"\r\n"


def sanitized(server) -> bool:
    return is_sanitized(server.cmd[0])


REJECT = {400, 414, 431, 501}

# (id, bytes, allowed statuses)
SMUGGLING = [
    # --- request line and method
    ("overlong-method", b"A" * 9000 + b" /hello.txt HTTP/1.1\r\n" + H + b"\r\n", {414, 400}),
    ("long-unknown-method", b"X" * 1000 + b" /hello.txt HTTP/1.1\r\n" + H + b"\r\n", {501, 400}),
    ("nul-in-method", b"GE\x00T /hello.txt HTTP/1.1\r\n" + H + b"\r\n", {400}),
    ("nul-first-byte", b"\x00GET /hello.txt HTTP/1.1\r\n" + H + b"\r\n", {400}),
    ("bare-cr-ends-request-line", b"GET /hello.txt HTTP/1.1\r" + H + b"\r\n", {400}),
    ("bare-cr-in-version", b"GET /hello.txt HTTP/1.1\r\r\n" + H + b"\r\n", {400}),
    ("tab-separator", b"GET\t/hello.txt HTTP/1.1\r\n" + H + b"\r\n", {400}),
    # --- field lines
    ("bare-cr-ends-header", get(b"X-A: a\r\r\n"), {400}),
    ("bare-cr-then-header", get(b"X-A: a\rTransfer-Encoding: chunked\r\n"), {400}),
    ("overlong-header-name", get(b"X" * 9000 + b": v\r\n"), {431}),
    ("overlong-header-value-64k", get(b"X-Big: " + b"v" * 70000 + b"\r\n"), {431}),
    ("nul-in-header-name", get(b"X-\x00A: v\r\n"), {400}),
    ("nul-header-name", get(b"\x00: v\r\n"), {400}),
    ("nul-at-value-end", get(b"X-A: v\x00\r\n"), {400}),
    ("space-before-colon-te", post(b"Transfer-Encoding : chunked\r\n", b"0\r\n\r\n"), {400}),
    ("tab-before-colon-cl", post(b"Content-Length\t: 5\r\n", b"hello"), {400}),
    ("space-before-colon-host", b"GET /hello.txt HTTP/1.1\r\nHost\t: x\r\n\r\n", {400}),
    ("leading-space-first-header", b"GET /hello.txt HTTP/1.1\r\n Host: x\r\n\r\n", {400}),
    ("obs-fold-te", post(b"Transfer-Encoding: identity\r\n chunked\r\n", b"0\r\n\r\n"), {400, 501}),
    ("obs-fold-te-chunked", post(b"Transfer-Encoding: chunked\r\n identity\r\n", b"0\r\n\r\n"), {400}),
    ("obs-fold-cl", post(b"Content-Length: 5\r\n 0\r\n", b"hello"), {400}),
    ("obs-fold-host", b"GET /hello.txt HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", {400}),
    # --- Host = uri-host [":" port] (RFC 9112 3.2)
    ("host-two-ports", b"GET /hello.txt HTTP/1.1\r\nHost: t:80:80\r\n\r\n", {400}),
    ("host-alpha-port", b"GET /hello.txt HTTP/1.1\r\nHost: t:abc\r\n\r\n", {400}),
    ("host-open-bracket", b"GET /hello.txt HTTP/1.1\r\nHost: [::1\r\n\r\n", {400}),
    ("host-bracket-junk", b"GET /hello.txt HTTP/1.1\r\nHost: [::1]x\r\n\r\n", {400}),
    ("host-empty-brackets", b"GET /hello.txt HTTP/1.1\r\nHost: []\r\n\r\n", {400}),
    ("host-colon-in-name", b"GET /hello.txt HTTP/1.1\r\nHost: a:b:c\r\n\r\n", {400}),
    # --- a fragment never travels: '#' in the target is an error
    ("target-fragment", b"GET /hello.txt#x HTTP/1.1\r\n" + H + b"\r\n", {400}),
    # --- Content-Length
    ("cl-list", post(b"Content-Length: 5, 5\r\n", b"hello"), {400}),
    ("cl-dup-other-case", post(b"Content-Length: 5\r\ncontent-length: 5\r\n", b"hello"), {400}),
    ("cl-space-inside", post(b"Content-Length: 1 0\r\n", b"0123456789"), {400}),
    ("cl-vtab", post(b"Content-Length:\x0b5\r\n", b"hello"), {400}),
    ("cl-2^64", post(b"Content-Length: 18446744073709551616\r\n", b"hello"), {400}),
    ("cl-then-te-http10", post(b"Content-Length: 5\r\n" + CHUNKED, b"0\r\n\r\n", b"HTTP/1.0"),
     {400}),
    # --- Transfer-Encoding
    ("te-http10", post(CHUNKED, b"0\r\n\r\n", b"HTTP/1.0"), {400}),
    ("te-identity-then-chunked",
     post(b"Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"),
     {400, 501}),
    ("te-chunked-then-identity",
     post(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", b"0\r\n\r\n"),
     {400}),
    ("te-chunked-comma", post(b"Transfer-Encoding: chunked,\r\n", b"0\r\n\r\n"), {400}),
    ("te-comma-chunked", post(b"Transfer-Encoding: ,chunked\r\n", b"0\r\n\r\n"), {400}),
    ("te-quoted", post(b'Transfer-Encoding: "chunked"\r\n', b"0\r\n\r\n"), {400, 501}),
    ("te-vtab", post(b"Transfer-Encoding:\x0bchunked\r\n", b"0\r\n\r\n"), {400}),
    ("te-nul", post(b"Transfer-Encoding: chunked\x00\r\n", b"0\r\n\r\n"), {400}),
    ("te-empty", post(b"Transfer-Encoding: \r\n", b"0\r\n\r\n"), {400}),
    # --- chunked framing: bare LF and bare CR
    ("chunk-size-bare-lf", post(CHUNKED, b"5\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-data-bare-lf", post(CHUNKED, b"5\r\nhello\n0\r\n\r\n"), {400}),
    ("chunk-last-size-bare-lf", post(CHUNKED, b"5\r\nhello\r\n0\n\r\n"), {400}),
    ("chunk-final-bare-lf", post(CHUNKED, b"5\r\nhello\r\n0\r\n\n"), {400}),
    ("chunk-all-bare-lf", post(CHUNKED, b"5\nhello\n0\n\n"), {400}),
    ("chunk-trailer-bare-lf", post(CHUNKED, b"0\r\nX-T: y\n\r\n"), {400}),
    ("chunk-ext-bare-lf", post(CHUNKED, b"5;a=b\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-size-bare-cr", post(CHUNKED, b"5\rhello\r\n0\r\n\r\n"), {400}),
    ("chunk-data-bare-cr", post(CHUNKED, b"5\r\nhello\r0\r\n\r\n"), {400}),
    ("chunk-final-bare-cr", post(CHUNKED, b"0\r\n\r"), {400}),
    # --- chunked framing: size junk
    ("chunk-size-leading-space", post(CHUNKED, b" 5\r\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-size-plus", post(CHUNKED, b"+5\r\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-size-0X", post(CHUNKED, b"0X5\r\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-size-minus-zero", post(CHUNKED, b"-0\r\n\r\n"), {400}),
    ("chunk-size-16-zeros", post(CHUNKED, b"0" * 16 + b"5\r\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-size-2^64", post(CHUNKED, b"10000000000000000\r\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-size-nul", post(CHUNKED, b"5\x00\r\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-ext-nul", post(CHUNKED, b"5;\x00\r\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-data-too-long", post(CHUNKED, b"3\r\nhello\r\n0\r\n\r\n"), {400}),
    ("chunk-trailer-obs-fold", post(CHUNKED, b"0\r\nX: a\r\n b\r\n\r\n"), {400}),
    ("chunk-trailer-no-colon", post(CHUNKED, b"0\r\nJunk\r\n\r\n"), {400}),
    ("chunk-trailer-space-colon", post(CHUNKED, b"0\r\nX : a\r\n\r\n"), {400}),
]


@pytest.mark.parametrize("data,statuses", [c[1:] for c in SMUGGLING],
                         ids=[c[0] for c in SMUGGLING])
def test_smuggling_rejected_and_closed(server, data, statuses):
    assert statuses <= REJECT
    c = server.connect()
    try:
        c.send(data + SMUGGLED)
        r = c.read_response()
        assert r.status in statuses, r
        rest = c.read_to_close(timeout=3)
        assert b"HTTP/1." not in rest, f"a second response after a bad request: {rest[:300]!r}"
        assert SMUGGLED_BODY not in r.body + rest
    finally:
        c.close()


@pytest.mark.parametrize("host", [b"t", b"t:80", b"t:", b"127.0.0.1:8080", b"[::1]", b"[::1]:80",
                                  b"[v1.fe]", b"a-b.c_d~e%41", b"x!$&'()*+,;=", b""])
def test_valid_hosts_accepted(server, host):
    c = server.connect()
    try:
        c.send(b"GET /hello.txt HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
        assert c.read_response().status == 200
    finally:
        c.close()


def test_chunk_size_with_space_junk_rejected(server):
    c = server.connect()
    try:
        c.send(post(CHUNKED, b"5 x\r\nhello\r\n0\r\n\r\n") + SMUGGLED)
        r = c.read_response()
        assert r.status == 400, r
    finally:
        c.close()


@pytest.mark.parametrize("framing", ["length", "chunked", "chunked-split"])
def test_request_in_a_body_is_never_answered(server, framing):
    """A complete request inside a well-framed body is data, not a request:
    the server answers the POST and then the request after the body."""
    inner = SMUGGLED
    if framing == "length":
        data = post(b"Content-Length: %d\r\n" % len(inner), inner)
    elif framing == "chunked":
        data = post(CHUNKED, b"%x\r\n" % len(inner) + inner + b"\r\n0\r\n\r\n")
    else:  # the inner request's own head split over chunks
        a, b = inner[:10], inner[10:]
        data = post(CHUNKED, b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(a), a, len(b), b))
    c = server.connect()
    try:
        c.send(data + get())
        first = c.read_response()
        assert first.status == 405, first  # POST to a static file
        second = c.read_response()
        assert second.status == 200 and second.body == b"Hello, brisk!\n", second
        assert c.is_open(wait=0.3) and c.buf == b"", c.buf[:300]
    finally:
        c.close()


def test_server_survives_whole_corpus_byte_by_byte(server):
    """The corpus again, each case trickled in pieces: same answer class."""
    for name, data, statuses in SMUGGLING[::3]:
        c = server.connect()
        try:
            c.send_slowly(data[:64], step=7, delay=0.001)
            c.send(data[64:] + SMUGGLED)
            r = c.read_response()
            assert r.status in statuses, (name, r)
            rest = c.read_to_close(timeout=3)
            assert b"HTTP/1." not in rest, name
        finally:
            c.close()
    status, _, body = server.get("/hello.txt")
    assert status == 200 and body == b"Hello, brisk!\n"


# ------------------------------------------------------------ traversal
OUTSIDE_SH = "#!/bin/sh\ntouch {marker}\nprintf 'Content-Type: text/plain\\r\\n\\r\\nOUTSIDE RAN\\n'\n"
ENV_SH = ("#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
          "printf 'PATH_INFO=%s\\nSCRIPT_NAME=%s\\n' \"$PATH_INFO\" \"$SCRIPT_NAME\"\n")

TRAVERSAL_STATIC = [
    "/./../etc/passwd",
    "//../etc/passwd",
    "/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/%252e%252e/%252e%252e/etc/passwd",       # double encoding: decoded once only
    "/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",   # overlong UTF-8 dots
    "/%e0%80%ae%e0%80%ae/etc/passwd",
    "/..;/..;/etc/passwd",
    "/.../.../etc/passwd",
    "/..%00/etc/passwd",
    "/%2e%2e%5c%2e%2e%5cetc%5cpasswd",
    "/link_outdir%2fsecret.txt",
    "/dir/../../outside/secret.txt",
    "/dir/%2e%2e/%2e%2e/outside/secret.txt",
    "/noindex/subdir/../../../outside/index.html",
    "/%2e/%2e%2e/outside/",
    "/outside.sh",
    "/../outside.sh",
    "/" + "a/.." * 200 + "/../etc/passwd",
    "/" + "../" * 2000 + "etc/passwd",
]
TRAVERSAL_CGI = [
    "/cgi-bin/../outside.sh",
    "/cgi-bin/%2e%2e/outside.sh",
    "/cgi-bin/%2E%2e%2Foutside.sh",
    "/cgi-bin/.%2e/outside.sh",
    "/cgi-bin/%2e./outside.sh",
    "/cgi-bin/%252e%252e/outside.sh",
    "/cgi-bin/%c0%ae%c0%ae/outside.sh",
    "/cgi-bin/..;/outside.sh",
    "/cgi-bin/..%5coutside.sh",
    "/cgi-bin/%5c..%5coutside.sh",
    "/cgi-bin//../outside.sh",
    "/cgi-bin/./.././outside.sh",
    "/cgi-bin/sub/../../outside.sh",
    "/cgi-bin/sub/%2e%2e/%2e%2e/outside.sh",
    "/cgi-bin/link_out.sh",
    "/cgi-bin/link_dir/outside.sh",
    "/cgi-bin/%6cink_out.sh",
    "/cgi-bin/outside.sh%00",
    "/cgi-bin/outside.sh%00.sh",
    "/cgi-bin/%00/../outside.sh",
    "/cgi-bin/.outside.sh",
    "/cgi-bin/../cgi/../outside.sh",
    "/%63gi-bin/../outside.sh",
    "/CGI-BIN/../outside.sh",
    "/cgi-bin/" + "../" * 50 + "outside.sh",
]
# Script with PATH_INFO: the script runs, but PATH_INFO is normalised.
PATH_INFO_CGI = [
    "/cgi-bin/env.sh/../../outside.sh",
    "/cgi-bin/env.sh/..%2f..%2foutside.sh",
    "/cgi-bin/env.sh/%2e%2e/%2e%2e/etc/passwd",
    "/cgi-bin/env.sh/a/./b/../c",
]


@pytest.fixture
def traversal_server(start_brisk, tmp_path):
    """brisk with --cgi /cgi-bin/=tmp/cgi; tmp/outside.sh (next to www/ and
    cgi/) leaves a marker file if it ever runs."""
    cgi = tmp_path / "cgi"
    (cgi / "sub").mkdir(parents=True)
    (cgi / "env.sh").write_text(ENV_SH)
    (cgi / "env.sh").chmod(0o755)
    outside = tmp_path / "outside.sh"
    outside.write_text(OUTSIDE_SH.format(marker=tmp_path / "OUTSIDE_RAN"))
    outside.chmod(0o755)
    os.symlink("../outside.sh", cgi / "link_out.sh")
    os.symlink(str(tmp_path), cgi / "link_dir")
    srv = start_brisk(args=["--cgi", f"/cgi-bin/={cgi}"])
    srv.marker = tmp_path / "OUTSIDE_RAN"
    return srv


def fetch(srv, target: bytes | str, method="GET"):
    if isinstance(target, str):
        target = target.encode("latin-1")
    with srv.connect() as c:
        c.send(method.encode() + b" " + target + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
        return c.read_response(method=method)


def test_traversal_corpus_static_and_cgi(traversal_server):
    srv = traversal_server
    bad = []
    targets = TRAVERSAL_STATIC + TRAVERSAL_CGI
    # the same paths in absolute form
    targets += ["http://localhost" + t for t in TRAVERSAL_STATIC[:6] + TRAVERSAL_CGI[:6]]
    for method in ("GET", "HEAD", "POST"):
        for t in targets:
            r = fetch(srv, t, method)
            if (r.status not in (400, 403, 404, 405, 414) or b"OUTSIDE RAN" in r.body
                    or b"root:" in r.body or SECRET in r.body):
                bad.append((method, t, r.status, r.body[:80]))
    time.sleep(0.1)
    assert not bad, bad
    assert not srv.marker.exists(), "a script outside the CGI directory ran"
    # and the server is still fine
    assert fetch(srv, "/cgi-bin/env.sh").status == 200
    assert fetch(srv, "/hello.txt").body == b"Hello, brisk!\n"


def test_path_info_is_normalised(traversal_server):
    srv = traversal_server
    for t in PATH_INFO_CGI:
        r = fetch(srv, t)
        if r.status != 200:
            assert r.status in (400, 403, 404), (t, r)
            continue
        info = dict(line.split("=", 1) for line in r.body.decode().splitlines())
        segs = info["PATH_INFO"].split("/")
        assert ".." not in segs and "." not in segs, (t, info)
        assert info["SCRIPT_NAME"] == "/cgi-bin/env.sh", (t, info)
    assert not srv.marker.exists()


# ------------------------------------------------------------ slowloris
SLOW_HEAD = b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 200


def timed_get(srv):
    t0 = time.monotonic()
    status, _, body = srv.get("/hello.txt")
    return status, body, time.monotonic() - t0


def test_slowloris_headers_closed_by_header_timeout(start_brisk):
    """1,000 connections each send a header byte every 100 ms and never end
    the head. A normal client is still served fast, and
    client_header_timeout (2 s, counted from the first byte) closes every
    slow one."""
    n = 1000
    raise_nofile(n + 200)
    srv = start_brisk(config="[server]\nlisten = 127.0.0.1:{port}\nroot = {root}\n"
                             "workers = 1\naccess_log = off\nclient_header_timeout = 2s\n")
    swarm = Swarm(srv.host, srv.port)
    t0 = time.monotonic()
    try:
        swarm.open(n, first=SLOW_HEAD[:1])
        opened = time.monotonic()
        latencies = []
        open_at_1s = None
        pos = 1
        while time.monotonic() - opened < 6.0:
            if pos < len(SLOW_HEAD):
                swarm.send_each(SLOW_HEAD[pos:pos + 1])
                pos += 1
            status, body, dt = timed_get(srv)
            assert status == 200 and body == b"Hello, brisk!\n"
            latencies.append(dt)
            left = swarm.poll_closed(wait=0.1)
            if open_at_1s is None and time.monotonic() - t0 >= 1.0:
                open_at_1s = left
            if left == 0:
                break
        elapsed = time.monotonic() - opened
        print(f"\nslowloris: {n} slow connections, all closed after {elapsed:.2f}s; "
              f"normal GET max {max(latencies) * 1000:.0f} ms over {len(latencies)}; "
              f"server RSS {rss_kb(srv.proc.pid) / 1024:.1f} MB")
        assert open_at_1s is not None and open_at_1s >= n * 0.99, \
            f"slow connections closed too early: {open_at_1s} of {n} open at 1 s"
        assert swarm.open_count() == 0, \
            f"{swarm.open_count()} slow connections still open after {elapsed:.1f}s"
        first = min(swarm.closed_at.values()) - t0
        assert first >= 1.5, f"first slow connection closed after only {first:.2f}s"
        assert max(latencies) < 1.0, latencies
        # the slow ones never got a response
        assert not any(b"HTTP/1." in v and b"200" in v for v in swarm.inbuf.values())
    finally:
        swarm.close()
    status, body, dt = timed_get(srv)
    assert status == 200 and dt < 1.0


def test_slow_body_closed_by_body_timeout(start_brisk):
    """200 connections send a full head announcing 1,000 body bytes, one
    body byte, then stall: client_body_timeout (1 s without a byte) closes
    them while a normal client is served."""
    n = 200
    srv = start_brisk(config="[server]\nlisten = 127.0.0.1:{port}\nroot = {root}\n"
                             "workers = 1\naccess_log = off\nclient_header_timeout = 30s\n"
                             "client_body_timeout = 1s\n")
    head = post(b"Content-Length: 1000\r\n", b"x")
    swarm = Swarm(srv.host, srv.port)
    try:
        swarm.open(n, first=head)
        t0 = time.monotonic()
        assert swarm.poll_closed(wait=0.5) == n  # nobody closed at 0.5 s
        status, body, dt = timed_get(srv)
        assert status == 200 and dt < 1.0
        while swarm.poll_closed(wait=0.1) and time.monotonic() - t0 < 5.0:
            pass
        elapsed = time.monotonic() - t0
        assert swarm.open_count() == 0, f"{swarm.open_count()} stalled bodies still open"
        print(f"\nslow body: {n} stalled uploads closed after {elapsed:.2f}s")
        assert elapsed < 4.0
    finally:
        swarm.close()


# ------------------------------------------------------------ 10,000 idle
def test_ten_thousand_idle_keepalive_connections(start_brisk):
    """10,000 keep-alive connections, each after one request, idle on one
    worker: the server's memory stays bounded and every one of them is
    still served afterwards, as is a new client."""
    n = 10000
    have = raise_nofile(n + 500)
    if have < n + 100:
        pytest.skip(f"RLIMIT_NOFILE hard limit too low ({have}) for {n} connections")
    srv = start_brisk(workers="1")
    pid = srv.proc.pid
    rss0 = rss_kb(pid)
    request = req("GET", "/hello.txt")
    body = b"Hello, brisk!\n"
    swarm = Swarm(srv.host, srv.port)
    t0 = time.monotonic()
    try:
        batch = 500
        for start in range(0, n, batch):
            before = len(swarm.socks)
            swarm.open(batch)
            exchange_all(swarm.socks[before:], request, body)
        t_open = time.monotonic() - t0
        time.sleep(0.5)
        rss1 = rss_kb(pid)
        # still open: nothing closed them
        assert swarm.poll_closed(wait=0.2) == n
        # a newcomer is served at once
        status, got, dt = timed_get(srv)
        assert status == 200 and got == body and dt < 1.0
        # every idle connection is served again
        t1 = time.monotonic()
        for start in range(0, n, 2000):
            exchange_all(swarm.socks[start:start + 2000], request, body)
        t_again = time.monotonic() - t1
        rss2 = rss_kb(pid)
        print(f"\n10k idle: opened + served in {t_open:.1f}s, all served again in "
              f"{t_again:.1f}s; server RSS {rss0 / 1024:.1f} MB before, "
              f"{rss1 / 1024:.1f} MB with {n} idle, {rss2 / 1024:.1f} MB after "
              f"({(rss1 - rss0) / n:.2f} KB per idle connection)")
        limit_mb = 600 if sanitized(srv) else 200
        assert rss1 / 1024 < limit_mb and rss2 / 1024 < limit_mb
    finally:
        swarm.close()
