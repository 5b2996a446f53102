/*
 * Configuration knobs of the engine. The variables of TNT_PARAM_LIST are
 * read once at communicator creation and validated: a malformed value is
 * a TNT_ERR_CONFIG naming the variable, the value and what was expected.
 *
 * Not every variable the library reads is declared here (yet); these are
 * read where they are used:
 *   boot/launch_env.c        the launcher's: TNT_RANK, TNT_SIZE,
 *                            TNT_LOCAL_RANK, TNT_LOCAL_SIZE, TNT_ROOT_ADDR,
 *                            TNT_ROOT_PORT, TNT_JOB_KEY, TNT_BOOTSTRAP, and
 *                            PMIx's, Open MPI's, Slurm's and torchrun's own
 *   boot/bootstrap.c         TNT_SOCKET_IFNAME
 *   core/comm_tp.c           TNT_TRANSPORT
 *   core/report.c            TNT_REPORT_SIGNAL
 *   util/log.c               TNT_LOG_LEVEL, TNT_LOG_ALL_RANKS
 *   util/hostid.c            TNT_HOST_ID
 *   collectives/reduce.c     TNT_SIMD
 *   fusion/fusion_setup.c    TNT_FUSION_THRESHOLD
 *   transport/tcp/tcp.c      TNT_SOCKET_BUFFER, TNT_HEARTBEAT,
 *                            TNT_SOCKETS_PER_PEER
 *   transport/shm/shm.c      TNT_SHM_ANY_UID
 *   transport/verbs/         TNT_IB_HCA, TNT_IB_GID_INDEX, TNT_IB_TIMEOUT,
 *                            TNT_IB_RETRY_CNT, TNT_IB_RECV_DEPTH,
 *                            TNT_IB_REG_CACHE, TNT_IB_REG_CACHE_LIMIT
 * TNT_SOCKET_BUFFER is also in the list below, so a bad value fails
 * early, but only the TCP transport's own parse is used. Some of those
 * are lenient (an unknown TNT_LOG_LEVEL or TNT_SIMD falls back with at
 * most a warning); docs/environment.md lists every variable for users.
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
    X(eager_bytes, "TNT_EAGER_BYTES", SIZE, "64k",                         \
      "larger messages wait until the receiver has posted its receive")  \
    X(eager_window, "TNT_EAGER_WINDOW", SIZE, "1M",                        \
      "eager bytes per peer sent and not yet consumed by its receives")  \
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
    size_t eager_bytes;
    size_t eager_window;
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
