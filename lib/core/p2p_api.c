/*
 * tnt_send, tnt_recv and their nonblocking forms: what they check beyond
 * the shared checks (core/entry.h: the peer, the tag, the buffer) and
 * what they post, a request of kind TNT_COLL_P2P (core/p2p.h says how it
 * is numbered apart from the collectives).
 */
#include <stdint.h>

#include "core/entry.h"
#include "util/error.h"

/* The direction and tag of one call (tnt_entry_call_t.extra). */
typedef struct p2p_call {
    int send;
    int tag;
} p2p_call_t;

static tnt_result_t p2p_check(tnt_entry_call_t *c)
{
    const p2p_call_t *p = c->extra;
    tnt_comm_t comm = c->comm;
    int peer = c->root;
    if (peer == TNT_ANY_SOURCE && p->send)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: peer "
                          "TNT_ANY_SOURCE is for receives; a send names its "
                          "peer", comm->rank, c->fn);
    if (peer == TNT_ANY_SOURCE && comm->nranks == 1)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: a receive from "
                          "any source on a communicator of one rank: no "
                          "rank can send it", comm->rank, c->fn);
    if (peer == TNT_ANY_SOURCE)
        ; /* matched when a sender's message comes (core/p2p.h) */
    else if (peer < 0 || peer >= comm->nranks || peer == comm->rank)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: peer %d is %s; "
                          "expected another rank of 0..%d (or "
                          "TNT_ANY_SOURCE to receive)", comm->rank,
                          c->fn, peer, peer == comm->rank ? "this rank"
                                                          : "not a rank",
                          comm->nranks - 1);
    if (p->tag < 0 || p->tag > TNT_TAG_MAX)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: tag %d; "
                          "expected 0..TNT_TAG_MAX (%d)", comm->rank, c->fn,
                          p->tag, TNT_TAG_MAX);
    TNT_CHECK(tnt__entry_need(c, p->send ? c->send : c->recv, "buffer"));
    c->args->p2p_send = p->send;
    c->args->tag = (uint32_t)p->tag;
    c->post_send = p->send ? c->send : NULL;
    c->post_recv = p->send ? NULL : c->recv;
    return TNT_SUCCESS;
}

static const tnt_entry_op_t send_op = {
    TNT_COLL_P2P, "tnt_send", "tnt_isend", 0, p2p_check};
static const tnt_entry_op_t recv_op = {
    TNT_COLL_P2P, "tnt_recv", "tnt_irecv", 0, p2p_check};

TNT_API tnt_result_t tnt_isend(tnt_comm_t comm, const void *buf,
                               size_t count, tnt_dtype_t dtype, int peer,
                               int tag, tnt_request_t *req)
{
    p2p_call_t p = {1, tag};
    tnt_entry_call_t c = {.comm = comm, .send = buf, .count = count,
                          .dtype = dtype, .op = TNT_SUM, .root = peer,
                          .extra = &p};
    return tnt__entry_post(&send_op, &c, req);
}

TNT_API tnt_result_t tnt_irecv(tnt_comm_t comm, void *buf, size_t count,
                               tnt_dtype_t dtype, int peer, int tag,
                               tnt_request_t *req)
{
    p2p_call_t p = {0, tag};
    tnt_entry_call_t c = {.comm = comm, .recv = buf, .count = count,
                          .dtype = dtype, .op = TNT_SUM, .root = peer,
                          .extra = &p};
    return tnt__entry_post(&recv_op, &c, req);
}

TNT_API tnt_result_t tnt_send(tnt_comm_t comm, const void *buf, size_t count,
                              tnt_dtype_t dtype, int peer, int tag)
{
    p2p_call_t p = {1, tag};
    tnt_entry_call_t c = {.comm = comm, .send = buf, .count = count,
                          .dtype = dtype, .op = TNT_SUM, .root = peer,
                          .extra = &p};
    return tnt__entry_run(&send_op, &c);
}

TNT_API tnt_result_t tnt_recv(tnt_comm_t comm, void *buf, size_t count,
                              tnt_dtype_t dtype, int peer, int tag)
{
    p2p_call_t p = {0, tag};
    tnt_entry_call_t c = {.comm = comm, .recv = buf, .count = count,
                          .dtype = dtype, .op = TNT_SUM, .root = peer,
                          .extra = &p};
    return tnt__entry_run(&recv_op, &c);
}
