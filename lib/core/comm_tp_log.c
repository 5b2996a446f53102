/*
 * The INFO line of a new communicator: which transport each peer uses
 * and why, the line users look for as they do NCCL_DEBUG=INFO's. Once per
 * communicator (rank 0's by default, every rank's with
 * TNT_LOG_ALL_RANKS=1), compact however many ranks: consecutive peers
 * with the same transport and the same answer to "same host?" form one
 * range, e.g.
 *   rank 0: peers 1-3 over shm (same host), 4-7 over tcp (other host;
 *   verbs: no active RDMA port)
 * After the host, each transport preferred to the one picked says why it
 * does not serve the range: not started here (tnt__comm_tp_init's
 * reason), or the first refusal its `reachable` gave
 * (tnt__comm_tp_assign), or the peers do not run it.
 */
#include <stdio.h>
#include <string.h>

#include "core/comm_tp.h"
#include "util/log.h"
#include "transport/transport.h"

/* Why transport j, preferred to `pick`, does not serve this range. */
static const char *why_not(const struct tnt_comm *comm, int j)
{
    if (!comm->net.tp[j])
        return comm->net.off[j][0] ? comm->net.off[j] : NULL;
    if (comm->net.refused[j][0])
        return comm->net.refused[j];
    return "the peers do not run it";
}

/* Preference of position j, started or not (built-ins' fixed ones). */
static int preference(const struct tnt_comm *comm, int j)
{
    if (comm->net.tp[j])
        return comm->net.tp[j]->preference;
    const tnt_transport_t *t = tnt__transport_get(j);
    return t ? t->preference : (j == TNT_TP_VERBS ? 200 : -1);
}

static const char *tp_name(const struct tnt_comm *comm, int j)
{
    static const char *const builtin[TNT_TP_COUNT] = {"tcp", "shm", "verbs",
                                                      "plugin"};
    return comm->net.tp[j] ? comm->net.tp[j]->name : builtin[j];
}

/* Append one range [lo, hi] over pick to out. */
static size_t put_range(const struct tnt_comm *comm, char *out, size_t n,
                        size_t len, int lo, int hi, int pick, int same)
{
    if (len >= n)
        return len;
    len += (size_t)snprintf(out + len, n - len, "%s", len ? ", " : "");
    if (len < n && lo == hi)
        len += (size_t)snprintf(out + len, n - len, "%d", lo);
    else if (len < n)
        len += (size_t)snprintf(out + len, n - len, "%d-%d", lo, hi);
    if (len < n)
        len += (size_t)snprintf(out + len, n - len, " over %s (%s host",
                                tp_name(comm, pick), same ? "same" : "other");
    int pref = preference(comm, pick);
    for (int j = 0; j < TNT_TP_COUNT && len < n; j++) {
        const char *why = j != pick && preference(comm, j) > pref
                              ? why_not(comm, j) : NULL;
        if (why)
            len += (size_t)snprintf(out + len, n - len, "; %s: %s",
                                    tp_name(comm, j), why);
    }
    if (len < n)
        len += (size_t)snprintf(out + len, n - len, ")");
    return len;
}

void tnt__comm_tp_log_peers(const struct tnt_comm *comm)
{
    if (comm->nranks < 2 || !tnt__log_enabled(TNT_LOG_INFO))
        return;
    char out[1024];
    size_t len = 0;
    int lo = -1, hi = -1, pick = -1, same = 0;
    for (int q = 0; q <= comm->nranks; q++) {
        const tnt_peer_t *p = q < comm->nranks ? &comm->peers[q] : NULL;
        if (p && (q == comm->rank || !p->tp))
            continue;
        int s = p ? strcmp(p->host, comm->host) == 0 : 0;
        if (p && lo >= 0 && p->tpi == pick && s == same && q == hi + 1) {
            hi = q;
            continue;
        }
        /* A rank's own number splits no range (0-1 and 3 are 0-3 on
         * rank 2: a rank is never its own peer). */
        if (p && lo >= 0 && p->tpi == pick && s == same &&
            q == hi + 2 && hi + 1 == comm->rank) {
            hi = q;
            continue;
        }
        if (lo >= 0)
            len = put_range(comm, out, sizeof(out), len, lo, hi, pick, same);
        if (p) {
            lo = hi = q;
            pick = p->tpi;
            same = s;
        }
    }
    if (len >= sizeof(out))
        memcpy(out + sizeof(out) - 4, "...", 4);
    tnt__log(TNT_LOG_INFO, "rank %d: peers %s", comm->rank, out);
}
