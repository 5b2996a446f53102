/*
 * The staged allreduce (TNT_ALGO_STAGED): a large allreduce among ranks
 * that all share this host, through the staging areas of the pairs'
 * shared-memory segments (onhost/stage_layout.h, rounds as in
 * onhost/stage_rounds.c) instead of messages. The buffer is cut into k
 * slices as the direct allreduce cuts it (slice j is rank j's), and each
 * slice into rounds of at most TNT_STAGE_BYTES. In round t every rank
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
 * rank order: every rank gets the same bits, whatever the timing. The
 * reproducible mode's canonical-staged (TNT_ALGO_CANON_STAGED) is the
 * same with the canonical kernel in place of the fold (onhost.h).
 *
 * Why: on one host with more ranks than cores the direct allreduce's
 * messages cost a copy into the ring and one out of it into scratch, a
 * frame, a header, a match and often a wake-up each; here a byte is
 * copied into shared memory once, reduced where it lies and copied out
 * once, and a round costs two waits (docs/performance.md, "On one host:
 * staged or direct").
 */
#include <string.h>

#include "collectives/patterns.h"
#include "core/onhost/stage_rounds.h"

static void start(struct tnt_comm *comm, struct tnt_request *req)
{
    size_t off0, len0;
    /* Slice 0 is a largest one. */
    tnt__chunk_range(req->args.count, comm->nranks, 0, &off0, &len0);
    tnt__stage_number(comm, req,
                      tnt__nsegments(len0, tnt__stage_piece_elems(req)));
}

/* Step 2: reduce this rank's slice for as many rounds as every peer's
 * input and room for the result allow. */
static int reduce_rounds(struct tnt_comm *comm, struct tnt_request *req)
{
    int k = comm->nranks, me = comm->rank, moved = 0;
    int first = me == 0 ? 1 : 0; /* the pair whose buffer accumulates */
    size_t es = req->args.esize;
    while (req->onhost.stage.reduced < req->onhost.stage.rounds &&
           comm->state == TNT_COMM_OK) {
        uint64_t t = req->onhost.stage.reduced, g = req->onhost.stage.g0 + t;
        int b = (int)(g & 1);
        if (!tnt__stage_inputs_there(comm, req, g))
            return moved;
        for (int q = 0; q < k; q++)
            if (q != me &&
                !tnt__stage_room(&tnt__stage_theirs(comm, q)->out_done[b],
                                 &tnt__stage_mine(comm, q)->out_hdr[b]))
                return moved;
        size_t off, n;
        tnt__stage_piece(req, me, t, &off, &n);
        const unsigned char *own = req->bufs[TNT_BUF_SEND] + off * es;
        unsigned char *acc = tnt__stage_mine(comm, first)->out[b];
        if (tnt__algo_onhost_canon(req->algo)) { /* reproducible mode */
            const void *in[TNT_CANON_ONHOST_MAX_RANKS] = {0};
            for (int i = 0; i < k && i < TNT_CANON_ONHOST_MAX_RANKS; i++)
                in[i] = i == me ? own : tnt__stage_theirs(comm, i)->in[b];
            tnt__onhost_canon(req, acc, in, n);
        } else {
            for (int i = 0; i < k; i++)
                tnt__onhost_fold(req, acc, i,
                                 i == me ? own
                                         : tnt__stage_theirs(comm, i)->in[b],
                                 n);
        }
        tnt__stage_mark_inputs_read(comm, g);
        for (int q = 0; q < k; q++) {
            if (q == me)
                continue;
            tnt_stage_side_t *m = tnt__stage_mine(comm, q);
            if (q != first)
                memcpy(m->out[b], acc, n * es);
            tnt__stage_set_hdr(&m->out_hdr[b], req, g);
        }
        memcpy(req->bufs[TNT_BUF_RECV] + off * es, acc, n * es);
        req->onhost.stage.reduced++;
        moved = 1;
    }
    return moved;
}

static int step(struct tnt_comm *comm, struct tnt_request *req)
{
    return tnt__stage_allreduce_step(comm, req, 1, reduce_rounds,
                                     tnt__stage_get_outputs);
}

/* A peer finishes only when it has every result of this rank, so this
 * rank has reduced all its inputs: what may still be unread are its last
 * results. Take them now; the segment goes away after this callback. */
static int peer_closing(struct tnt_comm *comm, struct tnt_request *req,
                        int q)
{
    tnt__stage_get_outputs(comm, req, q);
    return 1;
}

const tnt_onhost_algo_t tnt__onhost_staged_allreduce = {
    .start = start,
    .step = step,
    .complete = NULL,
    .peer_closing = peer_closing,
    .needs = tnt__stage_needs,
    .nops = tnt__stage_nops,
    .report = tnt__stage_report,
    .stage_rounds = 1,
};
