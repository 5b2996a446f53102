/*
 * Creating a fusion context: validating the registered tensors and
 * options, building the plan, agreeing on it across ranks, and describing
 * it. The agreement is one allgather of a plan hash; only if the hashes
 * differ do the ranks exchange enough (rank 0's list) to name the first
 * differing tensor, so the common case costs one small collective.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_live.h"
#include "core/engine.h"
#include "util/error.h"
#include "util/param_table.h"
#include "core/timeline.h"
#include "fusion/fusion_internal.h"

void tnt__fusion_destroy(tnt_fusion_t f)
{
    if (!f)
        return;
    for (size_t i = 0; f->names && i < f->n; i++)
        free(f->names[i]);
    free(f->names);
    free(f->tl_b);
    free(f->t);
    free(f->b);
    free(f->bucket_of);
    free(f->fbuf);
    free(f->data);
    free(f->is_ready);
    free(f->pending);
    free(f->req);
    free(f->packed);
    free(f->packs);
    free(f->claimed);
    free(f->done);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    f->magic = 0;
    free(f);
}

static tnt_result_t read_options(const tnt_fusion_config_t *c, tnt_fusion_t f)
{
    tnt_fusion_config_t d = TNT_FUSION_CONFIG_INIT;
    if (c) {
        if (c->size < offsetof(tnt_fusion_config_t, callback_arg) +
                          sizeof(void *) ||
            c->version < 1)
            return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_create: "
                              "config not initialised with "
                              "TNT_FUSION_CONFIG_INIT");
        d = *c;
    }
    if (d.op != TNT_SUM && d.op != TNT_AVG)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_create: op %d; "
                          "gradients are reduced with TNT_SUM or TNT_AVG",
                          (int)d.op);
    f->op = d.op;
    f->min_bytes = d.min_bucket_bytes;
    if (f->min_bytes == TNT_FUSION_DEFAULT)
        TNT_CHECK(tnt__env_size(TNT_VAR_FUSION_THRESHOLD, &f->min_bytes));
    f->max_bytes = d.max_bucket_bytes == TNT_FUSION_DEFAULT
                       ? SIZE_MAX : d.max_bucket_bytes;
    f->first_bytes = d.first_bucket_bytes == TNT_FUSION_DEFAULT
                         ? f->min_bytes : d.first_bucket_bytes;
    f->cb = d.callback;
    f->cb_arg = d.callback_arg;
    return TNT_SUCCESS;
}

static tnt_result_t read_tensors(const tnt_tensor_desc_t *tensors, size_t n,
                                 tnt_fusion_t f)
{
    size_t stride = n ? tensors[0].size : 0;
    if (n && (stride < offsetof(tnt_tensor_desc_t, name) +
                           sizeof(const char *) ||
              tensors[0].version < 1))
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_create: tensor "
                          "descriptors not initialised with "
                          "TNT_TENSOR_DESC_INIT");
    for (size_t i = 0; i < n; i++) {
        const tnt_tensor_desc_t *d =
            (const tnt_tensor_desc_t *)((const char *)tensors + i * stride);
        size_t esize = tnt_dtype_size(d->dtype);
        if (!esize)
            return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_create: "
                              "tensor %zu has unknown dtype %d", i,
                              (int)d->dtype);
        if (d->count > SIZE_MAX / esize)
            return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_create: "
                              "tensor %zu: count %zu overflows", i, d->count);
        f->t[i].count = d->count;
        f->t[i].bytes = d->count * esize;
        f->t[i].dtype = d->dtype;
        char fallback[32];
        snprintf(fallback, sizeof(fallback), "tensor%zu", i);
        f->names[i] = strdup(d->name ? d->name : fallback);
        if (!f->names[i])
            return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    }
    return TNT_SUCCESS;
}

/* The first differing tensor is k. Every rank, the agreeing ones too,
 * says which rank differs from rank 0 there and how: the lowest rank
 * that differs at k tells the others what it registered. */
static tnt_result_t explain_tensor(tnt_fusion_t f, size_t k, int differs,
                                   const uint64_t *list, size_t n0)
{
    uint64_t who = differs ? (uint64_t)f->rank : UINT64_MAX;
    TNT_CHECK(tnt_allreduce(f->comm, TNT_IN_PLACE, &who, 1, TNT_U64,
                            TNT_MIN));
    uint64_t its[3] = {f->n, k < f->n ? f->t[k].count : 0,
                       k < f->n ? (uint64_t)f->t[k].dtype : 0};
    TNT_CHECK(tnt_broadcast(f->comm, its, 3, TNT_U64, (int)who));
    char here[160] = "";
    if (k < f->n)
        snprintf(here, sizeof(here), "; here %zu x %s (%s)", f->t[k].count,
                 tnt_dtype_name(f->t[k].dtype),
                 f->names[k] ? f->names[k] : "?");
    if (k < n0 && k < its[0])
        return tnt__error(TNT_ERR_MISMATCH, "rank %d: fusion plans differ "
                          "across ranks at tensor %zu: rank %d registered "
                          "%llu x %s, rank 0 %llu x %s%s", f->rank, k,
                          (int)who, (unsigned long long)its[1],
                          tnt_dtype_name((tnt_dtype_t)its[2]),
                          (unsigned long long)list[2 * k],
                          tnt_dtype_name((tnt_dtype_t)list[2 * k + 1]),
                          here);
    return tnt__error(TNT_ERR_MISMATCH, "rank %d: fusion plans differ "
                      "across ranks at tensor %zu: rank %d registered %llu "
                      "tensors, rank 0 %zu%s", f->rank, k, (int)who,
                      (unsigned long long)its[0], n0, here);
}

/* The ranks' plans differ: find and name the first difference. Every rank
 * runs the same collectives here, since all saw the same hashes. */
static tnt_result_t explain_mismatch(tnt_fusion_t f)
{
    uint64_t opts[5] = {f->n, f->min_bytes, f->max_bytes, f->first_bytes,
                        (uint64_t)f->op};
    uint64_t root[5];
    memcpy(root, opts, sizeof(root));
    TNT_CHECK(tnt_broadcast(f->comm, root, 5, TNT_U64, 0));
    size_t n0 = root[0] < ((uint64_t)1 << 32) ? (size_t)root[0] : 0;
    uint64_t *list = malloc((2 * n0 + 1) * sizeof(uint64_t));
    if (!list)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    if (f->rank == 0)
        for (size_t i = 0; i < n0; i++) {
            list[2 * i] = f->t[i].count;
            list[2 * i + 1] = (uint64_t)f->t[i].dtype;
        }
    tnt_result_t rc = tnt_broadcast(f->comm, list, 2 * n0, TNT_U64, 0);
    uint64_t mine = UINT64_MAX;
    size_t common = f->n < n0 ? f->n : n0;
    for (size_t i = 0; rc == TNT_SUCCESS && i < common; i++)
        if (list[2 * i] != f->t[i].count ||
            list[2 * i + 1] != (uint64_t)f->t[i].dtype) {
            mine = i;
            break;
        }
    if (mine == UINT64_MAX && f->n != n0)
        mine = common;
    uint64_t first = mine;
    if (rc == TNT_SUCCESS)
        rc = tnt_allreduce(f->comm, TNT_IN_PLACE, &first, 1, TNT_U64,
                           TNT_MIN);
    if (rc != TNT_SUCCESS) {
        free(list);
        return rc;
    }
    size_t k = (size_t)first;
    if (first == UINT64_MAX) {
        /* Same tensors everywhere: the options differ. Gather them all to
         * name a rank that differs from rank 0. */
        int p;
        tnt_comm_size(f->comm, &p);
        uint64_t *all = malloc((size_t)p * 4 * sizeof(uint64_t));
        rc = all ? tnt_allgather(f->comm, opts + 1, all, 4, TNT_U64)
                 : tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
        int r = 1;
        while (rc == TNT_SUCCESS && r < p &&
               memcmp(all + 4 * r, all, 4 * sizeof(uint64_t)) == 0)
            r++;
        if (rc == TNT_SUCCESS && r < p)
            rc = tnt__error(TNT_ERR_MISMATCH, "rank %d: fusion options "
                            "differ across ranks: rank %d has threshold "
                            "%llu, max %llu, first %llu, op %s; rank 0 has "
                            "%llu, %llu, %llu, %s", f->rank, r,
                            (unsigned long long)all[4 * r],
                            (unsigned long long)all[4 * r + 1],
                            (unsigned long long)all[4 * r + 2],
                            tnt_op_name((tnt_op_t)all[4 * r + 3]),
                            (unsigned long long)root[1],
                            (unsigned long long)root[2],
                            (unsigned long long)root[3],
                            tnt_op_name((tnt_op_t)root[4]));
        else if (rc == TNT_SUCCESS)
            rc = tnt__error(TNT_ERR_MISMATCH, "rank %d: fusion plans differ "
                            "across ranks (a rank failed its own setup, or "
                            "runs a library with another plan rule)",
                            f->rank);
        free(all);
    } else {
        rc = explain_tensor(f, k, mine == first, list, n0);
    }
    free(list);
    return rc;
}

/* Compare plan hashes across ranks. A rank whose own setup failed still
 * takes part, with hash 0 (never a real plan's), so that its peers fail
 * with a mismatch instead of waiting for it. */
static tnt_result_t agree_on_plan(tnt_fusion_t f, int local_failed)
{
    int p;
    TNT_CHECK(tnt_comm_size(f->comm, &p));
    if (p == 1)
        return TNT_SUCCESS;
    uint64_t h = local_failed ? 0
                              : tnt__fusion_plan_hash(f->t, f->n, f->min_bytes,
                                                      f->max_bytes,
                                                      f->first_bytes,
                                                      (int)f->op) | 1;
    uint64_t *all = malloc((size_t)p * sizeof(uint64_t));
    if (!all)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    tnt_result_t rc = tnt_allgather(f->comm, &h, all, 1, TNT_U64);
    int same = 1;
    for (int r = 1; rc == TNT_SUCCESS && r < p; r++)
        same &= (all[r] == all[0]);
    free(all);
    if (rc != TNT_SUCCESS || same)
        return rc;
    return explain_mismatch(f);
}

static tnt_result_t allocate_state(tnt_fusion_t f)
{
    size_t n = f->n ? f->n : 1, nb = f->nb ? f->nb : 1;
    f->bucket_of = malloc(n * sizeof(size_t));
    f->data = calloc(n, sizeof(void *));
    f->is_ready = calloc(n, 1);
    f->pending = malloc(nb * sizeof(size_t));
    f->req = calloc(nb, sizeof(tnt_request_t));
    f->packed = calloc(nb, 1);
    f->packs = malloc(nb * sizeof(*f->packs));
    f->claimed = calloc(nb, 1);
    f->done = calloc(nb, 1);
    f->fbuf = f->fbuf_bytes ? malloc(f->fbuf_bytes) : NULL;
    if (!f->bucket_of || !f->data || !f->is_ready || !f->pending ||
        !f->req || !f->packed || !f->packs || !f->claimed || !f->done ||
        (f->fbuf_bytes && !f->fbuf))
        return tnt__error(TNT_ERR_NO_MEMORY, "tnt_fusion_create: out of "
                          "memory (fusion buffer of %zu bytes)",
                          f->fbuf_bytes);
    if (f->comm->timeline) {
        f->tl_b = calloc(nb, sizeof(*f->tl_b));
        if (!f->tl_b)
            return tnt__error(TNT_ERR_NO_MEMORY, "tnt_fusion_create: out "
                              "of memory");
        f->tl = f->comm->timeline;
        f->tl_id = tnt__tl_fusion_id(f->tl);
        for (size_t k = 0; k < f->nb; k++)
            tnt__tl_note_bucket(f->tl, f->tl_id, (uint32_t)k,
                                (const char *const *)f->names + f->b[k].first,
                                f->b[k].n);
    }
    for (size_t k = 0; k < f->nb; k++) {
        f->packs[k] = (struct tnt_fusion_pack){f, k};
        f->pending[k] = f->b[k].n;
        for (size_t j = f->b[k].first; j < f->b[k].first + f->b[k].n; j++)
            f->bucket_of[j] = k;
    }
    return TNT_SUCCESS;
}

/* Every bucket's allreduce may be in flight at once, every iteration:
 * have the engine build their schedules and keep requests and scratch for
 * all of them now, so that iterations allocate nothing. */
static tnt_result_t prepare_engine(tnt_fusion_t f)
{
    if (f->nb == 0)
        return TNT_SUCCESS;
    tnt_coll_args_t *args = malloc(f->nb * sizeof(*args));
    if (!args)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    for (size_t k = 0; k < f->nb; k++)
        args[k] = tnt__coll_args(f->comm, TNT_COLL_ALLREDUCE, f->b[k].count,
                                 f->b[k].dtype, f->op, 0, 1);
    tnt_result_t rc = tnt__engine_prepare(f->comm, args, f->nb);
    free(args);
    return rc;
}

TNT_API tnt_result_t tnt_fusion_create(tnt_comm_t comm,
                                       const tnt_tensor_desc_t *tensors,
                                       size_t ntensors,
                                       const tnt_fusion_config_t *config,
                                       tnt_fusion_t *out)
{
    if (!out)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_create: output "
                          "pointer is NULL");
    *out = NULL;
    TNT_CHECK(tnt__comm_check(comm, "tnt_fusion_create"));
    if (ntensors && !tensors)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_create: tensors "
                          "is NULL with ntensors %zu", ntensors);
    tnt_fusion_t f = calloc(1, sizeof(*f));
    if (!f)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->comm = comm;
    f->rank = comm->rank;
    f->timeout_s = comm->params.timeout_s;
    f->n = ntensors;
    f->t = calloc(ntensors ? ntensors : 1, sizeof(*f->t));
    f->names = calloc(ntensors ? ntensors : 1, sizeof(char *));
    tnt_result_t rc = (f->t && f->names)
                          ? TNT_SUCCESS
                          : tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    if (rc == TNT_SUCCESS)
        rc = read_options(config, f);
    if (rc == TNT_SUCCESS)
        rc = read_tensors(tensors, ntensors, f);
    if (rc == TNT_SUCCESS)
        rc = tnt__fusion_plan(f->t, f->n, f->min_bytes, f->max_bytes,
                              f->first_bytes, &f->b, &f->nb, &f->fbuf_bytes);
    if (rc == TNT_SUCCESS)
        rc = allocate_state(f);
    /* Every rank takes part in the agreement, also one whose own setup
     * failed (it then returns its own error, its peers a mismatch). */
    if (f->t && f->names) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", tnt_last_error());
        tnt_result_t arc = agree_on_plan(f, rc != TNT_SUCCESS);
        if (rc == TNT_SUCCESS)
            rc = arc;
        else
            tnt__error_str(rc, msg);
    }
    if (rc == TNT_SUCCESS)
        rc = prepare_engine(f);
    if (rc != TNT_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", tnt_last_error());
        tnt__fusion_destroy(f);
        return tnt__error_str(rc, msg);
    }
    f->magic = FUSION_MAGIC;
    *out = f;
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_fusion_num_buckets(tnt_fusion_t f, size_t *nb)
{
    TNT_CHECK(tnt__fusion_check(f, "tnt_fusion_num_buckets"));
    if (!nb)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_num_buckets: "
                          "output pointer is NULL");
    *nb = f->nb;
    return TNT_SUCCESS;
}

TNT_API tnt_result_t tnt_fusion_bucket(tnt_fusion_t f, size_t index,
                                       tnt_fusion_bucket_info_t *info)
{
    TNT_CHECK(tnt__fusion_check(f, "tnt_fusion_bucket"));
    if (!info || info->size < offsetof(tnt_fusion_bucket_info_t, dtype) +
                                  sizeof(tnt_dtype_t))
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_bucket: info is "
                          "NULL or not initialised with "
                          "TNT_FUSION_BUCKET_INFO_INIT");
    if (index >= f->nb)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_bucket: bucket "
                          "%zu does not exist (%zu buckets)", index, f->nb);
    const tnt_bucket_t *b = &f->b[index];
    info->first_tensor = b->first;
    info->ntensors = b->n;
    info->count = b->count;
    info->bytes = b->bytes;
    info->dtype = b->dtype;
    return TNT_SUCCESS;
}

/* Append formatted text to buf[len], counting what it would need. */
static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*pos < len ? buf + *pos : NULL,
                      *pos < len ? len - *pos : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *pos += (size_t)n;
}

TNT_API tnt_result_t tnt_fusion_describe(tnt_fusion_t f, char *buf,
                                         size_t len, size_t *needed)
{
    TNT_CHECK(tnt__fusion_check(f, "tnt_fusion_describe"));
    if (!buf && len)
        return tnt__error(TNT_ERR_INVALID_ARG, "tnt_fusion_describe: buf is "
                          "NULL with len %zu", len);
    size_t pos = 0, total = 0;
    for (size_t i = 0; i < f->n; i++)
        total += f->t[i].bytes;
    char max[32];
    if (f->max_bytes == SIZE_MAX)
        snprintf(max, sizeof(max), "none");
    else
        snprintf(max, sizeof(max), "%zu", f->max_bytes);
    append(buf, len, &pos, "# fusion plan: %zu tensors, %zu bytes, %zu "
           "buckets; threshold %zu, first bucket %zu, max %s, op %s\n",
           f->n, total, f->nb, f->min_bytes, f->first_bytes, max,
           tnt_op_name(f->op));
    for (size_t k = 0; k < f->nb; k++) {
        const tnt_bucket_t *b = &f->b[k];
        size_t last = b->first + b->n - 1;
        append(buf, len, &pos, "bucket %zu: tensors %zu-%zu (%s .. %s), "
               "%zu elements, %zu bytes, %s\n", k, b->first, last,
               f->names[b->first], f->names[last], b->count, b->bytes,
               tnt_dtype_name(b->dtype));
    }
    if (len)
        buf[pos < len ? pos : len - 1] = '\0';
    if (needed)
        *needed = pos + 1;
    return TNT_SUCCESS;
}
