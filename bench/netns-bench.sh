#!/usr/bin/env bash
# netns-bench.sh - allreduce over an emulated cluster: HOSTS network
# namespaces (bench/netns-testbed.sh) whose links are shaped to RATE with
# tbf, RANKS ranks per host started by tnt-run through "ip netns exec",
# tnt-bench in place at the sizes of ../shared/peers' netns table. Prints
# one Markdown row in that table's format (8 B and 32 KiB as time in us,
# larger sizes as busbw in GB/s, and 64 MiB busbw as a share of the link),
# so that it can be read against the Gloo and Open MPI rows there.
#
#   bench/netns-bench.sh RATE [HOSTS] [RANKS]     e.g. netns-bench.sh 1gbit 4 1
#
# RATE is a tc rate (1gbit, 10gbit) or "none" for unshaped veth links.
# With one rank per host a second row follows: build/bench/tcp-rawring, one
# rank per namespace, moving the bytes of each size's allreduce around the
# ring of hosts with no library (what the links and this machine's CPUs
# give for the bytes alone); NETNS_RAWRING=0 leaves it out.
# Extra tnt-bench/library settings pass through the environment
# (TNT_ALLREDUCE_ALGO, TNT_SEGMENT_BYTES, ... are forwarded with -x).
# Needs root; removes its namespaces (prefix tntnb-) on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:?usage: netns-bench.sh RATE [HOSTS] [RANKS]}
HOSTS=${2:-4}
RANKS=${3:-1}
PREFIX=tntnb-
RUN=build/tools/tnt-run
BENCH=build/bench/tnt-bench
RAWRING=build/bench/tcp-rawring
[ -x "$RUN" ] && [ -x "$BENCH" ] ||
    { echo "netns-bench: build first (bash scripts/setup.sh build)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/netns-bench.XXXXXX)
cleanup() { bash bench/netns-testbed.sh down "$PREFIX"; rm -rf "$TMP"; }
trap cleanup EXIT
bash bench/netns-testbed.sh down "$PREFIX"
if [ "$RATE" = none ]; then
    bash bench/netns-testbed.sh up "$HOSTS" "$PREFIX" 10.79.0
else
    RATE=$RATE bash bench/netns-testbed.sh up "$HOSTS" "$PREFIX" 10.79.0
fi
bash bench/netns-testbed.sh hosts "$HOSTS" "$PREFIX" > "$TMP/hostfile"
fwd=()
for v in $(env | sed -n 's/^\(TNT_[A-Z_]*\)=.*/\1/p'); do fwd+=(-x "$v"); done

declare -A T B
# size iterations warm-up
for spec in "8 300 20" "32768 100 10" "262144 20 3" "1048576 10 2" \
            "8388608 3 1" "67108864 2 1"; do
    read -r size n w <<< "$spec"
    timeout 600 "$RUN" --hostfile "$TMP/hostfile" --n-per-node "$RANKS" \
        --rsh "ip netns exec" "${fwd[@]}" "$BENCH" allreduce --size "$size" \
        -n "$n" -w "$w" --inplace-only > "$TMP/out" 2> "$TMP/err" ||
        { echo "netns-bench: $size B failed:" >&2; tail "$TMP/err" >&2; exit 1; }
    # Rank 0's in-place time (us); busbw from it with three decimals
    # (tnt-bench prints two): bytes / time x 2(p-1)/p.
    read -r t b < <(awk -v s="$size" -v p=$((HOSTS * RANKS)) \
        '$1 == "[0]" && $2 == s {
            bw = p > 1 ? s / ($11 * 1e3) * 2 * (p - 1) / p : 0
            printf "%s %.3f\n", $11, bw }' "$TMP/out")
    T[$size]=$t
    B[$size]=$b
done
# link_share BUSBW: a 64 MiB busbw (GB/s) as a share of the link rate.
link_share() {
    case $RATE in
        *gbit) awk -v b="$1" -v r="${RATE%gbit}" \
                   'BEGIN { printf "%.0f%%", 100 * b / (r / 8) }' ;;
        *) echo - ;;
    esac
}
share=$(link_share "${B[67108864]}")
# The raw ring row: rank k in namespace k on NET.(k+1); time (us) for the
# small sizes, busbw (GB/s) above, as in the library's row.
rawring_row=""
if [ "$RANKS" = 1 ] && [ "${NETNS_RAWRING:-1}" != 0 ] && [ -x "$RAWRING" ]; then
    addrs=$(for ((k = 0; k < HOSTS; k++)); do printf '10.79.0.%d,' $((k + 1)); done)
    addrs=${addrs%,}
    mapfile -t hosts < "$TMP/hostfile"
    pids=()
    for ((k = HOSTS - 1; k >= 0; k--)); do
        timeout 600 ip netns exec "${hosts[$k]}" "$RAWRING" --rank "$k" \
            --addrs "$addrs" --sizes 8,32K,256K,1M,8M,64M --min-time 0.3 \
            > "$TMP/rawring.$k" 2> "$TMP/rawring.err.$k" &
        pids+=($!)
    done
    ok=1
    for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
    if [ "$ok" = 1 ]; then
        # Its lines: "rawring ... bytes=N ... time_us=T busbw_GBps=X ...".
        declare -A RT RB
        while read -r n t b; do
            RT[$n]=$t
            RB[$n]=$b
        done < <(sed -n 's/.* bytes=\([0-9]*\) .*time_us=\([0-9.]*\) busbw_GBps=\([0-9.]*\).*/\1 \2 \3/p' \
                 "$TMP/rawring.0")
        rawring_row=$(printf '| %s | tcp-rawring %d hosts x 1 (no library: the bytes alone) | %s | %s | %.3f | %.3f | %.3f | %.3f | %s |' \
            "$RATE" "$HOSTS" "${RT[8]}" "${RT[32768]}" "${RB[262144]}" \
            "${RB[1048576]}" "${RB[8388608]}" "${RB[67108864]}" \
            "$(link_share "${RB[67108864]}")")
    else
        echo "netns-bench: tcp-rawring failed: $(cat "$TMP"/rawring.err.*)" >&2
    fi
fi
echo "# $(uptime)"
echo "| link rate (tbf, each direction) | config | 8 B us | 32 KiB us | 256 KiB busbw | 1 MiB busbw | 8 MiB busbw | 64 MiB busbw GB/s | 64 MiB busbw / link |"
echo "|---|---|---|---|---|---|---|---|---|"
echo "| $RATE | libtntcomm $HOSTS hosts x $RANKS (${TNT_ALLREDUCE_ALGO:-auto}${TNT_TOPOLOGY:+, TNT_TOPOLOGY=$TNT_TOPOLOGY}) | ${T[8]} | ${T[32768]} | ${B[262144]} | ${B[1048576]} | ${B[8388608]} | ${B[67108864]} | $share |"
[ -z "$rawring_row" ] || echo "$rawring_row"
