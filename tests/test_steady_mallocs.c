/*
 * No allocation per iteration in steady state: the test binary interposes
 * malloc/calloc/realloc (counting, then forwarding to glibc), and every
 * rank of a 3-rank job counts the allocations made by the whole process —
 * its own thread and the progress thread — during 40 training-like
 * iterations (fusion of 60 tensors reported in a per-rank order, plus
 * plain allreduces and a broadcast) after 10 warm-up iterations: far
 * fewer than one per collective (see MAX_ALLOCS). Sanitizer builds replace malloc themselves, so there the test
 * is skipped (exit 77).
 */
#include <CUnit/Basic.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "harness.h"
#include "tnt/plugin.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNTING 0
#else
#define COUNTING 1
static atomic_long allocations;

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

void *malloc(size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    atomic_fetch_add(&allocations, 1);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __libc_realloc(p, n);
}
#endif

/* What is deterministic is reserved when the fusion context is created
 * (schedules, one request and one scratch buffer per bucket), so that part
 * allocates nothing. Buffers for messages that arrive before this rank has
 * posted their collective grow to the largest number in flight at once,
 * which depends on timing: measured here, 0 to 56 allocations in 40
 * iterations on the rank that receives most early messages, 0 or 1 on the
 * others. The bound checks that nothing is allocated per collective (an
 * iteration runs about 45; before the caches there were about 250
 * allocations per iteration) without failing on a timing peak. */
enum { NT = 60, WARMUP = 10, ITERS = 40, MAX_ALLOCS = 4 * ITERS };

static int steady_rank(tnt_comm_t comm, int rank, int nranks, void *arg,
                       th_report_t *rep)
{
    (void)nranks;
    (void)arg;
    tnt_tensor_desc_t d[NT];
    size_t total = 0;
    for (int i = 0; i < NT; i++) {
        tnt_tensor_desc_t x = TNT_TENSOR_DESC_INIT;
        x.count = 1 + (size_t)((i * 7919) % 6000);
        x.dtype = (i % 10 == 9) ? TNT_F64 : TNT_F32;
        d[i] = x;
        total += x.count * tnt_dtype_size(x.dtype);
    }
    /* Even tensors share one allocation (contiguous: reduced in place),
     * odd ones have their own (packed). */
    unsigned char *arena = malloc(total);
    void *data[NT];
    size_t off = 0;
    for (int i = 0; i < NT; i++) {
        size_t bytes = d[i].count * tnt_dtype_size(d[i].dtype);
        data[i] = (i % 2 == 0) ? arena + off : malloc(bytes);
        off += bytes;
    }
    float big[20000], small[7];
    tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
    cfg.min_bucket_bytes = 4096;
    tnt_fusion_t f = NULL;
    tnt_result_t rc = tnt_fusion_create(comm, d, NT, &cfg, &f);
    th_report_check(rep, "create", rc, 0, 0, NULL, 0);
    long before = 0, after = 0;
    for (int it = 0; rc == TNT_SUCCESS && it < WARMUP + ITERS; it++) {
#if COUNTING
        if (it == WARMUP)
            before = atomic_load(&allocations);
#endif
        for (int k = 0; k < NT && rc == TNT_SUCCESS; k++) {
            /* A per-rank order (multipliers coprime to NT make it a
             * permutation): tensors become ready differently. */
            static const int mult[] = {7, 11, 13, 17, 19, 23, 29, 31};
            int i = (k * mult[rank % 8] + it) % NT;
            rc = tnt_fusion_ready(f, (size_t)i, data[i]);
        }
        if (rc == TNT_SUCCESS)
            rc = tnt_fusion_wait_all(f);
        if (rc == TNT_SUCCESS)
            rc = tnt_allreduce(comm, TNT_IN_PLACE, big, 20000, TNT_F32,
                               TNT_SUM);
        if (rc == TNT_SUCCESS)
            rc = tnt_allreduce(comm, TNT_IN_PLACE, small, 7, TNT_F32,
                               TNT_MAX);
        if (rc == TNT_SUCCESS)
            rc = tnt_broadcast(comm, small, 7, TNT_F32, it % 3);
    }
#if COUNTING
    after = atomic_load(&allocations);
#endif
    th_report_check(rep, "iterations", rc, 0, 0, NULL, 0);
    th_report_expect(rep, "steady_state_allocations",
                     after - before <= MAX_ALLOCS, (tnt_result_t)0,
                     "rank %d: %ld allocations in %d iterations after "
                     "warm-up (at most %d expected)", rank, after - before,
                     ITERS, MAX_ALLOCS);
    if (getenv("TNT_TEST_VERBOSE"))
        fprintf(stderr, "rank %d: %ld allocations in %d iterations\n", rank,
                after - before, ITERS);
    if (f)
        tnt_fusion_free(f);
    for (int i = 1; i < NT; i += 2)
        free(data[i]);
    free(arena);
    return 0;
}

static void test_steady_state(void)
{
    const char *env[] = {NULL};
    th_job_t job = {"steady state p=3", 3, env, steady_rank, NULL, 120, 0,
                    0};
    th_run_job(&job, NULL);
}

int main(void)
{
    if (!COUNTING) {
        printf("test_steady_mallocs: skipped: a sanitizer replaces malloc in this "
               "build\n");
        return 77;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("steady_mallocs", NULL, NULL);
    CU_add_test(s, "no allocation per collective (fusion + collectives)",
                test_steady_state);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failures = (int)CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
