/*
 * Device memory in the collectives (docs/design.md, "Device memory"):
 * buffers in CUDA device memory are told apart from host memory by
 * asking CUDA (cudaPointerGetAttributes) and staged through pinned host
 * buffers. The copies go through a small table of functions
 * (tnt_devmem_ops_t): CUDA's (devmem.c, on a stream of the library's
 * own) by default; the tests put a host-memory stand-in behind the same
 * table, so the pipeline (devmem_stage.c) runs real collectives on a
 * machine without a GPU.
 */
#ifndef TNT_CORE_DEVMEM_H
#define TNT_CORE_DEVMEM_H

#include <stddef.h>
#include <stdint.h>

#include "core/entry.h"

/** The copy engine staging uses. Copies are queued in order on a stream
 *  and complete in that order; mark/wait are events on it. */
typedef struct tnt_devmem_ops {
    const char *name;
    /** 1 + the device index if p is device memory, 0 if host memory,
     *  a negative TNT_ERR_* (message set) if that cannot be told. */
    int (*is_device)(const void *p);
    /** A stream on device dev (made current for the calling thread). */
    tnt_result_t (*open)(int dev, void **stream);
    void (*close)(void *stream);
    tnt_result_t (*alloc_pinned)(size_t n, void **p);
    void (*free_pinned)(void *p);
    /** Queue a copy of n bytes (either direction). */
    tnt_result_t (*copy)(void *stream, void *dst, const void *src, size_t n);
    /** Event ev (0 or 1) completes when what is queued now has. */
    tnt_result_t (*mark)(void *stream, int ev);
    tnt_result_t (*wait)(void *stream, int ev);
    /** Wait for everything queued. */
    tnt_result_t (*sync)(void *stream);
} tnt_devmem_ops_t;

/** The bytes of one pinned staging slot (two per stream) by default. */
#define TNT_DEVMEM_SLOT_BYTES ((size_t)4 << 20)

/** Use ops (NULL: CUDA's) with slots of slot_bytes (0: the default) from
 *  now on; the pool of the previous ops is freed. For the tests: call it
 *  with no collective running. */
void tnt__devmem_use(const tnt_devmem_ops_t *ops, size_t slot_bytes);

/** Whether the call touches device memory: > 0 (stage it), 0 (post it as
 *  it is; 1 + the device index), negative TNT_ERR_* (message set). c after the operation's
 *  check. Costs one cached look when CUDA is not in the process. */
int tnt__devmem_check(const tnt_entry_op_t *op, const tnt_entry_call_t *c);

/** Whether the blocking call's kind goes through the segment pipeline
 *  (tnt__devmem_stage: allreduce, broadcast, allgather, reduce-scatter);
 *  the others, and every nonblocking call, are staged whole. */
int tnt__devmem_pipelined(int kind);

/** The blocking call c (checked, device memory in it) staged through
 *  pinned host buffers: device buffers cut in segments, the copy of
 *  segment k+1 queued before the collective on segment k runs and the
 *  copy back of k queued after it, so that copies overlap collectives.
 *  Each segment is a collective of its own (tnt__entry_run). */
tnt_result_t tnt__devmem_stage(const tnt_entry_op_t *op,
                               const tnt_entry_call_t *c, int dev);

/* ---- the GPU-side allreduce of ranks on one host (devmem_ipc.c) ------- */

/** How the GPU path posts the ranks' host messages: tnt__entry_run,
 *  passed down by the caller so that devmem_ipc.c calls nothing above
 *  it (the messages are allreduces of op, the call's own operation). */
typedef tnt_result_t (*tnt_entry_runner_t)(const tnt_entry_op_t *op,
                                           tnt_entry_call_t *c);

/** The allreduce c (op; checked; device memory on device dev) on the
 *  GPU through CUDA IPC if every rank can take that path: returns 1
 *  with *rc the call's result (done: blocking or not); or 0 (nothing
 *  changed in the buffers, every rank returns 0 alike) and the call is
 *  to be staged, the reason kept for tnt__devmem_gpu_stats and logged at
 *  INFO when it changes. */
int tnt__devmem_ipc_try(const tnt_entry_op_t *op, const tnt_entry_call_t *c,
                        int dev, tnt_entry_runner_t run, tnt_result_t *rc);

/** A communicator's device allreduces so far: on the GPU path, staged,
 *  and why the last staged one was (why[n]; "" if none). */
void tnt__devmem_gpu_stats(tnt_comm_t comm, uint64_t *ipc, uint64_t *staged,
                           char *why, size_t n);

/** The opened IPC handles (devmem_ipc_cache.c), process-wide: handles
 *  opened, lookups answered from the cache, handles closed (a stale one
 *  replaced, or evicted), open now. */
typedef struct tnt_ipc_cache_stats {
    uint64_t opens, hits, closes, live;
} tnt_ipc_cache_stats_t;
void tnt__ipc_cache_stats(tnt_ipc_cache_stats_t *out);

/* ---- staged whole (devmem_whole.c) ------------------------------------ */

/** A call's buffers staged whole: pinned copies of its device buffers. */
typedef struct tnt_staged tnt_staged_t;

struct tnt_request;

/** Copy the call's device buffers (both sides, on device dev) into pinned
 *  host buffers of their size and point c->post_send / c->post_recv at
 *  them; waits for the copies. Nothing is posted here. */
tnt_result_t tnt__devmem_in(const tnt_entry_op_t *op, tnt_entry_call_t *c,
                            int dev, tnt_staged_t **st);
/** The call finished with rc: if it succeeded, copy the receive side back
 *  to device memory (waits); then the pinned buffers go back to the pool.
 *  Returns rc, or the copy's error. */
tnt_result_t tnt__devmem_out(tnt_staged_t *st, tnt_result_t rc);
/** A nonblocking call's staging, kept until its request finishes. */
void tnt__devmem_attach(tnt_staged_t *st, struct tnt_request *req);
/** The request finished with rc: tnt__devmem_out of its staging, if it
 *  has one (once; later calls return rc). */
tnt_result_t tnt__devmem_finish(struct tnt_request *req, tnt_result_t rc);
/** Whether req still has staging attached (freed before it finished). */
int tnt__devmem_staged(struct tnt_request *req);
/** Whether the call moves any bytes at this rank (alltoallv: from its
 *  arrays, the count being 0). */
int tnt__devmem_any_bytes(const tnt_entry_op_t *op,
                          const tnt_entry_call_t *c);

/* ---- devmem.c's pools, used by devmem_stage.c and devmem_whole.c ----- */

/** The copy engine in use (CUDA's, or the tests' stand-in). */
const tnt_devmem_ops_t *tnt__devmem_ops(void);
/** A pinned host buffer of at least n bytes from the pool (*cap: its
 *  size, for tnt__pinned_give), or a new one. */
tnt_result_t tnt__pinned_take(size_t n, void **p, size_t *cap);
void tnt__pinned_give(void *p, size_t cap);
/** A rank's failure to stage alone: fail the communicator on every rank
 *  (the others would wait for its part otherwise); returns rc. */
tnt_result_t tnt__devmem_fail_comm(tnt_comm_t comm, tnt_result_t rc);

/** A stream of the library's own and its two pinned slots. */
typedef struct tnt_stager {
    const tnt_devmem_ops_t *ops;
    int dev;
    void *stream;
    void *slot[2];
    size_t slot_bytes;
    struct tnt_stager *next;
} tnt_stager_t;

/** A stager for device dev from the pool, or a new one. */
tnt_result_t tnt__stager_take(int dev, tnt_stager_t **out);
/** Back to the pool (ok) or freed (after an error: its stream may hold
 *  a failed copy). */
void tnt__stager_give(tnt_stager_t *s, int ok);

#endif /* TNT_CORE_DEVMEM_H */
