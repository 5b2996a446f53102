/*
 * Unit tests of the verbs connection state machine, driven by fake
 * queue pair transitions, completions and async events: the first
 * failure is reported once with a text naming the peer, later noise is
 * ignored, and out-of-order events are refused.
 */
#include <string.h>

#include "harness.h"
#include "transport/verbs/verbs_conn.h"

static void bring_up(vb_conn_t *c)
{
    tnt__vb_conn_init(c, 3, 7);
    TH_CHECK(tnt__vb_conn_event(c, VB_EV_QP_INIT, NULL) == 0 &&
             tnt__vb_conn_event(c, VB_EV_QP_RTR, NULL) == 0 &&
             !tnt__vb_conn_ready(c) &&
             tnt__vb_conn_event(c, VB_EV_WC_OK, NULL) == 0 &&
             tnt__vb_conn_event(c, VB_EV_QP_RTS, NULL) == 0 &&
             tnt__vb_conn_ready(c), "bring-up failed in state %s",
             tnt__vb_state_name(c->state));
}

static void test_bring_up_and_close(void)
{
    vb_conn_t c;
    bring_up(&c);
    TH_CHECK(tnt__vb_conn_event(&c, VB_EV_WC_OK, NULL) == 0 &&
             tnt__vb_conn_ready(&c), "completion in RTS changed the state");
    TH_CHECK(tnt__vb_conn_event(&c, VB_EV_CLOSE, NULL) == 0 &&
             c.state == VB_CLOSED && !tnt__vb_conn_ready(&c),
             "close did not close");
    TH_CHECK(tnt__vb_conn_event(&c, VB_EV_WC_RETRY, NULL) == 0 &&
             c.state == VB_CLOSED, "event after close reported a failure");
}

static void test_failures_name_the_peer(void)
{
    static const struct {
        int ev;
        tnt_result_t err;
        const char *text;
    } k[] = {
        {VB_EV_WC_RETRY, TNT_ERR_PEER_LOST, "retries exceeded"},
        {VB_EV_WC_RNR, TNT_ERR_PROTOCOL, "receiver-not-ready"},
        {VB_EV_WC_REMOTE, TNT_ERR_PROTOCOL, "remote access"},
        {VB_EV_ASYNC_FATAL, TNT_ERR_PEER_LOST, "error state"},
        {VB_EV_PORT_DOWN, TNT_ERR_SYSTEM, "own port went down"},
        {VB_EV_LOCAL, TNT_ERR_SYSTEM, "local failure on this rank"},
        {VB_EV_DEVICE_FATAL, TNT_ERR_SYSTEM, "device failed"},
        {VB_EV_SIDE_CLOSED, TNT_ERR_PEER_LOST, "exited"},
        {VB_EV_PROTOCOL, TNT_ERR_PROTOCOL, "malformed"},
        {VB_EV_SETUP, TNT_ERR_CONNECT, "set up the queue pair"},
    };
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        vb_conn_t c;
        bring_up(&c);
        int first = tnt__vb_conn_event(&c, k[i].ev, "detail-x");
        TH_CHECK(first == 1 && c.state == VB_ERROR && c.err == k[i].err,
                 "event %d: reported %d, state %s, err %d", k[i].ev, first,
                 tnt__vb_state_name(c.state), c.err);
        TH_CHECK(strstr(c.why, "rank 7") && strstr(c.why, "rank 3") &&
                 strstr(c.why, k[i].text) && strstr(c.why, "detail-x"),
                 "event %d: message '%s' lacks peer, cause or detail",
                 k[i].ev, c.why);
        /* The flush completions that follow an error are not reported
         * again, nor is a second failure. */
        char before[sizeof(c.why)];
        memcpy(before, c.why, sizeof(before));
        TH_CHECK(tnt__vb_conn_event(&c, VB_EV_WC_FLUSH, NULL) == 0 &&
                 tnt__vb_conn_event(&c, VB_EV_WC_RETRY, NULL) == 0 &&
                 tnt__vb_conn_event(&c, VB_EV_WC_OK, NULL) == 0 &&
                 strcmp(before, c.why) == 0 && c.err == k[i].err,
                 "event %d: noise after the failure was reported",
                 k[i].ev);
        tnt__vb_conn_event(&c, VB_EV_CLOSE, NULL);
        TH_CHECK(c.state == VB_CLOSED, "close after error");
    }
}

static void test_out_of_order(void)
{
    vb_conn_t c;
    tnt__vb_conn_init(&c, 0, 1);
    TH_CHECK(tnt__vb_conn_event(&c, VB_EV_QP_RTR, NULL) == 1 &&
             c.err == TNT_ERR_INTERNAL && strstr(c.why, "HANDSHAKE"),
             "RTR before INIT accepted: %s", c.why);
    tnt__vb_conn_init(&c, 0, 1);
    tnt__vb_conn_event(&c, VB_EV_QP_INIT, NULL);
    TH_CHECK(tnt__vb_conn_event(&c, VB_EV_WC_OK, NULL) == 1 &&
             c.err == TNT_ERR_PROTOCOL, "completion in INIT accepted");
    tnt__vb_conn_init(&c, 0, 1);
    TH_CHECK(tnt__vb_conn_event(&c, VB_EV_SIDE_CLOSED, "eof") == 1 &&
             strstr(c.why, "HANDSHAKE"), "failure during the handshake "
             "does not say so: %s", c.why);
    bring_up(&c);
    TH_CHECK(tnt__vb_conn_event(&c, VB_EV_QP_INIT, NULL) == 1,
             "INIT in RTS accepted");
    TH_CHECK(tnt__vb_conn_event(&c, 999, NULL) == 0 && c.state == VB_ERROR,
             "unknown event after an error");
    tnt__vb_conn_init(&c, 0, 1);
    TH_CHECK(tnt__vb_conn_event(&c, 999, NULL) == 1 &&
             c.err == TNT_ERR_INTERNAL, "unknown event accepted");
}

/* The retry budget fits the heartbeat and is never 7 (infinite on rxe). */
static void test_retry_budget(void)
{
    static const double hbs[] = {10, 1, 0.3, 0.05, 0.001, 100};
    for (size_t i = 0; i < sizeof(hbs) / sizeof(hbs[0]); i++) {
        int t = 14, r = -1;
        tnt__vb_retry_budget(hbs[i], &t, &r);
        double total = (r + 1) * 4.096e-6 * (double)(1ull << t);
        TH_CHECK(r >= 0 && r <= 6 && t >= 1 && t <= 14 &&
                 (total <= hbs[i] || (t == 1 && r == 0)),
                 "heartbeat %g s: timeout %d retry %d (%.3f s)", hbs[i], t,
                 r, total);
    }
    int t = 14, r = -1;
    tnt__vb_retry_budget(10, &t, &r);
    TH_CHECK(t == 14 && r == 6, "10 s: timeout %d retry %d", t, r);
    tnt__vb_retry_budget(0, &t, &r);
    TH_CHECK(r == 7, "heartbeat off: retry %d", r);
}

/* Without TNT_IB_TIMEOUT: the longest ACK timeout up to 18 (1.07 s)
 * with which 7 tries fit in the heartbeat, and then the budget keeps
 * all 6 retries. */
static void test_default_timeout(void)
{
    static const double hbs[] = {10, 100, 1, 0.3, 0.001};
    static const int want[] = {18, 18, 15, 13, 5};
    for (size_t i = 0; i < sizeof(hbs) / sizeof(hbs[0]); i++) {
        int t = tnt__vb_default_timeout(hbs[i]), r = -1;
        tnt__vb_retry_budget(hbs[i], &t, &r);
        double total = (r + 1) * 4.096e-6 * (double)(1ull << t);
        TH_CHECK(t == want[i] && r == 6 && total <= hbs[i],
                 "heartbeat %g s: timeout %d (want %d) retry %d (%.3f s)",
                 hbs[i], t, want[i], r, total);
    }
    TH_CHECK(tnt__vb_default_timeout(0) == 18 &&
             tnt__vb_default_timeout(1e-9) == 1, "heartbeat off or tiny");
}

/* A close waits as long as the queue pair keeps resending: 7 ACK
 * timeouts of 67 ms by default (0.47 s, not the 0.25 s that lost the
 * notice in the guest), the floor below that, the cap for "forever". */
static void test_close_drain(void)
{
    double s = tnt__vb_close_drain_s(14, 6, 0.25, 2.0);
    TH_CHECK(s > 0.46 && s < 0.48, "defaults: %.3f s", s);
    s = tnt__vb_close_drain_s(10, 2, 0.25, 2.0);
    TH_CHECK(s == 0.25, "short budget: %.3f s, not the floor", s);
    s = tnt__vb_close_drain_s(20, 7, 0.25, 2.0);
    TH_CHECK(s == 2.0, "long budget: %.3f s, not the cap", s);
    s = tnt__vb_close_drain_s(99, 7, 0.25, 2.0);
    TH_CHECK(s == 2.0, "timeout out of range: %.3f s", s);
}

static const th_test_def_t k_tests[] = {
    {"verbs_conn", "bring_up_and_close", test_bring_up_and_close},
    {"verbs_conn", "failures_name_the_peer", test_failures_name_the_peer},
    {"verbs_conn", "out_of_order", test_out_of_order},
    {"verbs_conn", "retry_budget", test_retry_budget},
    {"verbs_conn", "close_drain", test_close_drain},
    {"verbs_conn", "default_timeout", test_default_timeout},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
