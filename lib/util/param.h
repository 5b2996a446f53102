/*
 * Configuration knobs of the engine, and the parsers behind every knob.
 * The variables of TNT_PARAM_LIST are read once at communicator creation
 * and validated: a malformed value is a TNT_ERR_CONFIG naming the
 * variable, the value and what was expected. Their names, defaults and
 * help are entries of the one table of environment variables
 * (param_table.h), which also lists every other variable the library
 * reads and which component reads it.
 */
#ifndef TNT_UTIL_PARAM_H
#define TNT_UTIL_PARAM_H

#include <stddef.h>

#include "tnt/tnt.h"

/* X(field, table id, kind). kind: SIZE (bytes with k/M/G suffixes,
 * powers of 1024), SECONDS (decimal, in the table's range), MICROS
 * (integer microseconds up to 1 s, kept in seconds), ALGO (names of this
 * collective's algorithms), TOPOLOGY (auto or flat), SWITCH (0 or 1). */
#define TNT_PARAM_LIST(X)                                                   \
    X(timeout_s, TIMEOUT, SECONDS)                                          \
    X(connect_timeout_s, CONNECT_TIMEOUT, SECONDS)                          \
    X(segment_bytes, SEGMENT_BYTES, SIZE)                                   \
    X(allreduce_algo, ALLREDUCE_ALGO, ALGO)                                 \
    X(topology, TOPOLOGY, TOPOLOGY)                                         \
    X(bcast_algo, BCAST_ALGO, ALGO)                                         \
    X(max_unexpected_bytes, MAX_UNEXPECTED_BYTES, SIZE)                     \
    X(eager_bytes, EAGER_BYTES, SIZE)                                       \
    X(eager_window, EAGER_WINDOW, SIZE)                                     \
    X(flow_batch, FLOW_BATCH, SWITCH)                                       \
    X(unlocked_bytes, UNLOCKED_BYTES, SIZE)                                 \
    X(spin_s, SPIN_US, MICROS)                                              \
    X(spin_adapt, SPIN_ADAPT, SWITCH)                                       \
    X(reproducible, REPRODUCIBLE, SWITCH)                                   \
    X(recovery, RECOVERY, SWITCH)

enum tnt_topology { TNT_TOPOLOGY_AUTO = 0, TNT_TOPOLOGY_FLAT };

typedef struct tnt_params {
    double timeout_s;
    double connect_timeout_s;
    size_t segment_bytes;
    int allreduce_algo;
    int bcast_algo;
    int topology;       /* enum tnt_topology */
    size_t max_unexpected_bytes;
    size_t eager_bytes;
    size_t eager_window;
    int flow_batch;     /* TNT_FLOW_BATCH (engine_flow.h) */
    size_t unlocked_bytes;
    double spin_s;
    int spin_adapt;     /* TNT_SPIN_ADAPT (core/wait_budget.h) */
    int reproducible;   /* TNT_REPRODUCIBLE (collectives/canon.h) */
    int recovery;       /* TNT_RECOVERY (core/recovery.h) */
} tnt_params_t;

/** Read every knob from the environment (defaults where unset). */
tnt_result_t tnt__params_load(tnt_params_t *p);

/* Room for early messages each peer needs at least: the records of
 * messages waiting for their receive, a hundred bytes or so each, and an
 * eager window worth having (engine_flow.h). */
#define TNT_UNEXPECTED_MIN_PER_PEER (4 << 10)

/** The rules that depend on the rank count: TNT_MAX_UNEXPECTED_BYTES of
 *  at least TNT_UNEXPECTED_MIN_PER_PEER per peer. */
tnt_result_t tnt__params_check_ranks(const tnt_params_t *p, int nranks);

/* The three parsers share one grammar (param.c): decimal digits exactly
 * as written, no spaces, sign (but a minus where min < 0), 0x or
 * exponent; out of range or overflowing is an error naming `what`. */

/** "123", "32k", "4M", "1G", "64KiB" -> bytes. */
tnt_result_t tnt__parse_size(const char *what, const char *s, size_t *out);
/** Decimal integer in [min, max]. */
tnt_result_t tnt__parse_long(const char *what, const char *s, long min,
                             long max, long *out);
/** Seconds in [min, max]: digits with an optional fraction ("2.5"). */
tnt_result_t tnt__parse_seconds(const char *what, const char *s, double min,
                                double max, double *out);

#endif /* TNT_UTIL_PARAM_H */
