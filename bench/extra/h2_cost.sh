#!/bin/bash
# Per-request cost of HTTP/2 for the https race's h2 case (117-byte file):
# brisk (over TLS and h2c) and h2o (over TLS), each with one worker, the
# https race's configurations (bench/peers/*-https.conf.in).
#
#   callgrind: user-space instructions per request, the server under
#              valgrind, `h2load -n N -c CONNS -m STREAMS`; the difference of a
#              run of N_FULL and one of N_BASE requests, divided: start-up,
#              handshakes and shutdown cancel out.
#   strace:    syscalls per request (`strace -c -f`), the same difference.
#   race:      req/s, `h2load -t1 -c50 -m10 -D SECS`, ROUNDS rounds
#              alternating brisk and h2o (the https race's h2-small case),
#              servers on CPU SRV_CPU, h2load on CLI_CPU (as the race pins
#              them on a 2-core machine), and the server's CPU time per
#              request (/proc: user + system), and h2load's CPU use (100%:
#              the load generator, not the server, is the limit).
#
# usage: bench/extra/h2_cost.sh [tool...]   tools: callgrind strace race
#        (default: callgrind strace)
# env:   BIN_DIR (build/bin), SERVERS ("brisk h2o brisk-h2c"), N_FULL (20000),
#        N_BASE (100), CONNS (10), STREAMS (10), SECS (5), ROUNDS (3),
#        KEEP (a directory: the callgrind files are kept there),
#        SRV_CPU (0), CLI_CPU (1)
set -u -o pipefail
cd "$(dirname "$0")/../.."
BIN_DIR=${BIN_DIR:-build/bin}
SERVERS=${SERVERS:-"brisk h2o brisk-h2c"}
N_FULL=${N_FULL:-20000}
N_BASE=${N_BASE:-100}
CONNS=${CONNS:-10}
STREAMS=${STREAMS:-10}
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-3}
KEEP=${KEEP:-}
SRV_CPU=${SRV_CPU:-0}
CLI_CPU=${CLI_CPU:-1}
PY=${PY:-python3}
TOOLS=${*:-callgrind strace}

. bench/extra/lib.sh
bench_tmp h2_cost
bench_cert || exit 1
bench_www

# conf NAME: renders the race's configuration for NAME on PORT; prints the argv.
conf() {
  local name=$1 dir="$T/$1-$PORT" tmpl
  mkdir -p "$dir"
  case $name in brisk*) tmpl=bench/peers/brisk-https.conf.in ;; h2o) tmpl=bench/peers/h2o-https.conf.in ;; esac
  render_conf "$tmpl" "$dir/conf" "$([ "$name" = h2o ] && as_root 'user: root')"
  if [ "$name" = brisk-h2c ]; then # the same, on a plain listener (prior knowledge)
    sed -i -e "s|^listen = \(.*\) ssl$|listen = \1|" "$dir/conf"
  fi
  case $name in
    brisk*) echo "$BIN_DIR/brisk -c $dir/conf --workers 1 --access-log off" ;;
    h2o) echo "h2o -c $dir/conf" ;;
  esac
}

url() {
  case $1 in brisk-h2c) echo "http://127.0.0.1:$PORT/index.html" ;; *) echo "https://127.0.0.1:$PORT/index.html" ;; esac
}

h2load_n() { # name n: prints the requests that succeeded
  h2load -t1 -n "$2" -c "$CONNS" -m "$STREAMS" "$(url "$1")" |
    awk '/^requests:/ {for (i = 1; i < NF; i++) if ($(i + 1) ~ /^succeeded/) print $i}'
}

# one_run TOOL NAME N: prints "requests total".
one_run() {
  local tool=$1 name=$2 n=$3 out pid got total cmd
  new_port
  cmd=$(conf "$name")
  out="$T/$tool-$name-$n-$PORT"
  measured_start "$tool" "$out" $cmd
  pid=$MPID
  wait_port "$PORT" || { echo "$name did not start" >&2; cat "$out.log" >&2; kill "$pid"; return 1; }
  got=$(h2load_n "$name" "$n")
  measured_stop "$tool" "$pid"
  sleep 1 # h2o's key process (neverbleed) writes its profile as it exits
  total=$(measured_total "$tool" "$out")
  if [ -n "$KEEP" ] && [ "$n" = "$N_FULL" ]; then measured_keep "$tool" "$out"; fi
  echo "$got $total"
}

cost() { # tool name: per request
  local a b
  a=$(one_run "$1" "$2" "$N_BASE") || return 1
  b=$(one_run "$1" "$2" "$N_FULL") || return 1
  [ -n "${DEBUG:-}" ] && echo "$1 $2: $a / $b" >&2
  echo "$a $b" | awk '{printf "%.2f", ($4 - $2) / ($3 - $1)}'
}

for tool in $TOOLS; do
  case $tool in
    callgrind | strace)
      for name in $SERVERS; do
        case $name in brisk-h2c) [ "$tool" = strace ] || true ;; esac
        printf "%-10s %-10s %12s per request (h2load -n %s -c %s -m %s, minus -n %s)\n" \
          "$tool" "$name" "$(cost "$tool" "$name")" "$N_FULL" "$CONNS" "$STREAMS" "$N_BASE"
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
      for r in $(seq 1 "$ROUNDS"); do
        line="round $r:"
        for name in $SERVERS; do
          PORT=${PORTS[$name]}
          c0=$(cpu_ticks "${PID[$name]}")
          /usr/bin/time -f "%U %S" -o "$T/h2load.time" \
            taskset -c "$CLI_CPU" h2load -t1 -c50 -m10 -D "$SECS" "$(url "$name")" >"$T/h2load.out"
          c1=$(cpu_ticks "${PID[$name]}")
          rps=$(awk '/^finished in/ {print $4}' "$T/h2load.out")
          nreq=$(awk '/^requests:/ {for (i = 1; i < NF; i++) if ($(i + 1) ~ /^succeeded/) print $i}' "$T/h2load.out")
          [ -n "${DEBUG:-}" ] && grep -E '^traffic|^requests' "$T/h2load.out" >&2
          us=$(echo "$c0 $c1 $nreq $(getconf CLK_TCK)" | awk '{printf "%.2f", ($2 - $1) / $4 * 1e6 / $3}')
          cli=$(awk -v s="$SECS" '{printf "%.0f", ($1 + $2) * 100 / s}' "$T/h2load.time")
          line="$line $name $rps req/s ($us us CPU/req, h2load CPU $cli%)"
        done
        echo "$line (h2load -t1 -c50 -m10 -D $SECS)"
      done
      for name in $SERVERS; do kill -TERM "${PID[$name]}"; wait "${PID[$name]}" 2>/dev/null; done
      ;;
  esac
done
