/*
 * The timeline's state, shared by timeline.c (the ring), timeline_write.c
 * (the file) and timeline_sync.c (the clock offset).
 */
#ifndef TNT_CORE_TIMELINE_INTERNAL_H
#define TNT_CORE_TIMELINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "core/stats.h"
#include "core/timeline.h"

/* The ring: 16384 events of 128 bytes, 2 MiB per rank. The progress
 * thread writes it out from half full; a rank that records faster than
 * that drops events (counted in the file's metadata). */
#define TNT_TL_RING_EVENTS 16384u

/* A bucket's plan: its tensors' names, written as one event. */
struct tnt_tl_note {
    struct tnt_tl_note *next;
    double t;
    uint32_t tid, fusion, bucket;
    char tensors[];            /* a JSON array of strings */
};

struct tnt_timeline {
    pthread_mutex_t lock;      /* the ring, dropped, recorded, notes */
    tnt_tl_event_t *ring;
    uint32_t cap, head;
    atomic_uint n;             /* events in the ring */
    uint64_t dropped, recorded;
    struct tnt_tl_note *notes, **notes_tail;
    atomic_uint fusions;
    void (*kick)(void *arg);   /* wakes the progress thread */
    void *kick_arg;

    /* The file: one writer at a time (wlock), never under comm->group->lock. */
    pthread_mutex_t wlock;
    FILE *f;
    char path[4096];
    uint64_t written;          /* events written */
    uint64_t lanes[2];         /* lanes 1..127 seen: thread_name events */
    uint32_t max_bucket_lane;  /* 1 + the highest bucket lane seen */
    int rank, nranks;
    /* The communicator's name and this rank's world rank (comm_name.h):
     * the process's name in the trace, and in its metadata. */
    char comm_name[48], comm_how[96], who[256];
    int world_rank;
    char tp_names[TNT_STATS_TP_MAX][16]; /* transport names by position */

    /* Clock alignment (timeline_sync.c): a local time t is written as
     * (t - offset - origin) microseconds, in rank 0's time base counted
     * from rank 0's clock at the end of the alignment. */
    double offset_s, err_s, origin_s, rtt_min_s;
    int rounds;
};

/** Write the ring's events and the notes to the file. */
void tnt__tl_flush(struct tnt_timeline *tl);
/** Write the lane names and the metadata, closing the JSON object. */
void tnt__tl_write_footer(struct tnt_timeline *tl);
/** Write s as a JSON string (quotes included) at p, which has room for
 *  2 * strlen(s) + 3 bytes; returns the bytes written (no NUL counted,
 *  one written). */
size_t tnt__tl_json_str(char *p, const char *s);

#endif /* TNT_CORE_TIMELINE_INTERNAL_H */
