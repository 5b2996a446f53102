/*
 * A job over the hosts of a hostfile. Ranks are assigned host by host,
 * --n-per-node on each. For every host the launcher starts one agent,
 * "RSH HOST tnt-run --agent" (the host "localhost" without RSH), as a
 * supervised process of its own, and writes that host's share of the job
 * to the agent's stdin. When every agent has answered "ok" (the one of
 * rank 0's host with rank 0's address), each is told "go ROOTADDR". From
 * then on the agents' output is relayed as it comes (the lines carry their
 * rank already), and the first failure anywhere stops the whole job. Also
 * prints the plan for --dry-run, for local jobs as well.
 */
#include "tnt-run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Splits s at blanks into a NULL-terminated vector with room for extra
 * more entries; *n gets the number of words. One allocation holds the
 * vector and the words, so that free() of the vector releases both. */
static char **split_words(const char *s, int extra, int *n)
{
    size_t nptr = strlen(s) / 2 + 2 + (size_t)extra;
    char **v = malloc(nptr * sizeof(*v) + strlen(s) + 1);
    *n = 0;
    if (v == NULL)
        return NULL;
    char *copy = strcpy((char *)(v + nptr), s);
    for (char *save = NULL, *w = strtok_r(copy, " \t", &save); w != NULL;
         w = strtok_r(NULL, " \t", &save))
        v[(*n)++] = w;
    v[*n] = NULL;
    return v;
}

char **run_agent_argv(const char *rsh, const char *host, char **tail)
{
    int n = 0, ntail = 0;
    while (tail[ntail] != NULL)
        ntail++;
    int local = strcmp(host, "localhost") == 0;
    char **v = split_words(local ? "" : rsh, ntail + 2, &n);
    if (v == NULL)
        return NULL;
    if (!local)
        v[n++] = (char *)host;
    for (int k = 0; k < ntail; k++)
        v[n++] = tail[k];
    v[n] = NULL;
    return v;
}

/* Writes s to f, single-quoted for a shell when it needs it. */
static void put_quoted(FILE *f, const char *s)
{
    if (*s != '\0' && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
                             "OPQRSTUVWXYZ0123456789_-+=/.,:@%^") ==
                          strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

void run_print_plan(const struct run_spec *sp, char **via)
{
    printf("host %s", sp->host ? sp->host : "localhost");
    if (via == NULL) {
        printf(" (this host, no agent)");
    } else {
        printf(" via");
        for (int k = 0; via[k] != NULL; k++) {
            putchar(' ');
            put_quoted(stdout, via[k]);
        }
    }
    printf(": ranks %d to %d of %d\n", sp->first,
           sp->first + sp->nlocal - 1, sp->size);
    if (sp->pin_socket || sp->pin_mem || sp->bind_core)
        printf("  pinning:%s%s%s (from the host's topology at start)\n",
               sp->pin_socket ? " cpus to a socket" : "",
               sp->pin_mem ? " memory to its NUMA node" : "",
               sp->bind_core ? " each rank to one core" : "");
    for (int i = 0; i < sp->nlocal; i++) {
        printf("  rank %d:", sp->first + i);
        for (int k = 0; k < sp->nextra; k++) {
            putchar(' ');
            put_quoted(stdout, sp->extra[k]);
        }
        printf(" TNT_RANK=%d TNT_SIZE=%d TNT_LOCAL_RANK=%d "
               "TNT_LOCAL_SIZE=%d TNT_ROOT_ADDR=%s TNT_JOB_KEY=%s",
               sp->first + i, sp->size, i, sp->nlocal,
               sp->root[0] ? sp->root : "(chosen on rank 0's host at start)",
               "(a fresh random key)");
        for (int k = 0; k < sp->argc; k++) {
            putchar(' ');
            put_quoted(stdout, sp->argv[k]);
        }
        putchar('\n');
    }
}

struct agent_ctx {
    struct run_job *job;
    int idx;
};

static void send_go(struct run_job *job)
{
    char go[128];
    snprintf(go, sizeof go, "go %s\n", job->root_addr);
    for (int i = 0; i < job->nranks; i++) {
        struct run_rank *r = &job->ranks[i];
        if (r->alive && r->in_w >= 0 &&
            write(r->in_w, go, strlen(go)) != (ssize_t)strlen(go))
            run_say(job, "cannot tell host %s to start: %s", r->host,
                    strerror(errno));
    }
}

/* An agent's message: "ok [ROOTADDR]", "error CODE TEXT" (it cannot start
 * its ranks) or "failed CODE TEXT" (one of its ranks failed). */
static void on_agent_ctl(void *arg, const char *line)
{
    struct agent_ctx *c = arg;
    struct run_job *job = c->job;
    struct run_rank *r = &job->ranks[c->idx];
    int code = 0, off = 0;
    if (strncmp(line, "ok", 2) == 0 && !r->agent_ok) {
        r->agent_ok = 1;
        if (c->idx == 0)
            snprintf(job->root_addr, sizeof job->root_addr, "%s",
                     line[2] == ' ' ? line + 3 : "");
        if (++job->nready == job->nranks && job->phase == RUN_RUNNING)
            send_go(job);
        return;
    }
    int is_error = strncmp(line, "error ", 6) == 0;
    if ((is_error || strncmp(line, "failed ", 7) == 0) &&
        sscanf(line + (is_error ? 6 : 7), "%d %n", &code, &off) == 1 &&
        off > 0) {
        const char *text = line + (is_error ? 6 : 7) + off;
        r->agent_failed = 1;
        if (job->phase == RUN_RUNNING)
            run_say(job, "%s%s", text, is_error ? ""
                    : "; stopping the other ranks");
        run_stop_job(job, code > 0 ? code : 1);
        return;
    }
    run_say(job, "host %s: unexpected message from the agent: %s",
            r->host, line);
}

/* Fills the specs of the hosts in use. Returns how many. */
static int plan_hosts(const struct run_opts *o, char **hosts, int nhosts,
                      struct run_spec *specs, const struct run_spec *base)
{
    long k = o->per_node ? o->per_node : 1;
    long total = o->nranks ? o->nranks : nhosts * k;
    int nused = (int)((total + k - 1) / k);
    int all_local = 1;
    for (int h = 0; h < nused; h++)
        all_local &= strcmp(hosts[h], "localhost") == 0;
    for (int h = 0; h < nused; h++) {
        specs[h] = *base;
        specs[h].host = hosts[h];
        specs[h].size = (int)total;
        specs[h].first = (int)(h * k);
        specs[h].nlocal = (int)(total - h * k < k ? total - h * k : k);
        specs[h].root_loopback = all_local;
    }
    return nused;
}

int run_remote(const struct run_opts *o, const struct run_spec *base)
{
    char **hosts = NULL;
    int nhosts = run_read_hostfile(o->hostfile, &hosts);
    if (nhosts < 0)
        return RUN_EXIT_USAGE;
    long k = o->per_node ? o->per_node : 1;
    if (o->nranks > (long)nhosts * k) {
        fprintf(stderr, "tnt-run: -n %ld is more than the %d host(s) of %s "
                "times --n-per-node %ld\n", o->nranks, nhosts, o->hostfile,
                k);
        for (int h = 0; h < nhosts; h++)
            free(hosts[h]);
        free(hosts);
        return RUN_EXIT_USAGE;
    }
    struct run_spec *specs = calloc((size_t)nhosts, sizeof(*specs));
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (specs == NULL || sl <= 0) {
        fprintf(stderr, "tnt-run: cannot find my own executable: %s\n",
                strerror(errno));
        return 1;
    }
    self[sl] = '\0';
    char *tail[] = {self, "--agent", NULL};
    int nused = plan_hosts(o, hosts, nhosts, specs, base);
    struct run_job job;
    struct agent_ctx *ctx = calloc((size_t)nhosts, sizeof(*ctx));
    int rc = 1;
    if (o->dry_run) {
        printf("tnt-run: dry run of %d ranks on %d host(s); nothing is "
               "started\n", specs[0].size, nused);
        for (int h = 0; h < nused; h++) {
            char **via = run_agent_argv(o->rsh, hosts[h], tail);
            run_print_plan(&specs[h], via);
            free(via);
        }
        rc = 0;
        goto out;
    }
    if (ctx == NULL)
        goto out;
    if (run_job_init(&job, nused) != 0) {
        run_job_free(&job);
        goto out;
    }
    job.timeout_s = o->timeout_s;
    /* An agent stops its ranks within its own grace period; give it time
     * for that before killing the connection. */
    job.grace_s = RUN_GRACE_S + 2.0;
    extern char **environ;
    size_t nenv = 0;
    while (environ[nenv] != NULL)
        nenv++;
    int setup = 0; /* 0, or the exit code of a failed set-up */
    for (int h = 0; h < nused && setup == 0; h++) {
        struct run_rank *r = &job.ranks[h];
        int in[2];
        r->is_agent = 1;
        r->host = hosts[h];
        r->show_out = 1;
        r->argv = run_agent_argv(o->rsh, hosts[h], tail);
        job.envs[h] = malloc((nenv + 1) * sizeof(char *));
        if (r->argv == NULL || job.envs[h] == NULL ||
            pipe2(in, O_CLOEXEC) != 0) {
            fprintf(stderr, "tnt-run: cannot set up host %s: %s\n",
                    hosts[h], strerror(errno));
            setup = 1;
            break;
        }
        memcpy(job.envs[h], environ, (nenv + 1) * sizeof(char *));
        r->in_r = in[0];
        r->in_w = in[1];
        r->path = run_resolve_program(r->argv[0]);
        if (r->path == NULL) {
            fprintf(stderr, "tnt-run: cannot execute the --rsh command "
                    "'%s': %s\n", r->argv[0], strerror(errno));
            setup = RUN_EXIT_NOEXEC;
            break;
        }
        ctx[h] = (struct agent_ctx){&job, h};
        r->out.on_ctl = on_agent_ctl;
        r->out.ctl_arg = &ctx[h];
    }
    rc = setup;
    if (setup == 0) {
        setvbuf(stdout, NULL, _IOFBF, 1 << 16);
        setvbuf(stderr, NULL, _IOFBF, 1 << 16);
        rc = run_job_start(&job);
        for (int h = 0; rc == 0 && h < nused; h++)
            if (run_spec_send(job.ranks[h].in_w, &specs[h]) != 0)
                run_say(&job, "cannot send the job to host %s: %s",
                        hosts[h], strerror(errno));
        if (rc == 0)
            rc = run_job_supervise(&job);
    }
    for (int h = 0; h < nused; h++) {
        free(job.ranks[h].argv);
        free(job.ranks[h].path);
        if (job.ranks[h].in_r >= 0)
            close(job.ranks[h].in_r);
        if (job.ranks[h].in_w >= 0)
            close(job.ranks[h].in_w);
    }
    run_job_free(&job);
out:
    fflush(stdout);
    fflush(stderr);
    free(ctx);
    free(specs);
    for (int h = 0; h < nhosts; h++)
        free(hosts[h]);
    free(hosts);
    return rc;
}
