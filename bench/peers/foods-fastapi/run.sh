#!/usr/bin/env bash
# brisk-foods' FastAPI peer (bench/peers/fastapi_foods.py), started the way
# the brisk-foods issue names it:
#
#   bench/peers/foods-fastapi/run.sh --listen ADDR:PORT --db URL [--workers N] [--seed N] [--pool N]
#   bench/peers/foods-fastapi/run.sh --install    # only install its packages, then exit
#
# URLs: sqlite:PATH, postgresql://user@host:port/db, mysql://... (see the
# peer's header). On first use it installs bench/requirements.txt (pinned:
# fastapi, uvicorn with uvloop and httptools, aiosqlite, asyncpg, aiomysql)
# into the venv $FOODS_FASTAPI_VENV (default bench/.venv, the harness's own);
# BENCH_NO_INSTALL=1 installs nothing and fails when something is missing.
# The server replaces this script (exec): signal it directly; SIGTERM stops
# uvicorn gracefully.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../.." && pwd)
venv=${FOODS_FASTAPI_VENV:-$bench/.venv}

have() {
  [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" -c 'import fastapi, uvicorn, uvloop, httptools, aiosqlite, asyncpg, aiomysql' 2>/dev/null
}

if ! have; then
  if [ "${BENCH_NO_INSTALL:-}" = 1 ]; then
    echo "foods-fastapi: $venv lacks the peer's packages (bench/requirements.txt) and BENCH_NO_INSTALL=1" >&2
    exit 3
  fi
  echo "foods-fastapi: installing bench/requirements.txt into $venv" >&2
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$bench/requirements.txt" >&2
  if ! have; then
    echo "foods-fastapi: the packages are still not importable from $venv" >&2
    exit 3
  fi
fi

if [ "${1:-}" = --install ]; then
  exit 0
fi
exec "$venv/bin/python" "$here/../fastapi_foods.py" "$@"
