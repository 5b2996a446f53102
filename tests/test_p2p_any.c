/*
 * Receives from any source (tnt_irecv/tnt_recv with TNT_ANY_SOURCE, and
 * tnt_request_source) between real forked ranks (harness.h), over the
 * transport the environment names (meson runs it over TCP and over
 * shared memory), at p = 2, 3, 5, 7:
 *   - every rank sends to every other rank and receives all of them from
 *     any source, in several rounds (one tag per round) posted at once,
 *     so the senders race; sizes 0, 1, 13 and past the eager window;
 *   - several messages of one tag from every sender: those from one
 *     sender are taken in its sending order;
 *   - receives naming their peer mixed with ones from any source;
 *   - a blocking tnt_recv from any source;
 *   - a deadline with no sender, a count that differs from the send's,
 *     and bad arguments.
 * Every element is checked against datagen's value for (seed, sender,
 * index), and every reported source against the sender the data says.
 *
 * Usage: test_p2p_any [suite [test]].
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "harness.h"

static const int k_ranks[] = {2, 3, 5, 7};
#define N_RANKS (int)(sizeof k_ranks / sizeof k_ranks[0])

/* The seed of message `k` that `from` sends `to` with `tag`. */
static uint64_t msg_seed(int from, int to, int tag, int k)
{
    return 0x7a11c0debeefULL ^ ((uint64_t)from << 48) ^
           ((uint64_t)to << 32) ^ ((uint64_t)tag << 12) ^ (uint64_t)k;
}

static float *filled(size_t n, int from, int to, int tag, int k)
{
    float *b = th_xmalloc(n * sizeof(float) + 1);
    tnt_gen_fill(b, n, TNT_F32, TNT_SUM, msg_seed(from, to, tag, k), from);
    return b;
}

/* Wrong elements of a received message, added to *wrong. */
static void check_msg(const float *got, size_t n, int from, int to, int tag,
                      int k, size_t *wrong, size_t *first)
{
    float *want = filled(n, from, to, tag, k);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 &&
            (*wrong)++ == 0)
            *first = i;
    free(want);
}

/* Waits for and frees every request; the first error. */
static tnt_result_t wait_all(tnt_request_t *r, int n, int *src)
{
    tnt_result_t rc = TNT_SUCCESS;
    for (int i = n - 1; i >= 0; i--) {
        if (!r[i])
            continue;
        tnt_result_t w = tnt_wait(r[i]);
        if (w == TNT_SUCCESS && src && src[i] == -2 &&
            tnt_request_source(r[i], &src[i]) != TNT_SUCCESS)
            w = TNT_ERR_INTERNAL;
        if (rc == TNT_SUCCESS)
            rc = w;
        tnt_request_free(r[i]);
    }
    return rc;
}

static const size_t k_round_n[] = {1, 0, 70001, 13};
#define N_ROUNDS (int)(sizeof k_round_n / sizeof k_round_n[0])

/* Every rank sends one message per round to every other rank (tag 20 +
 * round) and receives p - 1 per round from any source, all posted before
 * any wait: each round's sources are the other ranks, once each. */
static void all_race(th_report_t *rep, tnt_comm_t comm, int rank, int p)
{
    int per = p - 1, n = N_ROUNDS * per;
    tnt_request_t *rr = calloc((size_t)n, sizeof(*rr));
    tnt_request_t *sr = calloc((size_t)n, sizeof(*sr));
    float **in = calloc((size_t)n, sizeof(*in));
    float **out = calloc((size_t)n, sizeof(*out));
    int *src = malloc((size_t)n * sizeof(*src));
    tnt_result_t rc = TNT_SUCCESS;
    for (int i = 0; i < n; i++) {
        int round = i / per;
        size_t len = k_round_n[round];
        in[i] = th_xmalloc(len * sizeof(float) + 1);
        src[i] = -2;
        if (rc == TNT_SUCCESS)
            rc = tnt_irecv(comm, in[i], len, TNT_F32, TNT_ANY_SOURCE,
                           20 + round, &rr[i]);
    }
    for (int i = 0; i < n && rc == TNT_SUCCESS; i++) {
        int round = i / per, to = (rank + 1 + i % per) % p;
        size_t len = k_round_n[round];
        out[i] = filled(len, rank, to, 20 + round, 0);
        rc = tnt_isend(comm, out[i], len, TNT_F32, to, 20 + round, &sr[i]);
    }
    tnt_result_t w = wait_all(sr, n, NULL);
    if (rc == TNT_SUCCESS)
        rc = w;
    w = wait_all(rr, n, src);
    if (rc == TNT_SUCCESS)
        rc = w;
    size_t wrong = 0, first = 0;
    int bad_src = 0;
    for (int round = 0; round < N_ROUNDS && rc == TNT_SUCCESS; round++) {
        unsigned long long seen = 0;
        for (int j = 0; j < per; j++) {
            int i = round * per + j, s = src[i];
            if (s < 0 || s >= p || s == rank || (seen >> s & 1)) {
                bad_src = 1;
                continue;
            }
            seen |= 1ULL << s;
            check_msg(in[i], k_round_n[round], s, rank, 20 + round, 0,
                      &wrong, &first);
        }
    }
    th_report_expect(rep, "race", rc == TNT_SUCCESS && !bad_src && !wrong,
                     rc, "rank %d: %zu wrong (first %zu), sources %s", rank,
                     wrong, first, bad_src ? "wrong" : "right");
    for (int i = 0; i < n; i++) {
        free(in[i]);
        free(out[i]);
    }
    free(rr);
    free(sr);
    free(in);
    free(out);
    free(src);
}

/* Rank 0 takes K messages of `tag` from every other rank, all from any
 * source; those from one sender must come in its sending order (message
 * k carries seed k). Each part of the test has its own tag: a receive
 * from any source takes a fast sender's message of the next part too. */
#define K_ORDER 5
static void one_tag_order(th_report_t *rep, tnt_comm_t comm, int rank,
                          int p, size_t len, int tag, const char *name)
{
    int n = rank == 0 ? K_ORDER * (p - 1) : K_ORDER;
    tnt_request_t *r = calloc((size_t)n, sizeof(*r));
    float **buf = calloc((size_t)n, sizeof(*buf));
    int *src = malloc((size_t)n * sizeof(*src));
    tnt_result_t rc = TNT_SUCCESS;
    for (int i = 0; i < n && rc == TNT_SUCCESS; i++) {
        src[i] = -2;
        if (rank == 0) {
            buf[i] = th_xmalloc(len * sizeof(float) + 1);
            rc = tnt_irecv(comm, buf[i], len, TNT_F32, TNT_ANY_SOURCE, tag,
                           &r[i]);
        } else {
            buf[i] = filled(len, rank, 0, tag, i);
            rc = tnt_isend(comm, buf[i], len, TNT_F32, 0, tag, &r[i]);
        }
    }
    tnt_result_t w = wait_all(r, n, rank == 0 ? src : NULL);
    if (rc == TNT_SUCCESS)
        rc = w;
    size_t wrong = 0, first = 0;
    int bad_src = 0, next[64] = {0};
    for (int i = 0; rank == 0 && i < n && rc == TNT_SUCCESS; i++) {
        int s = src[i];
        if (s <= 0 || s >= p || next[s] >= K_ORDER) {
            bad_src = 1;
            continue;
        }
        check_msg(buf[i], len, s, 0, tag, next[s]++, &wrong, &first);
    }
    th_report_expect(rep, name, rc == TNT_SUCCESS && !bad_src && !wrong, rc,
                     "rank %d: %zu wrong (first %zu), sources %s", rank,
                     wrong, first, bad_src ? "wrong" : "right");
    for (int i = 0; i < n; i++)
        free(buf[i]);
    free(buf);
    free(r);
    free(src);
}

/* Rank 0 posts a receive from any source, then one naming rank 1, then
 * more from any source, all tag 4; rank 1 sends two messages, every other
 * rank one. A message goes to the earliest posted receive it matches:
 * the named receive gets one of rank 1's (the second if the receive
 * from any source before it took the first), and rank 1's two come in
 * its sending order in the order the receives were posted. */
static void mixed(th_report_t *rep, tnt_comm_t comm, int rank, int p)
{
    size_t len = 100;
    int n = rank == 0 ? p : rank == 1 ? 2 : 1;
    tnt_request_t *r = calloc((size_t)n, sizeof(*r));
    float **buf = calloc((size_t)n, sizeof(*buf));
    int *src = malloc((size_t)n * sizeof(*src));
    tnt_result_t rc = TNT_SUCCESS;
    for (int i = 0; i < n && rc == TNT_SUCCESS; i++) {
        src[i] = -2;
        if (rank == 0) {
            int peer = i == 1 ? 1 : TNT_ANY_SOURCE;
            buf[i] = th_xmalloc(len * sizeof(float));
            rc = tnt_irecv(comm, buf[i], len, TNT_F32, peer, 4, &r[i]);
        } else {
            buf[i] = filled(len, rank, 0, 4, i);
            rc = tnt_isend(comm, buf[i], len, TNT_F32, 0, 4, &r[i]);
        }
    }
    tnt_result_t w = wait_all(r, n, rank == 0 ? src : NULL);
    if (rc == TNT_SUCCESS)
        rc = w;
    size_t wrong = 0, first = 0;
    int bad_src = rank == 0 && rc == TNT_SUCCESS && src[1] != 1,
        next[64] = {0};
    for (int i = 0; rank == 0 && i < n && rc == TNT_SUCCESS; i++) {
        int s = src[i];
        if (s <= 0 || s >= p || next[s] >= (s == 1 ? 2 : 1)) {
            bad_src = 1;
            continue;
        }
        check_msg(buf[i], len, s, 0, 4, next[s]++, &wrong, &first);
    }
    th_report_expect(rep, "mixed", rc == TNT_SUCCESS && !bad_src && !wrong,
                     rc, "rank %d: %zu wrong (first %zu), sources %s", rank,
                     wrong, first, bad_src ? "wrong" : "right");
    for (int i = 0; i < n; i++)
        free(buf[i]);
    free(buf);
    free(r);
    free(src);
}

/* The last rank gathers one message from each other rank with blocking
 * receives from any source (past the eager window), then a barrier. */
static void blocking(th_report_t *rep, tnt_comm_t comm, int rank, int p)
{
    size_t len = 70001, wrong = 0, first = 0;
    int last = p - 1;
    tnt_result_t rc = TNT_SUCCESS;
    float *buf = th_xmalloc(len * sizeof(float));
    if (rank == last) {
        /* Which sender is not said: the data says it (datagen's value
         * for element 0 differs by sender). */
        unsigned long long seen = 0;
        for (int j = 0; j < p - 1 && rc == TNT_SUCCESS; j++) {
            rc = tnt_recv(comm, buf, len, TNT_F32, TNT_ANY_SOURCE, 6);
            int s = -1;
            for (int q = 0; q < last && rc == TNT_SUCCESS && s < 0; q++) {
                size_t w = 0, f = 0;
                if (!(seen >> q & 1))
                    check_msg(buf, len, q, last, 6, 0, &w, &f);
                if (!(seen >> q & 1) && w == 0)
                    s = q;
            }
            if (s < 0)
                wrong++;
            else
                seen |= 1ULL << s;
        }
    } else {
        float *out = filled(len, rank, last, 6, 0);
        rc = tnt_send(comm, out, len, TNT_F32, last, 6);
        free(out);
    }
    if (rc == TNT_SUCCESS)
        rc = tnt_barrier(comm);
    th_report_check(rep, "blocking", rc, wrong, first, NULL, 0);
    free(buf);
}

static int any_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)arg;
    all_race(rep, comm, rank, p);
    one_tag_order(rep, comm, rank, p, 1000, 3, "order");
    one_tag_order(rep, comm, rank, p, 70001, 5, "order_big");
    mixed(rep, comm, rank, p);
    blocking(rep, comm, rank, p);
    return 0;
}

static void test_any(void)
{
    for (int k = 0; k < N_RANKS; k++) {
        if (th_quick() && k_ranks[k] == 7)
            continue;
        char name[64];
        snprintf(name, sizeof name, "p2p any p=%d", k_ranks[k]);
        const char *env[] = {NULL};
        th_job_t job = {name, k_ranks[k], env, any_rank, NULL, 240, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* No rank sends: the deadline (TNT_TIMEOUT=2) with a message that says
 * it was a receive from any source, not a hang. */
static int deadline_rank(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    (void)p;
    (void)arg;
    float x[4];
    tnt_result_t rc = TNT_ERR_TIMEOUT;
    const char *msg = "";
    if (rank == 1) {
        tnt_request_t r;
        rc = tnt_irecv(comm, x, 4, TNT_F32, TNT_ANY_SOURCE, 8, &r);
        if (rc == TNT_SUCCESS) {
            rc = tnt_wait(r);
            msg = tnt_last_error();
            tnt_request_free(r);
        }
    } else {
        th_sleep(5.0); /* rank 1 fails meanwhile */
    }
    int ok = (rc == TNT_ERR_TIMEOUT && strstr(msg, "any source") &&
              strstr(msg, "tag 8")) || rank != 1;
    th_report_expect(rep, "deadline", ok, rc, "rank %d: %d '%s'", rank, rc,
                     msg);
    return 0;
}

static void test_any_deadline(void)
{
    const char *env[] = {"TNT_TIMEOUT=2", NULL};
    th_job_t job = {"p2p any deadline", 3, env, deadline_rank, NULL, 60, 0,
                    0};
    th_run_job(&job, NULL);
}

/* A receive from any source of another count than the send's. */
static int mismatch_rank(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    (void)p;
    (void)arg;
    float x[101] = {0};
    tnt_result_t rc = TNT_SUCCESS;
    if (rank == 0)
        rc = tnt_send(comm, x, 100, TNT_F32, 1, 4);
    else
        rc = tnt_recv(comm, x, 101, TNT_F32, TNT_ANY_SOURCE, 4);
    char msg[400];
    snprintf(msg, sizeof msg, "%s", rc ? tnt_last_error() : "");
    if (rc == TNT_SUCCESS) { /* the sender of a small message: next call */
        rc = tnt_barrier(comm);
        snprintf(msg, sizeof msg, "%s", rc ? tnt_last_error() : "");
    }
    int ok = rc == TNT_ERR_MISMATCH && strstr(msg, "sends 100 elements") &&
             strstr(msg, "receives 101");
    th_report_expect(rep, "mismatch", ok, rc, "rank %d: %d '%s'", rank, rc,
                     msg);
    return 0;
}

static void test_any_mismatch(void)
{
    const char *env[] = {"TNT_TIMEOUT=20", NULL};
    th_job_t job = {"p2p any mismatch", 2, env, mismatch_rank, NULL, 60, 0,
                    0};
    th_run_job(&job, NULL);
}

/* Bad arguments: clear errors, and the job goes on. */
static int bad_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)arg;
    float x[4] = {0};
    int other = (rank + 1) % p, ok = 1, src = -5;
    const tnt_result_t IA = TNT_ERR_INVALID_ARG;
    ok &= tnt_send(comm, x, 4, TNT_F32, TNT_ANY_SOURCE, 0) == IA &&
          strstr(tnt_last_error(), "a send names its peer");
    ok &= tnt_recv(comm, x, 4, TNT_F32, -2, 0) == IA &&
          strstr(tnt_last_error(), "not a rank");
    ok &= tnt_request_source(NULL, &src) == IA;
    /* A send's request has no source; nor has a receive not done. */
    tnt_request_t s = NULL, r = NULL;
    tnt_result_t rc = rank == 0
                          ? tnt_isend(comm, x, 4, TNT_F32, other, 1, &s)
                          : tnt_irecv(comm, x, 4, TNT_F32, TNT_ANY_SOURCE,
                                      1, &r);
    if (rc == TNT_SUCCESS && rank == 0) {
        ok &= tnt_request_source(s, NULL) == IA;
        ok &= tnt_request_source(s, &src) == IA &&
              strstr(tnt_last_error(), "no receive");
        rc = tnt_wait(s);
        tnt_request_free(s);
    } else if (rc == TNT_SUCCESS) {
        tnt_result_t early = tnt_request_source(r, &src);
        ok &= early == IA || early == TNT_SUCCESS; /* it may be done */
        rc = tnt_wait(r);
        if (rc == TNT_SUCCESS)
            rc = tnt_request_source(r, &src);
        ok &= src == 0;
        tnt_request_free(r);
        ok &= tnt_request_source(r, &src) == IA; /* freed */
    }
    th_report_expect(rep, "bad args", ok && rc == TNT_SUCCESS, rc,
                     "rank %d: src %d, last '%s'", rank, src,
                     tnt_last_error());
    rc = tnt_barrier(comm);
    th_report_check(rep, "after", rc, 0, 0, NULL, 0);
    return 0;
}

static void test_any_bad_args(void)
{
    const char *env[] = {NULL};
    th_job_t job = {"p2p any bad args", 2, env, bad_rank, NULL, 60, 0, 0};
    th_run_job(&job, NULL);
}

/* One rank: nobody can send, so the receive is refused at once. */
static int alone_rank(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)rank;
    (void)p;
    (void)arg;
    float x[4];
    tnt_result_t rc = tnt_recv(comm, x, 4, TNT_F32, TNT_ANY_SOURCE, 0);
    th_report_expect(rep, "alone", rc == TNT_ERR_INVALID_ARG &&
                                       strstr(tnt_last_error(), "one rank"),
                     rc, "'%s'", tnt_last_error());
    return 0;
}

static void test_any_alone(void)
{
    const char *env[] = {NULL};
    th_job_t job = {"p2p any alone", 1, env, alone_rank, NULL, 60, 0, 0};
    th_run_job(&job, NULL);
}

static const th_test_def_t k_tests[] = {
    {"p2p_any", "race", test_any},
    {"p2p_any", "deadline", test_any_deadline},
    {"p2p_any", "mismatch", test_any_mismatch},
    {"p2p_any", "bad_args", test_any_bad_args},
    {"p2p_any", "alone", test_any_alone},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
