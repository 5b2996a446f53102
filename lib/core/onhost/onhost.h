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
 *
 * Everything runs with comm->lock held.
 */
#ifndef TNT_CORE_ONHOST_ONHOST_H
#define TNT_CORE_ONHOST_ONHOST_H

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
     * communicator, comm->stage_next): only the oldest such request
     * moves, since its rounds come before a later one's; a stalled one
     * compares the headers peers published for its sequence number
     * (tnt__stage_same_seq_check). */
    int stage_rounds;
} tnt_onhost_algo_t;

extern const tnt_onhost_algo_t tnt__onhost_slots;
extern const tnt_onhost_algo_t tnt__onhost_staged_allreduce;
extern const tnt_onhost_algo_t tnt__onhost_mapped_allreduce;
extern const tnt_onhost_algo_t tnt__onhost_staged_bcast;

/** The table of req's algorithm (req->algo an on-host one). */
const tnt_onhost_algo_t *tnt__onhost_algo_of(const struct tnt_request *req);

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
