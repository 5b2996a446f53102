#!/bin/bash
# Tests of examples/digits_train, the C training loop on scikit-learn's
# 8x8 digits, under tnt-run: with a fixed global batch the loss curves of
# 1, 2, 3 and 4 ranks agree to a relative 2e-5 per epoch, every rank ends
# with bitwise the same weights (the program compares hashes with
# allgather and fails otherwise), the test accuracy exceeds 0.9, and a
# missing or corrupt data file or a bad option gives a clear error.
#
# Why a tolerance and not equality: the gradients of a global batch are
# summed in a different order for different rank counts (per rank first,
# then across ranks), and float addition is not associative, so the
# weights differ in the last bits after the first step. SGD on this
# well-conditioned problem keeps those differences small: measured
# differences are below 1e-6 relative after 15 epochs (450 steps); 2e-5
# leaves room for other compilers while still catching any real error
# (a wrong micro-batch, scale or sample order changes the loss in the
# third digit or earlier).
#
# Usage: test_digits.sh PATH-TO-TNT-RUN PATH-TO-DIGITS_TRAIN. Exits 77
# (skipped) when the data file is not installed (package python3-sklearn).
set -u

usage="usage: test_digits.sh PATH-TO-TNT-RUN PATH-TO-DIGITS_TRAIN"
RUN=${1:?$usage}
PROG=${2:?$usage}
. "$(dirname "$0")/lib_frontend.sh"
digits_data
need_digits

LIMIT=$((60 * ${TNT_TEST_TIMEOUT_MULT:-1}))
TOL=2e-5
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_digits.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err
run() {
    local n=$1
    shift
    timeout -k 5 "$LIMIT" "$RUN" -n "$n" "$PROG" --data "$DATA" "$@" \
        >"$OUT" 2>"$ERR"
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

# The master's loss table as "epoch loss" lines.
curve() { awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ { print $2, $3 }' "$OUT"; }

# A successful run of $1 ranks and $2 epochs whose curve goes to $3.
expect_trained() {
    local n=$1 epochs=$2 acc
    expect_rc 0
    curve >"$3"
    [ "$(wc -l <"$3")" = "$epochs" ] ||
        fail "expected $epochs epochs of loss, got: $(cat "$3")"
    grep -q "^\[0\] weights identical on all $n rank" "$OUT" ||
        fail "no 'weights identical on all $n ranks': $(tail -3 "$OUT")"
    acc=$(awk '$2 == "test" && $3 == "accuracy" { print $4 }' "$OUT")
    awk -v a="$acc" 'BEGIN { exit !(a + 0 > 0.9) }' ||
        fail "test accuracy '$acc' is not above 0.9"
}

# Curves $1 and $2 agree epoch by epoch to the relative tolerance.
expect_same_curve() {
    local worst
    worst=$(paste "$1" "$2" | awk -v tol="$TOL" '
        { d = $2 - $4; if (d < 0) d = -d; r = d / $2; if (r > w) w = r
          if ($1 != $3 || r > tol) bad = bad " epoch " $1 ": " $2 " vs " $4 }
        END { if (bad != "") { print "DIFF" bad } else printf "%.2g\n", w }')
    case $worst in
        DIFF*) fail "loss curves differ beyond $TOL:${worst#DIFF}" ;;
        *) echo "     $(basename "$1") vs $(basename "$2"): max rel. diff" \
                "$worst" ;;
    esac
}

# ---- training ---------------------------------------------------------------

for n in 1 2 3 4; do
    begin "$n rank(s), global batch 48: trains to > 90% test accuracy"
    run "$n" --global-batch 48
    expect_trained "$n" 15 "$TMP/p$n"
    [ "$n" = 1 ] || expect_same_curve "$TMP/p1" "$TMP/p$n"
    end
done

begin "uneven micro-batches (global batch 50 on 3 and 4 ranks)"
run 1 --global-batch 50 --epochs 6
expect_trained 1 6 "$TMP/u1"
for n in 3 4; do
    run "$n" --global-batch 50 --epochs 6
    expect_trained "$n" 6 "$TMP/u$n"
    expect_same_curve "$TMP/u1" "$TMP/u$n"
done
end

begin "a different global batch gives a different curve"
run 2 --global-batch 32 --epochs 15
expect_rc 0
curve >"$TMP/b32"
! cmp -s "$TMP/b32" "$TMP/p1" || fail "global batch 32 and 48 agree"
end

# ---- errors -----------------------------------------------------------------

begin "missing data file"
timeout -k 5 "$LIMIT" "$RUN" -n 2 "$PROG" --data "$TMP/none.csv.gz" \
    >"$OUT" 2>"$ERR"
rc=$?
expect_rc 1
expect_err "cannot open the digits data '$TMP/none.csv.gz'"
expect_err "python3-sklearn"
end

begin "corrupt data file"
zcat "$DATA" | head -5 >"$TMP/bad.csv"
echo "1,2,3" >>"$TMP/bad.csv"
gzip "$TMP/bad.csv"
timeout -k 5 "$LIMIT" "$RUN" -n 2 "$PROG" --data "$TMP/bad.csv.gz" \
    >"$OUT" 2>"$ERR"
rc=$?
expect_rc 1
expect_err "bad.csv.gz:6: expected 65 comma-separated fields, found 3"
end

begin "bad options"
run 1 --global-batch 0
expect_rc 2
expect_err "invalid --global-batch '0'"
run 1 --global-batch 5000
expect_rc 1
expect_err "is larger than the 1438 training samples"
run 1 --bogus
expect_rc 2
expect_err "unknown option '--bogus'"
end

begin "the accuracy check can fail"
run 1 --epochs 1 --lr 0 --min-accuracy 0.5
expect_rc 1
expect_err "is below --min-accuracy 0.5"
end

finish
