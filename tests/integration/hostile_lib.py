"""Helpers for the hostile-client tests (test_hostile.py and
kv/test_kv_hostile.py): process memory, file-descriptor limits, and many
non-blocking loopback connections driven from one thread.

Only stdlib; every connection goes to a loopback address.
"""
from __future__ import annotations

import errno
import os
import resource
import selectors
import socket
import time
from pathlib import Path


IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


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
    """True for an AddressSanitizer build (memory figures are larger)."""
    try:
        with open(binary, "rb") as f:
            return b"AddressSanitizer" in f.read()
    except OSError:
        return False


def raise_nofile(want: int) -> int:
    """Raises this process's RLIMIT_NOFILE soft limit towards `want` (up to
    the hard limit; as root, the hard limit too, up to fs.nr_open) and
    returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want and os.geteuid() == 0:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(want, hard)), want))
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        except (ValueError, OSError):
            pass
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Swarm:
    """Many non-blocking client connections to one loopback address,
    driven from the calling thread with a selector."""

    def __init__(self, host: str, port: int, sources: list[str] | None = None):
        """sources: local addresses (127.0.0.x) to spread the connections
        over, round robin, each with its own ephemeral port range."""
        self.addr = (host, port)
        self.sources = sources or []
        self.socks: list[socket.socket | None] = []
        self.closed_at: dict[int, float] = {}  # index -> monotonic time of EOF/reset
        self.inbuf: dict[int, bytes] = {}

    def open(self, n: int, first: bytes = b"", batch: int = 200, timeout: float = 10.0):
        """Opens n connections (in batches, so the listen queue never
        overflows) and sends `first` on each as soon as it connects."""
        deadline = time.monotonic() + timeout
        for start in range(0, n, batch):
            pending = []
            for _ in range(min(batch, n - start)):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                if self.sources:
                    # The port is picked at connect, per 4-tuple (not per
                    # bound address): IP_BIND_ADDRESS_NO_PORT.
                    s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
                    s.bind((self.sources[(len(self.socks) + len(pending)) % len(self.sources)], 0))
                s.setblocking(False)
                rc = s.connect_ex(self.addr)
                if rc not in (0, errno.EINPROGRESS):
                    s.close()
                    raise OSError(rc, os.strerror(rc))
                pending.append(s)
            sel = selectors.DefaultSelector()
            for s in pending:
                sel.register(s, selectors.EVENT_WRITE)
            left = len(pending)
            while left:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {len(self.socks)} of {n} connections made")
                for key, _ in sel.select(timeout=1.0):
                    s = key.fileobj
                    sel.unregister(s)
                    left -= 1
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, os.strerror(err))
                    if first:
                        s.send(first)
                    self.socks.append(s)
            sel.close()

    def open_count(self) -> int:
        return sum(1 for s in self.socks if s is not None)

    def send_each(self, data: bytes):
        """Sends data on every open connection; a failed send marks it closed."""
        now = time.monotonic()
        for i, s in enumerate(self.socks):
            if s is None:
                continue
            try:
                s.send(data)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._mark_closed(i, now)

    def poll_closed(self, wait: float = 0.0) -> int:
        """Reads whatever arrived; connections at EOF or reset are closed and
        counted. Returns the number still open."""
        sel = selectors.DefaultSelector()
        for i, s in enumerate(self.socks):
            if s is not None:
                sel.register(s, selectors.EVENT_READ, i)
        try:
            events = sel.select(timeout=wait) if self.open_count() else []
        finally:
            sel.close()
        now = time.monotonic()
        for key, _ in events:
            i = key.data
            s = self.socks[i]
            if s is None:
                continue
            try:
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if data:
                self.inbuf[i] = self.inbuf.get(i, b"") + data
            else:
                self._mark_closed(i, now)
        return self.open_count()

    def _mark_closed(self, i: int, now: float):
        s = self.socks[i]
        if s is not None:
            s.close()
            self.socks[i] = None
            self.closed_at[i] = now

    def close(self):
        for i, s in enumerate(self.socks):
            if s is not None:
                s.close()
                self.socks[i] = None


def exchange_all(socks: list[socket.socket], request: bytes, expect_end: bytes,
                 timeout: float = 30.0) -> list[bytes]:
    """Sends `request` on every (non-blocking) socket and reads until each
    reply ends with `expect_end` (e.g. the known body). Returns the replies;
    raises AssertionError naming the connections that got no full answer
    (closed or timed out)."""
    replies = [b""] * len(socks)
    done = [False] * len(socks)
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        s.setblocking(False)
        s.send(request)
        sel.register(s, selectors.EVENT_READ, i)
    left = len(socks)
    closed = []
    deadline = time.monotonic() + timeout
    try:
        while left and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1.0):
                i = key.data
                try:
                    data = key.fileobj.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    closed.append(i)
                    sel.unregister(key.fileobj)
                    left -= 1
                    continue
                replies[i] += data
                if replies[i].endswith(expect_end):
                    done[i] = True
                    sel.unregister(key.fileobj)
                    left -= 1
    finally:
        sel.close()
    missing = [i for i, d in enumerate(done) if not d]
    assert not missing, (f"{len(missing)} of {len(socks)} connections got no full reply "
                         f"({len(closed)} closed by the server); first: {missing[:10]}")
    return replies
