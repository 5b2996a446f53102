/*
 * Shared bits of the libFuzzer harnesses: an oracle that aborts (so that
 * libFuzzer records the input) when a parser accepted something that
 * breaks what its callers rely on.
 */
#ifndef TNT_FUZZ_COMMON_H
#define TNT_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_ASSERT(cond)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz oracle failed: %s (%s:%d)\n", #cond,        \
                    __FILE__, __LINE__);                                      \
            abort();                                                          \
        }                                                                     \
    } while (0)

#endif /* TNT_FUZZ_COMMON_H */
