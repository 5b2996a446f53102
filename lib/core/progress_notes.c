/*
 * Progress notes: a rank tells its peers how far it got (its oldest
 * collective in flight, the step and the peer it waits for there), when
 * a deadline comes near or a peer asks; the hang report (report.c)
 * follows the notes along the chain of waits to the rank that is behind.
 * The notes travel as notices on the pairs' connections; the engine's
 * upcalls (engine_wire.c) hand them in here, so this sits below them
 * and reads only the requests in flight.
 */
#include <string.h>

#include "core/engine_internal.h"
#include "core/progress_notes.h"

/* This rank's oldest collective in flight and what it waits for there:
 * the earliest step with a receive not yet done or a send the transport
 * holds (*sending: the wait is that send; it wins a tie, since a rank
 * blocked sending to a peer waits for that peer to read, whatever it
 * receives), or the next collective when none is in flight. */
void tnt__progress_mine(struct tnt_comm *comm, uint64_t *seq,
                        uint32_t *step, int32_t *waits, int *sending)
{
    const struct tnt_request *old = NULL;
    for (const struct tnt_request *r = tnt__active_first(comm); r;
         r = tnt__active_next(comm, r))
        if (r->args.kind != TNT_COLL_P2P && (!old || r->seq < old->seq))
            old = r; /* a p2p's seq is not the collectives' (p2p.h) */
    *seq = old ? old->seq : comm->next_seq;
    *step = old ? 0 : TNT_PROGRESS_IDLE;
    *waits = -1;
    *sending = 0;
    if (!old || old->onhost.algo)
        return;
    for (uint32_t i = 0; i < old->sched->nops; i++) {
        const tnt_sop_t *s = &old->sched->ops[i];
        const tnt_opstate_t *os = &old->ops[i];
        int blocked = s->kind == TNT_SOP_SEND && os->in_tp;
        if (os->done || os->deps_left != 0 ||
            (s->kind != TNT_SOP_RECV && !blocked))
            continue;
        if (*waits < 0 || s->step < *step ||
            (s->step == *step && blocked && !*sending)) {
            *step = s->step;
            *waits = s->peer;
            *sending = blocked;
        }
    }
}

void tnt__progress_send(struct tnt_comm *comm)
{
    uint64_t seq;
    uint32_t step;
    int32_t waits;
    int sending;
    tnt__progress_mine(comm, &seq, &step, &waits, &sending);
    comm->fault.progress_sent = seq + 1;
    for (int i = 0; i < comm->nranks; i++) {
        tnt_peer_t *p = &comm->peers[i];
        tnt_progress_tx_t *t = &p->progress_tx;
        /* Only in frame, and one note per peer at a time. */
        if (!p->ep || p->sends_inflight || t->busy)
            continue;
        memset(t, 0, sizeof(*t));
        t->ck.type = TNT_COOKIE_PROGRESS;
        t->ck.comm = comm;
        t->peer = i;
        t->hdr.magic = TNT_MSG_MAGIC;
        t->hdr.comm_id = comm->comm_id;
        t->hdr.kind = TNT_MSG_NOTICE;
        t->hdr.count = 0; /* result 0: progress, not a failure */
        t->hdr.seq = seq;
        t->hdr.step = step;
        t->hdr.root = waits;
        t->hdr.op = sending ? TNT_PROGRESS_SENDING : 0;
        t->hdr.nranks = comm->nranks;
        tnt_result_t rc = p->tp->send(p->tp_ctx, p->ep, &t->hdr,
                                      sizeof(t->hdr), NULL, 0, t);
        if (rc == TNT_INPROGRESS) {
            t->busy = 1;
            p->sends_inflight++;
        }
    }
}

void tnt__progress_sent(struct tnt_comm *comm, tnt_progress_tx_t *t)
{
    t->busy = 0;
    comm->peers[t->peer].sends_inflight--;
}

void tnt__progress_arrived(struct tnt_comm *comm, int peer,
                           const tnt_notice_rx_t *n)
{
    tnt_progress_rx_t *g = &comm->peers[peer].progress;
    g->at = tnt__now();
    g->seq = n->seq;
    g->step = n->step;
    g->waits = n->waits >= 0 && n->waits < comm->nranks ? n->waits : -1;
    g->sending = g->waits >= 0 && n->sending;
    /* Answer once per collective, so that the asker hears every rank. */
    uint64_t seq;
    uint32_t step;
    int32_t waits;
    int sending;
    tnt__progress_mine(comm, &seq, &step, &waits, &sending);
    if (comm->fault.progress_sent != seq + 1)
        tnt__progress_send(comm);
}
