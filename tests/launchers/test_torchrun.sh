#!/bin/bash
# torchrun (PYTHON -m torch.distributed.run: the frontends' interpreter,
# .venv's torch 2.x, else Debian's python3)
# starting 4 workers that exec tnt-bench (allreduce, results checked): the
# library must find torchrun's env:// variables and rendezvous at
# MASTER_ADDR on MASTER_PORT+1.
# Usage: test_torchrun.sh TNT-BENCH [PYTHON]
set -u
. "$(dirname "$0")/lib.sh"
BENCH=${1:?usage: test_torchrun.sh TNT-BENCH [PYTHON]}
PY=${2:-/usr/bin/python3}

[ -x "$PY" ] || skip "$PY not found"
"$PY" -c 'import torch.distributed.run' 2>/dev/null ||
    skip "$PY cannot import torch.distributed.run (bash scripts/venv.sh)"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_torchrun.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# Debian 12's torch 1.13 on Python 3.11 cannot parse --redirects 0 (the
# default: its Std.from_str misses the zero flag and torchrun crashes), so
# stdout is redirected and teed (1) to the console, with a "[defaultN]:"
# prefix that is stripped before checking.
# A free port for torchrun's store; the library takes the next one. Both
# are picked below the kernel's ephemeral range (as torchrun's default
# 29500 is): the store's own client connections take ephemeral ports, and
# one of them could otherwise sit on PORT+1.
PORT=$("$PY" - <<'PYEOF'
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    try:
        socks = []
        for q in (p, p + 1):
            s = socket.socket()
            s.bind(("127.0.0.1", q))
            socks.append(s)
        print(p)
        break
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
PYEOF
)

echo "== torchrun --nproc_per_node 4 (store on port $PORT)"
t0=$SECONDS
TNT_LOG_LEVEL=INFO OMP_NUM_THREADS=1 timeout -k 5 100 "$PY" -m torch.distributed.run \
    --nnodes 1 --nproc_per_node 4 --master_addr 127.0.0.1 --master_port "$PORT" \
    --redirects 1 --tee 1 --log_dir "$TMP/logs" \
    "$(dirname "$0")/exec_rank.py" "$BENCH" "${BENCH_ARGS[@]}" >"$TMP/raw" 2>&1
rc=$?
sed 's/^\[default[0-9]*\]://' "$TMP/raw" >"$TMP/out"
cat "$TMP/out"
[ $rc -eq 0 ] || fail "torchrun exited with $rc"
grep -q "rendezvous TCP at 127.0.0.1:$((PORT + 1))" "$TMP/out" ||
    fail "rank 0 did not rendezvous on MASTER_PORT+1 ($((PORT + 1)))"
check_bench "$TMP/out" torchrun 4
echo "(torchrun took $((SECONDS - t0)) s)"
