/*
 * `tnt-bench kernels`: the reduction kernels of lib/collectives/reduce.c
 * timed on one thread, at every SIMD level the CPU has, over a sweep of
 * sizes, as GB/s of memory traffic (a, b and dst: three times the size per
 * call). A memcpy of the same size in the same run, and optionally the
 * membw figures of the peers' measurements (--membw), are printed beside:
 * a kernel at the memcpy rate is limited by memory, not by arithmetic.
 * `--canon K` times the reproducible mode's canonical reduction of K
 * inputs instead (collectives/canon.h: dst from K inputs, GB/s counting
 * the K inputs and dst). The kernels are internal, hence the link to the
 * internal library.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "bench.h"
#include "collectives/canon.h"
#include "collectives/reduce.h"
#include "util/param.h"

#define MAX_PEER_FIGURES 64

typedef struct kopts {
    size_t min_bytes, max_bytes, factor;
    double ms;                      /* time per measurement */
    int dtypes[TNT_DTYPE_COUNT], ndtypes;
    int ops[TNT_OP_COUNT], nops;
    int levels[TNT__SIMD_COUNT], nlevels;
    const char *membw;              /* --membw FILE, or NULL */
    int inplace;                    /* --inplace: dst is a */
    int canon;                      /* --canon K: the canonical kernel of K
                                       inputs; 0: the kernels */
} kopts_t;

/* One `membw kernel="sum3 c=a+b" bytes=N threads=1 ...` line of the
 * peers' limits.log: the traffic GB/s of c = a + b at one size. */
typedef struct peer_figure {
    size_t bytes;
    double traffic_gbps;
} peer_figure_t;

static void usage(FILE *f)
{
    fprintf(f,
"usage: tnt-bench kernels [options]\n"
"\n"
"Times the reduction kernels (dst = a op b, out of place) on one thread at\n"
"every SIMD level this CPU supports. GB/s counts the bytes of a, b and dst\n"
"(3 x size per call); memcpy counts source and destination (2 x size).\n"
"  -b, --minbytes S   smallest size of one buffer (default 4k)\n"
"  -e, --maxbytes S   largest size (default 64M)\n"
"  -f, --stepfactor F next size = size x F (default 4)\n"
"  -d, --datatype L   comma-separated dtypes (default f32,f64,f16,bf16,\n"
"                     i32,i64)\n"
"  -o, --op L         comma-separated ops: sum avg prod min max (default\n"
"                     sum,max)\n"
"      --simd L       comma-separated levels: sse2 avx2 avx512 (default:\n"
"                     all this CPU has)\n"
"      --ms MS        time per measurement in ms (default 20)\n"
"      --inplace      a = a op b, as the collectives call the kernels (the\n"
"                     compiler's aliasing checks may take another path)\n"
"      --canon K      the reproducible mode's canonical reduction of K inputs\n"
"                     (2 to 64; float dtypes; GB/s counts K inputs and dst;\n"
"                     --inplace: dst is the first input)\n"
"      --membw FILE   also print the 1-thread sum3 (c = a + b) traffic of\n"
"                     a membw log (the peers' results/limits.log)\n"
"  -h, --help         this text\n");
}

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "tnt-bench kernels: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try 'tnt-bench kernels --help')\n");
    exit(BENCH_EXIT_USAGE);
}

static size_t parse_bytes(const char *opt, const char *s)
{
    size_t v;
    if (tnt__parse_size(opt, s, &v) != TNT_SUCCESS)
        usage_error("%s", tnt_last_error());
    return v;
}

static double parse_number(const char *opt, const char *s, double min,
                           double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !(v >= min && v <= max)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s '%%s' is invalid; expected a number "
                 "in [%g, %g]", opt, min, max);
        usage_error(msg, s);
    }
    return v;
}

/* "a,b,c" -> indices into the names that name(i) gives for i < n; each
 * at most once. Returns the count. */
static int parse_list(const char *opt, const char *arg,
                      const char *(*name)(int), int n, int *out)
{
    char buf[256], *save = NULL;
    int count = 0;

    if (strlen(arg) >= sizeof buf)
        usage_error("%s: list too long", opt);
    strcpy(buf, arg);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < n; i++)
            if (strcasecmp(t, name(i)) == 0)
                found = i;
        if (found < 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s: unknown value '%%s'", opt);
            usage_error(msg, t);
        }
        for (int i = 0; i < count; i++)
            if (out[i] == found)
                found = -1;
        if (found >= 0)
            out[count++] = found;
    }
    if (count == 0)
        usage_error("%s needs at least one value", opt);
    return count;
}

static const char *dtype_at(int i) { return bench_dtype_name(i); }
static const char *op_at(int i) { return bench_op_name(i); }
static const char *level_at(int i) { return tnt__simd_name(i); }

static void parse_kernel_args(int argc, char **argv, kopts_t *o)
{
    enum { OPT_SIMD = 256, OPT_MS, OPT_MEMBW, OPT_INPLACE, OPT_CANON };
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"datatype", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, 'o'},
        {"simd", required_argument, NULL, OPT_SIMD},
        {"ms", required_argument, NULL, OPT_MS},
        {"membw", required_argument, NULL, OPT_MEMBW},
        {"inplace", no_argument, NULL, OPT_INPLACE},
        {"canon", required_argument, NULL, OPT_CANON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, given_d = 0, given_o = 0;

    *o = (kopts_t){.min_bytes = 4096, .max_bytes = 64u << 20, .factor = 4,
                   .ms = 20, .dtypes = {TNT_F32, TNT_F64, TNT_F16, TNT_BF16,
                                        TNT_I32, TNT_I64},
                   .ndtypes = 6, .ops = {TNT_SUM, TNT_MAX}, .nops = 2};
    for (int l = 0; l < TNT__SIMD_COUNT; l++)
        if (tnt__simd_supported(l))
            o->levels[o->nlevels++] = l;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":b:e:f:d:o:h", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'b': o->min_bytes = parse_bytes("-b", optarg); break;
        case 'e': o->max_bytes = parse_bytes("-e", optarg); break;
        case 'f':
            o->factor = (size_t)parse_number("-f", optarg, 2, 1 << 20);
            break;
        case 'd':
            given_d = 1;
            o->ndtypes = parse_list("-d", optarg, dtype_at, TNT_DTYPE_COUNT,
                                    o->dtypes);
            break;
        case 'o':
            given_o = 1;
            o->nops = parse_list("-o", optarg, op_at, TNT_OP_COUNT, o->ops);
            break;
        case OPT_SIMD:
            o->nlevels = parse_list("--simd", optarg, level_at,
                                    TNT__SIMD_COUNT, o->levels);
            for (int i = 0; i < o->nlevels; i++)
                if (!tnt__simd_supported(o->levels[i]))
                    usage_error("--simd: this CPU has no %s",
                                tnt__simd_name(o->levels[i]));
            break;
        case OPT_MS: o->ms = parse_number("--ms", optarg, 0.01, 10000); break;
        case OPT_MEMBW: o->membw = optarg; break;
        case OPT_INPLACE: o->inplace = 1; break;
        case OPT_CANON:
            o->canon = (int)parse_number("--canon", optarg, 2, 64);
            break;
        case 'h': usage(stdout); exit(BENCH_EXIT_OK);
        case ':': usage_error("option '%s' needs a value", argv[optind - 1]);
            break;
        default: {
            char name[3] = {'-', (char)optopt, '\0'};
            usage_error("unknown option '%s'",
                        optopt ? name : argv[optind - 1]);
        }
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (o->min_bytes == 0)
        usage_error("%s", "-b must be at least 1 byte");
    if (o->min_bytes > o->max_bytes)
        usage_error("%s", "the smallest size (-b) is above the largest (-e)");
    /* --canon without -d / -o: the float dtypes, SUM and AVG. */
    if (o->canon && !given_d) {
        static const int floats[] = {TNT_F32, TNT_F64, TNT_F16, TNT_BF16};
        memcpy(o->dtypes, floats, sizeof floats);
        o->ndtypes = 4;
    }
    if (o->canon && !given_o) {
        o->ops[0] = TNT_SUM;
        o->ops[1] = TNT_AVG;
        o->nops = 2;
    }
    for (int d = 0; o->canon && d < o->ndtypes; d++)
        if (!tnt__canon_dtype((tnt_dtype_t)o->dtypes[d]))
            usage_error("--canon: %s is not a float dtype (f32, f64, f16, "
                        "bf16)", bench_dtype_name(o->dtypes[d]));
}

/* The sum3 lines of a membw log; 0 if there are none, -1 on error. */
static int read_membw(const char *path, peer_figure_t *out, int max)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0;

    if (f == NULL) {
        fprintf(stderr, "tnt-bench kernels: --membw %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f) && n < max) {
        const char *p = strstr(line, "membw kernel=\"sum3");
        const char *b = p ? strstr(p, " bytes=") : NULL;
        const char *t = p ? strstr(p, " threads=1 ") : NULL;
        const char *g = p ? strstr(p, " traffic_GBps=") : NULL;
        if (b && t && g) {
            out[n].bytes = strtoull(b + 7, NULL, 10);
            out[n].traffic_gbps = strtod(g + 14, NULL);
            n++;
        }
    }
    fclose(f);
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What one measurement calls: a kernel or memcpy over `bytes`. */
typedef struct job {
    tnt_reduce_fn_t fn; /* NULL: memcpy(dst, a, bytes), or canon */
    void *dst;
    const void *a, *b;
    size_t bytes, count;
    int canon;          /* > 0: the canonical kernel of canon inputs, the
                           first at a, input q at b + q * stride */
    size_t stride;
    tnt_dtype_t dt;
    tnt_op_t op;
    int level;
} job_t;

static void run_job(const job_t *j)
{
    if (j->canon)
        tnt__canon_reduce_at(j->level, j->dst, j->a, 0, j->b, j->stride,
                             j->canon, j->count, j->dt, j->op);
    else if (j->fn)
        j->fn(j->dst, j->a, j->b, j->count);
    else
        memcpy(j->dst, j->a, j->bytes);
}

/* Seconds per call: the best batch of about 1 ms (at least one call)
 * within `budget` seconds, after one untimed call. The best, not the
 * mean, because other processes share this machine. */
static double time_job(const job_t *j, double budget)
{
    double best = 1e30, start, t0, dt;
    long batch = 1;

    run_job(j);
    t0 = now_s();
    run_job(j);
    dt = now_s() - t0;
    if (dt > 0 && dt < 1e-3)
        batch = (long)(1e-3 / dt) + 1;
    start = now_s();
    do {
        t0 = now_s();
        for (long i = 0; i < batch; i++)
            run_job(j);
        dt = (now_s() - t0) / (double)batch;
        if (dt < best)
            best = dt;
    } while (now_s() - start < budget);
    return best;
}

/* Values that stay ordinary numbers however often they are combined, so
 * that no subnormal or NaN slows one level down: 1 + i/1024 mod 64. */
static void fill(void *buf, size_t count, tnt_dtype_t dt, unsigned salt)
{
    for (size_t i = 0; i < count; i++) {
        float v = 1.0f + (float)((i * 7 + salt) % 64) / 1024.0f;
        switch (dt) {
        case TNT_F32: ((float *)buf)[i] = v; break;
        case TNT_F64: ((double *)buf)[i] = v; break;
        case TNT_F16: ((uint16_t *)buf)[i] = tnt__f32_to_f16(v); break;
        case TNT_BF16: ((uint16_t *)buf)[i] = tnt__f32_to_bf16(v); break;
        case TNT_I8: case TNT_U8:
            ((uint8_t *)buf)[i] = (uint8_t)(i + salt);
            break;
        case TNT_I32: case TNT_U32:
            ((uint32_t *)buf)[i] = (uint32_t)(i + salt);
            break;
        default: ((uint64_t *)buf)[i] = i + salt; break;
        }
    }
}

static size_t dtype_size(int dt)
{
    static const size_t sizes[TNT_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1,
                                                  4, 4, 8, 8};
    return sizes[dt];
}

static void print_header(const kopts_t *o, int npeers)
{
    const char *env = getenv("TNT_SIMD");

    if (o->canon) {
        printf("# tnt-bench kernels: the canonical reduction of %d inputs%s "
               "on one thread, best ~1 ms batch of %.3g ms\n", o->canon,
               o->inplace ? " (in place)" : "", o->ms);
        printf("# GB/s = (%d inputs + dst bytes) / time; memcpy: (src + "
               "dst) / time, same run\n", o->canon);
    } else {
        printf("# tnt-bench kernels: %s on one thread, best ~1 ms "
               "batch of %.3g ms\n", o->inplace ? "a = a op b (in place)"
                                                : "dst = a op b", o->ms);
        printf("# GB/s = (a + b + dst bytes) / time; memcpy: (src + dst) / "
               "time, same run\n");
    }
    printf("# active level: %s (TNT_SIMD%s%s)\n",
           tnt__simd_name(tnt__simd_active()), env ? "=" : " unset",
           env ? env : "");
    if (o->membw)
        printf("# peers: 1-thread membw sum3 c=a+b traffic GB/s from %s "
               "(%d sizes)\n", o->membw, npeers);
    printf("#%5s %6s %10s", "type", "redop", "size");
    for (int l = 0; l < o->nlevels; l++)
        printf(" %8s", tnt__simd_name(o->levels[l]));
    printf(" %8s", "memcpy");
    if (o->membw)
        printf(" %10s", "peer-sum3");
    printf("\n");
}

int bench_kernels_main(int argc, char **argv)
{
    kopts_t o;
    peer_figure_t peers[MAX_PEER_FIGURES];
    int npeers = 0;
    unsigned char *a, *b, *dst;
    size_t cap;

    parse_kernel_args(argc, argv, &o);
    if (o.membw) {
        npeers = read_membw(o.membw, peers, MAX_PEER_FIGURES);
        if (npeers < 0)
            return BENCH_EXIT_FAIL;
        if (npeers == 0)
            fprintf(stderr, "tnt-bench kernels: --membw %s has no 1-thread "
                    "'membw kernel=\"sum3 ...' lines; column left empty\n",
                    o.membw);
    }
    cap = (o.max_bytes + 63) / 64 * 64;
    a = aligned_alloc(64, cap);
    /* --canon: the K inputs at a stride of cap, the first also at a. */
    b = aligned_alloc(64, cap * (size_t)(o.canon ? o.canon : 1));
    dst = aligned_alloc(64, cap);
    if (!a || !b || !dst) {
        fprintf(stderr, "tnt-bench kernels: cannot allocate 3 x %zu bytes\n",
                cap);
        free(a);
        free(b);
        free(dst);
        return BENCH_EXIT_FAIL;
    }
    memset(dst, 0, cap);
    print_header(&o, npeers);
    for (int d = 0; d < o.ndtypes; d++) {
        tnt_dtype_t dt = (tnt_dtype_t)o.dtypes[d];
        size_t es = dtype_size(dt);
        fill(a, o.max_bytes / es, dt, 1);
        fill(b, o.max_bytes / es, dt, 2);
        for (int q = 0; q < o.canon; q++)
            fill(b + (size_t)q * cap, o.max_bytes / es, dt, (unsigned)q + 1);
        for (int k = 0; k < o.nops; k++) {
            tnt_op_t op = (tnt_op_t)o.ops[k];
            for (size_t sz = o.min_bytes; sz <= o.max_bytes; sz *= o.factor) {
                job_t j = {.dst = o.inplace ? a : dst, .a = a, .b = b,
                           .count = sz / es, .stride = cap, .dt = dt,
                           .op = op};
                j.bytes = j.count * es;
                if (j.count == 0)
                    continue;
                printf(" %5s %6s %10zu", bench_dtype_name(dt),
                       bench_op_name(op), j.bytes);
                for (int l = 0; l < o.nlevels; l++) {
                    j.fn = tnt__reduce_fn_at(dt, op, o.levels[l]);
                    j.canon = o.canon;
                    j.level = o.levels[l];
                    if (o.canon && o.inplace)
                        memcpy(a, b, j.bytes); /* input 0 in place */
                    printf(" %8.2f", (o.canon ? o.canon + 1.0 : 3.0) *
                           (double)j.bytes /
                           time_job(&j, o.ms * 1e-3) * 1e-9);
                    fflush(stdout);
                }
                j.fn = NULL;
                j.canon = 0;
                j.dst = dst; /* memcpy: a to another buffer */
                printf(" %8.2f",
                       2.0 * (double)j.bytes / time_job(&j, o.ms * 1e-3) *
                           1e-9);
                if (o.membw) {
                    int found = -1;
                    for (int p = 0; p < npeers; p++)
                        if (peers[p].bytes == j.bytes)
                            found = p;
                    if (found >= 0)
                        printf(" %10.2f", peers[found].traffic_gbps);
                    else
                        printf(" %10s", "-");
                }
                printf("\n");
                fflush(stdout);
                if (sz > o.max_bytes / o.factor)
                    break; /* The next size would overflow or exceed -e. */
            }
        }
    }
    free(a);
    free(b);
    free(dst);
    return BENCH_EXIT_OK;
}
