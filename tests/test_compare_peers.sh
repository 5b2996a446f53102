#!/bin/bash
# Tests of bench/compare-peers.sh: real tnt-bench runs (two ranks, two
# small sizes, tcp and auto) plus a stand-in Gloo binary that prints the
# peers' line format (the real peers are not built in CI) must give one
# table row per size with both libtntcomm columns measured, the stand-in's
# figures parsed, and the ratio column computed from them; a missing Open
# MPI bench must be reported as left out, not invented; the real tcp-rawring
# (next to tnt-bench) must give a column and a ratio; with -C the CPU
# table must hold a positive per-call figure for libtntcomm; with -r 2 -T
# the TCP configurations alone, medians of two rounds and each ratio as
# the median of the rounds' ratios with its range.
# Usage: test_compare_peers.sh PATH-TO-COMPARE-PEERS.SH PATH-TO-TNT-BENCH
set -u
SCRIPT=${1:?usage: test_compare_peers.sh SCRIPT TNT-BENCH}
BENCH=${2:?usage: test_compare_peers.sh SCRIPT TNT-BENCH}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_compare.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

mkdir "$TMP/bin"
cat > "$TMP/bin/gloo_bench" <<'EOS'
#!/bin/sh
# Stand-in: 1000 us at every size, whatever the algorithm; as many
# iterations as 1000 x --min-time (the CPU pass runs it long and short).
it=9
while [ $# -gt 0 ]; do
    [ "$1" = --min-time ] && it=$(awk -v t="$2" 'BEGIN { print int(t * 1000) }')
    shift
done
for b in 8 32768; do
    echo "gloo algo=x p=2 bytes=$b iters=$it time_us=1000.00 algbw_GBps=0 busbw_GBps=0 check=ok"
done
EOS
chmod +x "$TMP/bin/gloo_bench"

PEERS_BIN="$TMP/bin" TNT_BENCH="$BENCH" PATH="$TMP/bin:/usr/bin:/bin" \
    timeout 120 bash "$SCRIPT" -p 2 -s 8,32K -t 0.05 -o "$TMP/t.md" \
    > "$TMP/out" 2> "$TMP/err"
rc=$?
[ "$rc" = 0 ] || fail "exit status $rc: $(cat "$TMP/err")"
grep -q 'Open MPI left out' "$TMP/err" || fail "missing Open MPI not reported"
for size in '8 B' '32 KiB'; do
    row=$(grep "^| 2 | $size |" "$TMP/t.md") || { fail "no row for $size"; continue; }
    # | p | size | tnt-tcp | tnt-auto | tnt-shared | gloo-ringchunked |
    #   gloo-hd | tcp-rawring | ratio | - | - | tnt-tcp / tcp-rawring
    IFS='|' read -r _ _ _ tcp auto shared g1 g2 fl q1 q2 qs q3 _ <<< "$row"
    for v in "$tcp" "$auto" "$shared" "$fl"; do
        [[ $v =~ ^\ [0-9]+\.[0-9]\ $ ]] || fail "$size: not a time: '$v'"
    done
    # The cells are rounded to 0.1 us, the ratio is of the raw figures.
    awk -v t="$tcp" -v f="$fl" -v q="$q3" \
        'BEGIN { w = t / f; d = q - w; exit !(q != "" && d * d <= (0.01 + 0.06 * w) ^ 2) }' ||
        fail "$size: raw ring ratio '$q3', want about $tcp / $fl"
    [ "$g1" = " 1000.0 " ] && [ "$g2" = " 1000.0 " ] ||
        fail "$size: stand-in figures not parsed: '$g1' '$g2'"
    # The ratio is of the raw time, the cell is rounded to 0.1 us: at a
    # rounding boundary (15.0 us: 0.015) the two round to different
    # hundredths, so allow the printed ratio's own rounding, 0.005, and
    # the cell's, 0.05 us / 1000.
    awk -v t="$tcp" -v q="$q1" \
        'BEGIN { d = q - t / 1000; exit !(q ~ /^ [0-9]+\.[0-9][0-9] $/ && d * d <= 0.00506 ^ 2) }' ||
        fail "$size: ratio '$q1', want $tcp / 1000 to two places"
    [ "$q2" = " - " ] && [ "$qs" = " - " ] ||
        fail "$size: vader ratio without vader: '$q2' '$qs'"
done
# -C: CPU per call from a long and a short run of each configuration.
PEERS_BIN="$TMP/bin" TNT_BENCH="$BENCH" PATH="$TMP/bin:/usr/bin:/bin" \
    timeout 300 bash "$SCRIPT" -p 2 -s 8 -t 0.05 -C -o "$TMP/c.md" \
    > "$TMP/out" 2> "$TMP/err" || fail "-C: exit status $?: $(cat "$TMP/err")"
row=$(sed -n '/^CPU time per call/,$p' "$TMP/c.md" | grep '^| 2 | 8 B |') ||
    fail "-C: no CPU row: $(cat "$TMP/c.md")"
IFS='|' read -r _ _ _ tcp auto shared g1 _ <<< "$row"
# The stand-in (and, on a loaded machine, any short configuration) may
# show "-": its long and short runs cost the same CPU within noise.
for v in "$tcp" "$auto" "$shared" "$g1"; do
    [[ $v =~ ^\ [0-9]+\.[0-9]\ $ || $v = " - " ]] ||
        fail "-C: not a CPU figure: '$v'"
done
awk -v t="$tcp" 'BEGIN { exit !(t > 0) }' ||
    fail "-C: libtntcomm over TCP used no CPU per call: '$tcp'"

# -r 2 -T: two rounds of the TCP configurations only; each figure is the
# median of its rounds, each ratio the median of per-round ratios with
# their range, and the shared-memory columns are gone.
PEERS_BIN="$TMP/bin" TNT_BENCH="$BENCH" PATH="$TMP/bin:/usr/bin:/bin" \
    timeout 120 bash "$SCRIPT" -p 2 -s 8 -t 0.05 -r 2 -T -o "$TMP/r.md" \
    > "$TMP/out" 2> "$TMP/err" || fail "-r 2 -T: exit status $?: $(cat "$TMP/err")"
[ "$(grep -c '^== round [12] of 2, p=2' "$TMP/err")" = 2 ] ||
    fail "-r 2: not two rounds: $(cat "$TMP/err")"
head=$(grep '^| p | size |' "$TMP/r.md")
[[ $head != *tnt-auto* && $head != *tnt-shared* && $head == *tnt-tcp* ]] ||
    fail "-T: header '$head'"
row=$(grep '^| 2 | 8 B |' "$TMP/r.md") || fail "-r 2: no row: $(cat "$TMP/r.md")"
# | p | size | tnt-tcp | gloo-ringchunked | gloo-hd | tcp-rawring |
#   tnt-tcp / best TCP peer | tnt-tcp / tcp-rawring
IFS='|' read -r _ _ _ tcp g1 _ fl q1 q3 _ <<< "$row"
[ "$g1" = " 1000.0 " ] || fail "-r 2: stand-in median '$g1'"
[[ $q1 =~ ^\ ([0-9]+\.[0-9][0-9])\ \(([0-9]+\.[0-9][0-9])-([0-9]+\.[0-9][0-9])\)\ $ ]] ||
    fail "-r 2: ratio cell '$q1' is not 'median (min-max)'"
# Against the stand-in's constant 1000 us the per-round ratios are the
# rounds' times / 1000: their median must sit in their range, and the
# median time (the cell) / 1000 is that median ratio (two rounds: both
# are the mean of the two).
awk -v m="${BASH_REMATCH[1]}" -v lo="${BASH_REMATCH[2]}" \
    -v hi="${BASH_REMATCH[3]}" -v t="$tcp" \
    'BEGIN { d = m - t / 1000
             exit !(lo <= m && m <= hi && d * d <= 0.00506 ^ 2) }' ||
    fail "-r 2: ratio '$q1' against the median time '$tcp'"
[[ $q3 =~ ^\ [0-9]+\.[0-9][0-9]\ \( ]] || fail "-r 2: raw ring ratio '$q3'"
bash "$SCRIPT" -r 0 > /dev/null 2>&1 && fail "-r 0 accepted"

# TNT_BENCH_BEFORE: an older build runs beside tnt-tcp as tnt-tcp-before,
# with its own ratio to the peers and the ratio of the two (here the same
# binary: the ratio is a number near 1 on an idle machine, any number on
# a busy one).
PEERS_BIN="$TMP/bin" TNT_BENCH="$BENCH" TNT_BENCH_BEFORE="$BENCH" \
    PATH="$TMP/bin:/usr/bin:/bin" \
    timeout 120 bash "$SCRIPT" -p 2 -s 8 -t 0.05 -T -o "$TMP/b.md" \
    > "$TMP/out" 2> "$TMP/err" || fail "before: exit status $?: $(cat "$TMP/err")"
head=$(grep '^| p | size |' "$TMP/b.md")
[[ $head == "| p | size | tnt-tcp | tnt-tcp-before |"* &&
   $head == *"| tnt-tcp / tnt-tcp-before |"* ]] || fail "before: header '$head'"
row=$(grep '^| 2 | 8 B |' "$TMP/b.md") || fail "before: no row: $(cat "$TMP/b.md")"
# | p | size | tnt-tcp | tnt-tcp-before | gloo-ringchunked | gloo-hd |
#   tcp-rawring | tnt-tcp / best | before / best | tnt-tcp / before | raw
IFS='|' read -r _ _ _ tcp before _ _ _ q1 qb qq _ <<< "$row"
[[ $before =~ ^\ [0-9]+\.[0-9]\ $ ]] || fail "before: not a time: '$before'"
awk -v t="$tcp" -v b="$before" -v q="$qq" \
    'BEGIN { w = t / b; d = q - w; exit !(q != "" && d * d <= (0.01 + 0.06 * w) ^ 2) }' ||
    fail "before: ratio '$qq', want about $tcp / $before"
awk -v b="$before" -v q="$qb" \
    'BEGIN { d = q - b / 1000; exit !(d * d <= 0.00506 ^ 2) }' ||
    fail "before: ratio to the peer '$qb', want $before / 1000"
TNT_BENCH="$BENCH" TNT_BENCH_BEFORE=/nonexistent bash "$SCRIPT" -T \
    > /dev/null 2>&1 && fail "TNT_BENCH_BEFORE=/nonexistent accepted"

[ "$failed" = 0 ] && echo "compare-peers: all checks passed"
[ "$failed" = 0 ]
