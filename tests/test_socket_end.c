/*
 * A peer's sockets end one by one: with TNT_SOCKETS_PER_PEER > 1 a rank
 * that finished its last collective and freed its communicator ends each
 * of its sockets, and another socket of the same pair may still hold its
 * last message to a rank that is still reading. Every rank is on its own
 * fake host (TCP between all), the last collective is a reduce-scatter
 * large enough that its messages spread over the sockets and take more
 * than one read budget (tcp_io.c, TCP_READ_BUDGET), and the ranks use
 * its result at different times (some check and free at once, others
 * later) with no synchronisation outside the library. Every element of
 * every result is checked against a reference computed here.
 *
 * Before the end of one socket retired only that socket, an end read on
 * one socket closed the whole pair: a rank still reading the pair's other
 * socket failed with "lost rank N (host fakehostN): connection closed by
 * peer", and the message it still had to read was lost.
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

/* Per-rank block sizes of the rounds; the last is the large one. */
static const size_t k_counts[] = {1, 997, 65537, 1 << 20};
#define NROUNDS (sizeof(k_counts) / sizeof(k_counts[0]))

static int32_t input(int rank, size_t i)
{
    return (int32_t)((i * 2654435761u + (size_t)rank * 40503u) % 20011) -
           10005;
}

/* The ranks that use the last result at once, and those that do other
 * work first: odd ranks, for a time that grows with the rank. */
static double late_s(int rank)
{
    return rank % 2 ? 0.02 * rank : 0;
}

static int run_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)comm;
    (void)arg;
    char id[32];
    snprintf(id, sizeof id, "fakehost%d", rank);
    setenv("TNT_HOST_ID", id, 1);
    /* The late ranks read slowly: a small receive window keeps the tail
     * of an early rank's last message in that rank's send buffer after
     * its send completed and it freed, so its other sockets' ends arrive
     * before that tail. */
    if (late_s(rank) > 0)
        setenv("TNT_SOCKET_BUFFER", "16k", 1);
    tnt_comm_t c = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&c);
    th_report_check(rep, "init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 1;
    size_t maxn = k_counts[NROUNDS - 1];
    int32_t *x = th_xmalloc(maxn * (size_t)p * sizeof(int32_t));
    int32_t *y = th_xmalloc(maxn * sizeof(int32_t));
    char name[64];
    for (size_t k = 0; k < NROUNDS; k++) {
        size_t n = k_counts[k];
        for (size_t i = 0; i < n * (size_t)p; i++)
            x[i] = input(rank, i);
        rc = tnt_reduce_scatter(c, x, y, n, TNT_I32, TNT_SUM);
        if (k == NROUNDS - 1 && late_s(rank) > 0)
            th_sleep(late_s(rank)); /* the result is used later here */
        size_t wrong = 0, first = 0;
        for (size_t i = 0; rc == TNT_SUCCESS && i < n; i++) {
            size_t g = (size_t)rank * n + i;
            int64_t ref = 0;
            for (int q = 0; q < p; q++)
                ref += input(q, g);
            if (y[i] != (int32_t)ref && wrong++ == 0)
                first = g;
        }
        snprintf(name, sizeof name, "rs_n%zu", n);
        th_report_check(rep, name, rc, wrong, first, NULL, 0);
    }
    free(x);
    free(y);
    rc = tnt_comm_free(c);
    th_report_check(rep, "free", rc, 0, 0, NULL, 0);
    return th_report_failures(rep) ? 1 : 0;
}

static void run(int p, const char *nsock)
{
    char socks[64];
    snprintf(socks, sizeof socks, "TNT_SOCKETS_PER_PEER=%s", nsock);
    const char *env[] = {socks, NULL};
    th_job_t job = {.name = socks, .nranks = p, .env = env, .fn = run_rank,
                    .deadline_s = 60, .no_init = 1};
    /* The ends race with the last messages: three tries of each (before
     * the fix, one to three of the four settings failed in each of 7
     * runs of the program). */
    for (int t = 0; t < 3; t++)
        th_run_job(&job, NULL);
}

static void test_p3_s2(void) { run(3, "2"); }
static void test_p3_s4(void) { run(3, "4"); }
static void test_p5_s2(void) { run(5, "2"); }
static void test_p5_s4(void) { run(5, "4"); }

static const th_test_def_t k_tests[] = {
    {"staggered_free", "p3_sockets2", test_p3_s2},
    {"staggered_free", "p3_sockets4", test_p3_s4},
    {"staggered_free", "p5_sockets2", test_p5_s2},
    {"staggered_free", "p5_sockets4", test_p5_s4},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
