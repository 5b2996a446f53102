/*
 * Configuration knobs. Every environment variable the library reads is
 * declared once in TNT_PARAM_LIST, read once at communicator creation, and
 * validated: a malformed value is a TNT_ERR_CONFIG naming the variable, the
 * value and what was expected.
 */
#ifndef TNT_UTIL_PARAM_H
#define TNT_UTIL_PARAM_H

#include <stddef.h>

#include "tnt/tnt.h"

/* X(field, ENV_NAME, kind, default, help). kind: SIZE (bytes with k/M/G
 * suffixes, powers of 1024), SECONDS (decimal), MICROS (integer
 * microseconds up to 1 s, kept in seconds), ALGO (names), TOPOLOGY (auto
 * or flat). */
#define TNT_PARAM_LIST(X)                                                   \
    X(timeout_s, "TNT_TIMEOUT", SECONDS, "300",                             \
      "deadline of every operation, seconds")                               \
    X(connect_timeout_s, "TNT_CONNECT_TIMEOUT", SECONDS, "60",              \
      "deadline to reach rank 0 and all peers at start, seconds")          \
    X(segment_bytes, "TNT_SEGMENT_BYTES", SIZE, "256k",                     \
      "pipelining granule: chain segment; ring and direct x4")              \
    X(socket_buffer, "TNT_SOCKET_BUFFER", SIZE, "0",                        \
      "SO_SNDBUF/SO_RCVBUF of data sockets (0: kernel autotuning)")         \
    X(allreduce_algo, "TNT_ALLREDUCE_ALGO", ALGO, "auto",                   \
      "auto|ring|rd|rabenseifner|hierarchical|oneshot|direct")               \
    X(topology, "TNT_TOPOLOGY", TOPOLOGY, "auto",                           \
      "auto|flat: flat ignores hosts (no hierarchical allreduce)")         \
    X(bcast_algo, "TNT_BCAST_ALGO", ALGO, "auto",                           \
      "auto|binomial|pipeline|flat")                                        \
    X(max_unexpected_bytes, "TNT_MAX_UNEXPECTED_BYTES", SIZE, "1G",         \
      "memory for messages that arrive before their receive is posted")  \
    X(unlocked_bytes, "TNT_UNLOCKED_BYTES", SIZE, "16k",                   \
      "reductions and copies this large run with the engine lock free")   \
    X(spin_s, "TNT_SPIN_US", MICROS, "100",                                 \
      "a blocking call polls this long, microseconds, before it sleeps")

enum tnt_topology { TNT_TOPOLOGY_AUTO = 0, TNT_TOPOLOGY_FLAT };

typedef struct tnt_params {
    double timeout_s;
    double connect_timeout_s;
    size_t segment_bytes;
    size_t socket_buffer;
    int allreduce_algo;
    int bcast_algo;
    int topology;       /* enum tnt_topology */
    size_t max_unexpected_bytes;
    size_t unlocked_bytes;
    double spin_s;
} tnt_params_t;

/** Read every knob from the environment (defaults where unset). */
tnt_result_t tnt__params_load(tnt_params_t *p);

/** "123", "32k", "4M", "1G", "64KiB" -> bytes. Rejects junk, negatives and
 *  overflow with a message naming `what`. */
tnt_result_t tnt__parse_size(const char *what, const char *s, size_t *out);
/** Decimal integer in [min, max]. */
tnt_result_t tnt__parse_long(const char *what, const char *s, long min,
                             long max, long *out);
/** Finite, non-negative decimal number. */
tnt_result_t tnt__parse_seconds(const char *what, const char *s,
                                double *out);

#endif /* TNT_UTIL_PARAM_H */
