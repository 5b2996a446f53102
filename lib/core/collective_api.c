/*
 * The public collective calls: argument checks (kept in release builds, so
 * bad input is an error, never a crash), then post to the engine; blocking
 * calls are post + wait.
 */
#include <stdint.h>

#include "core/comm.h"
#include "util/error.h"

static tnt_result_t check_args(tnt_comm_t comm, const char *fn, size_t count,
                               size_t blocks, tnt_dtype_t dtype, int op,
                               const void *send, const void *recv)
{
    TNT_CHECK(tnt__comm_check(comm, fn));
    size_t esize = tnt_dtype_size(dtype);
    if (esize == 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown dtype "
                          "%d; expected TNT_F32..TNT_U64", comm->rank, fn,
                          (int)dtype);
    if (op >= 0 && (op >= TNT_OP_COUNT))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown op %d; "
                          "expected TNT_SUM, TNT_AVG, TNT_PROD, TNT_MIN or "
                          "TNT_MAX", comm->rank, fn, op);
    if (count > SIZE_MAX / esize / blocks)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: count %zu of %s "
                          "(x%zu blocks) overflows the address space",
                          comm->rank, fn, count, tnt_dtype_name(dtype),
                          blocks);
    if (count > 0 && (!recv || !send))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s buffer is "
                          "NULL with count %zu", comm->rank, fn,
                          !recv ? "receive" : "send", count);
    return TNT_SUCCESS;
}

tnt_coll_args_t tnt__coll_args(tnt_comm_t comm, int kind, size_t count,
                               tnt_dtype_t dtype, tnt_op_t op, int root,
                               int in_place)
{
    tnt_coll_args_t a = {
        .kind = kind, .dtype = dtype, .op = op, .count = count,
        .root = root, .rank = comm->rank, .nranks = comm->nranks,
        .esize = tnt_dtype_size(dtype), .in_place = in_place,
        .segment_bytes = comm->params.segment_bytes,
        .topo = (comm->topo.nranks > 1 &&
                 comm->params.topology == TNT_TOPOLOGY_AUTO)
                    ? &comm->topo : NULL,
        .intra_host = comm->intra_host,
        .host_cpus = comm->host_cpus,
        .ready_min_bytes = comm->ready_min_bytes,
        .reproducible = comm->params.reproducible,
    };
    return a;
}

static tnt_result_t post(tnt_comm_t comm, int kind, const void *send,
                         void *recv, size_t count, tnt_dtype_t dtype,
                         tnt_op_t op, int root, int in_place,
                         unsigned flags, tnt_request_t *req)
{
    tnt_coll_args_t a = tnt__coll_args(comm, kind, count, dtype, op, root,
                                       in_place);
    return tnt__engine_post(comm, &a, in_place ? recv : send, recv,
                            flags, req);
}

/* Blocking calls post, wait and release in one go (engine.h). */
#define BLOCKING (TNT_POST_WAIT_NEXT | TNT_POST_BLOCK)

static tnt_result_t check_req(tnt_comm_t comm, const char *fn,
                              tnt_request_t *req)
{
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: request output "
                          "pointer is NULL", comm->rank, fn);
    *req = NULL;
    return TNT_SUCCESS;
}

static tnt_result_t iallreduce(tnt_comm_t comm, const void *sendbuf,
                               void *recvbuf, size_t count, tnt_dtype_t dtype,
                               tnt_op_t op, unsigned flags, tnt_request_t *req)
{
    /* Messages name the call the user made. */
    const char *fn = flags ? "tnt_allreduce" : "tnt_iallreduce";
    int in_place = (sendbuf == TNT_IN_PLACE || sendbuf == recvbuf);
    TNT_CHECK(check_args(comm, fn, count, 1, dtype, (int)op,
                         in_place ? recvbuf : sendbuf, recvbuf));
    if ((int)op < 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown "
                          "op %d", comm->rank, fn, (int)op);
    TNT_CHECK(check_req(comm, fn, req));
    return post(comm, TNT_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op,
                0, in_place, flags, req);
}

TNT_API tnt_result_t tnt_iallreduce(tnt_comm_t comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    tnt_dtype_t dtype, tnt_op_t op,
                                    tnt_request_t *req)
{
    return iallreduce(comm, sendbuf, recvbuf, count, dtype, op, 0, req);
}

TNT_API tnt_result_t tnt_allreduce(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype, tnt_op_t op)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return iallreduce(comm, sendbuf, recvbuf, count, dtype, op, BLOCKING,
                      &req);
}

static tnt_result_t ibroadcast(tnt_comm_t comm, void *buf, size_t count,
                               tnt_dtype_t dtype, int root, unsigned flags,
                               tnt_request_t *req)
{
    /* Messages name the call the user made. */
    const char *fn = flags ? "tnt_broadcast" : "tnt_ibroadcast";
    TNT_CHECK(check_args(comm, fn, count, 1, dtype, -1, buf,
                         buf));
    if (root < 0 || root >= comm->nranks)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: root %d "
                          "is not a rank; expected 0..%d", comm->rank, fn,
                          root, comm->nranks - 1);
    TNT_CHECK(check_req(comm, fn, req));
    return post(comm, TNT_COLL_BROADCAST, buf, buf, count, dtype, TNT_SUM,
                root, 1, flags, req);
}

TNT_API tnt_result_t tnt_ibroadcast(tnt_comm_t comm, void *buf, size_t count,
                                    tnt_dtype_t dtype, int root,
                                    tnt_request_t *req)
{
    return ibroadcast(comm, buf, count, dtype, root, 0, req);
}

TNT_API tnt_result_t tnt_broadcast(tnt_comm_t comm, void *buf, size_t count,
                                   tnt_dtype_t dtype, int root)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return ibroadcast(comm, buf, count, dtype, root, BLOCKING, &req);
}

static tnt_result_t ibarrier(tnt_comm_t comm, unsigned flags,
                             tnt_request_t *req)
{
    /* Messages name the call the user made. */
    const char *fn = flags ? "tnt_barrier" : "tnt_ibarrier";
    TNT_CHECK(tnt__comm_check(comm, fn));
    TNT_CHECK(check_req(comm, fn, req));
    return post(comm, TNT_COLL_BARRIER, NULL, NULL, 0, TNT_U8, TNT_SUM, 0, 1,
                flags, req);
}

TNT_API tnt_result_t tnt_ibarrier(tnt_comm_t comm, tnt_request_t *req)
{
    return ibarrier(comm, 0, req);
}

TNT_API tnt_result_t tnt_barrier(tnt_comm_t comm)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return ibarrier(comm, BLOCKING, &req);
}

static tnt_result_t iallgather(tnt_comm_t comm, const void *sendbuf,
                               void *recvbuf, size_t count, tnt_dtype_t dtype,
                               unsigned flags, tnt_request_t *req)
{
    /* Messages name the call the user made. */
    const char *fn = flags ? "tnt_allgather" : "tnt_iallgather";
    TNT_CHECK(tnt__comm_check(comm, fn));
    int in_place = (sendbuf == TNT_IN_PLACE);
    TNT_CHECK(check_args(comm, fn, count,
                         (size_t)comm->nranks, dtype, -1,
                         in_place ? recvbuf : sendbuf, recvbuf));
    TNT_CHECK(check_req(comm, fn, req));
    return post(comm, TNT_COLL_ALLGATHER, sendbuf, recvbuf, count, dtype,
                TNT_SUM, 0, in_place, flags, req);
}

TNT_API tnt_result_t tnt_iallgather(tnt_comm_t comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    tnt_dtype_t dtype, tnt_request_t *req)
{
    return iallgather(comm, sendbuf, recvbuf, count, dtype, 0, req);
}

TNT_API tnt_result_t tnt_allgather(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return iallgather(comm, sendbuf, recvbuf, count, dtype, BLOCKING, &req);
}

static tnt_result_t ireduce_scatter(tnt_comm_t comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    tnt_dtype_t dtype, tnt_op_t op,
                                    unsigned flags, tnt_request_t *req)
{
    /* Messages name the call the user made. */
    const char *fn = flags ? "tnt_reduce_scatter" : "tnt_ireduce_scatter";
    TNT_CHECK(tnt__comm_check(comm, fn));
    TNT_CHECK(check_args(comm, fn, count,
                         (size_t)comm->nranks, dtype, (int)op, sendbuf,
                         recvbuf));
    if ((int)op < 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown "
                          "op %d", comm->rank, fn, (int)op);
    if (count > 0 && (sendbuf == TNT_IN_PLACE || sendbuf == recvbuf))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: in-place is "
                          "not supported; pass separate send (size*count) "
                          "and receive (count) buffers", comm->rank, fn);
    TNT_CHECK(check_req(comm, fn, req));
    return post(comm, TNT_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count,
                dtype, op, 0, 0, flags, req);
}

TNT_API tnt_result_t tnt_ireduce_scatter(tnt_comm_t comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, tnt_dtype_t dtype,
                                         tnt_op_t op, tnt_request_t *req)
{
    return ireduce_scatter(comm, sendbuf, recvbuf, count, dtype, op, 0, req);
}

TNT_API tnt_result_t tnt_reduce_scatter(tnt_comm_t comm, const void *sendbuf,
                                        void *recvbuf, size_t count,
                                        tnt_dtype_t dtype, tnt_op_t op)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return ireduce_scatter(comm, sendbuf, recvbuf, count, dtype, op,
                           BLOCKING, &req);
}

/* ---- requests --------------------------------------------------------- */

TNT_API tnt_result_t tnt_test(tnt_request_t req)
{
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_test: request is NULL");
    int finished;
    tnt_result_t rc = tnt__engine_wait(req, 0.0, &finished);
    return finished ? rc : TNT_INPROGRESS;
}

TNT_API tnt_result_t tnt_wait(tnt_request_t req)
{
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_wait: request is NULL");
    int finished;
    return tnt__engine_wait(req, -1.0, &finished);
}

TNT_API tnt_result_t tnt_wait_timeout(tnt_request_t req, double timeout_s)
{
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_wait_timeout: request is "
                          "NULL");
    if (!(timeout_s >= 0))
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_wait_timeout: timeout "
                          "%g; expected >= 0 seconds", timeout_s);
    int finished;
    return tnt__engine_wait(req, timeout_s, &finished);
}

TNT_API tnt_result_t tnt_request_free(tnt_request_t req)
{
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_request_free: request "
                          "is NULL");
    tnt__engine_release(req);
    return TNT_SUCCESS;
}
