/*
 * The bucket planner (rules in plan.h). Pure and deterministic: the same
 * list and thresholds give the same plan on every rank.
 */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "fusion/plan.h"

#define BUCKET_ALIGN 64
/* Bumped whenever the rule changes, and hashed with the plan: ranks that
 * run libraries with different rules fail at setup instead of posting
 * different allreduces. 2: large tensors start their own bucket. */
#define PLAN_RULE 2

tnt_result_t tnt__fusion_plan(const tnt_plan_tensor_t *t, size_t n,
                              size_t min_bytes, size_t max_bytes,
                              size_t first_bytes, tnt_bucket_t **buckets,
                              size_t *nbuckets, size_t *buffer_bytes)
{
    tnt_bucket_t *b = malloc((n ? n : 1) * sizeof(*b));
    if (!b)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a plan of "
                          "%zu tensors", n);
    size_t nb = 0, offset = 0;
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        tnt_bucket_t *cur = open ? &b[nb - 1] : NULL;
        size_t threshold = (nb == 1) ? first_bytes : min_bytes;
        if (cur && (t[i].dtype != cur->dtype || cur->bytes > max_bytes ||
                    t[i].bytes > max_bytes - cur->bytes ||
                    t[i].bytes >= threshold))
            open = 0;
        if (!open) {
            cur = &b[nb++];
            memset(cur, 0, sizeof(*cur));
            cur->first = i;
            cur->dtype = t[i].dtype;
            open = 1;
        }
        cur->n++;
        cur->count += t[i].count;
        cur->bytes += t[i].bytes;
        threshold = (nb == 1) ? first_bytes : min_bytes;
        if (cur->bytes >= threshold)
            open = 0;
    }
    for (size_t k = 0; k < nb; k++) {
        b[k].offset = offset;
        size_t sz = (b[k].bytes + BUCKET_ALIGN - 1) & ~(size_t)(BUCKET_ALIGN - 1);
        if (sz < b[k].bytes || offset > SIZE_MAX - sz) {
            free(b);
            return tnt__error(TNT_ERR_INVALID_ARG, "the registered tensors "
                              "exceed the address space");
        }
        offset += sz;
    }
    *buckets = b;
    *nbuckets = nb;
    *buffer_bytes = offset;
    return TNT_SUCCESS;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    /* FNV-1a over the 8 bytes of v. */
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t tnt__fusion_plan_hash(const tnt_plan_tensor_t *t, size_t n,
                               size_t min_bytes, size_t max_bytes,
                               size_t first_bytes, int op)
{
    uint64_t h = 1469598103934665603ull;
    h = mix(h, PLAN_RULE);
    h = mix(h, n);
    h = mix(h, min_bytes);
    h = mix(h, max_bytes);
    h = mix(h, first_bytes);
    h = mix(h, (uint64_t)op);
    for (size_t i = 0; i < n; i++) {
        h = mix(h, t[i].count);
        h = mix(h, (uint64_t)t[i].dtype);
    }
    return h;
}
