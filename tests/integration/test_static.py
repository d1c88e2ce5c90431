"""Static file serving: content types, directories, traversal, conditional
requests, ranges, HEAD and precompressed variants."""
from __future__ import annotations

import re
import time

import pytest

from brisk_testlib import FIXED_MTIME, HTTP_DATE_RE, ODD_NAME, SECRET, RawConn, free_port, http_date, req


def media_type(ct):
    return ct.split(";")[0].strip().lower()


def params(ct):
    return [p.strip().lower().replace(" ", "") for p in ct.split(";")[1:]]


def check_common(r, body_expected=True):
    """Date, Server and framing headers that every response must have."""
    assert r.header("Date"), r
    assert HTTP_DATE_RE.match(r.header("Date")), r.header("Date")
    assert (r.header("Server") or "").startswith("brisk"), r
    assert r.has("Content-Length") or "chunked" in r.tokens("Transfer-Encoding"), r
    if body_expected and r.body:
        assert r.header("Content-Type"), r


# ------------------------------------------------------------ basics
def test_get_file(server):
    r, c = server.raw(req("GET", "/hello.txt"))
    c.close()
    assert r.status == 200, r
    assert r.body == (server.root / "hello.txt").read_bytes()
    check_common(r)
    assert int(r.header("Content-Length")) == len(r.body)
    assert media_type(r.header("Content-Type")) == "text/plain"


@pytest.mark.parametrize("name,expected", [
    ("index.html", "text/html"),
    ("hello.txt", "text/plain"),
    ("style.css", "text/css"),
    ("app.js", ("text/javascript", "application/javascript")),
    ("img.png", "image/png"),
    ("data.json", "application/json"),
    ("blob.qqqunknown", "application/octet-stream"),
    ("noext", "application/octet-stream"),
])
def test_content_type(server, name, expected):
    status, h, body = server.get("/" + name)
    assert status == 200
    assert body == (server.root / name).read_bytes()
    ct = h["Content-Type"]
    assert ct, "missing Content-Type"
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert media_type(ct) in expected, ct
    if media_type(ct).startswith("text/"):
        assert "charset=utf-8" in params(ct), f"text type without charset: {ct!r}"


def test_query_string_is_not_part_of_path(server):
    status, _, body = server.get("/hello.txt?x=1&y=%2F")
    assert status == 200
    assert body == (server.root / "hello.txt").read_bytes()


def test_missing_file_404(server):
    r, c = server.raw(req("GET", "/does-not-exist.txt"))
    c.close()
    assert r.status == 404, r
    check_common(r)


def test_common_headers_on_non_200_responses(server):
    for target, status in [("/nope", 404), ("/dir", 301), ("/noindex/", 403)]:
        r, c = server.raw(req("GET", target))
        c.close()
        assert r.status == status, (target, r)
        check_common(r)
    r, c = server.raw(b"GARBAGE\r\n\r\n")
    c.close()
    assert r.status == 400, r
    check_common(r)


def test_percent_decoded_path(server):
    for target in ("/a%20b.txt", "/%61%20b.txt", "/a%20%62.txt"):
        r, c = server.raw(req("GET", target))
        c.close()
        assert r.status == 200, (target, r)
        assert r.body == (server.root / "a b.txt").read_bytes()


# ------------------------------------------------------------ directories
def test_index_html_for_directory(server):
    status, h, body = server.get("/dir/")
    assert status == 200
    assert body == (server.root / "dir" / "index.html").read_bytes()
    assert media_type(h["Content-Type"]) == "text/html"
    status, _, body = server.get("/")
    assert status == 200
    assert body == (server.root / "index.html").read_bytes()


@pytest.mark.parametrize("target,suffix", [
    ("/dir", "/dir/"),
    ("/dir?a=1&b=2", "/dir/?a=1&b=2"),
    ("/noindex", "/noindex/"),
])
def test_directory_without_slash_redirects(server, target, suffix):
    r, c = server.raw(req("GET", target))
    c.close()
    assert r.status == 301, r
    loc = r.header("Location")
    assert loc and loc.endswith(suffix), r
    check_common(r)


def test_directory_without_index_is_forbidden(server):
    r, c = server.raw(req("GET", "/noindex/"))
    c.close()
    assert r.status == 403, r
    assert b"a.txt" not in r.body


def test_autoindex_lists_and_escapes_names(start_brisk):
    srv = start_brisk(config="[server]\nautoindex = on\n", cli_defaults=True)
    r, c = srv.raw(req("GET", "/noindex/"))
    c.close()
    assert r.status == 200, r
    assert media_type(r.header("Content-Type")) == "text/html"
    body = r.body.decode("utf-8", "replace")
    assert "a.txt" in body
    assert "subdir" in body
    assert "&lt;b&gt;&amp;" in body, body
    assert ODD_NAME not in body, "unescaped file name in listing"
    assert "<b>&" not in body, body
    # every byte is the listing's: no NUL, every entry line starts with its link
    assert b"\x00" not in r.body
    pre = body.split("<pre>\n", 1)[1].split("</pre>", 1)[0]
    for line in pre.splitlines():
        assert line.startswith('<a href="'), repr(line)
    # a directory with an index.html still serves the index
    status, _, top = srv.get("/")
    assert status == 200 and top == (srv.root / "index.html").read_bytes()


# ------------------------------------------------------------ traversal
TRAVERSAL = [
    "/../etc/passwd",
    "/../../../../../../../../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/%2E%2E/%2E%2E/etc/passwd",
    "/.%2e/.%2e/etc/passwd",
    "/..%2f..%2fetc/passwd",
    "/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/a/%2e%2e/%2e%2e/etc/passwd",
    "/a/../../etc/passwd",
    "/sub/..%2f..%2f..%2fetc/passwd",
    "/..%252f..%252fetc/passwd",
    "/%00",
    "/file%00.html",
    "/hello.txt%00.html",
    "/sub%2fx.txt",
    "/sub%2Fx.txt",
    "/..\\..\\etc\\passwd",
    "/a\\..\\..\\etc\\passwd",
    "/..%5c..%5cetc%5cpasswd",
    "/a/..%5c..%5cetc/passwd",
    "/link_passwd",
    "/link_decoy",
    "/link_outfile_rel",
    "/link_outdir/secret.txt",
    "/link_outdir/",
    "/link_etc/passwd",
]


@pytest.mark.parametrize("target", TRAVERSAL)
def test_traversal_is_refused(server, target):
    r, c = server.raw(req("GET", target))
    c.close()
    assert r.status in (400, 403, 404), r
    assert b"root:" not in r.body, r
    assert SECRET not in r.body


def test_symlink_inside_root_is_served(server):
    status, _, body = server.get("/link_in.txt")
    assert status == 200
    assert body == (server.root / "hello.txt").read_bytes()


# ------------------------------------------------------------ validators
def test_etag_and_last_modified(server):
    status, h, _ = server.get("/hello.txt")
    assert status == 200
    etag = h["ETag"]
    assert etag and re.fullmatch(r'"[!#-~]+"', etag), f"not a strong quoted ETag: {etag!r}"
    assert h["Last-Modified"] == http_date(FIXED_MTIME)


def test_etag_changes_when_file_changes(server):
    _, h1, _ = server.get("/hello.txt")
    p = server.root / "hello.txt"
    p.write_bytes(b"changed content, different size\n")
    # brisk caches open files and revalidates them at most once a second
    # (open_file_cache_valid); allow for that.
    deadline = time.monotonic() + 3
    while True:
        status, h2, body = server.get("/hello.txt")
        if body == p.read_bytes() or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == 200 and body == p.read_bytes(), "changed file not served within 3 s"
    assert int(h2["Content-Length"]) == len(body)
    assert h1["ETag"] != h2["ETag"]


def _get_raw_pipelined_with_followup(server, headers, method="GET"):
    """Sends a conditional request and a follow-up GET in one write so a
    stray body on the first would corrupt the second."""
    c = server.connect()
    c.send(req(method, "/hello.txt", headers=headers) + req("GET", "/dir/other.txt"))
    r1 = c.read_response(method)
    r2 = c.read_response()
    c.close()
    assert r2.status == 200 and r2.body == (server.root / "dir/other.txt").read_bytes(), r2
    return r1


def test_if_none_match_etag_304(server):
    _, h, _ = server.get("/hello.txt")
    r = _get_raw_pipelined_with_followup(server, {"If-None-Match": h["ETag"]})
    assert r.status == 304, r
    assert r.header("ETag") == h["ETag"], r
    assert r.header("Date") and (r.header("Server") or "").startswith("brisk"), r


@pytest.mark.parametrize("fmt", ["*", '"nomatch", {etag}', "W/{etag}"])
def test_if_none_match_variants_304(server, fmt):
    _, h, _ = server.get("/hello.txt")
    status, _, body = server.get("/hello.txt",
                                 headers={"If-None-Match": fmt.format(etag=h["ETag"])})
    assert status == 304
    assert body == b""


def test_if_none_match_other_etag_200(server):
    status, _, body = server.get("/hello.txt", headers={"If-None-Match": '"not-it"'})
    assert status == 200
    assert body == (server.root / "hello.txt").read_bytes()


def test_if_modified_since_equal_304(server):
    _, h, _ = server.get("/hello.txt")
    r = _get_raw_pipelined_with_followup(server, {"If-Modified-Since": h["Last-Modified"]})
    assert r.status == 304, r


def test_if_modified_since_newer_304(server):
    status, _, body = server.get(
        "/hello.txt", headers={"If-Modified-Since": http_date(FIXED_MTIME + 86400)})
    assert status == 304 and body == b""


def test_if_modified_since_older_200(server):
    status, _, body = server.get(
        "/hello.txt", headers={"If-Modified-Since": http_date(FIXED_MTIME - 86400)})
    assert status == 200
    assert body == (server.root / "hello.txt").read_bytes()


def test_if_none_match_takes_precedence_over_if_modified_since(server):
    # RFC 9110 13.1.3: If-Modified-Since is ignored when If-None-Match is present.
    status, _, body = server.get("/hello.txt", headers={
        "If-None-Match": '"not-it"', "If-Modified-Since": http_date(FIXED_MTIME)})
    assert status == 200 and body == (server.root / "hello.txt").read_bytes()


# ------------------------------------------------------------ ranges
@pytest.fixture
def rdata(server):
    return (server.root / "range.bin").read_bytes()


def test_range_first_bytes(server, rdata):
    r, c = server.raw(req("GET", "/range.bin", headers={"Range": "bytes=0-9"}))
    c.close()
    n = len(rdata)
    assert r.status == 206, r
    assert r.header("Content-Range") == f"bytes 0-9/{n}"
    assert r.header("Content-Length") == "10"
    assert r.body == rdata[:10]


@pytest.mark.parametrize("spec,sl", [
    ("bytes=-5", slice(-5, None)),
    ("bytes=5-", slice(5, None)),
    ("bytes=10-19", slice(10, 20)),
    ("bytes=0-100000", slice(0, None)),
    ("bytes=0-0", slice(0, 1)),
])
def test_range_forms(server, rdata, spec, sl):
    n = len(rdata)
    status, h, body = server.get("/range.bin", headers={"Range": spec})
    assert status == 206
    start, stop, _ = sl.indices(n)
    assert h["Content-Range"] == f"bytes {start}-{stop - 1}/{n}"
    assert body == rdata[sl]
    assert int(h["Content-Length"]) == len(body)


def test_range_unsatisfiable_416(server, rdata):
    n = len(rdata)
    r, c = server.raw(req("GET", "/range.bin", headers={"Range": f"bytes={n}-"}))
    c.close()
    assert r.status == 416, r
    assert r.header("Content-Range") == f"bytes */{n}"


@pytest.mark.parametrize("spec", ["bytes=abc", "bytes=--1", "lines=0-9", "bytes 0-9", "bytes=1-2-3"])
def test_malformed_range_ignored(server, rdata, spec):
    status, h, body = server.get("/range.bin", headers={"Range": spec})
    assert status == 200
    assert body == rdata


def test_multiple_ranges_serve_full_body(server, rdata):
    status, h, body = server.get("/range.bin", headers={"Range": "bytes=0-1,5-6"})
    assert status == 200
    assert body == rdata


def test_if_range(server, rdata):
    _, h, _ = server.get("/range.bin")
    etag = h["ETag"]
    status, h2, body = server.get("/range.bin", headers={"Range": "bytes=0-9", "If-Range": etag})
    assert status == 206 and body == rdata[:10]
    status, _, body = server.get("/range.bin", headers={"Range": "bytes=0-9", "If-Range": '"other"'})
    assert status == 200 and body == rdata


# ------------------------------------------------------------ HEAD
def test_head_has_get_headers_and_no_body(server):
    c = server.connect()
    c.send(req("GET", "/style.css"))
    g = c.read_response()
    c.send(req("HEAD", "/style.css") + req("GET", "/hello.txt"))
    h = c.read_response("HEAD")
    nxt = c.read_response()
    c.close()
    assert g.status == h.status == 200
    for name in ("Content-Length", "Content-Type", "ETag", "Last-Modified"):
        assert h.header(name) == g.header(name), name
    assert int(h.header("Content-Length")) == len(g.body) > 0
    check_common(h)
    # the next response starts right after HEAD's header block
    assert nxt.status == 200 and nxt.body == (server.root / "hello.txt").read_bytes(), nxt


def test_head_of_missing_file(server):
    c = server.connect()
    c.send(req("HEAD", "/nope.txt") + req("GET", "/hello.txt"))
    h = c.read_response("HEAD")
    nxt = c.read_response()
    c.close()
    assert h.status == 404
    assert nxt.status == 200 and nxt.body == (server.root / "hello.txt").read_bytes()


# ------------------------------------------------------------ precompressed
@pytest.mark.parametrize("name", ["style.css", "same.css"])
def test_gzip_variant_served(server, name):
    gz = (server.root / (name + ".gz")).read_bytes()
    r, c = server.raw(req("GET", "/" + name, headers={"Accept-Encoding": "gzip, deflate"}))
    c.close()
    assert r.status == 200, r
    assert r.header("Content-Encoding") == "gzip", r
    assert r.body == gz
    assert int(r.header("Content-Length")) == len(gz)
    assert "accept-encoding" in r.tokens("Vary"), r
    assert media_type(r.header("Content-Type")) == "text/css"


def test_plain_served_without_accept_encoding(server):
    plain = (server.root / "style.css").read_bytes()
    r, c = server.raw(req("GET", "/style.css"))
    c.close()
    assert r.status == 200
    assert r.header("Content-Encoding") in (None, "identity")
    assert r.body == plain
    # A sibling exists, so the identity response varies too (a shared cache
    # must not hand it to a client that accepts gzip, nor the reverse).
    assert "accept-encoding" in r.tokens("Vary"), r


def test_identity_response_varies_when_sibling_exists(server):
    for ae in ("br", "identity", "gzip;q=0"):
        r, c = server.raw(req("GET", "/style.css", headers={"Accept-Encoding": ae}))
        c.close()
        assert r.status == 200 and r.header("Content-Encoding") in (None, "identity"), r
        assert "accept-encoding" in r.tokens("Vary"), (ae, r)
    r, c = server.raw(req("GET", "/hello.txt"))  # no sibling: no Vary
    c.close()
    assert r.status == 200 and r.header("Vary") is None, r


def test_brotli_variant_served(server):
    br = (server.root / "app.js.br").read_bytes()
    r, c = server.raw(req("GET", "/app.js", headers={"Accept-Encoding": "br"}))
    c.close()
    assert r.status == 200
    assert r.header("Content-Encoding") == "br", r
    assert r.body == br
    assert "accept-encoding" in r.tokens("Vary")


def test_no_variant_for_unaccepted_encoding(server):
    # style.css has only a .gz; app.js has only a .br
    r, c = server.raw(req("GET", "/style.css", headers={"Accept-Encoding": "br"}))
    c.close()
    assert r.header("Content-Encoding") in (None, "identity")
    assert r.body == (server.root / "style.css").read_bytes()
    r, c = server.raw(req("GET", "/app.js", headers={"Accept-Encoding": "gzip"}))
    c.close()
    assert r.header("Content-Encoding") in (None, "identity")
    assert r.body == (server.root / "app.js").read_bytes()


def test_stale_gzip_variant_not_served(server):
    r, c = server.raw(req("GET", "/old.css", headers={"Accept-Encoding": "gzip"}))
    c.close()
    assert r.status == 200
    assert r.header("Content-Encoding") in (None, "identity"), r
    assert r.body == (server.root / "old.css").read_bytes()


def test_gzip_refused_with_q0(server):
    r, c = server.raw(req("GET", "/style.css", headers={"Accept-Encoding": "gzip;q=0, identity"}))
    c.close()
    assert r.status == 200
    assert r.header("Content-Encoding") in (None, "identity"), r
    assert r.body == (server.root / "style.css").read_bytes()


# ------------------------------------------------------------ big files, local and remote peers
def _primary_ipv4():
    """This host's address on its default route (not loopback), or None."""
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.255", 9))  # no packet is sent
        ip = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if ip.startswith("127.") else ip


def _pipelined_bodies(conn, paths):
    conn.send(b"".join(req("GET", p) for p in paths))
    return [conn.read_response() for _ in paths]


@pytest.mark.parametrize("where", ["loopback", "host address"])
def test_big_file_pipelined_byte_exact(start_brisk, tmp_path, where):
    """A file of a few MiB (sendfile), pipelined and ranged, to a peer on a
    loopback address and to one on the host's own address: the file's
    bytes, in order, every time."""
    import os
    host = "127.0.0.1"
    if where == "host address":
        host = _primary_ipv4()
        if host is None:
            pytest.skip("no non-loopback IPv4 address")
    srv = start_brisk(listens=[("0.0.0.0", free_port())])
    data = os.urandom(3 * 1024 * 1024 + 123)
    (srv.root / "big.bin").write_bytes(data)
    c = srv.connect(host=host, timeout=30)
    got = _pipelined_bodies(c, ["/big.bin", "/big.bin", "/index.html", "/big.bin"])
    assert [r.status for r in got] == [200, 200, 200, 200]
    assert got[0].body == data and got[1].body == data and got[3].body == data
    c.send(req("GET", "/big.bin", headers=[("Range", "bytes=1000000-2999999")]))
    r = c.read_response()
    assert r.status == 206 and r.body == data[1000000:3000000]
    c.close()


def test_file_shrinking_mid_transfer_plain_cuts_the_response(start_brisk):
    """A big file truncated in place while a slow reader downloads it over
    plain HTTP: the response ends short of its length, every byte that
    arrived is the file's own (none of the zeros a mapping of the file
    would show past the new end: any user-space copy must stop there as
    sendfile does), and the server serves the new file whole once the
    open-file cache looks again."""
    import os
    srv = start_brisk()
    size, keep = 32 * 1024 * 1024, 16 * 1024 * 1024 + 1000
    data = os.urandom(size)
    path = srv.root / "shrink.bin"
    path.write_bytes(data)
    assert srv.get("/shrink.bin", method="HEAD")[0] == 200
    c = RawConn(port=srv.port, timeout=30, rcvbuf=16384)
    c.send(req("GET", "/shrink.bin"))
    r = c.read_head()
    assert r.status == 200 and int(r.header("content-length")) == size
    got = bytearray(c.buf)
    while len(got) < 200000:
        got += c.sock.recv(65536)
    os.truncate(path, keep)
    while len(got) < size:
        try:
            d = c.sock.recv(1 << 20)
        except ConnectionResetError:
            break
        if not d:
            break
        got += d
    c.close()
    assert 200000 <= len(got) <= keep, "the response must end short of its length"
    assert got == data[:len(got)], "bytes that are not the file's were sent"
    time.sleep(1.2)  # open_file_cache_valid (1 s)
    status, _, body = srv.get("/shrink.bin")
    assert status == 200 and body == data[:keep]
