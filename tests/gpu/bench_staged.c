/*
 * The allreduce on CUDA device buffers (core/devmem.h), staged through
 * host memory (TNT_GPU_IPC=0) and on the GPU path of ranks on one host
 * (devmem_ipc.c), against the host-to-device copy bandwidth measured in
 * the same run (the limit of any staged path; issue 41's goal: 0.8x of
 * it from 16 MiB). Run by tests/gpu/run.sh on a machine with a GPU;
 * ranks are forked by the test harness (all on device 0) over the
 * default transport (shared memory on one host). Rank 0 prints the
 * pinned H2D and D2H copy bandwidth (256 MiB, cudaMemcpy from
 * cudaHostAlloc'd memory, rank 0 alone, before the collectives), then
 * one line per size: the mean time per allreduce staged and on the GPU
 * path, each one's algorithm bandwidth (bytes / time) as a fraction of
 * H2D, their time ratio, and how many timed calls the GPU path took
 * (with the reason if not all). Every element of one checked call per
 * size and mode is compared. GPU_BENCH_MAX_BYTES caps the sizes (a dry
 * run on the CPU stand-ins: LD_PRELOAD of tests' libcuda.so.1 and
 * libcudart.so.13).
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/devmem.h"
#include "harness.h"
#include "util/cuda_rt.h"

#define MAX_BYTES max_bytes()

static size_t max_bytes(void)
{
    const char *v = getenv("GPU_BENCH_MAX_BYTES");
    return v ? (size_t)strtoull(v, NULL, 0) : (size_t)256 << 20;
}

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
        printf("\n# p=%d ranks on one GPU; pinned copies of 256 MiB: H2D "
               "%.2f GB/s, D2H %.2f GB/s\n", p, h2d, d2h);
        fflush(stdout);
    }
    size_t nwrong = 0;
    if (rank == 0) {
        printf("# the same allreduce staged (TNT_GPU_IPC=0) and on the GPU "
               "path (TNT_GPU_IPC=1, TNT_GPU_IPC_MIN_BYTES=0); path: "
               "calls the GPU path took / calls\n%10s %10s %10s %8s %8s "
               "%8s %9s\n", "bytes", "staged us", "gpu us", "stg xH2D",
               "gpu xH2D", "gpu/stg", "path");
        fflush(stdout);
    }
    setenv("TNT_GPU_IPC_MIN_BYTES", "0", 1);
    for (size_t bytes = 8; bytes <= MAX_BYTES; bytes *= 4) {
        size_t n = bytes / 4;
        float *h = pinned;
        int iters = bytes >= ((size_t)64 << 20) ? 5
                    : bytes >= ((size_t)1 << 20) ? 20 : 200;
        double dt[2] = {0, 0};
        uint64_t ipc0 = 0, ipc1 = 0, st;
        char why[240] = "";
        tnt_result_t rc = TNT_SUCCESS;
        for (int mode = 0; mode < 2; mode++) {
            setenv("TNT_GPU_IPC", mode ? "1" : "0", 1);
            for (size_t i = 0; i < n; i++)
                h[i] = 1.0f;
            for (int w = 0; w < 2 && rc == 0; w++)
                rc = tnt_allreduce(comm, TNT_IN_PLACE, dev, n, TNT_F32,
                                   TNT_MAX);
            tnt_barrier(comm);
            if (mode)
                tnt__devmem_gpu_stats(comm, &ipc0, &st, why, sizeof why);
            double t0 = now();
            for (int i = 0; i < iters && rc == 0; i++)
                rc = tnt_allreduce(comm, TNT_IN_PLACE, dev, n, TNT_F32,
                                   TNT_MAX);
            dt[mode] = (now() - t0) / iters;
            if (mode)
                tnt__devmem_gpu_stats(comm, &ipc1, &st, why, sizeof why);
            /* the check: a sum of ones from every rank, once */
            rt->memcpy_sync(dev, h, bytes, 4);
            if (rc == 0)
                rc = tnt_allreduce(comm, TNT_IN_PLACE, dev, n, TNT_F32,
                                   TNT_SUM);
            rt->memcpy_sync(h, dev, bytes, 4);
            nwrong = 0;
            for (size_t i = 0; i < n; i++)
                nwrong += h[i] != (float)p;
            char name[64];
            snprintf(name, sizeof name, "allreduce %zu B %s", bytes,
                     mode ? "gpu" : "staged");
            th_report_check(rep, name, rc, nwrong, 0, NULL, 0);
        }
        if (rank == 0) {
            double g0 = (double)bytes / dt[0] / 1e9,
                   g1 = (double)bytes / dt[1] / 1e9;
            printf("%10zu %10.1f %10.1f %8.3f %8.3f %8.3f %4llu/%-4d%s%s\n",
                   bytes, dt[0] * 1e6, dt[1] * 1e6, g0 / h2d, g1 / h2d,
                   dt[1] / dt[0], (unsigned long long)(ipc1 - ipc0), iters,
                   ipc1 - ipc0 < (uint64_t)iters ? " staged: " : "",
                   ipc1 - ipc0 < (uint64_t)iters ? why : "");
        }
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
