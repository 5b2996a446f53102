/*
 * tnt-run, the launcher of libtntcomm: starts the ranks of one program on
 * this host (-n N) or on the hosts of a hostfile, and gives each the
 * environment that tnt_comm_init_from_env() reads (rank, size, root
 * address, job key). This file picks the mode and builds the description
 * of the job that every mode shares; see tnt-run.h for the other files.
 * "tnt-run --agent" and "tnt-run --agent-cleanup" are the remote sides of
 * a multi-host job and of --cleanup; they read their orders from stdin.
 */
#include "tnt-run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Makes sure descriptors 0-2 are open, so that no pipe we create lands on
 * them and gets written by accident. */
static void open_std_fds(void)
{
    int fd;
    do {
        fd = open("/dev/null", O_RDWR);
    } while (fd >= 0 && fd <= STDERR_FILENO);
    if (fd > STDERR_FILENO)
        close(fd);
}

/* The rank command: the interpreter's words (if any), then the program and
 * its arguments. */
static char **rank_argv(const struct run_opts *o, int argc, char **argv,
                        int *n)
{
    const char *interp = o->interpreter ? o->interpreter : "";
    size_t nprog = (size_t)(argc - o->prog);
    char **v = calloc(strlen(interp) / 2 + 2 + nprog, sizeof(*v));
    char *copy = strdup(interp);
    *n = 0;
    if (v == NULL || copy == NULL) {
        free(v);
        free(copy);
        return NULL;
    }
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w != NULL;
         w = strtok_r(NULL, " \t\n", &save))
        v[(*n)++] = strdup(w);
    free(copy);
    for (size_t k = 0; k < nprog; k++)
        v[(*n)++] = strdup(argv[o->prog + (int)k]);
    for (int k = 0; k < *n; k++)
        if (v[k] == NULL)
            return NULL;
    return v;
}

/* The --agent-cleanup side: "prog NAME" and "force 0|1" on stdin. */
static int agent_cleanup(void)
{
    char prog[PATH_MAX + 8], force[16], host[256];
    if (run_read_line(STDIN_FILENO, prog, sizeof prog) <= 0 ||
        run_read_line(STDIN_FILENO, force, sizeof force) <= 0 ||
        strncmp(prog, "prog ", 5) != 0 || strncmp(force, "force ", 6) != 0) {
        fprintf(stderr, "tnt-run --agent-cleanup: malformed request\n");
        return RUN_EXIT_USAGE;
    }
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "?");
    return run_cleanup_here(host, prog + 5, atoi(force + 6));
}

/* A job with the timeline on: its ranks' files become one (whatever
 * the job's outcome: a failed job's trace is the one to read). */
static void merge_timeline(const struct run_opts *o, int nranks)
{
    const char *prefix = o->timeline ? o->timeline : getenv("TNT_TIMELINE");
    if (prefix && *prefix && strlen(prefix) <= 4000)
        run_merge_timeline(prefix, nranks);
}

/* A local job, started again after a failure up to --max-restarts
 * times, as torchrun does: each start has a fresh port and key, and
 * TNT_RESTART (0 on the first) tells the program which start it is, so
 * that it resumes from its own checkpoint. A stop by the user (Ctrl+C,
 * SIGTERM: exit 128+N of those) or a program that cannot be executed is
 * not restarted. */
static int run_restarting(const struct run_opts *o, struct run_spec *sp)
{
    int rc = 1;
    for (long k = 0; k <= o->max_restarts; k++) {
        char count[24];
        snprintf(count, sizeof count, "%ld", k);
        setenv("TNT_RESTART", count, 1);
        int port = run_free_port("127.0.0.1");
        if (port < 0) {
            fprintf(stderr, "tnt-run: cannot find a free TCP port on "
                    "127.0.0.1: %s\n", strerror(errno));
            return 1;
        }
        snprintf(sp->root, sizeof sp->root, "127.0.0.1:%d", port);
        if (k > 0 && run_make_job_key(sp->key, sizeof sp->key) != 0)
            return 1;
        rc = run_local(sp, -1, 0);
        if (rc == 0 || rc == RUN_EXIT_NOEXEC || rc == RUN_EXIT_USAGE ||
            rc == 128 + SIGINT || rc == 128 + SIGTERM ||
            rc == 128 + SIGHUP || k == o->max_restarts)
            break;
        fprintf(stderr, "tnt-run: the job failed (exit %d); restart %ld "
                "of %ld\n", rc, k + 1, o->max_restarts);
    }
    return rc;
}

int main(int argc, char **argv)
{
    open_std_fds();
    if (argc == 2 && strcmp(argv[1], "--agent") == 0)
        return run_agent_main();
    if (argc == 2 && strcmp(argv[1], "--agent-cleanup") == 0)
        return agent_cleanup();
    struct run_opts o;
    run_parse_options(argc, argv, &o);
    if (o.cleanup)
        return run_cleanup(&o, argv[o.prog]);

    struct run_spec sp;
    char cwd[PATH_MAX];
    memset(&sp, 0, sizeof sp);
    sp.argv = rank_argv(&o, argc, argv, &sp.argc);
    sp.extra = o.extra;
    sp.nextra = o.nextra;
    sp.pin_socket = o.pin_socket;
    sp.pin_mem = o.pin_mem;
    sp.bind_core = o.bind_core;
    sp.out_all = o.out_all;
    sp.info = o.info;
    sp.cwd = getcwd(cwd, sizeof cwd);
    if (sp.argv == NULL) {
        fprintf(stderr, "tnt-run: out of memory\n");
        return 1;
    }
    if (run_make_job_key(sp.key, sizeof sp.key) != 0) {
        fprintf(stderr, "tnt-run: cannot make a job key with getrandom: "
                "%s\n", strerror(errno));
        return 1;
    }
    int rc;
    if (o.hostfile != NULL) {
        rc = run_remote(&o, &sp);
    } else {
        sp.size = sp.nlocal = (int)o.nranks;
        sp.timeout_s = o.timeout_s;
        if (o.dry_run) {
            printf("tnt-run: dry run of %d ranks on this host; nothing is "
                   "started\n", sp.size);
            snprintf(sp.root, sizeof sp.root, "127.0.0.1:(a free port)");
            run_print_plan(&sp, NULL);
            rc = 0;
        } else {
            sp.elastic = o.elastic;
            rc = run_restarting(&o, &sp);
            merge_timeline(&o, sp.size);
        }
    }
    for (int k = 0; k < sp.argc; k++)
        free(sp.argv[k]);
    free(sp.argv);
    for (int k = 0; k < o.nextra; k++)
        free(o.extra[k]);
    free(o.extra);
    return rc;
}
