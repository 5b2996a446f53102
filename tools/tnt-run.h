/*
 * Shared declarations of tnt-run, the local launcher. tnt-run.c reads the
 * command line and prepares the job (program path, per-rank environments,
 * signal mask); tnt-run-job.c starts the ranks and supervises them until the
 * last one is gone; tnt-run-relay.c turns each rank's output pipes into
 * whole, prefixed lines. The names carry a run_ prefix, as a transport's
 * names carry its own, because none of this is part of the library.
 */
#ifndef TNT_RUN_H
#define TNT_RUN_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* The largest job: two pipes per rank must fit under the usual limit of
 * 1024 open files, and one host rarely has more cores than this. */
#define RUN_MAX_RANKS 256

/* How long ranks get between SIGTERM and SIGKILL. */
#define RUN_GRACE_S 3.0

/* Exit codes of the launcher itself (a failed rank passes on its own). */
#define RUN_EXIT_USAGE 2
#define RUN_EXIT_TIMEOUT 124
#define RUN_EXIT_NOEXEC 127

/*
 * One output stream of one rank. Bytes are kept until a newline completes a
 * line, so that a line is written out whole and never mixed with another
 * rank's. fd is -1 once the stream reached end of file.
 */
struct run_stream {
    int fd;
    char *data;
    size_t len;
    size_t cap;
};

struct run_rank {
    pid_t pid;   /* 0 before start; also the id of its process group */
    int alive;   /* started and not reaped yet */
    int status;  /* wait status, valid once reaped */
    char prefix[16];
    struct run_stream out;
    struct run_stream err;
};

enum run_phase {
    RUN_RUNNING,  /* no stop requested */
    RUN_STOPPING, /* SIGTERM sent, SIGKILL due at kill_at */
    RUN_KILLING,  /* SIGKILL sent, only reaping left */
};

struct run_job {
    int nranks;
    struct run_rank *ranks;
    char *path;             /* resolved program to execve() */
    char **argv;            /* its argument vector, argv[0] as typed */
    char ***envs;           /* one environment per rank */
    double timeout_s;       /* 0: no timeout */
    sigset_t child_mask;    /* signal mask the ranks start with */
    pid_t launcher_pid;
    int devnull;            /* standard input of every rank */
    int sigfd;              /* signalfd of SIGINT, SIGTERM, SIGHUP, SIGCHLD */

    enum run_phase phase;
    double kill_at;         /* monotonic time of the SIGKILL (RUN_STOPPING) */
    int exit_code;          /* -1 until the first cause of a stop decides it */
    int nalive;             /* ranks started and not reaped yet */
    FILE *out_sink;         /* NULL once writing there failed */
    FILE *err_sink;
};

/* Starts every rank. Returns 0, or an exit code after having printed why and
 * stopped any rank already started. */
int run_job_start(struct run_job *job);

/* Relays output and handles signals, rank exits and the deadlines until
 * every rank is reaped. Returns the launcher's exit code. */
int run_job_supervise(struct run_job *job);

/* Kills and reaps whatever is still running and closes the pipes. */
void run_job_cleanup(struct run_job *job);

/* Reads once from s->fd (which poll() reported ready) and writes the lines it
 * completes to sink, each behind prefix; sink NULL discards them. At end of
 * file it writes a last unterminated line with a newline added and closes
 * the stream. Returns 0, or -1 with errno set when writing to sink failed. */
int run_relay_read(struct run_stream *s, const char *prefix, FILE *sink);

/* Writes out a pending partial line (newline added) and closes the stream;
 * for streams still open when the job is over. Same result as above. */
int run_relay_close(struct run_stream *s, const char *prefix, FILE *sink);

#endif
