#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.c) with clang, AddressSanitizer
# and UndefinedBehaviorSanitizer into $FUZZ_BUILD (default build-fuzz/).
# The brisk sources are compiled here with the same flags (no CMake, no
# edits to src/): each target links the objects it needs.
# With FUZZ_COVERAGE=1 the targets are built instead with clang's
# source-based coverage (no sanitizers) into $FUZZ_BUILD/cov, for
# `fuzz/run.sh --coverage`.
# Usage: fuzz/build.sh [TARGET...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${FUZZ_BUILD:-$ROOT/build-fuzz}

find_cc() {
    for c in "${CC_FUZZ:-}" clang clang-16 clang-15 clang-14; do
        [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && { echo "$c"; return; }
    done
    echo "fuzz: clang not found (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
    exit 1
}
CC=$(find_cc)

# brisk-kv's scripting includes Lua 5.1's headers (Debian: liblua5.1-0-dev).
LUA_CFLAGS=$(pkg-config --cflags lua5.1 2>/dev/null || echo -I/usr/include/lua5.1)
LUA_LIBS=$(pkg-config --libs lua5.1-cjson lua5.1-bitop lua5.1 2>/dev/null ||
           echo -llua5.1-cjson -llua5.1-bitop -llua5.1)
CFLAGS=(-std=c17 -D_GNU_SOURCE -DBRISK_VERSION='"fuzz"' -I"$ROOT/src" -I"$ROOT/include"
        $LUA_CFLAGS -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter)
if [ "${FUZZ_COVERAGE:-0}" = 1 ]; then
    OUT=$OUT/cov
    CFLAGS+=(-fprofile-instr-generate -fcoverage-mapping)
    LIB_CFLAGS=("${CFLAGS[@]}")
    LDFLAGS=(-fsanitize=fuzzer -fprofile-instr-generate)
else
    CFLAGS+=(-fsanitize=address,undefined -fno-sanitize-recover=all)
    LIB_CFLAGS=("${CFLAGS[@]}" -fsanitize=fuzzer-no-link)
    LDFLAGS=(-fsanitize=fuzzer,address,undefined)
fi

mkdir -p "$OUT/obj"

# Object for a source file, rebuilt when the source, any header under src/
# or this script is newer than it.
newest_header=$(find "$ROOT/src" "$ROOT/include" -name '*.h' -printf '%T@\n' | sort -n | tail -1)
obj_of() { local s=${1#"$ROOT"/}; echo "$OUT/obj/${s//\//_}.o"; }
stale() {
    local src=$1 obj=$2
    [ -f "$obj" ] || return 0
    [ "$src" -nt "$obj" ] && return 0
    [ "$0" -nt "$obj" ] && return 0
    local t; t=$(stat -c %Y "$obj")
    awk -v a="$newest_header" -v b="$t" 'BEGIN { exit !(a > b) }'
}
compile() { # src extra-flags...
    local src=$1; shift
    local obj; obj=$(obj_of "$src")
    if stale "$src" "$obj"; then
        "$CC" "${LIB_CFLAGS[@]}" "$@" -c "$src" -o "$obj"
    fi
}

# The libraries every target may draw from; the linker takes only the
# objects a target references (static archives).
CORE_SRC=$(ls "$ROOT"/src/core/*.c)
HTTP_SRC=$(ls "$ROOT"/src/http/*.c)
KV_SRC="$ROOT/src/kv/resp.c $ROOT/src/kv/mem.c $ROOT/src/kv/util.c"
KV_ALL_SRC=$(ls "$ROOT"/src/kv/*.c) # the whole server, for fuzz_kv_* (commands run in-process)

build_lib() { # name sources...
    local name=$1; shift
    local objs=() s
    for s in "$@"; do objs+=("$(obj_of "$s")"); done
    local pids=() max p; max=$(nproc)
    for s in "$@"; do # in parallel, nproc at a time
        compile "$s" &
        pids+=($!)
        if [ "${#pids[@]}" -ge "$max" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    done
    for p in "${pids[@]}"; do wait "$p"; done
    rm -f "$OUT/lib$name.a"
    ar rcs "$OUT/lib$name.a" "${objs[@]}"
}

build_lib brisk_core $CORE_SRC
build_lib brisk_http $HTTP_SRC
build_lib brisk_kvproto $KV_SRC
build_lib brisk_kv $KV_ALL_SRC

INIH_LIBS=$(pkg-config --libs inih 2>/dev/null || echo -linih)
# src/http's and brisk-kv's connections reach core's TLS layer (OpenSSL 3).
SSL_LIBS=$(pkg-config --libs openssl 2>/dev/null || echo -lssl -lcrypto)

# target -> libraries (and extra link flags)
link_target() {
    local t=$1 src="$ROOT/fuzz/$1.c" libs=()
    case $t in
        fuzz_resp) libs=("$OUT/libbrisk_kvproto.a" -lm) ;;
        fuzz_hpack) libs=("$OUT/libbrisk_http.a" $(pkg-config --libs libnghttp2 2>/dev/null || echo -lnghttp2)) ;;
        fuzz_kv_aof) # reads are cut into pieces chosen by the input: see fuzz_kv_aof.c
                   libs=(-Wl,--wrap=read "$OUT/libbrisk_kv.a" "$OUT/libbrisk_core.a" $INIH_LIBS
                         $LUA_LIBS $SSL_LIBS -lpthread -lm) ;;
        fuzz_kv_*) libs=("$OUT/libbrisk_kv.a" "$OUT/libbrisk_core.a" $INIH_LIBS $LUA_LIBS $SSL_LIBS
                         -lpthread -lm) ;;
        fuzz_conf) # keep the fuzzer from creating log files or reading
                   # arbitrary MIME files: see fuzz_conf.c
                   libs=(-Wl,--wrap=log_open_append -Wl,--wrap=mime_load
                         "$OUT/libbrisk_http.a" "$OUT/libbrisk_core.a" $INIH_LIBS $SSL_LIBS
                         -lpthread) ;;
        fuzz_foods_json)
                   libs=("$ROOT/apps/foods/validate.c" "$ROOT/apps/foods/jsonw.c"
                         -I"$ROOT/apps/foods" $(pkg-config --cflags --libs libcjson) -lm) ;;
        *)         libs=("$OUT/libbrisk_http.a" "$OUT/libbrisk_core.a" $INIH_LIBS $SSL_LIBS
                         -lpthread) ;;
    esac
    local bin="$OUT/$t"
    "$CC" "${CFLAGS[@]}" "${LDFLAGS[@]}" "$src" "${libs[@]}" -o "$bin"
    echo "fuzz: built $bin"
}

if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for f in "$ROOT"/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
for t in "${targets[@]}"; do
    link_target "$t"
done
