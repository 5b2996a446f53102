/*
 * A point-to-point send or receive as a schedule of one operation, so
 * that the engine runs it like any collective (transports, flow control,
 * deadlines, failure). The peer is a->root, the tag the operation's step
 * (below TNT_STEP_CTL's bits: the API caps it at TNT_TAG_MAX); the core
 * numbers the requests (core/p2p.h).
 */
#include "collectives/algorithms.h"

tnt_result_t tnt__p2p_sched(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t bytes = a->count * a->esize;
    if (a->p2p_send)
        tnt__sched_send(s, a->root, a->tag, tnt__ref(TNT_BUF_SEND, 0),
                        bytes);
    else
        tnt__sched_recv(s, a->root, a->tag, tnt__ref(TNT_BUF_RECV, 0),
                        bytes);
    return TNT_SUCCESS;
}
