/*
 * Unit tests of the verbs transport's credit accounting: a simulated pair
 * of peers exchanging messages through bounded rings must never overrun a
 * ring, must never deadlock, and must reject credits a peer never had.
 */
#include <string.h>

#include "harness.h"
#include "transport/verbs/verbs_credit.h"

static void test_basic_take_and_return(void)
{
    vb_credit_t c;
    vb_credit_ret_t r;
    tnt__vb_credit_init(&c, 4, 2, 2);
    for (int i = 0; i < 4; i++)
        TH_CHECK(tnt__vb_credit_take(&c, 255, 3, &r) == 0 && r.data == 0,
                 "send %d refused with credits left", i);
    TH_CHECK(!tnt__vb_credit_can_send(&c), "credits not exhausted");
    TH_CHECK(tnt__vb_credit_take(&c, 255, 3, &r) == -1,
             "a fifth send into a ring of 4");
    TH_CHECK(tnt__vb_credit_returned(&c, 3, 0) == 0 && c.credits == 3,
             "returned credits not added");
    TH_CHECK(tnt__vb_credit_returned(&c, 2, 0) == -1 && c.credits == 3,
             "more credits returned than outstanding were accepted");
    TH_CHECK(tnt__vb_credit_returned(&c, 0, 1) == -1,
             "control credit returned that was never taken");
    TH_CHECK(tnt__vb_credit_returned(&c, UINT32_MAX, UINT32_MAX) == -1 &&
             c.credits == 3, "huge return wrapped around");
}

static void test_owed_piggyback_and_ctrl(void)
{
    vb_credit_t c;
    vb_credit_ret_t r;
    tnt__vb_credit_init(&c, 8, 2, 4);
    for (int i = 0; i < 3; i++)
        TH_CHECK(tnt__vb_credit_consumed(&c, 0) == 0, "consume %d", i);
    TH_CHECK(!tnt__vb_credit_need_ctrl(&c), "credit message below the "
             "threshold");
    TH_CHECK(tnt__vb_credit_consumed(&c, 0) == 0 &&
             tnt__vb_credit_need_ctrl(&c), "no credit message at the "
             "threshold");
    /* A data message returns what is owed, capped by the field width. */
    TH_CHECK(tnt__vb_credit_take(&c, 3, 3, &r) == 0 && r.data == 3 &&
             c.owed == 1, "piggy-back: got %u, owed %u", r.data, c.owed);
    TH_CHECK(tnt__vb_credit_take_ctrl(&c, 255, 3, &r) == 0 && r.data == 1 &&
             c.ctrl_credits == 1, "credit message did not return the rest");
    TH_CHECK(tnt__vb_credit_consumed(&c, 1) == 0 &&
             tnt__vb_credit_consumed(&c, 1) == 0 &&
             tnt__vb_credit_consumed(&c, 1) == -1,
             "a third credit message into 2 control buffers was accepted");
    for (int i = 0; i < 8; i++)
        tnt__vb_credit_consumed(&c, 0);
    TH_CHECK(tnt__vb_credit_consumed(&c, 0) == -1, "ring overrun accepted");
}

/* Two peers, rings of depth D, random traffic in both directions with
 * messages taking a random time to be consumed. Checks after each step
 * that no ring holds more than it has buffers, and at the end that every
 * message was delivered (no deadlock: the simulation always finds a move
 * while messages are left to send). */
typedef struct side {
    vb_credit_t c;
    int to_send;
    /* Messages in flight to this side: 1 data, 2 control; FIFO. */
    int q[256];
    vb_credit_ret_t qr[256];
    int qh, qn;
    int in_data, in_ctrl; /* occupied receive buffers */
} side_t;

static int deliver(side_t *from, side_t *to, int kind, vb_credit_ret_t r)
{
    (void)from;
    int i = (to->qh + to->qn++) % 256;
    to->q[i] = kind;
    to->qr[i] = r;
    if (kind == 1)
        to->in_data++;
    else
        to->in_ctrl++;
    return to->in_data <= (int)to->c.depth &&
           to->in_ctrl <= (int)to->c.ctrl_depth;
}

static void test_simulated_pair(void)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        th_rng_t rng = {seed};
        uint32_t depth = 1 + (uint32_t)th_rnd_below(&rng, 8);
        uint32_t thr = 1 + (uint32_t)th_rnd_below(&rng, depth);
        side_t s[2];
        memset(s, 0, sizeof(s));
        for (int k = 0; k < 2; k++) {
            tnt__vb_credit_init(&s[k].c, depth, 1, thr);
            s[k].to_send = (int)th_rnd_below(&rng, 300);
        }
        int ok = 1, steps = 0;
        while (ok && steps++ < 100000) {
            int moves = 0;
            int k = (int)th_rnd_below(&rng, 2);
            for (int t = 0; t < 2 && ok; t++, k ^= 1) {
                side_t *me = &s[k], *peer = &s[k ^ 1];
                vb_credit_ret_t r;
                /* Consume a received message (sometimes later). */
                if (me->qn && th_rnd_below(&rng, 3)) {
                    int kind = me->q[me->qh];
                    r = me->qr[me->qh];
                    me->qh = (me->qh + 1) % 256;
                    me->qn--;
                    if (kind == 1)
                        me->in_data--;
                    else
                        me->in_ctrl--;
                    ok = tnt__vb_credit_returned(&me->c, r.data, r.ctrl) ==
                             0 && tnt__vb_credit_consumed(&me->c, kind == 2)
                                      == 0;
                    moves++;
                }
                if (ok && me->to_send && tnt__vb_credit_take(
                        &me->c, 255, 3, &r) == 0) {
                    me->to_send--;
                    ok = deliver(me, peer, 1, r);
                    moves++;
                } else if (ok && tnt__vb_credit_need_ctrl(&me->c) &&
                           tnt__vb_credit_take_ctrl(&me->c, 255, 3, &r) ==
                               0) {
                    ok = deliver(me, peer, 2, r);
                    moves++;
                }
            }
            if (!moves && !s[0].qn && !s[1].qn)
                break;
        }
        TH_CHECK(ok, "seed %llu: ring overrun or bad credit return",
                 (unsigned long long)seed);
        TH_CHECK(s[0].to_send == 0 && s[1].to_send == 0,
                 "seed %llu (depth %u, threshold %u): deadlock with %d and "
                 "%d messages unsent", (unsigned long long)seed, depth, thr,
                 s[0].to_send, s[1].to_send);
    }
}

static const th_test_def_t k_tests[] = {
    {"verbs_credit", "take_and_return", test_basic_take_and_return},
    {"verbs_credit", "owed_piggyback_ctrl", test_owed_piggyback_and_ctrl},
    {"verbs_credit", "simulated_pair", test_simulated_pair},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
