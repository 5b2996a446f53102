/*
 * The TCP data path. A message is a frame {magic, header length, payload
 * length}, the core's header and the payload, written with one sendmsg;
 * most messages leave in the call that posts them. Reads go through a
 * 64 KiB staging buffer (one recv often brings several small messages);
 * a large payload is received straight into its destination, all of it
 * (recv_direct, staged_guess): no byte of it passes the staging buffer
 * unless it arrived behind small messages. Everything
 * read is untrusted: lengths are checked before use.
 *
 * After every upcall the socket may have been closed by the core (it
 * closes all connections when a collective fails), so each caller checks
 * c->closed before touching it again.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "util/clock.h"
#include "util/error.h"
#include "transport/tcp/tcp_internal.h"

tcp_sreq_t *tnt__tcp_sreq_get(tcp_ctx_t *ctx)
{
    tcp_sreq_t *r = ctx->free_sreqs;
    if (r) {
        ctx->free_sreqs = r->next;
        memset(r, 0, sizeof(*r));
        return r;
    }
    return calloc(1, sizeof(*r));
}

void tnt__tcp_sreq_put(tcp_ctx_t *ctx, tcp_sreq_t *r)
{
    r->next = ctx->free_sreqs;
    ctx->free_sreqs = r;
}

void tnt__tcp_set_events(tcp_conn_t *c, uint32_t events)
{
    if (c->rd_ended) /* the end stays readable: level-triggered */
        events &= ~(uint32_t)TNT_FD_READ;
    if (c->closed || c->events == events)
        return;
    c->events = events;
    tcp_ctx_t *ctx = c->ctx;
    ctx->env.modify_fd(ctx->env.core, c->fd, events, tnt__tcp_conn_cb, c);
}

/* ---- sending ------------------------------------------------------- */

static size_t sreq_total(const tcp_sreq_t *r)
{
    return sizeof(r->frame) + r->hdr_len + r->len;
}

/* The unsent part of r as at most three iovecs. */
static int sreq_iov(const tcp_sreq_t *r, struct iovec *iov)
{
    const void *base[3] = {&r->frame, r->hdr, r->payload};
    size_t len[3] = {sizeof(r->frame), r->hdr_len, r->len};
    int n = 0;
    size_t skip = r->done;
    for (int i = 0; i < 3; i++) {
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

size_t tnt__tcp_sreq_rest(const tcp_sreq_t *r, unsigned char *out)
{
    struct iovec iov[3];
    int n = sreq_iov(r, iov);
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        if (out)
            memcpy(out + len, iov[i].iov_base, iov[i].iov_len);
        len += iov[i].iov_len;
    }
    return len;
}

ssize_t tnt__tcp_send_some(int fd, struct iovec *iov, int n)
{
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    for (;;) {
        ssize_t k = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k >= 0)
            return k;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* Write as much of r as the socket takes: 1 done, 0 would block, -1 err. */
static int write_sreq(tcp_conn_t *c, tcp_sreq_t *r)
{
    for (;;) {
        struct iovec iov[3];
        int niov = sreq_iov(r, iov);
        if (niov == 0)
            return 1;
        ssize_t n = tnt__tcp_send_some(c->fd, iov, niov);
        if (n <= 0)
            return (int)n;
        r->done += (size_t)n;
        if (r->done == sreq_total(r))
            return 1;
    }
}

void tnt__tcp_flush(tcp_conn_t *c)
{
    tcp_ctx_t *ctx = c->ctx;
    while (c->sq_head && !c->closed) {
        tcp_sreq_t *r = c->sq_head;
        size_t before = r->done;
        int w = write_sreq(c, r);
        if (w < 0) {
            /* The peer may have closed on purpose, after a message that
             * says why (a failure notice, or a header whose signature
             * differs from ours): read what it sent before calling it
             * lost, so that this rank reports the real cause. */
            int e = errno;
            tnt__tcp_read(c);
            if (!c->closed)
                tnt__tcp_fail(c, TNT_ERR_PEER_LOST, strerror(e));
            return;
        }
        c->queued -= r->done - before;
        if (w == 0)
            break;
        c->sq_head = r->next;
        if (!c->sq_head)
            c->sq_tail = NULL;
        void *cookie = r->cookie;
        tnt__tcp_sreq_put(ctx, r);
        ctx->env.on_send_done(ctx->env.core, cookie);
    }
    if (c->closed)
        return;
    if (c->rd_ended && !c->sq_head)
        tnt__tcp_retire(c); /* all written that was queued on it */
    else
        tnt__tcp_set_events(c, TNT_FD_READ |
                                   (c->sq_head ? TNT_FD_WRITE : 0));
}

void tnt__tcp_enqueue(tcp_conn_t *c, tcp_sreq_t *r)
{
    r->next = NULL;
    if (c->sq_tail)
        c->sq_tail->next = r;
    else
        c->sq_head = r;
    c->sq_tail = r;
    c->queued += sreq_total(r) - r->done;
    if (c->state == TCP_READY)
        tnt__tcp_set_events(c, TNT_FD_READ | TNT_FD_WRITE);
}

/* The open socket with the least data queued, starting the search at a
 * rotating index so that equally idle sockets take turns; never one the
 * peer has ended (tnt__tcp_end_of_stream). NULL: none is open. */
static tcp_conn_t *pick_conn(tcp_ep_t *ep)
{
    if (ep->nconn == 1)
        return ep->conns[0];
    tcp_conn_t *best = NULL;
    for (int k = 0; k < ep->nconn; k++) {
        tcp_conn_t *c = ep->conns[(ep->rr + (unsigned)k) % (unsigned)ep->nconn];
        if (c->closed || c->rd_ended)
            continue;
        if (!best || c->queued < best->queued)
            best = c;
        if (best->queued == 0)
            break;
    }
    ep->rr++;
    return best;
}

tnt_result_t tnt__tcp_send(void *vctx, void *vep, const void *hdr,
                           size_t hdr_len, const void *payload, size_t len,
                           void *cookie)
{
    tcp_ctx_t *ctx = vctx;
    tcp_ep_t *ep = vep;
    if (!ep || ep->closed || ep->nready < ep->nconn)
        return tnt__error(TNT_ERR_PEER_LOST, "send on a closed connection");
    if (hdr_len > TCP_HDR_MAX)
        return tnt__error(TNT_ERR_INVALID_ARG, "header of %zu bytes",
                          hdr_len);
    tcp_conn_t *c = pick_conn(ep);
    if (!c)
        return tnt__error(TNT_ERR_PEER_LOST, "send on a closed connection");
    tcp_sreq_t local = {.frame = {TCP_FRAME_MAGIC, (uint32_t)hdr_len, len},
                        .hdr = hdr, .hdr_len = hdr_len, .payload = payload,
                        .len = len, .cookie = cookie};
    if (!c->sq_head) {
        /* Fast path: most messages leave in this one sendmsg. An error
         * is not reported here but from tnt__tcp_flush, once the event
         * loop has it: that reads what the peer sent first (see there),
         * which cannot be done inside a call from the core. */
        if (write_sreq(c, &local) > 0)
            return TNT_SUCCESS;
    }
    tcp_sreq_t *r = tnt__tcp_sreq_get(ctx);
    if (!r)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a send");
    *r = local;
    tnt__tcp_enqueue(c, r);
    return TNT_INPROGRESS;
}

/* ---- receiving ----------------------------------------------------- */

/* Parse a frame header from the staging buffer if it is all there:
 * 1 parsed, 0 need more bytes, -1 connection closed. */
static int parse_frame(tcp_conn_t *c)
{
    tcp_ctx_t *ctx = c->ctx;
    size_t avail = c->rend - c->rstart;
    tcp_frame_t f;
    if (avail < sizeof(f))
        return 0;
    const char *why = tnt__tcp_frame_parse(c->rbuf + c->rstart, avail, &f);
    if (why) {
        tnt__tcp_fail(c, TNT_ERR_PROTOCOL, why);
        return -1;
    }
    if (avail < sizeof(f) + f.hdr_len)
        return 0;
    void *dest = NULL, *cookie = NULL;
    tnt_result_t rc = ctx->env.on_header(
        ctx->env.core, c->ep->peer, c->rbuf + c->rstart + sizeof(f),
        f.hdr_len, (size_t)f.payload_len, &dest, &cookie);
    if (c->closed)
        return -1;
    if (rc < 0) {
        tnt__tcp_fail(c, rc, tnt_last_error());
        return -1;
    }
    c->rstart += sizeof(f) + f.hdr_len;
    /* A message without payload (the core's flow-control and credit
     * messages, between a large payload's segments) leaves the guess. */
    if (f.payload_len)
        c->next_hdr = f.payload_len >= TCP_DIRECT_MIN ? sizeof(f) + f.hdr_len
                                                      : 0;
    c->in_payload = 1;
    c->dest = dest;
    c->left = (size_t)f.payload_len;
    c->cookie = cookie;
    return 1;
}

static void payload_done(tcp_conn_t *c)
{
    tcp_ctx_t *ctx = c->ctx;
    c->in_payload = 0;
    ctx->env.on_payload(ctx->env.core, c->ep->peer, c->cookie);
}

/* recvmsg() into iov: bytes read (> 0), 0 if nothing is there now, -1 if
 * the stream ended (the socket is then retired, or the peer closed and
 * reported: tnt__tcp_end_of_stream). */
static ssize_t recv_some(tcp_conn_t *c, struct iovec *iov, size_t niov)
{
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = niov};
    for (;;) {
        ssize_t r = recvmsg(c->fd, &msg, MSG_DONTWAIT);
        if (r > 0) {
            c->reads++;
            return r;
        }
        if (r == 0) {
            if (c->in_payload || c->rend != c->rstart)
                tnt__tcp_fail(c, TNT_ERR_PEER_LOST, "connection closed in "
                              "the middle of a message");
            else
                tnt__tcp_end_of_stream(c);
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        tnt__tcp_fail(c, TNT_ERR_PEER_LOST, strerror(errno));
        return -1;
    }
}

/* Read the rest of a payload straight into its destination, and with it,
 * in the same system call, the next frame and header if the last one was
 * for a large payload (c->next_hdr) into the empty staging buffer: the
 * next payload then goes direct too, and no byte of a large payload is
 * copied out of rbuf. Returns what recv_some returns; *empty: the socket
 * gave less than asked, so it is empty now. */
static ssize_t recv_direct(tcp_conn_t *c, int *empty)
{
    struct iovec iov[2] = {{c->dest, c->left}, {c->rbuf, c->next_hdr}};
    c->rstart = c->rend = 0;
    ssize_t r = recv_some(c, iov, c->next_hdr ? 2 : 1);
    if (r <= 0)
        return r;
    *empty = (size_t)r < c->left + (c->next_hdr ? c->next_hdr : 0);
    size_t n = (size_t)r < c->left ? (size_t)r : c->left;
    c->dest += n;
    c->left -= n;
    c->rend = (size_t)r - n;
    return r;
}

/* Consume staged bytes into the current payload; 1 if progress. */
static int drain_staged(tcp_conn_t *c)
{
    size_t avail = c->rend - c->rstart;
    if (!avail && c->left)
        return 0;
    size_t n = avail < c->left ? avail : c->left;
    if (n)
        memcpy(c->dest, c->rbuf + c->rstart, n);
    c->rstart += n;
    c->dest += n;
    c->left -= n;
    if (c->left == 0)
        payload_done(c);
    return 1;
}

/* How many bytes rbuf should hold after a read at a frame boundary:
 * after a large payload, the next frame and header only, so that the next
 * payload, probably large too, is received straight into its destination
 * instead of copied out of rbuf (a copy of up to 64 KiB per message, a
 * quarter of the bytes of a 256 KiB one, saved for a system call of a few
 * bytes, which recv_direct mostly folds into the previous payload's last
 * read). 0: as much as fits (small messages share one read). A wrong
 * guess costs one read or one copy, never correctness: whatever arrives
 * is parsed the same way. */
static size_t staged_guess(const tcp_conn_t *c)
{
    if (!c->next_hdr || c->state != TCP_READY || c->in_payload)
        return 0;
    return c->next_hdr;
}

void tnt__tcp_read(tcp_conn_t *c)
{
    /* The budget limits recv calls only: staged bytes are always parsed,
     * since epoll will not report them again. A recv that returned less
     * than it asked for emptied the socket: the next one would only say
     * EAGAIN (one system call in four of a small allreduce), and epoll,
     * level-triggered, reports whatever arrives after it. */
    int budget = TCP_READ_BUDGET, empty = 0;
    if (c->rd_ended)
        return;
    while (!c->closed) {
        if (c->state == TCP_HELLO_IN) {
            if (c->rend - c->rstart >= sizeof(tcp_hello_t)) {
                if (tnt__tcp_hello_in(c) < 0)
                    return;
                continue;
            }
        } else if (c->state == TCP_PROOF_IN) {
            if (c->rend - c->rstart >= sizeof(tcp_proof_t)) {
                if (tnt__tcp_proof_in(c) < 0)
                    return;
                continue;
            }
        } else if (c->in_payload) {
            if (drain_staged(c))
                continue;
            if (c->left >= TCP_DIRECT_MIN || c->next_hdr) {
                /* A large remainder, or any of a large payload: straight
                 * into the destination (staged bytes are drained). */
                if (empty || budget-- == 0)
                    return;
                if (recv_direct(c, &empty) <= 0)
                    return;
                if (c->left == 0)
                    payload_done(c);
                continue;
            }
        } else if (c->state == TCP_READY) {
            /* Frames may arrive on one socket of a pair before the others
             * are connected: the core matches by peer rank, so they can be
             * delivered already. */
            int p = parse_frame(c);
            if (p < 0)
                return;
            if (p > 0)
                continue;
        }
        /* Need more bytes in the staging buffer. */
        if (c->rstart == c->rend) {
            c->rstart = c->rend = 0;
        } else if (c->rstart > 0) {
            memmove(c->rbuf, c->rbuf + c->rstart, c->rend - c->rstart);
            c->rend -= c->rstart;
            c->rstart = 0;
        }
        if (empty || budget-- == 0)
            return;
        size_t want = TCP_RBUF_SIZE - c->rend;
        size_t guess = staged_guess(c);
        if (guess > c->rend && guess - c->rend < want)
            want = guess - c->rend;
        struct iovec iov = {c->rbuf + c->rend, want};
        ssize_t r = recv_some(c, &iov, 1);
        if (r <= 0)
            return;
        empty = (size_t)r < want;
        c->rend += (size_t)r;
    }
}

/* ---- polling from a spinning thread --------------------------------- */

/* A blocking call's spin (core/progress.c) that looks at its sockets with
 * epoll_wait(0) pays that system call and then the recv; reading each
 * socket directly pays one. Each look is a system call per socket,
 * though, so with many sockets one epoll_wait is cheaper; and the spin
 * only reads directly where every rank has a core (every recv that finds
 * nothing is time the awaited rank does not get). Figures:
 * docs/performance.md, "Reading sockets while spinning". */
#define TCP_POLL_MAX_CONNS 4
/* A socket that carries large messages and had nothing for the spin is
 * looked at again after a gap that grows with how long it has had
 * nothing, 1/TCP_LOOK_FRACTION of that time, at most TCP_LOOK_GAP_MAX_S:
 * a spin that read it every round found it empty in 4 recvs of 5 at
 * p = 2 and 256 KiB - 8 MiB, each a system call that takes the socket's
 * lock from the peer that is filling it (docs/performance.md, "2026-11-27:
 * the spin's empty reads (issue 40)"). A wait is at most that fraction
 * longer; sockets of small messages, where microseconds count, are read
 * every round as before. */
#define TCP_LOOK_FRACTION 4.0
#define TCP_LOOK_GAP_MAX_S 16e-6

/* c carries large messages: it is in one, the last one was (next_hdr),
 * or a send waits for room in it (the peer drains a full buffer). */
static int streams_large(const tcp_conn_t *c)
{
    return (c->in_payload && c->left >= TCP_DIRECT_MIN) || c->next_hdr ||
           c->sq_head;
}

/* After a look at c at `now`: when the next may be (see
 * TCP_LOOK_FRACTION). */
static void pace_looks(tcp_conn_t *c, double now, int moved)
{
    if (moved || !streams_large(c)) {
        c->quiet_since = c->look_at = 0.0;
        return;
    }
    if (c->quiet_since == 0.0)
        c->quiet_since = now;
    double gap = (now - c->quiet_since) / TCP_LOOK_FRACTION;
    c->look_at = now + (gap < TCP_LOOK_GAP_MAX_S ? gap : TCP_LOOK_GAP_MAX_S);
}

int tnt__tcp_poll(void *vctx, unsigned flags)
{
    tcp_ctx_t *ctx = vctx;
    int n = 0;
    /* Nothing is ever left unarmed: epoll watches every socket. */
    if (flags & TNT_POLL_ARM)
        return 0;
    for (tcp_ep_t *ep = ctx->eps; ep; ep = ep->next)
        for (int i = 0; i < ep->nconn; i++)
            if (ep->conns[i] && !ep->conns[i]->closed &&
                ep->conns[i]->state == TCP_READY && ++n > TCP_POLL_MAX_CONNS)
                return -1;
    /* A failure closes connections and relinks the lists: stop there and
     * let the event loop take over. */
    unsigned closes = ctx->closes;
    double now = tnt__now();
    for (tcp_ep_t *ep = ctx->eps; ep; ep = ep->next)
        for (int i = 0; i < ep->nconn; i++) {
            tcp_conn_t *c = ep->conns[i];
            if (!c || c->closed || c->state != TCP_READY || now < c->look_at)
                continue;
            unsigned long reads = c->reads;
            size_t queued = c->queued;
            if (c->sq_head)
                tnt__tcp_flush(c);
            if (ctx->closes == closes)
                tnt__tcp_read(c);
            if (ctx->closes != closes)
                return n;
            pace_looks(c, now, c->reads != reads || c->queued != queued);
        }
    return n;
}
