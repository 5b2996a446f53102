/*
 * Words for a collective: the name of its kind and the description of
 * its signature (the header fields every rank must agree on), for the
 * errors, the hang report and the timeline; and the comparison of two
 * signatures. Pure functions of the header: nothing of the engine's
 * state, so that every layer of the core may name a collective.
 */
#include <inttypes.h>
#include <stdio.h>

#include "core/describe.h"
#include "collectives/algorithms.h"
#include "tnt/tnt.h"

const char *tnt__coll_kind_name(int kind)
{
    switch (kind) {
    case TNT_COLL_ALLREDUCE: return "allreduce";
    case TNT_COLL_BROADCAST: return "broadcast";
    case TNT_COLL_BARRIER: return "barrier";
    case TNT_COLL_ALLGATHER: return "allgather";
    case TNT_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case TNT_COLL_REDUCE: return "reduce";
    case TNT_COLL_GATHER: return "gather";
    case TNT_COLL_SCATTER: return "scatter";
    case TNT_COLL_ALLTOALL: return "alltoall";
    case TNT_COLL_ALLTOALLV: return "alltoallv";
    case TNT_COLL_P2P: return "send/recv";
    default: return "unknown";
    }
}

/* Only the fields the collective has: a barrier has no count, dtype or
 * op; only reduce and the reductions have an op; only the rooted ones
 * (broadcast, reduce, gather, scatter) a root; an alltoallv's sizes are
 * per peer (a wrong one is reported where it arrives). */
void tnt__describe_sig(const tnt_msg_hdr_t *h, char *buf, size_t len)
{
    const char *kind = tnt__coll_kind_name(h->kind);
    const char *algo = tnt__algo_name(h->algo);
    const char *dt = tnt_dtype_name((tnt_dtype_t)h->dtype);
    if (h->kind == TNT_COLL_BARRIER)
        snprintf(buf, len, "%s(algo=%s)", kind, algo);
    else if (h->kind == TNT_COLL_BROADCAST || h->kind == TNT_COLL_GATHER ||
             h->kind == TNT_COLL_SCATTER)
        snprintf(buf, len, "%s(count=%" PRIu64 ", dtype=%s, root=%d, "
                 "algo=%s)", kind, h->count, dt, h->root, algo);
    else if (h->kind == TNT_COLL_REDUCE)
        snprintf(buf, len, "%s(count=%" PRIu64 ", dtype=%s, op=%s, "
                 "root=%d, algo=%s)", kind, h->count, dt,
                 tnt_op_name((tnt_op_t)h->op), h->root, algo);
    else if (h->kind == TNT_COLL_ALLTOALLV)
        snprintf(buf, len, "%s(dtype=%s, algo=%s)", kind, dt, algo);
    else if (h->kind == TNT_COLL_P2P)
        snprintf(buf, len, "%s(dtype=%s)", kind, dt);
    else if (h->kind == TNT_COLL_ALLGATHER && h->op == TNT_OP_DERIVE)
        snprintf(buf, len, "tnt_comm_split/dup(an exchange of %" PRIu64
                 " bytes, algo=%s)", h->count, algo);
    else if (h->kind == TNT_COLL_ALLGATHER || h->kind == TNT_COLL_ALLTOALL)
        snprintf(buf, len, "%s(count=%" PRIu64 ", dtype=%s, algo=%s)", kind,
                 h->count, dt, algo);
    else
        snprintf(buf, len, "%s(count=%" PRIu64 ", dtype=%s, op=%s, "
                 "algo=%s)", kind, h->count, dt,
                 tnt_op_name((tnt_op_t)h->op), algo);
}

/* An alltoallv's headers carry each message's own count, not a common
 * one (engine_vsize.c compares it with the receive). */
int tnt__sig_equal(const tnt_msg_hdr_t *a, const tnt_msg_hdr_t *b)
{
    int vsize = a->kind == TNT_COLL_ALLTOALLV || a->kind == TNT_COLL_P2P;
    return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
           a->algo == b->algo && (vsize || a->count == b->count) &&
           a->root == b->root && a->nranks == b->nranks;
}
