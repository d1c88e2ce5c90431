#!/usr/bin/env bash
# brisk vs nginx on static files: throughput races with wrk (keep-alive and
# pipelined) and syscalls per keep-alive request with strace. See README.md.
#
# Usage: bench/static.sh
#   DURATION=5 ROUNDS=3   seconds per wrk round, rounds per race
#   QUICK=1               DURATION=2 ROUNDS=1
#   KEEP_TMP=1            keep the temp dir (configs, logs, strace output)
# Prints a markdown report and writes it to bench/results/static.md.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages this needs, installed when missing (sudo when not root).
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
[ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v wrk >/dev/null || need+=(wrk)
command -v strace >/dev/null || need+=(strace)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
command -v taskset >/dev/null || need+=(util-linux)
[ -f /etc/nginx/mime.types ] || have nginx-common || need+=(nginx-common)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "[bench] installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Build brisk when it is missing (BRISK_CMD, a test knob, replaces it).
if [ -z "${BRISK_CMD:-}" ] && [ ! -x build/bin/brisk ]; then
  echo "[bench] build/bin/brisk is missing: building it" >&2
  [ -x scripts/deps.sh ] && scripts/deps.sh build
  if [ -f Makefile ]; then
    make
  else
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build
  fi
  [ -x build/bin/brisk ] || { echo "[bench] FAILED: no build/bin/brisk after the build" >&2; exit 1; }
fi

exec python3 bench/lib/static_bench.py "$@"
