/*
 * Single-producer/single-consumer byte ring in shared memory, and the
 * sleep/wake flags around it (shm_ring.c). Pure memory operations: no
 * system calls, so it is unit-tested without processes.
 */
#ifndef TNT_TRANSPORT_SHM_SHM_RING_H
#define TNT_TRANSPORT_SHM_SHM_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/shm/shm_align.h"

/* Positions count bytes since the start and never wrap (2^64 bytes);
 * the data index is position % cap, cap a power of two. Producer and
 * consumer fields sit on separate pages (shm_align.h). */
typedef struct shm_ring {
    _Alignas(TNT_SHM_APART) _Atomic uint64_t tail; /* written by the producer */
    _Atomic uint32_t want_space;          /* producer waits for space */
    _Alignas(TNT_SHM_APART) _Atomic uint64_t head; /* written by the consumer */
    _Atomic uint32_t armed;               /* consumer waits for data */
    _Alignas(TNT_SHM_APART) unsigned char data[];
} shm_ring_t;

/** Bytes the producer may write now. */
size_t tnt__shm_ring_space(shm_ring_t *r, size_t cap);
/** Bytes the consumer may read now. */
size_t tnt__shm_ring_avail(shm_ring_t *r);
/** Write up to len bytes (as many as fit); returns how many. */
size_t tnt__shm_ring_put(shm_ring_t *r, size_t cap, const void *src,
                         size_t len);
/** Copy exactly len bytes without consuming them: 1, or 0 if fewer are
 *  there. */
int tnt__shm_ring_peek(shm_ring_t *r, size_t cap, void *dst, size_t len);
/** Read up to len bytes; returns how many. */
size_t tnt__shm_ring_get(shm_ring_t *r, size_t cap, void *dst, size_t len);

/** Producer, after its puts: 1 if the consumer was asleep and must be woken
 *  (the flag is cleared, so one wake-up per sleep). */
int tnt__shm_ring_wake_consumer(shm_ring_t *r);
/** Consumer, before sleeping: arm the flag; 1 if data arrived meanwhile
 *  (then it must not sleep; the flag is cleared again). */
int tnt__shm_ring_consumer_sleep(shm_ring_t *r);
/** Consumer that polls the ring instead of sleeping: clear the flag, so
 *  that the producer does not write the eventfd. It must call
 *  tnt__shm_ring_consumer_sleep again before it sleeps. */
void tnt__shm_ring_consumer_awake(shm_ring_t *r);
/** Consumer, after its gets: 1 if the producer waits for space and must be
 *  woken (flag cleared). */
int tnt__shm_ring_wake_producer(shm_ring_t *r);
/** Producer, when the ring is too full: ask to be woken; 1 if space
 *  appeared meanwhile (flag cleared, no sleep). */
int tnt__shm_ring_producer_sleep(shm_ring_t *r, size_t cap, size_t need);

#endif /* TNT_TRANSPORT_SHM_SHM_RING_H */
