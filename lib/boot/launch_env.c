/*
 * Launcher detection for tnt_comm_init_from_env(). The order of
 * precedence (docs/launchers.md) is: our TNT_* variables, a PMIx server,
 * Open MPI's then Slurm's environment, torchrun's env:// variables, and
 * else a world of one; TNT_BOOTSTRAP names one to force it. Every value
 * read is validated, and an error names the variable. Open MPI and Slurm
 * without PMIx give no rendezvous address, so one is derived: the first
 * host of the step (the loopback when all ranks share a node) and a port
 * computed from the job identity.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot/boot_pmix.h"
#include "util/error.h"
#include "util/hostlist.h"
#include "boot/launch_env.h"
#include "util/log.h"
#include "util/launcher_env.h"
#include "util/param.h"
#include "util/param_table.h"

#define MAX_RANKS TNT_ENV_MAX_RANKS

static const char *const k_names[TNT_LAUNCHER_COUNT] = {
    "tnt", "pmix", "ompi", "slurm", "torchrun", "single"};

const char *tnt__launcher_name(tnt_launcher_t kind)
{
    return (unsigned)kind < TNT_LAUNCHER_COUNT ? k_names[kind] : "unknown";
}

/* A variable by name, NULL when unset or empty: ours through the table
 * of variables, the launchers' own through their accessor. */
static const char *env(const char *name)
{
    return strncmp(name, "TNT_", 4) == 0 ? tnt__env_named(name)
                                         : tnt__launcher_env(name);
}

/* A required integer variable in [min, max]. */
static tnt_result_t need_int(tnt_launcher_t k, const char *name, long min,
                             long max, int *out)
{
    const char *v = env(name);
    if (!v)
        return tnt__error(TNT_ERR_CONFIG, "%s is not set; the %s launcher "
                          "environment is incomplete", name,
                          tnt__launcher_name(k));
    long x;
    TNT_CHECK(tnt__parse_long(name, v, min, max, &x));
    *out = (int)x;
    return TNT_SUCCESS;
}

/* An optional one: *out keeps its value when unset. */
static tnt_result_t opt_int(const char *name, long min, long max, int *out)
{
    const char *v = env(name);
    long x;
    if (!v)
        return TNT_SUCCESS;
    TNT_CHECK(tnt__parse_long(name, v, min, max, &x));
    *out = (int)x;
    return TNT_SUCCESS;
}

static tnt_result_t copy_str(const char *what, const char *s, char *dst,
                             size_t cap)
{
    if ((size_t)snprintf(dst, cap, "%s", s) >= cap)
        return tnt__error(TNT_ERR_CONFIG, "%s is longer than %zu characters",
                          what, cap - 1);
    return TNT_SUCCESS;
}

int tnt__launch_port_of(const char *identity)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = identity; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    return TNT_ROOT_PORT_BASE + (int)(h % TNT_ROOT_PORT_SPAN);
}

/* The job key: TNT_JOB_KEY when the user gave one, else the launcher's
 * job identity. It separates jobs; it authenticates nothing. */
static tnt_result_t set_key(tnt_launch_t *l, const char *identity)
{
    const char *k = env("TNT_JOB_KEY");
    return copy_str(k ? "TNT_JOB_KEY" : "the job identity", k ? k : identity,
                    l->job_key, sizeof(l->job_key));
}

static tnt_result_t check_local(tnt_launch_t *l, const char *lr,
                                const char *ls)
{
    if (l->local_rank >= 0 && l->local_size > 0 &&
        l->local_rank >= l->local_size)
        return tnt__error(TNT_ERR_CONFIG, "%s=%d is not below %s=%d", lr,
                          l->local_rank, ls, l->local_size);
    if (l->local_size > l->size)
        return tnt__error(TNT_ERR_CONFIG, "%s=%d is larger than the job "
                          "(%d ranks)", ls, l->local_size, l->size);
    return TNT_SUCCESS;
}

/* TNT_ROOT_ADDR as given, or `host` with TNT_ROOT_PORT or `port`. */
static tnt_result_t set_root(tnt_launch_t *l, const char *host, int port)
{
    const char *addr = env("TNT_ROOT_ADDR");
    if (addr)
        return copy_str("TNT_ROOT_ADDR", addr, l->root_addr,
                        sizeof(l->root_addr));
    TNT_CHECK(opt_int("TNT_ROOT_PORT", 1, 65535, &port));
    if (port < 1 || port > 65535)
        return tnt__error(TNT_ERR_CONFIG, "the derived root port %d is out "
                          "of range; set TNT_ROOT_PORT", port);
    int v6 = strchr(host, ':') != NULL;
    if ((size_t)snprintf(l->root_addr, sizeof(l->root_addr), "%s%s%s:%d",
                         v6 ? "[" : "", host, v6 ? "]" : "", port) >=
        sizeof(l->root_addr))
        return tnt__error(TNT_ERR_CONFIG, "root host name '%s' is too long",
                          host);
    return TNT_SUCCESS;
}

/* Rank 0's host when the launcher does not say where it is: the loopback
 * when every rank is on this node, else the first host of `list_var`
 * (rank 0 runs there under block and cyclic distributions). */
static tnt_result_t derive_root(tnt_launch_t *l, const char *list_var,
                                const char *identity)
{
    if (l->size == 1)
        return TNT_SUCCESS;
    if (env("TNT_ROOT_ADDR"))
        return set_root(l, "", 0);
    int port = tnt__launch_port_of(identity);
    if (l->local_size == l->size)
        return set_root(l, "127.0.0.1", port);
    if (!list_var)
        return tnt__error(TNT_ERR_CONFIG, "%s: ranks span several nodes and "
                          "no node list says where rank 0 runs; set "
                          "TNT_ROOT_ADDR=host:port (or use PMIx)",
                          tnt__launcher_name(l->kind));
    tnt_hostlist_t hl;
    TNT_CHECK(tnt__hostlist_expand(list_var, env(list_var), &hl));
    tnt_result_t rc = set_root(l, hl.hosts[0], port);
    tnt__hostlist_free(&hl);
    return rc;
}

static tnt_result_t detect_tnt(tnt_launch_t *l)
{
    const char *r = tnt__env(TNT_VAR_RANK), *s = tnt__env(TNT_VAR_SIZE);
    const char *root = tnt__env(TNT_VAR_ROOT_ADDR);
    long size, rank;
    if (!s)
        return tnt__error(TNT_ERR_CONFIG, "TNT_RANK or TNT_ROOT_ADDR is set "
                          "but TNT_SIZE is not; start ranks with tnt-run");
    TNT_CHECK(tnt__parse_long("TNT_SIZE", s, 1, MAX_RANKS, &size));
    if (!r)
        return tnt__error(TNT_ERR_CONFIG, "TNT_SIZE is set but TNT_RANK is "
                          "not; start ranks with tnt-run");
    TNT_CHECK(tnt__parse_long("TNT_RANK", r, 0, size - 1, &rank));
    if (size > 1 && (!root || !*root))
        return tnt__error(TNT_ERR_CONFIG, "TNT_SIZE=%ld but TNT_ROOT_ADDR "
                          "is not set; expected host:port of rank 0", size);
    l->rank = (int)rank;
    l->size = (int)size;
    TNT_CHECK(opt_int("TNT_LOCAL_SIZE", 1, size, &l->local_size));
    TNT_CHECK(opt_int("TNT_LOCAL_RANK", 0, size - 1, &l->local_rank));
    TNT_CHECK(check_local(l, "TNT_LOCAL_RANK", "TNT_LOCAL_SIZE"));
    if (root)
        TNT_CHECK(copy_str("TNT_ROOT_ADDR", root, l->root_addr,
                           sizeof(l->root_addr)));
    const char *key = tnt__env(TNT_VAR_JOB_KEY);
    return copy_str("TNT_JOB_KEY", key ? key : "", l->job_key,
                    sizeof(l->job_key));
}

static tnt_result_t detect_ompi(tnt_launch_t *l)
{
    TNT_CHECK(need_int(l->kind, "OMPI_COMM_WORLD_SIZE", 1, MAX_RANKS,
                       &l->size));
    TNT_CHECK(need_int(l->kind, "OMPI_COMM_WORLD_RANK", 0, l->size - 1,
                       &l->rank));
    TNT_CHECK(opt_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, l->size,
                      &l->local_size));
    TNT_CHECK(opt_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, l->size - 1,
                      &l->local_rank));
    TNT_CHECK(check_local(l, "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE"));
    /* mpirun's job id; under Slurm the allocation's node list says where
     * rank 0 (the first slot) is. */
    char id[300];
    const char *job = env("OMPI_MCA_ess_base_jobid");
    if (!job)
        job = env("PMIX_NAMESPACE");
    if (!job)
        job = env("OMPI_MCA_orte_hnp_uri");
    snprintf(id, sizeof(id), "ompi:%s", job ? job : "");
    TNT_CHECK(set_key(l, id));
    const char *list = env("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST"
                       : env("SLURM_NODELIST") ? "SLURM_NODELIST" : NULL;
    return derive_root(l, list, id);
}

/* Tasks on node `node` from "2(x3),1"-style SLURM_STEP_TASKS_PER_NODE. */
static tnt_result_t slurm_tasks_on(const char *var, const char *s, int node,
                                   int *out)
{
    const char *p = s;
    long seen = 0;
    while (*p) {
        char *end;
        long n = strtol(p, &end, 10), rep = 1;
        if (end == p || n < 0)
            goto bad;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            rep = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || rep < 1)
                goto bad;
            p = end + 1;
        }
        if (node < seen + rep) {
            *out = (int)n;
            return TNT_SUCCESS;
        }
        seen += rep;
        if (*p == ',')
            p++;
        else if (*p)
            goto bad;
    }
    return tnt__error(TNT_ERR_CONFIG, "%s='%s' has no entry for node %d "
                      "(SLURM_NODEID)", var, s, node);
bad:
    return tnt__error(TNT_ERR_CONFIG, "%s='%s' is malformed at offset %td; "
                      "expected e.g. 4 or 2(x3),1", var, s, p - s);
}

static tnt_result_t detect_slurm(tnt_launch_t *l)
{
    const char *nt = !env("SLURM_NTASKS") && env("SLURM_NPROCS")
                         ? "SLURM_NPROCS" : "SLURM_NTASKS";
    TNT_CHECK(need_int(l->kind, nt, 1, MAX_RANKS, &l->size));
    TNT_CHECK(need_int(l->kind, "SLURM_PROCID", 0, l->size - 1, &l->rank));
    TNT_CHECK(opt_int("SLURM_LOCALID", 0, l->size - 1, &l->local_rank));
    const char *tpn = env("SLURM_STEP_TASKS_PER_NODE")
                          ? "SLURM_STEP_TASKS_PER_NODE"
                          : "SLURM_TASKS_PER_NODE";
    if (env(tpn)) {
        int node = 0;
        TNT_CHECK(opt_int("SLURM_NODEID", 0, MAX_RANKS, &node));
        TNT_CHECK(slurm_tasks_on(tpn, env(tpn), node, &l->local_size));
        if (l->local_size < 1)
            return tnt__error(TNT_ERR_CONFIG, "%s says node %d has no task, "
                              "but this task runs there", tpn, node);
        TNT_CHECK(check_local(l, "SLURM_LOCALID", tpn));
    }
    const char *job = env("SLURM_JOB_ID") ? env("SLURM_JOB_ID")
                                          : env("SLURM_JOBID");
    const char *step = env("SLURM_STEP_ID") ? env("SLURM_STEP_ID")
                                            : env("SLURM_STEPID");
    char id[300];
    snprintf(id, sizeof(id), "slurm:%s.%s", job ? job : "",
             step ? step : "");
    TNT_CHECK(set_key(l, id));
    const char *list = env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST"
                       : env("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST"
                       : env("SLURM_NODELIST") ? "SLURM_NODELIST" : NULL;
    return derive_root(l, list, id);
}

/* torchrun's own TCP store listens on MASTER_PORT, so rank 0 listens on
 * the next port unless TNT_ROOT_PORT says otherwise. */
static tnt_result_t detect_torchrun(tnt_launch_t *l)
{
    TNT_CHECK(need_int(l->kind, "WORLD_SIZE", 1, MAX_RANKS, &l->size));
    TNT_CHECK(need_int(l->kind, "RANK", 0, l->size - 1, &l->rank));
    TNT_CHECK(opt_int("LOCAL_WORLD_SIZE", 1, l->size, &l->local_size));
    TNT_CHECK(opt_int("LOCAL_RANK", 0, l->size - 1, &l->local_rank));
    TNT_CHECK(check_local(l, "LOCAL_RANK", "LOCAL_WORLD_SIZE"));
    const char *run = env("TORCHELASTIC_RUN_ID");
    const char *restart = env("TORCHELASTIC_RESTART_COUNT");
    const char *ma = env("MASTER_ADDR"), *mp = env("MASTER_PORT");
    char id[300];
    snprintf(id, sizeof(id), "torchrun:%s:%s:%s:%s", run ? run : "",
             ma ? ma : "", mp ? mp : "", restart ? restart : "0");
    TNT_CHECK(set_key(l, id));
    if (l->size == 1)
        return TNT_SUCCESS;
    if (env("TNT_ROOT_ADDR"))
        return set_root(l, "", 0);
    int port = 0; /* set by need_int on success; 0 quiets -O3's
                   * may-be-uninitialized, which cannot see that */
    if (!ma)
        return tnt__error(TNT_ERR_CONFIG, "MASTER_ADDR is not set; the "
                          "torchrun launcher environment is incomplete");
    TNT_CHECK(need_int(l->kind, "MASTER_PORT", 1, 65535, &port));
    return set_root(l, ma, port + 1);
}

#ifdef TNT_HAVE_PMIX
static tnt_result_t detect_pmix(tnt_launch_t *l)
{
    TNT_CHECK(tnt__pmix_start(l));
    char id[sizeof(l->job_key)];
    memcpy(id, l->job_key, sizeof(id));
    return set_key(l, id);
}
#else
static tnt_result_t detect_pmix(tnt_launch_t *l)
{
    (void)l;
    return tnt__error(TNT_ERR_CONFIG, "TNT_BOOTSTRAP=pmix, but this "
                      "libtntcomm was built without PMIx (install "
                      "libpmix-dev and rebuild)");
}
#endif

static tnt_result_t detect_single(tnt_launch_t *l)
{
    l->size = l->local_size = 1;
    l->rank = l->local_rank = 0;
    return TNT_SUCCESS;
}

typedef tnt_result_t (*detect_fn)(tnt_launch_t *);
static const detect_fn k_detect[TNT_LAUNCHER_COUNT] = {
    detect_tnt, detect_pmix, detect_ompi, detect_slurm, detect_torchrun,
    detect_single};

/* Which launcher's variables are present, in the order of precedence.
 * torchrun started inside a Slurm or PMIx step inherits the step's
 * variables, which describe torchrun itself, not its workers: its own
 * marker (TORCHELASTIC_RUN_ID) is therefore looked at before those. */
static tnt_launcher_t guess(int skip_pmix)
{
    (void)skip_pmix; /* unused without PMIx */
    if (env("TNT_RANK") || env("TNT_SIZE"))
        return TNT_LAUNCHER_TNT;
    int torch = env("TORCHELASTIC_RUN_ID") && env("RANK") &&
                env("WORLD_SIZE");
    if (torch)
        return TNT_LAUNCHER_TORCHRUN;
#ifdef TNT_HAVE_PMIX
    if (!skip_pmix && (env("PMIX_NAMESPACE") || env("PMIX_RANK")))
        return TNT_LAUNCHER_PMIX;
#endif
    if (env("OMPI_COMM_WORLD_SIZE") || env("OMPI_COMM_WORLD_RANK"))
        return TNT_LAUNCHER_OMPI;
    /* A batch script also has SLURM_PROCID; only a task of a step (srun)
     * has a step id, and only a step's tasks are ranks. */
    if (env("SLURM_PROCID") && (env("SLURM_STEP_ID") || env("SLURM_STEPID")))
        return TNT_LAUNCHER_SLURM;
    if (env("RANK") && env("WORLD_SIZE"))
        return TNT_LAUNCHER_TORCHRUN;
    if (env("TNT_ROOT_ADDR"))
        return TNT_LAUNCHER_TNT; /* which then says TNT_SIZE is missing */
    return TNT_LAUNCHER_SINGLE;
}

static tnt_result_t run_detect(tnt_launch_t *l, tnt_launcher_t kind)
{
    memset(l, 0, sizeof(*l));
    l->kind = kind;
    l->local_rank = -1;
    l->local_size = -1;
    return k_detect[kind](l);
}

tnt_result_t tnt__launch_detect(tnt_launch_t *l)
{
    const char *force = env("TNT_BOOTSTRAP");
    if (force && strcmp(force, "auto") != 0) {
        for (int k = 0; k < TNT_LAUNCHER_COUNT; k++)
            if (strcmp(force, k_names[k]) == 0) {
                TNT_CHECK(run_detect(l, (tnt_launcher_t)k));
                l->forced = 1;
                return TNT_SUCCESS;
            }
        return tnt__error(TNT_ERR_CONFIG, "TNT_BOOTSTRAP='%s' is not a "
                          "launcher; expected auto, tnt, pmix, ompi, slurm, "
                          "torchrun or single", force);
    }
    tnt_launcher_t k = guess(0);
    tnt_result_t rc = run_detect(l, k);
    /* A stale PMIX_* variable (a shell inside an old job) must not stop a
     * job that the next launcher in line describes. */
    if (rc != TNT_SUCCESS && k == TNT_LAUNCHER_PMIX) {
        TNT_LOG_WARN("PMIx variables are set but PMIx is unusable (%s); "
                     "trying the Open MPI, Slurm and torchrun variables",
                     tnt_last_error());
        rc = run_detect(l, guess(1));
    }
    return rc;
}

void tnt__launch_release(tnt_launch_t *l)
{
#ifdef TNT_HAVE_PMIX
    if (l->kind == TNT_LAUNCHER_PMIX)
        tnt__pmix_stop();
#endif
    l->kind = TNT_LAUNCHER_SINGLE;
}
