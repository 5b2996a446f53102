#!/bin/bash
# netns-testbed.sh - emulate N hosts on this machine with network namespaces,
# for multi-host tests of tnt-run and the library (tests/test_multihost.sh).
#
#   netns-testbed.sh up N [PREFIX] [NET]   e.g. netns-testbed.sh up 4
#   netns-testbed.sh down [PREFIX]         removes the namespaces PREFIX*
#   netns-testbed.sh hosts N [PREFIX]      prints the host names, one a line
#
# Namespace PREFIXbr holds the bridge br0; host namespace PREFIXhK
# (K = 0..N-1) has loopback and "veth0" with address NET.(K+1)/24, whose
# peer "hK" is a port of br0. PREFIX defaults to "tntrun-", NET to
# "10.77.0". No default route and nothing in the caller's namespace: only
# NET.0/24 is reachable, and only from inside these namespaces, so a test
# talks to nothing but its own "hosts". Needs root. With RATE set (e.g.
# RATE=1gbit or 10gbit) "up" shapes every host link in both directions
# with a token bucket filter (egress of veth0 and of its switch port hK;
# BURST, default 256kb, and TBF_LATENCY, default 50ms, tune it): an
# emulated cluster with 1 or 10 Gbit/s links. "up" removes what it
# made if a step fails; "down" is safe to call twice.
set -eu

cmd=${1:-}
case $cmd in
    up) n=${2:?N}; prefix=${3:-tntrun-}; net=${4:-10.77.0} ;;
    down) prefix=${2:-tntrun-} ;;
    hosts) n=${2:?N}; prefix=${3:-tntrun-} ;;
    *) echo "usage: $0 up N [PREFIX] [NET] | down [PREFIX] | hosts N [PREFIX]" >&2
       exit 2 ;;
esac

down() {
    local ns
    for ns in $(ip netns list | awk '{print $1}'); do
        case $ns in
            "${prefix}"br|"${prefix}"h[0-9]*) ip netns del "$ns" ;;
        esac
    done
}

# tbf, not netem: this kernel has no netem; a rate limit is what we need.
shape() {
    ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$RATE" \
        burst "${BURST:-256kb}" latency "${TBF_LATENCY:-50ms}"
}

up() {
    if ip netns list | grep -q "^${prefix}br\b"; then
        echo "$0: ${prefix}br exists; run '$0 down $prefix' first" >&2
        exit 1
    fi
    trap 'down' ERR
    ip netns add "${prefix}br"
    ip -n "${prefix}br" link set lo up
    ip -n "${prefix}br" link add br0 type bridge
    ip -n "${prefix}br" link set br0 up
    local k ns
    for ((k = 0; k < n; k++)); do
        ns=${prefix}h$k
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        # Made inside the host namespace, then the peer moves to the switch.
        ip -n "$ns" link add veth0 type veth peer name "h$k"
        ip -n "$ns" link set "h$k" netns "${prefix}br"
        ip -n "${prefix}br" link set "h$k" master br0
        ip -n "${prefix}br" link set "h$k" up
        ip -n "$ns" addr add "$net.$((k + 1))/24" dev veth0
        ip -n "$ns" link set veth0 up
        if [ -n "${RATE:-}" ]; then
            shape "$ns" veth0
            shape "${prefix}br" "h$k"
        fi
    done
    trap - ERR
}

case $cmd in
    up) up ;;
    down) down ;;
    hosts) for ((k = 0; k < n; k++)); do echo "${prefix}h$k"; done ;;
esac
