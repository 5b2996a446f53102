#!/bin/bash
# Tests of bench/wait-counts.sh: real tnt-bench runs (two ranks over TCP,
# one size) must give a table row whose socket writes per call are the
# messages per call that the library itself counts (tnt-bench --stats,
# rank 0's sent messages, differential over two runs, times the two
# ranks): the per-call arithmetic (long minus short, over the calls
# between them) and the tracepoint counts are right; reads must be at
# least the writes, the empty ones fewer than all; a peer left out must
# be said so. Skips (77) where perf cannot count system-call tracepoints.
# Usage: test_wait_counts.sh PATH-TO-WAIT-COUNTS.SH PATH-TO-TNT-BENCH
set -u
SCRIPT=${1:?usage: test_wait_counts.sh SCRIPT TNT-BENCH}
BENCH=${2:?usage: test_wait_counts.sh SCRIPT TNT-BENCH}
if ! perf stat -x, -e syscalls:sys_enter_sendmsg true > /dev/null 2>&1; then
    echo "SKIP: perf cannot count system-call tracepoints here"
    exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_wait_counts.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
mkdir "$TMP/bin"

PEERS_BIN="$TMP/bin" TNT_BENCH="$BENCH" timeout 300 bash "$SCRIPT" -p 2 \
    -s 32K -l "tnt gloo-hd" -o "$TMP/t.md" > "$TMP/out" 2> "$TMP/err"
rc=$?
[ "$rc" = 0 ] || fail "exit status $rc: $(cat "$TMP/err")"
row=$(grep '^| 2 | 32 KiB | tnt |' "$TMP/t.md") || fail "no row for tnt"
grep -q '^| 2 | 32 KiB | gloo-hd | - |' "$TMP/t.md" ||
    fail "the missing Gloo bench not shown as '-': $(cat "$TMP/t.md")"

sent() { # calls: rank 0's messages sent over TCP
    TNT_TRANSPORT=tcp timeout 120 "$BENCH" -N 2 allreduce --size 32K \
        -n "$1" -w 3 -c 0 --inplace-only --stats 2>&1 |
        sed -n 's/.*stats transport tcp .* sent \([0-9]*\) msgs.*/\1/p'
}
s2=$(sent 400)
s1=$(sent 1)
[ -n "$s1" ] && [ -n "$s2" ] || fail "no message counts from --stats"
# | p | size | library | syscalls | reads (empty) | KiB per read |
#   writes (EAGAIN) | ...
IFS='|' read -r _ _ _ _ sys reads _ writes _ <<< "$row"
rd=$(awk '{ print $1 }' <<< "$reads")
empty=$(awk '{ gsub(/[()]/, "", $2); print $2 }' <<< "$reads")
wr=$(awk '{ print $1 }' <<< "$writes")
want=$(awk -v a="$s2" -v b="$s1" 'BEGIN { printf "%.2f", 2 * (a - b) / 399 }')
awk -v w="$wr" -v m="$want" 'BEGIN { d = w - m; exit !(w != "" && d * d <= (0.15 * m + 0.2) ^ 2) }' ||
    fail "writes per call '$wr', the library sent $want messages per call"
awk -v r="$rd" -v w="$wr" -v e="$empty" -v s="$sys" \
    'BEGIN { exit !(r + 0.5 >= w && e >= -0.5 && e < r && s + 0.5 >= r + w) }' ||
    fail "inconsistent row: $row"

[ "$failed" = 0 ] || { cat "$TMP/t.md" "$TMP/err"; exit 1; }
echo "ok: writes $wr per call against $want messages"
