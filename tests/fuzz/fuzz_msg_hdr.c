/*
 * libFuzzer harness of the core's message header check
 * (lib/core/msg_hdr.c). Input: one byte for the communicator size, eight
 * for the announced payload length, then the header bytes. An accepted
 * header must name a known collective, type, op and algorithm, a root in
 * the job, a payload no larger than count * type size * size, and none
 * at all on a flow-control message (RTS or CTS), and a CTS clearing at
 * least one step and none past the last.
 */
#include <stdint.h>
#include <string.h>

#include "core/msg_hdr.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    int nranks = 1 + data[0];
    uint64_t payload;
    memcpy(&payload, data + 1, sizeof(payload));
    tnt_msg_hdr_t h;
    if (tnt__msg_hdr_parse(data + 9, size - 9, (size_t)payload, 1, nranks,
                           &h))
        return 0;
    FUZZ_ASSERT(h.kind >= TNT_COLL_ALLREDUCE && h.kind < TNT_COLL_KIND_END);
    FUZZ_ASSERT(h.dtype < TNT_DTYPE_COUNT && h.op < TNT_OP_COUNT);
    FUZZ_ASSERT(h.algo < TNT_ALGO_END);
    FUZZ_ASSERT(h.root >= 0 && h.root < nranks && h.nranks == nranks);
    size_t es = tnt_dtype_size((tnt_dtype_t)h.dtype);
    FUZZ_ASSERT(es > 0);
    /* No overflow in the bound the engine's buffers are sized by. */
    FUZZ_ASSERT(h.count <= SIZE_MAX / es / (size_t)nranks);
    FUZZ_ASSERT(payload <= h.count * es * (size_t)nranks);
    /* A flow-control message (RTS or CTS, never both) has no payload. */
    FUZZ_ASSERT((h.step & TNT_STEP_CTL) != TNT_STEP_CTL);
    FUZZ_ASSERT(!(h.step & TNT_STEP_CTL) || payload == 0);
    /* A CTS clears count steps from its own, at least one, all nameable. */
    FUZZ_ASSERT(!(h.step & TNT_STEP_CTS) ||
                (h.count >= 1 &&
                 h.count <= TNT_STEP_CTS - (h.step & ~TNT_STEP_CTL)));
    return 0;
}
