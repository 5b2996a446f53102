/*
 * The TCP transport: connections and lifecycle (the data path is in
 * tcp_io.c). Nonblocking sockets driven by the core's epoll.
 *
 * The lower rank of a pair opens TNT_SOCKETS_PER_PEER sockets to the
 * higher one; each starts with a handshake (tcp_wire.h) naming job,
 * communicator, both ranks and the socket's index, in which both sides
 * prove the job key. The accepting side assembles the authenticated
 * sockets of a pair into one endpoint and hands it to the core once all
 * are there. A socket that fails the handshake (garbage, another protocol
 * version, another key, a replay, silence for TCP_HANDSHAKE_WAIT_S) is
 * closed and logged at WARNING with its address; the job goes on.
 *
 * Closed endpoints are freed at the start of the next callback, never
 * while a callback that may still touch them is running.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/param_table.h"
#include "util/sockaddr.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/transport.h"

/* TNT_SOCKETS_PER_PEER's range in the table of variables is 1..16. */
_Static_assert(TCP_MAX_SOCKETS == 16,
               "update TNT_SOCKETS_PER_PEER's range in util/param_table.h");

/* ---- freeing and closing ------------------------------------------ */

static void conn_free(tcp_conn_t *c)
{
    free(c->rbuf);
    free(c);
}

static void free_graveyards(tcp_ctx_t *ctx)
{
    while (ctx->graveyard) {
        tcp_ep_t *ep = ctx->graveyard;
        ctx->graveyard = ep->next;
        for (int i = 0; i < TCP_MAX_SOCKETS; i++)
            if (ep->conns[i])
                conn_free(ep->conns[i]);
        free(ep);
    }
    while (ctx->conn_graveyard) {
        tcp_conn_t *c = ctx->conn_graveyard;
        ctx->conn_graveyard = c->next;
        conn_free(c);
    }
}

static void unlink_incoming(tcp_ctx_t *ctx, tcp_conn_t *c)
{
    for (tcp_conn_t **pp = &ctx->incoming; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            ctx->nincoming--;
            return;
        }
}

/* Close the socket; its memory goes with its endpoint, or to the conn
 * graveyard if it never got one. `finish`: the core closes it (its
 * communicator failed), so a frame it had begun and the notices behind
 * it are finished first, in the background (tcp_tail.c). */
static void conn_close_how(tcp_ctx_t *ctx, tcp_conn_t *c, int finish)
{
    ctx->closes++;
    if (c->closed)
        return;
    c->closed = 1;
    if (!finish || c->state != TCP_READY || !tnt__tcp_tail_keep(c)) {
        ctx->env.unwatch_fd(ctx->env.core, c->fd);
        /* close() with unread data sends a reset, which can destroy what
         * was just written (a failure notice) before the peer reads it:
         * read off what is already here first (bounded). */
        char sink[4096];
        for (int i = 0; i < 256; i++)
            if (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
                break;
        close(c->fd);
    }
    while (c->sq_head) {
        tcp_sreq_t *r = c->sq_head;
        c->sq_head = r->next;
        tnt__tcp_sreq_put(ctx, r);
    }
    c->sq_tail = NULL;
    c->queued = 0;
    if (!c->ep) {
        unlink_incoming(ctx, c);
        c->next = ctx->conn_graveyard;
        ctx->conn_graveyard = c;
    }
}

static void conn_close(tcp_ctx_t *ctx, tcp_conn_t *c)
{
    conn_close_how(ctx, c, 0);
}

static void ep_close_how(tcp_ctx_t *ctx, tcp_ep_t *ep, int finish)
{
    if (!ep || ep->closed)
        return;
    ep->closed = 1;
    ctx->closes++; /* also when it has no socket yet: the list changes */
    for (int i = 0; i < TCP_MAX_SOCKETS; i++)
        if (ep->conns[i])
            conn_close_how(ctx, ep->conns[i], finish);
    if (ctx->accepting && ctx->accepting[ep->peer] == ep)
        ctx->accepting[ep->peer] = NULL;
    for (tcp_ep_t **pp = &ctx->eps; *pp; pp = &(*pp)->next)
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    ep->next = ctx->graveyard;
    ctx->graveyard = ep;
}

/* The transport's own closes: the connection failed, or finalize. */
static void ep_close(void *vctx, void *vep)
{
    ep_close_how(vctx, vep, 0);
}

/* The core's close (tnt_transport_t.close, TNT_TP_CLOSE_FINISHES): the
 * sockets finish the frame they had begun and the notices queued, in the
 * background, without upcalls. */
static void ep_close_by_core(void *vctx, void *vep)
{
    ep_close_how(vctx, vep, 1);
}

void tnt__tcp_fail(tcp_conn_t *c, tnt_result_t err, const char *what)
{
    tcp_ctx_t *ctx = c->ctx;
    tcp_ep_t *ep = c->ep;
    /* The core knows an endpoint it asked for (connect) or was given
     * (announced); anything else is a stranger and is only logged. */
    if (!ep || !ep->known) {
        if (c->probe) { /* a peer asked whether this rank lives: it does */
            conn_close(ctx, c);
            return;
        }
        ctx->env.log(ctx->env.core, TNT_LOG_WARNING | TNT_LOG_EVERY_RANK,
                     "rank %d: dropped connection from %s: %s",
                     ctx->env.rank, c->name, what);
        /* A close before the proof may be a rank dying in its handshake:
         * ask that rank's port (tcp_probe.c). Garbage suspects nobody. */
        int suspect = err != TNT_ERR_PEER_LOST ? -2
                      : ep                     ? ep->peer
                      : c->state == TCP_PROOF_IN ? c->hello.from
                                                 : -1;
        char ip[sizeof(c->ip)];
        memcpy(ip, c->ip, sizeof(ip));
        if (ep)
            ep_close(ctx, ep);
        else
            conn_close(ctx, c);
        if (suspect >= 0)
            tnt__tcp_suspect(ctx, suspect);
        else if (suspect == -1)
            tnt__tcp_suspect_ip(ctx, ip);
        return;
    }
    int peer = ep->peer;
    ep_close(ctx, ep);
    ctx->env.on_peer_error(ctx->env.core, peer, err, what);
}

/* A peer ends its sockets one by one (the gentle close of tnt_comm_free,
 * linger_close; a failing core's close, where the socket carrying its
 * failure notice ends last, tcp_tail.c), and each of them may still hold
 * the peer's last message behind an end already seen on another: a
 * message travels whole on one socket, and the sockets are read in any
 * order. So an end between messages while another socket of the pair is
 * open retires that socket only (what this side had queued on it is
 * still written: the peer reads until this side ends too); the peer is
 * lost when the last of its sockets ends. An end in the middle of a
 * message, an error, or an end before the pair was complete still loses
 * the peer at once, so a rank that dies (all its sockets end together)
 * is reported as soon as before. */
void tnt__tcp_end_of_stream(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    int open = 0;
    if (ep && ep->known && !ep->closed && ep->nready == ep->nconn)
        for (int i = 0; i < ep->nconn; i++) {
            const tcp_conn_t *o = ep->conns[i];
            if (o && o != c && !o->closed && !o->rd_ended)
                open++;
        }
    if (!open) {
        tnt__tcp_fail(c, TNT_ERR_PEER_LOST, "connection closed by peer");
        return;
    }
    c->rd_ended = 1;
    if (c->sq_head)
        tnt__tcp_set_events(c, TNT_FD_WRITE);
    else
        tnt__tcp_retire(c);
}

void tnt__tcp_retire(tcp_conn_t *c)
{
    /* The stream was read to its end: close() sends no reset. */
    conn_close(c->ctx, c);
}

/* ---- sockets ------------------------------------------------------- */

/* The largest segment TCP_MAXSEG takes (the kernel's MAX_TCP_WINDOW), and
 * the share of the receive buffer one segment may fill (see size_socket). */
#define TCP_MAXSEG_MAX 32767
#define TCP_SEGS_PER_RCVBUF 8

/* TNT_SOCKET_BUFFER: SO_SNDBUF and SO_RCVBUF, and a segment size that
 * keeps a stream moving through a buffer that small. Setting buffer sizes
 * turns off the kernel's autotuning (and is capped by net.core.[rw]mem_max),
 * so only when asked.
 *
 * A fixed receive buffer fixes the receive window for the connection's
 * life: about the buffer times the ratio of payload to memory of the
 * segments received, a quarter of it or less for small segments. The
 * sender sends only whole segments into the window, and chose its segment
 * size at the handshake from the path (64 KiB on loopback) and half the
 * largest window it saw. A window smaller than one segment leaves every
 * segment to the zero-window probe, one every 200 ms or more: a stream of
 * 2.5 KB/s at the kernel's smallest buffer, and a 100,000-float allreduce
 * that never finished in time (issue 34). So the segment is capped
 * (TCP_MAXSEG) at an eighth of the receive buffer the kernel granted
 * (read back: it doubles the request, raises it to its floor and caps
 * it), where a window of 2 to 4 segments stays open; a quarter still
 * stalled at the floor. Nothing changes where that is above the largest
 * segment the option takes. The accepting side gets all of this from the
 * listener (tcp_listen): the window and segment size it offers are fixed
 * in its reply to the connection, before accept returns. */
static void size_socket(tcp_ctx_t *ctx, int fd)
{
    if (!ctx->sockbuf)
        return;
    int b = ctx->sockbuf > (size_t)1 << 30 ? 1 << 30 : (int)ctx->sockbuf;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
    int rcv = 0;
    socklen_t len = sizeof(rcv);
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len) != 0 || rcv <= 0)
        return;
    int seg = rcv / TCP_SEGS_PER_RCVBUF;
    if (seg < TCP_MAXSEG_MAX)
        setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &seg, sizeof(seg));
}

static void tune_socket(tcp_ctx_t *ctx, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    size_socket(ctx, fd);
    /* A peer that goes silent without closing (link down, host gone) would
     * otherwise only show at TNT_TIMEOUT: the kernel finds it, at no CPU
     * cost here. */
    tnt__sock_heartbeat(fd, ctx->heartbeat_s);
}

static tcp_conn_t *conn_new(tcp_ctx_t *ctx, int fd, int state, tcp_ep_t *ep)
{
    tcp_conn_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->rbuf = malloc(TCP_RBUF_SIZE);
    if (!c->rbuf) {
        free(c);
        return NULL;
    }
    c->ctx = ctx;
    c->ep = ep;
    c->fd = fd;
    c->state = state;
    c->events = TNT_FD_READ | (state == TCP_CONNECTING ? TNT_FD_WRITE : 0);
    if (ctx->env.watch_fd(ctx->env.core, fd, c->events, tnt__tcp_conn_cb,
                          c) < 0) {
        conn_free(c);
        return NULL;
    }
    return c;
}

static void announce(tcp_ctx_t *ctx, tcp_ep_t *ep)
{
    ep->announced = 1;
    ep->known = 1;
    ctx->env.on_connected(ctx->env.core, ep->peer, ep);
}

/* ---- handshake ---------------------------------------------------- */

/* Handshake messages are a few dozen bytes written on a socket that has
 * sent nothing else yet, so its send buffer always takes them whole. */
static int hs_send(tcp_conn_t *c, const void *buf, size_t len)
{
    ssize_t n;
    do
        n = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)len ? 0 : -1;
}

static void close_stranger(tcp_conn_t *c, const char *why)
{
    tcp_ctx_t *ctx = c->ctx;
    ctx->env.log(ctx->env.core, TNT_LOG_WARNING | TNT_LOG_EVERY_RANK,
                 "rank %d: dropped connection from %s: %s", ctx->env.rank,
                 c->name, why);
    conn_close(ctx, c);
}

static void drop_stranger(tcp_conn_t *c, const char *why)
{
    c->ctx->strangers_refused++;
    close_stranger(c, why);
}

/* Acceptor: a whole hello is staged. Answer with the challenge. */
int tnt__tcp_hello_in(tcp_conn_t *c)
{
    tcp_ctx_t *ctx = c->ctx;
    tcp_expect_t e = {ctx->env.job_id, ctx->env.comm_id, ctx->env.rank,
                      ctx->nsock};
    const char *why = tnt__tcp_hello_parse(c->rbuf + c->rstart,
                                           sizeof(tcp_hello_t), &e,
                                           &c->hello);
    int gone = 0;
    c->rstart += sizeof(tcp_hello_t);
    if (!why) {
        tcp_challenge_t ch;
        memset(&ch, 0, sizeof(ch));
        ch.magic = TCP_CHAL_MAGIC;
        ch.version = TCP_PROTO_VERSION;
        ctx->env.random_bytes(ctx->env.core, c->nonce, sizeof(c->nonce));
        memcpy(ch.nonce, c->nonce, sizeof(ch.nonce));
        unsigned char in[TCP_AUTH_INPUT_MAX];
        size_t n = tnt__tcp_auth_input(0, &c->hello, c->nonce, in);
        ctx->env.auth_mac(ctx->env.core, in, n, ch.mac);
        if (hs_send(c, &ch, sizeof(ch)) != 0) {
            why = "could not send the challenge";
            gone = c->hello.magic == TCP_HELLO_MAGIC;
        }
    }
    if (why) {
        int from = c->hello.from;
        drop_stranger(c, why);
        if (gone) /* closed after its hello: see tnt__tcp_fail */
            tnt__tcp_suspect(ctx, from);
        return -1;
    }
    c->probe = c->hello.magic == TCP_PROBE_MAGIC;
    c->state = TCP_PROOF_IN;
    return 0;
}

/* Acceptor: a whole proof is staged. Only a connection that passes it
 * joins an endpoint; until then it has touched no shared state. */
int tnt__tcp_proof_in(tcp_conn_t *c)
{
    tcp_ctx_t *ctx = c->ctx;
    if (c->probe) { /* a probe sends nothing after its hello */
        conn_close(ctx, c);
        return -1;
    }
    tcp_proof_t pr;
    const char *why = tnt__tcp_proof_parse(c->rbuf + c->rstart,
                                           sizeof(pr), &pr);
    c->rstart += sizeof(pr);
    unsigned char in[TCP_AUTH_INPUT_MAX];
    size_t n = tnt__tcp_auth_input(1, &c->hello, c->nonce, in);
    if (!why && !ctx->env.auth_verify(ctx->env.core, in, n, pr.mac))
        why = "authentication failed (wrong job key, or a replay)";
    const tcp_hello_t *h = &c->hello;
    tcp_ep_t *ep = why ? NULL : ctx->accepting[h->from];
    if (!why && !ep) {
        for (tcp_ep_t *e = ctx->eps; e; e = e->next)
            if (e->peer == h->from)
                why = "second connection from a rank already connected";
        if (!why) {
            ep = calloc(1, sizeof(*ep));
            if (!ep)
                why = "out of memory";
        }
        if (ep) {
            ep->ctx = ctx;
            ep->peer = h->from;
            ep->nconn = h->count;
            ctx->accepting[h->from] = ep;
        }
    }
    if (!why && ep->conns[h->index])
        why = "duplicate socket index";
    if (why) {
        drop_stranger(c, why);
        return -1;
    }
    unlink_incoming(ctx, c);
    c->ep = ep;
    c->state = TCP_READY;
    ep->conns[h->index] = c;
    if (++ep->nready == ep->nconn) {
        ctx->accepting[ep->peer] = NULL;
        ep->next = ctx->eps;
        ctx->eps = ep;
        announce(ctx, ep);
    }
    return c->closed ? -1 : 0;
}

/* Connector: advance the handshake. 1 when it is done (READY), 0 to
 * wait for more, -1 on failure (*why says what), -2 when the peer went
 * away (its published port refuses, or it closes or resets the
 * connection during the handshake: a failed or exiting rank does that,
 * and the core calls it lost, not a failure to connect). No upcalls. */
static int connector_step(tcp_conn_t *c, uint32_t events, const char **why)
{
    tcp_ctx_t *ctx = c->ctx;
    if (c->state == TCP_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err) {
            *why = strerror(err);
            return err == ECONNREFUSED || err == ECONNRESET ? -2 : -1;
        }
        if (!(events & TNT_FD_WRITE))
            return 0;
        if (hs_send(c, &c->hello, sizeof(c->hello)) != 0) {
            *why = "could not send the hello";
            return -1;
        }
        c->state = TCP_CHALLENGE_IN;
        return 0;
    }
    /* Read exactly the challenge: what follows is the acceptor's data. */
    size_t need = sizeof(tcp_challenge_t);
    ssize_t r = recv(c->fd, c->rbuf + c->rend, need - c->rend, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR)) {
        int gone = r == 0 || errno == ECONNRESET;
        *why = r == 0 ? "connection closed during the handshake (does the "
                        "peer have the same TNT_JOB_KEY?)"
                      : strerror(errno);
        return gone ? -2 : -1;
    }
    if (r < 0)
        return 0;
    c->rend += (size_t)r;
    if (c->rend < need)
        return 0;
    tcp_challenge_t ch;
    *why = tnt__tcp_challenge_parse(c->rbuf, need, &ch);
    c->rstart = c->rend = 0;
    if (*why)
        return -1;
    unsigned char in[TCP_AUTH_INPUT_MAX];
    size_t n = tnt__tcp_auth_input(0, &c->hello, ch.nonce, in);
    if (!ctx->env.auth_verify(ctx->env.core, in, n, ch.mac)) {
        *why = "the peer failed to prove the job key (a stranger on its "
               "port, or another TNT_JOB_KEY)";
        return -1;
    }
    tcp_proof_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.magic = TCP_PROOF_MAGIC;
    pr.version = TCP_PROTO_VERSION;
    n = tnt__tcp_auth_input(1, &c->hello, ch.nonce, in);
    ctx->env.auth_mac(ctx->env.core, in, n, pr.mac);
    if (hs_send(c, &pr, sizeof(pr)) != 0) {
        *why = "could not send the proof";
        return -1;
    }
    c->state = TCP_READY;
    return 1;
}

/* ---- callbacks ----------------------------------------------------- */

void tnt__tcp_conn_cb(void *arg, uint32_t events)
{
    tcp_conn_t *c = arg;
    tcp_ctx_t *ctx = c->ctx;
    free_graveyards(ctx);
    if (c->state == TCP_CONNECTING || c->state == TCP_CHALLENGE_IN) {
        const char *why = NULL;
        int k = connector_step(c, events, &why);
        if (k < 0) {
            tnt__tcp_fail(c, k == -2 ? TNT_ERR_PEER_LOST : TNT_ERR_CONNECT,
                          why);
            return;
        }
        if (k == 0) {
            if (c->state == TCP_CHALLENGE_IN)
                tnt__tcp_set_events(c, TNT_FD_READ);
            return;
        }
        if (++c->ep->nready == c->ep->nconn)
            announce(ctx, c->ep);
        if (c->closed)
            return;
        tnt__tcp_flush(c);
        return;
    }
    /* A retired socket only writes (a hang-up comes as READ): its
     * write tells what happened. */
    if ((events & TNT_FD_WRITE) || c->rd_ended)
        tnt__tcp_flush(c);
    if (!c->closed && (events & TNT_FD_READ))
        tnt__tcp_read(c);
}

/* Once a second: close incoming connections that have not proved the
 * job key in time, so that silent strangers cannot pile up. */
static void timer_cb(void *arg, uint32_t events)
{
    tcp_ctx_t *ctx = arg;
    (void)events;
    uint64_t ticks;
    if (read(ctx->timer_fd, &ticks, sizeof(ticks)) < 0)
        return;
    free_graveyards(ctx);
    tnt__tcp_probe_tick(ctx);
    double now = tnt__now();
    tnt__tcp_tail_tick(ctx, now);
    tcp_conn_t *c = ctx->incoming;
    while (c) {
        tcp_conn_t *next = c->next;
        if (now - c->born > TCP_HANDSHAKE_WAIT_S)
            drop_stranger(c, "no authenticated hello in time");
        c = next;
    }
}

/* Make room for a new connection: close the oldest unproven one that
 * has not said who it is yet, else the oldest that has (a peer's own
 * connection says so within a round trip and proves the key within the
 * next; refusing the newcomer instead had let a flood of silent
 * connections hold a port shut to the job's own ranks). 0: none. */
static int evict_stranger(tcp_ctx_t *ctx, const char *why)
{
    tcp_conn_t *silent = NULL, *named = NULL;
    for (tcp_conn_t *c = ctx->incoming; c; c = c->next) {
        /* The list is newest first: the last match is the oldest. */
        if (c->closed)
            continue;
        if (c->state == TCP_HELLO_IN)
            silent = c;
        else
            named = c;
    }
    tcp_conn_t *victim = silent ? silent : named;
    if (!victim)
        return 0;
    ctx->strangers_evicted++;
    close_stranger(victim, why);
    return 1;
}

/* Unproven connections one rank keeps: TCP_INCOMING_MAX, and no more
 * than half of its descriptor limit, so that accepting never fails
 * for want of a descriptor while strangers hold them. */
static int incoming_cap(void)
{
    struct rlimit rl;
    int cap = TCP_INCOMING_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 2 < (rlim_t)cap)
        cap = rl.rlim_cur / 2 > 16 ? (int)(rl.rlim_cur / 2) : 16;
    return cap;
}

static void accept_cb(void *arg, uint32_t events)
{
    tcp_ctx_t *ctx = arg;
    (void)events;
    free_graveyards(ctx);
    /* At most half the cap per callback: a connection accepted whose
     * hello was not there yet is read in the next round, before a flood
     * queued behind it could make it the oldest silent one. */
    for (int batch = 0; batch < ctx->incoming_cap / 2; batch++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(ctx->listen_fd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if ((errno == EMFILE || errno == ENFILE) &&
                evict_stranger(ctx, "evicted: this process is out of file "
                               "descriptors"))
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                ctx->env.log(ctx->env.core, TNT_LOG_WARNING, "rank %d: "
                             "accept: %s", ctx->env.rank, strerror(errno));
            return;
        }
        char who[64];
        tnt__sockaddr_str((struct sockaddr *)&ss, who, sizeof(who));
        if (ctx->nincoming >= ctx->incoming_cap) {
            char why[128];
            snprintf(why, sizeof(why), "evicted: %d connections were in "
                     "their handshake", ctx->nincoming);
            evict_stranger(ctx, why);
        }
        tune_socket(ctx, fd);
        tcp_conn_t *c = conn_new(ctx, fd, TCP_HELLO_IN, NULL);
        if (!c) {
            close(fd);
            continue;
        }
        snprintf(c->name, sizeof(c->name), "%s", who);
        tnt__sockaddr_ip((struct sockaddr *)&ss, c->ip, sizeof(c->ip));
        c->born = tnt__now();
        c->next = ctx->incoming;
        ctx->incoming = c;
        ctx->nincoming++;
        /* A peer's hello is often here already: read it now. */
        tnt__tcp_read(c);
    }
}

/* ---- the vtable ---------------------------------------------------- */

static tnt_result_t open_socket(tcp_ctx_t *ctx, tcp_ep_t *ep, int index,
                                const struct sockaddr_storage *ss,
                                socklen_t sslen)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "socket: %s", strerror(errno));
    tune_socket(ctx, fd);
    if (connect(fd, (const struct sockaddr *)ss, sslen) != 0 &&
        errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return tnt__error(TNT_ERR_CONNECT, "connect to rank %d: %s", ep->peer,
                          strerror(e));
    }
    tcp_conn_t *c = conn_new(ctx, fd, TCP_CONNECTING, ep);
    if (!c) {
        close(fd);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a socket");
    }
    /* Owned by the endpoint from here: closing it cleans up. */
    ep->conns[index] = c;
    tnt__sockaddr_str((const struct sockaddr *)ss, c->name, sizeof(c->name));
    /* Sent once connected (connector_step). */
    c->hello = (tcp_hello_t){TCP_HELLO_MAGIC, TCP_PROTO_VERSION,
                             ctx->env.job_id, ctx->env.comm_id,
                             ctx->env.rank, ep->peer, (uint16_t)index,
                             (uint16_t)ctx->nsock, {0}};
    ctx->env.random_bytes(ctx->env.core, c->hello.nonce,
                          sizeof(c->hello.nonce));
    return TNT_SUCCESS;
}

static tnt_result_t tcp_connect(void *vctx, int peer, const void *addr,
                                size_t addr_len)
{
    tcp_ctx_t *ctx = vctx;
    struct sockaddr_storage ss;
    socklen_t sslen;
    TNT_CHECK(tnt__addr_blob_decode(addr, addr_len, &ss, &sslen));
    tcp_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for an "
                          "endpoint");
    ep->ctx = ctx;
    ep->peer = peer;
    ep->nconn = ctx->nsock;
    ep->known = 1;
    ep->next = ctx->eps;
    ctx->eps = ep;
    for (int i = 0; i < ctx->nsock; i++) {
        tnt_result_t rc = open_socket(ctx, ep, i, &ss, sslen);
        if (rc != TNT_SUCCESS) {
            ep_close(ctx, ep);
            return rc;
        }
    }
    return TNT_SUCCESS;
}

/* The clock of timer_cb. */
static tnt_result_t start_timer(tcp_ctx_t *ctx)
{
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (tfd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "timerfd_create: %s",
                          strerror(errno));
    struct itimerspec its = {{1, 0}, {1, 0}};
    if (timerfd_settime(tfd, 0, &its, NULL) != 0 ||
        ctx->env.watch_fd(ctx->env.core, tfd, TNT_FD_READ, timer_cb,
                          ctx) != TNT_SUCCESS) {
        close(tfd);
        return tnt__error(TNT_ERR_SYSTEM, "tcp: cannot start the handshake "
                          "timer");
    }
    ctx->timer_fd = tfd;
    return TNT_SUCCESS;
}

static tnt_result_t tcp_listen(void *vctx, void *addr, size_t *addr_len)
{
    tcp_ctx_t *ctx = vctx;
    int fd;
    TNT_CHECK(tnt__listen_blob(ctx->env.bind_ip, ctx->env.rank, "", &fd,
                               addr, addr_len));
    /* Before any peer knows the port: accepted sockets inherit it. */
    size_socket(ctx, fd);
    tnt_result_t rc = ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ,
                                        accept_cb, ctx);
    if (rc != TNT_SUCCESS) {
        close(fd);
        return rc;
    }
    ctx->listen_fd = fd;
    return start_timer(ctx);
}

static void tcp_finalize(void *vctx);

static tnt_result_t tcp_init(const tnt_transport_env_t *env, void **out)
{
    /* The authentication services are required: TCP accepts no
     * connection it cannot authenticate. */
    if (!env || env->size < sizeof(*env) || env->version < 1 ||
        !env->auth_mac || !env->auth_verify || !env->random_bytes)
        return tnt__error(TNT_ERR_INVALID_ARG, "tcp: bad transport env");
    tcp_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return tnt__error(TNT_ERR_NO_MEMORY, "tcp: out of memory");
    ctx->env = *env;
    ctx->listen_fd = -1;
    ctx->timer_fd = -1;
    ctx->nsock = 1;
    ctx->incoming_cap = incoming_cap();
    ctx->accepting = calloc((size_t)env->nranks, sizeof(*ctx->accepting));
    tnt_result_t rc = ctx->accepting ? TNT_SUCCESS
                                     : tnt__error(TNT_ERR_NO_MEMORY,
                                                  "tcp: out of memory");
    /* Transport knobs are the transport's own, as a plugin's would be. */
    if (rc == TNT_SUCCESS)
        rc = tnt__env_size(TNT_VAR_SOCKET_BUFFER, &ctx->sockbuf);
    if (rc == TNT_SUCCESS)
        rc = tnt__env_seconds(TNT_VAR_HEARTBEAT, &ctx->heartbeat_s);
    long nsock = 1;
    if (rc == TNT_SUCCESS)
        rc = tnt__env_long(TNT_VAR_SOCKETS_PER_PEER, &nsock);
    ctx->nsock = (int)nsock;
    if (rc != TNT_SUCCESS) {
        tcp_finalize(ctx);
        return rc;
    }
    *out = ctx;
    return TNT_SUCCESS;
}

/* A socket still connecting when the communicator goes away may be the
 * one that tells a peer this rank is gone (engine_fail connects to peers
 * for that). Unless its handshake completes, the peer takes it for a
 * stranger and cannot tell who left, so give pending handshakes a bounded
 * moment to finish (no upcalls: the core is going away). */
static void finish_handshakes(tcp_ctx_t *ctx, double budget_s)
{
    double end = tnt__now() + budget_s;
    for (tcp_ep_t *ep = ctx->eps; ep; ep = ep->next)
        for (int i = 0; i < ep->nconn; i++) {
            tcp_conn_t *c = ep->conns[i];
            while (c && !c->closed && (c->state == TCP_CONNECTING ||
                                       c->state == TCP_CHALLENGE_IN)) {
                double left = end - tnt__now();
                struct pollfd pfd = {.fd = c->fd,
                                     .events = c->state == TCP_CONNECTING
                                                   ? POLLOUT : POLLIN};
                if (left <= 0 ||
                    poll(&pfd, 1, (int)(left * 1000.0) + 1) <= 0)
                    return;
                const char *why;
                if (connector_step(c, TNT_FD_WRITE | TNT_FD_READ, &why) < 0)
                    break;
            }
        }
}

/* A close() while data of the peer's is still arriving makes this side's
 * kernel answer with a reset, and a reset makes the peer's kernel drop
 * what it has received and not yet read: a peer still reading the end of
 * this rank's last collective (a pipelined broadcast's last segments)
 * would lose them, because it sends a flow-control credit after each
 * part it reads. So the end of a communicator closes gently: say "no more
 * from me" (shutdown for writing: the peer reads everything up to it),
 * then read and drop what the peers still send until each has closed
 * too, for at most TCP_LINGER_S; only then close. Ranks that free their
 * communicators together see each other's end at once. */
#define TCP_LINGER_MAX 1024

static void linger_close(tcp_ctx_t *ctx, double end)
{
    struct pollfd pfd[TCP_LINGER_MAX];
    int n = 0;
    for (tcp_ep_t *ep = ctx->eps; ep; ep = ep->next)
        for (int i = 0; i < ep->nconn && n < TCP_LINGER_MAX; i++) {
            tcp_conn_t *c = ep->conns[i];
            if (!c || c->closed || c->state != TCP_READY)
                continue;
            if (shutdown(c->fd, SHUT_WR) == 0)
                pfd[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
        }
    int open = n;
    char sink[4096];
    while (open > 0) {
        double left = end - tnt__now();
        if (left <= 0 || poll(pfd, (nfds_t)n, (int)(left * 1000.0) + 1) <= 0)
            break;
        for (int k = 0; k < n; k++) {
            if (pfd[k].fd < 0 || !pfd[k].revents)
                continue;
            ssize_t r = recv(pfd[k].fd, sink, sizeof(sink), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR &&
                           errno != EWOULDBLOCK)) {
                pfd[k].fd = -1; /* poll skips negative descriptors */
                open--;
            }
        }
    }
}

static void tcp_finalize(void *vctx)
{
    tcp_ctx_t *ctx = vctx;
    if (!ctx)
        return;
    finish_handshakes(ctx, 0.2);
    /* The tails of sockets the core closed (a failed communicator's last
     * frames and notices) and the gentle close share one TCP_LINGER_S. */
    double end = tnt__now() + TCP_LINGER_S;
    tnt__tcp_tail_finish(ctx, end);
    linger_close(ctx, end);
    tnt__tcp_probe_finalize(ctx);
    while (ctx->eps)
        ep_close(ctx, ctx->eps);
    for (int i = 0; ctx->accepting && i < ctx->env.nranks; i++)
        if (ctx->accepting[i])
            ep_close(ctx, ctx->accepting[i]);
    while (ctx->incoming)
        conn_close(ctx, ctx->incoming);
    if (ctx->listen_fd >= 0) {
        ctx->env.unwatch_fd(ctx->env.core, ctx->listen_fd);
        close(ctx->listen_fd);
    }
    if (ctx->timer_fd >= 0) {
        ctx->env.unwatch_fd(ctx->env.core, ctx->timer_fd);
        close(ctx->timer_fd);
    }
    free_graveyards(ctx);
    while (ctx->free_sreqs) {
        tcp_sreq_t *r = ctx->free_sreqs;
        ctx->free_sreqs = r->next;
        free(r);
    }
    free(ctx->accepting);
    free(ctx);
}

/* The built-in transports never reconnect: a lost connection fails the
 * communicator. */
static void tcp_stats(void *vctx, tnt_transport_stats_t *out)
{
    const tcp_ctx_t *ctx = vctx;
    if (TNT_TRANSPORT_HAS(out, strangers_evicted)) {
        out->strangers_refused = ctx->strangers_refused;
        out->strangers_evicted = ctx->strangers_evicted;
    }
}

const tnt_transport_t tnt__tcp_transport = {
    .size = sizeof(tnt_transport_t),
    .version = TNT_TRANSPORT_VERSION,
    .name = "tcp",
    .init = tcp_init,
    .listen = tcp_listen,
    .connect = tcp_connect,
    .send = tnt__tcp_send,
    .reg_mem = NULL,
    .dereg_mem = NULL,
    .close = ep_close_by_core,
    .finalize = tcp_finalize,
    .preference = 100,
    .caps = TNT_TP_POLL_SYSCALLS | TNT_TP_CLOSE_FINISHES,
    .poll = tnt__tcp_poll,
    .stats = tcp_stats,
};
