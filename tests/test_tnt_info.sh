#!/bin/bash
# Tests of tnt-info (docs/tnt-info.md):
#   - every form's --json parses;
#   - --params lists exactly the table's variables (lib/util/param_table.h),
#     every TNT_* name in a string literal of lib/ that is no C name of the
#     headers (scripts/check-env.sh's rule) is among them, and every entry
#     is read somewhere in lib/ (by id, by name, or as an engine knob);
#   - the values shown are the library's: sizes in bytes, a malformed
#     value marked with the library's own message (the one tnt_comm_init
#     returns, from a real init), lenient ones falling back;
#   - TNT_SOCKET_IFNAME=lo picks lo;
#   - --algorithms -n 4 --size S names the algorithms a real 4-rank job
#     under tnt-run runs (info_algo_probe reads them from the requests),
#     over shared memory and over TCP, and with --mapped on buffers from
#     tnt_mem_alloc.
# Usage: test_tnt_info.sh TNT-INFO TNT-RUN PROBE SOURCE-ROOT. Ends with
# "N passed, M failed"; exits non-zero if a check failed.
set -u
INFO=${1:?usage: test_tnt_info.sh TNT-INFO TNT-RUN PROBE SOURCE-ROOT}
RUN=${2:?}
PROBE=${3:?}
SRC=${4:?}
for v in $(env | sed -n 's/^\(TNT_[A-Z0-9_]*\)=.*/\1/p'); do
    unset "$v" # the test sets what it checks; meson's TNT_LOG_LEVEL too
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_tnt_info.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
check() { # NAME CONDITION-STATUS [DETAIL]
    if [ "$2" = 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $1${3:+: $3}"
    fi
}
# json FILE EXPR: print a Python expression over the parsed document d.
json() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$1" "$2"
}

# 1. Every form's JSON parses.
for args in "" "-a" "-p" "--algorithms" "--algorithms -n 3 --size 1M"; do
    # shellcheck disable=SC2086
    "$INFO" --json $args >"$TMP/out.json" 2>"$TMP/err"
    check "tnt-info --json $args exits 0" $? "$(cat "$TMP/err")"
    python3 -m json.tool "$TMP/out.json" >/dev/null 2>&1
    check "tnt-info --json $args is JSON" $?
done
"$INFO" -a >/dev/null 2>&1
check "tnt-info -a (text) exits 0" $?
"$INFO" --json >"$TMP/all.json"
[ "$("$INFO" --version)" = "tnt-info (libtntcomm) $(json "$TMP/all.json" "d['version']")" ]
check "version shown" $?
json "$TMP/all.json" "d['rdma']['note'] if d['rdma']['devices_found'] == 0 else 'device'" \
    >"$TMP/rdma"
grep -qE '^(no RDMA device|built without libibverbs.*|device)$' "$TMP/rdma"
check "RDMA devices or a clean 'no RDMA device'" $? "$(cat "$TMP/rdma")"

# 2. --params: the table's variables, nothing else.
table=$(sed -n 's/^[[:space:]]*X([A-Z0-9_]*, *"\(TNT_[A-Z0-9_]*\)".*/\1/p' \
        "$SRC/lib/util/param_table.h" | sort)
"$INFO" --json -p >"$TMP/p.json"
shown=$(json "$TMP/p.json" "'\n'.join(d['params'])" | sort)
[ -n "$table" ] && [ "$shown" = "$table" ]
check "--params lists exactly the table's variables" $? \
      "$(diff <(echo "$table") <(echo "$shown") | tr '\n' ' ')"
c_names=$(find "$SRC/include/tnt" "$SRC/lib" -name '*.h' -exec cat {} + |
          sed -n -e 's/^[[:space:]]*#[[:space:]]*define[[:space:]]\{1,\}\(TNT_[A-Z0-9_]*\).*/\1/p' \
                 -e 's/^[[:space:]]*\(TNT_[A-Z0-9_]*\)[[:space:]]*[=,].*/\1/p' | sort -u)
in_lib=$(find "$SRC/lib" -name '*.[ch]' -exec grep -hvE '^[[:space:]]*(/\*|\*|//)' {} + |
         grep -oE '"([^"\\]|\\.)*"' | grep -oE 'TNT_[A-Z0-9_]+' | sort -u)
missing=$(comm -23 <(comm -23 <(echo "$in_lib") <(echo "$c_names")) <(echo "$shown"))
[ -z "$missing" ]
check "every TNT_* variable named in lib/ is listed" $? "$missing"
unread=""
while read -r id; do
    # by id, by name (tnt__env_named), or as an engine knob (param.h)
    grep -rqw -e "TNT_VAR_$id" -e "\"TNT_$id\"" --include='*.c' \
        --exclude=param_table.c "$SRC/lib" ||
        grep -qE "^[[:space:]]*X\([a-z_]+, $id," "$SRC/lib/util/param.h" ||
        unread="$unread $id"
done < <(sed -n 's/^[[:space:]]*X(\([A-Z0-9_]*\), *"TNT_.*/\1/p' \
         "$SRC/lib/util/param_table.h")
[ -z "$unread" ]
check "every listed variable is read in lib/" $? "$unread"

# 3. Values as the library uses them.
TNT_TIMEOUT=7 TNT_EAGER_BYTES=128k TNT_SOCKET_IFNAME=lo TNT_LOG_LEVEL=debug \
    TNT_SIMD=sse2 "$INFO" --json -a >"$TMP/v.json" 2>/dev/null
expect() { # EXPR WANT
    local got
    got=$(json "$TMP/v.json" "$1")
    [ "$got" = "$2" ]
    check "$1 = $2" $? "got '$got'"
}
expect "d['params']['TNT_TIMEOUT']['used']" 7
expect "d['params']['TNT_TIMEOUT']['status']" set
expect "d['params']['TNT_EAGER_BYTES']['value']" 128k
expect "d['params']['TNT_EAGER_BYTES']['used']" 131072
expect "d['params']['TNT_SEGMENT_BYTES']['used']" 262144
expect "d['params']['TNT_SEGMENT_BYTES']['status']" default
expect "d['params']['TNT_HOST_ID']['status']" unset
expect "d['params']['TNT_SOCKET_IFNAME']['used']" lo
expect "d['params']['TNT_LOG_LEVEL']['used']" DEBUG
expect "d['params']['TNT_SIMD']['used']" sse2
expect "d['simd']['chosen']" sse2
expect "d['host']['socket_ifname']['interface']" lo
expect "d['host']['socket_ifname']['address']" 127.0.0.1
expect "d['engine']['valid']" True

# A malformed strict value: marked, with the message tnt_comm_init gives.
TNT_TIMEOUT=abc "$INFO" --json -p >"$TMP/v.json"
expect "d['params']['TNT_TIMEOUT']['status']" malformed
expect "d['params']['TNT_TIMEOUT']['used']" None
expect "d['engine']['valid']" False
lib_err=$(TNT_TIMEOUT=abc "$PROBE" 4096 2>&1 >/dev/null)
shown_err=$(json "$TMP/v.json" "d['params']['TNT_TIMEOUT']['error']")
case $lib_err in
    *"$shown_err"*) [ -n "$shown_err" ] ;;
    *) false ;;
esac
check "the shown error is the library's" $? "shown '$shown_err', init '$lib_err'"
expect "d['engine']['error']" "$shown_err"
TNT_SOCKETS_PER_PEER=99 "$INFO" --json -p >"$TMP/v.json"
expect "d['params']['TNT_SOCKETS_PER_PEER']['status']" malformed
# Lenient ones fall back, as their readers do.
TNT_LOG_LEVEL=loud "$INFO" --json -p >"$TMP/v.json"
expect "d['params']['TNT_LOG_LEVEL']['status']" "malformed, ignored"
expect "d['params']['TNT_LOG_LEVEL']['used']" WARNING
TNT_SOCKET_IFNAME=nosuchif0 "$INFO" --json >"$TMP/v.json"
expect "d['host']['socket_ifname']['interface']" None

# 4. The algorithms a real 4-rank job runs.
for transport in auto tcp; do
    for size in 32k 1M; do
        TNT_TRANSPORT=$transport "$INFO" --json --algorithms -n 4 \
            --size "$size" >"$TMP/v.json"
        bytes=$(json "$TMP/v.json" "d['algorithms']['case']['bytes']")
        TNT_TRANSPORT=$transport timeout 60 "$RUN" -n 4 "$PROBE" "$bytes" \
            >"$TMP/real" 2>&1
        check "probe job ($transport, $size) runs" $? "$(cat "$TMP/real")"
        for kind in allreduce broadcast; do
            real=$(sed -n "s/^\(\[0\] \)\{0,1\}$kind //p" "$TMP/real")
            expect "d['algorithms']['case']['$kind']['algorithm']" "$real"
        done
    done
done
# Broadcast by messages: the binomial/chain threshold grows with p
# (select.c: ceil(1.5 (p-2)/(ceil(log2 p)-1)) segments of 256 KiB, so
# 19 at 64 ranks, 3 at 4).
for n in 4 64; do
    for size in 1M 8M; do
        TNT_TRANSPORT=tcp "$INFO" --json --algorithms -n "$n" \
            --size "$size" >"$TMP/v.json"
        case $n in 4) max=786432 ;; *) max=4980736 ;; esac
        expect "d['algorithms']['case']['bcast_binomial_max_bytes']" "$max"
        want=pipeline
        [ "$n" = 64 ] && [ "$size" = 1M ] && want=binomial
        expect "d['algorithms']['case']['broadcast']['algorithm']" "$want"
    done
done
# Allreduce by messages from 17 ranks: rd's bound shrinks with p (21.3 KiB
# at 64 ranks, so 32 KiB is Rabenseifner's) and the double binary tree
# runs above 2 MiB (select.c); at 4 ranks 32 KiB stays rd's, Rabenseifner
# runs up to 8 MiB (a power of two up to 16 ranks) and the ring above; at
# 3 ranks the ring from above 2 MiB.
for case in "64 32k rabenseifner" "64 8M tree" "4 32k rd" "4 8M rabenseifner" \
    "4 16M ring" "3 4M ring"; do
    set -- $case
    TNT_TRANSPORT=tcp "$INFO" --json --algorithms -n "$1" --size "$2" \
        >"$TMP/v.json"
    expect "d['algorithms']['case']['allreduce']['algorithm']" "$3"
done
# Buffers from tnt_mem_alloc on one host: the mapped allreduce.
"$INFO" --json --algorithms -n 4 --size 64k --mapped >"$TMP/v.json"
timeout 60 "$RUN" -n 4 "$PROBE" 65536 mapped >"$TMP/real" 2>&1
check "probe job (mapped) runs" $? "$(cat "$TMP/real")"
real=$(sed -n "s/^\(\[0\] \)\{0,1\}allreduce //p" "$TMP/real")
expect "d['algorithms']['case']['allreduce']['algorithm']" "$real"
expect "d['algorithms']['case']['allreduce']['algorithm']" mapped

# 5. Bad command lines.
"$INFO" --bogus >/dev/null 2>&1
[ $? = 2 ]
check "an unknown argument exits 2" $?
"$INFO" --algorithms -n 4 >/dev/null 2>&1
[ $? = 2 ]
check "-n without --size exits 2" $?

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
