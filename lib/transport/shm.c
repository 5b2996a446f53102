/*
 * The shared-memory transport: rendezvous, segments and lifecycle (the
 * data path is in shm_io.c). See docs/shm.md for the design.
 *
 * Every rank listens on an abstract unix socket named after its pid, a
 * per-process counter and the job; abstract names vanish with the
 * socket, so a killed rank leaves nothing in the filesystem. The lower rank of a pair creates
 * the pair's segment as a memfd (never visible in /dev/shm) and two
 * eventfds, and passes them in its hello; both sides close the memfd once
 * mapped, so the memory goes away with the last mapping. Each side then
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
#include <unistd.h>

#include "core/error.h"
#include "transport/shm_internal.h"
#include "transport/transport.h"

#define SHM_PROBE_VALUE 0x626f72705f746e74ull /* "tnt_prob" */

volatile uint64_t tnt__shm_probe_word = SHM_PROBE_VALUE;
static atomic_uint next_instance;

/* The address blob: where the socket is. */
typedef struct shm_addr {
    uint32_t magic;
    int32_t pid;
    uint32_t instance;
} shm_addr_t;

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

static size_t seg_len(size_t cap)
{
    return sizeof(shm_seg_t) + 2 * (sizeof(shm_ring_t) + cap);
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

static void fill_hello(shm_ctx_t *ctx, shm_hello_t *h, int to)
{
    memset(h, 0, sizeof(*h));
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->job_id = ctx->env.job_id;
    h->comm_id = ctx->env.comm_id;
    h->from = ctx->env.rank;
    h->to = to;
    h->ring_bytes = (uint32_t)SHM_RING_BYTES;
    h->probe_addr = (uint64_t)(uintptr_t)&tnt__shm_probe_word;
}

static const char *check_hello(shm_ctx_t *ctx, const shm_hello_t *h)
{
    if (h->magic != SHM_MAGIC)
        return "not a libtntcomm shared-memory hello";
    if (h->version != SHM_VERSION)
        return "wrong protocol version";
    if (h->job_id != ctx->env.job_id)
        return "hello from another job (wrong job key)";
    if (h->comm_id != ctx->env.comm_id || h->to != ctx->env.rank)
        return "hello for another communicator or rank";
    if (h->from < 0 || h->from >= ctx->env.nranks || h->from == h->to)
        return "hello from an invalid rank";
    if (h->ring_bytes != SHM_RING_BYTES)
        return "ring size differs between the ranks";
    return NULL;
}

static pid_t peer_pid(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return -1;
    return cr.pid;
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
    ep->sock = ep->efd_in = ep->efd_out = -1;
    ep->cap = SHM_RING_BYTES;
    ep->next = ctx->eps;
    ctx->eps = ep;
    return ep;
}

static void ep_close(void *vctx, void *vep)
{
    shm_ctx_t *ctx = vctx;
    shm_ep_t *ep = vep;
    if (!ep || ep->closed)
        return;
    ep->closed = 1;
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
    if (known)
        ctx->env.on_peer_error(ctx->env.core, peer, TNT_ERR_PEER_LOST, what);
    else
        ctx->env.log(ctx->env.core, TNT_LOG_WARNING, "rank %d: dropped "
                     "shared-memory connection: %s", ctx->env.rank, what);
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

/* ---- the socket: hellos, then hang-up ------------------------------- */

/* The acceptor's side: the connector's hello with the segment and the
 * eventfds. */
static void hello_in(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    shm_hello_t h;
    int fds[3] = {-1, -1, -1};
    char cbuf[CMSG_SPACE(sizeof(fds))];
    struct iovec iov = {&h, sizeof(h)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    ssize_t n = recvmsg(ep->sock, &m, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    int nfds = 0;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        memcpy(fds, CMSG_DATA(c), (size_t)(nfds > 3 ? 3 : nfds) *
               sizeof(int));
    }
    const char *why = n != (ssize_t)sizeof(h) ? "short hello" : NULL;
    if (!why)
        why = check_hello(ctx, &h);
    if (!why && h.from > ctx->env.rank)
        why = "hello from a rank that may not connect here";
    if (!why && nfds != 3)
        why = "hello without segment and eventfds";
    struct stat st;
    size_t len = seg_len(SHM_RING_BYTES);
    if (!why && (fstat(fds[0], &st) != 0 || (size_t)st.st_size != len))
        why = "segment of the wrong size";
    for (shm_ep_t *e = ctx->eps; !why && e; e = e->next)
        if (e != ep && e->peer == h.from)
            why = "second connection from a rank already connected";
    void *seg = MAP_FAILED;
    if (!why) {
        seg = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        if (seg == MAP_FAILED)
            why = "cannot map the segment";
    }
    if (fds[0] >= 0)
        close(fds[0]);
    ep->efd_in = fds[1];
    ep->efd_out = fds[2];
    if (!why && ((shm_seg_t *)seg)->magic != SHM_MAGIC)
        why = "segment not initialised";
    if (why) {
        if (seg != MAP_FAILED)
            munmap(seg, len);
        tnt__shm_fail(ep, why);
        return;
    }
    ep->seg = seg;
    ep->seg_len = len;
    ep->peer = h.from;
    ep->pid = peer_pid(ep->sock);
    ep_map_rings(ep);
    atomic_store(&ep->seg->can_read[1], (uint32_t)probe_cma(ep->pid,
                                                            h.probe_addr));
    shm_hello_t reply;
    fill_hello(ctx, &reply, h.from);
    if (send(ep->sock, &reply, sizeof(reply), MSG_NOSIGNAL) !=
        (ssize_t)sizeof(reply) || watch_data(ep) != TNT_SUCCESS) {
        tnt__shm_fail(ep, "cannot answer the hello");
        return;
    }
    announce(ep);
}

/* The connector's side: the acceptor's reply. */
static void reply_in(shm_ep_t *ep)
{
    shm_ctx_t *ctx = ep->ctx;
    shm_hello_t h;
    ssize_t n = recv(ep->sock, &h, sizeof(h), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    const char *why = n == 0 ? "peer closed during the hello"
                    : n != (ssize_t)sizeof(h) ? "short hello reply" : NULL;
    if (!why)
        why = check_hello(ctx, &h);
    if (!why && h.from != ep->peer)
        why = "hello reply from the wrong rank";
    if (why) {
        tnt__shm_fail(ep, why);
        return;
    }
    atomic_store(&ep->seg->can_read[0], (uint32_t)probe_cma(ep->pid,
                                                            h.probe_addr));
    ep->hello_done = 1;
    announce(ep);
}

static void sock_cb(void *arg, uint32_t events)
{
    (void)events;
    shm_ep_t *ep = arg;
    tnt__shm_free_graveyard(ep->ctx);
    if (ep->side == 1 && !ep->seg) {
        hello_in(ep);
        return;
    }
    if (ep->side == 0 && !ep->hello_done) {
        reply_in(ep);
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
        shm_ep_t *ep = ep_new(ctx, -1, 1);
        if (!ep) {
            close(fd);
            continue;
        }
        ep->sock = fd;
        ep->sock_watched = ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ,
                                             sock_cb, ep) == TNT_SUCCESS;
        if (!ep->sock_watched)
            ep_close(ctx, ep);
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
    size_t len = seg_len(ep->cap);
    int fd = memfd_create("tnt-shm", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)len) == 0)
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
    if (ok && peer_pid(ep->sock) != a.pid) {
        errno = EPERM;
        what = "peer credentials";
        ok = 0;
    }
    if (ok) {
        /* The peer's incoming eventfd first, then this rank's. */
        shm_hello_t h;
        fill_hello(ctx, &h, peer);
        int fds[3] = {memfd, ep->efd_out, ep->efd_in};
        char cbuf[CMSG_SPACE(sizeof(fds))];
        memset(cbuf, 0, sizeof(cbuf));
        struct iovec iov = {&h, sizeof(h)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                           .msg_control = cbuf,
                           .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(c), fds, sizeof(fds));
        what = "sending the hello";
        ok = sendmsg(ep->sock, &m, MSG_NOSIGNAL) == (ssize_t)sizeof(h);
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

static tnt_result_t shm_init(const tnt_transport_env_v1_t *env, void **out)
{
    if (!env || env->size < sizeof(*env) || env->version <
        TNT_TRANSPORT_VERSION)
        return tnt__error(TNT_ERR_INTERNAL, "shm: incompatible environment");
    shm_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return tnt__error(TNT_ERR_NO_MEMORY, "shm: out of memory");
    ctx->env = *env;
    ctx->listen_fd = -1;
    ctx->instance = atomic_fetch_add(&next_instance, 1);
    *out = ctx;
    return TNT_SUCCESS;
}

const tnt_transport_v1_t tnt__shm_transport = {
    .size = sizeof(tnt_transport_v1_t),
    .version = TNT_TRANSPORT_VERSION,
    .name = "shm",
    .init = shm_init,
    .listen = shm_listen,
    .connect = shm_connect,
    .send = tnt__shm_send,
    .reg_mem = NULL,
    .dereg_mem = NULL,
    .close = ep_close,
    .finalize = shm_finalize,
};
