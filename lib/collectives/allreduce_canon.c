/*
 * The reproducible mode's schedules (TNT_REPRODUCIBLE=1; canon.h): the
 * owner of each region receives all k contributions of it and reduces
 * them with one canonical operation (TNT_SOP_CANON), in rank order with
 * wide accumulation. Each element's bits then depend only on the k
 * values and their ranks, not on how the buffer is cut into chunks and
 * segments or which algorithm, transport or fusion bucket carried it.
 *
 * - canonical (allreduce, reduce): the direct allreduce's data flow
 *   (allreduce_direct.c): a one-step reduce-scatter into the owner of
 *   each chunk, in segments of 4 x TNT_SEGMENT_BYTES, then a one-step
 *   allgather. Bytes per rank as the ring's, (p-1)/p of the data in and
 *   out; p-1 messages per step instead of log2 p.
 * - canonical-oneshot (small allreduces): every rank sends its whole
 *   input to every other and reduces all k itself: one step.
 * - canonical reduce-scatter: block q of every rank's send buffer goes
 *   to rank q, which reduces the k blocks.
 *
 * The k - 1 received inputs of a region lie in scratch at one stride, so
 * one operation names them all; the own input stays where it is. The
 * sends and receives around the reduction are the direct allreduce's
 * (direct_flow.h).
 */
#include <stdint.h>
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/direct_flow.h"
#include "collectives/patterns.h"
#include "util/error.h"

#define CANON_SEG_FACTOR 4
#define CANON_MAX_SEGMENTS ((size_t)1 << 18)

static size_t align64(size_t b)
{
    return (b + 63) & ~(size_t)63;
}

tnt_result_t tnt__allreduce_canon(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    int rs_only = a->kind == TNT_COLL_REDUCE_SCATTER;
    size_t es = a->esize;
    size_t segelems = tnt__segment_elems(a->segment_bytes,
                                         CANON_SEG_FACTOR, es);
    size_t off0, len0, roff, rlen;
    tnt__direct_chunk(a, 0, &off0, &len0);
    size_t maxseg = CANON_MAX_SEGMENTS / (size_t)k;
    if (tnt__nsegments(len0, segelems) > maxseg)
        segelems = (len0 + maxseg - 1) / maxseg;
    tnt__direct_chunk(a, r, &roff, &rlen);
    /* Chunk 0 is the longest: the allgather's steps start above. */
    uint32_t ag_base = (uint32_t)tnt__nsegments(len0, segelems);
    size_t rseg = tnt__nsegments(rlen, segelems);
    uint32_t *rs_send = malloc((size_t)k * ag_base * sizeof(*rs_send) + 1);
    if (!rs_send)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory building a "
                          "canonical reduction for %d ranks", k);
    size_t stride = align64(rlen * es);
    size_t base = tnt__sched_scratch(s, stride * (size_t)k);
    /* Large chunks wait for the receiver's "ready" (allreduce_direct.c). */
    int handshake = len0 * es >= tnt__ready_min(a);
    tnt__direct_rs_sends(a, s, segelems, ag_base, handshake, rs_send);
    /* Per segment of the own chunk: receive it from everyone, reduce the
     * k inputs canonically, and (allreduce) send the result to everyone. */
    for (size_t j = 0; j < rseg; j++) {
        size_t so, sn;
        tnt__segment(rlen, segelems, j, &so, &sn);
        size_t bytes = sn * es;
        tnt_bufref_t dst = tnt__ref(TNT_BUF_RECV,
                                    rs_only ? so * es : (roff + so) * es);
        uint32_t red = tnt__sched_canon(
            s, dst, tnt__ref(TNT_BUF_SEND, (roff + so) * es), r,
            tnt__ref(TNT_BUF_SCRATCH, base + so * es), stride, bytes);
        for (int q = 0; q < k; q++) {
            if (q == r)
                continue;
            uint32_t rcv = tnt__sched_recv(
                s, q, (uint32_t)j,
                tnt__ref(TNT_BUF_SCRATCH,
                         base + (size_t)q * stride + so * es),
                bytes);
            tnt__sched_dep(s, rcv, red);
        }
        for (int q = 0; q < k && !rs_only; q++) {
            if (q == r)
                continue;
            uint32_t snd = tnt__sched_send(s, q, ag_base + (uint32_t)j, dst,
                                           bytes);
            tnt__sched_dep(s, red, snd);
        }
    }
    /* Allgather receives: chunk q from rank q, into place. */
    if (!rs_only)
        tnt__direct_ag_recvs(a, s, segelems, ag_base, rs_send);
    free(rs_send);
    return TNT_SUCCESS;
}

tnt_result_t tnt__allreduce_canon_oneshot(const tnt_coll_args_t *a,
                                          tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    size_t bytes = a->count * a->esize;
    size_t stride = align64(bytes);
    size_t base = tnt__sched_scratch(s, stride * (size_t)k);
    tnt_bufref_t recv = tnt__ref(TNT_BUF_RECV, 0);
    uint32_t red = tnt__sched_canon(s, recv, tnt__ref(TNT_BUF_SEND, 0), r,
                                    tnt__ref(TNT_BUF_SCRATCH, base), stride,
                                    bytes);
    for (int q = 0; q < k; q++) {
        if (q == r)
            continue;
        uint32_t snd = tnt__sched_send(s, q, 0, tnt__ref(TNT_BUF_SEND, 0),
                                       bytes);
        uint32_t rcv = tnt__sched_recv(
            s, q, 0, tnt__ref(TNT_BUF_SCRATCH, base + (size_t)q * stride),
            bytes);
        tnt__sched_dep(s, rcv, red);
        /* In place the result overwrites the input being sent. */
        if (a->in_place)
            tnt__sched_dep(s, snd, red);
    }
    return TNT_SUCCESS;
}
