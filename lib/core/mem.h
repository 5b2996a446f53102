/*
 * Shared allocations (tnt_mem_alloc): memory that the ranks of a
 * one-host communicator map into each other, so that a collective whose
 * buffers lie in it on every rank reads the peers' inputs and writes
 * their results in place (the mapped allreduce, core/onhost/mapped_allreduce.c),
 * instead of copying through the pairs' staging areas.
 *
 * Allocations are collective and numbered in calling order, which is
 * the same on every rank: allocation i of this rank and allocation i of
 * a peer go together, and a collective names the allocation and offset
 * of its buffers by that number. The table is guarded by its own lock,
 * taken inside comm->group->lock, never around it.
 */
#ifndef TNT_CORE_MEM_H
#define TNT_CORE_MEM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct tnt_comm;

typedef struct tnt_mem_region {
    uint32_t id;            /* calling order; the same on every rank */
    int shared;             /* every local peer has it mapped (agreed) */
    unsigned char *base;    /* this rank's memory */
    size_t bytes;           /* as asked; the mapping is page-rounded */
    size_t map_bytes;
    unsigned char **peer_base; /* [rank]: the peer's memory mapped here */
    size_t *peer_bytes;
    void **tp_reg;          /* [transport]: its registration of base, or
                             * NULL (tnt__comm_tp_reg_mem); comm->group->lock */
} tnt_mem_region_t;

typedef struct tnt_mem_table {
    pthread_mutex_t lock;
    tnt_mem_region_t **regions;
    int n, cap;
    uint32_t next_id;
} tnt_mem_table_t;

void tnt__mem_table_init(tnt_mem_table_t *t);
/** Unmap every allocation, this rank's and the peers' (tnt_comm_free). */
void tnt__mem_table_destroy(tnt_mem_table_t *t, int nranks);
/** End the transports' registrations of every allocation still live:
 *  before the transports are finalized (tnt_comm_free). */
void tnt__mem_table_dereg(struct tnt_comm *comm);

/** The bytes an allocation of `bytes` maps: whole pages, one at least. */
size_t tnt__mem_map_len(size_t bytes);
/** Unmap r, this rank's and the peers' mappings, and free it. */
void tnt__mem_region_free(tnt_mem_region_t *r, int nranks);
/** End the transports' registration of r (before it is unmapped);
 *  takes comm->group->lock. */
void tnt__mem_region_dereg(struct tnt_comm *comm, tnt_mem_region_t *r);

/** A buffer in a shared allocation: which one, and where in it. */
typedef struct tnt_mem_ref {
    uint32_t id;
    uint64_t off;
} tnt_mem_ref_t;

/** Has this rank any allocation? A lock-free look, so that a
 *  collective of a program that never calls tnt_mem_alloc takes no lock
 *  for it (tnt__mem_find takes the table's). */
static inline int tnt__mem_any(const tnt_mem_table_t *t)
{
    return __atomic_load_n(&t->n, __ATOMIC_RELAXED) > 0;
}

/** Does [p, p + bytes) lie in a shared allocation of this rank? Fills
 *  *ref if so. */
int tnt__mem_find(struct tnt_comm *comm, const void *p, size_t bytes,
                  tnt_mem_ref_t *ref);
/** Peer q's memory at ref, `bytes` long, as mapped here; NULL if this
 *  rank has no such allocation of q mapped or it is shorter (q named
 *  memory it did not allocate with this rank, or freed here). */
unsigned char *tnt__mem_peer(struct tnt_comm *comm, int q,
                             const tnt_mem_ref_t *ref, size_t bytes);

#endif /* TNT_CORE_MEM_H */
