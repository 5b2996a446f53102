/*
 * What every on-host algorithm does with the pairs' shared memory alike:
 * say how large its areas are, wake the peers that may sleep on what
 * this rank wrote there, read a signature a peer left there as a message
 * header, and report the peers it waits for.
 */
#include <string.h>

#include "core/onhost/onhost.h"
#include "core/onhost/slot_layout.h"
#include "core/onhost/stage_layout.h"

void tnt__onhost_area_bytes(size_t bytes[TNT_TP_AREA_END])
{
    for (int a = 0; a < TNT_TP_AREA_END; a++)
        bytes[a] = 0;
    bytes[TNT_TP_AREA_SLOTS] = sizeof(tnt_slot_side_t);
    bytes[TNT_TP_AREA_STAGES] = sizeof(tnt_stage_side_t);
}

void tnt__onhost_notify(struct tnt_comm *comm)
{
    if (!comm->onhost.slot_notify)
        return;
    comm->onhost.slot_notify = 0;
    for (int q = 0; q < comm->nranks; q++) {
        tnt_peer_t *p = &comm->peers[q];
        if (p->onhost.slot_notify && p->ep)
            p->tp->pair_notify(p->tp_ctx, p->ep);
        p->onhost.slot_notify = 0;
    }
}

tnt_msg_hdr_t tnt__mem_sig(const struct tnt_comm *comm, uint64_t seq,
                           uint64_t count, uint8_t kind, uint8_t dtype,
                           uint8_t op, uint8_t algo, int32_t root)
{
    tnt_msg_hdr_t h;
    memset(&h, 0, sizeof(h));
    h.magic = TNT_MSG_MAGIC;
    h.comm_id = comm->comm_id;
    h.seq = seq;
    h.count = count;
    h.kind = kind;
    h.dtype = dtype;
    h.op = op;
    h.algo = algo;
    h.root = root;
    h.nranks = comm->nranks;
    return h;
}

size_t tnt__onhost_report_peers(const struct tnt_request *req, char *buf,
                                size_t len,
                                int (*waits)(const struct tnt_request *req,
                                             int q),
                                int (*describe)(const struct tnt_request *req,
                                                int q, const char *sep,
                                                char *buf, size_t len))
{
    const struct tnt_comm *comm = req->comm;
    size_t n = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int q = 0; comm && q < comm->nranks && shown < 4; q++) {
        if (q == comm->rank || !waits(req, q))
            continue;
        int w = describe(req, q, shown ? "; " : "", buf + n, len - n);
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
        shown++;
    }
    return n;
}
