/*
 * Shared bits of the libFuzzer harnesses: an oracle that aborts (so that
 * libFuzzer records the input) when a parser accepted something that
 * breaks what its callers rely on.
 */
#ifndef TNT_FUZZ_COMMON_H
#define TNT_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "util/auth.h"

#define FUZZ_ASSERT(cond)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz oracle failed: %s (%s:%d)\n", #cond,        \
                    __FILE__, __LINE__);                                      \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* The key the harnesses check MACs against (libsodium set up once). */
static inline const tnt_auth_key_t *fuzz_key(void)
{
    static tnt_auth_key_t key;
    static int ready;
    if (!ready) {
        tnt__auth_init();
        tnt__auth_key_derive("fuzz-key", &key);
        ready = 1;
    }
    return &key;
}

#endif /* TNT_FUZZ_COMMON_H */
