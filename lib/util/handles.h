/*
 * A set of live handles: the pointers the library handed out and has not
 * taken back (communicators, requests). A public call checks its handle
 * here before touching what it points to, so a freed, never created or
 * doubly freed handle is an error, never a read of freed memory. The set
 * never dereferences a handle.
 *
 * Lookups of the handle a thread found live last cost no lock: each
 * removal bumps the set's generation, and a thread's memory of its last
 * live handle (tnt_handle_seen_t, thread-local in the caller) holds while
 * the generation has not changed. A handle that leaves and comes back
 * (a recycled request) is looked up again.
 */
#ifndef TNT_UTIL_HANDLES_H
#define TNT_UTIL_HANDLES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tnt_handles {
    pthread_mutex_t lock;
    const void **slots;        /* open addressing, NULL: empty */
    size_t cap;                /* a power of two, or 0 */
    size_t n;                  /* handles in the set */
    size_t reserved;           /* places promised to tnt__handles_commit */
    uint64_t gen;              /* atomic: bumped by every removal */
} tnt_handles_t;

#define TNT_HANDLES_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0}

/** A thread's memory of the last handle it found live in one set. */
typedef struct tnt_handle_seen {
    const void *h;
    uint64_t gen;
} tnt_handle_seen_t;

/** Promise a place for one handle, so that the tnt__handles_commit that
 *  follows cannot fail (a request is registered after its collective is
 *  posted). 0, or -1 when out of memory. */
int tnt__handles_reserve(tnt_handles_t *s);
/** Add h into the place reserved. */
void tnt__handles_commit(tnt_handles_t *s, const void *h);
/** Give a reserved place back unused. */
void tnt__handles_cancel(tnt_handles_t *s);
/** Reserve and commit: 0, or -1 when out of memory. */
int tnt__handles_add(tnt_handles_t *s, const void *h);
/** Remove h; 1 if it was live, 0 if not (nothing changes then). */
int tnt__handles_remove(tnt_handles_t *s, const void *h);
/** tnt__handles_live's look-up under the lock. */
int tnt__handles_find(tnt_handles_t *s, const void *h,
                      tnt_handle_seen_t *seen);
/** 1 if h is live; *seen is the calling thread's memory for this set.
 *  Inline: the handle a thread checked last costs a load and a compare
 *  (every small blocking collective checks its communicator). */
static inline int tnt__handles_live(tnt_handles_t *s, const void *h,
                                    tnt_handle_seen_t *seen)
{
    if (h && h == seen->h &&
        __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) == seen->gen)
        return 1;
    return tnt__handles_find(s, h, seen);
}

#endif /* TNT_UTIL_HANDLES_H */
