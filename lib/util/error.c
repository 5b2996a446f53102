/*
 * Result strings (from the one X-macro list in tnt.h) and the per-thread
 * detailed message of the last error, so that a caller sees which rank,
 * operation and value failed, not just a code.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

static _Thread_local char last_error[512];

TNT_API const char *tnt_strerror(tnt_result_t result)
{
    switch (result) {
#define TNT_RESULT_CASE_(name, value, text)                                 \
    case name:                                                              \
        return text;
        TNT_RESULT_MAP(TNT_RESULT_CASE_)
#undef TNT_RESULT_CASE_
    }
    return "unknown result code";
}

TNT_API const char *tnt_last_error(void)
{
    return last_error;
}

TNT_API void tnt_get_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = TNT_VERSION_MAJOR;
    if (minor)
        *minor = TNT_VERSION_MINOR;
    if (patch)
        *patch = TNT_VERSION_PATCH;
}

tnt_result_t tnt__error(tnt_result_t result, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return result;
}

tnt_result_t tnt__error_str(tnt_result_t result, const char *msg)
{
    snprintf(last_error, sizeof(last_error), "%s", msg ? msg : "");
    return result;
}

void tnt__clear_error(void)
{
    last_error[0] = '\0';
}
