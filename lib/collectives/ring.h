/*
 * The two phases of ring algorithms, shared by ring allreduce (both
 * phases), reduce-scatter (first phase) and allgather (second phase).
 * Chunks are split into segments so that the reduction of one segment
 * overlaps the transfer of the next; dependencies are tracked per
 * (chunk, segment) so that the phases pipeline into each other as well.
 */
#ifndef TNT_COLLECTIVES_RING_H
#define TNT_COLLECTIVES_RING_H

#include "collectives/algorithms.h"
#include "util/error.h"

typedef struct tnt_ring {
    int rank, p;
    size_t esize;
    size_t count;      /* elements, split evenly over p (block == 0) */
    size_t block;      /* if nonzero, chunk c is [c*block, (c+1)*block) */
    const size_t *chunk_off; /* if set, chunk c is [off[c], off[c+1]) */
    const int *peers;  /* if set, ring position -> communicator rank */
    size_t segelems;   /* pipelining granule in elements */
    size_t nseg;       /* segments per chunk (same for every chunk) */
    tnt_bufref_t src;  /* reduce-scatter: this rank's contributions */
    tnt_bufref_t acc;  /* partial/final results, indexed like src */
    int final_dst_set; /* reduce-scatter: owned chunk goes to final_dst */
    tnt_bufref_t final_dst;
    int owned;         /* chunk owned at the end of RS / start of AG */
    int scale;         /* AVG: scale the owned chunk after the RS phase */
    uint32_t step_base;
    /* Per (chunk, segment), index chunk * nseg + seg: the last operation
     * that wrote, and the last that read, that piece of acc. */
    uint32_t *last_write;
    uint32_t *last_read;
} tnt_ring_t;

/** Fill the geometry and allocate the tracking arrays. */
tnt_result_t tnt__ring_init(tnt_ring_t *r, const tnt_coll_args_t *a,
                            size_t count, size_t block);
/** A ring over some of the communicator's ranks: `a` gives the ring
 *  position (rank) and size (nranks), peers[] the communicator rank at
 *  each position, off[] (nranks + 1 entries) the chunk bounds. Both
 *  arrays must outlive the ring. */
tnt_result_t tnt__ring_init_mapped(tnt_ring_t *r, const tnt_coll_args_t *a,
                                   const size_t *off, const int *peers);
void tnt__ring_fini(tnt_ring_t *r);
void tnt__ring_chunk(const tnt_ring_t *r, int c, size_t *off, size_t *len);

/** Reduce-scatter: afterwards chunk `owned` holds the full reduction. */
void tnt__ring_rs_phase(tnt_sched_t *s, tnt_ring_t *r, tnt_op_t op);
/** Allgather: chunk `owned` (complete) is passed around the ring. */
void tnt__ring_ag_phase(tnt_sched_t *s, tnt_ring_t *r);

#endif /* TNT_COLLECTIVES_RING_H */
