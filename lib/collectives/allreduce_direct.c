/*
 * Direct allreduce: a reduce-scatter in which rank j receives slice j from
 * every other rank at once and reduces the k inputs in rank order
 * (chain.c), then an allgather in which every rank sends its finished
 * slice to every other rank. Two communication steps instead of the
 * ring's 2(k-1), with the same bytes per rank: between ranks of one host
 * each step is one wake-up and one message per peer, streamed through
 * the pair's ring or, where ranks share cores, pulled with one
 * process_vm_readv from 4 MiB on (core/comm.c, choose_copies), so the
 * steps, not the bytes, are what the ring pays extra. The table picks it
 * for a reduce on one host (the on-host allreduces have no root); an
 * allreduce there runs staged, which beat it at every size measured
 * (docs/performance.md, "On one host: staged or direct"), so only when
 * forced.
 *
 * Slices are cut into segments of DIRECT_SEG_FACTOR x segment_bytes (1 MiB
 * by default), each its own message and its own chain; the allgather of
 * a segment starts as soon as its chain is done. Not smaller, because on
 * one host a message's cost is its wake-ups, not its bytes; not larger,
 * so that the sender's copy of segment j+1 through the ring runs while
 * the receiver reduces j (docs/performance.md, "Direct allreduce
 * segments"). The factor keeps TNT_SEGMENT_BYTES a knob that tests can
 * shrink.
 */
#include <stdint.h>
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/chain.h"
#include "collectives/direct_flow.h"
#include "collectives/patterns.h"
#include "util/error.h"

#define DIRECT_SEG_FACTOR 4
#define DIRECT_MAX_SEGMENTS ((size_t)1 << 18)

tnt_result_t tnt__allreduce_direct(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    int k = a->nranks, r = a->rank;
    size_t es = a->esize;
    size_t segelems = tnt__segment_elems(a->segment_bytes,
                                         DIRECT_SEG_FACTOR, es);
    size_t off0, len0, roff, rlen;
    tnt__chunk_range(a->count, k, 0, &off0, &len0);
    /* Bound the schedule's size, as the ring does: past
     * DIRECT_MAX_SEGMENTS operations' worth the segments grow instead. */
    size_t maxseg = DIRECT_MAX_SEGMENTS / (size_t)k;
    if (tnt__nsegments(len0, segelems) > maxseg)
        segelems = (len0 + maxseg - 1) / maxseg;
    tnt__chunk_range(a->count, k, r, &roff, &rlen);
    /* Chunk 0 is the longest: its segment count bounds every chunk's, so
     * the allgather's steps start above all reduce-scatter steps. */
    uint32_t ag_base = (uint32_t)tnt__nsegments(len0, segelems);
    size_t rseg = tnt__nsegments(rlen, segelems);
    tnt_bufref_t *in = malloc((size_t)k * sizeof(*in));
    uint32_t *ready = malloc((size_t)k * sizeof(*ready));
    /* rs_send[q * nseg_max + j]: the send of segment j of chunk q. */
    uint32_t *rs_send = malloc((size_t)k * ag_base * sizeof(*rs_send));
    size_t *slot = malloc((size_t)k * sizeof(*slot));
    if (!in || !ready || !rs_send || !slot) {
        free(in);
        free(ready);
        free(rs_send);
        free(slot);
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory building a "
                          "direct allreduce for %d ranks", k);
    }
    /* Large slices wait for the receiver's "ready" (see bcast_flat.c:
     * otherwise a rank that finished the previous collective first sends
     * into one that has not posted this one, which pulls into a bounce
     * buffer and copies again). */
    int handshake = len0 * es >= tnt__ready_min(a);
    tnt__direct_rs_sends(a, s, segelems, ag_base, handshake, rs_send);
    for (int q = 0; q < k; q++)
        if (q != r)
            slot[q] = tnt__sched_scratch(s, rlen * es);
    /* Per segment of the own chunk: receive it from everyone, reduce in
     * rank order, scale, and send the result to everyone. */
    for (size_t j = 0; j < rseg; j++) {
        size_t so, sn;
        tnt__segment(rlen, segelems, j, &so, &sn);
        size_t dst_off = (roff + so) * es, bytes = sn * es;
        for (int q = 0; q < k; q++) {
            if (q == r) {
                in[q] = tnt__ref(TNT_BUF_SEND, dst_off);
                ready[q] = TNT_SOP_NONE;
                continue;
            }
            in[q] = tnt__ref(TNT_BUF_SCRATCH, slot[q] + so * es);
            ready[q] = tnt__sched_recv(s, q, (uint32_t)j, in[q], bytes);
        }
        tnt_chain_t c = {.k = k, .self = r, .in = in, .in_ready = ready,
                         .dst = tnt__ref(TNT_BUF_RECV, dst_off),
                         .dst_is_self = a->in_place, .bytes = bytes};
        uint32_t last = tnt__chain_reduce(s, &c);
        if (a->op == TNT_AVG) {
            uint32_t sca = tnt__sched_scale(s, c.dst, bytes);
            tnt__sched_dep(s, last, sca);
            last = sca;
        }
        for (int q = 0; q < k; q++) {
            if (q == r)
                continue;
            uint32_t snd = tnt__sched_send(s, q, ag_base + (uint32_t)j,
                                           c.dst, bytes);
            tnt__sched_dep(s, last, snd);
        }
    }
    /* Allgather receives: chunk q from rank q, into place. */
    tnt__direct_ag_recvs(a, s, segelems, ag_base, rs_send);
    free(in);
    free(ready);
    free(rs_send);
    free(slot);
    return TNT_SUCCESS;
}
