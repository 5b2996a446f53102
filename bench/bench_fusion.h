/*
 * Shared state of `tnt-bench fusion`, the benchmark of gradient fusion:
 * bench_fusion.c runs the emulated backprop with the fusion context and
 * with the two baselines, bench_compute.c is the emulated compute (real
 * work, calibrated once), bench_fusion_report.c prints the results.
 */
#ifndef TNT_BENCH_FUSION_H
#define TNT_BENCH_FUSION_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "models.h"
#include "tnt/plugin.h"

/* The ways gradients are reduced, in the order of the table. */
typedef enum fu_kind {
    FU_FUSED = 0,   /* tnt_fusion_ready per tensor, wait_all at the end */
    FU_PER_TENSOR,  /* tnt_iallreduce per tensor as soon as it is ready */
    FU_ONE_SHOT,    /* pack everything, one tnt_allreduce, unpack */
} fu_kind_t;

/* One row of the table: times in seconds per iteration, each the maximum
 * over ranks of one iteration, averaged over the timed iterations. */
typedef struct fu_row {
    fu_kind_t kind;
    size_t threshold;   /* FU_FUSED: min_bucket_bytes, or
                           TNT_FUSION_DEFAULT for the library's */
    size_t buckets;     /* allreduces per iteration */
    double total;       /* first compute to the end of the last wait */
    double compute;     /* emulated backprop alone */
    double ready;       /* inside ready()/iallreduce() during backprop */
    double exposed;     /* after the last ready() until all is reduced */
    double longest;     /* the longest single ready()/iallreduce() call */
    uint64_t wrong;     /* elements wrong in the last iteration */
} fu_row_t;

typedef struct fu {
    const bench_opts_t *o;
    tnt_comm_t comm;
    int rank;
    int nranks;
    tnt_op_t op;
    bench_model_t m;
    unsigned char **grad;  /* gradient of tensor i */
    unsigned char *arena;  /* --contiguous: every gradient, backprop order */
    uint64_t *seed;        /* datagen seed of tensor i */
    uint64_t *spin;        /* arithmetic loop iterations of tensor i */
    double *sleep_s;       /* --compute sleep: seconds before tensor i */
    tnt_request_t *req;    /* FU_PER_TENSOR's requests */
    unsigned char *pack;   /* FU_ONE_SHOT's buffer, only while it runs */
    double spin_per_us;    /* calibrated rate of the arithmetic loop */
    double us_per_mib;     /* arithmetic per MiB of gradient (X) */
    double allreduce_s;    /* startup allreduce of everything; < 0: none */
    double fill_s;         /* writing every gradient once; < 0: unknown */
} fu_t;

/* Quantities measured per iteration: total, compute, ready, exposed,
 * longest (the fields of fu_row_t, in that order). */
#define FU_NQ 5

/* Thresholds of --sweep: 0, 4k, 32k, 256k, 1M, 8M and "all". */
#define FU_SWEEP_N 7

/** A library call failed: message naming rank and call, abort, exit 1. */
void fu_die(const fu_t *c, const char *call, tnt_result_t rc);
double fu_now(void);

/** Run the arithmetic loop of the emulated compute for `iters` steps. */
void fu_spin(uint64_t iters);
/** Measure the loop's rate with every rank running it at once (the load
 *  of a backprop); sets c->spin_per_us to the mean over ranks. */
void fu_calibrate(fu_t *c);
/** Set c->spin (or c->sleep_s) from c->us_per_mib and the calibrated
 *  rate. */
void fu_plan_compute(fu_t *c);
/** The emulated computation of gradient i: write it, then the loop. */
void fu_compute(const fu_t *c, size_t i);

/** "0", "4k", "32k", "1M", "all", "default": a threshold as a label. */
const char *fu_threshold_label(size_t threshold, char *buf, size_t len);
void fu_print_header(const fu_t *c);
/** The table, rank 0 only; `best` is the row to mark (or nrows). */
void fu_print_table(const fu_t *c, const fu_row_t *rows, size_t nrows,
                    size_t best);
void fu_write_json(const fu_t *c, const fu_row_t *rows, size_t nrows,
                   size_t best);

#endif /* TNT_BENCH_FUSION_H */
