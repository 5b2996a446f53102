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
 */
#include <stddef.h>
#include <string.h>

#include "core/demux.h"
#include "core/engine_internal.h"
#include "core/net_group.h"
#include "core/progress.h"
#include "util/auth.h"
#include "util/error.h"

/* on_connected: the core pointer alone cannot say which transport is
 * calling, so each position has its own entry. */
static void connected(void *core, int tpi, int peer, void *ep)
{
    struct tnt_comm *comm = tnt__net_owner(core);
    if (comm)
        tnt__wire_connected(comm, tpi, peer, ep);
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

static tnt_result_t header(void *core, int peer, const void *hdr,
                           size_t hdr_len, size_t payload_len, void **dest,
                           void **cookie)
{
    struct tnt_net_group *g = core;
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
    (void)core;
    tnt__wire_payload(peer, cookie);
}

static void send_done(void *core, void *cookie)
{
    (void)core;
    tnt__wire_send_done(cookie);
}

static void peer_error(void *core, int peer, tnt_result_t err,
                       const char *what)
{
    struct tnt_comm *comm = tnt__net_owner(core);
    if (comm)
        tnt__wire_peer_error(comm, peer, err, what);
}

/* The job key is every communicator's of the group (a derived one has
 * its parent's): the owner's serves. */
static void sv_auth_mac(void *core, const void *data, size_t len,
                        unsigned char mac[TNT_AUTH_MAC_BYTES])
{
    tnt__auth_mac(&tnt__net_owner(core)->auth_key, data, len, mac);
}

static int sv_auth_verify(void *core, const void *data, size_t len,
                          const unsigned char mac[TNT_AUTH_MAC_BYTES])
{
    return tnt__auth_verify(&tnt__net_owner(core)->auth_key, data, len, mac);
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
