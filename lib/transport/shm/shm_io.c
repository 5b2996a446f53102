/*
 * The shared-memory data path. A message is a frame, the core's header
 * and, for an eager message, the payload, streamed through the pair's
 * ring like bytes through a pipe: frame and header go in together once
 * there is room for both, the payload as room appears, so a message of
 * any size passes through a ring of fixed size (two copies). A payload of
 * SHM_CMA_MIN bytes or more goes by rendezvous when the receiver could
 * read the sender's memory at connect: the frame carries its address, the
 * receiver pulls it straight into its destination with process_vm_readv
 * (one copy) and answers with an ACK frame that completes the send.
 *
 * Waiting: each side sleeps in epoll on its eventfd, and the other side
 * writes that eventfd only when the ring flags say the sleeper asked for
 * it (shm_ring.c). A blocking call polls the rings for a moment before it
 * sleeps (tnt__shm_poll, the transport's poll entry), leaving them
 * unarmed.
 * Everything read from the ring is untrusted and checked. After every upcall the endpoint may
 * have been closed by the core, so callers check ep->closed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/error.h"
#include "transport/shm/shm_internal.h"

static shm_sreq_t *sreq_get(shm_ctx_t *ctx)
{
    shm_sreq_t *r = ctx->free_sreqs;
    if (r) {
        ctx->free_sreqs = r->next;
        memset(r, 0, sizeof(*r));
        return r;
    }
    return calloc(1, sizeof(*r));
}

static void sreq_put(shm_ctx_t *ctx, shm_sreq_t *r)
{
    free(r->owned);
    r->owned = NULL;
    r->next = ctx->free_sreqs;
    ctx->free_sreqs = r;
}

void tnt__shm_drop_sends(shm_ep_t *ep)
{
    shm_sreq_t *lists[2] = {ep->sq_head, ep->rndv};
    for (int i = 0; i < 2; i++)
        while (lists[i]) {
            shm_sreq_t *r = lists[i];
            lists[i] = r->next;
            sreq_put(ep->ctx, r);
        }
    ep->sq_head = ep->sq_tail = ep->rndv = NULL;
}

static void wake_peer(shm_ep_t *ep)
{
    uint64_t one = 1;
    /* A full counter (never in practice) still leaves the peer woken. */
    if (write(ep->efd_out, &one, sizeof(one)) < 0 && errno != EAGAIN)
        ep->ctx->env.log(ep->ctx->env.core, TNT_LOG_DEBUG, "shm: eventfd "
                         "write: %s", strerror(errno));
}

tnt_result_t tnt__shm_set_option(void *vctx, int option, const void *value,
                                 size_t len)
{
    shm_ctx_t *ctx = vctx;
    if (option != TNT_TP_OPT_RNDV_MIN)
        return TNT_ERR_UNSUPPORTED;
    if (len != sizeof(size_t))
        return tnt__error(TNT_ERR_INVALID_ARG, "shm: TNT_TP_OPT_RNDV_MIN "
                          "takes a size_t, not %zu bytes", len);
    memcpy(&ctx->cma_min, value, sizeof(size_t));
    return TNT_SUCCESS;
}

void tnt__shm_slot_notify(void *vctx, void *vep)
{
    shm_ep_t *ep = vep;
    (void)vctx;
    if (!ep->closed && tnt__shm_ring_wake_consumer(ep->tx))
        wake_peer(ep);
}

/* ---- sending ------------------------------------------------------- */

/* Write what fits of r: 1 when all of it is in the ring, 0 otherwise (the
 * consumer has then been asked to wake this side when it makes room). */
static int write_sreq(shm_ep_t *ep, shm_sreq_t *r)
{
    size_t head_len = sizeof(r->frame) + r->frame.hdr_len;
    int wrote = 0, done = 0;
    /* The ring's pages this write may reach, populated first. */
    tnt__shm_warm_ring(ep, 1, atomic_load_explicit(&ep->tx->tail,
                                                   memory_order_relaxed) +
                                  (r->total - r->done));
    for (;;) {
        if (r->done == 0) {
            if (tnt__shm_ring_space(ep->tx, ep->cap) < head_len) {
                if (tnt__shm_ring_producer_sleep(ep->tx, ep->cap, head_len))
                    continue;
                break;
            }
            tnt__shm_ring_put(ep->tx, ep->cap, &r->frame, sizeof(r->frame));
            tnt__shm_ring_put(ep->tx, ep->cap, r->hdr, r->frame.hdr_len);
            r->done = head_len;
            wrote = 1;
        }
        if (r->done < r->total) {
            const unsigned char *p = r->payload;
            size_t n = tnt__shm_ring_put(ep->tx, ep->cap,
                                         p + (r->done - head_len),
                                         r->total - r->done);
            r->done += n;
            wrote |= n > 0;
            if (r->done < r->total) {
                if (tnt__shm_ring_producer_sleep(ep->tx, ep->cap, 1))
                    continue;
                break;
            }
        }
        done = 1;
        break;
    }
    if (wrote && tnt__shm_ring_wake_consumer(ep->tx))
        wake_peer(ep);
    return done;
}

/* Push queued sends into the ring, in order; completes eager sends. */
static void flush(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    while (ep->sq_head && !ep->closed) {
        shm_sreq_t *r = ep->sq_head;
        if (!write_sreq(ep, r))
            return;
        ep->sq_head = r->next;
        if (!ep->sq_head)
            ep->sq_tail = NULL;
        if (r->frame.type == SHM_RNDV) {
            r->next = ep->rndv;
            ep->rndv = r;
        } else if (r->internal) {
            sreq_put(ctx, r);
        } else {
            void *cookie = r->cookie;
            sreq_put(ctx, r);
            ctx->env.on_send_done(ctx->env.core, cookie);
        }
    }
}

static void enqueue(shm_ep_t *ep, shm_sreq_t *r)
{
    r->next = NULL;
    if (ep->sq_tail)
        ep->sq_tail->next = r;
    else
        ep->sq_head = r;
    ep->sq_tail = r;
}

tnt_result_t tnt__shm_send(void *vctx, void *vep, const void *hdr,
                           size_t hdr_len, const void *payload, size_t len,
                           void *cookie)
{
    shm_ctx_t *ctx = vctx;
    shm_ep_t *ep = vep;
    if (!ep || ep->closed)
        return tnt__error(TNT_ERR_PEER_LOST, "shm: send on a closed "
                          "connection");
    if (hdr_len > SHM_HDR_MAX)
        return tnt__error(TNT_ERR_INTERNAL, "shm: header of %zu bytes",
                          hdr_len);
    shm_sreq_t *r = sreq_get(ctx);
    if (!r)
        return tnt__error(TNT_ERR_NO_MEMORY, "shm: out of memory");
    int rndv = len >= ctx->cma_min &&
               atomic_load(&ep->seg->can_read[1 - ep->side]);
    r->frame.type = rndv ? SHM_RNDV : SHM_EAGER;
    r->frame.hdr_len = (uint32_t)hdr_len;
    r->frame.payload_len = len;
    r->frame.addr = (uint64_t)(uintptr_t)payload;
    r->frame.id = ++ep->next_id;
    r->hdr = hdr;
    r->payload = rndv ? NULL : payload;
    r->total = sizeof(r->frame) + hdr_len + (rndv ? 0 : len);
    r->cookie = cookie;
    if (!ep->sq_head && write_sreq(ep, r)) {
        if (rndv) {
            r->next = ep->rndv;
            ep->rndv = r;
            return TNT_INPROGRESS;
        }
        sreq_put(ctx, r);
        return TNT_SUCCESS;
    }
    enqueue(ep, r);
    return TNT_INPROGRESS;
}

/* ---- a closed pair's tail (shm_tail.c) ----------------------------- */

/* Make r independent of the core's memory: a copy of what is left to
 * write (of a message begun, the payload's rest; of one not begun, header
 * and payload). No upcall when it is done. 0, or -1 without memory. */
static int tail_copy(shm_sreq_t *r)
{
    size_t hlen = r->frame.hdr_len, head_len = sizeof(r->frame) + hlen;
    r->internal = 1;
    if (r->done >= head_len) {
        size_t rest = r->total - r->done;
        unsigned char *c = malloc(rest ? rest : 1);
        if (!c)
            return -1;
        if (rest)
            memcpy(c, (const unsigned char *)r->payload +
                          (r->done - head_len), rest);
        r->owned = c;
        r->payload = c;
        r->total = head_len + rest;
        r->done = head_len;
        return 0;
    }
    size_t plen = r->total - head_len; /* 0 for RNDV and ACK frames */
    unsigned char *c = malloc(hlen + plen ? hlen + plen : 1);
    if (!c)
        return -1;
    if (hlen)
        memcpy(c, r->hdr, hlen);
    if (plen)
        memcpy(c + hlen, r->payload, plen);
    r->owned = c;
    r->hdr = c;
    r->payload = c + hlen;
    return 0;
}

int tnt__shm_tail_sends(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    shm_sreq_t *r = ep->sq_head, *kept = NULL, **tail = &kept;
    ep->sq_head = ep->sq_tail = NULL;
    /* Only the first can be partly written; without memory for its rest
     * nothing behind it could stay in frame either. */
    int in_frame = 1;
    for (int first = 1; r; first = 0) {
        shm_sreq_t *next = r->next;
        int keep = (first && r->done > 0) || (!r->cookie && !r->internal);
        if (keep && in_frame && tail_copy(r) == 0) {
            r->next = NULL;
            *tail = r;
            tail = &r->next;
            ep->sq_tail = r;
        } else {
            if (first && r->done > 0)
                in_frame = 0;
            sreq_put(ctx, r);
        }
        r = next;
    }
    ep->sq_head = kept;
    /* Rendezvous sends awaiting their ACK: their frames are whole in the
     * ring; nothing more is owed on them. */
    while (ep->rndv) {
        shm_sreq_t *d = ep->rndv;
        ep->rndv = d->next;
        sreq_put(ctx, d);
    }
    return kept != NULL;
}

int tnt__shm_tail_step(shm_ep_t *ep)
{
    /* The peer may be finishing its own frame to this side: take it off
     * its ring (dropped), so that neither waits for the other's room. */
    unsigned char sink[4096];
    do {
        int got = 0;
        while (tnt__shm_ring_get(ep->rx, ep->cap, sink, sizeof(sink)) > 0)
            got = 1;
        if (got && tnt__shm_ring_wake_producer(ep->rx))
            wake_peer(ep);
    } while (tnt__shm_ring_consumer_sleep(ep->rx));
    while (ep->sq_head) {
        shm_sreq_t *r = ep->sq_head;
        if (!write_sreq(ep, r))
            return 0;
        ep->sq_head = r->next;
        if (!ep->sq_head)
            ep->sq_tail = NULL;
        sreq_put(ep->ctx, r);
    }
    return 1;
}

/* ---- receiving ----------------------------------------------------- */

static void ack_in(shm_ep_t *ep, uint64_t id)
{
    shm_ctx_t *ctx = ep->ctx;
    for (shm_sreq_t **pp = &ep->rndv; *pp; pp = &(*pp)->next)
        if ((*pp)->frame.id == id) {
            shm_sreq_t *r = *pp;
            *pp = r->next;
            void *cookie = r->cookie;
            sreq_put(ctx, r);
            ctx->env.on_send_done(ctx->env.core, cookie);
            return;
        }
    tnt__shm_fail(ep, "acknowledgement of an unknown send");
}

/* Pull a rendezvous payload out of the sender's memory. */
static int pull(shm_ep_t *ep, unsigned char *dest, uint64_t addr,
                size_t len)
{
    while (len) {
        struct iovec l = {dest, len};
        struct iovec r = {(void *)(uintptr_t)addr, len};
        ssize_t n = process_vm_readv(ep->pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            return -1;
        }
        dest += n;
        addr += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

static void send_ack(shm_ep_t *ep, uint64_t id)
{
    shm_sreq_t *r = sreq_get(ep->ctx);
    if (!r) {
        tnt__shm_fail(ep, "out of memory for an acknowledgement");
        return;
    }
    r->frame.type = SHM_ACK;
    r->frame.id = id;
    r->total = sizeof(r->frame);
    r->internal = 1;
    enqueue(ep, r);
}

/* A frame and header are in the ring: start the message. 0 to go on. */
static int message_in(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    shm_frame_t *f = &ep->rframe;
    void *dest = NULL, *cookie = NULL;
    tnt_result_t rc = ctx->env.on_header(ctx->env.core, ep->peer, ep->rhdr,
                                         f->hdr_len, f->payload_len, &dest,
                                         &cookie);
    if (ep->closed)
        return -1;
    if (rc < 0) {
        tnt__shm_fail(ep, tnt_last_error());
        return -1;
    }
    if (f->type == SHM_RNDV) {
        if (pull(ep, dest, f->addr, f->payload_len) != 0) {
            /* A sender that failed may have freed that memory already,
             * and queued a notice that says why behind this frame: read
             * on to the end of what is in the ring (drain) before
             * failing the pair. The payload is never reported landed, so
             * its operation cannot complete. */
            if (!ep->pull_failed[0])
                snprintf(ep->pull_failed, sizeof(ep->pull_failed),
                         "process_vm_readv from pid %d: %s", (int)ep->pid,
                         strerror(errno));
            return 0;
        }
        send_ack(ep, f->id);
        if (ep->closed)
            return -1;
    } else if (f->payload_len) {
        ep->in_payload = 1;
        ep->dest = dest;
        ep->left = f->payload_len;
        ep->rcookie = cookie;
        return 0;
    }
    ctx->env.on_payload(ctx->env.core, ep->peer, cookie);
    return ep->closed ? -1 : 0;
}

/* Take one step on the receive side: 1 progress, 0 nothing to do, -1 the
 * endpoint is gone. */
static int recv_step(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    if (ep->in_payload) {
        tnt__shm_warm_ring(ep, 0, atomic_load_explicit(&ep->rx->head,
                                                       memory_order_relaxed) +
                                      tnt__shm_ring_avail(ep->rx));
        size_t n = tnt__shm_ring_get(ep->rx, ep->cap, ep->dest, ep->left);
        if (n == 0)
            return 0;
        ep->dest += n;
        ep->left -= n;
        if (ep->left == 0) {
            ep->in_payload = 0;
            ctx->env.on_payload(ctx->env.core, ep->peer, ep->rcookie);
        }
        return ep->closed ? -1 : 1;
    }
    shm_frame_t *f = &ep->rframe;
    if (!tnt__shm_ring_peek(ep->rx, ep->cap, f, sizeof(*f)))
        return 0;
    tnt__shm_warm_ring(ep, 0, atomic_load_explicit(&ep->rx->head,
                                                   memory_order_relaxed) +
                                  tnt__shm_ring_avail(ep->rx));
    const char *why = NULL;
    if (f->type != SHM_EAGER && f->type != SHM_RNDV && f->type != SHM_ACK)
        why = "unknown frame type";
    else if (f->hdr_len > SHM_HDR_MAX || (f->type == SHM_ACK && f->hdr_len))
        why = "frame header too long";
    if (why) {
        tnt__shm_fail(ep, why);
        return -1;
    }
    if (tnt__shm_ring_avail(ep->rx) < sizeof(*f) + f->hdr_len)
        return 0;
    tnt__shm_ring_get(ep->rx, ep->cap, f, sizeof(*f));
    tnt__shm_ring_get(ep->rx, ep->cap, ep->rhdr, f->hdr_len);
    if (f->type == SHM_ACK) {
        ack_in(ep, f->id);
        return ep->closed ? -1 : 1;
    }
    return message_in(ep) < 0 ? -1 : 1;
}

/* Take what is in the ring, wake a producer waiting for the room, send
 * what waits: 1 if a message arrived, 0 if not, -1 if the endpoint
 * failed. */
static int drain(shm_ep_t *ep)
{
    int moved = 0, rc;
    while ((rc = recv_step(ep)) > 0)
        moved = 1;
    if (rc < 0)
        return -1;
    if (ep->pull_failed[0]) {
        tnt__shm_fail(ep, ep->pull_failed);
        return -1;
    }
    if (moved && tnt__shm_ring_wake_producer(ep->rx))
        wake_peer(ep);
    flush(ep);
    return moved;
}

void tnt__shm_progress(shm_ep_t *ep)
{
    for (;;) {
        if (drain(ep) < 0 || ep->closed)
            return;
        if (!tnt__shm_ring_consumer_sleep(ep->rx))
            return;
    }
}

int tnt__shm_poll(void *vctx, unsigned flags)
{
    shm_ctx_t *ctx = vctx;
    int arm = (flags & TNT_POLL_ARM) != 0;
    int moved = 0;
    /* An upcall may close endpoints: they stay in memory (graveyard)
     * until the next callback, and are skipped. */
    for (shm_ep_t *ep = ctx->eps, *next; ep; ep = next) {
        next = ep->next;
        if (ep->closed || !ep->announced || !ep->rx)
            continue;
        if (arm) {
            tnt__shm_progress(ep);
            continue;
        }
        tnt__shm_ring_consumer_awake(ep->rx);
        if ((tnt__shm_ring_avail(ep->rx) || ep->sq_head) && drain(ep) > 0)
            moved = 1;
    }
    return moved;
}

void tnt__shm_ep_cb(void *arg, uint32_t events)
{
    (void)events;
    shm_ep_t *ep = arg;
    tnt__shm_free_graveyard(ep->ctx);
    uint64_t v;
    if (read(ep->efd_in, &v, sizeof(v)) < 0 && errno != EAGAIN)
        ep->ctx->env.log(ep->ctx->env.core, TNT_LOG_DEBUG, "shm: eventfd "
                         "read: %s", strerror(errno));
    tnt__shm_progress(ep);
}
