/*
 * Peer and chunk arithmetic of the algorithms: small pure functions, no
 * I/O, unit-tested for many rank counts and for counts above 2^32.
 */
#ifndef TNT_COLLECTIVES_PATTERNS_H
#define TNT_COLLECTIVES_PATTERNS_H

#include <stddef.h>

/** Chunk c of `count` elements split over p: the first count%p chunks get
 *  one element more. */
void tnt__chunk_range(size_t count, int p, int c, size_t *off, size_t *len);
/** (a mod p) for possibly negative a. */
int tnt__mod(int a, int p);
/** Largest power of two <= p (p >= 1). */
int tnt__pow2_floor(int p);
/** Number of segments of `segelems` needed to cover `len` elements (at
 *  least 1, so that empty chunks still send one empty message). */
size_t tnt__nsegments(size_t len, size_t segelems);
/** Elements per segment for segments of factor x segment_bytes (the
 *  product saturating rather than wrapping), at least 1. */
size_t tnt__segment_elems(size_t segment_bytes, size_t factor, size_t esize);
/** Segment j of a chunk of `len` elements: [*off, *off + *n). */
void tnt__segment(size_t len, size_t segelems, size_t j, size_t *off,
                  size_t *n);

/* Recursive doubling with the pre/post step for non-powers of two
 * (p = p2 + rem): ranks below 2*rem pair up, the even one folds into the
 * odd one and sits out. */
/** The rank's index among the p2 participants, or -1 if it sits out. */
int tnt__rd_newrank(int rank, int p);
/** Real rank of participant `newrank`. */
int tnt__rd_realrank(int newrank, int p);

/* Binomial tree rooted at `root`. */
/** Parent of rank, or -1 for the root. */
int tnt__binomial_parent(int rank, int root, int p);
/** Children of rank in send order (largest subtree first); returns how
 *  many were written (at most `max`). */
int tnt__binomial_children(int rank, int root, int p, int *children,
                           int max);

#endif /* TNT_COLLECTIVES_PATTERNS_H */
