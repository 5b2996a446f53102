/*
 * The schedule cache (see sched_cache.h): a hash table with open
 * addressing, looked up on every post.
 */
#include <stdlib.h>

#include "util/error.h"
#include "core/sched_cache.h"

void tnt__sched_cache_init(tnt_sched_cache_t *c)
{
    pthread_mutex_init(&c->lock, NULL);
    for (int i = 0; i < TNT_SCHED_CACHE_SLOTS; i++)
        c->e[i].sched = NULL;
    c->tick = 0;
}

/* Slots a lookup looks at, from the one its hash names. */
#define SCHED_PROBE 32

static int same_key(const tnt_coll_args_t *x, const tnt_coll_args_t *y)
{
    return x->kind == y->kind && x->dtype == y->dtype && x->op == y->op &&
           x->count == y->count && x->root == y->root &&
           x->rank == y->rank && x->nranks == y->nranks &&
           x->esize == y->esize && x->in_place == y->in_place &&
           x->segment_bytes == y->segment_bytes && x->topo == y->topo &&
           x->ready_min_bytes == y->ready_min_bytes;
}

static uint64_t key_hash(const tnt_coll_args_t *a, int algo)
{
    const uint64_t v[] = {(uint64_t)a->kind, (uint64_t)a->dtype,
                          (uint64_t)a->op, a->count, (uint64_t)a->root,
                          (uint64_t)a->rank, (uint64_t)a->nranks, a->esize,
                          (uint64_t)a->in_place, a->segment_bytes,
                          (uint64_t)(uintptr_t)a->topo, (uint64_t)algo};
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        h ^= v[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static void unref(tnt_sched_t *s)
{
    if (--s->refs == 0) {
        tnt__sched_destroy(s);
        free(s);
    }
}

tnt_result_t tnt__sched_cache_get(tnt_sched_cache_t *c,
                                  const tnt_coll_args_t *a, int algo,
                                  tnt_sched_t **out)
{
    uint64_t h = key_hash(a, algo);
    pthread_mutex_lock(&c->lock);
    c->tick++;
    /* Open addressing from the hash's slot: a lookup looks at a few
     * slots, not all of them (a scan of the whole table was a visible
     * part of a small blocking call; docs/performance.md, "A blocking
     * call's fixed cost"). Entries are replaced,
     * never removed, so no hole ever cuts a probe sequence short: the
     * first empty slot ends the search. A full run of SCHED_PROBE slots
     * gives up its least recently used entry. */
    int victim = -1;
    for (int k = 0; k < SCHED_PROBE; k++) {
        int i = (int)((h + (uint64_t)k) % TNT_SCHED_CACHE_SLOTS);
        tnt_sched_cache_entry_t *e = &c->e[i];
        if (!e->sched) {
            victim = i;
            break;
        }
        if (e->hash == h && e->algo == algo && same_key(&e->key, a)) {
            e->used = c->tick;
            e->sched->refs++;
            *out = e->sched;
            pthread_mutex_unlock(&c->lock);
            return TNT_SUCCESS;
        }
        if (victim < 0 || e->used < c->e[victim].used)
            victim = i;
    }
    pthread_mutex_unlock(&c->lock);

    /* Build outside the lock: large schedules take a while. */
    tnt_sched_t *s = malloc(sizeof(*s));
    if (!s)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory for a schedule");
    tnt_result_t rc = tnt__build_schedule(a, algo, s);
    if (rc != TNT_SUCCESS) {
        free(s);
        return rc;
    }
    s->refs = 2; /* the caller's and the cache's */
    pthread_mutex_lock(&c->lock);
    tnt_sched_cache_entry_t *e = &c->e[victim];
    if (e->sched)
        unref(e->sched);
    e->hash = h;
    e->key = *a;
    e->algo = algo;
    e->sched = s;
    e->used = ++c->tick;
    pthread_mutex_unlock(&c->lock);
    *out = s;
    return TNT_SUCCESS;
}

void tnt__sched_release(tnt_sched_cache_t *c, tnt_sched_t *s)
{
    if (!s)
        return;
    if (c)
        pthread_mutex_lock(&c->lock);
    unref(s);
    if (c)
        pthread_mutex_unlock(&c->lock);
}

void tnt__sched_cache_destroy(tnt_sched_cache_t *c)
{
    for (int i = 0; i < TNT_SCHED_CACHE_SLOTS; i++)
        if (c->e[i].sched)
            unref(c->e[i].sched);
    pthread_mutex_destroy(&c->lock);
}
