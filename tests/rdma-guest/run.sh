#!/usr/bin/env bash
# Host side: boots the soft-RoCE guest (build-guest.sh, cached), runs the
# command list CMDS inside it (guest-steps.sh; each line a bash command
# run from the project root, where BUILD names the build directory) with
# two rxe devices on the two ends of a veth pair (guest-net.sh), prints the
# guest's output and exits with the guest's status. The guest has no
# network device to the outside (-nic none); the project tree is shared in
# over 9p at its own path. A deadline on the whole run (TNT_RDMA_DEADLINE,
# default 1200 s) turns a hang in the guest into a failure.
# Without root, when qemu cannot be installed, on a sanitizer build or a
# build directory outside the source tree, it prints one line and exits
# 77 (SKIP in meson).
#   usage: run.sh BUILD_DIR CMDS
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# = 2 ] || { echo "usage: $0 BUILD_DIR CMDS" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
cmds=$2
[ -f "$cmds" ] || { echo "rdma-guest: no command list $cmds" >&2; exit 2; }
# The guest sees the source tree only (shared at its own path, so the
# build tree's absolute paths and rpaths hold there): a build directory
# elsewhere (meson setup /elsewhere, as packagers do) is a skip, not a
# failure of the test.
case $build/ in "$repo"/*) ;; *)
    echo "SKIP: rdma guest not run: the build directory $build is outside the source tree $repo, and the guest sees only the source tree (use a build directory inside it)"
    exit 77 ;;
esac
deadline=${TNT_RDMA_DEADLINE:-1200}

# The guest has no sanitizer runtimes: it runs the normal build only.
if python3 -c 'import json,sys; o={x["name"]: x["value"] for x in json.load(open(sys.argv[1]))}; sys.exit(o.get("b_sanitize", "none") in ("none", []))' \
       "$build/meson-info/intro-buildoptions.json" 2>/dev/null; then
    echo "SKIP: rdma guest not run: $build is a sanitizer build (the guest runs the normal build)"
    exit 77
fi

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: rdma guest not run: needs root (debootstrap, and the guest's cache)"
    exit 77
fi
if ! command -v qemu-system-x86_64 > /dev/null || ! command -v debootstrap > /dev/null ||
   ! command -v cpio > /dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        qemu-system-x86 debootstrap cpio > /dev/null 2>&1 ||
    { apt-get update -qq > /dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          qemu-system-x86 debootstrap cpio > /dev/null 2>&1; }
fi
if ! command -v qemu-system-x86_64 > /dev/null; then
    echo "SKIP: rdma guest not run: qemu-system-x86_64 missing and could not be installed"
    exit 77
fi
guest=$(bash "$here/build-guest.sh") || { echo "rdma-guest: building the guest failed"; exit 1; }
kv=$(cat "$guest/kernel-version")

job=$(mktemp -d /tmp/tnt-rdma-job.XXXXXX)
trap 'rm -rf "$job"' EXIT
cp "$cmds" "$job/cmds"
cat > "$job/guest-job.sh" <<JOB
cd "$repo" || exit 90
export BUILD="$build" TNT_RDMA_STEP_TIMEOUT=${TNT_RDMA_STEP_TIMEOUT:-600}
source "$here/guest-net.sh" || { echo "rdma-guest: network setup failed"; exit 91; }
rdma link show
echo "rdma-guest: devices ready after \$(cut -d" " -f1 /proc/uptime) s"
bash "$here/guest-steps.sh" /mnt/job/cmds
JOB
# Software emulation unless TNT_RDMA_ACCEL asks for more (kvm:tcg): a
# usable-looking /dev/kvm is no proof, nested KVM can abort qemu or hang
# the guest after the BIOS (docs/verbs.md).
accel=${TNT_RDMA_ACCEL:-tcg}
cpu=${TNT_RDMA_CPU:-max}
echo "rdma-guest: kernel $kv, accel $accel, deadline ${deadline} s"
start=$(date +%s)
timeout -k 10 "$deadline" qemu-system-x86_64 -machine q35,accel=$accel -cpu "$cpu" \
    -m "${TNT_RDMA_MEM:-2048}" -smp "${TNT_RDMA_SMP:-2}" \
    -nographic -nic none -no-reboot -monitor none -serial stdio \
    -kernel "$guest/vmlinuz" -initrd "$guest/initrd.cpio" \
    -append "console=ttyS0 quiet panic=-1 rdinit=/init tnt.repo=$repo" \
    -virtfs "local,path=$job,mount_tag=job,security_model=none,id=job" \
    -virtfs "local,path=$repo,mount_tag=repo,security_model=none,id=repo" \
    < /dev/null
qrc=$?
took=$(( $(date +%s) - start ))
if [ $qrc = 124 ] || [ $qrc = 137 ]; then
    echo "rdma-guest: FAIL: the guest ran past the deadline of ${deadline} s and was killed"
    exit 1
fi
rc=$(cat "$job/out/rc" 2>/dev/null) || rc=""
if [ -z "$rc" ]; then
    echo "rdma-guest: FAIL: the guest ended (qemu exit $qrc) without an exit status after ${took} s"
    exit 1
fi
echo "rdma-guest: guest exit status $rc after ${took} s"
[ "$rc" = 0 ]
