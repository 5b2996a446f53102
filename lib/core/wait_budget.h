/*
 * How long a wait spins before it sleeps (wait_budget.c). Any wait:
 * TNT_SPIN_US, cut shorter while this communicator's spins take a CPU
 * that another thread wants, or do not pay (where ranks have CPUs of
 * their own). A blocking call: for the whole call, as long as calls of
 * the same kind and size took on this communicator, where no other
 * thread on the host wants a CPU. Lock held for every entry.
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
    int cut;               /* the spin is TNT_SPIN_US / 2^cut (0: all of
                              it; TNT_SPIN_CUT_OFF: none) */
    double probe_at;       /* tnt__now() after which a cut spin is
                              tried in full once */
} tnt_wait_history_t;

/* Halvings of TNT_SPIN_US after which a wait does not spin at all. */
#define TNT_SPIN_CUT_OFF 5

/** How long a wait spins before its first sleep where no rank of this
 *  communicator shares a CPU with another: `full_s` (TNT_SPIN_US)
 *  halved `cut` times, or all of `full_s` once per probe interval while
 *  it is cut (a look whether spinning has become free again). */
double tnt__wait_spin_floor(tnt_wait_history_t *h, double full_s,
                            double now);

/** A spin of tnt__wait_spin_floor's ended after `spun_s`: it was
 *  measured from its first yield (`measured`, else it ended before one),
 *  lost its CPU to other threads for `lost_s` of that, and its wait was
 *  `done`, at `now`. Sets the next spins' cut (wait_budget.c). */
void tnt__wait_spin_outcome(tnt_wait_history_t *h, double spun_s,
                            int measured, double lost_s, int done,
                            double now);

/** How long a blocking call of `kind` and `bytes` spins before its first
 *  sleep: `floor_s` (TNT_SPIN_US, or tnt__wait_spin_floor's; 0: no
 *  spin), or the call's expected time (wait_budget.c) where that is
 *  longer, no rank of this communicator shares a CPU with another
 *  (`shared` 0), the spin is not cut and the host has no more runnable
 *  threads than its `cpus`. */
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
