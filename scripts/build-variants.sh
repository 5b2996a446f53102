#!/usr/bin/env bash
# Builds libtntcomm the ways users and packagers do, each with -Werror so
# that a new warning fails CI before it fails someone's build:
#   build-release  meson's release buildtype (-O3), installed into
#                  build-release/prefix and checked as a user would use it
#   build-clang    CC=clang (Debian's clang)
#   build-dpkg     Debian's packaging flags (dpkg-buildflags)
# Compile only, without the test suite (-Dtests=disabled). A variant whose
# compiler or tool is missing is skipped with a note. Run by
# scripts/test.sh; `bash scripts/build-variants.sh NAME...` builds some.
set -euo pipefail
cd "$(dirname "$0")/.."
variants=${*:-release clang dpkg}
# The frontends for Debian's interpreter, the one a system install serves
# and whose layout check_install.sh checks (the normal build takes .venv);
# Debian's torch is 1.13, so the variants leave the torch backend out
# with one line (the normal build compiles it).
common=(-Dwerror=true -Dtests=disabled -Dpython=/usr/bin/python3)

setup() { # dir, meson setup arguments...
    local dir=$1
    shift
    [ -f "$dir/build.ninja" ] || meson setup "$dir" "${common[@]}" "$@" >/dev/null
    echo "== build variant $dir"
    ninja -C "$dir" >/dev/null
}

for v in $variants; do
    case $v in
    release)
        setup build-release --buildtype=release --prefix="$PWD/build-release/prefix"
        bash tests/install/check_install.sh build-release none prefix
        ;;
    clang)
        if command -v clang >/dev/null; then
            CC=clang CXX=clang++ setup build-clang
        else
            echo "== build variant build-clang: skipped, no clang (apt-get install clang)"
        fi
        ;;
    dpkg)
        if command -v dpkg-buildflags >/dev/null; then
            CFLAGS=$(dpkg-buildflags --get CFLAGS) \
            CXXFLAGS=$(dpkg-buildflags --get CXXFLAGS) \
            CPPFLAGS=$(dpkg-buildflags --get CPPFLAGS) \
            LDFLAGS=$(dpkg-buildflags --get LDFLAGS) \
                setup build-dpkg --buildtype=plain
        else
            echo "== build variant build-dpkg: skipped, no dpkg-buildflags"
        fi
        ;;
    *)
        echo "build-variants.sh: unknown variant '$v' (release, clang, dpkg)" >&2
        exit 2
        ;;
    esac
done
