#!/bin/bash
# Checks the include graph of src/http against its layers (DESIGN.md):
#
#   core  <  vocabulary, configuration (http.h parse.h mime.h config.h fcache.h)
#         <  worker.h (a worker's state)  <  exchange.h (one request/response)
#         <  protocol (conn.h: conn.c h1.c respond.c; h2.h: h2.c, hpack.h: HPACK encoder)
#            | handlers (static cgi files status)
#         <  public API (api.h: api_*.c route.c)  <  server (server.c)
#
# The protocol and the handlers meet only in the exchange: neither includes
# the other's headers; nothing below the API includes brisk/brisk.h; core
# includes nothing of http. Prints each offending include; exit 1 if any.
cd "$(dirname "$0")/.." || exit 2
bad=0
low="core/|http/http.h|http/parse.h|http/mime.h|http/config.h|http/fcache.h"
allowed() { # file -> regex of the headers it may include
  case $1 in
    src/core/*) echo "core/" ;;
    src/http/http.h|src/http/parse.*|src/http/mime.*|src/http/config.*|src/http/fcache.*)
      echo "$low" ;;
    src/http/worker.h) echo "$low" ;;
    src/http/exchange.*) echo "$low|http/worker.h|http/exchange.h" ;;
    src/http/conn.*|src/http/h1.c|src/http/respond.c|src/http/h2.*) echo "$low|http/worker.h|http/exchange.h|http/conn.h|http/h2.h|http/hpack.h" ;;
    src/http/hpack.*) echo "http/hpack.h" ;; # (the protocol's; stands alone)
    src/http/static.*|src/http/cgi.*|src/http/files.*|src/http/status.*)
      echo "$low|http/worker.h|http/exchange.h|http/static.h|http/cgi.h|http/files.h|http/status.h" ;;
    src/http/api*|src/http/route.c)
      echo "$low|http/worker.h|http/exchange.h|http/files.h|http/server.h|http/api.h|brisk/brisk.h" ;;
    src/http/server.*) echo "$low|http/worker.h|http/exchange.h|http/conn.h|http/cgi.h|http/status.h|http/server.h" ;;
    *) echo "UNKNOWN" ;;
  esac
}
for f in src/core/*.[ch] src/http/*.[ch]; do
  ok=$(allowed "$f")
  if [ "$ok" = UNKNOWN ]; then
    echo "$f: not in any layer (add it to scripts/check_layers.sh)"; bad=1; continue
  fi
  while read -r inc; do
    if ! echo "$inc" | grep -Eq "^($ok)"; then
      echo "$f: includes $inc"; bad=1
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done
exit $bad
