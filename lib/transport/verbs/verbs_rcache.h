/*
 * The verbs transport's registration cache: memory regions registered
 * with the NIC, keyed by address range, so that a buffer used by many
 * collectives is registered once (ibv_reg_mr pins pages and costs tens of
 * microseconds per megabyte).
 *
 * A lookup returns a cached region covering the whole requested range, or
 * registers a new one (page aligned). A new region that overlaps or
 * touches cached ones is merged with them into one larger registration;
 * the old ones leave the lookup structure and are deregistered once no
 * operation uses them. Every entry has a reference count: an entry in use
 * is never deregistered, whatever happens (eviction, invalidation, cache
 * teardown defers to the last put). Unused entries stay cached in LRU
 * order within a byte limit; `keep_unused = 0` turns caching off (an
 * entry goes away with its last user), which is what the transport uses
 * when it cannot learn that memory was freed (see docs/verbs.md).
 *
 * Pinned regions are the exception to "off means uncached": memory
 * whose lifetime the transport is told (tnt_mem_alloc's allocations,
 * through the transport interface's reg_mem and dereg_mem) is registered
 * once when allocated and found by every lookup inside it until it is
 * unpinned at free, with caching on or off. Nothing can go stale: the
 * memory cannot be freed without the unpin, which invalidates every
 * region over it. A pinned region is never merged into another (that
 * would end the registration the pin holds); a lookup that only partly
 * overlaps it registers a region of its own beside it.
 *
 * The registration itself sits behind two function pointers, so that the
 * tests run the cache against fakes. Entries live in a list: the transport
 * keeps tens of regions (a training job's gradient buffers), where a tree
 * would buy nothing.
 */
#ifndef TNT_TRANSPORT_VERBS_VERBS_RCACHE_H
#define TNT_TRANSPORT_VERBS_VERBS_RCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct vb_rcache_ops {
    /** Register [addr, addr+len); 0 and *handle set, or -1. */
    int (*reg)(void *arg, void *addr, size_t len, void **handle);
    void (*dereg)(void *arg, void *handle);
    void *arg;
} vb_rcache_ops_t;

typedef struct vb_region {
    uintptr_t start, end;      /* registered range, page aligned */
    void *handle;              /* what ops.reg returned (an ibv_mr) */
    unsigned refs;
    int cached;                /* still findable by lookups */
    int pinned;                /* by tnt__vb_rcache_pin: never merged */
    struct vb_region *prev, *next; /* LRU list, most recent first */
} vb_region_t;

typedef struct vb_rcache {
    vb_rcache_ops_t ops;
    size_t limit;           /* bytes of unused regions to keep */
    size_t page;
    int keep_unused;
    size_t cached_bytes;    /* all regions in the list */
    size_t nregs, nderegs;  /* counters for tests and DEBUG logs */
    vb_region_t *head, *tail;
} vb_rcache_t;

void tnt__vb_rcache_init(vb_rcache_t *rc, const vb_rcache_ops_t *ops,
                         size_t limit, int keep_unused);

/** A region covering [addr, addr+len) with a reference taken; NULL when
 *  registration fails (len 0 is treated as 1 byte). */
vb_region_t *tnt__vb_rcache_get(vb_rcache_t *rc, const void *addr,
                                size_t len);

/** Register [addr, addr+len) as a pinned region of its own, holding a
 *  reference until tnt__vb_rcache_unpin: the memory is new, so every
 *  cached region overlapping it is stale and invalidated first. NULL
 *  when registration fails. */
vb_region_t *tnt__vb_rcache_pin(vb_rcache_t *rc, const void *addr,
                                size_t len);

/** The pinned memory of r is about to be freed: drop the pin's
 *  reference and invalidate every region overlapping it (those in use go
 *  at their last put). */
void tnt__vb_rcache_unpin(vb_rcache_t *rc, vb_region_t *r);

/** Drop a reference taken by get. */
void tnt__vb_rcache_put(vb_rcache_t *rc, vb_region_t *r);

/** Memory in [addr, addr+len) is gone or changed: no lookup may return a
 *  region overlapping it again. Regions in use are deregistered by their
 *  last put. */
void tnt__vb_rcache_invalidate(vb_rcache_t *rc, const void *addr, size_t len);

/** Deregister every unused region; regions still in use go when put. */
void tnt__vb_rcache_destroy(vb_rcache_t *rc);

#endif /* TNT_TRANSPORT_VERBS_VERBS_RCACHE_H */
