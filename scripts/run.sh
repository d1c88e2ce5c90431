#!/usr/bin/env bash
# make run: brisk serving www/ in the foreground, brisk-kv beside it;
# both stop on Ctrl-C.
set -u
bin=${1:-build/bin}
cd "$(dirname "$0")/.."
kv_pid=""
if [ -x "$bin/brisk-kv" ]; then
  mkdir -p build/run
  "$bin/brisk-kv" --port 6379 --dir build/run --save "" &
  kv_pid=$!
  echo "brisk-kv: redis-cli -p 6379 (data in build/run/)"
fi
cleanup() { [ -n "$kv_pid" ] && kill "$kv_pid" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
trap 'exit 0' INT TERM
echo "brisk: http://127.0.0.1:8080/ (Ctrl-C stops both)"
"$bin/brisk" -c conf/brisk.conf &
wait $!
