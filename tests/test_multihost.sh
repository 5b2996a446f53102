#!/bin/bash
# The rank programs are single-quoted on purpose: the ranks expand them.
# shellcheck disable=SC2016
# tnt-run across several hosts for real: 4 network namespaces joined by a
# bridge (bench/netns-testbed.sh, addresses 10.77.0.1-4 that exist only
# inside them) are the hosts, "ip netns exec" is the remote agent, and 2
# ranks run on each. Checks: every host has its own address and rank 0's
# is used; the allreduce of tnt-bench (with its element check) over the
# veth network for two types and ops; TNT_SOCKET_IFNAME errors; a failing
# rank stops the job on every host with its status, naming rank and host;
# Ctrl+C (once, twice) and a killed launcher leave no process anywhere;
# the job key appears on no command line; missing program and unreachable
# host are clear errors; --cleanup over the hostfile.
# Usage: test_multihost.sh TNT-RUN TNT-BENCH. Needs root (skips, 77).
set -u

RUN=${1:?usage: test_multihost.sh TNT-RUN TNT-BENCH}
BENCH=${2:?usage: test_multihost.sh TNT-RUN TNT-BENCH}
case $RUN in /*) ;; *) RUN=$PWD/$RUN ;; esac
case $BENCH in /*) ;; *) BENCH=$PWD/$BENCH ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
TESTBED=$HERE/../bench/netns-testbed.sh

if [ "$(id -u)" != 0 ]; then
    echo "test_multihost.sh: SKIP: needs root to create network namespaces"
    exit 77
fi
PREFIX=tntrun-mh$$-
# Root in a container without CAP_SYS_ADMIN cannot make namespaces.
if ! ip netns add "${PREFIX}probe" 2>/dev/null; then
    echo "test_multihost.sh: SKIP: cannot create network namespaces here" \
         "(is iproute2 installed?)"
    exit 77
fi
ip netns del "${PREFIX}probe"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_multihost.XXXXXX") || exit 1
MARK=tntmhmark$$
BG=()
teardown() {
    for pid in "${BG[@]}"; do
        kill -KILL "$pid" 2>/dev/null
    done
    pkill -KILL -f "$MARK" 2>/dev/null
    bash "$TESTBED" down "$PREFIX"
    rm -rf "$TMP"
}
trap teardown EXIT
trap 'exit 1' INT TERM

if ! bash "$TESTBED" up 4 "$PREFIX" 10.77.0; then
    echo "test_multihost.sh: cannot create the namespaces" >&2
    exit 1
fi
HF=$TMP/hostfile
{
    echo "# four emulated hosts"
    bash "$TESTBED" hosts 4 "$PREFIX"
} >"$HF"
H=${PREFIX}h

passed=0
failed=0
current=""
case_ok=1
begin() { current=$1; case_ok=1; }
fail() { echo "FAIL [$current]: $*"; case_ok=0; }
end() {
    if [ $case_ok = 1 ]; then
        echo "ok   [$current]"
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}

OUT=$TMP/out
ERR=$TMP/err
# Runs a job on the 4 hosts x 2 ranks, bounded; sets rc, OUT, ERR.
run() {
    timeout -k 5 100 "$RUN" --hostfile "$HF" --n-per-node 2 \
        --rsh "ip netns exec" "$@" >"$OUT" 2>"$ERR"
    rc=$?
}
expect_rc() {
    [ "$rc" = "$1" ] ||
        fail "exit status $rc, expected $1; stderr: $(head -c 800 "$ERR")"
}
leftovers() { pgrep -f "$MARK" | wc -l; }
# Waits up to $1 s for the marked processes to be gone.
wait_gone() {
    local t
    for ((t = 0; t < $1 * 10; t++)); do
        [ "$(leftovers)" = 0 ] && return 0
        sleep 0.1
    done
    return 1
}

begin "each host has its own address; rank 0's is on the first"
run --output-on-all-ranks sh -c \
    'echo "$TNT_RANK $TNT_LOCAL_RANK $TNT_ROOT_ADDR $(ip -4 -o addr show veth0 | awk "{print \$4}")"'
expect_rc 0
for r in 0 1 2 3 4 5 6 7; do
    want="10.77.0.$((r / 2 + 1))/24"
    grep -qE "^\[$r\] $r $((r % 2)) 10\.77\.0\.1:[0-9]+ $want\$" "$OUT" ||
        fail "rank $r: expected host address $want in: $(cat "$OUT")"
done
end

for dt_op in "f32 sum" "i64 max" "f64 avg"; do
    set -- "${dt_op% *}" "${dt_op#* }"
    begin "allreduce over the veth network, 4 hosts x 2 ranks, $1 $2"
    start=$(date +%s)
    run -x TNT_SOCKET_IFNAME=veth0 --timeout 90 "$BENCH" allreduce \
        -b 8 -e 4M -f 16 -n 2 -w 1 -d "$1" -o "$2"
    expect_rc 0
    rows=$(grep -cE '^\[0\] +[0-9]+ ' "$OUT")
    [ "$rows" -ge 5 ] || fail "expected at least 5 sizes, got $rows: $(cat "$OUT" "$ERR")"
    bad=$(grep -E '^\[0\] +[0-9]+ ' "$OUT" | awk '$10 != 0 || $14 != 0' | wc -l)
    [ "$bad" = 0 ] || fail "rows with wrong elements: $(cat "$OUT")"
    echo "     ($rows sizes checked in $(( $(date +%s) - start )) s)"
    end
done

begin "TNT_SOCKET_IFNAME matching nothing lists the interfaces"
run -x TNT_SOCKET_IFNAME=nosuch0 "$BENCH" allreduce --size 64
[ "$rc" != 0 ] || fail "exit status 0"
{ grep -q "nosuch0" "$ERR" && grep -q "veth0" "$ERR"; } ||
    fail "stderr does not name the pattern and veth0: $(head -c 800 "$ERR")"
end

begin "a failing rank stops every host within 5 s, with its status"
start=$(date +%s%N)
run sh -c 'if [ "$TNT_RANK" = 5 ]; then sleep 0.5; exit 3; fi
           exec sleep 60' "$MARK"
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect_rc 3
grep -q "rank 5 on host ${H}2 .*exited with status 3" "$ERR" ||
    fail "no message naming rank 5 and host ${H}2: $(cat "$ERR")"
# 0.5 s before the failure, up to 5 s to stop, and a loaded machine.
[ "$elapsed_ms" -lt 8000 ] || fail "took $elapsed_ms ms"
wait_gone 2 || fail "$(leftovers) processes left"
end

begin "Ctrl+C reaches every rank on every host as SIGTERM"
"$RUN" --hostfile "$HF" --n-per-node 2 --rsh "ip netns exec" sh -c \
    'trap "echo term >$0.\$TNT_RANK; exit 0" TERM; sleep 60 & wait' \
    "$TMP/$MARK" >"$OUT" 2>"$ERR" &
BG+=($!)
sleep 2
kill -INT "${BG[-1]}"
wait "${BG[-1]}"
rc=$?
expect_rc 130
n=$(find "$TMP" -name "$MARK.*" | wc -l)
[ "$n" = 8 ] || fail "$n of 8 ranks saw SIGTERM"
wait_gone 3 || fail "$(leftovers) processes left"
end

begin "a second Ctrl+C kills ranks that ignore SIGTERM"
"$RUN" --hostfile "$HF" --n-per-node 2 --rsh "ip netns exec" sh -c \
    'trap "" TERM; sleep 60' "$MARK" >"$OUT" 2>"$ERR" &
BG+=($!)
sleep 2
kill -INT "${BG[-1]}"
sleep 0.5
kill -INT "${BG[-1]}"
start=$(date +%s)
wait "${BG[-1]}"
[ $(( $(date +%s) - start )) -le 3 ] || fail "second SIGINT took too long"
grep -q "SIGKILL" "$ERR" || fail "no SIGKILL message: $(cat "$ERR")"
wait_gone 3 || fail "$(leftovers) processes left"
end

begin "a launcher killed with SIGKILL leaves no rank on any host"
"$RUN" --hostfile "$HF" --n-per-node 2 --rsh "ip netns exec" sh -c \
    'echo "$TNT_JOB_KEY" >$0.key.$TNT_RANK; sleep 60' "$TMP/$MARK" \
    >"$OUT" 2>"$ERR" &
BG+=($!)
sleep 2
[ "$(leftovers)" -ge 8 ] || fail "only $(leftovers) rank processes ran"
key=$(cat "$TMP/$MARK.key.0" 2>/dev/null)
[ -n "$key" ] || fail "no job key seen by rank 0"
if [ -n "$key" ] && grep -qF "$key" /proc/[0-9]*/cmdline 2>/dev/null; then
    fail "the job key is on a command line"
fi
kill -KILL "${BG[-1]}"
wait "${BG[-1]}" 2>/dev/null
wait_gone 5 || fail "$(leftovers) processes left after 5 s"
end

begin "a missing program is named with its host"
run no-such-program-$$
expect_rc 127
grep -q "cannot execute 'no-such-program-$$' on host ${H}[0-3]: No such file" "$ERR" ||
    fail "stderr: $(cat "$ERR")"
end

begin "an unreachable host is named with what the agent said"
printf '%s\n%s\n' "${H}0" "${PREFIX}nosuch" >"$TMP/hf2"
timeout -k 5 30 "$RUN" --hostfile "$TMP/hf2" --rsh "ip netns exec" \
    sleep 30 >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" != 0 ] || fail "exit status 0"
grep -q "cannot start ranks on host ${PREFIX}nosuch: 'ip' exited with status 255: .*${PREFIX}nosuch" "$ERR" ||
    fail "stderr: $(cat "$ERR")"
wait_gone 3 || fail "$(leftovers) processes left"
end

begin "--cleanup over the hostfile stops a leftover rank"
cp "$(command -v sleep)" "$TMP/$MARK-left"
ip netns exec "${H}1" env TNT_JOB_KEY=k TNT_RANK=3 "$TMP/$MARK-left" 60 &
BG+=($!)
sleep 0.3
timeout 60 "$RUN" --cleanup --hostfile "$HF" --rsh "ip netns exec" \
    "$MARK-left" >"$OUT" 2>"$ERR"
rc=$?
expect_rc 0
grep -q "found 1 rank(s) of '$MARK-left': pid [0-9]* (rank 3)" "$OUT" ||
    fail "output: $(cat "$OUT" "$ERR")"
wait_gone 2 || fail "leftover still running"
end

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
