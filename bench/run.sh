#!/usr/bin/env bash
# Entry point of `make bench` (full) and `make bench-quick` (--quick): installs
# the peers and load generators that are missing (Debian packages through
# apt-get, sudo when not root; matplotlib into bench/.venv), builds brisk when
# it is not built, then runs bench/run.py with the arguments given.
#
# Usage: bench/run.sh [--quick] [--races hello,static,echo,kv,rest,https] [--rounds N]
#                     [--duration S] [--no-costs] [--keep-tmp]
# Environment: BENCH_NO_INSTALL=1 skips the installs (use what is there);
# BENCH_BIN_DIR=DIR takes the brisk binaries from DIR instead of build/bin.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

if [ "${BENCH_NO_INSTALL:-}" != 1 ]; then
  need=()
  [ -x /usr/sbin/nginx ] || need+=(nginx-light)
  command -v h2o >/dev/null || need+=(h2o)
  command -v npm >/dev/null || need+=(npm)
  [ -f /etc/nginx/mime.types ] || have_pkg nginx-common || need+=(nginx-common)
  command -v redis-server >/dev/null || need+=(redis-server)
  command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null || need+=(redis-tools)
  command -v node >/dev/null || need+=(nodejs)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  for t in wrk httperf strace valgrind curl h2load:nghttp2-client openssl taskset:util-linux ps:procps cc:build-essential; do
    cmd=${t%%:*} pkg=${t#*:}
    command -v "$cmd" >/dev/null || need+=("$pkg")
  done
  python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
  have_pkg libssl-dev || need+=(libssl-dev)  # bench/lib/tls_conns.c (https race)
  want_hey=0
  command -v hey >/dev/null || want_hey=1
  if [ ${#need[@]} -gt 0 ] || [ $want_hey = 1 ]; then
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    # hey is packaged in Debian 12 but not everywhere: install it when it has
    # a candidate, else its races are skipped (and the report says so).
    if [ $want_hey = 1 ] && apt-cache policy hey 2>/dev/null | grep -q 'Candidate: [0-9]'; then
      need+=(hey)
    fi
    if [ ${#need[@]} -gt 0 ]; then
      echo "[bench] installing ${need[*]}" >&2
      $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
  fi
  command -v hey >/dev/null || echo "[bench] hey is not packaged here: the hey races will be skipped" >&2

  if [ ! -x bench/.venv/bin/python ] ||
     ! bench/.venv/bin/python -c 'import matplotlib, fastapi, uvicorn, aiosqlite, asyncpg' 2>/dev/null; then
    echo "[bench] installing matplotlib and the FastAPI peer into bench/.venv" >&2
    { python3 -m venv bench/.venv &&
      bench/.venv/bin/pip install -q --disable-pip-version-check -r bench/requirements.txt; } ||
      echo "[bench] could not set up bench/.venv: no charts this time" >&2
  fi
fi

# The fastest peers and the limit probe, in bench/.peers (not committed):
# Bun from npm, Go's fasthttp built from bench/peers/fasthttp (the Go module
# proxy), the probe from bench/peers/probe.c. A peer that cannot be set up is
# left out of the races, and the report says so.
if [ "${BENCH_NO_INSTALL:-}" != 1 ]; then
  mkdir -p bench/.peers
  cc -O2 -Wall -o bench/.peers/probe bench/peers/probe.c ||
    echo "[bench] could not build the limit probe" >&2
  if [ ! -x bench/.peers/node_modules/.bin/bun ]; then
    echo "[bench] installing Bun (npm package bun) into bench/.peers" >&2
    npm install --prefix bench/.peers --no-audit --no-fund --silent bun@1 >/dev/null 2>&1 ||
      echo "[bench] could not install Bun: its races are skipped" >&2
  fi
  if [ ! -x bench/.peers/fasthttp-peer ] || [ bench/peers/fasthttp/main.go -nt bench/.peers/fasthttp-peer ]; then
    if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then PATH=$PATH:/usr/local/go/bin; fi
    if command -v go >/dev/null; then
      echo "[bench] building the fasthttp peer (Go module proxy)" >&2
      (cd bench/peers/fasthttp && go build -o ../../.peers/fasthttp-peer .) ||
        echo "[bench] could not build the fasthttp peer: its races are skipped" >&2
    else
      echo "[bench] no Go toolchain: the fasthttp races are skipped" >&2
    fi
  fi
fi

# The binaries the races need; the ones still being written show as pending.
# BENCH_BIN_DIR (default build/bin) points the races at other binaries.
if [ -z "${BENCH_BIN_DIR:-}" ] &&
   { [ ! -x build/bin/brisk ] || [ ! -x build/bin/brisk-hello ] || [ ! -x build/bin/brisk-echo ]; }; then
  echo "[bench] brisk is not built: building it" >&2
  make build
fi

py=python3
[ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import matplotlib' 2>/dev/null && py=bench/.venv/bin/python
exec "$py" bench/run.py "$@"
