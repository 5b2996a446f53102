/*
 * The public collectives of every rank's whole buffer (allreduce,
 * broadcast, barrier, allgather, reduce-scatter): what each checks beyond
 * the shared checks and what it posts (core/entry.h), and their blocking
 * and nonblocking functions.
 */
#include "core/entry.h"
#include "util/error.h"

/* Both buffers where there are elements; in place, the engine gets the
 * receive buffer as both. */
static tnt_result_t two_buffers(tnt_entry_call_t *c, int in_place)
{
    TNT_CHECK(tnt__entry_need(c, in_place ? c->recv : c->send,
                              "send buffer"));
    TNT_CHECK(tnt__entry_need(c, c->recv, "receive buffer"));
    c->args->in_place = in_place;
    if (in_place)
        c->post_send = c->recv;
    return TNT_SUCCESS;
}

/* In place: sendbuf == TNT_IN_PLACE or == recvbuf. */
static tnt_result_t allreduce_check(tnt_entry_call_t *c)
{
    return two_buffers(c, c->send == TNT_IN_PLACE || c->send == c->recv);
}

static const tnt_entry_op_t allreduce = {
    TNT_COLL_ALLREDUCE, "tnt_allreduce", "tnt_iallreduce", TNT_ENTRY_OP,
    allreduce_check};

TNT_API tnt_result_t tnt_iallreduce(tnt_comm_t comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    tnt_dtype_t dtype, tnt_op_t op,
                                    tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = (int)op};
    return tnt__entry_post(&allreduce, &c, req);
}

TNT_API tnt_result_t tnt_allreduce(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype, tnt_op_t op)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = (int)op};
    return tnt__entry_run(&allreduce, &c);
}

/* One buffer, in place on every rank. */
static tnt_result_t broadcast_check(tnt_entry_call_t *c)
{
    TNT_CHECK(tnt__entry_need(c, c->recv, "buffer"));
    c->args->in_place = 1;
    return TNT_SUCCESS;
}

static const tnt_entry_op_t broadcast = {
    TNT_COLL_BROADCAST, "tnt_broadcast", "tnt_ibroadcast", TNT_ENTRY_ROOT,
    broadcast_check};

TNT_API tnt_result_t tnt_ibroadcast(tnt_comm_t comm, void *buf, size_t count,
                                    tnt_dtype_t dtype, int root,
                                    tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .send = buf, .recv = buf,
                          .count = count, .dtype = dtype, .op = TNT_SUM,
                          .root = root};
    return tnt__entry_post(&broadcast, &c, req);
}

TNT_API tnt_result_t tnt_broadcast(tnt_comm_t comm, void *buf, size_t count,
                                   tnt_dtype_t dtype, int root)
{
    tnt_entry_call_t c = {.comm = comm, .send = buf, .recv = buf,
                          .count = count, .dtype = dtype, .op = TNT_SUM,
                          .root = root};
    return tnt__entry_run(&broadcast, &c);
}

/* No data: zero bytes, posted as in place. */
static tnt_result_t barrier_check(tnt_entry_call_t *c)
{
    c->args->in_place = 1;
    return TNT_SUCCESS;
}

static const tnt_entry_op_t barrier = {
    TNT_COLL_BARRIER, "tnt_barrier", "tnt_ibarrier", 0, barrier_check};

TNT_API tnt_result_t tnt_ibarrier(tnt_comm_t comm, tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .dtype = TNT_U8, .op = TNT_SUM};
    return tnt__entry_post(&barrier, &c, req);
}

TNT_API tnt_result_t tnt_barrier(tnt_comm_t comm)
{
    tnt_entry_call_t c = {.comm = comm, .dtype = TNT_U8, .op = TNT_SUM};
    return tnt__entry_run(&barrier, &c);
}

/* In place: sendbuf == TNT_IN_PLACE, this rank's block already in
 * recvbuf. */
static tnt_result_t allgather_check(tnt_entry_call_t *c)
{
    return two_buffers(c, c->send == TNT_IN_PLACE);
}

static const tnt_entry_op_t allgather = {
    TNT_COLL_ALLGATHER, "tnt_allgather", "tnt_iallgather",
    TNT_ENTRY_PER_RANK, allgather_check};

TNT_API tnt_result_t tnt_iallgather(tnt_comm_t comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    tnt_dtype_t dtype, tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = TNT_SUM};
    return tnt__entry_post(&allgather, &c, req);
}

TNT_API tnt_result_t tnt_allgather(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = TNT_SUM};
    return tnt__entry_run(&allgather, &c);
}

/* Never in place: the send buffer holds size * count elements, the
 * receive buffer count. */
static tnt_result_t reduce_scatter_check(tnt_entry_call_t *c)
{
    TNT_CHECK(tnt__entry_need(c, c->send, "send buffer"));
    TNT_CHECK(tnt__entry_need(c, c->recv, "receive buffer"));
    if (c->count > 0 && (c->send == TNT_IN_PLACE || c->send == c->recv))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: in-place is "
                          "not supported; pass separate send (size*count) "
                          "and receive (count) buffers", c->comm->rank,
                          c->fn);
    return TNT_SUCCESS;
}

static const tnt_entry_op_t reduce_scatter = {
    TNT_COLL_REDUCE_SCATTER, "tnt_reduce_scatter", "tnt_ireduce_scatter",
    TNT_ENTRY_OP | TNT_ENTRY_PER_RANK, reduce_scatter_check};

TNT_API tnt_result_t tnt_ireduce_scatter(tnt_comm_t comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, tnt_dtype_t dtype,
                                         tnt_op_t op, tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = (int)op};
    return tnt__entry_post(&reduce_scatter, &c, req);
}

TNT_API tnt_result_t tnt_reduce_scatter(tnt_comm_t comm, const void *sendbuf,
                                        void *recvbuf, size_t count,
                                        tnt_dtype_t dtype, tnt_op_t op)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = (int)op};
    return tnt__entry_run(&reduce_scatter, &c);
}
