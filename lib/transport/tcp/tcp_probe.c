/*
 * Proving that a rank which has not connected yet is gone.
 *
 * The lower rank of a pair connects and the higher one waits. A rank
 * killed just after it registered leaves its connections in their
 * handshake: the waiting side sees a connection close before its proof
 * (or before its hello) and cannot tell it from a stranger's, so without
 * more it would wait for the dead rank until TNT_TIMEOUT.
 *
 * The close itself proves nothing: anyone may connect, claim a rank in a
 * hello and close. What proves the death is the dead rank's own port: a
 * rank listens for its whole life, so when a connection to the address
 * it registered at the bootstrap is refused (ECONNREFUSED: nothing
 * listens there), the rank's process, or at least its communicator, is
 * gone. A stranger cannot make a live rank's port refuse connections
 * (an on-path attacker forging resets is outside the threat model,
 * docs/security.md). So a suspicious close only makes this rank ask:
 * it connects to the suspect's port and sends a probe hello
 * (TCP_PROBE_MAGIC); a live rank answers with its challenge, which
 * proves the job key (alive), and the probe closes. Refused: the rank is
 * lost, reported as a lost peer. Anything else (a reset, a close, no
 * answer: a dying process's port may still hold the connection in its
 * queue) proves nothing either way, and the probe is repeated.
 *
 * The cost a stranger can cause is bounded: one probe per suspect at a
 * time and at most one every TCP_PROBE_GAP_S; a close before any hello
 * (the connector may die before it sends one) suspects the lower ranks
 * not connected yet whose registered IP is the connection's, at most
 * TCP_SWEEP_MAX of them per TCP_SWEEP_GAP_S.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/sockaddr.h"
#include "transport/tcp/tcp_internal.h"

#define TCP_PROBE_GAP_S 0.1
#define TCP_SWEEP_GAP_S 1.0
#define TCP_SWEEP_MAX 64
/* Probes of one rank in a row that prove nothing, before giving up (the
 * operation deadline still applies). */
#define TCP_PROBE_TRIES 100

enum { PROBE_CONNECTING, PROBE_CHALLENGE_IN };
enum { PROBE_ALIVE, PROBE_DEAD, PROBE_UNSURE };

typedef struct tcp_probe {
    tcp_ctx_t *ctx;
    int rank;
    int fd;            /* -1: none in flight */
    int state;
    int wanted;        /* another probe is asked for */
    int lost;          /* reported lost: never again */
    int tries;         /* unsure answers in a row */
    double last;       /* when the last probe started */
    size_t got;
    tcp_hello_t hello;
    unsigned char buf[sizeof(tcp_challenge_t)];
} tcp_probe_t;

int tnt__tcp_has_ep(const tcp_ctx_t *ctx, int rank)
{
    for (const tcp_ep_t *ep = ctx->eps; ep; ep = ep->next)
        if (ep->peer == rank && !ep->closed)
            return 1;
    return 0;
}

static int have_service(const tcp_ctx_t *ctx)
{
    return TNT_ENV_HAS(&ctx->env, peer_addr) && ctx->env.peer_addr;
}

static tcp_probe_t *probes(tcp_ctx_t *ctx)
{
    if (!ctx->probes) {
        ctx->probes = calloc((size_t)ctx->env.nranks, sizeof(tcp_probe_t));
        for (int r = 0; ctx->probes && r < ctx->env.nranks; r++) {
            ctx->probes[r].ctx = ctx;
            ctx->probes[r].rank = r;
            ctx->probes[r].fd = -1;
        }
    }
    return ctx->probes;
}

/* The suspect's registered address, 0 if it has none for TCP. */
static int suspect_addr(tcp_ctx_t *ctx, int rank, struct sockaddr_storage *ss,
                        socklen_t *len)
{
    unsigned char blob[TNT_TRANSPORT_ADDR_MAX];
    size_t n = ctx->env.peer_addr(ctx->env.core, rank, blob, sizeof(blob));
    return n && tnt__addr_blob_decode(blob, n, ss, len) == TNT_SUCCESS;
}

static int may_suspect(tcp_ctx_t *ctx, int rank)
{
    return rank >= 0 && rank < ctx->env.nranks && rank != ctx->env.rank &&
           have_service(ctx) && !tnt__tcp_has_ep(ctx, rank) &&
           (!ctx->probes || (!ctx->probes[rank].lost &&
                             ctx->probes[rank].tries < TCP_PROBE_TRIES));
}

static void start(tcp_probe_t *pr);

static void finish(tcp_probe_t *pr, int outcome)
{
    tcp_ctx_t *ctx = pr->ctx;
    if (pr->fd >= 0) {
        ctx->env.unwatch_fd(ctx->env.core, pr->fd);
        close(pr->fd);
        pr->fd = -1;
    }
    if (outcome == PROBE_DEAD) {
        pr->lost = 1;
        pr->wanted = 0;
        ctx->env.on_peer_error(ctx->env.core, pr->rank, TNT_ERR_PEER_LOST,
                               "it closed its connection during the "
                               "handshake, and its port now refuses "
                               "connections: the process is gone");
        return;
    }
    if (outcome == PROBE_ALIVE) {
        pr->tries = 0;
        ctx->env.log(ctx->env.core, TNT_LOG_INFO, "rank %d: rank %d "
                     "answers on its port: the connection that closed in "
                     "its handshake was not its death", ctx->env.rank,
                     pr->rank);
    }
    else if (++pr->tries < TCP_PROBE_TRIES)
        pr->wanted = 1;
    /* A repeat waits for its gap (tnt__tcp_probe_tick). */
}

static void probe_cb(void *arg, uint32_t events)
{
    tcp_probe_t *pr = arg;
    tcp_ctx_t *ctx = pr->ctx;
    if (pr->state == PROBE_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(pr->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err) {
            finish(pr, err == ECONNREFUSED ? PROBE_DEAD : PROBE_UNSURE);
            return;
        }
        if (!(events & TNT_FD_WRITE))
            return;
        pr->hello = (tcp_hello_t){TCP_PROBE_MAGIC, TCP_PROTO_VERSION,
                                  ctx->env.job_id, ctx->env.comm_id,
                                  ctx->env.rank, pr->rank, 0,
                                  (uint16_t)ctx->nsock, {0}};
        ctx->env.random_bytes(ctx->env.core, pr->hello.nonce,
                              sizeof(pr->hello.nonce));
        if (send(pr->fd, &pr->hello, sizeof(pr->hello),
                 MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(pr->hello)) {
            finish(pr, PROBE_UNSURE);
            return;
        }
        pr->state = PROBE_CHALLENGE_IN;
        ctx->env.modify_fd(ctx->env.core, pr->fd, TNT_FD_READ, probe_cb, pr);
        return;
    }
    ssize_t n = recv(pr->fd, pr->buf + pr->got, sizeof(pr->buf) - pr->got,
                     MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        finish(pr, PROBE_UNSURE);
        return;
    }
    pr->got += (size_t)n;
    if (pr->got < sizeof(pr->buf))
        return;
    tcp_challenge_t ch;
    unsigned char in[TCP_AUTH_INPUT_MAX];
    int ok = !tnt__tcp_challenge_parse(pr->buf, sizeof(pr->buf), &ch);
    if (ok) {
        size_t k = tnt__tcp_auth_input(0, &pr->hello, ch.nonce, in);
        ok = ctx->env.auth_verify(ctx->env.core, in, k, ch.mac);
    }
    finish(pr, ok ? PROBE_ALIVE : PROBE_UNSURE);
}

static void start(tcp_probe_t *pr)
{
    tcp_ctx_t *ctx = pr->ctx;
    struct sockaddr_storage ss;
    socklen_t len;
    pr->wanted = 0;
    pr->last = tnt__now();
    pr->got = 0;
    pr->state = PROBE_CONNECTING;
    if (!suspect_addr(ctx, pr->rank, &ss, &len)) {
        pr->tries = TCP_PROBE_TRIES; /* nothing to ask */
        return;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0) {
        finish(pr, PROBE_UNSURE);
        return;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 &&
        errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        finish(pr, e == ECONNREFUSED ? PROBE_DEAD : PROBE_UNSURE);
        return;
    }
    if (ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ | TNT_FD_WRITE,
                          probe_cb, pr) != TNT_SUCCESS) {
        close(fd);
        finish(pr, PROBE_UNSURE);
        return;
    }
    pr->fd = fd;
}

/* Probe now, or as soon as the gap allows. */
static void kick(tcp_ctx_t *ctx, int rank)
{
    tcp_probe_t *all = probes(ctx);
    if (!all)
        return;
    tcp_probe_t *pr = &all[rank];
    if (pr->fd >= 0 || tnt__now() - pr->last < TCP_PROBE_GAP_S)
        pr->wanted = 1;
    else
        start(pr);
}

void tnt__tcp_suspect(tcp_ctx_t *ctx, int rank)
{
    if (may_suspect(ctx, rank))
        kick(ctx, rank);
}

static void sweep(tcp_ctx_t *ctx)
{
    ctx->sweep_wanted = 0;
    ctx->sweep_last = tnt__now();
    int lower = ctx->env.rank, done = 0;
    for (int k = 0; k < lower && done < TCP_SWEEP_MAX; k++) {
        int r = (ctx->sweep_next + k) % lower;
        struct sockaddr_storage ss;
        socklen_t len;
        char ip[48];
        if (!may_suspect(ctx, r) || !suspect_addr(ctx, r, &ss, &len))
            continue;
        tnt__sockaddr_ip((struct sockaddr *)&ss, ip, sizeof(ip));
        if (strcmp(ip, ctx->sweep_ip) != 0)
            continue;
        kick(ctx, r);
        if (++done == TCP_SWEEP_MAX)
            ctx->sweep_next = (r + 1) % lower;
    }
}

void tnt__tcp_suspect_ip(tcp_ctx_t *ctx, const char *ip)
{
    /* Only lower ranks connect here. */
    if (ctx->env.rank == 0 || !have_service(ctx))
        return;
    snprintf(ctx->sweep_ip, sizeof(ctx->sweep_ip), "%s", ip);
    if (tnt__now() - ctx->sweep_last < TCP_SWEEP_GAP_S)
        ctx->sweep_wanted = 1;
    else
        sweep(ctx);
}

void tnt__tcp_probe_tick(tcp_ctx_t *ctx)
{
    if (ctx->sweep_wanted && tnt__now() - ctx->sweep_last >= TCP_SWEEP_GAP_S)
        sweep(ctx);
    if (!ctx->probes)
        return;
    double now = tnt__now();
    for (int r = 0; r < ctx->env.nranks; r++) {
        tcp_probe_t *pr = &ctx->probes[r];
        if (pr->wanted && pr->fd < 0 && now - pr->last >= TCP_PROBE_GAP_S) {
            if (may_suspect(ctx, r))
                start(pr);
            else
                pr->wanted = 0;
        }
    }
}

void tnt__tcp_probe_finalize(tcp_ctx_t *ctx)
{
    if (!ctx->probes)
        return;
    for (int r = 0; r < ctx->env.nranks; r++)
        if (ctx->probes[r].fd >= 0) {
            ctx->env.unwatch_fd(ctx->env.core, ctx->probes[r].fd);
            close(ctx->probes[r].fd);
        }
    free(ctx->probes);
    ctx->probes = NULL;
}
