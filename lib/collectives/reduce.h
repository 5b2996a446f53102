/*
 * Reduction kernels, type-erased per (op, dtype) as Gloo does: the engine
 * picks one function pointer per collective and calls it on segments.
 *
 * dst = a op b, element-wise over n elements. dst may alias a or b (the
 * engine reduces in place), so the kernels cannot use `restrict`; partial
 * overlap is not allowed. They are written so that gcc and clang still
 * vectorise them at -O2 (see the comment above KERNEL in reduce.c), and
 * exist once per SIMD level (see TNT__SIMD_BASE below).
 *
 * f16 and bf16 are computed in f32 and rounded back to nearest even after
 * every step, so partial sums are rounded to the element type at each
 * reduction (as NCCL does); their SUM and PROD return a's NaN, made quiet,
 * when a is a NaN (even when b is one too). Integer SUM and PROD wrap
 * modulo 2^bits (computed in unsigned arithmetic, so no undefined
 * behaviour). MIN and
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

/** The kernel for (dtype, op) at the active SIMD level; AVG uses SUM.
 *  NULL if either is invalid. */
tnt_reduce_fn_t tnt__reduce_fn(tnt_dtype_t dtype, tnt_op_t op);

/*
 * SIMD levels. Every kernel exists at each level and gives the same bits
 * at each; the level only changes the speed. The active one is the best
 * the CPU supports, or the one the environment variable TNT_SIMD names
 * (auto, avx512, avx2, sse2), read once per process; a forced level the
 * CPU lacks falls back to the next lower one with a warning. AVX2 also
 * needs F16C; AVX-512 means F, BW, DQ and VL (Skylake-SP and later, Zen 4).
 * Off x86, only the base level exists (named "base").
 */
enum {
    TNT__SIMD_BASE,   /* The compiler's baseline: SSE2 on x86-64. */
    TNT__SIMD_AVX2,
    TNT__SIMD_AVX512,
    TNT__SIMD_COUNT
};

/** "sse2", "avx2", "avx512" ("base" off x86-64); "?" if out of range. */
const char *tnt__simd_name(int level);
/** Nonzero if this CPU (and build) can run kernels of `level`. */
int tnt__simd_supported(int level);
/** The level tnt__reduce_fn() and tnt__scale_avg() use in this process. */
int tnt__simd_active(void);
/** The kernel of one given level, for tests and tnt-bench kernels; NULL
 *  for invalid arguments or a level this CPU does not support. */
tnt_reduce_fn_t tnt__reduce_fn_at(tnt_dtype_t dtype, tnt_op_t op, int level);

/** AVG's final step: buf[i] /= nranks (integers truncate toward zero,
 *  floats divide in their own precision, f16/bf16 through f32). Does
 *  nothing for nranks <= 1 or an unknown dtype. */
void tnt__scale_avg(void *buf, size_t n, tnt_dtype_t dtype, int nranks);
/** tnt__scale_avg() at a given level; does nothing at an unsupported one. */
void tnt__scale_avg_at(void *buf, size_t n, tnt_dtype_t dtype, int nranks,
                       int level);

/** IEEE half and bfloat16 conversions, round to nearest even; NaN stays
 *  NaN (quiet), overflow goes to infinity. */
uint16_t tnt__f32_to_f16(float f);
float tnt__f16_to_f32(uint16_t h);
uint16_t tnt__f32_to_bf16(float f);
float tnt__bf16_to_f32(uint16_t h);

#endif /* TNT_COLLECTIVES_REDUCE_H */
