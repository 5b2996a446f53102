/*
 * The gradient-fusion plugin ABI (include/tnt/plugin.h) run by real forked
 * ranks over loopback sockets (see harness.h). Every rank registers the
 * same random tensor list (derived from a seed: 1..500 tensors of
 * 1 B..4 MiB, mixed dtypes), fills each tensor from bench/datagen.c and
 * reports it ready in its own random order, some of it from 2-4 threads
 * at once, with some tensors packed back to back in one allocation (the
 * in-place path), some in reverse order or with gaps, and some allocated
 * on their own (the packing path). Every tensor must then hold the result
 * of a plain allreduce, bitwise identical on all ranks; the per-tensor
 * callback must fire exactly once per tensor and iteration, with rc 0 and
 * the values already in place; tnt_fusion_wait() of a tensor must leave
 * its values in place before tnt_fusion_wait_all().
 *
 * Further suites: one context over 50 iterations (values and memory
 * layout changing every iteration; the sanitizer build checks leaks in
 * the children), plans that differ across ranks (TNT_ERR_MISMATCH on
 * every rank, naming the tensor), misuse (unknown tensors, NULL data,
 * double ready, missing tensors at wait_all, a communicator aborted in
 * the middle of an iteration), the defaults (TNT_FUSION_THRESHOLD) and
 * the plan as reported by tnt_fusion_bucket/num_buckets/describe, which
 * must agree with each other and with lib/fusion/plan.h.
 *
 * Usage: test_fusion [suite [test]] runs one suite or one test.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datagen.h"
#include "fusion/plan.h"
#include "harness.h"
#include "tnt/plugin.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_TENSORS 500
#define MAX_TENSOR_BYTES ((size_t)4 << 20)
#define HUGE_THRESHOLD (SIZE_MAX / 2)
#define ALIGN 64
/* Elements checked at each end of a tensor inside the callback: enough to
 * see whether its values are in place, cheap enough to run under the
 * library's lock. */
#define CB_SAMPLE 64

/* ---- deterministic randomness -------------------------------------------- */


static uint64_t mix(uint64_t a, uint64_t b, uint64_t c)
{
    th_rng_t r = {a ^ (b * UINT64_C(0xd6e8feb86659fd93)) ^
               (c * UINT64_C(0xa0761d6478bd642f))};
    th_rnd(&r);
    return th_rnd(&r);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory\n");
        abort();
    }
    return p;
}

static size_t align_up(size_t x)
{
    return (x + ALIGN - 1) / ALIGN * ALIGN;
}

static void shuffle(size_t *a, size_t n, th_rng_t *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = th_rnd_below(r, i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* ---- tensor lists ---------------------------------------------------------- */

typedef struct tlist {
    size_t n;
    tnt_tensor_desc_t *desc;
    char (*names)[24];
    size_t total;
} tlist_t;

/* Sizes on and next to the thresholds used below. */
static const size_t k_edge_bytes[] = {1024, 4096, 32768, 32704, 32832,
                                      65536, 1 << 20, MAX_TENSOR_BYTES};

/*
 * The same list on every rank: at most max_n tensors of 1 B..4 MiB
 * (log-uniform, with some sizes right at the thresholds), all of one
 * dtype, in runs of dtypes or of random dtypes, and at most `budget`
 * bytes in all so that a job stays quick on a shared 2-core machine.
 */
static void make_list(uint64_t seed, size_t min_n, size_t max_n,
                      size_t budget, tlist_t *l)
{
    th_rng_t r = {seed};
    size_t n = min_n + th_rnd_below(&r, max_n - min_n + 1);
    l->n = n;
    l->desc = xcalloc(n, sizeof *l->desc);
    l->names = xcalloc(n, sizeof *l->names);
    l->total = 0;
    int mode = (int)th_rnd_below(&r, 3);
    tnt_dtype_t dt = (tnt_dtype_t)th_rnd_below(&r, TNT_DTYPE_COUNT);
    for (size_t i = 0; i < n; i++) {
        if (mode == 2 || (mode == 1 && th_rnd_below(&r, 8) == 0))
            dt = (tnt_dtype_t)th_rnd_below(&r, TNT_DTYPE_COUNT);
        size_t es = tnt_dtype_size(dt);
        size_t bytes;
        if (th_rnd_below(&r, 10) == 0) {
            bytes = k_edge_bytes[th_rnd_below(&r, NELEM(k_edge_bytes))];
        } else {
            size_t lo = (size_t)1 << th_rnd_below(&r, 23);
            bytes = lo + th_rnd_below(&r, lo);
        }
        if (bytes > MAX_TENSOR_BYTES)
            bytes = MAX_TENSOR_BYTES;
        /* Keep 8 bytes for each later tensor. */
        size_t room = budget - l->total - (n - i - 1) * 8;
        if (bytes > room)
            bytes = room;
        size_t count = bytes / es ? bytes / es : 1;
        tnt_tensor_desc_t d = TNT_TENSOR_DESC_INIT;
        d.count = count;
        d.dtype = dt;
        snprintf(l->names[i], sizeof l->names[i], "L%u.grad", (unsigned)i);
        d.name = l->names[i];
        l->desc[i] = d;
        l->total += count * es;
    }
}

static void free_list(tlist_t *l)
{
    free(l->desc);
    free(l->names);
    memset(l, 0, sizeof *l);
}

static size_t tbytes(const tlist_t *l, size_t i)
{
    return l->desc[i].count * tnt_dtype_size(l->desc[i].dtype);
}

/* ---- memory layouts -------------------------------------------------------- */

enum { PL_FORWARD, PL_REVERSE, PL_GAPS, PL_SEPARATE };

typedef struct layout {
    unsigned char *slab;
    void **own;  /* separately allocated tensors (NULL: in the slab) */
    void **ptr;  /* where tensor i lives */
} layout_t;

/*
 * Where the tensors live. The list is cut into groups of consecutive
 * tensors, each placed back to back in registered order in one slab (a
 * bucket made only of those is reduced in place), back to back in reverse
 * order or with gaps (contiguous memory, but not in order: must be
 * packed), or allocated one by one. Some layouts put everything in order
 * in one slab, some allocate everything separately.
 */
static void make_layout(const tlist_t *l, uint64_t seed, layout_t *lay)
{
    th_rng_t r = {seed};
    size_t n = l->n;
    size_t *off = xcalloc(n, sizeof *off);
    int *place = xcalloc(n, sizeof *place);
    int whole = (int)th_rnd_below(&r, 8); /* 0,1: one slab; 2: all separate */
    size_t i = 0;
    while (i < n) {
        size_t g = 1 + th_rnd_below(&r, n - i < 24 ? n - i : 24);
        int pl = whole < 2   ? PL_FORWARD
                 : whole == 2 ? PL_SEPARATE
                              : (int)th_rnd_below(&r, 4);
        if (whole < 2)
            g = n - i;
        for (size_t j = i; j < i + g; j++)
            place[j] = pl;
        i += g;
    }
    /* Slab offsets: a dtype change (or a group start) realigns, which
     * never splits a bucket since buckets never mix dtypes. */
    size_t end = 0;
    i = 0;
    while (i < n) {
        /* Neighbouring groups of one placement merge here: they are
         * placed the same way anyway. */
        size_t g = i + 1;
        while (g < n && place[g] == place[i])
            g++;
        end = align_up(end);
        int prev = -1;
        if (place[i] == PL_FORWARD || place[i] == PL_GAPS) {
            for (size_t j = i; j < g; j++) {
                if ((int)l->desc[j].dtype != prev || place[j] == PL_GAPS)
                    end = align_up(end);
                if (place[j] == PL_GAPS)
                    end += ALIGN;
                off[j] = end;
                end += tbytes(l, j);
                prev = (int)l->desc[j].dtype;
            }
        } else if (place[i] == PL_REVERSE) {
            for (size_t j = g; j-- > i;) {
                if ((int)l->desc[j].dtype != prev)
                    end = align_up(end);
                off[j] = end;
                end += tbytes(l, j);
                prev = (int)l->desc[j].dtype;
            }
        }
        i = g;
    }
    lay->slab = aligned_alloc(ALIGN, align_up(end) + ALIGN);
    lay->own = xcalloc(n, sizeof *lay->own);
    lay->ptr = xcalloc(n, sizeof *lay->ptr);
    if (!lay->slab)
        abort();
    for (i = 0; i < n; i++) {
        if (place[i] == PL_SEPARATE) {
            lay->own[i] = th_xmalloc(tbytes(l, i));
            lay->ptr[i] = lay->own[i];
        } else {
            lay->ptr[i] = lay->slab + off[i];
        }
    }
    free(off);
    free(place);
}

static void free_layout(layout_t *lay, size_t n)
{
    for (size_t i = 0; lay->own && i < n; i++)
        free(lay->own[i]);
    free(lay->own);
    free(lay->ptr);
    free(lay->slab);
    memset(lay, 0, sizeof *lay);
}

/* ---- what one rank checks during an iteration ------------------------------ */

/*
 * State shared by the ranks' threads and the completion callback during
 * one case. Problems are counted and the first one is kept as text for
 * the report.
 */
typedef struct cstate {
    const tlist_t *l;
    int rank, p;
    tnt_op_t op;
    tnt_fusion_t f;
    void **ptr;           /* this iteration's layout */
    uint64_t *seed;       /* per tensor, this iteration */
    atomic_int *cb_count; /* callbacks per tensor, this iteration */
    atomic_int *cb_rc;    /* rc of the last callback per tensor */
    atomic_int cb_bad_index;
    atomic_int cb_after_free; /* callbacks seen outside an iteration */
    atomic_int in_iteration;
    pthread_mutex_t lock;
    int problems;
    size_t nwrong, first_wrong_tensor;
    char msg[TH_MSG_MAX];
} cstate_t;

static void note(cstate_t *cs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note(cstate_t *cs, const char *fmt, ...)
{
    pthread_mutex_lock(&cs->lock);
    if (cs->problems++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cs->msg, sizeof cs->msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&cs->lock);
}

static void cstate_init(cstate_t *cs, const tlist_t *l, int rank, int p,
                        tnt_op_t op)
{
    memset(cs, 0, sizeof *cs);
    cs->l = l;
    cs->rank = rank;
    cs->p = p;
    cs->op = op;
    cs->seed = xcalloc(l->n, sizeof *cs->seed);
    cs->cb_count = xcalloc(l->n, sizeof *cs->cb_count);
    cs->cb_rc = xcalloc(l->n, sizeof *cs->cb_rc);
    pthread_mutex_init(&cs->lock, NULL);
}

static void cstate_reset(cstate_t *cs)
{
    for (size_t i = 0; i < cs->l->n; i++) {
        atomic_store(&cs->cb_count[i], 0);
        atomic_store(&cs->cb_rc[i], 0);
    }
    atomic_store(&cs->cb_bad_index, 0);
    cs->problems = 0;
    cs->nwrong = 0;
    cs->first_wrong_tensor = SIZE_MAX;
    cs->msg[0] = '\0';
}

static void cstate_free(cstate_t *cs)
{
    free(cs->seed);
    free(cs->cb_count);
    free(cs->cb_rc);
    pthread_mutex_destroy(&cs->lock);
}

/* Wrong elements of tensor i among [from, from+len). */
static size_t wrong_in(const cstate_t *cs, size_t i, size_t from, size_t len,
                       size_t *first)
{
    const tnt_tensor_desc_t *d = &cs->l->desc[i];
    size_t es = tnt_dtype_size(d->dtype);
    return tnt_gen_check_allreduce((unsigned char *)cs->ptr[i] + from * es,
                                   from, len, d->dtype, cs->op, cs->seed[i],
                                   cs->p, first);
}

/* Check all of tensor i; `when` says at which point, for the message. */
static void check_tensor(cstate_t *cs, size_t i, const char *when)
{
    size_t first = SIZE_MAX;
    size_t w = wrong_in(cs, i, 0, cs->l->desc[i].count, &first);
    if (!w)
        return;
    pthread_mutex_lock(&cs->lock);
    cs->nwrong += w;
    if (cs->first_wrong_tensor == SIZE_MAX || i < cs->first_wrong_tensor)
        cs->first_wrong_tensor = i;
    pthread_mutex_unlock(&cs->lock);
    note(cs, "rank %d: %s: tensor %zu (%zu x %s) has %zu wrong elements, "
         "the first at %zu (got %g, expected %g)", cs->rank, when, i,
         cs->l->desc[i].count, tnt_dtype_name(cs->l->desc[i].dtype), w,
         first, tnt_gen_load(cs->ptr[i], first, cs->l->desc[i].dtype),
         tnt_gen_expected(cs->seed[i], cs->p, first, cs->l->desc[i].dtype,
                          cs->op));
}

/* The per-tensor callback: exactly once per tensor and iteration, after
 * its values are in place (checked on both ends of the tensor). */
static void on_tensor_done(void *arg, size_t tensor, tnt_result_t rc)
{
    cstate_t *cs = arg;
    if (!atomic_load(&cs->in_iteration)) {
        atomic_fetch_add(&cs->cb_after_free, 1);
        return;
    }
    if (tensor >= cs->l->n) {
        atomic_fetch_add(&cs->cb_bad_index, 1);
        return;
    }
    atomic_fetch_add(&cs->cb_count[tensor], 1);
    atomic_store(&cs->cb_rc[tensor], (int)rc);
    if (rc != TNT_SUCCESS)
        return;
    size_t count = cs->l->desc[tensor].count;
    size_t len = count < CB_SAMPLE ? count : CB_SAMPLE;
    size_t first = SIZE_MAX;
    size_t w = wrong_in(cs, tensor, 0, len, &first);
    if (!w)
        w = wrong_in(cs, tensor, count - len, len, &first);
    if (w)
        note(cs, "rank %d: the callback of tensor %zu (%zu x %s) came "
             "before its values were in place: element %zu is %g, "
             "expected %g", cs->rank, tensor, count,
             tnt_dtype_name(cs->l->desc[tensor].dtype), first,
             tnt_gen_load(cs->ptr[tensor], first,
                          cs->l->desc[tensor].dtype),
             tnt_gen_expected(cs->seed[tensor], cs->p, first,
                              cs->l->desc[tensor].dtype, cs->op));
}

/* ---- the plan as the context reports it ------------------------------------ */

typedef struct resolved {
    size_t min, max, first;
} resolved_t;

/* Decimal token `v` in s, not part of a longer number. */
static int has_number(const char *s, size_t v)
{
    char num[32];
    snprintf(num, sizeof num, "%zu", v);
    size_t k = strlen(num);
    for (const char *p = strstr(s, num); p; p = strstr(p + 1, num))
        if ((p == s || p[-1] < '0' || p[-1] > '9') &&
            (p[k] < '0' || p[k] > '9'))
            return 1;
    return 0;
}

/* The message names tensor k: "tensor" followed closely by the number
 * ("tensor 17", "tensor #17", "tensor is 17"), or its registered name. */
static int names_tensor(const char *msg, size_t k, const char *name)
{
    if (name && strstr(msg, name))
        return 1;
    for (const char *p = strstr(msg, "tensor"); p;
         p = strstr(p + 1, "tensor")) {
        const char *q = p + 6;
        int skip = 0;
        while (*q && (*q < '0' || *q > '9') && skip < 8) {
            q++;
            skip++;
        }
        if (*q >= '0' && *q <= '9') {
            char *end;
            unsigned long long v = strtoull(q, &end, 10);
            if (v == k)
                return 1;
        }
    }
    return 0;
}

/*
 * num_buckets, bucket() and describe() against each other and against
 * the planner of plan.h with the thresholds the context should have
 * resolved. Returns 1 if all agree; else the first difference in msg.
 */
static int check_plan(tnt_fusion_t f, const tlist_t *l, const resolved_t *rv,
                      char *msg, size_t msglen)
{
#define BAD(...)                                                            \
    do {                                                                    \
        snprintf(msg, msglen, __VA_ARGS__);                                 \
        goto out;                                                           \
    } while (0)
    int ok = 0;
    tnt_bucket_t *want = NULL;
    char *text = NULL, *full = NULL;
    tnt_plan_tensor_t *pt = xcalloc(l->n, sizeof *pt);
    for (size_t i = 0; i < l->n; i++) {
        pt[i].count = l->desc[i].count;
        pt[i].bytes = tbytes(l, i);
        pt[i].dtype = l->desc[i].dtype;
    }
    size_t wnb = 0, wbuf = 0;
    if (tnt__fusion_plan(pt, l->n, rv->min, rv->max, rv->first, &want, &wnb,
                         &wbuf) != TNT_SUCCESS)
        BAD("the test's tnt__fusion_plan failed: %s", tnt_last_error());
    size_t nb = SIZE_MAX;
    tnt_result_t rc = tnt_fusion_num_buckets(f, &nb);
    if (rc != TNT_SUCCESS)
        BAD("tnt_fusion_num_buckets: %d (%s) '%s'", rc, tnt_strerror(rc),
            tnt_last_error());
    if (nb != wnb)
        BAD("%zu buckets; the plan of threshold %zu, max %zu, first %zu "
            "has %zu", nb, rv->min, rv->max, rv->first, wnb);
    size_t next = 0;
    for (size_t k = 0; k < nb; k++) {
        tnt_fusion_bucket_info_t info = TNT_FUSION_BUCKET_INFO_INIT;
        rc = tnt_fusion_bucket(f, k, &info);
        if (rc != TNT_SUCCESS)
            BAD("tnt_fusion_bucket(%zu): %d (%s) '%s'", k, rc,
                tnt_strerror(rc), tnt_last_error());
        size_t count = 0;
        for (size_t i = info.first_tensor;
             i < info.first_tensor + info.ntensors && i < l->n; i++)
            count += l->desc[i].count;
        if (info.first_tensor != next || info.ntensors == 0 ||
            info.first_tensor + info.ntensors > l->n)
            BAD("bucket %zu: tensors %zu..+%zu, expected to start at %zu",
                k, info.first_tensor, info.ntensors, next);
        if (info.count != count ||
            info.bytes != count * tnt_dtype_size(info.dtype) ||
            info.dtype != l->desc[info.first_tensor].dtype)
            BAD("bucket %zu: %zu elements, %zu bytes, %s; its tensors "
                "hold %zu elements of %s", k, info.count, info.bytes,
                tnt_dtype_name(info.dtype), count,
                tnt_dtype_name(l->desc[info.first_tensor].dtype));
        if (info.first_tensor != want[k].first || info.ntensors != want[k].n)
            BAD("bucket %zu: tensors %zu..+%zu, the plan says %zu..+%zu", k,
                info.first_tensor, info.ntensors, want[k].first, want[k].n);
        next = info.first_tensor + info.ntensors;
    }
    if (next != l->n)
        BAD("the buckets cover %zu of %zu tensors", next, l->n);
    tnt_fusion_bucket_info_t info = TNT_FUSION_BUCKET_INFO_INIT;
    rc = tnt_fusion_bucket(f, nb, &info);
    if (rc != TNT_ERR_INVALID_ARG)
        BAD("tnt_fusion_bucket(%zu) of %zu buckets returned %d (%s)", nb, nb,
            rc, tnt_strerror(rc));

    /* describe: the needed size first, then the full text. */
    size_t need = 0;
    rc = tnt_fusion_describe(f, NULL, 0, &need);
    if (rc != TNT_SUCCESS || need < 2)
        BAD("tnt_fusion_describe(NULL, 0) returned %d (%s), needed %zu: "
            "'%s'", rc, tnt_strerror(rc), need, tnt_last_error());
    full = th_xmalloc(need + 64);
    memset(full, 'Z', need + 64);
    size_t need2 = 0;
    rc = tnt_fusion_describe(f, full, need, &need2);
    if (rc != TNT_SUCCESS || need2 != need || full[need - 1] != '\0' ||
        strlen(full) != need - 1 || full[need] != 'Z')
        BAD("tnt_fusion_describe with %zu bytes: rc %d, needed %zu, length "
            "%zu, or it wrote past the end", need, rc, need2,
            strnlen(full, need + 64));
    /* One line per bucket, in order; lines starting with '#' are
     * comments. Each names its dtype, elements, bytes, first and last
     * tensor (index or name). */
    text = th_xmalloc(need);
    memcpy(text, full, need);
    size_t k = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (k >= nb)
            BAD("describe has more than %zu bucket lines: '%.80s'", nb,
                line);
        size_t last = want[k].first + want[k].n - 1;
        if (!strstr(line, tnt_dtype_name(want[k].dtype)) ||
            !has_number(line, want[k].count) ||
            !has_number(line, want[k].bytes) ||
            !(has_number(line, want[k].first) ||
              strstr(line, l->names[want[k].first])) ||
            !(has_number(line, last) || strstr(line, l->names[last])))
            BAD("describe line %zu '%.120s' does not give bucket %zu's "
                "dtype %s, %zu elements, %zu bytes, tensors %zu..%zu", k,
                line, k, tnt_dtype_name(want[k].dtype), want[k].count,
                want[k].bytes, want[k].first, last);
        k++;
    }
    if (k != nb)
        BAD("describe has %zu bucket lines for %zu buckets", k, nb);
    /* Truncated: at most len bytes, NUL-terminated, a prefix. */
    size_t lens[] = {1, 2, need / 2, need - 1};
    for (size_t j = 0; j < NELEM(lens); j++) {
        size_t len = lens[j];
        if (len == 0 || len >= need)
            continue;
        memset(text, 'Z', need);
        size_t need3 = 0;
        rc = tnt_fusion_describe(f, text, len, &need3);
        if (rc != TNT_SUCCESS || need3 != need || text[len - 1] != '\0' ||
            memcmp(text, full, len - 1) != 0 || text[len] != 'Z')
            BAD("tnt_fusion_describe into %zu of the %zu bytes needed: rc %d "
                "(%s), needed %zu; expected a NUL-terminated prefix and no "
                "byte written past %zu", len, need, rc, tnt_strerror(rc),
                need3, len);
    }
    rc = tnt_fusion_describe(f, NULL, 5, NULL);
    if (rc != TNT_ERR_INVALID_ARG)
        BAD("tnt_fusion_describe(NULL buffer, len 5) returned %d (%s)", rc,
            tnt_strerror(rc));
    ok = 1;
out:
    free(pt);
    free(want);
    free(text);
    free(full);
    return ok;
#undef BAD
}


/* ---- one iteration ----------------------------------------------------------- */

/* The plan as the context reports it, for waits in the middle. */
typedef struct plan_view {
    size_t nb;
    size_t *first, *size; /* per bucket */
    size_t *bucket_of;    /* per tensor */
} plan_view_t;

static int get_plan_view(tnt_fusion_t f, size_t n, plan_view_t *pv)
{
    memset(pv, 0, sizeof *pv);
    if (tnt_fusion_num_buckets(f, &pv->nb) != TNT_SUCCESS || pv->nb > n)
        return 0;
    pv->first = xcalloc(pv->nb, sizeof(size_t));
    pv->size = xcalloc(pv->nb, sizeof(size_t));
    pv->bucket_of = xcalloc(n, sizeof(size_t));
    for (size_t k = 0; k < pv->nb; k++) {
        tnt_fusion_bucket_info_t info = TNT_FUSION_BUCKET_INFO_INIT;
        if (tnt_fusion_bucket(f, k, &info) != TNT_SUCCESS ||
            info.first_tensor + info.ntensors > n)
            return 0;
        pv->first[k] = info.first_tensor;
        pv->size[k] = info.ntensors;
        for (size_t i = 0; i < info.ntensors; i++)
            pv->bucket_of[info.first_tensor + i] = k;
    }
    return 1;
}

static void free_plan_view(plan_view_t *pv)
{
    free(pv->first);
    free(pv->size);
    free(pv->bucket_of);
    memset(pv, 0, sizeof *pv);
}

typedef struct worker {
    cstate_t *cs;
    size_t *order;  /* this thread's tensors, in its order */
    size_t n;
    uint64_t seed;
    const plan_view_t *pv; /* set for a thread that works alone */
    pthread_t tid;
} worker_t;

static void fill(cstate_t *cs, size_t i)
{
    const tnt_tensor_desc_t *d = &cs->l->desc[i];
    tnt_gen_fill(cs->ptr[i], d->count, d->dtype, cs->op, cs->seed[i],
                 cs->rank);
}

static void do_wait(cstate_t *cs, size_t i, const char *when)
{
    tnt_result_t rc = tnt_fusion_wait(cs->f, i);
    if (rc != TNT_SUCCESS) {
        note(cs, "rank %d: tnt_fusion_wait(%zu) %s returned %d (%s): '%s'",
             cs->rank, i, when, rc, tnt_strerror(rc), tnt_last_error());
        return;
    }
    check_tensor(cs, i, when);
}

/*
 * Fill and report this thread's tensors, then wait for a few of them and
 * check their values before tnt_fusion_wait_all. A thread that works
 * alone also waits in the middle, but only for a tensor whose bucket and
 * all buckets before it it has reported completely: what the other ranks
 * do meanwhile cannot block it then. Several threads wait only after all
 * their own reports, so that none can block another.
 */
static void *worker_main(void *arg)
{
    worker_t *w = arg;
    cstate_t *cs = w->cs;
    th_rng_t r = {w->seed};
    const plan_view_t *pv = w->pv;
    size_t *left = NULL, prefix = 0;
    if (pv) {
        left = xcalloc(pv->nb, sizeof *left);
        memcpy(left, pv->size, pv->nb * sizeof *left);
    }
    for (size_t j = 0; j < w->n; j++) {
        size_t i = w->order[j];
        fill(cs, i);
        tnt_result_t rc = tnt_fusion_ready(cs->f, i, cs->ptr[i]);
        if (rc != TNT_SUCCESS)
            note(cs, "rank %d: tnt_fusion_ready(%zu) returned %d (%s): '%s'",
                 cs->rank, i, rc, tnt_strerror(rc), tnt_last_error());
        if (!pv)
            continue;
        left[pv->bucket_of[i]]--;
        while (prefix < pv->nb && left[prefix] == 0)
            prefix++;
        if (prefix > 0 && th_rnd_below(&r, 16) == 0) {
            size_t b = th_rnd_below(&r, prefix);
            do_wait(cs, pv->first[b] + th_rnd_below(&r, pv->size[b]),
                    "in the middle of the reports");
        }
    }
    for (size_t j = 0; j < w->n; j++)
        if (th_rnd_below(&r, 16) == 0)
            do_wait(cs, w->order[j], "after the reports");
    free(left);
    return NULL;
}

/*
 * One iteration on this rank: fresh values, this rank's own random order
 * from 1-4 threads, tnt_fusion_wait_all, then every check. Reported as
 * case `name` with a hash of all results (equal on every rank).
 */
static void run_iteration(cstate_t *cs, const layout_t *lay,
                          uint64_t case_seed, int it, const plan_view_t *pv,
                          int expect_cb, th_report_t *rep, const char *name)
{
    const tlist_t *l = cs->l;
    size_t n = l->n;
    cstate_reset(cs);
    cs->ptr = lay->ptr;
    for (size_t i = 0; i < n; i++)
        cs->seed[i] = mix(case_seed, (uint64_t)it + 1, i);
    th_rng_t r = {mix(case_seed, (uint64_t)it + 1, 1000003u + (uint64_t)cs->rank)};
    size_t *order = xcalloc(n, sizeof *order);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    shuffle(order, n, &r);
    static const int k_threads[] = {1, 1, 2, 3, 4};
    int nt = k_threads[th_rnd_below(&r, NELEM(k_threads))];
    if ((size_t)nt > n)
        nt = 1;
    worker_t w[4];
    size_t per = (n + (size_t)nt - 1) / (size_t)nt;
    for (int t = 0; t < nt; t++) {
        w[t].cs = cs;
        w[t].order = xcalloc(per, sizeof(size_t));
        w[t].n = 0;
        w[t].seed = th_rnd(&r);
        w[t].pv = nt == 1 ? pv : NULL;
        /* Interleaved shares: the threads' reports mix in time. */
        for (size_t j = (size_t)t; j < n; j += (size_t)nt)
            w[t].order[w[t].n++] = order[j];
    }
    atomic_store(&cs->in_iteration, 1);
    int started = 0;
    if (nt == 1) {
        worker_main(&w[0]);
    } else {
        for (; started < nt; started++)
            if (pthread_create(&w[started].tid, NULL, worker_main,
                               &w[started]) != 0)
                break;
        if (started < nt) {
            note(cs, "rank %d: could not start thread %d", cs->rank,
                 started);
            /* The rest of the work on this thread, so that no rank is
             * left waiting for tensors. */
            for (int t = started; t < nt; t++)
                worker_main(&w[t]);
        }
        for (int t = 0; t < started; t++)
            pthread_join(w[t].tid, NULL);
    }
    tnt_result_t rc = tnt_fusion_wait_all(cs->f);
    atomic_store(&cs->in_iteration, 0);
    if (rc != TNT_SUCCESS)
        note(cs, "rank %d: tnt_fusion_wait_all returned %d (%s): '%s'",
             cs->rank, rc, tnt_strerror(rc), tnt_last_error());
    for (size_t i = 0; i < n; i++) {
        int c = atomic_load(&cs->cb_count[i]);
        int crc = atomic_load(&cs->cb_rc[i]);
        if (expect_cb && c != 1)
            note(cs, "rank %d: the callback of tensor %zu fired %d times "
                 "in iteration %d (%d threads)", cs->rank, i, c, it, nt);
        if (c && crc != TNT_SUCCESS)
            note(cs, "rank %d: the callback of tensor %zu got rc %d (%s)",
                 cs->rank, i, crc, tnt_strerror((tnt_result_t)crc));
    }
    if (atomic_load(&cs->cb_bad_index))
        note(cs, "rank %d: %d callbacks named tensors beyond %zu", cs->rank,
             atomic_load(&cs->cb_bad_index), n);
    if (atomic_load(&cs->cb_after_free))
        note(cs, "rank %d: %d callbacks came outside of an iteration",
             cs->rank, atomic_load(&cs->cb_after_free));
    uint64_t *h = xcalloc(n, sizeof *h);
    for (size_t i = 0; i < n; i++) {
        check_tensor(cs, i, "after tnt_fusion_wait_all");
        h[i] = tnt_gen_hash(cs->ptr[i], tbytes(l, i));
    }
    th_case_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.ok = cs->problems == 0;
    c.rc = rc;
    c.nwrong = cs->nwrong;
    c.first_wrong = cs->first_wrong_tensor == SIZE_MAX
                        ? 0 : cs->first_wrong_tensor;
    c.has_hash = rc == TNT_SUCCESS;
    c.hash = tnt_gen_hash(h, n * sizeof *h);
    if (cs->problems) {
        int k = snprintf(c.msg, sizeof c.msg, "%d problems; first: ",
                         cs->problems);
        size_t room = sizeof c.msg - (size_t)k - 1;
        size_t len = strnlen(cs->msg, room);
        memcpy(c.msg + k, cs->msg, len);
        c.msg[(size_t)k + len] = '\0';
    }
    th_report_case(rep, &c);
    free(h);
    for (int t = 0; t < nt; t++)
        free(w[t].order);
    free(order);
}

/* ---- a case: one list, one configuration, some iterations ------------------- */

typedef struct fcase {
    uint64_t seed;
    size_t min_n, max_n, budget;
    size_t threshold, max, first; /* TNT_FUSION_DEFAULT for max/first */
    tnt_op_t op;
    int iterations;
    int nlayouts;
} fcase_t;

static const char *size_text(size_t v, char *buf, size_t len)
{
    if (v == TNT_FUSION_DEFAULT)
        snprintf(buf, len, "def");
    else if (v == HUGE_THRESHOLD)
        snprintf(buf, len, "huge");
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(buf, len, "%zuk", v / 1024);
    else
        snprintf(buf, len, "%zu", v);
    return buf;
}

static void run_case(tnt_comm_t comm, int rank, int p, const fcase_t *fc,
                     th_report_t *rep)
{
    tlist_t l;
    make_list(fc->seed, fc->min_n, fc->max_n, fc->budget, &l);
    char a[24], b[24], c[24], label[TH_NAME_MAX - 24], name[TH_NAME_MAX];
    /* A label cut short still names the case well enough; the test only
     * reads it in its messages (and gcc -O3 wants the length looked at). */
    if (snprintf(label, sizeof label, "p%d_%s_thr%s_max%s_first%s_n%zu_%zuk",
                 p, tnt_op_name(fc->op),
                 size_text(fc->threshold, a, sizeof a),
                 size_text(fc->max, b, sizeof b),
                 size_text(fc->first, c, sizeof c), l.n,
                 l.total >> 10) >= (int)sizeof label)
        label[sizeof label - 2] = '+';
    int nl = fc->nlayouts;
    layout_t *lay = xcalloc((size_t)nl, sizeof *lay);
    for (int k = 0; k < nl; k++)
        make_layout(&l, mix(fc->seed, 77, (uint64_t)k), &lay[k]);
    cstate_t cs;
    cstate_init(&cs, &l, rank, p, fc->op);
    tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
    cfg.op = fc->op;
    cfg.min_bucket_bytes = fc->threshold;
    cfg.max_bucket_bytes = fc->max;
    cfg.first_bucket_bytes = fc->first;
    cfg.callback = on_tensor_done;
    cfg.callback_arg = &cs;
    tnt_fusion_t f = NULL;
    tnt_result_t rc = tnt_fusion_create(comm, l.desc, l.n, &cfg, &f);
    snprintf(name, sizeof name, "%s_create", label);
    th_report_check(rep, name, rc, 0, 0, NULL, 0);
    if (rc == TNT_SUCCESS) {
        cs.f = f;
        resolved_t rv = {fc->threshold,
                         fc->max == TNT_FUSION_DEFAULT ? SIZE_MAX : fc->max,
                         fc->first == TNT_FUSION_DEFAULT ? fc->threshold
                                                         : fc->first};
        char msg[TH_MSG_MAX] = "";
        int ok = check_plan(f, &l, &rv, msg, sizeof msg);
        snprintf(name, sizeof name, "%s_plan", label);
        th_report_expect(rep, name, ok, 0, "%s", msg);
        plan_view_t pv;
        int have_pv = get_plan_view(f, l.n, &pv);
        for (int it = 0; it < fc->iterations; it++) {
            snprintf(name, sizeof name, "%s_it%d", label, it);
            run_iteration(&cs, &lay[it % nl], fc->seed, it,
                          have_pv ? &pv : NULL, 1, rep, name);
        }
        free_plan_view(&pv);
        snprintf(name, sizeof name, "%s_free", label);
        th_report_check(rep, name, tnt_fusion_free(f), 0, 0, NULL, 0);
    }
    cstate_free(&cs);
    for (int k = 0; k < nl; k++)
        free_layout(&lay[k], l.n);
    free(lay);
    free_list(&l);
}

/* ---- suite: random lists ------------------------------------------------------ */

static const size_t k_mp_thresholds[] = {0, 1, 32768, HUGE_THRESHOLD};
static const tnt_op_t k_mp_ops[] = {TNT_SUM, TNT_AVG};
/* Bytes per list; the large ones are rarer (2 cores for all ranks). */
static const size_t k_budgets[] = {64 << 10, 512 << 10, 512 << 10,
                                   2 << 20,  2 << 20,   8 << 20,
                                   24 << 20};

static int random_rank(tnt_comm_t comm, int rank, int p, void *arg,
                       th_report_t *rep)
{
    (void)arg;
    for (size_t t = 0; t < NELEM(k_mp_thresholds); t++)
        for (size_t o = 0; o < NELEM(k_mp_ops); o++) {
            uint64_t seed = mix((uint64_t)p, t + 1, o + 1);
            th_rng_t r = {seed};
            static const size_t maxes[] = {TNT_FUSION_DEFAULT,
                                           TNT_FUSION_DEFAULT, 65536,
                                           1 << 20};
            static const size_t firsts[] = {TNT_FUSION_DEFAULT,
                                            TNT_FUSION_DEFAULT, 1024};
            fcase_t fc = {seed, 1, MAX_TENSORS,
                          k_budgets[th_rnd_below(&r, NELEM(k_budgets))],
                          k_mp_thresholds[t],
                          maxes[th_rnd_below(&r, NELEM(maxes))],
                          firsts[th_rnd_below(&r, NELEM(firsts))],
                          k_mp_ops[o], 2, 2};
            run_case(comm, rank, p, &fc, rep);
        }
    return 0;
}

static void test_random_lists(void)
{
    for (int p = 1; p <= 5; p++) {
        char name[64];
        snprintf(name, sizeof name, "fusion random lists p=%d", p);
        const char *env[] = {NULL};
        th_job_t job = {name, p, env, random_rank, NULL, 120, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* ---- suite: many iterations on one context ------------------------------------ */

static int iterations_rank(tnt_comm_t comm, int rank, int p, void *arg,
                           th_report_t *rep)
{
    (void)arg;
    fcase_t fc = {mix(4242, (uint64_t)p, 0), 20, 200, 1 << 20, 32768,
                  256 << 10, 1024, p == 4 ? TNT_SUM : TNT_AVG, 50, 3};
    run_case(comm, rank, p, &fc, rep);
    return 0;
}

static void test_iterations(void)
{
    static const int ps[] = {1, 3, 4};
    for (size_t k = 0; k < NELEM(ps); k++) {
        char name[64];
        snprintf(name, sizeof name, "fusion 50 iterations p=%d", ps[k]);
        const char *env[] = {NULL};
        th_job_t job = {name, ps[k], env, iterations_rank, NULL, 120, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* ---- suite: plans that differ across ranks ------------------------------------ */

enum mm_kind {
    MM_COUNT_LAST,  /* the last rank: one more element in tensor k */
    MM_COUNT_ROOT,  /* rank 0: one fewer element in tensor k */
    MM_DTYPE,       /* the middle rank: tensor k has another dtype of the
                       same width (same bytes, so only the dtype differs) */
    MM_NTENSORS,    /* the last rank registers one tensor less */
    MM_THRESHOLD,   /* the last rank: threshold + 1 */
    MM_FIRST,       /* rank 0: another first-bucket threshold */
    MM_MAX,         /* the middle rank: another bucket limit */
    MM_OP,          /* the last rank: sum instead of avg */
    MM_END
};
static const char *const k_mm_names[] = {"count_last_rank", "count_rank0",
                                         "dtype",           "ntensors",
                                         "threshold",       "first",
                                         "max",             "op"};

static tnt_dtype_t same_width_other(tnt_dtype_t d)
{
    switch (d) {
    case TNT_F32: return TNT_I32;
    case TNT_I32: return TNT_U32;
    case TNT_U32: return TNT_F32;
    case TNT_F64: return TNT_I64;
    case TNT_I64: return TNT_U64;
    case TNT_U64: return TNT_F64;
    case TNT_F16: return TNT_BF16;
    case TNT_BF16: return TNT_F16;
    case TNT_I8: return TNT_U8;
    default: return TNT_I8;
    }
}

static int mismatch_rank(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    (void)arg;
    tlist_t l;
    make_list(mix(99, (uint64_t)p, 0), 12, 80, 1 << 20, &l);
    th_rng_t r = {mix(98, (uint64_t)p, 0)};
    /* k >= 5 so that no rank number can pass for the tensor's index. */
    size_t k = 5 + th_rnd_below(&r, l.n - 5);
    tnt_tensor_desc_t *d = xcalloc(l.n, sizeof *d);
    for (int m = 0; m < MM_END; m++) {
        memcpy(d, l.desc, l.n * sizeof *d);
        size_t n = l.n;
        tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
        cfg.op = TNT_AVG;
        cfg.min_bucket_bytes = 4096;
        cfg.max_bucket_bytes = 1 << 20;
        cfg.first_bucket_bytes = 1024;
        int odd = m == MM_COUNT_ROOT || m == MM_FIRST ? 0
                  : m == MM_DTYPE || m == MM_MAX      ? p / 2
                                                      : p - 1;
        size_t named = SIZE_MAX;
        if (rank == odd) {
            switch ((enum mm_kind)m) {
            case MM_COUNT_LAST: d[k].count++; break;
            case MM_COUNT_ROOT:
                d[k].count = d[k].count > 1 ? d[k].count - 1 : 2;
                break;
            case MM_DTYPE: d[k].dtype = same_width_other(d[k].dtype); break;
            case MM_NTENSORS: n--; break;
            case MM_THRESHOLD: cfg.min_bucket_bytes++; break;
            case MM_FIRST: cfg.first_bucket_bytes = 2048; break;
            case MM_MAX: cfg.max_bucket_bytes = 2 << 20; break;
            case MM_OP: cfg.op = TNT_SUM; break;
            case MM_END: break;
            }
        }
        if (m == MM_COUNT_LAST || m == MM_COUNT_ROOT || m == MM_DTYPE)
            named = k;
        else if (m == MM_NTENSORS)
            named = l.n - 1;
        tnt_fusion_t f = NULL;
        tnt_result_t rc = tnt_fusion_create(comm, d, n, &cfg, &f);
        const char *msg = tnt_last_error();
        /* Every rank, the agreeing ones too, names a rank that differs
         * from rank 0 (the odd one, or rank 1 when rank 0 is odd). */
        char differ[32];
        snprintf(differ, sizeof differ, "rank %d ", odd ? odd : 1);
        int ok = rc == TNT_ERR_MISMATCH && msg[0] &&
                 strstr(msg, differ) != NULL &&
                 (named == SIZE_MAX ||
                  names_tensor(msg, named, l.names[named]));
        char name[64];
        snprintf(name, sizeof name, "mismatch_%s", k_mm_names[m]);
        th_report_expect(rep, name, ok, rc, "rank %d (rank %d differs): "
                         "tnt_fusion_create returned %d (%s), expected "
                         "TNT_ERR_MISMATCH%s%s: '%s'", rank, odd, rc,
                         tnt_strerror(rc),
                         named != SIZE_MAX ? " naming tensor " : "",
                         named != SIZE_MAX ? l.names[named] : "", msg);
        if (rc == TNT_SUCCESS && f)
            tnt_fusion_free(f);
    }
    free(d);
    /* The agreement is an ordinary collective: after all these, the
     * ranks are still in step and a matching plan works. */
    fcase_t fc = {mix(97, (uint64_t)p, 0), 12, 80, 1 << 20, 4096,
                  TNT_FUSION_DEFAULT, TNT_FUSION_DEFAULT, TNT_SUM, 1, 1};
    run_case(comm, rank, p, &fc, rep);
    free_list(&l);
    return 0;
}

static void test_mismatch(void)
{
    static const int ps[] = {2, 3, 5};
    for (size_t k = 0; k < NELEM(ps); k++) {
        char name[64];
        snprintf(name, sizeof name, "fusion plan mismatch p=%d", ps[k]);
        const char *env[] = {NULL};
        th_job_t job = {name, ps[k], env, mismatch_rank, NULL, 60, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* ---- suite: misuse ----------------------------------------------------------------- */

#define EXPECT(name, cond, rc, ...)                                         \
    th_report_expect(rep, name, (cond), (rc), __VA_ARGS__)

/* rc must be `want` (or `want2`) and come with a message. */
static void expect_rc(th_report_t *rep, const char *name, tnt_result_t rc,
                      tnt_result_t want, tnt_result_t want2, const char *call)
{
    const char *msg = tnt_last_error();
    EXPECT(name, (rc == want || rc == want2) && msg[0], rc,
           "%s returned %d (%s), expected %s: '%s'", call, rc,
           tnt_strerror(rc), tnt_strerror(want), msg);
}

/* A plain allreduce with checked values: the communicator is in step. */
static void check_comm_works(tnt_comm_t comm, int p, th_report_t *rep,
                             const char *name)
{
    enum { N = 3000 };
    static int32_t buf[N];
    uint64_t seed = tnt_gen_hash(name, strlen(name));
    int rank = -1;
    tnt_comm_rank(comm, &rank);
    tnt_gen_fill(buf, N, TNT_I32, TNT_SUM, seed, rank);
    tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, buf, N, TNT_I32,
                                    TNT_SUM);
    size_t first = 0, wrong = 0;
    if (rc == TNT_SUCCESS)
        wrong = tnt_gen_check_allreduce(buf, 0, N, TNT_I32, TNT_SUM, seed, p,
                                        &first);
    th_report_check(rep, name, rc, wrong, first, buf, sizeof buf);
}

static tnt_fusion_t make_ctx(tnt_comm_t comm, const tlist_t *l,
                             cstate_t *cs, th_report_t *rep,
                             const char *name)
{
    tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
    cfg.op = cs->op;
    cfg.min_bucket_bytes = 4096;
    cfg.callback = on_tensor_done;
    cfg.callback_arg = cs;
    tnt_fusion_t f = NULL;
    tnt_result_t rc = tnt_fusion_create(comm, l->desc, l->n, &cfg, &f);
    th_report_check(rep, name, rc, 0, 0, NULL, 0);
    cs->f = rc == TNT_SUCCESS ? f : NULL;
    return cs->f;
}

/* Creation with bad arguments: every rank finds them before it talks to
 * the others (or all take part in the agreement), so nobody hangs. */
static void misuse_create(tnt_comm_t comm, int rank, int p, const tlist_t *l,
                          th_report_t *rep)
{
    const tnt_result_t IA = TNT_ERR_INVALID_ARG;
    tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
    tnt_fusion_t f = NULL;
    tnt_tensor_desc_t *d = xcalloc(l->n, sizeof *d);
#define TRY(name, call, want, want2)                                        \
    do {                                                                    \
        f = NULL;                                                           \
        tnt_result_t rc_ = (call);                                          \
        expect_rc(rep, name, rc_, want, want2, #call);                      \
        if (rc_ == TNT_SUCCESS && f)                                        \
            tnt_fusion_free(f);                                             \
    } while (0)
    TRY("create_null_out", tnt_fusion_create(comm, l->desc, l->n, &cfg, NULL),
        IA, IA);
    TRY("create_null_comm", tnt_fusion_create(NULL, l->desc, l->n, &cfg, &f),
        IA, TNT_ERR_INVALID_COMM);
    TRY("create_null_tensors", tnt_fusion_create(comm, NULL, 3, &cfg, &f),
        IA, IA);
    memcpy(d, l->desc, l->n * sizeof *d);
    d[2].dtype = (tnt_dtype_t)77;
    f = NULL;
    tnt_result_t rc = tnt_fusion_create(comm, d, l->n, &cfg, &f);
    EXPECT("create_bad_dtype",
           rc == IA && names_tensor(tnt_last_error(), 2, l->names[2]), rc,
           "dtype 77 for tensor 2: %d (%s), expected invalid argument "
           "naming tensor 2: '%s'", rc, tnt_strerror(rc), tnt_last_error());
    if (rc == TNT_SUCCESS && f)
        tnt_fusion_free(f);
    memcpy(d, l->desc, l->n * sizeof *d);
    d[1].count = SIZE_MAX / 2;
    d[1].dtype = TNT_F32;
    f = NULL;
    rc = tnt_fusion_create(comm, d, l->n, &cfg, &f);
    EXPECT("create_count_overflow",
           rc == IA && names_tensor(tnt_last_error(), 1, l->names[1]), rc,
           "tensor 1 of SIZE_MAX/2 f32 elements: %d (%s), expected invalid "
           "argument naming tensor 1: '%s'", rc, tnt_strerror(rc),
           tnt_last_error());
    if (rc == TNT_SUCCESS && f)
        tnt_fusion_free(f);
    memcpy(d, l->desc, l->n * sizeof *d);
    d[0].size = 0;
    TRY("create_desc_not_initialised",
        tnt_fusion_create(comm, d, l->n, &cfg, &f), IA, IA);
    tnt_fusion_config_t bad = cfg;
    bad.size = 0;
    TRY("create_config_not_initialised",
        tnt_fusion_create(comm, l->desc, l->n, &bad, &f), IA, IA);
    bad = cfg;
    bad.op = TNT_PROD;
    TRY("create_op_prod", tnt_fusion_create(comm, l->desc, l->n, &bad, &f),
        IA, TNT_ERR_UNSUPPORTED);
    bad.op = (tnt_op_t)77;
    TRY("create_op_77", tnt_fusion_create(comm, l->desc, l->n, &bad, &f), IA,
        IA);
#undef TRY
    if (p > 1) {
        /* Bad input on one rank only: it says what is wrong, the others
         * get an error too instead of waiting for it. */
        memcpy(d, l->desc, l->n * sizeof *d);
        if (rank == 0)
            d[3].dtype = (tnt_dtype_t)77;
        f = NULL;
        rc = tnt_fusion_create(comm, d, l->n, &cfg, &f);
        const char *msg = tnt_last_error();
        EXPECT("create_bad_dtype_on_rank0",
               rank == 0 ? rc == IA && names_tensor(msg, 3, l->names[3])
                         : rc < 0 && msg[0],
               rc, "rank %d: %d (%s), expected %s: '%s'", rank, rc,
               tnt_strerror(rc),
               rank == 0 ? "invalid argument naming tensor 3"
                         : "an error (rank 0's input is bad)",
               msg);
        if (rc == TNT_SUCCESS && f)
            tnt_fusion_free(f);
    }
    free(d);
    check_comm_works(comm, p, rep, "comm_after_create_errors");
}

/* Calls on a context with bad arguments: errors, and the context goes on
 * working for a correct iteration afterwards or fails cleanly. */
static void misuse_args(tnt_comm_t comm, int rank, int p, const tlist_t *l,
                        const layout_t *lay, th_report_t *rep)
{
    const tnt_result_t IA = TNT_ERR_INVALID_ARG;
    cstate_t cs;
    cstate_init(&cs, l, rank, p, TNT_AVG);
    cs.ptr = lay->ptr;
    tnt_fusion_t f = make_ctx(comm, l, &cs, rep, "args_create");
    if (f) {
        size_t nb = 0;
        tnt_fusion_bucket_info_t info = TNT_FUSION_BUCKET_INFO_INIT;
        char buf[8];
        tnt_fusion_num_buckets(f, &nb);
        expect_rc(rep, "num_buckets_null",
                  tnt_fusion_num_buckets(f, NULL), IA, IA,
                  "tnt_fusion_num_buckets(f, NULL)");
        expect_rc(rep, "bucket_past_end", tnt_fusion_bucket(f, nb, &info),
                  IA, IA, "tnt_fusion_bucket(f, nbuckets)");
        expect_rc(rep, "bucket_null_info", tnt_fusion_bucket(f, 0, NULL), IA,
                  IA, "tnt_fusion_bucket(f, 0, NULL)");
        expect_rc(rep, "describe_null_buf",
                  tnt_fusion_describe(f, NULL, sizeof buf, NULL), IA, IA,
                  "tnt_fusion_describe(f, NULL, 8, NULL)");
        expect_rc(rep, "ready_unknown", tnt_fusion_ready(f, l->n, buf), IA,
                  IA, "tnt_fusion_ready(f, ntensors, buf)");
        expect_rc(rep, "ready_size_max", tnt_fusion_ready(f, SIZE_MAX, buf),
                  IA, IA, "tnt_fusion_ready(f, SIZE_MAX, buf)");
        expect_rc(rep, "wait_unknown", tnt_fusion_wait(f, l->n), IA, IA,
                  "tnt_fusion_wait(f, ntensors)");
        expect_rc(rep, "ready_null_data", tnt_fusion_ready(f, 0, NULL), IA,
                  IA, "tnt_fusion_ready(f, 0, NULL) with count > 0");
    }
    tnt_fusion_t nul = NULL;
    size_t nb;
    tnt_fusion_bucket_info_t info = TNT_FUSION_BUCKET_INFO_INIT;
    char text[16];
    float x = 0;
    expect_rc(rep, "null_ready", tnt_fusion_ready(nul, 0, &x), IA, IA,
              "tnt_fusion_ready(NULL, ...)");
    expect_rc(rep, "null_wait", tnt_fusion_wait(nul, 0), IA, IA,
              "tnt_fusion_wait(NULL, 0)");
    expect_rc(rep, "null_wait_all", tnt_fusion_wait_all(nul), IA, IA,
              "tnt_fusion_wait_all(NULL)");
    expect_rc(rep, "null_num_buckets", tnt_fusion_num_buckets(nul, &nb), IA,
              IA, "tnt_fusion_num_buckets(NULL, &nb)");
    expect_rc(rep, "null_bucket", tnt_fusion_bucket(nul, 0, &info), IA, IA,
              "tnt_fusion_bucket(NULL, 0, &info)");
    expect_rc(rep, "null_describe",
              tnt_fusion_describe(nul, text, sizeof text, NULL), IA, IA,
              "tnt_fusion_describe(NULL, ...)");
    expect_rc(rep, "null_free", tnt_fusion_free(nul), IA, IA,
              "tnt_fusion_free(NULL)");
    if (f) {
        /* plugin.h: a call refused for a bad argument changes nothing,
         * so the next iteration gives the right values. */
        cstate_reset(&cs);
        for (size_t i = 0; i < l->n; i++)
            cs.seed[i] = mix(555, 0, i);
        atomic_store(&cs.in_iteration, 1);
        tnt_result_t first_rc = TNT_SUCCESS;
        for (size_t i = 0; i < l->n; i++) {
            fill(&cs, i);
            tnt_result_t rc = tnt_fusion_ready(f, i, cs.ptr[i]);
            if (rc != TNT_SUCCESS && first_rc == TNT_SUCCESS)
                first_rc = rc;
        }
        tnt_result_t rc = tnt_fusion_wait_all(f);
        atomic_store(&cs.in_iteration, 0);
        if (first_rc == TNT_SUCCESS && rc == TNT_SUCCESS)
            for (size_t i = 0; i < l->n; i++) {
                check_tensor(&cs, i, "iteration after rejected calls");
                if (atomic_load(&cs.cb_count[i]) != 1)
                    note(&cs, "rank %d: the callback of tensor %zu fired "
                         "%d times", rank, i, atomic_load(&cs.cb_count[i]));
            }
        EXPECT("iteration_after_arg_errors",
               cs.problems == 0 && first_rc == TNT_SUCCESS &&
                   rc == TNT_SUCCESS,
               rc, "rank %d: ready %d, wait_all %d (%s); %s", rank, first_rc,
               rc, tnt_strerror(rc), cs.msg);
        expect_rc(rep, "args_free", tnt_fusion_free(f), TNT_SUCCESS,
                  TNT_SUCCESS, "tnt_fusion_free");
    }
    cstate_free(&cs);
}

/* The same tensor reported twice: the second report is refused
 * (TNT_ERR_INVALID_ARG) and changes nothing, so the rest of the iteration
 * succeeds with the right values (plugin.h). */
static void misuse_twice(tnt_comm_t comm, int rank, int p, const tlist_t *l,
                         const layout_t *lay, th_report_t *rep)
{
    cstate_t cs;
    cstate_init(&cs, l, rank, p, TNT_SUM);
    cs.ptr = lay->ptr;
    tnt_fusion_t f = make_ctx(comm, l, &cs, rep, "twice_create");
    if (!f) {
        cstate_free(&cs);
        return;
    }
    cstate_reset(&cs);
    for (size_t i = 0; i < l->n; i++)
        cs.seed[i] = mix(556, 0, i);
    atomic_store(&cs.in_iteration, 1);
    size_t dup = l->n / 2;
    tnt_result_t rc2 = TNT_SUCCESS, after = TNT_SUCCESS;
    for (size_t i = 0; i < l->n; i++) {
        fill(&cs, i);
        tnt_result_t rc = tnt_fusion_ready(f, i, cs.ptr[i]);
        if (i > dup && rc != TNT_SUCCESS && after == TNT_SUCCESS)
            after = rc;
        if (i == dup)
            rc2 = tnt_fusion_ready(f, dup, cs.ptr[dup]);
    }
    expect_rc(rep, "ready_twice", rc2, TNT_ERR_INVALID_ARG,
              TNT_ERR_INVALID_ARG, "a second tnt_fusion_ready of a tensor");
    tnt_result_t rc = tnt_fusion_wait_all(f);
    atomic_store(&cs.in_iteration, 0);
    if (rc == TNT_SUCCESS) {
        for (size_t i = 0; i < l->n; i++) {
            check_tensor(&cs, i, "iteration with a double report");
            if (atomic_load(&cs.cb_count[i]) != 1)
                note(&cs, "rank %d: the callback of tensor %zu fired %d "
                     "times", rank, i, atomic_load(&cs.cb_count[i]));
        }
    }
    EXPECT("after_ready_twice",
           cs.problems == 0 && after == TNT_SUCCESS && rc == TNT_SUCCESS,
           rc, "rank %d: later reports %d, wait_all %d (%s): %s", rank,
           after, rc, tnt_strerror(rc), cs.msg);
    expect_rc(rep, "twice_free", tnt_fusion_free(f), TNT_SUCCESS,
              TNT_SUCCESS, "tnt_fusion_free");
    cstate_free(&cs);
}

/* wait_all with tensors not yet reported: an error naming the first one
 * at once, not a hang, and nothing else changes: once the two are
 * reported, wait_all ends the iteration with the right values. */
static void misuse_missing(tnt_comm_t comm, int rank, int p,
                           const tlist_t *l, const layout_t *lay,
                           th_report_t *rep)
{
    cstate_t cs;
    cstate_init(&cs, l, rank, p, TNT_AVG);
    cs.ptr = lay->ptr;
    tnt_fusion_t f = make_ctx(comm, l, &cs, rep, "missing_create");
    if (!f) {
        cstate_free(&cs);
        return;
    }
    cstate_reset(&cs);
    th_rng_t r = {mix(557, (uint64_t)rank, 0)};
    size_t m1 = 3 + l->n / 3, m2 = l->n - 2;
    size_t *order = xcalloc(l->n, sizeof *order);
    for (size_t i = 0; i < l->n; i++) {
        order[i] = i;
        cs.seed[i] = mix(557, 0, i);
    }
    shuffle(order, l->n, &r);
    atomic_store(&cs.in_iteration, 1);
    for (size_t j = 0; j < l->n; j++) {
        size_t i = order[j];
        if (i == m1 || i == m2)
            continue;
        fill(&cs, i);
        tnt_result_t rc = tnt_fusion_ready(f, i, cs.ptr[i]);
        if (rc != TNT_SUCCESS)
            note(&cs, "tnt_fusion_ready(%zu): %d (%s)", i, rc,
                 tnt_strerror(rc));
    }
    double t0 = th_now();
    tnt_result_t rc = tnt_fusion_wait_all(f);
    double dt = th_now() - t0;
    const char *msg = tnt_last_error();
    double limit = 5.0 * th_timeout_mult();
    EXPECT("wait_all_missing",
           rc == TNT_ERR_INVALID_ARG && names_tensor(msg, m1, l->names[m1]) &&
               dt < limit && cs.problems == 0,
           rc, "rank %d: tensors %zu and %zu never reported: wait_all "
           "returned %d (%s) after %.1f s, expected invalid argument "
           "naming tensor %zu within %.0f s: '%s' %s", rank, m1, m2, rc,
           tnt_strerror(rc), dt, m1, limit, msg, cs.msg);
    size_t late[2] = {m1, m2};
    tnt_result_t rl = TNT_SUCCESS;
    for (int k = 0; k < 2 && rl == TNT_SUCCESS; k++) {
        fill(&cs, late[k]);
        rl = tnt_fusion_ready(f, late[k], cs.ptr[late[k]]);
    }
    rc = rl == TNT_SUCCESS ? tnt_fusion_wait_all(f) : rl;
    if (rc == TNT_SUCCESS)
        for (size_t i = 0; i < l->n; i++)
            check_tensor(&cs, i, "iteration completed after the refusal");
    EXPECT("wait_all_after_missing_reported",
           rc == TNT_SUCCESS && cs.problems == 0, rc,
           "rank %d: tensors %zu and %zu reported after the refused "
           "wait_all: %d (%s) %s", rank, m1, m2, rc, tnt_strerror(rc),
           cs.msg);
    t0 = th_now();
    rc = tnt_fusion_free(f);
    dt = th_now() - t0;
    atomic_store(&cs.in_iteration, 0);
    EXPECT("free_after_missing", rc == TNT_SUCCESS && dt < limit, rc,
           "tnt_fusion_free after the failed wait_all: %d (%s) after %.1f s: "
           "'%s'", rc, tnt_strerror(rc), dt, tnt_last_error());
    free(order);
    cstate_free(&cs);
}

/* tnt_fusion_free in the middle of a complete iteration waits for it. */
static void free_in_flight(tnt_comm_t comm, int rank, int p,
                           const tlist_t *l, const layout_t *lay,
                           th_report_t *rep)
{
    cstate_t cs;
    cstate_init(&cs, l, rank, p, TNT_SUM);
    cs.ptr = lay->ptr;
    tnt_fusion_t f = make_ctx(comm, l, &cs, rep, "in_flight_create");
    if (!f) {
        cstate_free(&cs);
        return;
    }
    cstate_reset(&cs);
    th_rng_t r = {mix(558, (uint64_t)rank, 0)};
    size_t *order = xcalloc(l->n, sizeof *order);
    for (size_t i = 0; i < l->n; i++) {
        order[i] = i;
        cs.seed[i] = mix(558, 0, i);
    }
    shuffle(order, l->n, &r);
    atomic_store(&cs.in_iteration, 1);
    for (size_t j = 0; j < l->n; j++) {
        fill(&cs, order[j]);
        tnt_result_t rc = tnt_fusion_ready(f, order[j], cs.ptr[order[j]]);
        if (rc != TNT_SUCCESS)
            note(&cs, "tnt_fusion_ready(%zu): %d (%s)", order[j], rc,
                 tnt_strerror(rc));
    }
    tnt_result_t rc = tnt_fusion_free(f);
    atomic_store(&cs.in_iteration, 0);
    for (size_t i = 0; i < l->n; i++) {
        check_tensor(&cs, i, "after tnt_fusion_free");
        if (atomic_load(&cs.cb_count[i]) != 1)
            note(&cs, "rank %d: the callback of tensor %zu fired %d times",
                 rank, i, atomic_load(&cs.cb_count[i]));
    }
    EXPECT("free_in_flight", rc == TNT_SUCCESS && cs.problems == 0, rc,
           "rank %d: tnt_fusion_free with a whole iteration in flight: %d "
           "(%s) '%s'; %s", rank, rc, tnt_strerror(rc), tnt_last_error(),
           cs.msg);
    free(order);
    cstate_free(&cs);
}

/* The communicator is aborted in the middle of an iteration: the error
 * reaches the context, every later call fails, nothing hangs, every
 * tensor the context accepted gets its callback once, and the context
 * can be freed. Last in a job: the communicator is dead afterwards. */
static void misuse_abort(tnt_comm_t comm, int rank, int p, const tlist_t *l,
                         const layout_t *lay, th_report_t *rep)
{
    cstate_t cs;
    cstate_init(&cs, l, rank, p, TNT_SUM);
    cs.ptr = lay->ptr;
    tnt_fusion_t f = make_ctx(comm, l, &cs, rep, "abort_create");
    if (!f) {
        cstate_free(&cs);
        return;
    }
    /* Every rank past its create before any aborts: an abort tells the
     * peers at once (failure notice), and must not hit a create. A
     * barrier lets a rank leave before the others have its last message,
     * so give those a moment too. */
    EXPECT("abort_barrier", tnt_barrier(comm) == TNT_SUCCESS, 0,
           "rank %d: barrier before the abort: '%s'", rank,
           tnt_last_error());
    th_sleep(0.2 * th_timeout_mult());
    cstate_reset(&cs);
    th_rng_t r = {mix(559, (uint64_t)rank, 0)};
    size_t n = l->n;
    size_t *order = xcalloc(n, sizeof *order);
    tnt_result_t *rrc = xcalloc(n, sizeof *rrc);
    for (size_t i = 0; i < n; i++) {
        order[i] = i;
        cs.seed[i] = mix(559, 0, i);
    }
    shuffle(order, n, &r);
    atomic_store(&cs.in_iteration, 1);
    double limit = 10.0 * th_timeout_mult();
    double t0 = th_now();
    size_t first_fail = SIZE_MAX, ok_after_fail = SIZE_MAX;
    for (size_t j = 0; j < n; j++) {
        if (j == n / 2)
            tnt_comm_abort(comm);
        size_t i = order[j];
        fill(&cs, i);
        rrc[i] = tnt_fusion_ready(f, i, cs.ptr[i]);
        if (rrc[i] != TNT_SUCCESS && first_fail == SIZE_MAX)
            first_fail = j;
        else if (rrc[i] == TNT_SUCCESS && first_fail != SIZE_MAX &&
                 ok_after_fail == SIZE_MAX)
            ok_after_fail = j;
    }
    tnt_result_t rc = tnt_fusion_wait_all(f);
    double dt = th_now() - t0;
    EXPECT("abort_iteration_fails",
           rc < 0 && ok_after_fail == SIZE_MAX && dt < limit, rc,
           "rank %d: aborted after %zu of %zu reports: ready failed first at "
           "report %zu%s, wait_all returned %d (%s) after %.1f s: '%s'",
           rank, n / 2, n, first_fail,
           ok_after_fail != SIZE_MAX
               ? ", but a later report succeeded (an error must stick)"
               : "",
           rc, tnt_strerror(rc), dt, tnt_last_error());
    size_t t = n - 1;
    rc = tnt_fusion_ready(f, t, cs.ptr[t]);
    EXPECT("ready_after_error", rc < 0, rc, "tnt_fusion_ready after the "
           "failed iteration returned %d (%s)", rc, tnt_strerror(rc));
    t0 = th_now();
    rc = tnt_fusion_wait(f, 0);
    tnt_result_t rc2 = tnt_fusion_wait_all(f);
    dt = th_now() - t0;
    EXPECT("wait_after_error", rc < 0 && rc2 < 0 && dt < limit, rc,
           "tnt_fusion_wait and wait_all after the failed iteration "
           "returned %d (%s) and %d (%s) after %.1f s", rc, tnt_strerror(rc),
           rc2, tnt_strerror(rc2), dt);
    atomic_store(&cs.in_iteration, 0);
    /* Callbacks: once for each tensor the context accepted (with rc 0
     * only if its values are in place, which the callback checks), at
     * most once for the others. */
    size_t missing = 0, first_missing = SIZE_MAX, extra = 0;
    for (size_t i = 0; i < n; i++) {
        int c = atomic_load(&cs.cb_count[i]);
        if (rrc[i] == TNT_SUCCESS && c != 1 && missing++ == 0)
            first_missing = i;
        if (c > 1)
            extra++;
    }
    EXPECT("abort_callbacks", missing == 0 && extra == 0 && cs.problems == 0,
           0, "rank %d: %zu accepted tensors without exactly one callback "
           "(first: tensor %zu, %d callbacks), %zu tensors with several; %s",
           rank, missing, first_missing,
           first_missing < n ? atomic_load(&cs.cb_count[first_missing]) : 0,
           extra, cs.msg);
    expect_rc(rep, "free_after_error", tnt_fusion_free(f), TNT_SUCCESS,
              TNT_SUCCESS, "tnt_fusion_free after an error");
    free(order);
    free(rrc);
    cstate_free(&cs);
}

static int misuse_rank(tnt_comm_t comm, int rank, int p, void *arg,
                       th_report_t *rep)
{
    (void)arg;
    tlist_t l;
    make_list(mix(600, (uint64_t)p, 0), 12, 40, 256 << 10, &l);
    layout_t lay;
    make_layout(&l, mix(601, (uint64_t)p, 0), &lay);
    misuse_create(comm, rank, p, &l, rep);
    misuse_args(comm, rank, p, &l, &lay, rep);
    misuse_twice(comm, rank, p, &l, &lay, rep);
    misuse_missing(comm, rank, p, &l, &lay, rep);
    check_comm_works(comm, p, rep, "comm_after_misuse");
    free_in_flight(comm, rank, p, &l, &lay, rep);
    /* An empty list: a plan of no buckets whose iteration is empty, or a
     * clear error; never a crash. */
    tnt_fusion_t f = NULL;
    tnt_result_t rc = tnt_fusion_create(comm, NULL, 0, NULL, &f);
    size_t nb = 99;
    tnt_result_t rc2 = rc == TNT_SUCCESS ? tnt_fusion_num_buckets(f, &nb)
                                         : TNT_SUCCESS;
    tnt_result_t rc3 = rc == TNT_SUCCESS ? tnt_fusion_wait_all(f)
                                         : TNT_SUCCESS;
    EXPECT("empty_list",
           rc == TNT_SUCCESS ? rc2 == TNT_SUCCESS && nb == 0 &&
                                   rc3 == TNT_SUCCESS
                             : rc == TNT_ERR_INVALID_ARG &&
                                   tnt_last_error()[0],
           rc, "no tensors: create %d (%s), num_buckets %d -> %zu, wait_all "
           "%d: '%s'", rc, tnt_strerror(rc), rc2, nb, rc3, tnt_last_error());
    if (rc == TNT_SUCCESS)
        tnt_fusion_free(f);
    misuse_abort(comm, rank, p, &l, &lay, rep);
    free_layout(&lay, l.n);
    free_list(&l);
    return 0;
}

static void test_misuse(void)
{
    static const int ps[] = {1, 2, 3};
    for (size_t k = 0; k < NELEM(ps); k++) {
        char name[64];
        snprintf(name, sizeof name, "fusion misuse p=%d", ps[k]);
        const char *env[] = {"TNT_TIMEOUT=10", NULL};
        th_job_t job = {name, ps[k], env, misuse_rank, NULL, 90, 0, 0};
        th_run_job(&job, NULL);
    }
}

/* ---- suite: defaults ------------------------------------------------------------------ */

typedef struct defaults_arg {
    size_t want_min; /* 0: the environment's threshold is invalid */
} defaults_arg_t;

static int defaults_rank(tnt_comm_t comm, int rank, int p, void *arg,
                         th_report_t *rep)
{
    const defaults_arg_t *da = arg;
    tlist_t l;
    make_list(mix(700, 0, 0), 30, 120, 1 << 20, &l);
    layout_t lay;
    make_layout(&l, mix(701, 0, 0), &lay);
    tnt_fusion_t f = NULL;
    tnt_result_t rc = tnt_fusion_create(comm, l.desc, l.n, NULL, &f);
    if (da->want_min == 0) {
        const char *msg = tnt_last_error();
        EXPECT("bad_env_threshold",
               (rc == TNT_ERR_CONFIG || rc == TNT_ERR_INVALID_ARG) &&
                   strstr(msg, "TNT_FUSION_THRESHOLD"),
               rc, "tnt_fusion_create with defaults and a malformed "
               "TNT_FUSION_THRESHOLD returned %d (%s), expected a config "
               "error naming it: '%s'", rc, tnt_strerror(rc), msg);
        if (rc == TNT_SUCCESS)
            tnt_fusion_free(f);
        f = NULL;
        /* An explicit threshold does not need the environment. */
        tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
        cfg.min_bucket_bytes = 8192;
        rc = tnt_fusion_create(comm, l.desc, l.n, &cfg, &f);
        th_report_check(rep, "explicit_threshold_create", rc, 0, 0, NULL, 0);
        if (rc == TNT_SUCCESS)
            tnt_fusion_free(f);
    } else {
        /* NULL config: avg, the environment's threshold, no limit. */
        th_report_check(rep, "default_create", rc, 0, 0, NULL, 0);
        if (rc == TNT_SUCCESS) {
            resolved_t rv = {da->want_min, SIZE_MAX, da->want_min};
            char msg[TH_MSG_MAX] = "";
            int ok = check_plan(f, &l, &rv, msg, sizeof msg);
            EXPECT("default_plan", ok, 0, "%s", msg);
            cstate_t cs;
            cstate_init(&cs, &l, rank, p, TNT_AVG);
            cs.f = f;
            run_iteration(&cs, &lay, 702, 0, NULL, 0, rep,
                          "default_iteration_avg");
            cstate_free(&cs);
            th_report_check(rep, "default_free", tnt_fusion_free(f), 0, 0,
                            NULL, 0);
        }
        /* Explicit fields win over the environment; defaulted ones do
         * not change the plan. */
        static const size_t mins[] = {0, TNT_FUSION_DEFAULT};
        for (size_t k = 0; k < NELEM(mins); k++) {
            tnt_fusion_config_t cfg = TNT_FUSION_CONFIG_INIT;
            cfg.op = TNT_SUM;
            cfg.min_bucket_bytes = mins[k];
            f = NULL;
            rc = tnt_fusion_create(comm, l.desc, l.n, &cfg, &f);
            char name[48];
            snprintf(name, sizeof name, "config_min_%s",
                     k == 0 ? "0" : "default");
            if (rc != TNT_SUCCESS) {
                th_report_check(rep, name, rc, 0, 0, NULL, 0);
                continue;
            }
            size_t m = mins[k] == TNT_FUSION_DEFAULT ? da->want_min : 0;
            resolved_t rv = {m, SIZE_MAX, m};
            char msg[TH_MSG_MAX] = "";
            int ok = check_plan(f, &l, &rv, msg, sizeof msg);
            EXPECT(name, ok, 0, "%s", msg);
            tnt_fusion_free(f);
        }
    }
    free_layout(&lay, l.n);
    free_list(&l);
    return 0;
}

static void test_defaults(void)
{
    const char *env_4k[] = {"TNT_FUSION_THRESHOLD=4k", NULL};
    const char *env_none[] = {"TNT_FUSION_THRESHOLD", NULL};
    const char *env_bad[] = {"TNT_FUSION_THRESHOLD=12q", NULL};
    defaults_arg_t a4 = {4096}, a32 = {32768}, abad = {0};
    th_job_t j1 = {"fusion defaults TNT_FUSION_THRESHOLD=4k", 2, env_4k,
                   defaults_rank, &a4, 60, 0, 0};
    th_run_job(&j1, NULL);
    th_job_t j2 = {"fusion defaults, no TNT_FUSION_THRESHOLD", 2, env_none,
                   defaults_rank, &a32, 60, 0, 0};
    th_run_job(&j2, NULL);
    th_job_t j3 = {"fusion defaults TNT_FUSION_THRESHOLD=12q", 2, env_bad,
                   defaults_rank, &abad, 60, 0, 0};
    th_run_job(&j3, NULL);
}

/* ---- main -------------------------------------------------------------------------- */

static const th_test_def_t k_tests[] = {
    {"fusion", "random_lists", test_random_lists},
    {"fusion", "iterations", test_iterations},
    {"fusion", "mismatch", test_mismatch},
    {"fusion", "misuse", test_misuse},
    {"fusion", "defaults", test_defaults},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
