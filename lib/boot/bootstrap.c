/*
 * The bootstrap protocol, and rank 0's side of it (the other ranks':
 * boot_client.c; the tree's sockets: boot_tree.c; the messages:
 * boot_wire.c). Rank 0 listens on TNT_ROOT_ADDR; every other
 * rank connects (retrying while rank 0 starts up), proves the job key in
 * a challenge-response exchange (boot_wire.h), registers {size, rank,
 * address, host, tree listener}, and receives either the full table or an
 * error that rank 0 found (a rank with another TNT_SIZE, a duplicate
 * rank), so that a misconfigured job fails on every rank with the same
 * message instead of timing out.
 *
 * Rank 0 serves every pending connection at once from one epoll loop (a
 * wake-up costs the descriptors that are ready, not p), each with its
 * own deadline: a stranger that sends garbage, fails the proof or
 * stays silent is dropped and logged at WARNING, and however many of them
 * there are, the legitimate ranks' registrations go on being read.
 *
 * The table goes out one of two ways. The star: rank 0 sends it to every
 * rank, p - 1 copies (each entry's used bytes only). The tree, from
 * TNT_BOOT_TREE_MIN_RANKS ranks: every rank opens a bootstrap listener
 * before it registers; rank 0 sends the table to its binomial-tree
 * children's listeners, and each rank passes it on to its own children
 * (ceil(log2 p) rounds, rank 0 sends ceil(log2 p) copies). The table
 * carries one MAC, with the job key over the table nonce that every rank
 * got in its challenge, so it is forwarded as it came and a stranger on a
 * listener is dropped (boot_tree.c). Each rank acknowledges the table to
 * rank 0 over its registration connection, which stays open, and rank 0
 * gives its verdict over the same connections only when every rank has
 * it: a rank that dies during the fan-out is still seen by rank 0 (its
 * connection ends), and every other rank, with or without the table,
 * hears rank 0 name it.
 *
 * A wait must never be silent or blame the wrong rank. Rank 0 keeps the
 * registered ranks' connections open and watches them: one that closes
 * is a rank that died before the communicator exists, and the bootstrap
 * fails on every rank naming it (a dead rank is never counted as
 * registered). While ranks are missing, rank 0 logs which ones, a few
 * seconds in and then periodically, and sends the same words as a note
 * to the ranks already registered, so that they say "rank 0 is alive and
 * waiting for rank 3" rather than blame rank 0 (and the same while the
 * table has not reached some ranks). A hello of another job
 * that claims a missing rank of the same size is remembered: that rank
 * has another TNT_JOB_KEY. The claim is unproven, so it is only trusted
 * when it explains everything: once every other rank has registered and
 * BOOT_KEY_GRACE_S has passed, the bootstrap fails naming it instead of
 * waiting out TNT_CONNECT_TIMEOUT.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "boot/boot_client.h"
#include "boot/boot_tree.h"
#include "boot/boot_wire.h"
#include "boot/bootstrap.h"
#include "util/error.h"
#include "util/ifname.h"
#include "util/log.h"
#include "util/param_table.h"
#include "util/sockaddr.h"

/* A connection must register within this time, so a silent stranger
 * holds a slot only briefly. */
#define BOOT_REGISTER_WAIT_S 5.0
/* Connections rank 0 serves at once; more wait in the listen backlog
 * until strangers time out. */
#define BOOT_PENDING_MAX 4096
/* The first "still waiting for" report, then one every
 * TNT_BOOT_NOTE_EVERY_S (boot_wire.h). */
#define BOOT_NOTE_FIRST_S 3.0
/* How long the claim of a rank with another job key stands alone (every
 * other rank registered) before the bootstrap fails naming it. */
#define BOOT_KEY_GRACE_S 2.0
/* When a parent cannot pass the table to a child, how long rank 0 waits
 * for the child's registration connection to end: if it does, the child
 * died and is named as dead; else its listener is unreachable. */
#define BOOT_DEATH_GRACE_S 1.0

/* The reply, and after a good one the encoded table (header + entries,
 * built once by encode_table). */
static void send_reply(int fd, tnt_result_t status, const char *msg,
                       int nranks, const unsigned char *table,
                       size_t table_len, double deadline)
{
    tnt_boot_reply_t r;
    memset(&r, 0, sizeof(r));
    r.magic = TNT_BOOT_MAGIC;
    r.status = status;
    r.nranks = nranks;
    snprintf(r.msg, sizeof(r.msg), "%s", msg ? msg : "");
    if (tnt__io_write_all(fd, &r, sizeof(r), deadline) == TNT_SUCCESS &&
        status == TNT_SUCCESS && table)
        tnt__io_write_all(fd, table, table_len, deadline);
}

/* The table message: header + each entry's used bytes (with the
 * ranks' tree listeners when listeners is not NULL), and one MAC over
 * all of it with the job key and the table nonce every rank's challenge
 * carried. NULL if out of memory. */
static unsigned char *encode_table(const tnt_boot_args_t *a,
                                   const tnt_boot_entry_t *table,
                                   const tnt_boot_listener_t *listeners,
                                   const unsigned char *tnonce, size_t *len)
{
    int nranks = a->nranks;
    tnt_boot_table_hdr_t h;
    tnt__boot_table_hdr_init(&h, nranks, 0, tnonce);
    unsigned char *m = malloc(sizeof(h) + (size_t)nranks *
                              TNT_BOOT_WIRE_ENTRY_MAX);
    if (!m)
        return NULL;
    size_t n = tnt__boot_table_encode(table, listeners, nranks,
                                      m + sizeof(h));
    h.bytes = (uint32_t)n;
    memcpy(m, &h, sizeof(h));
    *len = sizeof(h) + n;
    tnt__auth_mac(a->key, m + TNT_AUTH_MAC_BYTES, *len - TNT_AUTH_MAC_BYTES,
                  m);
    return m;
}

/* ---- rank 0: many connections at once ------------------------------ */

typedef struct boot_conn {
    int fd;
    int stage;                 /* 0: reading the hello; 1: registration */
    size_t got;
    double deadline;
    tnt_boot_hello_t hello;
    tnt_boot_challenge_t ch;   /* what this connection was sent */
    unsigned char in[sizeof(tnt_boot_register_t)];
    char who[64];
} boot_conn_t;

typedef struct boot_claim {
    double at;                 /* 0: none */
    char who[64];
} boot_claim_t;

typedef struct boot_server {
    const tnt_boot_args_t *a;
    tnt_boot_entry_t *table;
    int *fds;                  /* by rank: registered, waiting for reply */
    int *taken;
    char (*who)[64];           /* by rank: where it registered from */
    boot_claim_t *claim;       /* by rank: a hello of another job key */
    tnt_boot_listener_t *listeners; /* by rank: for the tree fan-out */
    unsigned char tnonce[TNT_AUTH_NONCE_BYTES]; /* the table's nonce */
    int registered;
    double last_change;        /* of registered */
    int ep;                    /* epoll: listener, pending, registered */
    int listening;             /* the listener is in ep's interest */
    boot_conn_t **pend;        /* BOOT_PENDING_MAX slots, NULL: free */
    int *free_slot;            /* a stack of the free slots */
    int npend;
    char msg[240];             /* a configuration error, for every rank */
} boot_server_t;

/* What an epoll event is about: the listener, pending connection slot
 * k (1 + k), or registered rank r (EV_RANK + r). */
#define EV_LISTENER 0u
#define EV_RANK (1ull << 32)

/* Slot i leaves the pending set (its connection dropped or registered). */
static void release_slot(boot_server_t *s, int i)
{
    free(s->pend[i]);
    s->pend[i] = NULL;
    s->free_slot[BOOT_PENDING_MAX - s->npend] = i;
    s->npend--;
}

static void drop(boot_server_t *s, int i, const char *why)
{
    boot_conn_t *c = s->pend[i];
    TNT_LOG_WARN("rank 0: dropped bootstrap connection from %s: %s",
                 c->who, why);
    close(c->fd); /* which also takes it out of s->ep */
    release_slot(s, i);
}

static void accept_some(boot_server_t *s, int lfd, double *paused_until)
{
    for (int k = 0; k < 64 && s->npend < BOOT_PENDING_MAX; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM ||
                errno == ENOBUFS) {
                /* Out of descriptors: let strangers time out first. */
                TNT_LOG_WARN("rank 0: bootstrap accept: %s; pausing",
                             strerror(errno));
                *paused_until = tnt__now() + 0.1;
            }
            return;
        }
        boot_conn_t *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            return;
        }
        tnt__boot_no_delay(fd);
        c->fd = fd;
        c->deadline = tnt__now() + BOOT_REGISTER_WAIT_S;
        tnt__sockaddr_str((struct sockaddr *)&ss, c->who, sizeof(c->who));
        int slot = s->free_slot[BOOT_PENDING_MAX - 1 - s->npend];
        struct epoll_event ev = {.events = EPOLLIN,
                                 .data.u64 = 1u + (unsigned)slot};
        if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            TNT_LOG_WARN("rank 0: bootstrap epoll: %s", strerror(errno));
            close(fd);
            free(c);
            return;
        }
        s->pend[slot] = c;
        s->npend++;
    }
}

/* A well-formed hello of another job that claims a rank this job still
 * misses, with this job's size: most likely that rank, started with
 * another TNT_JOB_KEY (the job id derives from the key). */
static void note_claim(boot_server_t *s, const boot_conn_t *c)
{
    const tnt_boot_hello_t *h = &c->hello;
    if (h->magic != TNT_BOOT_MAGIC || h->version != TNT_BOOT_VERSION ||
        h->job_id == s->a->job_id || h->nranks != s->a->nranks ||
        h->rank <= 0 || h->rank >= s->a->nranks || s->taken[h->rank])
        return;
    boot_claim_t *k = &s->claim[h->rank];
    k->at = tnt__now();
    snprintf(k->who, sizeof(k->who), "%s", c->who);
}

/* A whole hello arrived: answer with the challenge. */
static const char *on_hello(boot_server_t *s, boot_conn_t *c)
{
    const char *why = tnt__boot_hello_parse(c->in, sizeof(c->hello),
                                            s->a->job_id, &c->hello);
    if (why) {
        note_claim(s, c);
        return why;
    }
    tnt_boot_challenge_t *ch = &c->ch;
    memset(ch, 0, sizeof(*ch));
    ch->magic = TNT_BOOT_MAGIC;
    ch->version = TNT_BOOT_VERSION;
    tnt__auth_random(ch->nonce, sizeof(ch->nonce));
    memcpy(ch->table_nonce, s->tnonce, sizeof(ch->table_nonce));
    unsigned char in[TNT_BOOT_AUTH_MAX];
    size_t n = tnt__boot_auth_input(0, &c->hello, ch, NULL, in);
    tnt__auth_mac(s->a->key, in, n, ch->mac);
    /* A fresh socket's send buffer always takes these few bytes. */
    if (send(c->fd, ch, sizeof(*ch), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        (ssize_t)sizeof(*ch))
        return "could not send the challenge";
    c->stage = 1;
    c->got = 0;
    return NULL;
}

/* A whole registration arrived: 1 registered, 0 dropped (*why set), -1
 * a configuration error of the job (s->msg set). */
static int on_register(boot_server_t *s, boot_conn_t *c, const char **why)
{
    tnt_boot_register_t reg;
    *why = tnt__boot_register_parse(c->in, sizeof(reg), &reg);
    if (*why)
        return 0;
    unsigned char in[TNT_BOOT_AUTH_MAX];
    size_t n = tnt__boot_auth_input(1, &c->hello, &c->ch, &reg, in);
    if (!tnt__auth_verify(s->a->key, in, n, reg.mac)) {
        *why = "authentication failed (wrong TNT_JOB_KEY, or a replay)";
        return 0;
    }
    if (tnt__boot_register_check(&reg, s->a->nranks, s->taken, s->msg,
                                 sizeof(s->msg)) != 0)
        return -1;
    /* From now on the connection is watched for the rank's death. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
                             .data.u64 = EV_RANK + (uint64_t)reg.rank};
    if (epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
        *why = "could not watch the connection (epoll)";
        return 0;
    }
    s->table[reg.rank] = reg.entry;
    s->listeners[reg.rank] = reg.listener;
    s->fds[reg.rank] = c->fd;
    s->taken[reg.rank] = 1;
    snprintf(s->who[reg.rank], sizeof(s->who[0]), "%s", c->who);
    s->claim[reg.rank].at = 0;
    s->registered++;
    s->last_change = tnt__now();
    return 1;
}

/* Read what c has; 1 if it left the pending set (registered, dropped),
 * -1 on a configuration error, 0 to keep waiting. */
static int serve_conn(boot_server_t *s, int i)
{
    boot_conn_t *c = s->pend[i];
    size_t need = c->stage == 0 ? sizeof(tnt_boot_hello_t)
                                : sizeof(tnt_boot_register_t);
    ssize_t r = recv(c->fd, c->in + c->got, need - c->got, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR)) {
        drop(s, i, "closed before registering");
        return 1;
    }
    if (r < 0)
        return 0;
    c->got += (size_t)r;
    if (c->got < need)
        return 0;
    const char *why = NULL;
    if (c->stage == 0) {
        why = on_hello(s, c);
        if (!why)
            return 0;
    } else {
        int k = on_register(s, c, &why);
        if (k < 0) {
            send_reply(c->fd, TNT_ERR_CONFIG, s->msg, s->a->nranks, NULL,
                       0, tnt__now() + 1.0);
            return -1;
        }
        if (k > 0) {
            release_slot(s, i);
            return 1;
        }
    }
    drop(s, i, why);
    return 1;
}

/* "rank 3, rank 5" and, for a rank whose hello came with another job
 * key, where from. */
static void missing_list(const boot_server_t *s, char *buf, size_t len)
{
    size_t n = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int r = 1; r < s->a->nranks && n + 1 < len; r++) {
        if (s->taken[r])
            continue;
        if (shown == 16) {
            snprintf(buf + n, len - n, ", ...");
            return;
        }
        int w = s->claim[r].at > 0
                    ? snprintf(buf + n, len - n, "%srank %d (a hello from %s "
                               "as rank %d had another TNT_JOB_KEY)",
                               shown ? ", " : "", r, s->claim[r].who, r)
                    : snprintf(buf + n, len - n, "%srank %d",
                               shown ? ", " : "", r);
        if (w < 0 || (size_t)w >= len - n)
            return;
        n += (size_t)w;
        shown++;
    }
}

/* Tell the user, and the ranks already registered, whom rank 0 waits
 * for. A note that does not fit the socket at all now is skipped (the
 * next one says the same); one that went out in part is finished, so
 * that the stream stays in frame. */
static void broadcast_note(boot_server_t *s, const char *text)
{
    tnt_boot_reply_t r;
    memset(&r, 0, sizeof(r));
    r.magic = TNT_BOOT_MAGIC;
    r.status = TNT_BOOT_WAITING;
    r.nranks = s->a->nranks;
    snprintf(r.msg, sizeof(r.msg), "%s", text);
    for (int i = 1; i < s->a->nranks; i++) {
        if (s->fds[i] < 0)
            continue;
        ssize_t n = send(s->fds[i], &r, sizeof(r),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0 && (size_t)n < sizeof(r))
            tnt__io_write_all(s->fds[i], (char *)&r + n, sizeof(r) - (size_t)n,
                              tnt__now() + 1.0);
    }
}

static void send_notes(boot_server_t *s, double started)
{
    char miss[200], text[sizeof(((tnt_boot_reply_t *)0)->msg)];
    missing_list(s, miss, sizeof(miss));
    TNT_LOG_WARN("rank 0: bootstrap: %d of %d ranks registered after "
                 "%.0f s; still waiting for %s", s->registered,
                 s->a->nranks, tnt__now() - started, miss);
    snprintf(text, sizeof(text), "%d of %d ranks registered; waiting "
             "for %s", s->registered, s->a->nranks, miss);
    broadcast_note(s, text);
}

/* A registered rank's connection is readable: it sends nothing more, so
 * that is its end (it died, or was stopped and killed). 1 if rank r is
 * gone. */
static int registered_gone(boot_server_t *s, int r)
{
    char junk[64];
    ssize_t n = recv(s->fds[r], junk, sizeof(junk), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                            errno == EINTR)))
        return 0;
    close(s->fds[r]);
    s->fds[r] = -1;
    s->taken[r] = 0;
    s->registered--;
    return 1;
}

/* Every missing rank has shown up with another job key, and nothing
 * changed for BOOT_KEY_GRACE_S: waiting longer cannot help. */
static int only_wrong_keys_missing(const boot_server_t *s, double now)
{
    for (int r = 1; r < s->a->nranks; r++) {
        if (s->taken[r])
            continue;
        if (s->claim[r].at <= 0 ||
            now - s->claim[r].at < BOOT_KEY_GRACE_S ||
            now - s->last_change < BOOT_KEY_GRACE_S)
            return 0;
    }
    return 1;
}

/* The listener is watched while a slot is free and accept is not
 * paused (out of descriptors); level-triggered, so it must leave the
 * interest set rather than wake every loop unserved. */
static void set_listening(boot_server_t *s, int lfd, int on)
{
    if (on == s->listening)
        return;
    struct epoll_event ev = {.events = on ? EPOLLIN : 0,
                             .data.u64 = EV_LISTENER};
    if (epoll_ctl(s->ep, EPOLL_CTL_MOD, lfd, &ev) == 0)
        s->listening = on;
}

/* Once every BOOT_TICK_S, not per wake-up: the deadlines of the pending
 * connections and the wrong-key verdict cost O(pending) and O(p). */
#define BOOT_TICK_S 0.1

static tnt_result_t serve_loop(boot_server_t *s, int lfd, double deadline)
{
    const tnt_boot_args_t *a = s->a;
    double paused_until = 0, started = tnt__now(), next_tick = 0;
    double next_note = started + BOOT_NOTE_FIRST_S;
    char miss[200];
    struct epoll_event evs[64];
    while (s->registered < a->nranks) {
        double now = tnt__now();
        if (now >= deadline) {
            missing_list(s, miss, sizeof(miss));
            return tnt__error(TNT_ERR_CONNECT, "rank 0: only %d of %d ranks "
                              "registered within TNT_CONNECT_TIMEOUT=%.0f s; "
                              "missing: %s", s->registered, a->nranks,
                              a->timeout_s, miss);
        }
        if (now >= next_tick) {
            next_tick = now + BOOT_TICK_S;
            if (only_wrong_keys_missing(s, now)) {
                missing_list(s, miss, sizeof(miss));
                return tnt__error(TNT_ERR_CONFIG, "rank 0: every rank but "
                                  "%s registered; do all ranks have the "
                                  "same TNT_JOB_KEY?", miss);
            }
            for (int i = 0; i < BOOT_PENDING_MAX; i++)
                if (s->pend[i] && s->pend[i]->deadline <= now)
                    drop(s, i, "silent for too long");
        }
        if (now >= next_note) {
            send_notes(s, started);
            next_note = now + TNT_BOOT_NOTE_EVERY_S;
        }
        set_listening(s, lfd, s->npend < BOOT_PENDING_MAX &&
                                  now >= paused_until);
        /* Wake at least every tick to expire silent connections. */
        int n = epoll_wait(s->ep, evs, 64, (int)(BOOT_TICK_S * 1000));
        if (n < 0 && errno != EINTR)
            return tnt__error(TNT_ERR_SYSTEM, "bootstrap epoll_wait: %s",
                              strerror(errno));
        /* Deaths first, so that a registration read in the same wake-up
         * is not taken for a complete job. */
        for (int k = 0; k < n; k++) {
            uint64_t u = evs[k].data.u64;
            if (u < EV_RANK)
                continue;
            int r = (int)(u - EV_RANK);
            if (s->fds[r] < 0 || !registered_gone(s, r))
                continue;
            missing_list(s, miss, sizeof(miss));
            return tnt__error(TNT_ERR_PEER_LOST, "rank 0: rank %d (host %s, "
                              "from %s) registered, then closed its "
                              "bootstrap connection: it died before the "
                              "communicator was created (ranks missing "
                              "now: %s)", r, s->table[r].host, s->who[r],
                              miss);
        }
        int accept_now = 0;
        for (int k = 0; k < n; k++) {
            uint64_t u = evs[k].data.u64;
            if (u == EV_LISTENER) {
                accept_now = 1;
                continue;
            }
            if (u >= EV_RANK)
                continue;
            int i = (int)(u - 1);
            if (s->pend[i] && serve_conn(s, i) < 0)
                return tnt__error(TNT_ERR_CONFIG, "bootstrap: %s", s->msg);
        }
        if (accept_now)
            accept_some(s, lfd, &paused_until);
    }
    return TNT_SUCCESS;
}

/* ---- rank 0: the table down the tree -------------------------------- */

/* Rank 0 hears from every rank over its registration connection: the
 * rank's acknowledgement, or the end of the connection (its death). */
typedef struct boot_ack_in {
    size_t got;
    int done;
    unsigned char buf[sizeof(tnt_boot_ack_t)];
} boot_ack_in_t;

/* "rank 3, rank 5": the ranks the table has not reached yet. */
static void unacked_list(const boot_server_t *s, const boot_ack_in_t *in,
                         char *buf, size_t len)
{
    size_t n = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int r = 1; r < s->a->nranks && n + 1 < len; r++) {
        if (in[r].done)
            continue;
        if (shown == 16) {
            snprintf(buf + n, len - n, ", ...");
            return;
        }
        int w = snprintf(buf + n, len - n, "%srank %d", shown ? ", " : "",
                         r);
        if (w < 0 || (size_t)w >= len - n)
            return;
        n += (size_t)w;
        shown++;
    }
}

static tnt_result_t died_in_fan_out(const boot_server_t *s, int r,
                                    const char *how)
{
    return tnt__error(TNT_ERR_PEER_LOST, "rank 0: rank %d (host %s, from %s) "
                      "registered, then closed its bootstrap connection "
                      "while the table went down the tree%s: it died "
                      "before the communicator was created", r,
                      s->table[r].host, s->who[r], how);
}

/* Rank `from` could not pass the table to rank `about`. A child that
 * died is named as dead (its registration connection ends, within
 * BOOT_DEATH_GRACE_S), not its parent; a child that is alive has a
 * listener its parent cannot reach. */
static tnt_result_t fan_failure(boot_server_t *s, int from, int about,
                                const char *why)
{
    char how[200];
    snprintf(how, sizeof(how), " (rank %d could not pass it the table: %s)",
             from, why);
    double until = tnt__now() + BOOT_DEATH_GRACE_S;
    while (s->fds[about] >= 0 && tnt__now() < until) {
        struct pollfd pf = {.fd = s->fds[about],
                            .events = POLLIN | POLLRDHUP};
        if (poll(&pf, 1, 50) > 0 && registered_gone(s, about))
            break;
    }
    if (s->fds[about] < 0)
        return died_in_fan_out(s, about, how);
    char at[80];
    tnt__boot_listener_str(&s->listeners[about], at, sizeof(at));
    return tnt__error(TNT_ERR_CONNECT, "rank 0: rank %d could not pass the "
                      "bootstrap table to rank %d (host %s, bootstrap "
                      "listener %s): %s; rank %d is alive (its connection "
                      "to rank 0 is open), so rank %d cannot reach its "
                      "listener", from, about, s->table[about].host, at, why,
                      about, from);
}

/* Rank r's registration connection is readable: its acknowledgement (a
 * piece of it), or its end. */
static tnt_result_t read_ack(boot_server_t *s, int r, boot_ack_in_t *in,
                             int *nacked)
{
    ssize_t n = recv(s->fds[r], in->buf + in->got, sizeof(in->buf) - in->got,
                     MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return TNT_SUCCESS;
    if (n <= 0) {
        close(s->fds[r]);
        s->fds[r] = -1;
        return died_in_fan_out(s, r, in->done ? " (after it had the table)"
                                              : "");
    }
    in->got += (size_t)n;
    if (in->got < sizeof(in->buf))
        return TNT_SUCCESS;
    in->got = 0;
    tnt_boot_ack_t ack;
    const char *why = tnt__boot_ack_parse(in->buf, sizeof(in->buf), r,
                                          s->a->nranks, &ack);
    if (why)
        return tnt__error(TNT_ERR_PROTOCOL, "rank 0: from rank %d (host "
                          "%s): %s", r, s->table[r].host, why);
    if (ack.status != 0)
        return fan_failure(s, r, ack.about, ack.msg);
    if (in->done)
        return tnt__error(TNT_ERR_PROTOCOL, "rank 0: rank %d acknowledged "
                          "the bootstrap table twice", r);
    in->done = 1;
    (*nacked)++;
    return TNT_SUCCESS;
}

/* Rank 0 pushes the table to its own children, then waits until every
 * rank has acknowledged it, watching every registration connection: a
 * rank that dies during the fan-out is named, and rank 0's verdict
 * reaches every rank over the star (root_serve). While ranks lack the
 * table, rank 0 says which, as while ranks are missing. */
static tnt_result_t root_fan_out(boot_server_t *s, const unsigned char *msg,
                                 size_t len, double deadline)
{
    const tnt_boot_args_t *a = s->a;
    int p = a->nranks, kids[32], nk = tnt__boot_tree_children(0, p, kids);
    char why[100], list[160];
    for (int k = 0; k < nk; k++)
        if (tnt__boot_tree_push(&s->listeners[kids[k]], msg, len, deadline,
                                why, sizeof(why)) != 0)
            return fan_failure(s, 0, kids[k], why);
    boot_ack_in_t *in = calloc((size_t)p, sizeof(*in));
    if (!in)
        return tnt__error(TNT_ERR_NO_MEMORY, "bootstrap: out of memory");
    tnt_result_t rc = TNT_SUCCESS;
    int nacked = 1;
    double started = tnt__now(), next_note = started + BOOT_NOTE_FIRST_S;
    struct epoll_event evs[64];
    while (nacked < p && rc == TNT_SUCCESS) {
        double now = tnt__now();
        if (now >= deadline) {
            unacked_list(s, in, list, sizeof(list));
            rc = tnt__error(TNT_ERR_CONNECT, "rank 0: every rank registered, "
                            "but the bootstrap table did not reach %s within "
                            "TNT_CONNECT_TIMEOUT=%.0f s (it goes down a "
                            "binomial tree: see their tree parents' logs)",
                            list, a->timeout_s);
            break;
        }
        if (now >= next_note) {
            char text[sizeof(((tnt_boot_reply_t *)0)->msg)];
            next_note = now + TNT_BOOT_NOTE_EVERY_S;
            unacked_list(s, in, list, sizeof(list));
            TNT_LOG_WARN("rank 0: bootstrap: all %d ranks registered; after "
                         "%.0f s the table has not reached %s", p,
                         now - started, list);
            snprintf(text, sizeof(text), "all %d ranks registered; the table "
                     "has not reached %s yet", p, list);
            broadcast_note(s, text);
        }
        int n = epoll_wait(s->ep, evs, 64, (int)(BOOT_TICK_S * 1000));
        if (n < 0 && errno != EINTR)
            rc = tnt__error(TNT_ERR_SYSTEM, "bootstrap epoll_wait: %s",
                            strerror(errno));
        for (int k = 0; k < n && rc == TNT_SUCCESS; k++) {
            uint64_t u = evs[k].data.u64;
            if (u < EV_RANK)
                continue;
            int r = (int)(u - EV_RANK);
            if (s->fds[r] >= 0)
                rc = read_ack(s, r, &in[r], &nacked);
        }
    }
    free(in);
    return rc;
}

/* The tree when rank 0's TNT_BOOT_TREE_MIN_RANKS says so (want) and
 * every rank opened a listener (one whose own setting said star did
 * not: then the star, which every rank also takes). */
static int use_tree(const boot_server_t *s, int want)
{
    if (!want)
        return 0;
    for (int r = 1; r < s->a->nranks; r++)
        if (s->listeners[r].family == 0) {
            TNT_LOG_INFO("rank 0: rank %d opened no bootstrap listener "
                         "(another TNT_BOOT_TREE_MIN_RANKS?): the table goes "
                         "from rank 0 to every rank", r);
            return 0;
        }
    return 1;
}

static tnt_result_t root_serve(const tnt_boot_args_t *a, int lfd,
                               tnt_boot_entry_t *table, double deadline,
                               int want_tree)
{
    int p = a->nranks;
    boot_server_t s = {.a = a, .table = table, .registered = 1,
                       .last_change = tnt__now(), .ep = -1};
    s.fds = malloc((size_t)p * sizeof(int));
    s.taken = calloc((size_t)p, sizeof(int));
    s.who = calloc((size_t)p, sizeof(*s.who));
    s.claim = calloc((size_t)p, sizeof(*s.claim));
    s.listeners = calloc((size_t)p, sizeof(*s.listeners));
    s.pend = calloc(BOOT_PENDING_MAX, sizeof(*s.pend));
    s.free_slot = malloc(BOOT_PENDING_MAX * sizeof(*s.free_slot));
    tnt_result_t rc = TNT_SUCCESS;
    if (!s.fds || !s.taken || !s.who || !s.claim || !s.listeners ||
        !s.pend || !s.free_slot) {
        rc = tnt__error(TNT_ERR_NO_MEMORY, "bootstrap: out of memory");
        goto out_free;
    }
    s.ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTENER};
    if (s.ep < 0 || epoll_ctl(s.ep, EPOLL_CTL_ADD, lfd, &ev) != 0) {
        rc = tnt__error(TNT_ERR_SYSTEM, "bootstrap epoll: %s",
                        strerror(errno));
        goto out_free;
    }
    s.listening = 1;
    for (int i = 0; i < p; i++)
        s.fds[i] = -1;
    /* Slots are taken from the top of the stack: 0 first. */
    for (int i = 0; i < BOOT_PENDING_MAX; i++)
        s.free_slot[i] = BOOT_PENDING_MAX - 1 - i;
    s.taken[0] = 1;
    tnt__auth_random(s.tnonce, sizeof(s.tnonce));
    rc = serve_loop(&s, lfd, deadline);
    for (int i = 0; i < BOOT_PENDING_MAX; i++)
        if (s.pend[i])
            drop(&s, i, "still unauthenticated when the bootstrap ended");
    /* Late strangers wait in the backlog, closed with the listener. */
    set_listening(&s, lfd, 0);
    int tree = rc == TNT_SUCCESS && use_tree(&s, want_tree);
    size_t tlen = 0;
    unsigned char *tmsg = NULL;
    if (rc == TNT_SUCCESS) {
        tmsg = encode_table(a, table, tree ? s.listeners : NULL, s.tnonce,
                            &tlen);
        if (!tmsg)
            rc = tnt__error(TNT_ERR_NO_MEMORY, "bootstrap: out of memory "
                            "for the table of %d ranks", p);
    }
    if (rc == TNT_SUCCESS && tree) {
        TNT_LOG_INFO("rank 0: bootstrap table (%zu bytes) to %d ranks down a "
                     "binomial tree", tlen, p);
        rc = root_fan_out(&s, tmsg, tlen, deadline);
    }
    for (int i = 1; i < p; i++) {
        if (s.fds[i] < 0)
            continue;
        send_reply(s.fds[i], rc < 0 ? rc : rc == TNT_SUCCESS ? TNT_SUCCESS
                                                   : TNT_ERR_CONNECT,
                   rc == TNT_SUCCESS ? "" : tnt_last_error(), p,
                   tree ? NULL : tmsg, tlen, deadline);
        close(s.fds[i]);
    }
    free(tmsg);
out_free:
    if (s.ep >= 0)
        close(s.ep);
    free(s.free_slot);
    free(s.pend);
    free(s.listeners);
    free(s.claim);
    free(s.who);
    free(s.taken);
    free(s.fds);
    return rc;
}

static tnt_result_t root_bootstrap(const tnt_boot_args_t *a,
                                   const struct sockaddr_storage *ss,
                                   socklen_t sl, tnt_boot_entry_t *table,
                                   double deadline, const char *if_ip,
                                   int want_tree)
{
    int lfd = tnt__boot_socket(ss->ss_family);
    if (lfd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (const struct sockaddr *)ss, sl) != 0 ||
        listen(lfd, SOMAXCONN) != 0) {
        int e = errno;
        close(lfd);
        return tnt__error(TNT_ERR_CONFIG, "rank 0 cannot listen on "
                          "TNT_ROOT_ADDR=%s: %s", a->root_addr, strerror(e));
    }
    char ip[64];
    tnt__sockaddr_ip((const struct sockaddr *)ss, ip, sizeof(ip));
    /* A wildcard root address says nothing about which interface the
     * other ranks use; loopback is right for one host. */
    if (*if_ip)
        snprintf(ip, sizeof(ip), "%s", if_ip);
    else if (strcmp(ip, "0.0.0.0") == 0)
        snprintf(ip, sizeof(ip), "127.0.0.1");
    else if (strcmp(ip, "::") == 0)
        snprintf(ip, sizeof(ip), "::1");
    memset(&table[0], 0, sizeof(table[0]));
    table[0].rank = 0;
    snprintf(table[0].host, sizeof(table[0].host), "%s", a->host);
    tnt_result_t rc = a->listen(a->listen_arg, ip, &table[0]);
    if (rc == TNT_SUCCESS)
        rc = root_serve(a, lfd, table, deadline, want_tree);
    close(lfd);
    return rc;
}

/* TNT_SOCKET_IFNAME: the data listener of this rank binds to the address
 * of the interface it selects instead of the one the route to rank 0
 * happens to use. Rank 0 also binds its rendezvous there when
 * TNT_ROOT_ADDR names the wildcard address, keeping the port. */
static tnt_result_t pick_interface(const tnt_boot_args_t *a,
                                   struct sockaddr_storage *ss,
                                   socklen_t *sl, char *if_ip, size_t len)
{
    const char *spec = tnt__env(TNT_VAR_SOCKET_IFNAME);
    if (spec == NULL || *spec == '\0')
        return TNT_SUCCESS;
    char err[768], name[64];
    if (tnt__ifname_pick(spec, if_ip, len, name, sizeof(name), err,
                         sizeof(err)) != 0)
        return tnt__error(TNT_ERR_CONFIG, "rank %d: %s", a->rank, err);
    char ip[64];
    tnt__sockaddr_ip((const struct sockaddr *)ss, ip, sizeof(ip));
    if (a->rank == 0 && (strcmp(ip, "0.0.0.0") == 0 ||
                         strcmp(ip, "::") == 0)) {
        int port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
        if (ss->ss_family == AF_INET6)
            port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
        TNT_CHECK(tnt__sockaddr_parse_ip(if_ip, port, ss, sl));
    }
    TNT_LOG_INFO("TNT_SOCKET_IFNAME=%s: listening on %s (%s)", spec, if_ip,
                 name);
    return TNT_SUCCESS;
}

tnt_result_t tnt__bootstrap(const tnt_boot_args_t *a,
                            tnt_boot_entry_t *table)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    TNT_CHECK(tnt__sockaddr_parse_hostport("TNT_ROOT_ADDR", a->root_addr,
                                           &ss, &sl));
    char if_ip[64] = "";
    TNT_CHECK(pick_interface(a, &ss, &sl, if_ip, sizeof(if_ip)));
    long tree_min = 0;
    TNT_CHECK(tnt__env_long(TNT_VAR_BOOT_TREE_MIN_RANKS, &tree_min));
    int want_tree = a->nranks >= tree_min;
    double deadline = tnt__now() + a->timeout_s;
    if (a->rank == 0)
        return root_bootstrap(a, &ss, sl, table, deadline, if_ip,
                              want_tree);
    return tnt__boot_client(a, &ss, sl, table, deadline, if_ip, want_tree);
}
