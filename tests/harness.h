/*
 * The multi-process test harness: runs one "job" of N ranks as N real
 * processes forked from the test runner, joined over real loopback
 * sockets through tnt_comm_init_from_env, the way a launcher would start
 * them. Each child runs a rank function that executes many cases in one
 * job (forking and bootstrapping per case would make the suite slow) and
 * reports one line per case through a pipe: name, verdict, result code,
 * number of wrong elements, first wrong index and a hash of the result.
 *
 * The parent never trusts a child to finish: it kills every child with
 * SIGKILL when the job's deadline passes (scaled by TNT_TEST_TIMEOUT_MULT
 * for sanitizer runs), reaps all of them, and turns what it saw into CUnit
 * failures whose messages name the job, the case, the rank and the index:
 * a failed case, a case some rank never reported, ranks whose result
 * hashes differ (results must be bitwise identical everywhere), a rank
 * that crashed on a signal or exited non-zero, and a job that timed out.
 */
#ifndef TNT_TESTS_HARNESS_H
#define TNT_TESTS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/tnt.h"

#include <CUnit/CUnit.h>

#define TH_NAME_MAX 96
#define TH_MSG_MAX 256

/** Child side: where a rank sends its case reports (opaque). */
typedef struct th_report th_report_t;

/** One case as reported by one rank. */
typedef struct th_case {
    char name[TH_NAME_MAX];
    int ok;             /**< the child's verdict */
    int rc;             /**< tnt_result_t of the call under test */
    size_t nwrong;      /**< wrong elements */
    size_t first_wrong; /**< global index of the first wrong one */
    int has_hash;       /**< 1: hash must agree across all ranks */
    uint64_t hash;      /**< tnt_gen_hash of the result */
    double seconds;     /**< wall time the case took on this rank */
    char msg[TH_MSG_MAX];
} th_case_t;

/**
 * A rank's work. `comm` is the rank's communicator (NULL when the job has
 * no_init set: the function then creates its own). Return 0 if every case
 * passed; failures must also be reported as cases so that they are named.
 */
typedef int (*th_rank_fn)(tnt_comm_t comm, int rank, int nranks, void *arg,
                          th_report_t *rep);

typedef struct th_job {
    const char *name;         /**< label in failure messages */
    int nranks;
    const char *const *env;   /**< NULL-terminated; "K=V" sets, "K" unsets */
    th_rank_fn fn;
    void *arg;
    double deadline_s;        /**< whole job, before TNT_TEST_TIMEOUT_MULT */
    int no_init;              /**< the harness does not create the comm */
    int quiet;                /**< 0: assert on every problem; 1: failed
                                   cases and hash differences are the
                                   caller's to judge (crashes, timeouts and
                                   missing reports are still asserted);
                                   2: assert nothing (harness self-tests) */
} th_job_t;

typedef struct th_rank_result {
    th_case_t *cases;
    size_t ncases, cap;
    int finished;             /**< the child reported its end */
    int reaped;
    int exit_status;          /**< valid if exited */
    int exited;
    int signo;                /**< non-zero if killed by a signal */
} th_rank_result_t;

typedef struct th_result {
    int nranks;
    th_rank_result_t *ranks;
    int timed_out;            /**< killed at the deadline */
    int grace_rank;           /**< >= 0: the deadline was cut short when
                                   this rank died */
    double elapsed_s;
    int failures;             /**< problems found (asserted or not) */
    char first_problem[512];  /**< text of the first one, "" if none */
} th_result_t;

/**
 * Run a job and assert on everything that went wrong (see the file
 * comment). Jobs that take 5 s or more, or every job when
 * TNT_TEST_VERBOSE=1, print their wall time. Returns the number of problems found (0: all good). `out` may
 * be NULL; otherwise it receives every rank's reports and must be released
 * with th_result_free().
 */
int th_run_job(const th_job_t *job, th_result_t *out);

/** th_run_job with the job name made from env. */
int th_run(int nranks, const char *const *env, th_rank_fn fn, void *arg,
           double deadline_s, th_result_t *out);

void th_result_free(th_result_t *r);

/** The report of case `name` by `rank`, or NULL if it never came. */
const th_case_t *th_find_case(const th_result_t *r, int rank,
                              const char *name);

/** Sleep for `s` seconds (resumed after signals). */
void th_sleep(double s);

/** TNT_TEST_TIMEOUT_MULT (default 1): scale for every deadline. */
double th_timeout_mult(void);
/** TNT_TEST_QUICK (0 to 3; default 0): how much a suite may trim for
 *  time. 1 (the shm pass of the collective suite): no 16 MiB cases at
 *  large rank counts, no p = 7; 2 (the sanitizer passes): p = 1, 2, 3, 5
 *  only; 3 (the emulated verbs guest, tests/rdma-guest): p = 2 and 3. The TCP pass of the normal build runs everything. */
int th_quick(void);

/** malloc that aborts with a message when out of memory (size 0 gives
 *  a valid one-byte block, so zero-element cases need no special case). */
void *th_xmalloc(size_t n);
/** tnt_mem_alloc (collective) that ends this rank with exit status 3 and
 *  the library's message when it fails: the case cannot run. */
void *th_xmem_alloc(tnt_comm_t comm, size_t n);

/** Lines of the file at `path` that contain `a` and, unless NULL, `b`
 *  (0 when it cannot be read): for checking what ranks logged. */
int th_count_lines(const char *path, const char *a, const char *b);

/** Flag files `dir`/`name` that ranks and a helper process use to say
 *  where they are: create one, and test whether it exists. */
void th_flag_set(const char *dir, const char *name);
int th_flag_isset(const char *dir, const char *name);

/** A free TCP port on 127.0.0.1 (bound, read back and closed). */
int th_free_port(void);

/** Monotonic seconds. */
double th_now(void);

/* ---- child side --------------------------------------------------------- */

/** Send one case. Also counts it as a failure of this rank if !c->ok. */
void th_report_case(th_report_t *rep, const th_case_t *c);

/**
 * The usual report of a collective: ok iff rc == TNT_SUCCESS and
 * nwrong == 0. If buf is not NULL, the hash of its `bytes` bytes is sent
 * and compared across ranks. A failing rc is described with
 * tnt_last_error() in the message.
 */
void th_report_check(th_report_t *rep, const char *name, tnt_result_t rc,
                     size_t nwrong, size_t first_wrong, const void *buf,
                     size_t bytes);

/** A yes/no expectation with a printf message (sent even when ok). */
void th_report_expect(th_report_t *rep, const char *name, int ok,
                      tnt_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/** Number of failed cases this rank has reported so far. */
int th_report_failures(const th_report_t *rep);

/** CUnit assertion with a formatted message (parent side, or any
 *  single-process test). */
void th_assert_fmt(int ok, const char *file, int line, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
#define TH_CHECK(cond, ...) th_assert_fmt(!!(cond), __FILE__, __LINE__, \
                                          __VA_ARGS__)

/** A small seeded generator (splitmix64) for test inputs: the same seed
 *  gives the same sequence on every rank. */
typedef struct th_rng {
    uint64_t s;
} th_rng_t;

uint64_t th_rnd(th_rng_t *r);
/** Uniform in [0, n); 0 when n is 0. */
size_t th_rnd_below(th_rng_t *r, size_t n);

/**
 * The stranger's test: send `len` (at most 4096) random bytes on the
 * connected socket fd, then wait up to timeout_s for the other side to
 * close it (end of file or reset). 1 if it closed it, 0 if it kept it
 * open (or the write failed). fd stays open. test_intruder and
 * test_stats send garbage to the library's listeners with it.
 */
int th_garbage_closed(int fd, size_t len, double timeout_s);

/** One test of a table-driven CUnit program. */
typedef struct th_test_def {
    const char *suite, *name;
    CU_TestFunc fn;
} th_test_def_t;

/**
 * main() of a test program: registers the tests of `tests` (ended by a
 * NULL suite), grouped by suite in table order; `prog [suite [test]]` runs
 * a part. Returns 0, 1 on failures, 2 on a CUnit error or no match.
 */
int th_main(int argc, char **argv, const th_test_def_t *tests);

#endif /* TNT_TESTS_HARNESS_H */
