/*
 * Functions shared by the two halves of the engine: engine.c (posting and
 * executing schedules, lifetime, failure) and engine_wire.c (transport
 * upcalls and matching). All are called with comm->group->lock held.
 */
#ifndef TNT_CORE_ENGINE_INTERNAL_H
#define TNT_CORE_ENGINE_INTERNAL_H

#include "core/describe.h"
#include "core/engine.h"

/* The requests in flight, in posting order:
 * for (r = tnt__active_first(comm); r; r = tnt__active_next(comm, r)). */
static inline struct tnt_request *
tnt__active_first(const struct tnt_comm *comm)
{
    tnt_list_node_t *n = tnt__list_first(&comm->reqs.active);
    return n ? TNT_LIST_ENTRY(n, struct tnt_request, active_link) : NULL;
}

static inline struct tnt_request *
tnt__active_next(const struct tnt_comm *comm, const struct tnt_request *r)
{
    tnt_list_node_t *n = tnt__list_next(&comm->reqs.active, &r->active_link);
    return n ? TNT_LIST_ENTRY(n, struct tnt_request, active_link) : NULL;
}

/** Where buffer reference r of req points. */
static inline unsigned char *tnt__ref_ptr(struct tnt_request *req,
                                          tnt_bufref_t r)
{
    return req->bufs[r.buf] + r.off;
}
/** A descriptor for an early message (recycled when possible). */
tnt_unexp_t *tnt__alloc_unexp(struct tnt_comm *comm);
/** Free an early message that is already off its peer's list. */
void tnt__free_unexp(struct tnt_comm *comm, tnt_unexp_t *u);
void tnt__op_complete(struct tnt_request *req, uint32_t op);
/** Run every ready operation of req; finish it when nothing is left. */
void tnt__run_ready(struct tnt_comm *comm, struct tnt_request *req);
/** Copy a fully arrived early message into its receive and complete it. */
void tnt__deliver_unexpected(struct tnt_comm *comm, tnt_peer_t *p,
                             tnt_unexp_t *u, tnt_opstate_t *os);
/** Send this rank's failure notice on ep (its stream must be in frame:
 *  no message half sent). */
void tnt__send_notice(struct tnt_comm *comm, int tpi, void *ep);
/** Remember the first peer lost while the communicator was fine (even
 *  one nothing needed yet): the likely cause of what follows. */
void tnt__note_lost(struct tnt_comm *comm, int peer, const char *what);
/** Fail with TNT_ERR_PEER_LOST for `peer`, naming the first lost peer
 *  too if it was another. */
void tnt__fail_peer_lost(struct tnt_comm *comm, int peer, const char *what);
/** Fail for `peer` with the transport's result `err`, worded by it:
 *  TNT_ERR_PEER_LOST as tnt__fail_peer_lost, TNT_ERR_CONNECT as a failure
 *  to connect, anything else as the connection failing. */
void tnt__fail_peer(struct tnt_comm *comm, int peer, tnt_result_t err,
                    const char *what);
/** Is operation `op` of req large enough to run without the lock? */
int tnt__op_is_heavy(const struct tnt_comm *comm,
                     const struct tnt_request *req, uint32_t op);
/** Queue ready operation `op` (a reduction, copy, scale, or a receive
 *  whose os->src is set) for tnt__engine_run_heavy. */
void tnt__queue_heavy(struct tnt_comm *comm, struct tnt_request *req,
                      uint32_t op);
/** Take req off the queue of tnt__engine_run_heavy (it finished). */
void tnt__unqueue_heavy(struct tnt_comm *comm, struct tnt_request *req);
/** Run the arithmetic or copy of operation `op` (not a send or receive).
 *  Needs no lock: it touches only the request's buffers. */
void tnt__run_compute(const struct tnt_request *req, uint32_t op);
/** Finish req with rc now that no computation runs on it any more. */
void tnt__finish_late(struct tnt_request *req);
/** An alltoallv's message (or its RTS) from `peer` for receive `sop` of
 *  req: its header's count is the elements the sender sends (the
 *  signature has no count, the blocks differ by peer). If that is not
 *  what the receive expects, fail the communicator with
 *  TNT_ERR_MISMATCH naming both ranks and both counts, and return 1;
 *  else 0 (always 0 for other collectives, whose sizes the signature
 *  fixes). engine_vsize.c. */
int tnt__vsize_mismatch(struct tnt_comm *comm, struct tnt_request *req,
                        int peer, const tnt_msg_hdr_t *h,
                        const tnt_sop_t *sop);
/** `peer` sent h for collective h->seq, which this rank posted already:
 *  if this rank called something else there, fail with the mismatch and
 *  return 1. */
int tnt__mismatch_past(struct tnt_comm *comm, const tnt_msg_hdr_t *h,
                       int peer);
void tnt__report_mismatch(struct tnt_comm *comm, struct tnt_request *req,
                          const tnt_msg_hdr_t *theirs, int peer);

/** Connect to p unless connected or connecting (the lower rank of the
 *  pair connects; the other waits). */
void tnt__ensure_connect(struct tnt_comm *comm, tnt_peer_t *p);
/** Operations of req, as its report counts them. */
uint32_t tnt__request_nops(const struct tnt_request *req);

/* onhost/: the on-host algorithms (slots, staged and mapped allreduce,
 * staged broadcast), run from the on-host queue (onhost/queue.c). */
/** The signature a peer left in shared memory (slots, staging areas),
 *  as a message header, for the comparisons messages get. */
tnt_msg_hdr_t tnt__mem_sig(const struct tnt_comm *comm, uint64_t seq,
                           uint64_t count, uint8_t kind, uint8_t dtype,
                           uint8_t op, uint8_t algo, int32_t root);
/** Number req (an on-host collective just posted) and queue it;
 *  tnt__onhost_progress runs it. */
void tnt__onhost_enqueue(struct tnt_comm *comm, struct tnt_request *req);
/** The bytes of one side of each pair area the on-host algorithms use,
 *  by area id (TNT_TP_AREA_*; 0 where none), what the transports get in
 *  env->pair_area_bytes: the sizes of their layouts (onhost/pairs.c). */
void tnt__onhost_area_bytes(size_t bytes[TNT_TP_AREA_END]);
/** The table that runs on-host algorithm `algo` for a collective of
 *  `kind` (onhost/onhost.h); NULL when algo runs a schedule of
 *  messages. The one place that maps the selection table's on-host ids
 *  to their code (onhost/queue.c). */
const struct tnt_onhost_algo *tnt__onhost_algo(int algo, int kind);
/** Look for what the peers called instead of req, an on-host collective
 *  that waits (strays in the peers' slots and staging areas, and for a
 *  staged one the headers published for its sequence number): a mismatch
 *  between two kinds of collective meets in neither's memory. Fails the
 *  communicator if found. */
void tnt__onhost_check_mismatch(struct tnt_comm *comm,
                                struct tnt_request *req);
/** Take a finished (or failed) req off the queue. */
void tnt__onhost_unqueue(struct tnt_comm *comm, struct tnt_request *req);
/** Peer q's connection is closing (its segment still mapped): keep what
 *  the on-host collectives in flight still read from it. */
void tnt__onhost_peer_closing(struct tnt_comm *comm, int q);
/** Does on-host collective req still need peer q (to publish to it, or
 *  to read from it)? */
int tnt__onhost_needs(const struct tnt_request *req, int q);
/** Operations of on-host collective req, as its report counts them. */
uint32_t tnt__onhost_nops(const struct tnt_request *req);
/** What on-host collective req waits for, for the reports ("slot step
 *  0: input from rank 3 (slot operation 7, 400 bytes)", "staged round 2
 *  of 8: rank 1 (...)"); returns the length written. */
size_t tnt__onhost_report(const struct tnt_request *req, char *buf,
                          size_t len);
/** Progress calls in a row in which a staged collective moved nothing
 *  before the peers' shared memory is searched for what they called
 *  instead (strays, headers of another signature): a mismatch meets in
 *  neither side's area, but nothing moves while it lasts, and reading
 *  the peers' lines on every call would cost a cache miss each. */
#define TNT_STAGE_STALLS_BEFORE_CHECK 64

#endif /* TNT_CORE_ENGINE_INTERNAL_H */
