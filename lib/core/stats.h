/*
 * A communicator's counters (tnt_comm_stats, stats.c): plain integers in
 * struct tnt_comm, bumped under comm->group->lock by the path that already holds
 * it (post_locked, the sends, the header upcall, the early-message
 * accounting, a blocking wait), so that counting costs an add and no
 * atomic, no allocation and no extra lock on the hot path. The
 * transports' own counters (reconnects, strangers) are not kept here:
 * the transport reports them through its `stats` entry when asked.
 */
#ifndef TNT_CORE_STATS_H
#define TNT_CORE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/algorithms.h"

/* Transports one communicator may use at once (engine.h's TNT_TP_MAX). */
#define TNT_STATS_TP_MAX 4

/* Index of tnt_comm_counters_t.ctl_sent. */
enum { TNT_CTL_RTS = 0, TNT_CTL_CTS, TNT_CTL_CREDIT, TNT_CTL_KINDS };

typedef struct tnt_comm_counters {
    /* By kind (TNT_COLL_*, 1-based) and by algorithm (TNT_ALGO_*). */
    uint64_t kind_calls[TNT_COLL_KIND_END], kind_bytes[TNT_COLL_KIND_END];
    uint64_t algo_calls[TNT_ALGO_END], algo_bytes[TNT_ALGO_END];
    /* By transport position: messages handed to it and got from it,
     * and their payload bytes. */
    uint64_t tp_msgs_sent[TNT_STATS_TP_MAX], tp_bytes_sent[TNT_STATS_TP_MAX];
    uint64_t tp_msgs_recv[TNT_STATS_TP_MAX], tp_bytes_recv[TNT_STATS_TP_MAX];
    /* Flow-control messages sent (engine_flow.c), by TNT_CTL_*: the
     * messages without payload. Internal (tests and measurements read
     * them; tnt_comm_stats does not report them). */
    uint64_t ctl_sent[TNT_CTL_KINDS];
    uint64_t wait_ns;          /* blocking waits */
    size_t unexp_hwm;          /* the most comm->unexp_bytes ever was */
} tnt_comm_counters_t;

/* A collective posted (lock held; the lean slots path included). */
static inline void tnt__count_post(tnt_comm_counters_t *c, int kind,
                                   int algo, uint64_t bytes)
{
    c->kind_calls[kind]++;
    c->kind_bytes[kind] += bytes;
    c->algo_calls[algo]++;
    c->algo_bytes[algo] += bytes;
}

/* A message handed to transport tpi (sent) or got from it. */
static inline void tnt__count_sent(tnt_comm_counters_t *c, int tpi,
                                   uint64_t bytes)
{
    c->tp_msgs_sent[tpi]++;
    c->tp_bytes_sent[tpi] += bytes;
}

static inline void tnt__count_recv(tnt_comm_counters_t *c, int tpi,
                                   uint64_t bytes)
{
    c->tp_msgs_recv[tpi]++;
    c->tp_bytes_recv[tpi] += bytes;
}

/* After comm->unexp_bytes grew: the high-water mark. */
static inline void tnt__count_unexp(tnt_comm_counters_t *c, size_t held)
{
    if (held > c->unexp_hwm)
        c->unexp_hwm = held;
}

#endif /* TNT_CORE_STATS_H */
