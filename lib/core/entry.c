/*
 * The entry layer (core/entry.h): the checks every public collective and
 * point-to-point call shares, blocking and nonblocking, and the post to
 * the engine, written once. Argument checks stay in release builds, so
 * bad input is an error, never a crash.
 */
#include <stdint.h>

#include "core/comm.h"
#include "core/entry.h"
#include "util/error.h"

/* Blocking calls post, wait and release in one go (engine.h). */
#define BLOCKING (TNT_POST_WAIT_NEXT | TNT_POST_BLOCK)

tnt_result_t tnt__entry_need(const tnt_entry_call_t *c, const void *buf,
                             const char *what)
{
    if (c->count > 0 && !buf)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s is NULL "
                          "with count %zu", c->comm->rank, c->fn, what,
                          c->count);
    return TNT_SUCCESS;
}

/* The checks every call shares, in this order: the communicator (first:
 * nothing of it is read before), dtype, op, root, that count elements
 * (times the rank count per rank) fit the address space, the request
 * pointer of a nonblocking call; then the operation's own. */
static tnt_result_t check(const tnt_entry_op_t *op, tnt_entry_call_t *c,
                          int blocking, tnt_request_t *req)
{
    c->fn = blocking ? op->name : op->iname;
    TNT_CHECK(tnt__comm_check(c->comm, c->fn));
    tnt_comm_t comm = c->comm;
    size_t esize = tnt_dtype_size(c->dtype);
    if (esize == 0)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown dtype "
                          "%d; expected TNT_F32..TNT_U64", comm->rank, c->fn,
                          (int)c->dtype);
    if ((op->checks & TNT_ENTRY_OP) && (c->op < 0 || c->op >= TNT_OP_COUNT))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: unknown op %d; "
                          "expected TNT_SUM, TNT_AVG, TNT_PROD, TNT_MIN or "
                          "TNT_MAX", comm->rank, c->fn, c->op);
    if ((op->checks & TNT_ENTRY_ROOT) &&
        (c->root < 0 || c->root >= comm->nranks))
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: root %d is not "
                          "a rank; expected 0..%d", comm->rank, c->fn,
                          c->root, comm->nranks - 1);
    size_t blocks = (op->checks & TNT_ENTRY_PER_RANK) ? (size_t)comm->nranks
                                                      : 1;
    if (c->count > SIZE_MAX / esize / blocks)
        return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: count %zu of %s "
                          "(x%zu blocks) overflows the address space",
                          comm->rank, c->fn, c->count,
                          tnt_dtype_name(c->dtype), blocks);
    if (!blocking) {
        if (!req)
            return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: request "
                              "output pointer is NULL", comm->rank, c->fn);
        *req = NULL;
    }
    c->args = tnt__coll_args(comm, op->kind, c->count, c->dtype,
                             (tnt_op_t)c->op, c->root, 0);
    c->post_send = c->send;
    c->post_recv = c->recv;
    return op->check ? op->check(c) : TNT_SUCCESS;
}

tnt_result_t tnt__entry_run(const tnt_entry_op_t *op, tnt_entry_call_t *c)
{
    TNT_CHECK(check(op, c, 1, NULL));
    struct tnt_request *req; /* NULL on return: the call waited */
    return tnt__engine_post(c->comm, &c->args, c->post_send, c->post_recv,
                            BLOCKING, &req);
}

tnt_result_t tnt__entry_post(const tnt_entry_op_t *op, tnt_entry_call_t *c,
                             tnt_request_t *req)
{
    TNT_CHECK(check(op, c, 0, req));
    return tnt__engine_post(c->comm, &c->args, c->post_send, c->post_recv,
                            0, req);
}
