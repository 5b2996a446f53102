/*
 * The hang report on demand: tnt_comm_report() writes what each
 * collective in flight is waiting for (collective, sequence number, step,
 * peer, bytes outstanding), and SIGUSR1 logs the same report at WARNING
 * on stderr unless the application has a SIGUSR1 handler of its own.
 * In a p=2 job rank 1 joins its fourth allreduce a good second late,
 * while rank 0 has that allreduce in flight: rank 0's report must name
 * the allreduce, its sequence number (3: the fourth collective, counted
 * from 0 as in the library's timeout messages) and rank 1; SIGUSR1 must
 * log it without ending the process; afterwards the allreduce completes
 * correctly. A second job installs its own handler before creating the
 * communicator: the library must leave it in place.
 *
 * Usage: test_report [suite [test]].
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datagen.h"
#include "harness.h"

enum { N = 1000, PRIOR = 3 };

/* The report names sequence number `seq` as "#seq" or "seq seq",
 * followed by something that is not a digit. */
static int names_seq(const char *text, unsigned seq)
{
    char pat[2][32];
    snprintf(pat[0], sizeof pat[0], "#%u", seq);
    snprintf(pat[1], sizeof pat[1], "seq %u", seq);
    for (int k = 0; k < 2; k++)
        for (const char *s = strstr(text, pat[k]); s;
             s = strstr(s + 1, pat[k])) {
            char next = s[strlen(pat[k])];
            if (next < '0' || next > '9')
                return 1;
        }
    return 0;
}

/* Everything written to stderr while `fn` runs, up to `wait_s` seconds
 * until `want` shows up (the library may log from another thread). */
static void capture_stderr(void (*fn)(void), const char *want,
                           double wait_s, char *out, size_t len)
{
    char path[] = "/tmp/tnt_test_report_XXXXXX";
    int fd = mkstemp(path);
    out[0] = '\0';
    if (fd < 0)
        return;
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    double limit = th_now() + wait_s;
    for (;;) {
        ssize_t n = pread(fd, out, len - 1, 0);
        out[n > 0 ? n : 0] = '\0';
        if (strstr(out, want) || th_now() > limit)
            break;
        usleep(10000);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
}

static void raise_usr1(void)
{
    raise(SIGUSR1);
}

static int report_rank(tnt_comm_t comm, int rank, int p, void *arg,
                       th_report_t *rep)
{
    (void)arg;
    static float send[N], recv[N];
    for (int i = 0; i < PRIOR; i++) {
        tnt_gen_fill(send, N, TNT_F32, TNT_SUM, 10 + (uint64_t)i, rank);
        th_report_check(rep, "prior", tnt_allreduce(comm, send, recv, N,
                                                    TNT_F32, TNT_SUM),
                        0, 0, NULL, 0);
    }
    tnt_gen_fill(send, N, TNT_F32, TNT_SUM, 99, rank);
    char buf[2048];
    if (rank == 1) {
        usleep((useconds_t)(1.5e6 * th_timeout_mult()));
        tnt_result_t rc = tnt_allreduce(comm, send, recv, N, TNT_F32,
                                        TNT_SUM);
        size_t first = 0;
        size_t wrong = rc ? 0 : tnt_gen_check_allreduce(recv, 0, N, TNT_F32,
                                                        TNT_SUM, 99, p,
                                                        &first);
        th_report_check(rep, "late_allreduce", rc, wrong, first, recv,
                        sizeof recv);
        th_report_expect(rep, "report", 1, 0, "-");
        th_report_expect(rep, "sigusr1", 1, 0, "-");
        th_report_expect(rep, "small_buffer", 1, 0, "-");
    } else {
        tnt_request_t req = NULL;
        tnt_result_t rc = tnt_iallreduce(comm, send, recv, N, TNT_F32,
                                         TNT_SUM, &req);
        usleep(200000);
        tnt_result_t rr = tnt_comm_report(comm, buf, sizeof buf);
        th_report_expect(rep, "report",
                         rc == TNT_SUCCESS && rr == TNT_SUCCESS &&
                             strstr(buf, "allreduce") &&
                             names_seq(buf, PRIOR) &&
                             strstr(buf, "rank 1") && strstr(buf, "step"),
                         rr, "report with the allreduce #%d waiting for "
                         "rank 1 (rc %d): '%.180s'", PRIOR, rr, buf);

        /* SIGUSR1 with no handler of the application's: the same report
         * logged (at WARNING, or under its own REPORT tag so that it shows
         * whatever the log level), and the process lives on. */
        char log[4096];
        capture_stderr(raise_usr1, "rank 1", 3.0 * th_timeout_mult(), log,
                       sizeof log);
        th_report_expect(rep, "sigusr1",
                         (strstr(log, "WARNING") || strstr(log, "REPORT")) &&
                             strstr(log, "rank 1") &&
                             names_seq(log, PRIOR),
                         0, "SIGUSR1 logged: '%.200s'", log);

        /* A buffer too small for the report: truncated, terminated,
         * nothing written past it. */
        char small[16];
        memset(small, 'X', sizeof small);
        rr = tnt_comm_report(comm, small, 8);
        th_report_expect(rep, "small_buffer",
                         small[7] == '\0' && small[8] == 'X' &&
                             small[15] == 'X' && rr >= 0,
                         rr, "tnt_comm_report into 8 bytes returned %d "
                         "(%s) and wrote '%.8s'", rr, tnt_strerror(rr),
                         small);

        tnt_result_t w = req ? tnt_wait(req) : rc;
        size_t first = 0;
        size_t wrong = w ? 0 : tnt_gen_check_allreduce(recv, 0, N, TNT_F32,
                                                       TNT_SUM, 99, p,
                                                       &first);
        th_report_check(rep, "late_allreduce", w, wrong, first, recv,
                        sizeof recv);
        if (req)
            tnt_request_free(req);
    }
    /* Nothing in flight: the report says so without naming the old
     * collective. */
    tnt_result_t rr = tnt_comm_report(comm, buf, sizeof buf);
    th_report_expect(rep, "idle_report",
                     rr == TNT_SUCCESS && !names_seq(buf, PRIOR), rr,
                     "report with nothing in flight: '%.180s'", buf);
    return 0;
}

static void test_report_in_flight(void)
{
    const char *env[] = {"TNT_TIMEOUT=30", "TNT_LOG_LEVEL=WARNING", NULL};
    th_job_t job = {"report p=2", 2, env, report_rank, NULL, 60, 0, 0};
    th_run_job(&job, NULL);
}

static volatile sig_atomic_t g_usr1;

static void on_usr1(int sig)
{
    (void)sig;
    g_usr1++;
}

/* The application's own SIGUSR1 handler, installed before the
 * communicator exists, stays the one that runs. */
static int own_handler_rank(tnt_comm_t unused, int rank, int p, void *arg,
                            th_report_t *rep)
{
    (void)unused;
    (void)rank;
    (void)p;
    (void)arg;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    th_report_check(rep, "init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 0;
    raise(SIGUSR1);
    struct sigaction now;
    sigaction(SIGUSR1, NULL, &now);
    th_report_expect(rep, "own_handler_kept",
                     g_usr1 == 1 && now.sa_handler == on_usr1, 0,
                     "the application's handler ran %d times and is %s "
                     "installed", (int)g_usr1,
                     now.sa_handler == on_usr1 ? "still" : "no longer");
    th_report_check(rep, "free", tnt_comm_free(comm), 0, 0, NULL, 0);
    return 0;
}

static void test_own_handler(void)
{
    th_job_t job = {"own SIGUSR1 handler p=2", 2, NULL, own_handler_rank,
                    NULL, 60, 1, 0};
    th_run_job(&job, NULL);
}

static void test_bad_args(void)
{
    char buf[64];
    tnt_result_t rc = tnt_comm_report(NULL, buf, sizeof buf);
    TH_CHECK(rc == TNT_ERR_INVALID_COMM || rc == TNT_ERR_INVALID_ARG,
             "tnt_comm_report(NULL comm) returned %d (%s)", rc,
             tnt_strerror(rc));
    unsetenv("TNT_RANK");
    unsetenv("TNT_SIZE");
    tnt_comm_t comm = NULL;
    if (tnt_comm_init_from_env(&comm) != TNT_SUCCESS)
        return;
    rc = tnt_comm_report(comm, NULL, sizeof buf);
    TH_CHECK(rc == TNT_ERR_INVALID_ARG, "tnt_comm_report(comm, NULL, 64) "
             "returned %d (%s)", rc, tnt_strerror(rc));
    tnt_comm_free(comm);
}

/* ---- the rank behind ---------------------------------------------------
 * p=5 over the ring, TNT_TIMEOUT=4: rank 3 stops itself (SIGSTOP) before
 * its collective #BEHIND_SEQ, while every other rank waits in it, each
 * for its left neighbour. A helper process resumes rank 3 after the
 * others have failed. Every survivor's timeout must name rank 3 as the
 * rank behind, not the neighbour it waits for itself; its messages are
 * small enough for the socket buffers, so nobody is blocked sending to
 * it and nobody may say it is "not reading".
 *
 * The same with rank 3's partners blocked sending to it (issue 34):
 * p=4, recursive doubling, 200 KB messages (eager: they leave at once)
 * over TNT_SOCKET_BUFFER=4k. Rank 2 (first step) and rank 1 (second) are
 * blocked in their sends to the stopped rank 3: each one's own hang
 * report (tnt_comm_report, read while it waits) must say "blocked sending
 * to rank 3"; rank 0 waits for rank 2, which answers that it is blocked
 * sending to rank 3. Whichever rank times out first (its text goes to
 * all), every error must say that rank 3 is not reading and none may call
 * rank 0, 1 or 2 behind (they are inside the library). Before issue 34
 * all said "rank 3 is behind ... (stopped, or not calling the library?)"
 * and nothing of the blocked sends. */
enum { BEHIND_P = 5, BEHIND_SEQ = 6, BEHIND_COUNT = 4096 };
enum { BLOCKED_P = 4, BLOCKED_COUNT = 50000 };

typedef struct behind_arg {
    size_t count;
    int blocked;   /* rank 3's partners block sending to it */
} behind_arg_t;

static int behind_rank(tnt_comm_t comm, int rank, int p, void *arg,
                       th_report_t *rep)
{
    (void)p;
    const behind_arg_t *a = arg;
    int32_t *buf = th_xmalloc(a->count * sizeof(int32_t));
    tnt_result_t rc = TNT_SUCCESS;
    for (int k = 0; k <= BEHIND_SEQ && rc == TNT_SUCCESS; k++) {
        if (rank == 3 && k == BEHIND_SEQ) {
            pid_t me = getpid();
            if (fork() == 0) {
                th_sleep(8.0 * th_timeout_mult());
                kill(me, SIGCONT);
                _exit(0);
            }
            raise(SIGSTOP);
        }
        for (size_t j = 0; j < a->count; j++)
            buf[j] = rank + (int32_t)j;
        if (!a->blocked || k < BEHIND_SEQ || (rank != 1 && rank != 2)) {
            rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, a->count, TNT_I32,
                               TNT_SUM);
            continue;
        }
        /* Rank 3's partners: their own hang report, read while the
         * collective waits (the first rank to time out sends its text to
         * all, so the error may be another rank's). */
        tnt_request_t req;
        rc = tnt_iallreduce(comm, TNT_IN_PLACE, buf, a->count, TNT_I32,
                            TNT_SUM, &req);
        char text[4096] = "";
        int seen = 0;
        while (rc == TNT_SUCCESS &&
               (rc = tnt_wait_timeout(req, 0.1)) == TNT_TIMEOUT) {
            rc = tnt_comm_report(comm, text, sizeof text);
            seen = seen || strstr(text, "blocked sending to rank 3") != NULL;
        }
        th_report_expect(rep, "own_report_blocked", seen, rc, "%s", text);
        tnt_request_free(req);
    }
    const char *err = rc == TNT_SUCCESS ? "succeeded" : tnt_last_error();
    th_report_expect(rep, "timeout", rc != TNT_SUCCESS, rc, "%s", err);
    int named;
    if (!a->blocked) {
        named = (strstr(err, "rank 3 is behind") != NULL ||
                 strstr(err, "rank 3 has not reached") != NULL) &&
                strstr(err, "not reading") == NULL;
    } else {
        /* Ranks 1 and 2 of their own send, rank 0 from rank 2's answer.
         * Nobody inside the library is called behind. */
        named = strstr(err, "rank 3 is not reading") != NULL &&
                strstr(err, "rank 0 is behind") == NULL &&
                strstr(err, "rank 1 is behind") == NULL &&
                strstr(err, "rank 2 is behind") == NULL;
    }
    th_report_expect(rep, "names_rank_3", rank == 3 || named, rc, "%s", err);
    free(buf);
    return 0;
}

static void behind_job(const char *name, int p, const char *const *env,
                       behind_arg_t *a)
{
    th_job_t job = {name, p, env, behind_rank, a, 90, 0, 2};
    th_result_t res;
    th_run_job(&job, &res);
    for (int r = 0; r < p; r++) {
        const char *names[] = {"timeout", "names_rank_3",
                               "own_report_blocked"};
        int blocked_rank = a->blocked && (r == 1 || r == 2);
        for (int k = 0; k < 2 + blocked_rank; k++) {
            const th_case_t *c = th_find_case(&res, r, names[k]);
            TH_CHECK(c && c->ok, "rank %d: %s: %s", r, names[k],
                     c ? c->msg : "no report");
            if (c && k == 1)
                printf("  rank %d: %s\n", r, c->msg);
        }
    }
    th_result_free(&res);
}

static void test_names_rank_behind(void)
{
    const char *env[] = {"TNT_TIMEOUT=4", "TNT_TRANSPORT=tcp",
                         "TNT_ALLREDUCE_ALGO=ring", "TNT_LOG_LEVEL=ERROR",
                         NULL};
    behind_arg_t a = {BEHIND_COUNT, 0};
    behind_job("rank 3 stopped, p=5 ring", BEHIND_P, env, &a);
}

static void test_names_rank_not_reading(void)
{
    const char *env[] = {"TNT_TIMEOUT=4", "TNT_TRANSPORT=tcp",
                         "TNT_ALLREDUCE_ALGO=rd", "TNT_SOCKET_BUFFER=4k",
                         "TNT_LOG_LEVEL=ERROR", NULL};
    behind_arg_t a = {BLOCKED_COUNT, 1};
    behind_job("rank 3 stopped, its partners blocked sending, p=4 rd",
               BLOCKED_P, env, &a);
}

static const th_test_def_t k_tests[] = {
    {"report", "names_rank_behind", test_names_rank_behind},
    {"report", "names_rank_not_reading", test_names_rank_not_reading},
    {"report", "in_flight", test_report_in_flight},
    {"report", "own_handler", test_own_handler},
    {"report", "bad_args", test_bad_args},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
