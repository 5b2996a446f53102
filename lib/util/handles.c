/*
 * The set of live handles (util/handles.h): a hash table of pointers with
 * linear probing, at most half full, under one mutex; removal shifts the
 * run that follows back, so no tombstones pile up. Emptied, it frees its
 * table (a program that frees every handle leaves nothing allocated).
 */
#include <stdlib.h>

#include "util/handles.h"

static size_t home(const tnt_handles_t *s, const void *h)
{
    uint64_t x = (uint64_t)(uintptr_t)h;
    x = (x >> 4) * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return (size_t)(x >> 32) & (s->cap - 1);
}

/* The slot of h, or of the empty place where it would go. Lock held,
 * cap > 0. */
static size_t find(const tnt_handles_t *s, const void *h)
{
    size_t i = home(s, h);
    while (s->slots[i] && s->slots[i] != h)
        i = (i + 1) & (s->cap - 1);
    return i;
}

/* Room for `want` handles at most half full. Lock held. */
static int grow(tnt_handles_t *s, size_t want)
{
    if (want * 2 <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 16;
    while (want * 2 > cap)
        cap *= 2;
    const void **old = s->slots;
    size_t old_cap = s->cap;
    const void **slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return -1;
    s->slots = slots;
    s->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            s->slots[find(s, old[i])] = old[i];
    free(old);
    return 0;
}

int tnt__handles_reserve(tnt_handles_t *s)
{
    pthread_mutex_lock(&s->lock);
    int rc = grow(s, s->n + s->reserved + 1);
    if (rc == 0)
        s->reserved++;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void tnt__handles_commit(tnt_handles_t *s, const void *h)
{
    pthread_mutex_lock(&s->lock);
    s->reserved--;
    size_t i = find(s, h);
    if (!s->slots[i]) {
        s->slots[i] = h;
        s->n++;
    }
    pthread_mutex_unlock(&s->lock);
}

/* Free the table once nothing is in it or promised. Lock held. */
static void shrink_if_empty(tnt_handles_t *s)
{
    if (s->n == 0 && s->reserved == 0) {
        free(s->slots);
        s->slots = NULL;
        s->cap = 0;
    }
}

void tnt__handles_cancel(tnt_handles_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->reserved--;
    shrink_if_empty(s);
    pthread_mutex_unlock(&s->lock);
}

int tnt__handles_add(tnt_handles_t *s, const void *h)
{
    if (tnt__handles_reserve(s) != 0)
        return -1;
    tnt__handles_commit(s, h);
    return 0;
}

int tnt__handles_remove(tnt_handles_t *s, const void *h)
{
    int found = 0;
    pthread_mutex_lock(&s->lock);
    if (h && s->cap) {
        size_t i = find(s, h);
        if (s->slots[i]) {
            found = 1;
            s->n--;
            __atomic_add_fetch(&s->gen, 1, __ATOMIC_RELEASE);
            /* Shift back the entries of the run after i that may sit
             * there: those whose home is not cyclically in (i, j]. */
            size_t j = i;
            for (;;) {
                s->slots[i] = NULL;
                for (;;) {
                    j = (j + 1) & (s->cap - 1);
                    if (!s->slots[j])
                        goto done;
                    size_t k = home(s, s->slots[j]);
                    if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                        continue;
                    break;
                }
                s->slots[i] = s->slots[j];
                i = j;
            }
        done:
            shrink_if_empty(s);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

int tnt__handles_find(tnt_handles_t *s, const void *h,
                      tnt_handle_seen_t *seen)
{
    int found = 0;
    pthread_mutex_lock(&s->lock);
    if (h && s->cap)
        found = s->slots[find(s, h)] != NULL;
    if (found) {
        seen->h = h;
        seen->gen = __atomic_load_n(&s->gen, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}
