#!/usr/bin/env bash
# Installs the build into a scratch DESTDIR and checks what a user gets:
# every public header compiles alone as C and as C++, and a small program
# outside the tree builds with `pkg-config --cflags --libs tntcomm`, links
# to libtntcomm.so.0 and runs an allreduce on one rank.
set -euo pipefail
build=$1
# A sanitized library needs a sanitized program (the runtime must load
# first), so the user program is built with the library's b_sanitize.
sanitize=${2:-none}
san_flags=""
[ "$sanitize" != none ] && san_flags="-fsanitize=$sanitize"
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
pass=0 fail=0
check() { # name, command...
    local name=$1; shift
    if "$@" >"$dest/log" 2>&1; then pass=$((pass + 1)); echo "ok: $name"
    else fail=$((fail + 1)); echo "FAILED: $name"; cat "$dest/log"; fi
}

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet
pcdir=$(dirname "$(find "$dest" -name tntcomm.pc | head -n1)")
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest
cflags=$(pkg-config --cflags tntcomm)
libs=$(pkg-config --libs tntcomm)
libdir=$(dirname "$(find "$dest" -name 'libtntcomm.so.0' | head -n1)")

for h in $(cd "$dest" && find . -path '*/include/tnt/*.h'); do
    name=$(basename "$h")
    echo "#include <tnt/$name>" > "$dest/h.c"
    check "$name alone in C" cc -std=c11 -Wall -Wextra -Werror $cflags -fsyntax-only "$dest/h.c"
    cp "$dest/h.c" "$dest/h.cc"
    check "$name alone in C++" c++ -std=c++11 -Wall -Wextra -Werror $cflags -fsyntax-only "$dest/h.cc"
done

cat > "$dest/user.c" <<'C'
#include <stdio.h>
#include <tnt/tnt.h>
int main(void)
{
    tnt_comm_t comm;
    float x[3] = {1, 2, 3}, y[3] = {0};
    int size;
    if (tnt_comm_init_from_env(&comm) != TNT_SUCCESS)
        return 1;
    if (tnt_allreduce(comm, x, y, 3, TNT_F32, TNT_SUM) != TNT_SUCCESS)
        return 2;
    tnt_comm_size(comm, &size);
    tnt_comm_free(comm);
    printf("size %d y %g %g %g\n", size, y[0], y[1], y[2]);
    return (size == 1 && y[2] == 3) ? 0 : 3;
}
C
check "program builds with pkg-config" cc -std=c11 -Wall -Werror $san_flags $cflags "$dest/user.c" -o "$dest/user" $libs
check "program runs against libtntcomm.so.0" env -u TNT_RANK -u TNT_SIZE -u TNT_ROOT_ADDR LD_LIBRARY_PATH="$libdir" "$dest/user"
check "SONAME is libtntcomm.so.0" sh -c "objdump -p '$libdir/libtntcomm.so.0' | grep -q 'SONAME *libtntcomm.so.0'"
check "only tnt_ symbols exported" sh -c "! nm -D --defined-only '$libdir/libtntcomm.so.0' | awk '\$2 ~ /[TDBR]/ {print \$3}' | grep -v '^tnt_' | grep -v '^TNTCOMM_'"
check "internal tnt__ symbols hidden" sh -c "! nm -D --defined-only '$libdir/libtntcomm.so.0' | grep -q ' tnt__'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
