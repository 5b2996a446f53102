/* A table of functions resolved with dlsym (dl_table.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "util/dl_table.h"

int tnt__dl_resolve(void *handle, const char *lib, const tnt_dl_sym_t *syms,
                    size_t n, char *why, size_t why_len)
{
    for (size_t i = 0; i < n; i++) {
        *syms[i].slot = dlsym(handle, syms[i].sym);
        if (!*syms[i].slot) {
            snprintf(why, why_len, "%s has no %s", lib, syms[i].sym);
            return -1;
        }
    }
    return 0;
}
