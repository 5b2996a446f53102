/*
 * Shared declarations of tnt-run, the launcher. tnt-run.c dispatches on the
 * mode (local job, several hosts, agent, cleanup); tnt-run-opts.c reads the
 * command line; tnt-run-spec.c turns one host's share of the job into
 * processes to start (program path, per-rank environments, pinning);
 * tnt-run-job.c starts processes and supervises them until the last one is
 * gone; tnt-run-relay.c turns their output pipes into whole, prefixed
 * lines; tnt-run-remote.c starts one agent per host of a hostfile and
 * tnt-run-agent.c is that agent (tnt-run itself, in another mode). The
 * names carry a run_ prefix, as a transport's names carry its own, because
 * none of this is part of the library.
 */
#ifndef TNT_RUN_H
#define TNT_RUN_H

#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* The largest job: two pipes per rank must fit under the usual limit of
 * 1024 open files, and one host rarely has more cores than this. */
#define RUN_MAX_RANKS 256
/* The largest job over a hostfile: RUN_MAX_RANKS hosts (the hostfile's
 * limit) of RUN_MAX_RANKS ranks each. */
#define RUN_MAX_JOB_RANKS (RUN_MAX_RANKS * RUN_MAX_RANKS)

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
    /* Lines starting with RUN_CTL_PREFIX are handed to on_ctl instead of
     * being relayed, when on_ctl is set (an agent's stdout). */
    void (*on_ctl)(void *arg, const char *line);
    void *ctl_arg;
    char last[256]; /* the last line relayed, for error messages */
};

/* The start of an agent's messages to the launcher on its stdout. Lines of
 * ranks always start with "[", so they can never be taken for one. */
#define RUN_CTL_PREFIX "tnt-run-agent: "

struct run_rank {
    pid_t pid;   /* 0 before start; also the id of its process group */
    char *path;  /* NULL: the job's path and argv */
    char **argv;
    int in_r;    /* read end of its stdin pipe, -1: /dev/null */
    int in_w;    /* write end, kept by the launcher (agents only) */
    int is_agent;        /* a remote host's agent, not a rank */
    const char *host;    /* agents: the host it stands for */
    int show_out;        /* relay its stdout (otherwise drained) */
    int agent_ok;        /* agents: said it is ready */
    int agent_failed;    /* agents: reported a failed rank */
    int cpu_valid;       /* pin to cpus before exec */
    cpu_set_t cpus;
    int mem_node;        /* bind memory to this NUMA node, -1: no */
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

    double grace_s;         /* SIGTERM (or "term") to SIGKILL */
    const char *host;       /* agent mode: this host, for messages */
    int ctl_in;             /* agent mode: the launcher's orders, or -1 */
    int ctl_out;            /* agent mode: report failures on stdout */
    char root_addr[80];     /* launcher: rank 0's address, from host 0 */
    int nready;             /* launcher: agents that said they are ready */
    /* --elastic: a rank killed by a signal does not stop the others. */
    int elastic;
    int ndied;              /* ranks that died so */
    double started;         /* monotonic time the ranks were started */
};

/* ---- tnt-run-job.c --------------------------------------------------- */

/* Sets up a job of nprocs processes (signals, /dev/null); -1 after having
 * printed why. run_job_free releases it after the supervision. */
int run_job_init(struct run_job *job, int nprocs);
void run_job_free(struct run_job *job);

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

/* Writes "tnt-run: [host H: ]text" to the job's stderr sink. */
void run_say(struct run_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The job's orderly stop (first cause decides the exit code) and kill. */
void run_stop_job(struct run_job *job, int exit_code);
void run_kill_job(struct run_job *job);

/* ---- one host's share of a job (tnt-run-spec.c) ---------------------- */

/* What runs on one host: handed from the launcher to an agent over its
 * standard input, or used directly for a local job. */
struct run_spec {
    char *host;            /* NULL: this host, no agent */
    char *cwd;             /* agents change there first; NULL: stay */
    int size, first, nlocal;
    int argc;
    char **argv;           /* argv[0] is looked up in PATH */
    int nextra;
    char **extra;          /* "VAR=VALUE" set on every rank, in order */
    char key[80];
    char root[80];         /* TNT_ROOT_ADDR; agents: filled at "go" */
    int root_loopback;     /* host 0 only: pick 127.0.0.1 */
    int pin_socket, pin_mem, bind_core, out_all, info;
    double timeout_s;
    int elastic;           /* local jobs: --elastic */
};

/* The job variables tnt-run sets; -x may not set them. */
int run_is_job_var(const char *entry);
/* Finds name as execvp() would. Returns a malloc'd path, or NULL with
 * errno set. */
char *run_resolve_program(const char *name);
/* A fresh random job key, as 64 hex digits. */
int run_make_job_key(char *hex, size_t size);
/* Picks a free TCP port on ip. Returns it, or -1 with errno set. */
int run_free_port(const char *ip);
/* Builds rank's environment: base less the job variables, then extra in
 * order (a later VAR replaces an earlier one), then the job variables. */
char **run_rank_env(char **base, const struct run_spec *sp, int local_rank);
/* Runs the spec's ranks on this host until they are gone; ctl_in >= 0 is
 * an agent's order channel. Returns the exit code. */
int run_local(const struct run_spec *sp, int ctl_in, int ctl_out);

/* ---- pinning (tnt-run-pin.c) ----------------------------------------- */

/* Fills cpus/mem_node of the job's ranks as the spec asks. Returns 0, or
 * -1 after having printed why. */
int run_pin_plan(struct run_job *job, const struct run_spec *sp);
/* In the child: applies the plan. Returns 0, or -1 with errno set. */
int run_pin_apply(const struct run_rank *r);

/* ---- several hosts --------------------------------------------------- */

/* Writes sp to fd in the agent's line format, then "end". */
int run_spec_send(int fd, const struct run_spec *sp);
/* Reads a spec from fd up to "end". Returns 0, or -1 with err set. */
int run_spec_read(int fd, struct run_spec *sp, char *err, size_t errlen);
/* Reads one line from fd (unbuffered, so nothing after it is consumed).
 * Returns its length, 0 at end of file, -1 on error. */
ssize_t run_read_line(int fd, char *buf, size_t size);
void run_spec_free(struct run_spec *sp);
/* tnt-run --agent: the remote side. Returns the exit code. */
int run_agent_main(void);


/* ---- the command line (tnt-run-opts.c) ------------------------------- */

struct run_opts {
    long nranks;           /* 0: not given */
    long per_node;         /* 0: not given */
    const char *hostfile;
    double timeout_s;
    int nextra;
    char **extra;          /* option variables, then -x, in order */
    int info;              /* --log-level INFO or DEBUG */
    int out_all, pin_socket, pin_mem, bind_core;
    const char *interpreter; /* NULL or "": run the program directly */
    int dry_run, cleanup, force;
    int no_gpu;            /* --no-gpu given: said at INFO, else ignored */
    const char *rsh;
    const char *timeline;  /* --timeline PATH: TNT_TIMELINE, merged */
    int elastic;           /* --elastic */
    long max_restarts;     /* --max-restarts N */
    int prog;              /* index of the program in argv */
};

/* Parses argv; exits with RUN_EXIT_USAGE and a message on bad input. */
void run_parse_options(int argc, char **argv, struct run_opts *o);
__attribute__((format(printf, 1, 2))) _Noreturn void
run_usage_error(const char *fmt, ...);

/* ---- the timeline (tnt-run-timeline.c) ------------------------------ */

/* Merges PREFIX.R.json of ranks 0..nranks-1 found here into PREFIX.json
 * and says so on stdout. Returns 0, or -1 after having said why. */
int run_merge_timeline(const char *prefix, int nranks);

/* ---- hostfiles (tnt-run-hostfile.c) ---------------------------------- */

/* Reads the host names of path. Returns their number (>= 1) and a malloc'd
 * array, or -1 after having printed why (duplicates name both lines). */
int run_read_hostfile(const char *path, char ***hosts);

/* ---- tnt-run-remote.c and tnt-run-cleanup.c -------------------------- */

/* Runs the job over the hosts of the hostfile. Returns the exit code. */
int run_remote(const struct run_opts *o, const struct run_spec *base);
/* Prints what --dry-run shows for one host; via is its agent's argv, NULL
 * for this host without an agent. */
void run_print_plan(const struct run_spec *sp, char **via);
/* --cleanup on this host (host NULL) or through agents on the hosts of the
 * hostfile. Returns 0 when nothing is left running. */
int run_cleanup(const struct run_opts *o, const char *prog);
int run_cleanup_here(const char *host, const char *prog, int force);
/* The argv that reaches host: the --rsh words, the host, then tail. */
char **run_agent_argv(const char *rsh, const char *host, char **tail);

#endif
