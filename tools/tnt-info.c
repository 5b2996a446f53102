/*
 * tnt-info: what this build of libtntcomm has, what this host offers it,
 * every environment variable it reads with the value it would use, and
 * which algorithm it picks for which case (docs/tnt-info.md). It links
 * the library's internal static library, so every answer comes from the
 * library's own code (its table of variables, its readers, its selection
 * table), never from a copy kept here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tnt-info.h"
#include "tnt/version.h"
#include "util/param.h"

static const char k_usage[] =
    "usage: tnt-info [--json] [-a|--all]\n"
    "       tnt-info [--json] -p|--params\n"
    "       tnt-info [--json] --algorithms [-n P --size S "
    "[--ranks-per-host R] [--mapped]]\n"
    "  (no option)        version, build, host, RDMA devices, NUMA\n"
    "  -a, --all          all of it: the above, --params, --algorithms\n"
    "  -p, --params       every environment variable: type, default, "
    "range,\n"
    "                     value here and what the library makes of it\n"
    "  --algorithms       the selection table of allreduce and broadcast\n"
    "  -n P --size S      what P ranks pick for S bytes of f32 (k/M/G\n"
    "                     suffixes) and why; implies --algorithms\n"
    "  --ranks-per-host R ranks per host, in blocks (default: all on this "
    "host)\n"
    "  --mapped           buffers from tnt_mem_alloc\n"
    "  --json             JSON instead of text\n"
    "  --version          print the version\n";

typedef struct opts {
    int json, params, algorithms, all;
    info_algo_query_t q;
} opts_t;

static int parse_int(const char *what, const char *s, int min, int *out)
{
    long v;
    if (!s || tnt__parse_long(what, s, min, 1 << 20, &v) != TNT_SUCCESS) {
        fprintf(stderr, "tnt-info: %s\n", tnt_last_error());
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, opts_t *op)
{
    int have_size = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            op->json = 1;
        } else if (strcmp(a, "-p") == 0 || strcmp(a, "--params") == 0) {
            op->params = 1;
        } else if (strcmp(a, "-a") == 0 || strcmp(a, "--all") == 0) {
            op->all = 1;
        } else if (strcmp(a, "--algorithms") == 0) {
            op->algorithms = 1;
        } else if (strcmp(a, "--mapped") == 0) {
            op->q.mapped = 1;
        } else if (strcmp(a, "-n") == 0) {
            if (parse_int("-n", next, 1, &op->q.nranks) != 0)
                return -1;
            i++;
        } else if (strcmp(a, "--ranks-per-host") == 0) {
            if (parse_int("--ranks-per-host", next, 1,
                          &op->q.ranks_per_host) != 0)
                return -1;
            i++;
        } else if (strcmp(a, "--size") == 0) {
            if (!next ||
                tnt__parse_size("--size", next, &op->q.bytes) != TNT_SUCCESS) {
                fprintf(stderr, "tnt-info: %s\n",
                        next ? tnt_last_error() : "--size needs a value");
                return -1;
            }
            have_size = 1;
            i++;
        } else if (strcmp(a, "--version") == 0) {
            printf("tnt-info (libtntcomm) %s\n", TNT_VERSION_STRING);
            exit(0);
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(k_usage, stdout);
            exit(0);
        } else {
            fprintf(stderr, "tnt-info: unknown argument '%s'\n%s", a,
                    k_usage);
            return -1;
        }
    }
    if ((op->q.nranks > 0) != have_size) {
        fprintf(stderr, "tnt-info: -n and --size go together\n");
        return -1;
    }
    if (op->q.nranks > 0 && op->q.bytes % 4 != 0) {
        fprintf(stderr, "tnt-info: --size %zu is not a whole number of "
                "f32 elements\n", op->q.bytes);
        return -1;
    }
    if (op->q.nranks > 0 && !op->algorithms)
        op->algorithms = 1; /* -n/--size only mean something there */
    return 0;
}

int main(int argc, char **argv)
{
    opts_t op;
    memset(&op, 0, sizeof(op));
    if (parse_args(argc, argv, &op) != 0)
        return 2;
    int overview = op.all || (!op.params && !op.algorithms);
    info_out_t o = {.f = stdout, .json = op.json};
    int rc = 0;
    info_begin(&o);
    if (overview) {
        info_build(&o);
        info_host(&o);
        info_rdma(&o);
        info_numa(&o);
    }
    if (op.all || op.params)
        info_params(&o);
    if (op.all || op.algorithms)
        rc = info_algorithms(&o, &op.q);
    info_end(&o);
    return rc;
}
