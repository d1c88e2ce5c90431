#!/bin/bash
# brisk-kv: appendonly no vs appendonly yes + everysec, alternating, 3 rounds.
cd "$(dirname "$0")/../.."
B=${BIN_DIR:-build/bin}/brisk-kv
D=$(mktemp -d)
for r in 1 2 3; do
  for mode in no everysec; do
    rm -f $D/*.aof $D/appendonly* 2>/dev/null
    if [ $mode = no ]; then args="--appendonly no"; else args="--appendonly yes --appendfsync everysec"; fi
    taskset -c 0 $B --port 17011 --dir $D --save "" $args >/dev/null 2>&1 &
    pid=$!
    sleep 0.4
    out=$(taskset -c 1 redis-benchmark -p 17011 -c 50 -P 16 -d 64 -n 1000000 -t set -q 2>/dev/null | tr '\r' '\n' | grep "^SET:.*requests per second" | tail -1)
    echo "round $r $mode: $out"
    kill $pid; wait $pid 2>/dev/null
  done
done
rm -rf $D
