/*
 * Checks of the message header (see msg_hdr.h), field by field, in the
 * order that gives the most telling reason for a stranger's bytes.
 */
#include <string.h>

#include "core/msg_hdr.h"

const char *tnt__msg_hdr_parse(const void *hdr, size_t hdr_len,
                               size_t payload_len, uint32_t comm_id,
                               int nranks, tnt_msg_hdr_t *out)
{
    if (hdr_len != sizeof(*out))
        return "message header of the wrong length";
    memcpy(out, hdr, sizeof(*out));
    if (out->magic != TNT_MSG_MAGIC)
        return "not a libtntcomm message header";
    if (out->comm_id != comm_id)
        return "message for another communicator";
    if (nranks < 1 || out->nranks != nranks)
        return "message from a job of another size";
    if (out->kind < TNT_COLL_ALLREDUCE || out->kind >= TNT_COLL_KIND_END)
        return "unknown collective kind";
    size_t esize = out->dtype < TNT_DTYPE_COUNT
                       ? tnt_dtype_size((tnt_dtype_t)out->dtype) : 0;
    if (esize == 0)
        return "unknown data type";
    if (out->op >= TNT_OP_COUNT)
        return "unknown reduction";
    if (out->algo >= TNT_ALGO_END)
        return "unknown algorithm";
    if ((out->step & TNT_STEP_CTL) == TNT_STEP_CTL)
        return "both flow-control flags in the step";
    if ((out->step & TNT_STEP_CTL) && payload_len)
        return "flow-control message with a payload";
    /* A CTS's count is the steps it clears, from its own on. */
    if ((out->step & TNT_STEP_CTS) &&
        (out->count == 0 ||
         out->count > TNT_STEP_CTS - (out->step & ~TNT_STEP_CTL)))
        return "CTS clearing no step, or steps past the last";
    if (out->root < 0 || out->root >= nranks)
        return "root outside the job";
    /* No collective moves more than count elements per rank. */
    if (out->count > SIZE_MAX / esize / (size_t)nranks)
        return "element count too large";
    /* (An alltoallv's header carries its message's own count.) */
    if (payload_len > (size_t)out->count * esize * (size_t)nranks)
        return "payload larger than the collective";
    return NULL;
}
