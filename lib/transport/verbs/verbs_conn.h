/*
 * The per-peer connection state machine of the verbs transport, kept
 * free of verbs calls so that tests drive it with fake events.
 *
 *   HANDSHAKE -> INIT -> RTR -> RTS (ready) -> CLOSED
 *        \         \       \       \
 *         `---------`-------`-------`--> ERROR
 *
 * HANDSHAKE: the side-channel socket is exchanging queue pair addresses.
 * INIT, RTR, RTS: the queue pair's own states as the transport moves it
 * (RESET is before the machine starts). ERROR: the connection failed
 * (a completion with an error status, a fatal async event, the side
 * channel closing, a malformed message); the first failure decides the
 * error and its text, which names the peer, and everything after it is
 * noise to ignore (the flush completions of the remaining work requests,
 * further events). The glue reports that first failure once through
 * on_peer_error, as TCP does, and the core fails the operations with the
 * peer.
 */
#ifndef TNT_TRANSPORT_VERBS_VERBS_CONN_H
#define TNT_TRANSPORT_VERBS_VERBS_CONN_H

#include "tnt/tnt.h"

enum vb_state {
    VB_HANDSHAKE,
    VB_INIT,
    VB_RTR,
    VB_RTS,
    VB_ERROR,
    VB_CLOSED
};

/* Events, in the transport's own terms (not ibv enums, so that this
 * file builds and is tested without libibverbs). */
enum vb_event {
    VB_EV_QP_INIT,      /* modify to INIT done */
    VB_EV_QP_RTR,       /* modify to RTR done (remote address known) */
    VB_EV_QP_RTS,       /* modify to RTS done */
    VB_EV_WC_OK,        /* a successful completion */
    VB_EV_WC_FLUSH,     /* a work request flushed by an error state */
    VB_EV_WC_RETRY,     /* transport retry counter exceeded */
    VB_EV_WC_RNR,       /* receiver-not-ready retries exceeded */
    VB_EV_WC_REMOTE,    /* remote access / operation / invalid request */
    VB_EV_WC_OTHER,     /* any other completion error */
    VB_EV_LOCAL,        /* a local failure: registration (locked-memory
                         * limit), posting, a local completion error */
    VB_EV_ASYNC_FATAL,  /* QP fatal / request / access error event */
    VB_EV_PORT_DOWN,    /* the local port went down */
    VB_EV_DEVICE_FATAL, /* the HCA failed */
    VB_EV_SIDE_CLOSED,  /* the side-channel socket closed (peer exited) */
    VB_EV_PROTOCOL,     /* a malformed message or handshake */
    VB_EV_SETUP,        /* creating or connecting the queue pair failed */
    VB_EV_CLOSE         /* the core closed the endpoint */
};

typedef struct vb_conn {
    int rank, peer;
    int state;
    tnt_result_t err;  /* first failure, once in ERROR */
    char why[256];     /* its text, naming the peer */
} vb_conn_t;

void tnt__vb_conn_init(vb_conn_t *c, int rank, int peer);

/**
 * Feed one event; `detail` adds to the error text (a status string, what
 * was malformed), may be NULL. Returns 1 when this event just failed the
 * connection (report c->err / c->why to the core now), 0 otherwise
 * (including events ignored because the connection is already down).
 * An event that makes no sense in the current state (RTR before INIT, a
 * successful completion before RTS) fails the connection as an internal
 * or protocol error.
 */
int tnt__vb_conn_event(vb_conn_t *c, int ev, const char *detail);

/** 1 if sends may be posted. */
int tnt__vb_conn_ready(const vb_conn_t *c);

const char *tnt__vb_state_name(int state);

/**
 * The queue pair's retry budget for a heartbeat of `heartbeat_s` seconds
 * (0: off): a lost path must fail the connection within the heartbeat on
 * every provider. The ACK timeout `*timeout` (4.096 us * 2^t, given: the
 * user's or 14) is kept unless even one try would outlast the heartbeat;
 * the retry count is the most, at most 6, whose (retries + 1) timeouts fit.
 * 7 is never chosen: some providers (rxe) read it as "retry forever".
 * With the heartbeat off, 7 as before.
 */
void tnt__vb_retry_budget(double heartbeat_s, int *timeout, int *retry);

/**
 * The ACK timeout (4.096 us * 2^t) when TNT_IB_TIMEOUT is not set: the
 * longest, up to VB_TIMEOUT_MAX (18: 1.07 s, as UCX's RC timeout of 1 s),
 * with which 7 tries (6 retries) still fit in the heartbeat (every t for
 * a heartbeat of 0, off). 10 s gives 18: a queue pair gives up after
 * about 7.5 s without an acknowledgment, not after 0.47 s (the old 14,
 * 67 ms), which the soft-RoCE guest's loaded queue pairs exhausted while
 * their peers were alive (test_split at p = 5), and a late ACK costs one
 * resend fewer per 67 ms. 1..31.
 */
#define VB_TIMEOUT_MAX 18
int tnt__vb_default_timeout(double heartbeat_s);

/**
 * How long a close waits for its posted sends (the failure notice) to be
 * acknowledged: as long as the queue pair itself keeps trying, (retry +
 * 1) ACK timeouts of 4.096 us * 2^timeout, for within that time it either
 * gets the acknowledgment or fails the send; never less than `floor_s`,
 * and at most `cap_s` (a retry count of 7 is "forever" on rxe).
 * A shorter wait lost the notice under the soft-RoCE guest's resends:
 * the peer then saw the side channel close before the notice and
 * reported a lost rank instead of the cause (docs/verbs.md, Closing).
 */
double tnt__vb_close_drain_s(int timeout, int retry, double floor_s,
                             double cap_s);

#endif /* TNT_TRANSPORT_VERBS_VERBS_CONN_H */
