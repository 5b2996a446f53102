/*
 * The bootstrap protocol. Rank 0 listens on TNT_ROOT_ADDR; every other
 * rank connects (retrying while rank 0 starts up), sends a registration
 * {job id, size, rank, address, host}, and receives either the full table
 * or an error that rank 0 found (a rank with another TNT_SIZE, a duplicate
 * rank), so that a misconfigured job fails on every rank with the same
 * message instead of timing out. Connections that do not carry this job's
 * id are dropped and logged; the job goes on.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "core/error.h"
#include "core/ifname.h"
#include "core/log.h"
#include "core/sockaddr.h"

#define BOOT_MAGIC 0x42544e54u /* "TNTB" */
#define BOOT_VERSION 1u
/* A connection must register within this time, so a silent stranger
 * cannot hold up the start of the job for long. */
#define BOOT_REGISTER_WAIT_S 5.0

typedef struct boot_register {
    uint32_t magic;
    uint32_t version;
    uint64_t job_id;
    int32_t nranks;
    int32_t rank;
    tnt_boot_entry_t entry;
} boot_register_t;

typedef struct boot_reply {
    uint32_t magic;
    int32_t status; /* a tnt_result_t */
    int32_t nranks;
    char msg[244];
} boot_reply_t;

static void send_reply(int fd, tnt_result_t status, const char *msg,
                       int nranks, const tnt_boot_entry_t *table,
                       double deadline)
{
    boot_reply_t r;
    memset(&r, 0, sizeof(r));
    r.magic = BOOT_MAGIC;
    r.status = status;
    r.nranks = nranks;
    snprintf(r.msg, sizeof(r.msg), "%s", msg ? msg : "");
    if (tnt__io_write_all(fd, &r, sizeof(r), deadline) == TNT_SUCCESS &&
        status == TNT_SUCCESS)
        tnt__io_write_all(fd, table, (size_t)nranks * sizeof(*table),
                          deadline);
}

static int make_socket(int family)
{
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static tnt_result_t root_serve(const tnt_boot_args_t *a, int lfd,
                               tnt_boot_entry_t *table, double deadline)
{
    int p = a->nranks;
    int *fds = malloc((size_t)p * sizeof(int));
    if (!fds)
        return tnt__error(TNT_ERR_NO_MEMORY, "bootstrap: out of memory");
    for (int i = 0; i < p; i++)
        fds[i] = -1;
    int registered = 1;
    tnt_result_t rc = TNT_SUCCESS;
    char msg[240] = "";
    while (registered < p) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED) {
                rc = tnt__error(TNT_ERR_SYSTEM, "bootstrap accept: %s",
                                strerror(errno));
                break;
            }
            if (tnt__now() >= deadline) {
                rc = tnt__error(TNT_TIMEOUT, "rank 0: only %d of %d ranks "
                                "registered within TNT_CONNECT_TIMEOUT=%.0f s",
                                registered, p, a->timeout_s);
                break;
            }
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        char who[64];
        tnt__sockaddr_str((struct sockaddr *)&ss, who, sizeof(who));
        boot_register_t reg;
        double d = tnt__now() + BOOT_REGISTER_WAIT_S;
        if (tnt__io_read_all(fd, &reg, sizeof(reg), d < deadline ? d : deadline)
                != TNT_SUCCESS ||
            reg.magic != BOOT_MAGIC || reg.version != BOOT_VERSION ||
            reg.job_id != a->job_id) {
            TNT_LOG_WARN("rank 0: dropped bootstrap connection from %s: not "
                         "a registration for this job", who);
            close(fd);
            continue;
        }
        if (reg.nranks != p) {
            snprintf(msg, sizeof(msg), "rank %d has TNT_SIZE=%d but rank 0 "
                     "has TNT_SIZE=%d", reg.rank, reg.nranks, p);
        } else if (reg.rank <= 0 || reg.rank >= p ||
                   reg.entry.rank != reg.rank) {
            snprintf(msg, sizeof(msg), "a rank registered as rank %d, "
                     "outside 1..%d", reg.rank, p - 1);
        } else if (fds[reg.rank] >= 0) {
            snprintf(msg, sizeof(msg), "two processes registered as rank %d "
                     "(from %s)", reg.rank, who);
        } else if (reg.entry.addr_len > TNT_TRANSPORT_ADDR_MAX) {
            snprintf(msg, sizeof(msg), "rank %d sent a malformed address",
                     reg.rank);
        }
        if (msg[0]) {
            send_reply(fd, TNT_ERR_CONFIG, msg, p, NULL, deadline);
            close(fd);
            rc = tnt__error(TNT_ERR_CONFIG, "bootstrap: %s", msg);
            break;
        }
        reg.entry.host[TNT_HOST_MAX - 1] = '\0';
        table[reg.rank] = reg.entry;
        fds[reg.rank] = fd;
        registered++;
    }
    for (int i = 1; i < p; i++) {
        if (fds[i] < 0)
            continue;
        send_reply(fds[i], rc == TNT_SUCCESS ? TNT_SUCCESS : TNT_ERR_CONFIG,
                   rc == TNT_SUCCESS ? "" : tnt_last_error(), p, table,
                   deadline);
        close(fds[i]);
    }
    free(fds);
    return rc;
}

static tnt_result_t root_bootstrap(const tnt_boot_args_t *a,
                                   const struct sockaddr_storage *ss,
                                   socklen_t sl, tnt_boot_entry_t *table,
                                   double deadline, const char *if_ip)
{
    int lfd = make_socket(ss->ss_family);
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
        rc = root_serve(a, lfd, table, deadline);
    close(lfd);
    return rc;
}

static tnt_result_t connect_root(const tnt_boot_args_t *a,
                                 const struct sockaddr_storage *ss,
                                 socklen_t sl, double deadline, int *out)
{
    const char *last = "no attempt";
    while (tnt__now() < deadline) {
        int fd = make_socket(ss->ss_family);
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

static tnt_result_t client_bootstrap(const tnt_boot_args_t *a,
                                     const struct sockaddr_storage *ss,
                                     socklen_t sl, tnt_boot_entry_t *table,
                                     double deadline, const char *if_ip)
{
    int fd = -1;
    TNT_CHECK(connect_root(a, ss, sl, deadline, &fd));
    struct sockaddr_storage me;
    socklen_t ml = sizeof(me);
    getsockname(fd, (struct sockaddr *)&me, &ml);
    char ip[64];
    tnt__sockaddr_ip((struct sockaddr *)&me, ip, sizeof(ip));
    if (*if_ip)
        snprintf(ip, sizeof(ip), "%s", if_ip);

    boot_register_t reg;
    memset(&reg, 0, sizeof(reg));
    reg.magic = BOOT_MAGIC;
    reg.version = BOOT_VERSION;
    reg.job_id = a->job_id;
    reg.nranks = a->nranks;
    reg.rank = a->rank;
    reg.entry.rank = a->rank;
    snprintf(reg.entry.host, sizeof(reg.entry.host), "%s", a->host);
    tnt_result_t rc = a->listen(a->listen_arg, ip, &reg.entry);
    if (rc != TNT_SUCCESS)
        goto out_close;
    rc = tnt__io_write_all(fd, &reg, sizeof(reg), deadline);
    boot_reply_t reply;
    if (rc == TNT_SUCCESS)
        rc = tnt__io_read_all(fd, &reply, sizeof(reply), deadline);
    if (rc != TNT_SUCCESS) {
        rc = tnt__error(rc == TNT_TIMEOUT ? TNT_TIMEOUT : TNT_ERR_CONNECT,
                        "rank %d: no bootstrap answer from rank 0 at %s "
                        "(%s)", a->rank, a->root_addr, tnt_strerror(rc));
        goto out_close;
    }
    reply.msg[sizeof(reply.msg) - 1] = '\0';
    if (reply.magic != BOOT_MAGIC || reply.nranks != a->nranks) {
        rc = tnt__error(TNT_ERR_PROTOCOL, "rank %d: malformed bootstrap "
                        "answer from %s", a->rank, a->root_addr);
        goto out_close;
    }
    if (reply.status != TNT_SUCCESS) {
        rc = tnt__error(reply.status < 0 ? (tnt_result_t)reply.status
                                         : TNT_ERR_CONFIG,
                        "rank %d: rank 0 refused the job: %s", a->rank,
                        reply.msg);
        goto out_close;
    }
    rc = tnt__io_read_all(fd, table, (size_t)a->nranks * sizeof(*table),
                          deadline);
    if (rc != TNT_SUCCESS) {
        rc = tnt__error(TNT_ERR_CONNECT, "rank %d: bootstrap table "
                        "incomplete", a->rank);
        goto out_close;
    }
    for (int i = 0; i < a->nranks; i++) {
        table[i].host[TNT_HOST_MAX - 1] = '\0';
        if (table[i].rank != i || table[i].addr_len > TNT_TRANSPORT_ADDR_MAX) {
            rc = tnt__error(TNT_ERR_PROTOCOL, "rank %d: malformed bootstrap "
                            "table entry %d", a->rank, i);
            goto out_close;
        }
    }
out_close:
    close(fd);
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
    const char *spec = getenv("TNT_SOCKET_IFNAME");
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
    double deadline = tnt__now() + a->timeout_s;
    if (a->rank == 0)
        return root_bootstrap(a, &ss, sl, table, deadline, if_ip);
    return client_bootstrap(a, &ss, sl, table, deadline, if_ip);
}
