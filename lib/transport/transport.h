/*
 * The built-in transports and the lookup by name (TNT_TRANSPORT).
 */
#ifndef TNT_TRANSPORT_TRANSPORT_H
#define TNT_TRANSPORT_TRANSPORT_H

#include "tnt/transport.h"

extern const tnt_transport_v1_t tnt__tcp_transport;

/** The transport named `name` ("tcp"; "auto" or NULL: the best one
 *  available), or NULL with an error message listing the known ones. */
const tnt_transport_v1_t *tnt__transport_find(const char *name);

#endif /* TNT_TRANSPORT_TRANSPORT_H */
