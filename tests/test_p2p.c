/*
 * Point-to-point (tnt_send, tnt_recv, tnt_isend, tnt_irecv) between real
 * forked ranks (harness.h), over the transport the environment names
 * (meson runs it over TCP and over shared memory): ping-pong, a ring
 * shift, many messages in flight in both directions, tags received out
 * of their sending order, messages of one tag in order, sizes from 0 to
 * past the eager window (flow control), p2p interleaved with allreduces
 * and broadcasts, and a receive of another size or dtype than its send
 * (TNT_ERR_MISMATCH naming the ranks and counts). Every element is
 * checked against datagen's value for (seed, sender, index).
 *
 * Usage: test_p2p [suite [test]].
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "harness.h"

static const int k_ranks[] = {2, 3, 5, 8};
#define N_RANKS (int)(sizeof k_ranks / sizeof k_ranks[0])

/* The seed of the message `k` that `from` sends `to` with `tag`. */
static uint64_t msg_seed(int from, int to, int tag, int k)
{
    return 0x51ed270b27a3ULL ^ ((uint64_t)from << 48) ^
           ((uint64_t)to << 32) ^ ((uint64_t)tag << 12) ^ (uint64_t)k;
}

static void *filled(size_t n, int from, int to, int tag, int k)
{
    float *b = th_xmalloc(n * sizeof(float));
    tnt_gen_fill(b, n, TNT_F32, TNT_SUM, msg_seed(from, to, tag, k), from);
    return b;
}

/* Wrong elements of a received message. */
static size_t wrong_in(const float *got, size_t n, int from, int to, int tag,
                       int k, size_t *first)
{
    float *want = filled(n, from, to, tag, k);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && wrong++ == 0)
            *first = i;
    free(want);
    return wrong;
}

static const size_t k_sizes[] = {0, 1, 7, 1000, 70001, 300007};
#define N_SIZES (sizeof k_sizes / sizeof k_sizes[0])

/* Rank 0 and every other rank in turn: there and back, every size. */
static void ping_pong(th_report_t *rep, tnt_comm_t comm, int rank, int p)
{
    for (int q = 1; q < p; q++)
        for (size_t s = 0; s < N_SIZES; s++) {
            size_t n = k_sizes[s], first = 0, wrong = 0;
            char name[TH_NAME_MAX];
            snprintf(name, sizeof name, "pingpong/%d/n%zu", q, n);
            float *buf = th_xmalloc(n * sizeof(float) + 1);
            tnt_result_t rc = TNT_SUCCESS;
            if (rank != 0 && rank != q) {
                /* not in this pair: reports the case all the same */
            } else if (rank == 0) {
                float *out = filled(n, 0, q, 5, (int)s);
                rc = tnt_send(comm, out, n, TNT_F32, q, 5);
                if (rc == TNT_SUCCESS)
                    rc = tnt_recv(comm, buf, n, TNT_F32, q, 6);
                if (rc == TNT_SUCCESS)
                    wrong = wrong_in(buf, n, q, 0, 6, (int)s, &first);
                free(out);
            } else {
                rc = tnt_recv(comm, buf, n, TNT_F32, 0, 5);
                if (rc == TNT_SUCCESS)
                    wrong = wrong_in(buf, n, 0, q, 5, (int)s, &first);
                float *out = filled(n, q, 0, 6, (int)s);
                if (rc == TNT_SUCCESS)
                    rc = tnt_send(comm, out, n, TNT_F32, 0, 6);
                free(out);
            }
            th_report_check(rep, name, rc, wrong, first, NULL, 0);
            free(buf);
        }
}

/* Every rank sends to rank + 1 and receives from rank - 1 at once
 * (isend, then a blocking recv: large messages wait for the receive). */
static void ring_shift(th_report_t *rep, tnt_comm_t comm, int rank, int p)
{
    for (size_t s = 0; s < N_SIZES; s++) {
        size_t n = k_sizes[s], first = 0, wrong = 0;
        int to = (rank + 1) % p, from = (rank + p - 1) % p;
        char name[TH_NAME_MAX];
        snprintf(name, sizeof name, "ring/n%zu", n);
        float *out = filled(n, rank, to, 9, (int)s);
        float *in = th_xmalloc(n * sizeof(float) + 1);
        tnt_request_t r;
        tnt_result_t rc = tnt_isend(comm, out, n, TNT_F32, to, 9, &r);
        if (rc == TNT_SUCCESS) {
            tnt_result_t rr = tnt_recv(comm, in, n, TNT_F32, from, 9);
            rc = tnt_wait(r);
            tnt_request_free(r);
            if (rc == TNT_SUCCESS)
                rc = rr;
        }
        if (rc == TNT_SUCCESS)
            wrong = wrong_in(in, n, from, rank, 9, (int)s, &first);
        th_report_check(rep, name, rc, wrong, first, NULL, 0);
        free(out);
        free(in);
    }
}

/* K messages of one tag to every peer and K from each, all in flight
 * (receives posted in reverse peer order), then waited for in reverse:
 * each arrives in its sending order. Sizes vary by message, some past
 * the eager window. */
#define K_INFLIGHT 12
static size_t inflight_n(int k) { return k % 4 == 3 ? 70001 : (size_t)k * 13; }

static void many_in_flight(th_report_t *rep, tnt_comm_t comm, int rank,
                           int p)
{
    int nreq = 2 * (p - 1) * K_INFLIGHT;
    tnt_request_t *r = calloc((size_t)nreq, sizeof(*r));
    float **bufs = calloc((size_t)nreq, sizeof(*bufs));
    int m = 0;
    tnt_result_t rc = TNT_SUCCESS;
    for (int q = p - 1; q >= 0 && rc == TNT_SUCCESS; q--)
        for (int k = 0; q != rank && k < K_INFLIGHT && rc == TNT_SUCCESS;
             k++) {
            size_t n = inflight_n(k);
            bufs[m] = th_xmalloc(n * sizeof(float) + 1);
            rc = tnt_irecv(comm, bufs[m], n, TNT_F32, q, 3, &r[m]);
            m++;
        }
    for (int q = 0; q < p && rc == TNT_SUCCESS; q++)
        for (int k = 0; q != rank && k < K_INFLIGHT && rc == TNT_SUCCESS;
             k++) {
            bufs[m] = filled(inflight_n(k), rank, q, 3, k);
            rc = tnt_isend(comm, bufs[m], inflight_n(k), TNT_F32, q, 3,
                           &r[m]);
            m++;
        }
    for (int i = m - 1; i >= 0; i--)
        if (r[i]) {
            tnt_result_t w = tnt_wait(r[i]);
            if (rc == TNT_SUCCESS)
                rc = w;
            tnt_request_free(r[i]);
        }
    size_t wrong = 0, first = 0;
    int i = 0;
    for (int q = p - 1; q >= 0 && rc == TNT_SUCCESS; q--)
        for (int k = 0; q != rank && k < K_INFLIGHT; k++, i++)
            wrong += wrong_in(bufs[i], inflight_n(k), q, rank, 3, k, &first);
    th_report_check(rep, "inflight", rc, wrong, first, NULL, 0);
    for (int j = 0; j < m; j++)
        free(bufs[j]);
    free(bufs);
    free(r);
}

/* Rank 0 sends tags 1, 2, 3 (two messages each) to rank 1, which
 * receives tag 3 first, then 2, then 1: tags are independent, and each
 * tag's two messages come in order. */
static void tags_out_of_order(th_report_t *rep, tnt_comm_t comm, int rank)
{
    tnt_result_t rc = TNT_SUCCESS;
    size_t wrong = 0, first = 0;
    if (rank == 0) {
        for (int tag = 1; tag <= 3 && rc == TNT_SUCCESS; tag++)
            for (int k = 0; k < 2 && rc == TNT_SUCCESS; k++) {
                size_t n = (size_t)(tag * 10 + k);
                float *out = filled(n, 0, 1, tag, k);
                rc = tnt_send(comm, out, n, TNT_F32, 1, tag);
                free(out);
            }
    } else if (rank == 1) {
        for (int tag = 3; tag >= 1 && rc == TNT_SUCCESS; tag--)
            for (int k = 0; k < 2 && rc == TNT_SUCCESS; k++) {
                size_t n = (size_t)(tag * 10 + k);
                float *in = th_xmalloc(n * sizeof(float));
                rc = tnt_recv(comm, in, n, TNT_F32, 0, tag);
                if (rc == TNT_SUCCESS)
                    wrong += wrong_in(in, n, 0, 1, tag, k, &first);
                free(in);
            }
    }
    th_report_check(rep, "tags", rc, wrong, first, NULL, 0);
}

/* Sends and receives between allreduces and broadcasts, posted on each
 * rank at different points: the collectives' numbering is untouched. */
static void interleaved(th_report_t *rep, tnt_comm_t comm, int rank, int p)
{
    int to = (rank + 1) % p, from = (rank + p - 1) % p;
    size_t n = 5000, first = 0, wrong = 0;
    float *out = filled(n, rank, to, 77, 0), *in = th_xmalloc(n * 4);
    float *ar = th_xmalloc(n * 4), *ar2 = th_xmalloc(n * 4);
    tnt_gen_fill(ar, n, TNT_F32, TNT_SUM, 1234, rank);
    tnt_gen_fill(ar2, n, TNT_F32, TNT_MAX, 4321, rank);
    tnt_request_t s, r;
    tnt_result_t rc;
    /* Even ranks post their receive before the collectives, odd ranks
     * after; sends go out before on odd ranks, between on even ones. */
    if (rank % 2) {
        rc = tnt_isend(comm, out, n, TNT_F32, to, 77, &s);
        if (rc == TNT_SUCCESS)
            rc = tnt_allreduce(comm, TNT_IN_PLACE, ar, n, TNT_F32, TNT_SUM);
        if (rc == TNT_SUCCESS)
            rc = tnt_irecv(comm, in, n, TNT_F32, from, 77, &r);
    } else {
        rc = tnt_irecv(comm, in, n, TNT_F32, from, 77, &r);
        if (rc == TNT_SUCCESS)
            rc = tnt_allreduce(comm, TNT_IN_PLACE, ar, n, TNT_F32, TNT_SUM);
        if (rc == TNT_SUCCESS)
            rc = tnt_isend(comm, out, n, TNT_F32, to, 77, &s);
    }
    if (rc == TNT_SUCCESS)
        rc = tnt_broadcast(comm, ar2, n, TNT_F32, p - 1);
    if (rc == TNT_SUCCESS) {
        tnt_result_t a = tnt_wait(r), b = tnt_wait(s);
        tnt_request_free(r);
        tnt_request_free(s);
        rc = a ? a : b;
    }
    if (rc == TNT_SUCCESS) {
        wrong += wrong_in(in, n, from, rank, 77, 0, &first);
        wrong += tnt_gen_check_allreduce(ar, 0, n, TNT_F32, TNT_SUM, 1234, p,
                                         &first);
        float *want = th_xmalloc(n * 4);
        tnt_gen_fill(want, n, TNT_F32, TNT_MAX, 4321, p - 1);
        wrong += memcmp(want, ar2, n * 4) != 0;
        free(want);
    }
    th_report_check(rep, "interleaved", rc, wrong, first, ar, n * 4);
    /* Collectives go on after it all. */
    rc = tnt_barrier(comm);
    th_report_check(rep, "barrier after", rc, 0, 0, NULL, 0);
    free(out);
    free(in);
    free(ar);
    free(ar2);
}

static int p2p_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)arg;
    ping_pong(rep, comm, rank, p);
    ring_shift(rep, comm, rank, p);
    many_in_flight(rep, comm, rank, p);
    tags_out_of_order(rep, comm, rank);
    interleaved(rep, comm, rank, p);
    tnt_stats_t st = TNT_STATS_INIT;
    tnt_result_t rc = tnt_comm_stats(comm, &st);
    th_report_expect(rep, "stats", rc == TNT_SUCCESS && st.p2p.calls > 0 &&
                         st.kind[TNT_STATS_ALLREDUCE].calls == 1 &&
                         st.kind[TNT_STATS_BROADCAST].calls == 1,
                     rc, "p2p %llu, allreduce %llu",
                     (unsigned long long)st.p2p.calls,
                     (unsigned long long)st.kind[TNT_STATS_ALLREDUCE].calls);
    return 0;
}

static void test_p2p(void)
{
    for (int k = 0; k < N_RANKS; k++) {
        if (th_quick() && k_ranks[k] == 8)
            continue;
        char name[64];
        snprintf(name, sizeof name, "p2p p=%d", k_ranks[k]);
        const char *env[] = {NULL};
        th_job_t job = {name, k_ranks[k], env, p2p_rank, NULL, 240, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* Rank 1 receives from rank 0 another count (small, or large: the RTS
 * carries it) or another dtype than rank 0 sends. */
typedef struct mm { size_t sn, rn; tnt_dtype_t rdt; const char *a, *b; } mm_t;

static int mismatch_rank(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    (void)p;
    const mm_t *m = arg;
    size_t cap = (m->sn > m->rn ? m->sn : m->rn) * 8 + 8;
    void *buf = th_xmalloc(cap);
    memset(buf, 0, cap);
    tnt_result_t rc = TNT_SUCCESS;
    if (rank == 0)
        rc = tnt_send(comm, buf, m->sn, TNT_F32, 1, 4);
    else if (rank == 1)
        rc = tnt_recv(comm, buf, m->rn, m->rdt, 0, 4);
    char msg[400];
    snprintf(msg, sizeof msg, "%s", rc ? tnt_last_error() : "");
    if (rc == TNT_SUCCESS) { /* the sender of a small message: next call */
        rc = tnt_barrier(comm);
        snprintf(msg, sizeof msg, "%s", rc ? tnt_last_error() : "");
    }
    int ok = rc == TNT_ERR_MISMATCH && strstr(msg, m->a) &&
             strstr(msg, m->b);
    th_report_expect(rep, "mismatch", ok, rc, "rank %d: %d '%s'", rank, rc,
                     msg);
    free(buf);
    return 0;
}

static void test_p2p_mismatch(void)
{
    static const mm_t cases[] = {
        {100, 101, TNT_F32, "sends 100 elements", "receives 101"},
        {300000, 299999, TNT_F32, "sends 300000", "receives 299999"},
        {100, 100, TNT_I32, "dtype=f32", "dtype=i32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "p2p mismatch %zu", i);
        const char *env[] = {"TNT_TIMEOUT=20", NULL};
        th_job_t job = {name, 2, env, mismatch_rank, (void *)&cases[i], 60,
                        0, 0};
        th_run_job(&job, NULL);
    }
}

/* A receive whose send never comes: the deadline (TNT_TIMEOUT=2), with a
 * message that names the send/recv and the peer, not a hang. */
static int deadline_rank(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    (void)p;
    (void)arg;
    float x[4];
    tnt_result_t rc = TNT_ERR_TIMEOUT;
    const char *msg = "";
    if (rank == 1) {
        rc = tnt_recv(comm, x, 4, TNT_F32, 0, 8);
        msg = tnt_last_error();
    } else {
        th_sleep(5.0); /* rank 1 fails meanwhile */
    }
    int ok = (rc == TNT_ERR_TIMEOUT && strstr(msg, "send/recv")) ||
             rank == 0;
    th_report_expect(rep, "deadline", ok, rc, "rank %d: %d '%s'", rank, rc,
                     msg);
    return 0;
}

static void test_p2p_deadline(void)
{
    const char *env[] = {"TNT_TIMEOUT=2", NULL};
    th_job_t job = {"p2p deadline", 2, env, deadline_rank, NULL, 60, 0, 0};
    th_run_job(&job, NULL);
}

/* Bad arguments on a world of two: clear errors, and the job goes on. */
static int bad_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)arg;
    float x[4] = {0};
    tnt_request_t r;
    int other = (rank + 1) % p, ok = 1;
    const tnt_result_t IA = TNT_ERR_INVALID_ARG;
    ok &= tnt_send(comm, x, 4, TNT_F32, rank, 0) == IA &&
          strstr(tnt_last_error(), "this rank");
    ok &= tnt_send(comm, x, 4, TNT_F32, p, 0) == IA &&
          strstr(tnt_last_error(), "not a rank");
    ok &= tnt_recv(comm, x, 4, TNT_F32, -2, 0) == IA;
    ok &= tnt_send(comm, x, 4, TNT_F32, other, -1) == IA &&
          strstr(tnt_last_error(), "tag -1");
    ok &= tnt_send(comm, x, 4, TNT_F32, other, TNT_TAG_MAX + 1) == IA;
    ok &= tnt_recv(comm, NULL, 4, TNT_F32, other, 0) == IA &&
          strstr(tnt_last_error(), "tnt_recv: buffer is NULL");
    ok &= tnt_isend(comm, x, SIZE_MAX / 2, TNT_F32, other, 0, &r) == IA &&
          strstr(tnt_last_error(), "tnt_isend:");
    ok &= tnt_irecv(comm, x, 4, (tnt_dtype_t)77, other, 0, &r) == IA;
    ok &= tnt_irecv(comm, x, 4, TNT_F32, other, 0, NULL) == IA;
    ok &= tnt_send(NULL, x, 4, TNT_F32, other, 0) < 0;
    th_report_expect(rep, "bad args", ok, 0, "rank %d: last '%s'", rank,
                     tnt_last_error());
    /* Still healthy: one exchange at TNT_TAG_MAX, then a barrier. */
    tnt_result_t rc = rank == 0
                          ? tnt_send(comm, x, 4, TNT_F32, 1, TNT_TAG_MAX)
                          : tnt_recv(comm, x, 4, TNT_F32, 0, TNT_TAG_MAX);
    if (rc == TNT_SUCCESS)
        rc = tnt_barrier(comm);
    th_report_check(rep, "after", rc, 0, 0, NULL, 0);
    return 0;
}

static void test_p2p_bad_args(void)
{
    const char *env[] = {NULL};
    th_job_t job = {"p2p bad args", 2, env, bad_rank, NULL, 60, 0, 0};
    th_run_job(&job, NULL);
}

static const th_test_def_t k_tests[] = {
    {"p2p", "exchange", test_p2p},
    {"p2p", "mismatch", test_p2p_mismatch},
    {"p2p", "bad_args", test_p2p_bad_args},
    {"p2p", "deadline", test_p2p_deadline},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
