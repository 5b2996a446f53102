#!/bin/bash
# pip install --no-build-isolation . into a fresh Python environment, as a
# user does (docs/install.md): a new venv gets the pinned torch, numpy,
# meson-python, meson and ninja of python/requirements.txt (wheels on
# this machine's disk), then the project; then, outside the source tree,
# `import tntcomm.torch` finds the bundled libtntcomm and the backend,
# tnt-run lies in the environment's bin/, tntcomm.keras and tarantella
# (the Python sources; the command) are installed, and 2 ranks started by that
# tnt-run reduce through tntcomm (numpy) and through
# init_process_group("tnt"), every element checked.
#
# Usage: check_pip.sh SOURCE-DIR [PYTHON]   (PYTHON: the interpreter to
# make the venv from; default python3.11). Exits 77 (skipped) without a
# Python 3.11 with venv, or without patchelf.
set -u
SRC=${1:?usage: check_pip.sh SOURCE-DIR [PYTHON]}
BASE=${2:-python3.11}
skip() { echo "check_pip.sh: SKIP: $*"; exit 77; }
command -v patchelf >/dev/null || skip "no patchelf (apt-get install patchelf)"
"$BASE" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' \
    2>/dev/null || skip "$BASE is not a Python 3.11 with venv"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/check_pip.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
failed=0
check() { # name, command...
    local name=$1
    shift
    if "$@" >"$TMP/last" 2>&1; then
        echo "ok   [$name] $(tail -n 1 "$TMP/last")"
    else
        echo "FAIL [$name]: $(tail -c 3000 "$TMP/last")" >&2
        failed=1
    fi
}
V=$TMP/env
check "fresh venv" "$BASE" -m venv "$V"
# Only what the build and these checks need, pinned as the project pins.
grep -E '^(torch|numpy|meson|meson-python|ninja)==' \
    "$SRC/python/requirements.txt" >"$TMP/req.txt"
check "pinned torch, numpy, meson-python into it" \
    "$V/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$TMP/req.txt"
check "pip install --no-build-isolation ." \
    "$V/bin/python" -m pip install -q --disable-pip-version-check \
    --no-build-isolation --no-deps -Cbuild-dir="$TMP/build" "$SRC"
[ "$failed" = 0 ] || exit 1
cd "$TMP" || exit 1
unset PYTHONPATH TNT_LIBRARY
check "tnt-run in the environment's bin/" test -x "$V/bin/tnt-run"
check "import tntcomm.torch: the installed package, the backend built" \
    "$V/bin/python" -c "
import tntcomm, tntcomm.torch
from tntcomm import _torch_backend
assert tntcomm.__file__.startswith('$V/'), tntcomm.__file__
assert _torch_backend.available(), _torch_backend.MISSING
print(tntcomm.__file__)"
# tntcomm.keras and tarantella go into the wheel too (their op library
# only where TensorFlow is installed, which this environment is not)
check "tntcomm.keras, tarantella and the tarantella command installed" \
    "$V/bin/python" -c "
import importlib.util as u, os
for name in ('tntcomm.keras', 'tarantella'):
    s = u.find_spec(name)
    assert s and s.origin.startswith('$V/'), (name, s)
for f in ('_model.py', '_data.py', 'models.py', 'callbacks.py', 'elastic.py'):
    assert os.path.exists(os.path.join(os.path.dirname(
        u.find_spec('tntcomm.keras').origin), f)), f
assert os.access('$V/bin/tarantella', os.X_OK)
print(u.find_spec('tarantella').origin)"
check "2 ranks under its tnt-run: tntcomm and init_process_group(\"tnt\")" \
    "$V/bin/tnt-run" -n 2 --output-on-all-ranks "$V/bin/python" -c "
import numpy as np, torch, torch.distributed as dist
import tntcomm as tnt, tntcomm.torch
r, n = tnt.get_rank(), tnt.get_size()
x = tnt.allreduce(np.arange(1000, dtype=np.float64) + r)
assert (x == np.arange(1000) * n + n * (n - 1) / 2).all(), x[:4]
dist.init_process_group('tnt')
t = torch.arange(77, dtype=torch.float32) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert torch.equal(t, torch.arange(77, dtype=torch.float32) * 3), t[:4]
dist.destroy_process_group()
print('rank', r, 'ok')"
cp "$TMP/last" "$TMP/ranks"
check "both ranks checked every element" \
    sh -c "[ \$(grep -c 'rank [01] ok\$' '$TMP/ranks') = 2 ]"
exit $failed
