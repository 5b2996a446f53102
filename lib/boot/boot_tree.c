/*
 * The sockets of the tree fan-out (boot_tree.h). A rank that waits for
 * the table serves a few connections to its listener at once, each with
 * its own deadline, so that strangers (garbage, a table without the
 * key's MAC, silence) are dropped and logged while its tree parent's
 * table is still read.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot/boot_tree.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sockaddr.h"

/* A connection to a listener must bring its table within this time. */
#define TREE_CONN_WAIT_S 5.0

int tnt__boot_socket(int family)
{
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

void tnt__boot_no_delay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

tnt_result_t tnt__boot_tree_listen(const char *ip, int *fd,
                                   tnt_boot_listener_t *l)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    TNT_CHECK(tnt__sockaddr_parse_ip(ip, 0, &ss, &sl));
    int s = tnt__boot_socket(ss.ss_family);
    if (s < 0)
        return tnt__error(TNT_ERR_SYSTEM, "bootstrap listener: socket: %s",
                          strerror(errno));
    socklen_t bl = sizeof(ss);
    if (bind(s, (struct sockaddr *)&ss, sl) != 0 || listen(s, 64) != 0 ||
        getsockname(s, (struct sockaddr *)&ss, &bl) != 0) {
        int e = errno;
        close(s);
        return tnt__error(TNT_ERR_SYSTEM, "bootstrap listener on %s: %s", ip,
                          strerror(e));
    }
    memset(l, 0, sizeof(*l));
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        l->family = 4;
        l->port = ntohs(in->sin_port);
        memcpy(l->ip, &in->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        l->family = 6;
        l->port = ntohs(in6->sin6_port);
        memcpy(l->ip, &in6->sin6_addr, 16);
    }
    *fd = s;
    return TNT_SUCCESS;
}

static socklen_t listener_sockaddr(const tnt_boot_listener_t *l,
                                   struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (l->family == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(l->port);
        memcpy(&in->sin_addr, l->ip, 4);
        return sizeof(*in);
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(l->port);
    memcpy(&in6->sin6_addr, l->ip, 16);
    return sizeof(*in6);
}

void tnt__boot_listener_str(const tnt_boot_listener_t *l, char *buf,
                            size_t len)
{
    if (l->family == 0) {
        snprintf(buf, len, "no listener");
        return;
    }
    struct sockaddr_storage ss;
    listener_sockaddr(l, &ss);
    tnt__sockaddr_str((const struct sockaddr *)&ss, buf, len);
}

int tnt__boot_tree_push(const tnt_boot_listener_t *l, const void *msg,
                        size_t len, double deadline, char *why,
                        size_t whylen)
{
    struct sockaddr_storage ss;
    socklen_t sl = listener_sockaddr(l, &ss);
    int fd = tnt__boot_socket(ss.ss_family);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return -1;
    }
    int r = connect(fd, (const struct sockaddr *)&ss, sl);
    if (r != 0 && errno == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int err = ETIMEDOUT;
        socklen_t el = sizeof(err);
        double left = deadline - tnt__now();
        if (left > 0 && poll(&pfd, 1, (int)(left * 1000) + 1) > 0)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        r = err ? -1 : 0;
        errno = err;
    }
    if (r != 0) {
        snprintf(why, whylen, "connect: %s", strerror(errno));
        close(fd);
        return -1;
    }
    /* No wait for an ACK before the table's last segment. */
    tnt__boot_no_delay(fd);
    tnt_result_t rc = tnt__io_write_all(fd, msg, len, deadline);
    close(fd);
    if (rc != TNT_SUCCESS) {
        snprintf(why, whylen, "sending the table: %s", tnt_strerror(rc));
        return -1;
    }
    return 0;
}

const char *tnt__boot_table_accept(const tnt_boot_args_t *a,
                                   const unsigned char *tnonce,
                                   const unsigned char *msg, size_t len,
                                   tnt_boot_entry_t *table,
                                   tnt_boot_listener_t *listeners)
{
    tnt_boot_table_hdr_t h;
    if (len < sizeof(h))
        return "bootstrap table cut short";
    const char *why = tnt__boot_table_hdr_parse(msg, sizeof(h), a->nranks,
                                                &h);
    if (why)
        return why;
    if (len != sizeof(h) + h.bytes)
        return "bootstrap table of the wrong length";
    /* The MAC first: a stranger's bytes are never decoded. */
    if (memcmp(h.table_nonce, tnonce, sizeof(h.table_nonce)) != 0)
        return "a bootstrap table of another job (wrong table nonce)";
    if (!tnt__auth_verify(a->key, msg + TNT_AUTH_MAC_BYTES,
                          len - TNT_AUTH_MAC_BYTES, h.mac))
        return "authentication failed (wrong TNT_JOB_KEY, or forged)";
    return tnt__boot_table_decode(msg + sizeof(h), h.bytes, a->nranks,
                                  table, listeners);
}

static void tconn_drop(tnt_boot_tree_wait_t *w, int i, const char *why)
{
    tnt_boot_tconn_t *c = &w->c[i];
    if (why)
        TNT_LOG_SECURITY("rank %d: dropped bootstrap table connection "
                         "from %s: %s", w->a->rank, c->who, why);
    close(c->fd);
    free(c->buf);
    w->c[i] = w->c[--w->n];
}

void tnt__boot_tree_accept(tnt_boot_tree_wait_t *w, int lfd)
{
    while (w->n < TNT_BOOT_TREE_PENDING_MAX) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        tnt_boot_tconn_t *c = &w->c[w->n];
        memset(c, 0, sizeof(*c));
        c->buf = malloc(sizeof(tnt_boot_table_hdr_t));
        if (!c->buf) {
            close(fd);
            return;
        }
        c->fd = fd;
        c->deadline = tnt__now() + TREE_CONN_WAIT_S;
        c->need = sizeof(tnt_boot_table_hdr_t);
        tnt__sockaddr_str((struct sockaddr *)&ss, c->who, sizeof(c->who));
        w->n++;
    }
}

void tnt__boot_tree_expire(tnt_boot_tree_wait_t *w, double now)
{
    for (int i = 0; i < w->n;)
        if (w->c[i].deadline <= now)
            tconn_drop(w, i, "silent for too long");
        else
            i++;
}

int tnt__boot_tree_read(tnt_boot_tree_wait_t *w, int i,
                        tnt_boot_entry_t *table,
                        tnt_boot_listener_t *listeners,
                        unsigned char **msg, size_t *len)
{
    tnt_boot_tconn_t *c = &w->c[i];
    ssize_t r = recv(c->fd, c->buf + c->got, c->need - c->got,
                     MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR)) {
        tconn_drop(w, i, "closed before a whole table came");
        return 0;
    }
    if (r < 0)
        return 0;
    c->got += (size_t)r;
    if (c->got < c->need)
        return 0;
    tnt_boot_table_hdr_t h;
    if (c->need == sizeof(h)) {
        /* The header says how long the rest is: checked before the
         * buffer grows to it (at most p entries of the longest kind). */
        const char *why = tnt__boot_table_hdr_parse(c->buf, sizeof(h),
                                                    w->a->nranks, &h);
        if (why) {
            tconn_drop(w, i, why);
            return 0;
        }
        unsigned char *b = realloc(c->buf, sizeof(h) + h.bytes);
        if (!b) {
            tconn_drop(w, i, "out of memory for its table");
            return 0;
        }
        c->buf = b;
        c->need = sizeof(h) + h.bytes;
        return 0;
    }
    const char *why = tnt__boot_table_accept(w->a, w->tnonce, c->buf,
                                             c->got, table, listeners);
    if (why) {
        tconn_drop(w, i, why);
        return 0;
    }
    *msg = c->buf;
    *len = c->got;
    c->buf = NULL;
    tconn_drop(w, i, NULL);
    return 1;
}

void tnt__boot_tree_close(tnt_boot_tree_wait_t *w, const char *why)
{
    while (w->n > 0)
        tconn_drop(w, w->n - 1, why);
}
