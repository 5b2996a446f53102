/*
 * How a socket closes when the core closes it: its communicator failed,
 * and the core has just sent the peer a failure notice. Two things would
 * keep that notice from the peer:
 *
 * - A frame half written. Cut there, the peer's stream ends in the middle
 *   of a message and it reports this rank lost, not the notice's cause.
 *   So the close keeps the unwritten rest of that frame and every notice
 *   queued behind it (messages without a cookie), copied, since the core
 *   frees the memory behind a request once it is closed; the other queued
 *   messages, not begun, are dropped: the peer never sees them start, so
 *   its stream stays in frame. These bytes are data that was being sent
 *   anyway, never filler: the peer takes the frame as it would have, then
 *   the notice fails it with the cause.
 * - A reset. close() while the peer still sends (it has not failed yet)
 *   makes this kernel answer with a reset, and a reset can make the
 *   peer's kernel drop what it has not read yet, the notice included.
 *
 * So every socket the core closes becomes a tail: it writes what is kept
 * from the event loop, with no upcalls (the endpoint is gone for the
 * core), then says "no more" (shutdown for writing), reads and drops what
 * the peer still sends until the peer closes too (it does once the notice
 * has failed it), and only then closes. All within TCP_LINGER_S of the
 * close, checked by the once-a-second timer (so 1 to 2 s at most) and by
 * finalize (which waits for them within its own TCP_LINGER_S). A dead
 * peer ends a tail at once: the write fails or the read sees the end.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"
#include "transport/tcp/tcp_internal.h"

/* recv calls per callback while draining the peer's bytes. */
#define TAIL_READ_BUDGET 64
/* Tails finalize polls at once (more wait for a later round). */
#define TAIL_POLL_MAX 256

/* Kept at close: the frame partly written (only the first in the queue
 * can be), and notices, which the core sends without a cookie. */
static int kept(const tcp_conn_t *c, const tcp_sreq_t *r)
{
    return (r == c->sq_head && r->done > 0) || !r->cookie;
}

static void tail_cb(void *arg, uint32_t events);

static void tail_end(tcp_tail_t *t)
{
    tcp_ctx_t *ctx = t->ctx;
    for (tcp_tail_t **pp = &ctx->tails; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    ctx->env.unwatch_fd(ctx->env.core, t->fd);
    close(t->fd);
    free(t->buf);
    free(t);
}

/* Write what the socket takes: 0 to go on, -1 the connection is over. */
static int tail_write(tcp_tail_t *t)
{
    while (t->done < t->len) {
        struct iovec iov = {t->buf + t->done, t->len - t->done};
        ssize_t n = tnt__tcp_send_some(t->fd, &iov, 1);
        if (n <= 0)
            return (int)n;
        t->done += (size_t)n;
    }
    /* All out: "no more from me", then only the peer's end is awaited. */
    if (shutdown(t->fd, SHUT_WR) != 0)
        return -1;
    t->shut = 1;
    tcp_ctx_t *ctx = t->ctx;
    ctx->env.modify_fd(ctx->env.core, t->fd, TNT_FD_READ, tail_cb, t);
    return 0;
}

/* Read and drop what the peer sends: 0 to go on, -1 it has closed. */
static int tail_read(tcp_tail_t *t)
{
    char sink[4096];
    for (int i = 0; i < TAIL_READ_BUDGET; i++) {
        ssize_t r = recv(t->fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (r > 0)
            continue;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return -1;
    }
    return 0;
}

static void tail_cb(void *arg, uint32_t events)
{
    tcp_tail_t *t = arg;
    if (((events & TNT_FD_WRITE) && !t->shut && tail_write(t) < 0) ||
        ((events & TNT_FD_READ) && tail_read(t) < 0))
        tail_end(t);
}

int tnt__tcp_tail_keep(tcp_conn_t *c)
{
    tcp_ctx_t *ctx = c->ctx;
    size_t len = 0;
    for (const tcp_sreq_t *r = c->sq_head; r; r = r->next)
        if (kept(c, r))
            len += tnt__tcp_sreq_rest(r, NULL);
    tcp_tail_t *t = calloc(1, sizeof(*t));
    unsigned char *buf = len ? malloc(len) : NULL;
    /* Nothing left to write: "no more from me" at once, after the notice
     * the core just wrote, then wait for the peer's end as below. */
    int shut = len == 0;
    /* Without memory the socket closes as it would have before: the peer
     * sees the stream cut, never a wrong frame. */
    if (!t || (len && !buf) || (shut && shutdown(c->fd, SHUT_WR) != 0) ||
        ctx->env.modify_fd(ctx->env.core, c->fd,
                           TNT_FD_READ | (shut ? 0 : TNT_FD_WRITE), tail_cb,
                           t) != TNT_SUCCESS) {
        free(t);
        free(buf);
        return 0;
    }
    size_t off = 0;
    for (const tcp_sreq_t *r = c->sq_head; r; r = r->next)
        if (kept(c, r))
            off += tnt__tcp_sreq_rest(r, buf + off);
    t->ctx = ctx;
    t->fd = c->fd;
    t->buf = buf;
    t->len = len;
    t->shut = shut;
    t->until = tnt__now() + TCP_LINGER_S;
    t->next = ctx->tails;
    ctx->tails = t;
    if (len)
        ctx->env.log(ctx->env.core, TNT_LOG_DEBUG, "rank %d: closed socket "
                     "to rank %d finishes %zu bytes (a frame begun, the "
                     "notice)", ctx->env.rank, c->ep ? c->ep->peer : -1,
                     len);
    return 1;
}

void tnt__tcp_tail_tick(tcp_ctx_t *ctx, double now)
{
    for (tcp_tail_t *t = ctx->tails, *next; t; t = next) {
        next = t->next;
        if (now >= t->until)
            tail_end(t);
    }
}

void tnt__tcp_tail_finish(tcp_ctx_t *ctx, double end)
{
    while (ctx->tails) {
        struct pollfd pfd[TAIL_POLL_MAX];
        tcp_tail_t *who[TAIL_POLL_MAX];
        double now = tnt__now(), wake = end;
        int n = 0;
        for (tcp_tail_t *t = ctx->tails, *next; t; t = next) {
            next = t->next;
            if (now >= t->until || now >= end) {
                tail_end(t);
                continue;
            }
            if (n == TAIL_POLL_MAX)
                continue;
            if (t->until < wake)
                wake = t->until;
            pfd[n] = (struct pollfd){
                .fd = t->fd, .events = POLLIN | (t->shut ? 0 : POLLOUT)};
            who[n++] = t;
        }
        if (n == 0)
            continue;
        int k = poll(pfd, (nfds_t)n, (int)((wake - now) * 1000.0) + 1);
        if (k < 0 && errno != EINTR) {
            while (ctx->tails)
                tail_end(ctx->tails);
            return;
        }
        for (int i = 0; i < n && k > 0; i++) {
            uint32_t ev = 0;
            if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP))
                ev |= TNT_FD_READ;
            if (pfd[i].revents & POLLOUT)
                ev |= TNT_FD_WRITE;
            if (ev)
                tail_cb(who[i], ev);
        }
    }
}
