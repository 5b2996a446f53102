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
"  -n N, --np N        ranks on this host; with --hostfile, the total\n"
"  --hostfile FILE     one host per line, '#' starts a comment; ranks are\n"
"                      assigned host by host [-hostfile, --hostfile]\n"
"  --n-per-node K      ranks per host of the hostfile (default 1)\n"
"                      [--devices-per-node, also accepted]\n"
"  --rsh CMD           how to reach a host: CMD HOST tnt-run --agent\n"
"                      (default 'ssh -o BatchMode=yes'); the host\n"
"                      'localhost' is started without it\n"
"What:\n"
"  --interpreter \"CMD ARGS\"  prefix of the rank command, e.g. python3\n"
"                      or 'valgrind -q'; '' runs PROGRAM directly\n"
"                      [--python-interpreter, also accepted]\n"
"  -x VAR=VALUE, -x VAR  set VAR on every rank (in the order given), or\n"
"                      pass on tnt-run's own value of VAR [-x]\n"
"  --fusion-threshold KB  sets TNT_FUSION_THRESHOLD [--fusion-threshold]\n"
"  --log-level L       ERROR|WARNING|INFO|DEBUG: TNT_LOG_LEVEL [--log-level]\n"
"  --log-on-all-ranks  TNT_LOG_ALL_RANKS=1 [--log-on-all-ranks]\n"
"  --output-on-all-ranks  show every rank's stdout (default: rank 0's\n"
"                      only; stderr of every rank is always shown)\n"
"  --pin-to-socket     spread each host's ranks over its sockets (CPUs)\n"
"  --pin-memory-to-socket  and bind their memory to that NUMA node\n"
"  --bind-to core      pin each rank to one core of its host\n"
"How:\n"
"  --timeout SECONDS   stop the whole job after SECONDS (exit 124)\n"
"  --dry-run           print what would be started where, with which\n"
"                      environment; start nothing\n"
"  --cleanup [--force] stop PROGRAM's ranks left over on this host or on\n"
"                      every host of --hostfile (SIGTERM, then SIGKILL\n"
"                      after 3 s; at once with --force)\n"
"  -h, --help          print this help\n"
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

static long parse_count(const char *what, const char *s, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v < 1 ||
        v > max)
        run_usage_error("invalid %s '%s': expected an integer from 1 to "
                        "%ld", what, s, max);
    return v;
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
    if (strcmp(arg, "--log-on-all-ranks") == 0) {
        add_extra(o, "TNT_LOG_ALL_RANKS", "1");
        return 1;
    }
    return 0;
}

/* Options with a value; returns 1 when argv[*i] was one of them. */
static int value_option(struct run_opts *o, int argc, char **argv, int *i)
{
    const char *v;
    if ((v = long_value(argc, argv, i, "--np")) != NULL ||
        (v = long_value(argc, argv, i, "--nranks")) != NULL)
        o->nranks = parse_count("number of ranks", v, 1L << 20);
    else if ((v = long_value(argc, argv, i, "--timeout")) != NULL)
        o->timeout_s = parse_timeout(v);
    else if ((v = long_value(argc, argv, i, "--hostfile")) != NULL ||
             (v = long_value(argc, argv, i, "-hostfile")) != NULL)
        o->hostfile = v;
    else if ((v = long_value(argc, argv, i, "--n-per-node")) != NULL ||
             (v = long_value(argc, argv, i, "--devices-per-node")) != NULL)
        o->per_node = parse_count("--n-per-node", v, RUN_MAX_RANKS);
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

void run_parse_options(int argc, char **argv, struct run_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->rsh = "ssh -o BatchMode=yes";
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
        } else if (strncmp(arg, "-n", 2) == 0) {
            if (arg[2] == '\0' && i + 1 >= argc)
                run_usage_error("option '%s' needs a value", arg);
            o->nranks = parse_count("number of ranks",
                                    arg[2] ? arg + 2 : argv[++i],
                                    1L << 20);
        } else if (strncmp(arg, "-x", 2) == 0) {
            if (arg[2] == '\0' && i + 1 >= argc)
                run_usage_error("option '-x' needs a value");
            add_x(o, arg[2] ? arg + 2 : argv[++i]);
        } else if (!flag_option(o, arg) &&
                   !value_option(o, argc, argv, &i)) {
            run_usage_error("unknown option '%s'", arg);
        }
    }
    if (i >= argc)
        run_usage_error("%s", "no program given: expected PROGRAM after "
                        "the options");
    if (o->force && !o->cleanup)
        run_usage_error("--force goes with --cleanup");
    if (!o->cleanup && o->nranks == 0 && o->hostfile == NULL)
        run_usage_error("%s", "missing -n or --hostfile: where to start "
                        "how many ranks");
    if (o->hostfile == NULL && o->nranks > RUN_MAX_RANKS)
        run_usage_error("invalid number of ranks '%ld': expected an "
                        "integer from 1 to %d", o->nranks, RUN_MAX_RANKS);
    if (o->hostfile == NULL && o->per_node != 0)
        run_usage_error("--n-per-node goes with --hostfile");
    o->prog = i;
}
