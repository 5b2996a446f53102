/*
 * The recovery mesh: what the survivors of a communicator talk over
 * while they shrink it (comm_shrink.c), when its own connections are
 * closed (a failed communicator closes them, design.md "Failure
 * policy"; over TCP and verbs it forgets those to the living, which the
 * new communicator keeps, but the agreement must not depend on which
 * ones the failure left up). Every rank of a communicator of more than
 * one rank opens a TCP listener for it at creation, and its address
 * travels in the rank's boot entry, after the transports' addresses;
 * nothing connects to it unless tnt_comm_shrink is called (a shrink's
 * communicator that keeps the connections takes the old one's listener
 * instead: tnt__rec_hand_over). Messages are of one fixed size, each
 * with an HMAC by the job key over its bytes, and say who sends them;
 * the mesh reads whatever arrives into a queue per sender, and a
 * sender's queue is read before its end (a closed connection, a refused
 * one, a failed send) counts as that rank's death.
 */
#ifndef TNT_CORE_RECOVERY_H
#define TNT_CORE_RECOVERY_H

#include <stdint.h>

#include "boot/bootstrap.h"
#include "core/engine.h"

/* Communicators up to this many ranks can be shrunk (the dead set
 * travels as a bitmap in every message). */
#define TNT_REC_MAX_RANKS 4096
#define TNT_REC_WORDS (TNT_REC_MAX_RANKS / 64)

enum tnt_rec_type {
    TNT_REC_ROUND = 1,         /* a round of the agreement: bits = dead */
    TNT_REC_DECIDED = 2,       /* the agreed dead set: bits */
    TNT_REC_ENTRY = 3,         /* the new communicator's boot entry */
    TNT_REC_READY = 4,         /* the new communicator is made here */
    TNT_REC_JOIN = 5           /* round: 1 if this member may keep its
                                  connections to the other members
                                  (comm_shrink.c, may_join) */
};

#define REC_MAGIC 0x52434f56u /* "RCOV": a recovery message */

typedef struct tnt_rec_msg {
    uint32_t magic;
    uint32_t comm_id;          /* of the communicator being shrunk */
    uint64_t job_id;
    int32_t from, to;          /* ranks of that communicator */
    uint32_t type;             /* enum tnt_rec_type */
    uint32_t round;
    uint64_t bits[TNT_REC_WORDS];
    tnt_boot_entry_t entry;
    unsigned char mac[32];     /* HMAC-SHA256 by the job key, of the rest */
} tnt_rec_msg_t;

/* A communicator's part (comm->rec): its listener and every peer's
 * address. */
struct tnt_recovery {
    int fd;                    /* the listener; -1: none */
    unsigned char (*addr)[20]; /* peers' listener addresses (blob) */
    uint8_t *addr_len;         /* 0: unknown */
    /* After tnt_comm_shrink: the dead set the survivors agreed on. */
    uint64_t *agreed;          /* NULL until then */
    /* The gate (recovery_gate.c): connections accepted by the progress
     * loop outside a shrink, their first message being checked. */
    struct tnt_rec_pend **pend;
    size_t npend, pendcap;
    int timerfd;               /* expires silent ones; -1: none */
    int gated;                 /* the listener is watched */
};

/* A connection the gate accepted: its first message so far. */
typedef struct tnt_rec_pend {
    struct tnt_comm *comm;
    int fd;
    int sound;                 /* its first message passed the MAC */
    size_t have;
    double since;
    tnt_rec_msg_t buf;
} tnt_rec_pend_t;

/** Watch the listener in the progress loop: strangers are dropped with
 *  a WARNING (a bad MAC, or nothing said in TNT_REC_SILENT_S), sound
 *  connections kept for the next shrink. */
#define TNT_REC_SILENT_S 10.0
void tnt__rec_gate_open(struct tnt_comm *comm);
/** Stop watching; the connections kept stay in comm->rec->pend for the
 *  mesh (which takes them). Lock held. */
void tnt__rec_gate_close(struct tnt_comm *comm);

/** Open this rank's listener on `ip` and append its address to a boot
 *  entry's address blob of *len bytes used (cap in all): one length
 *  byte, the address. */
tnt_result_t tnt__rec_listen(struct tnt_comm *comm, const char *ip,
                             unsigned char *blob, size_t *len, size_t cap);
/** Take peer `rank`'s listener address from its boot entry's blob (after
 *  the transports' addresses); none there leaves it unknown. */
void tnt__rec_note_peer(struct tnt_comm *comm, int rank,
                        const unsigned char *blob, size_t len);
/** Give `from`'s listener (and its gate's timer) to `to`, a
 *  communicator of from's ranks old_of[0..to->nranks-1] that joined
 *  from's net group (a shrink's: comm_shrink.c), with those ranks'
 *  addresses; the survivors' listeners are the same sockets, so no
 *  address travels. `from` has none after (a failed communicator is
 *  shrunk once). Both gates closed; lock held. 0, or -1 when out of
 *  memory (nothing moved). */
int tnt__rec_hand_over(struct tnt_comm *from, struct tnt_comm *to,
                       const int *old_of);
/** Close the listener, forget the addresses (communicator teardown). */
void tnt__rec_close(struct tnt_comm *comm);

/** 1 if msg is a message of comm's shrink to this rank, its MAC good
 *  (recovery_gate.c). */
int tnt__rec_sound(const struct tnt_comm *comm, const tnt_rec_msg_t *msg);

/* The mesh of one shrink. */
typedef struct tnt_rec_mesh tnt_rec_mesh_t;

tnt_result_t tnt__rec_mesh_open(struct tnt_comm *comm, double deadline,
                                tnt_rec_mesh_t **out);
void tnt__rec_mesh_close(tnt_rec_mesh_t *m);
/** Send m to rank `to` (filled in: magic, ids, from, to, MAC). 0, or -1
 *  when that rank is gone (refused, closed) or the deadline passed. */
int tnt__rec_send(tnt_rec_mesh_t *m, int to, tnt_rec_msg_t *msg);
/** The next message from `from` whose type is in the mask (1 << type);
 *  others are dropped. TNT_SUCCESS; TNT_ERR_PEER_LOST when that rank is
 *  gone with nothing more queued; TNT_ERR_TIMEOUT at the deadline. */
tnt_result_t tnt__rec_next(tnt_rec_mesh_t *m, int from, unsigned mask,
                           tnt_rec_msg_t *msg);

#endif /* TNT_CORE_RECOVERY_H */
