/*
 * A clean exit is not a failure (issue 26, item 1). A job that creates a
 * communicator and frees it with no collective in between -- also after
 * an argument error, the user's real mistake -- must print no ERROR or
 * WARNING on any rank and must not linger in tnt_comm_free, on every
 * transport and at every rank count. The higher ranks typically free and
 * exit before the lower ones have connected to them ahead of need (over
 * shared memory the connect then is refused at once), which used to fail
 * the communicator with "lost rank 2 ... Connection refused" and made
 * tnt_comm_free wait 2 s for notices.
 *
 * Not a timing test: the linger is seen structurally, by the DEBUG line
 * tnt_comm_free logs when it lingers (engine.c, linger_for_notices), and
 * the failure by its ERROR line. Each job runs a few rounds since which
 * rank exits first is up to the scheduler.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define ROUNDS 3

/* arg: non-NULL to make an argument error before freeing. */
static int clean_exit_rank(tnt_comm_t unused, int rank, int nranks,
                           void *arg, th_report_t *rep)
{
    (void)unused;
    (void)nranks;
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    th_report_expect(rep, "init", rc == TNT_SUCCESS, rc, "init: %d (%s): "
                     "'%s'", rc, tnt_strerror(rc), tnt_last_error());
    if (rc != TNT_SUCCESS)
        return 1;
    if (arg) {
        float x = 0;
        tnt_result_t bad = tnt_allreduce(comm, &x, &x, 1, (tnt_dtype_t)99,
                                         TNT_SUM);
        th_report_expect(rep, "arg_error", bad == TNT_ERR_INVALID_ARG, bad,
                         "allreduce with dtype 99 on rank %d: %d (%s)",
                         rank, bad, tnt_strerror(bad));
    }
    rc = tnt_comm_free(comm);
    th_report_expect(rep, "free", rc == TNT_SUCCESS, rc, "free: %d (%s)",
                     rc, tnt_strerror(rc));
    return 0;
}

static void run_matrix(int arg_error)
{
    static const char *const tps[] = {"tcp", "shm", "auto"};
    static const int ps[] = {2, 3, 5};
    char log[] = "/tmp/tnt-clean-exit-XXXXXX";
    int lfd = mkstemp(log);
    if (lfd < 0) {
        TH_CHECK(0, "mkstemp: %s", strerror(errno));
        return;
    }
    fflush(stderr);
    int saved = dup(2);
    dup2(lfd, 2);
    close(lfd);
    for (size_t t = 0; t < sizeof tps / sizeof tps[0]; t++)
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
            for (int round = 0; round < ROUNDS; round++) {
                char tpv[64], name[96];
                snprintf(tpv, sizeof tpv, "TNT_TRANSPORT=%s", tps[t]);
                snprintf(name, sizeof name, "clean exit%s %s p=%d #%d",
                         arg_error ? " after argument error" : "", tps[t],
                         ps[i], round);
                const char *env[] = {tpv, "TNT_LOG_LEVEL=DEBUG",
                                     "TNT_LOG_ALL_RANKS=1", NULL};
                th_job_t job = {.name = name, .nranks = ps[i], .env = env,
                                .fn = clean_exit_rank,
                                .arg = arg_error ? (void *)1 : NULL,
                                .deadline_s = 60, .no_init = 1};
                th_run_job(&job, NULL);
            }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    int errors = th_count_lines(log, " ERROR: ", NULL);
    int warnings = th_count_lines(log, " WARNING: ", NULL);
    int lingers = th_count_lines(log, "free lingers", NULL);
    TH_CHECK(errors == 0 && warnings == 0 && lingers == 0,
             "%d ERROR, %d WARNING and %d lingering tnt_comm_free lines "
             "on a clean exit (log: %s)", errors, warnings, lingers, log);
    if (errors == 0 && warnings == 0 && lingers == 0)
        unlink(log);
}

static void test_clean_exit(void)
{
    run_matrix(0);
}

static void test_clean_exit_after_arg_error(void)
{
    run_matrix(1);
}

static const th_test_def_t k_tests[] = {
    {"multi", "create_free", test_clean_exit},
    {"multi", "arg_error_free", test_clean_exit_after_arg_error},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
