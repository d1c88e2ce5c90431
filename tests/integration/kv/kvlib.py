"""Helpers for the brisk-kv black-box tests (used by conftest.py).

`kv_server` starts the real binary (BRISK_BIN_DIR/brisk-kv, default
/work/main/build/bin) on a free loopback port in a temporary directory,
waits until it answers PING, and stops it at teardown with SIGTERM (SIGKILL
after 5 s). A test fails if the server exits non-zero on its own, must be
killed, or prints a sanitizer report.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

BIN_DIR = Path(os.environ.get("BRISK_BIN_DIR", "/work/main/build/bin"))
KV_BIN = str(BIN_DIR / "brisk-kv")
REDIS_SERVER = shutil.which("redis-server")
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def no_sync_delay(conf, args) -> list[str]:
    """A master starts a full sync at once (repl-diskless-sync-delay 0; Redis
    and brisk-kv wait 5 s by default to gather replicas): every test that
    makes a replica would otherwise wait 5 s per sync. Tests of the delay set
    it themselves; a config file keeps its own."""
    return [] if conf or "--repl-diskless-sync-delay" in args else ["--repl-diskless-sync-delay", "0"]


class KvServer:
    def __init__(self, workdir: Path, args: list[str]):
        self.dir = Path(workdir)
        self.args = list(args)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / f"brisk-kv-{self.port}.log"
        self.expect_exit = False

    def start(self, wait: bool = True) -> "KvServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        # A config file (a first argument not starting with --) goes first.
        conf = self.args[:1] if self.args and not self.args[0].startswith("--") else []
        # No save points unless a test asks (the reference Redis runs with
        # --save '' too); a config file's own save lines stay in charge.
        nosave = [] if conf or "--save" in self.args else ["--save", ""]
        cmd = [KV_BIN, *conf, "--port", str(self.port), "--dir", str(self.dir), *nosave,
               *no_sync_delay(conf, self.args), *self.args[len(conf):]]
        self.log = open(self.log_path, "ab")
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 10.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"brisk-kv exited with {self.proc.returncode}: {self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    data = s.recv(64)
                    if data.startswith((b"+PONG", b"-NOAUTH")):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("brisk-kv did not start: " + self.output())

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def client(self, **kw) -> redis.Redis:
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(5)
        self.log.close()

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            rc = self.proc.returncode if self.proc else 0
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:  # (a master waits up to shutdown-timeout, 10 s, for lagging replicas)
                rc = self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError("brisk-kv did not stop on SIGTERM")
        if not self.log.closed:
            self.log.close()
        return rc

    def check_clean(self):
        out = self.output()
        for m in SANITIZER_MARKERS:
            assert m not in out, out[-4000:]

    def restart(self):
        rc = self.stop()
        assert rc == 0, self.output()[-2000:]
        self.start()


def start_redis(workdir: Path, *args: str, plain: bool = True, bind: str = "127.0.0.1",
                **client_kw) -> tuple[subprocess.Popen, redis.Redis]:
    """A real redis-server 7 on a free port, working in `workdir`, once it
    answers PING: (process, redis-py client; keyword arguments go to the
    client). `plain` adds the reference's `--save '' --appendonly no`; pass
    plain=False for Redis's own defaults. Skips the test when redis-server is
    not installed. Stop it with stop_redis()."""
    import pytest
    if not REDIS_SERVER:
        pytest.skip("redis-server is not installed (scripts/deps.sh test installs it)")
    port = free_port()
    base = [REDIS_SERVER, "--port", str(port), "--bind", bind, "--dir", str(workdir)]
    if plain:
        base += ["--save", "", "--appendonly", "no", *no_sync_delay([], args)]
    proc = subprocess.Popen(base + list(args), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    client_kw.setdefault("socket_timeout", 10)
    c = redis.Redis(host="127.0.0.1", port=port, **client_kw)
    deadline = time.time() + 10
    while True:
        try:
            c.ping()
            return proc, c
        except redis.ConnectionError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError(f"redis-server {' '.join(args)} did not start")
            time.sleep(0.05)


def stop_redis(proc: subprocess.Popen, client: redis.Redis | None = None):
    if client is not None:
        client.close()
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def both(kv_factory, tmp_path: Path, *args: str):
    """brisk-kv (from the kv_factory fixture) and a real redis-server, both
    with DEBUG on and the same arguments, in tmp_path/kv and tmp_path/ref:
    (kv, its client, the redis-server process, its client); clients decode
    replies. stop_redis(proc, ref) stops the second."""
    kv = kv_factory("--enable-debug-command", "yes", *args, workdir=tmp_path / "kv")
    (tmp_path / "ref").mkdir()
    proc, ref = start_redis(tmp_path / "ref", "--enable-debug-command", "yes", *args,
                            decode_responses=True)
    return kv, kv.client(decode_responses=True), proc, ref


def on_both(kv_factory, tmp_path: Path, fn, *args: str):
    """fn(client, port) against brisk-kv, then against a real redis-server
    started with the same arguments (both()): both results."""
    kv, r, proc, ref = both(kv_factory, tmp_path, *args)
    try:
        return fn(r, kv.port), fn(ref, ref.connection_pool.connection_kwargs["port"])
    finally:
        stop_redis(proc, ref)


def call(c, *args):
    """The reply to one command, or "ERR: " + the error's message."""
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return "ERR: " + str(e)


def run_both(kv_factory, tmp_path: Path, script, *args: str):
    """The replies of brisk-kv and of Redis (both()) to the commands of
    script (each a tuple), in order."""
    return on_both(kv_factory, tmp_path, lambda c, _port: [call(c, *cmd) for cmd in script],
                   *args)


def raw(port: int, data: bytes, read_until_close: bool = False, timeout: float = 5.0) -> bytes:
    """Sends raw bytes and returns what the server answers (until it closes
    the connection, or until nothing more arrives for a short while)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        s.settimeout(timeout if read_until_close else 0.3)
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
