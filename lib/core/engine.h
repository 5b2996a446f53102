/*
 * The communicator and its progress engine. A communicator owns one
 * transport context, a table of peers, the collectives in flight and one
 * progress thread that blocks in epoll. All state is guarded by
 * comm->lock; transports are called with it held.
 *
 * Collectives are executed from their schedules: an operation becomes
 * ready when its dependencies have completed; sends go to the transport,
 * receives are matched by (sequence number, step) against messages from
 * that peer, reductions run inline.
 */
#ifndef TNT_CORE_ENGINE_H
#define TNT_CORE_ENGINE_H

#include <pthread.h>
#include <stdint.h>

#include "collectives/algorithms.h"
#include "collectives/reduce.h"
#include "collectives/schedule.h"
#include "core/bufpool.h"
#include "core/sched_cache.h"
#include "core/param.h"
#include "tnt/transport.h"

#define TNT_MSG_MAGIC 0x4d544e54u /* "TNTM" */
#define TNT_HOST_MAX 64
/* Transports one communicator may use at once (tcp and shm). */
#define TNT_TP_MAX 2

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

enum tnt_cookie_type { TNT_COOKIE_OP = 1, TNT_COOKIE_UNEXP = 2 };

struct tnt_request;

/* Per-operation state of a collective in flight. */
typedef struct tnt_opstate {
    int type;                  /* TNT_COOKIE_OP: first, see cookies */
    struct tnt_opstate *next;  /* peer's posted-recv or pending-send list */
    struct tnt_request *coll;
    uint32_t op;
    uint32_t deps_left;
    int done;
    tnt_msg_hdr_t hdr;         /* sends: lives until the send completes */
} tnt_opstate_t;

/* A message that arrived before its receive was posted. */
typedef struct tnt_unexp {
    int type;                  /* TNT_COOKIE_UNEXP */
    struct tnt_unexp *next;
    tnt_msg_hdr_t hdr;
    size_t len;
    int complete;              /* payload fully arrived */
    tnt_opstate_t *claimed;    /* receive waiting for the payload */
    unsigned char *data;       /* from the communicator's buffer pool */
    size_t cap;
} tnt_unexp_t;

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
    const tnt_transport_v1_t *tp; /* this peer's transport (comm_tp.c) */
    void *tp_ctx;
    int tpi;                   /* its index in comm->tp */
    void *ep;                  /* transport endpoint once connected */
    int connecting;
    int ever_connected;
    tnt_result_t dead;         /* 0 while alive */
    tnt_opstate_t *pending_head, *pending_tail; /* sends before connect */
    tnt_opstate_t *posted;     /* posted receives */
    tnt_unexp_t *unexp_head, *unexp_tail;
} tnt_peer_t;

/* A collective in flight; the request handle users hold. */
struct tnt_request {
    struct tnt_comm *comm;     /* NULL once the communicator is freed */
    struct tnt_request *next, *prev; /* comm's active list */
    struct tnt_request *all_next, *all_prev; /* every unreleased request */
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
    double deadline;
    int active;                /* on the comm's active list */
    int detached;              /* user freed it before completion */
};

typedef struct tnt_watch {
    int fd;
    tnt_fd_cb_t cb;
    void *arg;
    int dead;
    struct tnt_watch *next;    /* graveyard */
} tnt_watch_t;

enum tnt_comm_state { TNT_COMM_OK = 0, TNT_COMM_FAILED, TNT_COMM_ABORTED };

struct tnt_comm {
    int rank, nranks;
    uint32_t comm_id;
    uint64_t job_id;
    tnt_params_t params;
    pthread_mutex_t lock;
    pthread_cond_t cond;       /* broadcast on every completion */
    pthread_t thread;
    int thread_started;
    int stop;
    int epfd, wakefd;
    tnt_watch_t wake_watch;
    tnt_watch_t *graveyard;
    double last_activity;
    /* Transports by index in the built-in table; NULL where unused. */
    const tnt_transport_v1_t *tp[TNT_TP_MAX];
    void *tp_ctx[TNT_TP_MAX];
    tnt_transport_env_v1_t tp_env[TNT_TP_MAX];
    tnt_peer_t *peers;
    uint64_t next_seq;
    struct tnt_request *active_head, *active_tail;
    struct tnt_request *all_head;
    struct tnt_request *reap_head;
    tnt_watch_t **watches;     /* by fd */
    int watches_cap;
    size_t unexp_bytes;
    tnt_bufpool_t pool;        /* scratch and early-message buffers */
    tnt_sched_cache_t sched_cache;
    struct tnt_request *free_reqs; /* finished requests kept for reuse */
    int nfree_reqs;
    size_t max_free_reqs;      /* raised by tnt__engine_prepare */
    tnt_unexp_t *free_unexp;   /* early-message descriptors for reuse */
    struct tnt_unexp_slab *unexp_slabs;
    int state;                 /* enum tnt_comm_state */
    tnt_result_t fail_rc;
    char fail_msg[512];
    char host[TNT_HOST_MAX];
    char bind_ip[64];          /* where the transport listens */
};

/** Transport services and upcalls for transport `tpi`, filled into
 *  comm->tp_env[tpi]. */
void tnt__engine_fill_env(struct tnt_comm *comm, int tpi);

/** Post a collective (builds its schedule); on success *req is active. */
tnt_result_t tnt__engine_post(struct tnt_comm *comm,
                              const tnt_coll_args_t *args, const void *send,
                              void *recv, struct tnt_request **req);
/** Get ready for `n` collectives (args[i]) that will run at the same
 *  time, again and again (fusion buckets): build their schedules, and keep
 *  enough requests and scratch buffers for all of them, so that running
 *  them allocates nothing. */
tnt_result_t tnt__engine_prepare(struct tnt_comm *comm,
                                 const tnt_coll_args_t *args, size_t n);
/** Wait until req completes or `timeout_s` passes (< 0: no limit).
 *  *finished says which (the result alone cannot: an operation that hit
 *  its deadline finishes with TNT_TIMEOUT too). Returns the operation's
 *  result, or TNT_TIMEOUT if not finished. */
tnt_result_t tnt__engine_wait(struct tnt_request *req, double timeout_s,
                              int *finished);
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

double tnt__now(void);

#endif /* TNT_CORE_ENGINE_H */
