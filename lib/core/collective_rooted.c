/*
 * The rooted collectives (reduce, gather, scatter): what each checks
 * beyond the shared checks and what it posts (core/entry.h), and their
 * blocking and nonblocking functions. Buffers are checked where they are
 * read or written only: a reduce's or gather's receive buffer at the
 * root, a scatter's send buffer at the root; elsewhere they may be NULL.
 */
#include "core/entry.h"
#include "util/error.h"

/* A buffer that data moves through: there, and not TNT_IN_PLACE (which
 * the root alone may pass, for the buffer it has in the other). */
static tnt_result_t need(const tnt_entry_call_t *c, const void *buf,
                         const char *what)
{
    if (c->count > 0 && buf == TNT_IN_PLACE)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s is "
                          "TNT_IN_PLACE (allowed at the root only) with "
                          "count %zu", c->comm->rank, c->fn, what, c->count);
    return tnt__entry_need(c, buf, what);
}

/* The root's receive buffer holds the result; in place at the root:
 * sendbuf == TNT_IN_PLACE or == recvbuf. A non-root posts no receive
 * buffer. */
static tnt_result_t reduce_check(tnt_entry_call_t *c)
{
    int is_root = c->comm->rank == c->root;
    int in_place = is_root && (c->send == TNT_IN_PLACE || c->send == c->recv);
    if (is_root)
        TNT_CHECK(need(c, c->recv, "the root's receive buffer"));
    if (!in_place)
        TNT_CHECK(need(c, c->send, "the send buffer"));
    c->args->in_place = in_place;
    c->post_send = in_place ? c->recv : c->send;
    c->post_recv = is_root ? c->recv : NULL;
    return TNT_SUCCESS;
}

static const tnt_entry_op_t reduce = {
    TNT_COLL_REDUCE, "tnt_reduce", "tnt_ireduce",
    TNT_ENTRY_OP | TNT_ENTRY_ROOT, reduce_check};

TNT_API tnt_result_t tnt_ireduce(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, tnt_op_t op, int root,
                                 tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = (int)op,
                          .root = root};
    return tnt__entry_post(&reduce, &c, req);
}

TNT_API tnt_result_t tnt_reduce(tnt_comm_t comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, int root)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = (int)op,
                          .root = root};
    return tnt__entry_run(&reduce, &c);
}

/* The root receives size * count elements; in place at the root:
 * sendbuf == TNT_IN_PLACE, its block already in recvbuf. */
static tnt_result_t gather_check(tnt_entry_call_t *c)
{
    int is_root = c->comm->rank == c->root;
    int in_place = is_root && c->send == TNT_IN_PLACE;
    if (is_root)
        TNT_CHECK(need(c, c->recv, "the root's receive buffer"));
    if (!in_place)
        TNT_CHECK(need(c, c->send, "the send buffer"));
    c->args->in_place = in_place;
    c->post_send = in_place ? NULL : c->send;
    c->post_recv = is_root ? c->recv : NULL;
    return TNT_SUCCESS;
}

static const tnt_entry_op_t gather = {
    TNT_COLL_GATHER, "tnt_gather", "tnt_igather",
    TNT_ENTRY_ROOT | TNT_ENTRY_PER_RANK, gather_check};

TNT_API tnt_result_t tnt_igather(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, int root,
                                 tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = TNT_SUM,
                          .root = root};
    return tnt__entry_post(&gather, &c, req);
}

TNT_API tnt_result_t tnt_gather(tnt_comm_t comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                tnt_dtype_t dtype, int root)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = TNT_SUM,
                          .root = root};
    return tnt__entry_run(&gather, &c);
}

/* The root sends size * count elements; in place at the root: recvbuf ==
 * TNT_IN_PLACE, its block left where it is in sendbuf. */
static tnt_result_t scatter_check(tnt_entry_call_t *c)
{
    int is_root = c->comm->rank == c->root;
    int in_place = is_root && c->recv == TNT_IN_PLACE;
    if (is_root)
        TNT_CHECK(need(c, c->send, "the root's send buffer"));
    if (!in_place)
        TNT_CHECK(need(c, c->recv, "the receive buffer"));
    c->args->in_place = in_place;
    c->post_send = is_root ? c->send : NULL;
    c->post_recv = in_place ? NULL : c->recv;
    return TNT_SUCCESS;
}

static const tnt_entry_op_t scatter = {
    TNT_COLL_SCATTER, "tnt_scatter", "tnt_iscatter",
    TNT_ENTRY_ROOT | TNT_ENTRY_PER_RANK, scatter_check};

TNT_API tnt_result_t tnt_iscatter(tnt_comm_t comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  tnt_dtype_t dtype, int root,
                                  tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = TNT_SUM,
                          .root = root};
    return tnt__entry_post(&scatter, &c, req);
}

TNT_API tnt_result_t tnt_scatter(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, int root)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = TNT_SUM,
                          .root = root};
    return tnt__entry_run(&scatter, &c);
}
