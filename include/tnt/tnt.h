/*
 * libtntcomm public API: communicators and collectives for data-parallel
 * training.
 *
 * Every function returns a tnt_result_t: 0 is success, negative values are
 * errors, and positive values mean "not finished yet, ask again". Only the
 * polling calls return a positive value: tnt_test (TNT_INPROGRESS) and
 * tnt_wait_timeout (TNT_TIMEOUT: its own wait ended, the operation goes
 * on). A call that returns without having completed its work -- every
 * blocking collective, tnt_wait, tnt_comm_init*, the fusion waits --
 * returns 0 or a negative error, so `if (rc < 0)` and `if (rc != 0)` are
 * both correct checks there; an operation whose deadline (TNT_TIMEOUT
 * seconds) passed fails with TNT_ERR_TIMEOUT (since 0.4; before, it
 * returned the positive TNT_TIMEOUT). After an error, tnt_last_error()
 * gives a message for the calling thread that names the rank, the
 * operation and the offending value.
 *
 * Handles are opaque so that the ABI survives internal changes; structs
 * that cross the ABI start with `size` and `version` and are initialised
 * with a macro (TNT_CONFIG_INIT).
 */
#ifndef TNT_TNT_H
#define TNT_TNT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TNT_BUILDING_LIBRARY)
#define TNT_API __attribute__((visibility("default")))
#else
#define TNT_API
#endif

/* TNT_VERSION_MAJOR/MINOR/PATCH, TNT_VERSION_STRING, TNT_VERSION and
 * TNT_VERSION_CODE(major, minor, patch), generated from meson.build. */
#include <tnt/version.h>

/*
 * The one result list. Positive values are "not finished yet" and come
 * only from the polling calls (tnt_test, tnt_wait_timeout); negative
 * values are errors. tnt_strerror() strings come from the same list.
 * Values are never renumbered: new codes are appended.
 */
#define TNT_RESULT_MAP(X)                                                   \
    X(TNT_SUCCESS, 0, "success")                                            \
    X(TNT_INPROGRESS, 1, "operation still in progress")                     \
    X(TNT_TIMEOUT, 2, "wait ended, operation still in progress")            \
    X(TNT_ERR_INVALID_ARG, -1, "invalid argument")                          \
    X(TNT_ERR_NO_MEMORY, -2, "out of memory")                               \
    X(TNT_ERR_SYSTEM, -3, "system call failed")                             \
    X(TNT_ERR_CONFIG, -4, "invalid configuration")                          \
    X(TNT_ERR_CONNECT, -5, "could not connect")                             \
    X(TNT_ERR_PEER_LOST, -6, "peer lost")                                   \
    X(TNT_ERR_PROTOCOL, -7, "protocol violation on the wire")               \
    X(TNT_ERR_MISMATCH, -8, "ranks called mismatched collectives")          \
    X(TNT_ERR_ABORTED, -9, "communicator aborted")                          \
    X(TNT_ERR_INVALID_COMM, -10, "invalid or freed communicator")           \
    X(TNT_ERR_UNSUPPORTED, -11, "not supported")                            \
    X(TNT_ERR_INTERNAL, -12, "internal error")                              \
    X(TNT_ERR_TIMEOUT, -13, "operation timed out (deadline passed)")       \
    X(TNT_ERR_INVALID_USAGE, -14, "invalid usage (calls break a rule of use)")

typedef enum tnt_result {
#define TNT_RESULT_ENUM_(name, value, text) name = value,
    TNT_RESULT_MAP(TNT_RESULT_ENUM_)
#undef TNT_RESULT_ENUM_
} tnt_result_t;

/** Element types. f16/bf16 partial results are rounded to the type after
 *  every reduction step (round to nearest even), as NCCL does. */
typedef enum tnt_dtype {
    TNT_F32 = 0,
    TNT_F64,
    TNT_F16,
    TNT_BF16,
    TNT_I8,
    TNT_U8,
    TNT_I32,
    TNT_U32,
    TNT_I64,
    TNT_U64,
    TNT_DTYPE_COUNT
} tnt_dtype_t;

/** Reduction operations. AVG is a sum followed by one division by the
 *  number of ranks at the end (integers: truncated toward zero). Integer
 *  SUM and PROD wrap around modulo 2^bits. */
typedef enum tnt_op {
    TNT_SUM = 0,
    TNT_AVG,
    TNT_PROD,
    TNT_MIN,
    TNT_MAX,
    TNT_OP_COUNT
} tnt_op_t;

typedef struct tnt_comm *tnt_comm_t;
typedef struct tnt_request *tnt_request_t;

/** Pass as sendbuf to reduce in place (sendbuf == recvbuf works too). */
#define TNT_IN_PLACE ((const void *)1)

/** The master rank: initial weights are broadcast from it. */
#define TNT_MASTER_RANK 0

/**
 * Explicit communicator configuration. Initialise with TNT_CONFIG_INIT and
 * set the fields you need; fields left at their initial value fall back to
 * the environment (TNT_TIMEOUT, ...) or built-in defaults.
 */
typedef struct tnt_config {
    size_t size;           /**< sizeof(tnt_config_t), set by TNT_CONFIG_INIT */
    uint32_t version;      /**< TNT_CONFIG_VERSION, set by TNT_CONFIG_INIT */
    int rank;              /**< this rank, 0 <= rank < nranks */
    int nranks;            /**< number of ranks in the job */
    const char *root_addr; /**< "host:port" of rank 0's rendezvous */
    const char *job_key;   /**< shared secret of the job (may be NULL) */
    double timeout_s;      /**< per-operation deadline, seconds; 0 (as
                                set by TNT_CONFIG_INIT) or negative: not
                                set here, TNT_TIMEOUT decides */
    /** Version 2 (0.5): the reproducible mode of floating-point
     *  reductions (docs/environment.md, TNT_REPRODUCIBLE): 1 on, -1 off,
     *  0 (TNT_CONFIG_INIT) as TNT_REPRODUCIBLE says. */
    int reproducible;
} tnt_config_t;

#define TNT_CONFIG_VERSION 2
#define TNT_CONFIG_INIT                                                     \
    { sizeof(tnt_config_t), TNT_CONFIG_VERSION, -1, 0, NULL, NULL, 0.0, 0 }

/* ---- errors and versions ------------------------------------------- */

/** Static text for a result code ("unknown result" for unknown values). */
TNT_API const char *tnt_strerror(tnt_result_t result);
/** Detailed message of the last error on the calling thread ("" if none). */
TNT_API const char *tnt_last_error(void);
TNT_API void tnt_get_version(int *major, int *minor, int *patch);

/* ---- communicators -------------------------------------------------- */

/**
 * Create the world communicator from the launcher's environment: tnt-run's
 * (TNT_RANK, TNT_SIZE, TNT_ROOT_ADDR, TNT_JOB_KEY), else a PMIx server,
 * Open MPI's, Slurm's or torchrun's variables (docs/launchers.md;
 * TNT_BOOTSTRAP forces one). With none of these the result is a world of
 * one rank. Collective over all ranks.
 */
TNT_API tnt_result_t tnt_comm_init_from_env(tnt_comm_t *comm);
/** Create a communicator from an explicit configuration. Collective. */
TNT_API tnt_result_t tnt_comm_init(const tnt_config_t *config,
                                   tnt_comm_t *comm);
/** Free a communicator and everything it holds. Requests that were not
 *  freed yet stay valid and report TNT_ERR_ABORTED if unfinished. */
TNT_API tnt_result_t tnt_comm_free(tnt_comm_t comm);
/** Fail every pending and future operation with TNT_ERR_ABORTED and close
 *  all connections (peers then see this rank as lost). Free it after. */
TNT_API tnt_result_t tnt_comm_abort(tnt_comm_t comm);
/** Write into buf (NUL-terminated, cut at len) what this rank's collectives
 *  in flight are waiting for: sequence number, signature, and the sends and
 *  receives still open with their peer, step and bytes. The same report is
 *  printed on stderr by every communicator of a process that gets SIGUSR1
 *  (unless the application handles SIGUSR1 itself or TNT_REPORT_SIGNAL=0),
 *  and with the deadline error. */
TNT_API tnt_result_t tnt_comm_report(tnt_comm_t comm, char *buf, size_t len);

TNT_API tnt_result_t tnt_comm_rank(tnt_comm_t comm, int *rank);
TNT_API tnt_result_t tnt_comm_size(tnt_comm_t comm, int *size);
/** The master rank (always TNT_MASTER_RANK, rank 0). */
TNT_API tnt_result_t tnt_comm_master_rank(tnt_comm_t comm, int *rank);
/** *is_master = 1 on the master rank, 0 elsewhere. */
TNT_API tnt_result_t tnt_comm_is_master(tnt_comm_t comm, int *is_master);

/* ---- communicators derived from others (split, dup, shrink) --------- */

/** The color of a rank that takes part in tnt_comm_split but joins no
 *  new communicator. */
#define TNT_UNDEFINED (-1)

/**
 * Split comm by color: collective over every rank of comm. Ranks that
 * pass the same color (>= 0) form one new communicator, ranked by key,
 * then by their rank in comm; a rank that passes TNT_UNDEFINED gets
 * *newcomm = NULL. The addresses of the new communicators' transports
 * are exchanged by two allgathers over comm (no rendezvous at rank 0);
 * each new communicator has a context id and connections of its own
 * (not comm's), and is independent of comm once made: either may be
 * freed first. Every rank of comm gets the same error when ranks
 * called different functions (TNT_ERR_MISMATCH; a collective against a
 * split fails comm as any mismatch does) or a rank passed a bad color
 * (TNT_ERR_INVALID_ARG); comm stays usable after these two.
 */
TNT_API tnt_result_t tnt_comm_split(tnt_comm_t comm, int color, int key,
                                    tnt_comm_t *newcomm);
/** A copy of comm (same ranks, same order) with a context of its own:
 *  tnt_comm_split with one color and the rank as key. Collective. */
TNT_API tnt_result_t tnt_comm_dup(tnt_comm_t comm, tnt_comm_t *newcomm);

/**
 * After a peer loss: the survivors (every rank of comm still alive
 * calls it) agree on the set of dead ranks and get one communicator of
 * themselves, in their order in comm. The agreement runs over a
 * listener every rank opened for it at creation when TNT_RECOVERY=1 was
 * set (without it the call fails with TNT_ERR_UNSUPPORTED), and no wait
 * lasts past comm's deadline (TNT_TIMEOUT) from the call. Over TCP and
 * verbs the new communicator keeps comm's connections to the survivors
 * and takes its listener (comm cannot be shrunk again); elsewhere it
 * makes its own. A rank that dies during the agreement
 * joins the dead set; one that dies after it fails the call
 * (TNT_ERR_PEER_LOST) on the members that miss its address, or is lost
 * at the first collective of the new communicator on those that got it
 * (shrink that one again). comm is left as it was: its calls keep
 * failing with its error; free it as any other. On a communicator with
 * no dead rank it is a copy, as tnt_comm_dup. The survivors may have
 * failed in different collectives: agree on where to resume (e.g. an
 * allreduce of MIN of the step) on the new one. Communicators of up to
 * 4096 ranks.
 */
TNT_API tnt_result_t tnt_comm_shrink(tnt_comm_t comm, tnt_comm_t *newcomm);
/**
 * The ranks of comm that failed, ascending: after tnt_comm_shrink the set
 * the survivors agreed on (the same on all of them); before, the peers
 * this rank has itself seen lost (a local view). Writes at most max of
 * them into ranks and their number into *count.
 */
TNT_API tnt_result_t tnt_comm_failed_ranks(tnt_comm_t comm, int *ranks,
                                           int max, int *count);

/* ---- collectives ------------------------------------------------------ */
/*
 * Blocking calls are the nonblocking call followed by tnt_wait(): they
 * return TNT_SUCCESS or a negative error (TNT_ERR_TIMEOUT when the
 * deadline passed, here or on a peer), never a positive value. Every
 * rank must call the same collectives in the same order; the first message
 * of each collective carries its signature, so a mismatch is reported as
 * TNT_ERR_MISMATCH rather than corrupting memory.
 *
 * Threads: collectives on one communicator are issued by one thread at a
 * time, in the same order on every rank (as in MPI and NCCL): the ranks
 * match them by their order alone. Several threads may take turns, or use
 * a communicator each. A thread that enters a collective (blocking, or
 * posting a nonblocking one) on a communicator while another thread is
 * inside one on it gets TNT_ERR_INVALID_USAGE, nothing of its call is
 * posted, and the communicator fails on every rank (the other thread's
 * call included), since the ranks may have taken the two calls in
 * different orders. Calls that do not overlap on any rank cannot be told
 * apart from correct use: their order across threads is the program's
 * to fix. tnt_send/tnt_recv and the calls on requests are not
 * collectives: several threads may issue them at once (one request is
 * used by one thread at a time).
 */

/** recvbuf[i] = op over ranks of sendbuf[i]. In place: sendbuf ==
 *  TNT_IN_PLACE or sendbuf == recvbuf. */
TNT_API tnt_result_t tnt_allreduce(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype, tnt_op_t op);
TNT_API tnt_result_t tnt_iallreduce(tnt_comm_t comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    tnt_dtype_t dtype, tnt_op_t op,
                                    tnt_request_t *request);

/** Copy `count` elements of root's buf into buf on every rank. */
TNT_API tnt_result_t tnt_broadcast(tnt_comm_t comm, void *buf, size_t count,
                                   tnt_dtype_t dtype, int root);
TNT_API tnt_result_t tnt_ibroadcast(tnt_comm_t comm, void *buf,
                                    size_t count, tnt_dtype_t dtype,
                                    int root, tnt_request_t *request);

TNT_API tnt_result_t tnt_barrier(tnt_comm_t comm);
TNT_API tnt_result_t tnt_ibarrier(tnt_comm_t comm, tnt_request_t *request);

/** recvbuf (size * count elements) = every rank's sendbuf, in rank order.
 *  In place: sendbuf == TNT_IN_PLACE, own block already at rank*count. */
TNT_API tnt_result_t tnt_allgather(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype);
TNT_API tnt_result_t tnt_iallgather(tnt_comm_t comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    tnt_dtype_t dtype,
                                    tnt_request_t *request);

/** sendbuf holds size * count elements; rank r receives block r of the
 *  element-wise reduction (MPI_Reduce_scatter_block). */
TNT_API tnt_result_t tnt_reduce_scatter(tnt_comm_t comm, const void *sendbuf,
                                        void *recvbuf, size_t count,
                                        tnt_dtype_t dtype, tnt_op_t op);
TNT_API tnt_result_t tnt_ireduce_scatter(tnt_comm_t comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, tnt_dtype_t dtype,
                                         tnt_op_t op,
                                         tnt_request_t *request);

/*
 * Rooted collectives and all-to-all (0.5, TNTCOMM_0.5). Counts are in
 * elements. A root outside 0..size-1 or a NULL buffer where data moves is
 * TNT_ERR_INVALID_ARG with tnt_last_error saying which.
 */

/** recvbuf[i] at root = op over ranks of sendbuf[i]; recvbuf is read
 *  only at root (NULL elsewhere is fine). In place at root: sendbuf ==
 *  TNT_IN_PLACE or sendbuf == recvbuf. The result is bitwise the one
 *  tnt_allreduce gives for the same inputs, count, dtype and op on the
 *  same communicator (docs/design.md, "Determinism"); the reduction moves
 *  the data of an allreduce. */
TNT_API tnt_result_t tnt_reduce(tnt_comm_t comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, int root);
TNT_API tnt_result_t tnt_ireduce(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, tnt_op_t op, int root,
                                 tnt_request_t *request);

/** root's recvbuf (size * count elements) = every rank's sendbuf (count),
 *  in rank order; recvbuf is read only at root. In place at root:
 *  sendbuf == TNT_IN_PLACE, root's block already at root*count. */
TNT_API tnt_result_t tnt_gather(tnt_comm_t comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                tnt_dtype_t dtype, int root);
TNT_API tnt_result_t tnt_igather(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, int root,
                                 tnt_request_t *request);

/** Rank r's recvbuf (count) = block r of root's sendbuf (size * count
 *  elements); sendbuf is read only at root. In place at root: recvbuf ==
 *  (void *)TNT_IN_PLACE, root's block stays in sendbuf. */
TNT_API tnt_result_t tnt_scatter(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, int root);
TNT_API tnt_result_t tnt_iscatter(tnt_comm_t comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  tnt_dtype_t dtype, int root,
                                  tnt_request_t *request);

/** Block j (count elements at j*count) of sendbuf goes to rank j, where it
 *  lands as block i (i: the sender) of recvbuf; both hold size * count
 *  elements. Not in place. */
TNT_API tnt_result_t tnt_alltoall(tnt_comm_t comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  tnt_dtype_t dtype);
TNT_API tnt_result_t tnt_ialltoall(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype,
                                   tnt_request_t *request);

/** Rank i sends sendcounts[j] elements from sendbuf + sdispls[j] to rank
 *  j, which receives them into recvbuf + rdispls[i] and must have
 *  recvcounts[i] == that count (else TNT_ERR_MISMATCH naming both ranks
 *  and sizes, on the receiver and then every rank). Arrays of size
 *  entries, displacements in elements; a send region may overlap another,
 *  receive regions must not. Not in place. The arrays are read during the
 *  call only. */
TNT_API tnt_result_t tnt_alltoallv(tnt_comm_t comm, const void *sendbuf,
                                   const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf,
                                   const size_t *recvcounts,
                                   const size_t *rdispls, tnt_dtype_t dtype);
TNT_API tnt_result_t tnt_ialltoallv(tnt_comm_t comm, const void *sendbuf,
                                    const size_t *sendcounts,
                                    const size_t *sdispls, void *recvbuf,
                                    const size_t *recvcounts,
                                    const size_t *rdispls, tnt_dtype_t dtype,
                                    tnt_request_t *request);

/*
 * Point-to-point (0.5): one message from this rank to `peer`, tag 0 to
 * TNT_TAG_MAX. Messages between one pair with one tag are received in
 * the order they were sent; other tags are independent. The receive's
 * count and dtype must be the send's, else TNT_ERR_MISMATCH naming both
 * ranks, the tag and both counts. Sends and receives do not take part in
 * the collectives' order: they may be posted between collectives, and
 * collectives between them, in any order on each rank. A send returns
 * once the buffer may be reused: at once for a small message, once the
 * receive is posted for one above the eager window (TNT_EAGER_BYTES), so
 * two ranks that both send a large message before receiving wait for
 * each other (use tnt_isend). Like a collective, each has the deadline
 * TNT_TIMEOUT, and a failure fails the communicator.
 */
#define TNT_TAG_MAX 0x3fffffff

TNT_API tnt_result_t tnt_send(tnt_comm_t comm, const void *buf, size_t count,
                              tnt_dtype_t dtype, int peer, int tag);
TNT_API tnt_result_t tnt_recv(tnt_comm_t comm, void *buf, size_t count,
                              tnt_dtype_t dtype, int peer, int tag);
TNT_API tnt_result_t tnt_isend(tnt_comm_t comm, const void *buf,
                               size_t count, tnt_dtype_t dtype, int peer,
                               int tag, tnt_request_t *request);
TNT_API tnt_result_t tnt_irecv(tnt_comm_t comm, void *buf, size_t count,
                               tnt_dtype_t dtype, int peer, int tag,
                               tnt_request_t *request);

/*
 * Receive from any source (0.6): tnt_recv/tnt_irecv with peer
 * TNT_ANY_SOURCE take the next message with that tag from whichever rank
 * sends one. Messages from one sender still arrive in the order it sent
 * them, and a message goes to the earliest posted receive it matches (a
 * receive naming its peer posted after one from any source with its tag
 * waits until that one has its sender), as in MPI; a receive from any
 * source looks at the senders in turn so that none is starved. Count and
 * dtype must be the send's (else TNT_ERR_MISMATCH, as above); the
 * deadline TNT_TIMEOUT holds while no message comes. The sender is known
 * once the receive completed: tnt_request_source (a blocking tnt_recv
 * does not say it: use tnt_irecv and tnt_wait for that).
 */
#define TNT_ANY_SOURCE (-1)

/** *source = the rank a completed receive's message came from (its
 *  peer, or the sender an any-source receive took). TNT_ERR_INVALID_ARG
 *  for a request that is no receive or whose receive has not completed
 *  successfully yet. */
TNT_API tnt_result_t tnt_request_source(tnt_request_t request, int *source);

/* ---- requests ----------------------------------------------------------- */

/** TNT_SUCCESS when done, TNT_INPROGRESS if not yet, or the op's error
 *  (negative; TNT_ERR_TIMEOUT once its deadline passed). */
TNT_API tnt_result_t tnt_test(tnt_request_t request);
/** Wait for completion; returns the operation's result: TNT_SUCCESS or a
 *  negative error, never a positive value. The operation's own deadline
 *  (TNT_TIMEOUT seconds) bounds the wait: TNT_ERR_TIMEOUT. */
TNT_API tnt_result_t tnt_wait(tnt_request_t request);
/** Wait at most timeout_s seconds; TNT_TIMEOUT (positive) if still
 *  running: the operation goes on and can be waited for again. An
 *  operation that failed, its deadline included, gives its negative
 *  error. */
TNT_API tnt_result_t tnt_wait_timeout(tnt_request_t request,
                                      double timeout_s);
/** Release a request. An unfinished operation continues in the background;
 *  its buffers must stay valid until it would have completed. A request
 *  released already (freed twice, or used after its free by tnt_test,
 *  tnt_wait, tnt_wait_timeout) gives TNT_ERR_INVALID_ARG. */
TNT_API tnt_result_t tnt_request_free(tnt_request_t request);

/* ---- counters ----------------------------------------------------------- */

/** Kinds of collectives, the index of tnt_stats_t.kind. */
enum {
    TNT_STATS_ALLREDUCE = 0,
    TNT_STATS_BROADCAST,
    TNT_STATS_ALLGATHER,
    TNT_STATS_REDUCE_SCATTER,
    TNT_STATS_BARRIER,
    TNT_STATS_REDUCE,          /**< 0.5 */
    TNT_STATS_GATHER,          /**< 0.5 */
    TNT_STATS_SCATTER,         /**< 0.5 */
    TNT_STATS_KINDS = 8        /**< entries of kind[] (full: later kinds
                                    are fields appended to tnt_stats_t) */
};
/** Entries of tnt_stats_t.algo[] and .transport[]. */
#define TNT_STATS_ALGOS 24
#define TNT_STATS_TRANSPORTS 4

/** Calls and their bytes: count x element size of each call's `count`
 *  argument (allgather: one rank's block; reduce-scatter: the block each
 *  rank receives; barrier: 0). */
typedef struct tnt_stats_count {
    uint64_t calls;
    uint64_t bytes;
} tnt_stats_count_t;

/** tnt_stats_transport_t.flags */
#define TNT_STATS_TP_RUNNING 0x1u   /**< this communicator started it */
#define TNT_STATS_TP_REPORTS 0x2u   /**< it reports its own counters
                                         (reconnects, strangers); else 0 */

/** One transport's counters. Messages are what the core handed it or
 *  got from it (data, flow control, failure notices); bytes their
 *  payloads. The on-host algorithms move data without messages. */
typedef struct tnt_stats_transport {
    char name[16];             /**< "tcp", "shm", "verbs", a plugin's */
    uint32_t flags;            /**< TNT_STATS_TP_* */
    uint32_t peers;            /**< peers it serves */
    uint64_t msgs_sent, bytes_sent;
    uint64_t msgs_recv, bytes_recv;
    uint64_t reconnects;       /**< connections to a peer made again */
    uint64_t strangers_refused; /**< connections closed for not proving
                                    the job key (garbage, wrong key,
                                    silence past the deadline) */
    uint64_t strangers_evicted; /**< unproven ones closed to make room */
} tnt_stats_transport_t;

/**
 * Counters of one communicator since its creation (tnt_comm_stats).
 * Set `size` (sizeof(tnt_stats_t) of your header) and `version`
 * (TNT_STATS_VERSION) first, with TNT_STATS_INIT: the library writes only
 * the fields that both it and the caller's size know, and nothing past
 * `size` bytes; it sets `size` to the bytes it filled.
 */
typedef struct tnt_stats {
    size_t size;               /**< in: the caller's; out: bytes filled */
    uint32_t version;          /**< TNT_STATS_VERSION of the caller */
    uint32_t reserved;
    /** By kind (TNT_STATS_ALLREDUCE, ...): every collective posted. */
    tnt_stats_count_t kind[TNT_STATS_KINDS];
    /** By algorithm: entry i is the algorithm tnt_stats_algo_name(i)
     *  names (NULL: none). */
    tnt_stats_count_t algo[TNT_STATS_ALGOS];
    /** By position in the transport list (tcp, shm, verbs, plugin). */
    tnt_stats_transport_t transport[TNT_STATS_TRANSPORTS];
    uint64_t wait_ns;          /**< time blocking calls and tnt_wait*
                                    waited for their collective */
    uint64_t unexpected_hwm;   /**< most bytes early messages held at
                                    once (payload + descriptor; bounded by
                                    TNT_MAX_UNEXPECTED_BYTES) */
    /** 0.5: tnt_alltoall and tnt_alltoallv calls (bytes: alltoall's
     *  count x element size; alltoallv's sendcounts summed). kind[] is
     *  full, so kinds from here on are appended fields: an older caller's
     *  smaller struct simply does not get them. */
    tnt_stats_count_t alltoall;
    /** 0.5: tnt_send, tnt_recv and their i-variants (bytes: count x
     *  element size of each). */
    tnt_stats_count_t p2p;
    /** 0.7: which communicator these are of. comm_name: "world" for
     *  tnt_comm_init's, a derived one's parent's name, a slash and its
     *  number among the parent's derivations ("world/2"); comm_how: how
     *  it was made ("split of world, color 1", "dup of world", "shrink
     *  of world"; "" for the first); world_rank: this rank's rank in the
     *  first communicator. The same names as the timeline and the hang
     *  report. */
    char comm_name[48];
    char comm_how[96];
    int32_t rank;
    int32_t world_rank;
} tnt_stats_t;

#define TNT_STATS_VERSION 1
#define TNT_STATS_INIT { sizeof(tnt_stats_t), TNT_STATS_VERSION, 0, {{0, 0}}, \
                         {{0, 0}}, {{{0}, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, 0, 0, \
                         {0, 0}, {0, 0}, {0}, {0}, 0, 0 }
/** The smallest size tnt_comm_stats accepts: up to and with kind[]. */
#define TNT_STATS_SIZE_MIN                                                  \
    (offsetof(tnt_stats_t, kind) + sizeof(((tnt_stats_t *)0)->kind))

/** Fill *out with comm's counters (see tnt_stats_t). TNT_ERR_INVALID_ARG
 *  when out is NULL or out->size is below TNT_STATS_SIZE_MIN. Local, not
 *  collective; takes the communicator lock once. */
TNT_API tnt_result_t tnt_comm_stats(tnt_comm_t comm, tnt_stats_t *out);
/** The name of algorithm entry i of tnt_stats_t.algo ("ring", "slots",
 *  ...), NULL for an index that names none. */
TNT_API const char *tnt_stats_algo_name(int i);

/* ---- shared allocations ------------------------------------------------- */

/**
 * Collective: every rank of comm calls it, in the same order among its
 * tnt_mem_alloc calls (the sizes may differ). *ptr gets `bytes` of memory
 * (zeroed, page-aligned) that, on a communicator whose ranks all share
 * this host, the other ranks map too: an allreduce whose send and receive
 * buffers lie in such memory on every rank then reduces the peers' data
 * where it lies and writes every result in place, one read and one write
 * per byte and rank (NCCL's registered buffers, MPI_Win_allocate_shared).
 * Elsewhere, or where the peers cannot map each other's memory (another
 * user, ptrace restrictions, PID namespaces), it is plain memory and
 * collectives on it take their usual paths.
 *
 * A collective must use such memory on every rank or on none: one rank
 * with a malloc'd buffer against peers with shared ones fails all of
 * them with TNT_ERR_MISMATCH. The memory lives until tnt_mem_free (local,
 * not collective) or tnt_comm_free.
 */
TNT_API tnt_result_t tnt_mem_alloc(tnt_comm_t comm, size_t bytes,
                                   void **ptr);
/** Release memory from tnt_mem_alloc on this rank (NULL: nothing). */
TNT_API tnt_result_t tnt_mem_free(tnt_comm_t comm, void *ptr);

/* ---- helpers ------------------------------------------------------------ */

/** Bytes per element of dtype, or 0 for an unknown dtype. */
TNT_API size_t tnt_dtype_size(tnt_dtype_t dtype);
TNT_API const char *tnt_dtype_name(tnt_dtype_t dtype);
TNT_API const char *tnt_op_name(tnt_op_t op);

/**
 * Tarantella's split of a global batch: every rank gets global/size
 * samples and the first global%size ranks one more. *offset is the index
 * of this rank's first sample.
 */
TNT_API tnt_result_t tnt_micro_batch(size_t global_batch, int rank, int size,
                                     size_t *offset, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* TNT_TNT_H */
