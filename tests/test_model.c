/*
 * The cost model (lib/collectives/model.c) against the textbook: for the
 * ring and recursive doubling at small p, with one segment per message,
 * the schedules played out must give the formulas of Thakur, Rabenseifner
 * and Gropp (2005), computed here independently:
 *
 *   ring: 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
 *   rd (p a power of two): log2(p) (alpha + n beta + n gamma)
 *
 * Also: one host's ranks standing for all (symmetry) gives the same time
 * as playing every rank (direct and one-shot are not symmetric in their
 * operations' order and always play every rank), and the intra-/inter-
 * host split and the shared NIC are used; the broadcast's p-dependent
 * threshold picks within 1.5x of the model's best; so does the
 * allreduce's table with one rank a host from 32 to 512 ranks (rd's
 * bound shrinking with p, the tree above 2 MiB), and up to 16 ranks on
 * one host rd stays within 1.5x of Rabenseifner at its 64 KiB bound.
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>

#include "collectives/model.h"

static tnt_coll_args_t args(int kind, int p, size_t count)
{
    tnt_coll_args_t a = {.kind = kind, .dtype = TNT_F32, .op = TNT_SUM,
                         .count = count, .root = 0, .rank = 0, .nranks = p,
                         .esize = 4, .in_place = 1,
                         .segment_bytes = (size_t)256 << 10};
    return a;
}

static const tnt_model_params_t params = {
    .intra = {1e-6, 1.0 / 10e9, 0.0}, .inter = {2e-6, 1.0 / 12.5e9, 0.0},
    .gamma = 1.0 / 5e9, .copy = 0.0, .all_ranks = 0};

static double predict(tnt_coll_args_t a, int algo, int rph, int all)
{
    tnt_model_params_t m = params;
    m.all_ranks = all;
    tnt_model_result_t r;
    CU_ASSERT_EQUAL_FATAL(tnt__model_run(&a, algo, rph, &m, (size_t)1 << 24,
                                         &r), TNT_SUCCESS);
    return r.time;
}

static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-9 * want + 1e-15;
}

static void test_ring_textbook(void)
{
    for (int p = 2; p <= 12; p++) {
        /* n/p = 16 KiB of f32 per chunk: one segment per message. */
        size_t count = (size_t)p * 4096;
        double n = (double)count * 4;
        const tnt_model_link_t *l = &params.inter;
        double want = 2.0 * (p - 1) * l->alpha +
                      2.0 * (p - 1) / p * n * l->beta +
                      (double)(p - 1) / p * n * params.gamma;
        double got = predict(args(TNT_COLL_ALLREDUCE, p, count),
                             TNT_ALGO_RING, 1, 0);
        if (!close_to(got, want))
            fprintf(stderr, "\nring p=%d: model %.9g s, textbook %.9g s\n",
                    p, got, want);
        CU_ASSERT(close_to(got, want));
    }
}

static void test_rd_textbook(void)
{
    for (int p = 2; p <= 64; p *= 2) {
        size_t count = 1000;
        double n = (double)count * 4;
        const tnt_model_link_t *l = &params.inter;
        double want = log2((double)p) *
                      (l->alpha + n * l->beta + n * params.gamma);
        double got = predict(args(TNT_COLL_ALLREDUCE, p, count), TNT_ALGO_RD,
                             1, 0);
        if (!close_to(got, want))
            fprintf(stderr, "\nrd p=%d: model %.9g s, textbook %.9g s\n", p,
                    got, want);
        CU_ASSERT(close_to(got, want));
    }
}

/* Ranks 0,1 on one host, 2,3 on another: recursive doubling's first
 * round is intra-host, its second inter-host, where both ranks of a host
 * share its NIC: the second message leaves after the first (2 n beta). */
static void test_rd_two_hosts(void)
{
    double n = 4000;
    double want = params.intra.alpha + n * params.intra.beta +
                  params.inter.alpha + 2 * n * params.inter.beta +
                  2 * n * params.gamma;
    double got = predict(args(TNT_COLL_ALLREDUCE, 4, 1000), TNT_ALGO_RD, 2,
                         0);
    CU_ASSERT(close_to(got, want));
}

/* The double binary tree at p = 2, one segment a half: each rank sends
 * its half of the other tree's root up (alpha + n/2 beta), the root
 * reduces n/2 and sends it back down (alpha + n/2 beta); the two halves
 * go the opposite ways at once. */
static void test_tree_two_ranks(void)
{
    double n = 4000;
    const tnt_model_link_t *l = &params.inter;
    double want = 2 * l->alpha + n * l->beta + n / 2 * params.gamma;
    double got = predict(args(TNT_COLL_ALLREDUCE, 2, 1000), TNT_ALGO_TREE,
                         1, 0);
    if (!close_to(got, want))
        fprintf(stderr, "\ntree p=2: model %.9g s, formula %.9g s\n", got,
                want);
    CU_ASSERT(close_to(got, want));
}

/* One host's ranks standing for all give what all ranks give. */
static void test_symmetry(void)
{
    static const struct { int algo, p, rph; size_t count; } cs[] = {
        {TNT_ALGO_RING, 32, 4, 32 * 1000},
        {TNT_ALGO_RING, 24, 8, 24 * 4096},
        {TNT_ALGO_RD, 64, 4, 5000},
        {TNT_ALGO_RABENSEIFNER, 64, 8, 64 * 1000},
        {TNT_ALGO_DIRECT, 16, 4, 16 * 100},
        {TNT_ALGO_ONESHOT, 16, 4, 100},
        {TNT_ALGO_HIER, 32, 4, 32 * 4096},
        {TNT_ALGO_HIER, 64, 8, 64 * 4096},
    };
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
        tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, cs[i].p, cs[i].count);
        tnt_topo_t t;
        int keys[64];
        for (int r = 0; r < cs[i].p; r++)
            keys[r] = r / cs[i].rph;
        CU_ASSERT_EQUAL_FATAL(tnt__topo_init(&t, cs[i].p, keys),
                              TNT_SUCCESS);
        a.topo = &t;
        tnt_model_result_t r;
        CU_ASSERT_EQUAL(tnt__model_run(&a, cs[i].algo, cs[i].rph, &params,
                                       (size_t)1 << 24, &r), TNT_SUCCESS);
        double all = predict(a, cs[i].algo, cs[i].rph, 1);
        if (!close_to(r.time, all))
            fprintf(stderr, "\n%s p=%d rph=%d: symmetric(%d) %.9g s, all "
                    "ranks %.9g s\n", tnt__algo_name(cs[i].algo), cs[i].p,
                    cs[i].rph, r.symmetric, r.time, all);
        CU_ASSERT(close_to(r.time, all));
        tnt__topo_fini(&t);
    }
}

/* The broadcast's threshold (select.c, tnt__bcast_binomial_max_bytes)
 * against the model: over rank counts, one rank a host and eight, from
 * 256 KiB to 32 MiB, what the table picks between binomial and the
 * chain is within 1.5 times the model's better one (issue 24's bar for
 * changing the table). The constant 256 KiB of before fails this, e.g.
 * at p = 64, 1 MiB (the chain 3-4 times slower). */
static void test_bcast_threshold(void)
{
    static const int ps[] = {4, 5, 8, 16, 33, 64, 128};
    static const int rphs[] = {1, 8};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        for (size_t j = 0; j < sizeof(rphs) / sizeof(rphs[0]); j++)
            for (size_t n = (size_t)256 << 10; n <= (size_t)32 << 20;
                 n *= 2) {
                tnt_coll_args_t a = args(TNT_COLL_BROADCAST, ps[i], n / 4);
                int algo;
                CU_ASSERT_EQUAL_FATAL(tnt__algo_select(&a, TNT_ALGO_AUTO,
                                                       &algo), TNT_SUCCESS);
                double bin = predict(a, TNT_ALGO_BINOMIAL, rphs[j], 0);
                double pipe = predict(a, TNT_ALGO_PIPELINE, rphs[j], 0);
                double best = bin < pipe ? bin : pipe;
                double got = algo == TNT_ALGO_BINOMIAL ? bin : pipe;
                CU_ASSERT(algo == TNT_ALGO_BINOMIAL ||
                          algo == TNT_ALGO_PIPELINE);
                if (got > 1.5 * best)
                    fprintf(stderr, "\np=%d rph=%d %zu B: %s %.1f us, "
                            "binomial %.1f, pipeline %.1f\n", ps[i],
                            rphs[j], n, tnt__algo_name(algo), got * 1e6,
                            bin * 1e6, pipe * 1e6);
                CU_ASSERT(got <= 1.5 * best);
            }
}

/* The flat allreduce table, one rank a host, against the model with the
 * hdr-ib and tcp-25g presets' figures (tools/tnt-sim.c): the pick is
 * within 1.5x of the best of rd, Rabenseifner, ring and tree. The rule
 * of before (rd up to 64 KiB whatever p, the ring above 2 MiB) fails it:
 * rd 1.7-1.8x slower than Rabenseifner at 32 KiB from 32 ranks on HDR,
 * the ring 1.7-6x slower than the tree at 4 and 16 MiB from 64 ranks. */
static const tnt_model_params_t hdr_ib = {
    .intra = {0.5e-6, 1.0 / 10e9, 0.2e-6},
    .inter = {1.0e-6, 1.0 / 24e9, 0.3e-6},
    .gamma = 1.0 / 8e9, .copy = 1.0 / 10e9, .all_ranks = 0};
static const tnt_model_params_t tcp_25g = {
    .intra = {0.5e-6, 1.0 / 10e9, 0.2e-6},
    .inter = {15e-6, 1.0 / 2.9e9, 2e-6},
    .gamma = 1.0 / 8e9, .copy = 1.0 / 10e9, .all_ranks = 0};

static double play(tnt_coll_args_t a, int algo, int rph,
                   const tnt_model_params_t *m)
{
    tnt_model_result_t r;
    CU_ASSERT_EQUAL_FATAL(tnt__model_run(&a, algo, rph, m, (size_t)1 << 24,
                                         &r), TNT_SUCCESS);
    return r.time;
}

static void check_table(const tnt_model_params_t *m, const char *name,
                        int p, int rph, size_t bytes)
{
    static const int algos[] = {TNT_ALGO_RD, TNT_ALGO_RABENSEIFNER,
                                TNT_ALGO_RING, TNT_ALGO_TREE};
    tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, p, bytes / 4);
    int pick;
    CU_ASSERT_EQUAL_FATAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &pick),
                          TNT_SUCCESS);
    double best = -1, got = -1;
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
        double t = play(a, algos[i], rph, m);
        if (best < 0 || t < best)
            best = t;
        if (algos[i] == pick)
            got = t;
    }
    if (got < 0 || got > 1.5 * best)
        fprintf(stderr, "\n%s p=%d rph=%d %zu B: %s %.1f us, best %.1f us\n",
                name, p, rph, bytes, tnt__algo_name(pick), got * 1e6,
                best * 1e6);
    CU_ASSERT(got > 0 && got <= 1.5 * best);
}

static void test_allreduce_table_large_p(void)
{
    static const int ps[] = {32, 64, 512};
    static const size_t sizes[] = {(size_t)16 << 10, (size_t)32 << 10,
                                   (size_t)64 << 10, (size_t)4 << 20,
                                   (size_t)16 << 20};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
            check_table(&hdr_ib, "hdr-ib", ps[i], 1, sizes[j]);
            check_table(&tcp_25g, "tcp-25g", ps[i], 1, sizes[j]);
        }
}

/* Up to 16 ranks the table is unchanged: rd up to 64 KiB, as measured
 * on loopback at 4 ranks. The model with this machine's loopback
 * figures as bench/calibrate-model.py fitted them (2026-11-26, on the
 * p = 2 rows, docs/scale.md "Calibration": alpha 7.7 us, 4.47 GB/s,
 * reduction 14.0 GB/s, o in alpha), all ranks on one
 * host, keeps rd within 1.5x of Rabenseifner there (0.96x at 4 ranks,
 * 1.07x at 8, 1.16x at 16, at 64 KiB). */
static void test_allreduce_table_one_host(void)
{
    tnt_model_params_t lo = {.intra = {7.7e-6, 1.0 / 4.47e9, 0},
                             .inter = {7.7e-6, 1.0 / 4.47e9, 0},
                             .gamma = 1.0 / 14.0e9, .copy = 1.0 / 14.0e9,
                             .all_ranks = 0};
    for (int p = 3; p <= 16; p++) {
        tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, p, 65536 / 4);
        int pick;
        CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &pick),
                        TNT_SUCCESS);
        CU_ASSERT_EQUAL(pick, TNT_ALGO_RD);
        double rd = play(a, TNT_ALGO_RD, p, &lo);
        double rab = play(a, TNT_ALGO_RABENSEIFNER, p, &lo);
        if (rd > 1.5 * rab)
            fprintf(stderr, "\none host p=%d 64 KiB: rd %.1f us, "
                    "rabenseifner %.1f us\n", p, rd * 1e6, rab * 1e6);
        CU_ASSERT(rd <= 1.5 * rab);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("model", NULL, NULL);
    CU_add_test(s, "ring = textbook, p=2..12", test_ring_textbook);
    CU_add_test(s, "rd = textbook, p=2..64", test_rd_textbook);
    CU_add_test(s, "rd over two hosts", test_rd_two_hosts);
    CU_add_test(s, "tree at p=2", test_tree_two_ranks);
    CU_add_test(s, "one host stands for all", test_symmetry);
    CU_add_test(s, "broadcast threshold within 1.5x of the model's best",
                test_bcast_threshold);
    CU_add_test(s, "allreduce table within 1.5x of the model's best, "
                "one rank a host, 32 to 512 ranks",
                test_allreduce_table_large_p);
    CU_add_test(s, "allreduce rd bound up to 16 ranks, one host",
                test_allreduce_table_one_host);
    CU_basic_set_mode(CU_BRM_NORMAL);
    CU_basic_run_tests();
    int failures = (int)CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
