/*
 * tnt-bench: the benchmark of libtntcomm, after nccl-tests. This file reads
 * the command line and decides how the ranks come to be: under a launcher
 * (tnt-run, or anything that sets TNT_RANK/TNT_SIZE) this process is one
 * rank; with -N K it forks K local ranks itself, giving each the
 * environment a launcher would; with neither it runs as a world of one.
 * What a rank then does is in bench_run.c.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "bench.h"
#include "core/param.h"

#define JOB_KEY_BYTES 32

/* How long ranks get between SIGTERM and SIGKILL once one has failed. */
#define STOP_GRACE_S 3.0

static const char *coll_names[BENCH_COLL_COUNT] = {
    "allreduce", "broadcast", "allgather", "reduce_scatter",
};

/* -d names, indexed by tnt_dtype_t, and the longer names also accepted. */
static const char *dtype_names[TNT_DTYPE_COUNT] = {
    "f32", "f64", "f16", "bf16", "i8", "u8", "i32", "u32", "i64", "u64",
};
static const char *dtype_aliases[TNT_DTYPE_COUNT] = {
    "float", "double", "half", "bfloat16", "int8",
    "uint8", "int32", "uint32", "int64", "uint64",
};
static const char *op_names[TNT_OP_COUNT] = {
    "sum", "avg", "prod", "min", "max",
};

const char *bench_coll_name(bench_coll_t coll)
{
    return (unsigned)coll < BENCH_COLL_COUNT ? coll_names[coll] : "?";
}

const char *bench_dtype_name(tnt_dtype_t dtype)
{
    return (unsigned)dtype < TNT_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

const char *bench_op_name(tnt_op_t op)
{
    return (unsigned)op < TNT_OP_COUNT ? op_names[op] : "?";
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: tnt-bench [COLLECTIVE] [options]\n"
"\n"
"Times a collective of libtntcomm over a sweep of sizes and checks every\n"
"result, as nccl-tests do. COLLECTIVE is allreduce (default), broadcast,\n"
"allgather or reduce_scatter.\n"
"\n"
"Sizes are bytes; k, M, G (or KiB, MiB, GiB) are powers of 1024. For\n"
"allgather and reduce_scatter a size is what each rank contributes.\n"
"  --size S             one size only (same as -b S -e S)\n"
"  -b, --minbytes S     smallest size (default 8)\n"
"  -e, --maxbytes S     largest size (default 32M)\n"
"  -f, --stepfactor F   multiply the size by F from row to row (default 2)\n"
"Measurement:\n"
"  -n, --iters N        timed iterations per size (default 20)\n"
"  -w, --warmup_iters N untimed iterations before them (default 5)\n"
"  -c, --check 0|1      check one extra iteration on fresh data (default 1)\n"
"  -d, --datatype T     f32 f64 f16 bf16 i8 u8 i32 u32 i64 u64 (default f32)\n"
"  -o, --op OP          sum avg prod min max (default sum)\n"
"  -r, --root R         root rank of broadcast (default 0)\n"
"      --inplace-only   measure the in-place form only\n"
"      --outplace-only  measure the out-of-place form only\n"
"      --json FILE      also write the results as JSON (rank 0)\n"
"Ranks:\n"
"  -N, --nranks K       start K local ranks (not under a launcher)\n"
"  -h, --help           this text\n"
"\n"
"Examples:\n"
"  tnt-bench -N 4 allreduce -b 8 -e 64M -f 2\n"
"  tnt-run -n 4 tnt-bench allreduce --size 32k -d bf16 -o avg\n"
"  tnt-bench -N 3 broadcast -r 1 -b 1k -e 1M -f 4\n"
"\n"
"Exit status: 0 when every element was right, 1 on wrong elements or an\n"
"error, 2 on a bad command line.\n");
}

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "tnt-bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try 'tnt-bench --help')\n");
    exit(BENCH_EXIT_USAGE);
}

static long parse_int(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "tnt-bench: %s '%s' is invalid; expected an integer "
                "in [%ld, %ld]\n(try 'tnt-bench --help')\n", opt, s, min,
                max);
        exit(BENCH_EXIT_USAGE);
    }
    return v;
}

static size_t parse_bytes(const char *opt, const char *s)
{
    size_t v;
    if (tnt__parse_size(opt, s, &v) != TNT_SUCCESS) {
        fprintf(stderr, "tnt-bench: %s\n(try 'tnt-bench --help')\n",
                tnt_last_error());
        exit(BENCH_EXIT_USAGE);
    }
    return v;
}

static int lookup(const char *s, const char *const *names,
                  const char *const *aliases, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0 ||
            (aliases && strcasecmp(s, aliases[i]) == 0))
            return i;
    return -1;
}

enum { OPT_SIZE = 256, OPT_INPLACE, OPT_OUTPLACE, OPT_JSON };

static void parse_args(int argc, char **argv, bench_opts_t *o)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, OPT_SIZE},
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"check", required_argument, NULL, 'c'},
        {"datatype", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, 'o'},
        {"root", required_argument, NULL, 'r'},
        {"nranks", required_argument, NULL, 'N'},
        {"inplace-only", no_argument, NULL, OPT_INPLACE},
        {"outplace-only", no_argument, NULL, OPT_OUTPLACE},
        {"json", required_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int have_range = 0, have_size = 0, only_in = 0, only_out = 0, c, i;

    *o = (bench_opts_t){
        .coll = BENCH_ALLREDUCE, .min_bytes = 8, .max_bytes = 32u << 20,
        .factor = 2, .iters = 20, .warmup = 5, .check = 1,
        .dtype = TNT_F32, .op = TNT_SUM, .outplace = 1, .inplace = 1,
    };
    opterr = 0; /* our own messages below */
    while ((c = getopt_long(argc, argv, ":b:e:f:n:w:c:d:o:r:N:h", longopts,
                            NULL)) != -1) {
        switch (c) {
        case OPT_SIZE:
            o->min_bytes = o->max_bytes = parse_bytes("--size", optarg);
            have_size = 1;
            break;
        case 'b':
            o->min_bytes = parse_bytes("-b", optarg);
            have_range = 1;
            break;
        case 'e':
            o->max_bytes = parse_bytes("-e", optarg);
            have_range = 1;
            break;
        case 'f':
            o->factor = (size_t)parse_int("-f", optarg, 2, 1 << 20);
            break;
        case 'n':
            o->iters = (int)parse_int("-n", optarg, 1, 1000000000);
            break;
        case 'w':
            o->warmup = (int)parse_int("-w", optarg, 0, 1000000000);
            break;
        case 'c':
            o->check = (int)parse_int("-c", optarg, 0, 1);
            break;
        case 'd':
            if ((i = lookup(optarg, dtype_names, dtype_aliases,
                            TNT_DTYPE_COUNT)) < 0)
                usage_error("unknown datatype '%s'; expected f32, f64, f16,"
                            " bf16, i8, u8, i32, u32, i64 or u64", optarg);
            o->dtype = (tnt_dtype_t)i;
            break;
        case 'o':
            if ((i = lookup(optarg, op_names, NULL, TNT_OP_COUNT)) < 0)
                usage_error("unknown op '%s'; expected sum, avg, prod, min "
                            "or max", optarg);
            o->op = (tnt_op_t)i;
            break;
        case 'r':
            o->root = (int)parse_int("-r", optarg, 0, 1 << 30);
            break;
        case 'N':
            o->local_ranks = (int)parse_int("-N", optarg, 1,
                                            BENCH_MAX_LOCAL_RANKS);
            break;
        case OPT_INPLACE:
            only_in = 1;
            break;
        case OPT_OUTPLACE:
            only_out = 1;
            break;
        case OPT_JSON:
            o->json = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(BENCH_EXIT_OK);
        case ':':
            usage_error("option '%s' needs a value", argv[optind - 1]);
            break;
        default: {
            /* optopt names an unknown short option (which may sit in a
             * group such as -xb); a long one is the whole argument. */
            char name[3] = {'-', (char)optopt, '\0'};
            usage_error("unknown option '%s'",
                        optopt ? name : argv[optind - 1]);
            break;
        }
        }
    }
    if (optind < argc) {
        if ((i = lookup(argv[optind], coll_names, NULL,
                        BENCH_COLL_COUNT)) < 0)
            usage_error("unknown collective '%s'; expected allreduce, "
                        "broadcast, allgather or reduce_scatter",
                        argv[optind]);
        o->coll = (bench_coll_t)i;
        optind++;
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (have_size && have_range)
        usage_error("%s", "--size and -b/-e exclude each other");
    if (o->min_bytes > o->max_bytes)
        usage_error("%s", "the smallest size (-b) is above the largest (-e)");
    if (only_in && only_out)
        usage_error("%s", "--inplace-only and --outplace-only exclude each "
                    "other");
    o->inplace = !only_out;
    o->outplace = !only_in;
    if ((o->inplace && !o->outplace && !bench_supports(o->coll, 1)) ||
        (o->outplace && !o->inplace && !bench_supports(o->coll, 0)))
        usage_error("%s has no such form (broadcast is in place only, "
                    "reduce_scatter out of place only)",
                    bench_coll_name(o->coll));
    if (o->local_ranks && o->coll == BENCH_BROADCAST &&
        o->root >= o->local_ranks) {
        char msg[96];
        snprintf(msg, sizeof msg, "-r %d is not a rank of a job of -N %d "
                 "(ranks 0 .. %d)", o->root, o->local_ranks,
                 o->local_ranks - 1);
        usage_error("%s", msg);
    }
}

static int env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

/* ---- local ranks (-N) ---------------------------------------------------- */

/* Binds port 0 on the loopback and returns what the kernel chose. Another
 * process may take it before rank 0 binds it; the window is short, and
 * the failure would then be a clear bind error from rank 0. */
static int find_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static int make_job_key(char hex[2 * JOB_KEY_BYTES + 1])
{
    unsigned char key[JOB_KEY_BYTES];
    size_t got = 0;
    while (got < sizeof key) {
        ssize_t n = getrandom(key + got, sizeof key - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof key; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    return 0;
}

static void run_child(const bench_opts_t *o, int rank, const char *addr,
                      const char *key, pid_t parent)
{
    char num[16];
    /* If the parent dies, so do its ranks, instead of waiting for peers
     * until their deadline. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(BENCH_EXIT_FAIL);
    snprintf(num, sizeof num, "%d", rank);
    int ok = setenv("TNT_RANK", num, 1) == 0;
    snprintf(num, sizeof num, "%d", o->local_ranks);
    ok = ok && setenv("TNT_SIZE", num, 1) == 0;
    ok = ok && setenv("TNT_ROOT_ADDR", addr, 1) == 0;
    ok = ok && setenv("TNT_JOB_KEY", key, 1) == 0;
    if (!ok) {
        fprintf(stderr, "tnt-bench: rank %d: setenv: %s\n", rank,
                strerror(errno));
        exit(BENCH_EXIT_FAIL);
    }
    /* Wrong elements and failures differ for the parent: only failures
     * make it stop the other ranks. */
    exit(bench_run(o) == BENCH_EXIT_OK ? BENCH_EXIT_OK
                                       : BENCH_EXIT_WRONG_CHILD);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void signal_all(pid_t *pids, int n, int sig)
{
    for (int r = 0; r < n; r++)
        if (pids[r] > 0)
            kill(pids[r], sig);
}

/* Reaps the ranks. The first one that fails (not merely wrong results)
 * is reported and the others get SIGTERM, then SIGKILL after a grace
 * period; their own deaths are not reported again. */
static int wait_children(pid_t *pids, int n)
{
    int alive = n, failed = 0, wrong = 0;
    double kill_at = 0.0;
    struct timespec ts;

    while (alive > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, kill_at > 0 ? WNOHANG : 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            perror("tnt-bench: waitpid");
            return BENCH_EXIT_FAIL;
        }
        if (pid == 0) { /* stopping, nobody exited yet */
            clock_gettime(CLOCK_MONOTONIC, &ts);
            if (kill_at > 0 && (double)ts.tv_sec + ts.tv_nsec * 1e-9 >
                                   kill_at) {
                signal_all(pids, n, SIGKILL);
                kill_at = -1.0; /* blocking waits from now on */
            } else {
                sleep_ms(10);
            }
            continue;
        }
        int r = 0;
        while (r < n && pids[r] != pid)
            r++;
        if (r == n)
            continue; /* not one of ours */
        pids[r] = 0;
        alive--;
        if (WIFEXITED(st) && WEXITSTATUS(st) == BENCH_EXIT_OK)
            continue;
        if (WIFEXITED(st) && WEXITSTATUS(st) == BENCH_EXIT_WRONG_CHILD) {
            wrong = 1;
            continue;
        }
        if (!failed) {
            if (WIFSIGNALED(st))
                fprintf(stderr, "tnt-bench: rank %d was killed by signal "
                        "%d (%s)", r, WTERMSIG(st), strsignal(WTERMSIG(st)));
            else
                fprintf(stderr, "tnt-bench: rank %d failed (exit status "
                        "%d)", r, WEXITSTATUS(st));
            if (alive > 0) {
                fprintf(stderr, "; stopping the other %d rank%s", alive,
                        alive == 1 ? "" : "s");
                signal_all(pids, n, SIGTERM);
                clock_gettime(CLOCK_MONOTONIC, &ts);
                kill_at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 +
                          STOP_GRACE_S;
            }
            fprintf(stderr, "\n");
        }
        failed = 1;
    }
    return failed || wrong ? BENCH_EXIT_FAIL : BENCH_EXIT_OK;
}

static int launch_local(const bench_opts_t *o)
{
    char key[2 * JOB_KEY_BYTES + 1], addr[32];
    int n = o->local_ranks;
    int port = find_free_port();
    if (port < 0) {
        fprintf(stderr, "tnt-bench: cannot find a free TCP port on "
                "127.0.0.1: %s\n", strerror(errno));
        return BENCH_EXIT_FAIL;
    }
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    if (make_job_key(key) != 0) {
        fprintf(stderr, "tnt-bench: cannot make a job key with getrandom: "
                "%s\n", strerror(errno));
        return BENCH_EXIT_FAIL;
    }
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    if (!pids) {
        fprintf(stderr, "tnt-bench: out of memory\n");
        return BENCH_EXIT_FAIL;
    }
    pid_t self = getpid();
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0)
            run_child(o, r, addr, key, self);
        if (pid < 0) {
            fprintf(stderr, "tnt-bench: cannot start rank %d: fork: %s\n",
                    r, strerror(errno));
            signal_all(pids, r, SIGKILL);
            for (int k = 0; k < r; k++)
                waitpid(pids[k], NULL, 0);
            free(pids);
            return BENCH_EXIT_FAIL;
        }
        pids[r] = pid;
    }
    int rc = wait_children(pids, n);
    free(pids);
    return rc;
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    parse_args(argc, argv, &o);

    int launched = env_set("TNT_SIZE") || env_set("TNT_RANK");
    if (o.local_ranks) {
        if (launched) {
            fprintf(stderr, "tnt-bench: -N starts ranks itself, but this "
                    "process already is a rank of a launched job (TNT_SIZE "
                    "or TNT_RANK is set); drop -N\n");
            return BENCH_EXIT_USAGE;
        }
        return launch_local(&o);
    }
    if (!launched)
        fprintf(stderr, "tnt-bench: no launcher environment; running 1 "
                "rank (use 'tnt-run -n 4 tnt-bench ...' or 'tnt-bench -N 4 "
                "...')\n");
    return bench_run(&o);
}
