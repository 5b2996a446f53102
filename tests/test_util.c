/*
 * Unit tests of the small helpers: Tarantella's micro-batch split, dtype
 * and op names and sizes, and the parsers behind every environment knob
 * (lib/util/param.h), the heartbeat settings of a TCP socket
 * (lib/util/sockaddr.h), the intrusive list (lib/util/list.h). Also tests
 * the test harness itself: a suite whose
 * harness cannot see a crash, a hang or a wrong result would pass with a
 * broken library, so those are provoked here on purpose.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/handles.h"
#include "util/list.h"
#include "util/param.h"
#include "util/sockaddr.h"
#include "datagen.h"
#include "harness.h"

/* ---- intrusive list (lib/util/list.h) ------------------------------------ */

typedef struct item {
    int v;
    tnt_list_node_t link;
} item_t;

/* The values of list l in order, into out (at most n); returns how many,
 * after checking that the backward links mirror the forward ones. */
static int list_values(const tnt_list_t *l, int *out, int n)
{
    int k = 0;
    const tnt_list_node_t *prev = &l->head;
    for (const tnt_list_node_t *it = tnt__list_first(l); it;
         it = tnt__list_next(l, it)) {
        CU_ASSERT_PTR_EQUAL(it->prev, prev);
        if (k < n)
            out[k] = TNT_LIST_ENTRY(it, item_t, link)->v;
        k++;
        prev = it;
    }
    CU_ASSERT_PTR_EQUAL(l->head.prev, prev);
    return k;
}

static void test_list(void)
{
    tnt_list_t l;
    tnt__list_init(&l);
    CU_ASSERT(tnt__list_empty(&l));
    CU_ASSERT_PTR_NULL(tnt__list_first(&l));

    item_t it[6];
    memset(it, 0, sizeof(it)); /* zeroed: on no list */
    for (int i = 0; i < 6; i++) {
        it[i].v = i;
        CU_ASSERT(!tnt__list_linked(&it[i].link));
    }
    tnt__list_push_back(&l, &it[2].link);
    tnt__list_push_back(&l, &it[3].link);
    tnt__list_push_front(&l, &it[1].link);
    tnt__list_push_front(&l, &it[0].link);
    tnt__list_insert_after(&it[3].link, &it[5].link);
    tnt__list_insert_after(&it[3].link, &it[4].link);
    CU_ASSERT(!tnt__list_empty(&l));
    int v[8], n = list_values(&l, v, 8);
    CU_ASSERT_EQUAL_FATAL(n, 6);
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(v[i], i);
        CU_ASSERT(tnt__list_linked(&it[i].link));
    }

    /* Unlink the first, a middle and the last element. */
    tnt__list_unlink(&it[0].link);
    tnt__list_unlink(&it[3].link);
    tnt__list_unlink(&it[5].link);
    CU_ASSERT(!tnt__list_linked(&it[3].link));
    n = list_values(&l, v, 8);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT(v[0] == 1 && v[1] == 2 && v[2] == 4);

    /* An unlinked element may join again. */
    tnt__list_push_back(&l, &it[3].link);
    n = list_values(&l, v, 8);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT_EQUAL(v[3], 3);

    /* The safe walk survives unlinking the element it stands on. */
    tnt_list_node_t *cur, *nx;
    int seen = 0;
    TNT_LIST_FOREACH_SAFE(&l, cur, nx) {
        item_t *e = TNT_LIST_ENTRY(cur, item_t, link);
        seen++;
        if (e->v % 2 == 0)
            tnt__list_unlink(cur);
    }
    CU_ASSERT_EQUAL(seen, 4);
    n = list_values(&l, v, 8);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(v[0] == 1 && v[1] == 3);

    TNT_LIST_FOREACH_SAFE(&l, cur, nx)
        tnt__list_unlink(cur);
    CU_ASSERT(tnt__list_empty(&l));
    CU_ASSERT_PTR_NULL(tnt__list_first(&l));
    CU_ASSERT_EQUAL(list_values(&l, v, 8), 0);
}

/* ---- tnt_micro_batch -------------------------------------------------------- */

static void test_micro_batch_all(void)
{
    long bad = 0;
    for (size_t g = 0; g <= 200; g++) {
        for (int p = 1; p <= 64; p++) {
            size_t sum = 0, next = 0, lo = SIZE_MAX, hi = 0;
            for (int r = 0; r < p; r++) {
                size_t off = 12345, cnt = 12345;
                tnt_result_t rc = tnt_micro_batch(g, r, p, &off, &cnt);
                /* Independent formula: the first g % p ranks get one
                 * sample more than the others. */
                size_t q = g / (size_t)p, m = g % (size_t)p;
                size_t want_cnt = q + ((size_t)r < m ? 1 : 0);
                size_t want_off = (size_t)r * q + ((size_t)r < m ? (size_t)r
                                                                 : m);
                int ok = rc == TNT_SUCCESS && cnt == want_cnt &&
                         off == want_off && off == next;
                if (!ok && bad++ < 10)
                    TH_CHECK(0, "tnt_micro_batch(global %zu, rank %d, size "
                             "%d) = rc %d, offset %zu count %zu; expected "
                             "offset %zu count %zu", g, r, p, rc, off, cnt,
                             want_off, want_cnt);
                next = off + cnt;
                sum += cnt;
                lo = cnt < lo ? cnt : lo;
                hi = cnt > hi ? cnt : hi;
            }
            if ((sum != g || hi - lo > 1) && bad++ < 10)
                TH_CHECK(0, "micro batches of %zu over %d ranks: sum %zu, "
                         "counts from %zu to %zu", g, p, sum, lo, hi);
        }
    }
    TH_CHECK(bad == 0, "%ld wrong micro-batch splits in all", bad);
}

static void test_micro_batch_large(void)
{
    /* No overflow near the top of size_t. */
    size_t g = SIZE_MAX;
    int p = 3;
    size_t total = 0, next = 0;
    for (int r = 0; r < p; r++) {
        size_t off = 0, cnt = 0;
        tnt_result_t rc = tnt_micro_batch(g, r, p, &off, &cnt);
        TH_CHECK(rc == TNT_SUCCESS && off == next,
                 "micro batch of SIZE_MAX, rank %d: rc %d offset %zu (want "
                 "%zu)", r, rc, off, next);
        next = off + cnt;
        total += cnt;
    }
    TH_CHECK(total == g, "micro batches of SIZE_MAX sum to %zu", total);
    size_t off = 0, cnt = 0;
    TH_CHECK(tnt_micro_batch(1000, 0, 1, &off, &cnt) == TNT_SUCCESS &&
                 off == 0 && cnt == 1000,
             "one rank gets the whole batch: offset %zu count %zu", off,
             cnt);
    TH_CHECK(tnt_micro_batch(1000, 999, 1000, &off, &cnt) == TNT_SUCCESS &&
                 off == 999 && cnt == 1,
             "last of 1000 ranks: offset %zu count %zu", off, cnt);
    TH_CHECK(tnt_micro_batch(3, 7, 8, &off, &cnt) == TNT_SUCCESS &&
                 off == 3 && cnt == 0,
             "more ranks than samples: rank 7 of 8 over 3 samples got "
             "offset %zu count %zu", off, cnt);
}

static void test_micro_batch_bad(void)
{
    size_t off, cnt;
    static const struct {
        int rank, size;
    } bad[] = {{4, 4}, {5, 4}, {-1, 4}, {0, 0}, {0, -1}, {-3, -3},
               {INT32_MAX, 2}, {0, INT32_MIN}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tnt_result_t rc = tnt_micro_batch(100, bad[i].rank, bad[i].size,
                                          &off, &cnt);
        TH_CHECK(rc == TNT_ERR_INVALID_ARG,
                 "tnt_micro_batch(100, rank %d, size %d) returned %d (%s), "
                 "expected TNT_ERR_INVALID_ARG", bad[i].rank, bad[i].size,
                 rc, tnt_strerror(rc));
        TH_CHECK(rc >= 0 || tnt_last_error()[0],
                 "no error message after rejecting rank %d size %d",
                 bad[i].rank, bad[i].size);
    }
    TH_CHECK(tnt_micro_batch(100, 0, 4, NULL, &cnt) == TNT_ERR_INVALID_ARG,
             "NULL offset pointer accepted");
    TH_CHECK(tnt_micro_batch(100, 0, 4, &off, NULL) == TNT_ERR_INVALID_ARG,
             "NULL count pointer accepted");
}

/* ---- dtype and op helpers ------------------------------------------------- */

static void test_dtype_and_op_names(void)
{
    static const size_t sizes[TNT_DTYPE_COUNT] = {
        [TNT_F32] = 4, [TNT_F64] = 8, [TNT_F16] = 2, [TNT_BF16] = 2,
        [TNT_I8] = 1,  [TNT_U8] = 1,  [TNT_I32] = 4, [TNT_U32] = 4,
        [TNT_I64] = 8, [TNT_U64] = 8};
    const char *names[TNT_DTYPE_COUNT];
    for (int d = 0; d < TNT_DTYPE_COUNT; d++) {
        size_t s = tnt_dtype_size((tnt_dtype_t)d);
        TH_CHECK(s == sizes[d], "tnt_dtype_size(%d) = %zu, expected %zu", d,
                 s, sizes[d]);
        names[d] = tnt_dtype_name((tnt_dtype_t)d);
        TH_CHECK(names[d] && names[d][0], "tnt_dtype_name(%d) is %s", d,
                 names[d] ? "empty" : "NULL");
    }
    static const int bad_dt[] = {TNT_DTYPE_COUNT, 77, -1, 1 << 30};
    for (size_t i = 0; i < sizeof bad_dt / sizeof bad_dt[0]; i++) {
        tnt_dtype_t dt = (tnt_dtype_t)bad_dt[i];
        TH_CHECK(tnt_dtype_size(dt) == 0, "tnt_dtype_size(%d) = %zu, "
                 "expected 0 for an unknown dtype", bad_dt[i],
                 tnt_dtype_size(dt));
        const char *n = tnt_dtype_name(dt);
        TH_CHECK(n && n[0], "tnt_dtype_name(%d) is %s", bad_dt[i],
                 n ? "empty" : "NULL");
        for (int d = 0; n && d < TNT_DTYPE_COUNT; d++)
            TH_CHECK(!names[d] || strcmp(n, names[d]) != 0,
                     "unknown dtype %d is named like dtype %d ('%s')",
                     bad_dt[i], d, n);
    }
    for (int a = 0; a < TNT_DTYPE_COUNT; a++)
        for (int b = a + 1; b < TNT_DTYPE_COUNT; b++)
            TH_CHECK(!names[a] || !names[b] || strcmp(names[a], names[b]),
                     "dtypes %d and %d share the name '%s'", a, b,
                     names[a] ? names[a] : "?");

    const char *ops[TNT_OP_COUNT];
    for (int o = 0; o < TNT_OP_COUNT; o++) {
        ops[o] = tnt_op_name((tnt_op_t)o);
        TH_CHECK(ops[o] && ops[o][0], "tnt_op_name(%d) is %s", o,
                 ops[o] ? "empty" : "NULL");
    }
    for (int a = 0; a < TNT_OP_COUNT; a++)
        for (int b = a + 1; b < TNT_OP_COUNT; b++)
            TH_CHECK(!ops[a] || !ops[b] || strcmp(ops[a], ops[b]),
                     "ops %d and %d share the name '%s'", a, b,
                     ops[a] ? ops[a] : "?");
    static const int bad_op[] = {TNT_OP_COUNT, 77, -1};
    for (size_t i = 0; i < sizeof bad_op / sizeof bad_op[0]; i++) {
        const char *n = tnt_op_name((tnt_op_t)bad_op[i]);
        TH_CHECK(n && n[0], "tnt_op_name(%d) is %s", bad_op[i],
                 n ? "empty" : "NULL");
        for (int o = 0; n && o < TNT_OP_COUNT; o++)
            TH_CHECK(!ops[o] || strcmp(n, ops[o]) != 0,
                     "unknown op %d is named like op %d ('%s')", bad_op[i], o,
                     n);
    }
}

/* ---- parsers of environment knobs ---------------------------------------- */

static void test_parse_size(void)
{
    static const struct {
        const char *s;
        size_t want;
    } good[] = {
        {"0", 0},
        {"123", 123},
        {"32k", 32768},
        {"32K", 32768},
        {"1M", (size_t)1 << 20},
        {"4G", (size_t)4 << 30},
        {"64KiB", 65536},
        {"2MiB", (size_t)2 << 20},
        {"4096", 4096},
        {"17179869183G", (size_t)17179869183ULL << 30}, /* 2^64 - 2^30 */
        {"18446744073709551615", SIZE_MAX},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t v = 7;
        tnt_result_t rc = tnt__parse_size("TEST_KNOB", good[i].s, &v);
        TH_CHECK(rc == TNT_SUCCESS && v == good[i].want,
                 "tnt__parse_size('%s') = rc %d value %zu, expected %zu; "
                 "'%s'", good[i].s, rc, v, good[i].want, tnt_last_error());
    }
    static const char *const bad[] = {
        "", "abc", "-1", "1x", "k", "32kk", "1 k", "0x10", "1.5M", "+-3",
        " 4k", "4k ", "+4", "1e3",
        "99999999999999999999G", "99999999999999999999",
        "18446744073709551616", "17179869184G", "16777216T", "4Gx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 7;
        tnt_result_t rc = tnt__parse_size("TEST_KNOB", bad[i], &v);
        TH_CHECK(rc == TNT_ERR_CONFIG || rc == TNT_ERR_INVALID_ARG,
                 "tnt__parse_size('%s') accepted it (rc %d, value %zu)",
                 bad[i], rc, v);
        TH_CHECK(rc == TNT_SUCCESS || strstr(tnt_last_error(), "TEST_KNOB"),
                 "the error for '%s' does not name the knob: '%s'", bad[i],
                 tnt_last_error());
        TH_CHECK(rc == TNT_SUCCESS || v == 7,
                 "tnt__parse_size('%s') failed but wrote %zu", bad[i], v);
    }
    size_t v;
    TH_CHECK(tnt__parse_size("TEST_KNOB", NULL, &v) < 0,
             "tnt__parse_size(NULL) accepted");
}

static void test_parse_long_and_seconds(void)
{
    long l = 0;
    TH_CHECK(tnt__parse_long("K", "12", 0, 100, &l) == TNT_SUCCESS && l == 12,
             "parse_long('12') = %ld", l);
    TH_CHECK(tnt__parse_long("K", "-5", -10, 10, &l) == TNT_SUCCESS &&
                 l == -5,
             "parse_long('-5') = %ld", l);
    TH_CHECK(tnt__parse_long("K", "100", 0, 100, &l) == TNT_SUCCESS &&
                 l == 100,
             "parse_long('100') at the upper bound = %ld", l);
    static const char *const bad_long[] = {"", "101", "-1", "abc", "1x",
                                           "99999999999999999999999", "1.0",
                                           " 5", "5 ", "+5", "0x10", "1e1"};
    for (size_t i = 0; i < sizeof bad_long / sizeof bad_long[0]; i++) {
        l = 77;
        tnt_result_t rc = tnt__parse_long("MY_INT", bad_long[i], 0, 100, &l);
        TH_CHECK(rc < 0 && strstr(tnt_last_error(), "MY_INT"),
                 "tnt__parse_long('%s', [0, 100]) = rc %d value %ld; '%s'",
                 bad_long[i], rc, l, tnt_last_error());
    }

    double d = 0;
    TH_CHECK(tnt__parse_seconds("S", "1.5", 0, 100, &d) == TNT_SUCCESS &&
                 d == 1.5,
             "parse_seconds('1.5') = %g", d);
    TH_CHECK(tnt__parse_seconds("S", "0", 0, 100, &d) == TNT_SUCCESS &&
                 d == 0.0,
             "parse_seconds('0') = %g", d);
    TH_CHECK(tnt__parse_seconds("S", "100", 0, 100, &d) == TNT_SUCCESS &&
                 d == 100.0,
             "parse_seconds('100') at the upper bound = %g", d);
    static const char *const bad_sec[] = {"", "abc", "-1", "inf", "nan",
                                          "1s", "1e999", "-0.5", "100.5",
                                          "1e1", "0x10", " 5", "5 ", "+5",
                                          ".5", "5."};
    for (size_t i = 0; i < sizeof bad_sec / sizeof bad_sec[0]; i++) {
        tnt_result_t rc = tnt__parse_seconds("MY_SECS", bad_sec[i], 0, 100,
                                             &d);
        TH_CHECK(rc < 0 && strstr(tnt_last_error(), "MY_SECS"),
                 "tnt__parse_seconds('%s') = rc %d; '%s'", bad_sec[i], rc,
                 tnt_last_error());
    }
}

/* ---- the harness itself ------------------------------------------------------ */

static int crash_rank(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)comm;
    (void)p;
    (void)arg;
    th_report_expect(rep, "before", 1, 0, "-");
    if (rank == 1)
        raise(SIGABRT); /* not SEGV: ASan catches that one */
    th_report_expect(rep, "after", 1, 0, "-");
    return 0;
}

static int hang_rank(tnt_comm_t comm, int rank, int p, void *arg,
                     th_report_t *rep)
{
    (void)comm;
    (void)p;
    (void)arg;
    (void)rep;
    if (rank == 0)
        for (;;)
            pause();
    return 0;
}

static int wrong_rank(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)comm;
    (void)p;
    (void)arg;
    uint32_t v = rank == 2 ? 1u : 0u;
    /* Rank 2 reports a wrong element; rank 1 has a different result;
     * rank 0 reports a case nobody else does. */
    th_report_check(rep, "elements", TNT_SUCCESS, rank == 2 ? 5 : 0, 17,
                    NULL, 0);
    th_report_check(rep, "hash", TNT_SUCCESS, 0, 0, &v, sizeof v);
    if (rank == 0)
        th_report_expect(rep, "only_rank0", 1, 0, "-");
    return 0;
}

static int good_rank(tnt_comm_t comm, int rank, int p, void *arg,
                     th_report_t *rep)
{
    (void)arg;
    float x[4] = {1, 2, 3, (float)rank};
    th_report_expect(rep, "identity", comm != NULL, 0, "rank %d of %d", rank,
                     p);
    /* Only rank-independent data goes into the hash. */
    th_report_check(rep, "same_hash", TNT_SUCCESS, 0, 0, x, 3 * sizeof x[0]);
    return 0;
}

static void test_harness_detects_failures(void)
{
    const char *env[] = {NULL};
    th_result_t res;

    th_job_t crash = {"self-test crash", 3, env, crash_rank, NULL, 30, 1, 2};
    th_run_job(&crash, &res);
    TH_CHECK(res.failures > 0 && res.ranks[1].signo == SIGABRT &&
                 strstr(res.first_problem, "signal"),
             "a rank killed by SIGABRT was not reported (failures %d, "
             "signal %d, '%s')", res.failures, res.ranks[1].signo,
             res.first_problem);
    th_result_free(&res);

    double t0 = th_now();
    th_job_t hang = {"self-test hang", 2, env, hang_rank, NULL, 1.0, 1, 2};
    th_run_job(&hang, &res);
    double dt = th_now() - t0;
    TH_CHECK(res.timed_out && res.failures > 0 &&
                 dt < 10.0 * th_timeout_mult(),
             "a hanging rank was not killed at the deadline (timed_out %d, "
             "%.1f s)", res.timed_out, dt);
    TH_CHECK(res.ranks[0].reaped && res.ranks[1].reaped,
             "ranks left unreaped after a timeout");
    th_result_free(&res);

    th_job_t wrong = {"self-test wrong", 3, env, wrong_rank, NULL, 30, 1, 2};
    th_run_job(&wrong, &res);
    /* elements on rank 2, hash of rank 2 vs 0, only_rank0 missing on 1
     * and 2, and rank 2's exit status is consistent with its failure. */
    TH_CHECK(res.failures >= 4, "the harness found only %d of the 4 planted "
             "problems ('%s')", res.failures, res.first_problem);
    const th_case_t *c = th_find_case(&res, 2, "elements");
    TH_CHECK(c && c->nwrong == 5 && c->first_wrong == 17 && !c->ok,
             "the report of wrong elements did not arrive intact");
    th_result_free(&res);

    th_job_t good = {"self-test good", 4, env, good_rank, NULL, 60, 0, 0};
    int f = th_run_job(&good, &res);
    TH_CHECK(f == 0 && res.failures == 0, "a clean job reported %d problems: "
             "'%s'", res.failures, res.first_problem);
    for (int r = 0; r < 4; r++)
        TH_CHECK(th_find_case(&res, r, "same_hash") &&
                     res.ranks[r].finished && res.ranks[r].exited &&
                     res.ranks[r].exit_status == 0,
                 "rank %d of a clean job did not report and exit 0", r);
    th_result_free(&res);
}

/* ---- datagen sanity: the reference the collective tests rely on ---------- */

static void test_datagen_reference(void)
{
    /* Expected values are the op over ranks of the generated values. */
    for (int d = 0; d < TNT_DTYPE_COUNT; d++) {
        for (int o = 0; o < TNT_OP_COUNT; o++) {
            tnt_dtype_t dt = (tnt_dtype_t)d;
            tnt_op_t op = (tnt_op_t)o;
            if (op == TNT_AVG || op == TNT_SUM || op == TNT_PROD)
                continue; /* wrapping arithmetic: see datagen.c */
            for (size_t i = 0; i < 50; i++) {
                double want = tnt_gen_value(9, 0, i, dt, op);
                for (int r = 1; r < 5; r++) {
                    double v = tnt_gen_value(9, r, i, dt, op);
                    if (op == TNT_MIN ? v < want : v > want)
                        want = v;
                }
                double e = tnt_gen_expected(9, 5, i, dt, op);
                TH_CHECK(e == want, "datagen expected %s %s [%zu] = %g, "
                         "min/max of the inputs is %g", tnt_dtype_name(dt),
                         tnt_op_name(op), i, e, want);
            }
        }
    }
    float buf[100];
    tnt_gen_poison(buf, 100, TNT_F32);
    size_t first = 0;
    TH_CHECK(tnt_gen_check_allreduce(buf, 0, 100, TNT_F32, TNT_SUM, 3, 4,
                                     &first) == 100 && first == 0,
             "datagen accepts poisoned data as a correct result");
}

/* ---- tnt__sock_heartbeat ---------------------------------------------------- */

static int sockopt(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof(v);
    return getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

static void test_sock_heartbeat(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CU_ASSERT_FATAL(fd >= 0);
    tnt__sock_heartbeat(fd, 0); /* off: the socket is left as it is */
    CU_ASSERT_EQUAL(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
    /* 10 s: idle 5 s, then 3 probes 1 s apart; user timeout 10000 ms. */
    tnt__sock_heartbeat(fd, 10);
    CU_ASSERT(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE) != 0);
    CU_ASSERT_EQUAL(sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE), 5);
    CU_ASSERT_EQUAL(sockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL), 1);
    CU_ASSERT_EQUAL(sockopt(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
    CU_ASSERT_EQUAL(sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 10000);
    /* Below 2 s the probes still take 2 s; the user timeout does not. */
    tnt__sock_heartbeat(fd, 0.5);
    CU_ASSERT_EQUAL(sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE), 1);
    CU_ASSERT_EQUAL(sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 500);
    close(fd);
}

/* th_garbage_closed: a peer that keeps the connection is reported as
 * keeping it (after the timeout), one that ends it (end of file) or is
 * gone before the bytes went out as closing it; the bytes arrive. */
static void test_harness_garbage_closed(void)
{
    int sv[2];
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    double t0 = th_now();
    CU_ASSERT_EQUAL(th_garbage_closed(sv[0], 100, 0.3), 0);
    CU_ASSERT(th_now() - t0 >= 0.3);
    unsigned char b[200];
    CU_ASSERT_EQUAL(recv(sv[1], b, sizeof b, MSG_DONTWAIT), 100);
    shutdown(sv[1], SHUT_WR); /* the peer's end of file */
    CU_ASSERT_EQUAL(th_garbage_closed(sv[0], 100, 5.0), 1);
    close(sv[1]);
    CU_ASSERT_EQUAL(th_garbage_closed(sv[0], 100, 5.0), 1); /* EPIPE */
    close(sv[0]);
}

/* The set of live handles (util/handles.h), against a plain array: many
 * handles added and removed in a random order, with neighbours that
 * collide in the table (removal shifts runs back), a thread's memory of
 * its last live handle dropped by every removal, and the table freed
 * once empty (ASan's leak check). */
static void test_handles(void)
{
    enum { H = 600 };
    static char obj[H][16];
    static int in[H];
    tnt_handles_t s = TNT_HANDLES_INIT;
    tnt_handle_seen_t seen = {0};
    th_rng_t rng = {42};
    int bad = 0;
    for (int round = 0; round < 20000; round++) {
        int i = (int)th_rnd_below(&rng, H);
        switch (th_rnd_below(&rng, 3)) {
        case 0:
            if (!in[i]) {
                bad += tnt__handles_add(&s, obj[i]) != 0;
                in[i] = 1;
            }
            break;
        case 1:
            bad += tnt__handles_remove(&s, obj[i]) != in[i];
            in[i] = 0;
            break;
        default:
            bad += tnt__handles_live(&s, obj[i], &seen) != in[i];
            break;
        }
        if (round % 1000 == 0)
            for (int j = 0; j < H; j++)
                bad += tnt__handles_live(&s, obj[j], &seen) != in[j];
    }
    TH_CHECK(bad == 0, "%d disagreements with the reference", bad);
    /* The remembered handle is forgotten when it leaves. */
    CU_ASSERT_EQUAL(tnt__handles_add(&s, obj[0]) == 0 || in[0], 1);
    in[0] = 1;
    CU_ASSERT_TRUE(tnt__handles_live(&s, obj[0], &seen));
    CU_ASSERT_TRUE(tnt__handles_remove(&s, obj[0]));
    CU_ASSERT_FALSE(tnt__handles_live(&s, obj[0], &seen));
    CU_ASSERT_FALSE(tnt__handles_remove(&s, obj[0]));
    in[0] = 0;
    CU_ASSERT_FALSE(tnt__handles_live(&s, NULL, &seen));
    /* A reserved place, given back or used. */
    CU_ASSERT_EQUAL(tnt__handles_reserve(&s), 0);
    tnt__handles_cancel(&s);
    CU_ASSERT_EQUAL(tnt__handles_reserve(&s), 0);
    tnt__handles_commit(&s, obj[0]);
    CU_ASSERT_TRUE(tnt__handles_live(&s, obj[0], &seen));
    in[0] = 1;
    for (int j = 0; j < H; j++)
        if (in[j])
            CU_ASSERT_TRUE(tnt__handles_remove(&s, obj[j]));
    CU_ASSERT_EQUAL(s.n, 0);
    CU_ASSERT_PTR_NULL(s.slots);
}

static const th_test_def_t k_tests[] = {
    {"util", "handles", test_handles},
    {"util", "micro_batch_all", test_micro_batch_all},
    {"util", "micro_batch_large", test_micro_batch_large},
    {"util", "micro_batch_bad", test_micro_batch_bad},
    {"util", "dtype_and_op_names", test_dtype_and_op_names},
    {"util", "parse_size", test_parse_size},
    {"util", "list", test_list},
    {"util", "parse_long_and_seconds", test_parse_long_and_seconds},
    {"util", "sock_heartbeat", test_sock_heartbeat},
    {"util", "datagen_reference", test_datagen_reference},
    {"util", "harness_detects_failures", test_harness_detects_failures},
    {"util", "harness_garbage_closed", test_harness_garbage_closed},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
