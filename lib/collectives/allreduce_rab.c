/*
 * Rabenseifner's allreduce: a reduce-scatter by recursive halving followed
 * by an allgather by recursive doubling. It moves the ring's 2(p-1)/p of
 * the message per rank but in 2 log2(p) steps instead of 2(p-1), so it
 * sits between recursive doubling (small messages, log2(p) steps of the
 * whole message) and the ring (large messages, pipelined).
 *
 * For p not a power of two, p = p2 + rem, the first 2*rem ranks fold in
 * pairs exactly as in recursive doubling (patterns.h): the even one hands
 * its data to the odd one and gets the result back at the end.
 *
 * The p2 participants split the buffer into p2 blocks (tnt__chunk_range).
 * Halving step with bit `mask` (p2/2 down to 1): partners differ in that
 * bit; the lower one keeps the lower half of its current block range, the
 * upper one the upper half; each sends the half it gives up and reduces
 * the half it keeps, lower rank's partial first (so the result does not
 * depend on which rank computes it). Participant r ends owning block r,
 * fully reduced (and divided, for AVG), and the doubling steps gather the
 * blocks back in the reverse order.
 *
 * Aliasing: with TNT_IN_PLACE the send and receive buffers are one, so a
 * write into the receive buffer waits for every send that may read the
 * same bytes.
 */
#include "collectives/algorithms.h"
#include "collectives/patterns.h"

/* Byte range of blocks [lo, hi) of p2 blocks. */
static void block_bytes(const tnt_coll_args_t *a, int p2, int lo, int hi,
                        size_t *off, size_t *len)
{
    size_t o0, l0, o1, l1;
    tnt__chunk_range(a->count, p2, lo, &o0, &l0);
    tnt__chunk_range(a->count, p2, hi - 1, &o1, &l1);
    *off = o0 * a->esize;
    *len = (o1 + l1 - o0) * a->esize;
}

/* Fold of the non-power-of-two ranks: the even rank of a pair. */
static tnt_result_t folded(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t bytes = a->count * a->esize;
    uint32_t snd = tnt__sched_send(s, a->rank + 1, 0,
                                   tnt__ref(TNT_BUF_SEND, 0), bytes);
    uint32_t rcv = tnt__sched_recv(s, a->rank + 1, 1000000u,
                                   tnt__ref(TNT_BUF_RECV, 0), bytes);
    tnt__sched_dep(s, snd, rcv); /* in place: the result overwrites it */
    return TNT_SUCCESS;
}

#define MAX_STEPS 32

tnt_result_t tnt__allreduce_rab(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int p = a->nranks, rank = a->rank;
    int p2 = tnt__pow2_floor(p), rem = p - p2;
    size_t bytes = a->count * a->esize;
    tnt_bufref_t send = tnt__ref(TNT_BUF_SEND, 0);
    tnt_bufref_t recv = tnt__ref(TNT_BUF_RECV, 0);

    if (rank < 2 * rem && rank % 2 == 0)
        return folded(a, s);

    /* `src` holds this rank's partial before the first halving step. */
    uint32_t buf_src = TNT_BUF_SEND, last = TNT_SOP_NONE;
    if (rank < 2 * rem) {
        tnt_bufref_t tmp = tnt__ref(TNT_BUF_SCRATCH,
                                    tnt__sched_scratch(s, bytes));
        uint32_t rcv = tnt__sched_recv(s, rank - 1, 0, tmp, bytes);
        last = tnt__sched_reduce(s, recv, tmp, send, bytes);
        tnt__sched_dep(s, rcv, last);
        buf_src = TNT_BUF_RECV;
    }
    int r = tnt__rd_newrank(rank, p);
    uint32_t step = 1;

    /* Reduce-scatter by recursive halving. */
    uint32_t sends[MAX_STEPS];
    int nsends = 0, lo = 0, hi = p2;
    for (int mask = p2 / 2; mask >= 1; mask /= 2, step++) {
        int partner = tnt__rd_realrank(r ^ mask, p);
        int mid = lo + (hi - lo) / 2;
        int lower = !(r & mask);
        int klo = lower ? lo : mid, khi = lower ? mid : hi;
        int glo = lower ? mid : lo, ghi = lower ? hi : mid;
        size_t koff, klen, goff, glen;
        block_bytes(a, p2, klo, khi, &koff, &klen);
        block_bytes(a, p2, glo, ghi, &goff, &glen);
        tnt_bufref_t tmp = tnt__ref(TNT_BUF_SCRATCH,
                                    tnt__sched_scratch(s, klen));
        uint32_t snd = tnt__sched_send(s, partner, step,
                                       tnt__ref(buf_src, goff), glen);
        tnt__sched_dep(s, last, snd);
        uint32_t rcv = tnt__sched_recv(s, partner, step, tmp, klen);
        tnt_bufref_t mine = tnt__ref(buf_src, koff);
        tnt_bufref_t dst = tnt__ref(TNT_BUF_RECV, koff);
        uint32_t red = (partner < rank)
                           ? tnt__sched_reduce(s, dst, tmp, mine, klen)
                           : tnt__sched_reduce(s, dst, mine, tmp, klen);
        tnt__sched_dep(s, rcv, red);
        tnt__sched_dep(s, last, red);
        /* The sent and the kept half are disjoint, so the reduce need not
         * wait for the send; later writes into the sent half must. */
        sends[nsends++] = snd;
        last = red;
        lo = klo;
        hi = khi;
        buf_src = TNT_BUF_RECV;
    }
    if (p2 == 1 && buf_src == TNT_BUF_SEND && !a->in_place)
        last = tnt__sched_copy(s, recv, send, bytes); /* forced at p=1 */
    if (a->op == TNT_AVG) {
        size_t off, len;
        block_bytes(a, p2, r, r + 1, &off, &len);
        if (p2 == 1) {
            off = 0;
            len = bytes;
        }
        uint32_t sca = tnt__sched_scale(s, tnt__ref(TNT_BUF_RECV, off), len);
        tnt__sched_dep(s, last, sca);
        last = sca;
    }

    /* Allgather by recursive doubling: the owned range doubles. */
    uint32_t gathered[MAX_STEPS];
    int ngathered = 0;
    for (int mask = 1; mask < p2; mask *= 2, step++) {
        int partner = tnt__rd_realrank(r ^ mask, p);
        int mlo = r & ~(mask - 1), plo = (r ^ mask) & ~(mask - 1);
        size_t moff, mlen, poff, plen;
        block_bytes(a, p2, mlo, mlo + mask, &moff, &mlen);
        block_bytes(a, p2, plo, plo + mask, &poff, &plen);
        uint32_t snd = tnt__sched_send(s, partner, step,
                                       tnt__ref(TNT_BUF_RECV, moff), mlen);
        tnt__sched_dep(s, last, snd);
        for (int k = 0; k < ngathered; k++)
            tnt__sched_dep(s, gathered[k], snd);
        uint32_t rcv = tnt__sched_recv(s, partner, step,
                                       tnt__ref(TNT_BUF_RECV, poff), plen);
        /* The bytes it writes were sent away while halving (and, in place,
         * are the send buffer's too). */
        for (int k = 0; k < nsends; k++)
            tnt__sched_dep(s, sends[k], rcv);
        gathered[ngathered++] = rcv;
    }

    if (rank < 2 * rem) {
        uint32_t snd = tnt__sched_send(s, rank - 1, 1000000u, recv, bytes);
        tnt__sched_dep(s, last, snd);
        for (int k = 0; k < ngathered; k++)
            tnt__sched_dep(s, gathered[k], snd);
    }
    return TNT_SUCCESS;
}
