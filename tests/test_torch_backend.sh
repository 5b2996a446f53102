#!/bin/bash
# Tests of the torch.distributed backend "tnt" (plugins/torch/c10d):
# every dtype and reduce op exact against a reference, bad input (wrong
# dtype, sparse tensor, unsupported op, bad root, shapes that differ
# across ranks, a rank that dies, groups destroyed and made again, a
# group timeout shorter than the library's ending a blocking and an
# async call),
# a group destroyed while a receive whose tensor Python let go of is still
# pending (it deadlocked on the GIL before), subgroups, and
# DistributedDataParallel training of a small CNN with
# batch norm on the digits data that gives on every rank bitwise the same
# parameters, equal to DDP over gloo to 1e-5 (tests/python/ddp_digits.py);
# and what users build on torch 2.x's process groups, against gloo in the
# same run (tests/python/check_torch2.py): "cpu:tnt,cuda:gloo" strings,
# subgroups destroyed and the world used again, DeviceMesh 1-D and 2-D,
# DTensor, FSDP2 training, functional collectives, object collectives,
# the coalescing manager and coalesced ops, PREMUL_SUM, a DDP comm hook
# that chains futures.
#
# init_process_group("tnt") with no arguments works under tnt-run and
# torchrun.
#
# Usage: test_torch_backend.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR. Exits
# 77 (skipped) when the backend was not built or PYTHON lacks torch.
set -u
usage="usage: test_torch_backend.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR"
PY=${1:?$usage}
RUN=${2:?$usage}
BUILD=${3:?$usage}
SRC=${4:?$usage}
export PYTHONPATH=$BUILD/plugins/python
if ! "$PY" -c "from tntcomm import _c10d" 2>/dev/null; then
    echo "test_torch_backend.sh: SKIP: the backend is not built" \
         "($("$PY" -c "from tntcomm import _c10d" 2>&1 | tail -n 1))"
    exit 77
fi
. "$(dirname "$0")/lib_frontend.sh"
digits_data "$PY"
CHECK=$SRC/tests/python/check_torch_backend.py
LIMIT=$((240 * ${TNT_TEST_TIMEOUT_MULT:-1}))
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_torch_backend.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

one() { # name, command...
    local name=$1
    shift
    timeout -k 5 "$LIMIT" "$@" >"$TMP/log" 2>&1
    local rc=$?
    if [ "$rc" = 0 ]; then
        echo "ok   [$name] $(grep -v '^$' "$TMP/log" | tail -n 1)"
        passed=$((passed + 1))
    else
        echo "FAIL [$name] (exit $rc): $(tail -c 2000 "$TMP/log")" >&2
        failed=$((failed + 1))
    fi
}

for n in 1 2 3 5; do
    one "dtypes and ops, $n rank(s)" "$PY" "$CHECK" dtypes "$n"
done
for n in 2 3 5; do
    one "collectives, $n ranks" "$PY" "$CHECK" collectives "$n"
done
one "bad input, 3 ranks" "$PY" "$CHECK" bad_input 3
one "shapes differ across ranks, 3 ranks" "$PY" "$CHECK" mismatch 3
one "a rank dies, 3 ranks" "$PY" "$CHECK" dead_rank 3
one "destroy and make again, 2 ranks" "$PY" "$CHECK" reinit 2
one "group timeout ends a blocking all_reduce, 2 ranks" \
    "$PY" "$CHECK" timeout 2
one "group timeout ends an async all_reduce's wait, 2 ranks" \
    "$PY" "$CHECK" timeout_async 2
one "destroyed with a receive pending, 2 ranks" \
    "$PY" "$CHECK" destroy_pending 2
one "subgroups, 3 ranks" "$PY" "$CHECK" subgroups 3
one "torch 2.x layers (DeviceMesh, DTensor, FSDP2, funcol, objects, coalesced, PREMUL_SUM, comm hook) equal gloo's, 4 ranks" \
    "$PY" "$SRC/tests/python/check_torch2.py" 4
LAUNCH=$SRC/tests/python/launch_torch_backend.py
one "init_process_group(\"tnt\") under tnt-run, 3 ranks" \
    "$RUN" -n 3 "$PY" "$LAUNCH"
# Debian 12's torchrun crashes with its default --redirects 0 on Python
# 3.11 (tests/launchers/test_torchrun.sh); --redirects 1 --tee 1 works.
# The store's port: free now, as torchrun's default 29500 may not be.
port=$("$PY" -c "import socket; s = socket.socket(); \
s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
one "init_process_group(\"tnt\") under torchrun, 2 ranks" \
    "$PY" -m torch.distributed.run --redirects 1 --tee 1 \
    --nproc_per_node 2 --master_port "$port" "$LAUNCH"
if [ -r "$DATA" ] && "$PY" -c "import numpy" 2>/dev/null; then
    one "DDP on the digits: tnt equals gloo, 2 and 4 ranks" \
        "$PY" "$SRC/tests/python/ddp_digits.py" --data "$DATA" --ranks 2 4
else
    echo "skip [DDP on the digits]: $DATA or numpy missing"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
