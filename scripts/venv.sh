#!/usr/bin/env bash
# Makes (or brings up to date) the project's Python environment .venv at
# the project root: a Python 3.11 interpreter (the pinned wheels are built
# for 3.11) with the packages of python/requirements.txt, and the project
# itself (pip install .). Prints the interpreter's path last. Re-running
# it installs nothing that is there.
#   TNT_VENV=DIR   another folder than .venv
#   TNT_PYTHON=EXE the interpreter to make it from (default: python3.11,
#                  else python3 if that is 3.11)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${TNT_VENV:-.venv}
req=python/requirements.txt

pick_python() {
    local c
    for c in ${TNT_PYTHON:-} python3.11 python3 /usr/bin/python3.11; do
        [ -n "$c" ] || continue
        command -v "$c" >/dev/null 2>&1 || continue
        if "$c" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            command -v "$c"; return 0
        fi
    done
    return 1
}

if [ ! -x "$venv/bin/python" ]; then
    py=$(pick_python) || {
        echo "venv: no Python 3.11 with the venv module found (the pinned wheels are for 3.11);" \
             "set TNT_PYTHON=/path/to/python3.11" >&2
        exit 2
    }
    echo "venv: making $venv from $py"
    "$py" -m venv "$venv"
fi
# The stamp records which requirements were installed, so a re-run is quick.
stamp="$venv/.tnt-requirements"
if ! cmp -s "$req" "$stamp" 2>/dev/null; then
    echo "venv: installing $req into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    cp "$req" "$stamp"
fi
# The project itself (pip install --no-build-isolation .: libtntcomm,
# tntcomm with tntcomm.torch and the backend built against .venv's torch,
# tnt-run on .venv/bin), rebuilt in build-venv/ when the sources changed
# since the last install (the stamp: git's view of the tracked files and
# their changes). TNT_VENV_PROJECT=0 leaves it out.
if [ "${TNT_VENV_PROJECT:-1}" != 0 ]; then
    pstamp="$venv/.tnt-project"
    state=$( { git ls-files -s; git diff HEAD; } 2>/dev/null | sha1sum)
    if ! cmp -s <(echo "$state") "$pstamp" 2>/dev/null ||
        ! "$venv/bin/python" -c "import tntcomm.torch" 2>/dev/null; then
        command -v patchelf >/dev/null || {
            echo "venv: meson-python needs patchelf to install the project" \
                 "(apt-get install patchelf; scripts/setup.sh does)" >&2
            exit 2
        }
        echo "venv: installing the project into $venv (pip install --no-build-isolation .)"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check \
            --no-build-isolation --no-deps -Cbuild-dir=build-venv .
        echo "$state" >"$pstamp"
    fi
fi
echo "$(pwd)/$venv/bin/python"
