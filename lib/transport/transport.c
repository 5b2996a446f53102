/*
 * The table of built-in transports. Built-in transports fill the same
 * versioned struct an external plugin would, so the core cannot tell them
 * apart.
 */
#include <string.h>

#include "util/error.h"
#include "util/log.h"
#include "transport/transport.h"

static const tnt_transport_v1_t *const builtin[TNT_TP_COUNT] = {
    [TNT_TP_TCP] = &tnt__tcp_transport,
    [TNT_TP_SHM] = &tnt__shm_transport,
#ifdef TNT_HAVE_VERBS
    [TNT_TP_VERBS] = &tnt__verbs_transport,
#endif
};

const tnt_transport_v1_t *tnt__transport_get(int i)
{
    return i >= 0 && i < TNT_TP_COUNT ? builtin[i] : NULL;
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
    if (!name || !*name || strcmp(name, "auto") == 0) {
        *mask = (1u << TNT_TP_TCP) | (1u << TNT_TP_SHM);
        if (verbs_usable())
            *mask |= 1u << TNT_TP_VERBS;
        return TNT_SUCCESS;
    }
    for (int i = 0; i < TNT_TP_COUNT; i++)
        if (builtin[i] && strcmp(builtin[i]->name, name) == 0) {
            *mask = 1u << i;
            return TNT_SUCCESS;
        }
    return tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT='%s' is not a known "
                      "transport; expected auto, tcp, shm%s", name,
#ifdef TNT_HAVE_VERBS
                      " or verbs"
#else
                      " (verbs: not built: no libibverbs or -Dverbs=disabled)"
#endif
                      );
}
