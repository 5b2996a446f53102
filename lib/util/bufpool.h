/*
 * A small cache of large buffers (schedule scratch, early messages), kept
 * per communicator. Freshly allocated memory costs a page fault per 4 KiB
 * on first touch, which dominated large collectives (docs/performance.md,
 * "Buffer pool"); reusing
 * the buffers of the previous collective avoids that. Not thread-safe:
 * used under the communicator lock.
 */
#ifndef TNT_UTIL_BUFPOOL_H
#define TNT_UTIL_BUFPOOL_H

#include <stddef.h>

#define TNT_BUFPOOL_SLOTS 256

typedef struct tnt_bufpool {
    void *buf[TNT_BUFPOOL_SLOTS];
    size_t cap[TNT_BUFPOOL_SLOTS];
    int n;
    size_t cached;  /* bytes held in free buffers */
    size_t limit;   /* most bytes to keep cached */
} tnt_bufpool_t;

void tnt__bufpool_init(tnt_bufpool_t *p, size_t limit);
/** A buffer of at least `bytes` (capacity in *cap); NULL if out of
 *  memory. */
void *tnt__bufpool_get(tnt_bufpool_t *p, size_t bytes, size_t *cap);
/** Give a buffer back (kept if the cache has room, else freed). */
void tnt__bufpool_put(tnt_bufpool_t *p, void *buf, size_t cap);
void tnt__bufpool_destroy(tnt_bufpool_t *p);

#endif /* TNT_UTIL_BUFPOOL_H */
