#!/bin/bash
# The rank programs of the mismatch cases are single-quoted on purpose: the
# ranks expand them.
# shellcheck disable=SC2016
# Tests of examples/mlp_train, the data-parallel training loop on the
# fusion plugin ABI, run under tnt-run on 1 to 4 ranks: the loss falls,
# every rank ends with the same weights (the program compares them itself
# and fails otherwise), runs repeat bit for bit, several fusion plans and
# uneven or empty micro-batches all work, the program's own checks can
# fail, ranks that disagree get an error instead of a hang, and bad command
# lines exit 2.
# Usage: test_example.sh PATH-TO-TNT-RUN PATH-TO-MLP_TRAIN. Every run is
# bounded (timeout 60, TNT_TEST_TIMEOUT_MULT scales it for sanitizer runs);
# the script exits non-zero if any check fails and ends with
# "N passed, M failed".
set -u

usage="usage: test_example.sh PATH-TO-TNT-RUN PATH-TO-MLP_TRAIN"
RUN=${1:?$usage}
MLP=${2:?$usage}
for v in RUN MLP; do
    case ${!v} in
        /*) ;;
        *) printf -v "$v" '%s' "$PWD/${!v}" ;;
    esac
    if [ ! -x "${!v}" ]; then
        echo "test_example.sh: '${!v}' is not an executable" >&2
        exit 1
    fi
done

# The default-threshold case expects the library's own default.
unset TNT_FUSION_THRESHOLD

LIMIT=$((60 * ${TNT_TEST_TIMEOUT_MULT:-1}))
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_example.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err

passed=0
failed=0
current=""
case_ok=1

begin() {
    current=$1
    case_ok=1
}
fail() {
    echo "FAIL [$current]: $*" >&2
    case_ok=0
}
end() {
    if [ "$case_ok" = 1 ]; then
        echo "ok   [$current]"
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}

# Runs tnt-run -n $1 mlp_train ARGS..., bounded; sets rc, OUT and ERR.
train() {
    local n=$1
    shift
    timeout -k 5 "$LIMIT" "$RUN" -n "$n" "$MLP" "$@" >"$OUT" 2>"$ERR"
    rc=$?
}

expect_rc() {
    [ "$rc" = "$1" ] ||
        fail "exit status $rc, expected $1; stderr: $(tail -c 800 "$ERR")"
}

expect_err() {
    grep -qF -- "$1" "$ERR" ||
        fail "stderr lacks '$1'; it was: $(tail -c 800 "$ERR")"
}

expect_out() {
    grep -qF -- "$1" "$OUT" ||
        fail "stdout lacks '$1'; it ends: $(tail -c 400 "$OUT")"
}

# The loss column of epoch $1 in the master's table ("" if missing).
loss_at() {
    awk -v e="$1" '$1 == "[0]" && $2 == e && $2 ~ /^[0-9]+$/ { print $4 }' \
        "$OUT"
}

# A successful run of $1 ranks and $2 epochs: a full table from the master
# only, falling loss, and the program's own verdicts.
expect_trained() {
    local n=$1 epochs=$2 e first last missing=""
    expect_rc 0
    for e in $(seq 0 "$epochs"); do
        [[ $(loss_at "$e") =~ ^[0-9]+\.[0-9]{6}$ ]] || missing+=" $e"
    done
    [ -z "$missing" ] ||
        fail "no loss for epoch(s)$missing in: $(tail -c 800 "$OUT")"
    [ -z "$(loss_at $((epochs + 1)))" ] || fail "more than $epochs epochs"
    first=$(loss_at 0)
    last=$(loss_at "$epochs")
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 2) }' ||
        fail "loss $first -> $last did not halve"
    expect_out "weights and loss identical on all $n rank"
    [ -z "$last" ] || expect_out "final loss $last = "
    ! grep -qv '^\[0\] ' "$OUT" ||
        fail "stdout from ranks other than the master: $(grep -v '^\[0\] ' \
             "$OUT" | head -3)"
}

# ---- training -------------------------------------------------------------

for n in 1 2 3; do
    begin "$n rank(s): loss falls, ranks agree"
    train "$n" --epochs 4
    expect_trained "$n" 4
    expect_out "mlp_train: $n rank"
    end
done

begin "4 ranks, global batch 63: micro-batches of 15 and 16"
train 4 --epochs 3 --global-batch 63
expect_trained 4 3
expect_out "global batch 63 (micro-batches of 15 to 16)"
end

begin "3 ranks, global batch 2: one rank's micro-batch is empty"
train 3 --epochs 3 --global-batch 2 --samples 256 --lr 0.01
expect_trained 3 3
expect_out "global batch 2 (micro-batches of 0 to 1)"
end

begin "runs repeat bit for bit"
train 3 --epochs 3 --seed 7
expect_trained 3 3
cp "$OUT" "$TMP/first"
train 3 --epochs 3 --seed 7
expect_trained 3 3
cmp -s "$TMP/first" "$OUT" ||
    fail "two runs differ: $(diff "$TMP/first" "$OUT" | head -6)"
train 3 --epochs 3 --seed 8
expect_trained 3 3
[ "$(loss_at 3)" != "$(awk '$2 == 3 { print $4 }' "$TMP/first")" ] ||
    fail "seeds 7 and 8 gave the same final loss"
end

# ---- fusion plans -----------------------------------------------------------

begin "threshold 0: one bucket per tensor"
train 3 --epochs 2 --threshold 0 --show-plan
expect_trained 3 2
expect_out "6 tensors in 6 buckets (threshold 0 bytes)"
[ "$(grep -c '^\[0\] bucket [0-9]' "$OUT")" = 6 ] ||
    fail "--show-plan did not list 6 buckets: $(cat "$OUT")"
end

begin "threshold 17k: two buckets"
train 2 --epochs 2 --threshold 17k --show-plan
expect_trained 2 2
expect_out "6 tensors in 2 buckets (threshold 17408 bytes)"
[ "$(grep -c '^\[0\] bucket [0-9]' "$OUT")" = 2 ] ||
    fail "--show-plan did not list 2 buckets: $(cat "$OUT")"
end

# fc2.weight (16 KiB) and fc1.weight (8 KiB) reach 4 KiB by themselves, so
# each starts a bucket of its own (lib/fusion/plan.h).
begin "threshold 4k: large tensors in buckets of their own"
train 2 --epochs 2 --threshold 4k --show-plan
expect_trained 2 2
expect_out "6 tensors in 4 buckets (threshold 4096 bytes)"
expect_out "bucket 1: tensors 3-3 (fc2.weight .. fc2.weight)"
end

begin "default threshold: one bucket for this small model"
train 2 --epochs 2
expect_trained 2 2
expect_out "6 tensors in 1 bucket (default threshold)"
end

# ---- the program's own checks can fail ----------------------------------------

begin "a rank with different weights is caught"
train 3 --epochs 1 --diverge-rank 1
expect_rc 1
expect_err "rank 1 differs from rank 0: weights hash"
end

begin "a loss that does not halve is caught"
train 2 --epochs 1 --lr 0
expect_rc 1
expect_err "is not below 0.5 x the initial loss"
end

# ---- ranks that disagree get an error, not a hang ----------------------------

begin "ranks running different epoch counts"
timeout -k 5 "$LIMIT" "$RUN" -n 2 sh -c 'exec "$0" --epochs $((1 + TNT_RANK))' \
    "$MLP" >"$OUT" 2>"$ERR"
rc=$?
expect_rc 1
expect_err "mismatch"
end

begin "ranks with different fusion thresholds"
timeout -k 5 "$LIMIT" "$RUN" -n 3 sh -c \
    'exec "$0" --threshold $((TNT_RANK / 2))k' "$MLP" >"$OUT" 2>"$ERR"
rc=$?
expect_rc 1
expect_err "tnt_fusion_create"
expect_err "differ"
end

# ---- command lines ----------------------------------------------------------------

begin "bad command lines exit 2"
check_usage() { # expected-text args...
    local want=$1
    shift
    timeout -k 5 "$LIMIT" "$MLP" "$@" >"$OUT" 2>"$ERR"
    rc=$?
    expect_rc 2
    expect_err "$want"
}
check_usage "invalid --epochs '0'" --epochs 0
check_usage "invalid --epochs 'x'" --epochs x
check_usage "invalid --lr 'nan'" --lr nan
check_usage "invalid --momentum '1'" --momentum 1
check_usage "invalid --threshold '12q'" --threshold 12q
check_usage "invalid --threshold '-5'" --threshold -5
check_usage "at most --samples (100)" --samples 100 --global-batch 101
check_usage "unknown option '--bogus'" --bogus
check_usage "option '--epochs' needs a value" --epochs
check_usage "invalid argument 'extra'" extra
train 2 --diverge-rank 2
expect_rc 2
expect_err "--diverge-rank 2 names no rank of this job of 2"
end

begin "--help"
timeout -k 5 "$LIMIT" "$MLP" --help >"$OUT" 2>"$ERR"
rc=$?
expect_rc 0
grep -q "^Usage: tnt-run -n N mlp_train" "$OUT" ||
    fail "no usage line: $(cat "$OUT")"
end

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
