/*
 * The GPU-side allreduce's kernels (devmem_kernel.h has the element
 * code and why): one per dtype, a grid-stride loop over the chunk.
 * Compiled to PTX at build time (lib/meson.build, nvcc -ptx) and loaded
 * by devmem_ipc.c through the driver API (cuModuleLoadData), so the
 * library links no CUDA runtime; extern "C" keeps the names unmangled.
 */
#include "devmem_kernel.h"

#define TNT_GK_KERNEL(name, elem)                                           \
    extern "C" __global__ void name(tnt_gk_args_t a)                        \
    {                                                                       \
        unsigned long long step =                                           \
            (unsigned long long)gridDim.x * blockDim.x;                     \
        for (unsigned long long i =                                         \
                 (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; \
             i < a.n; i += step)                                            \
            elem(&a, i);                                                    \
    }

TNT_GK_KERNEL(tnt_gpu_reduce_f32, tnt_gk_f32)
TNT_GK_KERNEL(tnt_gpu_reduce_f64, tnt_gk_f64)
TNT_GK_KERNEL(tnt_gpu_reduce_f16, tnt_gk_f16)
TNT_GK_KERNEL(tnt_gpu_reduce_bf16, tnt_gk_bf16)
