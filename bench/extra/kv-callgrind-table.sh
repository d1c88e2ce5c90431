#!/bin/bash
# The kv race's commands under callgrind, brisk-kv and redis-server side by
# side: user-space instructions per command (bench/extra/kv-callgrind.sh),
# written as a markdown table to bench/results/kv-callgrind.md (or $1).
# Instruction counts do not depend on the machine's load: the wall-clock
# races do. About 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench/results/kv-callgrind.md}
script="return redis.call('INCR', KEYS[1])"
sha=$(printf '%s' "$script" | sha1sum | cut -d' ' -f1)
cases=(
  "SET -P 16|100000|16|-t set -d 64"
  "GET -P 16|100000|16|-t get -d 64"
  "ZADD -P 16|100000|16|-t zadd -d 64"
  "INCR -P 16|100000|16|-t incr"
  "SET -P 1|20000|1|-t set -d 64"
  "GET -P 1|20000|1|-t get -d 64"
  "EVALSHA INCR -P 16|50000|16|evalsha $sha 1 counter"
  "EVALSHA INCR -P 1|20000|1|evalsha $sha 1 counter"
  "XADD -P 16|100000|16|xadd s * f v"
  "XADD -P 1|20000|1|xadd s * f v"
)
rows=()
for c in "${cases[@]}"; do
  IFS='|' read -r name n depth args <<<"$c"
  vals=()
  for who in brisk redis; do
    set -f  # the '*' of XADD stays a word
    # shellcheck disable=SC2086
    line=$(PREP="SCRIPT LOAD \"$script\"" bench/extra/kv-callgrind.sh "$who" "$n" "$depth" -- $args 2>/dev/null | grep ' Ir/command')
    set +f
    vals+=("$(sed -E 's/.* ([0-9]+) Ir\/command.*/\1/' <<<"$line")")
    echo "$name $who: ${vals[-1]} Ir/command" >&2
  done
  ratio=$(awk -v a="${vals[0]}" -v b="${vals[1]}" 'BEGIN { printf "%.2fx", a / b }')
  rows+=("| $name | \`redis-benchmark -c 50 -P $depth -n $n $args\` | $(printf "%'d" "${vals[0]}") | $(printf "%'d" "${vals[1]}") | $ratio |")
done
{
  echo "# brisk-kv vs redis-server: instructions per command (callgrind)"
  echo
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') by \`bench/extra/kv-callgrind-table.sh\` at $(git rev-parse --short HEAD):"
  echo "each server under \`valgrind --tool=callgrind\`, a warm-up of N/5 commands, counters zeroed,"
  echo "then N commands from redis-benchmark (50 connections); user-space instructions (Ir) of the"
  echo "server process / N. $(build/bin/brisk-kv --version 2>/dev/null | head -1); $(redis-server --version | cut -d' ' -f1-3)."
  echo "Lower is better; the ratio is brisk / Redis. Kernel time (syscalls) is not counted: at -P 1"
  echo "it dominates both servers (one read and one write per command)."
  echo
  echo "| command | load | brisk-kv Ir/command | Redis Ir/command | brisk / Redis |"
  echo "|---|---|--:|--:|--:|"
  printf '%s\n' "${rows[@]}"
} >"$out"
echo "wrote $out" >&2
