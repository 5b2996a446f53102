/*
 * Schedules: a collective compiled into a small dependency graph of
 * operations {send, recv, reduce, copy, scale} on three buffers (the user's
 * send buffer, the user's receive buffer and a scratch area). The engine
 * executes schedules; the simulator in the tests executes them for many
 * ranks in memory, with no network, which is how the algorithms are
 * checked at rank counts this machine cannot run.
 *
 * Buffers are referenced as (buffer id, byte offset) rather than pointers,
 * so a schedule depends only on (algorithm, count, dtype, rank, nranks) and
 * could be cached and reused across calls.
 */
#ifndef TNT_COLLECTIVES_SCHEDULE_H
#define TNT_COLLECTIVES_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/tnt.h"

enum tnt_sop_kind {
    TNT_SOP_SEND = 0,
    TNT_SOP_RECV,
    TNT_SOP_REDUCE, /* dst = a op b, a from the lower rank */
    TNT_SOP_COPY,   /* dst = a (regions never overlap) */
    TNT_SOP_SCALE,  /* dst /= nranks (AVG's last step) */
    TNT_SOP_CANON   /* dst = canonical reduction of k = nranks inputs
                       (canon.h): input `peer` at a, input q != peer at
                       b + q * stride; the op is the collective's */
};

enum tnt_buf_id { TNT_BUF_SEND = 0, TNT_BUF_RECV, TNT_BUF_SCRATCH,
                  TNT_BUF_COUNT };

typedef struct tnt_bufref {
    uint32_t buf; /* enum tnt_buf_id */
    size_t off;   /* bytes */
} tnt_bufref_t;

/* "No operation" for optional dependencies. */
#define TNT_SOP_NONE UINT32_MAX

typedef struct tnt_sop {
    uint8_t kind;
    int32_t peer;      /* send/recv */
    uint32_t step;     /* send/recv: tag within the collective */
    tnt_bufref_t dst;  /* recv, reduce, copy, scale */
    tnt_bufref_t a;    /* send source, reduce/copy first operand */
    tnt_bufref_t b;    /* reduce second operand */
    size_t bytes;
    size_t stride;     /* canon: bytes between the inputs at b */
    uint32_t ndeps;    /* operations that must complete first */
    uint32_t succ_begin, succ_count; /* successors, after finalize */
} tnt_sop_t;

typedef struct tnt_sched_edge {
    uint32_t from, to;
} tnt_sched_edge_t;

typedef struct tnt_sched {
    int rank, nranks;
    size_t esize;          /* bytes per element */
    size_t scratch_bytes;  /* scratch the schedule needs */
    tnt_sop_t *ops;
    uint32_t nops, ops_cap;
    tnt_sched_edge_t *edges;
    uint32_t nedges, edges_cap;
    uint32_t *succ;        /* successor lists, indexed by succ_begin */
    int oom;               /* an allocation failed while building */
    int refs;              /* holders, when shared (core/sched_cache.c) */
} tnt_sched_t;

void tnt__sched_init(tnt_sched_t *s, int rank, int nranks, size_t esize);
void tnt__sched_destroy(tnt_sched_t *s);

uint32_t tnt__sched_send(tnt_sched_t *s, int peer, uint32_t step,
                         tnt_bufref_t src, size_t bytes);
uint32_t tnt__sched_recv(tnt_sched_t *s, int peer, uint32_t step,
                         tnt_bufref_t dst, size_t bytes);
uint32_t tnt__sched_reduce(tnt_sched_t *s, tnt_bufref_t dst, tnt_bufref_t a,
                           tnt_bufref_t b, size_t bytes);
uint32_t tnt__sched_copy(tnt_sched_t *s, tnt_bufref_t dst, tnt_bufref_t src,
                         size_t bytes);
uint32_t tnt__sched_scale(tnt_sched_t *s, tnt_bufref_t dst, size_t bytes);
/** dst = the canonical reduction of s->nranks inputs of `bytes` each:
 *  input `self` at own, input q != self at base + q * stride. */
uint32_t tnt__sched_canon(tnt_sched_t *s, tnt_bufref_t dst, tnt_bufref_t own,
                          int self, tnt_bufref_t base, size_t stride,
                          size_t bytes);
/** `after` may start only once `before` has completed. Either may be
 *  TNT_SOP_NONE, which makes the call a no-op. */
void tnt__sched_dep(tnt_sched_t *s, uint32_t before, uint32_t after);
/** Reserve scratch bytes (aligned to 64); returns their offset. */
size_t tnt__sched_scratch(tnt_sched_t *s, size_t bytes);
/** Build the successor lists; TNT_ERR_NO_MEMORY if any step failed. */
tnt_result_t tnt__sched_finalize(tnt_sched_t *s);

/* How a schedule built for a subgroup is placed into a larger one. */
typedef struct tnt_splice {
    const int *peers;    /* subgroup position -> communicator rank */
    uint32_t step_base;  /* added to every tag */
    tnt_bufref_t region; /* where the sub-schedule's send and receive
                          * buffers (in place) lie */
} tnt_splice_t;

/** Append finalized schedule `sub` to s as placed by m: its scratch gets
 *  a fresh range of s's, its operations without predecessors wait for
 *  `entry` (may be TNT_SOP_NONE). Returns an operation that completes
 *  after all of sub's (an empty copy serves as the join point). */
uint32_t tnt__sched_splice(tnt_sched_t *s, const tnt_sched_t *sub,
                           const tnt_splice_t *m, uint32_t entry);

static inline tnt_bufref_t tnt__ref(uint32_t buf, size_t off)
{
    tnt_bufref_t r = {buf, off};
    return r;
}

#endif /* TNT_COLLECTIVES_SCHEDULE_H */
