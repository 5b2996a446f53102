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
 * whose pinned allocation fails; then the calls staged whole (every
 * nonblocking call; reduce, gather, scatter, alltoall(v), send/receive).
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
#include <sys/mman.h>

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

/* The arena is unreadable (PROT_NONE) except inside the stand-in's own
 * copies and the test's put/get: a call that posted "device" memory to
 * the engine instead of staging it crashes, as it would on a GPU. */
static void arena_open(void)
{
    CU_ASSERT_FATAL(mprotect(g_arena, ARENA_BYTES,
                             PROT_READ | PROT_WRITE) == 0);
}

static void arena_close(void)
{
    CU_ASSERT_FATAL(mprotect(g_arena, ARENA_BYTES, PROT_NONE) == 0);
}

static void arena_make(void)
{
    if (g_arena)
        return;
    g_arena = mmap(NULL, ARENA_BYTES, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(g_arena != MAP_FAILED);
}

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
    if (s->head < pos)
        arena_open();
    for (; s->head < pos; s->head++)
        memcpy(s->q[s->head].dst, s->q[s->head].src, s->q[s->head].n);
    arena_close();
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
        arena_open();
        memcpy(dev, host, n);
        arena_close();
    }
}

static void get(void *host, const void *dev, size_t n)
{
    if (cuda_mode()) {
        CU_ASSERT_FATAL(tnt__cuda_rt()->memcpy_sync(host, dev, n, 4) == 0);
    } else if (n) {
        arena_open();
        memcpy(host, dev, n);
        arena_close();
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
    arena_make();
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
    if (!cuda_mode())
        arena_make();
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

/* A pointer that is neither host memory of this process nor device
 * memory it knows (as a device pointer from another process is): a clear
 * error on the rank that passed it, nothing posted, no crash; the others
 * then fail with the communicator's deadline or the failure notice, so
 * here every rank passes one. */
static int rank_foreign(tnt_comm_t comm, int rank, int p, void *arg,
                        th_report_t *rep)
{
    (void)arg, (void)p, (void)rank;
    stand_in();
    (void)dev_alloc(64); /* CUDA mode: the driver is in the process now */
    void *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(gone != MAP_FAILED);
    munmap(gone, 4096);
    float h[16] = {0};
    tnt_result_t rc = tnt_allreduce(comm, gone, h, 16, TNT_F32, TNT_SUM);
    th_report_expect(rep, "foreign pointer", rc == TNT_ERR_INVALID_ARG &&
                     strstr(tnt_last_error(), "neither memory"), rc, "%s",
                     tnt_last_error());
    rc = tnt_allreduce(comm, TNT_IN_PLACE, h, 16, TNT_F32, TNT_SUM);
    th_report_expect(rep, "after", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    return 0;
}

static void test_bad(void)
{
    const char *fenv[] = {"TNT_TRANSPORT=tcp", NULL};
    th_run(2, fenv, rank_foreign, NULL, 60, NULL);
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

/* The calls staged whole: every nonblocking call, and the blocking
 * ones the pipeline does not take (reduce, gather, scatter, alltoall(v),
 * send/receive), on device buffers, every element checked; and a
 * nonblocking call whose request is freed before it finished. */
#define WN 97 /* elements per block: two slots and a bit */

static size_t check_f(const float *got, const float *want, size_t n,
                      size_t *first)
{
    size_t nw = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && !nw++)
            *first = i;
    return nw;
}

static int rank_whole(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)arg;
    stand_in();
    size_t np = (size_t)WN * p, first = 0, nw;
    float *ds = dev_alloc(np * 4), *dr = dev_alloc(np * 4);
    float *hs = th_xmalloc(np * 4), *hr = th_xmalloc(np * 4);
    float *want = th_xmalloc(np * 4);
    tnt_request_t req;
    tnt_result_t rc;

    /* iallreduce, device to device, polled with tnt_test */
    for (size_t i = 0; i < WN; i++) {
        hs[i] = val(rank, i);
        want[i] = 0;
        for (int r = 0; r < p; r++)
            want[i] += val(r, i);
    }
    put(ds, hs, WN * 4);
    rc = tnt_iallreduce(comm, ds, dr, WN, TNT_F32, TNT_SUM, &req);
    if (rc == TNT_SUCCESS) {
        while ((rc = tnt_test(req)) == TNT_INPROGRESS)
            ;
        tnt_request_free(req);
    }
    get(hr, dr, WN * 4);
    nw = check_f(hr, want, WN, &first);
    th_report_check(rep, "iallreduce", rc, nw, first, hr, WN * 4);

    /* reduce to rank 0: elsewhere the receive buffer stays as it was */
    for (size_t i = 0; i < WN; i++)
        hr[i] = -2.0f;
    put(dr, hr, WN * 4);
    rc = tnt_reduce(comm, ds, dr, WN, TNT_F32, TNT_SUM, 0);
    get(hr, dr, WN * 4);
    for (size_t i = 0; rank != 0 && i < WN; i++)
        want[i] = -2.0f;
    nw = check_f(hr, want, WN, &first);
    th_report_check(rep, "reduce", rc, nw, first, NULL, 0);

    /* igather to the last rank, waited */
    rc = tnt_igather(comm, ds, dr, WN, TNT_F32, p - 1, &req);
    if (rc == TNT_SUCCESS) {
        rc = tnt_wait(req);
        tnt_request_free(req);
    }
    if (rank == p - 1) {
        get(hr, dr, np * 4);
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < WN; i++)
                want[(size_t)r * WN + i] = val(r, i);
        nw = check_f(hr, want, np, &first);
    } else {
        nw = 0;
    }
    th_report_check(rep, "igather", rc, nw, first, NULL, 0);

    /* scatter from rank 0 (block r of its send buffer to rank r) */
    for (size_t i = 0; i < np; i++)
        hs[i] = val(rank, i);
    put(ds, hs, np * 4);
    rc = tnt_scatter(comm, ds, dr, WN, TNT_F32, 0);
    get(hr, dr, WN * 4);
    for (size_t i = 0; i < WN; i++)
        want[i] = val(0, (size_t)rank * WN + i);
    nw = check_f(hr, want, WN, &first);
    th_report_check(rep, "scatter", rc, nw, first, NULL, 0);

    /* ialltoall: block j of rank r's buffer to rank j, as block r */
    rc = tnt_ialltoall(comm, ds, dr, WN, TNT_F32, &req);
    if (rc == TNT_SUCCESS) {
        rc = tnt_wait(req);
        tnt_request_free(req);
    }
    get(hr, dr, np * 4);
    for (int r = 0; r < p; r++)
        for (size_t i = 0; i < WN; i++)
            want[(size_t)r * WN + i] = val(r, (size_t)rank * WN + i);
    nw = check_f(hr, want, np, &first);
    th_report_check(rep, "ialltoall", rc, nw, first, NULL, 0);

    /* alltoallv: rank r sends q + 1 elements to rank q; the gaps of the
     * receive buffer keep their contents */
    size_t sc[8], sd[8], rcn[8], rd[8];
    CU_ASSERT_FATAL(p <= 8);
    for (int q = 0; q < p; q++) {
        sc[q] = (size_t)q + 1, sd[q] = (size_t)q * WN;
        rcn[q] = (size_t)rank + 1, rd[q] = (size_t)q * WN;
    }
    for (size_t i = 0; i < np; i++)
        hr[i] = want[i] = -3.0f;
    put(dr, hr, np * 4);
    rc = tnt_alltoallv(comm, ds, sc, sd, dr, rcn, rd, TNT_F32);
    get(hr, dr, np * 4);
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i <= (size_t)rank; i++)
            want[(size_t)q * WN + i] = val(q, (size_t)rank * WN + i);
    nw = check_f(hr, want, np, &first);
    th_report_check(rep, "alltoallv", rc, nw, first, NULL, 0);

    /* isend to the next rank, irecv from the previous */
    tnt_request_t rq[2];
    int next = (rank + 1) % p, prev = (rank + p - 1) % p;
    rc = tnt_irecv(comm, dr, WN, TNT_F32, prev, 5, &rq[0]);
    if (rc == TNT_SUCCESS)
        rc = tnt_isend(comm, ds, WN, TNT_F32, next, 5, &rq[1]);
    if (rc == TNT_SUCCESS) {
        tnt_result_t r1 = tnt_wait(rq[1]), r0 = tnt_wait(rq[0]);
        rc = r0 < 0 ? r0 : r1;
        tnt_request_free(rq[0]);
        tnt_request_free(rq[1]);
    }
    get(hr, dr, WN * 4);
    for (size_t i = 0; i < WN; i++)
        want[i] = val(prev, i);
    nw = check_f(hr, want, WN, &first);
    th_report_check(rep, "isend/irecv", rc, nw, first, NULL, 0);

    /* ibroadcast whose request is freed at once: the free waits for it;
     * then the communicator still works */
    rc = tnt_ibroadcast(comm, ds, WN, TNT_F32, 0, &req);
    if (rc == TNT_SUCCESS)
        rc = tnt_request_free(req);
    th_report_expect(rep, "freed early", rc == TNT_SUCCESS, rc, "%s",
                     tnt_last_error());
    for (size_t i = 0; i < WN; i++)
        hs[i] = (float)rank;
    put(ds, hs, WN * 4);
    rc = tnt_allreduce(comm, TNT_IN_PLACE, ds, WN, TNT_F32, TNT_MAX);
    get(hr, ds, WN * 4);
    th_report_expect(rep, "after", rc == 0 && hr[WN - 1] == (float)(p - 1),
                     rc, "%s", tnt_last_error());
    free(hs);
    free(hr);
    free(want);
    return 0;
}

static void test_whole(void)
{
    static const int ps[] = {2, 3};
    for (size_t k = 0; k < 2; k++) {
        const char *env[] = {"TNT_TRANSPORT=tcp", NULL};
        th_run(ps[k], env, rank_whole, NULL, 60, NULL);
    }
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
    {"devmem", "calls staged whole", test_whole},
    {"devmem", "a driver loaded later", test_driver},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
