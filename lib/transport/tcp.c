/*
 * The TCP transport: nonblocking sockets driven by the core's epoll.
 *
 * Wire: a connection starts with a hello from the connecting (lower) rank
 * that names the job, the communicator and both ranks; after it, every
 * message is a frame {magic, header length, payload length}, the core's
 * header, and the payload. Frame, header and payload leave in one
 * sendmsg. Small messages are read through a 64 KiB staging buffer (one
 * recv often brings several); a large payload is received straight into
 * its destination. Everything read from a socket is untrusted: lengths
 * are checked before use, and a bad hello closes that connection only.
 *
 * Prefix: tcp_. Upcalls are made only from fd callbacks; after each one
 * the endpoint may have been closed by the core, which every caller
 * checks (ep->closed) before touching the socket again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/error.h"
#include "core/param.h"
#include "core/sockaddr.h"
#include "transport/transport.h"

#define TCP_FRAME_MAGIC 0x46544e54u /* "TNTF" */
#define TCP_HELLO_MAGIC 0x48544e54u /* "TNTH" */
#define TCP_PROTO_VERSION 1u
#define TCP_HDR_MAX 256
#define TCP_RBUF_SIZE (64 * 1024)
/* Remaining payloads at least this large skip the staging buffer. */
#define TCP_DIRECT_MIN (16 * 1024)
/* Reads per callback before giving other sockets a turn. */
#define TCP_READ_BUDGET 64

typedef struct tcp_frame {
    uint32_t magic;
    uint32_t hdr_len;
    uint64_t payload_len;
} tcp_frame_t;

typedef struct tcp_hello {
    uint32_t magic;
    uint32_t version;
    uint64_t job_id;
    uint32_t comm_id;
    int32_t from;
    int32_t to;
    uint32_t reserved;
} tcp_hello_t;

enum tcp_state { TCP_CONNECTING, TCP_HELLO_IN, TCP_READY };

typedef struct tcp_sreq {
    struct tcp_sreq *next;
    tcp_frame_t frame;
    int raw;          /* hello: bytes only, no frame */
    const void *hdr;
    size_t hdr_len;
    const void *payload;
    size_t len;
    size_t done;      /* bytes of frame+hdr+payload already written */
    void *cookie;
} tcp_sreq_t;

typedef struct tcp_ctx tcp_ctx_t;

typedef struct tcp_ep {
    tcp_ctx_t *ctx;
    int fd;
    int peer;         /* -1 until the hello names it */
    int state;
    int closed;
    int announced;    /* on_connected was called */
    uint32_t events;
    tcp_sreq_t *sq_head, *sq_tail;
    unsigned char *rbuf;
    size_t rstart, rend;
    int in_payload;
    unsigned char *dest;
    size_t left;
    void *cookie;
    tcp_hello_t hello;
    char name[64];    /* remote address, for messages */
    struct tcp_ep *next;
} tcp_ep_t;

struct tcp_ctx {
    tnt_transport_env_v1_t env;
    int listen_fd;
    size_t sockbuf;
    tcp_ep_t *eps;        /* open endpoints */
    tcp_ep_t *graveyard;  /* closed, freed at the next callback */
    tcp_sreq_t *free_sreqs;
};

/* ---- small helpers ------------------------------------------------- */

static void tcp_free_graveyard(tcp_ctx_t *ctx)
{
    while (ctx->graveyard) {
        tcp_ep_t *ep = ctx->graveyard;
        ctx->graveyard = ep->next;
        free(ep->rbuf);
        free(ep);
    }
}

static tcp_sreq_t *tcp_sreq_get(tcp_ctx_t *ctx)
{
    tcp_sreq_t *r = ctx->free_sreqs;
    if (r) {
        ctx->free_sreqs = r->next;
        memset(r, 0, sizeof(*r));
        return r;
    }
    return calloc(1, sizeof(*r));
}

static void tcp_sreq_put(tcp_ctx_t *ctx, tcp_sreq_t *r)
{
    r->next = ctx->free_sreqs;
    ctx->free_sreqs = r;
}

static void tcp_set_events(tcp_ep_t *ep, uint32_t events);
static void tcp_ep_cb(void *arg, uint32_t events);

static void tcp_close(void *vctx, void *vep)
{
    tcp_ctx_t *ctx = vctx;
    tcp_ep_t *ep = vep;
    if (!ep || ep->closed)
        return;
    ep->closed = 1;
    ctx->env.unwatch_fd(ctx->env.core, ep->fd);
    close(ep->fd);
    while (ep->sq_head) {
        tcp_sreq_t *r = ep->sq_head;
        ep->sq_head = r->next;
        tcp_sreq_put(ctx, r);
    }
    ep->sq_tail = NULL;
    for (tcp_ep_t **pp = &ctx->eps; *pp; pp = &(*pp)->next)
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    ep->next = ctx->graveyard;
    ctx->graveyard = ep;
}

/* Close and tell the core, if the core knows this endpoint. */
static void tcp_fail(tcp_ep_t *ep, tnt_result_t err, const char *what)
{
    tcp_ctx_t *ctx = ep->ctx;
    int peer = ep->announced || ep->state == TCP_CONNECTING ? ep->peer : -1;
    if (peer < 0)
        ctx->env.log(ctx->env.core, TNT_LOG_WARNING, "rank %d: dropped "
                     "connection from %s: %s", ctx->env.rank, ep->name, what);
    tcp_close(ctx, ep);
    if (peer >= 0)
        ctx->env.on_peer_error(ctx->env.core, peer, err, what);
}

static void tcp_tune_socket(tcp_ctx_t *ctx, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* Setting buffer sizes turns off the kernel's autotuning (and is
     * capped by net.core.[rw]mem_max), so only do it when asked. */
    if (ctx->sockbuf) {
        int b = ctx->sockbuf > (size_t)1 << 30 ? 1 << 30 : (int)ctx->sockbuf;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
    }
}

static tcp_ep_t *tcp_ep_new(tcp_ctx_t *ctx, int fd, int peer, int state)
{
    tcp_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return NULL;
    ep->rbuf = malloc(TCP_RBUF_SIZE);
    if (!ep->rbuf) {
        free(ep);
        return NULL;
    }
    ep->ctx = ctx;
    ep->fd = fd;
    ep->peer = peer;
    ep->state = state;
    ep->events = TNT_FD_READ | (state == TCP_CONNECTING ? TNT_FD_WRITE : 0);
    if (ctx->env.watch_fd(ctx->env.core, fd, ep->events, tcp_ep_cb, ep) < 0) {
        free(ep->rbuf);
        free(ep);
        return NULL;
    }
    ep->next = ctx->eps;
    ctx->eps = ep;
    return ep;
}

static void tcp_set_events(tcp_ep_t *ep, uint32_t events)
{
    if (ep->closed || ep->events == events)
        return;
    ep->events = events;
    tcp_ctx_t *ctx = ep->ctx;
    ctx->env.modify_fd(ctx->env.core, ep->fd, events, tcp_ep_cb, ep);
}

/* ---- sending ------------------------------------------------------- */

/* The unsent part of r as at most three iovecs. */
static int tcp_sreq_iov(const tcp_sreq_t *r, struct iovec *iov)
{
    const void *base[3] = {&r->frame, r->hdr, r->payload};
    size_t len[3] = {sizeof(r->frame), r->hdr_len, r->len};
    int first = r->raw ? 1 : 0, n = 0;
    size_t skip = r->done;
    for (int i = first; i < 3; i++) {
        if (skip >= len[i]) {
            skip -= len[i];
            continue;
        }
        iov[n].iov_base = (char *)(uintptr_t)base[i] + skip;
        iov[n].iov_len = len[i] - skip;
        skip = 0;
        n++;
    }
    return n;
}

static size_t tcp_sreq_total(const tcp_sreq_t *r)
{
    return (r->raw ? 0 : sizeof(r->frame)) + r->hdr_len + r->len;
}

/* Write as much of r as the socket takes: 1 done, 0 would block, -1 err. */
static int tcp_write(tcp_ep_t *ep, tcp_sreq_t *r)
{
    for (;;) {
        struct iovec iov[3];
        struct msghdr msg = {.msg_iov = iov};
        msg.msg_iovlen = (size_t)tcp_sreq_iov(r, iov);
        if (msg.msg_iovlen == 0)
            return 1;
        ssize_t n = sendmsg(ep->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        r->done += (size_t)n;
        if (r->done == tcp_sreq_total(r))
            return 1;
    }
}

static void tcp_flush(tcp_ep_t *ep)
{
    tcp_ctx_t *ctx = ep->ctx;
    while (ep->sq_head && !ep->closed) {
        tcp_sreq_t *r = ep->sq_head;
        int w = tcp_write(ep, r);
        if (w < 0) {
            tcp_fail(ep, TNT_ERR_PEER_LOST, strerror(errno));
            return;
        }
        if (w == 0)
            break;
        ep->sq_head = r->next;
        if (!ep->sq_head)
            ep->sq_tail = NULL;
        void *cookie = r->cookie;
        int notify = !r->raw;
        tcp_sreq_put(ctx, r);
        if (notify)
            ctx->env.on_send_done(ctx->env.core, cookie);
    }
    if (!ep->closed)
        tcp_set_events(ep, TNT_FD_READ | (ep->sq_head ? TNT_FD_WRITE : 0));
}

static void tcp_enqueue(tcp_ep_t *ep, tcp_sreq_t *r)
{
    r->next = NULL;
    if (ep->sq_tail)
        ep->sq_tail->next = r;
    else
        ep->sq_head = r;
    ep->sq_tail = r;
    if (ep->state == TCP_READY)
        tcp_set_events(ep, TNT_FD_READ | TNT_FD_WRITE);
}

static tnt_result_t tcp_send(void *vctx, void *vep, const void *hdr,
                             size_t hdr_len, const void *payload, size_t len,
                             void *cookie)
{
    tcp_ctx_t *ctx = vctx;
    tcp_ep_t *ep = vep;
    if (!ep || ep->closed)
        return tnt__error(TNT_ERR_PEER_LOST, "send on a closed connection");
    if (hdr_len > TCP_HDR_MAX)
        return tnt__error(TNT_ERR_INVALID_ARG, "header of %zu bytes",
                          hdr_len);
    tcp_sreq_t local = {.frame = {TCP_FRAME_MAGIC, (uint32_t)hdr_len, len},
                        .hdr = hdr, .hdr_len = hdr_len, .payload = payload,
                        .len = len, .cookie = cookie};
    if (!ep->sq_head && ep->state == TCP_READY) {
        /* Fast path: most messages leave in this one sendmsg. */
        int w = tcp_write(ep, &local);
        if (w > 0)
            return TNT_SUCCESS;
        if (w < 0) {
            int e = errno;
            return tnt__error(TNT_ERR_PEER_LOST, "sendmsg to rank %d: %s",
                              ep->peer, strerror(e));
        }
    }
    tcp_sreq_t *r = tcp_sreq_get(ctx);
    if (!r)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a send");
    *r = local;
    tcp_enqueue(ep, r);
    return TNT_INPROGRESS;
}

/* ---- receiving ----------------------------------------------------- */

static int tcp_check_hello(tcp_ep_t *ep)
{
    tcp_ctx_t *ctx = ep->ctx;
    tcp_hello_t h;
    memcpy(&h, ep->rbuf + ep->rstart, sizeof(h));
    ep->rstart += sizeof(h);
    const char *why = NULL;
    if (h.magic != TCP_HELLO_MAGIC)
        why = "not a libtntcomm hello";
    else if (h.version != TCP_PROTO_VERSION)
        why = "wrong protocol version";
    else if (h.job_id != ctx->env.job_id)
        why = "hello from another job (wrong job key)";
    else if (h.comm_id != ctx->env.comm_id || h.to != ctx->env.rank)
        why = "hello for another communicator or rank";
    else if (h.from < 0 || h.from >= ctx->env.rank)
        why = "hello from a rank that may not connect here";
    if (why) {
        tcp_fail(ep, TNT_ERR_PROTOCOL, why);
        return -1;
    }
    ep->peer = h.from;
    ep->state = TCP_READY;
    ep->announced = 1;
    ctx->env.on_connected(ctx->env.core, ep->peer, ep);
    return ep->closed ? -1 : 0;
}

/* Parse a frame header from the staging buffer if it is all there:
 * 1 parsed, 0 need more bytes, -1 endpoint closed. */
static int tcp_parse_frame(tcp_ep_t *ep)
{
    tcp_ctx_t *ctx = ep->ctx;
    size_t avail = ep->rend - ep->rstart;
    tcp_frame_t f;
    if (avail < sizeof(f))
        return 0;
    memcpy(&f, ep->rbuf + ep->rstart, sizeof(f));
    if (f.magic != TCP_FRAME_MAGIC || f.hdr_len == 0 ||
        f.hdr_len > TCP_HDR_MAX || f.payload_len > SIZE_MAX) {
        tcp_fail(ep, TNT_ERR_PROTOCOL, "malformed frame");
        return -1;
    }
    if (avail < sizeof(f) + f.hdr_len)
        return 0;
    void *dest = NULL, *cookie = NULL;
    tnt_result_t rc = ctx->env.on_header(
        ctx->env.core, ep->peer, ep->rbuf + ep->rstart + sizeof(f),
        f.hdr_len, (size_t)f.payload_len, &dest, &cookie);
    if (ep->closed)
        return -1;
    if (rc < 0) {
        tcp_fail(ep, rc, tnt_last_error());
        return -1;
    }
    ep->rstart += sizeof(f) + f.hdr_len;
    ep->in_payload = 1;
    ep->dest = dest;
    ep->left = (size_t)f.payload_len;
    ep->cookie = cookie;
    return 1;
}

static void tcp_payload_done(tcp_ep_t *ep)
{
    tcp_ctx_t *ctx = ep->ctx;
    ep->in_payload = 0;
    ctx->env.on_payload(ctx->env.core, ep->peer, ep->cookie);
}

/* recv() into buf: bytes read (> 0), 0 if nothing is there now, -1 if
 * the connection ended (the endpoint is then closed and reported). */
static ssize_t tcp_recv(tcp_ep_t *ep, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = recv(ep->fd, buf, len, MSG_DONTWAIT);
        if (r > 0)
            return r;
        if (r == 0) {
            tcp_fail(ep, TNT_ERR_PEER_LOST,
                     ep->in_payload || ep->rend != ep->rstart
                         ? "connection closed in the middle of a message"
                         : "connection closed by peer");
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        tcp_fail(ep, TNT_ERR_PEER_LOST, strerror(errno));
        return -1;
    }
}

/* Consume staged bytes into the current payload; 1 if progress. */
static int tcp_drain_staged(tcp_ep_t *ep)
{
    size_t avail = ep->rend - ep->rstart;
    if (!avail && ep->left)
        return 0;
    size_t n = avail < ep->left ? avail : ep->left;
    if (n)
        memcpy(ep->dest, ep->rbuf + ep->rstart, n);
    ep->rstart += n;
    ep->dest += n;
    ep->left -= n;
    if (ep->left == 0)
        tcp_payload_done(ep);
    return 1;
}

static void tcp_read(tcp_ep_t *ep)
{
    /* The budget limits recv calls only: staged bytes are always parsed,
     * since epoll will not report them again. */
    int budget = TCP_READ_BUDGET;
    while (!ep->closed) {
        if (ep->state == TCP_HELLO_IN) {
            if (ep->rend - ep->rstart >= sizeof(tcp_hello_t)) {
                if (tcp_check_hello(ep) < 0)
                    return;
                continue;
            }
        } else if (ep->in_payload) {
            if (tcp_drain_staged(ep))
                continue;
            if (ep->left >= TCP_DIRECT_MIN) {
                /* Large remainder: straight into the destination. */
                if (budget-- == 0)
                    return;
                ssize_t r = tcp_recv(ep, ep->dest, ep->left);
                if (r <= 0)
                    return;
                ep->dest += r;
                ep->left -= (size_t)r;
                if (ep->left == 0)
                    tcp_payload_done(ep);
                continue;
            }
        } else {
            int p = tcp_parse_frame(ep);
            if (p < 0)
                return;
            if (p > 0)
                continue;
        }
        /* Need more bytes in the staging buffer. */
        if (ep->rstart == ep->rend) {
            ep->rstart = ep->rend = 0;
        } else if (ep->rstart > 0) {
            memmove(ep->rbuf, ep->rbuf + ep->rstart, ep->rend - ep->rstart);
            ep->rend -= ep->rstart;
            ep->rstart = 0;
        }
        if (budget-- == 0)
            return;
        ssize_t r = tcp_recv(ep, ep->rbuf + ep->rend,
                             TCP_RBUF_SIZE - ep->rend);
        if (r <= 0)
            return;
        ep->rend += (size_t)r;
    }
}

/* ---- connection management ----------------------------------------- */

static void tcp_ep_cb(void *arg, uint32_t events)
{
    tcp_ep_t *ep = arg;
    tcp_ctx_t *ctx = ep->ctx;
    tcp_free_graveyard(ctx);
    if (ep->state == TCP_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(ep->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err == 0 && !(events & TNT_FD_WRITE))
            return;
        if (err) {
            tcp_fail(ep, TNT_ERR_CONNECT, strerror(err));
            return;
        }
        ep->state = TCP_READY;
        ep->announced = 1;
        ctx->env.on_connected(ctx->env.core, ep->peer, ep);
        if (ep->closed)
            return;
        events |= TNT_FD_WRITE;
    }
    if (events & TNT_FD_WRITE)
        tcp_flush(ep);
    if (!ep->closed && (events & TNT_FD_READ))
        tcp_read(ep);
}

static void tcp_accept_cb(void *arg, uint32_t events)
{
    tcp_ctx_t *ctx = arg;
    (void)events;
    tcp_free_graveyard(ctx);
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(ctx->listen_fd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                ctx->env.log(ctx->env.core, TNT_LOG_WARNING, "rank %d: "
                             "accept: %s", ctx->env.rank, strerror(errno));
            return;
        }
        tcp_tune_socket(ctx, fd);
        tcp_ep_t *ep = tcp_ep_new(ctx, fd, -1, TCP_HELLO_IN);
        if (!ep) {
            close(fd);
            continue;
        }
        tnt__sockaddr_str((struct sockaddr *)&ss, ep->name, sizeof(ep->name));
    }
}

static tnt_result_t tcp_connect(void *vctx, int peer, const void *addr,
                                size_t addr_len)
{
    tcp_ctx_t *ctx = vctx;
    struct sockaddr_storage ss;
    socklen_t sslen;
    TNT_CHECK(tnt__addr_blob_decode(addr, addr_len, &ss, &sslen));
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "socket: %s", strerror(errno));
    tcp_tune_socket(ctx, fd);
    if (connect(fd, (struct sockaddr *)&ss, sslen) != 0 &&
        errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return tnt__error(TNT_ERR_CONNECT, "connect to rank %d: %s", peer,
                          strerror(e));
    }
    tcp_ep_t *ep = tcp_ep_new(ctx, fd, peer, TCP_CONNECTING);
    if (!ep) {
        close(fd);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for an "
                          "endpoint");
    }
    tnt__sockaddr_str((struct sockaddr *)&ss, ep->name, sizeof(ep->name));
    /* The hello goes first; sends queue behind it until connected. */
    ep->hello = (tcp_hello_t){TCP_HELLO_MAGIC, TCP_PROTO_VERSION,
                              ctx->env.job_id, ctx->env.comm_id,
                              ctx->env.rank, peer, 0};
    tcp_sreq_t *r = tcp_sreq_get(ctx);
    if (!r) {
        tcp_close(ctx, ep);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a hello");
    }
    r->raw = 1;
    r->hdr = &ep->hello;
    r->hdr_len = sizeof(ep->hello);
    tcp_enqueue(ep, r);
    return TNT_SUCCESS;
}

static tnt_result_t tcp_listen(void *vctx, void *addr, size_t *addr_len)
{
    tcp_ctx_t *ctx = vctx;
    struct sockaddr_storage ss;
    socklen_t sslen;
    TNT_CHECK(tnt__sockaddr_parse_ip(ctx->env.bind_ip, 0, &ss, &sslen));
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "socket: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        return tnt__error(TNT_ERR_SYSTEM, "rank %d: cannot listen on %s: %s",
                          ctx->env.rank, ctx->env.bind_ip, strerror(e));
    }
    sslen = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sslen);
    tnt_result_t rc = tnt__addr_blob_encode((struct sockaddr *)&ss, addr,
                                            addr_len);
    if (rc == TNT_SUCCESS)
        rc = ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ, tcp_accept_cb,
                               ctx);
    if (rc != TNT_SUCCESS) {
        close(fd);
        return rc;
    }
    ctx->listen_fd = fd;
    return TNT_SUCCESS;
}

static tnt_result_t tcp_init(const tnt_transport_env_v1_t *env, void **out)
{
    if (!env || env->size < sizeof(*env) || env->version < 1)
        return tnt__error(TNT_ERR_INVALID_ARG, "tcp: bad transport env");
    tcp_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return tnt__error(TNT_ERR_NO_MEMORY, "tcp: out of memory");
    ctx->env = *env;
    ctx->listen_fd = -1;
    const char *b = getenv("TNT_SOCKET_BUFFER");
    if (b && *b && tnt__parse_size("TNT_SOCKET_BUFFER", b, &ctx->sockbuf)) {
        free(ctx);
        return TNT_ERR_CONFIG;
    }
    *out = ctx;
    return TNT_SUCCESS;
}

static void tcp_finalize(void *vctx)
{
    tcp_ctx_t *ctx = vctx;
    if (!ctx)
        return;
    while (ctx->eps)
        tcp_close(ctx, ctx->eps);
    if (ctx->listen_fd >= 0) {
        ctx->env.unwatch_fd(ctx->env.core, ctx->listen_fd);
        close(ctx->listen_fd);
    }
    tcp_free_graveyard(ctx);
    while (ctx->free_sreqs) {
        tcp_sreq_t *r = ctx->free_sreqs;
        ctx->free_sreqs = r->next;
        free(r);
    }
    free(ctx);
}

const tnt_transport_v1_t tnt__tcp_transport = {
    .size = sizeof(tnt_transport_v1_t),
    .version = TNT_TRANSPORT_VERSION,
    .name = "tcp",
    .init = tcp_init,
    .listen = tcp_listen,
    .connect = tcp_connect,
    .send = tcp_send,
    .reg_mem = NULL,
    .dereg_mem = NULL,
    .close = tcp_close,
    .finalize = tcp_finalize,
};
