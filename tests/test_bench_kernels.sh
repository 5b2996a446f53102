#!/bin/bash
# Tests of `tnt-bench kernels` (bench/bench_kernels.c): a short sweep must
# print one row per (dtype, op, size) with a positive GB/s figure for
# every SIMD level of the header and for memcpy (also with --inplace);
# TNT_SIMD shows as the
# active level; bad command lines exit 2 with a message. Figures are not
# judged: the machine is shared.
# Usage: test_bench_kernels.sh PATH-TO-TNT-BENCH
set -u

BENCH=${1:?usage: test_bench_kernels.sh TNT-BENCH}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_bench_kernels.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

if ! timeout 120 "$BENCH" kernels -b 4k -e 64k -f 4 -d f32,f16 -o sum,max \
        --ms 1 > "$TMP/out" 2>&1; then
    cat "$TMP/out"
    fail "tnt-bench kernels exited with an error"
fi
cat "$TMP/out"
# Header: "# type redop size LEVEL... memcpy"; rows: 3 + #levels numbers.
ncols=$(awk '/^# *type/ {print NF - 1}' "$TMP/out")
grep -q '^# *type .* sse2 .*memcpy$' "$TMP/out" || fail "no header"
# good_rows FILE: rows with every figure of the header's columns > 0.
good_rows() {
    awk -v n="${ncols:-0}" '
        /^#/ { next }
        NF == n { ok = 1; for (i = 4; i <= NF; i++) if (!($i > 0)) ok = 0
                  if (ok) good++ }
        END { print good + 0 }' "$1"
}
rows=$(good_rows "$TMP/out")
[ "$rows" = 12 ] || fail "$rows good rows, want 12 (2 dtypes x 2 ops x 3 sizes)"

# --inplace: the same rows, and the header says a = a op b.
timeout 120 "$BENCH" kernels -b 4k -e 16k -f 4 -d f32,f64 -o sum,prod \
    --inplace --ms 1 > "$TMP/inplace" 2>&1 || fail "--inplace run"
grep -q '^# tnt-bench kernels: a = a op b (in place)' "$TMP/inplace" ||
    fail "--inplace not in the header: $(head -2 "$TMP/inplace")"
rows=$(good_rows "$TMP/inplace")
[ "$rows" = 8 ] || fail "--inplace: $rows good rows, want 8"

TNT_SIMD=sse2 "$BENCH" kernels -b 4k -e 4k -d f32 -o sum --ms 1 \
    > "$TMP/forced" 2>&1 || fail "TNT_SIMD=sse2 run"
grep -q '^# active level: sse2 (TNT_SIMD=sse2)' "$TMP/forced" ||
    fail "TNT_SIMD=sse2 not shown: $(cat "$TMP/forced")"

expect_usage() { # WHAT ARGS...
    local what=$1
    shift
    "$BENCH" "$@" > "$TMP/err" 2>&1
    local st=$?
    [ "$st" = 2 ] || fail "$what: status $st, want 2"
    grep -q 'tnt-bench' "$TMP/err" || fail "$what: no message"
}
expect_usage "unknown dtype" kernels -d f33
expect_usage "unknown op" kernels -o sum,foo
expect_usage "unknown level" kernels --simd avx9
expect_usage "inverted range" kernels -b 1M -e 4k
expect_usage "zero size" kernels -b 0
expect_usage "stray argument" kernels allreduce
expect_usage "kernels not first" -n 3 kernels
# A size that is not a whole number of elements is refused, not silently
# run smaller (--size 13 of f32 used to run 12 bytes).
expect_usage "size not a multiple" allreduce --size 13
grep -q -- '--size 13 is not a whole number of f32 elements' "$TMP/err" ||
    fail "--size 13: message does not say why: $(cat "$TMP/err")"
expect_usage "-b not a multiple" allreduce -d f64 -b 12 -e 64

if [ "$failed" -ne 0 ]; then
    echo "$failed check(s) failed"
    exit 1
fi
echo "all kernel-benchmark checks passed"
