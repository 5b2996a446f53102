#!/usr/bin/env bash
# The layering rule (docs/design.md, "Layers"): a file of lib/ may use
# headers and functions of its own layer and of the layers below it,
# never above, never beside.
#
#   3  fusion/                       bucket plan and scheduler
#   2  core/ (core/onhost/)          communicator, engine, progress, API
#   1  boot/  collectives/  transport/   side by side, none uses another
#   0  util/                         errors, logging, parameters, clock, ...
#   -  include/tnt/                  the public headers, usable everywhere
#
# Above the transports a transport is reached only through
# include/tnt/transport.h and lib/transport/transport.h (the list of
# transports), never through its own headers or functions
# (lib/transport/tcp/, shm/, verbs/); a transport does not use another's.
#
# bench/ and tools/ are programs on top of the library: they use the
# public headers and, of the internals, only the ones named in
# TOOL_HEADERS (util/, the pure parts of collectives/ that tnt-info,
# tnt-sim and tnt-bench's kernels show, and the bootstrap that boot-storm
# measures), and call only the objects behind them (TOOL_OBJECTS).
#
# What is checked:
#   - includes, quoted or in angle brackets, resolved as the compiler does
#     (the file's folder, then lib/ and include/), so "../core/engine.h"
#     and <fusion/plan.h> are caught where they climb;
#   - with a build directory given, calls: every symbol an object file of
#     lib/, bench/ or tools/ takes from another (nm -u), mapped to the
#     object of lib/ that defines it (nm --defined-only) and so to its
#     layer;
#   - inside lib/core, circles of calls: files that call each other in a
#     loop (a strongly connected set of the call graph between the
#     core's objects). The ones that exist today are listed in
#     KNOWN_CORE_CIRCLES with their reasons; a new circle, or a file
#     that joins one, fails.
#
# KNOWN_* list the exceptions that exist today, each with its reason; a
# new one fails.
# Usage: scripts/check-layers.sh [BUILD_DIR]
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-}

# File, then what it uses: an include (a path below lib/) or, for calls,
# the defining object.
KNOWN_INCLUDES="
lib/util/param.c collectives/algorithms.h
bench/timeline_cost.c core/engine.h
bench/timeline_cost.c core/timeline.h
bench/timeline_cost.c core/timeline_internal.h
"
# util/param.c parses TNT_ALLREDUCE_ALGO with the collectives' names
# (tnt__algo_parse); bench/timeline_cost.c times the timeline's recording
# functions in process, on a communicator it builds itself.
KNOWN_CALLS="
util_param.c.o collectives_select.c.o
timeline_cost.c.o core_timeline.c.o
timeline_cost.c.o core_timeline_write.c.o
"
# The circles of calls inside lib/core, one per line (object names
# without core_ and .c.o). The engine: its executor (engine.c) starts a
# schedule's steps, and their completions (flow control, the wire
# upcalls, the reductions run without the lock, a receive from any
# source) start the next step at once by calling it back; the latency of
# a small collective rides on that call. (The on-host algorithms reach
# the engine through a table of its services, onhost_state.h, and stand
# below it.) The pairs: the staged call of device memory runs the host
# call through the entry and is chosen by it; the whole-buffer staging
# shares devmem.c's pools, which asks it for the bytes a call stages.
KNOWN_CORE_CIRCLES="
engine engine_compute engine_flow engine_vsize engine_wire p2p
devmem devmem_whole
devmem_stage entry
"
# The internal headers bench/ and tools/ may include (below lib/), and
# the objects behind them they may call.
TOOL_HEADERS="util/*.h collectives/algorithms.h collectives/topo.h
collectives/reduce.h collectives/canon.h collectives/model.h
boot/bootstrap.h boot/boot_tree.h boot/boot_wire.h"
TOOL_OBJECTS="util_*.c.o collectives_select.c.o collectives_topo.c.o
collectives_reduce.c.o collectives_reduce_x86.c.o collectives_canon.c.o
collectives_model.c.o boot_bootstrap.c.o boot_boot_tree.c.o
boot_boot_wire.c.o"

bad=0
fail() {
    echo "check-layers: $*"
    bad=1
}

# The unit a path below lib/ belongs to: its top folder, or
# transport/NAME for a transport's own files.
unit_of() {
    case $1 in
        transport/*/*) local t=${1#transport/}; echo "transport/${t%%/*}" ;;
        *) echo "${1%%/*}" ;;
    esac
}
layer_of() {
    case $1 in
        util) echo 0 ;;
        boot|collectives|transport|transport/*) echo 1 ;;
        core) echo 2 ;;
        fusion) echo 3 ;;
        *) echo '?' ;;
    esac
}

# Why `from` (a unit of lib/) may not use `to` (a unit of lib/); nothing
# if it may.
why_not() {
    local from=$1 to=$2 lf lt
    [ "$from" = "$to" ] && return 0
    lf=$(layer_of "$from") lt=$(layer_of "$to")
    if [ "$lt" -gt "$lf" ]; then
        echo "a layer above its own"
    elif [[ $to == transport/* ]] && [[ $from != transport ]]; then
        echo "a transport's internals (use the transport interface)"
    elif [ "$lt" = "$lf" ] && [ "${from%%/*}" != "${to%%/*}" ]; then
        echo "a layer beside its own"
    fi
}

tool_header_ok() {
    local h
    for h in $TOOL_HEADERS; do
        # shellcheck disable=SC2053
        [[ $1 == $h ]] && return 0
    done
    return 1
}
tool_object_ok() {
    local o
    for o in $TOOL_OBJECTS; do
        # shellcheck disable=SC2053
        [[ $1 == $o ]] && return 0
    done
    return 1
}

# Where `inc` (as written, quoted if q=1) in file f lands: a path
# relative to the root, "public", "system", or "missing" for a quoted
# path that climbs to no file.
resolve() {
    local f=$1 inc=$2 q=$3 d p
    case $inc in tnt/*) echo public; return ;; esac
    if [ "$q" = 1 ]; then
        for d in "$(dirname "$f")" lib include; do
            p=$(realpath -m --relative-to="$root" "$d/$inc")
            if [ -e "$p" ]; then
                echo "$p"
                return
            fi
        done
        [[ $inc == *..* ]] && { echo missing; return; }
    fi
    case $inc in
        util/*|boot/*|collectives/*|transport/*|core/*|fusion/*)
            echo "lib/$inc" ;;
        *) echo system ;;
    esac
}

# ---- includes ------------------------------------------------------------
while IFS= read -r f; do
    while IFS=' ' read -r q inc; do
        to=$(resolve "$f" "$inc" "$q")
        case $to in
            public|system) continue ;;
            missing)
                fail "$f includes \"$inc\", which climbs to no file"
                continue ;;
        esac
        case $f in
            lib/*)
                rel=${f#lib/}
                from=$(unit_of "$rel")
                if [[ $to != lib/* ]]; then
                    fail "$f includes $to: outside lib/"
                    continue
                fi
                tl=${to#lib/}
                why=$(why_not "$from" "$(unit_of "$tl")")
                ;;
            bench/*|tools/*)
                case $to in
                    bench/*|tools/*) why= ;;
                    lib/*)
                        tl=${to#lib/}
                        why=
                        tool_header_ok "$tl" ||
                            why="an internal header bench/ and tools/ may not use (TOOL_HEADERS)"
                        ;;
                    *) why="a file outside lib/, bench/ and tools/" ;;
                esac
                ;;
        esac
        if [ -n "$why" ] && ! grep -qxF "$f $tl" <<<"$KNOWN_INCLUDES"; then
            fail "$f includes \"$inc\" ($to): $why"
        fi
    done < <(sed -n -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/1 \1/p' \
                    -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/0 \1/p' "$f")
done < <(find lib bench tools -name '*.[ch]' | sort)

# ---- calls ---------------------------------------------------------------
# The unit of lib/ an object of libtnt_internal belongs to, from its name
# (meson names it after the source path: core_onhost_queue.c.o).
unit_of_object() {
    case $1 in
        transport_tcp_*) echo transport/tcp ;;
        transport_shm_*) echo transport/shm ;;
        transport_verbs_*) echo transport/verbs ;;
        # Generated: the GPU kernel's PTX as a string (lib/meson.build),
        # core's like the kernel's source.
        meson-generated_*devmem_kernel_ptx*) echo core ;;
        *) echo "${1%%_*}" ;;
    esac
}

if [ -n "$build" ]; then
    objdir="$build/lib/libtnt_internal.a.p"
    [ -d "$objdir" ] || { echo "check-layers: no $objdir (build first)"; exit 2; }
    # symbol -> defining object, for every global symbol of lib/.
    defs=$(for o in "$objdir"/*.o; do
               nm --defined-only -g "$o" |
                   awk -v o="$(basename "$o")" 'NF == 3 { print $3, o }'
           done | sort -u)
    uses() { # object -> "symbol defining-object" for what it takes
        nm -u "$1" | awk '{ print $NF }' | sort -u |
            join - <(echo "$defs") || true
    }
    for o in "$objdir"/*.o; do
        name=$(basename "$o")
        from=$(unit_of_object "$name")
        [ "$(layer_of "$from")" = '?' ] && continue
        while read -r sym def; do
            [ "$def" = "$name" ] && continue
            why=$(why_not "$from" "$(unit_of_object "$def")")
            if [ -n "$why" ] && ! grep -qxF "$name $def" <<<"$KNOWN_CALLS"; then
                fail "$name calls $sym of $def: $why"
            fi
        done < <(uses "$o")
    done
    # Circles inside lib/core: the strongly connected sets of the calls
    # between its objects (Tarjan's algorithm), each compared with the
    # known ones.
    circles=$(for o in "$objdir"/core_*.o; do
                  name=$(basename "$o")
                  while read -r sym def; do
                      [ "$def" = "$name" ] || [[ $def != core_* ]] ||
                          echo "$name $def"
                  done < <(uses "$o")
              done | python3 -c '
import sys
edges = {}
for line in sys.stdin:
    a, b = line.split()
    edges.setdefault(a, set()).add(b)
    edges.setdefault(b, set())
index, low, stack, on, out = {}, {}, [], set(), []
def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in sorted(edges[v]):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        scc = []
        while True:
            w = stack.pop()
            on.discard(w)
            scc.append(w[len("core_"):-len(".c.o")])
            if w == v:
                break
        if len(scc) > 1:
            out.append(" ".join(sorted(scc)))
sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in index:
        visit(v)
print("\n".join(sorted(out)))
')
    while read -r circle; do
        [ -n "$circle" ] || continue
        if ! grep -qxF "$circle" <<<"$KNOWN_CORE_CIRCLES"; then
            fail "lib/core: these files call each other in a circle: $circle (a circle not in KNOWN_CORE_CIRCLES: make one of the calls run one way, e.g. through a hook or a function passed down)"
        fi
    done <<<"$circles"
    for o in "$build"/bench/*.p/*.o "$build"/tools/*.p/*.o; do
        [ -e "$o" ] || continue
        name=$(basename "$o")
        while read -r sym def; do
            # The public API (tnt_*) is theirs; internals are tnt__*.
            [[ $sym == tnt__* ]] || continue
            if ! tool_object_ok "$def" &&
               ! grep -qxF "$name $def" <<<"$KNOWN_CALLS"; then
                fail "${o#"$build"/} calls $sym of $def: an internal function bench/ and tools/ may not use (TOOL_OBJECTS)"
            fi
        done < <(uses "$o")
    done
fi
if [ $bad = 0 ]; then
    echo "check-layers: ok"
fi
exit $bad
