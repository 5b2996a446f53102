/*
 * The fault suite: a peer that dies must fail the collectives of every
 * survivor promptly, with TNT_ERR_PEER_LOST and a message that names the
 * rank that died ("rank K (host ...)" and "lost"), never with a hang.
 * (A survivor may instead name a neighbour that failed because of the
 * death and closed mid-message before its failure notice could reach it:
 * such survivors are counted and printed, and in every trial at least one
 * survivor must name the dead rank.) In
 * each of 20 trials a p=4 job runs back-to-back allreduces of 1 KiB to
 * 4 MiB while one rank, chosen at random (rank 0 included), is killed
 * with SIGKILL at a random moment, so that kills land in small and large
 * collectives and in every algorithm step. A helper thread in the victim
 * stamps the kill time (CLOCK_MONOTONIC) into memory shared by the whole
 * job before it kills its own process; each survivor stamps the moment
 * its collective returned, so the parent can measure the detection
 * latency of every survivor. The latency bound asserted here is generous
 * (the test machine is loaded); the measured figures are printed.
 *
 * free_after_early_loss: a rank dies right after init, before the others
 * connect to it over shared memory; their refused connect must not stay
 * counted as under way, or tnt_comm_free lingers 2 s for it.
 *
 * Usage: test_faults [suite [test]]; TNT_FAULT_SEED=n changes the trials,
 * TNT_FAULT_TRIALS=n their number.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "datagen.h"
#include "core/engine.h"
#include "core/engine_internal.h"
#include "harness.h"

#define FAULT_RANKS 4
#define FAULT_TRIALS 20
/* The issue asks for 2 s on loopback; on a shared, loaded 2-core machine
 * a scheduling hiccup must not fail the suite, so the bound asserted is
 * wider (and scaled for sanitizer runs). */
#define FAULT_BOUND_S 10.0
/* The victim is killed within this long after its first allreduce. */
#define FAULT_MAX_DELAY_S 1.2
/* A survivor that saw no error this long after the kill gives up. */
#define FAULT_GIVE_UP_S 25.0

/* Allreduce sizes in bytes (f32): small collectives take one message per
 * step, the large ones many segments. */
static const size_t k_sizes[] = {1024, 4096, 16384, 65536, 262144,
                                 1048576, 4194304};
#define N_SIZES (sizeof k_sizes / sizeof k_sizes[0])

/* What one survivor saw, written by it, read by the parent. */
typedef struct fault_seen {
    double err_t;        /* th_now() when the failing collective returned */
    int rc;              /* its result */
    int ncoll;           /* collectives completed before it */
    int nwrong;          /* completed collectives with a wrong element */
    int later_rc;        /* an allreduce posted after the failure */
    double later_s;      /* and how long it took to fail */
    char msg[512];       /* tnt_last_error() of the failure */
} fault_seen_t;

/* One trial, in memory shared by the parent and all ranks (MAP_SHARED
 * before the fork). */
typedef struct fault_shared {
    int victim;
    double delay_s;      /* after the victim's first allreduce */
    unsigned start;      /* index into k_sizes of the first allreduce */
    double kill_t;       /* th_now() just before the SIGKILL; 0: none */
    fault_seen_t seen[FAULT_RANKS];
} fault_shared_t;

static void sleep_s(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The kill time crosses processes and threads: plain loads and stores
 * of a double could tear or be cached in a register. */
static void stamp_kill(fault_shared_t *sh)
{
    double t = th_now();
    __atomic_store(&sh->kill_t, &t, __ATOMIC_SEQ_CST);
}

static double kill_time(fault_shared_t *sh)
{
    double t;
    __atomic_load(&sh->kill_t, &t, __ATOMIC_SEQ_CST);
    return t;
}

/* The victim's executioner: kill -9 of its own process, as seen from the
 * peers (the process ends at once, its sockets are closed by the kernel,
 * nothing of the library runs). */
static void *killer_main(void *arg)
{
    fault_shared_t *sh = arg;
    sleep_s(sh->delay_s);
    stamp_kill(sh);
    kill(getpid(), SIGKILL);
    return NULL;
}

static int fault_rank(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    fault_shared_t *sh = arg;
    fault_seen_t *me = &sh->seen[rank];
    size_t maxcount = k_sizes[N_SIZES - 1] / sizeof(float);
    float *send = th_xmalloc(maxcount * sizeof(float));
    float *recv = th_xmalloc(maxcount * sizeof(float));
    double t_start = th_now();
    int killer_started = 0;
    tnt_result_t rc = TNT_SUCCESS;

    for (unsigned i = 0;; i++) {
        size_t count = k_sizes[(sh->start + i) % N_SIZES] / sizeof(float);
        uint64_t seed = 0x5eed0000u + i;
        tnt_gen_fill(send, count, TNT_F32, TNT_SUM, seed, rank);
        rc = tnt_allreduce(comm, send, recv, count, TNT_F32, TNT_SUM);
        if (rc != TNT_SUCCESS)
            break;
        if (tnt_gen_check_allreduce(recv, 0, count, TNT_F32, TNT_SUM, seed,
                                    p, NULL))
            me->nwrong++;
        me->ncoll++;
        if (rank == sh->victim && !killer_started) {
            pthread_t t;
            if (pthread_create(&t, NULL, killer_main, sh) == 0) {
                pthread_detach(t);
                killer_started = 1;
            } else {
                /* Without the kill the trial cannot be judged: die now,
                 * which is a kill at an early moment. */
                stamp_kill(sh);
                kill(getpid(), SIGKILL);
            }
        }
        double kt = kill_time(sh);
        double now = th_now();
        if ((kt > 0 && now > kt + FAULT_GIVE_UP_S * th_timeout_mult()) ||
            now > t_start + 2 * FAULT_GIVE_UP_S * th_timeout_mult())
            break; /* rc == TNT_SUCCESS: reported as "no error" */
    }
    me->err_t = th_now();
    me->rc = rc;
    snprintf(me->msg, sizeof me->msg, "%s", tnt_last_error());

    /* Everything after the failure must fail as well, at once. */
    double t0 = th_now();
    me->later_rc = tnt_allreduce(comm, send, recv, 1000, TNT_F32, TNT_SUM);
    me->later_s = th_now() - t0;
    th_report_expect(rep, "peer_lost", rc == TNT_ERR_PEER_LOST, rc,
                     "rank %d after %d allreduces: %d (%s): %s", rank,
                     me->ncoll, rc, tnt_strerror(rc), me->msg);
    free(send);
    free(recv);
    return 0;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n ? v[n / 2] : 0.0;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    return *end ? def : (uint64_t)v;
}

/* Judge one trial from what the ranks left in shared memory. */
static void judge_trial(int trial, const fault_shared_t *sh,
                        const th_result_t *res, double *lat, int *nlat,
                        int *named, int *survivors)
{
    int v = sh->victim;
    double bound = FAULT_BOUND_S * th_timeout_mult();
    const th_rank_result_t *vr = &res->ranks[v];
    TH_CHECK(!res->timed_out, "trial %d (victim %d): the job hit its "
             "deadline after %.1f s: a survivor hung (%s)", trial, v,
             res->elapsed_s, res->first_problem);
    TH_CHECK(sh->kill_t > 0 && vr->signo == SIGKILL,
             "trial %d: the victim rank %d was not killed as planned "
             "(signal %d, exit status %d, kill time %.3f)", trial, v,
             vr->signo, vr->exit_status, sh->kill_t);
    if (sh->kill_t <= 0)
        return;
    char phrase[48];
    snprintf(phrase, sizeof phrase, "rank %d (host ", v);
    int trial_named = 0;
    for (int r = 0; r < FAULT_RANKS; r++) {
        if (r == v)
            continue;
        const th_rank_result_t *rr = &res->ranks[r];
        const fault_seen_t *s = &sh->seen[r];
        double dt = s->err_t - sh->kill_t;
        TH_CHECK(rr->finished && !rr->signo,
                 "trial %d (victim %d): survivor %d did not finish "
                 "(signal %d)", trial, v, r, rr->signo);
        TH_CHECK(s->rc == TNT_ERR_PEER_LOST,
                 "trial %d (victim %d): survivor %d's allreduce returned "
                 "%d (%s), expected TNT_ERR_PEER_LOST: '%s'", trial, v, r,
                 s->rc, tnt_strerror((tnt_result_t)s->rc), s->msg);
        /* A survivor whose neighbours failed because of the death may
         * see one of them close first, mid-message, before their failure
         * notice could reach it; it then names that neighbour. Counted
         * and printed; at least one survivor of every trial must name
         * the dead rank (the ones that talked to it always do). */
        int names = strstr(s->msg, phrase) && strstr(s->msg, "lost");
        *named += names;
        (*survivors)++;
        trial_named += names;
        if (!names)
            printf("  [trial %d: survivor %d named another rank: '%s']\n",
                   trial, r, s->msg);
        TH_CHECK(dt >= 0 && dt <= bound,
                 "trial %d (victim %d): survivor %d saw the error %.3f s "
                 "after the kill (bound %.1f s)", trial, v, r, dt, bound);
        TH_CHECK(s->nwrong == 0, "trial %d: survivor %d had %d wrong "
                 "results before the kill", trial, r, s->nwrong);
        TH_CHECK(s->later_rc < 0 && s->later_s < bound,
                 "trial %d: survivor %d's allreduce after the failure "
                 "returned %d (%s) after %.3f s, expected an error at once",
                 trial, r, s->later_rc,
                 tnt_strerror((tnt_result_t)s->later_rc), s->later_s);
        TH_CHECK(!rr->exited || rr->exit_status == 0,
                 "trial %d: survivor %d exited with status %d (a failed "
                 "case, or a sanitizer report on stderr): %s", trial, r,
                 rr->exit_status, res->first_problem);
        if (s->rc < 0 && dt >= 0)
            lat[(*nlat)++] = dt;
    }
    TH_CHECK(trial_named > 0, "trial %d: no survivor named the dead rank %d",
             trial, v);
}

static void test_kill_one_of_four(void)
{
    int trials = (int)env_u64("TNT_FAULT_TRIALS", FAULT_TRIALS);
    uint64_t seed = env_u64("TNT_FAULT_SEED", 20240604);
    fault_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    TH_CHECK(sh != MAP_FAILED, "mmap of the shared trial record failed");
    if (sh == MAP_FAILED)
        return;
    double *lat = th_xmalloc(sizeof *lat * (size_t)trials * FAULT_RANKS);
    int nlat = 0, named = 0, survivors = 0;
    th_rng_t rng = {seed};
    printf("\n  [faults: seed %llu, %d trials]\n", (unsigned long long)seed,
           trials);
    for (int t = 0; t < trials; t++) {
        memset(sh, 0, sizeof *sh);
        sh->victim = (int)th_rnd_below(&rng, FAULT_RANKS);
        sh->delay_s = (double)th_rnd_below(&rng, 1000000) * 1e-6 *
                      FAULT_MAX_DELAY_S;
        sh->start = (unsigned)th_rnd_below(&rng, N_SIZES);
        char name[96];
        snprintf(name, sizeof name, "kill -9 rank %d of 4 after %.3f s "
                 "(trial %d)", sh->victim, sh->delay_s, t);
        /* A long operation deadline: the error must come from the lost
         * peer, not from TNT_TIMEOUT. */
        const char *env[] = {"TNT_TIMEOUT=120", NULL};
        /* quiet 2: the killed rank is the point of the test, so this
         * function judges everything itself. */
        th_job_t job = {name, FAULT_RANKS, env, fault_rank, sh, 90, 0, 2};
        th_result_t res;
        th_run_job(&job, &res);
        int before = nlat;
        judge_trial(t, sh, &res, lat, &nlat, &named, &survivors);
        double worst = 0;
        for (int k = before; k < nlat; k++)
            if (lat[k] > worst)
                worst = lat[k];
        printf("  [trial %2d: victim %d killed %.3f s in, after %d "
               "allreduces; slowest survivor %.3f s]\n", t, sh->victim,
               sh->delay_s, sh->seen[(sh->victim + 1) % FAULT_RANKS].ncoll,
               worst);
        th_result_free(&res);
    }
    double mx = 0, mn = nlat ? lat[0] : 0;
    for (int k = 0; k < nlat; k++) {
        if (lat[k] > mx)
            mx = lat[k];
        if (lat[k] < mn)
            mn = lat[k];
    }
    printf("  [faults: kill -> TNT_ERR_PEER_LOST over %d survivors: min "
           "%.3f s, median %.3f s, max %.3f s]\n", nlat, mn,
           median(lat, nlat), mx);
    printf("  [faults: %d of %d survivors named the dead rank]\n", named,
           survivors);
    free(lat);
    munmap(sh, sizeof *sh);
}

/* ---- freeing after a loss --------------------------------------------- */

/* Rank 3 dies right after tnt_comm_init, before the others have
 * connected to it over shared memory: their connect is refused, and the
 * loss fails their allreduce. No connection to the dead rank may then
 * stay under way: tnt_comm_free lingers (up to 2 s) only for connections
 * that can carry a failure notice to a live rank. The state is checked
 * (within 1.5 s of the failure), not the time free takes (printed
 * only). */
static int early_loss_rank(tnt_comm_t unused, int rank, int p, void *arg,
                           th_report_t *rep)
{
    (void)unused;
    (void)p;
    (void)arg;
    tnt_comm_t comm;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    th_report_check(rep, "init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 1;
    if (rank == 3)
        raise(SIGKILL);
    int v = 1;
    rc = tnt_allreduce(comm, TNT_IN_PLACE, &v, 1, TNT_I32, TNT_SUM);
    th_report_expect(rep, "allreduce_fails", rc == TNT_ERR_PEER_LOST, rc,
                     "%s", rc == TNT_SUCCESS ? "succeeded" : tnt_last_error());
    /* The allreduce can fail by another rank's notice before this rank's
     * own connection to rank 3 is refused; and a failed communicator
     * itself connects to higher ranks it never talked to, to tell them
     * (tnt__engine_fail). So the connection may still be under way here;
     * it must be resolved (refused, rank 3 dead) before free's linger of
     * TNT_LINGER_S (2 s) would end: look for up to 1.5 s. Seen in CI's
     * guest and once on the host under load, p = 4 over shm/verbs. */
    int pending = 1, dead = 0;
    for (double end = th_now() + 1.5; pending && th_now() < end;) {
        pthread_mutex_lock(&comm->group->lock);
        pending = comm->peers[3].connecting;
        dead = comm->peers[3].dead;
        pthread_mutex_unlock(&comm->group->lock);
        if (pending)
            usleep(1000);
    }
    th_report_expect(rep, "no_connection_pending_to_dead",
                     !pending, rc, "connection to rank 3 %s (dead %d)",
                     pending ? "still pending" : "not pending", dead);
    double t0 = th_now();
    tnt_comm_free(comm);
    th_report_expect(rep, "free", 1, TNT_SUCCESS, "tnt_comm_free took "
                     "%.3f s", th_now() - t0);
    return 0;
}

static void test_free_after_early_loss(void)
{
    const char *env[] = {"TNT_TRANSPORT=shm", "TNT_TIMEOUT=60", NULL};
    for (int t = 0; t < 3; t++) {
        th_job_t job = {"free after an early loss", FAULT_RANKS, env,
                        early_loss_rank, NULL, 90, 1, 2};
        th_result_t res;
        th_run_job(&job, &res);
        for (int r = 0; r < 3; r++) {
            const char *names[] = {"allreduce_fails",
                                   "no_connection_pending_to_dead",
                                   "free"};
            for (int k = 0; k < 3; k++) {
                const th_case_t *c = th_find_case(&res, r, names[k]);
                TH_CHECK(c && c->ok, "trial %d rank %d: %s: %s", t, r,
                         names[k], c ? c->msg : "no report");
                if (c && k == 2)
                    printf("  [trial %d rank %d: %s]\n", t, r, c->msg);
            }
        }
        th_result_free(&res);
    }
}

/* ---- start-up kills -------------------------------------------------
 *
 * A rank killed between its registration at the bootstrap and its first
 * collective: its connections to the others are still in their
 * handshake (or not even opened), so the others learn nothing from a
 * message. Each trial starts a p=2 or p=3 job over one transport; one rank,
 * chosen at random (rank 0 in half the trials), kills itself with SIGKILL at a random moment within
 * STARTUP_MAX_DELAY_S after tnt_comm_init returned (half of the trials
 * at once), while the others call one allreduce. Every survivor
 * must fail with TNT_ERR_PEER_LOST (one at least naming the dead rank,
 * as in kill_one_of_four), long before its
 * TNT_TIMEOUT (which is set short, so that a regression fails the trial
 * rather than hanging CI), and a later allreduce must fail at once. */

#define STARTUP_RANKS 3
#define STARTUP_TRIALS 30
#define STARTUP_MAX_DELAY_S 0.003
#define STARTUP_TIMEOUT "TNT_TIMEOUT=8"
/* Well under TNT_TIMEOUT: the error must come from the death. */
#define STARTUP_BOUND_S 5.0

typedef struct startup_shared {
    int victim;
    double delay_s;
    fault_seen_t seen[STARTUP_RANKS];
} startup_shared_t;

static int startup_rank(tnt_comm_t comm, int rank, int p, void *arg,
                        th_report_t *rep)
{
    startup_shared_t *sh = arg;
    fault_seen_t *me = &sh->seen[rank];
    if (rank == sh->victim) {
        if (sh->delay_s > 0)
            sleep_s(sh->delay_s);
        raise(SIGKILL);
    }
    enum { COUNT = 1000 };
    float send[COUNT], recv[COUNT];
    tnt_gen_fill(send, COUNT, TNT_F32, TNT_SUM, 77, rank);
    double t0 = th_now();
    tnt_result_t rc = tnt_allreduce(comm, send, recv, COUNT, TNT_F32,
                                    TNT_SUM);
    me->err_t = th_now() - t0;
    me->rc = rc;
    me->ncoll = rc == TNT_SUCCESS;
    snprintf(me->msg, sizeof me->msg, "%s", tnt_last_error());
    t0 = th_now();
    me->later_rc = tnt_allreduce(comm, send, recv, COUNT, TNT_F32, TNT_SUM);
    me->later_s = th_now() - t0;
    (void)p;
    th_report_expect(rep, "peer_lost", rc == TNT_ERR_PEER_LOST, rc,
                     "rank %d: %d (%s): %s", rank, rc, tnt_strerror(rc),
                     me->msg);
    return 0;
}

static void startup_kills(const char *transport)
{
    int trials = (int)env_u64("TNT_FAULT_TRIALS", STARTUP_TRIALS);
    uint64_t seed = env_u64("TNT_FAULT_SEED", 20261124);
    startup_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    TH_CHECK(sh != MAP_FAILED, "mmap of the shared trial record failed");
    if (sh == MAP_FAILED)
        return;
    char tp[64];
    snprintf(tp, sizeof tp, "TNT_TRANSPORT=%s", transport);
    const char *env[] = {tp, STARTUP_TIMEOUT, NULL};
    double bound = STARTUP_BOUND_S * th_timeout_mult();
    th_rng_t rng = {seed};
    double worst = 0;
    int failed = 0;
    printf("\n  [start-up kills over %s: seed %llu, %d trials]\n",
           transport, (unsigned long long)seed, trials);
    for (int t = 0; t < trials; t++) {
        memset(sh, 0, sizeof *sh);
        /* p=2 half the time: the one survivor must see the death itself
         * (at p=3 a survivor that saw it tells the other). */
        int nranks = 2 + (int)th_rnd_below(&rng, STARTUP_RANKS - 1);
        /* Rank 0 half the time: it only connects, so every survivor
         * meets its death in a connection it accepts. */
        sh->victim = th_rnd_below(&rng, 2)
                         ? 0
                         : (int)th_rnd_below(&rng, (size_t)nranks);
        if (th_rnd_below(&rng, 2) != 0)
            sh->delay_s = (double)th_rnd_below(&rng, 1000000) * 1e-6 *
                          STARTUP_MAX_DELAY_S;
        char name[96];
        snprintf(name, sizeof name, "%s: kill -9 rank %d of %d %.6f s after "
                 "init (trial %d)", transport, sh->victim, nranks,
                 sh->delay_s, t);
        th_job_t job = {name, nranks, env, startup_rank, sh, 40, 0, 2};
        th_result_t res;
        th_run_job(&job, &res);
        int v = sh->victim;
        char phrase[48];
        snprintf(phrase, sizeof phrase, "rank %d (host ", v);
        int before = CU_get_number_of_failures(), named = 0;
        TH_CHECK(!res.timed_out, "%s: the job hit its deadline: a survivor "
                 "hung (%s)", name, res.first_problem);
        TH_CHECK(res.ranks[v].signo == SIGKILL, "%s: the victim was not "
                 "killed (signal %d, exit status %d)", name,
                 res.ranks[v].signo, res.ranks[v].exit_status);
        for (int r = 0; r < nranks; r++) {
            if (r == v)
                continue;
            const fault_seen_t *s = &sh->seen[r];
            const th_rank_result_t *rr = &res.ranks[r];
            TH_CHECK(rr->finished && !rr->signo && rr->exit_status == 0,
                     "%s: survivor %d did not finish cleanly (signal %d, "
                     "exit status %d): %s", name, r, rr->signo,
                     rr->exit_status, res.first_problem);
            /* As in kill_one_of_four: a survivor may name a neighbour
             * that failed because of the death and closed before its
             * notice could reach it; one survivor at least names the
             * dead rank (the only one, at p=2). */
            TH_CHECK(s->rc == TNT_ERR_PEER_LOST,
                     "%s: survivor %d returned %d (%s) after %.3f s, "
                     "expected TNT_ERR_PEER_LOST naming rank %d: '%s'",
                     name, r, s->rc, tnt_strerror((tnt_result_t)s->rc),
                     s->err_t, v, s->msg);
            if (s->rc == TNT_ERR_PEER_LOST && strstr(s->msg, phrase) &&
                strstr(s->msg, "lost"))
                named++;
            else if (s->rc == TNT_ERR_PEER_LOST)
                printf("  [%s: survivor %d named another rank: '%s']\n",
                       name, r, s->msg);
            TH_CHECK(s->err_t <= bound, "%s: survivor %d saw the error "
                     "after %.3f s (bound %.1f s)", name, r, s->err_t,
                     bound);
            TH_CHECK(s->later_rc < 0 && s->later_s < bound,
                     "%s: survivor %d's allreduce after the failure "
                     "returned %d after %.3f s", name, r, s->later_rc,
                     s->later_s);
            if (s->err_t > worst)
                worst = s->err_t;
        }
        TH_CHECK(named > 0, "%s: no survivor named the dead rank %d", name,
                 v);
        failed += CU_get_number_of_failures() != (unsigned)before;
        printf("  [trial %2d: victim %d of %d killed %.6f s after init; "
               "job %.2f s%s]\n", t, v, nranks, sh->delay_s, res.elapsed_s,
               CU_get_number_of_failures() != (unsigned)before ? "; FAILED"
                                                                : "");
        th_result_free(&res);
    }
    printf("  [start-up kills over %s: %d of %d trials failed; slowest "
           "survivor error %.3f s after its allreduce began]\n", transport,
           failed, trials, worst);
    munmap(sh, sizeof *sh);
}

static void test_startup_tcp(void) { startup_kills("tcp"); }
static void test_startup_shm(void) { startup_kills("shm"); }

/* ---- how a failed connection reads --------------------------------
 *
 * The transport's result decides the words (engine.c, tnt__fail_peer):
 * only a lost peer is "lost"; a connection that could not be made (the
 * verbs queue pair setup) reads as a failure to connect, and a local
 * failure as the connection failing. Rank 0 fails its communicator as
 * the upcall of a transport would, with each result in turn, over TCP
 * (no device needed); the next call returns that result and words. */
typedef struct {
    tnt_result_t err;
    const char *words;
} words_case_t;

static int words_rank(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)p;
    const words_case_t *w = arg;
    tnt_result_t rc = tnt_barrier(comm);
    th_report_check(rep, "first_barrier", rc, 0, 0, NULL, 0);
    if (rank == 0) {
        pthread_mutex_lock(&comm->group->lock);
        tnt__fail_peer(comm, 1, w->err, "the transport's own text");
        pthread_mutex_unlock(&comm->group->lock);
    }
    rc = tnt_barrier(comm);
    const char *msg = rc ? tnt_last_error() : "";
    if (rank == 0)
        th_report_expect(rep, "words", rc == w->err &&
                             strstr(msg, w->words) &&
                             strstr(msg, "the transport's own text") &&
                             (w->err == TNT_ERR_PEER_LOST ||
                              !strstr(msg, "lost")),
                         rc, "expected %d with '%s', got %d: '%s'", w->err,
                         w->words, rc, msg);
    else
        th_report_expect(rep, "words", rc != TNT_SUCCESS, rc,
                         "the peer of a failed rank returned %d", rc);
    return 0;
}

static void test_failure_words(void)
{
    static const words_case_t cases[] = {
        {TNT_ERR_CONNECT, "rank 0 cannot connect to rank 1 (host "},
        {TNT_ERR_SYSTEM, "rank 0: connection to rank 1 (host "},
        {TNT_ERR_PROTOCOL, "rank 0: connection to rank 1 (host "},
        {TNT_ERR_PEER_LOST, "rank 0 lost rank 1 (host "},
    };
    const char *env[] = {"TNT_TRANSPORT=tcp", "TNT_TIMEOUT=20", NULL};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "failure words %d", cases[i].err);
        th_job_t job = {name, 2, env, words_rank, (void *)&cases[i], 40, 0,
                        0};
        th_run_job(&job, NULL);
    }
}

static const th_test_def_t k_tests[] = {
    {"faults", "kill_one_of_four", test_kill_one_of_four},
    {"faults", "free_after_early_loss", test_free_after_early_loss},
    {"words", "failure_words", test_failure_words},
    {"startup", "tcp", test_startup_tcp},
    {"startup", "shm", test_startup_shm},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
