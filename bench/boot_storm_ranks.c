/*
 * boot-storm's ranks 1..P-1, all in one process (boot_storm.h): one
 * nonblocking connection per rank to rank 0, served from one epoll loop,
 * each speaking the bootstrap's own messages with the wire helpers
 * (boot_wire.h): the hello, the check of rank 0's proof, the
 * registration with its MAC, and in the tree the acknowledgement. So
 * rank 0 does for each exactly what it does for a real rank.
 *
 * What comes back is checked: every verdict, and the table, entry by
 * entry against storm_ref. In the star every rank's copy arrives on its
 * own connection (all checked, or the first only with verify_all 0,
 * the others read to the end). In the tree rank 0 pushes the table to
 * its children's listeners: each of rank 0's children (1, 2, 4, ...)
 * has a listener here, every other rank registers one more, shared
 * listener that rank 0 must never use. A copy that reaches child c's
 * listener is checked (MAC, entries, listeners) and stands for c's whole
 * subtree, ranks c..2c-1: they acknowledge it at once. The forwarding
 * below rank 0's children is theirs, not rank 0's, and is not played.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "boot/boot_tree.h"
#include "boot/boot_wire.h"
#include "boot_storm.h"
#include "tnt/tnt.h"
#include "util/clock.h"

enum { ST_IDLE, ST_CONNECTING, ST_CHALLENGE, ST_WAIT, ST_TABLE_HDR,
       ST_TABLE, ST_DONE };

/* The largest fixed-size message a rank reads: rank 0's reply. */
#define ST_IN_MAX sizeof(tnt_boot_reply_t)
_Static_assert(sizeof(tnt_boot_challenge_t) <= ST_IN_MAX, "in[] too small");
_Static_assert(sizeof(tnt_boot_table_hdr_t) <= ST_IN_MAX, "in[] too small");

typedef struct st_rank {
    int fd, stage, acked;
    size_t got, need;
    unsigned char *buf;        /* the star's table as it arrives */
    tnt_boot_hello_t hello;
    unsigned char in[ST_IN_MAX];
} st_rank_t;

/* A connection of rank 0 to one of the listeners here: a pushed table. */
typedef struct st_push {
    int fd, kid;               /* kid: index in kids[] (nk: shared) */
    size_t got, need;
    unsigned char *buf;
} st_push_t;

#define ST_PUSH_MAX 32
/* What an epoll event is about: rank r (r), listener k (ST_LSN + k),
 * push connection i (ST_PUSH + i). */
#define ST_LSN (1ull << 32)
#define ST_PUSH (2ull << 32)

typedef struct storm {
    const storm_cfg_t *c;
    tnt_boot_args_t args;      /* for tnt__boot_table_accept: key, size */
    st_rank_t *r;
    int ep;
    int started, registered, done, failed;
    int kids[32], nk;
    int lfd[33];
    tnt_boot_listener_t lsn[33];
    st_push_t push[ST_PUSH_MAX];
    int npush;
    unsigned char tnonce[TNT_AUTH_NONCE_BYTES];
    int have_tnonce;
    tnt_boot_entry_t *scratch;
    tnt_boot_listener_t *scratch_l;
    int star_checked, tree_copies, notes;
} storm_t;

static void st_fail(storm_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void st_fail(storm_t *s, const char *fmt, ...)
{
    if (s->failed++)
        return; /* the first says why; the rest follow from it */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "boot-storm ranks: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

void storm_ref(int rank, tnt_boot_entry_t *e)
{
    memset(e, 0, sizeof(*e));
    e->rank = rank;
    e->addr_len = 8;
    for (unsigned k = 0; k < e->addr_len; k++)
        e->addr[k] = (unsigned char)(rank * 131 + (int)k * 7 + 1);
    snprintf(e->host, sizeof(e->host), "storm-host-%05d", rank);
}

int storm_entry_ok(int rank, const tnt_boot_entry_t *e)
{
    tnt_boot_entry_t ref;
    storm_ref(rank, &ref);
    return e->rank == rank && e->addr_len == ref.addr_len &&
           memcmp(e->addr, ref.addr, ref.addr_len) == 0 &&
           strncmp(e->host, ref.host, sizeof(e->host)) == 0;
}

/* The listener rank r registers: its own if it is a child of rank 0,
 * else the shared one; none in the star. */
static const tnt_boot_listener_t *st_listener_of(const storm_t *s, int r)
{
    static const tnt_boot_listener_t none;
    if (!s->c->tree)
        return &none;
    for (int k = 0; k < s->nk; k++)
        if (s->kids[k] == r)
            return &s->lsn[k];
    return &s->lsn[s->nk];
}

/* A decoded table against the reference: every entry, and (when
 * listeners is not NULL) every rank's listener as it registered it. */
static int st_table_ok(storm_t *s, const tnt_boot_listener_t *listeners,
                       const char *what)
{
    for (int i = 0; i < s->c->nranks; i++) {
        if (!storm_entry_ok(i, &s->scratch[i])) {
            st_fail(s, "%s: entry %d is wrong", what, i);
            return 0;
        }
        if (listeners && i > 0 &&
            memcmp(&listeners[i], st_listener_of(s, i),
                   sizeof(listeners[i])) != 0) {
            st_fail(s, "%s: the listener of rank %d is wrong", what, i);
            return 0;
        }
    }
    return 1;
}

static void st_close(storm_t *s, int r, int stage)
{
    st_rank_t *x = &s->r[r];
    if (x->fd >= 0)
        close(x->fd); /* which also takes it out of s->ep */
    x->fd = -1;
    free(x->buf);
    x->buf = NULL;
    x->stage = stage;
}

static void st_start(storm_t *s, int r)
{
    st_rank_t *x = &s->r[r];
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)s->c->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    x->fd = tnt__boot_socket(AF_INET);
    if (x->fd < 0) {
        st_fail(s, "rank %d: socket: %s", r, strerror(errno));
        return;
    }
    tnt__boot_no_delay(x->fd);
    if (connect(x->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
        errno != EINPROGRESS) {
        st_fail(s, "rank %d: connect: %s", r, strerror(errno));
        return;
    }
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = (uint64_t)r};
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, x->fd, &ev) != 0) {
        st_fail(s, "rank %d: epoll: %s", r, strerror(errno));
        return;
    }
    x->stage = ST_CONNECTING;
    s->started++;
}

/* Connected: the hello (a fresh socket's buffer takes it whole). */
static void st_connected(storm_t *s, int r)
{
    st_rank_t *x = &s->r[r];
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) {
        st_fail(s, "rank %d: connect: %s", r, strerror(err));
        return;
    }
    tnt_boot_hello_t *h = &x->hello;
    memset(h, 0, sizeof(*h));
    h->magic = TNT_BOOT_MAGIC;
    h->version = TNT_BOOT_VERSION;
    h->job_id = s->c->job_id;
    h->nranks = s->c->nranks;
    h->rank = r;
    tnt__auth_random(h->nonce, sizeof(h->nonce));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)r};
    if (send(x->fd, h, sizeof(*h), MSG_NOSIGNAL) != (ssize_t)sizeof(*h) ||
        epoll_ctl(s->ep, EPOLL_CTL_MOD, x->fd, &ev) != 0) {
        st_fail(s, "rank %d: could not send the hello", r);
        return;
    }
    x->stage = ST_CHALLENGE;
    x->got = 0;
    x->need = sizeof(tnt_boot_challenge_t);
}

/* Rank 0's challenge: its proof checked, then the registration. */
static void st_on_challenge(storm_t *s, int r)
{
    st_rank_t *x = &s->r[r];
    tnt_boot_challenge_t ch;
    unsigned char in[TNT_BOOT_AUTH_MAX];
    const char *why = tnt__boot_challenge_parse(x->in, sizeof(ch), &ch);
    size_t n = tnt__boot_auth_input(0, &x->hello, &ch, NULL, in);
    if (!why && !tnt__auth_verify(s->c->key, in, n, ch.mac))
        why = "rank 0's proof is wrong";
    if (!why && s->have_tnonce &&
        memcmp(s->tnonce, ch.table_nonce, sizeof(s->tnonce)) != 0)
        why = "another table nonce than the other ranks'";
    if (why) {
        st_fail(s, "rank %d: challenge: %s", r, why);
        return;
    }
    memcpy(s->tnonce, ch.table_nonce, sizeof(s->tnonce));
    s->have_tnonce = 1;
    tnt_boot_register_t reg;
    memset(&reg, 0, sizeof(reg));
    reg.magic = TNT_BOOT_MAGIC;
    reg.version = TNT_BOOT_VERSION;
    reg.nranks = s->c->nranks;
    reg.rank = r;
    storm_ref(r, &reg.entry);
    reg.listener = *st_listener_of(s, r);
    n = tnt__boot_auth_input(1, &x->hello, &ch, &reg, in);
    tnt__auth_mac(s->c->key, in, n, reg.mac);
    if (send(x->fd, &reg, sizeof(reg), MSG_NOSIGNAL) != (ssize_t)sizeof(reg)) {
        st_fail(s, "rank %d: could not send the registration", r);
        return;
    }
    x->stage = ST_WAIT;
    x->got = 0;
    x->need = sizeof(tnt_boot_reply_t);
    s->registered++;
}

/* A reply of rank 0: a note (go on waiting) or the verdict. */
static void st_on_reply(storm_t *s, int r)
{
    st_rank_t *x = &s->r[r];
    tnt_boot_reply_t rep;
    const char *why = tnt__boot_reply_parse(x->in, sizeof(rep), s->c->nranks,
                                            &rep);
    x->got = 0;
    if (why) {
        st_fail(s, "rank %d: reply: %s", r, why);
        return;
    }
    if (rep.status == TNT_BOOT_WAITING) {
        s->notes++;
        return;
    }
    if (rep.status != TNT_SUCCESS) {
        st_fail(s, "rank %d: rank 0 failed the job: %s", r, rep.msg);
        return;
    }
    if (s->c->tree) {
        /* The tree's verdict comes once every rank has acknowledged. */
        if (!x->acked)
            st_fail(s, "rank %d: a verdict before its acknowledgement", r);
        st_close(s, r, ST_DONE);
        s->done++;
        return;
    }
    x->stage = ST_TABLE_HDR;
    x->need = sizeof(tnt_boot_table_hdr_t);
}

static void st_on_table_hdr(storm_t *s, int r)
{
    st_rank_t *x = &s->r[r];
    tnt_boot_table_hdr_t h;
    const char *why = tnt__boot_table_hdr_parse(x->in, sizeof(h),
                                                s->c->nranks, &h);
    if (why) {
        st_fail(s, "rank %d: table: %s", r, why);
        return;
    }
    x->buf = malloc(sizeof(h) + h.bytes);
    if (!x->buf) {
        st_fail(s, "rank %d: out of memory", r);
        return;
    }
    memcpy(x->buf, x->in, sizeof(h));
    x->got = sizeof(h);
    x->need = sizeof(h) + h.bytes;
    x->stage = ST_TABLE;
}

/* A whole star table: checked (all copies, or the first), then done. */
static void st_on_table(storm_t *s, int r)
{
    st_rank_t *x = &s->r[r];
    if (s->c->verify_all || s->star_checked == 0) {
        char what[48];
        snprintf(what, sizeof(what), "rank %d's table", r);
        const char *why = tnt__boot_table_accept(&s->args, s->tnonce, x->buf,
                                                 x->got, s->scratch, NULL);
        if (why) {
            st_fail(s, "%s: %s", what, why);
            return;
        }
        if (!st_table_ok(s, NULL, what))
            return;
        s->star_checked++;
    }
    st_close(s, r, ST_DONE);
    s->done++;
}

/* Read what stage x->stage still needs into x->in (or x->buf). 1 when
 * it is complete, 0 for more, -1 when the connection ended. */
static int st_read(st_rank_t *x)
{
    unsigned char *to = x->stage == ST_TABLE ? x->buf : x->in;
    ssize_t n = recv(x->fd, to + x->got, x->need - x->got, MSG_DONTWAIT);
    if (n == 0)
        return -1;
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                   ? 0 : -1;
    x->got += (size_t)n;
    return x->got == x->need;
}

static void st_rank_event(storm_t *s, int r, uint32_t events)
{
    st_rank_t *x = &s->r[r];
    if (x->stage == ST_CONNECTING) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            st_connected(s, r);
        return;
    }
    /* Drain what has come: a reply and the table may come together. */
    while (!s->failed && x->fd >= 0) {
        int k = st_read(x);
        if (k < 0) {
            st_fail(s, "rank %d: rank 0 closed the connection at stage %d",
                    r, x->stage);
            return;
        }
        if (k == 0)
            return;
        switch (x->stage) {
        case ST_CHALLENGE: st_on_challenge(s, r); break;
        case ST_WAIT: st_on_reply(s, r); break;
        case ST_TABLE_HDR: st_on_table_hdr(s, r); break;
        case ST_TABLE: st_on_table(s, r); break;
        default: st_fail(s, "rank %d: data at stage %d", r, x->stage);
        }
    }
}

/* ---- the tree: rank 0's pushes to its children's listeners ---------- */

static int st_listen(storm_t *s, int k)
{
    if (tnt__boot_tree_listen("127.0.0.1", &s->lfd[k], &s->lsn[k]) !=
        TNT_SUCCESS) {
        st_fail(s, "listener: %s", tnt_last_error());
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN,
                             .data.u64 = ST_LSN + (unsigned)k};
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->lfd[k], &ev) != 0) {
        st_fail(s, "listener: epoll: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static void st_accept(storm_t *s, int k)
{
    for (;;) {
        int fd = accept4(s->lfd[k], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (k == s->nk) {
            st_fail(s, "rank 0 pushed the table to a rank that is not its "
                    "child");
            close(fd);
            return;
        }
        if (s->npush == ST_PUSH_MAX) {
            st_fail(s, "more than %d table pushes at once", ST_PUSH_MAX);
            close(fd);
            return;
        }
        int i = s->npush++;
        st_push_t *p = &s->push[i];
        memset(p, 0, sizeof(*p));
        p->fd = fd;
        p->kid = k;
        p->need = sizeof(tnt_boot_table_hdr_t);
        p->buf = malloc(p->need);
        struct epoll_event ev = {.events = EPOLLIN,
                                 .data.u64 = ST_PUSH + (unsigned)i};
        if (!p->buf || epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            st_fail(s, "table push: out of memory or epoll");
            return;
        }
    }
}

/* Child kid's copy arrived and is right: its subtree acknowledges. */
static void st_subtree_acks(storm_t *s, int kid)
{
    int c = s->kids[kid], end = 2 * c < s->c->nranks ? 2 * c : s->c->nranks;
    for (int r = c; r < end && !s->failed; r++) {
        st_rank_t *x = &s->r[r];
        if (x->acked || x->stage != ST_WAIT) {
            st_fail(s, "rank %d: the table twice, or before it registered",
                    r);
            return;
        }
        tnt_boot_ack_t ack;
        memset(&ack, 0, sizeof(ack));
        ack.magic = TNT_BOOT_MAGIC;
        ack.version = TNT_BOOT_VERSION;
        ack.rank = r;
        if (send(x->fd, &ack, sizeof(ack), MSG_NOSIGNAL | MSG_DONTWAIT) !=
            (ssize_t)sizeof(ack)) {
            st_fail(s, "rank %d: could not send its acknowledgement", r);
            return;
        }
        x->acked = 1;
    }
}

static void st_push_event(storm_t *s, int i)
{
    st_push_t *p = &s->push[i];
    if (p->fd < 0)
        return;
    ssize_t n = recv(p->fd, p->buf + p->got, p->need - p->got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        st_fail(s, "a table push to rank %d ended after %zu bytes",
                s->kids[p->kid], p->got);
        return;
    }
    p->got += (size_t)n;
    if (p->got < p->need)
        return;
    tnt_boot_table_hdr_t h;
    if (p->need == sizeof(h)) {
        const char *why = tnt__boot_table_hdr_parse(p->buf, sizeof(h),
                                                    s->c->nranks, &h);
        unsigned char *b = why ? NULL : realloc(p->buf, sizeof(h) + h.bytes);
        if (!b) {
            st_fail(s, "table push: %s", why ? why : "out of memory");
            return;
        }
        p->buf = b;
        p->need = sizeof(h) + h.bytes;
        return;
    }
    char what[48];
    snprintf(what, sizeof(what), "the table pushed to rank %d",
             s->kids[p->kid]);
    const char *why = tnt__boot_table_accept(&s->args, s->tnonce, p->buf,
                                             p->got, s->scratch,
                                             s->scratch_l);
    if (why) {
        st_fail(s, "%s: %s", what, why);
        return;
    }
    if (!st_table_ok(s, s->scratch_l, what))
        return;
    s->tree_copies++;
    close(p->fd);
    p->fd = -1;
    free(p->buf);
    p->buf = NULL;
    st_subtree_acks(s, p->kid);
}

/* ---- the loop ------------------------------------------------------- */

static int st_setup(storm_t *s, const storm_cfg_t *c)
{
    int p = c->nranks;
    s->c = c;
    s->args.nranks = p;
    s->args.key = c->key;
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    s->r = calloc((size_t)p, sizeof(*s->r));
    s->scratch = calloc((size_t)p, sizeof(*s->scratch));
    s->scratch_l = calloc((size_t)p, sizeof(*s->scratch_l));
    for (int k = 0; k < 33; k++)
        s->lfd[k] = -1;
    if (s->ep < 0 || !s->r || !s->scratch || !s->scratch_l) {
        st_fail(s, "out of memory or epoll");
        return -1;
    }
    for (int r = 0; r < p; r++)
        s->r[r].fd = -1;
    if (c->tree) {
        s->nk = tnt__boot_tree_children(0, p, s->kids);
        for (int k = 0; k <= s->nk; k++)
            if (st_listen(s, k) != 0)
                return -1;
    }
    return 0;
}

static void st_teardown(storm_t *s)
{
    for (int r = 0; s->r && r < s->c->nranks; r++)
        st_close(s, r, ST_DONE);
    for (int i = 0; i < s->npush; i++) {
        if (s->push[i].fd >= 0)
            close(s->push[i].fd);
        free(s->push[i].buf);
    }
    for (int k = 0; k < 33; k++)
        if (s->lfd[k] >= 0)
            close(s->lfd[k]);
    if (s->ep >= 0)
        close(s->ep);
    free(s->r);
    free(s->scratch);
    free(s->scratch_l);
}

int storm_ranks(const storm_cfg_t *c, int go_fd)
{
    storm_t s;
    memset(&s, 0, sizeof(s));
    int p = c->nranks, rc = 1;
    if (st_setup(&s, c) != 0)
        goto out;
    char go;
    if (read(go_fd, &go, 1) != 1) {
        st_fail(&s, "rank 0 never listened");
        goto out;
    }
    double deadline = tnt__now() + c->timeout_s;
    int next = 1;
    struct epoll_event evs[256];
    while (!s.failed && s.done < p - 1) {
        while (next < p && s.started - s.registered < c->window && !s.failed)
            st_start(&s, next++);
        if (tnt__now() > deadline) {
            st_fail(&s, "after %.0f s: %d ranks started, %d registered, %d "
                    "done", c->timeout_s, s.started, s.registered, s.done);
            break;
        }
        int n = epoll_wait(s.ep, evs, 256, 100);
        if (n < 0 && errno != EINTR) {
            st_fail(&s, "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int k = 0; k < n && !s.failed; k++) {
            uint64_t u = evs[k].data.u64;
            if (u >= ST_PUSH)
                st_push_event(&s, (int)(u - ST_PUSH));
            else if (u >= ST_LSN)
                st_accept(&s, (int)(u - ST_LSN));
            else
                st_rank_event(&s, (int)u, evs[k].events);
        }
    }
    if (!s.failed && c->tree && s.tree_copies != s.nk)
        st_fail(&s, "%d table copies reached rank 0's %d children",
                s.tree_copies, s.nk);
    if (!s.failed && !c->tree && s.star_checked != (c->verify_all ? p - 1 : 1))
        st_fail(&s, "%d star tables checked", s.star_checked);
    rc = s.failed ? 1 : 0;
    if (!s.failed)
        fprintf(stderr, "boot-storm ranks: %d ranks registered and got the "
                "table (%s; %d copies checked, %d notes)\n", p - 1,
                c->tree ? "tree" : "star",
                c->tree ? s.tree_copies : s.star_checked, s.notes);
out:
    st_teardown(&s);
    return rc;
}
