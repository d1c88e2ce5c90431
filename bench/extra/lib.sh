# Shared by bench/extra's cost scripts (tls_conn_cost.sh, h2_cost.sh,
# http_cost.sh): sourced after `cd` to the repository root, with PY set.
# Files go under $T (bench_tmp makes it and removes it at exit).

bench_tmp() { # prefix: T, a new temporary directory, removed at exit
  T=$(mktemp -d "/tmp/$1.XXXXXX")
  trap 'rm -rf "$T"' EXIT
}

bench_cert() { # $T/cert.pem and $T/key.pem: self-signed P-256, for localhost and 127.0.0.1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1
}

bench_www() { # $T/www/index.html: the 117-byte file of the static race (bench/lib/static_bench.py)
  mkdir -p "$T/www"
  $PY - "$T/www/index.html" <<'EOF'
import sys
body = ("<!doctype html>\n<html><head><title>brisk</title></head>"
        "<body><p>Hello from the brisk benchmark.</p></body></html>\n")
body = body.replace("</p>", " " * (117 - len(body)) + "</p>", 1)
open(sys.argv[1], "w").write(body)
EOF
}

new_port() { # PORT: a port nobody listens on now
  PORT=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
}

wait_port() { # port: until it accepts or 60 s pass
  $PY - "$1" <<'EOF'
import socket, sys, time
end = time.time() + 60
while time.time() < end:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
EOF
}

# render_conf TEMPLATE OUT USER_LINE [sed args...]: a race configuration
# (bench/peers/*.conf.in) for PORT, $T/www, $T's certificate, with its
# files under OUT's directory; USER_LINE replaces @USER_DIRECTIVE@ (a
# server that refuses to run as root without it).
render_conf() {
  local tmpl=$1 out=$2 user=$3
  shift 3
  sed -e "s|@USER_DIRECTIVE@|$user|" \
      -e "s|@PREFIX@|$(dirname "$out")|g" -e "s|@PORT@|$PORT|g" -e "s|@ROOT@|$T/www|g" \
      -e "s|@CERT@|$T/cert.pem|g" -e "s|@KEY@|$T/key.pem|g" "$@" "$tmpl" >"$out"
}

as_root() { # line: prints it when running as root (for USER_LINE)
  [ "$(id -u)" = 0 ] && echo "$1"
}

# measured_start TOOL OUT CMD...: the server under callgrind (OUT.PID files)
# or strace -c -f (OUT), its output in OUT.log; MPID is the tool's pid.
measured_start() {
  local tool=$1 out=$2
  shift 2
  if [ "$tool" = callgrind ]; then
    valgrind -q --tool=callgrind --callgrind-out-file="$out.%p" "$@" >"$out.log" 2>&1 &
  else
    strace -c -f -o "$out" "$@" >"$out.log" 2>&1 &
  fi
  MPID=$!
}

measured_stop() { # tool pid: stops the server (strace passes no SIGTERM on: its child is told)
  if [ "$1" = strace ]; then kill -TERM $(pgrep -P "$2") 2>/dev/null; else kill -TERM "$2"; fi
  wait "$2" 2>/dev/null
}

measured_total() { # tool out: the run's instructions (all processes) or syscalls
  if [ "$1" = callgrind ]; then
    cat "$2".[0-9]* 2>/dev/null | awk '/^summary:/ {s += $2} END {print s + 0}'
  else
    awk '$NF == "total" {print $(NF-2) + 0}' "$2"
  fi
}

measured_keep() { # tool out: copies the run's files to $KEEP
  mkdir -p "$KEEP"
  if [ "$1" = callgrind ]; then cp "$2".[0-9]* "$KEEP/"; else cp "$2" "$KEEP/"; fi
}

cpu_ticks() { # pid: user + system ticks of the process and its threads
  awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$1/stat"
}
