#!/bin/bash
# Per-request cost of the HTTP hot path, repeatable on a loaded machine:
# user-space instructions (callgrind) and syscalls (strace -c -f) per request
# for brisk's static 117-byte file, brisk-hello and brisk-echo, keep-alive
# (1 request in flight per connection) and pipelined (16 per connection),
# and the same for the limit probe (bench/peers/probe.c) answering with the
# exact bytes brisk sent: the floor.
#
# Each figure is the difference of two runs of the same server, one with
# warm-up + 1 round and one with warm-up + 1 + ROUNDS rounds, divided by the
# extra requests: start-up, warm-up and shutdown cancel out.
#
# static-tls is the static case over HTTPS/1.1 (TLS 1.3, a self-signed
# P-256 certificate; the handshakes cancel out like the start-up).
#
# usage: bench/extra/http_cost.sh [case...]   cases: static hello echo static-tls
#        (default: static hello echo)
# env:   BIN_DIR (build/bin), CONNS (10), ROUNDS_KA (200), ROUNDS_P16 (40),
#        WARM (5), TOOLS ("callgrind strace"), PROBE (1: also measure the probe)
set -u -o pipefail
cd "$(dirname "$0")/../.."
BIN_DIR=${BIN_DIR:-build/bin}
CONNS=${CONNS:-10}
ROUNDS_KA=${ROUNDS_KA:-200}
ROUNDS_P16=${ROUNDS_P16:-40}
WARM=${WARM:-5}
TOOLS=${TOOLS:-"callgrind strace"}
PROBE=${PROBE:-1}
PY=${PY:-python3}
CASES=${*:-static hello echo}

. bench/extra/lib.sh
bench_tmp http_cost
cc -O2 -o "$T/probe" bench/peers/probe.c || exit 1
bench_www

capture() { # port path out: the exact response bytes to one GET
  $PY - "$@" <<'EOF'
import socket, sys
port, path, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(65536)
head = buf.split(b"\r\n\r\n", 1)[0]
n = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0]
while len(buf) < len(head) + 4 + n:
    buf += s.recv(65536)
open(out, "wb").write(buf)
EOF
}

drive() { # port path depth rounds [proto]: prints the number of requests
  $PY bench/lib/loadclient.py "${5:-http}" 127.0.0.1 "$1" "$2" "$CONNS" "$4" --depth "$3" | awk '{print $2}'
}

proto_of() {
  case $1 in *-tls) echo https ;; *) echo http ;; esac
}

# server_cmd NAME: the argv of one server (as words), after PORT is set.
server_cmd() {
  case $1 in
    static) echo "$BIN_DIR/brisk --listen 127.0.0.1:$PORT --root $T/www --workers 1 --access-log off" ;;
    static-tls) echo "$BIN_DIR/brisk --listen 127.0.0.1:$PORT ssl --ssl-cert $T/cert.pem --ssl-key $T/key.pem --root $T/www --workers 1 --access-log off" ;;
    hello) echo "$BIN_DIR/brisk-hello --listen 127.0.0.1:$PORT --workers 1" ;;
    echo) echo "$BIN_DIR/brisk-echo --listen 127.0.0.1:$PORT --workers 1" ;;
    probe-*) echo "$T/probe $PORT $T/resp-${1#probe-}.bin" ;;
  esac
}

path_of() {
  case $1 in static|static-tls|probe-static) echo /index.html ;; echo|probe-echo) echo "/?value=hello" ;; *) echo / ;; esac
}

# one_run TOOL NAME DEPTH ROUNDS: runs the server on a new PORT (the caller
# sets it: this runs in a subshell) under TOOL, with warm-up then ROUNDS
# rounds; prints "requests total".
one_run() {
  local tool=$1 name=$2 depth=$3 rounds=$4 out pid n total
  # Unique per run: callgrind's files are collected by this prefix.
  out="$T/$tool-$name-d$depth-r$rounds-$PORT"
  local cmd; cmd=$(server_cmd "$name")
  measured_start "$tool" "$out" $cmd
  pid=$MPID
  wait_port "$PORT" || { echo "server $name did not start" >&2; cat "$out.log" >&2; kill "$pid"; return 1; }
  drive "$PORT" "$(path_of "$name")" 1 "$WARM" "$(proto_of "$name")" >/dev/null || { kill "$pid"; return 1; }
  n=$(drive "$PORT" "$(path_of "$name")" "$depth" "$rounds" "$(proto_of "$name")") || { kill "$pid"; return 1; }
  measured_stop "$tool" "$pid"
  total=$(measured_total "$tool" "$out")
  echo "$n $total"
}

# cost TOOL NAME DEPTH ROUNDS: per-request figure from two runs.
cost() {
  local a b
  new_port
  a=$(one_run "$1" "$2" "$3" 1) || return 1
  new_port
  b=$(one_run "$1" "$2" "$3" $((1 + $4))) || return 1
  [ -n "${DEBUG:-}" ] && echo "$1 $2 depth $3: $a / $b" >&2
  echo "$a $b" | awk '{printf "%.2f", ($4 - $2) / ($3 - $1)}'
}

case " $CASES " in *" static-tls "*) bench_cert ;; esac
printf "%-14s %-5s %14s %14s\n" case mode "instr/req" "syscalls/req"
for c in $CASES; do
  names=$c
  if [ "$PROBE" = 1 ] && [ "$(proto_of "$c")" = http ]; then
    new_port
    cmd=$(server_cmd "$c")
    $cmd >/dev/null 2>&1 &
    spid=$!
    wait_port "$PORT" && capture "$PORT" "$(path_of "$c")" "$T/resp-$c.bin"
    kill -TERM "$spid"; wait "$spid" 2>/dev/null
    names="$c probe-$c"
  fi
  for name in $names; do
    for mode in ka p16; do
      if [ $mode = ka ]; then depth=1 rounds=$ROUNDS_KA; else depth=16 rounds=$ROUNDS_P16; fi
      ir=- sc=-
      case " $TOOLS " in *" callgrind "*) ir=$(cost callgrind "$name" $depth $rounds) ;; esac
      case " $TOOLS " in *" strace "*) sc=$(cost strace "$name" $depth $rounds) ;; esac
      printf "%-14s %-5s %14s %14s\n" "$name" $mode "$ir" "$sc"
    done
  done
done
