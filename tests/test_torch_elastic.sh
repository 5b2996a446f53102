#!/bin/bash
# examples/torch_digits.py (tntcomm.torch's DistributedOptimizer) losing
# a rank in the middle of training under tnt-run --elastic (--kill-rank 1
# --kill-step 40: rank 1 of 3 kills itself with SIGKILL at step 40 of
# 88) and finishing with the two survivors (tntcomm.shrink(), the
# fusion context and plan made anew, the global batch of 32 split over
# two), against an undisturbed run of 3 ranks in the same test: exit 0,
# the death named, the survivors' parameters bitwise the same (the
# example checks it), every epoch's mean loss within a relative 1e-5 and
# every parameter tensor within a relative 1e-5 (norm of the difference
# over the norm) of the undisturbed run's, the test accuracy within 2 of
# the 359 test samples (0.0056). The margins are test_torch.sh's: the
# same global batches, summed in another order over fewer ranks (measured:
# the printed losses agree to their 6 digits, the same accuracy).
#
# Usage: test_torch_elastic.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR. Exits
# 77 (skipped) when PYTHON lacks torch (2.x) or numpy or the digits are
# missing.
set -u
usage="usage: test_torch_elastic.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR"
PY=${1:?$usage}
RUN=${2:?$usage}
BUILD=${3:?$usage}
SRC=${4:?$usage}
. "$(dirname "$0")/lib_frontend.sh"
digits_data "$PY"
need_python "$PY" torch numpy
need_torch2 "$PY"
need_digits
LIMIT=$((120 * ${TNT_TEST_TIMEOUT_MULT:-1}))
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_torch_elastic.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export PYTHONPATH=$BUILD/plugins/python
ARGS=(--data "$DATA" --epochs 2 --global-batch 32 --seed 3)
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# Both runs at once: the machine's time goes mostly to importing torch.
timeout -k 5 "$LIMIT" "$RUN" -n 3 "$PY" "$SRC/examples/torch_digits.py" \
    "${ARGS[@]}" --dump-params "$TMP/ref.npz" >"$TMP/ref.out" \
    2>"$TMP/ref.err" &
ref=$!
timeout -k 5 "$LIMIT" "$RUN" -n 3 --elastic --output-on-all-ranks "$PY" \
    "$SRC/examples/torch_digits.py" "${ARGS[@]}" --kill-rank 1 \
    --kill-step 40 --dump-params "$TMP/kill.npz" >"$TMP/kill.out" \
    2>"$TMP/kill.err"
rc=$?
wait "$ref"
rc_ref=$?
[ "$rc_ref" = 0 ] || fail "undisturbed run: exit $rc_ref: $(tail -5 "$TMP/ref.err")"
[ "$rc" = 0 ] || fail "elastic run: exit $rc: $(tail -5 "$TMP/kill.err")"
grep -qF "rank 1 (pid " "$TMP/kill.err" &&
    grep -qF "killed by signal 9" "$TMP/kill.err" ||
    fail "no death of rank 1 reported: $(tail -5 "$TMP/kill.err")"
grep -qF -- "--elastic: 1 of 3 ranks died, the other 2 finished" \
    "$TMP/kill.err" || fail "tnt-run's summary missing: $(tail -3 "$TMP/kill.err")"
grep -qE "torch_digits: rank 1 died; going on with 2 ranks from step (39|40)$" \
    "$TMP/kill.out" || fail "no resume line: $(cat "$TMP/kill.out")"
grep -qF "parameters identical on all 2 ranks" "$TMP/kill.out" ||
    fail "survivors' parameters differ: $(tail -3 "$TMP/kill.out")"
"$PY" - "$TMP" <<'PYEOF' || fail "the runs differ (above)"
import re, sys
import numpy as np
tmp = sys.argv[1]
def lines(name):
    text = open("%s/%s.out" % (tmp, name)).read()
    losses = [float(v) for v in re.findall(r"epoch +\d+  loss ([0-9.]+)", text)]
    acc = re.findall(r"test accuracy ([0-9.]+)", text)
    return losses, float(acc[0]) if acc else None
(lr, ar), (lk, ak) = lines("ref"), lines("kill")
ok = len(lr) == len(lk) == 2 and ar is not None and ak is not None
if not ok:
    print("expected 2 epochs and an accuracy: %s %s / %s %s" % (lr, ar, lk, ak))
    sys.exit(1)
worst = max(abs(a - b) / a for a, b in zip(lr, lk))
print("     loss: max rel. diff %.2g; test accuracy %.4f, undisturbed %.4f"
      % (worst, ak, ar))
ok = worst <= 1e-5 and abs(ak - ar) <= 0.0056
ref, kill = np.load(tmp + "/ref.npz"), np.load(tmp + "/kill.npz")
if sorted(ref.files) != sorted(kill.files):
    print("parameter names differ: %s / %s" % (ref.files, kill.files))
    sys.exit(1)
for n in ref.files:
    d = np.linalg.norm(ref[n] - kill[n]) / np.linalg.norm(ref[n])
    if not d <= 1e-5:
        print("%s: relative difference %.3g" % (n, d))
        ok = False
sys.exit(0 if ok else 1)
PYEOF
"$PY" "$SRC/examples/torch_digits.py" --kill-step -1 >"$TMP/bad" 2>&1 &&
    fail "--kill-step -1 accepted"
grep -qF -- "--kill-step must be 0 or more" "$TMP/bad" ||
    fail "--kill-step -1: $(cat "$TMP/bad")"
if [ "$fails" = 0 ]; then
    echo "ok   [p=3, rank 1 killed at step 40: the 2 survivors finish like an undisturbed run]"
fi
[ "$fails" = 0 ]
