/*
 * The canonical reduction (canon.h): blocks of CANON_BLOCK elements, each
 * reduced over the k inputs in rank order into wide accumulators on the
 * stack and then rounded once into dst. A block reads all of its inputs
 * before it writes dst, so dst may be the own input (in place).
 *
 * Why double-double: the owner sums k values whose exponents may lie 60
 * binades apart with cancellations (gradients); a plain sum in double
 * loses the small ones next to 2^30, in f32 any order may lose them.
 * TwoSum keeps every rounding error of s + x exactly in c, so for f32,
 * f16 and bf16 inputs within 2^-30..2^30 and a few ranks s + c is the
 * exact sum and the result is correctly rounded; for f64 c itself rounds,
 * at about 2^-106 of the largest partial sum (docs/design.md).
 */
#include "collectives/canon.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "collectives/half.h"
#include "collectives/reduce.h"
#include "collectives/reduce_x86.h"

/* Elements per block: the accumulators of one block live on the stack.
 * Full blocks are reduced by loops with this constant trip count, which
 * gcc -O2 vectorises (reduce.c says why it needs one); the tail runs the
 * same code element by element, so the bits are the same. */
#define CANON_BLOCK 256

#if defined(__GNUC__) && !defined(__clang__)
#define CANON_INLINE static inline __attribute__((always_inline))
#else
#define CANON_INLINE static inline
#endif

/* Where the k inputs lie: a table of k pointers, or the own input and
 * the others at one stride (canon.h). */
typedef struct canon_src {
    const void *const *ptrs;
    const void *own;
    int self;
    const void *base;
    size_t stride;
} canon_src_t;

static const unsigned char *input(const canon_src_t *src, int q,
                                  size_t first, size_t esize)
{
    const unsigned char *p =
        src->ptrs     ? (const unsigned char *)src->ptrs[q]
        : q == src->self ? (const unsigned char *)src->own
                         : (const unsigned char *)src->base +
                               (size_t)q * src->stride;
    return p + first * esize;
}

/* The conversions of half.h without branches, so that the loops over a
 * block vectorise; the same values (a NaN's payload aside: a NaN result
 * is canonical anyway). f16 -> f32: normal, subnormal (exact as m 2^-24)
 * or infinity/NaN, chosen by selects. */
static inline float f16_widen(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t em = h & 0x7fffu, exp = em >> 10, man = h & 0x3ffu;
    uint32_t normal = (em << 13) + (112u << 23);
    uint32_t special = 0x7f800000u | (man << 13);
    uint32_t sub = f32_bits((float)man * 0x1p-24f);
    uint32_t is_special = 0u - (uint32_t)(exp == 31);
    uint32_t is_sub = 0u - (uint32_t)(exp == 0);
    uint32_t mag = (special & is_special) | (sub & is_sub) |
                   (normal & ~(is_special | is_sub));
    return f32_from_bits(sign | mag);
}

/* f32 -> f16, round to nearest even, without branches (the method of
 * F. Giesen's float_to_half_fast3_rtne): infinity from 65520 (the
 * normal path's carry) and for infinity, NaN 0x7e00, subnormals by one
 * float addition that rounds them in the FPU. */
static inline uint16_t f16_narrow(float f)
{
    uint32_t u = f32_bits(f), sign = u & 0x80000000u;
    u ^= sign;
    uint32_t big = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
    const uint32_t magic = 126u << 23; /* 0.5f */
    uint32_t sub = f32_bits(f32_from_bits(u) + f32_from_bits(magic)) -
                   magic;
    uint32_t norm = (u + (uint32_t)(-112 * (1 << 23)) + 0xfffu +
                     ((u >> 13) & 1u)) >> 13;
    uint32_t is_big = 0u - (uint32_t)(u >= (143u << 23));
    uint32_t is_sub = 0u - (uint32_t)(u < (113u << 23));
    uint32_t o = (big & is_big) | (sub & is_sub) | (norm & ~(is_big | is_sub));
    return (uint16_t)(o | (sign >> 16));
}

/* Element j of an input as a double: exact for every element type. */
static inline double load_f32(const unsigned char *in, size_t j)
{
    float f;
    memcpy(&f, in + 4 * j, 4);
    return f;
}

static inline double load_f64(const unsigned char *in, size_t j)
{
    double d;
    memcpy(&d, in + 8 * j, 8);
    return d;
}

static inline double load_f16(const unsigned char *in, size_t j)
{
    uint16_t h;
    memcpy(&h, in + 2 * j, 2);
    return f16_widen(h);
}

static inline double load_bf16(const unsigned char *in, size_t j)
{
    uint16_t h;
    memcpy(&h, in + 2 * j, 2);
    return f32_from_bits((uint32_t)h << 16);
}

CANON_INLINE void widen(double *out, const unsigned char *in, size_t m,
                        tnt_dtype_t dtype)
{
    switch (dtype) {
    case TNT_F32:
        for (size_t j = 0; j < m; j++)
            out[j] = load_f32(in, j);
        break;
    case TNT_F64:
        memcpy(out, in, m * 8);
        break;
    case TNT_F16:
        for (size_t j = 0; j < m; j++)
            out[j] = load_f16(in, j);
        break;
    case TNT_BF16:
        for (size_t j = 0; j < m; j++)
            out[j] = load_bf16(in, j);
        break;
    default:
        break;
    }
}

/* The sum of the k inputs of a block in double-double, in rank order:
 * s the running sum, c the sum of the exact errors of each s + x
 * (Knuth's TwoSum). One loop per input, which widens the input as it
 * reads it (LOAD), so that nothing goes through a buffer of widened
 * values; c starts as 0 + the first error, as if it began at 0. */
#define CANON_SUM(LOAD)                                                     \
    do {                                                                    \
        const unsigned char *x0 = input(src, 0, first, es);                 \
        const unsigned char *x1 = input(src, 1, first, es);                 \
        for (size_t j = 0; j < m; j++) {                                    \
            double a = LOAD(x0, j), b = LOAD(x1, j);                        \
            double t = a + b, bp = t - a;                                   \
            c[j] = 0.0 + ((a - (t - bp)) + (b - bp));                       \
            s[j] = t;                                                       \
        }                                                                   \
        for (int q = 2; q < k; q++) {                                       \
            const unsigned char *xq = input(src, q, first, es);             \
            for (size_t j = 0; j < m; j++) {                                \
                double x = LOAD(xq, j);                                     \
                double t = s[j] + x, bp = t - s[j];                         \
                c[j] += (s[j] - (t - bp)) + (x - bp);                       \
                s[j] = t;                                                   \
            }                                                               \
        }                                                                   \
    } while (0)

CANON_INLINE void sum_inputs(double *s, double *c, const canon_src_t *src,
                             int k, size_t first, size_t m,
                             tnt_dtype_t dtype)
{
    size_t es = tnt_dtype_size(dtype);
    if (k < 2) {
        widen(s, input(src, 0, first, es), m, dtype);
        for (size_t j = 0; j < m; j++)
            c[j] = 0;
        return;
    }
    switch (dtype) {
    case TNT_F32: CANON_SUM(load_f32); break;
    case TNT_F64: CANON_SUM(load_f64); break;
    case TNT_F16: CANON_SUM(load_f16); break;
    case TNT_BF16: CANON_SUM(load_bf16); break;
    default: break;
    }
}

static inline uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static inline double f64_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

#define F64_EXP 0x7ff0000000000000ull
#define ALL_ONES (~(uint64_t)0)

/* The two functions below test on the bits, each test a select between
 * all ones and zero in 64-bit integers (x != 0 as (bits << 1) != 0, NaN
 * included; finite as an exponent below the maximum), so that their
 * loops vectorise at AVX2 and AVX-512: with isfinite(), double
 * comparisons or 0/1 flags mixed in, gcc ran them one element at a time,
 * three quarters of the kernel's time (perf, 2026-11-27). */

/* s + c rounded to nearest, made odd where that is inexact (round to
 * odd): a later rounding to fewer than 52 bits is then correct, as if the
 * exact s + c had been rounded once. Where s is infinite or NaN, c is NaN
 * or meaningless and s is the answer; where c is 0, s is (which keeps the
 * sign of a zero). The step is towards the exact sum, by the sign of the
 * error r against t's (t = 0 only where s + c is exact: r = 0). */
static inline double add_round_odd(double s, double c)
{
    double t = s + c;
    double bp = t - s;
    double r = (s - (t - bp)) + (c - bp);
    uint64_t u = f64_bits(t), ur = f64_bits(r), us = f64_bits(s);
    uint64_t uc = f64_bits(c);
    uint64_t inexact = (ur << 1) != 0 ? ALL_ONES : 0;
    uint64_t even = (u & 1) == 0 ? ALL_ONES : 0;
    uint64_t t_finite = (u & F64_EXP) != F64_EXP ? ALL_ONES : 0;
    uint64_t step = (int64_t)(u ^ ur) < 0 ? ALL_ONES : 1; /* -1 or +1 */
    u += inexact & even & t_finite & step;
    uint64_t take = (us & F64_EXP) != F64_EXP && (uc << 1) != 0 ? ALL_ONES
                                                                  : 0;
    return f64_from_bits((u & take) | (us & ~take));
}

/* The same for f64 results: s + c rounded once. */
static inline double add_final(double s, double c)
{
    uint64_t us = f64_bits(s), ut = f64_bits(s + c), uc = f64_bits(c);
    uint64_t take = (us & F64_EXP) != F64_EXP && (uc << 1) != 0 ? ALL_ONES
                                                                  : 0;
    return f64_from_bits((ut & take) | (us & ~take));
}

/* double -> float rounded to odd (see add_round_odd), for f16 and bf16;
 * below half the least subnormal, that subnormal (odd) of t's sign. */
static inline float f32_round_odd(double t)
{
    /* In 64-bit lanes only, as add_round_odd, so that the f16 and bf16
     * stores vectorise. The step is one unit of the magnitude, up where
     * |t| > |f| (f has t's sign; from a zero f it is the least subnormal
     * of that sign). */
    float f = (float)t;
    double back = f;
    uint64_t u = f32_bits(f), ut = f64_bits(t), ub = f64_bits(back);
    const uint64_t mag = ~(uint64_t)0 >> 1;
    uint64_t inexact = ut != ub ? ALL_ONES : 0; /* NaN: not finite below */
    uint64_t even = (u & 1) == 0 ? ALL_ONES : 0;
    uint64_t finite = (u & 0x7f800000u) != 0x7f800000u ? ALL_ONES : 0;
    uint64_t step = (ut & mag) > (ub & mag) ? 1 : ALL_ONES;
    u += inexact & even & finite & step;
    return f32_from_bits((uint32_t)u);
}

/* Round the accumulated values into dst as the element type; NaN becomes
 * the canonical quiet NaN. */
CANON_INLINE void store(unsigned char *dst, const double *t, size_t m,
                        tnt_dtype_t dtype)
{
    switch (dtype) {
    /* f32 and f64 test for NaN on the bits, a select that vectorises. */
    case TNT_F32:
        for (size_t j = 0; j < m; j++) {
            float f = (float)t[j];
            uint32_t u;
            memcpy(&u, &f, 4);
            u = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : u;
            memcpy(dst + 4 * j, &u, 4);
        }
        break;
    case TNT_F64:
        for (size_t j = 0; j < m; j++) {
            uint64_t u;
            memcpy(&u, &t[j], 8);
            u = (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull
                    ? 0x7ff8000000000000ull
                    : u;
            memcpy(dst + 8 * j, &u, 8);
        }
        break;
    case TNT_F16:
        for (size_t j = 0; j < m; j++) {
            uint16_t h = f16_narrow(f32_round_odd(t[j]));
            h = (h & 0x7fff) > 0x7c00 ? 0x7e00 : h;
            memcpy(dst + 2 * j, &h, 2);
        }
        break;
    case TNT_BF16:
        for (size_t j = 0; j < m; j++) {
            uint32_t x = f32_bits(f32_round_odd(t[j]));
            uint16_t h = (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
            h = (x & 0x7fffffffu) > 0x7f800000u ? 0x7fc0 : h;
            memcpy(dst + 2 * j, &h, 2);
        }
        break;
    default:
        break;
    }
}

/* SUM, AVG and PROD of floats over one block of m elements. */
CANON_INLINE void wide_block(unsigned char *dst, const canon_src_t *src,
                             int k, size_t first, size_t m,
                             tnt_dtype_t dtype, tnt_op_t op)
{
    size_t es = tnt_dtype_size(dtype);
    double s[CANON_BLOCK], c[CANON_BLOCK];
    if (op == TNT_PROD) {
        double x[CANON_BLOCK];
        widen(s, input(src, 0, first, es), m, dtype);
        for (int q = 1; q < k; q++) {
            widen(x, input(src, q, first, es), m, dtype);
            for (size_t j = 0; j < m; j++)
                s[j] = s[j] * x[j];
        }
    } else {
        sum_inputs(s, c, src, k, first, m, dtype);
    }
    if (op != TNT_PROD) {
        if (dtype == TNT_F64)
            for (size_t j = 0; j < m; j++)
                s[j] = add_final(s[j], c[j]);
        else
            for (size_t j = 0; j < m; j++)
                s[j] = add_round_odd(s[j], c[j]);
        if (op == TNT_AVG)
            for (size_t j = 0; j < m; j++)
                s[j] = s[j] / (double)k;
    }
    store(dst + first * es, s, m, dtype);
}

/* SUM and AVG of K f32 or bf16 inputs (K a constant, 2 to
 * CANON_EXACT_MAX_K) over a full block whose partial sums are all exact
 * in double: then every TwoSum error of sum_inputs is exactly 0 (t - s
 * is exactly x, t - bp exactly s), so c is 0, add_round_odd returns s
 * unchanged, and the result is store(s [/ K]) with s = ((x0 + x1) + x2)
 * + ... in double, the chain's own additions: the same bits without the
 * TwoSums and the rounding to odd (docs/performance.md, "the canonical
 * kernel's exact blocks").
 *
 * When the sums are exact: every input finite and normal or zero, and
 * the largest and smallest binary exponents of the nonzero inputs at
 * most CANON_EXACT_SPAN apart (over the whole block: exact_block). Each
 * input (24 significant bits at most) is then a multiple of
 * u = 2^(emin - 23), and every partial sum a multiple of u below
 * K 2^(emax + 1) <= 2^53 u in magnitude (emax - emin <= 29 - log2 K; 26
 * holds up to K = 8): exact in double. A block with one input outside
 * that range takes the general path. */
#define CANON_EXACT_SPAN 26
#define CANON_EXACT_MAX_K 4

static inline uint32_t load_bits32(const unsigned char *in, size_t j,
                                   int bf16)
{
    if (bf16) {
        uint16_t h;
        memcpy(&h, in + 2 * j, 2);
        return (uint32_t)h << 16;
    }
    uint32_t u;
    memcpy(&u, in + 4 * j, 4);
    return u;
}

/* 1 if the whole block meets the condition above, or a stricter one,
 * taken over all its elements at once (a max and a min per input that
 * vectorise, four integer operations per vector): on the magnitudes a
 * = bits without the sign, as unsigned integers, hi = the largest a (a
 * zero, 0, never counts) and lo = the smallest a - 1 (a zero wraps to
 * the largest value and never counts). hi's exponent field is the
 * largest binary exponent of the nonzero inputs (255: infinity or
 * NaN); lo's is the smallest one, or one less where that input's
 * significand bits are all zero: so lo's field >= 1 rules out
 * subnormals (field 0) and span <= CANON_EXACT_SPAN follows from
 * hi's field - lo's field <= CANON_EXACT_SPAN, at worst a block that
 * would have qualified takes the general path (the same bits). All
 * zeros: hi = 0, exact. */
CANON_INLINE int exact_block(const unsigned char *const *x, const int K,
                             const int bf16)
{
    uint32_t hi = 0, lo = ~(uint32_t)0;
    for (int q = 0; q < K; q++) {
        const unsigned char *xq = x[q];
        for (size_t j = 0; j < CANON_BLOCK; j++) {
            uint32_t a = load_bits32(xq, j, bf16) & 0x7fffffffu;
            hi = a > hi ? a : hi;
            lo = a - 1 < lo ? a - 1 : lo;
        }
    }
    if (hi == 0)
        return 1;
    uint32_t eh = hi >> 23, el = lo >> 23;
    return el >= 1 && eh <= 254 && eh - el <= CANON_EXACT_SPAN;
}

/* The chain's sum of element j, as a double (divided by K for AVG). */
#define CANON_EXACT_SUM(LOAD, j)                                            \
    double s = LOAD(x[0], j) + LOAD(x[1], j);                               \
    for (int q = 2; q < K; q++)                                             \
        s = s + LOAD(x[q], j);                                              \
    if (avg)                                                                \
        s = s / (double)K

/* 1 if the block was exact and is done; 0: the caller runs wide_block.
 * f32 rounds each sum straight to float, store()'s conversion without
 * its NaN test: an exact block's inputs are finite, so are their sums
 * (the rounding to float may overflow to infinity, never to NaN), and
 * the bits are store()'s. Through r, a block on the stack, so that dst
 * may be an input and the loop still vectorises. */
CANON_INLINE int exact_sum_block(unsigned char *dst, const canon_src_t *src,
                                 const int K, size_t first,
                                 tnt_dtype_t dtype, const int avg)
{
    size_t es = tnt_dtype_size(dtype);
    int bf16 = dtype == TNT_BF16;
    const unsigned char *x[CANON_EXACT_MAX_K];
    for (int q = 0; q < K; q++)
        x[q] = input(src, q, first, es);
    if (!exact_block(x, K, bf16))
        return 0;
    if (bf16) {
        double t[CANON_BLOCK];
        for (size_t j = 0; j < CANON_BLOCK; j++) {
            CANON_EXACT_SUM(load_bf16, j);
            t[j] = s;
        }
        store(dst + first * es, t, CANON_BLOCK, dtype);
    } else {
        float r[CANON_BLOCK];
        for (size_t j = 0; j < CANON_BLOCK; j++) {
            CANON_EXACT_SUM(load_f32, j);
            r[j] = (float)s;
        }
        memcpy(dst + first * es, r, sizeof r);
    }
    return 1;
}

/* exact_sum_block with K, the dtype and AVG as constants. */
#define CANON_EXACT_DT(K, AVG)                                              \
    (dtype == TNT_F32 ? exact_sum_block(dst, src, K, first, TNT_F32, AVG)   \
                      : exact_sum_block(dst, src, K, first, TNT_BF16, AVG))

CANON_INLINE int exact_run(unsigned char *dst, const canon_src_t *src,
                           int k, size_t first, tnt_dtype_t dtype,
                           tnt_op_t op)
{
    int avg = op == TNT_AVG;
    switch (k * 2 + avg) {
    case 4: return CANON_EXACT_DT(2, 0);
    case 5: return CANON_EXACT_DT(2, 1);
    case 6: return CANON_EXACT_DT(3, 0);
    case 7: return CANON_EXACT_DT(3, 1);
    case 8: return CANON_EXACT_DT(4, 0);
    default: return CANON_EXACT_DT(4, 1);
    }
}

/* SUM of two f32 or two f64 inputs: TwoSum holds a + b exactly in
 * s + c, and rounding that to odd in double and then to nearest in the
 * type (f32: 53 >= 24 + 2 bits) is rounding the exact sum once to
 * nearest, which is what the type's own addition does (overflow, zeros'
 * signs and subnormals included); for f64 s + c rounds back to s = a + b.
 * So the canonical bits are a + b in the type, NaN made canonical: one
 * addition an element where the double-double takes about twenty
 * operations (p = 2, the commonest case on one host). Checked bitwise
 * against the general path (docs/performance.md). Through an accumulator
 * block, so that dst may be an input. */
CANON_INLINE void sum2_block(unsigned char *dst, const canon_src_t *src,
                             size_t first, size_t m, tnt_dtype_t dtype)
{
    size_t es = tnt_dtype_size(dtype);
    const unsigned char *x0 = input(src, 0, first, es);
    const unsigned char *x1 = input(src, 1, first, es);
    uint64_t acc[CANON_BLOCK];
    if (dtype == TNT_F32) {
        uint32_t *r = (uint32_t *)acc;
        for (size_t j = 0; j < m; j++) {
            float a, b;
            memcpy(&a, x0 + 4 * j, 4);
            memcpy(&b, x1 + 4 * j, 4);
            uint32_t u = f32_bits(a + b);
            r[j] = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : u;
        }
    } else {
        for (size_t j = 0; j < m; j++) {
            uint64_t u = f64_bits(load_f64(x0, j) + load_f64(x1, j));
            acc[j] = (u & 0x7fffffffffffffffull) > F64_EXP
                         ? 0x7ff8000000000000ull
                         : u;
        }
    }
    memcpy(dst + first * es, acc, m * es);
}

/* Any other (dtype, op): the dtype's kernel in rank order, through an
 * accumulator block, so that dst may be the own input. */
static void fold_block(unsigned char *dst, const canon_src_t *src, int k,
                       size_t first, size_t m, tnt_dtype_t dtype,
                       tnt_reduce_fn_t fn)
{
    size_t es = tnt_dtype_size(dtype);
    uint64_t acc[CANON_BLOCK];
    memcpy(acc, input(src, 0, first, es), m * es);
    for (int q = 1; q < k; q++)
        fn(acc, acc, input(src, q, first, es), m);
    memcpy(dst + first * es, acc, m * es);
}

/* Ask for the next block's inputs while this one is reduced, where k
 * blocks of inputs fit well in L1 (CANON_PREFETCH_MAX_BYTES): on one host
 * the inputs are the peers' slots, written by other cores, and the first
 * read of each line waited for it; one block ahead took p = 4 over shm
 * at 8 KiB from 1.0 to 0.89 of the time (docs/performance.md, "2026-12-07,
 * evening"). Not for the one-addition paths (two inputs' sum2_block,
 * fold_block): at p = 2 over shm at 16-32 KiB it cost 7-9%. A hint only:
 * no bits depend on it. */
#define CANON_PREFETCH_MAX_BYTES 8192

CANON_INLINE void prefetch_next(const canon_src_t *src, int k, size_t next,
                                size_t n, tnt_dtype_t dtype)
{
    size_t es = tnt_dtype_size(dtype);
    if (next >= n || (size_t)k * CANON_BLOCK * es > CANON_PREFETCH_MAX_BYTES)
        return;
    size_t m = n - next < CANON_BLOCK ? n - next : CANON_BLOCK;
    for (int q = 0; q < k; q++) {
        const unsigned char *x = input(src, q, next, es);
        for (size_t b = 0; b < m * es; b += 64)
            __builtin_prefetch(x + b);
    }
}

/* The whole reduction, inlined into one function per SIMD level below:
 * the same C at every level, element-wise IEEE operations only, hence the
 * same bits (reduce.c's argument); the level changes the vector width. */
CANON_INLINE void canon_run(void *dst, const canon_src_t *src, int k,
                            size_t n, tnt_dtype_t dtype, tnt_op_t op)
{
    int wide = tnt__canon_dtype(dtype) &&
               (op == TNT_SUM || op == TNT_AVG || op == TNT_PROD);
    tnt_reduce_fn_t fn = wide ? NULL : tnt__reduce_fn(dtype, op);
    if (!wide && !fn)
        return;
    int sum2 = k == 2 && op == TNT_SUM &&
               (dtype == TNT_F32 || dtype == TNT_F64);
    /* Full blocks of f32 or bf16 SUM or AVG of 2 to CANON_EXACT_MAX_K
     * inputs whose sums are exact in double: exact_sum_block. */
    int exact = (op == TNT_SUM || op == TNT_AVG) &&
                (dtype == TNT_F32 || dtype == TNT_BF16) && k >= 2 &&
                k <= CANON_EXACT_MAX_K;
    for (size_t first = 0; first < n; first += CANON_BLOCK) {
        size_t m = n - first < CANON_BLOCK ? n - first : CANON_BLOCK;
        if (wide && !sum2)
            prefetch_next(src, k, first + CANON_BLOCK, n, dtype);
        if (sum2 && m == CANON_BLOCK)
            sum2_block(dst, src, first, CANON_BLOCK, dtype);
        else if (exact && m == CANON_BLOCK &&
                 exact_run(dst, src, k, first, dtype, op))
            continue;
        else if (sum2)
            sum2_block(dst, src, first, m, dtype);
        else if (wide && m == CANON_BLOCK)
            wide_block(dst, src, k, first, CANON_BLOCK, dtype, op);
        else if (wide)
            wide_block(dst, src, k, first, m, dtype, op);
        else
            fold_block(dst, src, k, first, m, dtype, fn);
        /* An integer AVG divides after the last input, as the chain. */
        if (!wide && op == TNT_AVG)
            tnt__scale_avg((unsigned char *)dst +
                               first * tnt_dtype_size(dtype),
                           m, dtype, k);
    }
}

#define CANON_ARGS                                                          \
    void *dst, const canon_src_t *src, int k, size_t n, tnt_dtype_t dtype,  \
        tnt_op_t op
#define CANON_PASS dst, src, k, n, dtype, op

static void canon_base(CANON_ARGS)
{
    canon_run(CANON_PASS);
}

#if TNT_SIMD_X86
__attribute__((target("avx2"))) static void canon_avx2(CANON_ARGS)
{
    canon_run(CANON_PASS);
}

__attribute__((target(TNT_AVX512_TARGET))) static void
canon_avx512(CANON_ARGS)
{
    canon_run(CANON_PASS);
}
#endif

/* The kernel of a level this CPU has: the active one (tnt__simd_active
 * chose it) or one tnt__canon_reduce_at checked. Not asked again per
 * call: tnt__simd_supported runs CPUID for AVX2 (F16C), a trap to the
 * hypervisor in a virtual machine, microseconds per call. */
static void canon_at(int level, CANON_ARGS)
{
#if TNT_SIMD_X86
    if (level == TNT__SIMD_AVX512) {
        canon_avx512(CANON_PASS);
        return;
    }
    if (level == TNT__SIMD_AVX2) {
        canon_avx2(CANON_PASS);
        return;
    }
#endif
    canon_base(CANON_PASS);
}

void tnt__canon_reduce_at(int level, void *dst, const void *own, int self,
                          const void *base, size_t stride, int k, size_t n,
                          tnt_dtype_t dtype, tnt_op_t op)
{
    if (!tnt__simd_supported(level))
        return;
    canon_src_t src = {NULL, own, self, base, stride};
    canon_at(level, dst, &src, k, n, dtype, op);
}

void tnt__canon_reduce(void *dst, const void *own, int self,
                       const void *base, size_t stride, int k, size_t n,
                       tnt_dtype_t dtype, tnt_op_t op)
{
    canon_src_t src = {NULL, own, self, base, stride};
    canon_at(tnt__simd_active(), dst, &src, k, n, dtype, op);
}

void tnt__canon_reduce_ptrs(void *dst, const void *const *in, int k,
                            size_t n, tnt_dtype_t dtype, tnt_op_t op)
{
    canon_src_t src = {in, NULL, -1, NULL, 0};
    canon_at(tnt__simd_active(), dst, &src, k, n, dtype, op);
}
