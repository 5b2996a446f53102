#!/usr/bin/env bash
# scripts/check-layers.sh catches each kind of violation: in a scratch
# copy of the sources and of the build's object files it plants one of
# each (an include that climbs with "../", one in angle brackets, an
# internal header in bench/ and in tools/, a call up a layer, a call into
# a transport's internals from the core, a call of a core function from
# tools/, a call that closes a circle inside lib/core) and wants the
# script to fail naming every one; a copy with a single plant fails
# alone; the real tree passes.
# Usage: test_check_layers.sh SRC_DIR BUILD_DIR
set -uo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 failed=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAILED: $*"; failed=$((failed + 1)); }
cc=${CC:-cc}

# A scratch tree: the sources the script reads, and the object files of
# lib/, bench/ and tools/ in the build's layout.
scratch() { # DIR [objects]
    local d=$1
    mkdir -p "$d/build/lib"
    cp -r "$src/lib" "$src/bench" "$src/tools" "$src/include" \
        "$src/scripts" "$d/"
    [ "${2:-}" = objects ] || return 0
    cp -r "$build/lib/libtnt_internal.a.p" "$d/build/lib/"
    local p
    for p in "$build"/bench/*.p "$build"/tools/*.p; do
        mkdir -p "$d/build/${p#"$build"/}"
        cp "$p"/*.o "$d/build/${p#"$build"/}/" 2>/dev/null || true
    done
}
# plant_obj DIR NAME CALLEE: an object NAME in DIR that calls CALLEE.
plant_obj() {
    printf 'void %s(void);\nvoid tnt__planted_%s(void) { %s(); }\n' \
        "$3" "${2%%.*}" "$3" >"$tmp/planted.c"
    "$cc" -c -o "$1/$2" "$tmp/planted.c"
}

out=$(bash "$src/scripts/check-layers.sh" "$build" 2>&1)
if [ $? -eq 0 ] && [ "$out" = "check-layers: ok" ]; then
    ok "the real tree passes"
else
    bad "the real tree: $out"
fi

t="$tmp/all"
scratch "$t" objects
echo '#include "../../core/engine.h"' >>"$t/lib/transport/tcp/tcp.c"
echo '#include <fusion/plan.h>' >>"$t/lib/transport/tcp/tcp_io.c"
echo '#include "core/engine.h"' >>"$t/bench/bench_run.c"
echo '#include "../lib/core/comm.h"' >>"$t/tools/tnt-info.c"
objdir="$t/build/lib/libtnt_internal.a.p"
plant_obj "$objdir" util_planted.c.o tnt__engine_fail
plant_obj "$objdir" core_planted.c.o tnt__shm_poll
plant_obj "$objdir" collectives_planted.c.o tnt__boot_hello_parse
plant_obj "$t/build/tools/tnt-info.p" planted.c.o tnt__comm_check
# The words for a collective (describe.c), which the engine calls, made to
# call the engine back: describe joins the engine's circle.
printf 'void tnt__engine_post(void);\nconst char *tnt__coll_kind_name(int k) { (void)k; tnt__engine_post(); return 0; }\n' \
    >"$tmp/planted_circle.c"
"$cc" -c -o "$objdir/core_describe.c.o" "$tmp/planted_circle.c"
out=$(bash "$t/scripts/check-layers.sh" "$t/build" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 1 ] && ok "planted violations: exit 1" ||
    bad "planted violations: exit $rc, expected 1"
expect() { # what, pattern of the script's line
    if grep -qE "$2" <<<"$out"; then
        ok "caught: $1"
    else
        bad "not caught: $1"
    fi
}
expect 'a relative include that climbs' \
    'lib/transport/tcp/tcp\.c includes "\.\./\.\./core/engine\.h" \(lib/core/engine\.h\): a layer above'
expect 'an angle-bracket include' \
    'lib/transport/tcp/tcp_io\.c includes "fusion/plan\.h" \(lib/fusion/plan\.h\): a layer above'
expect 'a core header in bench/' \
    'bench/bench_run\.c includes "core/engine\.h" .*TOOL_HEADERS'
expect 'a relative core header in tools/' \
    'tools/tnt-info\.c includes "\.\./lib/core/comm\.h" .*TOOL_HEADERS'
expect 'a call up a layer (util -> core)' \
    'util_planted\.c\.o calls tnt__engine_fail of core_engine\.c\.o: a layer above'
expect "a call into a transport's internals (core -> shm)" \
    "core_planted\.c\.o calls tnt__shm_poll of transport_shm_.*: a transport's internals"
expect 'a call beside (collectives -> boot)' \
    'collectives_planted\.c\.o calls tnt__boot_hello_parse of boot_boot_wire\.c\.o: a layer beside'
expect 'a call of the core from tools/' \
    'tools/tnt-info\.p/planted\.c\.o calls tnt__comm_check of core_comm_live\.c\.o: .*TOOL_OBJECTS'
expect 'a circle of calls inside lib/core (describe <-> engine)' \
    'lib/core: these files call each other in a circle: describe engine .*KNOWN_CORE_CIRCLES'
n=$(grep -c '^check-layers: ' <<<"$out")
[ "$n" -eq 9 ] && ok "exactly the 9 planted violations reported" ||
    bad "$n lines reported, expected the 9 planted"

# One plant alone fails too (the exit status is not carried by another).
t="$tmp/one"
scratch "$t"
echo '#include <core/engine.h>' >>"$t/lib/collectives/ring.c"
out=$(bash "$t/scripts/check-layers.sh" 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q 'lib/collectives/ring\.c includes "core/engine\.h"' <<<"$out" &&
    ok "a single angle-bracket include fails alone" ||
    bad "a single plant: exit $rc: $out"

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
