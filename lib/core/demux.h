/*
 * The engine's side of one communicator's messages (engine_wire.c), which
 * the demultiplexer (demux.c) calls once it knows the communicator. All
 * with the group's lock held, from inside a transport's poll or fd
 * callback.
 */
#ifndef TNT_CORE_DEMUX_H
#define TNT_CORE_DEMUX_H

#include "core/engine.h"

/** A connection to `peer` of comm on transport `tpi` is up. */
void tnt__wire_connected(struct tnt_comm *comm, int tpi, int peer, void *ep);
/** A header from `peer` of comm (its context id is comm's, or comm is the
 *  net owner that refuses it): set *dest and *cookie, as on_header. */
tnt_result_t tnt__wire_header(struct tnt_comm *comm, int peer,
                              const void *hdr, size_t hdr_len,
                              size_t payload_len, void **dest, void **cookie);
/** The payload of a message has landed; its cookie names comm. */
void tnt__wire_payload(int peer, void *cookie);
/** A send has completed (cookie NULL: a failure notice). */
void tnt__wire_send_done(void *cookie);
/** The connection to `peer` of comm failed or closed. */
void tnt__wire_peer_error(struct tnt_comm *comm, int peer, tnt_result_t err,
                          const char *what);
/** A shared group's connection to transport rank `peer` is gone (the
 *  transport said so, or a communicator had to close it): every
 *  communicator that has the peer hears it (engine_wire.c). */
void tnt__wire_group_lost(struct tnt_net_group *g, int peer,
                          tnt_result_t err, const char *what);

#endif /* TNT_CORE_DEMUX_H */
