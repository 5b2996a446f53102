#!/usr/bin/env bash
# Compiler flags from pkg-config are split into words on purpose.
# shellcheck disable=SC2086
# Installs a build and checks what a user gets (docs/install.md): every
# public header compiles alone as C and as C++; `pkg-config --cflags
# tntcomm` names only the install's include directory; a small program
# outside the tree builds with `pkg-config --cflags --libs tntcomm`, sees
# the version macros agree with the library, and runs an allreduce alone
# and on 2 ranks under the installed tnt-run; the tools print the
# project's version; the Python package lands where the interpreter looks
# for the prefix and runs a 2-rank allreduce from the installed tree.
#
# Usage: check_install.sh BUILD [SANITIZE [MODE]]
#   MODE destdir (default): `meson install --destdir` into a scratch
#        directory, as packagers do (the meson test "install").
#   MODE prefix: `meson install` into the build's configured prefix, which
#        must be a scratch directory (scripts/build-variants.sh), using
#        only docs/install.md's variables.
set -euo pipefail
build=$1
# A sanitized library needs a sanitized program (the runtime must load
# first), so the user program is built with the library's b_sanitize.
sanitize=${2:-none}
mode=${3:-destdir}
san_flags=""
[ "$sanitize" != none ] && san_flags="-fsanitize=$sanitize"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # name, command...; the output stays in $tmp/last
    local name=$1 rc=0; shift
    "$@" >"$tmp/log" 2>&1 || rc=$?
    cp "$tmp/log" "$tmp/last"
    if [ $rc = 0 ]; then pass=$((pass + 1)); echo "ok: $name"
    else fail=$((fail + 1)); echo "FAILED: $name"; cat "$tmp/log"; fi
}

# The build's own settings, as meson reports them.
read -r version prefix libdir bindir includedir < <(
    { meson introspect --projectinfo "$build"; echo;
      meson introspect --buildoptions "$build"; } | python3 -c '
import json, sys
info, opts = [json.loads(x) for x in sys.stdin.read().split("\n", 1)]
o = {x["name"]: x["value"] for x in opts}
print(info["version"], o["prefix"], o["libdir"], o["bindir"], o["includedir"])')

case $mode in
destdir)
    root=$tmp/dest
    meson install -C "$build" --destdir "$root" --no-rebuild --quiet
    export PKG_CONFIG_SYSROOT_DIR=$root
    ;;
prefix)
    root=""
    case $prefix in
    /usr|/usr/local) echo "check_install.sh: prefix mode installs for real;" \
                          "configure a scratch --prefix, not $prefix" >&2
                     exit 2 ;;
    esac
    rm -rf "$prefix"
    meson install -C "$build" --no-rebuild --quiet
    ;;
*)
    echo "check_install.sh: unknown mode '$mode' (destdir or prefix)" >&2
    exit 2
    ;;
esac
# docs/install.md's lines, with the multiarch libdir.
export PKG_CONFIG_PATH=$root$prefix/$libdir/pkgconfig
lib=$root$prefix/$libdir
bin=$root$prefix/$bindir
unset TNT_RANK TNT_SIZE TNT_ROOT_ADDR TNT_LIBRARY
cflags=$(pkg-config --cflags tntcomm)
libs=$(pkg-config --libs tntcomm)

check "pkg-config --cflags names only the install's include dir ($cflags)" \
    test "${cflags% }" = "-I$root$prefix/$includedir"
check "pkg-config --libs: -L libdir -ltntcomm ($libs)" \
    test "${libs% }" = "-L$lib -ltntcomm"

for h in $(cd "$root$prefix/$includedir" && find tnt -name '*.h'); do
    echo "#include <$h>" > "$tmp/h.c"
    check "$h alone in C" cc -std=c11 -Wall -Wextra -Werror $cflags -fsyntax-only "$tmp/h.c"
    cp "$tmp/h.c" "$tmp/h.cc"
    check "$h alone in C++" c++ -std=c++11 -Wall -Wextra -Werror $cflags -fsyntax-only "$tmp/h.cc"
done

cat > "$tmp/user.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <tnt/tnt.h>
#if TNT_VERSION < TNT_VERSION_CODE(0, 1, 0)
#error "TNT_VERSION_CODE orders versions wrongly"
#endif
int main(void)
{
    tnt_comm_t comm;
    float x[3] = {1, 2, 3}, y[3] = {0};
    int size, maj, min, pat;
    char v[32];
    tnt_get_version(&maj, &min, &pat);
    snprintf(v, sizeof v, "%d.%d.%d", maj, min, pat);
    if (maj != TNT_VERSION_MAJOR || min != TNT_VERSION_MINOR ||
        pat != TNT_VERSION_PATCH || strcmp(v, TNT_VERSION_STRING) != 0 ||
        TNT_VERSION != TNT_VERSION_CODE(maj, min, pat)) {
        printf("header %s, library %s\n", TNT_VERSION_STRING, v);
        return 4;
    }
    if (tnt_comm_init_from_env(&comm) != TNT_SUCCESS)
        return 1;
    if (tnt_allreduce(comm, x, y, 3, TNT_F32, TNT_SUM) != TNT_SUCCESS)
        return 2;
    tnt_comm_size(comm, &size);
    tnt_comm_free(comm);
    printf("version %s size %d y %g %g %g\n", v, size, y[0], y[1], y[2]);
    for (int i = 0; i < 3; i++)
        if (y[i] != (float)size * x[i])
            return 3;
    return 0;
}
C
check "program builds with pkg-config" cc -std=c11 -Wall -Werror $san_flags $cflags "$tmp/user.c" -o "$tmp/user" $libs
check "program runs against libtntcomm.so.0" env LD_LIBRARY_PATH="$lib" "$tmp/user"
check "program prints the project's version $version" grep -q "^version $version size 1 " "$tmp/last"
check "program runs on 2 ranks under the installed tnt-run" env LD_LIBRARY_PATH="$lib" "$bin/tnt-run" -n 2 --output-on-all-ranks "$tmp/user"
check "2 ranks: every element summed" sh -c "[ \$(grep -c '^\[[01]\] version $version size 2 y 2 4 6\$' '$tmp/last') = 2 ]"
check "SONAME is libtntcomm.so.0" sh -c "objdump -p '$lib/libtntcomm.so.0' | grep -q 'SONAME *libtntcomm.so.0'"
check "only tnt_ symbols exported" sh -c "! nm -D --defined-only '$lib/libtntcomm.so.0' | awk '\$2 ~ /[TDBR]/ {print \$3}' | grep -v '^tnt_' | grep -v '^TNTCOMM_'"
check "internal tnt__ symbols hidden" sh -c "! nm -D --defined-only '$lib/libtntcomm.so.0' | grep -q ' tnt__'"
check "tnt-run --version" sh -c "[ \"\$('$bin/tnt-run' --version)\" = 'tnt-run (libtntcomm) $version' ]"
check "tnt-bench --version" sh -c "[ \"\$('$bin/tnt-bench' --version)\" = 'tnt-bench (libtntcomm) $version' ]"
check "tnt-info --version" sh -c "[ \"\$('$bin/tnt-info' --version)\" = 'tnt-info (libtntcomm) $version' ]"
check "tnt-info -a --json parses" sh -c "'$bin/tnt-info' -a --json | python3 -m json.tool >/dev/null"
check "tnt-bench-plot --help names itself" sh -c "'$bin/tnt-bench-plot' --help | head -n 1 | grep -q '^usage: tnt-bench-plot '"
check "tnt-timeline installed and executable, --help names itself" sh -c "test -x '$bin/tnt-timeline' && '$bin/tnt-timeline' --help | head -n 1 | grep -q '^usage: tnt-timeline '"

# Python: the interpreter the build's frontends are for ($TNT_INSTALL_PYTHON,
# which tests/install/meson.build sets; else Debian's). An interpreter
# under the sanitizers needs their runtimes preloaded: test_python.sh does
# that; here the sanitized builds check the C side only.
py=${TNT_INSTALL_PYTHON:-/usr/bin/python3}
# A virtual environment's interpreter searches no system prefix, so there
# the package lies in meson's directory and PYTHONPATH names it.
in_venv=$("$py" -c 'import sys; print(int(sys.prefix != sys.base_prefix))' 2>/dev/null || echo 0)
if [ "$sanitize" = none ] && "$py" -c "import numpy" 2>/dev/null; then
    init=$(find "$root$prefix" -path '*/tntcomm/__init__.py' | head -n 1)
    pkgparent=$(dirname "$(dirname "$init")")
    installed=${pkgparent#"$root"}
    searched=$("$py" -E -c 'import sys; print("\n".join(sys.path))')
    case $in_venv:$prefix in
    1:*)
        check "Python package in meson's directory for $py ($installed)" \
            test -f "$root$installed/tntcomm/__init__.py"
        ;;
    0:/usr|0:/usr/local)
        # This prefix is on the interpreter's path: the package must land
        # there, so that `import tntcomm` needs nothing after install.
        check "Python package in $installed, on $py's sys.path" \
            grep -qx "$installed" <<<"$searched"
        ;;
    *)
        # Elsewhere docs/install.md's PYTHONPATH line names the directory.
        check "Python package in \$prefix/lib/python3/dist-packages ($installed)" \
            test "$installed" = "$prefix/lib/python3/dist-packages"
        ;;
    esac
    # In destdir mode _config.py names the final path of the library, so
    # TNT_LIBRARY points into the scratch tree; a prefix install needs
    # only PYTHONPATH (and not even that for /usr/local or /usr).
    pyenv=(PYTHONPATH="$pkgparent")
    [ "$mode" = destdir ] && pyenv+=(TNT_LIBRARY="$lib/libtntcomm.so.0")
    check "Python: 2-rank allreduce from the installed tree" \
        env "${pyenv[@]}" "$bin/tnt-run" -n 2 --output-on-all-ranks "$py" -c "
import numpy as np, tntcomm as tnt
assert tnt.__file__.startswith('$pkgparent/tntcomm/'), tnt.__file__
assert tnt.__version__ == '$version', tnt.__version__
r, n = tnt.get_rank(), tnt.get_size()
x = tnt.allreduce(np.arange(1000, dtype=np.float64) + r)
want = np.arange(1000, dtype=np.float64) * n + n * (n - 1) / 2
assert n == 2 and (x == want).all(), (n, x[:4])
print('rank', r, 'ok')"
    check "Python: both ranks checked every element" \
        sh -c "[ \$(grep -c '^\[[01]\] rank [01] ok\$' '$tmp/last') = 2 ]"
fi
[ "$mode" = prefix ] && rm -rf "$prefix"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
