/*
 * tnt_comm_split and tnt_comm_dup with real processes, at p = 3, 5, 7,
 * over the transport of TNT_TRANSPORT (meson runs it over tcp and shm):
 * splits by parity (key ascending and descending), by blocks, with a
 * rank left out (TNT_UNDEFINED), a split of a split and a dup; on each
 * new communicator the rank and size the rule gives, the order of its
 * members (an allgather of their parent ranks), and an allreduce whose
 * every element is checked against a reference made from the member
 * list. Then collectives in flight on four communicators at once
 * (nonblocking, sizes that take the eager path and the flow-controlled
 * one), waited for in reverse order, every element checked. Bad input:
 * split against dup on different ranks and a bad color on one rank (the
 * same error on every rank, the parent usable after), a split against
 * an allgather (TNT_ERR_MISMATCH on every rank), a NULL output, a
 * communicator freed twice. And the descriptors a dup and a split open
 * on each rank: none, over TCP and over shm (they join the parent's net
 * group and share its connections: docs/design.md, "Sharing connections
 * between communicators", steps 4 and 5), and none left open when they
 * are freed (rank 0 prints the counts). On a dup, float allreduces of
 * the sizes of the on-host algorithms (over shm: the slots and staged
 * ones, on the dup's own set of pair areas) take the algorithm the
 * parent takes and give its bits; eight dups alive at once (over shm
 * the eighth finds no free set of pair areas and makes contexts of its
 * own) all work with allreduces in flight on all of them. A dup that
 * fails (a split against an allgather) leaves
 * the parent working over the connections they share; and (owner_freed)
 * communicators derived from the first one keep working, and can be
 * derived from, after the first one is freed.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd_count.h"
#include "harness.h"

/* The value parent rank r puts at element i. */
static int64_t in_v(int r, size_t i)
{
    return (int64_t)((size_t)r * 1000003u + i * 7u) % 100003 - 50000;
}

/* Members of color `color` in new-rank order by the rule (key, then
 * parent rank); returns their number. */
static int members(int n, const int *color, const int *key, int want,
                   int *out)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (color[i] == want)
            out[m++] = i;
    for (int a = 1; a < m; a++)
        for (int b = a; b > 0; b--) {
            int x = out[b - 1], y = out[b];
            if (key[x] < key[y] || (key[x] == key[y] && x < y))
                break;
            out[b - 1] = y;
            out[b] = x;
        }
    return m;
}

/* On `sub` (this rank's part of a split of the parent by color/key):
 * rank, size, member order and an allreduce of `count` elements. */
static void check_sub(th_report_t *rep, const char *name, tnt_comm_t sub,
                      int rank, int n, const int *color, const int *key,
                      size_t count)
{
    int mem[16];
    int m = members(n, color, key, color[rank], mem);
    int want_rank = 0;
    while (mem[want_rank] != rank)
        want_rank++;
    int r = -1, s = -1;
    tnt_comm_rank(sub, &r);
    tnt_comm_size(sub, &s);
    char c[TH_NAME_MAX];
    snprintf(c, sizeof(c), "%s_place", name);
    th_report_expect(rep, c, r == want_rank && s == m, 0, "rank %d/%d, "
                     "expected %d/%d", r, s, want_rank, m);
    int32_t me = rank, got[16] = {0};
    tnt_result_t rc = tnt_allgather(sub, &me, got, 1, TNT_I32);
    size_t wrong = 0, first = 0;
    for (int i = 0; rc == TNT_SUCCESS && i < m; i++)
        if (got[i] != mem[i] && !wrong++)
            first = (size_t)i;
    snprintf(c, sizeof(c), "%s_order", name);
    th_report_check(rep, c, rc, wrong, first, NULL, 0);
    int64_t *x = th_xmalloc(count * sizeof(*x));
    for (size_t i = 0; i < count; i++)
        x[i] = in_v(rank, i);
    rc = tnt_allreduce(sub, TNT_IN_PLACE, x, count, TNT_I64, TNT_SUM);
    wrong = first = 0;
    for (size_t i = 0; rc == TNT_SUCCESS && i < count; i++) {
        int64_t want = 0;
        for (int k = 0; k < m; k++)
            want += in_v(mem[k], i);
        if (x[i] != want && !wrong++)
            first = i;
    }
    snprintf(c, sizeof(c), "%s_allreduce", name);
    th_report_check(rep, c, rc, wrong, first, NULL, 0);
    free(x);
}

/* Split by color/key, check, free. */
static void split_case(tnt_comm_t comm, th_report_t *rep, const char *name,
                       int rank, int n, const int *color, const int *key,
                       size_t count)
{
    tnt_comm_t sub = NULL;
    tnt_result_t rc = tnt_comm_split(comm, color[rank], key[rank], &sub);
    char c[TH_NAME_MAX];
    snprintf(c, sizeof(c), "%s_split", name);
    int none = color[rank] == TNT_UNDEFINED;
    th_report_expect(rep, c, rc == TNT_SUCCESS && (none ? !sub : !!sub), rc,
                     "%s", rc ? tnt_last_error() : "");
    if (rc != TNT_SUCCESS)
        return;
    if (!sub) {
        /* Every rank reports every case (the harness asks it). */
        static const char *const parts[] = {"place", "order", "allreduce",
                                            "free"};
        for (int i = 0; i < 4; i++) {
            snprintf(c, sizeof(c), "%s_%s", name, parts[i]);
            th_report_expect(rep, c, 1, 0, "in no new communicator");
        }
        return;
    }
    check_sub(rep, name, sub, rank, n, color, key, count);
    snprintf(c, sizeof(c), "%s_free", name);
    rc = tnt_comm_free(sub);
    th_report_check(rep, c, rc, 0, 0, NULL, 0);
}

/* Four communicators with nonblocking allreduces in flight at once,
 * waited for in reverse order of posting. */
static void inflight_case(tnt_comm_t comm, th_report_t *rep, int rank,
                          int n)
{
    int color[16], key[16], ident[16];
    for (int i = 0; i < n; i++) {
        color[i] = i % 2;
        key[i] = -i;
        ident[i] = 0;
    }
    tnt_comm_t sub = NULL, dup = NULL, sub2 = NULL;
    tnt_result_t rc = tnt_comm_split(comm, color[rank], key[rank], &sub);
    if (rc == TNT_SUCCESS)
        rc = tnt_comm_dup(comm, &dup);
    if (rc == TNT_SUCCESS)
        rc = tnt_comm_split(dup, 0, 0, &sub2);
    th_report_expect(rep, "inflight_make", rc == TNT_SUCCESS, rc, "%s",
                     rc ? tnt_last_error() : "");
    if (rc != TNT_SUCCESS)
        return;
    static const size_t counts[] = {300007, 1, 65537, 1009};
    tnt_comm_t comms[4] = {comm, sub, dup, sub2};
    const int *colors[4] = {ident, color, ident, ident};
    const int *keys[4] = {ident, key, ident, ident};
    int64_t *x[4];
    tnt_request_t req[4] = {NULL};
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 4; k++) {
            x[k] = th_xmalloc(counts[k] * sizeof(int64_t));
            for (size_t i = 0; i < counts[k]; i++)
                x[k][i] = in_v(rank, i + (size_t)round);
            rc = tnt_iallreduce(comms[k], TNT_IN_PLACE, x[k], counts[k],
                                TNT_I64, TNT_SUM, &req[k]);
            if (rc != TNT_SUCCESS)
                req[k] = NULL;
        }
        for (int k = 3; k >= 0; k--) {
            char c[TH_NAME_MAX];
            snprintf(c, sizeof(c), "inflight_r%d_comm%d", round, k);
            rc = req[k] ? tnt_wait(req[k]) : TNT_ERR_INTERNAL;
            if (req[k])
                tnt_request_free(req[k]);
            int mem[16];
            int m = members(n, colors[k], keys[k], colors[k][rank], mem);
            size_t wrong = 0, first = 0;
            for (size_t i = 0; rc == TNT_SUCCESS && i < counts[k]; i++) {
                int64_t want = 0;
                for (int q = 0; q < m; q++)
                    want += in_v(mem[q], i + (size_t)round);
                if (x[k][i] != want && !wrong++)
                    first = i;
            }
            th_report_check(rep, c, rc, wrong, first, NULL, 0);
            free(x[k]);
        }
    }
    tnt_comm_free(sub2);
    tnt_comm_free(sub);
    tnt_comm_free(dup);
}

/* Every pair of `comm` exchanges a message both ways (an alltoall), so
 * that a count of descriptors after it includes its connections. (The
 * printed counts have once come out one short, a descriptor elsewhere
 * in the process closing or opening meanwhile; the check below, no
 * more after the frees than before, does not depend on them.) */
static tnt_result_t settle(tnt_comm_t comm, int n)
{
    int64_t out[16], in[16];
    for (int i = 0; i < n; i++)
        out[i] = i;
    tnt_result_t rc = tnt_alltoall(comm, out, in, 1, TNT_I64);
    return rc == TNT_SUCCESS ? tnt_barrier(comm) : rc;
}

/* The transport this job's pairs use: TNT_TRANSPORT, unset meaning auto
 * (every rank of these jobs is on one host: shared memory). */
static const char *transport(void)
{
    const char *t = getenv("TNT_TRANSPORT");
    return t && *t ? t : "auto";
}

/* Whether the pairs go over shared memory (whose derived communicators
 * join while a set of pair areas is free). */
static int over_shm(void)
{
    return strcmp(transport(), "shm") == 0 ||
           strcmp(transport(), "auto") == 0;
}

/* Whether this job's derived communicators join the parent's group:
 * over TCP, verbs and shm (meson's "split" and "split_shm" passes, the
 * soft-RoCE guest's, and a run with no TNT_TRANSPORT). */
static int joins(void)
{
    return over_shm() || strcmp(transport(), "tcp") == 0 ||
           strcmp(transport(), "verbs") == 0;
}

/* What a dup and a split by parity open on this rank (none where they
 * join), and that freeing them closes every descriptor they opened. */
static void fds_case(tnt_comm_t comm, th_report_t *rep, int rank, int n)
{
    tnt_result_t rc = settle(comm, n);
    int before = tnt_open_fds();
    tnt_comm_t dup = NULL, sub = NULL;
    int with_dup = -1, with_both = -1;
    if (rc == TNT_SUCCESS)
        rc = tnt_comm_dup(comm, &dup);
    if (rc == TNT_SUCCESS)
        rc = settle(dup, n);
    if (rc == TNT_SUCCESS) {
        with_dup = tnt_open_fds();
        rc = tnt_comm_split(comm, rank % 2, rank, &sub);
    }
    if (rc == TNT_SUCCESS)
        rc = settle(sub, (n + 1 - rank % 2) / 2);
    if (rc == TNT_SUCCESS)
        with_both = tnt_open_fds();
    th_report_check(rep, "fds_make", rc, 0, 0, NULL, 0);
    if (sub)
        tnt_comm_free(sub);
    if (dup)
        tnt_comm_free(dup);
    int after = tnt_open_fds();
    if (rank == 0)
        fprintf(stderr, "test_split: p=%d rank 0: a dup opened %d "
                "descriptors, a split by parity %d; %d left open after "
                "freeing both\n", n, with_dup - before,
                with_both - with_dup, after - before);
    /* At most as many as before: one of the parent's that closed
     * meanwhile is no leak. */
    th_report_expect(rep, "fds_closed", rc == TNT_SUCCESS && before > 0 &&
                     after <= before, rc, "descriptors: %d before, %d with "
                     "the dup (+%d), %d with the split too (+%d), %d after "
                     "freeing both", before, with_dup, with_dup - before,
                     with_both, with_both - with_dup, after);
    th_report_expect(rep, "fds_none_joined", !joins() ||
                     (rc == TNT_SUCCESS && with_dup <= before &&
                      with_both <= with_dup), rc, "a dup and a split that "
                     "join open no descriptors: %d before, %d with the "
                     "dup, %d with the split too", before, with_dup,
                     with_both);
}

/* Float allreduces on the parent and on a dup of it, which has the same
 * ranks: the same algorithm (by tnt_comm_stats) and the same bits,
 * every element; over shm the on-host algorithms, the dup's over its
 * own set of pair areas, with the parent's collectives in flight at the
 * same time. Sizes: the slots (7, 1000 floats) and the staged allreduce
 * (70001). */
static float onhost_v(int r, size_t i)
{
    return 1.0f / (float)(1 + r + (int)(i % 97)) + (float)(i % 5) * 1e3f;
}

static void onhost_case(tnt_comm_t comm, th_report_t *rep, int rank, int n)
{
    static const size_t counts[] = {7, 1000, 70001};
    tnt_comm_t dup = NULL;
    tnt_result_t rc = tnt_comm_dup(comm, &dup);
    th_report_check(rep, "onhost_dup", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return;
    tnt_stats_t s0[2] = {TNT_STATS_INIT, TNT_STATS_INIT};
    tnt_stats_t s1[2] = {TNT_STATS_INIT, TNT_STATS_INIT};
    tnt_comm_stats(comm, &s0[0]);
    tnt_comm_stats(dup, &s0[1]);
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        size_t c = counts[k];
        float *x[2];
        tnt_request_t req[2] = {NULL, NULL};
        for (int j = 0; j < 2; j++) {
            x[j] = th_xmalloc(c * sizeof(float));
            for (size_t i = 0; i < c; i++)
                x[j][i] = onhost_v(rank, i);
        }
        /* Both in flight at once, the dup's posted first. */
        rc = tnt_iallreduce(dup, TNT_IN_PLACE, x[1], c, TNT_F32, TNT_SUM,
                            &req[1]);
        if (rc == TNT_SUCCESS)
            rc = tnt_iallreduce(comm, TNT_IN_PLACE, x[0], c, TNT_F32,
                                TNT_SUM, &req[0]);
        for (int j = 0; j < 2; j++)
            if (req[j]) {
                tnt_result_t w = tnt_wait(req[j]);
                rc = rc == TNT_SUCCESS ? w : rc;
                tnt_request_free(req[j]);
            }
        /* The parent's sum near the exact one, the dup's the same bits. */
        size_t wrong = 0, first = 0;
        for (size_t i = 0; rc == TNT_SUCCESS && i < c; i++) {
            double want = 0;
            for (int r = 0; r < n; r++)
                want += onhost_v(r, i);
            if ((fabs(x[0][i] - want) > 1e-5 * (1 + fabs(want)) ||
                 memcmp(&x[0][i], &x[1][i], sizeof(float)) != 0) &&
                !wrong++)
                first = i;
        }
        char name[TH_NAME_MAX];
        snprintf(name, sizeof(name), "onhost_bits_%zu", c);
        th_report_check(rep, name, rc, wrong, first, x[0],
                        c * sizeof(float));
        free(x[0]);
        free(x[1]);
    }
    tnt_comm_stats(comm, &s1[0]);
    tnt_comm_stats(dup, &s1[1]);
    int same = 1, onhost = 0;
    for (int a = 0; a < TNT_STATS_ALGOS; a++) {
        uint64_t d0 = s1[0].algo[a].calls - s0[0].algo[a].calls;
        uint64_t d1 = s1[1].algo[a].calls - s0[1].algo[a].calls;
        const char *nm = tnt_stats_algo_name(a);
        same &= d0 == d1;
        onhost += d1 && nm && (strcmp(nm, "slots") == 0 ||
                               strcmp(nm, "staged") == 0);
    }
    int shm = over_shm();
    th_report_expect(rep, "onhost_algos", same && (!shm || onhost == 2), 0,
                     "the dup's algorithms differ from the parent's, or "
                     "over shm not both of slots and staged (%d)", onhost);
    rc = tnt_comm_free(dup);
    th_report_check(rep, "onhost_free", rc, 0, 0, NULL, 0);
}

/* More live communicators over the same pairs than the pairs have sets
 * of pair areas (eight, the parent's one of them): over shm the first
 * seven dups join (no descriptor), the eighth makes contexts of its own
 * (descriptors); over TCP all join. All eight work, allreduces of the
 * slots' size in flight on all of them at once, every element checked. */
static void many_case(tnt_comm_t comm, th_report_t *rep, int rank, int n)
{
    enum { NDUP = 8, COUNT = 1000 };
    tnt_comm_t d[NDUP] = {NULL};
    int fds[NDUP + 1];
    fds[0] = tnt_open_fds();
    tnt_result_t rc = TNT_SUCCESS;
    for (int k = 0; k < NDUP; k++) {
        if (rc == TNT_SUCCESS)
            rc = tnt_comm_dup(comm, &d[k]);
        fds[k + 1] = tnt_open_fds();
    }
    th_report_check(rep, "many_make", rc, 0, 0, NULL, 0);
    int64_t *x[NDUP];
    tnt_request_t req[NDUP] = {NULL};
    for (int k = 0; k < NDUP; k++) {
        x[k] = th_xmalloc(COUNT * sizeof(int64_t));
        for (size_t i = 0; i < COUNT; i++)
            x[k][i] = in_v(rank, i + (size_t)k);
        if (d[k] && tnt_iallreduce(d[k], TNT_IN_PLACE, x[k], COUNT, TNT_I64,
                                   TNT_SUM, &req[k]) != TNT_SUCCESS)
            req[k] = NULL;
    }
    for (int k = NDUP - 1; k >= 0; k--) {
        tnt_result_t w = req[k] ? tnt_wait(req[k]) : TNT_ERR_INTERNAL;
        if (req[k])
            tnt_request_free(req[k]);
        size_t wrong = 0, first = 0;
        for (size_t i = 0; w == TNT_SUCCESS && i < COUNT; i++) {
            int64_t want = 0;
            for (int r = 0; r < n; r++)
                want += in_v(r, i + (size_t)k);
            if (x[k][i] != want && !wrong++)
                first = i;
        }
        char c[TH_NAME_MAX];
        snprintf(c, sizeof(c), "many_allreduce_%d", k);
        th_report_check(rep, c, w, wrong, first, NULL, 0);
        free(x[k]);
    }
    int shm = over_shm();
    th_report_expect(rep, "many_fds", rc == TNT_SUCCESS &&
                     fds[NDUP - 1] <= fds[0] &&
                     (shm ? fds[NDUP] > fds[NDUP - 1]
                          : fds[NDUP] <= fds[0]), rc,
                     "descriptors: %d before, %d with seven dups, %d with "
                     "the eighth (over shm its own contexts, over tcp "
                     "none)", fds[0], fds[NDUP - 1], fds[NDUP]);
    for (int k = NDUP - 1; k >= 0; k--)
        if (d[k])
            tnt_comm_free(d[k]);
}

/* The parent still works: an allreduce over all of it. */
static void parent_ok(tnt_comm_t comm, th_report_t *rep, const char *name,
                      int rank, int n)
{
    int64_t x[3] = {rank, 1, -rank};
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, x, 3, TNT_I64,
                                    TNT_SUM);
    int64_t s = (int64_t)n * (n - 1) / 2;
    th_report_expect(rep, name, rc == TNT_SUCCESS && x[0] == s &&
                     x[1] == n && x[2] == -s, rc, "%s",
                     rc ? tnt_last_error() : "");
}

static int rank_main(tnt_comm_t comm, int rank, int n, void *arg,
                     th_report_t *rep)
{
    (void)arg;
    int color[16] = {0}, key[16] = {0};
    for (int i = 0; i < n; i++) {
        color[i] = i % 2;
        key[i] = i;
    }
    split_case(comm, rep, "parity", rank, n, color, key, 1009);
    for (int i = 0; i < n; i++)
        key[i] = -i; /* reversed order within each color */
    split_case(comm, rep, "parity_rev", rank, n, color, key, 65537);
    for (int i = 0; i < n; i++) {
        color[i] = i / 2;
        key[i] = 0;   /* ties: parent order */
    }
    split_case(comm, rep, "blocks", rank, n, color, key, 4099);
    for (int i = 0; i < n; i++) {
        color[i] = i == 1 ? TNT_UNDEFINED : 7;
        key[i] = 0;
    }
    split_case(comm, rep, "undefined", rank, n, color, key, 1);
    split_case(comm, rep, "zero", rank, n, color, key, 0);

    /* A split of a split: thirds of the odd/even halves. */
    tnt_comm_t half = NULL;
    tnt_result_t rc = tnt_comm_split(comm, rank % 2, rank, &half);
    th_report_check(rep, "nested_half", rc, 0, 0, NULL, 0);
    if (rc == TNT_SUCCESS) {
        int hr = 0, hn = 0;
        tnt_comm_rank(half, &hr);
        tnt_comm_size(half, &hn);
        int hc[16], hk[16];
        for (int i = 0; i < hn; i++) {
            hc[i] = i % 3 == 0 ? TNT_UNDEFINED : i % 3;
            hk[i] = i;
        }
        split_case(half, rep, "nested", hr, hn, hc, hk, 257);
        tnt_comm_free(half);
    }

    tnt_comm_t dup = NULL;
    rc = tnt_comm_dup(comm, &dup);
    th_report_check(rep, "dup", rc, 0, 0, NULL, 0);
    if (rc == TNT_SUCCESS) {
        int ident[16] = {0};
        check_sub(rep, "dup", dup, rank, n, ident, ident, 12345);
        rc = tnt_comm_free(dup);
        th_report_check(rep, "dup_free", rc, 0, 0, NULL, 0);
        rc = tnt_comm_free(dup);
        th_report_expect(rep, "dup_free_twice", rc == TNT_ERR_INVALID_COMM &&
                         strstr(tnt_last_error(), "freed twice"), rc, "%s",
                         tnt_last_error());
    }

    inflight_case(comm, rep, rank, n);
    fds_case(comm, rep, rank, n);
    onhost_case(comm, rep, rank, n);
    many_case(comm, rep, rank, n);

    /* Bad input. */
    rc = tnt_comm_split(comm, 0, 0, NULL);
    th_report_expect(rep, "null_out", rc == TNT_ERR_INVALID_ARG, rc, "%s",
                     tnt_last_error());
    tnt_comm_t got = (tnt_comm_t)1;
    rc = rank == 1 ? tnt_comm_dup(comm, &got)
                   : tnt_comm_split(comm, 0, rank, &got);
    th_report_expect(rep, "split_vs_dup", rc == TNT_ERR_MISMATCH && !got &&
                     strstr(tnt_last_error(), "tnt_comm_dup"), rc, "%s",
                     tnt_last_error());
    parent_ok(comm, rep, "after_split_vs_dup", rank, n);
    got = (tnt_comm_t)1;
    rc = tnt_comm_split(comm, rank == n - 1 ? -5 : 0, 0, &got);
    th_report_expect(rep, "bad_color", rc == TNT_ERR_INVALID_ARG && !got &&
                     strstr(tnt_last_error(), "color -5"), rc, "%s",
                     tnt_last_error());
    parent_ok(comm, rep, "after_bad_color", rank, n);
    /* A split against a collective fails the communicator everywhere,
     * collectives still in flight on it included: a dup of the parent
     * takes it, so that the parent's last allreduce is not cut short. */
    tnt_comm_t victim = NULL;
    rc = tnt_comm_dup(comm, &victim);
    th_report_check(rep, "victim_dup", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 0;
    if (rank == 0) {
        rc = tnt_comm_split(victim, 0, 0, &got);
    } else {
        unsigned char mine[24] = {0}, all[24 * 16];
        rc = tnt_allgather(victim, mine, all, 24, TNT_U8);
    }
    th_report_expect(rep, "split_vs_allgather", rc == TNT_ERR_MISMATCH, rc,
                     "%s", tnt_last_error());
    rc = tnt_comm_free(victim);
    th_report_check(rep, "victim_free", rc, 0, 0, NULL, 0);
    /* Over TCP the victim shared the parent's connections: its failure
     * closed none of them. */
    parent_ok(comm, rep, "after_victim", rank, n);
    return 0;
}

/* The first communicator freed before those derived from it: they keep
 * its connections (the group's) and its progress loop, and a dup of one
 * of them joins the same group. Every element checked. */
static int owner_freed_main(tnt_comm_t none, int rank, int n, void *arg,
                            th_report_t *rep)
{
    (void)none;
    (void)arg;
    tnt_comm_t world = NULL, dup = NULL, sub = NULL, again = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&world);
    if (rc == TNT_SUCCESS)
        rc = tnt_comm_dup(world, &dup);
    if (rc == TNT_SUCCESS)
        rc = tnt_comm_split(world, rank % 2, -rank, &sub);
    th_report_check(rep, "derive", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 0;
    rc = tnt_comm_free(world);
    th_report_check(rep, "world_free", rc, 0, 0, NULL, 0);
    int ident[16] = {0}, color[16], key[16];
    for (int i = 0; i < n; i++) {
        color[i] = i % 2;
        key[i] = -i;
    }
    check_sub(rep, "dup", dup, rank, n, ident, ident, 4097);
    check_sub(rep, "sub", sub, rank, n, color, key, 1031);
    rc = tnt_comm_dup(dup, &again);
    th_report_check(rep, "dup_of_dup", rc, 0, 0, NULL, 0);
    if (rc == TNT_SUCCESS) {
        check_sub(rep, "again", again, rank, n, ident, ident, 65539);
        tnt_comm_free(again);
    }
    tnt_comm_free(sub);
    rc = tnt_comm_free(dup);
    th_report_check(rep, "dup_free", rc, 0, 0, NULL, 0);
    return 0;
}

static void test_owner_freed(void)
{
    th_job_t job = {"owner_freed", 3, NULL, owner_freed_main, NULL, 120, 1,
                    0};
    th_run_job(&job, NULL);
}

static void run_p(int n)
{
    th_run(n, NULL, rank_main, NULL, 240, NULL);
}

static void test_p3(void)
{
    run_p(3);
}

static void test_p5(void)
{
    run_p(5);
}

static void test_p7(void)
{
    run_p(7);
}

static const th_test_def_t k_tests[] = {
    {"split", "p3", test_p3},
    {"split", "p5", test_p5},
    {"split", "p7", test_p7},
    {"split", "owner_freed", test_owner_freed},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
