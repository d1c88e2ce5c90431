"""Idle clients, brisk-kv side by side with a real redis-server: many
connections that each sent one PING and wait. brisk-kv's memory per idle
client (RSS growth / clients) must be no more than Redis's, and every
client is still answered afterwards. As many clients as RLIMIT_NOFILE allows,
up to 15,000. Skipped under the sanitizers (their allocator inflates every
figure)."""
from __future__ import annotations

import resource
import shutil
import socket
import subprocess
import time

import pytest

from kvlib import KV_BIN, free_port

REDIS_SERVER = shutil.which("redis-server")
WANT = 15_000


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def sanitized() -> bool:
    with open(KV_BIN, "rb") as f:
        # GCC links libasan dynamically: the binary holds the symbol
        # __asan_init, not the string "AddressSanitizer".
        return b"__asan_init" in f.read()


def wait_port(port: int, timeout: float = 10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}")


def per_client_kb(argv: list[str], port: int, n: int) -> float:
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socks = []
    try:
        wait_port(port)
        time.sleep(0.3)
        r0 = rss_kb(p.pid)
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"PING\r\n")
            socks.append(s)
        for s in socks:
            assert s.recv(16) == b"+PONG\r\n"
        time.sleep(0.5)
        r1 = rss_kb(p.pid)
        for s in socks:  # every idle client is still served
            s.sendall(b"PING\r\n")
        for s in socks:
            assert s.recv(16) == b"+PONG\r\n"
        return (r1 - r0) / n
    finally:
        for s in socks:
            s.close()
        p.terminate()
        p.wait(10)


@pytest.mark.timeout(180)
def test_idle_clients_cost_no_more_than_redis(tmp_path):
    if sanitized():
        pytest.skip("memory per client is not meaningful under the sanitizers")
    if not REDIS_SERVER:
        pytest.skip("redis-server is not installed")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else WANT * 2 + 1000
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    n = min(WANT, (limit - 1000) // 2)  # this process holds one end, the server the other
    if n < 2000:
        pytest.skip(f"RLIMIT_NOFILE too low ({limit})")
    p1, p2 = free_port(), free_port()
    brisk = per_client_kb([KV_BIN, "--port", str(p1), "--dir", str(tmp_path), "--save", "",
                           "--maxclients", str(n + 100)], p1, n)
    redis = per_client_kb([REDIS_SERVER, "--port", str(p2), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", str(tmp_path),
                           "--maxclients", str(n + 100)], p2, n)
    print(f"\n{n} idle clients: brisk-kv {brisk:.2f} KiB per client, Redis {redis:.2f} KiB")
    assert brisk <= redis, (brisk, redis)
