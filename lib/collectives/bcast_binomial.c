/*
 * Binomial-tree broadcast: ceil(log2 p) rounds, latency-optimal for small
 * messages. A rank receives the whole buffer from its parent, then sends it
 * to its children, largest subtree first.
 */
#include "collectives/algorithms.h"
#include "collectives/patterns.h"

#define BCAST_MAX_CHILDREN 32

tnt_result_t tnt__bcast_binomial(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t bytes = a->count * a->esize;
    tnt_bufref_t buf = tnt__ref(TNT_BUF_RECV, 0);
    int parent = tnt__binomial_parent(a->rank, a->root, a->nranks);
    uint32_t rcv = TNT_SOP_NONE;
    if (parent >= 0)
        rcv = tnt__sched_recv(s, parent, 0, buf, bytes);
    int children[BCAST_MAX_CHILDREN];
    int n = tnt__binomial_children(a->rank, a->root, a->nranks, children,
                                   BCAST_MAX_CHILDREN);
    for (int i = 0; i < n; i++) {
        uint32_t snd = tnt__sched_send(s, children[i], 0, buf, bytes);
        tnt__sched_dep(s, rcv, snd);
    }
    return TNT_SUCCESS;
}
