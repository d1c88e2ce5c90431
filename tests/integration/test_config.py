"""Command line and configuration file handling."""
from __future__ import annotations

import re
import socket

import pytest

from brisk_testlib import free_port, populate_www, req

FULL_CONF = """[server]
listen = 127.0.0.1:{port}
root = www
workers = 1
index = index.html
autoindex = off
default_type = application/octet-stream
access_log = off
error_log = {tmp}/error.log
keepalive_timeout = 75s
client_header_timeout = 500ms
client_body_timeout = 60s
send_timeout = 60s
max_header_size = 8k
max_body_size = 1m
max_connections = 1024
"""


def write_conf(tmp_path, text, name="brisk.conf"):
    p = tmp_path / name
    p.write_text(text.replace("{port}", str(free_port())).replace("{tmp}", str(tmp_path)))
    return p


# ------------------------------------------------------------ CLI
def test_version(run_brisk):
    cp = run_brisk(["--version"])
    assert cp.returncode == 0
    assert re.search(r"\bbrisk 0\.1\.0\b", cp.stdout + cp.stderr), (cp.stdout, cp.stderr)


def test_help(run_brisk):
    cp = run_brisk(["--help"])
    assert cp.returncode == 0
    out = cp.stdout + cp.stderr
    assert "usage" in out.lower()
    for flag in ("--listen", "--root", "--workers", "--access-log"):
        assert flag in out, flag


def test_unknown_flag(run_brisk):
    cp = run_brisk(["--no-such-flag"])
    assert cp.returncode != 0
    assert cp.returncode == 2
    assert "no-such-flag" in cp.stderr, cp.stderr


def test_missing_config_file(run_brisk, tmp_path):
    cp = run_brisk(["-t", "-c", tmp_path / "missing.conf"])
    assert cp.returncode != 0
    assert "missing.conf" in cp.stderr, cp.stderr


# ------------------------------------------------------------ -t
def test_config_test_good(run_brisk, tmp_path):
    populate_www(tmp_path / "www")
    cfg = write_conf(tmp_path, FULL_CONF)
    cp = run_brisk(["-t", "-c", cfg])
    assert cp.returncode == 0, cp.stderr


BAD_LINE3 = [
    ("unknown-key", "no_such_key = 1"),
    ("workers-abc", "workers = abc"),
    ("listen-bad-port", "listen = 127.0.0.1:notaport"),
    ("listen-port-range", "listen = 127.0.0.1:70000"),
    ("listen-bad-addr", "listen = 999.1.2.3:8080"),
    ("autoindex-maybe", "autoindex = maybe"),
    ("bad-duration", "keepalive_timeout = 5parsecs"),
    ("bad-size", "max_body_size = lots"),
    ("negative-connections", "max_connections = -5"),
]


@pytest.mark.parametrize("line", [b[1] for b in BAD_LINE3], ids=[b[0] for b in BAD_LINE3])
def test_config_test_bad_reports_file_and_line(run_brisk, tmp_path, line):
    populate_www(tmp_path / "www")
    cfg = write_conf(tmp_path, f"[server]\nroot = www\n{line}\nindex = index.html\n")
    cp = run_brisk(["-t", "-c", cfg])
    assert cp.returncode != 0, cp.stdout
    assert f"{cfg.name}:3:" in cp.stderr, cp.stderr


def test_bad_config_prevents_start(run_brisk, tmp_path):
    populate_www(tmp_path / "www")
    cfg = write_conf(tmp_path, "[server]\nroot = www\nbogus = yes\n")
    cp = run_brisk(["-c", cfg, "--listen", f"127.0.0.1:{free_port()}"])
    assert cp.returncode != 0
    assert f"{cfg.name}:3:" in cp.stderr, cp.stderr


def test_address_in_use_fails(run_brisk, tmp_path):
    root = populate_www(tmp_path / "www")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        cp = run_brisk(["--listen", f"127.0.0.1:{port}", "--root", root, "--workers", "1",
                        "--access-log", "off"])
    assert cp.returncode != 0
    assert cp.stderr.strip(), "no error message"


def test_missing_root_fails(run_brisk, tmp_path):
    cp = run_brisk(["--listen", f"127.0.0.1:{free_port()}", "--root", tmp_path / "nope",
                    "--workers", "1", "--access-log", "off"])
    assert cp.returncode != 0
    assert cp.stderr.strip()


# ------------------------------------------------------------ config semantics
def test_full_config_serves(start_brisk, tmp_path):
    populate_www(tmp_path / "www")
    srv = start_brisk(config=FULL_CONF.replace("{tmp}", str(tmp_path)))
    status, _, body = srv.get("/hello.txt")
    assert status == 200 and body == (tmp_path / "www" / "hello.txt").read_bytes()


def test_relative_root_is_relative_to_config_dir(start_brisk, tmp_path):
    conf_dir = tmp_path / "etc" / "brisk"
    conf_dir.mkdir(parents=True)
    site = populate_www(tmp_path / "site")
    srv = start_brisk(config="[server]\nlisten = 127.0.0.1:{port}\nroot = ../../site\n"
                             "workers = 1\naccess_log = off\n",
                      config_name="etc/brisk/brisk.conf", root=site)
    status, _, body = srv.get("/hello.txt")
    assert status == 200 and body == (site / "hello.txt").read_bytes()


def test_cli_overrides_config(start_brisk, tmp_path):
    a = populate_www(tmp_path / "a")
    b = populate_www(tmp_path / "b")
    (a / "which.txt").write_text("A\n")
    (b / "which.txt").write_text("B\n")
    cfg_port = free_port()
    cli_port = free_port()
    srv = start_brisk(
        config=f"[server]\nlisten = 127.0.0.1:{cfg_port}\nroot = {a}\nworkers = 1\naccess_log = off\n",
        cli_defaults=False, listens=[("127.0.0.1", cli_port)], root=b,
        args=["--listen", f"127.0.0.1:{cli_port}", "--root", b])
    status, _, body = srv.get("/which.txt")
    assert status == 200 and body == b"B\n"


def test_custom_index(start_brisk):
    srv = start_brisk(config="[server]\nindex = other.txt\n", cli_defaults=True)
    status, _, body = srv.get("/dir/")
    assert status == 200 and body == (srv.root / "dir" / "other.txt").read_bytes()


def test_default_type(start_brisk):
    srv = start_brisk(config="[server]\ndefault_type = text/plain\n", cli_defaults=True)
    status, h, _ = srv.get("/blob.qqqunknown")
    assert status == 200
    assert h["Content-Type"].split(";")[0].strip() == "text/plain"


def test_max_body_size(start_brisk):
    srv = start_brisk(config="[server]\nmax_body_size = 1k\n", cli_defaults=True)
    c = srv.connect()
    c.send(req("POST", "/hello.txt", headers={"Content-Length": "500"}, body=b"z" * 500)
           + req("GET", "/hello.txt"))
    r = c.read_response()
    assert r.status == 405, r
    assert c.read_response().status == 200
    c.close()
    c = srv.connect()
    c.send(req("POST", "/hello.txt", headers={"Content-Length": "2000"}))
    r = c.read_response()
    c.close()
    assert r.status == 413, r


def test_max_header_size(start_brisk):
    srv = start_brisk(config="[server]\nmax_header_size = 16k\n", cli_defaults=True)
    r, c = srv.raw(req("GET", "/hello.txt", headers={"X-Big": "a" * 10000}))
    c.close()
    assert r.status == 200, r
    r, c = srv.raw(req("GET", "/hello.txt", headers={"X-Big": "a" * 17000}))
    c.close()
    assert r.status == 431, r


def test_error_log_file(start_brisk, tmp_path):
    log = tmp_path / "error.log"
    srv = start_brisk(args=["--error-log", log])
    assert srv.get("/hello.txt")[0] == 200
    assert srv.stop() == 0
    assert log.exists()
