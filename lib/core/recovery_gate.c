/*
 * The recovery listener's gate (core/recovery.h). The listener is open
 * for the communicator's whole life, and a rank that starts a shrink
 * connects to its peers before they have all started theirs; so outside
 * a shrink the progress loop accepts its connections and reads each
 * one's first message: a message of this communicator with a good MAC
 * keeps the connection for the shrink to come, anything else drops it
 * with a WARNING, as every listener of the job does with strangers
 * (docs/security.md), and so does a connection that says nothing for
 * TNT_REC_SILENT_S (a timerfd, armed while such connections wait). A
 * shrink takes the listener and what was kept (recovery.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/progress.h"
#include "core/recovery.h"
#include "util/auth.h"
#include "util/clock.h"
#include "util/log.h"

static void services(struct tnt_comm *comm, tnt_transport_env_t *env)
{
    memset(env, 0, sizeof(*env));
    tnt__progress_fill_services(comm, env);
}

static void drop(struct tnt_comm *comm, size_t i, const char *why)
{
    struct tnt_recovery *r = comm->rec;
    tnt_rec_pend_t *p = r->pend[i];
    tnt_transport_env_t env;
    services(comm, &env);
    env.unwatch_fd(env.core, p->fd);
    if (why)
        TNT_LOG_WARN("rank %d: recovery listener: dropped a connection "
                     "(%s)", comm->rank, why);
    close(p->fd);
    free(p);
    r->pend[i] = r->pend[--r->npend];
}

static int waiting(const struct tnt_recovery *r)
{
    for (size_t i = 0; i < r->npend; i++)
        if (!r->pend[i]->sound)
            return 1;
    return 0;
}

static void arm(struct tnt_recovery *r, int on)
{
    if (r->timerfd < 0)
        return;
    struct itimerspec its = {{on, 0}, {on, 0}};
    timerfd_settime(r->timerfd, 0, &its, NULL);
}

static void on_read(void *arg, uint32_t events)
{
    (void)events;
    tnt_rec_pend_t *p = arg;
    struct tnt_comm *comm = p->comm;
    struct tnt_recovery *r = comm->rec;
    size_t i = 0;
    while (i < r->npend && r->pend[i] != p)
        i++;
    if (i == r->npend || p->sound)
        return;
    for (;;) {
        ssize_t n = recv(p->fd, (char *)&p->buf + p->have,
                         sizeof(p->buf) - p->have, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            drop(comm, i, p->have ? "closed in its first message" : NULL);
            return;
        }
        p->have += (size_t)n;
        if (p->have < sizeof(p->buf))
            continue;
        if (!tnt__rec_sound(comm, &p->buf)) {
            drop(comm, i, "not a message of this communicator's shrink");
            return;
        }
        /* Kept for the shrink, which reads the rest. */
        p->sound = 1;
        tnt_transport_env_t env;
        services(comm, &env);
        env.unwatch_fd(env.core, p->fd);
        if (!waiting(r))
            arm(r, 0);
        return;
    }
}

static void on_accept(void *arg, uint32_t events)
{
    (void)events;
    struct tnt_comm *comm = arg;
    struct tnt_recovery *r = comm->rec;
    tnt_transport_env_t env;
    services(comm, &env);
    int fd;
    while ((fd = accept4(r->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
           0) {
        tnt_rec_pend_t *p = calloc(1, sizeof(*p));
        if (p && r->npend == r->pendcap) {
            size_t cap = r->pendcap ? 2 * r->pendcap : 8;
            tnt_rec_pend_t **n = realloc(r->pend, cap * sizeof(*n));
            if (n) {
                r->pend = n;
                r->pendcap = cap;
            }
        }
        if (!p || r->npend == r->pendcap) {
            free(p);
            close(fd);
            continue;
        }
        p->comm = comm;
        p->fd = fd;
        p->since = tnt__now();
        r->pend[r->npend++] = p;
        if (env.watch_fd(env.core, fd, TNT_FD_READ, on_read, p) != TNT_SUCCESS)
            drop(comm, r->npend - 1, "cannot watch it");
    }
    if (waiting(r))
        arm(r, 1);
}

static void on_timer(void *arg, uint32_t events)
{
    (void)events;
    struct tnt_comm *comm = arg;
    struct tnt_recovery *r = comm->rec;
    uint64_t ticks;
    ssize_t n = read(r->timerfd, &ticks, sizeof(ticks));
    (void)n;
    double now = tnt__now();
    for (size_t i = r->npend; i-- > 0;)
        if (!r->pend[i]->sound && now - r->pend[i]->since > TNT_REC_SILENT_S)
            drop(comm, i, "silent for 10 s");
    if (!waiting(r))
        arm(r, 0);
}

void tnt__rec_gate_open(struct tnt_comm *comm)
{
    struct tnt_recovery *r = comm->rec;
    if (!r || r->fd < 0 || r->gated)
        return;
    tnt_transport_env_t env;
    services(comm, &env);
    if (r->timerfd < 0)
        r->timerfd = timerfd_create(CLOCK_MONOTONIC,
                                    TFD_NONBLOCK | TFD_CLOEXEC);
    if (r->timerfd >= 0 &&
        env.watch_fd(env.core, r->timerfd, TNT_FD_READ, on_timer, comm) !=
            TNT_SUCCESS) {
        close(r->timerfd);
        r->timerfd = -1;
    }
    if (env.watch_fd(env.core, r->fd, TNT_FD_READ, on_accept, comm) ==
        TNT_SUCCESS)
        r->gated = 1;
    else
        TNT_LOG_WARN("rank %d: recovery listener not watched: %s",
                     comm->rank, tnt_last_error());
}

void tnt__rec_gate_close(struct tnt_comm *comm)
{
    struct tnt_recovery *r = comm->rec;
    if (!r || !r->gated)
        return;
    tnt_transport_env_t env;
    services(comm, &env);
    env.unwatch_fd(env.core, r->fd);
    if (r->timerfd >= 0) {
        arm(r, 0);
        env.unwatch_fd(env.core, r->timerfd);
    }
    for (size_t i = 0; i < r->npend; i++)
        if (!r->pend[i]->sound)
            env.unwatch_fd(env.core, r->pend[i]->fd);
    r->gated = 0;
}

/* The soundness of a message, which the gate and the shrink's mesh
 * (recovery.c) both judge before they read anything of it. */
int tnt__rec_sound(const struct tnt_comm *c, const tnt_rec_msg_t *msg)
{
    return msg->magic == REC_MAGIC && msg->comm_id == c->comm_id &&
           msg->job_id == c->job_id && msg->to == c->rank &&
           msg->from >= 0 && msg->from < c->nranks && msg->from != c->rank &&
           tnt__auth_verify(&c->auth_key, msg, offsetof(tnt_rec_msg_t, mac),
                            msg->mac);
}
