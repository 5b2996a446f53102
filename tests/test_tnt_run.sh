#!/bin/bash
# The rank programs are single-quoted on purpose: the ranks expand them.
# shellcheck disable=SC2016
# Tests of tnt-run, the local launcher: the environment each rank gets, the
# "[rank] " output relay, exit-status propagation, signal forwarding,
# timeouts, bad command lines, and that no rank process is left behind.
# Usage: test_tnt_run.sh PATH-TO-TNT-RUN. Every launcher run is bounded
# (timeout 20, or a bounded wait for background runs); the script exits
# non-zero if any check fails and ends with "N passed, M failed".
set -u

RUN=${1:?usage: test_tnt_run.sh PATH-TO-TNT-RUN}
case $RUN in
    /*) ;;
    *) RUN=$PWD/$RUN ;;
esac
if [ ! -x "$RUN" ]; then
    echo "test_tnt_run.sh: '$RUN' is not an executable" >&2
    exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_tnt_run.XXXXXX") || exit 1
MARK=tntrunmark$$
BG=()
cleanup() {
    for pid in "${BG[@]}"; do
        kill -KILL "$pid" 2>/dev/null
    done
    pkill -KILL -f "$MARK" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

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

# Runs tnt-run in the foreground, bounded; sets rc, OUT and ERR (files).
OUT=$TMP/out
ERR=$TMP/err
run() {
    timeout -k 5 20 "$RUN" "$@" >"$OUT" 2>"$ERR"
    rc=$?
}

expect_rc() {
    [ "$rc" = "$1" ] ||
        fail "exit status $rc, expected $1; stderr: $(head -c 600 "$ERR")"
}

expect_err() {
    grep -qF -- "$1" "$ERR" ||
        fail "stderr lacks '$1'; it was: $(head -c 600 "$ERR")"
}

now() { echo "${EPOCHREALTIME/,/.}"; }
elapsed_lt() { # start limit
    awk -v s="$1" -v e="$(now)" -v l="$2" 'BEGIN { exit !(e - s < l) }'
}

# No process whose command line holds the marker may remain. SIGKILL is
# delivered asynchronously, so a dying process may show for a moment.
expect_no_leftovers() {
    local mark=$1 i
    for i in $(seq 30); do
        pgrep -f "$mark" >/dev/null || return 0
        sleep 0.1
    done
    fail "processes left behind: $(pgrep -af "$mark" | head -5)"
}

# Waits up to $2 seconds for the background job $1; sets rc (or kills it).
wait_bounded() {
    local pid=$1 limit=$2 i
    for i in $(seq $((limit * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        fail "tnt-run (pid $pid) still running after $limit s"
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid"
    rc=$?
}

# Counts the files matching the glob $1.
count_files() {
    local n=0 f
    for f in $1; do
        [ -e "$f" ] && n=$((n + 1))
    done
    echo "$n"
}

# Waits up to 20 s until $1 files match the glob $2.
wait_files() {
    local want=$1 glob=$2 i
    for i in $(seq 200); do
        [ "$(count_files "$glob")" -ge "$want" ] && return 0
        sleep 0.1
    done
    fail "only $(count_files "$glob") of $want files $glob appeared"
    return 1
}

# ---- environment --------------------------------------------------------

begin "environment of 4 ranks"
TNT_ROOT_ADDR=10.9.8.7:1 TNT_RANK=99 TNT_JOB_KEY=stale \
    run --output-on-all-ranks -n 4 sh -c 'echo "$TNT_RANK $TNT_SIZE $TNT_LOCAL_RANK $TNT_LOCAL_SIZE" \
                         "$TNT_ROOT_ADDR $TNT_JOB_KEY"'
expect_rc 0
[ "$(wc -l <"$OUT")" = 4 ] || fail "expected 4 lines, got: $(cat "$OUT")"
for i in 0 1 2 3; do
    grep -qE "^\[$i\] $i 4 $i 4 127\.0\.0\.1:[0-9]+ [0-9a-f]{64}\$" "$OUT" ||
        fail "rank $i: no well-formed line in: $(cat "$OUT")"
done
[ "$(awk '{print $2}' "$OUT" | sort -u | wc -l)" = 4 ] ||
    fail "ranks are not distinct"
[ "$(awk '{print $6}' "$OUT" | sort -u | wc -l)" = 1 ] ||
    fail "ranks got different root addresses"
[ "$(awk '{print $7}' "$OUT" | sort -u | wc -l)" = 1 ] ||
    fail "ranks got different job keys"
port=$(awk 'NR == 1 { split($6, a, ":"); print a[2] }' "$OUT")
if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]
then
    fail "bad port '$port'"
fi
key1=$(awk 'NR == 1 { print $7 }' "$OUT")
end

begin "launcher's own job variables replaced, not duplicated"
# A C program's getenv() returns the first of duplicate entries, so stale
# ones must be gone from the environment, not merely shadowed.
TNT_ROOT_ADDR=10.9.8.7:1 TNT_RANK=99 TNT_SIZE=99 TNT_LOCAL_RANK=99 \
    TNT_LOCAL_SIZE=99 TNT_JOB_KEY=stale TNT_LOG_LEVEL=DEBUG run --output-on-all-ranks -n 2 env
expect_rc 0
for v in TNT_RANK TNT_SIZE TNT_LOCAL_RANK TNT_LOCAL_SIZE TNT_ROOT_ADDR \
    TNT_JOB_KEY; do
    [ "$(grep -c "^\[0\] $v=" "$OUT")" = 1 ] ||
        fail "rank 0 has not exactly one $v: $(grep "$v=" "$OUT")"
done
grep -qx '\[1\] TNT_RANK=1' "$OUT" || fail "rank 1: $(grep TNT_RANK= "$OUT")"
grep -qx '\[0\] TNT_SIZE=2' "$OUT" || fail "size: $(grep TNT_SIZE= "$OUT")"
grep -qx '\[0\] TNT_LOG_LEVEL=DEBUG' "$OUT" ||
    fail "other variables must be passed on"
end

begin "job key is fresh per job"
run -n 2 sh -c 'echo "$TNT_JOB_KEY"'
expect_rc 0
key2=$(awk 'NR == 1 { print $2 }' "$OUT")
[[ $key2 =~ ^[0-9a-f]{64}$ ]] || fail "bad key '$key2'"
[ "$key1" != "$key2" ] || fail "two jobs got the same key $key1"
end

begin "option forms of -n"
for form in "-n 3" "-n3" "--np 3" "--np=3" "--nranks=3" "--nranks 3" \
            "-np 3"; do
    # shellcheck disable=SC2086
    run --output-on-all-ranks $form -- sh -c 'echo "$TNT_SIZE"'
    expect_rc 0
    [ "$(grep -c '^\[[0-2]\] 3$' "$OUT")" = 3 ] ||
        fail "'$form': output $(cat "$OUT")"
done
end

begin "program found through PATH, arguments passed"
mkdir -p "$TMP/bin"
printf '#!/bin/sh\necho "args:$#:$1:$2"\n' >"$TMP/bin/tnt-run-test-prog"
chmod +x "$TMP/bin/tnt-run-test-prog"
PATH=$TMP/bin:$PATH run -n 1 tnt-run-test-prog "a b" ""
expect_rc 0
[ "$(cat "$OUT")" = "[0] args:2:a b:" ] || fail "output: $(cat "$OUT")"
end

# ---- output relay --------------------------------------------------------

begin "stdout and stderr prefixed and kept apart"
run --output-on-all-ranks -n 2 sh -c 'echo "out $TNT_RANK"; echo "err $TNT_RANK" >&2'
expect_rc 0
[ "$(sort "$OUT")" = "$(printf '[0] out 0\n[1] out 1')" ] ||
    fail "stdout: $(cat "$OUT")"
[ "$(sort "$ERR")" = "$(printf '[0] err 0\n[1] err 1')" ] ||
    fail "stderr: $(cat "$ERR")"
end

begin "last line without newline"
run -n 1 sh -c 'printf "first\nno newline"'
expect_rc 0
[ "$(od -An -c "$OUT" | tr -d ' \n')" = "[0]first\n[0]nonewline\n" ] ||
    fail "output: $(od -c "$OUT")"
end

begin "lines from concurrent ranks never interleave"
# Each rank writes every line in three pieces, and some lines are far
# longer than a pipe's atomic write, so only the launcher's line buffering
# can keep them whole.
run --output-on-all-ranks -n 4 sh -c '
    pad=$(printf "%0200d" 0); big=$(printf "%020000d" 0)
    i=0
    while [ $i -lt 300 ]; do
        printf "R%s-%d-" "$TNT_RANK" "$i"
        if [ $((i % 50)) = 7 ]; then
            printf "%s" "$big"
        else
            printf "%s" "$pad"
        fi
        printf "%s\n" "-E$TNT_RANK"
        i=$((i + 1))
    done'
expect_rc 0
bad=$(awk '
    {
        line = substr($0, 1, 80)
        if (!match($0, /^\[[0-3]\] R[0-3]-[0-9]+-0+-E[0-3]$/)) {
            print "malformed: " line
            next
        }
        r = substr($0, 2, 1)
        split(substr($0, 5), f, "-")
        if (f[1] != "R" r || f[4] != "E" r) {
            print "mixed: " line
            next
        }
        if (f[2] != next_i[r] + 0)
            print "out of order: " line
        next_i[r] = f[2] + 1
        want = (f[2] % 50 == 7) ? 20000 : 200
        if (length(f[3]) != want)
            print "cut: " line
        n++
    }
    END { if (n != 1200) print "expected 1200 lines, got " n }
    ' "$OUT" | head -5)
[ -z "$bad" ] || fail "$bad"
end

# ---- exit status ----------------------------------------------------------

begin "failing rank: status passed on, others stopped"
t0=$(now)
run -n 4 sh -c 'if [ "$TNT_RANK" = 2 ]; then sleep 0.3; exit 3; fi
                 sh -c "sleep 100; : $0"; : $0' "$MARK-a"
expect_rc 3
expect_err "tnt-run: rank 2 (pid "
expect_err "exited with status 3; stopping the other ranks"
elapsed_lt "$t0" 10 || fail "took longer than 10 s"
expect_no_leftovers "$MARK-a"
end

begin "rank killed by a signal"
run -n 3 sh -c 'if [ "$TNT_RANK" = 1 ]; then sleep 0.3; kill -9 $$; fi
                 sh -c "sleep 100; : $0"; : $0' "$MARK-b"
expect_rc 137
expect_err "tnt-run: rank 1 (pid "
expect_err "killed by signal 9 (Killed)"
expect_no_leftovers "$MARK-b"
end

begin "ranks ignoring SIGTERM are killed after the grace period"
t0=$(now)
run -n 3 sh -c 'trap "" TERM; [ "$TNT_RANK" = 0 ] && sleep 0.5 && exit 5
                 exec sleep "$0"' "100.$$"
expect_rc 5
expect_err "sending SIGKILL"
elapsed_lt "$t0" 10 || fail "took longer than 10 s"
expect_no_leftovers "^sleep 100.$$"
end

begin "a successful rank's background process is not left behind"
run --output-on-all-ranks -n 2 sh -c 'sh -c "sleep 100; : $0" & echo started' "$MARK-e"
expect_rc 0
[ "$(grep -c started "$OUT")" = 2 ] || fail "output: $(cat "$OUT")"
expect_no_leftovers "$MARK-e"
end

begin "all ranks succeed"
run -n 5 sh -c 'exit 0'
expect_rc 0
[ ! -s "$ERR" ] || fail "unexpected stderr: $(cat "$ERR")"
end

# ---- timeout ---------------------------------------------------------------

begin "--timeout stops the job with 124"
t0=$(now)
run --timeout 1 -n 3 sh -c '[ "$TNT_RANK" = 0 ] && exit 0
                            sh -c "sleep 100; : $0"; : $0' "$MARK-c"
expect_rc 124
expect_err "ranks still running: 1, 2"
elapsed_lt "$t0" 10 || fail "took longer than 10 s"
expect_no_leftovers "$MARK-c"
end

# ---- signals to the launcher -----------------------------------------------

# Ranks that report SIGTERM in a file, after saying that they are ready. A
# child shell carries the marker ($0) too, to catch a signal that reaches
# only the rank and not its process tree.
TRAPPER='trap "echo term >$D/term.$TNT_RANK; exit 0" TERM
         echo >$D/ready.$TNT_RANK
         sh -c "sleep 100; : $0" & wait $!'

for sig in TERM INT HUP; do
    begin "SIG$sig forwarded to the ranks as SIGTERM"
    D=$TMP/sig$sig
    mkdir -p "$D"
    # A background job of a script starts with SIGINT ignored; give it back
    # its default so that the launcher can receive it.
    D=$D env --default-signal=INT "$RUN" -n 4 sh -c "$TRAPPER" "$MARK-$sig" \
        >"$OUT" 2>"$ERR" &
    pid=$!
    BG+=("$pid")
    if wait_files 4 "$D/ready.*"; then
        kill -"$sig" "$pid"
    fi
    wait_bounded "$pid" 20
    case $sig in
        TERM) expect_rc 143 ;;
        INT) expect_rc 130 ;;
        HUP) expect_rc 129 ;;
    esac
    expect_err "received SIG$sig; sending SIGTERM to all ranks"
    wait_files 4 "$D/term.*"
    expect_no_leftovers "$MARK-$sig"
    end
done

begin "a second SIGINT kills the ranks"
D=$TMP/int2
mkdir -p "$D"
D=$D env --default-signal=INT "$RUN" -n 3 sh -c \
    'trap "" TERM; echo >$D/ready.$TNT_RANK; sh -c "sleep 100; : $0"' \
    "$MARK-d" \
    >"$OUT" 2>"$ERR" &
pid=$!
BG+=("$pid")
if wait_files 3 "$D/ready.*"; then
    kill -INT "$pid"
    # Two pending SIGINTs would merge into one: send the second only once
    # the launcher has acted on the first.
    for i in $(seq 200); do
        grep -q "received SIGINT; sending SIGTERM" "$ERR" && break
        sleep 0.1
    done
    kill -INT "$pid"
fi
wait_bounded "$pid" 20
expect_rc 130
expect_err "received SIGINT again; sending SIGKILL"
expect_no_leftovers "$MARK-d"
end

begin "ranks die with a SIGKILLed launcher"
"$RUN" -n 3 sleep "200.$$" >/dev/null 2>&1 &
pid=$!
BG+=("$pid")
disown "$pid" # no "Killed" notice from bash
for i in $(seq 200); do
    [ "$(pgrep -fc "^sleep 200.$$")" -ge 3 ] && break
    sleep 0.1
done
[ "$(pgrep -fc "^sleep 200.$$")" = 3 ] || fail "the 3 ranks did not start"
kill -KILL "$pid"
expect_no_leftovers "^sleep 200.$$"
end

# ---- bad programs and command lines ------------------------------------------

begin "missing program"
run -n 3 no-such-program-$$
expect_rc 127
nsf="No such file or directory"
[ "$(cat "$ERR")" = "tnt-run: cannot execute 'no-such-program-$$': $nsf" ] ||
    fail "stderr: $(cat "$ERR")"
run -n 3 "$TMP/no/such/path"
expect_rc 127
expect_err "tnt-run: cannot execute '$TMP/no/such/path': $nsf"
end

begin "program not executable"
printf '#!/bin/sh\necho hi\n' >"$TMP/noexec"
chmod -x "$TMP/noexec"
run -n 2 "$TMP/noexec"
expect_rc 127
expect_err "tnt-run: cannot execute '$TMP/noexec': Permission denied"
run -n 2 "$TMP"
expect_rc 127
expect_err "cannot execute '$TMP'"
end

begin "exec failure reported by the rank"
# Executable but in no format the kernel knows: only execve() can tell.
printf '\001\002\003\004' >"$TMP/badformat"
chmod +x "$TMP/badformat"
run -n 3 "$TMP/badformat"
expect_rc 127
expect_err "tnt-run: cannot execute '$TMP/badformat': Exec format error"
[ ! -s "$OUT" ] || fail "unexpected stdout: $(cat "$OUT")"
end

begin "bad command lines exit 2"
check_usage() { # expected-text args...
    local want=$1
    shift
    run "$@"
    expect_rc 2
    expect_err "$want"
    expect_err "Try 'tnt-run --help'"
}
check_usage "invalid number of ranks '0'" -n 0 true
check_usage "invalid number of ranks 'abc'" -n abc true
check_usage "invalid number of ranks '-1'" -n -1 true
check_usage "invalid number of ranks '3x'" --np=3x true
check_usage "invalid number of ranks ''" --nranks= true
check_usage "invalid number of ranks '100000'" -n 100000 true
# One limit and one message for -n, whatever the value's fault.
for bad in 0 257 300; do
    check_usage "invalid number of ranks '$bad': expected an integer from 1 to 256 (on this host" -n "$bad" true
done
check_usage "invalid number of ranks '0': expected an integer from 1 to 65536 (in all" --hostfile /dev/null -n 0 true
check_usage "invalid number of ranks 'p'" -n p true
check_usage "no program given" -n 2
check_usage "unknown option '--bogus'" --bogus -n 2 true
check_usage "option '-n' needs a value" -n
check_usage "invalid timeout 'soon'" --timeout soon -n 1 true
check_usage "invalid timeout '0'" --timeout 0 -n 1 true
end

# ---- Tarantella's options ---------------------------------------------------

begin "by default only rank 0's stdout is shown, every rank's stderr"
run -n 3 sh -c 'echo "out $TNT_RANK"; echo "err $TNT_RANK" >&2'
expect_rc 0
[ "$(cat "$OUT")" = "[0] out 0" ] || fail "stdout: $(cat "$OUT")"
[ "$(grep -c '^\[[0-2]\] err [0-2]$' "$ERR")" = 3 ] || fail "stderr: $(cat "$ERR")"
end

begin "-x VAR=VALUE and -x VAR, in the order given"
export TNT_RUN_TEST_PASS="passed on"
run -x B=1 -x TNT_RUN_TEST_PASS -x A=2 -x B=3 -x 'C=x y' -n 1 env
expect_rc 0
got=$(grep -E '^\[0\] (A|B|C|TNT_RUN_TEST_PASS)=' "$OUT" | tr '\n' '|')
[ "$got" = "[0] TNT_RUN_TEST_PASS=passed on|[0] A=2|[0] B=3|[0] C=x y|" ] ||
    fail "variables: $got"
check_usage "invalid -x 'NO_SUCH_VAR_$$': NO_SUCH_VAR_$$ is not set" \
    -x "NO_SUCH_VAR_$$" -n 1 true
check_usage "tnt-run sets TNT_RANK itself" -x TNT_RANK=3 -n 1 true
check_usage "'1A' is not a variable name" -x 1A=2 -n 1 true
end

begin "--fusion-threshold, --log-level, --log-on-all-ranks"
run --fusion-threshold 64 --log-level info --log-on-all-ranks -n 2 \
    --output-on-all-ranks sh -c \
    'echo "$TNT_FUSION_THRESHOLD $TNT_LOG_LEVEL $TNT_LOG_ALL_RANKS"'
expect_rc 0
[ "$(grep -c '^\[[01]\] 64k INFO 1$' "$OUT")" = 2 ] || fail "$(cat "$OUT")"
check_usage "invalid --fusion-threshold '-1'" --fusion-threshold -1 -n 1 true
check_usage "invalid --fusion-threshold '8M'" --fusion-threshold 8M -n 1 true
check_usage "invalid --log-level 'LOUD'" --log-level LOUD -n 1 true
end

begin "--ib-hca-map sets TNT_IB_HCA_MAP"
run --ib-hca-map local_rank -n 2 --output-on-all-ranks sh -c \
    'echo "map $TNT_IB_HCA_MAP"'
expect_rc 0
[ "$(grep -c '^\[[01]\] map local_rank$' "$OUT")" = 2 ] || fail "$(cat "$OUT")"
check_usage "invalid --ib-hca-map 'numa'" --ib-hca-map numa -n 1 true
end

begin "--interpreter prefixes the command; '' runs it directly"
printf 'echo "script $TNT_RANK $1"\n' >"$TMP/script.sh"
run --interpreter "sh -e" -n 1 "$TMP/script.sh" arg1
expect_rc 0
[ "$(cat "$OUT")" = "[0] script 0 arg1" ] || fail "output: $(cat "$OUT")"
run --interpreter "" -n 1 echo direct
[ "$(cat "$OUT")" = "[0] direct" ] || fail "output: $(cat "$OUT")"
run --python-interpreter "no-such-interp-$$" -n 1 "$TMP/script.sh"
expect_rc 127
expect_err "cannot execute 'no-such-interp-$$'"
end

begin "--dry-run prints every rank's command and environment, starts nothing"
run --dry-run -x FOO=bar --fusion-threshold 8 -n 2 sh -c "touch $TMP/started"
expect_rc 0
[ ! -e "$TMP/started" ] || fail "something was started"
grep -q "^host localhost (this host, no agent): ranks 0 to 1 of 2$" "$OUT" ||
    fail "no host line: $(cat "$OUT")"
grep -qF "  rank 1: FOO=bar TNT_FUSION_THRESHOLD=8k TNT_RANK=1 TNT_SIZE=2 TNT_LOCAL_RANK=1 TNT_LOCAL_SIZE=2 TNT_ROOT_ADDR=" "$OUT" ||
    fail "no rank 1 line: $(cat "$OUT")"
grep -qF "sh -c 'touch $TMP/started'" "$OUT" || fail "no command: $(cat "$OUT")"
printf 'hostA\nhostB # second\n' >"$TMP/hf"
run --dry-run --hostfile "$TMP/hf" --n-per-node 2 --rsh "myrsh -p 1" true
expect_rc 0
grep -q "^host hostB via myrsh -p 1 hostB .*tnt-run --agent: ranks 2 to 3 of 4$" "$OUT" ||
    fail "no hostB line: $(cat "$OUT")"
grep -q "  rank 3: .*TNT_LOCAL_RANK=1 .* true$" "$OUT" || fail "$(cat "$OUT")"
end

begin "hostfile errors"
# Errors in the file, not on the command line: status 2, no usage hint.
check_file() {
    local want=$1
    shift
    run "$@"
    expect_rc 2
    expect_err "$want"
}
printf 'a\n# c\nb\n\n  a  \n' >"$TMP/dup"
check_file "$TMP/dup:5: duplicate host 'a' (first on line 1)" \
    --hostfile "$TMP/dup" true
printf 'a slots=4\n' >"$TMP/slots"
check_file "$TMP/slots:1: unexpected 'slots=4' after host 'a'" \
    --hostfile "$TMP/slots" true
printf '# nothing\n\n' >"$TMP/empty"
check_file "names no host" --hostfile "$TMP/empty" true
check_file "cannot read hostfile '$TMP/none'" --hostfile "$TMP/none" true
printf 'a\nb\n' >"$TMP/two"
check_file "-n 5 is more than the 2 host(s)" --hostfile "$TMP/two" \
    --n-per-node 2 -n 5 true
check_usage "-n 3 is more than --n-per-node 2: without --hostfile" \
    --n-per-node 2 -n 3 true
check_usage "invalid --n-per-node '0'" --hostfile "$TMP/two" \
    --devices-per-node 0 true
end

begin "--n-per-node without --hostfile: that many ranks on this host"
# As mpirun's --npernode on one node (issue 34: refused before, exit 2).
for opt in --n-per-node --npernode --devices-per-node; do
    run $opt 3 --output-on-all-ranks sh -c 'echo "r $TNT_RANK $TNT_SIZE"'
    expect_rc 0
    [ "$(grep -cE '^\[[0-2]\] r [0-2] 3$' "$OUT")" = 3 ] ||
        fail "$opt 3: output: $(cat "$OUT")"
done
# -n keeps its meaning, ranks on this host, up to K.
run --n-per-node 4 -n 2 --output-on-all-ranks sh -c 'echo "r $TNT_SIZE"'
expect_rc 0
[ "$(grep -cE '^\[[01]\] r 2$' "$OUT")" = 2 ] || fail "output: $(cat "$OUT")"
run --log-level INFO --npernode 2 true
expect_rc 0
expect_err "no -n given: starting 2 ranks on this host (--n-per-node)"
end

begin "a job through the agent of host 'localhost'"
printf 'localhost\n' >"$TMP/lh"
run --hostfile "$TMP/lh" --n-per-node 3 --output-on-all-ranks -x V=7 \
    sh -c 'echo "$TNT_RANK $TNT_SIZE $TNT_ROOT_ADDR $V"'
expect_rc 0
[ "$(grep -cE '^\[[0-2]\] [0-2] 3 127\.0\.0\.1:[0-9]+ 7$' "$OUT")" = 3 ] ||
    fail "output: $(cat "$OUT")"
run --hostfile "$TMP/lh" --n-per-node 3 sh -c \
    '[ "$TNT_RANK" = 2 ] && sleep 0.3 && exit 9; exec sleep 30' "$MARK-agent"
expect_rc 9
expect_err "rank 2 on host localhost"
[ "$(pgrep -fc "$MARK-agent")" = 0 ] || fail "ranks left behind"
run --hostfile "$TMP/lh" --rsh "no-such-rsh-$$" true
expect_rc 0
printf 'otherhost\n' >"$TMP/oh"
run --hostfile "$TMP/oh" --rsh "no-such-rsh-$$" true
expect_rc 127
expect_err "cannot execute the --rsh command 'no-such-rsh-$$'"
end

begin "--bind-to core and --pin-to-socket"
run --bind-to core --output-on-all-ranks -n 2 sh -c \
    'grep Cpus_allowed_list /proc/self/status'
expect_rc 0
ncpu=$(nproc)
lists=$(sed 's/.*:\s*//' "$OUT" | sort -u | wc -l)
if [ "$ncpu" -ge 2 ]; then
    [ "$lists" = 2 ] || fail "ranks share a CPU list: $(cat "$OUT")"
fi
grep -qE '^\[0\] Cpus_allowed_list:\s+[0-9]+$' "$OUT" ||
    fail "rank 0 not on one CPU: $(cat "$OUT")"
run --pin-to-socket --pin-memory-to-socket --log-level INFO -n 2 true
expect_rc 0
nodes=$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' \
        2>/dev/null | wc -l)
if [ "$nodes" -le 1 ]; then
    expect_err "this host has one NUMA node"
fi
check_usage "invalid --bind-to 'socket'" --bind-to socket -n 1 true
end

begin "--cleanup stops leftover ranks of a program"
cp "$(command -v sleep)" "$TMP/$MARK-left"
env TNT_JOB_KEY=k TNT_RANK=4 "$TMP/$MARK-left" 60 &
BG+=($!)
disown
"$TMP/$MARK-left" 60 &
BG+=($!)
disown
sleep 0.3
run --cleanup "$MARK-left"
expect_rc 0
grep -q "found 1 rank(s) of '$MARK-left': pid [0-9]* (rank 4); sending SIGTERM" "$OUT" ||
    fail "output: $(cat "$OUT" "$ERR")"
kill -0 "${BG[-1]}" 2>/dev/null ||
    fail "a process without TNT_JOB_KEY was stopped"
env TNT_JOB_KEY=k "$TMP/$MARK-left" 60 &
BG+=($!)
disown
sleep 0.3
run --cleanup --force "$MARK-left"
grep -q "sending SIGKILL" "$OUT" || fail "output: $(cat "$OUT")"
run --cleanup "$MARK-left"
grep -q "no rank of '$MARK-left' found" "$OUT" || fail "$(cat "$OUT")"
check_usage "--force goes with --cleanup" --force -n 1 true
kill -KILL "${BG[@]}" 2>/dev/null
wait "${BG[@]}" 2>/dev/null
BG=()
end

# Every example command line of Tarantella's documentation (quick_start,
# advanced_topics, tutorials), with tnt-run in place of tarantella and
# nothing else changed but the placeholders: a hostfile naming this host
# (started without ssh), /usr/bin/python3 for /path/to/python. model.py
# records, per rank, its size, arguments and variables.
begin "Tarantella's documented command lines, unchanged"
mkdir -p "$TMP/tt/models" && cd "$TMP/tt" || exit 1
echo localhost >hostfile
cat >model.py <<'PY'
import os, sys
e = os.environ
with open("seen.%s" % e["TNT_RANK"], "w") as f:
    print(e["TNT_SIZE"], " ".join(sys.argv[1:]), e.get("DATASET"),
          e.get("TF_CPP_MIN_LOG_LEVEL"), e.get("TNT_FUSION_THRESHOLD"),
          e.get("TNT_LOG_LEVEL"), e.get("TNT_TENSORBOARD_ON_ALL_DEVICES"),
          file=f)
print("rank", e["TNT_RANK"], "ran", flush=True)
PY
cp model.py models/train.py
tarantella() { # expected-ranks expected-line-of-rank-0 args...
    local n=$1 want=$2
    shift 2
    rm -f seen.*
    run "$@"
    if [ "$rc" != 0 ]; then
        fail "tnt-run $*: exit $rc: $(head -c 600 "$ERR")"
        return
    fi
    local ran
    ran=$(find . -maxdepth 1 -name 'seen.*' | wc -l)
    [ "$ran" = "$n" ] || fail "tnt-run $*: $ran ranks ran, expected $n"
    [ "$(cat seen.0 2>/dev/null)" = "$want" ] ||
        fail "tnt-run $*: rank 0 saw '$(cat seen.0 2>/dev/null)', expected '$want'"
}
N="None None None None None"
tarantella 1 "1  $N" -- model.py
tarantella 1 "1  $N" --no-gpu -- model.py
tarantella 1 "1 --batch_size=64 --learning_rate=0.01 $N" \
    --no-gpu -- model.py --batch_size=64 --learning_rate=0.01
tarantella 4 "4 --batch_size=64 $N" -n 4 -- model.py --batch_size=64
tarantella 4 "4 --batch_size=64 $N" -n 4 --no-gpu -- model.py --batch_size=64
tarantella 1 "1  $N" --hostfile hostfile -- model.py
tarantella 4 "4 --batch_size=64 $N" \
    --hostfile hostfile --n-per-node 4 --no-gpu -- model.py --batch_size=64
tarantella 1 "1  None None None INFO None" \
    --hostfile hostfile --log-level INFO -- model.py
tarantella 1 "1  /scratch/data 1 None None None" \
    --hostfile hostfile -x DATASET=/scratch/data TF_CPP_MIN_LOG_LEVEL=1 -- model.py
tarantella 1 "1  None None 512k None None" \
    --hostfile hostfile --fusion-threshold=512 -- model.py
tarantella 2 "2  $N" --hostfile hostfile --npernode 2 --pin-to-socket -- model.py
tarantella 2 "2  $N" --hostfile hostfile --npernode 2 \
    --python-interpreter=/usr/bin/python3 -- model.py
tarantella 4 "4 --data_dir=/d --model_arch=resnet50 --strategy=data --batch_size=512 --train_epochs=90 --epochs_between_evals=10 $N" \
    --hostfile ./hostfile --devices-per-node 4 \
    -- models/train.py --data_dir=/d \
                       --model_arch=resnet50 \
                       --strategy=data \
                       --batch_size=512 \
                       --train_epochs=90 \
                       --epochs_between_evals=10
TNT_TENSORBOARD_ON_ALL_DEVICES=true \
    tarantella 1 "1  None None None None true" -- model.py
tarantella 2 "2  $N" -n 2 --output-on-all-devices --log-on-all-devices \
    -- model.py
[ "$(grep -c '^\[[01]\] rank [01] ran$' "$OUT")" = 2 ] ||
    fail "--output-on-all-devices: stdout $(cat "$OUT")"
# Tarantella's valgrind example (its `python` is python3 on Debian; a dry
# run: valgrind would take long): the interpreter's words, then model.py.
run -n 2 --python-interpreter="valgrind  --leak-check=yes \
                                        --track-origins=yes --tool=memcheck \
                                        python" \
           --dry-run -- model.py
expect_rc 0
grep -q "rank 1: .* valgrind --leak-check=yes --track-origins=yes --tool=memcheck python model.py$" "$OUT" ||
    fail "valgrind example: $(cat "$OUT")"
run --hostfile hostfile --cleanup -- model.py
expect_rc 0
grep -q "no rank of 'model.py' found" "$OUT" || fail "cleanup: $(cat "$OUT")"
# An executable .py given as a path keeps its #! line.
printf '#!/bin/sh\necho "own interpreter $1"\n' >tool.py
chmod +x tool.py
run -n 1 ./tool.py arg
expect_rc 0
[ "$(cat "$OUT")" = "[0] own interpreter arg" ] || fail "tool.py: $(cat "$OUT" "$ERR")"
# --no-gpu is said at INFO, and so is the python3 default.
run --log-level INFO --no-gpu -- model.py
expect_err "tnt-run: info: --no-gpu: libtntcomm's ranks run on CPUs"
expect_err "tnt-run: info: model.py runs with python3"
cd - >/dev/null || exit 1
end

begin "--version"
run --version
expect_rc 0
grep -q "^tnt-run (libtntcomm) [0-9]*\.[0-9]*\.[0-9]*$" "$OUT" ||
    fail "version: $(cat "$OUT")"
end

begin "--help"
run --help
expect_rc 0
grep -q "^Usage: tnt-run \[OPTIONS\]" "$OUT" || fail "no usage line: $(cat "$OUT")"
grep -qi "hostfile" "$OUT" || fail "help does not mention later options"
end

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
