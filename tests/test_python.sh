#!/bin/bash
# Tests of the Python binding tntcomm (plugins/python): the rank program
# tests/python/check_tntcomm.py alone (a world of one) and under tnt-run
# on 2, 3, 4 and 5 ranks; a clear ImportError when the library cannot be
# loaded; and the package that `meson install` puts into a prefix.
# Usage: test_python.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR. Exits 77
# (skipped) when PYTHON lacks numpy (package python3-numpy).
set -u
usage="usage: test_python.sh PYTHON TNT-RUN BUILD-DIR SOURCE-DIR"
PY=${1:?$usage}
RUN=${2:?$usage}
BUILD=${3:?$usage}
SRC=${4:?$usage}
if ! "$PY" -c "import numpy" 2>/dev/null; then
    echo "test_python.sh: SKIP: $PY cannot import numpy" \
         "(apt-get install python3-numpy)"
    exit 77
fi
LIMIT=$((120 * ${TNT_TEST_TIMEOUT_MULT:-1}))
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_python.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
CHECK=$SRC/tests/python/check_tntcomm.py
unset TNT_LIBRARY
export PYTHONPATH=$BUILD/plugins/python
passed=0
failed=0

result() { # name, status, log
    if [ "$2" = 0 ]; then
        echo "ok   [$1] $(tail -n 1 "$3")"
        passed=$((passed + 1))
    else
        echo "FAIL [$1] (exit $2): $(tail -c 1500 "$3")" >&2
        failed=$((failed + 1))
    fi
}

env -u TNT_RANK -u TNT_SIZE -u TNT_ROOT_ADDR timeout -k 5 "$LIMIT" \
    "$PY" "$CHECK" >"$TMP/log" 2>&1
result "one process, no launcher" $? "$TMP/log"

for n in 2 3 4 5; do
    timeout -k 5 "$LIMIT" "$RUN" -n "$n" "$PY" "$CHECK" >"$TMP/log" 2>&1
    result "$n ranks" $? "$TMP/log"
done

# A clean exit is no failure (issue 26): a new user's one-liner on 3
# ranks creates the communicator and frees it at exit with no collective
# between; no rank may print an ERROR or WARNING (it used to print "lost
# rank 2 ... Connection refused" over shared memory).
timeout -k 5 "$LIMIT" "$RUN" -n 3 "$PY" -c \
    'import tntcomm; print(tntcomm.get_rank())' >"$TMP/log" 2>&1
rc=$?
{ [ $rc = 0 ] && ! grep -E "ERROR|WARNING" "$TMP/log"; } >/dev/null
result "3 ranks: get_rank and exit, no error" $? "$TMP/log"

# tntcomm.Comm: split, dup, free twice; a rank killed and the survivors
# shrinking (tnt-run --elastic: exit 0 once they finish).
for n in 3 4; do
    timeout -k 5 "$LIMIT" "$RUN" -n "$n" --elastic "$PY" \
        "$SRC/tests/python/check_comm.py" >"$TMP/log" 2>&1
    result "Comm at $n ranks" $? "$TMP/log"
done

# A library that cannot be loaded is an ImportError naming the path.
TNT_LIBRARY=$TMP/nowhere.so "$PY" -c "import tntcomm" >"$TMP/log" 2>&1
rc=$?
{ [ $rc != 0 ] && grep -q "ImportError: tntcomm: cannot load libtntcomm" \
    "$TMP/log" && grep -q "nowhere.so" "$TMP/log"; }
result "missing library: ImportError" $? "$TMP/log"

# The installed package: _config.py names the installed library, and the
# package works from the install tree (TNT_LIBRARY points into DESTDIR).
dest=$TMP/dest
meson install -C "$BUILD" --destdir "$dest" --no-rebuild --quiet \
    >"$TMP/log" 2>&1
init=$(find "$dest" -path '*/tntcomm/__init__.py' | head -n 1)
lib=$(find "$dest" -name 'libtntcomm.so.0' | head -n 1)
ok=1
if [ -z "$init" ] || [ -z "$lib" ]; then
    echo "install put no tntcomm/__init__.py or libtntcomm.so.0 under" \
         "$dest" >>"$TMP/log"
    ok=0
else
    pkg=$(dirname "$init")
    for f in _lib.py _fusion.py _config.py _alltoallv.py _p2p.py \
             torch.py; do
        [ -f "$pkg/$f" ] || { echo "installed package lacks $f"; ok=0; }
    done >>"$TMP/log"
    grep -qF "LIBRARY = \"${lib#"$dest"}\"" "$pkg/_config.py" || {
        echo "_config.py does not name ${lib#"$dest"}:"
        cat "$pkg/_config.py"
        ok=0
    } >>"$TMP/log"
    PYTHONPATH=$(dirname "$pkg") TNT_LIBRARY=$lib timeout -k 5 "$LIMIT" \
        "$RUN" -n 2 "$PY" -c "
import numpy as np, tntcomm as tnt
assert tnt.__file__.startswith('$dest'), tnt.__file__
x = tnt.allreduce(np.arange(5, dtype=np.float16))
assert (x == 2 * np.arange(5, dtype=np.float16)).all(), x
print('installed package works:', tnt.__file__)" >>"$TMP/log" 2>&1 || ok=0
fi
[ $ok = 1 ]
result "meson install" $? "$TMP/log"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
