/*
 * The x86 half of the SIMD reduction kernels (reduce_x86.c): f16 and bf16
 * through the F16C / AVX-512 conversion and compare instructions, which
 * gcc cannot derive from the portable bit manipulation of reduce.c; and
 * the target strings that canon.c stamps its kernel with. Empty off x86.
 */
#ifndef TNT_COLLECTIVES_REDUCE_X86_H
#define TNT_COLLECTIVES_REDUCE_X86_H

#include <stddef.h>

#include "collectives/reduce.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define TNT_SIMD_X86 1
#else
#define TNT_SIMD_X86 0
#endif

#if TNT_SIMD_X86
/* What tnt__simd_supported(TNT__SIMD_AVX512) checks for, as a target
 * attribute string: byte and word lanes (BW), 64-bit multiplies (DQ) and
 * the 256-bit forms of the AVX-512 instructions (VL). */
#define TNT_AVX512_TARGET "avx512f,avx512bw,avx512dq,avx512vl"

/* tnt__{f16,bf16}_{sum,prod,min,max}_{avx2,avx512}: reduce_fn kernels. */
#define TNT_HALF_DECL(P, LVL)                                               \
    void tnt__##P##_sum_##LVL(void *, const void *, const void *, size_t);  \
    void tnt__##P##_prod_##LVL(void *, const void *, const void *, size_t); \
    void tnt__##P##_min_##LVL(void *, const void *, const void *, size_t);  \
    void tnt__##P##_max_##LVL(void *, const void *, const void *, size_t);
TNT_HALF_DECL(f16, avx2)
TNT_HALF_DECL(bf16, avx2)
TNT_HALF_DECL(f16, avx512)
TNT_HALF_DECL(bf16, avx512)

/* buf[i] /= nranks in f32, rounded back to the format (nranks >= 2). */
void tnt__f16_scale_avx2(void *buf, size_t n, int nranks);
void tnt__bf16_scale_avx2(void *buf, size_t n, int nranks);
void tnt__f16_scale_avx512(void *buf, size_t n, int nranks);
void tnt__bf16_scale_avx512(void *buf, size_t n, int nranks);
#endif

#endif /* TNT_COLLECTIVES_REDUCE_X86_H */
