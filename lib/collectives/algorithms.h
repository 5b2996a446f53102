/*
 * The algorithm builders and the table that picks one. Each builder turns
 * a collective's arguments into a schedule for one rank; none does I/O.
 */
#ifndef TNT_COLLECTIVES_ALGORITHMS_H
#define TNT_COLLECTIVES_ALGORITHMS_H

#include "collectives/schedule.h"
#include "collectives/topo.h"

enum tnt_coll_kind {
    TNT_COLL_ALLREDUCE = 1,
    TNT_COLL_BROADCAST,
    TNT_COLL_BARRIER,
    TNT_COLL_ALLGATHER,
    TNT_COLL_REDUCE_SCATTER,
    TNT_COLL_REDUCE,     /* rooted: an allreduce's schedule (reduce_root.c) */
    TNT_COLL_GATHER,
    TNT_COLL_SCATTER,
    TNT_COLL_ALLTOALL,
    TNT_COLL_ALLTOALLV,  /* count 0; the sizes are in tnt_coll_args_t.v */
    TNT_COLL_P2P,        /* tnt_send / tnt_recv: not a collective
                            (core/p2p.h) */
    TNT_COLL_KIND_END
};

enum tnt_algo {
    TNT_ALGO_AUTO = 0,
    TNT_ALGO_RING,      /* allreduce, allgather, reduce-scatter */
    TNT_ALGO_RD,        /* allreduce: recursive doubling */
    TNT_ALGO_BINOMIAL,  /* broadcast */
    TNT_ALGO_PIPELINE,  /* broadcast: pipelined chain */
    TNT_ALGO_DISSEMINATION, /* barrier */
    TNT_ALGO_LOCAL,     /* one rank: a copy at most */
    TNT_ALGO_RABENSEIFNER, /* allreduce: halving RS + doubling AG */
    TNT_ALGO_HIER,      /* allreduce: intra-host RS, inter-host, AG */
    TNT_ALGO_ONESHOT,   /* allreduce: everyone sends everything, 1 step */
    TNT_ALGO_DIRECT,    /* allreduce: direct RS + direct AG, 2 steps */
    TNT_ALGO_FLAT,      /* broadcast: root sends to every rank */
    TNT_ALGO_SLOTS,     /* allreduce, one host: shm slots, no messages */
    TNT_ALGO_STAGED,    /* allreduce, one host: shm staging, no messages */
    TNT_ALGO_MAPPED,    /* allreduce, one host, shared allocations: in place */
    TNT_ALGO_PAIRWISE,  /* alltoall(v): one message to every peer */
    TNT_ALGO_P2P,       /* tnt_send / tnt_recv: one message */
    TNT_ALGO_TREE,      /* allreduce: pipelined double binary tree */
    TNT_ALGO_CANON,     /* reproducible mode: allreduce, reduce-scatter:
                           the owner reduces all inputs canonically */
    TNT_ALGO_CANON_ONESHOT, /* reproducible mode, small allreduce */
    TNT_ALGO_CANON_SLOTS, /* reproducible mode, small allreduce on one
                             host: the slots, reduced canonically */
    TNT_ALGO_CANON_STAGED, /* reproducible mode, one host: the staged
                              allreduce, reduced canonically */
    TNT_ALGO_CANON_MAPPED, /* reproducible mode, one host, shared
                              allocations: the mapped one, canonically */
    TNT_ALGO_BRUCK,     /* allgather, small: log2 p rounds (forced by the
                           exchanges of tnt_comm_split/dup) */
    TNT_ALGO_END
};

/** The largest allreduce that goes through the slots (TNT_ALGO_SLOTS; the
 *  slots' layout, core/onhost/slot_layout.h, holds that much). From
 *  about this size the ring's copies, not the call, are what an allreduce
 *  costs (docs/performance.md, "The slots' size"). */
#define TNT_SLOT_BYTES ((size_t)8 << 10)

/** On-host algorithms: the engine runs them through the pairs' shared
 *  memory from its on-host queue (core/onhost/): no schedule, no
 *  messages. */
static inline int tnt__algo_onhost(int algo)
{
    return algo == TNT_ALGO_SLOTS || algo == TNT_ALGO_STAGED ||
           algo == TNT_ALGO_MAPPED || algo == TNT_ALGO_CANON_SLOTS ||
           algo == TNT_ALGO_CANON_STAGED || algo == TNT_ALGO_CANON_MAPPED;
}

/** The mapped allreduce, in either mode: its buffers lie in shared
 *  allocations (core/mem.h). */
static inline int tnt__algo_mapped(int algo)
{
    return algo == TNT_ALGO_MAPPED || algo == TNT_ALGO_CANON_MAPPED;
}

/** The on-host algorithms of the reproducible mode: the slots, staged
 *  and mapped allreduces, whose owners hold all k inputs of a region at
 *  once and reduce them with the canonical kernel (collectives/canon.h)
 *  instead of folding them in rank order. */
static inline int tnt__algo_onhost_canon(int algo)
{
    return algo == TNT_ALGO_CANON_SLOTS || algo == TNT_ALGO_CANON_STAGED ||
           algo == TNT_ALGO_CANON_MAPPED;
}

typedef struct tnt_coll_args {
    int kind;            /* enum tnt_coll_kind */
    tnt_dtype_t dtype;
    tnt_op_t op;
    size_t count;        /* elements (per rank for allgather/RS) */
    int root;
    int rank, nranks;
    size_t esize;
    int in_place;
    size_t segment_bytes; /* pipelining granule; tests shrink it */
    /* The communicator's host layout, NULL when TNT_TOPOLOGY=flat. Lives
     * as long as the communicator (and its schedule cache). */
    const tnt_topo_t *topo;
    /* Every rank of the communicator is on this host and every pair talks
     * through shared memory (the same answer on every rank: it comes from
     * the bootstrap table). Selection reads it, and the canonical
     * schedule's "ready" handshake (allreduce_canon.c). */
    int intra_host;
    /* From this many bytes the direct allreduce waits for the
     * receiver's "ready"; 0: TNT_READY_MIN_BYTES. The same on every rank
     * (core/comm.c says how it is chosen). */
    size_t ready_min_bytes;
    /* The send and receive buffers lie in shared allocations of this
     * rank (core/mem.h); the caller's promise is that they do on every
     * rank (tnt_mem_alloc says so). Only selection reads it. */
    int mapped;
    /* alltoallv only: sendcounts, sdispls, recvcounts, rdispls (nranks
     * entries each, elements), valid while the schedule is built. Not
     * part of the schedule cache's key: an alltoallv's schedule is built
     * for its call and never cached (core/engine.c, get_sched). */
    const size_t *v[4];
    /* TNT_REPRODUCIBLE: floating-point reductions run the canonical
     * algorithms (allreduce_canon.c); the same on every rank. */
    int reproducible;
    /* p2p only: a send (else a receive) to/from rank `root`, its tag. */
    int p2p_send;
    uint32_t tag;
} tnt_coll_args_t;

const char *tnt__algo_name(int algo);
/** The one-step algorithms (direct, flat) have each receiver send an
 *  empty "ready" first from this size on (where the shm transport's
 *  single-copy rendezvous starts by default; the direct allreduce from
 *  a->ready_min_bytes), so that the data never arrives before its
 *  receive is posted (bcast_flat.c says why that matters). */
#define TNT_READY_MIN_BYTES ((size_t)256 << 10)

static inline size_t tnt__ready_min(const tnt_coll_args_t *a)
{
    return a->ready_min_bytes ? a->ready_min_bytes : TNT_READY_MIN_BYTES;
}

/** Parse "ring", "rd", ... ; TNT_ALGO_AUTO for "auto"; -1 if unknown. */
int tnt__algo_parse(const char *name);

/** The selection table (size, rank count and, for allreduce, the host
 *  layout in a->topo); `forced` wins if it applies to this collective,
 *  else TNT_ERR_CONFIG. */
tnt_result_t tnt__algo_select(const tnt_coll_args_t *a, int forced,
                              int *algo);

/* The rows of the selection table (select.c), for tnt-info: which rule
 * of tnt__algo_select applied, so a tool can say why without a second
 * copy of the thresholds. */
enum tnt_algo_rule_id {
    TNT_RULE_SINGLE,
    TNT_RULE_CANON_SLOTS,
    TNT_RULE_CANON_MAPPED,
    TNT_RULE_CANON_STAGED,
    TNT_RULE_CANON_ONESHOT,
    TNT_RULE_CANON,
    TNT_RULE_FORCED,
    TNT_RULE_SLOTS,
    TNT_RULE_MAPPED,
    TNT_RULE_STAGED,
    TNT_RULE_BCAST_STAGED,
    TNT_RULE_HIER,
    TNT_RULE_RD,
    TNT_RULE_RAB,
    TNT_RULE_TREE,
    TNT_RULE_RING,
    TNT_RULE_BINOMIAL,
    TNT_RULE_PIPELINE,
    TNT_RULE_BARRIER,
    TNT_RULE_GATHER_RING,
    TNT_RULE_REDUCE,
    TNT_RULE_ROOTED_FLAT,
    TNT_RULE_PAIRWISE,
    TNT_RULE_P2P,
    TNT_RULE_COUNT
};

typedef struct tnt_algo_rule {
    int kind;             /* enum tnt_coll_kind; -1: more than one */
    int algo;             /* -1: the forced one */
    size_t min_bytes;     /* 0: no lower bound */
    size_t max_bytes;     /* 0: no upper bound */
    const char *when;     /* the condition besides the sizes */
} tnt_algo_rule_t;

/** Row `rule` of the table; NULL out of range. */
const tnt_algo_rule_t *tnt__algo_rule(int rule);

/** The largest broadcast (bytes) that goes binomial rather than by the
 *  pipelined chain, for nranks ranks and segments of segment_bytes; it
 *  grows with the rank count (select.c states the rule). */
size_t tnt__bcast_binomial_max_bytes(int nranks, size_t segment_bytes);

/** The largest allreduce (bytes) that goes by recursive doubling rather
 *  than Rabenseifner for nranks ranks, flat; it shrinks as the rank count
 *  grows (select.c states the rule). */
size_t tnt__allreduce_rd_max_bytes(int nranks);

/** The largest allreduce (bytes) that goes by Rabenseifner rather than
 *  the ring (or the tree from 17 ranks) for nranks ranks, flat: larger
 *  for a power of two up to 16 ranks (select.c states the rule). */
size_t tnt__allreduce_rab_max_bytes(int nranks);

/** tnt__algo_select, also naming the rule that gave the algorithm. The
 *  same decision: tnt__algo_select is this without the rule. */
tnt_result_t tnt__algo_select_why(const tnt_coll_args_t *a, int forced,
                                  int *algo, int *rule);

/** Build the schedule of `algo` for a. */
tnt_result_t tnt__build_schedule(const tnt_coll_args_t *a, int algo,
                                 tnt_sched_t *s);

tnt_result_t tnt__allreduce_ring(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__allreduce_rd(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__allreduce_rab(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__allreduce_hier(const tnt_coll_args_t *a, tnt_sched_t *s);
/* The tree allreduce's segments are never smaller than this, whatever
 * TNT_SEGMENT_BYTES says (but the last of a half, or a half this small). */
#define TNT_TREE_MIN_SEG_BYTES ((size_t)4 << 10)
tnt_result_t tnt__allreduce_tree(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__allreduce_oneshot(const tnt_coll_args_t *a,
                                    tnt_sched_t *s);
tnt_result_t tnt__allreduce_direct(const tnt_coll_args_t *a,
                                   tnt_sched_t *s);
/** Also the reduce-scatter's (a->kind). */
tnt_result_t tnt__allreduce_canon(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__allreduce_canon_oneshot(const tnt_coll_args_t *a,
                                          tnt_sched_t *s);
/** The largest allreduce (bytes) that the reproducible mode runs as
 *  canonical-oneshot rather than canonical (select.c). */
#define TNT_CANON_ONESHOT_MAX_BYTES ((size_t)16 << 10)
/** The same at 2 ranks: there the one-shot form is the default's rd (one
 *  exchange of the whole input), which the default runs up to 64 KiB;
 *  canonical's two steps of half the bytes were slower at 32 KiB
 *  (docs/performance.md, "issue 38: a settled comparison, and canonical
 *  by halving"). */
#define TNT_CANON_ONESHOT_P2_MAX_BYTES ((size_t)64 << 10)
/** The largest allreduce (bytes) that canonical runs by halving at a
 *  power of two above 2 (allreduce_canon.c): at p = 4 over TCP faster
 *  than the direct flow at 32 and 64 KiB, slower from 128 KiB
 *  (docs/performance.md, "issue 38: a settled comparison, and canonical
 *  by halving"). */
#define TNT_CANON_HALVING_MAX_BYTES ((size_t)64 << 10)
/** The most ranks whose on-host algorithms the reproducible mode runs
 *  (canonical-slots, -staged, -mapped: core/onhost/ keeps a pointer per
 *  rank's input on its stack for the canonical kernel). */
#define TNT_CANON_ONHOST_MAX_RANKS 64
tnt_result_t tnt__bcast_flat(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__bcast_binomial(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__bcast_pipeline(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__barrier_dissemination(const tnt_coll_args_t *a,
                                        tnt_sched_t *s);
tnt_result_t tnt__allgather_ring(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__allgather_bruck(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__reduce_scatter_ring(const tnt_coll_args_t *a,
                                      tnt_sched_t *s);
tnt_result_t tnt__local_copy(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__reduce_root(const tnt_coll_args_t *a, int algo,
                              tnt_sched_t *s);
tnt_result_t tnt__gather_flat(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__scatter_flat(const tnt_coll_args_t *a, tnt_sched_t *s);
tnt_result_t tnt__alltoall_pairwise(const tnt_coll_args_t *a,
                                    tnt_sched_t *s);
tnt_result_t tnt__p2p_sched(const tnt_coll_args_t *a, tnt_sched_t *s);
/** The allreduce algorithm whose schedule a reduce of `a` runs: the one
 *  tnt_allreduce would pick for the same arguments, on-host ones
 *  replaced by the direct allreduce (the same rank-order chain, so the
 *  same bits; reduce_root.c). `forced`: TNT_ALLREDUCE_ALGO's. */
tnt_result_t tnt__reduce_algo(const tnt_coll_args_t *a, int forced,
                              int *algo);

/** First step of a broadcast's signature check (select.c): above every
 *  step a schedule's data uses, and below bits 30 and 31, which the
 *  core's flow control sets on a step to mark an RTS or CTS. */
#define TNT_SIG_CHECK_STEP 0x3f000000u

#endif /* TNT_COLLECTIVES_ALGORITHMS_H */
