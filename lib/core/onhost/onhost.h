/*
 * The on-host algorithms as the on-host queue (onhost/queue.c) runs them:
 * collectives among ranks that all share this host, run through the
 * pairs' shared-memory areas (the transport's pair_area) without messages
 * and without a schedule. One file per algorithm, each with one table of
 * entry points (tnt_onhost_algo_t); the queue calls them through it and
 * keeps the order, the numbering across algorithms and the search for
 * mismatches that meet in no shared memory.
 *
 *   slots.c             slots allreduce (small): inputs in the pairs' slots
 *   staged_allreduce.c  staged allreduce: slices reduced in staging buffers
 *   mapped_allreduce.c  mapped allreduce: slices reduced in shared buffers
 *   staged_bcast.c      staged broadcast: the root's data in staging buffers
 *   stage_rounds.c      the staging areas' rounds, shared by the last three
 *   onhost_state.h      each algorithm's state in a request
 *   slot_layout.h, stage_layout.h   the pair areas' layouts (the transport
 *                       hands them out as bytes: pair_area)
 *
 * Everything runs with comm->group->lock held.
 */
#ifndef TNT_CORE_ONHOST_ONHOST_H
#define TNT_CORE_ONHOST_ONHOST_H

#include "collectives/canon.h"
#include "collectives/rank_order.h"
#include "core/comm_tp.h"
#include "core/engine_internal.h"

typedef struct tnt_onhost_algo {
    /* Number req among the communicator's on-host operations and set up
     * its state, as it joins the queue (in posting order, the same on
     * every rank). */
    void (*start)(struct tnt_comm *comm, struct tnt_request *req);
    /* Move req as far as the peers allow; 1 once it has all it needs
     * from them. */
    int (*step)(struct tnt_comm *comm, struct tnt_request *req);
    /* req is the oldest in the queue and step said 1: what remains
     * before it finishes (the slots reduce their inputs). NULL: nothing. */
    void (*complete)(struct tnt_comm *comm, struct tnt_request *req);
    /* req leaves the queue, finished or failed: give back what it
     * holds besides the request. NULL: nothing. */
    void (*dequeued)(struct tnt_comm *comm, struct tnt_request *req);
    /* Peer q's connection is closing, its area still mapped: keep what
     * req still reads from it. 0 when out of memory for that: the
     * queue looks no further. */
    int (*peer_closing)(struct tnt_comm *comm, struct tnt_request *req,
                        int q);
    /* Does req still need peer q (to publish to it, or to read from it)? */
    int (*needs)(const struct tnt_request *req, int q);
    /* Operations of req, as the reports count them. */
    uint32_t (*nops)(const struct tnt_request *req);
    /* What req waits for, for the reports; returns the length written. */
    size_t (*report)(const struct tnt_request *req, char *buf, size_t len);
    /* Uses the rounds of the pairs' staging areas (numbered per
     * communicator, comm->onhost.stage_next): only the oldest such request
     * moves, since its rounds come before a later one's; a stalled one
     * compares the headers peers published for its sequence number
     * (tnt__stage_same_seq_check). */
    int stage_rounds;
    /* A blocking post with nothing else in flight and nobody polling
     * may run req here first, without the queue, the lists and the
     * poller's round over the rings (docs/performance.md, "The lean
     * blocking slots allreduce"): number it as start would, publish and
     * look at the peers a bounded number of times. 1 when it finished
     * (req->result set: success, or the communicator failed meanwhile);
     * 0 when it goes on as a queued request (start then leaves its
     * number alone: req->onhost.lean). NULL: only from the queue. */
    int (*run_now)(struct tnt_comm *comm, struct tnt_request *req);
    /* Reads where its send and receive buffers lie in this rank's shared
     * allocations (req->onhost.map_ref), which the post sets. */
    int mapped_bufs;
} tnt_onhost_algo_t;

extern const tnt_onhost_algo_t tnt__onhost_slots;
extern const tnt_onhost_algo_t tnt__onhost_staged_allreduce;
extern const tnt_onhost_algo_t tnt__onhost_mapped_allreduce;
extern const tnt_onhost_algo_t tnt__onhost_staged_bcast;

/** This rank's side of the pair area `area` (TNT_TP_AREA_SLOTS,
 *  TNT_TP_AREA_STAGES) with q, which it writes (mine), or q's side, which
 *  it reads (theirs); q connected over shm. The slots' areas are looked
 *  up once per endpoint (peers[q].onhost.slot_ep): the lookup is a call
 *  into the transport, and the blocking call's spin looks at the slots all the
 *  time. The staging areas are looked up at each use, a few times per
 *  round of up to 256 KiB. */
static inline const void *tnt__onhost_area(struct tnt_comm *comm, int q,
                                           int area, int theirs)
{
    tnt_peer_t *p = &comm->peers[q];
    void *m;
    const void *t;
    if (area != TNT_TP_AREA_SLOTS) {
        tnt__comm_tp_pair_area(comm, q, area, &m, &t);
        return theirs ? t : m;
    }
    if (p->onhost.slot_ep != p->ep) {
        tnt__comm_tp_pair_area(comm, q, area, &m, &t);
        p->onhost.slot_mine = m;
        p->onhost.slot_theirs = t;
        p->onhost.slot_ep = p->ep;
    }
    return theirs ? (const void *)p->onhost.slot_theirs
                  : (const void *)p->onhost.slot_mine;
}

static inline void *tnt__onhost_mine(struct tnt_comm *comm, int q, int area)
{
    return (void *)(uintptr_t)tnt__onhost_area(comm, q, area, 0);
}

static inline const void *tnt__onhost_theirs(struct tnt_comm *comm, int q,
                                             int area)
{
    return tnt__onhost_area(comm, q, area, 1);
}

/** Fold rank i's n elements `in` into acc in the rank order
 *  (collectives/rank_order.h), with req's kernel: for i = 0..k-1. */
static inline void tnt__onhost_fold(const struct tnt_request *req,
                                    void *acc, int i, const void *in,
                                    size_t n)
{
    tnt__rank_order_fold(acc, i, req->args.nranks, in, n, req->args.esize,
                         req->reduce, req->args.dtype, req->args.op);
}

/** Reduce the k inputs of a region, rank i's n elements at in[i], into
 *  acc (which overlaps none of them) with the canonical kernel
 *  (collectives/canon.h): the reproducible mode's on-host algorithms
 *  (tnt__algo_onhost_canon; at most TNT_CANON_ONHOST_MAX_RANKS ranks),
 *  where the others fold with tnt__onhost_fold. */
static inline void tnt__onhost_canon(const struct tnt_request *req,
                                     void *acc, const void *const *in,
                                     size_t n)
{
    tnt__canon_reduce_ptrs(acc, in, req->args.nranks, n, req->args.dtype,
                           req->args.op);
}

/** The report of an on-host request: up to 4 peers for which waits(req,
 *  q) holds, each as describe writes it (snprintf-like, beginning with
 *  sep: "" for the first, "; " after), truncated at len; returns the
 *  length of the whole entries written. */
size_t tnt__onhost_report_peers(const struct tnt_request *req, char *buf,
                                size_t len,
                                int (*waits)(const struct tnt_request *req,
                                             int q),
                                int (*describe)(const struct tnt_request *req,
                                                int q, const char *sep,
                                                char *buf, size_t len));

/** The table of req's algorithm (an on-host request). */
static inline const tnt_onhost_algo_t *
tnt__onhost_algo_of(const struct tnt_request *req)
{
    return req->onhost.algo;
}

/** req has all it needs: off the queue, finished. */
void tnt__onhost_finish(struct tnt_comm *comm, struct tnt_request *req);

/** Fail with the mismatch if a peer published, for req's sequence
 *  number, a staging header of another signature (it called something
 *  else) (stage_rounds.c). */
void tnt__stage_same_seq_check(struct tnt_comm *comm,
                               struct tnt_request *req);
/** A staged round published by q for a collective this rank called as
 *  something else: fail with the mismatch (stage_rounds.c). */
void tnt__stage_check_strays(struct tnt_comm *comm, int q);
/** A slot operation published by q for a collective this rank called as
 *  something else: fail with the mismatch (slots.c). */
void tnt__slots_check_strays(struct tnt_comm *comm, int q);

#endif /* TNT_CORE_ONHOST_ONHOST_H */
