/*
 * Flat broadcast: the root sends the whole buffer to every other rank in
 * one step. Between ranks of one host the root's sends cost it little: a
 * small message is one copy into each peer's ring, and from 256 KiB on
 * every receiver pulls the root's buffer itself with process_vm_readv,
 * all of them at once, where a tree would make the data wait for
 * log2(p) hops and a chain for p-1.
 *
 * From TNT_READY_MIN_BYTES on, each receiver first sends the root an
 * empty "ready" message and the root sends the data only once it has it.
 * Nothing else holds a root back: it finishes as soon as its peers have
 * the data and runs into the next broadcast, whose data then reaches a
 * receiver that has not posted it yet; such an early message is pulled
 * into a bounce buffer and copied again, with page faults on the way
 * (docs/performance.md, "The ready handshake"). The handshake costs one
 * small message, which is little next to a message of that size.
 *
 * With the handshake the root also sends every receiver an empty
 * "announce" first. It carries no data; it is there for ranks that
 * disagree on the root: two ranks that both think they are the root
 * would otherwise each wait for the other's "ready" and never send a
 * message, and a mismatch is only found from a message (test_mismatch,
 * "large broadcast root").
 */
#include "collectives/algorithms.h"

tnt_result_t tnt__bcast_flat(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t bytes = a->count * a->esize;
    int ready = bytes >= TNT_READY_MIN_BYTES;
    tnt_bufref_t buf = tnt__ref(TNT_BUF_RECV, 0);
    if (a->rank != a->root) {
        /* Both start together, under the communicator lock, so the
         * receive is posted before the root can see "ready". */
        tnt__sched_recv(s, a->root, 0, buf, bytes);
        if (ready) {
            tnt__sched_send(s, a->root, 1, buf, 0);
            tnt__sched_recv(s, a->root, 2, buf, 0);
        }
        return TNT_SUCCESS;
    }
    /* Nearest ranks after the root first: the same order on every root. */
    for (int i = 1; ready && i < a->nranks; i++)
        tnt__sched_send(s, (a->root + i) % a->nranks, 2, buf, 0);
    for (int i = 1; i < a->nranks; i++) {
        int q = (a->root + i) % a->nranks;
        uint32_t go = ready ? tnt__sched_recv(s, q, 1, buf, 0)
                            : TNT_SOP_NONE;
        uint32_t snd = tnt__sched_send(s, q, 0, buf, bytes);
        tnt__sched_dep(s, go, snd);
    }
    return TNT_SUCCESS;
}
