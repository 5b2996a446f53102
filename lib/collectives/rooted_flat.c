/*
 * Flat gather and scatter: the root receives from (gather) or sends to
 * (scatter) every other rank directly, all messages at once, each block
 * its own message at its place in the root's buffer; the root's own block
 * is a copy (none in place). One step: the root's link carries the p - 1
 * blocks either way, which a tree would only relay. A non-root rank hears
 * from nobody but the root, so the caller adds the signature check
 * (select.c) as for a broadcast.
 */
#include "collectives/algorithms.h"

tnt_result_t tnt__gather_flat(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t bytes = a->count * a->esize;
    if (a->rank != a->root) {
        tnt__sched_send(s, a->root, 0, tnt__ref(TNT_BUF_SEND, 0), bytes);
        return TNT_SUCCESS;
    }
    for (int q = 0; q < a->nranks; q++) {
        tnt_bufref_t dst = tnt__ref(TNT_BUF_RECV, (size_t)q * bytes);
        if (q != a->rank)
            tnt__sched_recv(s, q, 0, dst, bytes);
        else if (!a->in_place && bytes)
            tnt__sched_copy(s, dst, tnt__ref(TNT_BUF_SEND, 0), bytes);
    }
    return TNT_SUCCESS;
}

tnt_result_t tnt__scatter_flat(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t bytes = a->count * a->esize;
    if (a->rank != a->root) {
        tnt__sched_recv(s, a->root, 0, tnt__ref(TNT_BUF_RECV, 0), bytes);
        return TNT_SUCCESS;
    }
    for (int q = 0; q < a->nranks; q++) {
        tnt_bufref_t src = tnt__ref(TNT_BUF_SEND, (size_t)q * bytes);
        if (q != a->rank)
            tnt__sched_send(s, q, 0, src, bytes);
        else if (!a->in_place && bytes)
            tnt__sched_copy(s, tnt__ref(TNT_BUF_RECV, 0), src, bytes);
    }
    return TNT_SUCCESS;
}
