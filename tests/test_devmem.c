/*
 * Device buffers staged through pinned host buffers (core/devmem.h),
 * with a host-memory stand-in for CUDA behind the same table of copy
 * functions: "device" memory is one arena of this process, and copies
 * are queued and run only when an event or the stream is waited on, so a
 * pipeline that read a slot before waiting for its copy, or reused a
 * slot too early, reads stale data and fails here. Slots of 192 bytes
 * cut every buffer in many segments (at p = 7 an allgather segment is 6
 * f32). Real multi-rank collectives check every element against an
 * independent reference and the same bits on every rank; then bad input:
 * host memory on one rank where the others pass device memory, a rank
 * whose pinned allocation fails, calls that do not stage device memory.
 *
 * TNT_TEST_DEVMEM_CUDA=1 (tests/gpu/run.sh, on a machine with a GPU):
 * the same cases on real device memory (cudaMalloc, every rank on device
 * 0) through CUDA's copy engine, with the same 192-byte slots; the
 * pinned-allocation failure and the pool count are the stand-in's only.
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

/* ---- the stand-in ----------------------------------------------------- */

#define ARENA_BYTES ((size_t)8 << 20)
#define SLOT_BYTES 192
#define QMAX 4096

static unsigned char *g_arena;
static size_t g_arena_used;
static int g_fail_pinned;       /* alloc_pinned fails */
static int g_pinned_allocs;     /* alloc_pinned calls that succeeded */

typedef struct hcopy { void *dst; const void *src; size_t n; } hcopy_t;
typedef struct hstream {
    hcopy_t q[QMAX];
    size_t head, tail;          /* run: [0, head); queued: [head, tail) */
    size_t ev[2];               /* queue position each event waits for */
} hstream_t;

static int h_is_device(const void *p)
{
    const unsigned char *b = p;
    return b >= g_arena && b < g_arena + ARENA_BYTES ? 1 : 0;
}

static tnt_result_t h_open(int dev, void **out)
{
    CU_ASSERT_EQUAL(dev, 0);
    *out = calloc(1, sizeof(hstream_t));
    return *out ? TNT_SUCCESS : TNT_ERR_NO_MEMORY;
}

static void h_close(void *s) { free(s); }

static tnt_result_t h_alloc_pinned(size_t n, void **p)
{
    if (g_fail_pinned)
        return tnt__error(TNT_ERR_NO_MEMORY, "stand-in: pinned allocation "
                          "of %zu bytes refused", n);
    *p = malloc(n);
    g_pinned_allocs++;
    return *p ? TNT_SUCCESS : TNT_ERR_NO_MEMORY;
}

static void h_free_pinned(void *p) { free(p); }

static tnt_result_t h_copy(void *stream, void *dst, const void *src,
                           size_t n)
{
    hstream_t *s = stream;
    if (s->tail == QMAX)
        return tnt__error(TNT_ERR_INTERNAL, "stand-in queue full");
    s->q[s->tail++] = (hcopy_t){dst, src, n};
    return TNT_SUCCESS;
}

static void run_to(hstream_t *s, size_t pos)
{
    for (; s->head < pos; s->head++)
        memcpy(s->q[s->head].dst, s->q[s->head].src, s->q[s->head].n);
    if (s->head == s->tail) /* all done: the queue starts over */
        s->head = s->tail = s->ev[0] = s->ev[1] = 0;
}

static tnt_result_t h_mark(void *stream, int ev)
{
    hstream_t *s = stream;
    s->ev[ev] = s->tail;
    return TNT_SUCCESS;
}

static tnt_result_t h_wait(void *stream, int ev)
{
    hstream_t *s = stream;
    run_to(s, s->ev[ev] > s->head ? s->ev[ev] : s->head);
    return TNT_SUCCESS;
}

static tnt_result_t h_sync(void *stream)
{
    hstream_t *s = stream;
    run_to(s, s->tail);
    return TNT_SUCCESS;
}

static const tnt_devmem_ops_t k_host_ops = {
    "host stand-in", h_is_device, h_open, h_close, h_alloc_pinned,
    h_free_pinned, h_copy, h_mark, h_wait, h_sync};

static int cuda_mode(void)
{
    const char *v = getenv("TNT_TEST_DEVMEM_CUDA");
    return v && *v == '1';
}

/* Device memory of the case; freed by stand_in() of the next. */
#define MAXDEV 8
static void *g_cuda_bufs[MAXDEV];
static int g_ncuda;

static void *dev_alloc(size_t n)
{
    n = (n + 63) & ~(size_t)63;
    if (cuda_mode()) {
        void *p = NULL;
        const tnt_cuda_rt_t *rt = tnt__cuda_rt();
        CU_ASSERT_FATAL(rt != NULL && g_ncuda < MAXDEV);
        int err = rt->malloc_device(&p, n);
        if (err)
            fprintf(stderr, "cudaMalloc of %zu bytes: %s\n", n,
                    tnt__cuda_strerror(err));
        CU_ASSERT_FATAL(err == 0);
        g_cuda_bufs[g_ncuda++] = p;
        return p;
    }
    CU_ASSERT_FATAL(g_arena_used + n <= ARENA_BYTES);
    void *p = g_arena + g_arena_used;
    g_arena_used += n;
    return p;
}

/* Copies between the case's host arrays and its device buffers. */
static void put(void *dev, const void *host, size_t n)
{
    if (cuda_mode()) {
        CU_ASSERT_FATAL(tnt__cuda_rt()->memcpy_sync(dev, host, n, 4) == 0);
    } else if (n) {
        memcpy(dev, host, n);
    }
}

static void get(void *host, const void *dev, size_t n)
{
    if (cuda_mode()) {
        CU_ASSERT_FATAL(tnt__cuda_rt()->memcpy_sync(host, dev, n, 4) == 0);
    } else if (n) {
        memcpy(host, dev, n);
    }
}

static void stand_in(void)
{
    for (; g_ncuda > 0; g_ncuda--)
        tnt__cuda_rt()->free_device(g_cuda_bufs[g_ncuda - 1]);
    g_arena_used = 0;
    if (cuda_mode()) {
        tnt__devmem_use(NULL, SLOT_BYTES);
        return;
    }
    if (!g_arena)
        g_arena = th_xmalloc(ARENA_BYTES);
    tnt__devmem_use(&k_host_ops, SLOT_BYTES);
}

/* ---- the collectives --------------------------------------------------- */

/* Small integers: every sum exact in f32, in any order. */
static float val(int rank, size_t i) { return (float)((rank * 7 + i) % 61); }

static const size_t k_counts[] = {0, 1, 7, 47, 48, 49, 1009};

static int rank_collectives(tnt_comm_t comm, int rank, int p, void *arg,
                            th_report_t *rep)
{
    (void)arg;
    if (!g_arena && !cuda_mode())
        g_arena = th_xmalloc(ARENA_BYTES);
    tnt__devmem_use(cuda_mode() ? NULL : &k_host_ops, SLOT_BYTES);
    for (size_t ci = 0; ci < sizeof k_counts / sizeof k_counts[0]; ci++) {
        size_t n = k_counts[ci], np = n * p, nw, first;
        char name[96];
        for (; g_ncuda > 0; g_ncuda--)
            tnt__cuda_rt()->free_device(g_cuda_bufs[g_ncuda - 1]);
        g_arena_used = 0;
        float *dsend = dev_alloc(np * 4 + 4);
        float *drecv = dev_alloc(np * 4 + 4);
        float *hs = th_xmalloc(np * 4 + 4), *hr = th_xmalloc(np * 4 + 4);

        /* allreduce, out of place and in place */
        for (int inpl = 0; inpl < 2; inpl++) {
            for (size_t i = 0; i < n; i++)
                hs[i] = val(rank, i);
            put(inpl ? drecv : dsend, hs, n * 4);
            tnt_result_t rc = tnt_allreduce(comm, inpl ? TNT_IN_PLACE : dsend,
                                            drecv, n, TNT_F32, TNT_SUM);
            get(hr, drecv, n * 4);
            nw = 0, first = 0;
            for (size_t i = 0; i < n; i++) {
                float want = 0;
                for (int r = 0; r < p; r++)
                    want += val(r, i);
                if (hr[i] != want && !nw++)
                    first = i;
            }
            snprintf(name, sizeof name, "allreduce%s n=%zu",
                     inpl ? " in place" : "", n);
            th_report_check(rep, name, rc, nw, first, hr, n * 4);
        }

        /* broadcast from the last rank */
        for (size_t i = 0; i < n; i++)
            hs[i] = rank == p - 1 ? val(rank, i) : -1.0f;
        put(drecv, hs, n * 4);
        tnt_result_t rc = tnt_broadcast(comm, drecv, n, TNT_F32, p - 1);
        get(hr, drecv, n * 4);
        nw = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (hr[i] != val(p - 1, i) && !nw++)
                first = i;
        snprintf(name, sizeof name, "broadcast n=%zu", n);
        th_report_check(rep, name, rc, nw, first, hr, n * 4);

        /* allgather: host send, device receive; then in place */
        for (int inpl = 0; inpl < 2; inpl++) {
            for (size_t i = 0; i < np; i++)
                hr[i] = -1.0f;
            for (size_t i = 0; i < n; i++)
                hs[i] = hr[(size_t)rank * n + i] = val(rank, i);
            put(drecv, hr, np * 4);
            rc = tnt_allgather(comm, inpl ? TNT_IN_PLACE : hs, drecv, n,
                               TNT_F32);
            get(hr, drecv, np * 4);
            nw = 0, first = 0;
            for (int r = 0; r < p; r++)
                for (size_t i = 0; i < n; i++)
                    if (hr[(size_t)r * n + i] != val(r, i) && !nw++)
                        first = (size_t)r * n + i;
            snprintf(name, sizeof name, "allgather%s n=%zu",
                     inpl ? " in place" : "", n);
            th_report_check(rep, name, rc, nw, first, hr, np * 4);
        }

        /* reduce-scatter: device send, device receive */
        for (size_t i = 0; i < np; i++)
            hs[i] = val(rank, i);
        put(dsend, hs, np * 4);
        rc = tnt_reduce_scatter(comm, dsend, drecv, n, TNT_F32, TNT_SUM);
        get(hr, drecv, n * 4);
        nw = 0, first = 0;
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < p; r++)
                want += val(r, (size_t)rank * n + i);
            if (hr[i] != want && !nw++)
                first = i;
        }
        snprintf(name, sizeof name, "reduce_scatter n=%zu", n);
        th_report_check(rep, name, rc, nw, first, NULL, 0);
        free(hs);
        free(hr);
    }
    /* The pool: two slots pinned once, none after. */
    if (!cuda_mode())
        th_report_expect(rep, "pinned pooled", g_pinned_allocs == 2, 0,
                         "%d pinned allocations", g_pinned_allocs);
    return 0;
}

static void test_collectives(void)
{
    static const int ps[] = {1, 2, 3, 5, 7};
    static const int gpu_ps[] = {2, 4}; /* ranks sharing the one GPU */
    size_t nps = cuda_mode() ? 2 : sizeof ps / sizeof ps[0];
    for (size_t k = 0; k < nps; k++) {
        const char *env[] = {"TNT_TRANSPORT=tcp", NULL};
        th_run(cuda_mode() ? gpu_ps[k] : ps[k], env, rank_collectives, NULL, 120,
               NULL);
    }
}

/* ---- bad input --------------------------------------------------------- */

enum { BAD_MIXED, BAD_PINNED };

static int rank_bad(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    (void)p;
    int which = *(int *)arg;
    stand_in();
    size_t n = 1009; /* 21 segments of 48 f32 */
    float *ones = th_xmalloc(n * 4);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    float *buf = rank == 0 || which == BAD_PINNED ? dev_alloc(n * 4) : ones;
    put(buf, ones, n * 4);
    g_fail_pinned = which == BAD_PINNED && rank == 1;
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, n, TNT_F32,
                                    TNT_SUM);
    th_report_expect(rep, "refused", rc < 0, rc, "rc %d: %s", (int)rc,
                     tnt_last_error());
    free(ones);
    return 0;
}

static void test_bad(void)
{
    int last = cuda_mode() ? BAD_MIXED : BAD_PINNED; /* stand-in's only */
    for (int which = BAD_MIXED; which <= last; which++) {
        const char *env[] = {"TNT_TRANSPORT=tcp", "TNT_TIMEOUT=20", NULL};
        th_result_t res;
        th_run(3, env, rank_bad, &which, 60, &res);
        for (int r = 0; r < 3; r++) {
            const th_case_t *c = th_find_case(&res, r, "refused");
            CU_ASSERT_PTR_NOT_NULL(c);
            if (c && which == BAD_MIXED)
                CU_ASSERT_EQUAL(c->rc, TNT_ERR_MISMATCH);
            if (c && which == BAD_PINNED && r == 1)
                CU_ASSERT_EQUAL(c->rc, TNT_ERR_NO_MEMORY);
        }
        th_result_free(&res);
    }
}

static int rank_unstaged(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    (void)arg, (void)p;
    stand_in();
    float *d = dev_alloc(64 * 4);
    float *h = th_xmalloc(64 * 4);
    tnt_request_t req;
    tnt_result_t rc = tnt_iallreduce(comm, d, h, 64, TNT_F32, TNT_SUM, &req);
    th_report_expect(rep, "nonblocking", rc == TNT_ERR_UNSUPPORTED, rc,
                     "%s", tnt_last_error());
    rc = tnt_reduce(comm, d, h, 64, TNT_F32, TNT_SUM, 0);
    th_report_expect(rep, "reduce", rc == TNT_ERR_UNSUPPORTED, rc, "%s",
                     tnt_last_error());
    /* nothing was posted: the communicator still works */
    for (int i = 0; i < 64; i++)
        h[i] = (float)rank;
    put(d, h, 64 * 4);
    rc = tnt_allreduce(comm, TNT_IN_PLACE, d, 64, TNT_F32, TNT_MAX);
    get(h, d, 64 * 4);
    th_report_expect(rep, "after", rc == 0 && h[63] == (float)(p - 1), rc,
                     "%s", tnt_last_error());
    free(h);
    return 0;
}

static void test_unstaged(void)
{
    const char *env[] = {"TNT_TRANSPORT=tcp", NULL};
    th_run(2, env, rank_unstaged, NULL, 60, NULL);
}

/* A process with a (fake) CUDA driver loaded after its first
 * collective: the cached "no CUDA" answer is dropped when the loader
 * loads something, CUDA is asked, and host buffers stay host memory. */
static int rank_driver(tnt_comm_t comm, int rank, int p, void *arg,
                       th_report_t *rep)
{
    (void)arg;
    tnt__devmem_use(NULL, 0); /* CUDA's copy engine, as by default */
    float h[31];
    for (int i = 0; i < 31; i++)
        h[i] = (float)(rank + i);
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, h, 31, TNT_F32,
                                    TNT_SUM);
    int before = tnt__cuda_in_process();
    void *drv = dlopen(getenv("FAKE_LIBCUDA"), RTLD_NOW | RTLD_GLOBAL);
    int after = tnt__cuda_in_process();
    th_report_expect(rep, "driver seen", rc == 0 && !before && drv && after,
                     rc, "before %d, loaded %s, after %d", before,
                     drv ? "yes" : dlerror(), after);
    for (int i = 0; i < 31; i++)
        h[i] = (float)(rank + i);
    rc = tnt_allreduce(comm, TNT_IN_PLACE, h, 31, TNT_F32, TNT_SUM);
    size_t nw = 0, first = 0;
    for (int i = 0; i < 31; i++)
        if (h[i] != (float)(p * i + p * (p - 1) / 2) && !nw++)
            first = (size_t)i;
    th_report_check(rep, "host buffers with a driver", rc, nw, first, h,
                    sizeof h);
    return 0;
}

static void test_driver(void)
{
    if (!getenv("FAKE_LIBCUDA") || cuda_mode())
        return; /* run by meson (tests/meson.build), not on a GPU */
    const char *env[] = {"TNT_TRANSPORT=tcp", NULL};
    th_run(2, env, rank_driver, NULL, 60, NULL);
}

static const th_test_def_t k_tests[] = {
    {"devmem", "collectives", test_collectives},
    {"devmem", "bad input", test_bad},
    {"devmem", "calls that do not stage", test_unstaged},
    {"devmem", "a driver loaded later", test_driver},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
