/*
 * Transport plugins (TNT_TRANSPORT_PLUGIN, lib/transport/plugin.c).
 *
 * load: what the loader refuses, each in a fresh 1-rank job that calls
 * tnt_comm_init_from_env: a missing file (the message names the path and
 * what dlopen said), a shared object without the table, a table of an
 * interface version this library does not speak (the message names both
 * versions), a table without a required function. And an error inside
 * the plugin (its own copy of the parameter parsers rejects
 * TNT_SOCKETS_PER_PEER) must reach tnt_last_error() through the env.
 *
 * run: the TCP transport built as a plugin (libtnt-net-tcp.so, interface
 * version 4) and as a version-1 plugin (libtnt-net-tcp-v1.so, the size
 * gate) carries real p=3 jobs: every peer must have the plugin's
 * transport, and allreduces of several sizes must give every element of
 * the reference on every rank, bitwise the same. The whole collective
 * suite runs over the plugin as the test collectives_plugin.
 *
 * The shared objects come from tests/meson.build: TNT_TEST_TCP_PLUGIN,
 * TNT_TEST_TCP_PLUGIN_V1 and TNT_TEST_FAKE_PLUGIN_DIR.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "harness.h"

static const char *need_env(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "test_transport_plugin: %s is not set (run it "
                "through meson test)\n", name);
        exit(2);
    }
    return v;
}

/* ---- load --------------------------------------------------------------- */

typedef struct refusal {
    char plugin[1024];
    const char *transport;       /* TNT_TRANSPORT, or NULL */
    const char *extra_env;       /* one more K=V, or NULL */
    const char *must_name[4];    /* substrings of the message */
} refusal_t;

static int refusal_rank(tnt_comm_t unused, int rank, int p, void *arg,
                        th_report_t *rep)
{
    (void)unused;
    (void)rank;
    (void)p;
    const refusal_t *r = arg;
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    const char *msg = tnt_last_error();
    int ok = rc == TNT_ERR_CONFIG;
    for (int i = 0; i < 4 && r->must_name[i]; i++)
        ok = ok && strstr(msg, r->must_name[i]) != NULL;
    th_report_expect(rep, "refused", ok, rc, "tnt_comm_init_from_env "
                     "returned %d (%s), expected a config error naming "
                     "'%s' '%s' '%s'; message: '%s'", rc, tnt_strerror(rc),
                     r->must_name[0], r->must_name[1] ? r->must_name[1] : "",
                     r->must_name[2] ? r->must_name[2] : "", msg);
    if (rc == TNT_SUCCESS && comm)
        tnt_comm_free(comm);
    return 0;
}

static void expect_refusal(const refusal_t *r)
{
    char plugin_env[1100], transport_env[128];
    snprintf(plugin_env, sizeof(plugin_env), "TNT_TRANSPORT_PLUGIN=%s",
             r->plugin);
    snprintf(transport_env, sizeof(transport_env), "TNT_TRANSPORT=%s",
             r->transport ? r->transport : "auto");
    const char *env[] = {plugin_env, transport_env, r->extra_env, NULL};
    th_job_t job = {.name = r->plugin, .nranks = 1, .env = env,
                    .fn = refusal_rank, .arg = (void *)r, .deadline_s = 60,
                    .no_init = 1};
    th_run_job(&job, NULL);
}

static void fake_path(refusal_t *r, const char *name)
{
    snprintf(r->plugin, sizeof(r->plugin), "%s/%s",
             need_env("TNT_TEST_FAKE_PLUGIN_DIR"), name);
}

static void test_missing_file(void)
{
    refusal_t r = {.must_name = {"/nonexistent/libtnt-net-nope.so",
                                 "cannot be loaded", "No such file"}};
    snprintf(r.plugin, sizeof(r.plugin), "/nonexistent/libtnt-net-nope.so");
    expect_refusal(&r);
}

static void test_no_symbol(void)
{
    refusal_t r = {.must_name = {"libfake-plugin-nosym.so",
                                 "no symbol tnt_transport_plugin_v4",
                                 "undefined symbol"}};
    fake_path(&r, "libfake-plugin-nosym.so");
    expect_refusal(&r);
}

static void test_newer_version(void)
{
    refusal_t r = {.must_name = {"libfake-plugin-v5.so",
                                 "interface version 5",
                                 "versions 1 to 4"}};
    fake_path(&r, "libfake-plugin-v5.so");
    expect_refusal(&r);
}

static void test_incomplete_table(void)
{
    refusal_t r = {.must_name = {"libfake-plugin-nosend.so",
                                 "without 'send'"}};
    fake_path(&r, "libfake-plugin-nosend.so");
    expect_refusal(&r);
}

/* The plugin's parameter parser fails in its own copy of param.c: the
 * message must still reach the application, through env->set_error. */
static void test_plugin_error_reaches_app(void)
{
    refusal_t r = {.transport = "tcp-plugin",
                   .extra_env = "TNT_SOCKETS_PER_PEER=lots",
                   .must_name = {"TNT_SOCKETS_PER_PEER", "lots"}};
    snprintf(r.plugin, sizeof(r.plugin), "%s",
             need_env("TNT_TEST_TCP_PLUGIN"));
    expect_refusal(&r);
}

/* ---- run ---------------------------------------------------------------- */

typedef struct run_arg {
    const char *transport;
} run_arg_t;

static int run_rank(tnt_comm_t comm, int rank, int p, void *arg,
                    th_report_t *rep)
{
    const run_arg_t *a = arg;
    int ok = 1;
    char what[128] = "";
    for (int i = 0; i < p; i++) {
        const tnt_transport_t *t = comm->peers[i].tp;
        if (i != rank && (!t || strcmp(t->name, a->transport) != 0)) {
            ok = 0;
            snprintf(what, sizeof(what), "rank %d has transport %s", i,
                     t ? t->name : "(none)");
        }
    }
    th_report_expect(rep, "peers_on_plugin", ok, 0, "every peer on %s: %s",
                     a->transport, ok ? "yes" : what);
    static const size_t counts[] = {1, 7, 1000, 70000, 1 << 20};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        size_t n = counts[k];
        int32_t *buf = th_xmalloc(n * sizeof(*buf));
        for (size_t i = 0; i < n; i++)
            buf[i] = (int32_t)((i * 2654435761u + (size_t)rank * 40503u) %
                               100000u);
        tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, n, TNT_I32,
                                        TNT_SUM);
        size_t nwrong = 0, first = 0;
        for (size_t i = 0; rc == TNT_SUCCESS && i < n; i++) {
            int64_t want = 0;
            for (int r = 0; r < p; r++)
                want += (int64_t)((i * 2654435761u + (size_t)r * 40503u) %
                                  100000u);
            if (buf[i] != (int32_t)want && nwrong++ == 0)
                first = i;
        }
        char name[64];
        snprintf(name, sizeof(name), "allreduce/i32/n%zu", n);
        th_report_check(rep, name, rc, nwrong, first, buf, n * sizeof(*buf));
        free(buf);
    }
    return 0;
}

static void run_over(const char *path, const char *transport)
{
    char plugin_env[1100], transport_env[128];
    snprintf(plugin_env, sizeof(plugin_env), "TNT_TRANSPORT_PLUGIN=%s",
             path);
    snprintf(transport_env, sizeof(transport_env), "TNT_TRANSPORT=%s",
             transport);
    const char *env[] = {plugin_env, transport_env, NULL};
    run_arg_t a = {transport};
    th_run(3, env, run_rank, &a, 120, NULL);
}

static void test_run_current(void)
{
    run_over(need_env("TNT_TEST_TCP_PLUGIN"), "tcp-plugin");
}

static void test_run_v1(void)
{
    run_over(need_env("TNT_TEST_TCP_PLUGIN_V1"), "tcp-plugin-v1");
}

static const th_test_def_t k_tests[] = {
    {"load", "missing_file", test_missing_file},
    {"load", "no_symbol", test_no_symbol},
    {"load", "newer_version", test_newer_version},
    {"load", "incomplete_table", test_incomplete_table},
    {"load", "plugin_error_reaches_app", test_plugin_error_reaches_app},
    {"run", "tcp_plugin_v4", test_run_current},
    {"run", "tcp_plugin_v1", test_run_v1},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
