/*
 * Logging: levels ERROR..DEBUG from TNT_LOG_LEVEL, printed by the master
 * rank only unless TNT_LOG_ALL_RANKS=1 (errors and TNT_LOG_EVERY_RANK
 * lines on every rank); every line carries the rank.
 */
#ifndef TNT_UTIL_LOG_H
#define TNT_UTIL_LOG_H

#include "tnt/transport.h" /* enum tnt_log_level */

/** Set once per process from the environment (idempotent). */
void tnt__log_init(int rank);
int tnt__log_enabled(int level);
void tnt__log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define TNT_LOG_ERR(...) tnt__log(TNT_LOG_ERROR, __VA_ARGS__)
#define TNT_LOG_WARN(...) tnt__log(TNT_LOG_WARNING, __VA_ARGS__)
#define TNT_LOG_INFO(...) tnt__log(TNT_LOG_INFO, __VA_ARGS__)
/* A refused stranger: printed on the rank that refused it. */
#define TNT_LOG_SECURITY(...)                                               \
    tnt__log(TNT_LOG_WARNING | TNT_LOG_EVERY_RANK, __VA_ARGS__)
#define TNT_LOG_DEBUG(...) tnt__log(TNT_LOG_DEBUG, __VA_ARGS__)

#endif /* TNT_UTIL_LOG_H */
