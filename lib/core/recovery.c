/*
 * The recovery mesh (core/recovery.h): a listener per rank from
 * creation on, and during a shrink one connection per ordered pair (the
 * sender connects; the receiver accepts and reads), blocking with the
 * shrink's deadline. A connection is refused or ends when its process
 * is gone, which is how the mesh sees a rank die; a rank that is alive
 * but silent is waited for until the deadline.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/recovery.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/sockaddr.h"

#define ADDR_CAP 20

static struct tnt_recovery *rec_get(struct tnt_comm *comm)
{
    if (comm->rec)
        return comm->rec;
    struct tnt_recovery *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->fd = -1;
    r->timerfd = -1;
    r->addr = calloc((size_t)comm->nranks, sizeof(*r->addr));
    r->addr_len = calloc((size_t)comm->nranks, 1);
    if (!r->addr || !r->addr_len) {
        free(r->addr);
        free(r->addr_len);
        free(r);
        return NULL;
    }
    comm->rec = r;
    return r;
}

tnt_result_t tnt__rec_listen(struct tnt_comm *comm, const char *ip,
                             unsigned char *blob, size_t *len, size_t cap)
{
    struct tnt_recovery *r = rec_get(comm);
    if (!r)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    unsigned char addr[TNT_TRANSPORT_ADDR_MAX];
    size_t alen = sizeof(addr);
    TNT_CHECK(tnt__listen_blob(ip, comm->rank, "recovery: ", &r->fd, addr,
                               &alen));
    if (alen > ADDR_CAP || *len + 1 + alen > cap)
        return tnt__error(TNT_ERR_INTERNAL, "recovery listener's address "
                          "does not fit the bootstrap entry");
    blob[(*len)++] = (unsigned char)alen;
    memcpy(blob + *len, addr, alen);
    *len += alen;
    return TNT_SUCCESS;
}

void tnt__rec_note_peer(struct tnt_comm *comm, int rank,
                        const unsigned char *blob, size_t len)
{
    struct tnt_recovery *r = rec_get(comm);
    if (!r)
        return;
    size_t off = 0;
    for (int i = 0; i < TNT_TP_COUNT; i++) {
        if (off >= len)
            return;
        off += 1 + (size_t)blob[off];
    }
    if (off >= len || blob[off] > ADDR_CAP || off + 1 + blob[off] > len)
        return;
    r->addr_len[rank] = blob[off];
    memcpy(r->addr[rank], blob + off + 1, blob[off]);
}

int tnt__rec_hand_over(struct tnt_comm *from, struct tnt_comm *to,
                       const int *old_of)
{
    struct tnt_recovery *f = from->rec, *t = rec_get(to);
    if (!f || !t)
        return -1;
    for (int i = 0; i < to->nranks; i++) {
        t->addr_len[i] = f->addr_len[old_of[i]];
        memcpy(t->addr[i], f->addr[old_of[i]], sizeof(t->addr[i]));
    }
    t->fd = f->fd;
    t->timerfd = f->timerfd;
    f->fd = f->timerfd = -1;
    return 0;
}

void tnt__rec_close(struct tnt_comm *comm)
{
    struct tnt_recovery *r = comm->rec;
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    if (r->timerfd >= 0)
        close(r->timerfd);
    for (size_t i = 0; i < r->npend; i++) {
        close(r->pend[i]->fd);
        free(r->pend[i]);
    }
    free(r->pend);
    free(r->addr);
    free(r->addr_len);
    free(r->agreed);
    free(r);
    comm->rec = NULL;
}

/* One accepted connection: bytes of the message arriving, and whose. */
typedef struct rec_in {
    int fd;
    int from;                  /* -1 until its first message */
    size_t have;
    tnt_rec_msg_t buf;
} rec_in_t;

/* What one peer sent, in order, and whether it is gone. */
typedef struct rec_peer {
    int out;                   /* connection to it; -1: none yet */
    int gone;                  /* refused, closed or failed */
    tnt_rec_msg_t *q;
    size_t qhead, qn, qcap;
} rec_peer_t;

struct tnt_rec_mesh {
    struct tnt_comm *comm;
    double deadline;
    rec_peer_t *peer;
    rec_in_t *in;
    size_t nin, incap;
};

static int queue(rec_peer_t *p, const tnt_rec_msg_t *msg)
{
    if (p->qhead + p->qn == p->qcap) {
        if (p->qhead) {
            memmove(p->q, p->q + p->qhead, p->qn * sizeof(*p->q));
            p->qhead = 0;
        } else {
            size_t cap = p->qcap ? 2 * p->qcap : 4;
            tnt_rec_msg_t *q = realloc(p->q, cap * sizeof(*q));
            if (!q)
                return -1;
            p->q = q;
            p->qcap = cap;
        }
    }
    p->q[p->qhead + p->qn++] = *msg;
    return 0;
}

tnt_result_t tnt__rec_mesh_open(struct tnt_comm *comm, double deadline,
                                tnt_rec_mesh_t **out)
{
    *out = NULL;
    if (!comm->rec || comm->rec->fd < 0)
        return tnt__error(TNT_ERR_INTERNAL, "rank %d: no recovery listener",
                          comm->rank);
    tnt_rec_mesh_t *m = calloc(1, sizeof(*m));
    if (m)
        m->peer = calloc((size_t)comm->nranks, sizeof(*m->peer));
    if (!m || !m->peer) {
        free(m);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    }
    m->comm = comm;
    m->deadline = deadline;
    for (int i = 0; i < comm->nranks; i++)
        m->peer[i].out = -1;
    /* The listener and the connections the gate kept are the mesh's
     * now (recovery_gate.c). */
    struct tnt_recovery *r = comm->rec;
    pthread_mutex_lock(&comm->group->lock);
    tnt__rec_gate_close(comm);
    m->in = calloc(r->npend ? r->npend : 1, sizeof(*m->in));
    for (size_t i = 0; m->in && i < r->npend; i++) {
        tnt_rec_pend_t *p = r->pend[i];
        rec_in_t *c = &m->in[m->nin++];
        c->fd = p->fd;
        c->from = p->sound ? p->buf.from : -1;
        c->have = p->sound ? 0 : p->have;
        c->buf = p->buf;
        if (p->sound)
            queue(&m->peer[c->from], &p->buf);
        free(p);
    }
    m->incap = m->nin;
    if (!m->in)
        for (size_t i = 0; i < r->npend; i++) {
            close(r->pend[i]->fd);
            free(r->pend[i]);
        }
    r->npend = 0;
    pthread_mutex_unlock(&comm->group->lock);
    *out = m;
    return TNT_SUCCESS;
}

void tnt__rec_mesh_close(tnt_rec_mesh_t *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->comm->nranks; i++) {
        if (m->peer[i].out >= 0)
            close(m->peer[i].out);
        free(m->peer[i].q);
    }
    for (size_t i = 0; i < m->nin; i++)
        close(m->in[i].fd);
    free(m->in);
    free(m->peer);
    /* Strangers are the gate's again. */
    pthread_mutex_lock(&m->comm->group->lock);
    tnt__rec_gate_open(m->comm);
    pthread_mutex_unlock(&m->comm->group->lock);
    free(m);
}

static void seal(const struct tnt_comm *comm, tnt_rec_msg_t *msg)
{
    tnt__auth_mac(&comm->auth_key, msg, offsetof(tnt_rec_msg_t, mac),
                  msg->mac);
}

/* Connect to `to`'s listener within the deadline; -1 when refused. */
static int dial(tnt_rec_mesh_t *m, int to)
{
    struct tnt_recovery *r = m->comm->rec;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (!r->addr_len[to] ||
        tnt__addr_blob_decode(r->addr[to], r->addr_len[to], &ss, &sl) !=
            TNT_SUCCESS)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&ss, sl) == 0)
        return fd;
    if (errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    for (;;) {
        double left = m->deadline - tnt__now();
        struct pollfd p = {fd, POLLOUT, 0};
        int n = left > 0 ? poll(&p, 1, (int)(left * 1000) + 1) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        int err = 0;
        socklen_t el = sizeof(err);
        if (n <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 ||
            err != 0) {
            close(fd);
            return -1;
        }
        return fd;
    }
}

int tnt__rec_send(tnt_rec_mesh_t *m, int to, tnt_rec_msg_t *msg)
{
    rec_peer_t *p = &m->peer[to];
    if (p->gone)
        return -1;
    if (p->out < 0)
        p->out = dial(m, to);
    msg->magic = REC_MAGIC;
    msg->comm_id = m->comm->comm_id;
    msg->job_id = m->comm->job_id;
    msg->from = m->comm->rank;
    msg->to = to;
    seal(m->comm, msg);
    if (p->out < 0 ||
        tnt__io_write_all(p->out, msg, sizeof(*msg), m->deadline) !=
            TNT_SUCCESS) {
        p->gone = 1;
        return -1;
    }
    return 0;
}

/* Read what connection i has; 0 when it ended (or sent garbage). */
static int drain(tnt_rec_mesh_t *m, rec_in_t *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, (char *)&c->buf + c->have,
                         sizeof(c->buf) - c->have, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 1;
        if (n <= 0)
            return 0;
        c->have += (size_t)n;
        if (c->have < sizeof(c->buf))
            continue;
        c->have = 0;
        if (!tnt__rec_sound(m->comm, &c->buf) || (c->from >= 0 && c->buf.from != c->from))
            return 0;
        c->from = c->buf.from;
        if (queue(&m->peer[c->from], &c->buf) != 0)
            return 0;
    }
}

static void drop_in(tnt_rec_mesh_t *m, size_t i)
{
    rec_in_t *c = &m->in[i];
    if (c->from >= 0)
        m->peer[c->from].gone = 1;
    close(c->fd);
    m->in[i] = m->in[--m->nin];
}

/* A connection this rank sends on is never written by the other side:
 * anything to read there is its end (a reset when the listener closed
 * with the connection still in its queue, as when the process dies just
 * after the connection was made). */
static void check_out(rec_peer_t *p)
{
    char b;
    ssize_t n = recv(p->out, &b, 1, MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        p->gone = 1;
}

/* Wait for anything (a connection, bytes, an end) until the deadline;
 * with `look` only take what is there already. */
static int pump(tnt_rec_mesh_t *m, int look)
{
    double left = look ? 0.0 : m->deadline - tnt__now();
    if (left <= 0 && !look)
        return -1;
    int np = m->comm->nranks;
    size_t n = m->nin + 1 + (size_t)np;
    struct pollfd *pf = calloc(n, sizeof(*pf));
    if (!pf)
        return -1;
    pf[0].fd = m->comm->rec->fd;
    pf[0].events = POLLIN;
    for (size_t i = 0; i < m->nin; i++) {
        pf[i + 1].fd = m->in[i].fd;
        pf[i + 1].events = POLLIN;
    }
    struct pollfd *po = pf + 1 + m->nin;
    for (int q = 0; q < np; q++) {
        po[q].fd = m->peer[q].gone ? -1 : m->peer[q].out;
        po[q].events = POLLIN;
    }
    int k = poll(pf, (nfds_t)n, look ? 0 : (int)(left * 1000) + 1);
    for (int q = 0; k > 0 && q < np; q++)
        if (po[q].fd >= 0 && po[q].revents)
            check_out(&m->peer[q]);
    if (k > 0) {
        /* Back to front: dropping one moves the last into its place. */
        for (size_t i = m->nin; i-- > 0;)
            if (pf[i + 1].revents && !drain(m, &m->in[i]))
                drop_in(m, i);
        if (pf[0].revents & POLLIN) {
            int fd;
            while ((fd = accept4(m->comm->rec->fd, NULL, NULL,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                if (m->nin == m->incap) {
                    size_t cap = m->incap ? 2 * m->incap : 8;
                    rec_in_t *in = realloc(m->in, cap * sizeof(*in));
                    if (!in) {
                        close(fd);
                        break;
                    }
                    m->in = in;
                    m->incap = cap;
                }
                m->in[m->nin++] = (rec_in_t){fd, -1, 0, {0}};
            }
        }
    }
    free(pf);
    return 0;
}

tnt_result_t tnt__rec_next(tnt_rec_mesh_t *m, int from, unsigned mask,
                           tnt_rec_msg_t *msg)
{
    rec_peer_t *p = &m->peer[from];
    for (;;) {
        while (p->qn) {
            *msg = p->q[p->qhead++];
            p->qn--;
            if (!p->qn)
                p->qhead = 0;
            if (msg->type < 32 && (mask & (1u << msg->type)))
                return TNT_SUCCESS;
        }
        if (p->gone) {
            /* What it sent before it went is here already, maybe in a
             * connection not yet accepted: it connected before it could
             * close anything (a rank sends before it can finish). */
            size_t had = p->qn;
            pump(m, 1);
            pump(m, 1);
            if (p->qn == had)
                return TNT_ERR_PEER_LOST;
            continue;
        }
        if (pump(m, 0) != 0)
            return TNT_ERR_TIMEOUT;
    }
}
