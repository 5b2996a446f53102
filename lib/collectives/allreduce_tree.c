/*
 * Double binary tree allreduce (NCCL's): the buffer is cut in two halves
 * (tnt__chunk_range of 2), half t reduced up and broadcast down tree t of
 * patterns.h's double binary tree. A rank interior in one tree is a leaf
 * in the other, so every rank forwards about one buffer's worth in each
 * direction and the two trees share the links. Each half is cut into
 * segments that flow independently: a node reduces segment j as soon as
 * its children's segment j has arrived and sends it on to its parent,
 * the root broadcasts it down at once, so the segments pipeline through
 * the tree's 2 depth hops: about 2 log2(p) latencies plus the buffer's
 * bytes once on each link, against recursive doubling's log2(p) whole
 * buffers and the ring's 2(p-1) latencies.
 *
 * Segments: TREE_TARGET_SEGS to a half, at most a->segment_bytes, and
 * never under TNT_TREE_MIN_SEG_BYTES, a floor that wins over a smaller
 * a->segment_bytes (only the last segment of a half may be smaller):
 * a user's TNT_SEGMENT_BYTES=64, meant for the chain or the ring, made
 * the tree pay a message per 64 bytes (issue 34). A pipeline of few
 * large segments fills slowly (each hop waits for a whole segment), one
 * of many small ones pays a message's overhead per segment (in the cost model,
 * 512 ranks one a host on HDR, 16 segments of at least 8 KiB were
 * 1.3-1.6x slower than 64 of at least 4 KiB from 512 KiB to 8 MiB: the
 * fill of 2 depth hops of a segment each). A child's segments
 * arrive into TREE_WINDOW slots of scratch; a slot is received into
 * again once the reduction that read it has run.
 *
 * Determinism: every element of half t is reduced over the ranks in the
 * order of their positions in tree t, bracketed by the tree: a node
 * computes ((lower child's subtree) op own) op (upper child's subtree),
 * the lower subtree holding the lower positions (patterns.h), i.e.
 * ascending positions, fixed by (p, t) alone and never by timing. Only
 * the root of tree t computes the final value of half t (and scales it
 * once for AVG); every other rank receives those bits, so all ranks
 * hold bitwise identical results. Tree 0's positions are the ranks, tree
 * 1's the ranks mirrored (even p) or shifted by one (odd p), so the two
 * halves are summed in different orders, and the results differ in the
 * last bits of floating point from the other allreduces'.
 *
 * Aliasing: in place the send and receive buffers are one; a segment's
 * result overwrites this rank's input only in the reductions that read
 * it, and the result from the parent lands only after the send of the
 * partial to the parent.
 */
#include "collectives/algorithms.h"
#include "collectives/patterns.h"

/* Tags: tree t's segment j is step t * TREE_MAX_SEGMENTS + j, below
 * allreduce_hier.c's stride between slices (2^21). */
#define TREE_MAX_SEGMENTS ((size_t)1 << 16)
#define TREE_TARGET_SEGS 64
#define TREE_WINDOW 16

/* Elements per segment, the same for both halves and every rank. */
static size_t tree_segelems(const tnt_coll_args_t *a)
{
    size_t off, len;
    tnt__chunk_range(a->count, 2, 0, &off, &len); /* the larger half */
    size_t want = len * a->esize / TREE_TARGET_SEGS;
    if (want > a->segment_bytes)
        want = a->segment_bytes;
    if (want < TNT_TREE_MIN_SEG_BYTES)
        want = TNT_TREE_MIN_SEG_BYTES;
    size_t seg = want / a->esize ? want / a->esize : 1;
    /* Bound the schedule's size (and the tags) for enormous buffers. */
    if (tnt__nsegments(len, seg) > TREE_MAX_SEGMENTS)
        seg = len / TREE_MAX_SEGMENTS + 1;
    return seg;
}

/* Half t: reduce up tree t, then the root's result down it. */
static void tree_half(const tnt_coll_args_t *a, tnt_sched_t *s, int t,
                      size_t segelems)
{
    int p = a->nranks, pos = tnt__dbtree_pos(t, a->rank, p);
    int par, kid[2], child[2], parent;
    tnt__btree(pos, p, &par, &kid[0], &kid[1]);
    parent = par < 0 ? -1 : tnt__dbtree_rank(t, par, p);
    for (int c = 0; c < 2; c++)
        child[c] = kid[c] < 0 ? -1 : tnt__dbtree_rank(t, kid[c], p);
    size_t off, len, es = a->esize;
    tnt__chunk_range(a->count, 2, t, &off, &len);
    size_t nseg = tnt__nsegments(len, segelems);
    size_t window = nseg < TREE_WINDOW ? nseg : TREE_WINDOW;
    size_t slotbytes = (len < segelems ? len : segelems) * es;
    size_t slots[2] = {0, 0};
    uint32_t slot_last[2][TREE_WINDOW];
    for (int c = 0; c < 2; c++) {
        if (child[c] >= 0)
            slots[c] = tnt__sched_scratch(s, window * slotbytes);
        for (size_t w = 0; w < TREE_WINDOW; w++)
            slot_last[c][w] = TNT_SOP_NONE;
    }

    for (size_t j = 0; j < nseg; j++) {
        size_t soff, n;
        tnt__segment(len, segelems, j, &soff, &n);
        size_t bo = (off + soff) * es, bytes = n * es;
        uint32_t step = (uint32_t)((size_t)t * TREE_MAX_SEGMENTS + j);
        tnt_bufref_t cur = tnt__ref(TNT_BUF_SEND, bo);
        tnt_bufref_t res = tnt__ref(TNT_BUF_RECV, bo);
        uint32_t last = TNT_SOP_NONE;

        /* Up: lower subtree, own input, upper subtree, in that order. */
        for (int c = 0; c < 2; c++) {
            if (child[c] < 0)
                continue;
            size_t w = j % window;
            tnt_bufref_t slot = tnt__ref(TNT_BUF_SCRATCH,
                                         slots[c] + w * slotbytes);
            uint32_t rcv = tnt__sched_recv(s, child[c], step, slot, bytes);
            tnt__sched_dep(s, slot_last[c][w], rcv);
            uint32_t red = c == 0 ? tnt__sched_reduce(s, res, slot, cur,
                                                      bytes)
                                  : tnt__sched_reduce(s, res, cur, slot,
                                                      bytes);
            tnt__sched_dep(s, rcv, red);
            tnt__sched_dep(s, last, red);
            slot_last[c][w] = red;
            last = red;
            cur = res;
        }

        if (parent < 0) {
            /* The root: the segment is final here. */
            if (cur.buf == TNT_BUF_SEND && !a->in_place)
                last = tnt__sched_copy(s, res, cur, bytes); /* p == 1 */
            if (a->op == TNT_AVG) {
                uint32_t sca = tnt__sched_scale(s, res, bytes);
                tnt__sched_dep(s, last, sca);
                last = sca;
            }
        } else {
            uint32_t snd = tnt__sched_send(s, parent, step, cur, bytes);
            tnt__sched_dep(s, last, snd);
            last = tnt__sched_recv(s, parent, step, res, bytes);
            tnt__sched_dep(s, snd, last);
        }

        /* Down: the final segment to the children. */
        for (int c = 0; c < 2; c++)
            if (child[c] >= 0) {
                uint32_t snd = tnt__sched_send(s, child[c], step, res,
                                               bytes);
                tnt__sched_dep(s, last, snd);
            }
    }
}

tnt_result_t tnt__allreduce_tree(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    size_t segelems = tree_segelems(a);
    for (int t = 0; t < 2; t++)
        tree_half(a, s, t, segelems);
    return TNT_SUCCESS;
}
