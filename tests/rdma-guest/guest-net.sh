# Sourced inside the guest: two soft-RoCE devices, rxe0 on veth0 and rxe1
# on veth1, the two ends of one veth pair (192.0.2.1 and 192.0.2.2, the
# documentation range; the guest has no other network device), so ranks
# on rxe0 and ranks on rxe1 talk as two hosts would, over the pair.
set -e
up() { echo "rdma-guest: $* at $(cut -d' ' -f1 /proc/uptime) s"; }
up "network setup starts"
# rdma_rxe needs the crc32 algorithm that no udev loads for it here.
modprobe -a crc32_generic rdma_rxe ib_uverbs rdma_ucm veth
up "modules loaded"
ip link add veth0 type veth peer name veth1
ip addr add 192.0.2.1/24 dev veth0
ip addr add 192.0.2.2/24 dev veth1
ip link set veth0 up
ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1
up "rxe devices added"
# Both ends live in one namespace, so the kernel would route 192.0.2.1 <->
# 192.0.2.2 over lo, where rxe never sees it (rxe's socket is in the
# initial namespace in 6.1, so a second namespace does not help): policy
# routing sends each end's traffic out of its own veth, accept_local and
# rp_filter=0 let the other end take it.
sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
    net.ipv4.conf.veth0.rp_filter=0 net.ipv4.conf.veth1.rp_filter=0 \
    net.ipv4.conf.veth0.accept_local=1 net.ipv4.conf.veth1.accept_local=1
ip rule add pref 10 oif veth0 lookup 100
ip rule add pref 11 oif veth1 lookup 101
ip route add 192.0.2.2/32 dev veth0 src 192.0.2.1 table 100
ip route add 192.0.2.1/32 dev veth1 src 192.0.2.2 table 101
ip rule add pref 100 lookup local
ip rule del pref 0
# Wait until both ports are active.
for _ in $(seq 50); do
    n=$(cat /sys/class/infiniband/rxe*/ports/1/state 2>/dev/null | grep -c ACTIVE || true)
    [ "$n" = 2 ] && break
    sleep 0.1
done
ulimit -l unlimited
set +e
