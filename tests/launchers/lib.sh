# Shared by the 'launchers' test scripts: skipping with a reason, and the
# check of a tnt-bench run's output (the launcher the library says it used,
# the number of ranks, and no wrong element in any row).

# Exit 77 (meson's "skipped") with the reason on stdout, where meson's log
# and a CI reader see it.
skip() {
    echo "SKIP: $*"
    exit 77
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# check_bench OUTFILE LAUNCHER NRANKS: fails the test unless OUTFILE (the
# merged output of every rank) shows the library picked LAUNCHER, rank 0
# reported NRANKS ranks, and every result row of the table has zero wrong
# elements in both the out-of-place and the in-place column.
check_bench() {
    local out=$1 launcher=$2 n=$3
    grep -q "INFO: launcher: $launcher[ ;]" "$out" ||
        fail "expected the library to report 'launcher: $launcher'; got: $(grep 'launcher:' "$out" || echo nothing)"
    grep -q "# tnt-bench allreduce: $n ranks" "$out" ||
        fail "rank 0 did not report a job of $n ranks"
    # Rows: size count type redop root time algbw busbw #wrong time algbw
    # busbw #wrong.
    local rows bad
    rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 13' "$out" | wc -l)
    bad=$(awk '$1 ~ /^[0-9]+$/ && NF == 13 && ($9 != 0 || $13 != 0)' "$out")
    [ "$rows" -ge 3 ] || fail "only $rows result rows in the output"
    [ -z "$bad" ] || fail "rows with wrong elements: $bad"
    echo "ok: $launcher, $n ranks, $rows sizes checked, no wrong element"
}

# Under ASan, libpmix's own leftovers at exit are not ours to fix; the
# ranks inherit this through mpirun and srun.
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

# Small sizes keep the test quick; 256k still takes the multi-segment
# paths of the ring.
BENCH_ARGS=(-b 8 -e 256k -f 8 -n 2 -w 1 -c 1)
