/*
 * Shared declarations of tnt-bench, the nccl-tests style benchmark.
 * tnt-bench.c reads the command line; bench_launch.c starts local ranks
 * for -N; bench_run.c is what one rank does for a collective: time it
 * over a sweep of sizes and print the table on rank 0; bench_check.c
 * checks one extra iteration per size against datagen's expected values.
 * `tnt-bench fusion` (gradient fusion over a model's tensors) is
 * bench_fusion*.c, bench_compute.c and models.c. The names carry a bench_
 * prefix because none of this is part of the library.
 */
#ifndef TNT_BENCH_H
#define TNT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/tnt.h"

/* Exit codes. A rank that finished but found wrong elements exits with
 * BENCH_EXIT_WRONG_CHILD under -N so that the parent can tell it from a
 * rank that failed (which makes the parent stop the others). */
#define BENCH_EXIT_OK 0
#define BENCH_EXIT_FAIL 1
#define BENCH_EXIT_USAGE 2
#define BENCH_EXIT_WRONG_CHILD 3

/* The largest -N: beyond this a single host is oversubscribed anyway,
 * and datagen's exact checks are designed for up to 64 ranks. */
#define BENCH_MAX_LOCAL_RANKS 256

typedef enum bench_coll {
    BENCH_ALLREDUCE = 0,
    BENCH_BROADCAST,
    BENCH_ALLGATHER,
    BENCH_REDUCE_SCATTER,
    BENCH_COLL_COUNT
} bench_coll_t;

/* --threshold all: one bucket for the whole model (never a value of
 * TNT_FUSION_DEFAULT, which asks for the library's default). */
#define BENCH_THRESHOLD_ALL ((size_t)-2)

/* Options of `tnt-bench fusion`. */
typedef struct bench_fusion_opts {
    const char *model;  /* --model: a spec of models.h */
    double us_per_mib;  /* --compute-us-per-mb; < 0: chosen at startup */
    size_t threshold;   /* --threshold; TNT_FUSION_DEFAULT: the library's */
    int sweep;          /* --sweep: a row per threshold of a fixed list */
    int dry_run;        /* --dry-run: print the bucket plan only */
    int contiguous;     /* --contiguous: gradients in one arena */
    int sleep_compute;  /* --compute sleep: an accelerator computes */
} bench_fusion_opts_t;

typedef struct bench_opts {
    int fusion;        /* `tnt-bench fusion`: coll is unused, fu is */
    bench_fusion_opts_t fu;
    bench_coll_t coll;
    size_t min_bytes;  /* allgather, reduce_scatter: bytes per rank */
    size_t max_bytes;
    size_t factor;     /* multiplication factor of the sweep, >= 2 */
    int iters;         /* timed iterations, >= 1 */
    int warmup;        /* untimed iterations before them, >= 0 */
    int check;         /* run one checked iteration per size and mode */
    tnt_dtype_t dtype;
    tnt_op_t op;
    int outplace;      /* measure the out-of-place form */
    int inplace;       /* measure the in-place form */
    int root;          /* broadcast root */
    int local_ranks;   /* -N: ranks to start here; 0: none */
    int bind;          /* -N --bind-to: a bench_bind_t */
    int mem;           /* --mem: a bench_mem_t */
    const char *json;  /* --json FILE, or NULL */
    int stats;         /* --stats: print tnt_comm_stats after the run */
} bench_opts_t;

/* --stats: rank 0 prints comm's counters (bench_stats.c). Every rank
 * calls it (it is local; only rank 0 prints). */
void bench_print_stats(tnt_comm_t comm, int rank);

/* --bind-to for -N. AUTO, as Open MPI's mpirun: one CPU per rank when
 * there are 2 or more ranks and no more than the CPUs this process may
 * use; none otherwise (one rank: nothing to keep apart; more ranks than
 * CPUs: pinning would forbid the scheduler to balance them). */
typedef enum { BENCH_BIND_AUTO = 0, BENCH_BIND_CORE, BENCH_BIND_NONE }
    bench_bind_t;

/* --mem: where the buffers come from. MALLOC, as a framework's tensors;
 * SHARED, tnt_mem_alloc (on one host the peers read and write them in
 * place: the mapped allreduce). */
typedef enum { BENCH_MEM_MALLOC = 0, BENCH_MEM_SHARED } bench_mem_t;

/* Broadcast and allgather have no reduction: their data use the widest
 * value range datagen offers. */
#define BENCH_DATA_OP TNT_MIN

/* One rank's state while it runs. */
typedef struct bench {
    const bench_opts_t *o;
    tnt_comm_t comm;
    int rank;
    int nranks;
    size_t dsize;        /* bytes per element */
    unsigned char *send; /* NULL for broadcast */
    unsigned char *recv;
} bench_t;

/** "allreduce", "broadcast", ... */
const char *bench_coll_name(bench_coll_t coll);
/** Short dtype name as accepted by -d ("f32", "bf16", ...). */
const char *bench_dtype_name(tnt_dtype_t dtype);
/** Op name as accepted by -o ("sum", "avg", ...). */
const char *bench_op_name(tnt_op_t op);

/** Whether the collective has an in-place (inplace = 1) or out-of-place
 *  (inplace = 0) form: broadcast has one buffer, reduce-scatter no
 *  in-place form in the API. */
int bench_supports(bench_coll_t coll, int inplace);

/** Elements of the send and receive buffers for `count` elements per
 *  rank (allgather, reduce_scatter) or per buffer (allreduce,
 *  broadcast). */
void bench_buf_counts(const bench_t *b, size_t count, size_t *nsend,
                      size_t *nrecv);
/** Fill inputs with fresh data from `seed` and poison the outputs. */
void bench_prepare_check(bench_t *b, size_t count, int inplace,
                         uint64_t seed);
/** Wrong elements of this rank's output after the checked call; the
 *  first is described on stderr. */
uint64_t bench_count_wrong(bench_t *b, size_t count, int inplace,
                           uint64_t seed);

/** `tnt-bench kernels ARGS`: argv[0] is "kernels". Returns an exit
 *  status (bench_kernels.c). */
int bench_kernels_main(int argc, char **argv);

/** Everything one rank does. Returns BENCH_EXIT_OK, or BENCH_EXIT_FAIL
 *  when elements were wrong; library errors exit the process with
 *  BENCH_EXIT_FAIL after a message. */
int bench_run(const bench_opts_t *opts);
/** The same for `tnt-bench fusion` (bench_fusion.c). */
int bench_fusion_run(const bench_opts_t *opts);
/** What a rank runs: bench_fusion_run or bench_run (tnt-bench.c). */
int bench_rank_main(const bench_opts_t *opts);
/** -N: fork opts->local_ranks ranks here, each with the environment a
 *  launcher would give it, and reap them (bench_launch.c). */
int bench_launch_local(const bench_opts_t *opts);

#endif /* TNT_BENCH_H */
