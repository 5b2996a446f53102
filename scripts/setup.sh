#!/usr/bin/env bash
# Installs the build dependencies from Debian (when missing), makes the
# project's Python environment .venv (scripts/venv.sh: torch 2.13.0 CPU,
# numpy, scikit-learn, ...; the frontends and the torch.distributed
# backend are built and tested for it) and builds libtntcomm into ./build (or the directory given as $1, with any further
# arguments passed to `meson setup`). Developers' and CI's builds treat
# warnings as errors (-Dwerror=true; a later -Dwerror=false wins); a plain
# `meson setup` does not (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift

packages="build-essential meson ninja-build pkg-config libcunit1-dev abigail-tools
          libibverbs-dev librdmacm-dev libnuma-dev libhwloc-dev
          libpmix-dev openmpi-bin slurm-wlm munge iproute2 gnuplot-nox
          zlib1g-dev python3-numpy python3-sklearn python3-venv python3-dev
          patchelf
          libsodium-dev clang libclang-rt-14-dev
          qemu-system-x86 debootstrap cpio"
missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $packages 2>/dev/null \
          | awk '$1 != "ii" {print $2}'; \
          for p in $packages; do dpkg-query -W "$p" >/dev/null 2>&1 || echo "$p"; done)
missing=$(echo "$missing" | sort -u | tr '\n' ' ')
if [ -n "${missing// /}" ]; then
    echo "setup: installing $missing"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

# The frontends' interpreter (plugins/python/meson.build takes .venv when
# it is there; a quick check when it is up to date).
bash scripts/venv.sh >/dev/null

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" -Dwerror=true "$@"
fi
ninja -C "$build"
