/*
 * The TCP transport built a second time, as a stand-alone plugin
 * (libtnt-net-tcp.so, loaded with TNT_TRANSPORT_PLUGIN=/path/to/it): the
 * code of the built-in "tcp" under the name "tcp-plugin", reaching the
 * core only through the transport interface. It proves that interface
 * says everything a transport needs; the collective suite runs over it.
 * Built with TNT_PLUGIN_AS_V1 it exports a table of interface version 1
 * (no preference, poll, reachability or options), which the core must
 * still load and run.
 */
#include "transport/plugin_shim.h"
#include "transport/transport.h"

#ifdef TNT_PLUGIN_AS_V1
#define PLUGIN_SYMBOL tnt_transport_plugin_v1
#define PLUGIN_NAME "tcp-plugin-v1"
#define PLUGIN_VERSION 1
#define PLUGIN_SIZE TNT_TRANSPORT_V1_SIZE
#else
#define PLUGIN_SYMBOL tnt_transport_plugin_v4
#define PLUGIN_NAME "tcp-plugin"
#define PLUGIN_VERSION TNT_TRANSPORT_VERSION
#define PLUGIN_SIZE sizeof(tnt_transport_t)
#endif

/* Every init binds the shim to the core's services first: from then on,
 * the transport's errors and logs reach the application. */
static tnt_result_t plugin_init(const tnt_transport_env_t *env, void **ctx)
{
    tnt__plugin_bind(env);
    return tnt__tcp_transport.init(env, ctx);
}

/* Filled when the object is loaded, before the core looks it up: the
 * built-in table with this plugin's name, version and init. */
TNT_PLUGIN_EXPORT tnt_transport_t PLUGIN_SYMBOL;

__attribute__((constructor)) static void plugin_fill(void)
{
    tnt_transport_t t = tnt__tcp_transport;
    t.size = PLUGIN_SIZE;
    t.version = PLUGIN_VERSION;
    t.name = PLUGIN_NAME;
    t.init = plugin_init;
    PLUGIN_SYMBOL = t;
}
