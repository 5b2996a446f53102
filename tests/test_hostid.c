/*
 * Host identity (lib/util/hostid.c): stable within a process, readable
 * (starts with the hostname), different in another network namespace of
 * the same kernel (where the shm rendezvous cannot reach), replaced by a
 * valid TNT_HOST_ID and refused when TNT_HOST_ID is malformed.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/hostid.h"
#include "harness.h"

static void test_default(void)
{
    unsetenv("TNT_HOST_ID");
    char a[64], b[64], host[256] = "";
    TH_CHECK(tnt__host_id(a, sizeof(a)) == TNT_SUCCESS, "host id: %s",
             tnt_last_error());
    TH_CHECK(tnt__host_id(b, sizeof(b)) == TNT_SUCCESS, "host id again");
    TH_CHECK(strcmp(a, b) == 0, "host id not stable: %s vs %s", a, b);
    gethostname(host, sizeof(host) - 1);
    TH_CHECK(strncmp(a, host, strlen(host) < 40 ? strlen(host) : 40) == 0,
             "host id '%s' does not start with hostname '%s'", a, host);
    TH_CHECK(strchr(a, '/') != NULL, "host id '%s' has no hash part", a);
}

static void test_other_netns(void)
{
    unsetenv("TNT_HOST_ID");
    char mine[64];
    tnt__host_id(mine, sizeof(mine));
    int pfd[2];
    TH_CHECK(pipe(pfd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        char other[64] = "";
        /* A fresh network namespace needs root; say so and stop. */
        if (unshare(CLONE_NEWNET) != 0)
            snprintf(other, sizeof(other), "!%s", strerror(errno));
        else
            tnt__host_id(other, sizeof(other));
        ssize_t n = write(pfd[1], other, sizeof(other));
        _exit(n == (ssize_t)sizeof(other) ? 0 : 1);
    }
    close(pfd[1]);
    char other[64] = "";
    ssize_t n = read(pfd[0], other, sizeof(other));
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    TH_CHECK(n == (ssize_t)sizeof(other), "no answer from the child");
    if (other[0] == '!') {
        printf("\n  (no new network namespace: %s; part skipped) ",
               other + 1);
        return;
    }
    TH_CHECK(strcmp(mine, other) != 0, "same host id '%s' in another "
             "network namespace", mine);
    const char *sa = strchr(mine, '/'), *sb = strchr(other, '/');
    TH_CHECK(sa && sb && sa - mine == sb - other &&
                 strncmp(mine, other, (size_t)(sa - mine)) == 0,
             "hostname part differs: %s vs %s", mine, other);
}

static void test_override(void)
{
    char id[64];
    setenv("TNT_HOST_ID", "rack3-node7", 1);
    TH_CHECK(tnt__host_id(id, sizeof(id)) == TNT_SUCCESS &&
                 strcmp(id, "rack3-node7") == 0, "override gave '%s'", id);
    /* An empty value is unset (test_param_table: empty_is_unset). */
    static const char *const bad[] = {"two words", "tab\there",
        "0123456789012345678901234567890123456789012345678901234567890123"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("TNT_HOST_ID", bad[i], 1);
        tnt_result_t rc = tnt__host_id(id, sizeof(id));
        TH_CHECK(rc == TNT_ERR_CONFIG && strstr(tnt_last_error(),
                                                 "TNT_HOST_ID"),
                 "TNT_HOST_ID='%s' gave %d: %s", bad[i], rc,
                 tnt_last_error());
    }
    unsetenv("TNT_HOST_ID");
}

static const th_test_def_t k_tests[] = {
    {"hostid", "default", test_default},
    {"hostid", "other_netns", test_other_netns},
    {"hostid", "override", test_override},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
