/*
 * -N K for tnt-bench: start K local ranks by forking, giving each the
 * environment a launcher would (TNT_RANK, TNT_SIZE, TNT_ROOT_ADDR on a
 * free loopback port, a random TNT_JOB_KEY), and reap them. If one rank
 * fails, the others are stopped (SIGTERM, then SIGKILL after a grace
 * period) instead of waiting for their peers until the deadline.
 * --bind-to (default auto, as mpirun) pins each rank to one CPU: with a
 * CPU each, a rank that the scheduler would otherwise move, or stack on
 * its peer's CPU for a while, does not make small allreduces up to 3x
 * slower and their times noisy (docs/performance.md, "Pinned ranks in
 * tnt-bench -N").
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "bench.h"
#include "bench_cpu.h"

#define JOB_KEY_BYTES 32

/* How long ranks get between SIGTERM and SIGKILL once one has failed. */
#define STOP_GRACE_S 3.0

/* Binds port 0 on the loopback and returns what the kernel chose. Another
 * process may take it before rank 0 binds it; the window is short, and
 * the failure would then be a clear bind error from rank 0. */
static int find_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static int make_job_key(char hex[2 * JOB_KEY_BYTES + 1])
{
    unsigned char key[JOB_KEY_BYTES];
    size_t got = 0;
    while (got < sizeof key) {
        ssize_t n = getrandom(key + got, sizeof key - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof key; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    return 0;
}

static void run_child(const bench_opts_t *o, int rank, const char *addr,
                      const char *key, pid_t parent)
{
    char num[16];
    int cpu = o->bind == BENCH_BIND_NONE
                  ? -1
                  : bench_cpu_for(rank, o->local_ranks,
                                  o->bind == BENCH_BIND_CORE);
    if (cpu >= 0 && bench_pin_cpu(cpu) != 0)
        fprintf(stderr, "tnt-bench: rank %d: cannot bind to CPU %d: %s; "
                "running unbound\n", rank, cpu, strerror(errno));
    /* If the parent dies, so do its ranks, instead of waiting for peers
     * until their deadline. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(BENCH_EXIT_FAIL);
    snprintf(num, sizeof num, "%d", rank);
    int ok = setenv("TNT_RANK", num, 1) == 0;
    snprintf(num, sizeof num, "%d", o->local_ranks);
    ok = ok && setenv("TNT_SIZE", num, 1) == 0;
    ok = ok && setenv("TNT_ROOT_ADDR", addr, 1) == 0;
    ok = ok && setenv("TNT_JOB_KEY", key, 1) == 0;
    if (!ok) {
        fprintf(stderr, "tnt-bench: rank %d: setenv: %s\n", rank,
                strerror(errno));
        exit(BENCH_EXIT_FAIL);
    }
    /* Wrong elements and failures differ for the parent: only failures
     * make it stop the other ranks. */
    exit(bench_rank_main(o) == BENCH_EXIT_OK ? BENCH_EXIT_OK
                                             : BENCH_EXIT_WRONG_CHILD);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void signal_all(pid_t *pids, int n, int sig)
{
    for (int r = 0; r < n; r++)
        if (pids[r] > 0)
            kill(pids[r], sig);
}

/* Reaps the ranks. The first one that fails (not merely wrong results)
 * is reported and the others get SIGTERM, then SIGKILL after a grace
 * period; their own deaths are not reported again. */
static int wait_children(pid_t *pids, int n)
{
    int alive = n, failed = 0, wrong = 0;
    double kill_at = 0.0;
    struct timespec ts;

    while (alive > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, kill_at > 0 ? WNOHANG : 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            perror("tnt-bench: waitpid");
            return BENCH_EXIT_FAIL;
        }
        if (pid == 0) { /* stopping, nobody exited yet */
            clock_gettime(CLOCK_MONOTONIC, &ts);
            if (kill_at > 0 && (double)ts.tv_sec + ts.tv_nsec * 1e-9 >
                                   kill_at) {
                signal_all(pids, n, SIGKILL);
                kill_at = -1.0; /* blocking waits from now on */
            } else {
                sleep_ms(10);
            }
            continue;
        }
        int r = 0;
        while (r < n && pids[r] != pid)
            r++;
        if (r == n)
            continue; /* not one of ours */
        pids[r] = 0;
        alive--;
        if (WIFEXITED(st) && WEXITSTATUS(st) == BENCH_EXIT_OK)
            continue;
        if (WIFEXITED(st) && WEXITSTATUS(st) == BENCH_EXIT_WRONG_CHILD) {
            wrong = 1;
            continue;
        }
        if (!failed) {
            if (WIFSIGNALED(st))
                fprintf(stderr, "tnt-bench: rank %d was killed by signal "
                        "%d (%s)", r, WTERMSIG(st), strsignal(WTERMSIG(st)));
            else
                fprintf(stderr, "tnt-bench: rank %d failed (exit status "
                        "%d)", r, WEXITSTATUS(st));
            if (alive > 0) {
                fprintf(stderr, "; stopping the other %d rank%s", alive,
                        alive == 1 ? "" : "s");
                signal_all(pids, n, SIGTERM);
                clock_gettime(CLOCK_MONOTONIC, &ts);
                kill_at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 +
                          STOP_GRACE_S;
            }
            fprintf(stderr, "\n");
        }
        failed = 1;
    }
    return failed || wrong ? BENCH_EXIT_FAIL : BENCH_EXIT_OK;
}

int bench_launch_local(const bench_opts_t *o)
{
    char key[2 * JOB_KEY_BYTES + 1], addr[32];
    int n = o->local_ranks;
    int port = find_free_port();
    if (port < 0) {
        fprintf(stderr, "tnt-bench: cannot find a free TCP port on "
                "127.0.0.1: %s\n", strerror(errno));
        return BENCH_EXIT_FAIL;
    }
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    if (make_job_key(key) != 0) {
        fprintf(stderr, "tnt-bench: cannot make a job key with getrandom: "
                "%s\n", strerror(errno));
        return BENCH_EXIT_FAIL;
    }
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    if (!pids) {
        fprintf(stderr, "tnt-bench: out of memory\n");
        return BENCH_EXIT_FAIL;
    }
    pid_t self = getpid();
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            free(pids); /* the parent's; a rank has no use for it */
            run_child(o, r, addr, key, self);
        }
        if (pid < 0) {
            fprintf(stderr, "tnt-bench: cannot start rank %d: fork: %s\n",
                    r, strerror(errno));
            signal_all(pids, r, SIGKILL);
            for (int k = 0; k < r; k++)
                waitpid(pids[k], NULL, 0);
            free(pids);
            return BENCH_EXIT_FAIL;
        }
        pids[r] = pid;
    }
    int rc = wait_children(pids, n);
    free(pids);
    return rc;
}
