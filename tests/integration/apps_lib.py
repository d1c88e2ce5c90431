"""Running the example and test apps (brisk-hello, brisk-echo, api_test)
for the integration tests: one process per app on a free loopback port,
stopped with SIGTERM at the end of its test; it must exit 0 without a
sanitizer report."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from brisk_testlib import RawConn, free_port, req

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("BRISK_BIN_DIR") or
               Path(os.environ.get("BRISK_BIN", REPO / "build" / "bin" / "brisk")).parent)
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:",
                     "ERROR: LeakSanitizer")


class AppProc:
    """One run of an app binary on a free loopback port."""

    def __init__(self, name, workdir, args=(), env=None, workers="1", listen=True):
        self.bin = BIN_DIR / name
        if not os.access(self.bin, os.X_OK):
            pytest.fail(f"{self.bin} not built (run `make` or set BRISK_BIN_DIR)",
                        pytrace=False)
        self.host, self.port = "127.0.0.1", free_port()
        self.cmd = [str(self.bin)]
        if listen:
            self.cmd += ["--listen", f"{self.host}:{self.port}"]
        if workers is not None:
            self.cmd += ["--workers", str(workers)]
        self.cmd += [str(a) for a in args]
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        tag = f"{name}-{self.port}"
        self.out_path = self.workdir / f"{tag}.stdout"
        self.err_path = self.workdir / f"{tag}.stderr"
        self.env = None if env is None else {**os.environ, **env}
        self.proc = None
        self.killed = False

    def start(self, wait_for=None):
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, cwd=self.workdir,
                                         env=self.env, start_new_session=True)
        for host, port in (wait_for or [(self.host, self.port)]):
            deadline = time.monotonic() + 5
            while True:
                if self.proc.poll() is not None:
                    pytest.fail(f"{self.cmd} exited during startup "
                                f"({self.proc.returncode}):\n{self.stderr()}")
                try:
                    with socket.create_connection((host, port), timeout=0.5):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    self.kill()
                    pytest.fail(f"{self.cmd} not listening on {host}:{port} "
                                f"after 5 s:\n{self.stderr()}")
                time.sleep(0.02)
        return self

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self):
        self.killed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(5)

    def stderr(self):
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def stdout(self):
        return self.out_path.read_text(errors="replace") if self.out_path.exists() else ""

    def problems(self):
        out = [f"sanitizer report ({m!r})" for m in SANITIZER_MARKERS if m in self.stderr()]
        if self.killed:
            out.append("did not exit within 5 s of SIGTERM; killed")
        elif self.proc is not None and self.proc.returncode not in (0, None):
            out.append(f"exited with code {self.proc.returncode}")
        return out

    # clients
    def connect(self, timeout=5.0, **kw) -> RawConn:
        return RawConn(self.host, self.port, timeout=timeout, **kw)

    def request(self, target, method="GET", headers=None, body=b"", version="HTTP/1.1",
                timeout=5.0):
        """One request on a fresh connection; returns the parsed Response."""
        with self.connect(timeout=timeout) as c:
            c.send(req(method, target, version=version, headers=headers, body=body,
                       host=None if version == "HTTP/1.0" else "localhost"))
            return c.read_response(method=method)

    def json(self, target, **kw):
        r = self.request(target, **kw)
        assert r.status == 200, r
        return json.loads(r.body)

    def stats(self):
        return self.json("/stats")


def check_procs(procs):
    problems = []
    for p in procs:
        if p.proc is None:
            continue
        p.stop()
        problems += [f"{x}; cmd={p.cmd}\nstderr:\n{p.stderr()[-3000:]}" for x in p.problems()]
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
