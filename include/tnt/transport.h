/*
 * The transport interface: one versioned table of functions that TCP,
 * shared memory and RDMA verbs all fill in, built-in or loaded as a plugin.
 * The core cannot tell them apart.
 *
 * Model (active messages): the core sends a message as an opaque header of
 * `hdr_len` bytes plus a payload. On the receiving side the transport hands
 * the header to the core (on_header), which says where the payload must go,
 * and reports when the payload has landed there (on_payload). Matching,
 * signatures and buffering of early messages live in the core, once.
 *
 * Threading: the core calls every function with its communicator lock
 * held, and the transport calls the upcalls only from inside fd callbacks
 * (never from inside a downcall), so transports need no locks of their own.
 */
#ifndef TNT_TRANSPORT_H
#define TNT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/tnt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TNT_TRANSPORT_VERSION 1
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

/** What the core gives a transport at init: identity, services, upcalls. */
typedef struct tnt_transport_env_v1 {
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
} tnt_transport_env_v1_t;

typedef struct tnt_transport_v1 {
    size_t size;
    uint32_t version;
    const char *name;
    /** Create the transport's context for one communicator. */
    tnt_result_t (*init)(const tnt_transport_env_v1_t *env, void **ctx);
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
    /** Optional memory registration hooks (NULL when not needed). */
    tnt_result_t (*reg_mem)(void *ctx, void *ptr, size_t len, void **handle);
    void (*dereg_mem)(void *ctx, void *handle);
    /** Close one endpoint; no upcalls for it afterwards. */
    void (*close)(void *ctx, void *ep);
    /** Close everything and free the context. */
    void (*finalize)(void *ctx);
} tnt_transport_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* TNT_TRANSPORT_H */
