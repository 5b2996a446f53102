/*
 * A table of functions resolved from a library opened with dlopen: the
 * CUDA runtime (cuda_rt.c) and the CUDA driver (cuda_drv.c) are both
 * loaded this way, so that a host without CUDA runs the same binary.
 */
#ifndef TNT_UTIL_DL_TABLE_H
#define TNT_UTIL_DL_TABLE_H

#include <stddef.h>

/** One entry: where the function pointer goes, and its symbol. */
typedef struct tnt_dl_sym {
    void **slot;
    const char *sym;
} tnt_dl_sym_t;

/**
 * Resolve every entry of `syms` in `handle`. All or nothing: on the first
 * symbol missing, writes "LIB has no SYM" into `why` and returns -1 (the
 * slots filled so far must not be used); 0 when every slot is set.
 */
int tnt__dl_resolve(void *handle, const char *lib, const tnt_dl_sym_t *syms,
                    size_t n, char *why, size_t why_len);

#endif
