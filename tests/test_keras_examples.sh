#!/bin/bash
# Tarantella's two tutorials on tntcomm.keras at small sizes, p = 1, 2, 4
# (ResNet-50 at 1 and 4; docs/keras.md): ResNet-50 from keras.applications on 32x32 synthetic
# images (examples/keras_resnet50.py) and a Transformer on a toy
# translation (examples/keras_transformer.py). (The Quick Start's model and
# data, examples/keras_lenet5.py, are the proof of test_keras.sh at
# p = 1, 2, 4, which also runs the script itself.) Every run checks that
# all its ranks hold bitwise the same weights (--check-ranks). The
# Transformer's final loss must agree with p = 1 to a relative RTOL (float
# rounding of sums in other orders, see test_keras.sh); ResNet-50's cannot:
# BatchNormalization normalises over each rank's micro-batch, so its loss
# depends on p by design.
#
# Usage: test_keras_examples.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR.
# Exits 77 (skipped) like test_keras.sh.
set -u
usage="usage: test_keras_examples.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR"
PY=${1:?$usage}
RUN=${2:?$usage}
BUILD=${3:?$usage}
SRC=${4:?$usage}
. "$(dirname "$0")/lib_frontend.sh" # its skip rule; the cases here count alone
need_keras "$PY" "$BUILD"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_keras_ex.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export PYTHONPATH=$BUILD/plugins/python
export TF_CPP_MIN_LOG_LEVEL=2
LIMIT=$((300 * ${TNT_TEST_TIMEOUT_MULT:-1}))
RTOL=1e-4
passed=0
failed=0

run() { # name, n, log, script, args...
    local name=$1 n=$2 log=$3 script=$4
    shift 4
    "$RUN" -n "$n" --timeout "$LIMIT" --interpreter "$PY" \
        "$SRC/examples/$script" --check-ranks "$@" > "$log" 2>&1
    local st=$?
    if [ $st = 0 ]; then
        echo "ok   [$name p=$n] $(grep -E 'final loss|evaluate loss' "$log" | tail -n 1)"
        passed=$((passed + 1))
    else
        echo "FAIL [$name p=$n] (status $st):"
        grep -v 'I0000\|oneDNN\|cpu_feature_guard\|absl::Init' "$log" | tail -n 30
        failed=$((failed + 1))
    fi
}

# the number after "loss" in a log's result line
loss_of() { grep -E 'final loss|evaluate loss' "$1" | tail -n 1 |
            sed -E 's/.*loss ([-0-9.e+]+).*/\1/'; }

agree() { # name, logs...
    local name=$1 ref
    shift
    ref=$(loss_of "$1")
    for log in "$@"; do
        if ! "$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > $RTOL * abs(a))" \
                "$ref" "$(loss_of "$log")"; then
            echo "FAIL [$name] loss $(loss_of "$log") of $log against $ref (rtol $RTOL)"
            failed=$((failed + 1))
            return
        fi
    done
    echo "ok   [$name] losses at p = 1, 2, 4 agree within $RTOL: $(for l in "$@"; do loss_of "$l"; done | tr '\n' ' ')"
    passed=$((passed + 1))
}

# ResNet-50 at p = 1 and 4 only: its loss is compared with nothing (see
# above), so p = 2 would prove again what p = 4 does, for 27 s of CI.
for n in 1 2 4; do
    [ "$n" = 2 ] || run resnet50 "$n" "$TMP/resnet$n.log" keras_resnet50.py \
        --steps 1 --epochs 1 --global-batch 8
    run transformer "$n" "$TMP/tf$n.log" keras_transformer.py --steps 2 \
        --epochs 1 --global-batch 16 --layers 1
done
agree "transformer" "$TMP/tf1.log" "$TMP/tf2.log" "$TMP/tf4.log"
echo "test_keras_examples.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
