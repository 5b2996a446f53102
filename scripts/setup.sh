#!/usr/bin/env bash
# Installs the build dependencies from Debian (when missing) and builds
# libtntcomm into ./build (or the directory given as $1, with any further
# arguments passed to `meson setup`).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift

packages="build-essential meson ninja-build pkg-config libcunit1-dev abigail-tools
          libibverbs-dev librdmacm-dev libnuma-dev libhwloc-dev
          iproute2"
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

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$@"
fi
ninja -C "$build"
