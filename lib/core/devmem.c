/*
 * Device memory (devmem.h): which buffers are on a device, CUDA's copy
 * engine, and the pool of stagers (a stream and two pinned slots each),
 * taken per call and kept for the next: nothing pinned is allocated in
 * the steady state.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/devmem.h"
#include "util/cuda_rt.h"
#include "util/error.h"

/* ---- CUDA's copy engine ---------------------------------------------- */

/* cudaMemcpyDefault (4): the direction follows from the pointers (UVA);
 * cudaStreamDefault (0), cudaEventDisableTiming (2),
 * cudaHostAllocPortable (1): the values of driver_types.h.
 *
 * The staging stream is a blocking one (cudaStreamDefault, not
 * cudaStreamNonBlocking): its copies start after the work queued before
 * them on the legacy default stream, as a cudaMemcpy would. A pageable
 * cudaMemcpy to the device may return before its DMA lands; with a
 * nonblocking stream the staging read the old contents (seen on the H100:
 * wrong sums at 2 and 4 ranks on one GPU). Work on other streams the
 * caller orders itself (the torch backend waits for the tensor's stream). */
enum { CU_MEMCPY_DEFAULT = 4, CU_STREAM_DEFAULT = 0,
       CU_EVENT_NO_TIMING = 2, CU_HOST_ALLOC_PORTABLE = 1 };

typedef struct cuda_stream {
    void *stream;
    void *ev[2];
} cuda_stream_t;

static tnt_result_t cuda_fail(const char *what, int err)
{
    return tnt__error(TNT_ERR_SYSTEM, "CUDA %s failed: %s", what,
                      tnt__cuda_strerror(err));
}

/* The stream and events are made on device dev; the calling thread's
 * current device is put back (the application's, not ours). */
static tnt_result_t cuda_open(int dev, void **out)
{
    const tnt_cuda_rt_t *rt = tnt__cuda_rt();
    if (!rt)
        return TNT_ERR_UNSUPPORTED; /* the message says why */
    int cur = 0;
    int err = rt->get_device(&cur);
    if (!err)
        err = rt->set_device(dev);
    if (err)
        return cuda_fail("cudaSetDevice", err);
    tnt_result_t rc = TNT_SUCCESS;
    cuda_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        rc = tnt__error(TNT_ERR_NO_MEMORY, "staging stream: out of memory");
    if (s && ((err = rt->stream_create_with_flags(&s->stream,
                                                  CU_STREAM_DEFAULT)) ||
        (err = rt->event_create_with_flags(&s->ev[0], CU_EVENT_NO_TIMING)) ||
        (err = rt->event_create_with_flags(&s->ev[1],
                                           CU_EVENT_NO_TIMING)))) {
        for (int i = 0; i < 2; i++)
            if (s->ev[i])
                rt->event_destroy(s->ev[i]);
        if (s->stream)
            rt->stream_destroy(s->stream);
        free(s);
        rc = cuda_fail("stream or event creation", err);
    }
    rt->set_device(cur);
    if (rc == TNT_SUCCESS)
        *out = s;
    return rc;
}

static void cuda_close(void *stream)
{
    const tnt_cuda_rt_t *rt = tnt__cuda_rt();
    cuda_stream_t *s = stream;
    rt->event_destroy(s->ev[0]);
    rt->event_destroy(s->ev[1]);
    rt->stream_destroy(s->stream);
    free(s);
}

static tnt_result_t cuda_alloc_pinned(size_t n, void **p)
{
    int err = tnt__cuda_rt()->host_alloc(p, n, CU_HOST_ALLOC_PORTABLE);
    if (err)
        return tnt__error(TNT_ERR_NO_MEMORY, "cudaHostAlloc of %zu bytes "
                          "for staging failed: %s", n,
                          tnt__cuda_strerror(err));
    return TNT_SUCCESS;
}

static void cuda_free_pinned(void *p)
{
    tnt__cuda_rt()->free_host(p);
}

static tnt_result_t cuda_copy(void *stream, void *dst, const void *src,
                              size_t n)
{
    cuda_stream_t *s = stream;
    int err = tnt__cuda_rt()->memcpy_async(dst, src, n, CU_MEMCPY_DEFAULT,
                                           s->stream);
    return err ? cuda_fail("cudaMemcpyAsync", err) : TNT_SUCCESS;
}

static tnt_result_t cuda_mark(void *stream, int ev)
{
    cuda_stream_t *s = stream;
    int err = tnt__cuda_rt()->event_record(s->ev[ev], s->stream);
    return err ? cuda_fail("cudaEventRecord", err) : TNT_SUCCESS;
}

static tnt_result_t cuda_wait(void *stream, int ev)
{
    cuda_stream_t *s = stream;
    int err = tnt__cuda_rt()->event_synchronize(s->ev[ev]);
    return err ? cuda_fail("cudaEventSynchronize", err) : TNT_SUCCESS;
}

static tnt_result_t cuda_sync(void *stream)
{
    cuda_stream_t *s = stream;
    int err = tnt__cuda_rt()->stream_synchronize(s->stream);
    return err ? cuda_fail("cudaStreamSynchronize", err) : TNT_SUCCESS;
}

/* 1 + the device of p, as is_device promises; device memory that the
 * driver alone could tell (no runtime to copy it) is refused. */
static int cuda_device_of(const void *p)
{
    int r = tnt__cuda_is_device(p);
    if (r > 0 && !tnt__cuda_rt()) {
        char why[300]; /* tnt_last_error's buffer is rewritten below */
        snprintf(why, sizeof why, "%s", tnt_last_error());
        return tnt__error(TNT_ERR_UNSUPPORTED, "a CUDA device buffer was "
                          "passed, and it cannot be staged: %s", why);
    }
    return r;
}

static const tnt_devmem_ops_t k_cuda_ops = {
    "cuda", cuda_device_of, cuda_open, cuda_close, cuda_alloc_pinned,
    cuda_free_pinned, cuda_copy, cuda_mark, cuda_wait, cuda_sync};

/* ---- which ops, and the pool ----------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const tnt_devmem_ops_t *g_ops = &k_cuda_ops;
static size_t g_slot_bytes = TNT_DEVMEM_SLOT_BYTES;
static tnt_stager_t *g_pool;

/* Whole-call staging's pinned buffers (devmem_whole.c): sizes rounded up
 * to a power of two from 64 KiB, kept for the next call up to
 * PINNED_KEEP bytes in all (a training step's buckets reuse them). */
#define PINNED_MIN ((size_t)64 << 10)
#define PINNED_KEEP ((size_t)1 << 30)
typedef struct pinned {
    void *p;
    size_t cap;
    struct pinned *next;
} pinned_t;
static pinned_t *g_pinned;
static size_t g_pinned_kept;

const tnt_devmem_ops_t *tnt__devmem_ops(void)
{
    return __atomic_load_n(&g_ops, __ATOMIC_ACQUIRE);
}

tnt_result_t tnt__pinned_take(size_t n, void **p, size_t *cap)
{
    size_t c = PINNED_MIN;
    while (c < n && c <= SIZE_MAX / 2)
        c *= 2;
    pthread_mutex_lock(&g_lock);
    for (pinned_t **pp = &g_pinned; *pp; pp = &(*pp)->next) {
        if ((*pp)->cap == c) {
            pinned_t *b = *pp;
            *pp = b->next;
            g_pinned_kept -= c;
            pthread_mutex_unlock(&g_lock);
            *p = b->p;
            *cap = c;
            free(b);
            return TNT_SUCCESS;
        }
    }
    const tnt_devmem_ops_t *ops = g_ops;
    pthread_mutex_unlock(&g_lock);
    TNT_CHECK(ops->alloc_pinned(c, p));
    *cap = c;
    return TNT_SUCCESS;
}

void tnt__pinned_give(void *p, size_t cap)
{
    pinned_t *b = malloc(sizeof *b);
    pthread_mutex_lock(&g_lock);
    if (b && g_pinned_kept + cap <= PINNED_KEEP) {
        *b = (pinned_t){p, cap, g_pinned};
        g_pinned = b;
        g_pinned_kept += cap;
        p = NULL, b = NULL;
    }
    const tnt_devmem_ops_t *ops = g_ops;
    pthread_mutex_unlock(&g_lock);
    free(b);
    if (p)
        ops->free_pinned(p);
}

static void stager_free(tnt_stager_t *s)
{
    for (int i = 0; i < 2; i++)
        if (s->slot[i])
            s->ops->free_pinned(s->slot[i]);
    if (s->stream)
        s->ops->close(s->stream);
    free(s);
}

void tnt__devmem_use(const tnt_devmem_ops_t *ops, size_t slot_bytes)
{
    pthread_mutex_lock(&g_lock);
    while (g_pool) {
        tnt_stager_t *s = g_pool;
        g_pool = s->next;
        stager_free(s);
    }
    while (g_pinned) {
        pinned_t *b = g_pinned;
        g_pinned = b->next;
        g_ops->free_pinned(b->p);
        free(b);
    }
    g_pinned_kept = 0;
    __atomic_store_n(&g_ops, ops ? ops : &k_cuda_ops, __ATOMIC_RELEASE);
    g_slot_bytes = slot_bytes ? slot_bytes : TNT_DEVMEM_SLOT_BYTES;
    pthread_mutex_unlock(&g_lock);
}

tnt_result_t tnt__stager_take(int dev, tnt_stager_t **out)
{
    pthread_mutex_lock(&g_lock);
    for (tnt_stager_t **pp = &g_pool; *pp; pp = &(*pp)->next) {
        if ((*pp)->dev == dev) {
            *out = *pp;
            *pp = (*pp)->next;
            pthread_mutex_unlock(&g_lock);
            return TNT_SUCCESS;
        }
    }
    const tnt_devmem_ops_t *ops = g_ops;
    size_t bytes = g_slot_bytes;
    pthread_mutex_unlock(&g_lock);
    tnt_stager_t *s = calloc(1, sizeof *s);
    if (!s)
        return tnt__error(TNT_ERR_NO_MEMORY, "staging: out of memory");
    s->ops = ops;
    s->dev = dev;
    s->slot_bytes = bytes;
    tnt_result_t rc = ops->open(dev, &s->stream);
    for (int i = 0; i < 2 && rc == TNT_SUCCESS; i++)
        rc = ops->alloc_pinned(bytes, &s->slot[i]);
    if (rc < 0) {
        stager_free(s);
        return rc;
    }
    *out = s;
    return TNT_SUCCESS;
}

void tnt__stager_give(tnt_stager_t *s, int ok)
{
    pthread_mutex_lock(&g_lock);
    if (ok && s->ops == g_ops && s->slot_bytes == g_slot_bytes) {
        s->next = g_pool;
        g_pool = s;
        s = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    if (s)
        stager_free(s);
}

/* ---- the check on every call ----------------------------------------- */

/* The kinds the segment pipeline takes (blocking calls); the others,
 * and the nonblocking calls, are staged whole (devmem_whole.c). */
int tnt__devmem_pipelined(int kind)
{
    return kind == TNT_COLL_ALLREDUCE || kind == TNT_COLL_BROADCAST ||
           kind == TNT_COLL_ALLGATHER || kind == TNT_COLL_REDUCE_SCATTER;
}

/* Host memory this process can read? One byte, read through the kernel
 * (process_vm_readv of this process), which answers EFAULT instead of a
 * fault. Asked only where CUDA is in the process and CUDA said "not
 * mine": a device address from another process (not opened with
 * cudaIpcOpenMemHandle) usually lies in this process's reserved but
 * unmapped address range, and would crash the first host read. Where the
 * kernel refuses the call itself (seccomp), the pointer is taken as it
 * is. */
static int host_readable(const void *p)
{
    char b;
    struct iovec here = {&b, 1}, there = {(void *)(uintptr_t)p, 1};
    if (process_vm_readv(getpid(), &here, 1, &there, 1, 0) == 1)
        return 1;
    return errno != EFAULT;
}

/* 1 + the device of p, 0 host memory, negative with the message set. */
static int kind_of(const tnt_devmem_ops_t *ops, const tnt_entry_call_t *c,
                   const void *p, const char *what)
{
    int d = ops->is_device(p);
    if (d < 0) {
        char why[300];
        snprintf(why, sizeof why, "%s", tnt_last_error());
        return tnt__error(d, "rank %d: %s: %s", c->comm->rank, c->fn, why);
    }
    if (d == 0 && !host_readable(p))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: the %s buffer "
                          "%p is neither memory of this process nor CUDA "
                          "memory it knows (a device pointer from another "
                          "process? open it with cudaIpcOpenMemHandle)",
                          c->comm->rank, c->fn, what, p);
    return d;
}

int tnt__devmem_check(const tnt_entry_op_t *op, const tnt_entry_call_t *c)
{
    const tnt_devmem_ops_t *ops = __atomic_load_n(&g_ops, __ATOMIC_ACQUIRE);
    /* The default path: CUDA's ops and no driver in the process, one
     * cached look (cuda_rt.h); no device pointer can exist. */
    if (ops == &k_cuda_ops && !tnt__cuda_in_process())
        return 0;
    if (c->count == 0 && (op->kind != TNT_COLL_ALLTOALLV ||
                          !tnt__devmem_any_bytes(op, c)))
        return 0;
    int ds = c->post_send ? kind_of(ops, c, c->post_send, "send") : 0;
    if (ds < 0)
        return ds;
    int dr = c->post_recv && c->post_recv != c->post_send
                 ? kind_of(ops, c, c->post_recv, "receive") : ds;
    if (dr < 0)
        return dr;
    if (!ds && !dr)
        return 0;
    if (ds && dr && ds != dr)
        return tnt__error(TNT_ERR_UNSUPPORTED, "rank %d: %s: the send "
                          "buffer is on device %d and the receive buffer "
                          "on device %d; both must be on one", c->comm->rank,
                          c->fn, ds - 1, dr - 1);
    return ds ? ds : dr;
}
