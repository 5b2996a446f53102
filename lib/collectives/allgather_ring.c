/*
 * Ring allgather: every rank places its block at rank*count of the
 * receive buffer and the blocks travel p-1 steps around the ring.
 */
#include "collectives/ring.h"

tnt_result_t tnt__allgather_ring(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    tnt_ring_t r;
    TNT_CHECK(tnt__ring_init(&r, a, 0, a->count));
    r.acc = tnt__ref(TNT_BUF_RECV, 0);
    r.owned = a->rank;
    size_t bytes = a->count * a->esize;
    if (!a->in_place) {
        uint32_t cp = tnt__sched_copy(
            s, tnt__ref(TNT_BUF_RECV, (size_t)a->rank * bytes),
            tnt__ref(TNT_BUF_SEND, 0), bytes);
        for (size_t j = 0; j < r.nseg; j++)
            r.last_write[(size_t)a->rank * r.nseg + j] = cp;
    }
    tnt__ring_ag_phase(s, &r);
    tnt__ring_fini(&r);
    return TNT_SUCCESS;
}
