/*
 * What one rank of `tnt-bench fusion` does: emulate the backprop of a
 * model (bench/models.c) and reduce its gradients three ways, timing each
 * in the same process on the same data:
 *
 *   fused       the plugin ABI: tnt_fusion_ready() for each gradient as
 *               soon as it is computed, tnt_fusion_wait_all() at the end;
 *   per-tensor  one tnt_iallreduce per gradient as soon as it is
 *               computed, all waited for at the end (no fusion);
 *   one-shot    nothing during backprop; then pack every gradient into
 *               one buffer, one tnt_allreduce, unpack.
 *
 * Gradient i becomes ready after emulated compute proportional to its
 * size (bench_compute.c), index 0 first. Every iteration starts at a
 * barrier; its times are maxima over ranks, then averaged over the timed
 * iterations, and the rows take turns iteration by iteration. The last
 * iteration of each row is checked element by element against datagen's
 * expected allreduce. With --dry-run nothing is
 * timed: the bucket plan is printed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_fusion.h"
#include "datagen.h"

#define FU_SEED UINT64_C(0x6675736564) /* of every gradient's data */
#define FU_COMPUTE_RATIO 1.5           /* default: compute / allreduce */
#define FU_TIMED_PASSES 2              /* startup timings: the fastest */
#define FU_REPORT_TENSORS 3            /* wrong tensors told per rank */

static const size_t sweep_thresholds[FU_SWEEP_N] = {
    0, (size_t)4 << 10, (size_t)32 << 10, (size_t)256 << 10,
    (size_t)1 << 20, (size_t)8 << 20, BENCH_THRESHOLD_ALL,
};

void fu_die(const fu_t *c, const char *call, tnt_result_t rc)
{
    const char *env = getenv("TNT_RANK");
    if (c->rank >= 0)
        fprintf(stderr, "tnt-bench: rank %d: ", c->rank);
    else
        fprintf(stderr, "tnt-bench: rank %s: ", env && *env ? env : "0");
    fprintf(stderr, "%s failed: %s: %s\n", call, tnt_strerror(rc),
            tnt_last_error());
    fflush(stderr);
    if (c->comm)
        tnt_comm_abort(c->comm);
    exit(BENCH_EXIT_FAIL);
}

double fu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void oom(const fu_t *c)
{
    fprintf(stderr, "tnt-bench: rank %d: out of memory\n", c->rank);
    exit(BENCH_EXIT_FAIL);
}

static void *xalloc(const fu_t *c, size_t bytes)
{
    size_t n = (bytes + 63) / 64 * 64;
    void *p = n >= bytes ? aligned_alloc(64, n ? n : 64) : NULL;
    if (!p) {
        fprintf(stderr, "tnt-bench: rank %d: cannot allocate %zu bytes for "
                "model %s; try a smaller model\n", c->rank, bytes,
                c->m.label);
        exit(BENCH_EXIT_FAIL);
    }
    return p;
}

static double max_over_ranks(const fu_t *c, double v)
{
    double m = 0.0;
    tnt_result_t rc = tnt_allreduce(c->comm, &v, &m, 1, TNT_F64, TNT_MAX);
    if (rc != TNT_SUCCESS)
        fu_die(c, "tnt_allreduce", rc);
    return m;
}

static void barrier(const fu_t *c)
{
    tnt_result_t rc = tnt_barrier(c->comm);
    if (rc != TNT_SUCCESS)
        fu_die(c, "tnt_barrier", rc);
}

/* Gradients (one allocation each, or one arena in backprop order), their
 * seeds, and a first write of all of them, timed: it faults the pages in
 * and says what part of the compute the writing is. */
static void setup(fu_t *c)
{
    size_t n = c->m.n;
    c->grad = calloc(n, sizeof *c->grad);
    c->seed = calloc(n, sizeof *c->seed);
    c->spin = calloc(n, sizeof *c->spin);
    if (c->o->fu.sleep_compute &&
        !(c->sleep_s = calloc(n, sizeof *c->sleep_s)))
        oom(c);
    c->req = calloc(n, sizeof *c->req);
    if (!c->grad || !c->seed || !c->spin || !c->req)
        oom(c);
    if (c->o->fu.contiguous)
        c->arena = xalloc(c, c->m.bytes);
    for (size_t i = 0, off = 0; i < n; i++) {
        size_t bytes = c->m.desc[i].count * 4;
        c->grad[i] = c->arena ? c->arena + off : xalloc(c, bytes);
        off += bytes;
        uint64_t key[2] = {FU_SEED, (uint64_t)i};
        c->seed[i] = tnt_gen_hash(key, sizeof key);
    }
    /* The first write faults the pages in; the fastest of the next
     * FU_TIMED_PASSES is the cost (the least disturbed by other load). */
    for (size_t i = 0; i < n; i++)
        fu_compute(c, i); /* c->spin is still 0: the write alone */
    double best = -1.0;
    for (int k = 0; k < FU_TIMED_PASSES; k++) {
        barrier(c);
        double t0 = fu_now();
        for (size_t i = 0; i < n; i++)
            fu_compute(c, i);
        double el = fu_now() - t0;
        best = best < 0.0 || el < best ? el : best;
    }
    c->fill_s = max_over_ranks(c, best);
}

static void pack(fu_t *c)
{
    for (size_t i = 0, off = 0; i < c->m.n; i++) {
        size_t bytes = c->m.desc[i].count * 4;
        memcpy(c->pack + off, c->grad[i], bytes);
        off += bytes;
    }
}

static void unpack(fu_t *c)
{
    for (size_t i = 0, off = 0; i < c->m.n; i++) {
        size_t bytes = c->m.desc[i].count * 4;
        memcpy(c->grad[i], c->pack + off, bytes);
        off += bytes;
    }
}

static void allreduce_all(fu_t *c)
{
    tnt_result_t rc = tnt_allreduce(c->comm, TNT_IN_PLACE, c->pack,
                                    c->m.params, TNT_F32, c->op);
    if (rc != TNT_SUCCESS)
        fu_die(c, "tnt_allreduce", rc);
}

/* X from the command line, or such that the compute of one iteration
 * (writing every gradient plus the loop) takes FU_COMPUTE_RATIO times one
 * allreduce of all gradients, measured here. */
static void choose_compute(fu_t *c)
{
    c->pack = xalloc(c, c->m.bytes); /* also the one-shot row's */
    if (c->o->fu.us_per_mib >= 0.0) {
        c->us_per_mib = c->o->fu.us_per_mib;
    } else {
        pack(c);
        allreduce_all(c); /* warm-up: connections, pages, buffers */
        double best = -1.0;
        for (int k = 0; k < FU_TIMED_PASSES; k++) {
            barrier(c);
            double t0 = fu_now();
            allreduce_all(c);
            double el = fu_now() - t0;
            best = best < 0.0 || el < best ? el : best;
        }
        c->allreduce_s = max_over_ranks(c, best);
        double loop_s = FU_COMPUTE_RATIO * c->allreduce_s - c->fill_s;
        double mib = (double)c->m.bytes / (1024.0 * 1024.0);
        c->us_per_mib = loop_s > 0.0 ? loop_s * 1e6 / mib : 0.0;
    }
    fu_plan_compute(c);
}

static void post(fu_t *c, fu_kind_t kind, tnt_fusion_t f, size_t i)
{
    tnt_result_t rc = TNT_SUCCESS;
    if (kind == FU_FUSED) {
        if ((rc = tnt_fusion_ready(f, i, c->grad[i])) != TNT_SUCCESS)
            fu_die(c, "tnt_fusion_ready", rc);
    } else if (kind == FU_PER_TENSOR) {
        rc = tnt_iallreduce(c->comm, TNT_IN_PLACE, c->grad[i],
                            c->m.desc[i].count, TNT_F32, c->op, &c->req[i]);
        if (rc != TNT_SUCCESS)
            fu_die(c, "tnt_iallreduce", rc);
    }
}

static void finish(fu_t *c, fu_kind_t kind, tnt_fusion_t f)
{
    tnt_result_t rc;
    if (kind == FU_FUSED) {
        if ((rc = tnt_fusion_wait_all(f)) != TNT_SUCCESS)
            fu_die(c, "tnt_fusion_wait_all", rc);
    } else if (kind == FU_PER_TENSOR) {
        for (size_t i = 0; i < c->m.n; i++) {
            if ((rc = tnt_wait(c->req[i])) != TNT_SUCCESS)
                fu_die(c, "tnt_wait", rc);
            if ((rc = tnt_request_free(c->req[i])) != TNT_SUCCESS)
                fu_die(c, "tnt_request_free", rc);
            c->req[i] = NULL;
        }
    } else {
        pack(c);
        allreduce_all(c);
        unpack(c);
    }
}

/* One emulated backprop; s[] gets the FU_NQ quantities of fu_row_t. */
static void iteration(fu_t *c, fu_kind_t kind, tnt_fusion_t f,
                      double s[FU_NQ])
{
    double compute = 0.0, ready = 0.0, longest = 0.0;
    barrier(c);
    double t0 = fu_now(), t = t0;
    for (size_t i = 0; i < c->m.n; i++) {
        fu_compute(c, i);
        double t1 = fu_now();
        compute += t1 - t;
        post(c, kind, f, i);
        t = fu_now();
        ready += t - t1;
        longest = t - t1 > longest ? t - t1 : longest;
    }
    finish(c, kind, f);
    double end = fu_now();
    s[0] = end - t0;
    s[1] = compute;
    s[2] = ready;
    s[3] = end - t;
    s[4] = longest;
}

/* Wrong elements of this rank's gradients after the last iteration, the
 * first few wrong tensors told on stderr; summed over ranks. */
static uint64_t check(const fu_t *c, const fu_row_t *row)
{
    uint64_t wrong = 0, total = 0;
    size_t told = 0;
    char thr[32];
    for (size_t i = 0; i < c->m.n; i++) {
        size_t first, n = c->m.desc[i].count;
        size_t w = tnt_gen_check_allreduce(c->grad[i], 0, n, TNT_F32, c->op,
                                           c->seed[i], c->nranks, &first);
        if (w && told++ < FU_REPORT_TENSORS)
            fprintf(stderr, "tnt-bench: rank %d: %s (threshold %s): tensor "
                    "%zu (%s): %zu of %zu elements wrong; first at %zu: got "
                    "%g, expected %g\n", c->rank,
                    row->kind == FU_FUSED ? "fused"
                    : row->kind == FU_PER_TENSOR ? "per-tensor" : "one-shot",
                    fu_threshold_label(row->threshold, thr, sizeof thr), i,
                    c->m.desc[i].name, w, n, first,
                    tnt_gen_load(c->grad[i], first, TNT_F32),
                    tnt_gen_expected(c->seed[i], c->nranks, first, TNT_F32,
                                     c->op));
        wrong += w;
    }
    tnt_result_t rc = tnt_allreduce(c->comm, &wrong, &total, 1, TNT_U64,
                                    TNT_SUM);
    if (rc != TNT_SUCCESS)
        fu_die(c, "tnt_allreduce", rc);
    return total;
}

static tnt_fusion_t make_fusion(fu_t *c, size_t threshold)
{
    tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
    cfg.op = c->op;
    if (threshold == BENCH_THRESHOLD_ALL)
        cfg.min_bucket_bytes = c->m.bytes; /* closes at the last tensor */
    else if (threshold != TNT_FUSION_DEFAULT)
        cfg.min_bucket_bytes = threshold;
    tnt_fusion_t f = NULL;
    tnt_result_t rc = tnt_fusion_create(c->comm, c->m.desc, c->m.n, &cfg,
                                        &f);
    if (rc != TNT_SUCCESS)
        fu_die(c, "tnt_fusion_create", rc);
    return f;
}

/* --dry-run: the plan for the threshold (or, with --sweep, a line per
 * threshold of the sweep), printed by rank 0. */
static void dry_run(fu_t *c)
{
    const bench_fusion_opts_t *fo = &c->o->fu;
    size_t nthr = fo->sweep ? FU_SWEEP_N : 1;
    char label[32];
    if (c->rank == 0)
        printf("# tnt-bench fusion --dry-run: %d rank%s; model %s: %zu "
               "tensors, %zu parameters, %.2f MiB f32, backprop order\n",
               c->nranks, c->nranks == 1 ? "" : "s", c->m.label, c->m.n,
               c->m.params, (double)c->m.bytes / (1 << 20));
    for (size_t k = 0; k < nthr; k++) {
        size_t thr = fo->sweep ? sweep_thresholds[k] : fo->threshold;
        tnt_fusion_t f = make_fusion(c, thr);
        size_t nb = 0, lo = SIZE_MAX, hi = 0;
        tnt_result_t rc = tnt_fusion_num_buckets(f, &nb);
        if (rc != TNT_SUCCESS)
            fu_die(c, "tnt_fusion_num_buckets", rc);
        for (size_t b = 0; b < nb; b++) {
            tnt_fusion_bucket_info_t bi = TNT_FUSION_BUCKET_INFO_INIT;
            if ((rc = tnt_fusion_bucket(f, b, &bi)) != TNT_SUCCESS)
                fu_die(c, "tnt_fusion_bucket", rc);
            lo = bi.bytes < lo ? bi.bytes : lo;
            hi = bi.bytes > hi ? bi.bytes : hi;
        }
        if (c->rank == 0)
            printf("# threshold %-8s %6zu buckets, smallest %zu bytes, "
                   "largest %zu bytes\n",
                   fu_threshold_label(thr, label, sizeof label), nb, lo, hi);
        if (!fo->sweep && c->rank == 0) {
            /* Ask for the length first, then fetch the whole text. */
            char one[1];
            size_t need = 0;
            rc = tnt_fusion_describe(f, one, sizeof one, &need);
            if (rc != TNT_SUCCESS)
                fu_die(c, "tnt_fusion_describe", rc);
            char *text = malloc(need);
            if (!text)
                oom(c);
            rc = tnt_fusion_describe(f, text, need, NULL);
            if (rc != TNT_SUCCESS)
                fu_die(c, "tnt_fusion_describe", rc);
            fputs(text, stdout);
            free(text);
        }
        if ((rc = tnt_fusion_free(f)) != TNT_SUCCESS)
            fu_die(c, "tnt_fusion_free", rc);
    }
}

/* Per row, the mean over timed iterations of each quantity's maximum
 * over ranks (t: rows x iters x FU_NQ, this rank's values). */
static void summarize(fu_t *c, fu_row_t *rows, size_t nrows, double *t)
{
    size_t iters = (size_t)c->o->iters;
    tnt_result_t rc = tnt_allreduce(c->comm, TNT_IN_PLACE, t,
                                    nrows * iters * FU_NQ, TNT_F64, TNT_MAX);
    if (rc != TNT_SUCCESS)
        fu_die(c, "tnt_allreduce", rc);
    for (size_t k = 0; k < nrows; k++) {
        double m[FU_NQ] = {0};
        for (size_t i = 0; i < iters; i++)
            for (int q = 0; q < FU_NQ; q++)
                m[q] += t[(k * iters + i) * FU_NQ + q] / (double)iters;
        rows[k].total = m[0];
        rows[k].compute = m[1];
        rows[k].ready = m[2];
        rows[k].exposed = m[3];
        rows[k].longest = m[4];
    }
}

/*
 * Every row runs one iteration in turn (one-shot, per-tensor, then the
 * fused rows), warm-up rounds first: on a shared host, load that comes
 * and goes then hits every row alike instead of whichever ran at the
 * time. The last round checks each row right after its iteration, before
 * the next row overwrites the gradients. The fusion contexts all exist
 * at once; each holds a packing buffer of up to the model's size.
 */
static size_t run_all(fu_t *c, fu_row_t *rows)
{
    const bench_fusion_opts_t *fo = &c->o->fu;
    size_t nrows = 0, iters = (size_t)c->o->iters;
    size_t rounds = (size_t)c->o->warmup + iters;
    tnt_fusion_t f[2 + FU_SWEEP_N] = {NULL};
    tnt_result_t rc;

    rows[nrows++] = (fu_row_t){.kind = FU_ONE_SHOT, .buckets = 1};
    rows[nrows++] = (fu_row_t){.kind = FU_PER_TENSOR, .buckets = c->m.n};
    for (size_t k = 0; k < (fo->sweep ? FU_SWEEP_N : 1); k++, nrows++) {
        rows[nrows] = (fu_row_t){.kind = FU_FUSED,
                                 .threshold = fo->sweep ? sweep_thresholds[k]
                                                        : fo->threshold};
        f[nrows] = make_fusion(c, rows[nrows].threshold);
        rc = tnt_fusion_num_buckets(f[nrows], &rows[nrows].buckets);
        if (rc != TNT_SUCCESS)
            fu_die(c, "tnt_fusion_num_buckets", rc);
    }
    double *t = calloc(nrows * iters * FU_NQ, sizeof *t);
    if (!t)
        oom(c);
    for (size_t r = 0; r < rounds; r++) {
        for (size_t k = 0; k < nrows; k++) {
            double s[FU_NQ];
            iteration(c, rows[k].kind, f[k], s);
            if (r >= (size_t)c->o->warmup)
                memcpy(t + (k * iters + r - (size_t)c->o->warmup) * FU_NQ,
                       s, sizeof s);
            if (r + 1 == rounds && c->o->check)
                rows[k].wrong = check(c, &rows[k]);
        }
    }
    summarize(c, rows, nrows, t);
    free(t);
    for (size_t k = 0; k < nrows; k++)
        if (f[k] && (rc = tnt_fusion_free(f[k])) != TNT_SUCCESS)
            fu_die(c, "tnt_fusion_free", rc);
    return nrows;
}

int bench_fusion_run(const bench_opts_t *o)
{
    fu_t c = {.o = o, .rank = -1, .op = o->op, .allreduce_s = -1.0,
              .fill_s = -1.0};
    fu_row_t rows[2 + FU_SWEEP_N];
    char err[256];
    tnt_result_t rc;

    if (bench_model_build(o->fu.model, &c.m, err, sizeof err) != 0) {
        fprintf(stderr, "tnt-bench: %s\n", err);
        return BENCH_EXIT_FAIL;
    }
    if ((rc = tnt_comm_init_from_env(&c.comm)) != TNT_SUCCESS) {
        c.comm = NULL;
        fu_die(&c, "tnt_comm_init_from_env", rc);
    }
    if ((rc = tnt_comm_rank(c.comm, &c.rank)) != TNT_SUCCESS)
        fu_die(&c, "tnt_comm_rank", rc);
    if ((rc = tnt_comm_size(c.comm, &c.nranks)) != TNT_SUCCESS)
        fu_die(&c, "tnt_comm_size", rc);
    if (c.rank == 0)
        setvbuf(stdout, NULL, _IOLBF, 0);

    uint64_t wrong = 0;
    if (o->fu.dry_run) {
        dry_run(&c);
    } else {
        setup(&c);
        fu_calibrate(&c);
        choose_compute(&c);
        if (c.rank == 0)
            fu_print_header(&c);
        size_t n = run_all(&c, rows), best = n;
        for (size_t k = 0; k < n; k++) {
            wrong += rows[k].wrong;
            if (o->fu.sweep && rows[k].kind == FU_FUSED &&
                (best == n || rows[k].total < rows[best].total))
                best = k;
        }
        if (c.rank == 0) {
            fu_print_table(&c, rows, n, best);
            if (o->json)
                fu_write_json(&c, rows, n, best);
        }
    }
    if (o->stats)
        bench_print_stats(c.comm, c.rank);
    if ((rc = tnt_comm_free(c.comm)) != TNT_SUCCESS) {
        c.comm = NULL;
        fu_die(&c, "tnt_comm_free", rc);
    }
    for (size_t i = 0; c.grad && !c.arena && i < c.m.n; i++)
        free(c.grad[i]);
    free(c.arena);
    free(c.grad);
    free(c.seed);
    free(c.spin);
    free(c.sleep_s);
    free(c.req);
    free(c.pack);
    bench_model_free(&c.m);
    return wrong ? BENCH_EXIT_FAIL : BENCH_EXIT_OK;
}
