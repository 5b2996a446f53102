/*
 * The collectives suite: allreduce, broadcast, barrier, allgather and
 * reduce-scatter run by real forked ranks over loopback (see harness.h),
 * swept over rank counts, element counts, dtypes, ops and algorithms
 * (forced through TNT_ALLREDUCE_ALGO / TNT_BCAST_ALGO, with
 * TNT_SEGMENT_BYTES shrunk in some jobs to reach the multi-segment
 * pipelined paths). Every rank checks every element of its result against
 * the reference computed independently by bench/datagen.c, and the
 * harness checks that all ranks' results are bitwise identical. Further
 * suites post several nonblocking collectives at once and complete them
 * in different orders, and check that float sums of random-looking data
 * are reproducible from run to run.
 *
 * Time: the whole program is meant to stay within a few minutes on a
 * 2-core machine, so the largest count (1<<22) runs for f32 (and bf16 at
 * small rank counts) only, and the full dtype x op matrix uses counts up
 * to 65537.
 *
 * Usage: test_collectives [suite [test]] runs one suite or one test.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "datagen.h"
#include "harness.h"

#define BIG_COUNT ((size_t)1 << 22)

static const int k_ranks[] = {1, 2, 3, 4, 5, 7, 8};
#define N_RANKS (int)(sizeof k_ranks / sizeof k_ranks[0])

/* Rank counts left out for time (the TCP pass of the normal build runs
 * them all): TNT_TEST_QUICK=1 (the shm pass) leaves out p = 7;
 * TNT_TEST_QUICK=2 (the sanitizer passes, where every rank runs several
 * times slower) keeps 1, 2, 3 and 5: one rank, a power of two, odd
 * counts with and without the pre/post step of recursive doubling;
 * TNT_TEST_QUICK=3 (the emulated soft-RoCE guest, where every packet is
 * handled in software) keeps 2 and 3. */
static int skip_p(int p)
{
    int q = th_quick();
    return (q >= 1 && p == 7) || (q >= 2 && (p == 4 || p == 8)) ||
           (q >= 3 && p != 2 && p != 3);
}

static const tnt_dtype_t k_all_dtypes[] = {
    TNT_F32, TNT_F64, TNT_F16, TNT_BF16, TNT_I8,
    TNT_U8,  TNT_I32, TNT_U32, TNT_I64,  TNT_U64};
static const tnt_op_t k_all_ops[] = {TNT_SUM, TNT_AVG, TNT_PROD, TNT_MIN,
                                     TNT_MAX};

/* ---- child-side helpers ---------------------------------------------------- */

/* Every case gets its own seed, derived from its name, so that data left
 * over from an earlier case can never pass for a correct result. */
static uint64_t seed_of(const char *name)
{
    return tnt_gen_hash(name, strlen(name));
}

static const char *mode_name(int mode)
{
    return mode == 0 ? "oop" : mode == 1 ? "inplace" : "alias";
}

/* Elements of got that differ (bitwise) from want; first index + base. */
static size_t cmp_elems(const void *got, const void *want, size_t count,
                        size_t esize, size_t base, size_t *first)
{
    const unsigned char *g = got, *w = want;
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
        if (memcmp(g + i * esize, w + i * esize, esize) != 0) {
            if (wrong++ == 0)
                *first = base + i;
        }
    }
    return wrong;
}

/* th_report_check, or a failed case with `problem` when the call itself
 * looked right but something else went wrong (send buffer modified). */
static void report(th_report_t *rep, const char *name, tnt_result_t rc,
                   size_t nwrong, size_t first, const void *buf,
                   size_t bytes, const char *problem)
{
    if (!problem || rc != TNT_SUCCESS || nwrong) {
        th_report_check(rep, name, rc, nwrong, first, buf, bytes);
        return;
    }
    th_case_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.ok = 0;
    c.has_hash = 1;
    c.hash = tnt_gen_hash(buf, bytes);
    snprintf(c.msg, sizeof c.msg, "%s", problem);
    th_report_case(rep, &c);
}

/* ---- allreduce ------------------------------------------------------------- */

/* A case's buffer: from malloc, or (shared) from tnt_mem_alloc, at an
 * offset that differs from rank to rank (rank elements in), so that the
 * peers' buffers lie at different places of their allocations. Every
 * rank allocates the same buffers in the same order (tnt_mem_alloc is
 * collective). */
typedef struct case_buf {
    void *base;
    unsigned char *p;
} case_buf_t;

static case_buf_t case_alloc(tnt_comm_t comm, int shared, int rank,
                             size_t bytes, size_t esize)
{
    case_buf_t b = {NULL, NULL};
    if (!shared) {
        b.base = b.p = th_xmalloc(bytes);
        return b;
    }
    size_t off = (size_t)rank * esize;
    b.base = th_xmem_alloc(comm, bytes + off);
    b.p = (unsigned char *)b.base + off;
    return b;
}

static void case_free(tnt_comm_t comm, int shared, case_buf_t *b)
{
    if (shared)
        tnt_mem_free(comm, b->base);
    else
        free(b->base);
}

/* mode: 0 out of place, 1 TNT_IN_PLACE, 2 sendbuf == recvbuf; shared:
 * buffers from tnt_mem_alloc (the mapped allreduce on one host). */
static void allreduce_case_mem(th_report_t *rep, tnt_comm_t comm, int rank,
                               int p, tnt_dtype_t dt, tnt_op_t op,
                               size_t count, int mode, int shared)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "allreduce/%s/%s/n%zu/%s%s",
             tnt_dtype_name(dt), tnt_op_name(op), count, mode_name(mode),
             shared ? "/shared" : "");
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt), bytes = count * es;
    case_buf_t rb = case_alloc(comm, shared, rank, bytes, es), sb0 = {0};
    void *recv = rb.p, *send = NULL;
    uint64_t send_hash = 0;

    if (mode == 0) {
        sb0 = case_alloc(comm, shared, rank, bytes, es);
        send = sb0.p;
        tnt_gen_fill(send, count, dt, op, seed, rank);
        tnt_gen_poison(recv, count, dt);
        send_hash = tnt_gen_hash(send, bytes);
    } else {
        tnt_gen_fill(recv, count, dt, op, seed, rank);
    }
    const void *sb = mode == 0 ? send : mode == 1 ? TNT_IN_PLACE : recv;
    tnt_result_t rc = tnt_allreduce(comm, sb, recv, count, dt, op);
    size_t first = 0, wrong = 0;
    if (rc == TNT_SUCCESS)
        wrong = tnt_gen_check_allreduce(recv, 0, count, dt, op, seed, p,
                                        &first);
    const char *problem = NULL;
    if (mode == 0 && tnt_gen_hash(send, bytes) != send_hash)
        problem = "the send buffer was modified by an out-of-place "
                  "allreduce";
    report(rep, name, rc, wrong, first, recv, bytes, problem);
    if (mode == 0)
        case_free(comm, shared, &sb0);
    case_free(comm, shared, &rb);
}

static void allreduce_case(th_report_t *rep, tnt_comm_t comm, int rank,
                           int p, tnt_dtype_t dt, tnt_op_t op, size_t count,
                           int mode)
{
    allreduce_case_mem(rep, comm, rank, p, dt, op, count, mode, 0);
}

typedef struct ar_spec {
    const size_t *counts; /* full dtype x op matrix at these counts */
    size_t ncounts;
    const tnt_dtype_t *dtypes;
    size_t ndtypes;
    const tnt_op_t *ops;
    size_t nops;
    int extra_counts;     /* f32 sum/i32 max at odd counts around p */
    int big;              /* 1<<22 elements: 0 none; 1 f32 sum out of
                             place; 2 also in place, and bf16 sum */
    int shared;           /* buffers from tnt_mem_alloc */
} ar_spec_t;

static int allreduce_rank(tnt_comm_t comm, int rank, int p, void *arg,
                          th_report_t *rep)
{
    const ar_spec_t *s = arg;
    for (size_t d = 0; d < s->ndtypes; d++)
        for (size_t o = 0; o < s->nops; o++)
            for (size_t c = 0; c < s->ncounts; c++)
                for (int mode = 0; mode < 3; mode++) {
                    /* The alias form is the same path as TNT_IN_PLACE
                     * once recognised: one dtype is enough. */
                    if (mode == 2 && s->dtypes[d] != TNT_F32)
                        continue;
                    allreduce_case_mem(rep, comm, rank, p, s->dtypes[d],
                                       s->ops[o], s->counts[c], mode,
                                       s->shared);
                }
    if (s->extra_counts) {
        /* Counts not divisible by p, primes, and counts around p and
         * around multiples of the ring's chunk boundaries. */
        size_t extra[] = {2, 5, 7, 31, 7919, (size_t)p - 1, (size_t)p + 1,
                          (size_t)p * 1024 - 1, (size_t)p * 1024 + 1,
                          (size_t)p * 4096 + 3};
        for (size_t c = 0; c < sizeof extra / sizeof extra[0]; c++) {
            allreduce_case_mem(rep, comm, rank, p, TNT_F32, TNT_SUM,
                               extra[c], 0, s->shared);
            allreduce_case_mem(rep, comm, rank, p, TNT_I32, TNT_MAX,
                               extra[c], 1, s->shared);
        }
    }
    if (s->big >= 1)
        allreduce_case_mem(rep, comm, rank, p, TNT_F32, TNT_SUM,
                           BIG_COUNT, 0, s->shared);
    if (s->big >= 2) {
        allreduce_case_mem(rep, comm, rank, p, TNT_F32, TNT_SUM,
                           BIG_COUNT, 1, s->shared);
        allreduce_case_mem(rep, comm, rank, p, TNT_BF16, TNT_SUM,
                           BIG_COUNT, 0, s->shared);
    }
    return 0;
}

static const size_t k_matrix_counts[] = {0, 1, 3, 100, 1000, 65537};

static void run_allreduce_jobs(const char *algo, const char *segment,
                               const ar_spec_t *base)
{
    for (int k = 0; k < N_RANKS; k++) {
        int p = k_ranks[k];
        if (skip_p(p))
            continue;
        char algo_env[64], seg_env[64];
        snprintf(algo_env, sizeof algo_env, "TNT_ALLREDUCE_ALGO=%s", algo);
        snprintf(seg_env, sizeof seg_env, "TNT_SEGMENT_BYTES=%s",
                 segment ? segment : "");
        const char *env[] = {algo_env, segment ? seg_env : NULL, NULL};
        ar_spec_t spec = *base;
        /* A 1<<22 case costs about a second with 7-8 ranks sharing two
         * cores (most of it filling and checking 16 MiB per rank): the
         * extra large cases run at small p only. */
        if (p > 5 && spec.big > 1)
            spec.big = 1;
        /* Quick mode: the 16 MiB cases at p <= 5 only. */
        if (th_quick() && p > 5)
            spec.big = 0;
        /* The schedules move bytes whatever the dtype (only the element
         * size matters) and the reduction kernels are the same function
         * pointers under every algorithm (tests/test_kernels.c checks
         * every dtype x op against the portable code), so at p >= 4 each
         * algorithm runs one dtype of each element size (f32, f16, i8,
         * u64) with the ops of distinct paths (plain, scaled by p,
         * order-insensitive); p <= 3 runs the whole matrix. */
        static const tnt_dtype_t quick_dts[] = {TNT_F32, TNT_F16, TNT_I8,
                                                TNT_U64};
        static const tnt_op_t quick_ops[] = {TNT_SUM, TNT_AVG, TNT_MAX};
        if (p >= 4 && spec.ndtypes > 4 && spec.nops > 3) {
            spec.dtypes = quick_dts;
            spec.ndtypes = 4;
            spec.ops = quick_ops;
            spec.nops = 3;
        }
        char name[160];
        snprintf(name, sizeof name, "allreduce p=%d algo=%s seg=%s", p, algo,
                 segment ? segment : "default");
        th_job_t job = {name, p, env, allreduce_rank, &spec, 240, 0, 0};
        th_run_job(&job, NULL);
    }
}

static void test_allreduce_auto(void)
{
    ar_spec_t s = {k_matrix_counts, 6, k_all_dtypes, 10, k_all_ops, 5, 1, 2, 0};
    run_allreduce_jobs("auto", NULL, &s);
}

static void test_allreduce_ring(void)
{
    ar_spec_t s = {k_matrix_counts, 6, k_all_dtypes, 10, k_all_ops, 5, 1, 1, 0};
    run_allreduce_jobs("ring", NULL, &s);
}

static void test_allreduce_rd(void)
{
    ar_spec_t s = {k_matrix_counts, 6, k_all_dtypes, 10, k_all_ops, 5, 1, 1, 0};
    run_allreduce_jobs("rd", NULL, &s);
}

static void test_allreduce_rab(void)
{
    ar_spec_t s = {k_matrix_counts, 6, k_all_dtypes, 10, k_all_ops, 5, 1, 1, 0};
    run_allreduce_jobs("rabenseifner", NULL, &s);
}

/* The double binary tree, forced: every p of the matrix (1, 2, 3, 4, 5,
 * 7, 8: odd p shift the second tree, even p mirror it), counts of one
 * segment and of several (65537 f32: 33 segments of 4 KiB a half). */
static void test_allreduce_tree(void)
{
    ar_spec_t s = {k_matrix_counts, 6, k_all_dtypes, 10, k_all_ops, 5, 1, 1, 0};
    run_allreduce_jobs("tree", NULL, &s);
}

/* The intra-host algorithms, forced: over shm (collectives_shm) they are
 * what auto picks on one host; over TCP they must still be right. */
static void test_allreduce_oneshot(void)
{
    ar_spec_t s = {k_matrix_counts, 6, k_all_dtypes, 10, k_all_ops, 5, 1, 1, 0};
    run_allreduce_jobs("oneshot", NULL, &s);
}

/* The algorithms on the memory run only where every rank is on one host
 * through shared memory: the collectives_shm run. */
static int shm_run(const char *algo)
{
    const char *tp = getenv("TNT_TRANSPORT");
    if (tp && strcmp(tp, "shm") == 0)
        return 1;
    fprintf(stderr, "  [%s: needs TNT_TRANSPORT=shm (the collectives_shm "
            "run), skipped]\n", algo);
    return 0;
}

/* The slots allreduce, forced: over shm only (it needs every rank on one
 * host through shared memory; auto picks it there up to 8 KiB). Up to
 * the largest size that fits a slot for every dtype (1024 x 8 bytes). */
static void test_allreduce_slots(void)
{
    if (!shm_run("slots"))
        return;
    static const size_t counts[] = {1, 2, 3, 100, 1021, 1024};
    ar_spec_t s = {counts, 6, k_all_dtypes, 10, k_all_ops, 5, 0, 0, 0};
    run_allreduce_jobs("slots", NULL, &s);
}

/* The staged allreduce, forced: over shm only (every rank on one host
 * through shared memory; auto picks it there from 1 MiB when ranks share
 * cores). 1 << 19 + 21 elements (a prime) spans several 256 KiB rounds
 * per slice for every element size of 2 bytes or more at p <= 3, so
 * rounds alternate between the two buffers and a rank runs a round
 * ahead; the 16 MiB case spans many at every p. */
static void test_allreduce_staged(void)
{
    if (!shm_run("staged"))
        return;
    static const size_t counts[] = {0, 1, 3, 100, 65537, 524309};
    ar_spec_t s = {counts, 6, k_all_dtypes, 10, k_all_ops, 5, 1, 1, 0};
    run_allreduce_jobs("staged", NULL, &s);
}

/* The mapped allreduce, forced: buffers from tnt_mem_alloc, over shm
 * only (every rank on one host). The staged allreduce's counts: slices
 * of many 64 KiB blocks and several 256 KiB passes. One dtype of each
 * element size (the block and pass edges move with it) and the ops of
 * distinct paths: the reduction kernels are the ones every algorithm
 * calls, checked for every dtype x op by test_kernels. */
static void test_allreduce_mapped(void)
{
    if (!shm_run("mapped"))
        return;
    static const size_t counts[] = {0, 1, 3, 100, 65537, 524309};
    static const tnt_dtype_t dts[] = {TNT_F32, TNT_F16, TNT_I8, TNT_U64};
    static const tnt_op_t ops[] = {TNT_SUM, TNT_AVG, TNT_MAX};
    ar_spec_t s = {counts, 6, dts, 4, ops, 3, 1, 1, 1};
    run_allreduce_jobs("mapped", NULL, &s);
}

/* Buffers from tnt_mem_alloc, the algorithm left to the library: the
 * slots and the mapped allreduce over shm; over TCP the memory is
 * private and the usual algorithms run on it. */
static void test_allreduce_shared_auto(void)
{
    static const size_t counts[] = {0, 1, 100, 2048, 2049, 65537};
    static const tnt_dtype_t dts[] = {TNT_F32, TNT_BF16, TNT_I64};
    static const tnt_op_t ops[] = {TNT_SUM, TNT_AVG, TNT_MAX};
    ar_spec_t s = {counts, 6, dts, 3, ops, 3, 1, 1, 1};
    run_allreduce_jobs("auto", NULL, &s);
}

static void test_allreduce_direct(void)
{
    ar_spec_t s = {k_matrix_counts, 6, k_all_dtypes, 10, k_all_ops, 5, 1, 2, 0};
    run_allreduce_jobs("direct", NULL, &s);
}

/* Small segments: every message of a medium allreduce is split into
 * many pipelined segments. */
static const size_t k_seg_counts[] = {3, 1000, 7919, 65537};
static const tnt_dtype_t k_seg_dtypes[] = {TNT_F32, TNT_F64, TNT_F16,
                                           TNT_BF16, TNT_I8, TNT_U64};
static const tnt_op_t k_seg_ops[] = {TNT_SUM, TNT_AVG, TNT_MAX};

static void test_allreduce_ring_segmented(void)
{
    ar_spec_t s = {k_seg_counts, 4, k_seg_dtypes, 6, k_seg_ops, 3, 1, 1, 0};
    run_allreduce_jobs("ring", "4k", &s);
}

static void test_allreduce_direct_segmented(void)
{
    ar_spec_t s = {k_seg_counts, 4, k_seg_dtypes, 6, k_seg_ops, 3, 1, 1, 0};
    run_allreduce_jobs("direct", "4k", &s);
}

static void test_allreduce_auto_segmented(void)
{
    ar_spec_t s = {k_seg_counts, 4, k_seg_dtypes, 6, k_seg_ops, 3, 1, 0, 0};
    run_allreduce_jobs("auto", "4k", &s);
}

/* The smallest segment the library accepts (64 bytes): hundreds of
 * segments per message at modest counts. */
static void test_allreduce_tiny_segments(void)
{
    static const size_t counts[] = {1, 17, 1000, 7919};
    static const tnt_dtype_t dts[] = {TNT_F32, TNT_F64, TNT_F16};
    static const tnt_op_t ops[] = {TNT_SUM, TNT_MIN};
    ar_spec_t s = {counts, 4, dts, 3, ops, 2, 0, 0, 0};
    run_allreduce_jobs("ring", "64", &s);
}

/* Three sockets per peer pair (TNT_SOCKETS_PER_PEER): segments of one
 * message travel on different sockets and arrive out of order. */
static void test_allreduce_multisocket(void)
{
    /* Sockets per peer mean nothing to shared memory. */
    const char *tp = getenv("TNT_TRANSPORT");
    if (tp && strcmp(tp, "shm") == 0) {
        fprintf(stderr, "  [multisocket: not applicable over shm, "
                "skipped]\n");
        return;
    }
    static const size_t counts[] = {0, 1, 1000, 65537, 1 << 20};
    static const tnt_dtype_t dts[] = {TNT_F32, TNT_BF16, TNT_I64};
    static const tnt_op_t ops[] = {TNT_SUM, TNT_MAX};
    ar_spec_t spec = {counts, 5, dts, 3, ops, 2, 0, 0, 0};
    static const int ps[] = {2, 3, 5};
    static const char *const algos[] = {"ring", "rd", "rabenseifner"};
    for (int k = 0; k < 3; k++)
        for (int a = 0; a < 3; a++) {
            char algo_env[64];
            snprintf(algo_env, sizeof algo_env, "TNT_ALLREDUCE_ALGO=%s",
                     algos[a]);
            const char *env[] = {algo_env, "TNT_SEGMENT_BYTES=4k",
                                 "TNT_SOCKETS_PER_PEER=3", NULL};
            char name[160];
            snprintf(name, sizeof name, "allreduce p=%d algo=%s sockets=3",
                     ps[k], algos[a]);
            th_job_t job = {name, ps[k], env, allreduce_rank, &spec, 240, 0,
                            0};
            th_run_job(&job, NULL);
        }
}

/* ---- broadcast ------------------------------------------------------------- */

static void broadcast_case(th_report_t *rep, tnt_comm_t comm, int rank,
                           tnt_dtype_t dt, size_t count, int root)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "broadcast/%s/n%zu/root%d",
             tnt_dtype_name(dt), count, root);
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt), bytes = count * es;
    void *buf = th_xmalloc(bytes), *want = th_xmalloc(bytes);

    tnt_gen_fill(want, count, dt, TNT_SUM, seed, root);
    if (rank == root)
        memcpy(buf, want, bytes);
    else
        tnt_gen_poison(buf, count, dt);
    tnt_result_t rc = tnt_broadcast(comm, buf, count, dt, root);
    size_t first = 0, wrong = 0;
    if (rc == TNT_SUCCESS)
        wrong = cmp_elems(buf, want, count, es, 0, &first);
    report(rep, name, rc, wrong, first, buf, bytes, NULL);
    free(buf);
    free(want);
}

typedef struct bc_spec {
    int big; /* 1<<22 f32 from the first and the last rank */
} bc_spec_t;

static int broadcast_rank(tnt_comm_t comm, int rank, int p, void *arg,
                          th_report_t *rep)
{
    const bc_spec_t *s = arg;
    static const size_t counts[] = {0, 1, 2, 3, 100, 1000, 7919, 65537};
    static const tnt_dtype_t dts[] = {TNT_F32, TNT_F16, TNT_I8, TNT_U64};
    for (int root = 0; root < p; root++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                broadcast_case(rep, comm, rank, dts[d], counts[c], root);
    if (s->big) {
        broadcast_case(rep, comm, rank, TNT_F32, BIG_COUNT, 0);
        if (p > 1)
            broadcast_case(rep, comm, rank, TNT_F32, BIG_COUNT, p - 1);
    }
    return 0;
}

static void run_broadcast_jobs(const char *algo, const char *segment,
                               int big)
{
    for (int k = 0; k < N_RANKS; k++) {
        int p = k_ranks[k];
        if (skip_p(p))
            continue;
        char algo_env[64], seg_env[64];
        snprintf(algo_env, sizeof algo_env, "TNT_BCAST_ALGO=%s", algo);
        snprintf(seg_env, sizeof seg_env, "TNT_SEGMENT_BYTES=%s",
                 segment ? segment : "");
        const char *env[] = {algo_env, segment ? seg_env : NULL, NULL};
        bc_spec_t spec = {big};
        char name[160];
        snprintf(name, sizeof name, "broadcast p=%d algo=%s seg=%s", p, algo,
                 segment ? segment : "default");
        th_job_t job = {name, p, env, broadcast_rank, &spec, 180, 0, 0};
        th_run_job(&job, NULL);
    }
}

static void test_broadcast_auto(void) { run_broadcast_jobs("auto", NULL, 1); }
static void test_broadcast_binomial(void)
{
    run_broadcast_jobs("binomial", NULL, 0);
}
static void test_broadcast_pipeline(void)
{
    run_broadcast_jobs("pipeline", NULL, 1);
}
static void test_broadcast_flat(void) { run_broadcast_jobs("flat", NULL, 1); }
/* The staged broadcast, forced: over shm only, as the staged allreduce. */
static void test_broadcast_staged(void)
{
    if (shm_run("staged broadcast"))
        run_broadcast_jobs("staged", NULL, 1);
}
static void test_broadcast_pipeline_segmented(void)
{
    run_broadcast_jobs("pipeline", "4k", 0);
}

/* ---- barrier, allgather, reduce-scatter ------------------------------------- */

static void allgather_case(th_report_t *rep, tnt_comm_t comm, int rank,
                           int p, tnt_dtype_t dt, size_t count, int in_place)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "allgather/%s/n%zu/%s", tnt_dtype_name(dt),
             count, in_place ? "inplace" : "oop");
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt), block = count * es;
    size_t total = block * (size_t)p;
    void *recv = th_xmalloc(total), *send = th_xmalloc(block),
         *want = th_xmalloc(block);

    tnt_gen_poison(recv, count * (size_t)p, dt);
    tnt_gen_fill(send, count, dt, TNT_SUM, seed, rank);
    if (in_place)
        memcpy((char *)recv + (size_t)rank * block, send, block);
    tnt_result_t rc = tnt_allgather(comm, in_place ? TNT_IN_PLACE : send,
                                    recv, count, dt);
    size_t wrong = 0, first = 0;
    if (rc == TNT_SUCCESS) {
        for (int r = 0; r < p; r++) {
            size_t f = 0;
            tnt_gen_fill(want, count, dt, TNT_SUM, seed, r);
            size_t w = cmp_elems((char *)recv + (size_t)r * block, want,
                                 count, es, (size_t)r * count, &f);
            if (w && !wrong)
                first = f;
            wrong += w;
        }
    }
    report(rep, name, rc, wrong, first, recv, total, NULL);
    free(recv);
    free(send);
    free(want);
}

static void reduce_scatter_case(th_report_t *rep, tnt_comm_t comm, int rank,
                                int p, tnt_dtype_t dt, tnt_op_t op,
                                size_t count)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "reduce_scatter/%s/%s/n%zu",
             tnt_dtype_name(dt), tnt_op_name(op), count);
    uint64_t seed = seed_of(name);
    size_t es = tnt_dtype_size(dt);
    size_t total = count * (size_t)p;
    void *send = th_xmalloc(total * es), *recv = th_xmalloc(count * es);

    /* Element i of the global vector is datagen's element i: block r of
     * the reduction is then the allreduce reference at r*count + i. */
    tnt_gen_fill(send, total, dt, op, seed, rank);
    tnt_gen_poison(recv, count, dt);
    uint64_t send_hash = tnt_gen_hash(send, total * es);
    tnt_result_t rc = tnt_reduce_scatter(comm, send, recv, count, dt, op);
    size_t wrong = 0, first = 0;
    if (rc == TNT_SUCCESS)
        wrong = tnt_gen_check_allreduce(recv, (size_t)rank * count, count,
                                        dt, op, seed, p, &first);
    const char *problem = NULL;
    if (tnt_gen_hash(send, total * es) != send_hash)
        problem = "the send buffer was modified by reduce_scatter";
    /* Every rank holds a different block: no cross-rank hash. */
    if (problem && rc == TNT_SUCCESS && !wrong)
        th_report_expect(rep, name, 0, rc, "%s", problem);
    else
        th_report_check(rep, name, rc, wrong, first, NULL, 0);
    free(send);
    free(recv);
}

static void barrier_cases(th_report_t *rep, tnt_comm_t comm)
{
    for (int i = 0; i < 5; i++) {
        char name[64];
        snprintf(name, sizeof name, "barrier/%d", i);
        th_report_check(rep, name, tnt_barrier(comm), 0, 0, NULL, 0);
    }
    /* Several barriers in flight at once, completed in reverse order. */
    tnt_request_t req[4] = {NULL, NULL, NULL, NULL};
    tnt_result_t post[4];
    for (int i = 0; i < 4; i++)
        post[i] = tnt_ibarrier(comm, &req[i]);
    for (int i = 3; i >= 0; i--) {
        char name[64];
        snprintf(name, sizeof name, "ibarrier/%d", i);
        tnt_result_t rc = post[i] != TNT_SUCCESS ? post[i] : tnt_wait(req[i]);
        th_report_check(rep, name, rc, 0, 0, NULL, 0);
        if (req[i])
            tnt_request_free(req[i]);
    }
}

static int misc_rank(tnt_comm_t comm, int rank, int p, void *arg,
                     th_report_t *rep)
{
    (void)arg;
    barrier_cases(rep, comm);

    static const size_t ag_counts[] = {0, 1, 2, 3, 100, 1000, 7919};
    static const tnt_dtype_t ag_dts[] = {TNT_F32, TNT_I8, TNT_F64, TNT_BF16};
    for (size_t d = 0; d < sizeof ag_dts / sizeof ag_dts[0]; d++)
        for (size_t c = 0; c < sizeof ag_counts / sizeof ag_counts[0]; c++)
            for (int ip = 0; ip < 2; ip++)
                allgather_case(rep, comm, rank, p, ag_dts[d], ag_counts[c],
                               ip);
    allgather_case(rep, comm, rank, p, TNT_F32, 65537, 0);
    allgather_case(rep, comm, rank, p, TNT_U8, 65537, 1);

    static const size_t rs_counts[] = {0, 1, 3, 100};
    for (size_t d = 0; d < 10; d++)
        for (size_t o = 0; o < 5; o++)
            for (size_t c = 0; c < sizeof rs_counts / sizeof rs_counts[0];
                 c++)
                reduce_scatter_case(rep, comm, rank, p, k_all_dtypes[d],
                                    k_all_ops[o], rs_counts[c]);
    static const size_t rs_big[] = {2, 1000, 7919, 65537};
    for (size_t c = 0; c < sizeof rs_big / sizeof rs_big[0]; c++) {
        reduce_scatter_case(rep, comm, rank, p, TNT_F32, TNT_SUM, rs_big[c]);
        reduce_scatter_case(rep, comm, rank, p, TNT_F16, TNT_AVG, rs_big[c]);
        reduce_scatter_case(rep, comm, rank, p, TNT_I64, TNT_MIN, rs_big[c]);
    }
    /* A barrier after everything: nothing above left a rank behind. */
    th_report_check(rep, "barrier/final", tnt_barrier(comm), 0, 0, NULL, 0);
    return 0;
}

static void run_misc_jobs(const char *segment)
{
    for (int k = 0; k < N_RANKS; k++) {
        int p = k_ranks[k];
        if (skip_p(p))
            continue;
        char seg_env[64];
        snprintf(seg_env, sizeof seg_env, "TNT_SEGMENT_BYTES=%s",
                 segment ? segment : "");
        const char *env[] = {segment ? seg_env : NULL, NULL};
        char name[160];
        snprintf(name, sizeof name, "barrier/allgather/reduce_scatter p=%d "
                 "seg=%s", p, segment ? segment : "default");
        th_job_t job = {name, p, env, misc_rank, NULL, 180, 0, 0};
        th_run_job(&job, NULL);
    }
}

static void test_misc(void) { run_misc_jobs(NULL); }
static void test_misc_segmented(void) { run_misc_jobs("4k"); }

/* ---- several collectives in flight -------------------------------------------- */

enum nb_kind { NB_ALLREDUCE, NB_BCAST, NB_ALLGATHER, NB_RS, NB_BARRIER };

typedef struct nb_op {
    enum nb_kind kind;
    tnt_dtype_t dt;
    tnt_op_t op;
    size_t count;
    int root_or_inplace; /* broadcast root (-1: last rank); allreduce: 1
                            in place */
    /* filled at run time */
    char name[TH_NAME_MAX];
    uint64_t seed;
    void *send, *recv;
    tnt_request_t req;
    tnt_result_t post_rc;
} nb_op_t;

static const nb_op_t k_nb_ops[] = {
    {NB_ALLREDUCE, TNT_F32, TNT_SUM, 1000, 0, "", 0, 0, 0, 0, 0},
    {NB_ALLREDUCE, TNT_F64, TNT_MAX, 65537, 1, "", 0, 0, 0, 0, 0},
    {NB_BCAST, TNT_I32, TNT_SUM, 100, -1, "", 0, 0, 0, 0, 0},
    {NB_ALLGATHER, TNT_U8, TNT_SUM, 333, 0, "", 0, 0, 0, 0, 0},
    {NB_RS, TNT_I64, TNT_SUM, 77, 0, "", 0, 0, 0, 0, 0},
    {NB_BARRIER, TNT_F32, TNT_SUM, 0, 0, "", 0, 0, 0, 0, 0},
    {NB_ALLREDUCE, TNT_BF16, TNT_AVG, 7919, 0, "", 0, 0, 0, 0, 0},
    {NB_BCAST, TNT_F16, TNT_SUM, 65537, 0, "", 0, 0, 0, 0, 0},
    {NB_ALLREDUCE, TNT_I8, TNT_PROD, 3, 1, "", 0, 0, 0, 0, 0},
    {NB_ALLREDUCE, TNT_F32, TNT_SUM, 0, 0, "", 0, 0, 0, 0, 0},
};
#define N_NB (sizeof k_nb_ops / sizeof k_nb_ops[0])

static void nb_post(nb_op_t *o, tnt_comm_t comm, int rank, int p,
                    const char *set, size_t k)
{
    static const char *kinds[] = {"iallreduce", "ibroadcast", "iallgather",
                                  "ireduce_scatter", "ibarrier"};
    snprintf(o->name, sizeof o->name, "%s/%zu/%s/%s/%s/n%zu", set, k,
             kinds[o->kind], tnt_dtype_name(o->dt), tnt_op_name(o->op),
             o->count);
    o->seed = seed_of(o->name);
    size_t es = tnt_dtype_size(o->dt), n = o->count;
    o->req = NULL;
    o->send = o->recv = NULL;
    switch (o->kind) {
    case NB_ALLREDUCE:
        o->recv = th_xmalloc(n * es);
        if (o->root_or_inplace) {
            tnt_gen_fill(o->recv, n, o->dt, o->op, o->seed, rank);
        } else {
            o->send = th_xmalloc(n * es);
            tnt_gen_fill(o->send, n, o->dt, o->op, o->seed, rank);
            tnt_gen_poison(o->recv, n, o->dt);
        }
        o->post_rc = tnt_iallreduce(comm,
                                    o->send ? o->send : TNT_IN_PLACE,
                                    o->recv, n, o->dt, o->op, &o->req);
        break;
    case NB_BCAST: {
        int root = o->root_or_inplace < 0 ? p - 1 : o->root_or_inplace;
        o->recv = th_xmalloc(n * es);
        if (rank == root)
            tnt_gen_fill(o->recv, n, o->dt, TNT_SUM, o->seed, root);
        else
            tnt_gen_poison(o->recv, n, o->dt);
        o->post_rc = tnt_ibroadcast(comm, o->recv, n, o->dt, root, &o->req);
        break;
    }
    case NB_ALLGATHER:
        o->send = th_xmalloc(n * es);
        o->recv = th_xmalloc(n * es * (size_t)p);
        tnt_gen_fill(o->send, n, o->dt, TNT_SUM, o->seed, rank);
        tnt_gen_poison(o->recv, n * (size_t)p, o->dt);
        o->post_rc = tnt_iallgather(comm, o->send, o->recv, n, o->dt,
                                    &o->req);
        break;
    case NB_RS:
        o->send = th_xmalloc(n * es * (size_t)p);
        o->recv = th_xmalloc(n * es);
        tnt_gen_fill(o->send, n * (size_t)p, o->dt, o->op, o->seed, rank);
        tnt_gen_poison(o->recv, n, o->dt);
        o->post_rc = tnt_ireduce_scatter(comm, o->send, o->recv, n, o->dt,
                                         o->op, &o->req);
        break;
    case NB_BARRIER:
        o->post_rc = tnt_ibarrier(comm, &o->req);
        break;
    }
}

/* Check a completed operation and report it; frees its buffers. */
static void nb_check(nb_op_t *o, th_report_t *rep, int rank, int p,
                     tnt_result_t rc)
{
    size_t es = tnt_dtype_size(o->dt), n = o->count;
    size_t wrong = 0, first = 0;
    const void *hbuf = NULL;
    size_t hbytes = 0;
    if (rc == TNT_SUCCESS) {
        switch (o->kind) {
        case NB_ALLREDUCE:
            wrong = tnt_gen_check_allreduce(o->recv, 0, n, o->dt, o->op,
                                            o->seed, p, &first);
            hbuf = o->recv;
            hbytes = n * es;
            break;
        case NB_BCAST: {
            int root = o->root_or_inplace < 0 ? p - 1 : o->root_or_inplace;
            void *want = th_xmalloc(n * es);
            tnt_gen_fill(want, n, o->dt, TNT_SUM, o->seed, root);
            wrong = cmp_elems(o->recv, want, n, es, 0, &first);
            free(want);
            hbuf = o->recv;
            hbytes = n * es;
            break;
        }
        case NB_ALLGATHER: {
            void *want = th_xmalloc(n * es);
            for (int r = 0; r < p; r++) {
                size_t f = 0;
                tnt_gen_fill(want, n, o->dt, TNT_SUM, o->seed, r);
                size_t w = cmp_elems((char *)o->recv + (size_t)r * n * es,
                                     want, n, es, (size_t)r * n, &f);
                if (w && !wrong)
                    first = f;
                wrong += w;
            }
            free(want);
            hbuf = o->recv;
            hbytes = n * es * (size_t)p;
            break;
        }
        case NB_RS:
            wrong = tnt_gen_check_allreduce(o->recv, (size_t)rank * n, n,
                                            o->dt, o->op, o->seed, p,
                                            &first);
            break;
        case NB_BARRIER:
            break;
        }
    }
    (void)rank;
    th_report_check(rep, o->name, rc, wrong, first, hbuf, hbytes);
    if (o->req)
        tnt_request_free(o->req);
    o->req = NULL;
    free(o->send);
    free(o->recv);
    o->send = o->recv = NULL;
}

static int nonblocking_rank(tnt_comm_t comm, int rank, int p, void *arg,
                            th_report_t *rep)
{
    (void)arg;
    nb_op_t ops[N_NB];

    /* Set 1: post all, wait in reverse order on even ranks and in a
     * scrambled order on odd ones: completion order must not matter. */
    memcpy(ops, k_nb_ops, sizeof ops);
    for (size_t k = 0; k < N_NB; k++)
        nb_post(&ops[k], comm, rank, p, "wait", k);
    for (size_t i = 0; i < N_NB; i++) {
        size_t k = rank % 2 == 0 ? N_NB - 1 - i : (i * 7 + 3) % N_NB;
        nb_op_t *o = &ops[k];
        tnt_result_t rc = o->post_rc != TNT_SUCCESS ? o->post_rc
                                                    : tnt_wait(o->req);
        nb_check(o, rep, rank, p, rc);
    }

    /* Set 2: post all, then poll every request with tnt_test until all
     * are done; completed requests keep answering TNT_SUCCESS. */
    memcpy(ops, k_nb_ops, sizeof ops);
    for (size_t k = 0; k < N_NB; k++)
        nb_post(&ops[k], comm, rank, p, "test", k);
    tnt_result_t rcs[N_NB];
    int done[N_NB] = {0};
    size_t ndone = 0;
    double limit = th_now() + 60.0 * th_timeout_mult();
    long polls = 0;
    for (size_t k = 0; k < N_NB; k++) {
        rcs[k] = ops[k].post_rc;
        if (rcs[k] != TNT_SUCCESS) {
            done[k] = 1;
            ndone++;
        }
    }
    while (ndone < N_NB && th_now() < limit) {
        for (size_t k = 0; k < N_NB; k++) {
            if (done[k])
                continue;
            tnt_result_t rc = tnt_test(ops[k].req);
            polls++;
            if (rc != TNT_INPROGRESS) {
                rcs[k] = rc;
                done[k] = 1;
                ndone++;
            }
        }
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
    th_report_expect(rep, "test/all_done", ndone == N_NB, TNT_SUCCESS,
                     "%zu of %zu requests completed within the deadline "
                     "by polling tnt_test (%ld polls)", ndone, N_NB, polls);
    for (size_t k = 0; k < N_NB; k++) {
        tnt_result_t rc = done[k] ? rcs[k] : TNT_TIMEOUT;
        if (done[k] && rc == TNT_SUCCESS && ops[k].req) {
            tnt_result_t again = tnt_test(ops[k].req);
            tnt_result_t w = tnt_wait(ops[k].req);
            if (again != TNT_SUCCESS || w != TNT_SUCCESS) {
                char name[TH_NAME_MAX + 8];
                snprintf(name, sizeof name, "%s/again", ops[k].name);
                th_report_expect(rep, name, 0, again ? again : w,
                                 "a completed request answered tnt_test "
                                 "%d and tnt_wait %d, expected 0 and 0",
                                 again, w);
            }
        }
        if (!done[k]) {
            /* Still running: the buffers must outlive it. Leave them to
             * the end of the process rather than free them under it. */
            th_report_expect(rep, ops[k].name, 0, TNT_TIMEOUT,
                             "never completed");
            continue;
        }
        nb_check(&ops[k], rep, rank, p, rc);
    }

    /* Set 3: nonblocking and blocking interleaved: a blocking allreduce
     * posted after two nonblocking ones completes while they are still
     * unwaited. */
    memcpy(ops, k_nb_ops, 2 * sizeof ops[0]);
    nb_post(&ops[0], comm, rank, p, "mixed", 0);
    nb_post(&ops[1], comm, rank, p, "mixed", 1);
    allreduce_case(rep, comm, rank, p, TNT_U32, TNT_SUM, 4099, 0);
    for (int k = 1; k >= 0; k--)
        nb_check(&ops[k], rep, rank, p,
                 ops[k].post_rc != TNT_SUCCESS ? ops[k].post_rc
                                               : tnt_wait(ops[k].req));
    return 0;
}

static void test_nonblocking(void)
{
    for (int k = 0; k < N_RANKS; k++) {
        int p = k_ranks[k];
        if (skip_p(p))
            continue;
        char name[64];
        snprintf(name, sizeof name, "nonblocking p=%d", p);
        const char *env[] = {NULL};
        th_job_t job = {name, p, env, nonblocking_rank, NULL, 120, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* tnt_wait_timeout on an operation that cannot finish yet (the other ranks
 * only join after a file appears) reports TNT_TIMEOUT and leaves the
 * operation running; a later tnt_wait completes it correctly. */
typedef struct wt_arg {
    char path[256];
} wt_arg_t;

static int wait_timeout_rank(tnt_comm_t comm, int rank, int p, void *arg,
                             th_report_t *rep)
{
    const wt_arg_t *a = arg;
    size_t n = 5000;
    float *send = th_xmalloc(n * sizeof *send), *recv = th_xmalloc(n * sizeof *recv);
    uint64_t seed = seed_of("wait_timeout");
    tnt_gen_fill(send, n, TNT_F32, TNT_SUM, seed, rank);
    tnt_gen_poison(recv, n, TNT_F32);

    if (rank == 0) {
        tnt_request_t req = NULL;
        tnt_result_t rc = tnt_iallreduce(comm, send, recv, n, TNT_F32,
                                         TNT_SUM, &req);
        tnt_result_t wt = rc ? rc : tnt_wait_timeout(req, 0.2);
        th_report_expect(rep, "wait_timeout/early", wt == TNT_TIMEOUT, wt,
                         "tnt_wait_timeout(0.2 s) before the other ranks "
                         "joined returned %d (%s), expected TNT_TIMEOUT",
                         wt, tnt_strerror(wt));
        tnt_result_t t = rc ? rc : tnt_test(req);
        th_report_expect(rep, "wait_timeout/test", t == TNT_INPROGRESS, t,
                         "tnt_test before the other ranks joined returned "
                         "%d, expected TNT_INPROGRESS", t);
        int fd = open(a->path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
        rc = rc ? rc : tnt_wait(req);
        size_t first = 0, wrong = 0;
        if (rc == TNT_SUCCESS)
            wrong = tnt_gen_check_allreduce(recv, 0, n, TNT_F32, TNT_SUM,
                                            seed, p, &first);
        th_report_check(rep, "wait_timeout/result", rc, wrong, first, recv,
                        n * sizeof *recv);
        if (req)
            tnt_request_free(req);
    } else {
        double limit = th_now() + 60.0 * th_timeout_mult();
        while (access(a->path, F_OK) != 0 && th_now() < limit) {
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        th_report_expect(rep, "wait_timeout/early", 1, 0, "not rank 0");
        th_report_expect(rep, "wait_timeout/test", 1, 0, "not rank 0");
        tnt_result_t rc = tnt_allreduce(comm, send, recv, n, TNT_F32,
                                        TNT_SUM);
        size_t first = 0, wrong = 0;
        if (rc == TNT_SUCCESS)
            wrong = tnt_gen_check_allreduce(recv, 0, n, TNT_F32, TNT_SUM,
                                            seed, p, &first);
        th_report_check(rep, "wait_timeout/result", rc, wrong, first, recv,
                        n * sizeof *recv);
    }
    free(send);
    free(recv);
    return 0;
}

static void test_wait_timeout(void)
{
    static const int ps[] = {2, 5};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        wt_arg_t a;
        char dir[] = "/tmp/tnt_test_wt_XXXXXX";
        TH_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
        snprintf(a.path, sizeof a.path, "%s/go", dir);
        char name[64];
        snprintf(name, sizeof name, "wait_timeout p=%d", ps[k]);
        const char *env[] = {NULL};
        th_job_t job = {name, ps[k], env, wait_timeout_rank, &a, 90, 0, 0};
        th_run_job(&job, NULL);
        unlink(a.path);
        rmdir(dir);
    }
}

/* ---- determinism -------------------------------------------------------------- */

/* A random-looking value in [-1, 1] from (seed, rank, i): unlike datagen's
 * small integers, sums of these round, so the order of reduction shows in
 * the low bits. */
static double rand_unit(uint64_t seed, int rank, size_t i)
{
    uint64_t x = seed ^ ((uint64_t)(uint32_t)rank << 40) ^
                 (uint64_t)i * 0x9e3779b97f4a7c15ULL;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (double)(x >> 11) * 0x1p-52 - 1.0;
}

static void det_case(th_report_t *rep, tnt_comm_t comm, int rank, int p,
                     tnt_dtype_t dt, tnt_op_t op, size_t count)
{
    char name[TH_NAME_MAX];
    snprintf(name, sizeof name, "det/%s/%s/n%zu", tnt_dtype_name(dt),
             tnt_op_name(op), count);
    uint64_t seed = seed_of(name);
    int f32 = dt == TNT_F32;
    size_t es = f32 ? 4 : 8;
    void *send = th_xmalloc(count * es), *recv = th_xmalloc(count * es);
    for (size_t i = 0; i < count; i++) {
        double v = rand_unit(seed, rank, i);
        if (f32)
            ((float *)send)[i] = (float)v;
        else
            ((double *)send)[i] = v;
    }
    tnt_result_t rc = tnt_allreduce(comm, send, recv, count, dt, op);
    size_t wrong = 0, first = 0;
    double worst = 0.0;
    if (rc == TNT_SUCCESS) {
        /* Reference: the same (rounded) inputs summed in double. Any
         * summation order is within (p-1) * u * sum|x| of the exact sum;
         * the bound is doubled for the final division of AVG. */
        double u = f32 ? 0x1p-24 : 0x1p-53;
        for (size_t i = 0; i < count; i++) {
            double ref = 0.0, mag = 0.0;
            for (int r = 0; r < p; r++) {
                double v = rand_unit(seed, r, i);
                if (f32)
                    v = (double)(float)v;
                ref += v;
                mag += fabs(v);
            }
            double tol = 2.0 * (double)p * u * mag + 1e-300;
            if (op == TNT_AVG) {
                ref /= p;
                tol = tol / p + 2.0 * u * fabs(ref);
            }
            double got = f32 ? (double)((float *)recv)[i]
                             : ((double *)recv)[i];
            double err = fabs(got - ref);
            if (!(err <= tol)) {
                if (wrong++ == 0)
                    first = i;
            }
            if (err > worst)
                worst = err;
        }
    }
    if (rc == TNT_SUCCESS && wrong) {
        th_case_t c;
        memset(&c, 0, sizeof c);
        snprintf(c.name, sizeof c.name, "%s", name);
        c.nwrong = wrong;
        c.first_wrong = first;
        c.has_hash = 1;
        c.hash = tnt_gen_hash(recv, count * es);
        snprintf(c.msg, sizeof c.msg, "%zu elements outside the rounding "
                 "bound of the double reference, worst error %g", wrong,
                 worst);
        th_report_case(rep, &c);
    } else {
        th_report_check(rep, name, rc, wrong, first, recv, count * es);
    }
    free(send);
    free(recv);
}

static int det_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)arg;
    static const size_t counts[] = {1, 1000, 65537, 300007};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        det_case(rep, comm, rank, p, TNT_F32, TNT_SUM, counts[c]);
        det_case(rep, comm, rank, p, TNT_F64, TNT_SUM, counts[c]);
        det_case(rep, comm, rank, p, TNT_F32, TNT_AVG, counts[c]);
    }
    return 0;
}

static void test_determinism(void)
{
    static const struct {
        int p;
        const char *algo;
        const char *seg;
    } jobs[] = {{3, "auto", NULL}, {5, "ring", NULL}, {5, "rd", NULL},
                {8, "ring", "4k"}, {8, "rd", NULL}, {7, "auto", "4k"},
                {7, "tree", "4k"}};
    for (size_t k = 0; k < sizeof jobs / sizeof jobs[0]; k++) {
        char algo_env[64], seg_env[64], name[128];
        snprintf(algo_env, sizeof algo_env, "TNT_ALLREDUCE_ALGO=%s",
                 jobs[k].algo);
        snprintf(seg_env, sizeof seg_env, "TNT_SEGMENT_BYTES=%s",
                 jobs[k].seg ? jobs[k].seg : "");
        const char *env[] = {algo_env, jobs[k].seg ? seg_env : NULL, NULL};
        th_result_t run[2];
        for (int i = 0; i < 2; i++) {
            snprintf(name, sizeof name, "determinism p=%d algo=%s seg=%s "
                     "run %d", jobs[k].p, jobs[k].algo,
                     jobs[k].seg ? jobs[k].seg : "default", i + 1);
            th_job_t job = {name, jobs[k].p, env, det_rank, NULL, 120, 0, 0};
            th_run_job(&job, &run[i]);
        }
        /* Same job, same configuration: the same bits, run after run. */
        const th_rank_result_t *a = &run[0].ranks[0];
        size_t compared = 0;
        for (size_t i = 0; i < a->ncases; i++) {
            const th_case_t *ca = &a->cases[i];
            if (!ca->has_hash)
                continue;
            const th_case_t *cb = th_find_case(&run[1], 0, ca->name);
            TH_CHECK(cb && cb->has_hash, "%s: case '%s' has no result in "
                     "the second run", name, ca->name);
            if (!cb || !cb->has_hash)
                continue;
            compared++;
            TH_CHECK(ca->hash == cb->hash, "%s: case '%s' gave different "
                     "bits in two runs of the same job (hash %016llx vs "
                     "%016llx)", name, ca->name,
                     (unsigned long long)ca->hash,
                     (unsigned long long)cb->hash);
        }
        TH_CHECK(compared >= 12 || (run[0].failures && run[1].failures),
                 "%s: only %zu cases to compare between runs", name,
                 compared);
        th_result_free(&run[0]);
        th_result_free(&run[1]);
    }
}

/* ---- explicit configuration ------------------------------------------------- */

/* tnt_comm_init with a filled tnt_config_t instead of the environment:
 * the launcher variables are read and then removed, so only the config
 * can have carried them. */
static int config_rank(tnt_comm_t unused, int rank, int p, void *arg,
                       th_report_t *rep)
{
    (void)unused;
    (void)arg;
    char addr[128], key[128];
    snprintf(addr, sizeof addr, "%s", getenv("TNT_ROOT_ADDR"));
    snprintf(key, sizeof key, "%s", getenv("TNT_JOB_KEY"));
    unsetenv("TNT_RANK");
    unsetenv("TNT_SIZE");
    unsetenv("TNT_ROOT_ADDR");
    unsetenv("TNT_JOB_KEY");

    tnt_config_t cfg = TNT_CONFIG_INIT;
    cfg.rank = rank;
    cfg.nranks = p;
    cfg.root_addr = addr;
    cfg.job_key = key;
    cfg.timeout_s = 30.0 * th_timeout_mult();
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init(&cfg, &comm);
    th_report_check(rep, "config/init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 1;
    int r = -1, n = -1, master = -1, is_master = -1;
    tnt_comm_rank(comm, &r);
    tnt_comm_size(comm, &n);
    tnt_comm_master_rank(comm, &master);
    tnt_comm_is_master(comm, &is_master);
    th_report_expect(rep, "config/identity",
                     r == rank && n == p && master == TNT_MASTER_RANK &&
                         is_master == (rank == TNT_MASTER_RANK),
                     TNT_SUCCESS, "rank %d size %d master %d is_master %d",
                     r, n, master, is_master);
    allreduce_case(rep, comm, rank, p, TNT_F32, TNT_SUM, 1000, 0);
    broadcast_case(rep, comm, rank, TNT_F64, 100, p - 1);
    th_report_check(rep, "config/free", tnt_comm_free(comm), 0, 0, NULL, 0);
    return 0;
}

static void test_explicit_config(void)
{
    static const int ps[] = {1, 3, 4};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        char name[64];
        snprintf(name, sizeof name, "explicit config p=%d", ps[k]);
        const char *env[] = {NULL};
        th_job_t job = {name, ps[k], env, config_rank, NULL, 60, 1, 0};
        th_run_job(&job, NULL);
    }
}

/* ---- main --------------------------------------------------------------------- */

static const th_test_def_t k_tests[] = {
    {"allreduce", "auto", test_allreduce_auto},
    {"allreduce", "ring", test_allreduce_ring},
    {"allreduce", "rd", test_allreduce_rd},
    {"allreduce", "rabenseifner", test_allreduce_rab},
    {"allreduce", "tree", test_allreduce_tree},
    {"allreduce", "oneshot", test_allreduce_oneshot},
    {"allreduce", "direct", test_allreduce_direct},
    {"allreduce", "slots", test_allreduce_slots},
    {"allreduce", "staged", test_allreduce_staged},
    {"allreduce", "mapped", test_allreduce_mapped},
    {"allreduce", "shared memory auto", test_allreduce_shared_auto},
    {"allreduce", "direct_segmented", test_allreduce_direct_segmented},
    {"allreduce", "ring_segmented", test_allreduce_ring_segmented},
    {"allreduce", "auto_segmented", test_allreduce_auto_segmented},
    {"allreduce", "tiny_segments", test_allreduce_tiny_segments},
    {"allreduce", "multisocket", test_allreduce_multisocket},
    {"broadcast", "auto", test_broadcast_auto},
    {"broadcast", "binomial", test_broadcast_binomial},
    {"broadcast", "pipeline", test_broadcast_pipeline},
    {"broadcast", "flat", test_broadcast_flat},
    {"broadcast", "staged", test_broadcast_staged},
    {"broadcast", "pipeline_segmented", test_broadcast_pipeline_segmented},
    {"misc", "barrier_allgather_reduce_scatter", test_misc},
    {"misc", "segmented", test_misc_segmented},
    {"nonblocking", "in_flight", test_nonblocking},
    {"nonblocking", "wait_timeout", test_wait_timeout},
    {"determinism", "bitwise_reproducible", test_determinism},
    {"config", "explicit_config", test_explicit_config},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
