#!/bin/bash
# The reproducible mode's cost (TNT_REPRODUCIBLE=1, docs/design.md
# "Reproducible reductions"): f32 SUM allreduce, out of place, 8 B to
# 64 MiB (factor 2), at p = 2 and 4 over TCP and over shared memory,
# each size timed with the mode off and on in the same run. Each pair of
# sweeps runs ROUNDS times, alternating, and a size keeps its smallest
# time of each mode (the machine may be shared). Prints a markdown table
# of microseconds and the ratio on/off. Every result is checked (-c 1).
# Not a test: run it under `flock /tmp/tnt-bench.lock`.
# Usage: repro-compare.sh [BUILD-DIR] (default build); ITERS, WARMUP,
# ROUNDS, MAXBYTES in the environment (defaults 5, 2, 2, 64M).
set -euo pipefail
BUILD=${1:-build}
BENCH=$BUILD/bench/tnt-bench
ITERS=${ITERS:-5} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-2}
MAXBYTES=${MAXBYTES:-64M}
[ -x "$BENCH" ] || { echo "repro-compare.sh: no $BENCH" >&2; exit 2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/repro-compare.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
for p in 2 4; do
    for tp in tcp shm; do
        for round in $(seq "$ROUNDS"); do
            for mode in 0 1; do
                TNT_REPRODUCIBLE=$mode TNT_TRANSPORT=$tp "$BENCH" -N "$p" \
                    allreduce -b 8 -e "$MAXBYTES" -f 2 -n "$ITERS" \
                    -w "$WARMUP" --outplace-only \
                    --json "$TMP/p$p-$tp-m$mode-r$round.json" >/dev/null
            done
        done
    done
done
python3 - "$TMP" <<'EOF'
import glob, json, os, sys
tmp = sys.argv[1]
best = {}  # (p, tp, mode) -> {bytes: us}
for f in glob.glob(os.path.join(tmp, "*.json")):
    p, tp, m, _ = os.path.basename(f)[:-5].split("-")
    d = json.load(open(f))
    assert d["wrong"] == 0, f
    t = best.setdefault((p[1:], tp, m[1:]), {})
    for row in d["rows"]:
        us = row["out_of_place"]["time_us"]
        t[row["bytes"]] = min(us, t.get(row["bytes"], us))
cols = [(p, tp) for p in ("2", "4") for tp in ("tcp", "shm")]
print("| bytes | " + " | ".join(
    "p=%s %s off | on | x" % c for c in cols) + " |")
print("|---:|" + "---:|---:|---:|" * len(cols))
sizes = sorted(best[("2", "tcp", "0")])
worst = {"small": 0.0, "large": 0.0}
for b in sizes:
    cells = []
    for p, tp in cols:
        off, on = best[(p, tp, "0")][b], best[(p, tp, "1")][b]
        r = on / off
        k = "large" if b >= 256 << 10 else "small"
        worst[k] = max(worst[k], r)
        cells.append("%.1f | %.1f | %.2f" % (off, on, r))
    print("| %d | %s |" % (b, " | ".join(cells)))
print()
print("largest ratio below 256 KiB: %.2f; from 256 KiB: %.2f"
      % (worst["small"], worst["large"]))
EOF
