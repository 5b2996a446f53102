#!/usr/bin/env bash
# Side-by-side allreduce timings of libtntcomm and its peers (Gloo, Open MPI
# over TCP and over vader shared memory), run one after another in one
# session on this machine, so that the ratios mean something even on a
# small, shared machine (absolute figures move between runs; ratios within
# one run move much less).
#
# The peers' benchmarks are the ones in ../shared/peers (same method as
# their RESULTS.md: f32 sum, max over ranks of the mean time, calibrated to
# --min-time); build them first with `../shared/peers/run-all.sh deps build`
# (they land in /tmp/tnt-peers/bin) or point PEERS_BIN elsewhere. A peer
# whose binary is missing is left out with a note, never faked.
#
# Usage: bench/compare-peers.sh [-p "2 4"] [-s "8,1K,32K,256K,1M,8M,64M"]
#                               [-t MIN_TIME_S] [-o OUT.md]
set -euo pipefail

PS="2 4"
SIZES="8,1K,32K,256K,1M,8M,64M"
MINT=0.3
OUT=""
while getopts "p:s:t:o:h" opt; do
    case $opt in
    p) PS=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    t) MINT=$OPTARG ;;
    o) OUT=$(realpath -m "$OPTARG") ;;
    *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
# Paths given relative to where we were called from stay valid after the cd.
[ -z "${TNT_BENCH:-}" ] || TNT_BENCH=$(realpath "$TNT_BENCH")
cd "$(dirname "$0")/.."
BENCH=${TNT_BENCH:-build/bench/tnt-bench}
PEERS_BIN=${PEERS_BIN:-/tmp/tnt-peers/bin}
[ -x "$BENCH" ] || { echo "compare-peers: $BENCH not built (bash scripts/setup.sh build)" >&2; exit 2; }
RAW=$(mktemp -d /tmp/tnt-compare.XXXXXX)
trap 'rm -rf "$RAW"' EXIT

bytes_of() { # 32K -> 32768
    local s=$1 n=${1%[kKmMgG]}
    case $s in
    *k|*K) echo $((n << 10)) ;; *m|*M) echo $((n << 20)) ;;
    *g|*G) echo $((n << 30)) ;; *) echo "$s" ;;
    esac
}

# tnt-bench runs a fixed number of iterations: pick one per size that takes
# about MIN_TIME on this machine's order of magnitude (at least 3).
iters_for() {
    local b=$1
    if [ "$b" -le 32768 ]; then echo 300
    elif [ "$b" -le 262144 ]; then echo 60
    elif [ "$b" -le 1048576 ]; then echo 20
    elif [ "$b" -le 8388608 ]; then echo 5
    else echo 3; fi
}

run_tnt() { # label transport p
    local label=$1 tp=$2 p=$3 s b
    for s in ${SIZES//,/ }; do
        b=$(bytes_of "$s")
        TNT_TRANSPORT=$tp timeout 300 "$BENCH" -N "$p" allreduce --size "$b" \
            -n "$(iters_for "$b")" -w 3 --inplace-only \
            --json "$RAW/tnt.json" > /dev/null 2> "$RAW/tnt.err" || {
            echo "compare-peers: tnt-bench failed ($label p=$p $s):" >&2
            cat "$RAW/tnt.err" >&2; continue; }
        python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["rows"][0]
print(sys.argv[2], sys.argv[3], r["bytes"], r["in_place"]["time_us"])' \
            "$RAW/tnt.json" "$label" "$p" >> "$RAW/rows"
    done
}

# Peers print "... p=P bytes=B iters=N time_us=T ..." lines.
collect_peer() { # label p < output
    sed -n 's/.* p=\([0-9]*\) bytes=\([0-9]*\) .*time_us=\([0-9.]*\).*/\1 \2 \3/p' |
        while read -r p b t; do echo "$1 $p $b $t"; done >> "$RAW/rows"
}

OMPI=(mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1
      --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
for p in $PS; do
    echo "== p=$p" >&2
    run_tnt tnt-tcp tcp "$p"
    run_tnt tnt-auto auto "$p"
    if [ -x "$PEERS_BIN/gloo_bench" ]; then
        for a in ringchunked hd; do
            timeout 300 "$PEERS_BIN/gloo_bench" --algo "$a" --p "$p" \
                --sizes "$SIZES" --min-time "$MINT" 2>/dev/null |
                collect_peer "gloo-$a" || true
        done
    else
        echo "compare-peers: no $PEERS_BIN/gloo_bench: Gloo left out" >&2
    fi
    if [ -x "$PEERS_BIN/mpi_allreduce_bench.openmpi" ] &&
        command -v mpirun.openmpi > /dev/null; then
        for btl in tcp vader; do
            timeout 300 "${OMPI[@]}" -np "$p" --mca btl "$btl,self" \
                "$PEERS_BIN/mpi_allreduce_bench.openmpi" --sizes "$SIZES" \
                --min-time "$MINT" --inplace 2>/dev/null |
                collect_peer "ompi-$btl" || true
        done
    else
        echo "compare-peers: no Open MPI bench: Open MPI left out" >&2
    fi
done

python3 - "$RAW/rows" "$(uptime)" > "$RAW/table.md" <<'EOF'
import sys, collections
rows = collections.defaultdict(dict)
labels = []
for line in open(sys.argv[1]):
    lab, p, b, t = line.split()
    rows[(int(p), int(b))][lab] = float(t)
    if lab not in labels:
        labels.append(lab)
tcp_peers = [l for l in labels if l.startswith("gloo") or l == "ompi-tcp"]
def h(b):
    for u, s in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= u and b % u == 0:
            return "%d %s" % (b // u, s)
    return "%d B" % b
print("allreduce f32 sum in place, time in us (lower is better); "
      "load: %s\n" % sys.argv[2].strip())
print("| p | size | " + " | ".join(labels) +
      " | tnt-tcp / best TCP peer | tnt-auto / ompi-vader |")
print("|---|---|" + "---|" * (len(labels) + 2))
for (p, b) in sorted(rows):
    r = rows[(p, b)]
    cells = ["%.1f" % r[l] if l in r else "-" for l in labels]
    best = min([r[l] for l in tcp_peers if l in r], default=None)
    q1 = "%.2f" % (r["tnt-tcp"] / best) if best and "tnt-tcp" in r else "-"
    q2 = ("%.2f" % (r["tnt-auto"] / r["ompi-vader"])
          if "tnt-auto" in r and "ompi-vader" in r else "-")
    print("| %d | %s | %s | %s | %s |" % (p, h(b), " | ".join(cells), q1, q2))
EOF
cat "$RAW/table.md"
[ -z "$OUT" ] || cp "$RAW/table.md" "$OUT"
