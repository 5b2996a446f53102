/*
 * The bucket planner (lib/fusion/plan.h) checked without a network. Random
 * tensor lists (1..500 tensors of 1 B..4 MiB, mixed dtypes) are planned
 * under every combination of thresholds, bucket limits and first-bucket
 * thresholds, and each plan is held against two things written here from
 * the rule in plan.h alone: a list of properties any correct plan has
 * (an in-order partition, one dtype per bucket, no bucket over the limit
 * unless it is a single tensor, every bucket closed for a reason the rule
 * names, 64-aligned disjoint buffer slots) and an independent planner
 * whose plan must match bucket by bucket. Hand-made lists pin the rule to
 * concrete numbers so that the reference itself cannot drift, and the
 * plan hash must follow every input the plan depends on.
 *
 * Every list comes from a fixed seed, so a failure names a list that can
 * be rebuilt: the message gives the seed and the parameters.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/plan.h"
#include "harness.h"

#define MAX_TENSORS 500
#define MAX_TENSOR_BYTES ((size_t)4 << 20)
#define ALIGN 64
#define HUGE_THRESHOLD (SIZE_MAX / 2)
#define NUM_LISTS 300

static const size_t k_thresholds[] = {0, 1, 4096, 32768, 1 << 20,
                                      HUGE_THRESHOLD};
static const size_t k_maxes[] = {SIZE_MAX, 65536, 1 << 20};
/* SIZE_MAX stands for "first = min" in this table. */
static const size_t k_firsts[] = {SIZE_MAX, 1024};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- deterministic random lists ----------------------------------------- */


static tnt_dtype_t rnd_dtype(th_rng_t *r)
{
    return (tnt_dtype_t)th_rnd_below(r, TNT_DTYPE_COUNT);
}

/* Sizes that sit on or next to the thresholds and limits of the tables
 * above, where ">= threshold" and "past max" are decided. */
static const size_t k_edge_bytes[] = {1024, 1023, 1025, 4096, 4032, 4160,
                                      32768, 32704, 32832, 65536, 65472,
                                      65600, 1 << 20, (1 << 20) - 64,
                                      MAX_TENSOR_BYTES};

static size_t rnd_bytes(th_rng_t *r)
{
    if (th_rnd_below(r, 8) == 0)
        return k_edge_bytes[th_rnd_below(r, NELEM(k_edge_bytes))];
    /* Log-uniform over 1 B .. 4 MiB: most tensors small, some huge, as in
     * real models (biases next to weight matrices). */
    size_t e = th_rnd_below(r, 23);
    size_t lo = (size_t)1 << e;
    size_t b = lo + th_rnd_below(r, lo);
    return b > MAX_TENSOR_BYTES ? MAX_TENSOR_BYTES : b;
}

/* A random list: n tensors whose dtypes are all equal, come in runs, or
 * change at random, so that dtype boundaries are rare in some lists and
 * everywhere in others. Returns n. */
static size_t make_list(uint64_t seed, tnt_plan_tensor_t *t)
{
    th_rng_t r = {seed};
    size_t n = 1 + th_rnd_below(&r, MAX_TENSORS);
    int mode = (int)th_rnd_below(&r, 3);
    tnt_dtype_t dt = rnd_dtype(&r);
    for (size_t i = 0; i < n; i++) {
        if (mode == 2 || (mode == 1 && th_rnd_below(&r, 8) == 0))
            dt = rnd_dtype(&r);
        size_t es = tnt_dtype_size(dt);
        size_t count = rnd_bytes(&r) / es;
        if (count == 0)
            count = 1;
        t[i].count = count;
        t[i].bytes = count * es;
        t[i].dtype = dt;
    }
    return n;
}

/* ---- the reference planner ----------------------------------------------- */

typedef struct ref_bucket {
    size_t first, n, count, bytes;
    tnt_dtype_t dtype;
} ref_bucket_t;

/* a + b > max, without overflow (a may already exceed max). */
static int sum_exceeds(size_t a, size_t b, size_t max)
{
    return a > max || b > max - a;
}

/*
 * plan.h's rule, written bucket by bucket: a bucket starts at the first
 * unplaced tensor and takes the following ones while it is below its
 * threshold and the next one has its dtype, fits under max and is itself
 * below the threshold.
 */
static size_t ref_plan(const tnt_plan_tensor_t *t, size_t n, size_t min,
                       size_t max, size_t first, ref_bucket_t *out)
{
    size_t nb = 0, i = 0;
    while (i < n) {
        size_t threshold = nb == 0 ? first : min;
        ref_bucket_t b = {i, 0, 0, 0, t[i].dtype};
        do {
            b.n++;
            b.count += t[i].count;
            b.bytes += t[i].bytes;
            i++;
        } while (i < n && b.bytes < threshold && t[i].dtype == b.dtype &&
                 !sum_exceeds(b.bytes, t[i].bytes, max) &&
                 t[i].bytes < threshold);
        out[nb++] = b;
    }
    return nb;
}

/* ---- checks -------------------------------------------------------------- */

typedef struct params {
    size_t min, max, first;
} params_t;

static size_t align_up(size_t x)
{
    return (x + ALIGN - 1) / ALIGN * ALIGN;
}

/*
 * The properties every plan must have, whatever planner made it. Writes
 * the first violation into msg and returns 0, or returns 1.
 */
static int check_properties(const tnt_plan_tensor_t *t, size_t n,
                            const params_t *p, const tnt_bucket_t *b,
                            size_t nb, size_t buffer_bytes, char *msg,
                            size_t msglen)
{
#define FAIL(...)                                                           \
    do {                                                                    \
        snprintf(msg, msglen, __VA_ARGS__);                                 \
        return 0;                                                           \
    } while (0)
    if ((n == 0) != (nb == 0))
        FAIL("%zu buckets for %zu tensors", nb, n);
    if (nb > n)
        FAIL("%zu buckets for only %zu tensors", nb, n);
    size_t next = 0, slot_end = 0, aligned_sum = 0;
    for (size_t k = 0; k < nb; k++) {
        if (b[k].first != next || b[k].n == 0 || b[k].n > n - next)
            FAIL("bucket %zu holds tensors %zu..+%zu, expected to start at "
                 "%zu with at least one tensor", k, b[k].first, b[k].n,
                 next);
        size_t count = 0, bytes = 0;
        for (size_t i = b[k].first; i < b[k].first + b[k].n; i++) {
            if (t[i].dtype != b[k].dtype)
                FAIL("bucket %zu (%s) holds tensor %zu of dtype %s", k,
                     tnt_dtype_name(b[k].dtype), i,
                     tnt_dtype_name(t[i].dtype));
            count += t[i].count;
            bytes += t[i].bytes;
        }
        if (count != b[k].count || bytes != b[k].bytes)
            FAIL("bucket %zu says %zu elements / %zu bytes, its tensors "
                 "hold %zu / %zu", k, b[k].count, b[k].bytes, count, bytes);
        if (b[k].bytes > p->max && b[k].n > 1)
            FAIL("bucket %zu holds %zu tensors and %zu bytes, over the "
                 "limit of %zu", k, b[k].n, b[k].bytes, p->max);
        size_t threshold = k == 0 ? p->first : p->min;
        /* It closed too late: it had reached its threshold before its
         * last tensor joined. */
        if (b[k].n > 1 &&
            b[k].bytes - t[b[k].first + b[k].n - 1].bytes >= threshold)
            FAIL("bucket %zu reached its threshold %zu before its last "
                 "tensor %zu joined", k, threshold,
                 b[k].first + b[k].n - 1);
        /* A tensor that reaches the threshold by itself joined others:
         * it is copied into the fusion buffer for nothing. */
        for (size_t i = b[k].first + 1; i < b[k].first + b[k].n; i++)
            if (t[i].bytes >= threshold)
                FAIL("bucket %zu: tensor %zu (%zu bytes) reaches the "
                     "threshold %zu by itself but joined tensor %zu", k, i,
                     t[i].bytes, threshold, b[k].first);
        /* It closed too early: below its threshold, and the next tensor
         * has its dtype, fits and is below the threshold itself. */
        size_t after = b[k].first + b[k].n;
        if (b[k].bytes < threshold && after < n &&
            t[after].dtype == b[k].dtype &&
            !sum_exceeds(b[k].bytes, t[after].bytes, p->max) &&
            t[after].bytes < threshold)
            FAIL("bucket %zu closed at %zu bytes, below its threshold %zu, "
                 "although tensor %zu (%zu bytes, same dtype, below the "
                 "threshold) fits under the limit %zu", k, b[k].bytes,
                 threshold, after, t[after].bytes, p->max);
        /* Buffer slots: aligned, in order, disjoint. */
        if (b[k].offset % ALIGN != 0)
            FAIL("bucket %zu at buffer offset %zu, not %d-aligned", k,
                 b[k].offset, ALIGN);
        if (b[k].offset < slot_end)
            FAIL("bucket %zu at buffer offset %zu overlaps the previous "
                 "bucket, which ends at %zu", k, b[k].offset, slot_end);
        slot_end = b[k].offset + b[k].bytes;
        if (slot_end > buffer_bytes)
            FAIL("bucket %zu ends at %zu, past the buffer of %zu bytes", k,
                 slot_end, buffer_bytes);
        aligned_sum += align_up(b[k].bytes);
        next = after;
    }
    if (next != n)
        FAIL("the buckets cover %zu of %zu tensors", next, n);
    if (buffer_bytes != aligned_sum)
        FAIL("buffer of %zu bytes; plan.h promises the sum of the 64-aligned "
             "bucket sizes, %zu", buffer_bytes, aligned_sum);
    return 1;
#undef FAIL
}

static size_t dtype_runs(const tnt_plan_tensor_t *t, size_t n)
{
    size_t runs = 0;
    for (size_t i = 0; i < n; i++)
        runs += i == 0 || t[i].dtype != t[i - 1].dtype;
    return runs;
}

/* Plan one list with one parameter set and check it every way. Returns 1
 * if all was well (failures are asserted here). */
static int check_one(uint64_t seed, const tnt_plan_tensor_t *t, size_t n,
                     const params_t *p, ref_bucket_t *ref)
{
    char what[200];
    snprintf(what, sizeof what, "list seed %llu (%zu tensors), min %zu, "
             "max %zu, first %zu", (unsigned long long)seed, n, p->min,
             p->max, p->first);
    tnt_bucket_t *b = NULL;
    size_t nb = SIZE_MAX, buffer = SIZE_MAX;
    tnt_result_t rc = tnt__fusion_plan(t, n, p->min, p->max, p->first, &b,
                                       &nb, &buffer);
    TH_CHECK(rc == TNT_SUCCESS, "%s: tnt__fusion_plan returned %d (%s): "
             "'%s'", what, rc, tnt_strerror(rc), tnt_last_error());
    if (rc != TNT_SUCCESS)
        return 0;
    char msg[400];
    int ok = check_properties(t, n, p, b, nb, buffer, msg, sizeof msg);
    TH_CHECK(ok, "%s: %s", what, msg);

    size_t rnb = ref_plan(t, n, p->min, p->max, p->first, ref);
    size_t k = 0;
    while (k < nb && k < rnb && b[k].first == ref[k].first &&
           b[k].n == ref[k].n)
        k++;
    int same = k == nb && k == rnb;
    TH_CHECK(same, "%s: the plan differs from the reference: %zu buckets, "
             "expected %zu; first difference at bucket %zu: tensors "
             "%zu..+%zu, expected %zu..+%zu", what, nb, rnb, k,
             k < nb ? b[k].first : 0, k < nb ? b[k].n : 0,
             k < rnb ? ref[k].first : 0, k < rnb ? ref[k].n : 0);
    ok = ok && same;

    /* The two rules the plan.h comment spells out. */
    if (p->min == 0 && p->first == 0) {
        TH_CHECK(nb == n, "%s: threshold 0 gave %zu buckets, expected one "
                 "per tensor", what, nb);
        ok = ok && nb == n;
    }
    if (p->min == HUGE_THRESHOLD && p->first == HUGE_THRESHOLD &&
        p->max == SIZE_MAX) {
        size_t runs = dtype_runs(t, n);
        TH_CHECK(nb == runs, "%s: a huge threshold gave %zu buckets, "
                 "expected one per dtype run (%zu)", what, nb, runs);
        ok = ok && nb == runs;
    }
    free(b);
    return ok;
}

/* ---- tests --------------------------------------------------------------- */

static void test_random_lists(void)
{
    tnt_plan_tensor_t *t = calloc(MAX_TENSORS, sizeof *t);
    ref_bucket_t *ref = calloc(MAX_TENSORS, sizeof *ref);
    CU_ASSERT_FATAL(t != NULL && ref != NULL);
    int failed_lists = 0;
    for (uint64_t s = 1; s <= NUM_LISTS && failed_lists < 5; s++) {
        size_t n = make_list(s, t);
        int ok = 1;
        for (size_t a = 0; a < NELEM(k_thresholds) && ok; a++)
            for (size_t m = 0; m < NELEM(k_maxes) && ok; m++)
                for (size_t f = 0; f < NELEM(k_firsts) && ok; f++) {
                    params_t p = {k_thresholds[a], k_maxes[m],
                                  k_firsts[f] == SIZE_MAX ? k_thresholds[a]
                                                          : k_firsts[f]};
                    /* The first failure of a list says enough. */
                    ok = check_one(s, t, n, &p, ref);
                }
        failed_lists += !ok;
    }
    free(t);
    free(ref);
}

/* Plans worked out by hand from the plan.h rule, to pin the rule (and the
 * reference planner above) to concrete numbers. */
typedef struct hand_case {
    const char *what;
    size_t n;
    size_t bytes[6];
    tnt_dtype_t dtype[6];
    size_t min, max, first;
    size_t nb;
    size_t sizes[6]; /* tensors per bucket */
} hand_case_t;

#define U8 TNT_U8
#define F32 TNT_F32
#define F64 TNT_F64
static const hand_case_t k_hand[] = {
    {"pairs reach 80 B", 4, {40, 40, 40, 40}, {F32, F32, F32, F32}, 80,
     SIZE_MAX, 80, 2, {2, 2}},
    {"a small first bucket", 4, {40, 40, 40, 40}, {F32, F32, F32, F32}, 80,
     SIZE_MAX, 1, 3, {1, 2, 1}},
    {"a large first bucket", 4, {40, 40, 40, 40}, {F32, F32, F32, F32}, 40,
     SIZE_MAX, 120, 2, {3, 1}},
    {"threshold 0", 3, {4, 8, 4}, {F32, F32, F32}, 0, SIZE_MAX, 0, 3,
     {1, 1, 1}},
    {"threshold 1", 3, {1, 1, 1}, {U8, U8, U8}, 1, SIZE_MAX, 1, 3,
     {1, 1, 1}},
    {"the threshold is reached exactly", 3, {16, 16, 16}, {U8, U8, U8}, 32,
     SIZE_MAX, 32, 2, {2, 1}},
    {"dtype runs", 4, {40, 40, 80, 40}, {F32, F32, F64, F32},
     HUGE_THRESHOLD, SIZE_MAX, HUGE_THRESHOLD, 3, {2, 1, 1}},
    {"the limit splits", 5, {30, 30, 30, 30, 30}, {U8, U8, U8, U8, U8},
     HUGE_THRESHOLD, 64, HUGE_THRESHOLD, 3, {2, 2, 1}},
    {"the limit is reached exactly", 4, {32, 32, 32, 32}, {U8, U8, U8, U8},
     HUGE_THRESHOLD, 64, HUGE_THRESHOLD, 2, {2, 2}},
    /* A tensor larger than the limit is a bucket of its own: nothing may
     * join it afterwards, although it is below the threshold. */
    {"a tensor over the limit stands alone", 3, {100, 10, 10},
     {U8, U8, U8}, HUGE_THRESHOLD, 64, HUGE_THRESHOLD, 2, {1, 2}},
    {"a tensor over the limit after others", 4, {10, 100, 10, 10},
     {U8, U8, U8, U8}, HUGE_THRESHOLD, 64, HUGE_THRESHOLD, 3, {1, 1, 2}},
    {"the limit below the threshold", 4, {40, 40, 40, 40},
     {F32, F32, F32, F32}, 1000, 100, 1000, 2, {2, 2}},
    /* A tensor that reaches the threshold by itself is never copied to
     * fuse: the open bucket closes before it, below the threshold. */
    {"a large tensor starts its own bucket", 4, {12, 12, 100, 12},
     {U8, U8, U8, U8}, 64, SIZE_MAX, 64, 3, {2, 1, 1}},
    {"... measured against the open bucket's threshold", 5,
     {10, 20, 10, 10, 70}, {U8, U8, U8, U8, U8}, 64, SIZE_MAX, 16, 3,
     {1, 3, 1}},
};
#undef U8
#undef F32
#undef F64

static void test_hand_made(void)
{
    for (size_t c = 0; c < NELEM(k_hand); c++) {
        const hand_case_t *h = &k_hand[c];
        tnt_plan_tensor_t t[6];
        for (size_t i = 0; i < h->n; i++) {
            t[i].dtype = h->dtype[i];
            t[i].bytes = h->bytes[i];
            t[i].count = h->bytes[i] / tnt_dtype_size(h->dtype[i]);
        }
        /* The reference must agree with the hand-worked plan... */
        ref_bucket_t ref[6];
        size_t rnb = ref_plan(t, h->n, h->min, h->max, h->first, ref);
        int rsame = rnb == h->nb;
        for (size_t k = 0; rsame && k < rnb; k++)
            rsame = ref[k].n == h->sizes[k];
        TH_CHECK(rsame, "hand case '%s': the test's own reference planner "
                 "disagrees with the hand-worked plan", h->what);

        /* ... and so must the library. */
        tnt_bucket_t *b = NULL;
        size_t nb = 0, buffer = 0;
        tnt_result_t rc = tnt__fusion_plan(t, h->n, h->min, h->max,
                                           h->first, &b, &nb, &buffer);
        TH_CHECK(rc == TNT_SUCCESS, "hand case '%s': tnt__fusion_plan "
                 "returned %d (%s): '%s'", h->what, rc, tnt_strerror(rc),
                 tnt_last_error());
        if (rc != TNT_SUCCESS)
            continue;
        char got[128] = "", want[128] = "";
        size_t gl = 0, wl = 0;
        for (size_t k = 0; k < nb && gl < 100; k++)
            gl += (size_t)snprintf(got + gl, sizeof got - gl, " %zu",
                                   b[k].n);
        for (size_t k = 0; k < h->nb && wl < 100; k++)
            wl += (size_t)snprintf(want + wl, sizeof want - wl, " %zu",
                                   h->sizes[k]);
        TH_CHECK(strcmp(got, want) == 0, "hand case '%s' (min %zu, max %zu, "
                 "first %zu): tensors per bucket:%s, expected:%s", h->what,
                 h->min, h->max, h->first, got, want);
        char msg[400];
        params_t p = {h->min, h->max, h->first};
        TH_CHECK(check_properties(t, h->n, &p, b, nb, buffer, msg,
                                  sizeof msg),
                 "hand case '%s': %s", h->what, msg);
        free(b);
    }
}

/* An empty list is a valid plan of no buckets: plan.c chose success over
 * an error, and a framework with no gradients has nothing to reduce. */
static void test_empty_list(void)
{
    tnt_plan_tensor_t one = {1, 4, TNT_F32};
    tnt_bucket_t *b = NULL;
    size_t nb = 77, buffer = 77;
    tnt_result_t rc = tnt__fusion_plan(&one, 0, 32768, SIZE_MAX, 32768, &b,
                                       &nb, &buffer);
    TH_CHECK(rc == TNT_SUCCESS && nb == 0 && buffer == 0,
             "an empty list gave rc %d (%s), %zu buckets and a buffer of "
             "%zu bytes; expected success, 0 and 0 ('%s')", rc,
             tnt_strerror(rc), nb, buffer, tnt_last_error());
    if (rc == TNT_SUCCESS)
        free(b);
    uint64_t h0 = tnt__fusion_plan_hash(&one, 0, 32768, SIZE_MAX, 32768,
                                        TNT_AVG);
    uint64_t h0b = tnt__fusion_plan_hash(NULL, 0, 32768, SIZE_MAX, 32768,
                                         TNT_AVG);
    uint64_t h1 = tnt__fusion_plan_hash(&one, 1, 32768, SIZE_MAX, 32768,
                                        TNT_AVG);
    TH_CHECK(h0 == h0b, "the hash of an empty list depends on the pointer");
    TH_CHECK(h0 != h1, "an empty list hashes like a list of one tensor");
}

/* Tensors whose buffer slots together exceed the address space cannot be
 * planned: a clear error, not a wrapped-around offset. */
static void test_address_space_overflow(void)
{
    tnt_plan_tensor_t t[3];
    for (int i = 0; i < 3; i++) {
        t[i].dtype = TNT_U8;
        t[i].count = t[i].bytes = SIZE_MAX / 2 - 100;
    }
    tnt_bucket_t *b = NULL;
    size_t nb = 0, buffer = 0;
    tnt_result_t rc = tnt__fusion_plan(t, 3, 0, SIZE_MAX, 0, &b, &nb,
                                       &buffer);
    TH_CHECK(rc < 0 && tnt_last_error()[0],
             "three tensors of SIZE_MAX/2 bytes were planned: rc %d (%s), "
             "%zu buckets, buffer of %zu bytes ('%s')", rc,
             tnt_strerror(rc), nb, buffer, tnt_last_error());
    if (rc == TNT_SUCCESS)
        free(b);
}

/* ---- the plan hash ------------------------------------------------------- */

static uint64_t hash_of(const tnt_plan_tensor_t *t, size_t n,
                        const params_t *p, int op)
{
    return tnt__fusion_plan_hash(t, n, p->min, p->max, p->first, op);
}

static void set_count(tnt_plan_tensor_t *t, size_t count)
{
    t->count = count;
    t->bytes = count * tnt_dtype_size(t->dtype);
}

static void test_hash(void)
{
    tnt_plan_tensor_t *t = calloc(MAX_TENSORS, sizeof *t);
    tnt_plan_tensor_t *u = calloc(MAX_TENSORS, sizeof *u);
    CU_ASSERT_FATAL(t != NULL && u != NULL);
    int failures = 0;
    for (uint64_t s = 1000; s < 1100 && failures < 10; s++) {
        size_t n = make_list(s, t);
        th_rng_t r = {s * 7919};
        params_t p = {k_thresholds[th_rnd_below(&r, NELEM(k_thresholds))],
                      k_maxes[th_rnd_below(&r, NELEM(k_maxes))], 1024};
        int op = th_rnd_below(&r, 2) ? TNT_AVG : TNT_SUM;
        uint64_t base = hash_of(t, n, &p, op);
        int before = (int)CU_get_number_of_failures();
#define DIFFERS(cond, ...)                                                  \
    TH_CHECK(cond, "list seed %llu (%zu tensors): the hash does not change "\
             "when " __VA_ARGS__)

        /* Equal input, other memory: equal hash. */
        memcpy(u, t, n * sizeof *t);
        params_t q = p;
        TH_CHECK(hash_of(u, n, &q, op) == base, "list seed %llu: equal "
                 "lists in different memory hash differently",
                 (unsigned long long)s);

        size_t k = th_rnd_below(&r, n);
        set_count(&u[k], t[k].count + 1);
        DIFFERS(hash_of(u, n, &p, op) != base, "the count of tensor %zu "
                "grows by one", (unsigned long long)s, n, k);
        if (t[k].count > 1) {
            set_count(&u[k], t[k].count - 1);
            DIFFERS(hash_of(u, n, &p, op) != base, "the count of tensor %zu "
                    "shrinks by one", (unsigned long long)s, n, k);
        }
        u[k] = t[k];
        for (int d = 0; d < TNT_DTYPE_COUNT; d++) {
            if ((tnt_dtype_t)d == t[k].dtype)
                continue;
            /* Same count: a dtype of the same width keeps even the byte
             * size equal, and must still count. */
            u[k].dtype = (tnt_dtype_t)d;
            u[k].bytes = u[k].count * tnt_dtype_size(u[k].dtype);
            DIFFERS(hash_of(u, n, &p, op) != base, "tensor %zu changes "
                    "from %s to %s", (unsigned long long)s, n, k,
                    tnt_dtype_name(t[k].dtype), tnt_dtype_name(u[k].dtype));
        }
        u[k] = t[k];
        if (n > 1) {
            DIFFERS(hash_of(u, n - 1, &p, op) != base, "the last tensor is "
                    "dropped", (unsigned long long)s, n);
            size_t j = (k + 1) % n;
            if (t[j].count != t[k].count || t[j].dtype != t[k].dtype) {
                u[k] = t[j];
                u[j] = t[k];
                DIFFERS(hash_of(u, n, &p, op) != base, "tensors %zu and %zu "
                        "swap places", (unsigned long long)s, n, k, j);
                u[k] = t[k];
                u[j] = t[j];
            }
        }
        q = p;
        q.min = p.min + 1;
        DIFFERS(hash_of(t, n, &q, op) != base, "the threshold changes by 1",
                (unsigned long long)s, n);
        q = p;
        q.max = p.max - 1;
        DIFFERS(hash_of(t, n, &q, op) != base, "the bucket limit changes",
                (unsigned long long)s, n);
        q = p;
        q.first = p.first + 1;
        DIFFERS(hash_of(t, n, &q, op) != base, "the first-bucket threshold "
                "changes", (unsigned long long)s, n);
        if (p.min != p.first) {
            q = p;
            q.min = p.first;
            q.first = p.min;
            DIFFERS(hash_of(t, n, &q, op) != base, "the threshold and the "
                    "first-bucket threshold swap", (unsigned long long)s, n);
        }
        for (int o = 0; o < TNT_OP_COUNT; o++)
            if (o != op)
                DIFFERS(hash_of(t, n, &p, o) != base, "the op changes from "
                        "%s to %s", (unsigned long long)s, n,
                        tnt_op_name((tnt_op_t)op), tnt_op_name((tnt_op_t)o));
#undef DIFFERS
        failures += (int)CU_get_number_of_failures() != before;
    }
    free(t);
    free(u);
}

static const th_test_def_t k_tests[] = {
    {"fusion_plan", "hand-made plans", test_hand_made},
    {"fusion_plan", "random lists against the reference", test_random_lists},
    {"fusion_plan", "empty list", test_empty_list},
    {"fusion_plan", "address space overflow", test_address_space_overflow},
    {"fusion_plan", "plan hash", test_hash},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
