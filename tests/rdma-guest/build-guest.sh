#!/usr/bin/env bash
# Builds the soft-RoCE test guest once and prints the directory that holds
# it (vmlinuz, initrd.cpio). Debian's kernel package is downloaded and
# unpacked with dpkg-deb -x, never installed on the host; the root file
# system is a debootstrap minbase with the verbs user space and the
# runtime libraries of the project's binaries, packed as an initramfs with
# only the kernel modules the guest loads. The result is cached under
# $TNT_RDMA_GUEST_CACHE (default /var/cache/tnt-rdma-guest), keyed by the
# kernel version and a hash of the package list, the module list and this
# directory's guest-side files, so a change to any of them builds anew.
# Needs root and the network (apt); messages go to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${TNT_RDMA_GUEST_CACHE:-/var/cache/tnt-rdma-guest}
log() { echo "rdma-guest: $*" >&2; }

# The packages of the guest: verbs user space and tools (perftest for the
# raw figures), and what the test binaries and tnt-bench link against.
# TNT_RDMA_GUEST_EXTRA adds packages for a guest of its own (its own cache
# entry, the package list is in the key): the benchmark's Open MPI with
# UCX ("openmpi-bin", bench-mpi.sh) would make CI's guest larger and its
# boot slower for nothing.
guest_pkgs="rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
  iproute2 kmod procps libsodium23 libhwloc15 libnuma1 libcunit1 libpmix2
  zlib1g ${TNT_RDMA_GUEST_EXTRA:-}"
# Modules loaded in the guest (with their dependencies): rxe and the verbs
# character devices, veth for the two "hosts", 9p for the shared tree.
guest_mods="rdma_rxe ib_uverbs rdma_ucm veth 9p 9pnet_virtio virtio_pci
  crc32_generic"

# The kernel: whatever Debian's linux-image-amd64 points at now.
kv=$(apt-cache depends linux-image-amd64 2>/dev/null |
     sed -n 's/^ *Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -n1)
if [ -z "$kv" ]; then
    apt-get update -qq >&2
    kv=$(apt-cache depends linux-image-amd64 |
         sed -n 's/^ *Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -n1)
fi
[ -n "$kv" ] || { log "cannot find Debian's kernel package (apt-cache depends linux-image-amd64)"; exit 1; }
key=$( { echo "$kv"; echo $guest_pkgs; echo $guest_mods;
         cat "$here/build-guest.sh" "$here/init"; } | sha256sum | cut -c1-16)
dir=$cache/$kv-$key
if [ -f "$dir/initrd.cpio" ] && [ -f "$dir/vmlinuz" ]; then
    echo "$dir"; exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -f "$dir/initrd.cpio" ]; then echo "$dir"; exit 0; fi
log "building the guest for kernel $kv into $dir (once; about 2-4 minutes)"
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get download "linux-image-$kv" >&2 ||
    { apt-get update -qq >&2; apt-get download "linux-image-$kv" >&2; }
dpkg-deb -x linux-image-"${kv}"_*.deb kernel
rm -f linux-image-*.deb
debootstrap --variant=minbase --include="$(echo $guest_pkgs | tr ' ' ',')" \
    bookworm rootfs "$mirror" >&2

# Only the modules the guest loads, with their dependencies.
m=rootfs/lib/modules/$kv
mkdir -p rootfs/lib/modules
cp -a "kernel/lib/modules/$kv" rootfs/lib/modules/
chroot rootfs depmod -a "$kv"
for mod in $guest_mods; do
    chroot rootfs modprobe -S "$kv" --show-depends "$mod"
done | awk '$1 == "insmod" {print "rootfs" $2}' | sort -u > keep.txt
find "$m/kernel" -name '*.ko*' | sort | comm -23 - keep.txt | xargs -r rm -f
find "$m/kernel" -type d -empty -delete
chroot rootfs depmod -a "$kv"
install -m 755 "$here/init" rootfs/init

mkdir -p out
cp "kernel/boot/vmlinuz-$kv" out/vmlinuz
(cd rootfs && find . \( -path ./var/cache/apt -o -path ./var/lib/apt/lists \
    -o -path ./usr/share/doc -o -path ./usr/share/man \
    -o -path ./usr/share/locale -o -path ./usr/share/info \
    -o -path ./usr/share/i18n -o -path ./usr/share/zoneinfo \
    -o -path ./var/log \) -prune -o -print |
    LC_ALL=C sort | cpio -o -H newc --quiet) > out/initrd.cpio
echo "$kv" > out/kernel-version
rm -rf "$dir"
mv out "$dir"
log "guest ready: $dir ($(du -sh "$dir" | cut -f1))"
echo "$dir"
