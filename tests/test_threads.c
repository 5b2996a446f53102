/*
 * Several threads of one rank on one communicator (issue 34, defect 2).
 * The rule (tnt.h): collectives on one communicator are issued by one
 * thread at a time, in the same order on every rank. Broken, the ranks
 * paired the two threads' calls crosswise and returned wrong data as
 * success. Now a second thread entering a collective while another is
 * inside one is refused with TNT_ERR_INVALID_USAGE, nothing of it is
 * posted, and the communicator fails on every rank, so no call returns
 * wrong data as a success.
 *
 * The refusal is made certain, not likely: rank 0's two threads enter at
 * once while the other ranks are held back (a flag in memory shared by
 * the job's processes), so whichever thread entered first cannot finish
 * and the second meets it inside; the other ranks call only once rank 0
 * has reported the refusal (or, as before the fix, after 10 s without
 * one). A third case shows threads that take turns in one order on every
 * rank are not refused, with every element checked.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"

#define N ((size_t)65536) /* 256 KiB of f32: not the slots' lean path */
#define HOLD_S 10.0      /* how long the other ranks wait for the refusal */

/* In memory shared by the parent and the ranks it forks. */
typedef struct shared {
    int refused;          /* rank 0 saw a call refused */
} shared_t;
static shared_t *g_sh;

static float value(int rank, int thread, int iter, size_t k)
{
    return (float)((k % 13) + (size_t)rank + 3u * (size_t)iter +
                   100u * (size_t)thread);
}

static void fill(float *x, int rank, int thread, int iter)
{
    for (size_t k = 0; k < N; k++)
        x[k] = value(rank, thread, iter, k);
}

/* Elements that are not the sum over the p ranks of thread `thread`'s
 * iteration `iter`; *first the index of the first. */
static size_t wrong(const float *x, int p, int thread, int iter,
                    size_t *first)
{
    size_t nw = 0;
    for (size_t k = 0; k < N; k++) {
        float want = 0;
        for (int r = 0; r < p; r++)
            want += value(r, thread, iter, k);
        if (x[k] != want && nw++ == 0)
            *first = k;
    }
    return nw;
}

typedef struct thr {
    tnt_comm_t comm;
    int rank, p, t;
    int nonblocking;      /* thread 1 posts tnt_iallreduce, once thread 0
                             is inside its collective */
    pthread_barrier_t *start;
    float *x;
    tnt_result_t rc;
    int req_null;         /* the refused nonblocking call left req NULL */
    char msg[512];
} thr_t;

static int in_flight(tnt_comm_t comm)
{
    char rep[4096];
    return tnt_comm_report(comm, rep, sizeof rep) == TNT_SUCCESS &&
           strstr(rep, "1 collective in flight") != NULL;
}

static void *rank0_thread(void *arg)
{
    thr_t *a = arg;
    fill(a->x, a->rank, a->t, 0);
    pthread_barrier_wait(a->start);
    if (a->nonblocking && a->t == 1) {
        /* Thread 0 is inside once its allreduce is in flight: it cannot
         * finish while the other ranks are held. */
        double end = th_now() + HOLD_S * th_timeout_mult();
        while (!in_flight(a->comm) && th_now() < end)
            th_sleep(0.001);
        tnt_request_t req = (tnt_request_t)&req; /* not NULL */
        a->rc = tnt_iallreduce(a->comm, TNT_IN_PLACE, a->x, N, TNT_F32,
                               TNT_SUM, &req);
        a->req_null = req == NULL;
        snprintf(a->msg, sizeof a->msg, "%s", tnt_last_error());
        if (a->rc == TNT_SUCCESS) /* before the fix: posted */
            a->rc = tnt_wait(req), tnt_request_free(req);
    } else {
        a->rc = tnt_allreduce(a->comm, TNT_IN_PLACE, a->x, N, TNT_F32,
                              TNT_SUM);
        snprintf(a->msg, sizeof a->msg, "%s", tnt_last_error());
    }
    if (a->rc == TNT_ERR_INVALID_USAGE)
        __atomic_store_n(&g_sh->refused, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Every later collective fails too: the communicator is failed. */
static void after(tnt_comm_t comm, th_report_t *rep)
{
    tnt_result_t rc = tnt_barrier(comm);
    th_report_expect(rep, "after", rc == TNT_ERR_INVALID_USAGE, rc,
                     "a barrier after the refusal: rc %d (%s)", rc,
                     tnt_strerror(rc));
}

static int overlap_rank(tnt_comm_t comm, int rank, int p, void *arg,
                        th_report_t *rep)
{
    int nonblocking = *(int *)arg;
    if (rank != 0) {
        /* Held until rank 0 refused a call. */
        double end = th_now() + HOLD_S * th_timeout_mult();
        while (!__atomic_load_n(&g_sh->refused, __ATOMIC_ACQUIRE) &&
               th_now() < end)
            th_sleep(0.002);
        float *x = th_xmalloc(N * sizeof(float));
        fill(x, rank, 0, 0);
        tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, x, N, TNT_F32,
                                        TNT_SUM);
        size_t first = 0, nw = rc == TNT_SUCCESS ? wrong(x, p, 0, 0, &first)
                                                 : 0;
        th_report_expect(rep, "calls", rc == TNT_ERR_INVALID_USAGE &&
                         nw == 0, rc, "rank %d: rc %d (%s), %zu wrong: "
                         "'%s'", rank, rc, tnt_strerror(rc), nw,
                         tnt_last_error());
        free(x);
        after(comm, rep);
        return 0;
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    thr_t t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (thr_t){.comm = comm, .rank = rank, .p = p, .t = i,
                       .nonblocking = nonblocking, .start = &start,
                       .x = th_xmalloc(N * sizeof(float))};
        pthread_create(&th[i], NULL, rank0_thread, &t[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    /* Both calls fail: the refused one at once, the one inside with the
     * communicator. No success, so no wrong data unreported. */
    int ok = 1;
    for (int i = 0; i < 2; i++)
        ok &= t[i].rc == TNT_ERR_INVALID_USAGE &&
              strstr(t[i].msg, "another thread") &&
              strstr(t[i].msg, "one thread at a time");
    if (nonblocking)
        ok &= t[1].req_null;
    th_report_expect(rep, "calls", ok, t[0].rc, "rank 0: thread 0 rc %d "
                     "(%s): '%s'; thread 1 rc %d (%s)%s: '%s'", t[0].rc,
                     tnt_strerror(t[0].rc), t[0].msg, t[1].rc,
                     tnt_strerror(t[1].rc), nonblocking && !t[1].req_null
                         ? ", its request not NULL" : "", t[1].msg);
    for (int i = 0; i < 2; i++)
        free(t[i].x);
    after(comm, rep);
    return 0;
}

static void run_overlap(int p, int nonblocking)
{
    __atomic_store_n(&g_sh->refused, 0, __ATOMIC_RELEASE);
    const char *env[] = {"TNT_TIMEOUT=60", NULL};
    char name[64];
    snprintf(name, sizeof name, "two threads, %s, p=%d",
             nonblocking ? "blocking + nonblocking" : "blocking", p);
    th_job_t job = {name, p, env, overlap_rank, &nonblocking, 120, 0, 0};
    th_run_job(&job, NULL);
}

static void test_blocking(void)
{
    run_overlap(2, 0);
    run_overlap(3, 0);
}

static void test_nonblocking(void)
{
    run_overlap(2, 1);
}

/* Two threads taking turns, iteration i on thread i % 2, blocking and
 * nonblocking by turns: the same order on every rank, never two at once,
 * so nothing is refused and every element is right. */
#define TURNS 12

typedef struct turns {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int next;             /* the iteration whose turn it is */
} turns_t;

typedef struct turn_thr {
    turns_t *turns;
    tnt_comm_t comm;
    int rank, p, t;
    int failed;
    tnt_result_t rc;
    size_t nwrong, first;
    int iter;
    char msg[512];
} turn_thr_t;

static void *turn_thread(void *arg)
{
    turn_thr_t *a = arg;
    float *x = th_xmalloc(N * sizeof(float));
    for (int i = a->t; i < TURNS && !a->failed; i += 2) {
        pthread_mutex_lock(&a->turns->mu);
        while (a->turns->next != i)
            pthread_cond_wait(&a->turns->cv, &a->turns->mu);
        pthread_mutex_unlock(&a->turns->mu);
        fill(x, a->rank, a->t, i);
        tnt_result_t rc;
        if (i % 4 < 2) {
            rc = tnt_allreduce(a->comm, TNT_IN_PLACE, x, N, TNT_F32,
                               TNT_SUM);
        } else {
            tnt_request_t req;
            rc = tnt_iallreduce(a->comm, TNT_IN_PLACE, x, N, TNT_F32,
                                TNT_SUM, &req);
            if (rc == TNT_SUCCESS) {
                rc = tnt_wait(req);
                tnt_request_free(req);
            }
        }
        size_t first = 0, nw = rc == TNT_SUCCESS
                                   ? wrong(x, a->p, a->t, i, &first) : 0;
        if (rc != TNT_SUCCESS || nw) {
            a->failed = 1;
            a->rc = rc;
            a->nwrong = nw;
            a->first = first;
            a->iter = i;
            snprintf(a->msg, sizeof a->msg, "%s", tnt_last_error());
        }
        pthread_mutex_lock(&a->turns->mu);
        a->turns->next = a->failed ? TURNS : i + 1;
        pthread_cond_broadcast(&a->turns->cv);
        pthread_mutex_unlock(&a->turns->mu);
    }
    free(x);
    return NULL;
}

static int turns_rank(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)arg;
    turns_t turns = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                     0};
    turn_thr_t t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (turn_thr_t){.turns = &turns, .comm = comm, .rank = rank,
                            .p = p, .t = i};
        pthread_create(&th[i], NULL, turn_thread, &t[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "thread %d", i);
        th_report_expect(rep, name, !t[i].failed, t[i].rc,
                         "rank %d thread %d iteration %d: rc %d (%s), %zu "
                         "wrong from %zu: '%s'", rank, i, t[i].iter,
                         t[i].rc, tnt_strerror(t[i].rc), t[i].nwrong,
                         t[i].first, t[i].msg);
    }
    return 0;
}

static void test_turns(void)
{
    static const int ps[] = {2, 3};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        char name[48];
        snprintf(name, sizeof name, "two threads by turns, p=%d", ps[i]);
        th_job_t job = {name, ps[i], (const char *[]){NULL}, turns_rank,
                        NULL, 120, 0, 0};
        th_run_job(&job, NULL);
    }
}

static const th_test_def_t k_tests[] = {
    {"threads", "blocking", test_blocking},
    {"threads", "nonblocking", test_nonblocking},
    {"threads", "turns", test_turns},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    return th_main(argc, argv, k_tests);
}
