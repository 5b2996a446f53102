/*
 * Bruck allgather: ceil(log2 p) rounds of one message each, for small
 * blocks where the ring's p - 1 latencies are the cost (the exchanges
 * that make a derived communicator, core/comm_split.c).
 *
 * The blocks gather in scratch rotated to this rank: scratch block i is
 * rank (rank + i) mod p's. In round k (dist = 2^k) a rank sends its
 * first min(dist, p - dist) blocks to rank - dist and receives as many
 * from rank + dist after its own dist: after the round it holds
 * min(2 dist, p) blocks. Two copies at the end undo the rotation into
 * the receive buffer. Every rank hears from every other (transitively),
 * so the signature every message carries reaches every rank.
 */
#include "collectives/algorithms.h"
#include "collectives/patterns.h"

tnt_result_t tnt__allgather_bruck(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int p = a->nranks, r = a->rank;
    size_t bytes = a->count * a->esize;
    size_t tmp = tnt__sched_scratch(s, bytes * (size_t)p);
    /* Own block first: from the send buffer, or in place from where it
     * lies in the receive buffer. */
    tnt_bufref_t own = a->in_place
                           ? tnt__ref(TNT_BUF_RECV, (size_t)r * bytes)
                           : tnt__ref(TNT_BUF_SEND, 0);
    uint32_t first = tnt__sched_copy(s, tnt__ref(TNT_BUF_SCRATCH, tmp), own,
                                     bytes);
    /* Each round's send waits for every earlier round's receive (their
     * blocks are what it sends); the receives write disjoint blocks. */
    uint32_t got[32];
    int rounds = 0;
    for (int dist = 1; dist < p; dist = dist > p / 2 ? p : 2 * dist,
                                 rounds++) {
        size_t n = (size_t)(dist < p - dist ? dist : p - dist) * bytes;
        uint32_t snd = tnt__sched_send(s, tnt__mod(r - dist, p),
                                       (uint32_t)rounds,
                                       tnt__ref(TNT_BUF_SCRATCH, tmp), n);
        tnt__sched_dep(s, first, snd);
        for (int k = 0; k < rounds; k++)
            tnt__sched_dep(s, got[k], snd);
        got[rounds] = tnt__sched_recv(
            s, tnt__mod(r + dist, p), (uint32_t)rounds,
            tnt__ref(TNT_BUF_SCRATCH, tmp + (size_t)dist * bytes), n);
    }
    /* Scratch blocks 0..p-r-1 are ranks r..p-1; the rest ranks 0..r-1.
     * The receive buffer's own block is rewritten with itself in place:
     * the same bytes, copied from scratch, no overlap. */
    size_t hi = (size_t)(p - r) * bytes;
    uint32_t c1 = tnt__sched_copy(s, tnt__ref(TNT_BUF_RECV, (size_t)r * bytes),
                                  tnt__ref(TNT_BUF_SCRATCH, tmp), hi);
    uint32_t c2 = tnt__sched_copy(s, tnt__ref(TNT_BUF_RECV, 0),
                                  tnt__ref(TNT_BUF_SCRATCH, tmp + hi),
                                  (size_t)r * bytes);
    tnt__sched_dep(s, first, c1);
    for (int k = 0; k < rounds; k++) {
        tnt__sched_dep(s, got[k], c1);
        tnt__sched_dep(s, got[k], c2);
    }
    return TNT_SUCCESS;
}
