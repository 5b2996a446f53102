/*
 * The core's side of the transport interface: upcalls that match incoming
 * headers to posted receives (or keep them as early messages), complete
 * payloads and sends, and judge lost peers. Like engine.c, everything here
 * runs with comm->group->lock held (upcalls come from the progress thread's fd
 * callbacks).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/engine_internal.h"
#include "core/engine_flow.h"
#include "core/demux.h"
#include "util/error.h"
#include "util/log.h"
#include "core/msg_hdr.h"
#include "core/net_group.h"
#include "core/progress.h"
#include "core/progress_notes.h"
#include "core/p2p.h"

/* ---- transport upcalls ------------------------------------------------ */

/* A connection from `peer` on transport `tpi`. Each peer has one
 * transport, chosen the same way on both sides (comm_tp.c); a connection
 * on another one is refused, and closed by the transport it came from. */
void tnt__wire_connected(struct tnt_comm *comm, int tpi, int peer, void *ep)
{
    if (peer < 0 || peer >= comm->nranks || comm->state != TNT_COMM_OK ||
        comm->peers[peer].tpi != tpi || !comm->peers[peer].tp) {
        /* A fresh connection is in frame: say why before closing. */
        if (peer >= 0 && peer < comm->nranks && comm->state != TNT_COMM_OK) {
            tnt__send_notice(comm, tpi, ep);
            /* tnt__engine_drain may be lingering for this one. */
            comm->peers[peer].connecting = 0;
            pthread_cond_broadcast(&comm->group->progress.cond);
        }
        /* A shared connection is the group's (core/demux.c): others
         * use it. */
        if (!comm->group->shared)
            comm->net.tp[tpi]->close(comm->net.tp_ctx[tpi], ep);
        return;
    }
    tnt_peer_t *p = &comm->peers[peer];
    if (p->ep && p->ep != ep) {
        TNT_LOG_WARN("rank %d: second connection from rank %d refused",
                     comm->rank, peer);
        p->tp->close(p->tp_ctx, ep);
        return;
    }
    p->ep = ep;
    /* A new endpoint may sit where a freed one was. */
    p->onhost.slot_ep = NULL;
    p->connecting = 0;
    p->ever_connected = 1;
    /* Flush the sends that waited for the connection, in order. */
    while (p->pending_head && comm->state == TNT_COMM_OK) {
        tnt_opstate_t *os = p->pending_head;
        p->pending_head = os->next;
        if (!p->pending_head)
            p->pending_tail = NULL;
        struct tnt_request *req = os->coll;
        tnt__flow_send(comm, req, os->op);
        tnt__run_ready(comm, req);
    }
    tnt__flow_connected(comm, p);
}

/* A failure notice from a peer: take its text into the peer's notice
 * buffer; up_payload acts on it. */
static tnt_result_t notice_header(struct tnt_comm *comm, int peer,
                                  const tnt_msg_hdr_t *h, size_t payload_len,
                                  void **dest, void **cookie)
{
    if (payload_len > TNT_NOTICE_MAX || h->nranks != comm->nranks)
        return tnt__error(TNT_ERR_PROTOCOL, "malformed failure notice from "
                          "rank %d", peer);
    tnt_notice_rx_t *n = &comm->peers[peer].notice;
    n->ck.type = TNT_COOKIE_NOTICE;
    n->ck.comm = comm;
    n->len = payload_len;
    n->rc = (int64_t)h->count;
    n->seq = h->seq;
    n->step = h->step;
    n->waits = h->root;
    n->sending = h->op == TNT_PROGRESS_SENDING;
    *dest = n->text;
    *cookie = n;
    return TNT_SUCCESS;
}

/* The peer failed and says why: fail here with the same cause. Its text is
 * untrusted input: printable characters only. */
static void notice_arrived(struct tnt_comm *comm, int peer,
                           tnt_notice_rx_t *n)
{
    if (n->rc == 0) { /* a progress note, not a failure */
        tnt__progress_arrived(comm, peer, n);
        return;
    }
    n->text[n->len] = '\0';
    for (size_t i = 0; i < n->len; i++)
        if (n->text[i] < 0x20 || n->text[i] > 0x7e)
            n->text[i] = '?';
    tnt_result_t rc = (tnt_result_t)n->rc;
    /* Only failures travel; an abort elsewhere is a lost peer here. A
     * second thread in a collective elsewhere (TNT_ERR_INVALID_USAGE,
     * core/entry.c) is the job's error, not a lost peer: it travels. */
    if (n->rc < TNT_ERR_INVALID_USAGE || n->rc > TNT_ERR_INVALID_ARG ||
        rc == TNT_ERR_ABORTED || rc == TNT_ERR_INVALID_ARG ||
        rc == TNT_ERR_INVALID_COMM)
        rc = TNT_ERR_PEER_LOST;
    tnt__engine_fail(comm, rc, "rank %d: rank %d failed: %s", comm->rank,
                     peer, n->text);
}

int tnt__mismatch_past(struct tnt_comm *comm, const tnt_msg_hdr_t *h,
                       int peer)
{
    const tnt_msg_hdr_t *mine =
        &comm->reqs.recent_sigs[h->seq % TNT_RECENT_SIGS];
    if (mine->magic != TNT_MSG_MAGIC || mine->seq != h->seq ||
        tnt__sig_equal(h, mine))
        return 0;
    char a[160], b[160];
    tnt__describe_sig(mine, a, sizeof(a));
    tnt__describe_sig(h, b, sizeof(b));
    tnt__engine_fail(comm, TNT_ERR_MISMATCH, "collective #%" PRIu64
                     " mismatch: rank %d called %s but rank %d called %s",
                     h->seq, comm->rank, a, peer, b);
    return 1;
}

tnt_result_t tnt__wire_header(struct tnt_comm *comm, int peer,
                              const void *hdr, size_t hdr_len,
                              size_t payload_len, void **dest, void **cookie)
{
    if (peer < 0 || peer >= comm->nranks)
        return tnt__error(TNT_ERR_PROTOCOL, "message from unknown rank %d",
                          peer);
    tnt__count_recv(&comm->stats, comm->peers[peer].tpi, payload_len);
    tnt_msg_hdr_t h;
    /* A failure notice is not a collective's message: look at it first. */
    if (hdr_len == sizeof(h)) {
        memcpy(&h, hdr, sizeof(h));
        if (h.magic == TNT_MSG_MAGIC && h.comm_id == comm->comm_id &&
            h.kind == TNT_MSG_NOTICE)
            return notice_header(comm, peer, &h, payload_len, dest, cookie);
        if (h.magic == TNT_MSG_MAGIC && h.comm_id == comm->comm_id &&
            h.kind == TNT_MSG_CREDIT) {
            if (payload_len || h.nranks != comm->nranks)
                return tnt__error(TNT_ERR_PROTOCOL, "malformed credit from "
                                  "rank %d", peer);
            if (comm->state != TNT_COMM_OK)
                return tnt__error_str(comm->fail_rc, comm->fail_msg);
            tnt__flow_credit(comm, peer, h.count);
            *dest = NULL;
            *cookie = &comm->flow.ctl_rx_cookie;
            return TNT_SUCCESS;
        }
    }
    const char *why = tnt__msg_hdr_parse(hdr, hdr_len, payload_len,
                                         comm->comm_id, comm->nranks, &h);
    if (why)
        return tnt__error(TNT_ERR_PROTOCOL, "malformed message header from "
                          "rank %d: %s", peer, why);
    if (comm->state != TNT_COMM_OK)
        return tnt__error_str(comm->fail_rc, comm->fail_msg);
    tnt_peer_t *p = &comm->peers[peer];

    struct tnt_request *req;
    if (h.seq & TNT_P2P_SEQ_BIT) {
        req = tnt__p2p_find(comm, peer, &h);
    } else {
        req = tnt__active_first(comm);
        while (req && req->seq != h.seq)
            req = tnt__active_next(comm, req);
    }
    if (req && (h.step & TNT_STEP_CTS)) {
        /* A CTS's count is the steps it clears (engine.h): the rest of
         * its signature must match. One that differs is dropped, not
         * reported (its count would be named as the peer's): the peer
         * finds the mismatch from this rank's RTS or data, which carry
         * the whole signature and go since nothing clears them. */
        tnt_msg_hdr_t sig = h;
        sig.count = req->sig.count;
        if (!tnt__sig_equal(&sig, &req->sig)) {
            *dest = NULL;
            *cookie = &comm->flow.ctl_rx_cookie;
            return TNT_SUCCESS;
        }
    } else if (req && !tnt__sig_equal(&h, &req->sig)) {
        tnt__report_mismatch(comm, req, &h, peer);
        return TNT_ERR_MISMATCH;
    }
    if (h.step & TNT_STEP_CTL) {
        int r = tnt__flow_header(comm, peer, &h, req);
        if (r < 0 || comm->state != TNT_COMM_OK)
            return tnt__error_str(comm->fail_rc, comm->fail_msg);
        if (r == 1) {
            *dest = NULL;
            *cookie = &comm->flow.ctl_rx_cookie;
            return TNT_SUCCESS;
        }
        /* An RTS before its receive: an early record (below). */
    } else if (req) {
        tnt_opstate_t **pp = &p->posted;
        for (; *pp; pp = &(*pp)->next) {
            tnt_opstate_t *os = *pp;
            const tnt_sop_t *sop = &os->coll->sched->ops[os->op];
            if (os->coll != req || sop->step != h.step)
                continue;
            if (tnt__vsize_mismatch(comm, req, peer, &h, sop))
                return TNT_ERR_MISMATCH;
            if (sop->bytes != payload_len) {
                tnt__engine_fail(comm, TNT_ERR_MISMATCH, "rank %d: %s #%"
                                 PRIu64 " step %u: rank %d sent %zu bytes, "
                                 "expected %zu", comm->rank,
                                 tnt__coll_kind_name(req->args.kind), req->seq, h.step,
                                 peer, payload_len, sop->bytes);
                return TNT_ERR_MISMATCH;
            }
            *pp = os->next;
            os->arriving = 1;
            if (!os->cts_sent)
                tnt__flow_consumed(comm, p, payload_len);
            *dest = tnt__ref_ptr(req, sop->dst);
            *cookie = os;
            return TNT_SUCCESS;
        }
    } else if (h.seq < comm->next_seq) {
        if (tnt__mismatch_past(comm, &h, peer))
            return TNT_ERR_MISMATCH;
        tnt__engine_fail(comm, TNT_ERR_PROTOCOL, "rank %d: rank %d sent a "
                         "message for collective #%" PRIu64 ", which has "
                         "already finished here", comm->rank, peer, h.seq);
        return TNT_ERR_PROTOCOL;
    }
    /* Early: keep it until its receive is posted, within the budget. */
    if (!tnt__flow_budget(comm, peer, payload_len))
        return TNT_ERR_NO_MEMORY;
    tnt_unexp_t *u = tnt__alloc_unexp(comm);
    unsigned char *data = NULL;
    size_t cap = 0;
    if (u) {
        /* Charged now; tnt__free_unexp gives it back. */
        u->len = payload_len;
        u->data = NULL;
        u->cap = 0;
        comm->unexp_bytes += TNT_UNEXP_COST(payload_len);
        tnt__count_unexp(&comm->stats, comm->unexp_bytes);
    }
    if (u && payload_len) {
        data = tnt__bufpool_get(&comm->pool, payload_len, &cap);
        if (!data) {
            tnt__free_unexp(comm, u);
            u = NULL;
        }
    }
    if (!u) {
        tnt__engine_fail(comm, TNT_ERR_NO_MEMORY, "rank %d: out of memory "
                         "for an early message of %zu bytes", comm->rank,
                         payload_len);
        return TNT_ERR_NO_MEMORY;
    }
    u->ck.type = TNT_COOKIE_UNEXP;
    u->ck.comm = comm;
    u->next = NULL;
    u->hdr = h;
    u->len = payload_len;
    u->complete = 0;
    u->claimed = NULL;
    u->data = data;
    u->cap = cap;
    if (p->unexp_tail)
        p->unexp_tail->next = u;
    else
        p->unexp_head = u;
    p->unexp_tail = u;
    *dest = u->data;
    *cookie = u;
    return TNT_SUCCESS;
}

/* on_payload and on_send_done: the communicator is the cookie's
 * (tnt_cookie_t), whichever communicator's context delivered it. */
void tnt__wire_payload(int peer, void *cookie)
{
    const tnt_cookie_t *ck = cookie;
    struct tnt_comm *comm = ck->comm;
    if (ck->type == TNT_COOKIE_CTL)
        return; /* a control message has no payload */
    if (ck->type == TNT_COOKIE_NOTICE) {
        notice_arrived(comm, peer, cookie);
        return;
    }
    if (ck->type == TNT_COOKIE_OP) {
        tnt_opstate_t *os = cookie;
        tnt__op_complete(os->coll, os->op);
        tnt__run_ready(comm, os->coll);
        return;
    }
    tnt_unexp_t *u = cookie;
    u->complete = 1;
    if (!u->claimed)
        return;
    /* A receive was posted while the payload was still arriving. */
    tnt_opstate_t *os = u->claimed;
    tnt__deliver_unexpected(comm, &comm->peers[peer], u, os);
    tnt__run_ready(comm, os->coll);
}

void tnt__wire_send_done(void *cookie)
{
    if (!cookie)
        return; /* a failure notice */
    const tnt_cookie_t *ck = cookie;
    struct tnt_comm *comm = ck->comm;
    if (ck->type == TNT_COOKIE_CTL) {
        tnt__flow_ctl_done(comm, cookie);
        return;
    }
    if (ck->type == TNT_COOKIE_PROGRESS) {
        tnt__progress_sent(comm, cookie);
        return;
    }
    tnt_opstate_t *os = cookie;
    comm->peers[os->coll->sched->ops[os->op].peer].sends_inflight--;
    os->in_tp = 0;
    tnt__op_complete(os->coll, os->op);
    tnt__run_ready(comm, os->coll);
}

/* Has the whole message (seq, step) from p already arrived early? */
static int arrived_early(const tnt_peer_t *p, uint64_t seq, uint32_t step)
{
    for (const tnt_unexp_t *u = p->unexp_head; u; u = u->next)
        if (u->hdr.seq == seq && u->hdr.step == step && u->complete)
            return 1;
    return 0;
}

/* Does an unfinished operation in flight still need `peer`? A receive
 * whose message is already here does not: a peer that finished its part
 * and closed is not an error. */
static int peer_needed(struct tnt_comm *comm, int peer)
{
    const tnt_peer_t *p = &comm->peers[peer];
    for (struct tnt_request *r = tnt__active_first(comm); r;
         r = tnt__active_next(comm, r)) {
        if (r->onhost.algo && tnt__onhost_needs(r, peer))
            return 1;
        for (uint32_t i = 0; i < r->sched->nops; i++) {
            const tnt_sop_t *s = &r->sched->ops[i];
            if (r->ops[i].done || s->peer != peer)
                continue;
            if (s->kind == TNT_SOP_SEND)
                return 1;
            /* A receive whose early message is queued for its copy
             * (os->src) has its data too. */
            if (s->kind == TNT_SOP_RECV && !r->ops[i].src &&
                !arrived_early(p, r->seq, s->step))
                return 1;
        }
    }
    return 0;
}

void tnt__wire_peer_error(struct tnt_comm *comm, int peer, tnt_result_t err,
                          const char *what)
{
    if (peer < 0 || peer >= comm->nranks)
        return;
    tnt_peer_t *p = &comm->peers[peer];
    /* Its segment is still mapped until the next callback: keep what the
     * slot operations in flight still read from it. */
    tnt__onhost_peer_closing(comm, peer);
    p->ep = NULL; /* the transport has closed it */
    if (p->connecting) {
        p->connecting = 0;
        pthread_cond_broadcast(&comm->group->progress.cond); /* see tnt__wire_connected */
    }
    p->sends_inflight = 0;
    p->rx_arriving = 0;
    p->dead = err ? err : TNT_ERR_PEER_LOST;
    tnt__flow_reset_peer(comm, p);
    /* Partial early messages from it can never complete. */
    tnt_unexp_t **pp = &p->unexp_head;
    p->unexp_tail = NULL;
    while (*pp) {
        tnt_unexp_t *u = *pp;
        if (!u->complete && !u->claimed) {
            *pp = u->next;
            tnt__free_unexp(comm, u);
        } else {
            p->unexp_tail = u;
            pp = &u->next;
        }
    }
    if (comm->state == TNT_COMM_OK && peer_needed(comm, peer))
        tnt__fail_peer(comm, peer, p->dead, what ? what : "connection "
                       "closed");
    else if (comm->state == TNT_COMM_OK && !tnt__list_empty(&comm->reqs.active))
        tnt__note_lost(comm, peer, what); /* not needed yet */
    else
        TNT_LOG_DEBUG("rank %d: connection to rank %d closed: %s",
                      comm->rank, peer, what ? what : "");
}

void tnt__wire_group_lost(struct tnt_net_group *g, int peer,
                          tnt_result_t err, const char *what)
{
    if (peer < 0 || peer >= g->nranks)
        return;
    g->conn[peer].ep = NULL;
    g->conn[peer].connecting = 0;
    g->conn[peer].dead = err ? err : TNT_ERR_PEER_LOST;
    struct tnt_comm *next;
    for (struct tnt_comm *c = g->comms; c; c = next) {
        next = c->group_next;
        int r = tnt__net_local(c, peer);
        if (r >= 0)
            tnt__wire_peer_error(c, r, err, what);
    }
}
