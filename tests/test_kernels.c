/*
 * Unit tests of the reduction kernels and half-precision conversions in
 * lib/collectives/reduce.c. Every result is checked against a reference
 * written independently of the library: floating-point values are decoded
 * with ldexp() and combined in long double, half formats are rounded by
 * searching a table of all their values, and integers are combined exactly
 * in 128-bit arithmetic and then wrapped explicitly. The inputs are chosen
 * so that the wide reference is exact (or provably rounds the same way),
 * hence results must match bit for bit. Every kernel runs at every SIMD
 * level this CPU supports (reduce.h: base, AVX2, AVX-512), each against
 * the reference and, stricter still, bit for bit (NaN payloads included)
 * against the base level. Needs only CUnit and reduce.c.
 */
#include <CUnit/Basic.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/canon.h"
#include "collectives/reduce.h"
#include "util/log.h"
#include "tnt/tnt.h"

#ifdef __SIZEOF_INT128__
__extension__ typedef __int128 wide_int;
__extension__ typedef unsigned __int128 wide_uint;
#else /* Low 64 bits of sums and products are still right in uint64_t. */
typedef int64_t wide_int;
typedef uint64_t wide_uint;
#endif

/* ---- Small helpers ------------------------------------------------------ */

static const size_t esize[TNT_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};
static const char *const dt_name[TNT_DTYPE_COUNT] = {
    "f32", "f64", "f16", "bf16", "i8", "u8", "i32", "u32", "i64", "u64"};
static const char *const op_name[TNT_OP_COUNT] = {"sum", "avg", "prod",
                                                  "min", "max"};
/* The element lengths that reach every prologue, block and tail path. */
static const size_t lengths[] = {0,  1,  2,  3,  7,   8,    15,  16,
                                 17, 31, 33, 100, 1000, 4097};
#define NLENGTHS (sizeof lengths / sizeof lengths[0])

static uint64_t rng_state;

/* splitmix64: tiny, seedable, good enough to spread bits. */
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int is_float(tnt_dtype_t dt) { return dt <= TNT_BF16; }
static int is_signed_int(tnt_dtype_t dt)
{
    return dt == TNT_I8 || dt == TNT_I32 || dt == TNT_I64;
}

/* Raw bits of one element, zero-extended. */
static uint64_t load_bits(tnt_dtype_t dt, const void *p)
{
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    switch (esize[dt]) {
    case 1: memcpy(&u8, p, 1); return u8;
    case 2: memcpy(&u16, p, 2); return u16;
    case 4: memcpy(&u32, p, 4); return u32;
    default: memcpy(&u64, p, 8); return u64;
    }
}

static void store_bits(tnt_dtype_t dt, void *p, uint64_t v)
{
    uint8_t u8 = (uint8_t)v;
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;
    switch (esize[dt]) {
    case 1: memcpy(p, &u8, 1); break;
    case 2: memcpy(p, &u16, 2); break;
    case 4: memcpy(p, &u32, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- Reference half formats (value based, via ldexp) ------------------- */

static double ref_f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0x1f ? (m ? NAN : INFINITY)
               : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}

static double ref_bf16_value(uint16_t h)
{
    int e = (h >> 7) & 0xff, m = h & 0x7f;
    double v = e == 0xff ? (m ? NAN : INFINITY)
               : e ? ldexp(128 + m, e - 134) : ldexp(m, -133);
    return (h & 0x8000) ? -v : v;
}

/* Magnitudes of the patterns 0 .. inf (the infinity pattern's entry is the
 * next power of two: IEEE rounds to infinity from half an ulp above the
 * largest finite value, exactly as if that value existed). */
#define F16_INF 0x7c00u
#define BF16_INF 0x7f80u
static double f16_table[F16_INF + 1], bf16_table[BF16_INF + 1];

static void build_tables(void)
{
    for (unsigned p = 0; p < F16_INF; p++)
        f16_table[p] = ref_f16_value((uint16_t)p);
    f16_table[F16_INF] = 65536.0;
    for (unsigned p = 0; p < BF16_INF; p++)
        bf16_table[p] = ref_bf16_value((uint16_t)p);
    bf16_table[BF16_INF] = ldexp(1.0, 128);
}

/* Round v to the nearest table entry, ties to the even pattern. A NaN
 * gives the canonical quiet NaN; callers compare NaNs by class only. */
static uint16_t ref_round(const double *t, unsigned inf, unsigned qnan,
                          double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double m = fabs(v);
    unsigned lo = 0, hi = inf;

    if (isnan(v))
        return (uint16_t)(sign | qnan);
    if (m >= t[inf])
        return (uint16_t)(sign | inf);
    while (hi - lo > 1) { /* Invariant: t[lo] <= m < t[hi]. */
        unsigned mid = (lo + hi) / 2;
        if (t[mid] <= m)
            lo = mid;
        else
            hi = mid;
    }
    double mid = (t[lo] + t[hi]) / 2; /* Exact: few significant bits. */
    unsigned p = m < mid ? lo : m > mid ? hi : (lo & 1) ? hi : lo;
    return (uint16_t)(sign | p);
}

static uint16_t ref_f16(double v)
{
    return ref_round(f16_table, F16_INF, 0x7e00, v);
}

static uint16_t ref_bf16(double v)
{
    return ref_round(bf16_table, BF16_INF, 0x7fc0, v);
}

static int f16_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7c00; }
static int bf16_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7f80; }

/* ---- Reference element operations -------------------------------------- */

static long double load_float(tnt_dtype_t dt, const void *p)
{
    uint64_t u = load_bits(dt, p);
    double d;
    switch (dt) {
    case TNT_F32: return f32_of((uint32_t)u);
    case TNT_F64: memcpy(&d, &u, 8); return d;
    case TNT_F16: return ref_f16_value((uint16_t)u);
    default: return ref_bf16_value((uint16_t)u);
    }
}

static int elem_is_nan(tnt_dtype_t dt, const void *p)
{
    return is_float(dt) && isnan(load_float(dt, p));
}

/* Does this NaN have its quiet bit set? */
static int elem_is_quiet(tnt_dtype_t dt, const void *p)
{
    static const uint64_t quiet[] = {0x400000, 0x8000000000000ull, 0x200,
                                     0x40};
    return (load_bits(dt, p) & quiet[dt]) != 0;
}

static int64_t sign_extend(uint64_t raw, unsigned bits)
{
    uint64_t sign = 1ull << (bits - 1);
    /* Written without implementation-defined conversions. */
    return (raw & sign) ? -(int64_t)((sign - (raw & (sign - 1)) - 1)) - 1
                        : (int64_t)raw;
}

/* out = a op b, the way reduce.h specifies it, in wide arithmetic. */
static void ref_op(tnt_dtype_t dt, tnt_op_t op, const void *a, const void *b,
                   void *out)
{
    size_t es = esize[dt];
    unsigned bits = (unsigned)(8 * es);
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t ua = load_bits(dt, a), ub = load_bits(dt, b);
    int pick_b;

    if (op == TNT_MIN || op == TNT_MAX) {
        if (is_float(dt)) {
            long double fa = load_float(dt, a), fb = load_float(dt, b);
            pick_b = op == TNT_MIN ? fb < fa : fb > fa;
        } else if (is_signed_int(dt)) {
            int64_t sa = sign_extend(ua, bits), sb = sign_extend(ub, bits);
            pick_b = op == TNT_MIN ? sb < sa : sb > sa;
        } else {
            pick_b = op == TNT_MIN ? ub < ua : ub > ua;
        }
        memcpy(out, pick_b ? b : a, es);
        return;
    }
    if (is_float(dt)) {
        long double fa = load_float(dt, a), fb = load_float(dt, b);
        long double r = op == TNT_PROD ? fa * fb : fa + fb;
        float f = (float)r;
        double d = (double)r;
        uint16_t h;
        switch (dt) {
        case TNT_F32: memcpy(out, &f, 4); break;
        case TNT_F64: memcpy(out, &d, 8); break;
        case TNT_F16: h = ref_f16(f); memcpy(out, &h, 2); break;
        default: h = ref_bf16(f); memcpy(out, &h, 2); break;
        }
        return;
    }
    if (is_signed_int(dt)) {
        wide_int sa = sign_extend(ua, bits), sb = sign_extend(ub, bits);
        wide_int r = op == TNT_PROD ? sa * sb : sa + sb;
        store_bits(dt, out, (uint64_t)r & mask);
    } else {
        wide_uint r = op == TNT_PROD ? (wide_uint)ua * ub : (wide_uint)ua + ub;
        store_bits(dt, out, (uint64_t)r & mask);
    }
}

/* ---- Test data ------------------------------------------------------------ */

/*
 * Floats are mostly "nice": a full significand times 2^e with |e| <= 12,
 * so that sums and products are exact in long double and the reference
 * rounds only once, like the kernel. One element in 16 is special. Half
 * formats take any bit pattern: their sums and products are exact in long
 * double (bf16 sums far apart round to the larger operand either way).
 */
static void gen_elem(tnt_dtype_t dt, void *p)
{
    static const uint32_t f32_special[] = {
        0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
        0x7f800001, 0x7f7fffff, 0xff7fffff, 0x00800000, 0x00000001,
        0x80000001, 0x007fffff};
    static const double f64_special[] = {
        0.0, -0.0, INFINITY, -INFINITY, NAN, 0x1p1023, -0x1.8p1023,
        0x1p-1074, -0x1p-1022, 0x0.00000fffffp-1022};
    uint64_t r = rnd(), pick = rnd();
    int special = (pick & 15) == 0;
    unsigned bits = (unsigned)(8 * esize[dt]);
    int e = (int)((pick >> 8) % 25) - 12;
    float f;
    double d;

    switch (dt) {
    case TNT_F32:
        if (special) {
            store_bits(dt, p, f32_special[r % 13]);
            return;
        }
        f = ldexpf((float)((r & 0x7fffff) | 0x800000), e - 23);
        f = (pick & 16) ? -f : f;
        memcpy(p, &f, 4);
        return;
    case TNT_F64:
        d = special ? f64_special[r % 10]
                    : ldexp((double)((r & 0x1ffffff) | 0x2000000), e - 25);
        d = (!special && (pick & 16)) ? -d : d;
        memcpy(p, &d, 8);
        return;
    case TNT_F16:
    case TNT_BF16:
        store_bits(dt, p, special ? (r & 0x8000) : (r & 0xffff));
        return;
    default:
        if (special) { /* 0, 1, -1, MIN, MAX, 2 of the type. */
            uint64_t top = 1ull << (bits - 1);
            const uint64_t edge[] = {0, 1, ~0ull, top, top - 1, 2};
            r = edge[r % 6];
        }
        store_bits(dt, p, r);
    }
}

static void gen(tnt_dtype_t dt, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gen_elem(dt, (char *)buf + i * esize[dt]);
}

/* A buffer with 64-byte guard zones on both sides; data is 64-byte
 * aligned, or one element past that when `off` is set. */
#define GUARD 64
struct gbuf {
    unsigned char *base, *data;
    size_t bytes;
};

static int gbuf_init(struct gbuf *g, size_t n, size_t es, int off)
{
    size_t total = (2 * GUARD + (n + 1) * es + 63) / 64 * 64;
    g->base = aligned_alloc(64, total);
    if (g->base == NULL)
        return -1;
    memset(g->base, 0xa5, total);
    g->data = g->base + GUARD + (off ? es : 0);
    g->bytes = total;
    return 0;
}

/* Everything outside data[0, n) must still be 0xa5. */
static int gbuf_guards_intact(const struct gbuf *g, size_t n, size_t es)
{
    for (size_t i = 0; i < g->bytes; i++) {
        const unsigned char *p = g->base + i;
        if ((p < g->data || p >= g->data + n * es) && *p != 0xa5)
            return 0;
    }
    return 1;
}

/* ---- Kernel sweeps ------------------------------------------------------- */

enum alias { DISTINCT, DST_IS_A, DST_IS_B, A_IS_B, ALL_SAME, NALIAS };
static const char *const alias_name[NALIAS] = {"distinct", "dst==a",
                                               "dst==b", "a==b", "all same"};

/* Compare one result element; arithmetic NaNs need only be quiet NaNs. */
static int elem_ok(tnt_dtype_t dt, tnt_op_t op, const void *want,
                   const void *got)
{
    if (op != TNT_MIN && op != TNT_MAX && elem_is_nan(dt, want))
        return elem_is_nan(dt, got) && elem_is_quiet(dt, got);
    return memcmp(want, got, esize[dt]) == 0;
}

static int reported;

/* Run one (dtype, op, n, aliasing, offset) case at one SIMD level; 0 if
 * all is well. */
static int run_case(tnt_dtype_t dt, tnt_op_t op, size_t n, enum alias al,
                    int off, int level)
{
    size_t es = esize[dt];
    tnt_reduce_fn_t fn = tnt__reduce_fn_at(dt, op, level);
    struct gbuf A, B, D;
    unsigned char *want = malloc(n * es + 1), *a0 = malloc(n * es + 1);
    unsigned char *b0 = malloc(n * es + 1);
    int bad = 0;

    if (fn == NULL || !want || !a0 || !b0 || gbuf_init(&A, n, es, off) ||
        gbuf_init(&B, n, es, off) || gbuf_init(&D, n, es, off)) {
        fprintf(stderr, "setup failed for %s %s\n", dt_name[dt],
                op_name[op]);
        exit(2); /* Leaks are moot: nothing else can be tested. */
    }
    gen(dt, A.data, n);
    gen(dt, B.data, n);
    unsigned char *a = A.data;
    unsigned char *b = (al == A_IS_B || al == ALL_SAME) ? A.data : B.data;
    unsigned char *dst = al == DST_IS_A || al == ALL_SAME ? A.data
                         : al == DST_IS_B                 ? B.data
                                                          : D.data;
    memcpy(a0, a, n * es);
    memcpy(b0, b, n * es);
    for (size_t i = 0; i < n; i++)
        ref_op(dt, op, a0 + i * es, b0 + i * es, want + i * es);

    fn(dst, a, b, n);

    for (size_t i = 0; i < n && !bad; i++) {
        if (!elem_ok(dt, op, want + i * es, dst + i * es)) {
            bad = 1;
            if (reported++ < 10)
                fprintf(stderr,
                        "\n  %s %s %s n=%zu %s off=%d: [%zu] a=%#" PRIx64
                        " b=%#" PRIx64 " want %#" PRIx64 " got %#" PRIx64,
                        tnt__simd_name(level), dt_name[dt], op_name[op], n,
                        alias_name[al], off, i,
                        load_bits(dt, a0 + i * es), load_bits(dt, b0 + i * es),
                        load_bits(dt, want + i * es),
                        load_bits(dt, dst + i * es));
        }
    }
    /* Inputs that are not the destination must be left alone. */
    if ((dst != a && memcmp(a, a0, n * es)) ||
        (dst != b && memcmp(b, b0, n * es)))
        bad = 1;
    if (!gbuf_guards_intact(&A, n, es) || !gbuf_guards_intact(&B, n, es) ||
        !gbuf_guards_intact(&D, n, es)) {
        bad = 1;
        if (reported++ < 10)
            fprintf(stderr, "\n  %s %s %s n=%zu %s: wrote outside dst",
                    tnt__simd_name(level), dt_name[dt], op_name[op], n,
                    alias_name[al]);
    }
    free(A.base);
    free(B.base);
    free(D.base);
    free(want);
    free(a0);
    free(b0);
    return bad;
}

/* Every case at every level the CPU has; the same inputs at each. */
static void sweep_dtype(tnt_dtype_t dt)
{
    unsigned failed = 0;

    for (int lv = 0; lv < TNT__SIMD_COUNT; lv++) {
        if (!tnt__simd_supported(lv))
            continue;
        rng_state = 0x5eed0000u + (unsigned)dt;
        for (int op = 0; op < TNT_OP_COUNT; op++)
            for (size_t li = 0; li < NLENGTHS; li++)
                for (int al = 0; al < NALIAS; al++)
                    for (int off = 0; off < 2; off++)
                        failed += (unsigned)run_case(dt, (tnt_op_t)op,
                                                     lengths[li],
                                                     (enum alias)al, off, lv);
    }
    CU_ASSERT_EQUAL(failed, 0);
}

static void test_sweep_f32(void) { sweep_dtype(TNT_F32); }
static void test_sweep_f64(void) { sweep_dtype(TNT_F64); }
static void test_sweep_f16(void) { sweep_dtype(TNT_F16); }
static void test_sweep_bf16(void) { sweep_dtype(TNT_BF16); }
static void test_sweep_i8(void) { sweep_dtype(TNT_I8); }
static void test_sweep_u8(void) { sweep_dtype(TNT_U8); }
static void test_sweep_i32(void) { sweep_dtype(TNT_I32); }
static void test_sweep_u32(void) { sweep_dtype(TNT_U32); }
static void test_sweep_i64(void) { sweep_dtype(TNT_I64); }
static void test_sweep_u64(void) { sweep_dtype(TNT_U64); }

/* The engine accumulates rank after rank in place; each step rounds. */
static void half_chain_at(int lv)
{
    enum { N = 1000, RANKS = 8 };
    static uint16_t in[RANKS][N], acc[N], want[N];

    for (int dt = TNT_F16; dt <= TNT_BF16; dt++) {
        for (int op = TNT_SUM; op < TNT_OP_COUNT; op++) {
            tnt_reduce_fn_t fn = tnt__reduce_fn_at((tnt_dtype_t)dt, op, lv);
            rng_state = 77;
            for (int r = 0; r < RANKS; r++)
                for (int i = 0; i < N; i++) /* Moderate values: no inf. */
                    in[r][i] = (uint16_t)((rnd() & 0x83ff) |
                                          (dt == TNT_F16 ? 0x3800 : 0x3f00));
            memcpy(acc, in[0], sizeof acc);
            memcpy(want, in[0], sizeof want);
            for (int r = 1; r < RANKS; r++) {
                fn(acc, acc, in[r], N);
                for (int i = 0; i < N; i++) {
                    uint16_t w;
                    ref_op((tnt_dtype_t)dt, op, &want[i], &in[r][i], &w);
                    want[i] = w;
                }
            }
            CU_ASSERT(memcmp(acc, want, sizeof acc) == 0);
        }
    }
}

static void test_half_chain(void)
{
    for (int lv = 0; lv < TNT__SIMD_COUNT; lv++)
        if (tnt__simd_supported(lv))
            half_chain_at(lv);
}

/* ---- Conversions ---------------------------------------------------------- */

/* f16 -> f32 -> f16 over all 65536 patterns; values checked by ldexp. */
static void roundtrip_all(tnt_dtype_t dt)
{
    unsigned bad = 0;
    uint16_t quiet = dt == TNT_F16 ? 0x200 : 0x40;

    for (uint32_t p = 0; p <= 0xffff; p++) {
        uint16_t h = (uint16_t)p, back;
        float f = dt == TNT_F16 ? tnt__f16_to_f32(h) : tnt__bf16_to_f32(h);
        double want = dt == TNT_F16 ? ref_f16_value(h) : ref_bf16_value(h);
        int nan = dt == TNT_F16 ? f16_is_nan(h) : bf16_is_nan(h), ok;

        back = dt == TNT_F16 ? tnt__f32_to_f16(f) : tnt__f32_to_bf16(f);
        if (nan) /* Quiet NaN in f32; back: same sign and payload, quiet. */
            ok = isnan(f) && (bits_of_f32(f) & 0x400000) &&
                 !signbit(f) == !(h & 0x8000) && back == (h | quiet);
        else
            ok = (double)f == want && !signbit(f) == !(h & 0x8000) &&
                 back == h;
        bad += !ok;
        if (!ok && reported++ < 10)
            fprintf(stderr, "\n  %s pattern %#x: f32 %a back %#x",
                    dt_name[dt], (unsigned)h, (double)f, (unsigned)back);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_f16_roundtrip(void) { roundtrip_all(TNT_F16); }
static void test_bf16_roundtrip(void) { roundtrip_all(TNT_BF16); }

/* One f32 -> half conversion against the table reference. */
static int convert_ok(tnt_dtype_t dt, float f)
{
    uint16_t got = dt == TNT_F16 ? tnt__f32_to_f16(f) : tnt__f32_to_bf16(f);
    uint16_t want = dt == TNT_F16 ? ref_f16(f) : ref_bf16(f);
    int ok;

    if (isnan(f)) /* Quiet NaN with the same sign, never infinity. */
        ok = (dt == TNT_F16 ? f16_is_nan(got) : bf16_is_nan(got)) &&
             (got & (dt == TNT_F16 ? 0x200 : 0x40)) &&
             !(got & 0x8000) == !signbit(f);
    else
        ok = got == want;
    if (!ok && reported++ < 10)
        fprintf(stderr, "\n  f32 %#x (%a) -> %s: want %#x got %#x",
                bits_of_f32(f), (double)f, dt_name[dt], want, got);
    return ok;
}

/* Around every representable half value: the value itself, the f32
 * neighbours of the midpoint to the next value, the midpoint itself, and
 * the f32 values just inside both ends; then a million random patterns. */
static void sweep_conversion(tnt_dtype_t dt)
{
    const double *t = dt == TNT_F16 ? f16_table : bf16_table;
    unsigned inf = dt == TNT_F16 ? F16_INF : BF16_INF, bad = 0;

    for (unsigned p = 0; p < inf; p++) {
        float lo = (float)t[p], hi = (float)t[p + 1];
        float mid = (float)((t[p] + t[p + 1]) / 2); /* Exact in f32. */
        float probes[] = {lo, nextafterf(lo, INFINITY), nextafterf(mid, 0),
                          mid, nextafterf(mid, INFINITY),
                          nextafterf(hi, 0)};
        if (isinf(hi)) /* bf16: the past-the-end value 2^128 is no f32. */
            probes[5] = FLT_MAX;
        for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
            bad += !convert_ok(dt, probes[i]);
            bad += !convert_ok(dt, -probes[i]);
        }
    }
    rng_state = 1234;
    for (int i = 0; i < (1 << 20); i++)
        bad += !convert_ok(dt, f32_of((uint32_t)rnd()));
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_f16_rounding_sweep(void) { sweep_conversion(TNT_F16); }
static void test_bf16_rounding_sweep(void) { sweep_conversion(TNT_BF16); }

/* Hand-picked cases whose answers are known without any reference. */
static void test_f16_chosen(void)
{
    CU_ASSERT_EQUAL(tnt__f32_to_f16(1.0f), 0x3c00);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie: even */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(1.0f + 0x3p-11f), 0x3c02); /* tie: even */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(f32_of(0x3f801001)), 0x3c01);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(-2.0f), 0xc000);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(65504.0f), 0x7bff);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(65519.99f), 0x7bff);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(65520.0f), 0x7c00); /* overflow tie */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(1e10f), 0x7c00);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(-FLT_MAX), 0xfc00);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(INFINITY), 0x7c00);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(-INFINITY), 0xfc00);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(-0.0f), 0x8000);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(0x1p-14f), 0x0400);   /* min normal */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(0x1p-24f), 0x0001);   /* min subnormal */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(0x1p-25f), 0x0000);   /* tie: even 0 */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(-0x1.000002p-25f), 0x8001);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(0x3p-25f), 0x0002);   /* tie 1|2: 2 */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400); /* carry */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(0x1p-149f), 0x0000);
    CU_ASSERT_EQUAL(tnt__f16_to_f32(0x0001), 0x1p-24f);
    CU_ASSERT_EQUAL(tnt__f16_to_f32(0x03ff), 0x3ffp-24f);
    CU_ASSERT_EQUAL(tnt__f16_to_f32(0x7bff), 65504.0f);
    CU_ASSERT_EQUAL(tnt__f16_to_f32(0xc000), -2.0f);
    CU_ASSERT(isinf(tnt__f16_to_f32(0xfc00)) && tnt__f16_to_f32(0xfc00) < 0);
    /* Signalling NaNs (quiet bit clear) must not become infinities. */
    CU_ASSERT_EQUAL(tnt__f32_to_f16(f32_of(0x7f800001)), 0x7e00);
    CU_ASSERT_EQUAL(tnt__f32_to_f16(f32_of(0xffc00000)), 0xfe00);
    CU_ASSERT_EQUAL(bits_of_f32(tnt__f16_to_f32(0x7c01)), 0x7fc02000);
}

static void test_bf16_chosen(void)
{
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(1.0f), 0x3f80);
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);  /* tie: even */
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);  /* tie: even */
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(1.0f + 0x1.02p-8f), 0x3f81);
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(f32_of(0x7f7f7fff)), 0x7f7f);
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(f32_of(0x7f7f8000)), 0x7f80); /* inf */
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(FLT_MAX), 0x7f80);
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(-FLT_MAX), 0xff80);
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(-0.0f), 0x8000);
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(f32_of(0x00008000)), 0x0000); /* tie */
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(f32_of(0x00018000)), 0x0002); /* tie */
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(f32_of(0x00008001)), 0x0001);
    /* Truncating these NaNs would give infinity (0x7f80) or, with the
     * rounding carry, negative zero. */
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(f32_of(0x7f800001)), 0x7fc0);
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(f32_of(0x7fffffff)), 0x7fff);
    CU_ASSERT_EQUAL(tnt__f32_to_bf16(f32_of(0xff80ffff)), 0xffc0);
    CU_ASSERT_EQUAL(tnt__bf16_to_f32(0x3f80), 1.0f);
    CU_ASSERT_EQUAL(tnt__bf16_to_f32(0x0001), 0x1p-133f);
    CU_ASSERT_EQUAL(bits_of_f32(tnt__bf16_to_f32(0x7f81)), 0x7fc10000);
}

/* ---- Integer wrap-around and float MIN/MAX --------------------------- */

#define APPLY(dt, op, T, x, y, want)                                        \
    do {                                                                    \
        T a_[1] = {x}, b_[1] = {y}, d_[1];                                  \
        tnt__reduce_fn(dt, op)(d_, a_, b_, 1);                              \
        CU_ASSERT(d_[0] == (T)(want));                                      \
    } while (0)

static void test_integer_wrap(void)
{
    APPLY(TNT_I32, TNT_SUM, int32_t, INT32_MAX, 1, INT32_MIN);
    APPLY(TNT_I32, TNT_SUM, int32_t, INT32_MIN, -1, INT32_MAX);
    APPLY(TNT_I32, TNT_PROD, int32_t, INT32_MAX, 2, -2);
    APPLY(TNT_I32, TNT_PROD, int32_t, INT32_MIN, -1, INT32_MIN);
    APPLY(TNT_I8, TNT_SUM, int8_t, 127, 1, -128);
    APPLY(TNT_I8, TNT_PROD, int8_t, 100, 3, 44);      /* 300 - 256 */
    APPLY(TNT_I8, TNT_PROD, int8_t, -128, -1, -128);
    APPLY(TNT_I8, TNT_PROD, int8_t, -7, 5, -35);
    APPLY(TNT_U8, TNT_SUM, uint8_t, 255, 1, 0);
    APPLY(TNT_U8, TNT_PROD, uint8_t, 255, 255, 1);    /* 65025 mod 256 */
    APPLY(TNT_U32, TNT_PROD, uint32_t, 65536u, 65536u, 0);
    APPLY(TNT_U32, TNT_SUM, uint32_t, UINT32_MAX, 2u, 1);
    APPLY(TNT_U64, TNT_SUM, uint64_t, UINT64_MAX, 2u, 1);
    APPLY(TNT_U64, TNT_PROD, uint64_t, 1ull << 32, 1ull << 32, 0);
    APPLY(TNT_U64, TNT_PROD, uint64_t, 0x100000001ull, 0x100000001ull,
          0x200000001ull);
    APPLY(TNT_I64, TNT_SUM, int64_t, INT64_MAX, 1, INT64_MIN);
    APPLY(TNT_I64, TNT_PROD, int64_t, INT64_MIN, -1, INT64_MIN);
    APPLY(TNT_I64, TNT_MIN, int64_t, -1, INT64_MIN, INT64_MIN);
    APPLY(TNT_U64, TNT_MAX, uint64_t, 1, UINT64_MAX, UINT64_MAX);
    APPLY(TNT_I8, TNT_MAX, int8_t, -1, -128, -1);
    APPLY(TNT_U8, TNT_MIN, uint8_t, 255, 128, 128);
}

/* Bits of min/max(a, b) on f32: a unless b is strictly smaller/larger. */
static uint32_t f32_pick(tnt_op_t op, uint32_t a, uint32_t b)
{
    float x = f32_of(a), y = f32_of(b), d;
    tnt__reduce_fn(TNT_F32, op)(&d, &x, &y, 1);
    return bits_of_f32(d);
}

static void test_float_minmax(void)
{
    const uint32_t nan = 0x7fc00000, one = 0x3f800000, pz = 0, nz = 0x80000000;
    uint16_t h[2] = {0x7e00, 0x3c00}, hd;

    CU_ASSERT_EQUAL(f32_pick(TNT_MIN, nan, one), nan);
    CU_ASSERT_EQUAL(f32_pick(TNT_MIN, one, nan), one);
    CU_ASSERT_EQUAL(f32_pick(TNT_MAX, nan, one), nan);
    CU_ASSERT_EQUAL(f32_pick(TNT_MAX, one, nan), one);
    CU_ASSERT_EQUAL(f32_pick(TNT_MIN, pz, nz), pz);
    CU_ASSERT_EQUAL(f32_pick(TNT_MIN, nz, pz), nz);
    CU_ASSERT_EQUAL(f32_pick(TNT_MAX, nz, pz), nz);
    CU_ASSERT_EQUAL(f32_pick(TNT_MIN, 0xbf800000, one), 0xbf800000);
    CU_ASSERT_EQUAL(f32_pick(TNT_MAX, 0xbf800000, one), one);
    tnt__reduce_fn(TNT_F16, TNT_MIN)(&hd, &h[0], &h[1], 1);
    CU_ASSERT_EQUAL(hd, 0x7e00);
    tnt__reduce_fn(TNT_F16, TNT_MAX)(&hd, &h[1], &h[0], 1);
    CU_ASSERT_EQUAL(hd, 0x3c00);
}

/* ---- AVG scaling ---------------------------------------------------------- */

/* Reference quotient of one element, computed without the library's
 * formulas: floats in long double then rounded (through f32 for halves),
 * integers by dividing the magnitude. */
static void ref_scale(tnt_dtype_t dt, const void *in, void *out, int nranks)
{
    unsigned bits = (unsigned)(8 * esize[dt]);
    uint64_t u = load_bits(dt, in);

    if (is_float(dt)) {
        long double q = load_float(dt, in) / nranks;
        float f = (float)q;
        double d = (double)q;
        uint16_t h;
        switch (dt) {
        case TNT_F32: memcpy(out, &f, 4); break;
        case TNT_F64: memcpy(out, &d, 8); break;
        case TNT_F16: h = ref_f16(f); memcpy(out, &h, 2); break;
        default: h = ref_bf16(f); memcpy(out, &h, 2); break;
        }
    } else if (is_signed_int(dt)) {
        int64_t s = sign_extend(u, bits);
        uint64_t mag = s < 0 ? (uint64_t)(-(s + 1)) + 1 : (uint64_t)s;
        uint64_t q = mag / (uint64_t)nranks; /* nranks >= 2: q < 2^63 */
        store_bits(dt, out, s < 0 ? 0 - q : q);
    } else {
        store_bits(dt, out, u / (uint64_t)nranks);
    }
}

static void scale_avg_at(int lv)
{
    static const int ranks[] = {2, 3, 7, 8, 1000};
    static const size_t ns[] = {0, 1, 17, 1000};
    enum { NMAX = 1000 };
    static unsigned char buf[NMAX * 8], orig[NMAX * 8], want[NMAX * 8];

    rng_state = 99;
    for (int dt = 0; dt < TNT_DTYPE_COUNT; dt++) {
        size_t es = esize[dt];
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            size_t n = ns[ni];
            for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++) {
                gen((tnt_dtype_t)dt, orig, n);
                for (size_t i = 0; i < n; i++)
                    ref_scale((tnt_dtype_t)dt, orig + i * es, want + i * es,
                              ranks[ri]);
                memcpy(buf, orig, n * es);
                tnt__scale_avg_at(buf, n, (tnt_dtype_t)dt, ranks[ri], lv);
                int ok = 1;
                for (size_t i = 0; i < n; i++)
                    ok &= elem_ok((tnt_dtype_t)dt, TNT_SUM, want + i * es,
                                  buf + i * es);
                if (!ok && reported++ < 10)
                    fprintf(stderr, "\n  scale_avg %s %s n=%zu nranks=%d",
                            tnt__simd_name(lv), dt_name[dt], n, ranks[ri]);
                CU_ASSERT(ok);
            }
            /* nranks 1 is the identity; 0 and -1 are ignored. */
            gen((tnt_dtype_t)dt, orig, n);
            memcpy(buf, orig, n * es);
            tnt__scale_avg_at(buf, n, (tnt_dtype_t)dt, 1, lv);
            tnt__scale_avg_at(buf, n, (tnt_dtype_t)dt, 0, lv);
            tnt__scale_avg_at(buf, n, (tnt_dtype_t)dt, -1, lv);
            CU_ASSERT(memcmp(buf, orig, n * es) == 0);
        }
    }
}

static void test_scale_avg(void)
{
    for (int lv = 0; lv < TNT__SIMD_COUNT; lv++)
        if (tnt__simd_supported(lv))
            scale_avg_at(lv);
}

static void test_scale_avg_chosen(void)
{
    int8_t i8[] = {-7, 7, -128, 127, -1};
    int32_t i32[] = {-7, 7, INT32_MIN, -1};
    int64_t i64[] = {-7, INT64_MIN};
    uint8_t u8[] = {255, 1};
    float f32[] = {1.0f, -3.0f};
    uint16_t f16[] = {0x3c00, 0x0001}; /* 1.0, 2^-24 */
    uint16_t bf16[] = {0x3f80};

    tnt__scale_avg(i8, 5, TNT_I8, 2);
    CU_ASSERT(i8[0] == -3 && i8[1] == 3 && i8[2] == -64 && i8[3] == 63 &&
              i8[4] == 0);
    tnt__scale_avg(i32, 4, TNT_I32, 2);
    CU_ASSERT(i32[0] == -3 && i32[1] == 3 && i32[2] == INT32_MIN / 2 &&
              i32[3] == 0);
    tnt__scale_avg(i64, 2, TNT_I64, 2);
    CU_ASSERT(i64[0] == -3 && i64[1] == INT64_MIN / 2);
    tnt__scale_avg(u8, 2, TNT_U8, 300); /* nranks wider than the type */
    CU_ASSERT(u8[0] == 0 && u8[1] == 0);
    tnt__scale_avg(f32, 2, TNT_F32, 3);
    CU_ASSERT(f32[0] == 1.0f / 3.0f && f32[1] == -1.0f);
    tnt__scale_avg(f16, 2, TNT_F16, 2);
    CU_ASSERT(f16[0] == 0x3800 && f16[1] == 0x0000); /* 2^-25: tie to 0 */
    tnt__scale_avg(bf16, 1, TNT_BF16, 4);
    CU_ASSERT(bf16[0] == 0x3e80);
    tnt__scale_avg(NULL, 0, TNT_F32, 4); /* must not crash */
    tnt__scale_avg(i8, 1, (tnt_dtype_t)99, 4);
    CU_ASSERT(i8[0] == -3);
}

/* ---- SIMD levels against the base level, bit for bit ------------------- */

/* Stricter than the reference: NaN payloads of arithmetic results must
 * match too, so that a run gives the same bits whatever the CPU. */
static void test_levels_bitwise(void)
{
    enum { NMAX = 4097 };
    static unsigned char a[NMAX * 8], b[NMAX * 8], want[NMAX * 8],
        got[NMAX * 8];
    unsigned bad = 0, levels = 0;

    for (int lv = 1; lv < TNT__SIMD_COUNT; lv++) {
        if (!tnt__simd_supported(lv)) {
            fprintf(stderr, "\n  (no %s on this CPU: not tested)",
                    tnt__simd_name(lv));
            continue;
        }
        levels++;
        for (int dt = 0; dt < TNT_DTYPE_COUNT; dt++) {
            size_t es = esize[dt];
            for (int op = 0; op < TNT_OP_COUNT; op++) {
                tnt_reduce_fn_t ref = tnt__reduce_fn_at(dt, op, 0);
                tnt_reduce_fn_t fn = tnt__reduce_fn_at(dt, op, lv);
                CU_ASSERT_FATAL(ref != NULL && fn != NULL);
                for (size_t li = 0; li < NLENGTHS; li++) {
                    size_t n = lengths[li];
                    rng_state = 0xb175u + li;
                    gen((tnt_dtype_t)dt, a, n);
                    gen((tnt_dtype_t)dt, b, n);
                    ref(want, a, b, n);
                    fn(got, a, b, n);
                    int ok = memcmp(want, got, n * es) == 0;
                    memcpy(got, a, n * es); /* In place, as the engine. */
                    fn(got, got, b, n);
                    ok &= memcmp(want, got, n * es) == 0;
                    if (!ok && reported++ < 10)
                        fprintf(stderr, "\n  %s %s %s n=%zu differs from %s",
                                tnt__simd_name(lv), dt_name[dt],
                                op_name[op], n, tnt__simd_name(0));
                    bad += !ok;
                }
            }
        }
    }
    fprintf(stderr, " [%u SIMD level(s) beyond %s] ", levels,
            tnt__simd_name(0));
    CU_ASSERT_EQUAL(bad, 0);
}

/* Two NaNs with different payloads (signalling or quiet) in every
 * element: the one from a survives, made quiet by SUM, AVG and PROD and
 * kept as it is by MIN and MAX (they return an operand), at every level
 * and whichever buffer the result goes to (out of place, over a, over b):
 * left to the compiler the choice differed between levels and between
 * the in-place and out-of-place loops. */
static void test_nan_payload_levels(void)
{
    enum { N = 1000 };
    static uint32_t a32[N], b32[N], g32[N];
    static uint64_t a64[N], b64[N], g64[N];
    unsigned bad = 0, reported = 0;

    for (int lv = 0; lv < TNT__SIMD_COUNT; lv++) {
        if (!tnt__simd_supported(lv))
            continue;
        for (int op = 0; op < TNT_OP_COUNT; op++) {
            int quiets = op != TNT_MIN && op != TNT_MAX;
            for (int swap = 0; swap < 2; swap++)
                for (int where = 0; where < 3; where++) {
                    for (uint32_t i = 0; i < N; i++) {
                        uint32_t p = 0x7f800000u | ((i * 7919u + 1) & 0x7fffff);
                        uint32_t q = 0xff800000u | ((i * 104729u + 2) & 0x7fffff);
                        uint64_t P = 0x7ff0000000000000ull | (i * 7919ull + 1);
                        uint64_t Q = 0xfff8000000000000ull | (i * 104729ull + 2);
                        a32[i] = swap ? q : p;
                        b32[i] = swap ? p : q;
                        a64[i] = swap ? Q : P;
                        b64[i] = swap ? P : Q;
                    }
                    /* where: 0 out of place, 1 over a, 2 over b. */
                    uint32_t *d32 = where == 0 ? g32 : where == 1 ? a32 : b32;
                    uint64_t *d64 = where == 0 ? g64 : where == 1 ? a64 : b64;
                    uint32_t w32[N];
                    uint64_t w64[N];
                    for (uint32_t i = 0; i < N; i++) {
                        w32[i] = a32[i] | (quiets ? 0x00400000u : 0);
                        w64[i] = a64[i] |
                                 (quiets ? 0x0008000000000000ull : 0);
                    }
                    tnt__reduce_fn_at(TNT_F32, op, lv)(d32, a32, b32, N);
                    tnt__reduce_fn_at(TNT_F64, op, lv)(d64, a64, b64, N);
                    int ok = memcmp(w32, d32, sizeof w32) == 0 &&
                             memcmp(w64, d64, sizeof w64) == 0;
                    if (!ok && reported++ < 10)
                        fprintf(stderr, "\n  NaN payload: %s op %s swap %d "
                                "%s: not a's", tnt__simd_name(lv),
                                op_name[op], swap,
                                where == 0 ? "out of place"
                                : where == 1 ? "over a" : "over b");
                    bad += !ok;
                }
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* Every f16 / bf16 pattern against a set of second operands that covers
 * zeros, subnormals, the largest finite values, infinities and NaNs of
 * both kinds, with both operand orders; and AVG's division of every
 * pattern. */
static void test_half_levels_exhaustive(void)
{
    static const uint16_t f16_b[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff,
                                     0x0400, 0x3c00, 0xbc00, 0x3c01, 0x7bff,
                                     0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01,
                                     0xfd55, 0x1234, 0xc321};
    static const uint16_t bf16_b[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f,
                                      0x0080, 0x3f80, 0xbf80, 0x3f81, 0x7f7f,
                                      0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81,
                                      0xffaa, 0x1234, 0xc321};
    enum { N = 1 << 16, NB = sizeof f16_b / sizeof f16_b[0] };
    static uint16_t all[N], other[N], want[N], got[N];
    unsigned bad = 0;

    for (uint32_t p = 0; p < N; p++)
        all[p] = (uint16_t)p;
    for (int lv = 1; lv < TNT__SIMD_COUNT; lv++) {
        if (!tnt__simd_supported(lv))
            continue;
        for (int dt = TNT_F16; dt <= TNT_BF16; dt++) {
            const uint16_t *bs = dt == TNT_F16 ? f16_b : bf16_b;
            for (int op = 0; op < TNT_OP_COUNT; op++) {
                tnt_reduce_fn_t ref = tnt__reduce_fn_at(dt, op, 0);
                tnt_reduce_fn_t fn = tnt__reduce_fn_at(dt, op, lv);
                for (int k = 0; k < NB; k++) {
                    for (uint32_t p = 0; p < N; p++)
                        other[p] = bs[k];
                    ref(want, all, other, N);
                    fn(got, all, other, N);
                    bad += memcmp(want, got, sizeof want) != 0;
                    ref(want, other, all, N);
                    fn(got, other, all, N);
                    bad += memcmp(want, got, sizeof want) != 0;
                }
            }
            for (int r = 2; r <= 7; r += 5) { /* AVG over 2 and 7 ranks. */
                memcpy(want, all, sizeof want);
                memcpy(got, all, sizeof got);
                tnt__scale_avg_at(want, N, dt, r, 0);
                tnt__scale_avg_at(got, N, dt, r, lv);
                bad += memcmp(want, got, sizeof want) != 0;
            }
            if (bad && reported++ < 10)
                fprintf(stderr, "\n  %s %s differs from %s",
                        tnt__simd_name(lv), dt_name[dt], tnt__simd_name(0));
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The level a fresh process picks with TNT_SIMD set to `value`: this
 * program run again with --simd-level (a fork would inherit the level
 * this process chose already). */
static int level_with_env(const char *value)
{
    int status;
    pid_t pid = fork();

    if (pid == 0) {
        setenv("TNT_SIMD", value, 1);
        setenv("TNT_LOG_LEVEL", "ERROR", 1); /* The expected warnings. */
        execl("/proc/self/exe", "test_kernels", "--simd-level",
              (char *)NULL);
        _exit(99);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void test_simd_env(void)
{
    int best = 0;

    for (int lv = 0; lv < TNT__SIMD_COUNT; lv++)
        if (tnt__simd_supported(lv))
            best = lv;
    CU_ASSERT_EQUAL(level_with_env("auto"), best);
    CU_ASSERT_EQUAL(level_with_env(""), best);
    CU_ASSERT_EQUAL(level_with_env("no-such-level"), best); /* warned */
    CU_ASSERT_EQUAL(level_with_env(tnt__simd_name(0)), 0);
    /* A level the CPU lacks falls back to the best one below it. */
    CU_ASSERT_EQUAL(level_with_env("avx2"),
                    tnt__simd_supported(TNT__SIMD_AVX2) ? TNT__SIMD_AVX2 : 0);
    CU_ASSERT_EQUAL(level_with_env("avx512"), best);
    CU_ASSERT_STRING_EQUAL(tnt__simd_name(TNT__SIMD_COUNT), "?");
    CU_ASSERT_STRING_EQUAL(tnt__simd_name(-1), "?");
    CU_ASSERT_FALSE(tnt__simd_supported(TNT__SIMD_COUNT));
    CU_ASSERT_FALSE(tnt__simd_supported(-1));
    CU_ASSERT_PTR_NULL(tnt__reduce_fn_at(TNT_F32, TNT_SUM, -1));
    CU_ASSERT_PTR_NULL(tnt__reduce_fn_at(TNT_F32, TNT_SUM, TNT__SIMD_COUNT));
    CU_ASSERT_PTR_NULL(tnt__reduce_fn_at(TNT_DTYPE_COUNT, TNT_SUM, 0));
    CU_ASSERT(tnt__reduce_fn(TNT_F32, TNT_SUM) ==
              tnt__reduce_fn_at(TNT_F32, TNT_SUM, tnt__simd_active()));
}

/* ---- Lookup ----------------------------------------------------------------- */

static void test_lookup(void)
{
    for (int dt = 0; dt < TNT_DTYPE_COUNT; dt++) {
        for (int op = 0; op < TNT_OP_COUNT; op++)
            CU_ASSERT_PTR_NOT_NULL(tnt__reduce_fn(dt, op));
        /* AVG is a sum with one division at the end. */
        CU_ASSERT(tnt__reduce_fn(dt, TNT_AVG) == tnt__reduce_fn(dt, TNT_SUM));
        CU_ASSERT_PTR_NULL(tnt__reduce_fn(dt, TNT_OP_COUNT));
        CU_ASSERT_PTR_NULL(tnt__reduce_fn(dt, (tnt_op_t)99));
        CU_ASSERT_PTR_NULL(tnt__reduce_fn(dt, (tnt_op_t)-1));
    }
    CU_ASSERT_PTR_NULL(tnt__reduce_fn(TNT_DTYPE_COUNT, TNT_SUM));
    CU_ASSERT_PTR_NULL(tnt__reduce_fn((tnt_dtype_t)99, TNT_SUM));
    CU_ASSERT_PTR_NULL(tnt__reduce_fn((tnt_dtype_t)-1, TNT_MAX));
    /* An empty reduction touches nothing, not even its pointers. */
    tnt__reduce_fn(TNT_F64, TNT_SUM)(NULL, NULL, NULL, 0);
    tnt__reduce_fn(TNT_F16, TNT_PROD)(NULL, NULL, NULL, 0);
}

/* ---- Registration ----------------------------------------------------------- */

struct test_def {
    const char *name;
    CU_TestFunc fn;
};

static int add_suite(const char *name, const struct test_def *tests)
{
    CU_pSuite suite = CU_add_suite(name, NULL, NULL);
    if (suite == NULL)
        return -1;
    for (; tests->name; tests++)
        if (CU_add_test(suite, tests->name, tests->fn) == NULL)
            return -1;
    return 0;
}

/* The reproducible mode's canonical reduction (collectives/canon.h):
 * the same bits at every SIMD level, in place as out of place, and
 * whatever cut of the buffer it is called on (segments of another size
 * give the same elements); random values with specials (NaN, infinities,
 * zeros of both signs), k = 1..5 inputs, the own one at every position,
 * every float dtype and op. */
static void test_canon_levels(void)
{
    enum { N = 1031, K = 5 };
    static unsigned char in[K][N * 8], want[N * 8], got[N * 8];
    const tnt_dtype_t dts[] = {TNT_F32, TNT_F64, TNT_F16, TNT_BF16};
    for (int di = 0; di < 4; di++)
        for (int op = 0; op < TNT_OP_COUNT; op++)
            for (int k = 1; k <= K; k++) {
                tnt_dtype_t dt = dts[di];
                size_t es = esize[dt], stride = N * 8;
                for (int q = 0; q < k; q++)
                    gen(dt, in[q], N);
                int self = (op + k) % k;
                tnt__canon_reduce_at(TNT__SIMD_BASE, want, in[self], self,
                                     in, stride, k, N, dt, (tnt_op_t)op);
                for (int lvl = 0; lvl < TNT__SIMD_COUNT; lvl++) {
                    if (!tnt__simd_supported(lvl))
                        continue;
                    /* In two cuts at an odd place. */
                    size_t cut = 257 + (size_t)lvl * 100;
                    memset(got, 0xa5, sizeof got);
                    tnt__canon_reduce_at(lvl, got, in[self], self, in,
                                         stride, k, cut, dt, (tnt_op_t)op);
                    tnt__canon_reduce_at(lvl, got + cut * es,
                                         in[self] + cut * es, self,
                                         (unsigned char *)in + cut * es,
                                         stride, k, N - cut, dt,
                                         (tnt_op_t)op);
                    CU_ASSERT(memcmp(got, want, N * es) == 0);
                }
                /* In place: the own input is the result's buffer. */
                memcpy(got, in[self], N * es);
                tnt__canon_reduce(got, got, self, in, stride, k, N, dt,
                                  (tnt_op_t)op);
                CU_ASSERT(memcmp(got, want, N * es) == 0);
            }
}

/* SUM of two f32 or f64 inputs takes a shortcut (canon.c, sum2_block:
 * the type's own addition): the same bits as the general double-double
 * path, which a third input of -0.0 (x + -0 = x for every x, zeros
 * included) sends the same two inputs through; random values with
 * specials, at every level. */
static void test_canon_sum2(void)
{
    enum { N = 4099 };
    static unsigned char in[3][N * 8], two[N * 8], three[N * 8];
    const tnt_dtype_t dts[] = {TNT_F32, TNT_F64};
    for (int rep = 0; rep < 20; rep++)
        for (int di = 0; di < 2; di++) {
            tnt_dtype_t dt = dts[di];
            size_t es = esize[dt], stride = N * 8;
            gen(dt, in[0], N);
            gen(dt, in[1], N);
            for (size_t i = 0; i < N; i++) {
                if (dt == TNT_F32)
                    ((float *)in[2])[i] = -0.0f;
                else
                    ((double *)in[2])[i] = -0.0;
            }
            for (int lvl = 0; lvl < TNT__SIMD_COUNT; lvl++) {
                if (!tnt__simd_supported(lvl))
                    continue;
                tnt__canon_reduce_at(lvl, two, in[0], 0, in, stride, 2, N,
                                     dt, TNT_SUM);
                tnt__canon_reduce_at(lvl, three, in[0], 0, in, stride, 3, N,
                                     dt, TNT_SUM);
                CU_ASSERT(memcmp(two, three, N * es) == 0);
            }
        }
}

/* f32 and bf16 SUM and AVG of 2 to 4 inputs take a shortcut on full
 * blocks whose sums are exact in double (canon.c, exact_sum_block): the
 * whole buffer at once against the same in calls of 255 elements (block
 * tails: the general path), bitwise, at every level, in place too. Per
 * block of 256 elements the inputs' exponents span 0 to 30 binades
 * (around the shortcut's limit of 26), with zeros of both signs, and in
 * some blocks one element with a subnormal, infinity or NaN input; in
 * two of the eight rounds the exponents reach 2^159 (infinity). */
static void test_canon_exact(void)
{
    enum { N = 256 * 16 + 7, K = 4, PIECE = 255 };
    static unsigned char in[K][N * 4], whole[N * 4], pieces[N * 4];
    const tnt_dtype_t dts[] = {TNT_F32, TNT_BF16};
    const tnt_op_t ops[] = {TNT_SUM, TNT_AVG};
    static const uint32_t odd[] = {0x00000001u, 0x807fffffu, 0x7f800000u,
                                   0xff800000u, 0x7fc00000u, 0x00400000u};
    for (int rep = 0; rep < 8; rep++)
        for (int di = 0; di < 2; di++)
            for (int oi = 0; oi < 2; oi++)
                for (int k = 2; k <= K; k++) {
                    tnt_dtype_t dt = dts[di];
                    size_t es = esize[dt], stride = N * 4;
                    for (size_t i = 0; i < N; i++) {
                        size_t blk = i / 256;
                        int span = (int)((blk * 7 + (size_t)rep) % 31);
                        /* One base exponent per block (per element, the
                         * spans added up beyond the limit: no block took
                         * the shortcut). The last two reps near the top
                         * of the range: sums that overflow f32, inputs
                         * that are infinite (blocks of large values whose
                         * span alone would let them through). */
                        int base = (int)((blk * 13 + (size_t)rep * 5) % 40) +
                                   (rep < 6 ? -20 : 90);
                        for (int q = 0; q < k; q++) {
                            uint64_t r = rnd();
                            int e = base + (span ? (int)(r % (uint64_t)(span + 1))
                                                 : 0);
                            float f = ldexpf((float)((r >> 8) & 0xffffff) *
                                                 0x1p-24f + 1.0f, e);
                            f = (r >> 40) & 1 ? -f : f;
                            if ((r >> 41) % 16 == 0)
                                f = (r >> 45) & 1 ? -0.0f : 0.0f;
                            uint32_t u;
                            memcpy(&u, &f, 4);
                            /* One element with an odd input in some blocks. */
                            if (blk % 3 == 2 && i % 256 == (size_t)(17 * q + rep))
                                u = odd[(blk + (size_t)q) % 6];
                            /* In others one whose double sum rounds:
                             * 1 + 2^-24 + 2^-60 is above the f32 midpoint
                             * 1 + 2^-24, which the chain of doubles
                             * returns (a shortcut that took it would
                             * round to 1). */
                            if (blk % 3 == 1 && i % 256 == 5) {
                                static const uint32_t mid[] = {
                                    0x3f800000u, 0x33800000u, 0x21800000u, 0};
                                u = mid[q];
                            }
                            store_bits(dt, in[q] + i * es,
                                       dt == TNT_F32 ? u : u >> 16);
                        }
                    }
                    int self = (rep + k) % k;
                    for (int lvl = 0; lvl < TNT__SIMD_COUNT; lvl++) {
                        if (!tnt__simd_supported(lvl))
                            continue;
                        tnt__canon_reduce_at(lvl, whole, in[self], self, in,
                                             stride, k, N, dt, ops[oi]);
                        for (size_t f = 0; f < N; f += PIECE) {
                            size_t m = N - f < PIECE ? N - f : PIECE;
                            tnt__canon_reduce_at(
                                lvl, pieces + f * es, in[self] + f * es,
                                self, (unsigned char *)in + f * es, stride,
                                k, m, dt, ops[oi]);
                        }
                        CU_ASSERT(memcmp(whole, pieces, N * es) == 0);
                    }
                    memcpy(pieces, in[self], N * es);
                    tnt__canon_reduce(pieces, pieces, self, in, stride, k, N,
                                      dt, ops[oi]);
                    CU_ASSERT(memcmp(whole, pieces, N * es) == 0);
                }
}

/* The canonical reduction's own f16/bf16 conversions (canon.c, without
 * branches): one input gives every non-NaN pattern back, a NaN the
 * canonical quiet one; two inputs whose sum is exact in double give the
 * nearest pattern to it (ties to even), by this file's reference
 * rounding; also the sign of a zero sum. */
static void test_canon_half_exact(void)
{
    static uint16_t ab[2][65536], out[65536];
    uint16_t *a = ab[0], *b = ab[1];
    const tnt_dtype_t dts[] = {TNT_F16, TNT_BF16};
    for (int d = 0; d < 2; d++) {
        tnt_dtype_t dt = dts[d];
        int f16 = dt == TNT_F16;
        for (uint32_t h = 0; h < 65536; h++)
            a[h] = (uint16_t)h;
        tnt__canon_reduce(out, a, 0, NULL, 0, 1, 65536, dt, TNT_SUM);
        size_t bad = 0;
        for (uint32_t h = 0; h < 65536; h++) {
            int nan = f16 ? f16_is_nan((uint16_t)h) : bf16_is_nan((uint16_t)h);
            uint16_t want = nan ? (f16 ? 0x7e00 : 0x7fc0) : (uint16_t)h;
            bad += out[h] != want;
        }
        CU_ASSERT_EQUAL(bad, 0);
        /* Pairs: bf16 within 2^-20..2^20, so that a + b is exact. */
        for (uint32_t i = 0; i < 65536; i++) {
            uint16_t x = (uint16_t)rnd(), y = (uint16_t)rnd();
            if (!f16) {
                x = (uint16_t)((x & 0x807f) | ((107 + (x >> 7) % 41) << 7));
                y = (uint16_t)((y & 0x807f) | ((107 + (y >> 7) % 41) << 7));
            }
            int nan = f16 ? f16_is_nan(x) || f16_is_nan(y) : 0;
            a[i] = nan ? 0 : x;
            b[i] = nan ? 0 : y;
        }
        tnt__canon_reduce(out, a, 0, ab, sizeof ab[0], 2, 65536, dt,
                          TNT_SUM);
        bad = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            double va = f16 ? ref_f16_value(a[i]) : ref_bf16_value(a[i]);
            double vb = f16 ? ref_f16_value(b[i]) : ref_bf16_value(b[i]);
            double sum = va + vb;
            uint16_t want = f16 ? ref_f16(sum) : ref_bf16(sum);
            if (sum == 0) /* IEEE: +0 unless both are -0 */
                want = (uint16_t)((a[i] & b[i] & 0x8000) ? 0x8000 : 0);
            if (isinf(va) && isinf(vb) && va != vb)
                continue; /* inf - inf: NaN, compared by class */
            bad += out[i] != want;
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
}

int main(int argc, char **argv)
{
    static const struct test_def conversions[] = {
        {"f16 round trip, all patterns", test_f16_roundtrip},
        {"bf16 round trip, all patterns", test_bf16_roundtrip},
        {"f16 rounding sweep", test_f16_rounding_sweep},
        {"bf16 rounding sweep", test_bf16_rounding_sweep},
        {"f16 chosen values", test_f16_chosen},
        {"bf16 chosen values", test_bf16_chosen},
        {NULL, NULL}};
    static const struct test_def kernels[] = {
        {"lookup and invalid arguments", test_lookup},
        {"f32", test_sweep_f32},   {"f64", test_sweep_f64},
        {"f16", test_sweep_f16},   {"bf16", test_sweep_bf16},
        {"i8", test_sweep_i8},     {"u8", test_sweep_u8},
        {"i32", test_sweep_i32},   {"u32", test_sweep_u32},
        {"i64", test_sweep_i64},   {"u64", test_sweep_u64},
        {"f16/bf16 chained in place", test_half_chain},
        {"integer wrap-around", test_integer_wrap},
        {"float min/max semantics", test_float_minmax},
        {NULL, NULL}};
    static const struct test_def simd[] = {
        {"every level bit for bit as the base level", test_levels_bitwise},
        {"f16/bf16 every pattern at every level", test_half_levels_exhaustive},
        {"f32/f64 NaN payloads at every level", test_nan_payload_levels},
        {"TNT_SIMD and level lookup", test_simd_env},
        {"canonical reduction: every level, cut, in place", test_canon_levels},
        {"canonical reduction: two f32/f64 inputs' shortcut", test_canon_sum2},
        {"canonical reduction: f32/bf16 exact blocks' shortcut",
         test_canon_exact},
        {"canonical reduction: f16/bf16 patterns and exact pairs",
         test_canon_half_exact},
        {NULL, NULL}};
    static const struct test_def avg[] = {
        {"scale_avg, every dtype", test_scale_avg},
        {"scale_avg, chosen values", test_scale_avg_chosen},
        {NULL, NULL}};
    unsigned failures;

    if (argc == 2 && strcmp(argv[1], "--simd-level") == 0) {
        tnt__log_init(0); /* For test_simd_env; honours TNT_LOG_LEVEL. */
        return tnt__simd_active();
    }
    build_tables();
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "test_kernels: CUnit: %s\n", CU_get_error_msg());
        return 2;
    }
    if (add_suite("conversions", conversions) ||
        add_suite("kernels", kernels) || add_suite("simd", simd) ||
        add_suite("scale_avg", avg)) {
        fprintf(stderr, "test_kernels: CUnit: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    if (CU_basic_run_tests() != CUE_SUCCESS) {
        fprintf(stderr, "test_kernels: CUnit: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 2;
    }
    failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
