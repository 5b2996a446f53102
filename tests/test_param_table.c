/*
 * Unit tests of the table of environment variables (lib/util/param_table.h):
 * every entry is well formed and its default parses with its own type's
 * parser; the typed reads take the value, the default, or report the
 * variable by name; other programs' accessor refuses TNT_* names; and the
 * user documentation (docs/environment.md, the first argument) lists
 * exactly the table's variables in the first column of its tables, so
 * neither can drift from the other.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/error.h"
#include "util/hostid.h"
#include "util/launcher_env.h"
#include "util/param.h"
#include "util/param_table.h"

static const char *doc_path;

static void test_entries_well_formed(void)
{
    for (int i = 0; i < TNT_VAR_COUNT; i++) {
        const tnt_env_def_t *d = tnt__env_def((tnt_env_id_t)i);
        CU_ASSERT_PTR_NOT_NULL_FATAL(d);
        CU_ASSERT_PTR_NOT_NULL_FATAL(d->name);
        CU_ASSERT(strncmp(d->name, "TNT_", 4) == 0);
        CU_ASSERT(d->help && *d->help);
        CU_ASSERT(d->reader && *d->reader);
        CU_ASSERT(tnt__env_find(d->name) == d); /* names are unique */
        if (d->type == TNT_ENV_T_LONG || d->type == TNT_ENV_T_SECONDS)
            CU_ASSERT(d->min <= d->max);
        if (d->type == TNT_ENV_T_CHOICE || d->type == TNT_ENV_T_TEXT)
            CU_ASSERT(d->values && *d->values);
    }
    CU_ASSERT_PTR_NULL(tnt__env_def(TNT_VAR_COUNT));
    CU_ASSERT_PTR_NULL(tnt__env_find("TNT_NO_SUCH_VARIABLE"));
}

static void test_defaults_parse(void)
{
    for (int i = 0; i < TNT_VAR_COUNT; i++) {
        const tnt_env_def_t *d = tnt__env_def((tnt_env_id_t)i);
        if (!d->def)
            continue; /* derived by its reader when unset */
        tnt_result_t rc = tnt__env_check(d, d->def);
        if (rc != TNT_SUCCESS)
            printf("\n  %s: default '%s' does not parse: %s", d->name,
                   d->def, tnt_last_error());
        CU_ASSERT_EQUAL(rc, TNT_SUCCESS);
    }
}

static void test_check_rejects(void)
{
    static const struct {
        tnt_env_id_t id;
        const char *value;
    } bad[] = {
        {TNT_VAR_SOCKET_BUFFER, "1x"},  {TNT_VAR_HEARTBEAT, "-1"},
        {TNT_VAR_SOCKETS_PER_PEER, "17"}, {TNT_VAR_SOCKETS_PER_PEER, "0"},
        {TNT_VAR_BOOTSTRAP, "mpich"},   {TNT_VAR_TOPOLOGY, ""},
        {TNT_VAR_HOST_ID, ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const tnt_env_def_t *d = tnt__env_def(bad[i].id);
        CU_ASSERT_EQUAL(tnt__env_check(d, bad[i].value), TNT_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(tnt_last_error(), d->name));
    }
    CU_ASSERT_EQUAL(tnt__env_check(tnt__env_def(TNT_VAR_LOG_ALL_RANKS),
                                   "yes"), TNT_SUCCESS);
}

/* One grammar for every variable (param.h, docs/environment.md "Values"),
 * checked on each entry of the table at its own edges: numbers in
 * decimal digits exactly as written (no spaces, sign, 0x, exponent),
 * within the entry's range, overflow refused; words of a choice exactly. */
static int check_ok(const tnt_env_def_t *d, const char *v, int want)
{
    tnt_result_t rc = tnt__env_check(d, v);
    int ok = rc == TNT_SUCCESS;
    if (ok != want) {
        printf("\n  %s='%s': %s, expected %s (%s)", d->name, v,
               ok ? "accepted" : "refused", want ? "accepted" : "refused",
               ok ? "" : tnt_last_error());
        return 1;
    }
    if (!ok && !strstr(tnt_last_error(), d->name)) {
        printf("\n  %s='%s': the error does not name it: %s", d->name, v,
               tnt_last_error());
        return 1;
    }
    return 0;
}

static void test_one_grammar(void)
{
    static const char *const junk[] = {
        "", "0x10", "1e3", "+5", "-1", " 5", "5 ", "5\t", "abc",
        "99999999999999999999999", "18446744073709551616G"};
    int bad = 0;
    char v[64];
    for (int i = 0; i < TNT_VAR_COUNT; i++) {
        const tnt_env_def_t *d = tnt__env_def((tnt_env_id_t)i);
        switch (d->type) {
        case TNT_ENV_T_SIZE:
            bad |= check_ok(d, "0", 1) | check_ok(d, "4096", 1) |
                   check_ok(d, "4k", 1) | check_ok(d, "64KiB", 1) |
                   check_ok(d, "1G", 1) | check_ok(d, "4.5k", 0) |
                   check_ok(d, " 4k", 0) | check_ok(d, "4k ", 0);
            for (size_t j = 0; j < sizeof junk / sizeof junk[0]; j++)
                bad |= check_ok(d, junk[j], 0);
            break;
        case TNT_ENV_T_SECONDS:
        case TNT_ENV_T_LONG:
            snprintf(v, sizeof v, "%ld", d->min);
            bad |= check_ok(d, v, 1);
            snprintf(v, sizeof v, "%ld", d->max);
            bad |= check_ok(d, v, 1);
            snprintf(v, sizeof v, "%ld", d->min - 1);
            bad |= check_ok(d, v, 0);
            snprintf(v, sizeof v, "%ld", d->max + 1);
            bad |= check_ok(d, v, 0);
            snprintf(v, sizeof v, " %ld", d->min);
            bad |= check_ok(d, v, 0);
            snprintf(v, sizeof v, "+%ld", d->min);
            bad |= check_ok(d, v, 0);
            snprintf(v, sizeof v, "%ld.5", d->min);
            bad |= check_ok(d, v, d->type == TNT_ENV_T_SECONDS &&
                                      d->min < d->max);
            snprintf(v, sizeof v, "%ldk", d->min);
            bad |= check_ok(d, v, 0);
            bad |= check_ok(d, ".5", 0) | check_ok(d, "5.", 0) |
                   check_ok(d, "inf", 0) | check_ok(d, "nan", 0);
            for (size_t j = 0; j < sizeof junk / sizeof junk[0]; j++)
                bad |= check_ok(d, junk[j], 0);
            break;
        case TNT_ENV_T_CHOICE:
            for (const char *p = d->values; p && *p;) {
                const char *bar = strchr(p, '|');
                int len = bar ? (int)(bar - p) : (int)strlen(p);
                snprintf(v, sizeof v, "%.*s", len, p);
                bad |= check_ok(d, v, 1);
                snprintf(v, sizeof v, " %.*s", len, p);
                bad |= check_ok(d, v, 0);
                snprintf(v, sizeof v, "%.*s ", len, p);
                bad |= check_ok(d, v, 0);
                p = bar ? bar + 1 : NULL;
            }
            bad |= check_ok(d, "", 0);
            break;
        case TNT_ENV_T_TEXT:
            bad |= check_ok(d, "x", 1) | check_ok(d, "", 0);
            break;
        case TNT_ENV_T_FLAG:
            bad |= check_ok(d, "0", 1) | check_ok(d, "yes", 1);
            break;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* An empty value means unset, for every variable: tnt__env says so, and
 * the typed reads take the default. TNT_HOST_ID was the exception (an
 * empty one was refused). */
static void test_empty_is_unset(void)
{
    for (int i = 0; i < TNT_VAR_COUNT; i++) {
        const tnt_env_def_t *d = tnt__env_def((tnt_env_id_t)i);
        const char *old = getenv(d->name);
        char *keep = old ? strdup(old) : NULL;
        setenv(d->name, "", 1);
        if (tnt__env((tnt_env_id_t)i) != NULL) {
            printf("\n  %s='' reads as set", d->name);
            CU_FAIL("an empty value is not unset");
        }
        if (keep)
            setenv(d->name, keep, 1);
        else
            unsetenv(d->name);
        free(keep);
    }
    char unset_id[128], empty_id[128];
    unsetenv("TNT_HOST_ID");
    CU_ASSERT_EQUAL_FATAL(tnt__host_id(unset_id, sizeof unset_id),
                          TNT_SUCCESS);
    setenv("TNT_HOST_ID", "", 1);
    tnt_result_t rc = tnt__host_id(empty_id, sizeof empty_id);
    if (rc != TNT_SUCCESS)
        printf("\n  TNT_HOST_ID='': %s", tnt_last_error());
    CU_ASSERT_EQUAL(rc, TNT_SUCCESS);
    CU_ASSERT_STRING_EQUAL(empty_id, unset_id);
    unsetenv("TNT_HOST_ID");
}

/* The engine's knobs as tnt_comm_init reads them (tnt__params_load and
 * the rules that need the rank count), at the edges the issue found. */
static tnt_result_t load_with(const char *name, const char *value,
                              int nranks)
{
    tnt_params_t p;
    setenv(name, value, 1);
    tnt__clear_error();
    tnt_result_t rc = tnt__params_load(&p);
    if (rc == TNT_SUCCESS)
        rc = tnt__params_check_ranks(&p, nranks);
    unsetenv(name);
    return rc;
}

static void test_engine_edges(void)
{
    static const struct {
        const char *name, *value;
        int nranks, ok;
        const char *says; /* in the error */
    } k[] = {
        {"TNT_TIMEOUT", "0", 2, 0, "expected seconds from 1 to 1000000"},
        {"TNT_TIMEOUT", "-1", 2, 0, "expected seconds from 1 to 1000000"},
        {"TNT_TIMEOUT", "1000001", 2, 0, "from 1 to 1000000"},
        {"TNT_TIMEOUT", "1e3", 2, 0, "no sign, spaces or exponent"},
        {"TNT_TIMEOUT", "0x10", 2, 0, "TNT_TIMEOUT"},
        {"TNT_TIMEOUT", "1", 2, 1, NULL},
        {"TNT_TIMEOUT", "2.5", 2, 1, NULL},
        {"TNT_CONNECT_TIMEOUT", "0", 2, 0, "from 1 to 1000000"},
        {"TNT_CONNECT_TIMEOUT", "1000000", 2, 1, NULL},
        {"TNT_SPIN_US", " 5", 2, 0, "TNT_SPIN_US"},
        {"TNT_SPIN_US", "1000000", 2, 1, NULL},
        {"TNT_SEGMENT_BYTES", "63", 2, 0, "at least 64"},
        {"TNT_SEGMENT_BYTES", "64", 2, 1, NULL},
        {"TNT_SEGMENT_BYTES", "1e3", 2, 0, "TNT_SEGMENT_BYTES"},
        {"TNT_FLOW_BATCH", "2", 2, 0, "TNT_FLOW_BATCH"},
        {"TNT_MAX_UNEXPECTED_BYTES", "1", 4, 0, "too small for 4 ranks"},
        {"TNT_MAX_UNEXPECTED_BYTES", "8k", 4, 0, "at least 12288"},
        {"TNT_MAX_UNEXPECTED_BYTES", "12k", 4, 1, NULL},
        {"TNT_MAX_UNEXPECTED_BYTES", "4k", 1, 1, NULL},
        {"TNT_MAX_UNEXPECTED_BYTES", "4k", 2, 1, NULL},
        {"TNT_MAX_UNEXPECTED_BYTES", "4095", 2, 0, "TNT_EAGER_BYTES=0"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        tnt_result_t rc = load_with(k[i].name, k[i].value, k[i].nranks);
        const char *msg = tnt_last_error();
        int ok = k[i].ok ? rc == TNT_SUCCESS
                         : rc == TNT_ERR_CONFIG && strstr(msg, k[i].name) &&
                               strstr(msg, k[i].says);
        if (!ok)
            printf("\n  %s='%s' at p = %d: rc %d '%s', expected %s%s",
                   k[i].name, k[i].value, k[i].nranks, rc, msg,
                   k[i].ok ? "success" : "an error saying ",
                   k[i].ok ? "" : k[i].says);
        CU_ASSERT(ok);
    }
    /* TNT_HEARTBEAT, read by the transports through the typed read. */
    double hb = 0;
    setenv("TNT_HEARTBEAT", "99999999999999999999999", 1);
    CU_ASSERT_EQUAL(tnt__env_seconds(TNT_VAR_HEARTBEAT, &hb), TNT_ERR_CONFIG);
    setenv("TNT_HEARTBEAT", "65535", 1);
    CU_ASSERT_EQUAL(tnt__env_seconds(TNT_VAR_HEARTBEAT, &hb), TNT_SUCCESS);
    setenv("TNT_HEARTBEAT", "0", 1); /* off */
    CU_ASSERT_EQUAL(tnt__env_seconds(TNT_VAR_HEARTBEAT, &hb), TNT_SUCCESS);
    CU_ASSERT_EQUAL(hb, 0.0);
    unsetenv("TNT_HEARTBEAT");
}

static void test_typed_reads(void)
{
    size_t sz = 7;
    unsetenv("TNT_SOCKET_BUFFER");
    CU_ASSERT_EQUAL(tnt__env_size(TNT_VAR_SOCKET_BUFFER, &sz), TNT_SUCCESS);
    CU_ASSERT_EQUAL(sz, 0); /* the table's default */
    setenv("TNT_SOCKET_BUFFER", "4k", 1);
    CU_ASSERT_EQUAL(tnt__env_size(TNT_VAR_SOCKET_BUFFER, &sz), TNT_SUCCESS);
    CU_ASSERT_EQUAL(sz, 4096);
    setenv("TNT_SOCKET_BUFFER", "4q", 1);
    CU_ASSERT_EQUAL(tnt__env_size(TNT_VAR_SOCKET_BUFFER, &sz),
                    TNT_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tnt_last_error(), "TNT_SOCKET_BUFFER"));
    setenv("TNT_SOCKET_BUFFER", "", 1); /* empty: unset, the default */
    CU_ASSERT_EQUAL(tnt__env_size(TNT_VAR_SOCKET_BUFFER, &sz), TNT_SUCCESS);
    CU_ASSERT_EQUAL(sz, 0);
    CU_ASSERT_PTR_NULL(tnt__env(TNT_VAR_SOCKET_BUFFER));
    unsetenv("TNT_SOCKET_BUFFER");
    CU_ASSERT_PTR_NULL(tnt__env(TNT_VAR_SOCKET_BUFFER));

    long v = -5; /* no default: left alone when unset */
    unsetenv("TNT_IB_RETRY_CNT");
    CU_ASSERT_EQUAL(tnt__env_long(TNT_VAR_IB_RETRY_CNT, &v), TNT_SUCCESS);
    CU_ASSERT_EQUAL(v, -5);
    setenv("TNT_IB_RETRY_CNT", "8", 1);
    CU_ASSERT_EQUAL(tnt__env_long(TNT_VAR_IB_RETRY_CNT, &v), TNT_ERR_CONFIG);
    unsetenv("TNT_IB_RETRY_CNT");

    double s = 0;
    unsetenv("TNT_HEARTBEAT");
    CU_ASSERT_EQUAL(tnt__env_seconds(TNT_VAR_HEARTBEAT, &s), TNT_SUCCESS);
    CU_ASSERT_DOUBLE_EQUAL(s, 10.0, 1e-12);
}

static void test_launcher_env(void)
{
    setenv("TNT_RANK", "3", 1);
    CU_ASSERT_PTR_NULL(tnt__launcher_env("TNT_RANK")); /* the table's */
    CU_ASSERT_STRING_EQUAL(tnt__env_named("TNT_RANK"), "3");
    unsetenv("TNT_RANK");
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    CU_ASSERT_STRING_EQUAL(tnt__launcher_env("OMPI_COMM_WORLD_RANK"), "2");
    setenv("OMPI_COMM_WORLD_RANK", "", 1);
    CU_ASSERT_PTR_NULL(tnt__launcher_env("OMPI_COMM_WORLD_RANK"));
    unsetenv("OMPI_COMM_WORLD_RANK");
    setenv("TNT_NOT_IN_TABLE", "1", 1);
    CU_ASSERT_PTR_NULL(tnt__env_named("TNT_NOT_IN_TABLE"));
    unsetenv("TNT_NOT_IN_TABLE");
}

/* Adds the TNT_* names of the first cell of a table row to `seen`
 * (indexed like the table); an unknown one is reported and fails. */
static int doc_row(const char *line, int *seen, int lineno)
{
    int unknown = 0;
    const char *end = strchr(line + 1, '|');
    for (const char *p = line + 1; end && p < end; p++) {
        if (strncmp(p, "TNT_", 4) != 0 || (p > line && (p[-1] == '_' ||
                                                        (p[-1] >= 'A' &&
                                                         p[-1] <= 'Z'))))
            continue;
        size_t n = 4;
        while (p + n < end && ((p[n] >= 'A' && p[n] <= 'Z') ||
                               (p[n] >= '0' && p[n] <= '9') || p[n] == '_'))
            n++;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        const tnt_env_def_t *d = tnt__env_find(name);
        if (d)
            seen[d - tnt__env_def((tnt_env_id_t)0)]++;
        else {
            printf("\n  %s:%d lists %s, which is not in the table", doc_path,
                   lineno, name);
            unknown = 1;
        }
        p += n - 1;
    }
    return unknown;
}

static void test_doc_lists_table(void)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc_path);
    FILE *f = fopen(doc_path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int seen[TNT_VAR_COUNT] = {0}, bad = 0, lineno = 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '|')
            bad |= doc_row(line, seen, lineno);
    }
    fclose(f);
    for (int i = 0; i < TNT_VAR_COUNT; i++)
        if (seen[i] != 1) {
            printf("\n  %s: %s is listed %d times in its tables (once "
                   "expected)", doc_path, tnt__env_def((tnt_env_id_t)i)->name,
                   seen[i]);
            bad = 1;
        }
    CU_ASSERT_EQUAL(bad, 0);
}

static const th_test_def_t k_tests[] = {
    {"param_table", "entries_well_formed", test_entries_well_formed},
    {"param_table", "defaults_parse", test_defaults_parse},
    {"param_table", "check_rejects", test_check_rejects},
    {"param_table", "typed_reads", test_typed_reads},
    {"param_table", "one_grammar", test_one_grammar},
    {"param_table", "empty_is_unset", test_empty_is_unset},
    {"param_table", "engine_edges", test_engine_edges},
    {"param_table", "launcher_env", test_launcher_env},
    {"param_table", "doc_lists_table", test_doc_lists_table},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    /* `test_param_table DOC [suite [test]]`: the document first. */
    doc_path = argc > 1 ? argv[1] : NULL;
    return th_main(argc > 1 ? argc - 1 : argc, argc > 1 ? argv + 1 : argv,
                   k_tests);
}
