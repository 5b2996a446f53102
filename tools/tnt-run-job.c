/*
 * Starting and supervising the ranks of a tnt-run job. Every rank runs in a
 * process group of its own, so that a signal reaches the whole process tree
 * it started, and dies with the launcher (PR_SET_PDEATHSIG) if the launcher
 * is killed outright. The supervisor is one poll() loop over a signalfd and
 * the ranks' output pipes: the signals it cares about are blocked and read
 * as data, so none can slip in between a check and the wait. It blocks
 * without a timeout unless a deadline (job timeout, SIGKILL after the grace
 * period) is pending. The first failure decides the exit code; the loop ends
 * only when every rank has been reaped, so no rank outlives the launcher.
 * The same loop supervises the agents of a multi-host job, which are told to
 * stop through their standard input ("term", "kill") because a signal to
 * the local ssh would only cut the connection; and, in an agent, it reads
 * those orders from the launcher.
 */
#include "tnt-run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long to keep reading output after the last rank was reaped, for
 * descendants that left the rank's process group but still hold its pipes. */
#define DRAIN_S 1.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
    }
}

/* The launcher's own messages go through the same stdio stream as the
 * ranks' stderr lines, so that they stay in order with them. */
void run_say(struct run_job *job, const char *fmt, ...)
{
    if (job->err_sink == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(job->err_sink, "tnt-run: %s%s%s", job->host ? "host " : "",
            job->host ? job->host : "", job->host ? ": " : "");
    vfprintf(job->err_sink, fmt, ap);
    fputc('\n', job->err_sink);
    va_end(ap);
    fflush(job->err_sink);
}

static void say(struct run_job *job, const char *text)
{
    run_say(job, "%s", text);
}

/* Tells an agent what to do; it may be gone already (EPIPE is ignored,
 * SIGPIPE is). */
static void order_agent(struct run_rank *r, const char *order)
{
    if (r->in_w < 0)
        return;
    ssize_t n = write(r->in_w, order, strlen(order));
    (void)n;
}

/* Sends sig to the process group of every rank still running. A rank that
 * is not reaped yet still holds its pid, so the group id cannot have been
 * reused by an unrelated process. An agent gets the order on its stdin
 * instead of SIGTERM, and the order as well as the signal for SIGKILL:
 * killing the local ssh alone leaves the remote agent to notice the end of
 * its input, which it takes as "kill" too. */
static void signal_ranks(struct run_job *job, int sig)
{
    for (int i = 0; i < job->nranks; i++) {
        struct run_rank *r = &job->ranks[i];
        if (!r->alive)
            continue;
        if (r->is_agent) {
            order_agent(r, sig == SIGKILL ? "kill\n" : "term\n");
            if (sig != SIGKILL)
                continue;
        }
        if (kill(-r->pid, sig) != 0)
            kill(r->pid, sig);
    }
}

/* Lists the ranks still running as "0, 2, 5" into buf. */
static void list_alive(const struct run_job *job, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < job->nranks && used < size; i++) {
        if (!job->ranks[i].alive)
            continue;
        const struct run_rank *r = &job->ranks[i];
        char name[64];
        if (r->is_agent)
            snprintf(name, sizeof name, "%s", r->host);
        else
            snprintf(name, sizeof name, "%d", atoi(r->prefix + 1));
        int n = snprintf(buf + used, size - used, "%s%s",
                         used ? ", " : "", name);
        if (n < 0 || (size_t)n >= size - used) {
            snprintf(buf + size - 5, 5, "...");
            return;
        }
        used += (size_t)n;
    }
}

/* Starts the orderly stop: SIGTERM now, SIGKILL after the grace period. The
 * first cause of a stop decides the exit code. */
void run_stop_job(struct run_job *job, int exit_code)
{
    if (job->exit_code < 0)
        job->exit_code = exit_code;
    if (job->phase != RUN_RUNNING)
        return;
    job->phase = RUN_STOPPING;
    job->kill_at = now_s() + job->grace_s;
    signal_ranks(job, SIGTERM);
}

#define stop_job run_stop_job
#define kill_job run_kill_job

void run_kill_job(struct run_job *job)
{
    job->phase = RUN_KILLING;
    signal_ranks(job, SIGKILL);
}

/* ---- starting the ranks --------------------------------------------- */

/* Runs in the child between fork() and execve(). It only makes system
 * calls; on failure it reports errno through the close-on-exec pipe, whose
 * silent closing tells the launcher that execve() succeeded. */
static _Noreturn void exec_rank(const struct run_job *job, int rank,
                                int out_w, int err_w, int exec_w)
{
    const struct run_rank *r = &job->ranks[rank];
    setpgid(0, 0);
    /* Die with the launcher. If it died before the request took effect we
     * have been reparented already and must not run at all. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
        getppid() != job->launcher_pid)
        _exit(RUN_EXIT_NOEXEC);
    int rc = 0;
    if (dup2(r->in_r >= 0 ? r->in_r : job->devnull, STDIN_FILENO) < 0 ||
        dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0)
        rc = -1;
    /* The launcher ignores SIGPIPE and blocks the signals it reads through
     * its signalfd; the ranks must start with the ordinary settings. */
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &job->child_mask, NULL);
    if (rc == 0)
        rc = run_pin_apply(r);
    if (rc == 0)
        execve(r->path ? r->path : job->path, r->argv ? r->argv : job->argv,
               job->envs[rank]);
    int e = errno;
    ssize_t n = write(exec_w, &e, sizeof e);
    (void)n;
    _exit(RUN_EXIT_NOEXEC);
}

static void close_pipe(int fds[2])
{
    for (int k = 0; k < 2; k++) {
        if (fds[k] >= 0)
            close(fds[k]);
        fds[k] = -1;
    }
}

/* Starts rank i. Returns 0 when it runs the program; otherwise -1 with errno
 * from pipe/fork, or 1 with errno from the rank's failed execve(). */
static int start_rank(struct run_job *job, int i)
{
    struct run_rank *r = &job->ranks[i];
    int out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
        pipe2(ex, O_CLOEXEC) != 0)
        goto err_close_pipes;
    pid_t pid = fork();
    if (pid == 0)
        exec_rank(job, i, out[1], err[1], ex[1]);
    if (pid < 0)
        goto err_close_pipes;
    /* Also set the group here: whichever of parent and child gets there
     * first, the group exists before either goes on. */
    setpgid(pid, pid);
    r->pid = pid;
    r->alive = 1;
    job->nalive++;
    close(out[1]);
    close(err[1]);
    close(ex[1]);
    if (r->in_r >= 0)
        close(r->in_r);
    r->in_r = -1;
    r->out.fd = out[0];
    r->err.fd = err[0];

    int child_errno = 0;
    ssize_t n;
    do {
        n = read(ex[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    close(ex[0]);
    if (n == (ssize_t)sizeof child_errno) {
        errno = child_errno;
        return 1;
    }
    return 0;

err_close_pipes: {
        int e = errno;
        close_pipe(out);
        close_pipe(err);
        close_pipe(ex);
        errno = e;
        return -1;
    }
}

int run_job_start(struct run_job *job)
{
    job->started = now_s();
    for (int i = 0; i < job->nranks; i++) {
        int rc = start_rank(job, i);
        if (rc == 0)
            continue;
        struct run_rank *r = &job->ranks[i];
        if (rc > 0)
            run_say(job, "cannot execute '%s': %s",
                    r->argv ? r->argv[0] : job->argv[0], strerror(errno));
        else
            run_say(job, "cannot start %s %d: %s", r->is_agent ? "host"
                    : "rank", i, strerror(errno));
        run_job_cleanup(job);
        return rc > 0 ? RUN_EXIT_NOEXEC : 1;
    }
    return 0;
}

/* ---- supervising ------------------------------------------------------- */

static void describe_status(int status, char *buf, size_t size)
{
    if (WIFEXITED(status)) {
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
    } else {
        int sig = WTERMSIG(status);
        snprintf(buf, size, "killed by signal %d (%s)%s", sig,
                 strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
    }
}

/* Reads what an agent that ended still had in its pipes: its last
 * messages (an "error" or "failed" on stdout, what ssh said on stderr) say
 * more than its exit status. Bounded, in case a descendant keeps a pipe. */
static void drain_agent(struct run_job *job, struct run_rank *r)
{
    double until = now_s() + 1.0;
    while ((r->out.fd >= 0 || r->err.fd >= 0) && now_s() < until) {
        struct pollfd p[2] = {{.fd = r->out.fd, .events = POLLIN},
                              {.fd = r->err.fd, .events = POLLIN}};
        if (poll(p, 2, 200) <= 0)
            break;
        if (p[0].revents &&
            run_relay_read(&r->out, r->prefix, job->out_sink) != 0)
            job->out_sink = NULL;
        if (p[1].revents &&
            run_relay_read(&r->err, r->prefix, job->err_sink) != 0)
            job->err_sink = NULL;
    }
}

/* An agent ended: say what its host did, unless the agent reported a
 * failed rank already (the first cause decides the exit code). */
static void agent_exited(struct run_job *job, struct run_rank *r,
                         int status, int code)
{
    char what[96];
    drain_agent(job, r);
    if (job->phase != RUN_RUNNING && !r->agent_failed)
        return;
    describe_status(status, what, sizeof what);
    if (r->agent_failed) {
        stop_job(job, code);
        return;
    }
    if (!r->agent_ok)
        run_say(job, "cannot start ranks on host %s: '%s' %s%s%s",
                r->host, r->argv[0], what, r->err.last[0] ? ": " : "",
                r->err.last);
    else if (WIFEXITED(status) && code != 0)
        run_say(job, "the ranks on host %s ended with status %d%s", r->host,
                code, job->nalive > 0 ? "; stopping the other hosts" : "");
    else
        run_say(job, "the agent of host %s %s%s", r->host, what,
                job->nalive > 0 ? "; stopping the other hosts" : "");
    stop_job(job, code);
}

static void rank_exited(struct run_job *job, int i, int status)
{
    struct run_rank *r = &job->ranks[i];
    r->alive = 0;
    r->status = status;
    job->nalive--;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return;
    /* Once the job is being stopped, failures are its consequence. */
    if (job->phase != RUN_RUNNING)
        return;
    int code = WIFEXITED(status) ? WEXITSTATUS(status)
                                 : 128 + WTERMSIG(status);
    if (r->is_agent) {
        agent_exited(job, r, status, code);
        return;
    }
    char what[96];
    describe_status(status, what, sizeof what);
    int rank = atoi(r->prefix + 1);
    /* --elastic: a death (a signal, not an exit status: a rank that
     * exits non-zero has failed, and stops the job as always) leaves
     * the others to go on, with fewer ranks. */
    if (job->elastic && WIFSIGNALED(status)) {
        job->ndied++;
        run_say(job, "rank %d (pid %ld) %s %.1f s after the start; "
                "--elastic: the others go on (%d still running)", rank,
                (long)r->pid, what, now_s() - job->started, job->nalive);
        if (job->nalive > 0)
            return;
    }
    if (job->ctl_out) {
        /* The launcher names the rank and host and stops the others. */
        printf(RUN_CTL_PREFIX "failed %d rank %d on host %s (pid %ld) %s\n",
               code, rank, job->host, (long)r->pid, what);
        fflush(stdout);
    } else {
        run_say(job, "rank %d (pid %ld) %s%s", rank, (long)r->pid, what,
                job->nalive > 0 ? "; stopping the other ranks" : "");
    }
    stop_job(job, code);
}

/* Reaps every rank that has exited. Each is first only looked at (WNOWAIT):
 * while it is a zombie its pid, and with it its process group id, cannot be
 * reused, so what it left behind in its group can be killed safely. */
static void reap_ranks(struct run_job *job)
{
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
            si.si_pid == 0)
            return;
        pid_t pid = si.si_pid;
        kill(-pid, SIGKILL);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        for (int i = 0; i < job->nranks; i++) {
            if (job->ranks[i].alive && job->ranks[i].pid == pid) {
                rank_exited(job, i, status);
                break;
            }
        }
    }
}

static void on_stop_signal(struct run_job *job, int sig)
{
    char msg[160];
    if (job->phase == RUN_RUNNING) {
        snprintf(msg, sizeof msg,
                 "received %s; sending SIGTERM to all ranks%s",
                 signal_name(sig),
                 sig == SIGINT ? " (Ctrl+C again to kill them)" : "");
        say(job, msg);
        stop_job(job, 128 + sig);
    } else if (job->phase == RUN_STOPPING) {
        snprintf(msg, sizeof msg, "received %s again; sending SIGKILL",
                 signal_name(sig));
        say(job, msg);
        kill_job(job);
    }
}

static void read_signals(struct run_job *job)
{
    struct signalfd_siginfo si;
    while (read(job->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            reap_ranks(job);
        else
            on_stop_signal(job, (int)si.ssi_signo);
    }
}

/* Acts on a deadline that has passed. */
static void check_deadlines(struct run_job *job, double start, double now)
{
    char list[512], msg[640];
    if (job->phase == RUN_RUNNING && job->timeout_s > 0 &&
        now >= start + job->timeout_s) {
        list_alive(job, list, sizeof list);
        snprintf(msg, sizeof msg,
                 "timeout of %g s reached; ranks still running: %s; "
                 "stopping them", job->timeout_s, list);
        say(job, msg);
        stop_job(job, RUN_EXIT_TIMEOUT);
    } else if (job->phase == RUN_STOPPING && now >= job->kill_at) {
        list_alive(job, list, sizeof list);
        snprintf(msg, sizeof msg,
                 "%s %s still running %g s after SIGTERM; sending SIGKILL",
                 job->ranks[0].is_agent ? "hosts" : "ranks", list,
                 job->grace_s);
        say(job, msg);
        kill_job(job);
    }
}

/* Milliseconds until the next deadline, -1 for none. */
static int poll_timeout(const struct run_job *job, double start,
                        double drain_until, double now)
{
    double next = INFINITY;
    if (job->nalive == 0)
        next = drain_until;
    else if (job->phase == RUN_RUNNING && job->timeout_s > 0)
        next = start + job->timeout_s;
    else if (job->phase == RUN_STOPPING)
        next = job->kill_at;
    if (isinf(next))
        return -1;
    double ms = (next - now) * 1000.0;
    if (ms <= 0)
        return 0;
    /* Round up, so that the deadline has passed when poll() returns. */
    return ms > 1e9 ? 1000000000 : (int)ms + 1;
}

/* A failed write to our own stdout or stderr (a closed pipe, a full disk)
 * ends the job: the ranks' output would be lost from then on. */
static void output_failed(struct run_job *job, FILE **sink)
{
    int e = errno;
    *sink = NULL;
    if (job->phase == RUN_RUNNING) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot write the ranks' output: %s; "
                 "stopping the ranks", strerror(e));
        say(job, msg);
    }
    stop_job(job, e == EPIPE ? 128 + SIGPIPE : 1);
}

/* An agent reads the launcher's orders: "term" stops the ranks in order,
 * "kill" (or the end of the input: the launcher or the connection is gone)
 * kills them. */
static void read_orders(struct run_job *job)
{
    char line[64];
    ssize_t n = run_read_line(job->ctl_in, line, sizeof line);
    if (n > 0 && strcmp(line, "term") == 0) {
        stop_job(job, 128 + SIGTERM);
        return;
    }
    if (n > 0 && strcmp(line, "kill") != 0)
        return;
    if (n <= 0)
        job->ctl_in = -1;
    if (job->exit_code < 0)
        job->exit_code = 128 + SIGKILL;
    if (job->phase != RUN_KILLING)
        kill_job(job);
}

/* Fills fds with the signalfd, the order channel and every open output
 * pipe; streams[k] is the stream of fds[k] (NULL for the signalfd and the
 * orders), rank_idx[k] its rank (-1 for the orders). */
static nfds_t gather_fds(struct run_job *job, struct pollfd *fds,
                         struct run_stream **streams, int *rank_idx)
{
    nfds_t n = 0;
    fds[n] = (struct pollfd){.fd = job->sigfd, .events = POLLIN};
    rank_idx[n] = 0;
    streams[n++] = NULL;
    if (job->ctl_in >= 0) {
        fds[n] = (struct pollfd){.fd = job->ctl_in, .events = POLLIN};
        rank_idx[n] = -1;
        streams[n++] = NULL;
    }
    for (int i = 0; i < job->nranks; i++) {
        struct run_stream *two[2] = {&job->ranks[i].out, &job->ranks[i].err};
        for (int k = 0; k < 2; k++) {
            if (two[k]->fd < 0)
                continue;
            fds[n] = (struct pollfd){.fd = two[k]->fd, .events = POLLIN};
            rank_idx[n] = i;
            streams[n++] = two[k];
        }
    }
    return n;
}

static int streams_open(const struct run_job *job)
{
    for (int i = 0; i < job->nranks; i++)
        if (job->ranks[i].out.fd >= 0 || job->ranks[i].err.fd >= 0)
            return 1;
    return 0;
}

int run_job_supervise(struct run_job *job)
{
    size_t max = 2 + 2 * (size_t)job->nranks;
    struct pollfd *fds = calloc(max, sizeof *fds);
    struct run_stream **streams = calloc(max, sizeof *streams);
    int *rank_idx = calloc(max, sizeof *rank_idx);
    if (fds == NULL || streams == NULL || rank_idx == NULL) {
        say(job, "out of memory; stopping the ranks");
        free(fds);
        free(streams);
        free(rank_idx);
        run_job_cleanup(job);
        return 1;
    }
    double start = now_s(), drain_until = INFINITY;
    while (job->nalive > 0 || streams_open(job)) {
        double now = now_s();
        if (job->nalive == 0 && isinf(drain_until))
            drain_until = now + DRAIN_S;
        if (job->nalive == 0 && now >= drain_until)
            break;
        check_deadlines(job, start, now);
        nfds_t n = gather_fds(job, fds, streams, rank_idx);
        int rc = poll(fds, n, poll_timeout(job, start, drain_until, now));
        if (rc < 0 && errno != EINTR) {
            say(job, "poll failed; killing the ranks");
            if (job->exit_code < 0)
                job->exit_code = 1;
            break;
        }
        for (nfds_t k = 0; rc > 0 && k < n; k++) {
            if (fds[k].revents == 0)
                continue;
            if (streams[k] == NULL) {
                if (rank_idx[k] < 0)
                    read_orders(job);
                else
                    read_signals(job);
                continue;
            }
            struct run_rank *r = &job->ranks[rank_idx[k]];
            FILE **sink = streams[k] == &r->out ? &job->out_sink
                                                : &job->err_sink;
            FILE *to = *sink;
            /* Other ranks' stdout is drained so that they never block. */
            if (streams[k] == &r->out && !r->show_out)
                to = NULL;
            if (run_relay_read(streams[k], r->prefix, to) != 0)
                output_failed(job, sink);
        }
    }
    free(fds);
    free(streams);
    free(rank_idx);
    run_job_cleanup(job);
    if (job->ndied > 0 && job->exit_code < 0)
        run_say(job, "--elastic: %d of %d ranks died, the other %d "
                "finished", job->ndied, job->nranks,
                job->nranks - job->ndied);
    return job->exit_code < 0 ? 0 : job->exit_code;
}

void run_job_cleanup(struct run_job *job)
{
    signal_ranks(job, SIGKILL);
    for (int i = 0; i < job->nranks; i++) {
        struct run_rank *r = &job->ranks[i];
        if (r->in_w >= 0)
            close(r->in_w);
        r->in_w = -1;
        if (r->alive) {
            int status;
            while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {
            }
            r->alive = 0;
            job->nalive--;
        }
        FILE *out = r->show_out ? job->out_sink : NULL;
        FILE *err = job->err_sink;
        if (run_relay_close(&r->out, r->prefix, out) != 0)
            job->out_sink = NULL;
        if (run_relay_close(&r->err, r->prefix, err) != 0)
            job->err_sink = NULL;
    }
}
