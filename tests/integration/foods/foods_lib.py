"""Helpers for the brisk-foods integration tests: an HTTP/JSON client, the
brisk-foods process, and throw-away PostgreSQL and MariaDB servers (Debian
packages, data in a temporary directory, free ports, run as their own
system users when the tests run as root).

Only the standard library; the database servers are driven with their own
command-line tools (pg_ctl, psql, mariadbd, mariadb, mariadb-admin).
"""
from __future__ import annotations

import glob
import http.client
import itertools
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from brisk_testlib import free_port

REPO = Path(__file__).resolve().parents[3]
BIN_DIR = Path(os.environ.get("BRISK_BIN_DIR", str(REPO / "build" / "bin")))
FOODS_BIN = BIN_DIR / "brisk-foods"
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")

CATEGORIES = [
    "Fruits", "Vegetables", "Grains", "Dairy", "Meat", "Fish & Seafood", "Legumes",
    "Nuts & Seeds", "Oils & Fats", "Beverages", "Sweets", "Snacks", "Bakery", "Eggs",
    "Herbs & Spices", "Sauces", "Cereals", "Soups", "Fast Food", "Baby Food",
]
FOOD_KEYS = {"id", "name", "category_id", "kcal", "protein", "carbs", "fat"}

_names = itertools.count(1)


def unique(prefix="t"):
    """A name no other test uses, nor contains (also a database name)."""
    return f"{prefix}{os.getpid()}x{next(_names)}_"


def food(name, category_id=1, kcal=100.0, protein=10.0, carbs=20.0, fat=5.0):
    return {"name": name, "category_id": category_id, "kcal": kcal,
            "protein": protein, "carbs": carbs, "fat": fat}


# ------------------------------------------------------------------ HTTP
class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-case names
        self.body = body

    @property
    def json(self):
        ctype = self.headers.get("content-type", "")
        assert ctype.startswith("application/json"), \
            f"Content-Type {ctype!r}, body {self.body[:200]!r}"
        return json.loads(self.body.decode("utf-8"))

    def error(self, status, field=None):
        """Asserts a JSON error {"error": str, "field": field} with status."""
        assert self.status == status, f"status {self.status} != {status}: {self.body[:300]!r}"
        j = self.json
        assert set(j) == {"error", "field"}, j
        assert isinstance(j["error"], str) and j["error"], j
        assert j["field"] == field, f"field {j['field']!r} != {field!r} ({j['error']})"
        return j

    def __repr__(self):
        return f"<Reply {self.status} {self.body[:200]!r}>"


class Api:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def call(self, method, path, body=None, raw=None, timeout=15.0, headers=None):
        data = raw if raw is not None else (
            json.dumps(body).encode() if body is not None else None)
        h = dict(headers or {})
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=h)
            r = conn.getresponse()
            payload = r.read()
            return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, payload)
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.call("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.call("POST", path, body, **kw)

    def put(self, path, body=None, **kw):
        return self.call("PUT", path, body, **kw)

    def delete(self, path, **kw):
        return self.call("DELETE", path, **kw)

    def ok(self, method, path, body=None, status=200):
        r = self.call(method, path, body)
        assert r.status == status, f"{method} {path}: {r.status} {r.body[:300]!r}"
        return r.json if r.body else None

    def all_foods(self, query=""):
        out, offset = [], 0
        while True:
            page = self.ok("GET", f"/api/foods?limit=100&offset={offset}{query}")
            out += page
            if len(page) < 100:
                return out
            offset += 100


# ------------------------------------------------------------ brisk-foods
class FoodsServer:
    def __init__(self, db_url, workdir, seed=None, workers=1, args=(), name="foods"):
        self.port = free_port()
        self.db_url = db_url
        self.workdir = Path(workdir)
        self.cmd = [str(FOODS_BIN), "--listen", f"127.0.0.1:{self.port}", "--db", db_url,
                    "--workers", str(workers), *map(str, args)]
        if seed is not None:
            self.cmd += ["--seed", str(seed)]
        self.stderr_path = self.workdir / f"{name}-{self.port}.stderr"
        self.proc = None
        self.killed = False
        self.api = Api("127.0.0.1", self.port)

    def start(self, timeout=30.0):
        if not os.access(FOODS_BIN, os.X_OK):
            raise AssertionError(f"{FOODS_BIN} not built (set BRISK_BIN_DIR)")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=err,
                                         stdin=subprocess.DEVNULL, cwd=self.workdir,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"brisk-foods exited with {self.proc.returncode} at "
                                     f"startup: {self.cmd}\n{self.stderr()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"brisk-foods not listening after {timeout}s\n"
                                     f"{self.stderr()}")
            time.sleep(0.02)

    def stop(self, timeout=10.0):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
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
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def problems(self):
        out = []
        err = self.stderr()
        for m in SANITIZER_MARKERS:
            if m in err:
                out.append(f"sanitizer report {m!r}")
        if self.killed:
            out.append("did not stop within 10 s of SIGTERM")
        elif self.proc is not None and self.proc.returncode not in (0, None):
            out.append(f"exited with {self.proc.returncode}")
        if out:
            out.append(f"cmd={self.cmd}\nstderr tail:\n{err[-3000:]}")
        return out


# ------------------------------------------------------ database servers
def _run(cmd, timeout=60, check=True, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


class _ServerBase:
    """Runs commands as `user` when we are root (the servers refuse root)."""

    def __init__(self, user, prefix):
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.runas = []
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam(user)
            except KeyError:
                raise RuntimeError(f"no system user {user!r} to run the server as")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.runas = ["runuser", "-u", user, "--"]

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def postgres_bindir():
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                  key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)
    for d in reversed(dirs):
        if os.access(os.path.join(d, "pg_ctl"), os.X_OK):
            return d
    pg_ctl = shutil.which("pg_ctl")
    return os.path.dirname(pg_ctl) if pg_ctl else None


class PgServer(_ServerBase):
    def __init__(self):
        self.bindir = postgres_bindir()
        if not self.bindir or not shutil.which("psql"):
            raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl, psql) not found")
        super().__init__("postgres", "brisk-pg-")
        self.port = free_port()
        self.data = self.dir / "data"
        _run(self.runas + [f"{self.bindir}/initdb", "-D", str(self.data), "-E", "UTF8",
                           "--locale=C.UTF-8", "-A", "trust", "-U", "postgres", "--no-sync"])

    def start(self):
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                f"-c synchronous_commit=off -c full_page_writes=off")
        _run(self.runas + [f"{self.bindir}/pg_ctl", "-D", str(self.data), "-l",
                           str(self.dir / "log"), "-o", opts, "-w", "-t", "60", "start"])

    def stop(self, mode="fast"):
        _run(self.runas + [f"{self.bindir}/pg_ctl", "-D", str(self.data), "-m", mode, "-w",
                           "stop"], check=False)

    def sql(self, sql, db="postgres"):
        return _run(["psql", "-X", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                     "-d", db, "-v", "ON_ERROR_STOP=1", "-Atc", sql]).stdout

    def psql_popen(self, db):
        """An interactive psql session (stdin: SQL; stdout: bare values)."""
        return subprocess.Popen(["psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p",
                                 str(self.port), "-U", "postgres", "-d", db, "-v",
                                 "ON_ERROR_STOP=1"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def create_db(self, name):
        self.sql(f"CREATE DATABASE {name}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def close(self):
        self.stop("immediate")
        self.remove()


class MariaServer(_ServerBase):
    def __init__(self):
        self.mariadbd = shutil.which("mariadbd") or (
            "/usr/sbin/mariadbd" if os.access("/usr/sbin/mariadbd", os.X_OK) else None)
        self.install = shutil.which("mariadb-install-db")
        if not self.mariadbd or not self.install or not shutil.which("mariadb") \
                or not shutil.which("mariadb-admin"):
            raise FileNotFoundError("MariaDB server binaries (mariadbd, mariadb-install-db, "
                                    "mariadb, mariadb-admin) not found")
        super().__init__("mysql", "brisk-my-")
        self.port = free_port()
        self.data = self.dir / "data"
        self.sock = self.dir / "sock"
        self.proc = None
        _run(self.runas + [self.install, "--no-defaults", f"--datadir={self.data}",
                           "--auth-root-authentication-method=normal", "--skip-test-db",
                           "--skip-name-resolve"], timeout=120)

    def start(self):
        self.proc = subprocess.Popen(
            self.runas + [self.mariadbd, "--no-defaults", f"--datadir={self.data}",
                          f"--socket={self.sock}", f"--port={self.port}",
                          "--bind-address=127.0.0.1", f"--pid-file={self.dir / 'pid'}",
                          f"--log-error={self.dir / 'error.log'}", "--skip-log-bin",
                          "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0",
                          "--skip-name-resolve"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"mariadbd exited ({self.proc.returncode}):\n"
                                     + (self.dir / "error.log").read_text(errors="replace"))
            p = _run(["mariadb-admin", "--no-defaults", f"--socket={self.sock}", "-u", "root",
                      "ping"], check=False, timeout=10)
            if p.returncode == 0:
                return
            time.sleep(0.1)
        raise AssertionError("mariadbd did not answer within 60 s")

    def stop(self):
        if self.proc is None:
            return
        _run(["mariadb-admin", "--no-defaults", f"--socket={self.sock}", "-u", "root",
              "shutdown"], check=False, timeout=60)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.proc = None

    def sql(self, sql, db=None):
        cmd = ["mariadb", "--no-defaults", f"--socket={self.sock}", "-u", "root", "-N", "-B"]
        if db:
            cmd += ["-D", db]
        return _run(cmd + ["-e", sql]).stdout

    def create_db(self, name):
        self.sql(f"CREATE DATABASE {name}")
        return f"mysql://root@/{name}?socket={self.sock}"

    def close(self):
        self.stop()
        self.remove()


class Databases:
    """Starts PostgreSQL and MariaDB on first use (once per session) and
    hands out fresh databases on them."""

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.servers = {}
        self.unavailable = {}

    def server(self, backend):
        import pytest
        if backend in self.unavailable:
            pytest.skip(self.unavailable[backend])
        if backend not in self.servers:
            try:
                srv = PgServer() if backend == "postgresql" else MariaServer()
            except (FileNotFoundError, RuntimeError) as e:
                self.unavailable[backend] = f"{backend} not available: {e}"
                pytest.skip(self.unavailable[backend])
            srv.start()
            self.servers[backend] = srv
        return self.servers[backend]

    def fresh(self, backend):
        """The URL of a new, empty database on backend."""
        if backend == "sqlite":
            d = Path(tempfile.mkdtemp(prefix="db-", dir=self.workdir))
            return f"sqlite:{d}/foods.db"
        return self.server(backend).create_db(unique("foods"))

    def close(self):
        for srv in self.servers.values():
            srv.close()
