/*
 * A per-communicator cache of built schedules. A schedule depends only on
 * the collective's arguments and the algorithm (buffers are referenced by
 * id and offset; the host layout by a pointer fixed for the
 * communicator's life, compared like the other arguments), so a
 * training loop that repeats the same allreduces builds each schedule
 * once. Schedules are shared read-only by the requests that run them and
 * counted by reference.
 */
#ifndef TNT_CORE_SCHED_CACHE_H
#define TNT_CORE_SCHED_CACHE_H

#include <pthread.h>
#include <stdint.h>

#include "collectives/algorithms.h"

/* Fusion posts one allreduce per bucket, each of its own size: a model
 * with a few hundred buckets must fit, or every iteration rebuilds. */
#define TNT_SCHED_CACHE_SLOTS 512

typedef struct tnt_sched_cache_entry {
    uint64_t hash;      /* of key and algo, compared first */
    tnt_coll_args_t key;
    int algo;
    tnt_sched_t *sched; /* NULL: free slot */
    uint64_t used;      /* for least-recently-used eviction */
} tnt_sched_cache_entry_t;

typedef struct tnt_sched_cache {
    pthread_mutex_t lock;
    tnt_sched_cache_entry_t e[TNT_SCHED_CACHE_SLOTS];
    uint64_t tick;
} tnt_sched_cache_t;

void tnt__sched_cache_init(tnt_sched_cache_t *c);
/** The schedule of (a, algo), built on a miss; the caller holds one
 *  reference and gives it back with tnt__sched_release. */
tnt_result_t tnt__sched_cache_get(tnt_sched_cache_t *c,
                                  const tnt_coll_args_t *a, int algo,
                                  tnt_sched_t **out);
/** Drop a reference; `c` may be NULL once the communicator is gone. */
void tnt__sched_release(tnt_sched_cache_t *c, tnt_sched_t *s);
void tnt__sched_cache_destroy(tnt_sched_cache_t *c);

#endif /* TNT_CORE_SCHED_CACHE_H */
