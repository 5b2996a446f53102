/*
 * Option values of the examples' command lines (mlp_train, digits_train):
 * each parser names the option and its expected range on a bad value and
 * exits with status 2, so that every rank, parsing the same command line,
 * stops alike before any communication starts.
 */
#ifndef EXAMPLE_ARGS_H
#define EXAMPLE_ARGS_H

#include <stddef.h>

#define EX_EXIT_USAGE 2

/* The program's name in the messages (set once, before parsing). */
void ex_args_program(const char *name);

/* "PROG: invalid OPT 'ARG'; expected EXPECTED", then exit 2. */
_Noreturn void ex_bad_option(const char *opt, const char *arg,
                             const char *expected);

/* getopt_long's ':' (a missing value) or '?' (an unknown option), for the
 * option argv[optind - 1]; exits 2. */
_Noreturn void ex_getopt_error(int c, char **argv, int optind_now);

/* An integer in [min, max]. */
long ex_parse_long(const char *opt, const char *s, long min, long max);

/* A number in [min, max], or in [min, max) with max_open. */
double ex_parse_double(const char *opt, const char *s, double min,
                       double max, int max_open);

/* Bytes with an optional k, M or G (powers of 1024), as the library's
 * TNT_FUSION_THRESHOLD takes them. */
size_t ex_parse_bytes(const char *opt, const char *s);

#endif /* EXAMPLE_ARGS_H */
