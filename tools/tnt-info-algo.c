/*
 * tnt-info --algorithms: the selection table of collectives/select.c, row
 * by row (tnt__algo_rule), and for one case (-n P --size S
 * [--ranks-per-host R], S bytes of f32) the algorithm tnt__algo_select_why picks, the
 * library's own decision, with the row that gave it. The case is
 * described as the communicator would describe it (core/comm.c): the
 * host layout from R, "one host over shared memory" when every rank is
 * on this host and TNT_TRANSPORT lets shm run, and the forced algorithm
 * from TNT_ALLREDUCE_ALGO / TNT_BCAST_ALGO (tnt__params_load).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms.h"
#include "collectives/topo.h"
#include "tnt-info.h"
#include "util/param.h"
#include "util/param_table.h"

static const char *kind_name(int kind)
{
    switch (kind) {
    case TNT_COLL_ALLREDUCE: return "allreduce";
    case TNT_COLL_BROADCAST: return "broadcast";
    case TNT_COLL_BARRIER: return "barrier";
    case TNT_COLL_REDUCE: return "reduce";
    default: return "any";
    }
}

static void table(info_out_t *o)
{
    info_arr(o, "table");
    for (int r = 0; r < TNT_RULE_COUNT; r++) {
        const tnt_algo_rule_t *x = tnt__algo_rule(r);
        info_row(o);
        info_str(o, "collective", kind_name(x->kind));
        /* -1: the forced one, or for a reduce the allreduce's */
        info_str(o, "algorithm", x->algo >= 0 ? tnt__algo_name(x->algo)
                                 : x->kind == TNT_COLL_REDUCE ? "allreduce's"
                                                              : "forced");
        info_int(o, "min_bytes", (long long)x->min_bytes);
        info_int(o, "max_bytes", (long long)x->max_bytes); /* 0: none */
        info_str(o, "when", x->when);
        info_close(o);
    }
    info_close(o);
}

/* Whether every rank on one host talks through shared memory: the
 * communicator's intra_host, which needs shm to run for every pair
 * (core/comm_tp.c: auto and shm run it, tcp, verbs and plugins not). */
static int shm_runs(void)
{
    const char *t = tnt__env(TNT_VAR_TRANSPORT);
    return !t || !*t || strcmp(t, "auto") == 0 || strcmp(t, "shm") == 0;
}

static void pick(info_out_t *o, int kind, const tnt_coll_args_t *a,
                 int forced)
{
    int algo = -1, rule = -1;
    tnt_result_t rc = tnt__algo_select_why(a, forced, &algo, &rule);
    const tnt_algo_rule_t *x = tnt__algo_rule(rule);
    info_obj(o, kind_name(kind));
    info_str(o, "algorithm", rc == TNT_SUCCESS ? tnt__algo_name(algo)
                                               : NULL);
    if (rc != TNT_SUCCESS)
        info_str(o, "error", tnt_last_error());
    else
        info_str(o, "why", x ? x->when : NULL);
    info_close(o);
}

int info_algorithms(info_out_t *o, const info_algo_query_t *q)
{
    info_obj(o, "algorithms");
    table(o);
    if (q->nranks <= 0) {
        info_close(o);
        return 0;
    }
    tnt_params_t p;
    tnt_result_t rc = tnt__params_load(&p);
    int rph = q->ranks_per_host > 0 ? q->ranks_per_host : q->nranks;
    int *key = malloc(sizeof(int) * (size_t)q->nranks);
    tnt_topo_t topo;
    memset(&topo, 0, sizeof(topo));
    if (!key) {
        info_close(o);
        return 1;
    }
    for (int r = 0; r < q->nranks; r++)
        key[r] = r / rph; /* block placement, as tnt-run --n-per-node */
    if (rc == TNT_SUCCESS)
        rc = tnt__topo_init(&topo, q->nranks, key);
    free(key);
    info_obj(o, "case");
    info_int(o, "ranks", q->nranks);
    info_int(o, "bytes", (long long)q->bytes);
    info_int(o, "ranks_per_host", rph);
    if (rc != TNT_SUCCESS) {
        info_str(o, "error", tnt_last_error());
        info_close(o);
        info_close(o);
        return 1;
    }
    tnt_coll_args_t a = {
        .dtype = TNT_F32, .op = TNT_SUM, .count = q->bytes / 4, .esize = 4,
        .nranks = q->nranks, .segment_bytes = p.segment_bytes,
        .topo = (q->nranks > 1 && p.topology == TNT_TOPOLOGY_AUTO) ? &topo
                                                                  : NULL,
        .intra_host = topo.nhosts == 1 && shm_runs(),
        .mapped = q->mapped,
        .reproducible = p.reproducible,
    };
    info_int(o, "hosts", topo.nhosts);
    info_bool(o, "reproducible", p.reproducible);
    info_bool(o, "one_host_shm", a.intra_host);
    info_bool(o, "mapped_buffers", q->mapped);
    /* The broadcast's p-dependent threshold, for this rank count. */
    info_int(o, "bcast_binomial_max_bytes",
             (long long)tnt__bcast_binomial_max_bytes(q->nranks,
                                                      p.segment_bytes));
    a.kind = TNT_COLL_ALLREDUCE;
    pick(o, a.kind, &a, p.allreduce_algo);
    a.kind = TNT_COLL_BROADCAST;
    pick(o, a.kind, &a, p.bcast_algo);
    info_close(o);
    info_close(o);
    tnt__topo_fini(&topo);
    return 0;
}
