/*
 * Host identity: which ranks may talk through shared memory (see
 * hostid.c and docs/shm.md).
 */
#ifndef TNT_UTIL_HOSTID_H
#define TNT_UTIL_HOSTID_H

#include <stddef.h>

#include "tnt/tnt.h"

/* Longest host identity, with its NUL (the bootstrap table's field). */
#define TNT_HOST_MAX 64

/** Write this process's host identity ("hostname/hash", or TNT_HOST_ID
 *  verbatim) into out[n]. Ranks with equal strings share memory. */
tnt_result_t tnt__host_id(char *out, size_t n);

#endif /* TNT_UTIL_HOSTID_H */
