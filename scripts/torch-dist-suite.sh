#!/usr/bin/env bash
# PyTorch's whole distributed test suite (torch/testing/_internal/
# distributed/distributed_test.py, about 270 tests) against the backend
# "tnt" and, as the reference, against "gloo", at WORLD_SIZE 2 and 3, one
# after the other; then tests/torch_dist/summarize.py prints passed /
# skipped / failed with every skip reason and each test that passed for
# gloo and not for tnt. About 6 s per test and backend: over an hour on
# a 2-core machine. CI runs a part of it (tests/test_torch_dist.sh).
#
# Usage: bash scripts/torch-dist-suite.sh [BUILD-DIR [OUT-DIR]]
#        (extra unittest arguments, e.g. -k test_broadcast, in $SUITE_ARGS)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-torch-dist-results}
mkdir -p "$out"
export PYTHONPATH=$PWD/$build/plugins/python
py=/usr/bin/python3
# shellcheck disable=SC2206
extra=(${SUITE_ARGS:-})
for ws in 2 3; do
    for backend in tnt gloo; do
        echo "== $backend, WORLD_SIZE=$ws: $out/$backend$ws.log"
        (cd "$out" && BACKEND=$backend WORLD_SIZE=$ws "$py" \
            "$OLDPWD/tests/torch_dist/run_dist_suite.py" -v "${extra[@]}" \
            >"$backend$ws.log" 2>&1)
    done
    "$py" tests/torch_dist/summarize.py "$out/tnt$ws.log" "$out/gloo$ws.log" |
        tee "$out/summary$ws.txt"
done
