/*
 * The mapped allreduce (TNT_ALGO_MAPPED): when every rank's send and
 * receive buffers lie in shared allocations (core/mem.h), it runs as one
 * round of the staging areas (onhost/stage_rounds.c) whose buffers hold
 * no data. Each rank publishes in its input headers where its buffers lie
 * (allocation number and offset); once it has every peer's, it reduces
 * its slice of all k send buffers where they lie, in rank order, a
 * cache-sized block at a time, writes each result block into all k
 * receive buffers, and marks each peer's input read. A rank is done when
 * every peer has so marked its own: its receive buffer is complete and
 * nobody reads its send buffer any more. A byte is read once and written
 * once per rank, the least an allreduce that leaves the result in every
 * rank's memory can move (docs/shm.md). The same rank order as the staged
 * allreduce: the same bits. The reproducible mode's canonical-mapped
 * (TNT_ALGO_CANON_MAPPED) reduces with the canonical kernel instead.
 *
 * Per-request state beyond the staged round's (onhost_state.h):
 * req->ops[q].onhost.stage.mapped, q's buffers as mapped here;
 * req->onhost.stage.map_done, elements of this rank's slice reduced so
 * far (a round's worth per pass: comm->onhost.stage_more asks the poller to
 * come back without sleeping).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/patterns.h"
#include "core/onhost/stage_rounds.h"

/* The mapped allreduce's block: reduced from the k inputs, then copied
 * to the k outputs while it is still in cache (64 KiB: docs/performance.md,
 * "The mapped allreduce's block"). */
#define TNT_MAP_BLOCK ((size_t)64 << 10)

static void start(struct tnt_comm *comm, struct tnt_request *req)
{
    tnt__stage_number(comm, req, 1);
    req->onhost.stage.map_done = 0;
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
    tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
    os->mapped.src = tnt__mem_peer(comm, q, &s, bytes);
    os->mapped.dst = tnt__mem_peer(comm, q, &r, bytes);
    if (os->mapped.src && os->mapped.dst)
        return 1;
    char msg[400];
    snprintf(msg, sizeof(msg), "collective #%" PRIu64 " (mapped allreduce "
             "of %zu bytes): rank %d names buffers in its allocations #%"
             PRIu32 " and #%" PRIu32 " that rank %d does not have mapped "
             "that large (were tnt_mem_alloc and tnt_mem_free called alike "
             "on every rank?)", req->seq, bytes, q, s.id, r.id, comm->rank);
    comm->onhost.engine->fail(comm, TNT_ERR_MISMATCH, msg);
    return 0;
}

/* Rank i's send buffer as mapped here (me: this rank's own). */
static const unsigned char *input(const struct tnt_request *req, int me,
                                  int i)
{
    return i == me ? req->bufs[TNT_BUF_SEND]
                   : req->ops[i].onhost.stage.mapped.src;
}

/* Step 2: once every peer has published where its buffers lie, reduce
 * this rank's slice of all of them and write the result into all of
 * them. */
static int reduce_mapped(struct tnt_comm *comm, struct tnt_request *req)
{
    int k = comm->nranks, me = comm->rank;
    uint64_t g = req->onhost.stage.g0;
    if (req->onhost.stage.reduced || comm->state != TNT_COMM_OK)
        return 0;
    /* The headers and the peers' buffers once, before the first piece:
     * the peers keep both until this rank marks their inputs read. */
    if (req->onhost.stage.map_done == 0) {
        if (!tnt__stage_inputs_there(comm, req, g))
            return 0;
        for (int q = 0; q < k; q++)
            if (q != me &&
                !map_peer_bufs(comm, req, q,
                               &tnt__stage_theirs(comm, q)->in_hdr[g & 1]))
                return 0;
    }
    if (!comm->onhost.map_acc &&
        !(comm->onhost.map_acc = aligned_alloc(64, TNT_MAP_BLOCK))) {
        char msg[120];
        snprintf(msg, sizeof(msg), "rank %d: out of memory for the mapped "
                 "allreduce's block", me);
        comm->onhost.engine->fail(comm, TNT_ERR_NO_MEMORY, msg);
        return 0;
    }
    size_t es = req->args.esize, off, n, blk = TNT_MAP_BLOCK / es;
    tnt__chunk_range(req->args.count, k, me, &off, &n);
    /* At most a staging round's worth of the slice per call: the lock is
     * held meanwhile, and a fusion ready() waits for it
     * (docs/performance.md, "The mapped allreduce: a round's worth per
     * pass"). */
    size_t from = (size_t)req->onhost.stage.map_done;
    size_t to = n - from > TNT_STAGE_BYTES / es ? from + TNT_STAGE_BYTES / es
                                                : n;
    unsigned char *acc = comm->onhost.map_acc;
    for (size_t o = from; o < to; o += blk) {
        size_t c = to - o < blk ? to - o : blk, at = (off + o) * es;
        if (tnt__algo_onhost_canon(req->algo)) { /* reproducible mode */
            const void *in[TNT_CANON_ONHOST_MAX_RANKS] = {0};
            for (int i = 0; i < k && i < TNT_CANON_ONHOST_MAX_RANKS; i++)
                in[i] = input(req, me, i) + at;
            tnt__onhost_canon(req, acc, in, c);
        } else {
            for (int i = 0; i < k; i++)
                tnt__onhost_fold(req, acc, i, input(req, me, i) + at, c);
        }
        for (int i = 0; i < k; i++)
            memcpy((i == me ? req->bufs[TNT_BUF_RECV]
                            : req->ops[i].onhost.stage.mapped.dst) +
                       at,
                   acc, c * es);
    }
    req->onhost.stage.map_done = to;
    if (to < n) {
        comm->onhost.stage_more = 1;
        return 1;
    }
    tnt__stage_mark_inputs_read(comm, g);
    req->onhost.stage.reduced = 1;
    return 1;
}

/* Step 3: q has written its slice of the result here once it has marked
 * this rank's input read. */
static int got_result(struct tnt_comm *comm, struct tnt_request *req, int q)
{
    tnt_stage_peer_t *os = &req->ops[q].onhost.stage;
    uint64_t g = req->onhost.stage.g0;
    if (os->got ||
        atomic_load_explicit(&tnt__stage_theirs(comm, q)->in_done[g & 1],
                             memory_order_acquire) < g + 1)
        return 0;
    os->got = 1;
    return 1;
}

/* Step 1 publishes where the buffers lie, in the input headers; no
 * data: each rank reduces its slice where the peers' buffers lie. */
static int step(struct tnt_comm *comm, struct tnt_request *req)
{
    return tnt__stage_allreduce_step(comm, req, 0, reduce_mapped,
                                     got_result);
}

/* A peer finishes only once it has this rank's result: see whether it
 * wrote it before its segment goes away. */
static int peer_closing(struct tnt_comm *comm, struct tnt_request *req,
                        int q)
{
    got_result(comm, req, q);
    return 1;
}

const tnt_onhost_algo_t tnt__onhost_mapped_allreduce = {
    .start = start,
    .step = step,
    .complete = NULL,
    .peer_closing = peer_closing,
    .needs = tnt__stage_needs,
    .nops = tnt__stage_nops,
    .report = tnt__stage_report,
    .stage_rounds = 1,
    .mapped_bufs = 1,
};
