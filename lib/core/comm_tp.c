/*
 * A communicator's transports, and which one each peer gets. With
 * TNT_TRANSPORT=auto every built-in transport starts and each publishes
 * its address; the bootstrap blob of a rank is the list of them, one
 * length byte and the address per transport, in table order (length 0:
 * not running there). A peer gets shared memory when both ranks run it
 * and their host identities are equal (hostid.c), else RDMA verbs when
 * both run it (auto: an active port exists), else TCP. Both
 * sides of a pair see the same table and apply the same rule, so they
 * agree on the transport without another message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_tp.h"
#include "util/error.h"
#include "util/log.h"
#include "transport/transport.h"

_Static_assert(TNT_TP_COUNT <= TNT_TP_MAX, "engine.h: raise TNT_TP_MAX");

tnt_result_t tnt__comm_tp_init(struct tnt_comm *comm)
{
    unsigned mask;
    TNT_CHECK(tnt__transport_mask(getenv("TNT_TRANSPORT"), &mask));
    for (int i = 0; i < TNT_TP_COUNT; i++) {
        if (!(mask & (1u << i)) || !tnt__transport_get(i))
            continue;
        comm->tp[i] = tnt__transport_get(i);
        tnt__engine_fill_env(comm, i);
        comm->tp_env[i].bind_ip = comm->bind_ip;
        TNT_CHECK(comm->tp[i]->init(&comm->tp_env[i], &comm->tp_ctx[i]));
    }
    return TNT_SUCCESS;
}

/* A transport that cannot listen is dropped when others remain to reach
 * the peers it would have served (auto); when it was asked for by name,
 * its failure is the communicator's. */
static tnt_result_t drop_or_fail(struct tnt_comm *comm, int i,
                                 tnt_result_t rc)
{
    int others = 0;
    for (int j = 0; j < TNT_TP_COUNT; j++)
        others += j != i && comm->tp[j] != NULL;
    if (!others || i == TNT_TP_TCP)
        return rc;
    TNT_LOG_WARN("rank %d: transport %s unavailable, using the others: %s",
                 comm->rank, comm->tp[i]->name, tnt_last_error());
    comm->tp[i]->finalize(comm->tp_ctx[i]);
    comm->tp[i] = NULL;
    comm->tp_ctx[i] = NULL;
    return TNT_SUCCESS;
}

tnt_result_t tnt__comm_tp_listen(struct tnt_comm *comm, void *blob,
                                 size_t *len)
{
    unsigned char *b = blob;
    size_t cap = *len, off = 0;
    for (int i = 0; i < TNT_TP_COUNT; i++) {
        unsigned char addr[TNT_TRANSPORT_ADDR_MAX];
        size_t alen = 0;
        if (comm->tp[i]) {
            alen = sizeof(addr);
            tnt_result_t rc = comm->tp[i]->listen(comm->tp_ctx[i], addr,
                                                  &alen);
            if (rc != TNT_SUCCESS) {
                TNT_CHECK(drop_or_fail(comm, i, rc));
                alen = 0;
            }
        }
        if (alen > 255 || off + 1 + alen > cap)
            return tnt__error(TNT_ERR_INTERNAL, "transport addresses do "
                              "not fit the bootstrap entry");
        b[off++] = (unsigned char)alen;
        memcpy(b + off, addr, alen);
        off += alen;
    }
    *len = off;
    return TNT_SUCCESS;
}

tnt_result_t tnt__comm_tp_assign(struct tnt_comm *comm, tnt_peer_t *p,
                                 const void *blob, size_t len)
{
    const unsigned char *b = blob;
    const unsigned char *addr[TNT_TP_COUNT] = {0};
    size_t alen[TNT_TP_COUNT] = {0}, off = 0;
    for (int i = 0; i < TNT_TP_COUNT; i++) {
        if (off >= len || off + 1 + b[off] > len)
            return tnt__error(TNT_ERR_PROTOCOL, "rank %d: malformed address "
                              "of rank %d", comm->rank, p->rank);
        alen[i] = b[off++];
        addr[i] = b + off;
        off += alen[i];
    }
    int same_host = strcmp(p->host, comm->host) == 0;
    int pick = -1;
    if (comm->tp[TNT_TP_SHM] && alen[TNT_TP_SHM] && same_host)
        pick = TNT_TP_SHM;
    else if (comm->tp[TNT_TP_VERBS] && alen[TNT_TP_VERBS])
        pick = TNT_TP_VERBS;
    else if (comm->tp[TNT_TP_TCP] && alen[TNT_TP_TCP])
        pick = TNT_TP_TCP;
    if (pick < 0 && !comm->tp[TNT_TP_TCP] && !comm->tp[TNT_TP_VERBS] &&
        !same_host)
        return tnt__error(TNT_ERR_CONFIG, "rank %d (host %s): "
                          "TNT_TRANSPORT=shm but rank %d is on host %s; "
                          "shared memory reaches only ranks of one host "
                          "(use auto or tcp)", comm->rank, comm->host,
                          p->rank, p->host);
    if (pick < 0)
        return tnt__error(TNT_ERR_CONFIG, "rank %d has no transport in "
                          "common with rank %d (host %s); is TNT_TRANSPORT "
                          "the same on every rank?", comm->rank, p->rank,
                          p->host);
    p->tpi = pick;
    p->tp = comm->tp[pick];
    p->tp_ctx = comm->tp_ctx[pick];
    p->addr_len = alen[pick];
    memcpy(p->addr, addr[pick], alen[pick]);
    return TNT_SUCCESS;
}

int tnt__comm_tp_runs(const void *blob, size_t len, int tpi)
{
    const unsigned char *b = blob;
    size_t off = 0;
    for (int i = 0; i < TNT_TP_COUNT; i++) {
        if (off >= len || off + 1 + b[off] > len)
            return 0;
        if (i == tpi)
            return b[off] > 0;
        off += 1 + (size_t)b[off];
    }
    return 0;
}

void tnt__comm_tp_finalize(struct tnt_comm *comm)
{
    for (int i = 0; i < TNT_TP_COUNT; i++)
        if (comm->tp_ctx[i])
            comm->tp[i]->finalize(comm->tp_ctx[i]);
}

void tnt__comm_tp_describe(const struct tnt_comm *comm, char *out,
                           size_t n)
{
    int count[TNT_TP_COUNT] = {0};
    for (int i = 0; i < comm->nranks; i++)
        if (i != comm->rank && comm->peers[i].tp)
            count[comm->peers[i].tpi]++;
    size_t len = (size_t)snprintf(out, n, "transport");
    for (int i = 0; i < TNT_TP_COUNT && len < n; i++)
        if (comm->tp[i])
            len += (size_t)snprintf(out + len, n - len, " %s (%d peer%s)",
                                    comm->tp[i]->name, count[i],
                                    count[i] == 1 ? "" : "s");
}
