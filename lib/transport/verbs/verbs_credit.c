/*
 * Credit accounting for the verbs transport (see verbs_credit.h for the
 * protocol and why it cannot deadlock).
 */
#include "transport/verbs/verbs_credit.h"

void tnt__vb_credit_init(vb_credit_t *c, uint32_t depth, uint32_t ctrl_depth,
                         uint32_t threshold)
{
    c->depth = depth ? depth : 1;
    c->ctrl_depth = ctrl_depth ? ctrl_depth : 1;
    if (threshold < 1)
        threshold = 1;
    c->threshold = threshold > c->depth ? c->depth : threshold;
    c->credits = c->depth;
    c->ctrl_credits = c->ctrl_depth;
    c->owed = 0;
    c->ctrl_owed = 0;
}

int tnt__vb_credit_can_send(const vb_credit_t *c)
{
    return c->credits > 0;
}

static void collect(vb_credit_t *c, uint32_t max_data, uint32_t max_ctrl,
                    vb_credit_ret_t *ret)
{
    ret->data = c->owed < max_data ? c->owed : max_data;
    ret->ctrl = c->ctrl_owed < max_ctrl ? c->ctrl_owed : max_ctrl;
    c->owed -= ret->data;
    c->ctrl_owed -= ret->ctrl;
}

int tnt__vb_credit_take(vb_credit_t *c, uint32_t max_data, uint32_t max_ctrl,
                        vb_credit_ret_t *ret)
{
    if (c->credits == 0)
        return -1;
    c->credits--;
    collect(c, max_data, max_ctrl, ret);
    return 0;
}

int tnt__vb_credit_need_ctrl(const vb_credit_t *c)
{
    return c->owed >= c->threshold && c->ctrl_credits > 0;
}

int tnt__vb_credit_take_ctrl(vb_credit_t *c, uint32_t max_data,
                             uint32_t max_ctrl, vb_credit_ret_t *ret)
{
    if (c->ctrl_credits == 0)
        return -1;
    c->ctrl_credits--;
    collect(c, max_data, max_ctrl, ret);
    return 0;
}

int tnt__vb_credit_returned(vb_credit_t *c, uint32_t data, uint32_t ctrl)
{
    /* Compare against what is outstanding, written so that no addition
     * of untrusted values can overflow. */
    if (data > c->depth - c->credits ||
        ctrl > c->ctrl_depth - c->ctrl_credits)
        return -1;
    c->credits += data;
    c->ctrl_credits += ctrl;
    return 0;
}

int tnt__vb_credit_consumed(vb_credit_t *c, int ctrl)
{
    /* The peer can have at most depth (ctrl_depth) messages unreturned;
     * one more means it ignored its credits and overran the ring. */
    if (ctrl) {
        if (c->ctrl_owed >= c->ctrl_depth)
            return -1;
        c->ctrl_owed++;
    } else {
        if (c->owed >= c->depth)
            return -1;
        c->owed++;
    }
    return 0;
}
