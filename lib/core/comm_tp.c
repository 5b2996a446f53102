/*
 * A communicator's transports, and which one each peer gets. With
 * TNT_TRANSPORT=auto every transport of the list (the built-ins and a
 * plugin of TNT_TRANSPORT_PLUGIN) starts and each publishes its address;
 * the bootstrap blob of a rank is the list of them, one length byte and
 * the address per transport, in list order (length 0: not running
 * there). A peer gets, among the transports that both ranks run and that
 * say they reach it (reachable: shared memory only on the same host), the
 * one of highest preference (shm, then verbs, then TCP for the built-ins;
 * ties: the earlier in the list). Both sides of a pair see the same table
 * and apply the same rule, so they agree on the transport without another
 * message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_tp.h"
#include "core/net_group.h"
#include "util/error.h"
#include "util/log.h"
#include "util/param_table.h"
#include "transport/transport.h"

_Static_assert(TNT_TP_COUNT <= TNT_TP_MAX, "engine.h: raise TNT_TP_MAX");

/* The peer_addr service: a transport may look up the bootstrap address
 * of a peer it has not connected to (to prove that peer gone). Only the
 * address of the transport the pair uses; nothing before the table. */
static size_t peer_addr(struct tnt_comm *comm, int tpi, int peer, void *buf,
                        size_t cap)
{
    if (!comm->peers || peer < 0 || peer >= comm->nranks ||
        peer == comm->rank)
        return 0;
    const tnt_peer_t *p = &comm->peers[peer];
    if (!p->tp || p->tpi != tpi || !p->addr_len || p->addr_len > cap)
        return 0;
    memcpy(buf, p->addr, p->addr_len);
    return p->addr_len;
}

/* `peer` is the transports' (the net owner's) rank: any communicator of
 * the group that has it, in its own numbering (the first one may have
 * been freed before those that joined it: core/net_group.h). */
static size_t group_peer_addr(void *core, int tpi, int peer, void *buf,
                              size_t cap)
{
    const struct tnt_net_group *g = core;
    for (struct tnt_comm *c = g->comms; c; c = c->group_next) {
        int r = tnt__net_local(c, peer);
        if (r >= 0)
            return peer_addr(c, tpi, r, buf, cap);
    }
    return 0;
}

static size_t peer_addr0(void *core, int peer, void *buf, size_t cap)
{
    return group_peer_addr(core, 0, peer, buf, cap);
}

static size_t peer_addr1(void *core, int peer, void *buf, size_t cap)
{
    return group_peer_addr(core, 1, peer, buf, cap);
}

static size_t peer_addr2(void *core, int peer, void *buf, size_t cap)
{
    return group_peer_addr(core, 2, peer, buf, cap);
}

static size_t peer_addr3(void *core, int peer, void *buf, size_t cap)
{
    return group_peer_addr(core, 3, peer, buf, cap);
}

/* Why position i does not start here, for the INFO line
 * (comm_tp_log.c): not built (verbs), or left out of the mask: by name
 * (TNT_TRANSPORT=tcp), or under auto, which leaves out only verbs and
 * only when no RDMA port is active. "" when it starts (or an empty
 * plugin position). */
static void off_reason(struct tnt_comm *comm, int i, unsigned mask)
{
    const char *asked = tnt__env(TNT_VAR_TRANSPORT);
    int named = asked && *asked && strcmp(asked, "auto") != 0;
    char *off = comm->net.off[i];
    size_t n = sizeof(comm->net.off[i]);
    if (!tnt__transport_get(i))
        snprintf(off, n, "%s", i == TNT_TP_VERBS ? "not built" : "");
    else if (!(mask & (1u << i)) && named)
        snprintf(off, n, "TNT_TRANSPORT=%.60s", asked);
    else if (!(mask & (1u << i)))
        snprintf(off, n, "no active RDMA port");
}

/* Version 2 of the interface fixed the pair areas' sides, in pages
 * (TNT_TP_AREA_ALIGN), by area id: what a table of version 2 hands
 * out. */
static const size_t v2_area_pages[TNT_TP_AREA_END] = {0, 5, 257};

/* Does the started transport i offer every pair area the core uses
 * (env->pair_area_bytes), at least that large? A table of version 3
 * lays them out by the env; one of version 2 at its fixed sizes. */
static int offers_areas(const struct tnt_comm *comm, int i)
{
    const tnt_transport_t *t = comm->net.tp[i];
    if (!t || !t->pair_area)
        return 0;
    if (t->version >= 3)
        return 1;
    for (int a = 0; a < TNT_TP_AREA_END; a++)
        if (comm->net.tp_env[i].pair_area_bytes[a] >
            v2_area_pages[a] * TNT_TP_AREA_ALIGN)
            return 0;
    return 1;
}

tnt_result_t tnt__comm_tp_init(struct tnt_comm *comm,
                               void (*fill_env)(struct tnt_comm *, int))
{
    static size_t (*const addr_fn[TNT_TP_MAX])(void *, int, void *,
                                               size_t) = {
        peer_addr0, peer_addr1, peer_addr2, peer_addr3};
    const char *plugin = tnt__env(TNT_VAR_TRANSPORT_PLUGIN);
    if (plugin)
        TNT_CHECK(tnt__transport_plugin_load(plugin));
    unsigned mask;
    TNT_CHECK(tnt__transport_mask(tnt__env(TNT_VAR_TRANSPORT), &mask));
    for (int i = 0; i < TNT_TP_COUNT; i++) {
        off_reason(comm, i, mask);
        if (!(mask & (1u << i)) || !tnt__transport_get(i))
            continue;
        comm->net.tp[i] = tnt__transport_get(i);
        fill_env(comm, i);
        comm->net.tp_env[i].peer_addr = addr_fn[i];
        comm->net.tp_env[i].bind_ip = comm->net.bind_ip;
        tnt_result_t rc =
            comm->net.tp[i]->init(&comm->net.tp_env[i], &comm->net.tp_ctx[i]);
        /* auto proved only that an active port exists: a device that
         * then cannot be opened (or has no usable GID for this rank's
         * choice) leaves TCP between hosts, said once, with the reason. */
        if (rc != TNT_SUCCESS && i == TNT_TP_VERBS &&
            (mask & (1u << TNT_TP_TCP))) {
            TNT_LOG_WARN("rank %d: TNT_TRANSPORT=auto: RDMA verbs unusable "
                         "here, TCP between hosts instead: %s", comm->rank,
                         tnt_last_error());
            comm->net.tp[i] = NULL;
            comm->net.tp_ctx[i] = NULL;
            snprintf(comm->net.off[i], sizeof(comm->net.off[i]),
                     "unusable");
            continue;
        }
        TNT_CHECK(rc);
    }
    /* The same on every rank: the list and TNT_TRANSPORT are. */
    comm->net.area_tpi = -1;
    for (int i = 0; i < TNT_TP_COUNT && comm->net.area_tpi < 0; i++)
        if (offers_areas(comm, i))
            comm->net.area_tpi = i;
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
        others += j != i && comm->net.tp[j] != NULL;
    if (!others || i == TNT_TP_TCP)
        return rc;
    TNT_LOG_WARN("rank %d: transport %s unavailable, using the others: %s",
                 comm->rank, comm->net.tp[i]->name, tnt_last_error());
    comm->net.tp[i]->finalize(comm->net.tp_ctx[i]);
    comm->net.tp[i] = NULL;
    comm->net.tp_ctx[i] = NULL;
    snprintf(comm->net.off[i], sizeof(comm->net.off[i]), "cannot listen");
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
        if (comm->net.tp[i]) {
            alen = sizeof(addr);
            tnt_result_t rc =
                comm->net.tp[i]->listen(comm->net.tp_ctx[i], addr, &alen);
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

/* The transports a spinning waiter polls: those with a poll entry that
 * serve some peer, the ones whose look is a system call last (where ranks
 * share CPUs, only the first nspin_cheap are polled). */
static void spin_list(struct tnt_comm *comm)
{
    int n = 0;
    comm->net.spin_polls_all = 1;
    for (int i = 0; i < TNT_TP_COUNT; i++)
        if (comm->net.tp[i] && comm->net.tp_serves[i] &&
            !comm->net.tp[i]->poll)
            comm->net.spin_polls_all = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < TNT_TP_COUNT; i++) {
            const tnt_transport_t *t = comm->net.tp[i];
            if (!t || !t->poll || !comm->net.tp_serves[i] ||
                !!(t->caps & TNT_TP_POLL_SYSCALLS) != pass)
                continue;
            comm->net.spin_tp[n].poll = t->poll;
            comm->net.spin_tp[n].ctx = comm->net.tp_ctx[i];
            comm->net.spin_tp[n].caps = t->caps;
            n++;
        }
        if (pass == 0)
            comm->net.nspin_cheap = n;
    }
    comm->net.nspin_tp = n;
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
    int pick = -1, running = 0;
    char why[TNT_TP_COUNT][160];
    for (int i = 0; i < TNT_TP_COUNT; i++) {
        const tnt_transport_t *t = comm->net.tp[i];
        why[i][0] = '\0';
        if (!t || !alen[i])
            continue;
        running++;
        if (t->reachable &&
            !t->reachable(comm->net.tp_ctx[i], p->rank, p->host, addr[i],
                          alen[i], why[i], sizeof(why[i]))) {
            /* The first reason, cut to fit. */
            if (!comm->net.refused[i][0]) {
                const char *r = why[i][0] ? why[i] : "does not reach it";
                size_t rl = strnlen(r, sizeof(comm->net.refused[i]) - 1);
                memcpy(comm->net.refused[i], r, rl);
                comm->net.refused[i][rl] = '\0';
            }
            continue;
        }
        if (pick < 0 || t->preference > comm->net.tp[pick]->preference)
            pick = i;
    }
    /* This rank runs verbs but the peer does not (no device there, or it
     * fell back): TCP, with one WARNING per process naming the first. */
    static int warned_no_verbs;
    if (pick == TNT_TP_TCP && comm->net.tp[TNT_TP_VERBS] &&
        !alen[TNT_TP_VERBS] && !warned_no_verbs) {
        warned_no_verbs = 1;
        TNT_LOG_WARN("rank %d: rank %d (host %s) has no RDMA verbs; TCP "
                     "with it (and any other such peer)", comm->rank,
                     p->rank, p->host);
    }
    if (pick < 0 && running) {
        char all[TNT_TP_COUNT * 200] = "";
        size_t n = 0;
        for (int i = 0; i < TNT_TP_COUNT && n < sizeof(all); i++)
            if (why[i][0])
                n += (size_t)snprintf(all + n, sizeof(all) - n, "; %s: %s",
                                      comm->net.tp[i]->name, why[i]);
        const char *asked = tnt__env(TNT_VAR_TRANSPORT);
        return tnt__error(TNT_ERR_CONFIG, "rank %d (host %s): "
                          "TNT_TRANSPORT=%s runs no transport that reaches "
                          "rank %d (host %s)%s (use auto or tcp)",
                          comm->rank, comm->host,
                          asked && *asked ? asked : "auto", p->rank,
                          p->host, all);
    }
    if (pick < 0)
        return tnt__error(TNT_ERR_CONFIG, "rank %d has no transport in "
                          "common with rank %d (host %s); is TNT_TRANSPORT "
                          "the same on every rank?", comm->rank, p->rank,
                          p->host);
    if (!comm->net.tp_serves[pick]) {
        comm->net.tp_serves[pick] = 1;
        spin_list(comm);
    }
    p->tpi = pick;
    p->tp = comm->net.tp[pick];
    p->tp_ctx = comm->net.tp_ctx[pick];
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

void tnt__comm_tp_pair_area(struct tnt_comm *comm, int q, int area,
                            void **mine, const void **theirs)
{
    tnt_peer_t *p = &comm->peers[q];
    size_t len = 0;
    *mine = NULL;
    *theirs = NULL;
    if (p->tp && p->tp->pair_area_at)
        p->tp->pair_area_at(p->tp_ctx, p->ep, comm->area_ctx, area, mine,
                            theirs, &len);
    else if (p->tp && p->tp->pair_area && comm->area_ctx == 0)
        p->tp->pair_area(p->tp_ctx, p->ep, area, mine, theirs, &len);
}

unsigned tnt__comm_tp_area_contexts(const struct tnt_comm *comm)
{
    if (comm->net.area_tpi < 0)
        return 0;
    const tnt_transport_t *t = comm->net.tp[comm->net.area_tpi];
    return t->pair_area_at && t->pair_area_clear &&
                   t->pair_area_contexts > 1
               ? t->pair_area_contexts : 1;
}

void tnt__comm_tp_pair_area_clear(struct tnt_comm *comm)
{
    for (int q = 0; q < comm->nranks; q++) {
        tnt_peer_t *p = &comm->peers[q];
        if (q != comm->rank && p->ep && p->tpi == comm->net.area_tpi &&
            p->tp->pair_area_clear)
            p->tp->pair_area_clear(p->tp_ctx, p->ep, comm->area_ctx);
    }
}

/* Why: a transport that registers memory with a NIC (verbs) cannot
 * keep a registration of memory the application may free behind its
 * back, so without this it registers per message. tnt_mem_alloc's memory
 * ends only at tnt_mem_free, which says so first: registered once. */
void tnt__comm_tp_reg_mem(struct tnt_comm *comm, void *ptr, size_t len,
                          void **handles)
{
    for (int i = 0; i < TNT_TP_MAX; i++) {
        handles[i] = NULL;
        const tnt_transport_t *t = i < TNT_TP_COUNT ? comm->net.tp[i] : NULL;
        if (!t || !comm->net.tp_ctx[i] || !comm->net.tp_serves[i] ||
            !t->reg_mem || !t->dereg_mem)
            continue;
        if (t->reg_mem(comm->net.tp_ctx[i], ptr, len, &handles[i]) !=
            TNT_SUCCESS) {
            TNT_LOG_DEBUG("rank %d: tnt_mem_alloc: %s keeps no "
                          "registration of %zu bytes (it registers per "
                          "message): %s", comm->rank, t->name, len,
                          tnt_last_error());
            handles[i] = NULL;
        }
    }
}

void tnt__comm_tp_dereg_mem(struct tnt_comm *comm, void **handles)
{
    for (int i = 0; i < TNT_TP_MAX && i < TNT_TP_COUNT; i++)
        if (handles[i] && comm->net.tp[i] && comm->net.tp_ctx[i]) {
            comm->net.tp[i]->dereg_mem(comm->net.tp_ctx[i], handles[i]);
            handles[i] = NULL;
        }
}

void tnt__comm_tp_finalize(struct tnt_comm *comm)
{
    for (int i = 0; i < TNT_TP_COUNT; i++)
        if (comm->net.tp_ctx[i])
            comm->net.tp[i]->finalize(comm->net.tp_ctx[i]);
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
        if (comm->net.tp[i])
            len += (size_t)snprintf(out + len, n - len, " %s (%d peer%s)",
                                    comm->net.tp[i]->name, count[i],
                                    count[i] == 1 ? "" : "s");
}
