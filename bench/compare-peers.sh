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
# Beside them, tcp-rawring (build/bench/tcp-rawring, or TCP_RAWRING): the
# bytes per rank of a bandwidth-optimal allreduce, 2(p-1)/p x size, moved
# around a ring of loopback TCP connections with no library, no reduction
# and no waiting between steps: what the kernel charges for the bytes
# alone, which no TCP library can move fewer of (a reference, not a
# proven floor; see bench/tcp_rawring.c).
#
# tnt-tcp and tnt-auto time tnt-bench on malloc'd buffers (as a
# framework's tensors) over TCP and with the library's choice of
# transport; tnt-shared on buffers from tnt_mem_alloc (--mem shared), which
# on one host the ranks reduce in place in each other's memory.
#
# With -C it also measures CPU time per call (user + sys of all ranks and
# their threads, from getrusage of the waited-for processes): each
# configuration runs twice at one size, long and short, and the CPU
# difference is divided by the difference in calls, which cancels start-up,
# warm-up and checks. Burnt CPU is someone else's lost time on a shared
# machine: a library that spins looks fast and costs cores.
#
# With -r R the whole sweep runs R times, one round after another (every
# configuration once per round), and the tables give each figure's median
# over the rounds; a ratio is taken within each round (both figures from
# the same minutes) and printed as the median of the rounds' ratios with
# their range. On this machine one run of a peer moved up to 2.6x between
# runs (docs/performance.md), so a single round's ratio can say either
# thing; the range says how much to trust the median.
#
# With TNT_BENCH_BEFORE=PATH (a tnt-bench built from an older commit in a
# directory of its own) that build also runs over TCP as tnt-tcp-before,
# right after tnt-tcp in every round: before and after in the same
# minutes, each against the same peers' figures.
#
# With -T only the TCP configurations run (tnt-tcp, Gloo, Open MPI btl
# tcp, tcp-rawring): the shared-memory ones take half the time and say
# nothing about TCP.
#
# Usage: bench/compare-peers.sh [-p "2 4"] [-s "8,1K,32K,256K,1M,8M,64M"]
#                               [-t MIN_TIME_S] [-o OUT.md] [-C] [-r R] [-T]
set -euo pipefail

PS="2 4"
SIZES="8,1K,32K,256K,1M,8M,64M"
MINT=0.3
OUT=""
CPU=0
ROUNDS=1
TCP_ONLY=0
while getopts "p:s:t:o:r:CTh" opt; do
    case $opt in
    p) PS=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    t) MINT=$OPTARG ;;
    o) OUT=$(realpath -m "$OPTARG") ;;
    C) CPU=1 ;;
    r) ROUNDS=$OPTARG ;;
    T) TCP_ONLY=1 ;;
    *) sed -n '2,46p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] ||
    { echo "compare-peers: -r wants a number of rounds >= 1, not '$ROUNDS'" >&2; exit 2; }
# Paths given relative to where we were called from stay valid after the cd.
[ -z "${TNT_BENCH:-}" ] || TNT_BENCH=$(realpath "$TNT_BENCH")
[ -z "${TNT_BENCH_BEFORE:-}" ] || TNT_BENCH_BEFORE=$(realpath "$TNT_BENCH_BEFORE")
cd "$(dirname "$0")/.."
BENCH=${TNT_BENCH:-build/bench/tnt-bench}
PEERS_BIN=${PEERS_BIN:-/tmp/tnt-peers/bin}
RAWRING=${TCP_RAWRING:-$(dirname "$BENCH")/tcp-rawring}
[ -x "$BENCH" ] || { echo "compare-peers: $BENCH not built (bash scripts/setup.sh build)" >&2; exit 2; }
BEFORE=${TNT_BENCH_BEFORE:-}
[ -z "$BEFORE" ] || [ -x "$BEFORE" ] ||
    { echo "compare-peers: TNT_BENCH_BEFORE=$BEFORE is not an executable" >&2; exit 2; }
bench_of() { # label -> the tnt-bench that runs it
    if [ "$1" = tnt-tcp-before ]; then echo "$BEFORE"; else echo "$BENCH"; fi
}
RAW=$(mktemp -d /tmp/tnt-compare.XXXXXX)
trap 'rm -rf "$RAW"' EXIT

bytes_of() { # 32K -> 32768
    local s=$1 n=${1%[kKmMgG]}
    case $s in
    *k|*K) echo $((n << 10)) ;; *m|*M) echo $((n << 20)) ;;
    *g|*G) echo $((n << 30)) ;; *) echo "$s" ;;
    esac
}

# tnt-bench runs a fixed number of iterations: pick one per size that
# takes about the peers' MIN_TIME on this machine (at -t 0.3: 0.05-0.2 s
# at p = 2, up to 1.6 s at p = 4 8 B), scaled with -t, at least 3. With
# 5,000 calls at 8 B a run took 2-3 ms, and one preemption of a
# millisecond moved its mean by a third; with 300, the warm-up still
# counted.
iters_for() {
    local b=$1 n
    if [ "$b" -le 1024 ]; then n=100000
    elif [ "$b" -le 32768 ]; then n=20000
    elif [ "$b" -le 262144 ]; then n=2000
    elif [ "$b" -le 1048576 ]; then n=300
    elif [ "$b" -le 8388608 ]; then n=40
    else n=5; fi
    awk -v n="$n" -v t="$MINT" 'BEGIN { n = int(n * t / 0.3);
                                        print (n < 3 ? 3 : n) }'
}

warmup_for() {
    local n
    n=$(iters_for "$1")
    echo $(( n / 10 > 3 ? n / 10 : 3 ))
}

run_tnt() { # label transport p mem
    local label=$1 tp=$2 p=$3 mem=$4 s b
    for s in ${SIZES//,/ }; do
        b=$(bytes_of "$s")
        TNT_TRANSPORT=$tp timeout 300 "$(bench_of "$label")" -N "$p" \
            allreduce --size "$b" \
            -n "$(iters_for "$b")" -w "$(warmup_for "$b")" --inplace-only \
            --mem "$mem" \
            --json "$RAW/tnt.json" > /dev/null 2> "$RAW/tnt.err" || {
            echo "compare-peers: tnt-bench failed ($label p=$p $s):" >&2
            cat "$RAW/tnt.err" >&2; continue; }
        python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["rows"][0]
print(sys.argv[2], sys.argv[3], r["bytes"], r["in_place"]["time_us"],
      sys.argv[4])' \
            "$RAW/tnt.json" "$label" "$p" "$ROUND" >> "$RAW/rows"
    done
}

# Peers print "... p=P bytes=B iters=N time_us=T ..." lines.
collect_peer() { # label p < output
    sed -n 's/.* p=\([0-9]*\) bytes=\([0-9]*\) .*time_us=\([0-9.]*\).*/\1 \2 \3/p' |
        while read -r p b t; do echo "$1 $p $b $t $ROUND"; done >> "$RAW/rows"
}

# cpu_run OUT CMD...: runs CMD with its stdout in OUT; prints the CPU
# seconds of CMD and every descendant it waited for.
cpu_run() {
    python3 -c 'import resource, subprocess, sys
with open(sys.argv[1], "w") as f:
    subprocess.run(sys.argv[2:], stdout=f, stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.6f" % (r.ru_utime + r.ru_stime))' "$@"
}

# CPU us per call from two runs: (cpu_long - cpu_short) / (n_long - n_short);
# nothing (shown as "-") when the calls do not differ or the long run used
# less CPU than the short one, i.e. when noise swamps the difference.
per_call() {
    awk -v a="$1" -v b="$2" -v na="$3" -v nb="$4" \
        'BEGIN { if (na > nb && a > b) printf "%.2f\n", (a - b) / (na - nb) * 1e6 }'
}

cpu_tnt() { # label transport p bytes time_us mem
    local n1 n2 c1 c2
    n2=$(awk -v t="$5" 'BEGIN { n = int(0.4e6 / t); if (n < 25) n = 25;
                                 if (n > 200000) n = 200000; print n }')
    n1=$((n2 / 5))
    local bench
    bench=$(bench_of "$1")
    c2=$(cpu_run /dev/null env TNT_TRANSPORT="$2" timeout 300 "$bench" -N "$3" \
         allreduce --size "$4" -n "$n2" -w 3 -c 0 --inplace-only --mem "$6")
    c1=$(cpu_run /dev/null env TNT_TRANSPORT="$2" timeout 300 "$bench" -N "$3" \
         allreduce --size "$4" -n "$n1" -w 3 -c 0 --inplace-only --mem "$6")
    echo "$1 $3 $4 $(per_call "$c2" "$c1" "$n2" "$n1") $ROUND" >> "$RAW/cpu"
}

cpu_peer() { # label p bytes CMD... (a peer bench taking --sizes/--min-time)
    local label=$1 p=$2 b=$3 c1 c2 n1 n2
    shift 3
    c2=$(cpu_run "$RAW/long" "$@" --sizes "$b" --min-time 0.4)
    c1=$(cpu_run "$RAW/short" "$@" --sizes "$b" --min-time 0.08)
    n2=$(sed -n 's/.* iters=\([0-9]*\) .*/\1/p' "$RAW/long" | head -1)
    n1=$(sed -n 's/.* iters=\([0-9]*\) .*/\1/p' "$RAW/short" | head -1)
    [ -n "$n1" ] && [ -n "$n2" ] || return 0
    echo "$label $p $b $(per_call "$c2" "$c1" "$n2" "$n1") $ROUND" >> "$RAW/cpu"
}

measure_cpu() { # p: every configuration of the time table, size by size
    local p=$1 s b t
    for s in ${SIZES//,/ }; do
        b=$(bytes_of "$s")
        for lab in $TNT_LABELS; do
            t=$(awk -v l="$lab" -v p="$p" -v b="$b" -v r="$ROUND" \
                '$1 == l && $2 == p && $3 == b && $5 == r { print $4 }' "$RAW/rows")
            [ -n "$t" ] || continue
            case $lab in
            tnt-shared) cpu_tnt "$lab" auto "$p" "$b" "$t" shared ;;
            tnt-tcp-before) cpu_tnt "$lab" tcp "$p" "$b" "$t" malloc ;;
            *) cpu_tnt "$lab" "${lab#tnt-}" "$p" "$b" "$t" malloc ;;
            esac
        done
        if [ -x "$PEERS_BIN/gloo_bench" ]; then
            for a in ringchunked hd; do
                cpu_peer "gloo-$a" "$p" "$b" timeout 300 \
                    "$PEERS_BIN/gloo_bench" --algo "$a" --p "$p"
            done
        fi
        if [ -x "$PEERS_BIN/mpi_allreduce_bench.openmpi" ] &&
            command -v mpirun.openmpi > /dev/null; then
            for btl in $OMPI_BTLS; do
                cpu_peer "ompi-$btl" "$p" "$b" timeout 300 "${OMPI[@]}" \
                    -np "$p" --mca btl "$btl,self" \
                    "$PEERS_BIN/mpi_allreduce_bench.openmpi" --inplace
            done
        fi
    done
}

OMPI=(mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1
      --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
TNT_LABELS="tnt-tcp tnt-auto tnt-shared"
OMPI_BTLS="tcp vader"
[ "$TCP_ONLY" = 0 ] || { TNT_LABELS=tnt-tcp; OMPI_BTLS=tcp; }
[ -z "$BEFORE" ] || TNT_LABELS="tnt-tcp tnt-tcp-before ${TNT_LABELS#tnt-tcp}"
touch "$RAW/rows"
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
for p in $PS; do
    echo "== round $ROUND of $ROUNDS, p=$p" >&2
    run_tnt tnt-tcp tcp "$p" malloc
    [ -z "$BEFORE" ] || run_tnt tnt-tcp-before tcp "$p" malloc
    if [ "$TCP_ONLY" = 0 ]; then
        run_tnt tnt-auto auto "$p" malloc
        run_tnt tnt-shared auto "$p" shared
    fi
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
        for btl in $OMPI_BTLS; do
            timeout 300 "${OMPI[@]}" -np "$p" --mca btl "$btl,self" \
                "$PEERS_BIN/mpi_allreduce_bench.openmpi" --sizes "$SIZES" \
                --min-time "$MINT" --inplace 2>/dev/null |
                collect_peer "ompi-$btl" || true
        done
    else
        echo "compare-peers: no Open MPI bench: Open MPI left out" >&2
    fi
    if [ -x "$RAWRING" ]; then
        timeout 300 "$RAWRING" --p "$p" --sizes "$SIZES" --min-time "$MINT" \
            2>/dev/null | collect_peer tcp-rawring || true
    else
        echo "compare-peers: no $RAWRING: the raw TCP ring left out" >&2
    fi
    [ "$CPU" = 0 ] || measure_cpu "$p"
done
done
touch "$RAW/cpu"

python3 - "$RAW/rows" "$(uptime)" "$RAW/cpu" "$ROUNDS" > "$RAW/table.md" <<'EOF'
import sys, collections, statistics
ROUNDS = int(sys.argv[4])
def load(path):
    """(p, bytes) -> label -> round -> figure."""
    rows = collections.defaultdict(lambda: collections.defaultdict(dict))
    labels = []
    for line in open(path):
        f = line.split()
        if len(f) != 5:
            continue  # a CPU figure that could not be computed
        lab, p, b, t, rnd = f
        rows[(int(p), int(b))][lab][int(rnd)] = float(t)
        if lab not in labels:
            labels.append(lab)
    return rows, labels
rows, labels = load(sys.argv[1])
cpu, cpu_labels = load(sys.argv[3])
tcp_peers = [l for l in labels if l.startswith("gloo") or l == "ompi-tcp"]
BEFORE = ["tnt-tcp-before"]  # its column only where it ran
def h(b):
    for u, s in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= u and b % u == 0:
            return "%d %s" % (b // u, s)
    return "%d B" % b
print("allreduce f32 sum in place, time in us (lower is better); "
      "load: %s\n" % sys.argv[2].strip())
if ROUNDS > 1:
    print("Each figure is the median of %d rounds; each ratio is taken "
          "within a round, and shown as the median of the rounds' ratios "
          "(their range).\n" % ROUNDS)
def over(num, dens):
    """Cell: r[num] / the least of r[dens] of the same round (median and
    range over the rounds where both exist), or "-" when none has both."""
    def cell(r):
        qs = []
        for rnd, t in r.get(num, {}).items():
            d = min([r[l][rnd] for l in dens if rnd in r.get(l, {})],
                    default=None)
            if d:
                qs.append(t / d)
        if not qs:
            return "-"
        if ROUNDS == 1:
            return "%.2f" % qs[0]
        return "%.2f (%.2f-%.2f)" % (statistics.median(qs), min(qs), max(qs))
    return cell
def table(data, labs, ratios):
    print("| p | size | " + " | ".join(labs + [t for t, _ in ratios]) +
          " |")
    print("|---|---|" + "---|" * (len(labs) + len(ratios)))
    for (p, b) in sorted(data):
        r = data[(p, b)]
        cells = ["%.1f" % statistics.median(r[l].values()) if l in r else "-"
                 for l in labs]
        cells += [cell(r) for _, cell in ratios]
        print("| %d | %s | %s |" % (p, h(b), " | ".join(cells)))
# A ratio whose configuration did not run at all (-T) has no column.
table(rows, labels,
      [(t, over(num, dens)) for t, num, dens in (
          ("tnt-tcp / best TCP peer", "tnt-tcp", tcp_peers),
          ("tnt-tcp-before / best TCP peer", "tnt-tcp-before", tcp_peers),
          ("tnt-tcp / tnt-tcp-before", "tnt-tcp", ["tnt-tcp-before"]),
          ("tnt-auto / ompi-vader", "tnt-auto", ["ompi-vader"]),
          ("tnt-shared / ompi-vader", "tnt-shared", ["ompi-vader"]),
          ("tnt-tcp / tcp-rawring", "tnt-tcp", ["tcp-rawring"]))
       if num in labels and (dens != BEFORE or BEFORE[0] in labels)])
if cpu:
    print("\nCPU time per call, all ranks together (user + sys, us; lower "
          "is better):\n")
    table(cpu, [l for l in cpu_labels if l != "tcp-rawring"],
          [(t, over(num, dens)) for t, num, dens in (
              ("tnt-tcp / least of TCP peers", "tnt-tcp", tcp_peers),
              ("tnt-tcp-before / least of TCP peers", "tnt-tcp-before",
               tcp_peers),
              ("tnt-tcp / tnt-tcp-before", "tnt-tcp", BEFORE))
           if num in cpu_labels and
              (dens != BEFORE or BEFORE[0] in cpu_labels)])
EOF
cat "$RAW/table.md"
[ -z "$OUT" ] || cp "$RAW/table.md" "$OUT"
