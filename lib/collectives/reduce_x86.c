/*
 * f16 and bf16 reduction kernels for AVX2 (with F16C) and AVX-512: widen
 * 8 or 16 elements to f32, compute, round back to nearest even. They give
 * the same bits as the portable kernels of reduce.c, which the tests check
 * at every level: VCVTPH2PS is exact, VCVTPS2PH with imm8 = 0 rounds to
 * nearest even and keeps NaN payloads as reduce.c does, and the bf16
 * rounding is the same integer formula on vector lanes. (AVX512_BF16's
 * VCVTNEPS2BF16 is not used: it flushes subnormals to zero.) MIN and MAX
 * pick the original bits of the chosen operand by an ordered compare, as
 * the portable kernels do. Tails shorter than a vector go through a zero
 * padded copy, so every element is computed by the same instructions.
 */
#include "collectives/reduce_x86.h"

#if TNT_SIMD_X86

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,f16c")))
#define AVX512 __attribute__((target(TNT_AVX512_TARGET)))

/* Infinity's bits and the quiet bit of each format. */
#define f16_INF 0x7c00
#define f16_QUIET 0x0200
#define bf16_INF 0x7f80
#define bf16_QUIET 0x0040

/* Clang reads a compare of two widened f16 vectors as a compare of the
 * f16 values themselves, which x86 without AVX512-FP16 can only do element
 * by element through library calls: f16 min and max ran at 5-6 GB/s (gcc:
 * 76-101). An empty asm that "changes" the widened vector stops the
 * rewrite and costs no instruction. */
#if defined(__clang__)
#define OPAQUE(v, constraint) __asm__("" : "+" constraint(v))
#else
#define OPAQUE(v, constraint) ((void)0)
#endif

/* ---- AVX2: 8 elements in a __m128i, computed in a __m256 ------------- */

static inline AVX2 __m256 f16_widen8(__m128i h)
{
    __m256 f = _mm256_cvtph_ps(h);
    OPAQUE(f, "x");
    return f;
}

static inline AVX2 __m128i f16_narrow8(__m256 f)
{
    return _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
}

static inline AVX2 __m256 bf16_widen8(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h),
                                                 16));
}

/* reduce.c's f32_to_bf16 on 8 lanes: NaN keeps its top bits and becomes
 * quiet; anything else rounds to nearest even on the 16 dropped bits. */
static inline AVX2 __m128i bf16_narrow8(__m256 f)
{
    __m256i x = _mm256_castps_si256(f);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i mag = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    __m256i up = _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                  _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, up), 16);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)),
                           nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r),
                            _mm256_extracti128_si256(r, 1));
}

/* y's bits where the 32-bit lanes of `take_y` are all ones, else x's. */
static inline AVX2 __m128i select8(__m256 take_y, __m128i x, __m128i y)
{
    __m256i m = _mm256_castps_si256(take_y);
    __m128i m16 = _mm_packs_epi32(_mm256_castsi256_si128(m),
                                  _mm256_extracti128_si256(m, 1));
    return _mm_blendv_epi8(x, y, m16);
}

/* A NaN in x wins over one in y (reduce.c's HALF_NAN_A): x86 would return
 * the first source's, and which one that is depends on the compiler. */
static inline AVX2 __m128i nan_a8(__m128i r, __m128i x, int inf, int quiet)
{
    __m128i mag = _mm_and_si128(x, _mm_set1_epi16(0x7fff));
    __m128i nan = _mm_cmpgt_epi16(mag, _mm_set1_epi16((short)inf));
    return _mm_blendv_epi8(r, _mm_or_si128(x, _mm_set1_epi16((short)quiet)),
                           nan);
}

#define ARITH8(P, VOP, x, y)                                                \
    nan_a8(P##_narrow8(VOP(P##_widen8(x), P##_widen8(y))), x, P##_INF,      \
           P##_QUIET)
#define SUM8(P, x, y) ARITH8(P, _mm256_add_ps, x, y)
#define PROD8(P, x, y) ARITH8(P, _mm256_mul_ps, x, y)
#define MIN8(P, x, y)                                                       \
    select8(_mm256_cmp_ps(P##_widen8(y), P##_widen8(x), _CMP_LT_OQ), x, y)
#define MAX8(P, x, y)                                                       \
    select8(_mm256_cmp_ps(P##_widen8(y), P##_widen8(x), _CMP_GT_OQ), x, y)

#define LOAD8(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define STORE8(p, v) _mm_storeu_si128((__m128i *)(void *)(p), v)

/* ---- AVX-512: 16 elements in a __m256i, computed in a __m512 ---------- */

static inline AVX512 __m512 f16_widen16(__m256i h)
{
    __m512 f = _mm512_cvtph_ps(h);
    OPAQUE(f, "v");
    return f;
}

static inline AVX512 __m256i f16_narrow16(__m512 f)
{
    return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
}

static inline AVX512 __m512 bf16_widen16(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h),
                                                 16));
}

static inline AVX512 __m256i bf16_narrow16(__m512 f)
{
    __m512i x = _mm512_castps_si512(f);
    __m512i hi = _mm512_srli_epi32(x, 16);
    __m512i mag = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
    __mmask16 nan =
        _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7f800000));
    __m512i up = _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                  _mm512_and_si512(hi, _mm512_set1_epi32(1)));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, up), 16);
    r = _mm512_mask_blend_epi32(
        nan, r, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(r);
}

static inline AVX512 __m256i nan_a16(__m256i r, __m256i x, int inf,
                                     int quiet)
{
    __m256i mag = _mm256_and_si256(x, _mm256_set1_epi16(0x7fff));
    __mmask16 nan = _mm256_cmpgt_epi16_mask(mag,
                                            _mm256_set1_epi16((short)inf));
    return _mm256_mask_blend_epi16(
        nan, r, _mm256_or_si256(x, _mm256_set1_epi16((short)quiet)));
}

#define ARITH16(P, VOP, x, y)                                               \
    nan_a16(P##_narrow16(VOP(P##_widen16(x), P##_widen16(y))), x, P##_INF,  \
            P##_QUIET)
#define SUM16(P, x, y) ARITH16(P, _mm512_add_ps, x, y)
#define PROD16(P, x, y) ARITH16(P, _mm512_mul_ps, x, y)
#define MIN16(P, x, y)                                                      \
    _mm256_mask_blend_epi16(                                                \
        _mm512_cmp_ps_mask(P##_widen16(y), P##_widen16(x), _CMP_LT_OQ), x, y)
#define MAX16(P, x, y)                                                      \
    _mm256_mask_blend_epi16(                                                \
        _mm512_cmp_ps_mask(P##_widen16(y), P##_widen16(x), _CMP_GT_OQ), x, y)

#define LOAD16(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define STORE16(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)

/* ---- Kernels and AVG ---------------------------------------------------- */

/* dst = STEP(a, b) on W-element vectors; dst may be a or b exactly (each
 * vector is loaded before its result is stored). */
#define HALF_KERNEL(ATTR, name, W, STEP, P)                                 \
    ATTR void name(void *dst_, const void *a_, const void *b_, size_t n)    \
    {                                                                       \
        uint16_t *dst = dst_;                                               \
        const uint16_t *a = a_, *b = b_;                                    \
        size_t i = 0;                                                       \
        for (; n - i >= W; i += W)                                          \
            STORE##W(dst + i, STEP##W(P, LOAD##W(a + i), LOAD##W(b + i)));  \
        if (i < n) {                                                        \
            uint16_t t[3][W] = {{0}};                                       \
            memcpy(t[0], a + i, (n - i) * 2);                               \
            memcpy(t[1], b + i, (n - i) * 2);                               \
            STORE##W(t[2], STEP##W(P, LOAD##W(t[0]), LOAD##W(t[1])));       \
            memcpy(dst + i, t[2], (n - i) * 2);                             \
        }                                                                   \
    }

/* buf[i] = buf[i] / nranks in f32, rounded back, as reduce.c does. */
#define HALF_SCALE(ATTR, name, W, VF, SET1, DIV, P)                         \
    ATTR void name(void *buf, size_t n, int nranks)                         \
    {                                                                       \
        uint16_t *p = buf;                                                  \
        const VF d = SET1((float)nranks);                                   \
        size_t i = 0;                                                       \
        for (; n - i >= W; i += W)                                          \
            STORE##W(p + i,                                                 \
                     P##_narrow##W(DIV(P##_widen##W(LOAD##W(p + i)), d)));  \
        if (i < n) {                                                        \
            uint16_t t[W] = {0};                                            \
            memcpy(t, p + i, (n - i) * 2);                                  \
            STORE##W(t, P##_narrow##W(DIV(P##_widen##W(LOAD##W(t)), d)));  \
            memcpy(p + i, t, (n - i) * 2);                                  \
        }                                                                   \
    }

#define FORMAT(P)                                                           \
    HALF_KERNEL(AVX2, tnt__##P##_sum_avx2, 8, SUM, P)                       \
    HALF_KERNEL(AVX2, tnt__##P##_prod_avx2, 8, PROD, P)                     \
    HALF_KERNEL(AVX2, tnt__##P##_min_avx2, 8, MIN, P)                       \
    HALF_KERNEL(AVX2, tnt__##P##_max_avx2, 8, MAX, P)                       \
    HALF_KERNEL(AVX512, tnt__##P##_sum_avx512, 16, SUM, P)                  \
    HALF_KERNEL(AVX512, tnt__##P##_prod_avx512, 16, PROD, P)                \
    HALF_KERNEL(AVX512, tnt__##P##_min_avx512, 16, MIN, P)                  \
    HALF_KERNEL(AVX512, tnt__##P##_max_avx512, 16, MAX, P)                  \
    HALF_SCALE(AVX2, tnt__##P##_scale_avx2, 8, __m256, _mm256_set1_ps,      \
               _mm256_div_ps, P)                                            \
    HALF_SCALE(AVX512, tnt__##P##_scale_avx512, 16, __m512, _mm512_set1_ps, \
               _mm512_div_ps, P)

FORMAT(f16)
FORMAT(bf16)

#endif /* TNT_SIMD_X86 */
