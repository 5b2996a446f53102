/*
 * Per-request state of the on-host algorithms (core/onhost/onhost.h):
 * tnt_onhost_req_t in struct tnt_request (req->onhost) and
 * tnt_onhost_peer_t in each of its per-peer operation states
 * (req->ops[q].onhost, one per rank: on-host requests have no schedule).
 * Each algorithm's part is the union member named for it; requests and
 * their operation states start zeroed. tnt_onhost_pair_t (in each
 * peer, comm->peers[q].onhost) and tnt_onhost_comm_t (comm->onhost) hold
 * what outlives a request.
 */
#ifndef TNT_CORE_ONHOST_ONHOST_STATE_H
#define TNT_CORE_ONHOST_ONHOST_STATE_H

#include <stdint.h>

#include "core/mem.h"
#include "tnt/tnt.h"

struct tnt_request;
struct tnt_unexp;
struct tnt_onhost_algo;

/* The staging rounds (stage_rounds.c) with peer q: staged and mapped
 * allreduce, staged broadcast. */
typedef struct tnt_stage_peer {
    /* Rounds published to q (a broadcast's non-root: all of them from
     * the start, it publishes nothing). */
    uint64_t put;
    /* Rounds of q's results copied out; a broadcast root: rounds q has
     * read; the mapped allreduce: 1 once q has written its slice of the
     * result here. */
    uint64_t got;
    union {
        /* The staged broadcast's signature exchange: bit 0 this rank's
         * published to q, bit 1 q's read and checked. */
        unsigned bcast_sig;
        /* The mapped allreduce: q's send and receive buffers as mapped
         * here, once q has published where they lie. */
        struct {
            const unsigned char *src;
            unsigned char *dst;
        } mapped;
    };
} tnt_stage_peer_t;

/* What has passed between this rank and peer q. */
typedef union tnt_onhost_peer {
    /* The slots allreduce (slots.c). */
    struct {
        /* SLOT_PUT: this rank's input published to q; SLOT_GOT: q's
         * input is there. */
        unsigned passed;
        /* q's input (in ops[me]: this rank's own), copied out of the
         * slots when q's connection closed; NULL: read from the slot. */
        struct tnt_unexp *saved;
    } slots;
    tnt_stage_peer_t stage;
} tnt_onhost_peer_t;

typedef struct tnt_onhost_req {
    /* The algorithm that runs req (onhost.h), set at the post from the
     * algorithm id the selection table chose (tnt__onhost_algo); NULL
     * for a request that runs a schedule of messages. */
    const struct tnt_onhost_algo *algo;
    /* The on-host queue (queue.c): the next request, and whether req is
     * on it. */
    struct tnt_request *next;
    int queued;
    /* Numbered and begun by its algorithm's run_now (the slots). */
    int lean;
    union {
        /* The slots allreduce: its number among the communicator's slot
         * operations (slot no % 2 is its slot). */
        struct {
            uint64_t no;
        } slots;
        /* The staging rounds: the first round among the communicator's,
         * how many, how many this rank has reduced (a broadcast: all of
         * them from the start), and progress calls in a row that moved
         * nothing; the mapped allreduce: elements of this rank's slice
         * reduced so far (its one round is reduced a piece per pass). */
        struct {
            uint64_t g0, rounds, reduced;
            uint32_t stalls;
            uint64_t map_done;
        } stage;
    };
    /* The mapped allreduce: where its send and receive buffers lie in
     * this rank's shared allocations (set at the post); zero for every
     * other request. */
    tnt_mem_ref_t map_ref[2];
    /* The staging rounds stalled long enough: the queue searches for a
     * mismatch once the step returns (tnt__stage_after_step sets it). */
    int check_due;
} tnt_onhost_req_t;

/* The on-host algorithms' state with one peer (comm->peers[q].onhost). */
typedef struct tnt_onhost_pair {
    /* Slot operations (slots.c): the most this peer said it had
     * finished, and whether it may sleep unwoken on a publication here. */
    uint64_t slot_completed;
    int slot_notify;
    /* The pair's slot areas, for endpoint slot_ep (slots.c looks them up
     * again when the peer's endpoint changes; engine_wire.c clears
     * slot_ep when an endpoint goes). */
    void *slot_ep;
    struct tnt_slot_side *slot_mine;
    const struct tnt_slot_side *slot_theirs;
} tnt_onhost_pair_t;

/* The on-host algorithms' state in a communicator (comm->onhost). */
/* What the on-host algorithms ask of the engine (engine.c fills it at
 * the communicator's creation: tnt__engine_init_requests). They reach the
 * engine only through it, as a transport reaches the core only through
 * its env: so the algorithms sit below the engine, which calls them
 * through their tables (onhost.h), and nothing of theirs calls back up
 * by name. Lock held for every call. */
struct tnt_msg_hdr;
struct tnt_peer;
struct tnt_unexp;
typedef struct tnt_onhost_engine {
    /* Fail the communicator with rc and this message (tnt__engine_fail). */
    void (*fail)(struct tnt_comm *comm, tnt_result_t rc, const char *msg);
    /* Run what is ready of req; with nothing left, finish it. */
    void (*run_ready)(struct tnt_comm *comm, struct tnt_request *req);
    /* A descriptor for an early message; give one back. */
    struct tnt_unexp *(*alloc_unexp)(struct tnt_comm *comm);
    void (*free_unexp)(struct tnt_comm *comm, struct tnt_unexp *u);
    /* Connect to peer p if not connected nor connecting. */
    void (*ensure_connect)(struct tnt_comm *comm, struct tnt_peer *p);
    /* Peer q is lost (its connection closed: `what`). */
    void (*fail_peer_lost)(struct tnt_comm *comm, int q, const char *what);
    /* Fail with the mismatch of req and the header q published. */
    void (*report_mismatch)(struct tnt_comm *comm, struct tnt_request *req,
                            const struct tnt_msg_hdr *theirs, int q);
    /* q published h for a collective this rank posted already: if this
     * rank called something else there, fail with the mismatch; 1 then. */
    int (*mismatch_past)(struct tnt_comm *comm, const struct tnt_msg_hdr *h,
                         int q);
} tnt_onhost_engine_t;

typedef struct tnt_onhost_comm {
    /* The engine's services (above). */
    const tnt_onhost_engine_t *engine;
    /* On-host collectives of every algorithm (queue.c): numbered in
     * posting order, finished in that order; the unfinished ones, oldest
     * first. */
    uint64_t next;
    uint64_t completed;        /* number + 1 of the last one finished */
    struct tnt_request *head, *tail;
    uint64_t stage_next;       /* next round of the staging areas */
    int slot_notify;           /* some peer's slot_notify is set */
    /* A mapped allreduce has more of its slice to reduce (it does a
     * piece per pass, mapped_allreduce.c): poll again without sleeping. */
    int stage_more;
    unsigned char *map_acc;    /* the mapped allreduce's block, lazily */
} tnt_onhost_comm_t;

#endif /* TNT_CORE_ONHOST_ONHOST_STATE_H */
