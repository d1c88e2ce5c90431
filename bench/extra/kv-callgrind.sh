#!/bin/bash
# Instructions per command of brisk-kv or redis-server under a redis-benchmark
# load, with callgrind: the server runs under valgrind, takes a warm-up of
# WARM commands, then its counters are zeroed (callgrind_control -z), N
# commands are sent, the counters dumped (callgrind_control -d); Ir / N.
#
#   bench/extra/kv-callgrind.sh brisk|redis N PIPELINE [-- redis-benchmark args]
#   e.g. bench/extra/kv-callgrind.sh brisk 200000 16 -- -t set -d 64
#        bench/extra/kv-callgrind.sh redis 50000 1 -- xadd s '*' f v
# Env: BRISK_KV (default build/bin/brisk-kv), PREP="cmd args" (a redis-cli
# command line, shell-quoted, run before the warm-up: PREP="SCRIPT LOAD '...'"), CG_KEEP=DIR (keep the
# callgrind output there, for callgrind_annotate), CG_CONNS (50).
set -euo pipefail
who=$1 n=$2 depth=$3
shift 3
[ "${1:-}" = -- ] && shift
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=${CG_KEEP:-$(mktemp -d /tmp/kv-cg.XXXXXX)}
mkdir -p "$dir"
case $who in
  brisk) srv=("${BRISK_KV:-build/bin/brisk-kv}" --port "$port" --bind 127.0.0.1 --appendonly no --save '' --dir "$dir") ;;
  redis) srv=(redis-server --port "$port" --bind 127.0.0.1 --appendonly no --save '' --dir "$dir") ;;
  *) echo "brisk or redis" >&2; exit 2 ;;
esac
valgrind -q --tool=callgrind --callgrind-out-file="$dir/cg.out" "${srv[@]}" >"$dir/server.log" 2>&1 &
vpid=$!
trap 'kill $vpid 2>/dev/null || true' EXIT
for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
[ -n "${PREP:-}" ] && eval "redis-cli -p $port $PREP" >/dev/null
# -n before the command: redis-benchmark takes every word after a command's
# name as one of its arguments
bench=(redis-benchmark -p "$port" -c "${CG_CONNS:-50}" -P "$depth" -q)
"${bench[@]}" -n $((n / 5 > 1000 ? n / 5 : 1000)) "$@" >/dev/null
callgrind_control -z "$vpid" >/dev/null
"${bench[@]}" -n "$n" "$@" >/dev/null
callgrind_control -d "$vpid" >/dev/null
sleep 0.5
f=$(ls -t "$dir"/cg.out.* | head -1)
ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$f")
echo "$who n=$n P=$depth $*: $ir Ir, $((ir / n)) Ir/command ($f)"
