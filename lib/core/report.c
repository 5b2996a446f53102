/*
 * The hang report: what each collective in flight on a communicator is
 * waiting for (collective, sequence number, step, peer, bytes). Asked for
 * through tnt_comm_report(), printed on a deadline, and logged by every
 * communicator of the process on SIGUSR1 — the question a user has when a
 * job stalls is "who is waiting for whom", and every rank answers it.
 *
 * SIGUSR1 is taken only if the application left it at its default (which
 * would kill the process) and TNT_REPORT_SIGNAL is not 0. The handler only
 * bumps a counter and writes to one eventfd that every communicator's
 * epoll watches edge-triggered; the poller notices and logs, outside the
 * signal handler.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/comm_live.h"
#include "core/comm_name.h"
#include "core/engine.h"
#include "core/engine_internal.h"
#include "core/p2p.h"
#include "util/error.h"
#include "core/progress_notes.h"
#include "core/report.h"
#include "util/param_table.h"

static volatile sig_atomic_t report_gen;
static int report_fd = -1;
static pthread_once_t report_once = PTHREAD_ONCE_INIT;

static void on_report_signal(int sig)
{
    (void)sig;
    report_gen++;
    uint64_t one = 1;
    ssize_t r = write(report_fd, &one, sizeof(one));
    (void)r;
}

static void report_setup(void)
{
    const char *e = tnt__env(TNT_VAR_REPORT_SIGNAL);
    if (e && strcmp(e, "0") == 0)
        return;
    report_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (report_fd < 0)
        return;
    struct sigaction old;
    if (sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
        return; /* the application's own: leave it alone */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_report_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

int tnt__report_signal_fd(void)
{
    pthread_once(&report_once, report_setup);
    return report_fd;
}

unsigned tnt__report_generation(void)
{
    return (unsigned)report_gen;
}

/* snprintf that appends and never overruns; returns the new length. */
static size_t append(char *buf, size_t len, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t len, size_t n, const char *fmt, ...)
{
    if (n + 1 >= len)
        return n;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
    if (w < 0)
        return n;
    return (size_t)w >= len - n ? len - 1 : n + (size_t)w;
}

/* What a full connection to a peer means, in the words of its transport
 * (the core knows only that the transport holds the send). */
static const char *full_words(const tnt_transport_t *tp)
{
    const char *name = tp && tp->name ? tp->name : "";
    if (strncmp(name, "tcp", 3) == 0)
        return "its socket buffer is full";
    if (strcmp(name, "shm") == 0)
        return "the ring to it is full, or it has not copied the message";
    return "the transport takes no more";
}

/* One send or receive that req waits for, and where it stands: a send
 * parked for the receiver's clear-to-send, or held by the transport (the
 * receiver is not reading, or the connection is stalled: the sender is
 * inside the library, blocked, and not the one behind); a receive whose
 * message has begun arriving (the sender is sending it). */
static size_t describe_op(const struct tnt_comm *comm,
                          const struct tnt_request *req, uint32_t i,
                          double now, char *buf, size_t len, size_t n)
{
    const tnt_sop_t *s = &req->sched->ops[i];
    const tnt_opstate_t *os = &req->ops[i];
    int send = s->kind == TNT_SOP_SEND;
    /* On a derived communicator the peer's world rank too. */
    char world[40] = "";
    int w = comm ? tnt__comm_world_rank(comm, s->peer) : -1;
    if (comm && comm->how[0] && w >= 0)
        snprintf(world, sizeof(world), " = world rank %d", w);
    n = append(buf, len, n, "%s step %u %s rank %d%s (%zu bytes)",
               send ? "send" : "recv", s->step, send ? "to" : "from",
               s->peer, world, s->bytes);
    if (send && os->in_tp)
        n = append(buf, len, n, ", blocked sending to rank %d for %.1f s "
                   "(%s: rank %d is not reading, or the connection is "
                   "stalled)", s->peer, now - os->tp_at,
                   full_words(comm ? comm->peers[s->peer].tp : NULL),
                   s->peer);
    else if (send && os->parked)
        n = append(buf, len, n, ", waiting for rank %d's clear-to-send "
                   "(its receive is not posted)", s->peer);
    else if (!send && os->arriving)
        n = append(buf, len, n, ", arriving (rank %d is sending it)",
                   s->peer);
    return n;
}

void tnt__report_waits(const struct tnt_request *req, char *buf, size_t len)
{
    size_t n = 0;
    int shown = 0;
    double now = tnt__now();
    buf[0] = '\0';
    if (req->onhost.algo && tnt__onhost_report(req, buf, len))
        return;
    /* Only the earliest step waited on: a receive of a later step is
     * posted early, and its sender is not late, only not there yet. */
    uint32_t first = UINT32_MAX;
    for (uint32_t i = 0; i < req->sched->nops; i++) {
        const tnt_sop_t *s = &req->sched->ops[i];
        const tnt_opstate_t *os = &req->ops[i];
        if (!os->done && os->deps_left == 0 && s->step < first &&
            (s->kind == TNT_SOP_SEND || s->kind == TNT_SOP_RECV))
            first = s->step;
    }
    for (uint32_t i = 0; i < req->sched->nops && shown < 4; i++) {
        const tnt_sop_t *s = &req->sched->ops[i];
        const tnt_opstate_t *os = &req->ops[i];
        if (os->done || os->deps_left != 0 || s->step != first)
            continue;
        if (s->kind != TNT_SOP_SEND && s->kind != TNT_SOP_RECV)
            continue;
        if (shown)
            n = append(buf, len, n, "; ");
        n = describe_op(req->comm, req, i, now, buf, len, n);
        shown++;
    }
    if (!shown)
        append(buf, len, 0, "no operation posted");
}

/* ---- who is actually behind, from the progress notes -------------- */

/* Has a message of req from `peer` begun arriving here (its header came,
 * its payload has not, all of it)? Then that peer is inside the library,
 * sending. */
static int message_arriving(const struct tnt_comm *comm,
                            const struct tnt_request *req, int peer)
{
    for (uint32_t i = 0; i < req->sched->nops; i++) {
        const tnt_sop_t *s = &req->sched->ops[i];
        if (s->kind == TNT_SOP_RECV && s->peer == peer &&
            !req->ops[i].done && req->ops[i].arriving)
            return 1;
    }
    for (const tnt_unexp_t *u = comm->peers[peer].unexp_head; u; u = u->next)
        if (u->hdr.seq == req->seq && !u->complete)
            return 1;
    return 0;
}

/* Follow the waits from this rank: each rank that answered and waits in
 * the same collective passes the blame on; the chain ends at a rank that
 * has not reached the collective or did not answer at all. One that did
 * not answer is named by what the others know of it: a rank blocked
 * sending to it says it is not reading; a message from it arriving here
 * says it is inside the library, sending (its answer would queue behind
 * that message), and the connection is what stalls; otherwise it is
 * stopped, or not calling the library. Empty when the chain says nothing
 * new. */
void tnt__report_behind(struct tnt_comm *comm, const struct tnt_request *req,
                        char *buf, size_t len)
{
    uint64_t seq;
    uint32_t step;
    int32_t w;
    int sending;
    tnt__progress_mine(comm, &seq, &step, &w, &sending);
    buf[0] = '\0';
    if (w < 0 || seq != req->seq)
        return;
    double since = comm->fault.probe_at - comm->params.timeout_s;
    char chain[200];
    size_t n = append(chain, sizeof(chain), 0, "%d", comm->rank);
    int from = comm->rank; /* the rank that waits for w */
    int first = w, first_sending = sending;
    for (int hops = 0; w >= 0 && hops < comm->nranks; hops++) {
        n = append(chain, sizeof(chain), n, " -> %d%s", w,
                   sending ? " (send blocked)" : "");
        const tnt_progress_rx_t *g = &comm->peers[w].progress;
        if (w == comm->rank) {
            /* This rank is blocked sending to a rank that answers and
             * waits for it: that rank reads, the bytes do not pass. */
            if (hops == 1 && first_sending && !sending)
                append(buf, len, 0, "the connection to rank %d is "
                       "stalled: rank %d answers, waiting in collective #%"
                       PRIu64 " for what this rank cannot send it; waits: "
                       "%s", first, first, req->seq, chain);
            break;
        }
        if (g->at < since || g->at == 0) {
            if (sending)
                append(buf, len, 0, "rank %d is not reading: rank %d is "
                       "blocked sending to it in collective #%" PRIu64
                       " (the connection takes no more), and rank %d did "
                       "not answer a progress query (stopped, or not "
                       "calling the library?); waits: %s", w, from,
                       req->seq, w, chain);
            else if (message_arriving(comm, req, w))
                append(buf, len, 0, "rank %d is sending its part of "
                       "collective #%" PRIu64 " (its message began "
                       "arriving here), but the rest does not come: it is "
                       "blocked in its send (the connection from it is "
                       "stalled) or stopped in it; waits: %s", w, req->seq,
                       chain);
            else
                append(buf, len, 0, "rank %d is behind: it has not sent "
                       "its part of collective #%" PRIu64 " and did not "
                       "answer a progress query (stopped, or not calling "
                       "the library?); waits: %s", w, req->seq, chain);
            return;
        }
        if (g->step == TNT_PROGRESS_IDLE || g->seq < req->seq) {
            append(buf, len, 0, "rank %d has not reached collective #%"
                   PRIu64 " (its next is #%" PRIu64 "%s); waits: %s", w,
                   req->seq, g->seq, g->step == TNT_PROGRESS_IDLE
                   ? ", not called yet" : ", in flight", chain);
            return;
        }
        if (g->seq > req->seq || g->waits < 0)
            return;
        from = w;
        sending = g->sending;
        w = g->waits;
    }
}

/* Lock held. */
static void describe(struct tnt_comm *comm, char *buf, size_t len)
{
    int inflight = 0;
    for (struct tnt_request *r = tnt__active_first(comm); r;
         r = tnt__active_next(comm, r))
        inflight++;
    char who[256];
    tnt__comm_who(comm, who, sizeof(who));
    size_t n = append(buf, len, 0, "%s (host %s): ", who, comm->host);
    if (comm->state != TNT_COMM_OK)
        n = append(buf, len, n, "failed: %s; ", comm->fail_msg);
    if (!inflight)
        n = append(buf, len, n, "no collective in flight (next is #%"
                   PRIu64 ")", comm->next_seq);
    else
        n = append(buf, len, n, "%d collective%s in flight", inflight,
                   inflight == 1 ? "" : "s");
    for (struct tnt_request *r = tnt__active_first(comm); r;
         r = tnt__active_next(comm, r)) {
        char sig[160], what[400];
        tnt__describe_sig(&r->sig, sig, sizeof(sig));
        tnt__report_waits(r, what, sizeof(what));
        n = append(buf, len, n, "\n  #%" PRIu64 " %s: %u of %u operations "
                   "left, %.1f s to its deadline; waiting for: %s", r->seq,
                   sig, r->ops_left, tnt__request_nops(r),
                   r->timeout.deadline - tnt__now(),
                   what);
    }
}

void tnt__report_log(struct tnt_comm *comm)
{
    /* Asked for explicitly: printed on every rank whatever the log level
     * (one write, so that ranks' reports do not interleave mid-line). */
    char buf[4096];
    describe(comm, buf, sizeof(buf));
    /* Tagged as the log is: by the world rank (util/log.h). */
    fprintf(stderr, "tnt[%d] REPORT: %s\n", comm->world_rank, buf);
}

TNT_API tnt_result_t tnt_comm_report(tnt_comm_t comm, char *buf, size_t len)
{
    TNT_CHECK(tnt__comm_check(comm, "tnt_comm_report"));
    if (!buf || len == 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_report: buffer is "
                          "NULL or empty");
    pthread_mutex_lock(&comm->group->lock);
    describe(comm, buf, len);
    pthread_mutex_unlock(&comm->group->lock);
    return TNT_SUCCESS;
}

/* ---- deadlines: the timeout names who is behind -------------------------------------------------------- */

/* The rank a timed-out collective waits for is often not the one behind:
 * in a ring every rank waits for its left neighbour. So a deadline first
 * asks the peers for their progress and grants them a grace to answer
 * (TNT_PROBE_GRACE_S, at most a quarter of TNT_TIMEOUT); the timeout that
 * follows names the rank the chain of waits ends at (report.c). */
#define TNT_PROBE_GRACE_S 1.0

void tnt__report_check_deadlines(struct tnt_comm *comm, double now)
{
    /* A receive from any source whose deadline passed with no sender
     * (or one behind it): no peer is behind in a chain of waits to ask
     * about. */
    tnt_list_node_t *it, *nx;
    TNT_LIST_FOREACH_SAFE(&comm->reqs.any, it, nx) {
        struct tnt_request *r =
            TNT_LIST_ENTRY(it, struct tnt_request, any_link);
        if (now < r->timeout.deadline)
            continue;
        if (r->args.root == TNT_ANY_SOURCE)
            tnt__engine_fail(comm, TNT_ERR_TIMEOUT, "rank %d: receive from "
                             "any source of %zu %s with tag %u timed out "
                             "after %.1f s (TNT_TIMEOUT): no rank sent a "
                             "message with that tag", comm->rank,
                             r->args.count, tnt_dtype_name(r->args.dtype),
                             r->args.tag, comm->params.timeout_s);
        else
            tnt__engine_fail(comm, TNT_ERR_TIMEOUT, "rank %d: receive from "
                             "rank %d of %zu %s with tag %u timed out after "
                             "%.1f s (TNT_TIMEOUT) behind a receive from any "
                             "source with that tag that no rank sent",
                             comm->rank, r->args.root, r->args.count,
                             tnt_dtype_name(r->args.dtype), r->args.tag,
                             comm->params.timeout_s);
        return;
    }
    for (struct tnt_request *r = tnt__active_first(comm); r;
         r = tnt__active_next(comm, r)) {
        if (now < r->timeout.deadline)
            continue;
        if (!r->timeout.probed) {
            double grace = comm->params.timeout_s / 4 < TNT_PROBE_GRACE_S
                               ? comm->params.timeout_s / 4
                               : TNT_PROBE_GRACE_S;
            r->timeout.probed = 1;
            r->timeout.deadline = now + grace;
            comm->fault.probe_at = now;
            tnt__progress_send(comm);
            return;
        }
        char what[400], sig[160], behind[400], who[256];
        tnt__report_waits(r, what, sizeof(what));
        tnt__describe_sig(&r->sig, sig, sizeof(sig));
        tnt__report_behind(comm, r, behind, sizeof(behind));
        tnt__comm_who(comm, who, sizeof(who));
        tnt__engine_fail(comm, TNT_ERR_TIMEOUT, "%s: %s #%" PRIu64
                         " timed out after %.1f s (TNT_TIMEOUT)%s%s, %u of %u "
                         "operations left; waiting for: %s", who, sig,
                         r->seq & ~TNT_P2P_SEQ_BIT, comm->params.timeout_s,
                         *behind ? ": " : "",
                         behind, r->ops_left, tnt__request_nops(r), what);
        return;
    }
}
