"""The example apps brisk-hello and brisk-echo (apps/hello, apps/echo),
black-box, against the behaviour of their Node.js twins (bench/peers).

Binaries come from $BRISK_BIN_DIR (default: the directory of $BRISK_BIN,
else build/bin). Every app process is stopped with SIGTERM at the end of its
test and must exit 0 without a sanitizer report.
"""
from __future__ import annotations

import subprocess
import threading

import pytest

from brisk_testlib import HTTP_DATE_RE, free_port, req

from apps_lib import BIN_DIR, SANITIZER_MARKERS, AppProc, check_procs


@pytest.fixture
def start_app(tmp_path):
    procs = []

    def _start(name, args=(), workers="1"):
        p = AppProc(name, tmp_path, args, workers=workers)
        procs.append(p)
        return p.start()

    yield _start
    check_procs(procs)


@pytest.fixture(scope="module")
def hello(tmp_path_factory):
    p = AppProc("brisk-hello", tmp_path_factory.mktemp("hello")).start()
    yield p
    check_procs([p])


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    p = AppProc("brisk-echo", tmp_path_factory.mktemp("echo")).start()
    yield p
    check_procs([p])


def run_flags(name, *args):
    p = subprocess.run([str(BIN_DIR / name), *args], capture_output=True, text=True,
                       timeout=5, stdin=subprocess.DEVNULL)
    for m in SANITIZER_MARKERS:
        assert m not in p.stderr, p.stderr
    return p


def media_type(r):
    return (r.header("Content-Type") or "").split(";")[0].strip()


def comparable(r):
    return sorted((k.lower(), v) for k, v in r.headers if k.lower() != "date")


# ------------------------------------------------------------ hello
def test_hello_get(hello):
    r = hello.request("/")
    assert (r.status, r.body) == (200, b"Hello World")
    assert media_type(r) == "text/plain"
    assert r.header("Content-Length") == "11"
    assert HTTP_DATE_RE.match(r.header("Date"))
    assert r.header("Server", "").startswith("brisk")


@pytest.mark.parametrize("method,target", [("GET", "/any/path?x=1"), ("POST", "/"),
                                           ("DELETE", "/x")])
def test_hello_answers_everything_like_node(hello, method, target):
    r = hello.request(target, method=method, body=b"ignored",
                      headers={"Content-Length": "7"})
    assert (r.status, r.body) == (200, b"Hello World")


def test_hello_keepalive_and_pipelining(hello):
    with hello.connect() as c:
        for _ in range(5):
            c.send(req("GET", "/"))
            r = c.read_response()
            assert r.body == b"Hello World"
            assert "close" not in r.tokens("Connection")
        c.send(req("GET", "/") * 20)
        for _ in range(20):
            assert c.read_response().body == b"Hello World"
        assert c.is_open(wait=0.05) and c.buf == b""


def test_hello_http10_keepalive(hello):
    with hello.connect() as c:
        for _ in range(3):
            c.send(req("GET", "/", version="HTTP/1.0", host=None,
                       headers={"Connection": "keep-alive"}))
            r = c.read_response()
            assert r.body == b"Hello World"
            assert "keep-alive" in r.tokens("Connection")
        c.send(req("GET", "/", version="HTTP/1.0", host=None))
        assert c.read_response().body == b"Hello World"
        closed, extra, _ = c.wait_closed(timeout=2)
        assert closed and extra == b""


def test_hello_head_has_no_body(hello):
    with hello.connect() as c:
        c.send(req("HEAD", "/"))
        r = c.read_response(method="HEAD")
        assert r.status == 200 and r.header("Content-Length") == "11"
        assert media_type(r) == "text/plain"
        c.send(req("GET", "/"))   # the next response follows directly
        r2 = c.read_response()
        assert r2.body == b"Hello World"
    assert comparable(r) == comparable(r2)


def test_hello_two_workers(start_app):
    app = start_app("brisk-hello", workers=2)
    results = []

    def client():
        for _ in range(10):
            results.append(app.request("/").body)

    ts = [threading.Thread(target=client) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert results == [b"Hello World"] * 40
    assert "2 workers" in app.stderr()


@pytest.mark.parametrize("name", ["brisk-hello", "brisk-echo"])
def test_help_and_version_exit_zero(name):
    p = run_flags(name, "--help")
    assert p.returncode == 0
    assert "--listen" in p.stdout and "--workers" in p.stdout
    p = run_flags(name, "--version")
    assert p.returncode == 0 and "0.1.0" in p.stdout


@pytest.mark.parametrize("name", ["brisk-hello", "brisk-echo"])
@pytest.mark.parametrize("args", [["--bogus"], ["--workers"], ["--workers", "abc"],
                                  ["--workers", "0"], ["--listen", "nonsense"],
                                  ["--root", "/tmp"], ["stray"]])
def test_bad_flags_exit_nonzero(name, args):
    extra = [] if args[0] == "--listen" else ["--listen", f"127.0.0.1:{free_port()}"]
    p = run_flags(name, *extra, *args)
    assert p.returncode != 0, (args, p.stdout, p.stderr)
    assert p.stderr.strip(), "no message on stderr"


def test_hello_sigterm_exits_zero(start_app):
    app = start_app("brisk-hello")
    assert app.request("/").status == 200
    assert app.stop() == 0


# ------------------------------------------------------------ echo
@pytest.mark.parametrize("query,value", [
    ("value=hello", b"hello"),
    ("value=hello+world", b"hello world"),
    ("value=a%20b%2Bc%26d%3De", b"a b+c&d=e"),
    ("value=%E2%82%AC", "\u20ac".encode()),
    ("value=%00%ff", b"\x00\xff"),
    ("x=1&value=second&y=2", b"second"),
    ("value=first&value=second", b"first,second"),  # as Node: String(["first", "second"])
    ("value=" + "v" * 4000, b"v" * 4000),
])
def test_echo_value(echo, query, value):
    r = echo.request("/?" + query)
    assert (r.status, r.body) == (200, value)
    assert media_type(r) == "text/plain"
    assert r.header("Content-Length") == str(len(value))


def test_echo_any_path(echo):
    assert echo.request("/some/path?value=x").body == b"x"


@pytest.mark.parametrize("target", ["/", "/?", "/?value=", "/?value", "/?other=1",
                                    "/?values=1", "/?xvalue=1"])
def test_echo_no_value(echo, target):
    r = echo.request(target)
    assert (r.status, r.body) == (200, b"no value specified")
    assert media_type(r) == "text/plain"


@pytest.mark.parametrize("target", ["/?value=abc", "/?value=", "/"])
def test_echo_head_same_headers_no_body(echo, target):
    with echo.connect() as c:
        c.send(req("HEAD", target))
        h = c.read_response(method="HEAD")
        c.send(req("GET", target))
        g = c.read_response()
    assert h.status == 200 and h.body == b""
    assert comparable(h) == comparable(g)
    assert int(h.header("Content-Length")) == len(g.body) > 0


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_echo_other_methods_405(echo, method):
    body = b"value=nope"
    with echo.connect() as c:
        c.send(req(method, "/?value=x", body=body,
                   headers={"Content-Length": str(len(body))}))
        r = c.read_response()
        assert r.status == 405, r
        allow = r.tokens("Allow")
        assert "get" in allow and "head" in allow, r
        assert b"x" != r.body
        c.send(req("GET", "/?value=after"))   # the body was consumed, the stream is in sync
        assert c.read_response().body == b"after"


def test_echo_405_chunked_body(echo):
    with echo.connect() as c:
        c.send(req("POST", "/", headers={"Transfer-Encoding": "chunked"}) +
               b"5\r\nhello\r\n0\r\n\r\n")
        assert c.read_response().status == 405
        c.send(req("GET", "/?value=ok"))
        assert c.read_response().body == b"ok"


def test_echo_keepalive_many(echo):
    with echo.connect() as c:
        c.send(b"".join(req("GET", f"/?value={i}") for i in range(50)))
        for i in range(50):
            assert c.read_response().body == str(i).encode()


def test_echo_http10(echo):
    r = echo.request("/?value=old", version="HTTP/1.0")
    assert (r.status, r.body) == (200, b"old")
