#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (-fsanitize=fuzzer,address,
# undefined; Debian: clang and libclang-rt-14-dev) and runs each for N
# seconds (default 60), from the committed seed corpus in
# tests/fuzz/corpus/ (new inputs go to a scratch copy, not the repo).
# Usage: tests/fuzz/run.sh [SECONDS] [HARNESS...]
# A crash or oracle failure makes the script fail, with the reproducer
# path.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
[ $# -gt 0 ] && shift
harnesses=${*:-"handshake msg_hdr bootstrap verbs"}
out=${TNT_FUZZ_DIR:-build-fuzz}
mkdir -p "$out"
cc=${CLANG:-clang}
flags="-std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Ilib -Itests/fuzz
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
common="lib/util/auth.c lib/util/error.c lib/util/names.c"
declare -A srcs=(
    [handshake]="lib/transport/tcp/tcp_wire.c"
    [msg_hdr]="lib/core/msg_hdr.c"
    [bootstrap]="lib/boot/boot_wire.c"
    [verbs]="lib/transport/verbs/verbs_wire.c"
)
sodium=$(pkg-config --libs libsodium)

# The seeds follow the real structs: regenerate them (same names, so a
# layout change shows up in git status).
# shellcheck disable=SC2086
$cc -std=c11 -D_GNU_SOURCE -Iinclude -Ilib tests/fuzz/gen_corpus.c \
    lib/transport/verbs/verbs_wire.c $common $sodium -o "$out/gen_corpus"
for h in handshake msg_hdr bootstrap verbs; do
    mkdir -p "tests/fuzz/corpus/$h"
done
"$out/gen_corpus" tests/fuzz/corpus

for h in $harnesses; do
    echo "== fuzz_$h: building"
    # shellcheck disable=SC2086
    $cc $flags "tests/fuzz/fuzz_$h.c" ${srcs[$h]} $common $sodium \
        -o "$out/fuzz_$h"
done

run_one() {
    local h=$1 work="$out/corpus_$1"
    mkdir -p "$work" "$out/crashes_$h"
    "$out/fuzz_$h" -max_total_time="$secs" -print_final_stats=1 \
        -artifact_prefix="$out/crashes_$h/" -max_len=4096 \
        "$work" "tests/fuzz/corpus/$h" > "$out/log_$h" 2>&1 || true
}

# TNT_FUZZ_PARALLEL=1 runs the harnesses at the same time (CI: each gets
# its full SECONDS of wall time, sharing the cores), otherwise one after
# the other.
pids=()
for h in $harnesses; do
    echo "== fuzz_$h: ${secs} s"
    if [ "${TNT_FUZZ_PARALLEL:-0}" = 1 ]; then
        run_one "$h" &
        pids+=($!)
    else
        run_one "$h"
    fi
done
for pid in "${pids[@]}"; do
    wait "$pid"
done
status=0
for h in $harnesses; do
    echo "== fuzz_$h: results"
    grep -E "DONE|stat::|ERROR|SUMMARY|oracle|Test unit" "$out/log_$h" || true
    if ls "$out/crashes_$h"/* >/dev/null 2>&1; then
        echo "fuzz_$h found a problem: $(ls "$out/crashes_$h"/*)"
        status=1
    fi
done
exit $status
