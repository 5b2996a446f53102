/*
 * tnt-run, the minimal local launcher of libtntcomm: starts N ranks of one
 * program on this host and gives each the environment that
 * tnt_comm_init_from_env() reads (rank, size, root address, job key). This
 * file reads the command line, finds the program, builds the environments
 * and sets up the signals; tnt-run-job.c starts and supervises the ranks and
 * tnt-run-relay.c relays their output. Multi-host jobs, hostfiles and
 * pinning are for a later launcher.
 */
#include "tnt-run.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOB_KEY_BYTES 32
#define MAX_TIMEOUT_S 1e7

struct options {
    long nranks;     /* 0: not given */
    double timeout_s;
    int prog;        /* index in argv of the program */
};

/* ---- command line ------------------------------------------------------ */

static void usage(FILE *f)
{
    fputs("Usage: tnt-run -n N [--timeout SECONDS] [--] PROGRAM [ARGS...]\n"
          "\n"
          "Start N ranks of PROGRAM on this host, as one libtntcomm job.\n"
          "\n"
          "  -n N, -nN, --np N, --nranks N\n"
          "                      number of ranks, 1 to 256 (required)\n"
          "  --timeout SECONDS   stop the job after SECONDS (exit 124)\n"
          "  -h, --help          print this help\n"
          "\n"
          "Each rank gets TNT_RANK, TNT_SIZE, TNT_LOCAL_RANK, TNT_LOCAL_SIZE,\n"
          "TNT_ROOT_ADDR and TNT_JOB_KEY; its output lines are prefixed with\n"
          "\"[RANK] \". If a rank fails, the others are stopped and tnt-run\n"
          "exits with that rank's status (128+N for signal N).\n"
          "Multi-host runs, hostfiles and CPU pinning options come later.\n",
          f);
}

__attribute__((format(printf, 1, 2))) static _Noreturn void
usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tnt-run: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'tnt-run --help' for more information.\n", stderr);
    exit(RUN_EXIT_USAGE);
}

/* Matches argv[*i] against a long option taking a value, as "--name=value"
 * or "--name value". Returns the value, or NULL if argv[*i] is not name. */
static const char *long_value(int argc, char **argv, int *i,
                              const char *name)
{
    size_t n = strlen(name);
    const char *arg = argv[*i];
    if (strncmp(arg, name, n) != 0)
        return NULL;
    if (arg[n] == '=')
        return arg + n + 1;
    if (arg[n] != '\0')
        return NULL;
    if (*i + 1 >= argc)
        usage_error("option '%s' needs a value", name);
    return argv[++*i];
}

static long parse_nranks(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v < 1 ||
        v > RUN_MAX_RANKS)
        usage_error("invalid number of ranks '%s': expected an integer "
                    "from 1 to 256", s);
    return v;
}

static double parse_timeout(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (((s[0] < '0' || s[0] > '9') && s[0] != '.') || *end != '\0' ||
        errno != 0 || !(v > 0) || v > MAX_TIMEOUT_S)
        usage_error("invalid timeout '%s': expected a number of seconds "
                    "greater than 0", s);
    return v;
}

static struct options parse_options(int argc, char **argv)
{
    struct options o = {0, 0.0, 0};
    int i = 1;
    for (; i < argc; i++) {
        const char *arg = argv[i], *v;
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-' || arg[1] == '\0')
            break;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strncmp(arg, "-n", 2) == 0) {
            if (arg[2] == '\0' && i + 1 >= argc)
                usage_error("option '%s' needs a value", arg);
            o.nranks = parse_nranks(arg[2] ? arg + 2 : argv[++i]);
        } else if ((v = long_value(argc, argv, &i, "--np")) != NULL ||
                   (v = long_value(argc, argv, &i, "--nranks")) != NULL) {
            o.nranks = parse_nranks(v);
        } else if ((v = long_value(argc, argv, &i, "--timeout")) != NULL) {
            o.timeout_s = parse_timeout(v);
        } else {
            usage_error("unknown option '%s'", arg);
        }
    }
    if (i >= argc)
        usage_error("%s", "no program given: expected PROGRAM after the "
                    "options");
    if (o.nranks == 0)
        usage_error("%s", "missing -n: the number of ranks to start");
    o.prog = i;
    return o;
}

/* ---- finding the program ---------------------------------------------- */

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

/* Finds name as execvp() would: a name with a slash is a path, others are
 * looked up in PATH. Checking here, before any fork, turns a typo into one
 * clear error instead of N failed ranks. Returns a malloc'd path, or NULL
 * with errno set (EACCES if only unusable candidates were found). */
static char *resolve_program(const char *name)
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

/* ---- the job's identity and the ranks' environments -------------------- */

/* Picks a free TCP port on the loopback for rank 0's rendezvous. Another
 * process could take it before rank 0 binds it; the window is short and
 * the library then fails with a clear error rather than joining a stranger. */
static int find_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    int e = errno;
    close(fd);
    errno = e;
    return port;
}

/* A fresh secret per job, as 64 hex digits. */
static int make_job_key(char hex[2 * JOB_KEY_BYTES + 1])
{
    unsigned char key[JOB_KEY_BYTES];
    size_t got = 0;
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

static const char *const job_vars[] = {
    "TNT_RANK", "TNT_SIZE", "TNT_LOCAL_RANK", "TNT_LOCAL_SIZE",
    "TNT_ROOT_ADDR", "TNT_JOB_KEY",
};
#define NJOB_VARS (sizeof job_vars / sizeof job_vars[0])
#define VAR_SIZE 128

static int is_job_var(const char *entry)
{
    for (size_t k = 0; k < NJOB_VARS; k++) {
        size_t n = strlen(job_vars[k]);
        if (strncmp(entry, job_vars[k], n) == 0 && entry[n] == '=')
            return 1;
    }
    return 0;
}

/* Builds rank's environment in one allocation: the launcher's own, less any
 * TNT_* job variables it had (a job's identity is never inherited), then the
 * job's. */
static char **rank_env(char **base, int rank, int nranks,
                       const char *root_addr, const char *key)
{
    size_t nbase = 0;
    while (base[nbase] != NULL)
        nbase++;
    size_t nptr = nbase + NJOB_VARS + 1;
    char **env = malloc(nptr * sizeof *env + NJOB_VARS * VAR_SIZE);
    if (env == NULL)
        return NULL;
    char *vars = (char *)(env + nptr);
    size_t n = 0;
    for (size_t k = 0; k < nbase; k++)
        if (!is_job_var(base[k]))
            env[n++] = base[k];
    const char *val[NJOB_VARS];
    char srank[16], ssize[16];
    snprintf(srank, sizeof srank, "%d", rank);
    snprintf(ssize, sizeof ssize, "%d", nranks);
    val[0] = val[2] = srank;
    val[1] = val[3] = ssize;
    val[4] = root_addr;
    val[5] = key;
    for (size_t k = 0; k < NJOB_VARS; k++) {
        char *v = vars + k * VAR_SIZE;
        snprintf(v, VAR_SIZE, "%s=%s", job_vars[k], val[k]);
        env[n++] = v;
    }
    env[n] = NULL;
    return env;
}

/* ---- main -------------------------------------------------------------- */

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

static void free_job(struct run_job *job)
{
    if (job->envs != NULL)
        for (int i = 0; i < job->nranks; i++)
            free(job->envs[i]);
    free(job->envs);
    free(job->ranks);
    free(job->path);
    if (job->sigfd >= 0)
        close(job->sigfd);
    if (job->devnull >= 0)
        close(job->devnull);
}

/* Everything up to the first fork: identity, environments, signals. */
static int prepare_job(struct run_job *job)
{
    char key[2 * JOB_KEY_BYTES + 1], root_addr[32];
    int port = find_free_port();
    if (port < 0) {
        fprintf(stderr, "tnt-run: cannot find a free TCP port on "
                "127.0.0.1: %s\n", strerror(errno));
        return -1;
    }
    snprintf(root_addr, sizeof root_addr, "127.0.0.1:%d", port);
    if (make_job_key(key) != 0) {
        fprintf(stderr, "tnt-run: cannot make a job key with getrandom: "
                "%s\n", strerror(errno));
        return -1;
    }
    extern char **environ;
    job->ranks = calloc((size_t)job->nranks, sizeof *job->ranks);
    job->envs = calloc((size_t)job->nranks, sizeof *job->envs);
    if (job->ranks == NULL || job->envs == NULL)
        goto err_no_memory;
    for (int i = 0; i < job->nranks; i++) {
        job->envs[i] = rank_env(environ, i, job->nranks, root_addr, key);
        if (job->envs[i] == NULL)
            goto err_no_memory;
    }
    job->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (job->devnull < 0 || setup_signals(job) != 0) {
        fprintf(stderr, "tnt-run: cannot set up: %s\n", strerror(errno));
        return -1;
    }
    return 0;

err_no_memory:
    fprintf(stderr, "tnt-run: out of memory\n");
    return -1;
}

int main(int argc, char **argv)
{
    open_std_fds();
    struct options o = parse_options(argc, argv);
    struct run_job job = {
        .nranks = (int)o.nranks,
        .argv = argv + o.prog,
        .timeout_s = o.timeout_s,
        .launcher_pid = getpid(),
        .devnull = -1,
        .sigfd = -1,
        .phase = RUN_RUNNING,
        .exit_code = -1,
        .out_sink = stdout,
        .err_sink = stderr,
    };
    job.path = resolve_program(argv[o.prog]);
    if (job.path == NULL) {
        fprintf(stderr, "tnt-run: cannot execute '%s': %s\n", argv[o.prog],
                strerror(errno));
        return RUN_EXIT_NOEXEC;
    }
    /* Whole lines are written by the relay and flushed after each batch. */
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    setvbuf(stderr, NULL, _IOFBF, 1 << 16);
    int rc = 1;
    if (prepare_job(&job) == 0) {
        rc = run_job_start(&job);
        if (rc == 0)
            rc = run_job_supervise(&job);
    }
    fflush(stderr);
    free_job(&job);
    return rc;
}
