/*
 * The table of built-in transports. Built-in transports fill the same
 * versioned struct an external plugin would, so the core cannot tell them
 * apart. Shared memory joins this table in its issue.
 */
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "transport/transport.h"

static const tnt_transport_v1_t *const builtin[] = {
    &tnt__tcp_transport,
#ifdef TNT_HAVE_VERBS
    &tnt__verbs_transport,
#endif
};

/* auto: verbs when an active RDMA port exists, TCP otherwise. */
static const tnt_transport_v1_t *pick_auto(void)
{
#ifdef TNT_HAVE_VERBS
    char why[256];
    int ok = tnt__verbs_probe(why, sizeof(why));
    TNT_LOG_DEBUG("verbs probe: %s", why);
    TNT_LOG_INFO("TNT_TRANSPORT=auto: %s", ok ? "verbs (RDMA device found)"
                                              : "tcp (no active RDMA port)");
    if (ok)
        return &tnt__verbs_transport;
#endif
    return &tnt__tcp_transport;
}

const tnt_transport_v1_t *tnt__transport_find(const char *name)
{
    if (!name || !*name || strcmp(name, "auto") == 0)
        return pick_auto();
    for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
        if (strcmp(builtin[i]->name, name) == 0)
            return builtin[i];
    tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT='%s' is not a known transport;"
               " expected auto, tcp%s", name,
#ifdef TNT_HAVE_VERBS
               " or verbs"
#else
               " (verbs: not built: no libibverbs or -Dverbs=disabled)"
#endif
               );
    return NULL;
}
