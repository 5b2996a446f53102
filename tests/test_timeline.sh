#!/bin/bash
# The timeline trace (TNT_TIMELINE, docs/timeline.md) of real jobs of 3
# ranks, read back by tools/tnt-timeline check:
#  - fusion (tnt-bench fusion): every file parses as JSON, every event has
#    its fields, B/E pairs match, each bucket's events lie between the
#    first ready of its tensors and the end of wait_all, and the ranks'
#    clocks agree within their recorded errors on every ordering that
#    causality guarantees (a collective's end on one rank after the start
#    of each rank it needs data from);
#  - broadcasts from root 2 (the root is not the clock reference);
#  - more small allreduces than half the ring, so that the progress thread
#    writes while the job runs: no sequence number lost unless counted as
#    dropped;
#  - the checker fails on a trace whose clocks are off, merge gives one
#    file that checks the same, summary and plot run;
#  - unset: no file; an unwritable path: a clear error, no crash.
#  - tnt-run --timeline: the ranks' files merged into PATH.json.
#  - TNT-TIMELINE is the build's copy, beside tnt-run in tools/, and runs
#    as a command (docs/timeline.md).
# Usage: test_timeline.sh TNT-BENCH TNT-TIMELINE TNT-RUN
set -u

BENCH=${1:?usage: test_timeline.sh TNT-BENCH TNT-TIMELINE TNT-RUN}
TOOL=${2:?usage: test_timeline.sh TNT-BENCH TNT-TIMELINE TNT-RUN}
RUN=${3:?usage: test_timeline.sh TNT-BENCH TNT-TIMELINE TNT-RUN}
BENCH=$(realpath "$BENCH") || exit 1
if ! command -v python3 >/dev/null; then
    echo "test_timeline.sh: python3 not installed"
    exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_timeline.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
MULT=${TNT_TEST_TIMEOUT_MULT:-1}
LIMIT=$((180 * MULT))

failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

[ "$(dirname "$(realpath "$TOOL")")" = "$(dirname "$(realpath "$RUN")")" ] ||
    fail "tnt-timeline ($TOOL) is not in the build's tools/ beside $RUN"
[ -x "$TOOL" ] && "$TOOL" --help | head -n 1 | grep -q '^usage: tnt-timeline ' ||
    fail "$TOOL does not run as a command"

# run NAME PREFIX BENCH-ARGS...: a job of 3 ranks with TNT_TIMELINE=PREFIX.
run() {
    local name=$1 prefix=$2
    shift 2
    mkdir -p "$(dirname "$prefix")"
    if ! TNT_TIMELINE=$prefix timeout "$LIMIT" "$BENCH" -N 3 "$@" \
            > "$TMP/$name.out" 2>&1; then
        cat "$TMP/$name.out"
        fail "$name: tnt-bench $*"
        return 1
    fi
    for r in 0 1 2; do
        [ -s "$prefix.$r.json" ] || fail "$name: no $prefix.$r.json"
    done
}

check() {
    local name=$1
    shift
    if ! python3 "$TOOL" check "$@" > "$TMP/$name.check" 2>&1; then
        cat "$TMP/$name.check"
        fail "$name: tnt-timeline check $*"
    else
        cat "$TMP/$name.check"
    fi
}

# Fusion: 40 tensors of 24 KiB, one allocation each: buckets of two
# tensors, packed by the progress thread.
if run fusion "$TMP/fu/t" fusion --model uniform:40:24k -n 3 -w 1; then
    check fusion "$TMP/fu/t" --ranks 3 --fusion
    grep -q '"name":"pack"' "$TMP/fu/t.0.json" ||
        fail "fusion: no pack events"
    python3 "$TOOL" merge "$TMP/fu/t" -o "$TMP/merged.json" > /dev/null ||
        fail "merge"
    check merged "$TMP/merged.json" --ranks 3 --fusion
    python3 "$TOOL" summary "$TMP/fu/t" > "$TMP/summary.out" 2>&1 ||
        fail "summary: $(cat "$TMP/summary.out")"
    grep -q "exposed ms" "$TMP/summary.out" ||
        fail "summary without exposed communication"
    python3 "$TOOL" plot "$TMP/fu/t" -o "$TMP/lanes.png" \
        > "$TMP/plot.out" 2>&1 || fail "plot: $(cat "$TMP/plot.out")"
    if grep -q "no picture" "$TMP/plot.out"; then
        [ ! -e "$TMP/lanes.png" ] || fail "plot: a PNG without a plotter"
    else
        [ -s "$TMP/lanes.png" ] || fail "plot: no PNG: $(cat "$TMP/plot.out")"
    fi

    # The checker can fail: move rank 1's clock by 10 s, and the first
    # allreduce with data ends on rank 1 before rank 0 started it.
    python3 - "$TMP/fu/t.1.json" "$TMP/bad/t.1.json" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
for e in d["traceEvents"]:
    if "ts" in e:
        e["ts"] -= 1e7
    for f in ("post", "start", "end", "first_ready"):
        if f in e.get("args", {}):
            e["args"][f] -= 1e7
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
json.dump(d, open(sys.argv[2], "w"))
EOF
    cp "$TMP/fu/t.0.json" "$TMP/fu/t.2.json" "$TMP/bad/"
    if python3 "$TOOL" check "$TMP/bad/t" --ranks 3 > "$TMP/bad.out" 2>&1
    then
        fail "check passed a trace whose rank 1 is 10 s early"
    else
        grep -q "before rank" "$TMP/bad.out" ||
            fail "check failed, not on clocks: $(head -3 "$TMP/bad.out")"
    fi
fi

# Broadcasts from root 2, 8 B to 256 KiB.
if run bcast "$TMP/bc/t" broadcast -r 2 -b 8 -e 256k -f 8 -n 5 -w 1; then
    check bcast "$TMP/bc/t" --ranks 3
fi

# More events than half the ring (8192): written while the job runs.
if run many "$TMP/many/t" allreduce --size 8 -n 5000 -w 1; then
    check many "$TMP/many/t" --ranks 3
    n=$(grep -c '"cat":"coll"' "$TMP/many/t.0.json")
    [ "$n" -gt 8192 ] || fail "many: only $n collective events"
fi

# tnt-run --timeline: three files, merged into one that checks.
mkdir -p "$TMP/run"
if ! timeout "$LIMIT" "$RUN" -n 3 --timeline "$TMP/run/t" "$BENCH" fusion \
        --model uniform:20:24k -n 2 -w 1 > "$TMP/run.out" 2>&1; then
    cat "$TMP/run.out"
    fail "tnt-run --timeline"
else
    grep -q "tnt-run: timeline: 3 of 3 ranks merged into $TMP/run/t.json" \
        "$TMP/run.out" || fail "tnt-run: no merge line: $(tail -3 "$TMP/run.out")"
    check tnt_run "$TMP/run/t.json" --ranks 3 --fusion
fi

# Unset: nothing written (the ranks run in an empty directory).
mkdir -p "$TMP/none"
if ! (cd "$TMP/none" && env -u TNT_TIMELINE timeout "$LIMIT" "$BENCH" -N 3 \
        allreduce --size 1k -n 2 -w 1 > "$TMP/none.out" 2>&1); then
    cat "$TMP/none.out"
    fail "unset: tnt-bench failed"
fi
[ -z "$(ls -A "$TMP/none")" ] || fail "unset: files written: $(ls "$TMP/none")"

# An unwritable path: TNT_ERR_CONFIG naming the variable, no crash.
TNT_TIMELINE=$TMP/no/such/dir/t timeout "$LIMIT" "$BENCH" -N 2 \
    allreduce --size 8 -n 1 -w 0 > "$TMP/bad_path.out" 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -ge 124 ]; then
    fail "unwritable path: exit status $rc"
fi
grep -q "TNT_TIMELINE: cannot write" "$TMP/bad_path.out" ||
    fail "unwritable path: no clear error: $(head -5 "$TMP/bad_path.out")"

[ $failed -eq 0 ] && echo "test_timeline.sh: all passed"
[ $failed -eq 0 ]
