/*
 * The direct data flow's sends and receives (direct_flow.h).
 */
#include "collectives/direct_flow.h"

#include "collectives/patterns.h"

void tnt__direct_chunk(const tnt_coll_args_t *a, int q, size_t *off,
                       size_t *len)
{
    if (a->kind == TNT_COLL_REDUCE_SCATTER) {
        *off = (size_t)q * a->count;
        *len = a->count;
    } else {
        tnt__chunk_range(a->count, a->nranks, q, off, len);
    }
}

void tnt__direct_rs_sends(const tnt_coll_args_t *a, tnt_sched_t *s,
                          size_t segelems, uint32_t ag_base, int handshake,
                          uint32_t *rs_send)
{
    size_t es = a->esize;
    uint32_t ready_step = 2 * ag_base;
    for (int q = 0; q < a->nranks; q++) {
        if (q == a->rank)
            continue;
        size_t qoff, qlen;
        tnt__direct_chunk(a, q, &qoff, &qlen);
        size_t nseg = tnt__nsegments(qlen, segelems);
        uint32_t go = TNT_SOP_NONE;
        if (handshake) {
            tnt__sched_send(s, q, ready_step, tnt__ref(TNT_BUF_RECV, 0), 0);
            go = tnt__sched_recv(s, q, ready_step,
                                 tnt__ref(TNT_BUF_RECV, 0), 0);
        }
        for (size_t j = 0; j < nseg; j++) {
            size_t so, sn;
            tnt__segment(qlen, segelems, j, &so, &sn);
            uint32_t snd = tnt__sched_send(
                s, q, (uint32_t)j, tnt__ref(TNT_BUF_SEND, (qoff + so) * es),
                sn * es);
            rs_send[(size_t)q * ag_base + j] = snd;
            tnt__sched_dep(s, go, snd);
        }
    }
}

void tnt__direct_ag_recvs(const tnt_coll_args_t *a, tnt_sched_t *s,
                          size_t segelems, uint32_t ag_base,
                          const uint32_t *rs_send)
{
    size_t es = a->esize;
    for (int q = 0; q < a->nranks; q++) {
        if (q == a->rank)
            continue;
        size_t qoff, qlen;
        tnt__direct_chunk(a, q, &qoff, &qlen);
        size_t nseg = tnt__nsegments(qlen, segelems);
        for (size_t j = 0; j < nseg; j++) {
            size_t so, sn;
            tnt__segment(qlen, segelems, j, &so, &sn);
            uint32_t rcv = tnt__sched_recv(
                s, q, ag_base + (uint32_t)j,
                tnt__ref(TNT_BUF_RECV, (qoff + so) * es), sn * es);
            if (a->in_place)
                tnt__sched_dep(s, rs_send[(size_t)q * ag_base + j], rcv);
        }
    }
}
