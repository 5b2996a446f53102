/*
 * The soak: many back-to-back collectives of random kind (allreduce,
 * broadcast, allgather, reduce-scatter, barrier), element count (0, 1,
 * counts around p, primes, log-uniform sizes up to 256 KiB), dtype,
 * reduction op, root and in-place mode at p=5, with every element of
 * every result checked against bench/datagen.c's independent reference,
 * and all ranks' results compared bitwise through hashes. The algorithm
 * is chosen per communicator (TNT_ALLREDUCE_ALGO, TNT_BCAST_ALGO,
 * TNT_SEGMENT_BYTES), so the run is split into phases, each a job of its
 * own with another combination; every rank derives the same sequence of
 * collectives from the phase's seed.
 *
 * TNT_SOAK_COUNT sets the total number of collectives (default 20000, as
 * issue 4 asks), TNT_SOAK_SEED the seed.
 *
 * Usage: test_soak [suite [test]].
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "harness.h"

#define SOAK_RANKS 5
#define SOAK_DEFAULT_COUNT 20000
/* Most collectives move at most this much per rank buffer. */
#define SOAK_MAX_BYTES ((size_t)256 * 1024)
/* A batch's results are hashed together and compared across ranks. */
#define SOAK_BATCH 1000

enum soak_kind { K_ALLREDUCE, K_BCAST, K_ALLGATHER, K_RSCATTER, K_BARRIER };

/* Each phase forces another combination of algorithms and segment size;
 * a small segment reaches the multi-segment pipelined paths. */
typedef struct soak_phase {
    const char *ar_algo, *bc_algo, *segment;
} soak_phase_t;

static const soak_phase_t k_phases[] = {
    {"auto", "auto", NULL},
    {"ring", "pipeline", "4k"},
    {"rd", "binomial", NULL},
    {"ring", "binomial", "64k"},
    {"rd", "pipeline", "16k"},
    {"rabenseifner", "auto", NULL},
};
#define N_PHASES (sizeof k_phases / sizeof k_phases[0])

typedef struct soak_arg {
    uint64_t seed;
    long count;          /* collectives in this phase */
} soak_arg_t;

/* Element count of at most max_elems: edge counts, primes and a
 * log-uniform spread, so that small messages dominate as in real
 * training traffic but large ones come often enough. */
static size_t pick_count(th_rng_t *g, int p, size_t max_elems)
{
    static const size_t primes[] = {2, 3, 5, 7, 13, 31, 127, 257, 1021,
                                    4093, 8191, 16381, 65521};
    size_t n;
    switch (th_rnd_below(g, 10)) {
    case 0: {
        const size_t edge[] = {0, 1, 2, (size_t)p - 1, (size_t)p,
                               (size_t)p + 1};
        n = edge[th_rnd_below(g, 6)];
        break;
    }
    case 1:
    case 2:
        n = primes[th_rnd_below(g, sizeof primes / sizeof primes[0])];
        break;
    default: {
        unsigned bits = (unsigned)th_rnd_below(g, 17);
        size_t base = (size_t)1 << bits;
        n = base + th_rnd_below(g, base);
        break;
    }
    }
    return n > max_elems ? max_elems - th_rnd_below(g, 3) : n;
}

/* Elements of got that differ bitwise from want (first index + base). */
static size_t cmp_elems(const void *got, const void *want, size_t count,
                        size_t es, size_t base, size_t *first)
{
    const unsigned char *a = got, *b = want;
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp(a + i * es, b + i * es, es) != 0 && wrong++ == 0)
            *first = base + i;
    return wrong;
}

typedef struct soak_bufs {
    unsigned char *send, *recv, *want;
} soak_bufs_t;

/* One random collective, verified. Returns its result code; *wrong and
 * *first describe wrong elements; *hashable says whether the result
 * (recv, *bytes) must be equal on every rank. */
static tnt_result_t one_collective(tnt_comm_t comm, int rank, int p,
                                   th_rng_t *g, const soak_bufs_t *b,
                                   char *desc, size_t desclen,
                                   size_t *wrong, size_t *first,
                                   size_t *bytes, int *hashable)
{
    static const int weights[] = {35, 20, 15, 15, 15};
    size_t w = th_rnd_below(g, 100);
    int kind = 0;
    while (w >= (size_t)weights[kind])
        w -= (size_t)weights[kind++];
    tnt_dtype_t dt = (tnt_dtype_t)th_rnd_below(g, TNT_DTYPE_COUNT);
    tnt_op_t op = (tnt_op_t)th_rnd_below(g, TNT_OP_COUNT);
    size_t es = tnt_dtype_size(dt);
    int per_rank = kind == K_ALLGATHER || kind == K_RSCATTER;
    size_t max_elems = SOAK_MAX_BYTES / es / (per_rank ? (size_t)p : 1);
    size_t count = kind == K_BARRIER ? 0 : pick_count(g, p, max_elems);
    int root = (int)th_rnd_below(g, (size_t)p);
    int in_place = (int)th_rnd_below(g, 2);
    uint64_t seed = th_rnd(g);
    tnt_result_t rc = TNT_SUCCESS;
    *wrong = 0;
    *first = 0;
    *bytes = 0;
    *hashable = 0;

    switch (kind) {
    case K_ALLREDUCE:
        snprintf(desc, desclen, "allreduce %s %s n=%zu %s",
                 tnt_dtype_name(dt), tnt_op_name(op), count,
                 in_place ? "in place" : "out of place");
        if (in_place) {
            tnt_gen_fill(b->recv, count, dt, op, seed, rank);
        } else {
            tnt_gen_fill(b->send, count, dt, op, seed, rank);
            tnt_gen_poison(b->recv, count, dt);
        }
        rc = tnt_allreduce(comm, in_place ? TNT_IN_PLACE : b->send, b->recv,
                           count, dt, op);
        if (rc == TNT_SUCCESS)
            *wrong = tnt_gen_check_allreduce(b->recv, 0, count, dt, op, seed,
                                             p, first);
        *bytes = count * es;
        *hashable = 1;
        break;
    case K_BCAST:
        snprintf(desc, desclen, "broadcast %s n=%zu root %d",
                 tnt_dtype_name(dt), count, root);
        tnt_gen_fill(b->want, count, dt, TNT_SUM, seed, root);
        if (rank == root)
            memcpy(b->recv, b->want, count * es);
        else
            tnt_gen_poison(b->recv, count, dt);
        rc = tnt_broadcast(comm, b->recv, count, dt, root);
        if (rc == TNT_SUCCESS)
            *wrong = cmp_elems(b->recv, b->want, count, es, 0, first);
        *bytes = count * es;
        *hashable = 1;
        break;
    case K_ALLGATHER: {
        snprintf(desc, desclen, "allgather %s n=%zu %s", tnt_dtype_name(dt),
                 count, in_place ? "in place" : "out of place");
        size_t block = count * es;
        tnt_gen_poison(b->recv, count * (size_t)p, dt);
        tnt_gen_fill(b->send, count, dt, TNT_SUM, seed, rank);
        if (in_place)
            memcpy(b->recv + (size_t)rank * block, b->send, block);
        rc = tnt_allgather(comm, in_place ? TNT_IN_PLACE : b->send, b->recv,
                           count, dt);
        for (int r = 0; rc == TNT_SUCCESS && r < p; r++) {
            size_t f = 0;
            tnt_gen_fill(b->want, count, dt, TNT_SUM, seed, r);
            size_t n = cmp_elems(b->recv + (size_t)r * block, b->want, count,
                                 es, (size_t)r * count, &f);
            if (n && !*wrong)
                *first = f;
            *wrong += n;
        }
        *bytes = block * (size_t)p;
        *hashable = 1;
        break;
    }
    case K_RSCATTER:
        snprintf(desc, desclen, "reduce_scatter %s %s n=%zu",
                 tnt_dtype_name(dt), tnt_op_name(op), count);
        tnt_gen_fill(b->send, count * (size_t)p, dt, op, seed, rank);
        tnt_gen_poison(b->recv, count, dt);
        rc = tnt_reduce_scatter(comm, b->send, b->recv, count, dt, op);
        /* Block r of the reduction is the allreduce reference at
         * r*count + i; every rank holds another block (no hash). */
        if (rc == TNT_SUCCESS)
            *wrong = tnt_gen_check_allreduce(b->recv, (size_t)rank * count,
                                             count, dt, op, seed, p, first);
        break;
    default:
        snprintf(desc, desclen, "barrier");
        rc = tnt_barrier(comm);
        break;
    }
    return rc;
}

static int soak_rank(tnt_comm_t comm, int rank, int p, void *arg,
                     th_report_t *rep)
{
    const soak_arg_t *a = arg;
    /* Buffers for the largest collective pick_count can choose. */
    size_t cap = SOAK_MAX_BYTES * 2 + 64;
    soak_bufs_t b = {th_xmalloc(cap), th_xmalloc(cap), th_xmalloc(cap)};
    th_rng_t g = {a->seed};
    uint64_t batch_hash = 0;
    long total_wrong = 0, bad = 0;
    double t0 = th_now();
    long i;
    for (i = 0; i < a->count; i++) {
        char desc[128], name[TH_NAME_MAX];
        size_t wrong, first, bytes;
        int hashable;
        tnt_result_t rc = one_collective(comm, rank, p, &g, &b, desc,
                                         sizeof desc, &wrong, &first, &bytes,
                                         &hashable);
        if (rc != TNT_SUCCESS || wrong) {
            /* Named in full: which collective, which index. */
            snprintf(name, sizeof name, "op%ld", i);
            th_case_t c;
            memset(&c, 0, sizeof c);
            snprintf(c.name, sizeof c.name, "%s", name);
            c.rc = rc;
            c.nwrong = wrong;
            c.first_wrong = first;
            snprintf(c.msg, sizeof c.msg, "collective %ld: %s: %s%s", i,
                     desc, rc != TNT_SUCCESS ? tnt_strerror(rc) : "",
                     rc != TNT_SUCCESS ? tnt_last_error() : "");
            th_report_case(rep, &c);
            total_wrong += (long)wrong;
            if (rc != TNT_SUCCESS || ++bad >= 10)
                break; /* the communicator is gone, or enough said */
        }
        if (hashable && bytes) {
            uint64_t h = tnt_gen_hash(b.recv, bytes);
            batch_hash = (batch_hash ^ h) * UINT64_C(0x100000001b3);
        }
        if ((i + 1) % SOAK_BATCH == 0 || i + 1 == a->count) {
            snprintf(name, sizeof name, "batch_ending_%ld", i);
            th_report_check(rep, name, TNT_SUCCESS, 0, 0, &batch_hash,
                            sizeof batch_hash);
            batch_hash = 0;
        }
    }
    double dt = th_now() - t0;
    th_report_expect(rep, "summary", i == a->count && total_wrong == 0,
                     TNT_SUCCESS, "rank %d: %ld of %ld collectives in "
                     "%.1f s, %ld wrong elements", rank, i, a->count, dt,
                     total_wrong);
    free(b.send);
    free(b.recv);
    free(b.want);
    return 0;
}

static long env_long(const char *name, long def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    long v = strtol(s, &end, 0);
    if (*end || v < 0) {
        fprintf(stderr, "test_soak: ignoring %s='%s'\n", name, s);
        return def;
    }
    return v;
}

static void test_soak(void)
{
    long total = env_long("TNT_SOAK_COUNT", SOAK_DEFAULT_COUNT);
    uint64_t seed = (uint64_t)env_long("TNT_SOAK_SEED", 4004);
    double t0 = th_now();
    long done = 0;
    for (size_t k = 0; k < N_PHASES; k++) {
        const soak_phase_t *ph = &k_phases[k];
        soak_arg_t a = {seed * 1000 + k,
                        total / (long)N_PHASES +
                            ((long)k < total % (long)N_PHASES)};
        char e1[64], e2[64], e3[64], name[160];
        snprintf(e1, sizeof e1, "TNT_ALLREDUCE_ALGO=%s", ph->ar_algo);
        snprintf(e2, sizeof e2, "TNT_BCAST_ALGO=%s", ph->bc_algo);
        snprintf(e3, sizeof e3, "TNT_SEGMENT_BYTES=%s",
                 ph->segment ? ph->segment : "");
        const char *env[] = {e1, e2, ph->segment ? e3 : NULL, NULL};
        snprintf(name, sizeof name, "soak p=%d phase %zu: %ld collectives, "
                 "allreduce %s, broadcast %s, segment %s, seed %llu",
                 SOAK_RANKS, k, a.count, ph->ar_algo, ph->bc_algo,
                 ph->segment ? ph->segment : "default",
                 (unsigned long long)a.seed);
        th_job_t job = {name, SOAK_RANKS, env, soak_rank, &a, 600, 0, 0};
        th_result_t res;
        if (th_run_job(&job, &res) == 0)
            done += a.count;
        const th_case_t *s = th_find_case(&res, 0, "summary");
        printf("  [%s: %s]\n", name, s ? s->msg : "no summary");
        th_result_free(&res);
    }
    printf("  [soak: %ld of %ld collectives verified in %.1f s]\n", done,
           total, th_now() - t0);
}

static const th_test_def_t k_tests[] = {
    {"soak", "random_collectives_p5", test_soak},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
