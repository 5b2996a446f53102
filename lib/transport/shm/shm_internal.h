/*
 * Shared state of the shared-memory transport's files: shm.c
 * (rendezvous, segments, lifecycle) and shm_io.c (the data path).
 *
 * A pair of ranks shares one segment (a memfd the lower rank creates and
 * passes over a unix socket) with one ring per direction, and one eventfd
 * per rank that the other side writes to wake it. The unix socket stays
 * open for the life of the pair: its hang-up is how a dead peer is seen.
 *
 * The handshake on the socket proves the job key both ways before any
 * descriptor is passed (see docs/security.md):
 *   connector -> acceptor  hello      {job, comm, ranks, ring size,
 *                                      probe address, nonce C}
 *   acceptor -> connector  challenge  {ranks, probe address, nonce A,
 *                                      MAC A}
 *   connector -> acceptor  proof      {MAC C} + memfd and two eventfds
 * MAC A = HMAC(key, "TNT-shm-accept" + hello + challenge before its MAC),
 * MAC C the same with "TNT-shm-connect". The acceptor maps nothing and
 * keeps no descriptor before MAC C checks out.
 */
#ifndef TNT_TRANSPORT_SHM_SHM_INTERNAL_H
#define TNT_TRANSPORT_SHM_SHM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tnt/transport.h"
#include "transport/shm/shm_ring.h"

#define SHM_MAGIC 0x53544e54u    /* "TNTS" */
#define SHM_VERSION 7u  /* 3: collective slots after the rings;
                            4: staging areas after the slots;
                            5: shared-allocation refs in their headers;
                            6: sides' fields on separate pages;
                            7: SHM_AREA_CONTEXTS sets of pair areas */
#define SHM_CHAL_MAGIC 0x43534e54u  /* "TNSC" */
#define SHM_PROOF_MAGIC 0x50534e54u /* "TNSP" */
#define SHM_NONCE_BYTES 16
/* Strangers (accepted, not yet proved the key) at most, and how long one
 * may take to prove it. */
#define SHM_PENDING_MAX 64
#define SHM_HANDSHAKE_WAIT_S 10.0
#define SHM_RING_BYTES ((size_t)1 << 20)
#define SHM_HDR_MAX 256
/* Payloads at least this large are pulled by the receiver with
 * process_vm_readv (one copy) when it could read the sender at connect;
 * the core may change it per context (TNT_TP_OPT_RNDV_MIN). */
#define SHM_CMA_MIN ((size_t)256 << 10)

enum shm_frame_type { SHM_EAGER = 1, SHM_RNDV = 2, SHM_ACK = 3 };

/* What precedes every message on a ring. */
typedef struct shm_frame {
    uint32_t type;
    uint32_t hdr_len;
    uint64_t payload_len;
    uint64_t addr;    /* RNDV: the payload in the sender's memory */
    uint64_t id;      /* RNDV and ACK: the sender's number for the send */
} shm_frame_t;

/* The segment: side 0 is the lower rank (it creates the segment), side 1
 * the higher; ring s carries side s's messages. The two sides' pair areas
 * for the core's on-host algorithms follow, SHM_AREA_CONTEXTS sets of
 * them one after another (one per context, below): in each, the slots
 * (TNT_TP_AREA_SLOTS), then the staging areas (TNT_TP_AREA_STAGES) from
 * the next page, each side of the size the core gives in
 * env->pair_area_bytes (ctx->area_bytes). Their layout is the core's
 * (lib/core/onhost/slot_layout.h, stage_layout.h); here they are
 * bytes. */
typedef struct shm_seg {
    uint32_t magic;
    uint32_t version;
    uint64_t ring_bytes;
    _Atomic uint32_t can_read[2]; /* side s may process_vm_readv the other */
    _Alignas(TNT_SHM_APART) unsigned char rings[];
} shm_seg_t;

/** Bytes of a pair's segment with rings of `cap` bytes: header, rings,
 *  slots, staging areas (area_bytes: a side of each pair area, by id,
 *  TNT_TP_AREA_END entries, as env->pair_area_bytes). */
size_t tnt__shm_seg_len(const size_t *area_bytes, size_t cap);

/* Sets of pair areas in every pair's segment (tnt_transport_t.
 * pair_area_contexts): the core gives each communicator that shares the
 * pair (a dup or split joining its parent's connections) a context of
 * its own, so that two communicators' on-host algorithms never meet in
 * one area. All sets are in the segment from its creation, so the peer
 * learns of none later: the segment is a memfd whose pages exist only
 * once touched, and a set that no communicator uses costs address
 * space (about 2 MiB a pair), not memory. A set's pages are populated as
 * its communicator uses them (tnt__shm_warm); before the core hands a
 * set to its next communicator, each side clears its own
 * (pair_area_clear), so every communicator's set starts zeroed. */
#define SHM_AREA_CONTEXTS 8u

typedef struct shm_hello {
    uint32_t magic;
    uint32_t version;
    uint64_t job_id;
    uint32_t comm_id;
    int32_t from;
    int32_t to;
    uint32_t ring_bytes;
    uint64_t probe_addr;   /* a word the other side reads to test CMA */
    unsigned char nonce[SHM_NONCE_BYTES];
} shm_hello_t;

typedef struct shm_challenge {
    uint32_t magic;
    uint32_t version;
    int32_t from;
    int32_t to;
    uint64_t probe_addr;
    unsigned char nonce[SHM_NONCE_BYTES];
    unsigned char mac[TNT_AUTH_MAC_BYTES]; /* last: the MACs cover the rest */
} shm_challenge_t;

typedef struct shm_proof {
    uint32_t magic;
    uint32_t version;
    unsigned char mac[TNT_AUTH_MAC_BYTES];
} shm_proof_t;

/* The address blob: where the socket is (and whose process holds it). */
typedef struct shm_addr {
    uint32_t magic;
    int32_t pid;
    uint32_t instance;
} shm_addr_t;

/* A send in progress (or an acknowledgement waiting for ring space). */
typedef struct shm_sreq {
    struct shm_sreq *next;
    shm_frame_t frame;
    const void *hdr;
    const void *payload;  /* NULL for RNDV: the peer pulls it */
    size_t done;          /* bytes of frame, header and payload written */
    size_t total;
    void *cookie;
    int internal;         /* an ACK or a closed pair's tail: no upcall */
    void *owned;          /* a tail's copy of header and payload, freed
                             with the request (shm_tail.c) */
} shm_sreq_t;

typedef struct shm_ctx shm_ctx_t;

typedef struct shm_ep {
    shm_ctx_t *ctx;
    int peer;
    int side;             /* 0: lower rank of the pair */
    int sock;             /* unix socket to the peer */
    int efd_in;           /* the peer writes it to wake this rank */
    int efd_out;          /* this rank writes it to wake the peer */
    pid_t pid;            /* the peer, from SO_PEERCRED */
    uid_t uid;
    double born;          /* accepted at (strangers expire) */
    int memfd;            /* connector: the segment until the proof */
    int challenged;       /* acceptor: the challenge is out */
    int pending;          /* acceptor: counted in ctx->npending */
    int member;           /* acceptor: the pid is a rank's (SO_PEERCRED) */
    shm_hello_t hello;    /* the connector's hello (both sides) */
    shm_challenge_t chal; /* the acceptor's challenge (both sides) */
    shm_seg_t *seg;
    size_t seg_len;
    size_t cap;
    shm_ring_t *tx, *rx;
    int sock_watched, efd_watched;
    unsigned warm;        /* bit c: context c's slots are populated */
    size_t tx_warm, rx_warm; /* bytes of each ring populated, from 0 */
    int announced;        /* on_connected was called */
    int closed;
    double tail_until;    /* closed, finishing its last frame until then */
    int hello_done;       /* the challenge has been answered (side 0) */
    /* Sending. */
    shm_sreq_t *sq_head, *sq_tail;
    shm_sreq_t *rndv;     /* waiting for the peer's ACK */
    uint64_t next_id;
    /* Receiving. */
    int in_payload;
    shm_frame_t rframe;
    unsigned char rhdr[SHM_HDR_MAX];
    unsigned char *dest;
    size_t left;
    void *rcookie;
    /* A rendezvous pull that failed: reported once what followed it in
     * the ring has been read (shm_io.c's message_in), "" if none. */
    char pull_failed[160];
    struct shm_ep *next;  /* ctx's list, or graveyard */
} shm_ep_t;

struct shm_ctx {
    tnt_transport_env_t env;
    /* A side of each pair area (env->pair_area_bytes, checked). */
    size_t area_bytes[TNT_TP_AREA_END];
    int listen_fd;
    unsigned instance;    /* names this context's socket */
    int any_uid;          /* TNT_SHM_ANY_UID: peers of other users too */
    size_t cma_min;       /* payloads from this size by rendezvous */
    int npending;         /* accepted endpoints before their proof */
    shm_ep_t *eps;
    shm_ep_t *graveyard;
    shm_ep_t *tails;      /* closed pairs finishing their last frame */
    shm_sreq_t *free_sreqs;
    struct shm_watch *watches; /* by rank (shm_death.c), made when needed */
    /* Counters for the core (shm_stats): unproven connections closed,
     * refused or (evicting set while one is closed) evicted. */
    uint64_t strangers_refused, strangers_evicted;
    int evicting;
};

/* shm_wire.c: pure checks of what arrives on the socket. */
typedef struct shm_expect {
    uint64_t job_id;
    uint32_t comm_id;
    int rank, nranks;
} shm_expect_t;
const char *tnt__shm_hello_parse(const void *buf, size_t len,
                                 const shm_expect_t *e, shm_hello_t *out);
const char *tnt__shm_challenge_parse(const void *buf, size_t len,
                                     const shm_expect_t *e, int peer,
                                     shm_challenge_t *out);
const char *tnt__shm_proof_parse(const void *buf, size_t len,
                                 shm_proof_t *out);
/* Input of MAC A (connector = 0) or MAC C (connector = 1); out holds
 * SHM_AUTH_INPUT_MAX bytes. */
#define SHM_AUTH_INPUT_MAX                                                  \
    (16 + sizeof(shm_hello_t) + offsetof(shm_challenge_t, mac))
size_t tnt__shm_auth_input(int connector, const shm_hello_t *h,
                           const shm_challenge_t *c, unsigned char *out);
/* The descriptors of a proof: a sealed memfd of seg_bytes, two eventfds. */
const char *tnt__shm_fds_check(const int *fds, int nfds, size_t seg_bytes);

/* shm.c */
/* Parts of a pair's segment that each side populates (page tables, and
 * the pages themselves for the side that touches them first) as it comes
 * to use them, not at creation: a job of p ranks on one host makes
 * p(p-1)/2 segments of 4 MiB at start-up, and populating them all was
 * almost all of its creation time (docs/scale.md, "Start-up"). A ring is
 * populated SHM_WARM_STEP bytes ahead of where it is written or read
 * (tnt__shm_warm_ring); a context's slots at the core's first look
 * (tnt__shm_warm). The staging areas (2 MiB a pair) are never populated
 * as a whole: every rank reads every peer's staging headers while a
 * collective of messages is in flight (the stray check,
 * lib/core/onhost/queue.c), and populating all of them there made the
 * first barrier at p = 64 zero 4 GB. Their pages fault in as a staged
 * collective touches them. */
#define SHM_WARM_STEP ((size_t)64 << 10)
/* Populate ring `tx` (1) or the received one (0) up to ring position
 * `end` (positions from the start; the whole ring once it is reached). */
void tnt__shm_warm_ring(shm_ep_t *ep, int tx, uint64_t end);
/* Populate both sides' slots of context c (< SHM_AREA_CONTEXTS), once. */
void tnt__shm_warm(shm_ep_t *ep, unsigned c);
void tnt__shm_fail(shm_ep_t *ep, const char *what);
void tnt__shm_free_graveyard(shm_ctx_t *ctx);
/* The rest of a close (ep->closed is set): descriptors, queued sends,
 * off the list, to the graveyard. */
void tnt__shm_ep_release(shm_ctx_t *ctx, shm_ep_t *ep);

/* shm_tail.c: finishing a closed pair's last frame (the core's close of
 * a failed communicator): 1 if ep now finishes in the background (it is
 * off ctx->eps; it releases itself), 0 if the caller releases it now. */
int tnt__shm_tail_keep(shm_ep_t *ep);
/* finalize: finish every tail, blocking, until `end` at the latest. */
void tnt__shm_tail_finish(shm_ctx_t *ctx, double end);
/* How long finalize waits for them. */
#define SHM_TAIL_S 1.0
extern volatile uint64_t tnt__shm_probe_word;

/* shm_death.c: an unproven connection from process `pid` closed; if that
 * is a rank's registered process, fail the rank once the process has
 * exited. From fd callbacks only (it may make upcalls). */
void tnt__shm_suspect(shm_ctx_t *ctx, pid_t pid);
/* Which rank registered process `pid` for this transport; -1: none. */
int tnt__shm_rank_of_pid(shm_ctx_t *ctx, pid_t pid);
void tnt__shm_watch_finalize(shm_ctx_t *ctx);

/* shm_io.c */
void tnt__shm_ep_cb(void *arg, uint32_t events);
void tnt__shm_progress(shm_ep_t *ep);
void tnt__shm_drop_sends(shm_ep_t *ep);
/* A closed pair's queue cut to what keeps the peer's ring in frame: the
 * message partly written and the notices (sends without a cookie), as
 * copies, without upcalls; the rest dropped. 1 if anything is kept. */
int tnt__shm_tail_sends(shm_ep_t *ep);
/* A tail's step: drop what the peer wrote, write what fits of the kept
 * sends. 1 when all of them are in the ring. */
int tnt__shm_tail_step(shm_ep_t *ep);
tnt_result_t tnt__shm_send(void *vctx, void *vep, const void *hdr,
                           size_t hdr_len, const void *payload, size_t len,
                           void *cookie);
/* The poll entry (tnt_transport_t.poll), for a thread that polls instead
 * of sleeping: one look at every connected peer's ring, taking what
 * arrived and sending what waits. flags 0: while it spins, peers are
 * asked not to write the eventfd (no system call on either side);
 * TNT_POLL_ARM (before the caller sleeps in epoll again, mandatory after
 * unarmed calls): ask for the eventfd again and take what came
 * meanwhile. Returns 1 if a message arrived. */
int tnt__shm_poll(void *vctx, unsigned flags);
/* The pair_notify entry: after publishing in a pair area, wake the peer
 * if it sleeps (it armed its eventfd, shm_ring.c's protocol) -- one
 * fence, and a system call only when the peer sleeps. The publisher may
 * wait with it until it would sleep itself, finishes the operation or
 * returns to its caller: by then the fence no longer waits for the
 * stores to leave. */
void tnt__shm_slot_notify(void *ctx, void *ep);
/* The option entry: TNT_TP_OPT_RNDV_MIN sets cma_min. */
tnt_result_t tnt__shm_set_option(void *vctx, int option, const void *value,
                                 size_t len);

#endif /* TNT_TRANSPORT_SHM_SHM_INTERNAL_H */
