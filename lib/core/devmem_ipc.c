/*
 * The GPU-side allreduce of ranks that share a host (devmem.h,
 * docs/design.md "Device memory"). Staging through host memory cannot
 * come near the GPU's bandwidth (the host reduction and two PCIe copies
 * per byte); ranks on one host can instead read each other's device
 * buffers through CUDA IPC and reduce on the GPU:
 *
 *   1. every rank sends the others (one exchange of host messages) its
 *      buffers' IPC handles (cuIpcGetMemHandle of the allocation base,
 *      cuMemGetAddressRange, and the offset in it) and its GPU's PCI id;
 *      a rank that cannot (no kernel, IPC refused) says why, and then
 *      every rank stages the call instead;
 *   2. every rank opens the peers' handles (a cache, devmem_ipc_cache.c:
 *      reused buffers are opened once), waits for the work queued before
 *      the call on the legacy default stream (the input is complete),
 *      and says whether all went well (a second exchange): all ready,
 *      or all stage the call (nothing was written yet);
 *   3. every rank reduces its 1/p chunk with a kernel (devmem_kernel.cu)
 *      that reads the chunk from every rank's send buffer and stores the
 *      result into every rank's receive buffer (the gather done by the
 *      kernel's stores, not by p - 1 copies after a fourth round), waits
 *      for it, and says so (a third exchange): after it every rank's
 *      buffer holds the result and no peer touches it any more.
 *
 * The steps are ordered by the library's own host messages (over shared
 * memory on one host), not by IPC events: each message is also where a
 * rank's failure reaches the others, so a refused handle or a failed
 * launch is an agreed fallback or an error on every rank, never a hang
 * on an event that is never recorded. The cost is three small
 * exchanges per call (each an allreduce of p slots of bytes, posted
 * through the runner the caller passes down: this file calls nothing
 * above it), which is why calls below TNT_GPU_IPC_MIN_BYTES stay
 * staged.
 *
 * Anything else is staged (devmem_stage.c) with the reason kept for
 * tnt__devmem_gpu_stats and logged at INFO: ranks on other hosts, more
 * than TNT_GPU_IPC_MAX ranks, a dtype other than f32/f64/f16/bf16, a
 * library built without the kernel (no nvcc), a peer's GPU without peer
 * access, a handle refused (memory not from cuMemAlloc/cudaMalloc).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/devmem.h"
#include "core/devmem_ipc_cache.h"
#include "core/devmem_kernel.h"
#include "util/cuda_drv.h"
#include "util/error.h"
#include "util/log.h"
#include "util/param_table.h"

_Static_assert((int)TNT_GK_SUM == (int)TNT_SUM &&
               (int)TNT_GK_AVG == (int)TNT_AVG &&
               (int)TNT_GK_PROD == (int)TNT_PROD &&
               (int)TNT_GK_MIN == (int)TNT_MIN &&
               (int)TNT_GK_MAX == (int)TNT_MAX,
               "devmem_kernel.h's ops are tnt.h's");

#ifdef TNT_HAVE_GPU_PTX
extern const char tnt__gpu_reduce_ptx[]; /* devmem_kernel_ptx.c, generated */
#endif

/* ---- per device: context, module, stream ------------------------------ */

#define MAXDEV 64
#define THREADS 256

typedef struct gdev {
    int state;                  /* 0 not tried, 1 ready, -1 failed */
    char why[200];              /* state -1: the reason */
    int cudev;                  /* CUdevice */
    void *ctx, *stream;
    void *fn[4];                /* by dtype: f32, f64, f16, bf16 */
    int blocks;                 /* most blocks a launch uses */
    char bus[16];
} gdev_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gdev_t g_dev[MAXDEV];

static int kernel_index(tnt_dtype_t t)
{
    switch (t) {
    case TNT_F32: return 0;
    case TNT_F64: return 1;
    case TNT_F16: return 2;
    case TNT_BF16: return 3;
    default: return -1;
    }
}

#ifdef TNT_HAVE_GPU_PTX
static int setup_fail(gdev_t *g, const char *what, int err)
{
    snprintf(g->why, sizeof g->why, "%s failed: %s", what,
             tnt__cuda_drv_strerror(err));
    return -1;
}
#endif

/* Context, module, functions and stream of device dev; once per device
 * and process (a failure is kept: every later call stages at once). */
static int setup(const tnt_cuda_drv_t *d, gdev_t *g, int dev)
{
#ifndef TNT_HAVE_GPU_PTX
    (void)d, (void)dev;
    snprintf(g->why, sizeof g->why, "this libtntcomm was built without "
             "the GPU kernel (no nvcc at build time: meson option "
             "gpu_kernel)");
    return -1;
#else
    static const char *const names[4] = {TNT_GK_F32, TNT_GK_F64,
                                         TNT_GK_F16, TNT_GK_BF16};
    int err, sm = 0;
    void *prev, *mod;
    if ((err = d->device_get(&g->cudev, dev)))
        return setup_fail(g, "cuDeviceGet", err);
    if ((err = d->primary_ctx_retain(&g->ctx, g->cudev)))
        return setup_fail(g, "cuDevicePrimaryCtxRetain", err);
    if ((err = d->ctx_push(g->ctx)))
        return setup_fail(g, "cuCtxPushCurrent", err);
    int rc = 0;
    if ((err = d->module_load_data(&mod, tnt__gpu_reduce_ptx)))
        rc = setup_fail(g, "cuModuleLoadData of the reduction kernel", err);
    for (int k = 0; k < 4 && rc == 0; k++)
        if ((err = d->module_get_function(&g->fn[k], mod, names[k])))
            rc = setup_fail(g, names[k], err);
    if (rc == 0 && (err = d->stream_create(&g->stream,
                                           TNT_CU_STREAM_DEFAULT)))
        rc = setup_fail(g, "cuStreamCreate", err);
    if (rc == 0 && (err = d->device_get_attribute(&sm, TNT_CU_ATTR_SM_COUNT,
                                                  g->cudev)))
        rc = setup_fail(g, "cuDeviceGetAttribute", err);
    if (rc == 0 && (err = d->device_get_pci_bus_id(g->bus, sizeof g->bus,
                                                   g->cudev)))
        rc = setup_fail(g, "cuDeviceGetPCIBusId", err);
    g->blocks = sm > 0 ? sm * 8 : 64;
    d->ctx_pop(&prev);
    return rc;
#endif
}

/* The device's state, set up on first use; NULL with why[] set. */
static gdev_t *device(const tnt_cuda_drv_t *d, int dev, char *why, size_t n)
{
    if (dev < 0 || dev >= MAXDEV) {
        snprintf(why, n, "device %d: beyond the %d devices the GPU path "
                 "knows", dev, MAXDEV);
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    gdev_t *g = &g_dev[dev];
    if (g->state == 0)
        g->state = setup(d, g, dev) == 0 ? 1 : -1;
    if (g->state < 0)
        snprintf(why, n, "%s", g->why);
    pthread_mutex_unlock(&g_lock);
    return g->state > 0 ? g : NULL;
}

/* ---- what the ranks tell each other ------------------------------------ */

typedef struct desc {
    int32_t ok, pid;
    int32_t in_place;
    char bus[16];
    uint64_t send_base, send_off, recv_base, recv_off;
    tnt_cu_ipc_handle_t send_h, recv_h;
    char why[120];
} desc_t;

typedef struct verdict {
    int32_t ok;
    char why[124];
} verdict_t;

/* The IPC handle of the allocation holding p, and p's offset in it. */
static int handle_of(const tnt_cuda_drv_t *d, const void *p, uint64_t *base,
                     uint64_t *off, tnt_cu_ipc_handle_t *h, char *why,
                     size_t n)
{
    tnt_cu_ptr_t b = 0;
    size_t size = 0;
    int err = d->mem_get_address_range(&b, &size,
                                       (tnt_cu_ptr_t)(uintptr_t)p);
    if (!err)
        err = d->ipc_get_mem_handle(h, b);
    if (err) {
        snprintf(why, n, "no IPC handle for its buffer %p (memory not "
                 "from cudaMalloc/cuMemAlloc?): %s", p,
                 tnt__cuda_drv_strerror(err));
        return -1;
    }
    *base = b;
    *off = (uint64_t)(uintptr_t)p - b;
    return 0;
}

/* The first rank of all[] that said no, as "rank q: why"; 0 if none. */
static int first_no(const void *all, size_t stride, int p, char *why,
                    size_t n)
{
    for (int q = 0; q < p; q++) {
        const unsigned char *e = (const unsigned char *)all + stride * q;
        int32_t ok;
        memcpy(&ok, e, sizeof ok);
        if (!ok) {
            const char *w = stride == sizeof(desc_t)
                                ? ((const desc_t *)(const void *)e)->why
                                : ((const verdict_t *)(const void *)e)->why;
            snprintf(why, n, "rank %d: %.*s", q, 124, w);
            return 1;
        }
    }
    return 0;
}

/* ---- the per-communicator record ---------------------------------------- */

static void note(tnt_comm_t comm, int ipc, const char *why)
{
    int changed = 0;
    tnt__lock_to_post(comm);
    if (ipc) {
        comm->gpu.ipc_calls++;
    } else {
        comm->gpu.staged_calls++;
        changed = strcmp(comm->gpu.why, why) != 0;
        if (changed)
            snprintf(comm->gpu.why, sizeof comm->gpu.why, "%s", why);
    }
    pthread_mutex_unlock(&comm->group->lock);
    if (changed)
        TNT_LOG_INFO("rank %d: device allreduces are staged through host "
                     "memory: %s", comm->rank, why);
}

void tnt__devmem_gpu_stats(tnt_comm_t comm, uint64_t *ipc, uint64_t *staged,
                           char *why, size_t n)
{
    tnt__lock_to_post(comm);
    *ipc = comm->gpu.ipc_calls;
    *staged = comm->gpu.staged_calls;
    snprintf(why, n, "%s", comm->gpu.why);
    pthread_mutex_unlock(&comm->group->lock);
}

/* Whether the call may take the GPU path, decided from what every rank
 * has alike (the call's arguments, the communicator, the environment),
 * so that every rank decides the same without a message. */
static int eligible(const tnt_entry_call_t *c, char *why, size_t n,
                    tnt_result_t *rc)
{
    long on = 1;
    size_t min = 0;
    *rc = tnt__env_long(TNT_VAR_GPU_IPC, &on);
    if (*rc == TNT_SUCCESS)
        *rc = tnt__env_size(TNT_VAR_GPU_IPC_MIN_BYTES, &min);
    if (*rc < 0)
        return 0;
    size_t bytes = c->count * tnt_dtype_size(c->dtype);
    tnt_comm_t comm = c->comm;
    if (!on)
        snprintf(why, n, "TNT_GPU_IPC=0");
    else if (kernel_index(c->dtype) < 0)
        snprintf(why, n, "the GPU path takes f32, f64, f16 and bf16, not "
                 "%s", tnt_dtype_name(c->dtype));
    else if (comm->nranks < 2 || comm->nranks > TNT_GPU_IPC_MAX)
        snprintf(why, n, "the GPU path takes 2 to %d ranks, not %d",
                 TNT_GPU_IPC_MAX, comm->nranks);
    else if (comm->host_ranks != comm->nranks)
        snprintf(why, n, "the ranks are not all on one host");
    else if (bytes < min)
        snprintf(why, n, "%zu bytes, below TNT_GPU_IPC_MIN_BYTES (%zu)",
                 bytes, min);
    else
        return 1;
    return 0;
}

/* ---- the call ------------------------------------------------------------ */

typedef struct call {
    const tnt_entry_op_t *op;
    tnt_entry_runner_t run;
    const tnt_entry_call_t *c;
    const tnt_cuda_drv_t *d;
    gdev_t *g;
    int p, rank, pushed;
    desc_t all[TNT_GPU_IPC_MAX];
    tnt_cu_ptr_t mapped[2 * TNT_GPU_IPC_MAX];
    int nmapped;
    tnt_gk_args_t a;
} call_t;

/* Step 1's description of this rank (ok = 0 and why on failure). */
static void describe(call_t *k, int dev, desc_t *me)
{
    const tnt_entry_call_t *c = k->c;
    me->pid = (int32_t)getpid();
    me->in_place = c->post_send == c->post_recv;
    k->d = tnt__cuda_drv();
    if (!k->d) {
        snprintf(me->why, sizeof me->why, "%s", tnt_last_error());
        return;
    }
    k->g = device(k->d, dev, me->why, sizeof me->why);
    if (!k->g)
        return;
    memcpy(me->bus, k->g->bus, sizeof me->bus);
    if (handle_of(k->d, c->post_send, &me->send_base, &me->send_off,
                  &me->send_h, me->why, sizeof me->why) < 0)
        return;
    if (me->in_place) {
        me->recv_base = me->send_base, me->recv_off = me->send_off;
        me->recv_h = me->send_h;
    } else if (handle_of(k->d, c->post_recv, &me->recv_base, &me->recv_off,
                         &me->recv_h, me->why, sizeof me->why) < 0) {
        return;
    }
    me->ok = 1;
}

/* Peer q's buffer (send or receive) mapped here. */
static int map_peer(call_t *k, const desc_t *e, int recv, unsigned char **out,
                    char *why, size_t n)
{
    tnt_cu_ptr_t p;
    uint64_t base = recv ? e->recv_base : e->send_base;
    tnt_result_t rc = tnt__ipc_map(k->d, k->g->ctx, k->g->cudev, e->pid,
                                   base, recv ? &e->recv_h : &e->send_h, &p);
    if (rc < 0) {
        snprintf(why, n, "%s", tnt_last_error());
        return -1;
    }
    k->mapped[k->nmapped++] = p;
    *out = (unsigned char *)(uintptr_t)p + (recv ? e->recv_off : e->send_off);
    return 0;
}

/* Step 2: the peers' buffers opened, the kernel's arguments filled, the
 * input complete. 0, or -1 with why. */
static int prepare(call_t *k, char *why, size_t n)
{
    const tnt_entry_call_t *c = k->c;
    const tnt_cuda_drv_t *d = k->d;
    size_t es = tnt_dtype_size(c->dtype);
    /* Chunks of a multiple of 64 elements: aligned loads and stores. */
    size_t chunk = (c->count + (size_t)k->p - 1) / (size_t)k->p;
    chunk = (chunk + 63) & ~(size_t)63;
    size_t lo = chunk * (size_t)k->rank;
    size_t hi = lo + chunk < c->count ? lo + chunk : c->count;
    k->a.n = lo < hi ? hi - lo : 0;
    k->a.nin = k->a.nout = k->p;
    k->a.op = c->op;
    lo = lo < c->count ? lo : c->count;
    int err = d->ctx_push(k->g->ctx);
    if (err) {
        snprintf(why, n, "cuCtxPushCurrent failed: %s",
                 tnt__cuda_drv_strerror(err));
        return -1;
    }
    k->pushed = 1;
    for (int q = 0; q < k->p; q++) {
        const desc_t *e = &k->all[q];
        unsigned char *in, *out;
        if (q == k->rank) {
            in = (unsigned char *)(uintptr_t)c->post_send;
            out = c->post_recv;
        } else {
            if (memcmp(e->bus, k->g->bus, sizeof e->bus) != 0) {
                int pd, can = 0;
                char bus[17];
                memcpy(bus, e->bus, 16);
                bus[16] = '\0';
                if (d->device_get_by_pci_bus_id(&pd, bus) != 0) {
                    snprintf(why, n, "rank %d's GPU %s is not visible in "
                             "this process (CUDA_VISIBLE_DEVICES?)", q, bus);
                    return -1;
                }
                if (d->device_can_access_peer(&can, k->g->cudev, pd) != 0 ||
                    !can) {
                    snprintf(why, n, "no peer access from GPU %.16s to "
                             "rank %d's GPU %s", k->g->bus, q, bus);
                    return -1;
                }
            }
            if (map_peer(k, e, 0, &in, why, n) < 0)
                return -1;
            if (e->in_place)
                out = in;
            else if (map_peer(k, e, 1, &out, why, n) < 0)
                return -1;
        }
        k->a.in[q] = in + lo * es;
        k->a.out[q] = out + lo * es;
    }
    /* The input is complete once the work queued before the call on the
     * legacy default stream is (as the staged path's blocking stream
     * orders its copies); work on other streams the caller orders. */
    if ((err = d->stream_synchronize(TNT_CU_STREAM_LEGACY))) {
        snprintf(why, n, "waiting for the default stream failed: %s",
                 tnt__cuda_drv_strerror(err));
        return -1;
    }
    return 0;
}

/* Step 3: the kernel on this rank's chunk, waited for. */
static int reduce(call_t *k, char *why, size_t n)
{
    if (k->a.n == 0)
        return 0;
    const tnt_cuda_drv_t *d = k->d;
    unsigned long long blocks = (k->a.n + THREADS - 1) / THREADS;
    if (blocks > (unsigned long long)k->g->blocks)
        blocks = (unsigned long long)k->g->blocks;
    void *params[] = {&k->a};
    int err = d->launch_kernel(k->g->fn[kernel_index(k->c->dtype)],
                               (unsigned)blocks, 1, 1, THREADS, 1, 1, 0,
                               k->g->stream, params, NULL);
    if (!err)
        err = d->stream_synchronize(k->g->stream);
    if (err) {
        snprintf(why, n, "the reduction kernel failed: %s",
                 tnt__cuda_drv_strerror(err));
        return -1;
    }
    return 0;
}

static void finish(call_t *k)
{
    for (int i = 0; i < k->nmapped; i++)
        tnt__ipc_unmap(k->mapped[i]);
    if (k->pushed) {
        void *prev;
        k->d->ctx_pop(&prev);
    }
}

/* Every rank's `bytes` of mine into all[p * bytes], rank r's at r *
 * bytes: an allgather of host messages, made as an allreduce (the call's
 * own operation, run by the caller's runner) of u8 sums over slots that
 * one rank each fills, which is exact. Its error is the call's. */
static tnt_result_t exchange(const call_t *k, const void *mine, void *all,
                             size_t bytes)
{
    memset(all, 0, bytes * (size_t)k->p);
    memcpy((unsigned char *)all + bytes * (size_t)k->rank, mine, bytes);
    tnt_entry_call_t s = {.comm = k->c->comm, .send = TNT_IN_PLACE,
                          .recv = all, .count = bytes * (size_t)k->p,
                          .dtype = TNT_U8, .op = TNT_SUM};
    tnt_result_t rc = k->run(k->op, &s);
    if (rc < 0)
        rc = tnt__error(rc, "rank %d: %s on device memory: the exchange "
                        "between the ranks failed: %s", k->rank, k->c->fn,
                        tnt_last_error());
    return rc;
}

int tnt__devmem_ipc_try(const tnt_entry_op_t *op, const tnt_entry_call_t *c,
                        int dev, tnt_entry_runner_t run, tnt_result_t *rc)
{
    char why[240];
    if (!eligible(c, why, sizeof why, rc)) {
        if (*rc < 0)
            return 1;
        note(c->comm, 0, why);
        return 0;
    }
    call_t k = {.op = op, .run = run, .c = c, .p = c->comm->nranks,
                .rank = c->comm->rank};
    desc_t me = {0};
    describe(&k, dev, &me);
    /* 1: the handles. */
    if ((*rc = exchange(&k, &me, k.all, sizeof me)) < 0) {
        finish(&k);
        return 1;
    }
    if (first_no(k.all, sizeof(desc_t), k.p, why, sizeof why)) {
        finish(&k);
        note(c->comm, 0, why);
        return 0;
    }
    /* 2: opened and ready, or all stage the call. */
    verdict_t v = {.ok = 1}, vs[TNT_GPU_IPC_MAX];
    if (prepare(&k, v.why, sizeof v.why) < 0)
        v.ok = 0;
    if ((*rc = exchange(&k, &v, vs, sizeof v)) < 0)
        goto out;
    if (first_no(vs, sizeof(verdict_t), k.p, why, sizeof why)) {
        finish(&k);
        note(c->comm, 0, why);
        return 0;
    }
    /* 3: reduced, and every rank's result stored. */
    v.ok = reduce(&k, v.why, sizeof v.why) == 0;
    if ((*rc = exchange(&k, &v, vs, sizeof v)) < 0)
        goto out;
    if (first_no(vs, sizeof(verdict_t), k.p, why, sizeof why))
        *rc = tnt__error(TNT_ERR_SYSTEM, "rank %d: %s on the GPU failed "
                         "(the receive buffers hold undefined data): %s",
                         k.rank, c->fn, why);
    else
        note(c->comm, 1, NULL);
out:
    finish(&k);
    return 1;
}
