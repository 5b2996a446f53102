/*
 * The entry layer (core/entry.h): the checks every public collective and
 * point-to-point call shares, blocking and nonblocking, and the post to
 * the engine, written once. Argument checks stay in release builds, so
 * bad input is an error, never a crash.
 */
#include <stdint.h>
#include <stdio.h>

#include "core/comm_live.h"
#include "core/devmem.h"
#include "core/entry.h"
#include "core/progress.h"
#include "util/error.h"

/* Blocking calls post, wait and release in one go (engine.h). */
#define BLOCKING (TNT_POST_WAIT_NEXT | TNT_POST_BLOCK)

tnt_result_t tnt__entry_null_buffer(const tnt_entry_call_t *c,
                                    const char *what)
{
    return tnt__error(TNT_ERR_INVALID_ARG, "rank %d: %s: %s is NULL with "
                      "count %zu", c->comm->rank, c->fn, what, c->count);
}

/* The checks every call shares, in this order: the communicator (first:
 * nothing of it is read before), dtype, op, root, that count elements
 * (times the rank count per rank) fit the address space, the request
 * pointer of a nonblocking call; then the operation's own. */
static tnt_result_t check(const tnt_entry_op_t *op, tnt_entry_call_t *c,
                          int blocking, tnt_request_t *req,
                          tnt_coll_args_t *args)
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
    *args = tnt__coll_args(comm, op->kind, c->count, c->dtype,
                           (tnt_op_t)c->op, c->root, 0);
    c->args = args;
    c->post_send = c->send;
    c->post_recv = c->recv;
    return op->check ? op->check(c) : TNT_SUCCESS;
}

/* Collectives on one communicator are issued by one thread at a time,
 * in the same order on every rank (tnt.h): the ranks match them by their
 * order alone. A second thread entering one while another thread is
 * inside one (blocking: until it returns; nonblocking: while it posts)
 * breaks the rule, and is the part of breaking it that one rank can see
 * for the cost of one atomic exchange per call. The call is refused and
 * nothing of it is posted. Since the other ranks may have taken the two
 * threads' calls in another order, every call of the communicator from
 * here on could pair with the wrong one and return wrong data as a
 * success; so the communicator fails, on every rank (the failure notice),
 * as on a mismatch, and the call inside fails too. Sends and receives are
 * not collectives (numbered per peer and tag, core/p2p.h): any thread may
 * issue them. */
static int enter(const tnt_entry_op_t *op, tnt_comm_t comm)
{
    if (op->kind == TNT_COLL_P2P)
        return 1;
    return !__atomic_exchange_n(&comm->in_collective, 1, __ATOMIC_ACQUIRE);
}

static void leave(const tnt_entry_op_t *op, tnt_comm_t comm)
{
    if (op->kind != TNT_COLL_P2P)
        __atomic_store_n(&comm->in_collective, 0, __ATOMIC_RELEASE);
}

static tnt_result_t refuse_second_thread(const tnt_entry_call_t *c)
{
    tnt_comm_t comm = c->comm;
    char msg[400];
    snprintf(msg, sizeof msg, "rank %d: %s called while another thread is "
             "inside a collective on this communicator; collectives on one "
             "communicator must be issued by one thread at a time, in the "
             "same order on every rank (tnt.h). The call was not posted, "
             "and the communicator fails on every rank", comm->rank, c->fn);
    tnt__lock_to_post(comm);
    tnt__engine_fail(comm, TNT_ERR_INVALID_USAGE, "%s", msg);
    tnt__progress_wake(comm); /* the thread inside may sleep in epoll */
    pthread_mutex_unlock(&comm->group->lock);
    return tnt__error(TNT_ERR_INVALID_USAGE, "%s", msg);
}

tnt_result_t tnt__entry_run(const tnt_entry_op_t *op, tnt_entry_call_t *c)
{
    tnt_coll_args_t args;
    TNT_CHECK(check(op, c, 1, NULL, &args));
    int dev = tnt__devmem_check(op, c); /* device memory: core/devmem.h */
    if (dev < 0)
        return dev;
    if (dev > 0 && tnt__devmem_pipelined(op->kind))
        return tnt__devmem_stage(op, c, dev - 1);
    tnt_staged_t *st = NULL; /* the other kinds: staged whole */
    if (dev > 0) {
        tnt_result_t rc = tnt__devmem_in(op, c, dev - 1, &st);
        if (rc < 0)
            return tnt__devmem_fail_comm(c->comm, rc);
    }
    if (!enter(op, c->comm)) {
        if (st)
            tnt__devmem_out(st, TNT_ERR_INVALID_USAGE);
        return refuse_second_thread(c);
    }
    struct tnt_request *req; /* NULL on return: the call waited */
    tnt_result_t rc = tnt__engine_post(c->comm, &args, c->post_send,
                                       c->post_recv, BLOCKING, &req);
    leave(op, c->comm);
    return st ? tnt__devmem_out(st, rc) : rc;
}

tnt_result_t tnt__entry_post(const tnt_entry_op_t *op, tnt_entry_call_t *c,
                             tnt_request_t *req)
{
    tnt_coll_args_t args;
    TNT_CHECK(check(op, c, 0, req, &args));
    int dev = tnt__devmem_check(op, c);
    if (dev < 0)
        return dev;
    /* An allreduce of device memory on the GPU when it can
     * (devmem_ipc.c): done now; the request is that of the same call
     * with no elements, which every rank posts alike. */
    tnt_result_t ipc_rc;
    if (dev > 0 && op->kind == TNT_COLL_ALLREDUCE &&
        tnt__devmem_ipc_try(op, c, dev - 1, tnt__entry_run, &ipc_rc)) {
        if (ipc_rc < 0)
            return ipc_rc;
        c->count = 0;
        TNT_CHECK(check(op, c, 0, req, &args));
        dev = 0;
    }
    /* Device memory: copied in whole now, back when the request is seen
     * finished (request_api.c). */
    tnt_staged_t *st = NULL;
    if (dev > 0) {
        tnt_result_t rc = tnt__devmem_in(op, c, dev - 1, &st);
        if (rc < 0)
            return tnt__devmem_fail_comm(c->comm, rc);
    }
    tnt_result_t rc = tnt__request_reserve(c->fn);
    if (rc < 0) {
        if (st)
            tnt__devmem_out(st, rc);
        return rc;
    }
    if (!enter(op, c->comm)) {
        tnt__request_cancel();
        if (st)
            tnt__devmem_out(st, TNT_ERR_INVALID_USAGE);
        return refuse_second_thread(c);
    }
    rc = tnt__engine_post(c->comm, &args, c->post_send, c->post_recv, 0,
                          req);
    leave(op, c->comm);
    if (rc == TNT_SUCCESS) {
        if (st)
            tnt__devmem_attach(st, *req);
        tnt__request_commit(*req);
    } else {
        tnt__request_cancel();
        if (st)
            tnt__devmem_out(st, rc);
    }
    return rc;
}
