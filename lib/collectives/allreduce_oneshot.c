/*
 * One-shot allreduce: every rank sends its whole input to every other rank
 * and reduces all k inputs itself, in rank order 0..k-1 (chain.c), so the
 * result is bitwise identical everywhere. One communication step instead
 * of recursive doubling's log2(p) (plus the pre/post step) or the ring's
 * 2(p-1): for small messages between ranks of one host, where a step
 * costs a wake-up and the data is a few cache lines, that is the whole
 * cost. Each rank sends and reduces (k-1) times the message, so it is
 * chosen for small sizes only.
 */
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/chain.h"
#include "util/error.h"

tnt_result_t tnt__allreduce_oneshot(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    size_t bytes = a->count * a->esize;
    tnt_bufref_t send = tnt__ref(TNT_BUF_SEND, 0);
    tnt_bufref_t recv = tnt__ref(TNT_BUF_RECV, 0);
    tnt_bufref_t *in = malloc((size_t)k * sizeof(*in));
    uint32_t *ready = malloc((size_t)k * sizeof(*ready));
    uint32_t *sends = malloc((size_t)k * sizeof(*sends));
    if (!in || !ready || !sends) {
        free(in);
        free(ready);
        free(sends);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory building a "
                          "one-shot allreduce for %d ranks", k);
    }
    int nsends = 0;
    for (int q = 0; q < k; q++) {
        if (q == r) {
            in[q] = send;
            ready[q] = TNT_SOP_NONE;
            continue;
        }
        sends[nsends++] = tnt__sched_send(s, q, 0, send, bytes);
        in[q] = tnt__ref(TNT_BUF_SCRATCH, tnt__sched_scratch(s, bytes));
        ready[q] = tnt__sched_recv(s, q, 0, in[q], bytes);
    }
    tnt_chain_t c = {.k = k, .self = r, .in = in, .in_ready = ready,
                     .dst = recv, .dst_is_self = a->in_place,
                     .dst_readers = sends, .ndst_readers = nsends,
                     .bytes = bytes};
    uint32_t last = tnt__chain_reduce(s, &c);
    if (a->op == TNT_AVG) {
        uint32_t sca = tnt__sched_scale(s, recv, bytes);
        tnt__sched_dep(s, last, sca);
        for (int j = 0; j < nsends; j++)
            tnt__sched_dep(s, sends[j], sca);
    }
    free(in);
    free(ready);
    free(sends);
    return TNT_SUCCESS;
}
