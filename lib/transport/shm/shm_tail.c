/*
 * Finishing a closed pair's last frame (the rule of tcp_tail.c, over a
 * ring). The core closes its endpoints when its communicator fails, right
 * after it queued each peer a failure notice. An eager message streams
 * through the ring as room appears, so one may be partly written: cut
 * there, the peer would wait for the rest of it and then see this rank
 * leave, instead of reading the notice queued behind it. So the core's
 * close keeps that message's rest and the notices (copies,
 * tnt__shm_tail_sends: the core frees the memory behind a request once it
 * is closed), drops the messages not begun, and writes them as the peer
 * makes room, without upcalls. Those bytes are data that was being sent
 * anyway, never filler. Once all are in the ring the pair closes: the
 * ring outlives the close in the peer's mapping, and a peer that sees the
 * hang-up takes what is in the ring first (sock_cb).
 *
 * Meanwhile the pair is off the context's list (nothing else sees it) and
 * drops what the peer writes to it, so that two ranks finishing towards
 * each other never wait for each other's room. It ends when all is
 * written, when the peer hangs up (it died, or freed its communicator),
 * or at finalize, which waits for it until SHM_TAIL_S after the close at
 * the latest (and at most SHM_TAIL_S). A peer that lives but never reads
 * keeps it until then: the pair's descriptors and mapping, nothing the
 * application waits for.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "transport/shm/shm_internal.h"

static void tail_end(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    for (shm_ep_t **pp = &ctx->tails; *pp; pp = &(*pp)->next)
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    ep->next = NULL;
    tnt__shm_ep_release(ctx, ep);
}

/* The eventfd: the peer made room (or wrote). */
static void tail_cb(void *arg, uint32_t events)
{
    (void)events;
    shm_ep_t *ep = arg;
    uint64_t v;
    if (read(ep->efd_in, &v, sizeof(v)) < 0 && errno != EAGAIN)
        ep->ctx->env.log(ep->ctx->env.core, TNT_LOG_DEBUG, "shm: eventfd "
                         "read: %s", strerror(errno));
    if (tnt__shm_tail_step(ep))
        tail_end(ep);
}

/* The socket: nothing comes on it after the hello, so this is the
 * peer's end; what is left cannot reach it. */
static void tail_sock_cb(void *arg, uint32_t events)
{
    (void)events;
    tail_end(arg);
}

int tnt__shm_tail_keep(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    if (!ep->announced || !ep->tx || !ep->efd_watched || !ep->sock_watched ||
        !tnt__shm_tail_sends(ep))
        return 0;
    ctx->env.log(ctx->env.core, TNT_LOG_DEBUG, "rank %d: closed pair with "
                 "rank %d finishes %s", ctx->env.rank, ep->peer,
                 ep->sq_head->done ? "a frame begun" : "its notice");
    /* Most often all of it fits at once: close now, the ring keeps it. */
    if (tnt__shm_tail_step(ep))
        return 0;
    if (ctx->env.modify_fd(ctx->env.core, ep->efd_in, TNT_FD_READ, tail_cb,
                           ep) != TNT_SUCCESS ||
        ctx->env.modify_fd(ctx->env.core, ep->sock, TNT_FD_READ,
                           tail_sock_cb, ep) != TNT_SUCCESS)
        return 0; /* release unwatches both, whatever they point to */
    for (shm_ep_t **pp = &ctx->eps; *pp; pp = &(*pp)->next)
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    ep->tail_until = tnt__now() + SHM_TAIL_S;
    ep->next = ctx->tails;
    ctx->tails = ep;
    return 1;
}

void tnt__shm_tail_finish(shm_ctx_t *ctx, double end)
{
    while (ctx->tails) {
        /* Two descriptors a tail; the rest waits for the next round. */
        struct pollfd pfd[128];
        shm_ep_t *who[64];
        double now = tnt__now(), wake = end;
        int n = 0;
        for (shm_ep_t *ep = ctx->tails, *next; ep; ep = next) {
            next = ep->next;
            if (now >= end || now >= ep->tail_until) {
                tail_end(ep);
                continue;
            }
            if (n == 64)
                continue;
            if (ep->tail_until < wake)
                wake = ep->tail_until;
            pfd[2 * n] = (struct pollfd){.fd = ep->efd_in, .events = POLLIN};
            pfd[2 * n + 1] = (struct pollfd){.fd = ep->sock,
                                             .events = POLLIN};
            who[n++] = ep;
        }
        if (n == 0)
            continue;
        int k = poll(pfd, (nfds_t)(2 * n), (int)((wake - now) * 1000.0) + 1);
        if (k < 0 && errno != EINTR) {
            while (ctx->tails)
                tail_end(ctx->tails);
            return;
        }
        for (int i = 0; i < n && k > 0; i++) {
            if (pfd[2 * i + 1].revents)
                tail_sock_cb(who[i], TNT_FD_READ);
            else if (pfd[2 * i].revents)
                tail_cb(who[i], TNT_FD_READ);
        }
    }
}
