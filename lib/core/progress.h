/*
 * Progress thread and fd services (see progress.c).
 */
#ifndef TNT_CORE_PROGRESS_H
#define TNT_CORE_PROGRESS_H

#include "core/engine.h"

/** epoll and the wake eventfd (no thread yet). */
tnt_result_t tnt__progress_start(struct tnt_comm *comm);
tnt_result_t tnt__progress_run_thread(struct tnt_comm *comm);
/** Stop and join the thread (lock not held). */
void tnt__progress_stop(struct tnt_comm *comm);
/** Free watches and close epoll; after the transport is finalized. */
void tnt__progress_close(struct tnt_comm *comm);
void tnt__progress_wake(struct tnt_comm *comm);
void tnt__progress_fill_services(struct tnt_comm *comm,
                                 tnt_transport_env_v1_t *env);

/* Provided by engine.c, called by the progress loop with the lock held. */
void tnt__engine_reap(struct tnt_comm *comm);
void tnt__engine_check_deadlines(struct tnt_comm *comm, double now);

#endif /* TNT_CORE_PROGRESS_H */
