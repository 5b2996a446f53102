/*
 * The shared-memory transport: rendezvous, segments and lifecycle (the
 * data path is in shm_io.c). See docs/shm.md for the design.
 *
 * Every rank listens on an abstract unix socket named after its pid, a
 * per-process counter and the job; abstract names vanish with the
 * socket, so a killed rank leaves nothing in the filesystem. Anyone on
 * the host can read that name in /proc/net/unix and connect, so the
 * acceptor first checks the peer's user (SO_PEERCRED) and then both sides
 * prove the job key (shm_internal.h) before any descriptor is passed. The
 * lower rank of a pair creates the pair's segment as a memfd (never
 * visible in /dev/shm; its size sealed) and two eventfds, and passes them
 * with its proof; both sides close the memfd once mapped, so the memory
 * goes away with the last mapping. Each side then
 * tests whether it may read the other's memory with process_vm_readv (the
 * single-copy path) and says so in the segment. The socket stays open:
 * when the peer dies the kernel closes it, and its hang-up names the rank
 * that was lost.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/param_table.h"
#include "transport/shm/shm_internal.h"
#include "transport/transport.h"

#define SHM_PROBE_VALUE 0x626f72705f746e74ull /* "tnt_prob" */

volatile uint64_t tnt__shm_probe_word = SHM_PROBE_VALUE;
static atomic_uint next_instance;

/* The job id in the name keeps jobs apart whose pids may coincide (PID
 * namespaces sharing one network namespace). */
static socklen_t sock_name(struct sockaddr_un *sa, uint64_t job, pid_t pid,
                           unsigned instance)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    /* sun_path[0] = 0: the abstract namespace. */
    int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
                     "tnt-shm-%d-%u-%016llx", (int)pid, instance,
                     (unsigned long long)job);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Each side's part of the segment starts a page (shm_align.h); the pair
 * areas' sizes are multiples of TNT_TP_AREA_ALIGN (shm_init checks). */
_Static_assert(sizeof(shm_ring_t) % TNT_SHM_APART == 0 &&
               SHM_RING_BYTES % TNT_SHM_APART == 0 &&
               TNT_TP_AREA_ALIGN % TNT_SHM_APART == 0 &&
               offsetof(shm_seg_t, rings) % TNT_SHM_APART == 0,
               "sides' fields on separate pages");

/* The header ends where the rings start, on a page. */
_Static_assert(sizeof(shm_seg_t) == offsetof(shm_seg_t, rings),
               "the rings follow the header");

/* Where context c's pair areas start: after the rings (on a page), each
 * set its slots, then its staging areas from the next page (their
 * buffers are page-aligned in their struct); set c + 1 where set c
 * ends. Set 0 lies where the only set lay before SHM_AREA_CONTEXTS. */
static size_t slot_off(const size_t *area_bytes, size_t cap, unsigned c)
{
    size_t a = TNT_TP_AREA_ALIGN;
    size_t set = (2 * area_bytes[TNT_TP_AREA_SLOTS] + a - 1) / a * a +
                 2 * area_bytes[TNT_TP_AREA_STAGES];
    return sizeof(shm_seg_t) + 2 * (sizeof(shm_ring_t) + cap) + c * set;
}

static size_t stage_off(const size_t *area_bytes, size_t cap, unsigned c)
{
    size_t end = slot_off(area_bytes, cap, c) +
                 2 * area_bytes[TNT_TP_AREA_SLOTS];
    size_t a = TNT_TP_AREA_ALIGN;
    return (end + a - 1) / a * a;
}

size_t tnt__shm_seg_len(const size_t *area_bytes, size_t cap)
{
    return slot_off(area_bytes, cap, SHM_AREA_CONTEXTS);
}

/* Populate [from, from + len) of the segment in this process's mapping,
 * so that the messages passing through it take no page faults (without
 * it the first 20-100 allreduces of 32 KiB at p = 4 took about 1 ms
 * instead of 50-100 us: docs/performance.md, "Populated segments"). As
 * the parts come to be used rather than at creation, so that a pair
 * that never talks costs no memory and no start-up time (shm_internal.h).
 * Best effort: where the kernel lacks MADV_POPULATE_WRITE (before 5.14)
 * the pages fault in as they are first touched, which is only slower. */
static void populate(void *from, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    (void)madvise(from, len, MADV_POPULATE_WRITE);
#else
    (void)from;
    (void)len;
#endif
}

void tnt__shm_warm(shm_ep_t *ep, unsigned c)
{
    if ((ep->warm & (1u << c)) || !ep->seg)
        return;
    ep->warm |= 1u << c;
    /* Both sides' slots, from a page (the layout's static assertions). */
    populate((unsigned char *)ep->seg +
                 slot_off(ep->ctx->area_bytes, ep->cap, c),
             2 * ep->ctx->area_bytes[TNT_TP_AREA_SLOTS]);
}

void tnt__shm_warm_ring(shm_ep_t *ep, int tx, uint64_t end)
{
    size_t *warm = tx ? &ep->tx_warm : &ep->rx_warm;
    if (end <= *warm || *warm >= ep->cap || !ep->seg)
        return;
    /* A step ahead, in whole steps (cap is a multiple of the step). */
    size_t to = end >= ep->cap - SHM_WARM_STEP
                    ? ep->cap
                    : ((size_t)end / SHM_WARM_STEP + 1) * SHM_WARM_STEP;
    shm_ring_t *r = tx ? ep->tx : ep->rx;
    populate(r->data + *warm, to - *warm);
    *warm = to;
}

static void ep_map_rings(shm_ep_t *ep)
{
    size_t stride = sizeof(shm_ring_t) + ep->cap;
    shm_ring_t *r0 = (shm_ring_t *)ep->seg->rings;
    shm_ring_t *r1 = (shm_ring_t *)(ep->seg->rings + stride);
    ep->tx = ep->side == 0 ? r0 : r1;
    ep->rx = ep->side == 0 ? r1 : r0;
}

/* Can this process read `addr` in process `pid`? Tells whether the
 * single-copy path works between the two (ptrace rules, seccomp). */
static int probe_cma(pid_t pid, uint64_t addr)
{
    uint64_t v = 0;
    struct iovec l = {&v, sizeof(v)};
    struct iovec r = {(void *)(uintptr_t)addr, sizeof(v)};
    return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof(v) &&
           v == SHM_PROBE_VALUE;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static shm_expect_t expect(const shm_ctx_t *ctx)
{
    shm_expect_t e = {ctx->env.job_id, ctx->env.comm_id, ctx->env.rank,
                      ctx->env.nranks};
    return e;
}

static int peer_cred(int fd, pid_t *pid, uid_t *uid)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return -1;
    *pid = cr.pid;
    *uid = cr.uid;
    return 0;
}

/* Peers must run as this user (or root, who could read the job key and
 * this process's memory anyway) unless TNT_SHM_ANY_UID=1: the key is the
 * proof, the user check keeps other users from even reaching it. */
static int uid_allowed(const shm_ctx_t *ctx, uid_t uid)
{
    return ctx->any_uid || uid == getuid() || uid == 0;
}

/* ---- endpoints ------------------------------------------------------- */

static shm_ep_t *ep_new(shm_ctx_t *ctx, int peer, int side)
{
    shm_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return NULL;
    ep->ctx = ctx;
    ep->peer = peer;
    ep->side = side;
    ep->sock = ep->efd_in = ep->efd_out = ep->memfd = -1;
    ep->cap = SHM_RING_BYTES;
    ep->next = ctx->eps;
    ctx->eps = ep;
    return ep;
}

void tnt__shm_ep_release(shm_ctx_t *ctx, shm_ep_t *ep)
{
    if (ep->sock_watched)
        ctx->env.unwatch_fd(ctx->env.core, ep->sock);
    if (ep->sock >= 0)
        close(ep->sock);
    if (ep->efd_watched)
        ctx->env.unwatch_fd(ctx->env.core, ep->efd_in);
    if (ep->efd_in >= 0)
        close(ep->efd_in);
    if (ep->efd_out >= 0)
        close(ep->efd_out);
    if (ep->memfd >= 0)
        close(ep->memfd);
    if (ep->pending)
        ctx->npending--;
    ep->pending = 0;
    tnt__shm_drop_sends(ep);
    for (shm_ep_t **pp = &ctx->eps; *pp; pp = &(*pp)->next)
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    /* The mapping outlives close: a callback that is still running on
     * this endpoint may look at it until the next callback starts. */
    ep->next = ctx->graveyard;
    ctx->graveyard = ep;
}

/* The transport's own closes: the pair failed, or finalize. */
static void ep_close(void *vctx, void *vep)
{
    shm_ctx_t *ctx = vctx;
    shm_ep_t *ep = vep;
    if (!ep || ep->closed)
        return;
    ep->closed = 1;
    tnt__shm_ep_release(ctx, ep);
}

/* The core's close (tnt_transport_t.close, TNT_TP_CLOSE_FINISHES): a
 * message partly in the ring and the notices queued are finished first,
 * in the background, without upcalls (shm_tail.c). */
static void ep_close_by_core(void *vctx, void *vep)
{
    shm_ctx_t *ctx = vctx;
    shm_ep_t *ep = vep;
    if (!ep || ep->closed)
        return;
    ep->closed = 1;
    if (!tnt__shm_tail_keep(ep))
        tnt__shm_ep_release(ctx, ep);
}

void tnt__shm_free_graveyard(shm_ctx_t *ctx)
{
    while (ctx->graveyard) {
        shm_ep_t *ep = ctx->graveyard;
        ctx->graveyard = ep->next;
        if (ep->seg)
            munmap(ep->seg, ep->seg_len);
        free(ep);
    }
}

void tnt__shm_fail(shm_ep_t *ep, const char *what)
{
    shm_ctx_t *ctx = ep->ctx;
    int peer = ep->peer;
    /* Only endpoints the core knows of are reported: the lower rank's
     * (the core asked for them) and announced ones. */
    int known = ep->announced || ep->side == 0;
    ep_close(ctx, ep);
    if (known) {
        ctx->env.on_peer_error(ctx->env.core, peer, TNT_ERR_PEER_LOST, what);
        return;
    }
    if (ctx->evicting)
        ctx->strangers_evicted++;
    else
        ctx->strangers_refused++;
    ctx->env.log(ctx->env.core, TNT_LOG_WARNING | TNT_LOG_EVERY_RANK,
                     "rank %d: dropped shared-memory connection from pid "
                     "%d (uid %d): %s", ctx->env.rank, (int)ep->pid,
                     (int)ep->uid, what);
}

/* A connector whose hello checked out (a rank of this job and
 * communicator) closed before the handshake ended: that rank freed its
 * communicator and left, which is no attack and no failure (a job that
 * frees at once after creating). Only DEBUG; an endpoint the core knows
 * of is reported as usual. Anything else stays tnt__shm_fail's warning. */
static void hello_peer_left(shm_ep_t *ep, const char *what)
{
    shm_ctx_t *ctx = ep->ctx;
    if (ep->announced || ep->side == 0) {
        tnt__shm_fail(ep, what);
        return;
    }
    ctx->env.log(ctx->env.core, TNT_LOG_DEBUG, "rank %d: rank %d (pid %d) "
                 "closed its shared-memory connection during the handshake "
                 "(%s): it has left", ctx->env.rank, (int)ep->hello.from,
                 (int)ep->pid, what);
    pid_t pid = ep->pid;
    ep_close(ctx, ep);
    /* Left, or died in its handshake: once its process has exited the
     * core hears of it, and fails only what still needed it
     * (shm_death.c). */
    tnt__shm_suspect(ctx, pid);
}

static void announce(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    ep->announced = 1;
    ctx->env.on_connected(ctx->env.core, ep->peer, ep);
}

static tnt_result_t watch_data(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    tnt_result_t rc = ctx->env.watch_fd(ctx->env.core, ep->efd_in,
                                        TNT_FD_READ, tnt__shm_ep_cb, ep);
    ep->efd_watched = rc == TNT_SUCCESS;
    return rc;
}

/* ---- the socket: the handshake, then hang-up ---------------------- */

/* Receive one message and the descriptors that came with it. Every
 * descriptor received is either handed out in fds (at most max) or
 * closed here, so that a stranger cannot make this process keep any.
 * Returns the bytes read (-1 with errno on error); *nfds is -1 when the
 * control data was malformed, cut short or held more than max. */
static ssize_t recv_with_fds(int sock, void *buf, size_t len, int *fds,
                             int max, int *nfds)
{
    /* Room for more descriptors than expected, so that extra ones are
     * seen (and closed) rather than silently cut off. */
    union {
        char buf[CMSG_SPACE(16 * sizeof(int))];
        struct cmsghdr align;
    } cbuf;
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = cbuf.buf,
                       .msg_controllen = sizeof(cbuf.buf)};
    ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    *nfds = 0;
    if (n < 0)
        return n;
    /* A message longer than buf is cut (SOCK_SEQPACKET) and shows as
     * the wrong length; cut control data is refused outright. */
    int bad = (m.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            bad = 1;
            continue;
        }
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*nfds < max && !bad)
                fds[(*nfds)++] = fd;
            else {
                bad = 1;
                close(fd);
            }
        }
    }
    if (bad) {
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = -1;
    }
    return n;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* The acceptor's side, step 1: the connector's hello (no descriptors
 * yet). Answer with the challenge. */
static void hello_in(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    unsigned char buf[sizeof(shm_hello_t) + 1];
    int fds[4], nfds;
    ssize_t n = recv_with_fds(ep->sock, buf, sizeof(buf), fds, 4, &nfds);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    const char *why = n <= 0 ? "closed before its hello" : NULL;
    if (!why && nfds != 0)
        why = "descriptors before the handshake";
    close_fds(fds, nfds > 0 ? nfds : 0);
    shm_expect_t e = expect(ctx);
    if (!why)
        why = tnt__shm_hello_parse(buf, (size_t)n, &e, &ep->hello);
    if (why) {
        pid_t pid = ep->pid;
        tnt__shm_fail(ep, why);
        if (n <= 0) /* a rank dying in its handshake? (shm_death.c) */
            tnt__shm_suspect(ctx, pid);
        return;
    }
    shm_challenge_t *c = &ep->chal;
    memset(c, 0, sizeof(*c));
    c->magic = SHM_CHAL_MAGIC;
    c->version = SHM_VERSION;
    c->from = ctx->env.rank;
    c->to = ep->hello.from;
    c->probe_addr = (uint64_t)(uintptr_t)&tnt__shm_probe_word;
    ctx->env.random_bytes(ctx->env.core, c->nonce, sizeof(c->nonce));
    unsigned char in[SHM_AUTH_INPUT_MAX];
    size_t len = tnt__shm_auth_input(0, &ep->hello, c, in);
    ctx->env.auth_mac(ctx->env.core, in, len, c->mac);
    if (send(ep->sock, c, sizeof(*c), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        (ssize_t)sizeof(*c)) {
        if (errno == EPIPE || errno == ECONNRESET)
            hello_peer_left(ep, "cannot send the challenge");
        else
            tnt__shm_fail(ep, "cannot send the challenge");
        return;
    }
    ep->challenged = 1;
}

/* The acceptor's side, step 2: the proof with the segment and the
 * eventfds. Nothing received is used before the proof checks out. */
static void proof_in(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    unsigned char buf[sizeof(shm_proof_t) + 1];
    int fds[3] = {-1, -1, -1}, nfds;
    ssize_t n = recv_with_fds(ep->sock, buf, sizeof(buf), fds, 3, &nfds);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    shm_proof_t pr;
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
        hello_peer_left(ep, "closed before its proof");
        return;
    }
    const char *why = n < 0 ? "cannot read its proof" : NULL;
    if (!why)
        why = tnt__shm_proof_parse(buf, (size_t)n, &pr);
    unsigned char in[SHM_AUTH_INPUT_MAX];
    size_t len = tnt__shm_auth_input(1, &ep->hello, &ep->chal, in);
    if (!why && !ctx->env.auth_verify(ctx->env.core, in, len, pr.mac))
        why = "authentication failed (wrong job key, or a replay)";
    size_t bytes = tnt__shm_seg_len(ctx->area_bytes, SHM_RING_BYTES);
    if (!why && nfds < 0)
        why = "malformed descriptors with the proof";
    if (!why)
        why = tnt__shm_fds_check(fds, nfds, bytes);
    for (shm_ep_t *e = ctx->eps; !why && e; e = e->next)
        if (e != ep && e->peer == ep->hello.from)
            why = "second connection from a rank already connected";
    void *seg = MAP_FAILED;
    if (!why) {
        /* Not populated: each part as it is used (shm_internal.h). */
        seg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                   fds[0], 0);
        if (seg == MAP_FAILED)
            why = "cannot map the segment";
    }
    if (!why && (((shm_seg_t *)seg)->magic != SHM_MAGIC ||
                 ((shm_seg_t *)seg)->ring_bytes != SHM_RING_BYTES))
        why = "segment not initialised";
    if (why) {
        if (seg != MAP_FAILED)
            munmap(seg, bytes);
        close_fds(fds, nfds > 0 ? nfds : 0);
        tnt__shm_fail(ep, why);
        return;
    }
    close(fds[0]);
    ep->efd_in = fds[1];
    ep->efd_out = fds[2];
    ep->seg = seg;
    ep->seg_len = bytes;
    ep->peer = ep->hello.from;
    ep->pending = 0;
    ctx->npending--;
    ep_map_rings(ep);
    atomic_store(&ep->seg->can_read[1],
                 (uint32_t)probe_cma(ep->pid, ep->hello.probe_addr));
    if (watch_data(ep) != TNT_SUCCESS) {
        tnt__shm_fail(ep, "cannot watch the eventfd");
        return;
    }
    announce(ep);
}

/* The connector's side: the acceptor's challenge. Answer with the proof
 * and the descriptors once the acceptor has proved the key. */
static void challenge_in(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    unsigned char buf[sizeof(shm_challenge_t) + 1];
    int fds[4], nfds;
    ssize_t n = recv_with_fds(ep->sock, buf, sizeof(buf), fds, 4, &nfds);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    close_fds(fds, nfds > 0 ? nfds : 0);
    shm_expect_t e = expect(ctx);
    const char *why = n <= 0 ? "peer closed during the handshake"
                    : nfds != 0 ? "descriptors with the challenge" : NULL;
    if (!why)
        why = tnt__shm_challenge_parse(buf, (size_t)n, &e, ep->peer,
                                       &ep->chal);
    unsigned char in[SHM_AUTH_INPUT_MAX];
    size_t len = tnt__shm_auth_input(0, &ep->hello, &ep->chal, in);
    if (!why && !ctx->env.auth_verify(ctx->env.core, in, len, ep->chal.mac))
        why = "the peer failed to prove the job key (another job key?)";
    shm_proof_t pr = {SHM_PROOF_MAGIC, SHM_VERSION, {0}};
    if (!why) {
        len = tnt__shm_auth_input(1, &ep->hello, &ep->chal, in);
        ctx->env.auth_mac(ctx->env.core, in, len, pr.mac);
        /* The peer's incoming eventfd first, then this rank's. */
        int out[3] = {ep->memfd, ep->efd_out, ep->efd_in};
        union {
            char buf[CMSG_SPACE(sizeof(out))];
            struct cmsghdr align;
        } cbuf;
        memset(&cbuf, 0, sizeof(cbuf));
        struct iovec iov = {&pr, sizeof(pr)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                           .msg_control = cbuf.buf,
                           .msg_controllen = sizeof(cbuf.buf)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(out));
        memcpy(CMSG_DATA(c), out, sizeof(out));
        if (sendmsg(ep->sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT) !=
            (ssize_t)sizeof(pr))
            why = "cannot send the proof";
    }
    if (why) {
        tnt__shm_fail(ep, why);
        return;
    }
    close(ep->memfd);
    ep->memfd = -1;
    atomic_store(&ep->seg->can_read[0],
                 (uint32_t)probe_cma(ep->pid, ep->chal.probe_addr));
    ep->hello_done = 1;
    announce(ep);
}

static void sock_cb(void *arg, uint32_t events)
{
    (void)events;
    shm_ep_t *ep = arg;
    tnt__shm_free_graveyard(ep->ctx);
    if (ep->side == 1 && !ep->seg) {
        if (ep->challenged)
            proof_in(ep);
        else
            hello_in(ep);
        return;
    }
    if (ep->side == 0 && !ep->hello_done) {
        challenge_in(ep);
        return;
    }
    char b[16];
    ssize_t n = recv(ep->sock, b, sizeof(b), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    /* Nothing is sent on the socket after the hello: this is the end.
     * Whatever the peer wrote before it went is delivered first. */
    tnt__shm_progress(ep);
    if (ep->closed)
        return;
    char what[128];
    snprintf(what, sizeof(what), "shared-memory peer (pid %d) %s",
             (int)ep->pid, n == 0 ? "exited or closed the connection"
                                  : "connection failed");
    tnt__shm_fail(ep, what);
}

/* Which pending connection gives way when room is needed: never one
 * from a rank's own process (its pid, which the kernel vouches for, is
 * one the bootstrap registered), else the oldest that has not sent its
 * hello yet, else the oldest that has. */
static shm_ep_t *evictable(shm_ctx_t *ctx)
{
    shm_ep_t *silent = NULL, *named = NULL;
    for (shm_ep_t *e = ctx->eps; e; e = e->next) {
        if (!e->pending || e->member)
            continue;
        shm_ep_t **pick = e->challenged ? &named : &silent;
        if (!*pick || e->born < (*pick)->born)
            *pick = e;
    }
    return silent ? silent : named;
}

/* Close the strangers that have not proved the key in time and, when
 * too many are still at it, one more (evictable()): silent connections
 * must not pile up, nor shut the job's own ranks out. Checked at each new
 * connection, which is when room is needed. */
static void expire_strangers(shm_ctx_t *ctx, double now)
{
    shm_ep_t *oldest;
    do {
        oldest = NULL;
        for (shm_ep_t *e = ctx->eps; e; e = e->next)
            if (e->pending && (!oldest || e->born < oldest->born))
                oldest = e;
        if (oldest && now - oldest->born > SHM_HANDSHAKE_WAIT_S)
            tnt__shm_fail(oldest, "no authenticated handshake in time");
        else if (oldest && ctx->npending >= SHM_PENDING_MAX &&
                 (oldest = evictable(ctx)) != NULL) {
            ctx->evicting = 1;
            tnt__shm_fail(oldest, "too many connections in their "
                          "handshake");
            ctx->evicting = 0;
        } else
            oldest = NULL;
    } while (oldest);
}

static void accept_cb(void *arg, uint32_t events)
{
    (void)events;
    shm_ctx_t *ctx = arg;
    tnt__shm_free_graveyard(ctx);
    for (;;) {
        int fd = accept4(ctx->listen_fd, NULL, NULL,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        pid_t pid = -1;
        uid_t uid = (uid_t)-1;
        if (peer_cred(fd, &pid, &uid) != 0 || !uid_allowed(ctx, uid)) {
            ctx->env.log(ctx->env.core, TNT_LOG_WARNING |
                         TNT_LOG_EVERY_RANK, "rank %d: refused "
                         "shared-memory connection from pid %d (uid %d): "
                         "another user (TNT_SHM_ANY_UID=1 admits other "
                         "users that know the job key)", ctx->env.rank,
                         (int)pid, (int)uid);
            close(fd);
            ctx->strangers_refused++;
            continue;
        }
        double now = now_s();
        expire_strangers(ctx, now);
        shm_ep_t *ep = ep_new(ctx, -1, 1);
        if (!ep) {
            close(fd);
            continue;
        }
        ep->sock = fd;
        ep->pid = pid;
        ep->uid = uid;
        ep->born = now;
        ep->pending = 1;
        ep->member = tnt__shm_rank_of_pid(ctx, pid) >= 0;
        ctx->npending++;
        ep->sock_watched = ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ,
                                             sock_cb, ep) == TNT_SUCCESS;
        if (!ep->sock_watched)
            ep_close(ctx, ep);
        else /* a peer's hello is usually here already */
            hello_in(ep);
    }
}

/* ---- the transport's functions -------------------------------------- */

static tnt_result_t shm_listen(void *vctx, void *addr, size_t *addr_len)
{
    shm_ctx_t *ctx = vctx;
    if (*addr_len < sizeof(shm_addr_t))
        return tnt__error(TNT_ERR_INTERNAL, "shm: address buffer too small");
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "shm: socket: %s", strerror(errno));
    struct sockaddr_un sa;
    socklen_t sl = sock_name(&sa, ctx->env.job_id, getpid(), ctx->instance);
    if (bind(fd, (struct sockaddr *)&sa, sl) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return tnt__error(TNT_ERR_SYSTEM, "rank %d: shm: cannot listen on "
                          "@%s: %s", ctx->env.rank, sa.sun_path + 1,
                          strerror(e));
    }
    tnt_result_t rc = ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ,
                                        accept_cb, ctx);
    if (rc != TNT_SUCCESS) {
        close(fd);
        return rc;
    }
    ctx->listen_fd = fd;
    shm_addr_t a = {SHM_MAGIC, (int32_t)getpid(), ctx->instance};
    memcpy(addr, &a, sizeof(a));
    *addr_len = sizeof(a);
    return TNT_SUCCESS;
}

/* The segment of a new pair, as a memfd holding the two rings. */
static int make_segment(shm_ep_t *ep)
{
    size_t len = tnt__shm_seg_len(ep->ctx->area_bytes, ep->cap);
    int fd = memfd_create("tnt-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    void *p = MAP_FAILED;
    /* Sealed at its size: the peer maps it knowing nobody can shrink it
     * under the mapping. Not populated here: only the header's and the
     * rings' control pages are touched now; each side populates a ring
     * as it uses it (tnt__shm_warm_ring). Populating all 4 MiB of
     * every pair at creation made start-up grow as p^2: 2 GB zeroed at
     * p = 32, 8 GB at 64 (docs/scale.md, "Start-up"). */
    if (ftruncate(fd, (off_t)len) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ==
            0)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    ep->seg = p;
    ep->seg_len = len;
    ep->seg->magic = SHM_MAGIC;
    ep->seg->version = SHM_VERSION;
    ep->seg->ring_bytes = ep->cap;
    ep_map_rings(ep);
    /* Both consumers start asleep: the first message wakes them. */
    atomic_store(&ep->tx->armed, 1);
    atomic_store(&ep->rx->armed, 1);
    return fd;
}

static tnt_result_t shm_connect(void *vctx, int peer, const void *addr,
                                size_t addr_len)
{
    shm_ctx_t *ctx = vctx;
    shm_addr_t a;
    if (addr_len != sizeof(a))
        return tnt__error(TNT_ERR_PROTOCOL, "shm: malformed address of rank "
                          "%d", peer);
    memcpy(&a, addr, sizeof(a));
    if (a.magic != SHM_MAGIC)
        return tnt__error(TNT_ERR_PROTOCOL, "shm: malformed address of rank "
                          "%d", peer);
    shm_ep_t *ep = ep_new(ctx, peer, 0);
    if (!ep)
        return tnt__error(TNT_ERR_NO_MEMORY, "shm: out of memory");
    ep->pid = a.pid;
    const char *what = "memfd_create";
    int memfd = make_segment(ep);
    ep->efd_in = memfd < 0 ? -1 : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ep->efd_out = ep->efd_in < 0 ? -1
                                 : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ep->efd_out >= 0) {
        what = "socket";
        ep->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    }
    struct sockaddr_un sa;
    socklen_t sl = sock_name(&sa, ctx->env.job_id, a.pid, a.instance);
    int ok = ep->sock >= 0;
    if (ok) {
        what = "connect";
        ok = connect(ep->sock, (struct sockaddr *)&sa, sl) == 0;
    }
    pid_t pid = -1;
    uid_t uid = (uid_t)-1;
    if (ok && (peer_cred(ep->sock, &pid, &uid) != 0 || pid != a.pid ||
               !uid_allowed(ctx, uid))) {
        /* Someone else holds the name, or the rank runs as another
         * user: the segment goes to nobody but the rank itself. */
        errno = EPERM;
        what = "peer credentials";
        ok = 0;
    }
    if (ok) {
        ep->memfd = memfd;
        memfd = -1;
        shm_hello_t *h = &ep->hello;
        memset(h, 0, sizeof(*h));
        h->magic = SHM_MAGIC;
        h->version = SHM_VERSION;
        h->job_id = ctx->env.job_id;
        h->comm_id = ctx->env.comm_id;
        h->from = ctx->env.rank;
        h->to = peer;
        h->ring_bytes = (uint32_t)SHM_RING_BYTES;
        h->probe_addr = (uint64_t)(uintptr_t)&tnt__shm_probe_word;
        ctx->env.random_bytes(ctx->env.core, h->nonce, sizeof(h->nonce));
        what = "sending the hello";
        ok = send(ep->sock, h, sizeof(*h), MSG_NOSIGNAL) ==
             (ssize_t)sizeof(*h);
    }
    int e = errno;
    if (memfd >= 0)
        close(memfd);
    if (ok)
        ok = fcntl(ep->sock, F_SETFL, O_NONBLOCK) == 0;
    if (ok)
        ok = ep->sock_watched = ctx->env.watch_fd(ctx->env.core, ep->sock,
                                                  TNT_FD_READ, sock_cb,
                                                  ep) == TNT_SUCCESS;
    if (ok)
        ok = watch_data(ep) == TNT_SUCCESS;
    if (!ok) {
        ep_close(ctx, ep);
        return tnt__error(TNT_ERR_CONNECT, "rank %d: shm: cannot reach rank "
                          "%d (pid %d, @%s): %s: %s (is it on this host and "
                          "in this network namespace?)", ctx->env.rank, peer,
                          (int)a.pid, sa.sun_path + 1, what, strerror(e));
    }
    return TNT_SUCCESS;
}

static void shm_finalize(void *vctx)
{
    shm_ctx_t *ctx = vctx;
    if (!ctx)
        return;
    tnt__shm_watch_finalize(ctx);
    tnt__shm_tail_finish(ctx, now_s() + SHM_TAIL_S);
    while (ctx->eps)
        ep_close(ctx, ctx->eps);
    if (ctx->listen_fd >= 0) {
        ctx->env.unwatch_fd(ctx->env.core, ctx->listen_fd);
        close(ctx->listen_fd);
    }
    tnt__shm_free_graveyard(ctx);
    while (ctx->free_sreqs) {
        shm_sreq_t *r = ctx->free_sreqs;
        ctx->free_sreqs = r->next;
        free(r);
    }
    free(ctx);
}

static tnt_result_t shm_init(const tnt_transport_env_t *env, void **out)
{
    if (!env || env->size < sizeof(*env) || env->version <
        TNT_TRANSPORT_VERSION)
        return tnt__error(TNT_ERR_INTERNAL, "shm: incompatible environment");
    /* The authentication services are required: the transport accepts
     * no connection it cannot authenticate. */
    if (!env->auth_mac || !env->auth_verify || !env->random_bytes)
        return tnt__error(TNT_ERR_INTERNAL, "shm: no authentication "
                          "services in the environment");
    long any = 0;
    TNT_CHECK(tnt__env_long(TNT_VAR_SHM_ANY_UID, &any));
    shm_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return tnt__error(TNT_ERR_NO_MEMORY, "shm: out of memory");
    ctx->env = *env;
    /* The pair areas, laid out after the rings at the sizes the core
     * gives (their layout is the core's). */
    for (int a = 0; a < TNT_TP_AREA_END; a++) {
        ctx->area_bytes[a] = env->pair_area_bytes[a];
        if (ctx->area_bytes[a] % TNT_TP_AREA_ALIGN) {
            free(ctx);
            return tnt__error(TNT_ERR_INTERNAL, "shm: pair area %d of %zu "
                              "bytes, not a multiple of %d", a,
                              env->pair_area_bytes[a], TNT_TP_AREA_ALIGN);
        }
    }
    ctx->any_uid = (int)any;
    ctx->cma_min = SHM_CMA_MIN;
    ctx->listen_fd = -1;
    ctx->instance = atomic_fetch_add(&next_instance, 1);
    *out = ctx;
    return TNT_SUCCESS;
}

/* Shared memory reaches the ranks of this host: those whose host
 * identity (util/hostid.c) is this rank's. */
static int shm_reachable(void *vctx, int peer, const char *peer_host,
                         const void *addr, size_t addr_len, char *why,
                         size_t why_len)
{
    shm_ctx_t *ctx = vctx;
    (void)peer;
    (void)addr;
    (void)addr_len;
    if (ctx->env.host && strcmp(peer_host, ctx->env.host) == 0)
        return 1;
    snprintf(why, why_len, "shared memory reaches only ranks of one host");
    return 0;
}

/* Where this side (*mine) and the peer's side of area `area` of context
 * c lie in the pair's segment; 0 if the pair has no such area. */
static size_t area_sides(const shm_ctx_t *ctx, const shm_ep_t *e,
                         unsigned c, int area, unsigned char **mine,
                         unsigned char **theirs)
{
    if (c >= SHM_AREA_CONTEXTS || !e->seg ||
        (area != TNT_TP_AREA_SLOTS && area != TNT_TP_AREA_STAGES))
        return 0;
    size_t bytes = ctx->area_bytes[area];
    size_t off = area == TNT_TP_AREA_SLOTS
                     ? slot_off(ctx->area_bytes, e->cap, c)
                     : stage_off(ctx->area_bytes, e->cap, c);
    unsigned char *set = (unsigned char *)e->seg + off;
    *mine = set + (size_t)e->side * bytes;
    *theirs = set + (size_t)(1 - e->side) * bytes;
    return bytes;
}

/* The pair areas: the slots and staging areas of context c's set in the
 * pair's segment. */
static tnt_result_t shm_pair_area_at(void *vctx, void *ep, unsigned c,
                                     int area, void **mine,
                                     const void **theirs, size_t *len)
{
    shm_ep_t *e = ep;
    unsigned char *m, *t;
    size_t bytes = area_sides(vctx, e, c, area, &m, &t);
    if (!bytes)
        return TNT_ERR_UNSUPPORTED;
    if (area == TNT_TP_AREA_SLOTS)
        tnt__shm_warm(e, c);
    *mine = m;
    *theirs = t;
    *len = bytes;
    return TNT_SUCCESS;
}

/* This side of context c's areas zeroed for its next communicator: the
 * pages punched out of the memfd (MADV_REMOVE), so they read as zeros in
 * both processes and cost no memory until used again; where the kernel
 * refuses, written over. */
static void shm_pair_area_clear(void *vctx, void *ep, unsigned c)
{
    shm_ep_t *e = ep;
    for (int area = TNT_TP_AREA_SLOTS; area <= TNT_TP_AREA_STAGES; area++) {
        unsigned char *m, *t;
        size_t bytes = area_sides(vctx, e, c, area, &m, &t);
        if (bytes && madvise(m, bytes, MADV_REMOVE) != 0)
            memset(m, 0, bytes);
    }
    if (c < SHM_AREA_CONTEXTS)
        e->warm &= ~(1u << c);
}

static tnt_result_t shm_pair_area(void *vctx, void *ep, int area,
                                  void **mine, const void **theirs,
                                  size_t *len)
{
    return shm_pair_area_at(vctx, ep, 0, area, mine, theirs, len);
}

/* The built-in transports never reconnect: a lost connection fails the
 * communicator. */
static void shm_stats(void *vctx, tnt_transport_stats_t *out)
{
    const shm_ctx_t *ctx = vctx;
    if (TNT_TRANSPORT_HAS(out, strangers_evicted)) {
        out->strangers_refused = ctx->strangers_refused;
        out->strangers_evicted = ctx->strangers_evicted;
    }
}

const tnt_transport_t tnt__shm_transport = {
    .size = sizeof(tnt_transport_t),
    .version = TNT_TRANSPORT_VERSION,
    .name = "shm",
    .init = shm_init,
    .listen = shm_listen,
    .connect = shm_connect,
    .send = tnt__shm_send,
    .reg_mem = NULL,
    .dereg_mem = NULL,
    .close = ep_close_by_core,
    .finalize = shm_finalize,
    .preference = 300,
    .caps = TNT_TP_POLL_UNARMS | TNT_TP_CLOSE_FINISHES,
    .reachable = shm_reachable,
    .poll = tnt__shm_poll,
    .set_option = tnt__shm_set_option,
    .pair_area = shm_pair_area,
    .pair_notify = tnt__shm_slot_notify,
    .stats = shm_stats,
    .pair_area_contexts = SHM_AREA_CONTEXTS,
    .pair_area_at = shm_pair_area_at,
    .pair_area_clear = shm_pair_area_clear,
};
