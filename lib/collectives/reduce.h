/*
 * Reduction kernels, type-erased per (op, dtype) as Gloo does: the engine
 * picks one function pointer per collective and calls it on segments.
 *
 * dst = a op b, element-wise over n elements. dst may alias a or b (the
 * engine reduces in place), so the kernels cannot use `restrict`; partial
 * overlap is not allowed. They are written so that gcc and clang still
 * vectorise them at -O2 (see the comment above KERNEL in reduce.c).
 *
 * f16 and bf16 are computed in f32 and rounded back to nearest even after
 * every step, so partial sums are rounded to the element type at each
 * reduction (as NCCL does). Integer SUM and PROD wrap modulo 2^bits
 * (computed in unsigned arithmetic, so no undefined behaviour). MIN and
 * MAX of floats return `a` unless `b` compares strictly smaller (larger);
 * NaN therefore propagates only from `a`. The algorithms always pass the
 * operands in a fixed rank order, so results are deterministic anyway.
 */
#ifndef TNT_COLLECTIVES_REDUCE_H
#define TNT_COLLECTIVES_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "tnt/tnt.h"

typedef void (*tnt_reduce_fn_t)(void *dst, const void *a, const void *b,
                                size_t n);

/** The kernel for (dtype, op); AVG uses SUM. NULL if either is invalid. */
tnt_reduce_fn_t tnt__reduce_fn(tnt_dtype_t dtype, tnt_op_t op);

/** AVG's final step: buf[i] /= nranks (integers truncate toward zero,
 *  floats divide in their own precision, f16/bf16 through f32). Does
 *  nothing for nranks <= 1 or an unknown dtype. */
void tnt__scale_avg(void *buf, size_t n, tnt_dtype_t dtype, int nranks);

/** IEEE half and bfloat16 conversions, round to nearest even; NaN stays
 *  NaN (quiet), overflow goes to infinity. */
uint16_t tnt__f32_to_f16(float f);
float tnt__f16_to_f32(uint16_t h);
uint16_t tnt__f32_to_bf16(float f);
float tnt__bf16_to_f32(uint16_t h);

#endif /* TNT_COLLECTIVES_REDUCE_H */
