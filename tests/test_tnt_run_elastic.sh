#!/bin/bash
# The rank programs are single-quoted on purpose: the ranks expand them.
# shellcheck disable=SC2016
# tnt-run --elastic and --max-restarts: a rank killed by a signal leaves
# the others running (tests/elastic_rank.c shrinks and finishes its
# loop, every element checked; exit 0, the death named with its time),
# without --elastic the job stops (137); a survivor that exits non-zero
# still fails the job; --max-restarts starts a failed job again with
# TNT_RESTART counting, and gives up after N.
# Usage: test_tnt_run_elastic.sh TNT-RUN ELASTIC-RANK
set -u
RUN=${1:?usage: test_tnt_run_elastic.sh TNT-RUN ELASTIC-RANK}
PROG=${2:?usage: test_tnt_run_elastic.sh TNT-RUN ELASTIC-RANK}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_tnt_run_elastic.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err
. "$(dirname "$0")/lib_frontend.sh"
run() {
    timeout -k 5 60 "$RUN" "$@" >"$OUT" 2>"$ERR"
    rc=$?
}
expect_rc() {
    [ "$rc" = "$1" ] || fail "exit $rc, expected $1: $(tail -5 "$ERR")"
}
expect_err() {
    grep -qF -- "$1" "$ERR" || fail "stderr lacks '$1': $(tail -5 "$ERR")"
}

for tp in tcp shm; do
    begin "--elastic, p=4, rank 2 killed, $tp"
    run -n 4 --elastic --output-on-all-ranks -x TNT_TRANSPORT=$tp \
        -x ELASTIC_VICTIM=2 -x ELASTIC_AT=40 -x TNT_TIMEOUT=20 "$PROG"
    expect_rc 0
    expect_err "rank 2 (pid "
    expect_err "killed by signal 9 (Killed)"
    expect_err "--elastic: the others go on"
    expect_err "--elastic: 1 of 4 ranks died, the other 3 finished"
    for r in 0 1 3; do
        grep -q "^\[$r\] world rank $r: shrank to 3 ranks at iteration" \
            "$OUT" || fail "rank $r did not shrink: $(cat "$OUT")"
        grep -q "^\[$r\] world rank $r: 200 iterations checked, 3 ranks" \
            "$OUT" || fail "rank $r did not finish: $(cat "$OUT")"
    done
    end
done

begin "without --elastic the job stops"
run -n 3 -x ELASTIC_VICTIM=1 -x ELASTIC_AT=10 -x TNT_RECOVERY=1 "$PROG"
expect_rc 137
expect_err "stopping the other ranks"
end

begin "--elastic: a survivor's failure still fails the job"
run -n 3 --elastic sh -c 'if [ "$TNT_RANK" = 1 ]; then kill -9 $$; fi
                          if [ "$TNT_RANK" = 2 ]; then sleep 0.3; exit 3; fi
                          sleep 1'
expect_rc 3
expect_err "--elastic: the others go on"
end

begin "--elastic: every rank dies"
run -n 2 --elastic sh -c 'kill -9 $$'
expect_rc 137
end

begin "--max-restarts 2: the second start succeeds"
run -n 2 --max-restarts 2 sh -c 'echo "start $TNT_RESTART"
                                 [ "$TNT_RESTART" != 0 ]'
expect_rc 0
expect_err "the job failed (exit 1); restart 1 of 2"
grep -q "restart 2 of 2" "$ERR" && fail "restarted twice"
grep -q "^\[0\] start 1$" "$OUT" || fail "no second start: $(cat "$OUT")"
end

begin "--max-restarts 1: gives up"
run -n 2 --max-restarts 1 sh -c 'exit 7'
expect_rc 7
expect_err "restart 1 of 1"
[ "$(grep -c "restart" "$ERR")" = 1 ] || fail "$(cat "$ERR")"
end

begin "--elastic and --max-restarts are local"
run --hostfile /dev/null --elastic true
expect_rc 2
expect_err "local jobs only"
end

finish
