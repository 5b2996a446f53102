#!/usr/bin/env bash
# The GPU checks of issue 41, prepared for a machine with one NVIDIA GPU,
# CUDA 13 and no package registry (the lent H100/H200, whose image has a
# C compiler, meson and ninja but not libsodium, CUnit, hwloc or numa).
#
#   here, once:       bash tests/gpu/run.sh fetch
#       downloads those packages' .deb files (apt-get download; and
#       pkg-config, in case the image lacks it) into .gpu-debs/
#       (git-ignored; under 1 MiB), which the run carries; and compiles
#       the GPU-side allreduce's kernel to .gpu-debs/devmem_kernel.ptx
#       with this host's nvcc, for a GPU host without nvcc (with the
#       checksum of its sources: a stale one is refused there).
#   on the GPU host:  bash tests/gpu/run.sh [OUTDIR]
#       unpacks them (dpkg -x) into /tmp/tnt-deps, builds the library
#       with -Dcuda=enabled -Dgpu_kernel=enabled into build-gpu, runs
#       tests/test_devmem on device buffers (TNT_TEST_DEVMEM_CUDA=1:
#       allreduce, broadcast, allgather, reduce-scatter at p = 2 and 4 on
#       the one GPU, every element checked; the calls staged whole at
#       p = 2, 3; bad input), tests/test_devmem_ipc on device buffers (the
#       GPU-side allreduce through CUDA IPC and the kernel: every dtype
#       and op at p = 2 and 4, every element checked, every call on the
#       GPU path; the handle cache; the fallbacks' reasons), then
#       tests/gpu/bench_staged.c (2 ranks: the allreduce 8 B - 128 MiB
#       staged and on the GPU path against the pinned host-to-device
#       copy bandwidth of the same run); then the torch side, built with
#       the image's python3 and its torch (meson -Dpython=, the backend
#       built as part of the library's build; no pip): tests/gpu/
#       check_cuda_torch.py (every collective of the "tnt" backend on
#       CUDA tensors; DDP on a CUDA model, tnt against gloo's CUDA path,
#       and tntcomm.torch.DistributedOptimizer with CUDA parameters, to a
#       relative 1e-5) and tests/gpu/bench_cuda_torch.py (dist.all_reduce
#       8 B - 256 MiB and a DDP step, tnt against gloo), each under
#       tnt-run -n 2. Logs go to OUTDIR (default $OUT, else
#       build-gpu/gpu-logs). About 90 s on the lent H100 (16 cores)
#       before the GPU path; each step has its own timeout, all in
#       well under 10 minutes. At the end it prints the lines
#       docs/performance.md needs (== FOR docs/performance.md).
#       Every failure stops it with "run.sh: FAILED: what", exit 1
#       (TNT_GPU_KEEP_GOING=1: a failing test or benchmark step is
#       reported and the next runs; the exit status is still 1).
#   --build-only: stop after the build (to try the script without a GPU).
#   TNT_GPU_TORCH=0: leave the torch side out.
#
# Without a GPU it stops at once with exit status 2 and says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
PKGS="libsodium23 libsodium-dev libcunit1 libcunit1-dev libhwloc15
      libhwloc-dev libnuma1 libnuma-dev pkgconf pkgconf-bin libpkgconf3"

KSRC="lib/core/devmem_kernel.cu lib/core/devmem_kernel.h"
ksum() { cat $KSRC | sha256sum | cut -c1-16; }
if [ "${1:-}" = fetch ]; then
    mkdir -p .gpu-debs
    (cd .gpu-debs && apt-get download $PKGS)
    # The kernel's PTX, for a GPU host without nvcc (as lib/meson.build
    # makes it).
    nv=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    "$nv" -ptx -arch=compute_75 -O3 -o .gpu-debs/devmem_kernel.ptx \
        lib/core/devmem_kernel.cu
    ksum >.gpu-debs/devmem_kernel.ptx.sum
    ls -l .gpu-debs
    exit 0
fi
fail() { echo "run.sh: FAILED: $*" >&2; exit 1; }
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
out=${1:-${OUT:-build-gpu/gpu-logs}}
mkdir -p "$out"

if [ $build_only = 0 ]; then
    if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null |
            grep -q '^GPU '; then
        echo "run.sh: no NVIDIA GPU here (nvidia-smi -L lists none);" \
             "the GPU checks need one (--build-only builds without)" >&2
        exit 2
    fi
    nvidia-smi -L | tee "$out/gpu.txt"
fi

# Dependencies missing from the image, from the carried .deb files.
if ! pkg-config --exists libsodium cunit hwloc 2>/dev/null; then
    deps=/tmp/tnt-deps
    ls .gpu-debs/*.deb >/dev/null 2>&1 || {
        echo "run.sh: libsodium/cunit/hwloc missing and no .gpu-debs/*.deb" \
             "carried (run 'bash tests/gpu/run.sh fetch' first)" >&2
        exit 3; }
    rm -rf $deps && mkdir -p $deps
    for f in .gpu-debs/*.deb; do dpkg -x "$f" $deps; done
    lib=$deps/usr/lib/x86_64-linux-gnu
    for pc in $lib/pkgconfig/*.pc; do
        sed -i "s|^prefix=/usr|prefix=$deps/usr|" "$pc"
    done
    # libfoo.so links of the -dev packages are relative: they resolve.
    export PKG_CONFIG_PATH=$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export CPATH=$deps/usr/include${CPATH:+:$CPATH}
    command -v pkg-config >/dev/null || export PATH=$PATH:$deps/usr/bin
fi

# The CUDA runtime's headers (build) and libcudart (run): the toolkit's,
# else the pip wheel's that torch uses.
hdr=""
for d in /usr/local/cuda/include \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s) for p in nvidia.__path__ for s in ("cu13/include", "cuda_runtime/include")))' 2>/dev/null); do
    if [ -f "$d/cuda_runtime_api.h" ]; then hdr=$d; break; fi
done
[ -n "$hdr" ] || { echo "run.sh: no cuda_runtime_api.h found" >&2; exit 3; }
for d in /usr/local/cuda/lib64 "$hdr/../lib" "$hdr/../lib64"; do
    [ -d "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
echo "run.sh: CUDA headers in $hdr"

torch=${TNT_GPU_TORCH:-1}
py=$(command -v python3)
if [ "$torch" = 1 ] && ! "$py" -c 'import torch' 2>/dev/null; then
    echo "run.sh: $py has no torch: the torch side is left out" >&2
    torch=0
fi
tb=disabled
[ "$torch" = 0 ] || tb=enabled
# The GPU-side allreduce's kernel: nvcc here, else the carried PTX.
ptxopt=()
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    command -v nvcc >/dev/null || ptxopt=(-Dnvcc=/usr/local/cuda/bin/nvcc)
    echo "run.sh: the kernel compiled here by $(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
else
    [ -f .gpu-debs/devmem_kernel.ptx ] || {
        echo "run.sh: no nvcc here and no .gpu-debs/devmem_kernel.ptx" \
             "carried (run 'bash tests/gpu/run.sh fetch' first)" >&2; exit 3; }
    [ "$(cat .gpu-debs/devmem_kernel.ptx.sum 2>/dev/null)" = "$(ksum)" ] || {
        echo "run.sh: .gpu-debs/devmem_kernel.ptx is stale (made from" \
             "other sources than $KSRC): run 'bash tests/gpu/run.sh" \
             "fetch' again" >&2; exit 3; }
    ptxopt=(-Dgpu_ptx="$PWD/.gpu-debs/devmem_kernel.ptx")
    echo "run.sh: no nvcc here: the kernel from the carried PTX"
fi
opts=(-Dcuda=enabled -Dcudart_headers="$hdr" -Dtests=enabled
      -Dgpu_kernel=enabled "${ptxopt[@]}"
      -Dtorch_backend=$tb -Dpmix=disabled -Dverbs=disabled -Dpython="$py")
meson setup build-gpu --wipe "${opts[@]}" >"$out/setup.log" 2>&1 ||
    meson setup build-gpu "${opts[@]}" >"$out/setup.log" 2>&1 ||
    { tail -30 "$out/setup.log"; exit 4; }
targets=(tests/test_devmem tests/test_devmem_ipc tests/bench_gpu_staged
         tools/tnt-run)
if [ "$torch" = 1 ]; then
    ext=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    targets+=("plugins/python/tntcomm/_c10d$ext")
fi
ninja -C build-gpu "${targets[@]}" >"$out/build.log" 2>&1 ||
    { grep -B2 -A8 'error' "$out/build.log" | head -60; tail -5 "$out/build.log"; exit 4; }
echo "run.sh: built (${targets[*]})"
[ $build_only = 0 ] || exit 0

# One step: its log in $out, its verdict; a failure stops the run.
step() { # name timeout log command...
    local name=$1 t=$2 log=$3 st=0 t0=$SECONDS
    shift 3
    echo "== $name"
    timeout "$t" "$@" >"$out/$log" 2>&1 || st=$?
    local why=""
    if [ $st = 124 ]; then
        why="timed out after $t s"
    elif [ $st != 0 ]; then
        why="exit status $st after $((SECONDS - t0)) s"
    fi
    # CUnit's verdicts only: the bad-input cases log the errors they
    # expect ("rank 1 failed: collective #0 mismatch").
    if grep -q -e '\.\.\.FAILED' -e '^FAIL ' "$out/$log"; then
        grep -e '\.\.\.FAILED' -e '^FAIL ' "$out/$log" | head -20
        why="${why:+$why, }CUnit failures"
    elif [ -n "$why" ]; then
        tail -40 "$out/$log"
    fi
    if [ -n "$why" ]; then
        failed+=("$name: $why (log $out/$log)")
        [ "${TNT_GPU_KEEP_GOING:-0}" = 1 ] || fail "$name: $why (log $out/$log)"
        echo "run.sh: FAILED (going on: TNT_GPU_KEEP_GOING=1): $name: $why" >&2
        return 0
    fi
    echo "   ok ($((SECONDS - t0)) s)"
}
failed=()
export TNT_LOG_LEVEL=WARNING
step "the collective suite on device buffers, staged (p = 2, 4)" 150 \
    test_devmem.log env TNT_TEST_DEVMEM_CUDA=1 build-gpu/tests/test_devmem
step "the GPU-side allreduce through CUDA IPC (p = 2, 4)" 150 \
    test_devmem_ipc.log env TNT_TEST_DEVMEM_CUDA=1 \
    build-gpu/tests/test_devmem_ipc
step "allreduce staged and on the GPU path against the copy bandwidth (2 ranks)" \
    150 bench.log env GPU_BENCH_RANKS=2 build-gpu/tests/bench_gpu_staged
grep -e '^#' -e '^ *[0-9]' "$out/bench.log"
if [ "$torch" = 1 ]; then
    export PYTHONPATH=$PWD/build-gpu/plugins/python${PYTHONPATH:+:$PYTHONPATH}
    export PYTHONUNBUFFERED=1
    step "the tnt backend on CUDA tensors; DDP and DistributedOptimizer (2 ranks)" \
        150 torch_check.log build-gpu/tools/tnt-run -n 2 "$py" \
        tests/gpu/check_cuda_torch.py
    step "dist.all_reduce and a DDP step, tnt against gloo (2 ranks)" 180 \
        torch_bench.log build-gpu/tools/tnt-run -n 2 "$py" \
        tests/gpu/bench_cuda_torch.py
fi

echo
echo "== FOR docs/performance.md (issue 41, the GPU-side path; $(date -u +%F))"
cat "$out/gpu.txt"
if [ ${#failed[@]} = 0 ]; then
    echo "-- tests: test_devmem (staged) and test_devmem_ipc (GPU path) passed at p = 2, 4"
else
    printf -- '-- FAILED: %s\n' "${failed[@]}"
fi
echo "-- bench_gpu_staged (C API, 2 ranks on the one GPU):"
grep -e '^#' -e '^ *[0-9]' "$out/bench.log"
if [ "$torch" = 1 ]; then
    echo "-- bench_cuda_torch (dist.all_reduce, tnt against gloo):"
    grep -v -e '^tnt\[' -e '^ *$' "$out/torch_bench.log" | head -30
fi
[ ${#failed[@]} = 0 ] || fail "${#failed[@]} step(s) failed (above)"
exit 0
