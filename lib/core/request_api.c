/*
 * The public calls on requests: test, wait (with or without a limit),
 * the sender of a receive, and free; the engine does the work
 * (core/engine.h). A request handed
 * to the user by a nonblocking call is live (util/handles.h) until
 * tnt_request_free takes it back: every call here checks its handle
 * first, so a request freed twice, or used after its free, is
 * TNT_ERR_INVALID_ARG, never a read of a request the engine has
 * recycled or freed (as a freed communicator is TNT_ERR_INVALID_COMM).
 */
#include "core/devmem.h"
#include "core/entry.h"
#include "util/error.h"
#include "util/handles.h"

static tnt_handles_t live_requests = TNT_HANDLES_INIT;
static _Thread_local tnt_handle_seen_t seen_request;

tnt_result_t tnt__request_reserve(const char *fn)
{
    if (tnt__handles_reserve(&live_requests) != 0)
        return tnt__error(TNT_ERR_NO_MEMORY, "%s: out of memory", fn);
    return TNT_SUCCESS;
}

void tnt__request_commit(tnt_request_t req)
{
    tnt__handles_commit(&live_requests, req);
}

void tnt__request_cancel(void)
{
    tnt__handles_cancel(&live_requests);
}

static tnt_result_t check(tnt_request_t req, const char *fn)
{
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "%s: request is NULL", fn);
    if (!tnt__handles_live(&live_requests, req, &seen_request))
        return tnt__error(TNT_ERR_INVALID_ARG, "%s: request %p is not live "
                          "(freed already, or not from a nonblocking call)",
                          fn, (void *)req);
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_test(tnt_request_t req)
{
    TNT_CHECK(check(req, "tnt_test"));
    int finished;
    tnt_result_t rc = tnt__engine_wait(req, 0.0, &finished);
    /* finished: device memory staged whole is copied back first */
    return finished ? tnt__devmem_finish(req, rc) : TNT_INPROGRESS;
}

TNT_API tnt_result_t tnt_wait(tnt_request_t req)
{
    TNT_CHECK(check(req, "tnt_wait"));
    int finished;
    return tnt__devmem_finish(req, tnt__engine_wait(req, -1.0, &finished));
}

TNT_API tnt_result_t tnt_wait_timeout(tnt_request_t req, double timeout_s)
{
    TNT_CHECK(check(req, "tnt_wait_timeout"));
    if (!(timeout_s >= 0))
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_wait_timeout: timeout "
                          "%g; expected >= 0 seconds", timeout_s);
    int finished;
    tnt_result_t rc = tnt__engine_wait(req, timeout_s, &finished);
    return finished ? tnt__devmem_finish(req, rc) : rc;
}

TNT_API tnt_result_t tnt_request_free(tnt_request_t req)
{
    if (!req)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_request_free: request "
                          "is NULL");
    if (!tnt__handles_remove(&live_requests, req))
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_request_free: request "
                          "%p is not live (freed twice, or not from a "
                          "nonblocking call)", (void *)req);
    /* Device memory staged whole and not seen finished: the engine may
     * still use the pinned copies, so wait for it (the communicator's
     * deadline bounds the wait); the result is not copied back. */
    if (tnt__devmem_staged(req)) {
        int finished;
        tnt_result_t rc = tnt__engine_wait(req, -1.0, &finished);
        tnt__devmem_finish(req, rc < 0 ? rc : TNT_ERR_ABORTED);
    }
    tnt__engine_release(req);
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_request_source(tnt_request_t req, int *source)
{
    TNT_CHECK(check(req, "tnt_request_source"));
    if (!source)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_request_source: source "
                          "is NULL");
    return tnt__engine_source(req, source);
}
