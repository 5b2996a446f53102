#!/usr/bin/env bash
# tests/rdma-guest/run.sh before it boots anything: a build directory
# outside the source tree (meson setup /elsewhere, as packagers do) is a
# SKIP (exit 77) saying why, not a failure (issue 34: it was exit 2, "the
# build directory must be inside"); bad arguments are usage errors (2).
# Nothing here needs root, qemu or the guest.
#   usage: test_rdma_guest_args.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
run_sh=$here/rdma-guest/run.sh
tmp=$(mktemp -d /tmp/tnt-rdma-args.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

check() { # want-rc want-text args...
    local want=$1 text=$2
    shift 2
    out=$(timeout 30 bash "$run_sh" "$@" 2>&1)
    rc=$?
    [ "$rc" = "$want" ] || fail "run.sh $*: exit $rc, expected $want: $out"
    case $out in *"$text"*) ;; *)
        fail "run.sh $*: output lacks '$text': $out" ;;
    esac
}

mkdir -p "$tmp/build-outside"
check 77 "SKIP: rdma guest not run: the build directory $tmp/build-outside is outside the source tree" \
    "$tmp/build-outside" "$here/rdma-guest/smoke.cmds"
check 2 "usage:" "$tmp/build-outside"
check 2 "no command list" "$here/.." "$tmp/no-such.cmds"
[ $fails = 0 ] && echo "ok: run.sh's checks before booting"
exit $((fails > 0))
