/*
 * The registration cache (see verbs_rcache.h for the rules it keeps).
 */
#include <stdlib.h>
#include <unistd.h>

#include "transport/verbs/verbs_rcache.h"

void tnt__vb_rcache_init(vb_rcache_t *rc, const vb_rcache_ops_t *ops,
                         size_t limit, int keep_unused)
{
    rc->ops = *ops;
    rc->limit = limit;
    long pg = sysconf(_SC_PAGESIZE);
    rc->page = pg > 0 ? (size_t)pg : 4096;
    rc->keep_unused = keep_unused;
    rc->cached_bytes = 0;
    rc->nregs = rc->nderegs = 0;
    rc->head = rc->tail = NULL;
}

static void unlink_region(vb_rcache_t *rc, vb_region_t *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        rc->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        rc->tail = r->prev;
    r->prev = r->next = NULL;
    rc->cached_bytes -= r->end - r->start;
    r->cached = 0;
}

static void push_front(vb_rcache_t *rc, vb_region_t *r)
{
    r->prev = NULL;
    r->next = rc->head;
    if (rc->head)
        rc->head->prev = r;
    else
        rc->tail = r;
    rc->head = r;
    rc->cached_bytes += r->end - r->start;
    r->cached = 1;
}

static void release(vb_rcache_t *rc, vb_region_t *r)
{
    rc->ops.dereg(rc->ops.arg, r->handle);
    rc->nderegs++;
    free(r);
}

/* Take r out of the lookups; it goes now if unused, else at its last put. */
static void retire(vb_rcache_t *rc, vb_region_t *r)
{
    unlink_region(rc, r);
    if (r->refs == 0)
        release(rc, r);
}

/* Evict least recently used unused regions while over the byte limit. */
static void evict(vb_rcache_t *rc)
{
    vb_region_t *r = rc->tail;
    while (r && rc->cached_bytes > rc->limit) {
        vb_region_t *prev = r->prev;
        if (r->refs == 0)
            retire(rc, r);
        r = prev;
    }
}

/* [*start, *end): the whole pages holding [addr, addr+len), len 0
 * counting as 1 byte; -1 when the rounded range would wrap around the
 * address space (nothing can be registered there). */
static int page_range(const vb_rcache_t *rc, const void *addr, size_t len,
                      uintptr_t *start, uintptr_t *end)
{
    uintptr_t a = (uintptr_t)addr;
    if (len == 0)
        len = 1;
    if (a > UINTPTR_MAX - 2 * rc->page ||
        len > UINTPTR_MAX - 2 * rc->page - a)
        return -1;
    *start = a & ~(uintptr_t)(rc->page - 1);
    *end = (a + len + rc->page - 1) & ~(uintptr_t)(rc->page - 1);
    return 0;
}

/* A region for [start, end) registered through ops.reg, with one
 * reference, not yet in the list (the caller links it in once the
 * regions it replaces are gone); NULL when allocation or registration
 * fails, leaving the cache as it was. */
static vb_region_t *new_region(vb_rcache_t *rc, uintptr_t start,
                               uintptr_t end, int pinned)
{
    vb_region_t *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->start = start;
    n->end = end;
    if (rc->ops.reg(rc->ops.arg, (void *)start, end - start, &n->handle)
        != 0) {
        free(n);
        return NULL;
    }
    rc->nregs++;
    n->refs = 1;
    n->pinned = pinned;
    return n;
}

vb_region_t *tnt__vb_rcache_get(vb_rcache_t *rc, const void *addr,
                                size_t len)
{
    uintptr_t a = (uintptr_t)addr, start, end;
    if (page_range(rc, addr, len, &start, &end) != 0)
        return NULL;
    if (len == 0) /* as page_range counts it */
        len = 1;
    for (vb_region_t *r = rc->head; r; r = r->next)
        if (r->start <= a && a + len <= r->end) {
            unlink_region(rc, r);
            push_front(rc, r);
            r->refs++;
            return r;
        }
    /* Grow the new range over every region it overlaps or touches; one
     * pass may reach a region the previous extent missed, so repeat.
     * Pinned regions stay as they are. */
    for (int grown = 1; grown;) {
        grown = 0;
        for (vb_region_t *r = rc->head; r; r = r->next)
            if (!r->pinned && r->start <= end && start <= r->end &&
                (r->start < start || r->end > end)) {
                start = r->start < start ? r->start : start;
                end = r->end > end ? r->end : end;
                grown = 1;
            }
    }
    vb_region_t *n = new_region(rc, start, end, 0);
    if (!n)
        return NULL;
    /* The merged-away regions stay valid for their current users. */
    for (vb_region_t *r = rc->head, *next; r; r = next) {
        next = r->next;
        if (!r->pinned && r->start >= start && r->end <= end)
            retire(rc, r);
    }
    push_front(rc, n);
    evict(rc);
    return n;
}

vb_region_t *tnt__vb_rcache_pin(vb_rcache_t *rc, const void *addr,
                                size_t len)
{
    uintptr_t start, end;
    if (page_range(rc, addr, len, &start, &end) != 0)
        return NULL;
    tnt__vb_rcache_invalidate(rc, (void *)start, end - start);
    vb_region_t *n = new_region(rc, start, end, 1);
    if (!n)
        return NULL;
    push_front(rc, n);
    evict(rc);
    return n;
}

void tnt__vb_rcache_unpin(vb_rcache_t *rc, vb_region_t *r)
{
    if (!r || !r->pinned)
        return;
    uintptr_t start = r->start, end = r->end;
    r->pinned = 0;
    tnt__vb_rcache_put(rc, r);
    tnt__vb_rcache_invalidate(rc, (void *)start, end - start);
}

void tnt__vb_rcache_put(vb_rcache_t *rc, vb_region_t *r)
{
    if (!r || r->refs == 0)
        return;
    if (--r->refs > 0)
        return;
    if (!r->cached)
        release(rc, r);
    else if (!rc->keep_unused)
        retire(rc, r);
    else
        evict(rc);
}

void tnt__vb_rcache_invalidate(vb_rcache_t *rc, const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr;
    uintptr_t e = len > UINTPTR_MAX - a ? UINTPTR_MAX : a + len;
    for (vb_region_t *r = rc->head, *next; r; r = next) {
        next = r->next;
        if (r->start < e && a < r->end)
            retire(rc, r);
    }
}

void tnt__vb_rcache_destroy(vb_rcache_t *rc)
{
    for (vb_region_t *r = rc->head, *next; r; r = next) {
        next = r->next;
        retire(rc, r);
    }
}
