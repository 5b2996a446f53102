/*
 * Model tensor lists for `tnt-bench fusion`: the gradient tensors of a
 * network, in the order backprop produces them (the reverse of the
 * forward order in which frameworks register parameters), built from the
 * architecture in code so that their count and total can be checked
 * against published figures. All tensors are f32.
 */
#ifndef TNT_BENCH_MODELS_H
#define TNT_BENCH_MODELS_H

#include <stddef.h>

#include "tnt/plugin.h"

typedef struct bench_model {
    char label[64];            /* the spec it was built from */
    size_t n;                  /* tensors */
    tnt_tensor_desc_t *desc;   /* n descriptors, backprop order */
    size_t params;             /* elements in all */
    size_t bytes;              /* params * 4 */
    size_t largest;            /* bytes of the largest tensor */
    char *pool;                /* storage of the names */
    size_t pool_len, pool_cap;
    size_t *name_off;          /* name of tensor i at pool + name_off[i] */
} bench_model_t;

/* Largest uniform:N:BYTES model accepted, in tensors and in bytes: far
 * beyond what fits in memory here, but bounded so that the product
 * cannot overflow. */
#define BENCH_MODEL_MAX_TENSORS ((size_t)1 << 20)
#define BENCH_MODEL_MAX_BYTES ((size_t)1 << 40)

/** The --model names, for usage and error messages. */
#define BENCH_MODEL_NAMES                                                   \
    "resnet50, transformer-big, transformer-big-noembed or "                \
    "uniform:N:BYTES"

/**
 * Build the model named by `spec` (one of BENCH_MODEL_NAMES). Returns 0,
 * or -1 with a message in err (bad spec, out of memory, or a built-in
 * model whose tensor count or total differs from its published figure,
 * which would be a bug here).
 */
int bench_model_build(const char *spec, bench_model_t *m, char *err,
                      size_t errlen);
void bench_model_free(bench_model_t *m);

#endif /* TNT_BENCH_MODELS_H */
