/*
 * Device memory staged whole (devmem.h): the calls the segment pipeline
 * (devmem_stage.c) does not take. Each device buffer of the call is
 * copied into a pinned host buffer of its size (pooled, devmem.c), the
 * call is posted on those, and the receive side is copied back when the
 * call has finished: at once for a blocking call, when tnt_test or
 * tnt_wait first sees the request finished for a nonblocking one
 * (request_api.c). Both sides are copied in, the receive side too, so
 * that what the call leaves unwritten (a non-root's receive buffer, the
 * gaps of an alltoallv, a broadcast's root) comes back as it was.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/comm.h"
#include "core/devmem.h"
#include "util/error.h"

struct tnt_staged {
    const tnt_devmem_ops_t *ops;
    int dev;
    void *dev_recv;            /* the device receive buffer, or NULL */
    void *pin_send, *pin_recv; /* pinned copies (pin_recv may be pin_send) */
    size_t send_cap, recv_cap; /* their pooled capacities */
    size_t recv_bytes;
    struct tnt_request *req;   /* nonblocking: the request it belongs to */
    struct tnt_staged *next;
};

/* Byte extents of this rank's send and receive buffers in the call. */
static void extents(const tnt_entry_op_t *op, const tnt_entry_call_t *c,
                    size_t *sb, size_t *rb)
{
    size_t es = tnt_dtype_size(c->dtype), n = c->count * es;
    size_t np = n * (size_t)c->comm->nranks;
    switch (op->kind) {
    case TNT_COLL_ALLGATHER: case TNT_COLL_GATHER:
        *sb = n, *rb = np;
        break;
    case TNT_COLL_REDUCE_SCATTER: case TNT_COLL_SCATTER:
        *sb = np, *rb = n;
        break;
    case TNT_COLL_ALLTOALL:
        *sb = *rb = np;
        break;
    case TNT_COLL_ALLTOALLV: {
        const size_t *const *v = c->extra; /* counts, displs: s, then r */
        *sb = *rb = 0;
        for (int q = 0; q < c->comm->nranks; q++) {
            size_t s = (v[0][q] + v[1][q]) * es, r = (v[2][q] + v[3][q]) * es;
            if (v[0][q] && s > *sb)
                *sb = s;
            if (v[2][q] && r > *rb)
                *rb = r;
        }
        break;
    }
    default: /* allreduce, broadcast, reduce, send, receive */
        *sb = *rb = n;
    }
}

int tnt__devmem_any_bytes(const tnt_entry_op_t *op, const tnt_entry_call_t *c)
{
    size_t sb, rb;
    extents(op, c, &sb, &rb);
    return sb > 0 || rb > 0;
}

static void release(tnt_staged_t *st)
{
    if (st->pin_send)
        tnt__pinned_give(st->pin_send, st->send_cap);
    if (st->pin_recv && st->pin_recv != st->pin_send)
        tnt__pinned_give(st->pin_recv, st->recv_cap);
    free(st);
}

/* A blocking copy of n bytes on a stager of device dev. */
static tnt_result_t copy_now(int dev, void *dst, const void *src, size_t n)
{
    if (n == 0)
        return TNT_SUCCESS;
    tnt_stager_t *s;
    TNT_CHECK(tnt__stager_take(dev, &s));
    tnt_result_t rc = s->ops->copy(s->stream, dst, src, n);
    tnt_result_t rs = s->ops->sync(s->stream);
    tnt__stager_give(s, rc == TNT_SUCCESS && rs == TNT_SUCCESS);
    return rc < 0 ? rc : rs;
}

tnt_result_t tnt__devmem_in(const tnt_entry_op_t *op, tnt_entry_call_t *c,
                            int dev, tnt_staged_t **out)
{
    *out = NULL;
    tnt_staged_t *st = calloc(1, sizeof *st);
    if (!st)
        return tnt__error(TNT_ERR_NO_MEMORY, "rank %d: %s: staging: out of "
                          "memory", c->comm->rank, c->fn);
    st->ops = tnt__devmem_ops();
    st->dev = dev;
    size_t sb, rb;
    extents(op, c, &sb, &rb);
    const tnt_devmem_ops_t *o = st->ops;
    int ds = c->post_send && o->is_device(c->post_send) > 0;
    int dr = c->post_recv && o->is_device(c->post_recv) > 0;
    tnt_result_t rc = TNT_SUCCESS;
    if (ds && sb) {
        rc = tnt__pinned_take(sb, &st->pin_send, &st->send_cap);
        if (rc == TNT_SUCCESS)
            rc = copy_now(dev, st->pin_send, c->post_send, sb);
    }
    if (rc == TNT_SUCCESS && dr && rb) {
        if ((const void *)c->post_recv == c->post_send && st->pin_send) {
            st->pin_recv = st->pin_send; /* in place: one copy */
        } else {
            rc = tnt__pinned_take(rb, &st->pin_recv, &st->recv_cap);
            if (rc == TNT_SUCCESS)
                rc = copy_now(dev, st->pin_recv, c->post_recv, rb);
        }
        st->dev_recv = c->post_recv;
        st->recv_bytes = rb;
    }
    if (rc < 0) {
        release(st);
        return rc;
    }
    if (st->pin_send)
        c->post_send = st->pin_send;
    if (st->pin_recv)
        c->post_recv = st->pin_recv;
    *out = st;
    return TNT_SUCCESS;
}

tnt_result_t tnt__devmem_out(tnt_staged_t *st, tnt_result_t rc)
{
    if (rc == TNT_SUCCESS && st->dev_recv) {
        rc = copy_now(st->dev, st->dev_recv, st->pin_recv, st->recv_bytes);
        if (rc < 0)
            rc = tnt__error(rc, "copying the result back to device memory "
                            "failed: %s", tnt_last_error());
    }
    release(st);
    return rc;
}

/* ---- nonblocking: the requests with staged buffers -------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tnt_staged_t *g_staged; /* by request */
static int g_nstaged;          /* read without the lock: 0 is the norm */

void tnt__devmem_attach(tnt_staged_t *st, struct tnt_request *req)
{
    st->req = req;
    pthread_mutex_lock(&g_lock);
    st->next = g_staged;
    g_staged = st;
    __atomic_store_n(&g_nstaged, g_nstaged + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
}

static tnt_staged_t *detach(struct tnt_request *req)
{
    if (__atomic_load_n(&g_nstaged, __ATOMIC_ACQUIRE) == 0)
        return NULL;
    tnt_staged_t *st = NULL;
    pthread_mutex_lock(&g_lock);
    for (tnt_staged_t **pp = &g_staged; *pp; pp = &(*pp)->next) {
        if ((*pp)->req == req) {
            st = *pp;
            *pp = st->next;
            __atomic_store_n(&g_nstaged, g_nstaged - 1, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return st;
}

tnt_result_t tnt__devmem_finish(struct tnt_request *req, tnt_result_t rc)
{
    tnt_staged_t *st = detach(req);
    return st ? tnt__devmem_out(st, rc) : rc;
}

int tnt__devmem_staged(struct tnt_request *req)
{
    if (__atomic_load_n(&g_nstaged, __ATOMIC_ACQUIRE) == 0)
        return 0;
    pthread_mutex_lock(&g_lock);
    tnt_staged_t *st = g_staged;
    while (st && st->req != req)
        st = st->next;
    pthread_mutex_unlock(&g_lock);
    return st != NULL;
}
