/*
 * The timeline trace (TNT_TIMELINE, docs/timeline.md): each rank records
 * fixed-size events into a bounded ring and writes them, in the Chrome
 * trace-event format, to its own file.
 *
 * Cost rule: with the variable unset comm->timeline is NULL and every
 * recording site is one branch on that pointer (no clock read, no
 * allocation). Set, recording is a clock read and a copy into the ring
 * under its own small lock (never comm->group->lock, never file I/O); the
 * progress thread writes the ring out once it is half full, the rest is
 * written at tnt_comm_free. A full ring drops events and counts them.
 */
#ifndef TNT_CORE_TIMELINE_H
#define TNT_CORE_TIMELINE_H

#include <stdint.h>

#include "tnt/tnt.h"

struct tnt_comm;
struct tnt_request;
struct tnt_timeline;

enum tnt_tl_type {
    TNT_TL_COLL = 1,  /* t: post, start, end */
    TNT_TL_READY,     /* t[0]: a fusion tensor reported ready */
    TNT_TL_PACK,      /* t: begin, end of packing a bucket */
    TNT_TL_BUCKET,    /* t: first ready of its tensors, posted, finished */
    TNT_TL_WAIT_ALL   /* t: entry, return of tnt_fusion_wait_all */
};

/* Lanes (Chrome "tid"): the progress thread, then application threads
 * by first use (process-wide), and one lane per fusion bucket. */
#define TNT_TL_TID_PROGRESS 1
#define TNT_TL_TID_BUCKET0 1000

/* One event; fixed size so that recording copies and never allocates. */
typedef struct tnt_tl_event {
    double t[3];               /* tnt__now() times, by type (above) */
    uint64_t seq;              /* COLL, BUCKET, PACK: the collective */
    uint64_t count, bytes;
    int32_t result, root;
    uint32_t fusion, bucket, tensor, iter;
    uint32_t tid;
    uint8_t type, kind, dtype, op, algo, tpmask;
    char name[42];             /* READY: the tensor; BUCKET: its first
                                  and last tensors */
} tnt_tl_event_t;

/** If TNT_TIMELINE is set: open this rank's file and prepare the ring
 *  (comm->timeline stays NULL until tnt__tl_start). Called at creation,
 *  after the parameters are loaded; an unwritable path is an error. */
tnt_result_t tnt__tl_open(struct tnt_comm *comm);
/** Measure this rank's clock offset to rank 0 with a few exchanges over
 *  the communicator (timeline_sync.c), then turn recording on. Every
 *  rank must call it (the same TNT_TIMELINE setting on every rank). */
tnt_result_t tnt__tl_start(struct tnt_comm *comm);
/** Write what is left, the metadata, close the file, free. */
void tnt__tl_close(struct tnt_comm *comm);
/** The progress thread: the ring is half full, write it out (takes
 *  neither comm->group->lock nor blocks recording while writing). */
int tnt__tl_want_flush(const struct tnt_timeline *tl);
void tnt__tl_flush(struct tnt_timeline *tl);
/** This thread is comm's progress thread (its lane). */
void tnt__tl_is_progress_thread(void);
/** The calling thread's lane. */
uint32_t tnt__tl_tid(void);
/** Copy ev into the ring (or count it dropped). */
void tnt__tl_record(struct tnt_timeline *tl, const tnt_tl_event_t *ev);
/** A collective finished (engine.c, lock held): one COLL event. */
void tnt__tl_coll(struct tnt_comm *comm, const struct tnt_request *req);
/** A number for a new fusion context, and a plan event per bucket that
 *  names all its tensors (setup time: allocates). */
uint32_t tnt__tl_fusion_id(struct tnt_timeline *tl);
void tnt__tl_note_bucket(struct tnt_timeline *tl, uint32_t fusion,
                         uint32_t bucket, const char *const *names,
                         size_t n);

#endif /* TNT_CORE_TIMELINE_H */
