#!/usr/bin/env bash
# A quick side-by-side kv race, for a figure in a few minutes: brisk-kv and
# redis-server 7 pinned to CPU 0, redis-benchmark -c 50 on CPU 1, 3
# alternating rounds per case, the median of the round-by-round ratios.
# The full race with its notes is `bench/run.sh --races kv`.
# Usage: bench/extra/kv_quick_race.sh [BUILD_BIN_DIR]   (default build/bin)
set -u
cd "$(dirname "$0")/../.."
BIN=${1:-build/bin}/brisk-kv
DIR=$(mktemp -d)
trap 'kill $B $R 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT
P1=17701 P2=17702
taskset -c 0 "$BIN" --port $P1 --bind 127.0.0.1 --appendonly no --save '' --dir "$DIR" >/dev/null 2>&1 &
B=$!
taskset -c 0 redis-server --port $P2 --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" \
  --dbfilename redis.rdb >/dev/null 2>&1 &
R=$!
sleep 0.5
LUA="return redis.call('INCR', KEYS[1])"
SHA=$(redis-cli -p $P1 script load "$LUA")
redis-cli -p $P2 script load "$LUA" >/dev/null
run() { # port depth n command...
  local port=$1 p=$2 n=$3
  shift 3
  taskset -c 1 redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -P "$p" -n "$n" -q "$@" 2>/dev/null |
    tr '\r' '\n' | grep -oE '[0-9.]+ requests per second' | tail -1 | awk '{print $1}'
}
cases=(
  "16 1000000 -t set -d 64" "16 1000000 -t get -d 64" "16 1000000 -t zadd"
  "1 200000 -t set -d 64" "1 200000 -t get -d 64" "1 200000 -t zadd"
  "16 1000000 evalsha $SHA 1 counter" "1 200000 evalsha $SHA 1 counter"
  "16 1000000 xadd s * f v" "1 200000 xadd s * f v"
)
set -f # the stream ID '*' stays a word
printf '| case | brisk-kv / Redis per round | median | last round, ops/s |\n|---|---|--:|---|\n'
for c in "${cases[@]}"; do
  ratios=()
  for _ in 1 2 3; do
    b=$(run $P1 $c)
    x=$(run $P2 $c)
    ratios+=("$(awk -v a="${b:-0}" -v b="${x:-0}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')")
  done
  med=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n 2p)
  printf '| -P %s: %s | %s | **%sx** | %s vs %s |\n' "${c%% *}" "${c#* * }" "${ratios[*]}" "$med" "$b" "$x"
done
