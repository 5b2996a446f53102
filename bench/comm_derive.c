/*
 * comm-derive: what derived communicators cost, the figures behind
 * docs/scale.md's "Split and shrink". Start it as any program, with the
 * recovery listener on: `tnt-run -n P --elastic comm-derive`. In one run
 * it times, as the slowest rank saw each (an allreduce of MAX over the
 * ranks): tnt_comm_init_from_env; tnt_comm_dup and tnt_comm_split by
 * parity, each followed by a barrier on the new communicator (the median
 * of five); then the last rank kills itself (SIGKILL, its time written
 * to $COMM_DERIVE_FILE first) while the others loop on 8-byte
 * allreduces, and each survivor times the death's detection (the error
 * returned, from the kill) and tnt_comm_shrink. Also the messages one
 * split sends over the parent, the most of any rank (tnt_comm_stats of
 * the parent, every transport, before and after the call): the
 * exchanges that make it, not the new communicator's own connections.
 * Rank 0 prints one line. Not installed; a measurement tool, not a
 * test. With COMM_DERIVE_ONLY=1 it stops after the split's messages (no
 * kill, no shrink): then it runs without --elastic, whose recovery mesh
 * keeps derived communicators off the parent's connections (docs/
 * design.md, "Sharing connections between communicators"), so the two
 * runs compare a split that shares with one that does not.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fd_count.h"
#include "tnt/tnt.h"

#define REPS 5

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what)
{
    fprintf(stderr, "comm-derive: %s: %s\n", what, tnt_last_error());
    return 1;
}

/* Messages this rank has sent on `comm`, over every transport. */
static uint64_t sent(tnt_comm_t comm)
{
    tnt_stats_t s = TNT_STATS_INIT;
    uint64_t n = 0;
    if (tnt_comm_stats(comm, &s) == TNT_SUCCESS)
        for (int i = 0; i < TNT_STATS_TRANSPORTS; i++)
            n += s.transport[i].msgs_sent;
    return n;
}

/* The most messages a rank sent on `comm` for one split by parity. */
static int split_msgs(tnt_comm_t comm, int rank, double *out)
{
    tnt_comm_t nc;
    if (tnt_barrier(comm) != TNT_SUCCESS)
        return fail("barrier");
    uint64_t before = sent(comm);
    if (tnt_comm_split(comm, rank % 2, rank, &nc) != TNT_SUCCESS)
        return fail("split");
    *out = (double)(sent(comm) - before);
    tnt_comm_free(nc);
    if (tnt_allreduce(comm, TNT_IN_PLACE, out, 1, TNT_F64, TNT_MAX) !=
        TNT_SUCCESS)
        return fail("allreduce");
    return 0;
}

/* Every pair of `comm` exchanges a message (all its connections are up
 * on both sides), then this rank's descriptors. */
static int settled_fds(tnt_comm_t comm, int size, double *out)
{
    double *a = malloc(2 * (size_t)size * sizeof(double));
    if (!a)
        return fail("out of memory");
    for (int i = 0; i < size; i++)
        a[i] = i;
    tnt_result_t rc = tnt_alltoall(comm, a, a + size, 1, TNT_F64);
    free(a);
    if (rc != TNT_SUCCESS || tnt_barrier(comm) != TNT_SUCCESS)
        return fail("alltoall");
    *out = tnt_open_fds();
    return 0;
}

/* fds[0]: descriptors after creation; [1]: what a dup adds; [2]: what a
 * split by parity adds to that; the most of any rank each. */
static int fds_cost(tnt_comm_t comm, int rank, int size, double fds[3])
{
    tnt_comm_t dup, sub;
    double with_dup, with_both;
    if (settled_fds(comm, size, &fds[0]))
        return 1;
    if (tnt_comm_dup(comm, &dup) != TNT_SUCCESS)
        return fail("dup");
    if (settled_fds(dup, size, &with_dup))
        return 1;
    if (tnt_comm_split(comm, rank % 2, rank, &sub) != TNT_SUCCESS)
        return fail("split");
    int sub_size;
    tnt_comm_size(sub, &sub_size);
    if (settled_fds(sub, sub_size, &with_both))
        return 1;
    fds[1] = with_dup - fds[0];
    fds[2] = with_both - with_dup;
    tnt_comm_free(sub);
    tnt_comm_free(dup);
    if (tnt_allreduce(comm, TNT_IN_PLACE, fds, 3, TNT_F64, TNT_MAX) !=
        TNT_SUCCESS)
        return fail("allreduce");
    return 0;
}

/* The median over REPS of the slowest rank's time to derive and barrier. */
static int derive_time(tnt_comm_t comm, int rank, int split, double *out)
{
    double t[REPS];
    for (int k = 0; k < REPS; k++) {
        tnt_comm_t nc;
        if (tnt_barrier(comm) != TNT_SUCCESS)
            return fail("barrier");
        double t0 = now();
        tnt_result_t rc = split ? tnt_comm_split(comm, rank % 2, rank, &nc)
                                : tnt_comm_dup(comm, &nc);
        if (rc == TNT_SUCCESS)
            rc = tnt_barrier(nc);
        t[k] = now() - t0;
        if (rc != TNT_SUCCESS)
            return fail(split ? "split" : "dup");
        tnt_comm_free(nc);
        if (tnt_allreduce(comm, TNT_IN_PLACE, &t[k], 1, TNT_F64, TNT_MAX) !=
            TNT_SUCCESS)
            return fail("allreduce");
    }
    qsort(t, REPS, sizeof(double), cmp);
    *out = t[REPS / 2];
    return 0;
}

int main(void)
{
    const char *file = getenv("COMM_DERIVE_FILE");
    if (!file)
        file = "/tmp/comm-derive.kill";
    tnt_comm_t comm;
    double t0 = now();
    if (tnt_comm_init_from_env(&comm) != TNT_SUCCESS)
        return fail("init");
    double init_s = now() - t0;
    int rank, size;
    tnt_comm_rank(comm, &rank);
    tnt_comm_size(comm, &size);
    if (tnt_allreduce(comm, TNT_IN_PLACE, &init_s, 1, TNT_F64, TNT_MAX) !=
        TNT_SUCCESS)
        return fail("allreduce");
    double dup_s, split_s, msgs, fds[3];
    if (fds_cost(comm, rank, size, fds) ||
        derive_time(comm, rank, 0, &dup_s) ||
        derive_time(comm, rank, 1, &split_s) ||
        split_msgs(comm, rank, &msgs))
        return 1;
    if (tnt_barrier(comm) != TNT_SUCCESS)
        return fail("barrier");
    const char *only = getenv("COMM_DERIVE_ONLY");
    if (only && *only == '1') {
        if (rank == 0)
            printf("ranks=%d init_s=%.6f dup_s=%.6f split_s=%.6f "
                   "split_msgs=%.0f fds=%.0f dup_fds=+%.0f "
                   "split_fds=+%.0f\n", size, init_s, dup_s, split_s, msgs,
                   fds[0], fds[1], fds[2]);
        tnt_comm_free(comm);
        return 0;
    }
    if (rank == size - 1) {
        usleep(200000);
        FILE *f = fopen(file, "w");
        if (f) {
            fprintf(f, "%.9f\n", now());
            fclose(f);
        }
        kill(getpid(), SIGKILL);
    }
    double x = 1;
    tnt_result_t rc;
    while ((rc = tnt_allreduce(comm, TNT_IN_PLACE, &x, 1, TNT_F64,
                               TNT_SUM)) == TNT_SUCCESS)
        ;
    double t_err = now();
    tnt_comm_t nc;
    if (tnt_comm_shrink(comm, &nc) != TNT_SUCCESS)
        return fail("shrink");
    double shrink_s = now() - t_err;
    double kill_t = 0;
    FILE *f = fopen(file, "r");
    if (!f || fscanf(f, "%lf", &kill_t) != 1)
        kill_t = t_err;
    if (f)
        fclose(f);
    double v[2] = {t_err - kill_t, shrink_s};
    if (tnt_allreduce(nc, TNT_IN_PLACE, v, 2, TNT_F64, TNT_MAX) !=
        TNT_SUCCESS)
        return fail("allreduce after the shrink");
    if (rank == 0)
        printf("ranks=%d init_s=%.6f dup_s=%.6f split_s=%.6f "
               "split_msgs=%.0f detect_s=%.6f shrink_s=%.6f fds=%.0f "
               "dup_fds=+%.0f split_fds=+%.0f\n", size, init_s, dup_s,
               split_s, msgs, v[0], v[1], fds[0], fds[1], fds[2]);
    tnt_comm_free(nc);
    tnt_comm_free(comm);
    return 0;
}
