"""100,000 idle keep-alive connections on one worker, brisk side by side
with nginx: each connection has made one request and waits. (Fewer where
RLIMIT_NOFILE's hard limit is lower and cannot be raised: the test takes
what the limit allows and says so; these sandboxes cap it at 20,000.) The server's
memory per idle connection (RSS growth / connections) must be no more than
nginx's; then a request on every one of them is still answered.

Connections come from several 127.0.0.x source addresses, each with its own
ephemeral port range (one address has ~28,000 ports). Skipped under the
sanitizers (their allocator inflates every figure) and where the
file-descriptor limit cannot be raised. nginx is Debian's (scripts/deps.sh
test installs it); without it the brisk half still runs with an absolute
bound.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from brisk_testlib import free_port, req
from hostile_lib import Swarm, exchange_all, is_sanitized, raise_nofile, rss_kb

WANT = 100_000
N = WANT  # set by the test from the file-descriptor limit
BODY = b"Hello, brisk!\n"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def sources(block: int) -> list[str]:
    return [f"127.0.{block}.{i}" for i in range(1, 6)]  # 5 x ~28k ports


def fill(host: str, port: int, pid: int, srcs: list[str]) -> tuple[int, int, Swarm]:
    """Opens N connections that each make one request; returns the server's
    RSS (KiB) before and with all of them idle, and the swarm."""
    request = req("GET", "/hello.txt")
    rss0 = rss_kb(pid)
    swarm = Swarm(host, port, srcs)
    batch = 2000
    for _ in range(0, N, batch):
        before = len(swarm.socks)
        swarm.open(batch, timeout=60)
        exchange_all(swarm.socks[before:], request, BODY, timeout=60)
    time.sleep(1.0)
    return rss0, rss_kb(pid), swarm


def serve_all_again(swarm: Swarm):
    request = req("GET", "/hello.txt")
    assert swarm.poll_closed(wait=0.2) == N, "the server closed idle connections"
    for start in range(0, N, 5000):
        exchange_all(swarm.socks[start:start + 5000], request, BODY, timeout=60)


def nginx_per_conn(tmp_path: Path, root: Path) -> float | None:
    """nginx's growth per idle connection. worker_connections is twice N:
    nginx closes idle keep-alive connections once fewer than 1/16 of its
    slots are free. (It preallocates those slots at start, so its baseline
    RSS already holds part of a connection's cost.)"""
    if not NGINX:
        return None
    port = free_port()
    conf = tmp_path / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""  # the test's files are the test's own
    conf.write_text(f"""
{user}
worker_processes 1;
worker_rlimit_nofile {N + 1000};
daemon off;
master_process on;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/nginx-error.log;
events {{ worker_connections {2 * N}; }}
http {{
    access_log off;
    keepalive_timeout 600s;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
""")
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    swarm = None
    try:
        worker = None
        deadline = time.monotonic() + 10
        while worker is None and time.monotonic() < deadline:
            kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
            if kids.exists() and kids.read_text().split():
                worker = int(kids.read_text().split()[0])
            else:
                time.sleep(0.05)
        assert worker, "nginx started no worker"
        time.sleep(0.3)
        rss0, rss1, swarm = fill("127.0.0.1", port, worker, sources(2))
        serve_all_again(swarm)
        return (rss1 - rss0) / N
    finally:
        if swarm:
            swarm.close()
        proc.terminate()
        proc.wait(10)


@pytest.mark.timeout(600)
def test_hundred_thousand_idle_connections_cost_no_more_than_nginx(start_brisk, tmp_path):
    global N
    have = raise_nofile(WANT + 2000)
    N = min(WANT, (have - 1000) // 2000 * 2000)
    if N < 10_000:
        pytest.skip(f"RLIMIT_NOFILE too low for a meaningful figure (have {have})")
    srv = start_brisk(workers="1", cli_defaults=True,
                      config="[server]\nmax_connections = 120000\nkeepalive_timeout = 600\n")
    if is_sanitized(srv.cmd[0]):
        pytest.skip("memory per connection is not meaningful under the sanitizers")
    rss0, rss1, swarm = fill(srv.host, srv.port, srv.proc.pid, sources(1))
    try:
        # a newcomer is still served while they wait
        status, _, body = srv.get("/hello.txt")
        assert status == 200 and body == BODY
        serve_all_again(swarm)
        rss2 = rss_kb(srv.proc.pid)
    finally:
        swarm.close()
    brisk_kb = (rss1 - rss0) / N
    (tmp_path / "nginx").mkdir()
    nginx_kb = nginx_per_conn(tmp_path / "nginx", srv.root)
    print(f"\n{N} idle keep-alive connections (of {WANT} wanted), one worker: brisk RSS {rss0 / 1024:.1f} -> "
          f"{rss1 / 1024:.1f} MB ({brisk_kb:.3f} KiB per connection; {rss2 / 1024:.1f} MB after "
          f"serving all again)"
          + (f"; nginx {nginx_kb:.3f} KiB per connection" if nginx_kb is not None else
             "; nginx not installed"))
    assert brisk_kb < 0.6, f"{brisk_kb:.3f} KiB per idle connection"
    if nginx_kb is not None:
        assert brisk_kb <= nginx_kb, (brisk_kb, nginx_kb)
