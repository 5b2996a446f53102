/*
 * tcp-rawring: the bytes of an allreduce moved over TCP the plainest way,
 * with no library, no reduction and no dependency between steps. Beside a
 * TCP allreduce's time it says how much of that time is the kernel moving
 * bytes, which no library (libtntcomm or a peer) can move fewer of.
 *
 * P ranks form a ring of TCP connections (rank r sends to r+1 and receives
 * from r-1). Per iteration every rank sends B = 2(p-1)/p x n bytes and
 * receives as many, both at once, non-blocking: B is what each rank of a
 * bandwidth-optimal allreduce of n bytes must send (Patarasuk and Yuan,
 * "Bandwidth optimal all-reduce algorithms for clusters of workstations",
 * JPDC 2009; ring and Rabenseifner send exactly that).
 *
 * A reference, not a proven floor: a real allreduce also waits between its
 * steps and reduces, but it may also pace its sends better (segments) than
 * this one, which hands the kernel everything at once; with more ranks
 * than cores, or a rate-limited link that drops a burst, a good library
 * can beat it. For small n its one message per rank is no bound on the
 * log2(p) dependent rounds an allreduce needs.
 *
 *   tcp-rawring --p P [--sizes 8,1K,1M] [--min-time S]
 *       forks P ranks on the loopback (free ports), one per CPU when
 *       2 <= P <= the CPUs it may use, as tnt-bench -N and mpirun do
 *   tcp-rawring --rank R --addrs A0,A1,... [--port PORT] [...]
 *       one rank, e.g. one per network namespace (bench/netns-bench.sh)
 *
 * Rank 0 prints one line per size in the peers' format of
 * ../shared/peers (bench/compare-peers.sh reads it):
 *   rawring label=tcp-rawring p=P bytes=N moved=B iters=K time_us=T busbw_GBps=X check=ok
 * time_us is the largest mean over the ranks. The payload is checked: each
 * iteration's bytes carry the sender's rank and the iteration, and a wrong
 * byte fails the run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_cpu.h"
#include "util/param.h" /* tnt__parse_size: tnt-bench's size syntax */

#define MAX_RANKS 256
#define MAX_SIZES 64
#define DEFAULT_PORT 29400
/* Give up connecting after this long: a peer that never comes up must not
 * hang the run. */
#define CONNECT_TIMEOUT_S 30.0
/* One direction of a stalled ring (a peer died) fails the run after this
 * long without progress. */
#define STALL_TIMEOUT_MS 30000

typedef struct {
    int p, rank, port;
    struct in_addr addr[MAX_RANKS];
    int ports[MAX_RANKS]; /* where rank r listens */
    size_t sizes[MAX_SIZES];
    int nsizes;
    double min_time;
} rawring_opts_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int die(const char *what)
{
    fprintf(stderr, "tcp-rawring: %s: %s\n", what, strerror(errno));
    return -1;
}

/* Writes or reads all of len bytes on a blocking socket. */
static int xfer_all(int fd, void *buf, size_t len, int out)
{
    char *p = buf;
    while (len) {
        ssize_t k = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = ECONNRESET;
            return -1;
        }
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

static int connect_to(struct in_addr a, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = a,
                             .sin_port = htons((uint16_t)port)};
    double give_up = now_s() + CONNECT_TIMEOUT_S;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        close(fd);
        if (now_s() > give_up)
            return -1;
        usleep(10000);
    }
}

/* The ring for rank r: next = socket to r+1, prev = socket from r-1. */
static int ring_setup(const rawring_opts_t *o, int lfd, int *next, int *prev)
{
    int nx = (o->rank + 1) % o->p;
    *next = connect_to(o->addr[nx], o->ports[nx]);
    if (*next < 0)
        return die("connect to the next rank");
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    if (poll(&pf, 1, (int)(CONNECT_TIMEOUT_S * 1000)) != 1) {
        errno = ETIMEDOUT;
        return die("accept from the previous rank");
    }
    *prev = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (*prev < 0)
        return die("accept");
    int one = 1;
    setsockopt(*next, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(*prev, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

/* Two laps around the ring: on the first every rank folds its v in (max),
 * on the second rank 0 hands the result to everyone. Used to agree on an
 * iteration count and to collect the slowest rank's time; also a
 * barrier. */
static int ring_max(const rawring_opts_t *o, int next, int prev, double *v)
{
    for (int lap = 0; lap < 2; lap++) {
        double in = *v;
        if (o->rank == 0) {
            if (xfer_all(next, v, sizeof *v, 1) ||
                xfer_all(prev, &in, sizeof in, 0))
                return die("ring pass");
            *v = in;
            continue;
        }
        if (xfer_all(prev, &in, sizeof in, 0))
            return die("ring pass");
        if (lap == 1 || in > *v)
            *v = in;
        if (xfer_all(next, v, sizeof *v, 1))
            return die("ring pass");
    }
    return 0;
}

static uint8_t tag_of(int rank, long it)
{
    return (uint8_t)(rank * 31 + it * 7 + 1);
}

/* One iteration: send B bytes to next and receive B from prev at once. */
static int exchange(int next, int prev, uint8_t *sb, uint8_t *rb, size_t b)
{
    size_t so = 0, ro = 0;
    while (so < b || ro < b) {
        struct pollfd f[2] = {{.fd = next, .events = so < b ? POLLOUT : 0},
                              {.fd = prev, .events = ro < b ? POLLIN : 0}};
        int n = poll(f, 2, STALL_TIMEOUT_MS);
        if (n == 0) {
            errno = ETIMEDOUT;
            return die("no progress (a peer is gone?)");
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return die("poll");
        }
        if (so < b && (f[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t k = send(next, sb + so, b - so,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k < 0 && errno != EAGAIN && errno != EINTR)
                return die("send");
            if (k > 0)
                so += (size_t)k;
        }
        if (ro < b && (f[1].revents & (POLLIN | POLLERR | POLLHUP))) {
            ssize_t k = recv(prev, rb + ro, b - ro, MSG_DONTWAIT);
            if (k == 0) {
                errno = ECONNRESET;
                return die("recv");
            }
            if (k < 0 && errno != EAGAIN && errno != EINTR)
                return die("recv");
            if (k > 0)
                ro += (size_t)k;
        }
    }
    return 0;
}

static int check(const uint8_t *rb, size_t b, uint8_t want)
{
    for (size_t i = 0; i < b; i++)
        if (rb[i] != want) {
            fprintf(stderr, "tcp-rawring: byte %zu is %u, expected %u\n", i,
                    rb[i], want);
            return -1;
        }
    return 0;
}

/* Times one size; rank 0 prints its line. */
static int run_size(const rawring_opts_t *o, int next, int prev, size_t n)
{
    int p = o->p, prv = (o->rank + p - 1) % p;
    size_t b = p > 1 ? (2 * (size_t)(p - 1) * n + (size_t)p - 1) / (size_t)p
                     : 0;
    uint8_t *sb = malloc(b ? b : 1), *rb = malloc(b ? b : 1);
    if (!sb || !rb) {
        free(sb);
        free(rb);
        fprintf(stderr, "tcp-rawring: out of memory for %zu bytes\n", b);
        return -1;
    }
    int rc = -1;
    /* Warm-up (connections reach their window, pages fault in), then a
     * calibration: every rank times a few iterations and they agree on
     * the most iterations any of them estimates to fill min_time. */
    enum { WARM = 2, CALIB = 3 };
    double t0 = 0, iters;
    for (long it = 0; it < WARM + CALIB; it++) {
        if (it == WARM)
            t0 = now_s();
        memset(sb, tag_of(o->rank, it), b);
        if (exchange(next, prev, sb, rb, b) || check(rb, b, tag_of(prv, it)))
            goto out;
    }
    iters = o->min_time / ((now_s() - t0) / CALIB + 1e-9);
    iters = iters < 3 ? 3 : iters > 1e6 ? 1e6 : (double)(long)iters;
    if (ring_max(o, next, prev, &iters))
        goto out;
    long k = (long)iters;
    /* Timed: the buffer is stamped once (a memset per iteration would be
     * the program's own cost, not the kernel's); the last iteration's
     * payload is checked. */
    memset(sb, tag_of(o->rank, k), b);
    t0 = now_s();
    for (long it = 0; it < k; it++)
        if (exchange(next, prev, sb, rb, b))
            goto out;
    double t = (now_s() - t0) / (double)k;
    if (check(rb, b, tag_of(prv, k)) || ring_max(o, next, prev, &t))
        goto out;
    if (o->rank == 0)
        printf("rawring label=tcp-rawring p=%d bytes=%zu moved=%zu iters=%ld "
               "time_us=%.2f busbw_GBps=%.4f check=ok\n", p, n, b, k,
               t * 1e6, t > 0 ? (double)b / t / 1e9 : 0.0);
    rc = 0;
out:
    free(sb);
    free(rb);
    return rc;
}

/* Listens on a:port (port 0: any free one); *bound gets the port. */
static int listen_on(struct in_addr a, int port, int *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return die("socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = a,
                             .sin_port = htons((uint16_t)port)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 4)) {
        fprintf(stderr, "tcp-rawring: listen on %s:%d: %s\n", inet_ntoa(a),
                port, strerror(errno));
        close(fd);
        return -1;
    }
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len)) {
        close(fd);
        return die("getsockname");
    }
    *bound = ntohs(sa.sin_port);
    return fd;
}

static int run_rank(const rawring_opts_t *o, int lfd)
{
    int next = -1, prev = -1, rc = 0;
    if (o->p > 1 && ring_setup(o, lfd, &next, &prev))
        rc = -1;
    for (int i = 0; rc == 0 && i < o->nsizes; i++) {
        if (o->p == 1) { /* nothing to move: no line is a lie */
            if (o->rank == 0)
                printf("rawring label=tcp-rawring p=1 bytes=%zu moved=0 iters=0 "
                       "time_us=0.00 busbw_GBps=0 check=ok\n", o->sizes[i]);
            continue;
        }
        rc = run_size(o, next, prev, o->sizes[i]);
    }
    fflush(stdout);
    if (next >= 0)
        close(next);
    if (prev >= 0)
        close(prev);
    return rc;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: tcp-rawring --p P [--sizes LIST] [--min-time S] [--port N]\n"
            "       tcp-rawring --rank R --addrs A0,A1,... [--sizes LIST] "
            "[--min-time S] [--port N]\n"
            "Times moving 2(p-1)/p x SIZE bytes per rank around a ring of "
            "TCP connections\n(no library, no reduction): what the kernel "
            "charges for a TCP allreduce's bytes.\n"
            "  --sizes LIST  comma-separated, k/M/G suffixes (default "
            "8,1K,32K,256K,1M,8M,64M)\n"
            "  --min-time S  seconds per size (default 0.3)\n"
            "  --port N      with --rank: rank r listens on N+r (default %d;\n"
            "                --p takes free loopback ports)\n",
            DEFAULT_PORT);
    return 2;
}

static int parse_addrs(rawring_opts_t *o, char *list)
{
    int n = 0;
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a;
         a = strtok_r(NULL, ",", &save)) {
        if (n == MAX_RANKS || inet_pton(AF_INET, a, &o->addr[n]) != 1) {
            fprintf(stderr, "tcp-rawring: bad address '%s' (IPv4, at most "
                    "%d)\n", a, MAX_RANKS);
            return -1;
        }
        n++;
    }
    o->p = n;
    return 0;
}

static int parse_sizes(rawring_opts_t *o, char *list)
{
    o->nsizes = 0;
    for (char *save = NULL, *s = strtok_r(list, ",", &save); s;
         s = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES) {
            fprintf(stderr, "tcp-rawring: at most %d sizes\n", MAX_SIZES);
            return -1;
        }
        if (tnt__parse_size("--sizes", s, &o->sizes[o->nsizes]) !=
            TNT_SUCCESS) {
            fprintf(stderr, "tcp-rawring: %s\n", tnt_last_error());
            return -1;
        }
        o->nsizes++;
    }
    return o->nsizes ? 0 : -1;
}

int main(int argc, char **argv)
{
    rawring_opts_t o = {.p = 0, .rank = -1, .port = DEFAULT_PORT,
                      .min_time = 0.3};
    char sizes[] = "8,1K,32K,256K,1M,8M,64M";
    if (parse_sizes(&o, sizes))
        return 2;
    int local_p = 0;
    /* Options come in pairs: NAME VALUE. */
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage();
        char *end;
        if (strcmp(a, "--p") == 0) {
            local_p = (int)strtol(v, &end, 10);
            if (*end || local_p < 1 || local_p > MAX_RANKS)
                return usage();
        } else if (strcmp(a, "--rank") == 0) {
            o.rank = (int)strtol(v, &end, 10);
            if (*end || o.rank < 0)
                return usage();
        } else if (strcmp(a, "--addrs") == 0) {
            if (parse_addrs(&o, v))
                return 2;
        } else if (strcmp(a, "--sizes") == 0) {
            if (parse_sizes(&o, v))
                return 2;
        } else if (strcmp(a, "--min-time") == 0) {
            o.min_time = strtod(v, &end);
            if (*end || !(o.min_time > 0) || o.min_time > 3600)
                return usage();
        } else if (strcmp(a, "--port") == 0) {
            o.port = (int)strtol(v, &end, 10);
            if (*end || o.port < 1 || o.port > 65535 - MAX_RANKS)
                return usage();
        } else {
            return usage();
        }
    }
    if ((local_p > 0) == (o.rank >= 0) || (o.rank >= 0 && o.rank >= o.p)) {
        fprintf(stderr, "tcp-rawring: give either --p, or --rank with --addrs "
                "naming at least rank+1 addresses\n");
        return usage();
    }
    if (o.rank >= 0) { /* one rank of a job started elsewhere */
        for (int r = 0; r < o.p; r++)
            o.ports[r] = o.port + r;
        int lfd = o.p > 1 ? listen_on(o.addr[o.rank], o.ports[o.rank],
                                      &o.ports[o.rank]) : -1;
        if (o.p > 1 && lfd < 0)
            return 1;
        int rc = run_rank(&o, lfd);
        if (lfd >= 0)
            close(lfd);
        return rc ? 1 : 0;
    }
    /* Local: every rank on the loopback, on a free port; all listen
     * before any forks, so no connect can come before its listen, and
     * every child knows every port. */
    o.p = local_p;
    int lfd[MAX_RANKS];
    for (int r = 0; r < o.p; r++) {
        o.addr[r].s_addr = htonl(INADDR_LOOPBACK);
        lfd[r] = o.p > 1 ? listen_on(o.addr[r], 0, &o.ports[r]) : -1;
        if (o.p > 1 && lfd[r] < 0)
            return 1;
    }
    pid_t pid[MAX_RANKS];
    for (int r = 0; r < o.p; r++) {
        fflush(stdout);
        pid[r] = fork();
        if (pid[r] < 0) {
            die("fork");
            for (int q = 0; q < r; q++)
                kill(pid[q], SIGTERM);
            return 1;
        }
        if (pid[r] == 0) {
            o.rank = r;
            int cpu = bench_cpu_for(r, o.p, 0); /* as tnt-bench -N */
            if (cpu >= 0)
                bench_pin_cpu(cpu); /* unpinned is only slower */
            for (int q = 0; q < o.p; q++)
                if (q != r && lfd[q] >= 0)
                    close(lfd[q]);
            _exit(run_rank(&o, lfd[r]) ? 1 : 0);
        }
    }
    for (int r = 0; r < o.p; r++)
        if (lfd[r] >= 0)
            close(lfd[r]);
    /* One failed rank: stop the others rather than wait for their
     * stall timeouts. */
    int failed = 0;
    for (int left = o.p; left > 0; left--) {
        int st;
        pid_t w = wait(&st);
        if (w < 0)
            break;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            if (!failed)
                for (int r = 0; r < o.p; r++)
                    if (pid[r] != w)
                        kill(pid[r], SIGTERM);
            failed = 1;
        }
    }
    return failed ? 1 : 0;
}
