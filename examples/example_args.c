/* Option values of the examples' command lines (example_args.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_args.h"

static const char *g_prog = "example";

void ex_args_program(const char *name) { g_prog = name; }

_Noreturn void ex_bad_option(const char *opt, const char *arg,
                             const char *expected)
{
    fprintf(stderr, "%s: invalid %s '%s'; expected %s\n"
            "Try '%s --help' for more information.\n", g_prog, opt, arg,
            expected, g_prog);
    exit(EX_EXIT_USAGE);
}

_Noreturn void ex_getopt_error(int c, char **argv, int optind_now)
{
    if (c == ':')
        fprintf(stderr, "%s: option '%s' needs a value\n", g_prog,
                argv[optind_now - 1]);
    else
        fprintf(stderr, "%s: unknown option '%s'\n", g_prog,
                argv[optind_now - 1]);
    fprintf(stderr, "Try '%s --help' for more information.\n", g_prog);
    exit(EX_EXIT_USAGE);
}

long ex_parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        char expected[80];
        snprintf(expected, sizeof(expected), "an integer in [%ld, %ld]", min,
                 max);
        ex_bad_option(opt, s, expected);
    }
    return v;
}

double ex_parse_double(const char *opt, const char *s, double min,
                       double max, int max_open)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    int in = v >= min && (max_open ? v < max : v <= max);
    if (errno || end == s || *end || !in) {
        char expected[80];
        snprintf(expected, sizeof(expected), "a number in [%g, %g%c", min,
                 max, max_open ? ')' : ']');
        ex_bad_option(opt, s, expected);
    }
    return v;
}

size_t ex_parse_bytes(const char *opt, const char *s)
{
    const char *expected = "bytes, e.g. 4096, 32k or 1M";
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-' || *s == '+')
        ex_bad_option(opt, s, expected);
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    else if (*end == 'g' || *end == 'G')
        shift = 30;
    if (shift)
        end++;
    if (*end || v > (SIZE_MAX >> shift) - 1)
        ex_bad_option(opt, s, expected);
    return (size_t)v << shift;
}
