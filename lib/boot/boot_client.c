/*
 * The bootstrap of a rank other than 0 (bootstrap.c has the protocol,
 * rank 0's side and the entry point): reach rank 0, prove the job key,
 * register, and take the table from rank 0 (the star) or from its tree
 * parent (then pass it on and acknowledge it), with rank 0's notes and
 * verdict read all along, so that no wait is silent.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot/boot_client.h"
#include "boot/boot_tree.h"
#include "boot/boot_wire.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sockaddr.h"

static tnt_result_t connect_root(const tnt_boot_args_t *a,
                                 const struct sockaddr_storage *ss,
                                 socklen_t sl, double deadline, int *out)
{
    const char *last = "no attempt";
    while (tnt__now() < deadline) {
        int fd = tnt__boot_socket(ss->ss_family);
        if (fd < 0)
            return tnt__error(TNT_ERR_SYSTEM, "socket: %s", strerror(errno));
        int r = connect(fd, (const struct sockaddr *)ss, sl);
        if (r != 0 && errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int err = ETIMEDOUT;
            socklen_t len = sizeof(err);
            if (poll(&pfd, 1, 1000) > 0)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            r = err ? -1 : 0;
            errno = err;
        }
        if (r == 0) {
            tnt__boot_no_delay(fd);
            *out = fd;
            return TNT_SUCCESS;
        }
        last = strerror(errno);
        close(fd);
        /* Rank 0 may not be listening yet. */
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return tnt__error(TNT_ERR_CONNECT, "rank %d could not reach rank 0 at "
                      "TNT_ROOT_ADDR=%s within TNT_CONNECT_TIMEOUT=%.0f s "
                      "(last error: %s)", a->rank, a->root_addr,
                      a->timeout_s, last);
}

/* The client's half of the handshake on a connected socket: send the
 * hello, check rank 0's proof, send the registration with this rank's.
 * The challenge's table nonce goes to tnonce: the table's MAC covers it. */
static tnt_result_t client_register(const tnt_boot_args_t *a, int fd,
                                    tnt_boot_register_t *reg,
                                    unsigned char *tnonce, double deadline)
{
    tnt_boot_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic = TNT_BOOT_MAGIC;
    h.version = TNT_BOOT_VERSION;
    h.job_id = a->job_id;
    h.nranks = a->nranks;
    h.rank = a->rank;
    tnt__auth_random(h.nonce, sizeof(h.nonce));
    tnt_boot_challenge_t ch;
    unsigned char raw[sizeof(ch)];
    tnt_result_t rc = tnt__io_write_all(fd, &h, sizeof(h), deadline);
    if (rc == TNT_SUCCESS)
        rc = tnt__io_read_all(fd, raw, sizeof(raw), deadline);
    if (rc != TNT_SUCCESS)
        return tnt__error(rc == TNT_TIMEOUT ? TNT_TIMEOUT : TNT_ERR_CONNECT,
                          "rank %d: rank 0 at %s did not answer the "
                          "bootstrap hello (%s); do all ranks have the same "
                          "TNT_JOB_KEY?", a->rank, a->root_addr,
                          tnt_strerror(rc));
    unsigned char in[TNT_BOOT_AUTH_MAX];
    const char *why = tnt__boot_challenge_parse(raw, sizeof(raw), &ch);
    size_t n = tnt__boot_auth_input(0, &h, &ch, NULL, in);
    if (!why && !tnt__auth_verify(a->key, in, n, ch.mac))
        why = "it does not know the job key";
    if (why)
        return tnt__error(TNT_ERR_PROTOCOL, "rank %d: %s is not this job's "
                          "rank 0: %s (check TNT_ROOT_ADDR and "
                          "TNT_JOB_KEY)", a->rank, a->root_addr, why);
    memcpy(tnonce, ch.table_nonce, sizeof(ch.table_nonce));
    reg->magic = TNT_BOOT_MAGIC;
    reg->version = TNT_BOOT_VERSION;
    reg->nranks = a->nranks;
    reg->rank = a->rank;
    n = tnt__boot_auth_input(1, &h, &ch, reg, in);
    tnt__auth_mac(a->key, in, n, reg->mac);
    return tnt__io_write_all(fd, reg, sizeof(*reg), deadline);
}

/* Read rank 0's answer to the registration. Notes (TNT_BOOT_WAITING)
 * say that rank 0 is alive and whom it waits for: each is logged, and
 * while they come the wait goes on past this rank's own deadline, so
 * that rank 0's verdict (which names the missing ranks) arrives instead
 * of a guess that blames rank 0. */
static tnt_result_t await_verdict(const tnt_boot_args_t *a, int fd,
                                  double deadline, tnt_boot_reply_t *reply)
{
    char last[sizeof(reply->msg)] = "";
    for (;;) {
        unsigned char raw[sizeof(*reply)];
        double until = deadline;
        if (*last && until < tnt__now() + 2 * TNT_BOOT_NOTE_EVERY_S)
            until = tnt__now() + 2 * TNT_BOOT_NOTE_EVERY_S;
        tnt_result_t rc = tnt__io_read_all(fd, raw, sizeof(raw), until);
        if (rc != TNT_SUCCESS) {
            if (*last)
                return tnt__error(TNT_ERR_CONNECT, "rank %d: rank 0 at %s "
                                  "went silent while waiting for other ranks "
                                  "(it last said: %s)", a->rank,
                                  a->root_addr, last);
            return tnt__error(rc == TNT_TIMEOUT ? TNT_TIMEOUT
                                                : TNT_ERR_CONNECT,
                              "rank %d: no bootstrap answer from rank 0 at "
                              "%s (%s)", a->rank, a->root_addr,
                              tnt_strerror(rc));
        }
        const char *why = tnt__boot_reply_parse(raw, sizeof(raw),
                                                a->nranks, reply);
        if (why)
            return tnt__error(TNT_ERR_PROTOCOL, "rank %d: %s from %s",
                              a->rank, why, a->root_addr);
        if (reply->status != TNT_BOOT_WAITING)
            return TNT_SUCCESS;
        snprintf(last, sizeof(last), "%s", reply->msg);
        TNT_LOG_WARN("rank %d: registered; rank 0 is alive and waiting: %s",
                     a->rank, last);
    }
}

/* The table after rank 0's good reply (the star): header, then the
 * entries, each length checked before anything is allocated or read. */
static tnt_result_t read_table(const tnt_boot_args_t *a, int fd,
                               const unsigned char *tnonce,
                               tnt_boot_entry_t *table, double deadline)
{
    tnt_boot_table_hdr_t h;
    unsigned char raw[sizeof(h)];
    tnt_result_t rc = tnt__io_read_all(fd, raw, sizeof(raw), deadline);
    if (rc != TNT_SUCCESS)
        return tnt__error(TNT_ERR_CONNECT, "rank %d: bootstrap table "
                          "incomplete (%s)", a->rank, tnt_strerror(rc));
    const char *why = tnt__boot_table_hdr_parse(raw, sizeof(raw), a->nranks,
                                                &h);
    if (why)
        return tnt__error(TNT_ERR_PROTOCOL, "rank %d: %s from %s", a->rank,
                          why, a->root_addr);
    unsigned char *m = malloc(sizeof(h) + h.bytes);
    if (!m)
        return tnt__error(TNT_ERR_NO_MEMORY, "rank %d: out of memory for "
                          "the bootstrap table", a->rank);
    memcpy(m, raw, sizeof(h));
    rc = tnt__io_read_all(fd, m + sizeof(h), h.bytes, deadline);
    if (rc != TNT_SUCCESS)
        rc = tnt__error(TNT_ERR_CONNECT, "rank %d: bootstrap table "
                        "incomplete (%s)", a->rank, tnt_strerror(rc));
    else if ((why = tnt__boot_table_accept(a, tnonce, m, sizeof(h) + h.bytes,
                                           table, NULL)))
        rc = tnt__error(TNT_ERR_PROTOCOL, "rank %d: %s from %s", a->rank,
                        why, a->root_addr);
    free(m);
    return rc;
}

/* The star: rank 0's verdict, and after a good one the table. */
static tnt_result_t client_star(const tnt_boot_args_t *a, int fd,
                                const unsigned char *tnonce,
                                tnt_boot_entry_t *table, double deadline)
{
    tnt_boot_reply_t reply;
    TNT_CHECK(await_verdict(a, fd, deadline, &reply));
    if (reply.status != TNT_SUCCESS)
        return tnt__error(reply.status < 0 ? (tnt_result_t)reply.status
                                           : TNT_ERR_CONFIG,
                          "rank %d: the bootstrap failed at rank 0: %s",
                          a->rank, reply.msg);
    return read_table(a, fd, tnonce, table, deadline);
}

/* A message from rank 0 while this rank waits for the table on its
 * listener and its registration connection alike: a note (logged, kept
 * in last: 0, go on) or rank 0's verdict (1, *rc says it): an error, or
 * success with the table after it, when rank 0 chose the star. */
static int star_message(const tnt_boot_args_t *a, int fd,
                        const unsigned char *tnonce, tnt_boot_entry_t *table,
                        double deadline, char *last, size_t lastlen,
                        tnt_result_t *rc)
{
    tnt_boot_reply_t reply;
    unsigned char raw[sizeof(reply)];
    /* Rank 0 writes whole replies: the rest of one follows at once. */
    double until = tnt__now() + 1.0 > deadline ? tnt__now() + 1.0 : deadline;
    tnt_result_t r = tnt__io_read_all(fd, raw, sizeof(raw), until);
    const char *why = NULL;
    if (r != TNT_SUCCESS) {
        *rc = tnt__error(TNT_ERR_CONNECT, "rank %d: rank 0 at %s closed the "
                         "bootstrap connection before this rank had the "
                         "table (%s)%s%s", a->rank, a->root_addr,
                         tnt_strerror(r), *last ? "; it last said: " : "",
                         last);
        return 1;
    }
    if ((why = tnt__boot_reply_parse(raw, sizeof(raw), a->nranks, &reply))) {
        *rc = tnt__error(TNT_ERR_PROTOCOL, "rank %d: %s from %s", a->rank,
                         why, a->root_addr);
        return 1;
    }
    if (reply.status == TNT_BOOT_WAITING) {
        snprintf(last, lastlen, "%s", reply.msg);
        TNT_LOG_WARN("rank %d: registered; rank 0 is alive and waiting: %s",
                     a->rank, last);
        return 0;
    }
    if (reply.status != TNT_SUCCESS)
        *rc = tnt__error(reply.status < 0 ? (tnt_result_t)reply.status
                                          : TNT_ERR_CONFIG,
                         "rank %d: the bootstrap failed at rank 0: %s",
                         a->rank, reply.msg);
    else
        *rc = read_table(a, fd, tnonce, table, deadline);
    return 1;
}

/* This rank has a tree listener (lfd): the table comes down the tree,
 * or after rank 0's good reply if rank 0 chose the star; rank 0's notes
 * and verdict come over fd either way, so the wait is never silent and a
 * failure anywhere (a rank that died) reaches this rank. *via_tree says
 * which way the table came; *msg is the tree's message, to pass on. */
static tnt_result_t await_table(const tnt_boot_args_t *a, int fd, int lfd,
                                const unsigned char *tnonce, double deadline,
                                tnt_boot_entry_t *table,
                                tnt_boot_listener_t *ls, unsigned char **msg,
                                size_t *mlen, int *via_tree)
{
    tnt_boot_tree_wait_t w = {.a = a, .tnonce = tnonce};
    char last[sizeof(((tnt_boot_reply_t *)0)->msg)] = "";
    double last_at = 0;
    tnt_result_t rc = TNT_SUCCESS;
    int listening = 1;
    *via_tree = 0;
    for (;;) {
        double now = tnt__now(), until = deadline;
        /* While rank 0's notes come, its verdict is worth waiting for. */
        if (*last && until < last_at + 2 * TNT_BOOT_NOTE_EVERY_S)
            until = last_at + 2 * TNT_BOOT_NOTE_EVERY_S;
        if (now >= until) {
            if (*last)
                rc = tnt__error(TNT_ERR_CONNECT, "rank %d: rank 0 at %s went "
                                "silent while waiting for other ranks (it "
                                "last said: %s)", a->rank, a->root_addr,
                                last);
            else
                rc = tnt__error(TNT_TIMEOUT, "rank %d: no bootstrap answer "
                                "from rank 0 at %s, and no table down the "
                                "tree, within TNT_CONNECT_TIMEOUT=%.0f s",
                                a->rank, a->root_addr, a->timeout_s);
            break;
        }
        tnt__boot_tree_expire(&w, now);
        struct pollfd pf[2 + TNT_BOOT_TREE_PENDING_MAX];
        int n = w.n;
        pf[0] = (struct pollfd){.fd = fd, .events = POLLIN};
        pf[1] = (struct pollfd){
            .fd = listening && n < TNT_BOOT_TREE_PENDING_MAX ? lfd : -1,
            .events = POLLIN};
        for (int i = 0; i < n; i++)
            pf[2 + i] = (struct pollfd){.fd = w.c[i].fd, .events = POLLIN};
        if (poll(pf, (nfds_t)(2 + n), 100) < 0 && errno != EINTR) {
            rc = tnt__error(TNT_ERR_SYSTEM, "rank %d: bootstrap poll: %s",
                            a->rank, strerror(errno));
            break;
        }
        /* Back to front: a dropped connection's slot takes the last. */
        int got = 0;
        for (int i = n - 1; i >= 0 && !got; i--)
            if (pf[2 + i].revents)
                got = tnt__boot_tree_read(&w, i, table, ls, msg, mlen);
        if (got) {
            *via_tree = 1;
            break;
        }
        if (pf[0].revents) {
            if (star_message(a, fd, tnonce, table, deadline, last,
                             sizeof(last), &rc))
                break;
            last_at = tnt__now();
        }
        /* A listener that failed would wake every poll: rank 0 hears
         * from the parent that it cannot pass the table on, and its
         * verdict comes over fd. */
        if (pf[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            TNT_LOG_SECURITY("rank %d: its bootstrap listener failed; "
                             "waiting for rank 0's verdict", a->rank);
            listening = 0;
        } else if (pf[1].revents & POLLIN) {
            tnt__boot_tree_accept(&w, lfd);
        }
    }
    tnt__boot_tree_close(&w, *via_tree ? "the table had come already"
                                       : "the bootstrap ended");
    return rc;
}

/* Pass the table on to this rank's tree children, as it came, then
 * acknowledge it to rank 0: status 0, or the first child it could not
 * reach and why (rank 0 then names that child, dead or unreachable). A
 * lost connection to rank 0 is left to the verdict's read, which says
 * so: rank 0 may have failed the job and closed, its verdict queued. */
static void pass_on(const tnt_boot_args_t *a, int fd,
                    const tnt_boot_listener_t *ls, const unsigned char *msg,
                    size_t len, double deadline)
{
    int kids[32], nk = tnt__boot_tree_children(a->rank, a->nranks, kids);
    tnt_boot_ack_t ack;
    memset(&ack, 0, sizeof(ack));
    ack.magic = TNT_BOOT_MAGIC;
    ack.version = TNT_BOOT_VERSION;
    ack.rank = a->rank;
    for (int k = 0; k < nk; k++) {
        char why[100];
        if (tnt__boot_tree_push(&ls[kids[k]], msg, len, deadline, why,
                                sizeof(why)) == 0)
            continue;
        /* Only this rank knows: logged here whatever the log's ranks. */
        TNT_LOG_SECURITY("rank %d: could not pass the bootstrap table to "
                         "rank %d: %s", a->rank, kids[k], why);
        if (ack.status == 0) {
            ack.status = TNT_ERR_CONNECT;
            ack.about = kids[k];
            snprintf(ack.msg, sizeof(ack.msg), "%s", why);
        }
    }
    (void)tnt__io_write_all(fd, &ack, sizeof(ack), deadline);
}

/* The tree: the table (from the parent or, if rank 0 chose the star,
 * from rank 0), passed on, acknowledged; then rank 0's verdict, which
 * comes once every rank has acknowledged, or names what failed. */
static tnt_result_t client_tree(const tnt_boot_args_t *a, int fd, int lfd,
                                const unsigned char *tnonce,
                                tnt_boot_entry_t *table, double deadline)
{
    tnt_boot_listener_t *ls = calloc((size_t)a->nranks, sizeof(*ls));
    if (!ls)
        return tnt__error(TNT_ERR_NO_MEMORY, "rank %d: out of memory",
                          a->rank);
    unsigned char *msg = NULL;
    size_t mlen = 0;
    int via_tree = 0;
    tnt_result_t rc = await_table(a, fd, lfd, tnonce, deadline, table, ls,
                                  &msg, &mlen, &via_tree);
    if (rc == TNT_SUCCESS && a->test_hook)
        a->test_hook(a->test_arg, "table", via_tree);
    if (rc == TNT_SUCCESS && via_tree) {
        pass_on(a, fd, ls, msg, mlen, deadline);
        tnt_boot_reply_t reply;
        rc = await_verdict(a, fd, deadline, &reply);
        if (rc == TNT_SUCCESS && reply.status != TNT_SUCCESS)
            rc = tnt__error(reply.status < 0 ? (tnt_result_t)reply.status
                                             : TNT_ERR_CONFIG,
                            "rank %d: the bootstrap failed at rank 0: %s",
                            a->rank, reply.msg);
    }
    free(msg);
    free(ls);
    return rc;
}

tnt_result_t tnt__boot_client(const tnt_boot_args_t *a,
                              const struct sockaddr_storage *ss,
                              socklen_t sl, tnt_boot_entry_t *table,
                              double deadline, const char *if_ip,
                              int want_tree)
{
    int fd = -1, lfd = -1;
    TNT_CHECK(connect_root(a, ss, sl, deadline, &fd));
    struct sockaddr_storage me;
    socklen_t ml = sizeof(me);
    getsockname(fd, (struct sockaddr *)&me, &ml);
    char ip[64];
    tnt__sockaddr_ip((struct sockaddr *)&me, ip, sizeof(ip));
    if (*if_ip)
        snprintf(ip, sizeof(ip), "%s", if_ip);

    tnt_boot_register_t reg;
    memset(&reg, 0, sizeof(reg));
    reg.entry.rank = a->rank;
    snprintf(reg.entry.host, sizeof(reg.entry.host), "%s", a->host);
    unsigned char tnonce[TNT_AUTH_NONCE_BYTES] = {0};
    tnt_result_t rc = a->listen(a->listen_arg, ip, &reg.entry);
    /* The tree listener opens before registering: from then on rank 0
     * may hand its address to this rank's tree parent. */
    if (rc == TNT_SUCCESS && want_tree) {
        rc = tnt__boot_tree_listen(ip, &lfd, &reg.listener);
        if (rc == TNT_SUCCESS && a->test_hook)
            a->test_hook(a->test_arg, "listening", lfd);
    }
    if (rc == TNT_SUCCESS)
        rc = client_register(a, fd, &reg, tnonce, deadline);
    if (rc == TNT_SUCCESS && lfd >= 0) {
        rc = client_tree(a, fd, lfd, tnonce, table, deadline);
    } else if (rc == TNT_SUCCESS) {
        rc = client_star(a, fd, tnonce, table, deadline);
        if (rc == TNT_SUCCESS && a->test_hook)
            a->test_hook(a->test_arg, "table", 0);
    }
    if (lfd >= 0)
        close(lfd);
    close(fd);
    return rc;
}
