"""Hostile RESP clients against brisk-kv: absurd and malformed lengths, a
100 MB inline line, lengths announced and never sent, and clients that
pipeline without ever reading. Each must end in a protocol error (and a
closed connection) or a disconnect at a configured limit, never in a crash
or in memory that grows with what the client claims.

The server's VmRSS is sampled throughout; run with -s to see the figures.
"""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from kvlib import KV_BIN, raw


def rss_kb(pid: int) -> int:
    """VmRSS of a process, in KiB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def is_sanitized(binary: str) -> bool:
    try:
        with open(binary, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


SANITIZED = is_sanitized(KV_BIN)
# How far the server's RSS may rise above its idle figure in one test.
RSS_SLACK_MB = 160 if SANITIZED else 64

MB = 1024 * 1024


def rss_mb(kv) -> float:
    return rss_kb(kv.proc.pid) / 1024


def assert_alive(kv):
    c = kv.client(socket_timeout=5)
    try:
        assert c.ping(), kv.output()[-2000:]
    finally:
        c.close()


PROTO = b"-ERR Protocol error: "
BAD_LENGTHS = [
    # absurd counts and lengths
    (b"*2147483647\r\n", b"invalid multibulk length"),
    (b"*2147483648\r\n", b"invalid multibulk length"),
    (b"*9223372036854775807\r\n", b"invalid multibulk length"),
    (b"*9223372036854775808\r\n", b"invalid multibulk length"),
    (b"*99999999999999999999999\r\n", b"invalid multibulk length"),
    (b"*1\r\n$2147483647\r\n", b"invalid bulk length"),
    (b"*1\r\n$2147483648\r\n", b"invalid bulk length"),
    (b"*1\r\n$9223372036854775807\r\n", b"invalid bulk length"),
    (b"*1\r\n$18446744073709551616\r\n", b"invalid bulk length"),
    (b"*1\r\n$536870913\r\n", b"invalid bulk length"),  # proto-max-bulk-len + 1
    # negative bulk lengths
    (b"*1\r\n$-1\r\n", b"invalid bulk length"),
    (b"*1\r\n$-2147483648\r\n", b"invalid bulk length"),
    (b"*2\r\n$3\r\nGET\r\n$-9223372036854775808\r\n", b"invalid bulk length"),
    # non-numeric lengths
    (b"*abc\r\n", b"invalid multibulk length"),
    (b"*1x\r\n", b"invalid multibulk length"),
    (b"* 1\r\n", b"invalid multibulk length"),
    (b"*+1\r\n", b"invalid multibulk length"),
    (b"*0x10\r\n", b"invalid multibulk length"),
    (b"*1.5\r\n", b"invalid multibulk length"),
    (b"*01\r\n", b"invalid multibulk length"),
    (b"*\r\n", b"invalid multibulk length"),
    (b"*1\x00\r\n", b"invalid multibulk length"),
    (b"*1\r\n$abc\r\n", b"invalid bulk length"),
    (b"*1\r\n$4x\r\nPING\r\n", b"invalid bulk length"),
    (b"*1\r\n$ 4\r\nPING\r\n", b"invalid bulk length"),
    (b"*1\r\n$+4\r\nPING\r\n", b"invalid bulk length"),
    (b"*1\r\n$04\r\nPING\r\n", b"invalid bulk length"),
    (b"*1\r\n$4.0\r\nPING\r\n", b"invalid bulk length"),
    (b"*1\r\n$\r\n", b"invalid bulk length"),
    (b"*1\r\n$0x4\r\nPING\r\n", b"invalid bulk length"),
]


@pytest.mark.parametrize("data,msg", BAD_LENGTHS, ids=[repr(d)[2:40] for d, _ in BAD_LENGTHS])
def test_bad_lengths_are_protocol_errors(kv, data, msg):
    rss0 = rss_mb(kv)
    # A command behind the bad one must never run.
    out = raw(kv.port, data + b"*3\r\n$3\r\nSET\r\n$8\r\nsmuggled\r\n$1\r\n1\r\n",
              read_until_close=True)
    assert out == PROTO + msg + b"\r\n"
    c = kv.client()
    assert c.exists("smuggled") == 0
    c.close()
    assert rss_mb(kv) - rss0 < RSS_SLACK_MB


@pytest.mark.parametrize("count", [b"-1", b"-5", b"-2147483648", b"0"])
def test_negative_or_zero_count_is_an_empty_command(kv, count):
    # Redis's rule: "*-1" and "*0" are skipped, the connection goes on.
    assert raw(kv.port, b"*" + count + b"\r\nPING\r\n") == b"+PONG\r\n"


def stream_until_closed(kv, chunk: bytes, total: int, first: bytes = b""):
    """Sends `first`, then `chunk` until `total` bytes went out or the
    server stopped taking them. Returns (bytes sent, what the server
    answered, peak server RSS in MB)."""
    s = socket.create_connection(("127.0.0.1", kv.port), timeout=10)
    s.settimeout(10)
    sent = 0
    peak = rss_mb(kv)
    answer = b""
    try:
        s.sendall(first)
        sent += len(first)
        while sent < total:
            try:
                s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            except socket.timeout:
                break  # the server stopped reading without closing
            sent += len(chunk)
            if sent % (8 * MB) < len(chunk):
                peak = max(peak, rss_mb(kv))
        s.settimeout(5)
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                answer += b
        except (ConnectionResetError, socket.timeout):
            pass
    finally:
        s.close()
    return sent, answer, max(peak, rss_mb(kv))


@pytest.mark.parametrize("first,msg", [
    (b"", b"too big inline request"),
    (b"*", b"too big mbulk count string"),
    (b"*1\r\n$", b"too big bulk count string"),
], ids=["inline", "multibulk-count", "bulk-count"])
def test_100mb_line_is_refused_early(kv, first, msg):
    """A 100 MB line without an end, streamed in 1 MB pieces: the server
    answers an error after 64 KiB and closes, long before 100 MB, and its
    memory does not follow the line."""
    rss0 = rss_mb(kv)
    t0 = time.monotonic()
    sent, answer, peak = stream_until_closed(kv, b"1" * MB, 100 * MB, first)
    dt = time.monotonic() - t0
    print(f"\n100 MB line ({msg.decode()}): server closed after {sent / MB:.1f} MB sent "
          f"in {dt:.2f}s, answer {answer[:60]!r}; RSS {rss0:.1f} MB -> peak {peak:.1f} MB")
    assert sent < 100 * MB, "the server read 100 MB of one line"
    if answer:  # a reset may beat the reply; the reply is checked when it came
        assert answer == PROTO + msg + b"\r\n", answer[:200]
    assert peak - rss0 < RSS_SLACK_MB
    assert_alive(kv)
    assert "too big" in kv.output()


def test_announced_512mb_bulk_then_silence_does_not_reserve_it(kv):
    """"$536870912" (exactly proto-max-bulk-len) is allowed; a client that
    announces it, sends 8 MB and stops must not make the server hold
    anything near 512 MB, and leaving frees what it took."""
    rss0 = rss_mb(kv)
    s = socket.create_connection(("127.0.0.1", kv.port), timeout=10)
    try:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\n")
        for _ in range(8):
            s.sendall(b"v" * MB)
        time.sleep(0.3)
        during = rss_mb(kv)
    finally:
        s.close()
    time.sleep(0.3)
    after = rss_mb(kv)
    print(f"\nannounced 512 MB bulk: RSS {rss0:.1f} MB -> {during:.1f} MB with 8 MB sent "
          f"-> {after:.1f} MB after the client left")
    assert during - rss0 < RSS_SLACK_MB + 8
    assert_alive(kv)


def test_lowered_proto_max_bulk_len_applies_to_new_commands(kv):
    c = kv.client()
    assert c.config_set("proto-max-bulk-len", "1mb")
    out = raw(kv.port, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n", read_until_close=True)
    assert out == PROTO + b"invalid bulk length\r\n"
    big = b"x" * MB  # exactly the limit: fine
    assert c.set("k", big) and c.strlen("k") == MB


def test_unauthenticated_client_gets_small_limits(kv_factory):
    """With requirepass, a client that has not authenticated may not
    announce big commands (Redis's protection against memory abuse)."""
    kv = kv_factory("--requirepass", "s3cret")
    out = raw(kv.port, b"*100\r\n", read_until_close=True)
    assert out.startswith(PROTO), out
    out = raw(kv.port, b"*2\r\n$4\r\nAUTH\r\n$100000\r\n", read_until_close=True)
    assert out.startswith(PROTO), out
    assert raw(kv.port, b"AUTH s3cret\r\nPING\r\n") == b"+OK\r\n+PONG\r\n"


def pipeline_without_reading(kv, request: bytes, seconds: float, rcvbuf=4096):
    """Pipelines `request` for up to `seconds` on a socket that never reads.
    Returns (closed by the server, bytes sent, peak RSS in MB)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", kv.port))
    s.settimeout(0.5)
    sent, peak, closed = 0, rss_mb(kv), False
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            try:
                s.sendall(request)
                sent += len(request)
            except socket.timeout:
                pass  # the server is not reading right now: keep trying
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            peak = max(peak, rss_mb(kv))
    finally:
        s.close()
    return closed, sent, peak


def wait_clients(c, n, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(c.client_list()) == n:
            return True
        time.sleep(0.05)
    return False


def test_pipelining_client_that_never_reads_hits_the_hard_limit(kv):
    """client-output-buffer-limit set with CONFIG SET: a client that
    pipelines GETs of a 10 KB value and never reads is disconnected once
    its pending replies pass 1 MB, and the server's memory stays flat."""
    c = kv.client()
    assert c.config_set("client-output-buffer-limit", "normal 1mb 0 0")
    assert c.config_get("client-output-buffer-limit")["client-output-buffer-limit"] \
        .startswith("normal 1048576 0 0")
    c.set("big", "x" * 10000)
    rss0 = rss_mb(kv)
    req = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 100  # 1 MB of replies per send
    closed, sent, peak = pipeline_without_reading(kv, req, seconds=10)
    print(f"\nnon-reading client: closed={closed} after {sent / 1024:.0f} KB of requests; "
          f"RSS {rss0:.1f} MB -> peak {peak:.1f} MB")
    assert closed, "the server never closed a client that does not read"
    assert wait_clients(c, 1)
    assert peak - rss0 < RSS_SLACK_MB
    assert "over the hard limit" in kv.output()
    assert c.ping()


def test_output_limit_holds_within_one_read_batch(kv):
    """The hard limit bounds what one write of pipelined requests can make
    the server buffer: 400 GETs of a 1 MB value in a single send must not
    cost 400 MB when the limit is 1 MB."""
    c = kv.client()
    assert c.config_set("client-output-buffer-limit", "normal 1mb 0 0")
    c.set("big", b"x" * MB)
    rss0 = rss_mb(kv)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", kv.port))
    try:
        s.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 400)
        peak = rss0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            peak = max(peak, rss_mb(kv))
            time.sleep(0.01)
    finally:
        s.close()
    assert wait_clients(c, 1)
    print(f"\none batch of 400 x GET 1 MB: RSS {rss0:.1f} MB -> peak {peak:.1f} MB")
    assert peak - rss0 < 64, f"{peak - rss0:.0f} MB buffered past a 1 MB hard limit"


def test_pipelined_pings_never_read_hit_the_limit(kv):
    """Tiny replies add up too: "PING" pipelined without reading."""
    c = kv.client()
    assert c.config_set("client-output-buffer-limit", "normal 256kb 0 0")
    rss0 = rss_mb(kv)
    closed, sent, peak = pipeline_without_reading(kv, b"PING\r\n" * 20000, seconds=10)
    print(f"\npipelined PINGs: closed={closed} after {sent / MB:.1f} MB of requests; "
          f"RSS {rss0:.1f} MB -> peak {peak:.1f} MB")
    assert closed
    assert wait_clients(c, 1)
    assert peak - rss0 < RSS_SLACK_MB
    assert c.ping()


def test_soft_limit_disconnects_after_its_grace_period(kv):
    """Over the soft limit for longer than its seconds: disconnected, though
    the hard limit is never reached."""
    c = kv.client()
    assert c.config_set("client-output-buffer-limit", "normal 0 256kb 1")
    c.set("big", "x" * 100000)
    t0 = time.monotonic()
    closed, sent, peak = pipeline_without_reading(
        kv, b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 4, seconds=8)
    dt = time.monotonic() - t0
    assert closed, "still connected after 8 s over the soft limit"
    assert dt >= 0.9, f"closed after {dt:.2f}s, before the soft limit's 1 s"
    assert wait_clients(c, 1)
    assert "soft limit" in kv.output()


def test_memory_bounded_after_the_whole_hostile_sequence(kv):
    """Everything above once more on one server: its RSS returns close to
    where it started."""
    rss0 = rss_mb(kv)
    for data, _ in BAD_LENGTHS:
        raw(kv.port, data, read_until_close=True)
    stream_until_closed(kv, b"a" * MB, 100 * MB)
    c = kv.client()
    c.config_set("client-output-buffer-limit", "normal 1mb 0 0")
    c.set("big", "x" * 10000)
    pipeline_without_reading(kv, b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 100, seconds=5)
    assert wait_clients(c, 1)
    time.sleep(0.3)
    rss1 = rss_mb(kv)
    print(f"\nhostile sequence: RSS {rss0:.1f} MB before, {rss1:.1f} MB after")
    assert rss1 - rss0 < RSS_SLACK_MB
    assert_alive(kv)
