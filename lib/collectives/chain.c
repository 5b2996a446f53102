/*
 * The rank-order reduction chain (see chain.h). In place with self >= 2,
 * the partial result cannot live in dst (it holds this rank's own input,
 * needed at step `self`), so it lives in in[1] (a received copy, which
 * this rank owns) until step `self` folds the own input in and moves the
 * partial to dst. No extra buffer and no extra copy either way.
 */
#include "collectives/chain.h"

uint32_t tnt__chain_reduce(tnt_sched_t *s, const tnt_chain_t *c)
{
    if (c->k == 1) {
        if (c->dst_is_self)
            return c->in_ready[0];
        uint32_t cp = tnt__sched_copy(s, c->dst, c->in[0], c->bytes);
        tnt__sched_dep(s, c->in_ready[0], cp);
        return cp;
    }
    int park = c->dst_is_self && c->self >= 2;
    tnt_bufref_t cur = c->in[0];
    uint32_t last = c->in_ready[0];
    int wrote_dst = 0;
    for (int i = 1; i < c->k; i++) {
        tnt_bufref_t out = (park && i < c->self) ? c->in[1] : c->dst;
        uint32_t red = tnt__sched_reduce(s, out, cur, c->in[i], c->bytes);
        tnt__sched_dep(s, last, red);
        tnt__sched_dep(s, c->in_ready[i], red);
        if (!wrote_dst && out.buf == c->dst.buf && out.off == c->dst.off) {
            for (int j = 0; j < c->ndst_readers; j++)
                tnt__sched_dep(s, c->dst_readers[j], red);
            wrote_dst = 1;
        }
        last = red;
        cur = out;
    }
    return last;
}
