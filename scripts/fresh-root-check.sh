#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12, proven: builds a minimal
# Debian 12 root with debootstrap, gives it only git, make, curl and CA
# certificates (what a new user starts from), clones this repository into it
# and runs there
#   make run   -> GET / answers 200 on :8080 and brisk-kv answers PING on :6379
#   make test  -> passes (its integration suites once: ASAN_INTEGRATION=no)
# Called by .ci/run after the host's own `make test`. Needs root (chroot,
# mounts). The root lives in $FRESH_ROOT (default /var/tmp/brisk-fresh-root)
# and is removed at the end unless KEEP_ROOT=1.
#
# Usage: scripts/fresh-root-check.sh [--run-only]
#   --run-only   check `make run` only (skips the chroot's `make test`)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
root=${FRESH_ROOT:-/var/tmp/brisk-fresh-root}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
run_only=0
[ "${1:-}" = "--run-only" ] && run_only=1

log() { printf 'fresh-root: %s\n' "$*"; }
[ "$(id -u)" -eq 0 ] || { echo "fresh-root: needs root (chroot and mounts)" >&2; exit 2; }

mounts=()
cleanup() {
  local m
  # Anything the checks left running inside the root holds its mounts.
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null || true
  done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    m=${mounts[$i]}
    umount -l "$m" 2>/dev/null || true
  done
  if [ "${KEEP_ROOT:-0}" != 1 ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT

command -v debootstrap >/dev/null || {
  log "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
}

rm -rf --one-file-system "$root"
mkdir -p "$root"
t0=$(date +%s)
log "debootstrap bookworm (minbase) into $root"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
  { tail -30 "$root.debootstrap.log"; exit 1; }
rm -f "$root.debootstrap.log"

# The registries are reached through a proxy with its own CA: the root gets
# the host's bundle and the same environment pointing at it (PIP_CERT,
# SSL_CERT_FILE, ...), and the host's apt settings (mirror, validity checks).
cp /etc/resolv.conf "$root/etc/resolv.conf"
[ -f /etc/apt/sources.list.d/debian.sources ] && cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/"
[ -f /etc/apt/sources.list.d/debian.sources ] && rm -f "$root/etc/apt/sources.list"
for f in /etc/apt/apt.conf.d/99*; do [ -f "$f" ] && cp "$f" "$root/etc/apt/apt.conf.d/"; done
mkdir -p "$root/usr/local/share/host-ca"
bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
cp "$bundle" "$root/usr/local/share/host-ca/ca-certificates.crt"
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"

for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sys "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/pts) mount --bind /dev/pts "$root/dev/pts" ;;
  esac
  mounts+=("$root/$m")
done
mkdir -p "$root/dev/shm" "$root/src"
mount --bind "$src" "$root/src"; mounts+=("$root/src")
mount -o remount,bind,ro "$root/src" 2>/dev/null || true

ca=/usr/local/share/host-ca/ca-certificates.crt
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=$ca PIP_CERT=$ca REQUESTS_CA_BUNDLE=$ca CURL_CA_BUNDLE=$ca \
    GIT_SSL_CAINFO=$ca NODE_EXTRA_CA_CERTS=$ca DEBIAN_FRONTEND=noninteractive \
    /bin/bash -c "$1"
}

log "apt-get install git make ca-certificates curl (what a new user has)"
in_root 'apt-get update -qq && apt-get install -y -qq --no-install-recommends git make ca-certificates curl >/dev/null'
# The committed tree, as a new user's clone would have it.
in_root 'git config --global --add safe.directory "*" && git clone -q /src /root/brisk'
log "root ready in $(( $(date +%s) - t0 )) s"

# 1. make run: both servers answer.
log "make run"
in_root 'cd /root/brisk && setsid make run >/root/make-run.log 2>&1 & echo $! >/root/make-run.pid'
ok=0
for _ in $(seq 1 900); do
  if in_root 'curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:8080/ 2>/dev/null | grep -qx 200 &&
              exec 3<>/dev/tcp/127.0.0.1/6379 && printf "PING\r\n" >&3 && timeout 2 head -c 7 <&3 | grep -q PONG'; then
    ok=1; break
  fi
  sleep 1
done
if [ $ok != 1 ]; then
  log "make run FAILED: GET / did not answer 200 or brisk-kv did not answer PONG"
  in_root 'tail -40 /root/make-run.log' || true
  exit 1
fi
log "make run: GET / -> 200, brisk-kv PING -> PONG ($(( $(date +%s) - t0 )) s)"
in_root 'kill -INT -- -$(cat /root/make-run.pid) 2>/dev/null; sleep 2; kill -9 -- -$(cat /root/make-run.pid) 2>/dev/null; true'

# 2. make test.
if [ $run_only = 0 ]; then
  log "make test"
  # Everything a new user's make test installs, builds and runs, but the
  # integration suites once (optimised build): .ci/run has just run them
  # against the sanitizer build of the same tree on the host, and what this
  # root checks is what a fresh machine must install (13 minutes saved).
  if ! in_root 'cd /root/brisk && make test ASAN_INTEGRATION=no' >"$root.make-test.log" 2>&1; then
    tail -60 "$root.make-test.log"
    log "make test FAILED in the fresh root"
    rm -f "$root.make-test.log"
    exit 1
  fi
  tail -3 "$root.make-test.log"
  rm -f "$root.make-test.log"
  log "make test passed in the fresh root ($(( $(date +%s) - t0 )) s in all)"
fi
log "OK"
