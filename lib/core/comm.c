/*
 * Communicator lifetime: creation from the environment or a config
 * struct (parameters, transport, bootstrap, progress thread), abort and
 * free. Live communicators are kept in a set of live handles so that a
 * call on a freed handle is reported as TNT_ERR_INVALID_COMM instead of
 * touching freed memory.
 */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/auth.h"
#include "boot/bootstrap.h"
#include "core/comm.h"
#include "core/comm_live.h"
#include "boot/boot_pmix.h"
#include "core/comm_tp.h"
#include "core/net_group.h"
#include "util/error.h"
#include "util/handles.h"
#include "util/hostid.h"
#include "boot/launch_env.h"
#include "util/log.h"
#include "core/progress.h"
#include "core/recovery.h"
#include "core/timeline.h"
#include "transport/transport.h"

static tnt_result_t boot_listen(void *arg, const char *local_ip,
                                tnt_boot_entry_t *entry)
{
    struct tnt_comm *comm = arg;
    snprintf(comm->net.bind_ip, sizeof(comm->net.bind_ip), "%s", local_ip);
    size_t len = sizeof(entry->addr);
    tnt_result_t rc = tnt__comm_tp_listen(comm, entry->addr, &len);
    /* After the transports' addresses: the recovery mesh's listener,
     * for tnt_comm_shrink (core/recovery.h), with TNT_RECOVERY=1. */
    if (rc == TNT_SUCCESS && comm->params.recovery)
        rc = tnt__rec_listen(comm, local_ip, entry->addr, &len,
                             sizeof(entry->addr));
    entry->addr_len = (uint32_t)len;
    return rc;
}

/* One INFO line per process and launcher: which one was used and what it
 * said. A program that makes many communicators does not repeat it. */
static void log_launch(const tnt_launch_t *l, int tcp_root)
{
    static atomic_int said_mask;
    int bit = 1 << l->kind;
    if (atomic_fetch_or(&said_mask, bit) & bit)
        return;
    if (l->kind == TNT_LAUNCHER_SINGLE) {
        TNT_LOG_INFO("launcher: none found (TNT_*, PMIx, Open MPI, Slurm, "
                     "torchrun)%s; running as a world of one rank",
                     l->forced ? ", TNT_BOOTSTRAP=single" : "");
        return;
    }
    char local[48] = "unknown";
    if (l->local_rank >= 0 && l->local_size > 0)
        snprintf(local, sizeof(local), "%d of %d", l->local_rank,
                 l->local_size);
    else if (l->local_rank >= 0)
        snprintf(local, sizeof(local), "%d", l->local_rank);
    TNT_LOG_INFO("launcher: %s%s; rank %d of %d, local rank %s; "
                 "rendezvous %s%s", tnt__launcher_name(l->kind),
                 l->forced ? " (TNT_BOOTSTRAP)" : "", l->rank, l->size, local,
                 l->size == 1 ? "none needed" : tcp_root ? "TCP at "
                                                         : "through PMIx",
                 l->size > 1 && tcp_root ? l->root_addr : "");
}

/* A config of version 1 (0.4 and older) ends before `reproducible`. */
static int config_has_reproducible(const tnt_config_t *c)
{
    return c->version >= 2 && c->size >= offsetof(tnt_config_t,
                                                   reproducible) +
                                              sizeof(int);
}

/* needs_root: the rendezvous is the TCP one at root_addr. */
static tnt_result_t validate_config(const tnt_config_t *c, int needs_root)
{
    if (!c)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init: config is "
                          "NULL");
    if (c->size < offsetof(tnt_config_t, timeout_s) + sizeof(double) ||
        c->version < 1)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init: config not "
                          "initialised with TNT_CONFIG_INIT (size %zu, "
                          "version %u)", c->size, c->version);
    if (c->nranks < 1)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init: nranks=%d; "
                          "expected at least 1", c->nranks);
    if (c->rank < 0 || c->rank >= c->nranks)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init: rank=%d; "
                          "expected 0..%d", c->rank, c->nranks - 1);
    if (needs_root && c->nranks > 1 && (!c->root_addr || !*c->root_addr))
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init: root_addr "
                          "is required when nranks > 1");
    if (isnan(c->timeout_s) || isinf(c->timeout_s))
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init: timeout_s="
                          "%g; expected a finite number of seconds (<= 0: "
                          "TNT_TIMEOUT)", c->timeout_s);
    if (config_has_reproducible(c) &&
        (c->reproducible < -1 || c->reproducible > 1))
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init: "
                          "reproducible=%d; expected 1 (on), -1 (off) or 0 "
                          "(TNT_REPRODUCIBLE)", c->reproducible);
    return TNT_SUCCESS;
}

/* Copies between ranks of this host. Where ranks share cores, both the
 * process_vm_readv rendezvous and the direct allreduce's "ready"
 * handshake from 4 MiB, since a streaming sender is then often not
 * running. Where every rank has a core, the rendezvous from 1 MiB (the
 * direct allreduce's segments: a reduce on one host runs it, an
 * allreduce only where forced; point-to-point messages): both ranks
 * pull at once, one copy each, where streaming through the rings costs
 * each rank two (its send and its receive); and no
 * handshake, which only delayed the pulls there (docs/performance.md,
 * "Copies between ranks of one host"). The handshake changes schedules,
 * so it is set only where every rank reaches the same answer (intra_host:
 * one kernel, one CPU count); the rendezvous is the sender's choice
 * alone. */
#define SHARED_CORES_COPY_MIN ((size_t)4 << 20)
#define OWN_CORES_RNDV_MIN ((size_t)1 << 20)

/* This host's online CPUs; 0 when unknown. */
static int online_cpus(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 && cpus < 1 << 20 ? (int)cpus : 0;
}

/* The handshake's part: changes schedules, so a communicator that
 * joins its parent's contexts takes it too (join_host). */
static void choose_ready(struct tnt_comm *comm)
{
    if (comm->intra_host)
        comm->ready_min_bytes =
            tnt__cpus_shared(comm) ? SHARED_CORES_COPY_MIN : SIZE_MAX;
}

static void choose_copies(struct tnt_comm *comm)
{
    size_t min =
        tnt__cpus_shared(comm) ? SHARED_CORES_COPY_MIN : OWN_CORES_RNDV_MIN;
    choose_ready(comm);
    /* Every transport with a single-copy rendezvous; the others say
     * TNT_ERR_UNSUPPORTED, which is no failure. */
    for (int i = 0; i < TNT_TP_COUNT; i++)
        if (comm->net.tp[i] && comm->net.tp[i]->set_option)
            comm->net.tp[i]->set_option(
                comm->net.tp_ctx[i], TNT_TP_OPT_RNDV_MIN, &min, sizeof(min));
}

/* The host layout, from the host identities of the bootstrap table: every
 * rank has the same table, so every rank gets the same layout (and picks
 * the same algorithms from it). A host's key is its lowest rank. */
static tnt_result_t build_topo(struct tnt_comm *comm)
{
    int n = comm->nranks;
    int *key = malloc((size_t)n * sizeof(int));
    if (!key)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n; i++) {
        key[i] = i;
        for (int j = 0; j < i; j++)
            if (key[j] == j && strcmp(comm->peers[j].host,
                                      comm->peers[i].host) == 0) {
                key[i] = j;
                break;
            }
    }
    tnt_result_t rc = tnt__topo_init(&comm->topo, n, key);
    free(key);
    return rc;
}

/* The group's last communicator stops its progress loop, finalizes
 * the transport contexts and then leaves the group, as an unshared one;
 * one of a shared group that others outlive only leaves it (already,
 * in tnt_comm_free, after core/engine.c's tnt__engine_drain), and hands
 * the progress thread over if it polled for this one. */
static void comm_destroy(struct tnt_comm *comm)
{
    struct tnt_net_group *g = comm->group;
    pthread_mutex_lock(&g->lock);
    /* The recovery gate's watches name this communicator; the progress
     * loop of a shared group goes on without it. */
    tnt__rec_gate_close(comm);
    int last = g->refs == 1;
    int left = g->shared && !last;
    if (left)
        tnt__net_group_leave(g, comm);
    struct tnt_comm *heir = !last && g->thread_comm == comm ? g->comms
                                                            : NULL;
    pthread_mutex_unlock(&g->lock);
    if (last)
        tnt__progress_stop(comm);
    else if (heir) {
        tnt__progress_stop(comm);
        if (tnt__progress_run_thread(heir) != TNT_SUCCESS)
            TNT_LOG_ERR("rank %d: the progress thread of the connections "
                        "could not be restarted: %s", comm->rank,
                        tnt_last_error());
    }
    tnt__mem_table_dereg(comm); /* before the transports go */
    if (last)
        tnt__comm_tp_finalize(comm);
    if (!left) {
        pthread_mutex_lock(&g->lock);
        tnt__net_group_leave(g, comm);
        pthread_mutex_unlock(&g->lock);
    }
    tnt__rec_close(comm);
    tnt__engine_reap(comm);
    tnt__engine_free_requests(comm);
    tnt__tl_close(comm);
    tnt__sched_cache_destroy(&comm->sched_cache);
    tnt__bufpool_destroy(&comm->pool);
    if (last)
        tnt__progress_close(comm);
    tnt__mem_table_destroy(&comm->mem, comm->nranks);
    free(comm->onhost.map_acc);
    free(comm->peers);
    free(comm->to_net);
    free(comm->from_net);
    tnt__topo_fini(&comm->topo);
    tnt__comm_name_fini(comm);
    tnt__auth_key_wipe(&comm->auth_key);
    tnt__net_group_put(g);
    free(comm);
}

typedef tnt_result_t (*boot_fn)(const tnt_boot_args_t *,
                                tnt_boot_entry_t *);

/* The rendezvous of tnt_comm_init: the TCP one at rank 0, or the
 * launcher's (PMIx). */
static tnt_result_t boot_plain(void *ctx, const tnt_boot_args_t *a,
                               tnt_boot_entry_t *table)
{
    tnt_result_t (*boot)(const tnt_boot_args_t *, tnt_boot_entry_t *) = ctx;
    return boot(a, table);
}

static tnt_result_t comm_create(const tnt_config_t *config, boot_fn boot,
                                tnt_comm_t *out)
{
    tnt_comm_origin_t o = {boot_plain, (void *)boot, NULL, 1, NULL, 0};
    return tnt__comm_create(config, &o, out);
}

/* What every communicator takes from its creation, whether it makes its
 * own net group (tnt__comm_create) or joins its parent's (join_create):
 * the job, the parameters, the host. */
static tnt_result_t common_init(struct tnt_comm *comm,
                                const tnt_config_t *config,
                                const tnt_comm_origin_t *origin)
{
    const struct tnt_comm *parent = origin->parent;
    comm->rank = config->rank;
    comm->nranks = config->nranks;
    comm->comm_id = origin->comm_id;
    tnt__comm_name_init(comm, parent, origin->lineage);
    /* A derived communicator is of its parent's job: same id, same key
     * (the key's text is not kept, only what was derived from it). */
    comm->job_id = parent ? parent->job_id
                          : tnt__auth_job_id(config->job_key);
    if (parent)
        comm->auth_key = parent->auth_key;
    else
        tnt__auth_key_derive(config->job_key, &comm->auth_key);
    comm->fault.first_lost = -1;
    /* Keep at most this much free memory cached between collectives. */
    tnt__bufpool_init(&comm->pool, (size_t)256 << 20);
    comm->flow.ctl_rx_cookie.type = TNT_COOKIE_CTL;
    comm->flow.ctl_rx_cookie.comm = comm;
    tnt__sched_cache_init(&comm->sched_cache);
    tnt__engine_init_requests(comm);
    tnt__mem_table_init(&comm->mem);
    /* The log names the rank of the first communicator (the job's); a
     * derived one keeps it. */
    if (!parent)
        tnt__log_init(comm->rank);

    tnt_result_t rc = tnt__auth_init();
    if (rc == TNT_SUCCESS)
        rc = tnt__params_load(&comm->params);
    if (rc == TNT_SUCCESS)
        rc = tnt__params_check_ranks(&comm->params, comm->nranks);
    if (rc == TNT_SUCCESS && comm->nranks > 1 && !parent &&
        !(config->job_key && *config->job_key))
        TNT_LOG_WARN("no job key (TNT_JOB_KEY): any process that can reach "
                     "this job's ports can join it; tnt-run sets a random "
                     "key, set one yourself when starting ranks by hand");
    if (rc == TNT_SUCCESS)
        rc = tnt__host_id(comm->host, sizeof(comm->host));
    if (rc == TNT_SUCCESS && config->timeout_s > 0)
        comm->params.timeout_s = config->timeout_s;
    if (rc == TNT_SUCCESS && config_has_reproducible(config) &&
        config->reproducible != 0)
        comm->params.reproducible = config->reproducible > 0;
    return rc;
}

/* A joined communicator's peers: the parent's ranks parent_of[i], over
 * the parent's transports, numbered both ways against the group's
 * (the net owner's) ranks. */
static tnt_result_t join_peers(struct tnt_comm *comm,
                               const struct tnt_comm *parent,
                               const int *parent_of)
{
    int n = comm->nranks, gn = comm->group->nranks;
    comm->peers = calloc((size_t)n, sizeof(*comm->peers));
    comm->to_net = malloc((size_t)n * sizeof(int));
    comm->from_net = malloc((size_t)gn * sizeof(int));
    if (!comm->peers || !comm->to_net || !comm->from_net)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for %d peers",
                          n);
    for (int j = 0; j < gn; j++)
        comm->from_net[j] = -1;
    comm->net = parent->net;
    comm->host_cpus = online_cpus();
    for (int i = 0; i < n; i++) {
        const tnt_peer_t *pp = &parent->peers[parent_of[i]];
        tnt_peer_t *p = &comm->peers[i];
        p->rank = i;
        memcpy(p->host, pp->host, sizeof(p->host));
        memcpy(p->addr, pp->addr, sizeof(p->addr));
        p->addr_len = pp->addr_len;
        p->tp = pp->tp;
        p->tp_ctx = pp->tp_ctx;
        p->tpi = pp->tpi;
        comm->host_ranks += strcmp(p->host, comm->host) == 0;
        int net = tnt__net_rank(parent, parent_of[i]);
        comm->to_net[i] = net;
        comm->from_net[net] = i;
    }
    return TNT_SUCCESS;
}

/* A joined communicator is on one host where a fresh one of its ranks
 * would be (tnt__comm_create's rule): every member on this host over the
 * transport of the pair areas, which has a set of them for it
 * (comm->area_ctx, comm_split.c). It then selects as that one would: the
 * same algorithms, the same bits. The contexts' rendezvous size stays
 * what their first communicator set (the sender's choice alone: no
 * schedule changes). */
static void join_host(struct tnt_comm *comm)
{
    comm->intra_host = comm->net.area_tpi >= 0;
    for (int i = 0; i < comm->nranks; i++)
        if (strcmp(comm->peers[i].host, comm->host) != 0 ||
            (i != comm->rank && comm->peers[i].tpi != comm->net.area_tpi))
            comm->intra_host = 0;
    choose_ready(comm);
}

/* Peers' connection state from the group's, and on the group's list,
 * in one hold of the lock: from then on connection events and messages
 * reach it (core/demux.c). */
static void join_group(struct tnt_comm *comm)
{
    struct tnt_net_group *g = comm->group;
    pthread_mutex_lock(&g->lock);
    for (int i = 0; i < comm->nranks; i++) {
        if (i == comm->rank)
            continue;
        const struct tnt_net_peer *gp = &g->conn[comm->to_net[i]];
        tnt_peer_t *p = &comm->peers[i];
        p->ep = gp->ep;
        p->ever_connected = gp->ep != NULL;
        p->connecting = gp->connecting;
        p->dead = gp->dead;
    }
    tnt__net_group_join(g, comm);
    pthread_mutex_unlock(&g->lock);
}

/* A derived communicator that joins its parent's net group (docs/
 * design.md, "Sharing connections between communicators", step 4).
 * Its timeline's clocks are aligned by the caller once every member has
 * joined (tnt__tl_start, comm_split.c): a message of it to a rank that
 * has not would be dropped there. */
static tnt_result_t join_create(const tnt_config_t *config,
                                const tnt_comm_origin_t *origin,
                                tnt_comm_t *out)
{
    const struct tnt_comm *parent = origin->parent;
    struct tnt_comm *comm = calloc(1, sizeof(*comm));
    if (!comm)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    struct tnt_net_group *g = parent->group;
    pthread_mutex_lock(&g->lock);
    int shared = tnt__net_group_share(g) == 0;
    if (shared)
        g->refs++;
    pthread_mutex_unlock(&g->lock);
    if (!shared) {
        free(comm);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    }
    comm->group = g;
    tnt_result_t rc = common_init(comm, config, origin);
    if (rc == TNT_SUCCESS)
        rc = join_peers(comm, parent, origin->lineage->parent_of);
    if (rc == TNT_SUCCESS)
        rc = tnt__tl_open(comm);
    if (rc == TNT_SUCCESS &&
        tnt__comm_name_ranks(comm, parent, origin->lineage) != 0)
        rc = tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    if (rc == TNT_SUCCESS)
        rc = build_topo(comm);
    if (rc == TNT_SUCCESS) {
        join_host(comm);
        join_group(comm);
        if (comm->nranks <= TNT_EAGER_CONNECT_MAX)
            tnt__engine_connect_all(comm);
    }
    if (rc == TNT_SUCCESS && tnt__comm_live_add(comm) != 0)
        rc = tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    if (rc != TNT_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", tnt_last_error());
        comm_destroy(comm);
        return tnt__error_str(rc, msg);
    }
    char tps[128], who[256];
    tnt__comm_tp_describe(comm, tps, sizeof(tps));
    tnt__comm_who(comm, who, sizeof(who));
    TNT_LOG_INFO("communicator ready: %d rank%s, %s over its parent's "
                 "connections; %s (id %#x, from a communicator of %d ranks, "
                 "where this rank is %d)", comm->nranks,
                 comm->nranks == 1 ? "" : "s", tps, who, comm->comm_id,
                 parent->nranks, parent->rank);
    *out = comm;
    return TNT_SUCCESS;
}

tnt_result_t tnt__comm_create(const tnt_config_t *config,
                              const tnt_comm_origin_t *origin,
                              tnt_comm_t *out)
{
    const struct tnt_comm *parent = origin->parent;
    if (origin->join)
        return join_create(config, origin, out);
    struct tnt_comm *comm = calloc(1, sizeof(*comm));
    if (comm && !(comm->group = tnt__net_group_new())) {
        free(comm);
        comm = NULL;
    }
    if (!comm)
        return tnt__error(TNT_ERR_NO_MEMORY, "tnt_comm_init: out of memory");
    /* Its own net group, whose net owner it is (core/net_group.h). */
    tnt__net_group_join(comm->group, comm);
    /* What the layers above run in the progress loop (progress.h). */
    comm->group->progress.hooks = &tnt__engine_progress_hooks;
    tnt_result_t rc = common_init(comm, config, origin);
    if (rc == TNT_SUCCESS) {
        comm->peers = calloc((size_t)comm->nranks, sizeof(*comm->peers));
        if (!comm->peers)
            rc = tnt__error(TNT_ERR_NO_MEMORY, "out of memory for %d peers",
                            comm->nranks);
    }
    if (rc == TNT_SUCCESS)
        rc = tnt__progress_start(comm);
    if (rc == TNT_SUCCESS)
        rc = tnt__comm_tp_init(comm, tnt__engine_fill_env);
    if (rc == TNT_SUCCESS)
        rc = tnt__tl_open(comm);
    if (rc == TNT_SUCCESS && comm->nranks > 1) {
        tnt_boot_entry_t *table = calloc((size_t)comm->nranks,
                                         sizeof(*table));
        tnt_boot_args_t ba = {config->root_addr, comm->rank, comm->nranks,
                              comm->job_id, &comm->auth_key,
                              comm->params.connect_timeout_s,
                              comm->host, boot_listen, comm, NULL, NULL};
        rc = table ? origin->boot(origin->ctx, &ba, table)
                   : tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
        /* The rendezvous says TNT_TIMEOUT for "nobody came in time"; the
         * caller of tnt_comm_init must see a negative error (tnt.h: only
         * polling calls return positive values). */
        if (rc == TNT_TIMEOUT)
            rc = TNT_ERR_TIMEOUT;
        /* Intra-host algorithms when every rank runs shm on this host:
         * then every pair gets shm (comm_tp_assign's rule), and since
         * the answer comes from the table alone every rank reaches the
         * same one, so every rank selects the same algorithm. */
        comm->intra_host = (rc == TNT_SUCCESS);
        comm->host_cpus = online_cpus();
        for (int i = 0; rc == TNT_SUCCESS && i < comm->nranks; i++) {
            tnt_peer_t *p = &comm->peers[i];
            p->rank = i;
            memcpy(p->host, table[i].host, sizeof(p->host));
            int same_host = strcmp(table[i].host, comm->host) == 0;
            comm->host_ranks += same_host;
            if (!same_host || comm->net.area_tpi < 0 ||
                !tnt__comm_tp_runs(table[i].addr, table[i].addr_len,
                                   comm->net.area_tpi))
                comm->intra_host = 0;
            if (i != comm->rank)
                rc = tnt__comm_tp_assign(comm, p, table[i].addr,
                                         table[i].addr_len);
            if (rc == TNT_SUCCESS && i != comm->rank &&
                comm->params.recovery)
                tnt__rec_note_peer(comm, i, table[i].addr,
                                   table[i].addr_len);
        }
        free(table);
        if (rc == TNT_SUCCESS &&
            tnt__comm_name_ranks(comm, parent, origin->lineage) != 0)
            rc = tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
        if (rc == TNT_SUCCESS)
            rc = build_topo(comm);
        if (rc == TNT_SUCCESS)
            choose_copies(comm);
    }
    /* A communicator that may be shrunk shares its connections from the
     * start, over TCP and verbs: its failure then forgets the living
     * peers' connections instead of closing them, and the survivors'
     * communicator keeps them (comm_shrink.c; docs/design.md, "Sharing
     * connections between communicators", step 6). Only where every
     * connection is made at the start: a failing communicator of a
     * shared group does not connect to a peer that waits for it in
     * order to say so (tnt__engine_fail), so with connections made on
     * first use that peer would wait for its deadline. */
    if (rc == TNT_SUCCESS && comm->rec &&
        comm->nranks <= TNT_EAGER_CONNECT_MAX &&
        tnt__net_tcp_or_verbs(comm)) {
        pthread_mutex_lock(&comm->group->lock);
        if (tnt__net_group_share(comm->group) != 0)
            rc = tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
        pthread_mutex_unlock(&comm->group->lock);
    }
    if (rc == TNT_SUCCESS)
        rc = tnt__progress_run_thread(comm);
    if (rc == TNT_SUCCESS && comm->rec) {
        pthread_mutex_lock(&comm->group->lock);
        tnt__rec_gate_open(comm);
        pthread_mutex_unlock(&comm->group->lock);
    }
    if (rc == TNT_SUCCESS && comm->nranks <= TNT_EAGER_CONNECT_MAX)
        tnt__engine_connect_all(comm);
    if (rc == TNT_SUCCESS)
        rc = tnt__tl_start(comm);
    if (rc == TNT_SUCCESS && tnt__comm_live_add(comm) != 0)
        rc = tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    if (rc != TNT_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", tnt_last_error());
        comm_destroy(comm);
        return tnt__error_str(rc, msg);
    }
    char tps[128];
    tnt__comm_tp_describe(comm, tps, sizeof(tps));
    if (parent) {
        char who[256];
        tnt__comm_who(comm, who, sizeof(who));
        TNT_LOG_INFO("communicator ready: %d rank%s, %s; %s (id %#x, from "
                     "a communicator of %d ranks, where this rank is %d)",
                     comm->nranks, comm->nranks == 1 ? "" : "s", tps, who,
                     comm->comm_id, parent->nranks, parent->rank);
    }
    else
        TNT_LOG_INFO("communicator ready: %d rank%s, %s", comm->nranks,
                     comm->nranks == 1 ? "" : "s", tps);
    tnt__comm_tp_log_peers(comm);
    *out = comm;
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_comm_init(const tnt_config_t *config,
                                   tnt_comm_t *out)
{
    if (!out)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init: comm output "
                          "pointer is NULL");
    *out = NULL;
    TNT_CHECK(validate_config(config, 1));
    return comm_create(config, tnt__bootstrap, out);
}

TNT_API tnt_result_t tnt_comm_init_from_env(tnt_comm_t *out)
{
    if (!out)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_comm_init_from_env: "
                          "comm output pointer is NULL");
    *out = NULL;
    tnt_launch_t l;
    TNT_CHECK(tnt__launch_detect(&l));
    tnt__log_init(l.rank);
    boot_fn boot = tnt__bootstrap;
#ifdef TNT_HAVE_PMIX
    if (l.kind == TNT_LAUNCHER_PMIX)
        boot = tnt__bootstrap_pmix;
#endif
    log_launch(&l, boot == tnt__bootstrap);
    tnt_config_t cfg = TNT_CONFIG_INIT;
    cfg.rank = l.rank;
    cfg.nranks = l.size;
    cfg.root_addr = l.root_addr[0] ? l.root_addr : NULL;
    cfg.job_key = l.job_key;
    tnt_result_t rc = validate_config(&cfg, boot == tnt__bootstrap);
    if (rc == TNT_SUCCESS)
        rc = comm_create(&cfg, boot, out);
    tnt__launch_release(&l);
    return rc;
}

TNT_API tnt_result_t tnt_comm_free(tnt_comm_t comm)
{
    if (!tnt__comm_live_remove(comm))
        return tnt__error(TNT_ERR_INVALID_COMM, "tnt_comm_free: "
                          "communicator %p is not live (NULL, freed twice, "
                          "or never created)", (void *)comm);
    pthread_mutex_lock(&comm->group->lock);
    tnt__engine_drain(comm, TNT_ERR_ABORTED);
    /* What flow control cost, for counting it per call (docs/
     * performance.md, "fewer control messages over TCP"). */
    uint64_t msgs = 0;
    for (int i = 0; i < TNT_TP_MAX; i++)
        msgs += comm->stats.tp_msgs_sent[i];
    TNT_LOG_DEBUG("rank %d: messages sent %" PRIu64 ", of them flow "
                  "control: RTS %" PRIu64 ", CTS %" PRIu64 ", CREDIT %"
                  PRIu64, comm->rank, msgs,
                  comm->stats.ctl_sent[TNT_CTL_RTS],
                  comm->stats.ctl_sent[TNT_CTL_CTS],
                  comm->stats.ctl_sent[TNT_CTL_CREDIT]);
    /* Off a shared group's list in the same hold of the lock as the
     * drain's last look: no header reaches it after (core/demux.c drops
     * them). The group's last communicator stays on it until its
     * transports are finalized (comm_destroy), as an unshared one. */
    if (comm->group->shared && comm->group->refs > 1)
        tnt__net_group_leave(comm->group, comm);
    pthread_mutex_unlock(&comm->group->lock);
    comm_destroy(comm);
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_comm_abort(tnt_comm_t comm)
{
    TNT_CHECK(tnt__comm_check(comm, "tnt_comm_abort"));
    pthread_mutex_lock(&comm->group->lock);
    tnt__engine_fail(comm, TNT_ERR_ABORTED, "rank %d: communicator aborted "
                     "by tnt_comm_abort()", comm->rank);
    pthread_mutex_unlock(&comm->group->lock);
    return TNT_SUCCESS;
}

static tnt_result_t out_int(tnt_comm_t comm, const char *fn, int *out,
                            int value)
{
    TNT_CHECK(tnt__comm_check(comm, fn));
    if (!out)
        return tnt__error(TNT_ERR_INVALID_ARG, "%s: output pointer is NULL",
                          fn);
    *out = value;
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_comm_rank(tnt_comm_t comm, int *rank)
{
    return out_int(comm, "tnt_comm_rank", rank,
                   tnt__comm_check(comm, "") ? 0 : comm->rank);
}

TNT_API tnt_result_t tnt_comm_size(tnt_comm_t comm, int *size)
{
    return out_int(comm, "tnt_comm_size", size,
                   tnt__comm_check(comm, "") ? 0 : comm->nranks);
}

TNT_API tnt_result_t tnt_comm_master_rank(tnt_comm_t comm, int *rank)
{
    return out_int(comm, "tnt_comm_master_rank", rank, TNT_MASTER_RANK);
}

TNT_API tnt_result_t tnt_comm_is_master(tnt_comm_t comm, int *is_master)
{
    return out_int(comm, "tnt_comm_is_master", is_master,
                   tnt__comm_check(comm, "") ? 0
                                             : comm->rank == TNT_MASTER_RANK);
}
