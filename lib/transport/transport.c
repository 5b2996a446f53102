/*
 * The table of built-in transports. Built-in transports fill the same
 * versioned struct an external plugin would, so the core cannot tell them
 * apart. Shared memory and RDMA verbs join this table in their issues.
 */
#include <string.h>

#include "core/error.h"
#include "transport/transport.h"

static const tnt_transport_v1_t *const builtin[] = {
    &tnt__tcp_transport,
};

const tnt_transport_v1_t *tnt__transport_find(const char *name)
{
    if (!name || !*name || strcmp(name, "auto") == 0)
        return builtin[0];
    for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
        if (strcmp(builtin[i]->name, name) == 0)
            return builtin[i];
    tnt__error(TNT_ERR_CONFIG, "TNT_TRANSPORT='%s' is not a known transport;"
               " expected auto or tcp", name);
    return NULL;
}
