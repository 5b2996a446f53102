/*
 * The list of transports: the built-in ones, which fill the same
 * versioned table an external plugin does, and the plugin slot
 * (plugin.c).
 */
#include <stddef.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"
#include "transport/transport.h"

static const tnt_transport_t *const builtin[TNT_TP_PLUGIN] = {
    [TNT_TP_TCP] = &tnt__tcp_transport,
    [TNT_TP_SHM] = &tnt__shm_transport,
#ifdef TNT_HAVE_VERBS
    [TNT_TP_VERBS] = &tnt__verbs_transport,
#endif
};

const tnt_transport_t *tnt__transport_get(int i)
{
    if (i == TNT_TP_PLUGIN)
        return tnt__transport_plugin();
    return i >= 0 && i < TNT_TP_PLUGIN ? builtin[i] : NULL;
}

tnt_result_t tnt__transport_adopt(const tnt_transport_t *t,
                                  const char *what, tnt_transport_t *out)
{
    if (t->version < TNT_TRANSPORT_VERSION_MIN ||
        t->version > TNT_TRANSPORT_VERSION)
        return tnt__error(TNT_ERR_CONFIG, "%s implements transport "
                          "interface version %u; this library speaks "
                          "versions %d to %d", what, t->version,
                          TNT_TRANSPORT_VERSION_MIN, TNT_TRANSPORT_VERSION);
    if (t->size < TNT_TRANSPORT_V1_SIZE)
        return tnt__error(TNT_ERR_CONFIG, "%s: transport table of %zu "
                          "bytes; version %u needs at least %zu", what,
                          t->size, t->version, TNT_TRANSPORT_V1_SIZE);
    const char *missing = !t->name ? "name" : !t->init ? "init"
                          : !t->listen ? "listen" : !t->connect ? "connect"
                          : !t->send ? "send" : !t->close ? "close"
                          : !t->finalize ? "finalize" : NULL;
    if (missing)
        return tnt__error(TNT_ERR_CONFIG, "%s: transport table without "
                          "'%s'", what, missing);
    /* Fields of later versions than the table's stay zero: no
     * preference, no poll, no options, every peer reachable. */
    memset(out, 0, sizeof(*out));
    memcpy(out, t, t->size < sizeof(*out) ? t->size : sizeof(*out));
    out->size = sizeof(*out);
    /* A table that says an older version has none of the later fields,
     * whatever its size. */
    if (out->version < 4) {
        out->pair_area_contexts = 0;
        out->pair_area_at = NULL;
        out->pair_area_clear = NULL;
    }
    return TNT_SUCCESS;
}

/* auto: verbs only when an active RDMA port exists (one INFO line). */
static int verbs_usable(void)
{
#ifdef TNT_HAVE_VERBS
    char why[256];
    int ok = tnt__verbs_probe(why, sizeof(why));
    TNT_LOG_DEBUG("verbs probe: %s", why);
    TNT_LOG_INFO("TNT_TRANSPORT=auto: %s", ok ? "verbs between hosts (RDMA "
                 "device found)" : "no verbs (no active RDMA port)");
    return ok;
#else
    return 0;
#endif
}

tnt_result_t tnt__transport_mask(const char *name, unsigned *mask)
{
    const tnt_transport_t *plugin = tnt__transport_plugin();
    if (!name || !*name || strcmp(name, "auto") == 0) {
        *mask = (1u << TNT_TP_TCP) | (1u << TNT_TP_SHM);
        if (verbs_usable())
            *mask |= 1u << TNT_TP_VERBS;
        if (plugin)
            *mask |= 1u << TNT_TP_PLUGIN;
        return TNT_SUCCESS;
    }
    for (int i = 0; i < TNT_TP_COUNT; i++) {
        const tnt_transport_t *t = tnt__transport_get(i);
        if (t && strcmp(t->name, name) == 0) {
            *mask = 1u << i;
            return TNT_SUCCESS;
        }
    }
    return tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT='%s' is not a known "
                      "transport; expected auto, tcp, shm%s%s%s%s", name,
#ifdef TNT_HAVE_VERBS
                      ", verbs",
#else
                      " (verbs: not built: no libibverbs or -Dverbs=disabled)",
#endif
                      plugin ? " or " : " or the name of a plugin loaded "
                      "with TNT_TRANSPORT_PLUGIN=/path/libtnt-net-NAME.so",
                      plugin ? plugin->name : "",
                      plugin ? " (TNT_TRANSPORT_PLUGIN)" : "");
}
