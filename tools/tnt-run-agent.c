/*
 * tnt-run --agent: the launcher's hands on one host of a hostfile. Started
 * through the remote agent (ssh, or any --rsh command), it reads its share
 * of the job from stdin (tnt-run-wire.c), checks that the program exists
 * and, on the host of rank 0, picks the address rank 0 will listen on
 * (TNT_SOCKET_IFNAME's choice, else the first address of an interface that
 * is up and not loopback, with a free port), and says "ok" on stdout. On
 * "go ROOTADDR" it starts its ranks and relays their lines, already
 * prefixed with the global rank; a failed rank is reported as a "failed"
 * line that the launcher acts on at once. Orders from the launcher, and
 * the end of stdin when the launcher or the connection is gone, stop the
 * ranks (tnt-run-job.c), so that nothing outlives the job on this host.
 */
#include "tnt-run.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/ifname.h"

/* The TNT_SOCKET_IFNAME the ranks will see: the job's (-x) or this
 * host's. */
static const char *ifname_spec(const struct run_spec *sp)
{
    const char *spec = getenv("TNT_SOCKET_IFNAME");
    size_t n = strlen("TNT_SOCKET_IFNAME=");
    for (int k = 0; k < sp->nextra; k++)
        if (strncmp(sp->extra[k], "TNT_SOCKET_IFNAME=", n) == 0)
            spec = sp->extra[k] + n;
    return spec;
}

/* Picks rank 0's address on this host. Returns 0, or -1 with err set. */
static int pick_root(const struct run_spec *sp, char *addr, size_t len,
                     char *err, size_t errlen)
{
    char ip[64], why[700];
    if (sp->root_loopback) {
        snprintf(ip, sizeof ip, "127.0.0.1");
    } else if (tnt__ifname_pick(ifname_spec(sp), ip, sizeof ip, NULL, 0,
                                why, sizeof why) != 0) {
        snprintf(err, errlen, "cannot choose rank 0's address on host %s: "
                 "%s", sp->host, why);
        return -1;
    }
    int port = run_free_port(ip);
    if (port < 0) {
        snprintf(err, errlen, "cannot find a free TCP port on %s on host "
                 "%s: %s", ip, sp->host, strerror(errno));
        return -1;
    }
    snprintf(addr, len, strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip, port);
    return 0;
}

static int refuse(int code, const char *msg)
{
    printf(RUN_CTL_PREFIX "error %d %s\n", code, msg);
    fflush(stdout);
    return code;
}

int run_agent_main(void)
{
    struct run_spec sp;
    char err[900], root[96] = "";
    /* A launcher that is gone must not leave us writing into nowhere. */
    signal(SIGPIPE, SIG_IGN);
    if (run_spec_read(STDIN_FILENO, &sp, err, sizeof err) != 0) {
        fprintf(stderr, "tnt-run --agent: %s\n", err);
        run_spec_free(&sp);
        return RUN_EXIT_USAGE;
    }
    int rc = 0;
    if (sp.cwd != NULL && chdir(sp.cwd) != 0) {
        snprintf(err, sizeof err, "cannot change to directory %s on host "
                 "%s: %s", sp.cwd, sp.host, strerror(errno));
        rc = refuse(1, err);
        goto out;
    }
    char *path = run_resolve_program(sp.argv[0]);
    if (path == NULL) {
        snprintf(err, sizeof err, "cannot execute '%s' on host %s: %s",
                 sp.argv[0], sp.host, strerror(errno));
        rc = refuse(RUN_EXIT_NOEXEC, err);
        goto out;
    }
    free(path);
    if (sp.first == 0 && pick_root(&sp, root, sizeof root, err,
                                   sizeof err) != 0) {
        rc = refuse(1, err);
        goto out;
    }
    printf(RUN_CTL_PREFIX "ok %s\n", root);
    fflush(stdout);
    char line[160];
    ssize_t n = run_read_line(STDIN_FILENO, line, sizeof line);
    if (n <= 0 || strncmp(line, "go ", 3) != 0 ||
        strlen(line + 3) >= sizeof sp.root) {
        /* Stopped before the start ("term", "kill", or no launcher). */
        rc = 128 + SIGTERM;
        goto out;
    }
    strcpy(sp.root, line + 3);
    rc = run_local(&sp, STDIN_FILENO, 1);
out:
    run_spec_free(&sp);
    return rc;
}
