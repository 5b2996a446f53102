#!/bin/bash
# Runs inside the guest: a two-rank job over the TCP transport whose ranks
# listen on the two ends of the veth pair (rank 0 on veth0, 192.0.2.1;
# rank 1 on veth1, 192.0.2.2), the path the rxe devices use, so that TCP
# and verbs are compared on the same wire. Started by hand rather than by
# tnt-run, which gives every rank the same TNT_SOCKET_IFNAME.
#   usage: bench-tcp-pair.sh PROGRAM [ARGS...]
# guest-net.sh routes only traffic bound to a veth (rxe's) over the pair;
# a TCP socket names no device, so its traffic between two local
# addresses would go over lo. For the run, locally sent traffic to each
# address leaves by the other end's veth (rules on iif lo, so that what
# arrives on a veth is still delivered locally). veth0's byte counters
# before and after show that the traffic crossed the pair.
set -u
ip rule add pref 12 iif lo to 192.0.2.2 lookup 100
ip rule add pref 13 iif lo to 192.0.2.1 lookup 101
trap 'ip rule del pref 12; ip rule del pref 13' EXIT
export TNT_TRANSPORT=tcp TNT_SIZE=2 TNT_ROOT_ADDR=192.0.2.1:29517 \
    TNT_JOB_KEY=rdma-guest-bench
before=$(cat /sys/class/net/veth0/statistics/tx_bytes)
TNT_RANK=1 TNT_LOCAL_RANK=1 TNT_SOCKET_IFNAME==veth1 "$@" > /tmp/tcp-rank1.out 2>&1 &
r1=$!
TNT_RANK=0 TNT_LOCAL_RANK=0 TNT_SOCKET_IFNAME==veth0 "$@"
rc=$?
wait $r1 || rc=1
[ $rc = 0 ] || cat /tmp/tcp-rank1.out
after=$(cat /sys/class/net/veth0/statistics/tx_bytes)
echo "veth0 sent $((after - before)) bytes during the job"
exit $rc
