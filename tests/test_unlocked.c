/*
 * Reductions and copies that run with the engine lock released
 * (lib/core/engine_compute.c). Every job sets TNT_UNLOCKED_BYTES=0, so
 * every reduction, copy and early-message copy takes that path, and
 * checks what could go wrong when it is done carelessly:
 *
 * - concurrent: large nonblocking allreduces posted by one thread while
 *   another tests and frees them as they complete (and the posting thread
 *   runs blocking allreduces in between, taking the poller role): every
 *   result must be right, on every rank (run it under ASan and TSan);
 * - kill_during_reduce: one rank of three is killed with SIGKILL while
 *   large allreduces are being reduced on the others. Survivors detach
 *   some requests, wait for the others, free each waited buffer at once
 *   and free the communicator: a request finished (and its buffers given
 *   back) while a reduction still wrote into them is a use after free
 *   under ASan;
 * - abort_or_free_during_reduce: the same when the communicator fails on
 *   the application's thread (tnt_comm_abort, tnt_comm_free) while the
 *   progress thread is inside a reduction.
 *
 * Usage: test_unlocked [suite [test]].
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "datagen.h"
#include "harness.h"

/* ---- concurrent: post on one thread, test and free on another ------- */

#define CC_ROUNDS 4
#define CC_PER_ROUND 6
#define CC_OPS (CC_ROUNDS * CC_PER_ROUND)

typedef struct cc_op {
    tnt_dtype_t dt;
    tnt_op_t op;
    size_t count;
    int inplace;
    uint64_t seed;
    void *send, *recv;
    tnt_request_t req;
    tnt_result_t rc;
    int done;                  /* written by the tester, read after join */
} cc_op_t;

typedef struct cc_state {
    cc_op_t ops[CC_OPS];
    int posted;                /* atomic: ops[0..posted) are posted */
    double limit;
} cc_state_t;

/* The tester: tnt_test every posted request until all are done, and free
 * each as soon as it has completed (the poller may still be inside a
 * reduction of a later one). */
static void *cc_tester(void *arg)
{
    cc_state_t *st = arg;
    int ndone = 0;
    while (ndone < CC_OPS && th_now() < st->limit) {
        int posted = __atomic_load_n(&st->posted, __ATOMIC_ACQUIRE);
        for (int k = 0; k < posted; k++) {
            cc_op_t *o = &st->ops[k];
            if (o->done)
                continue;
            if (!o->req) {          /* the post failed */
                o->done = 1;
                ndone++;
                continue;
            }
            tnt_result_t rc = tnt_test(o->req);
            if (rc == TNT_INPROGRESS)
                continue;
            o->rc = rc;
            tnt_request_free(o->req);
            o->req = NULL;
            o->done = 1;
            ndone++;
        }
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int concurrent_rank(tnt_comm_t comm, int rank, int p, void *arg,
                           th_report_t *rep)
{
    (void)arg;
    static const struct {
        tnt_dtype_t dt;
        tnt_op_t op;
        size_t count;
        int inplace;
    } shapes[CC_PER_ROUND] = {
        {TNT_F32, TNT_SUM, 300007, 0}, {TNT_F64, TNT_AVG, 65536, 1},
        {TNT_BF16, TNT_SUM, 200003, 1}, {TNT_F32, TNT_MAX, 4099, 0},
        {TNT_I32, TNT_SUM, 524288, 1}, {TNT_F32, TNT_AVG, 1000003, 0}};
    cc_state_t *st = calloc(1, sizeof(*st));
    if (!st)
        abort();
    st->limit = th_now() + 90.0 * th_timeout_mult();
    pthread_t tester;
    int started = pthread_create(&tester, NULL, cc_tester, st) == 0;
    th_report_expect(rep, "tester_thread", started, TNT_ERR_SYSTEM,
                     "pthread_create failed");
    for (int k = 0; k < CC_OPS && started; k++) {
        cc_op_t *o = &st->ops[k];
        int s = k % CC_PER_ROUND;
        o->dt = shapes[s].dt;
        o->op = shapes[s].op;
        o->count = shapes[s].count;
        o->inplace = shapes[s].inplace;
        char name[64];
        snprintf(name, sizeof name, "concurrent/%d", k);
        o->seed = tnt_gen_hash(name, strlen(name));
        size_t bytes = o->count * tnt_dtype_size(o->dt);
        o->recv = th_xmalloc(bytes);
        if (o->inplace) {
            tnt_gen_fill(o->recv, o->count, o->dt, o->op, o->seed, rank);
        } else {
            o->send = th_xmalloc(bytes);
            tnt_gen_fill(o->send, o->count, o->dt, o->op, o->seed, rank);
            tnt_gen_poison(o->recv, o->count, o->dt);
        }
        o->rc = tnt_iallreduce(comm, o->inplace ? TNT_IN_PLACE : o->send,
                               o->recv, o->count, o->dt, o->op, &o->req);
        if (o->rc != TNT_SUCCESS)
            o->req = NULL;
        __atomic_store_n(&st->posted, k + 1, __ATOMIC_RELEASE);
        if (s == CC_PER_ROUND - 1) {
            /* A blocking allreduce while the others are in flight: this
             * thread takes the poller role and runs their reductions. */
            size_t n = 70001;
            float *b = th_xmalloc(n * sizeof(float));
            uint64_t seed = o->seed ^ 0x5a5a;
            tnt_gen_fill(b, n, TNT_F32, TNT_SUM, seed, rank);
            tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, b, n,
                                            TNT_F32, TNT_SUM);
            size_t first = 0, wrong = rc == TNT_SUCCESS
                ? tnt_gen_check_allreduce(b, 0, n, TNT_F32, TNT_SUM, seed,
                                          p, &first) : 0;
            snprintf(name, sizeof name, "concurrent/blocking/%d", k);
            th_report_check(rep, name, rc, wrong, first, b,
                            n * sizeof(float));
            free(b);
        }
    }
    if (started)
        pthread_join(tester, NULL);
    for (int k = 0; k < CC_OPS && started; k++) {
        cc_op_t *o = &st->ops[k];
        char name[64];
        snprintf(name, sizeof name, "concurrent/%d/%s/%s/n%zu", k,
                 tnt_dtype_name(o->dt), tnt_op_name(o->op), o->count);
        if (!o->done) {
            /* Still running: its buffers must outlive it. */
            th_report_expect(rep, name, 0, TNT_TIMEOUT, "never completed");
            continue;
        }
        size_t first = 0, wrong = o->rc == TNT_SUCCESS
            ? tnt_gen_check_allreduce(o->recv, 0, o->count, o->dt, o->op,
                                      o->seed, p, &first) : 0;
        th_report_check(rep, name, o->rc, wrong, first, o->recv,
                        o->count * tnt_dtype_size(o->dt));
        free(o->send);
        free(o->recv);
    }
    free(st);
    return 0;
}

static void test_concurrent(void)
{
    static const int ps[] = {2, 3, 4};
    static const char *const tps[] = {"TNT_TRANSPORT=tcp",
                                      "TNT_TRANSPORT=shm"};
    for (size_t t = 0; t < 2; t++)
        for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "unlocked concurrent p=%d %s",
                     ps[k], tps[t] + 4);
            const char *env[] = {"TNT_UNLOCKED_BYTES=0", tps[t], NULL};
            th_job_t job = {name, ps[k], env, concurrent_rank, NULL, 240,
                            0, 0};
            th_run_job(&job, NULL);
        }
}

/* ---- kill_during_reduce ---------------------------------------------- */

#define KD_RANKS 3
#define KD_OPS 6
#define KD_COUNT (1u << 20) /* f32: 4 MiB per allreduce */
#define KD_TRIALS 4

typedef struct kd_arg {
    double delay_s;            /* the victim's, after its posts */
} kd_arg_t;

static int kill_rank(tnt_comm_t unused, int rank, int p, void *arg,
                     th_report_t *rep)
{
    (void)unused;
    const kd_arg_t *a = arg;
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    th_report_check(rep, "init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 1;
    float *buf[KD_OPS];
    tnt_request_t req[KD_OPS];
    /* The victim (the last rank) never posts the last allreduce, so that
     * one fails on every survivor whatever the timing. */
    int nops = rank == p - 1 ? KD_OPS - 1 : KD_OPS;
    for (int k = 0; k < nops; k++) {
        buf[k] = th_xmalloc(KD_COUNT * sizeof(float));
        tnt_gen_fill(buf[k], KD_COUNT, TNT_F32, TNT_SUM, 0x4b11 + k, rank);
        req[k] = NULL;
        rc = tnt_iallreduce(comm, TNT_IN_PLACE, buf[k], KD_COUNT, TNT_F32,
                            TNT_SUM, &req[k]);
        if (rc != TNT_SUCCESS)
            req[k] = NULL;
    }
    if (rank == p - 1) {
        struct timespec ts = {0, (long)(a->delay_s * 1e9)};
        nanosleep(&ts, NULL);
        kill(getpid(), SIGKILL);
    }
    /* Detach the first two (their buffers must outlive the operations,
     * so they are freed after the communicator); wait for the others
     * and free each buffer as soon as its wait has returned. */
    for (int k = 0; k < 2; k++)
        if (req[k])
            tnt_request_free(req[k]);
    tnt_result_t last = TNT_SUCCESS;
    for (int k = 2; k < nops; k++) {
        tnt_result_t w = req[k] ? tnt_wait(req[k]) : TNT_ERR_PEER_LOST;
        char name[32];
        snprintf(name, sizeof name, "wait/%d", k);
        th_report_expect(rep, name, w == TNT_SUCCESS ||
                         w == TNT_ERR_PEER_LOST, w, "expected success or "
                         "peer lost: %s", tnt_last_error());
        if (req[k])
            tnt_request_free(req[k]);
        free(buf[k]);
        last = w;
    }
    th_report_expect(rep, "last_fails", last == TNT_ERR_PEER_LOST, last,
                     "the allreduce the victim never posted returned %d",
                     last);
    rc = tnt_comm_free(comm);
    th_report_check(rep, "comm_free", rc, 0, 0, NULL, 0);
    for (int k = 0; k < 2; k++)
        free(buf[k]);
    return 0;
}

static void test_kill_during_reduce(void)
{
    th_rng_t rng = {20260611};
    for (int t = 0; t < KD_TRIALS; t++) {
        kd_arg_t a = {(double)th_rnd_below(&rng, 150000) * 1e-6};
        char name[96];
        snprintf(name, sizeof name, "kill rank %d of %d %.3f s after its "
                 "posts (trial %d)", KD_RANKS - 1, KD_RANKS, a.delay_s, t);
        const char *env[] = {"TNT_UNLOCKED_BYTES=0", "TNT_TIMEOUT=60",
                             NULL};
        /* quiet 2: the victim's death is the point; everything else is
         * judged below. */
        th_job_t job = {name, KD_RANKS, env, kill_rank, &a, 120, 1, 2};
        th_result_t res;
        th_run_job(&job, &res);
        for (int r = 0; r < KD_RANKS - 1; r++) {
            const th_rank_result_t *rr = &res.ranks[r];
            TH_CHECK(rr->finished && !rr->signo &&
                         (!rr->exited || rr->exit_status == 0),
                     "%s: survivor %d: finished %d, signal %d, exit status "
                     "%d (a sanitizer report on stderr?): %s", name, r,
                     rr->finished, rr->signo, rr->exit_status,
                     res.first_problem);
            for (size_t i = 0; i < rr->ncases; i++)
                TH_CHECK(rr->cases[i].ok, "%s: survivor %d case '%s': %s",
                         name, r, rr->cases[i].name, rr->cases[i].msg);
        }
        TH_CHECK(res.ranks[KD_RANKS - 1].signo == SIGKILL,
                 "%s: the victim was not killed (signal %d)", name,
                 res.ranks[KD_RANKS - 1].signo);
        th_result_free(&res);
    }
}

/* ---- abort_or_free_during_reduce ------------------------------------ */

/* Here the communicator fails on a thread that is not the poller, while
 * the poller may be inside a reduction: tnt_comm_abort, then tnt_wait on
 * every request and each buffer freed as soon as its wait returned; or
 * tnt_comm_free straight away, the requests released after it. A wait
 * that returned before the reduction into its buffer had, or a free that
 * took the scratch or the request from under it, is caught by ASan. */
#define AF_OPS 4
#define AF_COUNT (1u << 21) /* f32: 8 MiB, reduced whole by rd */
#define AF_TRIALS 6

typedef struct af_arg {
    int trial;
    double delay_s[2];
} af_arg_t;

static int abort_rank(tnt_comm_t unused, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)unused;
    (void)p;
    const af_arg_t *a = arg;
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    th_report_check(rep, "init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 1;
    float *buf[AF_OPS];
    tnt_request_t req[AF_OPS];
    for (int k = 0; k < AF_OPS; k++) {
        buf[k] = th_xmalloc(AF_COUNT * sizeof(float));
        tnt_gen_fill(buf[k], AF_COUNT, TNT_F32, TNT_SUM, 0xab0 + k, rank);
        if (tnt_iallreduce(comm, TNT_IN_PLACE, buf[k], AF_COUNT, TNT_F32,
                           TNT_SUM, &req[k]) != TNT_SUCCESS)
            req[k] = NULL;
    }
    struct timespec ts = {0, (long)(a->delay_s[rank % 2] * 1e9)};
    nanosleep(&ts, NULL);
    if (a->trial % 2 == 0) {
        rc = tnt_comm_abort(comm);
        th_report_check(rep, "abort", rc, 0, 0, NULL, 0);
        for (int k = 0; k < AF_OPS; k++) {
            tnt_result_t w = req[k] ? tnt_wait(req[k]) : TNT_ERR_ABORTED;
            char name[32];
            snprintf(name, sizeof name, "wait/%d", k);
            th_report_expect(rep, name, w == TNT_SUCCESS ||
                             w == TNT_ERR_ABORTED || w == TNT_ERR_PEER_LOST,
                             w, "after tnt_comm_abort: %s", tnt_last_error());
            /* Done means done: nothing may write into it any more. */
            free(buf[k]);
            buf[k] = NULL;
        }
    }
    rc = tnt_comm_free(comm);
    th_report_check(rep, "comm_free", rc, 0, 0, NULL, 0);
    for (int k = 0; k < AF_OPS; k++) {
        if (req[k])
            tnt_request_free(req[k]);
        free(buf[k]);
    }
    return 0;
}

static void test_abort_during_reduce(void)
{
    th_rng_t rng = {20260612};
    for (int t = 0; t < AF_TRIALS; t++) {
        af_arg_t a = {t, {(double)th_rnd_below(&rng, 60000) * 1e-6,
                          (double)th_rnd_below(&rng, 60000) * 1e-6}};
        char name[96];
        snprintf(name, sizeof name, "%s %.3f/%.3f s after the posts "
                 "(trial %d)", t % 2 ? "tnt_comm_free" : "tnt_comm_abort",
                 a.delay_s[0], a.delay_s[1], t);
        const char *env[] = {"TNT_UNLOCKED_BYTES=0",
                             "TNT_ALLREDUCE_ALGO=rd", NULL};
        th_job_t job = {name, 2, env, abort_rank, &a, 120, 1, 0};
        th_run_job(&job, NULL);
    }
}

static const th_test_def_t k_tests[] = {
    {"unlocked", "concurrent", test_concurrent},
    {"unlocked", "kill_during_reduce", test_kill_during_reduce},
    {"unlocked", "abort_or_free_during_reduce", test_abort_during_reduce},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
