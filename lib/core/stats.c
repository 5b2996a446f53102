/*
 * tnt_comm_stats: a communicator's counters (core/stats.h) and its
 * transports' own (their `stats` entry), copied out under the lock once.
 * The caller's struct is versioned by size: the answer is built whole on
 * the stack and only the bytes both sides know are copied, so an older
 * caller's smaller struct is never written past.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/comm_live.h"
#include "core/engine.h"
#include "util/error.h"

/* kind[] is full: the kinds past TNT_STATS_SCATTER are fields of their
 * own (tnt_stats_t.alltoall). */
_Static_assert(TNT_COLL_ALLTOALL == TNT_STATS_KINDS + 1 &&
               TNT_COLL_KIND_END == TNT_COLL_P2P + 1,
               "tnt.h: a new kind needs a field of tnt_stats_t");
_Static_assert(TNT_ALGO_END <= TNT_STATS_ALGOS,
               "tnt.h: raise TNT_STATS_ALGOS");
_Static_assert(TNT_TP_MAX <= TNT_STATS_TRANSPORTS,
               "tnt.h: raise TNT_STATS_TRANSPORTS");

/* The public kind index of an internal TNT_COLL_* (-1: none). */
static int public_kind(int kind)
{
    switch (kind) {
    case TNT_COLL_ALLREDUCE: return TNT_STATS_ALLREDUCE;
    case TNT_COLL_BROADCAST: return TNT_STATS_BROADCAST;
    case TNT_COLL_ALLGATHER: return TNT_STATS_ALLGATHER;
    case TNT_COLL_REDUCE_SCATTER: return TNT_STATS_REDUCE_SCATTER;
    case TNT_COLL_BARRIER: return TNT_STATS_BARRIER;
    case TNT_COLL_REDUCE: return TNT_STATS_REDUCE;
    case TNT_COLL_GATHER: return TNT_STATS_GATHER;
    case TNT_COLL_SCATTER: return TNT_STATS_SCATTER;
    default: return -1;
    }
}

/* One transport's entry; lock held. */
static void fill_transport(const struct tnt_comm *comm, int i,
                           tnt_stats_transport_t *t)
{
    const tnt_comm_counters_t *c = &comm->stats;
    const tnt_transport_t *tp = comm->net.tp[i];
    t->msgs_sent = c->tp_msgs_sent[i];
    t->bytes_sent = c->tp_bytes_sent[i];
    t->msgs_recv = c->tp_msgs_recv[i];
    t->bytes_recv = c->tp_bytes_recv[i];
    if (!tp)
        return;
    snprintf(t->name, sizeof(t->name), "%s", tp->name);
    t->flags |= TNT_STATS_TP_RUNNING;
    for (int q = 0; q < comm->nranks; q++)
        t->peers += q != comm->rank && comm->peers[q].tp &&
                    comm->peers[q].tpi == i;
    /* A transport without the entry (or of a shorter table) cannot
     * report: zeros, and no TNT_STATS_TP_REPORTS. */
    if (!TNT_TRANSPORT_HAS(tp, stats) || !tp->stats)
        return;
    tnt_transport_stats_t ts;
    memset(&ts, 0, sizeof(ts));
    ts.size = sizeof(ts);
    ts.version = 1;
    tp->stats(comm->net.tp_ctx[i], &ts);
    t->flags |= TNT_STATS_TP_REPORTS;
    t->reconnects = ts.reconnects;
    t->strangers_refused = ts.strangers_refused;
    t->strangers_evicted = ts.strangers_evicted;
}

TNT_API tnt_result_t tnt_comm_stats(tnt_comm_t comm, tnt_stats_t *out)
{
    TNT_CHECK(tnt__comm_check(comm, "tnt_comm_stats"));
    if (!out)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_stats: out is "
                          "NULL");
    if (out->size < TNT_STATS_SIZE_MIN)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_stats: out->size "
                          "%zu is below TNT_STATS_SIZE_MIN (%zu); set it "
                          "with TNT_STATS_INIT", out->size,
                          (size_t)TNT_STATS_SIZE_MIN);
    size_t n = out->size < sizeof(tnt_stats_t) ? out->size
                                               : sizeof(tnt_stats_t);
    uint32_t version = out->version;
    tnt_stats_t s;
    memset(&s, 0, sizeof(s));
    pthread_mutex_lock(&comm->group->lock);
    const tnt_comm_counters_t *c = &comm->stats;
    for (int k = 1; k < TNT_COLL_KIND_END; k++) {
        int pk = public_kind(k);
        if (k == TNT_COLL_ALLTOALL || k == TNT_COLL_ALLTOALLV) {
            s.alltoall.calls += c->kind_calls[k];
            s.alltoall.bytes += c->kind_bytes[k];
        }
        if (k == TNT_COLL_P2P) {
            s.p2p.calls += c->kind_calls[k];
            s.p2p.bytes += c->kind_bytes[k];
        }
        if (pk < 0)
            continue;
        s.kind[pk].calls = c->kind_calls[k];
        s.kind[pk].bytes = c->kind_bytes[k];
    }
    for (int a = 0; a < TNT_ALGO_END; a++) {
        s.algo[a].calls = c->algo_calls[a];
        s.algo[a].bytes = c->algo_bytes[a];
    }
    for (int i = 0; i < TNT_TP_MAX; i++)
        fill_transport(comm, i, &s.transport[i]);
    snprintf(s.comm_name, sizeof(s.comm_name), "%s", comm->name);
    snprintf(s.comm_how, sizeof(s.comm_how), "%s", comm->how);
    s.rank = comm->rank;
    s.world_rank = comm->world_rank;
    s.wait_ns = c->wait_ns;
    s.unexpected_hwm = c->unexp_hwm;
    pthread_mutex_unlock(&comm->group->lock);
    s.size = n;
    s.version = version;
    memcpy(out, &s, n);
    return TNT_SUCCESS;
}

TNT_API const char *tnt_stats_algo_name(int i)
{
    if (i <= TNT_ALGO_AUTO || i >= TNT_ALGO_END)
        return NULL;
    return tnt__algo_name(i);
}
