/*
 * The fusion context's state, shared by fusion.c (the per-iteration
 * runtime) and fusion_setup.c (creation, plan agreement, description).
 */
#ifndef TNT_FUSION_FUSION_INTERNAL_H
#define TNT_FUSION_FUSION_INTERNAL_H

#include <pthread.h>

#include "fusion/plan.h"

#define FUSION_MAGIC 0x46534e54u /* "TNSF" */

/* The argument of pack_bucket (fusion.c), one per bucket. */
struct tnt_fusion_pack {
    struct tnt_fusion *f;
    size_t k;
};

struct tnt_fusion {
    uint32_t magic;
    tnt_comm_t comm;
    double timeout_s;        /* the communicator's TNT_TIMEOUT */
    int rank;
    size_t n;
    tnt_plan_tensor_t *t;
    char **names;
    tnt_bucket_t *b;
    size_t nb;
    size_t *bucket_of;       /* tensor -> bucket */
    unsigned char *fbuf;     /* packing area of the non-contiguous buckets */
    size_t fbuf_bytes;
    tnt_op_t op;
    size_t min_bytes, max_bytes, first_bytes;
    tnt_fusion_cb_t cb;
    void *cb_arg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* Per iteration. */
    void **data;
    unsigned char *is_ready;
    size_t *pending;         /* per bucket: tensors not yet ready */
    tnt_request_t *req;
    struct tnt_fusion_pack *packs; /* per bucket: what pack_bucket needs */
    unsigned char *packed, *claimed, *done;
    size_t next_post;        /* buckets below this are posted */
    size_t nready;
    tnt_result_t error;      /* sticky: the context is unusable */
    char error_msg[512];
    /* The timeline (core/timeline.h): tl is the communicator's, NULL
     * when it is off (then nothing below is allocated or read); per
     * bucket, when its first tensor became ready, when it was posted and
     * its collective's sequence number. */
    struct tnt_timeline *tl;
    uint32_t tl_id, tl_iter;
    struct tnt_fusion_tl {
        double first_ready, post;
        uint64_t seq;
    } *tl_b;
};

/** Free everything of f (no iteration may be in flight). */
void tnt__fusion_destroy(tnt_fusion_t f);

/** TNT_SUCCESS if f looks like a live context (magic), else an error. */
tnt_result_t tnt__fusion_check(tnt_fusion_t f, const char *fn);

#endif /* TNT_FUSION_FUSION_INTERNAL_H */
