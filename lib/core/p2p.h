/*
 * Point-to-point messages (tnt_send, tnt_recv) inside the engine: how
 * they are numbered and matched without touching the collectives'
 * sequence.
 *
 * Collectives are matched across ranks by the communicator's sequence
 * number (comm->next_seq), which every rank advances in the same order.
 * A send or receive is one rank's affair with one peer, so it must not
 * advance that sequence. Each p2p operation is instead a request of kind
 * TNT_COLL_P2P whose `seq` has TNT_P2P_SEQ_BIT set (never reached by a
 * collective) and counts this rank's sends to (or receives from) that
 * peer with that tag: the n-th send from a to b with tag t and the n-th
 * receive posted on b from a with tag t both carry seq BIT | n and step
 * t, so messages of one pair and tag match in order, and tags are
 * independent. Because two requests of a rank may share such a seq (a
 * send and a receive, other peers, other tags), a message is matched to
 * a p2p request by (seq, peer, tag, direction: a CTS is for a send,
 * anything else for a receive), never by seq alone (tnt__p2p_find).
 * A receive from any source has no seq until its sender is known
 * (tnt__p2p_any_match): then it takes that sender's counter as any
 * receive does. A receive naming its peer posted while one from any
 * source with its tag waits takes its number only once no such earlier
 * one is left, so that a message goes to the earliest posted receive
 * it matches (MPI's rule).
 */
#ifndef TNT_CORE_P2P_H
#define TNT_CORE_P2P_H

#include <stdint.h>

#include "core/engine.h"

#define TNT_P2P_SEQ_BIT ((uint64_t)1 << 63)

/** The seq of the next send to (send = 1) or receive from `peer` with
 *  `tag`, counted; lock held. 0 when out of memory (never a valid one). */
uint64_t tnt__p2p_next_seq(struct tnt_comm *comm, int send, int peer,
                           uint32_t tag);
/** The p2p request that message h from `peer` is for, or NULL. */
struct tnt_request *tnt__p2p_find(struct tnt_comm *comm, int peer,
                                  const tnt_msg_hdr_t *h);
/** Is a receive from any source with `tag` waiting for its sender? A
 *  receive naming its peer posted now must then wait behind it. Lock
 *  held. */
int tnt__p2p_any_waits(const struct tnt_comm *comm, uint32_t tag);
/** Start what waits on comm->reqs.any (in posting order) and can start
 *  now. A message goes to the earliest posted receive it matches, as in
 *  MPI: a receive from any source takes the first early message (or
 *  RTS) with its tag that is the next one from its sender (seq equal to
 *  that sender's receive counter: no posted receive has taken it, and
 *  messages from one sender stay in order), looking at the senders in
 *  turn from the one after the last taken; a receive naming its peer
 *  waits there while a receive from any source with its tag posted
 *  before it waits. Each then runs as a receive from its sender
 *  (tnt__engine_start_any). Called when one is posted and after every
 *  look at the messages; lock held. */
void tnt__p2p_any_match(struct tnt_comm *comm);
/** Free the counters (communicator teardown). */
void tnt__p2p_free(struct tnt_comm *comm);

#endif /* TNT_CORE_P2P_H */
