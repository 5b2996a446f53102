/*
 * tnt_comm_shrink with real processes and real deaths. In each trial the
 * ranks loop over allreduces (1, 1000 and 100003 int64 elements, every
 * element checked) while a victim, chosen at random, is killed with
 * SIGKILL at a random moment; the survivors fail, shrink, and check: the
 * new size and their order, tnt_comm_failed_ranks (the victims, the same
 * on every survivor), that the old communicator still fails with
 * TNT_ERR_PEER_LOST, and allreduces on the new one, every element
 * against a reference made from the survivor list; then both are freed.
 * Trials at p = 4 and 5 over tcp, shm and the default transport; a
 * second victim killed while it shrinks (it joins the dead set, or the
 * call fails with TNT_ERR_PEER_LOST: no other outcome); two victims
 * killed in the loop; a shrink with no death (a copy), and without
 * TNT_RECOVERY=1 (TNT_ERR_UNSUPPORTED). TNT_TIMEOUT=10:
 * no survivor may take that long (the job's own deadline catches a
 * hang). TNT_SHRINK_TRIALS sets the trials per case (default 10);
 * TNT_SHRINK_TRANSPORT=NAME runs every case over that transport alone
 * (the soft-RoCE guest runs them over verbs: tests/rdma-guest/ci.cmds).
 */
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fd_count.h"
#include "harness.h"

#define MAXR 8
#define DEADLINE_S 10.0

typedef struct seen {
    int loop_rc;         /* the failing call of the loop */
    int nwrong;          /* wrong elements before it */
    int shrink_rc;
    double shrink_s;     /* how long tnt_comm_shrink took */
    int new_rank, new_size;
    int nfailed, failed[MAXR];
    int old_rc;          /* an allreduce on the old one after */
    int after_rc;        /* the first failing allreduce on the new one */
    int after_wrong;
    int done;            /* reached the end */
    int shrinks;         /* tnt_comm_shrink calls */
    char msg[256];
} seen_t;

typedef struct trial {
    int p;
    int victim[2];       /* -1: none */
    double delay[2];     /* victim 0: after the loop starts; victim 1:
                            after it enters tnt_comm_shrink, or (kill2)
                            after the loop starts */
    int second_in_shrink;
    seen_t seen[MAXR];
} trial_t;

static int64_t in_v(int r, size_t i)
{
    return (int64_t)((size_t)r * 1000003u + i * 7u) % 100003 - 50000;
}

static void sleep_s(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void *killer(void *arg)
{
    sleep_s(*(double *)arg);
    kill(getpid(), SIGKILL);
    return NULL;
}

static void start_killer(double *delay)
{
    pthread_t t;
    if (pthread_create(&t, NULL, killer, delay) != 0)
        kill(getpid(), SIGKILL);
    pthread_detach(t);
}

/* An allreduce of `count` over the ranks `mem` (old ranks, m of them);
 * returns rc and adds wrong elements to *wrong. */
static tnt_result_t check_allreduce(tnt_comm_t c, int me, const int *mem,
                                    int m, size_t count, int *wrong)
{
    int64_t *x = th_xmalloc(count * sizeof(*x));
    for (size_t i = 0; i < count; i++)
        x[i] = in_v(me, i);
    tnt_result_t rc = tnt_allreduce(c, TNT_IN_PLACE, x, count, TNT_I64,
                                    TNT_SUM);
    for (size_t i = 0; rc == TNT_SUCCESS && i < count; i++) {
        int64_t want = 0;
        for (int k = 0; k < m; k++)
            want += in_v(mem[k], i);
        *wrong += x[i] != want;
    }
    free(x);
    return rc;
}

static int is_victim(const trial_t *t, int r)
{
    return r == t->victim[0] || r == t->victim[1];
}

static int rank_main(tnt_comm_t comm, int rank, int p, void *arg,
                     th_report_t *rep)
{
    (void)rep;
    trial_t *t = arg;
    seen_t *me = &t->seen[rank];
    int all[MAXR];
    for (int i = 0; i < p; i++)
        all[i] = i;
    if (rank == t->victim[0])
        start_killer(&t->delay[0]);
    if (rank == t->victim[1] && !t->second_in_shrink)
        start_killer(&t->delay[1]);
    static const size_t counts[] = {1, 1000, 100003};
    tnt_result_t rc = TNT_SUCCESS;
    for (unsigned i = 0; t->victim[0] >= 0 && i < 1000000; i++) {
        rc = check_allreduce(comm, rank, all, p, counts[i % 3], &me->nwrong);
        if (rc != TNT_SUCCESS)
            break;
    }
    me->loop_rc = rc;
    /* A victim whose loop failed before its killer came waits for it. */
    if (is_victim(t, rank) && !(rank == t->victim[1] && t->second_in_shrink))
        for (;;)
            pause();
    if (rank == t->victim[1] && t->second_in_shrink)
        start_killer(&t->delay[1]);
    /* With two deaths in the loop, the second may come after the first
     * shrink: the new communicator loses it, and is shrunk in turn. */
    tnt_comm_t cur = comm, nc = NULL;
    int mem[MAXR], m = p;
    for (int i = 0; i < p; i++)
        mem[i] = i;
    for (int attempt = 0; attempt < 2; attempt++) {
        nc = NULL;
        double t0 = th_now();
        me->shrink_rc = tnt_comm_shrink(cur, &nc);
        double dt = th_now() - t0;
        if (dt > me->shrink_s)
            me->shrink_s = dt;
        me->shrinks++;
        /* A victim killed in its shrink goes no further: its killer
         * comes within milliseconds, during the shrink or just after. */
        if (rank == t->victim[1] && t->second_in_shrink)
            for (;;)
                pause();
        if (me->shrink_rc != TNT_SUCCESS)
            snprintf(me->msg, sizeof(me->msg), "%s", tnt_last_error());
        int f[MAXR], nf = 0;
        tnt_comm_failed_ranks(cur, f, MAXR, &nf);
        for (int k = 0; k < nf && me->nfailed < MAXR; k++)
            me->failed[me->nfailed++] = mem[f[k]]; /* as ranks of comm */
        int keep = 0;
        for (int i = 0; i < m; i++) {
            int dead = 0;
            for (int k = 0; k < nf; k++)
                dead |= f[k] == i;
            if (!dead)
                mem[keep++] = mem[i];
        }
        m = keep;
        if (cur != comm)
            tnt_comm_free(cur);
        if (!nc)
            break;
        tnt_comm_rank(nc, &me->new_rank);
        tnt_comm_size(nc, &me->new_size);
        me->after_rc = 0;
        me->after_wrong = 0;
        for (int i = 0; i < 3 && me->after_rc == 0; i++)
            me->after_rc = check_allreduce(nc, rank, mem, m, counts[i],
                                           &me->after_wrong);
        cur = nc;
        if (!(t->victim[1] >= 0 && !t->second_in_shrink &&
              me->after_rc == TNT_ERR_PEER_LOST))
            break;
    }
    if (nc)
        tnt_comm_free(nc);
    if (t->victim[0] >= 0) {
        int w = 0;
        me->old_rc = check_allreduce(comm, rank, all, p, 10, &w);
    }
    me->done = 1;
    return 0;
}

/* Every survivor's outcome, for a failure message. */
static const char *outcomes(const trial_t *t)
{
    static char buf[512];
    size_t n = 0;
    buf[0] = '\0';
    for (int r = 0; r < t->p && n < sizeof(buf); r++)
        if (!is_victim(t, r))
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "[%d: shrink "
                                  "%d, size %d, %d failed] ", r,
                                  t->seen[r].shrink_rc, t->seen[r].new_size,
                                  t->seen[r].nfailed);
    return buf;
}

/* The verdict on one trial; counts the outcomes of a death in the
 * shrink. */
static void judge(const char *name, trial_t *t, const th_result_t *res,
                  int *joined, int *failed_call, int *kept)
{
    int p = t->p, ndead = 0, ok_shrinks = 0, bad_shrinks = 0;
    for (int r = 0; r < p; r++)
        if (is_victim(t, r)) {
            ndead++;
            TH_CHECK(res->ranks[r].signo == SIGKILL, "%s: victim %d was not "
                     "killed (signal %d)", name, r, res->ranks[r].signo);
        }
    for (int r = 0; r < p; r++) {
        if (is_victim(t, r))
            continue;
        seen_t *s = &t->seen[r];
        TH_CHECK(s->done, "%s: survivor %d did not finish (signal %d)",
                 name, r, res->ranks[r].signo);
        TH_CHECK(s->nwrong == 0, "%s: survivor %d: %d wrong elements before "
                 "the death", name, r, s->nwrong);
        TH_CHECK(s->shrink_s < DEADLINE_S, "%s: survivor %d: shrink took "
                 "%.2f s, past the deadline", name, r, s->shrink_s);
        if (t->victim[0] >= 0)
            TH_CHECK(s->old_rc == TNT_ERR_PEER_LOST, "%s: survivor %d: old "
                     "communicator gave %d after the shrink", name, r,
                     s->old_rc);
        if (s->shrink_rc == TNT_SUCCESS)
            ok_shrinks++;
        else
            bad_shrinks++;
    }
    int kept_victim = 0; /* a success whose new communicator has p - 1 */
    for (int r = 0; r < p; r++)
        kept_victim |= !is_victim(t, r) &&
                       t->seen[r].shrink_rc == TNT_SUCCESS &&
                       t->seen[r].new_size == p - 1;
    if (t->second_in_shrink && (bad_shrinks || kept_victim)) {
        /* The second death came after the agreement: the call fails
         * with TNT_ERR_PEER_LOST where the dead rank's address was
         * missing; where it was not, the new communicator has lost it
         * at its first allreduce. */
        (*(bad_shrinks ? failed_call : kept))++;
        for (int r = 0; r < p; r++) {
            seen_t *s = &t->seen[r];
            if (is_victim(t, r))
                continue;
            if (s->shrink_rc != TNT_SUCCESS)
                TH_CHECK(s->shrink_rc == TNT_ERR_PEER_LOST, "%s: survivor "
                         "%d: shrink failed with %d: %s", name, r,
                         s->shrink_rc, s->msg);
            else
                TH_CHECK(s->after_rc == TNT_ERR_PEER_LOST, "%s: survivor "
                         "%d: the new communicator (%d ranks, %d failed) "
                         "gave %d with a member dead; others: %s", name, r,
                         s->new_size, s->nfailed, s->after_rc,
                         outcomes(t));
        }
        return;
    }
    /* The dead set every survivor agreed on: the victims that died
     * before or during the agreement (a second victim killed in the
     * shrink may or may not be in it; if not, the call failed above). */
    int want_size = p - ndead;
    if (t->second_in_shrink)
        (*joined)++;
    for (int r = 0; r < p; r++) {
        if (is_victim(t, r))
            continue;
        seen_t *s = &t->seen[r];
        TH_CHECK(s->shrink_rc == TNT_SUCCESS, "%s: survivor %d: shrink "
                 "failed: %d %s", name, r, s->shrink_rc, s->msg);
        int want_rank = 0;
        for (int q = 0; q < r; q++)
            want_rank += !is_victim(t, q);
        TH_CHECK(s->new_size == want_size && s->new_rank == want_rank,
                 "%s: survivor %d: rank %d of %d, expected %d of %d", name,
                 r, s->new_rank, s->new_size, want_rank, want_size);
        int match = s->nfailed == ndead;
        for (int k = 0; match && k < s->nfailed; k++)
            match = is_victim(t, s->failed[k]);
        TH_CHECK(match, "%s: survivor %d: %d failed ranks reported, not "
                 "the %d victims", name, r, s->nfailed, ndead);
        TH_CHECK(s->after_rc == TNT_SUCCESS && s->after_wrong == 0,
                 "%s: survivor %d: allreduce on the new communicator: rc "
                 "%d, %d wrong elements", name, r, s->after_rc,
                 s->after_wrong);
    }
}

static trial_t *shared_trial(void)
{
    trial_t *t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    TH_CHECK(t != MAP_FAILED, "mmap failed");
    return t == MAP_FAILED ? NULL : t;
}

static int trials(void)
{
    const char *s = getenv("TNT_SHRINK_TRIALS");
    return s && atoi(s) > 0 ? atoi(s) : 10;
}

/* kind: 0 one death in the loop, 1 a second one in the shrink, 2 two in
 * the loop. TNT_SHRINK_TRANSPORT replaces the case's own transport. */
static void run_trials(int p, const char *transport, int kind,
                       uint64_t seed)
{
    const char *only = getenv("TNT_SHRINK_TRANSPORT");
    if (only && *only)
        transport = only;
    trial_t *t = shared_trial();
    if (!t)
        return;
    char tp[64];
    snprintf(tp, sizeof(tp), "TNT_TRANSPORT=%s", transport);
    const char *env[] = {"TNT_TIMEOUT=10", "TNT_RECOVERY=1", tp, NULL};
    th_rng_t rng = {seed};
    int joined = 0, failed_call = 0, kept = 0;
    double worst = 0;
    for (int n = 0; n < trials(); n++) {
        memset(t, 0, sizeof(*t));
        t->p = p;
        t->victim[0] = (int)th_rnd_below(&rng, (size_t)p);
        t->victim[1] = -1;
        t->delay[0] = (double)th_rnd_below(&rng, 300000) * 1e-6;
        if (kind > 0) {
            do
                t->victim[1] = (int)th_rnd_below(&rng, (size_t)p);
            while (t->victim[1] == t->victim[0]);
            t->second_in_shrink = kind == 1;
            t->delay[1] = kind == 1
                              ? (double)th_rnd_below(&rng, 3000) * 1e-6
                              : (double)th_rnd_below(&rng, 300000) * 1e-6;
        }
        char name[128];
        snprintf(name, sizeof(name), "p=%d %s %s trial %d (victims %d %d, "
                 "%.3f %.3f s)", p, transport,
                 kind == 0 ? "one death" : kind == 1 ? "death in shrink"
                                                     : "two deaths",
                 n, t->victim[0], t->victim[1], t->delay[0], t->delay[1]);
        th_job_t job = {name, p, env, rank_main, t, 60, 0, 2};
        th_result_t res;
        th_run_job(&job, &res);
        judge(name, t, &res, &joined, &failed_call, &kept);
        for (int r = 0; r < p; r++)
            if (!is_victim(t, r) && t->seen[r].shrink_s > worst)
                worst = t->seen[r].shrink_s;
        th_result_free(&res);
    }
    printf("\n  [p=%d %s: %d trials, slowest shrink %.3f s", p, transport,
           trials(), worst);
    if (kind == 1)
        printf("; the death in the shrink joined the dead set %d times, "
               "failed the call %d times, was found by the new "
               "communicator %d times", joined, failed_call, kept);
    printf("] ");
    munmap(t, sizeof(*t));
}

static void test_one_death(void)
{
    static const char *const tps[] = {"tcp", "shm", "auto"};
    const char *only = getenv("TNT_SHRINK_TRANSPORT");
    int ntp = only && *only ? 1 : 3; /* the one transport once */
    for (int p = 4; p <= 5; p++)
        for (int i = 0; i < ntp; i++)
            run_trials(p, tps[i], 0, 0x5eed00u + (uint64_t)(p * 3 + i));
}

static void test_death_in_shrink(void)
{
    const char *only = getenv("TNT_SHRINK_TRANSPORT");
    run_trials(5, "tcp", 1, 0x5eed50u);
    if (!only || !*only)
        run_trials(5, "shm", 1, 0x5eed51u);
}

static void test_two_deaths(void)
{
    run_trials(5, "auto", 2, 0x5eed60u);
}

/* Over TCP the survivors' communicator keeps the old one's connections
 * to them (docs/design.md, "Sharing connections between communicators",
 * step 6): a shrink after a death opens no descriptor. The last rank
 * dies at a known moment (after a barrier, so no survivor has a send to
 * another in flight, which would close that connection); each survivor
 * counts its descriptors before the death and after the shrink, with
 * the old communicator still held, then checks allreduces on the new
 * one (every element) and that the old one still fails. */
typedef struct fds_seen {
    int before, after;   /* open descriptors */
    int loop_rc, shrink_rc, rank, size, after_rc, wrong, old_rc, done;
    char msg[256];
} fds_seen_t;

static int fds_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)rep;
    fds_seen_t *me = (fds_seen_t *)arg + rank;
    int all[MAXR];
    for (int i = 0; i < p; i++)
        all[i] = i;
    int wrong = 0;
    me->loop_rc = check_allreduce(comm, rank, all, p, 1000, &wrong);
    me->before = tnt_open_fds();
    if (me->loop_rc == TNT_SUCCESS)
        me->loop_rc = tnt_barrier(comm);
    if (rank == p - 1)
        kill(getpid(), SIGKILL);
    for (int i = 0; me->loop_rc == TNT_SUCCESS && i < 100000; i++)
        me->loop_rc = check_allreduce(comm, rank, all, p, 1, &wrong);
    tnt_comm_t nc = NULL;
    me->shrink_rc = tnt_comm_shrink(comm, &nc);
    if (me->shrink_rc != TNT_SUCCESS)
        snprintf(me->msg, sizeof(me->msg), "%s", tnt_last_error());
    me->after = tnt_open_fds();
    if (nc) {
        tnt_comm_rank(nc, &me->rank);
        tnt_comm_size(nc, &me->size);
        static const size_t counts[] = {1, 4099, 65537};
        for (int i = 0; i < 3 && me->after_rc == TNT_SUCCESS; i++)
            me->after_rc = check_allreduce(nc, rank, all, p - 1, counts[i],
                                           &me->wrong);
        tnt_comm_free(nc);
    }
    me->old_rc = check_allreduce(comm, rank, all, p, 10, &wrong);
    me->done = 1;
    return 0;
}

static void test_fds(void)
{
    const char *only = getenv("TNT_SHRINK_TRANSPORT");
    const char *tpname = only && *only ? only : "tcp";
    int joins = strcmp(tpname, "tcp") == 0 || strcmp(tpname, "verbs") == 0;
    char tp[64];
    snprintf(tp, sizeof(tp), "TNT_TRANSPORT=%s", tpname);
    const char *env[] = {"TNT_TIMEOUT=10", "TNT_RECOVERY=1", tp, NULL};
    enum { P = 4 };
    fds_seen_t *seen = mmap(NULL, P * sizeof(*seen), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(seen != MAP_FAILED);
    memset(seen, 0, P * sizeof(*seen));
    th_job_t job = {"fds", P, env, fds_rank, seen, 60, 0, 2};
    th_result_t res;
    th_run_job(&job, &res);
    for (int r = 0; r < P - 1; r++) {
        const fds_seen_t *s = &seen[r];
        TH_CHECK(s->done, "fds: survivor %d did not finish", r);
        TH_CHECK(s->loop_rc == TNT_ERR_PEER_LOST, "fds: survivor %d: the "
                 "loop ended with %d", r, s->loop_rc);
        TH_CHECK(s->shrink_rc == TNT_SUCCESS && s->rank == r &&
                 s->size == P - 1, "fds: survivor %d: shrink %d, rank %d "
                 "of %d: %s", r, s->shrink_rc, s->rank, s->size, s->msg);
        TH_CHECK(s->after_rc == TNT_SUCCESS && s->wrong == 0, "fds: "
                 "survivor %d: allreduce on the new one %d, %d wrong", r,
                 s->after_rc, s->wrong);
        TH_CHECK(s->old_rc == TNT_ERR_PEER_LOST, "fds: survivor %d: old "
                 "one gave %d", r, s->old_rc);
        TH_CHECK(!joins || (s->before > 0 && s->after <= s->before),
                 "fds: survivor %d over %s: %d descriptors before the "
                 "death, %d after the shrink", r, tpname, s->before,
                 s->after);
    }
    printf("\n  [p=%d %s: rank 0 held %d descriptors before the death, %d "
           "after the shrink] ", P, tpname, seen[0].before, seen[0].after);
    th_result_free(&res);
    munmap(seen, P * sizeof(*seen));
}

/* No death: a copy of the communicator, failed_ranks empty. */
static int healthy_rank(tnt_comm_t comm, int rank, int p, void *arg,
                        th_report_t *rep)
{
    (void)arg;
    tnt_comm_t nc = NULL;
    tnt_result_t rc = tnt_comm_shrink(comm, &nc);
    int r = -1, s = -1, nf = -1;
    if (nc) {
        tnt_comm_rank(nc, &r);
        tnt_comm_size(nc, &s);
    }
    tnt_comm_failed_ranks(comm, NULL, 0, &nf);
    th_report_expect(rep, "healthy_copy", rc == TNT_SUCCESS && r == rank &&
                     s == p && nf == 0, rc, "rank %d of %d, %d failed: %s",
                     r, s, nf, rc ? tnt_last_error() : "");
    int all[MAXR], wrong = 0;
    for (int i = 0; i < p; i++)
        all[i] = i;
    rc = nc ? check_allreduce(nc, rank, all, p, 4099, &wrong)
            : TNT_ERR_INVALID_COMM;
    th_report_check(rep, "healthy_allreduce", rc, (size_t)wrong, 0, NULL,
                    0);
    rc = tnt_comm_shrink(comm, NULL);
    th_report_expect(rep, "null_out", rc == TNT_ERR_INVALID_ARG, rc, "%s",
                     tnt_last_error());
    rc = tnt_comm_failed_ranks(comm, NULL, 1, &nf);
    th_report_expect(rep, "failed_ranks_null", rc == TNT_ERR_INVALID_ARG,
                     rc, "%s", tnt_last_error());
    if (nc)
        tnt_comm_free(nc);
    return 0;
}

static void test_healthy(void)
{
    static const char *const env[] = {"TNT_RECOVERY=1", NULL};
    th_run(3, env, healthy_rank, NULL, 60, NULL);
    th_run(1, env, healthy_rank, NULL, 60, NULL);
}

/* Without TNT_RECOVERY there is no listener to agree over: a clear
 * error, on a healthy communicator as on a failed one. */
static int off_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)rank;
    (void)p;
    (void)arg;
    tnt_comm_t nc = (tnt_comm_t)1;
    tnt_result_t rc = tnt_comm_shrink(comm, &nc);
    th_report_expect(rep, "no_recovery", rc == TNT_ERR_UNSUPPORTED && !nc &&
                     strstr(tnt_last_error(), "TNT_RECOVERY=1"), rc, "%s",
                     tnt_last_error());
    return 0;
}

static void test_off(void)
{
    static const char *const env[] = {"TNT_RECOVERY", NULL};
    th_run(3, env, off_rank, NULL, 60, NULL);
}

static const th_test_def_t k_tests[] = {
    {"shrink", "healthy", test_healthy},
    {"shrink", "off", test_off},
    {"shrink", "one_death", test_one_death},
    {"shrink", "death_in_shrink", test_death_in_shrink},
    {"shrink", "two_deaths", test_two_deaths},
    {"shrink", "fds", test_fds},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
