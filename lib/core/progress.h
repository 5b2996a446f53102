/*
 * Progress thread and fd services (see progress.c).
 */
#ifndef TNT_CORE_PROGRESS_H
#define TNT_CORE_PROGRESS_H

#include "core/engine.h"

/** What the layers above the loop run in it: the loop calls nothing
 *  above it by name, only these entries (comm->group->progress.hooks, set at
 *  communicator creation; progress_hooks.c fills them for the engine,
 *  the on-host algorithms, the report and the timeline). Each is called
 *  with the lock held. */
typedef struct tnt_progress_hooks {
    /** Before the poller may sleep: run the work other threads queued
     *  for it. 1: more may be ready at once, do not sleep. */
    int (*queued_work)(struct tnt_comm *comm);
    /** The poller is about to sleep. 1: it must not (something it found
     *  needs a look at once). */
    int (*before_sleep)(struct tnt_comm *comm);
    /** A spin's look at the transports found something to do: the
     *  cheap follow-up, before the next look. */
    void (*after_look)(struct tnt_comm *comm);
    /** After a batch of events has been dispatched. */
    void (*after_batch)(struct tnt_comm *comm);
    /** The progress thread, each turn before it parks or polls. 1: it
     *  released the lock meanwhile, start the turn again. */
    int (*thread_turn)(struct tnt_comm *comm);
    /** The progress thread starts (lock not held). */
    void (*thread_start)(void);
    /** The loop itself failed (epoll_wait): fail the communicator. */
    void (*fail)(struct tnt_comm *comm, tnt_result_t rc, const char *msg);
    /** At start: an fd the loop watches, edge-triggered and never read,
     *  whose firing after_batch looks into (SIGUSR1's report
     *  requests); -1: none. Lock not held. */
    int (*signal_fd)(struct tnt_comm *comm);
} tnt_progress_hooks_t;

/** The engine's hooks (progress_hooks.c). */
extern const tnt_progress_hooks_t tnt__engine_progress_hooks;

/** epoll and the wake eventfd (no thread yet); comm->group->progress.hooks is
 *  set. */
tnt_result_t tnt__progress_start(struct tnt_comm *comm);
tnt_result_t tnt__progress_run_thread(struct tnt_comm *comm);
/** Stop and join the thread (lock not held). */
void tnt__progress_stop(struct tnt_comm *comm);
/** Free watches and close epoll; after the transport is finalized. */
void tnt__progress_close(struct tnt_comm *comm);
void tnt__progress_wake(struct tnt_comm *comm);
/** One round of polling by the calling thread: lock held and the poller
 *  role free (comm->group->progress.polling == 0). Waits up to timeout_ms for
 *  events, dispatches them, enforces deadlines, then frees the role. */
void tnt__progress_poll(struct tnt_comm *comm, int timeout_ms, int is_thread);
/** How long a poller may block: until the nearest deadline, at most 1 s;
 *  -1 once idle for a while. Lock held. */
int tnt__progress_timeout_ms(struct tnt_comm *comm, double now);
/** Wake a parked progress thread: nonblocking work was posted and no
 *  thread is waiting to drive it. Lock held. */
void tnt__progress_unpark(struct tnt_comm *comm);
void tnt__progress_fill_services(struct tnt_comm *comm,
                                 tnt_transport_env_t *env);

/* Provided by engine.c, run in the progress loop through its hooks. */
void tnt__engine_reap(struct tnt_comm *comm);

/* What a spin saw of its CPU (tnt__progress_spin). */
typedef struct tnt_spin_seen {
    int measured;  /* it reached its first yield; from there on: */
    double lost_s; /* wall time off its CPU (other threads ran, or it
                      waited for the lock) */
} tnt_spin_seen_t;

/** Poll without sleeping until done(comm, arg) or `end` (tnt__now()
 *  time; the spin started at `start`), holding the poller role: through
 *  the poll entries of the transports that serve peers (those that may
 *  leave wake-ups off, TNT_TP_POLL_UNARMS, are armed by the next poll
 *  that may sleep; those whose look is a system call not when `yield`),
 *  with an epoll_wait(0) every few rounds for everything else.
 *  Releases the lock between rounds (and yields the CPU there when
 *  `yield`). After `own_until`, the spin also ends as soon as a yield
 *  shows that another thread wanted this CPU. With `off_cpu` (not NULL),
 *  says how much of the spin from its first yield the thread was off
 *  its CPU (two reads of the thread's CPU clock). Lock held, role free
 *  on entry. */
void tnt__progress_spin(struct tnt_comm *comm,
                        int (*done)(struct tnt_comm *, void *), void *arg,
                        double start, double end, double own_until,
                        int yield, tnt_spin_seen_t *off_cpu);

#endif /* TNT_CORE_PROGRESS_H */
