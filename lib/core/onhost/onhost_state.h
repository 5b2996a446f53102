/*
 * Per-request state of the on-host algorithms (core/onhost/onhost.h):
 * tnt_onhost_req_t in struct tnt_request (req->onhost) and
 * tnt_onhost_peer_t in each of its per-peer operation states
 * (req->ops[q].onhost, one per rank: on-host requests have no schedule).
 * Each algorithm's part is the union member named for it; requests and
 * their operation states start zeroed.
 */
#ifndef TNT_CORE_ONHOST_ONHOST_STATE_H
#define TNT_CORE_ONHOST_ONHOST_STATE_H

#include <stdint.h>

#include "core/mem.h"

struct tnt_request;
struct tnt_unexp;

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
    /* The on-host queue (queue.c): the next request, and whether req is
     * on it. */
    struct tnt_request *next;
    int queued;
    /* A slots allreduce numbered and begun by tnt__slot_lean. */
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
} tnt_onhost_req_t;

#endif /* TNT_CORE_ONHOST_ONHOST_STATE_H */
