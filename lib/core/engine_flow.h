/*
 * Flow control between a pair of ranks, for every transport: what a peer
 * can make this rank hold before its receives are posted is bounded by
 * design, so a correct program never fails because one rank is late.
 *
 * - A message of at most the eager limit E (TNT_EAGER_BYTES, 256 KiB) goes
 *   at once while the sender's window to that peer has room: eager bytes
 *   sent and not yet consumed by a receive there (each counted as
 *   TNT_UNEXP_COST(len), what it costs the receiver as an early message)
 *   stay within W (TNT_EAGER_WINDOW, 1 MiB). The receiver reports what it
 *   consumed with a CREDIT once a quarter of W has accumulated.
 * - Any other message is a rendezvous: it leaves when the receiver's CTS
 *   for (seq, step) is here. A receiver sends the CTS when it posts a
 *   receive above E (so the CTS usually travels before the sender needs
 *   it, costing no round trip), or when the sender's RTS says it waits.
 *   The RTS carries the collective's signature, so a mismatch is still
 *   found from the first message a receiver sees.
 * - TNT_FLOW_BATCH (default 0: no gain in time, more CPU at p = 2
 *   4 MiB on loopback, docs/performance.md) takes control messages out: the CTSs owed
 *   by the receives one run of tnt__run_ready posts are sent when it ends
 *   (tnt__flow_flush), one per run of consecutive steps of one collective
 *   from one peer (its count says how many steps: the ring posts a
 *   window of segments, and the whole allgather at p = 2, at once); and a
 *   send above E parks without an RTS once one went to that peer for its
 *   collective (the receiver sends the CTS of a receive above E when it
 *   posts it, RTS or not: the RTS only carried the signature, which the
 *   first one did). Alltoallv and send/recv, whose RTS carries each
 *   message's own size, keep one RTS per message. A CTS record that
 *   clears several sends stays until the last of them has used it. Only
 *   receives already posted are cleared, so no bound below changes.
 *
 * So early data from one peer is at most W (plus 0-byte RTS and CTS
 * records, one per send or receive the peer has posted). W is capped at
 * TNT_MAX_UNEXPECTED_BYTES / (nranks - 1), and E at W / 2. Both limits
 * must be the same on every rank (they come from the environment, like
 * every other knob). All functions run with comm->group->lock held.
 */
#ifndef TNT_CORE_ENGINE_FLOW_H
#define TNT_CORE_ENGINE_FLOW_H

#include "core/engine.h"

/** A flow-control message this rank sends (RTS, CTS or CREDIT). */
typedef struct tnt_ctl_tx {
    tnt_cookie_t ck;           /* TNT_COOKIE_CTL */
    int peer;
    tnt_msg_hdr_t hdr;
    struct tnt_ctl_tx *next;   /* comm->flow.ctl_free */
    struct tnt_ctl_tx *all_next; /* comm->flow.ctl_all: freed at teardown */
} tnt_ctl_tx_t;

/** The eager window W and eager limit E of this communicator. */
size_t tnt__flow_window(const struct tnt_comm *comm);
size_t tnt__flow_eager(const struct tnt_comm *comm);

/** Start send `op` of req (connected peer), the one way down from the
 *  engine to the transport: handed to the transport now (its CTS is here,
 *  or it fits the eager window), or parked until its CTS arrives and
 *  tnt__flow_header hands it over. */
void tnt__flow_send(struct tnt_comm *comm, struct tnt_request *req,
                    uint32_t op);
/** A control send that returned TNT_INPROGRESS has completed. */
void tnt__flow_ctl_done(struct tnt_comm *comm, void *cookie);
/** Receive os was just posted (on its peer's list); rts: its RTS was
 *  already here. Sends the CTS it needs. */
void tnt__flow_recv_posted(struct tnt_comm *comm, tnt_peer_t *p,
                           tnt_opstate_t *os, int rts);
/** Eager bytes (cost) from p were consumed by a receive here. */
void tnt__flow_consumed(struct tnt_comm *comm, tnt_peer_t *p, size_t len);
/** Send the CTSs owed by the receives posted since the last call (the
 *  end of every tnt__run_ready). */
void tnt__flow_flush(struct tnt_comm *comm);
/** p is connected: send the CTSs owed to it. */
void tnt__flow_connected(struct tnt_comm *comm, tnt_peer_t *p);
/** A control header from `peer` (RTS or CTS, already parsed; req: its
 *  collective, if active here; a CTS's signature less its count checked
 *  against req's).
 *  Returns 1 if consumed (nothing to store), 0 if the caller keeps it as
 *  an early record (an RTS before its receive), < 0 on failure. */
int tnt__flow_header(struct tnt_comm *comm, int peer, const tnt_msg_hdr_t *h,
                     struct tnt_request *req);
/** A CREDIT header from `peer`. */
void tnt__flow_credit(struct tnt_comm *comm, int peer, uint64_t consumed);
/** Is u an RTS record? */
static inline int tnt__flow_is_rts(const tnt_unexp_t *u)
{
    return (u->hdr.step & TNT_STEP_RTS) != 0;
}
/** Forget the peer's parked sends and CTS records (closed or failed). */
void tnt__flow_reset_peer(struct tnt_comm *comm, tnt_peer_t *p);
/** Free every control-send record (teardown, transports finalized). */
void tnt__flow_free(struct tnt_comm *comm);
/** Does an early message of payload_len fit the budget? Fails the
 *  communicator naming the peer if not. */
int tnt__flow_budget(struct tnt_comm *comm, int peer, size_t payload_len);

#endif /* TNT_CORE_ENGINE_FLOW_H */
