/*
 * Polling, the progress thread, and the fd services offered to transports:
 * the loop at the bottom of the core. It calls nothing above it by name:
 * what the engine, the on-host algorithms, the report and the timeline
 * run in it comes through comm->group->progress.hooks (progress.h,
 * progress_hooks.c).
 * The poller (one thread at a time) blocks in epoll_wait with the
 * communicator lock released and dispatches readiness to transport
 * callbacks with the lock held (letting a thread that waits to post in
 * between two callbacks), then runs the large reductions and copies the
 * callbacks made ready, with the lock released (engine_compute.c). A
 * thread blocked in a wait is the poller itself, so that a small blocking
 * collective finishes on the caller's thread without two context switches
 * through the progress thread; the progress thread parks meanwhile and
 * polls for nonblocking work, dead peers and early messages otherwise.
 * Only a thread blocked in a collective spins, for up to TNT_SPIN_US
 * before its first sleep (shorter while spins lose the CPU to other
 * threads), a blocking call for as long as calls like it took while no
 * other thread wants its CPU (tnt__progress_spin, core/wait_budget.h);
 * the progress thread never does. While collectives are in flight the poller wakes at least
 * once a second to enforce deadlines, and after two idle seconds it sleeps
 * until an fd or the wake eventfd fires.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/engine_internal.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "core/progress.h"

#define IDLE_GRACE_S 2.0
#define MAX_EVENTS 64
/* How long the progress thread stays parked after a blocking call. */
#define PARK_GRACE_S 0.1

static uint32_t to_epoll(uint32_t events)
{
    uint32_t e = 0;
    if (events & TNT_FD_READ)
        e |= EPOLLIN;
    if (events & TNT_FD_WRITE)
        e |= EPOLLOUT;
    return e;
}

static uint32_t from_epoll(uint32_t e)
{
    uint32_t events = 0;
    /* Errors and hang-ups are reported as readable: the transport finds
     * out what happened from the read itself. */
    if (e & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))
        events |= TNT_FD_READ;
    if (e & EPOLLOUT)
        events |= TNT_FD_WRITE;
    return events;
}

static tnt_result_t svc_watch_fd(void *core, int fd, uint32_t events,
                                 tnt_fd_cb_t cb, void *arg)
{
    struct tnt_net_group *g = core;
    if (fd < 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "watch of fd %d", fd);
    if (fd >= g->progress.watches_cap) {
        int cap =
            g->progress.watches_cap ? g->progress.watches_cap : 64;
        while (cap <= fd)
            cap *= 2;
        tnt_watch_t **n =
            realloc(g->progress.watches, (size_t)cap * sizeof(*n));
        if (!n)
            return tnt__error(TNT_ERR_NO_MEMORY, "out of memory watching "
                              "fd %d", fd);
        memset(n + g->progress.watches_cap, 0,
               (size_t)(cap - g->progress.watches_cap) * sizeof(*n));
        g->progress.watches = n;
        g->progress.watches_cap = cap;
    }
    tnt_watch_t *w = calloc(1, sizeof(*w));
    if (!w)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory watching fd");
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    struct epoll_event ev = {.events = to_epoll(events), .data.ptr = w};
    if (epoll_ctl(g->progress.epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        int e = errno;
        free(w);
        return tnt__error(TNT_ERR_SYSTEM, "epoll_ctl(ADD, fd %d): %s", fd,
                          strerror(e));
    }
    g->progress.watches[fd] = w;
    return TNT_SUCCESS;
}

static tnt_result_t svc_modify_fd(void *core, int fd, uint32_t events,
                                  tnt_fd_cb_t cb, void *arg)
{
    struct tnt_net_group *g = core;
    if (fd < 0 || fd >= g->progress.watches_cap ||
        !g->progress.watches[fd])
        return tnt__error(TNT_ERR_INVALID_ARG, "fd %d is not watched", fd);
    tnt_watch_t *w = g->progress.watches[fd];
    w->cb = cb;
    w->arg = arg;
    struct epoll_event ev = {.events = to_epoll(events), .data.ptr = w};
    if (epoll_ctl(g->progress.epfd, EPOLL_CTL_MOD, fd, &ev) != 0)
        return tnt__error(TNT_ERR_SYSTEM, "epoll_ctl(MOD, fd %d): %s", fd,
                          strerror(errno));
    return TNT_SUCCESS;
}

static void svc_unwatch_fd(void *core, int fd)
{
    struct tnt_net_group *g = core;
    if (fd < 0 || fd >= g->progress.watches_cap ||
        !g->progress.watches[fd])
        return;
    tnt_watch_t *w = g->progress.watches[fd];
    epoll_ctl(g->progress.epfd, EPOLL_CTL_DEL, fd, NULL);
    g->progress.watches[fd] = NULL;
    /* An event for it may already sit in the batch being dispatched or
     * in one collected while the lock was free: free it only after the
     * next batch has been handled. */
    w->dead = 1;
    w->next = g->progress.graveyard;
    g->progress.graveyard = w;
}

static void svc_log(void *core, int level, const char *fmt, ...)
{
    (void)core;
    if (!tnt__log_enabled(level))
        return;
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    tnt__log(level, "%s", buf);
}

void tnt__progress_fill_services(struct tnt_comm *comm,
                                 tnt_transport_env_t *env)
{
    env->core = comm->group; /* core/demux.c routes the upcalls */
    env->watch_fd = svc_watch_fd;
    env->modify_fd = svc_modify_fd;
    env->unwatch_fd = svc_unwatch_fd;
    env->log = svc_log;
}

static void wake_cb(void *arg, uint32_t events)
{
    struct tnt_net_group *g = arg;
    (void)events;
    uint64_t v;
    ssize_t r = read(g->progress.wakefd, &v, sizeof(v));
    (void)r;
}

/* Nothing to do here: the hooks' after_batch looks at what the signal
 * fd stands for after every batch. */
static void signal_cb(void *arg, uint32_t events)
{
    (void)arg;
    (void)events;
}

/* The hooks run for every communicator of the group, whichever of them
 * the poller polls for: their messages come through the same
 * connections (core/demux.c). A hook may release the lock (queued work
 * runs large reductions without it); if the group's list changed
 * meanwhile (gen), the round stops there and says "look again" (1). */
static int each_int(struct tnt_net_group *g,
                    int (*hook)(struct tnt_comm *))
{
    int any = 0;
    unsigned gen = g->gen;
    for (struct tnt_comm *c = g->comms; c; c = c->group_next) {
        any |= hook(c);
        if (g->gen != gen)
            return 1;
    }
    return any;
}

static void each_void(struct tnt_net_group *g,
                      void (*hook)(struct tnt_comm *))
{
    unsigned gen = g->gen;
    for (struct tnt_comm *c = g->comms; c; c = c->group_next) {
        hook(c);
        if (g->gen != gen)
            return; /* c may be gone: its next is not read */
    }
}

/* Called after a batch has been dispatched: an entry removed from epoll
 * before the next epoll_wait cannot show up in a later batch, so every
 * entry in the graveyard can go now. */
static void free_graveyard(struct tnt_comm *comm)
{
    while (comm->group->progress.graveyard) {
        tnt_watch_t *w = comm->group->progress.graveyard;
        comm->group->progress.graveyard = w->next;
        free(w);
    }
}

static int comm_timeout_ms(struct tnt_comm *comm, double now)
{
    struct tnt_request *first = tnt__active_first(comm);
    if (!first && tnt__list_empty(&comm->reqs.any)) {
        if (now - comm->group->progress.last_activity > IDLE_GRACE_S)
            return -1;
        return 1000;
    }
    double left = 2.0; /* above the 1 s that is the most said below */
    for (struct tnt_request *r = first; r; r = tnt__active_next(comm, r))
        if (r->timeout.deadline - now < left)
            left = r->timeout.deadline - now;
    /* Receives from any source waiting for a sender (core/p2p.h). */
    tnt_list_node_t *it, *nx;
    TNT_LIST_FOREACH_SAFE(&comm->reqs.any, it, nx) {
        struct tnt_request *r =
            TNT_LIST_ENTRY(it, struct tnt_request, any_link);
        if (r->timeout.deadline - now < left)
            left = r->timeout.deadline - now;
    }
    if (left < 0)
        return 0;
    if (left > 1.0)
        return 1000;
    return (int)(left * 1000.0) + 1;
}

int tnt__progress_timeout_ms(struct tnt_comm *comm, double now)
{
    /* The nearest of the group's communicators; -1 (idle) only where
     * all are. */
    int ms = -1;
    for (struct tnt_comm *c = comm->group->comms; c; c = c->group_next) {
        int m = comm_timeout_ms(c, now);
        if (m >= 0 && (ms < 0 || m < ms))
            ms = m;
    }
    return ms;
}

/* How many times the poller yields to let a posting thread take the lock
 * (bounded: that thread may not be scheduled at all for a while). */
#define LET_IN_YIELDS 50

/* Between two callbacks of a batch, if a thread waits to post: release
 * the lock until it has taken it. Nothing of the batch is in use here:
 * whatever the poster does to watches (a failure closes connections) is
 * what could happen while epoll_wait ran unlocked, and the graveyard
 * keeps removed watches until the batch is done. */
static void let_posters_in(struct tnt_comm *comm)
{
    if (!__atomic_load_n(&comm->group->lock_wanted, __ATOMIC_RELAXED))
        return;
    pthread_mutex_unlock(&comm->group->lock);
    for (int i = 0; i < LET_IN_YIELDS &&
                    __atomic_load_n(&comm->group->lock_wanted, __ATOMIC_RELAXED);
         i++)
        sched_yield();
    pthread_mutex_lock(&comm->group->lock);
}

/* Each step before the epoll_wait of dispatch takes the timeout it was
 * given and returns it, 0 where it left work that must not wait for an
 * event. */

/* A spin left transports unarmed, so peers do not write the fds they
 * would wake this rank by: look at them, and arm them before sleeping. */
static int poll_unarmed(struct tnt_comm *comm, int timeout_ms)
{
    if (!comm->group->progress.tp_unarmed)
        return timeout_ms;
    unsigned flags = timeout_ms == 0 ? 0 : TNT_POLL_ARM;
    for (int i = 0; i < comm->net.nspin_tp; i++)
        if (comm->net.spin_tp[i].caps & TNT_TP_POLL_UNARMS)
            comm->net.spin_tp[i].poll(comm->net.spin_tp[i].ctx, flags);
    if (timeout_ms != 0) {
        comm->group->progress.tp_unarmed = 0;
        timeout_ms = 0; /* callbacks ran: let the caller look */
    }
    return timeout_ms;
}

/* Work other threads queued for the poller (hooks->queued_work). */
static int run_queued_work(struct tnt_comm *comm, int timeout_ms)
{
    if (each_int(comm->group, comm->group->progress.hooks->queued_work))
        timeout_ms = 0;
    return timeout_ms;
}

/* About to sleep (hooks->before_sleep). */
static int before_sleep(struct tnt_comm *comm, int timeout_ms)
{
    if (timeout_ms == 0)
        return 0;
    return each_int(comm->group, comm->group->progress.hooks->before_sleep)
               ? 0 : timeout_ms;
}

/* epoll_wait with the lock released, then each ready fd's callback with
 * it held, letting posting threads in between two callbacks. */
static void wait_and_dispatch_events(struct tnt_comm *comm, int timeout_ms)
{
    struct epoll_event evs[MAX_EVENTS];
    pthread_mutex_unlock(&comm->group->lock);
    int n = epoll_wait(comm->group->progress.epfd, evs, MAX_EVENTS, timeout_ms);
    int err = errno;
    pthread_mutex_lock(&comm->group->lock);
    if (n < 0 && err != EINTR) {
        char msg[160];
        snprintf(msg, sizeof(msg), "rank %d: epoll_wait: %s", comm->rank,
                 strerror(err));
        for (struct tnt_comm *c = comm->group->comms; c; c = c->group_next)
            comm->group->progress.hooks->fail(c, TNT_ERR_SYSTEM, msg);
    }
    for (int i = 0; i < n && !comm->group->progress.stop; i++) {
        tnt_watch_t *w = evs[i].data.ptr;
        if (!w->dead)
            w->cb(w->arg, from_epoll(evs[i].events));
        if (i + 1 < n)
            let_posters_in(comm);
    }
}

/* What a batch of events leaves to do (hooks->after_batch); then the
 * batch is done: watches removed meanwhile went to the graveyard and are
 * freed last. */
static void after_batch(struct tnt_comm *comm)
{
    each_void(comm->group, comm->group->progress.hooks->after_batch);
    free_graveyard(comm);
}

/* One epoll_wait and its callbacks; the poller role is held. */
static void dispatch(struct tnt_comm *comm, int timeout_ms)
{
    timeout_ms = poll_unarmed(comm, timeout_ms);
    timeout_ms = run_queued_work(comm, timeout_ms);
    timeout_ms = before_sleep(comm, timeout_ms);
    wait_and_dispatch_events(comm, timeout_ms);
    after_batch(comm);
}

void tnt__progress_poll(struct tnt_comm *comm, int timeout_ms, int is_thread)
{
    comm->group->progress.polling = 1;
    comm->group->progress.thread_polling = is_thread;
    dispatch(comm, timeout_ms);
    comm->group->progress.polling = 0;
    comm->group->progress.thread_polling = 0;
    /* Waiters that found the role taken sleep on cond: one of them may
     * take it now. */
    pthread_cond_broadcast(&comm->group->progress.cond);
}

/* While spinning, one epoll_wait (transports without a poll entry,
 * closed sockets, deadlines) per this many rounds of polls; where every
 * transport has a poll entry and looks, at most one per SPIN_EPOLL_GAP_S
 * (a round may take tens of nanoseconds: the TCP poll leaves a socket
 * that had nothing alone for a while, tcp_io.c). */
#define SPIN_EPOLL_EVERY 32
#define SPIN_EPOLL_GAP_S 32e-6
/* Rounds of the spin between two looks at the clock. */
#define SPIN_CLOCK_EVERY 8
/* How long a spin polls before it yields the CPU, and then how often it
 * does (where ranks have CPUs of their own): by time, not by rounds, since
 * a round costs from tens of nanoseconds (rings, or sockets the TCP poll
 * leaves alone for a while) to microseconds (a recv per socket). */
#define SPIN_NO_YIELD_S 10e-6
#define SPIN_YIELD_GAP_S 8e-6
/* A yield that took longer than this ran another thread: this CPU is
 * wanted (a yield with nothing else to run returns within a
 * microsecond; one that ran a thread, after its time slice). */
#define SPIN_YIELD_RAN_OTHER_S 30e-6

void tnt__progress_spin(struct tnt_comm *comm,
                        int (*done)(struct tnt_comm *, void *), void *arg,
                        double start, double end, double own_until,
                        int yield, tnt_spin_seen_t *off_cpu)
{
    /* The transports' poll entries (comm->net.spin_tp): where this rank
     * shares its CPU, only those whose look is no system call. */
    const struct tnt_spin_tp *spin = comm->net.spin_tp;
    int nspin = yield ? comm->net.nspin_cheap : comm->net.nspin_tp;
    /* Even with a CPU per rank, the scheduler may put the peer on this
     * rank's CPU (after a wake-up, say): after a short while, yield
     * anyway: it bounds what a rank can take from a peer that shares
     * its CPU. */
    double yield_at = start + SPIN_NO_YIELD_S;
    /* The role is held for the whole spin: transports polled unarmed stay
     * so until the end, and nobody may sleep in epoll on them
     * meanwhile. */
    comm->group->progress.polling = 1;
    comm->group->progress.thread_polling = 0;
    double epoll_gap = comm->net.spin_polls_all ? SPIN_EPOLL_GAP_S : 0.0;
    double seen = start, epoll_at = start + epoll_gap; /* clock read last */
    int declined = 0; /* a poll of the last round did not look */
    /* From the first yield: wall and thread CPU time (a spin that ends
     * before, a few microseconds, pays no read of the CPU clock). */
    double wall0 = 0.0, cpu0 = 0.0;
    if (off_cpu)
        off_cpu->measured = 0;
    for (unsigned n = 0; !done(comm, arg) && !comm->group->progress.stop; n++) {
        int looked = 0;
        if ((n + 1) % SPIN_EPOLL_EVERY != 0 ||
            (seen < epoll_at && !declined)) {
            /* A poll that returns negative did not look (too many
             * connections): epoll looks at them instead, every
             * SPIN_EPOLL_EVERY rounds. */
            declined = 0;
            for (int i = 0; i < nspin; i++) {
                if (spin[i].poll(spin[i].ctx, 0) >= 0)
                    looked = 1;
                else
                    declined = 1;
            }
            if (looked)
                each_void(comm->group,
                          comm->group->progress.hooks->after_look);
        }
        if (!looked) {
            dispatch(comm, 0);
            epoll_at = seen + epoll_gap;
        }
        if (done(comm, arg))
            break;
        /* A round over the rings and slots takes tens of nanoseconds:
         * the clock, the lock and the yield only every few rounds, unless
         * this rank yields to the ranks it waits for, or a thread waits
         * to post. */
        if (!yield && (n + 1) % SPIN_CLOCK_EVERY != 0 &&
            !__atomic_load_n(&comm->group->lock_wanted, __ATOMIC_RELAXED))
            continue;
        double now = tnt__now();
        seen = now;
        if (now >= end)
            break;
        /* Let threads that wait to post in; and with more ranks than
         * CPUs, the ranks this one waits for. */
        pthread_mutex_unlock(&comm->group->lock);
        int ran_other = 0;
        if (yield || now >= yield_at) {
            if (off_cpu && !off_cpu->measured) {
                off_cpu->measured = 1;
                wall0 = now;
                cpu0 = tnt__thread_cpu_now();
            }
            sched_yield();
            yield_at = now + SPIN_YIELD_GAP_S;
            /* Past own_until the spin is a guess that the call ends
             * soon (a blocking call's budget, wait_budget.h): it
             * gives way to any other thread that needs this CPU, and
             * sleeps in epoll. */
            ran_other = now >= own_until &&
                        tnt__now() - now > SPIN_YIELD_RAN_OTHER_S;
        }
        pthread_mutex_lock(&comm->group->lock);
        if (ran_other)
            break;
    }
    if (off_cpu && off_cpu->measured) {
        double cpu = tnt__thread_cpu_now() - cpu0;
        off_cpu->lost_s = tnt__now() - wall0 - cpu;
    }
    /* Polled transports stay unarmed while blocking calls follow each
     * other: arming now would make the peer's next message write the
     * eventfd. The next poll that may sleep arms them first (dispatch). */
    for (int i = 0; i < nspin && !comm->group->progress.stop; i++)
        if (spin[i].caps & TNT_TP_POLL_UNARMS)
            comm->group->progress.tp_unarmed = 1;
    comm->group->progress.polling = 0;
    pthread_cond_broadcast(&comm->group->progress.cond);
}

/* The progress thread stays out of the way while the application drives
 * progress: while a thread waits in a blocking call, and for a short
 * grace after one when nothing is in flight (back-to-back blocking
 * collectives would otherwise hand the role back and forth). A
 * nonblocking post wakes it (tnt__progress_unpark). */
static double park_until(struct tnt_comm *comm, double now)
{
    if (comm->group->progress.user_waiters > 0 || comm->group->progress.polling)
        return now + 1.0;
    int idle = 1;
    for (struct tnt_comm *c = comm->group->comms; c; c = c->group_next)
        idle &= tnt__list_empty(&c->reqs.active);
    if (idle && now - comm->group->progress.user_polled_at < PARK_GRACE_S)
        return comm->group->progress.user_polled_at + PARK_GRACE_S;
    return 0.0;
}

static void park(struct tnt_comm *comm, double until)
{
    struct timespec abs = tnt__timespec_at(until);
    comm->group->progress.thread_parked = 1;
    pthread_cond_timedwait(&comm->group->progress.park, &comm->group->lock, &abs);
    comm->group->progress.thread_parked = 0;
}

void tnt__progress_unpark(struct tnt_comm *comm)
{
    if (comm->group->progress.thread_parked && comm->group->progress.user_waiters == 0)
        pthread_cond_signal(&comm->group->progress.park);
}

static void *progress_main(void *arg)
{
    struct tnt_comm *comm = arg;
    const tnt_progress_hooks_t *hooks = comm->group->progress.hooks;
    hooks->thread_start();
    pthread_mutex_lock(&comm->group->lock);
    while (!comm->group->progress.stop) {
        if (each_int(comm->group, hooks->thread_turn))
            continue;
        double now = tnt__now();
        double until = park_until(comm, now);
        if (until > 0.0) {
            park(comm, until);
            continue;
        }
        tnt__progress_poll(comm, tnt__progress_timeout_ms(comm, now), 1);
    }
    pthread_mutex_unlock(&comm->group->lock);
    return NULL;
}

tnt_result_t tnt__progress_start(struct tnt_comm *comm)
{
    comm->group->progress.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (comm->group->progress.epfd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "epoll_create1: %s",
                          strerror(errno));
    comm->group->progress.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (comm->group->progress.wakefd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "eventfd: %s", strerror(errno));
    comm->group->progress.wake_watch.fd = comm->group->progress.wakefd;
    comm->group->progress.wake_watch.cb = wake_cb;
    comm->group->progress.wake_watch.arg = comm->group;
    struct epoll_event ev = {.events = EPOLLIN,
                             .data.ptr = &comm->group->progress.wake_watch};
    if (epoll_ctl(comm->group->progress.epfd, EPOLL_CTL_ADD, comm->group->progress.wakefd,
                  &ev) != 0)
        return tnt__error(TNT_ERR_SYSTEM, "epoll_ctl(eventfd): %s",
                          strerror(errno));
    /* An fd of the layers above (SIGUSR1's report requests: one
     * eventfd for the whole process), watched edge-triggered by every
     * communicator and never read. */
    int sfd = comm->group->progress.hooks->signal_fd(comm);
    if (sfd >= 0) {
        comm->group->progress.signal_watch.fd = sfd;
        comm->group->progress.signal_watch.cb = signal_cb;
        comm->group->progress.signal_watch.arg = comm;
        struct epoll_event rev = {.events = EPOLLIN | EPOLLET,
                                  .data.ptr = &comm->group->progress.signal_watch};
        if (epoll_ctl(comm->group->progress.epfd, EPOLL_CTL_ADD, sfd, &rev) != 0)
            return tnt__error(TNT_ERR_SYSTEM, "epoll_ctl(signal fd): %s",
                              strerror(errno));
    }
    comm->group->progress.last_activity = tnt__now();
    return TNT_SUCCESS;
}

tnt_result_t tnt__progress_run_thread(struct tnt_comm *comm)
{
    pthread_mutex_lock(&comm->group->lock);
    comm->group->progress.stop = 0;
    comm->group->thread_comm = comm;
    pthread_mutex_unlock(&comm->group->lock);
    int e = pthread_create(&comm->group->progress.thread, NULL, progress_main, comm);
    if (e != 0)
        return tnt__error(TNT_ERR_SYSTEM, "pthread_create: %s", strerror(e));
    comm->group->progress.thread_started = 1;
    return TNT_SUCCESS;
}

void tnt__progress_wake(struct tnt_comm *comm)
{
    uint64_t one = 1;
    ssize_t r = write(comm->group->progress.wakefd, &one, sizeof(one));
    (void)r;
}

void tnt__progress_stop(struct tnt_comm *comm)
{
    if (comm->group->progress.thread_started) {
        pthread_mutex_lock(&comm->group->lock);
        comm->group->progress.stop = 1;
        pthread_cond_signal(&comm->group->progress.park);
        pthread_mutex_unlock(&comm->group->lock);
        tnt__progress_wake(comm);
        pthread_join(comm->group->progress.thread, NULL);
        comm->group->progress.thread_started = 0;
    }
}

void tnt__progress_close(struct tnt_comm *comm)
{
    free_graveyard(comm);
    for (int fd = 0; fd < comm->group->progress.watches_cap; fd++)
        free(comm->group->progress.watches[fd]);
    free(comm->group->progress.watches);
    comm->group->progress.watches = NULL;
    comm->group->progress.watches_cap = 0;
    if (comm->group->progress.epfd >= 0)
        close(comm->group->progress.epfd);
    if (comm->group->progress.wakefd >= 0)
        close(comm->group->progress.wakefd);
    comm->group->progress.epfd = comm->group->progress.wakefd = -1;
}
