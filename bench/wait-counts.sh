#!/usr/bin/env bash
# How an allreduce over loopback TCP waits, in counts that depend little on
# what else runs on the host: system calls by kind, bytes per socket read
# and write, voluntary context switches (sleeps), per call, for
# libtntcomm and its peers (Gloo ring-chunked and halving-doubling, Open
# MPI btl tcp), the same call side by side.
#
# Each configuration runs twice, long and short (start-up, warm-up and a
# few calls), and every count is the difference divided by the difference
# in calls, which cancels start-up, warm-up and the checks; with -r R the
# whole sweep runs R times and each figure is the median of the rounds. The counts come from the
# kernel's tracepoints through `perf stat` (every system call of every
# rank and thread, at no cost to the run, unlike strace, which slows
# each call and so changes how often a spinning thread looks): calls by
# kind, the socket reads that found nothing (EAGAIN) and the writes the
# socket refused, context switches and migrations; and getrusage of the
# waited-for ranks: CPU time, voluntary context switches (a thread that
# blocked: a sleep and its wake-up) and involuntary ones (the scheduler
# took the CPU). Data calls and empty reads depend little on the host's
# load; a spinning library's empty reads, waits and CPU time grow with
# how long it waits, and involuntary switches with the load.
#
# The peers' benchmarks come from ../shared/peers (PEERS_BIN, as
# compare-peers); TNT_BENCH_BEFORE=PATH adds an older tnt-bench as
# tnt-before, run right after tnt in every configuration.
#
# Usage: bench/wait-counts.sh [-p "2 4"] [-s "256K,1M,8M"] [-o OUT.md]
#                             [-r ROUNDS] [-l "tnt gloo-hd ..."] (these only)
set -euo pipefail

PS="2 4"
SIZES="256K,1M,8M"
OUT=""
ONLY=""
ROUNDS=1
while getopts "p:s:o:l:r:h" opt; do
    case $opt in
    p) PS=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    o) OUT=$(realpath -m "$OPTARG") ;;
    l) ONLY=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    *) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
[ -z "${TNT_BENCH:-}" ] || TNT_BENCH=$(realpath "$TNT_BENCH")
[ -z "${TNT_BENCH_BEFORE:-}" ] || TNT_BENCH_BEFORE=$(realpath "$TNT_BENCH_BEFORE")
cd "$(dirname "$0")/.."
BENCH=${TNT_BENCH:-build/bench/tnt-bench}
BEFORE=${TNT_BENCH_BEFORE:-}
PEERS_BIN=${PEERS_BIN:-/tmp/tnt-peers/bin}
for t in perf; do
    command -v $t > /dev/null ||
        { echo "wait-counts: needs $t" >&2; exit 1; }
done
[ -x "$BENCH" ] || { echo "wait-counts: no $BENCH (build first)" >&2; exit 1; }
RAW=$(mktemp -d /tmp/wait-counts.XXXXXX)
[ -n "${KEEP_RAW:-}" ] && echo "wait-counts: raw files in $RAW" >&2 || trap 'rm -rf "$RAW"' EXIT

bytes_of() {
    local s=$1
    case $s in
    *K) echo $((${s%K} * 1024)) ;;
    *M) echo $((${s%M} * 1024 * 1024)) ;;
    *) echo "$s" ;;
    esac
}

# Tracepoint events: system calls by kind, and the reads/writes that
# returned EAGAIN (-11).
EVENTS=(-e raw_syscalls:sys_enter -e context-switches -e cpu-migrations)
for k in read readv recvfrom recvmsg; do
    EVENTS+=(-e "syscalls:sys_enter_$k" -e "syscalls:sys_exit_$k"
             --filter "ret == -11")
done
for k in write writev sendto sendmsg; do
    EVENTS+=(-e "syscalls:sys_enter_$k" -e "syscalls:sys_exit_$k"
             --filter "ret == -11")
done
for k in epoll_wait epoll_pwait poll ppoll select pselect6 futex sched_yield; do
    EVENTS+=(-e "syscalls:sys_enter_$k")
done

# The counts above for CMD and its descendants, and getrusage's user+sys
# CPU s, voluntary and involuntary context switches of every descendant
# it waited for.
count_run() { # out CMD...
    local out=$1
    shift
    perf stat -x, "${EVENTS[@]}" -o "$out.perf" -- python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"),
               stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.6f %d %d" % (r.ru_utime + r.ru_stime, r.ru_nvcsw, r.ru_nivcsw),
      file=sys.stderr)' "$out.stdout" "$@" 2> "$out.rusage"
}

iters_of() { # a peer's stdout: the timed iterations it reports
    sed -n 's/.* iters=\([0-9]*\) .*/\1/p' "$1" | head -1
}

# One configuration: a long run and a short one.
measure() { # label p bytes
    local label=$1 p=$2 b=$3 n2 n1 k
    local base="$RAW/$label.$p.$b.$ROUND"
    case $label in
    tnt | tnt-before)
        local bench=$BENCH
        [ "$label" = tnt ] || bench=$BEFORE
        # Calls: 800 MB in the long run, 100 to 4,000 calls.
        n2=$(awk -v b="$b" 'BEGIN { n = int(800e6 / b); if (n < 100) n = 100;
                                     if (n > 4000) n = 4000; print n }')
        n1=1
        for k in long short; do
            local n=$n2
            [ $k = long ] || n=$n1
            local cmd=(env TNT_TRANSPORT=tcp timeout 300 "$bench" -N "$p"
                       allreduce --size "$b" -n "$n" -w 3 -c 0 --inplace-only)
            count_run "$base.$k" "${cmd[@]}"
            echo "$n" > "$base.$k.iters"
        done
        ;;
    gloo-*)
        for k in long short; do
            local t=0.4
            [ $k = long ] || t=0.001
            local cmd=(timeout 300 "$PEERS_BIN/gloo_bench" --algo "${label#gloo-}"
                       --p "$p" --sizes "$b" --min-time "$t")
            count_run "$base.$k" "${cmd[@]}"
            iters_of "$base.$k.stdout" > "$base.$k.iters"
        done
        ;;
    ompi-tcp)
        for k in long short; do
            local t=0.4
            [ $k = long ] || t=0.001
            local cmd=(timeout 300 mpirun.openmpi --allow-run-as-root
                       --oversubscribe --mca pml ob1 --mca btl tcp,self
                       --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
                       -np "$p" "$PEERS_BIN/mpi_allreduce_bench.openmpi"
                       --inplace --sizes "$b" --min-time "$t")
            count_run "$base.$k" "${cmd[@]}"
            iters_of "$base.$k.stdout" > "$base.$k.iters"
        done
        ;;
    esac
    echo "$label $p $b $ROUND" >> "$RAW/configs"
}

LABELS="tnt"
[ -z "$BEFORE" ] || LABELS="tnt tnt-before"
[ -x "$PEERS_BIN/gloo_bench" ] && LABELS="$LABELS gloo-ringchunked gloo-hd" ||
    echo "wait-counts: no $PEERS_BIN/gloo_bench: Gloo left out" >&2
if [ -x "$PEERS_BIN/mpi_allreduce_bench.openmpi" ] &&
    command -v mpirun.openmpi > /dev/null; then
    LABELS="$LABELS ompi-tcp"
else
    echo "wait-counts: no Open MPI bench: Open MPI left out" >&2
fi
[ -z "$ONLY" ] || LABELS=$ONLY
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    for p in $PS; do
        for s in ${SIZES//,/ }; do
            b=$(bytes_of "$s")
            for lab in $LABELS; do
                echo "wait-counts: round $ROUND, $lab p=$p $s" >&2
                measure "$lab" "$p" "$b"
            done
        done
    done
done

python3 - "$RAW" "$(uptime)" "$ROUNDS" > "$RAW/table.md" <<'EOF'
import sys
raw, uptime, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])

def num(path):
    try:
        return float(open(path).read().split()[0])
    except (OSError, IndexError, ValueError):
        return None

def counts(base):
    """perf's and getrusage's figures of one run, summed by kind."""
    try:
        cpu, vol, inv = open(base + ".rusage").read().split()[-3:]
    except (OSError, ValueError):
        return None
    c = {"cpu": float(cpu) * 1e6, "vol": float(vol), "inv": float(inv)}
    for k in ("all", "cs", "mig", "rd", "rd_again", "wr", "wr_again",
              "wait", "futex", "yield"):
        c[k] = 0.0
    for l in open(base + ".perf"):
        f = l.strip().split(",")
        if len(f) < 3 or not f[0].isdigit():
            continue
        n, ev = float(f[0]), f[2]
        name = ev.split("_", 2)[-1] if ev.startswith("syscalls:") else ev
        if ev == "raw_syscalls:sys_enter":
            c["all"] += n
        elif ev == "context-switches":
            c["cs"] += n
        elif ev == "cpu-migrations":
            c["mig"] += n
        elif name in ("read", "readv", "recvfrom", "recvmsg"):
            c["rd" if "enter" in ev else "rd_again"] += n
        elif name in ("write", "writev", "sendto", "sendmsg"):
            c["wr" if "enter" in ev else "wr_again"] += n
        elif name in ("epoll_wait", "epoll_pwait", "poll", "ppoll",
                      "select", "pselect6"):
            c["wait"] += n
        elif name == "futex":
            c["futex"] += n
        elif name == "sched_yield":
            c["yield"] += n
    return c

import statistics
per = {}
order = []
for l in open(raw + "/configs"):
    label, p, b, rnd = l.split()
    base = "%s/%s.%s.%s.%s" % (raw, label, p, b, rnd)
    nl, ns = num(base + ".long.iters"), num(base + ".short.iters")
    cl, cs = counts(base + ".long"), counts(base + ".short")
    d = None
    if nl and ns and nl > ns and cl and cs:
        d = {k: (cl[k] - cs[k]) / (nl - ns) for k in cl}
    key = (label, int(p), int(b))
    if key not in per:
        per[key] = []
        order.append(key)
    if d:
        per[key].append(d)
rows = []
for key in order:
    ds = per[key]
    d = {k: statistics.median(x[k] for x in ds) for k in ds[0]} if ds else None
    rows.append(key + (d,))

def fmt(x, d=1):
    if abs(x) >= 100:
        return "{:,.0f}".format(x)
    return "%.*f" % (d, x)

def size(b):
    return "%d KiB" % (b >> 10) if b < 1 << 20 else "%d MiB" % (b >> 20)

print("Host: %s\n" % uptime)
print("Per call, all ranks and threads together (long run minus short run, "
      "divided by the calls between them; median of %d rounds)." % rounds +
      " Reads are "
      "read/readv/recvfrom/recvmsg (sockets, and the few reads of eventfds "
      "and files), \"empty\" those that returned EAGAIN; writes likewise; "
      "\"KiB per read\" divides the bytes a bandwidth-optimal allreduce "
      "moves, 2(p-1) x size over all ranks, by the reads that returned "
      "data; \"waits\" are epoll_wait/poll/select; \"per rank-step\" "
      "divides by p x 2(p-1), the steps of a ring.\n")
print("| p | size | library | syscalls | reads (empty) | KiB per read | "
      "writes (EAGAIN) | waits | futex | sched_yield | waits + futex per "
      "rank-step | context switches | voluntary | involuntary | "
      "migrations | CPU us |")
print("|" + "---|" * 16)
for label, p, b, d in rows:
    if not d:
        print("| %d | %s | %s |%s" % (p, size(b), label, " - |" * 13))
        continue
    steps = p * 2 * (p - 1)
    ok = d["rd"] - d["rd_again"]
    cells = [fmt(d["all"]), "%s (%s)" % (fmt(d["rd"]), fmt(d["rd_again"])),
             fmt(2 * (p - 1) * b / ok / 1024) if ok > 0 else "-",
             "%s (%s)" % (fmt(d["wr"]), fmt(d["wr_again"])),
             fmt(d["wait"]), fmt(d["futex"]), fmt(d["yield"]),
             fmt((d["wait"] + d["futex"]) / steps, 2), fmt(d["cs"]),
             fmt(d["vol"]), fmt(d["inv"]), fmt(d["mig"]), fmt(d["cpu"])]
    print("| %d | %s | %s | %s |" % (p, size(b), label, " | ".join(cells)))
EOF
if [ -n "$OUT" ]; then cp "$RAW/table.md" "$OUT"; fi
cat "$RAW/table.md"
