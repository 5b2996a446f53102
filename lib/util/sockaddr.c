/*
 * Socket address helpers and deadline-bounded I/O for the bootstrap.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/sockaddr.h"

tnt_result_t tnt__sockaddr_parse_hostport(const char *what, const char *s,
                                          struct sockaddr_storage *ss,
                                          socklen_t *len)
{
    if (!s || !*s)
        return tnt__error(TNT_ERR_CONFIG, "%s is empty; expected host:port",
                          what);
    char host[256];
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return tnt__error(TNT_ERR_CONFIG, "%s='%s': expected "
                              "[ipv6]:port", what, s);
        colon = close + 1;
        if ((size_t)(close - s - 1) >= sizeof(host))
            return tnt__error(TNT_ERR_CONFIG, "%s='%s': host too long",
                              what, s);
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = '\0';
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s)
            return tnt__error(TNT_ERR_CONFIG, "%s='%s' has no port; "
                              "expected host:port", what, s);
        if ((size_t)(colon - s) >= sizeof(host))
            return tnt__error(TNT_ERR_CONFIG, "%s='%s': host too long",
                              what, s);
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
    }
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || *end || colon[1] == '\0' || port < 1 || port > 65535)
        return tnt__error(TNT_ERR_CONFIG, "%s='%s': port '%s' is not in "
                          "1..65535", what, s, colon + 1);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int e = getaddrinfo(host, NULL, &hints, &res);
    if (e != 0 || !res)
        return tnt__error(TNT_ERR_CONFIG, "%s='%s': cannot resolve '%s': %s",
                          what, s, host, gai_strerror(e));
    struct addrinfo *pick = res;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
        if (ai->ai_family == AF_INET) {
            pick = ai;
            break;
        }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *len = pick->ai_addrlen;
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return TNT_SUCCESS;
}

tnt_result_t tnt__sockaddr_parse_ip(const char *ip, int port,
                                    struct sockaddr_storage *ss,
                                    socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (ip && inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *len = sizeof(*v4);
        return TNT_SUCCESS;
    }
    if (ip && inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*v6);
        return TNT_SUCCESS;
    }
    return tnt__error(TNT_ERR_CONFIG, "'%s' is not a numeric IP address",
                      ip ? ip : "(null)");
}

void tnt__sockaddr_ip(const struct sockaddr *sa, char *buf, size_t len)
{
    const void *a = sa->sa_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
        snprintf(buf, len, "?");
}

void tnt__sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    tnt__sockaddr_ip(sa, ip, sizeof(ip));
    if (sa->sa_family == AF_INET)
        snprintf(buf, len, "%s:%u", ip,
                 ntohs(((const struct sockaddr_in *)sa)->sin_port));
    else
        snprintf(buf, len, "[%s]:%u", ip,
                 ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
}

/* Blob: family (2 bytes, AF_INET/AF_INET6), port (2, network order),
 * address (4 or 16). */
tnt_result_t tnt__addr_blob_encode(const struct sockaddr *sa, void *blob,
                                   size_t *len)
{
    unsigned char *b = blob;
    uint16_t fam = (uint16_t)sa->sa_family;
    memcpy(b, &fam, 2);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        memcpy(b + 2, &v4->sin_port, 2);
        memcpy(b + 4, &v4->sin_addr, 4);
        *len = 8;
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        memcpy(b + 2, &v6->sin6_port, 2);
        memcpy(b + 4, &v6->sin6_addr, 16);
        *len = 20;
    } else {
        return tnt__error(TNT_ERR_INTERNAL, "address family %d",
                          sa->sa_family);
    }
    return TNT_SUCCESS;
}

tnt_result_t tnt__addr_blob_decode(const void *blob, size_t len,
                                   struct sockaddr_storage *ss,
                                   socklen_t *sslen)
{
    const unsigned char *b = blob;
    uint16_t fam = 0;
    memset(ss, 0, sizeof(*ss));
    if (len >= 2)
        memcpy(&fam, b, 2);
    if (len == 8 && fam == AF_INET) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
        v4->sin_family = AF_INET;
        memcpy(&v4->sin_port, b + 2, 2);
        memcpy(&v4->sin_addr, b + 4, 4);
        *sslen = sizeof(*v4);
        return TNT_SUCCESS;
    }
    if (len == 20 && fam == AF_INET6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
        v6->sin6_family = AF_INET6;
        memcpy(&v6->sin6_port, b + 2, 2);
        memcpy(&v6->sin6_addr, b + 4, 16);
        *sslen = sizeof(*v6);
        return TNT_SUCCESS;
    }
    return tnt__error(TNT_ERR_PROTOCOL, "malformed address blob (%zu "
                      "bytes)", len);
}

static tnt_result_t wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - tnt__now();
        if (left <= 0)
            return TNT_TIMEOUT;
        struct pollfd pfd = {.fd = fd, .events = events};
        int ms = left > 1000.0 ? 1000000 : (int)(left * 1000.0) + 1;
        int n = poll(&pfd, 1, ms);
        if (n > 0)
            return TNT_SUCCESS;
        if (n < 0 && errno != EINTR)
            return TNT_ERR_SYSTEM;
    }
}

tnt_result_t tnt__io_write_all(int fd, const void *buf, size_t len,
                               double deadline)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            tnt_result_t rc = wait_fd(fd, POLLOUT, deadline);
            if (rc != TNT_SUCCESS)
                return rc;
            continue;
        }
        return TNT_ERR_PEER_LOST;
    }
    return TNT_SUCCESS;
}

tnt_result_t tnt__io_read_all(int fd, void *buf, size_t len, double deadline)
{
    char *p = buf;
    while (len) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return TNT_ERR_PEER_LOST;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            tnt_result_t rc = wait_fd(fd, POLLIN, deadline);
            if (rc != TNT_SUCCESS)
                return rc;
            continue;
        }
        return TNT_ERR_PEER_LOST;
    }
    return TNT_SUCCESS;
}

tnt_result_t tnt__listen_blob(const char *ip, int rank, const char *who,
                              int *fd_out, void *blob, size_t *len)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    TNT_CHECK(tnt__sockaddr_parse_ip(ip, 0, &ss, &sslen));
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0)
        return tnt__error(TNT_ERR_SYSTEM, "socket: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        return tnt__error(TNT_ERR_SYSTEM, "rank %d: %scannot listen on %s: "
                          "%s", rank, who, ip, strerror(e));
    }
    sslen = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sslen);
    tnt_result_t rc = tnt__addr_blob_encode((struct sockaddr *)&ss, blob,
                                            len);
    if (rc != TNT_SUCCESS) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return TNT_SUCCESS;
}

/* Probes start after half the heartbeat idle, three of them share the
 * other half (at least 2 s in all, whole seconds as the kernel takes
 * them); TCP_USER_TIMEOUT takes the heartbeat in milliseconds. */
void tnt__sock_heartbeat(int fd, double heartbeat_s)
{
    if (!(heartbeat_s > 0))
        return;
    int one = 1;
    int hb = heartbeat_s < 2 ? 2 : (int)heartbeat_s;
    int idle = hb / 2, cnt = 3;
    int intvl = (hb - idle) / cnt > 0 ? (hb - idle) / cnt : 1;
    unsigned user_ms = (unsigned)(heartbeat_s * 1000.0);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms));
}
