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
#include "collectives/half.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/reduce_x86.h"
#if TNT_SIMD_X86
#include <cpuid.h>
#endif
#include "util/log.h"
#include "util/param_table.h"

/* ---- IEEE half and bfloat16 conversions: collectives/half.h ------- */

uint16_t tnt__f32_to_f16(float f) { return f32_to_f16(f); }
float tnt__f16_to_f32(uint16_t h) { return f16_to_f32(h); }
uint16_t tnt__f32_to_bf16(float f) { return f32_to_bf16(f); }
float tnt__bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }

/* ---- Kernels ---------------------------------------------------------- */

/*
 * dst may be a or b (the schedules reduce in place), and the buffers alias
 * exactly or not at all. Left to itself the compiler must then guard a
 * vector loop with a runtime overlap check, and that check sends exact
 * aliasing, the common case, to the scalar loop: gcc -O3 (meson's release
 * build) did so, and in-place reductions ran at a sixth of the speed of
 * out-of-place ones; gcc -O2's cheap cost model refuses the check and the
 * scalar epilogue altogether. So each kernel tells the compiler what
 * aliases: it dispatches on the pointers to a loop body whose pointers are
 * `restrict` (in place on a, in place on b, three buffers, or a == b, all
 * distinct objects as `restrict` requires), which needs no overlap check
 * at any optimisation level. The body runs blocks of 64 bytes whose inner
 * loop has a constant trip count (no epilogue for -O2 to refuse), then the
 * tail element by element. Every variant computes OP(x from a, y from b),
 * so the bits do not depend on which one runs.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define TNT_IVDEP _Pragma("GCC ivdep")
#else /* clang's assume_safety pragma warns where it cannot vectorise;
       * restrict says enough. */
#define TNT_IVDEP
#endif

/*
 * Every kernel is stamped once per SIMD level: LVL names the level and
 * ATTR_##LVL is the function attribute that lets the compiler use that
 * level's instructions in this one function (the rest of the library stays
 * at the baseline, so it still runs on any x86-64). The same C source at
 * every level computes the same element-wise IEEE operations, hence the
 * same bits: there is no reduction across elements to reassociate, and
 * the compiler may not contract a single add or multiply into anything
 * else. One 64-byte block is 4 SSE, 2 AVX2 or 1 AVX-512 vector.
 */
#define ATTR_base
#if TNT_SIMD_X86
#define ATTR_avx2 __attribute__((target("avx2")))
#define ATTR_avx512 __attribute__((target(TNT_AVX512_TARGET)))
#endif

/* The loop of one variant: X and Y name element e of a and b, D of dst.
 * gcc gets blocks of 64 bytes with a constant inner trip count (see
 * above); clang gets the plain loop, because it vectorised the blocked
 * one across blocks at AVX-512 (16 strided lanes, gathers and scatters:
 * 8 GB/s where its AVX2 loop made 100-140) and needs no help with a
 * remainder. */
#if defined(__GNUC__) && !defined(__clang__)
#define KERNEL_LOOP(T, OP, ARG, D, X, Y)                                    \
    {                                                                       \
        enum { BLOCK = 64 / sizeof(T) };                                    \
        size_t i = 0;                                                       \
        for (; n - i >= BLOCK; i += BLOCK) {                                \
            TNT_IVDEP                                                       \
            for (size_t k = 0; k < BLOCK; k++) {                            \
                const size_t e = i + k;                                     \
                const T x = X, y = Y;                                       \
                D = (T)OP(ARG, x, y);                                       \
            }                                                               \
        }                                                                   \
        for (; i < n; i++) {                                                \
            const size_t e = i;                                             \
            const T x = X, y = Y;                                           \
            D = (T)OP(ARG, x, y);                                           \
        }                                                                   \
    }
#else
#define KERNEL_LOOP(T, OP, ARG, D, X, Y)                                    \
    {                                                                       \
        for (size_t e = 0; e < n; e++) {                                    \
            const T x = X, y = Y;                                           \
            D = (T)OP(ARG, x, y);                                           \
        }                                                                   \
    }
#endif

/* One kernel `name`_`LVL` over elements of type T: dst = (T)OP(ARG, x, y),
 * with its four aliasing variants. */
#define KERNEL(LVL, name, T, OP, ARG)                                       \
    static ATTR_##LVL void name##_##LVL##_3(T *restrict d,                  \
                                            const T *restrict a,            \
                                            const T *restrict b, size_t n)  \
        KERNEL_LOOP(T, OP, ARG, d[e], a[e], b[e])                           \
    static ATTR_##LVL void name##_##LVL##_da(T *restrict d,                 \
                                             const T *restrict b, size_t n) \
        KERNEL_LOOP(T, OP, ARG, d[e], d[e], b[e])                           \
    static ATTR_##LVL void name##_##LVL##_db(T *restrict d,                 \
                                             const T *restrict a, size_t n) \
        KERNEL_LOOP(T, OP, ARG, d[e], a[e], d[e])                           \
    static ATTR_##LVL void name##_##LVL##_dd(T *restrict d, size_t n)       \
        KERNEL_LOOP(T, OP, ARG, d[e], d[e], d[e])                           \
    static ATTR_##LVL void name##_##LVL(void *dst, const void *a,           \
                                        const void *b, size_t n)            \
    {                                                                       \
        if (dst == a && a == b)                                             \
            name##_##LVL##_dd((T *)dst, n);                                 \
        else if (dst == a)                                                  \
            name##_##LVL##_da((T *)dst, (const T *)b, n);                   \
        else if (dst == b)                                                  \
            name##_##LVL##_db((T *)dst, (const T *)a, n);                   \
        else /* a == b, both read only, may share: restrict allows it */    \
            name##_##LVL##_3((T *)dst, (const T *)a, (const T *)b, n);      \
    }

/* Arithmetic in the working type W: unsigned integers wrap modulo 2^bits
 * without undefined behaviour (u8 is widened to uint32_t so it is not
 * promoted to signed int); floats use their own type. MIN/MAX keep `x`
 * (from a) unless y compares strictly smaller/larger, so a NaN in `a`
 * propagates, a NaN in `b` does not, and min(+0, -0) is +0. */
#define OP_SUM(W, x, y) ((W)(x) + (W)(y))
#define OP_PROD(W, x, y) ((W)(x) * (W)(y))
/* f32 and f64: when both operands are NaNs the hardware returns the one in
 * its first source operand, and which C operand lands there is the
 * compiler's choice, made differently per SIMD level and per aliasing
 * variant. A NaN in x is therefore added to (multiplied by) itself, which
 * gives x made quiet whatever the order; otherwise at most one operand is
 * a NaN and the result does not depend on the order either. */
#define OP_FSUM(W, x, y) ((x) + ((x) != (x) ? (x) : (y)))
#define OP_FPROD(W, x, y) ((x) * ((x) != (x) ? (x) : (y)))
#define OP_MIN(W, x, y) ((y) < (x) ? (y) : (x))
#define OP_MAX(W, x, y) ((y) > (x) ? (y) : (x))

/* f16/bf16 (P is the format): compute in f32 and round back once per
 * element and step. MIN/MAX return the original bits of the chosen
 * operand, so no rounding is involved and -0 and NaN payloads survive. */
#define HALF_SUM(P, x, y) HALF_NAN_A(P, x, P##_to_f32(x) + P##_to_f32(y))
#define HALF_PROD(P, x, y) HALF_NAN_A(P, x, P##_to_f32(x) * P##_to_f32(y))

/* A NaN in x gives x made quiet. The hardware would give the same unless
 * y is a NaN too; it then returns the NaN of its first source operand, and
 * which that is depends on how the compiler orders the operands. Fixing it
 * here keeps the SIMD levels (reduce_x86.c) bit for bit equal to this one. */
#define HALF_NAN_A(P, x, f)                                                 \
    (((x) & 0x7fff) > P##_INF ? (uint16_t)((x) | P##_QUIET) : f32_to_##P(f))
#define f16_INF 0x7c00
#define f16_QUIET 0x0200
#define bf16_INF 0x7f80
#define bf16_QUIET 0x0040
#define HALF_MIN(P, x, y) (P##_to_f32(y) < P##_to_f32(x) ? (y) : (x))
#define HALF_MAX(P, x, y) (P##_to_f32(y) > P##_to_f32(x) ? (y) : (x))

#define ARITH_KERNELS(LVL, tag, T, W)                                       \
    KERNEL(LVL, tag##_sum, T, OP_SUM, W)                                    \
    KERNEL(LVL, tag##_prod, T, OP_PROD, W)
#define FLOAT_KERNELS(LVL, tag, T)                                          \
    KERNEL(LVL, tag##_sum, T, OP_FSUM, T)                                   \
    KERNEL(LVL, tag##_prod, T, OP_FPROD, T)
#define MINMAX_KERNELS(LVL, tag, T)                                         \
    KERNEL(LVL, tag##_min, T, OP_MIN, T)                                    \
    KERNEL(LVL, tag##_max, T, OP_MAX, T)
#define HALF_KERNELS(LVL, P)                                                \
    KERNEL(LVL, P##_sum, uint16_t, HALF_SUM, P)                             \
    KERNEL(LVL, P##_prod, uint16_t, HALF_PROD, P)                           \
    KERNEL(LVL, P##_min, uint16_t, HALF_MIN, P)                             \
    KERNEL(LVL, P##_max, uint16_t, HALF_MAX, P)

/* Signed SUM and PROD use the unsigned kernels of the same width: the low
 * bits of a two's complement sum or product do not depend on signedness,
 * and C allows reading an intN_t object through its uintN_t type. */
#define ALL_KERNELS(LVL)                                                    \
    FLOAT_KERNELS(LVL, f32, float)                                          \
    FLOAT_KERNELS(LVL, f64, double)                                         \
    ARITH_KERNELS(LVL, u8, uint8_t, uint32_t)                               \
    ARITH_KERNELS(LVL, u32, uint32_t, uint32_t)                             \
    ARITH_KERNELS(LVL, u64, uint64_t, uint64_t)                             \
    MINMAX_KERNELS(LVL, f32, float)                                         \
    MINMAX_KERNELS(LVL, f64, double)                                        \
    MINMAX_KERNELS(LVL, i8, int8_t)                                         \
    MINMAX_KERNELS(LVL, u8, uint8_t)                                        \
    MINMAX_KERNELS(LVL, i32, int32_t)                                       \
    MINMAX_KERNELS(LVL, u32, uint32_t)                                      \
    MINMAX_KERNELS(LVL, i64, int64_t)                                       \
    MINMAX_KERNELS(LVL, u64, uint64_t)

/* The half formats are element-by-element bit manipulation at the base
 * level; the SIMD levels use the F16C / AVX-512 conversions of
 * reduce_x86.c instead, which give the same bits. */
ALL_KERNELS(base)
HALF_KERNELS(base, f16)
HALF_KERNELS(base, bf16)
#if TNT_SIMD_X86
ALL_KERNELS(avx2)
ALL_KERNELS(avx512)
#endif

/* One row per dtype, in tnt_op_t order: SUM, AVG (= SUM), PROD, MIN, MAX. */
#define ROW(LVL, arith, minmax)                                             \
    {                                                                       \
        arith##_sum_##LVL, arith##_sum_##LVL, arith##_prod_##LVL,           \
            minmax##_min_##LVL, minmax##_max_##LVL                          \
    }
#define HALF_ROW(LVL, P)                                                    \
    {                                                                       \
        tnt__##P##_sum_##LVL, tnt__##P##_sum_##LVL, tnt__##P##_prod_##LVL,  \
            tnt__##P##_min_##LVL, tnt__##P##_max_##LVL                      \
    }
#define TABLE(LVL, f16_row, bf16_row)                                       \
    {                                                                       \
        [TNT_F32] = ROW(LVL, f32, f32), [TNT_F64] = ROW(LVL, f64, f64),     \
        [TNT_F16] = f16_row, [TNT_BF16] = bf16_row,                         \
        [TNT_I8] = ROW(LVL, u8, i8), [TNT_U8] = ROW(LVL, u8, u8),           \
        [TNT_I32] = ROW(LVL, u32, i32), [TNT_U32] = ROW(LVL, u32, u32),     \
        [TNT_I64] = ROW(LVL, u64, i64), [TNT_U64] = ROW(LVL, u64, u64),     \
    }

static const tnt_reduce_fn_t
    kernels[TNT__SIMD_COUNT][TNT_DTYPE_COUNT][TNT_OP_COUNT] = {
        [TNT__SIMD_BASE] = TABLE(base, ROW(base, f16, f16),
                                 ROW(base, bf16, bf16)),
#if TNT_SIMD_X86
        [TNT__SIMD_AVX2] = TABLE(avx2, HALF_ROW(avx2, f16),
                                 HALF_ROW(avx2, bf16)),
        [TNT__SIMD_AVX512] = TABLE(avx512, HALF_ROW(avx512, f16),
                                   HALF_ROW(avx512, bf16)),
#endif
};

/* ---- Choosing the level ------------------------------------------------ */

static const char *const level_names[TNT__SIMD_COUNT] = {
#if TNT_SIMD_X86 && defined(__x86_64__)
    "sse2",
#else
    "base",
#endif
    "avx2", "avx512"};

const char *tnt__simd_name(int level)
{
    if (level < 0 || level >= TNT__SIMD_COUNT)
        return "?";
    return level_names[level];
}

#if TNT_SIMD_X86
/* F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
 * knows no "f16c", so ask the CPU directly; the OS's saving of the AVX
 * state, which F16C needs too, is part of the "avx2" check beside it. */
static int has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

int tnt__simd_supported(int level)
{
#if TNT_SIMD_X86
    __builtin_cpu_init(); /* Needed before constructors run (static). */
    switch (level) {
    case TNT__SIMD_BASE: return 1;
    case TNT__SIMD_AVX2:
        return __builtin_cpu_supports("avx2") && has_f16c();
    case TNT__SIMD_AVX512:
        return __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
    default: return 0;
    }
#else
    return level == TNT__SIMD_BASE;
#endif
}

static int active_level;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

/* The best level the CPU has, or the one TNT_SIMD names (auto, avx512,
 * avx2, sse2; read once per process, as the kernels are chosen once). A
 * forced level the CPU lacks falls back to the best one below it, with a
 * warning, rather than dying of SIGILL in the middle of a collective. */
static void choose_level(void)
{
    const char *env = tnt__env(TNT_VAR_SIMD);
    int want = TNT__SIMD_COUNT - 1;

    if (env != NULL && *env != '\0' && strcmp(env, "auto") != 0) {
        int found = -1;
        for (int l = 0; l < TNT__SIMD_COUNT; l++)
            if (strcmp(env, level_names[l]) == 0)
                found = l;
        if (found < 0)
            TNT_LOG_WARN("TNT_SIMD=%s is not one of auto, avx512, avx2, "
                         "%s; using auto", env, level_names[0]);
        else
            want = found;
    }
    while (want > 0 && !tnt__simd_supported(want)) {
        if (env != NULL && strcmp(env, level_names[want]) == 0)
            TNT_LOG_WARN("TNT_SIMD=%s: this CPU lacks it; using %s", env,
                         level_names[want - 1]);
        want--;
    }
    active_level = want;
    TNT_LOG_DEBUG("reduction kernels: %s", level_names[want]);
}

int tnt__simd_active(void)
{
    pthread_once(&active_once, choose_level);
    return active_level;
}

static tnt_reduce_fn_t lookup(tnt_dtype_t dtype, tnt_op_t op, int level)
{
    /* Compare as unsigned: values from the wire or a caller's cast may be
     * anything, negative ones included. */
    if ((unsigned)dtype >= TNT_DTYPE_COUNT || (unsigned)op >= TNT_OP_COUNT)
        return NULL;
    return kernels[level][dtype][op];
}

tnt_reduce_fn_t tnt__reduce_fn_at(tnt_dtype_t dtype, tnt_op_t op, int level)
{
    if ((unsigned)level >= TNT__SIMD_COUNT || !tnt__simd_supported(level))
        return NULL;
    return lookup(dtype, op, level);
}

tnt_reduce_fn_t tnt__reduce_fn(tnt_dtype_t dtype, tnt_op_t op)
{
    return lookup(dtype, op, tnt__simd_active());
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

/* The float divisions, stamped per level in blocks like KERNEL so that
 * they vectorise: a correctly rounded IEEE division per element, the same
 * bits with divps, vdivps or divss. */
#define SCALE_KERNEL(LVL, name, T)                                          \
    static ATTR_##LVL void name##_##LVL(T *p, size_t n, T d)                \
    {                                                                       \
        enum { BLOCK = 64 / sizeof(T) };                                    \
        size_t i = 0;                                                       \
        for (; n - i >= BLOCK; i += BLOCK)                                  \
            for (size_t k = 0; k < BLOCK; k++)                              \
                p[i + k] = p[i + k] / d;                                    \
        for (; i < n; i++)                                                  \
            p[i] = p[i] / d;                                                \
    }
#define SCALE_KERNELS(LVL)                                                  \
    SCALE_KERNEL(LVL, scale_f32, float)                                     \
    SCALE_KERNEL(LVL, scale_f64, double)

SCALE_KERNELS(base)
#if TNT_SIMD_X86
SCALE_KERNELS(avx2)
SCALE_KERNELS(avx512)
#endif

void tnt__scale_avg_at(void *buf, size_t n, tnt_dtype_t dtype, int nranks,
                       int level)
{
    /* Dividing by 1 changes nothing; nranks < 1 cannot come from a valid
     * communicator, and doing nothing beats dividing by zero. */
    if (nranks <= 1 || buf == NULL || (unsigned)level >= TNT__SIMD_COUNT ||
        !tnt__simd_supported(level))
        return;
#if TNT_SIMD_X86
    if (level == TNT__SIMD_AVX512 || level == TNT__SIMD_AVX2) {
        int w = level == TNT__SIMD_AVX512;
        switch (dtype) {
        case TNT_F32:
            (w ? scale_f32_avx512 : scale_f32_avx2)(buf, n, (float)nranks);
            return;
        case TNT_F64:
            (w ? scale_f64_avx512 : scale_f64_avx2)(buf, n, nranks);
            return;
        case TNT_F16:
            (w ? tnt__f16_scale_avx512 : tnt__f16_scale_avx2)(buf, n,
                                                              nranks);
            return;
        case TNT_BF16:
            (w ? tnt__bf16_scale_avx512 : tnt__bf16_scale_avx2)(buf, n,
                                                                nranks);
            return;
        default: break; /* Integers: no SIMD division; below. */
        }
    }
#endif
    switch (dtype) {
    case TNT_F32: scale_f32_base(buf, n, (float)nranks); break;
    case TNT_F64: scale_f64_base(buf, n, nranks); break;
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

void tnt__scale_avg(void *buf, size_t n, tnt_dtype_t dtype, int nranks)
{
    tnt__scale_avg_at(buf, n, dtype, nranks, tnt__simd_active());
}
