/*
 * The shared-memory ring (see shm_ring.h). Each side publishes its
 * position with a release store and, once it has published all it will
 * for now, reads the other's flag after a full fence (the wake calls);
 * the sleeping side arms its flag before rechecking the position: of the
 * two, at least one sees the other (the Dekker pattern), so a wake-up is
 * never lost and nobody spins while idle. One fence per batch, not one
 * per position store: each full fence waits for the other core to give
 * up the line, and a small message used to pay five of them.
 */
#include <string.h>

#include "transport/shm/shm_ring.h"

size_t tnt__shm_ring_space(shm_ring_t *r, size_t cap)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    return cap - (size_t)(tail - head);
}

size_t tnt__shm_ring_avail(shm_ring_t *r)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    return (size_t)(tail - head);
}

/* Copy between the ring's data at position pos and a flat buffer, in at
 * most two pieces around the wrap. */
static void copy_out(const shm_ring_t *r, size_t cap, uint64_t pos,
                     void *dst, size_t len)
{
    size_t at = (size_t)(pos & (cap - 1));
    size_t first = len < cap - at ? len : cap - at;
    memcpy(dst, r->data + at, first);
    memcpy((unsigned char *)dst + first, r->data, len - first);
}

size_t tnt__shm_ring_put(shm_ring_t *r, size_t cap, const void *src,
                         size_t len)
{
    size_t space = tnt__shm_ring_space(r, cap);
    size_t n = len < space ? len : space;
    if (n == 0)
        return 0;
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    size_t at = (size_t)(tail & (cap - 1));
    size_t first = n < cap - at ? n : cap - at;
    memcpy(r->data + at, src, first);
    memcpy(r->data, (const unsigned char *)src + first, n - first);
    atomic_store_explicit(&r->tail, tail + n, memory_order_release);
    return n;
}

int tnt__shm_ring_peek(shm_ring_t *r, size_t cap, void *dst, size_t len)
{
    if (tnt__shm_ring_avail(r) < len)
        return 0;
    copy_out(r, cap, atomic_load_explicit(&r->head, memory_order_relaxed),
             dst, len);
    return 1;
}

size_t tnt__shm_ring_get(shm_ring_t *r, size_t cap, void *dst, size_t len)
{
    size_t avail = tnt__shm_ring_avail(r);
    size_t n = len < avail ? len : avail;
    if (n == 0)
        return 0;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    copy_out(r, cap, head, dst, n);
    atomic_store_explicit(&r->head, head + n, memory_order_release);
    return n;
}

int tnt__shm_ring_wake_consumer(shm_ring_t *r)
{
    /* Orders the tail stores before the flag's load (StoreLoad). */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load(&r->armed))
        return 0;
    return atomic_exchange(&r->armed, 0) != 0;
}

void tnt__shm_ring_consumer_awake(shm_ring_t *r)
{
    /* Read first: polling must not write the shared line every time. */
    if (atomic_load_explicit(&r->armed, memory_order_relaxed))
        atomic_store(&r->armed, 0);
}

int tnt__shm_ring_consumer_sleep(shm_ring_t *r)
{
    atomic_store(&r->armed, 1);
    if (atomic_load(&r->tail) == atomic_load(&r->head))
        return 0;
    atomic_store(&r->armed, 0);
    return 1;
}

int tnt__shm_ring_wake_producer(shm_ring_t *r)
{
    atomic_thread_fence(memory_order_seq_cst); /* head before the flag */
    if (!atomic_load(&r->want_space))
        return 0;
    return atomic_exchange(&r->want_space, 0) != 0;
}

int tnt__shm_ring_producer_sleep(shm_ring_t *r, size_t cap, size_t need)
{
    atomic_store(&r->want_space, 1);
    uint64_t head = atomic_load(&r->head);
    uint64_t tail = atomic_load(&r->tail);
    if (cap - (size_t)(tail - head) < need)
        return 0;
    atomic_store(&r->want_space, 0);
    return 1;
}
