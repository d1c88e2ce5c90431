"""Helpers for the brisk black-box integration tests: a raw HTTP/1.x client
that parses responses byte-exactly (so malformed requests, pipelining and
HEAD framing can be checked), plus small utilities.

Only stdlib; all traffic goes to loopback addresses.
"""
from __future__ import annotations

import email.utils
import gzip
import os
import http.client
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TIMEOUT = 5.0
MAX_HEAD = 256 * 1024

HTTP_DATE_RE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
    r"\d{2}:\d{2}:\d{2} GMT$")


class NoResponse(AssertionError):
    """The server closed (or timed out) before a complete response head."""


@dataclass
class Response:
    version: str
    status: int
    reason: str
    headers: list = field(default_factory=list)  # [(name, value)] in order
    body: bytes = b""
    head_raw: bytes = b""

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def headers_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def has(self, name):
        return self.header(name) is not None

    def tokens(self, name):
        """Comma-separated tokens of all `name` headers, lower-cased."""
        out = []
        for v in self.headers_all(name):
            out += [t.strip().lower() for t in v.split(",") if t.strip()]
        return out

    def __repr__(self):
        body = self.body if len(self.body) <= 200 else self.body[:200] + b"..."
        return (f"<Response {self.version} {self.status} {self.reason!r} "
                f"headers={self.headers!r} body={body!r}>")


class RawConn:
    """A plain TCP connection with a byte buffer and an HTTP response parser."""

    def __init__(self, host="127.0.0.1", port=None, timeout=DEFAULT_TIMEOUT,
                 rcvbuf=None):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.buf = b""
        self.eof = False
        self.reset = False
        self.send_error = None

    # -- low level -------------------------------------------------------
    def send(self, data: bytes):
        """sendall, remembering (not raising) a send error: a server may
        legitimately reject and close while we are still sending."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            self.send_error = e

    def send_slowly(self, data: bytes, step=1, delay=0.002):
        for i in range(0, len(data), step):
            self.send(data[i:i + step])
            time.sleep(delay)

    def _fill(self, size=65536) -> bool:
        """Reads more bytes into buf. False on EOF/reset. Raises
        socket.timeout if nothing arrives within the socket timeout."""
        if self.eof:
            return False
        try:
            chunk = self.sock.recv(size)
        except ConnectionResetError:
            self.reset = True
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise NoResponse(
                    f"connection closed after {len(self.buf)} of {n} body bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_line(self, limit=MAX_HEAD) -> bytes:
        while b"\r\n" not in self.buf:
            if len(self.buf) > limit:
                raise NoResponse("line too long")
            if not self._fill():
                raise NoResponse(f"connection closed mid-line: {self.buf[:200]!r}")
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    # -- HTTP ------------------------------------------------------------
    def read_head(self):
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD:
                raise NoResponse("response head too large")
            try:
                more = self._fill()
            except socket.timeout:
                raise NoResponse(
                    f"timed out waiting for a response head; got {self.buf[:300]!r}")
            if not more:
                raise NoResponse(
                    "connection closed before a complete response head; got "
                    f"{self.buf[:300]!r} (reset={self.reset})")
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        m = re.match(rb"^(HTTP/\d\.\d) (\d{3})(?: (.*))?$", lines[0])
        if not m:
            raise AssertionError(f"malformed status line {lines[0]!r}")
        headers = []
        for ln in lines[1:]:
            if b":" not in ln:
                raise AssertionError(f"malformed response header line {ln!r}")
            k, v = ln.split(b":", 1)
            if k != k.strip() or not k:
                raise AssertionError(f"malformed response header name {ln!r}")
            headers.append((k.decode("latin-1"), v.strip().decode("latin-1")))
        return Response(m.group(1).decode(), int(m.group(2)),
                        (m.group(3) or b"").decode("latin-1"), headers,
                        b"", head + b"\r\n\r\n")

    def read_response(self, method="GET", skip_interim=True) -> Response:
        while True:
            r = self.read_head()
            if 100 <= r.status < 200:
                if skip_interim:
                    continue
                return r
            break
        te = r.tokens("transfer-encoding")
        if method == "HEAD" or r.status in (204, 304):
            r.body = b""
        elif te and te[-1] == "chunked":
            r.body = self._read_chunked()
        elif r.has("content-length"):
            cls = r.headers_all("content-length")
            assert len(set(cls)) == 1, f"conflicting Content-Length in {r!r}"
            r.body = self.read_exact(int(cls[0]))
        else:
            r.body = self.read_to_close()
        return r

    def _read_chunked(self) -> bytes:
        body = b""
        while True:
            line = self.read_line()
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while self.read_line() != b"":
                    pass  # trailers
                return body
            body += self.read_exact(size)
            assert self.read_exact(2) == b"\r\n", "bad chunk terminator"

    def read_to_close(self, timeout=DEFAULT_TIMEOUT) -> bytes:
        """Everything until the peer closes. Raises AssertionError if the
        peer keeps the connection open longer than `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"server did not close the connection within {timeout}s "
                    f"(buffered {self.buf[:200]!r})")
            self.sock.settimeout(remaining)
            try:
                if not self._fill():
                    break
            except socket.timeout:
                continue
        out, self.buf = self.buf, b""
        return out

    def wait_closed(self, timeout=DEFAULT_TIMEOUT):
        """Returns (closed: bool, extra_bytes, elapsed)."""
        t0 = time.monotonic()
        try:
            extra = self.read_to_close(timeout)
            return True, extra, time.monotonic() - t0
        except AssertionError:
            return False, self.buf, time.monotonic() - t0

    def is_open(self, wait=0.2) -> bool:
        """True if the server has neither closed nor sent anything within
        `wait` seconds."""
        self.sock.settimeout(wait)
        try:
            return self._fill()  # data arrived: still open (caller checks buf)
        except socket.timeout:
            return True
        finally:
            self.sock.settimeout(DEFAULT_TIMEOUT)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def req(method="GET", target="/", version="HTTP/1.1", headers=None,
        body=b"", host="localhost") -> bytes:
    """Builds a request. headers: list of (name, value) or dict; a Host
    header is added for HTTP/1.1 unless host is None."""
    lines = [f"{method} {target} {version}"]
    hs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    if host is not None and not any(k.lower() == "host" for k, _ in hs):
        hs.insert(0, ("Host", host))
    for k, v in hs:
        lines.append(f"{k}: {v}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if isinstance(body, str):
        body = body.encode()
    return raw + body


def free_port(host="127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ipv6_available() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


def http_get(host, port, path, method="GET", headers=None, body=None,
             timeout=DEFAULT_TIMEOUT):
    """One request on a fresh http.client connection.
    Returns (status, HTTPMessage headers, body bytes)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, r.headers, data
    finally:
        c.close()


# Thu, 04 Mar 2021 05:06:07 GMT
FIXED_MTIME = 1614834367
SECRET = b"root:x:0:0:brisk-test-decoy:/root:/bin/sh\n"
ODD_NAME = "<b>&\"x'.txt"

# 1x1 transparent PNG
PNG_BYTES = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc33000000"
    "0049454e44ae426082")


# ---------------------------------------------------------------- www tree
def populate_www(root: Path) -> Path:
    """Fills `root` with the standard test tree, plus decoys next to it
    (root.parent/etc/passwd, root.parent/outside/) that contain 'root:'
    so any escape from the document root is detectable."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    base = root.parent

    (base / "etc").mkdir(exist_ok=True)
    (base / "etc" / "passwd").write_bytes(SECRET)
    (base / "outside").mkdir(exist_ok=True)
    (base / "outside" / "secret.txt").write_bytes(SECRET)
    (base / "outside" / "index.html").write_bytes(b"<p>" + SECRET + b"</p>")

    def w(rel, data, mtime=None):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        if mtime is not None:
            os.utime(p, (mtime, mtime))
        return p

    w("index.html", "<!doctype html><title>brisk</title><p>top index</p>\n")
    w("hello.txt", "Hello, brisk!\n", FIXED_MTIME)
    w("img.png", PNG_BYTES)
    w("data.json", '{"brisk": true}\n')
    w("blob.qqqunknown", b"\x00\x01\x02unknown-type\xff")
    w("noext", "no extension here\n")
    w("dir/index.html", "<p>dir index</p>\n")
    w("dir/other.txt", "other\n")
    w("noindex/a.txt", "a\n")
    w("noindex/" + ODD_NAME, "odd name\n")
    (root / "noindex" / "subdir").mkdir(exist_ok=True)
    w("a b.txt", "file with a space\n")
    w("sub/x.txt", "sub x\n")
    w("a/keep.txt", "keep\n")
    for i in range(10):
        w(f"p/{i}.txt", f"pipelined file number {i}\n" * (i + 1))
    w("range.bin", b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" * 2)

    # precompressed variants
    css = "body { color: #123456; }\n" * 40
    w("style.css", css, FIXED_MTIME)
    w("style.css.gz", gzip.compress(css.encode(), mtime=0), FIXED_MTIME + 60)
    w("same.css", css, FIXED_MTIME)
    w("same.css.gz", gzip.compress(css.encode(), mtime=0), FIXED_MTIME)  # equal mtime
    w("old.css", css, FIXED_MTIME)
    w("old.css.gz", gzip.compress(css.encode(), mtime=0), FIXED_MTIME - 3600)
    js = "console.log('brisk');\n" * 40
    w("app.js", js, FIXED_MTIME)
    w("app.js.br", b"\x1b\x0b\x00\xf8fake-brotli-payload\x03", FIXED_MTIME + 60)

    # symlinks
    os.symlink("hello.txt", root / "link_in.txt")
    os.symlink("dir", root / "link_indir")
    os.symlink("/etc/passwd", root / "link_passwd")
    os.symlink(str(base / "etc" / "passwd"), root / "link_decoy")
    os.symlink(str(base / "outside"), root / "link_outdir")
    os.symlink("../outside/secret.txt", root / "link_outfile_rel")
    os.symlink("/etc", root / "link_etc")
    return root
