/*
 * Bad input must give a clear error, never a crash or a hang. This suite
 * feeds the public API what callers get wrong: NULL handles and pointers,
 * counts whose byte size overflows, unknown dtypes and ops, roots out of
 * range, freed and aborted communicators, malformed launcher environments,
 * an unreachable root, a wrong job key, the rooted and all-to-all calls'
 * own arguments (roots, alltoallv's arrays), and ranks that call mismatched
 * collectives. Checks on argument values run in this process on a world
 * of one; anything that initialises from a crafted environment or needs
 * several ranks runs in forked children under the harness's deadline.
 *
 * Where the API leaves a choice open (a NULL communicator may be reported
 * as TNT_ERR_INVALID_COMM or TNT_ERR_INVALID_ARG), either is accepted;
 * success or a crash never is.
 *
 * Usage: test_bad_input [suite [test]] runs one suite or one test.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datagen.h"
#include "harness.h"

#define EXPECT_RC(call, want)                                               \
    expect_rc_((call), (want), (want), #call, __FILE__, __LINE__)
#define EXPECT_RC2(call, want1, want2)                                      \
    expect_rc_((call), (want1), (want2), #call, __FILE__, __LINE__)

static void expect_rc_(tnt_result_t rc, tnt_result_t a, tnt_result_t b,
                       const char *what, const char *file, int line)
{
    int ok = rc == a || rc == b;
    if (a == b)
        th_assert_fmt(ok, file, line, "%s returned %d (%s), expected %d "
                      "(%s); last error: '%s'", what, rc, tnt_strerror(rc),
                      a, tnt_strerror(a), tnt_last_error());
    else
        th_assert_fmt(ok, file, line, "%s returned %d (%s), expected %d "
                      "(%s) or %d (%s); last error: '%s'", what, rc,
                      tnt_strerror(rc), a, tnt_strerror(a), b,
                      tnt_strerror(b), tnt_last_error());
    /* An error must come with a message that says what went wrong. */
    if (ok && rc < 0)
        th_assert_fmt(tnt_last_error() && tnt_last_error()[0], file, line,
                      "%s failed with %d but tnt_last_error() is empty",
                      what, rc);
}

static const char *const k_launcher_vars[] = {"TNT_RANK", "TNT_SIZE",
                                              "TNT_ROOT_ADDR", "TNT_JOB_KEY"};

static void unset_launcher_env(void)
{
    for (size_t i = 0; i < 4; i++)
        unsetenv(k_launcher_vars[i]);
}

/* A world of one from an empty launcher environment. */
static tnt_comm_t world_of_one(void)
{
    unset_launcher_env();
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    TH_CHECK(rc == TNT_SUCCESS && comm != NULL,
             "tnt_comm_init_from_env without launcher environment: %d "
             "(%s) '%s'", rc, tnt_strerror(rc), tnt_last_error());
    return rc == TNT_SUCCESS ? comm : NULL;
}

/* ---- single process ------------------------------------------------------- */

static void test_strerror(void)
{
#define CHECK_TEXT_(name, value, text)                                      \
    {                                                                       \
        const char *s = tnt_strerror(name);                                 \
        TH_CHECK(s && strcmp(s, text) == 0,                                 \
                 "tnt_strerror(%s) = '%s', expected '%s'", #name,           \
                 s ? s : "(null)", text);                                   \
    }
    TNT_RESULT_MAP(CHECK_TEXT_)
#undef CHECK_TEXT_
    static const int unknown[] = {3, 4, 100, -15, -100, 12345, -99999,
                                  INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = tnt_strerror((tnt_result_t)unknown[i]);
        TH_CHECK(s && s[0], "tnt_strerror(%d) is %s", unknown[i],
                 s ? "empty" : "NULL");
        TH_CHECK(!s || strcmp(s, "success") != 0,
                 "tnt_strerror(%d) says 'success'", unknown[i]);
    }
    int ma = -1, mi = -1, pa = -1;
    tnt_get_version(&ma, &mi, &pa);
    TH_CHECK(ma == TNT_VERSION_MAJOR && mi == TNT_VERSION_MINOR &&
                 pa == TNT_VERSION_PATCH,
             "tnt_get_version gave %d.%d.%d, header says %d.%d.%d", ma, mi,
             pa, TNT_VERSION_MAJOR, TNT_VERSION_MINOR, TNT_VERSION_PATCH);
}

static void test_no_launcher_env(void)
{
    tnt_comm_t comm = world_of_one();
    if (!comm)
        return;
    int r = -1, n = -1, master = -1, is_master = -1;
    EXPECT_RC(tnt_comm_rank(comm, &r), TNT_SUCCESS);
    EXPECT_RC(tnt_comm_size(comm, &n), TNT_SUCCESS);
    EXPECT_RC(tnt_comm_master_rank(comm, &master), TNT_SUCCESS);
    EXPECT_RC(tnt_comm_is_master(comm, &is_master), TNT_SUCCESS);
    TH_CHECK(r == 0 && n == 1 && master == 0 && is_master == 1,
             "world of one: rank %d size %d master %d is_master %d", r, n,
             master, is_master);

    /* Every collective of one rank is a copy (or nothing). */
    enum { N = 1000 };
    float send[N], recv[N], want[N];
    for (int i = 0; i < N; i++)
        send[i] = want[i] = (float)(i % 97) * 0.37f - 11.0f;
    for (int op = 0; op < TNT_OP_COUNT; op++) {
        memset(recv, 0xff, sizeof recv);
        EXPECT_RC(tnt_allreduce(comm, send, recv, N, TNT_F32, (tnt_op_t)op),
                  TNT_SUCCESS);
        TH_CHECK(memcmp(recv, want, sizeof recv) == 0,
                 "allreduce op %s of one rank is not a copy of the input",
                 tnt_op_name((tnt_op_t)op));
    }
    int32_t iv[5] = {-7, -1, 0, 3, 2147483647}, io[5];
    int32_t iw[5] = {-7, -1, 0, 3, 2147483647};
    EXPECT_RC(tnt_allreduce(comm, iv, io, 5, TNT_I32, TNT_AVG), TNT_SUCCESS);
    TH_CHECK(memcmp(io, iw, sizeof io) == 0, "i32 avg of one rank changed "
             "the values");
    memcpy(recv, send, sizeof recv);
    EXPECT_RC(tnt_allreduce(comm, TNT_IN_PLACE, recv, N, TNT_F32, TNT_SUM),
              TNT_SUCCESS);
    TH_CHECK(memcmp(recv, want, sizeof recv) == 0,
             "in-place allreduce of one rank changed the data");
    memcpy(recv, send, sizeof recv);
    EXPECT_RC(tnt_broadcast(comm, recv, N, TNT_F32, 0), TNT_SUCCESS);
    TH_CHECK(memcmp(recv, want, sizeof recv) == 0,
             "broadcast of one rank changed the data");
    EXPECT_RC(tnt_barrier(comm), TNT_SUCCESS);
    memset(recv, 0, sizeof recv);
    EXPECT_RC(tnt_allgather(comm, send, recv, N, TNT_F32), TNT_SUCCESS);
    TH_CHECK(memcmp(recv, want, sizeof recv) == 0,
             "allgather of one rank is not a copy");
    memset(recv, 0, sizeof recv);
    EXPECT_RC(tnt_reduce_scatter(comm, send, recv, N, TNT_F32, TNT_MAX),
              TNT_SUCCESS);
    TH_CHECK(memcmp(recv, want, sizeof recv) == 0,
             "reduce_scatter of one rank is not a copy");
    tnt_request_t req = NULL;
    memset(recv, 0, sizeof recv);
    EXPECT_RC(tnt_iallreduce(comm, send, recv, N, TNT_F32, TNT_SUM, &req),
              TNT_SUCCESS);
    if (req) {
        EXPECT_RC(tnt_wait(req), TNT_SUCCESS);
        EXPECT_RC(tnt_test(req), TNT_SUCCESS);
        EXPECT_RC(tnt_request_free(req), TNT_SUCCESS);
    }
    TH_CHECK(memcmp(recv, want, sizeof recv) == 0,
             "iallreduce of one rank is not a copy");
    EXPECT_RC(tnt_comm_free(comm), TNT_SUCCESS);
}

static void test_null_arguments(void)
{
    EXPECT_RC(tnt_comm_init_from_env(NULL), TNT_ERR_INVALID_ARG);
    tnt_config_t cfg = TNT_CONFIG_INIT;
    cfg.rank = 0;
    cfg.nranks = 1;
    tnt_comm_t c = NULL;
    EXPECT_RC(tnt_comm_init(NULL, &c), TNT_ERR_INVALID_ARG);
    EXPECT_RC(tnt_comm_init(&cfg, NULL), TNT_ERR_INVALID_ARG);

    int v;
    tnt_comm_t nul = NULL;
    const tnt_result_t IC = TNT_ERR_INVALID_COMM, IA = TNT_ERR_INVALID_ARG;
    EXPECT_RC2(tnt_comm_rank(nul, &v), IC, IA);
    EXPECT_RC2(tnt_comm_size(nul, &v), IC, IA);
    EXPECT_RC2(tnt_comm_master_rank(nul, &v), IC, IA);
    EXPECT_RC2(tnt_comm_is_master(nul, &v), IC, IA);
    float buf[16] = {0}, out[16];
    tnt_request_t req = NULL;
    EXPECT_RC2(tnt_allreduce(nul, buf, out, 16, TNT_F32, TNT_SUM), IC, IA);
    EXPECT_RC2(tnt_iallreduce(nul, buf, out, 16, TNT_F32, TNT_SUM, &req), IC,
               IA);
    EXPECT_RC2(tnt_broadcast(nul, buf, 16, TNT_F32, 0), IC, IA);
    EXPECT_RC2(tnt_ibroadcast(nul, buf, 16, TNT_F32, 0, &req), IC, IA);
    EXPECT_RC2(tnt_barrier(nul), IC, IA);
    EXPECT_RC2(tnt_ibarrier(nul, &req), IC, IA);
    EXPECT_RC2(tnt_allgather(nul, buf, out, 1, TNT_F32), IC, IA);
    EXPECT_RC2(tnt_iallgather(nul, buf, out, 1, TNT_F32, &req), IC, IA);
    EXPECT_RC2(tnt_reduce_scatter(nul, buf, out, 1, TNT_F32, TNT_SUM), IC,
               IA);
    EXPECT_RC2(tnt_ireduce_scatter(nul, buf, out, 1, TNT_F32, TNT_SUM, &req),
               IC, IA);
    void *mem = NULL;
    EXPECT_RC2(tnt_mem_alloc(nul, 64, &mem), IC, IA);
    EXPECT_RC2(tnt_mem_free(nul, buf), IC, IA);

    EXPECT_RC(tnt_test(NULL), TNT_ERR_INVALID_ARG);
    EXPECT_RC(tnt_wait(NULL), TNT_ERR_INVALID_ARG);
    EXPECT_RC(tnt_wait_timeout(NULL, 1.0), TNT_ERR_INVALID_ARG);
    /* Like free(NULL), releasing nothing may succeed; it must not crash. */
    EXPECT_RC2(tnt_request_free(NULL), TNT_SUCCESS, TNT_ERR_INVALID_ARG);

    tnt_comm_t comm = world_of_one();
    if (!comm)
        return;
    EXPECT_RC(tnt_comm_rank(comm, NULL), IA);
    EXPECT_RC(tnt_comm_size(comm, NULL), IA);
    EXPECT_RC(tnt_comm_master_rank(comm, NULL), IA);
    EXPECT_RC(tnt_comm_is_master(comm, NULL), IA);
    EXPECT_RC(tnt_allreduce(comm, NULL, out, 16, TNT_F32, TNT_SUM), IA);
    EXPECT_RC(tnt_allreduce(comm, buf, NULL, 16, TNT_F32, TNT_SUM), IA);
    EXPECT_RC(tnt_allreduce(comm, TNT_IN_PLACE, NULL, 16, TNT_F32, TNT_SUM),
              IA);
    EXPECT_RC(tnt_broadcast(comm, NULL, 16, TNT_F32, 0), IA);
    EXPECT_RC(tnt_allgather(comm, NULL, out, 16, TNT_F32), IA);
    EXPECT_RC(tnt_allgather(comm, buf, NULL, 16, TNT_F32), IA);
    EXPECT_RC(tnt_reduce_scatter(comm, NULL, out, 16, TNT_F32, TNT_SUM), IA);
    EXPECT_RC(tnt_reduce_scatter(comm, buf, NULL, 16, TNT_F32, TNT_SUM), IA);
    /* A NULL request pointer: nowhere to put the handle. */
    EXPECT_RC(tnt_iallreduce(comm, buf, out, 16, TNT_F32, TNT_SUM, NULL), IA);
    EXPECT_RC(tnt_ibroadcast(comm, buf, 16, TNT_F32, 0, NULL), IA);
    EXPECT_RC(tnt_ibarrier(comm, NULL), IA);
    EXPECT_RC(tnt_iallgather(comm, buf, out, 16, TNT_F32, NULL), IA);
    EXPECT_RC(tnt_ireduce_scatter(comm, buf, out, 16, TNT_F32, TNT_SUM, NULL),
              IA);

    /* Shared allocations: a NULL output, a size beyond the address
     * space, freeing what tnt_mem_alloc did not give (or gave and took
     * back already). Zero bytes is an allocation like any other; freeing
     * NULL is nothing, as free(NULL). */
    EXPECT_RC(tnt_mem_alloc(comm, 64, NULL), IA);
    EXPECT_RC(tnt_mem_alloc(comm, SIZE_MAX, &mem), IA);
    TH_CHECK(mem == NULL, "tnt_mem_alloc set *ptr on failure");
    EXPECT_RC(tnt_mem_free(comm, buf), IA);
    EXPECT_RC(tnt_mem_free(comm, NULL), TNT_SUCCESS);
    EXPECT_RC(tnt_mem_alloc(comm, 0, &mem), TNT_SUCCESS);
    TH_CHECK(mem != NULL, "tnt_mem_alloc of 0 bytes gave NULL");
    EXPECT_RC(tnt_mem_free(comm, mem), TNT_SUCCESS);
    EXPECT_RC(tnt_mem_free(comm, mem), IA);
    float *sh = NULL;
    EXPECT_RC(tnt_mem_alloc(comm, 16 * sizeof(float), (void **)&sh),
              TNT_SUCCESS);
    if (sh) {
        for (int i = 0; i < 16; i++)
            sh[i] = (float)i;
        EXPECT_RC(tnt_allreduce(comm, TNT_IN_PLACE, sh, 16, TNT_F32,
                                TNT_SUM), TNT_SUCCESS);
        TH_CHECK(sh[15] == 15.0f, "allreduce in a shared allocation of one "
                 "rank gave %g", (double)sh[15]);
        /* tnt_mem_free of an address inside, not the start: refused. */
        EXPECT_RC(tnt_mem_free(comm, sh + 1), IA);
        EXPECT_RC(tnt_mem_free(comm, sh), TNT_SUCCESS);
    }

    /* The errors above left the communicator healthy. */
    for (int i = 0; i < 16; i++)
        buf[i] = (float)i;
    EXPECT_RC(tnt_allreduce(comm, buf, out, 16, TNT_F32, TNT_SUM),
              TNT_SUCCESS);
    TH_CHECK(memcmp(buf, out, sizeof out) == 0,
             "allreduce after rejected calls gave wrong data");
    EXPECT_RC(tnt_comm_free(comm), TNT_SUCCESS);
}

static void test_bad_values(void)
{
    tnt_comm_t comm = world_of_one();
    if (!comm)
        return;
    const tnt_result_t IA = TNT_ERR_INVALID_ARG;
    float buf[16] = {0}, out[16] = {0};
    tnt_request_t req = NULL;

    /* Counts whose size in bytes does not fit in size_t. */
    static const struct {
        size_t count;
        tnt_dtype_t dt;
    } over[] = {{SIZE_MAX, TNT_F32},
                {SIZE_MAX / 2, TNT_F32},
                {SIZE_MAX / 4 + 1, TNT_F32},
                {SIZE_MAX / 8 + 1, TNT_F64},
                {SIZE_MAX / 2 + 1, TNT_F16},
                {SIZE_MAX / 2 + 1, TNT_BF16},
                {SIZE_MAX / 8 + 1, TNT_U64}};
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        size_t n = over[i].count;
        tnt_dtype_t dt = over[i].dt;
        EXPECT_RC(tnt_allreduce(comm, buf, out, n, dt, TNT_SUM), IA);
        EXPECT_RC(tnt_allreduce(comm, TNT_IN_PLACE, out, n, dt, TNT_SUM), IA);
        EXPECT_RC(tnt_iallreduce(comm, buf, out, n, dt, TNT_SUM, &req), IA);
        EXPECT_RC(tnt_broadcast(comm, buf, n, dt, 0), IA);
        EXPECT_RC(tnt_ibroadcast(comm, buf, n, dt, 0, &req), IA);
        EXPECT_RC(tnt_allgather(comm, buf, out, n, dt), IA);
        EXPECT_RC(tnt_reduce_scatter(comm, buf, out, n, dt, TNT_SUM), IA);
    }

    /* Unknown dtypes and ops. */
    static const int bad_dt[] = {77, TNT_DTYPE_COUNT, -1, 1 << 20};
    for (size_t i = 0; i < sizeof bad_dt / sizeof bad_dt[0]; i++) {
        tnt_dtype_t dt = (tnt_dtype_t)bad_dt[i];
        EXPECT_RC(tnt_allreduce(comm, buf, out, 4, dt, TNT_SUM), IA);
        EXPECT_RC(tnt_iallreduce(comm, buf, out, 4, dt, TNT_SUM, &req), IA);
        EXPECT_RC(tnt_broadcast(comm, buf, 4, dt, 0), IA);
        EXPECT_RC(tnt_allgather(comm, buf, out, 4, dt), IA);
        EXPECT_RC(tnt_reduce_scatter(comm, buf, out, 4, dt, TNT_SUM), IA);
        /* Even with nothing to move, the dtype is still wrong. */
        EXPECT_RC(tnt_allreduce(comm, buf, out, 0, dt, TNT_SUM), IA);
    }
    static const int bad_op[] = {77, TNT_OP_COUNT, -1};
    for (size_t i = 0; i < sizeof bad_op / sizeof bad_op[0]; i++) {
        tnt_op_t op = (tnt_op_t)bad_op[i];
        EXPECT_RC(tnt_allreduce(comm, buf, out, 4, TNT_F32, op), IA);
        EXPECT_RC(tnt_iallreduce(comm, buf, out, 4, TNT_F32, op, &req), IA);
        EXPECT_RC(tnt_reduce_scatter(comm, buf, out, 4, TNT_F32, op), IA);
        EXPECT_RC(tnt_allreduce(comm, buf, out, 0, TNT_F32, op), IA);
    }

    /* Roots outside [0, size). */
    static const int bad_root[] = {-1, 1, 2, 1000, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_root / sizeof bad_root[0]; i++) {
        EXPECT_RC(tnt_broadcast(comm, buf, 4, TNT_F32, bad_root[i]), IA);
        EXPECT_RC(tnt_ibroadcast(comm, buf, 4, TNT_F32, bad_root[i], &req),
                  IA);
    }

    /* A message names the call the user made: "tnt_broadcast:" after
     * tnt_broadcast, never its nonblocking twin. */
    static const char *const called[] = {
        "tnt_allreduce:", "tnt_iallreduce:", "tnt_broadcast:",
        "tnt_ibroadcast:", "tnt_allgather:", "tnt_iallgather:",
        "tnt_reduce_scatter:", "tnt_ireduce_scatter:", "tnt_barrier:",
        "tnt_ibarrier:"};
    for (size_t i = 0; i < sizeof called / sizeof called[0]; i++) {
        tnt_dtype_t bad = (tnt_dtype_t)77;
        switch (i) {
        case 0: tnt_allreduce(comm, buf, out, 4, bad, TNT_SUM); break;
        case 1: tnt_iallreduce(comm, buf, out, 4, bad, TNT_SUM, &req); break;
        case 2: tnt_broadcast(comm, buf, 4, TNT_F32, 5); break;
        case 3: tnt_ibroadcast(comm, buf, 4, TNT_F32, 5, &req); break;
        case 4: tnt_allgather(comm, buf, out, 4, bad); break;
        case 5: tnt_iallgather(comm, buf, out, 4, bad, &req); break;
        case 6: tnt_reduce_scatter(comm, buf, out, 4, bad, TNT_SUM); break;
        case 7:
            tnt_ireduce_scatter(comm, buf, out, 4, bad, TNT_SUM, &req);
            break;
        case 8: tnt_barrier(NULL); break;
        default: tnt_ibarrier(NULL, &req); break;
        }
        const char *msg = tnt_last_error();
        const char *at = strstr(msg, called[i]);
        TH_CHECK(at && (at == msg || at[-1] == ' '), "after %.*s the "
                 "message does not name it: '%s'",
                 (int)strlen(called[i]) - 1, called[i], msg);
    }

    /* Still healthy. */
    for (int i = 0; i < 16; i++)
        buf[i] = (float)(3 * i);
    EXPECT_RC(tnt_allreduce(comm, buf, out, 16, TNT_F32, TNT_MAX),
              TNT_SUCCESS);
    TH_CHECK(memcmp(buf, out, sizeof out) == 0,
             "allreduce after rejected calls gave wrong data");
    EXPECT_RC(tnt_comm_free(comm), TNT_SUCCESS);
}

/* The rooted and all-to-all calls (reduce, gather, scatter, alltoall,
 * alltoallv) on a world of one: every bad argument a clear error naming
 * the call, and the calls still right afterwards. */
static int msg_has(const char *a, const char *b)
{
    const char *m = tnt_last_error();
    return strstr(m, a) && (!b || strstr(m, b));
}

static void test_rooted_bad_values(void)
{
    tnt_comm_t comm = world_of_one();
    if (!comm)
        return;
    const tnt_result_t IA = TNT_ERR_INVALID_ARG;
    float buf[16] = {0}, out[16] = {0};
    tnt_request_t req = NULL;
    size_t one[1] = {4}, zero[1] = {0}, huge[1] = {SIZE_MAX};

    /* NULL communicator. */
    EXPECT_RC2(tnt_reduce(NULL, buf, out, 4, TNT_F32, TNT_SUM, 0),
               TNT_ERR_INVALID_COMM, IA);
    EXPECT_RC2(tnt_gather(NULL, buf, out, 4, TNT_F32, 0),
               TNT_ERR_INVALID_COMM, IA);
    EXPECT_RC2(tnt_scatter(NULL, buf, out, 4, TNT_F32, 0),
               TNT_ERR_INVALID_COMM, IA);
    EXPECT_RC2(tnt_alltoall(NULL, buf, out, 4, TNT_F32),
               TNT_ERR_INVALID_COMM, IA);
    EXPECT_RC2(tnt_alltoallv(NULL, buf, one, zero, out, one, zero, TNT_F32),
               TNT_ERR_INVALID_COMM, IA);

    /* Counts whose bytes (times the blocks) overflow size_t. */
    static const size_t over[] = {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 4 + 1};
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        size_t n = over[i];
        EXPECT_RC(tnt_reduce(comm, buf, out, n, TNT_F32, TNT_SUM, 0), IA);
        TH_CHECK(msg_has("tnt_reduce:", "overflows"), "'%s'",
                 tnt_last_error());
        EXPECT_RC(tnt_ireduce(comm, buf, out, n, TNT_F32, TNT_SUM, 0, &req),
                  IA);
        EXPECT_RC(tnt_gather(comm, buf, out, n, TNT_F32, 0), IA);
        EXPECT_RC(tnt_scatter(comm, buf, out, n, TNT_F32, 0), IA);
        EXPECT_RC(tnt_alltoall(comm, buf, out, n, TNT_F32), IA);
        TH_CHECK(msg_has("tnt_alltoall:", "overflows"), "'%s'",
                 tnt_last_error());
    }
    /* An alltoallv region past the address space. */
    EXPECT_RC(tnt_alltoallv(comm, buf, one, huge, out, one, zero, TNT_F32),
              IA);
    TH_CHECK(msg_has("sdispls[0]", "overflows"), "'%s'", tnt_last_error());
    EXPECT_RC(tnt_alltoallv(comm, buf, huge, zero, out, huge, zero,
                            TNT_F32), IA);
    TH_CHECK(msg_has("sendcounts[0]", "overflows"), "'%s'",
             tnt_last_error());

    /* NULL where data moves. */
    EXPECT_RC(tnt_reduce(comm, NULL, out, 4, TNT_F32, TNT_SUM, 0), IA);
    TH_CHECK(msg_has("send buffer", "NULL"), "'%s'", tnt_last_error());
    EXPECT_RC(tnt_reduce(comm, buf, NULL, 4, TNT_F32, TNT_SUM, 0), IA);
    TH_CHECK(msg_has("root's receive buffer", "NULL"), "'%s'",
             tnt_last_error());
    EXPECT_RC(tnt_reduce(comm, TNT_IN_PLACE, NULL, 4, TNT_F32, TNT_SUM, 0),
              IA);
    EXPECT_RC(tnt_gather(comm, buf, NULL, 4, TNT_F32, 0), IA);
    EXPECT_RC(tnt_gather(comm, NULL, out, 4, TNT_F32, 0), IA);
    EXPECT_RC(tnt_scatter(comm, NULL, out, 4, TNT_F32, 0), IA);
    TH_CHECK(msg_has("root's send buffer", "NULL"), "'%s'",
             tnt_last_error());
    EXPECT_RC(tnt_scatter(comm, buf, NULL, 4, TNT_F32, 0), IA);
    EXPECT_RC(tnt_alltoall(comm, NULL, out, 4, TNT_F32), IA);
    EXPECT_RC(tnt_alltoall(comm, buf, NULL, 4, TNT_F32), IA);
    EXPECT_RC(tnt_alltoallv(comm, buf, NULL, zero, out, one, zero, TNT_F32),
              IA);
    TH_CHECK(msg_has("sendcounts is NULL", NULL), "'%s'", tnt_last_error());
    EXPECT_RC(tnt_alltoallv(comm, buf, one, zero, out, one, NULL, TNT_F32),
              IA);
    TH_CHECK(msg_has("rdispls is NULL", NULL), "'%s'", tnt_last_error());
    EXPECT_RC(tnt_alltoallv(comm, NULL, one, zero, out, one, zero, TNT_F32),
              IA);
    /* Nothing to move: NULL buffers are fine. */
    EXPECT_RC(tnt_reduce(comm, NULL, NULL, 0, TNT_F32, TNT_SUM, 0),
              TNT_SUCCESS);
    EXPECT_RC(tnt_gather(comm, NULL, NULL, 0, TNT_F32, 0), TNT_SUCCESS);
    EXPECT_RC(tnt_scatter(comm, NULL, NULL, 0, TNT_F32, 0), TNT_SUCCESS);
    EXPECT_RC(tnt_alltoall(comm, NULL, NULL, 0, TNT_F32), TNT_SUCCESS);
    EXPECT_RC(tnt_alltoallv(comm, NULL, zero, zero, NULL, zero, zero,
                            TNT_F32), TNT_SUCCESS);

    /* No request pointer. */
    EXPECT_RC(tnt_ireduce(comm, buf, out, 4, TNT_F32, TNT_SUM, 0, NULL), IA);
    EXPECT_RC(tnt_igather(comm, buf, out, 4, TNT_F32, 0, NULL), IA);
    EXPECT_RC(tnt_iscatter(comm, buf, out, 4, TNT_F32, 0, NULL), IA);
    EXPECT_RC(tnt_ialltoall(comm, buf, out, 4, TNT_F32, NULL), IA);
    EXPECT_RC(tnt_ialltoallv(comm, buf, one, zero, out, one, zero, TNT_F32,
                             NULL), IA);

    /* In place is refused by the all-to-alls. */
    EXPECT_RC(tnt_alltoall(comm, TNT_IN_PLACE, out, 4, TNT_F32), IA);
    EXPECT_RC(tnt_alltoall(comm, out, out, 4, TNT_F32), IA);
    TH_CHECK(msg_has("in place is not supported", NULL), "'%s'",
             tnt_last_error());
    EXPECT_RC(tnt_alltoallv(comm, out, one, zero, out, one, zero, TNT_F32),
              IA);

    /* The own block's counts disagree: refused before anything moves. */
    size_t three[1] = {3};
    EXPECT_RC(tnt_alltoallv(comm, buf, three, zero, out, one, zero,
                            TNT_F32), TNT_ERR_MISMATCH);
    TH_CHECK(msg_has("sendcounts[0] = 3", "recvcounts[0] = 4"), "'%s'",
             tnt_last_error());

    /* Unknown dtypes and ops; roots outside [0, size). */
    tnt_dtype_t bad_dt = (tnt_dtype_t)77;
    EXPECT_RC(tnt_reduce(comm, buf, out, 4, bad_dt, TNT_SUM, 0), IA);
    EXPECT_RC(tnt_gather(comm, buf, out, 4, bad_dt, 0), IA);
    EXPECT_RC(tnt_scatter(comm, buf, out, 4, bad_dt, 0), IA);
    EXPECT_RC(tnt_alltoall(comm, buf, out, 4, bad_dt), IA);
    EXPECT_RC(tnt_alltoallv(comm, buf, one, zero, out, one, zero, bad_dt),
              IA);
    static const int bad_op[] = {77, TNT_OP_COUNT, -1};
    for (size_t i = 0; i < 3; i++)
        EXPECT_RC(tnt_reduce(comm, buf, out, 4, TNT_F32, (tnt_op_t)bad_op[i],
                             0), IA);
    static const int bad_root[] = {-1, 1, 1000, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_root / sizeof bad_root[0]; i++) {
        int r = bad_root[i];
        EXPECT_RC(tnt_reduce(comm, buf, out, 4, TNT_F32, TNT_SUM, r), IA);
        TH_CHECK(msg_has("tnt_reduce:", "is not a rank"), "'%s'",
                 tnt_last_error());
        EXPECT_RC(tnt_ireduce(comm, buf, out, 4, TNT_F32, TNT_SUM, r, &req),
                  IA);
        EXPECT_RC(tnt_gather(comm, buf, out, 4, TNT_F32, r), IA);
        TH_CHECK(msg_has("tnt_gather:", "root"), "'%s'", tnt_last_error());
        EXPECT_RC(tnt_igather(comm, buf, out, 4, TNT_F32, r, &req), IA);
        EXPECT_RC(tnt_scatter(comm, buf, out, 4, TNT_F32, r), IA);
        TH_CHECK(msg_has("tnt_scatter:", "root"), "'%s'", tnt_last_error());
        EXPECT_RC(tnt_iscatter(comm, buf, out, 4, TNT_F32, r, &req), IA);
        /* Even with nothing to move, the root is still wrong. */
        EXPECT_RC(tnt_reduce(comm, NULL, NULL, 0, TNT_F32, TNT_SUM, r), IA);
    }
    EXPECT_RC(tnt_ialltoall(comm, buf, out, 4, bad_dt, &req), IA);
    TH_CHECK(msg_has("tnt_ialltoall:", NULL), "'%s'", tnt_last_error());
    EXPECT_RC(tnt_ialltoallv(comm, buf, one, zero, out, one, zero, bad_dt,
                             &req), IA);
    TH_CHECK(msg_has("tnt_ialltoallv:", NULL), "'%s'", tnt_last_error());

    /* Still healthy, each call right on one rank. */
    for (int i = 0; i < 16; i++)
        buf[i] = (float)(3 * i + 1);
    memset(out, 0, sizeof out);
    EXPECT_RC(tnt_reduce(comm, buf, out, 16, TNT_F32, TNT_MAX, 0),
              TNT_SUCCESS);
    TH_CHECK(memcmp(buf, out, sizeof out) == 0, "reduce after rejected "
             "calls gave wrong data");
    memset(out, 0, sizeof out);
    EXPECT_RC(tnt_gather(comm, buf, out, 16, TNT_F32, 0), TNT_SUCCESS);
    EXPECT_RC(tnt_scatter(comm, out, out, 0, TNT_F32, 0), TNT_SUCCESS);
    TH_CHECK(memcmp(buf, out, sizeof out) == 0, "gather gave wrong data");
    memset(out, 0, sizeof out);
    EXPECT_RC(tnt_alltoall(comm, buf, out, 16, TNT_F32), TNT_SUCCESS);
    TH_CHECK(memcmp(buf, out, sizeof out) == 0, "alltoall gave wrong data");
    memset(out, 0, sizeof out);
    size_t n[1] = {10}, sd[1] = {6}, rd[1] = {2};
    EXPECT_RC(tnt_alltoallv(comm, buf, n, sd, out, n, rd, TNT_F32),
              TNT_SUCCESS);
    TH_CHECK(memcmp(buf + 6, out + 2, 10 * sizeof(float)) == 0 &&
                 out[0] == 0 && out[1] == 0 && out[12] == 0,
             "alltoallv gave wrong data");
    EXPECT_RC(tnt_comm_free(comm), TNT_SUCCESS);
}

static void test_bad_config(void)
{
    unset_launcher_env();
    tnt_comm_t comm = NULL;
    const tnt_result_t IA = TNT_ERR_INVALID_ARG, CF = TNT_ERR_CONFIG;

    tnt_config_t cfg = TNT_CONFIG_INIT;
    cfg.rank = 0;
    cfg.nranks = 1;
    cfg.size = 0; /* not initialised with TNT_CONFIG_INIT */
    EXPECT_RC2(tnt_comm_init(&cfg, &comm), IA, CF);
    cfg.size = sizeof cfg;
    cfg.version = 0; /* versions start at 1 */
    EXPECT_RC2(tnt_comm_init(&cfg, &comm), IA, CF);
    cfg.version = TNT_CONFIG_VERSION;

    static const struct {
        int rank, nranks;
        const char *addr;
    } bad[] = {{-1, 1, NULL},           /* the TNT_CONFIG_INIT default */
               {0, 0, NULL},
               {0, -3, NULL},
               {1, 1, NULL},
               {5, 2, "127.0.0.1:1"},
               {1, 2, NULL},            /* no root address for 2 ranks */
               {1, 2, "nonsense"},
               {1, 2, "127.0.0.1"},
               {1, 2, "127.0.0.1:99999"},
               {1, 2, "127.0.0.1:-5"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tnt_config_t c = TNT_CONFIG_INIT;
        c.rank = bad[i].rank;
        c.nranks = bad[i].nranks;
        c.root_addr = bad[i].addr;
        c.timeout_s = 5.0;
        comm = NULL;
        tnt_result_t rc = tnt_comm_init(&c, &comm);
        TH_CHECK(rc == IA || rc == CF,
                 "tnt_comm_init(rank %d, nranks %d, root '%s') returned %d "
                 "(%s), expected an invalid-argument or config error; '%s'",
                 bad[i].rank, bad[i].nranks,
                 bad[i].addr ? bad[i].addr : "(null)", rc, tnt_strerror(rc),
                 tnt_last_error());
        if (rc == TNT_SUCCESS && comm)
            tnt_comm_free(comm);
    }
    /* tnt.h: "timeout_s <= 0: TNT_TIMEOUT", so 0 and negative values both
     * fall back to the environment; NaN is no number of seconds. */
    static const double fallback[] = {0.0, -1.0};
    for (size_t i = 0; i < 2; i++) {
        tnt_config_t c = TNT_CONFIG_INIT;
        c.rank = 0;
        c.nranks = 1;
        c.timeout_s = fallback[i];
        comm = NULL;
        tnt_result_t rc = tnt_comm_init(&c, &comm);
        TH_CHECK(rc == TNT_SUCCESS, "tnt_comm_init with timeout_s=%g "
                 "returned %d (%s), but tnt.h documents <= 0 as 'use "
                 "TNT_TIMEOUT': '%s'", fallback[i], rc, tnt_strerror(rc),
                 tnt_last_error());
        if (rc == TNT_SUCCESS && comm)
            EXPECT_RC(tnt_comm_free(comm), TNT_SUCCESS);
    }
    tnt_config_t c = TNT_CONFIG_INIT;
    c.rank = 0;
    c.nranks = 1;
    c.timeout_s = NAN;
    comm = NULL;
    EXPECT_RC2(tnt_comm_init(&c, &comm), IA, CF);
}

static void test_freed_comm(void)
{
    tnt_comm_t comm = world_of_one();
    if (!comm)
        return;
    EXPECT_RC(tnt_comm_free(comm), TNT_SUCCESS);
    /* The library keeps a registry of live communicators: the freed
     * handle is recognised without being dereferenced (ASan would
     * object otherwise). No communicator is created in between, so the
     * address cannot have been reused. */
    const tnt_result_t IC = TNT_ERR_INVALID_COMM;
    float buf[4] = {1, 2, 3, 4}, out[4];
    int v;
    tnt_request_t req = NULL;
    EXPECT_RC(tnt_allreduce(comm, buf, out, 4, TNT_F32, TNT_SUM), IC);
    EXPECT_RC(tnt_iallreduce(comm, buf, out, 4, TNT_F32, TNT_SUM, &req), IC);
    EXPECT_RC(tnt_broadcast(comm, buf, 4, TNT_F32, 0), IC);
    EXPECT_RC(tnt_barrier(comm), IC);
    EXPECT_RC(tnt_allgather(comm, buf, out, 1, TNT_F32), IC);
    EXPECT_RC(tnt_reduce_scatter(comm, buf, out, 1, TNT_F32, TNT_SUM), IC);
    EXPECT_RC(tnt_comm_rank(comm, &v), IC);
    EXPECT_RC(tnt_comm_size(comm, &v), IC);
    EXPECT_RC(tnt_comm_abort(comm), IC);
    EXPECT_RC(tnt_comm_free(comm), IC);
    /* A handle that never was a communicator. */
    tnt_comm_t bogus = (tnt_comm_t)(uintptr_t)0x1000;
    EXPECT_RC(tnt_barrier(bogus), IC);
    EXPECT_RC(tnt_comm_free(bogus), IC);
}

static void test_aborted_comm(void)
{
    tnt_comm_t comm = world_of_one();
    if (!comm)
        return;
    EXPECT_RC(tnt_comm_abort(comm), TNT_SUCCESS);
    const tnt_result_t AB = TNT_ERR_ABORTED;
    float buf[4] = {1, 2, 3, 4}, out[4];
    tnt_request_t req = NULL;
    EXPECT_RC(tnt_allreduce(comm, buf, out, 4, TNT_F32, TNT_SUM), AB);
    EXPECT_RC(tnt_iallreduce(comm, buf, out, 4, TNT_F32, TNT_SUM, &req), AB);
    EXPECT_RC(tnt_broadcast(comm, buf, 4, TNT_F32, 0), AB);
    EXPECT_RC(tnt_ibroadcast(comm, buf, 4, TNT_F32, 0, &req), AB);
    EXPECT_RC(tnt_barrier(comm), AB);
    EXPECT_RC(tnt_ibarrier(comm, &req), AB);
    EXPECT_RC(tnt_allgather(comm, buf, out, 1, TNT_F32), AB);
    EXPECT_RC(tnt_reduce_scatter(comm, buf, out, 1, TNT_F32, TNT_SUM), AB);
    /* Aborted, not freed: freeing is still the owner's job and works. */
    EXPECT_RC(tnt_comm_free(comm), TNT_SUCCESS);
    EXPECT_RC(tnt_barrier(comm), TNT_ERR_INVALID_COMM);
}

/* ---- malformed environments (forked children) ----------------------------- */

typedef struct env_case {
    const char *env[6];  /* applied over a valid world-of-one environment */
    const char *names;   /* the message must name one of these ('|') */
} env_case_t;

typedef struct env_arg {
    const env_case_t *c;
} env_arg_t;

static int names_one_of(const char *msg, const char *names)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", names);
    char *save = NULL;
    for (char *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
        if (strstr(msg, t))
            return 1;
    return 0;
}

static int bad_env_rank(tnt_comm_t unused, int rank, int p, void *arg,
                        th_report_t *rep)
{
    (void)unused;
    (void)rank;
    (void)p;
    const env_arg_t *a = arg;
    tnt_comm_t comm = NULL;
    double t0 = th_now();
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    double dt = th_now() - t0;
    const char *msg = tnt_last_error();
    int ok = (rc == TNT_ERR_CONFIG || rc == TNT_ERR_INVALID_ARG) &&
             names_one_of(msg, a->c->names);
    th_report_expect(rep, "init_rejected", ok, rc,
                     "tnt_comm_init_from_env returned %d (%s) after %.1f s, "
                     "expected a config error naming %s; message: '%s'", rc,
                     tnt_strerror(rc), dt, a->c->names, msg);
    if (rc == TNT_SUCCESS && comm)
        tnt_comm_free(comm);
    return 0;
}

static const env_case_t k_env_cases[] = {
    {{"TNT_SIZE=abc"}, "TNT_SIZE"},
    {{"TNT_SIZE=0"}, "TNT_SIZE"},
    {{"TNT_SIZE=-2"}, "TNT_SIZE"},
    {{"TNT_SIZE=2x"}, "TNT_SIZE"},
    {{"TNT_SIZE=99999999999999999999"}, "TNT_SIZE"},
    {{"TNT_SIZE=2", "TNT_RANK=5"}, "TNT_RANK"},
    {{"TNT_SIZE=2", "TNT_RANK=2"}, "TNT_RANK"},
    {{"TNT_RANK=-1"}, "TNT_RANK"},
    {{"TNT_RANK=abc"}, "TNT_RANK"},
    {{"TNT_RANK=0.5"}, "TNT_RANK"},
    {{"TNT_SIZE=2", "TNT_RANK=1", "TNT_ROOT_ADDR=nonsense"}, "TNT_ROOT_ADDR"},
    {{"TNT_SIZE=2", "TNT_RANK=1", "TNT_ROOT_ADDR=127.0.0.1"},
     "TNT_ROOT_ADDR"},
    {{"TNT_SIZE=2", "TNT_RANK=1", "TNT_ROOT_ADDR=127.0.0.1:"},
     "TNT_ROOT_ADDR"},
    {{"TNT_SIZE=2", "TNT_RANK=1", "TNT_ROOT_ADDR=127.0.0.1:99999"},
     "TNT_ROOT_ADDR"},
    {{"TNT_SIZE=2", "TNT_RANK=0", "TNT_ROOT_ADDR=127.0.0.1:99999"},
     "TNT_ROOT_ADDR"},
    {{"TNT_SIZE=2", "TNT_RANK=1", "TNT_ROOT_ADDR=127.0.0.1:12ab"},
     "TNT_ROOT_ADDR"},
    {{"TNT_TIMEOUT=abc"}, "TNT_TIMEOUT"},
    {{"TNT_TIMEOUT=-5"}, "TNT_TIMEOUT"},
    {{"TNT_TIMEOUT=0"}, "TNT_TIMEOUT"},
    {{"TNT_TIMEOUT=inf"}, "TNT_TIMEOUT"},
    {{"TNT_CONNECT_TIMEOUT=xyz"}, "TNT_CONNECT_TIMEOUT"},
    {{"TNT_CONNECT_TIMEOUT=0"}, "TNT_CONNECT_TIMEOUT"},
    {{"TNT_TIMEOUT=1e3"}, "TNT_TIMEOUT"},
    {{"TNT_TIMEOUT= 5"}, "TNT_TIMEOUT"},
    {{"TNT_HOST_ID=has space"}, "TNT_HOST_ID"},
    {{"TNT_SEGMENT_BYTES=-3"}, "TNT_SEGMENT_BYTES"},
    {{"TNT_SEGMENT_BYTES=abc"}, "TNT_SEGMENT_BYTES"},
    {{"TNT_SEGMENT_BYTES=0"}, "TNT_SEGMENT_BYTES"},
    {{"TNT_SEGMENT_BYTES=99999999999999999999G"}, "TNT_SEGMENT_BYTES"},
    {{"TNT_SOCKET_BUFFER=1x"}, "TNT_SOCKET_BUFFER"},
    {{"TNT_MAX_UNEXPECTED_BYTES=lots"}, "TNT_MAX_UNEXPECTED_BYTES"},
    {{"TNT_ALLREDUCE_ALGO=bogus"}, "TNT_ALLREDUCE_ALGO"},
    {{"TNT_BCAST_ALGO=bogus"}, "TNT_BCAST_ALGO"},
    {{"TNT_TOPOLOGY=star"}, "TNT_TOPOLOGY"},
    {{"TNT_SPIN_US=-1"}, "TNT_SPIN_US"},
    {{"TNT_SPIN_US=2000000"}, "TNT_SPIN_US"},
    {{"TNT_SPIN_US=fast"}, "TNT_SPIN_US"},
    /* Knob errors are found before waiting for any peer: a typo must not
     * cost a connection timeout. */
    {{"TNT_SIZE=2", "TNT_RANK=0", "TNT_TIMEOUT=abc",
      "TNT_CONNECT_TIMEOUT=30"},
     "TNT_TIMEOUT"},
    {{"TNT_SIZE=2", "TNT_RANK=1", "TNT_SEGMENT_BYTES=-3",
      "TNT_CONNECT_TIMEOUT=30"},
     "TNT_SEGMENT_BYTES"},
    /* Flow control cannot keep early messages of 3 peers within 1 byte
     * (issue 34: a correct program failed at its first message). */
    {{"TNT_SIZE=4", "TNT_RANK=0", "TNT_MAX_UNEXPECTED_BYTES=1",
      "TNT_EAGER_BYTES=0", "TNT_CONNECT_TIMEOUT=30"},
     "TNT_MAX_UNEXPECTED_BYTES"},
    /* Part of the launcher environment only. */
    {{"TNT_SIZE=2", "TNT_RANK", "TNT_CONNECT_TIMEOUT=30"}, "TNT_RANK"},
    {{"TNT_SIZE", "TNT_RANK=1", "TNT_CONNECT_TIMEOUT=30"}, "TNT_SIZE"},
    {{"TNT_SIZE=2", "TNT_RANK=1", "TNT_ROOT_ADDR", "TNT_CONNECT_TIMEOUT=30"},
     "TNT_ROOT_ADDR"},
};

static void test_malformed_env(void)
{
    for (size_t i = 0; i < sizeof k_env_cases / sizeof k_env_cases[0]; i++) {
        const env_case_t *c = &k_env_cases[i];
        char name[256];
        size_t k = (size_t)snprintf(name, sizeof name, "env");
        for (int e = 0; c->env[e] && k < sizeof name; e++)
            k += (size_t)snprintf(name + k, sizeof name - k, " %s",
                                  c->env[e]);
        env_arg_t a = {c};
        /* The deadline is far below TNT_CONNECT_TIMEOUT=30: a library
         * that waits for peers before checking its knobs is caught. */
        th_job_t job = {name, 1, c->env, bad_env_rank, &a, 10, 1, 0};
        th_run_job(&job, NULL);
    }
}

/* Connection failures: nothing listens at the root address (rank 1), or
 * nobody ever connects (rank 0 of 2). Either must end in an error within
 * about TNT_CONNECT_TIMEOUT, never hang. */
static int unreachable_rank(tnt_comm_t unused, int rank, int p, void *arg,
                            th_report_t *rep)
{
    (void)unused;
    (void)rank;
    (void)p;
    (void)arg;
    tnt_comm_t comm = NULL;
    double t0 = th_now();
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    double dt = th_now() - t0;
    double limit = 8.0 * th_timeout_mult();
    const char *msg = tnt_last_error();
    th_report_expect(rep, "init_fails",
                     (rc == TNT_ERR_CONNECT || rc == TNT_ERR_TIMEOUT) &&
                         dt < limit && msg[0],
                     rc, "init returned %d (%s) after %.1f s (limit %.0f s), "
                     "expected a connect error or timeout with a message; "
                     "message: '%s'", rc, tnt_strerror(rc), dt, limit, msg);
    if (rc == TNT_SUCCESS && comm)
        tnt_comm_free(comm);
    return 0;
}

static void test_unreachable_root(void)
{
    const char *env1[] = {"TNT_SIZE=2", "TNT_RANK=1", "TNT_CONNECT_TIMEOUT=1",
                          NULL};
    th_job_t j1 = {"rank 1, nothing listens at the root", 1, env1,
                   unreachable_rank, NULL, 30, 1, 0};
    th_run_job(&j1, NULL);
    const char *env0[] = {"TNT_SIZE=2", "TNT_RANK=0", "TNT_CONNECT_TIMEOUT=1",
                          NULL};
    th_job_t j0 = {"rank 0, no peer ever connects", 1, env0,
                   unreachable_rank, NULL, 30, 1, 0};
    th_run_job(&j0, NULL);
}

/* A rank with the wrong job key must be refused: both sides fail. */
static int wrong_key_rank(tnt_comm_t unused, int rank, int p, void *arg,
                          th_report_t *rep)
{
    (void)unused;
    (void)p;
    (void)arg;
    if (rank == 1)
        setenv("TNT_JOB_KEY", "00112233445566778899aabbccddeeff", 1);
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    /* A timeout is a failure here too: init did not complete. */
    th_report_expect(rep, "init_refused", rc != TNT_SUCCESS, rc,
                     "rank %d: init with %s job key returned %d (%s): '%s'",
                     rank, rank == 1 ? "a wrong" : "the right", rc,
                     tnt_strerror(rc), tnt_last_error());
    if (rc == TNT_SUCCESS && comm)
        tnt_comm_free(comm);
    return 0;
}

static void test_wrong_job_key(void)
{
    const char *env[] = {"TNT_CONNECT_TIMEOUT=3", NULL};
    th_job_t job = {"wrong job key", 2, env, wrong_key_rank, NULL, 40, 1, 0};
    th_run_job(&job, NULL);
}

/* ---- several ranks --------------------------------------------------------- */

/* Local argument errors in a real job: every rank finds them before
 * sending anything, so nobody waits, and the communicator stays usable. */
static int multi_bad_args_rank(tnt_comm_t comm, int rank, int p, void *arg,
                               th_report_t *rep)
{
    (void)arg;
    float buf[64], out[64 * 8];
    tnt_request_t req = NULL;
    memset(buf, 0, sizeof buf);
#define BAD(name, call)                                                     \
    do {                                                                    \
        tnt_result_t rc_ = (call);                                          \
        th_report_expect(rep, name, rc_ == TNT_ERR_INVALID_ARG, rc_,        \
                         "%s returned %d (%s), expected invalid argument: " \
                         "'%s'", #call, rc_, tnt_strerror(rc_),             \
                         tnt_last_error());                                 \
    } while (0)
    /* count * size * esize overflows although count * esize does not. */
    size_t n = SIZE_MAX / 8 + 1;
    if (p > 1) {
        BAD("allgather_total_overflow",
            tnt_allgather(comm, buf, out, n, TNT_F32));
        BAD("iallgather_total_overflow",
            tnt_iallgather(comm, buf, out, n, TNT_F32, &req));
        BAD("reduce_scatter_total_overflow",
            tnt_reduce_scatter(comm, buf, out, n, TNT_F32, TNT_SUM));
    }
    BAD("allreduce_overflow",
        tnt_allreduce(comm, buf, out, SIZE_MAX / 2, TNT_F32, TNT_SUM));
    BAD("broadcast_root_minus1", tnt_broadcast(comm, buf, 4, TNT_F32, -1));
    BAD("broadcast_root_size", tnt_broadcast(comm, buf, 4, TNT_F32, p));
    BAD("allreduce_dtype_77", tnt_allreduce(comm, buf, out, 4,
                                            (tnt_dtype_t)77, TNT_SUM));
    BAD("allreduce_op_77", tnt_allreduce(comm, buf, out, 4, TNT_F32,
                                         (tnt_op_t)77));
    BAD("allreduce_null_recv",
        tnt_allreduce(comm, buf, NULL, 4, TNT_F32, TNT_SUM));
    BAD("ibarrier_null_request", tnt_ibarrier(comm, NULL));
#undef BAD
    /* The communicator still works, with the right data. */
    uint64_t seed = 4242;
    tnt_gen_fill(buf, 64, TNT_F32, TNT_SUM, seed, rank);
    tnt_result_t rc = tnt_allreduce(comm, buf, out, 64, TNT_F32, TNT_SUM);
    size_t first = 0, wrong = 0;
    if (rc == TNT_SUCCESS)
        wrong = tnt_gen_check_allreduce(out, 0, 64, TNT_F32, TNT_SUM, seed,
                                        p, &first);
    th_report_check(rep, "allreduce_after_errors", rc, wrong, first, out,
                    64 * sizeof(float));
    th_report_check(rep, "barrier_after_errors", tnt_barrier(comm), 0, 0,
                    NULL, 0);
    return 0;
}

static void test_multi_bad_args(void)
{
    static const int ps[] = {2, 3};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        char name[64];
        snprintf(name, sizeof name, "bad arguments p=%d", ps[k]);
        const char *env[] = {NULL};
        th_job_t job = {name, ps[k], env, multi_bad_args_rank, NULL, 60, 0,
                        0};
        th_run_job(&job, NULL);
    }
}

/* Ranks calling different collectives: every rank gets an error (no hang,
 * no corrupted memory), at least one of them TNT_ERR_MISMATCH (or a
 * protocol error for a message that arrives after its collective ended).
 * A rank that only sends (a broadcast root) cannot see the mismatch
 * during the call; it must learn of it by its next collective, which is
 * then expected to fail instead of letting the ranks drift apart. */
enum mm_kind { MM_COUNT, MM_DTYPE, MM_OP, MM_ROOT, MM_KIND, MM_END };
static const char *const k_mm_names[] = {"count", "dtype", "op", "root",
                                         "kind"};

static int mismatch_rank(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    (void)p;
    enum mm_kind kind = *(const enum mm_kind *)arg;
    enum { N = 2000 };
    static float a[N], b[N];
    memset(a, 0, sizeof a);
    int odd = rank != 0;
    tnt_result_t rc = TNT_SUCCESS;
    switch (kind) {
    case MM_COUNT:
        rc = tnt_allreduce(comm, a, b, odd ? N : N / 2, TNT_F32, TNT_SUM);
        break;
    case MM_DTYPE:
        rc = tnt_allreduce(comm, a, b, 100, odd ? TNT_I32 : TNT_F32,
                           TNT_SUM);
        break;
    case MM_OP:
        rc = tnt_allreduce(comm, a, b, 100, TNT_F32, odd ? TNT_MAX : TNT_SUM);
        break;
    case MM_ROOT:
        rc = tnt_broadcast(comm, a, 100, TNT_F32, odd ? 1 : 0);
        break;
    case MM_KIND:
        rc = odd ? tnt_allreduce(comm, a, b, 100, TNT_F32, TNT_SUM)
                 : tnt_broadcast(comm, a, 100, TNT_F32, 0);
        break;
    case MM_END:
        break;
    }
    char first_err[200];
    snprintf(first_err, sizeof first_err, "%s", tnt_last_error());
    tnt_result_t rb = TNT_SUCCESS;
    if (rc == TNT_SUCCESS)
        rb = tnt_barrier(comm);
    tnt_result_t seen = rc != TNT_SUCCESS ? rc : rb;
    th_report_expect(rep, "mismatch_detected", seen != TNT_SUCCESS, seen,
                     "rank %d: %s mismatch: the call returned %d (%s)%s%s; "
                     "'%s'", rank, k_mm_names[kind], rc, tnt_strerror(rc),
                     rc == TNT_SUCCESS ? ", the barrier after it returned "
                                       : "",
                     rc == TNT_SUCCESS ? tnt_strerror(rb) : "",
                     rc != TNT_SUCCESS ? first_err : tnt_last_error());
    /* Afterwards the communicator can be aborted and freed cleanly (the
     * harness frees it). */
    th_report_check(rep, "abort_after_mismatch", tnt_comm_abort(comm), 0, 0,
                    NULL, 0);
    return 0;
}

static void test_mismatch(void)
{
    static const int ps[] = {2, 3};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        for (int m = 0; m < MM_END; m++) {
            enum mm_kind kind = (enum mm_kind)m;
            char name[64];
            snprintf(name, sizeof name, "%s mismatch p=%d", k_mm_names[m],
                     ps[k]);
            const char *env[] = {"TNT_TIMEOUT=10", NULL};
            th_job_t job = {name, ps[k], env, mismatch_rank, &kind, 40, 0, 0};
            th_result_t res;
            th_run_job(&job, &res);
            int named = 0;
            for (int r = 0; r < ps[k]; r++) {
                const th_case_t *c = th_find_case(&res, r,
                                                  "mismatch_detected");
                named += c && (c->rc == TNT_ERR_MISMATCH ||
                               c->rc == TNT_ERR_PROTOCOL);
            }
            /* The rank that sees it first tells the others (a failure
             * notice): both ranks of a pair always report the mismatch.
             * With three, a rank whose peers failed before a connection
             * in frame existed may see a lost peer instead (every rank
             * still gets an error: mismatch_detected); at least two must
             * name the mismatch. test_mismatch has the stricter suite. */
            int want = 2;
            TH_CHECK(named >= want, "job %s: %d of %d ranks reported "
                     "TNT_ERR_MISMATCH (or TNT_ERR_PROTOCOL)", name, named,
                     ps[k]);
            th_result_free(&res);
        }
    }
}

/* An aborted rank: its own pending and later operations fail with
 * TNT_ERR_ABORTED; its peer sees an error instead of waiting forever.
 * Rank 0 joins only after rank 1 has aborted (it waits for a file rank 1
 * creates), so rank 1's barrier cannot have completed before the abort. */
typedef struct abort_arg {
    char path[256];
} abort_arg_t;

static int abort_rank(tnt_comm_t comm, int rank, int p, void *arg,
                      th_report_t *rep)
{
    (void)p;
    const abort_arg_t *aa = arg;
    enum { N = 4096 };
    static float a[N], b[N];
    memset(a, 0, sizeof a);
    if (rank == 1) {
        tnt_request_t req = NULL;
        tnt_result_t rc = tnt_ibarrier(comm, &req);
        th_report_check(rep, "post", rc, 0, 0, NULL, 0);
        th_report_check(rep, "abort", tnt_comm_abort(comm), 0, 0, NULL, 0);
        FILE *f = fopen(aa->path, "w");
        if (f)
            fclose(f);
        tnt_result_t w = req ? tnt_wait(req) : rc;
        th_report_expect(rep, "pending_op", w == TNT_ERR_ABORTED, w,
                         "the barrier pending at abort ended with %d (%s)",
                         w, tnt_strerror(w));
        if (req)
            tnt_request_free(req);
        rc = tnt_allreduce(comm, a, b, N, TNT_F32, TNT_SUM);
        th_report_expect(rep, "later_op", rc == TNT_ERR_ABORTED, rc,
                         "allreduce after abort returned %d (%s)", rc,
                         tnt_strerror(rc));
        req = NULL;
        rc = tnt_iallreduce(comm, a, b, N, TNT_F32, TNT_SUM, &req);
        th_report_expect(rep, "later_iop", rc == TNT_ERR_ABORTED, rc,
                         "iallreduce after abort returned %d (%s)", rc,
                         tnt_strerror(rc));
        if (rc == TNT_SUCCESS && req) {
            tnt_wait(req);
            tnt_request_free(req);
        }
    } else {
        double limit = th_now() + 30.0 * th_timeout_mult();
        while (access(aa->path, F_OK) != 0 && th_now() < limit)
            usleep(2000);
        /* Rank 1's barrier message may have got through before the
         * abort, so this barrier may succeed; the allreduce after it
         * cannot, as rank 1 will never take part. */
        tnt_result_t rb = tnt_barrier(comm);
        double t0 = th_now();
        tnt_result_t rc = tnt_allreduce(comm, a, b, N, TNT_F32, TNT_SUM);
        double dt = th_now() - t0;
        th_report_expect(rep, "post", 1, 0, "rank 0 posts nothing early");
        th_report_expect(rep, "abort", 1, 0, "barrier returned %d", rb);
        th_report_expect(rep, "pending_op", rc < 0, rc,
                         "allreduce with an aborted peer returned %d (%s) "
                         "after %.1f s: '%s'", rc, tnt_strerror(rc), dt,
                         tnt_last_error());
        th_report_expect(rep, "later_op", 1, 0, "-");
        th_report_expect(rep, "later_iop", 1, 0, "-");
    }
    return 0;
}

static void test_abort_two_ranks(void)
{
    abort_arg_t a;
    char dir[] = "/tmp/tnt_test_abort_XXXXXX";
    TH_CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
    snprintf(a.path, sizeof a.path, "%s/aborted", dir);
    const char *env[] = {"TNT_TIMEOUT=10", NULL};
    th_job_t job = {"abort p=2", 2, env, abort_rank, &a, 40, 0, 0};
    th_run_job(&job, NULL);
    unlink(a.path);
    rmdir(dir);
}

/* An algorithm name that is unknown, or exists but belongs to another
 * collective: tnt_comm_init refuses it, naming the variable and listing
 * exactly the algorithms that variable accepts (not every collective's
 * accepting it at init and then failing every call). */
typedef struct {
    const char *var;      /* the variable set */
    const char *want[3];  /* names the message must list */
    const char *not_want; /* a name of the other collective */
} wrong_algo_t;

static int wrong_algo_rank(tnt_comm_t unused, int rank, int p, void *arg,
                           th_report_t *rep)
{
    (void)unused;
    (void)p;
    const wrong_algo_t *w = arg;
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    const char *msg = tnt_last_error();
    int ok = rc == TNT_ERR_CONFIG && strstr(msg, w->var) &&
             !strstr(msg, w->not_want);
    for (int i = 0; i < 3 && w->want[i]; i++)
        ok = ok && strstr(msg, w->want[i]) != NULL;
    th_report_expect(rep, "rejected_at_init", ok, rc, "rank %d: init "
                     "returned %d (%s): '%s'", rank, rc, tnt_strerror(rc),
                     msg);
    if (rc == TNT_SUCCESS)
        tnt_comm_free(comm);
    return 0;
}

static void test_wrong_algo(void)
{
    static const struct {
        const char *env;
        wrong_algo_t w;
    } k[] = {
        {"TNT_ALLREDUCE_ALGO=binomial",
         {"TNT_ALLREDUCE_ALGO", {"staged", "mapped", "rabenseifner"},
          "pipeline"}},
        {"TNT_ALLREDUCE_ALGO=foo",
         {"TNT_ALLREDUCE_ALGO", {"staged", "mapped", "slots"}, "binomial"}},
        {"TNT_BCAST_ALGO=ring",
         {"TNT_BCAST_ALGO", {"binomial", "staged", "flat"}, "rabenseifner"}},
        {"TNT_BCAST_ALGO=foo",
         {"TNT_BCAST_ALGO", {"binomial", "pipeline", "staged"}, "mapped"}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const char *env[] = {k[i].env, NULL};
        char name[96];
        snprintf(name, sizeof name, "%s p=2", k[i].env);
        th_job_t j = {name, 2, env, wrong_algo_rank, (void *)&k[i].w, 40, 1,
                      0};
        th_run_job(&j, NULL);
    }
}

/* ---- main --------------------------------------------------------------------- */

/* A rank that never joins: rank 0's allreduce must end at its deadline
 * (TNT_TIMEOUT=1) with the negative TNT_ERR_TIMEOUT, seen the same way
 * through tnt_test polling, tnt_wait and tnt_wait_timeout, and the
 * communicator stays failed afterwards: a blocking call that did not
 * complete never returns a positive "not finished" code, so `rc < 0`
 * catches it. The late rank, told of the timeout, fails negative too. */
static int deadline_rank(tnt_comm_t comm, int rank, int nranks, void *arg,
                         th_report_t *rep)
{
    (void)nranks;
    (void)arg;
    float a[4] = {1, 2, 3, 4}, b[4];
    if (rank == 0) {
        tnt_request_t req = NULL;
        tnt_result_t rc = tnt_iallreduce(comm, a, b, 4, TNT_F32, TNT_SUM,
                                         &req);
        double t0 = th_now(), limit = t0 + 20.0 * th_timeout_mult();
        tnt_result_t t = rc;
        while (rc == TNT_SUCCESS &&
               (t = tnt_test(req)) == TNT_INPROGRESS && th_now() < limit)
            usleep(10000);
        double dt = th_now() - t0;
        th_report_expect(rep, "test_sees_deadline", t == TNT_ERR_TIMEOUT, t,
                         "tnt_test after %.1f s: %d (%s): '%s'", dt, t,
                         tnt_strerror(t), tnt_last_error());
        tnt_result_t wt = req ? tnt_wait_timeout(req, 0.5) : rc;
        th_report_expect(rep, "wait_timeout_sees_deadline",
                         wt == TNT_ERR_TIMEOUT, wt, "tnt_wait_timeout: %d "
                         "(%s)", wt, tnt_strerror(wt));
        tnt_result_t w = req ? tnt_wait(req) : rc;
        th_report_expect(rep, "wait_sees_deadline",
                         w == TNT_ERR_TIMEOUT &&
                             strstr(tnt_last_error(), "timed out") != NULL,
                         w, "tnt_wait: %d (%s): '%s'", w, tnt_strerror(w),
                         tnt_last_error());
        if (req)
            tnt_request_free(req);
        tnt_result_t later = tnt_allreduce(comm, a, b, 4, TNT_F32, TNT_SUM);
        th_report_expect(rep, "later_op", later == TNT_ERR_TIMEOUT, later,
                         "allreduce on the timed-out communicator: %d (%s)",
                         later, tnt_strerror(later));
        th_report_expect(rep, "peer_fails_negative", 1, 0, "-");
    } else {
        /* Stay away longer than rank 0's deadline, calling nothing; then
         * the collective rank 0 gave up on must fail here too, with a
         * negative code (rank 0's notice, or its loss). */
        usleep((useconds_t)(3.0e6 * th_timeout_mult()));
        th_report_expect(rep, "test_sees_deadline", 1, 0, "-");
        th_report_expect(rep, "wait_timeout_sees_deadline", 1, 0, "-");
        th_report_expect(rep, "wait_sees_deadline", 1, 0, "-");
        th_report_expect(rep, "later_op", 1, 0, "-");
        tnt_result_t rc = tnt_allreduce(comm, a, b, 4, TNT_F32, TNT_SUM);
        th_report_expect(rep, "peer_fails_negative", rc < 0, rc,
                         "allreduce after rank 0 timed out: %d (%s): '%s'",
                         rc, tnt_strerror(rc), tnt_last_error());
    }
    return 0;
}

static void test_deadline(void)
{
    const char *env[] = {"TNT_TIMEOUT=1", NULL};
    th_job_t job = {"deadline p=2", 2, env, deadline_rank, NULL, 60, 0, 0};
    th_run_job(&job, NULL);
}

/* A request freed twice (issue 34, defect 3): tnt_iallreduce,
 * tnt_request_free, a blocking allreduce (which took the recycled
 * request), tnt_request_free again on the same handle returned 0 and the
 * process then crashed. Now every call on a freed request is
 * TNT_ERR_INVALID_ARG, without reading it (clean under ASan), finished or
 * detached, also after its communicator was freed. */
static int freed_request_rank(tnt_comm_t comm, int rank, int p, void *arg,
                              th_report_t *rep)
{
    (void)arg;
    const tnt_result_t IA = TNT_ERR_INVALID_ARG;
    float x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(rank + i);
    tnt_request_t req = NULL;
    tnt_result_t rc = tnt_iallreduce(comm, x, y, 64, TNT_F32, TNT_SUM, &req);
    if (rc == TNT_SUCCESS)
        rc = tnt_wait(req);
    int ok = rc == TNT_SUCCESS;
    ok &= tnt_request_free(req) == TNT_SUCCESS;
    ok &= tnt_allreduce(comm, x, y, 64, TNT_F32, TNT_SUM) == TNT_SUCCESS;
    ok &= tnt_request_free(req) == IA && strstr(tnt_last_error(), "not live");
    ok &= tnt_wait(req) == IA && tnt_test(req) == IA &&
          tnt_wait_timeout(req, 0.0) == IA;
    th_report_expect(rep, "finished freed twice", ok, rc, "rank %d: '%s'",
                     rank, tnt_last_error());

    /* Freed before it finished (detached), then freed again. */
    tnt_request_t r2 = NULL;
    rc = tnt_iallreduce(comm, TNT_IN_PLACE, x, 64, TNT_F32, TNT_SUM, &r2);
    ok = rc == TNT_SUCCESS && tnt_request_free(r2) == TNT_SUCCESS;
    ok &= tnt_request_free(r2) == IA;
    ok &= tnt_barrier(comm) == TNT_SUCCESS; /* after the detached one */
    th_report_expect(rep, "detached freed twice", ok, rc, "rank %d: '%s'",
                     rank, tnt_last_error());

    /* A handle no call returned. */
    tnt_request_t bogus = (tnt_request_t)(void *)&ok;
    ok = tnt_request_free(bogus) == IA && tnt_wait(bogus) == IA;
    th_report_expect(rep, "never a request", ok, 0, "rank %d: '%s'", rank,
                     tnt_last_error());

    /* Still right afterwards: every element. */
    for (int i = 0; i < 64; i++)
        x[i] = (float)(rank + i);
    rc = tnt_allreduce(comm, x, y, 64, TNT_F32, TNT_SUM);
    size_t nw = 0;
    for (int i = 0; i < 64; i++)
        nw += y[i] != (float)(p * i + p * (p - 1) / 2);
    th_report_check(rep, "after", rc, nw, 0, y, sizeof y);
    return 0;
}

static void test_freed_request(void)
{
    const char *env[] = {NULL};
    th_job_t job = {"request freed twice p=2", 2, env, freed_request_rank,
                    NULL, 60, 0, 0};
    th_run_job(&job, NULL);
    /* A request that outlives its communicator stays valid until freed,
     * once. */
    tnt_comm_t comm = world_of_one();
    if (!comm)
        return;
    float x[4] = {1, 2, 3, 4};
    tnt_request_t req = NULL;
    EXPECT_RC(tnt_iallreduce(comm, TNT_IN_PLACE, x, 4, TNT_F32, TNT_SUM,
                             &req), TNT_SUCCESS);
    EXPECT_RC(tnt_comm_free(comm), TNT_SUCCESS);
    tnt_result_t rc = tnt_wait(req);
    TH_CHECK(rc == TNT_SUCCESS || rc == TNT_ERR_ABORTED, "tnt_wait after "
             "its communicator was freed: %d (%s)", rc, tnt_strerror(rc));
    EXPECT_RC(tnt_request_free(req), TNT_SUCCESS);
    EXPECT_RC(tnt_request_free(req), TNT_ERR_INVALID_ARG);
    EXPECT_RC(tnt_test(req), TNT_ERR_INVALID_ARG);
}

static const th_test_def_t k_tests[] = {
    {"single", "strerror", test_strerror},
    {"single", "no_launcher_env", test_no_launcher_env},
    {"single", "null_arguments", test_null_arguments},
    {"single", "bad_values", test_bad_values},
    {"single", "rooted_bad_values", test_rooted_bad_values},
    {"single", "bad_config", test_bad_config},
    {"single", "freed_comm", test_freed_comm},
    {"single", "aborted_comm", test_aborted_comm},
    {"env", "malformed_env", test_malformed_env},
    {"env", "unreachable_root", test_unreachable_root},
    {"env", "wrong_job_key", test_wrong_job_key},
    {"multi", "bad_arguments", test_multi_bad_args},
    {"multi", "mismatch", test_mismatch},
    {"multi", "abort", test_abort_two_ranks},
    {"multi", "wrong_algo", test_wrong_algo},
    {"multi", "deadline", test_deadline},
    {"multi", "freed_request", test_freed_request},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
