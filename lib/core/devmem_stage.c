/*
 * Staging a blocking collective on device memory through pinned host
 * buffers (devmem.h). The buffer is cut in segments that fill one slot;
 * with two slots and one in-order stream:
 *
 *   queue copy-in 0; mark 0
 *   for each segment k: wait for copy-in k; queue copy-in k+1 into the
 *     other slot, mark; run the collective on slot k (host memory);
 *     queue copy-out k
 *   wait for the stream
 *
 * so the copy of segment k+1 (and the copy back of k-1) run while the
 * collective of k does. Copy-in k+1 reuses the slot of k-1 after that
 * slot's copy-out, which the stream's order guarantees.
 *
 * Every rank cuts the same count in the same segments (slot size, rank
 * count and element size are the same everywhere), so the ranks' segment
 * collectives pair one to one. A rank that passed host memory where the
 * others passed device memory posts one collective of the whole count:
 * above one segment the counts differ and every rank gets
 * TNT_ERR_MISMATCH from the signature check; within one the segment is
 * the whole call and the result is right.
 */
#include <stdint.h>
#include <stdio.h>

#include "core/comm.h"
#include "core/devmem.h"
#include "core/progress.h"
#include "util/error.h"

typedef struct plan {
    const tnt_entry_op_t *op;
    const tnt_entry_call_t *c;
    tnt_stager_t *s;
    int rank, nranks;
    size_t es, count;
    const unsigned char *src; /* the input (allgather: this rank's block) */
    unsigned char *dst;
    int collective_failed;    /* the error came from a segment's call */
} plan_t;

/* Elements of a segment: the slot holds 1 block (allreduce, broadcast),
 * nranks (allgather) or nranks + 1 (reduce-scatter: input and result). */
static size_t blocks(const plan_t *p)
{
    int k = p->op->kind;
    return k == TNT_COLL_ALLGATHER ? (size_t)p->nranks
           : k == TNT_COLL_REDUCE_SCATTER ? (size_t)p->nranks + 1 : 1;
}

static tnt_result_t copy_in(plan_t *p, int slot, size_t off, size_t n)
{
    unsigned char *b = p->s->slot[slot];
    const tnt_devmem_ops_t *o = p->s->ops;
    size_t bytes = n * p->es;
    switch (p->op->kind) {
    case TNT_COLL_BROADCAST:
        if (p->rank != p->c->root)
            return TNT_SUCCESS;
        return o->copy(p->s->stream, b, p->dst + off * p->es, bytes);
    case TNT_COLL_ALLGATHER:
        return o->copy(p->s->stream, b + (size_t)p->rank * bytes,
                       p->src + off * p->es, bytes);
    case TNT_COLL_REDUCE_SCATTER:
        for (int r = 0; r < p->nranks; r++)
            TNT_CHECK(o->copy(p->s->stream, b + (size_t)r * bytes,
                              p->src + ((size_t)r * p->count + off) * p->es,
                              bytes));
        return TNT_SUCCESS;
    default: /* allreduce */
        return o->copy(p->s->stream, b, p->src + off * p->es, bytes);
    }
}

static tnt_result_t copy_out(plan_t *p, int slot, size_t off, size_t n)
{
    unsigned char *b = p->s->slot[slot];
    const tnt_devmem_ops_t *o = p->s->ops;
    size_t bytes = n * p->es;
    switch (p->op->kind) {
    case TNT_COLL_BROADCAST:
        if (p->rank == p->c->root)
            return TNT_SUCCESS;
        return o->copy(p->s->stream, p->dst + off * p->es, b, bytes);
    case TNT_COLL_ALLGATHER:
        for (int r = 0; r < p->nranks; r++)
            TNT_CHECK(o->copy(p->s->stream,
                              p->dst + ((size_t)r * p->count + off) * p->es,
                              b + (size_t)r * bytes, bytes));
        return TNT_SUCCESS;
    case TNT_COLL_REDUCE_SCATTER:
        return o->copy(p->s->stream, p->dst + off * p->es,
                       b + (size_t)p->nranks * bytes, bytes);
    default:
        return o->copy(p->s->stream, p->dst + off * p->es, b, bytes);
    }
}

/* The collective of one segment on slot memory, as its own call. */
static tnt_result_t run_segment(plan_t *p, int slot, size_t n)
{
    unsigned char *b = p->s->slot[slot];
    tnt_entry_call_t s = {.comm = p->c->comm, .count = n,
                          .dtype = p->c->dtype, .op = p->c->op,
                          .root = p->c->root};
    switch (p->op->kind) {
    case TNT_COLL_BROADCAST:
        s.send = s.recv = b;
        break;
    case TNT_COLL_REDUCE_SCATTER:
        s.send = b;
        s.recv = b + (size_t)p->nranks * n * p->es;
        break;
    default: /* allreduce, allgather: in place */
        s.send = TNT_IN_PLACE;
        s.recv = b;
    }
    return tnt__entry_run(p->op, &s);
}

static tnt_result_t pipeline(plan_t *p)
{
    size_t seg = p->s->slot_bytes / (p->es * blocks(p));
    if (seg == 0)
        return tnt__error(TNT_ERR_UNSUPPORTED, "rank %d: %s: a staging "
                          "slot of %zu bytes holds no segment at %d ranks",
                          p->rank, p->c->fn, p->s->slot_bytes, p->nranks);
    const tnt_devmem_ops_t *o = p->s->ops;
    void *st = p->s->stream;
    size_t nseg = (p->count + seg - 1) / seg;
    TNT_CHECK(copy_in(p, 0, 0, p->count < seg ? p->count : seg));
    TNT_CHECK(o->mark(st, 0));
    for (size_t k = 0; k < nseg; k++) {
        int slot = (int)(k & 1);
        size_t off = k * seg, n = p->count - off < seg ? p->count - off
                                                       : seg;
        TNT_CHECK(o->wait(st, slot));
        if (k + 1 < nseg) {
            size_t off1 = off + seg;
            size_t n1 = p->count - off1 < seg ? p->count - off1 : seg;
            TNT_CHECK(copy_in(p, slot ^ 1, off1, n1));
            TNT_CHECK(o->mark(st, slot ^ 1));
        }
        tnt_result_t rc = run_segment(p, slot, n);
        if (rc < 0) {
            p->collective_failed = 1; /* on every rank already */
            return rc;
        }
        TNT_CHECK(copy_out(p, slot, off, n));
    }
    return TNT_SUCCESS;
}

/* A failure of this rank alone (no stream, no pinned memory, a copy
 * refused) would leave the others waiting in the segment collectives:
 * the communicator fails on every rank, as entry.c does for a second
 * thread. */
tnt_result_t tnt__devmem_fail_comm(tnt_comm_t comm, tnt_result_t rc)
{
    char msg[400];
    snprintf(msg, sizeof msg, "rank %d: staging device memory failed (the "
             "communicator fails on every rank): %s", comm->rank,
             tnt_last_error());
    tnt__lock_to_post(comm);
    tnt__engine_fail(comm, rc, "%s", msg);
    tnt__progress_wake(comm);
    pthread_mutex_unlock(&comm->group->lock);
    return tnt__error(rc, "%s", msg);
}

tnt_result_t tnt__devmem_stage(const tnt_entry_op_t *op,
                               const tnt_entry_call_t *c, int dev)
{
    tnt_result_t rc;
    if (op->kind == TNT_COLL_ALLREDUCE &&
        tnt__devmem_ipc_try(op, c, dev, tnt__entry_run, &rc))
        return rc; /* on the GPU (devmem_ipc.c) */
    plan_t p = {.op = op, .c = c, .rank = c->comm->rank,
                .nranks = c->comm->nranks, .es = tnt_dtype_size(c->dtype),
                .count = c->count, .src = c->post_send,
                .dst = c->post_recv};
    if (op->kind == TNT_COLL_ALLGATHER && c->args->in_place)
        p.src = p.dst + (size_t)p.rank * p.count * p.es;
    rc = tnt__stager_take(dev, &p.s);
    if (rc < 0)
        return tnt__devmem_fail_comm(c->comm, rc);
    rc = pipeline(&p);
    if (rc < 0 && !p.collective_failed)
        rc = tnt__devmem_fail_comm(c->comm, rc);
    /* Copies still queued read or write the caller's buffers: wait for
     * them, on errors too. */
    tnt_result_t rs = p.s->ops->sync(p.s->stream);
    tnt__stager_give(p.s, rc == TNT_SUCCESS && rs == TNT_SUCCESS);
    if (rc == TNT_SUCCESS && rs < 0)
        return tnt__devmem_fail_comm(c->comm, rs);
    return rc;
}
