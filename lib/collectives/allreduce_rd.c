/*
 * Recursive-doubling allreduce: log2(p) rounds in which partners exchange
 * their whole partial result. Latency-optimal, so it is the choice for
 * small messages. For p not a power of two, p = p2 + rem: the first 2*rem
 * ranks pair up, the even one sends its data to the odd one and receives
 * the final result at the end (MPICH's pre/post step).
 *
 * Determinism: every combination is computed as (lower ranks' partial) op
 * (higher ranks' partial), so partners compute bit-identical values even
 * for operations that are not commutative bit for bit (NaN payloads).
 */
#include "collectives/algorithms.h"
#include "collectives/patterns.h"

tnt_result_t tnt__allreduce_rd(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int p = a->nranks, rank = a->rank;
    int p2 = tnt__pow2_floor(p), rem = p - p2;
    size_t bytes = a->count * a->esize;
    tnt_bufref_t send = tnt__ref(TNT_BUF_SEND, 0);
    tnt_bufref_t recv = tnt__ref(TNT_BUF_RECV, 0);
    uint32_t step = 0;

    if (rank < 2 * rem && rank % 2 == 0) {
        /* Folded into rank+1: hand over the data, get the result back. */
        uint32_t snd = tnt__sched_send(s, rank + 1, step, send, bytes);
        uint32_t rcv = tnt__sched_recv(s, rank + 1, 1000000u, recv, bytes);
        /* In place, the result overwrites what is being sent. */
        tnt__sched_dep(s, snd, rcv);
        return TNT_SUCCESS;
    }

    /* `cur` holds this rank's partial; `last` last wrote it, `reader` last
     * read it (a send), so a later write must wait for both. */
    tnt_bufref_t cur = send;
    uint32_t last = TNT_SOP_NONE, reader = TNT_SOP_NONE;
    if (rank < 2 * rem) {
        tnt_bufref_t tmp = tnt__ref(TNT_BUF_SCRATCH,
                                    tnt__sched_scratch(s, bytes));
        uint32_t rcv = tnt__sched_recv(s, rank - 1, step, tmp, bytes);
        last = tnt__sched_reduce(s, recv, tmp, send, bytes);
        tnt__sched_dep(s, rcv, last);
        cur = recv;
    }
    step++;

    int newrank = tnt__rd_newrank(rank, p);
    for (int mask = 1; mask < p2; mask <<= 1, step++) {
        int partner = tnt__rd_realrank(newrank ^ mask, p);
        tnt_bufref_t tmp = tnt__ref(TNT_BUF_SCRATCH,
                                    tnt__sched_scratch(s, bytes));
        uint32_t snd = tnt__sched_send(s, partner, step, cur, bytes);
        tnt__sched_dep(s, last, snd);
        uint32_t rcv = tnt__sched_recv(s, partner, step, tmp, bytes);
        uint32_t red = (partner < rank)
                           ? tnt__sched_reduce(s, recv, tmp, cur, bytes)
                           : tnt__sched_reduce(s, recv, cur, tmp, bytes);
        tnt__sched_dep(s, rcv, red);
        tnt__sched_dep(s, snd, red);
        tnt__sched_dep(s, last, red);
        tnt__sched_dep(s, reader, red);
        reader = snd;
        last = red;
        cur = recv;
    }

    if (cur.buf != TNT_BUF_RECV) {
        /* p == 1 reaches here only through a forced algorithm. */
        last = tnt__sched_copy(s, recv, send, bytes);
    }
    if (a->op == TNT_AVG) {
        uint32_t sca = tnt__sched_scale(s, recv, bytes);
        tnt__sched_dep(s, last, sca);
        tnt__sched_dep(s, reader, sca);
        last = sca;
    }
    if (rank < 2 * rem) {
        uint32_t snd = tnt__sched_send(s, rank - 1, 1000000u, recv, bytes);
        tnt__sched_dep(s, last, snd);
    }
    return TNT_SUCCESS;
}
