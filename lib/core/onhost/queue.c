/*
 * The on-host queue: every on-host request in flight (onhost/onhost.h),
 * oldest first. On-host requests are numbered in posting order, which is
 * the same on every rank (the choice of the algorithm depends on the
 * arguments only), and finish in that order; later ones publish (and
 * look) while earlier ones wait. The queue runs from the post, the
 * blocking calls' spin and the poller after each batch of events
 * (progress.c), with comm->group->lock held, and calls each request's algorithm
 * through its table.
 *
 * A collective of messages can be stranded by a stray: a peer that
 * published an on-host operation where this rank called something else
 * never sends this rank a message. The queue searches the peers' slots
 * and staging areas for such strays while collectives of messages are in
 * flight, from a stalled staged collective, and before this rank sleeps.
 */
#include "core/onhost/onhost.h"

const tnt_onhost_algo_t *tnt__onhost_algo(int algo, int kind)
{
    switch (algo) {
    case TNT_ALGO_SLOTS:
    case TNT_ALGO_CANON_SLOTS:
        return &tnt__onhost_slots;
    case TNT_ALGO_MAPPED:
    case TNT_ALGO_CANON_MAPPED:
        return &tnt__onhost_mapped_allreduce;
    case TNT_ALGO_STAGED:
    case TNT_ALGO_CANON_STAGED:
        return kind == TNT_COLL_BROADCAST ? &tnt__onhost_staged_bcast
                                          : &tnt__onhost_staged_allreduce;
    default: /* a schedule of messages */
        return NULL;
    }
}

void tnt__onhost_finish(struct tnt_comm *comm, struct tnt_request *req)
{
    tnt__onhost_notify(comm);
    tnt__onhost_unqueue(comm, req);
    req->ops_left = 0;
    /* nothing ready, nothing left: finishes */
    comm->onhost.engine->run_ready(comm, req);
}

/* Strays in every peer's staging areas and slots. */
static void check_strays(struct tnt_comm *comm)
{
    for (int q = 0; q < comm->nranks && comm->state == TNT_COMM_OK; q++) {
        if (q == comm->rank || !comm->peers[q].ep)
            continue;
        tnt__stage_check_strays(comm, q);
        tnt__slots_check_strays(comm, q);
    }
}

void tnt__onhost_progress(struct tnt_comm *comm)
{
    comm->onhost.stage_more = 0; /* the mapped allreduce sets it again */
    /* Two on-host operations meet in shared memory and compare there.
     * Reading the peers' lines each round would cost a cache miss each;
     * an on-host operation that stands against another kind is found by
     * tnt__onhost_check_mismatch, from a stalled staged collective and
     * before sleeping. */
    if (comm->active_msgs)
        check_strays(comm);
    if (comm->state != TNT_COMM_OK)
        return;
    /* Only the oldest request of the staging rounds moves: its rounds
     * come before a later one's. */
    int head = 1, stage_seen = 0;
    for (struct tnt_request *r = comm->onhost.head, *next; r; r = next) {
        next = r->onhost.next;
        if (r->deferred) /* posted by fusion; the poller starts it */
            break;
        const tnt_onhost_algo_t *a = tnt__onhost_algo_of(r);
        if (a->stage_rounds) {
            if (stage_seen)
                break;
            stage_seen = 1;
        }
        int ready = a->step(comm, r);
        if (r->onhost.check_due) { /* its staging rounds stalled */
            r->onhost.check_due = 0;
            tnt__onhost_check_mismatch(comm, r);
            if (comm->state != TNT_COMM_OK)
                return;
        }
        if (ready && head) {
            if (a->stage_rounds)
                stage_seen = 0;
            if (a->complete)
                a->complete(comm, r);
            tnt__onhost_finish(comm, r);
        } else {
            head = 0;
        }
        if (comm->state != TNT_COMM_OK)
            return;
    }
}

void tnt__onhost_check_mismatch(struct tnt_comm *comm,
                                struct tnt_request *req)
{
    if (comm->state != TNT_COMM_OK)
        return;
    check_strays(comm);
    if (tnt__onhost_algo_of(req)->stage_rounds && comm->state == TNT_COMM_OK)
        tnt__stage_same_seq_check(comm, req);
}

void tnt__onhost_before_sleep(struct tnt_comm *comm)
{
    struct tnt_request *h = comm->onhost.head;
    if (h && !h->deferred)
        tnt__onhost_check_mismatch(comm, h);
}

void tnt__onhost_enqueue(struct tnt_comm *comm, struct tnt_request *req)
{
    tnt__onhost_algo_of(req)->start(comm, req);
    req->onhost.queued = 1;
    req->onhost.next = NULL;
    if (comm->onhost.tail)
        comm->onhost.tail->onhost.next = req;
    else
        comm->onhost.head = req;
    comm->onhost.tail = req;
}

void tnt__onhost_unqueue(struct tnt_comm *comm, struct tnt_request *req)
{
    struct tnt_request **pp = &comm->onhost.head, *prev = NULL;
    while (*pp && *pp != req) {
        prev = *pp;
        pp = &(*pp)->onhost.next;
    }
    if (*pp) {
        *pp = req->onhost.next;
        if (comm->onhost.tail == req)
            comm->onhost.tail = prev;
    }
    req->onhost.next = NULL;
    req->onhost.queued = 0;
    const tnt_onhost_algo_t *a = tnt__onhost_algo_of(req);
    if (a->dequeued)
        a->dequeued(comm, req);
}

void tnt__onhost_peer_closing(struct tnt_comm *comm, int q)
{
    if (!comm->peers[q].ep || comm->state != TNT_COMM_OK)
        return;
    for (struct tnt_request *r = comm->onhost.head; r; r = r->onhost.next)
        if (!tnt__onhost_algo_of(r)->peer_closing(comm, r, q))
            return;
}

int tnt__onhost_needs(const struct tnt_request *req, int q)
{
    return tnt__onhost_algo_of(req)->needs(req, q);
}

uint32_t tnt__onhost_nops(const struct tnt_request *req)
{
    return tnt__onhost_algo_of(req)->nops(req);
}

size_t tnt__onhost_report(const struct tnt_request *req, char *buf,
                          size_t len)
{
    return tnt__onhost_algo_of(req)->report(req, buf, len);
}
