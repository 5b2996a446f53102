#!/bin/bash
# The reproducible mode's cost (TNT_REPRODUCIBLE=1, docs/design.md
# "Reproducible reductions"): f32 SUM allreduce, out of place, 8 B to
# 64 MiB (factor 2), at p = 2 and 4 over TCP and over shared memory,
# each size timed with the mode off and on in the same minutes. Prints a
# markdown table: per size the median call of each mode (tnt-bench's
# median_us) as the median over the runs, the median (range) of the
# runs' ratios on / off, and the median ratio of the mean calls
# (tnt-bench's time_us, which a few preempted calls move). Every result
# of the first run is checked (-c 1; later runs -c 0: the check is not
# timed, only slow at 64 MiB). Not a test: run it under
# `flock /tmp/tnt-bench.lock`.
#
# How it settles: a round runs, for every (p, transport), the sweep in
# bands of sizes (BANDS), and within a band the mode off and on one right
# after the other (the order alternating from run to run), so that both
# see the same moment of a shared machine; a ratio is taken within a run
# and the table gives the median over the runs, as compare-peers.sh does.
# Each run times many calls of the small sizes and keeps the median call:
# with 5 calls at 8 B and the mean, one preemption decided a run
# (docs/performance.md, "2026-12-07, 06:41 UTC").
#
# The ranks are pinned (--bind-to core; at p = 4 on 2 cores ranks 0 and
# 2 share one, 1 and 3 the other): unpinned, every run got its own
# placement of 4 ranks on 2 cores, and at p = 4 over TCP the ratios of
# runs of the same code spread so widely that even a median of 15 did
# not settle (docs/performance.md, "issue 38: a settled comparison"). At
# p = 2 tnt-bench pins anyway.
#
# With -B BEFORE-BUILD a second build (an older commit in a directory of
# its own) runs beside BUILD-DIR in every band of every round, in
# alternating order: its ratios, and after's time with the mode on over
# before's, from the same minutes.
#
# Usage: repro-compare.sh [-r ROUNDS] [-s RUNS] [-p "2 4"] [-t "tcp shm"]
#                         [-b MINBYTES] [-e MAXBYTES] [-m SCALE]
#                         [-B BEFORE-BUILD] [BUILD-DIR]
#   -r rounds (default 5); -s runs a round of the sizes up to 128 KiB
#   (default 3: 15 ratios per size); -m multiplies every band's calls
#   (default 1). BUILD-DIR defaults to build. Sizes as tnt-bench takes
#   them (8, 4k, 64M); -e 128k keeps to the small sizes. See
#   docs/performance.md, "issue 38: a settled comparison", for the time
#   a run takes and how far two runs agree.
set -euo pipefail
ROUNDS=5 SMALLX=3 PS="2 4" TPS="tcp shm" MINB=8 MAXB=64M SCALE=1 BEFORE=""
while getopts "r:s:p:t:b:e:m:B:h" opt; do
    case $opt in
    r) ROUNDS=$OPTARG ;;
    s) SMALLX=$OPTARG ;;
    p) PS=$OPTARG ;;
    t) TPS=$OPTARG ;;
    b) MINB=$OPTARG ;;
    e) MAXB=$OPTARG ;;
    m) SCALE=$OPTARG ;;
    B) BEFORE=$OPTARG ;;
    *) sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
BUILD=${1:-build}
[[ $ROUNDS =~ ^[1-9][0-9]*$ && $SMALLX =~ ^[1-9][0-9]*$ ]] ||
    { echo "repro-compare.sh: -r and -s want numbers >= 1" >&2; exit 2; }
BUILDS=("$BUILD")
[ -z "$BEFORE" ] || BUILDS+=("$BEFORE")
for b in "${BUILDS[@]}"; do
    [ -x "$b/bench/tnt-bench" ] ||
        { echo "repro-compare.sh: no $b/bench/tnt-bench" >&2; exit 2; }
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/repro-compare.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

bytes_of() { # 32K -> 32768
    local s=$1 n=${1%[kKmMgG]}
    case $s in
    *k|*K) echo $((n << 10)) ;; *m|*M) echo $((n << 20)) ;;
    *g|*G) echo $((n << 30)) ;; *) echo "$s" ;;
    esac
}
MINB=$(bytes_of "$MINB") MAXB=$(bytes_of "$MAXB")

# The bands: largest size, timed calls, warm-up calls, runs per round.
# Up to 128 KiB 150 calls and three runs a round: what varies is less
# the calls within a run (the median call) than the runs (the same build
# four times in a row differed by tens of per cent; docs/performance.md,
# "issue 38: a settled comparison"), so more runs, not longer ones; from
# 8 MiB 3 calls.
BANDS="131072:150:15:$SMALLX 4194304:8:2:1 67108864:3:1:1"

# run BUILD-INDEX P TP MODE ROUND LO HI N W
run() {
    local bi=$1 p=$2 tp=$3 mode=$4 round=$5 lo=$6 hi=$7 n=$8 w=$9 check=0
    [ "$round" -gt 1 ] || check=1
    TNT_REPRODUCIBLE=$mode TNT_TRANSPORT=$tp timeout 300 \
        "${BUILDS[$bi]}/bench/tnt-bench" -N "$p" allreduce -b "$lo" -e "$hi" \
        -f 2 -n "$n" -w "$w" -c "$check" --outplace-only --bind-to core \
        --json "$TMP/p$p-$tp-b$bi-m$mode-r$round-$lo.json" >/dev/null
}

for round in $(seq "$ROUNDS"); do
    for p in $PS; do
        for tp in $TPS; do
            lo=$MINB
            for band in $BANDS; do
                IFS=: read -r top n w reps <<<"$band"
                hi=$((top < MAXB ? top : MAXB))
                [ "$lo" -le "$hi" ] || continue
                n=$(awk -v n="$n" -v s="$SCALE" \
                    'BEGIN { n = int(n * s); print n < 2 ? 2 : n }')
                for rep in $(seq "$reps"); do
                    # A run's number among its band's; alternate which
                    # build and which mode goes first.
                    id=$(((round - 1) * reps + rep))
                    order="0 1"
                    [ $((id % 2)) -eq 1 ] || order="1 0"
                    for bi in $(seq 0 $((${#BUILDS[@]} - 1))); do
                        [ $((id % 2)) -eq 1 ] || bi=$((${#BUILDS[@]} - 1 - bi))
                        for mode in $order; do
                            run "$bi" "$p" "$tp" "$mode" "$id" "$lo" "$hi" "$n" "$w"
                        done
                    done
                done
                # The next band starts at the first size above this one.
                while [ "$lo" -le "$hi" ]; do lo=$((lo * 2)); done
            done
        done
    done
done

python3 - "$TMP" "${#BUILDS[@]}" <<'EOF'
import glob, json, os, statistics, sys
tmp, nbuilds = sys.argv[1], int(sys.argv[2])
t = {}  # (p, tp, build, mode, round, bytes) -> median call, us
mean = {}  # the same keys -> mean call (tnt-bench's table), us
for f in glob.glob(os.path.join(tmp, "*.json")):
    p, tp, b, m, r, _ = os.path.basename(f)[:-5].split("-")
    d = json.load(open(f))
    assert d["wrong"] == 0, f
    for row in d["rows"]:
        o = row["out_of_place"]
        k = (int(p[1:]), tp, int(b[1:]), int(m[1:]), int(r[1:]), row["bytes"])
        t[k] = o["median_us"]
        mean[k] = o["time_us"]
keys = sorted({(k[0], k[1], k[5]) for k in t}, key=lambda k: (k[0], k[1] != "tcp", k[2]))
runs = {}  # (p, tp, bytes) -> the run numbers of its band
for k in t:
    runs.setdefault((k[0], k[1], k[5]), set()).add(k[4])

def ratios(p, tp, b, x, t=t):  # per run: on / off of build b
    return [t[(p, tp, b, 1, r, x)] / t[(p, tp, b, 0, r, x)]
            for r in sorted(runs[(p, tp, x)])]

def med(v):
    return statistics.median(v)

def span(v):
    return "%.2f (%.2f-%.2f)" % (med(v), min(v), max(v))

head = "| p | transport | bytes | off µs | on µs | on / off | mean: on / off |"
rule = "|---|---|---:|---:|---:|---|---|"
if nbuilds > 1:
    head += " before on / off | on: after / before |"
    rule += "---|---|"
print(head)
print(rule)
worst = {}
for p, tp, x in keys:
    rounds = sorted(runs[(p, tp, x)])
    off = med([t[(p, tp, 0, 0, r, x)] for r in rounds])
    on = med([t[(p, tp, 0, 1, r, x)] for r in rounds])
    cells = ["%d" % p, tp, "%d" % x, "%.1f" % off, "%.1f" % on,
             span(ratios(p, tp, 0, x)), "%.2f" % med(ratios(p, tp, 0, x, mean))]
    for b in range(nbuilds):
        k = (b, "large" if x >= 256 << 10 else "small")
        v = med(ratios(p, tp, b, x))
        if v > worst.get(k, (0,))[0]:
            worst[k] = (v, "p = %d %s %d B" % (p, tp, x))
    if nbuilds > 1:
        cells.append(span(ratios(p, tp, 1, x)))
        cells.append(span([t[(p, tp, 0, 1, r, x)] / t[(p, tp, 1, 1, r, x)]
                           for r in rounds]))
    print("| " + " | ".join(cells) + " |")
print()
for b in range(nbuilds):
    name = "after" if b == 0 else "before"
    print("%s: largest median ratio below 256 KiB: %.2f (%s); from 256 KiB: "
          "%.2f (%s)" % (name if nbuilds > 1 else "mode on / off",
                         *worst.get((b, "small"), (0, "-")),
                         *worst.get((b, "large"), (0, "-"))))
print("runs per size: %s" % ", ".join(sorted(
    {"%d" % len(v) for v in runs.values()}, key=int)))
EOF
