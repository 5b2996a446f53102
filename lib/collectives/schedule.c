/*
 * Building schedules: operations are appended, dependencies collected as
 * edges, and finalize() turns the edges into per-operation successor
 * lists (compressed, one array) so that the engine can release successors
 * in O(1) per edge.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/schedule.h"
#include "util/error.h"

void tnt__sched_init(tnt_sched_t *s, int rank, int nranks, size_t esize)
{
    memset(s, 0, sizeof(*s));
    s->rank = rank;
    s->nranks = nranks;
    s->esize = esize;
}

void tnt__sched_destroy(tnt_sched_t *s)
{
    free(s->ops);
    free(s->edges);
    free(s->succ);
    memset(s, 0, sizeof(*s));
}

static uint32_t add_op(tnt_sched_t *s, const tnt_sop_t *op)
{
    if (s->oom)
        return TNT_SOP_NONE;
    if (s->nops == s->ops_cap) {
        uint32_t cap = s->ops_cap ? s->ops_cap * 2 : 16;
        tnt_sop_t *n = realloc(s->ops, (size_t)cap * sizeof(*n));
        if (!n || cap >= TNT_SOP_NONE) {
            s->oom = 1;
            return TNT_SOP_NONE;
        }
        s->ops = n;
        s->ops_cap = cap;
    }
    s->ops[s->nops] = *op;
    return s->nops++;
}

uint32_t tnt__sched_send(tnt_sched_t *s, int peer, uint32_t step,
                         tnt_bufref_t src, size_t bytes)
{
    tnt_sop_t op = {.kind = TNT_SOP_SEND, .peer = peer, .step = step,
                    .a = src, .bytes = bytes};
    return add_op(s, &op);
}

uint32_t tnt__sched_recv(tnt_sched_t *s, int peer, uint32_t step,
                         tnt_bufref_t dst, size_t bytes)
{
    tnt_sop_t op = {.kind = TNT_SOP_RECV, .peer = peer, .step = step,
                    .dst = dst, .bytes = bytes};
    return add_op(s, &op);
}

uint32_t tnt__sched_reduce(tnt_sched_t *s, tnt_bufref_t dst, tnt_bufref_t a,
                           tnt_bufref_t b, size_t bytes)
{
    tnt_sop_t op = {.kind = TNT_SOP_REDUCE, .peer = -1, .dst = dst, .a = a,
                    .b = b, .bytes = bytes};
    return add_op(s, &op);
}

uint32_t tnt__sched_copy(tnt_sched_t *s, tnt_bufref_t dst, tnt_bufref_t src,
                         size_t bytes)
{
    tnt_sop_t op = {.kind = TNT_SOP_COPY, .peer = -1, .dst = dst, .a = src,
                    .bytes = bytes};
    return add_op(s, &op);
}

uint32_t tnt__sched_scale(tnt_sched_t *s, tnt_bufref_t dst, size_t bytes)
{
    tnt_sop_t op = {.kind = TNT_SOP_SCALE, .peer = -1, .dst = dst,
                    .bytes = bytes};
    return add_op(s, &op);
}

uint32_t tnt__sched_canon(tnt_sched_t *s, tnt_bufref_t dst, tnt_bufref_t own,
                          int self, tnt_bufref_t base, size_t stride,
                          size_t bytes)
{
    tnt_sop_t op = {.kind = TNT_SOP_CANON, .peer = self, .dst = dst,
                    .a = own, .b = base, .stride = stride, .bytes = bytes};
    return add_op(s, &op);
}

void tnt__sched_dep(tnt_sched_t *s, uint32_t before, uint32_t after)
{
    if (before == TNT_SOP_NONE || after == TNT_SOP_NONE || s->oom)
        return;
    if (s->nedges == s->edges_cap) {
        uint32_t cap = s->edges_cap ? s->edges_cap * 2 : 32;
        tnt_sched_edge_t *n = realloc(s->edges, (size_t)cap * sizeof(*n));
        if (!n || cap >= TNT_SOP_NONE) {
            s->oom = 1;
            return;
        }
        s->edges = n;
        s->edges_cap = cap;
    }
    s->edges[s->nedges].from = before;
    s->edges[s->nedges].to = after;
    s->nedges++;
}

size_t tnt__sched_scratch(tnt_sched_t *s, size_t bytes)
{
    size_t off = (s->scratch_bytes + 63) & ~(size_t)63;
    s->scratch_bytes = off + bytes;
    return off;
}

static tnt_bufref_t splice_ref(tnt_bufref_t r, const tnt_splice_t *m,
                               size_t scratch)
{
    if (r.buf == TNT_BUF_SCRATCH)
        return tnt__ref(TNT_BUF_SCRATCH, scratch + r.off);
    return tnt__ref(m->region.buf, m->region.off + r.off);
}

uint32_t tnt__sched_splice(tnt_sched_t *s, const tnt_sched_t *sub,
                           const tnt_splice_t *m, uint32_t entry)
{
    size_t scratch = tnt__sched_scratch(s, sub->scratch_bytes);
    uint32_t base = s->nops;
    for (uint32_t i = 0; i < sub->nops; i++) {
        tnt_sop_t op = sub->ops[i];
        if (op.kind == TNT_SOP_SEND || op.kind == TNT_SOP_RECV) {
            op.peer = m->peers[op.peer];
            op.step += m->step_base;
        }
        op.dst = splice_ref(op.dst, m, scratch);
        op.a = splice_ref(op.a, m, scratch);
        op.b = splice_ref(op.b, m, scratch);
        op.ndeps = op.succ_begin = op.succ_count = 0;
        if (add_op(s, &op) != base + i)
            return TNT_SOP_NONE; /* out of memory: finalize reports it */
    }
    for (uint32_t e = 0; e < sub->nedges; e++)
        tnt__sched_dep(s, base + sub->edges[e].from, base + sub->edges[e].to);
    uint32_t join = tnt__sched_copy(s, m->region, m->region, 0);
    for (uint32_t i = 0; i < sub->nops; i++) {
        if (sub->ops[i].ndeps == 0)
            tnt__sched_dep(s, entry, base + i);
        if (sub->ops[i].succ_count == 0)
            tnt__sched_dep(s, base + i, join);
    }
    tnt__sched_dep(s, entry, join);
    return join;
}

tnt_result_t tnt__sched_finalize(tnt_sched_t *s)
{
    if (s->oom)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory building a "
                          "schedule of %u operations", s->nops);
    free(s->succ);
    s->succ = malloc(((size_t)s->nedges + 1) * sizeof(*s->succ));
    if (!s->succ)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory finalizing a "
                          "schedule");
    for (uint32_t i = 0; i < s->nops; i++) {
        s->ops[i].ndeps = 0;
        s->ops[i].succ_count = 0;
    }
    for (uint32_t e = 0; e < s->nedges; e++) {
        s->ops[s->edges[e].from].succ_count++;
        s->ops[s->edges[e].to].ndeps++;
    }
    uint32_t pos = 0;
    for (uint32_t i = 0; i < s->nops; i++) {
        s->ops[i].succ_begin = pos;
        pos += s->ops[i].succ_count;
        s->ops[i].succ_count = 0;
    }
    for (uint32_t e = 0; e < s->nedges; e++) {
        tnt_sop_t *from = &s->ops[s->edges[e].from];
        s->succ[from->succ_begin + from->succ_count++] = s->edges[e].to;
    }
    return TNT_SUCCESS;
}
