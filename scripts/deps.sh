#!/usr/bin/env bash
# Installs what brisk needs that is missing: Debian packages (apt-get, via sudo
# when not root) and, with --venv, the Python test tools in .venv.
# Usage: scripts/deps.sh build|test|bench|fuzz [--venv]
set -euo pipefail
cd "$(dirname "$0")/.."

build_pkgs="build-essential cmake ninja-build pkg-config libinih-dev libssl-dev libnghttp2-dev media-types libsqlite3-dev libpq-dev libmariadb-dev libcjson-dev liblua5.1-0-dev lua-cjson-dev lua-bitop-dev"
test_pkgs="$build_pkgs libcmocka-dev curl nghttp2-client nginx-light chromium tcl tcl-tls python3-venv strace redis-tools redis-server postgresql mariadb-server nodejs clang-14 libclang-rt-14-dev"
fuzz_pkgs="$build_pkgs clang-14 libclang-rt-14-dev llvm-14"
bench_pkgs="$build_pkgs curl nginx-light h2o nghttp2-client wrk strace procps"

case "${1:-build}" in
  build) pkgs=$build_pkgs ;;
  test)  pkgs=$test_pkgs ;;
  bench) pkgs=$bench_pkgs ;;
  fuzz)  pkgs=$fuzz_pkgs ;;
  *) echo "usage: $0 build|test|bench|fuzz [--venv]" >&2; exit 2 ;;
esac

missing=()
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages of the integration tests (pinned by each package-lock.json);
# without npm or a registry the tests that need them skip with the reason.
# Debian's nodejs has npm apart (package npm); NodeSource's bundles it and
# conflicts with Debian's, so npm is installed only when there is none.
if [ "${1:-}" = test ] && ! command -v npm >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deps: installing npm"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >/dev/null ||
    echo "deps: npm could not be installed (the BullMQ/ioredis tests skip)" >&2
fi
if [ "${1:-}" = test ] && command -v npm >/dev/null; then
  for d in tests/integration/kv/node_script; do
    [ -d "$d/node_modules" ] ||
      npm install --prefix "$d" --no-audit --no-fund --no-save --ignore-scripts >/dev/null 2>&1 ||
      echo "deps: npm install in $d failed (its tests skip)" >&2
  done
fi

# h2spec (HTTP/2 conformance) for tests/integration/test_h2.py: built from the
# Go module in tests/h2spec (pinned versions) through the Go module proxy, with
# the machine's Go or Debian's golang-go; without either the h2spec tests skip.
if [ "${1:-}" = test ] && [ ! -x tests/.tools/h2spec ]; then
  if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then PATH=$PATH:/usr/local/go/bin; fi
  if ! command -v go >/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "deps: installing golang-go (to build h2spec)"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends golang-go >/dev/null ||
      echo "deps: golang-go could not be installed (the h2spec tests skip)" >&2
  fi
  if command -v go >/dev/null; then
    mkdir -p tests/.tools
    (cd tests/h2spec && GOFLAGS=-mod=mod go build -o ../.tools/h2spec github.com/summerwind/h2spec/cmd/h2spec) ||
      echo "deps: h2spec could not be built (the h2spec tests skip)" >&2
  fi
fi

if [ "${2:-}" = "--venv" ]; then
  # (again when tests/requirements.txt has changed since)
  if [ ! -x .venv/bin/pytest ] || [ tests/requirements.txt -nt .venv/.requirements-installed ]; then
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
    touch .venv/.requirements-installed
  fi
fi
