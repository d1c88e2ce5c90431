"""The public handler API (include/brisk/brisk.h), black-box, through the
test app tests/apps/api_test.c (built as $BRISK_BIN_DIR/api_test).

Most tests share one api_test process (--workers 1) per module and compare
/stats counters before and after; tests that stop the server, change its
flags or its environment start their own. Every api_test process is stopped
with SIGTERM at the end and must exit 0 without a sanitizer report (so the
ASan build fails a test on leaks or memory errors).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import time

import pytest

from brisk_testlib import NoResponse, RawConn, free_port, ipv6_available, req

from apps_lib import BIN_DIR, SANITIZER_MARKERS, AppProc, check_procs


# ------------------------------------------------------------ the app process
@pytest.fixture
def start_app(tmp_path):
    """Factory: start_app(name="api_test", args=(), env=None, workers="1")."""
    procs = []

    def _start(name="api_test", args=(), env=None, workers="1", wait_for=None,
               listen=True):
        p = AppProc(name, tmp_path / "app", args, env, workers, listen)
        procs.append(p)
        return p.start(wait_for)

    yield _start
    check_procs(procs)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    (d / "data.txt").write_bytes(b"hello file\n")
    (d / "page.html").write_bytes(b"<p>page</p>\n")
    (d / "dir").mkdir()
    (d / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    return d


@pytest.fixture(scope="module")
def app(files):
    """The shared api_test (--workers 1), working directory = files."""
    p = AppProc("api_test", files)
    p.start()
    yield p
    check_procs([p])


@functools.lru_cache(maxsize=None)
def pattern(n):
    """The bytes of api_test's g_big buffer."""
    return bytes((i * 7 + i // 251) & 0xFF for i in range(n))


def latin1(v):
    return None if v is None else v.encode("latin-1")


def wait_stats(app, key, want, timeout=3.0):
    deadline = time.monotonic() + timeout
    while True:
        s = app.stats()
        if s[key] >= want or time.monotonic() > deadline:
            return s
        time.sleep(0.02)


# ------------------------------------------------------------ start-up
def test_selfcheck_bad_patterns_and_listen_rejected(app):
    r = app.request("/selfcheck")
    assert r.status == 200
    assert r.body.endswith(b"ALL OK\n"), r.body.decode()


# ------------------------------------------------------------ routing
def test_exact_routes(app):
    r = app.request("/")
    assert (r.status, r.body) == (200, b"api_test root")
    assert r.header("Content-Type").startswith("text/plain")
    assert r.header("Content-Length") == str(len(r.body))
    r = app.request("/exact")
    assert (r.status, r.body) == (200, b"exact")
    for miss in ("/exact/", "/exactly", "/exact/x", "/Exact"):
        assert app.request(miss).status == 404, miss


def test_route_with_trailing_slash(app):
    assert app.request("/dir/").body == b"dir with slash"
    assert app.request("/dir").status == 404


@pytest.mark.parametrize("target,id_", [
    ("/items/42", "42"),
    ("/items/a%20b", "a b"),
    ("/items/a%2Fb%3Fc", "a/b?c"),          # an encoded slash stays in the parameter
    ("/items/x+y", "x+y"),                   # '+' is not a space in a path
    ("/items/%E2%82%AC", "\u00e2\u0082\u00ac"),  # raw bytes (UTF-8 of the euro sign)
    ("/items/bad%zz", "bad%zz"),             # invalid escape kept as is
])
def test_path_param_decoded(app, target, id_):
    d = app.json(target)
    assert d == {"id": id_, "part": None, "nope": None}


def test_two_path_params(app):
    assert app.json("/items/7/parts/wheel%20nut") == {"id": "7", "part": "wheel nut",
                                                       "nope": None}


@pytest.mark.parametrize("target", ["/items", "/items/", "/items/1/2", "/items/1/parts/",
                                    "/items/1/parts/2/3"])
def test_path_param_mismatch_404(app, target):
    assert app.request(target).status == 404


def test_route_with_nine_params(app):
    rc = int(app.request("/nine-rc").body)
    if rc == -1:
        return                                    # refused: fine
    d = app.json("/p/1/2/3/4/5/6/7/8/9")
    assert d == {"a": "1", "i": "9"}


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "PATCH"])
def test_prefix_route_any_method(app, method):
    r = app.request("/files/a/b/c.txt?x=1", method=method)
    assert r.status == 200, r
    assert json.loads(r.body) == {"method": method, "path": "/files/a/b/c.txt"}


def test_prefix_route_boundaries(app):
    assert app.json("/files/")["path"] == "/files/"
    assert app.request("/filesystem").status == 404
    assert app.request("/filesystem/x").status == 404


def test_same_path_get_and_post(app):
    assert app.request("/thing").body == b"GET thing"
    r = app.request("/thing", method="POST", body=b"12345",
                    headers={"Content-Length": "5"})
    assert (r.status, r.body) == (200, b"POST thing 5")
    r = app.request("/thing", method="DELETE")
    assert r.status == 405
    assert sorted(r.tokens("Allow")) == ["get", "post"]


def test_post_only_path_gives_405_with_allow(app):
    for method in ("GET", "HEAD", "DELETE"):
        r = app.request("/only-post", method=method)
        assert r.status == 405, (method, r)
        assert sorted(r.tokens("Allow")) == ["post", "put"], r
        if method == "HEAD":
            assert r.body == b""
    r = app.request("/only-post", method="POST", body=b"", headers={"Content-Length": "0"})
    assert (r.status, r.body) == (200, b"posted")
    r = app.request("/only-post", method="PUT", body=b"x", headers={"Content-Length": "1"})
    assert (r.status, r.body) == (200, b"put")


def test_unknown_method_on_a_route_gives_405_with_allow(app):
    # Methods the parser does not know are still tokens: the router answers
    # them as it answers known ones (405 with Allow), not with 501.
    for method in ("PURGE", "PROPFIND", "get"):
        r = app.request("/only-post", method=method)
        assert r.status == 405, (method, r)
        assert sorted(r.tokens("Allow")) == ["post", "put"], r
        r = app.request("/thing", method=method)
        assert r.status == 405 and sorted(r.tokens("Allow")) == ["get", "post"], (method, r)
    assert app.request("/nope", method="PURGE").status == 404
    # the connection stays usable after it
    with app.connect(timeout=3) as c:
        c.send(req("PURGE", "/thing") + req("GET", "/thing"))
        assert c.read_response().status == 405
        assert c.read_response().body == b"GET thing"


def test_no_route_404(app):
    for target in ("/nope", "/nope/deeper?x=1", "/only-post-not"):
        r = app.request(target)
        assert r.status == 404, r
        assert r.header("Allow") is None
    r = app.request("/nope", method="HEAD")
    assert r.status == 404 and r.body == b""


# ------------------------------------------------------------ request
@pytest.mark.parametrize("version,minor", [("HTTP/1.1", 1), ("HTTP/1.0", 0)])
def test_request_line_accessors(app, version, minor):
    d = app.json("/info?x=1&y=%20", version=version)
    assert d.pop("version") == "0.1.0"           # BRISK_VERSION_STRING
    assert d == {"method": "GET", "target": "/info?x=1&y=%20", "path": "/info",
                 "query": "x=1&y=%20", "major": 1, "minor": minor}
    d = app.json("/info")
    assert d["query"] == "" and d["target"] == "/info"


def test_query_params(app):
    q = ("a=1&a=2&a=3&sp=hello+world&enc=%41%2b%e2%82%ac&empty=&flag&k+y=v"
         "&x%26y=z&bad=%zz%4&b=%00x&value=v%3D1")
    d = app.json("/query?" + q)
    assert d["query"] == q
    p = {k: [latin1(v) for v in vs] for k, vs in d["params"].items()}
    assert p["a"] == [b"1", b"2", b"3"]                 # repeated keys by index
    assert p["sp"] == [b"hello world"]                  # '+' as space
    assert p["enc"] == [b"A+\xe2\x82\xac"]              # percent-decoded, binary
    assert p["empty"] == [b""]
    assert p["flag"] == [b""]                           # key without '='
    assert p["missing"] == []
    assert p["k y"] == [b"v"]                           # the key is decoded too
    assert p["x&y"] == [b"z"]
    assert p["bad"] == [b"%zz%4"]                       # bad escapes kept
    assert p["b"] == [b"\x00x"]
    assert p["value"] == [b"v=1"]
    assert d["nul_terminated"] is True


def test_query_param_absent_without_query(app):
    d = app.json("/query")
    assert d["query"] == ""
    assert all(v == [] for v in d["params"].values())


def test_header_lookup_case_insensitive_and_iteration(app):
    hs = [("Host", "localhost"), ("X-Foo", "bar"), ("x-multi", "1"), ("X-Multi", "2"),
          ("X-Empty", ""), ("X-Spaces", "  padded value  "), ("X-Latin", "caf\xe9")]
    names = ["x-foo", "X-FOO", "X-Multi", "HOST", "absent", "X-Empty", "x-spaces", "X-latin"]
    target = "/headers?" + "&".join(f"h={n}" for n in names)
    d = app.json(target, headers=hs)
    got = {k: latin1(v) for k, v in d["lookup"]}
    assert got == {"x-foo": b"bar", "X-FOO": b"bar", "X-Multi": b"1", "HOST": b"localhost",
                   "absent": None, "X-Empty": b"", "x-spaces": b"padded value",
                   "X-latin": b"caf\xe9"}
    assert [(k, v) for k, v in d["all"]] == [(k, v.strip()) for k, v in hs]
    assert d["walked"] == len(hs)


def test_header_iteration_stops_early(app):
    d = app.json("/headers?stop=2", headers=[("A", "1"), ("B", "2"), ("C", "3")])
    assert d["walked"] == 2
    assert d["all"] == [["Host", "localhost"], ["A", "1"]]


def body_echo(app, body, headers, method="POST"):
    r = app.request("/body", method=method, body=body, headers=headers)
    assert r.status == 200, r
    return r


def test_body_content_length(app):
    r = body_echo(app, b"hello body", {"Content-Length": "10", "Content-Type": "text/x-t"})
    assert r.body == b"hello body"
    assert r.header("X-Body-Length") == "10"
    assert r.header("X-Method") == "POST"
    assert r.header("X-Request-Content-Type") == "text/x-t"


def test_body_binary_all_bytes(app):
    body = bytes(range(256)) * 1000
    r = body_echo(app, body, {"Content-Length": str(len(body))}, method="PUT")
    assert r.body == body
    assert r.header("X-Body-Length") == str(len(body))
    assert r.header("X-Method") == "PUT"


def test_body_chunked(app):
    chunks = [b"abc", b"defgh" * 1000, b"\x00\r\n"]
    raw = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\nX-T: 1\r\n\r\n"
    r = body_echo(app, raw, {"Transfer-Encoding": "chunked"})
    assert r.body == b"".join(chunks)
    assert r.header("X-Body-Length") == str(len(r.body))


def test_body_none(app):
    r = body_echo(app, b"", {}, method="GET")
    assert r.body == b"" and r.header("X-Body-Length") == "0"


def test_body_at_limit_and_over_limit(app):
    """api_test sets brisk_max_body(512 KiB)."""
    body = os.urandom(512 * 1024)
    r = body_echo(app, body, {"Content-Length": str(len(body))})
    assert hashlib.sha256(r.body).digest() == hashlib.sha256(body).digest()
    with app.connect() as c:  # announced too big: refused before the body
        c.send(req("POST", "/body", headers={"Content-Length": str(512 * 1024 + 1)}))
        assert c.read_response().status == 413
    big = os.urandom(600 * 1024)
    raw = b"".join(b"%x\r\n%s\r\n" % (65536, big[i:i + 65536])
                   for i in range(0, len(big) - 65536 + 1, 65536)) + b"0\r\n\r\n"
    with app.connect() as c:  # chunked beyond the limit
        c.send(req("POST", "/body", headers={"Transfer-Encoding": "chunked"}) + raw)
        assert c.read_response().status == 413


def test_remote_addr_and_port(app):
    with app.connect() as c:
        c.send(req("GET", "/remote"))
        d = json.loads(c.read_response().body)
        ip, port = c.sock.getsockname()[:2]
    assert d == {"addr": ip, "port": port}


def test_ipv6_remote_addr(start_app):
    if not ipv6_available():
        pytest.skip("no IPv6 loopback")
    port = free_port("::1")
    a = start_app(env={"API_TEST_LISTEN": f"[::1]:{port}"}, listen=False,
                  wait_for=[("::1", port)])
    with RawConn("::1", port) as c:
        c.send(req("GET", "/remote"))
        d = json.loads(c.read_response().body)
        assert d == {"addr": "::1", "port": c.sock.getsockname()[1]}


def test_req_alloc_aligned_and_disjoint(app):
    r = app.request("/alloc")
    assert r.body == b"alloc n=10 aligned=1 intact=1"


def test_req_alloc_impossible_sizes_give_null(tmp_path):
    # A private process: the bug corrupts its heap, so no fixture teardown.
    p = AppProc("api_test", tmp_path / "huge")
    p.start()
    try:
        try:
            got = p.json("/alloc-huge")
        except (NoResponse, OSError) as e:
            got = f"no response: {e!r}"
        p.stop(timeout=2)
        assert got == {"null": [True, True, True, True], "after": True}
        assert not p.problems(), p.stderr()[-2000:]
    finally:
        if p.proc.poll() is None:
            p.kill()


def test_arena_reused_across_keepalive_requests(app):
    """Many requests on one connection, each allocating in the arena."""
    with app.connect() as c:
        for i in range(150):
            c.send(req("GET", ("/alloc", f"/query?a={i}", f"/items/n{i}")[i % 3]))
            r = c.read_response()
            assert r.status == 200, (i, r)
            if i % 3 == 0:
                assert r.body.endswith(b"aligned=1 intact=1")
            elif i % 3 == 1:
                assert json.loads(r.body)["params"]["a"] == [str(i)]
            else:
                assert json.loads(r.body)["id"] == f"n{i}"


# ------------------------------------------------------------ response
def test_status_and_headers(app):
    r = app.request("/status?code=201&h=X-A:1&h=X-B:two%20words&h=X-C:&body=made")
    assert (r.status, r.reason, r.body) == (201, "Created", b"made")
    assert r.header("X-A") == "1" and r.header("X-B") == "two words"
    assert r.header("X-C") == ""
    assert r.header("Content-Length") == "4"


def test_repeated_response_headers_kept_in_order(app):
    r = app.request("/status?h=Set-Cookie:a=1&h=Set-Cookie:b=2&h=Set-Cookie:c=3")
    assert r.headers_all("Set-Cookie") == ["a=1", "b=2", "c=3"]


def test_managed_headers_ignored(app):
    hs = ["Content-Length:99", "Transfer-Encoding:chunked", "Connection:close", "Date:never",
          "Server:evil", "Keep-Alive:timeout=1", "content-length:1", "X-Ok:yes"]
    with app.connect() as c:
        c.send(req("GET", "/status?" + "&".join("h=" + h for h in hs)))
        r = c.read_response()
        assert r.status == 200 and r.body == b"status body"
        assert r.headers_all("Content-Length") == [str(len(b"status body"))]
        assert r.header("Transfer-Encoding") is None
        assert r.header("Keep-Alive") is None
        assert r.header("Server") != "evil" and r.header("Date") != "never"
        assert r.header("Connection") is None
        assert r.header("X-Ok") == "yes"
        c.send(req("GET", "/exact"))  # still keep-alive
        assert c.read_response().body == b"exact"


@pytest.mark.parametrize("h", [
    "X-Inj:a%0d%0aX-Evil:%201",     # CRLF in a value
    "X-Inj:a%0aX-Evil:%201",        # bare LF
    "Bad%20Name:1",                 # space in a name
    "Bad%0d%0aX-Evil:1",            # CRLF in a name
    ":empty-name",
])
def test_header_injection_refused(app, h):
    # twice: index 0 goes through brisk_res_header, index 1 through _header_n
    r = app.request(f"/status?h={h}&h={h}&h=X-After:ok")
    assert r.status == 200, r
    assert r.header("X-Evil") is None and r.header("X-Inj") is None, r
    assert not any(k.startswith("Bad") for k, _ in r.headers), r
    assert r.header("X-After") == "ok"
    assert r.body == b"status body"


@pytest.mark.parametrize("code", [42, 1000, -1])
def test_invalid_status_ignored(app, code):
    r = app.request(f"/status?code={code}")
    assert (r.status, r.body) == (200, b"status body")


@pytest.mark.parametrize("code,reason", [(202, "Accepted"), (410, "Gone"),
                                         (406, "Not Acceptable")])
def test_reason_phrase_of_standard_codes(app, code, reason):
    r = app.request(f"/status?code={code}")
    assert r.status == code
    assert r.reason == reason, r.reason


def test_header_with_nul_refused(app):
    # index 1: brisk_res_header_n gets the decoded slice with the NUL in it
    r = app.request("/status?h=X-Pad:1&h=X-Inj:a%00b&h=X-After:ok")
    assert r.header("X-Inj") is None, r
    assert r.header("X-Pad") == "1" and r.header("X-After") == "ok"


@pytest.mark.parametrize("code", [204, 304])
def test_no_body_status(app, code):
    with app.connect() as c:
        c.send(req("GET", f"/status?code={code}&body=dropped"))
        r = c.read_response()
        assert r.status == code
        assert r.header("Content-Length") is None
        assert r.header("Transfer-Encoding") is None
        c.send(req("GET", "/exact"))  # nothing of the body leaked into the stream
        r2 = c.read_response()
        assert (r2.status, r2.body) == (200, b"exact"), r2


def test_error_page(app):
    r = app.request("/error?code=503")
    assert r.status == 503
    # the same page as brisk's own errors (a 404 for no route): one style
    assert r.header("Content-Type").startswith("text/html")
    assert r.header("X-Dropped") is None          # headers set before are dropped
    assert b"<title>503 Service Unavailable</title>" in r.body
    nf = app.request("/error?code=404")
    assert nf.body == app.request("/no/such/route").body
    assert b"<title>404 Not Found</title>" in nf.body


def test_error_after_write_cuts_the_body(app):
    with app.connect(timeout=3) as c:
        c.send(req("GET", "/error-after-write"))
        r = c.read_head()
        assert r.status == 200 and "chunked" in r.tokens("Transfer-Encoding")
        rest = c.read_to_close(timeout=3)
    assert b"partial" in rest
    assert not rest.endswith(b"0\r\n\r\n"), rest  # no clean end: the client sees an error


def stats_delta(app, before, key):
    return app.stats()[key] - before[key]


def test_end_borrowed_small_and_large(app):
    s0 = app.stats()
    r = app.request("/borrowed")
    assert (r.status, r.body) == (200, b"borrowed body")
    assert r.header("X-Borrowed") == "yes"
    n = 3_000_000
    r = app.request(f"/borrowed?size={n}")
    assert r.header("Content-Length") == str(n)
    assert r.header("Content-Type") == "application/octet-stream"
    assert r.body == pattern(n)
    r = app.request(f"/borrowed?size={n}", method="HEAD")
    assert r.header("Content-Length") == str(n) and r.body == b""
    s = wait_stats(app, "releases", s0["releases"] + 3)
    assert s["releases"] - s0["releases"] == 3          # once each, not more


def test_end_borrowed_slow_reader(app):
    """A body larger than the socket buffers, read slowly: intact, released once."""
    s0 = app.stats()
    n = 4_000_000
    with app.connect(rcvbuf=16384) as c:
        c.send(req("GET", f"/borrowed?size={n}"))
        r = c.read_head()
        got = b""
        while len(got) < n:
            time.sleep(0.002)
            got += c.read_exact(min(262144, n - len(got)))
    assert r.status == 200 and got == pattern(n)
    s = wait_stats(app, "releases", s0["releases"] + 1)
    assert s["releases"] - s0["releases"] == 1


def test_end_file_with_content_type(app, files):
    r = app.request("/file?path=data.txt&ct=text/x-custom")  # relative to the cwd
    assert (r.status, r.body) == (200, b"hello file\n")
    assert r.header("Content-Type") == "text/x-custom"
    assert r.header("Content-Length") == "11"
    assert r.header("X-File") == "yes"
    r = app.request(f"/file?path={files}/big.bin&ct=application/x-big")
    assert hashlib.sha256(r.body).digest() == hashlib.sha256(
        (files / "big.bin").read_bytes()).digest()
    r = app.request("/file?path=data.txt&ct=text/x-custom", method="HEAD")
    assert r.header("Content-Length") == "11" and r.body == b""


@pytest.mark.parametrize("name,ctype", [("data.txt", "text/plain"), ("page.html", "text/html")])
def test_end_file_content_type_from_extension(app, name, ctype):
    with app.connect(timeout=3) as c:
        c.send(req("GET", f"/file?path={name}"))
        head = c.read_head()  # raises on the malformed status line
        assert head.status == 200
        assert head.header("Content-Type").split(";")[0] == ctype


def test_end_file_missing_and_directory_404(app, files):
    for path in ("no-such-file", f"{files}/dir", ""):
        r = app.request(f"/file?path={path}&ct=text/x")
        assert r.status == 404, (path, r)
        assert r.header("X-File") is None  # an error page, not the app's headers


def test_stream_chunked_http11_wire(app):
    with app.connect() as c:
        c.send(req("GET", "/stream?n=3&last=end%0a"))
        r = c.read_head()
        assert r.status == 200
        assert r.tokens("Transfer-Encoding") == ["chunked"]
        assert r.header("Content-Length") is None
        assert r.header("X-Stream") == "yes"
        want = (b"8\r\nchunk 0\n\r\n8\r\nchunk 1\n\r\n8\r\nchunk 2\n\r\n"
                b"4\r\nend\n\r\n0\r\n\r\n")
        assert c.read_exact(len(want)) == want     # one chunk per write, no empty chunk
        c.send(req("GET", "/exact"))               # keep-alive after a streamed body
        assert c.read_response().body == b"exact"


def test_stream_without_last_and_without_chunks(app):
    r = app.request("/stream?n=2")
    assert r.body == b"chunk 0\nchunk 1\n"
    r = app.request("/stream?n=0")
    assert r.status == 200 and r.body == b""
    assert r.tokens("Transfer-Encoding") == ["chunked"]


@pytest.mark.parametrize("conn_hdr", [None, "keep-alive"])
def test_stream_http10_close_delimited(app, conn_hdr):
    with app.connect() as c:
        c.send(req("GET", "/stream?n=3&last=end", version="HTTP/1.0", host=None,
                   headers={"Connection": conn_hdr} if conn_hdr else None))
        r = c.read_head()
        assert r.status == 200
        assert r.header("Transfer-Encoding") is None
        assert r.header("Content-Length") is None
        assert "close" in r.tokens("Connection")
        assert c.read_to_close(timeout=3) == b"chunk 0\nchunk 1\nchunk 2\nend"


def test_stream_large(app):
    r = app.request("/stream?n=4&size=1000000")
    assert r.body == pattern(1000000) * 4


def test_stream_head_has_no_body(app):
    with app.connect() as c:
        c.send(req("HEAD", "/stream?n=3"))
        r = c.read_response(method="HEAD")
        assert r.status == 200 and r.body == b""
        c.send(req("GET", "/exact"))
        r2 = c.read_response()
        assert (r2.status, r2.body) == (200, b"exact"), r2


def test_stream_written_from_timer_arrives_incrementally(app):
    with app.connect() as c:
        t0 = time.monotonic()
        c.send(req("GET", "/stream-timer?n=5"))
        r = c.read_head()
        size = int(c.read_line(), 16)
        first = c.read_exact(size + 2)
        t_first = time.monotonic() - t0
        rest = c._read_chunked()
        t_all = time.monotonic() - t0
    assert r.header("Content-Type") == "text/x-ticks"
    assert first == b"tick 0\n\r\n"
    assert rest == b"".join(b"tick %d\n" % i for i in range(1, 5)) + b"done\n"
    assert t_first < t_all - 0.07, (t_first, t_all)   # sent as written, not at the end
    assert t_all >= 0.14


# ------------------------------------------------------------ async
def test_timer_ends_response_later(app):
    t0 = time.monotonic()
    r = app.request("/delay?ms=200")
    took = time.monotonic() - t0
    assert r.status == 200 and r.header("X-Async") == "timer"
    waited = dict(kv.split("=") for kv in r.body.decode().split()[1:])
    assert int(waited["waited"]) >= 195 and int(waited["loop"]) >= 190
    assert waited["never"] == "0"   # a stopped timer does not fire
    assert 0.19 <= took < 2


def test_timer_does_not_block_the_loop(app):
    """While one request waits on a timer, another connection is served."""
    with app.connect() as a, app.connect() as b:
        t0 = time.monotonic()
        a.send(req("GET", "/delay?ms=200"))
        time.sleep(0.03)
        b.send(req("GET", "/exact"))
        rb = b.read_response()
        t_b = time.monotonic() - t0
        assert rb.body == b"exact"
        assert t_b < 0.15, t_b
        assert a.is_open(wait=0.01) and a.buf == b"", "delayed response came too early"
        ra = a.read_response()
        t_a = time.monotonic() - t0
    assert ra.status == 200 and ra.body.startswith(b"delayed")
    assert t_a >= 0.19


def test_async_then_pipelined_request_in_order(app):
    with app.connect() as c:
        c.send(req("GET", "/delay?ms=100") + req("GET", "/exact") + req("GET", "/io?ms=50"))
        r1, r2, r3 = c.read_response(), c.read_response(), c.read_response()
    assert r1.body.startswith(b"delayed") and r2.body == b"exact"
    assert r3.body.startswith(b"io got=ping")


def test_async_borrowed_release(app):
    s0 = app.stats()
    r = app.request("/delay?ms=50&borrow=1")
    assert r.body.startswith(b"delayed")
    s = wait_stats(app, "releases", s0["releases"] + 1)
    assert s["releases"] - s0["releases"] == 1


def test_work_runs_off_loop(app):
    s0 = app.stats()
    t0 = time.monotonic()
    r = app.request("/work?ms=200")
    assert r.status == 200
    d = dict(kv.split("=") for kv in r.body.decode().split()[2:])
    assert d["off_loop"] == "1" and d["done_on_loop"] == "1", r.body
    assert int(d["waited"]) >= 195
    assert time.monotonic() - t0 >= 0.19
    s = app.stats()
    assert s["work_started"] - s0["work_started"] == 1
    assert s["work_done"] - s0["work_done"] == 1


def test_work_concurrent_requests_proceed(app):
    """Three 300 ms jobs on three connections run in parallel in the pool,
    and a plain request is answered at once meanwhile."""
    conns = [app.connect() for _ in range(3)]
    try:
        t0 = time.monotonic()
        for c in conns:
            c.send(req("GET", "/work?ms=300"))
        time.sleep(0.05)
        r = app.request("/exact")
        assert r.body == b"exact" and time.monotonic() - t0 < 0.2
        for c in conns:
            assert c.read_response().body.startswith(b"work done off_loop=1")
        took = time.monotonic() - t0
    finally:
        for c in conns:
            c.close()
    assert 0.29 <= took < 0.85, took


def test_io_watcher_on_pipe(app):
    with app.connect() as a, app.connect() as b:
        t0 = time.monotonic()
        a.send(req("GET", "/io?ms=150"))
        time.sleep(0.02)
        b.send(req("GET", "/exact"))
        assert b.read_response().body == b"exact"
        assert time.monotonic() - t0 < 0.12
        r = a.read_response()
    body = r.body.decode()
    assert body.startswith("io got=ping writes=1 waited="), body
    assert int(body.rsplit("=", 1)[1]) >= 145


def test_worker_hook_sets_loop_data(app):
    d = app.json("/worker")
    assert d == {"id": 0, "magic_ok": True, "same_thread": True}
    s = app.stats()
    assert s["hook_starts"] == 1 and s["hook_stops"] == 0 and s["hook_bad"] == 0


# ------------------------------------------------------------ aborts
def abort_during(app, target, delay=0.05):
    c = app.connect()
    c.send(req("GET", target))
    time.sleep(delay)
    c.close()


@pytest.mark.parametrize("target", ["/delay?ms=300", "/work?ms=300", "/io?ms=300",
                                    "/stream-timer?n=10"])
def test_client_gone_during_async_wait(app, target):
    s0 = app.stats()
    abort_during(app, target, delay=0.1 if "stream" in target else 0.05)
    s = wait_stats(app, "aborts", s0["aborts"] + 1)
    assert s["aborts"] - s0["aborts"] == 1, s
    assert app.request("/exact").body == b"exact"   # still serving


def test_client_gone_borrowed_still_released(app):
    s0 = app.stats()
    abort_during(app, "/delay?ms=250&borrow=1")
    s = wait_stats(app, "releases", s0["releases"] + 1)
    assert s["aborts"] - s0["aborts"] == 1
    assert s["releases"] - s0["releases"] == 1


def test_client_gone_after_sending_more_during_async_wait(app):
    s0 = app.stats()
    c = app.connect()
    c.send(req("GET", "/delay?ms=400"))
    time.sleep(0.05)
    c.send(req("GET", "/exact"))     # more input while the handler is pending
    time.sleep(0.05)
    c.close()
    s = wait_stats(app, "aborts", s0["aborts"] + 1, timeout=1.5)
    assert s["aborts"] - s0["aborts"] == 1, s


# ------------------------------------------------------------ server-level
def test_brisk_stop_from_handler(start_app):
    a = start_app()
    r = a.request("/stop")
    assert r.body == b"stopping"
    assert a.proc.wait(5) == 0
    out = a.stdout()
    assert "hook stop worker=0" in out
    assert "brisk_run returned 0 hook_starts=1 hook_stops=1 hook_bad=0" in out


@pytest.mark.parametrize("target,prefix", [("/delay?ms=300", b"delayed"),
                                           ("/work?ms=300", b"work done"),
                                           ("/io?ms=300", b"io got=ping")])
def test_sigterm_while_async_pending_finishes_response(start_app, target, prefix):
    a = start_app()
    with a.connect() as c:
        c.send(req("GET", target))
        time.sleep(0.05)
        a.proc.send_signal(signal.SIGTERM)
        r = c.read_response()
        assert r.status == 200 and r.body.startswith(prefix), r
    assert a.proc.wait(5) == 0
    assert "brisk_run returned 0" in a.stdout()


def test_two_workers_each_get_hook_and_data(start_app):
    a = start_app(workers=2)
    assert a.stats()["hook_starts"] == 2
    ids = set()
    for _ in range(30):
        d = a.json("/worker")
        assert d["magic_ok"] and d["same_thread"], d
        ids.add(d["id"])
    assert ids <= {0, 1}
    conns = [a.connect() for _ in range(6)]        # brisk_work's done runs on the right worker
    for c in conns:
        c.send(req("GET", "/work?ms=50"))
    for c in conns:
        assert c.read_response().body.startswith(b"work done off_loop=1 done_on_loop=1")
        c.close()
    assert a.stop() == 0
    assert "hook_starts=2 hook_stops=2 hook_bad=0" in a.stdout()
    assert sorted(ln for ln in a.stdout().splitlines() if ln.startswith("hook stop")) == \
        ["hook stop worker=0", "hook stop worker=1"]


def test_brisk_listen_and_flag_listen_both_serve(start_app):
    p1 = free_port()
    a = start_app(env={"API_TEST_LISTEN": f"127.0.0.1:{p1}"})
    with RawConn("127.0.0.1", p1) as c:
        c.send(req("GET", "/exact"))
        assert c.read_response().body == b"exact"
    assert a.request("/exact").body == b"exact"


def test_brisk_listen_replaces_default(start_app):
    p1, p2 = free_port(), free_port()
    a = start_app(env={"API_TEST_LISTEN": f"127.0.0.1:{p1},127.0.0.1:{p2}"}, listen=False,
                  wait_for=[("127.0.0.1", p1), ("127.0.0.1", p2)])
    for p in (p1, p2):
        with RawConn("127.0.0.1", p) as c:
            c.send(req("GET", "/exact"))
            assert c.read_response().body == b"exact"
    listening = a.stderr().split("listening on", 1)[-1].splitlines()[0]
    assert not re.search(r":8080\b", listening), listening


def test_create_server_catch_all(start_app):
    a = start_app(env={"API_TEST_CREATE": "1"})
    assert a.request("/").body == b"create GET / udata=created"
    assert a.request("/any/deep/path?q=1").body == b"create GET /any/deep/path udata=created"
    r = a.request("/x", method="POST", body=b"b", headers={"Content-Length": "1"})
    assert r.body == b"create POST /x udata=created"


def test_serve_files_beside_own_routes(start_app, tmp_path):
    """brisk_server_args_config + brisk_serve_files mounted after an own route."""
    root, cgi = tmp_path / "root", tmp_path / "cgi"
    root.mkdir()
    cgi.mkdir()
    (root / "f.txt").write_bytes(b"static file\n")
    (cgi / "s.sh").write_text("#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\ncgi ran\\n'\n")
    (cgi / "s.sh").chmod(0o755)
    a = start_app(env={"API_TEST_FILES": "1"},
                  args=["--root", root, "--cgi", f"/cgi-bin/={cgi}", "--access-log", "off"])
    assert a.request("/hello-api").body == b"hello from the api"
    r = a.request("/f.txt")
    assert (r.status, r.body) == (200, b"static file\n")
    assert r.header("Content-Type").startswith("text/plain")
    assert a.request("/cgi-bin/s.sh").body == b"cgi ran\n"
    assert a.request("/missing").status == 404
    r = a.request("/hello-api", method="POST", body=b"", headers={"Content-Length": "0"})
    assert r.status == 405                    # the static handler: GET and HEAD only


def test_max_body_setting(start_app):
    a = start_app(env={"API_TEST_MAX_BODY": "1000"})
    r = a.request("/body", method="POST", body=b"x" * 1000, headers={"Content-Length": "1000"})
    assert r.status == 200 and len(r.body) == 1000
    with a.connect() as c:
        c.send(req("POST", "/body", headers={"Content-Length": "1001"}))
        assert c.read_response().status == 413


def test_app_flags(tmp_path):
    exe = str(BIN_DIR / "api_test")
    for args, rc in ((["--help"], 0), (["--version"], 0), (["--bogus"], 2),
                     (["--workers"], 2), (["extra"], 2)):
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=5)
        assert p.returncode == rc, (args, p)
        assert not any(m in p.stderr for m in SANITIZER_MARKERS), p.stderr
        if args == ["--help"]:
            assert "--listen" in p.stdout and "--workers" in p.stdout
            assert "--cgi" not in p.stdout      # brisk_server_args: the basic flags only
        if args == ["--version"]:
            assert "0.1.0" in p.stdout


# ---------------------------------------------------------------- error renderer, loop info
def test_json_errors_for_server_made_errors(start_app):
    a = start_app(env={"API_TEST_JSON_ERRORS": "1"})
    r = a.request("/no-such-route")
    assert r.status == 404
    assert r.header("content-type") == "application/json"
    assert r.body == b'{"error": 404, "method": "GET", "tag": "json"}'
    r = a.request("/only-post")                     # GET on a POST/PUT-only path
    assert r.status == 405
    assert "POST" in r.header("allow", "") and "PUT" in r.header("allow", "")
    assert r.body.startswith(b'{"error": 405')
    c = a.connect()                                  # a request that cannot be parsed
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
    r = c.read_response()
    assert r.status == 400
    assert r.header("content-type") == "application/json"
    assert r.body == b'{"error": 400, "method": "", "tag": "json"}'
    c.close()


def test_default_error_pages_without_renderer(app):
    r = app.request("/no-such-route")
    assert r.status == 404
    assert r.header("content-type", "").startswith("text/html")


def test_loop_id_workers_and_loop_work(start_app):
    a = start_app(workers=2)
    seen = set()
    for _ in range(20):
        r = a.request("/loopinfo")
        assert r.status == 200
        text = r.body.decode()
        assert text.endswith("workers=2 loop_work=1"), text
        seen.add(text.split()[0])
    assert seen <= {"id=0", "id=1"}
