"""CGI/1.1 (RFC 3875) in the brisk server: --cgi PREFIX=DIR and the config
key `cgi = PREFIX DIR`.

The scripts are written at run time into tmp_path/cgi (the CGI directory);
tmp_path/www is the standard document root of the fixtures, and
tmp_path/outside.sh is an executable that must never run (it leaves a
marker file when it does).
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

import pytest

from brisk_testlib import NoResponse, populate_www, req

REPO = Path(__file__).resolve().parents[2]

ENV_PY = r"""#!/usr/bin/python3
# The environment exactly as exec'd (Python may add LC_CTYPE to os.environ
# itself), the body's length and digest, the working directory.
import hashlib, json, os, sys
raw = open("/proc/self/environ", "rb").read()
env = {}
for kv in raw.split(b"\0"):
    if kv:
        k, _, v = kv.partition(b"=")
        env[k.decode("latin-1")] = v.decode("latin-1")
body = sys.stdin.buffer.read()
out = json.dumps({"env": env, "body_len": len(body),
                  "body_sha": hashlib.sha256(body).hexdigest(),
                  "cwd": os.getcwd()}).encode()
sys.stdout.buffer.write(b"Content-Type: application/json\r\nX-Script: env\r\n\r\n" + out)
"""

BIG_PY = r"""#!/usr/bin/python3
import sys
sys.stdout.buffer.write(b"Content-Type: application/octet-stream\r\n\r\n")
block = bytes(range(256)) * 256
for _ in range(80):      # 80 x 64 KiB = 5 MiB
    sys.stdout.buffer.write(block)
"""
BIG_LEN = 80 * 65536
BIG_BODY = bytes(range(256)) * 256 * 80
MID_BODY = bytes(range(256)) * 256 * 4


def sh(body):
    return "#!/bin/sh\n" + body + "\n"


def scripts(tmp):
    """name -> (text, mode)"""
    hdr = r"printf 'Content-Type: text/plain\r\n\r\n'"
    return {
        "env.py": (ENV_PY, 0o755),
        "big.py": (BIG_PY, 0o755),
        "mid.py": (BIG_PY.replace("range(80)", "range(4)"), 0o755),
        "echo.sh": (sh(r"printf 'Content-Type: application/octet-stream\r\n\r\n'; exec cat"),
                    0o755),
        "noread.sh": (sh(hdr + "; echo 'did not read the body'"), 0o755),
        "slow.sh": (sh('case "$QUERY_STRING" in ""|*[!0-9]*) s=2;; *) s=$QUERY_STRING;; esac\n'
                       'sleep "$s"\n' + hdr + '; echo "slept $s"'), 0o755),
        "hang.sh": (sh(f"echo $$ > {tmp}/hang.pid\n"
                       f"sleep 30 &\necho $! > {tmp}/hang-child.pid\n"
                       "sleep 10"), 0o755),
        "hang_after_header.sh": (sh(f"echo $$ > {tmp}/hang2.pid\n" + hdr +
                                    "; echo partial\nsleep 10"), 0o755),
        "hang_streaming.sh": (sh(hdr + f"; head -c 200000 /dev/zero\necho $$ > {tmp}/hang3.pid\n"
                                 "sleep 10"), 0o755),
        "crash.sh": (sh("kill -SEGV $$\nsleep 1\n" + hdr + "; echo survived"), 0o755),
        "silent.sh": (sh("exit 0"), 0o755),
        "nohead.sh": (sh("echo 'just some text'"), 0o755),
        "badhead.sh": (sh(r"printf 'not a header line\n\nbody\n'"), 0o755),
        "lfonly.sh": (sh(r"printf 'Content-Type: text/plain\nX-Lf: 1\n\nlf only\n'"), 0o755),
        "status.sh": (sh(r"printf 'Status: 201 Created\r\nContent-Type: text/plain\r\n"
                         r"X-Script: status\r\n\r\ncreated\n'"), 0o755),
        "status404.sh": (sh(r"printf 'Status: 404 Not Here\r\nContent-Type: text/plain\r\n"
                            r"\r\nmissing\n'"), 0o755),
        "loc_abs.sh": (sh(r"printf 'Location: http://example.com/elsewhere\r\n\r\n'"), 0o755),
        "loc_301.sh": (sh(r"printf 'Status: 301 Moved Permanently\r\n"
                          r"Location: http://example.com/moved\r\n"
                          r"Content-Type: text/plain\r\n\r\nmoved\n'"), 0o755),
        "loc_local.sh": (sh(r"printf 'Location: /hello.txt\r\n\r\nthis body is dropped\n'"),
                         0o755),
        "loc_script.sh": (sh(r"printf 'Location: /cgi-bin/env.py/pi?from=redirect\r\n\r\n'"),
                          0o755),
        "loop.sh": (sh(f"echo x >> {tmp}/loop.count\n"
                       r"printf 'Location: /cgi-bin/loop.sh\r\n\r\n'"), 0o755),
        "stderr.sh": (sh('echo "oops from stderr q=$QUERY_STRING" >&2\n' + hdr + "; echo ok"),
                      0o755),
        "badstatus.sh": (sh(r"printf 'Status: abc\r\nContent-Type: text/plain\r\n\r\nx\n'"),
                         0o755),
        "split.sh": (sh("printf 'Sta'; sleep 0.1; printf 'tus: 202 Accepted\\r\\n'; sleep 0.1\n"
                        r"printf 'Content-Type: text/plain\r\n\r\nsplit ok\n'"), 0o755),
        "loc_then_status.sh": (sh(r"printf 'Location: /hello.txt\r\nStatus: 303 See Other\r\n\r\n'"),
                               0o755),
        "status_then_loc.sh": (sh(r"printf 'Status: 303 See Other\r\nLocation: /hello.txt\r\n\r\n'"),
                               0o755),
        "closeout.sh": (sh(hdr + "; echo done\nexec >&- 2>&-\nsleep 3"), 0o755),
        "plain.sh": (sh(hdr + "; echo 'not executable'"), 0o644),
        ".hidden.sh": (sh(hdr + "; echo hidden"), 0o755),
    }


OUTSIDE_SH = "#!/bin/sh\ntouch {marker}\nprintf 'Content-Type: text/plain\\r\\n\\r\\nOUTSIDE RAN\\n'\n"


def make_cgi_dir(tmp: Path, cgi: Path) -> Path:
    cgi.mkdir(parents=True, exist_ok=True)
    for name, (text, mode) in scripts(tmp).items():
        p = cgi / name
        p.write_text(text)
        p.chmod(mode)
    (cgi / "subdir").mkdir(exist_ok=True)
    (cgi / "subdir" / "inner.sh").write_text(sh("printf 'Content-Type: text/plain\\r\\n\\r\\n'"))
    (cgi / "subdir" / "inner.sh").chmod(0o755)
    outside = tmp / "outside.sh"
    outside.write_text(OUTSIDE_SH.format(marker=tmp / "OUTSIDE_RAN"))
    outside.chmod(0o755)
    for name, target in (("link_out.sh", "../outside.sh"), ("link_abs.sh", str(outside)),
                         ("link_dir", str(tmp))):
        if not (cgi / name).is_symlink():
            os.symlink(target, cgi / name)
    return cgi


@pytest.fixture
def start_cgi(start_brisk, tmp_path):
    """start_cgi(mode="cli"|"config", conf="", args=(), env=None, cgi_dir=None).
    The server gets .cgi_dir, .error_log and .tmp attributes."""
    def _start(mode="cli", conf="", args=(), env=None, cgi_dir=None, root=None):
        cgi = make_cgi_dir(tmp_path, Path(cgi_dir) if cgi_dir else tmp_path / "cgi")
        log = tmp_path / "error.log"
        if mode == "cli":
            srv = start_brisk(args=["--cgi", f"/cgi-bin/={cgi}", "--error-log", log, *args],
                              env=env, root=root)
        else:
            text = ("[server]\nlisten = 127.0.0.1:{port}\nroot = {root}\nworkers = 1\n"
                    f"access_log = off\nerror_log = {log}\ncgi = /cgi-bin/ {cgi}\n" + conf)
            srv = start_brisk(config=text, args=args, env=env, root=root)
        srv.cgi_dir, srv.error_log, srv.tmp = cgi, log, tmp_path
        return srv
    return _start


def request(srv, target, method="GET", headers=None, body=b"", version="HTTP/1.1",
            timeout=5.0):
    with srv.connect(timeout=timeout) as c:
        c.send(req(method, target, version=version, headers=headers, body=body,
                   host=None if version == "HTTP/1.0" else "localhost"))
        return c.read_response(method=method)


def error_log(srv):
    return srv.error_log.read_text(errors="replace") if srv.error_log.exists() else ""


def proc_state(pid):
    """The /proc state letter, or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid):
    st = proc_state(pid)
    return st is not None and st not in ("Z", "X")


def children(pid):
    """(pid, state) of every process whose parent is pid."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            out.append((int(d.name), fields[0]))
    return out


def wait_until(pred, timeout, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def assert_no_children(srv, timeout=2.0):
    pid = srv.proc.pid
    ok = wait_until(lambda: not children(pid), timeout)
    assert ok, f"brisk ({pid}) still has child processes: {children(pid)}"


def read_pid(path, timeout=3.0):
    assert wait_until(lambda: path.exists() and path.read_text().strip(), timeout), path
    return int(path.read_text())


# ------------------------------------------------------------ environment
STANDARD = {"GATEWAY_INTERFACE", "SERVER_SOFTWARE", "SERVER_NAME", "SERVER_PORT",
            "SERVER_PROTOCOL", "REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING",
            "CONTENT_TYPE", "CONTENT_LENGTH", "REMOTE_ADDR", "REMOTE_PORT"}
# Not inherited: fixed (PATH) or derived from the request like the standard ones.
TOLERATED = {"PATH", "REQUEST_URI", "SCRIPT_FILENAME"}

SERVER_ENV = {"BRISK_SECRET": "x", "HTTP_PROXY": "http://proxy.invalid:1",
              "http_proxy": "http://proxy.invalid:2", "LD_LIBRARY_PATH": "/brisk-secret-lib",
              "HOME": "/brisk-secret-home"}


def server_env():
    return {**os.environ, **SERVER_ENV,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/brisk-secret-path"}


def check_no_leak(env):
    extra = set(env) - STANDARD - TOLERATED
    assert all(k.startswith("HTTP_") for k in extra), sorted(extra)
    for k in SERVER_ENV:
        if not k.startswith("HTTP"):
            assert k not in env, k
    assert "brisk-secret" not in json.dumps(env), env
    assert "proxy.invalid" not in json.dumps(env), env
    assert not any(k.startswith("ASAN") or k.startswith("UBSAN") or k == "PYTEST_CURRENT_TEST"
                   for k in env), sorted(env)


@pytest.mark.parametrize("mode", ["cli", "config"])
def test_environment_get(start_cgi, mode):
    srv = start_cgi(mode, env=server_env())
    with srv.connect() as c:
        c.send(req("GET", "/cgi-bin/env.py/extra/path%20x?a=1&b=%20+",
                   headers=[("Host", "example.test:1234"), ("X-Custom", "v1"),
                            ("x-multi-word-name", "v2"), ("Proxy", "http://evil.invalid/"),
                            ("X_Under", "u"), ("Accept", "*/*")], host=None))
        r = c.read_response()
        cport = c.sock.getsockname()[1]
    assert r.status == 200, r
    assert r.header("X-Script") == "env" and r.header("Content-Type") == "application/json"
    d = json.loads(r.body)
    env = d["env"]
    assert env["GATEWAY_INTERFACE"] == "CGI/1.1"
    assert env["SERVER_SOFTWARE"].startswith("brisk")
    assert env["SERVER_NAME"] == "example.test"
    assert env["SERVER_PORT"] == str(srv.port)
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert env["REQUEST_METHOD"] == "GET"
    assert env["SCRIPT_NAME"] == "/cgi-bin/env.py"
    assert env["PATH_INFO"] == "/extra/path x"
    assert env["QUERY_STRING"] == "a=1&b=%20+"
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["REMOTE_PORT"] == str(cport)
    assert env["HTTP_HOST"] == "example.test:1234"
    assert env["HTTP_X_CUSTOM"] == "v1"
    assert env["HTTP_X_MULTI_WORD_NAME"] == "v2"
    assert env["HTTP_ACCEPT"] == "*/*"
    assert "HTTP_PROXY" not in env                  # httpoxy
    assert "HTTP_X_UNDER" not in env                # "X_Under" must not pose as "X-Under"
    assert "CONTENT_LENGTH" not in env and "CONTENT_TYPE" not in env
    check_no_leak(env)
    assert d["body_len"] == 0
    assert os.path.realpath(d["cwd"]) == os.path.realpath(srv.cgi_dir)


def test_environment_post_body(start_cgi):
    srv = start_cgi(env=server_env())
    body = b"a=1&b=2"
    r = request(srv, "/cgi-bin/env.py", method="POST", body=body,
                headers={"Content-Type": "application/x-www-form-urlencoded",
                         "Content-Length": str(len(body))})
    d = json.loads(r.body)
    env = d["env"]
    assert env["REQUEST_METHOD"] == "POST"
    assert env["CONTENT_LENGTH"] == str(len(body))
    assert env["CONTENT_TYPE"] == "application/x-www-form-urlencoded"
    assert "HTTP_CONTENT_TYPE" not in env and "HTTP_CONTENT_LENGTH" not in env
    assert env["PATH_INFO"] == "" and env["QUERY_STRING"] == ""
    assert d["body_len"] == len(body)
    assert d["body_sha"] == hashlib.sha256(body).hexdigest()
    check_no_leak(env)


def test_environment_chunked_body_gets_content_length(start_cgi):
    srv = start_cgi()
    data = os.urandom(70000)
    raw = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (data[:1000], data[1000:]))
    r = request(srv, "/cgi-bin/env.py", method="PUT", body=raw + b"0\r\n\r\n",
                headers={"Transfer-Encoding": "chunked"})
    d = json.loads(r.body)
    assert d["env"]["CONTENT_LENGTH"] == str(len(data))
    assert d["body_sha"] == hashlib.sha256(data).hexdigest()


def test_environment_http10_without_host(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/env.py", version="HTTP/1.0")
    env = json.loads(r.body)["env"]
    assert env["SERVER_PROTOCOL"] == "HTTP/1.0"
    assert env["SERVER_NAME"] == "127.0.0.1"
    assert "HTTP_HOST" not in env


# ------------------------------------------------------------ bodies
@pytest.mark.parametrize("mode", ["cli", "config"])
def test_post_1mb_echoed_intact(start_cgi, mode):
    srv = start_cgi(mode)
    body = os.urandom(1 << 20)          # exactly the default max_body_size
    r = request(srv, "/cgi-bin/echo.sh", method="POST", body=body,
                headers={"Content-Length": str(len(body))}, timeout=10)
    assert r.status == 200, r
    assert len(r.body) == len(body)
    assert hashlib.sha256(r.body).hexdigest() == hashlib.sha256(body).hexdigest()


def test_post_body_not_read_by_script(start_cgi):
    """The script exits without reading stdin: the server must survive the
    broken pipe (no SIGPIPE death) and answer."""
    srv = start_cgi()
    body = os.urandom(1 << 20)
    r = request(srv, "/cgi-bin/noread.sh", method="POST", body=body,
                headers={"Content-Length": str(len(body))}, timeout=10)
    assert (r.status, r.body) == (200, b"did not read the body\n")
    assert request(srv, "/hello.txt").status == 200


def test_large_output_streamed(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/big.py", timeout=10)
    assert r.status == 200
    assert len(r.body) == BIG_LEN and r.body == BIG_BODY
    assert r.header("Content-Type") == "application/octet-stream"
    r = request(srv, "/cgi-bin/big.py", version="HTTP/1.0", timeout=10)
    assert r.status == 200 and r.body == BIG_BODY
    # Keep-alive after a streamed body.
    with srv.connect(timeout=10) as c:
        c.send(req("GET", "/cgi-bin/big.py"))
        assert c.read_response().body == BIG_BODY
        c.send(req("GET", "/hello.txt"))
        assert c.read_response().body == (srv.root / "hello.txt").read_bytes()


def test_large_output_to_slow_reader(start_cgi):
    srv = start_cgi()
    with srv.connect(timeout=10, rcvbuf=16384) as c:
        c.send(req("GET", "/cgi-bin/big.py"))
        time.sleep(0.3)                         # let the server's buffer fill up
        r = c.read_response()
    assert r.body == BIG_BODY


def test_keep_alive_after_output_to_slow_reader(start_cgi):
    """The response ends (script's EOF) while the socket is full: the
    connection then goes idle from two calls (the flush list and the
    writable event), which once gave its input buffer back twice and left a
    NULL in the pool; the next request on the connection read into it
    (EFAULT) and was reset."""
    srv = start_cgi()
    for _ in range(3):
        with srv.connect(timeout=10, rcvbuf=16384) as c:
            c.send(req("GET", "/cgi-bin/big.py"))
            time.sleep(0.3)
            assert c.read_response().body == BIG_BODY
            for _ in range(3):
                c.send(req("GET", "/hello.txt"))
                assert c.read_response().body == (srv.root / "hello.txt").read_bytes()


def test_many_keep_alive_clients_of_two_workers(start_cgi):
    """Two clients, each 150 times: a new connection, a streamed CGI body,
    then a static file on the same connection, against two workers. This
    found two bugs (both timing-dependent, so a pass proves little and a
    failure a lot): a socket closed while the other worker's script was
    between fork and exec stayed in epoll and its stale hang-up closed the
    next connection on the same descriptor; and a response ended while the
    socket was full gave the input buffer back twice."""
    srv = start_cgi(args=["--workers", "2"])
    hello = (srv.root / "hello.txt").read_bytes()
    errors = []

    def client():
        for i in range(150):
            step = "cgi"
            try:
                with srv.connect(timeout=10, rcvbuf=16384) as c:
                    c.send(req("GET", "/cgi-bin/mid.py"))
                    assert c.read_response().body == MID_BODY
                    step = "static after cgi"
                    c.send(req("GET", "/hello.txt"))
                    assert c.read_response().body == hello
            except (NoResponse, OSError, AssertionError) as e:
                errors.append(f"round {i}, {step}: {e!r}")

    threads = [threading.Thread(target=client) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]


def test_head_request_runs_script_without_body(start_cgi):
    srv = start_cgi()
    with srv.connect() as c:
        c.send(req("HEAD", "/cgi-bin/status.sh"))
        r = c.read_response(method="HEAD")
        assert r.status == 201 and r.body == b""
        c.send(req("GET", "/hello.txt"))       # nothing of a body in the stream
        assert c.read_response().body == (srv.root / "hello.txt").read_bytes()


# ------------------------------------------------------------ output parsing
def test_status_header(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/status.sh")
    assert (r.status, r.body) == (201, b"created\n")
    assert r.header("X-Script") == "status"
    assert r.header("Content-Type") == "text/plain"
    assert r.header("Status") is None
    r = request(srv, "/cgi-bin/status404.sh")
    assert (r.status, r.body) == (404, b"missing\n")


def test_lf_only_header_section(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/lfonly.sh")
    assert (r.status, r.body) == (200, b"lf only\n")
    assert r.header("X-Lf") == "1"


def test_header_section_split_across_writes(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/split.sh")
    assert (r.status, r.body) == (202, b"split ok\n")


def test_bad_status_gives_502(start_cgi):
    srv = start_cgi()
    assert request(srv, "/cgi-bin/badstatus.sh").status == 502


def test_location_with_status_is_client_redirect(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/status_then_loc.sh")
    assert r.status == 303 and r.header("Location") == "/hello.txt"


def test_location_with_status_order_independent(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/loc_then_status.sh")
    assert r.status == 303, r
    assert r.header("Location") == "/hello.txt"


def test_location_absolute_gives_302(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/loc_abs.sh")
    assert r.status == 302, r
    assert r.header("Location") == "http://example.com/elsewhere"
    r = request(srv, "/cgi-bin/loc_301.sh")
    assert r.status == 301 and r.header("Location") == "http://example.com/moved"


def test_local_redirect_serves_static_file(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/loc_local.sh")
    assert r.status == 200, r
    assert r.body == (srv.root / "hello.txt").read_bytes()
    assert r.header("Location") is None
    assert b"dropped" not in r.body


def test_local_redirect_to_another_script(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/loc_script.sh", method="POST", body=b"xyz",
                headers={"Content-Length": "3"})
    assert r.status == 200, r
    env = json.loads(r.body)["env"]
    assert env["SCRIPT_NAME"] == "/cgi-bin/env.py"
    assert env["PATH_INFO"] == "/pi" and env["QUERY_STRING"] == "from=redirect"
    assert env["REQUEST_METHOD"] == "GET"


def test_local_redirect_loop_is_bounded(start_cgi):
    srv = start_cgi()
    count = srv.tmp / "loop.count"
    with srv.connect(timeout=2.5) as c:
        c.send(req("GET", "/cgi-bin/loop.sh"))
        try:
            r = c.read_response()
        finally:
            runs = len(count.read_text().split()) if count.exists() else 0
    assert r.status >= 500, r
    assert runs <= 10, runs


# ------------------------------------------------------------ failures
def test_crash_gives_502(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/crash.sh")
    assert r.status == 502, r
    assert b"survived" not in r.body
    assert wait_until(lambda: "crash.sh" in error_log(srv), 2), error_log(srv)
    assert_no_children(srv)


@pytest.mark.parametrize("name", ["silent.sh", "nohead.sh", "badhead.sh"])
def test_no_header_gives_502(start_cgi, name):
    srv = start_cgi()
    r = request(srv, f"/cgi-bin/{name}")
    assert r.status == 502, r
    # one style for every error page brisk makes (static 404, CGI 403/404/502)
    assert b"<title>502 Bad Gateway</title>" in r.body, r
    assert r.header("Content-Type").startswith("text/html"), r


def test_timeout_504_kills_process_group(start_cgi):
    srv = start_cgi("config", conf="cgi_timeout = 1s\n")
    t0 = time.monotonic()
    with srv.connect(timeout=5) as a, srv.connect(timeout=5) as b:
        a.send(req("GET", "/cgi-bin/hang.sh"))
        b.send(req("GET", "/cgi-bin/hang_after_header.sh"))
        pid = read_pid(srv.tmp / "hang.pid")
        child = read_pid(srv.tmp / "hang-child.pid")
        pid2 = read_pid(srv.tmp / "hang2.pid")
        assert alive(pid) and alive(child) and alive(pid2)
        ra = a.read_response()
        took = time.monotonic() - t0
        rb = b.read_response()
    assert ra.status == 504, ra
    assert 0.9 <= took < 3.0, took
    assert rb.status == 504, rb                     # headers seen, nothing sent yet
    assert b"partial" not in rb.body
    assert wait_until(lambda: not alive(pid) and not alive(child) and not alive(pid2), 1.0), \
        [(p, proc_state(p)) for p in (pid, child, pid2)]
    assert "timed out" in error_log(srv)
    assert_no_children(srv)
    assert request(srv, "/hello.txt").status == 200


def test_timeout_while_streaming_cuts_the_response(start_cgi):
    """Headers and 200 KB already sent when cgi_timeout strikes: the body must
    end uncleanly (no last chunk) so the client sees the failure."""
    srv = start_cgi("config", conf="cgi_timeout = 1s\n")
    t0 = time.monotonic()
    with srv.connect(timeout=5) as c:
        c.send(req("GET", "/cgi-bin/hang_streaming.sh"))
        r = c.read_head()
        assert r.status == 200 and "chunked" in r.tokens("Transfer-Encoding")
        rest = c.read_to_close(timeout=4)
    assert time.monotonic() - t0 < 3.5
    assert not rest.endswith(b"0\r\n\r\n")
    assert rest.count(b"\0") >= 100000
    pid = read_pid(srv.tmp / "hang3.pid")
    assert wait_until(lambda: not alive(pid), 1.0)
    assert_no_children(srv)


def test_response_complete_at_stdout_eof(start_cgi):
    srv = start_cgi("config", conf="cgi_timeout = 1s\n")
    t0 = time.monotonic()
    r = request(srv, "/cgi-bin/closeout.sh")
    took = time.monotonic() - t0
    assert (r.status, r.body) == (200, b"done\n"), (r, took)
    assert took < 0.9, took


def test_client_gone_kills_script(start_cgi):
    srv = start_cgi()
    c = srv.connect()
    c.send(req("GET", "/cgi-bin/hang.sh"))
    pid = read_pid(srv.tmp / "hang.pid")
    child = read_pid(srv.tmp / "hang-child.pid")
    c.close()
    assert wait_until(lambda: not alive(pid) and not alive(child), 2.0), \
        [(p, proc_state(p)) for p in (pid, child)]
    assert_no_children(srv)
    assert request(srv, "/hello.txt").status == 200


def test_slow_script_does_not_delay_static(start_cgi):
    srv = start_cgi()      # --workers 1
    with srv.connect(timeout=5) as a:
        t0 = time.monotonic()
        a.send(req("GET", "/cgi-bin/slow.sh?2"))
        time.sleep(0.2)                   # the script is running
        for target in ("/hello.txt", "/cgi-bin/status.sh", "/hello.txt"):
            t1 = time.monotonic()
            r = request(srv, target)
            assert r.status in (200, 201), r
            assert time.monotonic() - t1 < 0.5, (target, time.monotonic() - t1)
        assert a.is_open(wait=0.01) and a.buf == b""
        r = a.read_response()
        assert (r.status, r.body) == (200, b"slept 2\n")
        assert time.monotonic() - t0 >= 1.9


def test_max_processes_503(start_cgi):
    srv = start_cgi("config", conf="cgi_max_processes = 1\n")
    with srv.connect(timeout=5) as a:
        a.send(req("GET", "/cgi-bin/slow.sh?1"))
        time.sleep(0.2)
        t1 = time.monotonic()
        r2 = request(srv, "/cgi-bin/slow.sh?1")
        assert r2.status == 503, r2
        assert time.monotonic() - t1 < 0.5
        assert request(srv, "/hello.txt").status == 200   # static is not limited
        r1 = a.read_response()
        assert (r1.status, r1.body) == (200, b"slept 1\n")
    # the slot is free again
    assert request(srv, "/cgi-bin/status.sh").status == 201


def test_stderr_goes_to_error_log(start_cgi):
    srv = start_cgi()
    r = request(srv, "/cgi-bin/stderr.sh?abc")
    assert (r.status, r.body) == (200, b"ok\n")
    assert b"oops" not in r.body
    assert wait_until(lambda: "oops from stderr q=abc" in error_log(srv), 2), error_log(srv)
    line = next(ln for ln in error_log(srv).splitlines() if "oops from stderr" in ln)
    assert "stderr.sh" in line


# ------------------------------------------------------------ what may run
def test_not_executable_and_directory_403(start_cgi):
    srv = start_cgi()
    for target in ("/cgi-bin/plain.sh", "/cgi-bin/subdir", "/cgi-bin/subdir/",
                   "/cgi-bin/subdir/inner.sh", "/cgi-bin/.hidden.sh", "/cgi-bin/"):
        r = request(srv, target)
        assert r.status == 403, (target, r)
        assert b"not executable" not in r.body and b"hidden" not in r.body


def test_error_pages_share_one_style(start_cgi):
    srv = start_cgi()
    pages = {t: request(srv, t) for t in ("/cgi-bin/nosuch.sh", "/cgi-bin/plain.sh",
                                          "/no-such-file.txt")}
    for t, r in pages.items():
        assert r.header("Content-Type").startswith("text/html"), (t, r)
        reason = {404: b"404 Not Found", 403: b"403 Forbidden"}[r.status]
        assert r.body.startswith(b"<html>") and b"<title>" + reason + b"</title>" in r.body, (t, r)


def test_prefix_without_slash_redirects(start_cgi):
    # As for a directory (and as the README promises): 301 to the slash form.
    srv = start_cgi()
    for target, loc in (("/cgi-bin", "/cgi-bin/"), ("/cgi-bin?a=1", "/cgi-bin/?a=1")):
        r = request(srv, target)
        assert r.status == 301, (target, r)
        assert r.header("Location") == loc, r


def test_two_mappings_and_prefix_without_slash(start_cgi, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.sh").write_text(sh(r"printf 'Content-Type: text/plain\r\n\r\nother ran\n'"))
    (other / "o.sh").chmod(0o755)
    srv = start_cgi(args=["--cgi", f"/other={other}"])
    assert request(srv, "/other/o.sh").body == b"other ran\n"
    assert request(srv, "/cgi-bin/status.sh").status == 201
    assert request(srv, "/otherx/o.sh").status == 404
    assert request(srv, "/cgi-bin/o.sh").status == 404


def test_missing_script_404(start_cgi):
    srv = start_cgi()
    assert request(srv, "/cgi-bin/nope.sh").status == 404
    assert request(srv, "/cgi-bin/nope.sh/with/path").status == 404


@pytest.mark.parametrize("target", [
    "/cgi-bin/../outside.sh",
    "/cgi-bin/%2e%2e/outside.sh",
    "/cgi-bin/%2E%2E/outside.sh",
    "/cgi-bin/..%2foutside.sh",
    "/cgi-bin/..%2Foutside.sh",
    "/cgi-bin/./../outside.sh",
    "/cgi-bin/subdir/../../outside.sh",
    "/cgi-bin/link_out.sh",          # symlink in DIR -> ../outside.sh
    "/cgi-bin/link_abs.sh",          # symlink in DIR -> /abs/outside.sh
    "/cgi-bin/link_dir/outside.sh",  # symlinked directory pointing out of DIR
    "/cgi-bin/%2e%2e%2foutside.sh",
    "/cgi-bin/..\\outside.sh",
])
def test_outside_dir_never_executed(start_cgi, target):
    srv = start_cgi()
    with srv.connect() as c:
        c.send(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        r = c.read_response()
    assert r.status in (400, 403, 404), r
    assert b"OUTSIDE RAN" not in r.body
    time.sleep(0.05)
    assert not (srv.tmp / "OUTSIDE_RAN").exists()


@pytest.mark.parametrize("target", ["/./cgi-bin/secret.sh", "//cgi-bin/secret.sh",
                                    "/%63gi-bin/secret.sh", "/a/../cgi-bin/secret.sh"])
def test_script_source_never_served(start_cgi, tmp_path, target):
    root = tmp_path / "www"
    populate_www(root)
    cgi = root / "cgi-bin"
    cgi.mkdir()
    (cgi / "secret.sh").write_text(sh("# SOURCE-MARKER password=hunter2\n"
                                      "printf 'Content-Type: text/plain\\r\\n\\r\\nran\\n'"))
    (cgi / "secret.sh").chmod(0o755)
    srv = start_cgi(cgi_dir=cgi, root=root)
    assert request(srv, "/cgi-bin/secret.sh").body == b"ran\n"
    with srv.connect() as c:
        c.send(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        r = c.read_response()
    assert b"SOURCE-MARKER" not in r.body, r


# ------------------------------------------------------------ processes
def test_children_reaped_after_many_scripts(start_cgi):
    srv = start_cgi()
    results = []

    def client(target):
        results.append(request(srv, target, timeout=5).status)

    targets = ["/cgi-bin/status.sh", "/cgi-bin/crash.sh", "/cgi-bin/silent.sh",
               "/cgi-bin/env.py", "/cgi-bin/stderr.sh"] * 4
    ts = [threading.Thread(target=client, args=(t,)) for t in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert sorted(results) == sorted([201, 502, 502, 200, 200] * 4)
    assert_no_children(srv)
    zombies = [p for p, st in children(srv.proc.pid) if st == "Z"]
    assert not zombies


# ------------------------------------------------------------ the examples
def test_example_scripts_get_and_post(start_brisk, tmp_path):
    srv = start_brisk(args=["--cgi", f"/cgi-bin/={REPO / 'www' / 'cgi-bin'}"])
    r = request(srv, "/cgi-bin/hello.sh?name=brisk")
    assert r.status == 200, r
    assert r.body == b"Hello from a shell CGI script. QUERY_STRING=name=brisk\n"
    body = b"posted data 123"
    r = request(srv, "/cgi-bin/hello.sh", method="POST", body=body,
                headers={"Content-Length": str(len(body))})
    assert r.body == b"You posted %d bytes:\n%s\n" % (len(body), body)

    r = request(srv, "/cgi-bin/env.py?x=1")
    assert r.status == 200 and r.header("X-Brisk-Example") == "env"
    d = json.loads(r.body)
    assert d["env"]["QUERY_STRING"] == "x=1" and d["body_length"] == 0
    body = b"k=v" * 100
    r = request(srv, "/cgi-bin/env.py", method="POST", body=body,
                headers={"Content-Length": str(len(body)), "Content-Type": "text/plain"})
    d = json.loads(r.body)
    assert d["body_length"] == len(body) and d["body_head"] == body[:64].decode()
    assert d["env"]["REQUEST_METHOD"] == "POST" and d["env"]["CONTENT_TYPE"] == "text/plain"
    assert_no_children(srv)
