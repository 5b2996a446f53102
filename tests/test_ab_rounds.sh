#!/bin/bash
# Tests of bench/ab-rounds.py: real tnt-bench and tcp-rawring runs (two
# ranks, 64 KiB, two rounds) must give one table row per label, the
# baseline's ratio exactly 1, every other ratio the median of the rounds'
# ratios that the progress lines show, and positive CPU figures; a bad
# spec, a peer that is not built and a run that fails must each be a
# clear error with its own exit status, never a table.
# Usage: test_ab_rounds.sh PATH-TO-AB-ROUNDS.PY PATH-TO-TNT-BENCH
set -u
SCRIPT=${1:?usage: test_ab_rounds.sh SCRIPT TNT-BENCH}
BENCH=${2:?usage: test_ab_rounds.sh SCRIPT TNT-BENCH}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_ab.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
export TNT_BENCH=$BENCH

timeout 120 python3 "$SCRIPT" -r 2 -p 2 -s 64K -n 20 \
    base=tnt:TNT_TRANSPORT=tcp seg=tnt:TNT_TRANSPORT=tcp,TNT_SEGMENT_BYTES=64k \
    raw=raw > "$TMP/out" 2> "$TMP/err"
rc=$?
[ "$rc" = 0 ] || fail "exit status $rc: $(cat "$TMP/err")"
grep -q '^round 2: base ' "$TMP/err" || fail "no progress line for round 2"
grep -q '^| base | [0-9.]* | 1.000 (1.00-1.00) |' "$TMP/out" ||
    fail "baseline row: $(grep '^| base' "$TMP/out")"
for label in seg raw; do
    row=$(grep "^| $label |" "$TMP/out") || { fail "no row for $label"; continue; }
    IFS='|' read -r _ _ t q cpu _ <<< "$row"
    # The ratio from the progress lines (times to 0.1 us): the median of
    # two rounds is their mean.
    want=$(awk -v l="$label" '/^round/ { for (i = 3; i < NF; i += 2) {
               if ($i == "base") b = $(i + 1); if ($i == l) x = $(i + 1) }
               s += x / b; n++ } END { printf "%.4f", s / n }' "$TMP/err")
    awk -v q="${q%% (*}" -v w="$want" \
        'BEGIN { d = q - w; exit !(w > 0 && d * d <= (0.002 + 0.01 * w) ^ 2) }' ||
        fail "$label: ratio '$q', the rounds say $want"
    [[ $t =~ ^\ [0-9]+\.[0-9]\ $ ]] || fail "$label: not a time: '$t'"
    [[ $cpu =~ ^\ [1-9][0-9]*\ $ ]] || fail "$label: not a CPU figure: '$cpu'"
done

# Bad input: exit 2 and a message naming what is wrong, before any run.
python3 "$SCRIPT" -r 1 a=tnt x=gloo > "$TMP/out" 2> "$TMP/err"
[ $? = 2 ] && grep -q "x: 'gloo' is not" "$TMP/err" ||
    fail "bad spec: $(cat "$TMP/err")"
[ -s "$TMP/out" ] && fail "bad spec printed a table"
python3 "$SCRIPT" -r 1 -s 12Q a=tnt > /dev/null 2> "$TMP/err"
[ $? = 2 ] && grep -q "not a size: '12Q'" "$TMP/err" ||
    fail "bad size: $(cat "$TMP/err")"
PEERS_BIN=$TMP/none python3 "$SCRIPT" -r 1 a=tnt v=ompi:vader \
    > /dev/null 2> "$TMP/err"
[ $? = 2 ] && grep -q "mpi_allreduce_bench.openmpi is not built" "$TMP/err" ||
    fail "missing peer: $(cat "$TMP/err")"
# A run that fails: exit 1 with the bench's own words.
timeout 60 python3 "$SCRIPT" -r 1 -s 1K -n 5 a=tnt \
    b=tnt:TNT_ALLREDUCE_ALGO=nonsense > "$TMP/out" 2> "$TMP/err"
[ $? = 1 ] && grep -q "TNT_ALLREDUCE_ALGO" "$TMP/err" ||
    fail "failing run: $(cat "$TMP/err")"
[ -s "$TMP/out" ] && fail "a failing run printed a table"

[ "$failed" = 0 ] && echo "ab-rounds: all checks passed"
exit $((failed > 0))
