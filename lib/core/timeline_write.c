/*
 * The timeline's writer: events from the ring to Chrome trace-event JSON
 * (docs/timeline.md lists every event and field). Runs on the progress
 * thread (ring half full) and at tnt_comm_free, one writer at a time
 * (tl->wlock); the ring's lock is held only to copy a batch out, so
 * recording never waits for the file.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/describe.h"
#include "core/timeline_internal.h"

size_t tnt__tl_json_str(char *p, const char *s)
{
    char *q = p;
    *q++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *q++ = '\\';
            *q++ = (char)c;
        } else {
            *q++ = c < 0x20 ? '?' : (char)c; /* no control characters */
        }
    }
    *q++ = '"';
    *q = 0;
    return (size_t)(q - p);
}

/* A local time in the file's time base, microseconds. */
static double us(const struct tnt_timeline *tl, double t)
{
    return (t - tl->offset_s - tl->origin_s) * 1e6;
}

static void see_lane(struct tnt_timeline *tl, uint32_t tid)
{
    if (tid >= TNT_TL_TID_BUCKET0) {
        if (tid - TNT_TL_TID_BUCKET0 + 1 > tl->max_bucket_lane)
            tl->max_bucket_lane = tid - TNT_TL_TID_BUCKET0 + 1;
    } else if (tid < 128) {
        tl->lanes[tid / 64] |= 1ull << (tid % 64);
    }
}

/* Every event after the first is preceded by ",\n". */
static void begin_event(struct tnt_timeline *tl)
{
    if (tl->written++)
        fputs(",\n", tl->f);
}

static void tpnames(const struct tnt_timeline *tl, unsigned mask, char *out,
                    size_t len)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < TNT_STATS_TP_MAX; i++)
        if (mask & (1u << i))
            o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s",
                                  o ? "+" : "", tl->tp_names[i]);
    if (!o)
        snprintf(out, len, "none");
}

static void write_coll(struct tnt_timeline *tl, const tnt_tl_event_t *e)
{
    char tps[80];
    tpnames(tl, e->tpmask, tps, sizeof(tps));
    const char *kind = tnt__coll_kind_name(e->kind);
    fprintf(tl->f,
            "{\"name\":\"%s\",\"cat\":\"coll\",\"ph\":\"X\",\"pid\":%d,"
            "\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%" PRIu64
            ",\"kind\":\"%s\",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
            ",\"dtype\":\"%s\",\"op\":\"%s\",\"algo\":\"%s\","
            "\"transport\":\"%s\",\"root\":%d,\"post\":%.3f,\"start\":%.3f,"
            "\"end\":%.3f,\"result\":%d}}",
            kind, tl->rank, e->tid, us(tl, e->t[1]),
            (e->t[2] - e->t[1]) * 1e6, e->seq, kind, e->bytes, e->count,
            tnt_dtype_name((tnt_dtype_t)e->dtype),
            e->kind == TNT_COLL_ALLREDUCE || e->kind == TNT_COLL_REDUCE_SCATTER
                ? tnt_op_name((tnt_op_t)e->op) : "none",
            tnt__algo_name(e->algo), tps, e->root, us(tl, e->t[0]),
            us(tl, e->t[1]), us(tl, e->t[2]), e->result);
}

static void write_event(struct tnt_timeline *tl, const tnt_tl_event_t *e)
{
    char name[2 * sizeof(e->name) + 3];
    see_lane(tl, e->tid);
    begin_event(tl);
    switch (e->type) {
    case TNT_TL_COLL:
        write_coll(tl, e);
        break;
    case TNT_TL_READY:
        tnt__tl_json_str(name, e->name);
        fprintf(tl->f,
                "{\"name\":\"ready\",\"cat\":\"fusion\",\"ph\":\"i\","
                "\"s\":\"t\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"args\":{"
                "\"fusion\":%u,\"iter\":%u,\"tensor\":%u,\"bucket\":%u,"
                "\"name\":%s}}",
                tl->rank, e->tid, us(tl, e->t[0]), e->fusion, e->iter,
                e->tensor, e->bucket, name);
        break;
    case TNT_TL_PACK:
        fprintf(tl->f,
                "{\"name\":\"pack\",\"cat\":\"fusion\",\"ph\":\"X\","
                "\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{"
                "\"fusion\":%u,\"iter\":%u,\"bucket\":%u,\"bytes\":%" PRIu64
                "}}",
                tl->rank, e->tid, us(tl, e->t[0]), (e->t[1] - e->t[0]) * 1e6,
                e->fusion, e->iter, e->bucket, e->bytes);
        break;
    case TNT_TL_BUCKET:
        tnt__tl_json_str(name, e->name);
        fprintf(tl->f,
                "{\"name\":\"bucket %u\",\"cat\":\"fusion\",\"ph\":\"X\","
                "\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{"
                "\"fusion\":%u,\"iter\":%u,\"bucket\":%u,\"seq\":%" PRIu64
                ",\"tensors\":%u,\"names\":%s,\"bytes\":%" PRIu64
                ",\"first_ready\":%.3f,\"post\":%.3f,\"end\":%.3f,"
                "\"result\":%d}}",
                e->bucket, tl->rank, e->tid, us(tl, e->t[1]),
                (e->t[2] - e->t[1]) * 1e6, e->fusion, e->iter, e->bucket,
                e->seq, e->tensor, name, e->bytes, us(tl, e->t[0]),
                us(tl, e->t[1]), us(tl, e->t[2]), e->result);
        break;
    case TNT_TL_WAIT_ALL:
        fprintf(tl->f,
                "{\"name\":\"wait_all\",\"cat\":\"fusion\",\"ph\":\"X\","
                "\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{"
                "\"fusion\":%u,\"iter\":%u}}",
                tl->rank, e->tid, us(tl, e->t[0]), (e->t[1] - e->t[0]) * 1e6,
                e->fusion, e->iter);
        break;
    default:
        fprintf(tl->f, "{\"name\":\"unknown\",\"ph\":\"i\",\"s\":\"t\","
                "\"pid\":%d,\"tid\":%u,\"ts\":%.3f}", tl->rank, e->tid,
                us(tl, e->t[0]));
    }
}

static void write_note(struct tnt_timeline *tl, const struct tnt_tl_note *n)
{
    see_lane(tl, n->tid);
    begin_event(tl);
    fprintf(tl->f,
            "{\"name\":\"fusion plan\",\"cat\":\"fusion\",\"ph\":\"i\","
            "\"s\":\"t\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"args\":{"
            "\"fusion\":%u,\"bucket\":%u,\"tensors\":%s}}",
            tl->rank, n->tid, us(tl, n->t), n->fusion, n->bucket,
            n->tensors);
}

void tnt__tl_flush(struct tnt_timeline *tl)
{
    enum { BATCH = 64 };
    tnt_tl_event_t batch[BATCH];
    pthread_mutex_lock(&tl->wlock);
    pthread_mutex_lock(&tl->lock);
    struct tnt_tl_note *notes = tl->notes;
    tl->notes = NULL;
    tl->notes_tail = &tl->notes;
    pthread_mutex_unlock(&tl->lock);
    while (notes) {
        struct tnt_tl_note *n = notes;
        notes = n->next;
        write_note(tl, n);
        free(n);
    }
    for (;;) {
        pthread_mutex_lock(&tl->lock);
        uint32_t n = atomic_load_explicit(&tl->n, memory_order_relaxed);
        uint32_t take = n < BATCH ? n : BATCH;
        for (uint32_t i = 0; i < take; i++)
            batch[i] = tl->ring[(tl->head + i) % tl->cap];
        tl->head = (tl->head + take) % tl->cap;
        atomic_store_explicit(&tl->n, n - take, memory_order_relaxed);
        pthread_mutex_unlock(&tl->lock);
        if (!take)
            break;
        for (uint32_t i = 0; i < take; i++)
            write_event(tl, &batch[i]);
    }
    fflush(tl->f);
    pthread_mutex_unlock(&tl->wlock);
}

static void lane_name(struct tnt_timeline *tl, uint32_t tid,
                      const char *name, int sort)
{
    begin_event(tl);
    fprintf(tl->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
            "\"tid\":%u,\"args\":{\"name\":\"%s\"}},\n"
            "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,"
            "\"tid\":%u,\"args\":{\"sort_index\":%d}}",
            tl->rank, tid, name, tl->rank, tid, sort);
}

void tnt__tl_write_footer(struct tnt_timeline *tl)
{
    pthread_mutex_lock(&tl->wlock);
    begin_event(tl);
    fprintf(tl->f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
            "\"args\":{\"name\":\"%s\"}},\n"
            "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
            "\"args\":{\"sort_index\":%d}}",
            tl->rank, tl->who, tl->rank, tl->rank);
    char name[32];
    for (uint32_t tid = 1; tid < 128; tid++)
        if (tl->lanes[tid / 64] & (1ull << (tid % 64))) {
            if (tid == TNT_TL_TID_PROGRESS)
                snprintf(name, sizeof(name), "progress thread");
            else
                snprintf(name, sizeof(name), "app thread %u", tid);
            lane_name(tl, tid, name, tid == TNT_TL_TID_PROGRESS ? 1 : 0);
        }
    for (uint32_t k = 0; k < tl->max_bucket_lane; k++) {
        snprintf(name, sizeof(name), "bucket %u", k);
        lane_name(tl, TNT_TL_TID_BUCKET0 + k, name, (int)(10 + k));
    }
    fprintf(tl->f,
            "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{"
            "\"format\":\"libtntcomm timeline 1\",\"rank\":%d,\"nranks\":%d,"
            "\"comm\":\"%s\",\"comm_how\":\"%s\",\"world_rank\":%d,"
            "\"time_base\":\"rank 0 CLOCK_MONOTONIC, microseconds from the "
            "end of the clock alignment\",\"clock_offset_us\":%.3f,"
            "\"clock_error_us\":%.3f,\"clock_rtt_min_us\":%.3f,"
            "\"clock_rounds\":%d,\"events\":%" PRIu64 ",\"dropped\":%" PRIu64
            ",\"ring_events\":%u}}\n",
            tl->rank, tl->nranks, tl->comm_name, tl->comm_how,
            tl->world_rank, tl->offset_s * 1e6, tl->err_s * 1e6,
            tl->rtt_min_s * 1e6, tl->rounds, tl->recorded, tl->dropped,
            tl->cap);
    pthread_mutex_unlock(&tl->wlock);
}
