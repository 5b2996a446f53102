/*
 * The demultiplexer between the transports and the engines (docs/
 * design.md, "Sharing connections between communicators"): the
 * transports' upcalls get the net group as their `core` and are routed
 * here to one communicator of it.
 *
 * The rule: a message goes to the communicator its header's context id
 * (tnt_msg_hdr_t.comm_id) names; a payload and a completed send to the
 * communicator their cookie names (tnt_cookie_t); what concerns a
 * connection as a whole (it is up, it failed) to the group's net owner,
 * the communicator whose transport contexts these are. A header whose id
 * no communicator of the group has goes to the net owner too, whose check
 * (msg_hdr.c) refuses it as before. Today every communicator has a group
 * and contexts of its own, so all of it reaches that one communicator;
 * ranks of the transport's numbering are the owner's.
 *
 * Once a derived communicator has joined the group (g->shared,
 * comm_split.c), the connections are the group's: a connection event
 * updates g->conn and goes to every communicator that has the peer, in
 * its own numbering (tnt__net_local); a header goes to its
 * communicator in that one's numbering; and a well-formed message for a
 * communicator freed, failed or not known here is read and dropped
 * (its payload into g->discard), since closing the connection would
 * fail every other communicator over it. Only a malformed header closes.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/demux.h"
#include "core/engine_internal.h"
#include "core/net_group.h"
#include "core/progress.h"
#include "util/auth.h"
#include "util/error.h"

/* Every communicator of the shared group g that has transport rank
 * `net`, with its rank of it: fn(comm, rank, arg). The list changes only
 * under the lock, which is held throughout. */
static void each_member(struct tnt_net_group *g, int net,
                        void (*fn)(struct tnt_comm *, int, void *), void *arg)
{
    struct tnt_comm *next;
    for (struct tnt_comm *c = g->comms; c; c = next) {
        next = c->group_next;
        int r = tnt__net_local(c, net);
        if (r >= 0)
            fn(c, r, arg);
    }
}

struct conn_event {
    int tpi;
    void *ep;
};

static void connected_one(struct tnt_comm *comm, int r, void *arg)
{
    const struct conn_event *e = arg;
    tnt__wire_connected(comm, e->tpi, r, e->ep);
}

/* on_connected: the core pointer alone cannot say which transport is
 * calling, so each position has its own entry (connected0..3). */
static void connected(void *core, int tpi, int peer, void *ep)
{
    struct tnt_net_group *g = core;
    struct tnt_comm *comm = tnt__net_owner(core);
    if (!comm)
        return;
    if (!g->shared) {
        tnt__wire_connected(comm, tpi, peer, ep);
        return;
    }
    if (peer < 0 || peer >= g->nranks ||
        (g->conn[peer].ep && g->conn[peer].ep != ep)) {
        comm->net.tp[tpi]->close(comm->net.tp_ctx[tpi], ep);
        return;
    }
    g->conn[peer].ep = ep;
    g->conn[peer].connecting = 0;
    struct conn_event e = {tpi, ep};
    each_member(g, peer, connected_one, &e);
}

static void connected0(void *core, int peer, void *ep)
{
    connected(core, 0, peer, ep);
}

static void connected1(void *core, int peer, void *ep)
{
    connected(core, 1, peer, ep);
}

static void connected2(void *core, int peer, void *ep)
{
    connected(core, 2, peer, ep);
}

static void connected3(void *core, int peer, void *ep)
{
    connected(core, 3, peer, ep);
}

/* A shared group's message that no communicator here takes: read into
 * the discard buffer and forgotten. */
static tnt_result_t drop(struct tnt_net_group *g, int peer, size_t len,
                         void **dest, void **cookie)
{
    /* No message larger than the eager window comes unasked, and no
     * freed or failed communicator asks. */
    if (len > ((size_t)64 << 20))
        return tnt__error(TNT_ERR_PROTOCOL, "message of %zu bytes from "
                          "rank %d for no communicator", len, peer);
    if (len > g->discard_cap) {
        void *b = malloc(len);
        struct tnt_discard_old *o = malloc(sizeof(*o));
        if (!b || !o) {
            free(b);
            free(o);
            return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
        }
        /* Another payload may still be landing in the old one. */
        o->buf = g->discard;
        o->next = g->discard_old;
        g->discard_old = o;
        g->discard = b;
        g->discard_cap = len;
    }
    *dest = len ? g->discard : NULL;
    *cookie = &g->drop_cookie;
    return TNT_SUCCESS;
}

static tnt_result_t shared_header(struct tnt_net_group *g, int peer,
                                  const void *hdr, size_t hdr_len,
                                  size_t payload_len, void **dest,
                                  void **cookie)
{
    tnt_msg_hdr_t h;
    if (hdr_len != sizeof(h))
        return tnt__error(TNT_ERR_PROTOCOL, "message header of the wrong "
                          "length from rank %d", peer);
    memcpy(&h, hdr, sizeof(h));
    if (h.magic != TNT_MSG_MAGIC)
        return tnt__error(TNT_ERR_PROTOCOL, "not a libtntcomm message "
                          "header from rank %d", peer);
    struct tnt_comm *comm = tnt__net_group_find(g, h.comm_id);
    if (!comm || comm->state != TNT_COMM_OK)
        return drop(g, peer, payload_len, dest, cookie);
    int r = tnt__net_local(comm, peer);
    if (r < 0)
        return tnt__error(TNT_ERR_PROTOCOL, "message from rank %d for "
                          "communicator %#x, which it is not in", peer,
                          h.comm_id);
    tnt_result_t rc = tnt__wire_header(comm, r, hdr, hdr_len, payload_len,
                                       dest, cookie);
    if (rc >= 0)
        comm->peers[r].rx_arriving++;
    /* The message failed its communicator (a mismatch, say): that one
     * is done, the connection is not. */
    else if (comm->state != TNT_COMM_OK)
        return drop(g, peer, payload_len, dest, cookie);
    return rc;
}

static tnt_result_t header(void *core, int peer, const void *hdr,
                           size_t hdr_len, size_t payload_len, void **dest,
                           void **cookie)
{
    struct tnt_net_group *g = core;
    if (g->shared)
        return shared_header(g, peer, hdr, hdr_len, payload_len, dest,
                             cookie);
    struct tnt_comm *comm = NULL;
    if (hdr_len >= offsetof(tnt_msg_hdr_t, comm_id) + sizeof(uint32_t)) {
        uint32_t id;
        memcpy(&id, (const unsigned char *)hdr +
                        offsetof(tnt_msg_hdr_t, comm_id), sizeof(id));
        comm = tnt__net_group_find(g, id);
    }
    if (!comm)
        comm = tnt__net_owner(g);
    if (!comm)
        return tnt__error(TNT_ERR_PROTOCOL, "message from rank %d for no "
                          "communicator", peer);
    return tnt__wire_header(comm, peer, hdr, hdr_len, payload_len, dest,
                            cookie);
}

static void payload(void *core, int peer, void *cookie)
{
    if (((const tnt_cookie_t *)cookie)->type == TNT_COOKIE_DROP)
        return;
    struct tnt_net_group *g = core;
    if (g->shared) {
        /* The cookie's communicator numbers the peer its own way. */
        struct tnt_comm *comm = tnt__cookie_comm(cookie);
        int r = tnt__net_local(comm, peer);
        if (r < 0)
            return;
        if (comm->peers[r].rx_arriving > 0)
            comm->peers[r].rx_arriving--;
        peer = r;
    }
    tnt__wire_payload(peer, cookie);
}

static void send_done(void *core, void *cookie)
{
    (void)core;
    if (cookie && ((const tnt_cookie_t *)cookie)->type ==
                      TNT_COOKIE_NOTICE_TX)
        return; /* the group keeps it until it is freed */
    tnt__wire_send_done(cookie);
}

static void peer_error(void *core, int peer, tnt_result_t err,
                       const char *what)
{
    struct tnt_net_group *g = core;
    struct tnt_comm *comm = tnt__net_owner(core);
    if (!comm)
        return;
    if (g->shared)
        tnt__wire_group_lost(g, peer, err, what);
    else
        tnt__wire_peer_error(comm, peer, err, what);
}

/* The job key is every communicator's of the group (a derived one has
 * its parent's): the owner's serves. */
static void sv_auth_mac(void *core, const void *data, size_t len,
                        unsigned char mac[TNT_AUTH_MAC_BYTES])
{
    struct tnt_comm *owner = tnt__net_owner(core);
    if (owner)
        tnt__auth_mac(&owner->auth_key, data, len, mac);
    else /* every communicator has left: nobody is to be let in */
        memset(mac, 0, TNT_AUTH_MAC_BYTES);
}

static int sv_auth_verify(void *core, const void *data, size_t len,
                          const unsigned char mac[TNT_AUTH_MAC_BYTES])
{
    struct tnt_comm *owner = tnt__net_owner(core);
    return owner && tnt__auth_verify(&owner->auth_key, data, len, mac);
}

static void sv_random_bytes(void *core, void *buf, size_t len)
{
    (void)core;
    tnt__auth_random(buf, len);
}

/* The thread's last error lives in this library: a plugin's own copy of
 * error.c would keep it where tnt_last_error() never looks. */
static tnt_result_t sv_set_error(void *core, tnt_result_t result,
                                 const char *msg)
{
    (void)core;
    return tnt__error_str(result, msg ? msg : "transport error");
}

static const char *sv_last_error(void *core)
{
    (void)core;
    return tnt_last_error();
}

void tnt__engine_fill_env(struct tnt_comm *comm, int tpi)
{
    tnt_transport_env_t *env = &comm->net.tp_env[tpi];
    memset(env, 0, sizeof(*env));
    env->size = sizeof(*env);
    env->version = TNT_TRANSPORT_VERSION;
    env->rank = comm->rank;
    env->nranks = comm->nranks;
    env->comm_id = comm->comm_id;
    env->job_id = comm->job_id;
    tnt__progress_fill_services(comm, env); /* core: the group */
    static void (*const on_connected[TNT_TP_MAX])(void *, int, void *) = {
        connected0, connected1, connected2, connected3};
    env->on_connected = on_connected[tpi];
    env->on_header = header;
    env->on_payload = payload;
    env->on_send_done = send_done;
    env->on_peer_error = peer_error;
    env->auth_mac = sv_auth_mac;
    env->auth_verify = sv_auth_verify;
    env->random_bytes = sv_random_bytes;
    env->host = comm->host;
    env->set_error = sv_set_error;
    env->last_error = sv_last_error;
    tnt__onhost_area_bytes(env->pair_area_bytes);
}
