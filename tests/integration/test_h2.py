"""HTTP/2: brisk over TLS (ALPN h2), in cleartext with prior knowledge and with
Upgrade: h2c, and on an h2c-only listener; checked with real clients (curl,
h2load, h2spec, headless Chromium, Python's h2) and against the attack
classes of HTTP/2: rapid reset, CONTINUATION floods, HPACK bombs, PING and
SETTINGS floods, zero-window stalls.

The server under test runs one worker with three listeners: plain (HTTP/1.1
and h2c), ssl (ALPN h2 / http/1.1) and h2c-only.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from apps_lib import AppProc, check_procs
from brisk_testlib import free_port

h2 = pytest.importorskip("h2", reason="the h2 package (tests/requirements.txt)")
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402

OPENSSL = shutil.which("openssl")
CURL = shutil.which("curl")
H2LOAD = shutil.which("h2load")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REPO = Path(__file__).resolve().parents[2]
H2SPEC = REPO / "tests" / ".tools" / "h2spec"
pytestmark = pytest.mark.skipif(not OPENSSL or not CURL, reason="needs openssl and curl")

BIG = 3 * 1024 * 1024 + 4321  # several flow-control windows, not a multiple of a frame


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    d = tmp_path_factory.mktemp("h2certs")
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    "k.pem", "-out", "c.pem", "-days", "30", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   cwd=d, check=True, capture_output=True, timeout=30)
    return d / "c.pem", d / "k.pem"


class H2Srv:
    def __init__(self, srv, port, tport, cport, log):
        self.srv, self.port, self.tport, self.cport, self.log = srv, port, tport, cport, log


@pytest.fixture
def start_h2(start_brisk, cert, tmp_path):
    def _start(extra=""):
        port, tport, cport = free_port(), free_port(), free_port()
        log = tmp_path / "access.log"
        config = (f"listen = 127.0.0.1:{port}\nlisten = 127.0.0.1:{tport} ssl\n"
                  f"listen = 127.0.0.1:{cport} h2c\n"
                  f"root = {{root}}\nworkers = 1\naccess_log = {log}\n"
                  f"ssl_certificate = {cert[0]}\nssl_certificate_key = {cert[1]}\n{extra}")
        srv = start_brisk(config=config, listens=[("127.0.0.1", port), ("127.0.0.1", tport),
                                                  ("127.0.0.1", cport)])
        return H2Srv(srv, port, tport, cport, log)
    return _start


@pytest.fixture
def hs(start_h2):
    return start_h2()


def curl(*args, timeout=60):
    return subprocess.run([CURL, "-sS", "-k", *args], capture_output=True, timeout=timeout)


class Client:
    """A raw HTTP/2 client on Python's h2: requests, and frames by hand."""

    def __init__(self, port, tls=False, settings=None, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")
            assert self.sock.selected_alpn_protocol() == "h2"
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                        validate_outbound_headers=False,
                                        normalize_outbound_headers=False)
        self.conn = h2.connection.H2Connection(config=cfg)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.flush()
        self.events = []
        self.closed = False
        self.goaway = None
        self.server_settings = {}

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def pump(self, timeout=None):
        """Reads once; returns False at EOF."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.closed = True
            return False
        for ev in self.conn.receive_data(data):
            self.events.append(ev)
            if isinstance(ev, h2.events.ConnectionTerminated):
                self.goaway = ev.error_code
            elif isinstance(ev, h2.events.RemoteSettingsChanged):
                self.server_settings.update({k: v.new_value for k, v in ev.changed_settings.items()})
            elif isinstance(ev, h2.events.DataReceived):
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        try:
            self.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        return True

    def request(self, path, method="GET", headers=(), body=b"", authority="localhost",
                scheme="http"):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", scheme),
                (":authority", authority), *headers]
        self.conn.send_headers(sid, hdrs, end_stream=not body)
        if body:
            self.send_body(sid, body)
        self.flush()
        return sid

    def send_body(self, sid, body):
        while body:
            n = min(len(body), self.conn.local_flow_control_window(sid),
                    self.conn.max_outbound_frame_size)
            if n <= 0:
                self.flush()
                self.pump(timeout=5)
                continue
            self.conn.send_data(sid, body[:n], end_stream=len(body) == n)
            body = body[n:]
            self.flush()

    def response(self, sid, timeout=10.0):
        """(status, headers dict, body) of stream sid."""
        deadline = time.monotonic() + timeout
        while not self._ended(sid):
            if self.closed or time.monotonic() > deadline:
                raise AssertionError(f"stream {sid}: no complete response; events {self.events[-5:]}")
            self.pump(timeout=max(0.1, deadline - time.monotonic()))
        hdrs, body = {}, b""
        for ev in self.events:
            if getattr(ev, "stream_id", None) != sid:
                continue
            if isinstance(ev, h2.events.ResponseReceived):
                hdrs = dict(ev.headers)
            elif isinstance(ev, h2.events.DataReceived):
                body += ev.data
        if ":status" not in hdrs:
            return None, hdrs, body  # reset before a response
        return int(hdrs[":status"]), hdrs, body

    def _ended(self, sid):
        return any(getattr(ev, "stream_id", None) == sid and
                   isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset))
                   for ev in self.events)

    def get(self, path, **kw):
        return self.response(self.request(path, **kw))

    def raw(self, data: bytes):
        self.sock.sendall(data)

    def wait_end(self, timeout=10.0):
        """Reads until the server closes; returns the GOAWAY error code or None."""
        deadline = time.monotonic() + timeout
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("the server did not close the connection")
            try:
                self.pump(timeout=left)
            except socket.timeout:
                pass
        return self.goaway

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def frame(ftype, flags, sid, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def alive(hs):
    r = curl("--http2-prior-knowledge", f"http://127.0.0.1:{hs.port}/hello.txt", timeout=10)
    assert r.stdout == b"Hello, brisk!\n", r.stderr


# ---------------------------------------------------------------- curl


def test_curl_prior_knowledge_upgrade_alpn_and_http1_1(hs):
    for args in (["--http2-prior-knowledge", f"http://127.0.0.1:{hs.port}/hello.txt"],
                 ["--http2-prior-knowledge", f"http://127.0.0.1:{hs.cport}/hello.txt"],
                 ["--http2", f"http://127.0.0.1:{hs.port}/hello.txt"],
                 ["--http2", f"https://127.0.0.1:{hs.tport}/hello.txt"]):
        r = curl("-i", *args)
        assert r.returncode == 0, (args, r.stderr)
        head, body = r.stdout.rsplit(b"\r\n\r\n", 1)
        assert b"HTTP/2 200" in head, (args, head)
        assert body == b"Hello, brisk!\n"
        assert b"\r\ncontent-length: 14" in head and b"\r\nserver: brisk/" in head
    r = curl("-i", "--http2", f"http://127.0.0.1:{hs.port}/hello.txt")
    assert r.stdout.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    # HTTP/1.1 goes on beside it, on both listeners
    r = curl("-i", "--http1.1", f"https://127.0.0.1:{hs.tport}/hello.txt")
    assert r.stdout.startswith(b"HTTP/1.1 200"), r.stdout[:100]
    r = curl("-i", f"http://127.0.0.1:{hs.port}/hello.txt")
    assert r.stdout.startswith(b"HTTP/1.1 200"), r.stdout[:100]
    hs.srv.stop()
    log = hs.log.read_text()
    assert log.count('"GET /hello.txt HTTP/2.0" 200 14 ') == 5, log
    assert log.count('"GET /hello.txt HTTP/1.1" 200 14 ') == 2, log


def test_h2c_listener_closes_http1_1(hs):
    s = socket.create_connection(("127.0.0.1", hs.cport), timeout=5)
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(100) == b""
    s.close()


def test_alpn_offers_h2_first_and_http2_off(start_h2):
    hs = start_h2()
    for offer, want in (("h2,http/1.1", "h2"), ("http/1.1,h2", "h2"), ("http/1.1", "http/1.1")):
        p = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{hs.tport}", "-alpn", offer],
                           capture_output=True, timeout=15, input=b"")
        assert f"ALPN protocol: {want}" in p.stdout.decode(), (offer, p.stdout[-500:])
    off = start_h2("http2 = off\n")
    p = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{off.tport}", "-alpn",
                        "h2,http/1.1"], capture_output=True, timeout=15, input=b"")
    assert "ALPN protocol: http/1.1" in p.stdout.decode()
    r = curl("-i", "--http2", f"http://127.0.0.1:{off.port}/hello.txt")
    assert r.stdout.startswith(b"HTTP/1.1 200"), r.stdout[:200]  # the upgrade is declined


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2"])
def test_large_file_sha256(hs, tmp_path, tls):
    data = os.urandom(BIG)
    (hs.srv.root / "big.bin").write_bytes(data)
    out = tmp_path / "got.bin"
    url = (f"https://127.0.0.1:{hs.tport}/big.bin" if tls else
           f"http://127.0.0.1:{hs.port}/big.bin")
    r = curl("--http2-prior-knowledge" if not tls else "--http2", "-o", str(out), url)
    assert r.returncode == 0, r.stderr
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(data).digest()


# ---------------------------------------------------------------- Python h2


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2"])
def test_head_404_304_and_many_streams_at_once(hs, tls):
    with Client(hs.tport if tls else hs.port, tls=tls) as c:
        st, h, body = c.get("/hello.txt", method="HEAD")
        assert (st, h["content-length"], body) == (200, "14", b"")
        st, h, body = c.get("/nope.txt")
        assert st == 404 and h["content-type"].startswith("text/html") and b"404" in body
        st, h, _ = c.get("/hello.txt")
        st2, h2_, body = c.get("/hello.txt", headers=[("if-none-match", h["etag"])])
        assert st2 == 304 and body == b"" and "content-length" not in h2_
        # 50 streams in flight at once, answered each with its own file
        sids = {c.request(f"/p/{i % 10}.txt"): i % 10 for i in range(50)}
        for sid, i in sids.items():
            st, _, body = c.response(sid)
            assert st == 200 and body == f"pipelined file number {i}\n".encode() * (i + 1)
        assert c.server_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] == 128
        for k, v in h.items():
            assert k == k.lower() and k not in ("connection", "keep-alive", "transfer-encoding")


def test_request_headers_reach_the_handler_as_in_http1(hs):
    """Cookies split over several fields come joined; :authority is the Host."""
    with Client(hs.port) as c:
        st, _, _ = c.get("/hello.txt", headers=[("cookie", "a=1"), ("cookie", "b=2"),
                                                ("user-agent", "h2-test")])
        assert st == 200
        st, _, _ = c.get("/hello.txt", authority="bad host")
        assert st is None  # malformed (RFC 9113 8.1.1): the stream is reset
        st, _, _ = c.get("/hello.txt", authority="a:1:2")
        assert st == 400  # an invalid :authority, as an invalid Host
    hs.srv.stop()
    assert '"GET /hello.txt HTTP/2.0" 200 14 "-" "h2-test"' in hs.log.read_text()


def test_repeated_header_blocks_decoded_once_and_right(hs):
    """A block of indexed fields only, sent again, is taken from what the
    server decoded the first time; the same bytes after the client's HPACK
    table has changed mean other fields, and are decoded again."""
    def lit(name_idx, value):  # literal with incremental indexing, static name (RFC 7541 6.2.1)
        return bytes([0x40 | name_idx, len(value)]) + value.encode()

    def rd(sock, want):
        buf, done = b"", set()
        while len(done) < want:
            data = sock.recv(65536)
            assert data, "closed"
            buf += data
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n, t, f = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
                assert t != 0x3 and t != 0x7, buf[:9 + n]  # no RST_STREAM, no GOAWAY
                if f & 0x1 and t in (0x0, 0x1):
                    done.add(int.from_bytes(buf[5:9], "big"))
                buf = buf[9 + n:]

    fresh = lambda ua: (b"\x82\x86" + lit(4, "/hello.txt") + lit(1, "l") + lit(58, ua))
    again = b"\x82\x86\xc0\xbf\xbe"  # :path, :authority, user-agent: the 3 newest entries
    # (the last two: the same block in a HEADERS frame that does not end
    # the stream, its end in an empty DATA frame)
    blocks = [fresh("ua-1"), again, again, fresh("ua-2"), again, again, again, again]
    with socket.create_connection(("127.0.0.1", hs.port), timeout=5) as sock:
        sock.sendall(PREFACE + frame(0x4, 0, 0))
        for i, b in enumerate(blocks):
            if i < 6:
                sock.sendall(frame(0x1, 0x5, 2 * i + 1, b))
            else:
                sock.sendall(frame(0x1, 0x4, 2 * i + 1, b) + frame(0x0, 0x1, 2 * i + 1))
            rd(sock, 1)
    hs.srv.stop()
    uas = [ln.rsplit('"', 2)[-2] for ln in hs.log.read_text().splitlines() if "/hello.txt" in ln]
    assert uas == ["ua-1"] * 3 + ["ua-2"] * 5, uas


def test_request_fields_checked_as_in_http1(start_brisk, cert, tmp_path):
    """The decoded fields fill the request directly, with the HTTP/1.1
    parser's checks: Host from :authority, cookie crumbs joined, fields in
    order; a bad Host field, an Expect other than 100-continue, a '#' in the
    path and too many fields refused as HTTP/1.1 refuses them."""
    cgi = tmp_path / "cgi"
    cgi.mkdir()
    (cgi / "env.sh").write_text("#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
                                "echo \"$REQUEST_METHOD|$REQUEST_URI|$QUERY_STRING|$HTTP_HOST|"
                                "$HTTP_COOKIE|$HTTP_X_A|$HTTP_USER_AGENT\"\n")
    os.chmod(cgi / "env.sh", 0o755)
    port = free_port()
    srv = start_brisk(config=f"listen = 127.0.0.1:{port}\nroot = {{root}}\nworkers = 1\n"
                             f"access_log = off\ncgi = /cgi-bin/ {cgi}\n",
                      listens=[("127.0.0.1", port)])
    with Client(port) as c:
        st, _, out = c.get("/cgi-bin/env.sh?q=1", authority="example.org:8080",
                           headers=[("cookie", "a=1"), ("x-a", "v a"), ("cookie", "b=2"),
                                    ("user-agent", "h2-test")])
        assert st == 200, out
        assert out == b"GET|/cgi-bin/env.sh?q=1|q=1|example.org:8080|a=1; b=2|v a|h2-test\n"
        # a host field wins over :authority, and is checked as a Host header
        st, _, out = c.get("/cgi-bin/env.sh", headers=[("host", "h.example")])
        assert st == 200 and out.split(b"|")[3] == b"h.example"
        assert c.get("/cgi-bin/env.sh", headers=[("host", "a:1:2")])[0] == 400
        assert c.get("/cgi-bin/env.sh", headers=[("host", "a"), ("host", "b")])[0] in (400, None)
        assert c.get("/cgi-bin/env.sh", headers=[("expect", "200-ok")])[0] == 417
        assert c.get("/cgi-bin/env.sh", headers=[("x-n", str(i)) for i in range(101)])[0] == 431
        st, _, _ = c.get("/cgi-bin/env.sh#frag")
        assert st in (400, None)  # HTTP/1.1 refuses a fragment; nghttp2 may reset first
        assert c.get("/cgi-bin/env.sh", method="B@D")[0] in (400, None)
        assert c.get("/cgi-bin/env.sh", headers=[("content-length", "x")])[0] in (400, None)
        assert c.get("/cgi-bin/env.sh")[0] == 200  # the connection goes on
    srv.stop()


def test_malformed_requests_are_reset(hs):
    """RFC 9113 8.1.1: malformed requests get RST_STREAM(PROTOCOL_ERROR)
    (brisk checks them itself, in its one pass over the fields)."""
    def reset(c, sid):
        st, _, _ = c.response(sid)
        assert st is None
        codes = [ev.error_code for ev in c.events
                 if isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid]
        assert codes == [h2.errors.ErrorCodes.PROTOCOL_ERROR]

    with Client(hs.port) as c:
        for headers in ([("User-Agent", "x")], [("te", "gzip")], [("connection", "close")],
                        [("x-a", " lead")], [("x-a", "trail ")], [("x-a", "a\x00b")],
                        [("host", "a b")], [("content-length", "1x")],
                        [("content-length", "1"), ("content-length", "1")]):
            reset(c, c.request("/hello.txt", headers=headers))
        assert c.get("/hello.txt", headers=[("te", "trailers")])[0] == 200
        for bad in ("a\x01b", "a\x7fb", "a\rb"):
            reset(c, c.request("/hello.txt", headers=[("x-a", bad)]))
        assert c.get("/hello.txt", headers=[("x-a", "a\tb \xe9")])[0] == 200
        # pseudo-header fields: unknown, a response's, twice, after a regular one, missing
        for hdrs in ([(":method", "GET"), (":path", "/hello.txt"), (":scheme", "http"),
                      (":authority", "l"), (":foo", "x")],
                     [(":method", "GET"), (":path", "/hello.txt"), (":scheme", "http"),
                      (":authority", "l"), (":status", "200")],
                     [(":method", "GET"), (":method", "GET"), (":path", "/hello.txt"),
                      (":scheme", "http"), (":authority", "l")],
                     [(":method", "GET"), (":path", "/hello.txt"), ("x-a", "1"),
                      (":scheme", "http"), (":authority", "l")],
                     [(":method", "GET"), (":path", "/hello.txt"), (":authority", "l")],
                     [(":method", "GET"), (":path", "/hello.txt"), (":scheme", "h t"),
                      (":authority", "l")],
                     [(":method", "GET"), (":path", "*"), (":scheme", "http"),
                      (":authority", "l")],
                     [(":method", "GET"), (":path", "/"), (":scheme", "http")]):
            sid = c.conn.get_next_available_stream_id()
            c.conn.send_headers(sid, hdrs, end_stream=True)
            c.flush()
            reset(c, sid)
        # a body longer or shorter than its content-length
        for n in (3, 5):
            sid = c.request("/hello.txt", method="POST", headers=[("content-length", "4")],
                            body=b"x" * n)
            reset(c, sid)
        # trailers: with a pseudo-header field, or without END_STREAM
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":path", "/hello.txt"),
                                  (":scheme", "http"), (":authority", "l")])
        c.conn.send_data(sid, b"abc")
        c.conn.send_headers(sid, [(":path", "/x")], end_stream=True)
        c.flush()
        reset(c, sid)
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":path", "/hello.txt"),
                                  (":scheme", "http"), (":authority", "l")])
        c.flush()
        # (h2 will not send trailers without END_STREAM: the frame by hand)
        c.raw(frame(0x1, 0x4, sid, c.conn.encoder.encode([("x-trailer", "1")])))
        reset(c, sid)
        assert c.get("/hello.txt")[0] == 200  # the connection goes on
    # frames the client had in flight on a stream the server reset are
    # ignored (RFC 9113 5.1), the connection goes on
    with Client(hs.port) as c:
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":path", "/hello.txt"),
                                  (":scheme", "http"), (":authority", "l"), ("te", "gzip")])
        c.flush()
        reset(c, sid)
        c.raw(frame(0x0, 0x1, sid, b"late"))
        assert c.get("/hello.txt")[0] == 200 and c.goaway is None
    # an empty header block (raw frames: h2 would not send it)
    with socket.create_connection(("127.0.0.1", hs.port), timeout=5) as sock:
        sock.sendall(PREFACE + frame(0x4, 0, 0) + frame(0x1, 0x5, 1, b""))
        buf, rst = b"", None
        while rst is None:
            data = sock.recv(65536)
            assert data, "closed without RST_STREAM"
            buf += data
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n, t, sid = int.from_bytes(buf[:3], "big"), buf[3], int.from_bytes(buf[5:9], "big")
                if t == 0x3 and sid == 1:
                    rst = int.from_bytes(buf[9:13], "big")
                buf = buf[9 + n:]
        assert rst == 1  # PROTOCOL_ERROR
    alive(hs)


def test_header_block_over_the_limit_431_hpack_bomb(hs):
    """One 4 KiB field in the HPACK table, then referenced 500 times: 2 MB
    decoded from a few KiB on the wire. Refused with 431 without keeping it;
    the connection goes on."""
    with Client(hs.port) as c:
        big = "x" * 4000
        st, _, _ = c.get("/hello.txt", headers=[("x-big", big)])
        assert st == 200
        st, _, body = c.get("/hello.txt", headers=[("x-big", big)] * 500)
        assert st == 431
        assert c.get("/hello.txt")[0] == 200
    alive(hs)


def test_empty_field_values_first_in_a_block(hs):
    """An empty :authority as the first field, an empty cookie as the first
    cookie (nothing held yet to append to): the first refused as an empty
    Host is, the second served; no sanitizer report."""
    # :authority "" then GET / http; GET / http, :authority l, then cookie ""
    for blk in (bytes([0x01, 0x00, 0x82, 0x84, 0x86]),
                bytes([0x82, 0x84, 0x86, 0x01, 0x01]) + b"l" + bytes([0x0f, 0x11, 0x00])):
        with socket.create_connection(("127.0.0.1", hs.port), timeout=5) as sock:
            sock.sendall(PREFACE + frame(0x4, 0, 0) + frame(0x1, 0x5, 1, blk))
            buf = b""
            while True:
                data = sock.recv(65536)
                assert data, "closed without an answer"
                buf += data
                i, status = 0, None
                while i + 9 <= len(buf) and i + 9 + int.from_bytes(buf[i:i + 3], "big") <= len(buf):
                    n, t = int.from_bytes(buf[i:i + 3], "big"), buf[i + 3]
                    if t == 0x1:
                        status = buf[i + 9]
                    i += 9 + n
                if status is not None:
                    break
            # :status 400 (static index 12) without :authority's Host; 200 with it
            assert status == (0x8c if blk[0] == 0x01 else 0x88), hex(status)
    alive(hs)


def test_request_body_over_max_body_size_413(start_h2):
    hs = start_h2("max_body_size = 1000\n")
    with Client(hs.port) as c:
        sid = c.request("/hello.txt", method="POST", body=b"x" * 5000)
        assert c.response(sid)[0] == 413
        assert c.get("/hello.txt")[0] == 200


@pytest.fixture
def apps():
    procs = []
    yield procs
    check_procs(procs)


def test_apps_serve_h2_unchanged(apps, cert, tmp_path):
    """hello and echo (handler API), api_test's body echo and async handlers,
    over h2c and over TLS h2: no change to their handlers."""
    for name, path, want in (("brisk-hello", "/", b"Hello World"),
                             ("brisk-echo", "/?value=h2", b"h2")):
        tport = free_port()
        p = AppProc(name, tmp_path, args=["--listen", f"127.0.0.1:{tport}", "ssl",
                                          "--ssl-cert", cert[0], "--ssl-key", cert[1]])
        apps.append(p)
        p.start(wait_for=[("127.0.0.1", p.port), ("127.0.0.1", tport)])
        for url in (f"https://127.0.0.1:{tport}{path}", f"http://127.0.0.1:{p.port}{path}"):
            r = curl("--http2-prior-knowledge" if url.startswith("http:") else "--http2",
                     "-w", "\n%{http_version}", url)
            assert r.stdout == want + b"\n2", (url, r.stdout, r.stderr)
    p = AppProc("api_test", tmp_path)
    apps.append(p)
    p.start()
    body = os.urandom(300 * 1024)  # several windows: the server must open them
    with Client(p.port) as c:
        st, _, got = c.response(c.request("/body", method="POST", body=body))
        assert st == 200 and got == body
        st, _, got = c.get("/delay?ms=50")
        assert st == 200
        st, _, got = c.get("/info?x=1")
        d = __import__("json").loads(got)
        assert (d["major"], d["minor"], d["path"], d["query"]) == (2, 1, "/info", "x=1")
        # a client that resets its stream while the handler waits: aborted, and served on
        s0 = p.stats()
        sid = c.request("/delay?ms=300")
        time.sleep(0.05)
        c.conn.reset_stream(sid)
        c.flush()
        deadline = time.monotonic() + 3
        while p.stats()["aborts"] == s0["aborts"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert p.stats()["aborts"] == s0["aborts"] + 1
        assert c.get("/exact")[2] == b"exact"
        # and one that goes away altogether
        c.request("/io?ms=300")
        time.sleep(0.05)
    deadline = time.monotonic() + 3
    while p.stats()["aborts"] < s0["aborts"] + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.stats()["aborts"] == s0["aborts"] + 2


def test_h2load_multiplexed(hs):
    if not H2LOAD:
        pytest.skip("h2load is not installed (nghttp2-client)")
    for url in (f"http://127.0.0.1:{hs.port}/hello.txt", f"https://127.0.0.1:{hs.tport}/hello.txt"):
        p = subprocess.run([H2LOAD, "-n", "4000", "-c", "4", "-m", "20", url],
                           capture_output=True, text=True, timeout=60)
        assert re.search(r"4000 succeeded, 0 failed, 0 errored", p.stdout), p.stdout[-800:]
        assert "status codes: 4000 2xx" in p.stdout


# ---------------------------------------------------------------- h2spec


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["tls", "h2c", "mixed"])
def test_h2spec(hs, where):
    if not H2SPEC.exists():
        pytest.skip("tests/.tools/h2spec is not built (scripts/deps.sh test builds it with Go)")
    port = {"tls": hs.tport, "h2c": hs.cport, "mixed": hs.port}[where]
    args = [str(H2SPEC), "-h", "127.0.0.1", "-p", str(port), "-o", "3"]
    if where == "tls":
        args += ["-t", "-k"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=280)
    summary = p.stdout.strip().splitlines()[-1]
    if where == "mixed":
        # The plain port speaks HTTP/1.1 too: "INVALID CONNECTION PREFACE\r\n\r\n"
        # is a malformed HTTP/1.1 request there, answered 400 (as nginx does).
        assert summary == "145 tests, 144 passed, 0 skipped, 1 failed", p.stdout[-3000:]
        assert "× 2: Sends invalid connection preface" in p.stdout
    else:
        assert summary == "145 tests, 145 passed, 0 skipped, 0 failed", p.stdout[-3000:]
    alive(hs)


# ---------------------------------------------------------------- attacks


def test_rapid_reset_ends_the_connection(hs):
    """CVE-2023-44487: streams opened and reset at once, thousands of them."""
    with Client(hs.port) as c:
        ended = False
        for i in range(3000):
            try:
                sid = c.request("/hello.txt")
                c.conn.reset_stream(sid)
                c.flush()
            except (BrokenPipeError, ConnectionResetError):
                ended = True  # the server has closed it
                break
        if not ended:
            code = c.wait_end()
            assert code is None or code != 0  # GOAWAY with an error (or just closed)
    alive(hs)


def test_continuation_flood_ends_the_connection(hs):
    """HEADERS without END_HEADERS, then CONTINUATION frames without end."""
    s = socket.create_connection(("127.0.0.1", hs.port), timeout=5)
    s.sendall(PREFACE + frame(4, 0, 0))
    hdr = bytes([0x82, 0x84, 0x86, 0x41, 0x01, ord("x")])  # GET / http, :authority x
    s.sendall(frame(1, 0, 1, hdr))
    closed = False
    try:
        for _ in range(20000):
            s.sendall(frame(9, 0, 1, bytes([0x40, 0x01, ord("a"), 0x01, ord("b")])))
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    s.settimeout(5)
    try:
        while s.recv(65536):
            pass
        closed = True
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        pass
    s.close()
    assert closed
    alive(hs)


@pytest.mark.parametrize("kind", ["ping", "settings"])
def test_ack_floods_from_a_peer_that_does_not_read(hs, kind):
    """PINGs or SETTINGS, each owing an acknowledgement, from a client that
    reads nothing: the server stops reading once its output is full (or
    closes at nghttp2's cap on queued acknowledgements): memory bounded."""
    s = socket.create_connection(("127.0.0.1", hs.port), timeout=5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(PREFACE + frame(4, 0, 0))
    one = frame(6, 0, 0, b"12345678") if kind == "ping" else frame(4, 0, 0, b"\x00\x03\x00\x00\x00\x64")
    closed = False
    try:
        for _ in range(2000):  # 34 MB, more than the kernel's buffers on both sides
            s.sendall(one * 1000)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        closed = True
    s.close()
    assert closed, "2,000,000 unacknowledged frames accepted"
    alive(hs)
    assert rss_kb(hs.srv.proc.pid) < 100_000


def rss_kb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_zero_window_stall_is_closed_by_send_timeout(start_h2):
    """A client that requests a large file and never opens its window: the
    server gives up after send_timeout, as for a client that stops reading."""
    hs = start_h2("send_timeout = 1s\n")
    (hs.srv.root / "big.bin").write_bytes(os.urandom(BIG))
    with Client(hs.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0}) as c:
        c.pump(timeout=2)
        c.request("/big.bin")
        t0 = time.monotonic()
        # keep the connection busy with PINGs: they must not keep it alive
        while not c.closed and time.monotonic() - t0 < 8:
            c.conn.ping(b"pingpong")
            try:
                c.flush()
                c.pump(timeout=0.3)
            except socket.timeout:
                pass
            except (BrokenPipeError, ConnectionResetError):
                break
        assert time.monotonic() - t0 < 6, "the stalled connection was not closed"
    alive(hs)


def test_idle_connection_closed_by_keepalive_timeout(start_h2):
    hs = start_h2("keepalive_timeout = 1s\n")
    with Client(hs.port) as c:
        assert c.get("/hello.txt")[0] == 200
        t0 = time.monotonic()
        c.wait_end(timeout=5)
        assert time.monotonic() - t0 < 4


def test_goaway_on_reload_and_on_graceful_stop(hs):
    with Client(hs.port) as c:
        assert c.get("/hello.txt")[0] == 200
        hs.srv.send_signal(signal.SIGHUP)
        assert c.wait_end(timeout=5) == 0  # GOAWAY NO_ERROR, then closed
    with Client(hs.tport, tls=True) as c:
        assert c.get("/hello.txt")[0] == 200
        hs.srv.send_signal(signal.SIGTERM)
        assert c.wait_end(timeout=5) == 0


def test_invalid_frames_never_crash(hs):
    """Frames of every type with random payloads, on random streams."""
    rnd = __import__("random").Random(7)
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", hs.port), timeout=5)
        data = PREFACE + frame(4, 0, 0)
        for _ in range(rnd.randint(1, 30)):
            n = rnd.choice([0, 1, 4, 5, 8, 9, 13, 64, 300])
            data += frame(rnd.randint(0, 10), rnd.randint(0, 255), rnd.choice([0, 1, 2, 3, 5, 2**31 - 1]),
                          bytes(rnd.getrandbits(8) for _ in range(n)))
        try:
            s.sendall(data)
            s.settimeout(2)
            while s.recv(65536):
                pass
        except (socket.timeout, ConnectionResetError, BrokenPipeError):
            pass
        s.close()
    alive(hs)


# ---------------------------------------------------------------- Chromium


@pytest.mark.timeout(120)
def test_chromium_loads_the_front_page_over_h2(start_brisk, cert, tmp_path):
    if not CHROMIUM:
        pytest.skip("chromium is not installed (scripts/deps.sh test installs it)")
    log = tmp_path / "access.log"
    tport = free_port()
    srv = start_brisk(
        config=f"[server]\nlisten = 127.0.0.1:{tport} ssl\nroot = {REPO / 'www'}\nworkers = 1\n"
               f"cgi = /cgi-bin/ {REPO / 'www' / 'cgi-bin'}\naccess_log = {log}\n"
               f"ssl_certificate = {cert[0]}\nssl_certificate_key = {cert[1]}\n",
        listens=[("127.0.0.1", tport)], cli_defaults=False)
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--ignore-certificate-errors", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
                        "--window-size=1280,4000", "--virtual-time-budget=5000", "--dump-dom",
                        f"https://127.0.0.1:{tport}/"],
                       capture_output=True, text=True, timeout=90)
    assert "<h1>brisk</h1>" in p.stdout, (p.returncode, p.stderr[-2000:])
    srv.stop()
    lines = log.read_text().splitlines()
    assert any('"GET / HTTP/2.0" 200 ' in ln for ln in lines), lines
    pngs = [ln for ln in lines if ".png HTTP/2.0\" 200 " in ln]
    assert pngs, lines  # the charts came over the same h2 connection


def test_foods_serves_h2(apps, cert, tmp_path):
    tport = free_port()
    p = AppProc("brisk-foods", tmp_path,
                args=["--db", f"sqlite:{tmp_path}/foods.db", "--listen", f"127.0.0.1:{tport}",
                      "ssl", "--ssl-cert", cert[0], "--ssl-key", cert[1]])
    apps.append(p)
    p.start(wait_for=[("127.0.0.1", tport)])
    r = curl("--http2", "-w", "\n%{http_version}", "-H", "Content-Type: application/json",
             "--data-binary", '{"name": "h2 apple", "category_id": 1, "kcal": 52, '
             '"protein": 0.3, "carbs": 14, "fat": 0.2}', f"https://127.0.0.1:{tport}/api/foods")
    assert r.returncode == 0 and b"h2 apple" in r.stdout and r.stdout.endswith(b"\n2"), r
    r = curl("--http2-prior-knowledge", "-w", "\n%{http_version}",
             f"http://127.0.0.1:{p.port}/api/foods?q=h2")
    assert b"h2 apple" in r.stdout and r.stdout.endswith(b"\n2"), r.stdout


def test_cgi_over_h2(start_brisk, cert, tmp_path):
    """CGI scripts answer over h2 unchanged: SERVER_PROTOCOL says HTTP/2.0, a
    POST body reaches stdin, 5 MiB of output streams through flow control."""
    cgi = tmp_path / "cgi"
    cgi.mkdir()
    (cgi / "env.sh").write_text("#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
                                "echo \"$SERVER_PROTOCOL $REQUEST_METHOD $CONTENT_LENGTH\"\n"
                                "cat | sha256sum | cut -c1-16\n")
    (cgi / "big.sh").write_text("#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\r\\n\\r\\n'\n"
                                "head -c 5242880 /dev/zero\n")
    for f in ("env.sh", "big.sh"):
        os.chmod(cgi / f, 0o755)
    port = free_port()
    srv = start_brisk(config=f"listen = 127.0.0.1:{port}\nroot = {{root}}\nworkers = 1\n"
                             f"access_log = off\ncgi = /cgi-bin/ {cgi}\n",
                      listens=[("127.0.0.1", port)])
    body = os.urandom(200_000)
    with Client(port) as c:
        st, h, out = c.response(c.request("/cgi-bin/env.sh", method="POST", body=body,
                                          headers=[("content-length", str(len(body)))]))
        assert st == 200, (st, out)
        line, digest = out.decode().split("\n")[:2]
        assert line == f"HTTP/2.0 POST {len(body)}"
        assert digest == hashlib.sha256(body).hexdigest()[:16]
        st, h, out = c.response(c.request("/cgi-bin/big.sh"), timeout=30)
        assert st == 200 and len(out) == 5242880 and out.count(0) == 5242880
    srv.stop()
