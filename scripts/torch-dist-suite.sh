#!/usr/bin/env bash
# PyTorch's whole distributed test suite (torch/testing/_internal/
# distributed/distributed_test.py, from the installed torch: about 300
# tests on torch 2.13) against the backend "tnt" and, as the reference,
# against "gloo", both at once, at WORLD_SIZE 2 (WORLD_SIZES="2 3" for
# more); then tests/torch_dist/summarize.py prints passed / skipped /
# failed with every skip reason and each test that passed for gloo and
# not for tnt. About 8 s per test and backend: some 45 minutes on a
# 2-core machine. CI runs a part of it (tests/test_torch_dist.sh).
#
# Usage: bash scripts/torch-dist-suite.sh [BUILD-DIR [OUT-DIR]]
#        (extra unittest arguments, e.g. -k test_broadcast, in $SUITE_ARGS;
#        the interpreter: $PYTHON, default .venv/bin/python)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-torch-dist-results}
mkdir -p "$out"
case $build in /*) ;; *) build=$PWD/$build ;; esac
case $out in /*) ;; *) out=$PWD/$out ;; esac
export PYTHONPATH=$build/plugins/python
src=$PWD
py=${PYTHON:-$PWD/.venv/bin/python}
# shellcheck disable=SC2206
extra=(${SUITE_ARGS:-})
for ws in ${WORLD_SIZES:-2}; do
    for backend in tnt gloo; do
        echo "== $backend, WORLD_SIZE=$ws: $out/$backend$ws.log"
        mkdir -p "$out/$backend$ws.d"
        (cd "$out/$backend$ws.d" && BACKEND=$backend WORLD_SIZE=$ws \
            CUDA_VISIBLE_DEVICES= "$py" \
            "$src/tests/torch_dist/run_dist_suite.py" -v "${extra[@]}" \
            >"$out/$backend$ws.log" 2>&1) &
    done
    wait
    "$py" tests/torch_dist/summarize.py "$out/tnt$ws.log" "$out/gloo$ws.log" |
        tee "$out/summary$ws.txt"
done
