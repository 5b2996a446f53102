/*
 * Rooted reduce: the schedule of the allreduce that tnt_allreduce would
 * run for the same arguments, with the result kept at the root only.
 *
 * The rule is that a reduce gives bitwise the numbers an allreduce of the
 * same inputs gives (a user switching between them, or a framework that
 * emulates one with the other, sees no difference). Every allreduce
 * algorithm fixes its own order of combining the ranks' inputs
 * (docs/design.md, "Determinism": ring order per chunk, recursive
 * doubling's pairs, rank order for the chain-based and on-host ones), so
 * a reduce with an order of its own (a binomial tree, say) would differ
 * in the last bits of floating point sums. Running the allreduce's own
 * schedule gives the same order by construction, for every algorithm and
 * size; the price is the allreduce's traffic (about twice a tree
 * reduce's bytes at large sizes).
 *
 * On one host over shared memory the allreduce runs without a schedule
 * (slots, staged, mapped); those fold the inputs in rank order, as the
 * direct allreduce's chain does (chain.c), so a reduce there runs the
 * direct allreduce: the same bits through messages.
 *
 * A rank other than the root has no receive buffer to write: every
 * reference the allreduce schedule makes to it is moved into scratch of
 * count elements. Every rank hears from every other through the
 * allreduce's data flow, so a mismatch (another root, count, op) fails
 * every rank, as for the allreduce.
 */
#include "collectives/algorithms.h"
#include "util/error.h"

tnt_result_t tnt__reduce_algo(const tnt_coll_args_t *a, int forced,
                              int *algo)
{
    tnt_coll_args_t ar = *a;
    ar.kind = TNT_COLL_ALLREDUCE;
    ar.mapped = 0;
    ar.root = 0;
    /* A forced on-host algorithm stands for the rank-order chain. */
    if (tnt__algo_onhost(forced) && a->intra_host)
        forced = TNT_ALGO_DIRECT;
    int rule;
    TNT_CHECK(tnt__algo_select_why(&ar, forced, algo, &rule));
    if (tnt__algo_onhost(*algo))
        *algo = TNT_ALGO_DIRECT;
    return TNT_SUCCESS;
}

/* Move every reference to the receive buffer into scratch at base. */
static void recv_to_scratch(tnt_sched_t *s, size_t base)
{
    for (uint32_t i = 0; i < s->nops; i++) {
        tnt_bufref_t *r[3] = {&s->ops[i].dst, &s->ops[i].a, &s->ops[i].b};
        for (int j = 0; j < 3; j++)
            if (r[j]->buf == TNT_BUF_RECV) {
                r[j]->buf = TNT_BUF_SCRATCH;
                r[j]->off += base;
            }
    }
}

tnt_result_t tnt__reduce_root(const tnt_coll_args_t *a, int algo,
                              tnt_sched_t *s)
{
    tnt_coll_args_t ar = *a;
    ar.kind = TNT_COLL_ALLREDUCE;
    ar.root = 0;
    tnt_result_t rc;
    switch (algo) {
    case TNT_ALGO_LOCAL: rc = tnt__local_copy(&ar, s); break;
    case TNT_ALGO_RING: rc = tnt__allreduce_ring(&ar, s); break;
    case TNT_ALGO_RD: rc = tnt__allreduce_rd(&ar, s); break;
    case TNT_ALGO_RABENSEIFNER: rc = tnt__allreduce_rab(&ar, s); break;
    case TNT_ALGO_HIER: rc = tnt__allreduce_hier(&ar, s); break;
    case TNT_ALGO_TREE: rc = tnt__allreduce_tree(&ar, s); break;
    case TNT_ALGO_ONESHOT: rc = tnt__allreduce_oneshot(&ar, s); break;
    case TNT_ALGO_DIRECT: rc = tnt__allreduce_direct(&ar, s); break;
    case TNT_ALGO_CANON: rc = tnt__allreduce_canon(&ar, s); break;
    case TNT_ALGO_CANON_ONESHOT:
        rc = tnt__allreduce_canon_oneshot(&ar, s);
        break;
    default:
        return tnt__error(TNT_ERR_INTERNAL, "reduce: no allreduce "
                          "schedule for algorithm '%s'",
                          tnt__algo_name(algo));
    }
    if (rc == TNT_SUCCESS && a->rank != a->root)
        recv_to_scratch(s, tnt__sched_scratch(s, a->count * a->esize));
    return rc;
}
