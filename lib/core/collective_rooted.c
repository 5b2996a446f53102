/*
 * The rooted collectives' public calls (reduce, gather, scatter): their
 * argument checks, then a post to the engine; blocking calls are post +
 * wait, as in collective_api.c. Buffers are checked where they are read
 * or written only: a reduce's or gather's receive buffer at the root, a
 * scatter's send buffer at the root; elsewhere they may be NULL.
 */
#include <stdint.h>

#include "core/comm.h"
#include "util/error.h"

#define BLOCKING (TNT_POST_WAIT_NEXT | TNT_POST_BLOCK)

/* What every rooted call checks: communicator (first: nothing else of
 * it is read before), dtype, op (if has_op), root, request pointer, and
 * that count elements, times the rank count if per_rank, fit the
 * address space. */
static tnt_result_t check_common(tnt_comm_t comm, const char *fn,
                                 size_t count, int per_rank,
                                 tnt_dtype_t dtype, int op, int has_op,
                                 int root, tnt_request_t *req)
{
    TNT_CHECK(tnt__comm_check(comm, fn));
    size_t blocks = per_rank ? (size_t)comm->nranks : 1;
    size_t esize = tnt_dtype_size(dtype);
    if (esize == 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown dtype "
                          "%d; expected TNT_F32..TNT_U64", comm->rank, fn,
                          (int)dtype);
    if (has_op && (op < 0 || op >= TNT_OP_COUNT))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown op %d; "
                          "expected TNT_SUM, TNT_AVG, TNT_PROD, TNT_MIN or "
                          "TNT_MAX", comm->rank, fn, op);
    if (root < 0 || root >= comm->nranks)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: root %d is not "
                          "a rank; expected 0..%d", comm->rank, fn, root,
                          comm->nranks - 1);
    if (count > SIZE_MAX / esize / blocks)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: count %zu of %s "
                          "(x%zu blocks) overflows the address space",
                          comm->rank, fn, count, tnt_dtype_name(dtype),
                          blocks);
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: request output "
                          "pointer is NULL", comm->rank, fn);
    *req = NULL;
    return TNT_SUCCESS;
}

static tnt_result_t need(tnt_comm_t comm, const char *fn, const void *buf,
                         const char *what, size_t count)
{
    if (count > 0 && (!buf || buf == TNT_IN_PLACE))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s is %s with "
                          "count %zu", comm->rank, fn, what,
                          buf ? "TNT_IN_PLACE (allowed at the root only)"
                              : "NULL", count);
    return TNT_SUCCESS;
}

static tnt_result_t post(tnt_comm_t comm, int kind, const void *send,
                         void *recv, size_t count, tnt_dtype_t dtype,
                         tnt_op_t op, int root, int in_place, unsigned flags,
                         tnt_request_t *req)
{
    tnt_coll_args_t a = tnt__coll_args(comm, kind, count, dtype, op, root,
                                       in_place);
    return tnt__engine_post(comm, &a, send, recv, flags, req);
}

static tnt_result_t ireduce(tnt_comm_t comm, const void *sendbuf,
                            void *recvbuf, size_t count, tnt_dtype_t dtype,
                            tnt_op_t op, int root, unsigned flags,
                            tnt_request_t *req)
{
    const char *fn = flags ? "tnt_reduce" : "tnt_ireduce";
    TNT_CHECK(check_common(comm, fn, count, 0, dtype, (int)op, 1, root,
                           req));
    int is_root = comm->rank == root;
    int in_place = is_root && (sendbuf == TNT_IN_PLACE || sendbuf == recvbuf);
    if (is_root)
        TNT_CHECK(need(comm, fn, recvbuf, "the root's receive buffer",
                       count));
    if (!in_place)
        TNT_CHECK(need(comm, fn, sendbuf, "the send buffer", count));
    return post(comm, TNT_COLL_REDUCE, in_place ? recvbuf : sendbuf,
                is_root ? recvbuf : NULL, count, dtype, op, root, in_place,
                flags, req);
}

TNT_API tnt_result_t tnt_ireduce(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, tnt_op_t op, int root,
                                 tnt_request_t *req)
{
    return ireduce(comm, sendbuf, recvbuf, count, dtype, op, root, 0, req);
}

TNT_API tnt_result_t tnt_reduce(tnt_comm_t comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, int root)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return ireduce(comm, sendbuf, recvbuf, count, dtype, op, root, BLOCKING,
                   &req);
}

static tnt_result_t igather(tnt_comm_t comm, const void *sendbuf,
                            void *recvbuf, size_t count, tnt_dtype_t dtype,
                            int root, unsigned flags, tnt_request_t *req)
{
    const char *fn = flags ? "tnt_gather" : "tnt_igather";
    TNT_CHECK(check_common(comm, fn, count, 1, dtype, 0,
                           0, root, req));
    int is_root = comm->rank == root;
    int in_place = is_root && sendbuf == TNT_IN_PLACE;
    if (is_root)
        TNT_CHECK(need(comm, fn, recvbuf, "the root's receive buffer",
                       count));
    if (!in_place)
        TNT_CHECK(need(comm, fn, sendbuf, "the send buffer", count));
    return post(comm, TNT_COLL_GATHER, in_place ? NULL : sendbuf,
                is_root ? recvbuf : NULL, count, dtype, TNT_SUM, root,
                in_place, flags, req);
}

TNT_API tnt_result_t tnt_igather(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, int root,
                                 tnt_request_t *req)
{
    return igather(comm, sendbuf, recvbuf, count, dtype, root, 0, req);
}

TNT_API tnt_result_t tnt_gather(tnt_comm_t comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                tnt_dtype_t dtype, int root)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return igather(comm, sendbuf, recvbuf, count, dtype, root, BLOCKING,
                   &req);
}

static tnt_result_t iscatter(tnt_comm_t comm, const void *sendbuf,
                             void *recvbuf, size_t count, tnt_dtype_t dtype,
                             int root, unsigned flags, tnt_request_t *req)
{
    const char *fn = flags ? "tnt_scatter" : "tnt_iscatter";
    TNT_CHECK(check_common(comm, fn, count, 1, dtype, 0,
                           0, root, req));
    int is_root = comm->rank == root;
    int in_place = is_root && recvbuf == TNT_IN_PLACE;
    if (is_root)
        TNT_CHECK(need(comm, fn, sendbuf, "the root's send buffer", count));
    if (!in_place)
        TNT_CHECK(need(comm, fn, recvbuf, "the receive buffer", count));
    return post(comm, TNT_COLL_SCATTER, is_root ? sendbuf : NULL,
                in_place ? NULL : recvbuf, count, dtype, TNT_SUM, root,
                in_place, flags, req);
}

TNT_API tnt_result_t tnt_iscatter(tnt_comm_t comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  tnt_dtype_t dtype, int root,
                                  tnt_request_t *req)
{
    return iscatter(comm, sendbuf, recvbuf, count, dtype, root, 0, req);
}

TNT_API tnt_result_t tnt_scatter(tnt_comm_t comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 tnt_dtype_t dtype, int root)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return iscatter(comm, sendbuf, recvbuf, count, dtype, root, BLOCKING,
                    &req);
}
