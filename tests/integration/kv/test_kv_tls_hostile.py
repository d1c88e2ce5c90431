"""brisk-kv's tls-port under attack: floods of half-open handshakes (the
10 s handshake deadline, maxclients), garbage and truncated records at each
stage, stuck peers, a client that does not read a big reply, CONFIG SET
tls-* while handshakes are in flight. Each test checks that the server
lives and serves others, leaks no descriptor (/proc/PID/fd), stays bounded
in memory (VmRSS) and does not spin (its CPU time while peers are stuck).
A sanitizer report fails the test at teardown (ASan build)."""
from __future__ import annotations

import errno
import os
import socket
import ssl
import struct
import subprocess
import time

import pytest

import tls_probe
from test_kv_tls import OPENSSL, REDIS_CLI, certs, tls_client, tls_kv  # noqa: F401
from tls_probe import cpu, fds, rss_kib, wait_fds

pytestmark = pytest.mark.skipif(not (REDIS_CLI and OPENSSL), reason="needs redis-cli and openssl")

ASAN = "asan" in os.environ.get("BRISK_BIN_DIR", "")
PING = b"*1\r\n$4\r\nPING\r\n"


def ctx(d) -> ssl.SSLContext:
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.load_verify_locations(str(d / "ca.crt"))
    c.check_hostname = False
    return c


def client_hello(d) -> bytes:
    return tls_probe.client_hello(ctx(d))


class Manual(tls_probe.Manual):
    """tls_probe's hand-driven client, trusting the test CA."""

    def __init__(self, d, port):
        super().__init__(ctx(d), port)

    def recv_until(self, n: int) -> bytes:
        got = b""
        while len(got) < n:
            try:
                while len(got) < n and (piece := self.obj.read(65536)):
                    got += piece
                if len(got) >= n:
                    break
            except ssl.SSLWantReadError:
                pass
            d = self.sock.recv(65536)
            if not d:
                break
            self.inc.write(d)
        return got


def served(d, s) -> bool:
    c = tls_client(d, s.tls_port)
    try:
        return c.ping() is True
    finally:
        c.close()


def test_half_open_handshake_flood_bounded_timed_out_no_spin(tls_kv, certs):
    s = tls_kv("no")
    pid = s.proc.pid
    assert served(certs, s)
    base_fds, base_rss = fds(pid), rss_kib(pid)
    hello = client_hello(certs)
    socks = []
    t0 = time.monotonic()
    for i in range(300):
        k = socket.create_connection(("127.0.0.1", s.tls_port))
        if i % 3 == 1:
            k.sendall(hello[: len(hello) // 2])
        elif i % 3 == 2:
            k.sendall(hello[:3])
        socks.append(k)
    time.sleep(0.3)
    c0 = cpu(pid)
    assert served(certs, s)
    assert s.client().ping()
    time.sleep(1.0)
    spent = cpu(pid) - c0
    grown = rss_kib(pid) - base_rss
    assert spent < 0.5, f"{spent:.2f} s of CPU while peers hold half-open handshakes"
    assert grown < 300 * 96, f"RSS grew by {grown} KiB for 300 half-open handshakes"
    # the 10 s handshake deadline closes them all
    n = wait_fds(pid, base_fds, timeout=max(1.0, 14 - (time.monotonic() - t0)))
    assert n <= base_fds, f"{n - base_fds} descriptors left after the handshake deadline"
    for k in socks:
        k.close()
    assert served(certs, s)


def test_maxclients_bounds_handshakes(tls_kv, certs):
    """Silent peers cannot hold more descriptors than maxclients allows
    (Redis counts a connection against maxclients from its accept)."""
    s = tls_kv("no", "--maxclients", "8")
    pid = s.proc.pid
    base = fds(pid)
    socks = [socket.create_connection(("127.0.0.1", s.tls_port)) for _ in range(40)]
    time.sleep(0.5)
    held = fds(pid) - base
    assert held <= 8, f"{held} handshakes held with maxclients 8"
    for k in socks:
        k.close()
    assert wait_fds(pid, base) <= base
    assert served(certs, s)


def test_garbage_and_truncated_records_before_the_handshake(tls_kv, certs):
    s = tls_kv("no")
    pid = s.proc.pid
    assert served(certs, s)
    base = fds(pid)
    hello = client_hello(certs)
    cases = {
        "random": os.urandom(4096),
        "resp": PING,
        "http": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "hello-then-garbage": hello + os.urandom(2048),
        "hello-twice": hello + hello,
        "eof-mid-record": hello[:-7],
        "huge-record-header": b"\x16\x03\x01\xff\xff" + os.urandom(20000),
        "huge-appdata-first": b"\x17\x03\x03\xff\xff" + os.urandom(65535),
        "zero-length-records": b"\x16\x03\x01\x00\x00" * 200,
        "sslv2-hello": b"\x80\x2e\x01\x00\x02" + os.urandom(43),
    }
    for name, data in cases.items():
        k = socket.create_connection(("127.0.0.1", s.tls_port), timeout=4)
        try:
            k.sendall(data)
            k.shutdown(socket.SHUT_WR)  # (ENOTCONN: the server has reset it already)
            while k.recv(65536):
                pass
        except (BrokenPipeError, ConnectionResetError):
            pass
        except OSError as e:
            if e.errno != errno.ENOTCONN:
                raise
        except socket.timeout:
            pytest.fail(f"{name}: the connection stayed open")
        k.close()
    assert wait_fds(pid, base) <= base
    assert served(certs, s)
    assert "+PONG" not in s.output()


def test_garbage_after_the_handshake_and_mid_command(tls_kv, certs):
    s = tls_kv("no")
    pid = s.proc.pid
    assert served(certs, s)
    base = fds(pid)
    for junk in (os.urandom(3000),
                 b"\x17\x03\x03\x00\x40" + os.urandom(0x40),
                 b"\x17\x03\x03\x40\x01",
                 b"\x17\x03\x03\x01\x00" + os.urandom(10)):
        m = Manual(certs, s.tls_port)
        m.sock.sendall(m.first_flight())
        m.finish()
        m.send(PING)
        assert m.recv_until(7) == b"+PONG\r\n"
        m.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk")  # half a command, then junk
        m.sock.sendall(junk)
        m.sock.shutdown(socket.SHUT_WR)
        m.sock.settimeout(4)
        try:
            while m.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        m.sock.close()
    assert wait_fds(pid, base) <= base
    assert served(certs, s)


def test_reset_mid_handshake_and_mid_reply(tls_kv, certs):
    s = tls_kv("no")
    pid = s.proc.pid
    s.client().set("big", b"x" * (8 * 1024 * 1024))
    assert served(certs, s)
    base = fds(pid)
    linger = struct.pack("ii", 1, 0)
    for _ in range(5):
        m = Manual(certs, s.tls_port)
        m.sock.sendall(m.first_flight())
        m.sock.recv(1000)
        m.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        m.sock.close()
        m = Manual(certs, s.tls_port)
        m.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        m.sock.sendall(m.first_flight())
        m.finish()
        m.send(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")
        assert m.recv_until(100).startswith(b"$8388608\r\n")
        m.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        m.sock.close()
    assert wait_fds(pid, base) <= base
    assert served(certs, s)


def test_stuck_peers_cost_no_cpu(tls_kv, certs):
    s = tls_kv("no")
    pid = s.proc.pid
    s.client().set("big", b"y" * (8 * 1024 * 1024))
    hello = client_hello(certs)
    held = []
    k = socket.create_connection(("127.0.0.1", s.tls_port))
    k.sendall(hello[:40])
    held.append(k)
    k = socket.create_connection(("127.0.0.1", s.tls_port))
    k.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    k.sendall(hello)
    held.append(k)
    m = Manual(certs, s.tls_port)
    m.sock.sendall(m.first_flight())
    m.finish()
    m.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc")  # half a command
    held.append(m.sock)
    m = Manual(certs, s.tls_port)
    m.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    m.sock.sendall(m.first_flight())
    m.finish()
    m.send(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")  # a big reply nobody reads
    held.append(m.sock)
    time.sleep(0.5)
    c0 = cpu(pid)
    time.sleep(2.0)
    spent = cpu(pid) - c0
    assert spent < 0.3, f"{spent:.2f} s of CPU in 2 s with stuck peers: a busy loop"
    assert served(certs, s)
    for k in held:
        k.close()


def test_slow_reader_of_a_big_reply_bounded_and_finishes(tls_kv, certs):
    s = tls_kv("no")
    pid = s.proc.pid
    size = 16 * 1024 * 1024
    value = os.urandom(size)
    s.client().set("big", value)
    assert served(certs, s)
    base_rss = rss_kib(pid)
    m = Manual(certs, s.tls_port)
    # (a default receive buffer: one smaller than the loopback MSS makes
    # the kernel trickle at 80 KB/s, whatever the server does)
    m.sock.sendall(m.first_flight())
    m.finish()
    m.send(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 2)  # 32 MiB of replies, unread
    time.sleep(0.5)
    c0 = cpu(pid)
    time.sleep(1.5)
    assert cpu(pid) - c0 < 0.3, "the server spins while the reader does not read"
    grown = rss_kib(pid) - base_rss
    assert grown < 3 * size // 1024 + 8 * 1024, f"RSS grew by {grown} KiB for 2x16 MiB replies"
    assert served(certs, s)
    head = b"$%d\r\n" % size
    want = head + value + b"\r\n"
    got = m.recv_until(2 * len(want))
    assert got == want * 2
    m.sock.close()


def test_idle_tls_clients_are_small(tls_kv, certs):
    s = tls_kv("no")
    pid = s.proc.pid
    conns = []
    for _ in range(20):
        conns.append(tls_client(certs, s.tls_port))
        assert conns[-1].ping()
    base = rss_kib(pid)
    for _ in range(200):
        conns.append(tls_client(certs, s.tls_port))
        assert conns[-1].ping()
    grown = rss_kib(pid) - base
    if not ASAN:  # (ASan's quarantine keeps freed memory resident)
        assert grown < 200 * 24, f"{grown} KiB for 200 idle TLS clients"
    for c in conns:
        c.close()


def test_config_set_tls_while_handshakes_are_in_flight(tls_kv, certs):
    s = tls_kv("no")
    pid = s.proc.pid
    assert served(certs, s)
    base = fds(pid)
    ms = []
    for i in range(6):
        m = Manual(certs, s.tls_port)
        flight = m.first_flight()
        m.sock.sendall(flight if i % 2 else flight[:30])
        ms.append((m, flight))
    time.sleep(0.2)
    r = s.client()
    assert r.config_set("tls-cert-file", str(certs / "server.crt"))
    assert r.config_set("tls-protocols", "TLSv1.2 TLSv1.3")
    for i, (m, flight) in enumerate(ms):
        if not i % 2:
            m.sock.sendall(flight[30:])
        m.finish()
        m.send(PING)
        assert m.recv_until(7) == b"+PONG\r\n"
        m.sock.close()
    # the listener moves while handshakes are in flight on the old one
    m = Manual(certs, s.tls_port)
    flight = m.first_flight()
    m.sock.sendall(flight[:30])
    from kvlib import free_port
    new_port = free_port()
    assert r.config_set("tls-port", str(new_port))
    m.sock.sendall(flight[30:])
    m.finish()
    m.send(PING)
    assert m.recv_until(7) == b"+PONG\r\n"
    m.sock.close()
    s.tls_port = new_port
    assert served(certs, s)
    r.close()
    assert wait_fds(pid, base + 1) <= base + 1  # (+1: the plain client above, now closed)


@pytest.mark.parametrize("on_tls", [True, False])
def test_out_of_descriptors_no_busy_accept(tls_kv, certs, on_tls):
    """accept() failing with EMFILE leaves the connection in the backlog:
    the listener stays readable, and a loop that returns at once spins."""
    s = tls_kv("no")
    pid = s.proc.pid
    limit = fds(pid) + 10
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True)
    port = s.tls_port if on_tls else s.port
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]
    time.sleep(0.5)
    c0 = cpu(pid)
    time.sleep(1.5)
    spent = cpu(pid) - c0
    for k in socks:
        k.close()
    assert spent < 0.3, f"{spent:.2f} s of CPU in 1.5 s out of descriptors: a busy accept loop"
    time.sleep(0.5)
    assert served(certs, s)
    assert s.client().ping()


def s_client(d, port, *args, stdin=b""):
    p = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile",
                        str(d / "ca.crt"), *args], input=stdin, capture_output=True, timeout=20)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace")


def test_renegotiation_old_protocols_weak_ciphers_refused(tls_kv, certs):
    s = tls_kv("no")
    rc, out = s_client(certs, s.tls_port, "-tls1_2", stdin=b"R\n")
    assert "RENEGOTIATING" in out and "no renegotiation" in out, out
    for args in (("-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"),
                 ("-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"),
                 ("-tls1_2", "-cipher", "AES128-SHA:AES256-SHA256:AES128-GCM-SHA256"),  # no FS
                 ("-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA384")):  # CBC
        rc, out = s_client(certs, s.tls_port, *args)
        assert rc != 0 and "Cipher is (NONE)" in out or "no protocols available" in out \
            or "alert" in out, (args, out)
        assert "+PONG" not in out
    assert served(certs, s)


def test_key_updates_and_ping(tls_kv, certs):
    """TLS 1.3 KeyUpdate from the client (K: asking the server to update
    its keys too, a read that must write), then the session goes on."""
    s = tls_kv("no")
    # (s_client takes its command letters only without -ign_eof: feed slowly)
    p = subprocess.Popen([OPENSSL, "s_client", "-connect", f"127.0.0.1:{s.tls_port}", "-CAfile",
                          str(certs / "ca.crt"), "-tls1_3"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for line in (b"K\n", b"PING\r\n", b"k\n", b"PING\r\n", b"K\n", b"PING\r\n"):
        time.sleep(0.3)
        p.stdin.write(line)
        p.stdin.flush()
    time.sleep(0.5)
    out = p.communicate(timeout=10)[0].decode(errors="replace")
    assert out.count("+PONG") == 3 and out.count("KEYUPDATE") == 3, out[-2000:]
    assert served(certs, s)


def test_shutdown_with_handshakes_and_replies_in_flight(tls_kv, certs):
    """SIGTERM while peers hold half-done handshakes and an unread reply:
    a clean exit (LeakSanitizer on the ASan build sees every session freed)."""
    s = tls_kv("no")
    s.client().set("big", b"q" * (4 * 1024 * 1024))
    hello = client_hello(certs)
    held = []
    for i in range(10):
        k = socket.create_connection(("127.0.0.1", s.tls_port))
        k.sendall(hello[: 10 * i])
        held.append(k)
    m = Manual(certs, s.tls_port)
    m.sock.sendall(m.first_flight())
    m.finish()
    m.send(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")
    held.append(m.sock)
    time.sleep(0.3)
    assert s.stop() == 0, s.output()[-3000:]
    s.check_clean()
    for k in held:
        k.close()
