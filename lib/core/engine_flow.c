/*
 * Flow control (see engine_flow.h for the protocol and its bounds).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/engine_flow.h"
#include "core/engine_internal.h"
#include "core/p2p.h"
#include "util/error.h"

/* The broadcast signature check's steps must not carry the RTS/CTS bits,
 * even after as many rounds as a 2^32-rank job would need. */
_Static_assert(((TNT_SIG_CHECK_STEP + 32u) & TNT_STEP_CTL) == 0,
               "TNT_SIG_CHECK_STEP overlaps the flow-control step bits");

size_t tnt__flow_window(const struct tnt_comm *comm)
{
    size_t w = comm->params.eager_window;
    size_t share = comm->params.max_unexpected_bytes /
                   (size_t)(comm->nranks > 1 ? comm->nranks - 1 : 1);
    return w < share ? w : share;
}

size_t tnt__flow_eager(const struct tnt_comm *comm)
{
    size_t e = comm->params.eager_bytes, half = tnt__flow_window(comm) / 2;
    return e < half ? e : half;
}

int tnt__flow_budget(struct tnt_comm *comm, int peer, size_t payload_len)
{
    size_t room = comm->params.max_unexpected_bytes - comm->unexp_bytes;
    if (room >= TNT_UNEXP_COST(0) && payload_len <= room - TNT_UNEXP_COST(0))
        return 1;
    tnt__engine_fail(comm, TNT_ERR_NO_MEMORY, "rank %d: early messages "
                     "would exceed TNT_MAX_UNEXPECTED_BYTES=%zu: %zu bytes "
                     "are held by messages that arrived before their "
                     "receives were posted, and rank %d sent another (%zu "
                     "bytes of data, %zu with its record); post the "
                     "receives sooner or raise TNT_MAX_UNEXPECTED_BYTES",
                     comm->rank, comm->params.max_unexpected_bytes,
                     comm->unexp_bytes, peer, payload_len,
                     TNT_UNEXP_COST(payload_len));
    return 0;
}

/* Send a header-only control message to p; what: TNT_CTL_*. */
static void send_ctl(struct tnt_comm *comm, tnt_peer_t *p,
                     const tnt_msg_hdr_t *h, int what)
{
    tnt_ctl_tx_t *c = comm->flow.ctl_free;
    if (c) {
        comm->flow.ctl_free = c->next;
    } else {
        c = calloc(1, sizeof(*c));
        if (!c) {
            tnt__engine_fail(comm, TNT_ERR_NO_MEMORY, "rank %d: out of "
                             "memory for a flow-control message",
                             comm->rank);
            return;
        }
        c->ck.type = TNT_COOKIE_CTL;
        c->ck.comm = comm;
        c->all_next = comm->flow.ctl_all;
        comm->flow.ctl_all = c;
    }
    c->peer = p->rank;
    c->hdr = *h;
    tnt_result_t rc = p->tp->send(p->tp_ctx, p->ep, &c->hdr, sizeof(c->hdr),
                                  NULL, 0, c);
    if (rc >= 0) {
        tnt__count_sent(&comm->stats, p->tpi, 0);
        comm->stats.ctl_sent[what]++;
    }
    if (rc == TNT_INPROGRESS) {
        p->sends_inflight++;
        return;
    }
    c->next = comm->flow.ctl_free;
    comm->flow.ctl_free = c;
    /* A credit nobody waits for yet (the peer may have finished and
     * closed) is no reason to fail; an RTS or CTS is awaited. */
    if (rc < 0 && h->kind != TNT_MSG_CREDIT) {
        char what[300];
        snprintf(what, sizeof(what), "sending a flow-control message "
                 "failed: %s", tnt_last_error());
        tnt__fail_peer_lost(comm, p->rank, what);
    }
}

void tnt__flow_ctl_done(struct tnt_comm *comm, void *cookie)
{
    tnt_ctl_tx_t *c = cookie;
    comm->peers[c->peer].sends_inflight--;
    c->next = comm->flow.ctl_free;
    comm->flow.ctl_free = c;
}

/* The CTS of req's receives from p at steps step .. step + span - 1. */
static void send_cts_run(struct tnt_comm *comm, tnt_peer_t *p,
                         struct tnt_request *req, uint32_t step,
                         uint32_t span)
{
    tnt_msg_hdr_t h = req->sig;
    h.seq = req->seq;
    h.step = step | TNT_STEP_CTS;
    h.count = span;
    send_ctl(comm, p, &h, TNT_CTL_CTS);
}

/* The CTS of os alone, now. */
static void send_cts(struct tnt_comm *comm, tnt_peer_t *p, tnt_opstate_t *os)
{
    if (os->cts_sent)
        return;
    if (!p->ep) {
        os->cts_due = 1; /* tnt__flow_connected sends it */
        return;
    }
    os->cts_sent = 1;
    os->cts_due = 0;
    send_cts_run(comm, p, os->coll, os->coll->sched->ops[os->op].step, 1);
}

/* The CTS of os, with the others owed, once this run of tnt__run_ready
 * has started every ready receive (tnt__flow_flush); at once without TNT_FLOW_BATCH, or if the list
 * cannot grow. */
static void owe_cts(struct tnt_comm *comm, tnt_peer_t *p, tnt_opstate_t *os)
{
    struct tnt_comm_flow *f = &comm->flow;
    if (os->cts_sent || !p->ep || !comm->params.flow_batch) {
        send_cts(comm, p, os);
        return;
    }
    if (f->nowed == f->owed_cap) {
        size_t cap = f->owed_cap ? 2 * f->owed_cap : 64;
        tnt_opstate_t **v = realloc(f->owed, cap * sizeof(*v));
        if (!v) {
            send_cts(comm, p, os);
            return;
        }
        f->owed = v;
        f->owed_cap = cap;
    }
    os->cts_sent = 1;
    os->cts_due = 0;
    f->owed[f->nowed++] = os;
}

static int owed_peer(const tnt_opstate_t *os)
{
    return os->coll->sched->ops[os->op].peer;
}

static uint32_t owed_step(const tnt_opstate_t *os)
{
    return os->coll->sched->ops[os->op].step;
}

/* By peer, collective, step: runs of consecutive steps end up adjacent. */
static int owed_cmp(const void *a, const void *b)
{
    const tnt_opstate_t *x = *(tnt_opstate_t *const *)a;
    const tnt_opstate_t *y = *(tnt_opstate_t *const *)b;
    int px = owed_peer(x), py = owed_peer(y);
    if (px != py)
        return px < py ? -1 : 1;
    if (x->coll != y->coll)
        return (uintptr_t)x->coll < (uintptr_t)y->coll ? -1 : 1;
    uint32_t sx = owed_step(x), sy = owed_step(y);
    return sx < sy ? -1 : sx > sy;
}

/* Heap sort, in place: no allocation here (glibc's qsort may malloc for
 * large arrays, and a steady collective allocates nothing). */
static void owed_sift(tnt_opstate_t **v, size_t i, size_t n)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && owed_cmp(&v[c + 1], &v[c]) > 0)
            c++;
        if (owed_cmp(&v[c], &v[i]) <= 0)
            return;
        tnt_opstate_t *t = v[i];
        v[i] = v[c];
        v[c] = t;
        i = c;
    }
}

static void owed_sort(tnt_opstate_t **v, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        owed_sift(v, i, n);
    while (n > 1) {
        tnt_opstate_t *t = v[0];
        v[0] = v[--n];
        v[n] = t;
        owed_sift(v, 0, n);
    }
}

void tnt__flow_flush(struct tnt_comm *comm)
{
    struct tnt_comm_flow *f = &comm->flow;
    size_t n = f->nowed;
    f->nowed = 0;
    /* A failure in this run may have finished their requests. */
    if (comm->state != TNT_COMM_OK)
        return;
    tnt_opstate_t **v = f->owed;
    owed_sort(v, n);
    /* A schedule has one message per (source, destination, step)
     * (test_schedules checks it), so a run of consecutive steps of one
     * collective from one peer is exactly the peer's sends at those
     * steps, and every one of them has its receive posted here. */
    for (size_t i = 0; i < n && comm->state == TNT_COMM_OK;) {
        struct tnt_request *req = v[i]->coll;
        int peer = owed_peer(v[i]);
        uint32_t step = owed_step(v[i]), span = 1;
        size_t j = i + 1;
        while (j < n && v[j]->coll == req && owed_peer(v[j]) == peer &&
               owed_step(v[j]) == step + span) {
            span++;
            j++;
        }
        tnt_peer_t *p = &comm->peers[peer];
        if (p->ep) {
            send_cts_run(comm, p, req, step, span);
        } else {
            for (size_t k = i; k < j; k++) { /* tnt__flow_connected */
                v[k]->cts_sent = 0;
                v[k]->cts_due = 1;
            }
        }
        i = j;
    }
}

/* Hand send `op`'s message to the transport now (flow control has let
 * it go): the bottom of the send path. Its result goes back the way every
 * transport result does: a send done now completes the operation
 * (tnt__op_complete), one in progress waits for on_send_done, a failure
 * fails the communicator naming the peer. */
static void send_data(struct tnt_comm *comm, struct tnt_request *req,
                      uint32_t op)
{
    const tnt_sop_t *sop = &req->sched->ops[op];
    tnt_opstate_t *os = &req->ops[op];
    tnt_peer_t *p = &comm->peers[sop->peer];
    tnt_result_t rc = p->tp->send(p->tp_ctx, p->ep, &os->hdr,
                                  sizeof(os->hdr), tnt__ref_ptr(req, sop->a),
                                  sop->bytes, os);
    if (rc >= 0)
        tnt__count_sent(&comm->stats, p->tpi, sop->bytes);
    if (rc == TNT_SUCCESS) {
        tnt__op_complete(req, op);
    } else if (rc == TNT_INPROGRESS) {
        p->sends_inflight++;
        os->in_tp = 1;
        os->tp_at = tnt__now();
    } else if (rc < 0) {
        char what[300];
        snprintf(what, sizeof(what), "sending %s #%" PRIu64 " failed: %s",
                 tnt__coll_kind_name(req->args.kind),
                 req->seq & ~TNT_P2P_SEQ_BIT,
                 tnt_last_error());
        tnt__fail_peer_lost(comm, sop->peer, what);
    }
}

void tnt__flow_send(struct tnt_comm *comm, struct tnt_request *req,
                    uint32_t op)
{
    const tnt_sop_t *sop = &req->sched->ops[op];
    tnt_opstate_t *os = &req->ops[op];
    tnt_peer_t *p = &comm->peers[sop->peer];
    /* A CTS that came before the send: the receive is posted. */
    for (tnt_unexp_t **pp = &p->cts_head; *pp; pp = &(*pp)->next) {
        tnt_unexp_t *u = *pp;
        if (u->hdr.seq == req->seq &&
            sop->step - (u->hdr.step & ~TNT_STEP_CTL) < u->hdr.count) {
            if (--u->cts_left == 0) {
                *pp = u->next;
                tnt__free_unexp(comm, u);
            }
            send_data(comm, req, op);
            return;
        }
    }
    size_t cost = TNT_UNEXP_COST(sop->bytes);
    if (sop->bytes <= tnt__flow_eager(comm) &&
        p->tx_eager - p->tx_acked + cost <= tnt__flow_window(comm)) {
        p->tx_eager += cost;
        send_data(comm, req, op);
        return;
    }
    /* Wait for the receiver; say so, with the signature, unless an RTS
     * of this collective has said so already and the receiver clears
     * this send unasked (above E; not for the kinds whose RTS carries
     * the message's own size). */
    os->parked = 1;
    os->next = p->parked_head;
    p->parked_head = os;
    if (comm->params.flow_batch && p->rts_seq1 == req->seq + 1 &&
        sop->bytes > tnt__flow_eager(comm) &&
        req->args.kind != TNT_COLL_ALLTOALLV &&
        req->args.kind != TNT_COLL_P2P)
        return;
    p->rts_seq1 = req->seq + 1;
    tnt_msg_hdr_t h = os->hdr;
    h.step |= TNT_STEP_RTS;
    send_ctl(comm, p, &h, TNT_CTL_RTS);
}

void tnt__flow_recv_posted(struct tnt_comm *comm, tnt_peer_t *p,
                           tnt_opstate_t *os, int rts)
{
    const tnt_sop_t *sop = &os->coll->sched->ops[os->op];
    if (rts || sop->bytes > tnt__flow_eager(comm))
        owe_cts(comm, p, os);
}

void tnt__flow_consumed(struct tnt_comm *comm, tnt_peer_t *p, size_t len)
{
    p->rx_consumed += TNT_UNEXP_COST(len);
    if (p->rx_consumed - p->rx_reported < tnt__flow_window(comm) / 4 ||
        !p->ep)
        return;
    tnt_msg_hdr_t h = {0};
    h.magic = TNT_MSG_MAGIC;
    h.comm_id = comm->comm_id;
    h.kind = TNT_MSG_CREDIT;
    h.count = p->rx_consumed;
    h.nranks = comm->nranks;
    p->rx_reported = p->rx_consumed;
    send_ctl(comm, p, &h, TNT_CTL_CREDIT);
}

void tnt__flow_credit(struct tnt_comm *comm, int peer, uint64_t consumed)
{
    tnt_peer_t *p = &comm->peers[peer];
    /* Cumulative, so credits overtaking each other on parallel sockets
     * do no harm; never more than was sent. */
    if (consumed > p->tx_acked && consumed <= p->tx_eager)
        p->tx_acked = consumed;
}

void tnt__flow_connected(struct tnt_comm *comm, tnt_peer_t *p)
{
    for (tnt_opstate_t *os = p->posted; os && comm->state == TNT_COMM_OK;
         os = os->next)
        if (os->cts_due)
            owe_cts(comm, p, os);
    tnt__flow_flush(comm);
}

/* Keep a CTS for `left` sends that have not started here yet. */
static int keep_cts(struct tnt_comm *comm, tnt_peer_t *p,
                    const tnt_msg_hdr_t *h, uint64_t left)
{
    if (!tnt__flow_budget(comm, p->rank, 0))
        return -1;
    tnt_unexp_t *u = tnt__alloc_unexp(comm);
    if (!u) {
        tnt__engine_fail(comm, TNT_ERR_NO_MEMORY, "rank %d: out of memory "
                         "for a flow-control record", comm->rank);
        return -1;
    }
    u->ck.type = TNT_COOKIE_UNEXP;
    u->ck.comm = comm;
    u->hdr = *h;
    u->len = 0;
    u->data = NULL;
    u->cap = 0;
    u->complete = 1;
    u->claimed = NULL;
    u->cts_left = left;
    comm->unexp_bytes += TNT_UNEXP_COST(0);
    tnt__count_unexp(&comm->stats, comm->unexp_bytes);
    u->next = p->cts_head;
    p->cts_head = u;
    return 1;
}

/* A CTS for sends of req (steps lo .. lo + count - 1): send those that
 * are parked, and keep it for the others (not started here yet) until
 * each has used it. */
static int cts_arrived(struct tnt_comm *comm, tnt_peer_t *p,
                       const tnt_msg_hdr_t *h, struct tnt_request *req)
{
    uint32_t lo = h->step & ~TNT_STEP_CTL;
    uint64_t left = h->count; /* >= 1 (tnt__msg_hdr_parse) */
    int sent = 0;
    for (tnt_opstate_t **pp = &p->parked_head; *pp && left;) {
        tnt_opstate_t *os = *pp;
        if (os->coll != req ||
            req->sched->ops[os->op].step - lo >= h->count) {
            pp = &os->next;
            continue;
        }
        *pp = os->next;
        os->parked = 0;
        left--;
        sent = 1;
        send_data(comm, req, os->op);
        if (comm->state != TNT_COMM_OK)
            return -1;
    }
    /* The record goes in before the ready sends start (they look for
     * it). */
    int rc = left ? keep_cts(comm, p, h, left) : 1;
    if (sent && rc == 1)
        tnt__run_ready(comm, req);
    return rc;
}

int tnt__flow_header(struct tnt_comm *comm, int peer, const tnt_msg_hdr_t *h,
                     struct tnt_request *req)
{
    tnt_peer_t *p = &comm->peers[peer];
    if (h->step & TNT_STEP_CTS) {
        /* A CTS for a collective that finished here answers an RTS this
         * rank never needed to send: nothing to do. */
        if (!req && h->seq < comm->next_seq)
            return 1;
        return cts_arrived(comm, p, h, req);
    }
    /* An RTS. Over parallel sockets the data it announced can overtake
     * it: once the receive has sent its CTS, a late RTS is stale, also
     * when its collective has finished here. */
    if (!req) {
        if (h->seq >= comm->next_seq)
            return 0; /* before its collective: an early record */
        return tnt__mismatch_past(comm, h, peer) ? -1 : 1;
    }
    uint32_t step = h->step & ~TNT_STEP_CTL;
    for (tnt_opstate_t *os = p->posted; os; os = os->next)
        if (os->coll == req && req->sched->ops[os->op].step == step) {
            if (tnt__vsize_mismatch(comm, req, peer, h,
                                    &req->sched->ops[os->op]))
                return -1;
            send_cts(comm, p, os);
            return 1;
        }
    for (uint32_t i = 0; i < req->sched->nops; i++) {
        const tnt_sop_t *sop = &req->sched->ops[i];
        if (sop->kind == TNT_SOP_RECV && sop->peer == peer &&
            sop->step == step)
            return req->ops[i].cts_sent ? 1 : 0;
    }
    return 0; /* no such receive: post_recv never claims it, and the
                 early-message check names the mismatch */
}

void tnt__flow_reset_peer(struct tnt_comm *comm, tnt_peer_t *p)
{
    while (p->cts_head) {
        tnt_unexp_t *u = p->cts_head;
        p->cts_head = u->next;
        tnt__free_unexp(comm, u);
    }
    for (tnt_opstate_t *os = p->parked_head; os; os = os->next)
        os->parked = 0;
    p->parked_head = NULL;
}

void tnt__flow_free(struct tnt_comm *comm)
{
    while (comm->flow.ctl_all) {
        tnt_ctl_tx_t *c = comm->flow.ctl_all;
        comm->flow.ctl_all = c->all_next;
        free(c);
    }
    comm->flow.ctl_free = NULL;
    free(comm->flow.owed);
    comm->flow.owed = NULL;
    comm->flow.nowed = comm->flow.owed_cap = 0;
}
