/*
 * Peer and chunk arithmetic of the algorithms, without a network: chunk
 * and segment ranges (also for counts above 2^32, nothing allocated),
 * recursive-doubling rank maps and binomial trees for p = 1..64, double
 * binary trees to 4,100 ranks.
 */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdlib.h>

#include "collectives/patterns.h"

static void test_chunks_cover_everything(void)
{
    const size_t counts[] = {0, 1, 2, 3, 7, 100, 1000, 65537,
                             ((size_t)1 << 32) + 3, ((size_t)1 << 40) + 17,
                             SIZE_MAX / 8};
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (int p = 1; p <= 17; p++) {
            size_t expect_off = 0, minlen = SIZE_MAX, maxlen = 0;
            for (int c = 0; c < p; c++) {
                size_t off, len;
                tnt__chunk_range(counts[ci], p, c, &off, &len);
                CU_ASSERT_EQUAL(off, expect_off);
                expect_off = off + len;
                if (len < minlen)
                    minlen = len;
                if (len > maxlen)
                    maxlen = len;
            }
            CU_ASSERT_EQUAL(expect_off, counts[ci]);
            CU_ASSERT(maxlen - minlen <= 1);
        }
}

static void test_segments(void)
{
    const size_t lens[] = {0, 1, 5, 64, 65, ((size_t)1 << 33) + 1};
    const size_t segs[] = {1, 3, 64, (size_t)1 << 20};
    for (size_t li = 0; li < 6; li++)
        for (size_t si = 0; si < 4; si++) {
            size_t n = tnt__nsegments(lens[li], segs[si]);
            CU_ASSERT(n >= 1);
            size_t next = 0;
            for (size_t j = 0; j < n && n < 100000; j++) {
                size_t off, cnt;
                tnt__segment(lens[li], segs[si], j, &off, &cnt);
                CU_ASSERT_EQUAL(off, next);
                CU_ASSERT(cnt <= segs[si]);
                CU_ASSERT(cnt > 0 || lens[li] == 0);
                next = off + cnt;
            }
            if (n < 100000)
                CU_ASSERT_EQUAL(next, lens[li]);
        }
    /* Past the end: empty, never out of range. */
    size_t off, cnt;
    tnt__segment(10, 4, 7, &off, &cnt);
    CU_ASSERT_EQUAL(cnt, 0);
    CU_ASSERT_EQUAL(off, 10);
    /* Segment sizes: factor x bytes in elements, at least one, and a
     * product past SIZE_MAX saturates instead of wrapping to a tiny
     * segment. */
    CU_ASSERT_EQUAL(tnt__segment_elems(256 << 10, 4, 4), (size_t)1 << 18);
    CU_ASSERT_EQUAL(tnt__segment_elems(64, 4, 8), 32);
    CU_ASSERT_EQUAL(tnt__segment_elems(1, 1, 8), 1);
    CU_ASSERT_EQUAL(tnt__segment_elems(SIZE_MAX / 2, 4, 8), SIZE_MAX / 8);
}

static void test_rd_maps(void)
{
    for (int p = 1; p <= 64; p++) {
        int p2 = tnt__pow2_floor(p);
        CU_ASSERT(p2 <= p && p2 * 2 > p && (p2 & (p2 - 1)) == 0);
        int participants = 0;
        for (int r = 0; r < p; r++) {
            int nr = tnt__rd_newrank(r, p);
            if (nr < 0)
                continue;
            participants++;
            CU_ASSERT(nr < p2);
            CU_ASSERT_EQUAL(tnt__rd_realrank(nr, p), r);
        }
        CU_ASSERT_EQUAL(participants, p2);
    }
}

static void test_binomial_tree(void)
{
    int children[64];
    for (int p = 1; p <= 64; p++)
        for (int root = 0; root < p; root += (p > 8 ? 7 : 1)) {
            int *seen = calloc((size_t)p, sizeof(int));
            CU_ASSERT_EQUAL(tnt__binomial_parent(root, root, p), -1);
            for (int r = 0; r < p; r++) {
                int n = tnt__binomial_children(r, root, p, children, 64);
                for (int i = 0; i < n; i++) {
                    CU_ASSERT(children[i] >= 0 && children[i] < p);
                    CU_ASSERT_EQUAL(tnt__binomial_parent(children[i], root,
                                                         p), r);
                    seen[children[i]]++;
                }
            }
            /* Every rank but the root has exactly one parent. */
            for (int r = 0; r < p; r++)
                CU_ASSERT_EQUAL(seen[r], r == root ? 0 : 1);
            free(seen);
        }
}

/* The double binary tree at p = 1..4100 (all to 300, then a sample):
 * parent and children agree, every position hangs from the root by a
 * path of at most ceil(log2 p) + 1 edges, each subtree holds a
 * contiguous range of positions with the node between its children, the
 * two trees' maps are inverse permutations, and no rank is interior in
 * both trees but rank 0 at odd p. */
static int subtree_ok(int pos, int p, int lo, int hi, int depth, int maxd,
                      int *seen)
{
    int par, lw, up;
    if (pos < lo || pos > hi || depth > maxd || seen[pos]++)
        return 0;
    tnt__btree(pos, p, &par, &lw, &up);
    int ok = 1;
    if (lw >= 0) {
        int cp, a, b;
        tnt__btree(lw, p, &cp, &a, &b);
        ok = ok && cp == pos && lw < pos &&
             subtree_ok(lw, p, lo, pos - 1, depth + 1, maxd, seen);
    }
    if (up >= 0) {
        int cp, a, b;
        tnt__btree(up, p, &cp, &a, &b);
        ok = ok && cp == pos && up > pos &&
             subtree_ok(up, p, pos + 1, hi, depth + 1, maxd, seen);
    }
    return ok;
}

static void test_dbtree(void)
{
    for (int p = 1; p <= 4100; p += p < 300 ? 1 : 97) {
        int *seen = calloc((size_t)p, sizeof(int));
        int maxd = 1, par, lw, up;
        while ((1 << (maxd - 1)) < p)
            maxd++;
        tnt__btree(0, p, &par, &lw, &up);
        CU_ASSERT_EQUAL(par, -1);
        CU_ASSERT_EQUAL(lw, -1);
        CU_ASSERT(subtree_ok(0, p, 0, p - 1, 0, maxd, seen));
        for (int v = 0; v < p; v++)
            CU_ASSERT_EQUAL(seen[v], 1);
        for (int r = 0; r < p; r++) {
            int interior = 0;
            for (int t = 0; t < 2; t++) {
                int v = tnt__dbtree_pos(t, r, p);
                CU_ASSERT(v >= 0 && v < p);
                CU_ASSERT_EQUAL(tnt__dbtree_rank(t, v, p), r);
                tnt__btree(v, p, &par, &lw, &up);
                interior += lw >= 0 || up >= 0;
            }
            CU_ASSERT(interior <= 1 || (r == 0 && p % 2));
        }
        free(seen);
    }
}

static void test_mod(void)
{
    CU_ASSERT_EQUAL(tnt__mod(-1, 5), 4);
    CU_ASSERT_EQUAL(tnt__mod(-10, 5), 0);
    CU_ASSERT_EQUAL(tnt__mod(7, 5), 2);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("patterns", NULL, NULL);
    CU_add_test(s, "chunks cover every element once", test_chunks_cover_everything);
    CU_add_test(s, "segments", test_segments);
    CU_add_test(s, "recursive doubling maps", test_rd_maps);
    CU_add_test(s, "binomial trees", test_binomial_tree);
    CU_add_test(s, "double binary trees", test_dbtree);
    CU_add_test(s, "mod", test_mod);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failures = (int)CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
