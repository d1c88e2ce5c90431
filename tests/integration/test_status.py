"""The status endpoint (`status = /PATH`): off by default, loopback clients
only, Prometheus text or JSON, with per-worker counters that follow what
the server did (requests, responses by class, bytes, connection states)."""
from __future__ import annotations

import json
import re
import socket
import subprocess

import pytest

from brisk_testlib import req

CONF = "[server]\nstatus = /brisk-status\n"


def prom(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-z_]+)\{([^}]*)\} (\d+)', line)
        assert m, f"not a Prometheus sample: {line!r}"
        labels = tuple(sorted(tuple(kv.split("=", 1)) for kv in m.group(2).split(",")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def total(samples, name, **labels):
    want = {(k, f'"{v}"') for k, v in labels.items()}
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def test_off_by_default(start_brisk):
    srv = start_brisk()
    status, _, _ = srv.get("/brisk-status")
    assert status == 404


def test_prometheus_counts_follow_traffic(start_brisk):
    srv = start_brisk(config=CONF, cli_defaults=True, workers="2")
    for _ in range(5):
        assert srv.get("/hello.txt")[0] == 200
    for _ in range(3):
        assert srv.get("/no-such-file")[0] == 404
    idle = []
    for _ in range(4):  # keep-alive connections, one request each, left idle
        c = srv.connect()
        c.send(req("GET", "/hello.txt"))
        assert c.read_response().status == 200
        idle.append(c)
    status, headers, body = srv.get("/brisk-status")
    assert status == 200
    assert headers.get("content-type", "").startswith("text/plain; version=0.0.4")
    s = prom(body.decode())
    assert total(s, "brisk_requests_total") >= 12
    assert total(s, "brisk_responses_total", **{"class": "2xx"}) >= 9
    assert total(s, "brisk_responses_total", **{"class": "4xx"}) >= 3
    assert total(s, "brisk_connections_accepted_total") >= 12
    assert total(s, "brisk_connections", state="idle") >= 4
    assert total(s, "brisk_connections", state="writing") >= 1  # this very request
    assert total(s, "brisk_connections_active") >= 5
    assert total(s, "brisk_sent_bytes_total") > 9 * 100
    assert total(s, "brisk_received_bytes_total") > 12 * 30
    assert {ls for (n, ls) in s if n == "brisk_requests_total"} == {
        (("worker", '"0"'),), (("worker", '"1"'),)}
    for c in idle:
        c.close()


@pytest.mark.parametrize("how", ["query", "accept"])
def test_json(start_brisk, how):
    srv = start_brisk(config=CONF, cli_defaults=True, workers="2")
    srv.get("/hello.txt")
    path, hdrs = ("/brisk-status?format=json", None) if how == "query" else \
        ("/brisk-status", {"Accept": "application/json"})
    status, headers, body = srv.get(path, headers=hdrs)
    assert status == 200 and headers["content-type"] == "application/json"
    d = json.loads(body)
    assert [w["id"] for w in d["workers"]] == [0, 1]
    t = d["total"]
    assert t["requests"] == sum(w["requests"] for w in d["workers"]) >= 2
    assert t["responses"]["2xx"] >= 1
    assert set(t["connections"]) == {"active", "reading", "writing", "idle"}
    assert set(t["bytes"]) == {"received", "sent"}


def test_methods_and_query_other_than_json(start_brisk):
    srv = start_brisk(config=CONF, cli_defaults=True)
    status, headers, _ = srv.get("/brisk-status", method="POST", body=b"")
    assert status == 405 and headers.get("allow") == "GET, HEAD"
    status, _, body = srv.get("/brisk-status", method="HEAD")
    assert status == 200 and body == b""
    status, headers, _ = srv.get("/brisk-status?format=xml")
    assert status == 200 and headers["content-type"].startswith("text/plain")


def own_address() -> str | None:
    """A non-loopback address of this machine, if it has one."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for a in out.split():
        if "." in a and not a.startswith("127."):
            return a
    return None


def test_refused_to_other_hosts(start_brisk):
    addr = own_address()
    if not addr:
        pytest.skip("this machine has no non-loopback IPv4 address")
    srv = start_brisk(config=CONF + "listen = *:{port}\nroot = {root}\nworkers = 1\n"
                      "access_log = off\n", cli_defaults=False)
    with socket.create_connection((addr, srv.port), timeout=5) as s:
        s.sendall(req("GET", "/brisk-status", headers={"Connection": "close"}))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 403"), data[:200]
    assert srv.get("/brisk-status")[0] == 200  # loopback still gets it


@pytest.mark.parametrize("value", ["brisk-status", "/a?b", "/a b", "/a%20"])
def test_bad_status_path_refused_at_start(run_brisk, tmp_path, value):
    (tmp_path / "bad.conf").write_text(f"[server]\nstatus = {value}\n")
    p = run_brisk(["-t", "-c", tmp_path / "bad.conf"])
    assert p.returncode == 1 and "invalid status" in p.stderr, p.stderr
