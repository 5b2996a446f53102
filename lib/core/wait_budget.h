/*
 * How long a blocking call spins before it sleeps (wait_budget.c): for
 * the whole call, as long as calls of the same kind and size took on
 * this communicator, where no other thread on the host wants a CPU;
 * else TNT_SPIN_US, as a nonblocking wait does. Lock held for every
 * entry.
 */
#ifndef TNT_CORE_WAIT_BUDGET_H
#define TNT_CORE_WAIT_BUDGET_H

#include <stddef.h>
#include <stdint.h>

/* Distinct (kind, size) pairs remembered: a model's gradients come in a
 * few bucket sizes; the rest share slots (one overwrites the other). */
#define TNT_WAIT_HISTORY_SLOTS 32

typedef struct tnt_wait_history {
    struct {
        uint64_t key;   /* 0: empty */
        double seconds; /* what a call takes when nothing delays it */
    } slot[TNT_WAIT_HISTORY_SLOTS];
    double host_looked_at; /* tnt__now() of the last look at the host */
    int host_busy;         /* then: more runnable threads than CPUs */
} tnt_wait_history_t;

/** How long a blocking call of `kind` and `bytes` spins before its first
 *  sleep: `floor_s` (TNT_SPIN_US; 0: spinning is off), or the call's
 *  expected time (wait_budget.c) where that is longer, no rank of this
 *  communicator shares a CPU with another (`shared` 0) and the host has
 *  no more runnable threads than its `cpus`. */
double tnt__wait_spin_budget(tnt_wait_history_t *h, int kind, size_t bytes,
                             double floor_s, int shared, int cpus,
                             double now);

/** A blocking call of `kind` and `bytes` took `seconds` from the start
 *  of its wait. */
void tnt__wait_learn(tnt_wait_history_t *h, int kind, size_t bytes,
                     double seconds);

/** Threads running or ready to run on this host now (/proc/loadavg);
 *  -1 where that cannot be read. */
int tnt__host_runnable(void);

#endif /* TNT_CORE_WAIT_BUDGET_H */
