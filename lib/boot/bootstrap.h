/*
 * Rendezvous at rank 0: every rank registers its transport address and
 * host identity; the whole table comes back from rank 0 (a star) or down
 * a binomial tree from rank 0 (TNT_BOOT_TREE_MIN_RANKS; bootstrap.c). Connections between
 * ranks are made later, lazily, by the engine.
 */
#ifndef TNT_BOOT_BOOTSTRAP_H
#define TNT_BOOT_BOOTSTRAP_H

#include <stdint.h>

#include "util/auth.h"
#include "util/clock.h"
#include "util/hostid.h"
#include "tnt/transport.h"

typedef struct tnt_boot_entry {
    int32_t rank;
    uint32_t addr_len;
    unsigned char addr[TNT_TRANSPORT_ADDR_MAX];
    char host[TNT_HOST_MAX];
} tnt_boot_entry_t;

/** Called once the local IP that reaches rank 0 is known: start the
 *  transport's listener there and fill *entry's addr/addr_len. */
typedef tnt_result_t (*tnt_boot_listen_fn)(void *arg, const char *local_ip,
                                           tnt_boot_entry_t *entry);

typedef struct tnt_boot_args {
    const char *root_addr;
    int rank, nranks;
    uint64_t job_id;
    const tnt_auth_key_t *key; /* every connection proves it */
    double timeout_s;
    const char *host;
    tnt_boot_listen_fn listen;
    void *listen_arg;
    /* Tests only (NULL in the library): called with "listening" and the
     * descriptor once this rank's tree listener is open, and with "table" and 1
     * (it came down the tree) or 0 (from rank 0 directly) once this rank
     * has the table, before it passes it on or answers. */
    void (*test_hook)(void *arg, const char *what, int value);
    void *test_arg;
} tnt_boot_args_t;

/** Fill table[0..nranks-1] (indexed by rank). Collective over all ranks. */
tnt_result_t tnt__bootstrap(const tnt_boot_args_t *a,
                            tnt_boot_entry_t *table);

#endif /* TNT_BOOT_BOOTSTRAP_H */
