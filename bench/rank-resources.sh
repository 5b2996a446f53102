#!/usr/bin/env bash
# rank-resources.sh - file descriptors and resident memory of running ranks
# (docs/scale.md, "Per-rank resources"). Starts `tnt-bench -N P allreduce`
# with the given transport and algorithm at one size, long enough to be
# sampled, and reads /proc/<pid>/fd and VmRSS of every rank (the children
# of that tnt-bench) every 0.2 s; prints the largest fd count and VmRSS
# seen over the ranks, and rank 0's, with the kinds of descriptors
# (socket, memfd, eventfd, ...) of the rank with the most.
#
#   bench/rank-resources.sh P TRANSPORT ALGO [SIZE]   e.g. 32 tcp ring 1M
#
# The figures include tnt-bench's own buffers (in place: one of SIZE) and
# the C library; SIZE defaults to 1M.
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:?usage: rank-resources.sh P TRANSPORT ALGO [SIZE]}
TRANSPORT=${2:?transport}
ALGO=${3:?algorithm}
SIZE=${4:-1M}
BENCH=build/bench/tnt-bench
[ -x "$BENCH" ] || { echo "rank-resources: build first" >&2; exit 2; }

TNT_TRANSPORT=$TRANSPORT TNT_ALLREDUCE_ALGO=$ALGO "$BENCH" -N "$P" \
    allreduce --size "$SIZE" -n 100000 -w 1 --inplace-only -c 0 \
    > /dev/null 2>&1 &
parent=$!
max_fd=0 max_rss=0 fd0=0 rss0=0 kinds=""
sleep 1
for _ in $(seq 1 25); do
    kids=$(cat /proc/"$parent"/task/*/children 2>/dev/null || true)
    first=$(echo $kids | awk '{print $1}')   # rank 0: forked first
    for pid in $kids; do
        fds=$(ls /proc/"$pid"/fd 2>/dev/null | wc -l) || continue
        rss=$(awk '/^VmRSS/ {print $2}' /proc/"$pid"/status 2>/dev/null) ||
            continue
        [ -n "$rss" ] || continue
        if [ "$fds" -gt "$max_fd" ]; then
            max_fd=$fds
            kinds=$(for f in /proc/"$pid"/fd/*; do readlink "$f"; done \
                    2>/dev/null | sed 's/:.*//; s/^\/memfd.*/memfd/' |
                    sort | uniq -c | awk '{printf "%s %s, ", $1, $2}')
        fi
        [ "$rss" -gt "$max_rss" ] && max_rss=$rss
        if [ "$pid" = "$first" ]; then
            [ "$fds" -gt "$fd0" ] && fd0=$fds
            [ "$rss" -gt "$rss0" ] && rss0=$rss
        fi
    done
    sleep 0.2
done
# The ranks first (tnt-bench's children, by pid), then tnt-bench.
for pid in $(cat /proc/"$parent"/task/*/children 2>/dev/null || true); do
    kill "$pid" 2>/dev/null || true
done
kill "$parent" 2>/dev/null || true
wait "$parent" 2>/dev/null || true
printf '| %d | %s | %s | %s | %d | %d | %.1f | %.1f | %s |\n' "$P" \
    "$TRANSPORT" "$ALGO" "$SIZE" "$max_fd" "$fd0" "$((max_rss))e-3" \
    "$((rss0))e-3" "${kinds%, }"
