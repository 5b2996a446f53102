/*
 * Algorithm names and the selection table. The table picks by message
 * size and rank count; TNT_ALLREDUCE_ALGO / TNT_BCAST_ALGO override it.
 *
 * Origin of the thresholds: the latency / bandwidth trade-off (recursive
 * doubling sends log2(p) full messages; Rabenseifner 2(p-1)/p of one in
 * 2 log2(p) steps; the ring the same volume in 2(p-1) pipelined steps),
 * checked with `tnt-bench allreduce` at p=4 on loopback
 * (docs/performance.md, "Allreduce selection by size (messages)"). At
 * p=2 Rabenseifner is the ring without its segment pipelining, so it is
 * not used there. To be re-tuned on a quiet machine and on the namespace
 * test bed.
 *
 * When every rank is on this host and every pair talks through shared
 * memory (args->intra_host, from the bootstrap table, so every rank
 * agrees), allreduce runs on the memory, not through messages: the slots
 * up to 8 KiB, the staged allreduce above; broadcast is staged at every
 * size; see docs/shm.md for how, docs/performance.md for the figures.
 */
#include <string.h>

#include "collectives/algorithms.h"
#include "collectives/canon.h"
#include "collectives/patterns.h"
#include "util/error.h"

/* Up to ALLREDUCE_SMALL_P ranks (one host of this machine's tests) the
 * thresholds are the ones measured here; from one more, recursive
 * doubling up to a bound shrinking with p (tnt__allreduce_rd_max_bytes,
 * towards ALLREDUCE_RD_LARGE_BYTES / 2) and above ALLREDUCE_RAB_MAX_BYTES
 * the double binary tree instead of the ring (docs/scale.md, "Large p":
 * the ring's 2(p-1) latencies). */
#define ALLREDUCE_SMALL_P 16
#define ALLREDUCE_RD_MAX_BYTES ((size_t)64 << 10)
#define ALLREDUCE_RD_LARGE_BYTES ((size_t)32 << 10)
#define ALLREDUCE_RAB_MAX_BYTES ((size_t)2 << 20)
/* Up to ALLREDUCE_SMALL_P ranks and a power of two (no fold: every rank
 * is in the halving), Rabenseifner up to 8 MiB: log2(p) dependent steps
 * each way against the ring's p - 1, so fewer waits and wake-ups per
 * call for the same bytes (measured against the ring: docs/performance.md,
 * "Rabenseifner to 8 MiB"). Not for other p: the fold's pre- and
 * post-steps move the whole vector once more, which the ring never does. */
#define ALLREDUCE_RAB_POW2_MAX_BYTES ((size_t)8 << 20)
/* Broadcast by messages: binomial up to tnt__bcast_binomial_max_bytes
 * (below), never less than this floor (where the segments are small
 * the chain's per-segment latency, not in the rule, counts). */
#define BCAST_BINOMIAL_MAX_BYTES ((size_t)256 << 10)
/* Hierarchical allreduce (allreduce_hier.c): from this size on, when the
 * job spans several hosts and some host has several ranks. Below it the
 * flat recursive doubling's log2(p) rounds beat three phases; above it
 * the cost model on the schedules has hierarchical ahead at 64 to 4,096
 * ranks with 4 or 8 per host (docs/scale.md, "The selection table against
 * the model"; not yet calibrated on real hosts). Its tags allow up to
 * HIER_MAX_LOCAL ranks on a host. */
#define ALLREDUCE_HIER_MIN_BYTES ((size_t)16 << 10)
#define HIER_MAX_LOCAL 1024
static const char *const algo_names[TNT_ALGO_END] = {
    [TNT_ALGO_AUTO] = "auto",
    [TNT_ALGO_RING] = "ring",
    [TNT_ALGO_RD] = "rd",
    [TNT_ALGO_BINOMIAL] = "binomial",
    [TNT_ALGO_PIPELINE] = "pipeline",
    [TNT_ALGO_DISSEMINATION] = "dissemination",
    [TNT_ALGO_LOCAL] = "local",
    [TNT_ALGO_RABENSEIFNER] = "rabenseifner",
    [TNT_ALGO_HIER] = "hierarchical",
    [TNT_ALGO_ONESHOT] = "oneshot",
    [TNT_ALGO_DIRECT] = "direct",
    [TNT_ALGO_FLAT] = "flat",
    [TNT_ALGO_SLOTS] = "slots",
    [TNT_ALGO_STAGED] = "staged",
    [TNT_ALGO_MAPPED] = "mapped",
    [TNT_ALGO_PAIRWISE] = "pairwise",
    [TNT_ALGO_P2P] = "p2p",
    [TNT_ALGO_TREE] = "tree",
    [TNT_ALGO_CANON] = "canonical",
    [TNT_ALGO_CANON_ONESHOT] = "canonical-oneshot",
    [TNT_ALGO_CANON_SLOTS] = "canonical-slots",
    [TNT_ALGO_CANON_STAGED] = "canonical-staged",
    [TNT_ALGO_CANON_MAPPED] = "canonical-mapped",
    [TNT_ALGO_BRUCK] = "bruck",
};

const char *tnt__algo_name(int algo)
{
    if (algo < 0 || algo >= TNT_ALGO_END)
        return "unknown";
    return algo_names[algo];
}

int tnt__algo_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < TNT_ALGO_END; i++)
        if (strcmp(name, algo_names[i]) == 0)
            return i;
    if (strcmp(name, "recursive_doubling") == 0)
        return TNT_ALGO_RD;
    if (strcmp(name, "rab") == 0)
        return TNT_ALGO_RABENSEIFNER;
    if (strcmp(name, "chain") == 0)
        return TNT_ALGO_PIPELINE;
    if (strcmp(name, "hier") == 0)
        return TNT_ALGO_HIER;
    return -1;
}

static int applies(int kind, int algo)
{
    switch (kind) {
    case TNT_COLL_ALLREDUCE:
        return algo == TNT_ALGO_RING || algo == TNT_ALGO_RD ||
               algo == TNT_ALGO_RABENSEIFNER || algo == TNT_ALGO_HIER ||
               algo == TNT_ALGO_ONESHOT || algo == TNT_ALGO_DIRECT ||
               algo == TNT_ALGO_SLOTS || algo == TNT_ALGO_STAGED ||
               algo == TNT_ALGO_MAPPED || algo == TNT_ALGO_TREE;
    case TNT_COLL_BROADCAST:
        return algo == TNT_ALGO_BINOMIAL || algo == TNT_ALGO_PIPELINE ||
               algo == TNT_ALGO_FLAT || algo == TNT_ALGO_STAGED;
    case TNT_COLL_ALLGATHER:
        return algo == TNT_ALGO_RING || algo == TNT_ALGO_BRUCK;
    default:
        return 0;
    }
}

/* The rows of the selection table, in the order tnt__algo_select_why tries
 * them; min/max bytes are the same macros it compares against, so
 * tnt-info's table (tnt__algo_rule) cannot drift from the code. */
static const tnt_algo_rule_t k_rules[TNT_RULE_COUNT] = {
    [TNT_RULE_SINGLE] = {-1, TNT_ALGO_LOCAL, 0, 0,
                         "one rank: a local copy"},
    [TNT_RULE_CANON_SLOTS] = {TNT_COLL_ALLREDUCE, TNT_ALGO_CANON_SLOTS, 1,
                              TNT_SLOT_BYTES,
                              "TNT_REPRODUCIBLE=1, floats, one host over "
                              "shared memory, small, at most 64 ranks "
                              "(TNT_ALLREDUCE_ALGO auto or slots)"},
    [TNT_RULE_CANON_MAPPED] = {TNT_COLL_ALLREDUCE, TNT_ALGO_CANON_MAPPED,
                               TNT_SLOT_BYTES + 1, 0,
                               "TNT_REPRODUCIBLE=1, floats, one host over "
                               "shared memory, buffers from tnt_mem_alloc "
                               "on every rank, at most 64 ranks "
                               "(TNT_ALLREDUCE_ALGO auto or mapped)"},
    [TNT_RULE_CANON_STAGED] = {TNT_COLL_ALLREDUCE, TNT_ALGO_CANON_STAGED,
                               TNT_SLOT_BYTES + 1, 0,
                               "TNT_REPRODUCIBLE=1, floats, one host over "
                               "shared memory, at most 64 ranks "
                               "(TNT_ALLREDUCE_ALGO auto, staged or "
                               "mapped)"},
    [TNT_RULE_CANON_ONESHOT] = {-1, TNT_ALGO_CANON_ONESHOT, 1,
                                TNT_CANON_ONESHOT_P2_MAX_BYTES,
                                "TNT_REPRODUCIBLE=1, floats: allreduce "
                                "and reduce, small: up to 16 KiB, at 2 "
                                "ranks 64 KiB (any size with "
                                "TNT_ALLREDUCE_ALGO=oneshot)"},
    [TNT_RULE_CANON] = {-1, TNT_ALGO_CANON, 1, 0,
                        "TNT_REPRODUCIBLE=1, floats: allreduce and reduce "
                        "above that (any other TNT_ALLREDUCE_ALGO), "
                        "reduce-scatter"},
    [TNT_RULE_FORCED] = {-1, -1, 0, 0,
                         "forced by TNT_ALLREDUCE_ALGO or TNT_BCAST_ALGO"},
    [TNT_RULE_SLOTS] = {TNT_COLL_ALLREDUCE, TNT_ALGO_SLOTS, 1,
                        TNT_SLOT_BYTES,
                        "one host over shared memory, small: the slots"},
    [TNT_RULE_MAPPED] = {TNT_COLL_ALLREDUCE, TNT_ALGO_MAPPED,
                         TNT_SLOT_BYTES + 1, 0,
                         "one host over shared memory, buffers from "
                         "tnt_mem_alloc on every rank"},
    [TNT_RULE_STAGED] = {TNT_COLL_ALLREDUCE, TNT_ALGO_STAGED,
                         TNT_SLOT_BYTES + 1, 0,
                         "one host over shared memory, otherwise"},
    [TNT_RULE_BCAST_STAGED] = {TNT_COLL_BROADCAST, TNT_ALGO_STAGED, 0, 0,
                               "one host over shared memory, any size"},
    [TNT_RULE_HIER] = {TNT_COLL_ALLREDUCE, TNT_ALGO_HIER,
                       ALLREDUCE_HIER_MIN_BYTES, 0,
                       "several hosts, some with several ranks (at most "
                       "1024 a host), TNT_TOPOLOGY=auto"},
    [TNT_RULE_RD] = {TNT_COLL_ALLREDUCE, TNT_ALGO_RD, 0,
                     ALLREDUCE_RD_MAX_BYTES,
                     "messages, small: up to 64 KiB to 16 ranks, then "
                     "32 KiB x L / (2L - 3), L = ceil(log2 p): shrinks "
                     "with p towards 16 KiB (or fewer elements than "
                     "ranks)"},
    [TNT_RULE_RAB] = {TNT_COLL_ALLREDUCE, TNT_ALGO_RABENSEIFNER,
                      ALLREDUCE_RD_LARGE_BYTES / 2 + 1,
                      ALLREDUCE_RAB_POW2_MAX_BYTES,
                      "messages, more than 2 ranks, above rd's bound: up "
                      "to 8 MiB for 4, 8 or 16 ranks, else up to 2 MiB"},
    [TNT_RULE_TREE] = {TNT_COLL_ALLREDUCE, TNT_ALGO_TREE,
                       ALLREDUCE_RAB_MAX_BYTES + 1, 0,
                       "messages, large, more than 16 ranks (also the "
                       "hierarchical allreduce's step across more than 16 "
                       "hosts)"},
    [TNT_RULE_RING] = {TNT_COLL_ALLREDUCE, TNT_ALGO_RING, 0, 0,
                       "messages, otherwise (large, or 2 ranks)"},
    [TNT_RULE_BINOMIAL] = {TNT_COLL_BROADCAST, TNT_ALGO_BINOMIAL, 0, 0,
                           "messages, up to max(256 KiB, k segments "
                           "(TNT_SEGMENT_BYTES)), k = ceil(1.5 (p-2) / "
                           "(ceil(log2 p) - 1)) from 4 ranks: grows with p"},
    [TNT_RULE_PIPELINE] = {TNT_COLL_BROADCAST, TNT_ALGO_PIPELINE,
                           BCAST_BINOMIAL_MAX_BYTES + 1, 0,
                           "messages, larger: a pipelined chain"},
    [TNT_RULE_BARRIER] = {TNT_COLL_BARRIER, TNT_ALGO_DISSEMINATION, 0, 0,
                          "always"},
    [TNT_RULE_GATHER_RING] = {-1, TNT_ALGO_RING, 0, 0,
                              "allgather and reduce-scatter: always"},
    [TNT_RULE_REDUCE] = {TNT_COLL_REDUCE, -1, 0, 0,
                         "reduce: the allreduce's algorithm for the same "
                         "arguments (on one host over shared memory: "
                         "direct), so the same bits"},
    [TNT_RULE_ROOTED_FLAT] = {-1, TNT_ALGO_FLAT, 0, 0,
                              "gather and scatter: always"},
    [TNT_RULE_PAIRWISE] = {-1, TNT_ALGO_PAIRWISE, 0, 0,
                           "alltoall and alltoallv: always"},
    [TNT_RULE_P2P] = {-1, TNT_ALGO_P2P, 0, 0,
                      "tnt_send and tnt_recv: one message"},
};

const tnt_algo_rule_t *tnt__algo_rule(int rule)
{
    return rule >= 0 && rule < TNT_RULE_COUNT ? &k_rules[rule] : NULL;
}

/*
 * Binomial or pipelined chain, by the cost model (model.c) of the two
 * schedules. With n bytes in k segments of s bytes, per-segment time t =
 * alpha + s beta, the chain takes (p - 2 + k) t (its fill, then a
 * segment a step), the binomial tree L = ceil(log2 p) rounds of the
 * whole buffer, L k t: the chain wins when k > (p-2)/(L-1). The chain
 * goes at its slowest link, so where links differ (several ranks a
 * host) its crossover lies later than that count: the rule takes 1.5
 * times it (docs/scale.md, "Broadcast: binomial or chain, by p"), and
 * never less than BCAST_BINOMIAL_MAX_BYTES. The segment stays
 * TNT_SEGMENT_BYTES: the rule counts in segments. At 2 and 3 ranks both
 * algorithms send the same and the floor alone decides. The figures
 * behind the rule: docs/performance.md, "Selection rules: the
 * measurements behind them".
 */
size_t tnt__bcast_binomial_max_bytes(int nranks, size_t segment_bytes)
{
    if (nranks < 4 || segment_bytes == 0)
        return BCAST_BINOMIAL_MAX_BYTES;
    size_t p = (size_t)nranks;
    size_t L = 0;
    while (((size_t)1 << L) < p)
        L++;
    size_t k = (3 * (p - 2) + 2 * (L - 1) - 1) / (2 * (L - 1));
    size_t max = k * segment_bytes;
    if (max / segment_bytes != k)
        max = (size_t)-1; /* saturate */
    return max > BCAST_BINOMIAL_MAX_BYTES ? max : BCAST_BINOMIAL_MAX_BYTES;
}

/*
 * Recursive doubling or Rabenseifner, by the alpha-beta-gamma costs of
 * the two (power-of-two p, L = log2 p rounds): rd L (alpha + n beta +
 * n gamma), Rabenseifner 2 L alpha + 2 n beta + n gamma. rd is the
 * faster up to n* = L alpha / ((L - 1) gamma + (L - 2) beta), which
 * shrinks as p grows, towards alpha / (beta + gamma): with beta = gamma,
 * n* = (alpha / gamma) L / (2L - 3), twice as large at L = 2 as at large
 * L. So the bound is ALLREDUCE_RD_MAX_BYTES (measured) up to
 * ALLREDUCE_SMALL_P ranks, and ALLREDUCE_RD_LARGE_BYTES x L / (2L - 3)
 * above. The figures behind the rule: docs/performance.md, "Selection
 * rules: the measurements behind them".
 */
size_t tnt__allreduce_rd_max_bytes(int nranks)
{
    if (nranks <= ALLREDUCE_SMALL_P)
        return ALLREDUCE_RD_MAX_BYTES;
    size_t L = 0;
    while (((size_t)1 << L) < (size_t)nranks)
        L++;
    return ALLREDUCE_RD_LARGE_BYTES * L / (2 * L - 3);
}

size_t tnt__allreduce_rab_max_bytes(int nranks)
{
    int pow2 = nranks > 0 && (nranks & (nranks - 1)) == 0;
    return nranks <= ALLREDUCE_SMALL_P && pow2 ? ALLREDUCE_RAB_POW2_MAX_BYTES
                                               : ALLREDUCE_RAB_MAX_BYTES;
}

/* The one decision: which rule applies, and so which algorithm. */
tnt_result_t tnt__algo_select_why(const tnt_coll_args_t *a, int forced,
                                  int *algo, int *rule)
{
    size_t bytes = a->count * a->esize;
    if (a->kind == TNT_COLL_P2P) { /* never to itself: checked by the API */
        *algo = TNT_ALGO_P2P;
        *rule = TNT_RULE_P2P;
        return TNT_SUCCESS;
    }
    if (a->nranks == 1) {
        *algo = TNT_ALGO_LOCAL;
        *rule = TNT_RULE_SINGLE;
        return TNT_SUCCESS;
    }
    /* The reproducible mode: every floating-point reduction through the
     * canonical order, whatever the size, layout or forced algorithm
     * (allreduce_canon.c, and on one host the on-host algorithms
     * reducing canonically); TNT_ALLREDUCE_ALGO=oneshot picks the
     * one-step form at any size, an algorithm of messages the canonical
     * schedule. A reduce runs the allreduce's choice. */
    if (a->reproducible && tnt__canon_dtype(a->dtype) && bytes > 0 &&
        (a->kind == TNT_COLL_ALLREDUCE || a->kind == TNT_COLL_REDUCE ||
         a->kind == TNT_COLL_REDUCE_SCATTER)) {
        /* On one host the on-host algorithms, whose owners hold all k
         * inputs of a region at once: no messages (core/onhost/). */
        int onhost = a->kind == TNT_COLL_ALLREDUCE && a->intra_host &&
                     a->nranks <= TNT_CANON_ONHOST_MAX_RANKS;
        if (onhost && bytes <= TNT_SLOT_BYTES &&
            (forced == TNT_ALGO_AUTO || forced == TNT_ALGO_SLOTS)) {
            *rule = TNT_RULE_CANON_SLOTS;
            *algo = TNT_ALGO_CANON_SLOTS;
            return TNT_SUCCESS;
        }
        if (onhost && bytes > TNT_SLOT_BYTES &&
            (forced == TNT_ALGO_AUTO || forced == TNT_ALGO_STAGED ||
             forced == TNT_ALGO_MAPPED)) {
            *rule = a->mapped && forced != TNT_ALGO_STAGED
                        ? TNT_RULE_CANON_MAPPED
                        : TNT_RULE_CANON_STAGED;
            *algo = k_rules[*rule].algo;
            return TNT_SUCCESS;
        }
        int oneshot = a->kind != TNT_COLL_REDUCE_SCATTER &&
                      (forced == TNT_ALGO_ONESHOT ||
                       (forced == TNT_ALGO_AUTO &&
                        bytes <= (a->nranks == 2
                                      ? TNT_CANON_ONESHOT_P2_MAX_BYTES
                                      : TNT_CANON_ONESHOT_MAX_BYTES)));
        *rule = oneshot ? TNT_RULE_CANON_ONESHOT : TNT_RULE_CANON;
        *algo = k_rules[*rule].algo;
        return TNT_SUCCESS;
    }
    /* A reduce follows the allreduce's choice, forced one included
     * (reduce_root.c says why). */
    if (a->kind == TNT_COLL_REDUCE) {
        *rule = TNT_RULE_REDUCE;
        return tnt__reduce_algo(a, forced, algo);
    }
    if (forced != TNT_ALGO_AUTO) {
        *rule = TNT_RULE_FORCED;
        if (!applies(a->kind, forced))
            return tnt__error(TNT_ERR_CONFIG, "algorithm '%s' does not "
                              "apply to this collective",
                              tnt__algo_name(forced));
        if (forced == TNT_ALGO_HIER &&
            (!a->topo || a->topo->max_local > HIER_MAX_LOCAL))
            return tnt__error(TNT_ERR_CONFIG, "hierarchical allreduce "
                              "needs the host layout (TNT_TOPOLOGY=auto) "
                              "and at most %d ranks per host",
                              HIER_MAX_LOCAL);
        if (forced == TNT_ALGO_SLOTS && (!a->intra_host || bytes == 0 ||
                                         bytes > TNT_SLOT_BYTES))
            return tnt__error(TNT_ERR_CONFIG, "the slots allreduce needs "
                              "every rank on this host over shared memory "
                              "and 1 to %zu bytes", TNT_SLOT_BYTES);
        if (forced == TNT_ALGO_STAGED && !a->intra_host)
            return tnt__error(TNT_ERR_CONFIG, "the staged %s needs every "
                              "rank on this host over shared memory",
                              a->kind == TNT_COLL_BROADCAST ? "broadcast"
                                                            : "allreduce");
        if (forced == TNT_ALGO_MAPPED && bytes > 0 &&
            (!a->intra_host || !a->mapped))
            return tnt__error(TNT_ERR_CONFIG, "the mapped allreduce needs "
                              "every rank on this host over shared memory "
                              "and send and receive buffers from "
                              "tnt_mem_alloc");
        /* Nothing to reduce: the staged allreduce's empty run (no
         * buffers to name). */
        if (forced == TNT_ALGO_MAPPED && bytes == 0) {
            *algo = a->intra_host ? TNT_ALGO_STAGED : TNT_ALGO_RING;
            return TNT_SUCCESS;
        }
        *algo = forced;
        return TNT_SUCCESS;
    }
    /* One host over shared memory, small: the slots in the pairs'
     * segments, no messages (core/onhost/slots.c). */
    if (a->intra_host && a->kind == TNT_COLL_ALLREDUCE && bytes > 0 &&
        bytes <= TNT_SLOT_BYTES) {
        *algo = TNT_ALGO_SLOTS;
        *rule = TNT_RULE_SLOTS;
        return TNT_SUCCESS;
    }
    /* One host, larger, buffers in shared allocations on every rank:
     * each rank reduces its slice of the peers' buffers where they lie
     * and writes the result into all of them, nothing staged: ahead
     * of the staged and direct allreduces at every size above the slots'
     * (docs/performance.md, "Shared memory"). */
    if (a->intra_host && a->kind == TNT_COLL_ALLREDUCE && a->mapped &&
        bytes > 0) {
        *algo = TNT_ALGO_MAPPED;
        *rule = TNT_RULE_MAPPED;
        return TNT_SUCCESS;
    }
    /* One host, larger: the staged allreduce (core/onhost/staged_allreduce.c:
     * no messages, two waits a round), at every size and whether or not
     * every rank has a core: from 4 MiB at p = 2 it took 0.58-0.80x the
     * direct allreduce's time, whose pulls by process_vm_readv pin every
     * page (docs/performance.md, "On one host: staged or direct"). */
    if (a->intra_host && a->kind == TNT_COLL_ALLREDUCE && bytes > 0) {
        *algo = TNT_ALGO_STAGED;
        *rule = TNT_RULE_STAGED;
        return TNT_SUCCESS;
    }
    /* Broadcast on one host: staged at every size, far ahead of flat and
     * binomial up to 128 KiB and even above (docs/performance.md,
     * "Broadcast on one host"). */
    if (a->intra_host && a->kind == TNT_COLL_BROADCAST) {
        *algo = TNT_ALGO_STAGED;
        *rule = TNT_RULE_BCAST_STAGED;
        return TNT_SUCCESS;
    }
    switch (a->kind) {
    case TNT_COLL_ALLREDUCE:
        if (a->topo && a->topo->nhosts > 1 && a->topo->max_local > 1 &&
            a->topo->max_local <= HIER_MAX_LOCAL &&
            bytes >= ALLREDUCE_HIER_MIN_BYTES)
            *rule = TNT_RULE_HIER;
        else if (bytes <= tnt__allreduce_rd_max_bytes(a->nranks) ||
                 a->count < (size_t)a->nranks)
            *rule = TNT_RULE_RD;
        else if (a->nranks > 2 &&
                 bytes <= tnt__allreduce_rab_max_bytes(a->nranks))
            *rule = TNT_RULE_RAB;
        else if (a->nranks > ALLREDUCE_SMALL_P)
            *rule = TNT_RULE_TREE;
        else
            *rule = TNT_RULE_RING;
        *algo = k_rules[*rule].algo;
        break;
    case TNT_COLL_BROADCAST:
        *rule = bytes <= tnt__bcast_binomial_max_bytes(a->nranks,
                                                       a->segment_bytes)
                    ? TNT_RULE_BINOMIAL
                    : TNT_RULE_PIPELINE;
        *algo = k_rules[*rule].algo;
        break;
    case TNT_COLL_BARRIER:
        *algo = TNT_ALGO_DISSEMINATION;
        *rule = TNT_RULE_BARRIER;
        break;
    case TNT_COLL_ALLGATHER:
    case TNT_COLL_REDUCE_SCATTER:
        *algo = TNT_ALGO_RING;
        *rule = TNT_RULE_GATHER_RING;
        break;
    case TNT_COLL_GATHER:
    case TNT_COLL_SCATTER:
        *algo = TNT_ALGO_FLAT;
        *rule = TNT_RULE_ROOTED_FLAT;
        break;
    case TNT_COLL_ALLTOALL:
    case TNT_COLL_ALLTOALLV:
        *algo = TNT_ALGO_PAIRWISE;
        *rule = TNT_RULE_PAIRWISE;
        break;
    default:
        return tnt__error(TNT_ERR_INTERNAL, "unknown collective kind %d",
                          a->kind);
    }
    return TNT_SUCCESS;
}

tnt_result_t tnt__algo_select(const tnt_coll_args_t *a, int forced,
                              int *algo)
{
    int rule;
    return tnt__algo_select_why(a, forced, algo, &rule);
}

tnt_result_t tnt__local_copy(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t bytes = a->count * a->esize;
    int copies = (a->kind == TNT_COLL_ALLREDUCE ||
                  a->kind == TNT_COLL_ALLGATHER ||
                  a->kind == TNT_COLL_REDUCE_SCATTER ||
                  a->kind == TNT_COLL_REDUCE ||
                  a->kind == TNT_COLL_GATHER ||
                  a->kind == TNT_COLL_SCATTER ||
                  a->kind == TNT_COLL_ALLTOALL);
    if (copies && !a->in_place && bytes > 0)
        tnt__sched_copy(s, tnt__ref(TNT_BUF_RECV, 0),
                        tnt__ref(TNT_BUF_SEND, 0), bytes);
    return TNT_SUCCESS;
}

/* A broadcast's data flows from the root down a tree or chain, so a rank
 * hears only from its parent, and the root from nobody: ranks that
 * disagree on the root (or count, dtype, the collective) could finish
 * without any message between the ones that differ, and a bystander
 * return success. Every broadcast therefore also runs a dissemination
 * of empty messages (barrier.c's pattern, its own steps), independent of
 * the data: every message carries the signature, and a rank completes
 * only after hearing, directly or transitively, from every rank, so a
 * mismatch fails the call on every rank. It runs beside the data, so it
 * adds about log2(p) small-message latencies at most, not a round
 * trip per step. */

static void add_signature_check(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int p = a->nranks;
    uint32_t prev = TNT_SOP_NONE;
    uint32_t step = TNT_SIG_CHECK_STEP;
    for (int dist = 1; dist < p; dist *= 2, step++) {
        tnt_bufref_t none = tnt__ref(TNT_BUF_RECV, 0);
        uint32_t snd = tnt__sched_send(s, tnt__mod(a->rank + dist, p), step,
                                       none, 0);
        uint32_t rcv = tnt__sched_recv(s, tnt__mod(a->rank - dist, p), step,
                                       none, 0);
        tnt__sched_dep(s, prev, snd);
        tnt__sched_dep(s, prev, rcv);
        prev = rcv;
    }
}

tnt_result_t tnt__build_schedule(const tnt_coll_args_t *a, int algo,
                                 tnt_sched_t *s)
{
    tnt__sched_init(s, a->rank, a->nranks, a->esize);
    tnt_result_t rc;
    if (a->kind == TNT_COLL_REDUCE) {
        rc = tnt__reduce_root(a, algo, s);
        goto built;
    }
    /* One rank's alltoallv copies its own block as the pairwise one does
     * for any rank count. */
    if (a->kind == TNT_COLL_ALLTOALLV && algo == TNT_ALGO_LOCAL)
        algo = TNT_ALGO_PAIRWISE;
    switch (algo) {
    case TNT_ALGO_LOCAL: rc = tnt__local_copy(a, s); break;
    case TNT_ALGO_RING:
        rc = a->kind == TNT_COLL_ALLREDUCE   ? tnt__allreduce_ring(a, s)
             : a->kind == TNT_COLL_ALLGATHER ? tnt__allgather_ring(a, s)
                                             : tnt__reduce_scatter_ring(a, s);
        break;
    case TNT_ALGO_BRUCK: rc = tnt__allgather_bruck(a, s); break;
    case TNT_ALGO_RD: rc = tnt__allreduce_rd(a, s); break;
    case TNT_ALGO_RABENSEIFNER: rc = tnt__allreduce_rab(a, s); break;
    case TNT_ALGO_HIER: rc = tnt__allreduce_hier(a, s); break;
    case TNT_ALGO_TREE: rc = tnt__allreduce_tree(a, s); break;
    case TNT_ALGO_ONESHOT: rc = tnt__allreduce_oneshot(a, s); break;
    case TNT_ALGO_DIRECT: rc = tnt__allreduce_direct(a, s); break;
    case TNT_ALGO_CANON: rc = tnt__allreduce_canon(a, s); break;
    case TNT_ALGO_CANON_ONESHOT:
        rc = tnt__allreduce_canon_oneshot(a, s);
        break;
    case TNT_ALGO_FLAT:
        rc = a->kind == TNT_COLL_GATHER    ? tnt__gather_flat(a, s)
             : a->kind == TNT_COLL_SCATTER ? tnt__scatter_flat(a, s)
                                           : tnt__bcast_flat(a, s);
        break;
    case TNT_ALGO_PAIRWISE: rc = tnt__alltoall_pairwise(a, s); break;
    case TNT_ALGO_P2P: rc = tnt__p2p_sched(a, s); break;
    case TNT_ALGO_BINOMIAL: rc = tnt__bcast_binomial(a, s); break;
    case TNT_ALGO_PIPELINE: rc = tnt__bcast_pipeline(a, s); break;
    case TNT_ALGO_DISSEMINATION: rc = tnt__barrier_dissemination(a, s); break;
    case TNT_ALGO_SLOTS: /* no schedule: the engine runs them */
    case TNT_ALGO_STAGED:
    case TNT_ALGO_CANON_SLOTS:
    case TNT_ALGO_CANON_STAGED:
    case TNT_ALGO_CANON_MAPPED:
    case TNT_ALGO_MAPPED: rc = TNT_SUCCESS; break;
    default:
        rc = tnt__error(TNT_ERR_INTERNAL, "no builder for algorithm %d",
                        algo);
    }
built:
    /* Broadcast, gather, scatter: data flows between the root and each
     * rank only, so a rank would not hear from every other (above). */
    if (rc == TNT_SUCCESS && algo != TNT_ALGO_LOCAL &&
        (a->kind == TNT_COLL_BROADCAST || a->kind == TNT_COLL_GATHER ||
         a->kind == TNT_COLL_SCATTER))
        add_signature_check(a, s);
    if (rc == TNT_SUCCESS)
        rc = tnt__sched_finalize(s);
    if (rc != TNT_SUCCESS)
        tnt__sched_destroy(s);
    return rc;
}
