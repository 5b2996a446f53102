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
 *   each chunk, in segments (canon_segment_elems: several per chunk, so
 *   that transfer, reduction and allgather overlap), then a one-step
 *   allgather. Bytes per rank as the ring's, (p-1)/p of the data in and
 *   out; p-1 messages per step instead of log2 p.
 * - canonical-oneshot (small allreduces): every rank gets every input
 *   and reduces all k itself: at a power of two above 2 gathered by
 *   recursive doubling (log2 k steps, one peer each), otherwise every
 *   rank sends its whole input to every other (one step).
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

/* Segments of the canonical schedule: CANON_SEG_FACTOR x
 * TNT_SEGMENT_BYTES (1 MiB by default) where a chunk holds
 * CANON_PIPE_SEGMENTS of them, else the chunk cut into that many (but
 * none below TNT_SEGMENT_BYTES). One segment per chunk left nothing to
 * overlap: the owner reduced only once the whole chunk had come from
 * every peer, and sent no result before it had reduced all of it. With
 * several, segment j is reduced while j + 1 arrives and its result goes
 * out while j + 1 is reduced (docs/performance.md, "issue 38: the
 * canonical schedule pipelined"). The kernel is element-wise, so the
 * segments change no bit (canon.h). */
#define CANON_PIPE_SEGMENTS 4

static size_t canon_segment_elems(const tnt_coll_args_t *a, size_t len0)
{
    size_t es = a->esize;
    size_t big = tnt__segment_elems(a->segment_bytes, CANON_SEG_FACTOR, es);
    size_t small = tnt__segment_elems(a->segment_bytes, 1, es);
    size_t line = es < 64 ? 64 / es : 1; /* segments start on lines */
    size_t cut = (len0 + CANON_PIPE_SEGMENTS - 1) / CANON_PIPE_SEGMENTS;
    cut = (cut + line - 1) / line * line;
    return cut >= big ? big : cut <= small ? small : cut;
}

tnt_result_t tnt__allreduce_canon(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    int rs_only = a->kind == TNT_COLL_REDUCE_SCATTER;
    size_t es = a->esize;
    size_t off0, len0, roff, rlen;
    tnt__direct_chunk(a, 0, &off0, &len0);
    size_t segelems = canon_segment_elems(a, len0);
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
    /* Large chunks wait for the receiver's "ready" (allreduce_direct.c)
     * only where every rank is on this host over shared memory, whose
     * single-copy rendezvous the handshake serves (core/comm.c,
     * choose_copies). Elsewhere, as the ring there, none: over TCP an
     * early message waits for its receive by the transport's flow
     * control anyway, and the extra round trip cost each call a peer's
     * wake-up before any data moved, milliseconds on a loaded host
     * (docs/performance.md, "issue 38: the canonical schedule
     * pipelined"). Every rank has the same intra_host: one schedule. */
    int handshake = a->intra_host && len0 * es >= tnt__ready_min(a);
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

/* canonical-oneshot at a power of two above 2: the inputs gathered by
 * recursive doubling. The own input is copied into its slot of scratch
 * (slots at a stride of `bytes`); in step i (mask = 2^i) the rank
 * exchanges with rank ^ mask the mask inputs of its group of mask ranks,
 * one run of slots each way, so after log2 k steps it holds all k and
 * reduces them as the one-step form does: the same operation on the same
 * k inputs, the same bits. log2 k messages in turn, each to one peer,
 * where the one-step form sends k - 1 at once and waits for k - 1 peers:
 * recursive doubling's steps, which the default mode takes at these sizes
 * (docs/performance.md, "issue 38: the canonical schedule pipelined"). */
static void canon_gather_rd(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    size_t bytes = a->count * a->esize;
    size_t base = tnt__sched_scratch(s, bytes * (size_t)k);
    uint32_t put = tnt__sched_copy(
        s, tnt__ref(TNT_BUF_SCRATCH, base + (size_t)r * bytes),
        tnt__ref(TNT_BUF_SEND, 0), bytes);
    uint32_t red = tnt__sched_canon(
        s, tnt__ref(TNT_BUF_RECV, 0),
        tnt__ref(TNT_BUF_SCRATCH, base + (size_t)r * bytes), r,
        tnt__ref(TNT_BUF_SCRATCH, base), bytes, bytes);
    tnt__sched_dep(s, put, red);
    /* rcv[i]: step i's receive; every later send reads its slots. */
    uint32_t rcv[32];
    int steps = 0;
    for (int mask = 1; mask < k; mask <<= 1, steps++) {
        int partner = r ^ mask;
        size_t mine = (size_t)(r & ~(mask - 1)) * bytes;
        size_t theirs = (size_t)(partner & ~(mask - 1)) * bytes;
        uint32_t snd = tnt__sched_send(
            s, partner, (uint32_t)steps,
            tnt__ref(TNT_BUF_SCRATCH, base + mine), (size_t)mask * bytes);
        tnt__sched_dep(s, put, snd);
        for (int i = 0; i < steps; i++)
            tnt__sched_dep(s, rcv[i], snd);
        rcv[steps] = tnt__sched_recv(
            s, partner, (uint32_t)steps,
            tnt__ref(TNT_BUF_SCRATCH, base + theirs), (size_t)mask * bytes);
        tnt__sched_dep(s, rcv[steps], red);
    }
}

tnt_result_t tnt__allreduce_canon_oneshot(const tnt_coll_args_t *a,
                                          tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    size_t bytes = a->count * a->esize;
    if (k > 2 && (k & (k - 1)) == 0) {
        canon_gather_rd(a, s);
        return TNT_SUCCESS;
    }
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
