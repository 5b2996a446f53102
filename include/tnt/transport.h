/*
 * The transport interface: one versioned table of functions that TCP,
 * shared memory and RDMA verbs all fill in, built-in or loaded as a plugin
 * (TNT_TRANSPORT_PLUGIN=/path/libtnt-net-NAME.so). The core holds a list
 * of these tables and reaches every transport through them alone.
 *
 * Model (active messages): the core sends a message as an opaque header of
 * `hdr_len` bytes plus a payload. On the receiving side the transport hands
 * the header to the core (on_header), which says where the payload must go,
 * and reports when the payload has landed there (on_payload). Matching,
 * signatures and buffering of early messages live in the core, once.
 *
 * Threading: the core calls every function with its communicator lock
 * held, and the transport calls the upcalls only from inside fd callbacks
 * or poll (never from inside another downcall), so transports need no
 * locks of their own.
 *
 * Versions: both tables start with `size` and `version`; fields are only
 * ever appended, and a side reads a field only when the other side's
 * `size` covers it (TNT_TRANSPORT_HAS). A table of version 1 (size up to
 * `finalize`) still loads and works: the core then waits for it in epoll
 * only, gives it no options and asks it for no pair areas, and lets it
 * reach any peer that publishes an address, at the lowest preference.
 * Version 3 changed no table field: the sizes of the pair areas, which
 * version 2 fixed in this header, come from the core in the env
 * (pair_area_bytes), so the core's on-host layouts can change without
 * the interface; a table of version 2 is taken to hand out version 2's
 * sizes (5 and 257 pages a side), and its areas serve while the core's
 * layouts fit them. Version 4 appends pair_area_contexts and
 * pair_area_at: a pair's areas in several sets, one per communicator
 * sharing the transport's connections (the core's "context"); a table of
 * an older version has one set, context 0, through pair_area.
 *
 * Plugins: a shared object exports one symbol, `tnt_transport_plugin_v4`
 * (a tnt_transport_t of version 4; `tnt_transport_plugin_v3`, `_v2` and
 * `_v1` are accepted too), and is loaded with dlopen(RTLD_NOW | RTLD_LOCAL).
 * A plugin has its own copy of whatever library code it links, with its
 * own statics (log level, the thread's last error): everything it
 * reports must cross through the env's services. A failing downcall
 * returns its result through env->set_error, which records the message
 * where tnt_last_error() finds it; the message of a failed upcall is
 * read with env->last_error; logs go through env->log (its level is the
 * core's). A message recorded any other way is lost. These three
 * services keep no state per communicator: they accept core == NULL.
 */
#ifndef TNT_TRANSPORT_H
#define TNT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/tnt.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The interface version this header describes, and the oldest one the
 *  core still loads. */
#define TNT_TRANSPORT_VERSION 4
#define TNT_TRANSPORT_VERSION_MIN 1
/** 1 if the table `t` (either struct) has `field`: its `size` covers it. */
#define TNT_TRANSPORT_HAS(t, field)                                          \
    ((t)->size >= offsetof(__typeof__(*(t)), field) + sizeof((t)->field))
/** Bytes of the MACs that auth_mac computes (HMAC-SHA256). */
#define TNT_AUTH_MAC_BYTES 32
/** Largest address blob a transport may publish through the bootstrap. */
#define TNT_TRANSPORT_ADDR_MAX 128

enum tnt_log_level {
    TNT_LOG_ERROR = 0,
    TNT_LOG_WARNING = 1,
    TNT_LOG_INFO = 2,
    TNT_LOG_DEBUG = 3
};
/** OR into a log level: print on every rank, not only the master. For
 *  security events (a refused stranger): the rank that refused it is the
 *  only one that knows, and must say so. */
#define TNT_LOG_EVERY_RANK 0x100

/** Readiness bits for watch_fd (same meaning as EPOLLIN/EPOLLOUT). */
#define TNT_FD_READ 0x1u
#define TNT_FD_WRITE 0x4u

typedef void (*tnt_fd_cb_t)(void *arg, uint32_t events);

/** Areas of pair_area. Their layout and size belong to the core's
 *  on-host algorithms that use them, which say the size in the env
 *  (pair_area_bytes); a transport hands out bytes. */
/** The collective slots of small allreduces. */
#define TNT_TP_AREA_SLOTS 1
/** The staging buffers of the staged allreduce and broadcast. */
#define TNT_TP_AREA_STAGES 2
/** One past the last area id. */
#define TNT_TP_AREA_END 3
/** Each side of an area starts at a multiple of TNT_TP_AREA_ALIGN bytes,
 *  and its size (env->pair_area_bytes) is a multiple of it. */
#define TNT_TP_AREA_ALIGN 4096

/** What the core gives a transport at init: identity, services, upcalls. */
typedef struct tnt_transport_env {
    size_t size;
    uint32_t version;
    int rank;
    int nranks;
    uint32_t comm_id;
    uint64_t job_id;     /**< connections of other jobs are refused */
    const char *bind_ip; /**< local address that reaches rank 0 */
    void *core;          /**< first argument of every service and upcall */

    /* Services. */
    tnt_result_t (*watch_fd)(void *core, int fd, uint32_t events,
                             tnt_fd_cb_t cb, void *arg);
    tnt_result_t (*modify_fd)(void *core, int fd, uint32_t events,
                              tnt_fd_cb_t cb, void *arg);
    void (*unwatch_fd)(void *core, int fd);
    void (*log)(void *core, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

    /* Upcalls. */
    /** A connection to `peer` is ready for sends (either side). */
    void (*on_connected)(void *core, int peer, void *ep);
    /** A header arrived. The core sets *dest (payload_len bytes) and
     *  *cookie; a negative result closes the connection as hostile. */
    tnt_result_t (*on_header)(void *core, int peer, const void *hdr,
                              size_t hdr_len, size_t payload_len,
                              void **dest, void **cookie);
    /** The payload of the message with `cookie` has fully landed. */
    void (*on_payload)(void *core, int peer, void *cookie);
    /** A send that returned TNT_INPROGRESS has completed. */
    void (*on_send_done)(void *core, void *cookie);
    /** The connection to `peer` failed or closed; `what` says how. */
    void (*on_peer_error)(void *core, int peer, tnt_result_t err,
                          const char *what);

    /* Appended (present when size covers them): authentication
     * with the job key, which stays in the core. Every connection must
     * prove the key both ways before its first message is trusted. */
    /** mac = HMAC-SHA256(job key, data). */
    void (*auth_mac)(void *core, const void *data, size_t len,
                     unsigned char mac[TNT_AUTH_MAC_BYTES]);
    /** 1 if mac is HMAC-SHA256(job key, data) (constant-time compare). */
    int (*auth_verify)(void *core, const void *data, size_t len,
                       const unsigned char mac[TNT_AUTH_MAC_BYTES]);
    /** Unpredictable bytes for nonces. */
    void (*random_bytes)(void *core, void *buf, size_t len);

    /* ---- version 2 ---- */
    /** This rank's host identity (the one peers' hosts are compared
     *  with in reachable). */
    const char *host;
    /** Record `msg` as the calling thread's last error (what
     *  tnt_last_error() returns) and return `result`. The last error is
     *  per thread, not per communicator: `core` may be NULL. */
    tnt_result_t (*set_error)(void *core, tnt_result_t result,
                              const char *msg);
    /** The calling thread's last error as recorded in the core (what an
     *  upcall that failed, on_header say, left there). `core` may be
     *  NULL. */
    const char *(*last_error)(void *core);
    /** The address `peer` published for this transport at the bootstrap
     *  (what connect would be given): copies it into buf and returns its
     *  length, or 0 when the peer has none for this transport or is not
     *  known yet. For proving that a peer which has not connected yet is
     *  gone (see docs/security.md, "Deaths during the handshake"). */
    size_t (*peer_addr)(void *core, int peer, void *buf, size_t cap);

    /* ---- version 3 ---- */
    /** Bytes of one side of each pair area, by area id (TNT_TP_AREA_*;
     *  0 for entry 0 and for an area the core does not use), each a
     *  multiple of TNT_TP_AREA_ALIGN: a transport that offers pair_area
     *  lays out its shared memory by these. */
    size_t pair_area_bytes[TNT_TP_AREA_END];
} tnt_transport_env_t;
/** Whether env (of env->size bytes) has the field `f`. */
#define TNT_ENV_HAS(env, f)                                                  \
    ((env)->size >= offsetof(tnt_transport_env_t, f) + sizeof((env)->f))
/** Bytes of a version-1 env (every field up to random_bytes). */
#define TNT_TRANSPORT_ENV_V1_SIZE offsetof(tnt_transport_env_t, host)
/** Bytes of a version-2 env (every field up to peer_addr). */
#define TNT_TRANSPORT_ENV_V2_SIZE                                            \
    offsetof(tnt_transport_env_t, pair_area_bytes)

/** Bits of tnt_transport_t.caps: what the core may expect of poll. */
/** poll without TNT_POLL_ARM may leave the peers' wake-ups off: then the
 *  core calls poll(ctx, TNT_POLL_ARM) before it sleeps in epoll again. */
#define TNT_TP_POLL_UNARMS 0x1u
/** A look costs system calls: the core polls it directly only where
 *  every rank has a CPU of its own (elsewhere every empty look is time
 *  the awaited rank does not get), and waits in epoll otherwise. */
#define TNT_TP_POLL_SYSCALLS 0x2u
/** close keeps the peer's stream in frame: a message partly written is
 *  finished (the transport copies its rest, so the core may reuse the
 *  memory at once), then the messages sent without a cookie that still
 *  wait (the core's failure notices), in the background, within a bound
 *  of about a second and without upcalls; the messages not yet begun
 *  are dropped. The core then sends its failure notice also to a peer
 *  with sends in flight; without the bit it skips such a peer, whose
 *  connection then just closes. */
#define TNT_TP_CLOSE_FINISHES 0x4u

/** Flags of poll. */
/** Turn wake-ups back on and take what arrived meanwhile: the caller is
 *  about to sleep in epoll. */
#define TNT_POLL_ARM 0x1u

/** Options of set_option (value, len). */
/** size_t: payloads of at least this many bytes go by the transport's
 *  single-copy rendezvous, smaller ones stream (two copies). The sender
 *  decides, so ranks need not agree. */
#define TNT_TP_OPT_RNDV_MIN 1

/** What a transport counts itself (its `stats` entry): versioned by
 *  size like the tables, fields only appended. */
typedef struct tnt_transport_stats {
    size_t size;
    uint32_t version;
    uint64_t reconnects;        /**< connections to a known peer made
                                     again after one was up */
    uint64_t strangers_refused; /**< unproven connections closed: garbage,
                                     a wrong key, silence past the
                                     deadline */
    uint64_t strangers_evicted; /**< unproven connections closed to make
                                     room for others */
} tnt_transport_stats_t;

typedef struct tnt_transport {
    size_t size;
    uint32_t version;
    const char *name;
    /** Create the transport's context for one communicator. */
    tnt_result_t (*init)(const tnt_transport_env_t *env, void **ctx);
    /** Start listening; write this rank's address blob. */
    tnt_result_t (*listen)(void *ctx, void *addr, size_t *addr_len);
    /** Start connecting to `peer` without blocking; on_connected follows. */
    tnt_result_t (*connect)(void *ctx, int peer, const void *addr,
                            size_t addr_len);
    /** Post a message. TNT_SUCCESS: fully sent now, no upcall follows.
     *  TNT_INPROGRESS: on_send_done(cookie) follows. Header and payload
     *  must stay valid until then. */
    tnt_result_t (*send)(void *ctx, void *ep, const void *hdr, size_t hdr_len,
                         const void *payload, size_t len, void *cookie);
    /** Optional memory registration hooks (NULL when not needed). The
     *  core calls reg_mem for each tnt_mem_alloc allocation of this rank
     *  (when the transport serves some peer) and dereg_mem at its
     *  tnt_mem_free, or before finalize for one still live, always
     *  before the memory is unmapped; both under the core's lock, as
     *  every downcall. Between them the transport may keep whatever
     *  registration it made of the range; messages in the range still
     *  pass the pointer as for any memory. A reg_mem failure only
     *  means no registration is kept. */
    tnt_result_t (*reg_mem)(void *ctx, void *ptr, size_t len, void **handle);
    void (*dereg_mem)(void *ctx, void *handle);
    /** Close one endpoint; no upcalls for it afterwards. */
    void (*close)(void *ctx, void *ep);
    /** Close everything and free the context. */
    void (*finalize)(void *ctx);

    /* ---- version 2 ---- */
    /** Which transport a peer gets when several reach it: the highest
     *  (ties: the earlier in the core's list). Built-in: shm 300, verbs
     *  200, tcp 100. A version-1 table counts as 0. */
    int preference;
    /** TNT_TP_POLL_* bits. */
    uint32_t caps;
    /** Optional (NULL: every peer that published an address). 1 if this
     *  transport reaches the rank `peer`, whose host identity is
     *  `peer_host` (this rank's is env->host) and whose address blob is
     *  addr; else 0 with the reason in `why`. Must give the same answer
     *  on both sides of a pair: both pick a transport without talking. */
    int (*reachable)(void *ctx, int peer, const char *peer_host,
                     const void *addr, size_t addr_len, char *why,
                     size_t why_len);
    /** Optional (NULL: the core waits for this transport in epoll only).
     *  For a thread that polls instead of sleeping (a blocking call's
     *  spin): one look at every connection, taking what arrived and
     *  sending what waits, with upcalls as from the event loop. `flags`:
     *  0 or TNT_POLL_ARM (see TNT_TP_POLL_UNARMS). Returns 0 or more
     *  after a look, negative without looking when a look costs more
     *  than one epoll_wait (too many connections). */
    int (*poll)(void *ctx, unsigned flags);
    /** Optional (NULL: no options). Set option TNT_TP_OPT_* for this
     *  context; TNT_ERR_UNSUPPORTED (with no error recorded) for an
     *  option the transport does not have. */
    tnt_result_t (*set_option)(void *ctx, int option, const void *value,
                               size_t len);
    /** Optional (NULL: none). Memory that the pair of endpoint `ep`
     *  shares, for the core's on-host algorithms: area TNT_TP_AREA_*;
     *  *mine is this rank's side (it writes it), *theirs the peer's (it
     *  reads it, and must treat every byte as untrusted), *len the bytes
     *  of one side (env->pair_area_bytes[area]; version 2: the fixed
     *  5 pages of the slots, 257 of the staging areas). Stays valid
     *  until the endpoint is closed.
     *  TNT_ERR_UNSUPPORTED (no error recorded) for an area it lacks. */
    tnt_result_t (*pair_area)(void *ctx, void *ep, int area, void **mine,
                              const void **theirs, size_t *len);
    /** Optional, with pair_area: after writing to a pair area, wake the
     *  peer if it sleeps; a system call only when it does. */
    void (*pair_notify)(void *ctx, void *ep);
    /** Optional (NULL, or absent from a shorter table: the transport
     *  does not report, and tnt_comm_stats says so with zeros). Fill
     *  the counters of this context that only the transport sees; the
     *  core sets out->size and zeroes *out first, and a transport writes
     *  only the fields that out->size covers (TNT_TRANSPORT_HAS). */
    void (*stats)(void *ctx, struct tnt_transport_stats *out);

    /* ---- version 4 ---- */
    /** How many sets of pair areas each pair has (0 or 1: one, context 0,
     *  which pair_area hands out). The core gives every live
     *  communicator that shares this transport's connections a context
     *  of its own, a number below this one that both ranks of a pair
     *  agree on, so that the on-host algorithms of two communicators
     *  never meet in one area (each keeps its own slot numbering and
     *  staging rounds). Every context's areas start zeroed. */
    unsigned pair_area_contexts;
    /** Optional, with pair_area (NULL: context 0 only): pair_area for
     *  the set `context` (< pair_area_contexts); context 0 is
     *  pair_area's. TNT_ERR_UNSUPPORTED (no error recorded) for an area
     *  or a context it lacks. */
    tnt_result_t (*pair_area_at)(void *ctx, void *ep, unsigned context,
                                 int area, void **mine, const void **theirs,
                                 size_t *len);
    /** With pair_area_at: zero this rank's side (mine) of every area of
     *  `context` on the pair of `ep`, and give its memory back. The core
     *  calls it before it hands a context whose last communicator is
     *  freed to a new one, and before the peer can read that side for
     *  the new one (each rank clears its own side). */
    void (*pair_area_clear)(void *ctx, void *ep, unsigned context);
} tnt_transport_t;
/** Bytes of a version-1 table (every field up to finalize). */
#define TNT_TRANSPORT_V1_SIZE offsetof(tnt_transport_t, preference)
/** Bytes of a version-3 table (every field up to stats). */
#define TNT_TRANSPORT_V3_SIZE offsetof(tnt_transport_t, pair_area_contexts)

/** The symbols a transport plugin exports (a tnt_transport_t each). */
#define TNT_TRANSPORT_PLUGIN_SYMBOL "tnt_transport_plugin_v4"
#define TNT_TRANSPORT_PLUGIN_SYMBOL_V3 "tnt_transport_plugin_v3"
#define TNT_TRANSPORT_PLUGIN_SYMBOL_V2 "tnt_transport_plugin_v2"
#define TNT_TRANSPORT_PLUGIN_SYMBOL_V1 "tnt_transport_plugin_v1"

#ifdef __cplusplus
}
#endif

#endif /* TNT_TRANSPORT_H */
