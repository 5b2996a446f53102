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

/* Double binary tree (NCCL's): two in-order binary trees over the ranks'
 * positions 0..p-1, position 0 at the root. Tree 0 places rank r at
 * position r; tree 1 mirrors it (position p-1-r) for even p and shifts
 * it (position r-1 mod p) for odd p. Interior positions are the even
 * ones, so a rank that is interior in one tree is a leaf in the other
 * (except rank 0 for odd p: root of tree 0 and interior in tree 1). */
/** Position of `rank` in tree t (0 or 1). */
int tnt__dbtree_pos(int t, int rank, int p);
/** Rank at position `pos` of tree t. */
int tnt__dbtree_rank(int t, int pos, int p);
/** In-order binary tree on positions 0..p-1: the parent of `pos` (-1 for
 *  the root, 0), its child below it and its child above it (-1: none).
 *  Every subtree holds a contiguous range of positions. Depth at most
 *  ceil(log2 p) + 1. */
void tnt__btree(int pos, int p, int *parent, int *lower, int *upper);

#endif /* TNT_COLLECTIVES_PATTERNS_H */
