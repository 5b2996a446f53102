/*
 * The one table of every environment variable the library reads. Nothing
 * in lib/ calls getenv() except param_table.c (the TNT_* variables, by
 * their id here) and launcher_env.c (other programs' variables, such as
 * Open MPI's or Slurm's); scripts/check-env.sh fails the tests when
 * another getenv() or a "TNT_..." string naming no entry appears in lib/.
 * docs/environment.md lists exactly these variables (test_param_table
 * compares them), and every default parses with its entry's type.
 *
 * Where and when a variable is read, and whether a malformed value is an
 * error, stays the reader's business: strict variables are a
 * TNT_ERR_CONFIG naming the variable, the four lenient ones fall back
 * with at most a warning (docs/environment.md).
 */
#ifndef TNT_UTIL_PARAM_TABLE_H
#define TNT_UTIL_PARAM_TABLE_H

#include <stddef.h>

#include "tnt/tnt.h"

/* How a value is checked (tnt__env_check):
 *   SIZE     bytes with k/M/G suffixes (tnt__parse_size)
 *   SECONDS  decimal seconds in [min, max] (tnt__parse_seconds)
 *   LONG     decimal integer in [min, max] (tnt__parse_long)
 * Numbers follow one grammar (util/param.h): digits as written, no
 * spaces, sign, 0x or exponent. An empty value means unset, for every
 * variable (tnt__env).
 *   CHOICE   one of the '|'-separated words of `values`
 *   FLAG     any text: off for 0 (or empty), on otherwise
 *   TEXT     any non-empty text; its reader parses it (`values` says how)
 */
typedef enum tnt_env_type {
    TNT_ENV_T_SIZE,
    TNT_ENV_T_SECONDS,
    TNT_ENV_T_LONG,
    TNT_ENV_T_CHOICE,
    TNT_ENV_T_FLAG,
    TNT_ENV_T_TEXT,
} tnt_env_type_t;

#define TNT_ENV_MAX_RANKS (1L << 20)

/* X(id, name, type, default, min, max, values, strict, reader, help).
 * default NULL: unset means the reader derives the value (the help says
 * from what). min, max: LONG and SECONDS. values: CHOICE's words, or
 * how TEXT is read. strict 0: a malformed value falls back, with at most a warning. */
#define TNT_ENV_LIST(X)                                                     \
    /* launcher (tnt-run sets these; docs/launchers.md) */                  \
    X(RANK, "TNT_RANK", LONG, NULL, 0, TNT_ENV_MAX_RANKS - 1, NULL, 1,      \
      "boot/launch_env.c", "this rank, below TNT_SIZE")                     \
    X(SIZE, "TNT_SIZE", LONG, NULL, 1, TNT_ENV_MAX_RANKS, NULL, 1,          \
      "boot/launch_env.c", "the rank count")                                \
    X(LOCAL_RANK, "TNT_LOCAL_RANK", LONG, NULL, 0, TNT_ENV_MAX_RANKS - 1,   \
      NULL, 1, "boot/launch_env.c, transport/verbs",                        \
      "this rank among the ranks of its host")                              \
    X(LOCAL_SIZE, "TNT_LOCAL_SIZE", LONG, NULL, 1, TNT_ENV_MAX_RANKS, NULL, \
      1, "boot/launch_env.c", "the rank count of this host")                \
    X(ROOT_ADDR, "TNT_ROOT_ADDR", TEXT, NULL, 0, 0, "host:port",            \
      1, "boot/launch_env.c",                                               \
      "where rank 0 holds the rendezvous")                                  \
    X(ROOT_PORT, "TNT_ROOT_PORT", LONG, NULL, 1, 65535, NULL, 1,            \
      "boot/launch_env.c", "port of a derived rendezvous (from the job id)") \
    X(JOB_KEY, "TNT_JOB_KEY", TEXT, NULL, 0, 0, "any secret", 1,            \
      "boot/launch_env.c", "the job's secret (else a public default key)")  \
    X(BOOTSTRAP, "TNT_BOOTSTRAP", CHOICE, "auto", 0, 0,                     \
      "auto|tnt|pmix|ompi|slurm|torchrun|single", 1, "boot/launch_env.c",   \
      "force one launcher's detection")                                     \
    X(SOCKET_IFNAME, "TNT_SOCKET_IFNAME", TEXT, NULL, 0, 0,                 \
      "names, =exact names, CIDR blocks, ^ excludes", 1, "boot/bootstrap.c", \
      "interface of the listening sockets (else the route to rank 0)")      \
    X(BOOT_TREE_MIN_RANKS, "TNT_BOOT_TREE_MIN_RANKS", LONG, "128", 1,       \
      TNT_ENV_MAX_RANKS, NULL, 1, "boot/bootstrap.c",                       \
      "from this rank count the table goes down a tree, not from rank 0")  \
    /* the engine (util/param.c, read at tnt_comm_init) */                  \
    X(TIMEOUT, "TNT_TIMEOUT", SECONDS, "300", 1, 1000000, NULL, 1,          \
      "util/param.c", "deadline of every operation, seconds")               \
    X(CONNECT_TIMEOUT, "TNT_CONNECT_TIMEOUT", SECONDS, "60",                \
      1, 1000000, NULL, 1, "util/param.c",                                  \
      "deadline to reach rank 0 and all peers at start, seconds")           \
    X(SEGMENT_BYTES, "TNT_SEGMENT_BYTES", SIZE, "256k", 0, 0,               \
      NULL, 1, "util/param.c",                                              \
      "pipelining granule: chain segment; ring and direct x4 (>= 64)")      \
    X(ALLREDUCE_ALGO, "TNT_ALLREDUCE_ALGO", CHOICE, "auto",                 \
      0, 0, "auto|ring|rd|rabenseifner|hierarchical|tree|oneshot|"          \
      "direct|slots|staged|mapped", 1, "util/param.c",                      \
      "force an allreduce algorithm")                                       \
    X(TOPOLOGY, "TNT_TOPOLOGY", CHOICE, "auto", 0, 0,                       \
      "auto|flat", 1, "util/param.c",                                       \
      "flat ignores hosts (no hierarchical allreduce)")                     \
    X(BCAST_ALGO, "TNT_BCAST_ALGO", CHOICE, "auto", 0, 0,                   \
      "auto|binomial|pipeline|flat|staged", 1, "util/param.c",              \
      "force a broadcast algorithm")                                        \
    X(MAX_UNEXPECTED_BYTES, "TNT_MAX_UNEXPECTED_BYTES", SIZE, "1G",         \
      0, 0, NULL, 1, "util/param.c",                                        \
      "memory for messages that arrive before their receive is posted "     \
      "(at least 4k per peer)")                                             \
    X(EAGER_BYTES, "TNT_EAGER_BYTES", SIZE, "256k", 0, 0, NULL,              \
      1, "util/param.c",                                                    \
      "larger messages wait until the receiver has posted its receive")     \
    X(EAGER_WINDOW, "TNT_EAGER_WINDOW", SIZE, "1M", 0, 0, NULL,             \
      1, "util/param.c",                                                    \
      "eager bytes per peer sent and not yet consumed by its receives")     \
    X(FLOW_BATCH, "TNT_FLOW_BATCH", LONG, "0", 0, 1, NULL, 1,               \
      "util/param.c",                                                       \
      "1: one CTS clears a run of a peer's receives, one RTS per "          \
      "collective and peer; 0: one of each per message")                    \
    X(UNLOCKED_BYTES, "TNT_UNLOCKED_BYTES", SIZE, "16k", 0, 0,              \
      NULL, 1, "util/param.c",                                              \
      "reductions and copies this large run with the engine lock free")     \
    X(SPIN_US, "TNT_SPIN_US", LONG, "100", 0, 1000000, NULL, 1,             \
      "util/param.c",                                                       \
      "a wait polls this long, microseconds, before it sleeps (longer "     \
      "or shorter: docs/environment.md)")                                   \
    X(SPIN_ADAPT, "TNT_SPIN_ADAPT", LONG, "1", 0, 1, NULL, 1,               \
      "util/param.c",                                                       \
      "1: where ranks have CPUs of their own, spins that take a CPU "       \
      "other threads want, or do not pay, are cut shorter; 0: they are "    \
      "not, as before 2026-12-07 (for comparisons)")                        \
    X(REPRODUCIBLE, "TNT_REPRODUCIBLE", LONG, "0", 0, 1, NULL, 1,           \
      "util/param.c",                                                       \
      "1: float reductions give the same bits whatever the algorithm, "     \
      "transport, segments, hosts or fusion")                               \
    X(RECOVERY, "TNT_RECOVERY", LONG, "0", 0, 1, NULL, 1,                   \
      "util/param.c",                                                       \
      "1: every rank opens a recovery listener, so that the survivors "     \
      "of a rank's death can tnt_comm_shrink")                              \
    /* the core and the utilities */                                        \
    X(TRANSPORT, "TNT_TRANSPORT", TEXT, "auto", 0, 0,                       \
      "auto, tcp, shm, verbs or a plugin's name", 1, "core/comm_tp.c",      \
      "which transports run")                                               \
    X(TRANSPORT_PLUGIN, "TNT_TRANSPORT_PLUGIN", TEXT, NULL,                 \
      0, 0, "a path", 1, "core/comm_tp.c",                                  \
      "an out-of-tree transport to load")                                   \
    X(REPORT_SIGNAL, "TNT_REPORT_SIGNAL", FLAG, "1", 0, 0,                  \
      "0 or anything else", 0, "core/report.c",                             \
      "0: no hang report on SIGUSR1")                                       \
    X(LOG_LEVEL, "TNT_LOG_LEVEL", CHOICE, "WARNING", 0, 0,                  \
      "ERROR|WARNING|WARN|INFO|DEBUG", 0, "util/log.c",                     \
      "how much to log (any case)")                                         \
    X(LOG_ALL_RANKS, "TNT_LOG_ALL_RANKS", FLAG, "0", 0, 0,                  \
      "0 or anything else", 0, "util/log.c",                                \
      "every rank logs, not only rank 0")                                   \
    X(HOST_ID, "TNT_HOST_ID", TEXT, NULL, 0, 0,                             \
      "printable, no spaces", 1, "util/hostid.c",                           \
      "this rank's host identity (else hostname, boot id, namespaces)")     \
    X(SIMD, "TNT_SIMD", CHOICE, "auto", 0, 0,                               \
      "auto|avx512|avx2|sse2", 0, "collectives/reduce.c",                   \
      "SIMD level of the reduction kernels")                                \
    X(FUSION_THRESHOLD, "TNT_FUSION_THRESHOLD", SIZE, "32k",                \
      0, 0, NULL, 1, "fusion/fusion_setup.c",                               \
      "minimum bucket size of gradient fusion")                             \
    X(TIMELINE, "TNT_TIMELINE", TEXT, NULL, 0, 0,                           \
      "a path: each rank writes PATH.RANK.json", 1, "core/timeline.c",      \
      "write a Chrome trace-event timeline per rank")                       \
    /* the transports */                                                    \
    X(SOCKET_BUFFER, "TNT_SOCKET_BUFFER", SIZE, "0", 0, 0,                  \
      NULL, 1, "transport/tcp",                                             \
      "SO_SNDBUF/SO_RCVBUF of data sockets (0: kernel autotuning)")         \
    X(SOCKETS_PER_PEER, "TNT_SOCKETS_PER_PEER", LONG, "1", 1, 16, NULL, 1,  \
      "transport/tcp", "TCP sockets per pair of ranks")                     \
    X(HEARTBEAT, "TNT_HEARTBEAT", SECONDS, "10", 0, 65535, NULL, 1,         \
      "transport/tcp, transport/verbs",                                     \
      "a peer silent this long is lost, seconds (0: off)")                  \
    X(SHM_ANY_UID, "TNT_SHM_ANY_UID", LONG, "0", 0, 1, NULL, 1,             \
      "transport/shm", "1: admit peers of another user")                    \
    X(IB_HCA, "TNT_IB_HCA", TEXT, NULL, 0, 0,                               \
      "name or name:port list, ^ excludes", 1, "transport/verbs",           \
      "RDMA devices to use, in order (else all)")                           \
    X(IB_HCA_MAP, "TNT_IB_HCA_MAP", CHOICE, "first", 0, 0,                  \
      "first|local_rank", 1, "transport/verbs",                             \
      "which usable port each rank of a host takes")                        \
    X(IB_GID_INDEX, "TNT_IB_GID_INDEX", TEXT, NULL, 0, 0,                   \
      "an index of the port's GID table", 1, "transport/verbs",             \
      "GID table index (else chosen by kind)")                              \
    X(IB_RECV_DEPTH, "TNT_IB_RECV_DEPTH", LONG, "64", 4, 4096, NULL, 1,     \
      "transport/verbs", "receive buffers per peer")                        \
    X(IB_TIMEOUT, "TNT_IB_TIMEOUT", LONG, NULL, 1, 31, NULL, 1,             \
      "transport/verbs",                                                    \
      "local ACK timeout, 4.096 us * 2^n (else from TNT_HEARTBEAT)")        \
    X(IB_RETRY_CNT, "TNT_IB_RETRY_CNT", LONG, NULL, 0, 7, NULL, 1,          \
      "transport/verbs", "retries before failing (else from TNT_HEARTBEAT)") \
    X(IB_REG_CACHE, "TNT_IB_REG_CACHE", CHOICE, "auto", 0, 0,               \
      "auto|0|1", 1, "transport/verbs",                                     \
      "registration cache (auto: on with ODP)")                             \
    X(IB_REG_CACHE_LIMIT, "TNT_IB_REG_CACHE_LIMIT", SIZE, "1G",             \
      0, 0, NULL, 1, "transport/verbs",                                     \
      "bytes of unused registrations kept")                                 \
    X(IB_EAGER_BYTES, "TNT_IB_EAGER_BYTES", SIZE, "8k", 0, 0, NULL, 1,      \
      "transport/verbs",                                                    \
      "messages this large are copied through registered buffers (4k-1M, "  \
      "whole KiB, the same on every rank)")                                 \
    X(GPU_IPC, "TNT_GPU_IPC", LONG, "1", 0, 1, NULL, 1, "core/devmem_ipc.c", \
      "1: allreduce of device buffers on one host reduced on the GPU "      \
      "through CUDA IPC; 0: always staged through host memory")             \
    X(GPU_IPC_MIN_BYTES, "TNT_GPU_IPC_MIN_BYTES", SIZE, "64k", 0, 0, NULL,  \
      1, "core/devmem_ipc.c",                                               \
      "device allreduces this large take the GPU path (same on every rank)")

typedef enum tnt_env_id {
#define TNT_ENV_ID_(id, ...) TNT_VAR_##id,
    TNT_ENV_LIST(TNT_ENV_ID_)
#undef TNT_ENV_ID_
    TNT_VAR_COUNT
} tnt_env_id_t;

typedef struct tnt_env_def {
    const char *name;
    tnt_env_type_t type;
    const char *def;    /* NULL: derived by the reader when unset */
    long min, max;      /* LONG */
    const char *values; /* CHOICE's words; how TEXT is read */
    int strict;
    const char *reader;
    const char *help;
} tnt_env_def_t;

/** The entry of `id`; NULL for an id out of range. */
const tnt_env_def_t *tnt__env_def(tnt_env_id_t id);

/** The entry named `name`, or NULL when it is no variable of the table. */
const tnt_env_def_t *tnt__env_find(const char *name);

/** The value as set; NULL when unset or empty. */
const char *tnt__env(tnt_env_id_t id);

/** The value by name, for code that is handed names: NULL when unset,
 *  empty, or `name` is not in the table. */
const char *tnt__env_named(const char *name);

/** Whether `s` is a valid value of `def` by its type, range and values;
 *  else a TNT_ERR_CONFIG naming the variable. */
tnt_result_t tnt__env_check(const tnt_env_def_t *def, const char *s);

/* Typed reads: the value when set and non-empty, else the default; with
 * neither, *out is left as it is. A malformed value is a TNT_ERR_CONFIG
 * naming the variable. */
tnt_result_t tnt__env_size(tnt_env_id_t id, size_t *out);
tnt_result_t tnt__env_seconds(tnt_env_id_t id, double *out);
tnt_result_t tnt__env_long(tnt_env_id_t id, long *out);

#endif /* TNT_UTIL_PARAM_TABLE_H */
