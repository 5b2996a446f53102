/*
 * Pipelined chain broadcast for large messages: ranks form a chain from
 * the root, and the buffer flows down it in segments, so every link is
 * busy at once and the time approaches size/bandwidth for long messages.
 */
#include "collectives/algorithms.h"
#include "collectives/patterns.h"

tnt_result_t tnt__bcast_pipeline(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int p = a->nranks;
    int vr = tnt__mod(a->rank - a->root, p);
    int prev = vr > 0 ? tnt__mod(a->rank - 1, p) : -1;
    int next = vr < p - 1 ? tnt__mod(a->rank + 1, p) : -1;
    size_t segelems = a->segment_bytes / a->esize;
    if (segelems == 0)
        segelems = 1;
    /* Bound the schedule's size for enormous buffers. */
    if (tnt__nsegments(a->count, segelems) > ((size_t)1 << 18))
        segelems = a->count / ((size_t)1 << 18) + 1;
    size_t nseg = tnt__nsegments(a->count, segelems);
    for (size_t j = 0; j < nseg; j++) {
        size_t off, n;
        tnt__segment(a->count, segelems, j, &off, &n);
        tnt_bufref_t seg = tnt__ref(TNT_BUF_RECV, off * a->esize);
        uint32_t rcv = TNT_SOP_NONE;
        if (prev >= 0)
            rcv = tnt__sched_recv(s, prev, (uint32_t)j, seg, n * a->esize);
        if (next >= 0) {
            uint32_t snd = tnt__sched_send(s, next, (uint32_t)j, seg,
                                           n * a->esize);
            tnt__sched_dep(s, rcv, snd);
        }
    }
    return TNT_SUCCESS;
}
