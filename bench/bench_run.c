/*
 * What one rank of tnt-bench does: create the world communicator from the
 * environment, then for every size of the sweep and every mode (out of
 * place, in place) time the collective, check one extra iteration on
 * fresh data against datagen's expected values, and let rank 0 print one
 * row per size as nccl-tests does.
 *
 * The reported time is the largest mean time per iteration over all
 * ranks: a collective is only as fast as its slowest rank. The JSON also
 * has the median call (each call timed on every rank, the slowest rank's
 * time of it, the median over the calls): on a shared machine a few
 * preempted calls move the mean by tens of per cent and the median
 * hardly (bench/repro-compare.sh). The maxima and the count of wrong
 * elements are themselves collected with tnt_allreduce, outside the
 * timed region.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "datagen.h"

/* Seed of the data the timed iterations run on; the checked iteration
 * uses a seed derived from the size and mode (fresh data every time). */
#define BENCH_TIMING_SEED UINT64_C(1)

typedef struct bench_result {
    int ran;
    double time_us;
    double median_us; /* the median call (slowest rank's time of each) */
    double algbw;
    double busbw;
    uint64_t wrong;
} bench_result_t;

typedef struct bench_row {
    size_t bytes;
    size_t count;
    bench_result_t mode[2]; /* [0]: out of place, [1]: in place */
} bench_row_t;

static const char *coll_call[BENCH_COLL_COUNT] = {
    "tnt_allreduce", "tnt_broadcast", "tnt_allgather", "tnt_reduce_scatter",
};

/* A library call failed: say which, on which rank, and why; then abort the
 * communicator so that the other ranks fail fast instead of waiting for
 * their deadline. */
static void die(bench_t *b, const char *call, tnt_result_t rc)
{
    /* Before the communicator exists the rank is the launcher's word. */
    const char *env = getenv("TNT_RANK");
    if (b->rank >= 0)
        fprintf(stderr, "tnt-bench: rank %d: ", b->rank);
    else
        fprintf(stderr, "tnt-bench: rank %s: ", env && *env ? env : "0");
    fprintf(stderr, "%s failed: %s: %s\n", call, tnt_strerror(rc),
            tnt_last_error());
    fflush(stderr);
    if (b->comm)
        tnt_comm_abort(b->comm);
    exit(BENCH_EXIT_FAIL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bench_supports(bench_coll_t coll, int inplace)
{
    switch (coll) {
    case BENCH_BROADCAST:
        return inplace; /* one buffer: in place by nature */
    case BENCH_REDUCE_SCATTER:
        return !inplace; /* the API has no in-place form */
    default:
        return 1;
    }
}

/* Page-aligned and never NULL for zero bytes, so that size 0 runs too. */
static unsigned char *alloc_buf(bench_t *b, size_t bytes)
{
    size_t align = 4096;
    size_t n = bytes ? (bytes + align - 1) / align * align : align;
    unsigned char *p = NULL;
    if (b->o->mem == BENCH_MEM_SHARED) {
        /* Collective: every rank allocates the same buffers in order. */
        void *v = NULL;
        tnt_result_t rc = n >= bytes ? tnt_mem_alloc(b->comm, n, &v)
                                     : TNT_ERR_INVALID_ARG;
        if (rc != TNT_SUCCESS)
            die(b, "tnt_mem_alloc", rc);
        p = v;
    } else if (n >= bytes) {
        p = aligned_alloc(align, n);
    }
    if (!p) {
        fprintf(stderr, "tnt-bench: rank %d: cannot allocate %zu bytes of "
                "buffers; lower the largest size (-e)\n", b->rank, bytes);
        exit(BENCH_EXIT_FAIL);
    }
    return p;
}

static void setup_buffers(bench_t *b)
{
    size_t maxc = b->o->max_bytes / b->dsize, nsend, nrecv;
    if (maxc > SIZE_MAX / b->dsize / (size_t)b->nranks) {
        fprintf(stderr, "tnt-bench: rank %d: -e %zu bytes times %d ranks "
                "overflows the address space\n", b->rank, b->o->max_bytes,
                b->nranks);
        exit(BENCH_EXIT_FAIL);
    }
    bench_buf_counts(b, maxc, &nsend, &nrecv);
    b->send = b->o->coll == BENCH_BROADCAST
                  ? NULL : alloc_buf(b, nsend * b->dsize);
    b->recv = alloc_buf(b, nrecv * b->dsize);
    /* Touch every page before timing, with data the operation accepts. */
    tnt_op_t op = b->o->op;
    if (b->send)
        tnt_gen_fill(b->send, nsend, b->o->dtype, op, BENCH_TIMING_SEED,
                     b->rank);
    tnt_gen_fill(b->recv, nrecv, b->o->dtype, op, BENCH_TIMING_SEED,
                 b->rank);
}

static tnt_result_t run_once(bench_t *b, size_t count, int inplace)
{
    const bench_opts_t *o = b->o;
    const void *src = inplace ? TNT_IN_PLACE : (const void *)b->send;
    switch (o->coll) {
    case BENCH_ALLREDUCE:
        return tnt_allreduce(b->comm, src, b->recv, count, o->dtype, o->op);
    case BENCH_BROADCAST:
        return tnt_broadcast(b->comm, b->recv, count, o->dtype, o->root);
    case BENCH_ALLGATHER:
        return tnt_allgather(b->comm, src, b->recv, count, o->dtype);
    default:
        return tnt_reduce_scatter(b->comm, b->send, b->recv, count,
                                  o->dtype, o->op);
    }
}

static double bus_factor(bench_coll_t coll, int p)
{
    switch (coll) {
    case BENCH_ALLREDUCE:
        return 2.0 * (p - 1) / p;
    case BENCH_BROADCAST:
        return 1.0;
    default:
        return (double)(p - 1) / p;
    }
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of v[0..n), n >= 1 (sorts v). */
static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void measure(bench_t *b, bench_row_t *row, int inplace,
                    uint64_t seed)
{
    const bench_opts_t *o = b->o;
    const char *call = coll_call[o->coll];
    bench_result_t *res = &row->mode[inplace];
    tnt_result_t rc;

    for (int i = 0; i < o->warmup; i++)
        if ((rc = run_once(b, row->count, inplace)) != TNT_SUCCESS)
            die(b, call, rc);
    /* Each call's time as well as the whole loop's: [0, iters) this
     * rank's, [iters, 2 iters) the slowest rank's of each call. */
    double *calls = malloc(2 * (size_t)o->iters * sizeof(*calls));
    if (!calls) {
        fprintf(stderr, "tnt-bench: out of memory\n");
        exit(BENCH_EXIT_FAIL);
    }
    if ((rc = tnt_barrier(b->comm)) != TNT_SUCCESS)
        die(b, "tnt_barrier", rc);
    double t0 = now_s(), t = t0;
    for (int i = 0; i < o->iters; i++) {
        if ((rc = run_once(b, row->count, inplace)) != TNT_SUCCESS)
            die(b, call, rc);
        double t1 = now_s();
        calls[i] = t1 - t;
        t = t1;
    }
    double mean = (t - t0) / o->iters, slowest = 0.0;
    rc = tnt_allreduce(b->comm, &mean, &slowest, 1, TNT_F64, TNT_MAX);
    if (rc == TNT_SUCCESS)
        rc = tnt_allreduce(b->comm, calls, calls + o->iters,
                           (size_t)o->iters, TNT_F64, TNT_MAX);
    if (rc != TNT_SUCCESS)
        die(b, "tnt_allreduce", rc);
    res->median_us = median(calls + o->iters, (size_t)o->iters) * 1e6;
    free(calls);

    /* Allgather and reduce-scatter move nranks blocks of `bytes`. */
    double moved = (double)row->bytes;
    if (o->coll == BENCH_ALLGATHER || o->coll == BENCH_REDUCE_SCATTER)
        moved *= b->nranks;
    res->ran = 1;
    res->time_us = slowest * 1e6;
    res->algbw = slowest > 0 ? moved / 1e9 / slowest : 0.0;
    res->busbw = res->algbw * bus_factor(o->coll, b->nranks);

    if (o->check) {
        bench_prepare_check(b, row->count, inplace, seed);
        if ((rc = run_once(b, row->count, inplace)) != TNT_SUCCESS)
            die(b, call, rc);
        uint64_t mine = bench_count_wrong(b, row->count, inplace, seed);
        rc = tnt_allreduce(b->comm, &mine, &res->wrong, 1, TNT_U64,
                           TNT_SUM);
        if (rc != TNT_SUCCESS)
            die(b, "tnt_allreduce", rc);
    }
}

/* The op column: broadcast and allgather reduce nothing. */
static const char *op_label(const bench_opts_t *o)
{
    if (o->coll == BENCH_ALLREDUCE || o->coll == BENCH_REDUCE_SCATTER)
        return bench_op_name(o->op);
    return "none";
}

static void print_header(const bench_t *b)
{
    const bench_opts_t *o = b->o;
    int maj, min, pat;
    tnt_get_version(&maj, &min, &pat);
    const char *tr = getenv("TNT_TRANSPORT");
    const char *algo_env = o->coll == BENCH_ALLREDUCE ? "TNT_ALLREDUCE_ALGO"
                           : o->coll == BENCH_BROADCAST ? "TNT_BCAST_ALGO"
                                                        : NULL;
    const char *algo = algo_env ? getenv(algo_env) : NULL;

    printf("# tnt-bench %s: %d rank%s, libtntcomm %d.%d.%d\n",
           bench_coll_name(o->coll), b->nranks, b->nranks == 1 ? "" : "s",
           maj, min, pat);
    printf("# dtype %s, op %s, iters %d, warmup %d, check %s\n",
           bench_dtype_name(o->dtype), op_label(o), o->iters, o->warmup,
           o->check ? "on" : "off");
    printf("# memory: %s\n", o->mem == BENCH_MEM_SHARED
                                 ? "tnt_mem_alloc (--mem shared)"
                                 : "malloc (--mem malloc)");
    if (tr && *tr)
        printf("# transport: TNT_TRANSPORT=%s\n", tr);
    else
        printf("# transport: library default (TNT_TRANSPORT unset)\n");
    if (!algo_env)
        printf("# algorithm: library default (no environment knob)\n");
    else if (algo && *algo)
        printf("# algorithm: %s=%s\n", algo_env, algo);
    else
        printf("# algorithm: auto (%s unset)\n", algo_env);
    if (o->coll == BENCH_ALLGATHER || o->coll == BENCH_REDUCE_SCATTER)
        printf("# size and count are per rank; algbw counts all %d "
               "blocks\n", b->nranks);
    if (o->check && b->nranks > 64)
        printf("# note: checks are exact for up to 64 ranks only\n");
    printf("#\n#%70s%35s\n", "out-of-place", "in-place");
    printf("#%11s %13s %6s %6s %6s  %9s %8s %8s %7s  %9s %8s %8s %7s\n",
           "size", "count", "type", "redop", "root", "time", "algbw",
           "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("#%11s %13s %6s %6s %6s  %9s %8s %8s %7s  %9s %8s %8s\n",
           "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
           "(us)", "(GB/s)", "(GB/s)");
}

static void print_row(const bench_t *b, const bench_row_t *row)
{
    const bench_opts_t *o = b->o;
    printf(" %11zu %13zu %6s %6s %6d", row->bytes, row->count,
           bench_dtype_name(o->dtype), op_label(o),
           o->coll == BENCH_BROADCAST ? o->root : -1);
    for (int m = 0; m < 2; m++) {
        const bench_result_t *r = &row->mode[m];
        if (!r->ran) {
            printf("  %9s %8s %8s %7s", "-", "-", "-", "-");
            continue;
        }
        char wrong[24];
        if (o->check)
            snprintf(wrong, sizeof wrong, "%" PRIu64, r->wrong);
        else
            snprintf(wrong, sizeof wrong, "N/A");
        printf("  %9.2f %8.2f %8.2f %7s", r->time_us, r->algbw, r->busbw,
               wrong);
    }
    printf("\n");
}

static void write_json_result(FILE *f, const bench_opts_t *o,
                              const bench_result_t *r)
{
    if (!r->ran) {
        fprintf(f, "null");
        return;
    }
    fprintf(f, "{\"time_us\": %.3f, \"median_us\": %.3f, "
            "\"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": ",
            r->time_us, r->median_us, r->algbw, r->busbw);
    if (o->check)
        fprintf(f, "%" PRIu64 "}", r->wrong);
    else
        fprintf(f, "null}");
}

/* The same numbers as the table, for scripts. Failure to write is
 * reported but does not fail the run: the measurement itself is done. */
static void write_json(const bench_t *b, const bench_row_t *rows,
                       size_t nrows, double avg_busbw, uint64_t wrong)
{
    const bench_opts_t *o = b->o;
    FILE *f = fopen(o->json, "w");
    if (!f) {
        perror(o->json);
        return;
    }
    fprintf(f, "{\n  \"collective\": \"%s\",\n  \"nranks\": %d,\n"
            "  \"dtype\": \"%s\",\n  \"op\": \"%s\",\n  \"root\": %d,\n"
            "  \"iters\": %d,\n  \"warmup\": %d,\n  \"check\": %s,\n"
            "  \"rows\": [", bench_coll_name(o->coll), b->nranks,
            bench_dtype_name(o->dtype), op_label(o),
            o->coll == BENCH_BROADCAST ? o->root : -1, o->iters, o->warmup,
            o->check ? "true" : "false");
    for (size_t i = 0; i < nrows; i++) {
        fprintf(f, "%s\n    {\"bytes\": %zu, \"count\": %zu, "
                "\"out_of_place\": ", i ? "," : "", rows[i].bytes,
                rows[i].count);
        write_json_result(f, o, &rows[i].mode[0]);
        fprintf(f, ", \"in_place\": ");
        write_json_result(f, o, &rows[i].mode[1]);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"avg_busbw_gbps\": %.6f,\n  \"wrong\": %" PRIu64
            "\n}\n", avg_busbw, wrong);
    if (fclose(f) != 0)
        perror(o->json);
}

/* The sizes of the sweep, in bytes: min, min*factor, ... up to max. A
 * size that holds no whole element is skipped (size 0 itself is run). */
static size_t next_size(size_t s, size_t factor)
{
    if (s == 0)
        return 1;
    if (s > SIZE_MAX / factor)
        return SIZE_MAX;
    return s * factor;
}

int bench_run(const bench_opts_t *o)
{
    bench_t b = {.o = o, .dsize = tnt_dtype_size(o->dtype)};
    tnt_result_t rc;

    if (b.dsize == 0) {
        fprintf(stderr, "tnt-bench: the library does not know dtype %s\n",
                bench_dtype_name(o->dtype));
        return BENCH_EXIT_FAIL;
    }
    b.rank = -1;
    if ((rc = tnt_comm_init_from_env(&b.comm)) != TNT_SUCCESS) {
        b.comm = NULL;
        die(&b, "tnt_comm_init_from_env", rc);
    }
    if ((rc = tnt_comm_rank(b.comm, &b.rank)) != TNT_SUCCESS)
        die(&b, "tnt_comm_rank", rc);
    if ((rc = tnt_comm_size(b.comm, &b.nranks)) != TNT_SUCCESS)
        die(&b, "tnt_comm_size", rc);
    /* The library looks for every launcher it knows (tnt-run, PMIx, Open
     * MPI, Slurm, torchrun); one rank means it found none. */
    if (b.nranks == 1)
        fprintf(stderr, "tnt-bench: no launcher environment; running 1 "
                "rank (use 'tnt-run -n 4 tnt-bench ...' or 'tnt-bench -N 4 "
                "...')\n");
    if (o->coll == BENCH_BROADCAST && o->root >= b.nranks) {
        /* Every rank sees the same arguments: all stop, one speaks. */
        if (b.rank == 0)
            fprintf(stderr, "tnt-bench: -r %d is not a rank of this job "
                    "(%d ranks: 0 .. %d)\n", o->root, b.nranks,
                    b.nranks - 1);
        tnt_comm_free(b.comm);
        return BENCH_EXIT_FAIL;
    }
    setup_buffers(&b);

    size_t cap = 16, nrows = 0;
    bench_row_t *rows = malloc(cap * sizeof *rows);
    if (!rows) {
        fprintf(stderr, "tnt-bench: rank %d: out of memory\n", b.rank);
        exit(BENCH_EXIT_FAIL);
    }
    if (b.rank == 0) {
        setvbuf(stdout, NULL, _IOLBF, 0); /* rows appear as they come */
        print_header(&b);
    }

    double bw_sum = 0.0;
    size_t bw_n = 0;
    uint64_t wrong = 0;
    for (size_t s = o->min_bytes;; s = next_size(s, o->factor)) {
        if (s > o->max_bytes)
            break;
        size_t count = s / b.dsize;
        if (count > 0 || s == 0) {
            if (nrows == cap) {
                bench_row_t *n = realloc(rows, 2 * cap * sizeof *rows);
                if (!n) {
                    fprintf(stderr, "tnt-bench: rank %d: out of memory\n",
                            b.rank);
                    exit(BENCH_EXIT_FAIL);
                }
                rows = n;
                cap *= 2;
            }
            bench_row_t *row = &rows[nrows++];
            memset(row, 0, sizeof *row);
            row->count = count;
            row->bytes = count * b.dsize;
            for (int m = 0; m < 2; m++) {
                if (!(m ? o->inplace : o->outplace) ||
                    !bench_supports(o->coll, m))
                    continue;
                /* Fresh data for every checked iteration, the same on
                 * every rank: a seed from the size and the mode. */
                uint64_t key[2] = {row->bytes, (uint64_t)m};
                measure(&b, row, m, tnt_gen_hash(key, sizeof key));
                bw_sum += row->mode[m].busbw;
                bw_n++;
                wrong += row->mode[m].wrong;
            }
            if (b.rank == 0)
                print_row(&b, row);
        }
        if (s == SIZE_MAX || s == o->max_bytes)
            break;
    }

    double avg = bw_n ? bw_sum / (double)bw_n : 0.0;
    if (b.rank == 0) {
        printf("# avg busbw: %.2f GB/s\n", avg);
        if (wrong)
            printf("# FAILED: %" PRIu64 " wrong elements\n", wrong);
        if (o->json)
            write_json(&b, rows, nrows, avg, wrong);
        fflush(stdout);
    }
    free(rows);
    if (o->stats)
        bench_print_stats(b.comm, b.rank);
    if (o->mem == BENCH_MEM_SHARED) {
        if ((rc = tnt_mem_free(b.comm, b.send)) != TNT_SUCCESS ||
            (rc = tnt_mem_free(b.comm, b.recv)) != TNT_SUCCESS)
            die(&b, "tnt_mem_free", rc);
    } else {
        free(b.send);
        free(b.recv);
    }
    if ((rc = tnt_comm_free(b.comm)) != TNT_SUCCESS) {
        b.comm = NULL;
        die(&b, "tnt_comm_free", rc);
    }
    return wrong ? BENCH_EXIT_FAIL : BENCH_EXIT_OK;
}
