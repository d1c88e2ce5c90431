"""Fixtures for the brisk-foods integration tests.

The binary comes from BRISK_BIN_DIR (default <repo>/build/bin). SQLite
always runs; PostgreSQL and MariaDB are started by the tests themselves
(initdb/pg_ctl and mariadb-install-db/mariadbd, data in a temporary
directory, free ports, as the postgres and mysql users when run as root),
once per session, and each test module gets fresh databases on them. Tests
on a server whose binaries are absent are skipped with that reason.

- `dbs`: the session's Databases (fresh(backend) -> URL).
- `foods`: a brisk-foods seeded with 200 foods, once per module and
  backend (parametrized: sqlite, postgresql, mysql).
- `start_foods`: factory for a server of one's own, stopped at teardown.
A test fails if a server does not exit 0 on SIGTERM or prints a sanitizer
report.
"""
from __future__ import annotations

import pytest

from foods_lib import Databases, FoodsServer

BACKENDS = ["sqlite", "postgresql", "mysql"]
SEED = 200


@pytest.fixture(scope="session")
def dbs(tmp_path_factory):
    d = Databases(tmp_path_factory.mktemp("foods-dbs"))
    yield d
    d.close()


def _stop_all(servers):
    problems = []
    for srv in servers:
        srv.stop()
        problems += srv.problems()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module", params=BACKENDS)
def foods(request, dbs, tmp_path_factory):
    url = dbs.fresh(request.param)
    srv = FoodsServer(url, tmp_path_factory.mktemp("foods"), seed=SEED, workers=2).start()
    srv.backend = request.param
    yield srv
    _stop_all([srv])


@pytest.fixture
def start_foods(dbs, tmp_path):
    servers = []

    def _start(backend=None, url=None, **kw):
        if url is None:
            url = dbs.fresh(backend)
        srv = FoodsServer(url, tmp_path, **kw)
        servers.append(srv)
        srv.backend = backend
        return srv.start()

    yield _start
    _stop_all(servers)
