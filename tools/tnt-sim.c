/*
 * tnt-sim: predicted time of every algorithm of a collective for a given
 * rank count, ranks per host, size range and link parameters, from the
 * cost model played out on the library's own schedules
 * (lib/collectives/model.h), beside what the selection table
 * (lib/collectives/select.c) would pick and the model's best.
 *
 *   tnt-sim -p 512 -r 8 -n hdr-ib -b 8 -e 64M
 *
 * Nothing is sent and nothing is measured: the link figures are the
 * presets' (docs/scale.md says where they come from) or the options'.
 * Ranks are laid out in blocks of rph per host.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/model.h"

typedef struct preset {
    const char *name, *what;
    tnt_model_params_t m;
} preset_t;

/* Inter-host: line rate and latency of the fabric (docs/scale.md,
 * "Presets", gives the sources). Intra-host, gamma and copy: assumed for
 * one socket's shared memory until calibrated on a machine. */
#define INTRA {0.5e-6, 1.0 / 10e9, 0.2e-6}
#define GAMMA (1.0 / 8e9)
#define COPY (1.0 / 10e9)
static const preset_t presets[] = {
    {"hdr-ib", "HDR InfiniBand 200 Gb/s: alpha 1.0 us, 24 GB/s, o 0.3 us",
     {INTRA, {1.0e-6, 1.0 / 24e9, 0.3e-6}, GAMMA, COPY, 0}},
    {"roce-100g", "100 GbE RoCE: alpha 1.5 us, 12 GB/s, o 0.3 us",
     {INTRA, {1.5e-6, 1.0 / 12e9, 0.3e-6}, GAMMA, COPY, 0}},
    {"tcp-25g", "25 GbE TCP: alpha 15 us, 2.9 GB/s, o 2 us",
     {INTRA, {15e-6, 1.0 / 2.9e9, 2e-6}, GAMMA, COPY, 0}},
};
#define NPRESETS (sizeof(presets) / sizeof(presets[0]))

static void usage(FILE *f)
{
    fprintf(f,
"usage: tnt-sim [options]\n"
"  -c COLL     allreduce (default), broadcast, allgather, reduce_scatter,\n"
"              barrier\n"
"  -p N        ranks (default 64)\n"
"  -r N        ranks per host, in blocks (default 8)\n"
"  -b SIZE     smallest size in bytes, k/M/G suffixes are KiB.. (default 8)\n"
"  -e SIZE     largest size (default 64M); allgather/reduce_scatter: per rank\n"
"  -f N        size factor between rows (default 4; the largest size is\n"
"              always a row)\n"
"  -n PRESET   link preset (default hdr-ib); -l lists them\n"
"  --alpha-inter US --bw-inter GB/s --o-inter US --alpha-intra US\n"
"  --bw-intra GB/s --o-intra US\n"
"  --gamma GB/s (reduction) --copy GB/s: override the preset's figures\n"
"  --max-ops N operations the model may hold (default 8M)\n"
"  --all-ranks play every rank, also where one host could stand for all\n"
"  -m          markdown table\n");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    size_t mul = 1;
    if (*end == 'k' || *end == 'K')
        mul = (size_t)1 << 10;
    else if (*end == 'm' || *end == 'M')
        mul = (size_t)1 << 20;
    else if (*end == 'g' || *end == 'G')
        mul = (size_t)1 << 30;
    if (end == s || v < 0 || (*end && end[1] && strcmp(end + 1, "iB") &&
                              strcmp(end + 1, "B")))
        return -1;
    *out = (size_t)(v * (double)mul);
    return 0;
}

static void fmt_size(size_t b, char *buf, size_t n)
{
    if (b >= ((size_t)1 << 20) && b % ((size_t)1 << 20) == 0)
        snprintf(buf, n, "%zu MiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(buf, n, "%zu KiB", b >> 10);
    else
        snprintf(buf, n, "%zu B", b);
}

/* The algorithms with a schedule for a collective. */
static int algos_of(int kind, int rph, int *out)
{
    int n = 0;
    switch (kind) {
    case TNT_COLL_ALLREDUCE:
        out[n++] = TNT_ALGO_RING;
        out[n++] = TNT_ALGO_RD;
        out[n++] = TNT_ALGO_RABENSEIFNER;
        if (rph > 1)
            out[n++] = TNT_ALGO_HIER;
        out[n++] = TNT_ALGO_TREE;
        out[n++] = TNT_ALGO_ONESHOT;
        out[n++] = TNT_ALGO_DIRECT;
        break;
    case TNT_COLL_BROADCAST:
        out[n++] = TNT_ALGO_BINOMIAL;
        out[n++] = TNT_ALGO_PIPELINE;
        out[n++] = TNT_ALGO_FLAT;
        break;
    case TNT_COLL_BARRIER:
        out[n++] = TNT_ALGO_DISSEMINATION;
        break;
    default:
        out[n++] = TNT_ALGO_RING;
    }
    return n;
}

static int parse_kind(const char *s)
{
    static const char *const names[] = {"allreduce", "broadcast", "barrier",
                                        "allgather", "reduce_scatter"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0)
            return TNT_COLL_ALLREDUCE + i;
    return -1;
}

int main(int argc, char **argv)
{
    int kind = TNT_COLL_ALLREDUCE, p = 64, rph = 8, md = 0, all_ranks = 0;
    size_t lo = 8, hi = (size_t)64 << 20, factor = 4, max_ops = 8u << 20;
    const preset_t *pre = &presets[0];
    tnt_model_params_t m;
    double ov[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    static const struct option longs[] = {
        {"alpha-inter", required_argument, 0, 1},
        {"bw-inter", required_argument, 0, 2},
        {"alpha-intra", required_argument, 0, 3},
        {"bw-intra", required_argument, 0, 4},
        {"gamma", required_argument, 0, 5},
        {"copy", required_argument, 0, 6},
        {"max-ops", required_argument, 0, 7},
        {"o-inter", required_argument, 0, 8},
        {"o-intra", required_argument, 0, 9},
        {"all-ranks", no_argument, 0, 10},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "c:p:r:b:e:f:n:lmh", longs, NULL)) !=
           -1) {
        switch (c) {
        case 'c':
            if ((kind = parse_kind(optarg)) < 0) {
                fprintf(stderr, "tnt-sim: unknown collective '%s'\n", optarg);
                return 2;
            }
            break;
        case 'p': p = atoi(optarg); break;
        case 'r': rph = atoi(optarg); break;
        case 'b':
        case 'e':
            if (parse_size(optarg, c == 'b' ? &lo : &hi) != 0) {
                fprintf(stderr, "tnt-sim: bad size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'f': factor = (size_t)atol(optarg); break;
        case 'n':
            pre = NULL;
            for (size_t i = 0; i < NPRESETS; i++)
                if (strcmp(optarg, presets[i].name) == 0)
                    pre = &presets[i];
            if (!pre) {
                fprintf(stderr, "tnt-sim: unknown preset '%s' (-l lists "
                        "them)\n", optarg);
                return 2;
            }
            break;
        case 'l':
            for (size_t i = 0; i < NPRESETS; i++)
                printf("%-10s %s\n", presets[i].name, presets[i].what);
            printf("%-10s intra-host alpha 0.5 us, 10 GB/s, o 0.2 us; "
                   "reduction 8 GB/s, copy 10 GB/s (assumed, all presets)\n",
                   "");
            return 0;
        case 'm': md = 1; break;
        case 7: max_ops = (size_t)atol(optarg); break;
        case 8: ov[6] = atof(optarg); break;
        case 9: ov[7] = atof(optarg); break;
        case 10: all_ranks = 1; break;
        case 'h': usage(stdout); return 0;
        default:
            if (c >= 1 && c <= 6) {
                ov[c - 1] = atof(optarg);
                break;
            }
            usage(stderr);
            return 2;
        }
    }
    if (p < 2 || rph < 1 || factor < 2 || lo > hi) {
        usage(stderr);
        return 2;
    }
    m = pre->m;
    if (ov[0] >= 0) m.inter.alpha = ov[0] * 1e-6;
    if (ov[1] > 0) m.inter.beta = 1.0 / (ov[1] * 1e9);
    if (ov[2] >= 0) m.intra.alpha = ov[2] * 1e-6;
    if (ov[3] > 0) m.intra.beta = 1.0 / (ov[3] * 1e9);
    if (ov[4] > 0) m.gamma = 1.0 / (ov[4] * 1e9);
    if (ov[5] > 0) m.copy = 1.0 / (ov[5] * 1e9);
    if (ov[6] >= 0) m.inter.o = ov[6] * 1e-6;
    if (ov[7] >= 0) m.intra.o = ov[7] * 1e-6;
    m.all_ranks = all_ranks;

    /* The block layout, for the hierarchical allreduce and selection. */
    int *keys = malloc((size_t)p * sizeof(int));
    tnt_topo_t topo;
    for (int r = 0; r < p; r++)
        keys[r] = r / rph;
    if (!keys || tnt__topo_init(&topo, p, keys) != TNT_SUCCESS) {
        fprintf(stderr, "tnt-sim: out of memory\n");
        return 1;
    }
    int algos[8], na = algos_of(kind, rph, algos);
    printf("%s# %s, p=%d, %d per host, %s; intra %.2f us/%.1f GB/s, "
           "inter %.2f us/%.1f GB/s, o %.2f/%.2f us, reduce %.1f GB/s; "
           "times in us\n", md ? "" : "", kind == TNT_COLL_ALLREDUCE ? "allreduce"
           : kind == TNT_COLL_BROADCAST             ? "broadcast"
           : kind == TNT_COLL_BARRIER               ? "barrier"
           : kind == TNT_COLL_ALLGATHER             ? "allgather"
                                                    : "reduce_scatter",
           p, rph, pre->name, m.intra.alpha * 1e6, 1e-9 / m.intra.beta,
           m.inter.alpha * 1e6,
           1e-9 / m.inter.beta, m.intra.o * 1e6, m.inter.o * 1e6,
           1e-9 / m.gamma);
    printf(md ? "| size |" : "%10s", md ? "" : "size");
    for (int i = 0; i < na; i++)
        printf(md ? " %s |" : " %13s", tnt__algo_name(algos[i]));
    printf(md ? " table | best | table/best |\n" : " %13s %13s %10s\n",
           "table", "best", "table/best");
    if (md) {
        printf("|---:|");
        for (int i = 0; i <= na + 2; i++)
            printf(i < na ? "---:|" : "---|");
        printf("\n");
    }
    if (kind == TNT_COLL_BARRIER)
        lo = hi = 0;
    for (size_t bytes = lo;; bytes = bytes * factor > hi ? hi : bytes * factor) {
        tnt_coll_args_t a = {.kind = kind, .dtype = TNT_F32, .op = TNT_SUM,
                             .count = bytes / 4, .nranks = p, .esize = 4,
                             .in_place = 1, .segment_bytes = (size_t)256 << 10,
                             .topo = &topo, .intra_host = rph >= p};
        double t[8], best = -1;
        int bi = -1, sel = -1;
        char sz[32];
        fmt_size(bytes, sz, sizeof(sz));
        printf(md ? "| %s |" : "%10s", sz);
        for (int i = 0; i < na; i++) {
            tnt_model_result_t r;
            t[i] = -1;
            if (tnt__model_run(&a, algos[i], rph, &m, max_ops, &r) ==
                TNT_SUCCESS)
                t[i] = r.time;
            if (t[i] >= 0 && (best < 0 || t[i] < best)) {
                best = t[i];
                bi = i;
            }
            if (t[i] < 0)
                printf(md ? " - |" : " %13s", "-");
            else
                printf(md ? " %.1f |" : " %13.1f", t[i] * 1e6);
        }
        if (tnt__algo_select(&a, TNT_ALGO_AUTO, &sel) != TNT_SUCCESS)
            sel = -1;
        double ts = -1;
        for (int i = 0; i < na; i++)
            if (algos[i] == sel)
                ts = t[i];
        printf(md ? " %s | %s |" : " %13s %13s", tnt__algo_name(sel),
               bi >= 0 ? tnt__algo_name(algos[bi]) : "-");
        if (ts > 0 && best > 0)
            printf(md ? " %.2f%s |\n" : " %9.2f%s\n", ts / best,
                   ts / best >= 1.5 ? " !" : "");
        else
            printf(md ? " - |\n" : " %10s\n", "-");
        fflush(stdout);
        if (bytes >= hi || bytes == 0)
            break;
    }
    tnt__topo_fini(&topo);
    free(keys);
    return 0;
}
