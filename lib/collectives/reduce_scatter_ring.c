/*
 * Ring reduce-scatter (MPI_Reduce_scatter_block): the send buffer holds p
 * blocks of `count` elements; rank r ends with block r of the reduction.
 * Partial results of the blocks a rank passes on live in scratch, since
 * the send buffer is read-only; the owned block lands in the receive
 * buffer directly.
 */
#include "collectives/ring.h"

tnt_result_t tnt__reduce_scatter_ring(const tnt_coll_args_t *a,
                                      tnt_sched_t *s)
{
    tnt_ring_t r;
    TNT_CHECK(tnt__ring_init(&r, a, 0, a->count));
    size_t bytes = a->count * a->esize;
    r.src = tnt__ref(TNT_BUF_SEND, 0);
    r.acc = tnt__ref(TNT_BUF_SCRATCH,
                     tnt__sched_scratch(s, bytes * (size_t)a->nranks));
    r.final_dst_set = 1;
    r.final_dst = tnt__ref(TNT_BUF_RECV, 0);
    r.owned = a->rank;
    r.scale = (a->op == TNT_AVG);
    tnt__ring_rs_phase(s, &r, a->op);
    tnt__ring_fini(&r);
    return TNT_SUCCESS;
}
