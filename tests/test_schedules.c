/*
 * The algorithms checked without a network: a simulator executes the
 * schedules of all p ranks in one process, delivering sends to receives by
 * (source, destination, step), and runs the ready operations in a random
 * order (several seeds), so a missing dependency shows up as a wrong
 * result. Every operation's buffer range is checked against the buffer's
 * size, and a schedule that stops with work left is reported as a
 * deadlock. This reaches rank counts (every p up to 64, a sample up to
 * 4,096, test_scale) that this machine cannot run as processes. Its cost
 * is O(operations of all ranks): messages are found by hashing, ready
 * operations kept in one list.
 */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms.h"
#include "collectives/reduce.h"
#include "core/sched_cache.h"

/* Messages and parked receives share one hash table keyed by (source,
 * destination, step): a send fills the entry, a receive that finds no
 * message parks itself there and is made ready again by the send. Every
 * lookup is O(1), so a run costs O(operations), not O(p^2) scans of a
 * mailbox per receive as a list would. */
typedef struct sim_slot {
    int used;
    int src, dst;
    uint32_t step;
    int sent, taken;      /* the message has been sent / received */
    size_t len;
    unsigned char *data;  /* freed once received */
    uint32_t waiter;      /* parked receive of dst, or TNT_SOP_NONE */
} sim_slot_t;

typedef struct sim_rank {
    tnt_sched_t s;
    unsigned char *buf[TNT_BUF_COUNT];
    size_t size[TNT_BUF_COUNT];
    uint32_t *deps;
    uint32_t left;
} sim_rank_t;

/* A ready operation of some rank. */
typedef struct sim_ready {
    int rank;
    uint32_t op;
} sim_ready_t;

typedef struct sim {
    int p;
    sim_rank_t *r;
    sim_slot_t *slots;
    size_t nslots;        /* a power of two, over twice the sends */
    sim_ready_t *ready;   /* every ready operation of every rank */
    size_t nready;
    int errors;
    char what[256];
} sim_t;

static uint64_t rng_state;
static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static void sim_error(sim_t *sim, const char *msg, int rank, uint32_t op)
{
    if (!sim->errors)
        snprintf(sim->what, sizeof(sim->what), "rank %d op %u: %s", rank, op,
                 msg);
    sim->errors++;
}

static sim_slot_t *slot_of(sim_t *sim, int src, int dst, uint32_t step)
{
    uint64_t h = ((uint64_t)(uint32_t)src * 0x9e3779b97f4a7c15ull) ^
                 ((uint64_t)(uint32_t)dst * 0xc2b2ae3d27d4eb4full) ^
                 ((uint64_t)step * 0x165667b19e3779f9ull);
    h ^= h >> 29;
    for (size_t i = (size_t)h & (sim->nslots - 1);;
         i = (i + 1) & (sim->nslots - 1)) {
        sim_slot_t *e = &sim->slots[i];
        if (!e->used) {
            e->used = 1;
            e->src = src;
            e->dst = dst;
            e->step = step;
            e->waiter = TNT_SOP_NONE;
            return e;
        }
        if (e->src == src && e->dst == dst && e->step == step)
            return e;
    }
}

static void make_ready(sim_t *sim, int rank, uint32_t op)
{
    sim->ready[sim->nready].rank = rank;
    sim->ready[sim->nready].op = op;
    sim->nready++;
}

static int in_bounds(sim_rank_t *r, tnt_bufref_t ref, size_t bytes)
{
    return ref.buf < TNT_BUF_COUNT && ref.off <= r->size[ref.buf] &&
           bytes <= r->size[ref.buf] - ref.off;
}

static void complete(sim_t *sim, int rank, uint32_t op)
{
    sim_rank_t *r = &sim->r[rank];
    const tnt_sop_t *o = &r->s.ops[op];
    r->left--;
    for (uint32_t i = 0; i < o->succ_count; i++) {
        uint32_t next = r->s.succ[o->succ_begin + i];
        if (--r->deps[next] == 0)
            make_ready(sim, rank, next);
    }
}

/* Run one ready operation; a receive whose message has not been sent
 * parks instead, and is made ready again by that send. */
static void run_op(sim_t *sim, int rank, uint32_t op, const tnt_coll_args_t *a)
{
    sim_rank_t *r = &sim->r[rank];
    const tnt_sop_t *o = &r->s.ops[op];
    size_t esize = a->esize, n = o->bytes / esize;
    switch (o->kind) {
    case TNT_SOP_SEND: {
        if (!in_bounds(r, o->a, o->bytes) || o->peer < 0 || o->peer >= sim->p
            || o->peer == rank) {
            sim_error(sim, "send out of bounds or to a bad peer", rank, op);
            break;
        }
        sim_slot_t *m = slot_of(sim, rank, o->peer, o->step);
        if (m->sent) {
            sim_error(sim, "two messages with one tag", rank, op);
            break;
        }
        m->sent = 1;
        m->len = o->bytes;
        m->data = malloc(o->bytes ? o->bytes : 1);
        memcpy(m->data, r->buf[o->a.buf] + o->a.off, o->bytes);
        if (m->waiter != TNT_SOP_NONE) {
            make_ready(sim, o->peer, m->waiter);
            m->waiter = TNT_SOP_NONE;
        }
        break;
    }
    case TNT_SOP_RECV: {
        if (!in_bounds(r, o->dst, o->bytes)) {
            sim_error(sim, "recv out of bounds", rank, op);
            break;
        }
        if (o->peer < 0 || o->peer >= sim->p) {
            sim_error(sim, "recv from a bad peer", rank, op);
            break;
        }
        sim_slot_t *m = slot_of(sim, o->peer, rank, o->step);
        if (m->taken) {
            sim_error(sim, "two receives of one message", rank, op);
            break;
        }
        if (!m->sent) {
            if (m->waiter != TNT_SOP_NONE)
                sim_error(sim, "two receives of one tag", rank, op);
            m->waiter = op;
            return; /* parked: not complete */
        }
        if (m->len != o->bytes)
            sim_error(sim, "message length differs from the receive", rank,
                      op);
        else
            memcpy(r->buf[o->dst.buf] + o->dst.off, m->data, m->len);
        m->taken = 1;
        free(m->data);
        m->data = NULL;
        break;
    }
    case TNT_SOP_REDUCE:
        if (!in_bounds(r, o->dst, o->bytes) || !in_bounds(r, o->a, o->bytes) ||
            !in_bounds(r, o->b, o->bytes)) {
            sim_error(sim, "reduce out of bounds", rank, op);
            break;
        }
        tnt__reduce_fn(a->dtype, a->op)(r->buf[o->dst.buf] + o->dst.off,
                                        r->buf[o->a.buf] + o->a.off,
                                        r->buf[o->b.buf] + o->b.off, n);
        break;
    case TNT_SOP_COPY:
        if (!in_bounds(r, o->dst, o->bytes) || !in_bounds(r, o->a, o->bytes)) {
            sim_error(sim, "copy out of bounds", rank, op);
            break;
        }
        memmove(r->buf[o->dst.buf] + o->dst.off, r->buf[o->a.buf] + o->a.off,
                o->bytes);
        break;
    case TNT_SOP_SCALE:
        if (!in_bounds(r, o->dst, o->bytes)) {
            sim_error(sim, "scale out of bounds", rank, op);
            break;
        }
        tnt__scale_avg(r->buf[o->dst.buf] + o->dst.off, n, a->dtype, sim->p);
        break;
    }
    complete(sim, rank, op);
}

/* Input element i of rank r: small integers, so sums are exact. */
static double input(int r, size_t i)
{
    return (double)((r * 7 + (int)(i % 11)) % 9) - 3.0;
}

static void store(void *buf, size_t i, tnt_dtype_t dt, double v)
{
    if (dt == TNT_F32)
        ((float *)buf)[i] = (float)v;
    else if (dt == TNT_F64)
        ((double *)buf)[i] = v;
    else
        ((int32_t *)buf)[i] = (int32_t)v;
}

static double load(const void *buf, size_t i, tnt_dtype_t dt)
{
    if (dt == TNT_F32)
        return ((const float *)buf)[i];
    if (dt == TNT_F64)
        return ((const double *)buf)[i];
    return ((const int32_t *)buf)[i];
}

static double reduce_ref(int p, size_t i, tnt_op_t op, tnt_dtype_t dt)
{
    double acc = input(0, i);
    for (int r = 1; r < p; r++) {
        double v = input(r, i);
        if (op == TNT_SUM || op == TNT_AVG)
            acc += v;
        else if (op == TNT_MAX)
            acc = v > acc ? v : acc;
        else if (op == TNT_MIN)
            acc = v < acc ? v : acc;
    }
    if (op == TNT_AVG) {
        if (dt == TNT_F32)
            return (double)((float)acc / (float)p);
        if (dt == TNT_I32)
            return (double)((int32_t)acc / p);
        return acc / p;
    }
    return acc;
}

/* Run collective `a` (rank fields filled per rank) with algorithm `algo`
 * for every rank; returns the number of wrong elements over all ranks. */
static size_t simulate(tnt_coll_args_t a, int algo, uint64_t seed, sim_t *sim)
{
    int p = a.nranks;
    size_t bytes = a.count * a.esize;
    int rooted = a.kind == TNT_COLL_REDUCE || a.kind == TNT_COLL_GATHER ||
                 a.kind == TNT_COLL_SCATTER;
    int in_place = a.in_place;
    memset(sim, 0, sizeof(*sim));
    sim->p = p;
    sim->r = calloc((size_t)p, sizeof(sim_rank_t));
    size_t total_ops = 0, sends = 0;
    for (int r = 0; r < p; r++) {
        sim_rank_t *sr = &sim->r[r];
        a.rank = r;
        /* The rooted ones: in place at the root only, and the buffers a
         * rank does not use are empty (the bounds check of every
         * operation then catches a schedule that touches them). */
        a.in_place = in_place && (!rooted || r == a.root);
        size_t send_sz = bytes, recv_sz = bytes;
        if (a.kind == TNT_COLL_REDUCE_SCATTER || a.kind == TNT_COLL_ALLTOALL ||
            (a.kind == TNT_COLL_SCATTER && r == a.root))
            send_sz *= (size_t)p;
        if (a.kind == TNT_COLL_ALLGATHER || a.kind == TNT_COLL_ALLTOALL ||
            (a.kind == TNT_COLL_GATHER && r == a.root))
            recv_sz *= (size_t)p;
        if ((a.kind == TNT_COLL_REDUCE || a.kind == TNT_COLL_GATHER) &&
            r != a.root)
            recv_sz = 0;
        if (a.kind == TNT_COLL_SCATTER && r != a.root)
            send_sz = 0;
        if (a.in_place && a.kind == TNT_COLL_SCATTER)
            recv_sz = 0;
        tnt_result_t rc = tnt__build_schedule(&a, algo, &sr->s);
        CU_ASSERT_EQUAL_FATAL(rc, TNT_SUCCESS);
        sr->size[TNT_BUF_SEND] = send_sz;
        sr->size[TNT_BUF_RECV] = recv_sz;
        sr->size[TNT_BUF_SCRATCH] = sr->s.scratch_bytes;
        for (int b = 0; b < TNT_BUF_COUNT; b++)
            sr->buf[b] = calloc(1, sr->size[b] + 1);
        size_t nin = send_sz / a.esize;
        for (size_t i = 0; i < nin; i++) {
            /* Reduce-scatter: rank r's block b is its input at global
             * index b*count + i, the same numbering as allreduce. */
            store(sr->buf[TNT_BUF_SEND], i, a.dtype, input(r, i));
        }
        if (a.kind == TNT_COLL_BROADCAST) {
            for (size_t i = 0; i < a.count; i++)
                store(sr->buf[TNT_BUF_RECV], i, a.dtype,
                      r == a.root ? input(r, i) : -99.0);
        } else if ((a.kind == TNT_COLL_ALLGATHER ||
                    a.kind == TNT_COLL_GATHER) && a.in_place) {
            for (size_t i = 0; i < a.count; i++)
                store(sr->buf[TNT_BUF_RECV], (size_t)r * a.count + i, a.dtype,
                      input(r, i));
        } else if (a.in_place && a.kind == TNT_COLL_SCATTER) {
            /* The root's block stays in its send buffer. */
        } else if (a.in_place) {
            memcpy(sr->buf[TNT_BUF_RECV], sr->buf[TNT_BUF_SEND], bytes);
            free(sr->buf[TNT_BUF_SEND]);
            sr->buf[TNT_BUF_SEND] = sr->buf[TNT_BUF_RECV];
        }
        sr->deps = malloc((sr->s.nops + 1) * sizeof(uint32_t));
        for (uint32_t i = 0; i < sr->s.nops; i++)
            sr->deps[i] = sr->s.ops[i].ndeps;
        sr->left = sr->s.nops;
        total_ops += sr->s.nops;
        for (uint32_t i = 0; i < sr->s.nops; i++)
            sends += sr->s.ops[i].kind == TNT_SOP_SEND;
    }
    sim->nslots = 16;
    while (sim->nslots < 2 * sends + 2)
        sim->nslots *= 2;
    sim->slots = calloc(sim->nslots, sizeof(sim_slot_t));
    sim->ready = malloc((total_ops + 1) * sizeof(sim_ready_t));
    CU_ASSERT_FATAL(sim->slots != NULL && sim->ready != NULL);
    for (int r = 0; r < p; r++)
        for (uint32_t i = 0; i < sim->r[r].s.nops; i++)
            if (sim->r[r].deps[i] == 0)
                make_ready(sim, r, i);
    /* Any ready operation of any rank next, chosen at random: every
     * interleaving the dependencies allow can come up, so a missing
     * dependency shows as a wrong result or an error. */
    rng_state = seed;
    while (sim->nready && !sim->errors) {
        size_t k = rng() % sim->nready;
        sim_ready_t pick = sim->ready[k];
        sim->ready[k] = sim->ready[--sim->nready];
        run_op(sim, pick.rank, pick.op, &a);
    }
    /* The allreduce's expected result once, not per rank: O(p count). */
    double *want = NULL;
    if (a.kind == TNT_COLL_ALLREDUCE || a.kind == TNT_COLL_REDUCE) {
        want = malloc((a.count + 1) * sizeof(double));
        for (size_t i = 0; i < a.count; i++)
            want[i] = reduce_ref(p, i, a.op, a.dtype);
    }
    size_t wrong = 0;
    for (int r = 0; r < p; r++) {
        sim_rank_t *sr = &sim->r[r];
        if (sr->left && !sim->errors)
            sim_error(sim, "deadlock: operations left", r, 0);
        size_t nrecv = a.in_place && a.kind == TNT_COLL_SCATTER &&
                               r == a.root
                           ? 0
                           : sr->size[TNT_BUF_RECV] / a.esize;
        for (size_t i = 0; i < nrecv; i++) {
            double expect;
            if (a.kind == TNT_COLL_BROADCAST)
                expect = input(a.root, i);
            else if (a.kind == TNT_COLL_ALLGATHER ||
                     a.kind == TNT_COLL_GATHER)
                expect = input((int)(i / a.count), i % a.count);
            else if (a.kind == TNT_COLL_SCATTER)
                expect = input(a.root, (size_t)r * a.count + i);
            else if (a.kind == TNT_COLL_ALLTOALL)
                expect = input((int)(i / a.count),
                               (size_t)r * a.count + i % a.count);
            else if (a.kind == TNT_COLL_REDUCE_SCATTER)
                expect = reduce_ref(p, (size_t)r * a.count + i, a.op, a.dtype);
            else
                expect = want[i];
            if (load(sr->buf[TNT_BUF_RECV], i, a.dtype) != expect)
                wrong++;
        }
        /* All ranks of an allreduce hold the same bits. */
        if (a.kind == TNT_COLL_ALLREDUCE &&
            memcmp(sr->buf[TNT_BUF_RECV], sim->r[0].buf[TNT_BUF_RECV],
                   bytes) != 0)
            sim_error(sim, "ranks differ bitwise", r, 0);
    }
    free(want);
    for (size_t i = 0; i < sim->nslots; i++) {
        sim_slot_t *e = &sim->slots[i];
        if (e->used && e->sent && !e->taken && !sim->errors)
            sim_error(sim, "message never received", e->src, 0);
        free(e->data);
    }
    free(sim->slots);
    free(sim->ready);
    for (int r = 0; r < p; r++) {
        sim_rank_t *sr = &sim->r[r];
        if (sr->buf[TNT_BUF_SEND] != sr->buf[TNT_BUF_RECV])
            free(sr->buf[TNT_BUF_SEND]);
        free(sr->buf[TNT_BUF_RECV]);
        free(sr->buf[TNT_BUF_SCRATCH]);
        free(sr->deps);
        tnt__sched_destroy(&sr->s);
    }
    free(sim->r);
    return wrong;
}

static void check(tnt_coll_args_t a, int algo, const char *name)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        sim_t sim;
        size_t wrong = simulate(a, algo, seed, &sim);
        if (wrong || sim.errors) {
            fprintf(stderr, "\n%s p=%d count=%zu dtype=%s op=%s root=%d "
                    "inplace=%d seg=%zu seed=%llu: %zu wrong, %s\n", name,
                    a.nranks, a.count, tnt_dtype_name(a.dtype),
                    tnt_op_name(a.op), a.root, a.in_place, a.segment_bytes,
                    (unsigned long long)seed, wrong, sim.errors ? sim.what : "");
            CU_FAIL("simulated collective wrong");
            return;
        }
        CU_PASS("ok");
    }
}

static tnt_coll_args_t args(int kind, int p, size_t count, tnt_dtype_t dt,
                            tnt_op_t op, size_t seg)
{
    tnt_coll_args_t a = {.kind = kind, .dtype = dt, .op = op, .count = count,
                         .root = 0, .rank = 0, .nranks = p,
                         .esize = tnt_dtype_size(dt), .in_place = 0,
                         .segment_bytes = seg};
    return a;
}

static const size_t counts[] = {0, 1, 2, 3, 7, 31, 100, 257};

static void test_allreduce(void)
{
    const tnt_op_t ops[] = {TNT_SUM, TNT_AVG, TNT_MAX, TNT_MIN};
    const tnt_dtype_t dts[] = {TNT_F32, TNT_F64, TNT_I32};
    for (int p = 1; p <= 17; p++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (size_t k = 0; k < 4; k++)
                for (int ip = 0; ip <= 1; ip++) {
                    static const int algos[] = {TNT_ALGO_RING, TNT_ALGO_RD,
                                                TNT_ALGO_RABENSEIFNER,
                                                TNT_ALGO_TREE};
                    tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, p,
                                             counts[ci], dts[(p + ci) % 3],
                                             ops[(p + ci + ip) % 4], 16);
                    a.in_place = ip;
                    check(a, p == 1 ? TNT_ALGO_LOCAL : algos[k],
                          tnt__algo_name(algos[k]));
                }
}

/* The intra-host algorithms (one-shot, direct) at the rank counts of one
 * host, with counts that are 0, 1, primes and not divisible by p, every
 * dtype and op the simulator checks (AVG included), in and out of place,
 * with segments small enough that direct's slices have several. */
static void test_allreduce_intra_host(void)
{
    static const int ps[] = {1, 2, 3, 5, 7, 8};
    static const size_t cs[] = {0, 1, 2, 3, 5, 13, 31, 97, 101, 1009};
    const tnt_op_t ops[] = {TNT_SUM, TNT_AVG, TNT_MAX, TNT_MIN};
    const tnt_dtype_t dts[] = {TNT_F32, TNT_F64, TNT_I32};
    static const int algos[] = {TNT_ALGO_ONESHOT, TNT_ALGO_DIRECT};
    for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++)
        for (size_t ci = 0; ci < sizeof(cs) / sizeof(cs[0]); ci++)
            for (size_t d = 0; d < 3; d++)
                for (size_t o = 0; o < 4; o++)
                    for (int ip = 0; ip <= 1; ip++)
                        for (int k = 0; k < 2; k++) {
                            int p = ps[pi];
                            /* Segments of 1, 4 and 64 elements. */
                            size_t seg = (size_t)4 << (2 * ((ci + o) % 3));
                            tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, p,
                                                     cs[ci], dts[d], ops[o],
                                                     seg);
                            a.in_place = ip;
                            /* Forced on one rank it is still a schedule;
                             * the engine maps p=1 to "local" first. */
                            check(a, algos[k], tnt__algo_name(algos[k]));
                        }
    /* Slices of 256 KiB and more: direct's "ready" handshake, in and out
     * of place; flat broadcast's too, from every root. */
    for (int p = 2; p <= 5; p += 3)
        for (int ip = 0; ip <= 1; ip++) {
            tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, p, 70001 * p,
                                     TNT_F32, ip ? TNT_AVG : TNT_SUM,
                                     64 << 10);
            a.in_place = ip;
            check(a, TNT_ALGO_DIRECT, "direct");
        }
    for (int root = 0; root < 3; root++) {
        tnt_coll_args_t a = args(TNT_COLL_BROADCAST, 3, 65537, TNT_F32,
                                 TNT_SUM, 8);
        a.root = root;
        a.in_place = 1;
        check(a, TNT_ALGO_FLAT, "flat");
    }
}

static void test_allreduce_many_ranks(void)
{
    const int ps[] = {24, 31, 32, 33, 64};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        check(args(TNT_COLL_ALLREDUCE, ps[i], 200, TNT_F32, TNT_SUM, 64),
              TNT_ALGO_RING, "ring");
        check(args(TNT_COLL_ALLREDUCE, ps[i], 5, TNT_F64, TNT_MAX, 64),
              TNT_ALGO_RD, "rd");
        check(args(TNT_COLL_ALLREDUCE, ps[i], 1001, TNT_F32, TNT_AVG, 64),
              TNT_ALGO_RABENSEIFNER, "rabenseifner");
        check(args(TNT_COLL_ALLREDUCE, ps[i], 77, TNT_F64, TNT_SUM, 64),
              TNT_ALGO_ONESHOT, "oneshot");
        check(args(TNT_COLL_ALLREDUCE, ps[i], 1001, TNT_F32, TNT_AVG, 64),
              TNT_ALGO_TREE, "tree");
        check(args(TNT_COLL_ALLREDUCE, ps[i], 1001, TNT_F32, TNT_AVG, 64),
              TNT_ALGO_DIRECT, "direct");
    }
    /* One wide job: 300 ranks of recursive doubling (pre/post step with
     * 44 folded ranks). */
    sim_t sim;
    size_t wrong = simulate(args(TNT_COLL_ALLREDUCE, 300, 3, TNT_F32,
                                 TNT_SUM, 64), TNT_ALGO_RD, 7, &sim);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(sim.errors, 0);
}

/* The tree's segments are never below TNT_TREE_MIN_SEG_BYTES, whatever
 * TNT_SEGMENT_BYTES asks (docs/environment.md: "none under 4 KiB"): in
 * every half only the last segment may be smaller, so a half has at most
 * ceil(half / floor) segments. Then the multi-segment paths (the slot
 * window of 16 wrapping) with buffers large enough to have them. */
static void test_tree_segment_floor(void)
{
    static const int ps[] = {2, 3, 4, 5, 7, 8};
    static const size_t segs[] = {64, 1000, 4096, 65536, 262144};
    static const size_t cs[] = {1, 3, 1000, 1025, 300000, 1 << 20};
    CU_ASSERT_EQUAL(TNT_TREE_MIN_SEG_BYTES, 4096);
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
        for (size_t si = 0; si < sizeof segs / sizeof segs[0]; si++)
            for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
                for (int r = 0; r < ps[pi]; r++) {
                    tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, ps[pi],
                                             cs[ci], TNT_F32, TNT_SUM,
                                             segs[si]);
                    a.rank = r;
                    tnt_sched_t s;
                    if (tnt__build_schedule(&a, TNT_ALGO_TREE, &s) !=
                        TNT_SUCCESS) {
                        CU_FAIL("tree schedule not built");
                        continue;
                    }
                    size_t half[2] = {(cs[ci] + 1) / 2 * 4, cs[ci] / 2 * 4};
                    uint32_t last[2] = {0, 0};
                    for (uint32_t i = 0; i < s.nops; i++) {
                        const tnt_sop_t *o = &s.ops[i];
                        int t = o->step >= (1u << 16);
                        uint32_t j = o->step & 0xffff;
                        if (o->kind > TNT_SOP_RECV)
                            continue;
                        if (j > last[t])
                            last[t] = j;
                    }
                    for (uint32_t i = 0; i < s.nops; i++) {
                        const tnt_sop_t *o = &s.ops[i];
                        int t = o->step >= (1u << 16);
                        uint32_t j = o->step & 0xffff;
                        if (o->kind <= TNT_SOP_RECV && j < last[t] &&
                            o->bytes < TNT_TREE_MIN_SEG_BYTES) {
                            i = s.nops - 1; /* one line a schedule */
                            fprintf(stderr, "\ntree p=%d rank %d count "
                                    "%zu seg %zu: segment %u of half %d "
                                    "is %zu bytes\n", ps[pi], r, cs[ci],
                                    segs[si], j, t, o->bytes);
                            CU_FAIL("tree segment below the floor");
                        }
                    }
                    for (int t = 0; t < 2; t++) {
                        size_t most = (half[t] + TNT_TREE_MIN_SEG_BYTES - 1) /
                                      TNT_TREE_MIN_SEG_BYTES;
                        if (last[t] + 1 > (most ? most : 1)) {
                            fprintf(stderr, "\ntree p=%d count %zu seg %zu: "
                                    "%u segments in half %d\n", ps[pi],
                                    cs[ci], segs[si], last[t] + 1, t);
                            CU_FAIL("tree cuts more segments than the "
                                    "floor allows");
                        }
                    }
                    tnt__sched_destroy(&s);
                }
    /* Many segments of the floor's size (40 to a half: the window of 16
     * wraps), in and out of place, AVG too. */
    static const int pm[] = {2, 3, 5, 8};
    for (size_t pi = 0; pi < sizeof pm / sizeof pm[0]; pi++)
        for (int ip = 0; ip <= 1; ip++) {
            tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, pm[pi], 40001,
                                     TNT_F64, ip ? TNT_AVG : TNT_SUM, 64);
            a.in_place = ip;
            check(a, TNT_ALGO_TREE, "tree");
        }
}

static void test_broadcast(void)
{
    for (int p = 1; p <= 17; p++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (int root = 0; root < p; root += (p > 5 ? 3 : 1))
                for (int ai = 0; ai < 3; ai++) {
                    static const int bc[] = {TNT_ALGO_BINOMIAL,
                                             TNT_ALGO_PIPELINE, TNT_ALGO_FLAT};
                    int algo = bc[ai];
                    tnt_coll_args_t a = args(TNT_COLL_BROADCAST, p,
                                             counts[ci], TNT_F32, TNT_SUM, 8);
                    a.root = root;
                    a.in_place = 1;
                    check(a, p == 1 ? TNT_ALGO_LOCAL : algo,
                          tnt__algo_name(algo));
                }
}

/* Reduce on every allreduce schedule it may run (reduce_root.c: a
 * non-root's receive buffer is empty here, so a schedule that still
 * touched it fails the bounds check), gather and scatter (flat) at every
 * root, in and out of place, and alltoall (pairwise), at p = 1..13. */
static void test_rooted_alltoall(void)
{
    static const int red_algos[] = {TNT_ALGO_RING, TNT_ALGO_RD,
                                    TNT_ALGO_RABENSEIFNER, TNT_ALGO_ONESHOT,
                                    TNT_ALGO_DIRECT, TNT_ALGO_TREE};
    const tnt_op_t ops[] = {TNT_SUM, TNT_AVG, TNT_MAX, TNT_MIN};
    const tnt_dtype_t dts[] = {TNT_F32, TNT_F64, TNT_I32};
    for (int p = 1; p <= 13; p++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (int root = 0; root < p; root++) {
                if (p > 8 && root != 0 && root != p / 2 && root != p - 1)
                    continue;
                for (int ip = 0; ip <= 1; ip++) {
                    for (size_t k = 0; k < 6; k++) {
                        tnt_coll_args_t a = args(
                            TNT_COLL_REDUCE, p, counts[ci],
                            dts[(p + ci + k) % 3], ops[(p + ci + ip) % 4],
                            16);
                        a.root = root;
                        a.in_place = ip;
                        check(a, p == 1 ? TNT_ALGO_LOCAL : red_algos[k],
                              "reduce");
                    }
                    static const int kinds[] = {TNT_COLL_GATHER,
                                                TNT_COLL_SCATTER};
                    for (int g = 0; g < 2; g++) {
                        tnt_coll_args_t a = args(kinds[g], p, counts[ci],
                                                 TNT_I32, TNT_SUM, 8);
                        a.root = root;
                        a.in_place = ip;
                        check(a, p == 1 ? TNT_ALGO_LOCAL : TNT_ALGO_FLAT,
                              g ? "scatter" : "gather");
                    }
                }
            }
    for (int p = 1; p <= 13; p++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            check(args(TNT_COLL_ALLTOALL, p, counts[ci], TNT_F64, TNT_SUM, 8),
                  p == 1 ? TNT_ALGO_LOCAL : TNT_ALGO_PAIRWISE, "alltoall");
}

static void test_allgather_reduce_scatter(void)
{
    for (int p = 1; p <= 12; p++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
            int algo = p == 1 ? TNT_ALGO_LOCAL : TNT_ALGO_RING;
            for (int ip = 0; ip <= 1; ip++) {
                tnt_coll_args_t a = args(TNT_COLL_ALLGATHER, p, counts[ci],
                                         TNT_I32, TNT_SUM, 8);
                a.in_place = ip;
                check(a, algo, "allgather");
                check(a, p == 1 ? TNT_ALGO_LOCAL : TNT_ALGO_BRUCK,
                      "allgather bruck");
            }
            check(args(TNT_COLL_REDUCE_SCATTER, p, counts[ci], TNT_F64,
                       (p % 2) ? TNT_SUM : TNT_AVG, 8),
                  algo, "reduce_scatter");
        }
}

/* Bruck's allgather sends one message a round, ceil(log2 p) rounds: the
 * O(log p) messages a rank of a derived communicator's creation costs. */
static void test_bruck_messages(void)
{
    for (int p = 2; p <= 70; p++) {
        int rounds = 0;
        while ((1 << rounds) < p)
            rounds++;
        for (int r = 0; r < p; r += p / 3 + 1) {
            tnt_coll_args_t a = args(TNT_COLL_ALLGATHER, p, 24, TNT_U8,
                                     TNT_SUM, 64);
            a.rank = r;
            tnt_sched_t s;
            CU_ASSERT_EQUAL_FATAL(tnt__build_schedule(&a, TNT_ALGO_BRUCK, &s),
                                  TNT_SUCCESS);
            int sends = 0, recvs = 0;
            for (uint32_t i = 0; i < s.nops; i++) {
                sends += s.ops[i].kind == TNT_SOP_SEND;
                recvs += s.ops[i].kind == TNT_SOP_RECV;
            }
            CU_ASSERT_EQUAL(sends, rounds);
            CU_ASSERT_EQUAL(recvs, rounds);
            tnt__sched_destroy(&s);
        }
    }
    tnt_coll_args_t a = args(TNT_COLL_ALLGATHER, 5, 3, TNT_U8, TNT_SUM, 64);
    int algo;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_BRUCK, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_BRUCK);
    a.kind = TNT_COLL_ALLREDUCE;
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_BRUCK, &algo) < 0);
}

static void test_barrier(void)
{
    for (int p = 1; p <= 40; p++)
        check(args(TNT_COLL_BARRIER, p, 0, TNT_U8, TNT_SUM, 64),
              p == 1 ? TNT_ALGO_LOCAL : TNT_ALGO_DISSEMINATION, "barrier");
}

/* Schedules for counts far beyond memory are still bounded in size and
 * address every byte exactly once per chunk (no 32-bit overflow). */
static void test_huge_counts_build(void)
{
    size_t count = ((size_t)1 << 33) + 5; /* 32 GiB of f32 */
    for (int p = 2; p <= 5; p++) {
        tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, p, count, TNT_F32,
                                 TNT_SUM, 256 << 10);
        a.rank = p - 1;
        tnt_sched_t s;
        CU_ASSERT_EQUAL_FATAL(tnt__build_schedule(&a, TNT_ALGO_RING, &s),
                              TNT_SUCCESS);
        CU_ASSERT(s.nops < (1u << 22));
        size_t max_end = 0, recv_bytes = 0;
        for (uint32_t i = 0; i < s.nops; i++) {
            const tnt_sop_t *o = &s.ops[i];
            if (o->kind == TNT_SOP_REDUCE && o->dst.buf == TNT_BUF_RECV &&
                o->dst.off + o->bytes > max_end)
                max_end = o->dst.off + o->bytes;
            if (o->kind == TNT_SOP_RECV && o->dst.buf == TNT_BUF_RECV)
                recv_bytes += o->bytes;
        }
        CU_ASSERT(max_end <= count * 4);
        /* The allgather receives every chunk but the one owned here. */
        size_t off, len;
        (void)off;
        len = count / (size_t)p + 1;
        CU_ASSERT(recv_bytes >= (count - len) * 4);
        CU_ASSERT(recv_bytes <= count * 4);
        tnt__sched_destroy(&s);
    }
}

static void test_select(void)
{
    tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, 4, 8, TNT_F32, TNT_SUM, 64);
    int algo;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_RD);
    a.count = 1 << 16; /* 256 KiB: Rabenseifner from 3 ranks on */
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_RABENSEIFNER);
    a.nranks = 2;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_RING);
    a.nranks = 4;
    a.count = 1 << 20; /* 4 MiB: Rabenseifner up to 8 MiB at 4 ranks */
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_RABENSEIFNER);
    a.count = 1 << 22; /* 16 MiB: the ring */
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_RING);
    a.nranks = 3;
    a.count = 1 << 20; /* 4 MiB at 3 ranks (a fold): the ring */
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_RING);
    a.nranks = 4;
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_BINOMIAL, &algo) < 0);
    CU_ASSERT_EQUAL(tnt__algo_parse("ring"), TNT_ALGO_RING);
    CU_ASSERT_EQUAL(tnt__algo_parse("bogus"), -1);
    a.nranks = 1;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_RING, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_LOCAL);
    /* One host, all pairs on shared memory: the slots up to 8 KiB,
     * staged above at every size; staged broadcast at every size;
     * forcing still wins. */
    a.nranks = 4;
    a.intra_host = 1;
    a.count = 8;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_SLOTS);
    a.count = 2048;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_SLOTS);
    a.count = 2049;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_SLOTS, &algo) < 0);
    a.count = 0;
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_SLOTS, &algo) < 0);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_STAGED, &algo),
                    TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    a.count = (1 << 20) - 1; /* f32: 4 MiB - 4 B */
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    a.count = 1 << 20;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_DIRECT, &algo),
                    TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_DIRECT);
    a.count = 8;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_SLOTS);
    a.count = 4096;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    a.count = 1 << 24;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_RING, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_RING);
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_FLAT, &algo) < 0);
    a.kind = TNT_COLL_BROADCAST;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_STAGED, &algo),
                    TNT_SUCCESS);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    a.count = 1;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_FLAT, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_FLAT);
    a.count = 1 << 24;
    a.intra_host = 0;
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_STAGED, &algo) < 0);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_PIPELINE);
    a.kind = TNT_COLL_ALLREDUCE;
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_STAGED, &algo) < 0);
    CU_ASSERT_EQUAL(tnt__algo_parse("staged"), TNT_ALGO_STAGED);
    CU_ASSERT_EQUAL(tnt__algo_parse("oneshot"), TNT_ALGO_ONESHOT);
    CU_ASSERT_EQUAL(tnt__algo_parse("direct"), TNT_ALGO_DIRECT);
    CU_ASSERT_EQUAL(tnt__algo_parse("flat"), TNT_ALGO_FLAT);
    CU_ASSERT_EQUAL(tnt__algo_parse("slots"), TNT_ALGO_SLOTS);
    CU_ASSERT_EQUAL(tnt__algo_parse("mapped"), TNT_ALGO_MAPPED);
    /* Buffers in shared allocations on one host: the slots up to 8 KiB,
     * mapped above, whatever the cores; forcing staged still wins; forced
     * mapped needs the buffers and one host; nothing to reduce is the
     * staged allreduce's empty run. */
    a.intra_host = 1;
    a.mapped = 1;
    a.count = 2048;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_SLOTS);
    a.count = 2049;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_MAPPED);
    a.count = 1 << 24;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_MAPPED);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_STAGED, &algo),
                    TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_MAPPED, &algo),
                    TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_MAPPED);
    a.count = 0;
    a.mapped = 0;
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_MAPPED, &algo),
                    TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
    a.count = 100;
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_MAPPED, &algo) < 0);
    a.mapped = 1;
    a.intra_host = 0;
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_MAPPED, &algo) < 0);
    a.kind = TNT_COLL_BROADCAST;
    a.intra_host = 1;
    CU_ASSERT(tnt__algo_select(&a, TNT_ALGO_MAPPED, &algo) < 0);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_EQUAL(algo, TNT_ALGO_STAGED);
}

/* Host layouts for the hierarchical allreduce: keys[r] names rank r's
 * host. Blocks, interleaved ranks, unequal hosts, one host, one rank per
 * host. */
typedef struct layout {
    const char *name;
    int n;
    int keys[16];
} layout_t;

static const layout_t layouts[] = {
    {"1 host of 4", 4, {0, 0, 0, 0}},
    {"2x2", 4, {0, 0, 1, 1}},
    {"2x2 interleaved", 4, {5, 9, 5, 9}},
    {"4x2", 8, {0, 0, 1, 1, 2, 2, 3, 3}},
    {"3/2/1", 6, {0, 0, 0, 1, 1, 2}},
    {"3/2/1 interleaved", 6, {0, 1, 0, 2, 1, 0}},
    {"1/3/2", 6, {0, 1, 1, 1, 2, 2}},
    {"8x1", 8, {0, 1, 2, 3, 4, 5, 6, 7}},
    {"2x4", 8, {0, 0, 0, 0, 1, 1, 1, 1}},
    {"3x3", 9, {0, 1, 2, 0, 1, 2, 0, 1, 2}},
    {"4/1/3/2/1", 11, {0, 0, 1, 2, 3, 2, 0, 3, 4, 0, 2}},
    {"5x3", 15, {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}},
};
#define NLAYOUTS (sizeof(layouts) / sizeof(layouts[0]))

static void test_topo(void)
{
    tnt_topo_t t;
    const layout_t *l = &layouts[10]; /* 4/1/3/2/1, interleaved */
    CU_ASSERT_EQUAL_FATAL(tnt__topo_init(&t, l->n, l->keys), TNT_SUCCESS);
    CU_ASSERT_EQUAL(t.nhosts, 5);
    CU_ASSERT_EQUAL(t.max_local, 4);
    /* Hosts in the order of their lowest rank, ranks ascending. */
    static const int host_of[] = {0, 0, 1, 2, 3, 2, 0, 3, 4, 0, 2};
    static const int local_of[] = {0, 1, 0, 0, 0, 1, 2, 1, 0, 3, 2};
    for (int r = 0; r < l->n; r++) {
        CU_ASSERT_EQUAL(t.host_of[r], host_of[r]);
        CU_ASSERT_EQUAL(t.local_of[r], local_of[r]);
        CU_ASSERT_EQUAL(t.members[t.host_start[t.host_of[r]] +
                                  t.local_of[r]], r);
    }
    CU_ASSERT_EQUAL(tnt__topo_host_size(&t, 2), 3);
    tnt__topo_fini(&t);
    /* Slice owners: every slice has exactly the owner whose range holds
     * it, every local rank owns at least one slice. */
    for (int L = 1; L <= 40; L++)
        for (int k = 1; k <= L; k++) {
            CU_ASSERT_EQUAL(tnt__topo_slice_first(L, k, 0), 0);
            CU_ASSERT_EQUAL(tnt__topo_slice_first(L, k, k), L);
            for (int c = 0; c < k; c++) {
                int f = tnt__topo_slice_first(L, k, c);
                int e = tnt__topo_slice_first(L, k, c + 1);
                CU_ASSERT(e > f);
                for (int j = f; j < e; j++)
                    CU_ASSERT_EQUAL(tnt__topo_slice_owner(L, k, j), c);
            }
        }
}

static void check_hier(const layout_t *l, tnt_coll_args_t a)
{
    tnt_topo_t t;
    CU_ASSERT_EQUAL_FATAL(tnt__topo_init(&t, l->n, l->keys), TNT_SUCCESS);
    a.topo = &t;
    char name[64];
    snprintf(name, sizeof(name), "hierarchical %s", l->name);
    check(a, l->n == 1 ? TNT_ALGO_LOCAL : TNT_ALGO_HIER, name);
    tnt__topo_fini(&t);
}

static void test_hierarchical(void)
{
    const tnt_op_t ops[] = {TNT_SUM, TNT_AVG, TNT_MAX, TNT_MIN};
    const tnt_dtype_t dts[] = {TNT_F32, TNT_F64, TNT_I32};
    static const size_t hcounts[] = {0, 1, 2, 3, 5, 7, 13, 31, 100, 257,
                                     1009};
    for (size_t li = 0; li < NLAYOUTS; li++)
        for (size_t ci = 0; ci < sizeof(hcounts) / sizeof(hcounts[0]); ci++)
            for (int ip = 0; ip <= 1; ip++) {
                tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, layouts[li].n,
                                         hcounts[ci], dts[(li + ci) % 3],
                                         ops[(li + ci + ip) % 4],
                                         ci % 2 ? 16 : 256);
                a.in_place = ip;
                check_hier(&layouts[li], a);
            }
    /* Slices large enough for the ring (2 hosts) and Rabenseifner (3 and
     * 4 hosts) between hosts, with several segments. */
    check_hier(&layouts[1], args(TNT_COLL_ALLREDUCE, 4, 40001, TNT_F32,
                                 TNT_SUM, 8192));
    check_hier(&layouts[3], args(TNT_COLL_ALLREDUCE, 8, 70001, TNT_F32,
                                 TNT_AVG, 16384));
    check_hier(&layouts[4], args(TNT_COLL_ALLREDUCE, 6, 60000, TNT_F64,
                                 TNT_MAX, 16384));
}

static void test_select_hier(void)
{
    tnt_topo_t t;
    int algo;
    tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, 8, 1 << 20, TNT_F32,
                             TNT_SUM, 64);
    /* Without a layout (TNT_TOPOLOGY=flat) never, and forcing fails. */
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo), TNT_SUCCESS);
    CU_ASSERT_NOT_EQUAL(algo, TNT_ALGO_HIER);
    CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_HIER, &algo),
                    TNT_ERR_CONFIG);
    CU_ASSERT_EQUAL(tnt__algo_parse("hierarchical"), TNT_ALGO_HIER);
    for (size_t li = 0; li < NLAYOUTS; li++) {
        const layout_t *l = &layouts[li];
        CU_ASSERT_EQUAL_FATAL(tnt__topo_init(&t, l->n, l->keys),
                              TNT_SUCCESS);
        a.nranks = l->n;
        a.topo = &t;
        a.count = 1 << 20;
        int want = t.nhosts > 1 && t.max_local > 1;
        CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo),
                        TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo == TNT_ALGO_HIER, want);
        /* Small messages stay with the flat recursive doubling. */
        a.count = 8;
        CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_AUTO, &algo),
                        TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo, TNT_ALGO_RD);
        /* Forced, it applies to any layout. */
        CU_ASSERT_EQUAL(tnt__algo_select(&a, TNT_ALGO_HIER, &algo),
                        TNT_SUCCESS);
        CU_ASSERT_EQUAL(algo, TNT_ALGO_HIER);
        tnt__topo_fini(&t);
    }
}

/* The schedule cache tells apart arguments that differ only in the host
 * layout: the hierarchical schedule depends on it. */
static void test_cache_topo(void)
{
    tnt_topo_t t1, t2;
    static const int k1[] = {0, 0, 1, 1}, k2[] = {0, 1, 0, 1};
    CU_ASSERT_EQUAL_FATAL(tnt__topo_init(&t1, 4, k1), TNT_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(tnt__topo_init(&t2, 4, k2), TNT_SUCCESS);
    tnt_sched_cache_t *c = malloc(sizeof(*c));
    CU_ASSERT_FATAL(c != NULL);
    tnt__sched_cache_init(c);
    tnt_coll_args_t a = args(TNT_COLL_ALLREDUCE, 4, 100, TNT_F32, TNT_SUM,
                             64);
    tnt_sched_t *s1, *s2, *s3;
    a.topo = &t1;
    CU_ASSERT_EQUAL(tnt__sched_cache_get(c, &a, TNT_ALGO_HIER, &s1), 0);
    a.topo = &t2;
    CU_ASSERT_EQUAL(tnt__sched_cache_get(c, &a, TNT_ALGO_HIER, &s2), 0);
    a.topo = &t1;
    CU_ASSERT_EQUAL(tnt__sched_cache_get(c, &a, TNT_ALGO_HIER, &s3), 0);
    CU_ASSERT(s1 != s2);
    CU_ASSERT(s1 == s3);
    /* Rank 0's peers: 1 on its host in t1, 2 in t2. */
    CU_ASSERT_EQUAL(s1->ops[0].peer, 1);
    CU_ASSERT_EQUAL(s2->ops[0].peer, 2);
    tnt__sched_release(c, s1);
    tnt__sched_release(c, s2);
    tnt__sched_release(c, s3);
    tnt__sched_cache_destroy(c);
    free(c);
    tnt__topo_fini(&t1);
    tnt__topo_fini(&t2);
}

/* Every algorithm at scale: each p from 2 to 64, then a sample up to
 * 4,096 (powers of two, primes, 3*2^k+1 and 4095; TNT_TEST_SCALE=full
 * runs a longer list). The data is checked on a small, uneven count
 * (1.5p + 3 elements up to 64 ranks, 67 above; 7 per rank for
 * allgather and reduce-scatter), one seed per case above 64 ranks. Algorithms whose schedules grow with p (ring, one-shot, direct,
 * allgather, reduce-scatter: O(p) operations per rank, O(p^2) in all)
 * run only while the run's memory (scale_mem) stays under a budget,
 * 512 MiB (3 GiB with TNT_TEST_SCALE=full); what is skipped is
 * printed. */
static const int scale_sample[] = {97, 128, 509, 1024, 1537, 4093, 4095,
                                   4096};
static const int scale_full[] = {96, 97, 127, 128, 193, 255, 256, 257, 385,
                                 509, 512, 769, 1021, 1024, 1537, 2039,
                                 2048, 3071, 3073, 4093, 4095, 4096};

typedef struct scale_case {
    const char *name;
    int kind, algo, rph; /* rph: ranks per host for hierarchical */
} scale_case_t;

static const scale_case_t scale_cases[] = {
    {"ring", TNT_COLL_ALLREDUCE, TNT_ALGO_RING, 0},
    {"rd", TNT_COLL_ALLREDUCE, TNT_ALGO_RD, 0},
    {"rabenseifner", TNT_COLL_ALLREDUCE, TNT_ALGO_RABENSEIFNER, 0},
    {"oneshot", TNT_COLL_ALLREDUCE, TNT_ALGO_ONESHOT, 0},
    {"direct", TNT_COLL_ALLREDUCE, TNT_ALGO_DIRECT, 0},
    {"hierarchical/4", TNT_COLL_ALLREDUCE, TNT_ALGO_HIER, 4},
    {"hierarchical/8", TNT_COLL_ALLREDUCE, TNT_ALGO_HIER, 8},
    {"tree", TNT_COLL_ALLREDUCE, TNT_ALGO_TREE, 0},
    {"binomial", TNT_COLL_BROADCAST, TNT_ALGO_BINOMIAL, 0},
    {"pipeline", TNT_COLL_BROADCAST, TNT_ALGO_PIPELINE, 0},
    {"flat", TNT_COLL_BROADCAST, TNT_ALGO_FLAT, 0},
    {"allgather ring", TNT_COLL_ALLGATHER, TNT_ALGO_RING, 0},
    {"allgather bruck", TNT_COLL_ALLGATHER, TNT_ALGO_BRUCK, 0},
    {"reduce_scatter ring", TNT_COLL_REDUCE_SCATTER, TNT_ALGO_RING, 0},
    {"barrier", TNT_COLL_BARRIER, TNT_ALGO_DISSEMINATION, 0},
};
#define NSCALE_CASES (sizeof(scale_cases) / sizeof(scale_cases[0]))

/* Memory of a simulated run, estimated from ranks 0 and p-1: their
 * schedules (operations, successor lists), scratch and buffers, times p. */
static size_t scale_mem(tnt_coll_args_t a, int algo)
{
    size_t most = 0, bytes = a.count * a.esize;
    if (a.kind == TNT_COLL_ALLGATHER || a.kind == TNT_COLL_REDUCE_SCATTER)
        bytes *= (size_t)a.nranks; /* the gathered or scattered buffer */
    for (int k = 0; k < 2; k++) {
        tnt_sched_t s;
        a.rank = k ? a.nranks - 1 : 0;
        if (tnt__build_schedule(&a, algo, &s) != TNT_SUCCESS)
            return SIZE_MAX;
        size_t m = s.nops * (sizeof(tnt_sop_t) + 2 * sizeof(uint32_t) +
                             sizeof(sim_ready_t)) +
                   s.nedges * (sizeof(tnt_sched_edge_t) + sizeof(uint32_t)) +
                   s.scratch_bytes + 3 * bytes;
        if (m > most)
            most = m;
        tnt__sched_destroy(&s);
    }
    return most * (size_t)a.nranks;
}

/* Returns 1 if the case ran, 0 if it was over the budget. */
static int scale_one(const scale_case_t *c, int p, size_t budget, int seeds)
{
    int small = c->kind == TNT_COLL_ALLGATHER ||
                c->kind == TNT_COLL_REDUCE_SCATTER;
    /* Past 64 ranks a fixed count: with one growing as p, scratch
     * (log p or p copies of it per rank) would be O(p^2 log p) or O(p^3)
     * in all. */
    size_t count = c->kind == TNT_COLL_BARRIER ? 0
                   : small                     ? 7
                   : p > 64                    ? 67
                                               : (size_t)p + p / 2 + 3;
    static const tnt_op_t ops[] = {TNT_SUM, TNT_AVG, TNT_MAX};
    tnt_coll_args_t a = args(c->kind, p, count, p % 2 ? TNT_F32 : TNT_I32,
                             ops[p % 3], 64);
    a.root = c->kind == TNT_COLL_BROADCAST ? p / 3 : 0;
    /* In place on odd p (the simulator lays out no in-place
     * reduce-scatter); broadcast is always in place. */
    a.in_place = c->kind == TNT_COLL_BROADCAST ||
                 (p % 2 && c->kind != TNT_COLL_REDUCE_SCATTER);
    tnt_topo_t t;
    int *keys = NULL;
    if (c->rph) {
        keys = malloc((size_t)p * sizeof(int));
        for (int r = 0; r < p; r++)
            keys[r] = r / c->rph;
        CU_ASSERT_EQUAL_FATAL(tnt__topo_init(&t, p, keys), TNT_SUCCESS);
        a.topo = &t;
    }
    int ran = scale_mem(a, c->algo) <= budget;
    if (ran) {
        for (int seed = 1; seed <= seeds; seed++) {
            sim_t sim;
            size_t wrong = simulate(a, c->algo, (uint64_t)seed, &sim);
            if (wrong || sim.errors) {
                fprintf(stderr, "\n%s p=%d count=%zu seed=%d: %zu wrong, "
                        "%s\n", c->name, p, count, seed, wrong,
                        sim.errors ? sim.what : "");
                CU_FAIL("simulated collective wrong at scale");
                break;
            }
        }
    }
    if (c->rph) {
        tnt__topo_fini(&t);
        free(keys);
    }
    return ran;
}

static void test_scale(void)
{
    const char *mode = getenv("TNT_TEST_SCALE");
    int full = mode && strcmp(mode, "full") == 0;
    /* Bytes a run may take (scale_mem's estimate). */
    size_t budget = full ? (size_t)3 << 30 : (size_t)512 << 20;
    for (size_t ci = 0; ci < NSCALE_CASES; ci++)
        for (int p = 2; p <= 64; p++)
            CU_ASSERT(scale_one(&scale_cases[ci], p, budget, 2));
    const int *ps = full ? scale_full : scale_sample;
    size_t nps = full ? sizeof(scale_full) / sizeof(int)
                      : sizeof(scale_sample) / sizeof(int);
    for (size_t ci = 0; ci < NSCALE_CASES; ci++) {
        char skipped[256] = "";
        for (size_t i = 0; i < nps; i++)
            if (!scale_one(&scale_cases[ci], ps[i], budget, 1)) {
                size_t n = strlen(skipped);
                snprintf(skipped + n, sizeof(skipped) - n, " %d", ps[i]);
            }
        if (skipped[0])
            printf("\n  scale: %s skipped at p =%s (over %zu MiB)",
                   scale_cases[ci].name, skipped, budget >> 20);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("schedules", NULL, NULL);
    CU_add_test(s, "allreduce ring/rd/rabenseifner/tree, p=1..17",
                test_allreduce);
    CU_add_test(s, "allreduce oneshot/direct, p=1..8",
                test_allreduce_intra_host);
    CU_add_test(s, "allreduce, p up to 1000", test_allreduce_many_ranks);
    CU_add_test(s, "tree allreduce: segment floor", test_tree_segment_floor);
    CU_add_test(s, "broadcast binomial/pipeline, every root", test_broadcast);
    CU_add_test(s, "allgather and reduce_scatter", test_allgather_reduce_scatter);
    CU_add_test(s, "reduce, gather, scatter, alltoall", test_rooted_alltoall);
    CU_add_test(s, "bruck allgather: log2 p messages",
                test_bruck_messages);
    CU_add_test(s, "barrier p=1..40", test_barrier);
    CU_add_test(s, "counts above 2^32 (build only)", test_huge_counts_build);
    CU_add_test(s, "algorithm selection", test_select);
    CU_add_test(s, "host layouts and slice owners", test_topo);
    CU_add_test(s, "hierarchical allreduce, many layouts",
                test_hierarchical);
    CU_add_test(s, "hierarchical selection", test_select_hier);
    CU_add_test(s, "schedule cache keys on the layout", test_cache_topo);
    CU_add_test(s, "every algorithm, p=2..64 and a sample to 4096",
                test_scale);
    CU_basic_set_mode(CU_BRM_NORMAL);
    CU_basic_run_tests();
    int failures = (int)CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
