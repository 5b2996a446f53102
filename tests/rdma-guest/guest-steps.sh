#!/bin/bash
# Runs inside the guest: each line of the command list ($1; blank lines
# and lines starting with # are skipped) as a bash command from the
# project's root, each under its own deadline (TNT_RDMA_STEP_TIMEOUT,
# default 600 s). Prints the output, one "--- ok|FAIL (rc) took s" line per
# step and a summary; exits 0 only when every step exited 0 (a skip, 77,
# counts as a failure here: the guest has the devices).
list=$1
step_timeout=${TNT_RDMA_STEP_TIMEOUT:-600}
t0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
n=0 bad=0 failed=""
while IFS= read -r cmd || [ -n "$cmd" ]; do
    case $cmd in ''|'#'*) continue ;; esac
    n=$((n + 1))
    echo "=== [$(since "$t0") s] step $n: $cmd"
    s=$(date +%s.%N)
    timeout -k 5 "$step_timeout" bash -c "$cmd" < /dev/null
    rc=$?
    if [ $rc = 0 ]; then
        echo "--- ok: step $n took $(since "$s") s"
    else
        bad=$((bad + 1)); failed="$failed $n"
        [ $rc = 124 ] && echo "--- FAIL: step $n ran past ${step_timeout} s"
        echo "--- FAIL (exit $rc): step $n took $(since "$s") s: $cmd"
    fi
done < "$list"
echo "=== rdma-guest: $((n - bad)) of $n steps passed in $(since "$t0") s${failed:+; failed:$failed}"
[ $bad = 0 ] && [ $n -gt 0 ]
