/*
 * The cost model (model.h): a discrete-event run of the schedules of all
 * ranks in simulated time. Operations are taken in the order of the time
 * they become ready (a binary heap), so a shared port serves messages
 * first come, first served.
 *
 * Symmetry: many schedules are the same on every host up to renaming the
 * ranks, by rotation (ring: rank r+k*rph plays rank r's part with every
 * peer shifted by k*rph) or by exclusive or (recursive doubling and
 * halving on powers of two). Then one host's ranks stand for all: a
 * message rank q sends to rank m is, renamed, the message q's
 * representative on host 0 sends to m renamed the same way, and leaves at
 * the same time. This keeps the model O(operations of one host), which
 * is what makes the ring (O(p) operations per rank) at 4,096 ranks
 * possible. Whether a schedule is symmetric is checked on sampled hosts
 * (first, second, middle, last and a few more), not proven; a schedule
 * that fails the check is run with all ranks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/model.h"
#include "util/error.h"

typedef struct mop {
    double ready;        /* latest completion among dependencies */
    size_t bytes;
    int32_t rank, peer;
    uint32_t step, deps; /* deps: dependencies not yet complete */
    uint32_t succ_begin, succ_count; /* into model_t.succ, global */
    uint32_t local;      /* index in its rank's schedule */
    uint8_t kind;
} mop_t;

typedef struct mslot {
    int used, sent;
    int32_t src, dst;
    uint32_t step;
    double arrival;
    uint32_t waiter;      /* parked receive (global op), or UINT32_MAX */
    double waiter_ready;
} mslot_t;

/* Heap entries order by time, then by the rank's index on its host and
 * the operation's index in its schedule: ties (common: every rank starts
 * at 0) are then broken alike on every host, so playing one host stands
 * exactly for playing all. */
typedef struct hent {
    double t;
    uint32_t op;
    uint64_t tie; /* local rank << 32 | operation index in the rank */
} hent_t;

static int before(const hent_t *x, const hent_t *y)
{
    return x->t < y->t || (x->t == y->t && x->tie < y->tie);
}

enum { SYM_NONE = 0, SYM_ROT, SYM_XOR };

typedef struct model {
    const tnt_model_params_t *m;
    int p, rph, nsim, sym;
    mop_t *ops;
    size_t nops;
    uint32_t *succ;
    size_t nsucc;
    mslot_t *slots;
    size_t nslots;
    hent_t *heap;
    size_t nheap;
    double *port_free;   /* nsim ranks' own ports (intra-host sends) */
    double *nic_free;    /* hosts' NICs (inter-host sends) */
    double *cpu_free;    /* nsim ranks' compute */
    double end;
    size_t messages;
} model_t;

static int host_of(const model_t *md, int r)
{
    return r / md->rph;
}

static void heap_push(model_t *md, double t, uint32_t op)
{
    const mop_t *o = &md->ops[op];
    hent_t e = {t, op, (uint64_t)(o->rank % md->rph) << 32 | o->local};
    size_t i = md->nheap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(&e, &md->heap[up]))
            break;
        md->heap[i] = md->heap[up];
        i = up;
    }
    md->heap[i] = e;
}

static hent_t heap_pop(model_t *md)
{
    hent_t top = md->heap[0], last = md->heap[--md->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= md->nheap)
            break;
        if (c + 1 < md->nheap && before(&md->heap[c + 1], &md->heap[c]))
            c++;
        if (!before(&md->heap[c], &last))
            break;
        md->heap[i] = md->heap[c];
        i = c;
    }
    if (md->nheap)
        md->heap[i] = last;
    return top;
}

static mslot_t *slot_of(model_t *md, int32_t src, int32_t dst, uint32_t step)
{
    uint64_t h = ((uint64_t)(uint32_t)src * 0x9e3779b97f4a7c15ull) ^
                 ((uint64_t)(uint32_t)dst * 0xc2b2ae3d27d4eb4full) ^
                 ((uint64_t)step * 0x165667b19e3779f9ull);
    h ^= h >> 29;
    for (size_t i = (size_t)h & (md->nslots - 1);;
         i = (i + 1) & (md->nslots - 1)) {
        mslot_t *e = &md->slots[i];
        if (!e->used) {
            e->used = 1;
            e->src = src;
            e->dst = dst;
            e->step = step;
            e->waiter = UINT32_MAX;
            return e;
        }
        if (e->src == src && e->dst == dst && e->step == step)
            return e;
    }
}

/* The key under which the message rank q sends to simulated rank m is
 * recorded: renamed into the frame of q's representative. */
static void renamed(const model_t *md, int q, int m, int32_t *src,
                    int32_t *dst)
{
    int shift = q - q % md->rph; /* k*rph: q's host, first rank */
    if (md->sym == SYM_ROT) {
        *src = q - shift;
        *dst = (m - shift + md->p) % md->p;
    } else if (md->sym == SYM_XOR) {
        *src = q ^ shift;
        *dst = m ^ shift;
    } else {
        *src = q;
        *dst = m;
    }
}

static void finish(model_t *md, uint32_t op, double t)
{
    const mop_t *o = &md->ops[op];
    if (t > md->end)
        md->end = t;
    for (uint32_t i = 0; i < o->succ_count; i++) {
        mop_t *n = &md->ops[md->succ[o->succ_begin + i]];
        if (t > n->ready)
            n->ready = t;
        if (--n->deps == 0)
            heap_push(md, n->ready, md->succ[o->succ_begin + i]);
    }
}

static void run_op(model_t *md, uint32_t op, double t)
{
    const mop_t *o = &md->ops[op];
    const tnt_model_params_t *m = md->m;
    switch (o->kind) {
    case TNT_SOP_SEND: {
        int inter = host_of(md, o->rank) != host_of(md, o->peer);
        const tnt_model_link_t *l = inter ? &m->inter : &m->intra;
        /* The rank's port is busy o per message; the bytes then go out
         * on the host's NIC (inter-host) or the rank's port (intra). */
        double start = t > md->port_free[o->rank] ? t
                                                  : md->port_free[o->rank];
        double wire = start + l->o, xfer = (double)o->bytes * l->beta;
        if (inter) {
            double *nic = &md->nic_free[host_of(md, o->rank)];
            wire = wire > *nic ? wire : *nic;
            *nic = wire + xfer;
            md->port_free[o->rank] = start + l->o;
        } else {
            md->port_free[o->rank] = wire + xfer;
        }
        mslot_t *s = slot_of(md, o->rank, o->peer, o->step);
        s->sent = 1;
        s->arrival = wire + xfer + l->alpha;
        md->messages++;
        if (s->waiter != UINT32_MAX) {
            double at = s->waiter_ready > s->arrival ? s->waiter_ready
                                                     : s->arrival;
            finish(md, s->waiter, at);
            s->waiter = UINT32_MAX;
        }
        finish(md, op, wire + xfer);
        break;
    }
    case TNT_SOP_RECV: {
        int32_t src, dst;
        renamed(md, o->peer, o->rank, &src, &dst);
        mslot_t *s = slot_of(md, src, dst, o->step);
        if (s->sent) {
            finish(md, op, t > s->arrival ? t : s->arrival);
        } else {
            s->waiter = op;
            s->waiter_ready = t;
        }
        break;
    }
    default: {
        /* A canonical reduction reads k inputs: k - 1 reductions. */
        double per = o->kind == TNT_SOP_REDUCE ? m->gamma
                     : o->kind == TNT_SOP_CANON
                         ? m->gamma * (double)(md->p > 1 ? md->p - 1 : 1)
                         : m->copy;
        double *cpu = &md->cpu_free[o->rank];
        double start = t > *cpu ? t : *cpu;
        *cpu = start + (double)o->bytes * per;
        finish(md, op, *cpu);
        break;
    }
    }
}

/* Append rank r's schedule s to the model's operations. */
/* Room for `need` elements of `size` bytes (and one more) in *arr of
 * *cap: kept, or doubled past need. -1 when out of memory (*arr kept). */
static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = 2 * need;
    void *n = realloc(*arr, (c + 1) * size);
    if (!n)
        return -1;
    *arr = n;
    *cap = c;
    return 0;
}

static int add_rank(model_t *md, const tnt_sched_t *s, size_t *cap,
                    size_t *scap)
{
    size_t base = md->nops;
    /* The capacities are estimates from host 0's ranks; where the other
     * ranks have more (a chain whose root, rank 0, only sends, with one
     * rank a host), grow: the caller bounds the total by max_ops. */
    void *ops = md->ops, *succ = md->succ;
    int bad = grow(&ops, cap, md->nops + s->nops, sizeof(mop_t)) ||
              grow(&succ, scap, md->nsucc + s->nedges, sizeof(uint32_t));
    md->ops = ops;
    md->succ = succ;
    if (bad)
        return -1;
    for (uint32_t i = 0; i < s->nops; i++) {
        const tnt_sop_t *o = &s->ops[i];
        mop_t *d = &md->ops[base + i];
        d->ready = 0;
        d->bytes = o->bytes;
        d->rank = s->rank;
        d->peer = o->peer;
        d->step = o->step;
        d->deps = o->ndeps;
        d->kind = o->kind;
        d->local = i;
        d->succ_begin = (uint32_t)md->nsucc;
        d->succ_count = o->succ_count;
        for (uint32_t k = 0; k < o->succ_count; k++)
            md->succ[md->nsucc++] = (uint32_t)base +
                                    s->succ[o->succ_begin + k];
    }
    md->nops += s->nops;
    return 0;
}

/* Is q's schedule rep's renamed by `sym` (same operations, kinds, steps,
 * sizes and dependencies; peers renamed)? */
static int same_renamed(const tnt_sched_t *rep, const tnt_sched_t *q,
                        int sym, int shift, int p)
{
    if (rep->nops != q->nops || rep->nedges != q->nedges)
        return 0;
    for (uint32_t i = 0; i < rep->nops; i++) {
        const tnt_sop_t *a = &rep->ops[i], *b = &q->ops[i];
        if (a->kind != b->kind || a->bytes != b->bytes ||
            a->ndeps != b->ndeps || a->succ_count != b->succ_count)
            return 0;
        if (a->kind == TNT_SOP_SEND || a->kind == TNT_SOP_RECV) {
            int want = sym == SYM_ROT ? (a->peer + shift) % p
                                      : a->peer ^ shift;
            if (a->step != b->step || b->peer != want)
                return 0;
        }
        for (uint32_t k = 0; k < a->succ_count; k++)
            if (rep->succ[a->succ_begin + k] != q->succ[b->succ_begin + k])
                return 0;
    }
    return 1;
}

/* The symmetry of a's schedules over hosts, checked on sampled hosts. */
static int find_symmetry(const tnt_coll_args_t *a, int algo, int rph,
                         const tnt_sched_t *reps)
{
    int p = a->nranks, nh = p / rph;
    if (p % rph || nh < 2)
        return SYM_NONE;
    int hosts[] = {1, 2, nh / 2, nh / 3, nh - 1, (nh * 7) / 11};
    for (int sym = SYM_ROT; sym <= SYM_XOR; sym++) {
        if (sym == SYM_XOR && ((p & (p - 1)) || (rph & (rph - 1))))
            continue;
        int ok = 1;
        for (size_t h = 0; ok && h < sizeof(hosts) / sizeof(hosts[0]); h++) {
            int k = hosts[h] < 1 ? 1 : hosts[h] >= nh ? nh - 1 : hosts[h];
            for (int c = 0; ok && c < rph; c++) {
                tnt_coll_args_t b = *a;
                tnt_sched_t s;
                b.rank = k * rph + c;
                if (tnt__build_schedule(&b, algo, &s) != TNT_SUCCESS)
                    return SYM_NONE;
                ok = same_renamed(&reps[c], &s, sym, k * rph, p);
                tnt__sched_destroy(&s);
            }
        }
        if (ok)
            return sym;
    }
    return SYM_NONE;
}

static void model_free(model_t *md)
{
    free(md->ops);
    free(md->succ);
    free(md->slots);
    free(md->heap);
    free(md->port_free);
    free(md->nic_free);
    free(md->cpu_free);
}

/* Build the simulated ranks' schedules into md (all p, or one host's
 * when the schedules are symmetric). */
static tnt_result_t build_all(model_t *md, const tnt_coll_args_t *a,
                              int algo, size_t max_ops)
{
    int p = a->nranks, rph = md->rph;
    tnt_sched_t *reps = calloc((size_t)rph, sizeof(*reps));
    if (!reps)
        return tnt__error(TNT_ERR_NO_MEMORY, "model: out of memory");
    size_t need = 0, edges = 0;
    for (int c = 0; c < rph; c++) {
        tnt_coll_args_t b = *a;
        b.rank = c;
        tnt_result_t rc = tnt__build_schedule(&b, algo, &reps[c]);
        if (rc != TNT_SUCCESS) {
            for (int k = 0; k < c; k++)
                tnt__sched_destroy(&reps[k]);
            free(reps);
            return rc;
        }
        need += reps[c].nops;
        edges += reps[c].nedges;
    }
    md->sym = md->m->all_ranks ? SYM_NONE : find_symmetry(a, algo, rph, reps);
    md->nsim = md->sym ? rph : p;
    /* All ranks: size from host 0's ranks, scaled (checked as we go). */
    size_t cap = md->sym ? need : (need / (size_t)rph + 1) * (size_t)p * 2;
    size_t scap = md->sym ? edges : (edges / (size_t)rph + 1) * (size_t)p * 2;
    tnt_result_t rc = TNT_SUCCESS;
    if ((md->sym ? need : need / (size_t)rph * (size_t)p) > max_ops)
        rc = TNT_ERR_NO_MEMORY;
    if (rc == TNT_SUCCESS) {
        md->ops = malloc((cap + 1) * sizeof(mop_t));
        md->succ = malloc((scap + 1) * sizeof(uint32_t));
        if (!md->ops || !md->succ)
            rc = TNT_ERR_NO_MEMORY;
    }
    for (int c = 0; c < rph && rc == TNT_SUCCESS; c++)
        if (add_rank(md, &reps[c], &cap, &scap) != 0)
            rc = TNT_ERR_NO_MEMORY;
    for (int c = 0; c < rph; c++)
        tnt__sched_destroy(&reps[c]);
    free(reps);
    for (int r = rph; r < md->nsim && rc == TNT_SUCCESS; r++) {
        tnt_coll_args_t b = *a;
        tnt_sched_t s;
        b.rank = r;
        rc = tnt__build_schedule(&b, algo, &s);
        if (rc != TNT_SUCCESS)
            break;
        if (md->nops + s.nops > max_ops || add_rank(md, &s, &cap, &scap))
            rc = TNT_ERR_NO_MEMORY;
        tnt__sched_destroy(&s);
    }
    if (rc == TNT_ERR_NO_MEMORY)
        return tnt__error(rc, "model: the schedules of %d ranks exceed %zu "
                          "operations", p, max_ops);
    return rc;
}

tnt_result_t tnt__model_run(const tnt_coll_args_t *a, int algo, int rph,
                            const tnt_model_params_t *m, size_t max_ops,
                            tnt_model_result_t *out)
{
    model_t md;
    memset(&md, 0, sizeof(md));
    memset(out, 0, sizeof(*out));
    md.m = m;
    md.p = a->nranks;
    md.rph = rph < 1 ? 1 : rph > a->nranks ? a->nranks : rph;
    tnt_result_t rc = build_all(&md, a, algo, max_ops);
    if (rc != TNT_SUCCESS) {
        model_free(&md);
        return rc;
    }
    size_t sends = 0;
    for (size_t i = 0; i < md.nops; i++)
        sends += md.ops[i].kind == TNT_SOP_SEND;
    md.nslots = 16;
    while (md.nslots < 2 * sends + 2)
        md.nslots *= 2;
    int nhosts = (md.p + md.rph - 1) / md.rph;
    md.slots = calloc(md.nslots, sizeof(mslot_t));
    md.heap = malloc((md.nops + 1) * sizeof(hent_t));
    md.port_free = calloc((size_t)md.p, sizeof(double));
    md.nic_free = calloc((size_t)nhosts, sizeof(double));
    md.cpu_free = calloc((size_t)md.p, sizeof(double));
    if (!md.slots || !md.heap || !md.port_free || !md.nic_free ||
        !md.cpu_free) {
        model_free(&md);
        return tnt__error(TNT_ERR_NO_MEMORY, "model: out of memory");
    }
    for (size_t i = 0; i < md.nops; i++)
        if (md.ops[i].deps == 0)
            heap_push(&md, 0.0, (uint32_t)i);
    size_t done = 0;
    while (md.nheap) {
        hent_t e = heap_pop(&md);
        run_op(&md, e.op, e.t);
        done++;
    }
    /* Every operation must have run; a parked receive left means the
     * schedules do not match (the simulator's tests say where). */
    size_t left = 0;
    (void)done;
    for (size_t i = 0; i < md.nslots; i++)
        left += md.slots[i].used && md.slots[i].waiter != UINT32_MAX;
    out->time = md.end;
    out->ops = md.nops;
    out->messages = md.messages;
    out->symmetric = md.sym != SYM_NONE;
    model_free(&md);
    if (left)
        return tnt__error(TNT_ERR_INTERNAL, "model: %zu receives never "
                          "matched (%zu of the operations ran)", left, done);
    return TNT_SUCCESS;
}
