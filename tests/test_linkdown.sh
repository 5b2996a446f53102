#!/usr/bin/env bash
# A peer that goes silent without closing its connections (its network
# link goes down) must be detected by the keep-alive within the heartbeat
# interval (TNT_HEARTBEAT) plus some slack, not by the long operation
# deadline. Two network namespaces of our own, joined by a veth pair with
# addresses in a private /24 that exists only inside them, each run one
# rank of a p=2 job (tests/linkdown_rank.c) doing allreduces in a loop;
# then the link of rank 1's namespace is set down. Rank 0 must fail with
# TNT_ERR_PEER_LOST naming rank 1, and neither rank may hang.
#
# Needs root and `ip netns`; skips (exit 77) otherwise. The namespaces are
# always removed, also on failure.
#
# Usage: test_linkdown.sh LINKDOWN_RANK_EXE
set -u

rank_exe=${1:?usage: test_linkdown.sh LINKDOWN_RANK_EXE}
hb=${TNT_LINKDOWN_HEARTBEAT:-2}
mult=${TNT_TEST_TIMEOUT_MULT:-1}
# Keep-alive probes need a few intervals on a loaded machine: the bound is
# the interval plus slack, and scaled for sanitizer runs.
bound=$(awk -v h="$hb" -v m="$mult" 'BEGIN { print (3 * h + 5) * m }')
# Longer than the bound and far shorter than the job would otherwise run:
# an error after this long comes from TNT_TIMEOUT, not from the heartbeat.
op_timeout=30
give_up=60

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; failed=1; }

[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "the ip command (iproute2) is missing"

prefix="tntld-$$-"
ns0="${prefix}0"
ns1="${prefix}1"
veth0="tld$$a"
veth1="tld$$b"
tmp=$(mktemp -d /tmp/tnt_linkdown.XXXXXX)
pid0=""
pid1=""
failed=0

cleanup() {
    for p in $pid0 $pid1; do
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    ip netns del "$ns0" 2>/dev/null
    ip netns del "$ns1" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$ns0" 2>"$tmp/err" ||
    skip "ip netns add failed: $(cat "$tmp/err")"
ip netns add "$ns1" 2>"$tmp/err" ||
    skip "ip netns add failed: $(cat "$tmp/err")"
# The pair is created inside the first namespace with its other end in the
# second: nothing of it ever appears in the host's namespace.
set -e
ip -n "$ns0" link add "$veth0" type veth peer name "$veth1" netns "$ns1"
ip -n "$ns0" addr add 10.77.0.1/24 dev "$veth0"
ip -n "$ns1" addr add 10.77.0.2/24 dev "$veth1"
for ns in "$ns0" "$ns1"; do
    ip -n "$ns" link set lo up
done
ip -n "$ns0" link set "$veth0" up
ip -n "$ns1" link set "$veth1" up
set +e

key=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
# `ip netns exec` and env exec the rank in place: $! is the rank itself.
for r in 0 1; do
    ns=$([ "$r" = 0 ] && echo "$ns0" || echo "$ns1")
    ip netns exec "$ns" env TNT_RANK="$r" TNT_SIZE=2 \
        TNT_ROOT_ADDR=10.77.0.1:29411 TNT_JOB_KEY="$key" \
        TNT_HEARTBEAT="$hb" TNT_TIMEOUT="$op_timeout" \
        TNT_CONNECT_TIMEOUT=30 \
        "$rank_exe" "$tmp/ready$r" "$give_up" \
        >"$tmp/out$r" 2>"$tmp/log$r" &
    if [ "$r" = 0 ]; then pid0=$!; else pid1=$!; fi
done

# Both ranks must be running their allreduces before the link goes down.
for _ in $(seq 600); do
    [ -e "$tmp/ready0" ] && [ -e "$tmp/ready1" ] && break
    kill -0 "$pid0" 2>/dev/null && kill -0 "$pid1" 2>/dev/null || break
    sleep 0.1
done
if ! [ -e "$tmp/ready0" ] || ! [ -e "$tmp/ready1" ]; then
    echo "FAIL: the job did not get going"
    for r in 0 1; do
        echo "--- rank $r:"; cat "$tmp/out$r" "$tmp/log$r"
    done
    exit 1
fi

t_down=$("$rank_exe" now)
ip -n "$ns1" link set "$veth1" down
echo "link $veth1 of rank 1 down at $t_down (heartbeat $hb s, bound $bound s)"

# Wait for both ranks, but never longer than the give-up time plus slack.
limit=$(( $(date +%s) + give_up + 30 ))
while kill -0 "$pid0" 2>/dev/null || kill -0 "$pid1" 2>/dev/null; do
    [ "$(date +%s)" -lt "$limit" ] || break
    sleep 0.2
done
for r in 0 1; do
    p=$([ "$r" = 0 ] && echo "$pid0" || echo "$pid1")
    if kill -0 "$p" 2>/dev/null; then
        fail "rank $r still runs $((give_up + 30)) s after the link went" \
             "down: it hangs"
    fi
done

for r in 0 1; do
    line=$(grep '^RESULT ' "$tmp/out$r" | head -1)
    echo "rank $r: ${line:-no result}"
    if [ -z "$line" ]; then
        fail "rank $r printed no result"
        sed 's/^/    /' "$tmp/log$r"
        continue
    fi
    rc=$(sed -n 's/.* rc=\([-0-9]*\) .*/\1/p' <<<"$line")
    t=$(sed -n 's/.* t=\([0-9.]*\) .*/\1/p' <<<"$line")
    wrong=$(sed -n 's/.* wrong=\([0-9]*\) .*/\1/p' <<<"$line")
    msg=${line#* msg=}
    lat=$(awk -v a="$t" -v b="$t_down" 'BEGIN { printf "%.3f", a - b }')
    echo "rank $r: link down -> error in $lat s"
    [ "$wrong" = 0 ] || fail "rank $r had $wrong wrong allreduce results"
    if awk -v l="$lat" -v b="$bound" 'BEGIN { exit !(l > b) }'; then
        fail "rank $r noticed the silent peer only after $lat s (bound" \
             "$bound s = 3 heartbeats + 5 s)"
    fi
    if [ "$r" = 0 ]; then
        # TNT_ERR_PEER_LOST is -6 (include/tnt/tnt.h).
        [ "$rc" = -6 ] ||
            fail "rank 0 returned $rc, expected -6 (TNT_ERR_PEER_LOST): $msg"
        case $msg in
        *"rank 1 (host "*lost* | *lost*"rank 1 (host "*) ;;
        *) fail "rank 0's error does not name rank 1 as lost: $msg" ;;
        esac
    else
        [ "$rc" -lt 0 ] 2>/dev/null ||
            fail "rank 1 (whose link went down) returned $rc, expected an" \
                 "error"
    fi
done
if [ "$failed" != 0 ]; then
    for r in 0 1; do
        echo "--- log of rank $r:"
        tail -20 "$tmp/log$r"
    done
    exit 1
fi
echo "PASS"
exit 0
