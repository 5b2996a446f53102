/*
 * Command-line parsing of the mlp_train example (see mlp_options.h).
 */
#include "example_args.h"
#include "mlp_options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <tnt/plugin.h>

static void usage(FILE *f)
{
    fputs("Usage: tnt-run -n N mlp_train [options]\n"
          "\n"
          "Trains a 32-64-64-4 MLP data-parallel on synthetic data with\n"
          "libtntcomm's gradient fusion, and checks that every rank ends\n"
          "with the same weights and that the loss at least halved.\n"
          "\n"
          "  --epochs N          passes over the data (default 10)\n"
          "  --samples N         size of the data set (default 4096)\n"
          "  --global-batch B    samples per step over all ranks (default 64)\n"
          "  --lr X              learning rate (default 0.05)\n"
          "  --momentum X        SGD momentum in [0, 1) (default 0.9)\n"
          "  --threshold BYTES   fusion threshold; k, M, G suffixes are\n"
          "                      powers of 1024 (default: the library's,\n"
          "                      TNT_FUSION_THRESHOLD or 32k)\n"
          "  --seed S            seed of data, weights and order (default 1)\n"
          "  --show-plan         print the fusion bucket plan\n"
          "  --diverge-rank R    perturb rank R's weights before the final\n"
          "                      check, to see the check fail\n"
          "  -h, --help          this text\n"
          "\n"
          "Exit status: 0 on success, 1 if training or a check failed, 2 on\n"
          "a bad command line.\n",
          f);
}

void mlp_parse_args(int argc, char **argv, struct mlp_options *o)
{
    enum { O_EPOCHS = 256, O_SAMPLES, O_BATCH, O_LR, O_MOMENTUM,
           O_THRESHOLD, O_SEED, O_PLAN, O_DIVERGE };
    static const struct option longopts[] = {
        {"epochs", required_argument, NULL, O_EPOCHS},
        {"samples", required_argument, NULL, O_SAMPLES},
        {"global-batch", required_argument, NULL, O_BATCH},
        {"lr", required_argument, NULL, O_LR},
        {"momentum", required_argument, NULL, O_MOMENTUM},
        {"threshold", required_argument, NULL, O_THRESHOLD},
        {"seed", required_argument, NULL, O_SEED},
        {"show-plan", no_argument, NULL, O_PLAN},
        {"diverge-rank", required_argument, NULL, O_DIVERGE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct mlp_options){
        .epochs = 10, .samples = 4096, .global_batch = 64,
        .threshold = TNT_FUSION_DEFAULT, .lr = 0.05, .momentum = 0.9,
        .seed = 1, .diverge_rank = -1,
    };
    ex_args_program("mlp_train");
    int c;
    opterr = 0; /* our own messages below */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_EPOCHS:
            o->epochs = ex_parse_long("--epochs", optarg, 1, 1000000);
            break;
        case O_SAMPLES:
            o->samples = (size_t)ex_parse_long("--samples", optarg, 1, 1 << 24);
            break;
        case O_BATCH:
            o->global_batch =
                (size_t)ex_parse_long("--global-batch", optarg, 1, 1 << 24);
            break;
        case O_LR:
            o->lr = ex_parse_double("--lr", optarg, 0.0, 100.0, 1);
            break;
        case O_MOMENTUM:
            o->momentum = ex_parse_double("--momentum", optarg, 0.0, 1.0, 1);
            break;
        case O_THRESHOLD:
            o->threshold = ex_parse_bytes("--threshold", optarg);
            break;
        case O_SEED:
            o->seed = (uint64_t)ex_parse_long("--seed", optarg, 0, LONG_MAX);
            break;
        case O_PLAN:
            o->show_plan = 1;
            break;
        case O_DIVERGE:
            o->diverge_rank = ex_parse_long("--diverge-rank", optarg, 0, 65535);
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
    if (o->global_batch > o->samples) {
        char n[32], expected[64];
        snprintf(n, sizeof(n), "%zu", o->global_batch);
        snprintf(expected, sizeof(expected), "at most --samples (%zu)",
                 o->samples);
        ex_bad_option("--global-batch", n, expected);
    }
}

