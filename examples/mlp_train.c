/*
 * mlp_train: a custom C training loop that trains a small MLP
 * data-parallel with libtntcomm, the way Tarantella does it, using only the
 * public headers and the shared library. Every rank generates the same
 * synthetic data set and holds the whole model; the master rank
 * initialises the weights and broadcasts them; each step, every rank runs
 * forward and backward on its micro-batch of the global batch and hands
 * each gradient tensor to the fusion context (tnt/plugin.h) the moment
 * backprop has computed it, so buckets are reduced while backprop goes on;
 * after tnt_fusion_wait_all() every rank applies the same SGD step to the
 * same summed gradients. At the end the ranks compare a hash of their
 * weights and their final loss, and the program fails unless they all
 * agree and the loss has at least halved. The model is in mlp_model.c,
 * the command line in mlp_options.c.
 *
 * Run: tnt-run -n 3 build/examples/mlp_train --epochs 10
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tnt/plugin.h>
#include <tnt/tnt.h>

#include "mlp_model.h"
#include "mlp_options.h"

#define FEATURES 32
#define HIDDEN 64
#define CLASSES 4
/* The run fails unless the final loss is below this fraction of the loss
 * of the initial weights: the evidence that the ranks really trained. */
#define REQUIRED_LOSS_RATIO 0.5

struct trainer {
    struct mlp_options opt;
    tnt_comm_t comm;
    tnt_fusion_t fusion;
    int rank, size;
    mlp_data_t data;
    mlp_t model;
    size_t *perm;  /* the epoch's sample order, the same on every rank */
    size_t *ident; /* 0 .. samples-1, for evaluation */
};

/* ---- errors ------------------------------------------------------------ */

/* Reports a failed library call and leaves. Aborting the communicator
 * first makes the other ranks fail at once, naming this one, instead of
 * waiting out their deadline. */
static _Noreturn void fail(struct trainer *tr, const char *what,
                           tnt_result_t rc)
{
    fprintf(stderr, "mlp_train: rank %d: %s failed: %s: %s\n", tr->rank,
            what, tnt_strerror(rc), tnt_last_error());
    if (tr->comm)
        tnt_comm_abort(tr->comm);
    if (tr->fusion)
        tnt_fusion_free(tr->fusion);
    if (tr->comm)
        tnt_comm_free(tr->comm);
    exit(1);
}

#define CHECK(tr, call)                                                     \
    do {                                                                    \
        tnt_result_t rc_ = (call);                                          \
        if (rc_ != TNT_SUCCESS)                                             \
            fail((tr), #call, rc_);                                         \
    } while (0)

static _Noreturn void out_of_memory(int rank)
{
    fprintf(stderr, "mlp_train: rank %d: out of memory\n", rank);
    exit(1);
}

/* ---- setup ------------------------------------------------------------- */

/* Backprop's hook: hands a finished gradient to the fusion context, which
 * starts reducing its bucket once the bucket is complete. */
static void on_grad_ready(void *arg, size_t tensor, float *grad)
{
    struct trainer *tr = arg;
    CHECK(tr, tnt_fusion_ready(tr->fusion, tensor, grad));
}

static void setup_model(struct trainer *tr)
{
    const struct mlp_options *o = &tr->opt;
    size_t width[MLP_LAYERS + 1] = {FEATURES, HIDDEN, HIDDEN, CLASSES};
    /* The largest micro-batch is global/size rounded up; evaluation runs
     * in chunks of the same size. */
    size_t max_batch = (o->global_batch + (size_t)tr->size - 1) /
                       (size_t)tr->size;
    if (mlp_data_make(&tr->data, o->samples, FEATURES, CLASSES,
                      mlp_rng_seed(o->seed, 1)) != 0 ||
        mlp_create(&tr->model, width, max_batch) != 0)
        out_of_memory(tr->rank);
    tr->perm = malloc(o->samples * sizeof(*tr->perm));
    tr->ident = malloc(o->samples * sizeof(*tr->ident));
    if (!tr->perm || !tr->ident)
        out_of_memory(tr->rank);
    for (size_t i = 0; i < o->samples; i++)
        tr->perm[i] = tr->ident[i] = i;

    /* As in Tarantella, only the master initialises the weights and the
     * others receive them. The other ranks start from NaN, so a broadcast
     * that failed to arrive would show as a NaN loss and a hash mismatch
     * rather than go unnoticed. */
    mlp_t *m = &tr->model;
    if (tr->rank == TNT_MASTER_RANK)
        mlp_init_params(m, mlp_rng_seed(o->seed, 2));
    else
        for (size_t i = 0; i < m->nparams; i++)
            m->params[i] = NAN;
    CHECK(tr, tnt_broadcast(tr->comm, m->params, m->nparams, TNT_F32,
                            TNT_MASTER_RANK));
}

static void setup_fusion(struct trainer *tr)
{
    tnt_tensor_desc_t desc[MLP_TENSORS];
    for (size_t t = 0; t < MLP_TENSORS; t++) {
        float *grad;
        desc[t] = (tnt_tensor_desc_t)TNT_TENSOR_DESC_INIT;
        mlp_tensor(&tr->model, t, &grad, &desc[t].count, &desc[t].name);
        desc[t].dtype = TNT_F32;
    }
    tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
    /*
     * SUM, not AVG. Micro-batches differ by one sample when the global
     * batch is not a multiple of the rank count, so the average of the
     * ranks' local means is not the mean over the global batch. Each rank
     * instead scales its summed per-sample gradients by 1/global_batch
     * (mlp_backward's scale) and the ranks' contributions are summed,
     * which gives the exact global mean for any split, including ranks
     * with no sample at all.
     */
    cfg.op = TNT_SUM;
    cfg.min_bucket_bytes = tr->opt.threshold;
    CHECK(tr, tnt_fusion_create(tr->comm, desc, MLP_TENSORS, &cfg,
                                &tr->fusion));
}

static void print_setup(struct trainer *tr)
{
    const struct mlp_options *o = &tr->opt;
    size_t nb, off, lo, hi;
    CHECK(tr, tnt_fusion_num_buckets(tr->fusion, &nb));
    CHECK(tr, tnt_micro_batch(o->global_batch, tr->size - 1, tr->size, &off,
                              &lo));
    CHECK(tr, tnt_micro_batch(o->global_batch, 0, tr->size, &off, &hi));
    printf("mlp_train: %d rank%s, %zu samples, MLP %d-%d-%d-%d "
           "(%zu parameters), seed %" PRIu64 "\n", tr->size,
           tr->size == 1 ? "" : "s", o->samples, FEATURES, HIDDEN, HIDDEN,
           CLASSES, tr->model.nparams, o->seed);
    printf("mlp_train: global batch %zu (micro-batches of %zu to %zu), "
           "lr %g, momentum %g\n", o->global_batch, lo, hi, o->lr,
           o->momentum);
    if (o->threshold == TNT_FUSION_DEFAULT)
        printf("mlp_train: fusion: %d tensors in %zu bucket%s "
               "(default threshold)\n", MLP_TENSORS, nb, nb == 1 ? "" : "s");
    else
        printf("mlp_train: fusion: %d tensors in %zu bucket%s "
               "(threshold %zu bytes)\n", MLP_TENSORS, nb,
               nb == 1 ? "" : "s", o->threshold);
    if (o->show_plan) {
        /* Try a buffer that fits most plans, then one of the size the
         * library asked for. */
        size_t len = 1024, needed = 0;
        char *text = malloc(len);
        if (!text)
            out_of_memory(tr->rank);
        CHECK(tr, tnt_fusion_describe(tr->fusion, text, len, &needed));
        if (needed > len) {
            free(text);
            len = needed;
            if (!(text = malloc(len)))
                out_of_memory(tr->rank);
            CHECK(tr, tnt_fusion_describe(tr->fusion, text, len, NULL));
        }
        fputs(text, stdout);
        free(text);
    }
    printf("epoch  train-loss      loss  accuracy\n");
}

/* ---- training ---------------------------------------------------------- */

/* Adds this rank's share of the loss and correct predictions over the
 * whole data set to stats[0] and stats[1]. */
static void evaluate(struct trainer *tr, double stats[2])
{
    size_t off, count;
    CHECK(tr, tnt_micro_batch(tr->opt.samples, tr->rank, tr->size, &off,
                              &count));
    for (size_t i = 0; i < count; i += tr->model.max_batch) {
        size_t n = count - i < tr->model.max_batch ? count - i
                                                   : tr->model.max_batch;
        mlp_forward(&tr->model, &tr->data, tr->ident + off + i, n,
                    &stats[0], &stats[1]);
    }
}

/* One pass over the data; adds this rank's training loss and correct
 * predictions to stats[0] and stats[1]. */
static void train_epoch(struct trainer *tr, long epoch, double stats[2])
{
    const struct mlp_options *o = &tr->opt;
    /* The same shuffle on every rank: the global batches must agree. */
    uint64_t rng = mlp_rng_seed(o->seed, 100 + (uint64_t)epoch);
    for (size_t i = o->samples - 1; i > 0; i--) {
        size_t j = (size_t)(mlp_rng_next(&rng) % (i + 1));
        size_t t = tr->perm[i];
        tr->perm[i] = tr->perm[j];
        tr->perm[j] = t;
    }

    for (size_t start = 0; start < o->samples; start += o->global_batch) {
        /* The last global batch may be short; it is split the same way. */
        size_t global = o->samples - start < o->global_batch
                            ? o->samples - start
                            : o->global_batch;
        size_t off, count;
        CHECK(tr, tnt_micro_batch(global, tr->rank, tr->size, &off, &count));
        const size_t *idx = tr->perm + start + off;
        mlp_forward(&tr->model, &tr->data, idx, count, &stats[0], &stats[1]);
        mlp_backward(&tr->model, &tr->data, idx, count, 1.0f / (float)global,
                     on_grad_ready, tr);
        CHECK(tr, tnt_fusion_wait_all(tr->fusion));
        mlp_sgd_step(&tr->model, (float)o->lr, (float)o->momentum);
    }
}

/* The global loss of the current weights, and the epoch's report. */
static double report(struct trainer *tr, long epoch, double train[2])
{
    double stats[4] = {train[0], train[1], 0.0, 0.0};
    evaluate(tr, &stats[2]);
    CHECK(tr, tnt_allreduce(tr->comm, TNT_IN_PLACE, stats, 4, TNT_F64,
                            TNT_SUM));
    double n = (double)tr->opt.samples;
    if (tr->rank == TNT_MASTER_RANK) {
        if (epoch == 0)
            printf("%5ld %11s %9.6f %8.2f%%\n", epoch, "-", stats[2] / n,
                   100.0 * stats[3] / n);
        else
            printf("%5ld %11.6f %9.6f %8.2f%%\n", epoch, stats[0] / n,
                   stats[2] / n, 100.0 * stats[3] / n);
        fflush(stdout);
    }
    return stats[2] / n;
}

/* ---- the final checks -------------------------------------------------- */

/* Every rank must hold bitwise the same weights, momentum and loss. */
static int check_identical(struct trainer *tr, double loss)
{
    if (tr->opt.diverge_rank == tr->rank)
        tr->model.params[0] = nextafterf(tr->model.params[0], INFINITY);
    uint64_t mine[2] = {mlp_hash(&tr->model), 0};
    memcpy(&mine[1], &loss, sizeof(loss));
    uint64_t *all = malloc(2 * (size_t)tr->size * sizeof(*all));
    if (!all)
        out_of_memory(tr->rank);
    CHECK(tr, tnt_allgather(tr->comm, mine, all, 2, TNT_U64));
    int same = 1;
    for (int r = 1; r < tr->size; r++) {
        if (all[2 * r] == all[0] && all[2 * r + 1] == all[1])
            continue;
        same = 0;
        if (tr->rank == TNT_MASTER_RANK)
            fprintf(stderr, "mlp_train: rank %d differs from rank 0: weights "
                    "hash %016" PRIx64 " vs %016" PRIx64 ", loss bits "
                    "%016" PRIx64 " vs %016" PRIx64 "\n", r, all[2 * r],
                    all[0], all[2 * r + 1], all[1]);
    }
    if (same && tr->rank == TNT_MASTER_RANK)
        printf("weights and loss identical on all %d rank%s "
               "(hash %016" PRIx64 ")\n", tr->size, tr->size == 1 ? "" : "s",
               all[0]);
    free(all);
    return same;
}

int main(int argc, char **argv)
{
    struct trainer tr = {0};
    mlp_parse_args(argc, argv, &tr.opt);

    tnt_result_t rc = tnt_comm_init_from_env(&tr.comm);
    if (rc != TNT_SUCCESS)
        fail(&tr, "tnt_comm_init_from_env", rc);
    CHECK(&tr, tnt_comm_rank(tr.comm, &tr.rank));
    CHECK(&tr, tnt_comm_size(tr.comm, &tr.size));
    if (tr.opt.diverge_rank >= tr.size) {
        fprintf(stderr, "mlp_train: rank %d: --diverge-rank %ld names no "
                "rank of this job of %d\n", tr.rank, tr.opt.diverge_rank,
                tr.size);
        tnt_comm_free(tr.comm);
        return MLP_EXIT_USAGE;
    }
    setup_model(&tr);
    setup_fusion(&tr);
    if (tr.rank == TNT_MASTER_RANK)
        print_setup(&tr);

    double none[2] = {0.0, 0.0};
    double initial = report(&tr, 0, none), loss = initial;
    for (long e = 1; e <= tr.opt.epochs; e++) {
        double train[2] = {0.0, 0.0};
        train_epoch(&tr, e, train);
        loss = report(&tr, e, train);
    }

    int ok = check_identical(&tr, loss);
    /* Every rank sees the same allreduced losses, so all decide alike. */
    if (!(loss < REQUIRED_LOSS_RATIO * initial)) {
        ok = 0;
        if (tr.rank == TNT_MASTER_RANK)
            fprintf(stderr, "mlp_train: final loss %.6f is not below %g x "
                    "the initial loss %.6f\n", loss, REQUIRED_LOSS_RATIO,
                    initial);
    } else if (tr.rank == TNT_MASTER_RANK) {
        printf("final loss %.6f = %.4f x initial loss %.6f\n", loss,
               loss / initial, initial);
    }

    /* No rank may exit before the master has printed its verdict: a rank
     * that exits non-zero makes tnt-run stop the others at once. */
    fflush(stdout);
    CHECK(&tr, tnt_barrier(tr.comm));
    CHECK(&tr, tnt_fusion_free(tr.fusion));
    tr.fusion = NULL;
    CHECK(&tr, tnt_comm_free(tr.comm));
    tr.comm = NULL;
    mlp_destroy(&tr.model);
    mlp_data_free(&tr.data);
    free(tr.perm);
    free(tr.ident);
    return ok ? 0 : 1;
}
