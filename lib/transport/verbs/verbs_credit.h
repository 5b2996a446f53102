/*
 * Credit-based flow control for the verbs transport's small messages.
 * Every SEND consumes one receive buffer of the peer's ring; a sender may
 * only post as many as the peer has posted, so it holds one credit per
 * free buffer there and gets them back when the peer reposts them.
 *
 * Credits come back piggy-backed on every message going the other way.
 * When a side owes many credits and has nothing to send, it sends an
 * explicit credit message. Those travel into a few extra receive buffers
 * reserved for them (control credits, returned piggy-backed the same
 * way), so a credit message never needs the data credits it returns.
 * No credit message is ever sent only to return control credits, so two
 * idle peers never bounce credit messages back and forth; a control
 * credit is always returned by the first message after it arrived, and a
 * peer can only run out of data credits after sending such a message.
 *
 * Pure bookkeeping, no verbs calls: tests drive it directly. Returned
 * counts come from the wire and are checked: a peer returning more than
 * was ever taken is a protocol error, never a wrap-around.
 */
#ifndef TNT_TRANSPORT_VERBS_VERBS_CREDIT_H
#define TNT_TRANSPORT_VERBS_VERBS_CREDIT_H

#include <stdint.h>

typedef struct vb_credit {
    uint32_t depth;        /* data buffers in each side's receive ring */
    uint32_t ctrl_depth;   /* extra buffers for credit messages */
    uint32_t threshold;    /* owed credits that justify a credit message */
    uint32_t credits;      /* data sends this side may post now */
    uint32_t ctrl_credits; /* credit messages this side may post now */
    uint32_t owed;         /* data buffers reposted, not returned yet */
    uint32_t ctrl_owed;    /* control buffers reposted, not returned yet */
} vb_credit_t;

/** What a message returns to the peer (filled by the take functions). */
typedef struct vb_credit_ret {
    uint32_t data;
    uint32_t ctrl;
} vb_credit_ret_t;

/** depth >= 1, ctrl_depth >= 1; threshold is clamped to [1, depth]. */
void tnt__vb_credit_init(vb_credit_t *c, uint32_t depth, uint32_t ctrl_depth,
                         uint32_t threshold);

/** 1 if a data message may be posted now. */
int tnt__vb_credit_can_send(const vb_credit_t *c);

/** Take a data credit for one message and collect what it returns, at
 *  most max_data / max_ctrl (the width of the wire fields; the rest stays
 *  owed). Returns 0, or -1 when no credit is left (nothing changes). */
int tnt__vb_credit_take(vb_credit_t *c, uint32_t max_data, uint32_t max_ctrl,
                        vb_credit_ret_t *ret);

/** 1 if an explicit credit message should go now: enough data credits
 *  are owed and a control credit is available. */
int tnt__vb_credit_need_ctrl(const vb_credit_t *c);

/** Take a control credit for a credit message; 0, or -1 if none. */
int tnt__vb_credit_take_ctrl(vb_credit_t *c, uint32_t max_data,
                             uint32_t max_ctrl, vb_credit_ret_t *ret);

/** Account for credits a received message returns. 0, or -1 if the peer
 *  returned more than this side has outstanding (nothing changes). */
int tnt__vb_credit_returned(vb_credit_t *c, uint32_t data, uint32_t ctrl);

/** A received message's buffer was consumed and reposted: one more credit
 *  owed (ctrl: it was a credit message). 0, or -1 when the peer sent more
 *  messages than it had credits for. */
int tnt__vb_credit_consumed(vb_credit_t *c, int ctrl);

#endif /* TNT_TRANSPORT_VERBS_VERBS_CREDIT_H */
