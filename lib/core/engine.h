/*
 * The communicator and its progress engine. A communicator owns one
 * transport context, a table of peers, the collectives in flight; its
 * net group (struct tnt_net_group) one progress thread that blocks in
 * epoll. All state is guarded by the group's lock, comm->group->lock;
 * transports are called with it held.
 *
 * Collectives are executed from their schedules: an operation becomes
 * ready when its dependencies have completed; sends go to the transport,
 * receives are matched by (sequence number, step) against messages from
 * that peer. Small reductions and copies run inline; large ones are queued
 * and run by the poller with the lock released (engine_compute.c), so
 * that a thread posting or testing does not wait behind them.
 */
#ifndef TNT_CORE_ENGINE_H
#define TNT_CORE_ENGINE_H

#include <pthread.h>
#include <stdint.h>

#include "collectives/algorithms.h"
#include "collectives/reduce.h"
#include "collectives/schedule.h"
#include "util/auth.h"
#include "util/clock.h"
#include "util/hostid.h"
#include "util/list.h"
#include "util/bufpool.h"
#include "core/mem.h"
#include "core/onhost/onhost_state.h"
#include "core/sched_cache.h"
#include "core/stats.h"
#include "core/wait_budget.h"
#include "util/param.h"
#include "tnt/transport.h"

#define TNT_MSG_MAGIC 0x4d544e54u /* "TNTM" */
/* The reduction of the allgathers with which tnt_comm_split and
 * tnt_comm_dup exchange what they need (comm_split.c): tnt_allgather
 * never posts it, so a split against a user's allgather is a mismatch. */
#define TNT_OP_DERIVE TNT_MAX
/* Transports one communicator may use at once: the positions of the
 * transport list (tcp, shm, verbs, a plugin). */
#define TNT_TP_MAX 4
_Static_assert(TNT_TP_MAX == TNT_STATS_TP_MAX, "core/stats.h");

/* The core's message header. Every message carries the collective's
 * signature, so a receiver can tell a mismatched call from the first
 * message it sees. Native byte order: ranks of one job share one ABI. */
typedef struct tnt_msg_hdr {
    uint32_t magic;
    uint32_t comm_id;
    uint64_t seq;
    uint32_t step;
    uint8_t kind, dtype, op, algo;
    uint64_t count;
    int32_t root;
    int32_t nranks;
} tnt_msg_hdr_t;

enum tnt_cookie_type {
    TNT_COOKIE_OP = 1, TNT_COOKIE_UNEXP = 2, TNT_COOKIE_NOTICE = 3,
    TNT_COOKIE_PROGRESS = 4,
    TNT_COOKIE_CTL = 5, /* a flow-control message (engine_flow.c) */
    /* A shared group's (core/demux.c): the payload of a message for a
     * communicator freed, failed or unknown here, read and dropped; a
     * failure notice's copy that the group keeps until it is freed. */
    TNT_COOKIE_DROP = 6, TNT_COOKIE_NOTICE_TX = 7
};

struct tnt_comm;
/* What every cookie the core hands a transport starts with: its type and
 * the communicator it belongs to. The rule: on_payload and on_send_done
 * find their communicator in the cookie, never in the transport's `core`
 * pointer, so that one transport context may serve several communicators
 * (docs/design.md, "Sharing connections between communicators"). Set
 * where the cookie is made, together with its type. */
typedef struct tnt_cookie {
    int type;                  /* enum tnt_cookie_type */
    struct tnt_comm *comm;
} tnt_cookie_t;

/** The communicator of a cookie (tnt_cookie_t first in every one). */
static inline struct tnt_comm *tnt__cookie_comm(const void *cookie)
{
    return ((const tnt_cookie_t *)cookie)->comm;
}

/* Flow control (engine_flow.c). A collective's message above the eager
 * limit, or one that would overrun the peer's eager window, leaves only
 * once the receiver has said its receive is posted: the sender sends an
 * RTS (the message's header alone, step | TNT_STEP_RTS) unless a CTS
 * (the receiver's signature, step | TNT_STEP_CTS) is already here; a
 * receiver sends the CTS when it posts a receive above the eager limit, or
 * one whose RTS has come. Both carry no payload. A CTS's count is not
 * the collective's but the number of consecutive steps it clears, from
 * its step on (TNT_FLOW_BATCH: the receives of a run posted at once; its
 * signature check leaves the count out). A CREDIT (kind TNT_MSG_CREDIT,
 * count = bytes of eager messages consumed so far from that peer) reopens
 * the sender's window. */
#define TNT_STEP_RTS 0x80000000u
#define TNT_STEP_CTS 0x40000000u
#define TNT_STEP_CTL (TNT_STEP_RTS | TNT_STEP_CTS)
#define TNT_MSG_CREDIT 0x7e

/* A failure notice: the header's kind is TNT_MSG_NOTICE, its count the
 * result code, the payload the failing rank's message. A rank that fails
 * sends it to its peers before closing, so they fail with the cause (the
 * rank that died, both signatures of a mismatch) rather than with "rank X
 * closed its connection". */
#define TNT_MSG_NOTICE 0x7f
#define TNT_NOTICE_MAX 511

typedef struct tnt_notice_rx {
    tnt_cookie_t ck;           /* TNT_COOKIE_NOTICE */
    size_t len;
    int64_t rc;
    uint64_t seq;              /* a progress note's fields (below) */
    uint32_t step;
    int32_t waits;
    int sending;
    char text[TNT_NOTICE_MAX + 1];
} tnt_notice_rx_t;

/* A progress note: a notice with result 0 and no text, sent when a
 * collective reaches its deadline, and answered once by every rank that
 * gets one. seq is the collective the sender is in (or, with step
 * TNT_PROGRESS_IDLE, the next one it has not called yet), step and root
 * the step and the rank it waits for (-1: none), op TNT_PROGRESS_SENDING
 * when it waits for a send to that rank which the transport holds (the
 * connection takes no more: that rank is not reading), else 0 (it waits
 * to receive from it). With the answers, the rank that times out follows
 * the chain of waits to the rank actually behind (report.c) instead of
 * blaming its own neighbour, or a rank blocked in its send. */
#define TNT_PROGRESS_IDLE UINT32_MAX
#define TNT_PROGRESS_SENDING 1
typedef struct tnt_progress_tx {
    tnt_cookie_t ck;           /* TNT_COOKIE_PROGRESS */
    int peer;
    int busy;                  /* the transport still holds hdr */
    tnt_msg_hdr_t hdr;
} tnt_progress_tx_t;

/* What a peer last said of its progress, and when. */
typedef struct tnt_progress_rx {
    double at;                 /* 0: never */
    uint64_t seq;
    uint32_t step;
    int32_t waits;
    int sending;               /* blocked sending to waits */
} tnt_progress_rx_t;

struct tnt_request;
struct tnt_unexp;

/* Per-operation state of a collective in flight. */
typedef struct tnt_opstate {
    tnt_cookie_t ck;           /* TNT_COOKIE_OP: first, see cookies */
    struct tnt_opstate *next;  /* peer's posted-recv or pending-send list */
    struct tnt_request *coll;
    uint32_t op;
    uint32_t deps_left;
    int done;
    tnt_msg_hdr_t hdr;         /* sends: lives until the send completes */
    struct tnt_unexp *src;     /* a receive queued to copy this early
                                  message without the lock; else NULL */
    /* Flow control (engine_flow.c). Receives: a CTS went to the peer, or
     * is owed once the connection is up. Sends: parked for the CTS. */
    uint8_t cts_sent, cts_due, parked;
    /* For the hang report (report.c). Sends: the transport holds it (its
     * send returned TNT_INPROGRESS) since tp_at, until on_send_done.
     * Receives: the message's header is here, its payload arriving. */
    uint8_t in_tp, arriving;
    double tp_at;
    /* An on-host algorithm's (core/onhost/), ops[q] for peer q. */
    tnt_onhost_peer_t onhost;
} tnt_opstate_t;

/* A message that arrived before its receive was posted. */
typedef struct tnt_unexp {
    tnt_cookie_t ck;           /* TNT_COOKIE_UNEXP */
    struct tnt_unexp *next;
    tnt_msg_hdr_t hdr;
    size_t len;
    int complete;              /* payload fully arrived */
    tnt_opstate_t *claimed;    /* receive waiting for the payload */
    unsigned char *data;       /* from the communicator's buffer pool */
    size_t cap;
    uint64_t cts_left;         /* a CTS record: sends it has yet to clear */
} tnt_unexp_t;

/* What an early message counts against TNT_MAX_UNEXPECTED_BYTES: its
 * payload and its descriptor, so that a peer cannot pile up endless empty
 * early messages either. */
#define TNT_UNEXP_COST(payload_len) ((payload_len) + sizeof(tnt_unexp_t))

/* Early-message descriptors come in slabs, kept until the communicator
 * is freed. */
#define TNT_UNEXP_SLAB 64
typedef struct tnt_unexp_slab {
    struct tnt_unexp_slab *next;
    tnt_unexp_t u[TNT_UNEXP_SLAB];
} tnt_unexp_slab_t;

typedef struct tnt_peer {
    int rank;
    unsigned char addr[TNT_TRANSPORT_ADDR_MAX];
    size_t addr_len;
    char host[TNT_HOST_MAX];
    const tnt_transport_t *tp; /* this peer's transport (comm_tp.c) */
    void *tp_ctx;
    int tpi;                   /* its index in comm->net.tp */
    void *ep;                  /* transport endpoint once connected */
    int connecting;
    int ever_connected;
    int sends_inflight;        /* sends the transport has not finished:
                                  a close cuts them, and a notice behind
                                  them, unless the transport finishes
                                  them (TNT_TP_CLOSE_FINISHES) */
    tnt_result_t dead;         /* 0 while alive */
    int rx_arriving;           /* a shared connection's messages whose
                                  header was taken here and whose payload
                                  is still arriving (core/demux.c): the
                                  communicator is not freed under them */
    tnt_opstate_t *pending_head, *pending_tail; /* sends before connect */
    tnt_opstate_t *posted;     /* posted receives */
    tnt_unexp_t *unexp_head, *unexp_tail;
    tnt_notice_rx_t notice;    /* a failure notice arriving from it */
    tnt_progress_tx_t progress_tx; /* this rank's progress note to it */
    tnt_progress_rx_t progress;    /* its last progress note */
    /* Flow control (engine_flow.c): sends parked until their CTS; CTSs
     * that came before their send started; eager bytes sent to it and
     * the most it said it consumed; eager bytes consumed here from it
     * and the most reported back. */
    tnt_opstate_t *parked_head;
    tnt_unexp_t *cts_head;
    uint64_t tx_eager, tx_acked, rx_consumed, rx_reported;
    uint64_t rts_seq1;         /* 1 + seq of the last collective whose
                                  RTS went to it (TNT_FLOW_BATCH) */
    tnt_onhost_pair_t onhost;  /* the on-host algorithms' (core/onhost/) */
} tnt_peer_t;

/* A collective in flight; the request handle users hold. */
struct tnt_request {
    struct tnt_comm *comm;     /* NULL once the communicator is freed */
    tnt_list_node_t active_link; /* comm's active list; its free list
                                    once finished and kept for reuse */
    tnt_list_node_t all_link;  /* comm's list of unreleased requests */
    struct tnt_request *reap_next;   /* detached and finished: to free */
    uint64_t seq;
    tnt_coll_args_t args;
    int algo;
    tnt_sched_t *sched;        /* shared through comm->sched_cache */
    unsigned char *bufs[TNT_BUF_COUNT];
    void *scratch;             /* from the communicator's buffer pool */
    size_t scratch_cap;
    tnt_opstate_t *ops;
    uint32_t *ready;           /* stack of ready operations */
    uint32_t ops_cap;          /* capacity of ops and ready (reused) */
    uint32_t nready;
    uint32_t ops_left;
    tnt_reduce_fn_t reduce;
    tnt_msg_hdr_t sig;
    tnt_result_t result;       /* TNT_INPROGRESS until done */
    /* Its deadline (tnt__report_check_deadlines, report.c). */
    struct tnt_req_timeout {
        double deadline;
        int probed;            /* its deadline passed once: progress was
                                  asked for, the deadline is the grace */
    } timeout;
    int active;                /* on the comm's active list */
    int deferred;              /* on the comm's deferred list, or being
                                  prepared: not started yet */
    tnt_list_node_t defer_link; /* comm's deferred list */
    /* A receive from any source whose sender is not known yet: on the
     * comm's any list, nothing posted (core/p2p.h). */
    tnt_list_node_t any_link;
    /* Run by the poller before a deferred request starts, comm->group->lock
     * released (tnt__engine_post_prepared); NULL once run. */
    void (*prepare)(void *arg);
    void *prepare_arg;
    int detached;              /* user freed it before completion */
    /* Large reductions and copies run with comm->group->lock released
     * (engine_compute.c). While one runs (busy > 0) the request is not
     * finished: a failure meanwhile only takes it off the active list and
     * records late_rc; the result is set, and a detached request freed,
     * when the last computation returns. Its buffers stay the caller's
     * until then. Guarded by comm->group->lock like the rest. */
    struct tnt_req_compute {
        tnt_opstate_t *heavy;  /* ready large operations (linked by next) */
        tnt_list_node_t heavy_link; /* comm's list of such requests */
        int heavy_queued;      /* on that list */
        uint32_t busy;         /* computations running without the lock */
        int finish_late;       /* finished while busy: late_rc is it */
        tnt_result_t late_rc;
    } compute;
    tnt_onhost_req_t onhost;   /* an on-host algorithm's (core/onhost/) */
    /* The timeline's times (core/timeline.h): written only while
     * comm->timeline is set. start stays 0 unless the request was
     * deferred (then it starts after post, in tnt__engine_run_deferred). */
    struct tnt_req_tl {
        double post, start;
        uint32_t tid;          /* the posting thread's lane */
    } tl;
};

typedef struct tnt_watch {
    int fd;
    tnt_fd_cb_t cb;
    void *arg;
    int dead;
    struct tnt_watch *next;    /* graveyard */
} tnt_watch_t;

enum tnt_comm_state { TNT_COMM_OK = 0, TNT_COMM_FAILED, TNT_COMM_ABORTED };

/* The parts of a communicator, one concern each. Unless a field says
 * otherwise, comm->group->lock guards it. */

/* The transports this communicator uses and what the poller spins on.
 * tp, tp_ctx and tp_env are set while the communicator is created, before
 * the progress thread starts, and only read afterwards; tp_serves and the
 * spin table are set by tnt__comm_tp_assign (comm_tp.c). */
struct tnt_comm_net {
    char bind_ip[64];          /* where the transports listen */
    /* Transports by position in the transport list; NULL where unused. */
    const tnt_transport_t *tp[TNT_TP_MAX];
    void *tp_ctx[TNT_TP_MAX];
    tnt_transport_env_t tp_env[TNT_TP_MAX];
    int tp_serves[TNT_TP_MAX]; /* some peer got this transport */
    /* The position of the transport whose pair areas the on-host
     * algorithms use (comm_tp.c, tnt__comm_tp_init): the first started
     * that offers every area at the sizes the core needs; -1: none. */
    int area_tpi;
    /* What a spinning waiter polls (progress.c): the transports with a
     * poll entry that serve some peer, those whose look costs no system
     * call first (the first nspin_cheap: polled even where ranks share
     * CPUs). Built by tnt__comm_tp_assign. */
    struct tnt_spin_tp {
        int (*poll)(void *ctx, unsigned flags);
        void *ctx;
        uint32_t caps;
    } spin_tp[TNT_TP_MAX];
    int nspin_tp, nspin_cheap;
    /* Every transport that serves a peer has a poll entry: a spin needs
     * epoll only for the fds no transport polls (the wake and signal
     * fds, the listening socket), so it may look there less often. */
    int spin_polls_all;
    /* Why a transport serves no peer, for the INFO line
     * (comm_tp_log.c): off[i] why position i was not started here,
     * refused[i] the first reason it gave for not reaching a peer. Set
     * by tnt__comm_tp_init and tnt__comm_tp_assign. */
    char off[TNT_TP_MAX][80];
    char refused[TNT_TP_MAX][80];
};

/* The progress thread, the poller role and the threads waiting
 * (progress.c). The condition variables go with comm->group->lock. */
struct tnt_comm_progress {
    pthread_cond_t cond;       /* broadcast on every completion and
                                  whenever the poller role is free */
    pthread_cond_t park;       /* the progress thread sleeps here while
                                  the application drives progress */
    pthread_t thread;
    int thread_started;
    int stop;
    /* Only one thread at a time waits in epoll and dispatches (the
     * poller): a batch of events must never hold a watch that another
     * thread's dispatch has already freed. A thread blocked in a wait
     * takes the role itself, so a small blocking collective completes on
     * the caller's thread with no hand-off; the progress thread parks
     * meanwhile and serves nonblocking work. */
    int polling;               /* someone is the poller */
    int tp_unarmed;            /* a spin left transports unarmed
                                  (TNT_TP_POLL_UNARMS): the next poll
                                  must look at them or arm them
                                  (progress.c) */
    int thread_polling;        /* ... and it is the progress thread */
    int thread_parked;
    int user_waiters;          /* threads inside tnt__engine_wait */
    double user_polled_at;     /* when a waiting thread last polled */
    double last_activity;      /* when a collective last began or ended:
                                  an idle poller sleeps longer after a
                                  while */
    tnt_wait_history_t waits;  /* how long blocking calls took, by kind
                                  and size: their spin (wait_budget.h) */
    const struct tnt_progress_hooks *hooks; /* progress.h: what the
                                  layers above run in the loop */
    int epfd, wakefd;
    tnt_watch_t wake_watch;
    tnt_watch_t signal_watch;  /* hooks->signal_fd's, if any */
    tnt_watch_t **watches;     /* by fd */
    int watches_cap;
    tnt_watch_t *graveyard;    /* removed during a batch: freed after it */
};

/* A connection of a shared net group, by the net owner's rank (the
 * transports' numbering): up (ep), being made, or lost. The rule: once
 * a derived communicator has joined the group (shared), this is the
 * truth of the connection and each communicator's tnt_peer_t ep,
 * connecting and dead follow it (core/demux.c fans the transports'
 * connection events out to every communicator that has the peer). */
struct tnt_net_peer {
    void *ep;
    int connecting;
    tnt_result_t dead;
};

/* A failure notice sent on a shared connection: the transport may hold
 * it past its communicator's free, so the group keeps the bytes. */
struct tnt_notice_copy {
    tnt_cookie_t ck;           /* TNT_COOKIE_NOTICE_TX */
    struct tnt_notice_copy *next;
    tnt_msg_hdr_t hdr;
    char text[TNT_NOTICE_MAX + 1];
};

/* A net group (docs/design.md, "Sharing connections between
 * communicators"): what the communicators that share connections share,
 * the lock that guards them all and their progress loop. The rule: every
 * downcall into a shared transport context and every upcall out of it
 * runs under this one mutex, whichever communicator it is for, so that
 * no two locks are ever taken in two orders. Made with its first
 * communicator (core/net_group.c) and freed with its last (refs).
 * Today every communicator has a group of its own. */
struct tnt_net_group {
    pthread_mutex_t lock;      /* guards the group and every state of its
                                  communicators unless a field says
                                  otherwise */
    int lock_wanted;           /* atomic: threads blocked to post; the
                                  poller lets them in between callbacks */
    int refs;                  /* references: its communicators (lock) */
    /* Its live communicators, linked by group_next (lock), and the one
     * whose transport contexts the group's connections are (the first:
     * core/demux.c routes the connection-wide upcalls there). */
    struct tnt_comm *comms;
    struct tnt_comm *net_owner;
    unsigned gen;              /* bumped when comms changes: a loop over
                                  them that released the lock starts
                                  again (progress.c) */
    struct tnt_comm_progress progress;
    struct tnt_comm *thread_comm; /* the one progress_main polls for */
    /* Set when a derived communicator first joins (comm_split.c): the
     * connections are then shared, conn[] (nranks of the net owner's
     * numbering) says their state, and no communicator closes one. */
    int shared;
    int nranks;
    struct tnt_net_peer *conn;
    tnt_cookie_t drop_cookie;  /* TNT_COOKIE_DROP */
    /* Where dropped payloads land: several may be landing at once (one
     * per connection), so a larger buffer never replaces one in use;
     * the smaller ones are kept (discard_old) until the group is freed. */
    void *discard;
    size_t discard_cap;
    struct tnt_discard_old {
        struct tnt_discard_old *next;
        void *buf;
    } *discard_old;
    struct tnt_notice_copy *notices;
    /* Sets of pair areas (tnt_comm.area_ctx) agreed for a communicator
     * being made here, not yet on the list (comm_split.c); bit by set. */
    uint64_t area_reserved;
};

/* The requests of this communicator besides the collectives' sequence
 * numbers (engine.c): the lists they are on, the recycled ones, and the
 * signatures of the last ones posted. */
struct tnt_comm_requests {
    tnt_list_t active;         /* in flight, in posting order */
    tnt_list_t all;            /* every unreleased request */
    struct tnt_request *reap_head; /* detached and finished: to free */
    tnt_list_t deferred;       /* to start, in posting order */
    tnt_list_t any;            /* receives from any source waiting for a
                                  sender, in posting order (p2p.c) */
    int any_next;              /* the sender they look at first */
    tnt_list_t heavy;          /* with large ops to run, in queuing order */
    int busy;                  /* computations running without the lock */
    tnt_list_t free_reqs;      /* finished requests kept for reuse */
    int nfree_reqs;
    size_t max_free_reqs;      /* raised by tnt__engine_prepare */
    /* Signatures of the last collectives posted, by seq: a message for one
     * that already finished here (a broadcast root finishes at once) is
     * still checked against what this rank called. */
#define TNT_RECENT_SIGS 64
    tnt_msg_hdr_t recent_sigs[TNT_RECENT_SIGS];
};

/* Early messages and flow control (engine_wire.c, engine_flow.c): the
 * storage of early-message descriptors and of the flow-control sends.
 * What early messages cost in all is comm->unexp_bytes. */
struct tnt_comm_flow {
    tnt_unexp_t *free_unexp;   /* early-message descriptors for reuse */
    struct tnt_unexp_slab *unexp_slabs; /* where they all live */
    struct tnt_ctl_tx *ctl_free, *ctl_all; /* flow-control sends */
    tnt_cookie_t ctl_rx_cookie; /* TNT_COOKIE_CTL: payload of a
                                  control message (none) */
    /* Receives posted in this run of tnt__run_ready whose CTS is owed
     * (TNT_FLOW_BATCH): sent together once it has started every ready
     * receive, before its sends and reductions, one CTS per run of
     * consecutive steps (tnt__flow_flush). Kept allocated. */
    tnt_opstate_t **owed;
    size_t nowed, owed_cap;
};

/* What this rank tells and asks about failures and hangs (engine.c,
 * engine_wire.c, report.c), besides the outcome itself (comm->state,
 * fail_rc, fail_msg). */
struct tnt_comm_fault {
    int first_lost;            /* first peer lost while all was well */
    char first_lost_what[160];
    tnt_msg_hdr_t notice_hdr;  /* the failure notice this rank sends */
    uint64_t progress_sent;    /* 1 + the seq of its last progress note */
    double probe_at;           /* when this rank last asked for progress */
    unsigned report_seen;      /* report generation last handled */
};

struct tnt_comm {
    /* Who this rank is, in which job, and how it was configured: set at
     * creation, read-only afterwards. */
    int rank, nranks;
    uint32_t comm_id;
    uint32_t derived;          /* communicators derived from this one so
                                  far (comm_split.c); counted alike on
                                  every rank, by the calling thread */
    /* Its name and this rank's world rank (core/comm_name.h): set at
     * creation. how is "" for the first communicator (tnt_comm_init's). */
    char name[48];
    char how[96];
    int world_rank;
    int *world_of;             /* rank -> world rank; NULL: not known */
    uint64_t job_id;
    tnt_auth_key_t auth_key;   /* from the job key; never leaves the core */
    tnt_params_t params;
    char host[TNT_HOST_MAX];
    tnt_topo_t topo;           /* host layout from peers' hosts (comm.c) */
    int intra_host;            /* all ranks on this host, all pairs shm */
    int host_cpus;             /* online CPUs of this host */
    int host_ranks;            /* ranks of this communicator on this host */
    size_t ready_min_bytes;    /* tnt_coll_args_t's; 0: the default */
    /* Its set of pair areas (the transport's pair_area_at context): 0
     * for a group's first communicator; a derived one that joins gets
     * one that no live communicator of its members' groups has, agreed
     * by its members (comm_split.c, right after its creation). */
    unsigned area_ctx;

    /* Its net group, whose lock (comm->group->lock) guards everything
     * below unless a field says otherwise; set at creation. */
    struct tnt_net_group *group;
    struct tnt_comm *group_next; /* the group's next communicator */
    /* A communicator that joined its parent's group: its rank -> the
     * net owner's (transport) rank, and back (-1: not a member); NULL
     * for the group's first communicator, whose numbering it is. */
    int *to_net, *from_net;
    int in_collective;         /* atomic: a thread is inside a collective
                                  call on this communicator (entry.c) */

    tnt_peer_t *peers;
    struct tnt_comm_net net;
    uint64_t next_seq;         /* of the next collective posted */
    int active_msgs;           /* active requests that are not slot ones */
    struct tnt_comm_requests reqs;
    tnt_bufpool_t pool;        /* scratch and early-message buffers */
    tnt_sched_cache_t sched_cache;
    size_t unexp_bytes;        /* early messages held, TNT_UNEXP_COST */
    struct tnt_comm_flow flow;
    tnt_comm_counters_t stats; /* tnt_comm_stats (core/stats.h) */
    /* Device-buffer allreduces (core/devmem_ipc.c): how many took the
     * GPU-side path, how many were staged through host memory, and why
     * the last staged one was. */
    struct { uint64_t ipc_calls, staged_calls; char why[240]; } gpu;
    /* The timeline trace (core/timeline.h): NULL unless TNT_TIMELINE is
     * set, and then set once, before the communicator is handed out
     * (tl_pending holds it from its opening until the clocks are
     * aligned). Each recording site tests this pointer and nothing
     * else when the timeline is off. */
    struct tnt_timeline *timeline, *tl_pending;

    /* The outcome: once state is not TNT_COMM_OK every call fails with
     * fail_rc and fail_msg. */
    int state;                 /* enum tnt_comm_state */
    tnt_result_t fail_rc;
    char fail_msg[512];
    struct tnt_comm_fault fault;

    tnt_onhost_comm_t onhost;  /* the on-host algorithms' (core/onhost/) */
    tnt_mem_table_t mem;       /* shared allocations (core/mem.c), which
                                  the mapped allreduce uses */
    struct tnt_p2p_seqs *p2p;  /* tnt_send/tnt_recv numbering (p2p.c) */
    /* The recovery mesh's listener and addresses, and the dead set a
     * shrink agreed on (core/recovery.h); NULL unless TNT_RECOVERY=1.
     * Written at creation and by tnt_comm_shrink's thread. */
    struct tnt_recovery *rec;
};

/** Transport services and upcalls for transport `tpi`, filled into
 *  comm->net.tp_env[tpi]. */
void tnt__engine_fill_env(struct tnt_comm *comm, int tpi);

/** Empty request lists and the default bound of the free list; at
 *  communicator creation. */
void tnt__engine_init_requests(struct tnt_comm *comm);

/** Flags of tnt__engine_post. */
enum {
    /** The caller waits for the request right away (blocking call): leave
     *  the progress thread parked, the waiting thread drives progress. */
    TNT_POST_WAIT_NEXT = 1,
    /** Run nothing on the caller's thread: the poller starts the
     *  collective (fusion: ready() must return at once, whatever early
     *  messages wait to be copied and reduced). */
    TNT_POST_DEFER = 2,
    /** A blocking call (with TNT_POST_WAIT_NEXT): post, wait and release
     *  in one hold of the lock; returns the collective's result, *req is
     *  NULL. */
    TNT_POST_BLOCK = 4
};

/** The arguments of a collective on comm as the engine takes them: the
 *  call's (kind, count, dtype, op, root, in place) and the
 *  communicator's (rank, size, segment size, host layout, intra_host,
 *  CPUs). The entry layer (entry.c), fusion and the timeline's clock
 *  alignment build their posts with it. */
tnt_coll_args_t tnt__coll_args(const struct tnt_comm *comm, int kind,
                               size_t count, tnt_dtype_t dtype, tnt_op_t op,
                               int root, int in_place);
/** Post a collective (builds its schedule); on success *req is active. */
tnt_result_t tnt__engine_post(struct tnt_comm *comm,
                              const tnt_coll_args_t *args, const void *send,
                              void *recv, unsigned flags,
                              struct tnt_request **req);
/** tnt__engine_post with TNT_POST_DEFER, and before the collective starts
 *  the poller calls prepare(arg), if not NULL, with comm->group->lock released:
 *  the work that fills its input (fusion packs a bucket's tensors there,
 *  so that tnt_fusion_ready returns at once). Until prepare has returned
 *  nothing reads the buffers; early messages from peers are kept
 *  meanwhile. */
tnt_result_t tnt__engine_post_prepared(struct tnt_comm *comm,
                                       const tnt_coll_args_t *args,
                                       const void *send, void *recv,
                                       void (*prepare)(void *arg),
                                       void *arg, struct tnt_request **req);
/** Get ready for `n` collectives (args[i]) that will run at the same
 *  time, again and again (fusion buckets): build their schedules, and keep
 *  enough requests and scratch buffers for all of them, so that running
 *  them allocates nothing. */
tnt_result_t tnt__engine_prepare(struct tnt_comm *comm,
                                 const tnt_coll_args_t *args, size_t n);
/** Wait until req completes or `timeout_s` passes (< 0: no limit).
 *  *finished says which. Returns the operation's result (an operation
 *  that hit its deadline finished with TNT_ERR_TIMEOUT), or the positive
 *  TNT_TIMEOUT if not finished: only the polling calls (tnt_test,
 *  tnt_wait_timeout) pass a limit, so only they can see it. */
tnt_result_t tnt__engine_wait(struct tnt_request *req, double timeout_s,
                              int *finished);
/** Connect to every higher rank now rather than on first use, so that
 *  every rank sees any peer's death directly. Done for jobs of up to
 *  TNT_EAGER_CONNECT_MAX ranks; larger ones connect on first use (a
 *  full mesh of sockets would cost more than it tells). */
#define TNT_EAGER_CONNECT_MAX 64
void tnt__engine_connect_all(struct tnt_comm *comm);
/** Make progress on the on-host collectives in flight (onhost/queue.c):
 *  after every batch of events and every look at the rings. Lock held. */
void tnt__onhost_progress(struct tnt_comm *comm);
/** Wake the peers that may sleep on what this rank wrote in the pairs'
 *  shared memory (before this thread sleeps or returns to the
 *  application). */
void tnt__onhost_notify(struct tnt_comm *comm);
/** The poller is about to sleep with on-host collectives in flight: look
 *  for what the peers called instead (a mismatch that meets in neither
 *  side's shared memory), since nothing will wake this rank for it. */
void tnt__onhost_before_sleep(struct tnt_comm *comm);
/** Start the collectives posted with TNT_POST_DEFER. Lock held. */
void tnt__engine_run_deferred(struct tnt_comm *comm);
/** Run the queued large reductions and copies, each with the lock
 *  released, until none is left (poller only). Lock held on entry and
 *  return. Returns whether it ran any. */
int tnt__engine_run_heavy(struct tnt_comm *comm);
/** If req has finished and the communicator's lock is free right now,
 *  store its result in *rc (the message as tnt_wait would leave it),
 *  release it and return 1; else return 0 at once, touching nothing: no
 *  progress is made and the caller never waits for the lock. */
int tnt__engine_try_release(struct tnt_request *req, tnt_result_t *rc);
/** Start any-source receive req (on comm's any list) as a receive from
 *  `peer`, whose next message with its tag has come (p2p.c). Lock held. */
void tnt__engine_start_any(struct tnt_comm *comm, struct tnt_request *req,
                           int peer);
/** *source = the peer of completed receive req (tnt_request_source). */
tnt_result_t tnt__engine_source(struct tnt_request *req, int *source);
/** Release a request (detaches it if unfinished). */
void tnt__engine_release(struct tnt_request *req);
/** Fail everything in flight with rc, close all connections. Lock held. */
void tnt__engine_fail(struct tnt_comm *comm, tnt_result_t rc,
                      const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Free early messages never received, recycled requests and descriptors
 *  (communicator teardown, after the transport is finalized). */
void tnt__engine_free_requests(struct tnt_comm *comm);
/** At free: fail pending requests, detach unreleased ones. Lock held. */
void tnt__engine_drain(struct tnt_comm *comm, tnt_result_t rc);

/** Take comm->group->lock to post: counted in comm->group->lock_wanted, so that a
 *  poller dispatching a long batch lets this thread in between two
 *  callbacks instead of making it wait for the whole batch. */
static inline void tnt__lock_to_post(struct tnt_comm *comm)
{
    __atomic_add_fetch(&comm->group->lock_wanted, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&comm->group->lock);
    __atomic_sub_fetch(&comm->group->lock_wanted, 1, __ATOMIC_RELAXED);
}

/** More ranks of this communicator on this host than CPUs: a thread that
 *  spins takes the CPU of a rank it waits for, and on-host copies are
 *  worth their cost from a smaller size (comm.c, engine.c). */
static inline int tnt__cpus_shared(const struct tnt_comm *comm)
{
    return comm->host_cpus > 0 && comm->host_ranks > comm->host_cpus;
}

#endif /* TNT_CORE_ENGINE_H */
