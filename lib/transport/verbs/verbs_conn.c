/*
 * The verbs connection state machine (see verbs_conn.h).
 */
#include <stdio.h>
#include <string.h>

#include "transport/verbs/verbs_conn.h"

void tnt__vb_conn_init(vb_conn_t *c, int rank, int peer)
{
    memset(c, 0, sizeof(*c));
    c->rank = rank;
    c->peer = peer;
    c->state = VB_HANDSHAKE;
}

const char *tnt__vb_state_name(int state)
{
    static const char *const names[] = {"HANDSHAKE", "INIT", "RTR", "RTS",
                                        "ERROR", "CLOSED"};
    if (state < 0 || state > VB_CLOSED)
        return "?";
    return names[state];
}

int tnt__vb_conn_ready(const vb_conn_t *c)
{
    return c->state == VB_RTS;
}

static int fail(vb_conn_t *c, tnt_result_t err, const char *what,
                const char *detail)
{
    int st = c->state;
    c->state = VB_ERROR;
    c->err = err;
    snprintf(c->why, sizeof(c->why), "rank %d: verbs connection to rank %d "
             "(state %s): %s%s%s", c->rank, c->peer, tnt__vb_state_name(st),
             what, detail && *detail ? ": " : "", detail ? detail : "");
    return 1;
}

/* The text and result of each failure event. */
static int fail_event(vb_conn_t *c, int ev, const char *detail)
{
    switch (ev) {
    case VB_EV_WC_RETRY:
        return fail(c, TNT_ERR_PEER_LOST, "transport retries exceeded (peer "
                    "gone or fabric path down)", detail);
    case VB_EV_WC_RNR:
        return fail(c, TNT_ERR_PROTOCOL, "receiver-not-ready retries "
                    "exceeded (peer overran its credits)", detail);
    case VB_EV_WC_REMOTE:
        return fail(c, TNT_ERR_PROTOCOL, "remote access or operation error",
                    detail);
    case VB_EV_WC_OTHER:
        return fail(c, TNT_ERR_PEER_LOST, "work request failed", detail);
    case VB_EV_WC_FLUSH:
        return fail(c, TNT_ERR_PEER_LOST, "queue pair flushed", detail);
    case VB_EV_ASYNC_FATAL:
        return fail(c, TNT_ERR_PEER_LOST, "queue pair entered the error "
                    "state", detail);
    /* Local failures are this rank's, not the peer's: a system error,
     * worded so that nobody goes looking for a dead peer. */
    case VB_EV_LOCAL:
        return fail(c, TNT_ERR_SYSTEM, "local failure on this rank, the "
                    "peer may be fine", detail);
    case VB_EV_PORT_DOWN:
        return fail(c, TNT_ERR_SYSTEM, "this rank's own port went down, "
                    "the peer may be fine", detail);
    case VB_EV_DEVICE_FATAL:
        return fail(c, TNT_ERR_SYSTEM, "the RDMA device failed", detail);
    case VB_EV_SIDE_CLOSED:
        return fail(c, TNT_ERR_PEER_LOST, "peer closed the connection or "
                    "exited", detail);
    case VB_EV_PROTOCOL:
        return fail(c, TNT_ERR_PROTOCOL, "malformed message", detail);
    case VB_EV_SETUP:
        return fail(c, TNT_ERR_CONNECT, "cannot set up the queue pair",
                    detail);
    default:
        return fail(c, TNT_ERR_INTERNAL, "unknown event", detail);
    }
}

int tnt__vb_conn_event(vb_conn_t *c, int ev, const char *detail)
{
    if (c->state == VB_ERROR || c->state == VB_CLOSED) {
        if (ev == VB_EV_CLOSE)
            c->state = VB_CLOSED;
        return 0;
    }
    int next = -1;
    switch (ev) {
    case VB_EV_CLOSE:
        c->state = VB_CLOSED;
        return 0;
    case VB_EV_QP_INIT:
        next = c->state == VB_HANDSHAKE ? VB_INIT : -1;
        break;
    case VB_EV_QP_RTR:
        next = c->state == VB_INIT ? VB_RTR : -1;
        break;
    case VB_EV_QP_RTS:
        next = c->state == VB_RTR ? VB_RTS : -1;
        break;
    case VB_EV_WC_OK:
        /* Receives can complete once RTR is reached: the peer may be
         * ready and sending before this side finished its RTS step. */
        if (c->state == VB_RTR || c->state == VB_RTS)
            return 0;
        return fail(c, TNT_ERR_PROTOCOL, "completion before the queue pair "
                    "was ready", detail);
    default:
        return fail_event(c, ev, detail);
    }
    if (next < 0)
        return fail(c, TNT_ERR_INTERNAL, "queue pair transition out of "
                    "order", detail);
    c->state = next;
    return 0;
}

void tnt__vb_retry_budget(double heartbeat_s, int *timeout, int *retry)
{
    if (heartbeat_s <= 0) {
        *retry = 7;
        return;
    }
    while (*timeout > 1 && 4.096e-6 * (double)(1ull << *timeout) > heartbeat_s)
        (*timeout)--;
    double one = 4.096e-6 * (double)(1ull << *timeout);
    int r = 6;
    while (r > 0 && (double)(r + 1) * one > heartbeat_s)
        r--;
    *retry = r;
}

double tnt__vb_close_drain_s(int timeout, int retry, double floor_s,
                             double cap_s)
{
    if (timeout < 0)
        timeout = 0;
    if (timeout > 31)
        timeout = 31;
    double s = (double)(retry + 1) * 4.096e-6 * (double)(1ull << timeout);
    if (s < floor_s)
        s = floor_s;
    return s > cap_s ? cap_s : s;
}

int tnt__vb_default_timeout(double heartbeat_s)
{
    int t = VB_TIMEOUT_MAX;
    if (heartbeat_s <= 0)
        return t;
    while (t > 1 && 7.0 * 4.096e-6 * (double)(1ull << t) > heartbeat_s)
        t--;
    return t;
}
