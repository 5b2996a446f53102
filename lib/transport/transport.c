/*
 * The table of built-in transports. Built-in transports fill the same
 * versioned struct an external plugin would, so the core cannot tell them
 * apart. RDMA verbs joins this table in its issue.
 */
#include <string.h>

#include "core/error.h"
#include "transport/transport.h"

static const tnt_transport_v1_t *const builtin[TNT_TP_COUNT] = {
    [TNT_TP_TCP] = &tnt__tcp_transport,
    [TNT_TP_SHM] = &tnt__shm_transport,
};

const tnt_transport_v1_t *tnt__transport_get(int i)
{
    return i >= 0 && i < TNT_TP_COUNT ? builtin[i] : NULL;
}

tnt_result_t tnt__transport_mask(const char *name, unsigned *mask)
{
    if (!name || !*name || strcmp(name, "auto") == 0) {
        *mask = (1u << TNT_TP_COUNT) - 1;
        return TNT_SUCCESS;
    }
    for (int i = 0; i < TNT_TP_COUNT; i++)
        if (strcmp(builtin[i]->name, name) == 0) {
            *mask = 1u << i;
            return TNT_SUCCESS;
        }
    return tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT='%s' is not a known "
                      "transport; expected auto, tcp or shm", name);
}
