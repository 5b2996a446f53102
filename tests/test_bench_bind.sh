#!/bin/bash
# tnt-bench -N --bind-to: the ranks' CPU affinity, read from /proc while
# they run. core: each rank on one CPU, distinct CPUs while there are
# enough; none: every rank keeps all the CPUs this process may use; auto
# (the default): as core when 2 <= K <= those CPUs, else as none. Also the
# refusals: a bad value, and --bind-to without -N.
# Usage: test_bench_bind.sh PATH-TO-TNT-BENCH
set -u
BENCH=${1:?usage: test_bench_bind.sh TNT-BENCH}
M=$(nproc) # the CPUs this process may use (affinity), as tnt-bench counts
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# affinity K BIND: prints each rank's Cpus_allowed_list, one a line.
affinity() {
    local k=$1 bind=$2 pid kids lists="" i
    "$BENCH" -N "$k" ${bind:+--bind-to "$bind"} allreduce --size 8 \
        -n 100000000 -w 0 -c 0 --inplace-only > /dev/null 2>&1 &
    pid=$!
    for ((i = 0; i < 100; i++)); do
        kids=$(pgrep -P "$pid" | sort -n)
        if [ "$(wc -w <<< "$kids")" = "$k" ]; then
            sleep 0.3 # past fork, into the ranks' own code
            lists=$(for c in $kids; do
                        sed -n 's/^Cpus_allowed_list:\s*//p' "/proc/$c/status"
                    done)
            break
        fi
        sleep 0.05
    done
    kill "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
    echo "$lists"
}

all=$(sed -n 's/^Cpus_allowed_list:\s*//p' /proc/self/status)
single() { [[ $1 =~ ^[0-9]+$ ]]; }

if [ "$M" -ge 2 ]; then
    for bind in core ""; do
        got=$(affinity 2 "$bind")
        [ "$(wc -l <<< "$got")" = 2 ] || { fail "${bind:-auto}: no affinity read: '$got'"; continue; }
        while read -r l; do
            single "$l" || fail "${bind:-auto}, K=2: rank on '$l', want one CPU"
        done <<< "$got"
        [ "$(sort -u <<< "$got" | wc -l)" = 2 ] ||
            fail "${bind:-auto}, K=2: ranks share a CPU: $(echo $got)"
    done
fi
got=$(affinity 2 none)
while read -r l; do
    [ "$l" = "$all" ] || fail "none: rank on '$l', want '$all'"
done <<< "$got"
# More ranks than CPUs: auto leaves them to the scheduler.
got=$(affinity $((M + 1)) "")
[ "$(wc -l <<< "$got")" = $((M + 1)) ] || fail "auto, K=$((M + 1)): affinity not read"
while read -r l; do
    [ "$l" = "$all" ] || fail "auto, K=$((M + 1)): rank on '$l', want '$all'"
done <<< "$got"

"$BENCH" -N 2 --bind-to socket --size 8 > /dev/null 2>&1
[ $? = 2 ] || fail "--bind-to socket accepted"
"$BENCH" --bind-to core --size 8 > /dev/null 2>&1
[ $? = 2 ] || fail "--bind-to without -N accepted"

[ "$failed" = 0 ] && echo "tnt-bench --bind-to: all checks passed"
[ "$failed" = 0 ]
