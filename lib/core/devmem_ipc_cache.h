/*
 * The cache of opened CUDA IPC handles (devmem_ipc_cache.c), for the
 * GPU-side allreduce (devmem_ipc.c). A training loop reuses its gradient
 * buffers: each peer allocation is opened once (cuIpcOpenMemHandle costs
 * a mapping, far more than the allreduce of a small bucket), as NCCL's
 * buffer registration does.
 */
#ifndef TNT_CORE_DEVMEM_IPC_CACHE_H
#define TNT_CORE_DEVMEM_IPC_CACHE_H

#include <stdint.h>

#include "util/cuda_drv.h"

/** The peer allocation named by (pid, its allocation base there, handle)
 *  mapped into context ctx (device dev of this process): *p is its base
 *  here. A peer allocation at the same (pid, base) with another handle
 *  (freed and allocated again) replaces the old mapping, which is
 *  closed. The entry stays in use (not evicted) until tnt__ipc_unmap.
 *  On error the message is set and names the driver's error. */
tnt_result_t tnt__ipc_map(const tnt_cuda_drv_t *d, void *ctx, int dev,
                          int pid, uint64_t base,
                          const tnt_cu_ipc_handle_t *h, tnt_cu_ptr_t *p);
/** Done with the mapping at p (from tnt__ipc_map). */
void tnt__ipc_unmap(tnt_cu_ptr_t p);

#endif /* TNT_CORE_DEVMEM_IPC_CACHE_H */
