/*
 * Host identity: which ranks may talk through shared memory (see
 * hostid.c and docs/shm.md).
 */
#ifndef TNT_CORE_HOSTID_H
#define TNT_CORE_HOSTID_H

#include <stddef.h>

#include "tnt/tnt.h"

/** Write this process's host identity ("hostname/hash", or TNT_HOST_ID
 *  verbatim) into out[n]. Ranks with equal strings share memory. */
tnt_result_t tnt__host_id(char *out, size_t n);

#endif /* TNT_CORE_HOSTID_H */
