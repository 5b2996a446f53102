/*
 * What a communicator is called in the stats, the timeline and the hang
 * report: the first one (tnt_comm_init's) "world"; a derived one its
 * parent's name, a slash and its number among the parent's derivations
 * ("world/2"), with how it was made ("split of world, color 1", "dup of
 * world", "shrink of world"). Every member computes the same name
 * without a message: the parent's derivations are counted alike on
 * every rank (comm_split.c). A rank is named with its world rank too:
 * "comm world/2 (split of world, color 1) rank 0 = world rank 3".
 */
#ifndef TNT_CORE_COMM_NAME_H
#define TNT_CORE_COMM_NAME_H

#include <stddef.h>
#include <stdint.h>

struct tnt_comm;

/** How a derived communicator came to be (tnt_comm_origin_t.lineage). */
typedef struct tnt_comm_lineage {
    const char *how;     /* "split", "dup", "shrink" */
    int color;           /* split only */
    uint32_t nth;        /* its number among the parent's derivations */
    /* new rank -> the parent's rank, filled by the origin's boot (NULL:
     * not known; the peers' world ranks are then not named) */
    const int *parent_of;
} tnt_comm_lineage_t;

/** Name `comm` and fill its world rank from `parent` (NULL: the first
 *  communicator) before its boot. */
void tnt__comm_name_init(struct tnt_comm *comm, const struct tnt_comm *parent,
                         const tnt_comm_lineage_t *lineage);
/** After the boot: every rank's world rank, from lineage->parent_of.
 *  Returns 0, or -1 out of memory (then none is known). */
int tnt__comm_name_ranks(struct tnt_comm *comm, const struct tnt_comm *parent,
                         const tnt_comm_lineage_t *lineage);
/** The world rank of `rank` of `comm` (-1: not known). */
int tnt__comm_world_rank(const struct tnt_comm *comm, int rank);
/** "comm world/2 (split of world, color 1) rank 0 = world rank 3" for a
 *  derived communicator, "rank 3" for the first. */
void tnt__comm_who(const struct tnt_comm *comm, char *buf, size_t len);
void tnt__comm_name_fini(struct tnt_comm *comm);

#endif /* TNT_CORE_COMM_NAME_H */
