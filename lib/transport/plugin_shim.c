/*
 * util/error.h, util/log.h and tnt_last_error() for a transport built as
 * a plugin: every message goes to the core through env->set_error,
 * env->last_error and env->log (see plugin_shim.h). Both services keep no state per communicator, so the
 * services of any env will do, with core NULL.
 */
#include <stdarg.h>
#include <stdio.h>

#include "util/error.h"
#include "util/log.h"
#include "transport/plugin_shim.h"

typedef tnt_result_t (*set_error_fn)(void *, tnt_result_t, const char *);
typedef const char *(*last_error_fn)(void *);
typedef void (*log_fn)(void *, int, const char *, ...);

static set_error_fn core_set_error;
static last_error_fn core_last_error;
static log_fn core_log;

void tnt__plugin_bind(const tnt_transport_env_t *env)
{
    if (TNT_TRANSPORT_HAS(env, set_error) && env->set_error)
        __atomic_store_n(&core_set_error, env->set_error, __ATOMIC_RELEASE);
    if (TNT_TRANSPORT_HAS(env, last_error) && env->last_error)
        __atomic_store_n(&core_last_error, env->last_error,
                         __ATOMIC_RELEASE);
    if (env->log)
        __atomic_store_n(&core_log, env->log, __ATOMIC_RELEASE);
}

tnt_result_t tnt__error_str(tnt_result_t result, const char *msg)
{
    set_error_fn f = __atomic_load_n(&core_set_error, __ATOMIC_ACQUIRE);
    return f ? f(NULL, result, msg) : result;
}

tnt_result_t tnt__error(tnt_result_t result, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return tnt__error_str(result, msg);
}

const char *tnt_last_error(void)
{
    last_error_fn f = __atomic_load_n(&core_last_error, __ATOMIC_ACQUIRE);
    return f ? f(NULL) : "";
}

void tnt__clear_error(void)
{
    tnt__error_str(TNT_SUCCESS, "");
}

void tnt__log_init(int rank)
{
    (void)rank; /* the core's log knows the rank and the level */
}

int tnt__log_enabled(int level)
{
    (void)level;
    return __atomic_load_n(&core_log, __ATOMIC_ACQUIRE) != NULL;
}

void tnt__log(int level, const char *fmt, ...)
{
    log_fn f = __atomic_load_n(&core_log, __ATOMIC_ACQUIRE);
    if (!f)
        return;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    f(NULL, level, "%s", msg);
}
