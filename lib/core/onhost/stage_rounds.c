/*
 * The rounds of the pairs' staging areas (onhost/stage_layout.h),
 * shared by the staged allreduce, the mapped allreduce and the staged
 * broadcast.
 *
 * Rounds are numbered per communicator across staged collectives
 * (comm->onhost.stage_next), in posting order, which is the same on every rank
 * (the choice of the algorithm depends on the arguments only). Round g
 * may fill buffer g % 2 of a pair once the peer has read what was last
 * published there (its done counters). Staged collectives share the
 * on-host queue (onhost/queue.c) and finish in order with the slot
 * operations; only the oldest unfinished staged collective moves.
 *
 * Per-request state (onhost_state.h): req->ops[q].onhost.stage.put and
 * .got count the rounds published to and copied back from (for a
 * broadcast root: read by) peer q, req->onhost.stage.reduced the rounds
 * this rank has reduced (all of them from the start in a broadcast). The
 * copies run with comm->group->lock held (a round is at most (k - 1) x 256 KiB
 * each way).
 *
 * A peer that called something else at this sequence number never
 * publishes what this rank waits for. Once the request has stalled a
 * while, every header a peer published for this sequence number is
 * compared with this rank's call (tnt__stage_same_seq_check) and the
 * peers' slots and areas are searched for strays
 * (tnt__onhost_check_mismatch, run by the queue once the step returns:
 * req->onhost.check_due), and so again before this rank sleeps.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "collectives/patterns.h"
#include "core/onhost/stage_rounds.h"

static int is_bcast(const struct tnt_request *req)
{
    return req->args.kind == TNT_COLL_BROADCAST;
}

size_t tnt__stage_piece_elems(const struct tnt_request *req)
{
    size_t c = TNT_STAGE_BYTES / req->args.esize;
    return c ? c : 1;
}

void tnt__stage_piece(const struct tnt_request *req, int j, uint64_t t,
                      size_t *off, size_t *n)
{
    size_t soff = 0, slen = req->args.count, poff;
    if (!is_bcast(req))
        tnt__chunk_range(req->args.count, req->args.nranks, j, &soff,
                         &slen);
    tnt__segment(slen, tnt__stage_piece_elems(req), (size_t)t, &poff, n);
    *off = soff + poff;
}

void tnt__stage_number(struct tnt_comm *comm, struct tnt_request *req,
                       uint64_t rounds)
{
    req->onhost.stage.rounds = rounds;
    req->onhost.stage.g0 = comm->onhost.stage_next;
    comm->onhost.stage_next += rounds;
    req->onhost.stage.reduced = 0;
    for (int q = 0; q < comm->nranks; q++) {
        tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
        os->put = os->got = 0;
    }
    req->ops_left = 1; /* until it finishes (tnt__onhost_finish) */
}

void tnt__stage_set_hdr(tnt_stage_hdr_t *h, const struct tnt_request *req,
                        uint64_t g)
{
    h->seq = req->seq;
    h->root = req->args.root;
    h->count = req->args.count;
    h->kind = req->sig.kind;
    h->dtype = req->sig.dtype;
    h->op = req->sig.op;
    h->algo = req->sig.algo;
    /* Zero but in a mapped allreduce (requests start zeroed). */
    h->send_id = req->onhost.map_ref[TNT_BUF_SEND].id;
    h->send_off = req->onhost.map_ref[TNT_BUF_SEND].off;
    h->recv_id = req->onhost.map_ref[TNT_BUF_RECV].id;
    h->recv_off = req->onhost.map_ref[TNT_BUF_RECV].off;
    atomic_store_explicit(&h->no, g + 1, memory_order_release);
}

/* The signature a peer's header carries, as a message header. */
static tnt_msg_hdr_t hdr_sig(const struct tnt_comm *comm,
                             const tnt_stage_hdr_t *s)
{
    return tnt__mem_sig(comm, s->seq, s->count, s->kind, s->dtype, s->op,
                        s->algo, s->root);
}

/* Not "round g - 2": a broadcast uses only the root's output buffers, so
 * the last round in a buffer can be any earlier one. */
int tnt__stage_room(const _Atomic uint64_t *done, const tnt_stage_hdr_t *mine)
{
    return atomic_load_explicit(done, memory_order_acquire) >=
           atomic_load_explicit(&mine->no, memory_order_relaxed);
}

/* Header i of a side: 0-1 the input buffers', 2-3 the output
 * buffers'. */
static const tnt_stage_hdr_t *hdr_at(const tnt_stage_side_t *s, int i)
{
    return i < 2 ? &s->in_hdr[i] : &s->out_hdr[i - 2];
}

int tnt__stage_put_rounds(struct tnt_comm *comm, struct tnt_request *req,
                          int q, int out, int with_data)
{
    tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
    const unsigned char *send = req->bufs[TNT_BUF_SEND];
    size_t es = req->args.esize;
    int moved = 0;
    while (os->put < req->onhost.stage.rounds) {
        uint64_t g = req->onhost.stage.g0 + os->put;
        int b = (int)(g & 1);
        tnt_stage_side_t *m = tnt__stage_mine(comm, q);
        const tnt_stage_side_t *th = tnt__stage_theirs(comm, q);
        tnt_stage_hdr_t *h = out ? &m->out_hdr[b] : &m->in_hdr[b];
        if (!tnt__stage_room(out ? &th->out_done[b] : &th->in_done[b], h))
            break;
        if (with_data) {
            size_t off, n;
            tnt__stage_piece(req, q, os->put, &off, &n);
            memcpy(out ? m->out[b] : m->in[b], send + off * es, n * es);
        }
        tnt__stage_set_hdr(h, req, g);
        os->put++;
        comm->peers[q].onhost.slot_notify = 1;
        moved = 1;
    }
    return moved;
}

int tnt__stage_round_there(struct tnt_comm *comm, struct tnt_request *req,
                           int q, const tnt_stage_hdr_t *h, uint64_t g)
{
    if (atomic_load_explicit(&h->no, memory_order_acquire) != g + 1)
        return 0;
    tnt_msg_hdr_t sig = hdr_sig(comm, h);
    if (sig.seq != req->seq || !tnt__sig_equal(&sig, &req->sig)) {
        comm->onhost.engine->report_mismatch(comm, req, &sig, q);
        return 0;
    }
    return 1;
}

/* A peer that closed while this rank still has results for it fails the
 * communicator (every peer waits for this rank's results while it has
 * rounds to reduce). */
int tnt__stage_inputs_there(struct tnt_comm *comm, struct tnt_request *req,
                            uint64_t g)
{
    for (int q = 0; q < comm->nranks; q++) {
        if (q == comm->rank)
            continue;
        if (!comm->peers[q].ep) {
            comm->onhost.engine->fail_peer_lost(comm, q,
                                                 "closed its connection");
            return 0;
        }
        if (!tnt__stage_round_there(comm, req, q,
                                    &tnt__stage_theirs(comm, q)->in_hdr[g & 1],
                                    g))
            return 0;
    }
    return 1;
}

void tnt__stage_mark_inputs_read(struct tnt_comm *comm, uint64_t g)
{
    for (int q = 0; q < comm->nranks; q++) {
        if (q == comm->rank)
            continue;
        atomic_store_explicit(&tnt__stage_mine(comm, q)->in_done[g & 1],
                              g + 1, memory_order_release);
        comm->peers[q].onhost.slot_notify = 1;
    }
}

int tnt__stage_get_outputs(struct tnt_comm *comm, struct tnt_request *req,
                           int q)
{
    tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
    size_t es = req->args.esize;
    int moved = 0;
    while (os->got < req->onhost.stage.rounds) {
        uint64_t g = req->onhost.stage.g0 + os->got;
        int b = (int)(g & 1);
        const tnt_stage_side_t *th = tnt__stage_theirs(comm, q);
        if (!tnt__stage_round_there(comm, req, q, &th->out_hdr[b], g))
            break;
        size_t off, n;
        tnt__stage_piece(req, q, os->got, &off, &n);
        memcpy(req->bufs[TNT_BUF_RECV] + off * es, th->out[b], n * es);
        atomic_store_explicit(&tnt__stage_mine(comm, q)->out_done[b], g + 1,
                              memory_order_release);
        os->got++;
        comm->peers[q].onhost.slot_notify = 1;
        moved = 1;
    }
    return moved;
}

/* A peer that has every result of this rank and whose results this rank
 * has read may have finished and closed: that is no error. */
int tnt__stage_peers_there(struct tnt_comm *comm, struct tnt_request *req,
                           int (*needs)(const struct tnt_request *req, int q))
{
    for (int q = 0; q < comm->nranks; q++) {
        tnt_peer_t *p = &comm->peers[q];
        if (q == comm->rank || p->ep || !needs(req, q))
            continue;
        if (p->dead)
            comm->onhost.engine->fail_peer_lost(comm, q,
                                                 "closed its connection");
        else
            comm->onhost.engine->ensure_connect(comm, p);
        return 0;
    }
    return 1;
}

void tnt__stage_after_step(struct tnt_comm *comm, struct tnt_request *req,
                           int moved)
{
    if (moved) {
        /* A peer may sleep on a round it needs: wake it now rather than
         * when this rank sleeps, or the pipeline stalls a round. */
        comm->onhost.slot_notify = 1;
        tnt__onhost_notify(comm);
        req->onhost.stage.stalls = 0;
    } else if (++req->onhost.stage.stalls %
                   TNT_STAGE_STALLS_BEFORE_CHECK == 0) {
        req->onhost.check_due = 1; /* the queue looks, after this step */
    }
}

/* A peer's header for this rank's sequence number with another
 * signature: the peer called something else here (an allreduce against
 * a broadcast, another root). Only headers this rank has not marked read
 * are looked at: the peer rewrites a buffer's header only after that, so
 * these are not being written. */
void tnt__stage_same_seq_check(struct tnt_comm *comm,
                               struct tnt_request *req)
{
    for (int q = 0; q < comm->nranks && comm->state == TNT_COMM_OK; q++) {
        if (q == comm->rank || !comm->peers[q].ep)
            continue;
        const tnt_stage_side_t *th = tnt__stage_theirs(comm, q);
        tnt_stage_side_t *m = tnt__stage_mine(comm, q);
        for (int i = 0; i < 4; i++) {
            const tnt_stage_hdr_t *h = hdr_at(th, i);
            const _Atomic uint64_t *done = i < 2 ? &m->in_done[i]
                                                 : &m->out_done[i - 2];
            uint64_t no = atomic_load_explicit(&h->no, memory_order_acquire);
            if (no == 0 ||
                no <= atomic_load_explicit(done, memory_order_relaxed) ||
                h->seq != req->seq)
                continue;
            tnt_msg_hdr_t sig = hdr_sig(comm, h);
            if (!tnt__sig_equal(&sig, &req->sig)) {
                comm->onhost.engine->report_mismatch(comm, req, &sig, q);
                return;
            }
        }
    }
}

void tnt__stage_check_strays(struct tnt_comm *comm, int q)
{
    /* Inputs of an allreduce, and a broadcast root's data in the output
     * buffers. */
    for (int i = 0; i < 4 && comm->state == TNT_COMM_OK; i++) {
        const tnt_stage_hdr_t *h = hdr_at(tnt__stage_theirs(comm, q), i);
        uint64_t no = atomic_load_explicit(&h->no, memory_order_acquire);
        if (no <= comm->onhost.stage_next || h->seq >= comm->next_seq)
            continue;
        tnt_msg_hdr_t sig = hdr_sig(comm, h);
        if (comm->onhost.engine->mismatch_past(comm, &sig, q))
            return;
    }
}

int tnt__stage_needs(const struct tnt_request *req, int q)
{
    const tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
    return os->got < req->onhost.stage.rounds ||
           os->put < req->onhost.stage.rounds;
}

uint32_t tnt__stage_nops(const struct tnt_request *req)
{
    (void)req;
    return 1;
}

int tnt__stage_describe(const struct tnt_request *req, int q,
                        const char *sep, char *buf, size_t len)
{
    const tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
    return snprintf(buf, len, "%sstaged round %" PRIu64 " of %" PRIu64
                    ": rank %d (published %" PRIu64 ", reduced %" PRIu64
                    ", results read %" PRIu64 "; %zu bytes)", sep,
                    os->got, req->onhost.stage.rounds, q, os->put,
                    req->onhost.stage.reduced, os->got,
                    req->args.count * req->args.esize);
}

size_t tnt__stage_report(const struct tnt_request *req, char *buf,
                         size_t len)
{
    return tnt__onhost_report_peers(req, buf, len, tnt__stage_needs,
                                    tnt__stage_describe);
}

int tnt__stage_allreduce_step(struct tnt_comm *comm, struct tnt_request *req,
                              int with_data,
                              int (*reduce)(struct tnt_comm *comm,
                                            struct tnt_request *req),
                              int (*get_results)(struct tnt_comm *comm,
                                                 struct tnt_request *req,
                                                 int q))
{
    int k = comm->nranks, me = comm->rank, moved = 0;
    if (!tnt__stage_peers_there(comm, req, tnt__stage_needs))
        return 0;
    for (int q = 0; q < k; q++)
        if (q != me && comm->peers[q].ep)
            moved |= tnt__stage_put_rounds(comm, req, q, 0, with_data);
    moved |= reduce(comm, req);
    int all = req->onhost.stage.reduced == req->onhost.stage.rounds;
    for (int q = 0; q < k && comm->state == TNT_COMM_OK; q++) {
        if (q == me || !comm->peers[q].ep)
            continue;
        moved |= get_results(comm, req, q);
        all &= !tnt__stage_needs(req, q);
    }
    tnt__stage_after_step(comm, req, moved);
    return all && comm->state == TNT_COMM_OK;
}
