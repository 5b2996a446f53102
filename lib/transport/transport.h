/*
 * The list of transports a process may run, and the choice among them
 * (TNT_TRANSPORT, TNT_TRANSPORT_PLUGIN). The core reaches a transport
 * only through its table (include/tnt/transport.h).
 */
#ifndef TNT_TRANSPORT_TRANSPORT_H
#define TNT_TRANSPORT_TRANSPORT_H

#include "tnt/transport.h"

extern const tnt_transport_t tnt__tcp_transport;
extern const tnt_transport_t tnt__shm_transport;
#ifdef TNT_HAVE_VERBS
extern const tnt_transport_t tnt__verbs_transport;
/** 1 if the verbs transport has an active device to use (`why` names
 *  it), else 0 with the reason in `why` (verbs_dev.c). */
int tnt__verbs_probe(char *why, size_t why_len);
#endif

/* Positions in the list: the built-in transports, then the plugin of
 * TNT_TRANSPORT_PLUGIN. The core keeps per-position state, and the
 * address blobs of the bootstrap list addresses in this order, so every
 * rank must have the same list (the same TNT_TRANSPORT_PLUGIN). The
 * core finds the transport of the on-host algorithms' pair areas by what
 * its table offers (core/comm_tp.c), not by its position. */
enum {
    TNT_TP_TCP = 0,
    TNT_TP_SHM = 1,
    TNT_TP_VERBS = 2,
    TNT_TP_PLUGIN = 3,
    TNT_TP_COUNT = 4
};

/** The transport at position i (0 <= i < TNT_TP_COUNT): NULL for verbs
 *  when it is not built and for the plugin until one is loaded. */
const tnt_transport_t *tnt__transport_get(int i);

/** Which transports TNT_TRANSPORT=`name` asks for, as a bit mask by
 *  position: "auto" or NULL: all (each peer gets the most preferred one
 *  that reaches it; verbs only when an active RDMA port exists; the
 *  plugin when one is loaded), else the one of that name (a built-in or
 *  the loaded plugin). Unknown names are TNT_ERR_CONFIG with a message
 *  listing the known ones. */
tnt_result_t tnt__transport_mask(const char *name, unsigned *mask);

/** Load the transport plugin at `path` (dlopen, then the symbol
 *  TNT_TRANSPORT_PLUGIN_SYMBOL or its v1 form) into position
 *  TNT_TP_PLUGIN, once per process; a later call with the same path
 *  reuses it. A missing file or symbol, an interface version this library
 *  does not speak (the message names both), a table without a required
 *  function or a name taken by a built-in transport: TNT_ERR_CONFIG
 *  naming the path. (plugin.c) */
tnt_result_t tnt__transport_plugin_load(const char *path);
/** The loaded plugin, NULL if none (plugin.c). */
const tnt_transport_t *tnt__transport_plugin(void);

/** Check a transport table and bring it to this library's layout: a
 *  table of an older version is copied into `out` with the fields it
 *  lacks zeroed (the size gate, in one place), so that the core may read
 *  every field of what it holds. `what` names it in messages. */
tnt_result_t tnt__transport_adopt(const tnt_transport_t *t,
                                  const char *what, tnt_transport_t *out);

#endif /* TNT_TRANSPORT_TRANSPORT_H */
