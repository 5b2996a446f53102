/*
 * tnt_alltoall and tnt_alltoallv: argument checks, then a post to the
 * engine (blocking calls are post + wait, as in collective_api.c).
 * alltoallv's four arrays are checked here, whole, before anything moves:
 * each region must lie within the address space, a buffer must be there
 * where a region has elements, and the rank's block to itself must have
 * the same count on both sides (the other ranks' agreement is checked
 * where each message arrives, core/engine_wire.c).
 */
#include <stdint.h>

#include "core/comm.h"
#include "util/error.h"

#define BLOCKING (TNT_POST_WAIT_NEXT | TNT_POST_BLOCK)

static tnt_result_t check_dtype_req(tnt_comm_t comm, const char *fn,
                                    tnt_dtype_t dtype, tnt_request_t *req)
{
    TNT_CHECK(tnt__comm_check(comm, fn));
    if (tnt_dtype_size(dtype) == 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown dtype "
                          "%d; expected TNT_F32..TNT_U64", comm->rank, fn,
                          (int)dtype);
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: request output "
                          "pointer is NULL", comm->rank, fn);
    *req = NULL;
    return TNT_SUCCESS;
}

static tnt_result_t not_in_place(tnt_comm_t comm, const char *fn,
                                 const void *sendbuf, const void *recvbuf,
                                 int moves)
{
    if (moves && (sendbuf == TNT_IN_PLACE || recvbuf == TNT_IN_PLACE ||
                  sendbuf == recvbuf))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: in place is not "
                          "supported; pass separate send and receive "
                          "buffers", comm->rank, fn);
    return TNT_SUCCESS;
}

static tnt_result_t ialltoall(tnt_comm_t comm, const void *sendbuf,
                              void *recvbuf, size_t count, tnt_dtype_t dtype,
                              unsigned flags, tnt_request_t *req)
{
    const char *fn = flags ? "tnt_alltoall" : "tnt_ialltoall";
    TNT_CHECK(check_dtype_req(comm, fn, dtype, req));
    size_t esize = tnt_dtype_size(dtype);
    if (count > SIZE_MAX / esize / (size_t)comm->nranks)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: count %zu of %s "
                          "(x%d blocks) overflows the address space",
                          comm->rank, fn, count, tnt_dtype_name(dtype),
                          comm->nranks);
    if (count > 0 && (!sendbuf || !recvbuf))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s buffer is "
                          "NULL with count %zu", comm->rank, fn,
                          !sendbuf ? "send" : "receive", count);
    TNT_CHECK(not_in_place(comm, fn, sendbuf, recvbuf, count > 0));
    tnt_coll_args_t a = tnt__coll_args(comm, TNT_COLL_ALLTOALL, count, dtype,
                                       TNT_SUM, 0, 0);
    return tnt__engine_post(comm, &a, sendbuf, recvbuf, flags, req);
}

TNT_API tnt_result_t tnt_ialltoall(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype, tnt_request_t *req)
{
    return ialltoall(comm, sendbuf, recvbuf, count, dtype, 0, req);
}

TNT_API tnt_result_t tnt_alltoall(tnt_comm_t comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  tnt_dtype_t dtype)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return ialltoall(comm, sendbuf, recvbuf, count, dtype, BLOCKING, &req);
}

/* One side's regions (counts[q] elements at displs[q]): within the
 * address space, and a buffer where any has elements. *any: some has. */
static tnt_result_t check_side(tnt_comm_t comm, const char *fn,
                               const char *side, const void *buf,
                               const size_t *counts, const size_t *displs,
                               size_t esize, int *any)
{
    const char *cn = side[0] == 's' ? "sendcounts" : "recvcounts";
    const char *dn = side[0] == 's' ? "sdispls" : "rdispls";
    if (!counts || !displs)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s is NULL",
                          comm->rank, fn, !counts ? cn : dn);
    *any = 0;
    for (int q = 0; q < comm->nranks; q++) {
        if (counts[q] > SIZE_MAX / esize ||
            displs[q] > SIZE_MAX / esize - counts[q])
            return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s[%d] = "
                              "%zu at %s[%d] = %zu elements of %zu bytes "
                              "overflows the address space", comm->rank, fn,
                              cn, q, counts[q], dn, q, displs[q], esize);
        *any |= counts[q] > 0;
    }
    if (*any && !buf)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s buffer is "
                          "NULL but %s has elements", comm->rank, fn, side,
                          cn);
    return TNT_SUCCESS;
}

static tnt_result_t ialltoallv(tnt_comm_t comm, const void *sendbuf,
                               const size_t *sendcounts,
                               const size_t *sdispls, void *recvbuf,
                               const size_t *recvcounts,
                               const size_t *rdispls, tnt_dtype_t dtype,
                               unsigned flags, tnt_request_t *req)
{
    const char *fn = flags ? "tnt_alltoallv" : "tnt_ialltoallv";
    TNT_CHECK(check_dtype_req(comm, fn, dtype, req));
    size_t esize = tnt_dtype_size(dtype);
    int sends, recvs;
    TNT_CHECK(check_side(comm, fn, "send", sendbuf, sendcounts, sdispls,
                         esize, &sends));
    TNT_CHECK(check_side(comm, fn, "receive", recvbuf, recvcounts, rdispls,
                         esize, &recvs));
    TNT_CHECK(not_in_place(comm, fn, sendbuf, recvbuf, sends || recvs));
    int r = comm->rank;
    if (sendcounts[r] != recvcounts[r])
        return tnt__error(TNT_ERR_MISMATCH, "rank %d: %s: sendcounts[%d] = "
                          "%zu but recvcounts[%d] = %zu: the block a rank "
                          "sends itself must have the count it receives",
                          r, fn, r, sendcounts[r], r, recvcounts[r]);
    tnt_coll_args_t a = tnt__coll_args(comm, TNT_COLL_ALLTOALLV, 0, dtype,
                                       TNT_SUM, 0, 0);
    a.v[0] = sendcounts;
    a.v[1] = sdispls;
    a.v[2] = recvcounts;
    a.v[3] = rdispls;
    return tnt__engine_post(comm, &a, sendbuf, recvbuf, flags, req);
}

TNT_API tnt_result_t tnt_ialltoallv(tnt_comm_t comm, const void *sendbuf,
                                    const size_t *sendcounts,
                                    const size_t *sdispls, void *recvbuf,
                                    const size_t *recvcounts,
                                    const size_t *rdispls, tnt_dtype_t dtype,
                                    tnt_request_t *req)
{
    return ialltoallv(comm, sendbuf, sendcounts, sdispls, recvbuf,
                      recvcounts, rdispls, dtype, 0, req);
}

TNT_API tnt_result_t tnt_alltoallv(tnt_comm_t comm, const void *sendbuf,
                                   const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf,
                                   const size_t *recvcounts,
                                   const size_t *rdispls, tnt_dtype_t dtype)
{
    tnt_request_t req; /* NULL on return: the call waited */
    return ialltoallv(comm, sendbuf, sendcounts, sdispls, recvbuf,
                      recvcounts, rdispls, dtype, BLOCKING, &req);
}
