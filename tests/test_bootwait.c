/*
 * The bootstrap when a rank is missing, dead or misconfigured: no silent
 * wait, no blame on the wrong rank. The ranks here are forked by hand
 * (not through the harness) because the point is a job whose ranks do
 * not all arrive: each runs tnt_comm_init_from_env with its stderr in a
 * file and writes its result and last error to another.
 *
 *   missing    TNT_SIZE=4, ranks 0-2 started: rank 0 logs which rank it
 *              waits for long before its deadline, and every rank's error
 *              names rank 3 (no "no bootstrap answer from rank 0").
 *   dead       TNT_SIZE=4, ranks 0-2 started: rank 2 registers and is
 *              killed while rank 3 is still missing: creation fails on
 *              ranks 0 and 1 naming rank 2 as dead and rank 3 as missing,
 *              long before TNT_CONNECT_TIMEOUT.
 *   wrong_key  TNT_SIZE=3, rank 2 has another TNT_JOB_KEY: ranks 0 and 1
 *              fail naming rank 2, well before TNT_CONNECT_TIMEOUT.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tnt/tnt.h"

typedef struct bw_job {
    char dir[64];
    char root[64];
    int size;
    double connect_timeout;
} bw_job_t;

static void bw_path(const bw_job_t *j, int rank, const char *what,
                    char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s.%d", j->dir, what, rank);
}

static void bw_setup(bw_job_t *j, int size, double connect_timeout)
{
    memset(j, 0, sizeof(*j));
    snprintf(j->dir, sizeof(j->dir), "/tmp/tnt-bootwait-XXXXXX");
    TH_CHECK(mkdtemp(j->dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(j->root, sizeof(j->root), "127.0.0.1:%d", th_free_port());
    j->size = size;
    j->connect_timeout = connect_timeout * th_timeout_mult();
}

/* Fork one rank: init, then write "rc seconds error" to result.<rank>. */
static pid_t bw_start(const bw_job_t *j, int rank, const char *key)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char path[128], v[32];
    bw_path(j, rank, "stderr", path, sizeof(path));
    if (!freopen(path, "w", stderr))
        _exit(3);
    setenv("TNT_ROOT_ADDR", j->root, 1);
    setenv("TNT_JOB_KEY", key, 1);
    setenv("TNT_LOG_LEVEL", "INFO", 1);
    setenv("TNT_LOG_ALL_RANKS", "1", 1);
    snprintf(v, sizeof(v), "%d", j->size);
    setenv("TNT_SIZE", v, 1);
    snprintf(v, sizeof(v), "%d", rank);
    setenv("TNT_RANK", v, 1);
    snprintf(v, sizeof(v), "%.0f", j->connect_timeout);
    setenv("TNT_CONNECT_TIMEOUT", v, 1);
    double t0 = th_now();
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    double took = th_now() - t0;
    bw_path(j, rank, "result", path, sizeof(path));
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d %.3f %s\n", (int)rc, took,
                rc == TNT_SUCCESS ? "-" : tnt_last_error());
        fclose(f);
    }
    if (comm)
        tnt_comm_free(comm);
    _exit(0);
}

typedef struct bw_result {
    int rc;
    double took;
    char err[1024];
} bw_result_t;

static void bw_wait(pid_t pid, double limit)
{
    double end = th_now() + limit;
    int st;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (th_now() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return;
        }
        th_sleep(0.02);
    }
}

static int bw_result(const bw_job_t *j, int rank, bw_result_t *r)
{
    char path[128];
    bw_path(j, rank, "result", path, sizeof(path));
    memset(r, 0, sizeof(*r));
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fscanf(f, "%d %lf ", &r->rc, &r->took) == 2 &&
             fgets(r->err, sizeof(r->err), f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

static void bw_cleanup(const bw_job_t *j)
{
    if (CU_get_number_of_failures() != 0 || getenv("TNT_TEST_KEEP")) {
        printf("  (logs kept in %s)\n", j->dir);
        return;
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", j->dir);
    (void)!system(cmd);
}

/* Rank r's stderr has a line with a (and b). */
static int bw_logged(const bw_job_t *j, int rank, const char *a,
                     const char *b)
{
    char path[128];
    bw_path(j, rank, "stderr", path, sizeof(path));
    return th_count_lines(path, a, b);
}

#define KEY "bootwait-key"

static void test_missing_rank(void)
{
    bw_job_t j;
    bw_setup(&j, 4, 8.0);
    pid_t pid[3];
    for (int r = 0; r < 3; r++)
        pid[r] = bw_start(&j, r, KEY);
    for (int r = 0; r < 3; r++)
        bw_wait(pid[r], j.connect_timeout + 60.0 * th_timeout_mult());
    /* Rank 0 said whom it waits for, before giving up. */
    TH_CHECK(bw_logged(&j, 0, "WARNING", "still waiting for rank 3") >= 1,
             "rank 0 never logged that it waits for rank 3");
    for (int r = 0; r < 3; r++) {
        bw_result_t res;
        if (bw_result(&j, r, &res) != 0) {
            TH_CHECK(0, "rank %d left no result", r);
            continue;
        }
        printf("  rank %d: rc %d after %.1f s: %s", r, res.rc, res.took,
               res.err);
        TH_CHECK(res.rc < 0, "rank %d: init returned %d, expected an error",
                 r, res.rc);
        TH_CHECK(strstr(res.err, "missing: rank 3") != NULL,
                 "rank %d's error does not name rank 3 as missing: %s", r,
                 res.err);
        TH_CHECK(strstr(res.err, "no bootstrap answer") == NULL,
                 "rank %d blames rank 0: %s", r, res.err);
    }
    /* The ranks already registered heard that rank 0 is alive. */
    for (int r = 1; r < 3; r++)
        TH_CHECK(bw_logged(&j, r, "rank 0 is alive and waiting",
                           "rank 3") >= 1,
                 "rank %d never heard that rank 0 waits for rank 3", r);
    bw_cleanup(&j);
}

static void test_dead_after_register(void)
{
    /* A long connect timeout: the job must fail because rank 2 died,
     * not because time ran out. */
    bw_job_t j;
    bw_setup(&j, 4, 120.0);
    pid_t pid[3];
    for (int r = 0; r < 3; r++)
        pid[r] = bw_start(&j, r, KEY);
    /* Rank 0's first note (after a few seconds) says ranks 1 and 2
     * registered: only then is rank 2 killed. Rank 3 never comes. */
    double end = th_now() + 60.0 * th_timeout_mult();
    while (bw_logged(&j, 0, "still waiting for", "3 of 4 ranks") < 1 &&
           th_now() < end)
        th_sleep(0.05);
    TH_CHECK(bw_logged(&j, 0, "still waiting for", "3 of 4 ranks") >= 1,
             "rank 0 never logged that ranks 1 and 2 registered");
    kill(pid[2], SIGKILL);
    waitpid(pid[2], NULL, 0);
    for (int r = 0; r < 2; r++)
        bw_wait(pid[r], 60.0 * th_timeout_mult());
    for (int r = 0; r < 2; r++) {
        bw_result_t res;
        if (bw_result(&j, r, &res) != 0) {
            TH_CHECK(0, "rank %d left no result", r);
            continue;
        }
        printf("  rank %d: rc %d after %.1f s: %s", r, res.rc, res.took,
               res.err);
        TH_CHECK(res.rc == TNT_ERR_PEER_LOST, "rank %d: init returned %d "
                 "(%s), expected TNT_ERR_PEER_LOST", r, res.rc,
                 tnt_strerror(res.rc));
        TH_CHECK(strstr(res.err, "rank 2 ") != NULL &&
                 strstr(res.err, "died") != NULL,
                 "rank %d's error does not say that rank 2 died: %s", r,
                 res.err);
        TH_CHECK(strstr(res.err, "rank 3") != NULL,
                 "rank %d's error does not name rank 3 as missing: %s", r,
                 res.err);
    }
    bw_cleanup(&j);
}

static void test_wrong_key(void)
{
    bw_job_t j;
    bw_setup(&j, 3, 120.0);
    pid_t pid[3];
    for (int r = 0; r < 3; r++)
        pid[r] = bw_start(&j, r, r == 2 ? "another-" KEY : KEY);
    for (int r = 0; r < 3; r++)
        bw_wait(pid[r], 60.0 * th_timeout_mult());
    for (int r = 0; r < 3; r++) {
        bw_result_t res;
        if (bw_result(&j, r, &res) != 0) {
            TH_CHECK(0, "rank %d left no result", r);
            continue;
        }
        printf("  rank %d: rc %d after %.1f s: %s", r, res.rc, res.took,
               res.err);
        TH_CHECK(res.rc < 0, "rank %d: init returned %d, expected an error",
                 r, res.rc);
        TH_CHECK(strstr(res.err, "TNT_JOB_KEY") != NULL,
                 "rank %d's error does not mention TNT_JOB_KEY: %s", r,
                 res.err);
        if (r < 2)
            TH_CHECK(strstr(res.err, "rank 2 ") != NULL,
                     "rank %d's error does not name rank 2: %s", r,
                     res.err);
    }
    bw_cleanup(&j);
}

static const th_test_def_t k_tests[] = {
    {"bootwait", "missing", test_missing_rank},
    {"bootwait", "dead", test_dead_after_register},
    {"bootwait", "wrong_key", test_wrong_key},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
