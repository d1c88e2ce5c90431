"""Fixtures for the brisk black-box integration tests.

The `start_brisk` fixture runs the real binary (env BRISK_BIN, default
<repo>/build/bin/brisk) on a free loopback port with a generated document
root, waits until it accepts connections, and at teardown stops it with
SIGTERM (SIGKILL after 5 s). A test fails if the server exits non-zero, has
to be killed, or prints a sanitizer report to stderr.

The `www` fixture (and start_brisk by default) fills tmp_path/www with the
standard tree from brisk_testlib.populate_www; helpers and constants live in
brisk_testlib so test modules never import conftest.
"""
from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from brisk_testlib import RawConn, free_port, http_get, populate_www

REPO = Path(__file__).resolve().parents[2]
BRISK_BIN = os.environ.get("BRISK_BIN", str(REPO / "build" / "bin" / "brisk"))
START_TIMEOUT = float(os.environ.get("BRISK_START_TIMEOUT", "5"))
STOP_TIMEOUT = 5.0
DEFAULT_TEST_TIMEOUT = 30

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:",
                     "ERROR: LeakSanitizer")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TEST_TIMEOUT))


# ---------------------------------------------------------------- server
class BriskServer:
    def __init__(self, cmd, root, listens, tmp_path, n, env=None):
        self.cmd = cmd
        self.root = Path(root)
        self.listens = listens
        self.host, self.port = listens[0]
        self.tmp_path = tmp_path
        self.stderr_path = tmp_path / f"brisk{n}.stderr"
        self.stdout_path = tmp_path / f"brisk{n}.stdout"
        self.env = env
        self.proc = None
        self.returncode = None
        self.killed = False

    # lifecycle
    def start(self):
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=self.env)
        deadline = time.monotonic() + START_TIMEOUT
        pending = list(self.listens)
        while pending:
            if self.proc.poll() is not None:
                pytest.fail(f"brisk exited during startup with code "
                            f"{self.proc.returncode}; cmd={self.cmd}\n"
                            f"stderr:\n{self.stderr()}")
            host, port = pending[0]
            try:
                with socket.create_connection((host, port), timeout=0.5):
                    pending.pop(0)
                    continue
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"brisk did not accept connections on {host}:{port} "
                            f"within {START_TIMEOUT}s; cmd={self.cmd}\n"
                            f"stderr:\n{self.stderr()}")
            time.sleep(0.02)
        return self

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Sends sig (if still running) and waits; SIGKILLs the process group
        after `timeout`. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.returncode = self.proc.returncode
        return self.returncode

    def kill(self):
        self.killed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def problems(self):
        out = []
        err = self.stderr()
        for marker in SANITIZER_MARKERS:
            if marker in err:
                out.append(f"sanitizer report ({marker!r}) in stderr")
        if self.killed:
            out.append(f"brisk did not exit within {STOP_TIMEOUT}s of SIGTERM; killed")
        elif self.proc is not None and self.proc.returncode not in (0, None):
            out.append(f"brisk exited with code {self.proc.returncode}")
        return out

    # clients
    def url(self, path="/"):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def connect(self, timeout=5.0, rcvbuf=None, host=None, port=None) -> RawConn:
        return RawConn(host or self.host, port or self.port, timeout=timeout,
                       rcvbuf=rcvbuf)

    def raw(self, data: bytes, method="GET", timeout=5.0):
        """Sends data on a new connection and returns (first response, conn)."""
        c = self.connect(timeout=timeout)
        c.send(data)
        return c.read_response(method=method), c

    def get(self, path, method="GET", headers=None, body=None):
        """(status, headers, body) via http.client on a new connection."""
        return http_get(self.host, self.port, path, method=method,
                        headers=headers, body=body)


@pytest.fixture(scope="session")
def brisk_bin():
    if not os.access(BRISK_BIN, os.X_OK):
        pytest.fail(f"brisk binary not found at {BRISK_BIN} "
                    f"(run `make` or set BRISK_BIN)", pytrace=False)
    return BRISK_BIN


@pytest.fixture
def www(tmp_path):
    return populate_www(tmp_path / "www")


@pytest.fixture
def start_brisk(tmp_path, brisk_bin):
    """Factory: start_brisk(config=None, args=(), root=None, listens=None,
    workers="1", access_log="off", cli_defaults=None).

    config: INI text written to tmp_path/brisk.conf and passed with -c;
    the placeholders {port}, {root} and {tmp} are substituted.
    cli_defaults (default: True without config, False with config) adds
    --listen for each of `listens`, --root, --workers and --access-log."""
    servers = []
    counter = itertools.count()

    def _start(config=None, args=(), root=None, listens=None, workers="1",
               access_log="off", cli_defaults=None, config_name="brisk.conf",
               env=None):
        n = next(counter)
        if root is None:
            root = tmp_path / "www"
            if not root.exists():
                populate_www(root)
        if listens is None:
            listens = [("127.0.0.1", free_port())]
        if cli_defaults is None:
            cli_defaults = config is None
        cmd = [brisk_bin]
        if config is not None:
            cfg = tmp_path / config_name
            cfg.write_text(config.replace("{port}", str(listens[0][1]))
                           .replace("{root}", str(root))
                           .replace("{tmp}", str(tmp_path)))
            cmd += ["-c", str(cfg)]
        if cli_defaults:
            for host, port in listens:
                h = f"[{host}]" if ":" in host else host
                cmd += ["--listen", f"{h}:{port}"]
            cmd += ["--root", str(root)]
            if workers is not None:
                cmd += ["--workers", str(workers)]
            if access_log is not None:
                cmd += ["--access-log", str(access_log)]
        cmd += [str(a) for a in args]
        srv = BriskServer(cmd, root, listens, tmp_path, n, env=env)
        servers.append(srv)
        return srv.start()

    yield _start

    problems = []
    for srv in servers:
        srv.stop()
        for p in srv.problems():
            problems.append(f"{p}; cmd={srv.cmd}\nstderr (tail):\n{srv.stderr()[-3000:]}")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def server(start_brisk):
    """A running brisk with the standard tree, --workers 1 --access-log off."""
    return start_brisk()


@pytest.fixture
def run_brisk(brisk_bin):
    """Runs brisk to completion (for -t, --version, bad configs ...).
    Returns CompletedProcess with text stdout/stderr; fails if it runs
    longer than `timeout` or reports a sanitizer error."""
    def _run(args, timeout=5.0, cwd=None):
        cmd = [brisk_bin, *map(str, args)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, cwd=cwd, text=True,
                             errors="replace", start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
            pytest.fail(f"brisk {args} did not exit within {timeout}s "
                        f"(stderr: {err!r})")
        cp = subprocess.CompletedProcess(cmd, p.returncode, out, err)
        for marker in SANITIZER_MARKERS:
            assert marker not in cp.stderr, f"sanitizer report:\n{cp.stderr}"
        return cp
    return _run
