/*
 * Device memory (devmem.h): which buffers are on a device, CUDA's copy
 * engine, and the pool of stagers (a stream and two pinned slots each),
 * taken per call and kept for the next: nothing pinned is allocated in
 * the steady state.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/comm.h"
#include "core/devmem.h"
#include "util/cuda_rt.h"
#include "util/error.h"

/* ---- CUDA's copy engine ---------------------------------------------- */

/* cudaMemcpyDefault (4): the direction follows from the pointers (UVA);
 * cudaStreamNonBlocking (1), cudaEventDisableTiming (2),
 * cudaHostAllocPortable (1): the values of driver_types.h. */
enum { CU_MEMCPY_DEFAULT = 4, CU_STREAM_NONBLOCKING = 1,
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
                                                  CU_STREAM_NONBLOCKING)) ||
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

/* The kinds staging handles; the others refuse device memory. */
static int stageable(int kind)
{
    return kind == TNT_COLL_ALLREDUCE || kind == TNT_COLL_BROADCAST ||
           kind == TNT_COLL_ALLGATHER || kind == TNT_COLL_REDUCE_SCATTER;
}

int tnt__devmem_check(const tnt_entry_op_t *op, const tnt_entry_call_t *c)
{
    const tnt_devmem_ops_t *ops = __atomic_load_n(&g_ops, __ATOMIC_ACQUIRE);
    /* The default path: CUDA's ops and no driver in the process, one
     * cached look (cuda_rt.h); no device pointer can exist. */
    if (c->count == 0 || (ops == &k_cuda_ops && !tnt__cuda_in_process()))
        return 0;
    int ds = c->post_send ? ops->is_device(c->post_send) : 0;
    if (ds < 0)
        return ds;
    int dr = c->post_recv && c->post_recv != c->post_send
                 ? ops->is_device(c->post_recv) : ds;
    if (dr < 0)
        return dr;
    if (!ds && !dr)
        return 0;
    if (!stageable(op->kind))
        return tnt__error(TNT_ERR_UNSUPPORTED, "rank %d: %s: device memory "
                          "is taken by tnt_allreduce, tnt_broadcast, "
                          "tnt_allgather and tnt_reduce_scatter only; copy "
                          "the buffers to host memory for this call",
                          c->comm->rank, c->fn);
    if (ds && dr && ds != dr)
        return tnt__error(TNT_ERR_UNSUPPORTED, "rank %d: %s: the send "
                          "buffer is on device %d and the receive buffer "
                          "on device %d; both must be on one", c->comm->rank,
                          c->fn, ds - 1, dr - 1);
    return ds ? ds : dr;
}
