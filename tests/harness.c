/*
 * The multi-process test harness (see harness.h): forks one process per
 * rank, hands each the launcher environment of a fresh job (free port,
 * random job key), collects the case reports the ranks write to their
 * pipes, enforces the job's deadline with SIGKILL, reaps every child, and
 * asserts through CUnit on everything that went wrong.
 */
#include "harness.h"

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "datagen.h"

/* After one rank crashed or failed, the others get this long (times the
 * multiplier) to notice the lost peer and finish before they are killed:
 * a surviving rank blocked on the dead one must not hold the whole suite
 * until the job's full deadline. */
#define TH_GRACE_S 15.0
/* Per-operation and connection deadlines handed to the library in every
 * child unless the job or the caller's environment says otherwise: they
 * are shorter than any job deadline, so a hung collective turns into a
 * reported library error rather than a kill. */
#define TH_DEFAULT_OP_TIMEOUT_S 30.0
#define TH_DEFAULT_CONNECT_TIMEOUT_S 20.0
/* More messages than this per job say nothing new and bury the first. */
#define TH_MAX_MESSAGES 30
/* A port taken by someone else between our probe and rank 0's bind. */
#define TH_PORT_ATTEMPTS 4

struct th_report {
    int fd;
    int rank;
    int failures;
    size_t ncases;
    double last_t;
};

/* Per-job bookkeeping of the parent. */
typedef struct th_child {
    pid_t pid;
    int fd;            /* read end, -1 once at EOF */
    char *buf;         /* partial line */
    size_t len, cap;
} th_child_t;

/* ---- small helpers ------------------------------------------------------ */

double th_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double th_timeout_mult(void)
{
    const char *s = getenv("TNT_TEST_TIMEOUT_MULT");
    if (!s || !*s)
        return 1.0;
    char *end;
    double m = strtod(s, &end);
    if (*end != '\0' || !(m > 0.0) || m > 1000.0) {
        fprintf(stderr, "harness: ignoring TNT_TEST_TIMEOUT_MULT='%s' "
                "(expected a positive number)\n", s);
        return 1.0;
    }
    return m;
}

int th_quick(void)
{
    const char *s = getenv("TNT_TEST_QUICK");
    if (!s || !*s || strcmp(s, "0") == 0)
        return 0;
    if (strcmp(s, "1") == 0 || strcmp(s, "2") == 0 || strcmp(s, "3") == 0)
        return s[0] - '0';
    fprintf(stderr, "harness: ignoring TNT_TEST_QUICK='%s' (expected 0, 1, "
            "2 or 3)\n", s);
    return 0;
}

void *th_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

void *th_xmem_alloc(tnt_comm_t comm, size_t n)
{
    void *p = NULL;
    if (tnt_mem_alloc(comm, n, &p) != TNT_SUCCESS) {
        fprintf(stderr, "test: tnt_mem_alloc(%zu): %s\n", n,
                tnt_last_error());
        exit(3);
    }
    return p;
}

int th_count_lines(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, a) && (!b || strstr(line, b));
    fclose(f);
    return n;
}

void th_flag_set(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

int th_flag_isset(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

int th_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static void make_job_key(char *out, size_t outlen)
{
    unsigned char raw[16];
    ssize_t n = getrandom(raw, sizeof raw, 0);
    if (n != (ssize_t)sizeof raw) {
        /* Only uniqueness between concurrent jobs matters here. */
        uint64_t x = (uint64_t)getpid() ^ (uint64_t)(th_now() * 1e9);
        for (size_t i = 0; i < sizeof raw; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            raw[i] = (unsigned char)(x >> 56);
        }
    }
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < sizeof raw && k + 2 < outlen; i++) {
        out[k++] = hex[raw[i] >> 4];
        out[k++] = hex[raw[i] & 15];
    }
    out[k] = '\0';
}

void th_assert_fmt(int ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        CU_assertImplementation(CU_TRUE, (unsigned)line, "", file, "",
                                CU_FALSE);
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Printed at once as well: CUnit lists failures only at the very end,
     * after minutes of other jobs. CUnit copies the message. */
    fprintf(stderr, "FAIL %s:%d: %s\n", file, line, msg);
    CU_assertImplementation(CU_FALSE, (unsigned)line, msg, file, "",
                            CU_FALSE);
}

/* Truncating copy (snprintf("%s") draws truncation warnings). */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Tabs and newlines separate fields and lines on the pipe. */
static void sanitize(char *s)
{
    for (; *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r')
            *s = ' ';
}

/* ---- child side ----------------------------------------------------------- */

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            _exit(2); /* the parent is gone; nobody will read us */
        }
        p += w;
        n -= (size_t)w;
    }
}

void th_report_case(th_report_t *rep, const th_case_t *c)
{
    char name[TH_NAME_MAX], msg[TH_MSG_MAX];
    copy_str(name, sizeof name, c->name[0] ? c->name : "?");
    copy_str(msg, sizeof msg, c->msg);
    sanitize(name);
    for (char *s = name; *s; s++)
        if (*s == ' ')
            *s = '_';
    sanitize(msg);

    double now = th_now();
    double secs = c->seconds > 0 ? c->seconds : now - rep->last_t;
    rep->last_t = now;

    char line[TH_NAME_MAX + TH_MSG_MAX + 160];
    int n = snprintf(line, sizeof line,
                     "C\t%s\t%d\t%d\t%zu\t%zu\t%d\t%016llx\t%.6f\t%s\n",
                     name, c->ok ? 1 : 0, c->rc, c->nwrong, c->first_wrong,
                     c->has_hash ? 1 : 0, (unsigned long long)c->hash, secs,
                     msg);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line) {
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    write_all(rep->fd, line, (size_t)n);
    rep->ncases++;
    if (!c->ok)
        rep->failures++;
}

void th_report_check(th_report_t *rep, const char *name, tnt_result_t rc,
                     size_t nwrong, size_t first_wrong, const void *buf,
                     size_t bytes)
{
    th_case_t c;
    memset(&c, 0, sizeof c);
    copy_str(c.name, sizeof c.name, name);
    c.rc = rc;
    c.nwrong = nwrong;
    c.first_wrong = nwrong ? first_wrong : 0;
    c.ok = rc == TNT_SUCCESS && nwrong == 0;
    if (buf && rc == TNT_SUCCESS) {
        c.has_hash = 1;
        c.hash = tnt_gen_hash(buf, bytes);
    }
    /* Wrong elements need no words: the parent prints the counts. */
    if (rc != TNT_SUCCESS)
        snprintf(c.msg, sizeof c.msg, "%s: %s", tnt_strerror(rc),
                 tnt_last_error());
    th_report_case(rep, &c);
}

void th_report_expect(th_report_t *rep, const char *name, int ok,
                      tnt_result_t rc, const char *fmt, ...)
{
    th_case_t c;
    memset(&c, 0, sizeof c);
    copy_str(c.name, sizeof c.name, name);
    c.ok = ok;
    c.rc = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c.msg, sizeof c.msg, fmt, ap);
    va_end(ap);
    th_report_case(rep, &c);
}

int th_report_failures(const th_report_t *rep)
{
    return rep->failures;
}

/* Apply "K=V" (set) or "K" (unset). */
static void apply_env(const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq) {
        unsetenv(kv);
        return;
    }
    char key[128];
    size_t klen = (size_t)(eq - kv);
    if (klen == 0 || klen >= sizeof key)
        return;
    memcpy(key, kv, klen);
    key[klen] = '\0';
    setenv(key, eq + 1, 1);
}

static void set_default_seconds(const char *name, double secs)
{
    char v[32];
    snprintf(v, sizeof v, "%.0f", secs);
    setenv(name, v, 0); /* the caller's own setting wins */
}

static void child_main(const th_job_t *job, int rank, int fd,
                       const char *addr, const char *key, pid_t parent)
{
    /* Die with the test runner, whatever kills it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(3);

    char v[32];
    snprintf(v, sizeof v, "%d", rank);
    setenv("TNT_RANK", v, 1);
    snprintf(v, sizeof v, "%d", job->nranks);
    setenv("TNT_SIZE", v, 1);
    setenv("TNT_ROOT_ADDR", addr, 1);
    setenv("TNT_JOB_KEY", key, 1);
    double mult = th_timeout_mult();
    set_default_seconds("TNT_TIMEOUT", TH_DEFAULT_OP_TIMEOUT_S * mult);
    set_default_seconds("TNT_CONNECT_TIMEOUT",
                        TH_DEFAULT_CONNECT_TIMEOUT_S * mult);
    for (const char *const *e = job->env; e && *e; e++)
        apply_env(*e);

    th_report_t rep = {fd, rank, 0, 0, th_now()};
    tnt_comm_t comm = NULL;
    int frc = 0;
    if (!job->no_init) {
        tnt_result_t rc = tnt_comm_init_from_env(&comm);
        th_report_check(&rep, "init", rc, 0, 0, NULL, 0);
        if (rc != TNT_SUCCESS)
            goto end;
        int r = -1, n = -1;
        tnt_result_t rc1 = tnt_comm_rank(comm, &r);
        tnt_result_t rc2 = tnt_comm_size(comm, &n);
        th_report_expect(&rep, "init_rank_size",
                         rc1 == TNT_SUCCESS && rc2 == TNT_SUCCESS &&
                             r == rank && n == job->nranks,
                         rc1 ? rc1 : rc2,
                         "comm says rank %d of %d, launched as %d of %d", r,
                         n, rank, job->nranks);
    }
    frc = job->fn(comm, rank, job->nranks, job->arg, &rep);
    if (comm) {
        tnt_result_t rc = tnt_comm_free(comm);
        th_report_check(&rep, "comm_free", rc, 0, 0, NULL, 0);
    }
end:;
    char line[64];
    int n = snprintf(line, sizeof line, "E\t%zu\n", rep.ncases);
    write_all(fd, line, (size_t)n);
    close(fd);
    /* exit(), not _exit(): sanitizer leak checks run at exit. The parent
     * flushed stdio before forking, so nothing is printed twice. */
    exit(frc != 0 || rep.failures != 0 ? 1 : 0);
}

/* ---- parent side: collecting reports ------------------------------------ */

static th_case_t *push_case(th_rank_result_t *rr)
{
    if (rr->ncases == rr->cap) {
        size_t cap = rr->cap ? rr->cap * 2 : 64;
        th_case_t *c = realloc(rr->cases, cap * sizeof *c);
        if (!c)
            return NULL;
        rr->cases = c;
        rr->cap = cap;
    }
    th_case_t *c = &rr->cases[rr->ncases++];
    memset(c, 0, sizeof *c);
    return c;
}

/* Parse one line of a child's report. Malformed lines become failed
 * cases, so a corrupted pipe cannot pass for success. */
static void parse_line(th_rank_result_t *rr, char *line)
{
    if (line[0] == 'E' && line[1] == '\t') {
        rr->finished = 1;
        return;
    }
    char *f[10];
    int nf = 0;
    char *p = line;
    if (line[0] == 'C' && line[1] == '\t') {
        p = line + 2;
        f[nf++] = p;
        while (nf < 10 && (p = strchr(p, '\t')) != NULL) {
            *p++ = '\0';
            f[nf++] = p;
        }
    }
    th_case_t *c = push_case(rr);
    if (!c)
        return;
    if (nf < 9) {
        snprintf(c->name, sizeof c->name, "malformed-report");
        snprintf(c->msg, sizeof c->msg, "unparsable report line '%.200s'",
                 line);
        return;
    }
    copy_str(c->name, sizeof c->name, f[0]);
    c->ok = atoi(f[1]) == 1;
    c->rc = atoi(f[2]);
    c->nwrong = (size_t)strtoull(f[3], NULL, 10);
    c->first_wrong = (size_t)strtoull(f[4], NULL, 10);
    c->has_hash = atoi(f[5]) == 1;
    c->hash = strtoull(f[6], NULL, 16);
    c->seconds = strtod(f[7], NULL);
    copy_str(c->msg, sizeof c->msg, nf > 8 ? f[8] : "");
}

/* Read what is available; returns 0 at EOF, 1 otherwise. */
static int drain(th_child_t *ch, th_rank_result_t *rr)
{
    for (;;) {
        if (ch->cap - ch->len < 4096) {
            size_t cap = ch->cap ? ch->cap * 2 : 8192;
            char *b = realloc(ch->buf, cap);
            if (!b)
                return 1;
            ch->buf = b;
            ch->cap = cap;
        }
        ssize_t n = read(ch->fd, ch->buf + ch->len, ch->cap - ch->len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 1;
            return 0;
        }
        if (n == 0)
            return 0;
        ch->len += (size_t)n;
        ch->buf[ch->len] = '\0';
        char *start = ch->buf, *nl;
        while ((nl = memchr(start, '\n', ch->len - (size_t)(start - ch->buf)))) {
            *nl = '\0';
            parse_line(rr, start);
            start = nl + 1;
        }
        size_t rest = ch->len - (size_t)(start - ch->buf);
        memmove(ch->buf, start, rest);
        ch->len = rest;
    }
}

static void reap(th_child_t *ch, th_rank_result_t *rr, int block)
{
    if (rr->reaped || ch->pid <= 0)
        return;
    int st;
    pid_t r;
    do
        r = waitpid(ch->pid, &st, block ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r != ch->pid)
        return;
    rr->reaped = 1;
    if (WIFEXITED(st)) {
        rr->exited = 1;
        rr->exit_status = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        rr->signo = WTERMSIG(st);
    }
}

static const char *last_case_name(const th_rank_result_t *rr)
{
    return rr->ncases ? rr->cases[rr->ncases - 1].name : "(none)";
}

/* One attempt at the job. Returns 1 if rank 0 could not bind the port
 * (someone else took it): the caller retries with another. */
static int run_once(const th_job_t *job, th_result_t *res)
{
    int n = job->nranks;
    double mult = th_timeout_mult();
    int port = th_free_port();
    char addr[64], key[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port > 0 ? port : 1);
    make_job_key(key, sizeof key);

    th_child_t *ch = calloc((size_t)n, sizeof *ch);
    res->ranks = calloc((size_t)n, sizeof *res->ranks);
    res->nranks = n;
    res->grace_rank = -1;
    if (!ch || !res->ranks) {
        free(ch);
        return 0;
    }
    for (int r = 0; r < n; r++) {
        ch[r].fd = -1;
        ch[r].pid = -1;
    }

    fflush(NULL);
    double t0 = th_now();
    pid_t self = getpid();
    int started = 0;
    for (int r = 0; r < n; r++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0)
            break;
        pid_t pid = fork();
        if (pid < 0) {
            close(p[0]);
            close(p[1]);
            break;
        }
        if (pid == 0) {
            for (int q = 0; q < r; q++)
                if (ch[q].fd >= 0)
                    close(ch[q].fd);
            close(p[0]);
            /* The parent's bookkeeping is no business of the child's (and
             * would show up in its leak check). */
            free(ch);
            child_main(job, r, p[1], addr, key, self);
        }
        close(p[1]);
        fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
        ch[r].pid = pid;
        ch[r].fd = p[0];
        started++;
    }
    if (started < n)
        th_assert_fmt(0, __FILE__, __LINE__,
                      "job %s: could only start %d of %d ranks: %s",
                      job->name, started, n, strerror(errno));

    double deadline = t0 + job->deadline_s * mult;
    int port_conflict = 0;
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    int *idx = calloc((size_t)n, sizeof *idx);
    for (;;) {
        int open = 0, unreaped = 0;
        for (int r = 0; r < started; r++) {
            if (ch[r].fd >= 0) {
                pfd[open].fd = ch[r].fd;
                pfd[open].events = POLLIN;
                pfd[open].revents = 0;
                idx[open++] = r;
            }
            if (!res->ranks[r].reaped)
                unreaped++;
        }
        if (open == 0 && unreaped == 0)
            break;
        double now = th_now();
        if (now >= deadline) {
            res->timed_out = 1;
            break;
        }
        int ms = (int)((deadline - now) * 1000.0) + 1;
        if (ms > 100)
            ms = 100;
        if (open > 0) {
            poll(pfd, (nfds_t)open, ms);
        } else {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        for (int k = 0; k < open; k++) {
            int r = idx[k];
            if (pfd[k].revents == 0)
                continue;
            if (!drain(&ch[r], &res->ranks[r])) {
                close(ch[r].fd);
                ch[r].fd = -1;
            }
        }
        for (int r = 0; r < started; r++) {
            th_rank_result_t *rr = &res->ranks[r];
            int was = rr->reaped;
            reap(&ch[r], rr, 0);
            if (!was && rr->reaped && ch[r].fd >= 0 &&
                !drain(&ch[r], rr)) {
                /* Its last lines may still sit in the pipe. */
                close(ch[r].fd);
                ch[r].fd = -1;
            }
            if (!was && rr->reaped && (rr->signo || !rr->finished)) {
                double g = th_now() + TH_GRACE_S * mult;
                if (g < deadline) {
                    deadline = g;
                    if (res->grace_rank < 0)
                        res->grace_rank = r;
                }
            }
        }
        /* Rank 0 could not bind: another process took the port. */
        const th_case_t *c0 = res->ranks[0].ncases
                                  ? &res->ranks[0].cases[0] : NULL;
        if (c0 && !c0->ok && strcmp(c0->name, "init") == 0 &&
            strstr(c0->msg, "in use")) {
            port_conflict = 1;
            break;
        }
    }
    /* Kill whatever is left (deadline or port conflict) and reap all. */
    for (int r = 0; r < started; r++) {
        if (!res->ranks[r].reaped) {
            kill(ch[r].pid, SIGKILL);
            reap(&ch[r], &res->ranks[r], 1);
        }
        if (ch[r].fd >= 0) {
            /* Reports written just before the kill still count. */
            drain(&ch[r], &res->ranks[r]);
            close(ch[r].fd);
        }
        free(ch[r].buf);
    }
    for (int r = started; r < n; r++)
        res->ranks[r].reaped = 1;
    res->elapsed_s = th_now() - t0;
    free(pfd);
    free(idx);
    free(ch);
    return port_conflict;
}

/* ---- parent side: judging ------------------------------------------------ */

static const th_case_t *find_in(const th_rank_result_t *rr, size_t hint,
                                const char *name)
{
    if (hint < rr->ncases && strcmp(rr->cases[hint].name, name) == 0)
        return &rr->cases[hint];
    for (size_t i = 0; i < rr->ncases; i++)
        if (strcmp(rr->cases[i].name, name) == 0)
            return &rr->cases[i];
    return NULL;
}

const th_case_t *th_find_case(const th_result_t *r, int rank,
                              const char *name)
{
    if (!r || rank < 0 || rank >= r->nranks || !r->ranks)
        return NULL;
    return find_in(&r->ranks[rank], 0, name);
}

typedef struct judge {
    const th_job_t *job;
    th_result_t *res;
    int messages;
} judge_t;

static void problem(judge_t *j, int assert, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(judge_t *j, int assert, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (j->res->failures++ == 0)
        copy_str(j->res->first_problem, sizeof j->res->first_problem, msg);
    if (!assert || j->job->quiet >= 2 || j->messages >= TH_MAX_MESSAGES)
        return;
    j->messages++;
    th_assert_fmt(0, __FILE__, __LINE__, "job %s: %s", j->job->name, msg);
}

static void judge(const th_job_t *job, th_result_t *res)
{
    judge_t j = {job, res, 0};
    int n = res->nranks;
    /* Crashes, timeouts and lost ranks are always the harness's to
     * report; failed cases only when the caller did not ask to judge. */
    int cases_assert = job->quiet == 0;

    if (res->timed_out) {
        char who[256] = "";
        size_t k = 0;
        for (int r = 0; r < n && k + 48 < sizeof who; r++)
            if (!res->ranks[r].finished)
                k += (size_t)snprintf(who + k, sizeof who - k,
                                      " %d (after '%s')", r,
                                      last_case_name(&res->ranks[r]));
        if (res->grace_rank >= 0)
            problem(&j, 1, "rank %d died; the others were killed %.0f s "
                    "later, after %.1f s in all; ranks not finished:%s",
                    res->grace_rank, TH_GRACE_S * th_timeout_mult(),
                    res->elapsed_s, who);
        else
            problem(&j, 1, "timed out after %.1f s and was killed; ranks "
                    "not finished:%s", res->elapsed_s, who);
    }
    for (int r = 0; r < n; r++) {
        const th_rank_result_t *rr = &res->ranks[r];
        if (rr->signo && !(res->timed_out && rr->signo == SIGKILL))
            problem(&j, 1, "rank %d was killed by signal %d (%s) after "
                    "case '%s'", r, rr->signo, strsignal(rr->signo),
                    last_case_name(rr));
        else if (!rr->finished && !res->timed_out)
            problem(&j, 1, "rank %d ended without finishing its cases "
                    "(exit status %d) after case '%s'", r,
                    rr->exit_status, last_case_name(rr));
        int failed_cases = 0;
        for (size_t i = 0; i < rr->ncases; i++) {
            const th_case_t *c = &rr->cases[i];
            if (c->ok)
                continue;
            failed_cases++;
            if (c->nwrong)
                problem(&j, cases_assert, "rank %d case '%s': %zu wrong "
                        "elements, first wrong index %zu (rc %d %s) %s", r,
                        c->name, c->nwrong, c->first_wrong, c->rc,
                        tnt_strerror((tnt_result_t)c->rc), c->msg);
            else
                problem(&j, cases_assert, "rank %d case '%s' failed: rc %d "
                        "(%s): %s", r, c->name, c->rc,
                        tnt_strerror((tnt_result_t)c->rc), c->msg);
        }
        if (rr->exited && rr->exit_status != 0 && rr->finished &&
            !(failed_cases && rr->exit_status == 1))
            problem(&j, 1, "rank %d exited with status %d although %s "
                    "(a sanitizer report? see stderr)", r, rr->exit_status,
                    failed_cases ? "only case failures were expected"
                                 : "all its cases passed");
    }

    /* Every case reported by any rank must be reported by every rank
     * that finished, with the same result hash. A case is judged from
     * the lowest rank that has it. */
    for (int r = 0; r < n; r++) {
        const th_rank_result_t *rr = &res->ranks[r];
        for (size_t i = 0; i < rr->ncases; i++) {
            const th_case_t *c = &rr->cases[i];
            int seen_lower = 0;
            for (int q = 0; q < r && !seen_lower; q++)
                seen_lower = find_in(&res->ranks[q], i, c->name) != NULL;
            if (seen_lower)
                continue;
            for (int q = 0; q < n; q++) {
                if (q == r)
                    continue;
                const th_rank_result_t *qr = &res->ranks[q];
                const th_case_t *d = find_in(qr, i, c->name);
                if (!d) {
                    if (qr->finished)
                        problem(&j, 1, "case '%s' was reported by rank %d "
                                "but never by rank %d", c->name, r, q);
                    continue;
                }
                if (c->has_hash && d->has_hash && c->hash != d->hash)
                    problem(&j, cases_assert, "case '%s': result of rank %d "
                            "(hash %016llx) differs from rank %d (hash "
                            "%016llx): ranks must agree bitwise", c->name,
                            q, (unsigned long long)d->hash, r,
                            (unsigned long long)c->hash);
            }
        }
    }
    if (j.messages >= TH_MAX_MESSAGES)
        th_assert_fmt(0, __FILE__, __LINE__,
                      "job %s: %d problems in all (only the first %d shown)",
                      job->name, res->failures, TH_MAX_MESSAGES);
}

/* The job's wall time and its slowest cases on rank 0. */
static void print_timing(const th_job_t *job, const th_result_t *res)
{
    printf("  [job %s: %.1f s", job->name, res->elapsed_s);
    const th_rank_result_t *rr = &res->ranks[0];
    const th_case_t *top[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < rr->ncases; i++) {
        const th_case_t *c = &rr->cases[i];
        for (int k = 0; k < 3; k++) {
            if (!top[k] || c->seconds > top[k]->seconds) {
                for (int m = 2; m > k; m--)
                    top[m] = top[m - 1];
                top[k] = c;
                break;
            }
        }
    }
    for (int k = 0; k < 3 && top[k] && top[k]->seconds >= 0.5; k++)
        printf("%s %s %.1f s", k ? "," : "; slowest:", top[k]->name,
               top[k]->seconds);
    printf("]\n");
}

void th_result_free(th_result_t *r)
{
    if (!r || !r->ranks)
        return;
    for (int i = 0; i < r->nranks; i++)
        free(r->ranks[i].cases);
    free(r->ranks);
    r->ranks = NULL;
}

int th_run_job(const th_job_t *job, th_result_t *out)
{
    th_result_t res;
    for (int attempt = 1;; attempt++) {
        memset(&res, 0, sizeof res);
        if (job->nranks < 1 || !job->fn) {
            th_assert_fmt(0, __FILE__, __LINE__, "job %s: bad job spec",
                          job->name ? job->name : "?");
            if (out)
                *out = res;
            return 1;
        }
        int conflict = run_once(job, &res);
        if (!conflict || attempt == TH_PORT_ATTEMPTS)
            break;
        fprintf(stderr, "harness: job %s: port taken by another process, "
                "retrying with a new one\n", job->name);
        th_result_free(&res);
    }
    judge(job, &res);
    /* Slow jobs are worth knowing about when the suite's time grows. */
    const char *verbose = getenv("TNT_TEST_VERBOSE");
    if ((verbose && *verbose && strcmp(verbose, "0") != 0) ||
        res.elapsed_s >= 5.0)
        print_timing(job, &res);
    int failures = res.failures;
    if (failures == 0) /* counted by CUnit: one passed assert per job */
        th_assert_fmt(1, __FILE__, __LINE__, "job %s", job->name);
    if (out)
        *out = res;
    else
        th_result_free(&res);
    return failures;
}

int th_run(int nranks, const char *const *env, th_rank_fn fn, void *arg,
           double deadline_s, th_result_t *out)
{
    char name[512];
    size_t k = (size_t)snprintf(name, sizeof name, "[p=%d", nranks);
    for (const char *const *e = env; e && *e && k < sizeof name; e++)
        k += (size_t)snprintf(name + k, sizeof name - k, " %s", *e);
    if (k < sizeof name)
        snprintf(name + k, sizeof name - k, "]");
    th_job_t job = {name, nranks, env, fn, arg, deadline_s, 0, 0};
    /* Positional on purpose: a new field must be thought about here. */
    return th_run_job(&job, out);
}

int th_main(int argc, char **argv, const th_test_def_t *tests)
{
    const char *only_suite = argc > 1 ? argv[1] : NULL;
    const char *only_test = argc > 2 ? argv[2] : NULL;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite suite = NULL;
    const char *cur = NULL;
    int registered = 0;
    for (const th_test_def_t *t = tests; t->suite; t++) {
        if ((only_suite && strcmp(only_suite, t->suite) != 0) ||
            (only_test && strcmp(only_test, t->name) != 0))
            continue;
        if (!cur || strcmp(cur, t->suite) != 0) {
            suite = CU_add_suite(t->suite, NULL, NULL);
            if (!suite)
                return 2;
            cur = t->suite;
        }
        if (!CU_add_test(suite, t->name, t->fn))
            return 2;
        registered++;
    }
    if (!registered) {
        fprintf(stderr, "no test matches the arguments\n");
        CU_cleanup_registry();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}

int th_garbage_closed(int fd, size_t len, double timeout_s)
{
    unsigned char junk[4096];
    if (len > sizeof junk)
        len = sizeof junk;
    th_rng_t r = {(uint64_t)(th_now() * 1e9) ^ (uint64_t)getpid()};
    for (size_t k = 0; k < len; k++)
        junk[k] = (unsigned char)th_rnd(&r);
    /* Closed before the bytes went out: refused all the same. */
    if (send(fd, junk, len, MSG_NOSIGNAL) != (ssize_t)len)
        return errno == EPIPE || errno == ECONNRESET;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    double end = th_now() + timeout_s;
    while (th_now() < end) {
        if (poll(&p, 1, 100) <= 0)
            continue;
        char b[512];
        ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 1;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return 0;
    }
    return 0;
}

uint64_t th_rnd(th_rng_t *r)
{
    uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

size_t th_rnd_below(th_rng_t *r, size_t n)
{
    return n ? (size_t)(th_rnd(r) % n) : 0;
}

void th_sleep(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
