/*
 * Large reductions and copies, run with comm->group->lock released. Everything
 * else in the engine runs under the lock, and so did these once; but a
 * reduction of a few MiB takes milliseconds, and a thread that posts or
 * tests a collective (fusion's tnt_fusion_ready on the training thread)
 * then waited for it. Now tnt__run_ready queues every ready operation of
 * at least TNT_UNLOCKED_BYTES that only computes (reduce, copy, scale, and
 * the copy of a large early message into its receive), and the poller
 * runs the queue at safe points: before it waits in epoll and after it
 * has dispatched a batch, never inside a transport callback (a transport
 * expects the lock held across its own calls).
 *
 * What may happen while the lock is free, and why it is safe:
 * - other ready operations of the same request run (a thread posting,
 *   the connect path): only under the lock, and the schedule orders every
 *   operation that touches the buffer this one writes after it;
 * - only the poller runs the queue, so one computation at a time;
 * - the request fails (tnt__engine_fail, a deadline, tnt_comm_abort):
 *   finish() sees req->compute.busy and leaves the result unset, so no waiter
 *   returns and no detached request is freed while its buffers are in
 *   use; the computation's return publishes the result (late finish);
 * - the communicator is freed: tnt__engine_drain waits until comm->reqs.busy
 *   is 0 before it hands the scratch buffers back.
 * The order of arithmetic is fixed by the schedule, so running a
 * reduction later, on another thread, gives the same bits.
 */
#include <string.h>

#include "collectives/canon.h"
#include "core/engine.h"
#include "core/engine_internal.h"

int tnt__op_is_heavy(const struct tnt_comm *comm,
                     const struct tnt_request *req, uint32_t op)
{
    const tnt_sop_t *sop = &req->sched->ops[op];
    if (sop->kind != TNT_SOP_REDUCE && sop->kind != TNT_SOP_COPY &&
        sop->kind != TNT_SOP_SCALE && sop->kind != TNT_SOP_CANON)
        return 0;
    return sop->bytes >= comm->params.unlocked_bytes;
}

void tnt__queue_heavy(struct tnt_comm *comm, struct tnt_request *req,
                      uint32_t op)
{
    tnt_opstate_t *os = &req->ops[op];
    os->next = req->compute.heavy;
    req->compute.heavy = os;
    if (req->compute.heavy_queued)
        return;
    req->compute.heavy_queued = 1;
    tnt__list_push_back(&comm->reqs.heavy, &req->compute.heavy_link);
}

void tnt__unqueue_heavy(struct tnt_comm *comm, struct tnt_request *req)
{
    if (tnt__list_linked(&req->compute.heavy_link))
        tnt__list_unlink(&req->compute.heavy_link);
    /* Early messages taken off their peer's list for a copy that will
     * not happen now. */
    for (tnt_opstate_t *os = req->compute.heavy; os; os = os->next)
        if (os->src) {
            tnt__free_unexp(comm, os->src);
            os->src = NULL;
        }
    req->compute.heavy = NULL;
    req->compute.heavy_queued = 0;
}

void tnt__run_compute(const struct tnt_request *req, uint32_t op)
{
    const tnt_sop_t *sop = &req->sched->ops[op];
    size_t n = req->sched->esize ? sop->bytes / req->sched->esize : 0;
    unsigned char *dst = req->bufs[sop->dst.buf] + sop->dst.off;
    switch (sop->kind) {
    case TNT_SOP_REDUCE:
        if (n)
            req->reduce(dst, req->bufs[sop->a.buf] + sop->a.off,
                        req->bufs[sop->b.buf] + sop->b.off, n);
        break;
    case TNT_SOP_COPY: {
        unsigned char *s = req->bufs[sop->a.buf] + sop->a.off;
        if (dst != s && sop->bytes)
            memcpy(dst, s, sop->bytes);
        break;
    }
    case TNT_SOP_SCALE:
        if (n)
            tnt__scale_avg(dst, n, req->args.dtype, req->args.nranks);
        break;
    case TNT_SOP_CANON:
        if (n)
            tnt__canon_reduce(dst, req->bufs[sop->a.buf] + sop->a.off,
                              sop->peer, req->bufs[sop->b.buf] + sop->b.off,
                              sop->stride, req->sched->nranks, n,
                              req->args.dtype, req->args.op);
        break;
    default:
        break;
    }
}

/* Take the next queued operation, or NULL. */
static tnt_opstate_t *next_heavy(struct tnt_comm *comm)
{
    tnt_list_node_t *first = tnt__list_first(&comm->reqs.heavy);
    if (!first)
        return NULL;
    struct tnt_request *req =
        TNT_LIST_ENTRY(first, struct tnt_request, compute.heavy_link);
    tnt_opstate_t *os = req->compute.heavy;
    req->compute.heavy = os->next;
    os->next = NULL;
    if (!req->compute.heavy) {
        tnt__list_unlink(&req->compute.heavy_link);
        req->compute.heavy_queued = 0;
    }
    return os;
}

int tnt__engine_run_heavy(struct tnt_comm *comm)
{
    int ran = 0;
    tnt_opstate_t *os;
    while (comm->state == TNT_COMM_OK && (os = next_heavy(comm))) {
        struct tnt_request *req = os->coll;
        /* os->src stays set while the copy runs: the receive has its
         * data (peer_needed), and unqueue_heavy no longer sees it. */
        tnt_unexp_t *u = os->src;
        /* Everything the computation reads is fixed while the request
         * is in flight: schedule, buffers, reduce function. */
        unsigned char *dst = u ? req->bufs[req->sched->ops[os->op].dst.buf] +
                                 req->sched->ops[os->op].dst.off
                               : NULL;
        req->compute.busy++;
        comm->reqs.busy++;
        pthread_mutex_unlock(&comm->group->lock);
        if (u) {
            if (u->len)
                memcpy(dst, u->data, u->len);
        } else {
            tnt__run_compute(req, os->op);
        }
        pthread_mutex_lock(&comm->group->lock);
        ran = 1;
        comm->reqs.busy--;
        req->compute.busy--;
        if (u) {
            os->src = NULL;
            tnt__free_unexp(comm, u);
        }
        if (req->compute.finish_late) {
            if (req->compute.busy == 0)
                tnt__finish_late(req);
        } else if (req->result == TNT_INPROGRESS) {
            tnt__op_complete(req, os->op);
            tnt__run_ready(comm, req);
        }
        /* tnt__engine_drain waits for the last computation. */
        if (comm->reqs.busy == 0 && comm->state != TNT_COMM_OK)
            pthread_cond_broadcast(&comm->group->progress.cond);
    }
    return ran;
}
