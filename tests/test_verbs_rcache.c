/*
 * Unit tests of the verbs registration cache against a fake registrar
 * that records every registration: covering lookups, merging of
 * overlapping and adjacent ranges, invalidation, LRU eviction under a
 * byte limit, that a region in use is never deregistered, and pinned
 * regions (tnt_mem_alloc's memory).
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "transport/verbs/verbs_rcache.h"

#define FAKE_MAX 64

typedef struct fake_mr {
    uintptr_t start;
    size_t len;
    int live;
} fake_mr_t;

typedef struct fake {
    fake_mr_t mr[FAKE_MAX];
    int n, live, fail_next;
} fake_t;

static int fake_reg(void *arg, void *addr, size_t len, void **handle)
{
    fake_t *f = arg;
    if (f->fail_next || f->n == FAKE_MAX) {
        f->fail_next = 0;
        return -1;
    }
    f->mr[f->n] = (fake_mr_t){(uintptr_t)addr, len, 1};
    *handle = &f->mr[f->n++];
    f->live++;
    return 0;
}

static void fake_dereg(void *arg, void *handle)
{
    fake_t *f = arg;
    fake_mr_t *m = handle;
    TH_CHECK(m->live, "double deregistration of %#lx",
             (unsigned long)m->start);
    m->live = 0;
    f->live--;
}

static fake_t g_fake;
static const uintptr_t BASE = 0x10000000u;
#define PG 4096u

static void setup(vb_rcache_t *rc, size_t limit, int keep)
{
    memset(&g_fake, 0, sizeof(g_fake));
    vb_rcache_ops_t ops = {fake_reg, fake_dereg, &g_fake};
    tnt__vb_rcache_init(rc, &ops, limit, keep);
    rc->page = PG; /* fixed, whatever the host's page size */
}

static void *A(uintptr_t off)
{
    return (void *)(BASE + off);
}

static void test_lookup_and_cover(void)
{
    vb_rcache_t rc;
    setup(&rc, 1 << 20, 1);
    vb_region_t *a = tnt__vb_rcache_get(&rc, A(100), 5000);
    TH_CHECK(a && a->start == BASE && a->end == BASE + 2 * PG,
             "region not page aligned around the request");
    vb_region_t *b = tnt__vb_rcache_get(&rc, A(PG + 7), 10);
    TH_CHECK(b == a && a->refs == 2 && g_fake.n == 1,
             "a covered lookup registered again (%d registrations)",
             g_fake.n);
    tnt__vb_rcache_put(&rc, b);
    tnt__vb_rcache_put(&rc, a);
    TH_CHECK(g_fake.live == 1, "unused region not kept in the cache");
    TH_CHECK(tnt__vb_rcache_get(&rc, A(0), 0) == a, "zero-length lookup "
             "inside a region missed it");
    tnt__vb_rcache_put(&rc, a);
    tnt__vb_rcache_destroy(&rc);
    TH_CHECK(g_fake.live == 0, "destroy left %d registrations", g_fake.live);
}

static void test_merge_overlap_and_adjacent(void)
{
    vb_rcache_t rc;
    setup(&rc, 1 << 20, 1);
    vb_region_t *a = tnt__vb_rcache_get(&rc, A(0), 2 * PG);
    vb_region_t *b = tnt__vb_rcache_get(&rc, A(4 * PG), PG);
    /* Overlaps a, touches b: one region from 0 to 5 pages. */
    vb_region_t *c = tnt__vb_rcache_get(&rc, A(PG), 3 * PG);
    TH_CHECK(c && c->start == BASE && c->end == BASE + 5 * PG,
             "merged region is [%#lx, %#lx)", (unsigned long)c->start,
             (unsigned long)c->end);
    TH_CHECK(g_fake.live == 3, "merged-away regions in use were "
             "deregistered (%d live)", g_fake.live);
    tnt__vb_rcache_put(&rc, a);
    TH_CHECK(g_fake.live == 2 && !g_fake.mr[0].live,
             "merged-away region not released by its last put");
    TH_CHECK(tnt__vb_rcache_get(&rc, A(4 * PG), 10) == c,
             "lookup found a merged-away region");
    tnt__vb_rcache_put(&rc, c);
    tnt__vb_rcache_put(&rc, b);
    tnt__vb_rcache_put(&rc, c);
    TH_CHECK(g_fake.live == 1 && rc.head == c && !rc.head->next,
             "cache should hold exactly the merged region");
    tnt__vb_rcache_destroy(&rc);
    TH_CHECK(g_fake.live == 0, "destroy left registrations");
}

static void test_invalidate(void)
{
    vb_rcache_t rc;
    setup(&rc, 1 << 20, 1);
    vb_region_t *a = tnt__vb_rcache_get(&rc, A(0), PG);
    vb_region_t *b = tnt__vb_rcache_get(&rc, A(8 * PG), PG);
    tnt__vb_rcache_put(&rc, b);
    /* Overlaps both: the unused one goes now, the used one at its put. */
    tnt__vb_rcache_invalidate(&rc, A(PG - 1), 8 * PG);
    TH_CHECK(g_fake.live == 1 && g_fake.mr[0].live && !g_fake.mr[1].live,
             "invalidation deregistered a region in use or kept a free one");
    vb_region_t *a2 = tnt__vb_rcache_get(&rc, A(0), PG);
    TH_CHECK(a2 && a2 != a && g_fake.n == 3,
             "lookup after invalidation returned the stale region");
    tnt__vb_rcache_put(&rc, a);
    TH_CHECK(!g_fake.mr[0].live, "stale region survived its last put");
    /* Not overlapping: untouched. */
    tnt__vb_rcache_invalidate(&rc, A(PG), PG);
    TH_CHECK(g_fake.mr[2].live, "invalidation of an adjacent range hit");
    tnt__vb_rcache_put(&rc, a2);
    tnt__vb_rcache_destroy(&rc);
    TH_CHECK(g_fake.live == 0, "destroy left registrations");
}

static void test_lru_eviction_limit(void)
{
    vb_rcache_t rc;
    setup(&rc, 3 * PG, 1);
    vb_region_t *r[5];
    for (int i = 0; i < 4; i++) {
        r[i] = tnt__vb_rcache_get(&rc, A((uintptr_t)i * 4 * PG), PG);
        tnt__vb_rcache_put(&rc, r[i]);
    }
    /* 4 pages cached with a limit of 3: the oldest (0) went. */
    TH_CHECK(!g_fake.mr[0].live && g_fake.live == 3 &&
             rc.cached_bytes == 3 * PG, "LRU eviction: %d live, %zu bytes",
             g_fake.live, rc.cached_bytes);
    /* Touch 1, then add another: 2 is now the oldest. */
    tnt__vb_rcache_put(&rc, tnt__vb_rcache_get(&rc, A(4 * PG), 1));
    r[4] = tnt__vb_rcache_get(&rc, A(20 * PG), PG);
    TH_CHECK(g_fake.mr[1].live && !g_fake.mr[2].live,
             "eviction ignored recency");
    /* Regions in use are never evicted, even over the limit. */
    vb_region_t *big = tnt__vb_rcache_get(&rc, A(40 * PG), 10 * PG);
    TH_CHECK(big && g_fake.mr[4].live && g_fake.mr[5].live,
             "a region in use was evicted");
    tnt__vb_rcache_put(&rc, r[4]);
    tnt__vb_rcache_put(&rc, big);
    TH_CHECK(rc.cached_bytes <= 3 * PG, "over the limit after puts: %zu",
             rc.cached_bytes);
    tnt__vb_rcache_destroy(&rc);
    TH_CHECK(g_fake.live == 0, "destroy left registrations");
}

static void test_no_keep_and_failure(void)
{
    vb_rcache_t rc;
    setup(&rc, 1 << 20, 0);
    vb_region_t *a = tnt__vb_rcache_get(&rc, A(0), PG);
    vb_region_t *b = tnt__vb_rcache_get(&rc, A(0), 10);
    TH_CHECK(a == b, "shared use not found with caching off");
    tnt__vb_rcache_put(&rc, a);
    TH_CHECK(g_fake.live == 1, "deregistered while still in use");
    tnt__vb_rcache_put(&rc, b);
    TH_CHECK(g_fake.live == 0 && rc.head == NULL,
             "caching off kept an unused registration");
    g_fake.fail_next = 1;
    TH_CHECK(tnt__vb_rcache_get(&rc, A(0), PG) == NULL,
             "failed registration returned a region");
    TH_CHECK(tnt__vb_rcache_get(&rc, (void *)(UINTPTR_MAX - 10), 100) ==
             NULL, "wrapping range accepted");
    /* Destroy with a region in use: deregistered at the later put. */
    vb_region_t *c = tnt__vb_rcache_get(&rc, A(0), PG);
    tnt__vb_rcache_destroy(&rc);
    TH_CHECK(g_fake.live == 1, "destroy deregistered a region in use");
    tnt__vb_rcache_put(&rc, c);
    TH_CHECK(g_fake.live == 0, "region in use at destroy leaked");
}

/* tnt_mem_alloc's memory (reg_mem/dereg_mem): registered once, found by
 * every lookup inside it with caching off, never merged away by a lookup
 * beside it, and gone for good at the unpin, also while in use. */
static void test_pinned(void)
{
    for (int keep = 0; keep <= 1; keep++) {
        vb_rcache_t rc;
        setup(&rc, 1 << 20, keep);
        /* A stale cached region where the new allocation lands. */
        if (keep) {
            vb_region_t *old = tnt__vb_rcache_get(&rc, A(PG), PG);
            tnt__vb_rcache_put(&rc, old);
        }
        int before = g_fake.n;
        vb_region_t *p = tnt__vb_rcache_pin(&rc, A(PG), 4 * PG);
        TH_CHECK(p && p->start == BASE + PG && p->end == BASE + 5 * PG &&
                 g_fake.n == before + 1, "keep %d: pin did not register "
                 "its range", keep);
        TH_CHECK(g_fake.live == 1, "keep %d: a stale region over new "
                 "memory survived the pin (%d live)", keep, g_fake.live);
        /* Messages in it, one after another: no new registration. */
        for (int i = 0; i < 5; i++) {
            vb_region_t *m = tnt__vb_rcache_get(&rc, A(PG + 100 * (size_t)i),
                                                3 * PG);
            TH_CHECK(m == p, "keep %d: lookup %d inside pinned memory "
                     "missed it", keep, i);
            tnt__vb_rcache_put(&rc, m);
        }
        TH_CHECK(g_fake.n == before + 1, "keep %d: %d registrations for "
                 "a pinned range (1 expected)", keep, g_fake.n - before);
        /* A lookup overlapping its end and the next page: a region of
         * its own; the pinned one stays found. */
        vb_region_t *side = tnt__vb_rcache_get(&rc, A(4 * PG), 2 * PG);
        TH_CHECK(side && side != p && p->cached && !side->pinned,
                 "keep %d: a lookup beside pinned memory merged it", keep);
        tnt__vb_rcache_put(&rc, side);
        vb_region_t *again = tnt__vb_rcache_get(&rc, A(2 * PG), 10);
        TH_CHECK(again == p, "keep %d: pinned region lost after a lookup "
                 "beside it", keep);
        /* Unpin while a message still uses it: deregistered at its put,
         * and no later lookup finds a region over the freed range. */
        tnt__vb_rcache_unpin(&rc, p);
        TH_CHECK(!p->cached, "keep %d: unpinned region still findable",
                 keep);
        int live = g_fake.live;
        tnt__vb_rcache_put(&rc, again);
        TH_CHECK(g_fake.live == live - 1, "keep %d: unpinned region in "
                 "use not deregistered at its last put", keep);
        for (vb_region_t *r = rc.head; r; r = r->next)
            TH_CHECK(!(r->start < BASE + 5 * PG && BASE + PG < r->end),
                     "keep %d: a region over freed memory survived the "
                     "unpin", keep);
        /* (p is freed now: compare registrations, not pointers.) */
        int regs = g_fake.n;
        vb_region_t *n = tnt__vb_rcache_get(&rc, A(2 * PG), 10);
        TH_CHECK(n && g_fake.n == regs + 1 && n->handle ==
                 &g_fake.mr[g_fake.n - 1] && g_fake.mr[g_fake.n - 1].live,
                 "keep %d: no fresh registration after the unpin", keep);
        tnt__vb_rcache_put(&rc, n);
        /* A failed pin returns NULL (the transport then registers per
         * message). */
        g_fake.fail_next = 1;
        TH_CHECK(tnt__vb_rcache_pin(&rc, A(20 * PG), PG) == NULL,
                 "keep %d: failed pin returned a region", keep);
        /* A range whose page rounding would wrap: refused before any
         * registration, as by a lookup. */
        regs = g_fake.n;
        TH_CHECK(tnt__vb_rcache_pin(&rc, (void *)(UINTPTR_MAX - 10), 100) ==
                 NULL && g_fake.n == regs, "keep %d: wrapping pin "
                 "accepted", keep);
        /* nregs counts the registrations made, failed ones not. */
        TH_CHECK(rc.nregs == (size_t)g_fake.n, "keep %d: nregs %zu but %d "
                 "registrations", keep, rc.nregs, g_fake.n);
        /* A pin of length 0 covers one page, as a lookup's does. */
        vb_region_t *z = tnt__vb_rcache_pin(&rc, A(30 * PG + 5), 0);
        TH_CHECK(z && z->pinned && z->refs == 1 && z->start ==
                 BASE + 30 * PG && z->end == BASE + 31 * PG,
                 "keep %d: pin of 0 bytes is not one pinned page", keep);
        tnt__vb_rcache_unpin(&rc, z);
        tnt__vb_rcache_destroy(&rc);
        TH_CHECK(g_fake.live == 0, "keep %d: %d registrations left",
                 keep, g_fake.live);
    }
}

static const th_test_def_t k_tests[] = {
    {"verbs_rcache", "lookup_and_cover", test_lookup_and_cover},
    {"verbs_rcache", "merge", test_merge_overlap_and_adjacent},
    {"verbs_rcache", "invalidate", test_invalidate},
    {"verbs_rcache", "lru_eviction", test_lru_eviction_limit},
    {"verbs_rcache", "no_keep_and_failure", test_no_keep_and_failure},
    {"verbs_rcache", "pinned", test_pinned},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
