/*
 * The rank order of a reduction of k inputs, one per rank:
 * ((in0 op in1) op in2) ... op in(k-1), and for an average the division
 * by k after the last. Every rank that reduces a region uses this order,
 * so results are bitwise identical across ranks, also for operations
 * that are not associative in floating point. The schedule-built
 * algorithms express it as operations of a schedule (chain.c); the
 * on-host algorithms, which reduce where the inputs lie, fold them in
 * with tnt__rank_order_fold.
 */
#ifndef TNT_COLLECTIVES_RANK_ORDER_H
#define TNT_COLLECTIVES_RANK_ORDER_H

#include <string.h>

#include "collectives/reduce.h"

/** Fold rank i's n elements `in` (of esize bytes) into acc, for i = 0,
 *  1, ..., k - 1 in turn: i = 0 copies, every later one reduces with fn
 *  (dtype's kernel of op), and after i = k - 1 an average is scaled. */
static inline void tnt__rank_order_fold(void *acc, int i, int k,
                                        const void *in, size_t n,
                                        size_t esize, tnt_reduce_fn_t fn,
                                        tnt_dtype_t dtype, tnt_op_t op)
{
    if (i == 0)
        memcpy(acc, in, n * esize);
    else
        fn(acc, acc, in, n);
    if (i == k - 1 && op == TNT_AVG)
        tnt__scale_avg(acc, n, dtype, k);
}

#endif /* TNT_COLLECTIVES_RANK_ORDER_H */
