#!/bin/bash
# tnt-bench --stats: after a run, rank 0 prints the communicator's
# counters. 2 local ranks over TCP, then shm, 4 KiB allreduces in place
# (1 warmup + 3 timed + 1 checked: at least 5 of 4096 bytes; the bench
# adds small allreduces of its own); the transport line names the one
# transport with its 1 peer. Without --stats, no such line.
# Usage: test_bench_stats.sh PATH-TO-TNT-BENCH
set -u
BENCH=${1:?usage: test_bench_stats.sh TNT-BENCH}
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

for tp in tcp shm; do
    out=$(TNT_TRANSPORT=$tp timeout 120 "$BENCH" -N 2 --size 4k -n 3 -w 1 \
          -c 1 --inplace-only --stats 2>&1) || fail "$tp: tnt-bench failed: $out"
    read -r calls bytes < <(sed -n 's/^# stats kind allreduce \([0-9]*\) \([0-9]*\)$/\1 \2/p' <<< "$out")
    [ "${calls:-0}" -ge 5 ] && [ "${bytes:-0}" -ge $((5 * 4096)) ] ||
        fail "$tp: allreduce counted '${calls:-} ${bytes:-}', want >= 5 calls, >= 20480 bytes: $out"
    grep -q "^# stats transport $tp peers 1 sent [0-9]* msgs" <<< "$out" ||
        fail "$tp: no transport line for $tp with 1 peer: $out"
    grep -q "^# stats wait [0-9.]* s, early-message high-water mark [0-9]* B$" <<< "$out" ||
        fail "$tp: no wait/high-water line: $out"
done
out=$(TNT_TRANSPORT=tcp timeout 120 "$BENCH" -N 2 --size 8 -n 1 -w 0 2>&1)
grep -q "# stats" <<< "$out" && fail "stats printed without --stats: $out"

[ "$failed" = 0 ] && echo "test_bench_stats: ok"
exit $((failed > 0))
