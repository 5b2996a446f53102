/*
 * Ring allreduce: reduce-scatter then allgather, pipelined in segments.
 * Bandwidth-optimal (each rank sends 2(p-1)/p of the data), so it is the
 * choice for large messages. Rank r ends the reduce-scatter owning chunk
 * r+1, which makes the first allgather step send what was just finished.
 */
#include "collectives/patterns.h"
#include "collectives/ring.h"

tnt_result_t tnt__allreduce_ring(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    tnt_ring_t r;
    TNT_CHECK(tnt__ring_init(&r, a, a->count, 0));
    r.src = tnt__ref(TNT_BUF_SEND, 0);
    r.acc = tnt__ref(TNT_BUF_RECV, 0);
    r.owned = tnt__mod(a->rank + 1, a->nranks);
    r.scale = (a->op == TNT_AVG);
    tnt__ring_rs_phase(s, &r, a->op);
    r.step_base = (uint32_t)((size_t)(a->nranks - 1) * r.nseg);
    tnt__ring_ag_phase(s, &r);
    tnt__ring_fini(&r);
    return TNT_SUCCESS;
}
