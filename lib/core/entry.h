/*
 * The entry layer of the public collectives and of tnt_send/tnt_recv:
 * one path from a public call to the engine. Each public function fills
 * a tnt_entry_call_t with its arguments and hands it, with the
 * description of its operation (tnt_entry_op_t: the kind, the two names,
 * which shared checks apply, its own check), to tnt__entry_run
 * (blocking) or tnt__entry_post (nonblocking). The entry checks what the
 * calls share (the communicator first, then dtype, op, root, the size in
 * bytes, the request pointer; kept in release builds), runs the
 * operation's own check, which decides the buffers posted, enforces one
 * thread at a time in the collectives of a communicator, and posts to the
 * engine; a blocking call waits and releases in the same hold of the
 * lock.
 *
 * A new collective: a kind (collectives/algorithms.h) and its schedule,
 * then here a tnt_entry_op_t and its two public functions in the file of
 * its family (collective_api.c, collective_rooted.c,
 * collective_alltoall.c, p2p_api.c).
 */
#ifndef TNT_CORE_ENTRY_H
#define TNT_CORE_ENTRY_H

#include "core/engine.h"

/** One call as the user made it; the operation's check completes it. */
typedef struct tnt_entry_call {
    tnt_comm_t comm;
    const void *send;          /* as passed (may be TNT_IN_PLACE) */
    void *recv;
    size_t count;
    tnt_dtype_t dtype;
    int op;                    /* TNT_OP_*; TNT_SUM where it has none */
    int root;                  /* the root; tnt_send/tnt_recv: the peer */
    const void *extra;         /* what one operation alone has (alltoallv's
                                  arrays, a send's or receive's tag) */
    /* Set by the entry before the operation's check: the call's name
     * (blocking or not: messages name the call the user made) and the
     * arguments posted (tnt__coll_args, not in place; they live in the
     * entry's frame, so that the caller's call stays small to set up). */
    const char *fn;
    tnt_coll_args_t *args;
    /* Set by the operation's check: the buffers handed to the engine.
     * Without a check, send and recv as passed. */
    const void *post_send;
    void *post_recv;
} tnt_entry_call_t;

/** Shared checks an operation asks for (tnt_entry_op_t.checks). */
enum {
    TNT_ENTRY_OP = 1,          /* op is one of TNT_SUM..TNT_MAX */
    TNT_ENTRY_ROOT = 2,        /* root is a rank */
    TNT_ENTRY_PER_RANK = 4     /* the buffer is count elements per rank */
};

/** What differs between the public operations. */
typedef struct tnt_entry_op {
    int kind;                  /* TNT_COLL_* */
    const char *name;          /* "tnt_allreduce" */
    const char *iname;         /* "tnt_iallreduce" */
    unsigned checks;           /* TNT_ENTRY_* */
    /* The operation's own checks, after the shared ones: its buffers, in
     * place or not, and what is posted (c->post_send, c->post_recv,
     * c->args). NULL: nothing more to check, buffers posted as passed. */
    tnt_result_t (*check)(tnt_entry_call_t *c);
} tnt_entry_op_t;

/** A blocking call: check, post, wait, release. Never positive. */
tnt_result_t tnt__entry_run(const tnt_entry_op_t *op, tnt_entry_call_t *c);
/** A nonblocking call: check, post; *req is the request, NULL on error. */
tnt_result_t tnt__entry_post(const tnt_entry_op_t *op, tnt_entry_call_t *c,
                             tnt_request_t *req);

/** The requests handed to the user (request_api.c): a place promised
 *  before the post, so that registering the request after it cannot
 *  fail; the request registered, or the place given back. */
tnt_result_t tnt__request_reserve(const char *fn);
void tnt__request_commit(tnt_request_t req);
void tnt__request_cancel(void);

/** The error of tnt__entry_need. */
tnt_result_t tnt__entry_null_buffer(const tnt_entry_call_t *c,
                                    const char *what);
/** "rank R: FN: BUFFER is NULL with count N" unless the buffer is there
 *  or count is 0: the operations' checks share it. Inline: every call
 *  checks its buffers. */
static inline tnt_result_t tnt__entry_need(const tnt_entry_call_t *c,
                                           const void *buf,
                                           const char *what)
{
    if (c->count > 0 && !buf)
        return tnt__entry_null_buffer(c, what);
    return TNT_SUCCESS;
}

#endif /* TNT_CORE_ENTRY_H */
