/*
 * The staged allreduce on CUDA device buffers (core/devmem.h) against
 * the host-to-device copy bandwidth measured in the same run, the limit
 * of any path staged through host memory. Run by tests/gpu/run.sh on a
 * machine with a GPU; ranks are forked by the test harness (all on
 * device 0) over the default transport (shared memory on one host). Each rank prints nothing; rank 0
 * prints one line per size: bytes, mean time per allreduce, its
 * algorithm bandwidth (bytes / time), the pinned H2D and D2H copy
 * bandwidth (256 MiB, cudaMemcpy from cudaHostAlloc'd memory, measured
 * by rank 0 alone before the collectives) and the ratio to H2D.
 * Every element of the last iteration's result is checked.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/devmem.h"
#include "harness.h"
#include "util/cuda_rt.h"

#define MAX_BYTES ((size_t)256 << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* GB/s of cudaMemcpy between pinned host memory and the device. */
static double copy_bw(const tnt_cuda_rt_t *rt, void *dev, void *pinned,
                      int to_device)
{
    for (int w = 0; w < 2; w++)
        rt->memcpy_sync(to_device ? dev : pinned, to_device ? pinned : dev,
                        MAX_BYTES, 4);
    double t0 = now();
    for (int i = 0; i < 5; i++)
        rt->memcpy_sync(to_device ? dev : pinned, to_device ? pinned : dev,
                        MAX_BYTES, 4);
    return 5.0 * (double)MAX_BYTES / (now() - t0) / 1e9;
}

static int rank_bench(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)arg;
    const tnt_cuda_rt_t *rt = tnt__cuda_rt();
    th_report_expect(rep, "runtime", rt != NULL, 0, "%s",
                     rt ? "ok" : tnt_last_error());
    if (!rt)
        return 0;
    tnt__devmem_use(NULL, 0);
    void *dev = NULL, *pinned = NULL;
    int err = rt->malloc_device(&dev, MAX_BYTES);
    if (!err)
        err = rt->host_alloc(&pinned, MAX_BYTES, 0);
    th_report_expect(rep, "alloc", err == 0, 0, "%s",
                     tnt__cuda_strerror(err));
    if (err)
        return 0;
    double h2d = 0, d2h = 0;
    if (rank == 0) {
        h2d = copy_bw(rt, dev, pinned, 1);
        d2h = copy_bw(rt, dev, pinned, 0);
        printf("# p=%d ranks on one GPU; pinned copies of 256 MiB: H2D %.2f "
               "GB/s, D2H %.2f GB/s\n# bytes  us/allreduce  GB/s  "
               "x H2D\n", p, h2d, d2h);
        fflush(stdout);
    }
    size_t nwrong = 0;
    for (size_t bytes = 8; bytes <= MAX_BYTES; bytes *= 4) {
        size_t n = bytes / 4;
        float *h = pinned;
        for (size_t i = 0; i < n; i++)
            h[i] = 1.0f;
        int iters = bytes >= ((size_t)64 << 20) ? 5
                    : bytes >= ((size_t)1 << 20) ? 20 : 200;
        tnt_result_t rc = TNT_SUCCESS;
        for (int w = 0; w < 2 && rc == 0; w++)
            rc = tnt_allreduce(comm, TNT_IN_PLACE, dev, n, TNT_F32, TNT_MAX);
        tnt_barrier(comm);
        double t0 = now();
        for (int i = 0; i < iters && rc == 0; i++)
            rc = tnt_allreduce(comm, TNT_IN_PLACE, dev, n, TNT_F32, TNT_MAX);
        double dt = (now() - t0) / iters;
        /* the check: a sum of ones from every rank, once */
        rt->memcpy_sync(dev, h, bytes, 4);
        if (rc == 0)
            rc = tnt_allreduce(comm, TNT_IN_PLACE, dev, n, TNT_F32, TNT_SUM);
        rt->memcpy_sync(h, dev, bytes, 4);
        for (size_t i = 0; i < n; i++)
            nwrong += h[i] != (float)p;
        char name[64];
        snprintf(name, sizeof name, "allreduce %zu B", bytes);
        th_report_check(rep, name, rc, nwrong, 0, NULL, 0);
        if (rank == 0)
            printf("%10zu %12.1f %7.2f %6.2f\n", bytes, dt * 1e6,
                   (double)bytes / dt / 1e9, (double)bytes / dt / 1e9 / h2d);
        fflush(stdout);
    }
    rt->free_host(pinned);
    rt->free_device(dev);
    return 0;
}

static void bench(void)
{
    const char *ps = getenv("GPU_BENCH_RANKS"); /* run.sh: 2 */
    int p = ps ? atoi(ps) : 2;
    const char *env[] = {NULL}; /* the default transport: shm */
    th_run(p, env, rank_bench, NULL, 500, NULL);
}

static const th_test_def_t k_tests[] = {
    {"gpu", "staged allreduce bandwidth", bench}, {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
