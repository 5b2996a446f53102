/*
 * Validation of the core's message header (tnt_msg_hdr_t), the first
 * thing the engine reads of every message a peer sends. A pure function
 * of the bytes and of what the communicator expects, so that unit tests
 * and the libFuzzer harness can drive it without a network.
 */
#ifndef TNT_CORE_MSG_HDR_H
#define TNT_CORE_MSG_HDR_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"

/**
 * Copy and check a header of hdr_len bytes announcing payload_len bytes
 * for a communicator (comm_id, nranks): every field in range, and the
 * payload no larger than the largest message that collective can send.
 * NULL if it is sane (*out filled), else what is wrong. Whether the
 * message fits the collective in flight (signature, step, size) is the
 * engine's to judge afterwards.
 */
const char *tnt__msg_hdr_parse(const void *hdr, size_t hdr_len,
                               size_t payload_len, uint32_t comm_id,
                               int nranks, tnt_msg_hdr_t *out);

#endif /* TNT_CORE_MSG_HDR_H */
