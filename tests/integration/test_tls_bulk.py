"""Bulk data over TLS with coalesced writes (src/core/tls.c: records
encrypted into a buffer and sent 64 KiB at a time when kernel TLS does not
carry the connection): bytes exact through stalls, resumptions, ranges that
start inside a record, pipelined big and small responses, HTTP/2, clients
that go away mid-transfer, and the close_notify at the end of a
`Connection: close` response. Run on the ASan build too."""
from __future__ import annotations

import hashlib
import os
import socket
import ssl
import struct
import subprocess
import time

import pytest

import tls_probe
from brisk_testlib import req
from test_tls import CURL, OPENSSL, certs, client_ctx, get, start_tls, tls, tls_conn  # noqa: F401
from tls_probe import cpu, fds, wait_fds

pytestmark = pytest.mark.skipif(not OPENSSL or not CURL, reason="needs openssl and curl")

SIZE = 5 * 1024 * 1024 + 4321  # not a multiple of a record or of the 64 KiB read


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture
def big(tls):
    data = os.urandom(SIZE)
    (tls.srv.root / "big.bin").write_bytes(data)
    with tls_conn(tls.tport) as c:  # warm the open-file cache
        assert get(c, "/big.bin", method="HEAD").status == 200
    return data


def served(t) -> bool:
    with tls_conn(t.tport) as c:
        return get(c, "/hello.txt").body == b"Hello, brisk!\n"


def test_stalled_reader_resumes_bytes_exact_then_keep_alive(tls, big):
    """Two big responses and a small one pipelined; the reader takes a
    little, stalls (the server holds ciphertext it could not send and must
    not spin), then reads the rest: every body byte-exact, in order."""
    pid = tls.srv.proc.pid
    c = tls_conn(tls.tport, rcvbuf=16384, timeout=30)
    c.send(req("GET", "/big.bin") + req("GET", "/hello.txt") + req("GET", "/big.bin"))
    first = c.sock.recv(100000)
    assert first.startswith(b"HTTP/1.1 200")
    c.buf = bytearray(first)
    time.sleep(0.5)
    c0 = cpu(pid)
    time.sleep(1.0)
    assert cpu(pid) - c0 < 0.3, "the server spins while the reader stalls"
    assert served(tls)  # others meanwhile
    for want in (big, b"Hello, brisk!\n", big):
        r = c.read_response()
        assert r.status == 200 and len(r.body) == len(want)
        assert sha(r.body) == sha(want)
    assert get(c, "/hello.txt").body == b"Hello, brisk!\n"
    c.sock.close()


@pytest.mark.parametrize("first,last", [(12345, 3 * 1024 * 1024 + 7), (65535, 65537),
                                        (SIZE - 70000, SIZE - 1), (1, 16385)])
def test_ranges_that_start_inside_a_record(tls, big, first, last):
    with tls_conn(tls.tport, rcvbuf=32768, timeout=30) as c:
        r = get(c, "/big.bin", headers=[("Range", f"bytes={first}-{last}")])
        assert r.status == 206
        assert sha(r.body) == sha(big[first:last + 1])
        assert get(c, "/hello.txt").body == b"Hello, brisk!\n"


def test_curl_many_big_files_on_one_connection(tls, big, tmp_path):
    outs = [tmp_path / f"o{i}" for i in range(4)]
    args = []
    for o in outs:
        args += ["-o", str(o), tls.url("/big.bin")]
    r = subprocess.run([CURL, "-sS", "-k", "--http1.1", *args], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for o in outs:
        assert sha(o.read_bytes()) == sha(big)


def test_http2_big_bodies_over_tls(tls, big, tmp_path):
    """HTTP/2 (ALPN h2) shares the transport: two big streams at once and a
    small one, byte-exact."""
    outs = [tmp_path / f"h{i}" for i in range(3)]
    r = subprocess.run([CURL, "-sS", "-k", "--http2", "-Z", "--parallel-max", "3",
                        "-w", "%{http_version} ",
                        "-o", str(outs[0]), tls.url("/big.bin"),
                        "-o", str(outs[1]), tls.url("/big.bin"),
                        "-o", str(outs[2]), tls.url("/hello.txt")],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [b"2", b"2", b"2"], r.stdout
    assert sha(outs[0].read_bytes()) == sha(big)
    assert sha(outs[1].read_bytes()) == sha(big)
    assert outs[2].read_bytes() == b"Hello, brisk!\n"


def test_http2_big_body_to_a_slow_reader(tls, big):
    """h2 over TLS through a small receive window of the socket: the reader
    stalls, then takes the whole body; exact bytes."""
    h2 = pytest.importorskip("h2.connection")
    import h2.config
    import h2.events
    import h2.settings
    ctx = client_ctx(alpn=("h2",))
    s = socket.create_connection(("127.0.0.1", tls.tport), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    s = ctx.wrap_socket(s, server_hostname="localhost")
    assert s.selected_alpn_protocol() == "h2"
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.increment_flow_control_window(64 * 1024 * 1024)
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16 * 1024 * 1024})
    conn.send_headers(1, [(":method", "GET"), (":path", "/big.bin"), (":scheme", "https"),
                          (":authority", "localhost")], end_stream=True)
    s.sendall(conn.data_to_send())
    time.sleep(1.0)  # stall with the server's output pending
    body, done = bytearray(), False
    while not done:
        d = s.recv(1 << 20)
        assert d, f"closed after {len(body)} body bytes"
        for ev in conn.receive_data(d):
            if isinstance(ev, h2.events.DataReceived) and ev.stream_id == 1:
                body += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, 1)
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == 1:
                done = True
            elif isinstance(ev, h2.events.StreamReset):
                pytest.fail(f"stream reset: {ev}")
        if out := conn.data_to_send():
            s.sendall(out)
    assert sha(bytes(body)) == sha(big)
    s.close()
    assert served(tls)


def test_clients_gone_mid_transfer_no_leak(tls, big):
    """Closed with a FIN or a RST while the server holds unsent ciphertext
    (a stalled reader), or right after the first bytes: the server frees
    everything and serves others."""
    pid = tls.srv.proc.pid
    assert served(tls)
    base = fds(pid)
    linger = struct.pack("ii", 1, 0)
    for i in range(6):
        c = tls_conn(tls.tport, rcvbuf=8192, timeout=10)
        c.send(req("GET", "/big.bin") + req("GET", "/big.bin"))
        c.read_head()
        if i % 3 == 1:
            time.sleep(0.3)  # the server is blocked on a full socket
        if i % 2:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        if i % 3 == 2:
            c.sock.recv(200000)  # part of the body, then go
        c.sock.close()
    assert wait_fds(pid, base) <= base
    assert served(tls)


class SlowManual(tls_probe.Manual):
    """tls_probe's hand-driven client with an 8 KiB receive buffer, set
    before connecting (set after, the window collapses and the transfer
    crawls at 16 KiB per delayed ACK)."""

    def __init__(self, port):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = client_ctx().wrap_bio(self.inc, self.out, server_hostname="localhost")


def test_connection_close_ends_with_close_notify(tls, big):
    """`Connection: close` on a big file to a slow reader: the last records
    and the close_notify after them arrive, then the FIN (a clean TLS end,
    not a truncation)."""
    m = SlowManual(tls.tport)
    m.sock.sendall(m.first_flight())
    m.finish()
    m.obj.write(req("GET", "/big.bin", headers=[("Connection", "close")]))
    m.sock.sendall(m.out.read())
    time.sleep(0.5)
    got, clean = bytearray(), False
    m.sock.settimeout(10)
    while True:
        d = m.sock.recv(1 << 20)
        if not d:
            break
        m.inc.write(d)
        try:
            while piece := m.obj.read(1 << 20):
                got += piece
            clean = True  # b"": the close_notify (Python's SSLObject)
            break
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            clean = True
            break
    m.close()
    head, body = bytes(got).split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and b"Connection: close" in head
    assert sha(body) == sha(big)
    assert clean, "no close_notify after the response"


SHRINK = 32 * 1024 * 1024
KEEP = 16 * 1024 * 1024 + 1000  # ends inside a page: the rest of it reads as zeros


@pytest.mark.parametrize("ranged", [False, True])
def test_file_shrinking_mid_transfer_cuts_the_response_without_zeros(tls, ranged):
    """A big file truncated in place while a slow reader downloads it over
    TLS (brisk encrypts it from a mapping of the file, where the lost pages
    read as zeros): the response ends short of its length, every byte that
    arrived is the file's own, the server serves on, and once the open-file
    cache looks again the new file is served whole. Ranged: the range ends
    just past the new end, on the same page, where no page is lost (no
    fault) and only the file's size tells."""
    data = os.urandom(SHRINK)
    path = tls.srv.root / "shrink.bin"
    path.write_bytes(data)
    with tls_conn(tls.tport) as c:  # the open-file cache has it (and maps it)
        assert get(c, "/shrink.bin", method="HEAD").status == 200
    last = KEEP + 2000 if ranged else SHRINK - 1
    c = tls_conn(tls.tport, rcvbuf=16384, timeout=30)
    c.send(req("GET", "/shrink.bin", headers=[("Range", f"bytes=0-{last}")] if ranged else None))
    r = c.read_head()
    assert r.status == (206 if ranged else 200)
    assert int(r.header("content-length")) == last + 1
    got = bytearray(c.buf)
    while len(got) < 200000:
        got += c.sock.recv(65536)
    os.truncate(path, KEEP)
    while len(got) <= last:
        try:
            d = c.sock.recv(1 << 20)
        except (ssl.SSLError, ConnectionResetError):
            break  # no close_notify: a cut response
        if not d:
            break
        got += d
    c.sock.close()
    assert 200000 <= len(got) <= last, "the response must end short of its length"
    assert got == data[:len(got)], "bytes that are not the file's were sent"
    assert served(tls)
    time.sleep(1.2)  # open_file_cache_valid (1 s): the cache sees the new file
    with tls_conn(tls.tport, timeout=30) as c:
        r = get(c, "/shrink.bin")
        assert r.status == 200 and len(r.body) == KEEP
        assert sha(r.body) == sha(data[:KEEP])
