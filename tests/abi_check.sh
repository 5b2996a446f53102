#!/usr/bin/env bash
# ABI stability: compares the built libtntcomm.so.0 with the baseline in
# abi/ using abidiff (Debian: abigail-tools). New functions are fine
# (--no-added-syms); any change to what existed fails: a removed or
# retyped function, a struct that changed size or layout.
#
# Appending a field to a size/version-headed struct is compatible by our
# design, but abidiff reports it as a change too. When an ABI change is
# intended, say so in the commit, bump TNT_VERSION_MINOR (or the SONAME if
# it is incompatible), and regenerate the baseline:
#   abidw --no-corpus-path --headers-dir include/tnt \
#         build/lib/libtntcomm.so.0 > abi/libtntcomm.so.0.abi
set -uo pipefail
src=$1 build=$2
lib=$(readlink -f "$build/lib/libtntcomm.so.0")
if [ ! -f "$lib" ]; then
    echo "0 passed, 1 failed (no $build/lib/libtntcomm.so.0)"
    exit 1
fi
abidiff --no-added-syms --headers-dir2 "$src/include/tnt" \
    "$src/abi/libtntcomm.so.0.abi" "$lib"
rc=$?
# abidiff's exit status is a bit field: 1 error, 2 usage error,
# 4 ABI changed, 8 incompatible change.
if [ $((rc & 3)) -ne 0 ]; then
    echo "0 passed, 1 failed (abidiff could not compare: status $rc)"
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    echo "0 passed, 1 failed (the ABI of libtntcomm.so.0 changed; see above)"
    exit 1
fi
echo "1 passed, 0 failed"
