/*
 * The shared-memory transport with real processes: a rank killed in the
 * middle of collectives leaves nothing behind (no /dev/shm entry, no
 * socket of a dead process, no mapping in the survivors after free) and
 * the survivors get TNT_ERR_PEER_LOST naming it; TNT_TRANSPORT=shm across
 * two hosts is a clear configuration error; and with TNT_TRANSPORT=auto
 * and two hosts of two ranks (told apart by TNT_HOST_ID) each peer gets
 * the right transport and allreduce is right. The collective suite itself
 * runs over shared memory as the meson test collectives_shm.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine.h"
#include "harness.h"

/* Entries of /dev/shm, one per line, sorted by readdir order. */
static char *list_dev_shm(void)
{
    size_t cap = 1 << 16, len = 0;
    char *s = calloc(1, cap);
    DIR *d = opendir("/dev/shm");
    for (struct dirent *e; d && (e = readdir(d));)
        len += (size_t)snprintf(s + len, len < cap ? cap - len : 0, "%s\n",
                                e->d_name);
    if (d)
        closedir(d);
    return s;
}

/* Abstract sockets of the shm transport whose process is gone. */
static int dead_sockets(void)
{
    FILE *f = fopen("/proc/net/unix", "r");
    char line[512];
    int dead = 0;
    while (f && fgets(line, sizeof(line), f)) {
        char *p = strstr(line, "@tnt-shm-");
        int pid;
        if (p && sscanf(p, "@tnt-shm-%d-", &pid) == 1 && kill(pid, 0) != 0)
            dead++;
    }
    if (f)
        fclose(f);
    return dead;
}

/* Is a memfd of this name ("tnt-shm": a pair's segment; "tnt-mem": a
 * shared allocation, this rank's or a peer's) mapped here? */
static int has_memfd_mapping(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512], want[64];
    int found = 0;
    snprintf(want, sizeof(want), "memfd:%s", name);
    while (f && fgets(line, sizeof(line), f))
        found |= strstr(line, want) != NULL;
    if (f)
        fclose(f);
    return found;
}

static int has_segment_mapping(void)
{
    return has_memfd_mapping("tnt-shm");
}

/* A buffer of `bytes` from malloc or (shared) tnt_mem_alloc; the latter
 * goes away with the communicator. */
static float *test_buf(tnt_comm_t comm, int shared, size_t bytes)
{
    return shared ? th_xmem_alloc(comm, bytes) : th_xmalloc(bytes);
}

#define KILL_COUNT (256 * 1024)

static int killed_rank(tnt_comm_t comm, int rank, int nranks, void *arg,
                       th_report_t *rep)
{
    (void)nranks;
    int shared = arg != NULL;
    float *x = test_buf(comm, shared, KILL_COUNT * sizeof(float));
    for (size_t i = 0; i < KILL_COUNT; i++)
        x[i] = 1.0f;
    tnt_result_t rc = tnt_allreduce(comm, x, x, KILL_COUNT, TNT_F32,
                                    TNT_SUM);
    th_report_check(rep, "first", rc, 0, 0, NULL, 0);
    th_report_expect(rep, "mapped", has_segment_mapping(), 0,
                     "no shared segment mapped while connected");
    if (rank == 2)
        raise(SIGKILL);
    for (int i = 0; i < 1000 && rc == TNT_SUCCESS; i++)
        rc = tnt_allreduce(comm, x, x, KILL_COUNT, TNT_F32, TNT_SUM);
    const char *msg = tnt_last_error();
    th_report_expect(rep, "lost", rc == TNT_ERR_PEER_LOST, rc,
                     "%s", rc == TNT_SUCCESS ? "no error" : msg);
    th_report_expect(rep, "names_rank_2", strstr(msg, "rank 2") != NULL, rc,
                     "%s", msg);
    tnt_comm_free(comm);
    th_report_expect(rep, "unmapped", !has_segment_mapping() &&
                         !has_memfd_mapping("tnt-mem"), 0,
                     "shared segment or allocation still mapped after "
                     "tnt_comm_free");
    if (!shared)
        free(x);
    return 0;
}

/* The killed rank under each way a 1 MiB allreduce moves on one host:
 * messages through the rings (direct), the staging areas (staged, what
 * auto picks where ranks share cores), whatever this machine's core
 * count would pick, and in place in shared allocations (mapped). */
static void killed_rank_with(const char *algo_env)
{
    int shared = strstr(algo_env, "mapped") != NULL;
    char *before = list_dev_shm();
    int dead_before = dead_sockets();
    const char *const env[] = {"TNT_TRANSPORT=shm", algo_env, NULL};
    char name[96];
    snprintf(name, sizeof name, "shm killed rank, %s", algo_env);
    th_job_t job = {name, 3, env, killed_rank, shared ? "shared" : NULL,
                    120, 0, 2};
    th_result_t res;
    th_run_job(&job, &res);
    TH_CHECK(res.ranks[2].signo == SIGKILL, "rank 2 was not killed "
             "(signal %d, status %d)", res.ranks[2].signo,
             res.ranks[2].exit_status);
    int named = 0;
    for (int r = 0; r < 2; r++) {
        const th_case_t *c = th_find_case(&res, r, "lost");
        TH_CHECK(c && c->ok, "rank %d: expected peer lost: %s", r,
                 c ? c->msg : "no report");
        c = th_find_case(&res, r, "names_rank_2");
        named += c && c->ok;
        c = th_find_case(&res, r, "unmapped");
        TH_CHECK(c && c->ok, "rank %d: %s", r, c ? c->msg : "no report");
        c = th_find_case(&res, r, "mapped");
        TH_CHECK(c && c->ok, "rank %d: %s", r, c ? c->msg : "no report");
    }
    TH_CHECK(named > 0, "no survivor named rank 2 as the lost one");
    th_result_free(&res);
    char *after = list_dev_shm();
    TH_CHECK(strcmp(before, after) == 0, "/dev/shm changed:\nbefore:\n%s"
             "after:\n%s", before, after);
    TH_CHECK(dead_sockets() <= dead_before, "sockets of dead ranks left");
    free(before);
    free(after);
}

static void test_killed_rank(void)
{
    killed_rank_with("TNT_ALLREDUCE_ALGO=direct");
    killed_rank_with("TNT_ALLREDUCE_ALGO=staged");
    killed_rank_with("TNT_ALLREDUCE_ALGO=mapped");
}

/* The slots allreduce reads its peers' inputs where they lie, in the
 * pair's segment. Ranks 1 and 2 finish a small allreduce, free the
 * communicator and exit while rank 0 has not looked yet (its wait comes
 * 300 ms after its post): their segments go with their connections, and
 * rank 0 must still get the right sum, from the copies it takes when the
 * connections close (tnt__onhost_peer_closing). */
#define GONE_COUNT 100

static int slot_peer_gone(tnt_comm_t comm, int rank, int nranks, void *arg,
                          th_report_t *rep)
{
    (void)arg;
    float x[GONE_COUNT];
    for (int i = 0; i < GONE_COUNT; i++)
        x[i] = (float)(rank + 1 + i);
    tnt_result_t rc;
    if (rank == 0) {
        tnt_request_t req;
        rc = tnt_iallreduce(comm, TNT_IN_PLACE, x, GONE_COUNT, TNT_F32,
                            TNT_SUM, &req);
        /* Stopped, threads and all, until a helper wakes it: the peers
         * finish and go meanwhile, and the poller then finds their
         * inputs and their hang-ups in one batch of events. */
        pid_t helper = fork();
        if (helper == 0) {
            usleep(300000);
            kill(getppid(), SIGCONT);
            _exit(0);
        }
        if (helper > 0) {
            raise(SIGSTOP);
            waitpid(helper, NULL, 0);
            usleep(100000); /* the progress thread takes that batch */
        }
        if (rc == TNT_SUCCESS) {
            rc = tnt_wait(req);
            tnt_request_free(req);
        }
    } else {
        usleep(100000); /* after rank 0 has posted and stopped */
        rc = tnt_allreduce(comm, TNT_IN_PLACE, x, GONE_COUNT, TNT_F32,
                           TNT_SUM);
    }
    size_t wrong = 0, first = 0;
    for (int i = 0; i < GONE_COUNT; i++) {
        float want = (float)(nranks * (nranks + 1) / 2 + nranks * i);
        if (x[i] != want && wrong++ == 0)
            first = (size_t)i;
    }
    th_report_check(rep, "allreduce", rc, rc ? 0 : wrong, first, x,
                    sizeof x);
    return 0; /* ranks 1 and 2: the harness frees the communicator now */
}

static void test_slot_peer_gone(void)
{
    static const char *const env[] = {"TNT_TRANSPORT=shm", NULL};
    th_job_t job = {"shm slot peers gone", 3, env, slot_peer_gone, NULL, 60,
                    0, 0};
    th_run_job(&job, NULL);
}

/* A blocking slots allreduce with nothing else in flight runs lean
 * (the slots' run_now, onhost/slots.c): it looks at the slots a bounded
 * number of times and, if a peer has not published by then, goes on as
 * a queued request.
 * One rank in turn arrives late -- not at all, by a spin of 50 us, or by
 * a sleep of 2 ms -- so both endings happen; in place and out of place,
 * sizes from 1 element to the slots' 8 KiB, every element checked and
 * the results compared across ranks. */
#define LATE_ITERS 60

static int slots_late_peer(tnt_comm_t comm, int rank, int nranks, void *arg,
                           th_report_t *rep)
{
    (void)arg;
    static const size_t counts[] = {1, 2, 3, 5, 7, 13, 64, 257, 1021, 2047};
    enum { NC = sizeof(counts) / sizeof(counts[0]) };
    float x[2047], y[2047];
    for (int it = 0; it < LATE_ITERS; it++) {
        size_t n = counts[it % NC], wrong = 0, first = 0;
        for (size_t j = 0; j < n; j++)
            x[j] = (float)((rank + 1) * (int)(j % 7 + 1) + it);
        if (rank == it % nranks) {
            if (it % 3 == 1) {
                double until = th_now() + 50e-6;
                while (th_now() < until)
                    ;
            } else if (it % 3 == 2) {
                usleep(2000);
            }
        }
        int in_place = it % 2;
        tnt_result_t rc = tnt_allreduce(comm, in_place ? TNT_IN_PLACE : x,
                                        in_place ? x : y, n, TNT_F32,
                                        TNT_SUM);
        const float *got = in_place ? x : y;
        for (size_t j = 0; j < n; j++) {
            float want = (float)((int)(j % 7 + 1) * nranks * (nranks + 1) /
                                     2 + nranks * it);
            if (got[j] != want && wrong++ == 0)
                first = j;
        }
        char name[32];
        snprintf(name, sizeof(name), "allreduce_%d_n%zu", it, n);
        th_report_check(rep, name, rc, rc ? 0 : wrong, first, got,
                        n * sizeof(float));
        if (rc != TNT_SUCCESS)
            return 1;
    }
    return 0;
}

static void test_slots_late_peer(void)
{
    static const char *const env[] = {"TNT_TRANSPORT=shm", NULL};
    th_job_t job = {"shm slots late peer", 3, env, slots_late_peer, NULL,
                    60, 0, 0};
    th_run_job(&job, NULL);
}

/* The staged allreduce reads its peers' last results where they lie too.
 * A rank that has every result of the last staged allreduce finishes,
 * frees its communicator and exits while a slower rank still waits for
 * another peer's last results: the one that left is not needed any more,
 * and the slower rank must neither fail nor lose data (tnt-bench -N 4
 * with TNT_ALLREDUCE_ALGO=staged failed so in about half of its runs:
 * "lost rank 3 ... closed its connection"). Each iteration is a large
 * allreduce (several rounds per slice, checked) and a one-element one,
 * the last thing a rank does before it returns, as tnt-bench ends with
 * small allreduces of its times. */
#define STAGED_GONE_COUNT (256 * 1024 + 7)
#define STAGED_GONE_ITERS 10

static int staged_peers_gone(tnt_comm_t comm, int rank, int nranks,
                             void *arg, th_report_t *rep)
{
    int shared = arg != NULL;
    float *x = test_buf(comm, shared, STAGED_GONE_COUNT * sizeof(float));
    tnt_result_t rc = TNT_SUCCESS;
    size_t wrong = 0, first = 0;
    for (int it = 0; it < STAGED_GONE_ITERS && rc == TNT_SUCCESS; it++) {
        for (size_t i = 0; i < STAGED_GONE_COUNT; i++)
            x[i] = (float)((size_t)rank + i % 7 + (size_t)it);
        rc = tnt_allreduce(comm, TNT_IN_PLACE, x, STAGED_GONE_COUNT,
                           TNT_F32, TNT_SUM);
        for (size_t i = 0; rc == TNT_SUCCESS && i < STAGED_GONE_COUNT; i++) {
            float want = (float)(nranks * (nranks - 1) / 2) +
                         (float)((size_t)nranks * (i % 7 + (size_t)it));
            if (x[i] != want && wrong++ == 0)
                first = i;
        }
        float one = 1.0f;
        if (rc == TNT_SUCCESS)
            rc = tnt_allreduce(comm, TNT_IN_PLACE, &one, 1, TNT_F32,
                               TNT_SUM);
        if (rc == TNT_SUCCESS && one != (float)nranks && wrong++ == 0)
            first = STAGED_GONE_COUNT;
    }
    th_report_check(rep, "allreduce", rc, rc ? 0 : wrong, first, NULL, 0);
    if (!shared)
        free(x);
    return 0; /* the harness frees the communicator now, no barrier */
}

static void test_staged_peers_gone(void)
{
    static const char *const env[] = {"TNT_TRANSPORT=shm",
                                      "TNT_ALLREDUCE_ALGO=staged", NULL};
    for (int run = 0; run < 4; run++) {
        th_job_t job = {"shm staged peers gone", 4, env, staged_peers_gone,
                        NULL, 60, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* The same with the buffers in shared allocations, the library choosing:
 * the large allreduce is a mapped one, the one-element one a slots one
 * (both ranks' results are written by the peers; a rank that has them
 * all leaves). */
static void test_mapped_peers_gone(void)
{
    static const char *const env[] = {"TNT_TRANSPORT=shm", NULL};
    for (int run = 0; run < 4; run++) {
        th_job_t job = {"shm mapped peers gone", 4, env, staged_peers_gone,
                        "shared", 60, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* Ranks as hosts of two: TNT_HOST_ID set per rank before init. */
static tnt_result_t init_on_host(int rank, int per_host, tnt_comm_t *comm)
{
    char id[32];
    snprintf(id, sizeof(id), "testhost%d", rank / per_host);
    setenv("TNT_HOST_ID", id, 1);
    return tnt_comm_init_from_env(comm);
}

static int shm_two_hosts(tnt_comm_t comm, int rank, int nranks, void *arg,
                         th_report_t *rep)
{
    (void)comm;
    (void)nranks;
    (void)arg;
    tnt_comm_t c = NULL;
    tnt_result_t rc = init_on_host(rank, 1, &c);
    th_report_expect(rep, "config_error", rc == TNT_ERR_CONFIG &&
                     strstr(tnt_last_error(), "TNT_TRANSPORT=shm"), rc,
                     "%s", tnt_last_error());
    if (c)
        tnt_comm_free(c);
    return 0;
}

static void test_shm_across_hosts(void)
{
    static const char *const env[] = {"TNT_TRANSPORT=shm", NULL};
    th_job_t job = {"shm across hosts", 2, env, shm_two_hosts, NULL, 60, 1,
                    0};
    th_run_job(&job, NULL);
}

static int mixed(tnt_comm_t comm, int rank, int nranks, void *arg,
                 th_report_t *rep)
{
    (void)comm;
    (void)arg;
    tnt_comm_t c = NULL;
    tnt_result_t rc = init_on_host(rank, 2, &c);
    th_report_check(rep, "init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 1;
    int wrong_tp = 0;
    for (int i = 0; i < nranks; i++) {
        const char *want = i / 2 == rank / 2 ? "shm" : "tcp";
        wrong_tp += i != rank && strcmp(c->peers[i].tp->name, want) != 0;
    }
    th_report_expect(rep, "transports", wrong_tp == 0, 0, "%d peers with "
                     "the wrong transport", wrong_tp);
    static const size_t counts[] = {1, 1000, 65537, 1 << 20};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        size_t n = counts[k], wrong = 0, first = 0;
        float *x = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((size_t)rank + i % 13);
        rc = tnt_allreduce(c, x, x, n, TNT_F32, TNT_SUM);
        for (size_t i = 0; i < n; i++) {
            float want = (float)(nranks * (nranks - 1) / 2) +
                         (float)(nranks * (int)(i % 13));
            if (x[i] != want && wrong++ == 0)
                first = i;
        }
        char name[32];
        snprintf(name, sizeof(name), "allreduce_n%zu", n);
        th_report_check(rep, name, rc, wrong, first, x, n * sizeof(float));
        free(x);
    }
    tnt_comm_free(c);
    return 0;
}

static void test_mixed(void)
{
    static const char *const env[] = {"TNT_TRANSPORT=auto", NULL};
    th_job_t job = {"mixed tcp+shm", 4, env, mixed, NULL, 120, 1, 0};
    th_run_job(&job, NULL);
}

static const th_test_def_t k_tests[] = {
    {"shm", "killed_rank", test_killed_rank},
    {"shm", "slot_peer_gone", test_slot_peer_gone},
    {"shm", "slots_late_peer", test_slots_late_peer},
    {"shm", "staged_peers_gone", test_staged_peers_gone},
    {"shm", "mapped_peers_gone", test_mapped_peers_gone},
    {"shm", "shm_across_hosts", test_shm_across_hosts},
    {"shm", "mixed_transports", test_mixed},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
