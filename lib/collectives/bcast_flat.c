/*
 * Flat broadcast: the root sends the whole buffer to every other rank in
 * one step. Between ranks of one host the root's sends cost it little: a
 * small message is one copy into each peer's ring, and from 256 KiB on
 * every receiver pulls the root's buffer itself with process_vm_readv,
 * all of them at once, where a tree would make the data wait for
 * log2(p) hops and a chain for p-1.
 */
#include "collectives/algorithms.h"

tnt_result_t tnt__bcast_flat(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t bytes = a->count * a->esize;
    tnt_bufref_t buf = tnt__ref(TNT_BUF_RECV, 0);
    if (a->rank != a->root) {
        tnt__sched_recv(s, a->root, 0, buf, bytes);
        return TNT_SUCCESS;
    }
    /* Nearest ranks after the root first: the same order on every root. */
    for (int i = 1; i < a->nranks; i++)
        tnt__sched_send(s, (a->root + i) % a->nranks, 0, buf, bytes);
    return TNT_SUCCESS;
}
