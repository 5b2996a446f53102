/*
 * The built-in transports and the choice among them (TNT_TRANSPORT).
 */
#ifndef TNT_TRANSPORT_TRANSPORT_H
#define TNT_TRANSPORT_TRANSPORT_H

#include "tnt/transport.h"

extern const tnt_transport_v1_t tnt__tcp_transport;
extern const tnt_transport_v1_t tnt__shm_transport;

/* Fixed indices of the built-in transports: the core keeps per-index
 * state, and the address blobs of the bootstrap list them in this order. */
enum { TNT_TP_TCP = 0, TNT_TP_SHM = 1, TNT_TP_COUNT = 2 };

/** The built-in transport with index i (0 <= i < TNT_TP_COUNT). */
const tnt_transport_v1_t *tnt__transport_get(int i);

/** Which transports TNT_TRANSPORT=`name` asks for, as a bit mask by
 *  index: "auto" or NULL: all (each peer gets the best one that reaches
 *  it), "tcp" or "shm": that one only. Unknown names are TNT_ERR_CONFIG
 *  with a message listing the known ones. */
tnt_result_t tnt__transport_mask(const char *name, unsigned *mask);

#endif /* TNT_TRANSPORT_TRANSPORT_H */
