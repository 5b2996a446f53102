/*
 * The timeline trace: the ring of events and the writer of the Chrome
 * trace-event file (docs/timeline.md). The clock alignment is in
 * timeline_sync.c.
 *
 * File rule: TNT_TIMELINE=PATH makes rank R write PATH.R.json; a second
 * communicator of the same process with the timeline on writes
 * PATH.R.N.json (N = 1, 2, ...), so that no file is written twice.
 *
 * The file is one JSON object: {"traceEvents": [...], "otherData": {...}}.
 * Events are appended as the ring is flushed; the metadata (clock offset
 * and its error, events dropped) closes the object at tnt_comm_free. A
 * process that dies first leaves a file without its closing part
 * (tools/tnt-timeline reads such a file up to its last whole event).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_name.h"
#include "core/engine.h"
#include "core/engine_internal.h"
#include "core/timeline.h"
#include "core/timeline_internal.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/param_table.h"

/* docs/timeline.md's figures (2 MiB a ring) count on this. */
_Static_assert(sizeof(tnt_tl_event_t) == 128, "one event is 128 bytes");

/* ---- lanes ------------------------------------------------------------ */

static _Thread_local uint32_t my_tid;
static atomic_uint next_app_tid = 2;
static atomic_uint next_file = 0;

void tnt__tl_is_progress_thread(void)
{
    my_tid = TNT_TL_TID_PROGRESS;
}

uint32_t tnt__tl_tid(void)
{
    if (!my_tid)
        my_tid = atomic_fetch_add(&next_app_tid, 1);
    return my_tid;
}

/* ---- opening and recording ------------------------------------------- */

tnt_result_t tnt__tl_open(struct tnt_comm *comm)
{
    const char *path = tnt__env(TNT_VAR_TIMELINE);
    if (!path || !*path)
        return TNT_SUCCESS;
    struct tnt_timeline *tl = calloc(1, sizeof(*tl));
    if (!tl)
        return tnt__error(TNT_ERR_NO_MEMORY, "TNT_TIMELINE: out of memory");
    tl->cap = TNT_TL_RING_EVENTS;
    tl->notes_tail = &tl->notes;
    tl->ring = calloc(tl->cap, sizeof(*tl->ring));
    /* Named by the world rank: a derived communicator's rank R is
     * another process's world rank R, whose files these must not be. */
    unsigned nth = atomic_fetch_add(&next_file, 1);
    if (nth == 0)
        snprintf(tl->path, sizeof(tl->path), "%s.%d.json", path,
                 comm->world_rank);
    else
        snprintf(tl->path, sizeof(tl->path), "%s.%d.%u.json", path,
                 comm->world_rank, nth);
    if (!tl->ring) {
        free(tl);
        return tnt__error(TNT_ERR_NO_MEMORY, "TNT_TIMELINE: out of memory "
                          "for %u events", TNT_TL_RING_EVENTS);
    }
    tl->f = fopen(tl->path, "w");
    if (!tl->f) {
        int e = errno;
        tnt_result_t rc = tnt__error(TNT_ERR_CONFIG, "rank %d: TNT_TIMELINE:"
                                     " cannot write %s: %s; set it to a "
                                     "writable path prefix", comm->rank,
                                     tl->path, strerror(e));
        free(tl->ring);
        free(tl);
        return rc;
    }
    pthread_mutex_init(&tl->lock, NULL);
    pthread_mutex_init(&tl->wlock, NULL);
    tl->rank = comm->rank;
    tl->nranks = comm->nranks;
    tl->world_rank = comm->world_rank;
    snprintf(tl->comm_name, sizeof(tl->comm_name), "%s", comm->name);
    snprintf(tl->comm_how, sizeof(tl->comm_how), "%s", comm->how);
    tnt__comm_who(comm, tl->who, sizeof(tl->who));
    fputs("{\"traceEvents\":[\n", tl->f);
    comm->tl_pending = tl;
    return TNT_SUCCESS;
}

void tnt__tl_record(struct tnt_timeline *tl, const tnt_tl_event_t *ev)
{
    pthread_mutex_lock(&tl->lock);
    uint32_t n = atomic_load_explicit(&tl->n, memory_order_relaxed);
    if (n == tl->cap) {
        tl->dropped++;
        pthread_mutex_unlock(&tl->lock);
        return;
    }
    tl->ring[(tl->head + n) % tl->cap] = *ev;
    atomic_store_explicit(&tl->n, n + 1, memory_order_relaxed);
    tl->recorded++;
    int kick = (n + 1 == tl->cap / 2);
    pthread_mutex_unlock(&tl->lock);
    /* Half full: wake the progress thread once to write it out. */
    if (kick && tl->kick)
        tl->kick(tl->kick_arg);
}

int tnt__tl_want_flush(const struct tnt_timeline *tl)
{
    return atomic_load_explicit(&tl->n, memory_order_relaxed) >=
           tl->cap / 2;
}

uint32_t tnt__tl_fusion_id(struct tnt_timeline *tl)
{
    return atomic_fetch_add(&tl->fusions, 1);
}

/* The transports a collective's messages use, as a mask by position. */
static unsigned coll_tpmask(const struct tnt_comm *comm,
                            const struct tnt_request *req)
{
    if (req->onhost.algo)
        return 1u << comm->net.area_tpi;
    unsigned mask = 0;
    for (uint32_t i = 0; req->sched && i < req->sched->nops; i++) {
        const tnt_sop_t *op = &req->sched->ops[i];
        if ((op->kind == TNT_SOP_SEND || op->kind == TNT_SOP_RECV) &&
            op->peer >= 0 && op->peer < comm->nranks)
            mask |= 1u << comm->peers[op->peer].tpi;
    }
    return mask;
}

void tnt__tl_coll(struct tnt_comm *comm, const struct tnt_request *req)
{
    tnt_tl_event_t ev = {0};
    ev.type = TNT_TL_COLL;
    ev.t[0] = req->tl.post;
    ev.t[1] = req->tl.start ? req->tl.start : req->tl.post;
    ev.t[2] = tnt__now();
    ev.seq = req->seq;
    ev.count = req->args.count;
    ev.bytes = (uint64_t)req->args.count * req->args.esize;
    ev.result = req->result;
    ev.root = req->args.root;
    ev.tid = req->tl.tid;
    ev.kind = (uint8_t)req->args.kind;
    ev.dtype = (uint8_t)req->args.dtype;
    ev.op = (uint8_t)req->args.op;
    ev.algo = (uint8_t)req->algo;
    ev.tpmask = (uint8_t)coll_tpmask(comm, req);
    tnt__tl_record(comm->timeline, &ev);
}

void tnt__tl_note_bucket(struct tnt_timeline *tl, uint32_t fusion,
                         uint32_t bucket, const char *const *names,
                         size_t n)
{
    size_t len = 64;
    for (size_t i = 0; i < n; i++)
        len += 2 * strlen(names[i]) + 4;
    struct tnt_tl_note *note = malloc(sizeof(*note) + len);
    if (!note) {
        pthread_mutex_lock(&tl->lock);
        tl->dropped++;
        pthread_mutex_unlock(&tl->lock);
        return;
    }
    note->t = tnt__now();
    note->tid = tnt__tl_tid();
    note->fusion = fusion;
    note->bucket = bucket;
    char *p = note->tensors;
    *p++ = '[';
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p += tnt__tl_json_str(p, names[i]);
    }
    *p++ = ']';
    *p = 0;
    pthread_mutex_lock(&tl->lock);
    note->next = NULL;
    *tl->notes_tail = note;
    tl->notes_tail = &note->next;
    pthread_mutex_unlock(&tl->lock);
}

/* ---- closing ---------------------------------------------------------- */

void tnt__tl_close(struct tnt_comm *comm)
{
    struct tnt_timeline *tl = comm->timeline ? comm->timeline
                                             : comm->tl_pending;
    comm->timeline = comm->tl_pending = NULL;
    if (!tl)
        return;
    tnt__tl_flush(tl);
    tnt__tl_write_footer(tl);
    if (fclose(tl->f) != 0)
        TNT_LOG_WARN("rank %d: TNT_TIMELINE: writing %s failed: %s",
                     tl->rank, tl->path, strerror(errno));
    else
        TNT_LOG_INFO("rank %d: timeline written to %s (%" PRIu64 " events, "
                     "%" PRIu64 " dropped)", tl->rank, tl->path, tl->recorded,
                     tl->dropped);
    while (tl->notes) {
        struct tnt_tl_note *nt = tl->notes;
        tl->notes = nt->next;
        free(nt);
    }
    pthread_mutex_destroy(&tl->lock);
    pthread_mutex_destroy(&tl->wlock);
    free(tl->ring);
    free(tl);
}
