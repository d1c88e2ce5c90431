"""Pieces of the rest race (bench/lib/races.py: race_rest): the wrk runs
(bench/lib/rest.lua, one endpoint per run), the answer checks, a throwaway
PostgreSQL cluster, database sizes.

The load generator is wrk (C, one thread on the load CPU, 50 connections):
a Python client would be the bottleneck against brisk-foods. wrk's
--latency table has no 95th percentile, so rest.lua's done() prints the
percentiles itself.
"""
import glob
import http.client
import json
import os
import pwd
import re
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

LIB = Path(__file__).resolve().parent
LUA = LIB / "rest.lua"
BULK_BODY = LIB / "rest-bulk-100.json"
BULK_COUNT = 100
CONNS = 50
TIMEOUT_S = 10  # wrk --timeout: a slow bulk insert under 50 connections is not an error

# (key, name, request shown in the report, throughput target from the brisk-foods issue)
ENDPOINTS = [
    ("categories", "categories", "GET /api/categories", 10.0),
    ("foods-list", "foods-list", "GET /api/foods?category_id=C&limit=20, C = 1..20 in turn", 10.0),
    ("bulk-insert", "bulk-insert", f"POST /api/foods/bulk, {BULK_COUNT} foods "
                                   f"(bench/lib/{BULK_BODY.name})", 3.0),
    ("template-full", "template-full", "GET /api/templates/T/full, T = 1..TEMPLATES in turn", 5.0),
]
PERCENTILES = ("p50", "p95", "p99")


class RestError(Exception):
    pass


# ---------------------------------------------------------------- wrk

def parse_result(text):
    m = re.search(r"^REST-RESULT (.*)$", text, re.M)
    if not m:
        return None
    out = {}
    for kv in m.group(1).split():
        k, _, v = kv.partition("=")
        out[k] = float(v)
    return out


def run_wrk(prefix, port, endpoint, duration, templates, conns=CONNS):
    """One wrk run against one endpoint. Returns a harness result dict:
    value (req/s), failed (why, or ""), p50/p95/p99 (strings for the
    per-round table) and p50_ms/p95_ms/p99_ms/mean_ms/max_ms, requests,
    errors."""
    env = dict(os.environ, REST_ENDPOINT=endpoint, REST_BODY=str(BULK_BODY),
               REST_TEMPLATES=str(templates))
    argv = list(prefix) + ["wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--timeout",
                           f"{TIMEOUT_S}s", "-s", str(LUA), f"http://127.0.0.1:{port}"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60, env=env)
        text, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = f"wrk did not finish: {e}", -1
    r = parse_result(text)
    why = []
    if rc != 0:
        why.append(f"wrk exit {rc}")
    if r is None:
        why.append("no REST-RESULT line from rest.lua")
        return {"value": None, "failed": "; ".join(why), "raw": text[-2000:]}
    if not r["requests"]:
        why.append("no completed requests")
    if r["status"]:
        why.append(f"{r['status']:.0f} non-2xx/3xx responses")
    errors = ", ".join(f"{k} {r[k]:.0f}" for k in ("connect", "read", "write", "timeout") if r[k])
    if r["timeout"]:
        why.append(f"{r['timeout']:.0f} timeouts (> {TIMEOUT_S} s)")
    secs = r["duration_us"] / 1e6
    res = {"value": r["requests"] / secs if secs and r["requests"] else None,
           "failed": "; ".join(why), "requests": int(r["requests"]), "errors": errors,
           "mean_ms": r["mean_us"] / 1000, "max_ms": r["max_us"] / 1000,
           "p90_ms": r["p90_us"] / 1000,
           "raw": text[-2000:] if why else ""}
    for pct in PERCENTILES:
        ms = r[f"{pct}_us"] / 1000
        res[f"{pct}_ms"] = ms
        res[pct] = f"{ms:.2f}ms"
    if endpoint == "bulk-insert":
        res["rows"] = int(r["requests"]) * BULK_COUNT
    return res


# ---------------------------------------------------------------- answers

def ask(port, method, path, body=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        ctype = r.getheader("Content-Type") or ""
    finally:
        c.close()
    try:
        doc = json.loads(data) if data else None
    except ValueError:
        raise RestError(f"{method} {path}: {r.status}, not JSON: {data[:200]!r}")
    return r.status, ctype, doc


def check_endpoint(port, endpoint, templates):
    """Asks what wrk will ask and checks the answer (status, JSON shape);
    returns the parsed answers (compared between the two servers)."""
    def want(method, path, status, body=None):
        got, ctype, doc = ask(port, method, path, body)
        if got != status or not ctype.startswith("application/json"):
            raise RestError(f"{method} {path}: {got} {ctype!r}, want {status} application/json: "
                            f"{json.dumps(doc)[:300]}")
        return doc
    if endpoint == "categories":
        doc = want("GET", "/api/categories", 200)
        if not isinstance(doc, list) or len(doc) != 20 or not all("name" in c for c in doc):
            raise RestError(f"GET /api/categories: want 20 categories, got {json.dumps(doc)[:300]}")
        return [doc]
    if endpoint == "foods-list":
        docs = []
        for cat in (1, 20):
            path = f"/api/foods?category_id={cat}&limit=20"
            doc = want("GET", path, 200)
            if not isinstance(doc, list) or not 1 <= len(doc) <= 20 or \
                    any(f.get("category_id") != cat for f in doc):
                raise RestError(f"GET {path}: want 1..20 foods of category {cat}, got "
                                f"{json.dumps(doc)[:300]}")
            docs.append(doc)
        return docs
    if endpoint == "template-full":
        docs = []
        for t in (1, templates):
            path = f"/api/templates/{t}/full"
            doc = want("GET", path, 200)
            if not isinstance(doc, dict) or not doc.get("items") or "totals" not in doc:
                raise RestError(f"GET {path}: want a template with items and totals, got "
                                f"{json.dumps(doc)[:300]}")
            docs.append(doc)
        return docs
    if endpoint == "bulk-insert":
        doc = want("POST", "/api/foods/bulk", 201, BULK_BODY.read_bytes())
        if not isinstance(doc, dict) or len(doc.get("ids") or []) != BULK_COUNT:
            raise RestError(f"POST /api/foods/bulk: want {BULK_COUNT} ids, got {json.dumps(doc)[:300]}")
        return []  # the new ids differ from server to server
    raise RestError(f"unknown endpoint {endpoint}")


def first_difference(a, b, where="$"):
    """Where two parsed JSON documents differ (floats to 1e-9), or None."""
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-9 * max(1, abs(a)):
            return None
        return f"{where}: {a!r} vs {b!r}"
    if type(a) is not type(b):
        return f"{where}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}.{k}: only in one"
            d = first_difference(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} vs {len(b)} elements"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{where}: {a!r} vs {b!r}"


# ---------------------------------------------------------------- databases

def sqlite_stats(path):
    """(bytes of the database with its -wal and -shm, number of foods)."""
    size = sum(os.path.getsize(p) for p in (path, f"{path}-wal", f"{path}-shm") if os.path.exists(p))
    foods = None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as c:
            foods = c.execute("SELECT COUNT(*) FROM foods").fetchone()[0]
    except sqlite3.Error:
        pass
    return size, foods


def postgres_bindir():
    """The newest /usr/lib/postgresql/*/bin with initdb and pg_ctl, or None."""
    def ver(d):
        v = d.split("/")[-2]
        return int(v) if v.isdigit() else 0
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=ver, reverse=True):
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return d
    return None


CLUSTERS = []  # every PgCluster started, for stop_all


class PgCluster:
    """A throwaway PostgreSQL: initdb in a temp dir (as the postgres user
    when we are root: the server refuses root), started on a free loopback
    port with its socket in that dir, stopped and removed by close()."""

    def __init__(self, bindir, parent, port, prefix=()):
        self.bindir, self.port, self.prefix = bindir, port, list(prefix)
        self.dir = Path(tempfile.mkdtemp(prefix="pg.", dir=parent))
        self.data = self.dir / "data"
        self.runas = []
        self.started = False
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise RestError("running as root and there is no postgres user to run PostgreSQL as")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.runas = ["runuser", "-u", "postgres", "--"]
        self._run([f"{bindir}/initdb", "-D", str(self.data), "-E", "UTF8", "--locale=C.UTF-8",
                   "-A", "trust", "-U", "postgres", "--no-sync"], timeout=120)

    def _run(self, argv, timeout=60, check=True, prefix=()):
        p = subprocess.run(list(prefix) + self.runas + argv, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True)
        if check and p.returncode != 0:
            log = ""
            try:
                log = (self.dir / "log").read_text(errors="replace")[-1500:]
            except OSError:
                pass
            raise RestError(f"{Path(argv[0]).name} failed ({p.returncode}): "
                            f"{(p.stderr or p.stdout).strip()[-1500:]}\n{log}")
        return p

    def version(self):
        p = subprocess.run([f"{self.bindir}/postgres", "--version"], capture_output=True, text=True)
        return p.stdout.strip()

    def start(self):
        # synchronous_commit=off: a commit does not wait for its WAL flush
        # (the WAL writer flushes within 200 ms), as SQLite's WAL with
        # synchronous=NORMAL; fsync stays on. The postmaster inherits the
        # pinning prefix (taskset): its backends run on the servers' CPU.
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                "-c synchronous_commit=off -c max_connections=100")
        CLUSTERS.append(self)
        self.started = True
        self._run([f"{self.bindir}/pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"),
                   "-o", opts, "-w", "-t", "60", "start"], timeout=90, prefix=self.prefix)
        return self

    def sql(self, sql, db="postgres"):
        psql = f"{self.bindir}/psql" if os.access(f"{self.bindir}/psql", os.X_OK) else "psql"
        p = self._run([psql, "-X", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db,
                       "-v", "ON_ERROR_STOP=1", "-Atc", sql])
        return p.stdout.strip()

    def create_db(self, name):
        self.sql(f"CREATE DATABASE {name}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def settle(self, name):
        """After seeding: VACUUM ANALYZE and a checkpoint, so that autovacuum
        and the checkpointer do not run (on the servers' CPU) during the
        first endpoint's rounds."""
        self.sql("VACUUM ANALYZE", db=name)
        self.sql("CHECKPOINT", db=name)

    def stats(self, name):
        """(bytes of database `name`, number of foods)."""
        size = int(self.sql("SELECT pg_database_size(current_database())", db=name))
        try:
            foods = int(self.sql("SELECT COUNT(*) FROM foods", db=name))
        except (RestError, ValueError):
            foods = None
        return size, foods

    def close(self):
        if self.started:
            self._run([f"{self.bindir}/pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30",
                       "stop"], check=False, timeout=60)
            pid = self.postmaster_pid()
            if pid:  # still there: immediate, then SIGKILL
                self._run([f"{self.bindir}/pg_ctl", "-D", str(self.data), "-m", "immediate", "-w",
                           "stop"], check=False, timeout=30)
                pid = self.postmaster_pid()
                if pid:
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
            self.started = False
        if self in CLUSTERS:
            CLUSTERS.remove(self)
        shutil.rmtree(self.dir, ignore_errors=True)

    def postmaster_pid(self):
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError, IndexError):
            return None


def stop_clusters():
    for c in list(CLUSTERS):
        try:
            c.close()
        except Exception:  # noqa: BLE001 (best effort on the way out)
            pass


def peer_versions(python):
    """The versions of the FastAPI peer's packages in its venv."""
    code = ("import importlib.metadata as m, sys\n"
            "print('python', sys.version.split()[0])\n"
            "for p in ('fastapi','starlette','pydantic','uvicorn','uvloop','httptools','aiosqlite',"
            "'asyncpg'):\n"
            "    try: print(p, m.version(p))\n"
            "    except Exception: print(p, '?')\n")
    try:
        p = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=30)
        return dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    except (OSError, subprocess.TimeoutExpired):
        return {}
