/*
 * Flow control: a correct program never fails because one rank is late.
 * A sender may not run arbitrarily far ahead of a receiver over TCP: with
 * a small TNT_MAX_UNEXPECTED_BYTES (4 MiB here), a root that does blocking
 * broadcasts of 1 MiB, or a stream of eager-sized ones, while one receiver
 * sleeps 2 s before it starts, must finish on every rank with every
 * element right; so must allreduces of 8 MiB with one rank late and a
 * budget (1 MiB) smaller than one step's data. Without flow control the
 * late rank's progress thread read everything the root sent into early
 * buffers and the job failed on the budget ("more than
 * TNT_MAX_UNEXPECTED_BYTES ... bytes of early messages").
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define FLOW_LATE_S 2.0

static uint32_t bval(int iter, size_t i)
{
    return (uint32_t)(i * 2654435761u) ^ (uint32_t)(iter * 40503 + 7);
}

/* `n` broadcasts of `count` u32 from rank 0; rank nranks-1 starts late. */
static void bcast_loop(tnt_comm_t comm, int rank, int nranks,
                       th_report_t *rep, const char *name, int n,
                       size_t count)
{
    uint32_t *buf = th_xmalloc(count * sizeof(*buf));
    if (rank == nranks - 1)
        th_sleep(FLOW_LATE_S);
    tnt_result_t rc = TNT_SUCCESS;
    size_t nwrong = 0, first = 0;
    for (int it = 0; it < n && rc == TNT_SUCCESS; it++) {
        for (size_t i = 0; i < count; i++)
            buf[i] = rank == 0 ? bval(it, i) : 0;
        rc = tnt_broadcast(comm, buf, count, TNT_U32, 0);
        for (size_t i = 0; rc == TNT_SUCCESS && i < count; i++)
            if (buf[i] != bval(it, i) && nwrong++ == 0)
                first = (size_t)it * count + i;
    }
    th_report_check(rep, name, rc, nwrong, first, buf,
                    count * sizeof(*buf));
    free(buf);
}

static int bcast_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                    th_report_t *rep)
{
    (void)arg;
    /* Above the eager limit: rendezvous. */
    bcast_loop(comm, rank, nranks, rep, "bcast 32 x 1 MiB", 32,
               (size_t)1 << 18);
    tnt_barrier(comm);
    /* At the eager limit: the window. */
    bcast_loop(comm, rank, nranks, rep, "bcast 256 x 48 KiB", 256,
               (size_t)12 << 10);
    return th_report_failures(rep);
}

static void test_late_bcast(void)
{
    const char *env[] = {"TNT_TRANSPORT=tcp", "TNT_MAX_UNEXPECTED_BYTES=4M",
                         "TNT_TIMEOUT=60", NULL};
    th_job_t job = {.name = "late receiver broadcast", .nranks = 4,
                    .env = env, .fn = bcast_fn, .deadline_s = 120};
    th_run_job(&job, NULL);
}

static int allreduce_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                        th_report_t *rep)
{
    (void)arg;
    size_t count = (size_t)2 << 20; /* 8 MiB of i32 */
    int32_t *buf = th_xmalloc(count * sizeof(*buf));
    tnt_result_t rc = TNT_SUCCESS;
    size_t nwrong = 0, first = 0;
    for (int it = 0; it < 4 && rc == TNT_SUCCESS; it++) {
        if (rank == 1)
            th_sleep(FLOW_LATE_S / 4);
        for (size_t i = 0; i < count; i++)
            buf[i] = (int32_t)((i % 1009) * (size_t)(rank + 1)) + it;
        rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, count, TNT_I32, TNT_SUM);
        /* sum over ranks r of (i % 1009) * (r + 1) + it */
        int64_t tri = (int64_t)nranks * (nranks + 1) / 2;
        for (size_t i = 0; rc == TNT_SUCCESS && i < count; i++) {
            int64_t want = (int64_t)(i % 1009) * tri + (int64_t)nranks * it;
            if (buf[i] != (int32_t)want && nwrong++ == 0)
                first = (size_t)it * count + i;
        }
    }
    th_report_check(rep, "allreduce 4 x 8 MiB, rank 1 late", rc, nwrong,
                    first, buf, count * sizeof(*buf));
    free(buf);
    return th_report_failures(rep);
}

static void test_late_allreduce(void)
{
    const char *env[] = {"TNT_TRANSPORT=tcp", "TNT_MAX_UNEXPECTED_BYTES=1M",
                         "TNT_TIMEOUT=60", NULL};
    th_job_t job = {.name = "late rank allreduce", .nranks = 3, .env = env,
                    .fn = allreduce_fn, .deadline_s = 120};
    th_run_job(&job, NULL);
}

static const th_test_def_t k_tests[] = {
    {"late", "broadcast", test_late_bcast},
    {"late", "allreduce", test_late_allreduce},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
