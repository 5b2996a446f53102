/*
 * The staged allreduce (TNT_ALGO_STAGED): a large allreduce among ranks
 * that all share this host, through the staging areas of the pairs'
 * shared-memory segments (transport/shm/shm_stage.h) instead of messages.
 * The buffer is cut into k slices as the direct allreduce cuts it (slice
 * j is rank j's), and each slice into rounds of at most TNT_STAGE_BYTES.
 * In round t every rank
 *  1. copies piece t of slice q of its input into its input buffer of
 *     the pair with q, for every peer q;
 *  2. once every peer's piece t of its own slice is there, reduces the k
 *     pieces in rank order where they lie (its own from its send buffer)
 *     into its output buffer of one pair, copies the result to the other
 *     pairs' output buffers and its receive buffer, and tells each peer
 *     its input buffer is free;
 *  3. copies each peer's result piece out of the peer's output buffer
 *     into its receive buffer and tells the peer.
 * Round t + 1 fills the other buffer of each pair, so a rank may be a
 * round ahead of its peers. Each slice is reduced once, by its owner, in
 * rank order: every rank gets the same bits, whatever the timing.
 *
 * Why: on one host with more ranks than cores the direct allreduce's
 * messages cost a copy into the ring and one out of it into scratch, a
 * frame, a header, a match and often a wake-up each; here a byte is
 * copied into shared memory once, reduced where it lies and copied out
 * once, and a round costs two waits (docs/performance.md, "On one host:
 * staged or direct").
 *
 * Rounds are numbered per communicator across staged allreduces
 * (comm->stage_next), in posting order, which is the same on every rank
 * (the choice of the algorithm depends on the arguments only). Round g
 * may fill buffer g % 2 of a pair once the peer has read what was last
 * published there (its done counters). Staged allreduces share the slot queue
 * (onhost/slots.c) and finish in order with the slot operations; only the
 * oldest unfinished staged allreduce moves.
 *
 * The staged broadcast uses the output buffers only: in round t the root
 * copies piece t of its buffer into its output buffer of every pair, and
 * every other rank copies it out of the pair with the root and marks it
 * read. The root finishes once every peer has read the last round: a
 * rank that wrongly believes itself the root (a mismatch) then waits,
 * and is found, instead of returning with nobody having read its data.
 * A rank that is not the root hears from the root alone, so every rank
 * also publishes its signature, without data, in its input header of
 * every pair (a broadcast leaves the input buffers unused), and finishes
 * only once it has read and checked every peer's: a bystander of a
 * mismatch (another root, count, dtype, or another collective) fails
 * instead of returning success (bcast_sig).
 *
 * The mapped allreduce (TNT_ALGO_MAPPED) runs as one staged round whose
 * buffers hold no data: when every rank's send and receive buffers lie
 * in shared allocations (core/mem.h), each rank publishes in its input
 * headers where they lie (allocation number and offset); once it has
 * every peer's, it reduces its slice of all k send buffers where they
 * lie, in rank order, a cache-sized block at a time, writes each result
 * block into all k receive buffers, and marks each peer's input read.
 * A rank is done when every peer has so marked its own: its receive
 * buffer is complete and nobody reads its send buffer any more. A byte
 * is read once and written once per rank, the least an allreduce that
 * leaves the result in every rank's memory can move (docs/shm.md). The
 * same rank order as the staged allreduce: the same bits.
 *
 * Per-request state: req->ops[q].stage_put and .stage_got count the
 * rounds published to and copied back from (for a broadcast root: read
 * by) peer q, req->stage_reduced the rounds this rank has reduced (all
 * of them from the start in a broadcast). The copies run with
 * comm->lock held (a round is at most (k - 1) x 256 KiB each way).
 *
 * A peer that called something else at this sequence number never
 * publishes what this rank waits for. Once the request has stalled a
 * while, every header a peer published for this sequence number is
 * compared with this rank's call (tnt__stage_same_seq_check) and the
 * peers' slots and areas are searched for strays
 * (tnt__slot_check_mismatch), and so again before this rank sleeps.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/patterns.h"
#include "core/comm_tp.h"
#include "core/engine_internal.h"
#include "transport/shm/shm_stage.h"

static tnt_stage_side_t *mine_of(struct tnt_comm *comm, int q)
{
    void *mine;
    const void *theirs;
    tnt__comm_tp_pair_area(comm, q, TNT_TP_AREA_STAGES, &mine, &theirs);
    return mine;
}

static const tnt_stage_side_t *theirs_of(struct tnt_comm *comm, int q)
{
    void *mine;
    const void *theirs;
    tnt__comm_tp_pair_area(comm, q, TNT_TP_AREA_STAGES, &mine, &theirs);
    return theirs;
}

/* Elements per round and piece. */
static size_t piece_elems(const struct tnt_request *req)
{
    size_t c = TNT_STAGE_BYTES / req->args.esize;
    return c ? c : 1;
}

static int is_bcast(const struct tnt_request *req)
{
    return req->args.kind == TNT_COLL_BROADCAST;
}

static int is_mapped(const struct tnt_request *req)
{
    return req->algo == TNT_ALGO_MAPPED;
}

/* The mapped allreduce's block: reduced from the k inputs, then copied
 * to the k outputs while it is still in cache (64 KiB: docs/performance.md,
 * "The mapped allreduce's block"). */
#define TNT_MAP_BLOCK ((size_t)64 << 10)

/* Piece t (a local round) of slice j: [*off, *off + *n) of the buffer;
 * a broadcast has one slice, the whole buffer. */
static void piece(const struct tnt_request *req, int j, uint64_t t,
                  size_t *off, size_t *n)
{
    size_t soff = 0, slen = req->args.count, poff;
    if (!is_bcast(req))
        tnt__chunk_range(req->args.count, req->args.nranks, j, &soff,
                         &slen);
    tnt__segment(slen, piece_elems(req), (size_t)t, &poff, n);
    *off = soff + poff;
}

void tnt__stage_enqueue(struct tnt_comm *comm, struct tnt_request *req)
{
    size_t off0, len0 = req->args.count;
    /* Slice 0 is a largest one. */
    if (!is_bcast(req))
        tnt__chunk_range(req->args.count, comm->nranks, 0, &off0, &len0);
    uint64_t r = is_mapped(req) ? 1 : tnt__nsegments(len0, piece_elems(req));
    req->stage_rounds = r;
    req->stage_g0 = comm->stage_next;
    comm->stage_next += r;
    req->stage_reduced = is_bcast(req) ? r : 0;
    req->stage_map_done = 0;
    int root = req->args.root, me = comm->rank;
    for (int q = 0; q < comm->nranks; q++) {
        tnt_opstate_t *os = &req->ops[q];
        os->stage_put = os->stage_got = 0;
        /* Signature headers: a broadcast's, with every peer. */
        os->stage_sig = is_bcast(req) && q != me ? 0 : 3;
        /* A broadcast: the root publishes to every peer and waits for
         * each to read; every other rank reads from the root only. */
        if (is_bcast(req) && me != root) {
            os->stage_put = r;
            if (q != root)
                os->stage_got = r;
        }
    }
}

static void set_hdr(tnt_stage_hdr_t *h, const struct tnt_request *req,
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
    h->send_id = req->map_ref[TNT_BUF_SEND].id;
    h->send_off = req->map_ref[TNT_BUF_SEND].off;
    h->recv_id = req->map_ref[TNT_BUF_RECV].id;
    h->recv_off = req->map_ref[TNT_BUF_RECV].off;
    atomic_store_explicit(&h->no, g + 1, memory_order_release);
}

/* The signature a peer's header carries, as a message header. */
static tnt_msg_hdr_t hdr_sig(const struct tnt_comm *comm,
                             const tnt_stage_hdr_t *s)
{
    return tnt__mem_sig(comm, s->seq, s->count, s->kind, s->dtype, s->op,
                        s->algo, s->root);
}

/* May this rank write the buffer whose header is `mine` again: has the
 * peer read what was last published there (its done counter)? Not
 * "round g - 2": a broadcast uses only the root's output buffers, so the
 * last round in a buffer can be any earlier one. */
static int room(const _Atomic uint64_t *done, const tnt_stage_hdr_t *mine)
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

/* Step 1 for peer q: publish as many rounds of this rank's data as there
 * is room for: piece t of slice q in the input buffers (an allreduce), or
 * piece t of the whole buffer in the output buffers (a broadcast root:
 * its data where an allreduce leaves results). */
static int put_rounds(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    tnt_opstate_t *os = &req->ops[q];
    const unsigned char *send = req->bufs[TNT_BUF_SEND];
    size_t es = req->args.esize;
    int out = is_bcast(req), moved = 0;
    while (os->stage_put < req->stage_rounds) {
        uint64_t g = req->stage_g0 + os->stage_put;
        int b = (int)(g & 1);
        tnt_stage_side_t *m = mine_of(comm, q);
        const tnt_stage_side_t *th = theirs_of(comm, q);
        tnt_stage_hdr_t *h = out ? &m->out_hdr[b] : &m->in_hdr[b];
        if (!room(out ? &th->out_done[b] : &th->in_done[b], h))
            break;
        if (!is_mapped(req)) { /* mapped: where the buffers lie, no data */
            size_t off, n;
            piece(req, q, os->stage_put, &off, &n);
            memcpy(out ? m->out[b] : m->in[b], send + off * es, n * es);
        }
        set_hdr(h, req, g);
        os->stage_put++;
        comm->peers[q].slot_notify = 1;
        moved = 1;
    }
    return moved;
}

/* Does q's header h hold round g of req? Fails the communicator on a
 * mismatch. */
static int round_there(struct tnt_comm *comm, struct tnt_request *req,
                       int q, const tnt_stage_hdr_t *h, uint64_t g)
{
    if (atomic_load_explicit(&h->no, memory_order_acquire) != g + 1)
        return 0;
    tnt_msg_hdr_t sig = hdr_sig(comm, h);
    if (sig.seq != req->seq || !tnt__sig_equal(&sig, &req->sig)) {
        tnt__report_mismatch(comm, req, &sig, q);
        return 0;
    }
    return 1;
}

/* Has every peer published round g in its input header? A peer that
 * closed while this rank still has results for it fails the
 * communicator (every peer waits for this rank's results while it has
 * rounds to reduce). */
static int inputs_there(struct tnt_comm *comm, struct tnt_request *req,
                        uint64_t g)
{
    for (int q = 0; q < comm->nranks; q++) {
        if (q == comm->rank)
            continue;
        if (!comm->peers[q].ep) {
            tnt__fail_peer_lost(comm, q, "closed its connection");
            return 0;
        }
        if (!round_there(comm, req, q, &theirs_of(comm, q)->in_hdr[g & 1],
                         g))
            return 0;
    }
    return 1;
}

/* Rank i's n elements `in` into acc, in the chain order of the one-shot
 * allreduce, ((in0 op in1) op in2) ..., scaled after the last rank for
 * an average: the staged and mapped allreduces call it for i = 0..k-1. */
static void chain_in(const struct tnt_request *req, unsigned char *acc,
                     int i, const unsigned char *in, size_t n)
{
    if (i == 0)
        memcpy(acc, in, n * req->args.esize);
    else
        req->reduce(acc, acc, in, n);
    if (i == req->args.nranks - 1 && req->args.op == TNT_AVG)
        tnt__scale_avg(acc, n, req->args.dtype, req->args.nranks);
}

/* Tell every peer that this rank has read its input of round g (and, in
 * a mapped allreduce, written its result). */
static void mark_inputs_read(struct tnt_comm *comm, uint64_t g)
{
    for (int q = 0; q < comm->nranks; q++) {
        if (q == comm->rank)
            continue;
        atomic_store_explicit(&mine_of(comm, q)->in_done[g & 1], g + 1,
                              memory_order_release);
        comm->peers[q].slot_notify = 1;
    }
}

/* Where q's buffers lie as mapped here, from q's header h. A peer that
 * names memory this rank has not mapped allocated or freed differently:
 * a mismatch of the calls, not of the data. */
static int map_peer_bufs(struct tnt_comm *comm, struct tnt_request *req,
                         int q, const tnt_stage_hdr_t *h)
{
    size_t bytes = req->args.count * req->args.esize;
    tnt_mem_ref_t s = {h->send_id, h->send_off};
    tnt_mem_ref_t r = {h->recv_id, h->recv_off};
    tnt_opstate_t *os = &req->ops[q];
    os->map_src = tnt__mem_peer(comm, q, &s, bytes);
    os->map_dst = tnt__mem_peer(comm, q, &r, bytes);
    if (os->map_src && os->map_dst)
        return 1;
    tnt__engine_fail(comm, TNT_ERR_MISMATCH, "collective #%" PRIu64
                     " (mapped allreduce of %zu bytes): rank %d names "
                     "buffers in its allocations #%" PRIu32 " and #%" PRIu32
                     " that rank %d does not have mapped that large (were "
                     "tnt_mem_alloc and tnt_mem_free called alike on every "
                     "rank?)", req->seq, bytes, q, s.id, r.id, comm->rank);
    return 0;
}

/* Step 2 of the mapped allreduce: once every peer has published where
 * its buffers lie, reduce this rank's slice of all of them and write the
 * result into all of them. */
static int reduce_mapped(struct tnt_comm *comm, struct tnt_request *req)
{
    int k = comm->nranks, me = comm->rank;
    uint64_t g = req->stage_g0;
    if (req->stage_reduced || comm->state != TNT_COMM_OK)
        return 0;
    /* The headers and the peers' buffers once, before the first piece:
     * the peers keep both until this rank marks their inputs read. */
    if (req->stage_map_done == 0) {
        if (!inputs_there(comm, req, g))
            return 0;
        for (int q = 0; q < k; q++)
            if (q != me && !map_peer_bufs(comm, req, q,
                                          &theirs_of(comm, q)->in_hdr[g & 1]))
                return 0;
    }
    if (!comm->map_acc &&
        !(comm->map_acc = aligned_alloc(64, TNT_MAP_BLOCK))) {
        tnt__engine_fail(comm, TNT_ERR_NO_MEMORY, "rank %d: out of memory "
                         "for the mapped allreduce's block", me);
        return 0;
    }
    size_t es = req->args.esize, off, n, blk = TNT_MAP_BLOCK / es;
    tnt__chunk_range(req->args.count, k, me, &off, &n);
    /* At most a staging round's worth of the slice per call: the lock is
     * held meanwhile, and a fusion ready() waits for it
     * (docs/performance.md, "The mapped allreduce: a round's worth per
     * pass"). */
    size_t from = (size_t)req->stage_map_done;
    size_t to = n - from > TNT_STAGE_BYTES / es ? from + TNT_STAGE_BYTES / es
                                                : n;
    unsigned char *acc = comm->map_acc;
    for (size_t o = from; o < to; o += blk) {
        size_t c = to - o < blk ? to - o : blk, at = (off + o) * es;
        for (int i = 0; i < k; i++)
            chain_in(req, acc, i,
                     (i == me ? req->bufs[TNT_BUF_SEND]
                              : req->ops[i].map_src) + at,
                     c);
        for (int i = 0; i < k; i++)
            memcpy((i == me ? req->bufs[TNT_BUF_RECV] : req->ops[i].map_dst) +
                       at,
                   acc, c * es);
    }
    req->stage_map_done = to;
    if (to < n) {
        comm->stage_more = 1;
        return 1;
    }
    mark_inputs_read(comm, g);
    req->stage_reduced = 1;
    return 1;
}

/* Step 3 of the mapped allreduce: q has written its slice of the result
 * here once it has marked this rank's input read. */
static int got_mapped(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    tnt_opstate_t *os = &req->ops[q];
    uint64_t g = req->stage_g0;
    if (os->stage_got ||
        atomic_load_explicit(&theirs_of(comm, q)->in_done[g & 1],
                             memory_order_acquire) < g + 1)
        return 0;
    os->stage_got = 1;
    return 1;
}

/* Step 2: reduce this rank's slice for as many rounds as every peer's
 * input and room for the result allow. */
static int reduce_rounds(struct tnt_comm *comm, struct tnt_request *req)
{
    if (is_mapped(req))
        return reduce_mapped(comm, req);
    int k = comm->nranks, me = comm->rank, moved = 0;
    int first = me == 0 ? 1 : 0; /* the pair whose buffer accumulates */
    size_t es = req->args.esize;
    while (req->stage_reduced < req->stage_rounds &&
           comm->state == TNT_COMM_OK) {
        uint64_t t = req->stage_reduced, g = req->stage_g0 + t;
        int b = (int)(g & 1);
        if (!inputs_there(comm, req, g))
            return moved;
        for (int q = 0; q < k; q++)
            if (q != me && !room(&theirs_of(comm, q)->out_done[b],
                                 &mine_of(comm, q)->out_hdr[b]))
                return moved;
        size_t off, n;
        piece(req, me, t, &off, &n);
        const unsigned char *own = req->bufs[TNT_BUF_SEND] + off * es;
        unsigned char *acc = mine_of(comm, first)->out[b];
        for (int i = 0; i < k; i++)
            chain_in(req, acc, i, i == me ? own : theirs_of(comm, i)->in[b],
                     n);
        mark_inputs_read(comm, g);
        for (int q = 0; q < k; q++) {
            if (q == me)
                continue;
            tnt_stage_side_t *m = mine_of(comm, q);
            if (q != first)
                memcpy(m->out[b], acc, n * es);
            set_hdr(&m->out_hdr[b], req, g);
        }
        memcpy(req->bufs[TNT_BUF_RECV] + off * es, acc, n * es);
        req->stage_reduced++;
        moved = 1;
    }
    return moved;
}

/* A broadcast root: has q read the last round? (It reads in order.) */
static int bcast_read(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    tnt_opstate_t *os = &req->ops[q];
    uint64_t last = req->stage_g0 + req->stage_rounds - 1;
    if (os->stage_got == req->stage_rounds ||
        os->stage_put < req->stage_rounds ||
        atomic_load_explicit(&theirs_of(comm, q)->out_done[last & 1],
                             memory_order_acquire) < last + 1)
        return 0;
    os->stage_got = req->stage_rounds;
    return 1;
}

/* Step 3 for peer q: copy out the results q has published. */
static int get_outputs(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    tnt_opstate_t *os = &req->ops[q];
    size_t es = req->args.esize;
    int moved = 0;
    if (is_mapped(req))
        return got_mapped(comm, req, q);
    while (os->stage_got < req->stage_rounds) {
        uint64_t g = req->stage_g0 + os->stage_got;
        int b = (int)(g & 1);
        const tnt_stage_side_t *th = theirs_of(comm, q);
        if (!round_there(comm, req, q, &th->out_hdr[b], g))
            break;
        size_t off, n;
        piece(req, q, os->stage_got, &off, &n);
        memcpy(req->bufs[TNT_BUF_RECV] + off * es, th->out[b], n * es);
        atomic_store_explicit(&mine_of(comm, q)->out_done[b], g + 1,
                              memory_order_release);
        os->stage_got++;
        comm->peers[q].slot_notify = 1;
        moved = 1;
    }
    return moved;
}

/* A broadcast's signature exchange with peer q, in the input headers at
 * the request's first round number: publish this rank's once there is
 * room, and read and check q's (a mismatch fails the communicator). */
static int bcast_sig(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    tnt_opstate_t *os = &req->ops[q];
    uint64_t g = req->stage_g0;
    int b = (int)(g & 1), moved = 0;
    tnt_stage_side_t *m = mine_of(comm, q);
    const tnt_stage_side_t *th = theirs_of(comm, q);
    if (!(os->stage_sig & 1) && room(&th->in_done[b], &m->in_hdr[b])) {
        set_hdr(&m->in_hdr[b], req, g);
        os->stage_sig |= 1;
        comm->peers[q].slot_notify = 1;
        moved = 1;
    }
    if (!(os->stage_sig & 2) && round_there(comm, req, q, &th->in_hdr[b], g)) {
        atomic_store_explicit(&m->in_done[b], g + 1, memory_order_release);
        os->stage_sig |= 2;
        comm->peers[q].slot_notify = 1;
        moved = 1;
    }
    return moved;
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
        const tnt_stage_side_t *th = theirs_of(comm, q);
        tnt_stage_side_t *m = mine_of(comm, q);
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
                tnt__report_mismatch(comm, req, &sig, q);
                return;
            }
        }
    }
}

int tnt__stage_step(struct tnt_comm *comm, struct tnt_request *req)
{
    int k = comm->nranks, me = comm->rank;
    /* A peer that has every result of this rank and whose results this
     * rank has read may have finished and closed: that is no error. */
    for (int q = 0; q < k; q++) {
        tnt_peer_t *p = &comm->peers[q];
        if (q == me || p->ep || !tnt__stage_needs(req, q))
            continue;
        if (p->dead)
            tnt__fail_peer_lost(comm, q, "closed its connection");
        else
            tnt__ensure_connect(comm, p);
        return 0;
    }
    int moved = 0, root = is_bcast(req) && me == req->args.root;
    for (int q = 0; q < k; q++)
        if (q != me && comm->peers[q].ep)
            moved |= put_rounds(comm, req, q);
    moved |= reduce_rounds(comm, req);
    int all = req->stage_reduced == req->stage_rounds;
    for (int q = 0; q < k && comm->state == TNT_COMM_OK; q++) {
        if (q == me || !comm->peers[q].ep)
            continue;
        /* A mismatch found there fails the communicator and unmaps the
         * peers' segments: look no further. */
        if (is_bcast(req)) {
            moved |= bcast_sig(comm, req, q);
            if (comm->state != TNT_COMM_OK)
                break;
        }
        moved |= root ? bcast_read(comm, req, q)
                      : get_outputs(comm, req, q);
        all &= !tnt__stage_needs(req, q);
    }
    if (moved) {
        /* A peer may sleep on a round it needs: wake it now rather than
         * when this rank sleeps, or the pipeline stalls a round. */
        comm->slot_notify = 1;
        tnt__slot_notify(comm);
        req->stage_stalls = 0;
    } else if (++req->stage_stalls % TNT_STAGE_STALLS_BEFORE_CHECK == 0) {
        tnt__slot_check_mismatch(comm, req);
    }
    return all && comm->state == TNT_COMM_OK;
}

void tnt__stage_peer_closing(struct tnt_comm *comm, struct tnt_request *req,
                             int q)
{
    /* A peer finishes only when it has every result of this rank, so
     * this rank has reduced all its inputs: what may still be unread are
     * its last results. Take them now; the segment goes away after this
     * callback. (A broadcast root finishes only after every peer has
     * read everything; a root sees whether q did.) */
    if (is_bcast(req)) {
        bcast_sig(comm, req, q); /* a peer that finished checked ours */
        if (comm->state != TNT_COMM_OK)
            return;
    }
    if (is_bcast(req) && comm->rank == req->args.root)
        bcast_read(comm, req, q);
    else
        get_outputs(comm, req, q);
}

int tnt__stage_needs(const struct tnt_request *req, int q)
{
    return req->ops[q].stage_got < req->stage_rounds ||
           req->ops[q].stage_put < req->stage_rounds ||
           req->ops[q].stage_sig != 3;
}

void tnt__stage_check_strays(struct tnt_comm *comm, int q)
{
    /* Inputs of an allreduce, and a broadcast root's data in the output
     * buffers. */
    for (int i = 0; i < 4 && comm->state == TNT_COMM_OK; i++) {
        const tnt_stage_hdr_t *h = hdr_at(theirs_of(comm, q), i);
        uint64_t no = atomic_load_explicit(&h->no, memory_order_acquire);
        if (no <= comm->stage_next || h->seq >= comm->next_seq)
            continue;
        tnt_msg_hdr_t sig = hdr_sig(comm, h);
        if (tnt__mismatch_past(comm, &sig, q))
            return;
    }
}

size_t tnt__stage_report(const struct tnt_request *req, char *buf,
                         size_t len)
{
    const struct tnt_comm *comm = req->comm;
    size_t n = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int q = 0; comm && q < comm->nranks && shown < 4; q++) {
        const tnt_opstate_t *os = &req->ops[q];
        if (q == comm->rank || !tnt__stage_needs(req, q))
            continue;
        int w = snprintf(buf + n, len - n, "%sstaged round %" PRIu64
                         " of %" PRIu64 ": rank %d (published %" PRIu64
                         ", reduced %" PRIu64 ", results read %" PRIu64
                         "; %zu bytes)", shown ? "; " : "",
                         os->stage_got, req->stage_rounds, q,
                         os->stage_put, req->stage_reduced, os->stage_got,
                         req->args.count * req->args.esize);
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
        shown++;
    }
    return n;
}
