/*
 * The verbs data path. A message whose header and payload fit in a bounce
 * buffer (TNT_IB_EAGER_BYTES with the transport's own header) is copied into
 * a registered send buffer and sent with SEND into one of the peer's
 * pre-posted receive buffers; credits (verbs_credit.h) make sure one is
 * there. A larger message goes by rendezvous, zero-copy: the sender SENDs
 * an RTS with the core's header; the receiver asks the core where the
 * payload goes, registers that memory (through the registration cache)
 * and answers with a CTS naming address and key; the sender RDMA WRITEs
 * the payload from its registered buffer in segments of up to 1 GiB, the
 * last one with an immediate (FIN) that tells the receiver the payload
 * has landed. The NIC pipelines the segments; nothing is staged.
 *
 * Completions are read in the completion channel's fd callback: get the
 * event, acknowledge it, re-arm the queue, then poll it empty (re-arming
 * before polling means no completion can slip between the two). When
 * nothing happens the progress thread sleeps in epoll on that fd.
 *
 * Everything received is checked before use (verbs_wire.c), and after
 * every upcall the endpoint may have been closed by the core, so each
 * caller checks ep->closed before touching it again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/error.h"
#include "transport/verbs/verbs_internal.h"

static unsigned char *recv_buf(vb_ep_t *ep, uint32_t i)
{
    return ep->slab + (size_t)i * ep->ctx->bounce;
}

static unsigned char *send_buf(vb_ep_t *ep, uint32_t i)
{
    return ep->slab + (size_t)(ep->nrecv + i) * ep->ctx->bounce;
}

static struct ibv_mr *region_mr(vb_region_t *r)
{
    return r->handle;
}

/* ---- buffers and tokens -------------------------------------------- */

tnt_result_t tnt__vb_ep_setup_buffers(vb_ep_t *ep)
{
    vb_ctx_t *ctx = ep->ctx;
    ep->nrecv = ctx->depth + VB_CTRL_DEPTH;
    ep->nsend = ctx->depth + VB_CTRL_DEPTH;
    /* Sends use one queue entry each; a few more for RDMA WRITEs. */
    ep->sq_depth = ep->nsend + 32;
    size_t bytes = (size_t)(ep->nrecv + ep->nsend) * ctx->bounce;
    ep->slab = aligned_alloc(4096, bytes);
    ep->free_send = calloc(ep->nsend, sizeof(*ep->free_send));
    if (!ep->slab || !ep->free_send)
        return tnt__error(TNT_ERR_NO_MEMORY, "verbs: out of memory for "
                          "bounce buffers");
    ep->slab_mr = ibv_reg_mr(ctx->pd, ep->slab, bytes,
                             IBV_ACCESS_LOCAL_WRITE);
    if (!ep->slab_mr)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: cannot register %zu bytes "
                          "of bounce buffers: %s (is the locked-memory "
                          "limit, ulimit -l, large enough?)", bytes,
                          strerror(errno));
    for (uint32_t i = 0; i < ep->nsend; i++)
        ep->free_send[i] = ep->nsend - 1 - i;
    ep->nfree_send = ep->nsend;
    tnt__vb_credit_init(&ep->cr, ctx->depth, VB_CTRL_DEPTH, ctx->depth / 2);
    return TNT_SUCCESS;
}

/* A free index in a token table of n entries (grown as needed, up to
 * VB_MAX_TOKENS); -1 when full or out of memory. */
static long token_alloc(void **table, uint32_t *n, size_t elem,
                        int (*used)(const void *))
{
    for (uint32_t i = 0; i < *n; i++)
        if (!used((const char *)*table + (size_t)i * elem))
            return i;
    uint32_t nn = *n ? *n * 2 : 16;
    if (nn > VB_MAX_TOKENS)
        nn = VB_MAX_TOKENS;
    if (nn <= *n)
        return -1;
    void *t = realloc(*table, (size_t)nn * elem);
    if (!t)
        return -1;
    memset((char *)t + (size_t)*n * elem, 0, (size_t)(nn - *n) * elem);
    *table = t;
    long first = *n;
    *n = nn;
    return first;
}

static int stok_used(const void *p)
{
    return *(vb_op_t *const *)p != NULL;
}

static int rtok_used(const void *p)
{
    return ((const vb_rslot_t *)p)->used;
}

static vb_op_t *op_get(vb_ctx_t *ctx)
{
    vb_op_t *op = ctx->free_ops;
    if (op) {
        ctx->free_ops = op->next;
        memset(op, 0, sizeof(*op));
        return op;
    }
    return calloc(1, sizeof(*op));
}

static void op_put(vb_ctx_t *ctx, vb_op_t *op)
{
    op->next = ctx->free_ops;
    ctx->free_ops = op;
}

static void enqueue(vb_ep_t *ep, vb_op_t *op)
{
    op->next = NULL;
    if (ep->q_tail)
        ep->q_tail->next = op;
    else
        ep->q_head = op;
    ep->q_tail = op;
}

/* Drop every op and registration the endpoint holds (it is closing; no
 * upcall follows for any of them). */
void tnt__vb_ep_release_ops(vb_ep_t *ep)
{
    vb_ctx_t *ctx = ep->ctx;
    while (ep->q_head) {
        vb_op_t *op = ep->q_head;
        ep->q_head = op->next;
        /* Ops with a token are freed through the token table below. */
        if (op->type == VB_OP_EAGER || op->type == VB_OP_CTS)
            op_put(ctx, op);
    }
    ep->q_tail = NULL;
    for (uint32_t i = 0; i < ep->nstok; i++)
        if (ep->stok[i]) {
            tnt__vb_rcache_put(&ctx->rcache, ep->stok[i]->reg);
            op_put(ctx, ep->stok[i]);
            ep->stok[i] = NULL;
        }
    for (uint32_t i = 0; i < ep->nrtok; i++)
        if (ep->rtok[i].used) {
            tnt__vb_rcache_put(&ctx->rcache, ep->rtok[i].reg);
            ep->rtok[i].used = 0;
        }
}

/* ---- posting ------------------------------------------------------- */

tnt_result_t tnt__vb_post_recv(vb_ep_t *ep, uint32_t slot)
{
    struct ibv_sge sge = {(uintptr_t)recv_buf(ep, slot),
                          (uint32_t)ep->ctx->bounce,
                          ep->slab_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = VB_WR_ID(VB_WR_RECV, slot),
                             .sg_list = &sge, .num_sge = 1}, *bad;
    int e = ibv_post_recv(ep->qp, &wr, &bad);
    if (e)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: ibv_post_recv: %s",
                          strerror(e));
    return TNT_SUCCESS;
}

static int can_post_send(const vb_ep_t *ep)
{
    return ep->nfree_send > 0 && ep->sq_used < ep->sq_depth;
}

/* SEND `len` bytes of send buffer `slot`; 0, or -1 with the endpoint
 * failed. */
static int post_send(vb_ep_t *ep, uint32_t slot, size_t len)
{
    struct ibv_sge sge = {(uintptr_t)send_buf(ep, slot), (uint32_t)len,
                          ep->slab_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = VB_WR_ID(VB_WR_SEND, slot),
                             .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    int e = ibv_post_send(ep->qp, &wr, &bad);
    if (e) {
        ep->free_send[ep->nfree_send++] = slot;
        tnt__vb_fail(ep, VB_EV_LOCAL, strerror(e));
        return -1;
    }
    ep->sq_used++;
    return 0;
}

/* Fill a send buffer with a message header (credits taken by the caller)
 * and `body` parts; returns the buffer index. */
static uint32_t fill_send(vb_ep_t *ep, vb_msg_t *m, const vb_credit_ret_t *r,
                          const void *a, size_t alen, const void *b,
                          size_t blen)
{
    uint32_t slot = ep->free_send[--ep->nfree_send];
    unsigned char *p = send_buf(ep, slot);
    m->data_ret = (uint16_t)r->data;
    m->ctrl_ret = (uint8_t)r->ctrl;
    tnt__vb_msg_encode(m, p);
    if (alen)
        memcpy(p + VB_MSG_HDR_LEN, a, alen);
    if (blen)
        memcpy(p + VB_MSG_HDR_LEN + alen, b, blen);
    return slot;
}

/* Post the next RDMA WRITE segments of op. 1: all posted; 0: must wait
 * for queue room or a credit; -1: the endpoint failed. */
static int post_writes(vb_ep_t *ep, vb_op_t *op)
{
    while (op->off < op->len) {
        size_t seg = op->len - op->off;
        if (seg > ep->ctx->seg_max)
            seg = ep->ctx->seg_max;
        int last = op->off + seg == op->len;
        if (ep->sq_used >= ep->sq_depth)
            return 0;
        struct ibv_send_wr wr = {.wr_id = VB_WR_ID(VB_WR_WRITE, op->token),
                                 .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_WRITE,
                                 .send_flags = IBV_SEND_SIGNALED}, *bad;
        if (last) {
            /* The FIN immediate lands in a receive buffer: a credit. */
            vb_credit_ret_t r;
            if (tnt__vb_credit_take(&ep->cr, VB_IMM_DATA_RET_MAX,
                                    VB_IMM_CTRL_RET_MAX, &r) != 0)
                return 0;
            vb_imm_t imm = {VB_K_FIN, (uint8_t)r.data, (uint8_t)r.ctrl,
                            op->rtoken};
            wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr.imm_data = htonl(tnt__vb_imm_encode(&imm));
        }
        struct ibv_sge sge = {(uintptr_t)op->payload + op->off,
                              (uint32_t)seg, region_mr(op->reg)->lkey};
        wr.sg_list = &sge;
        wr.wr.rdma.remote_addr = op->raddr + op->off;
        wr.wr.rdma.rkey = op->rkey;
        int e = ibv_post_send(ep->qp, &wr, &bad);
        if (e) {
            tnt__vb_fail(ep, VB_EV_LOCAL, strerror(e));
            return -1;
        }
        ep->sq_used++;
        op->wrs_out++;
        op->off += seg;
    }
    return 1;
}

/* Try to put op on the wire. 1: done with the queue (it may still wait
 * for completions or a CTS), 0: must wait, -1: the endpoint failed. */
static int op_start(vb_ep_t *ep, vb_op_t *op)
{
    vb_ctx_t *ctx = ep->ctx;
    if (op->type == VB_OP_WRITE)
        return post_writes(ep, op);
    vb_credit_ret_t r;
    if (!can_post_send(ep) ||
        tnt__vb_credit_take(&ep->cr, VB_HDR_DATA_RET_MAX,
                            VB_HDR_CTRL_RET_MAX, &r) != 0)
        return 0;
    vb_msg_t m = {0};
    uint32_t slot;
    size_t len = VB_MSG_HDR_LEN;
    switch (op->type) {
    case VB_OP_EAGER:
        m.kind = VB_K_EAGER;
        m.core_hdr_len = (uint32_t)op->hdr_len;
        m.len = op->len;
        slot = fill_send(ep, &m, &r, op->hdr, op->hdr_len, op->payload,
                         op->len);
        len += op->hdr_len + op->len;
        break;
    case VB_OP_RTS:
        m.kind = VB_K_RTS;
        m.core_hdr_len = (uint32_t)op->hdr_len;
        m.len = op->len;
        m.token = op->token;
        slot = fill_send(ep, &m, &r, op->hdr, op->hdr_len, NULL, 0);
        len += op->hdr_len;
        break;
    default: /* VB_OP_CTS */
        m.kind = VB_K_CTS;
        m.token = op->peer_token;
        m.rtoken = op->rtoken;
        m.raddr = op->raddr;
        m.rkey = op->rkey;
        slot = fill_send(ep, &m, &r, NULL, 0, NULL, 0);
        break;
    }
    if (post_send(ep, slot, len) != 0) {
        /* Ops with a token are freed with the endpoint's token table. */
        if (op->type == VB_OP_EAGER || op->type == VB_OP_CTS)
            op_put(ctx, op);
        return -1;
    }
    if (op->type == VB_OP_EAGER) {
        /* The data is copied: the core's buffers are free again. */
        void *cookie = op->cookie;
        int notify = op->notify;
        op_put(ctx, op);
        if (notify)
            ctx->env.on_send_done(ctx->env.core, cookie);
    } else if (op->type == VB_OP_CTS) {
        op_put(ctx, op);
    }
    return 1;
}

/* Start queued ops in order, then return credits explicitly if many are
 * owed. Called from callbacks only (it may call on_send_done). */
static void progress_queue(vb_ep_t *ep)
{
    while (ep->q_head && !ep->closed) {
        /* Off the queue before it starts: starting may call the core,
         * which may queue more sends behind it. */
        vb_op_t *op = ep->q_head;
        ep->q_head = op->next;
        if (!ep->q_head)
            ep->q_tail = NULL;
        int r = op_start(ep, op);
        if (r < 0)
            return;
        if (r == 0) {
            op->next = ep->q_head;
            ep->q_head = op;
            if (!ep->q_tail)
                ep->q_tail = op;
            break;
        }
    }
    if (ep->closed || !tnt__vb_credit_need_ctrl(&ep->cr) ||
        !can_post_send(ep))
        return;
    vb_credit_ret_t r;
    tnt__vb_credit_take_ctrl(&ep->cr, VB_HDR_DATA_RET_MAX,
                             VB_HDR_CTRL_RET_MAX, &r);
    vb_msg_t m = {.kind = VB_K_CREDIT};
    post_send(ep, fill_send(ep, &m, &r, NULL, 0, NULL, 0), VB_MSG_HDR_LEN);
}

static tnt_result_t send_op(vb_ep_t *ep, vb_op_t *op);

tnt_result_t tnt__vb_send(void *vctx, void *vep, const void *hdr,
                          size_t hdr_len, const void *payload, size_t len,
                          void *cookie)
{
    vb_ctx_t *ctx = vctx;
    vb_ep_t *ep = vep;
    if (!ep || ep->closed || !tnt__vb_conn_ready(&ep->conn))
        return tnt__error(TNT_ERR_PEER_LOST, "verbs: send to rank %d on a "
                          "connection that is not ready",
                          ep ? ep->peer : -1);
    if (hdr_len == 0 || hdr_len > VB_CORE_HDR_MAX || (len && !payload))
        return tnt__error(TNT_ERR_INVALID_ARG, "verbs: header of %zu bytes",
                          hdr_len);
    vb_op_t *op = op_get(ctx);
    if (!op)
        return tnt__error(TNT_ERR_NO_MEMORY, "verbs: out of memory");
    *op = (vb_op_t){.hdr = hdr, .hdr_len = hdr_len, .payload = payload,
                    .len = len, .cookie = cookie};
    /* Failures found now are returned, not reported by upcall. */
    ctx->in_downcall = 1;
    tnt_result_t rc = send_op(ep, op);
    ctx->in_downcall = 0;
    return rc;
}

static tnt_result_t send_op(vb_ep_t *ep, vb_op_t *op)
{
    vb_ctx_t *ctx = ep->ctx;
    if (VB_MSG_HDR_LEN + op->hdr_len + op->len <= ctx->bounce) {
        op->type = VB_OP_EAGER;
        if (!ep->q_head) {
            /* Fast path: copied and posted now, nothing follows. */
            int r = op_start(ep, op);
            if (r > 0)
                return TNT_SUCCESS;
            if (r < 0)
                return tnt__error_str(TNT_ERR_PEER_LOST, ep->conn.why);
        }
        op->notify = 1;
        enqueue(ep, op);
        return TNT_INPROGRESS;
    }
    long t = token_alloc((void **)&ep->stok, &ep->nstok, sizeof(*ep->stok),
                         stok_used);
    if (t < 0) {
        op_put(ctx, op);
        return tnt__error(TNT_ERR_NO_MEMORY, "verbs: too many large sends "
                          "in flight to rank %d", ep->peer);
    }
    op->type = VB_OP_RTS;
    op->notify = 1;
    op->token = (uint32_t)t;
    ep->stok[t] = op;
    if (!ep->q_head) {
        int r = op_start(ep, op);
        if (r > 0)
            return TNT_INPROGRESS;
        if (r < 0)
            return tnt__error_str(TNT_ERR_PEER_LOST, ep->conn.why);
    }
    enqueue(ep, op);
    return TNT_INPROGRESS;
}

/* ---- receiving ----------------------------------------------------- */

static int protocol_error(vb_ep_t *ep, const char *what)
{
    tnt__vb_fail(ep, VB_EV_PROTOCOL, what);
    return -1;
}

/* Credits the message returns, and the buffer it used goes back to the
 * ring. 0, or -1 with the endpoint failed. */
static int account(vb_ep_t *ep, uint32_t slot, uint32_t data_ret,
                   uint32_t ctrl_ret, int ctrl)
{
    if (tnt__vb_credit_returned(&ep->cr, data_ret, ctrl_ret) != 0)
        return protocol_error(ep, "peer returned credits it never had");
    if (tnt__vb_post_recv(ep, slot) != TNT_SUCCESS) {
        tnt__vb_fail(ep, VB_EV_LOCAL, tnt_last_error());
        return -1;
    }
    if (tnt__vb_credit_consumed(&ep->cr, ctrl) != 0)
        return protocol_error(ep, "peer sent more messages than it had "
                              "credits for");
    return 0;
}

static void recv_fin(vb_ep_t *ep, uint32_t slot, uint32_t raw)
{
    vb_ctx_t *ctx = ep->ctx;
    vb_imm_t imm;
    const char *why = tnt__vb_imm_decode(raw, &imm);
    if (why) {
        protocol_error(ep, why);
        return;
    }
    if (imm.token >= ep->nrtok || !ep->rtok[imm.token].used) {
        protocol_error(ep, "FIN for a receive that is not waiting");
        return;
    }
    if (account(ep, slot, imm.data_ret, imm.ctrl_ret, 0) != 0)
        return;
    vb_rslot_t *s = &ep->rtok[imm.token];
    s->used = 0;
    tnt__vb_rcache_put(&ctx->rcache, s->reg);
    ctx->env.on_payload(ctx->env.core, ep->peer, s->cookie);
}

static void recv_rts(vb_ep_t *ep, const vb_msg_t *m, const unsigned char *b)
{
    vb_ctx_t *ctx = ep->ctx;
    void *dest = NULL, *cookie = NULL;
    tnt_result_t rc = ctx->env.on_header(ctx->env.core, ep->peer, b,
                                         m->core_hdr_len, (size_t)m->len,
                                         &dest, &cookie);
    if (ep->closed)
        return;
    if (rc < 0) {
        protocol_error(ep, tnt_last_error());
        return;
    }
    if (!dest) {
        protocol_error(ep, "no destination for a large payload");
        return;
    }
    long t = token_alloc((void **)&ep->rtok, &ep->nrtok, sizeof(*ep->rtok),
                         rtok_used);
    vb_op_t *op = t >= 0 ? op_get(ctx) : NULL;
    vb_region_t *reg = op ? tnt__vb_rcache_get(&ctx->rcache, dest,
                                               (size_t)m->len) : NULL;
    if (!reg) {
        if (op)
            op_put(ctx, op);
        tnt__vb_fail(ep, VB_EV_LOCAL, "cannot register the receive "
                     "buffer (out of memory or locked-memory limit)");
        return;
    }
    ep->rtok[t] = (vb_rslot_t){cookie, reg, 1};
    op->type = VB_OP_CTS;
    op->peer_token = m->token;
    op->rtoken = (uint32_t)t;
    op->raddr = (uintptr_t)dest;
    op->rkey = region_mr(reg)->rkey;
    enqueue(ep, op);
}

static void recv_cts(vb_ep_t *ep, const vb_msg_t *m)
{
    vb_ctx_t *ctx = ep->ctx;
    vb_op_t *op = m->token < ep->nstok ? ep->stok[m->token] : NULL;
    if (!op || op->type != VB_OP_RTS || op->reg) {
        protocol_error(ep, "CTS for a send that is not waiting for one");
        return;
    }
    op->reg = tnt__vb_rcache_get(&ctx->rcache, op->payload, op->len);
    if (!op->reg) {
        tnt__vb_fail(ep, VB_EV_LOCAL, "cannot register the send buffer "
                     "(out of memory or locked-memory limit)");
        return;
    }
    op->type = VB_OP_WRITE;
    op->raddr = m->raddr;
    op->rkey = m->rkey;
    op->rtoken = m->rtoken;
    op->off = 0;
    enqueue(ep, op);
}

static void recv_msg(vb_ep_t *ep, uint32_t slot, size_t byte_len)
{
    vb_ctx_t *ctx = ep->ctx;
    const unsigned char *b = recv_buf(ep, slot);
    vb_msg_t m;
    const char *why = byte_len > ctx->bounce ? "message larger than a buffer"
                                           : tnt__vb_msg_decode(b, byte_len,
                                                                &m);
    if (why) {
        protocol_error(ep, why);
        return;
    }
    b += VB_MSG_HDR_LEN;
    if (m.kind == VB_K_EAGER) {
        void *dest = NULL, *cookie = NULL;
        tnt_result_t rc = ctx->env.on_header(ctx->env.core, ep->peer, b,
                                             m.core_hdr_len, (size_t)m.len,
                                             &dest, &cookie);
        if (ep->closed)
            return;
        if (rc < 0) {
            protocol_error(ep, tnt_last_error());
            return;
        }
        if (m.len && !dest) {
            protocol_error(ep, "no destination for a payload");
            return;
        }
        if (m.len)
            memcpy(dest, b + m.core_hdr_len, (size_t)m.len);
        if (account(ep, slot, m.data_ret, m.ctrl_ret, 0) != 0)
            return;
        ctx->env.on_payload(ctx->env.core, ep->peer, cookie);
        return;
    }
    if (m.kind == VB_K_RTS) {
        /* The core's header is read before the buffer is reposted. */
        recv_rts(ep, &m, b);
        if (!ep->closed && ep->conn.state != VB_ERROR)
            account(ep, slot, m.data_ret, m.ctrl_ret, 0);
        return;
    }
    if (account(ep, slot, m.data_ret, m.ctrl_ret, m.kind == VB_K_CREDIT) != 0)
        return;
    if (m.kind == VB_K_CTS)
        recv_cts(ep, &m);
}

static void write_done(vb_ep_t *ep, uint32_t token)
{
    vb_ctx_t *ctx = ep->ctx;
    vb_op_t *op = token < ep->nstok ? ep->stok[token] : NULL;
    if (!op || op->wrs_out == 0) {
        tnt__vb_fail(ep, VB_EV_WC_OTHER, "completion of an unknown write");
        return;
    }
    if (--op->wrs_out > 0 || op->off < op->len)
        return;
    ep->stok[token] = NULL;
    tnt__vb_rcache_put(&ctx->rcache, op->reg);
    void *cookie = op->cookie;
    op_put(ctx, op);
    ctx->env.on_send_done(ctx->env.core, cookie);
}

static int wc_event(enum ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
        return VB_EV_WC_RETRY;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return VB_EV_WC_RNR;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
        return VB_EV_WC_REMOTE;
    case IBV_WC_WR_FLUSH_ERR:
        return VB_EV_WC_FLUSH;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_MW_BIND_ERR:
        return VB_EV_LOCAL;
    default:
        return VB_EV_WC_OTHER;
    }
}

/* A remote error (access, operation, invalid request) is what an RDMA
 * operation gets when the peer's memory or queue pair went away under it:
 * a peer that exited tears both down as it closes its side channel. So
 * wait a moment for the side channel's end (VB_REMOTE_GRACE_MS): if it
 * closes, the peer is gone (a lost peer, as every other transport says);
 * if not, the peer is alive and rejected the request (a protocol error). */
#define VB_REMOTE_GRACE_MS 200

static int side_channel_closed(vb_ep_t *ep)
{
    if (ep->fd < 0)
        return 1;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        char b;
        ssize_t n = recv(ep->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                       errno != EINTR))
            return 1;
        if (n > 0) /* a record waits first: the peer was alive to send it */
            return 0;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long ms = (t.tv_sec - t0.tv_sec) * 1000L +
                  (t.tv_nsec - t0.tv_nsec) / 1000000L;
        if (ms >= VB_REMOTE_GRACE_MS)
            return 0;
        struct pollfd pfd = {.fd = ep->fd, .events = POLLIN | POLLRDHUP};
        poll(&pfd, 1, (int)(VB_REMOTE_GRACE_MS - ms));
    }
}

static const char *qp_state_name(struct ibv_qp *qp)
{
    static const char *const names[] = {"RESET", "INIT", "RTR", "RTS",
                                        "SQD", "SQE", "ERR"};
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0 ||
        (unsigned)a.qp_state >= sizeof(names) / sizeof(names[0]))
        return "?";
    return names[a.qp_state];
}

/* A failing completion in words, for the error text and the DEBUG log:
 * its status, which work request it ends, the provider's vendor error. */
static void wc_text(const struct ibv_wc *wc, char *out, size_t n)
{
    static const char *const kinds[] = {"?", "receive", "send", "write"};
    uint32_t kind = (uint32_t)(wc->wr_id >> 56);
    snprintf(out, n, "%s (%s, vendor error %#x)",
             ibv_wc_status_str(wc->status), kind < 4 ? kinds[kind] : "?",
             wc->vendor_err);
}

/* A flush is a consequence, never a cause: the queue pair was moved to
 * the error state first. The cause may be an error completion that the
 * provider queues behind the flushes of the other work queue (send and
 * receive completions share the completion queue, unordered between the
 * two queues), or an async event. Look for both, for at most
 * VB_FLUSH_CAUSE_MS; the completions read meanwhile are dropped (the
 * endpoint fails either way, and after an error state only flushes and
 * that error can come). 1 and *cause set when found. When neither comes,
 * the queue pair failed on a request it received (an RDMA WRITE to a
 * key or range it does not have, a length or sequence error): such a
 * failure ends no work request of this side's, so only the peer gets an
 * error completion, and the report says so. */
#define VB_FLUSH_CAUSE_MS 50

static int flush_cause(vb_ep_t *ep, const struct ibv_wc *rest, int nrest,
                       struct ibv_wc *cause)
{
    for (int i = 0; i < nrest; i++)
        if (rest[i].status != IBV_WC_SUCCESS &&
            rest[i].status != IBV_WC_WR_FLUSH_ERR) {
            *cause = rest[i];
            return 1;
        }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        tnt__vb_async_drain(ep->ctx);
        if (ep->closed || ep->conn.state == VB_ERROR)
            return 0; /* an event named the cause */
        struct ibv_wc wc[16];
        int n = ibv_poll_cq(ep->cq, 16, wc);
        for (int i = 0; i < n; i++)
            if (wc[i].status != IBV_WC_SUCCESS &&
                wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                *cause = wc[i];
                return 1;
            }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (n < 0 || (t.tv_sec - t0.tv_sec) * 1000L +
                         (t.tv_nsec - t0.tv_nsec) / 1000000L >=
                     VB_FLUSH_CAUSE_MS)
            return 0;
        if (n == 0) {
            struct timespec pause = {0, 200000}; /* 0.2 ms */
            nanosleep(&pause, NULL);
        }
    }
}

static void handle_wc(vb_ep_t *ep, const struct ibv_wc *wc,
                      const struct ibv_wc *rest, int nrest)
{
    uint32_t kind = (uint32_t)(wc->wr_id >> 56);
    uint32_t idx = (uint32_t)(wc->wr_id & 0xffffffffu);
    if (wc->status != IBV_WC_SUCCESS) {
        vb_ctx_t *ctx = ep->ctx;
        char text[96], detail[160];
        wc_text(wc, text, sizeof(text));
        ctx->env.log(ctx->env.core, TNT_LOG_DEBUG, "rank %d: verbs: "
                     "completion from rank %d: %s, queue pair %s",
                     ctx->env.rank, ep->peer, text, qp_state_name(ep->qp));
        if (ep->conn.state == VB_ERROR)
            return;
        struct ibv_wc cause;
        if (wc->status == IBV_WC_WR_FLUSH_ERR) {
            if (!flush_cause(ep, rest, nrest, &cause)) {
                if (ep->closed || ep->conn.state == VB_ERROR)
                    return;
                snprintf(detail, sizeof(detail), "%s; no error completion "
                         "here: a request from the peer failed", text);
                tnt__vb_fail(ep, VB_EV_WC_FLUSH, detail);
                return;
            }
            wc = &cause;
            wc_text(wc, text, sizeof(text));
        }
        int ev = wc_event(wc->status);
        if (ev == VB_EV_WC_REMOTE && side_channel_closed(ep)) {
            snprintf(detail, sizeof(detail), "%s on an RDMA operation as it "
                     "went", text);
            tnt__vb_fail(ep, VB_EV_SIDE_CLOSED, detail);
            return;
        }
        tnt__vb_fail(ep, ev, text);
        return;
    }
    tnt__vb_fail(ep, VB_EV_WC_OK, NULL);
    if (ep->closed || ep->conn.state == VB_ERROR)
        return;
    switch (kind) {
    case VB_WR_RECV:
        tnt__vb_announce_early(ep);
        if (ep->closed)
            return;
        if (idx >= ep->nrecv)
            protocol_error(ep, "completion for an unknown buffer");
        else if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
                 (wc->wc_flags & IBV_WC_WITH_IMM))
            recv_fin(ep, idx, ntohl(wc->imm_data));
        else if (wc->opcode == IBV_WC_RECV)
            recv_msg(ep, idx, wc->byte_len);
        else
            protocol_error(ep, "unexpected receive completion");
        return;
    case VB_WR_SEND:
        ep->sq_used--;
        ep->free_send[ep->nfree_send++] = idx;
        return;
    case VB_WR_WRITE:
        ep->sq_used--;
        write_done(ep, idx);
        return;
    default:
        tnt__vb_fail(ep, VB_EV_WC_OTHER, "completion of unknown kind");
    }
}

void tnt__vb_poll_ep(vb_ep_t *ep)
{
    struct ibv_wc wc[16];
    while (!ep->closed) {
        int n = ibv_poll_cq(ep->cq, 16, wc);
        if (n < 0) {
            tnt__vb_fail(ep, VB_EV_WC_OTHER, "ibv_poll_cq failed");
            return;
        }
        for (int i = 0; i < n && !ep->closed; i++)
            handle_wc(ep, &wc[i], &wc[i + 1], n - i - 1);
        if (n < 16)
            break;
    }
    if (!ep->closed)
        progress_queue(ep);
}

/* 1 if the peer has closed its side channel (or it failed): nothing it
 * has not acknowledged yet will be. */
static int peer_side_closed(const vb_ep_t *ep)
{
    if (ep->fd < 0)
        return 0;
    char b;
    ssize_t n = recv(ep->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                      errno != EINTR);
}

/* Work requests posted on a queue pair that is moved to the error state
 * are flushed, not sent, so a message posted just before a close (the
 * core's failure notice, which it sends and then closes) would never
 * leave. Wait for the send queue's completions first, only counting
 * them: nothing is handed to the core (this runs inside a downcall) and
 * receives are left to the flush. Bounded: a peer that never
 * acknowledges costs at most `limit_s`, and one that has closed its side
 * channel nothing more (it failed too, its queue pair is gone or in the
 * error state: when every rank fails at once, each close would
 * otherwise wait out the whole limit, one peer after the other). */
size_t tnt__vb_drain_sends(vb_ep_t *ep, double limit_s)
{
    struct timespec t0, t;
    unsigned idle = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (ep->sq_used > 0) {
        struct ibv_wc wc[16];
        int n = ibv_poll_cq(ep->cq, 16, wc);
        if (n < 0)
            return ep->sq_used;
        for (int i = 0; i < n; i++) {
            uint32_t kind = (uint32_t)(wc[i].wr_id >> 56);
            if (wc[i].status != IBV_WC_SUCCESS)
                return ep->sq_used;
            if (kind == VB_WR_SEND || kind == VB_WR_WRITE)
                ep->sq_used--;
        }
        if (n > 0)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) +
                1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > limit_s ||
            (++idle % 50 == 0 && peer_side_closed(ep))) /* each ~1 ms */
            return ep->sq_used;
        struct timespec pause = {0, 20000}; /* 20 us */
        nanosleep(&pause, NULL);
    }
    return 0;
}

void tnt__vb_comp_cb(void *arg, uint32_t events)
{
    vb_ctx_t *ctx = arg;
    (void)events;
    tnt__vb_free_graveyard(ctx);
    for (;;) {
        struct ibv_cq *cq;
        void *cq_ctx;
        /* The channel's fd is nonblocking: this fails with EAGAIN once
         * no event is left. */
        if (ibv_get_cq_event(ctx->chan, &cq, &cq_ctx) != 0)
            return;
        ibv_ack_cq_events(cq, 1);
        vb_ep_t *ep = cq_ctx;
        if (ep->closed)
            continue;
        if (ibv_req_notify_cq(cq, 0) != 0) {
            tnt__vb_fail(ep, VB_EV_WC_OTHER, "cannot re-arm the completion "
                         "queue");
            continue;
        }
        tnt__vb_poll_ep(ep);
    }
}

/* ---- registration hooks of the transport interface ----------------- */

/* The core calls these for each tnt_mem_alloc allocation and at its
 * tnt_mem_free: memory whose end the transport learns, so its
 * registration is kept (pinned) for its whole life, cache on or off. */
tnt_result_t tnt__vb_reg_mem(void *vctx, void *ptr, size_t len,
                             void **handle)
{
    vb_ctx_t *ctx = vctx;
    vb_region_t *r = tnt__vb_rcache_pin(&ctx->rcache, ptr, len);
    if (!r)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: cannot register %zu bytes "
                          "at %p", len, ptr);
    *handle = r;
    return TNT_SUCCESS;
}

void tnt__vb_dereg_mem(void *vctx, void *handle)
{
    vb_ctx_t *ctx = vctx;
    /* The caller is done with this memory (it frees it next): no later
     * message may reuse a registration of it. */
    tnt__vb_rcache_unpin(&ctx->rcache, handle);
}
