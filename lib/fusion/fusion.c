/*
 * The fusion runtime behind include/tnt/plugin.h: per-iteration state of
 * the bucket plan, posting buckets as they complete, finishing them.
 *
 * Buckets are posted strictly in plan order (bucket k only after buckets
 * 0..k-1), so every rank issues the same allreduces in the same order
 * whatever order its tensors became ready in; a bucket whose tensors are
 * contiguous in the caller's memory is reduced in place, any other is
 * packed into a persistent fusion buffer and unpacked when done. Nothing
 * is allocated here per iteration.
 *
 * Threads: ready() may be called from several threads. f->lock guards the
 * state; waiting for a bucket happens with the lock released, by one
 * thread that claims the bucket, while others wait on f->cond.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "core/engine.h"
#include "core/timeline.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/param.h"
#include "fusion/fusion_internal.h"

tnt_result_t tnt__fusion_check(tnt_fusion_t f, const char *fn)
{
    if (!f || f->magic != FUSION_MAGIC)
        return tnt__error(TNT_ERR_INVALID_ARG, "%s: not a fusion context "
                          "(NULL or freed)", fn);
    return TNT_SUCCESS;
}

static tnt_result_t fail(tnt_fusion_t f, tnt_result_t rc)
{
    if (!f->error) {
        f->error = rc;
        snprintf(f->error_msg, sizeof(f->error_msg), "%s", tnt_last_error());
    }
    return rc;
}

static tnt_result_t sticky(tnt_fusion_t f, const char *fn)
{
    return tnt__error(f->error, "rank %d: %s: the fusion context failed "
                      "earlier: %s", f->rank, fn, f->error_msg);
}

/* ---- posting and finishing buckets ------------------------------- */

/* Copy bucket k's tensors into its part of the fusion buffer. Run by the
 * poller just before the bucket's allreduce starts (the engine's prepare
 * step), without f->lock: what it reads (the bucket's data pointers) was
 * set before the post and stays until the bucket is finished. */
static void pack_bucket(void *arg)
{
    const struct tnt_fusion_pack *pk = arg;
    tnt_fusion_t f = pk->f;
    const tnt_bucket_t *b = &f->b[pk->k];
    unsigned char *buf = f->fbuf + b->offset;
    size_t off = 0;
    double t0 = f->tl ? tnt__now() : 0.0;
    for (size_t j = b->first; j < b->first + b->n; j++) {
        if (f->t[j].bytes)
            memcpy(buf + off, f->data[j], f->t[j].bytes);
        off += f->t[j].bytes;
    }
    if (f->tl) {
        tnt_tl_event_t ev = {.type = TNT_TL_PACK, .t = {t0, tnt__now()},
                             .fusion = f->tl_id, .iter = f->tl_iter,
                             .bucket = (uint32_t)pk->k, .bytes = off,
                             .tid = tnt__tl_tid()};
        tnt__tl_record(f->tl, &ev);
    }
}

/* Timeline: bucket k's BUCKET event, once it is finished (f->lock). */
static void tl_bucket(tnt_fusion_t f, size_t k, tnt_result_t rc)
{
    const tnt_bucket_t *b = &f->b[k];
    tnt_tl_event_t ev = {
        .type = TNT_TL_BUCKET,
        .t = {f->tl_b[k].first_ready, f->tl_b[k].post, tnt__now()},
        .seq = f->tl_b[k].seq, .count = b->count,
        .bytes = (uint64_t)b->count * tnt_dtype_size(b->dtype),
        .result = rc, .fusion = f->tl_id, .iter = f->tl_iter,
        .bucket = (uint32_t)k, .tensor = (uint32_t)b->n,
        .tid = TNT_TL_TID_BUCKET0 + (uint32_t)k};
    if (b->n > 1)
        snprintf(ev.name, sizeof(ev.name), "%.19s..%.19s",
                 f->names[b->first], f->names[b->first + b->n - 1]);
    else if (b->n == 1)
        snprintf(ev.name, sizeof(ev.name), "%s", f->names[b->first]);
    tnt__tl_record(f->tl, &ev);
}

static void post_bucket(tnt_fusion_t f, size_t k)
{
    const tnt_bucket_t *b = &f->b[k];
    unsigned char *start = f->data[b->first];
    int contiguous = 1;
    for (size_t j = b->first; j + 1 < b->first + b->n && contiguous; j++)
        contiguous = (unsigned char *)f->data[j] + f->t[j].bytes ==
                     (unsigned char *)f->data[j + 1];
    f->packed[k] = !contiguous;
    unsigned char *buf = contiguous ? start : f->fbuf + b->offset;
    /* Deferred: ready() returns at once; the progress thread packs, sends,
     * copies early messages and reduces (arguments were checked at
     * create). Packing there rather than here keeps megabytes of copying
     * off the training thread (a bucket that ends in a large layer's
     * weights copies it whole). */
    tnt_coll_args_t a = tnt__coll_args(f->comm, TNT_COLL_ALLREDUCE,
                                       b->count, b->dtype, f->op, 0, 1);
    if (f->tl)
        f->tl_b[k].post = tnt__now();
    tnt_result_t rc = tnt__engine_post_prepared(
        f->comm, &a, buf, buf, contiguous ? NULL : pack_bucket,
        &f->packs[k], &f->req[k]);
    if (f->tl && rc == TNT_SUCCESS)
        f->tl_b[k].seq = f->req[k]->seq;
    if (rc != TNT_SUCCESS) {
        f->req[k] = NULL;
        fail(f, rc);
    }
}

static void post_ready_buckets(tnt_fusion_t f)
{
    while (!f->error && f->next_post < f->nb &&
           f->pending[f->next_post] == 0)
        post_bucket(f, f->next_post++);
}

/* Unpack and report bucket k, whose allreduce ended with rc. */
static void complete_bucket(tnt_fusion_t f, size_t k, tnt_result_t rc)
{
    const tnt_bucket_t *b = &f->b[k];
    if (rc == TNT_SUCCESS && f->packed[k]) {
        size_t off = 0;
        for (size_t j = b->first; j < b->first + b->n; j++) {
            if (f->t[j].bytes)
                memcpy(f->data[j], f->fbuf + b->offset + off, f->t[j].bytes);
            off += f->t[j].bytes;
        }
    }
    if (rc != TNT_SUCCESS)
        fail(f, rc);
    if (f->tl)
        tl_bucket(f, k, rc);
    if (f->req[k]) /* the engine's own: never handed to the user */
        tnt__engine_release(f->req[k]);
    f->req[k] = NULL;
    f->done[k] = 1;
    if (f->cb)
        for (size_t j = b->first; j < b->first + b->n; j++)
            f->cb(f->cb_arg, j, rc);
    pthread_cond_broadcast(&f->cond);
}

/* Make sure bucket k (posted) is finished; lock held, may be released. */
static void finish_bucket(tnt_fusion_t f, size_t k)
{
    while (!f->done[k]) {
        if (f->claimed[k]) {
            pthread_cond_wait(&f->cond, &f->lock);
            continue;
        }
        f->claimed[k] = 1;
        tnt_request_t req = f->req[k];
        pthread_mutex_unlock(&f->lock);
        int finished;
        tnt_result_t rc = req ? tnt__engine_wait(req, -1.0, &finished)
                              : f->error;
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", tnt_last_error());
        pthread_mutex_lock(&f->lock);
        if (rc != TNT_SUCCESS)
            tnt__error_str(rc, msg);
        complete_bucket(f, k, rc);
    }
}

/* Finish posted buckets that are already done, without blocking, so that
 * callbacks fire during backprop rather than only at wait_all. This runs
 * on the training thread: it neither drives progress (that would run
 * transfers and reductions here) nor waits for the communicator's lock
 * (the poller may hold it); a bucket it skips is finished by a later call
 * or by wait_all, with the same data either way. */
static void poll_buckets(tnt_fusion_t f)
{
    for (size_t k = 0; k < f->next_post; k++) {
        if (f->done[k] || f->claimed[k] || !f->req[k])
            continue;
        tnt_result_t rc;
        if (!tnt__engine_try_release(f->req[k], &rc))
            break; /* later buckets were posted later */
        f->req[k] = NULL;
        complete_bucket(f, k, rc);
    }
}

/* An error stopped posting: the accepted tensors of buckets that were
 * never posted get their callback with that error, once. */
static void fail_unposted(tnt_fusion_t f)
{
    if (!f->error)
        return;
    for (size_t k = f->next_post; k < f->nb; k++) {
        if (f->done[k])
            continue;
        f->done[k] = 1;
        for (size_t j = f->b[k].first; f->cb && j < f->b[k].first + f->b[k].n;
             j++)
            if (f->is_ready[j])
                f->cb(f->cb_arg, j, f->error);
    }
}

static void reset_iteration(tnt_fusion_t f)
{
    memset(f->is_ready, 0, f->n);
    for (size_t k = 0; k < f->nb; k++)
        f->pending[k] = f->b[k].n;
    memset(f->claimed, 0, f->nb);
    memset(f->done, 0, f->nb);
    f->next_post = 0;
    f->nready = 0;
    if (f->tl) {
        f->tl_iter++;
        memset(f->tl_b, 0, f->nb * sizeof(*f->tl_b));
    }
}

/* ---- the API -------------------------------------------------------- */

TNT_API tnt_result_t tnt_fusion_ready(tnt_fusion_t f, size_t tensor,
                                      void *data)
{
    TNT_CHECK(tnt__fusion_check(f, "tnt_fusion_ready"));
    pthread_mutex_lock(&f->lock);
    tnt_result_t rc = TNT_SUCCESS;
    if (f->error)
        rc = sticky(f, "tnt_fusion_ready");
    else if (tensor >= f->n)
        rc = tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_fusion_ready: "
                        "tensor %zu does not exist (%zu registered)",
                        f->rank, tensor, f->n);
    else if (!data && f->t[tensor].count)
        rc = tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_fusion_ready: "
                        "data of tensor %zu (%s) is NULL", f->rank, tensor,
                        f->names[tensor]);
    else if (f->is_ready[tensor])
        rc = tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_fusion_ready: "
                        "tensor %zu (%s) reported ready twice in one "
                        "iteration", f->rank, tensor, f->names[tensor]);
    if (rc == TNT_SUCCESS && f->tl) {
        size_t k = f->bucket_of[tensor];
        tnt_tl_event_t ev = {.type = TNT_TL_READY, .t = {tnt__now()},
                             .fusion = f->tl_id, .iter = f->tl_iter,
                             .tensor = (uint32_t)tensor,
                             .bucket = (uint32_t)k, .tid = tnt__tl_tid()};
        snprintf(ev.name, sizeof(ev.name), "%s", f->names[tensor]);
        if (!f->tl_b[k].first_ready)
            f->tl_b[k].first_ready = ev.t[0];
        tnt__tl_record(f->tl, &ev);
    }
    if (rc == TNT_SUCCESS) {
        f->is_ready[tensor] = 1;
        f->data[tensor] = data;
        f->nready++;
        f->pending[f->bucket_of[tensor]]--;
        size_t posted = f->next_post;
        post_ready_buckets(f);
        if (f->next_post != posted)
            pthread_cond_broadcast(&f->cond); /* tnt_fusion_wait waits */
        poll_buckets(f);
        if (f->error)
            rc = sticky(f, "tnt_fusion_ready");
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

TNT_API tnt_result_t tnt_fusion_wait(tnt_fusion_t f, size_t tensor)
{
    TNT_CHECK(tnt__fusion_check(f, "tnt_fusion_wait"));
    pthread_mutex_lock(&f->lock);
    tnt_result_t rc = TNT_SUCCESS;
    if (tensor >= f->n) {
        rc = tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_fusion_wait: "
                        "tensor %zu does not exist (%zu registered)",
                        f->rank, tensor, f->n);
    } else {
        size_t k = f->bucket_of[tensor];
        /* Its bucket is posted once every tensor up to it is ready,
         * possibly by other threads: wait for that first, within the
         * communicator's deadline (a tensor never reported would
         * otherwise hang this call). */
        struct timespec abs;
        clock_gettime(CLOCK_REALTIME, &abs);
        abs.tv_sec += (time_t)f->timeout_s;
        while (!f->error && k >= f->next_post)
            if (pthread_cond_timedwait(&f->cond, &f->lock, &abs) ==
                ETIMEDOUT) {
                size_t miss = 0;
                while (miss < f->n && f->is_ready[miss])
                    miss++;
                pthread_mutex_unlock(&f->lock);
                return tnt__error(TNT_ERR_TIMEOUT, "rank %d: tnt_fusion_wait: "
                                  "tensor %zu's bucket never became complete "
                                  "within %.0f s (tensor %zu is not ready)",
                                  f->rank, tensor, f->timeout_s, miss);
            }
        if (!f->error || f->req[k])
            finish_bucket(f, k);
        if (f->error)
            rc = sticky(f, "tnt_fusion_wait");
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

TNT_API tnt_result_t tnt_fusion_wait_all(tnt_fusion_t f)
{
    TNT_CHECK(tnt__fusion_check(f, "tnt_fusion_wait_all"));
    double t0 = f->tl ? tnt__now() : 0.0;
    pthread_mutex_lock(&f->lock);
    tnt_result_t rc = TNT_SUCCESS;
    if (!f->error && f->nready < f->n) {
        size_t miss = 0;
        while (f->is_ready[miss])
            miss++;
        rc = tnt__error(TNT_ERR_INVALID_ARG, "rank %d: tnt_fusion_wait_all:"
                        " tensor %zu (%s) was not reported ready in this "
                        "iteration (%zu of %zu were)", f->rank, miss,
                        f->names[miss], f->nready, f->n);
        pthread_mutex_unlock(&f->lock);
        return rc;
    }
    for (size_t k = 0; k < f->next_post; k++)
        finish_bucket(f, k);
    fail_unposted(f);
    if (f->error)
        rc = sticky(f, "tnt_fusion_wait_all");
    if (f->tl) {
        tnt_tl_event_t ev = {.type = TNT_TL_WAIT_ALL, .t = {t0, tnt__now()},
                             .fusion = f->tl_id, .iter = f->tl_iter,
                             .tid = tnt__tl_tid()};
        tnt__tl_record(f->tl, &ev);
    }
    reset_iteration(f);
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

TNT_API tnt_result_t tnt_fusion_free(tnt_fusion_t f)
{
    TNT_CHECK(tnt__fusion_check(f, "tnt_fusion_free"));
    pthread_mutex_lock(&f->lock);
    /* Buckets already handed to the engine still point into the caller's
     * tensors or the fusion buffer: let them finish first. */
    for (size_t k = 0; k < f->next_post; k++)
        finish_bucket(f, k);
    fail_unposted(f);
    f->magic = 0;
    pthread_mutex_unlock(&f->lock);
    tnt__fusion_destroy(f);
    return TNT_SUCCESS;
}
