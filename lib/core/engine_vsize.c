/*
 * Sizes of an alltoallv's messages, and of a tnt_send's against its
 * tnt_recv (the same check, with the tag in the message). Each rank
 * brings its own counts, so
 * the signature cannot hold them; instead every message's header carries
 * the element count of that message (core/engine.c sets it on the sends),
 * and the receiver compares it with its own recvcounts entry at the first
 * thing of the message that arrives: the data, or, for a message large
 * enough to wait for flow control, its RTS. At the RTS nothing has moved
 * yet and the sender's data is still parked, so the failure notice
 * reaches the sender in frame and both sides fail with this message, not
 * with a lost peer.
 */
#include <inttypes.h>

#include "core/engine.h"
#include "core/engine_internal.h"

int tnt__vsize_mismatch(struct tnt_comm *comm, struct tnt_request *req,
                        int peer, const tnt_msg_hdr_t *h,
                        const tnt_sop_t *sop)
{
    int p2p = req->args.kind == TNT_COLL_P2P;
    if (req->args.kind != TNT_COLL_ALLTOALLV && !p2p)
        return 0;
    size_t esize = req->args.esize;
    if (h->count == sop->bytes / esize)
        return 0;
    if (p2p) {
        tnt__engine_fail(comm, TNT_ERR_MISMATCH, "send/recv mismatch: "
                         "rank %d sends %" PRIu64 " elements (%s) with tag "
                         "%u to rank %d, but rank %d receives %zu from rank "
                         "%d with that tag (message %" PRIu64 " of the tag)",
                         peer, h->count, tnt_dtype_name(req->args.dtype),
                         sop->step, comm->rank, comm->rank,
                         sop->bytes / esize, peer,
                         req->seq & ~((uint64_t)1 << 63));
        return 1;
    }
    tnt__engine_fail(comm, TNT_ERR_MISMATCH, "alltoallv #%" PRIu64
                     " mismatch: rank %d sends %" PRIu64 " elements (%s) "
                     "to rank %d, but rank %d expects %zu from rank %d "
                     "(recvcounts[%d])", req->seq, peer, h->count,
                     tnt_dtype_name(req->args.dtype), comm->rank,
                     comm->rank, sop->bytes / esize, peer, peer);
    return 1;
}
