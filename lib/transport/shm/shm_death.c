/*
 * Deaths during the handshake, over shared memory.
 *
 * The lower rank of a pair connects and the higher one accepts. A rank
 * killed just after it registered leaves its connections in their
 * handshake: the accepting side sees one close before its proof and,
 * from the close alone, cannot tell it from a stranger's (anyone of the
 * job's user may connect, claim a rank in a hello and close).
 *
 * Two facts the kernel vouches for make it a proof instead. The peer's
 * pid (SO_PEERCRED, taken by the kernel at connect; a process cannot
 * choose it) equals the pid that a rank registered at the bootstrap: the
 * connection came from that rank's process, whatever its hello said. And
 * a pidfd of that process becomes readable when, and only when, the
 * process has exited. So the rank is failed as lost once both hold; an
 * intruder can cause neither. A process still exiting (its sockets close
 * before it is reported exited) is watched until it is; one that lives
 * on is only watched (its connection may come again). If the pid was
 * reused by another process after the rank died, that process is
 * watched instead and the death is found by the deadline, as before:
 * the failure is never wrongly declared, at worst late.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/shm/shm_internal.h"

typedef struct shm_watch {
    shm_ctx_t *ctx;
    int rank;
    int fd;       /* pidfd being watched, -1 if none */
    int lost;     /* reported */
} shm_watch_t;

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

static int has_ep(const shm_ctx_t *ctx, int rank)
{
    for (const shm_ep_t *ep = ctx->eps; ep; ep = ep->next)
        if (ep->peer == rank && !ep->closed)
            return 1;
    return 0;
}

int tnt__shm_rank_of_pid(shm_ctx_t *ctx, pid_t pid)
{
    if (!TNT_ENV_HAS(&ctx->env, peer_addr) || !ctx->env.peer_addr)
        return -1;
    for (int r = 0; r < ctx->env.nranks; r++) {
        shm_addr_t a;
        if (r != ctx->env.rank &&
            ctx->env.peer_addr(ctx->env.core, r, &a, sizeof(a)) ==
                sizeof(a) &&
            a.magic == SHM_MAGIC && a.pid == (int32_t)pid)
            return r;
    }
    return -1;
}

static void stop(shm_watch_t *w)
{
    if (w->fd >= 0) {
        w->ctx->env.unwatch_fd(w->ctx->env.core, w->fd);
        close(w->fd);
        w->fd = -1;
    }
}

static void lost(shm_watch_t *w)
{
    stop(w);
    w->lost = 1;
    /* Connected meanwhile: its socket's hang-up reports it. */
    if (has_ep(w->ctx, w->rank))
        return;
    w->ctx->env.on_peer_error(w->ctx->env.core, w->rank, TNT_ERR_PEER_LOST,
                              "its process exited during the "
                              "shared-memory handshake");
}

static void exited_cb(void *arg, uint32_t events)
{
    (void)events;
    lost(arg);
}

void tnt__shm_suspect(shm_ctx_t *ctx, pid_t pid)
{
    int r = tnt__shm_rank_of_pid(ctx, pid);
    if (r < 0 || has_ep(ctx, r))
        return;
    if (!ctx->watches) {
        ctx->watches = calloc((size_t)ctx->env.nranks, sizeof(shm_watch_t));
        if (!ctx->watches)
            return;
        for (int i = 0; i < ctx->env.nranks; i++) {
            ctx->watches[i].ctx = ctx;
            ctx->watches[i].rank = i;
            ctx->watches[i].fd = -1;
        }
    }
    shm_watch_t *w = &ctx->watches[r];
    if (w->lost || w->fd >= 0)
        return;
    int fd = pidfd_open_(pid);
    if (fd < 0) {
        if (errno == ESRCH) /* gone and reaped */
            lost(w);
        return; /* no pidfds: the deadline finds it */
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 0) == 1) {
        close(fd);
        lost(w);
        return;
    }
    if (ctx->env.watch_fd(ctx->env.core, fd, TNT_FD_READ, exited_cb, w) !=
        TNT_SUCCESS) {
        close(fd);
        return;
    }
    w->fd = fd;
}

void tnt__shm_watch_finalize(shm_ctx_t *ctx)
{
    if (!ctx->watches)
        return;
    for (int r = 0; r < ctx->env.nranks; r++)
        stop(&ctx->watches[r]);
    free(ctx->watches);
    ctx->watches = NULL;
}
