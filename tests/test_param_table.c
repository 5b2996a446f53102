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
#include "util/launcher_env.h"
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
        if (d->type == TNT_ENV_T_LONG)
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
    setenv("TNT_SOCKET_BUFFER", "", 1); /* empty: the default */
    CU_ASSERT_EQUAL(tnt__env_size(TNT_VAR_SOCKET_BUFFER, &sz), TNT_SUCCESS);
    CU_ASSERT_EQUAL(sz, 0);
    CU_ASSERT_STRING_EQUAL(tnt__env(TNT_VAR_SOCKET_BUFFER), "");
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
