#!/usr/bin/env bash
# Builds and runs the libFuzzer targets. See fuzz/README.md.
#
#   fuzz/run.sh [--seconds N] [--jobs J] [TARGET...]
#       fuzzes each target for N seconds (default 60), J at a time
#       (default 1), starting from fuzz/corpus/T and fuzz/regressions/T;
#       new inputs go to $FUZZ_BUILD/corpus/T, crashes to
#       $FUZZ_BUILD/artifacts/T/. Prints one summary line per target and
#       exits 1 if any target crashed.
#   fuzz/run.sh --replay [TARGET...]
#       runs each target once over its seed corpus and its regression
#       inputs (no fuzzing, a few seconds in all): exits 1 on any failure.
#   fuzz/run.sh --coverage [TARGET...]
#       line and branch coverage (llvm-cov) of the code under test reached
#       by the seeds, the regressions and the corpus the fuzzer grew.
#
# The body is one { ... } block: bash reads all of it before running, so
# editing this file during a long run cannot change what the run does.
{
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${FUZZ_BUILD:-$ROOT/build-fuzz}
export FUZZ_BUILD=$OUT

mode=fuzz
seconds=60
jobs=1
targets=()
while [ $# -gt 0 ]; do
    case $1 in
        --replay) mode=replay ;;
        --coverage) mode=coverage ;;
        --seconds) seconds=$2; shift ;;
        --seconds=*) seconds=${1#*=} ;;
        --jobs) jobs=$2; shift ;;
        --jobs=*) jobs=${1#*=} ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1") ;;
    esac
    shift
done
if [ ${#targets[@]} -eq 0 ]; then
    for f in "$ROOT"/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi

inputs_of() { # the seed and regression files of a target
    local d
    for d in "$ROOT/fuzz/corpus/$1" "$ROOT/fuzz/regressions/$1"; do
        [ -d "$d" ] && find "$d" -type f ! -name 'README*' ! -name '.*' | sort
    done
    return 0
}

if [ "$mode" = coverage ]; then
    FUZZ_COVERAGE=1 "$ROOT/fuzz/build.sh" "${targets[@]}" >/dev/null
    pick() { for t in "$@"; do command -v "$t" >/dev/null 2>&1 && { echo "$t"; return; }; done; }
    PROFDATA=$(pick llvm-profdata llvm-profdata-14 llvm-profdata-16)
    LLVMCOV=$(pick llvm-cov llvm-cov-14 llvm-cov-16)
    for t in "${targets[@]}"; do
        # the files, and the functions in them, that a target is about
        case $t in
            fuzz_http_head) srcs=("$ROOT/src/http/parse.c")
                funcs="http_parse_head parse_request_line parse_header_line on_known_header finish_head parse_connection trim_ows is_host_char http_parser_header" ;;
            fuzz_chunked) srcs=("$ROOT/src/http/parse.c"); funcs="http_chunked_decode hexval" ;;
            fuzz_path) srcs=("$ROOT/src/http/static.c"); funcs="static_normalize_path hexval" ;;
            fuzz_range) srcs=("$ROOT/src/http/static.c"); funcs="static_parse_range" ;;
            fuzz_resp) srcs=("$ROOT/src/kv/resp.c"); funcs="*" ;;
            fuzz_conf) srcs=("$ROOT/src/core/conf.c" "$ROOT/src/http/config.c"); funcs="*" ;;
            fuzz_kv_rdb) srcs=("$ROOT/src/kv/rdb.c" "$ROOT/src/kv/rdb_file.c"); funcs="*" ;;
            fuzz_kv_aof) srcs=("$ROOT/src/kv/aof.c"); funcs="aof_read" ;;
            fuzz_kv_hll) srcs=("$ROOT/src/kv/hyperloglog.c"); funcs="*" ;;
            fuzz_kv_acl) srcs=("$ROOT/src/kv/acl.c"); funcs="*" ;;
            fuzz_kv_geohash) srcs=("$ROOT/src/kv/geohash.c"); funcs="*" ;;
            fuzz_foods_json) srcs=("$ROOT/apps/foods/validate.c" "$ROOT/apps/foods/jsonw.c")
                funcs="foods_fail prescan foods_parse_json foods_check_text get_text get_number get_id foods_food_from_json foods_template_from_json foods_parse_int jw_escape jw_str jw_format_double utf8_valid_prefix utf8_count" ;;
            *) srcs=(); funcs="*" ;;
        esac
        dir="$OUT/cov/$t.prof"
        rm -rf "$dir"
        mkdir -p "$dir"
        mapfile -t files < <(inputs_of "$t"; [ -d "$OUT/corpus/$t" ] && find "$OUT/corpus/$t" -type f)
        # in batches: one process per batch writes one raw profile
        printf '%s\0' "${files[@]}" | LLVM_PROFILE_FILE="$dir/%p.profraw" \
            xargs -0 -n 500 "$OUT/cov/$t" -runs=1 >/dev/null 2>&1 || true
        "$PROFDATA" merge -sparse "$dir"/*.profraw -o "$dir/merged.profdata"
        echo "coverage: $t (${#files[@]} inputs)"
        # per function: regions, lines and branches covered
        "$LLVMCOV" report -show-functions "$OUT/cov/$t" -instr-profile="$dir/merged.profdata" \
            "${srcs[@]}" | awk -v funcs=" $funcs " '
                /^Name/ { if (!hdr++) print "  " $0; next }
                NF >= 10 && $2 ~ /^[0-9]+$/ {
                    n = $1; sub(/^.*:/, "", n)
                    if (funcs == " * " || index(funcs, " " n " ")) print "  " $0
                }'
    done
    exit 0
fi

"$ROOT/fuzz/build.sh" "${targets[@]}" >/dev/null

# Sanitizer reports must end the run with a clear stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Per-target libFuzzer options.
target_opts() {
    local t=$1 opts=(-print_final_stats=1 -timeout=10 -rss_limit_mb=2048)
    case $t in
        fuzz_http_head) opts+=(-max_len=16384) ;;
        fuzz_chunked)   opts+=(-max_len=8192) ;;
        fuzz_path)      opts+=(-max_len=8192) ;;
        fuzz_resp)      opts+=(-max_len=8192) ;;
        fuzz_conf)      opts+=(-max_len=8192) ;;
        fuzz_kv_rdb)    opts+=(-max_len=16384) ;;
        fuzz_kv_aof)    opts+=(-max_len=8192) ;;
        fuzz_kv_hll)    opts+=(-max_len=16384) ;;
        fuzz_kv_acl)    opts+=(-max_len=4096) ;;
    esac
    [ -f "$ROOT/fuzz/dict/$t.dict" ] && opts+=(-dict="$ROOT/fuzz/dict/$t.dict")
    printf '%s\n' "${opts[@]}"
}


if [ "$mode" = replay ]; then
    fail=0
    for t in "${targets[@]}"; do
        mapfile -t files < <(inputs_of "$t")
        if [ ${#files[@]} -eq 0 ]; then
            echo "fuzz replay: $t: no inputs"
            continue
        fi
        log="$OUT/logs/$t.replay.log"
        mkdir -p "$OUT/logs"
        # Files (not directories) are run once each and never written to.
        if "$OUT/$t" -runs=1 "${files[@]}" >"$log" 2>&1; then
            echo "fuzz replay: $t: ${#files[@]} inputs ok"
        else
            echo "fuzz replay: $t: FAILED (log: $log)"
            grep -E "Running:|ERROR|check failed|runtime error|SUMMARY" "$log" | tail -8
            fail=1
        fi
    done
    exit $fail
fi

summary() { # target log
    local t=$1 log=$2 last execs crash=none
    last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|REDUCE|NEW|pulse|INITED)' "$log" | tail -1 || true)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    local cov ft corp eps
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
    eps=$(sed -n 's/.* exec\/s: \([0-9]*\).*/\1/p' <<<"$last")
    if grep -qE '^==[0-9]+==ERROR|deadly signal|check failed|runtime error|ERROR: libFuzzer' "$log"; then
        crash=$(ls "$OUT/artifacts/$t/" 2>/dev/null | head -1)
        crash="CRASH ${crash:-see log}"
    fi
    printf 'fuzz: %-16s execs=%s exec/s=%s cov=%s ft=%s corpus=%s crashes=%s\n' \
        "$t" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crash"
    [ "$crash" = none ]
}

run_one() {
    local t=$1
    local work="$OUT/corpus/$t" art="$OUT/artifacts/$t/" log="$OUT/logs/$t.log"
    mkdir -p "$work" "$art" "$OUT/logs"
    local dirs=("$work")
    for d in "$ROOT/fuzz/corpus/$t" "$ROOT/fuzz/regressions/$t"; do
        [ -d "$d" ] && dirs+=("$d")
    done
    mapfile -t opts < <(target_opts "$t")
    # New inputs are written to the first directory only.
    "$OUT/$t" "${opts[@]}" -max_total_time="$seconds" -artifact_prefix="$art" \
        "${dirs[@]}" >"$log" 2>&1 || true
    summary "$t" "$log"
}

status=0
pids=()
names=()
for t in "${targets[@]}"; do
    run_one "$t" &
    pids+=($!)
    names+=("$t")
    if [ ${#pids[@]} -ge "$jobs" ]; then
        wait "${pids[0]}" || status=1
        pids=("${pids[@]:1}")
        names=("${names[@]:1}")
    fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status -eq 0 ] || echo "fuzz: crashes found: see $OUT/artifacts/ and $OUT/logs/" >&2
exit $status
}
