/*
 * tcp-zerocopy-probe: does MSG_ZEROCOPY stay zero-copy on a given path?
 *
 * A TCP library can hand the kernel its pages instead of copying them
 * (SO_ZEROCOPY + MSG_ZEROCOPY), at the price of waiting for a completion
 * per send before the buffer may change. Whether that pays depends on the
 * path: where the kernel must copy anyway (delivery to a socket of this
 * host, over loopback or a veth pair into another namespace) it sets
 * SO_EE_CODE_ZEROCOPY_COPIED in the completion, and the sender has paid
 * for the completions and saved nothing. This probe sends COUNT buffers
 * of SIZE bytes with MSG_ZEROCOPY and counts the completions of each
 * kind, so that one look says whether a NIC is worth the work
 * (docs/performance.md, issue 25).
 *
 *   tcp-zerocopy-probe [--size S] [--count N]
 *       over loopback, to a sink it forks on a free port
 *   tcp-zerocopy-probe --sink PORT
 *       only the sink: reads one connection to its end, then exits
 *   tcp-zerocopy-probe --to ADDR:PORT [--size S] [--count N]
 *       only the sender, to a sink elsewhere (another host or namespace)
 *
 * The sender prints one line:
 *   zerocopy to=ADDR:PORT sends=K completed=C copied=X zero_copy=Z
 * and exits 0 when every send completed, 1 on an error or when
 * completions are missing after 10 s, 2 on a bad command line.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/param.h" /* tnt__parse_size: tnt-bench's size syntax */

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

/* A sink that nobody connects to, or a peer that stops reading, must not
 * hang the probe. */
#define WAIT_MS 10000

static int die(const char *what)
{
    fprintf(stderr, "tcp-zerocopy-probe: %s: %s\n", what, strerror(errno));
    return -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Listens on addr:port (port 0: a free one); *bound gets the port. */
static int listen_on(const char *addr, int port, int *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof sa;
    if (fd < 0)
        return die("socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 1) ||
        getsockname(fd, (struct sockaddr *)&sa, &len)) {
        die("listen");
        close(fd);
        return -1;
    }
    *bound = ntohs(sa.sin_port);
    return fd;
}

/* Accepts one connection and reads it to its end; 0 on a clean end. */
static int sink(int lfd)
{
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    if (poll(&pf, 1, WAIT_MS) != 1) {
        errno = ETIMEDOUT;
        return die("no sender connected");
    }
    int c = accept(lfd, NULL, NULL);
    if (c < 0)
        return die("accept");
    static char buf[1 << 16];
    for (;;) {
        pf = (struct pollfd){.fd = c, .events = POLLIN};
        if (poll(&pf, 1, WAIT_MS) != 1) {
            errno = ETIMEDOUT;
            close(c);
            return die("sender went silent");
        }
        ssize_t k = recv(c, buf, sizeof buf, 0);
        if (k == 0)
            break;
        if (k < 0 && errno != EINTR) {
            close(c);
            return die("recv");
        }
    }
    close(c);
    return 0;
}

typedef struct counts {
    long sends, completed, copied;
} counts_t;

/* Reads what the error queue holds: each notification covers the sends
 * numbered ee_info..ee_data. */
static void read_completions(int fd, counts_t *n)
{
    for (;;) {
        char cbuf[256];
        struct msghdr m = {.msg_control = cbuf,
                           .msg_controllen = sizeof cbuf};
        if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            return;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm;
             cm = CMSG_NXTHDR(&m, cm)) {
            struct sock_extended_err e;
            memcpy(&e, CMSG_DATA(cm), sizeof e);
            if (e.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
                continue;
            long k = (long)(e.ee_data - e.ee_info) + 1;
            n->completed += k;
            if (e.ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
                n->copied += k;
        }
    }
}

static int sender(const char *addr, int port, size_t size, long count)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    if (fd < 0)
        return die("socket");
    if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one)) {
        close(fd);
        return die("SO_ZEROCOPY (kernel before 4.14?)");
    }
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return die("connect");
    }
    char *buf = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    if (!buf) {
        close(fd);
        return die("buffer");
    }
    memset(buf, 0x5a, size);
    counts_t n = {0, 0, 0};
    int rc = 0;
    for (long i = 0; i < count && rc == 0; i++) {
        /* The buffer never changes, so resending it before the earlier
         * sends complete is safe here (a library could not do that). */
        for (size_t off = 0; off < size;) {
            ssize_t k = send(fd, buf + off, size - off,
                             MSG_ZEROCOPY | MSG_NOSIGNAL);
            if (k >= 0) {
                off += (size_t)k;
                n.sends++;
                continue;
            }
            if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
                rc = die("send");
                break;
            }
            /* Out of pinned-page budget or socket space: let completions
             * and the sink catch up. */
            read_completions(fd, &n);
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, 10);
        }
    }
    shutdown(fd, SHUT_WR);
    double end = now_s() + WAIT_MS / 1000.0;
    while (rc == 0 && n.completed < n.sends && now_s() < end) {
        read_completions(fd, &n);
        if (n.completed < n.sends) {
            struct pollfd pf = {.fd = fd, .events = 0}; /* POLLERR only */
            poll(&pf, 1, 10);
        }
    }
    printf("zerocopy to=%s:%d sends=%ld completed=%ld copied=%ld "
           "zero_copy=%ld\n", addr, port, n.sends, n.completed, n.copied,
           n.completed - n.copied);
    if (rc == 0 && n.completed < n.sends) {
        fprintf(stderr, "tcp-zerocopy-probe: %ld of %ld sends never "
                "completed\n", n.sends - n.completed, n.sends);
        rc = -1;
    }
    free(buf);
    close(fd);
    return rc;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: tcp-zerocopy-probe [--size S] [--count N]\n"
            "       tcp-zerocopy-probe --sink PORT\n"
            "       tcp-zerocopy-probe --to ADDR:PORT [--size S] "
            "[--count N]\n"
            "Sends N buffers of S bytes (default 64 x 1M) with MSG_ZEROCOPY "
            "and counts\nthe completions the kernel marks as copied.\n");
    return 2;
}

int main(int argc, char **argv)
{
    size_t size = 1 << 20;
    long count = 64;
    int sink_port = -1, to_port = -1;
    char to_addr[64] = "";
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(argv[i], "--size") && v) {
            if (tnt__parse_size("--size", v, &size) != TNT_SUCCESS ||
                size == 0)
                return usage();
        } else if (!strcmp(argv[i], "--count") && v) {
            count = strtol(v, &end, 10);
            if (*end || count < 1 || count > 1000000)
                return usage();
        } else if (!strcmp(argv[i], "--sink") && v) {
            sink_port = (int)strtol(v, &end, 10);
            if (*end || sink_port < 1 || sink_port > 65535)
                return usage();
        } else if (!strcmp(argv[i], "--to") && v) {
            const char *colon = strrchr(v, ':');
            if (!colon || (size_t)(colon - v) >= sizeof to_addr)
                return usage();
            memcpy(to_addr, v, (size_t)(colon - v));
            to_addr[colon - v] = '\0';
            to_port = (int)strtol(colon + 1, &end, 10);
            if (*end || to_port < 1 || to_port > 65535)
                return usage();
        } else {
            return usage();
        }
    }
    if (sink_port > 0 && to_port > 0)
        return usage();
    if (sink_port > 0) {
        int port, lfd = listen_on("0.0.0.0", sink_port, &port);
        int rc = lfd < 0 ? -1 : sink(lfd);
        if (lfd >= 0)
            close(lfd);
        return rc ? 1 : 0;
    }
    if (to_port > 0)
        return sender(to_addr, to_port, size, count) ? 1 : 0;
    /* Loopback: a forked sink on a free port. */
    int port, lfd = listen_on("127.0.0.1", 0, &port);
    if (lfd < 0)
        return 1;
    pid_t pid = fork();
    if (pid < 0) {
        die("fork");
        return 1;
    }
    if (pid == 0)
        _exit(sink(lfd) ? 1 : 0);
    close(lfd);
    int rc = sender("127.0.0.1", port, size, count), st = 0;
    if (rc != 0)
        kill(pid, SIGTERM);
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
        WEXITSTATUS(st) != 0) {
        fprintf(stderr, "tcp-zerocopy-probe: the sink failed\n");
        rc = -1;
    }
    return rc ? 1 : 0;
}
