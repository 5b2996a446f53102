/*
 * Deterministic test and benchmark data (see datagen.h): every element is a
 * hash of (seed, rank, index) mapped to a small integer, chosen per
 * operation so that every partial result any reduction order can produce
 * is exact in every dtype for up to 64 ranks:
 *
 *   SUM, AVG  signed and float: [-4, 4]; unsigned: [0, 3].
 *             |partial sum| <= 64 * 4 = 256, exact even in bf16 (8
 *             significant bits) and f16 (11 bits). i8 sums may pass 127:
 *             they wrap, and since wrapping is arithmetic modulo 2^8 the
 *             wrapped result does not depend on the order either.
 *   PROD      signed and float: +-1 or +-2; unsigned: 1 or 2. A factor 2
 *             is only possible on ranks r with r % 8 == (i + seed) % 8, so
 *             with 64 ranks at most 8 factors of 2 meet: |product| <= 256,
 *             a power of two, exact in every float type; integers wrap
 *             modulo 2^bits like the library does.
 *   MIN, MAX  signed and float: [-100, 100]; unsigned: [0, 200].
 *
 * The f16/bf16 conversions here are written independently of the
 * library's kernels on purpose: the reference must not share a bug with
 * the code it checks.
 */
#include "datagen.h"

#include <string.h>

/* ---- half-precision conversions (round to nearest even) ------------- */

static uint32_t float_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float bits_float(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static uint16_t gen_f32_to_f16(float f)
{
    uint32_t x = float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u); /* NaN stays a (quiet) NaN */
    /* 65520 lies halfway between 65504 (odd mantissa) and 2^16, so it and
     * everything above round to infinity. */
    if (ax >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal in f16: >= 2^-14 */
        uint32_t h = (ax >> 13) - ((uint32_t)(127 - 15) << 10);
        uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++; /* a carry into the exponent is the correct rounding */
        return (uint16_t)(sign | h);
    }
    /* Subnormal in f16: count units of 2^-24. Up to 2^-25 (exponent 102)
     * everything rounds to zero, including f32 subnormals. */
    uint32_t exp = ax >> 23;
    if (exp < 102)
        return sign;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp; /* 14 .. 24 */
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

static float gen_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f)
        return bits_float(sign | 0x7f800000u | (mant << 13) |
                          (mant ? 0x400000u : 0u));
    if (exp == 0) {
        /* Zero or subnormal: mant * 2^-24, exact in f32. */
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

static uint16_t gen_f32_to_bf16(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    /* Adding 0x7fff plus the lowest kept bit rounds to nearest even;
     * overflow carries into the exponent and ends at infinity. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float gen_bf16_to_f32(uint16_t h)
{
    return bits_float((uint32_t)h << 16);
}

/* ---- dtype classification and element access ------------------------ */

static int is_float(tnt_dtype_t dt)
{
    return dt == TNT_F32 || dt == TNT_F64 || dt == TNT_F16 ||
           dt == TNT_BF16;
}

static int is_unsigned(tnt_dtype_t dt)
{
    return dt == TNT_U8 || dt == TNT_U32 || dt == TNT_U64;
}

static int valid_dtype(tnt_dtype_t dt)
{
    return (int)dt >= 0 && dt < TNT_DTYPE_COUNT;
}

static int valid_op(tnt_op_t op)
{
    return (int)op >= 0 && op < TNT_OP_COUNT;
}

/* Bits of the integer types: wrapping is defined by them. */
static unsigned int_bits(tnt_dtype_t dt)
{
    switch (dt) {
    case TNT_I8:
    case TNT_U8:
        return 8;
    case TNT_I32:
    case TNT_U32:
        return 32;
    default:
        return 64;
    }
}

/* Reduce v modulo 2^bits of dt and read it back as dt would: sign-extended
 * for signed types, zero-extended for unsigned ones. */
static int64_t wrap_signed(tnt_dtype_t dt, uint64_t v)
{
    unsigned bits = int_bits(dt);
    if (bits == 64)
        return (int64_t)v;
    uint64_t m = v & ((UINT64_C(1) << bits) - 1);
    if (m & (UINT64_C(1) << (bits - 1)))
        return -(int64_t)((UINT64_C(1) << bits) - m);
    return (int64_t)m;
}

static uint64_t wrap_unsigned(tnt_dtype_t dt, uint64_t v)
{
    unsigned bits = int_bits(dt);
    return bits == 64 ? v : v & ((UINT64_C(1) << bits) - 1);
}

/* Raw bits of element i (zero-extended to 64 bits). */
static uint64_t load_bits(const void *buf, size_t i, tnt_dtype_t dt)
{
    switch (dt) {
    case TNT_I8:
    case TNT_U8:
        return ((const uint8_t *)buf)[i];
    case TNT_F16:
    case TNT_BF16:
        return ((const uint16_t *)buf)[i];
    case TNT_F32:
    case TNT_I32:
    case TNT_U32:
        return ((const uint32_t *)buf)[i];
    default:
        return ((const uint64_t *)buf)[i];
    }
}

static void store_bits(void *buf, size_t i, tnt_dtype_t dt, uint64_t b)
{
    switch (dt) {
    case TNT_I8:
    case TNT_U8:
        ((uint8_t *)buf)[i] = (uint8_t)b;
        break;
    case TNT_F16:
    case TNT_BF16:
        ((uint16_t *)buf)[i] = (uint16_t)b;
        break;
    case TNT_F32:
    case TNT_I32:
    case TNT_U32:
        ((uint32_t *)buf)[i] = (uint32_t)b;
        break;
    default:
        ((uint64_t *)buf)[i] = b;
        break;
    }
}

/* The bits of v in dt. v is finite and, for integers, within range (all
 * generated and expected values are), so only AVG results ever round. */
static uint64_t encode(double v, tnt_dtype_t dt)
{
    switch (dt) {
    case TNT_F32:
        return float_bits((float)v);
    case TNT_F64: {
        uint64_t b;
        memcpy(&b, &v, sizeof b);
        return b;
    }
    case TNT_F16:
        return gen_f32_to_f16((float)v);
    case TNT_BF16:
        return gen_f32_to_bf16((float)v);
    case TNT_U64:
        return (uint64_t)v;
    default:
        return (uint64_t)(int64_t)v &
               (int_bits(dt) == 64 ? UINT64_MAX
                                   : (UINT64_C(1) << int_bits(dt)) - 1);
    }
}

double tnt_gen_load(const void *buf, size_t i, tnt_dtype_t dtype)
{
    uint64_t b = load_bits(buf, i, dtype);
    switch (dtype) {
    case TNT_F32:
        return bits_float((uint32_t)b);
    case TNT_F64: {
        double d;
        memcpy(&d, &b, sizeof d);
        return d;
    }
    case TNT_F16:
        return gen_f16_to_f32((uint16_t)b);
    case TNT_BF16:
        return gen_bf16_to_f32((uint16_t)b);
    case TNT_I8:
    case TNT_I32:
    case TNT_I64:
        return (double)wrap_signed(dtype, b);
    default:
        return (double)b;
    }
}

/* ---- values ----------------------------------------------------------- */

/* splitmix64's finaliser: cheap and mixes every input bit into every
 * output bit, so neighbouring indices and ranks get unrelated values. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

static uint64_t elem_hash(uint64_t seed, int rank, size_t i)
{
    uint64_t h = mix64(seed + UINT64_C(0x9e3779b97f4a7c15) *
                                  ((uint64_t)(uint32_t)rank + 1));
    return mix64(h ^ ((uint64_t)i * UINT64_C(0xd6e8feb86659fd93)));
}

/* The value as a signed 64-bit integer (all values are integers). */
static int64_t gen_int(uint64_t seed, int rank, size_t i, tnt_dtype_t dt,
                       tnt_op_t op)
{
    uint64_t h = elem_hash(seed, rank, i);
    int uns = is_unsigned(dt);

    switch (op) {
    case TNT_SUM:
    case TNT_AVG:
        return uns ? (int64_t)(h % 4) : (int64_t)(h % 9) - 4;
    case TNT_PROD: {
        /* One rank residue class mod 8 per element may contribute a 2,
         * half of the time: at most nranks/8 factors of 2 meet. */
        int64_t mag = 1;
        if (((uint64_t)(uint32_t)rank & 7u) == ((i + seed) & 7u) &&
            ((h >> 40) & 1u))
            mag = 2;
        if (!uns && ((h >> 48) & 3u) == 0) /* negative 1 time in 4 */
            return -mag;
        return mag;
    }
    case TNT_MIN:
    case TNT_MAX:
        return uns ? (int64_t)(h % 201) : (int64_t)(h % 201) - 100;
    default:
        return 0;
    }
}

double tnt_gen_value(uint64_t seed, int rank, size_t i, tnt_dtype_t dtype,
                     tnt_op_t op)
{
    if (!valid_dtype(dtype) || !valid_op(op))
        return 0.0;
    return (double)gen_int(seed, rank, i, dtype, op);
}

void tnt_gen_fill(void *buf, size_t count, tnt_dtype_t dtype, tnt_op_t op,
                  uint64_t seed, int rank)
{
    if (!valid_dtype(dtype) || !valid_op(op))
        return;
    for (size_t i = 0; i < count; i++)
        store_bits(buf, i, dtype,
                   encode((double)gen_int(seed, rank, i, dtype, op),
                          dtype));
}

/*
 * Poison values, checked against the value ranges in the file comment
 * (results of up to 64 ranks): SUM |s| <= 256, PROD a power of two of at
 * most 256 with a sign, MIN/MAX within [-100, 200], AVG within [-4, 3];
 * broadcast and allgather results are input values, within the same.
 *   floats       12288 = 3 * 2^12: exact in f16 and bf16, above 256 and
 *                not a power of two.
 *   i32..u64     12345: the same argument.
 *   u8           251: odd and above 200 and 192 (the largest sum); a
 *                wrapped product is a power of two or 0.
 *   i8           -111: not in [-100, 100], not a power of two; only an i8
 *                SUM of 28 or more ranks can wrap onto it (sum -111 or
 *                145), so there a forgotten element is missed in about 1
 *                of 256 positions, and a bug that forgets many is still
 *                caught. An i8 value impossible as a wrapped sum of 64
 *                ranks does not exist.
 */
void tnt_gen_poison(void *buf, size_t count, tnt_dtype_t dtype)
{
    uint64_t b;
    switch (dtype) {
    case TNT_U8:
        b = 251;
        break;
    case TNT_I8:
        b = encode(-111.0, TNT_I8);
        break;
    case TNT_F32:
    case TNT_F64:
    case TNT_F16:
    case TNT_BF16:
        b = encode(12288.0, dtype);
        break;
    case TNT_I32:
    case TNT_U32:
    case TNT_I64:
    case TNT_U64:
        b = 12345;
        break;
    default:
        return;
    }
    for (size_t i = 0; i < count; i++)
        store_bits(buf, i, dtype, b);
}

/* ---- expected results ------------------------------------------------ */

double tnt_gen_expected(uint64_t seed, int nranks, size_t i,
                        tnt_dtype_t dtype, tnt_op_t op)
{
    if (nranks < 1 || !valid_dtype(dtype) || !valid_op(op))
        return 0.0;

    /* Combine in 64-bit unsigned arithmetic: exact for the float types
     * (|result| <= 2^8 · nranks) and wrapping modulo 2^64 for integers,
     * which is then narrowed to the dtype's width. */
    uint64_t acc = (uint64_t)gen_int(seed, 0, i, dtype, op);
    int64_t best = (int64_t)acc;
    for (int r = 1; r < nranks; r++) {
        int64_t v = gen_int(seed, r, i, dtype, op);
        switch (op) {
        case TNT_SUM:
        case TNT_AVG:
            acc += (uint64_t)v;
            break;
        case TNT_PROD:
            acc *= (uint64_t)v;
            break;
        case TNT_MIN:
            best = v < best ? v : best;
            break;
        default:
            best = v > best ? v : best;
            break;
        }
    }
    if (op == TNT_MIN || op == TNT_MAX)
        return (double)best; /* in range of every dtype, no wrapping */

    if (is_float(dtype)) {
        double exact = (double)(int64_t)acc;
        if (op != TNT_AVG)
            return exact;
        /* As the library: the sum (exact) divided once at the end, in
         * f32 for f32/f16/bf16, then rounded to the element type. */
        switch (dtype) {
        case TNT_F64:
            return exact / (double)nranks;
        case TNT_F32:
            return (double)((float)exact / (float)nranks);
        case TNT_F16:
            return gen_f16_to_f32(
                gen_f32_to_f16((float)exact / (float)nranks));
        default:
            return gen_bf16_to_f32(
                gen_f32_to_bf16((float)exact / (float)nranks));
        }
    }
    if (is_unsigned(dtype)) {
        uint64_t w = wrap_unsigned(dtype, acc);
        if (op == TNT_AVG)
            w /= (uint64_t)nranks;
        return (double)w;
    }
    int64_t w = wrap_signed(dtype, acc);
    if (op == TNT_AVG)
        w /= nranks; /* C truncates toward zero, as the library does */
    return (double)w;
}

/* Float bits mapped to a line on which neighbouring values differ by one,
 * +0 and -0 both at 0: the distance counts units in the last place. */
static int64_t ordered(uint64_t bits, tnt_dtype_t dt)
{
    unsigned width = dt == TNT_F64 ? 64 : dt == TNT_F32 ? 32 : 16;
    uint64_t sign = UINT64_C(1) << (width - 1);
    if (bits & sign)
        return -(int64_t)(bits & ~sign);
    return (int64_t)bits;
}

size_t tnt_gen_check_allreduce(const void *buf, size_t first_index,
                               size_t count, tnt_dtype_t dtype, tnt_op_t op,
                               uint64_t seed, int nranks,
                               size_t *first_wrong)
{
    size_t wrong = 0;
    int ulp_ok = op == TNT_AVG && is_float(dtype);

    if (first_wrong)
        *first_wrong = SIZE_MAX;
    if (nranks < 1 || !valid_dtype(dtype) || !valid_op(op)) {
        if (first_wrong && count > 0)
            *first_wrong = first_index;
        return count; /* nothing can be right against an invalid spec */
    }
    for (size_t k = 0; k < count; k++) {
        double e = tnt_gen_expected(seed, nranks, first_index + k, dtype,
                                    op);
        uint64_t want = encode(e, dtype);
        uint64_t got = load_bits(buf, k, dtype);
        int ok;
        if (got == want) {
            ok = 1;
        } else if (ulp_ok) {
            /* NaN and infinity are never expected; their ordered values
             * lie far from any small result, so they fail here too. */
            int64_t og = ordered(got, dtype), ow = ordered(want, dtype);
            /* Unsigned difference: a NaN far below cannot overflow. */
            uint64_t d = og > ow ? (uint64_t)og - (uint64_t)ow
                                 : (uint64_t)ow - (uint64_t)og;
            ok = d <= 1;
        } else {
            ok = 0;
        }
        if (!ok) {
            if (wrong == 0 && first_wrong)
                *first_wrong = first_index + k;
            wrong++;
        }
    }
    return wrong;
}

uint64_t tnt_gen_hash(const void *buf, size_t bytes)
{
    const unsigned char *p = buf;
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}
