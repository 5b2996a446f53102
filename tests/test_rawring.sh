#!/bin/bash
# Tests of bench/tcp-rawring (the raw TCP ring beside compare-peers): real
# ranks over loopback at awkward rank counts and sizes (0, 1, primes, not
# divisible by p) must each print one line per size with the bytes a
# bandwidth-optimal allreduce moves, ceil(2(p-1)/p x n), a positive time
# where bytes move, and check=ok (the payload is verified by every rank);
# bad arguments must be refused with exit status 2 and a message.
# Usage: test_rawring.sh PATH-TO-TCP-RAWRING
set -u
RAW=${1:?usage: test_rawring.sh TCP-RAWRING}
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

for p in 1 2 3 5 7 8; do
    out=$(timeout 120 "$RAW" --p "$p" --sizes 0,1,13,4099,1M --min-time 0.01 2>&1)
    rc=$?
    [ "$rc" = 0 ] || { fail "p=$p: exit status $rc: $out"; continue; }
    [ "$(grep -c '^rawring ' <<< "$out")" = 5 ] || fail "p=$p: not 5 lines: $out"
    for n in 0 1 13 4099 1048576; do
        line=$(grep " p=$p bytes=$n " <<< "$out") || { fail "p=$p n=$n: no line"; continue; }
        want=$(( p > 1 ? (2 * (p - 1) * n + p - 1) / p : 0 ))
        grep -q " moved=$want " <<< "$line" || fail "p=$p n=$n: moved, want $want: $line"
        grep -q " check=ok$" <<< "$line" || fail "p=$p n=$n: no check=ok: $line"
        t=$(sed -n 's/.* time_us=\([0-9.]*\) .*/\1/p' <<< "$line")
        if [ "$want" -gt 0 ]; then
            awk -v t="$t" 'BEGIN { exit !(t > 0) }' || fail "p=$p n=$n: time '$t'"
        fi
    done
done
for args in "--p 0" "--p 2 --sizes 1x" "--p 2 --min-time 0" "--rank 3 --addrs 127.0.0.1" \
            "--p 2 --rank 0 --addrs 127.0.0.1,127.0.0.1" "--bogus 1" "--p"; do
    # shellcheck disable=SC2086
    err=$(timeout 20 "$RAW" $args 2>&1 > /dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "'$args': exit status $rc, want 2"
    [ -n "$err" ] || fail "'$args': no message"
done
[ "$failed" = 0 ] && echo "tcp-rawring: all checks passed"
[ "$failed" = 0 ]
