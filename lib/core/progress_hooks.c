/*
 * What the engine, the on-host algorithms, the report and the timeline
 * run in the progress loop (core/progress.h, tnt_progress_hooks_t): the
 * loop knows only these entries, set at communicator creation (comm.c).
 * Every entry runs with comm->group->lock held unless it says otherwise.
 */
#include <string.h>

#include "core/engine.h"
#include "core/p2p.h"
#include "core/progress.h"
#include "core/report.h"
#include "core/timeline.h"
#include "util/clock.h"

/* Work other threads queued for the poller: deferred collectives to
 * start, large reductions posted by another thread (lock released while
 * they run; nobody else polls meanwhile), a mapped allreduce with more
 * of its slice to reduce. */
static int queued_work(struct tnt_comm *comm)
{
    int more = 0;
    if (!tnt__list_empty(&comm->reqs.deferred)) {
        tnt__engine_run_deferred(comm);
        more = 1; /* what they started may need more at once */
    }
    if (tnt__engine_run_heavy(comm) || comm->onhost.stage_more)
        more = 1;
    return more;
}

/* About to sleep: nothing wakes this rank for a mismatch that meets in
 * no shared memory, and peers may wait for it; peers that sleep on this
 * rank's slot publications are woken. */
static int before_sleep(struct tnt_comm *comm)
{
    int stay = 0;
    if (comm->intra_host) {
        tnt__onhost_before_sleep(comm);
        stay = comm->state != TNT_COMM_OK;
    }
    tnt__onhost_notify(comm);
    return stay;
}

/* A spin's look at the rings: the on-host collectives (not messages),
 * then what the look made ready. */
static void after_look(struct tnt_comm *comm)
{
    if (comm->intra_host)
        tnt__onhost_progress(comm);
    tnt__engine_run_heavy(comm);
    /* Receives from any source whose sender's message has come. */
    if (!tnt__list_empty(&comm->reqs.any))
        tnt__p2p_any_match(comm);
}

/* A SIGUSR1 since the last look: log the hang report. */
static void serve_report_request(struct tnt_comm *comm)
{
    unsigned gen = tnt__report_generation();
    if (gen != comm->fault.report_seen) {
        comm->fault.report_seen = gen;
        tnt__report_log(comm);
    }
}

/* What a batch of events leaves to do, in this order: slot operations
 * are not messages, so look at them after every batch (and after the
 * arming before it, so that an input published before the peer saw the
 * flag is seen before this rank sleeps), and at peers' slots that no
 * call here matches; then what the callbacks made ready, now that no
 * transport is inside a call (the lock may be released); then the
 * deadlines and a report request. */
static void after_batch(struct tnt_comm *comm)
{
    after_look(comm);
    tnt__report_check_deadlines(comm, tnt__now());
    serve_report_request(comm);
}

/* The progress thread's turn: the timeline's ring half full is written
 * out, without the lock, so that no collective waits for the file;
 * otherwise detached requests that finished are freed. */
static int thread_turn(struct tnt_comm *comm)
{
    if (comm->timeline && tnt__tl_want_flush(comm->timeline)) {
        pthread_mutex_unlock(&comm->group->lock);
        tnt__tl_flush(comm->timeline);
        pthread_mutex_lock(&comm->group->lock);
        return 1;
    }
    tnt__engine_reap(comm);
    return 0;
}

static void fail(struct tnt_comm *comm, tnt_result_t rc, const char *msg)
{
    tnt__engine_fail(comm, rc, "%s", msg);
}

/* SIGUSR1's eventfd (report.c); the generation seen so far. */
static int signal_fd(struct tnt_comm *comm)
{
    int fd = tnt__report_signal_fd();
    comm->fault.report_seen = tnt__report_generation();
    return fd;
}

const tnt_progress_hooks_t tnt__engine_progress_hooks = {
    .queued_work = queued_work,
    .before_sleep = before_sleep,
    .after_look = after_look,
    .after_batch = after_batch,
    .thread_turn = thread_turn,
    .thread_start = tnt__tl_is_progress_thread,
    .fail = fail,
    .signal_fd = signal_fd,
};
