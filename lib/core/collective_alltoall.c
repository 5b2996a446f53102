/*
 * tnt_alltoall and tnt_alltoallv: what each checks beyond the shared
 * checks and what it posts (core/entry.h), and their blocking and
 * nonblocking functions. alltoallv's four arrays are checked here, whole,
 * before anything moves: each region must lie within the address space,
 * a buffer must be there where a region has elements, and the rank's
 * block to itself must have the same count on both sides (the other
 * ranks' agreement is checked where each message arrives,
 * core/engine_wire.c).
 */
#include <stdint.h>

#include "core/entry.h"
#include "util/error.h"

static tnt_result_t not_in_place(const tnt_entry_call_t *c, int moves)
{
    if (moves && (c->send == TNT_IN_PLACE || c->recv == TNT_IN_PLACE ||
                  c->send == c->recv))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: in place is not "
                          "supported; pass separate send and receive "
                          "buffers", c->comm->rank, c->fn);
    return TNT_SUCCESS;
}

static tnt_result_t alltoall_check(tnt_entry_call_t *c)
{
    TNT_CHECK(tnt__entry_need(c, c->send, "send buffer"));
    TNT_CHECK(tnt__entry_need(c, c->recv, "receive buffer"));
    return not_in_place(c, c->count > 0);
}

static const tnt_entry_op_t alltoall = {
    TNT_COLL_ALLTOALL, "tnt_alltoall", "tnt_ialltoall", TNT_ENTRY_PER_RANK,
    alltoall_check};

TNT_API tnt_result_t tnt_ialltoall(tnt_comm_t comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   tnt_dtype_t dtype, tnt_request_t *req)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = TNT_SUM};
    return tnt__entry_post(&alltoall, &c, req);
}

TNT_API tnt_result_t tnt_alltoall(tnt_comm_t comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  tnt_dtype_t dtype)
{
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .count = count, .dtype = dtype, .op = TNT_SUM};
    return tnt__entry_run(&alltoall, &c);
}

/* One side's regions (counts[q] elements at displs[q]): within the
 * address space, and a buffer where any has elements. *any: some has. */
static tnt_result_t check_side(const tnt_entry_call_t *c, const char *side,
                               const void *buf, const size_t *counts,
                               const size_t *displs, int *any)
{
    tnt_comm_t comm = c->comm;
    size_t esize = tnt_dtype_size(c->dtype);
    const char *cn = side[0] == 's' ? "sendcounts" : "recvcounts";
    const char *dn = side[0] == 's' ? "sdispls" : "rdispls";
    if (!counts || !displs)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s is NULL",
                          comm->rank, c->fn, !counts ? cn : dn);
    *any = 0;
    for (int q = 0; q < comm->nranks; q++) {
        if (counts[q] > SIZE_MAX / esize ||
            displs[q] > SIZE_MAX / esize - counts[q])
            return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s[%d] = "
                              "%zu at %s[%d] = %zu elements of %zu bytes "
                              "overflows the address space", comm->rank,
                              c->fn, cn, q, counts[q], dn, q, displs[q],
                              esize);
        *any |= counts[q] > 0;
    }
    if (*any && !buf)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s buffer is "
                          "NULL but %s has elements", comm->rank, c->fn,
                          side, cn);
    return TNT_SUCCESS;
}

static tnt_result_t alltoallv_check(tnt_entry_call_t *c)
{
    /* sendcounts, sdispls, recvcounts, rdispls */
    const size_t *const *v = c->extra;
    int sends, recvs;
    TNT_CHECK(check_side(c, "send", c->send, v[0], v[1], &sends));
    TNT_CHECK(check_side(c, "receive", c->recv, v[2], v[3], &recvs));
    TNT_CHECK(not_in_place(c, sends || recvs));
    int r = c->comm->rank;
    if (v[0][r] != v[2][r])
        return tnt__error(TNT_ERR_MISMATCH, "rank %d: %s: sendcounts[%d] = "
                          "%zu but recvcounts[%d] = %zu: the block a rank "
                          "sends itself must have the count it receives",
                          r, c->fn, r, v[0][r], r, v[2][r]);
    for (int i = 0; i < 4; i++)
        c->args->v[i] = v[i];
    return TNT_SUCCESS;
}

/* The counts are per peer, in the arrays: count 0 in the shared checks
 * and in the signature. */
static const tnt_entry_op_t alltoallv = {
    TNT_COLL_ALLTOALLV, "tnt_alltoallv", "tnt_ialltoallv", 0,
    alltoallv_check};

TNT_API tnt_result_t tnt_ialltoallv(tnt_comm_t comm, const void *sendbuf,
                                    const size_t *sendcounts,
                                    const size_t *sdispls, void *recvbuf,
                                    const size_t *recvcounts,
                                    const size_t *rdispls, tnt_dtype_t dtype,
                                    tnt_request_t *req)
{
    const size_t *v[4] = {sendcounts, sdispls, recvcounts, rdispls};
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .dtype = dtype, .op = TNT_SUM, .extra = v};
    return tnt__entry_post(&alltoallv, &c, req);
}

TNT_API tnt_result_t tnt_alltoallv(tnt_comm_t comm, const void *sendbuf,
                                   const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf,
                                   const size_t *recvcounts,
                                   const size_t *rdispls, tnt_dtype_t dtype)
{
    const size_t *v[4] = {sendcounts, sdispls, recvcounts, rdispls};
    tnt_entry_call_t c = {.comm = comm, .send = sendbuf, .recv = recvbuf,
                          .dtype = dtype, .op = TNT_SUM, .extra = v};
    return tnt__entry_run(&alltoallv, &c);
}
