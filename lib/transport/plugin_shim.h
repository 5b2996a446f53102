/*
 * For transports built as plugins (a shared object of their own): the
 * library's error and log functions, which the transport's code calls,
 * forwarded to the core through the env's services. A plugin carries its
 * own copy of every library function it links, with its own statics; a
 * message kept in the plugin's copy of the thread's last error or
 * filtered by its copy of the log level would never reach the
 * application (include/tnt/transport.h). Linked into plugins only,
 * instead of util/error.c and util/log.c.
 */
#ifndef TNT_TRANSPORT_PLUGIN_SHIM_H
#define TNT_TRANSPORT_PLUGIN_SHIM_H

#include "tnt/transport.h"

/** Remember the env's services (from every init: the same for every
 *  communicator of the process). Before the first call, errors and logs
 *  go nowhere. */
void tnt__plugin_bind(const tnt_transport_env_t *env);

/** What a plugin's exported table is marked with. */
#define TNT_PLUGIN_EXPORT __attribute__((visibility("default")))

#endif /* TNT_TRANSPORT_PLUGIN_SHIM_H */
