# shellcheck shell=bash
# Sourced by the test scripts of examples, launchers and frontends (not run
# alone): the cases' bookkeeping, the skip rule and the digits' lookup that
# every one of them needs alike.
#
#   . "$(dirname "$0")/lib_frontend.sh"
#
# Cases: `begin NAME`, any number of `fail MESSAGE`, `end` (prints "ok"
# when nothing failed); `finish` prints the counts and is the script's
# exit status. A script that cannot run here calls `skip WHY` (exit 77,
# meson's "skipped"), with a line that says how to get what is missing.

TEST_NAME=$(basename "$0")
passed=0
failed=0
current=""
case_ok=1

begin() { current=$1; case_ok=1; }
fail() { echo "FAIL [$current]: $*" >&2; case_ok=0; }
end() {
    if [ "$case_ok" = 1 ]; then
        echo "ok   [$current]"; passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
}

skip() { echo "$TEST_NAME: SKIP: $*"; exit 77; }

# digits_data [PYTHON]: sets DATA to scikit-learn's 8x8 digits: $DIGITS_DATA,
# else Debian's python3-sklearn's copy, else that of PYTHON's scikit-learn
# (.venv's). need_digits skips when DATA is not readable.
digits_data() {
    DATA=${DIGITS_DATA:-/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz}
    if [ ! -r "$DATA" ] && [ -n "${1:-}" ]; then
        DATA=$("$1" -c "import os, sklearn.datasets as d; \
print(os.path.join(os.path.dirname(d.__file__), 'data', 'digits.csv.gz'))" \
            2>/dev/null)
    fi
}
need_digits() {
    [ -r "$DATA" ] || skip "$DATA is missing (apt-get install" \
        "python3-sklearn, or set DIGITS_DATA)"
}

# need_python PYTHON MODULE...: skips unless PYTHON imports every MODULE.
need_python() {
    local py=$1
    shift
    local mods
    mods=$(IFS=,; echo "$*")
    "$py" -c "import $mods" 2>/dev/null ||
        skip "$py cannot import $* (bash scripts/venv.sh makes .venv" \
            "with them)"
}

# need_torch2 PYTHON: skips on a torch before 2.x (the backend and
# tntcomm.torch are for torch 2; scripts/venv.sh makes .venv with 2.13).
need_torch2() {
    "$1" -c "import sys, torch; \
sys.exit(int(torch.__version__.split('.')[0]) < 2)" 2>/dev/null ||
        skip "$1 has a torch before 2.x (the backend and tntcomm.torch" \
            "here are for torch 2; scripts/venv.sh makes .venv with" \
            "torch 2.13)"
}

# need_keras PYTHON BUILD-DIR: skips unless PYTHON imports TensorFlow, Keras
# and scikit-learn and BUILD-DIR holds tntcomm.keras's op library.
need_keras() {
    need_python "$1" tensorflow keras sklearn
    [ -e "$2/plugins/python/tntcomm/keras/_tf_ops.so" ] ||
        skip "the TensorFlow op library was not built (meson setup" \
            "-Dpython=.venv/bin/python)"
}
