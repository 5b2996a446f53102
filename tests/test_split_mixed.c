/*
 * Collectives of different kinds on a parent and its derived
 * communicators, interleaved and in flight at once, at p = 3, 5, 7 over
 * the transport of TNT_TRANSPORT (meson runs it over tcp and shm):
 * on the parent, a split by parity (key descending) and a dup, an
 * allgather, a broadcast, an allreduce and a reduce-scatter are posted
 * nonblocking in turn across the three, then waited for in an order
 * that is not the posting order; every element of every result is
 * checked against a reference made from the member list. Two rounds, so
 * the second finds the first's schedules cached and the connections
 * made.
 *
 * Then the names (core/comm_name.h): tnt_comm_stats of each gives its
 * communicator's name, how it was made and this rank's world rank; a
 * split of a split is named after its parent; tnt_comm_report of a
 * derived one begins with "comm NAME (HOW) rank R = world rank W".
 * With TNT_TIMELINE (p = 5): every process writes one file per
 * communicator, named by its world rank (PATH.W.json, PATH.W.N.json), no
 * two processes the same file (a derived rank R once wrote PATH.R.N,
 * another process's name), each naming its communicator and world rank.
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static int64_t in_v(int r, size_t i, int round)
{
    return (int64_t)(((size_t)r * 7919u + i * 13u + (size_t)round * 101u) %
                     65521) - 32000;
}

/* A collective posted on one of the communicators, and how to check it. */
typedef struct posted {
    const char *what;
    int comm;              /* 0 parent, 1 split, 2 dup */
    int kind;              /* 0 allgather, 1 bcast, 2 allreduce, 3 RS */
    size_t count;
    int64_t *send, *recv;
    tnt_request_t req;
} posted_t;

/* The members of each communicator in its rank order (parent ranks). */
typedef struct members {
    int n[3];
    int of[3][16];
    int me[3];             /* this rank's rank in each */
} members_t;

static void make_members(members_t *m, int rank, int n)
{
    m->n[0] = m->n[2] = n;
    for (int i = 0; i < n; i++)
        m->of[0][i] = m->of[2][i] = i;
    m->me[0] = m->me[2] = rank;
    /* Parity, key -i: the same color's ranks from the highest down. */
    m->n[1] = 0;
    for (int i = n - 1; i >= 0; i--)
        if (i % 2 == rank % 2) {
            if (i == rank)
                m->me[1] = m->n[1];
            m->of[1][m->n[1]++] = i;
        }
}

static tnt_result_t post(tnt_comm_t c, posted_t *p, const members_t *m,
                         int rank, int round)
{
    int sz = m->n[p->comm];
    size_t in_n = p->kind == 3 ? p->count * (size_t)sz : p->count;
    size_t out_n = p->kind == 0 ? p->count * (size_t)sz : p->count;
    p->send = th_xmalloc((in_n ? in_n : 1) * sizeof(int64_t));
    p->recv = th_xmalloc((out_n ? out_n : 1) * sizeof(int64_t));
    for (size_t i = 0; i < in_n; i++)
        p->send[i] = in_v(rank, i, round);
    switch (p->kind) {
    case 0:
        return tnt_iallgather(c, p->send, p->recv, p->count, TNT_I64,
                              &p->req);
    case 1: /* root: the communicator's last rank */
        memcpy(p->recv, p->send, p->count * sizeof(int64_t));
        return tnt_ibroadcast(c, p->recv, p->count, TNT_I64, sz - 1,
                              &p->req);
    case 2:
        return tnt_iallreduce(c, p->send, p->recv, p->count, TNT_I64,
                              TNT_SUM, &p->req);
    default:
        return tnt_ireduce_scatter(c, p->send, p->recv, p->count, TNT_I64,
                                   TNT_SUM, &p->req);
    }
}

static int64_t want(const posted_t *p, const members_t *m, size_t i,
                    int round)
{
    const int *of = m->of[p->comm];
    int sz = m->n[p->comm];
    int64_t s = 0;
    switch (p->kind) {
    case 0:
        return in_v(of[i / p->count], i % p->count, round);
    case 1:
        return in_v(of[sz - 1], i, round);
    case 2:
        for (int q = 0; q < sz; q++)
            s += in_v(of[q], i, round);
        return s;
    default:
        for (int q = 0; q < sz; q++)
            s += in_v(of[q], (size_t)m->me[p->comm] * p->count + i, round);
        return s;
    }
}

static void mixed_case(tnt_comm_t comms[3], const members_t *m,
                       th_report_t *rep, int rank)
{
    /* Sizes: eager and flow-controlled ones, primes, an empty one. */
    posted_t ps[] = {
        {"ag_parent", 0, 0, 1009, NULL, NULL, NULL},
        {"bcast_split", 1, 1, 65537, NULL, NULL, NULL},
        {"ar_dup", 2, 2, 100003, NULL, NULL, NULL},
        {"rs_split", 1, 3, 4099, NULL, NULL, NULL},
        {"ar_parent", 0, 2, 7, NULL, NULL, NULL},
        {"ag_split", 1, 0, 31, NULL, NULL, NULL},
        {"bcast_dup", 2, 1, 0, NULL, NULL, NULL},
        {"rs_parent", 0, 3, 257, NULL, NULL, NULL},
    };
    enum { NP = sizeof(ps) / sizeof(ps[0]) };
    static const int wait_order[NP] = {6, 1, 7, 0, 3, 5, 2, 4};
    for (int round = 0; round < 2; round++) {
        posted_t p[NP];
        memcpy(p, ps, sizeof(p));
        for (int k = 0; k < NP; k++) {
            tnt_result_t rc = post(comms[p[k].comm], &p[k], m, rank, round);
            if (rc != TNT_SUCCESS) {
                p[k].req = NULL;
                th_report_check(rep, p[k].what, rc, 0, 0, NULL, 0);
            }
        }
        for (int j = 0; j < NP; j++) {
            posted_t *q = &p[wait_order[j]];
            if (!q->req)
                continue;
            tnt_result_t rc = tnt_wait(q->req);
            tnt_request_free(q->req);
            size_t out_n = q->kind == 0
                               ? q->count * (size_t)m->n[q->comm]
                               : q->count;
            size_t wrong = 0, first = 0;
            for (size_t i = 0; rc == TNT_SUCCESS && i < out_n; i++)
                if (q->recv[i] != want(q, m, i, round) && !wrong++)
                    first = i;
            char c[TH_NAME_MAX];
            snprintf(c, sizeof(c), "r%d_%s", round, q->what);
            th_report_check(rep, c, rc, wrong, first, NULL, 0);
        }
        for (int k = 0; k < NP; k++) {
            free(p[k].send);
            free(p[k].recv);
        }
    }
}

/* What tnt_comm_stats says a communicator is. */
static void names_case(tnt_comm_t comms[3], const members_t *m,
                       th_report_t *rep, int rank)
{
    tnt_stats_t st[3];
    for (int k = 0; k < 3; k++) {
        tnt_stats_t s = TNT_STATS_INIT;
        tnt_result_t rc = tnt_comm_stats(comms[k], &s);
        th_report_check(rep, "stats", rc, 0, 0, NULL, 0);
        st[k] = s;
    }
    th_report_expect(rep, "name_world", !strcmp(st[0].comm_name, "world") &&
                     !st[0].comm_how[0] && st[0].rank == rank &&
                     st[0].world_rank == rank, 0, "'%s' '%s' %d %d",
                     st[0].comm_name, st[0].comm_how, st[0].rank,
                     st[0].world_rank);
    char how[96];
    snprintf(how, sizeof(how), "split of world, color %d", rank % 2);
    th_report_expect(rep, "name_split",
                     !strncmp(st[1].comm_name, "world/", 6) &&
                     !strcmp(st[1].comm_how, how) &&
                     st[1].rank == m->me[1] && st[1].world_rank == rank, 0,
                     "'%s' '%s' %d %d", st[1].comm_name, st[1].comm_how,
                     st[1].rank, st[1].world_rank);
    th_report_expect(rep, "name_dup",
                     !strncmp(st[2].comm_name, "world/", 6) &&
                     strcmp(st[2].comm_name, st[1].comm_name) &&
                     !strcmp(st[2].comm_how, "dup of world") &&
                     st[2].rank == rank && st[2].world_rank == rank, 0,
                     "'%s' '%s'", st[2].comm_name, st[2].comm_how);
    /* A split of the split: named after it. */
    tnt_comm_t sub = NULL;
    tnt_result_t rc = tnt_comm_split(comms[1], 3, 0, &sub);
    th_report_check(rep, "nested", rc, 0, 0, NULL, 0);
    if (rc == TNT_SUCCESS) {
        tnt_stats_t s = TNT_STATS_INIT;
        tnt_comm_stats(sub, &s);
        char pre[64], nhow[160];
        snprintf(pre, sizeof(pre), "%s/", st[1].comm_name);
        snprintf(nhow, sizeof(nhow), "split of %s, color 3",
                 st[1].comm_name);
        th_report_expect(rep, "name_nested",
                         !strncmp(s.comm_name, pre, strlen(pre)) &&
                         !strcmp(s.comm_how, nhow) && s.world_rank == rank,
                         0, "'%s' '%s'", s.comm_name, s.comm_how);
        tnt_comm_free(sub);
    }
    /* The hang report of the split names it and both ranks. */
    char buf[2048], head[256];
    rc = tnt_comm_report(comms[1], buf, sizeof(buf));
    snprintf(head, sizeof(head), "comm %s (%s) rank %d = world rank %d",
             st[1].comm_name, how, m->me[1], rank);
    th_report_expect(rep, "report_names", rc == TNT_SUCCESS &&
                     !strncmp(buf, head, strlen(head)), rc, "'%.200s'", buf);
}

static int rank_main(tnt_comm_t comm, int rank, int n, void *arg,
                     th_report_t *rep)
{
    (void)arg;
    members_t m;
    make_members(&m, rank, n);
    tnt_comm_t comms[3] = {comm, NULL, NULL};
    tnt_result_t rc = tnt_comm_split(comm, rank % 2, -rank, &comms[1]);
    if (rc == TNT_SUCCESS)
        rc = tnt_comm_dup(comm, &comms[2]);
    th_report_check(rep, "make", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 0;
    mixed_case(comms, &m, rep, rank);
    names_case(comms, &m, rep, rank);
    tnt_comm_free(comms[1]);
    tnt_comm_free(comms[2]);
    return 0;
}

static void test_p3(void)
{
    th_run(3, NULL, rank_main, NULL, 240, NULL);
}

static void test_p5(void)
{
    th_run(5, NULL, rank_main, NULL, 240, NULL);
}

static void test_p7(void)
{
    th_run(7, NULL, rank_main, NULL, 240, NULL);
}

/* The file's text (NULL: none); the caller frees it. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = th_xmalloc(cap + 1);
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            b = realloc(b, (cap *= 2) + 1);
    }
    fclose(f);
    b[n] = '\0';
    return b;
}

static void test_p5_timeline(void)
{
    char dir[] = "/tmp/tnt-split-tl-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char env0[128];
    snprintf(env0, sizeof(env0), "TNT_TIMELINE=%s/trace", dir);
    const char *env[] = {env0, NULL};
    th_run(5, env, rank_main, NULL, 240, NULL);
    /* Per process: the world's file, then the split, the dup and the
     * nested split in their order of creation. */
    static const char *const how[4] = {"\"comm\":\"world\",\"comm_how\":\"\"",
                                       "\"comm_how\":\"split of world, color",
                                       "\"comm_how\":\"dup of world\"",
                                       "\"comm_how\":\"split of world/"};
    for (int w = 0; w < 5; w++)
        for (int k = 0; k < 4; k++) {
            char path[256], want[64];
            if (k == 0)
                snprintf(path, sizeof(path), "%s/trace.%d.json", dir, w);
            else
                snprintf(path, sizeof(path), "%s/trace.%d.%d.json", dir, w,
                         k);
            snprintf(want, sizeof(want), "\"world_rank\":%d,", w);
            char *t = slurp(path);
            int ok = t && strstr(t, how[k]) && strstr(t, want);
            if (!ok)
                fprintf(stderr, "\n%s: %s\n", path,
                        t ? "names another communicator or rank"
                          : "missing");
            CU_ASSERT(ok);
            free(t);
            unlink(path);
        }
    CU_ASSERT_EQUAL(rmdir(dir), 0); /* no other file was written */
}

static const th_test_def_t k_tests[] = {
    {"split_mixed", "p3", test_p3},
    {"split_mixed", "p5", test_p5},
    {"split_mixed", "p7", test_p7},
    {"split_mixed", "p5_timeline", test_p5_timeline},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
