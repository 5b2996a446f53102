/*
 * The bucket plan: a pure function of the registered tensors and the
 * thresholds (no I/O, no communicator), so every rank derives the same
 * plan and it can be unit-tested directly.
 *
 * Walking the tensors in registered order, a tensor joins the open bucket
 * unless its dtype differs, it would push the bucket past
 * max_bucket_bytes, or it reaches the bucket's threshold by itself; a
 * bucket closes as soon as it holds at least the threshold
 * (first_bucket_bytes for the first bucket, min_bucket_bytes for the
 * others). So threshold 0 gives one bucket per tensor and a huge
 * threshold one bucket per run of equal dtypes.
 *
 * The third reason keeps large tensors out of the fusion buffer: a bucket
 * of separately allocated tensors is packed (copied in, and out again when
 * reduced), and a few small tensors in front of a large one would make it
 * copy the large one for the sake of one message fewer
 * (docs/performance.md, "Large tensors in buckets of their own").
 */
#ifndef TNT_FUSION_PLAN_H
#define TNT_FUSION_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/plugin.h"

typedef struct tnt_bucket {
    size_t first;    /* first tensor */
    size_t n;        /* tensors first .. first+n-1 */
    size_t count;    /* elements */
    size_t bytes;
    size_t offset;   /* where it is packed in the fusion buffer */
    tnt_dtype_t dtype;
} tnt_bucket_t;

typedef struct tnt_plan_tensor {
    size_t count;
    size_t bytes;
    tnt_dtype_t dtype;
} tnt_plan_tensor_t;

/** Build the plan; *buckets is malloc'd (free it). The fusion buffer
 *  needs *buffer_bytes (sum of bucket sizes, each aligned to 64). */
tnt_result_t tnt__fusion_plan(const tnt_plan_tensor_t *t, size_t n,
                              size_t min_bytes, size_t max_bytes,
                              size_t first_bytes, tnt_bucket_t **buckets,
                              size_t *nbuckets, size_t *buffer_bytes);

/** A hash of everything the plan depends on (tensors, thresholds, op),
 *  compared across ranks at setup. */
uint64_t tnt__fusion_plan_hash(const tnt_plan_tensor_t *t, size_t n,
                               size_t min_bytes, size_t max_bytes,
                               size_t first_bytes, int op);

#endif /* TNT_FUSION_PLAN_H */
