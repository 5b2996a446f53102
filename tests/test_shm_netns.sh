#!/bin/bash
# Mixed transports across emulated hosts: 4 network namespaces joined by
# a bridge, 2 ranks in each. Each namespace is its own host identity
# (lib/util/hostid.c), so with TNT_TRANSPORT=auto a rank must reach its
# namespace partner over shared memory and the 6 others over TCP; every
# rank runs a checked allreduce and broadcast sweep (tnt-bench exits
# non-zero on a wrong element). Needs root and iproute2; otherwise it is
# skipped (exit 77). Namespaces are named tshm<pid>-*, and removed on
# every exit path.
# Usage: test_shm_netns.sh PATH-TO-TNT-BENCH
set -u
BENCH=${1:?usage: test_shm_netns.sh PATH-TO-TNT-BENCH}
HOSTS=4
PER=2
P=tshm$$
if [ "$(id -u)" != 0 ] || ! command -v ip > /dev/null; then
    echo "skipped: needs root and iproute2"
    exit 77
fi
cleanup() {
    for ns in $(ip netns list | awk '{print $1}' | grep "^$P-"); do
        ip netns del "$ns" 2> /dev/null
    done
}
trap cleanup EXIT
set -e
if ! ip netns add "$P-br" 2> /dev/null; then
    echo "skipped: cannot create network namespaces here"
    exit 77
fi
ip -n "$P-br" link add br0 type bridge
ip -n "$P-br" link set br0 up
for ((k = 0; k < HOSTS; k++)); do
    ns=$P-h$k
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add veth0 type veth peer name "h$k"
    ip -n "$ns" link set "h$k" netns "$P-br"
    ip -n "$P-br" link set "h$k" master br0
    ip -n "$P-br" link set "h$k" up
    ip -n "$ns" addr add "10.231.77.$((k + 1))/24" dev veth0
    ip -n "$ns" link set veth0 up
done
set +e
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_shm_netns.XXXXXX")
fail=0
for coll in allreduce broadcast; do
    pids=()
    for ((r = 0; r < HOSTS * PER; r++)); do
        ip netns exec "$P-h$((r / PER))" env -u TNT_HOST_ID TNT_RANK=$r \
            TNT_SIZE=$((HOSTS * PER)) TNT_ROOT_ADDR=10.231.77.1:29577 \
            TNT_JOB_KEY="$P" TNT_TRANSPORT=auto TNT_LOG_LEVEL=INFO \
            TNT_LOG_ALL_RANKS=1 \
            timeout 240 "$BENCH" "$coll" -b 8 -e 4M -f 8 -n 2 -w 1 \
            > "$TMP/$coll.$r" 2>&1 &
        pids+=($!)
    done
    for ((r = 0; r < HOSTS * PER; r++)); do
        if ! wait "${pids[$r]}"; then
            echo "FAIL: $coll rank $r exited non-zero:"
            tail -5 "$TMP/$coll.$r"
            fail=1
        fi
    done
done
# The transports each rank chose (from its "communicator ready" line).
want="tcp ($(((HOSTS - 1) * PER)) peers) shm ($((PER - 1)) peer)"
for ((r = 0; r < HOSTS * PER; r++)); do
    if ! grep -qF "transport $want" "$TMP/allreduce.$r"; then
        echo "FAIL: rank $r did not report '$want':"
        grep "ready" "$TMP/allreduce.$r"
        fail=1
    fi
done
rm -rf "$TMP"
[ $fail = 0 ] && echo "passed: $HOSTS hosts x $PER ranks, shm inside, tcp between"
exit $fail
