/*
 * The hierarchical allreduce with real processes: ranks split into fake
 * hosts by TNT_HOST_ID (shared memory within a host, TCP between), in
 * blocks of 4 hosts x 2 ranks and interleaved as 3 hosts of 3/2/1 ranks.
 * Each rank checks its result against a reference it computes itself,
 * the harness checks that all ranks hold the same bits, and the integer
 * results must be identical with TNT_TOPOLOGY=flat and with the
 * hierarchy (float sums differ in their last bits: other order). Also:
 * which algorithm auto picks, and clear errors for bad settings.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "harness.h"

typedef struct hier_job {
    int keys[8]; /* rank -> fake host */
} hier_job_t;

static const hier_job_t k_4x2 = {{0, 0, 1, 1, 2, 2, 3, 3}};
static const hier_job_t k_321 = {{0, 1, 0, 2, 1, 0}}; /* 3/2/1 */

static tnt_result_t init_on_host(const hier_job_t *j, int rank,
                                 tnt_comm_t *comm)
{
    char id[32];
    snprintf(id, sizeof(id), "fakehost%d", j->keys[rank]);
    setenv("TNT_HOST_ID", id, 1);
    return tnt_comm_init_from_env(comm);
}

/* Inputs: floats with fractions (sums round), integers of both signs. */
static double in_f(int rank, size_t i)
{
    return (double)(((size_t)rank * 7919 + i * 104729) % 1000) / 997.0;
}

static int64_t in_i(int rank, size_t i)
{
    return (int64_t)(((size_t)rank * 31 + i * 17) % 1001) - 500;
}

typedef struct hcase {
    tnt_dtype_t dt;
    tnt_op_t op;
} hcase_t;

static const hcase_t k_cases[] = {
    {TNT_F32, TNT_SUM}, {TNT_F64, TNT_AVG}, {TNT_I32, TNT_SUM},
    {TNT_I64, TNT_MAX}, {TNT_U8, TNT_MIN},
};
static const size_t k_counts[] = {0, 1, 5, 1000, 65537, 300007};

static void fill(void *x, tnt_dtype_t dt, int rank, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case TNT_F32: ((float *)x)[i] = (float)in_f(rank, i); break;
        case TNT_F64: ((double *)x)[i] = (double)in_i(rank, i); break;
        case TNT_I32: ((int32_t *)x)[i] = (int32_t)in_i(rank, i); break;
        case TNT_I64: ((int64_t *)x)[i] = in_i(rank, i); break;
        default: ((uint8_t *)x)[i] = (uint8_t)((in_i(rank, i) + 500) % 251);
            break;
        }
    }
}

/* Wrong elements of the result, against a reference computed here. */
static size_t verify(const void *x, tnt_dtype_t dt, tnt_op_t op, int p,
                     size_t n, size_t *first)
{
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        double ref = 0;
        int64_t iref = dt == TNT_I64 ? INT64_MIN : dt == TNT_U8 ? 255 : 0;
        for (int r = 0; r < p; r++) {
            ref += dt == TNT_F32 ? in_f(r, i) : (double)in_i(r, i);
            int64_t v = dt == TNT_U8 ? (in_i(r, i) + 500) % 251 : in_i(r, i);
            iref = op == TNT_MAX ? (v > iref ? v : iref)
                 : op == TNT_MIN ? (v < iref ? v : iref) : iref + v;
        }
        int ok;
        switch (dt) {
        case TNT_F32: ok = fabs(((const float *)x)[i] - ref) < 1e-4 * p;
            break;
        case TNT_F64: ok = ((const double *)x)[i] == ref / p; break;
        case TNT_I32: ok = ((const int32_t *)x)[i] == iref; break;
        case TNT_I64: ok = ((const int64_t *)x)[i] == iref; break;
        default: ok = ((const uint8_t *)x)[i] == iref; break;
        }
        if (!ok && wrong++ == 0)
            *first = i;
    }
    return wrong;
}

static int run_cases(tnt_comm_t comm, int rank, int nranks, void *arg,
                     th_report_t *rep)
{
    (void)comm;
    tnt_comm_t c = NULL;
    tnt_result_t rc = init_on_host(arg, rank, &c);
    th_report_check(rep, "init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 1;
    for (size_t k = 0; k < sizeof(k_cases) / sizeof(k_cases[0]); k++)
        for (size_t ci = 0; ci < sizeof(k_counts) / sizeof(k_counts[0]);
             ci++) {
            const hcase_t *hc = &k_cases[k];
            size_t n = k_counts[ci], first = 0, es = tnt_dtype_size(hc->dt);
            if (n > 70000 && hc->dt != TNT_F32 && hc->dt != TNT_I32)
                continue; /* the large size for two types is enough */
            void *x = malloc(n * es + 1);
            fill(x, hc->dt, rank, n);
            rc = tnt_allreduce(c, x, x, n, hc->dt, hc->op);
            size_t wrong = verify(x, hc->dt, hc->op, nranks, n, &first);
            char name[48];
            snprintf(name, sizeof(name), "%s_%s_n%zu",
                     tnt_dtype_name(hc->dt), tnt_op_name(hc->op), n);
            th_report_check(rep, name, rc, wrong, first, x, n * es);
            free(x);
        }
    /* Which algorithm runs: hierarchical for 1 MiB unless flat; small
     * messages stay flat unless it is forced. */
    static const size_t probe[] = {8, 1 << 18};
    for (int i = 0; i < 2; i++) {
        float *x = calloc(probe[i], sizeof(float));
        tnt_request_t req = NULL;
        rc = tnt_iallreduce(c, x, x, probe[i], TNT_F32, TNT_SUM, &req);
        int algo = rc == TNT_SUCCESS ? req->algo : -1;
        if (rc == TNT_SUCCESS) {
            rc = tnt_wait(req);
            tnt_request_free(req);
        }
        th_report_expect(rep, i ? "algo_large" : "algo_small",
                         rc == TNT_SUCCESS, rc, "%s",
                         tnt__algo_name(algo));
        free(x);
    }
    tnt_comm_free(c);
    return 0;
}

/* Run the cases under env; 0 on success. */
static int run(const char *name, int n, const hier_job_t *j,
               const char *const *env, th_result_t *out)
{
    th_job_t job = {name, n, env, run_cases, (void *)j, 240, 1, 0};
    return th_run_job(&job, out);
}

static const char *algo_of(const th_result_t *r, int rank, const char *c)
{
    const th_case_t *k = th_find_case(r, rank, c);
    return k ? k->msg : "(missing)";
}

static void compare(const char *layout, int n, const hier_job_t *j)
{
    static const char *const env_auto[] = {"TNT_TRANSPORT=auto", NULL};
    static const char *const env_flat[] = {"TNT_TRANSPORT=auto",
                                           "TNT_TOPOLOGY=flat", NULL};
    static const char *const env_forced[] = {
        "TNT_TRANSPORT=auto", "TNT_ALLREDUCE_ALGO=hierarchical", NULL};
    th_result_t ra, rf, rh;
    char name[64];
    snprintf(name, sizeof(name), "%s auto", layout);
    int bad = run(name, n, j, env_auto, &ra);
    snprintf(name, sizeof(name), "%s flat", layout);
    bad += run(name, n, j, env_flat, &rf);
    snprintf(name, sizeof(name), "%s hierarchical", layout);
    bad += run(name, n, j, env_forced, &rh);
    CU_ASSERT_EQUAL(bad, 0);
    for (int r = 0; r < n && !bad; r++) {
        TH_CHECK(strcmp(algo_of(&ra, r, "algo_large"), "hierarchical") == 0,
                 "%s auto, rank %d: 1 MiB ran %s", layout, r,
                 algo_of(&ra, r, "algo_large"));
        TH_CHECK(strcmp(algo_of(&ra, r, "algo_small"), "rd") == 0,
                 "%s auto, rank %d: 32 B ran %s", layout, r,
                 algo_of(&ra, r, "algo_small"));
        TH_CHECK(strcmp(algo_of(&rf, r, "algo_large"), "hierarchical") != 0,
                 "%s flat, rank %d: 1 MiB ran hierarchical", layout, r);
        TH_CHECK(strcmp(algo_of(&rh, r, "algo_small"), "hierarchical") == 0,
                 "%s forced, rank %d: 32 B ran %s", layout, r,
                 algo_of(&rh, r, "algo_small"));
    }
    /* Integer results do not depend on the order of reduction: flat and
     * hierarchical must agree bit for bit. Float sums may differ; count
     * how many cases do, for the record. */
    int float_diff = 0;
    for (size_t i = 0; !bad && i < ra.ranks[0].ncases; i++) {
        const th_case_t *h = &rh.ranks[0].cases[i];
        const th_case_t *f = th_find_case(&rf, 0, h->name);
        if (!h->has_hash || !f)
            continue;
        if (strncmp(h->name, "f32", 3) == 0)
            float_diff += f->hash != h->hash;
        else
            TH_CHECK(f->hash == h->hash, "%s: %s differs between flat and "
                     "hierarchical", layout, h->name);
    }
    if (!bad)
        printf("\n  %s: %d f32 case(s) differ bitwise between flat and "
               "hierarchical ", layout, float_diff);
    th_result_free(&ra);
    th_result_free(&rf);
    th_result_free(&rh);
}

static void test_4x2(void)
{
    compare("4x2", 8, &k_4x2);
}

static void test_321(void)
{
    compare("3/2/1", 6, &k_321);
}

static int bad_setting(tnt_comm_t comm, int rank, int nranks, void *arg,
                       th_report_t *rep)
{
    (void)comm;
    (void)nranks;
    tnt_comm_t c = NULL;
    tnt_result_t rc = init_on_host(&k_4x2, rank, &c);
    const char *want = arg;
    th_report_expect(rep, "config_error", rc == TNT_ERR_CONFIG &&
                     strstr(tnt_last_error(), want), rc, "%s",
                     tnt_last_error());
    if (c)
        tnt_comm_free(c);
    return 0;
}

static void test_bad_settings(void)
{
    static const char *const env_bogus[] = {"TNT_TOPOLOGY=tree", NULL};
    static const char *const env_both[] = {
        "TNT_TOPOLOGY=flat", "TNT_ALLREDUCE_ALGO=hierarchical", NULL};
    th_job_t job = {"TNT_TOPOLOGY=tree", 2, env_bogus, bad_setting,
                    "TNT_TOPOLOGY='tree'", 60, 1, 0};
    th_run_job(&job, NULL);
    th_job_t job2 = {"flat + hierarchical", 2, env_both, bad_setting,
                     "contradicts", 60, 1, 0};
    th_run_job(&job2, NULL);
}

static const th_test_def_t k_tests[] = {
    {"hier", "4x2", test_4x2},
    {"hier", "3_2_1", test_321},
    {"hier", "bad_settings", test_bad_settings},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
