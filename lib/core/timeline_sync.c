/*
 * Clock alignment of the timeline: each rank's offset to rank 0, measured
 * over the communicator itself at creation (TNT_TIMELINE set), the way
 * NCCL's and Horovod's timelines do, with a bound that holds whatever
 * the network did.
 *
 * A round: rank 0 reads T1 and broadcasts; rank r reads T2 once the
 * broadcast arrived and T3 right after; an allgather carries (T2, T3) to
 * rank 0, which reads T4 once it is complete. Causality alone gives, for
 * theta = clock_r - clock_0: T2 - theta >= T1 (the broadcast left after
 * T1) and T4 >= T3 - theta (the allgather needed r's data, sent after
 * T3), so theta lies in [T3 - T4, T2 - T1]. The estimate is the middle,
 * its error half the width (half the round trip less r's own hold: the
 * "min RTT / 2" of NTP); of TNT_TL_SYNC_ROUNDS rounds the narrowest is
 * kept. Rank 0 then broadcasts every rank's offset and error, and its
 * own clock as the file's time origin.
 *
 * These are ordinary collectives of the communicator: they take sequence
 * numbers and count in tnt_comm_stats (docs/timeline.md says so), and
 * every rank must have the same TNT_TIMELINE setting.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/comm.h"
#include "core/progress.h"
#include "core/timeline_internal.h"
#include "util/clock.h"
#include "util/error.h"

#define TNT_TL_SYNC_ROUNDS 8

static tnt_result_t blocking(struct tnt_comm *comm, int kind, void *send,
                             void *recv, size_t count, int in_place)
{
    tnt_coll_args_t a = tnt__coll_args(comm, kind, count, TNT_F64, TNT_SUM,
                                       0, in_place);
    struct tnt_request *req;
    return tnt__engine_post(comm, &a, send, recv,
                            TNT_POST_WAIT_NEXT | TNT_POST_BLOCK, &req);
}

/* Offsets and errors of every rank (rank 0 fills them); table is
 * [offset_0, err_0, ..., offset_p-1, err_p-1, origin, rtt_min...]. */
static tnt_result_t measure(struct tnt_comm *comm, double *table)
{
    int p = comm->nranks;
    double *pairs = malloc(sizeof(double) * 2 * (size_t)p);
    if (!pairs)
        return tnt__error(TNT_ERR_NO_MEMORY, "TNT_TIMELINE: out of memory");
    for (int r = 0; r < p; r++) {
        table[2 * r] = 0.0;
        table[2 * r + 1] = -1.0; /* no round yet */
    }
    tnt_result_t rc = TNT_SUCCESS;
    for (int k = 0; k < TNT_TL_SYNC_ROUNDS && rc == TNT_SUCCESS; k++) {
        double x = 0.0, t1 = tnt__now();
        rc = blocking(comm, TNT_COLL_BROADCAST, &x, &x, 1, 1);
        double mine[2];
        mine[0] = tnt__now();
        mine[1] = tnt__now();
        if (rc == TNT_SUCCESS)
            rc = blocking(comm, TNT_COLL_ALLGATHER, mine, pairs, 2, 0);
        double t4 = tnt__now();
        if (rc != TNT_SUCCESS || comm->rank != 0)
            continue;
        for (int r = 1; r < p; r++) {
            double lo = pairs[2 * r + 1] - t4, hi = pairs[2 * r] - t1;
            double err = (hi - lo) / 2;
            if (table[2 * r + 1] < 0 || err < table[2 * r + 1]) {
                table[2 * r] = (lo + hi) / 2;
                table[2 * r + 1] = err;
            }
        }
    }
    free(pairs);
    if (comm->rank == 0) {
        table[1] = 0.0;
        table[2 * p] = tnt__now();
    }
    return rc;
}

static void kick(void *arg)
{
    struct tnt_comm *comm = arg;
    /* No lock needed to signal; the eventfd gets it out of epoll_wait. */
    pthread_cond_signal(&comm->group->progress.park);
    tnt__progress_wake(comm);
}

tnt_result_t tnt__tl_start(struct tnt_comm *comm)
{
    struct tnt_timeline *tl = comm->tl_pending;
    if (!tl)
        return TNT_SUCCESS;
    for (int i = 0; i < TNT_STATS_TP_MAX; i++)
        snprintf(tl->tp_names[i], sizeof(tl->tp_names[i]), "%s",
                 comm->net.tp[i] ? comm->net.tp[i]->name : "?");
    int p = comm->nranks;
    double *table = calloc(2 * (size_t)p + 1, sizeof(double));
    if (!table)
        return tnt__error(TNT_ERR_NO_MEMORY, "TNT_TIMELINE: out of memory");
    tnt_result_t rc = TNT_SUCCESS;
    if (p > 1) {
        rc = measure(comm, table);
        if (rc == TNT_SUCCESS)
            rc = blocking(comm, TNT_COLL_BROADCAST, table, table,
                          2 * (size_t)p + 1, 1);
    } else {
        table[2] = tnt__now();
    }
    if (rc == TNT_SUCCESS) {
        tl->offset_s = table[2 * comm->rank];
        tl->err_s = table[2 * comm->rank + 1];
        tl->rtt_min_s = 2 * tl->err_s;
        tl->origin_s = table[2 * p];
        tl->rounds = p > 1 ? TNT_TL_SYNC_ROUNDS : 0;
        tl->kick = kick;
        tl->kick_arg = comm;
        pthread_mutex_lock(&comm->group->lock);
        comm->timeline = tl;
        comm->tl_pending = NULL;
        pthread_mutex_unlock(&comm->group->lock);
    }
    free(table);
    return rc;
}
