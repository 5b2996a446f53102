/*
 * boot-storm (docs/scale.md, "Rank 0's registrations, measured"): rank 0
 * runs the library's bootstrap in boot_storm.c; ranks 1..P-1 are one
 * process, boot_storm_ranks.c.
 */
#ifndef TNT_BENCH_BOOT_STORM_H
#define TNT_BENCH_BOOT_STORM_H

#include <stdint.h>

#include "boot/bootstrap.h"
#include "util/auth.h"

typedef struct storm_cfg {
    int nranks;
    int tree;        /* the ranks open tree listeners (rank 0 takes the
                      * tree when its TNT_BOOT_TREE_MIN_RANKS says so) */
    int window;      /* ranks between connect and registration at once */
    int verify_all;  /* every star copy of the table checked, else one */
    int port;        /* rank 0's bootstrap port on 127.0.0.1 */
    uint64_t job_id;
    const tnt_auth_key_t *key;
    double timeout_s;
} storm_cfg_t;

/* Rank r's entry: an 8-byte address and a 16-character host name (a TCP
 * rank over IPv4, as the model in docs/scale.md assumes), both from r. */
void storm_ref(int rank, tnt_boot_entry_t *e);

/* 1 if e is rank r's entry (storm_ref) in every field the table carries. */
int storm_entry_ok(int rank, const tnt_boot_entry_t *e);

/* Ranks 1..P-1: wait for a byte on go_fd, then register them all with
 * rank 0 and check what comes back. 0 if every rank got its verdict and
 * the right table, else 1 (why on stderr). */
int storm_ranks(const storm_cfg_t *c, int go_fd);

#endif /* TNT_BENCH_BOOT_STORM_H */
