"""brisk-foods under trouble: a database restart (503 with a JSON error
during the outage, recovery after), a slow or locked query that must not
hold up other requests on the same worker, concurrent clients, and the
same seed giving the same data on every backend."""
from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from foods_lib import food, unique

SERVERS = ["postgresql", "mysql"]


def wait_for(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout}s (last: {last!r})")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", SERVERS)
def test_database_restart(backend, dbs, start_foods):
    srv = start_foods(backend, seed=20, workers=2)
    db = dbs.server(backend)
    api = srv.api
    assert api.get("/api/categories").status == 200
    db.stop()
    try:
        # Every request fails fast with 503 and a JSON error, never a hang.
        r = wait_for(lambda: (x := api.get("/api/categories", timeout=10)).status == 503 and x,
                     10, "503 during the outage")
        r.error(503)
        assert r.headers["retry-after"] == "1"
        for _ in range(20):
            api.get("/api/foods?limit=5", timeout=10).error(503)
            api.get("/api/templates/1/full", timeout=10).error(503)
            api.post("/api/foods", food(unique("Outage")), timeout=10).error(503)
        h = api.get("/api/health", timeout=10)
        assert h.status == 503
        assert h.json["status"] == "unavailable" and h.json["database"] == backend
    finally:
        db.start()
    # Back by itself, without a restart of brisk-foods.
    wait_for(lambda: api.get("/api/categories").status == 200, 20, "recovery")
    assert api.ok("GET", "/api/health")["status"] == "ok"
    name = unique("AfterRestart ")
    fid = api.ok("POST", "/api/foods", food(name), status=201)["id"]
    assert api.ok("GET", f"/api/foods/{fid}")["name"] == name
    assert len(api.ok("GET", "/api/categories")) == 20
    assert srv.proc.poll() is None


def run_in_thread(fn):
    out = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as e:  # reported by the test
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


@pytest.mark.timeout(60)
def test_slow_query_does_not_block_the_worker(dbs, start_foods):
    """A write stuck behind a table lock (held by another session sleeping
    in pg_sleep) must not delay other requests on the same single worker:
    they are answered while the write is still waiting."""
    srv = start_foods("postgresql", seed=20, workers=1)
    pg = dbs.server("postgresql")
    dbname = srv.db_url.rsplit("/", 1)[1]
    locker = pg.psql_popen(dbname)
    locker.stdin.write("BEGIN;\nLOCK TABLE foods IN ACCESS EXCLUSIVE MODE;\n"
                       "SELECT 'locked';\nSELECT pg_sleep(3);\nCOMMIT;\n")
    locker.stdin.flush()
    try:
        assert locker.stdout.readline().strip() == "locked"
        name = unique("Blocked ")
        writer, result = run_in_thread(lambda: srv.api.post("/api/foods", food(name)))
        time.sleep(0.2)
        assert writer.is_alive(), "the write should wait for the lock"
        for _ in range(10):
            assert srv.api.ok("GET", "/api/health")["status"] == "ok"
            assert len(srv.api.ok("GET", "/api/categories")) == 20
            assert srv.api.ok("GET", "/api/templates?limit=5")
        assert writer.is_alive() and locker.poll() is None, \
            "the other requests must be answered while the write still waits"
    finally:
        locker.stdin.close()
        locker.wait(20)
    writer.join(20)
    assert "error" not in result, result
    assert result["value"].status == 201
    assert srv.api.ok("GET", f"/api/foods/{result['value'].json['id']}")["name"] == name


@pytest.mark.timeout(60)
def test_sqlite_writes_wait_off_the_loop(dbs, start_foods, tmp_path):
    """SQLite writes run on the worker pool: while another process holds the
    write lock, a write waits (busy_timeout) and reads on the same single
    worker are still answered."""
    url = dbs.fresh("sqlite")
    srv = start_foods(url=url, seed=20, workers=1, backend="sqlite")
    other = sqlite3.connect(url.split(":", 1)[1], timeout=5, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        name = unique("Waits ")
        writer, result = run_in_thread(lambda: srv.api.post("/api/foods", food(name)))
        time.sleep(0.3)
        assert writer.is_alive(), "the write should wait for the lock"
        for _ in range(10):
            assert srv.api.ok("GET", "/api/health")["status"] == "ok"
            assert len(srv.api.ok("GET", "/api/foods?limit=10")) == 10
        assert writer.is_alive()
    finally:
        other.execute("ROLLBACK")
        other.close()
    writer.join(20)
    assert "error" not in result, result
    assert result["value"].status == 201, result["value"]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["sqlite", *SERVERS])
def test_concurrent_clients(backend, start_foods):
    srv = start_foods(backend, seed=50, workers=2)
    api = srv.api
    prefix = unique("Conc")
    statuses, lock = [], threading.Lock()

    def client(n):
        got = []
        for i in range(15):
            k = (n + i) % 5
            if k == 0:
                r = api.post("/api/foods", food(f"{prefix} {n} {i}"))
            elif k == 1:
                r = api.post("/api/foods/bulk", [food(f"{prefix} b{n} {i} {j}") for j in range(5)])
            elif k == 2:
                r = api.get("/api/templates/1/full")
            elif k == 3:
                r = api.get("/api/foods?limit=50&category_id=2")
            else:
                r = api.get("/api/categories")
            got.append((k, r.status))
        with lock:
            statuses.extend(got)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    expected = {0: 201, 1: 201, 2: 200, 3: 200, 4: 200}
    bad = [(k, s) for k, s in statuses if s != expected[k]]
    assert len(statuses) == 16 * 15 and not bad, bad[:10]
    singles = sum(1 for k, _ in statuses if k == 0)
    bulks = sum(1 for k, _ in statuses if k == 1)
    assert len(api.all_foods(f"&q={prefix}")) == singles + 5 * bulks


def test_same_seed_same_data_everywhere(dbs, start_foods):
    """--seed 120 yields the same foods and templates on every backend (and
    twice on the same one): the generator is deterministic and the three
    dialects agree on what they return."""
    seen = {}
    for backend in ["sqlite", "sqlite", *SERVERS]:
        try:
            srv = start_foods(backend, seed=120, workers=1)
        except pytest.skip.Exception:
            continue
        api = srv.api
        foods = api.all_foods()
        templates = api.ok("GET", "/api/templates?limit=1000")
        fulls = [api.ok("GET", f"/api/templates/{t['id']}/full") for t in templates[:5]]
        seen.setdefault("data", (foods, templates, fulls))
        assert len(foods) == 120 and len(templates) == 12
        assert (foods, templates, fulls) == seen["data"], backend
        srv.stop()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_startup_line_names_program_and_database(backend, dbs, start_foods):
    url = dbs.fresh(backend)
    if backend == "postgresql" and "@" in url and ":" in url.split("://", 1)[1].split("@", 1)[0]:
        secret = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    else:
        secret = None
    srv = start_foods(backend, url=url)
    line = wait_for(lambda: next((ln for ln in srv.stderr().splitlines() if " started: " in ln),
                                 None), 5, "the start-up line")
    assert "brisk-foods " in line, line
    kind = {"sqlite": "sqlite", "postgresql": "postgresql"}[backend]
    assert f"database {kind} " in line, line
    if secret:
        assert secret not in line, "the password must not be logged"
