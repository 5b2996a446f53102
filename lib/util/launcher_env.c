/*
 * Reading other programs' variables (launcher_env.h). A TNT_* name is
 * refused so that the library's own variables have one way in, the
 * table, whose entries are documented and checked.
 */
#include <stdlib.h>
#include <string.h>

#include "util/launcher_env.h"

const char *tnt__launcher_env(const char *name)
{
    if (!name || strncmp(name, "TNT_", 4) == 0)
        return NULL;
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}
