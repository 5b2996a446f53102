/*
 * The command line of the mlp_train example: option values with their
 * defaults, and a parser that exits with status 2 and a message naming the
 * option on bad input (every rank parses the same command line, so all
 * ranks stop alike before any communication starts).
 */
#ifndef MLP_OPTIONS_H
#define MLP_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#define MLP_EXIT_USAGE 2 /* example_args.h's EX_EXIT_USAGE */

struct mlp_options {
    long epochs;
    size_t samples, global_batch, threshold;
    double lr, momentum;
    uint64_t seed;
    int show_plan;
    long diverge_rank; /* -1: none */
};

/* Fills *o from argv; prints help and exits 0 for --help. */
void mlp_parse_args(int argc, char **argv, struct mlp_options *o);

#endif /* MLP_OPTIONS_H */
