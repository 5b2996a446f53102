/*
 * One host's share of a job, made into processes: the program found in
 * PATH, one environment per rank (what the host has, less any job variables,
 * then the options' and -x variables in order, then the job variables), the
 * pinning plan, and the signal set-up; then tnt-run-job.c starts and
 * supervises them. Used directly for a local job (-n N) and by the agent on
 * each host of a hostfile.
 */
#include "tnt-run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const job_vars[] = {
    "TNT_RANK", "TNT_SIZE", "TNT_LOCAL_RANK", "TNT_LOCAL_SIZE",
    "TNT_ROOT_ADDR", "TNT_JOB_KEY",
};
#define NJOB_VARS (sizeof job_vars / sizeof job_vars[0])
#define VAR_SIZE 160

int run_is_job_var(const char *entry)
{
    for (size_t k = 0; k < NJOB_VARS; k++) {
        size_t n = strlen(job_vars[k]);
        if (strncmp(entry, job_vars[k], n) == 0 && entry[n] == '=')
            return 1;
    }
    return 0;
}

static int check_executable(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return -1;
    }
    return access(path, X_OK);
}

/* Checking here, before any fork, turns a typo into one clear error
 * instead of N failed ranks. */
char *run_resolve_program(const char *name)
{
    if (name[0] == '\0') {
        errno = ENOENT;
        return NULL;
    }
    if (strchr(name, '/') != NULL)
        return check_executable(name) == 0 ? strdup(name) : NULL;
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin";
    int found_unusable = 0;
    size_t nlen = strlen(name);
    for (const char *p = path;; p++) {
        const char *colon = strchrnul(p, ':');
        size_t dlen = (size_t)(colon - p);
        char *cand = malloc(dlen + nlen + 3);
        if (cand == NULL)
            return NULL;
        /* An empty PATH entry means the current directory. */
        snprintf(cand, dlen + nlen + 3, "%.*s/%s", (int)(dlen ? dlen : 1),
                 dlen ? p : ".", name);
        if (check_executable(cand) == 0)
            return cand;
        if (errno == EACCES || errno == EISDIR)
            found_unusable = 1;
        free(cand);
        if (*colon == '\0')
            break;
        p = colon;
    }
    errno = found_unusable ? EACCES : ENOENT;
    return NULL;
}

int run_make_job_key(char *hex, size_t size)
{
    unsigned char key[32];
    size_t got = 0;
    if (size < 2 * sizeof(key) + 1) {
        errno = EINVAL;
        return -1;
    }
    while (got < sizeof key) {
        ssize_t n = getrandom(key + got, sizeof key - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof key; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    return 0;
}

/* Another process could take the port before rank 0 binds it; the window
 * is short and the library then fails with a clear error rather than
 * joining a stranger. */
int run_free_port(const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        len = sizeof(*a6);
    } else {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&ss, len) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        port = ntohs(ss.ss_family == AF_INET ? a4->sin_port
                                             : a6->sin6_port);
    int e = errno;
    close(fd);
    errno = e;
    return port;
}

static int same_name(const char *a, const char *b)
{
    size_t n = strcspn(a, "=");
    return strncmp(a, b, n) == 0 && b[n] == '=';
}

char **run_rank_env(char **base, const struct run_spec *sp, int local_rank)
{
    size_t nbase = 0;
    while (base[nbase] != NULL)
        nbase++;
    size_t nptr = nbase + (size_t)sp->nextra + NJOB_VARS + 1;
    char **env = malloc(nptr * sizeof *env + NJOB_VARS * VAR_SIZE);
    if (env == NULL)
        return NULL;
    char *vars = (char *)(env + nptr);
    size_t n = 0;
    for (size_t k = 0; k < nbase; k++)
        if (!run_is_job_var(base[k]))
            env[n++] = base[k];
    /* A later setting of a name replaces an earlier one (inherited or
     * given) and goes last, as a sequence of exports would leave it: no
     * name appears twice, and the given variables come in the given
     * order. */
    for (int k = 0; k < sp->nextra; k++) {
        size_t j = 0;
        while (j < n && !same_name(sp->extra[k], env[j]))
            j++;
        if (j < n) {
            memmove(env + j, env + j + 1, (n - j - 1) * sizeof(*env));
            n--;
        }
        env[n++] = sp->extra[k];
    }
    char val[NJOB_VARS][96];
    snprintf(val[0], sizeof val[0], "%d", sp->first + local_rank);
    snprintf(val[1], sizeof val[1], "%d", sp->size);
    snprintf(val[2], sizeof val[2], "%d", local_rank);
    snprintf(val[3], sizeof val[3], "%d", sp->nlocal);
    snprintf(val[4], sizeof val[4], "%s", sp->root);
    snprintf(val[5], sizeof val[5], "%s", sp->key);
    for (size_t k = 0; k < NJOB_VARS; k++) {
        char *v = vars + k * VAR_SIZE;
        snprintf(v, VAR_SIZE, "%s=%.100s", job_vars[k], val[k]);
        env[n++] = v;
    }
    env[n] = NULL;
    return env;
}

/* Blocks the signals the supervisor reads through a signalfd. A signal that
 * was ignored when we started (SIGINT of a background job, SIGHUP under
 * nohup) stays ignored, as the shell meant, for us and for the ranks. */
static int setup_signals(struct run_job *job)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, &job->child_mask) != 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    job->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return job->sigfd < 0 ? -1 : 0;
}

void run_job_free(struct run_job *job)
{
    if (job->envs != NULL)
        for (int i = 0; i < job->nranks; i++)
            free(job->envs[i]);
    free(job->envs);
    free(job->ranks);
    if (job->sigfd >= 0)
        close(job->sigfd);
    if (job->devnull >= 0)
        close(job->devnull);
}

int run_job_init(struct run_job *job, int nprocs)
{
    memset(job, 0, sizeof(*job));
    job->nranks = nprocs;
    job->launcher_pid = getpid();
    job->devnull = -1;
    job->sigfd = -1;
    job->ctl_in = -1;
    job->phase = RUN_RUNNING;
    job->exit_code = -1;
    job->out_sink = stdout;
    job->err_sink = stderr;
    job->grace_s = RUN_GRACE_S;
    job->ranks = calloc((size_t)nprocs, sizeof *job->ranks);
    job->envs = calloc((size_t)nprocs, sizeof *job->envs);
    if (job->ranks == NULL || job->envs == NULL) {
        fprintf(stderr, "tnt-run: out of memory\n");
        return -1;
    }
    for (int i = 0; i < nprocs; i++) {
        job->ranks[i].in_r = job->ranks[i].in_w = -1;
        job->ranks[i].mem_node = -1;
        job->ranks[i].out.fd = job->ranks[i].err.fd = -1;
    }
    job->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (job->devnull < 0 || setup_signals(job) != 0) {
        fprintf(stderr, "tnt-run: cannot set up: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int run_local(const struct run_spec *sp, int ctl_in, int ctl_out)
{
    char *path = run_resolve_program(sp->argv[0]);
    if (path == NULL) {
        fprintf(stderr, "tnt-run: cannot execute '%s'%s%s: %s\n",
                sp->argv[0], sp->host ? " on host " : "",
                sp->host ? sp->host : "", strerror(errno));
        return RUN_EXIT_NOEXEC;
    }
    struct run_job job;
    int rc = 1;
    if (run_job_init(&job, sp->nlocal) != 0)
        goto out;
    job.path = path;
    job.argv = sp->argv;
    job.timeout_s = sp->timeout_s;
    job.elastic = sp->elastic;
    job.host = sp->host;
    job.ctl_in = ctl_in;
    job.ctl_out = ctl_out;
    extern char **environ;
    for (int i = 0; i < sp->nlocal; i++) {
        struct run_rank *r = &job.ranks[i];
        snprintf(r->prefix, sizeof r->prefix, "[%d] ", sp->first + i);
        r->show_out = sp->out_all || sp->first + i == 0;
        job.envs[i] = run_rank_env(environ, sp, i);
        if (job.envs[i] == NULL) {
            fprintf(stderr, "tnt-run: out of memory\n");
            goto out;
        }
    }
    if (run_pin_plan(&job, sp) != 0)
        goto out;
    /* Whole lines are written by the relay and flushed after each batch. */
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    setvbuf(stderr, NULL, _IOFBF, 1 << 16);
    rc = run_job_start(&job);
    if (rc == 0)
        rc = run_job_supervise(&job);
out:
    fflush(stdout);
    fflush(stderr);
    run_job_free(&job);
    free(path);
    return rc;
}
