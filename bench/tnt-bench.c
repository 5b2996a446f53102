/*
 * tnt-bench: the benchmark of libtntcomm, after nccl-tests. This file reads
 * the command line and decides how the ranks come to be: under a launcher
 * (tnt-run, or anything that sets TNT_RANK/TNT_SIZE) this process is one
 * rank; with -N K bench_launch.c forks K local ranks, giving each the
 * environment a launcher would; with neither it runs as a world of one.
 * What a rank then does is in bench_run.c (collectives) or bench_fusion.c
 * (`tnt-bench fusion`). `tnt-bench kernels`, which needs no ranks, has its
 * own command line (bench_kernels.c).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"
#include "util/param.h"
#include "models.h"

/* Defaults of `tnt-bench fusion`, whose iterations take seconds. */
#define FUSION_ITERS 5
#define FUSION_WARMUP 1

static const char *coll_names[BENCH_COLL_COUNT] = {
    "allreduce", "broadcast", "allgather", "reduce_scatter",
};

/* -d names, indexed by tnt_dtype_t, and the longer names also accepted. */
static const char *dtype_names[TNT_DTYPE_COUNT] = {
    "f32", "f64", "f16", "bf16", "i8", "u8", "i32", "u32", "i64", "u64",
};
static const char *dtype_aliases[TNT_DTYPE_COUNT] = {
    "float", "double", "half", "bfloat16", "int8",
    "uint8", "int32", "uint32", "int64", "uint64",
};
static const char *op_names[TNT_OP_COUNT] = {
    "sum", "avg", "prod", "min", "max",
};

const char *bench_coll_name(bench_coll_t coll)
{
    return (unsigned)coll < BENCH_COLL_COUNT ? coll_names[coll] : "?";
}

const char *bench_dtype_name(tnt_dtype_t dtype)
{
    return (unsigned)dtype < TNT_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

const char *bench_op_name(tnt_op_t op)
{
    return (unsigned)op < TNT_OP_COUNT ? op_names[op] : "?";
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: tnt-bench [COLLECTIVE] [options]\n"
"       tnt-bench fusion --model MODEL [options]\n"
"       tnt-bench kernels [options]   (reduction kernels; see its --help)\n"
"\n"
"Times a collective of libtntcomm over a sweep of sizes and checks every\n"
"result, as nccl-tests do. COLLECTIVE is allreduce (default), broadcast,\n"
"allgather or reduce_scatter.\n"
"\n"
"Sizes are bytes; k, M, G (or KiB, MiB, GiB) are powers of 1024. For\n"
"allgather and reduce_scatter a size is what each rank contributes.\n"
"  --size S             one size only (same as -b S -e S)\n"
"  -b, --minbytes S     smallest size (default 8)\n"
"  -e, --maxbytes S     largest size (default 32M)\n"
"  -f, --stepfactor F   multiply the size by F from row to row (default 2)\n"
"Measurement:\n"
"  -n, --iters N        timed iterations per size (default 20)\n"
"  -w, --warmup_iters N untimed iterations before them (default 5)\n"
"  -c, --check 0|1      check one extra iteration on fresh data (default 1)\n"
"  -d, --datatype T     f32 f64 f16 bf16 i8 u8 i32 u32 i64 u64 (default f32)\n"
"  -o, --op OP          sum avg prod min max (default sum)\n"
"  -r, --root R         root rank of broadcast (default 0)\n"
"      --inplace-only   measure the in-place form only\n"
"      --outplace-only  measure the out-of-place form only\n"
"      --mem M          buffers from malloc (default, as a framework's\n"
"                       tensors) or shared (tnt_mem_alloc: on one host\n"
"                       the ranks reduce each other's buffers in place)\n"
"      --json FILE      also write the results as JSON (rank 0)\n"
"      --stats          after the run, print rank 0's counters\n"
"                       (tnt_comm_stats: calls and bytes per kind and\n"
"                       algorithm, messages per transport, time waited)\n"
"Fusion (tnt-bench fusion): an emulated backprop whose gradients are\n"
"reduced three ways: the fusion plugin ABI (fused), one iallreduce per\n"
"tensor (per-tensor), one allreduce after backprop (one-shot):\n"
"  --model M            resnet50, transformer-big, transformer-big-noembed\n"
"                       or uniform:N:BYTES (N f32 tensors of BYTES each)\n"
"  --threshold S|all    fusion threshold (default: the library's, 32k)\n"
"  --sweep              thresholds 0 4k 32k 256k 1M 8M all; best marked\n"
"  --compute-us-per-mb X  emulated compute, microseconds per MiB of\n"
"                       gradient (default: 1.5 x one allreduce of all)\n"
"  --compute spin|sleep the emulated backprop runs on the CPU (spin, the\n"
"                       default) or on an accelerator (sleep: the CPU\n"
"                       is free for communication meanwhile)\n"
"  --contiguous         all gradients in one arena (default: one\n"
"                       allocation per tensor)\n"
"  --dry-run            print the bucket plan and exit\n"
"  also -n (default 5), -w/--warmup (default 1), -c, -o sum|avg (default\n"
"  avg), --json, -N\n"
"Ranks:\n"
"  -N, --nranks K       start K local ranks (not under a launcher)\n"
"      --bind-to B      with -N: core (each rank on one CPU of those this\n"
"                       process may use), none, or auto (the default:\n"
"                       core when 2 <= K <= those CPUs, as mpirun)\n"
"  -h, --help           this text\n"
"  --version            print libtntcomm's version\n"
"\n"
"Examples:\n"
"  tnt-bench -N 4 allreduce -b 8 -e 64M -f 2\n"
"  tnt-run -n 4 tnt-bench allreduce --size 32k -d bf16 -o avg\n"
"  tnt-bench -N 3 broadcast -r 1 -b 1k -e 1M -f 4\n"
"  tnt-bench -N 2 fusion --model resnet50 --iters 5\n"
"  tnt-bench fusion --model resnet50 --threshold 1M --dry-run\n"
"\n"
"Exit status: 0 when every element was right, 1 on wrong elements or an\n"
"error, 2 on a bad command line.\n");
}

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "tnt-bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try 'tnt-bench --help')\n");
    exit(BENCH_EXIT_USAGE);
}

static long parse_int(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "tnt-bench: %s '%s' is invalid; expected an integer "
                "in [%ld, %ld]\n(try 'tnt-bench --help')\n", opt, s, min,
                max);
        exit(BENCH_EXIT_USAGE);
    }
    return v;
}

static size_t parse_bytes(const char *opt, const char *s)
{
    size_t v;
    if (tnt__parse_size(opt, s, &v) != TNT_SUCCESS) {
        fprintf(stderr, "tnt-bench: %s\n(try 'tnt-bench --help')\n",
                tnt_last_error());
        exit(BENCH_EXIT_USAGE);
    }
    return v;
}

static int lookup(const char *s, const char *const *names,
                  const char *const *aliases, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0 ||
            (aliases && strcasecmp(s, aliases[i]) == 0))
            return i;
    return -1;
}

static const char *const bind_names[] = {
    [BENCH_BIND_AUTO] = "auto", [BENCH_BIND_CORE] = "core",
    [BENCH_BIND_NONE] = "none"};

static const char *const mem_names[] = {[BENCH_MEM_MALLOC] = "malloc",
                                        [BENCH_MEM_SHARED] = "shared"};

enum {
    OPT_SIZE = 256, OPT_INPLACE, OPT_OUTPLACE, OPT_JSON, OPT_BIND, OPT_MEM,
    OPT_VERSION, OPT_STATS,
    /* Options of `tnt-bench fusion` only. */
    OPT_MODEL, OPT_THRESHOLD, OPT_SWEEP, OPT_COMPUTE, OPT_CONTIGUOUS,
    OPT_DRY_RUN, OPT_COMPUTE_KIND,
};

/* The name of an option that applies to one benchmark only, for the
 * message when it is given to the other; NULL for shared options. */
static const char *side_option_name(int c)
{
    switch (c) {
    case 'b': return "-b";
    case 'e': return "-e";
    case 'f': return "-f";
    case 'd': return "-d";
    case 'r': return "-r";
    case OPT_SIZE: return "--size";
    case OPT_INPLACE: return "--inplace-only";
    case OPT_OUTPLACE: return "--outplace-only";
    case OPT_MODEL: return "--model";
    case OPT_THRESHOLD: return "--threshold";
    case OPT_SWEEP: return "--sweep";
    case OPT_COMPUTE: return "--compute-us-per-mb";
    case OPT_CONTIGUOUS: return "--contiguous";
    case OPT_DRY_RUN: return "--dry-run";
    case OPT_COMPUTE_KIND: return "--compute";
    default: return NULL;
    }
}

/* --compute-us-per-mb: a finite number >= 0 (an hour per MiB at most). */
static double parse_us_per_mib(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < 0.0 ||
        v > 3.6e9)
        usage_error("--compute-us-per-mb '%s' is invalid; expected a number "
                    "of microseconds per MiB, >= 0", s);
    return v;
}

/* The options of `tnt-bench fusion`; 0 if c is not one of them. */
static int fusion_option(int c, const char *arg, bench_fusion_opts_t *fu)
{
    switch (c) {
    case OPT_MODEL:
        fu->model = arg;
        return 1;
    case OPT_THRESHOLD: {
        if (strcasecmp(arg, "all") == 0) {
            fu->threshold = BENCH_THRESHOLD_ALL;
            return 1;
        }
        size_t v = parse_bytes("--threshold", arg);
        /* Beyond any model: one bucket, as "all". */
        fu->threshold = v >= BENCH_THRESHOLD_ALL ? BENCH_THRESHOLD_ALL : v;
        return 1;
    }
    case OPT_SWEEP:
        fu->sweep = 1;
        return 1;
    case OPT_COMPUTE:
        fu->us_per_mib = parse_us_per_mib(arg);
        return 1;
    case OPT_CONTIGUOUS:
        fu->contiguous = 1;
        return 1;
    case OPT_COMPUTE_KIND:
        if (strcmp(arg, "spin") != 0 && strcmp(arg, "sleep") != 0)
            usage_error("--compute '%s' is invalid; expected spin (the CPU "
                        "computes) or sleep (an accelerator does)", arg);
        fu->sleep_compute = strcmp(arg, "sleep") == 0;
        return 1;
    case OPT_DRY_RUN:
        fu->dry_run = 1;
        return 1;
    default:
        return 0;
    }
}

/* The checks and defaults of `tnt-bench fusion`. `coll_only` is the first
 * option given that only the collectives take, or NULL. */
static void finish_fusion(bench_opts_t *o, const char *coll_only,
                          int have_op, int have_iters, int have_warmup)
{
    char err[256];
    bench_model_t m;

    if (coll_only)
        usage_error("%s does not apply to 'tnt-bench fusion' (its sizes "
                    "and types come from --model)", coll_only);
    if (!o->fu.model)
        usage_error("%s", "fusion needs --model (" BENCH_MODEL_NAMES ")");
    if (bench_model_build(o->fu.model, &m, err, sizeof err) != 0)
        usage_error("%s", err);
    bench_model_free(&m);
    if (o->fu.sweep && o->fu.threshold != TNT_FUSION_DEFAULT)
        usage_error("%s", "--sweep runs its own thresholds; drop "
                    "--threshold");
    if (o->fu.dry_run && o->json)
        usage_error("%s", "--dry-run times nothing: --json has nothing to "
                    "write");
    if (!have_op)
        o->op = TNT_AVG;
    if (o->op != TNT_SUM && o->op != TNT_AVG)
        usage_error("fusion reduces gradients with sum or avg, not '%s'",
                    bench_op_name(o->op));
    if (!have_iters)
        o->iters = FUSION_ITERS;
    if (!have_warmup)
        o->warmup = FUSION_WARMUP;
}

static void parse_args(int argc, char **argv, bench_opts_t *o)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, OPT_SIZE},
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"warmup", required_argument, NULL, 'w'},
        {"check", required_argument, NULL, 'c'},
        {"datatype", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, 'o'},
        {"root", required_argument, NULL, 'r'},
        {"nranks", required_argument, NULL, 'N'},
        {"inplace-only", no_argument, NULL, OPT_INPLACE},
        {"outplace-only", no_argument, NULL, OPT_OUTPLACE},
        {"json", required_argument, NULL, OPT_JSON},
        {"stats", no_argument, NULL, OPT_STATS},
        {"model", required_argument, NULL, OPT_MODEL},
        {"threshold", required_argument, NULL, OPT_THRESHOLD},
        {"sweep", no_argument, NULL, OPT_SWEEP},
        {"compute-us-per-mb", required_argument, NULL, OPT_COMPUTE},
        {"compute", required_argument, NULL, OPT_COMPUTE_KIND},
        {"contiguous", no_argument, NULL, OPT_CONTIGUOUS},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"bind-to", required_argument, NULL, OPT_BIND},
        {"mem", required_argument, NULL, OPT_MEM},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int have_range = 0, have_size = 0, only_in = 0, only_out = 0, c, i;
    int have_op = 0, have_iters = 0, have_warmup = 0, have_bind = 0;
    const char *coll_only = NULL, *fusion_only = NULL;

    *o = (bench_opts_t){
        .coll = BENCH_ALLREDUCE, .min_bytes = 8, .max_bytes = 32u << 20,
        .factor = 2, .iters = 20, .warmup = 5, .check = 1,
        .dtype = TNT_F32, .op = TNT_SUM, .outplace = 1, .inplace = 1,
        .fu = {.us_per_mib = -1.0, .threshold = TNT_FUSION_DEFAULT},
    };
    opterr = 0; /* our own messages below */
    while ((c = getopt_long(argc, argv, ":b:e:f:n:w:c:d:o:r:N:h", longopts,
                            NULL)) != -1) {
        /* Remember one option of each side, for the message when an
         * option meets a benchmark it does not apply to. */
        if (fusion_option(c, optarg, &o->fu)) {
            if (!fusion_only)
                fusion_only = side_option_name(c);
            continue;
        }
        if (!coll_only)
            coll_only = side_option_name(c);
        switch (c) {
        case OPT_SIZE:
            o->min_bytes = o->max_bytes = parse_bytes("--size", optarg);
            have_size = 1;
            break;
        case 'b':
            o->min_bytes = parse_bytes("-b", optarg);
            have_range = 1;
            break;
        case 'e':
            o->max_bytes = parse_bytes("-e", optarg);
            have_range = 1;
            break;
        case 'f':
            o->factor = (size_t)parse_int("-f", optarg, 2, 1 << 20);
            break;
        case 'n':
            o->iters = (int)parse_int("-n", optarg, 1, 1000000000);
            have_iters = 1;
            break;
        case 'w':
            o->warmup = (int)parse_int("-w", optarg, 0, 1000000000);
            have_warmup = 1;
            break;
        case 'c':
            o->check = (int)parse_int("-c", optarg, 0, 1);
            break;
        case 'd':
            if ((i = lookup(optarg, dtype_names, dtype_aliases,
                            TNT_DTYPE_COUNT)) < 0)
                usage_error("unknown datatype '%s'; expected f32, f64, f16,"
                            " bf16, i8, u8, i32, u32, i64 or u64", optarg);
            o->dtype = (tnt_dtype_t)i;
            break;
        case 'o':
            if ((i = lookup(optarg, op_names, NULL, TNT_OP_COUNT)) < 0)
                usage_error("unknown op '%s'; expected sum, avg, prod, min "
                            "or max", optarg);
            o->op = (tnt_op_t)i;
            have_op = 1;
            break;
        case 'r':
            o->root = (int)parse_int("-r", optarg, 0, 1 << 30);
            break;
        case 'N':
            o->local_ranks = (int)parse_int("-N", optarg, 1,
                                            BENCH_MAX_LOCAL_RANKS);
            break;
        case OPT_INPLACE:
            only_in = 1;
            break;
        case OPT_OUTPLACE:
            only_out = 1;
            break;
        case OPT_JSON:
            o->json = optarg;
            break;
        case OPT_STATS:
            o->stats = 1;
            break;
        case OPT_BIND:
            if ((i = lookup(optarg, bind_names, NULL, 3)) < 0)
                usage_error("invalid --bind-to '%s': expected auto, core or "
                            "none", optarg);
            o->bind = i;
            have_bind = 1;
            break;
        case OPT_MEM:
            if ((i = lookup(optarg, mem_names, NULL, 2)) < 0)
                usage_error("invalid --mem '%s': expected malloc or shared",
                            optarg);
            o->mem = i;
            break;
        case 'h':
            usage(stdout);
            exit(BENCH_EXIT_OK);
        case OPT_VERSION:
            printf("tnt-bench (libtntcomm) %s\n", TNT_VERSION_STRING);
            exit(BENCH_EXIT_OK);
        case ':':
            usage_error("option '%s' needs a value", argv[optind - 1]);
            break;
        default: {
            /* optopt names an unknown short option (which may sit in a
             * group such as -xb); a long one is the whole argument. */
            char name[3] = {'-', (char)optopt, '\0'};
            usage_error("unknown option '%s'",
                        optopt ? name : argv[optind - 1]);
            break;
        }
        }
    }
    if (optind < argc) {
        if (strcasecmp(argv[optind], "kernels") == 0)
            usage_error("%s", "'kernels' has options of its own and must "
                        "come first: tnt-bench kernels [options]");
        if (strcasecmp(argv[optind], "fusion") == 0)
            o->fusion = 1;
        else if ((i = lookup(argv[optind], coll_names, NULL,
                             BENCH_COLL_COUNT)) < 0)
            usage_error("unknown collective '%s'; expected allreduce, "
                        "broadcast, allgather, reduce_scatter or fusion",
                        argv[optind]);
        else
            o->coll = (bench_coll_t)i;
        optind++;
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (o->fusion) {
        finish_fusion(o, coll_only, have_op, have_iters, have_warmup);
        return;
    }
    if (fusion_only)
        usage_error("%s applies to 'tnt-bench fusion' only", fusion_only);
    if (have_size && have_range)
        usage_error("%s", "--size and -b/-e exclude each other");
    if (o->min_bytes > o->max_bytes)
        usage_error("%s", "the smallest size (-b) is above the largest (-e)");
    /* Sizes are bytes, moved as whole elements: a size that is not a
     * whole number of them would silently run a smaller one. */
    size_t es = tnt_dtype_size(o->dtype);
    const size_t ends[2] = {o->min_bytes, o->max_bytes};
    for (int i = 0; i < 2 && es > 0; i++)
        if (ends[i] % es != 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "%s %zu is not a whole number of %s "
                     "elements (%zu bytes each); use %zu or %zu",
                     have_size ? "--size" : i ? "-e" : "-b", ends[i],
                     bench_dtype_name(o->dtype), es, ends[i] / es * es,
                     (ends[i] / es + 1) * es);
            usage_error("%s", msg);
        }
    if (only_in && only_out)
        usage_error("%s", "--inplace-only and --outplace-only exclude each "
                    "other");
    o->inplace = !only_out;
    o->outplace = !only_in;
    if ((o->inplace && !o->outplace && !bench_supports(o->coll, 1)) ||
        (o->outplace && !o->inplace && !bench_supports(o->coll, 0)))
        usage_error("%s has no such form (broadcast is in place only, "
                    "reduce_scatter out of place only)",
                    bench_coll_name(o->coll));
    if (have_bind && !o->local_ranks)
        usage_error("%s places the ranks of -N; under a launcher ask the "
                    "launcher (tnt-run --bind-to core)", "--bind-to");
    if (o->local_ranks && o->coll == BENCH_BROADCAST &&
        o->root >= o->local_ranks) {
        char msg[96];
        snprintf(msg, sizeof msg, "-r %d is not a rank of a job of -N %d "
                 "(ranks 0 .. %d)", o->root, o->local_ranks,
                 o->local_ranks - 1);
        usage_error("%s", msg);
    }
}

static int env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

int bench_rank_main(const bench_opts_t *o)
{
    return o->fusion ? bench_fusion_run(o) : bench_run(o);
}

int main(int argc, char **argv)
{
    bench_opts_t o;

    if (argc >= 2 && strcasecmp(argv[1], "kernels") == 0)
        return bench_kernels_main(argc - 1, argv + 1);
    parse_args(argc, argv, &o);

    int launched = env_set("TNT_SIZE") || env_set("TNT_RANK");
    if (o.local_ranks) {
        if (launched) {
            fprintf(stderr, "tnt-bench: -N starts ranks itself, but this "
                    "process already is a rank of a launched job (TNT_SIZE "
                    "or TNT_RANK is set); drop -N\n");
            return BENCH_EXIT_USAGE;
        }
        return bench_launch_local(&o);
    }
    return bench_rank_main(&o);
}
