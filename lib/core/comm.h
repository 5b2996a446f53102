/*
 * The creation of a communicator from a rendezvous of any kind (the
 * TCP one at rank 0, PMIx, or a parent communicator's collectives:
 * comm_split.c).
 */
#ifndef TNT_CORE_COMM_H
#define TNT_CORE_COMM_H

#include "boot/bootstrap.h"
#include "core/comm_live.h"
#include "core/comm_name.h"
#include "core/engine.h"


/** Where a new communicator's table of peers comes from: boot(ctx, ...)
 *  fills it as tnt__bootstrap does (calling args->listen for this rank's
 *  entry first). parent: the communicator it is derived from (its job id
 *  and key are taken), or NULL for tnt_comm_init. comm_id: the context
 *  id every message and connection of the new one carries. lineage:
 *  how a derived one was made, for its name (core/comm_name.h). */
typedef struct tnt_comm_origin {
    tnt_result_t (*boot)(void *ctx, const tnt_boot_args_t *args,
                         tnt_boot_entry_t *table);
    void *ctx;
    const struct tnt_comm *parent;
    uint32_t comm_id;
    const tnt_comm_lineage_t *lineage;
    /* 1: join the parent's net group (comm_split.c decides, alike on
     * every rank): no boot, no transports, listeners or progress thread
     * of its own; its peers are the parent's ranks lineage->parent_of
     * over the group's connections. */
    int join;
} tnt_comm_origin_t;

/** Create a communicator of config->rank/nranks (timeout_s and
 *  reproducible as tnt_comm_init takes them) from `origin`. */
tnt_result_t tnt__comm_create(const tnt_config_t *config,
                              const tnt_comm_origin_t *origin,
                              tnt_comm_t *out);

#endif /* TNT_CORE_COMM_H */
