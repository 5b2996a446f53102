/*
 * The direct data flow, shared by the direct allreduce
 * (allreduce_direct.c) and the reproducible mode's canonical schedule
 * (allreduce_canon.c): a one-step reduce-scatter in which every rank
 * sends chunk q of its input, segment by segment, to rank q, and a
 * one-step allgather in which rank q sends its finished chunk to every
 * other. What reduces a chunk (a chain in rank order, or one canonical
 * operation) is each algorithm's own; these are the sends and receives
 * around it, which were written twice.
 *
 * Steps: segment j of the reduce-scatter at step j, of the allgather at
 * ag_base + j (ag_base = the segment count of the longest chunk, chunk 0,
 * so the allgather's steps start above all reduce-scatter steps); the
 * "ready" handshake at step 2 * ag_base.
 */
#ifndef TNT_COLLECTIVES_DIRECT_FLOW_H
#define TNT_COLLECTIVES_DIRECT_FLOW_H

#include "collectives/algorithms.h"

/** Chunk q: of an allreduce the q-th of k chunks of the buffer
 *  (tnt__chunk_range); of a reduce-scatter block q of a->count elements
 *  in the send buffer. */
void tnt__direct_chunk(const tnt_coll_args_t *a, int q, size_t *off,
                       size_t *len);

/** The reduce-scatter's sends: chunk q (tnt__direct_chunk) of the send
 *  buffer to every rank q other than this one, in segments of segelems,
 *  each after the receiver's "ready" where handshake (large chunks:
 *  allreduce_direct.c says why). rs_send[q * ag_base + j] gets the send
 *  of segment j of chunk q. */
void tnt__direct_rs_sends(const tnt_coll_args_t *a, tnt_sched_t *s,
                          size_t segelems, uint32_t ag_base, int handshake,
                          uint32_t *rs_send);

/** The allgather's receives: chunk q of the receive buffer from every
 *  rank q other than this one, segment by segment, into place. In place
 *  that memory is also this rank's input for q: each receive waits for
 *  the reduce-scatter's send of the same segment (rs_send as filled by
 *  tnt__direct_rs_sends), which keeps the send's buffer ours until the
 *  transport is done with it (a rendezvous send completes with the
 *  receiver's ACK, which arrives just before q's result), at no cost. */
void tnt__direct_ag_recvs(const tnt_coll_args_t *a, tnt_sched_t *s,
                          size_t segelems, uint32_t ag_base,
                          const uint32_t *rs_send);

#endif /* TNT_COLLECTIVES_DIRECT_FLOW_H */
