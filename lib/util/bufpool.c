/*
 * The buffer cache (see bufpool.h). Capacities are rounded up (powers of
 * two up to 1 MiB, then whole MiB) so that buffers of similar collectives
 * fit each other; a request takes a cached buffer of its own size class,
 * else the smallest larger one.
 */
#include <stdint.h>
#include <stdlib.h>

#include "util/bufpool.h"

void tnt__bufpool_init(tnt_bufpool_t *p, size_t limit)
{
    p->n = 0;
    p->cached = 0;
    p->limit = limit;
}

static size_t round_cap(size_t bytes)
{
    const size_t mib = (size_t)1 << 20;
    if (bytes > mib)
        return bytes > SIZE_MAX - mib ? bytes : (bytes + mib - 1) & ~(mib - 1);
    size_t c = 4096;
    while (c < bytes)
        c *= 2;
    return c;
}

void *tnt__bufpool_get(tnt_bufpool_t *p, size_t bytes, size_t *cap)
{
    /* A buffer of the request's own size class first: taking a larger
     * one would leave the next large request without a fit. */
    size_t want = round_cap(bytes);
    int best = -1;
    for (int i = 0; i < p->n; i++) {
        if (p->cap[i] < bytes)
            continue;
        if (p->cap[i] == want) {
            best = i;
            break;
        }
        if (best < 0 || p->cap[i] < p->cap[best])
            best = i;
    }
    if (best >= 0) {
        void *b = p->buf[best];
        *cap = p->cap[best];
        p->cached -= p->cap[best];
        p->n--;
        p->buf[best] = p->buf[p->n];
        p->cap[best] = p->cap[p->n];
        return b;
    }
    *cap = want;
    return malloc(*cap);
}

void tnt__bufpool_put(tnt_bufpool_t *p, void *buf, size_t cap)
{
    if (!buf)
        return;
    if (p->n == TNT_BUFPOOL_SLOTS || cap > p->limit - p->cached) {
        /* Full: drop the smallest cached buffer if this one is larger. */
        int small = -1;
        for (int i = 0; i < p->n; i++)
            if (small < 0 || p->cap[i] < p->cap[small])
                small = i;
        if (small < 0 || p->cap[small] >= cap ||
            cap > p->limit - (p->cached - p->cap[small])) {
            free(buf);
            return;
        }
        free(p->buf[small]);
        p->cached -= p->cap[small];
        p->buf[small] = buf;
        p->cap[small] = cap;
        p->cached += cap;
        return;
    }
    p->buf[p->n] = buf;
    p->cap[p->n] = cap;
    p->n++;
    p->cached += cap;
}

void tnt__bufpool_destroy(tnt_bufpool_t *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->buf[i]);
    p->n = 0;
    p->cached = 0;
}
