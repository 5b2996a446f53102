/*
 * The canonical reduction of the reproducible mode (TNT_REPRODUCIBLE=1,
 * docs/design.md "Reproducible reductions"): k inputs of one region, one
 * per rank, combined element by element in one fixed order over the rank
 * indices 0..k-1, by one C function of element-wise IEEE operations (it
 * exists once per SIMD level, as the kernels of reduce.h, and gives the
 * same bits at each, as in scalar code). Each element's result is a
 * function of the k values and their ranks only, so any schedule that
 * hands the owner of a region all k inputs gives the same bits, whatever
 * the region's bounds (segments, chunks, fusion buckets), the transport
 * or the thread.
 *
 * Floating-point SUM and AVG accumulate in double-double: the running sum
 * s and the sum c of the exact rounding errors of each s + x (Knuth's
 * TwoSum, which has no multiplication, so no FMA contraction can change
 * it), then s + c rounded once to the element type (round to odd into
 * double first, so that the second rounding to f32, f16 or bf16 is
 * correct). AVG divides that sum by k in double before the final
 * rounding. PROD multiplies in double for f32/f16/bf16 and in f64 for f64,
 * in rank order. MIN, MAX and integer ops fold in rank order with the
 * dtype's kernel. A NaN result is the type's canonical quiet NaN.
 */
#ifndef TNT_COLLECTIVES_CANON_H
#define TNT_COLLECTIVES_CANON_H

#include <stddef.h>

#include "tnt/tnt.h"

/** dst[i] = canonical reduction of in_0[i], ..., in_(k-1)[i], where input
 *  `self` is at `own` and input q != self at base + q * stride (bytes).
 *  dst may be `own` (in place); otherwise no overlap. */
void tnt__canon_reduce(void *dst, const void *own, int self,
                       const void *base, size_t stride, int k, size_t n,
                       tnt_dtype_t dtype, tnt_op_t op);

/** tnt__canon_reduce at one SIMD level (reduce.h), for tests; does
 *  nothing at a level this CPU lacks. */
void tnt__canon_reduce_at(int level, void *dst, const void *own, int self,
                          const void *base, size_t stride, int k, size_t n,
                          tnt_dtype_t dtype, tnt_op_t op);

/** The same with input q at in[q] (k pointers); dst overlaps none of
 *  them (the on-host slots, core/onhost/slots.c). */
void tnt__canon_reduce_ptrs(void *dst, const void *const *in, int k,
                            size_t n, tnt_dtype_t dtype, tnt_op_t op);

/** Whether the reproducible mode routes (dtype, op) through the canonical
 *  reduction: every op on f32, f64, f16 and bf16 (integers are exact in
 *  any order). */
static inline int tnt__canon_dtype(tnt_dtype_t dtype)
{
    return dtype == TNT_F32 || dtype == TNT_F64 || dtype == TNT_F16 ||
           dtype == TNT_BF16;
}

#endif /* TNT_COLLECTIVES_CANON_H */
