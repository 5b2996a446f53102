#include "beside.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

int th_stderr_to(const char *path)
{
    fflush(stderr);
    int lfd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
    if (lfd < 0)
        return -1;
    int saved = dup(2);
    if (saved < 0 || dup2(lfd, 2) < 0) {
        if (saved >= 0)
            close(saved);
        close(lfd);
        return -1;
    }
    close(lfd);
    return saved;
}

void th_stderr_back(int saved)
{
    if (saved < 0)
        return;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

pid_t th_fork_beside(int (*fn)(void *arg), void *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        _exit(fn(arg));
    }
    return pid;
}

int th_reap_beside(pid_t pid, double timeout_s)
{
    if (pid <= 0)
        return -1;
    int st = 0;
    double end = th_now() + timeout_s;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && th_now() < end)
        usleep(50000);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
    }
    return w == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void th_expect_lines(const char *path, const char *a, const char *b,
                     int min)
{
    int n = th_count_lines(path, a, b);
    if (getenv("TNT_TEST_VERBOSE"))
        printf("  %5d lines with \"%s\" + \"%s\"\n", n, a, b ? b : "");
    TH_CHECK(n >= min, "%d WARNING lines with \"%s\" and \"%s\" in %s, "
             "expected at least %d", n, a, b ? b : "", path, min);
}
