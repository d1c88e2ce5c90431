"""brisk's TLS listener under attack: floods of half-open handshakes,
garbage and truncated records at each stage, stuck and slow peers, a reload
while handshakes are in flight. Each test checks that the server lives,
keeps serving others, leaks no descriptor (/proc/PID/fd), stays bounded in
memory (VmRSS) and does not spin (its CPU time while peers are stuck).
Run on the ASan build, a sanitizer report fails the test at teardown."""
from __future__ import annotations

import os
import signal
import socket
import ssl
import struct
import subprocess
import time

import pytest

import tls_probe
from brisk_testlib import RawConn, req
from test_tls import OPENSSL, CURL, certs, client_ctx, get, start_tls, tls, tls_conn  # noqa: F401
from tls_probe import anon_kib, cpu, fds, rss_kib, wait_fds

pytestmark = pytest.mark.skipif(not OPENSSL or not CURL, reason="needs openssl and curl")

def fd_names(pid) -> list[str]:
    out = []
    for n in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{n}"))
        except OSError:
            pass
    return sorted(out)


def client_hello() -> bytes:
    return tls_probe.client_hello(client_ctx())


class Manual(tls_probe.Manual):
    """tls_probe's hand-driven client, trusting the test certificate."""

    def __init__(self, port):
        super().__init__(client_ctx(), port)


def served(t) -> bool:
    with tls_conn(t.tport) as c:
        return get(c, "/hello.txt").body == b"Hello, brisk!\n"


def test_half_open_handshake_flood_bounded_timed_out_no_spin(start_tls):
    t = start_tls("client_header_timeout = 2s\n")
    pid = t.srv.proc.pid
    assert served(t)
    base_fds, base_rss = fds(pid), rss_kib(pid)
    hello = client_hello()
    socks = []
    for i in range(300):
        s = socket.create_connection(("127.0.0.1", t.tport))
        if i % 3 == 1:
            s.sendall(hello[: len(hello) // 2])  # a ClientHello cut in the middle
        elif i % 3 == 2:
            s.sendall(hello[:3])  # in the record header
        socks.append(s)
    time.sleep(0.3)
    c0 = cpu(pid)
    assert served(t)  # others are served while the flood holds on
    time.sleep(1.0)
    spent = cpu(pid) - c0
    grown = rss_kib(pid) - base_rss
    assert spent < 0.5, f"{spent:.2f} s of CPU while peers hold half-open handshakes"
    # a TLS session with its read buffer is some 20-40 KiB: bound it per peer
    assert grown < 300 * 96, f"RSS grew by {grown} KiB for 300 half-open handshakes"
    # the header timeout closes every one of them
    n = wait_fds(pid, base_fds, timeout=8)
    assert n <= base_fds, f"{n - base_fds} descriptors left after the header timeout"
    for s in socks:
        s.settimeout(2)
        try:
            assert s.recv(100) == b""
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
    assert served(t)


def test_max_connections_bounds_handshakes(start_tls):
    t = start_tls("client_header_timeout = 2s\nmax_connections = 8\n")
    pid = t.srv.proc.pid
    base = fds(pid)
    socks = [socket.create_connection(("127.0.0.1", t.tport)) for _ in range(40)]
    time.sleep(0.5)
    assert fds(pid) <= base + 8 + 1, "handshakes beyond max_connections were accepted"
    for s in socks:
        s.close()
    assert wait_fds(pid, base, timeout=8) <= base
    assert served(t)


def garbage_cases(hello: bytes):
    huge = b"\x17\x03\x03\xff\xff" + os.urandom(65535)  # an over-long record
    return {
        # random bytes, but not by chance a record or SSLv2 header announcing
        # more than is sent (the server would rightly wait for the rest)
        "random": b"\x01" + os.urandom(4095),
        "plain-http": req("GET", "/hello.txt"),
        "resp": b"*1\r\n$4\r\nPING\r\n",
        "hello-then-garbage": hello + os.urandom(2048),
        "hello-twice": hello + hello,
        "eof-mid-record": hello[:-7],
        "huge-record-header": b"\x16\x03\x01\xff\xff" + os.urandom(20000),
        "huge-appdata-first": huge,
        "zero-length-records": b"\x16\x03\x01\x00\x00" * 200,
        "sslv2-hello": b"\x80\x2e\x01\x00\x02" + os.urandom(43),
    }


def test_garbage_and_truncated_records_before_the_handshake(tls):
    pid = tls.srv.proc.pid
    assert served(tls)
    base = fds(pid)
    for name, data in garbage_cases(client_hello()).items():
        with RawConn("127.0.0.1", tls.tport, timeout=5) as raw:
            try:
                raw.send(data)
            except (BrokenPipeError, ConnectionResetError):
                pass
            if name == "eof-mid-record":
                raw.sock.shutdown(socket.SHUT_WR)
            closed, extra, took = raw.wait_closed(timeout=4)
            assert closed, f"{name}: the connection stayed open"
            assert b"HTTP/1.1" not in extra, name
    assert wait_fds(pid, base) <= base
    assert served(tls)


def test_garbage_after_the_handshake_and_mid_request(tls):
    pid = tls.srv.proc.pid
    assert served(tls)
    base = fds(pid)
    for junk in (os.urandom(3000),  # not records at all
                 b"\x17\x03\x03\x00\x40" + os.urandom(0x40),  # a record that fails to decrypt
                 b"\x17\x03\x03\x40\x01",  # a header announcing an over-long record
                 b"\x17\x03\x03\x01\x00" + os.urandom(10)):  # EOF in a record
        m = Manual(tls.tport)
        m.sock.sendall(m.first_flight())
        m.finish()
        m.obj.write(b"GET /hello.txt HTTP/1.1\r\nHo")  # half a request, then junk
        m.sock.sendall(m.out.read())
        m.sock.sendall(junk)
        m.sock.shutdown(socket.SHUT_WR)
        m.sock.settimeout(4)
        try:
            while m.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        m.close()
    assert wait_fds(pid, base) <= base
    assert served(tls)


def test_reset_mid_response_and_mid_handshake(tls):
    pid = tls.srv.proc.pid
    (tls.srv.root / "big.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    assert served(tls)
    with tls_conn(tls.tport) as c:  # the open-file cache may keep big.bin's descriptor
        assert get(c, "/big.bin", method="HEAD").status == 200
    base = fds(pid)
    linger = struct.pack("ii", 1, 0)  # close() sends a RST
    for _ in range(5):
        m = Manual(tls.tport)
        m.sock.sendall(m.first_flight())
        m.sock.recv(1000)  # part of the server's flight
        m.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        m.close()
        c = tls_conn(tls.tport, rcvbuf=4096)
        c.send(req("GET", "/big.bin"))
        c.read_head()
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        c.sock.close()
    assert wait_fds(pid, base) <= base, fd_names(pid)
    assert served(tls)


def test_stuck_peers_cost_no_cpu(start_tls):
    """A peer stopped at each stage: mid ClientHello, after the ClientHello
    (the server's flight unread), after the handshake with half a request,
    and a reader of a big response that does not read."""
    t = start_tls("client_header_timeout = 20s\nsend_timeout = 20s\n")
    pid = t.srv.proc.pid
    (t.srv.root / "big.bin").write_bytes(os.urandom(8 * 1024 * 1024))
    hello = client_hello()
    held = []
    s = socket.create_connection(("127.0.0.1", t.tport))
    s.sendall(hello[:40])
    held.append(s)
    s = socket.create_connection(("127.0.0.1", t.tport))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.sendall(hello)
    held.append(s)
    m = Manual(t.tport)
    m.sock.sendall(m.first_flight())
    m.finish()
    m.obj.write(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n")
    m.sock.sendall(m.out.read())
    held.append(m.sock)
    c = tls_conn(t.tport, rcvbuf=4096)
    c.send(req("GET", "/big.bin"))
    c.read_head()
    held.append(c.sock)
    time.sleep(0.5)
    c0 = cpu(pid)
    time.sleep(2.0)
    spent = cpu(pid) - c0
    assert spent < 0.3, f"{spent:.2f} s of CPU in 2 s with stuck peers: a busy loop"
    assert served(t)
    for s in held:
        s.close()


def test_slow_reader_of_a_big_file_bounded_and_finishes(tls):
    pid = tls.srv.proc.pid
    size = 16 * 1024 * 1024
    data = os.urandom(size)
    (tls.srv.root / "big.bin").write_bytes(data)
    assert served(tls)
    base_rss = anon_kib(pid)  # (the file's pages, mapped to encrypt from, are not a buffer)
    c = tls_conn(tls.tport, rcvbuf=8192, timeout=30)
    c.send(req("GET", "/big.bin"))
    resp_head = c.read_head()
    time.sleep(0.5)
    c0 = cpu(pid)
    time.sleep(1.5)
    assert cpu(pid) - c0 < 0.3, "the server spins while the reader does not read"
    assert anon_kib(pid) - base_rss < 8 * 1024, "the response is buffered in memory"
    assert served(tls)  # others meanwhile
    got = bytearray()
    while len(got) < size:
        chunk = c.sock.recv(1 << 20)
        assert chunk, f"closed after {len(got)} bytes"
        got += chunk
        if len(got) < 2 * 1024 * 1024:
            time.sleep(0.01)  # slow at first
    assert bytes(got[len(got) - size:]) == data or bytes(got) == data, resp_head
    c.sock.close()


@pytest.mark.skipif("asan" in os.environ.get("BRISK_BIN_DIR", ""),
                    reason="ASan's quarantine keeps freed memory resident: RSS says nothing")
def test_idle_tls_connections_are_small(start_tls):
    """SSL_MODE_RELEASE_BUFFERS: an idle keep-alive TLS connection holds no
    record buffers (a 34 KiB pair each without it)."""
    t = start_tls("keepalive_timeout = 30s\n")
    pid = t.srv.proc.pid
    assert served(t)
    conns = []
    for _ in range(20):  # warm up allocator pools
        c = tls_conn(t.tport)
        assert get(c, "/hello.txt").status == 200
        conns.append(c)
    base = rss_kib(pid)
    for _ in range(200):
        c = tls_conn(t.tport)
        assert get(c, "/hello.txt").status == 200
        conns.append(c)
    grown = rss_kib(pid) - base
    assert grown < 200 * 24, f"{grown} KiB for 200 idle TLS connections"
    for c in conns:
        c.sock.close()


def test_sighup_while_handshakes_are_in_flight(tls, certs):
    pid = tls.srv.proc.pid
    assert served(tls)
    base = fds(pid)
    ms = []
    for i in range(6):
        m = Manual(tls.tport)
        flight = m.first_flight()
        m.sock.sendall(flight if i % 2 else flight[:30])
        ms.append((m, flight))
    time.sleep(0.2)
    tls.srv.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    for i, (m, flight) in enumerate(ms):
        if not i % 2:
            m.sock.sendall(flight[30:])
        m.finish()  # the handshake started before the reload completes
        m.obj.write(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        m.sock.sendall(m.out.read())
        got = b""
        while True:
            d = m.sock.recv(65536)
            if not d:
                break
            m.inc.write(d)
            try:
                while piece := m.obj.read(65536):
                    got += piece
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                break
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"Hello, brisk!\n"), got[:200]
        m.close()
    assert served(tls)
    assert wait_fds(pid, base) <= base


def test_out_of_descriptors_no_busy_accept(start_tls):
    t = start_tls("client_header_timeout = 3s\n")
    pid = t.srv.proc.pid
    limit = fds(pid) + 10
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True)
    socks = [socket.create_connection(("127.0.0.1", t.tport)) for _ in range(30)]
    time.sleep(0.5)
    c0 = cpu(pid)
    time.sleep(1.5)
    spent = cpu(pid) - c0
    for s in socks:
        s.close()
    assert spent < 0.3, f"{spent:.2f} s of CPU in 1.5 s out of descriptors: a busy accept loop"
    time.sleep(1.5)  # (accepts resume within a second)
    assert served(t)


def test_key_updates_mid_keep_alive(tls):
    """TLS 1.3 KeyUpdate from the client between requests (K: the server
    must answer with its own, a read that writes), then requests go on."""
    p = subprocess.Popen([OPENSSL, "s_client", "-connect", f"127.0.0.1:{tls.tport}", "-tls1_3"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    get_line = b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n"
    for line in (b"K\n", get_line, b"k\n", get_line, b"K\n", get_line):
        time.sleep(0.3)
        p.stdin.write(line)
        p.stdin.flush()
    time.sleep(0.5)
    out = p.communicate(timeout=10)[0].decode(errors="replace")
    assert out.count("Hello, brisk!") == 3 and out.count("KEYUPDATE") == 3, out[-2000:]
    assert served(tls)


def test_shutdown_with_handshakes_and_a_response_in_flight(start_tls):
    """SIGTERM while peers hold half-done handshakes and an unread response:
    the handshakes close at once, the response gets shutdown_timeout, then
    brisk exits cleanly (LeakSanitizer on the ASan build)."""
    tls = start_tls("shutdown_timeout = 1s\n")
    (tls.srv.root / "big.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    hello = client_hello()
    held = []
    for i in range(10):
        s = socket.create_connection(("127.0.0.1", tls.tport))
        s.sendall(hello[: 10 * i])
        held.append(s)
    c = tls_conn(tls.tport, rcvbuf=4096)
    c.send(req("GET", "/big.bin"))
    c.read_head()
    held.append(c.sock)
    time.sleep(0.3)
    rc = tls.srv.stop()
    assert rc == 0 and not tls.srv.problems(), (rc, tls.srv.problems(), tls.srv.stderr()[-3000:])
    for s in held:
        s.close()
