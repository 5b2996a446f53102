/*
 * boot-storm: what rank 0's side of the bootstrap costs as the job grows,
 * the measurement behind docs/scale.md ("Rank 0's registrations,
 * measured"). This process is rank 0 and runs the library's own
 * bootstrap (tnt__bootstrap), on one thread and alone; ranks 1..P-1 are
 * one child process (boot_storm_ranks.c) that registers them all at once
 * over real loopback connections with the real messages and checks every
 * verdict and table.
 *
 * Rank 0's wall and CPU time (CLOCK_PROCESS_CPUTIME_ID; user and system
 * from getrusage) run from the moment its listener is up (its listen
 * callback, which lets the ranks go) to the return of tnt__bootstrap,
 * every verdict sent: the accepts, hellos, challenges, registrations
 * and their MACs, the table (star: to every rank; tree: to rank 0's
 * children, then every rank's acknowledgement) and the verdicts. Over
 * loopback the kernel's receive path of what rank 0 sends runs partly on
 * rank 0's CPU (softirq in the sender's context), which a NIC would not
 * charge it: an upper bound of what rank 0 pays on a cluster.
 *
 * Usage: boot-storm [-n P] [--tree | --star] [--window W]
 *                   [--verify all|one]
 *   --tree  TNT_BOOT_TREE_MIN_RANKS=1 (the ranks open listeners)
 *   --star  TNT_BOOT_TREE_MIN_RANKS=P+1 (the default: the library's own)
 *   --window W  at most W ranks between connect and registration (P)
 *   --verify one  check only the first star copy of the table (all)
 * Prints one line of key=value pairs; exits 0 only if rank 0's table and
 * every rank's verdict and table were right. Not installed.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boot/bootstrap.h"
#include "boot_storm.h"
#include "tnt/tnt.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

#define STORM_KEY "boot-storm-job-key"

typedef struct root_clock {
    int go_fd;
    double wall0, cpu0;
    struct rusage ru0;
} root_clock_t;

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double tv_s(struct timeval t)
{
    return (double)t.tv_sec + (double)t.tv_usec * 1e-6;
}

/* Rank 0's listen callback: its listener is up. Publish its entry,
 * start the clocks and let the ranks go. */
static tnt_result_t root_listen(void *arg, const char *ip,
                                tnt_boot_entry_t *e)
{
    root_clock_t *k = arg;
    tnt_boot_entry_t ref;
    (void)ip;
    storm_ref(0, &ref);
    e->addr_len = ref.addr_len;
    memcpy(e->addr, ref.addr, ref.addr_len);
    getrusage(RUSAGE_SELF, &k->ru0);
    k->cpu0 = cpu_now();
    k->wall0 = tnt__now();
    if (write(k->go_fd, "g", 1) != 1)
        return tnt__error(TNT_ERR_SYSTEM, "boot-storm: cannot start the "
                          "ranks: %s", strerror(errno));
    return TNT_SUCCESS;
}

/* A free port on 127.0.0.1 for rank 0 (bound by tnt__bootstrap). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void usage(void)
{
    fprintf(stderr, "usage: boot-storm [-n P (2..%d)] [--tree | --star] "
            "[--window W] [--verify all|one]\n", 1 << 16);
}

/* Both processes hold about P descriptors: the soft limit goes to the
 * hard one. Returns the limit, or -1 when it is too low for P. */
static long raise_nofile(int p)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)p + 64)
        return -1;
    return rl.rlim_cur == RLIM_INFINITY ? -2 : (long)rl.rlim_cur;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tree", no_argument, NULL, 't'},
        {"star", no_argument, NULL, 's'},
        {"window", required_argument, NULL, 'w'},
        {"verify", required_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    int p = 64, tree = 0, window = 0, verify_all = 1, o;
    while ((o = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
        switch (o) {
        case 'n': p = atoi(optarg); break;
        case 't': tree = 1; break;
        case 's': tree = 0; break;
        case 'w': window = atoi(optarg); break;
        case 'v':
            if (strcmp(optarg, "all") != 0 && strcmp(optarg, "one") != 0) {
                usage();
                return 2;
            }
            verify_all = strcmp(optarg, "all") == 0;
            break;
        default: usage(); return 2;
        }
    }
    if (optind != argc || p < 2 || p > 1 << 16 || window < 0) {
        usage();
        return 2;
    }
    long nofile = raise_nofile(p);
    if (nofile == -1) {
        fprintf(stderr, "boot-storm: RLIMIT_NOFILE's hard limit is below "
                "P + 64 = %d descriptors\n", p + 64);
        return 1;
    }
    char min[32];
    snprintf(min, sizeof(min), "%d", tree ? 1 : p + 1);
    setenv("TNT_BOOT_TREE_MIN_RANKS", min, 1);
    setenv("TNT_LOG_LEVEL", "WARNING", 0);
    tnt__log_init(0);
    if (tnt__auth_init() != TNT_SUCCESS) {
        fprintf(stderr, "boot-storm: %s\n", tnt_last_error());
        return 1;
    }
    tnt_auth_key_t key;
    tnt__auth_key_derive(STORM_KEY, &key);
    storm_cfg_t c = {.nranks = p, .tree = tree,
                     .window = window ? window : p,
                     .verify_all = verify_all, .port = free_port(),
                     .job_id = tnt__auth_job_id(STORM_KEY), .key = &key,
                     .timeout_s = 120.0};
    int go[2];
    if (c.port < 0 || pipe(go) != 0) {
        fprintf(stderr, "boot-storm: no port or pipe: %s\n",
                strerror(errno));
        return 1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("boot-storm: fork");
        return 1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(go[1]);
        _exit(storm_ranks(&c, go[0]));
    }
    close(go[0]);

    char root[64], host[TNT_HOST_MAX];
    tnt_boot_entry_t ref0;
    storm_ref(0, &ref0);
    snprintf(root, sizeof(root), "127.0.0.1:%d", c.port);
    snprintf(host, sizeof(host), "%s", ref0.host);
    root_clock_t k = {.go_fd = go[1]};
    tnt_boot_args_t a = {root, 0, p, c.job_id, &key, c.timeout_s, host,
                         root_listen, &k, NULL, NULL};
    tnt_boot_entry_t *table = calloc((size_t)p, sizeof(*table));
    tnt_result_t rc = table ? tnt__bootstrap(&a, table) : TNT_ERR_NO_MEMORY;
    double wall1 = tnt__now(), cpu1 = cpu_now();
    struct rusage ru1, ruc;
    getrusage(RUSAGE_SELF, &ru1);
    close(go[1]); /* a child still waiting to go is told it never will */
    if (rc != TNT_SUCCESS) {
        fprintf(stderr, "boot-storm: rank 0: %s\n", table ? tnt_last_error()
                                                         : "out of memory");
        kill(pid, SIGKILL);
    }
    int st = 0, bad = 0;
    while (wait4(pid, &st, 0, &ruc) < 0 && errno == EINTR)
        ;
    for (int i = 0; rc == TNT_SUCCESS && i < p; i++)
        if (!storm_entry_ok(i, &table[i]) && bad++ == 0)
            fprintf(stderr, "boot-storm: rank 0's entry of rank %d is "
                    "wrong\n", i);
    free(table);
    int ranks_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    int ok = rc == TNT_SUCCESS && bad == 0 && ranks_ok;
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0)
        load[0] = -1;
    printf("boot-storm p=%d mode=%s rank0_wall_s=%.4f rank0_cpu_s=%.4f "
           "rank0_user_s=%.4f rank0_sys_s=%.4f rank0_maxrss_kb=%ld "
           "ranks_cpu_s=%.4f nofile=%ld load1=%.2f result=%s\n", p,
           tree ? "tree" : "star", rc == TNT_SUCCESS ? wall1 - k.wall0 : 0,
           rc == TNT_SUCCESS ? cpu1 - k.cpu0 : 0,
           tv_s(ru1.ru_utime) - tv_s(k.ru0.ru_utime),
           tv_s(ru1.ru_stime) - tv_s(k.ru0.ru_stime), ru1.ru_maxrss,
           tv_s(ruc.ru_utime) + tv_s(ruc.ru_stime), nofile, load[0],
           ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
