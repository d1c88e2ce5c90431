#!/bin/bash
# Server cost of a new TLS 1.3 connection in the https race's conn cases
# (bench/lib/tls_conns.c: handshake, one GET of the 117-byte file with
# Connection: close, close_notify, close): brisk and nginx, one worker each,
# the race's configurations (bench/peers/*-https.conf.in; nginx with
# master_process off so that one process does all the work).
#
#   callgrind: user-space instructions per connection, the server under
#              valgrind, `tls_conns PORT /index.html CONNS SECS [--resume]`;
#              the difference of a SECS_FULL run and a SECS_BASE one, divided
#              by the difference of their connection counts: start-up, the
#              slots' first (full) handshakes and shutdown cancel out.
#   strace:    syscalls per connection (`strace -c -f`), the same difference.
#   race:      conn/s, `tls_conns ... SECS`, ROUNDS rounds alternating the
#              servers, servers on CPU SRV_CPU, the client on CLI_CPU, and
#              the server's CPU time per connection (/proc: user + system).
#
# usage: bench/extra/tls_conn_cost.sh [tool...]   tools: callgrind strace race
#        (default: callgrind strace)
# env:   BIN_DIR (build/bin), SERVERS ("brisk nginx"), MODES ("resume full"),
#        CONNS (10; race: 50), SECS_FULL (20), SECS_BASE (3), SECS (5),
#        ROUNDS (3), KEEP (a directory: the callgrind/strace files are kept
#        there), SRV_CPU (0), CLI_CPU (1)
set -u -o pipefail
cd "$(dirname "$0")/../.."
BIN_DIR=${BIN_DIR:-build/bin}
SERVERS=${SERVERS:-"brisk nginx"}
MODES=${MODES:-"resume full"}
CONNS=${CONNS:-10}
SECS_FULL=${SECS_FULL:-20}
SECS_BASE=${SECS_BASE:-3}
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-3}
KEEP=${KEEP:-}
SRV_CPU=${SRV_CPU:-0}
CLI_CPU=${CLI_CPU:-1}
PY=${PY:-python3}
TOOLS=${*:-callgrind strace}

. bench/extra/lib.sh
bench_tmp tls_conn_cost
bench_cert || exit 1
chmod 644 "$T/key.pem"
cc -O2 -Wall -o "$T/tls_conns" bench/lib/tls_conns.c -lssl -lcrypto || exit 1
bench_www

# conf NAME: renders the race's configuration for NAME on PORT; prints the argv.
conf() {
  local name=$1 dir="$T/$1-$PORT"
  mkdir -p "$dir"
  render_conf "bench/peers/$name-https.conf.in" "$dir/conf" \
    "$([ "$name" = nginx ] && as_root 'user root;')" -e "s|^master_process on;|master_process off;|"
  case $name in
    brisk) echo "$BIN_DIR/brisk -c $dir/conf --workers 1 --access-log off" ;;
    nginx) echo "nginx -e $dir/error.log -p $dir -c $dir/conf" ;;
  esac
}

flag() { [ "$1" = resume ] && echo --resume; }

# one_run TOOL NAME MODE SECS: prints "connections total".
one_run() {
  local tool=$1 name=$2 mode=$3 secs=$4 out pid res total cmd
  new_port
  cmd=$(conf "$name")
  out="$T/$tool-$name-$mode-$secs-$PORT"
  measured_start "$tool" "$out" $cmd
  pid=$MPID
  wait_port "$PORT" || { echo "$name did not start" >&2; cat "$out.log" >&2; kill "$pid"; return 1; }
  res=$("$T/tls_conns" "$PORT" /index.html "$CONNS" "$secs" $(flag "$mode"))
  local rc=$?
  [ -n "${DEBUG:-}" ] && echo "$name $mode $secs: $res" >&2
  measured_stop "$tool" "$pid"
  total=$(measured_total "$tool" "$out")
  if [ -n "$KEEP" ] && [ "$secs" = "$SECS_FULL" ]; then measured_keep "$tool" "$out"; fi
  if [ "$rc" != 0 ]; then # (a port taken by another program meanwhile, a crash)
    echo "$name: tls_conns failed ($res)" >&2
    tail -5 "$out.log" >&2
    return 1
  fi
  # the probe of wait_port is a connection too (no TLS): it cancels out
  echo "$res" | awk -v t="$total" '{print $2, t, $4, $6}'
}

cost() { # tool name mode: per connection, and the resumed share of the longer run
  local a b
  a=$(one_run "$1" "$2" "$3" "$SECS_BASE") || return 1
  b=$(one_run "$1" "$2" "$3" "$SECS_FULL") || return 1
  [ -n "${DEBUG:-}" ] && echo "$1 $2 $3: $a / $b" >&2
  echo "$a $b" | awk '{printf "%.1f  (%d - %d connections, resumed %d of %d)", ($6 - $2) / ($5 - $1), $5, $1, $7, $8}'
}

for tool in $TOOLS; do
  case $tool in
    callgrind | strace)
      for mode in $MODES; do
        for name in $SERVERS; do
          printf "%-10s %-6s %-6s %s per connection (tls_conns %s conns, %s s minus %s s)\n" \
            "$tool" "$name" "$mode" "$(cost "$tool" "$name" "$mode")" "$CONNS" "$SECS_FULL" "$SECS_BASE"
        done
      done
      ;;
    race)
      declare -A PID PORTS
      for name in $SERVERS; do
        new_port
        cmd=$(conf "$name")
        taskset -c "$SRV_CPU" $cmd >"$T/race-$name.log" 2>&1 &
        PID[$name]=$!
        PORTS[$name]=$PORT
        wait_port "$PORT" || { echo "$name did not start" >&2; exit 1; }
      done
      for mode in $MODES; do
        for r in $(seq 1 "$ROUNDS"); do
          line="$mode round $r:"
          for name in $SERVERS; do
            c0=$(cpu_ticks "${PID[$name]}")
            res=$(taskset -c "$CLI_CPU" "$T/tls_conns" "${PORTS[$name]}" /index.html "${RCONNS:-50}" "$SECS" $(flag "$mode"))
            c1=$(cpu_ticks "${PID[$name]}")
            n=$(echo "$res" | awk '{print $2}')
            us=$(echo "$c0 $c1 $n $(getconf CLK_TCK)" | awk '{printf "%.1f", ($2 - $1) / $4 * 1e6 / $3}')
            line="$line $name $(echo "$res" | awk '{print $12 " conn/s (resumed " $4 "/" $6 ")"}') $us us CPU/conn;"
          done
          echo "$line"
        done
      done
      for name in $SERVERS; do kill -TERM "${PID[$name]}"; wait "${PID[$name]}" 2>/dev/null; done
      ;;
  esac
done
