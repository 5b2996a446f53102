/*
 * The built-in transports and the lookup by name (TNT_TRANSPORT).
 */
#ifndef TNT_TRANSPORT_TRANSPORT_H
#define TNT_TRANSPORT_TRANSPORT_H

#include "tnt/transport.h"

extern const tnt_transport_v1_t tnt__tcp_transport;
#ifdef TNT_HAVE_VERBS
extern const tnt_transport_v1_t tnt__verbs_transport;
/** 1 if the verbs transport has an active device to use (`why` names
 *  it), else 0 with the reason in `why` (verbs_dev.c). */
int tnt__verbs_probe(char *why, size_t why_len);
#endif

/** The transport named `name` ("tcp"; "auto" or NULL: the best one
 *  available), or NULL with an error message listing the known ones. */
const tnt_transport_v1_t *tnt__transport_find(const char *name);

#endif /* TNT_TRANSPORT_TRANSPORT_H */
