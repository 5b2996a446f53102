/*
 * init-time: how long communicator creation takes, the figure behind
 * docs/scale.md's start-up table. Every rank times tnt_comm_init_from_env
 * (the launcher's rendezvous with rank 0, the table's fan-out, and the
 * connections made ahead of need) and its first barrier (the first time
 * every pair that the barrier needs talks); rank 0 prints the slowest
 * rank's times. Start it as any program: `tnt-run -n P init-time`.
 * Not installed; a measurement tool, not a test.
 */
#include <stdio.h>
#include <time.h>

#include "tnt/tnt.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
    tnt_comm_t comm;
    double t0 = now();
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    double t1 = now();
    if (rc != TNT_SUCCESS) {
        fprintf(stderr, "init-time: %s\n", tnt_last_error());
        return 1;
    }
    rc = tnt_barrier(comm);
    double t2 = now();
    double times[2] = {t1 - t0, t2 - t1};
    if (rc == TNT_SUCCESS)
        rc = tnt_allreduce(comm, TNT_IN_PLACE, times, 2, TNT_F64, TNT_MAX);
    if (rc != TNT_SUCCESS) {
        fprintf(stderr, "init-time: %s\n", tnt_last_error());
        tnt_comm_free(comm);
        return 1;
    }
    int rank = 0, size = 0;
    tnt_comm_rank(comm, &rank);
    tnt_comm_size(comm, &size);
    if (rank == 0)
        printf("ranks=%d init_s=%.6f first_barrier_s=%.6f\n", size,
               times[0], times[1]);
    tnt_comm_free(comm);
    return 0;
}
