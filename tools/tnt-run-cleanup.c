/*
 * tnt-run --cleanup PROGRAM: stops ranks of PROGRAM left over by a job,
 * on this host or, with --hostfile, on every host (through the same agent
 * command as a job, "tnt-run --agent-cleanup", with the request on stdin).
 * A rank is a process that has TNT_JOB_KEY in its environment (tnt-run
 * gives it to every rank and nothing else) and PROGRAM's name as one of
 * its first command-line words (so "python3 train.py" is found as
 * train.py). It gets SIGTERM, and SIGKILL after a grace period, or at once
 * with --force. Each host reports what it found and what is left.
 */
#include "tnt-run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FOUND 4096

/* Reads /proc/PID/NAME into buf (NUL-separated fields). Returns its
 * length, or -1. */
static ssize_t read_proc(long pid, const char *name, char *buf,
                         size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/%s", pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

/* The job rank of process pid when it is a rank of prog, else -1. */
static int rank_of(long pid, const char *base)
{
    static char buf[1 << 16];
    ssize_t n = read_proc(pid, "cmdline", buf, sizeof buf);
    int found = 0, words = 0;
    for (ssize_t off = 0; off < n && words < 3 && !found; words++) {
        char *w = buf + off;
        found = strcmp(basename(w), base) == 0;
        off += (ssize_t)strlen(w) + 1;
    }
    if (!found)
        return -1;
    n = read_proc(pid, "environ", buf, sizeof buf);
    int has_key = 0, rank = -2;
    for (ssize_t off = 0; off < n; off += (ssize_t)strlen(buf + off) + 1) {
        if (strncmp(buf + off, "TNT_JOB_KEY=", 12) == 0)
            has_key = 1;
        if (strncmp(buf + off, "TNT_RANK=", 9) == 0)
            rank = atoi(buf + off + 9);
    }
    return has_key ? (rank < 0 ? 0 : rank) : -1;
}

/* Whether pid still runs (a zombie has finished). */
static int running(long pid)
{
    char buf[512];
    if (read_proc(pid, "stat", buf, sizeof buf) <= 0)
        return 0;
    char *paren = strrchr(buf, ')');
    return paren != NULL && paren[1] == ' ' && paren[2] != 'Z';
}

static int find_ranks(const char *base, long *pids, int *ranks)
{
    DIR *d = opendir("/proc");
    int n = 0;
    if (d == NULL)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < MAX_FOUND;) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == (long)getpid())
            continue;
        int rank = rank_of(pid, base);
        if (rank >= 0 && running(pid)) {
            pids[n] = pid;
            ranks[n++] = rank;
        }
    }
    closedir(d);
    return n;
}

int run_cleanup_here(const char *host, const char *prog, int force)
{
    static long pids[MAX_FOUND];
    static int ranks[MAX_FOUND];
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", prog);
    const char *base = basename(copy);
    int n = find_ranks(base, pids, ranks);
    if (n == 0) {
        printf("tnt-run: host %s: no rank of '%s' found\n", host, base);
        fflush(stdout);
        return 0;
    }
    printf("tnt-run: host %s: found %d rank(s) of '%s':", host, n, base);
    for (int k = 0; k < n; k++)
        printf(" pid %ld (rank %d)%s", pids[k], ranks[k],
               k + 1 < n ? "," : "");
    printf("; sending %s\n", force ? "SIGKILL" : "SIGTERM");
    fflush(stdout);
    for (int k = 0; k < n; k++)
        kill((pid_t)pids[k], force ? SIGKILL : SIGTERM);
    int left = n;
    for (int t = 0; t < 30 && left > 0; t++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        left = 0;
        for (int k = 0; k < n; k++)
            left += running(pids[k]);
    }
    if (left > 0 && !force) {
        printf("tnt-run: host %s: %d still running after %g s; sending "
               "SIGKILL\n", host, left, RUN_GRACE_S);
        for (int k = 0; k < n; k++)
            if (running(pids[k]))
                kill((pid_t)pids[k], SIGKILL);
        nanosleep(&(struct timespec){1, 0}, NULL);
        left = 0;
        for (int k = 0; k < n; k++)
            left += running(pids[k]);
    }
    printf("tnt-run: host %s: %s\n", host,
           left ? "some ranks could not be stopped" : "all stopped");
    fflush(stdout);
    return left ? 1 : 0;
}

/* Runs the cleanup on one host through its agent command. */
static int cleanup_host(const struct run_opts *o, const char *host,
                        const char *prog)
{
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0)
        return 1;
    self[sl] = '\0';
    char *tail[] = {self, "--agent-cleanup", NULL};
    char **argv = run_agent_argv(o->rsh, host, tail);
    int in[2];
    if (argv == NULL || pipe2(in, O_CLOEXEC) != 0) {
        free(argv);
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], STDIN_FILENO);
        execvp(argv[0], argv);
        fprintf(stderr, "tnt-run: cannot execute '%s': %s\n", argv[0],
                strerror(errno));
        _exit(RUN_EXIT_NOEXEC);
    }
    close(in[0]);
    dprintf(in[1], "prog %s\nforce %d\n", prog, o->force);
    close(in[1]);
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    free(argv);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "tnt-run: cleanup on host %s failed (%s %d)\n",
                host, pid < 0 ? "fork" : "status",
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 1;
    }
    return 0;
}

int run_cleanup(const struct run_opts *o, const char *prog)
{
    if (o->hostfile == NULL) {
        char host[256];
        if (gethostname(host, sizeof host) != 0)
            snprintf(host, sizeof host, "localhost");
        return run_cleanup_here(host, prog, o->force);
    }
    char **hosts;
    int n = run_read_hostfile(o->hostfile, &hosts);
    if (n < 0)
        return RUN_EXIT_USAGE;
    int rc = 0;
    for (int h = 0; h < n; h++) {
        rc |= cleanup_host(o, hosts[h], prog);
        free(hosts[h]);
    }
    free(hosts);
    return rc;
}
