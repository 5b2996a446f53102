/*
 * IEEE half and bfloat16 conversions to and from f32, round to nearest
 * even, as plain bit manipulation (no libm, _Float16 or F16C), inline so
 * that the kernels built on them (reduce.c, canon.c) vectorise.
 */
#ifndef TNT_COLLECTIVES_HALF_H
#define TNT_COLLECTIVES_HALF_H

#include <stdint.h>
#include <string.h>

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

#endif /* TNT_COLLECTIVES_HALF_H */
