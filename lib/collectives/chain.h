/*
 * The rank-order reduction chain shared by the intra-host algorithms
 * (one-shot and direct allreduce), as operations of a schedule: k inputs
 * of one region, one per rank, are combined in the rank order of
 * collectives/rank_order.h, ((in0 op in1) op in2) ... op in(k-1), which
 * the on-host algorithms also use, so results are bitwise identical
 * across ranks, also for operations that are not associative in floating
 * point.
 */
#ifndef TNT_COLLECTIVES_CHAIN_H
#define TNT_COLLECTIVES_CHAIN_H

#include "collectives/schedule.h"

typedef struct tnt_chain {
    int k;                    /* number of inputs (ranks) */
    int self;                 /* index of this rank's own input */
    const tnt_bufref_t *in;   /* in[i]: rank i's input (k entries) */
    const uint32_t *in_ready; /* in[i] complete after this op (or NONE) */
    tnt_bufref_t dst;         /* where the result goes */
    /* dst is the same memory as in[self] (in place): the partial result
     * must not land there before in[self] has been read. */
    int dst_is_self;
    /* Operations that read dst's memory and must finish before the chain
     * first writes it (in place: sends of the input). */
    const uint32_t *dst_readers;
    int ndst_readers;
    size_t bytes;
} tnt_chain_t;

/** Append the chain to s; returns the operation that completes the
 *  result (TNT_SOP_NONE if there was nothing to do). */
uint32_t tnt__chain_reduce(tnt_sched_t *s, const tnt_chain_t *c);

#endif /* TNT_COLLECTIVES_CHAIN_H */
