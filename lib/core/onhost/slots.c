/*
 * The slots allreduce (TNT_ALGO_SLOTS): a small allreduce among ranks that
 * all share this host goes through the collective slots of the pairs'
 * shared-memory segments (onhost/slot_layout.h) instead of messages. Each
 * rank copies its input into its slot of every pair, waits until every
 * peer's slot holds the same operation's input, and reduces the k inputs
 * in rank order (collectives/rank_order.h, so all ranks get the same
 * bits). No schedule runs: the request carries per-peer flags in its ops
 * array (req->ops[q].onhost.slots.passed, onhost_state.h: SLOT_PUT
 * published to that peer, SLOT_GOT its input is there) and its number in
 * req->onhost.slots.no.
 *
 * Slot operations are numbered per communicator, in posting order, which
 * is the same on every rank (the choice of the algorithm depends on the
 * arguments only). Operation n uses slot n % 2. It may publish once
 *  - this rank has finished operation n - 2 (its own input of n - 2 is
 *    read from that slot: in place, the receive buffer is being
 *    overwritten), and slot operations finish here in order;
 *  - the peer has read this rank's input of n - 2 (its done counter).
 * A peer's slot is taken for operation n when its number says n and its
 * signature (sequence number, kind, count, dtype, op, algorithm) matches
 * this rank's call; anything else is a mismatch, reported as for messages.
 *
 * Everything runs with comm->group->lock held, from the post, the blocking
 * calls' spin and the poller after each batch of events (progress.c),
 * through the on-host queue (onhost/queue.c) that it shares with the
 * staged and mapped algorithms.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/onhost/onhost.h"
#include "core/onhost/slot_layout.h"

enum { SLOT_PUT = 1, SLOT_GOT = 2, SLOT_BOTH = 3 };

/* The pair areas with q as slots (tnt__onhost_mine, _theirs). */
static tnt_slot_side_t *mine_of(struct tnt_comm *comm, int q)
{
    return tnt__onhost_mine(comm, q, TNT_TP_AREA_SLOTS);
}

static const tnt_slot_side_t *theirs_of(struct tnt_comm *comm, int q)
{
    return tnt__onhost_theirs(comm, q, TNT_TP_AREA_SLOTS);
}

/* Publish req's input in this rank's slot of the pair with q. */
static void put(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    tnt_slot_t *s = &mine_of(comm, q)->slot[req->onhost.slots.no & 1];
    s->seq = req->seq;
    s->count = (uint32_t)req->args.count;
    s->kind = req->sig.kind;
    s->dtype = req->sig.dtype;
    s->op = req->sig.op;
    s->algo = req->sig.algo;
    s->completed = comm->onhost.completed;
    memcpy(s->data, req->bufs[TNT_BUF_SEND], req->args.count * req->args.esize);
    atomic_store_explicit(&s->no, req->onhost.slots.no + 1,
                          memory_order_release);
    comm->peers[q].onhost.slot_notify = 1;
    comm->onhost.slot_notify = 1;
}

/* The signature a peer's slot carries, as a message header. */
static tnt_msg_hdr_t slot_sig(const struct tnt_comm *comm,
                              const tnt_slot_t *s)
{
    return tnt__mem_sig(comm, s->seq, s->count, s->kind, s->dtype, s->op,
                        s->algo, 0);
}

/* Is q's input for req there? Fails the communicator on a mismatch. */
static int got(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    const tnt_slot_t *s = &theirs_of(comm, q)->slot[req->onhost.slots.no & 1];
    uint64_t no = atomic_load_explicit(&s->no, memory_order_acquire);
    if (no != req->onhost.slots.no + 1)
        return 0;
    tnt_msg_hdr_t h = slot_sig(comm, s);
    if (h.seq != req->seq || !tnt__sig_equal(&h, &req->sig)) {
        comm->onhost.engine->report_mismatch(comm, req, &h, q);
        return 0;
    }
    tnt_peer_t *p = &comm->peers[q];
    if (s->completed > p->onhost.slot_completed)
        p->onhost.slot_completed = s->completed;
    return 1;
}

/* May req publish to q: q has read this rank's operation n - 2? */
static int room(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    if (req->onhost.slots.no < 2)
        return 1;
    if (comm->onhost.completed + 1 < req->onhost.slots.no)
        return 0;
    /* What q said when it last published is usually enough: a peer
     * that calls one blocking allreduce after another has finished n - 2
     * when it publishes n - 1. */
    uint64_t no = req->onhost.slots.no;
    if (comm->peers[q].onhost.slot_completed + 1 >= no)
        return 1;
    return atomic_load_explicit(&theirs_of(comm, q)->done[no & 1],
                                memory_order_acquire) + 1 >= no;
}

/* Rank i's input of req: a copy saved when its connection closed
 * (peer_closing), else the slot itself; this rank's own input
 * as published in any pair's slot (the receive buffer may be it). */
static const unsigned char *input(struct tnt_comm *comm,
                                  const struct tnt_request *req, int i)
{
    if (req->ops[i].onhost.slots.saved)
        return req->ops[i].onhost.slots.saved->data;
    int b = (int)(req->onhost.slots.no & 1);
    if (i != comm->rank)
        return theirs_of(comm, i)->slot[b].data;
    for (int q = 0;; q++)
        if (q != i && comm->peers[q].ep)
            return mine_of(comm, q)->slot[b].data;
}

/* Keep a copy of `bytes` at src for req's input i, in an early-message
 * buffer (charged like one). 0 if out of memory. */
static int save(struct tnt_comm *comm, struct tnt_request *req, int i,
                const unsigned char *src)
{
    size_t bytes = req->args.count * req->args.esize;
    tnt_unexp_t *u = comm->onhost.engine->alloc_unexp(comm);
    if (!u)
        return 0;
    u->data = tnt__bufpool_get(&comm->pool, bytes, &u->cap);
    u->len = bytes;
    comm->unexp_bytes += TNT_UNEXP_COST(bytes);
    tnt__count_unexp(&comm->stats, comm->unexp_bytes);
    if (!u->data) {
        comm->onhost.engine->free_unexp(comm, u);
        return 0;
    }
    memcpy(u->data, src, bytes);
    req->ops[i].onhost.slots.saved = u;
    return 1;
}

/* Every input is there: reduce in rank order into the receive buffer,
 * tell each peer its slot is free again. */
static void reduce_inputs(struct tnt_comm *comm, struct tnt_request *req)
{
    int k = comm->nranks, me = comm->rank, b = (int)(req->onhost.slots.no & 1);
    unsigned char *dst = req->bufs[TNT_BUF_RECV];
    /* Every input is read from a slot (or a saved copy), never from dst:
     * in place, dst is this rank's input and is overwritten here. The
     * reproducible mode reduces them canonically (collectives/canon.h;
     * selection keeps it to TNT_CANON_ONHOST_MAX_RANKS ranks). */
    if (req->algo == TNT_ALGO_CANON_SLOTS) {
        const void *in[TNT_CANON_ONHOST_MAX_RANKS] = {0};
        for (int i = 0; i < k && i < TNT_CANON_ONHOST_MAX_RANKS; i++)
            in[i] = input(comm, req, i);
        tnt__onhost_canon(req, dst, in, req->args.count);
    } else {
        for (int i = 0; i < k; i++)
            tnt__onhost_fold(req, dst, i, input(comm, req, i),
                             req->args.count);
    }
    for (int q = 0; q < k; q++)
        if (q != me && comm->peers[q].ep)
            atomic_store_explicit(&mine_of(comm, q)->done[b],
                                  req->onhost.slots.no + 1,
                                  memory_order_release);
    comm->onhost.completed = req->onhost.slots.no + 1;
}

/* One look at every peer for req; 1 once it has every input. */
static int step(struct tnt_comm *comm, struct tnt_request *req)
{
    int k = comm->nranks, me = comm->rank, all = 1;
    for (int q = 0; q < k && comm->state == TNT_COMM_OK; q++) {
        unsigned *passed = &req->ops[q].onhost.slots.passed;
        if (q == me || *passed == SLOT_BOTH)
            continue;
        tnt_peer_t *p = &comm->peers[q];
        if (!p->ep) {
            if (p->dead)
                comm->onhost.engine->fail_peer_lost(comm, q,
                                                     "closed its connection");
            else
                comm->onhost.engine->ensure_connect(comm, p);
            all = 0;
            continue;
        }
        if (!(*passed & SLOT_PUT) && room(comm, req, q)) {
            put(comm, req, q);
            *passed |= SLOT_PUT;
            req->ops_left--;
        }
        if (!(*passed & SLOT_GOT) && got(comm, req, q)) {
            *passed |= SLOT_GOT;
            req->ops_left--;
        }
        if (*passed != SLOT_BOTH)
            all = 0;
    }
    return all && comm->state == TNT_COMM_OK;
}

/* A peer that published a slot operation this rank has not posted, for
 * a sequence number where this rank called something else (a message
 * collective, say): nobody would ever send the other a message. Compared
 * as a message for an earlier collective would be. */
void tnt__slots_check_strays(struct tnt_comm *comm, int q)
{
    for (int b = 0; b < 2 && comm->state == TNT_COMM_OK; b++) {
        const tnt_slot_t *s = &theirs_of(comm, q)->slot[b];
        uint64_t no = atomic_load_explicit(&s->no, memory_order_acquire);
        if (no <= comm->onhost.next || s->seq >= comm->next_seq)
            continue;
        tnt_msg_hdr_t h = slot_sig(comm, s);
        if (comm->onhost.engine->mismatch_past(comm, &h, q))
            return;
    }
}

static void number(struct tnt_comm *comm, struct tnt_request *req)
{
    req->onhost.slots.no = comm->onhost.next++;
    req->ops_left = 2u * (uint32_t)(comm->nranks - 1);
}

/* Looks at the peers' slots before a lean run gives up and the request
 * goes on queued, with the poller's round over rings and sockets: a few
 * microseconds, about what peers calling in step take to arrive. */
#define LEAN_ROUNDS 256

/* The table's run_now (onhost.h): publish and look at the peers' slots
 * up to LEAN_ROUNDS times (once if this host has more ranks than CPUs;
 * no more once another thread waits for the lock). */
static int run_now(struct tnt_comm *comm, struct tnt_request *req)
{
    number(comm, req);
    req->onhost.lean = 1;
    /* A rank that shares its CPU must not spin: its peers need it. */
    int rounds = comm->host_cpus > 0 && comm->host_ranks > comm->host_cpus
                     ? 1 : LEAN_ROUNDS;
    for (int n = 0; n < rounds; n++) {
        if (step(comm, req)) {
            reduce_inputs(comm, req);
            tnt__onhost_notify(comm);
            req->ops_left = 0;
            req->result = TNT_SUCCESS;
            return 1;
        }
        if (comm->state != TNT_COMM_OK) {
            req->result = comm->fail_rc;
            return 1;
        }
        /* Another thread waits to post: the queued request's spin lets
         * it in. */
        if (__atomic_load_n(&comm->group->lock_wanted, __ATOMIC_RELAXED))
            break;
    }
    return 0;
}

static void start(struct tnt_comm *comm, struct tnt_request *req)
{
    if (!req->onhost.lean)
        number(comm, req);
}

/* Give back the copies peer_closing kept. */
static void drop_saved(struct tnt_comm *comm, struct tnt_request *req)
{
    for (int i = 0; i < comm->nranks; i++)
        if (req->ops[i].onhost.slots.saved) {
            comm->onhost.engine->free_unexp(comm,
                                            req->ops[i].onhost.slots.saved);
            req->ops[i].onhost.slots.saved = NULL;
        }
}

/* Keep the inputs q's slots hold for req, and this rank's own, before
 * q's segment goes away. */
static int peer_closing(struct tnt_comm *comm, struct tnt_request *req,
                        int q)
{
    int me = comm->rank;
    unsigned *passed = &req->ops[q].onhost.slots.passed;
    if (!(*passed & SLOT_PUT))
        return 1; /* it still needs this rank's input: lost */
    int b = (int)(req->onhost.slots.no & 1);
    if (!req->ops[me].onhost.slots.saved &&
        !save(comm, req, me, mine_of(comm, q)->slot[b].data))
        return 0;
    int had = *passed & SLOT_GOT;
    if (!had && !got(comm, req, q))
        return 1; /* its input is not there: lost */
    if (!save(comm, req, q, theirs_of(comm, q)->slot[b].data))
        return 0;
    if (!had) {
        *passed |= SLOT_GOT;
        req->ops_left--;
    }
    return 1;
}

static int needs(const struct tnt_request *req, int q)
{
    const tnt_onhost_peer_t *os = &req->ops[q].onhost;
    return os->slots.passed != SLOT_BOTH || !os->slots.saved;
}

static uint32_t nops(const struct tnt_request *req)
{
    return 2u * (uint32_t)(req->args.nranks - 1);
}

/* For the report: q has not both had this rank's input and given its
 * own. */
static int waits(const struct tnt_request *req, int q)
{
    return req->ops[q].onhost.slots.passed != SLOT_BOTH;
}

static int describe(const struct tnt_request *req, int q, const char *sep,
                    char *buf, size_t len)
{
    return snprintf(buf, len, "%sslot step 0: %s rank %d (slot operation %"
                    PRIu64 ", %zu bytes)", sep,
                    (req->ops[q].onhost.slots.passed & SLOT_PUT)
                        ? "input from" : "room at",
                    q, req->onhost.slots.no, req->args.count * req->args.esize);
}

static size_t report(const struct tnt_request *req, char *buf, size_t len)
{
    return tnt__onhost_report_peers(req, buf, len, waits, describe);
}

const tnt_onhost_algo_t tnt__onhost_slots = {
    .start = start,
    .step = step,
    .complete = reduce_inputs,
    .dequeued = drop_saved,
    .peer_closing = peer_closing,
    .needs = needs,
    .nops = nops,
    .report = report,
    .stage_rounds = 0,
    .run_now = run_now,
};
