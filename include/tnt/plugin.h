/*
 * The frontend plugin ABI: gradient fusion for frameworks.
 *
 * A framework registers its gradient tensors once, in the order backprop
 * is expected to produce them, and then, every iteration, calls
 * tnt_fusion_ready() once per gradient as soon as it is computed. The
 * library packs gradients into buckets of at least `min_bucket_bytes`
 * (Tarantella's fusion threshold) and starts the allreduce of a bucket as
 * soon as all its tensors are ready, so communication overlaps the rest of
 * backprop. Results land in place in the caller's tensors.
 *
 * The bucket plan is a pure function of the registered list and the
 * options, so every rank derives the same plan without negotiation;
 * tnt_fusion_create() compares a hash of it across ranks and fails on all
 * ranks, naming the first differing tensor, if they disagree.
 *
 * Buckets are reduced in plan order on every rank (a bucket that is
 * complete early waits for the buckets before it), which is what makes
 * results independent of the order in which ranks report tensors ready.
 *
 * ABI: opaque handles; structs start with size and version and are
 * initialised with their *_INIT macros; new fields are only ever appended.
 */
#ifndef TNT_PLUGIN_H
#define TNT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/tnt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tnt_fusion *tnt_fusion_t;

/** One gradient tensor. The library steps through an array of these by
 *  the first element's `size`, so later versions can append fields. */
typedef struct tnt_tensor_desc {
    size_t size;       /**< sizeof(tnt_tensor_desc_t) */
    uint32_t version;  /**< TNT_TENSOR_DESC_VERSION */
    size_t count;      /**< elements */
    tnt_dtype_t dtype; /**< element type; buckets never mix dtypes */
    const char *name;  /**< optional, for plans and messages (may be NULL) */
} tnt_tensor_desc_t;

#define TNT_TENSOR_DESC_VERSION 1
#define TNT_TENSOR_DESC_INIT                                                \
    { sizeof(tnt_tensor_desc_t), TNT_TENSOR_DESC_VERSION, 0, TNT_F32, NULL }

/** Called once per tensor per iteration when its reduced values are in
 *  place (or with the error that ended the iteration). Runs on the thread
 *  that calls tnt_fusion_ready/wait/wait_all and observes the completion;
 *  it must not call tnt_fusion_* on the same context. */
typedef void (*tnt_fusion_cb_t)(void *arg, size_t tensor, tnt_result_t rc);

/** "Use the default": TNT_FUSION_THRESHOLD or 32 KiB for min_bucket_bytes,
 *  no upper limit for max_bucket_bytes, min_bucket_bytes for the first
 *  bucket. */
#define TNT_FUSION_DEFAULT ((size_t)-1)

typedef struct tnt_fusion_config {
    size_t size;               /**< sizeof(tnt_fusion_config_t) */
    uint32_t version;          /**< TNT_FUSION_CONFIG_VERSION */
    tnt_op_t op;               /**< TNT_SUM or TNT_AVG (default AVG) */
    size_t min_bucket_bytes;   /**< a bucket closes once it holds this
                                    much; 0: one allreduce per tensor. A
                                    tensor this large by itself never
                                    joins others (it would be copied) */
    size_t max_bucket_bytes;   /**< a bucket never grows past this (a
                                    single larger tensor is its own bucket) */
    size_t first_bucket_bytes; /**< threshold of the first bucket, which is
                                    often kept small so that communication
                                    starts early (PyTorch DDP) */
    tnt_fusion_cb_t callback;  /**< optional per-tensor completion */
    void *callback_arg;
} tnt_fusion_config_t;

#define TNT_FUSION_CONFIG_VERSION 1
#define TNT_FUSION_CONFIG_INIT                                              \
    { sizeof(tnt_fusion_config_t), TNT_FUSION_CONFIG_VERSION, TNT_AVG,      \
      TNT_FUSION_DEFAULT, TNT_FUSION_DEFAULT, TNT_FUSION_DEFAULT, NULL, NULL }

/** One bucket of the plan, as reported by tnt_fusion_bucket(). */
typedef struct tnt_fusion_bucket_info {
    size_t size;         /**< set by the caller: sizeof(this struct) */
    uint32_t version;    /**< set by the caller: TNT_FUSION_BUCKET_VERSION */
    size_t first_tensor; /**< index of its first tensor */
    size_t ntensors;     /**< tensors first_tensor .. first_tensor+n-1 */
    size_t count;        /**< elements in all */
    size_t bytes;
    tnt_dtype_t dtype;
} tnt_fusion_bucket_info_t;

#define TNT_FUSION_BUCKET_VERSION 1
#define TNT_FUSION_BUCKET_INFO_INIT                                         \
    { sizeof(tnt_fusion_bucket_info_t), TNT_FUSION_BUCKET_VERSION, 0, 0, 0, \
      0, TNT_F32 }

/**
 * Register `ntensors` tensors (in expected ready order) and build the
 * bucket plan. Collective over the communicator: the plans of all ranks
 * are compared, and a difference is TNT_ERR_MISMATCH on every rank.
 * `config` may be NULL for all defaults. The descriptors are copied.
 */
TNT_API tnt_result_t tnt_fusion_create(tnt_comm_t comm,
                                       const tnt_tensor_desc_t *tensors,
                                       size_t ntensors,
                                       const tnt_fusion_config_t *config,
                                       tnt_fusion_t *fusion);

/**
 * Gradient `tensor` is computed and lives at `data` (count elements of its
 * dtype) until the iteration ends. Returns at once; thread-safe.
 *
 * Errors, two kinds. A call with a bad argument (an unknown index, NULL
 * data for a tensor of count > 0, a second report of one tensor in an
 * iteration; tnt_fusion_wait of an unknown index; tnt_fusion_wait_all
 * before every tensor was reported) is refused with TNT_ERR_INVALID_ARG
 * and changes nothing: the iteration goes on as if the call had not been
 * made, so the caller can correct it. A failure of the context itself (a
 * bucket's allreduce failed or timed out, a peer was lost) is sticky:
 * that call and every later tnt_fusion_ready/wait/wait_all returns the
 * error, naming the first failure, and the context can only be freed.
 */
TNT_API tnt_result_t tnt_fusion_ready(tnt_fusion_t fusion, size_t tensor,
                                      void *data);

/** Wait until tensor's reduced values are in place. */
TNT_API tnt_result_t tnt_fusion_wait(tnt_fusion_t fusion, size_t tensor);

/**
 * Wait until every tensor of the iteration is reduced, and end the
 * iteration (the next ready() starts a new one). Every tensor must have
 * been reported ready, else TNT_ERR_INVALID_ARG naming the first missing.
 */
TNT_API tnt_result_t tnt_fusion_wait_all(tnt_fusion_t fusion);

TNT_API tnt_result_t tnt_fusion_num_buckets(tnt_fusion_t fusion,
                                            size_t *nbuckets);
/** Bucket `index` of the plan; info->size/version set by the caller. */
TNT_API tnt_result_t tnt_fusion_bucket(tnt_fusion_t fusion, size_t index,
                                       tnt_fusion_bucket_info_t *info);
/**
 * The plan as text, one line per bucket (tensor range, names, elements,
 * bytes, dtype), for a --dry-run. Writes at most `len` bytes including the
 * terminating NUL; *needed (if not NULL) gets the full length + 1.
 */
TNT_API tnt_result_t tnt_fusion_describe(tnt_fusion_t fusion, char *buf,
                                         size_t len, size_t *needed);

/** Free the context; an iteration in flight is waited for first. */
TNT_API tnt_result_t tnt_fusion_free(tnt_fusion_t fusion);

#ifdef __cplusplus
}
#endif

#endif /* TNT_PLUGIN_H */
