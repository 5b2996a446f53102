#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (-fsanitize=fuzzer,address,
# undefined; Debian: clang and libclang-rt-14-dev) and runs each for N
# seconds (default 60), one at a time, from the committed seed corpus in
# tests/fuzz/corpus/ (new inputs go to a scratch copy, not the repo).
# Usage: tests/fuzz/run.sh [SECONDS] [HARNESS...]
# A crash or oracle failure stops the script with the reproducer path.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
[ $# -gt 0 ] && shift
harnesses=${*:-"handshake msg_hdr bootstrap"}
out=${TNT_FUZZ_DIR:-build-fuzz}
mkdir -p "$out"
cc=${CLANG:-clang}
flags="-std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Ilib -Itests/fuzz
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
common="lib/core/auth.c lib/core/error.c lib/core/util.c"
declare -A srcs=(
    [handshake]="lib/transport/tcp_wire.c"
    [msg_hdr]="lib/core/msg_hdr.c"
    [bootstrap]="lib/core/boot_wire.c"
)
sodium=$(pkg-config --libs libsodium)

# The seeds follow the real structs: regenerate them (same names, so a
# layout change shows up in git status).
$cc -std=c11 -D_GNU_SOURCE -Iinclude -Ilib tests/fuzz/gen_corpus.c \
    -o "$out/gen_corpus"
for h in handshake msg_hdr bootstrap; do
    mkdir -p "tests/fuzz/corpus/$h"
done
"$out/gen_corpus" tests/fuzz/corpus

for h in $harnesses; do
    echo "== fuzz_$h: building"
    # shellcheck disable=SC2086
    $cc $flags "tests/fuzz/fuzz_$h.c" ${srcs[$h]} $common $sodium \
        -o "$out/fuzz_$h"
    work="$out/corpus_$h"
    mkdir -p "$work" "$out/crashes_$h"
    echo "== fuzz_$h: ${secs} s"
    "$out/fuzz_$h" -max_total_time="$secs" -print_final_stats=1 \
        -artifact_prefix="$out/crashes_$h/" -max_len=4096 \
        "$work" "tests/fuzz/corpus/$h" 2>&1 | \
        grep -E "DONE|stat::|ERROR|SUMMARY|oracle|Test unit" || true
    if ls "$out/crashes_$h"/* >/dev/null 2>&1; then
        echo "fuzz_$h found a problem: $(ls "$out/crashes_$h"/*)"
        exit 1
    fi
done
