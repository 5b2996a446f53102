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

#include "core/comm.h"
#include "core/engine.h"
#include "core/engine_internal.h"
#include "util/error.h"
#include "core/report.h"

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
    const char *e = getenv("TNT_REPORT_SIGNAL");
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

void tnt__report_waits(const struct tnt_request *req, char *buf, size_t len)
{
    size_t n = 0;
    int shown = 0;
    buf[0] = '\0';
    if (tnt__algo_in_memory(req->algo) && tnt__slot_report(req, buf, len))
        return;
    for (uint32_t i = 0; i < req->sched->nops && shown < 4; i++) {
        const tnt_sop_t *s = &req->sched->ops[i];
        const tnt_opstate_t *os = &req->ops[i];
        if (os->done || os->deps_left != 0)
            continue;
        if (s->kind != TNT_SOP_SEND && s->kind != TNT_SOP_RECV)
            continue;
        n = append(buf, len, n, "%s%s step %u %s rank %d (%zu bytes)",
                   shown ? "; " : "",
                   s->kind == TNT_SOP_SEND ? "send" : "recv", s->step,
                   s->kind == TNT_SOP_SEND ? "to" : "from", s->peer,
                   s->bytes);
        shown++;
    }
    if (!shown)
        append(buf, len, 0, "no operation posted");
}

/* Lock held. */
static void describe(struct tnt_comm *comm, char *buf, size_t len)
{
    int inflight = 0;
    for (struct tnt_request *r = comm->active_head; r; r = r->next)
        inflight++;
    size_t n = append(buf, len, 0, "rank %d (host %s): ", comm->rank,
                      comm->host);
    if (comm->state != TNT_COMM_OK)
        n = append(buf, len, n, "failed: %s; ", comm->fail_msg);
    if (!inflight)
        n = append(buf, len, n, "no collective in flight (next is #%"
                   PRIu64 ")", comm->next_seq);
    else
        n = append(buf, len, n, "%d collective%s in flight", inflight,
                   inflight == 1 ? "" : "s");
    for (struct tnt_request *r = comm->active_head; r; r = r->next) {
        char sig[160], what[400];
        tnt__describe_sig(&r->sig, sig, sizeof(sig));
        tnt__report_waits(r, what, sizeof(what));
        n = append(buf, len, n, "\n  #%" PRIu64 " %s: %u of %u operations "
                   "left, %.1f s to its deadline; waiting for: %s", r->seq,
                   sig, r->ops_left, tnt__request_nops(r),
                   r->deadline - tnt__now(),
                   what);
    }
}

void tnt__report_log(struct tnt_comm *comm)
{
    /* Asked for explicitly: printed on every rank whatever the log level
     * (one write, so that ranks' reports do not interleave mid-line). */
    char buf[4096];
    describe(comm, buf, sizeof(buf));
    fprintf(stderr, "tnt[%d] REPORT: %s\n", comm->rank, buf);
}

TNT_API tnt_result_t tnt_comm_report(tnt_comm_t comm, char *buf, size_t len)
{
    TNT_CHECK(tnt__comm_check(comm, "tnt_comm_report"));
    if (!buf || len == 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_report: buffer is "
                          "NULL or empty");
    pthread_mutex_lock(&comm->lock);
    describe(comm, buf, len);
    pthread_mutex_unlock(&comm->lock);
    return TNT_SUCCESS;
}
