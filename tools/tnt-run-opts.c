/*
 * The command line of tnt-run: Tarantella's options under their names and
 * ours, checked here so that a bad value is one clear error before anything
 * starts. Options that become environment variables of the ranks
 * (--fusion-threshold, --log-level, --log-on-all-ranks, -x) are collected in
 * the order given, so that a later one wins, as it would in a shell.
 */
#include "tnt-run.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <tnt/version.h>

#define MAX_TIMEOUT_S 1e7

static void usage(FILE *f)
{
    fputs(
"Usage: tnt-run [OPTIONS] [--] PROGRAM [ARGS...]\n"
"       tnt-run --cleanup [--force] [--hostfile FILE] PROGRAM\n"
"\n"
"Start the ranks of PROGRAM as one libtntcomm job, on this host (-n) or on\n"
"the hosts of a hostfile. (Tarantella's names are given in brackets.)\n"
"\n"
"Where:\n"
"  -n N, -np N, --np N  ranks on this host (default K, else 1, as\n"
"                      Tarantella); with --hostfile, the total (default:\n"
"                      hosts times K)\n"
"  --hostfile FILE     one host per line, '#' starts a comment; ranks are\n"
"                      assigned host by host [-hostfile, --hostfile]\n"
"  --n-per-node K      ranks per host (default 1); without --hostfile\n"
"                      K ranks on this host, or -n N of them (N <= K)\n"
"                      [--devices-per-node, --npernode, also accepted]\n"
"  --rsh CMD           how to reach a host: CMD HOST tnt-run --agent\n"
"                      (default 'ssh -o BatchMode=yes'); the host\n"
"                      'localhost' is started without it\n"
"What:\n"
"  --interpreter \"CMD ARGS\"  prefix of the rank command, e.g. python3\n"
"                      or 'valgrind -q'; '' runs PROGRAM directly; when\n"
"                      not given, a PROGRAM ending in .py runs with python3\n"
"                      (unless it is an executable given as a path)\n"
"                      [--python-interpreter, also accepted]\n"
"  -x VAR=VALUE [VAR=VALUE...], -x VAR  set VAR on every rank (in the\n"
"                      order given), or pass on tnt-run's own value [-x]\n"
"  --fusion-threshold KB  sets TNT_FUSION_THRESHOLD [--fusion-threshold]\n"
"  --log-level L       ERROR|WARNING|INFO|DEBUG: TNT_LOG_LEVEL [--log-level]\n"
"  --ib-hca-map M      first|local_rank: TNT_IB_HCA_MAP, which RDMA port\n"
"                      each rank of a host takes (local_rank: round robin)\n"
"  --log-on-all-ranks  TNT_LOG_ALL_RANKS=1 [--log-on-all-devices]\n"
"  --timeline PATH     TNT_TIMELINE=PATH: every rank writes PATH.RANK.json;\n"
"                      after the job they are merged into PATH.json (also\n"
"                      when TNT_TIMELINE is set in tnt-run's environment;\n"
"                      local jobs: with --hostfile each host keeps its\n"
"                      ranks' files, merge with tnt-timeline merge)\n"
"  --output-on-all-ranks  show every rank's stdout (default: rank 0's\n"
"                      only; stderr of every rank is always shown)\n"
"                      [--output-on-all-devices]\n"
"  --no-gpu            accepted for Tarantella's command lines: ranks run\n"
"                      on CPUs in any case [--no-gpu, --no-gpus]\n"
"  --pin-to-socket     spread each host's ranks over its sockets (CPUs)\n"
"  --pin-memory-to-socket  and bind their memory to that NUMA node\n"
"  --bind-to core      pin each rank to one core of its host\n"
"How:\n"
"  --timeout SECONDS   stop the whole job after SECONDS (exit 124)\n"
"  --elastic           a rank killed by a signal does not stop the others\n"
"                      (they can tnt_comm_shrink: TNT_RECOVERY=1 is set);\n"
"                      exit 0 when the survivors finish; says who died\n"
"                      and when (local jobs)\n"
"  --max-restarts N    when the job fails, start it again, up to N times\n"
"                      (a new key and port; TNT_RESTART is the count), for\n"
"                      programs that resume from their own checkpoints\n"
"  --dry-run           print what would be started where, with which\n"
"                      environment; start nothing\n"
"  --cleanup [--force] stop PROGRAM's ranks left over on this host or on\n"
"                      every host of --hostfile (SIGTERM, then SIGKILL\n"
"                      after 3 s; at once with --force)\n"
"  -h, --help          print this help\n"
"  --version           print the version\n"
"\n"
"Each rank gets TNT_RANK, TNT_SIZE, TNT_LOCAL_RANK, TNT_LOCAL_SIZE,\n"
"TNT_ROOT_ADDR and TNT_JOB_KEY; the key reaches other hosts on the\n"
"agent's standard input, never on a command line. Output lines are\n"
"prefixed with \"[RANK] \". If a rank fails, all others on every host are\n"
"stopped and tnt-run exits with that rank's status (128+N for signal N).\n"
"Ctrl+C stops the job (SIGTERM to every rank), a second Ctrl+C kills it.\n",
          f);
}

void run_usage_error(const char *fmt, ...)
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
        run_usage_error("option '%s' needs a value", name);
    return argv[++*i];
}

/* A count from 1 to max; `why` (may be "") explains the limit. */
static long parse_count(const char *what, const char *s, long max,
                        const char *why)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v < 1 ||
        v > max)
        run_usage_error("invalid %s '%s': expected an integer from 1 to "
                        "%ld%s", what, s, max, why);
    return v;
}

/* The number of ranks is checked once the options are all read, since
 * its limit depends on --hostfile: ranks on this host, or in all. */
static long parse_nranks(const char *s, int with_hostfile)
{
    if (with_hostfile)
        return parse_count("number of ranks", s, RUN_MAX_JOB_RANKS,
                           " (in all, over the hosts of --hostfile)");
    return parse_count("number of ranks", s, RUN_MAX_RANKS,
                       " (on this host; more over several hosts with "
                       "--hostfile)");
}

static double parse_timeout(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (((s[0] < '0' || s[0] > '9') && s[0] != '.') || *end != '\0' ||
        errno != 0 || !(v > 0) || v > MAX_TIMEOUT_S)
        run_usage_error("invalid timeout '%s': expected a number of "
                        "seconds greater than 0", s);
    return v;
}

static void add_extra(struct run_opts *o, const char *name,
                      const char *value)
{
    size_t len = strlen(name) + strlen(value) + 2;
    char *e = malloc(len);
    char **grown = realloc(o->extra, (size_t)(o->nextra + 1) *
                                         sizeof(*o->extra));
    if (e == NULL || grown == NULL)
        run_usage_error("out of memory");
    snprintf(e, len, "%s=%s", name, value);
    o->extra = grown;
    o->extra[o->nextra++] = e;
}

/* Whether arg has the form NAME=VALUE with NAME a variable name: after
 * `-x A=1`, Tarantella's list form takes `B=2 C=3` as more of -x. */
static int is_assignment(const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (eq == NULL || eq == arg)
        return 0;
    for (const char *c = arg; c < eq; c++)
        if (!(*c == '_' || (*c >= 'A' && *c <= 'Z') ||
              (*c >= 'a' && *c <= 'z') || (c > arg && *c >= '0' && *c <= '9')))
            return 0;
    return 1;
}

/* -x VAR=VALUE or -x VAR (tnt-run's own value). */
static void add_x(struct run_opts *o, const char *arg)
{
    const char *eq = strchr(arg, '=');
    size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
    char name[256];
    if (nlen == 0 || nlen >= sizeof(name))
        run_usage_error("invalid -x '%s': expected VAR=VALUE or VAR", arg);
    memcpy(name, arg, nlen);
    name[nlen] = '\0';
    for (size_t k = 0; k < nlen; k++)
        if (!(name[k] == '_' || (name[k] >= 'A' && name[k] <= 'Z') ||
              (name[k] >= 'a' && name[k] <= 'z') ||
              (k > 0 && name[k] >= '0' && name[k] <= '9')))
            run_usage_error("invalid -x '%s': '%s' is not a variable name",
                            arg, name);
    char probe[300];
    snprintf(probe, sizeof(probe), "%s=", name);
    if (run_is_job_var(probe))
        run_usage_error("invalid -x '%s': tnt-run sets %s itself", arg,
                        name);
    const char *value = eq ? eq + 1 : getenv(name);
    if (value == NULL)
        run_usage_error("invalid -x '%s': %s is not set in tnt-run's "
                        "environment", arg, name);
    add_extra(o, name, value);
}

static void set_log_level(struct run_opts *o, const char *v)
{
    static const char *const levels[] = {"ERROR", "WARNING", "INFO",
                                         "DEBUG"};
    for (int k = 0; k < 4; k++) {
        if (strcasecmp(v, levels[k]) == 0) {
            add_extra(o, "TNT_LOG_LEVEL", levels[k]);
            o->info = k >= 2;
            return;
        }
    }
    run_usage_error("invalid --log-level '%s': expected ERROR, WARNING, "
                    "INFO or DEBUG", v);
}

/* The verbs transport's rank -> NIC map; checked here so that a typo
 * fails at once instead of in every rank. */
static void set_ib_hca_map(struct run_opts *o, const char *v)
{
    if (strcmp(v, "first") != 0 && strcmp(v, "local_rank") != 0)
        run_usage_error("invalid --ib-hca-map '%s': expected first or "
                        "local_rank", v);
    add_extra(o, "TNT_IB_HCA_MAP", v);
}

static void set_fusion_threshold(struct run_opts *o, const char *v)
{
    char *end;
    errno = 0;
    long kb = strtol(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 ||
        kb > (1L << 30))
        run_usage_error("invalid --fusion-threshold '%s': expected a whole "
                        "number of KB, 0 to %ld", v, 1L << 30);
    char s[32];
    snprintf(s, sizeof(s), "%ldk", kb);
    add_extra(o, "TNT_FUSION_THRESHOLD", s);
}

/* Options without a value; returns 1 when arg was one of them. */
static int flag_option(struct run_opts *o, const char *arg)
{
    static const struct {
        const char *name;
        size_t off;
    } flags[] = {
        {"--output-on-all-ranks", offsetof(struct run_opts, out_all)},
        {"--output-on-all-devices", offsetof(struct run_opts, out_all)},
        {"--no-gpu", offsetof(struct run_opts, no_gpu)},
        {"--no-gpus", offsetof(struct run_opts, no_gpu)},
        {"--elastic", offsetof(struct run_opts, elastic)},
        {"--pin-to-socket", offsetof(struct run_opts, pin_socket)},
        {"--pin-memory-to-socket", offsetof(struct run_opts, pin_mem)},
        {"--dry-run", offsetof(struct run_opts, dry_run)},
        {"--cleanup", offsetof(struct run_opts, cleanup)},
        {"--force", offsetof(struct run_opts, force)},
    };
    for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
        if (strcmp(arg, flags[k].name) == 0) {
            *(int *)((char *)o + flags[k].off) = 1;
            return 1;
        }
    }
    if (strcmp(arg, "--log-on-all-ranks") == 0 ||
        strcmp(arg, "--log-on-all-devices") == 0) {
        add_extra(o, "TNT_LOG_ALL_RANKS", "1");
        return 1;
    }
    return 0;
}

/* Options with a value; returns 1 when argv[*i] was one of them. */
static int value_option(struct run_opts *o, int argc, char **argv, int *i,
                        const char **nranks)
{
    const char *v;
    if ((v = long_value(argc, argv, i, "--np")) != NULL ||
        (v = long_value(argc, argv, i, "-np")) != NULL ||
        (v = long_value(argc, argv, i, "--nranks")) != NULL)
        *nranks = v;
    else if ((v = long_value(argc, argv, i, "--timeout")) != NULL)
        o->timeout_s = parse_timeout(v);
    else if ((v = long_value(argc, argv, i, "--max-restarts")) != NULL)
        o->max_restarts = parse_count("--max-restarts", v, 1000, "");
    else if ((v = long_value(argc, argv, i, "--hostfile")) != NULL ||
             (v = long_value(argc, argv, i, "-hostfile")) != NULL)
        o->hostfile = v;
    else if ((v = long_value(argc, argv, i, "--n-per-node")) != NULL ||
             (v = long_value(argc, argv, i, "--devices-per-node")) != NULL ||
             (v = long_value(argc, argv, i, "--npernode")) != NULL ||
             (v = long_value(argc, argv, i, "-npernode")) != NULL)
        o->per_node = parse_count("--n-per-node", v, RUN_MAX_RANKS, "");
    else if ((v = long_value(argc, argv, i, "--rsh")) != NULL) {
        if (strspn(v, " \t") == strlen(v))
            run_usage_error("invalid --rsh '%s': expected a command", v);
        o->rsh = v;
    } else if ((v = long_value(argc, argv, i, "--interpreter")) != NULL ||
               (v = long_value(argc, argv, i, "--python-interpreter")) !=
                   NULL)
        o->interpreter = v;
    else if ((v = long_value(argc, argv, i, "--fusion-threshold")) != NULL)
        set_fusion_threshold(o, v);
    else if ((v = long_value(argc, argv, i, "--log-level")) != NULL)
        set_log_level(o, v);
    else if ((v = long_value(argc, argv, i, "--ib-hca-map")) != NULL)
        set_ib_hca_map(o, v);
    else if ((v = long_value(argc, argv, i, "--timeline")) != NULL) {
        if (!*v || strlen(v) > 4000)
            run_usage_error("invalid --timeline '%s': expected a path "
                            "prefix", v);
        add_extra(o, "TNT_TIMELINE", v);
        o->timeline = v;
    }
    else if ((v = long_value(argc, argv, i, "--bind-to")) != NULL) {
        if (strcmp(v, "core") == 0)
            o->bind_core = 1;
        else if (strcmp(v, "none") != 0)
            run_usage_error("invalid --bind-to '%s': expected core or "
                            "none", v);
    } else
        return 0;
    return 1;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* Notes for --log-level INFO or DEBUG, on what tnt-run chose itself. */
static void say_defaults(const struct run_opts *o, const char *prog,
                         int nranks_given, int python_default)
{
    if (!o->info)
        return;
    if (o->no_gpu)
        fprintf(stderr, "tnt-run: info: --no-gpu: libtntcomm's ranks run "
                "on CPUs in any case\n");
    if (!nranks_given && o->hostfile == NULL && !o->cleanup)
        fprintf(stderr, "tnt-run: info: no -n given: starting %ld rank%s "
                "on this host%s\n", o->nranks, o->nranks > 1 ? "s" : "",
                o->per_node ? " (--n-per-node)" : "");
    if (python_default)
        fprintf(stderr, "tnt-run: info: %s runs with python3 (found "
                "through PATH; --python-interpreter sets another)\n", prog);
}

void run_parse_options(int argc, char **argv, struct run_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->rsh = "ssh -o BatchMode=yes";
    const char *nranks = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-' || arg[1] == '\0')
            break;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(arg, "--version") == 0) {
            printf("tnt-run (libtntcomm) %s\n", TNT_VERSION_STRING);
            exit(0);
        } else if (flag_option(o, arg) ||
                   value_option(o, argc, argv, &i, &nranks)) {
            continue;
        } else if (strncmp(arg, "-n", 2) == 0 &&
                   strncmp(arg, "-np", 3) != 0) {
            if (arg[2] == '\0' && i + 1 >= argc)
                run_usage_error("option '%s' needs a value", arg);
            nranks = arg[2] ? arg + 2 : argv[++i];
        } else if (strncmp(arg, "-x", 2) == 0) {
            if (arg[2] == '\0' && i + 1 >= argc)
                run_usage_error("option '-x' needs a value");
            add_x(o, arg[2] ? arg + 2 : argv[++i]);
            /* Tarantella's -x takes a list: -x A=1 B=2 -- prog. */
            while (i + 1 < argc && is_assignment(argv[i + 1]))
                add_x(o, argv[++i]);
        } else {
            run_usage_error("unknown option '%s'", arg);
        }
    }
    if (i >= argc)
        run_usage_error("%s", "no program given: expected PROGRAM after "
                        "the options");
    if (o->force && !o->cleanup)
        run_usage_error("--force goes with --cleanup");
    if ((o->elastic || o->max_restarts) && o->hostfile != NULL)
        run_usage_error("--elastic and --max-restarts run local jobs only "
                        "so far (no --hostfile)");
    /* The survivors shrink over the recovery listener (docs/tnt-run.md). */
    if (o->elastic)
        add_extra(o, "TNT_RECOVERY", "1");
    if (nranks != NULL)
        o->nranks = parse_nranks(nranks, o->hostfile != NULL);
    else if (o->hostfile == NULL)
        o->nranks = o->per_node ? o->per_node /* mpirun --npernode K */
                                : 1; /* Tarantella's `tarantella -- x.py` */
    /* Without a hostfile the job has one host, this one, so K ranks per
     * host bound -n as hosts x K does with a hostfile (mpirun's
     * --npernode on one node likewise). */
    if (o->hostfile == NULL && o->per_node != 0 && o->nranks > o->per_node)
        run_usage_error("-n %ld is more than --n-per-node %ld: without "
                        "--hostfile the job has one host, this one",
                        o->nranks, o->per_node);
    o->prog = i;
    /* Tarantella runs its SCRIPT with a Python interpreter unless told
     * otherwise; python3, since Debian has no `python`. An executable
     * script given as a path (./train.py) keeps its own #! line. */
    int python_default = o->interpreter == NULL && !o->cleanup &&
                         ends_with(argv[i], ".py") &&
                         !(strchr(argv[i], '/') != NULL &&
                           access(argv[i], X_OK) == 0);
    if (python_default)
        o->interpreter = "python3";
    say_defaults(o, argv[i], nranks != NULL, python_default);
}
