/*
 * The rows of the selection table (tnt__algo_rule, what tnt-info
 * --algorithms prints) against the decision itself (tnt__algo_select):
 * over a sweep of rank counts, sizes around every threshold, host
 * layouts, one host or not, shared buffers or not and CPU counts,
 *   - tnt__algo_select_why picks what tnt__algo_select picks;
 *   - the algorithm is the one of the row it names;
 *   - the size lies within the row's byte bounds, for the rows decided by
 *     size alone (recursive doubling also takes fewer elements than
 *     ranks, above its bound);
 *   - every row but the forced one is reached by some case (the
 *     reproducible mode's rows with TNT_REPRODUCIBLE's flag set);
 *   - the broadcast's threshold, which grows with p, at worked values;
 *   - the allreduce's rd/Rabenseifner bound, which shrinks with p, at
 *     worked values.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/topo.h"

static int in_bounds(const tnt_algo_rule_t *x, size_t bytes)
{
    return bytes >= x->min_bytes && (x->max_bytes == 0 ||
                                     bytes <= x->max_bytes);
}

static void check_case(const tnt_coll_args_t *a, int *seen)
{
    int algo = -1, algo2 = -2, rule = -1;
    CU_ASSERT_EQUAL_FATAL(tnt__algo_select_why(a, TNT_ALGO_AUTO, &algo,
                                               &rule), TNT_SUCCESS);
    CU_ASSERT_EQUAL(tnt__algo_select(a, TNT_ALGO_AUTO, &algo2),
                    TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, algo2);
    const tnt_algo_rule_t *x = tnt__algo_rule(rule);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    if (rule == TNT_RULE_REDUCE) {
        /* A reduce runs the allreduce's choice for the same arguments
         * (shared buffers play no part), an on-host one as direct. */
        tnt_coll_args_t ar = *a;
        ar.kind = TNT_COLL_ALLREDUCE;
        ar.mapped = 0;
        int want;
        CU_ASSERT_EQUAL(tnt__algo_select(&ar, TNT_ALGO_AUTO, &want),
                        TNT_SUCCESS);
        if (tnt__algo_onhost(want))
            want = TNT_ALGO_DIRECT;
        CU_ASSERT_EQUAL(x->algo, -1);
        CU_ASSERT_EQUAL(algo, want);
    } else {
        CU_ASSERT_EQUAL(x->algo, algo);
    }
    CU_ASSERT(x->kind < 0 || x->kind == a->kind);
    size_t bytes = a->count * a->esize;
    if (rule != TNT_RULE_RD)
        CU_ASSERT(in_bounds(x, bytes));
    seen[rule] = 1;
}

static void test_rows_match_decision(void)
{
    static const int ranks[] = {1, 2, 3, 4, 8, 16, 64};
    static const size_t sizes[] = {0, 4, 8192, 8196, 65536, 65540,
                                   262144, 262148, 2097152, 2097156,
                                   4194304, 4980736, 4980740, 16777216};
    static const int kinds[] = {TNT_COLL_ALLREDUCE, TNT_COLL_BROADCAST,
                                TNT_COLL_BARRIER, TNT_COLL_ALLGATHER,
                                TNT_COLL_REDUCE, TNT_COLL_GATHER,
                                TNT_COLL_SCATTER, TNT_COLL_ALLTOALL,
                                TNT_COLL_ALLTOALLV, TNT_COLL_P2P,
                                TNT_COLL_REDUCE_SCATTER};
    int seen[TNT_RULE_COUNT] = {0};
    for (size_t ri = 0; ri < sizeof(ranks) / sizeof(ranks[0]); ri++) {
        int p = ranks[ri];
        int *key = malloc(sizeof(int) * (size_t)p);
        tnt_topo_t topo;
        for (int r = 0; r < p; r++)
            key[r] = r / 2; /* two ranks a host */
        CU_ASSERT_EQUAL_FATAL(tnt__topo_init(&topo, p, key), TNT_SUCCESS);
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
            for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++)
                for (int v = 0; v < 16; v++) {
                    int intra = v & 1, mapped = (v >> 1) & 1;
                    int with_topo = (v >> 2) & 1;
                    int repro = (v >> 3) & 1; /* TNT_REPRODUCIBLE */
                    tnt_coll_args_t a = {
                        .kind = kinds[ki], .dtype = TNT_F32, .op = TNT_SUM,
                        .count = sizes[si] / 4, .esize = 4, .nranks = p,
                        .segment_bytes = 256 << 10,
                        .topo = with_topo && !intra ? &topo : NULL,
                        .intra_host = intra, .mapped = mapped,
                        .reproducible = repro,
                    };
                    check_case(&a, seen);
                }
        tnt__topo_fini(&topo);
        free(key);
    }
    for (int r = 0; r < TNT_RULE_COUNT; r++)
        if (r != TNT_RULE_FORCED)
            CU_ASSERT(seen[r]);
    CU_ASSERT_PTR_NULL(tnt__algo_rule(TNT_RULE_COUNT));
    CU_ASSERT_PTR_NULL(tnt__algo_rule(-1));
}

/* The broadcast's binomial/chain threshold grows with p: values worked
 * out by hand from select.c's rule (k = ceil(1.5 (p-2)/(ceil(log2 p)-1))
 * segments, at least 256 KiB), never shrinking as p grows, and the
 * decision switching exactly there. */
static void test_bcast_threshold_grows(void)
{
    const size_t K = 1024, seg = 256 * K;
    static const struct {
        int p;
        size_t segs; /* 0: the 256 KiB floor */
    } want[] = {{2, 0}, {3, 0}, {4, 3}, {5, 3}, {7, 4}, {8, 5}, {16, 7},
                {17, 6}, {64, 19}, {65, 16}, {512, 96}, {4096, 559}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        size_t got = tnt__bcast_binomial_max_bytes(want[i].p, seg);
        size_t exp = want[i].segs ? want[i].segs * seg : 256 * K;
        if (got != exp)
            printf("\np=%d: %zu, expected %zu\n", want[i].p, got, exp);
        CU_ASSERT_EQUAL(got, exp);
    }
    /* The floor holds for small segments; large ones scale it. */
    CU_ASSERT_EQUAL(tnt__bcast_binomial_max_bytes(64, 4 * K), 256 * K);
    CU_ASSERT_EQUAL(tnt__bcast_binomial_max_bytes(64, 1024 * K),
                    19 * 1024 * K);
    CU_ASSERT_EQUAL(tnt__bcast_binomial_max_bytes(64, 0), 256 * K);
    CU_ASSERT_EQUAL(tnt__bcast_binomial_max_bytes(1 << 20, (size_t)-1),
                    (size_t)-1); /* saturates, no wrap */
    size_t prev = 0;
    for (int p = 2; p <= 4096; p++) {
        size_t t = tnt__bcast_binomial_max_bytes(p, seg);
        /* Not monotone at every p (a new tree level lowers it just past
         * a power of two), but never below the floor and never above
         * the rule's linear bound 1.5 (p-2) segments + one. */
        CU_ASSERT(t >= 256 * K);
        CU_ASSERT(t <= (size_t)(1.5 * (p - 2) + 1) * seg + 256 * K);
        if ((p & (p - 1)) == 0) { /* at powers of two: growing */
            CU_ASSERT(t >= prev);
            prev = t;
        }
    }
    static const int ps[] = {2, 3, 4, 5, 7, 16, 64, 512, 4096};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        size_t max = tnt__bcast_binomial_max_bytes(ps[i], seg);
        tnt_coll_args_t a = {.kind = TNT_COLL_BROADCAST, .dtype = TNT_F32,
                             .op = TNT_SUM, .count = max / 4, .esize = 4,
                             .nranks = ps[i], .segment_bytes = seg};
        int algo = -1, rule = -1;
        CU_ASSERT_EQUAL(tnt__algo_select_why(&a, TNT_ALGO_AUTO, &algo,
                                             &rule), TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo, TNT_ALGO_BINOMIAL);
        CU_ASSERT_EQUAL(rule, TNT_RULE_BINOMIAL);
        a.count++;
        CU_ASSERT_EQUAL(tnt__algo_select_why(&a, TNT_ALGO_AUTO, &algo,
                                             &rule), TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo, TNT_ALGO_PIPELINE);
        CU_ASSERT_EQUAL(rule, TNT_RULE_PIPELINE);
        /* One host over shared memory: staged whatever the size. */
        a.intra_host = 1;
        CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo),
                        TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    }
}

/* Recursive doubling up to 64 KiB to 16 ranks, then 32 KiB x L / (2L - 3)
 * (L = ceil(log2 p)): worked out by hand, never growing with p, never
 * below 16 KiB, and the flat decision switching exactly there. */
static void test_rd_bound_shrinks(void)
{
    static const struct {
        int p;
        size_t max;
    } want[] = {{2, 65536}, {3, 65536}, {8, 65536}, {16, 65536},
                {17, 23405}, {32, 23405}, {33, 21845}, {64, 21845},
                {512, 19660}, {4096, 18724}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        size_t got = tnt__allreduce_rd_max_bytes(want[i].p);
        if (got != want[i].max)
            printf("\np=%d: %zu, expected %zu\n", want[i].p, got,
                   want[i].max);
        CU_ASSERT_EQUAL(got, want[i].max);
    }
    size_t prev = (size_t)-1;
    for (int p = 2; p <= 1 << 16; p++) {
        size_t t = tnt__allreduce_rd_max_bytes(p);
        CU_ASSERT(t <= prev);
        CU_ASSERT(t > 16384);
        prev = t;
    }
    static const int ps[] = {3, 16, 17, 64, 512, 4096};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        size_t max = tnt__allreduce_rd_max_bytes(ps[i]);
        tnt_coll_args_t a = {.kind = TNT_COLL_ALLREDUCE, .dtype = TNT_U8,
                             .op = TNT_SUM, .count = max, .esize = 1,
                             .nranks = ps[i], .segment_bytes = 256 << 10};
        int algo = -1, rule = -1;
        CU_ASSERT_EQUAL(tnt__algo_select_why(&a, TNT_ALGO_AUTO, &algo,
                                             &rule), TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo, TNT_ALGO_RD);
        CU_ASSERT_EQUAL(rule, TNT_RULE_RD);
        a.count++;
        CU_ASSERT_EQUAL(tnt__algo_select_why(&a, TNT_ALGO_AUTO, &algo,
                                             &rule), TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo, TNT_ALGO_RABENSEIFNER);
        CU_ASSERT_EQUAL(rule, TNT_RULE_RAB);
    }
}

/* Rabenseifner's upper bound (select.c): 8 MiB for a power of two up to
 * 16 ranks, else 2 MiB; above it the ring up to 16 ranks, the tree from
 * 17. The flat decision switches exactly at the bound. */
static void test_rab_bound(void)
{
    static const struct {
        int p;
        size_t max;
        int above;
    } want[] = {{3, 2u << 20, TNT_ALGO_RING}, {4, 8u << 20, TNT_ALGO_RING},
                {5, 2u << 20, TNT_ALGO_RING}, {8, 8u << 20, TNT_ALGO_RING},
                {12, 2u << 20, TNT_ALGO_RING},
                {16, 8u << 20, TNT_ALGO_RING},
                {17, 2u << 20, TNT_ALGO_TREE}, {32, 2u << 20, TNT_ALGO_TREE},
                {4096, 2u << 20, TNT_ALGO_TREE}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        size_t max = tnt__allreduce_rab_max_bytes(want[i].p);
        CU_ASSERT_EQUAL(max, want[i].max);
        tnt_coll_args_t a = {.kind = TNT_COLL_ALLREDUCE, .dtype = TNT_U8,
                             .op = TNT_SUM, .count = max, .esize = 1,
                             .nranks = want[i].p, .segment_bytes = 256 << 10};
        int algo = -1, rule = -1;
        CU_ASSERT_EQUAL(tnt__algo_select_why(&a, TNT_ALGO_AUTO, &algo,
                                             &rule), TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo, TNT_ALGO_RABENSEIFNER);
        a.count++;
        CU_ASSERT_EQUAL(tnt__algo_select_why(&a, TNT_ALGO_AUTO, &algo,
                                             &rule), TNT_SUCCESS);
        if (algo != want[i].above)
            printf("\np=%d above %zu: %s\n", want[i].p, max,
                   tnt__algo_name(algo));
        CU_ASSERT_EQUAL(algo, want[i].above);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("select_rules", NULL, NULL);
    CU_add_test(s, "rows match the decision", test_rows_match_decision);
    CU_add_test(s, "broadcast threshold grows with p",
                test_bcast_threshold_grows);
    CU_add_test(s, "rd/Rabenseifner bound shrinks with p",
                test_rd_bound_shrinks);
    CU_add_test(s, "Rabenseifner's bound", test_rab_bound);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failures = (int)CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
