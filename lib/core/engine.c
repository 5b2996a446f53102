/*
 * Executing schedules and matching messages. Every function here runs with
 * comm->group->lock held (the progress thread's transport callbacks and the user
 * threads that post and wait share that one lock).
 *
 * Failure policy: any error inside a collective (peer lost, mismatch,
 * protocol violation, deadline) fails the whole communicator. Sequence
 * numbers and in-flight messages are no longer consistent after such an
 * event, so going on would risk wrong results; closing every connection
 * makes the peers fail fast too, instead of waiting for their deadlines.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "util/error.h"
#include "util/log.h"
#include "core/engine_internal.h"
#include "core/onhost/onhost.h"
#include "core/timeline.h"
#include "core/engine_flow.h"
#include "core/p2p.h"
#include "core/progress.h"
#include "core/demux.h"
#include "core/net_group.h"

/* ---- request lifetime --------------------------------------------- */

/* The schedule of an on-host algorithm: none, the engine runs them
 * (onhost/queue.c). Shared by all their requests, never
 * counted nor freed: looking up and releasing an empty schedule in the
 * cache was a visible part of a small blocking call (docs/performance.md,
 * "A blocking call's fixed cost"). */
static tnt_sched_t no_sched;

static tnt_result_t get_sched(struct tnt_comm *comm,
                              const tnt_coll_args_t *args, int algo,
                              tnt_sched_t **out)
{
    if (tnt__algo_onhost(algo)) {
        *out = &no_sched;
        return TNT_SUCCESS;
    }
    /* An alltoallv's schedule depends on its four arrays, which the
     * cache's key does not hold: built for this call, freed with it. */
    /* A p2p's tag and direction are not in the key either. */
    if (args->kind == TNT_COLL_ALLTOALLV || args->kind == TNT_COLL_P2P) {
        tnt_sched_t *s = malloc(sizeof(*s));
        if (!s)
            return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a "
                              "schedule");
        tnt_result_t rc = tnt__build_schedule(args, algo, s);
        if (rc != TNT_SUCCESS) {
            free(s);
            return rc;
        }
        s->refs = 1;
        *out = s;
        return TNT_SUCCESS;
    }
    return tnt__sched_cache_get(&comm->sched_cache, args, algo, out);
}

static void release_sched(struct tnt_comm *comm, tnt_sched_t *sched)
{
    if (sched != &no_sched)
        tnt__sched_release(comm ? &comm->sched_cache : NULL, sched);
}

/* Give the scratch back to the pool: the collective is finished. */
static void put_scratch(struct tnt_comm *comm, struct tnt_request *req)
{
    tnt__bufpool_put(&comm->pool, req->scratch, req->scratch_cap);
    req->scratch = NULL;
    req->bufs[TNT_BUF_SCRATCH] = NULL;
}

/* Finished requests kept for reuse: fusion keeps one request per bucket
 * in flight, hundreds for a large model. tnt__engine_prepare raises the
 * bound by the number it prepares for. */
#define MAX_FREE_REQUESTS 256

/* The on-host algorithms' way to the engine (onhost_state.h). */
static void onhost_fail(struct tnt_comm *comm, tnt_result_t rc,
                        const char *msg)
{
    tnt__engine_fail(comm, rc, "%s", msg);
}

static const tnt_onhost_engine_t onhost_engine = {
    .fail = onhost_fail,
    .run_ready = tnt__run_ready,
    .alloc_unexp = tnt__alloc_unexp,
    .free_unexp = tnt__free_unexp,
    .ensure_connect = tnt__ensure_connect,
    .fail_peer_lost = tnt__fail_peer_lost,
    .report_mismatch = tnt__report_mismatch,
    .mismatch_past = tnt__mismatch_past,
};

void tnt__engine_init_requests(struct tnt_comm *comm)
{
    comm->onhost.engine = &onhost_engine;
    tnt__list_init(&comm->reqs.active);
    tnt__list_init(&comm->reqs.all);
    tnt__list_init(&comm->reqs.deferred);
    tnt__list_init(&comm->reqs.any);
    tnt__list_init(&comm->reqs.heavy);
    tnt__list_init(&comm->reqs.free_reqs);
    comm->reqs.max_free_reqs = MAX_FREE_REQUESTS;
}

/* Release what a finished request holds. With its communicator alive the
 * request and its arrays are kept for the next collective (no allocation
 * per collective in steady state); lock held then. */
static void free_request(struct tnt_comm *comm, struct tnt_request *req)
{
    if (comm)
        put_scratch(comm, req);
    release_sched(comm, req->sched);
    req->sched = NULL;
    if (comm && (size_t)comm->reqs.nfree_reqs < comm->reqs.max_free_reqs) {
        tnt__list_push_front(&comm->reqs.free_reqs, &req->active_link);
        comm->reqs.nfree_reqs++;
        return;
    }
    free(req->ops);
    free(req->ready);
    free(req);
}

uint32_t tnt__request_nops(const struct tnt_request *req)
{
    if (req->onhost.algo)
        return tnt__onhost_nops(req);
    return req->sched->nops;
}

/* Operation states a request of schedule s needs: the on-host
 * algorithms (onhost/) have an empty schedule and keep one per rank. */
static uint32_t request_ops(const struct tnt_comm *comm,
                            const tnt_sched_t *s)
{
    return s->nops ? s->nops : (uint32_t)comm->nranks;
}

/* A request able to run `nops` operations: recycled if possible. */
static struct tnt_request *alloc_request(struct tnt_comm *comm, uint32_t nops)
{
    /* Prefer a recycled request whose arrays are large enough, so that
     * mixed sizes do not keep regrowing them. */
    struct tnt_request *best = NULL;
    tnt_list_node_t *it, *nx;
    TNT_LIST_FOREACH_SAFE(&comm->reqs.free_reqs, it, nx) {
        struct tnt_request *r =
            TNT_LIST_ENTRY(it, struct tnt_request, active_link);
        if (r->ops_cap >= nops && (!best || r->ops_cap < best->ops_cap)) {
            best = r;
            if (r->ops_cap == nops)
                break;
        }
    }
    if (!best && !tnt__list_empty(&comm->reqs.free_reqs))
        best = TNT_LIST_ENTRY(tnt__list_first(&comm->reqs.free_reqs),
                              struct tnt_request, active_link);
    struct tnt_request *req = best;
    tnt_opstate_t *ops = NULL;
    uint32_t *ready = NULL;
    uint32_t cap = 0;
    if (req) {
        tnt__list_unlink(&req->active_link);
        comm->reqs.nfree_reqs--;
        ops = req->ops;
        ready = req->ready;
        cap = req->ops_cap;
    } else if (!(req = malloc(sizeof(*req)))) {
        return NULL;
    }
    memset(req, 0, sizeof(*req));
    uint32_t need = nops ? nops : 1;
    if (cap < need) {
        free(ops);
        free(ready);
        ops = malloc(need * sizeof(*ops));
        ready = malloc(need * sizeof(*ready));
        cap = need;
        if (!ops || !ready) {
            free(ops);
            free(ready);
            free(req);
            return NULL;
        }
    }
    memset(ops, 0, need * sizeof(*ops));
    req->ops = ops;
    req->ready = ready;
    req->ops_cap = cap;
    return req;
}

tnt_unexp_t *tnt__alloc_unexp(struct tnt_comm *comm)
{
    if (!comm->flow.free_unexp) {
        /* Grow by a slab: the number of early messages in flight at once
         * settles after a few iterations, and then nothing is allocated. */
        tnt_unexp_slab_t *slab = malloc(sizeof(*slab));
        if (!slab)
            return NULL;
        slab->next = comm->flow.unexp_slabs;
        comm->flow.unexp_slabs = slab;
        for (int i = 0; i < TNT_UNEXP_SLAB; i++) {
            slab->u[i].next = comm->flow.free_unexp;
            comm->flow.free_unexp = &slab->u[i];
        }
    }
    tnt_unexp_t *u = comm->flow.free_unexp;
    comm->flow.free_unexp = u->next;
    return u;
}

void tnt__free_unexp(struct tnt_comm *comm, tnt_unexp_t *u)
{
    comm->unexp_bytes -= TNT_UNEXP_COST(u->len);
    tnt__bufpool_put(&comm->pool, u->data, u->cap);
    u->next = comm->flow.free_unexp;
    comm->flow.free_unexp = u;
}

static void unlink_all(struct tnt_request *req)
{
    if (tnt__list_linked(&req->all_link))
        tnt__list_unlink(&req->all_link);
}

/* Off the deferred list, if on it (not while its prepare runs). */
static void undefer(struct tnt_request *req)
{
    if (tnt__list_linked(&req->defer_link))
        tnt__list_unlink(&req->defer_link);
    req->deferred = 0;
}

/* Run req's prepare with the lock released, as a large computation runs
 * (engine_compute.c: req->compute.busy holds its result and buffers while a
 * failure strikes meanwhile). req stays marked deferred, so nothing
 * starts it: on-host collectives behind it wait (onhost/queue.c). 1 if req
 * may start now. */
static int run_prepare(struct tnt_comm *comm, struct tnt_request *req)
{
    void (*fn)(void *) = req->prepare;
    req->prepare = NULL;
    if (!fn || req->result != TNT_INPROGRESS || comm->state != TNT_COMM_OK)
        return req->result == TNT_INPROGRESS;
    req->compute.busy++;
    comm->reqs.busy++;
    pthread_mutex_unlock(&comm->group->lock);
    fn(req->prepare_arg);
    pthread_mutex_lock(&comm->group->lock);
    comm->reqs.busy--;
    req->compute.busy--;
    if (comm->reqs.busy == 0 && comm->state != TNT_COMM_OK)
        pthread_cond_broadcast(&comm->group->progress.cond); /* tnt__engine_drain */
    if (req->compute.finish_late) {
        if (req->compute.busy == 0)
            tnt__finish_late(req);
        return 0;
    }
    return req->result == TNT_INPROGRESS;
}

void tnt__engine_run_deferred(struct tnt_comm *comm)
{
    while (!tnt__list_empty(&comm->reqs.deferred)) {
        struct tnt_request *req =
            TNT_LIST_ENTRY(tnt__list_first(&comm->reqs.deferred),
                           struct tnt_request, defer_link);
        tnt__list_unlink(&req->defer_link);
        int start = run_prepare(comm, req);
        req->deferred = 0;
        if (!start)
            continue;
        if (comm->timeline)
            req->tl.start = tnt__now();
        if (req->onhost.algo)
            tnt__onhost_progress(comm);
        else
            tnt__run_ready(comm, req);
    }
}

/* Set the result: waiters return, the caller may reuse the buffers, a
 * detached request is freed at the next safe point. */
static void publish(struct tnt_comm *comm, struct tnt_request *req,
                    tnt_result_t rc)
{
    req->result = rc;
    if (comm->timeline)
        tnt__tl_coll(comm, req);
    if (req->detached) {
        /* Freed at a safe point: the caller may still be walking it. */
        unlink_all(req);
        req->reap_next = comm->reqs.reap_head;
        comm->reqs.reap_head = req;
    }
    comm->group->progress.last_activity = tnt__now_coarse();
    pthread_cond_broadcast(&comm->group->progress.cond);
}

static void finish(struct tnt_request *req, tnt_result_t rc)
{
    struct tnt_comm *comm = req->comm;
    if (req->result != TNT_INPROGRESS || req->compute.finish_late)
        return;
    if (req->deferred) /* it may be freed once finished */
        undefer(req);
    if (req->compute.heavy_queued)
        tnt__unqueue_heavy(comm, req);
    if (req->onhost.queued)
        tnt__onhost_unqueue(comm, req);
    if (req->active) {
        tnt__list_unlink(&req->active_link);
        req->active = 0;
        comm->active_msgs -= !req->onhost.algo;
    }
    if (req->compute.busy) {
        /* A computation still writes into its buffers: the result waits
         * for it (tnt__engine_run_heavy calls tnt__finish_late). */
        req->compute.finish_late = 1;
        req->compute.late_rc = rc;
        return;
    }
    publish(comm, req, rc);
}

void tnt__finish_late(struct tnt_request *req)
{
    req->compute.finish_late = 0;
    publish(req->comm, req, req->compute.late_rc);
}

void tnt__engine_reap(struct tnt_comm *comm)
{
    while (comm->reqs.reap_head) {
        struct tnt_request *r = comm->reqs.reap_head;
        comm->reqs.reap_head = r->reap_next;
        free_request(comm, r);
    }
}

void tnt__engine_free_requests(struct tnt_comm *comm)
{
    /* Early messages nobody received (a peer that sent into a collective
     * this rank never called). The transport is finalized by now, so
     * nothing can still be writing into them. */
    for (int i = 0; comm->peers && i < comm->nranks; i++) {
        tnt_peer_t *p = &comm->peers[i];
        while (p->unexp_head) {
            tnt_unexp_t *u = p->unexp_head;
            p->unexp_head = u->next;
            tnt__free_unexp(comm, u);
        }
        p->unexp_tail = NULL;
        tnt__flow_reset_peer(comm, p);
    }
    tnt__flow_free(comm);
    tnt__p2p_free(comm);
    while (comm->flow.unexp_slabs) {
        tnt_unexp_slab_t *slab = comm->flow.unexp_slabs;
        comm->flow.unexp_slabs = slab->next;
        free(slab);
    }
    comm->flow.free_unexp = NULL;
    while (!tnt__list_empty(&comm->reqs.free_reqs)) {
        struct tnt_request *r =
            TNT_LIST_ENTRY(tnt__list_first(&comm->reqs.free_reqs),
                           struct tnt_request, active_link);
        tnt__list_unlink(&r->active_link);
        free(r->ops);
        free(r->ready);
        free(r);
    }
    comm->reqs.nfree_reqs = 0;
}

static void free_unexpected(struct tnt_comm *comm, tnt_peer_t *p)
{
    while (p->unexp_head) {
        tnt_unexp_t *u = p->unexp_head;
        p->unexp_head = u->next;
        tnt__free_unexp(comm, u);
    }
    p->unexp_tail = NULL;
}

/* Best effort. A notice must leave the peer's stream in frame: over a
 * transport whose close finishes the message it had begun and then the
 * notices queued (TNT_TP_CLOSE_FINISHES: tcp, shm) it may follow sends in
 * flight, and the peer takes that message whole, with its real data,
 * before the notice; elsewhere it goes only where no send is in flight
 * (tnt__engine_fail), and one the transport could not write at once is
 * dropped by the close that follows. The peer then sees the connection
 * close instead. */
void tnt__send_notice(struct tnt_comm *comm, int tpi, void *ep)
{
    if (!ep || comm->state == TNT_COMM_OK || !comm->net.tp[tpi])
        return;
    size_t len = strnlen(comm->fail_msg, TNT_NOTICE_MAX);
    tnt__count_sent(&comm->stats, tpi, len);
    if (comm->group->shared) {
        /* The connection outlives this communicator: the transport may
         * still hold the notice after the free, so it sends the group's
         * copy. */
        struct tnt_notice_copy *c = tnt__net_group_notice(
            comm->group, &comm->fault.notice_hdr, comm->fail_msg, len);
        if (c)
            comm->net.tp[tpi]->send(comm->net.tp_ctx[tpi], ep, &c->hdr,
                                    sizeof(c->hdr), c->text, len, c);
        return;
    }
    comm->net.tp[tpi]->send(comm->net.tp_ctx[tpi], ep,
                            &comm->fault.notice_hdr,
                            sizeof(comm->fault.notice_hdr), comm->fail_msg,
                            len, NULL);
}

/* Is a message from `peer` landing straight in a request's buffer (its
 * header came, its payload is arriving)? */
static int landing_in_request(struct tnt_comm *comm, int peer)
{
    for (struct tnt_request *r = tnt__active_first(comm); r;
         r = tnt__active_next(comm, r))
        for (uint32_t i = 0; i < r->sched->nops; i++)
            if (r->ops[i].arriving && !r->ops[i].done &&
                r->sched->ops[i].peer == peer)
                return 1;
    return 0;
}

/* A failed communicator of a shared group (tnt__engine_fail): the
 * notice goes over every connection and none is closed, except one
 * whose transport still reads or writes this communicator's requests'
 * memory (a send in flight, a payload landing in a receive's buffer),
 * which the failure finishes: that connection is closed as before, and
 * every other communicator over it hears the peer lost (the cost of that
 * rare case; docs/design.md). Early messages still landing are kept,
 * detached from any receive, until the communicator is freed. */
static void forget_shared(struct tnt_comm *comm, tnt_peer_t *p)
{
    void *ep = p->ep;
    p->ep = NULL;
    tnt_unexp_t **pp = &p->unexp_head;
    p->unexp_tail = NULL;
    while (*pp) {
        tnt_unexp_t *u = *pp;
        if (u->complete) {
            *pp = u->next;
            tnt__free_unexp(comm, u);
        } else {
            u->claimed = NULL;
            p->unexp_tail = u;
            pp = &u->next;
        }
    }
    if (!ep)
        return;
    int net = tnt__net_rank(comm, p->rank);
    tnt__send_notice(comm, p->tpi, ep);
    if (!p->sends_inflight && !landing_in_request(comm, p->rank))
        return;
    p->tp->close(p->tp_ctx, ep);
    p->sends_inflight = 0;
    tnt__wire_group_lost(comm->group, net, TNT_ERR_PEER_LOST,
                          "closed by a failing communicator with messages "
                          "in flight");
}

void tnt__engine_fail(struct tnt_comm *comm, tnt_result_t rc,
                      const char *fmt, ...)
{
    if (comm->state != TNT_COMM_OK)
        return;
    comm->state = (rc == TNT_ERR_ABORTED) ? TNT_COMM_ABORTED
                                          : TNT_COMM_FAILED;
    comm->fail_rc = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comm->fail_msg, sizeof(comm->fail_msg), fmt, ap);
    va_end(ap);
    tnt_msg_hdr_t *n = &comm->fault.notice_hdr;
    memset(n, 0, sizeof(*n));
    n->magic = TNT_MSG_MAGIC;
    n->comm_id = comm->comm_id;
    n->kind = TNT_MSG_NOTICE;
    n->count = (uint64_t)(int64_t)rc;
    n->nranks = comm->nranks;
    if (rc == TNT_ERR_ABORTED)
        TNT_LOG_INFO("%s", comm->fail_msg);
    else
        TNT_LOG_ERR("%s", comm->fail_msg);
    /* Tell every peer why, then close: afterwards no transport holds a
     * pointer into any request (one that finishes a frame after close
     * has copied it), so the requests can be finished and freed. */
    for (int i = 0; i < comm->nranks; i++) {
        tnt_peer_t *p = &comm->peers[i];
        if (comm->group->shared)
            forget_shared(comm, p);
        else if (p->ep) {
            if (!p->sends_inflight || (p->tp->caps & TNT_TP_CLOSE_FINISHES))
                tnt__send_notice(comm, p->tpi, p->ep);
            p->tp->close(p->tp_ctx, p->ep);
        }
        p->ep = NULL;
        p->sends_inflight = 0;
        /* A connection still being made stays counted: up_connected
         * sends the notice on it, and tnt__engine_drain lingers for it. */
        p->pending_head = p->pending_tail = NULL;
        p->posted = NULL;
        if (!comm->group->shared)
            free_unexpected(comm, p);
        tnt__flow_reset_peer(comm, p);
    }
    /* A higher rank may be waiting for a connection from this one that
     * will now never come. Connect to each such rank and close again right
     * after the hello (up_connected closes on a failed communicator): it
     * sees this rank lost at once instead of waiting for its deadline.
     * (A shared group's connections are made by the group: its notice
     * goes when one comes up, tnt__wire_connected.) */
    for (int i = comm->rank + 1; i < comm->nranks && !comm->group->shared;
         i++) {
        tnt_peer_t *p = &comm->peers[i];
        if (!p->ever_connected && !p->connecting && !p->dead &&
            p->tp->connect(p->tp_ctx, i, p->addr, p->addr_len) == 0)
            p->connecting = 1;
    }
    /* A lower rank connects to this one at its start in a job that
     * connects eagerly (tnt__engine_connect_all), so its connection may
     * still be in its handshake now: this rank fails before it ever needs
     * that rank (at the first collective, say). Closed unannounced at
     * the free, it would reach that rank as a plain close, which it takes
     * for this rank lost, not for the cause. Count it as being made:
     * up_connected sends the notice on it, and tnt__engine_drain lingers
     * for it (at most TNT_LINGER_S). */
    for (int i = 0; i < comm->rank && comm->nranks <= TNT_EAGER_CONNECT_MAX &&
                    !comm->group->shared;
         i++) {
        tnt_peer_t *p = &comm->peers[i];
        if (!p->ever_connected && !p->dead)
            p->connecting = 1;
    }
    while (!tnt__list_empty(&comm->reqs.active))
        finish(tnt__active_first(comm), rc);
    while (!tnt__list_empty(&comm->reqs.any)) {
        struct tnt_request *r = TNT_LIST_ENTRY(
            tnt__list_first(&comm->reqs.any), struct tnt_request, any_link);
        tnt__list_unlink(&r->any_link);
        finish(r, rc);
    }
}

/* ---- executing operations ------------------------------------------- */

static void push_ready(struct tnt_request *req, uint32_t op)
{
    req->ready[req->nready++] = op;
}

void tnt__op_complete(struct tnt_request *req, uint32_t op)
{
    tnt_opstate_t *os = &req->ops[op];
    const tnt_sop_t *sop = &req->sched->ops[op];
    if (os->done)
        return;
    os->done = 1;
    req->ops_left--;
    for (uint32_t i = 0; i < sop->succ_count; i++) {
        uint32_t s = req->sched->succ[sop->succ_begin + i];
        if (--req->ops[s].deps_left == 0)
            push_ready(req, s);
    }
}

/* Start the connection to p (the lower rank of a pair connects, in the
 * transports' numbering): 0, or the transport's error. In a shared
 * group the connection is the group's: one being made or up already is
 * not made again (the transport refuses a second connection of a
 * pair); p then waits for it or takes it. */
static tnt_result_t peer_connect(struct tnt_comm *comm, tnt_peer_t *p)
{
    int me = tnt__net_rank(comm, comm->rank);
    int net = tnt__net_rank(comm, p->rank);
    struct tnt_net_peer *gp = comm->group->shared ? &comm->group->conn[net]
                                                  : NULL;
    p->connecting = 1;
    if (gp && gp->dead)
        return tnt__error(gp->dead, "the connection to rank %d is lost",
                          p->rank);
    if (gp && gp->ep) {
        tnt__wire_connected(comm, p->tpi, p->rank, gp->ep);
        return TNT_SUCCESS;
    }
    if (gp && gp->connecting)
        return TNT_SUCCESS;
    if (me > net)
        return TNT_SUCCESS; /* the peer connects */
    tnt_result_t rc = p->tp->connect(p->tp_ctx, net, p->addr, p->addr_len);
    if (gp && rc >= 0)
        gp->connecting = 1;
    return rc;
}

void tnt__ensure_connect(struct tnt_comm *comm, tnt_peer_t *p)
{
    if (p->ep || p->connecting)
        return;
    /* The lower rank of a pair connects; the higher one waits for it.
     * Every algorithm's traffic is symmetric in need, so the lower rank
     * always gets there. It registered at the bootstrap, so a peer that
     * cannot be reached now (a transport that connects at once, shm,
     * sees it gone) is lost for this job. */
    tnt_result_t rc = peer_connect(comm, p);
    if (rc < 0) {
        char what[300];
        snprintf(what, sizeof(what), "cannot connect: %s",
                 tnt_last_error());
        /* No connection is under way to a lost rank: nothing may
         * wait for one (tnt__engine_drain would linger for it). */
        p->connecting = 0;
        p->dead = TNT_ERR_PEER_LOST;
        tnt__fail_peer_lost(comm, p->rank, what);
    }
}

/* Connecting ahead of need is a guess, not a need: a peer that already
 * freed its communicator and exited (a job that creates and frees one
 * with no collective between) is no failure. It is marked gone, quietly,
 * and a collective that needs it fails then, naming it. */
void tnt__engine_connect_all(struct tnt_comm *comm)
{
    pthread_mutex_lock(&comm->group->lock);
    int me = tnt__net_rank(comm, comm->rank);
    for (int i = 0; i < comm->nranks; i++) {
        tnt_peer_t *p = &comm->peers[i];
        if (i == comm->rank || tnt__net_rank(comm, i) < me || p->ep ||
            p->connecting || p->dead)
            continue;
        if (peer_connect(comm, p) < 0) {
            p->connecting = 0;
            p->dead = TNT_ERR_PEER_LOST;
            TNT_LOG_DEBUG("rank %d: rank %d is gone already (%s); a "
                          "collective that needs it will fail",
                          comm->rank, i, tnt_last_error());
        }
    }
    pthread_mutex_unlock(&comm->group->lock);
}

void tnt__note_lost(struct tnt_comm *comm, int peer, const char *what)
{
    if (comm->fault.first_lost >= 0 || comm->state != TNT_COMM_OK)
        return;
    comm->fault.first_lost = peer;
    /* Kept for the error message: a longer cause is cut to the field
     * (the precision says so to the compiler, whose -O3 inlining sees
     * callers' longer buffers). */
    snprintf(comm->fault.first_lost_what, sizeof(comm->fault.first_lost_what),
             "%.*s", (int)sizeof(comm->fault.first_lost_what) - 1,
             what ? what : "connection closed");
}

/* Which rank to blame: when a rank dies, the ranks next to it fail and
 * close too, and a survivor may need one of those first; but it also
 * holds a connection to the dead rank (full mesh), whose loss it has
 * seen, unneeded, before. Name that one first. */
void tnt__fail_peer_lost(struct tnt_comm *comm, int peer, const char *what)
{
    tnt__note_lost(comm, peer, what);
    int first = comm->fault.first_lost;
    if (first != peer)
        tnt__engine_fail(comm, TNT_ERR_PEER_LOST, "rank %d lost rank %d "
                         "(host %s) first (%s), then rank %d (host %s): %s",
                         comm->rank, first, comm->peers[first].host,
                         comm->fault.first_lost_what, peer,
                         comm->peers[peer].host, what);
    else
        tnt__engine_fail(comm, TNT_ERR_PEER_LOST, "rank %d lost rank %d "
                         "(host %s): %s", comm->rank, peer,
                         comm->peers[peer].host, what);
}

/* The words follow the transport's result: only a peer that went away
 * (closed, reset, retries exceeded) is "lost". A connection that could
 * not be made (queue pair setup, handshake) is a connection failure, and
 * any other cause (this rank's own device or memory, a protocol error)
 * is the connection failing, which says nothing about the peer; the
 * transport's text says which. The result is the transport's. */
void tnt__fail_peer(struct tnt_comm *comm, int peer, tnt_result_t err,
                    const char *what)
{
    if (err == TNT_ERR_PEER_LOST || err >= 0) {
        tnt__fail_peer_lost(comm, peer, what);
        return;
    }
    if (err == TNT_ERR_CONNECT)
        tnt__engine_fail(comm, err, "rank %d cannot connect to rank %d "
                         "(host %s): %s", comm->rank, peer,
                         comm->peers[peer].host, what);
    else
        tnt__engine_fail(comm, err, "rank %d: connection to rank %d "
                         "(host %s) failed: %s", comm->rank, peer,
                         comm->peers[peer].host, what);
}

static void fail_dead_peer(struct tnt_comm *comm, struct tnt_request *req,
                           const tnt_peer_t *p)
{
    char what[160];
    snprintf(what, sizeof(what), "%s #%" PRIu64 " needs it",
             tnt__coll_kind_name(req->args.kind),
             req->seq & ~TNT_P2P_SEQ_BIT);
    if (p->dead == TNT_ERR_PEER_LOST || comm->fault.first_lost != p->rank) {
        tnt__fail_peer_lost(comm, p->rank, what);
        return;
    }
    /* Not lost: the cause noted when it failed is the message. */
    char both[sizeof(comm->fault.first_lost_what) + sizeof(what) + 2];
    snprintf(both, sizeof(both), "%s; %s", comm->fault.first_lost_what, what);
    tnt__fail_peer(comm, p->rank, p->dead, both);
}

static int matches(const tnt_msg_hdr_t *h, const struct tnt_request *req,
                   uint32_t step)
{
    return h->seq == req->seq && h->step == step;
}

/* A p2p receive meets its early message (or RTS) here, where
 * early_mismatch does not look (a p2p seq is not unique on a rank,
 * p2p.h): the signature (dtype) is checked now. 1 if it differs
 * (failed). */
static int p2p_mismatch(struct tnt_comm *comm, struct tnt_request *req,
                        int peer, const tnt_msg_hdr_t *h)
{
    if (req->args.kind != TNT_COLL_P2P || tnt__sig_equal(h, &req->sig))
        return 0;
    tnt__report_mismatch(comm, req, h, peer);
    return 1;
}

static void unlink_unexp(tnt_peer_t *p, tnt_unexp_t *u)
{
    tnt_unexp_t *prev = NULL;
    for (tnt_unexp_t *it = p->unexp_head; it && it != u; it = it->next)
        prev = it;
    if (prev)
        prev->next = u->next;
    else
        p->unexp_head = u->next;
    if (p->unexp_tail == u)
        p->unexp_tail = prev;
    u->next = NULL;
}

/* Hand a fully arrived early message to its receive: unlink it from the
 * peer's list, copy it into place, free it, complete the receive. */
void tnt__deliver_unexpected(struct tnt_comm *comm, tnt_peer_t *p,
                               tnt_unexp_t *u, tnt_opstate_t *os)
{
    unlink_unexp(p, u);
    tnt__flow_consumed(comm, p, u->len);
    if (u->len && u->len >= comm->params.unlocked_bytes) {
        /* Off the peer's list, so a failure meanwhile does not free it:
         * the copy owns it until tnt__engine_run_heavy frees it. */
        os->src = u;
        tnt__queue_heavy(comm, os->coll, os->op);
        return;
    }
    const tnt_sop_t *sop = &os->coll->sched->ops[os->op];
    if (u->len)
        memcpy(tnt__ref_ptr(os->coll, sop->dst), u->data, u->len);
    tnt__free_unexp(comm, u);
    tnt__op_complete(os->coll, os->op);
}

static void post_recv(struct tnt_comm *comm, struct tnt_request *req,
                      uint32_t op)
{
    const tnt_sop_t *sop = &req->sched->ops[op];
    tnt_opstate_t *os = &req->ops[op];
    tnt_peer_t *p = &comm->peers[sop->peer];
    int rts = 0;
    for (tnt_unexp_t *u = p->unexp_head; u; u = u->next) {
        if (tnt__flow_is_rts(u) && u->hdr.seq == req->seq &&
            (u->hdr.step & ~TNT_STEP_CTL) == sop->step) {
            if (p2p_mismatch(comm, req, p->rank, &u->hdr) ||
                tnt__vsize_mismatch(comm, req, p->rank, &u->hdr, sop))
                return;
            /* The sender waits for this receive: no data can be here. */
            unlink_unexp(p, u);
            tnt__free_unexp(comm, u);
            rts = 1;
            break;
        }
        if (!matches(&u->hdr, req, sop->step) || u->claimed)
            continue;
        if (p2p_mismatch(comm, req, p->rank, &u->hdr) ||
            tnt__vsize_mismatch(comm, req, p->rank, &u->hdr, sop))
            return;
        if (u->len != sop->bytes) {
            tnt__engine_fail(comm, TNT_ERR_MISMATCH, "rank %d: %s seq %"
                             PRIu64 " step %u expected %zu bytes from rank "
                             "%d but got %zu", comm->rank,
                             tnt__coll_kind_name(req->args.kind),
                 req->seq & ~TNT_P2P_SEQ_BIT, sop->step,
                             sop->bytes, p->rank, u->len);
            return;
        }
        if (!u->complete) {
            u->claimed = os; /* copied when its payload has landed */
            os->arriving = 1;
            return;
        }
        tnt__deliver_unexpected(comm, p, u, os);
        return;
    }
    if (p->dead) {
        fail_dead_peer(comm, req, p);
        return;
    }
    os->next = p->posted;
    p->posted = os;
    tnt__ensure_connect(comm, p);
    tnt__flow_recv_posted(comm, p, os, rts);
}

static void start_op(struct tnt_comm *comm, struct tnt_request *req,
                     uint32_t op)
{
    const tnt_sop_t *sop = &req->sched->ops[op];
    switch (sop->kind) {
    case TNT_SOP_SEND: {
        tnt_peer_t *p = &comm->peers[sop->peer];
        if (p->dead) {
            fail_dead_peer(comm, req, p);
            return;
        }
        if (!p->ep) {
            tnt_opstate_t *os = &req->ops[op];
            os->next = NULL;
            if (p->pending_tail)
                p->pending_tail->next = os;
            else
                p->pending_head = os;
            p->pending_tail = os;
            tnt__ensure_connect(comm, p);
            return;
        }
        tnt__flow_send(comm, req, op);
        return;
    }
    case TNT_SOP_RECV:
        post_recv(comm, req, op);
        return;
    default:
        tnt__run_compute(req, op);
        break;
    }
    tnt__op_complete(req, op);
}

/* Run everything that is ready; stop early if the collective failed.
 * Large reductions and copies are queued instead: this may run inside a
 * transport callback, where the lock must stay held. */
/* TNT_FLOW_BATCH: every ready receive first, so that their CTSs leave
 * together (tnt__flow_flush) and before the sends and reductions of the
 * same pass: started first, those would hold the peers' clearance back
 * for their whole duration (p = 2, 4 MiB: 12% slower,
 * docs/performance.md). Swap-removes, so an op moved into slot i is
 * looked at next; ops a receive makes ready are appended and looked at
 * too. */
static void start_ready_recvs(struct tnt_comm *comm, struct tnt_request *req)
{
    uint32_t i = 0;
    while (i < req->nready && req->result == TNT_INPROGRESS &&
           comm->state == TNT_COMM_OK) {
        uint32_t op = req->ready[i];
        if (req->sched->ops[op].kind != TNT_SOP_RECV) {
            i++;
            continue;
        }
        req->ready[i] = req->ready[--req->nready];
        start_op(comm, req, op);
    }
    if (comm->flow.nowed)
        tnt__flow_flush(comm);
}

void tnt__run_ready(struct tnt_comm *comm, struct tnt_request *req)
{
    while (req->nready && req->result == TNT_INPROGRESS &&
           comm->state == TNT_COMM_OK) {
        if (comm->params.flow_batch) {
            start_ready_recvs(comm, req);
            if (!req->nready || req->result != TNT_INPROGRESS ||
                comm->state != TNT_COMM_OK)
                break;
        }
        uint32_t op = req->ready[--req->nready];
        if (tnt__op_is_heavy(comm, req, op))
            tnt__queue_heavy(comm, req, op);
        else
            start_op(comm, req, op);
    }
    if (comm->flow.nowed) /* the CTSs of the receives just posted */
        tnt__flow_flush(comm);
    if (req->result == TNT_INPROGRESS && req->ops_left == 0)
        finish(req, TNT_SUCCESS);
}

/* ---- posting -------------------------------------------------------- */

void tnt__report_mismatch(struct tnt_comm *comm, struct tnt_request *req,
                            const tnt_msg_hdr_t *theirs, int peer)
{
    char mine[160], other[160];
    tnt__describe_sig(&req->sig, mine, sizeof(mine));
    tnt__describe_sig(theirs, other, sizeof(other));
    if (req->args.kind == TNT_COLL_P2P) { /* no collective number */
        tnt__engine_fail(comm, TNT_ERR_MISMATCH, "send/recv mismatch: "
                         "rank %d posted %s with rank %d, tag %u, but "
                         "rank %d sent %s", comm->rank, mine, peer,
                         req->args.tag, peer, other);
        return;
    }
    /* The one difference that is not in the caller's arguments: */
    int mapped = tnt__algo_mapped(req->sig.algo) +
                 tnt__algo_mapped(theirs->algo);
    tnt__engine_fail(comm, TNT_ERR_MISMATCH, "collective #%" PRIu64
                     " mismatch: rank %d called %s but rank %d called %s%s",
                     req->seq, comm->rank, mine, peer, other,
                     mapped == 1 ? " (buffers from tnt_mem_alloc on some "
                                   "ranks only)" : "");
}

static int forced_algo(struct tnt_comm *comm, const tnt_coll_args_t *a)
{
    int kind = a->kind;
    /* The exchanges that make a derived communicator (core/comm_split.c):
     * small blocks, so log2 p rounds of Bruck's allgather, not the
     * ring's p - 1. */
    if (kind == TNT_COLL_ALLGATHER && a->op == TNT_OP_DERIVE)
        return TNT_ALGO_BRUCK;
    /* A reduce runs the allreduce's schedule (collectives/reduce_root.c). */
    if (kind == TNT_COLL_ALLREDUCE || kind == TNT_COLL_REDUCE)
        return comm->params.allreduce_algo;
    if (kind == TNT_COLL_BROADCAST)
        return comm->params.bcast_algo;
    return TNT_ALGO_AUTO;
}

tnt_result_t tnt__engine_prepare(struct tnt_comm *comm,
                                 const tnt_coll_args_t *args, size_t n)
{
    if (n == 0)
        return TNT_SUCCESS;
    tnt_sched_t **sched = calloc(n, sizeof(*sched));
    void **scratch = calloc(n, sizeof(*scratch));
    size_t *cap = calloc(n, sizeof(*cap));
    tnt_result_t rc = (sched && scratch && cap)
                          ? TNT_SUCCESS
                          : tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; rc == TNT_SUCCESS && i < n; i++) {
        int algo;
        rc = tnt__algo_select(&args[i], forced_algo(comm, &args[i]),
                              &algo);
        if (rc == TNT_SUCCESS)
            rc = get_sched(comm, &args[i], algo, &sched[i]);
    }
    pthread_mutex_lock(&comm->group->lock);
    /* All of them in flight at once: that many requests, and that many
     * scratch buffers in the pool. */
    if (comm->reqs.max_free_reqs < MAX_FREE_REQUESTS + n)
        comm->reqs.max_free_reqs = MAX_FREE_REQUESTS + n;
    tnt_list_t got; /* allocated here, to be put back on the free list */
    tnt__list_init(&got);
    for (size_t i = 0; rc == TNT_SUCCESS && i < n; i++) {
        struct tnt_request *r =
            alloc_request(comm, request_ops(comm, sched[i]));
        if (!r) {
            rc = tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
            break;
        }
        tnt__list_push_front(&got, &r->active_link);
        if (sched[i]->scratch_bytes)
            scratch[i] = tnt__bufpool_get(&comm->pool,
                                          sched[i]->scratch_bytes, &cap[i]);
    }
    while (!tnt__list_empty(&got)) {
        struct tnt_request *r = TNT_LIST_ENTRY(tnt__list_first(&got),
                                               struct tnt_request, active_link);
        tnt__list_unlink(&r->active_link);
        free_request(comm, r);
    }
    for (size_t i = 0; i < n; i++)
        tnt__bufpool_put(&comm->pool, scratch ? scratch[i] : NULL,
                         cap ? cap[i] : 0);
    pthread_mutex_unlock(&comm->group->lock);
    for (size_t i = 0; sched && i < n; i++)
        release_sched(comm, sched[i]);
    free(sched);
    free(scratch);
    free(cap);
    return rc;
}

/* Messages of req's collective may have arrived already: check their
 * signatures now, so a mismatch is reported before any data moves. 1 if
 * one was (the communicator has failed). */
static int early_mismatch(struct tnt_comm *comm, struct tnt_request *req)
{
    if (req->args.kind == TNT_COLL_P2P) /* post_recv's p2p_mismatch */
        return 0;
    for (int i = 0; i < comm->nranks; i++)
        for (tnt_unexp_t *u = comm->peers[i].unexp_head; u; u = u->next)
            if (u->hdr.seq == req->seq && !tnt__sig_equal(&u->hdr,
                                                          &req->sig)) {
                tnt__report_mismatch(comm, req, &u->hdr, i);
                return 1;
            }
    return 0;
}

static tnt_result_t start_locked(struct tnt_comm *comm,
                                 struct tnt_request *req,
                                 const tnt_coll_args_t *args, int algo,
                                 tnt_sched_t *sched,
                                 const tnt_mem_ref_t *mref, const void *send,
                                 void *recv, unsigned flags,
                                 void (*prepare)(void *), void *prepare_arg,
                                 struct tnt_request **out);

/* start_locked failed with rc: a request the user holds already (an
 * any-source receive, on the list of unreleased ones) finishes with it;
 * any other is freed. */
static tnt_result_t start_failed(struct tnt_comm *comm,
                                 struct tnt_request *req, tnt_result_t rc)
{
    if (!tnt__list_linked(&req->all_link)) {
        free_request(comm, req);
        return rc;
    }
    /* Its waiter reads the communicator's failure message. */
    tnt__engine_fail(comm, rc, "rank %d: a receive from any source could "
                     "not start: %s", comm->rank, tnt_last_error());
    put_scratch(comm, req);
    release_sched(comm, req->sched);
    req->sched = &no_sched;
    req->comm = comm;
    publish(comm, req, comm->fail_rc);
    return rc;
}

/* Post with the lock held: sched (taken by the caller, released here on
 * failure) and, for an on-host algorithm that reads them, where its
 * buffers lie in shared allocations. */
static tnt_result_t post_locked(struct tnt_comm *comm,
                                const tnt_coll_args_t *args, int algo,
                                tnt_sched_t *sched,
                                const tnt_mem_ref_t *mref, const void *send,
                                void *recv, unsigned flags,
                                void (*prepare)(void *), void *prepare_arg,
                                struct tnt_request **out)
{
    struct tnt_request *req = alloc_request(comm, request_ops(comm, sched));
    if (!req) {
        release_sched(comm, sched);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a %s of %u "
                          "operations", tnt__coll_kind_name(args->kind),
                          sched->nops);
    }
    return start_locked(comm, req, args, algo, sched, mref, send, recv,
                        flags, prepare, prepare_arg, out);
}

/* Start req, allocated for sched's operations (post_locked; an
 * any-source receive once its sender is known, tnt__engine_start_any).
 * On failure req is freed, unless the user holds it already (an
 * any-source receive): then it finishes with the error. */
static tnt_result_t start_locked(struct tnt_comm *comm,
                                 struct tnt_request *req,
                                 const tnt_coll_args_t *args, int algo,
                                 tnt_sched_t *sched,
                                 const tnt_mem_ref_t *mref, const void *send,
                                 void *recv, unsigned flags,
                                 void (*prepare)(void *), void *prepare_arg,
                                 struct tnt_request **out)
{
    uint32_t nops = sched->nops;
    req->args = *args;
    req->result = TNT_INPROGRESS;
    req->algo = algo;
    req->sched = sched;
    req->bufs[TNT_BUF_SEND] = (unsigned char *)(uintptr_t)send;
    req->bufs[TNT_BUF_RECV] = recv;
    const tnt_onhost_algo_t *onhost = tnt__onhost_algo(algo, args->kind);
    req->onhost.algo = onhost;
    if (onhost && onhost->mapped_bufs) {
        req->onhost.map_ref[TNT_BUF_SEND] = mref[0];
        req->onhost.map_ref[TNT_BUF_RECV] = mref[1];
    }
    req->reduce = tnt__reduce_fn(args->dtype, args->op);
    req->ops_left = nops;
    req->prepare = prepare;
    req->prepare_arg = prepare_arg;
    if (comm->timeline) {
        req->tl.post = tnt__now();
        req->tl.start = 0.0;
        req->tl.tid = tnt__tl_tid();
    }

    tnt_msg_hdr_t *sig = &req->sig;
    sig->magic = TNT_MSG_MAGIC;
    sig->comm_id = comm->comm_id;
    sig->kind = (uint8_t)args->kind;
    sig->dtype = (uint8_t)args->dtype;
    sig->op = (uint8_t)args->op;
    sig->algo = (uint8_t)req->algo;
    sig->count = args->count;
    sig->root = args->root;
    sig->nranks = args->nranks;

    if (comm->state != TNT_COMM_OK) {
        tnt_result_t rc = tnt__error_str(comm->fail_rc, comm->fail_msg);
        return start_failed(comm, req, rc);
    }
    if (req->sched->scratch_bytes) {
        req->scratch = tnt__bufpool_get(&comm->pool, req->sched->scratch_bytes,
                                        &req->scratch_cap);
        if (!req->scratch) {
            size_t bytes = req->sched->scratch_bytes;
            return start_failed(comm, req, tnt__error(
                TNT_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch "
                "of a %s of %zu elements", bytes,
                tnt__coll_kind_name(args->kind), args->count));
        }
        req->bufs[TNT_BUF_SCRATCH] = req->scratch;
    }
    req->comm = comm;
    if (args->kind == TNT_COLL_P2P) {
        /* Its own numbering: the collectives' sequence is left alone
         * (p2p.h). */
        req->seq = tnt__p2p_next_seq(comm, args->p2p_send, args->root,
                                     args->tag);
        if (!req->seq)
            return start_failed(comm, req, tnt__error(
                TNT_ERR_NO_MEMORY, "out of memory for the point-to-point "
                "counters"));
        sig->root = 0; /* the peer: rank `root` on one side, this rank on
                          the other */
    } else {
        req->seq = comm->next_seq++;
    }
    sig->seq = req->seq;
    if (args->kind != TNT_COLL_P2P)
        comm->reqs.recent_sigs[req->seq % TNT_RECENT_SIGS] = *sig;
    /* Counted here, before the lean slots path may finish it. */
    uint64_t counted = (uint64_t)args->count * args->esize;
    if (args->kind == TNT_COLL_ALLTOALLV) /* no count: what it sends */
        for (int q = 0; q < args->nranks; q++)
            counted += (uint64_t)args->v[0][q] * args->esize;
    tnt__count_post(&comm->stats, args->kind, algo, counted);
    double now = tnt__now_coarse();
    req->timeout.deadline = now + comm->params.timeout_s;
    /* A blocking call, nothing else in flight: an on-host algorithm
     * that can (its run_now) runs it here, without the queues, the lists
     * and the poller's round over the rings. What does not finish soon
     * goes on as any other request. */
    if ((flags & TNT_POST_BLOCK) && onhost && onhost->run_now &&
        tnt__list_empty(&comm->reqs.active) && !comm->group->progress.polling) {
        if (early_mismatch(comm, req) || onhost->run_now(comm, req)) {
            if (req->result == TNT_INPROGRESS) /* failed meanwhile */
                req->result = comm->fail_rc;
            if (comm->timeline)
                tnt__tl_coll(comm, req);
            comm->group->progress.last_activity = now;
            *out = req;
            return TNT_SUCCESS;
        }
    }
    for (uint32_t i = 0; i < nops; i++) {
        tnt_opstate_t *os = &req->ops[i];
        os->ck.type = TNT_COOKIE_OP;
        os->ck.comm = comm;
        os->coll = req;
        os->op = i;
        os->deps_left = req->sched->ops[i].ndeps;
        os->cts_sent = os->cts_due = os->parked = 0;
        if (req->sched->ops[i].kind == TNT_SOP_SEND) {
            os->hdr = *sig;
            os->hdr.step = req->sched->ops[i].step;
            if (args->kind == TNT_COLL_ALLTOALLV) /* engine_vsize.c */
                os->hdr.count = req->sched->ops[i].bytes / args->esize;
        }
        if (os->deps_left == 0)
            push_ready(req, i);
    }
    req->active = 1;
    comm->active_msgs += !onhost;
    tnt__list_push_back(&comm->reqs.active, &req->active_link);
    if (!tnt__list_linked(&req->all_link)) /* an any-source one is */
        tnt__list_push_front(&comm->reqs.all, &req->all_link);
    comm->group->progress.last_activity = now;

    /* A lean run that goes on queued has looked already, and nothing
     * has arrived since: it read no rings. */
    if (!req->onhost.lean)
        early_mismatch(comm, req);
    if (onhost && req->result == TNT_INPROGRESS)
        tnt__onhost_enqueue(comm, req);
    if (flags & TNT_POST_DEFER) {
        if (req->result == TNT_INPROGRESS) {
            req->deferred = 1;
            tnt__list_push_back(&comm->reqs.deferred, &req->defer_link);
            /* The poller starts it: get it out of epoll_wait. */
            if (comm->group->progress.polling)
                tnt__progress_wake(comm);
        }
    } else if (onhost) {
        tnt__onhost_progress(comm);
    } else {
        tnt__run_ready(comm, req);
        /* The poller runs queued large operations: get it out of
         * epoll_wait. */
        if (!tnt__list_empty(&comm->reqs.heavy) && comm->group->progress.polling)
            tnt__progress_wake(comm);
    }
    tnt__engine_reap(comm);
    if (!(flags & TNT_POST_WAIT_NEXT) && req->result == TNT_INPROGRESS) {
        tnt__onhost_notify(comm); /* back to the application */
        tnt__progress_unpark(comm);
    }
    *out = req;
    return TNT_SUCCESS;
}

static tnt_result_t wait_locked(struct tnt_request *req, double timeout_s,
                                double spin_s, int *finished);
static tnt_result_t wait_blocking(struct tnt_comm *comm,
                                  struct tnt_request *req,
                                  const tnt_coll_args_t *a);
static void release_locked(struct tnt_comm *comm, struct tnt_request *req);

/* A receive from any source (core/p2p.h): a request of no schedule yet
 * on the any list, started by tnt__engine_start_any once a sender's next
 * message with its tag has come (maybe at once); or a receive naming its
 * peer posted behind one from any source with its tag, started once no
 * earlier one is left. Lock held. */
static tnt_result_t post_any_locked(struct tnt_comm *comm,
                                    const tnt_coll_args_t *args, void *recv,
                                    struct tnt_request **out)
{
    if (comm->state != TNT_COMM_OK)
        return tnt__error_str(comm->fail_rc, comm->fail_msg);
    struct tnt_request *req = alloc_request(comm, 1);
    if (!req)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a receive "
                          "from any source");
    req->comm = comm;
    req->args = *args;
    req->sched = &no_sched;
    req->result = TNT_INPROGRESS;
    req->bufs[TNT_BUF_RECV] = recv;
    req->timeout.deadline = tnt__now_coarse() + comm->params.timeout_s;
    tnt__list_push_front(&comm->reqs.all, &req->all_link);
    tnt__list_push_back(&comm->reqs.any, &req->any_link);
    comm->group->progress.last_activity = tnt__now_coarse();
    *out = req;
    tnt__p2p_any_match(comm);
    /* The poller must look for its sender's deadline too. */
    if (req->result == TNT_INPROGRESS && comm->group->progress.polling)
        tnt__progress_wake(comm);
    return TNT_SUCCESS;
}

void tnt__engine_start_any(struct tnt_comm *comm, struct tnt_request *req,
                           int peer)
{
    tnt__list_unlink(&req->any_link);
    tnt_coll_args_t a = req->args;
    a.root = peer;
    int algo;
    tnt_sched_t *sched = NULL;
    tnt_result_t rc = tnt__algo_select(&a, TNT_ALGO_AUTO, &algo);
    if (rc == TNT_SUCCESS)
        rc = get_sched(comm, &a, algo, &sched);
    if (rc == TNT_SUCCESS && req->ops_cap < request_ops(comm, sched)) {
        /* Allocated for one operation, as a receive's schedule has. */
        release_sched(comm, sched);
        rc = tnt__error(TNT_ERR_INTERNAL, "a receive's schedule has more "
                        "than one operation");
    }
    if (rc != TNT_SUCCESS) {
        start_failed(comm, req, rc);
        return;
    }
    struct tnt_request *out;
    start_locked(comm, req, &a, algo, sched, NULL, NULL,
                 req->bufs[TNT_BUF_RECV], 0, NULL, NULL, &out);
}

tnt_result_t tnt__engine_source(struct tnt_request *req, int *source)
{
    struct tnt_comm *comm = req->comm;
    if (comm)
        pthread_mutex_lock(&comm->group->lock);
    int recv = req->args.kind == TNT_COLL_P2P && !req->args.p2p_send;
    tnt_result_t result = req->result;
    int peer = req->args.root;
    if (comm)
        pthread_mutex_unlock(&comm->group->lock);
    if (!recv)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_request_source: the "
                          "request is no receive");
    if (result != TNT_SUCCESS)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_request_source: the "
                          "receive has %s", result == TNT_INPROGRESS
                                                ? "not completed yet"
                                                : "failed");
    *source = peer;
    return TNT_SUCCESS;
}

static tnt_result_t post(struct tnt_comm *comm, const tnt_coll_args_t *args,
                        const void *send, void *recv, unsigned flags,
                        void (*prepare)(void *), void *prepare_arg,
                        struct tnt_request **out)
{
    int forced = forced_algo(comm, args);
    int algo;
    tnt_sched_t *sched = NULL;
    /* Buffers in shared allocations (core/mem.h): where they lie, for
     * the mapped allreduce. */
    tnt_coll_args_t a = *args;
    tnt_mem_ref_t mref[2];
    size_t bytes = a.count * a.esize;
    a.mapped = a.kind == TNT_COLL_ALLREDUCE && a.intra_host && bytes > 0 &&
               tnt__mem_any(&comm->mem) &&
               tnt__mem_find(comm, send, bytes, &mref[0]) &&
               (send == recv ? (mref[1] = mref[0], 1)
                             : tnt__mem_find(comm, recv, bytes, &mref[1]));
    tnt_result_t rc;
    int queued = 0;
    if (a.kind == TNT_COLL_P2P && !a.p2p_send) {
        /* From any source, or from a peer behind one from any source
         * with its tag: waits on the any list (core/p2p.h). */
        tnt__lock_to_post(comm);
        queued = a.root == TNT_ANY_SOURCE ||
                 tnt__p2p_any_waits(comm, a.tag);
        if (queued)
            rc = post_any_locked(comm, &a, recv, out);
        else
            pthread_mutex_unlock(&comm->group->lock);
    }
    if (!queued) {
        rc = tnt__algo_select(&a, forced, &algo);
        if (rc == TNT_SUCCESS)
            rc = get_sched(comm, &a, algo, &sched);
        if (rc != TNT_SUCCESS)
            return rc;
        tnt__lock_to_post(comm);
        rc = post_locked(comm, &a, algo, sched, mref, send, recv, flags,
                         prepare, prepare_arg, out);
    }
    /* A blocking call: post, wait and release in one hold of the lock
     * (docs/performance.md, "A blocking call's fixed cost"). */
    if (rc == TNT_SUCCESS && (flags & TNT_POST_BLOCK)) {
        rc = wait_blocking(comm, *out, &a);
        release_locked(comm, *out);
        *out = NULL;
    }
    pthread_mutex_unlock(&comm->group->lock);
    return rc;
}

tnt_coll_args_t tnt__coll_args(const struct tnt_comm *comm, int kind,
                               size_t count, tnt_dtype_t dtype, tnt_op_t op,
                               int root, int in_place)
{
    tnt_coll_args_t a = {
        .kind = kind, .dtype = dtype, .op = op, .count = count,
        .root = root, .rank = comm->rank, .nranks = comm->nranks,
        .esize = tnt_dtype_size(dtype), .in_place = in_place,
        .segment_bytes = comm->params.segment_bytes,
        .topo = (comm->topo.nranks > 1 &&
                 comm->params.topology == TNT_TOPOLOGY_AUTO)
                    ? &comm->topo : NULL,
        .intra_host = comm->intra_host,
        .ready_min_bytes = comm->ready_min_bytes,
        .reproducible = comm->params.reproducible,
    };
    return a;
}

tnt_result_t tnt__engine_post(struct tnt_comm *comm,
                              const tnt_coll_args_t *args, const void *send,
                              void *recv, unsigned flags,
                              struct tnt_request **out)
{
    return post(comm, args, send, recv, flags, NULL, NULL, out);
}

tnt_result_t tnt__engine_post_prepared(struct tnt_comm *comm,
                                       const tnt_coll_args_t *args,
                                       const void *send, void *recv,
                                       void (*prepare)(void *arg),
                                       void *arg, struct tnt_request **out)
{
    return post(comm, args, send, recv, TNT_POST_DEFER, prepare, arg, out);
}

/* ---- waiting and releasing -------------------------------------------- */

/* Block on cond until `abs` (NULL: no limit). */
static int cond_wait_until(struct tnt_comm *comm, const struct timespec *abs)
{
    if (!abs)
        return pthread_cond_wait(&comm->group->progress.cond, &comm->group->lock);
    return pthread_cond_timedwait(&comm->group->progress.cond, &comm->group->lock, abs);
}

/* Every rank has a CPU of its own and TNT_SPIN_ADAPT is on: the spins
 * are cut by what they see (wait_budget.c). Where ranks share CPUs the
 * spin yields to them at every round instead, as before. */
static int spin_adapts(const struct tnt_comm *comm)
{
    return comm->params.spin_adapt && !tnt__cpus_shared(comm);
}

/* How long a wait spins before its first sleep (wait_budget.h). */
static double spin_floor(struct tnt_comm *comm)
{
    if (!spin_adapts(comm))
        return comm->params.spin_s;
    return tnt__wait_spin_floor(&comm->group->progress.waits, comm->params.spin_s,
                                tnt__now_coarse());
}

/* Poll without sleeping for up to spin_s before the first sleep of a
 * wait: the peers of a small collective answer within microseconds, and
 * a sleep costs a wake-up through the kernel on each side
 * (docs/performance.md, "Spinning before sleeping"); a blocking call may
 * spin for as long as calls like it took (wait_budget.h,
 * docs/performance.md, "How a blocking call waits"). Past TNT_SPIN_US
 * (where the spin adapts: from its start) the spin ends as soon as a
 * yield ran another thread (tnt__progress_spin); where it adapts, what
 * it saw sets the next spins (tnt__wait_spin_outcome). With more ranks
 * on this host than CPUs, yield between polls, so that the ranks being
 * waited for get the CPU. Lock held; the poller role is free on entry. */
static void spin(struct tnt_comm *comm,
                 int (*done)(struct tnt_comm *, void *), void *arg,
                 double start, double limit, double spin_s)
{
    double end = start + spin_s;
    if (end > limit)
        end = limit;
    int adapts = spin_adapts(comm);
    double own_until = adapts ? start : start + comm->params.spin_s;
    tnt_spin_seen_t seen;
    tnt__progress_spin(comm, done, arg, start, end, own_until,
                       tnt__cpus_shared(comm), adapts ? &seen : NULL);
    if (adapts)
        tnt__wait_spin_outcome(&comm->group->progress.waits, tnt__now() - start,
                               seen.measured, seen.lost_s,
                               done(comm, arg), tnt__now_coarse());
}

/* Wait until done(comm, arg), driving progress on this thread whenever
 * the poller role is free, after a spin of up to spin_s (0: none). Lock
 * held. Returns 0 when `end` passed first. */
static int drive_until(struct tnt_comm *comm,
                       int (*done)(struct tnt_comm *, void *), void *arg,
                       double end, const struct timespec *abs,
                       double spin_s)
{
    int woke_thread = 0, spun = spin_s <= 0.0;
    comm->group->progress.user_waiters++;
    while (!done(comm, arg)) {
        double now = tnt__now();
        if (abs && now >= end)
            break;
        if (!comm->group->progress.polling && !spun) {
            spun = 1;
            spin(comm, done, arg, now, abs ? end : now + 1.0, spin_s);
            continue;
        }
        if (!comm->group->progress.polling) {
            int ms = tnt__progress_timeout_ms(comm, now);
            if (abs) {
                int left = (int)((end - now) * 1000.0) + 1;
                if (ms < 0 || left < ms)
                    ms = left;
            }
            tnt__progress_poll(comm, ms, 0);
            comm->group->progress.user_polled_at = tnt__now();
            continue;
        }
        /* The progress thread sits in epoll_wait: get it out once; it
         * parks and frees the role. Another waiting thread holding the
         * role broadcasts when it lets go. */
        if (comm->group->progress.thread_polling && !woke_thread) {
            tnt__progress_wake(comm);
            woke_thread = 1;
        }
        if (cond_wait_until(comm, abs) == ETIMEDOUT)
            break;
    }
    comm->group->progress.user_waiters--;
    /* Collectives nobody waits for need the progress thread again. */
    if (comm->group->progress.user_waiters == 0 &&
        !tnt__list_empty(&comm->reqs.active))
        tnt__progress_unpark(comm);
    return done(comm, arg);
}

static int request_done(struct tnt_comm *comm, void *arg)
{
    (void)comm;
    return ((struct tnt_request *)arg)->result != TNT_INPROGRESS;
}

/* Wait for req with the lock held (timeout_s < 0: no limit). */
static tnt_result_t wait_locked(struct tnt_request *req, double timeout_s,
                                double spin_s, int *finished)
{
    struct tnt_comm *comm = req->comm;
    struct timespec abs;
    double end = 0.0;
    if (timeout_s >= 0) {
        end = tnt__now() + timeout_s;
        abs = tnt__timespec_at(end);
    }
    /* A zero timeout is a test: one look at the sockets without blocking
     * if nobody else is polling (progress, as MPI_Test makes), and no
     * error message for "not yet". */
    if (timeout_s == 0 && req->result == TNT_INPROGRESS) {
        if (!comm->group->progress.polling)
            tnt__progress_poll(comm, 0, 0);
        if (req->result == TNT_INPROGRESS) {
            tnt__onhost_notify(comm);
            *finished = 0;
            return TNT_TIMEOUT;
        }
    }
    /* Time waited: only a wait that finds its collective unfinished
     * reads the clock. */
    if (req->result == TNT_INPROGRESS) {
        double t0 = tnt__now();
        drive_until(comm, request_done, req, end,
                    timeout_s >= 0 ? &abs : NULL, spin_s);
        comm->stats.wait_ns += (uint64_t)((tnt__now() - t0) * 1e9);
    }
    tnt_result_t rc = req->result;
    *finished = (rc != TNT_INPROGRESS);
    if (rc == TNT_INPROGRESS)
        rc = tnt__error(TNT_TIMEOUT, "rank %d: %s #%" PRIu64 " not done "
                        "after %.3f s", comm->rank,
                        tnt__coll_kind_name(req->args.kind),
                 req->seq & ~TNT_P2P_SEQ_BIT,
                        timeout_s);
    else if (rc != TNT_SUCCESS) /* errors, and a deadline that expired */
        tnt__error_str(rc, comm->fail_msg);
    tnt__onhost_notify(comm);
    return rc;
}

/* A blocking call's wait: spin for as long as calls like it took on this
 * communicator where nobody else needs the CPU, else as any wait
 * (wait_budget.h), then
 * sleep; learn how long this one took from the start of its wait. A
 * call finished by its post (lean slots, small messages already there)
 * reads no clock. Lock held. */
static tnt_result_t wait_blocking(struct tnt_comm *comm,
                                  struct tnt_request *req,
                                  const tnt_coll_args_t *a)
{
    int finished;
    if (req->result != TNT_INPROGRESS)
        return wait_locked(req, -1.0, 0.0, &finished);
    size_t bytes = a->count * a->esize;
    double t0 = tnt__now();
    double spin_s = tnt__wait_spin_budget(
        &comm->group->progress.waits, a->kind, bytes, spin_floor(comm),
        tnt__cpus_shared(comm), comm->host_cpus, t0);
    tnt_result_t rc = wait_locked(req, -1.0, spin_s, &finished);
    if (rc == TNT_SUCCESS)
        tnt__wait_learn(&comm->group->progress.waits, a->kind, bytes,
                        tnt__now() - t0);
    return rc;
}

tnt_result_t tnt__engine_wait(struct tnt_request *req, double timeout_s,
                              int *finished)
{
    struct tnt_comm *comm = req->comm;
    *finished = 1;
    if (!comm) /* communicator freed: the result was fixed then */
        return req->result;
    pthread_mutex_lock(&comm->group->lock);
    /* A test (timeout 0) does not spin; a finished request spins no
     * probe away (wait_budget.h). */
    double spin_s = timeout_s != 0 && req->result == TNT_INPROGRESS
                        ? spin_floor(comm) : 0.0;
    tnt_result_t rc = wait_locked(req, timeout_s, spin_s, finished);
    pthread_mutex_unlock(&comm->group->lock);
    return rc;
}

static void release_locked(struct tnt_comm *comm, struct tnt_request *req)
{
    if (req->result == TNT_INPROGRESS) {
        req->detached = 1;
    } else {
        unlink_all(req);
        free_request(comm, req);
    }
}

void tnt__engine_release(struct tnt_request *req)
{
    struct tnt_comm *comm = req->comm;
    if (!comm) {
        free_request(NULL, req);
        return;
    }
    pthread_mutex_lock(&comm->group->lock);
    release_locked(comm, req);
    pthread_mutex_unlock(&comm->group->lock);
}

int tnt__engine_try_release(struct tnt_request *req, tnt_result_t *rc)
{
    struct tnt_comm *comm = req->comm;
    if (!comm) {
        *rc = req->result;
        free_request(NULL, req);
        return 1;
    }
    if (pthread_mutex_trylock(&comm->group->lock) != 0)
        return 0;
    int done = req->result != TNT_INPROGRESS;
    if (done) {
        *rc = req->result;
        if (*rc != TNT_SUCCESS)
            tnt__error_str(*rc, comm->fail_msg);
        unlink_all(req);
        free_request(comm, req);
    }
    pthread_mutex_unlock(&comm->group->lock);
    return done;
}

static int no_connection_pending(struct tnt_comm *comm, void *arg)
{
    (void)arg;
    for (int i = 0; i < comm->nranks; i++)
        if (comm->peers[i].connecting)
            return 0;
    return 1;
}

/* A failed communicator tells its peers why over every connection, and
 * makes a connection to each higher rank it never talked to, since such a
 * rank may be waiting for data from this one (tnt__engine_fail). Those
 * connections must finish their handshake to count: a peer ignores a
 * connection that closes before it proves the job key. Freeing the
 * communicator right after the failing call (what an application does on
 * an error) would cut them off and leave that peer waiting until its
 * deadline, so wait for them here, at most TNT_LINGER_S. */
#define TNT_LINGER_S 2.0

static void linger_for_notices(struct tnt_comm *comm)
{
    if (comm->state == TNT_COMM_OK || no_connection_pending(comm, NULL))
        return;
    double limit = comm->params.timeout_s < TNT_LINGER_S
                       ? comm->params.timeout_s : TNT_LINGER_S;
    /* tests/test_clean_exit.c looks for this line: a clean free never
     * lingers. */
    TNT_LOG_DEBUG("rank %d: free lingers up to %.1f s for connections "
                  "that carry the failure notice", comm->rank, limit);
    double end = tnt__now() + limit;
    struct timespec abs = tnt__timespec_at(end);
    drive_until(comm, no_connection_pending, NULL, end, &abs,
                comm->params.spin_s);
}

/* A shared group's communicator: nothing of it left in a transport, no
 * send whose cookie or bytes are its, no message half read into it. */
static int nothing_in_transport(struct tnt_comm *comm, void *arg)
{
    (void)arg;
    for (int i = 0; i < comm->nranks; i++)
        if (comm->peers[i].sends_inflight || comm->peers[i].rx_arriving)
            return 0;
    return 1;
}

/* Before a communicator of a shared group leaves it (lock held, kept
 * until it has left: no later header reaches it, core/demux.c drops
 * those): its flow-control sends and progress notes still in the
 * transports, and messages whose payload is landing in it, finish
 * first, up to TNT_LINGER_S; a connection still carrying one then is
 * closed, which the other communicators over it hear as a lost peer
 * (docs/design.md, "Sharing connections"). */
static void quiesce_shared(struct tnt_comm *comm)
{
    if (!comm->group->shared || nothing_in_transport(comm, NULL))
        return;
    double end = tnt__now() + TNT_LINGER_S;
    struct timespec abs = tnt__timespec_at(end);
    drive_until(comm, nothing_in_transport, NULL, end, &abs, 0.0);
    for (int i = 0; i < comm->nranks; i++) {
        tnt_peer_t *p = &comm->peers[i];
        if (!p->sends_inflight && !p->rx_arriving)
            continue;
        int net = tnt__net_rank(comm, i);
        void *ep = comm->group->conn[net].ep;
        TNT_LOG_WARN("rank %d: communicator %s freed with messages to or "
                     "from rank %d still in the transport: its connection "
                     "is closed", comm->rank, comm->name, i);
        if (ep)
            p->tp->close(p->tp_ctx, ep);
        tnt__wire_group_lost(comm->group, net, TNT_ERR_PEER_LOST,
                              "closed by a communicator freed with "
                              "messages in flight");
    }
}

void tnt__engine_drain(struct tnt_comm *comm, tnt_result_t rc)
{
    if (!tnt__list_empty(&comm->reqs.active) ||
        !tnt__list_empty(&comm->reqs.any))
        tnt__engine_fail(comm, rc, "rank %d: communicator freed with "
                         "collectives in flight", comm->rank);
    linger_for_notices(comm);
    /* A computation running without the lock (progress thread) still
     * uses its request's scratch: let it return first. */
    while (comm->reqs.busy)
        pthread_cond_wait(&comm->group->progress.cond, &comm->group->lock);
    quiesce_shared(comm);
    tnt__engine_reap(comm);
    /* Requests the user still holds outlive the communicator. */
    while (!tnt__list_empty(&comm->reqs.all)) {
        struct tnt_request *r = TNT_LIST_ENTRY(
            tnt__list_first(&comm->reqs.all), struct tnt_request, all_link);
        tnt__list_unlink(&r->all_link);
        put_scratch(comm, r);
        r->comm = NULL;
    }
}
