/*
 * The RDMA verbs transport: lifecycle, the connection handshake and
 * failure reporting (the data path is in verbs_io.c, device discovery in
 * verbs_dev.c).
 *
 * Connecting a reliable-connected queue pair needs the peer's QPN and
 * PSN, which exist only once a queue pair for that pair of ranks exists,
 * so they cannot travel in the address blob published at bootstrap (one
 * per rank, at most 128 bytes, before anyone knows its peers). The blob
 * therefore names a TCP socket, and the queue pair addresses are
 * exchanged over it: the lower rank creates its queue pair and sends a
 * hello (job, communicator, ranks, QPN, PSN, LID, GID, MTU, ring depth,
 * nonce); the higher rank answers with a challenge, and the lower rank
 * with its proof of the job key (verbs_wire.h); only then does the higher
 * rank create its queue pair, move it to RTR and RTS and answer with its
 * own hello; the lower rank moves to RTR and RTS and sends one 'R' byte,
 * after which both hand the endpoint to the core (the higher rank only
 * then: before, the lower rank's receive queue may not be ready). Both
 * post their receive buffers before answering.
 *
 * The socket stays open for the life of the endpoint: the kernel closes
 * it when the peer process dies, which tells this side at once instead
 * of after the queue pair's retry timeout (seconds), and it is how a
 * closing peer is noticed without any traffic.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/launcher_env.h"
#include "util/param.h"
#include "util/param_table.h"
#include "util/sockaddr.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_dev.h"
#include "transport/verbs/verbs_internal.h"
#include "transport/verbs/verbs_select.h"

#define VB_READY_BYTE 'R'

static void sock_cb(void *arg, uint32_t events);

/* ---- closing and failing ------------------------------------------- */

static void ep_free(vb_ctx_t *ctx, vb_ep_t *ep)
{
    tnt__vb_ep_release_ops(ep);
    if (ep->qp)
        ibv_destroy_qp(ep->qp);
    if (ep->cq)
        ibv_destroy_cq(ep->cq);
    if (ep->slab_mr)
        ibv_dereg_mr(ep->slab_mr);
    free(ep->slab);
    free(ep->free_send);
    free(ep->stok);
    free(ep->rtok);
    (void)ctx;
    free(ep);
}

void tnt__vb_free_graveyard(vb_ctx_t *ctx)
{
    while (ctx->graveyard) {
        vb_ep_t *ep = ctx->graveyard;
        ctx->graveyard = ep->next;
        ep_free(ctx, ep);
    }
}

/* Stop all activity of ep now; its memory goes at the next callback,
 * never while a callback that may still touch it is running. */
static void ep_close(void *vctx, void *vep)
{
    vb_ctx_t *ctx = vctx;
    vb_ep_t *ep = vep;
    if (!ep || ep->closed)
        return;
    ep->closed = 1;
    tnt__vb_conn_event(&ep->conn, VB_EV_CLOSE, NULL);
    if (ep->fd >= 0) {
        ctx->env.unwatch_fd(ctx->env.core, ep->fd);
        close(ep->fd);
        ep->fd = -1;
    }
    /* The error state flushes outstanding work; nothing more is read. */
    if (ep->qp) {
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
        ibv_modify_qp(ep->qp, &a, IBV_QP_STATE);
    }
    tnt__vb_ep_release_ops(ep);
    for (vb_ep_t **pp = &ctx->eps; *pp; pp = &(*pp)->next)
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    ep->next = ctx->graveyard;
    ctx->graveyard = ep;
}

/* The core's close: what it sent last (its failure notice, before it
 * closes every connection) must still reach the peer, as it does over a
 * socket; tearing the queue pair down at once would flush it. */
static void vb_close(void *vctx, void *vep)
{
    vb_ctx_t *ctx = vctx;
    vb_ep_t *ep = vep;
    if (ep && !ep->closed && ep->qp && ep->conn.state == VB_RTS) {
        double limit = tnt__vb_close_drain_s(ctx->timeout, ctx->retry,
                                             VB_CLOSE_DRAIN_MIN_S,
                                             VB_CLOSE_DRAIN_MAX_S);
        size_t left = tnt__vb_drain_sends(ep, limit);
        if (left)
            ctx->env.log(ctx->env.core, TNT_LOG_DEBUG, "rank %d: verbs: "
                         "closing the connection to rank %d with %zu "
                         "sends not acknowledged (waited up to %.2f s): "
                         "they are flushed", ctx->env.rank, ep->peer, left,
                         limit);
    }
    ep_close(vctx, vep);
}

void tnt__vb_fail(vb_ep_t *ep, int ev, const char *detail)
{
    vb_ctx_t *ctx = ep->ctx;
    if (ep->closed || !tnt__vb_conn_event(&ep->conn, ev, detail))
        return;
    /* Inside a downcall the caller returns the error; upcalls are only
     * allowed from callbacks. The core closes the endpoint then. */
    if (ctx->in_downcall)
        return;
    if (!ep->known) {
        if (!ep->connector && !ctx->evicting)
            ctx->strangers_refused++;
        ctx->env.log(ctx->env.core, TNT_LOG_WARNING, "dropped verbs "
                     "connection from %s: %s", ep->name, ep->conn.why);
        ep_close(ctx, ep);
        return;
    }
    int peer = ep->peer;
    tnt_result_t err = ep->conn.err;
    char why[sizeof(ep->conn.why)];
    memcpy(why, ep->conn.why, sizeof(why));
    ep_close(ctx, ep);
    ctx->env.on_peer_error(ctx->env.core, peer, err, why);
}

/* ---- queue pairs --------------------------------------------------- */

static vb_ep_t *ep_new(vb_ctx_t *ctx, int peer, int fd)
{
    vb_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return NULL;
    ep->ctx = ctx;
    ep->peer = peer;
    ep->fd = fd;
    tnt__vb_conn_init(&ep->conn, ctx->env.rank, peer);
    ep->next = ctx->eps;
    ctx->eps = ep;
    return ep;
}

/* Create completion queue, queue pair (moved to INIT) and bounce buffers,
 * and post the receive buffers. */
static tnt_result_t qp_create(vb_ep_t *ep)
{
    vb_ctx_t *ctx = ep->ctx;
    TNT_CHECK(tnt__vb_ep_setup_buffers(ep));
    ep->cq = ibv_create_cq(ctx->ib, (int)(ep->nrecv + ep->sq_depth), ep,
                           ctx->chan, 0);
    if (!ep->cq)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: ibv_create_cq: %s",
                          strerror(errno));
    if (ibv_req_notify_cq(ep->cq, 0) != 0)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: ibv_req_notify_cq failed");
    struct ibv_qp_init_attr ia = {
        .qp_context = ep, .send_cq = ep->cq, .recv_cq = ep->cq,
        .cap = {.max_send_wr = (uint32_t)ep->sq_depth,
                .max_recv_wr = ep->nrecv, .max_send_sge = 1,
                .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC, .sq_sig_all = 0};
    ep->qp = ibv_create_qp(ctx->pd, &ia);
    if (!ep->qp)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: ibv_create_qp: %s",
                          strerror(errno));
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .pkey_index = 0,
        .port_num = (uint8_t)ctx->port,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
    int e = ibv_modify_qp(ep->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                          IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (e)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: queue pair to INIT: %s",
                          strerror(e));
    tnt__vb_conn_event(&ep->conn, VB_EV_QP_INIT, NULL);
    for (uint32_t i = 0; i < ep->nrecv; i++)
        TNT_CHECK(tnt__vb_post_recv(ep, i));
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ep->psn = ((uint32_t)ts.tv_nsec ^ ep->qp->qp_num * 2654435761u) &
              0xffffffu;
    return TNT_SUCCESS;
}

/* RTR with the peer's address, then RTS. */
static tnt_result_t qp_connect(vb_ep_t *ep, const vb_hello_t *h)
{
    vb_ctx_t *ctx = ep->ctx;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = h->mtu < ctx->mtu ? (enum ibv_mtu)h->mtu : ctx->mtu,
        .dest_qp_num = h->qpn, .rq_psn = h->psn,
        .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
        .ah_attr = {.dlid = h->lid, .sl = 0, .src_path_bits = 0,
                    .port_num = (uint8_t)ctx->port}};
    /* RoCE always routes by GID; InfiniBand by LID within a subnet. */
    if (ctx->link == VB_LINK_ETH) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, h->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)ctx->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    int e = ibv_modify_qp(ep->qp, &a, IBV_QP_STATE | IBV_QP_AV |
                          IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                          IBV_QP_MIN_RNR_TIMER);
    if (e)
        return tnt__error(TNT_ERR_CONNECT, "verbs: queue pair to rank %d "
                          "to RTR: %s", ep->peer, strerror(e));
    tnt__vb_conn_event(&ep->conn, VB_EV_QP_RTR, NULL);
    struct ibv_qp_attr b = {
        .qp_state = IBV_QPS_RTS, .timeout = (uint8_t)ctx->timeout,
        .retry_cnt = (uint8_t)ctx->retry, .rnr_retry = 7,
        .sq_psn = ep->psn, .max_rd_atomic = 1};
    e = ibv_modify_qp(ep->qp, &b, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC);
    if (e)
        return tnt__error(TNT_ERR_CONNECT, "verbs: queue pair to rank %d "
                          "to RTS: %s", ep->peer, strerror(e));
    tnt__vb_conn_event(&ep->conn, VB_EV_QP_RTS, NULL);
    return TNT_SUCCESS;
}

/* ---- the side channel ---------------------------------------------- */

static void set_events(vb_ep_t *ep, uint32_t events)
{
    vb_ctx_t *ctx = ep->ctx;
    if (ep->closed || ep->fd_events == events)
        return;
    ep->fd_events = events;
    ctx->env.modify_fd(ctx->env.core, ep->fd, events, sock_cb, ep);
}

static void queue_record(vb_ep_t *ep, const unsigned char *rec, size_t len)
{
    memcpy(ep->out, rec, len);
    ep->out_len = len;
    ep->out_off = 0;
}

static void encode_hello(vb_ep_t *ep, int reply, unsigned char *rec)
{
    vb_ctx_t *ctx = ep->ctx;
    vb_hello_t h = {.version = VB_PROTO_VERSION, .job_id = ctx->env.job_id,
                    .comm_id = ctx->env.comm_id, .from = ctx->env.rank,
                    .to = ep->peer, .qpn = ep->qp->qp_num, .psn = ep->psn,
                    .lid = ctx->lid, .mtu = (uint8_t)ctx->mtu,
                    .is_reply = (uint8_t)reply,
                    .depth = (uint16_t)ctx->depth,
                    .bounce_kib = (uint16_t)(ctx->bounce / 1024)};
    memcpy(h.gid, ctx->gid.raw, 16);
    if (!reply)
        ctx->env.random_bytes(ctx->env.core, h.nonce, sizeof(h.nonce));
    tnt__vb_hello_encode(&h, rec);
}

/* Write what is queued; 0 when all is out, 1 pending, -1 failed. */
static int flush_out(vb_ep_t *ep)
{
    while (ep->out_off < ep->out_len) {
        ssize_t n = send(ep->fd, ep->out + ep->out_off,
                         ep->out_len - ep->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_events(ep, TNT_FD_READ | TNT_FD_WRITE);
            return 1;
        }
        if (n < 0) {
            tnt__vb_fail(ep, VB_EV_SIDE_CLOSED, strerror(errno));
            return -1;
        }
        ep->out_off += (size_t)n;
    }
    set_events(ep, TNT_FD_READ);
    return 0;
}

static void announce(vb_ep_t *ep)
{
    vb_ctx_t *ctx = ep->ctx;
    ep->announced = 1;
    ep->known = 1;
    ep->stage = VB_S_UP;
    ctx->env.on_connected(ctx->env.core, ep->peer, ep);
}

/* The connector sends over the queue pair only after its 'R' and its own
 * announce, but the two channels keep no order between them: its first
 * message can complete here before the 'R' is read. That message proves
 * the handshake done, so the acceptor announces then, before the message
 * reaches the core: a core whose communicator has failed meanwhile sends
 * its notice on the connection and closes it (up_connected), instead of
 * refusing the message, which closed the endpoint unannounced, with the
 * 'R' unread: the peer saw a reset and reported a lost rank instead of
 * the cause (test_split's split_vs_allgather in the soft-RoCE guest). The
 * 'R' is still due and taken when it comes. */
void tnt__vb_announce_early(vb_ep_t *ep)
{
    if (ep->announced || ep->closed || ep->stage != VB_S_READY_IN)
        return;
    ep->ready_due = 1;
    announce(ep);
}

/* Checks of a hello that need the context; NULL if it fits. */
static const char *hello_check(vb_ctx_t *ctx, vb_ep_t *ep,
                               const vb_hello_t *h)
{
    if (h->job_id != ctx->env.job_id)
        return "handshake from another job (wrong job key)";
    if (h->comm_id != ctx->env.comm_id || h->to != ctx->env.rank)
        return "handshake for another communicator or rank";
    if (h->depth != ctx->depth)
        return "TNT_IB_RECV_DEPTH differs between the ranks";
    if ((size_t)h->bounce_kib * 1024 != ctx->bounce)
        return "TNT_IB_EAGER_BYTES differs between the ranks";
    if (ep->connector) {
        if (!h->is_reply || h->from != ep->peer)
            return "reply from the wrong rank";
        return NULL;
    }
    if (h->is_reply || h->from >= ctx->env.rank || h->from >= ctx->env.nranks)
        return "handshake from a rank that may not connect here";
    return NULL;
}

/* Acceptor, after the proof: a rank that proved the key but is already
 * connected. Checked only then (as the TCP transport does): before the
 * proof the hello's "from" is a stranger's claim, and refusing on it
 * would tell a stranger who is connected and spare it the challenge that
 * a wrong key must fail. Only endpoints that proved the key have a peer. */
static const char *duplicate_check(vb_ctx_t *ctx, vb_ep_t *ep, int from)
{
    for (vb_ep_t *e = ctx->eps; e; e = e->next)
        if (e != ep && e->peer == from)
            return "second connection from a rank already connected";
    return NULL;
}

/* Send the challenge (acceptor) or the proof (connector): a MAC over
 * the connector's hello and the acceptor's nonce. Then wait in `next`. */
static void send_auth(vb_ep_t *ep, uint32_t kind,
                      const uint8_t nonce_a[VB_NONCE_BYTES], int next)
{
    vb_ctx_t *ctx = ep->ctx;
    vb_auth_t a = {.kind = kind};
    if (kind == VB_AUTH_CHALLENGE)
        memcpy(a.nonce, nonce_a, VB_NONCE_BYTES);
    unsigned char in[VB_AUTH_INPUT_MAX], rec[VB_REC_LEN];
    size_t n = tnt__vb_auth_input(kind == VB_AUTH_PROOF, ep->hello_rec,
                                  nonce_a, in);
    ctx->env.auth_mac(ctx->env.core, in, n, a.mac);
    tnt__vb_auth_encode(&a, rec);
    queue_record(ep, rec, VB_REC_LEN);
    ep->stage = next;
    flush_out(ep);
}

/* 1 if mac is the challenge's (connector_mac = 0) or the proof's (1)
 * MAC over the connector's hello and the acceptor's nonce. */
static int auth_ok(vb_ep_t *ep, int connector_mac,
                   const uint8_t nonce_a[VB_NONCE_BYTES],
                   const uint8_t mac[VB_MAC_BYTES])
{
    vb_ctx_t *ctx = ep->ctx;
    unsigned char in[VB_AUTH_INPUT_MAX];
    size_t n = tnt__vb_auth_input(connector_mac, ep->hello_rec, nonce_a, in);
    return ctx->env.auth_verify(ctx->env.core, in, n, mac);
}

/* Acceptor: a hello. Nothing in it is trusted yet; answer with the
 * challenge. */
static void hello_in(vb_ep_t *ep)
{
    vb_ctx_t *ctx = ep->ctx;
    const char *why = tnt__vb_hello_decode(ep->in, VB_REC_LEN,
                                           &ep->peer_hello);
    if (!why)
        why = hello_check(ctx, ep, &ep->peer_hello);
    if (why) {
        tnt__vb_fail(ep, VB_EV_PROTOCOL, why);
        return;
    }
    memcpy(ep->hello_rec, ep->in, VB_REC_LEN);
    ctx->env.random_bytes(ctx->env.core, ep->nonce_a, VB_NONCE_BYTES);
    send_auth(ep, VB_AUTH_CHALLENGE, ep->nonce_a, VB_S_PROOF_IN);
}

/* Acceptor: the proof. Only now is the connection the rank it says it
 * is: create and connect the queue pair and send the reply. */
static void proof_in(vb_ep_t *ep)
{
    vb_ctx_t *ctx = ep->ctx;
    vb_auth_t pr;
    const char *why = tnt__vb_auth_decode(ep->in, VB_REC_LEN, VB_AUTH_PROOF,
                                          &pr);
    if (!why && !auth_ok(ep, 1, ep->nonce_a, pr.mac))
        why = "authentication failed (wrong job key, or a replay)";
    /* Another connection for the same rank may have proved meanwhile. */
    if (!why)
        why = hello_check(ctx, ep, &ep->peer_hello);
    if (!why)
        why = duplicate_check(ctx, ep, ep->peer_hello.from);
    if (why) {
        tnt__vb_fail(ep, VB_EV_PROTOCOL, why);
        return;
    }
    /* The peer is named now: a failure from here on is reported to the
     * core, so that it learns that this rank is gone even if the
     * handshake never finishes. */
    ep->peer = ep->peer_hello.from;
    ep->conn.peer = ep->peer;
    ep->known = 1;
    if (qp_create(ep) != TNT_SUCCESS ||
        qp_connect(ep, &ep->peer_hello) != TNT_SUCCESS) {
        tnt__vb_fail(ep, VB_EV_SETUP, tnt_last_error());
        return;
    }
    unsigned char rec[VB_REC_LEN];
    encode_hello(ep, 1, rec);
    queue_record(ep, rec, VB_REC_LEN);
    ep->stage = VB_S_READY_IN;
    flush_out(ep);
}

/* Connector: the challenge. Check the acceptor's MAC, then prove. */
static void challenge_in(vb_ep_t *ep)
{
    vb_auth_t ch;
    const char *why = tnt__vb_auth_decode(ep->in, VB_REC_LEN,
                                          VB_AUTH_CHALLENGE, &ch);
    if (!why && !auth_ok(ep, 0, ch.nonce, ch.mac))
        why = "the peer failed to prove the job key (another job key?)";
    if (why) {
        tnt__vb_fail(ep, VB_EV_PROTOCOL, why);
        return;
    }
    send_auth(ep, VB_AUTH_PROOF, ch.nonce, VB_S_REPLY_IN);
}

/* Connector: the acceptor's reply hello. Connect, send 'R', announce. */
static void reply_in(vb_ep_t *ep)
{
    vb_ctx_t *ctx = ep->ctx;
    vb_hello_t h;
    const char *why = tnt__vb_hello_decode(ep->in, VB_REC_LEN, &h);
    if (!why)
        why = hello_check(ctx, ep, &h);
    if (why) {
        tnt__vb_fail(ep, VB_EV_PROTOCOL, why);
        return;
    }
    if (qp_connect(ep, &h) != TNT_SUCCESS) {
        tnt__vb_fail(ep, VB_EV_SETUP, tnt_last_error());
        return;
    }
    unsigned char r = VB_READY_BYTE;
    queue_record(ep, &r, 1);
    if (flush_out(ep) < 0)
        return;
    /* The 'R' leaves before the core hears of the connection, so that even
     * a connection it closes at once has completed the handshake. */
    announce(ep);
}

static void record_in(vb_ep_t *ep)
{
    ep->in_len = 0;
    switch (ep->stage) {
    case VB_S_HELLO_IN: hello_in(ep); break;
    case VB_S_PROOF_IN: proof_in(ep); break;
    case VB_S_CHALLENGE_IN: challenge_in(ep); break;
    case VB_S_REPLY_IN: reply_in(ep); break;
    default: break;
    }
}

/* The stages that wait for a whole record. */
static int wants_record(const vb_ep_t *ep)
{
    return ep->stage == VB_S_HELLO_IN || ep->stage == VB_S_PROOF_IN ||
           ep->stage == VB_S_CHALLENGE_IN || ep->stage == VB_S_REPLY_IN;
}

static void sock_read(vb_ep_t *ep)
{
    for (;;) {
        unsigned char b;
        int rec = wants_record(ep);
        ssize_t n = recv(ep->fd, rec ? ep->in + ep->in_len : &b,
                         rec ? VB_REC_LEN - ep->in_len : 1, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            /* A closing peer's last messages (its failure notice) were
             * acknowledged before its socket closed, but their
             * completions may not have been taken yet: take them first,
             * so that the notice, not the close, is the cause. */
            int e = errno;
            if (ep->announced && ep->conn.state == VB_RTS) {
                tnt__vb_poll_ep(ep);
                if (ep->closed)
                    return;
            }
            tnt__vb_fail(ep, VB_EV_SIDE_CLOSED, n == 0 ? "socket closed"
                                                       : strerror(e));
            return;
        }
        if (rec) {
            ep->in_len += (size_t)n;
            if (ep->in_len == VB_REC_LEN)
                record_in(ep);
        } else if (ep->stage == VB_S_READY_IN && b == VB_READY_BYTE) {
            announce(ep);
        } else if (ep->ready_due && b == VB_READY_BYTE) {
            ep->ready_due = 0; /* announced early */
        } else {
            tnt__vb_fail(ep, VB_EV_PROTOCOL, "unexpected bytes on the "
                         "handshake socket");
        }
        if (ep->closed)
            return;
    }
}

static void sock_cb(void *arg, uint32_t events)
{
    vb_ep_t *ep = arg;
    vb_ctx_t *ctx = ep->ctx;
    tnt__vb_free_graveyard(ctx);
    if (ep->stage == VB_S_CONNECTING) {
        /* Still connecting: done when writable or failed. */
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(ep->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err) {
            tnt__vb_fail(ep, VB_EV_SIDE_CLOSED, strerror(err));
            return;
        }
        if (!(events & TNT_FD_WRITE))
            return;
        encode_hello(ep, 0, ep->hello_rec);
        queue_record(ep, ep->hello_rec, VB_REC_LEN);
        ep->stage = VB_S_CHALLENGE_IN;
    }
    if ((events & TNT_FD_WRITE) && flush_out(ep) < 0)
        return;
    if (!ep->closed && (events & TNT_FD_READ))
        sock_read(ep);
}

/* The side channel stays open for liveness: a peer host that goes silent
 * without closing it is found by kernel keep-alive probes within about
 * TNT_HEARTBEAT seconds (tnt__sock_heartbeat, the TCP transport's rule;
 * 0 turns it off). */
static void tune_socket(const vb_ctx_t *ctx, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    tnt__sock_heartbeat(fd, ctx->heartbeat_s);
}

/* Connections that have not proved the job key: at most this many at a
 * time, each for at most this long (as the TCP and shm transports). */
#define VB_STRANGERS_MAX 64
#define VB_HANDSHAKE_WAIT_S 10.0

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Close the strangers that have not proved the key in time and, when
 * room is needed (room_for_one) and too many are still at it, one more:
 * silent connections must not pile up. Expiry runs once a second
 * (timer_cb), not only when a new connection comes: strangers that stop
 * coming would otherwise be held for ever (the intruder suite's last 64
 * held connections were). For room, the oldest stranger that has not
 * sent a whole hello goes first, then the oldest: a peer's own
 * connection sends its hello at once, so a flood of silent strangers
 * does not push it out (the TCP transport's rule). */
static void expire_strangers(vb_ctx_t *ctx, double now, int room_for_one)
{
    for (;;) {
        vb_ep_t *oldest = NULL, *silent = NULL;
        int n = 0;
        for (vb_ep_t *e = ctx->eps; e; e = e->next)
            if (!e->connector && !e->known && !e->closed) {
                n++;
                if (!oldest || e->born < oldest->born)
                    oldest = e;
                if (e->stage == VB_S_HELLO_IN &&
                    (!silent || e->born < silent->born))
                    silent = e;
            }
        vb_ep_t *victim = oldest;
        if (oldest && now - oldest->born > VB_HANDSHAKE_WAIT_S)
            tnt__vb_fail(oldest, VB_EV_PROTOCOL, "no authenticated "
                         "handshake in time");
        else if (oldest && room_for_one && n >= VB_STRANGERS_MAX) {
            victim = silent ? silent : oldest;
            ctx->strangers_evicted++;
            ctx->evicting = 1;
            tnt__vb_fail(victim, VB_EV_PROTOCOL, "too many connections in "
                         "their handshake");
            ctx->evicting = 0;
        } else
            return;
        if (!victim->closed) /* it is off the list either way */
            ep_close(ctx, victim);
    }
}

/* Once a second: strangers that have not proved the key in time go. */
static void timer_cb(void *arg, uint32_t events)
{
    vb_ctx_t *ctx = arg;
    (void)events;
    uint64_t ticks;
    if (read(ctx->timer_fd, &ticks, sizeof(ticks)) < 0)
        return;
    tnt__vb_free_graveyard(ctx);
    expire_strangers(ctx, mono_now(), 0);
}

static tnt_result_t start_timer(vb_ctx_t *ctx)
{
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (tfd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: timerfd_create: %s",
                          strerror(errno));
    struct itimerspec its = {{1, 0}, {1, 0}};
    if (timerfd_settime(tfd, 0, &its, NULL) != 0 ||
        ctx->env.watch_fd(ctx->env.core, tfd, TNT_FD_READ, timer_cb, ctx) !=
            TNT_SUCCESS) {
        close(tfd);
        return tnt__error(TNT_ERR_SYSTEM, "verbs: cannot start the "
                          "handshake timer");
    }
    ctx->timer_fd = tfd;
    return TNT_SUCCESS;
}

static void accept_cb(void *arg, uint32_t events)
{
    vb_ctx_t *ctx = arg;
    (void)events;
    tnt__vb_free_graveyard(ctx);
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(ctx->listen_fd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                ctx->env.log(ctx->env.core, TNT_LOG_WARNING, "rank %d: "
                             "verbs accept: %s", ctx->env.rank,
                             strerror(errno));
            return;
        }
        tune_socket(ctx, fd);
        double now = mono_now();
        expire_strangers(ctx, now, 1);
        vb_ep_t *ep = ep_new(ctx, -1, fd);
        if (!ep) {
            close(fd);
            continue;
        }
        ep->born = now;
        tnt__sockaddr_str((struct sockaddr *)&ss, ep->name, sizeof(ep->name));
        ep->fd_events = TNT_FD_READ;
        if (ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ, sock_cb, ep) <
            0) {
            ep->fd = -1;
            close(fd);
            ep_close(ctx, ep);
        }
    }
}

/* ---- the vtable ---------------------------------------------------- */

static tnt_result_t vb_connect(void *vctx, int peer, const void *addr,
                               size_t addr_len)
{
    vb_ctx_t *ctx = vctx;
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (peer < 0 || peer >= ctx->env.nranks || peer == ctx->env.rank)
        return tnt__error(TNT_ERR_INVALID_ARG, "verbs: connect to rank %d",
                          peer);
    TNT_CHECK(tnt__addr_blob_decode(addr, addr_len, &ss, &sslen));
    vb_ep_t *ep = ep_new(ctx, peer, -1);
    if (!ep)
        return tnt__error(TNT_ERR_NO_MEMORY, "verbs: out of memory");
    ep->connector = 1;
    ep->known = 1;
    ep->stage = VB_S_CONNECTING;
    tnt__sockaddr_str((struct sockaddr *)&ss, ep->name, sizeof(ep->name));
    tnt_result_t rc = qp_create(ep);
    int fd = -1;
    if (rc == TNT_SUCCESS) {
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
        if (fd < 0)
            rc = tnt__error(TNT_ERR_SYSTEM, "socket: %s", strerror(errno));
    }
    if (rc == TNT_SUCCESS) {
        tune_socket(ctx, fd);
        if (connect(fd, (struct sockaddr *)&ss, sslen) != 0 &&
            errno != EINPROGRESS)
            rc = tnt__error(TNT_ERR_CONNECT, "verbs: connect to rank %d "
                            "(%s): %s", peer, ep->name, strerror(errno));
    }
    if (rc == TNT_SUCCESS) {
        ep->fd_events = TNT_FD_READ | TNT_FD_WRITE;
        rc = ctx->env.watch_fd(ctx->env.core, fd, ep->fd_events, sock_cb,
                               ep);
    }
    if (rc == TNT_SUCCESS) {
        ep->fd = fd;
        return TNT_SUCCESS;
    }
    if (fd >= 0)
        close(fd);
    ep_close(ctx, ep);
    return rc;
}

static tnt_result_t vb_listen(void *vctx, void *addr, size_t *addr_len)
{
    vb_ctx_t *ctx = vctx;
    int fd;
    TNT_CHECK(tnt__listen_blob(ctx->env.bind_ip, ctx->env.rank, "verbs: ", &fd,
                               addr, addr_len));
    tnt_result_t rc = ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ,
                                        accept_cb, ctx);
    if (rc != TNT_SUCCESS) {
        close(fd);
        return rc;
    }
    ctx->listen_fd = fd;
    return ctx->timer_fd < 0 ? start_timer(ctx) : TNT_SUCCESS;
}

static void async_cb(void *arg, uint32_t events)
{
    vb_ctx_t *ctx = arg;
    (void)events;
    tnt__vb_free_graveyard(ctx);
    tnt__vb_async_drain(ctx);
}

void tnt__vb_async_drain(vb_ctx_t *ctx)
{
    struct ibv_async_event e;
    while (ibv_get_async_event(ctx->ib, &e) == 0) {
        const char *what = ibv_event_type_str(e.event_type);
        vb_ep_t *ep = NULL;
        int ev = -1, all = 0;
        switch (e.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
            ep = e.element.qp->qp_context;
            ev = VB_EV_ASYNC_FATAL;
            break;
        case IBV_EVENT_CQ_ERR:
            ep = e.element.cq->cq_context;
            ev = VB_EV_ASYNC_FATAL;
            break;
        case IBV_EVENT_PORT_ERR:
            all = e.element.port_num == ctx->port;
            ev = VB_EV_PORT_DOWN;
            break;
        case IBV_EVENT_DEVICE_FATAL:
            all = 1;
            ev = VB_EV_DEVICE_FATAL;
            break;
        default:
            break;
        }
        ibv_ack_async_event(&e);
        /* Acknowledged first: failing closes endpoints, and destroying a
         * queue pair waits for its events to be acknowledged. */
        if (ep && !ep->closed)
            tnt__vb_fail(ep, ev, what);
        if (all) {
            ctx->env.log(ctx->env.core, TNT_LOG_ERROR, "rank %d: %s on %s "
                         "port %d", ctx->env.rank, what, ctx->dev_name,
                         ctx->port);
            while (ctx->eps) {
                vb_ep_t *x = ctx->eps;
                tnt__vb_fail(x, ev, what);
                if (!x->closed)
                    ep_close(ctx, x);
            }
        } else if (!ep) {
            ctx->env.log(ctx->env.core, TNT_LOG_DEBUG, "rank %d: verbs "
                         "async event %s", ctx->env.rank, what);
        }
    }
}

static void vb_finalize(void *vctx);

static tnt_result_t set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return tnt__error(TNT_ERR_SYSTEM, "fcntl: %s", strerror(errno));
    return TNT_SUCCESS;
}

static int vb_reg(void *arg, void *addr, size_t len, void **handle)
{
    vb_ctx_t *ctx = arg;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (ctx->odp)
        access |= IBV_ACCESS_ON_DEMAND;
    struct ibv_mr *mr = ibv_reg_mr(ctx->pd, addr, len, access);
    if (!mr)
        return -1;
    *handle = mr;
    return 0;
}

static void vb_dereg(void *arg, void *handle)
{
    (void)arg;
    ibv_dereg_mr(handle);
}

/* On-demand paging for RC sends, receives and writes: registrations then
 * follow the process's page tables, so freed memory cannot go stale. */
static int have_odp(struct ibv_context *ib)
{
    struct ibv_device_attr_ex a;
    memset(&a, 0, sizeof(a));
    if (ibv_query_device_ex(ib, NULL, &a) != 0)
        return 0;
    uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                    IBV_ODP_SUPPORT_WRITE;
    return (a.odp_caps.general_caps & IBV_ODP_SUPPORT) &&
           (a.odp_caps.per_transport_caps.rc_odp_caps & need) == need;
}

/* TNT_IB_HCA_MAP: `first` (default) gives every rank the first usable
 * port; `local_rank` spreads a host's ranks over the usable ports round
 * robin by local rank, taken from the launcher (tnt-run, Open MPI, Slurm,
 * torchrun) or, when none says, from the communicator rank (right when all
 * ranks share one host, as the tests' ranks do). */
static tnt_result_t hca_pick(const tnt_transport_env_t *env, int *pick)
{
    static const char *const local_vars[] = {
        "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"};
    const char *s = tnt__env(TNT_VAR_IB_HCA_MAP);
    *pick = 0;
    if (!s || !*s || strcmp(s, "first") == 0)
        return TNT_SUCCESS;
    if (strcmp(s, "local_rank") != 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "TNT_IB_HCA_MAP='%s': "
                          "expected first or local_rank", s);
    *pick = env->rank;
    long v = -1;
    TNT_CHECK(tnt__env_long(TNT_VAR_LOCAL_RANK, &v));
    for (size_t i = 0; v < 0 && i < sizeof(local_vars) /
                                        sizeof(local_vars[0]); i++)
        if ((s = tnt__launcher_env(local_vars[i])))
            TNT_CHECK(tnt__parse_long(local_vars[i], s, 0, 1 << 20, &v));
    if (v >= 0)
        *pick = (int)v;
    return TNT_SUCCESS;
}

static tnt_result_t read_knobs(vb_ctx_t *ctx, int *cache, size_t *limit)
{
    /* depth, timeout and hb always get a value: the table has defaults. */
    long depth = 0, timeout = 0, retry = 7, c = -1;
    TNT_CHECK(tnt__env_long(TNT_VAR_IB_RECV_DEPTH, &depth));
    /* Without TNT_IB_TIMEOUT and TNT_IB_RETRY_CNT the ACK timeout and the
     * retry budget follow TNT_HEARTBEAT (default 10 s, as TCP's
     * keep-alive): a path lost under a queue pair with data in flight
     * then fails it within the heartbeat, and a peer that acknowledges
     * late is not taken for a lost one before that. */
    double hb = 0;
    TNT_CHECK(tnt__env_seconds(TNT_VAR_HEARTBEAT, &hb));
    ctx->heartbeat_s = hb;
    timeout = tnt__vb_default_timeout(hb);
    TNT_CHECK(tnt__env_long(TNT_VAR_IB_TIMEOUT, &timeout));
    int t = (int)timeout, r = 7;
    tnt__vb_retry_budget(hb, &t, &r);
    timeout = t;
    retry = r;
    TNT_CHECK(tnt__env_long(TNT_VAR_IB_RETRY_CNT, &retry));
    const char *s = tnt__env(TNT_VAR_IB_REG_CACHE);
    if (s && *s && strcmp(s, "auto") != 0)
        TNT_CHECK(tnt__parse_long("TNT_IB_REG_CACHE (auto, 0 or 1)", s, 0,
                                  1, &c));
    TNT_CHECK(tnt__env_size(TNT_VAR_IB_REG_CACHE_LIMIT, limit));
    /* Whole KiB (the hello carries KiB), within what one receive takes. */
    size_t bounce = 0;
    TNT_CHECK(tnt__env_size(TNT_VAR_IB_EAGER_BYTES, &bounce));
    if (bounce < VB_BOUNCE_MIN || bounce > VB_BOUNCE_MAX ||
        bounce % 1024 != 0)
        return tnt__error(TNT_ERR_CONFIG, "TNT_IB_EAGER_BYTES=%s: "
                          "expected whole KiB from 4k to 1M",
                          tnt__env(TNT_VAR_IB_EAGER_BYTES));
    ctx->bounce = bounce;
    ctx->depth = (uint32_t)depth;
    ctx->timeout = (int)timeout;
    ctx->retry = (int)retry;
    *cache = (int)c;
    return TNT_SUCCESS;
}

static tnt_result_t vb_init(const tnt_transport_env_t *env, void **out)
{
    /* The authentication services are required: the side channel
     * accepts no rank that cannot prove the job key. */
    if (!env || env->size < sizeof(*env) || env->version < 1 ||
        !env->auth_mac || !env->auth_verify || !env->random_bytes)
        return tnt__error(TNT_ERR_INVALID_ARG, "verbs: bad transport env");
    vb_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return tnt__error(TNT_ERR_NO_MEMORY, "verbs: out of memory");
    ctx->env = *env;
    ctx->listen_fd = -1;
    ctx->timer_fd = -1;
    int cache = -1;
    size_t limit = 0;
    vb_opened_t o;
    tnt_result_t rc = read_knobs(ctx, &cache, &limit);
    if (rc == TNT_SUCCESS && tnt__vb_fork_init() != 0)
        env->log(env->core, TNT_LOG_WARNING, "rank %d: ibv_fork_init "
                 "failed: a child process must not touch registered "
                 "memory", env->rank);
    int pick = 0;
    if (rc == TNT_SUCCESS)
        rc = hca_pick(env, &pick);
    if (rc == TNT_SUCCESS)
        rc = tnt__vb_open(&o, pick);
    if (rc == TNT_SUCCESS) {
        ctx->ib = o.ib;
        snprintf(ctx->dev_name, sizeof(ctx->dev_name), "%s", o.name);
        ctx->port = o.port;
        ctx->gid_index = o.gid_index;
        ctx->link = o.link;
        ctx->gid = o.gid;
        ctx->lid = o.pa.lid;
        ctx->mtu = o.pa.active_mtu;
        /* A WRITE longer than the port's max_msg_sz fails: segment by
         * it (a port that reports 0 gets the transport's own limit). */
        ctx->seg_max = o.pa.max_msg_sz && o.pa.max_msg_sz < VB_SEG_MAX
                           ? o.pa.max_msg_sz : VB_SEG_MAX;
        ctx->pd = ibv_alloc_pd(ctx->ib);
        ctx->chan = ctx->pd ? ibv_create_comp_channel(ctx->ib) : NULL;
        if (!ctx->chan)
            rc = tnt__error(TNT_ERR_SYSTEM, "verbs: cannot allocate a "
                            "protection domain or completion channel on %s",
                            o.name);
    }
    if (rc == TNT_SUCCESS)
        rc = set_nonblock(ctx->chan->fd);
    if (rc == TNT_SUCCESS)
        rc = set_nonblock(ctx->ib->async_fd);
    if (rc == TNT_SUCCESS) {
        ctx->odp = have_odp(ctx->ib);
        /* Without on-demand paging nothing tells the cache that memory
         * was freed, so unused registrations are kept only on request. */
        int keep = cache < 0 ? ctx->odp : cache;
        vb_rcache_ops_t ops = {vb_reg, vb_dereg, ctx};
        tnt__vb_rcache_init(&ctx->rcache, &ops, limit, keep);
        rc = env->watch_fd(env->core, ctx->chan->fd, TNT_FD_READ,
                           tnt__vb_comp_cb, ctx);
    }
    if (rc == TNT_SUCCESS)
        rc = env->watch_fd(env->core, ctx->ib->async_fd, TNT_FD_READ,
                           async_cb, ctx);
    if (rc != TNT_SUCCESS) {
        vb_finalize(ctx);
        return rc;
    }
    env->log(env->core, TNT_LOG_INFO, "rank %d: verbs on %s port %d: %s, "
             "MTU %d, %.0f Gb/s, GID index %d, registration cache %s%s",
             env->rank, o.name, o.port,
             o.link == VB_LINK_ETH ? "RoCE" : "InfiniBand",
             128 << o.pa.active_mtu, tnt__vb_port_gbps(&o.pa), o.gid_index,
             ctx->rcache.keep_unused ? "on" : "off",
             ctx->odp ? " (on-demand paging)" : "");
    *out = ctx;
    return TNT_SUCCESS;
}

static void vb_finalize(void *vctx)
{
    vb_ctx_t *ctx = vctx;
    if (!ctx)
        return;
    while (ctx->eps)
        ep_close(ctx, ctx->eps);
    tnt__vb_free_graveyard(ctx);
    if (ctx->listen_fd >= 0) {
        ctx->env.unwatch_fd(ctx->env.core, ctx->listen_fd);
        close(ctx->listen_fd);
    }
    if (ctx->timer_fd >= 0) {
        ctx->env.unwatch_fd(ctx->env.core, ctx->timer_fd);
        close(ctx->timer_fd);
    }
    if (ctx->pd) {
        /* What registration cost this communicator (a pinned
         * tnt_mem_alloc allocation is one registration for its life). */
        ctx->env.log(ctx->env.core, TNT_LOG_DEBUG, "rank %d: verbs: %zu "
                     "memory registrations, %zu deregistrations",
                     ctx->env.rank, ctx->rcache.nregs, ctx->rcache.nderegs);
        tnt__vb_rcache_destroy(&ctx->rcache);
    }
    if (ctx->chan) {
        ctx->env.unwatch_fd(ctx->env.core, ctx->chan->fd);
        ibv_destroy_comp_channel(ctx->chan);
    }
    if (ctx->ib)
        ctx->env.unwatch_fd(ctx->env.core, ctx->ib->async_fd);
    if (ctx->pd)
        ibv_dealloc_pd(ctx->pd);
    if (ctx->ib)
        ibv_close_device(ctx->ib);
    while (ctx->free_ops) {
        vb_op_t *op = ctx->free_ops;
        ctx->free_ops = op->next;
        free(op);
    }
    free(ctx);
}

/* Like TCP's: verbs never reconnects either (a lost connection fails the
 * communicator), so reconnects stays 0. */
static void vb_stats(void *vctx, tnt_transport_stats_t *out)
{
    const vb_ctx_t *ctx = vctx;
    if (TNT_TRANSPORT_HAS(out, strangers_evicted)) {
        out->strangers_refused = ctx->strangers_refused;
        out->strangers_evicted = ctx->strangers_evicted;
    }
}

const tnt_transport_t tnt__verbs_transport = {
    .size = sizeof(tnt_transport_t),
    .version = TNT_TRANSPORT_VERSION,
    .name = "verbs",
    .init = vb_init,
    .listen = vb_listen,
    .connect = vb_connect,
    .send = tnt__vb_send,
    .reg_mem = tnt__vb_reg_mem,
    .dereg_mem = tnt__vb_dereg_mem,
    .close = vb_close,
    .finalize = vb_finalize,
    .preference = 200,
    .stats = vb_stats,
};
