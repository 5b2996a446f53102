/*
 * Reduction kernels: one small function per (dtype, op) that computes
 * dst[i] = a[i] op b[i], chosen once per collective through
 * tnt__reduce_fn() and then called on every received segment, plus the
 * final division of AVG and the half-precision conversions the f16/bf16
 * kernels are built on. The kernels are stamped out by macros from one
 * loop shape that gcc and clang vectorise even at -O2 (see KERNEL below),
 * and the conversions are plain bit manipulation so that the library needs
 * neither libm, _Float16 nor F16C instructions.
 */
#include "collectives/reduce.h"

#include <string.h>

/* ---- IEEE half and bfloat16 conversions ------------------------------ */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Shift `m` right by `shift` bits (1..31), rounding to nearest even. A
 * carry out of the mantissa lands in the exponent field, which is exactly
 * the next binade (or infinity), so callers need no special case for it. */
static inline uint32_t shift_round_even(uint32_t m, unsigned shift)
{
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = m & ((half << 1) - 1);
    uint32_t q = m >> shift;

    if (rest > half || (rest == half && (q & 1)))
        q++;
    return q;
}

static inline uint16_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;

    if (ax > 0x7f800000) /* NaN: keep the top payload bits, force quiet. */
        return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    if (ax >= 0x477ff000) /* >= 65520 = 65504 + half an ulp: infinity. */
        return (uint16_t)(sign | 0x7c00);
    if (ax >= 0x38800000) /* Normal half: rebias the exponent 127 -> 15. */
        return (uint16_t)(sign | shift_round_even(ax - 0x38000000, 13));
    if (ax <= 0x33000000) /* <= 2^-25, half the smallest subnormal: 0. */
        return sign;
    /* Subnormal half, units of 2^-24: mantissa (with its implicit bit)
     * times 2^(e - 150), so shift right by 126 - e, which is 14..24. */
    return (uint16_t)(sign | shift_round_even((ax & 0x7fffff) | 0x800000,
                                              126 - (ax >> 23)));
}

static inline float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;

    if (exp == 0x1f) /* Infinity, or NaN made quiet. */
        return f32_from_bits(sign | 0x7f800000 | (man << 13) |
                             (man ? 0x400000u : 0));
    if (exp == 0) { /* Zero or subnormal: man * 2^-24 is exact in f32. */
        float mag = (float)man * 0x1p-24f;
        return f32_from_bits(sign | f32_bits(mag));
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);

    /* Rounding a NaN could carry its payload into the exponent (and give
     * infinity), or truncate it to zero; keep the top bits, set quiet. */
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x0040);
    /* Round to nearest even on the 16 dropped bits; overflow carries into
     * the exponent and yields infinity, as IEEE rounding requires. */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;

    if ((x & 0x7fffffff) > 0x7f800000)
        x |= 0x400000; /* Signalling NaN in, quiet NaN out. */
    return f32_from_bits(x);
}

uint16_t tnt__f32_to_f16(float f) { return f32_to_f16(f); }
float tnt__f16_to_f32(uint16_t h) { return f16_to_f32(h); }
uint16_t tnt__f32_to_bf16(float f) { return f32_to_bf16(f); }
float tnt__bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }

/* ---- Kernels ---------------------------------------------------------- */

/*
 * dst may be a or b, so no `restrict`. A plain loop then needs a runtime
 * overlap check, which gcc's -O2 cost model ("very cheap") refuses, as it
 * refuses a scalar epilogue. So the kernel runs blocks of 64 bytes whose
 * inner loop has a constant trip count, and tells the compiler that the
 * iterations are independent (true: element i only reads a[i] and b[i]
 * before writing dst[i], and the buffers alias exactly or not at all),
 * then finishes the tail element by element.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define TNT_IVDEP _Pragma("GCC ivdep")
#else /* clang's cost model accepts the runtime overlap check by itself,
       * and its assume_safety pragma warns where it cannot vectorise. */
#define TNT_IVDEP
#endif

/* One kernel `name` over elements of type T: dst = (T)OP(ARG, x, y). */
#define KERNEL(name, T, OP, ARG)                                            \
    static void name(void *dst_, const void *a_, const void *b_, size_t n) \
    {                                                                       \
        enum { BLOCK = 64 / sizeof(T) };                                    \
        T *dst = dst_;                                                      \
        const T *a = a_, *b = b_;                                           \
        size_t i = 0;                                                       \
        for (; n - i >= BLOCK; i += BLOCK) {                                \
            TNT_IVDEP                                                       \
            for (size_t k = 0; k < BLOCK; k++) {                            \
                const T x = a[i + k], y = b[i + k];                         \
                dst[i + k] = (T)OP(ARG, x, y);                              \
            }                                                               \
        }                                                                   \
        for (; i < n; i++) {                                                \
            const T x = a[i], y = b[i];                                     \
            dst[i] = (T)OP(ARG, x, y);                                      \
        }                                                                   \
    }

/* Arithmetic in the working type W: unsigned integers wrap modulo 2^bits
 * without undefined behaviour (u8 is widened to uint32_t so it is not
 * promoted to signed int); floats use their own type. MIN/MAX keep `x`
 * (from a) unless y compares strictly smaller/larger, so a NaN in `a`
 * propagates, a NaN in `b` does not, and min(+0, -0) is +0. */
#define OP_SUM(W, x, y) ((W)(x) + (W)(y))
#define OP_PROD(W, x, y) ((W)(x) * (W)(y))
#define OP_MIN(W, x, y) ((y) < (x) ? (y) : (x))
#define OP_MAX(W, x, y) ((y) > (x) ? (y) : (x))

/* f16/bf16 (P is the format): compute in f32 and round back once per
 * element and step. MIN/MAX return the original bits of the chosen
 * operand, so no rounding is involved and -0 and NaN payloads survive. */
#define HALF_SUM(P, x, y) f32_to_##P(P##_to_f32(x) + P##_to_f32(y))
#define HALF_PROD(P, x, y) f32_to_##P(P##_to_f32(x) * P##_to_f32(y))
#define HALF_MIN(P, x, y) (P##_to_f32(y) < P##_to_f32(x) ? (y) : (x))
#define HALF_MAX(P, x, y) (P##_to_f32(y) > P##_to_f32(x) ? (y) : (x))

#define ARITH_KERNELS(tag, T, W)                                            \
    KERNEL(tag##_sum, T, OP_SUM, W)                                         \
    KERNEL(tag##_prod, T, OP_PROD, W)
#define MINMAX_KERNELS(tag, T)                                              \
    KERNEL(tag##_min, T, OP_MIN, T)                                         \
    KERNEL(tag##_max, T, OP_MAX, T)
#define HALF_KERNELS(P)                                                     \
    KERNEL(P##_sum, uint16_t, HALF_SUM, P)                                  \
    KERNEL(P##_prod, uint16_t, HALF_PROD, P)                                \
    KERNEL(P##_min, uint16_t, HALF_MIN, P)                                  \
    KERNEL(P##_max, uint16_t, HALF_MAX, P)

/* Signed SUM and PROD use the unsigned kernels of the same width: the low
 * bits of a two's complement sum or product do not depend on signedness,
 * and C allows reading an intN_t object through its uintN_t type. */
ARITH_KERNELS(f32, float, float)
ARITH_KERNELS(f64, double, double)
ARITH_KERNELS(u8, uint8_t, uint32_t)
ARITH_KERNELS(u32, uint32_t, uint32_t)
ARITH_KERNELS(u64, uint64_t, uint64_t)

MINMAX_KERNELS(f32, float)
MINMAX_KERNELS(f64, double)
MINMAX_KERNELS(i8, int8_t)
MINMAX_KERNELS(u8, uint8_t)
MINMAX_KERNELS(i32, int32_t)
MINMAX_KERNELS(u32, uint32_t)
MINMAX_KERNELS(i64, int64_t)
MINMAX_KERNELS(u64, uint64_t)

HALF_KERNELS(f16)
HALF_KERNELS(bf16)

/* One row per dtype, in tnt_op_t order: SUM, AVG (= SUM), PROD, MIN, MAX. */
#define ROW(arith, minmax)                                                  \
    { arith##_sum, arith##_sum, arith##_prod, minmax##_min, minmax##_max }

static const tnt_reduce_fn_t kernels[TNT_DTYPE_COUNT][TNT_OP_COUNT] = {
    [TNT_F32] = ROW(f32, f32),   [TNT_F64] = ROW(f64, f64),
    [TNT_F16] = ROW(f16, f16),   [TNT_BF16] = ROW(bf16, bf16),
    [TNT_I8] = ROW(u8, i8),      [TNT_U8] = ROW(u8, u8),
    [TNT_I32] = ROW(u32, i32),   [TNT_U32] = ROW(u32, u32),
    [TNT_I64] = ROW(u64, i64),   [TNT_U64] = ROW(u64, u64),
};

tnt_reduce_fn_t tnt__reduce_fn(tnt_dtype_t dtype, tnt_op_t op)
{
    /* Compare as unsigned: values from the wire or a caller's cast may be
     * anything, negative ones included. */
    if ((unsigned)dtype >= TNT_DTYPE_COUNT || (unsigned)op >= TNT_OP_COUNT)
        return NULL;
    return kernels[dtype][op];
}

/* ---- AVG ---------------------------------------------------------------- */

/* buf[i] = buf[i] / nranks computed in type W (wide enough for both the
 * element and nranks; integer division truncates toward zero). */
#define SCALE_LOOP(T, W, CONV_IN, CONV_OUT)                                 \
    do {                                                                    \
        T *p_ = buf;                                                        \
        for (size_t i = 0; i < n; i++)                                      \
            p_[i] = (T)CONV_OUT((W)CONV_IN(p_[i]) / (W)nranks);             \
    } while (0)

#define AS_IS(v) (v)

void tnt__scale_avg(void *buf, size_t n, tnt_dtype_t dtype, int nranks)
{
    /* Dividing by 1 changes nothing; nranks < 1 cannot come from a valid
     * communicator, and doing nothing beats dividing by zero. */
    if (nranks <= 1 || buf == NULL)
        return;
    switch (dtype) {
    case TNT_F32: SCALE_LOOP(float, float, AS_IS, AS_IS); break;
    case TNT_F64: SCALE_LOOP(double, double, AS_IS, AS_IS); break;
    case TNT_F16: SCALE_LOOP(uint16_t, float, f16_to_f32, f32_to_f16); break;
    case TNT_BF16:
        SCALE_LOOP(uint16_t, float, bf16_to_f32, f32_to_bf16);
        break;
    case TNT_I8: SCALE_LOOP(int8_t, int64_t, AS_IS, AS_IS); break;
    case TNT_U8: SCALE_LOOP(uint8_t, uint64_t, AS_IS, AS_IS); break;
    case TNT_I32: SCALE_LOOP(int32_t, int64_t, AS_IS, AS_IS); break;
    case TNT_U32: SCALE_LOOP(uint32_t, uint64_t, AS_IS, AS_IS); break;
    case TNT_I64: SCALE_LOOP(int64_t, int64_t, AS_IS, AS_IS); break;
    case TNT_U64: SCALE_LOOP(uint64_t, uint64_t, AS_IS, AS_IS); break;
    default: break; /* Unknown dtype: the caller validated it already. */
    }
}
