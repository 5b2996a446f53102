#!/bin/bash
# Tests of bench/tcp-zerocopy-probe: over loopback every MSG_ZEROCOPY send
# must complete, and the kernel must report each completion as copied
# (delivery to a local socket copies the pages: that is the finding the
# probe exists to show, and a kernel that changed it would be news worth a
# failing test); the sink and sender modes must work as a pair; bad
# command lines exit 2.
# Usage: test_zerocopy_probe.sh PATH-TO-TCP-ZEROCOPY-PROBE
set -u
PROBE=${1:?usage: test_zerocopy_probe.sh TCP-ZEROCOPY-PROBE}
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# check LINE: sends > 0, all completed, all copied.
check() {
    local line=$1 s c x z
    s=$(sed -n 's/.* sends=\([0-9]*\) .*/\1/p' <<< "$line")
    c=$(sed -n 's/.* completed=\([0-9]*\) .*/\1/p' <<< "$line")
    x=$(sed -n 's/.* copied=\([0-9]*\) .*/\1/p' <<< "$line")
    z=$(sed -n 's/.* zero_copy=\([0-9]*\)$/\1/p' <<< "$line")
    [ -n "$s" ] && [ "$s" -gt 0 ] || { fail "no sends: '$line'"; return; }
    [ "$c" = "$s" ] || fail "completed $c of $s sends: '$line'"
    [ "$x" = "$c" ] && [ "$z" = 0 ] ||
        fail "loopback reported zero-copy completions: '$line'"
}

out=$(timeout 60 "$PROBE" --size 257k --count 13 2>&1)
rc=$?
# A kernel without SO_ZEROCOPY (before 4.14) has nothing to probe.
if grep -q 'SO_ZEROCOPY' <<< "$out"; then
    echo "SKIP: $out"
    exit 77
fi
[ "$rc" = 0 ] || fail "loopback run: exit status $rc: $out"
check "$(grep '^zerocopy ' <<< "$out")"

# The two halves apart, as between namespaces or hosts.
port=$(( 30000 + RANDOM % 20000 ))
timeout 60 "$PROBE" --sink "$port" 2> /dev/null &
sink=$!
for _ in $(seq 50); do
    ss -ltn 2> /dev/null | grep -q ":$port " && break
    sleep 0.1
done
out=$(timeout 60 "$PROBE" --to "127.0.0.1:$port" --size 1M --count 5 2>&1)
rc=$?
[ "$rc" = 0 ] || fail "--to: exit status $rc: $out"
check "$(grep '^zerocopy ' <<< "$out")"
wait "$sink" || fail "--sink: exit status $?"

for args in "--size 0" "--count 0" "--to 127.0.0.1" "--to 127.0.0.1:0" \
            "--sink 70000" "--sink 1 --to 127.0.0.1:2" "--bogus"; do
    # shellcheck disable=SC2086
    timeout 10 "$PROBE" $args > /dev/null 2>&1
    rc=$?
    [ "$rc" = 2 ] || fail "'$args': exit status $rc, want 2"
done

[ "$failed" = 0 ] && echo "tcp-zerocopy-probe: all checks passed"
[ "$failed" = 0 ]
