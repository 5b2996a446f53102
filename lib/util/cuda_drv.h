/*
 * The CUDA driver API, opened at run time (dlopen of libcuda.so.1, only
 * when the process has it loaded already: cuda_rt.h's
 * tnt__cuda_in_process), for the GPU-side allreduce (core/devmem_ipc.c):
 * IPC handles of device buffers, the kernel's module and its launch.
 * No header of CUDA is needed: the types are opaque pointers, ints and
 * the 64-byte handle, as the driver's ABI has them.
 */
#ifndef TNT_UTIL_CUDA_DRV_H
#define TNT_UTIL_CUDA_DRV_H

#include <stddef.h>

#include "tnt/tnt.h"

/** CUipcMemHandle: 64 opaque bytes, passed by value. */
typedef struct tnt_cu_ipc_handle {
    char reserved[64];
} tnt_cu_ipc_handle_t;

/* CUresult is int; CUdeviceptr unsigned long long; CUdevice int;
 * contexts, modules, functions and streams void *. */
typedef unsigned long long tnt_cu_ptr_t;

typedef struct tnt_cuda_drv {
    int (*init)(unsigned flags);
    int (*device_get)(int *dev, int ordinal);
    int (*device_get_attribute)(int *v, int attr, int dev);
    int (*device_get_pci_bus_id)(char *id, int len, int dev);
    int (*device_get_by_pci_bus_id)(int *dev, const char *id);
    int (*device_can_access_peer)(int *can, int dev, int peer);
    int (*primary_ctx_retain)(void **ctx, int dev);
    int (*ctx_push)(void *ctx);
    int (*ctx_pop)(void **ctx);
    int (*mem_get_address_range)(tnt_cu_ptr_t *base, size_t *size,
                                 tnt_cu_ptr_t p);
    int (*ipc_get_mem_handle)(tnt_cu_ipc_handle_t *h, tnt_cu_ptr_t p);
    int (*ipc_open_mem_handle)(tnt_cu_ptr_t *p, tnt_cu_ipc_handle_t h,
                               unsigned flags);
    int (*ipc_close_mem_handle)(tnt_cu_ptr_t p);
    int (*module_load_data)(void **mod, const void *image);
    int (*module_get_function)(void **fn, void *mod, const char *name);
    int (*launch_kernel)(void *fn, unsigned gx, unsigned gy, unsigned gz,
                         unsigned bx, unsigned by, unsigned bz,
                         unsigned shmem, void *stream, void **params,
                         void **extra);
    int (*stream_create)(void **stream, unsigned flags);
    int (*stream_synchronize)(void *stream);
    int (*get_error_name)(int err, const char **s);
    int (*get_error_string)(int err, const char **s);
} tnt_cuda_drv_t;

/* The driver's values the library uses (cuda.h). */
enum {
    TNT_CU_ATTR_SM_COUNT = 16,         /* CU_DEVICE_ATTRIBUTE_... */
    TNT_CU_IPC_LAZY_PEER = 1,          /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
    TNT_CU_STREAM_DEFAULT = 0          /* blocking: orders after the legacy
                                          default stream's work */
};
/** CU_STREAM_LEGACY: the legacy default stream, as a stream handle. */
#define TNT_CU_STREAM_LEGACY ((void *)0x1)

/** The driver's table (opened once, cuInit called), or NULL with
 *  TNT_ERR_UNSUPPORTED set as the last error saying why (no driver in
 *  the process, a symbol missing, cuInit failed). */
const tnt_cuda_drv_t *tnt__cuda_drv(void);

/** "CUDA_ERROR_X: text" of a driver error code, for messages. */
const char *tnt__cuda_drv_strerror(int err);

#endif /* TNT_UTIL_CUDA_DRV_H */
