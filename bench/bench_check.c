/*
 * The checked iteration of tnt-bench: inputs from datagen for this rank,
 * outputs poisoned first so that an element the collective forgot to
 * write cannot pass, then every element of this rank's output compared
 * with what datagen says it must be. Each rank checks only its own
 * output; bench_run.c sums the counts over ranks.
 */
#include <stdio.h>

#include "bench.h"
#include "datagen.h"

/* Elements of the send and receive buffers for `count` elements per rank
 * (or per buffer for allreduce and broadcast). */
void bench_buf_counts(const bench_t *b, size_t count, size_t *nsend,
                      size_t *nrecv)
{
    size_t p = (size_t)b->nranks;
    switch (b->o->coll) {
    case BENCH_ALLREDUCE:
        *nsend = count;
        *nrecv = count;
        break;
    case BENCH_BROADCAST:
        *nsend = 0;
        *nrecv = count;
        break;
    case BENCH_ALLGATHER:
        *nsend = count;
        *nrecv = p * count;
        break;
    default:
        *nsend = p * count;
        *nrecv = count;
        break;
    }
}

/* Inputs from datagen, outputs poisoned so that an element the collective
 * forgot to write cannot pass. */
void bench_prepare_check(bench_t *b, size_t count, int inplace,
                         uint64_t seed)
{
    const bench_opts_t *o = b->o;
    tnt_dtype_t dt = o->dtype;
    size_t nsend, nrecv;
    bench_buf_counts(b, count, &nsend, &nrecv);
    switch (o->coll) {
    case BENCH_ALLREDUCE:
        if (inplace) {
            tnt_gen_fill(b->recv, count, dt, o->op, seed, b->rank);
        } else {
            tnt_gen_fill(b->send, count, dt, o->op, seed, b->rank);
            tnt_gen_poison(b->recv, count, dt);
        }
        break;
    case BENCH_BROADCAST:
        if (b->rank == o->root)
            tnt_gen_fill(b->recv, count, dt, BENCH_DATA_OP, seed, o->root);
        else
            tnt_gen_poison(b->recv, count, dt);
        break;
    case BENCH_ALLGATHER:
        tnt_gen_poison(b->recv, nrecv, dt);
        if (inplace)
            tnt_gen_fill(b->recv + (size_t)b->rank * count * b->dsize, count,
                         dt, BENCH_DATA_OP, seed, b->rank);
        else
            tnt_gen_fill(b->send, count, dt, BENCH_DATA_OP, seed, b->rank);
        break;
    default:
        tnt_gen_fill(b->send, nsend, dt, o->op, seed, b->rank);
        tnt_gen_poison(b->recv, count, dt);
        break;
    }
}

/* Compare count elements of buf with rank `src`'s generated input. */
static size_t check_copy(const unsigned char *buf, size_t count,
                         tnt_dtype_t dt, uint64_t seed, int src,
                         size_t *first)
{
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
        /* Both sides are exact in dt, so == on doubles is equality of
         * the dtype values; a NaN never compares equal. */
        if (tnt_gen_load(buf, i, dt) !=
            tnt_gen_value(seed, src, i, dt, BENCH_DATA_OP)) {
            if (wrong == 0)
                *first = i;
            wrong++;
        }
    }
    return wrong;
}

/* Wrong elements of this rank's output; the first one is reported on
 * stderr, with the value found and the value expected. */
uint64_t bench_count_wrong(bench_t *b, size_t count, int inplace,
                           uint64_t seed)
{
    const bench_opts_t *o = b->o;
    tnt_dtype_t dt = o->dtype;
    size_t wrong = 0, first = 0;
    double want = 0.0;
    switch (o->coll) {
    case BENCH_ALLREDUCE:
    case BENCH_REDUCE_SCATTER: {
        size_t base = o->coll == BENCH_ALLREDUCE
                          ? 0 : (size_t)b->rank * count;
        wrong = tnt_gen_check_allreduce(b->recv, base, count, dt, o->op,
                                        seed, b->nranks, &first);
        if (wrong) {
            want = tnt_gen_expected(seed, b->nranks, first, dt, o->op);
            first -= base;
        }
        break;
    }
    case BENCH_BROADCAST:
        wrong = check_copy(b->recv, count, dt, seed, o->root, &first);
        if (wrong)
            want = tnt_gen_value(seed, o->root, first, dt, BENCH_DATA_OP);
        break;
    default:
        for (int r = 0; r < b->nranks; r++) {
            size_t f = 0;
            size_t w = check_copy(b->recv + (size_t)r * count * b->dsize,
                                  count, dt, seed, r, &f);
            if (w && !wrong) {
                first = (size_t)r * count + f;
                want = tnt_gen_value(seed, r, f, dt, BENCH_DATA_OP);
            }
            wrong += w;
        }
        break;
    }
    if (wrong)
        fprintf(stderr, "tnt-bench: rank %d: %s %zu elements %s: %zu wrong;"
                " first at index %zu: got %g, expected %g\n", b->rank,
                bench_coll_name(o->coll), count,
                inplace ? "in place" : "out of place", wrong, first,
                tnt_gen_load(b->recv, first, dt), want);
    return (uint64_t)wrong;
}
