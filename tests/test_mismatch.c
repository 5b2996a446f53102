/*
 * The mismatch suite, stricter than test_bad_input's first look: ranks
 * that call different collectives at the same sequence number (one field
 * of the signature differs on one rank: count, dtype, op, root, or the
 * collective itself) must all get TNT_ERR_MISMATCH, from the call or at
 * the latest from the barrier after it, detected from the first message
 * rather than by the deadline, with a message that states both
 * signatures (both differing values appear in it), and without writing
 * past any buffer: every buffer is exactly as large as its own rank's
 * call needs, followed by guard bytes that are checked afterwards (and
 * AddressSanitizer watches the same in the sanitizer build). Covers
 * allreduce, broadcast, allgather, reduce-scatter, reduce, gather,
 * scatter, alltoall and alltoallv (whose sizes differ per peer: a rank
 * that sends another count than its peer receives); fusion plans that
 * differ are test_fusion's "mismatch" case.
 *
 * Usage: test_mismatch [suite [test]].
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define GUARD 64
#define GUARD_BYTE 0xa5

enum coll { C_ALLREDUCE, C_BCAST, C_ALLGATHER, C_RSCATTER, C_BARRIER,
            C_REDUCE, C_GATHER, C_SCATTER, C_ALLTOALL, C_ALLTOALLV };

/* One collective call: what one rank does. */
typedef struct call {
    enum coll coll;
    size_t count;
    tnt_dtype_t dt;
    tnt_op_t op;
    int root;      /* alltoallv: extra elements sent to rank 0 */
} call_t;

/* The odd rank calls `odd`, every other rank `base`; `a` and `b` are the
 * words that must both appear in a mismatch message. */
typedef struct mm_case {
    const char *name;
    call_t base, odd;
    const char *a, *b;
    /* 1: the rank that finds the mismatch may be streaming a large frame
     * to the odd rank at that moment. Over tcp and shm its close finishes
     * that frame with its real data and then sends the failure notice
     * (TNT_TP_CLOSE_FINISHES, tcp_tail.c, shm_tail.c), so the odd rank
     * must name the mismatch like any other. A transport without that
     * bit (verbs, a version-1 plugin) skips the notice to a peer with
     * sends in flight and closes (engine.c's tnt__engine_fail): there
     * the odd rank may see the finder leave (TNT_ERR_PEER_LOST naming
     * it) and only the finder must name the mismatch
     * (cuts_frames_in_flight). */
    int in_flight;
} mm_case_t;

static const mm_case_t k_cases[] = {
    {"allreduce count", {C_ALLREDUCE, 1000, TNT_F32, TNT_SUM, 0},
     {C_ALLREDUCE, 1001, TNT_F32, TNT_SUM, 0}, "1000", "1001", 0},
    {"allreduce dtype", {C_ALLREDUCE, 100, TNT_F32, TNT_SUM, 0},
     {C_ALLREDUCE, 100, TNT_I32, TNT_SUM, 0}, "f32", "i32", 0},
    {"allreduce op", {C_ALLREDUCE, 100, TNT_F32, TNT_SUM, 0},
     {C_ALLREDUCE, 100, TNT_F32, TNT_MAX, 0}, "sum", "max", 0},
    {"broadcast count", {C_BCAST, 3000, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 300, TNT_F32, TNT_SUM, 0}, "3000", "300", 0},
    {"broadcast dtype", {C_BCAST, 100, TNT_F64, TNT_SUM, 0},
     {C_BCAST, 100, TNT_U8, TNT_SUM, 0}, "f64", "u8", 0},
    {"broadcast root", {C_BCAST, 100, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 100, TNT_F32, TNT_SUM, 1}, "root=0", "root=1", 0},
    /* Large enough for the ready handshake of the flat broadcast on one
     * host (and the pipeline between hosts). */
    {"large broadcast root", {C_BCAST, 300000, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 300000, TNT_F32, TNT_SUM, 1}, "root=0", "root=1", 0},
    {"large allreduce count", {C_ALLREDUCE, 300000, TNT_F32, TNT_SUM, 0},
     {C_ALLREDUCE, 300001, TNT_F32, TNT_SUM, 0}, "300000", "300001", 0},
    /* On one host with more ranks than cores (p=3 here), 300000 f32 is a
     * staged allreduce, 100 a slots one: the two meet in neither's
     * shared memory (onhost/stage_rounds.c's strays). */
    {"staged vs slots allreduce", {C_ALLREDUCE, 300000, TNT_F32, TNT_SUM, 0},
     {C_ALLREDUCE, 100, TNT_F32, TNT_SUM, 0}, "300000", "100", 0},
    {"staged allreduce vs broadcast",
     {C_ALLREDUCE, 300000, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 300000, TNT_F32, TNT_SUM, 0}, "allreduce", "broadcast", 0},
    {"allgather count", {C_ALLGATHER, 500, TNT_I64, TNT_SUM, 0},
     {C_ALLGATHER, 50, TNT_I64, TNT_SUM, 0}, "500", "50", 0},
    {"reduce_scatter op", {C_RSCATTER, 200, TNT_F32, TNT_SUM, 0},
     {C_RSCATTER, 200, TNT_F32, TNT_MIN, 0}, "sum", "min", 0},
    {"allreduce vs broadcast", {C_ALLREDUCE, 100, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 100, TNT_F32, TNT_SUM, 0}, "allreduce", "broadcast", 0},
    {"allgather vs reduce_scatter", {C_ALLGATHER, 100, TNT_F32, TNT_SUM, 0},
     {C_RSCATTER, 100, TNT_F32, TNT_SUM, 0}, "allgather", "reduce", 0},
    {"broadcast vs barrier", {C_BCAST, 100, TNT_F32, TNT_SUM, 0},
     {C_BARRIER, 0, TNT_U8, TNT_SUM, 0}, "broadcast", "barrier", 0},
    {"reduce root", {C_REDUCE, 100, TNT_F32, TNT_SUM, 0},
     {C_REDUCE, 100, TNT_F32, TNT_SUM, 1}, "root=0", "root=1", 0},
    {"reduce op", {C_REDUCE, 1000, TNT_F32, TNT_SUM, 1},
     {C_REDUCE, 1000, TNT_F32, TNT_MAX, 1}, "sum", "max", 0},
    {"reduce vs allreduce", {C_ALLREDUCE, 100, TNT_F32, TNT_SUM, 0},
     {C_REDUCE, 100, TNT_F32, TNT_SUM, 0}, "called reduce(", "allreduce(", 0},
    {"gather root", {C_GATHER, 100, TNT_F32, TNT_SUM, 0},
     {C_GATHER, 100, TNT_F32, TNT_SUM, 1}, "root=0", "root=1", 0},
    {"gather vs scatter", {C_GATHER, 100, TNT_F32, TNT_SUM, 0},
     {C_SCATTER, 100, TNT_F32, TNT_SUM, 0}, "gather", "scatter", 0},
    {"scatter count", {C_SCATTER, 100, TNT_F32, TNT_SUM, 0},
     {C_SCATTER, 101, TNT_F32, TNT_SUM, 0}, "100", "101", 0},
    {"alltoall count", {C_ALLTOALL, 100, TNT_I32, TNT_SUM, 0},
     {C_ALLTOALL, 101, TNT_I32, TNT_SUM, 0}, "100", "101", 0},
    {"alltoallv sizes", {C_ALLTOALLV, 100, TNT_F32, TNT_SUM, 0},
     {C_ALLTOALLV, 100, TNT_F32, TNT_SUM, 1}, "sends 101", "expects 100", 0},
    /* Past the eager window: the sizes meet at the RTS, not the data. */
    {"large alltoallv sizes", {C_ALLTOALLV, 300000, TNT_F32, TNT_SUM, 0},
     {C_ALLTOALLV, 300000, TNT_F32, TNT_SUM, 7}, "sends 300007",
     "expects 300000", 1},
    {"alltoallv dtype", {C_ALLTOALLV, 10, TNT_F32, TNT_SUM, 0},
     {C_ALLTOALLV, 10, TNT_I32, TNT_SUM, 0}, "f32", "i32", 0},
};
#define N_CASES (sizeof k_cases / sizeof k_cases[0])

typedef struct mm_arg {
    const mm_case_t *c;
    int odd_rank;
    /* Buffers from tnt_mem_alloc on every rank but the odd one (which
     * allocates them too, the call being collective, and passes malloc'd
     * ones): the mapped allreduce against another. */
    int shared_but_odd;
} mm_arg_t;

/* A signature in a message shows only the fields its collective has: no
 * op in a broadcast or allgather, no root outside a broadcast, nothing
 * but the algorithm in a barrier. */
static int sig_fields_apply(const char *msg)
{
    static const struct {
        const char *kind, *not_field[3];
    } k[] = {{"broadcast(", {"op=", NULL, NULL}},
             {"allgather(", {"op=", "root=", NULL}},
             {"allreduce(", {"root=", NULL, NULL}},
             {"reduce_scatter(", {"root=", NULL, NULL}},
             {" gather(", {"op=", NULL, NULL}},
             {" scatter(", {"op=", NULL, NULL}},
             {"alltoall(", {"op=", "root=", NULL}},
             {"alltoallv(", {"op=", "root=", "count="}},
             {"barrier(", {"count=", "dtype=", "op="}}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        for (const char *s = strstr(msg, k[i].kind); s;
             s = strstr(s + 1, k[i].kind)) {
            const char *end = strchr(s, ')');
            size_t n = end ? (size_t)(end - s) : strlen(s);
            for (int f = 0; f < 3 && k[i].not_field[f]; f++) {
                const char *hit = strstr(s, k[i].not_field[f]);
                if (hit && (size_t)(hit - s) < n)
                    return 0;
            }
        }
    return 1;
}

/* Whether this run's transport may close with a frame in flight instead
 * of finishing it before the failure notice (mm_case_t.in_flight): one
 * without TNT_TP_CLOSE_FINISHES. Of the built-in ones only verbs; a
 * plugin may be of either kind. */
static int cuts_frames_in_flight(void)
{
    const char *tp = getenv("TNT_TRANSPORT");
    const char *plugin = getenv("TNT_TRANSPORT_PLUGIN");
    return (tp && strcmp(tp, "verbs") == 0) || (plugin && *plugin);
}

/* The bytes a call reads and writes. */
static void buf_sizes(const call_t *c, int p, size_t *in, size_t *out)
{
    size_t b = c->count * tnt_dtype_size(c->dt);
    *in = *out = b;
    if (c->coll == C_ALLGATHER || c->coll == C_GATHER ||
        c->coll == C_ALLTOALL || c->coll == C_ALLTOALLV)
        *out *= (size_t)p;
    if (c->coll == C_RSCATTER || c->coll == C_SCATTER ||
        c->coll == C_ALLTOALL || c->coll == C_ALLTOALLV)
        *in *= (size_t)p;
    if (c->coll == C_ALLTOALLV)
        *in += (size_t)c->root * tnt_dtype_size(c->dt);
}

/* alltoallv: count elements to and from every rank, and `root` more to
 * rank 0, or from rank 0 to rank 1 (the odd rank's extra, which the
 * receiver does not expect). */
static tnt_result_t call_alltoallv(tnt_comm_t comm, int p, const call_t *c,
                                   const void *send, void *recv)
{
    size_t *v = malloc(4 * (size_t)p * sizeof(size_t));
    if (!v)
        abort();
    /* The own block must agree, or the call refuses before any message:
     * rank 0's extra goes to rank 1. */
    int rank;
    tnt_comm_rank(comm, &rank);
    int to = rank == 0 ? 1 : 0;
    size_t soff = 0;
    for (int q = 0; q < p; q++) {
        v[q] = c->count + (q == to ? (size_t)c->root : 0);
        v[p + q] = soff;
        soff += v[q];
        v[2 * p + q] = c->count;
        v[3 * p + q] = (size_t)q * c->count;
    }
    tnt_result_t rc = tnt_alltoallv(comm, send, v, v + p, recv, v + 2 * p,
                                    v + 3 * p, c->dt);
    free(v);
    return rc;
}

static tnt_result_t do_call(tnt_comm_t comm, int p, const call_t *c,
                            const void *send, void *recv)
{
    switch (c->coll) {
    case C_ALLREDUCE:
        return tnt_allreduce(comm, send, recv, c->count, c->dt, c->op);
    case C_BCAST:
        return tnt_broadcast(comm, recv, c->count, c->dt, c->root);
    case C_ALLGATHER:
        return tnt_allgather(comm, send, recv, c->count, c->dt);
    case C_RSCATTER:
        return tnt_reduce_scatter(comm, send, recv, c->count, c->dt, c->op);
    case C_BARRIER:
        return tnt_barrier(comm);
    case C_REDUCE:
        return tnt_reduce(comm, send, recv, c->count, c->dt, c->op, c->root);
    case C_GATHER:
        return tnt_gather(comm, send, recv, c->count, c->dt, c->root);
    case C_SCATTER:
        return tnt_scatter(comm, send, recv, c->count, c->dt, c->root);
    case C_ALLTOALL:
        return tnt_alltoall(comm, send, recv, c->count, c->dt);
    case C_ALLTOALLV:
        return call_alltoallv(comm, p, c, send, recv);
    }
    return TNT_ERR_INTERNAL;
}

/* A buffer of exactly `bytes` followed by GUARD guard bytes. */
static unsigned char *guarded(size_t bytes)
{
    unsigned char *p = malloc(bytes + GUARD);
    if (!p)
        abort();
    memset(p, 0, bytes);
    memset(p + bytes, GUARD_BYTE, GUARD);
    return p;
}

static int guard_intact(const unsigned char *p, size_t bytes)
{
    for (size_t i = 0; i < GUARD; i++)
        if (p[bytes + i] != GUARD_BYTE)
            return 0;
    return 1;
}

static int mm_rank(tnt_comm_t comm, int rank, int p, void *arg,
                   th_report_t *rep)
{
    const mm_arg_t *a = arg;
    const call_t *c = rank == a->odd_rank ? &a->c->odd : &a->c->base;
    size_t in, out;
    buf_sizes(c, p, &in, &out);
    unsigned char *send = guarded(in), *recv = guarded(out);
    void *shared[2] = {NULL, NULL};
    if (a->shared_but_odd) {
        shared[0] = th_xmem_alloc(comm, in + GUARD);
        shared[1] = th_xmem_alloc(comm, out + GUARD);
        if (rank != a->odd_rank) {
            free(send);
            free(recv);
            send = shared[0];
            recv = shared[1];
            memset(send + in, GUARD_BYTE, GUARD);
            memset(recv + out, GUARD_BYTE, GUARD);
        }
    }
    double t0 = th_now();
    tnt_result_t rc = TNT_SUCCESS;
    rc = do_call(comm, p, c, send, recv);
    char msg[400];
    snprintf(msg, sizeof msg, "%s", tnt_last_error());
    const char *where = "the call";
    if (rc == TNT_SUCCESS) {
        rc = tnt_barrier(comm);
        snprintf(msg, sizeof msg, "%s", tnt_last_error());
        where = "the barrier after it";
    }
    double dt = th_now() - t0;
    int named = strstr(msg, a->c->a) && strstr(msg, a->c->b) &&
                sig_fields_apply(msg);
    /* Two ranks always talk directly, so both must name the mismatch.
     * With more, a rank whose peers failed and closed before their
     * failure notice could reach it (no connection yet, or, over a
     * transport that cuts frames in flight, a message half sent on it)
     * sees a lost peer instead: accepted here, and the job as a whole
     * must still name the mismatch (test_each_field). */
    /* A case with a frame in flight: see mm_case_t.in_flight. Where the
     * close finishes that frame before the notice, the odd rank (the one
     * it streams to) must name the mismatch at every p: the notice is
     * sent to it directly. */
    int cut = a->c->in_flight && cuts_frames_in_flight();
    int must_name = a->c->in_flight && !cut && rank == a->odd_rank;
    int ok = (rc == TNT_ERR_MISMATCH && named) ||
             (((p > 2 && !must_name) || cut) && rc == TNT_ERR_PEER_LOST);
    th_report_expect(rep, "mismatch", ok, rc,
                     "rank %d%s: %s returned %d (%s) after %.1f s%s: '%s'",
                     rank, rank == a->odd_rank ? " (the odd one)" : "",
                     where, rc, tnt_strerror(rc), dt,
                     rc == TNT_ERR_MISMATCH && !named
                         ? ", without both signatures" : "", msg);
    th_report_expect(rep, "guards", guard_intact(send, in) &&
                         guard_intact(recv, out), 0,
                     "rank %d: bytes written past the %s buffer", rank,
                     guard_intact(send, in) ? "receive" : "send");
    if (!a->shared_but_odd || rank == a->odd_rank) {
        free(send);
        free(recv);
    }
    tnt_mem_free(comm, shared[0]);
    tnt_mem_free(comm, shared[1]);
    return 0;
}

/* The mapped allreduce (buffers from tnt_mem_alloc on one host) against
 * the staged one (the odd rank's malloc'd buffers): the algorithms
 * differ, and the message names both. */
static const mm_case_t k_shared_case = {
    "shared vs malloc allreduce", {C_ALLREDUCE, 300000, TNT_F32, TNT_SUM, 0},
    {C_ALLREDUCE, 300000, TNT_F32, TNT_SUM, 0}, "mapped", "staged", 0};

static void run_cases(const mm_case_t *cases, size_t ncases, int shared)
{
    static const int ps[] = {2, 3};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++)
        for (size_t i = 0; i < ncases; i++) {
            /* The odd rank is the last one: at p=3 it is neither the
             * root nor rank 0's ring neighbour on both sides. */
            mm_arg_t a = {&cases[i], ps[k] - 1, shared};
            char name[128];
            snprintf(name, sizeof name, "%s mismatch p=%d",
                     cases[i].name, ps[k]);
            /* A deadline beyond what detection needs: a mismatch
             * must be found from the first message. */
            const char *env[] = {"TNT_TIMEOUT=15", NULL};
            th_job_t job = {name, ps[k], env, mm_rank, &a, 40, 0, 0};
            th_result_t res;
            th_run_job(&job, &res);
            int named = 0;
            for (int r = 0; r < ps[k]; r++) {
                const th_case_t *c = th_find_case(&res, r, "mismatch");
                named += c && c->rc == TNT_ERR_MISMATCH;
            }
            /* With a frame in flight cut by the close only the finder
             * is sure to name it (mm_case_t.in_flight). */
            int need = cases[i].in_flight && cuts_frames_in_flight() ? 1
                                                                      : 2;
            TH_CHECK(named >= need, "job %s: only %d ranks reported "
                     "TNT_ERR_MISMATCH; the rank that saw it first must "
                     "tell at least the one it talks to", name, named);
            printf("  %s: %d of %d ranks got TNT_ERR_MISMATCH\n", name,
                   named, ps[k]);
            th_result_free(&res);
        }
}

static void test_each_field(void)
{
    run_cases(k_cases, N_CASES, 0);
}

/* The cases where the finder may be streaming a frame to the odd rank
 * (mm_case_t.in_flight) alone, to repeat them cheaply: `test_mismatch
 * mismatch in_flight` (each_field runs them too). A small
 * TNT_SOCKET_BUFFER makes the frame still be in flight over TCP. */
static void test_in_flight(void)
{
    mm_case_t sel[N_CASES];
    size_t n = 0;
    for (size_t i = 0; i < N_CASES; i++)
        if (k_cases[i].in_flight)
            sel[n++] = k_cases[i];
    TH_CHECK(n > 0, "no case has a frame in flight");
    run_cases(sel, n, 0);
}

static void test_shared_vs_malloc(void)
{
    /* Only shared memory maps another rank's buffer: over a network
     * transport both ranks run the same algorithm and nothing differs. */
    const char *tp = getenv("TNT_TRANSPORT");
    if (tp && (strcmp(tp, "tcp") == 0 || strcmp(tp, "verbs") == 0)) {
        fprintf(stderr, "  [needs shared memory between the ranks; "
                "skipped under TNT_TRANSPORT=%s]\n", tp);
        return;
    }
    run_cases(&k_shared_case, 1, 1);
}

/* A mismatch never completes on any rank: every field of the signature
 * (the collective itself, dtype, op, count, root) differs on each rank
 * position in turn, at p = 3 and 4, over TCP and shared memory, and the
 * call itself must fail on EVERY rank, never return success (a bystander
 * of a broadcast whose root differs used to finish, with whatever its
 * buffer held). The error is TNT_ERR_MISMATCH; a lost peer is accepted
 * where a failed peer's notice cannot reach a rank (see mm_rank), and
 * the job as a whole must still have at least two ranks naming the
 * mismatch. (Over TCP at p=4 a rank used to see a lost peer about one
 * job in 100: the failing rank closed a lower rank's eager connection
 * still in its handshake; engine.c's tnt__engine_fail now waits for it
 * and sends the notice on it.)
 *
 * Over shared memory both the staged broadcast (the default there, no
 * messages: every rank checks every peer's signature header) and a
 * schedule-built one (binomial) are tried. */
static int strict_rank(tnt_comm_t comm, int rank, int p, void *arg,
                       th_report_t *rep)
{
    const mm_arg_t *a = arg;
    const call_t *c = rank == a->odd_rank ? &a->c->odd : &a->c->base;
    size_t in, out;
    buf_sizes(c, p, &in, &out);
    unsigned char *send = guarded(in), *recv = guarded(out);
    tnt_result_t rc = TNT_SUCCESS;
    rc = do_call(comm, p, c, send, recv);
    th_report_expect(rep, "mismatch",
                     rc == TNT_ERR_MISMATCH || rc == TNT_ERR_PEER_LOST, rc,
                     "rank %d%s: the call returned %d (%s): '%s'", rank,
                     rank == a->odd_rank ? " (the odd one)" : "", rc,
                     tnt_strerror(rc), rc ? tnt_last_error() : "");
    th_report_expect(rep, "guards", guard_intact(send, in) &&
                         guard_intact(recv, out), 0,
                     "rank %d: bytes written past a buffer", rank);
    free(send);
    free(recv);
    return 0;
}

static const mm_case_t k_strict[] = {
    {"kind", {C_ALLREDUCE, 100, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 100, TNT_F32, TNT_SUM, 0}, "", "", 0},
    {"kind barrier", {C_BARRIER, 0, TNT_U8, TNT_SUM, 0},
     {C_ALLGATHER, 10, TNT_F32, TNT_SUM, 0}, "", "", 0},
    {"bcast dtype", {C_BCAST, 100, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 100, TNT_I32, TNT_SUM, 0}, "", "", 0},
    {"allreduce op", {C_ALLREDUCE, 100, TNT_F32, TNT_SUM, 0},
     {C_ALLREDUCE, 100, TNT_F32, TNT_MAX, 0}, "", "", 0},
    {"bcast count", {C_BCAST, 100, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 101, TNT_F32, TNT_SUM, 0}, "", "", 0},
    {"bcast root", {C_BCAST, 100, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 100, TNT_F32, TNT_SUM, 1}, "", "", 0},
    {"bcast root 2", {C_BCAST, 100, TNT_F32, TNT_SUM, 1},
     {C_BCAST, 100, TNT_F32, TNT_SUM, 2}, "", "", 0},
    {"large bcast root", {C_BCAST, 300000, TNT_F32, TNT_SUM, 0},
     {C_BCAST, 300000, TNT_F32, TNT_SUM, 1}, "", "", 0},
    {"reduce root", {C_REDUCE, 100, TNT_F32, TNT_SUM, 0},
     {C_REDUCE, 100, TNT_F32, TNT_SUM, 1}, "", "", 0},
    {"gather root", {C_GATHER, 100, TNT_F32, TNT_SUM, 0},
     {C_GATHER, 100, TNT_F32, TNT_SUM, 1}, "", "", 0},
    {"scatter root", {C_SCATTER, 100, TNT_F32, TNT_SUM, 1},
     {C_SCATTER, 100, TNT_F32, TNT_SUM, 2}, "", "", 0},
    {"gather vs scatter", {C_GATHER, 100, TNT_F32, TNT_SUM, 0},
     {C_SCATTER, 100, TNT_F32, TNT_SUM, 0}, "", "", 0},
    /* Not alltoallv's sizes: they are an agreement of one pair, which
     * the receiver checks; a sender whose small message left at once,
     * and the ranks outside the pair, may finish the call and fail at
     * the next one (each_field's barrier). */
};

static void test_every_rank(void)
{
    /* Over shm: the staged broadcast (auto) and a schedule-built one. */
    static const char *const tps[] = {"TNT_TRANSPORT=tcp",
                                      "TNT_TRANSPORT=shm",
                                      "TNT_TRANSPORT=shm"};
    static const char *const bcast[] = {"TNT_BCAST_ALGO=auto",
                                        "TNT_BCAST_ALGO=auto",
                                        "TNT_BCAST_ALGO=binomial"};
    static const int ps[] = {3, 4};
    for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < 2; k++)
            for (size_t i = 0; i < sizeof k_strict / sizeof k_strict[0];
                 i++)
                for (int odd = 0; odd < ps[k]; odd++) {
                    mm_arg_t a = {&k_strict[i], odd, 0};
                    char name[128];
                    snprintf(name, sizeof name, "%s p=%d odd rank %d %s %s",
                             k_strict[i].name, ps[k], odd, tps[t] + 4,
                             bcast[t] + 4);
                    const char *env[] = {tps[t], bcast[t],
                                         "TNT_TIMEOUT=15", NULL};
                    th_job_t job = {name, ps[k], env, strict_rank, &a, 40,
                                    0, 0};
                    th_result_t res;
                    th_run_job(&job, &res);
                    int named = 0;
                    for (int r = 0; r < ps[k]; r++) {
                        const th_case_t *c = th_find_case(&res, r,
                                                          "mismatch");
                        named += c && c->rc == TNT_ERR_MISMATCH;
                    }
                    TH_CHECK(named >= 2, "job %s: only %d ranks reported "
                             "TNT_ERR_MISMATCH", name, named);
                    th_result_free(&res);
                }
}

static const th_test_def_t k_tests[] = {
    {"mismatch", "each_field", test_each_field},
    {"mismatch", "in_flight", test_in_flight},
    {"mismatch", "every_rank", test_every_rank},
    {"mismatch", "shared vs malloc", test_shared_vs_malloc},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
