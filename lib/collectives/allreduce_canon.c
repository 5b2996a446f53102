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
 *   out; p-1 messages per step instead of log2 p. Up to
 *   TNT_CANON_HALVING_MAX_BYTES at a power of two above 2 instead by
 *   halving (canon_halving): log2 p steps to each owner, log2 p back.
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

/* Byte range of chunks [lo, hi) of the canonical allreduce's k. */
static void chunks_bytes(const tnt_coll_args_t *a, int lo, int hi,
                         size_t *off, size_t *len)
{
    size_t o0, l0, o1, l1;
    tnt__direct_chunk(a, lo, &o0, &l0);
    tnt__direct_chunk(a, hi - 1, &o1, &l1);
    *off = o0 * a->esize;
    *len = (o1 + l1 - o0) * a->esize;
}

/* The canonical allreduce by halving (canon_halving_fits): the owner of
 * each chunk gets its k inputs by recursive halving, reduces them as the
 * one-step form does (the same operation on the same k inputs, the same
 * bits), and the results go round by recursive doubling. Input q lies in
 * scratch at q x stride, as in the one-step form (the own input stays in
 * the send buffer). Before the step with bit m a rank holds, over its
 * current range of chunks, the inputs of the ranks r ^ (j 2m), j <
 * k / 2m; it sends those over the half of the range that r ^ m keeps (one
 * message per input, tag: step and j) and receives r ^ m's over its own
 * half. Then log2 k steps of the result back, rab's allgather. So 2 log2 k
 * steps with one peer each (the default's Rabenseifner) where the direct
 * flow sends to and waits for k - 1 peers twice: with 4 ranks on 2
 * cores each of those messages may cost a wake-up (docs/performance.md,
 * "issue 38: a settled comparison, and canonical by halving"). Bytes per
 * rank: log2 k / 2 + (k - 1) / k of the message, against the direct
 * flow's 2 (k - 1) / k. */
#define CANON_HALVING_MAX_RANKS 16
static void canon_halving(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    size_t bytes = a->count * a->esize, stride = align64(bytes);
    size_t base = tnt__sched_scratch(s, stride * (size_t)k);
    uint32_t got[CANON_HALVING_MAX_RANKS];      /* input q's receive */
    uint32_t own_sends[CANON_HALVING_MAX_RANKS]; /* reads of the input */
    int nown = 0, lo = 0, hi = k;
    uint32_t tag = 0;
    for (int m = k / 2; m >= 1; m /= 2, tag += (uint32_t)k) {
        int partner = r ^ m, mid = (lo + hi) / 2;
        int keep_lo = (r & m) ? mid : lo, keep_hi = (r & m) ? hi : mid;
        int give_lo = (r & m) ? lo : mid, give_hi = (r & m) ? mid : hi;
        size_t koff, klen, goff, glen;
        chunks_bytes(a, keep_lo, keep_hi, &koff, &klen);
        chunks_bytes(a, give_lo, give_hi, &goff, &glen);
        for (int j = 0; j < k / (2 * m); j++) {
            int q = r ^ (j * 2 * m), qp = partner ^ (j * 2 * m);
            tnt_bufref_t src =
                q == r ? tnt__ref(TNT_BUF_SEND, goff)
                       : tnt__ref(TNT_BUF_SCRATCH,
                                  base + (size_t)q * stride + goff);
            uint32_t snd = tnt__sched_send(s, partner, tag + (uint32_t)j,
                                           src, glen);
            if (q == r)
                own_sends[nown++] = snd;
            else
                tnt__sched_dep(s, got[q], snd);
            got[qp] = tnt__sched_recv(
                s, partner, tag + (uint32_t)j,
                tnt__ref(TNT_BUF_SCRATCH, base + (size_t)qp * stride + koff),
                klen);
        }
        lo = keep_lo;
        hi = keep_hi;
    }
    size_t roff, rlen;
    chunks_bytes(a, r, r + 1, &roff, &rlen);
    /* In place the result overwrites the own input's chunk r, which no
     * send reads (each sent half excludes it). */
    uint32_t red = tnt__sched_canon(
        s, tnt__ref(TNT_BUF_RECV, roff), tnt__ref(TNT_BUF_SEND, roff), r,
        tnt__ref(TNT_BUF_SCRATCH, base + roff), stride, rlen);
    for (int q = 0; q < k; q++)
        if (q != r)
            tnt__sched_dep(s, got[q], red);
    /* The results by recursive doubling: the block of m chunks held so
     * far goes to r ^ m, whose block comes back. */
    uint32_t last[CANON_HALVING_MAX_RANKS];
    int nlast = 0;
    last[nlast++] = red;
    for (int m = 1; m < k; m *= 2, tag++) {
        int blo = r & ~(m - 1), plo = (r ^ m) & ~(m - 1);
        size_t boff, blen, poff, plen;
        chunks_bytes(a, blo, blo + m, &boff, &blen);
        chunks_bytes(a, plo, plo + m, &poff, &plen);
        uint32_t snd = tnt__sched_send(s, r ^ m, tag,
                                       tnt__ref(TNT_BUF_RECV, boff), blen);
        for (int i = 0; i < nlast; i++)
            tnt__sched_dep(s, last[i], snd);
        uint32_t rcv = tnt__sched_recv(s, r ^ m, tag,
                                       tnt__ref(TNT_BUF_RECV, poff), plen);
        /* In place the received results overwrite the input being sent. */
        for (int i = 0; i < nown && a->in_place; i++)
            tnt__sched_dep(s, own_sends[i], rcv);
        last[nlast++] = rcv;
    }
}

/* Halving where the message is small enough that steps cost more than
 * bytes, at a power of two above 2 (up to CANON_HALVING_MAX_RANKS) and
 * for allreduce and reduce (the reduce-scatter keeps the direct flow's
 * blocks). */
static int canon_halving_fits(const tnt_coll_args_t *a)
{
    int k = a->nranks;
    return a->kind == TNT_COLL_ALLREDUCE && k > 2 && (k & (k - 1)) == 0 &&
           k <= CANON_HALVING_MAX_RANKS &&
           a->count * a->esize <= TNT_CANON_HALVING_MAX_BYTES;
}

tnt_result_t tnt__allreduce_canon(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    int rs_only = a->kind == TNT_COLL_REDUCE_SCATTER;
    if (canon_halving_fits(a)) {
        canon_halving(a, s);
        return TNT_SUCCESS;
    }
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
