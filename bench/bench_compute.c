/*
 * The emulated compute of `tnt-bench fusion`: what a rank does before
 * each gradient becomes ready. It is real work on this CPU, not a sleep,
 * so that a communication thread competing for the cores shows up as
 * slower compute, as it would in training:
 *
 *   1. the gradient is written, element by element, with datagen's values
 *      for this rank (the same values the check of the last iteration
 *      expects), which streams through the tensor's memory;
 *   2. an arithmetic loop (a chain of dependent 64-bit multiply-adds) runs
 *      for a number of steps proportional to the tensor's size: X
 *      microseconds per MiB at the rate calibrated at startup.
 *
 * With --compute sleep, step 2 is a sleep instead: the backprop of a GPU,
 * which leaves the CPU to the communication (the setting of real training
 * on accelerators).
 *
 * The rate is calibrated with every rank running the loop at once, so X
 * means microseconds per MiB under the load of a backprop on every rank
 * (on an oversubscribed host, each rank's share of a core).
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "bench_fusion.h"
#include "datagen.h"

/* How long the calibration runs, and the steps between clock reads. */
#define CALIBRATE_S 0.25
#define SPIN_CHUNK 4096

/* Where the loop leaves its result, so the compiler must compute it. */
static volatile uint64_t spin_sink = 1;

void fu_spin(uint64_t iters)
{
    uint64_t x = spin_sink;
    for (uint64_t i = 0; i < iters; i++)
        x = x * UINT64_C(6364136223846793005) +
            UINT64_C(1442695040888963407);
    spin_sink = x;
}

void fu_calibrate(fu_t *c)
{
    tnt_result_t rc;
    if ((rc = tnt_barrier(c->comm)) != TNT_SUCCESS)
        fu_die(c, "tnt_barrier", rc);
    fu_spin(SPIN_CHUNK); /* fault in, ramp the clock up */
    uint64_t steps = 0;
    double t0 = fu_now(), elapsed;
    do {
        fu_spin(SPIN_CHUNK);
        steps += SPIN_CHUNK;
    } while ((elapsed = fu_now() - t0) < CALIBRATE_S);
    double rate = (double)steps / (elapsed * 1e6), sum = 0.0;
    rc = tnt_allreduce(c->comm, &rate, &sum, 1, TNT_F64, TNT_SUM);
    if (rc != TNT_SUCCESS)
        fu_die(c, "tnt_allreduce", rc);
    /* The same rate on every rank, so that every rank does the same
     * work: a rank that is slower then shows as a straggler. */
    c->spin_per_us = sum / c->nranks;
}

void fu_plan_compute(fu_t *c)
{
    for (size_t i = 0; i < c->m.n; i++) {
        double mib = (double)c->m.desc[i].count * 4.0 / (1024.0 * 1024.0);
        if (c->o->fu.sleep_compute)
            c->sleep_s[i] = c->us_per_mib * mib * 1e-6;
        else
            c->spin[i] = (uint64_t)(c->spin_per_us * c->us_per_mib * mib +
                                    0.5);
    }
}

/* --compute sleep: the backprop runs on an accelerator, as in training on
 * GPUs; the CPU only waits for it, and is free for communication. */
static void sleep_for(double s)
{
    if (s <= 0.0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void fu_compute(const fu_t *c, size_t i)
{
    tnt_gen_fill(c->grad[i], c->m.desc[i].count, TNT_F32, c->op,
                 c->seed[i], c->rank);
    if (c->sleep_s)
        sleep_for(c->sleep_s[i]);
    else
        fu_spin(c->spin[i]);
}
