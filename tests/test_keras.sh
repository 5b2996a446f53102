#!/bin/bash
# Tests of tntcomm.keras / tarantella (plugins/keras, docs/keras.md) with
# tests/python/check_keras.py:
#   proof     p = 1, 2, 4 with the same global batches: LeNet-5 on the
#             digits (batch 32) and an MLP with an L2 regularizer (batch 30:
#             uneven micro-batches at p = 4); every rank of a run holds
#             bitwise the same weights and gets the same evaluate result
#             (checked in the run); across p the weights and results agree
#             to a relative RTOL (compare_keras.py); a rerun at p = 2 gives
#             bitwise the same weights and results.
#   features  p = 2 and 3: the default seed, callbacks, save/load,
#             training resumed from a ModelCheckpoint against the
#             uninterrupted run, dataset options, errors, eager mode
#             (run_eagerly=True) against tf.function.
#   command   the `tarantella` command runs the Quick Start example, with
#             a timeline: buckets start before a step's last gradient.
#   progbar   in the same run, every rank's output shown
#             (--output-on-all-ranks): the progress bar on the master only.
#
# Why RTOL = 1e-5 and not equality: a rank count sums the same gradients in
# another order (per rank, then over the ranks; TensorFlow's kernels block
# by the micro-batch's size), so the weights differ by float32 rounding,
# about 1e-7 relative per step, growing slowly (measured: see the last line).
#
# Usage: test_keras.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR. Exits 77
# (skipped) when PYTHON lacks tensorflow, keras or scikit-learn, or the op
# library was not built.
set -u
usage="usage: test_keras.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR"
PY=${1:?$usage}
RUN=${2:?$usage}
BUILD=${3:?$usage}
SRC=${4:?$usage}
. "$(dirname "$0")/lib_frontend.sh" # its skip rule; the cases here count alone
need_keras "$PY" "$BUILD"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_keras.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export PYTHONPATH=$BUILD/plugins/python
export TF_CPP_MIN_LOG_LEVEL=2
CHECK=$SRC/tests/python/check_keras.py
LIMIT=$((300 * ${TNT_TEST_TIMEOUT_MULT:-1}))
RTOL=1e-5
passed=0
failed=0

result() { # name, status, log
    if [ "$2" = 0 ]; then
        echo "ok   [$1] $(grep -v '^\[[0-9]*\] *$' "$3" | tail -n 1)"
        passed=$((passed + 1))
    else
        echo "FAIL [$1] (status $2):"
        grep -v 'I0000\|oneDNN\|cpu_feature_guard\|absl::Init' "$3" | tail -n 30
        failed=$((failed + 1))
    fi
}

ranks() { # n, log, args...
    local n=$1 log=$2
    shift 2
    "$RUN" -n "$n" --timeout "$LIMIT" --interpreter "$PY" "$@" > "$log" 2>&1
}

mkdir -p "$TMP/proof" "$TMP/rerun"
# p = 4 with a 1 KiB fusion threshold: one bucket per tensor of 1 KiB or
# more (more buckets than at the default 32 KiB), reduced during backprop
for n in 1 2 4; do
    threshold=()
    [ "$n" = 4 ] && threshold=(--fusion-threshold 1)
    ranks "$n" "$TMP/proof$n.log" "${threshold[@]}" "$CHECK" --part proof \
        --out "$TMP/proof"
    result "proof p=$n" $? "$TMP/proof$n.log"
done
ranks 2 "$TMP/rerun.log" "$CHECK" --part proof --out "$TMP/rerun"
result "proof rerun p=2" $? "$TMP/rerun.log"
"$PY" "$SRC/tests/python/compare_keras.py" "$TMP/proof" "$RTOL" 1 2 4 \
    > "$TMP/cmp.log" 2>&1
result "p = 1, 2, 4 agree" $? "$TMP/cmp.log"
"$PY" "$SRC/tests/python/compare_keras.py" --bitwise "$TMP/proof" \
    "$TMP/rerun" 2 > "$TMP/bits.log" 2>&1
result "rerun bitwise" $? "$TMP/bits.log"

for n in 2 3; do
    mkdir -p "$TMP/f$n"
    ranks "$n" "$TMP/features$n.log" "$CHECK" --part features --out "$TMP/f$n"
    result "features p=$n" $? "$TMP/features$n.log"
done

# The `tarantella` command: the launcher under Tarantella's name, with
# Tarantella's --fusion-threshold (1 KiB: several buckets) and a timeline,
# in which buckets must start before the step's last gradient is handed
# over (check_keras_overlap.py). The same run shows every rank's output
# (--output-on-all-ranks): the progress bar, and anything else printed,
# must come from the master only.
TARANTELLA=$BUILD/plugins/tarantella
"$TARANTELLA" -n 2 --timeout "$LIMIT" --fusion-threshold 1 \
    --output-on-all-ranks --timeline "$TMP/tl" -- \
    "$SRC/examples/keras_lenet5.py" --epochs 1 --train-samples 256 \
    --global-batch 64 --check-ranks > "$TMP/command.log" 2>&1
st=$?
grep -q 'ranks 2 evaluate' "$TMP/command.log" || st=1
result "tarantella command" $st "$TMP/command.log"
if ! grep -q '^\[0\] .*step' "$TMP/command.log"; then
    { cat "$TMP/command.log"; echo "no progress bar on rank 0"; } > "$TMP/progbar.log"; st=1
elif grep -q '^\[1\] .*step' "$TMP/command.log"; then
    { cat "$TMP/command.log"; echo "a progress bar on rank 1"; } > "$TMP/progbar.log"; st=1
else
    echo "progress bar on rank 0 only" > "$TMP/progbar.log"; st=0
fi
result "progbar" $st "$TMP/progbar.log"
"$PY" "$SRC/tests/python/check_keras_overlap.py" "$TMP/tl.json" \
    > "$TMP/overlap.log" 2>&1
result "overlap" $? "$TMP/overlap.log"

echo "test_keras.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
