/*
 * Unit tests of the launcher detection without any launcher: Slurm's host
 * list syntax (the awkward forms and the errors), and tnt__launch_detect()
 * fed with hand-made environments of tnt-run, Open MPI, Slurm and torchrun:
 * precedence, TNT_BOOTSTRAP, derived root addresses, and malformed values
 * named in the error. The real launchers are exercised by the scripts of
 * the 'launchers' suite.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hostlist.h"
#include "boot/launch_env.h"
#include "harness.h"

/* ---- host lists ----------------------------------------------------------- */

typedef struct hl_case {
    const char *list;
    const char *want; /* hosts joined by ' ' */
} hl_case_t;

static const hl_case_t k_good[] = {
    {"a[1-3,5],b7,c[08-10]", "a1 a2 a3 a5 b7 c08 c09 c10"},
    {"node1", "node1"},
    {"x[9-11]", "x9 x10 x11"},
    {"r[001-002]s", "r001s r002s"},
    {"n[1-2]-ib[3-4]", "n1-ib3 n1-ib4 n2-ib3 n2-ib4"},
    {"[1-2]", "1 2"},
    {"h.example.org,h[2],k_9", "h.example.org h2 k_9"},
    {"a[08-10,1,0]", "a08 a09 a10 a1 a0"},
    {"z[7]", "z7"},
    {"a[1-1],b[00-01]c,d", "a1 b00c b01c d"},
};

static void test_hostlist_good(void)
{
    for (size_t i = 0; i < sizeof k_good / sizeof k_good[0]; i++) {
        tnt_hostlist_t hl;
        tnt_result_t rc = tnt__hostlist_expand("V", k_good[i].list, &hl);
        char got[512] = "";
        size_t k = 0;
        for (size_t h = 0; rc == TNT_SUCCESS && h < hl.n; h++)
            k += (size_t)snprintf(got + k, sizeof got - k, "%s%s",
                                  h ? " " : "", hl.hosts[h]);
        TH_CHECK(rc == TNT_SUCCESS && strcmp(got, k_good[i].want) == 0,
                 "host list '%s': rc %d (%s), got '%s', expected '%s'",
                 k_good[i].list, rc, tnt_last_error(), got, k_good[i].want);
        tnt__hostlist_free(&hl);
    }
}

static void test_hostlist_bad(void)
{
    static const char *const bad[] = {
        "", "a[", "a[1-", "a[1-]", "a[3-1]", "a]", "a[[1]]", "a,,b", ",a",
        "a,", "a[1,]", "a[,1]", "a[x]", "a b", "a[1-2000000]",
        "a[0-999999999]", "a[1234567890]", "a[1-3]]", "a[1]b[2",
        "a[1-2048]b[1-1024]", "a[1-2-3]", "a[1;2]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tnt_hostlist_t hl;
        tnt_result_t rc = tnt__hostlist_expand("MY_NODELIST", bad[i], &hl);
        TH_CHECK(rc == TNT_ERR_CONFIG &&
                 strstr(tnt_last_error(), "MY_NODELIST") && hl.n == 0 &&
                 !hl.hosts,
                 "host list '%s' gave rc %d, %zu hosts, message '%s'; "
                 "expected TNT_ERR_CONFIG naming MY_NODELIST", bad[i], rc,
                 hl.n, tnt_last_error());
        tnt__hostlist_free(&hl);
    }
}

static void test_hostlist_big(void)
{
    tnt_hostlist_t hl;
    tnt_result_t rc = tnt__hostlist_expand("V", "n[00000-09999],m[1-3]",
                                           &hl);
    TH_CHECK(rc == TNT_SUCCESS && hl.n == 10003 &&
             strcmp(hl.hosts[0], "n00000") == 0 &&
             strcmp(hl.hosts[9999], "n09999") == 0 &&
             strcmp(hl.hosts[10002], "m3") == 0,
             "10003-host list: rc %d, %zu hosts", rc, hl.n);
    tnt__hostlist_free(&hl);
}

/* ---- launcher detection ------------------------------------------------- */

static const char *const k_vars[] = {
    "TNT_RANK", "TNT_SIZE", "TNT_LOCAL_RANK", "TNT_LOCAL_SIZE",
    "TNT_ROOT_ADDR", "TNT_ROOT_PORT", "TNT_JOB_KEY", "TNT_BOOTSTRAP",
    "PMIX_NAMESPACE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_hnp_uri", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
    "SLURM_NODELIST", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID",
    "SLURM_STEPID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", NULL};

/* Clear every variable any launcher sets (this test may itself run under
 * one), then set "K=V" entries. */
static void set_env(const char *const *kv)
{
    for (int i = 0; k_vars[i]; i++)
        unsetenv(k_vars[i]);
    for (int i = 0; kv[i]; i++) {
        char k[64];
        const char *eq = strchr(kv[i], '=');
        snprintf(k, sizeof k, "%.*s", (int)(eq - kv[i]), kv[i]);
        setenv(k, eq + 1, 1);
    }
}

typedef struct det_case {
    const char *env[16];
    const char *kind;    /* expected launcher; NULL: expect an error */
    int rank, size, local_rank, local_size;
    const char *root;    /* expected root address ("" none); for errors:
                            a word the message must contain */
    const char *key;     /* expected job key (NULL: not checked) */
} det_case_t;

static char g_port_slurm[64], g_port_ompi[64], g_port_ompi_nl[64];

static const det_case_t k_det[] = {
    {{NULL}, "single", 0, 1, 0, 1, "", ""},
    {{"TNT_BOOTSTRAP=auto"}, "single", 0, 1, 0, 1, "", ""},
    /* Ours first, even with others present. */
    {{"TNT_RANK=1", "TNT_SIZE=4", "TNT_ROOT_ADDR=h:7", "TNT_LOCAL_RANK=1",
      "TNT_LOCAL_SIZE=2", "TNT_JOB_KEY=k", "SLURM_PROCID=0",
      "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "RANK=3", "WORLD_SIZE=5", NULL},
     "tnt", 1, 4, 1, 2, "h:7", "k"},
    {{"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2",
      "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
      "OMPI_MCA_ess_base_jobid=77", "SLURM_PROCID=0", "SLURM_NTASKS=1",
      "SLURM_STEP_ID=0", NULL},
     "ompi", 2, 4, 2, 4, g_port_ompi, "ompi:77"},
    {{"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3",
      "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
      "OMPI_MCA_ess_base_jobid=77", "SLURM_JOB_NODELIST=c[08-10]", NULL},
     "ompi", 3, 4, 1, 2, g_port_ompi_nl, NULL},
    {{"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3",
      "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL},
     NULL, 0, 0, 0, 0, "TNT_ROOT_ADDR", NULL},
    {{"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=4", NULL},
     NULL, 0, 0, 0, 0, "OMPI_COMM_WORLD_RANK", NULL},
    {{"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=1",
      "OMPI_COMM_WORLD_LOCAL_RANK=3", "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL},
     NULL, 0, 0, 0, 0, "OMPI_COMM_WORLD_LOCAL_RANK", NULL},
    /* Slurm: local size from the tasks per node of this node. */
    {{"SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_LOCALID=1",
      "SLURM_NODEID=1", "SLURM_STEP_TASKS_PER_NODE=2(x2)",
      "SLURM_STEP_NODELIST=node[01-02]", "SLURM_JOB_ID=123",
      "SLURM_STEP_ID=0", NULL},
     "slurm", 3, 4, 1, 2, g_port_slurm, "slurm:123.0"},
    {{"SLURM_PROCID=3", "SLURM_NTASKS=5", "SLURM_LOCALID=0",
      "SLURM_NODEID=2", "SLURM_STEP_TASKS_PER_NODE=2(x2),1",
      "SLURM_STEP_NODELIST=node[01-03]", "SLURM_JOB_ID=123",
      "SLURM_STEP_ID=0", "TNT_ROOT_PORT=12345", "TNT_JOB_KEY=mine", NULL},
     "slurm", 3, 5, 0, 1, "node01:12345", "mine"},
    {{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=4",
      "SLURM_STEP_NODELIST=a,b", "TNT_ROOT_ADDR=10.1.2.3:999", NULL},
     "slurm", 1, 2, -1, -1, "10.1.2.3:999", NULL},
    /* A batch script is not a step: no ranks. */
    {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=5", NULL},
     "single", 0, 1, 0, 1, "", ""},
    {{"SLURM_PROCID=x", "SLURM_NTASKS=4", "SLURM_STEP_ID=0", NULL},
     NULL, 0, 0, 0, 0, "SLURM_PROCID", NULL},
    {{"SLURM_PROCID=1", "SLURM_STEP_ID=0", NULL},
     NULL, 0, 0, 0, 0, "SLURM_NTASKS", NULL},
    {{"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_STEP_ID=0",
      "SLURM_STEP_TASKS_PER_NODE=2(x", NULL},
     NULL, 0, 0, 0, 0, "SLURM_STEP_TASKS_PER_NODE", NULL},
    {{"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_STEP_ID=0",
      "SLURM_STEP_TASKS_PER_NODE=2,2", "SLURM_NODEID=0",
      "SLURM_STEP_NODELIST=node[1-", NULL},
     NULL, 0, 0, 0, 0, "SLURM_STEP_NODELIST", NULL},
    /* torchrun: the next port after its store. */
    {{"RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4",
      "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500",
      "TORCHELASTIC_RUN_ID=r1", NULL},
     "torchrun", 1, 4, 1, 4, "127.0.0.1:29501", "torchrun:r1:127.0.0.1:"
     "29500:0"},
    {{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=::1", "MASTER_PORT=29500",
      NULL},
     "torchrun", 0, 2, -1, -1, "[::1]:29501", NULL},
    {{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=29500",
      "TNT_ROOT_PORT=40000", NULL},
     "torchrun", 0, 2, -1, -1, "m:40000", NULL},
    {{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=65535", NULL},
     NULL, 0, 0, 0, 0, "TNT_ROOT_PORT", NULL},
    {{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=abc", NULL},
     NULL, 0, 0, 0, 0, "MASTER_PORT", NULL},
    {{"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=29500", NULL},
     NULL, 0, 0, 0, 0, "MASTER_ADDR", NULL},
    /* torchrun inside a Slurm step: the workers are the ranks. */
    {{"RANK=2", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=2",
      "TORCHELASTIC_RUN_ID=x", "SLURM_PROCID=0", "SLURM_NTASKS=1",
      "SLURM_STEP_ID=0", NULL},
     "torchrun", 2, 4, -1, -1, "m:3", NULL},
    /* Without its marker, torchrun's variables come after Slurm's. */
    {{"RANK=2", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=2",
      "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=0", NULL},
     "slurm", 0, 1, -1, -1, "", NULL},
    /* Forcing. */
    {{"TNT_BOOTSTRAP=single", "TNT_RANK=1", "TNT_SIZE=2", NULL},
     "single", 0, 1, 0, 1, "", ""},
    {{"TNT_BOOTSTRAP=torchrun", "TNT_RANK=1", "TNT_SIZE=2", "RANK=0",
      "WORLD_SIZE=1", NULL},
     "torchrun", 0, 1, -1, -1, "", NULL},
    {{"TNT_BOOTSTRAP=slurm", NULL}, NULL, 0, 0, 0, 0, "SLURM_NTASKS", NULL},
    {{"TNT_BOOTSTRAP=mpi", NULL}, NULL, 0, 0, 0, 0, "TNT_BOOTSTRAP", NULL},
    /* Ours, incomplete. */
    {{"TNT_ROOT_ADDR=h:1", NULL}, NULL, 0, 0, 0, 0, "TNT_SIZE", NULL},
    {{"TNT_RANK=0", "TNT_SIZE=2", "TNT_ROOT_ADDR=h:1", "TNT_LOCAL_RANK=2",
      "TNT_LOCAL_SIZE=2", NULL},
     NULL, 0, 0, 0, 0, "TNT_LOCAL_RANK", NULL},
};

static void test_detect(void)
{
    snprintf(g_port_ompi, sizeof g_port_ompi, "127.0.0.1:%d",
             tnt__launch_port_of("ompi:77"));
    snprintf(g_port_ompi_nl, sizeof g_port_ompi_nl, "c08:%d",
             tnt__launch_port_of("ompi:77"));
    snprintf(g_port_slurm, sizeof g_port_slurm, "node01:%d",
             tnt__launch_port_of("slurm:123.0"));
    for (size_t i = 0; i < sizeof k_det / sizeof k_det[0]; i++) {
        const det_case_t *c = &k_det[i];
        set_env(c->env);
        tnt_launch_t l;
        tnt_result_t rc = tnt__launch_detect(&l);
        char desc[512];
        size_t k = 0;
        for (int e = 0; c->env[e] && k < sizeof desc; e++)
            k += (size_t)snprintf(desc + k, sizeof desc - k, " %s",
                                  c->env[e]);
        if (!c->kind) {
            TH_CHECK(rc == TNT_ERR_CONFIG &&
                     strstr(tnt_last_error(), c->root),
                     "env%s: rc %d, message '%s'; expected TNT_ERR_CONFIG "
                     "naming %s", desc, rc, tnt_last_error(), c->root);
            continue;
        }
        int ok = rc == TNT_SUCCESS &&
                 strcmp(tnt__launcher_name(l.kind), c->kind) == 0 &&
                 l.rank == c->rank && l.size == c->size &&
                 l.local_rank == c->local_rank &&
                 l.local_size == c->local_size &&
                 strcmp(l.root_addr, c->root) == 0 &&
                 (!c->key || strcmp(l.job_key, c->key) == 0);
        TH_CHECK(ok, "env%s: rc %d (%s); got %s rank %d/%d local %d/%d root "
                 "'%s' key '%s'; expected %s rank %d/%d local %d/%d root "
                 "'%s' key '%s'", desc, rc, rc ? tnt_last_error() : "ok",
                 tnt__launcher_name(l.kind), l.rank, l.size, l.local_rank,
                 l.local_size, l.root_addr, l.job_key, c->kind, c->rank,
                 c->size, c->local_rank, c->local_size, c->root,
                 c->key ? c->key : "(any)");
        if (rc == TNT_SUCCESS)
            tnt__launch_release(&l);
    }
    set_env((const char *const[]){NULL});
}

static void test_port_formula(void)
{
    /* Deterministic, in the documented range, and different for
     * neighbouring steps of one job (the common case on a cluster). */
    int seen_same = 0;
    for (int step = 0; step < 50; step++) {
        char id[64], id2[64];
        snprintf(id, sizeof id, "slurm:4242.%d", step);
        snprintf(id2, sizeof id2, "slurm:4242.%d", step + 1);
        int p = tnt__launch_port_of(id);
        TH_CHECK(p >= TNT_ROOT_PORT_BASE &&
                 p < TNT_ROOT_PORT_BASE + TNT_ROOT_PORT_SPAN &&
                 p < 32768 && p == tnt__launch_port_of(id),
                 "port of '%s' is %d", id, p);
        seen_same += p == tnt__launch_port_of(id2);
    }
    TH_CHECK(seen_same <= 1, "%d of 50 neighbouring steps share a port",
             seen_same);
}

static const th_test_def_t k_tests[] = {
    {"hostlist", "good", test_hostlist_good},
    {"hostlist", "bad", test_hostlist_bad},
    {"hostlist", "big", test_hostlist_big},
    {"detect", "environments", test_detect},
    {"detect", "port_formula", test_port_formula},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
