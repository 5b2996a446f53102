/*
 * tnt_send, tnt_recv and their nonblocking forms: argument checks, then a
 * post to the engine as a request of kind TNT_COLL_P2P (core/p2p.h says
 * how it is numbered apart from the collectives). Blocking calls are
 * post + wait, as in collective_api.c.
 */
#include <stdint.h>

#include "core/comm.h"
#include "util/error.h"

#define BLOCKING (TNT_POST_WAIT_NEXT | TNT_POST_BLOCK)

static tnt_result_t post(tnt_comm_t comm, int send, const void *buf,
                         size_t count, tnt_dtype_t dtype, int peer, int tag,
                         unsigned flags, tnt_request_t *req)
{
    const char *fn = send ? (flags ? "tnt_send" : "tnt_isend")
                          : (flags ? "tnt_recv" : "tnt_irecv");
    TNT_CHECK(tnt__comm_check(comm, fn));
    size_t esize = tnt_dtype_size(dtype);
    if (esize == 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown dtype "
                          "%d; expected TNT_F32..TNT_U64", comm->rank, fn,
                          (int)dtype);
    if (peer < 0 || peer >= comm->nranks || peer == comm->rank)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: peer %d is %s; "
                          "expected another rank of 0..%d", comm->rank, fn,
                          peer, peer == comm->rank ? "this rank"
                                                   : "not a rank",
                          comm->nranks - 1);
    if (tag < 0 || tag > TNT_TAG_MAX)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: tag %d; "
                          "expected 0..TNT_TAG_MAX (%d)", comm->rank, fn,
                          tag, TNT_TAG_MAX);
    if (count > SIZE_MAX / esize)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: count %zu of %s "
                          "overflows the address space", comm->rank, fn,
                          count, tnt_dtype_name(dtype));
    if (count > 0 && !buf)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: buffer is NULL "
                          "with count %zu", comm->rank, fn, count);
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: request output "
                          "pointer is NULL", comm->rank, fn);
    *req = NULL;
    tnt_coll_args_t a = tnt__coll_args(comm, TNT_COLL_P2P, count, dtype,
                                       TNT_SUM, peer, 0);
    a.p2p_send = send;
    a.tag = (uint32_t)tag;
    return tnt__engine_post(comm, &a, send ? buf : NULL,
                            send ? NULL : (void *)(uintptr_t)buf, flags,
                            req);
}

TNT_API tnt_result_t tnt_isend(tnt_comm_t comm, const void *buf,
                               size_t count, tnt_dtype_t dtype, int peer,
                               int tag, tnt_request_t *req)
{
    return post(comm, 1, buf, count, dtype, peer, tag, 0, req);
}

TNT_API tnt_result_t tnt_irecv(tnt_comm_t comm, void *buf, size_t count,
                               tnt_dtype_t dtype, int peer, int tag,
                               tnt_request_t *req)
{
    return post(comm, 0, buf, count, dtype, peer, tag, 0, req);
}

TNT_API tnt_result_t tnt_send(tnt_comm_t comm, const void *buf, size_t count,
                              tnt_dtype_t dtype, int peer, int tag)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return post(comm, 1, buf, count, dtype, peer, tag, BLOCKING, &req);
}

TNT_API tnt_result_t tnt_recv(tnt_comm_t comm, void *buf, size_t count,
                              tnt_dtype_t dtype, int peer, int tag)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return post(comm, 0, buf, count, dtype, peer, tag, BLOCKING, &req);
}
