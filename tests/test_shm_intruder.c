/*
 * Strangers at the shared-memory transport's door. A p=3 job runs over
 * shm (TNT_TRANSPORT=shm) doing verified allreduces while an intruder
 * process, a sibling of the ranks, finds the ranks' abstract unix sockets
 * the way anyone on the host can (the @tnt-shm-* listening entries of
 * /proc/net/unix) and tries on each: connecting and closing, garbage, a
 * truncated hello, a hello carrying descriptors, a hello for another
 * rank, a hello answered with a
 * wrong key (and a sealed segment, eventfds attached), a replayed proof,
 * and, knowing the key, a proof with a segment of the wrong size, a
 * regular file or no descriptors at all; then, when run as root, a
 * connection from another user, and finally more silent connections than
 * a rank keeps in their handshake. The job must finish with correct
 * results; every stranger must see its connection closed without a
 * challenge it should not get; no rank may map or keep a descriptor the
 * intruder sent (checked in /proc/<rank>/maps and /proc/<rank>/fd); and
 * the rank that refused must say so at WARNING, also on ranks other than
 * 0 without TNT_LOG_ALL_RANKS.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/auth.h"
#include "core/engine_internal.h"
#include "beside.h"
#include "harness.h"
#include "transport/shm/shm_internal.h"

#define SX_KEY "shm-intruder-suite-job-key-0123456789abcdef"
#define SX_COUNT 1000
#define SX_MIN_ITERS 500
#define SX_HOLD 100
#define SX_MEMFD_NAME "tnt-intruder-seg"

typedef struct sx_ctx {
    char dir[128];
    tnt_auth_key_t key, wrong;
    uint64_t job_id;
    int failures;
    /* The ranks' sockets, found in /proc/net/unix. */
    int nsock;
    char names[8][108];
    int pids[8];
} sx_ctx_t;

#define SX_FAIL(x, ...)                                                       \
    do {                                                                      \
        fprintf(stderr, "intruder: FAIL: " __VA_ARGS__);                      \
        fprintf(stderr, "\n");                                                \
        (x)->failures++;                                                      \
    } while (0)

static void sx_path(const sx_ctx_t *x, const char *name, char *out,
                    size_t len)
{
    snprintf(out, len, "%s/%s", x->dir, name);
}

/* ---- finding and reaching the sockets -------------------------------- */

/* The listening @tnt-shm-<pid>-<n>-<job> sockets of this job. */
static int sx_find(sx_ctx_t *x)
{
    FILE *f = fopen("/proc/net/unix", "r");
    if (!f)
        return 0;
    char line[512], suffix[32];
    snprintf(suffix, sizeof(suffix), "-%016llx",
             (unsigned long long)x->job_id);
    x->nsock = 0;
    while (fgets(line, sizeof(line), f) && x->nsock < 8) {
        unsigned flags = 0;
        char path[100] = "";
        if (sscanf(line, "%*s %*s %*s %x %*s %*s %*s %99s", &flags,
                   path) != 2 || !(flags & 0x10000) ||
            strncmp(path, "@tnt-shm-", 9) != 0 || !strstr(path, suffix))
            continue;
        int dup = 0;
        for (int i = 0; i < x->nsock; i++)
            dup |= strcmp(x->names[i], path + 1) == 0;
        if (dup)
            continue;
        snprintf(x->names[x->nsock], sizeof(x->names[0]), "%s", path + 1);
        x->pids[x->nsock] = atoi(path + 9);
        x->nsock++;
    }
    fclose(f);
    return x->nsock;
}

static int sx_connect(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(sa.sun_path + 1, name, n);
    double t = 10.0 * th_timeout_mult();
    struct timeval tv = {(time_t)t, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                            n)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int sx_send(int fd, const void *buf, size_t len, const int *fds,
                   int nfds)
{
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } cbuf;
    memset(&cbuf, 0, sizeof(cbuf));
    struct iovec iov = {(void *)buf, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        m.msg_control = cbuf.buf;
        m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    return sendmsg(fd, &m, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* 1 if the rank closes the connection (before the read timeout) without
 * sending anything; 0 if it sends something or keeps it open. */
static int sx_closed_silently(int fd)
{
    char b[256];
    ssize_t r = recv(fd, b, sizeof(b), 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
}

/* A sealed memfd named SX_MEMFD_NAME of len bytes, holding a segment
 * header that looks initialised; -1 on failure. */
static int sx_memfd(size_t len)
{
    int fd = memfd_create(SX_MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    shm_seg_t s;
    memset(&s, 0, sizeof(s));
    s.magic = SHM_MAGIC;
    s.version = SHM_VERSION;
    s.ring_bytes = SHM_RING_BYTES;
    if (ftruncate(fd, (off_t)len) != 0 ||
        pwrite(fd, &s, sizeof(s), 0) != (ssize_t)sizeof(s) ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The segment's length with the pair areas the core asks for. */
static size_t sx_seg_bytes(void)
{
    size_t areas[TNT_TP_AREA_END];
    tnt__onhost_area_bytes(areas);
    return tnt__shm_seg_len(areas, SHM_RING_BYTES);
}

/* Does any rank map, or hold a descriptor of, something the intruder
 * made (its memfds are all named SX_MEMFD_NAME)? */
static int sx_leaked(const sx_ctx_t *x)
{
    for (int i = 0; i < x->nsock; i++) {
        char p[64], line[512];
        snprintf(p, sizeof(p), "/proc/%d/maps", x->pids[i]);
        FILE *f = fopen(p, "r");
        while (f && fgets(line, sizeof(line), f))
            if (strstr(line, SX_MEMFD_NAME)) {
                fclose(f);
                return 1;
            }
        if (f)
            fclose(f);
        snprintf(p, sizeof(p), "/proc/%d/fd", x->pids[i]);
        DIR *d = opendir(p);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            char fp[320], link[256];
            snprintf(fp, sizeof(fp), "%s/%s", p, de->d_name);
            ssize_t n = readlink(fp, link, sizeof(link) - 1);
            if (n > 0) {
                link[n] = '\0';
                if (strstr(link, SX_MEMFD_NAME)) {
                    closedir(d);
                    return 1;
                }
            }
        }
        if (d)
            closedir(d);
    }
    return 0;
}

/* ---- the attacks ----------------------------------------------------- */

static shm_hello_t sx_hello(const sx_ctx_t *x, int from, int to)
{
    shm_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic = SHM_MAGIC;
    h.version = SHM_VERSION;
    h.job_id = x->job_id;
    h.comm_id = 1;
    h.from = from;
    h.to = to;
    h.ring_bytes = (uint32_t)SHM_RING_BYTES;
    tnt__auth_random(h.nonce, sizeof(h.nonce));
    return h;
}

/* Send a hello to `to` on socket i and read the challenge: the
 * connection, or -1 when the rank did not challenge it. */
static int sx_open(const sx_ctx_t *x, int i, const shm_hello_t *h,
                   shm_challenge_t *ch)
{
    (void)x;
    int fd = sx_connect(x->names[i]);
    if (fd < 0)
        return -1;
    if (sx_send(fd, h, sizeof(*h), NULL, 0) != 0 ||
        recv(fd, ch, sizeof(*ch), 0) != (ssize_t)sizeof(*ch)) {
        close(fd);
        return -1;
    }
    return fd;
}

static shm_proof_t sx_proof(const tnt_auth_key_t *key, const shm_hello_t *h,
                            const shm_challenge_t *ch)
{
    shm_proof_t pr = {SHM_PROOF_MAGIC, SHM_VERSION, {0}};
    unsigned char in[SHM_AUTH_INPUT_MAX];
    size_t n = tnt__shm_auth_input(1, h, ch, in);
    tnt__auth_mac(key, in, n, pr.mac);
    return pr;
}

/* Attacks that need no rank number. */
static void sx_attack_blind(sx_ctx_t *x, int i)
{
    const char *name = x->names[i];
    int fd = sx_connect(name);
    if (fd < 0) {
        SX_FAIL(x, "cannot connect to @%s", name);
        return;
    }
    close(fd); /* connect and leave */

    unsigned char junk[sizeof(shm_hello_t)];
    tnt__auth_random(junk, sizeof(junk));
    fd = sx_connect(name);
    if (fd >= 0 && (sx_send(fd, junk, sizeof(junk), NULL, 0) != 0 ||
                    !sx_closed_silently(fd)))
        SX_FAIL(x, "@%s kept a connection that sent garbage", name);
    if (fd >= 0)
        close(fd);

    shm_hello_t h = sx_hello(x, 0, 1);
    fd = sx_connect(name);
    if (fd >= 0 && (sx_send(fd, &h, sizeof(h) / 2, NULL, 0) != 0 ||
                    !sx_closed_silently(fd)))
        SX_FAIL(x, "@%s kept a connection that sent half a hello", name);
    if (fd >= 0)
        close(fd);

    /* A hello with descriptors: a segment and a regular file. */
    int mfd = sx_memfd(sx_seg_bytes());
    char tmpl[] = "/tmp/tnt-sx-file-XXXXXX";
    int ffd = mkstemp(tmpl);
    if (ffd >= 0)
        unlink(tmpl);
    int fds[2] = {mfd, ffd};
    fd = sx_connect(name);
    if (fd >= 0 && mfd >= 0 && ffd >= 0 &&
        (sx_send(fd, &h, sizeof(h), fds, 2) != 0 || !sx_closed_silently(fd)))
        SX_FAIL(x, "@%s answered a hello that carried descriptors", name);
    if (fd >= 0)
        close(fd);
    if (mfd >= 0)
        close(mfd);
    if (ffd >= 0)
        close(ffd);
}

/* The attacks with a well-formed hello, on the socket of rank `to`
 * (1 or 2; rank 0 accepts nobody). Returns 1 if the rank challenged. */
static int sx_attack_auth(sx_ctx_t *x, int i, int to)
{
    const char *name = x->names[i];
    shm_hello_t h = sx_hello(x, 0, to);
    shm_challenge_t ch;
    int fd = sx_open(x, i, &h, &ch);
    if (fd < 0)
        return 0;
    /* The challenge is genuine: the rank knows the key. */
    unsigned char in[SHM_AUTH_INPUT_MAX];
    size_t n = tnt__shm_auth_input(0, &h, &ch, in);
    if (!tnt__auth_verify(&x->key, in, n, ch.mac))
        SX_FAIL(x, "@%s: the challenge does not prove the key", name);

    /* (1) A wrong key, with a good-looking segment and eventfds. */
    int efd1 = eventfd(0, EFD_CLOEXEC), efd2 = eventfd(0, EFD_CLOEXEC);
    int mfd = sx_memfd(sx_seg_bytes());
    int fds[3] = {mfd, efd1, efd2};
    shm_proof_t bad = sx_proof(&x->wrong, &h, &ch);
    if (sx_send(fd, &bad, sizeof(bad), fds, 3) != 0 ||
        !sx_closed_silently(fd))
        SX_FAIL(x, "@%s kept a connection with a wrong-key proof", name);
    close(fd);

    /* (2) A replay: a proof computed with the key for one challenge
     * (as a recorded handshake would hold) sent on a new connection. */
    shm_challenge_t ch1, ch2;
    fd = sx_open(x, i, &h, &ch1);
    int fd2 = fd >= 0 ? sx_open(x, i, &h, &ch2) : -1;
    if (fd >= 0)
        close(fd);
    shm_proof_t old = sx_proof(&x->key, &h, &ch1);
    if (fd2 < 0)
        SX_FAIL(x, "@%s: no challenge for the replay", name);
    else if (sx_send(fd2, &old, sizeof(old), fds, 3) != 0 ||
             !sx_closed_silently(fd2))
        SX_FAIL(x, "@%s accepted a replayed proof", name);
    if (fd2 >= 0)
        close(fd2);

    /* (3) Insiders with broken descriptors (they know the key; the
     * rank must still refuse rather than map or crash): a segment of the
     * wrong size, a regular file, and no descriptors at all. The hello
     * claims rank 0, which is connected already, so none could join. */
    int small = sx_memfd(4096);
    char tmpl[] = "/tmp/tnt-sx-file-XXXXXX";
    int ffd = mkstemp(tmpl);
    if (ffd >= 0) {
        unlink(tmpl);
        if (ftruncate(ffd, (off_t)sx_seg_bytes()) != 0) {
            close(ffd);
            ffd = -1;
        }
    }
    int sets[3][3] = {{small, efd1, efd2}, {ffd, efd1, efd2}, {0}};
    int counts[3] = {3, 3, 0};
    for (int k = 0; k < 3; k++) {
        shm_challenge_t c;
        fd = sx_open(x, i, &h, &c);
        if (fd < 0) {
            SX_FAIL(x, "@%s: no challenge for broken descriptors %d", name,
                    k);
            continue;
        }
        shm_proof_t good = sx_proof(&x->key, &h, &c);
        if ((counts[k] && sets[k][0] < 0) ||
            sx_send(fd, &good, sizeof(good), sets[k], counts[k]) != 0 ||
            !sx_closed_silently(fd))
            SX_FAIL(x, "@%s kept a connection with broken descriptors %d",
                    name, k);
        close(fd);
    }
    int all[] = {efd1, efd2, mfd, small, ffd};
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
        if (all[k] >= 0)
            close(all[k]);
    return 1;
}

/* Root only: a connection from another user is refused at once. */
static void sx_attack_other_user(sx_ctx_t *x, int i)
{
    if (getuid() != 0)
        return;
    pid_t p = fork();
    if (p == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        shm_hello_t h = sx_hello(x, 0, 1);
        int fd = sx_connect(x->names[i]);
        if (fd < 0)
            _exit(3);
        sx_send(fd, &h, sizeof(h), NULL, 0);
        _exit(sx_closed_silently(fd) ? 0 : 1);
    }
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        SX_FAIL(x, "@%s: another user's connection was not refused "
                "(status %d)", x->names[i], WEXITSTATUS(st));
}

static int sx_main(sx_ctx_t *x)
{
    double end = th_now() + 60.0 * th_timeout_mult();
    while (sx_find(x) < 3 && th_now() < end)
        usleep(20000);
    if (x->nsock != 3) {
        SX_FAIL(x, "found %d shared-memory sockets of the job, expected 3",
                x->nsock);
        th_flag_set(x->dir, "done");
        return 1;
    }
    /* Let the ranks connect among themselves first. */
    while (!th_flag_isset(x->dir, "running") && th_now() < end)
        usleep(20000);
    int challenged = 0;
    for (int i = 0; i < 3; i++) {
        sx_attack_blind(x, i);
        for (int to = 1; to <= 2; to++)
            challenged += sx_attack_auth(x, i, to);
        sx_attack_other_user(x, i);
    }
    if (challenged != 2)
        SX_FAIL(x, "%d sockets challenged a hello, expected 2 (ranks 1 "
                "and 2)", challenged);
    /* More silent strangers than a rank keeps in their handshake. */
    static int held[3][SX_HOLD];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < SX_HOLD; k++)
            held[i][k] = sx_connect(x->names[i]);
    /* Until every rank has closed the ones beyond its bound (a rank
     * polls its socket rarely while it runs back-to-back collectives on
     * a loaded machine: a fixed 300 ms was sometimes too short). */
    int evicted = 0;
    double until = th_now() + 20.0 * th_timeout_mult();
    do {
        usleep(50000);
        evicted = 0;
        for (int i = 0; i < 3; i++) {
            int n = 0;
            for (int k = 0; k < SX_HOLD; k++) {
                struct pollfd p = {held[i][k], POLLIN, 0};
                n += held[i][k] >= 0 && poll(&p, 1, 0) == 1 &&
                     (p.revents & (POLLHUP | POLLIN));
            }
            evicted += n >= SX_HOLD - SHM_PENDING_MAX;
        }
    } while (evicted < 3 && th_now() < until);
    if (evicted < 3)
        SX_FAIL(x, "only %d of 3 ranks closed the connections beyond "
                "their bound of %d", evicted, SHM_PENDING_MAX);
    if (sx_leaked(x))
        SX_FAIL(x, "a rank maps or holds a descriptor the intruder sent");
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < SX_HOLD; k++)
            if (held[i][k] >= 0)
                close(held[i][k]);
    th_flag_set(x->dir, "done");
    fprintf(stderr, "intruder: finished, %d failures\n", x->failures);
    return x->failures ? 1 : 0;
}

/* ---- the job ---------------------------------------------------------- */

static int rank_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                   th_report_t *rep)
{
    sx_ctx_t *x = arg;
    double end = th_now() + 120.0 * th_timeout_mult();
    /* Element SX_COUNT carries rank 0's "the intruder is done" flag, so
     * that all ranks agree on when to stop. */
    int32_t *buf = malloc((SX_COUNT + 1) * sizeof(int32_t));
    size_t wrong = 0, first = 0;
    long iters = 0;
    int stop = 0;
    tnt_result_t rc = TNT_SUCCESS;
    while (!stop && rc == TNT_SUCCESS && th_now() < end) {
        for (int j = 0; j < SX_COUNT; j++)
            buf[j] = (int32_t)((rank + 1) * ((iters + j) % 1000));
        buf[SX_COUNT] = rank == 0 && iters >= SX_MIN_ITERS &&
                        th_flag_isset(x->dir, "done");
        rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, SX_COUNT + 1, TNT_I32,
                           TNT_SUM);
        int32_t tri = (int32_t)(nranks * (nranks + 1) / 2);
        for (int j = 0; rc == TNT_SUCCESS && j < SX_COUNT; j++)
            if (buf[j] != tri * (int32_t)((iters + j) % 1000) && !wrong++)
                first = (size_t)(iters * SX_COUNT + j);
        stop = buf[SX_COUNT] != 0;
        if (rank == 0 && iters == 0)
            th_flag_set(x->dir, "running");
        iters++;
    }
    th_report_check(rep, "allreduces", rc, wrong, first, NULL, 0);
    th_report_expect(rep, "finished", stop && iters >= SX_MIN_ITERS, rc,
                     "%ld allreduces, stop flag %d", iters, stop);
    free(buf);
    return 0;
}

static int sx_run(void *x)
{
    return sx_main(x);
}

static void test_shm_intruders(void)
{
    sx_ctx_t x;
    memset(&x, 0, sizeof(x));
    snprintf(x.dir, sizeof(x.dir), "/tmp/tnt-shm-intruder-XXXXXX");
    if (!mkdtemp(x.dir)) {
        TH_CHECK(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    TH_CHECK(tnt__auth_init() == TNT_SUCCESS, "libsodium init");
    tnt__auth_key_derive(SX_KEY, &x.key);
    tnt__auth_key_derive("not-" SX_KEY, &x.wrong);
    x.job_id = tnt__auth_job_id(SX_KEY);
    char log[256];
    sx_path(&x, "stderr.log", log, sizeof(log));

    int saved = th_stderr_to(log);
    pid_t ipid = th_fork_beside(sx_run, &x);
    /* No TNT_LOG_ALL_RANKS: refusals must show on every rank anyway. */
    const char *env[] = {"TNT_JOB_KEY=" SX_KEY, "TNT_TRANSPORT=shm",
                         "TNT_LOG_LEVEL=WARNING", "TNT_LOG_ALL_RANKS",
                         NULL};
    th_job_t job = {.name = "shm intruders", .nranks = 3, .env = env,
                    .fn = rank_fn, .arg = &x, .deadline_s = 150};
    th_run_job(&job, NULL);
    int st = th_reap_beside(ipid, 60.0 * th_timeout_mult());
    th_stderr_back(saved);

    TH_CHECK(st == 0, "the intruder saw an attack succeed or could not run (see its "
             "FAIL lines in %s)", log);
    struct { const char *a, *b; int min; } want[] = {
        {"dropped shared-memory connection from pid", "(uid ", 1},
        {"dropped shared-memory", "closed before its hello", 3},
        {"dropped shared-memory", "not a libtntcomm shared-memory hello", 3},
        {"dropped shared-memory", "(wrong length)", 3},
        {"dropped shared-memory", "descriptors before the handshake", 3},
        {"dropped shared-memory", "for another communicator or rank", 4},
        {"dropped shared-memory", "authentication failed", 4},
        {"dropped shared-memory", "segment of the wrong kind or size", 2},
        {"dropped shared-memory", "segment not sealed", 2},
        {"dropped shared-memory", "proof without exactly", 2},
        {"dropped shared-memory", "too many connections", 3},
        {"tnt[1] WARNING: rank 1: dropped shared-memory", NULL, 1},
        {"tnt[2] WARNING: rank 2: dropped shared-memory", NULL, 1},
        {"refused shared-memory connection", "another user",
         getuid() == 0 ? 3 : 0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        th_expect_lines(log, want[i].a, want[i].b, want[i].min);
    if (CU_get_number_of_failures() == 0 && !getenv("TNT_TEST_KEEP")) {
        char p[256];
        const char *files[] = {"stderr.log", "running", "done"};
        for (size_t i = 0; i < 3; i++) {
            sx_path(&x, files[i], p, sizeof(p));
            unlink(p);
        }
        rmdir(x.dir);
    }
}

/* ---- a flood of held connections ------------------------------------ */

/* 5000 silent connections made to each rank's socket, and held, while the
 * ranks of a p=3 job connect to each other: ranks 0 and 2 start and
 * listen, rank 1 waits until the flood runs, so that every pair connects
 * through it. A rank keeps at most SHM_PENDING_MAX connections in their
 * handshake; its own peers' must still get in (once, the flood evicted a
 * peer's connection before its hello was read, and the job failed
 * blaming a live rank). The strangers come from helper processes of
 * FLOOD_CHUNK connections each (within a default descriptor limit); the
 * job runs FLOOD_ITERS verified allreduces and, once every helper has
 * made its connections, one more. */
#define FLOOD_HOLD 5000
#define FLOOD_CHUNK 1000
#define FLOOD_ITERS 200

static void flood_helper(const char *name, int n, int out)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t len = strlen(name);
    memcpy(sa.sun_path + 1, name, len);
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                               len);
    int made = 0;
    double end = th_now() + 10.0;
    /* The listen queue is short: retry while it is full (the rank
     * drains it), bounded in time. */
    while (made < n && th_now() < end) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
        if (fd < 0)
            break;
        if (connect(fd, (struct sockaddr *)&sa, sl) == 0) {
            made++;
            continue; /* held: never closed */
        }
        close(fd);
        if (errno != EAGAIN)
            break;
        usleep(200);
    }
    if (write(out, &made, sizeof(made)) != (ssize_t)sizeof(made))
        _exit(1);
    close(out);
    for (;;)
        pause();
}

static int flood_rank(tnt_comm_t unused, int rank, int nranks, void *arg,
                      th_report_t *rep)
{
    (void)unused;
    sx_ctx_t *x = arg;
    double end = th_now() + 120.0 * th_timeout_mult();
    if (rank == 1)
        while (!th_flag_isset(x->dir, "go") && th_now() < end)
            usleep(1000);
    tnt_comm_t comm;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    th_report_check(rep, "init", rc, 0, 0, NULL, 0);
    if (rc != TNT_SUCCESS)
        return 1;
    int32_t buf[SX_COUNT];
    size_t wrong = 0, first = 0;
    for (int it = 0; it < FLOOD_ITERS && rc == TNT_SUCCESS; it++) {
        for (int j = 0; j < SX_COUNT; j++)
            buf[j] = (int32_t)((rank + 1) * ((it + j) % 1000));
        rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, SX_COUNT, TNT_I32,
                           TNT_SUM);
        int32_t tri = (int32_t)(nranks * (nranks + 1) / 2);
        for (int j = 0; rc == TNT_SUCCESS && j < SX_COUNT; j++)
            if (buf[j] != tri * (int32_t)((it + j) % 1000) && !wrong++)
                first = (size_t)it * SX_COUNT + (size_t)j;
    }
    /* The whole flood meets a live job: wait for its end, then one
     * more. */
    while (rc == TNT_SUCCESS && !th_flag_isset(x->dir, "flooded") &&
           th_now() < end)
        usleep(10000);
    for (int j = 0; rc == TNT_SUCCESS && j < SX_COUNT; j++)
        buf[j] = rank + 1;
    if (rc == TNT_SUCCESS)
        rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, SX_COUNT, TNT_I32,
                           TNT_SUM);
    for (int j = 0; rc == TNT_SUCCESS && j < SX_COUNT; j++)
        if (buf[j] != nranks * (nranks + 1) / 2 && !wrong++)
            first = (size_t)FLOOD_ITERS * SX_COUNT + (size_t)j;
    th_report_check(rep, "allreduces", rc, wrong, first, NULL, 0);
    tnt_comm_free(comm);
    return 0;
}

static void test_shm_flood(void)
{
    sx_ctx_t x;
    memset(&x, 0, sizeof(x));
    snprintf(x.dir, sizeof(x.dir), "/tmp/tnt-shm-flood-XXXXXX");
    if (!mkdtemp(x.dir)) {
        TH_CHECK(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    x.job_id = tnt__auth_job_id(SX_KEY);
    char log[256];
    sx_path(&x, "stderr.log", log, sizeof(log));
    int saved = th_stderr_to(log);
    enum { MAXH = 2 * FLOOD_HOLD / FLOOD_CHUNK };
    /* helpers, then the connections each made, then the verdict. */
    int *sh = mmap(NULL, sizeof(int) * (2 * MAXH + 1),
                   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                   0);
    pid_t ipid = fork();
    if (ipid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        double end = th_now() + 60.0 * th_timeout_mult();
        while (sx_find(&x) < 2 && th_now() < end)
            usleep(5000);
        int nh = 0, pipes[MAXH];
        for (int i = 0; i < x.nsock && i < 2; i++)
            for (int off = 0; off < FLOOD_HOLD; off += FLOOD_CHUNK) {
                int pfd[2];
                if (pipe(pfd) != 0)
                    break;
                pid_t pid = fork();
                if (pid == 0) {
                    close(pfd[0]);
                    flood_helper(x.names[i], FLOOD_CHUNK, pfd[1]);
                }
                close(pfd[1]);
                sh[nh] = pid;
                pipes[nh++] = pfd[0];
            }
        /* Rank 1 joins while the flood runs. */
        usleep(20000);
        th_flag_set(x.dir, "go");
        int total = 0;
        for (int h = 0; h < nh; h++) {
            int k = 0;
            if (read(pipes[h], &k, sizeof(k)) != (ssize_t)sizeof(k))
                k = 0;
            sh[MAXH + h] = k;
            total += k;
        }
        fprintf(stderr, "intruder: made %d connections to %d sockets\n",
                total, x.nsock < 2 ? x.nsock : 2);
        sh[2 * MAXH] = x.nsock == 2 && total > 2 * SHM_PENDING_MAX ? 2 : 1;
        th_flag_set(x.dir, "flooded");
        for (;;)
            pause();
    }
    const char *env[] = {"TNT_JOB_KEY=" SX_KEY, "TNT_TRANSPORT=shm",
                         "TNT_LOG_LEVEL=WARNING", "TNT_TIMEOUT=20", NULL};
    th_job_t job = {.name = "shm flood", .nranks = 3, .env = env,
                    .fn = flood_rank, .arg = &x, .deadline_s = 150,
                    .no_init = 1};
    th_result_t res;
    th_run_job(&job, &res);
    /* Wait for the helpers' counts (bounded), then end them all. */
    double end = th_now() + 20.0 * th_timeout_mult();
    while (!sh[2 * MAXH] && th_now() < end)
        usleep(10000);
    for (int i = 0; i < MAXH; i++)
        if (sh[i] > 0)
            kill(sh[i], SIGKILL);
    kill(ipid, SIGKILL);
    waitpid(ipid, NULL, 0);
    th_stderr_back(saved);
    int made = 0;
    for (int i = 0; i < MAXH; i++)
        made += sh[MAXH + i];
    printf("\n  [shm flood: %d connections made; %d strangers dropped]\n",
           made, th_count_lines(log, "dropped shared-memory", NULL));
    TH_CHECK(sh[2 * MAXH] == 2, "the intruder could not flood the sockets "
             "(%d connections; see %s)", made, log);
    TH_CHECK(res.failures == 0, "the job failed under the flood: %s (the "
             "ranks' stderr is in %s)", res.first_problem, log);
    th_result_free(&res);
    munmap(sh, sizeof(int) * (2 * MAXH + 1));
    if (CU_get_number_of_failures() == 0 && !getenv("TNT_TEST_KEEP")) {
        unlink(log);
        char p[256];
        sx_path(&x, "go", p, sizeof(p));
        unlink(p);
        sx_path(&x, "flooded", p, sizeof(p));
        unlink(p);
        rmdir(x.dir);
    }
}

static const th_test_def_t k_tests[] = {
    {"shm_intruder", "abstract_socket", test_shm_intruders},
    {"shm_intruder", "flood_5000", test_shm_flood},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
