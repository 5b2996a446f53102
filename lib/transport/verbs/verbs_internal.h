/*
 * Shared state of the verbs transport's glue files: verbs.c (device,
 * side-channel handshake, queue pair setup, lifecycle, async events) and
 * verbs_io.c (the data path: bounce buffers, credits, rendezvous, the
 * completion queue). The logic they use without touching a device lives
 * in verbs_credit, verbs_rcache, verbs_conn, verbs_wire and verbs_select.
 *
 * One endpoint (vb_ep_t, what the core holds) per peer: one RC queue pair
 * with its own completion queue (all queues share the context's
 * completion channel, whose fd the progress engine watches), a slab of
 * registered bounce buffers, and the TCP socket of the handshake, kept
 * open afterwards so that a peer process that exits is noticed at once.
 */
#ifndef TNT_TRANSPORT_VERBS_VERBS_INTERNAL_H
#define TNT_TRANSPORT_VERBS_VERBS_INTERNAL_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "tnt/transport.h"
#include "transport/verbs/verbs_conn.h"
#include "transport/verbs/verbs_credit.h"
#include "transport/verbs/verbs_rcache.h"
#include "transport/verbs/verbs_wire.h"

/* Bytes of one bounce buffer (TNT_IB_EAGER_BYTES, the same on every
 * rank: the hello carries it; its default is the parameter table's); a
 * message whose header and payload fit is sent eagerly (copied), larger
 * ones by rendezvous (RDMA WRITE). */
#define VB_BOUNCE_MIN 4096u
#define VB_BOUNCE_MAX (1024u * 1024u)
#define VB_CTRL_DEPTH 2u
/* Largest single RDMA WRITE; larger payloads are split into segments. */
#define VB_SEG_MAX ((size_t)1 << 30)
/* How long a close waits for the sends already posted to be acknowledged
 * (the failure notice the core sends just before it closes): the queue
 * pair's own retry budget (tnt__vb_close_drain_s), within these bounds. */
#define VB_CLOSE_DRAIN_MIN_S 0.25
#define VB_CLOSE_DRAIN_MAX_S 2.0
#define VB_MAX_TOKENS (VB_IMM_TOKEN_MAX + 1)

/* wr_id: kind in the top byte, an index below. */
#define VB_WR_RECV 1u
#define VB_WR_SEND 2u
#define VB_WR_WRITE 3u
#define VB_WR_ID(kind, idx) (((uint64_t)(kind) << 56) | (uint64_t)(idx))

enum vb_op_type { VB_OP_EAGER, VB_OP_RTS, VB_OP_WRITE, VB_OP_CTS };

/* A unit of outgoing work: a core send (eager, or rendezvous through RTS,
 * wait for CTS, then WRITE) or a CTS this side owes. */
typedef struct vb_op {
    struct vb_op *next;
    int type;
    const void *hdr;
    size_t hdr_len;
    const void *payload;
    size_t len;
    void *cookie;
    int notify;          /* on_send_done when finished */
    uint32_t token;      /* sender token (index in ep->stok) */
    uint32_t peer_token; /* CTS: the sender token it answers */
    vb_region_t *reg;
    uint64_t raddr;
    uint32_t rkey;
    uint32_t rtoken;     /* the receiver's token for the FIN immediate */
    size_t off;          /* WRITE: bytes posted so far */
    int wrs_out;         /* WRITE: work requests in flight */
} vb_op_t;

/* A large receive waiting for its payload. */
typedef struct vb_rslot {
    void *cookie;
    vb_region_t *reg;
    int used;
} vb_rslot_t;

/* Where the side channel of an endpoint is (verbs_wire.h has the
 * exchange). The connector starts at VB_S_CONNECTING, the acceptor at
 * VB_S_HELLO_IN (calloc's zero). */
enum vb_stage {
    VB_S_HELLO_IN = 0, /* acceptor: waiting for the connector's hello */
    VB_S_PROOF_IN,     /* acceptor: challenge sent, waiting for the proof */
    VB_S_READY_IN,     /* acceptor: reply sent, waiting for 'R' */
    VB_S_CONNECTING,   /* connector: TCP connect in progress */
    VB_S_CHALLENGE_IN, /* connector: hello sent */
    VB_S_REPLY_IN,     /* connector: proof sent */
    VB_S_UP            /* handshake done: the socket only says "closed" */
};

typedef struct vb_ctx vb_ctx_t;

typedef struct vb_ep {
    vb_ctx_t *ctx;
    vb_conn_t conn;
    int peer;            /* -1 until the handshake names it */
    int known;           /* the core asked for it or was given it */
    int announced;
    int ready_due;       /* acceptor announced before the 'R' came */
    int closed;
    int connector;       /* this side sent the hello */
    double born;         /* acceptor: accepted at (strangers expire) */
    int fd;              /* side-channel socket */
    uint32_t fd_events;
    /* The side channel (verbs_wire.h): one record in, one out at a
     * time, and what the MACs cover. */
    int stage;           /* enum vb_stage (above) */
    unsigned char in[VB_REC_LEN];
    size_t in_len;
    unsigned char out[VB_REC_LEN];
    size_t out_len, out_off;
    unsigned char hello_rec[VB_REC_LEN]; /* the connector's hello */
    uint8_t nonce_a[VB_NONCE_BYTES];
    vb_hello_t peer_hello; /* acceptor: the connector's, until the proof */
    uint32_t psn;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    unsigned char *slab; /* recv buffers, then send buffers */
    struct ibv_mr *slab_mr;
    uint32_t nrecv, nsend;
    uint32_t *free_send; /* stack of free send buffer indices */
    uint32_t nfree_send;
    size_t sq_depth, sq_used;
    vb_credit_t cr;
    vb_op_t *q_head, *q_tail; /* waiting for credits or queue room */
    vb_op_t **stok;      /* sender tokens: ops waiting for CTS / writing */
    uint32_t nstok;
    vb_rslot_t *rtok;    /* receiver tokens */
    uint32_t nrtok;
    char name[64];       /* remote address, for messages */
    struct vb_ep *next;  /* ctx->eps or the graveyard */
} vb_ep_t;

struct vb_ctx {
    tnt_transport_env_t env;
    struct ibv_context *ib;
    struct ibv_pd *pd;
    struct ibv_comp_channel *chan;
    char dev_name[64];
    int port;
    int gid_index;
    int link;            /* enum vb_link */
    union ibv_gid gid;
    uint16_t lid;
    enum ibv_mtu mtu;
    uint32_t depth;      /* TNT_IB_RECV_DEPTH */
    size_t bounce;       /* TNT_IB_EAGER_BYTES: one bounce buffer */
    int timeout;         /* TNT_IB_TIMEOUT: 4.096 us * 2^timeout */
    int retry;           /* TNT_IB_RETRY_CNT, else from the heartbeat */
    double heartbeat_s;  /* TNT_HEARTBEAT (default 10 s); 0: off */
    size_t seg_max;      /* one WRITE's bytes: VB_SEG_MAX or the port's
                          * max_msg_sz, whichever is less */
    int odp;             /* registrations use on-demand paging */
    vb_rcache_t rcache;
    int listen_fd;
    int timer_fd;        /* once a second: strangers expire */
    vb_ep_t *eps;        /* all live endpoints, incoming ones included */
    vb_ep_t *graveyard;
    vb_op_t *free_ops;
    int in_downcall;     /* failures are returned, not upcalled */
    /* The `stats` entry's counters (verbs.c): incoming connections
     * closed before they proved the job key (a wrong key, garbage,
     * silence past VB_HANDSHAKE_WAIT_S), and those closed to make room
     * for others (VB_STRANGERS_MAX); evicting is set meanwhile. */
    uint64_t strangers_refused, strangers_evicted;
    int evicting;
};

/* verbs.c */
void tnt__vb_fail(vb_ep_t *ep, int ev, const char *detail);
/** Handle every async event waiting now (port, queue pair, device). */
void tnt__vb_async_drain(vb_ctx_t *ctx);
void tnt__vb_free_graveyard(vb_ctx_t *ctx);
/** Acceptor: a message from the peer came over the queue pair before its
 *  'R' on the side channel; hand the endpoint to the core now. */
void tnt__vb_announce_early(vb_ep_t *ep);

/* verbs_io.c */
tnt_result_t tnt__vb_ep_setup_buffers(vb_ep_t *ep);
void tnt__vb_ep_release_ops(vb_ep_t *ep);
tnt_result_t tnt__vb_post_recv(vb_ep_t *ep, uint32_t slot);
void tnt__vb_comp_cb(void *arg, uint32_t events);
/** Poll ep's completion queue empty and move its queued work along
 *  (comp_cb does this per event; tests call it directly). */
void tnt__vb_poll_ep(vb_ep_t *ep);
/** Wait, at most limit_s, for ep's posted sends to complete (before a
 *  close would flush them); no upcalls. Returns how many are still out
 *  (0: all acknowledged). */
size_t tnt__vb_drain_sends(vb_ep_t *ep, double limit_s);
tnt_result_t tnt__vb_send(void *vctx, void *vep, const void *hdr,
                          size_t hdr_len, const void *payload, size_t len,
                          void *cookie);
tnt_result_t tnt__vb_reg_mem(void *vctx, void *ptr, size_t len,
                             void **handle);
void tnt__vb_dereg_mem(void *vctx, void *handle);

#endif /* TNT_TRANSPORT_VERBS_VERBS_INTERNAL_H */
