/*
 * The bootstrap's table fan-out down a binomial tree (lib/boot/
 * bootstrap.c, boot_tree.c), with real ranks over real sockets. The
 * ranks are forked by hand and call the bootstrap itself
 * (tnt__bootstrap) with a listen function that publishes a made-up
 * address whose length and bytes depend on the rank, and a host name
 * whose length does too, so that every entry of every rank's table is
 * checked against a reference computed here, independently.
 *
 *   sizes     TNT_BOOT_TREE_MIN_RANKS=1 (the tree forced): p = 1, 2, 3,
 *             5, 7, 8, 16, 33, 64, 200: every rank's table is the
 *             reference, and every rank but 0 got it down the tree.
 *   default_threshold  TNT_BOOT_TREE_MIN_RANKS unset (128): p = 5, 8,
 *             127 take the table from rank 0 (the star), p = 128 down the
 *             tree; the same tables.
 *   killed    the tree forced; p = 8, rank 4 (parent of 5 and 6,
 *             grandparent of 7) is killed (SIGKILL, from a test hook)
 *             the moment it has the table, before it passes it on; p = 5,
 *             rank 3 (a leaf) likewise: every other rank fails with
 *             TNT_ERR_PEER_LOST naming the dead rank as dead, long before
 *             TNT_CONNECT_TIMEOUT.
 *   mixed     the tree forced on all ranks of 5 but rank 3: rank 0
 *             takes the star, every rank gets the table from it.
 *   unreachable  the tree forced, p = 8: rank 6 lives but its listener
 *             refuses connections: every rank fails with TNT_ERR_CONNECT
 *             naming rank 6 as alive and unreachable from rank 4.
 *   stranger  the tree forced, p = 5: before ranks 2 and 4 register, their
 *             tree listeners get garbage, a well-formed table header of
 *             another job (another table nonce) with its entries, and a
 *             silent connection: each is dropped and logged on that rank
 *             (never fatal), and the job starts with the right tables.
 *   comm      the tree forced, p = 7, through tnt_comm_init_from_env: an
 *             allreduce of 1 gives 7 on every rank.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot/boot_wire.h"
#include "boot/bootstrap.h"
#include "harness.h"
#include "tnt/tnt.h"
#include "util/auth.h"
#include "util/log.h"

#define KEY "boottree-key"

typedef struct bt_job {
    char dir[64];
    char root[64];
    int size;
    const char *tree_min;     /* TNT_BOOT_TREE_MIN_RANKS, NULL: unset */
    int victim;               /* killed once it has the table; -1 none */
    int deaf;                 /* its listener shut once open; -1 none */
    int no_tree;              /* TNT_BOOT_TREE_MIN_RANKS unset; -1 none */
    int strangers[2];         /* ranks whose listeners get strangers */
    double connect_timeout;
} bt_job_t;

/* The reference entry of rank r: an address of 1..128 bytes and a host
 * name of 6..30 characters, both from r alone. */
static void bt_ref(int r, tnt_boot_entry_t *e, char *host, size_t hlen)
{
    memset(e, 0, sizeof(*e));
    e->rank = r;
    e->addr_len = 1 + (unsigned)(r * 37) % TNT_TRANSPORT_ADDR_MAX;
    for (unsigned k = 0; k < e->addr_len; k++)
        e->addr[k] = (unsigned char)(r * 131 + k * 7 + 1);
    snprintf(host, hlen, "host-%d-%.*s", r, r % 23,
             "xxxxxxxxxxxxxxxxxxxxxxxxxxx");
    snprintf(e->host, sizeof(e->host), "%s", host);
}

static void bt_path(const bt_job_t *j, int rank, const char *what,
                    char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s.%d", j->dir, what, rank);
}

typedef struct bt_rank {
    const bt_job_t *j;
    int rank;
    int via_tree;
    int stranger_fds[4];
} bt_rank_t;

static tnt_result_t bt_listen(void *arg, const char *ip,
                              tnt_boot_entry_t *entry)
{
    const bt_rank_t *x = arg;
    char host[64];
    tnt_boot_entry_t ref;
    (void)ip;
    bt_ref(x->rank, &ref, host, sizeof(host));
    entry->addr_len = ref.addr_len;
    memcpy(entry->addr, ref.addr, ref.addr_len);
    return TNT_SUCCESS;
}

static int bt_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Strangers on this rank's tree listener, before it registers (so they
 * are there before its parent's table): garbage, a well-formed table of
 * another job (a table nonce it cannot know), and silence. */
static void bt_strangers(bt_rank_t *x, int port)
{
    unsigned char junk[100];
    memset(junk, 0xab, sizeof(junk));
    int fd = bt_connect(port);
    if (fd >= 0 && write(fd, junk, sizeof(junk)) < 0)
        perror("stranger write");
    x->stranger_fds[0] = fd;

    tnt_boot_table_hdr_t h;
    unsigned char other_nonce[TNT_AUTH_NONCE_BYTES];
    memset(other_nonce, 0x5a, sizeof(other_nonce));
    tnt__boot_table_hdr_init(&h, x->j->size,
                             (uint32_t)x->j->size * TNT_BOOT_WIRE_ENTRY_MIN,
                             other_nonce);
    size_t len = sizeof(h) + h.bytes;
    unsigned char *m = calloc(1, len);
    memcpy(m, &h, sizeof(h));
    fd = bt_connect(port);
    if (fd >= 0 && write(fd, m, len) < 0)
        perror("stranger write");
    free(m);
    x->stranger_fds[1] = fd;
    x->stranger_fds[2] = bt_connect(port); /* silent */
}

static void bt_hook(void *arg, const char *what, int value)
{
    bt_rank_t *x = arg;
    if (strcmp(what, "listening") == 0) {
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        getsockname(value, (struct sockaddr *)&sa, &sl);
        if (x->rank == x->j->strangers[0] || x->rank == x->j->strangers[1])
            bt_strangers(x, ntohs(sa.sin_port));
        /* Alive, registered, but its listener refuses connections. */
        if (x->rank == x->j->deaf)
            shutdown(value, SHUT_RDWR);
    } else if (strcmp(what, "table") == 0) {
        x->via_tree = value;
        if (x->rank == x->j->victim)
            raise(SIGKILL);
    }
}

/* One rank: the bootstrap, then "rc via_tree seconds error" in
 * result.<rank> and the raw table in table.<rank>. */
static pid_t bt_start(const bt_job_t *j, int rank)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char path[128], host[64];
    bt_path(j, rank, "stderr", path, sizeof(path));
    if (!freopen(path, "w", stderr))
        _exit(3);
    if (j->tree_min && rank != j->no_tree)
        setenv("TNT_BOOT_TREE_MIN_RANKS", j->tree_min, 1);
    else
        unsetenv("TNT_BOOT_TREE_MIN_RANKS");
    setenv("TNT_LOG_LEVEL", "INFO", 1);
    setenv("TNT_LOG_ALL_RANKS", "1", 1);
    tnt__log_init(rank);
    if (tnt__auth_init() != TNT_SUCCESS)
        _exit(4);
    tnt_auth_key_t key;
    tnt__auth_key_derive(KEY, &key);
    bt_rank_t x = {.j = j, .rank = rank, .via_tree = -1};
    tnt_boot_entry_t ref;
    bt_ref(rank, &ref, host, sizeof(host));
    tnt_boot_args_t a = {j->root, rank, j->size, tnt__auth_job_id(KEY),
                         &key, j->connect_timeout, host, bt_listen, &x,
                         bt_hook, &x};
    tnt_boot_entry_t *table = calloc((size_t)j->size, sizeof(*table));
    double t0 = th_now();
    tnt_result_t rc = tnt__bootstrap(&a, table);
    double took = th_now() - t0;
    bt_path(j, rank, "result", path, sizeof(path));
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d %d %.3f %s\n", (int)rc, x.via_tree, took,
                rc == TNT_SUCCESS ? "-" : tnt_last_error());
        fclose(f);
    }
    bt_path(j, rank, "table", path, sizeof(path));
    f = fopen(path, "wb");
    if (f) {
        fwrite(table, sizeof(*table), (size_t)j->size, f);
        fclose(f);
    }
    _exit(0);
}

typedef struct bt_result {
    int rc, via_tree;
    double took;
    char err[1024];
} bt_result_t;

static int bt_result(const bt_job_t *j, int rank, bt_result_t *r)
{
    char path[128];
    bt_path(j, rank, "result", path, sizeof(path));
    memset(r, 0, sizeof(*r));
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fscanf(f, "%d %d %lf ", &r->rc, &r->via_tree, &r->took) == 3 &&
             fgets(r->err, sizeof(r->err), f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

/* Rank r's table, entry by entry, against the reference: the count of
 * wrong entries (all of them if the file is missing or short). */
static int bt_wrong_entries(const bt_job_t *j, int rank)
{
    char path[128], host[64];
    bt_path(j, rank, "table", path, sizeof(path));
    FILE *f = fopen(path, "rb");
    if (!f)
        return j->size;
    int wrong = 0;
    for (int i = 0; i < j->size; i++) {
        tnt_boot_entry_t e, ref;
        bt_ref(i, &ref, host, sizeof(host));
        if (fread(&e, sizeof(e), 1, f) != 1 || e.rank != i ||
            e.addr_len != ref.addr_len ||
            memcmp(e.addr, ref.addr, ref.addr_len) != 0 ||
            strncmp(e.host, host, sizeof(e.host)) != 0)
            wrong++;
    }
    fclose(f);
    return wrong;
}

static void bt_setup(bt_job_t *j, int size, const char *tree_min)
{
    memset(j, 0, sizeof(*j));
    snprintf(j->dir, sizeof(j->dir), "/tmp/tnt-boottree-XXXXXX");
    TH_CHECK(mkdtemp(j->dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(j->root, sizeof(j->root), "127.0.0.1:%d", th_free_port());
    j->size = size;
    j->tree_min = tree_min;
    j->victim = -1;
    j->deaf = -1;
    j->no_tree = -1;
    j->strangers[0] = j->strangers[1] = -1;
    j->connect_timeout = 60.0 * th_timeout_mult();
}

/* Start every rank, wait for all (killing what outlives limit), and
 * return how many were killed by a signal (status in sig[]). */
static void bt_run(const bt_job_t *j, int *sig, double limit)
{
    pid_t *pid = calloc((size_t)j->size, sizeof(*pid));
    for (int r = 0; r < j->size; r++)
        pid[r] = bt_start(j, r);
    double end = th_now() + limit * th_timeout_mult();
    for (int r = 0; r < j->size; r++) {
        int st = 0;
        while (waitpid(pid[r], &st, WNOHANG) == 0) {
            if (th_now() > end) {
                kill(pid[r], SIGKILL);
                waitpid(pid[r], &st, 0);
                break;
            }
            th_sleep(0.01);
        }
        sig[r] = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    }
    free(pid);
}

static void bt_cleanup(const bt_job_t *j)
{
    if (CU_get_number_of_failures() != 0 || getenv("TNT_TEST_KEEP")) {
        printf("  (logs kept in %s)\n", j->dir);
        return;
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", j->dir);
    (void)!system(cmd);
}

/* A job that must start: every rank succeeds with the reference table,
 * every rank but 0 by the tree (tree) or from rank 0 (star). */
static void bt_check_good(const bt_job_t *j, int tree)
{
    int *sig = calloc((size_t)j->size, sizeof(int));
    bt_run(j, sig, 120.0);
    for (int r = 0; r < j->size; r++) {
        bt_result_t res;
        if (bt_result(j, r, &res) != 0) {
            TH_CHECK(0, "p=%d: rank %d left no result (signal %d)", j->size,
                     r, sig[r]);
            continue;
        }
        TH_CHECK(res.rc == TNT_SUCCESS, "p=%d: rank %d failed (%d): %s",
                 j->size, r, res.rc, res.err);
        int wrong = bt_wrong_entries(j, r);
        TH_CHECK(wrong == 0, "p=%d: rank %d has %d wrong table entries",
                 j->size, r, wrong);
        if (r > 0)
            TH_CHECK(res.via_tree == tree, "p=%d: rank %d got the table %s",
                     j->size, r, res.via_tree ? "down the tree"
                                              : "from rank 0 directly");
    }
    free(sig);
}

static void test_tree_sizes(void)
{
    static const int sizes[] = {1, 2, 3, 5, 7, 8, 16, 33, 64, 200};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        bt_job_t j;
        bt_setup(&j, sizes[i], "1");
        double t0 = th_now();
        bt_check_good(&j, 1);
        printf("  p=%d: tree bootstrap checked in %.2f s\n", sizes[i],
               th_now() - t0);
        bt_cleanup(&j);
    }
}

/* The default threshold (128): the star below it, the tree from it. */
static void test_default_threshold(void)
{
    static const int sizes[] = {5, 8, 127, 128};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        bt_job_t j;
        bt_setup(&j, sizes[i], NULL);
        bt_check_good(&j, sizes[i] >= 128);
        bt_cleanup(&j);
    }
}

static void bt_check_killed(int size, int victim)
{
    bt_job_t j;
    bt_setup(&j, size, "1");
    j.victim = victim;
    j.connect_timeout = 120.0 * th_timeout_mult();
    int *sig = calloc((size_t)size, sizeof(int));
    bt_run(&j, sig, 90.0);
    TH_CHECK(sig[victim] == SIGKILL, "p=%d: rank %d was not killed (%d)",
             size, victim, sig[victim]);
    char dead[32];
    snprintf(dead, sizeof(dead), "rank %d ", victim);
    for (int r = 0; r < size; r++) {
        if (r == victim)
            continue;
        bt_result_t res;
        if (bt_result(&j, r, &res) != 0) {
            TH_CHECK(0, "p=%d: rank %d left no result", size, r);
            continue;
        }
        printf("  p=%d rank %d: rc %d after %.1f s: %s", size, r, res.rc,
               res.took, res.err);
        TH_CHECK(res.rc == TNT_ERR_PEER_LOST, "p=%d: rank %d: rc %d (%s), "
                 "expected TNT_ERR_PEER_LOST", size, r, res.rc,
                 tnt_strerror(res.rc));
        TH_CHECK(strstr(res.err, dead) && strstr(res.err, "died"),
                 "p=%d: rank %d's error does not say that rank %d died: %s",
                 size, r, victim, res.err);
        /* Found by rank 0 at once, not by a timeout. */
        TH_CHECK(res.took < 30.0 * th_timeout_mult(), "p=%d: rank %d took "
                 "%.1f s", size, r, res.took);
    }
    free(sig);
    bt_cleanup(&j);
}

static void test_killed_in_fan_out(void)
{
    bt_check_killed(8, 4);
    bt_check_killed(5, 3);
}

/* The tree forced on every rank but rank 3, which opens no listener:
 * rank 0 falls back to the star, and every rank (those waiting on a
 * listener too) takes the table from rank 0. */
static void test_mixed_thresholds(void)
{
    bt_job_t j;
    bt_setup(&j, 5, "1");
    j.no_tree = 3;
    bt_check_good(&j, 0);
    char path[128];
    bt_path(&j, 0, "stderr", path, sizeof(path));
    TH_CHECK(th_count_lines(path, "rank 3 opened no bootstrap listener",
                            NULL) == 1,
             "rank 0 did not say why it took the star");
    bt_cleanup(&j);
}

/* p = 8, the tree forced: rank 6's listener refuses connections while
 * rank 6 lives. Its parent (rank 4) cannot pass it the table and tells
 * rank 0, which finds rank 6 alive and fails the job on every rank
 * naming rank 6's listener as unreachable from rank 4. */
static void test_unreachable_child(void)
{
    bt_job_t j;
    bt_setup(&j, 8, "1");
    j.deaf = 6;
    int sig[8];
    bt_run(&j, sig, 90.0);
    for (int r = 0; r < 8; r++) {
        bt_result_t res;
        if (bt_result(&j, r, &res) != 0) {
            TH_CHECK(0, "rank %d left no result (signal %d)", r, sig[r]);
            continue;
        }
        printf("  rank %d: rc %d after %.1f s: %s", r, res.rc, res.took,
               res.err);
        TH_CHECK(res.rc == TNT_ERR_CONNECT, "rank %d: rc %d (%s), expected "
                 "TNT_ERR_CONNECT", r, res.rc, tnt_strerror(res.rc));
        TH_CHECK(strstr(res.err, "rank 4 could not pass the bootstrap table "
                        "to rank 6") && strstr(res.err, "rank 6 is alive"),
                 "rank %d's error does not name rank 6 as unreachable from "
                 "rank 4: %s", r, res.err);
        TH_CHECK(res.took < 30.0 * th_timeout_mult(), "rank %d took %.1f s",
                 r, res.took);
    }
    bt_cleanup(&j);
}

static void test_strangers(void)
{
    bt_job_t j;
    bt_setup(&j, 5, "1");
    j.strangers[0] = 2;
    j.strangers[1] = 4;
    bt_check_good(&j, 1);
    for (int k = 0; k < 2; k++) {
        int r = j.strangers[k];
        char path[128];
        bt_path(&j, r, "stderr", path, sizeof(path));
        TH_CHECK(th_count_lines(path, "dropped bootstrap table connection",
                                "not a libtntcomm bootstrap table") == 1,
                 "rank %d did not log the garbage it dropped", r);
        TH_CHECK(th_count_lines(path, "dropped bootstrap table connection",
                                "wrong table nonce") == 1,
                 "rank %d did not log the other job's table it dropped", r);
        TH_CHECK(th_count_lines(path, "dropped bootstrap table connection",
                                NULL) == 3,
                 "rank %d did not drop exactly its 3 strangers", r);
    }
    bt_cleanup(&j);
}

static int comm_fn(tnt_comm_t comm, int rank, int nranks, void *arg,
                   th_report_t *rep)
{
    (void)rank;
    (void)arg;
    int32_t v = 1;
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, &v, 1, TNT_I32,
                                    TNT_SUM);
    th_report_check(rep, "allreduce", rc, v != nranks, 0, NULL, 0);
    return 0;
}

static void test_comm_over_tree(void)
{
    const char *env[] = {"TNT_BOOT_TREE_MIN_RANKS=1", NULL};
    th_job_t job = {.name = "comm over the boot tree", .nranks = 7,
                    .env = env, .fn = comm_fn, .deadline_s = 120};
    th_run_job(&job, NULL);
}

static const th_test_def_t k_tests[] = {
    {"boottree", "sizes", test_tree_sizes},
    {"boottree", "default_threshold", test_default_threshold},
    {"boottree", "killed", test_killed_in_fan_out},
    {"boottree", "mixed", test_mixed_thresholds},
    {"boottree", "unreachable", test_unreachable_child},
    {"boottree", "stranger", test_strangers},
    {"boottree", "comm", test_comm_over_tree},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
