#!/bin/bash
# The reproducible mode (TNT_REPRODUCIBLE=1, docs/design.md "Reproducible
# reductions") through the frontends: the PyTorch example
# (examples/torch_digits.py: tntcomm.torch's DistributedOptimizer, the
# gradients through the fusion ABI) and the Keras one
# (examples/keras_lenet5.py: tntcomm.keras, the TensorFlow op library),
# a few steps each at p = 3, trained twice in the mode: over TCP with the
# ring allreduce forced (the canonical schedule runs) and over shared
# memory with the defaults (canonical-slots and -staged, no messages).
# The final weights must be bitwise the same. The same two runs out of
# the mode must differ somewhere (the ring at p = 3 adds each chunk in
# another order than the staged allreduce's rank order), or this test
# could not tell. Every run checks that its ranks hold the same weights.
#
# Usage: test_repro_frontends.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR.
# Each half exits 77 (skipped) alone when PYTHON lacks torch or
# tensorflow/keras/sklearn, or the digits data or the op library is
# missing; the test skips when both do.
set -u
usage="usage: test_repro_frontends.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR"
PY=${1:?$usage}
RUN=${2:?$usage}
BUILD=${3:?$usage}
SRC=${4:?$usage}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_repro_fe.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export PYTHONPATH=$BUILD/plugins/python
export TF_CPP_MIN_LOG_LEVEL=2
LIMIT=$((300 * ${TNT_TEST_TIMEOUT_MULT:-1}))
N=3
. "$(dirname "$0")/lib_frontend.sh" # its digits_data; the cases here count alone
passed=0
failed=0
ran=0

# The two settings: name and environment.
SETTINGS=("tcp-ring" "shm-auto")
setting_env() {
    case $1 in
    tcp-ring) echo "TNT_TRANSPORT=tcp TNT_ALLREDUCE_ALGO=ring" ;;
    shm-auto) echo "TNT_TRANSPORT=shm TNT_ALLREDUCE_ALGO=auto" ;;
    esac
}

fail() { echo "FAIL [$1] $2"; failed=$((failed + 1)); }
ok() { echo "ok   [$1] $2"; passed=$((passed + 1)); }

# run NAME MODE SETTING LOG SCRIPT ARGS...: one training run of p = N.
run() {
    local name=$1 mode=$2 setting=$3 log=$4 script=$5 t0=$SECONDS
    shift 5
    # shellcheck disable=SC2046  # the setting's words are VAR=value pairs
    env TNT_REPRODUCIBLE="$mode" $(setting_env "$setting") \
        "$RUN" -n "$N" --timeout "$LIMIT" --interpreter "$PY" \
        "$SRC/examples/$script" "$@" > "$log" 2>&1
    local st=$?
    echo "     [$name mode=$mode $setting] $((SECONDS - t0)) s"
    [ $st = 0 ] || fail "$name mode=$mode $setting" "(status $st): $(grep -v 'I0000\|oneDNN\|cpu_feature_guard\|absl::Init' "$log" | tail -n 20)"
    return $st
}

# same_params A.npz B.npz: 0 when every array is bitwise equal; prints
# how many of the arrays differ otherwise.
same_params() {
    "$PY" - "$1" "$2" <<'EOF'
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
diff = [k for k in a.files
        if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
        or a[k].tobytes() != b[k].tobytes()]
print("%d of %d arrays differ" % (len(diff), len(a.files)))
sys.exit(1 if diff else 0)
EOF
}

# compare NAME MODE A B: in the mode the two settings' weights must be
# bitwise equal; out of it they must differ.
compare() {
    local name=$1 mode=$2 out st
    out=$(same_params "$3" "$4")
    st=$?
    if [ "$mode" = 1 ] && [ $st = 0 ]; then
        ok "$name mode on" "tcp-ring and shm-auto bitwise equal ($out)"
    elif [ "$mode" = 1 ]; then
        fail "$name mode on" "tcp-ring and shm-auto differ: $out"
    elif [ $st = 1 ]; then
        ok "$name mode off" "tcp-ring and shm-auto differ, as expected ($out)"
    else
        fail "$name mode off" "tcp-ring and shm-auto bitwise equal: the test cannot tell the modes apart ($out)"
    fi
}

# ---- PyTorch --------------------------------------------------------------
digits_data "$PY" # lib_frontend.sh
# tntcomm.torch needs torch 2.x (the backend API of c10d::Backend).
if ! "$PY" -c "import sys, torch, numpy; \
sys.exit(int(torch.__version__.split('.')[0]) < 2)" 2>/dev/null ||
        [ ! -r "$DATA" ]; then
    echo "skip [torch] $PY cannot import torch 2.x and numpy, or no digits data"
else
    ran=1
    for mode in 1 0; do
        for s in "${SETTINGS[@]}"; do
            run torch "$mode" "$s" "$TMP/torch-$mode-$s.log" torch_digits.py \
                --data "$DATA" --epochs 1 --steps 6 --global-batch 48 \
                --seed 3 --min-accuracy 0 \
                --dump-params "$TMP/torch-$mode-$s.npz" &&
                grep -q "parameters identical on all $N rank" \
                    "$TMP/torch-$mode-$s.log" ||
                fail "torch mode=$mode $s" "no 'parameters identical' line"
        done
        [ -e "$TMP/torch-$mode-tcp-ring.npz" ] &&
            [ -e "$TMP/torch-$mode-shm-auto.npz" ] &&
            compare torch "$mode" "$TMP/torch-$mode-tcp-ring.npz" \
                "$TMP/torch-$mode-shm-auto.npz"
    done
fi

# ---- Keras ----------------------------------------------------------------
if ! "$PY" -c "import tensorflow, keras, sklearn" 2>/dev/null ||
    [ ! -e "$BUILD/plugins/python/tntcomm/keras/_tf_ops.so" ]; then
    echo "skip [keras] $PY cannot import tensorflow, keras and sklearn," \
         "or the TensorFlow op library was not built"
else
    ran=1
    for mode in 1 0; do
        for s in "${SETTINGS[@]}"; do
            run keras "$mode" "$s" "$TMP/keras-$mode-$s.log" keras_lenet5.py \
                --epochs 1 --train-samples 288 --global-batch 48 \
                --check-ranks --verbose 0 \
                --save-weights "$TMP/keras-$mode-$s.npz"
        done
        [ -e "$TMP/keras-$mode-tcp-ring.npz" ] &&
            [ -e "$TMP/keras-$mode-shm-auto.npz" ] &&
            compare keras "$mode" "$TMP/keras-$mode-tcp-ring.npz" \
                "$TMP/keras-$mode-shm-auto.npz"
    done
fi

if [ $ran = 0 ]; then
    echo "test_repro_frontends.sh: SKIP: neither torch nor keras can run"
    exit 77
fi
echo "$passed passed, $failed failed"
[ $failed = 0 ]
