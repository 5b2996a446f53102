#!/usr/bin/env bash
# The layering rule of lib/ (docs/design.md, "Layers"): a file may include
# headers of its own layer and of the layers below it, never above.
#
#   3  fusion/                       bucket plan and scheduler
#   2  core/ (core/onhost/)          communicator, engine, progress, API
#   1  boot/  collectives/  transport/   side by side, none includes another
#   0  util/                         errors, logging, parameters, clock, ...
#   -  include/tnt/                  the public headers, usable everywhere
#
# The core reaches a transport only through include/tnt/transport.h and
# lib/transport/transport.h (the list of transports): with a build
# directory given, the core's objects must not reference a symbol of the
# TCP, shared-memory or verbs internals (nm -u).
#
# KNOWN lists the side doors that exist today; each is to be closed by
# moving what it needs into the transport interface. A new one fails.
# Usage: scripts/check-layers.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-}

KNOWN_INCLUDES="
lib/util/param.c collectives/algorithms.h
"
KNOWN_SYMBOLS="
"

layer_of() {
    case $1 in
        util/*) echo 0 ;;
        boot/*|collectives/*|transport/*) echo 1 ;;
        core/*) echo 2 ;;
        fusion/*) echo 3 ;;
        tnt/*) echo - ;;
        *) echo ? ;;
    esac
}

bad=0
while IFS= read -r f; do
    rel=${f#lib/}
    from=$(layer_of "$rel")
    [ "$from" = "?" ] && continue
    top=${rel%%/*}
    while IFS= read -r inc; do
        to=$(layer_of "$inc")
        [ "$to" = - ] && continue
        itop=${inc%%/*}
        ok=1 why="a layer above its own"
        if [ "$to" = "?" ]; then
            ok=1 # a system or same-folder header
        elif [ "$to" -gt "$from" ]; then
            ok=0
        elif [ "$to" = "$from" ] && [ "$itop" != "$top" ]; then
            ok=0 why="a layer beside its own" # boot, collectives, transport
        fi
        # The transports below the core are reached through the one
        # list of transports, never a transport's own headers.
        if [ "$from" = 2 ] && [[ $inc == transport/*/* ]]; then
            ok=0 why="a transport's own header (use the transport interface)"
        fi
        if [ $ok = 0 ] && ! grep -qxF "$f $inc" <<<"$KNOWN_INCLUDES"; then
            echo "check-layers: $f includes \"$inc\": $why"
            bad=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find lib -name '*.[ch]' | sort)

if [ -n "$build" ]; then
    objdir="$build/lib/libtnt_internal.a.p"
    [ -d "$objdir" ] || { echo "check-layers: no $objdir (build first)"; exit 2; }
    for o in "$objdir"/core_*.o "$objdir"/fusion_*.o "$objdir"/collectives_*.o "$objdir"/boot_*.o "$objdir"/util_*.o; do
        [ -e "$o" ] || continue
        name=$(basename "$o")
        while IFS= read -r sym; do
            if ! grep -qxF "$name $sym" <<<"$KNOWN_SYMBOLS"; then
                echo "check-layers: $name references $sym, a transport's internal symbol"
                bad=1
            fi
        done < <(nm -u "$o" | awk '{print $2}' | grep -E '^tnt__(tcp|shm|verbs)_' || true)
    done
fi
if [ $bad = 0 ]; then
    echo "check-layers: ok"
fi
exit $bad
