#!/bin/bash
# Tests of bench/plot.sh: a chart from a real `tnt-bench --json` run (two
# ranks, a few small sizes), a CSV and a peers'-style log must come out as
# one non-empty PNG with one curve each; bad input must give a clear error
# and a non-zero status, never a PNG. Skipped (77) without gnuplot
# (scripts/setup.sh installs gnuplot-nox).
# Usage: test_plot.sh PATH-TO-PLOT.SH PATH-TO-TNT-BENCH
set -u

PLOT=${1:?usage: test_plot.sh PLOT.SH TNT-BENCH}
BENCH=${2:?usage: test_plot.sh PLOT.SH TNT-BENCH}
if ! command -v gnuplot >/dev/null; then
    echo "test_plot.sh: gnuplot not installed (apt-get install gnuplot-nox)"
    exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_plot.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# A short real run: 2 ranks, 8 B .. 64 KiB.
if ! timeout 60 "$BENCH" -N 2 allreduce -b 8 -e 64k -f 8 -n 3 -w 1 \
        --json "$TMP/run.json" > "$TMP/bench.out" 2>&1; then
    cat "$TMP/bench.out"
    echo "FAIL: tnt-bench run"
    exit 1
fi
printf 'size_bytes,time_us,busbw_gbps,label\n1024,10.3,0.099,peer-csv\n%s\n' \
    '32768,28.3,1.156,peer-csv' > "$TMP/peer.csv"
printf '%s\n%s\n' \
    'gloo algo=ring p=2 bytes=1024 iters=9 time_us=117.47 algbw_GBps=0.0087 busbw_GBps=0.0087 check=ok' \
    'gloo algo=ring p=2 bytes=32768 iters=9 time_us=106.30 algbw_GBps=0.3083 busbw_GBps=0.3083 check=ok' \
    > "$TMP/gloo.log"

if "$PLOT" -o "$TMP/out.png" -t "test" -l "tnt p=2" "$TMP/run.json" \
        "$TMP/peer.csv" "$TMP/gloo.log" > "$TMP/plot.out" 2>&1; then
    grep -q '(3 curves)' "$TMP/plot.out" ||
        fail "expected 3 curves: $(cat "$TMP/plot.out")"
    if [ ! -s "$TMP/out.png" ]; then
        fail "empty or missing PNG"
    elif [ "$(head -c 4 "$TMP/out.png" | od -An -c | tr -d ' ')" != \
           '211PNG' ]; then
        fail "out.png is not a PNG"
    elif [ "$(stat -c %s "$TMP/out.png")" -lt 10000 ]; then
        fail "PNG of only $(stat -c %s "$TMP/out.png") bytes"
    fi
else
    fail "plot.sh: $(cat "$TMP/plot.out")"
fi

# The in-place columns and a label filter: one curve.
"$PLOT" -o "$TMP/in.png" -m in -f tnt -l "tnt p=2" "$TMP/run.json" \
    "$TMP/gloo.log" > "$TMP/plot.out" 2>&1 &&
    grep -q '(1 curves)' "$TMP/plot.out" ||
    fail "-m in -f tnt: $(cat "$TMP/plot.out")"

# Bad input: a status of 1 or 2, a message, no PNG.
expect_error() { # STATUS WHAT ARGS...
    local want=$1 what=$2
    shift 2
    rm -f "$TMP/bad.png"
    "$PLOT" "$@" > "$TMP/err.out" 2>&1
    local st=$?
    [ "$st" = "$want" ] || fail "$what: status $st, want $want"
    grep -q 'plot.sh: ' "$TMP/err.out" || fail "$what: no message"
    [ ! -e "$TMP/bad.png" ] || fail "$what: wrote a PNG"
}
echo "nothing to see" > "$TMP/junk.txt"
expect_error 2 "no files" -o "$TMP/bad.png"
expect_error 2 "no -o" "$TMP/run.json"
expect_error 2 "bad -m" -o "$TMP/bad.png" -m sideways "$TMP/run.json"
expect_error 2 "dangling -l" -o "$TMP/bad.png" "$TMP/run.json" -l x
expect_error 1 "missing file" -o "$TMP/bad.png" "$TMP/none.json"
expect_error 1 "unknown format" -o "$TMP/bad.png" "$TMP/junk.txt"
expect_error 1 "filter matches nothing" -o "$TMP/bad.png" -f zzz \
    "$TMP/run.json"

if [ "$failed" -ne 0 ]; then
    echo "$failed check(s) failed"
    exit 1
fi
echo "all plot checks passed"
