/*
 * Ring phases. Step k of the reduce-scatter sends chunk owned-1-k to the
 * right neighbour and receives chunk owned-2-k from the left one, which it
 * reduces with its own contribution; after p-1 steps chunk `owned` is
 * complete here. The allgather passes complete chunks on for p-1 steps.
 * Each chunk's result is computed on exactly one rank and then copied, so
 * every rank ends with bitwise-identical data.
 */
#include <stdlib.h>

#include "collectives/patterns.h"
#include "collectives/ring.h"
#include "util/error.h"

/* Receive slots in scratch: a window of segments may be in flight before
 * the reduction frees a slot, so receives are posted ahead of the data.
 * A message that arrives before its slot is free must be buffered and
 * copied, so the window is as wide as RING_WINDOW_BYTES allows. */
#define RING_WINDOW 64
#define RING_WINDOW_MIN 8
#define RING_WINDOW_BYTES ((size_t)16 << 20)
#define RING_MAX_SEGMENTS ((size_t)1 << 18)
/* Ring segments are RING_SEG_FACTOR x TNT_SEGMENT_BYTES (1 MiB by
 * default). Over loopback TCP every message costs a header, a match, a
 * wake-up of the peer and the kernel's per-call work, so 256 KiB
 * segments lost to 1 MiB ones at every size where the ring runs
 * (docs/performance.md, "Ring segments"). The broadcast chain keeps
 * TNT_SEGMENT_BYTES: its pipeline fills one segment per hop. The factor
 * keeps TNT_SEGMENT_BYTES a knob that tests can shrink. */
#define RING_SEG_FACTOR 4

static tnt_result_t ring_setup(tnt_ring_t *r, const tnt_coll_args_t *a,
                               size_t count, size_t block, size_t maxlen)
{
    r->rank = a->rank;
    r->p = a->nranks;
    r->esize = a->esize;
    r->count = count;
    r->block = block;
    r->segelems = tnt__segment_elems(a->segment_bytes, RING_SEG_FACTOR,
                                     a->esize);
    /* Bound the schedule's size: past RING_MAX_SEGMENTS per rank the
     * segments grow instead (a schedule op costs ~64 bytes). */
    size_t maxseg = RING_MAX_SEGMENTS / (size_t)r->p;
    if (maxseg == 0)
        maxseg = 1;
    if (tnt__nsegments(maxlen, r->segelems) > maxseg)
        r->segelems = maxlen / maxseg + 1;
    r->nseg = tnt__nsegments(maxlen, r->segelems);
    r->final_dst_set = 0;
    r->scale = 0;
    r->step_base = 0;
    size_t n = (size_t)r->p * r->nseg;
    r->last_write = malloc(n * sizeof(uint32_t));
    r->last_read = malloc(n * sizeof(uint32_t));
    if (!r->last_write || !r->last_read) {
        tnt__ring_fini(r);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a ring "
                          "schedule of %zu segments", n);
    }
    for (size_t i = 0; i < n; i++)
        r->last_write[i] = r->last_read[i] = TNT_SOP_NONE;
    return TNT_SUCCESS;
}

tnt_result_t tnt__ring_init(tnt_ring_t *r, const tnt_coll_args_t *a,
                            size_t count, size_t block)
{
    r->chunk_off = NULL;
    r->peers = NULL;
    /* The longest chunk (tnt__chunk_range): count / p, one more where p
     * does not divide count, and not one more than that, or a chunk that
     * fills its segments exactly would send an empty last segment. */
    size_t p = (size_t)a->nranks;
    return ring_setup(r, a, count, block,
                      block ? block : count / p + (count % p != 0));
}

tnt_result_t tnt__ring_init_mapped(tnt_ring_t *r, const tnt_coll_args_t *a,
                                   const size_t *off, const int *peers)
{
    size_t maxlen = 0;
    for (int c = 0; c < a->nranks; c++)
        if (off[c + 1] - off[c] > maxlen)
            maxlen = off[c + 1] - off[c];
    r->chunk_off = off;
    r->peers = peers;
    return ring_setup(r, a, off[a->nranks], 0, maxlen);
}

void tnt__ring_fini(tnt_ring_t *r)
{
    free(r->last_write);
    free(r->last_read);
    r->last_write = r->last_read = NULL;
}

void tnt__ring_chunk(const tnt_ring_t *r, int c, size_t *off, size_t *len)
{
    if (r->chunk_off) {
        *off = r->chunk_off[c];
        *len = r->chunk_off[c + 1] - r->chunk_off[c];
    } else if (r->block) {
        *off = (size_t)c * r->block;
        *len = r->block;
    } else {
        tnt__chunk_range(r->count, r->p, c, off, len);
    }
}

/* The communicator rank at ring position pos. */
static int ring_peer(const tnt_ring_t *r, int pos)
{
    pos = tnt__mod(pos, r->p);
    return r->peers ? r->peers[pos] : pos;
}

/* Byte reference and length of segment j of chunk c in buffer `base`. */
static tnt_bufref_t seg_ref(const tnt_ring_t *r, tnt_bufref_t base, int c,
                            size_t j, size_t *bytes)
{
    size_t off, len, soff, n;
    tnt__ring_chunk(r, c, &off, &len);
    tnt__segment(len, r->segelems, j, &soff, &n);
    *bytes = n * r->esize;
    return tnt__ref(base.buf, base.off + (off + soff) * r->esize);
}

void tnt__ring_rs_phase(tnt_sched_t *s, tnt_ring_t *r, tnt_op_t op)
{
    (void)op; /* the engine picks the kernel; kept for readability */
    int p = r->p, right = ring_peer(r, r->rank + 1);
    int left = ring_peer(r, r->rank - 1);
    size_t maxseg = r->segelems * r->esize;
    size_t total = (size_t)(p - 1) * r->nseg;
    size_t window = RING_WINDOW_BYTES / (maxseg ? maxseg : 1);
    window = window < RING_WINDOW_MIN ? RING_WINDOW_MIN
             : window > RING_WINDOW  ? RING_WINDOW
                                     : window;
    if (total < window)
        window = total;
    size_t tmp = tnt__sched_scratch(s, window * maxseg);
    uint32_t slot_last[RING_WINDOW];
    for (size_t i = 0; i < RING_WINDOW; i++)
        slot_last[i] = TNT_SOP_NONE;

    for (int k = 0; k < p - 1; k++) {
        int sc = tnt__mod(r->owned - 1 - k, p);
        int rc = tnt__mod(r->owned - 2 - k, p);
        for (size_t j = 0; j < r->nseg; j++) {
            size_t i = (size_t)k * r->nseg + j, bytes;
            uint32_t step = r->step_base + (uint32_t)i;
            size_t sidx = (size_t)sc * r->nseg + j;
            size_t ridx = (size_t)rc * r->nseg + j;

            /* Step 0 sends the rank's own data; later steps forward the
             * partial result reduced in the previous step. */
            tnt_bufref_t from = seg_ref(r, k == 0 ? r->src : r->acc, sc, j,
                                        &bytes);
            uint32_t snd = tnt__sched_send(s, right, step, from, bytes);
            if (k > 0) {
                tnt__sched_dep(s, r->last_write[sidx], snd);
                r->last_read[sidx] = snd;
            }

            tnt_bufref_t slot = tnt__ref(TNT_BUF_SCRATCH,
                                         tmp + (i % window) * maxseg);
            seg_ref(r, r->src, rc, j, &bytes);
            uint32_t rcv = tnt__sched_recv(s, left, step, slot, bytes);
            tnt__sched_dep(s, slot_last[i % window], rcv);

            int last = (k == p - 2);
            tnt_bufref_t mine = seg_ref(r, r->src, rc, j, &bytes);
            tnt_bufref_t dst;
            if (last && r->final_dst_set) {
                size_t off, len, soff, n;
                tnt__ring_chunk(r, rc, &off, &len);
                tnt__segment(len, r->segelems, j, &soff, &n);
                dst = tnt__ref(r->final_dst.buf,
                               r->final_dst.off + soff * r->esize);
            } else {
                dst = seg_ref(r, r->acc, rc, j, &bytes);
            }
            /* The partial from the left covers lower ring positions. */
            uint32_t red = tnt__sched_reduce(s, dst, slot, mine, bytes);
            tnt__sched_dep(s, rcv, red);
            tnt__sched_dep(s, r->last_read[ridx], red);
            tnt__sched_dep(s, r->last_write[ridx], red);
            slot_last[i % window] = red;
            r->last_write[ridx] = red;
            if (last && r->scale) {
                uint32_t sca = tnt__sched_scale(s, dst, bytes);
                tnt__sched_dep(s, red, sca);
                r->last_write[ridx] = sca;
            }
        }
    }
}

void tnt__ring_ag_phase(tnt_sched_t *s, tnt_ring_t *r)
{
    int p = r->p, right = ring_peer(r, r->rank + 1);
    int left = ring_peer(r, r->rank - 1);
    for (int k = 0; k < p - 1; k++) {
        int sc = tnt__mod(r->owned - k, p);
        int rc = tnt__mod(r->owned - k - 1, p);
        for (size_t j = 0; j < r->nseg; j++) {
            size_t i = (size_t)k * r->nseg + j, bytes;
            uint32_t step = r->step_base + (uint32_t)i;
            size_t sidx = (size_t)sc * r->nseg + j;
            size_t ridx = (size_t)rc * r->nseg + j;

            tnt_bufref_t from = seg_ref(r, r->acc, sc, j, &bytes);
            uint32_t snd = tnt__sched_send(s, right, step, from, bytes);
            tnt__sched_dep(s, r->last_write[sidx], snd);
            r->last_read[sidx] = snd;

            tnt_bufref_t to = seg_ref(r, r->acc, rc, j, &bytes);
            uint32_t rcv = tnt__sched_recv(s, left, step, to, bytes);
            tnt__sched_dep(s, r->last_read[ridx], rcv);
            tnt__sched_dep(s, r->last_write[ridx], rcv);
            r->last_write[ridx] = rcv;
        }
    }
}
