/*
 * Peer and chunk arithmetic shared by the algorithms. Pure functions with
 * size_t counts throughout, so that counts above 2^32 are handled and can
 * be tested without allocating anything.
 */
#include <stdint.h>

#include "collectives/patterns.h"

void tnt__chunk_range(size_t count, int p, int c, size_t *off, size_t *len)
{
    size_t base = count / (size_t)p;
    size_t extra = count % (size_t)p;
    size_t uc = (size_t)c;
    *off = uc * base + (uc < extra ? uc : extra);
    *len = base + (uc < extra ? 1 : 0);
}

int tnt__mod(int a, int p)
{
    int m = a % p;
    return m < 0 ? m + p : m;
}

int tnt__pow2_floor(int p)
{
    int v = 1;
    while (v <= p / 2)
        v *= 2;
    return v;
}

size_t tnt__nsegments(size_t len, size_t segelems)
{
    if (len == 0)
        return 1;
    return len / segelems + (len % segelems != 0);
}

size_t tnt__segment_elems(size_t segment_bytes, size_t factor, size_t esize)
{
    size_t seg = factor && segment_bytes > SIZE_MAX / factor
                     ? SIZE_MAX
                     : segment_bytes * factor;
    return seg / esize ? seg / esize : 1;
}

void tnt__segment(size_t len, size_t segelems, size_t j, size_t *off,
                  size_t *n)
{
    size_t o = j * segelems;
    if (o >= len) {
        *off = len;
        *n = 0;
        return;
    }
    *off = o;
    *n = len - o < segelems ? len - o : segelems;
}

int tnt__rd_newrank(int rank, int p)
{
    int rem = p - tnt__pow2_floor(p);
    if (rank < 2 * rem)
        return (rank % 2) ? rank / 2 : -1;
    return rank - rem;
}

int tnt__rd_realrank(int newrank, int p)
{
    int rem = p - tnt__pow2_floor(p);
    return newrank < rem ? newrank * 2 + 1 : newrank + rem;
}

int tnt__binomial_parent(int rank, int root, int p)
{
    int vr = tnt__mod(rank - root, p);
    if (vr == 0)
        return -1;
    int low = vr & -vr;
    return tnt__mod(vr - low + root, p);
}

int tnt__binomial_children(int rank, int root, int p, int *children, int max)
{
    int vr = tnt__mod(rank - root, p);
    /* The children of vr are vr + m for every power of two m below vr's
     * lowest set bit (below p's highest bit for the root). Larger m first:
     * the biggest subtree should start earliest. */
    int limit = vr ? (vr & -vr) : tnt__pow2_floor(p) * 2;
    int n = 0;
    for (int m = limit / 2; m >= 1; m /= 2) {
        if (vr + m < p && n < max)
            children[n++] = tnt__mod(vr + m + root, p);
    }
    return n;
}

int tnt__dbtree_pos(int t, int rank, int p)
{
    if (t == 0)
        return rank;
    return p % 2 ? tnt__mod(rank - 1, p) : p - 1 - rank;
}

int tnt__dbtree_rank(int t, int pos, int p)
{
    if (t == 0)
        return pos;
    return p % 2 ? (pos + 1) % p : p - 1 - pos;
}

void tnt__btree(int pos, int p, int *parent, int *lower, int *upper)
{
    /* `bit`: pos's lowest set bit; for the root, the first power of two
     * >= p, whose half is the root's only child. A node at bit b has its
     * children at pos -+ b/2 and its parent at pos -+ b, where the upper
     * ones are pulled in (b/4, b/8, ...) when past the end. */
    int bit = 1;
    while (bit < p && !(pos & bit))
        bit <<= 1;
    *lower = -1;
    if (pos == 0) {
        *parent = -1;
        *upper = p > 1 ? bit >> 1 : -1;
        return;
    }
    int up = (pos ^ bit) | (bit << 1);
    *parent = up < p ? up : pos ^ bit;
    int low = bit >> 1;
    *lower = low ? pos - low : -1;
    while (low && pos + low >= p)
        low >>= 1;
    *upper = low ? pos + low : -1;
}
