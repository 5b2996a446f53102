/*
 * digits_train: a custom C training loop on real data. It trains a
 * 64-64-64-10 MLP (mlp_model.c) on scikit-learn's 8x8 handwritten digits,
 * data-parallel with libtntcomm the way Tarantella does it: the user gives
 * the global batch; every rank reads the same file and makes the same
 * train/test split and the same shuffle from the seed; tnt_micro_batch()
 * gives each rank its share of every global batch; the master rank
 * initialises the weights and broadcasts them; backprop hands each layer's
 * gradients to the fusion context (op avg) as soon as they are final. The
 * master prints the training loss after every epoch and the test accuracy
 * at the end; the program fails unless every rank ends with bitwise the
 * same weights and the accuracy reaches --min-accuracy.
 *
 * Under tnt-run --elastic it survives the death of ranks (recover()): the
 * step that fails returns TNT_ERR_PEER_LOST; the survivors shrink the
 * communicator to themselves, take the weights of the one that got
 * furthest, make the fusion context anew and split the same global batch
 * over themselves. --kill-rank R --kill-step S makes rank R kill itself
 * at step S, to show it.
 *
 * Run: tnt-run -n 4 build/examples/digits_train --global-batch 64
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tnt/plugin.h>
#include <tnt/tnt.h>

#include "digits_data.h"
#include "example_args.h"
#include "mlp_model.h"

#define HIDDEN 64
#define EXIT_USAGE EX_EXIT_USAGE

struct options {
    const char *data;
    long epochs;
    size_t global_batch;
    double lr, momentum, test_fraction, min_accuracy;
    uint64_t seed;
    long kill_rank, kill_step; /* -1: nobody */
};

struct trainer {
    struct options opt;
    tnt_comm_t comm;
    tnt_fusion_t fusion;
    int rank, size, world_rank;
    int *world_of; /* rank in comm -> rank at the start (comm shrinks) */
    mlp_data_t train, test;
    mlp_t model;
    size_t *perm;  /* the epoch's sample order, the same on every rank */
    long perm_epoch; /* the epoch perm is for (0: none yet) */
    size_t *ident; /* 0 .. n-1, for evaluation */
    size_t steps_per_epoch;
    /* Progress: steps whose update this rank applied, and epochs whose
     * evaluation the ranks finished (both agreed again after a death);
     * epochs whose loss the master printed. */
    long done, evaluated, printed;
    tnt_result_t step_rc; /* the first failure of this step's hand-overs */
};

/* ---- command line ------------------------------------------------------ */

static void usage(FILE *f)
{
    fputs("Usage: tnt-run -n N digits_train [options]\n"
          "\n"
          "Trains a 64-64-64-10 MLP data-parallel on the 8x8 digits of\n"
          "scikit-learn and reports the test accuracy.\n"
          "\n"
          "  --data PATH          digits.csv.gz (default: python3-sklearn's,\n"
          "                       " DIGITS_DEFAULT_PATH ")\n"
          "  --epochs N           passes over the training set (default 15)\n"
          "  --global-batch B     samples per step over all ranks (default "
          "32)\n"
          "  --lr X               learning rate (default 0.05)\n"
          "  --momentum X         SGD momentum in [0, 1) (default 0.9)\n"
          "  --test-fraction X    held-out share of the data (default 0.2)\n"
          "  --min-accuracy X     fail below this test accuracy (default "
          "0.9)\n"
          "  --seed S             split, weights and order (default 1)\n"
          "  --kill-rank R        rank R kills itself (SIGKILL) at the step\n"
          "  --kill-step S        given by --kill-step (default 0); shows a\n"
          "                       job going on without it under tnt-run\n"
          "                       --elastic\n"
          "  -h, --help           this text\n"
          "\n"
          "Exit status: 0 on success, 1 if training or a check failed, 2 on\n"
          "a bad command line.\n",
          f);
}

static void parse_args(int argc, char **argv, struct options *o)
{
    enum { O_DATA = 256, O_EPOCHS, O_BATCH, O_LR, O_MOMENTUM, O_TEST,
           O_MINACC, O_SEED, O_KILL_RANK, O_KILL_STEP };
    static const struct option longopts[] = {
        {"data", required_argument, NULL, O_DATA},
        {"epochs", required_argument, NULL, O_EPOCHS},
        {"global-batch", required_argument, NULL, O_BATCH},
        {"lr", required_argument, NULL, O_LR},
        {"momentum", required_argument, NULL, O_MOMENTUM},
        {"test-fraction", required_argument, NULL, O_TEST},
        {"min-accuracy", required_argument, NULL, O_MINACC},
        {"seed", required_argument, NULL, O_SEED},
        {"kill-rank", required_argument, NULL, O_KILL_RANK},
        {"kill-step", required_argument, NULL, O_KILL_STEP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct options){
        .data = DIGITS_DEFAULT_PATH, .epochs = 15, .global_batch = 32,
        .lr = 0.05, .momentum = 0.9, .test_fraction = 0.2,
        .min_accuracy = 0.9, .seed = 1, .kill_rank = -1, .kill_step = 0,
    };
    ex_args_program("digits_train");
    int c;
    opterr = 0; /* our own messages below */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_DATA:
            o->data = optarg;
            break;
        case O_EPOCHS:
            o->epochs = ex_parse_long("--epochs", optarg, 1, 100000);
            break;
        case O_BATCH:
            o->global_batch =
                (size_t)ex_parse_long("--global-batch", optarg, 1, 1 << 20);
            break;
        case O_LR:
            o->lr = ex_parse_double("--lr", optarg, 0.0, 100.0, 0);
            break;
        case O_MOMENTUM:
            o->momentum = ex_parse_double("--momentum", optarg, 0.0, 0.999, 0);
            break;
        case O_TEST:
            o->test_fraction =
                ex_parse_double("--test-fraction", optarg, 0.01, 0.9, 0);
            break;
        case O_MINACC:
            o->min_accuracy = ex_parse_double("--min-accuracy", optarg, 0.0, 1.0, 0);
            break;
        case O_SEED:
            o->seed = (uint64_t)ex_parse_long("--seed", optarg, 0, LONG_MAX);
            break;
        case O_KILL_RANK:
            o->kill_rank = ex_parse_long("--kill-rank", optarg, 0, INT_MAX);
            break;
        case O_KILL_STEP:
            o->kill_step = ex_parse_long("--kill-step", optarg, 0, LONG_MAX);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            ex_getopt_error(c, argv, optind);
        }
    }
    if (optind < argc)
        ex_bad_option("argument", argv[optind], "options only");
}

/* ---- errors ------------------------------------------------------------ */

/* Aborting the communicator first makes the other ranks fail at once,
 * naming this one, instead of waiting out their deadline. */
static _Noreturn void leave(struct trainer *tr)
{
    if (tr->comm)
        tnt_comm_abort(tr->comm);
    if (tr->fusion)
        tnt_fusion_free(tr->fusion);
    if (tr->comm)
        tnt_comm_free(tr->comm);
    exit(1);
}

static _Noreturn void fail(struct trainer *tr, const char *what,
                           tnt_result_t rc)
{
    fprintf(stderr, "digits_train: rank %d: %s failed: %s: %s\n", tr->rank,
            what, tnt_strerror(rc), tnt_last_error());
    leave(tr);
}

#define CHECK(tr, call)                                                     \
    do {                                                                    \
        tnt_result_t rc_ = (call);                                          \
        if (rc_ != TNT_SUCCESS)                                             \
            fail((tr), #call, rc_);                                         \
    } while (0)

static _Noreturn void out_of_memory(int rank)
{
    fprintf(stderr, "digits_train: rank %d: out of memory\n", rank);
    exit(1);
}

/* ---- setup ------------------------------------------------------------- */

/* Every rank reads the file itself; a rank that cannot stops all of them
 * through the abort in leave() rather than leaving them in a collective. */
static void setup_data(struct trainer *tr)
{
    mlp_data_t all;
    char err[512];
    if (digits_load(tr->opt.data, &all, err, sizeof(err)) != 0) {
        fprintf(stderr, "digits_train: rank %d: %s\n", tr->rank, err);
        leave(tr);
    }
    size_t n_test = (size_t)(tr->opt.test_fraction * (double)all.n + 0.5);
    if (n_test < 1)
        n_test = 1;
    if (n_test >= all.n)
        n_test = all.n - 1;
    if (digits_split(&all, n_test, mlp_rng_seed(tr->opt.seed, 1), &tr->train,
                     &tr->test) != 0)
        out_of_memory(tr->rank);
    if (tr->opt.global_batch > tr->train.n) {
        fprintf(stderr, "digits_train: rank %d: --global-batch %zu is larger "
                "than the %zu training samples\n", tr->rank,
                tr->opt.global_batch, tr->train.n);
        leave(tr);
    }
}

/* Backprop's hook: hands a finished layer gradient to the fusion context,
 * which starts reducing its bucket once the bucket is complete. */
static void on_grad_ready(void *arg, size_t tensor, float *grad)
{
    struct trainer *tr = arg;
    /* After a failure the rest is not handed over: wait_all ends the
     * step with the error once no bucket is in flight. */
    if (tr->step_rc == TNT_SUCCESS)
        tr->step_rc = tnt_fusion_ready(tr->fusion, tensor, grad);
}

/* The fusion context of the model's gradients on tr->comm (collective). */
static tnt_result_t make_fusion(struct trainer *tr)
{
    tnt_tensor_desc_t desc[MLP_TENSORS];
    for (size_t t = 0; t < MLP_TENSORS; t++) {
        float *grad;
        desc[t] = (tnt_tensor_desc_t)TNT_TENSOR_DESC_INIT;
        mlp_tensor(&tr->model, t, &grad, &desc[t].count, &desc[t].name);
        desc[t].dtype = TNT_F32;
    }
    tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
    cfg.op = TNT_AVG;
    return tnt_fusion_create(tr->comm, desc, MLP_TENSORS, &cfg, &tr->fusion);
}

static void setup_model(struct trainer *tr)
{
    size_t width[MLP_LAYERS + 1] = {DIGITS_FEATURES, HIDDEN, HIDDEN,
                                    DIGITS_CLASSES};
    size_t n = tr->train.n > tr->test.n ? tr->train.n : tr->test.n;
    /* Room for the whole global batch: after a death the survivors'
     * micro-batches grow. */
    if (mlp_create(&tr->model, width, tr->opt.global_batch) != 0)
        out_of_memory(tr->rank);
    tr->perm = malloc(tr->train.n * sizeof(*tr->perm));
    tr->ident = malloc(n * sizeof(*tr->ident));
    if (!tr->perm || !tr->ident)
        out_of_memory(tr->rank);
    for (size_t i = 0; i < tr->train.n; i++)
        tr->perm[i] = i;
    for (size_t i = 0; i < n; i++)
        tr->ident[i] = i;

    /* Only the master initialises; the others start from NaN so that a
     * broadcast that did not arrive cannot go unnoticed. */
    mlp_t *m = &tr->model;
    if (tr->rank == TNT_MASTER_RANK)
        mlp_init_params(m, mlp_rng_seed(tr->opt.seed, 2));
    else
        for (size_t i = 0; i < m->nparams; i++)
            m->params[i] = NAN;
    CHECK(tr, tnt_broadcast(tr->comm, m->params, m->nparams, TNT_F32,
                            TNT_MASTER_RANK));
    CHECK(tr, make_fusion(tr));
}

/* ---- training ---------------------------------------------------------- */

/* Loss and correct predictions of the current weights over all of d, each
 * rank evaluating its share and the shares summed. */
static tnt_result_t evaluate(struct trainer *tr, const mlp_data_t *d,
                             double *loss, double *accuracy)
{
    double stats[2] = {0.0, 0.0};
    size_t off, count, chunk = tr->model.max_batch;
    CHECK(tr, tnt_micro_batch(d->n, tr->rank, tr->size, &off, &count));
    for (size_t i = 0; i < count; i += chunk) {
        size_t n = count - i < chunk ? count - i : chunk;
        mlp_forward(&tr->model, d, tr->ident + off + i, n, &stats[0],
                    &stats[1]);
    }
    tnt_result_t rc = tnt_allreduce(tr->comm, TNT_IN_PLACE, stats, 2,
                                    TNT_F64, TNT_SUM);
    *loss = stats[0] / (double)d->n;
    *accuracy = stats[1] / (double)d->n;
    return rc;
}

/* The sample order of epoch e (1-based): the same shuffle on every rank,
 * each epoch's applied to the last one's; made from the start again when
 * a rank resumes elsewhere than at the next epoch. */
static void order_for(struct trainer *tr, long epoch)
{
    if (tr->perm_epoch == epoch)
        return;
    size_t n = tr->train.n;
    if (tr->perm_epoch != epoch - 1) {
        for (size_t i = 0; i < n; i++)
            tr->perm[i] = i;
        tr->perm_epoch = 0;
    }
    while (tr->perm_epoch < epoch) {
        tr->perm_epoch++;
        uint64_t rng = mlp_rng_seed(tr->opt.seed,
                                    100 + (uint64_t)tr->perm_epoch);
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)(mlp_rng_next(&rng) % (i + 1));
            size_t t = tr->perm[i];
            tr->perm[i] = tr->perm[j];
            tr->perm[j] = t;
        }
    }
}

/* Step tr->done: this rank's share of its global batch, forward,
 * backward with the gradients handed to the fusion context, then the
 * update, which comes after every collective of the step: a rank that
 * failed in the step still holds the weights from before it. */
static tnt_result_t train_step(struct trainer *tr)
{
    const struct options *o = &tr->opt;
    if (tr->world_rank == o->kill_rank && tr->done == o->kill_step)
        kill(getpid(), SIGKILL); /* a crash, for the tests */
    long epoch = tr->done / (long)tr->steps_per_epoch + 1;
    size_t start = (size_t)(tr->done % (long)tr->steps_per_epoch) *
                   o->global_batch;
    order_for(tr, epoch);
    size_t n = tr->train.n;
    size_t global = n - start < o->global_batch ? n - start
                                                : o->global_batch;
    size_t off, count;
    double unused[2] = {0.0, 0.0};
    CHECK(tr, tnt_micro_batch(global, tr->rank, tr->size, &off, &count));
    const size_t *idx = tr->perm + start + off;
    mlp_forward(&tr->model, &tr->train, idx, count, &unused[0], &unused[1]);
    /*
     * The fusion context averages over ranks (op avg). Micro-batches may
     * differ by a sample, so each rank scales its summed per-sample
     * gradients by size/global rather than 1/count: the average of the
     * ranks' contributions is then the mean over the global batch for
     * every split (a rank with no sample adds zero).
     */
    tr->step_rc = TNT_SUCCESS;
    mlp_backward(&tr->model, &tr->train, idx, count,
                 (float)tr->size / (float)global, on_grad_ready, tr);
    tnt_result_t rc = tnt_fusion_wait_all(tr->fusion);
    if (tr->step_rc != TNT_SUCCESS)
        rc = tr->step_rc;
    if (rc != TNT_SUCCESS)
        return rc;
    mlp_sgd_step(&tr->model, (float)o->lr, (float)o->momentum);
    tr->done++;
    return TNT_SUCCESS;
}

/* The training loss after the epoch that tr->done just completed. */
static tnt_result_t eval_epoch(struct trainer *tr)
{
    double loss, acc;
    long epoch = tr->done / (long)tr->steps_per_epoch;
    tnt_result_t rc = evaluate(tr, &tr->train, &loss, &acc);
    if (rc != TNT_SUCCESS)
        return rc;
    tr->evaluated = epoch;
    if (tr->rank == TNT_MASTER_RANK && epoch > tr->printed) {
        printf("%5ld  %.9f\n", epoch, loss);
        fflush(stdout);
    }
    tr->printed = epoch;
    return TNT_SUCCESS;
}

/*
 * A peer was lost: the survivors agree on who died and shrink the
 * communicator to themselves (tnt_comm_shrink: needs TNT_RECOVERY=1,
 * which tnt-run --elastic sets; without it this fails as before). They
 * may be a step apart (a rank can finish a step's last reduction where
 * another still waits for it): all take the weights and momentum of one
 * that got furthest, and evaluate an epoch again unless all had. A rank
 * dying meanwhile is shrunk away in turn.
 */
static void recover(struct trainer *tr)
{
    for (;;) {
        tnt_comm_t nc;
        tnt_fusion_free(tr->fusion); /* of the failed communicator */
        tr->fusion = NULL;
        tnt_result_t rc = tnt_comm_shrink(tr->comm, &nc);
        if (rc != TNT_SUCCESS)
            fail(tr, "tnt_comm_shrink (elastic runs: tnt-run --elastic)",
                 rc);
        int *dead = malloc((size_t)tr->size * sizeof(*dead)), ndead = 0;
        if (!dead)
            out_of_memory(tr->rank);
        CHECK(tr, tnt_comm_failed_ranks(tr->comm, dead, tr->size, &ndead));
        /* The dead as ranks at the start, for the message; the map
         * follows the shrink (failed_ranks is ascending). */
        char died[256] = "";
        size_t len = 0;
        int keep = 0, old_size = tr->size;
        for (int q = 0, k = 0; q < old_size; q++) {
            if (k < ndead && dead[k] == q) {
                if (len < sizeof(died))
                    len += (size_t)snprintf(died + len, sizeof(died) - len,
                                            "%s %d", k ? "," : "",
                                            tr->world_of[q]);
                k++;
            } else {
                tr->world_of[keep++] = tr->world_of[q];
            }
        }
        free(dead);
        tnt_comm_free(tr->comm);
        tr->comm = nc;
        CHECK(tr, tnt_comm_rank(nc, &tr->rank));
        CHECK(tr, tnt_comm_size(nc, &tr->size));
        int64_t v[2] = {tr->done, -(int64_t)tr->evaluated};
        int64_t root = 0;
        mlp_t *m = &tr->model;
        rc = tnt_allreduce(nc, TNT_IN_PLACE, v, 2, TNT_I64, TNT_MAX);
        if (rc == TNT_SUCCESS) {
            root = tr->done == v[0] ? tr->rank : tr->size;
            rc = tnt_allreduce(nc, TNT_IN_PLACE, &root, 1, TNT_I64, TNT_MIN);
        }
        if (rc == TNT_SUCCESS)
            rc = tnt_broadcast(nc, m->params, m->nparams, TNT_F32, (int)root);
        if (rc == TNT_SUCCESS)
            rc = tnt_broadcast(nc, m->velocity, m->nparams, TNT_F32,
                               (int)root);
        if (rc == TNT_SUCCESS)
            rc = make_fusion(tr);
        if (rc == TNT_ERR_PEER_LOST)
            continue;
        if (rc != TNT_SUCCESS)
            fail(tr, "resuming after a death", rc);
        tr->done = (long)v[0];
        tr->evaluated = (long)-v[1];
        if (tr->rank == TNT_MASTER_RANK) {
            printf("digits_train: world rank%s%s died; going on with %d "
                   "rank%s from step %ld\n", ndead > 1 ? "s" : "", died,
                   tr->size, tr->size == 1 ? "" : "s", tr->done);
            fflush(stdout);
        }
        return;
    }
}

/* Every epoch's steps, each followed by its evaluation; a lost peer is
 * recovered from (above), any other failure ends the program. */
static void train(struct trainer *tr)
{
    long total = tr->opt.epochs * (long)tr->steps_per_epoch;
    while (tr->done < total || tr->evaluated < tr->opt.epochs) {
        int at_end = tr->done % (long)tr->steps_per_epoch == 0 &&
                     tr->done > 0;
        tnt_result_t rc = at_end && tr->evaluated <
                                        tr->done / (long)tr->steps_per_epoch
                              ? eval_epoch(tr)
                              : train_step(tr);
        if (rc == TNT_ERR_PEER_LOST)
            recover(tr);
        else if (rc != TNT_SUCCESS)
            fail(tr, "training", rc);
    }
}

/* Every rank must hold bitwise the same weights and momentum. */
static int check_identical(struct trainer *tr)
{
    uint64_t mine = mlp_hash(&tr->model);
    uint64_t *all = malloc((size_t)tr->size * sizeof(*all));
    if (!all)
        out_of_memory(tr->rank);
    CHECK(tr, tnt_allgather(tr->comm, &mine, all, 1, TNT_U64));
    int same = 1;
    for (int r = 1; r < tr->size; r++) {
        if (all[r] == all[0])
            continue;
        same = 0;
        if (tr->rank == TNT_MASTER_RANK)
            fprintf(stderr, "digits_train: rank %d's weights differ from "
                    "rank 0's: hash %016" PRIx64 " vs %016" PRIx64 "\n", r,
                    all[r], all[0]);
    }
    if (same && tr->rank == TNT_MASTER_RANK)
        printf("weights identical on all %d rank%s (hash %016" PRIx64 ")\n",
               tr->size, tr->size == 1 ? "" : "s", all[0]);
    free(all);
    return same;
}

int main(int argc, char **argv)
{
    struct trainer tr = {0};
    parse_args(argc, argv, &tr.opt);

    tnt_result_t rc = tnt_comm_init_from_env(&tr.comm);
    if (rc != TNT_SUCCESS)
        fail(&tr, "tnt_comm_init_from_env", rc);
    CHECK(&tr, tnt_comm_rank(tr.comm, &tr.rank));
    CHECK(&tr, tnt_comm_size(tr.comm, &tr.size));
    tr.world_rank = tr.rank;
    tr.world_of = malloc((size_t)tr.size * sizeof(*tr.world_of));
    if (!tr.world_of)
        out_of_memory(tr.rank);
    for (int r = 0; r < tr.size; r++)
        tr.world_of[r] = r;
    setup_data(&tr);
    tr.steps_per_epoch = (tr.train.n + tr.opt.global_batch - 1) /
                         tr.opt.global_batch;
    setup_model(&tr);
    int master = tr.rank == TNT_MASTER_RANK;
    if (master) {
        size_t off, lo, hi;
        CHECK(&tr, tnt_micro_batch(tr.opt.global_batch, tr.size - 1, tr.size,
                                   &off, &lo));
        CHECK(&tr, tnt_micro_batch(tr.opt.global_batch, 0, tr.size, &off,
                                   &hi));
        printf("digits_train: %d rank%s, %zu training and %zu test "
               "samples, MLP 64-%d-%d-10 (%zu parameters)\n", tr.size,
               tr.size == 1 ? "" : "s", tr.train.n, tr.test.n, HIDDEN,
               HIDDEN, tr.model.nparams);
        printf("digits_train: global batch %zu (micro-batches of %zu to "
               "%zu), lr %g, momentum %g, seed %" PRIu64 "\n",
               tr.opt.global_batch, lo, hi, tr.opt.lr, tr.opt.momentum,
               tr.opt.seed);
        printf("epoch         loss\n");
    }

    train(&tr);
    double loss, acc;
    CHECK(&tr, evaluate(&tr, &tr.test, &loss, &acc));
    int ok = check_identical(&tr);
    master = tr.rank == TNT_MASTER_RANK; /* another after a shrink */
    /* The accuracy is allreduced, so every rank decides alike. */
    if (master)
        printf("test accuracy %.4f (%zu samples), test loss %.6f\n", acc,
               tr.test.n, loss);
    if (!(acc >= tr.opt.min_accuracy)) {
        ok = 0;
        if (master)
            fprintf(stderr, "digits_train: test accuracy %.4f is below "
                    "--min-accuracy %g\n", acc, tr.opt.min_accuracy);
    }

    /* No rank may exit before the master has printed its verdict: a rank
     * that exits non-zero makes tnt-run stop the others at once. */
    fflush(stdout);
    CHECK(&tr, tnt_barrier(tr.comm));
    CHECK(&tr, tnt_fusion_free(tr.fusion));
    tr.fusion = NULL;
    CHECK(&tr, tnt_comm_free(tr.comm));
    mlp_destroy(&tr.model);
    mlp_data_free(&tr.train);
    mlp_data_free(&tr.test);
    free(tr.perm);
    free(tr.ident);
    free(tr.world_of);
    return ok ? 0 : 1;
}
