/*
 * The rooted and all-to-all collectives (reduce, gather, scatter,
 * alltoall, alltoallv) run by real forked ranks (harness.h) at p = 1, 2,
 * 3, 5, 7, 8, element counts 0, 1, primes and counts not divisible by p,
 * every root. Every rank checks every element it receives against a
 * reference computed independently (bench/datagen.c gives every rank's
 * input from (seed, rank, index)), and that what it must not write
 * stays as it was: a non-root's receive buffer, the gaps between an
 * alltoallv's blocks, the send buffers.
 *
 * A reduce must give bitwise what tnt_allreduce gives for the same
 * inputs (collectives/reduce_root.c): the "same bits" cases feed both
 * random-looking floats whose sums round (so the order of reduction
 * shows) at sizes where the allreduce picks each of its algorithms, and
 * compare the root's result with the allreduce's bit for bit. The shm
 * pass (TNT_TRANSPORT=shm) compares with the on-host allreduces.
 *
 * Usage: test_rooted [suite [test]].
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "harness.h"

static const int k_ranks[] = {1, 2, 3, 5, 7, 8};
#define N_RANKS (int)(sizeof k_ranks / sizeof k_ranks[0])

/* As in test_collectives: TNT_TEST_QUICK=1 (the shm pass) leaves out
 * p = 7, 2 keeps 1, 2, 3 and 5. */
static int skip_p(int p)
{
    int q = th_quick();
    return (q >= 1 && p == 7) || (q >= 2 && p == 8);
}

static const tnt_dtype_t k_all_dtypes[] = {
    TNT_F32, TNT_F64, TNT_F16, TNT_BF16, TNT_I8,
    TNT_U8,  TNT_I32, TNT_U32, TNT_I64,  TNT_U64};
#define N_DTYPES (sizeof k_all_dtypes / sizeof k_all_dtypes[0])
static const tnt_op_t k_all_ops[] = {TNT_SUM, TNT_AVG, TNT_PROD, TNT_MIN,
                                     TNT_MAX};
/* One dtype of each element size, for the data-movement collectives. */
static const tnt_dtype_t k_sizes_dtypes[] = {TNT_I8, TNT_F16, TNT_F32,
                                             TNT_U64};

static uint64_t seed_of(const char *name)
{
    return tnt_gen_hash(name, strlen(name));
}

/* Elements of got that differ (bitwise) from want; first index + base. */
static size_t cmp_elems(const void *got, const void *want, size_t count,
                        size_t esize, size_t base, size_t *first)
{
    const unsigned char *g = got, *w = want;
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp(g + i * esize, w + i * esize, esize) != 0 &&
            wrong++ == 0)
            *first = base + i;
    return wrong;
}

/* Counts: 0, 1, primes, and ones that p does not divide. */
static size_t case_counts(int p, size_t *c)
{
    size_t n = 0;
    c[n++] = 0;
    c[n++] = 1;
    c[n++] = 7;
    c[n++] = 31;
    c[n++] = (size_t)p * 13 + 1;
    c[n++] = 1009;
    return n;
}

/* What the calls of a job added up to, checked against tnt_comm_stats. */
typedef struct tally {
    uint64_t reduce, gather, scatter, alltoall;
} tally_t;

/* ---- reduce against the datagen reference ------------------------------- */

/* mode 0: separate buffers, non-roots pass a receive buffer (which must
 * stay untouched); 1: in place at the root (TNT_IN_PLACE), NULL receive
 * buffer elsewhere; 2: sendbuf == recvbuf at the root. */
static void reduce_case(th_report_t *rep, tnt_comm_t comm, int rank, int p,
                        tnt_dtype_t dt, tnt_op_t op, size_t count, int root,
                        int mode, tally_t *t)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "reduce/%s/%s/n%zu/root%d/m%d",
             tnt_dtype_name(dt), tnt_op_name(op), count, root, mode);
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt), bytes = count * es;
    unsigned char *send = th_xmalloc(bytes), *recv = th_xmalloc(bytes);
    int is_root = rank == root, in_place = is_root && mode > 0;
    tnt_gen_fill(in_place ? recv : send, count, dt, op, seed, rank);
    if (!in_place)
        tnt_gen_poison(recv, count, dt);
    uint64_t send_hash = tnt_gen_hash(send, bytes);
    uint64_t recv_hash = tnt_gen_hash(recv, bytes);
    const void *sb = !in_place ? send : mode == 1 ? TNT_IN_PLACE : recv;
    void *rb = is_root || mode == 0 ? recv : NULL;
    tnt_result_t rc = tnt_reduce(comm, sb, rb, count, dt, op, root);
    t->reduce++;
    size_t wrong = 0, first = 0;
    const char *problem = NULL;
    if (rc == TNT_SUCCESS && is_root)
        wrong = tnt_gen_check_allreduce(recv, 0, count, dt, op, seed, p,
                                        &first);
    if (rc == TNT_SUCCESS && !is_root && tnt_gen_hash(recv, bytes) !=
                                             recv_hash)
        problem = "a non-root's receive buffer was written";
    if (rc == TNT_SUCCESS && !in_place && tnt_gen_hash(send, bytes) !=
                                              send_hash)
        problem = "the send buffer was modified";
    if (problem)
        th_report_expect(rep, name, 0, rc, "%s", problem);
    else
        th_report_check(rep, name, rc, wrong, first, NULL, 0);
    free(send);
    free(recv);
}

/* ---- reduce against tnt_allreduce, bit for bit -------------------------- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Random-looking finite values whose sums round in every float dtype:
 * f32/f64 in [-1, 1); bf16 the top half of such an f32; f16 with an
 * exponent of 2^-5 .. 2^5. */
static void fill_rounding(void *buf, size_t count, tnt_dtype_t dt,
                          uint64_t seed, int rank)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t x = mix(seed ^ ((uint64_t)(uint32_t)rank << 40) ^
                         (uint64_t)i * 0x9e3779b97f4a7c15ULL);
        double v = (double)(x >> 11) * 0x1p-52 - 1.0;
        float f = (float)v;
        uint32_t fb;
        memcpy(&fb, &f, 4);
        uint16_t h;
        switch (dt) {
        case TNT_F32: ((float *)buf)[i] = f; break;
        case TNT_F64: ((double *)buf)[i] = v; break;
        case TNT_BF16:
            h = (uint16_t)(fb >> 16);
            memcpy((unsigned char *)buf + 2 * i, &h, 2);
            break;
        default: /* TNT_F16: sign, exponent 10..20, mantissa */
            h = (uint16_t)(((x >> 1) & 0x8000) |
                           ((10 + (x >> 20) % 11) << 10) | (x & 0x3ff));
            memcpy((unsigned char *)buf + 2 * i, &h, 2);
            break;
        }
    }
}

static void same_bits_case(th_report_t *rep, tnt_comm_t comm, int rank,
                           tnt_dtype_t dt, tnt_op_t op, size_t count,
                           int root, int in_place, tally_t *t)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "samebits/%s/%s/n%zu/root%d%s",
             tnt_dtype_name(dt), tnt_op_name(op), count, root,
             in_place ? "/inplace" : "");
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt), bytes = count * es;
    unsigned char *send = th_xmalloc(bytes), *ar = th_xmalloc(bytes);
    unsigned char *red = th_xmalloc(bytes);
    fill_rounding(send, count, dt, seed, rank);
    tnt_result_t rc = tnt_allreduce(comm, send, ar, count, dt, op);
    const void *sb = send;
    if (in_place && rank == root) {
        memcpy(red, send, bytes);
        sb = TNT_IN_PLACE;
    }
    if (rc == TNT_SUCCESS)
        rc = tnt_reduce(comm, sb, rank == root ? red : NULL, count, dt, op,
                        root);
    t->reduce++;
    size_t wrong = 0, first = 0;
    if (rc == TNT_SUCCESS && rank == root)
        wrong = cmp_elems(red, ar, count, es, 0, &first);
    /* The allreduce's result is replicated: its hash is compared. */
    th_report_check(rep, name, rc, wrong, first, ar, bytes);
    free(send);
    free(ar);
    free(red);
}

/* ---- gather and scatter ------------------------------------------------- */

/* in_place: TNT_IN_PLACE at the root (gather: as sendbuf, the root's
 * block already in place; scatter: as recvbuf). Non-roots pass NULL for
 * the buffer they do not use. */
static void gather_case(th_report_t *rep, tnt_comm_t comm, int rank, int p,
                        tnt_dtype_t dt, size_t count, int root, int in_place,
                        tally_t *t)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "gather/%s/n%zu/root%d%s",
             tnt_dtype_name(dt), count, root, in_place ? "/inplace" : "");
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt), bytes = count * es;
    int is_root = rank == root;
    in_place = in_place && is_root;
    unsigned char *send = th_xmalloc(bytes);
    unsigned char *recv = is_root ? th_xmalloc(bytes * (size_t)p) : NULL;
    unsigned char *want = th_xmalloc(bytes * (size_t)p);
    for (int q = 0; q < p; q++)
        tnt_gen_fill(want + (size_t)q * bytes, count, dt, TNT_SUM, seed, q);
    tnt_gen_fill(send, count, dt, TNT_SUM, seed, rank);
    if (is_root) {
        tnt_gen_poison(recv, count * (size_t)p, dt);
        if (in_place)
            memcpy(recv + (size_t)rank * bytes, send, bytes);
    }
    uint64_t send_hash = tnt_gen_hash(send, bytes);
    tnt_result_t rc = tnt_gather(comm, in_place ? TNT_IN_PLACE : send, recv,
                                 count, dt, root);
    t->gather++;
    size_t wrong = 0, first = 0;
    if (rc == TNT_SUCCESS && is_root)
        wrong = cmp_elems(recv, want, count * (size_t)p, es, 0, &first);
    if (rc == TNT_SUCCESS && tnt_gen_hash(send, bytes) != send_hash)
        th_report_expect(rep, name, 0, rc, "the send buffer was modified");
    else
        th_report_check(rep, name, rc, wrong, first, NULL, 0);
    free(send);
    free(recv);
    free(want);
}

static void scatter_case(th_report_t *rep, tnt_comm_t comm, int rank, int p,
                         tnt_dtype_t dt, size_t count, int root,
                         int in_place, tally_t *t)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "scatter/%s/n%zu/root%d%s",
             tnt_dtype_name(dt), count, root, in_place ? "/inplace" : "");
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt), bytes = count * es;
    int is_root = rank == root;
    in_place = in_place && is_root;
    unsigned char *send = is_root ? th_xmalloc(bytes * (size_t)p) : NULL;
    unsigned char *recv = th_xmalloc(bytes), *want = th_xmalloc(bytes);
    /* Block q of the root's buffer is what rank q's reference says. */
    for (int q = 0; is_root && q < p; q++)
        tnt_gen_fill(send + (size_t)q * bytes, count, dt, TNT_SUM, seed, q);
    tnt_gen_fill(want, count, dt, TNT_SUM, seed, rank);
    tnt_gen_poison(recv, count, dt);
    uint64_t send_hash = is_root ? tnt_gen_hash(send, bytes * (size_t)p) : 0;
    tnt_result_t rc = tnt_scatter(comm, send,
                                  in_place ? (void *)TNT_IN_PLACE : recv,
                                  count, dt, root);
    t->scatter++;
    size_t wrong = 0, first = 0;
    /* In place the root's block stays in its send buffer: checked by the
     * send buffer's hash; its receive buffer must stay poisoned. */
    if (rc == TNT_SUCCESS && !in_place)
        wrong = cmp_elems(recv, want, count, es, 0, &first);
    const char *problem = NULL;
    if (rc == TNT_SUCCESS && is_root &&
        tnt_gen_hash(send, bytes * (size_t)p) != send_hash)
        problem = "the root's send buffer was modified";
    if (rc == TNT_SUCCESS && in_place) {
        tnt_gen_poison(want, count, dt);
        if (memcmp(recv, want, bytes) != 0)
            problem = "in place, the root's receive buffer was written";
    }
    if (problem)
        th_report_expect(rep, name, 0, rc, "%s", problem);
    else
        th_report_check(rep, name, rc, wrong, first, NULL, 0);
    free(send);
    free(recv);
    free(want);
}

/* ---- alltoall and alltoallv -------------------------------------------- */

/* The seed of the block rank i sends to rank j: its values are
 * tnt_gen_fill(seed_ij, rank i). */
static uint64_t block_seed(uint64_t seed, int to)
{
    return seed + (uint64_t)to * 0x9e3779b97f4a7c15ULL;
}

static void alltoall_case(th_report_t *rep, tnt_comm_t comm, int rank,
                          int p, tnt_dtype_t dt, size_t count, int nb,
                          tally_t *t)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "alltoall/%s/n%zu%s", tnt_dtype_name(dt),
             count, nb ? "/nb" : "");
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt), bytes = count * es, all = bytes * p;
    unsigned char *send = th_xmalloc(all), *recv = th_xmalloc(all);
    unsigned char *want = th_xmalloc(all);
    for (int q = 0; q < p; q++) {
        tnt_gen_fill(send + (size_t)q * bytes, count, dt, TNT_SUM,
                     block_seed(seed, q), rank);
        tnt_gen_fill(want + (size_t)q * bytes, count, dt, TNT_SUM,
                     block_seed(seed, rank), q);
    }
    tnt_gen_poison(recv, count * (size_t)p, dt);
    uint64_t send_hash = tnt_gen_hash(send, all);
    tnt_result_t rc;
    if (nb) {
        tnt_request_t req;
        rc = tnt_ialltoall(comm, send, recv, count, dt, &req);
        if (rc == TNT_SUCCESS) {
            rc = tnt_wait(req);
            tnt_request_free(req);
        }
    } else {
        rc = tnt_alltoall(comm, send, recv, count, dt);
    }
    t->alltoall++;
    size_t wrong = 0, first = 0;
    if (rc == TNT_SUCCESS)
        wrong = cmp_elems(recv, want, count * (size_t)p, es, 0, &first);
    if (rc == TNT_SUCCESS && tnt_gen_hash(send, all) != send_hash)
        th_report_expect(rep, name, 0, rc, "the send buffer was modified");
    else
        th_report_check(rep, name, rc, wrong, first, NULL, 0);
    free(send);
    free(recv);
    free(want);
}

/* Elements rank i sends rank j in alltoallv case `v`: uneven, zero for
 * some pairs (the own block included, in some cases), a large one. */
static size_t vcount(int v, int i, int j, int p)
{
    unsigned h = (unsigned)(i * 31 + j * 17 + v * 7);
    if (h % 4 == 0)
        return 0;
    if (v == 2 && i == 0 && j == p - 1)
        return 70001; /* past the eager window: flow control */
    return (size_t)(h % 23) * (size_t)(v + 1) + (size_t)(i == j);
}

static void alltoallv_case(th_report_t *rep, tnt_comm_t comm, int rank,
                           int p, tnt_dtype_t dt, int v, tally_t *t)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "alltoallv/%s/v%d", tnt_dtype_name(dt), v);
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt);
    size_t *sc = th_xmalloc(4 * (size_t)p * sizeof(size_t));
    size_t *sd = sc + p, *rc_ = sc + 2 * p, *rd = sc + 3 * p;
    /* Send blocks in rank order after a gap of 2; receive blocks packed
     * in reverse rank order with gaps of 3, which must stay poisoned. */
    size_t stot = 2, rtot = 3;
    for (int q = 0; q < p; q++) {
        sc[q] = vcount(v, rank, q, p);
        sd[q] = stot;
        stot += sc[q];
    }
    for (int q = p - 1; q >= 0; q--) {
        rc_[q] = vcount(v, q, rank, p);
        rd[q] = rtot;
        rtot += rc_[q] + 3;
    }
    unsigned char *send = th_xmalloc(stot * es), *recv = th_xmalloc(rtot * es);
    unsigned char *want = th_xmalloc(rtot * es);
    tnt_gen_poison(send, stot, dt);
    tnt_gen_poison(want, rtot, dt);
    for (int q = 0; q < p; q++) {
        tnt_gen_fill(send + sd[q] * es, sc[q], dt, TNT_SUM,
                     block_seed(seed, q), rank);
        tnt_gen_fill(want + rd[q] * es, rc_[q], dt, TNT_SUM,
                     block_seed(seed, rank), q);
    }
    tnt_gen_poison(recv, rtot, dt);
    uint64_t send_hash = tnt_gen_hash(send, stot * es);
    tnt_result_t rc = tnt_alltoallv(comm, send, sc, sd, recv, rc_, rd, dt);
    t->alltoall++;
    size_t wrong = 0, first = 0;
    if (rc == TNT_SUCCESS)
        wrong = cmp_elems(recv, want, rtot, es, 0, &first);
    if (rc == TNT_SUCCESS && tnt_gen_hash(send, stot * es) != send_hash)
        th_report_expect(rep, name, 0, rc, "the send buffer was modified");
    else
        th_report_check(rep, name, rc, wrong, first, NULL, 0);
    free(sc);
    free(send);
    free(recv);
    free(want);
}

/* ---- several at once ----------------------------------------------------- */

/* ireduce, igather, iscatter, ialltoall and an iallreduce in flight
 * together, waited for in reverse order. */
static void nonblocking_case(th_report_t *rep, tnt_comm_t comm, int rank,
                             int p, tally_t *t)
{
    const char *name = "nonblocking/mixed";
    uint64_t seed = seed_of(name);
    size_t n = 1000, b = n * 4;
    float *rs = th_xmalloc(b), *rr = th_xmalloc(b), *gs = th_xmalloc(b);
    float *gr = th_xmalloc(b * p), *ss = th_xmalloc(b * p);
    float *sr = th_xmalloc(b), *as = th_xmalloc(b * p);
    float *ar = th_xmalloc(b * p), *xs = th_xmalloc(b), *xr = th_xmalloc(b);
    int root = p - 1;
    tnt_gen_fill(rs, n, TNT_F32, TNT_SUM, seed, rank);
    tnt_gen_fill(gs, n, TNT_F32, TNT_SUM, seed + 1, rank);
    for (int q = 0; q < p; q++) {
        tnt_gen_fill(ss + (size_t)q * n, n, TNT_F32, TNT_SUM, seed + 2, q);
        tnt_gen_fill(as + (size_t)q * n, n, TNT_F32, TNT_SUM,
                     block_seed(seed + 3, q), rank);
    }
    tnt_gen_fill(xs, n, TNT_F32, TNT_MAX, seed + 4, rank);
    tnt_request_t r[5] = {0};
    tnt_result_t rc = tnt_ireduce(comm, rs, rr, n, TNT_F32, TNT_SUM, root,
                                  &r[0]);
    if (rc == TNT_SUCCESS)
        rc = tnt_igather(comm, gs, gr, n, TNT_F32, 0, &r[1]);
    if (rc == TNT_SUCCESS)
        rc = tnt_iscatter(comm, ss, sr, n, TNT_F32, root / 2, &r[2]);
    if (rc == TNT_SUCCESS)
        rc = tnt_ialltoall(comm, as, ar, n, TNT_F32, &r[3]);
    if (rc == TNT_SUCCESS)
        rc = tnt_iallreduce(comm, xs, xr, n, TNT_F32, TNT_MAX, &r[4]);
    for (int i = 4; i >= 0; i--)
        if (r[i]) {
            tnt_result_t w = tnt_wait(r[i]);
            if (rc == TNT_SUCCESS)
                rc = w;
            tnt_request_free(r[i]);
        }
    t->reduce++;
    t->gather++;
    t->scatter++;
    t->alltoall++;
    size_t wrong = 0, first = 0;
    if (rc == TNT_SUCCESS) {
        if (rank == root)
            wrong += tnt_gen_check_allreduce(rr, 0, n, TNT_F32, TNT_SUM,
                                             seed, p, &first);
        float *w = th_xmalloc(b * p);
        for (int q = 0; rank == 0 && q < p; q++)
            tnt_gen_fill(w + (size_t)q * n, n, TNT_F32, TNT_SUM, seed + 1, q);
        if (rank == 0)
            wrong += cmp_elems(gr, w, n * p, 4, 0, &first);
        tnt_gen_fill(w, n, TNT_F32, TNT_SUM, seed + 2, rank);
        wrong += cmp_elems(sr, w, n, 4, 0, &first);
        for (int q = 0; q < p; q++)
            tnt_gen_fill(w + (size_t)q * n, n, TNT_F32, TNT_SUM,
                         block_seed(seed + 3, rank), q);
        wrong += cmp_elems(ar, w, n * p, 4, 0, &first);
        wrong += tnt_gen_check_allreduce(xr, 0, n, TNT_F32, TNT_MAX,
                                         seed + 4, p, &first);
        free(w);
    }
    th_report_check(rep, name, rc, wrong, first, xr, b);
    free(rs); free(rr); free(gs); free(gr); free(ss);
    free(sr); free(as); free(ar); free(xs); free(xr);
}

/* ---- the jobs ------------------------------------------------------------- */

static void check_stats(th_report_t *rep, tnt_comm_t comm, const tally_t *t)
{
    tnt_stats_t s = TNT_STATS_INIT;
    tnt_result_t rc = tnt_comm_stats(comm, &s);
    int ok = rc == TNT_SUCCESS && s.kind[TNT_STATS_REDUCE].calls == t->reduce &&
             s.kind[TNT_STATS_GATHER].calls == t->gather &&
             s.kind[TNT_STATS_SCATTER].calls == t->scatter &&
             s.alltoall.calls == t->alltoall;
    th_report_expect(rep, "stats", ok, rc, "counted reduce %llu gather %llu "
                     "scatter %llu alltoall %llu; called %llu %llu %llu %llu",
                     (unsigned long long)s.kind[TNT_STATS_REDUCE].calls,
                     (unsigned long long)s.kind[TNT_STATS_GATHER].calls,
                     (unsigned long long)s.kind[TNT_STATS_SCATTER].calls,
                     (unsigned long long)s.alltoall.calls,
                     (unsigned long long)t->reduce,
                     (unsigned long long)t->gather,
                     (unsigned long long)t->scatter,
                     (unsigned long long)t->alltoall);
}

static int reduce_rank(tnt_comm_t comm, int rank, int p, void *arg,
                       th_report_t *rep)
{
    (void)arg;
    tally_t t = {0};
    size_t counts[8], nc = case_counts(p, counts);
    /* The full dtype x op matrix at roots 0 and p - 1; the roots between
     * with one dtype and op per mode. */
    for (size_t d = 0; d < N_DTYPES; d++)
        for (size_t o = 0; o < 5; o++)
            for (size_t c = 0; c < nc; c++)
                for (int root = 0; root < p; root++) {
                    int edge = root == 0 || root == p - 1;
                    if (!edge && (d != 0 || o != 0))
                        continue;
                    for (int mode = 0; mode < 3; mode++)
                        if (mode != 2 || (d == 0 && c == nc - 1))
                            reduce_case(rep, comm, rank, p, k_all_dtypes[d],
                                        k_all_ops[o], counts[c], root, mode,
                                        &t);
                }
    /* Sizes where the allreduce picks recursive doubling (1000 f32),
     * Rabenseifner (30011 f32: 117 KiB), the ring (600011 f32: 2.3 MiB);
     * on one host over shm the slots and the staged one. */
    static const tnt_dtype_t fdt[] = {TNT_F32, TNT_F64, TNT_F16, TNT_BF16};
    static const size_t sb_counts[] = {1, 1000, 30011, 600011};
    for (size_t d = 0; d < 4; d++)
        for (size_t c = 0; c < 4; c++) {
            if (c == 3 && d != 0)
                continue;
            for (int root = 0; root < p; root += (p > 3 ? 2 : 1)) {
                same_bits_case(rep, comm, rank, fdt[d], TNT_SUM,
                               sb_counts[c], root, root % 2, &t);
                if (c < 3)
                    same_bits_case(rep, comm, rank, fdt[d], TNT_AVG,
                                   sb_counts[c], root, 0, &t);
            }
        }
    check_stats(rep, comm, &t);
    return 0;
}

/* TNT_IN_PLACE is the root's alone: elsewhere a clear error, refused
 * before anything is posted (the job goes on). */
static void in_place_not_root(th_report_t *rep, tnt_comm_t comm, int rank,
                              int p)
{
    float x[4] = {0};
    int root = p - 1;
    tnt_result_t rc = TNT_SUCCESS;
    const char *msg = "";
    if (rank != root) {
        rc = tnt_reduce(comm, TNT_IN_PLACE, x, 4, TNT_F32, TNT_SUM, root);
        msg = tnt_last_error();
        if (rc == TNT_ERR_INVALID_ARG && strstr(msg, "root only")) {
            rc = tnt_gather(comm, TNT_IN_PLACE, NULL, 4, TNT_F32, root);
            msg = tnt_last_error();
        }
    }
    th_report_expect(rep, "in place off the root",
                     rank == root || (rc == TNT_ERR_INVALID_ARG &&
                                      strstr(msg, "root only")),
                     rc, "rank %d: %s", rank, msg);
}

static int move_rank(tnt_comm_t comm, int rank, int p, void *arg,
                     th_report_t *rep)
{
    (void)arg;
    tally_t t = {0};
    in_place_not_root(rep, comm, rank, p);
    size_t counts[8], nc = case_counts(p, counts);
    for (size_t d = 0; d < 4; d++)
        for (size_t c = 0; c < nc; c++) {
            for (int root = 0; root < p; root++)
                for (int ip = 0; ip < 2; ip++) {
                    gather_case(rep, comm, rank, p, k_sizes_dtypes[d],
                                counts[c], root, ip, &t);
                    scatter_case(rep, comm, rank, p, k_sizes_dtypes[d],
                                 counts[c], root, ip, &t);
                }
            alltoall_case(rep, comm, rank, p, k_sizes_dtypes[d], counts[c],
                          c % 2, &t);
        }
    /* Larger than the eager window per peer: flow control. */
    alltoall_case(rep, comm, rank, p, TNT_F32, 100003, 0, &t);
    gather_case(rep, comm, rank, p, TNT_F32, 100003, p / 2, 0, &t);
    scatter_case(rep, comm, rank, p, TNT_F32, 100003, p / 2, 0, &t);
    for (int v = 0; v < 3; v++)
        for (size_t d = 0; d < 4; d++)
            alltoallv_case(rep, comm, rank, p, k_sizes_dtypes[d], v, &t);
    nonblocking_case(rep, comm, rank, p, &t);
    check_stats(rep, comm, &t);
    return 0;
}

static void run_jobs(const char *what, th_rank_fn fn)
{
    for (int k = 0; k < N_RANKS; k++) {
        int p = k_ranks[k];
        if (skip_p(p))
            continue;
        char name[64];
        snprintf(name, sizeof name, "%s p=%d", what, p);
        const char *env[] = {NULL};
        th_job_t job = {name, p, env, fn, NULL, 300, 0, 0};
        th_run_job(&job, NULL);
    }
}

static void test_reduce(void) { run_jobs("reduce", reduce_rank); }
static void test_move(void) { run_jobs("gather/scatter/alltoall", move_rank); }

/* The forced allreduce algorithms, each with the reduce's bits. */
static int forced_rank(tnt_comm_t comm, int rank, int p, void *arg,
                       th_report_t *rep)
{
    (void)arg;
    tally_t t = {0};
    static const size_t counts[] = {0, 1, 7, 1009, 30011};
    for (size_t c = 0; c < 5; c++)
        for (int root = 0; root < p; root++) {
            same_bits_case(rep, comm, rank, TNT_F32, TNT_SUM, counts[c],
                           root, 0, &t);
            same_bits_case(rep, comm, rank, TNT_BF16, TNT_AVG, counts[c],
                           root, 1, &t);
        }
    return 0;
}

static void test_reduce_forced(void)
{
    static const char *const algos[] = {"ring", "rd", "rabenseifner",
                                        "oneshot", "direct", "tree"};
    static const int ps[] = {3, 5, 8};
    for (size_t a = 0; a < 6; a++)
        for (size_t k = 0; k < 3; k++) {
            if (skip_p(ps[k]))
                continue;
            char algo_env[64], seg_env[] = "TNT_SEGMENT_BYTES=4k";
            snprintf(algo_env, sizeof algo_env, "TNT_ALLREDUCE_ALGO=%s",
                     algos[a]);
            const char *env[] = {algo_env, seg_env, NULL};
            char name[96];
            snprintf(name, sizeof name, "reduce forced %s p=%d", algos[a],
                     ps[k]);
            th_job_t job = {name, ps[k], env, forced_rank, NULL, 300, 0, 0};
            th_run_job(&job, NULL);
        }
}

static const th_test_def_t k_tests[] = {
    {"rooted", "reduce", test_reduce},
    {"rooted", "reduce_forced", test_reduce_forced},
    {"rooted", "gather_scatter_alltoall", test_move},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
