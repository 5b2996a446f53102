/*
 * All-to-all, equal (alltoall) and variable (alltoallv) blocks: one
 * message to and one from every peer, all posted at once; at distance i
 * (1..p-1) a rank sends to rank + i and receives from rank - i, so the
 * sends start spread over the peers rather than all at rank 0. The own
 * block is a copy. Every pair exchanges a message, empty ones included,
 * so every rank hears from every other: a rank that called something
 * else, or another dtype, fails the call everywhere (the signature), and
 * a receive whose size differs from what the peer sends fails with both
 * sizes (core/engine_wire.c). The flow control (core/engine_flow.c)
 * keeps large blocks from arriving before their receive.
 *
 * alltoallv's block sizes come from a->v (sendcounts, sdispls,
 * recvcounts, rdispls, in elements); the API layer has checked that every
 * region lies within size_t and that the own block's two counts agree.
 */
#include "collectives/algorithms.h"
#include "collectives/patterns.h"

/* Block q's element offset and count, to send (dir 0) or receive (1). */
static void block(const tnt_coll_args_t *a, int dir, int q, size_t *off,
                  size_t *n)
{
    if (a->kind == TNT_COLL_ALLTOALLV) {
        *n = a->v[2 * dir][q];
        *off = a->v[2 * dir + 1][q];
    } else {
        *n = a->count;
        *off = (size_t)q * a->count;
    }
}

tnt_result_t tnt__alltoall_pairwise(const tnt_coll_args_t *a,
                                    tnt_sched_t *s)
{
    size_t es = a->esize, off, n, roff, rn;
    int p = a->nranks, r = a->rank;
    block(a, 0, r, &off, &n);
    block(a, 1, r, &roff, &rn);
    if (n)
        tnt__sched_copy(s, tnt__ref(TNT_BUF_RECV, roff * es),
                        tnt__ref(TNT_BUF_SEND, off * es), n * es);
    for (int i = 1; i < p; i++) {
        int to = tnt__mod(r + i, p), from = tnt__mod(r - i, p);
        block(a, 0, to, &off, &n);
        tnt__sched_send(s, to, 0, tnt__ref(TNT_BUF_SEND, off * es), n * es);
        block(a, 1, from, &roff, &rn);
        tnt__sched_recv(s, from, 0, tnt__ref(TNT_BUF_RECV, roff * es),
                        rn * es);
    }
    return TNT_SUCCESS;
}
