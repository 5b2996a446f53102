/*
 * The public calls on requests: test, wait (with or without a limit)
 * and free; the engine does the work (core/engine.h).
 */
#include "core/engine.h"
#include "util/error.h"

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
