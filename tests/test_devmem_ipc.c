/*
 * The GPU-side allreduce of ranks on one host (core/devmem_ipc.c) on a
 * machine without a GPU: the stand-in driver and runtime
 * (fake_libcuda.c, fake_libcudart.c), loaded before the ranks are
 * forked, give "device" memory that forked ranks share through IPC
 * handles, and run the library's own kernel code on the CPU. Every
 * element is checked against a reference computed here, bit for bit
 * (inputs chosen so that every reduction is exact; avg's one rounding
 * computed here with the compiler's _Float16 and a bf16 rounding of its
 * own), at p = 2, 3, 4 and counts around the 64-element chunk alignment
 * and primes; that the calls took the GPU path; the handle cache (each
 * peer buffer opened once over repeated calls, a buffer allocated anew
 * reopened); the fallbacks to staging with their reasons (below the
 * size, switched off, another dtype, a handle refused on one rank, peer
 * GPUs without peer access, ranks on two hosts) with right results; a
 * kernel that fails on one rank is an error on every rank and the
 * communicator still works.
 *
 * TNT_TEST_DEVMEM_CUDA=1 (tests/gpu/run.sh, on a GPU): the same on the
 * real CUDA (every rank on device 0; p = 2 and 4), less the faults that
 * only the stand-in can make.
 */
#include <CUnit/CUnit.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/devmem.h"
#include "harness.h"
#include "util/cuda_rt.h"
#include "util/error.h"

static int cuda_mode(void)
{
    const char *v = getenv("TNT_TEST_DEVMEM_CUDA");
    return v && *v == '1';
}

/* A library built without nvcc has no kernel: every call is staged, for
 * that reason, and the cases of the GPU path itself are left out. */
#ifdef TNT_TEST_HAVE_PTX
static const int k_kernel = 1;
#else
static const int k_kernel = 0;
#endif

static const tnt_cuda_rt_t *rt(void)
{
    const tnt_cuda_rt_t *r = tnt__cuda_rt();
    if (!r)
        fprintf(stderr, "no CUDA runtime: %s\n", tnt_last_error());
    CU_ASSERT_FATAL(r != NULL);
    return r;
}

static void *dalloc(size_t n)
{
    void *p = NULL;
    int err = rt()->malloc_device(&p, n ? n : 1);
    if (err)
        fprintf(stderr, "cudaMalloc(%zu): %s\n", n, tnt__cuda_strerror(err));
    CU_ASSERT_FATAL(err == 0);
    return p;
}

static void put(void *d, const void *h, size_t n)
{
    CU_ASSERT_FATAL(n == 0 || rt()->memcpy_sync(d, h, n, 4) == 0);
}

static void get(void *h, const void *d, size_t n)
{
    CU_ASSERT_FATAL(n == 0 || rt()->memcpy_sync(h, d, n, 4) == 0);
}

/* ---- values and the reference ------------------------------------------- */

/* Small integers (products of +-1 and 2): every reduction exact. */
static int ival(int op, int rank, size_t i)
{
    if (op == TNT_PROD)
        return (int)((rank + i) % 3) == 2 ? -1 : (int)((rank + i) % 3) + 1;
    return (int)((rank * 7 + i * 3) % 13) - 4;
}

/* bf16 of a float, nearest, ties to even: by comparing the two
 * neighbours (not the kernel's bit trick). */
static uint16_t ref_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u;
    float flo, fhi;
    memcpy(&flo, &lo, 4);
    memcpy(&fhi, &hi, 4);
    double dl = (double)f - flo, dh = (double)fhi - f;
    if (dl < 0)
        dl = -dl;
    if (dh < 0)
        dh = -dh;
    uint32_t pick = dl < dh ? lo : dh < dl ? hi : ((lo >> 16) & 1) ? hi : lo;
    return (uint16_t)(pick >> 16);
}

static uint16_t ref_f16(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}

/* Element i of the expected result, as the dtype's bits (in out[8]). */
static void expect(tnt_dtype_t t, int op, int p, size_t i, void *out)
{
    double acc = ival(op, 0, i);
    for (int r = 1; r < p; r++) {
        double v = ival(op, r, i);
        acc = op == TNT_PROD ? acc * v : op == TNT_MIN ? (v < acc ? v : acc)
              : op == TNT_MAX ? (v > acc ? v : acc) : acc + v;
    }
    float f = (float)acc;
    if (op == TNT_AVG)
        f = f / (float)p; /* the one rounding, in f32 (f64: below) */
    switch (t) {
    case TNT_F32: memcpy(out, &f, 4); break;
    case TNT_F64: {
        double d = op == TNT_AVG ? acc / p : acc;
        memcpy(out, &d, 8);
        break;
    }
    case TNT_F16: { uint16_t b = ref_f16(f); memcpy(out, &b, 2); break; }
    default: { uint16_t b = ref_bf16(f); memcpy(out, &b, 2); break; }
    }
}

static void input(tnt_dtype_t t, int op, int rank, size_t n, void *buf)
{
    for (size_t i = 0; i < n; i++) {
        float f = (float)ival(op, rank, i);
        double d = f;
        uint16_t b;
        switch (t) {
        case TNT_F32: memcpy((char *)buf + 4 * i, &f, 4); break;
        case TNT_F64: memcpy((char *)buf + 8 * i, &d, 8); break;
        case TNT_F16: b = ref_f16(f); memcpy((char *)buf + 2 * i, &b, 2); break;
        default: b = ref_bf16(f); memcpy((char *)buf + 2 * i, &b, 2); break;
        }
    }
}

static int g_nonblocking; /* check_one calls tnt_iallreduce */

/* One allreduce of n elements on device buffers, every element checked;
 * in place or not. Returns the call's rc. */
static tnt_result_t check_one(tnt_comm_t comm, int rank, int p,
                              th_report_t *rep, tnt_dtype_t t, int op,
                              size_t n, int in_place, void *ds, void *dr,
                              const char *tag)
{
    size_t es = tnt_dtype_size(t);
    unsigned char *h = th_xmalloc(n * es + 8), *w = th_xmalloc(8);
    input(t, op, rank, n, h);
    put(in_place ? dr : ds, h, n * es);
    tnt_result_t rc;
    if (g_nonblocking) { /* tnt_iallreduce, waited */
        tnt_request_t req;
        rc = tnt_iallreduce(comm, in_place ? TNT_IN_PLACE : ds, dr, n, t, op,
                            &req);
        if (rc == TNT_SUCCESS) {
            rc = tnt_wait(req);
            tnt_request_free(req);
        }
    } else {
        rc = tnt_allreduce(comm, in_place ? TNT_IN_PLACE : ds, dr, n, t, op);
    }
    get(h, dr, n * es);
    size_t nw = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        expect(t, op, p, i, w);
        if (memcmp(h + i * es, w, es) != 0 && !nw++)
            first = i;
    }
    char name[96];
    snprintf(name, sizeof name, "%s %s op%d n=%zu%s", tag, tnt_dtype_name(t),
             op, n, in_place ? " in place" : "");
    th_report_check(rep, name, rc, nw, first, h, n * es);
    free(h);
    free(w);
    return rc;
}

static void stats(tnt_comm_t comm, uint64_t *ipc, uint64_t *staged,
                  char *why, size_t n)
{
    tnt__devmem_gpu_stats(comm, ipc, staged, why, n);
}

/* ---- every dtype and op on the GPU path ---------------------------------- */

static const size_t k_counts[] = {1, 63, 64, 65, 1009, 4099};
static const tnt_dtype_t k_types[] = {TNT_F32, TNT_F64, TNT_F16, TNT_BF16};

static int rank_all(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)arg;
    tnt__devmem_use(NULL, 0);
    size_t maxn = 300007; /* a prime: many blocks, uneven chunks */
    void *ds = dalloc(maxn * 8), *dr = dalloc(maxn * 8);
    int calls = 0;
    for (size_t ti = 0; ti < 4; ti++)
        for (int op = TNT_SUM; op <= TNT_MAX; op++)
            for (size_t ci = 0; ci < sizeof k_counts / sizeof k_counts[0];
                 ci++)
                for (int inpl = 0; inpl < 2; inpl++, calls++)
                    check_one(comm, rank, p, rep, k_types[ti], op,
                              k_counts[ci], inpl, ds, dr, "gpu");
    check_one(comm, rank, p, rep, TNT_F32, TNT_SUM, maxn, 0, ds, dr, "gpu");
    calls++;
    /* Nonblocking: on the GPU at the post, the request finished. */
    g_nonblocking = 1;
    for (size_t ti = 0; ti < 4; ti++, calls += 2) {
        check_one(comm, rank, p, rep, k_types[ti], TNT_AVG, 1009, 0, ds, dr,
                  "nonblocking");
        check_one(comm, rank, p, rep, k_types[ti], TNT_MIN, 65, 1, ds, dr,
                  "nonblocking");
    }
    g_nonblocking = 0;
    uint64_t ipc, staged;
    char why[240];
    stats(comm, &ipc, &staged, why, sizeof why);
    if (k_kernel)
        th_report_expect(rep, "all on the GPU path",
                         ipc == (uint64_t)calls && staged == 0, 0,
                         "%llu of %d on the GPU, %llu staged (%s)",
                         (unsigned long long)ipc, calls,
                         (unsigned long long)staged, why);
    else
        th_report_expect(rep, "all staged: no kernel",
                         ipc == 0 && staged == (uint64_t)calls &&
                         strstr(why, "without the GPU kernel"), 0,
                         "%llu on the GPU, %llu of %d staged (%s)",
                         (unsigned long long)ipc,
                         (unsigned long long)staged, calls, why);
    rt()->free_device(ds);
    rt()->free_device(dr);
    return 0;
}

static void test_all(void)
{
    static const int ps[] = {2, 3, 4}, gpu_ps[] = {2, 4};
    const char *env[] = {"TNT_GPU_IPC_MIN_BYTES=0", NULL};
    size_t n = cuda_mode() ? 2 : 3;
    for (size_t k = 0; k < n; k++)
        th_run(cuda_mode() ? gpu_ps[k] : ps[k], env, rank_all, NULL, 240,
               NULL);
}

/* ---- the handle cache ------------------------------------------------------ */

static int rank_cache(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)arg;
    tnt__devmem_use(NULL, 0);
    size_t n = 4099;
    void *ds = dalloc(n * 4), *dr = dalloc(n * 4);
    for (int i = 0; i < 10; i++)
        check_one(comm, rank, p, rep, TNT_F32, TNT_SUM, n, 0, ds, dr,
                  "cached");
    tnt_ipc_cache_stats_t s;
    tnt__ipc_cache_stats(&s);
    uint64_t peers = (uint64_t)p - 1;
    th_report_expect(rep, "opened once", s.opens == 2 * peers &&
                     s.hits == 18 * peers && s.live == 2 * peers, 0,
                     "opens %llu hits %llu live %llu (want %llu, %llu, %llu)",
                     (unsigned long long)s.opens, (unsigned long long)s.hits,
                     (unsigned long long)s.live,
                     (unsigned long long)(2 * peers),
                     (unsigned long long)(18 * peers),
                     (unsigned long long)(2 * peers));
    /* A receive buffer freed and allocated again (often at the same
     * address, with a new handle): opened anew, results right. */
    rt()->free_device(dr);
    dr = dalloc(n * 4);
    for (int i = 0; i < 3; i++)
        check_one(comm, rank, p, rep, TNT_F32, TNT_SUM, n, 0, ds, dr,
                  "reallocated");
    tnt__ipc_cache_stats(&s);
    th_report_expect(rep, "reopened", s.opens == 3 * peers &&
                     s.live >= 2 * peers && s.live <= 3 * peers &&
                     s.live + s.closes == 3 * peers, 0,
                     "opens %llu live %llu closes %llu",
                     (unsigned long long)s.opens, (unsigned long long)s.live,
                     (unsigned long long)s.closes);
    /* In place: one handle per peer buffer. */
    void *di = dalloc(n * 4);
    check_one(comm, rank, p, rep, TNT_F32, TNT_MAX, n, 1, NULL, di,
              "in place");
    tnt_ipc_cache_stats_t s2;
    tnt__ipc_cache_stats(&s2);
    th_report_expect(rep, "in place opens one", s2.opens == s.opens + peers,
                     0, "opens %llu -> %llu", (unsigned long long)s.opens,
                     (unsigned long long)s2.opens);
    rt()->free_device(ds);
    rt()->free_device(dr);
    rt()->free_device(di);
    return 0;
}

static void test_cache(void)
{
    if (!k_kernel)
        return; /* no GPU path: nothing opened */
    const char *env[] = {"TNT_GPU_IPC_MIN_BYTES=0", NULL};
    th_run(3, env, rank_cache, NULL, 120, NULL);
    if (cuda_mode())
        th_run(2, env, rank_cache, NULL, 120, NULL);
}

/* ---- the fallbacks --------------------------------------------------------- */

/* One staged allreduce (results checked) and its reason on every rank. */
static void staged_case(tnt_comm_t comm, int rank, int p, th_report_t *rep,
                        size_t n, const char *name, const char *want_why)
{
    void *ds = dalloc(n * 4), *dr = dalloc(n * 4);
    uint64_t ipc0, st0, ipc1, st1;
    char why[240];
    stats(comm, &ipc0, &st0, why, sizeof why);
    check_one(comm, rank, p, rep, TNT_F32, TNT_SUM, n, 0, ds, dr, name);
    stats(comm, &ipc1, &st1, why, sizeof why);
    char cname[96];
    snprintf(cname, sizeof cname, "%s: staged, why", name);
    th_report_expect(rep, cname, ipc1 == ipc0 && st1 == st0 + 1 &&
                     strstr(why, want_why), 0, "ipc %llu->%llu staged "
                     "%llu->%llu, why \"%s\" (want \"%s\")",
                     (unsigned long long)ipc0, (unsigned long long)ipc1,
                     (unsigned long long)st0, (unsigned long long)st1, why,
                     want_why);
    rt()->free_device(ds);
    rt()->free_device(dr);
}

static int rank_fallback(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    (void)arg;
    tnt__devmem_use(NULL, 0);
    /* The default threshold (64 KiB). */
    staged_case(comm, rank, p, rep, 1009, "small",
                "below TNT_GPU_IPC_MIN_BYTES");
    setenv("TNT_GPU_IPC_MIN_BYTES", "0", 1);
    setenv("TNT_GPU_IPC", "0", 1);
    staged_case(comm, rank, p, rep, 1009, "off", "TNT_GPU_IPC=0");
    unsetenv("TNT_GPU_IPC");
    /* Another dtype: i32 sums, staged. */
    {
        size_t n = 517;
        int32_t *h = th_xmalloc(n * 4);
        void *d = dalloc(n * 4);
        for (size_t i = 0; i < n; i++)
            h[i] = (int32_t)(rank * 1000 + i);
        put(d, h, n * 4);
        tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, d, n, TNT_I32,
                                        TNT_SUM);
        get(h, d, n * 4);
        size_t nw = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (h[i] != (int32_t)(1000 * p * (p - 1) / 2 + p * (int)i) &&
                !nw++)
                first = i;
        th_report_check(rep, "i32 staged", rc, nw, first, h, n * 4);
        uint64_t ipc, st;
        char why[240];
        stats(comm, &ipc, &st, why, sizeof why);
        th_report_expect(rep, "i32 why", strstr(why, "not i32") != NULL, 0,
                         "%s", why);
        rt()->free_device(d);
        free(h);
    }
    if (cuda_mode() || !k_kernel)
        return 0;
    /* A handle refused by the driver on rank 1 (get), rank 2 (open). */
    if (rank == 1)
        setenv("FAKE_CUDA_IPC_GET_FAIL", "1", 1);
    staged_case(comm, rank, p, rep, 1009, "get refused",
                "rank 1: no IPC handle");
    unsetenv("FAKE_CUDA_IPC_GET_FAIL");
    if (rank == 2)
        setenv("FAKE_CUDA_IPC_OPEN_FAIL", "1", 1);
    staged_case(comm, rank, p, rep, 1009, "open refused",
                "rank 2: cuIpcOpenMemHandle");
    unsetenv("FAKE_CUDA_IPC_OPEN_FAIL");
    /* Rank 1 on the second GPU: without peer access staged, with it on
     * the GPU path. */
    if (rank == 1)
        CU_ASSERT_FATAL(rt()->set_device(1) == 0);
    setenv("FAKE_CUDA_NO_P2P", "1", 1);
    staged_case(comm, rank, p, rep, 1009, "no p2p", "no peer access");
    unsetenv("FAKE_CUDA_NO_P2P");
    {
        void *ds = dalloc(1009 * 2), *dr = dalloc(1009 * 2);
        uint64_t ipc0, ipc1, st;
        char why[240];
        stats(comm, &ipc0, &st, why, sizeof why);
        check_one(comm, rank, p, rep, TNT_BF16, TNT_AVG, 1009, 0, ds, dr,
                  "p2p");
        stats(comm, &ipc1, &st, why, sizeof why);
        th_report_expect(rep, "p2p on the GPU", ipc1 == ipc0 + 1, 0,
                         "ipc %llu -> %llu", (unsigned long long)ipc0,
                         (unsigned long long)ipc1);
        rt()->free_device(ds);
        rt()->free_device(dr);
    }
    if (rank == 1)
        CU_ASSERT_FATAL(rt()->set_device(0) == 0);
    /* The kernel fails on rank 0: an error on every rank, naming it;
     * then the communicator works. */
    {
        size_t n = 1009;
        void *d = dalloc(n * 4);
        float *h = th_xmalloc(n * 4);
        for (size_t i = 0; i < n; i++)
            h[i] = 1.0f;
        put(d, h, n * 4);
        if (rank == 0)
            setenv("FAKE_CUDA_LAUNCH_FAIL", "1", 1);
        tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, d, n, TNT_F32,
                                        TNT_SUM);
        unsetenv("FAKE_CUDA_LAUNCH_FAIL");
        th_report_expect(rep, "kernel failed", rc == TNT_ERR_SYSTEM &&
                         strstr(tnt_last_error(), "rank 0: the reduction "
                                "kernel failed"), rc, "%s",
                         tnt_last_error());
        free(h);
        rt()->free_device(d);
        check_one(comm, rank, p, rep, TNT_F32, TNT_SUM, n, 0, dalloc(n * 4),
                  dalloc(n * 4), "after the failure");
    }
    return 0;
}

static void test_fallback(void)
{
    th_run(3, NULL, rank_fallback, NULL, 120, NULL);
}

/* ---- host memory on one rank, device memory on the others --------------- */

static int rank_mixed(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)arg, (void)p;
    tnt__devmem_use(NULL, 0);
    size_t n = 1009;
    float *h = th_xmalloc(n * 4);
    for (size_t i = 0; i < n; i++)
        h[i] = 1.0f;
    void *buf = h;
    if (rank != 0) {
        buf = dalloc(n * 4);
        put(buf, h, n * 4);
    }
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, n, TNT_F32,
                                    TNT_SUM);
    th_report_expect(rep, "refused", rc < 0, rc, "rc %d: %s", (int)rc,
                     tnt_last_error());
    free(h);
    return 0;
}

static void test_mixed(void)
{
    const char *env[] = {"TNT_GPU_IPC_MIN_BYTES=0", "TNT_TIMEOUT=20", NULL};
    th_run(3, env, rank_mixed, NULL, 60, NULL);
}

/* ---- ranks on two hosts -------------------------------------------------- */

/* Ranks 0, 1 on one (fake) host and 2, 3 on another: the call is staged,
 * for that reason, decided without a message. */
static int rank_hosts(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)comm, (void)arg;
    char id[32];
    snprintf(id, sizeof id, "fakehost%d", rank / 2);
    setenv("TNT_HOST_ID", id, 1);
    tnt_comm_t c;
    tnt_result_t rc = tnt_comm_init_from_env(&c);
    th_report_expect(rep, "init", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    if (rc < 0)
        return 1;
    tnt__devmem_use(NULL, 0);
    staged_case(c, rank, p, rep, 4099, "two hosts", "not all on one host");
    tnt_comm_free(c);
    return 0;
}

static void test_hosts(void)
{
    const char *env[] = {"TNT_GPU_IPC_MIN_BYTES=0", NULL};
    th_job_t job = {"two hosts", 4, env, rank_hosts, NULL, 120, 1, 0};
    th_run_job(&job, NULL);
}

static const th_test_def_t k_tests[] = {
    {"devmem_ipc", "every dtype and op", test_all},
    {"devmem_ipc", "handle cache", test_cache},
    {"devmem_ipc", "fallbacks", test_fallback},
    {"devmem_ipc", "host and device mixed", test_mixed},
    {"devmem_ipc", "ranks on two hosts", test_hosts},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    if (!cuda_mode()) {
        /* The stand-ins, before any rank is forked: the library finds
         * them by their sonames (libcuda.so.1, libcudart.so.13). */
        const char *drv = getenv("FAKE_LIBCUDA"), *run = getenv("FAKE_LIBCUDART");
        if (!drv || !run || !dlopen(drv, RTLD_NOW | RTLD_GLOBAL) ||
            !dlopen(run, RTLD_NOW | RTLD_GLOBAL)) {
            fprintf(stderr, "test_devmem_ipc: FAKE_LIBCUDA and "
                    "FAKE_LIBCUDART must name the stand-ins (%s)\n",
                    dlerror());
            return 1;
        }
    }
    return th_main(argc, argv, k_tests);
}
