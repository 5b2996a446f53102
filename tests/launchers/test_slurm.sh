#!/bin/bash
# A real single-node Slurm (Debian's slurm-wlm + munge), configured and
# started in a temporary directory (munged, slurmctld, slurmd on free
# ports, nothing outside that directory touched), then `srun -n 4` of
# tnt-bench (allreduce, results checked): once through PMIx
# (--mpi=pmix, when the library has PMIx) and once without it (--mpi=none:
# SLURM_* variables and the derived root address). The daemons are stopped
# by the EXIT trap, also on failure. Skips (77) with the reason when the
# packages are missing, when not root, or when the daemons cannot start.
# Usage: test_slurm.sh TNT-BENCH pmix|nopmix
set -u
. "$(dirname "$0")/lib.sh"
BENCH=${1:?usage: test_slurm.sh TNT-BENCH pmix|nopmix}
PMIX=${2:?usage: test_slurm.sh TNT-BENCH pmix|nopmix}

for p in munged slurmctld slurmd srun sinfo; do
    command -v $p >/dev/null || PATH=$PATH:/usr/sbin
    command -v $p >/dev/null || skip "$p not found (install slurm-wlm and munge)"
done
[ "$(id -u)" -eq 0 ] || skip "starting slurmd needs root (it runs tasks as their user)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_slurm.XXXXXX") || exit 1
chmod 755 "$TMP"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    for f in "$TMP"/slurmd.pid "$TMP"/slurmctld.pid "$TMP"/munged.pid; do
        [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
    done
    sleep 1
    for f in "$TMP"/slurmd.pid "$TMP"/slurmctld.pid "$TMP"/munged.pid; do
        [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'
}

# Prints the last lines of a daemon's log and skips: the environment, not
# the library, is what failed.
cannot_start() {
    local what=$1 log=$2
    echo "--- $log"
    tail -n 15 "$log" 2>/dev/null
    skip "$what could not start in this environment (log above)"
}

# munge, with its own key, socket and files.
mkdir -p "$TMP/munge" && chmod 700 "$TMP/munge"
head -c 1024 /dev/urandom >"$TMP/munge/munge.key"
chmod 400 "$TMP/munge/munge.key"
SOCK=$TMP/munge/munge.socket
munged --force --key-file "$TMP/munge/munge.key" --socket "$SOCK" \
    --pid-file "$TMP/munged.pid" --log-file "$TMP/munged.log" \
    --seed-file "$TMP/munge/seed" >"$TMP/munged.out" 2>&1 ||
    cannot_start munged "$TMP/munged.log"

HOST=$(hostname -s)
CPUS=$(nproc)
mkdir -p "$TMP/state" "$TMP/spool"
cat >"$TMP/slurm.conf" <<CONF
ClusterName=tnttest
SlurmctldHost=$HOST
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$HOST CPUs=$CPUS State=UNKNOWN
PartitionName=test Nodes=$HOST Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$TMP/slurm.conf
# This script may itself run inside a Slurm job: its variables would
# describe that job, not ours.
for v in $(env | grep -o '^SLURM_[A-Z_]*' | grep -v '^SLURM_CONF$'); do unset "$v"; done

slurmctld -i -f "$SLURM_CONF" >"$TMP/slurmctld.out" 2>&1 ||
    cannot_start slurmctld "$TMP/slurmctld.log"
slurmd -f "$SLURM_CONF" >"$TMP/slurmd.out" 2>&1 ||
    cannot_start slurmd "$TMP/slurmd.log"

# Wait (bounded) for the node to be usable.
ok=0
for _ in $(seq 60); do
    state=$(sinfo -h -N -o '%t' 2>/dev/null | head -n1)
    case $state in
        idle*|mix*|alloc*) ok=1; break ;;
    esac
    sleep 0.5
done
if [ $ok != 1 ]; then
    sinfo -N -l 2>&1
    echo "--- slurmctld.log"; tail -n 15 "$TMP/slurmctld.log"
    cannot_start "the Slurm node (state '${state:-none}')" "$TMP/slurmd.log"
fi
echo "Slurm up: node $HOST, $CPUS CPUs, state $state"

run() { # LABEL EXPECTED-LAUNCHER SRUN-ARGS...
    local label=$1 want=$2
    shift 2
    echo "== srun -n 4 $* ($label)"
    local t0=$SECONDS
    TNT_LOG_LEVEL=INFO timeout -k 5 100 srun -n 4 --overcommit -t 2 "$@" \
        "$BENCH" "${BENCH_ARGS[@]}" >"$TMP/out" 2>&1
    local rc=$?
    cat "$TMP/out"
    [ $rc -eq 0 ] || fail "srun ($label) exited with $rc"
    check_bench "$TMP/out" "$want" 4
    echo "($label took $((SECONDS - t0)) s)"
}

if [ "$PMIX" = pmix ]; then
    if srun --mpi=list 2>&1 | grep -q pmix; then
        run "PMIx" pmix --mpi=pmix
    else
        echo "srun --mpi=list has no pmix plugin; PMIx run not possible"
        srun --mpi=list 2>&1
        fail "Slurm lacks its PMIx plugin (mpi_pmix)"
    fi
fi
run "no PMIx" slurm --mpi=none
