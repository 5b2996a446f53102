/*
 * Shared state of the TCP transport's two files: tcp.c (connections,
 * hello, lifecycle) and tcp_io.c (framing, send and receive paths).
 *
 * An endpoint (tcp_ep_t, what the core holds) is one peer; it owns
 * TNT_SOCKETS_PER_PEER sockets (tcp_conn_t). Each message travels whole on
 * one socket, the least loaded one, so large collectives split into
 * segments spread over parallel streams; the core matches by tag, so the
 * order across sockets does not matter.
 */
#ifndef TNT_TRANSPORT_TCP_TCP_INTERNAL_H
#define TNT_TRANSPORT_TCP_TCP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "transport/tcp/tcp_wire.h"
#include "tnt/transport.h"

/* Unauthenticated incoming sockets one rank keeps at once (each holds a
 * staging buffer; beyond it the oldest silent one is evicted), and how
 * long each may take to prove the job key. */
#define TCP_INCOMING_MAX 1024
#define TCP_HANDSHAKE_WAIT_S 10.0
#define TCP_RBUF_SIZE (64 * 1024)
/* Remaining payloads at least this large skip the staging buffer. */
#define TCP_DIRECT_MIN (16 * 1024)
/* recv calls per callback before giving other sockets a turn. */
#define TCP_READ_BUDGET 64

/* Connector: CONNECTING -> CHALLENGE_IN -> READY.
 * Acceptor: HELLO_IN -> PROOF_IN -> READY. */
enum tcp_state {
    TCP_CONNECTING,
    TCP_CHALLENGE_IN,
    TCP_HELLO_IN,
    TCP_PROOF_IN,
    TCP_READY
};

typedef struct tcp_sreq {
    struct tcp_sreq *next;
    tcp_frame_t frame;
    const void *hdr;
    size_t hdr_len;
    const void *payload;
    size_t len;
    size_t done;      /* bytes of frame+hdr+payload already written */
    void *cookie;
} tcp_sreq_t;

typedef struct tcp_ctx tcp_ctx_t;
typedef struct tcp_ep tcp_ep_t;

/* A socket the core closed that still writes its last bytes: the rest of
 * a frame it had begun and the failure notices queued behind (copies),
 * then reads until the peer closes (tcp_tail.c). It owns the descriptor;
 * the connection it came from is gone. */
typedef struct tcp_tail {
    struct tcp_tail *next;
    tcp_ctx_t *ctx;
    int fd;
    int shut;            /* all written and SHUT_WR sent */
    unsigned char *buf;
    size_t len, done;
    double until;        /* closed then at the latest */
} tcp_tail_t;

typedef struct tcp_conn {
    tcp_ctx_t *ctx;
    tcp_ep_t *ep;     /* NULL until an incoming hello names the peer */
    int fd;
    int state;
    int closed;
    /* The peer ended this socket's stream cleanly, between messages, while
     * other sockets of the pair were open: nothing more is read from it
     * and no send picks it; it writes what was queued on it, then closes
     * (tnt__tcp_end_of_stream). */
    int rd_ended;
    uint32_t events;
    tcp_sreq_t *sq_head, *sq_tail;
    size_t queued;    /* bytes waiting in sq */
    unsigned char *rbuf;
    size_t rstart, rend;
    int in_payload;
    unsigned char *dest;
    size_t left;
    void *cookie;
    /* Frame and header bytes of the last message with a payload if that
     * payload was large (>= TCP_DIRECT_MIN), else 0: the next read at a
     * frame boundary, or the second iovec of a large payload's read, asks
     * for just that many, since the next payload is then probably large
     * too and goes straight to its destination, not through rbuf
     * (tnt__tcp_read, recv_direct). */
    size_t next_hdr;
    /* A spinning thread's looks at this socket (tnt__tcp_poll): recvs
     * that returned bytes; the first look since then that moved nothing
     * (0: the last one moved bytes); no look before look_at. */
    unsigned long reads;
    double quiet_since, look_at;
    tcp_hello_t hello;   /* the handshake's, either side */
    unsigned char nonce[TCP_NONCE_BYTES]; /* the acceptor's */
    double born;         /* accepted at (tnt__now), for the time limit */
    int probe;           /* acceptor: a probe's hello (tcp_probe.c) */
    char name[64];    /* remote address, for messages */
    char ip[48];      /* acceptor: the remote IP (which ranks it may be) */
    struct tcp_conn *next; /* ctx's list of unidentified incoming conns */
} tcp_conn_t;

struct tcp_ep {
    tcp_ctx_t *ctx;
    int peer;
    int nconn;        /* sockets the pair uses */
    int nready;       /* of them connected (and identified) */
    int announced;    /* on_connected was called */
    int known;        /* the core asked for it or was given it */
    int closed;
    unsigned rr;      /* round-robin start for picking a socket */
    tcp_conn_t *conns[TCP_MAX_SOCKETS];
    struct tcp_ep *next; /* ctx's list, or graveyard */
};

struct tcp_ctx {
    tnt_transport_env_t env;
    int listen_fd;
    size_t sockbuf;
    double heartbeat_s;        /* TNT_HEARTBEAT; 0: off */
    int nsock;            /* TNT_SOCKETS_PER_PEER */
    tcp_ep_t *eps;        /* open endpoints */
    tcp_ep_t **accepting; /* by rank: endpoints being assembled */
    tcp_conn_t *incoming; /* accepted, handshake not finished */
    int nincoming;
    int incoming_cap;     /* TCP_INCOMING_MAX or less (incoming_cap()) */
    int timer_fd;         /* expires slow handshakes */
    /* Counters for the core (tcp_stats): unproven connections closed,
     * refused or evicted. */
    uint64_t strangers_refused, strangers_evicted;
    tcp_ep_t *graveyard;  /* closed endpoints, freed at the next callback */
    tcp_conn_t *conn_graveyard;
    tcp_sreq_t *free_sreqs;
    tcp_tail_t *tails;    /* closed sockets finishing their last frame */
    struct tcp_probe *probes; /* by rank, made at the first suspicion */
    int sweep_next;       /* round-robin start of the next sweep */
    int sweep_wanted;     /* a sweep waits for its gap */
    char sweep_ip[48];    /* of the last connection that set it */
    double sweep_last;
    unsigned closes;      /* conn_close and ep_close calls: the lists may
                             have changed (tnt__tcp_poll's guard) */
};

/* tcp_probe.c: proving that a rank which has not connected yet is gone.
 * Called from fd callbacks only (they may make upcalls). */
/* A connection that claimed to be from `rank` closed before its proof. */
void tnt__tcp_suspect(tcp_ctx_t *ctx, int rank);
/* A connection from `ip` closed before it said who it was. */
void tnt__tcp_suspect_ip(tcp_ctx_t *ctx, const char *ip);
/* Once a second (timer_cb): start the probes that waited for their gap. */
void tnt__tcp_probe_tick(tcp_ctx_t *ctx);
void tnt__tcp_probe_finalize(tcp_ctx_t *ctx);
/* Whether the pair with `rank` is connected or being assembled. */
int tnt__tcp_has_ep(const tcp_ctx_t *ctx, int rank);

/* How long a closing socket may take for its last bytes and the peer's
 * end: the background finish of a closed socket's frame (tcp_tail.c) and
 * the gentle close of finalize (linger_close) share it. */
#define TCP_LINGER_S 1.0

/* tcp_tail.c: finishing a closed socket's last frame. */
/* Called as the core closes c (its communicator failed): if c has a frame
 * partly written or notices queued, copy what is left of them, take over
 * the descriptor and return 1; else 0 (the caller closes it). */
int tnt__tcp_tail_keep(tcp_conn_t *c);
/* Once a second (timer_cb): close the tails past their time. */
void tnt__tcp_tail_tick(tcp_ctx_t *ctx, double now);
/* finalize: finish every tail, blocking, until `end` at the latest. */
void tnt__tcp_tail_finish(tcp_ctx_t *ctx, double end);

/* tcp.c */
void tnt__tcp_fail(tcp_conn_t *c, tnt_result_t err, const char *what);
/* The peer ended c's stream between two messages. */
void tnt__tcp_end_of_stream(tcp_conn_t *c);
/* c's read side ended (rd_ended) and its queue is empty: close it. */
void tnt__tcp_retire(tcp_conn_t *c);
int tnt__tcp_hello_in(tcp_conn_t *c);
int tnt__tcp_proof_in(tcp_conn_t *c);
void tnt__tcp_conn_cb(void *arg, uint32_t events);

/* tcp_io.c */
void tnt__tcp_set_events(tcp_conn_t *c, uint32_t events);
void tnt__tcp_enqueue(tcp_conn_t *c, tcp_sreq_t *r);
void tnt__tcp_flush(tcp_conn_t *c);
/** One non-blocking sendmsg of iov[0..n) on fd, retried on EINTR: the
 *  bytes the socket took (> 0), 0 if it would block, -1 on an error
 *  (errno set). */
ssize_t tnt__tcp_send_some(int fd, struct iovec *iov, int n);
void tnt__tcp_read(tcp_conn_t *c);
/* The poll entry (tnt_transport_t.poll), for a thread that polls instead
 * of sleeping: one look at every connected socket (send what waits, recv
 * what arrived) instead of an epoll_wait before the recv. Returns the
 * sockets looked at, or -1 without looking when there are more than a few
 * (then one epoll_wait is cheaper); TNT_POLL_ARM: nothing to do. */
int tnt__tcp_poll(void *vctx, unsigned flags);
tcp_sreq_t *tnt__tcp_sreq_get(tcp_ctx_t *ctx);
/* The bytes of r not yet written; copied to out unless it is NULL. */
size_t tnt__tcp_sreq_rest(const tcp_sreq_t *r, unsigned char *out);
void tnt__tcp_sreq_put(tcp_ctx_t *ctx, tcp_sreq_t *r);
tnt_result_t tnt__tcp_send(void *vctx, void *vep, const void *hdr,
                           size_t hdr_len, const void *payload, size_t len,
                           void *cookie);

#endif /* TNT_TRANSPORT_TCP_TCP_INTERNAL_H */
