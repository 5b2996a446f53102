/*
 * Dissemination barrier: in round k every rank signals rank+2^k and waits
 * for rank-2^k, ceil(log2 p) rounds of empty messages, for any p. A rank
 * leaves only after hearing, directly or transitively, from every rank.
 */
#include "collectives/algorithms.h"
#include "collectives/patterns.h"

tnt_result_t tnt__barrier_dissemination(const tnt_coll_args_t *a,
                                        tnt_sched_t *s)
{
    int p = a->nranks;
    uint32_t prev = TNT_SOP_NONE;
    uint32_t step = 0;
    for (int dist = 1; dist < p; dist *= 2, step++) {
        tnt_bufref_t none = tnt__ref(TNT_BUF_RECV, 0);
        uint32_t snd = tnt__sched_send(s, tnt__mod(a->rank + dist, p), step,
                                       none, 0);
        uint32_t rcv = tnt__sched_recv(s, tnt__mod(a->rank - dist, p), step,
                                       none, 0);
        tnt__sched_dep(s, prev, snd);
        tnt__sched_dep(s, prev, rcv);
        prev = rcv;
    }
    return TNT_SUCCESS;
}
