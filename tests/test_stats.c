/*
 * tnt_comm_stats and the INFO line (issue 23, counters).
 *
 * - counts: what a job did, counted exactly: N allreduces of S bytes are
 *   N calls and N x S bytes of kind allreduce (and in the algorithms'
 *   entries, one algorithm per call), broadcasts, allgathers,
 *   reduce-scatters and barriers likewise, at p = 2 and 3 over TCP and
 *   over shared memory (where small blocking allreduces take the lean
 *   slots path, the slots' run_now); the transport that serves the peers is
 *   running, reports, serves p - 1 peers, and over TCP sent and received
 *   messages. Deltas around the work: what the harness does is not ours.
 * - hwm: a receiver late by 1 s behind a root broadcasting eager-sized
 *   messages holds at least one of them early: its high-water mark is at
 *   least that message and at most TNT_MAX_UNEXPECTED_BYTES on every rank.
 * - versioned: an old caller's smaller struct gets only the fields its
 *   size covers, and nothing past it is written (a canary after it).
 * - bad_args: NULL, a size below TNT_STATS_SIZE_MIN: TNT_ERR_INVALID_ARG.
 * - plugins: over the TCP transport built as a v4 plugin (its table has
 *   the stats entry) it reports; built as a v1 plugin (a table too short
 *   for it) it is running, counted by the core, and flagged as not
 *   reporting, its own counters zero (TNT_TEST_TCP_PLUGIN[_V1], set by
 *   meson; a case is skipped without them).
 * - strangers: a rank sends garbage to its own listening sockets (its
 *   TCP data port, or its shared-memory socket): the transport refuses
 *   the connection and counts it (strangers_refused >= 1).
 * - info: TNT_LOG_LEVEL=INFO at p = 3 over tcp and over shm, and at p = 4
 *   on two fake hosts: every rank says once which transport its peers
 *   use and why.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static int run_logged(th_job_t *job, char *log);

#define N_ALLREDUCE 7
#define S_ALLREDUCE 4096   /* bytes: slots over shm, rd over tcp */
#define N_BCAST 3
#define S_BCAST 1000
#define N_BARRIER 4
#define N_GATHER 2
#define S_GATHER 256

static int get_stats(tnt_comm_t comm, tnt_stats_t *s)
{
    tnt_stats_t init = TNT_STATS_INIT;
    *s = init;
    return tnt_comm_stats(comm, s);
}

static uint64_t algo_calls(const tnt_stats_t *s)
{
    uint64_t n = 0;
    for (int i = 0; i < TNT_STATS_ALGOS; i++)
        n += s->algo[i].calls;
    return n;
}

/* arg: the transport position that serves the peers. */
static int counts_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                     th_report_t *rep)
{
    int tpi = (int)(intptr_t)arg;
    tnt_stats_t a, b;
    tnt_result_t rc = get_stats(comm, &a);
    th_report_expect(rep, "stats before", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    float *buf = th_xmalloc((size_t)S_GATHER * (size_t)nranks + 4096);
    memset(buf, 0, (size_t)S_GATHER * (size_t)nranks + 4096);
    for (int i = 0; i < N_ALLREDUCE && rc == TNT_SUCCESS; i++)
        rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, S_ALLREDUCE / 4, TNT_F32,
                           TNT_SUM);
    for (int i = 0; i < N_BCAST && rc == TNT_SUCCESS; i++)
        rc = tnt_broadcast(comm, buf, S_BCAST, TNT_U8, 0);
    for (int i = 0; i < N_BARRIER && rc == TNT_SUCCESS; i++)
        rc = tnt_barrier(comm);
    for (int i = 0; i < N_GATHER && rc == TNT_SUCCESS; i++)
        rc = tnt_allgather(comm, TNT_IN_PLACE, buf, S_GATHER, TNT_U8);
    for (int i = 0; i < N_GATHER && rc == TNT_SUCCESS; i++)
        rc = tnt_reduce_scatter(comm, buf, buf + 1024, S_GATHER / 4,
                                TNT_F32, TNT_SUM);
    th_report_expect(rep, "collectives", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    rc = get_stats(comm, &b);
    th_report_expect(rep, "stats after", rc == TNT_SUCCESS &&
                     b.size == sizeof(b), rc, "%s", tnt_last_error());
    static const struct {
        int kind;
        uint64_t n, bytes;
        const char *name;
    } want[] = {
        {TNT_STATS_ALLREDUCE, N_ALLREDUCE, S_ALLREDUCE, "allreduce"},
        {TNT_STATS_BROADCAST, N_BCAST, S_BCAST, "broadcast"},
        {TNT_STATS_BARRIER, N_BARRIER, 0, "barrier"},
        {TNT_STATS_ALLGATHER, N_GATHER, S_GATHER, "allgather"},
        {TNT_STATS_REDUCE_SCATTER, N_GATHER, S_GATHER, "reduce_scatter"},
    };
    uint64_t total = 0;
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        uint64_t n = b.kind[want[k].kind].calls - a.kind[want[k].kind].calls;
        uint64_t by = b.kind[want[k].kind].bytes - a.kind[want[k].kind].bytes;
        char name[64];
        snprintf(name, sizeof name, "count %s", want[k].name);
        th_report_expect(rep, name, n == want[k].n &&
                         by == want[k].n * want[k].bytes, 0, "rank %d: %llu "
                         "calls, %llu bytes; want %llu, %llu", rank,
                         (unsigned long long)n, (unsigned long long)by,
                         (unsigned long long)want[k].n,
                         (unsigned long long)(want[k].n * want[k].bytes));
        total += want[k].n;
    }
    uint64_t by_algo = algo_calls(&b) - algo_calls(&a);
    th_report_expect(rep, "count by algorithm", by_algo == total, 0,
                     "rank %d: %llu calls by algorithm, %llu by kind", rank,
                     (unsigned long long)by_algo, (unsigned long long)total);
    const tnt_stats_transport_t *t = &b.transport[tpi];
    int tp_ok = (t->flags & TNT_STATS_TP_RUNNING) &&
                (t->flags & TNT_STATS_TP_REPORTS) &&
                t->peers == (uint32_t)(nranks - 1);
    /* Over TCP every collective moved messages; over shm the on-host
     * algorithms move none, the barrier and allgather do. */
    tp_ok = tp_ok && t->msgs_sent > a.transport[tpi].msgs_sent &&
            t->msgs_recv > a.transport[tpi].msgs_recv &&
            t->strangers_refused == 0 && t->strangers_evicted == 0;
    th_report_expect(rep, "transport", tp_ok, 0, "rank %d: %s flags %u "
                     "peers %u sent %llu recv %llu refused %llu", rank,
                     t->name, t->flags, t->peers,
                     (unsigned long long)t->msgs_sent,
                     (unsigned long long)t->msgs_recv,
                     (unsigned long long)t->strangers_refused);
    th_report_expect(rep, "hwm bound", b.unexpected_hwm <= (4u << 20), 0,
                     "rank %d: hwm %llu", rank,
                     (unsigned long long)b.unexpected_hwm);
    free(buf);
    return th_report_failures(rep);
}

static void run_counts(const char *tp, int tpi)
{
    char tpv[64];
    snprintf(tpv, sizeof tpv, "TNT_TRANSPORT=%s", tp);
    const char *env[] = {tpv, "TNT_MAX_UNEXPECTED_BYTES=4M", NULL};
    for (int p = 2; p <= 3; p++) {
        char name[64];
        snprintf(name, sizeof name, "counts %s p=%d", tp, p);
        th_job_t job = {.name = name, .nranks = p, .env = env,
                        .fn = counts_fn, .arg = (void *)(intptr_t)tpi,
                        .deadline_s = 60};
        th_run_job(&job, NULL);
    }
}

static void test_counts_tcp(void)
{
    run_counts("tcp", 0);
}

static void test_counts_shm(void)
{
    run_counts("shm", 1);
}

#define HWM_MSG ((size_t)48 << 10) /* eager, below the window */

static int hwm_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                  th_report_t *rep)
{
    (void)arg;
    unsigned char *buf = th_xmalloc(HWM_MSG);
    memset(buf, rank == 0 ? 7 : 0, HWM_MSG);
    if (rank == nranks - 1)
        th_sleep(1.0);
    tnt_result_t rc = TNT_SUCCESS;
    for (int i = 0; i < 8 && rc == TNT_SUCCESS; i++)
        rc = tnt_broadcast(comm, buf, HWM_MSG, TNT_U8, 0);
    tnt_stats_t s;
    if (rc == TNT_SUCCESS)
        rc = get_stats(comm, &s);
    th_report_expect(rep, "broadcasts", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    if (rc == TNT_SUCCESS) {
        int late = rank == nranks - 1;
        th_report_expect(rep, "hwm", s.unexpected_hwm <= ((size_t)1 << 20) &&
                         (!late || s.unexpected_hwm >= HWM_MSG), 0,
                         "rank %d%s: high-water mark %llu (want %s)", rank,
                         late ? " (late)" : "",
                         (unsigned long long)s.unexpected_hwm,
                         late ? ">= 48 KiB, <= 1 MiB" : "<= 1 MiB");
    }
    free(buf);
    return th_report_failures(rep);
}

static void test_hwm(void)
{
    const char *env[] = {"TNT_TRANSPORT=tcp", "TNT_MAX_UNEXPECTED_BYTES=1M",
                         "TNT_TIMEOUT=60", NULL};
    th_job_t job = {.name = "hwm late receiver", .nranks = 3, .env = env,
                    .fn = hwm_fn, .deadline_s = 60};
    th_run_job(&job, NULL);
}

/* The struct inside a larger buffer of canary bytes. */
static int versioned_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                        th_report_t *rep)
{
    (void)nranks;
    (void)arg;
    float x = 1;
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, &x, 1, TNT_F32,
                                    TNT_SUM);
    static const size_t sizes[] = {
        TNT_STATS_SIZE_MIN, offsetof(tnt_stats_t, transport),
        offsetof(tnt_stats_t, wait_ns)};
    for (size_t k = 0; rc == TNT_SUCCESS && k < 3; k++) {
        unsigned char mem[sizeof(tnt_stats_t) + 64];
        memset(mem, 0xab, sizeof mem);
        tnt_stats_t *s = (tnt_stats_t *)(void *)mem;
        s->size = sizes[k];
        s->version = 1;
        tnt_result_t r = tnt_comm_stats(comm, s);
        size_t past = 0;
        for (size_t i = sizes[k]; i < sizeof mem; i++)
            past += mem[i] != 0xab;
        char name[64];
        snprintf(name, sizeof name, "old size %zu", sizes[k]);
        th_report_expect(rep, name, r == TNT_SUCCESS && past == 0 &&
                         s->size == sizes[k] &&
                         s->kind[TNT_STATS_ALLREDUCE].calls >= 1, r,
                         "rank %d: rc %d, %zu bytes written past size, "
                         "size %zu, allreduces %llu", rank, r, past, s->size,
                         (unsigned long long)s->kind[TNT_STATS_ALLREDUCE]
                             .calls);
    }
    return th_report_failures(rep);
}

static void test_versioned(void)
{
    const char *env[] = {"TNT_TRANSPORT=tcp", NULL};
    th_job_t job = {.name = "versioned struct", .nranks = 2, .env = env,
                    .fn = versioned_fn, .deadline_s = 60};
    th_run_job(&job, NULL);
}

static int bad_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                  th_report_t *rep)
{
    (void)rank;
    (void)nranks;
    (void)arg;
    tnt_result_t r = tnt_comm_stats(comm, NULL);
    th_report_expect(rep, "NULL out", r == TNT_ERR_INVALID_ARG, r, "%d",
                     r);
    tnt_stats_t s = TNT_STATS_INIT;
    s.size = 0;
    r = tnt_comm_stats(comm, &s);
    th_report_expect(rep, "size 0", r == TNT_ERR_INVALID_ARG, r, "%d", r);
    s.size = TNT_STATS_SIZE_MIN - 1;
    r = tnt_comm_stats(comm, &s);
    th_report_expect(rep, "size too small", r == TNT_ERR_INVALID_ARG &&
                     strstr(tnt_last_error(), "TNT_STATS_SIZE_MIN"), r,
                     "%d: %s", r, tnt_last_error());
    tnt_stats_t ok = TNT_STATS_INIT;
    r = tnt_comm_stats(NULL, &ok);
    th_report_expect(rep, "NULL comm", r < 0, r, "%d", r);
    th_report_expect(rep, "algo names", tnt_stats_algo_name(0) == NULL &&
                     tnt_stats_algo_name(-1) == NULL &&
                     tnt_stats_algo_name(TNT_STATS_ALGOS) == NULL &&
                     tnt_stats_algo_name(1) != NULL, 0, "names");
    return th_report_failures(rep);
}

static void test_bad_args(void)
{
    const char *env[] = {"TNT_TRANSPORT=tcp", NULL};
    th_job_t job = {.name = "bad arguments", .nranks = 2, .env = env,
                    .fn = bad_fn, .deadline_s = 60};
    th_run_job(&job, NULL);
}

/* Connect to every listening socket of family `family` this process
 * holds, send garbage, and wait until the other side closes. Returns how
 * many were closed on us. */
static int garbage_to_own_listeners(int family)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    int fds[64], n = 0, closed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 64) {
        int fd = atoi(e->d_name);
        int acc = 0;
        socklen_t al = sizeof acc;
        if (e->d_name[0] != '.' && fd > 2 &&
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 &&
            acc)
            fds[n++] = fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fds[i], (struct sockaddr *)&ss, &sl) != 0 ||
            ss.ss_family != family)
            continue;
        if (family == AF_INET) /* bound to any address: loopback */
            ((struct sockaddr_in *)&ss)->sin_addr.s_addr =
                htonl(INADDR_LOOPBACK);
        /* The shm transport's sockets are SOCK_SEQPACKET. */
        int type = SOCK_STREAM;
        socklen_t tl = sizeof type;
        getsockopt(fds[i], SOL_SOCKET, SO_TYPE, &type, &tl);
        int s = socket(family, type, 0);
        if (s < 0)
            continue;
        if (connect(s, (struct sockaddr *)&ss, sl) == 0)
            closed += th_garbage_closed(s, 512, 10.0 * th_timeout_mult());
        close(s);
    }
    return closed;
}

/* arg: the transport position (0 tcp, 1 shm). */
static int strangers_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                        th_report_t *rep)
{
    (void)nranks;
    int tpi = (int)(intptr_t)arg;
    float x = 1;
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, &x, 1, TNT_F32,
                                    TNT_SUM);
    int closed = 0;
    if (rank == 1)
        closed = garbage_to_own_listeners(tpi == 0 ? AF_INET : AF_UNIX);
    if (rc == TNT_SUCCESS)
        rc = tnt_barrier(comm);
    tnt_stats_t s;
    if (rc == TNT_SUCCESS)
        rc = get_stats(comm, &s);
    th_report_expect(rep, "collectives", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    /* Every rank reports the case (the harness wants the same cases of
     * all); rank 1 is the one that was attacked. */
    if (rc == TNT_SUCCESS) {
        const tnt_stats_transport_t *t = &s.transport[tpi];
        th_report_expect(rep, "refused counted", rank != 1 ||
                         (closed >= 1 && t->strangers_refused >= 1 &&
                          t->strangers_evicted == 0), 0, "rank %d: %d garbage "
                         "connections closed, %s counts %llu refused, %llu "
                         "evicted", rank, closed, t->name,
                         (unsigned long long)t->strangers_refused,
                         (unsigned long long)t->strangers_evicted);
    }
    return th_report_failures(rep);
}

static void strangers(const char *tp, int tpi)
{
    char log[] = "/tmp/tnt-stats-strangers-XXXXXX";
    char tpv[64];
    snprintf(tpv, sizeof tpv, "TNT_TRANSPORT=%s", tp);
    const char *env[] = {tpv, NULL};
    th_job_t job = {.name = "strangers", .nranks = 2, .env = env,
                    .fn = strangers_fn, .arg = (void *)(intptr_t)tpi,
                    .deadline_s = 60};
    /* The refusal's WARNING goes to the log, not the test's output. */
    if (run_logged(&job, log) == 0)
        unlink(log);
}

static void test_strangers_tcp(void)
{
    strangers("tcp", 0);
}

static void test_strangers_shm(void)
{
    strangers("shm", 1);
}

/* arg: 1 if the plugin's table has the stats entry. */
static int plugin_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                     th_report_t *rep)
{
    (void)nranks;
    int reports = arg != NULL;
    float x = 1;
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, &x, 1, TNT_F32,
                                    TNT_SUM);
    tnt_stats_t s;
    if (rc == TNT_SUCCESS)
        rc = get_stats(comm, &s);
    th_report_expect(rep, "allreduce", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    if (rc != TNT_SUCCESS)
        return 1;
    const tnt_stats_transport_t *t = &s.transport[3]; /* the plugin's */
    int ok = (t->flags & TNT_STATS_TP_RUNNING) && t->peers == 1 &&
             t->msgs_sent >= 1 && t->msgs_recv >= 1 &&
             !!(t->flags & TNT_STATS_TP_REPORTS) == reports &&
             t->reconnects == 0 && t->strangers_refused == 0 &&
             t->strangers_evicted == 0 &&
             !(s.transport[0].flags & TNT_STATS_TP_RUNNING);
    th_report_expect(rep, "plugin entry", ok, 0, "rank %d: '%s' flags %u "
                     "(want reports=%d) peers %u sent %llu recv %llu",
                     rank, t->name, t->flags, reports, t->peers,
                     (unsigned long long)t->msgs_sent,
                     (unsigned long long)t->msgs_recv);
    return th_report_failures(rep);
}

static void plugin_case(const char *var, const char *name, int reports)
{
    const char *path = getenv(var);
    if (!path || !*path) {
        printf("(%s unset: run through meson test) ", var);
        return;
    }
    char plugin_env[1100], tp_env[64];
    snprintf(plugin_env, sizeof plugin_env, "TNT_TRANSPORT_PLUGIN=%s", path);
    snprintf(tp_env, sizeof tp_env, "TNT_TRANSPORT=%s", name);
    const char *env[] = {plugin_env, tp_env, NULL};
    th_job_t job = {.name = name, .nranks = 2, .env = env,
                    .fn = plugin_fn, .arg = reports ? (void *)1 : NULL,
                    .deadline_s = 60};
    th_run_job(&job, NULL);
}

static void test_plugin_current(void)
{
    plugin_case("TNT_TEST_TCP_PLUGIN", "tcp-plugin", 1);
}

static void test_plugin_v1(void)
{
    plugin_case("TNT_TEST_TCP_PLUGIN_V1", "tcp-plugin-v1", 0);
}

static int nothing_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                      th_report_t *rep)
{
    (void)comm;
    (void)rank;
    (void)nranks;
    (void)arg;
    (void)rep;
    return 0;
}

/* Ranks 0, 1 on one fake host and 2, 3 on another (TNT_HOST_ID, as
 * test_hier.c does): shm within, tcp between. */
static int two_hosts_fn(tnt_comm_t unused, int rank, int nranks, void *arg,
                        th_report_t *rep)
{
    (void)unused;
    (void)nranks;
    (void)arg;
    char id[32];
    snprintf(id, sizeof id, "fakehost%d", rank / 2);
    setenv("TNT_HOST_ID", id, 1);
    tnt_comm_t comm;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    th_report_expect(rep, "init", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    if (rc == TNT_SUCCESS)
        tnt_comm_free(comm);
    return th_report_failures(rep);
}

/* Run a job with stderr in a file; the file's name in log. */
static int run_logged(th_job_t *job, char *log)
{
    int lfd = mkstemp(log);
    if (lfd < 0) {
        TH_CHECK(0, "mkstemp: %s", strerror(errno));
        return -1;
    }
    fflush(stderr);
    int saved = dup(2);
    dup2(lfd, 2);
    close(lfd);
    th_run_job(job, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    return 0;
}

static void test_info_two_hosts(void)
{
    char log[] = "/tmp/tnt-stats-info-XXXXXX";
    const char *env[] = {"TNT_TRANSPORT=auto", "TNT_LOG_LEVEL=INFO",
                         "TNT_LOG_ALL_RANKS=1", NULL};
    th_job_t job = {.name = "info line, two hosts", .nranks = 4,
                    .env = env, .fn = two_hosts_fn, .deadline_s = 60,
                    .no_init = 1};
    if (run_logged(&job, log) != 0)
        return;
    static const char *const want[] = {
        ("rank 0: peers 1 over shm (same host), 2-3 over tcp (other host; "
         "shm: "),
        "rank 2: peers 0-1 over tcp (other host; shm: ",
        "rank 3: peers 0-1 over tcp (other host; shm: ",
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int n = th_count_lines(log, want[i], NULL);
        TH_CHECK(n == 1, "%d lines with '%s' (log: %s)", n, want[i], log);
        bad += n != 1;
    }
    if (!bad)
        unlink(log);
}

static void info_line(const char *tp)
{
    char log[] = "/tmp/tnt-stats-info-XXXXXX";
    char tpv[64];
    snprintf(tpv, sizeof tpv, "TNT_TRANSPORT=%s", tp);
    const char *env[] = {tpv, "TNT_LOG_LEVEL=INFO", "TNT_LOG_ALL_RANKS=1",
                         NULL};
    th_job_t job = {.name = "info line", .nranks = 3, .env = env,
                    .fn = nothing_fn, .deadline_s = 60};
    if (run_logged(&job, log) != 0)
        return;
    static const char *const peers[] = {"1-2", "0-2", "0-1"};
    int bad = 0;
    for (int r = 0; r < 3; r++) {
        char want[128];
        snprintf(want, sizeof want, "rank %d: peers %s over %s (same host%s",
                 r, peers[r], tp, strcmp(tp, "tcp") == 0
                                      ? "; shm: TNT_TRANSPORT=tcp" : ")");
        int n = th_count_lines(log, want, NULL);
        TH_CHECK(n == 1, "%s: %d lines with '%s' (log: %s)", tp, n, want,
                 log);
        bad += n != 1;
    }
    if (!bad)
        unlink(log);
}

static void test_info_tcp(void)
{
    info_line("tcp");
}

static void test_info_shm(void)
{
    info_line("shm");
}

static const th_test_def_t k_tests[] = {
    {"stats", "counts_tcp", test_counts_tcp},
    {"stats", "counts_shm", test_counts_shm},
    {"stats", "hwm", test_hwm},
    {"stats", "versioned", test_versioned},
    {"stats", "bad_args", test_bad_args},
    {"stats", "plugin_v4_reports", test_plugin_current},
    {"stats", "plugin_v1_no_report", test_plugin_v1},
    {"stats", "strangers_tcp", test_strangers_tcp},
    {"stats", "strangers_shm", test_strangers_shm},
    {"info", "tcp", test_info_tcp},
    {"info", "shm", test_info_shm},
    {"info", "two_hosts", test_info_two_hosts},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
