#!/bin/bash
# Open MPI's mpirun starting 4 ranks of tnt-bench (allreduce, results
# checked): once as mpirun offers it (through PMIx when the library was
# built with it), once with TNT_BOOTSTRAP=ompi, i.e. from the
# OMPI_COMM_WORLD_* variables and the derived TCP root address.
# Usage: test_mpirun.sh TNT-BENCH pmix|nopmix
set -u
. "$(dirname "$0")/lib.sh"
BENCH=${1:?usage: test_mpirun.sh TNT-BENCH pmix|nopmix}
PMIX=${2:?usage: test_mpirun.sh TNT-BENCH pmix|nopmix}

command -v mpirun >/dev/null || skip "mpirun not found (install openmpi-bin)"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_mpirun.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

run() { # LABEL EXPECTED-LAUNCHER [VAR=VALUE...]
    local label=$1 want=$2
    shift 2
    echo "== mpirun -np 4 ($label)"
    local t0=$SECONDS
    env "$@" TNT_LOG_LEVEL=INFO timeout -k 5 100 mpirun --allow-run-as-root \
        --oversubscribe -np 4 -x TNT_LOG_LEVEL -x TNT_BOOTSTRAP \
        "$BENCH" "${BENCH_ARGS[@]}" >"$TMP/out" 2>&1
    local rc=$?
    cat "$TMP/out"
    [ $rc -eq 0 ] || fail "mpirun ($label) exited with $rc"
    check_bench "$TMP/out" "$want" 4
    echo "($label took $((SECONDS - t0)) s)"
}

if [ "$PMIX" = pmix ]; then
    run "PMIx" pmix TNT_BOOTSTRAP=auto
else
    run "no PMIx in this build" ompi TNT_BOOTSTRAP=auto
fi
run "PMIx disabled: TNT_BOOTSTRAP=ompi" ompi TNT_BOOTSTRAP=ompi
