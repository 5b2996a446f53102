/*
 * Error reporting inside the library: every failing path records a
 * detailed, per-thread message (rank, operation, value, what was
 * expected) and returns one tnt_result_t.
 */
#ifndef TNT_UTIL_ERROR_H
#define TNT_UTIL_ERROR_H

#include "tnt/tnt.h"

/** Record a message for tnt_last_error() and return `result`. */
tnt_result_t tnt__error(tnt_result_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** Record an already formatted message (no formatting). */
tnt_result_t tnt__error_str(tnt_result_t result, const char *msg);
void tnt__clear_error(void);

/** Propagate a negative result. */
#define TNT_CHECK(call)                                                     \
    do {                                                                    \
        tnt_result_t tnt_check_rc_ = (call);                                \
        if (tnt_check_rc_ < 0)                                              \
            return tnt_check_rc_;                                           \
    } while (0)

/** Store a negative result in `rc` and jump to the cleanup `label`. */
#define TNT_CHECK_GOTO(call, rc, label)                                     \
    do {                                                                    \
        (rc) = (call);                                                      \
        if ((rc) < 0)                                                       \
            goto label;                                                     \
    } while (0)

#endif /* TNT_UTIL_ERROR_H */
