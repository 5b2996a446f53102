/*
 * The GPU-side allreduce's kernel (devmem_ipc.c): its argument block and
 * the code of one element, shared word for word by the CUDA kernel
 * (devmem_kernel.cu, compiled to PTX at build time) and by the tests'
 * stand-in for the CUDA driver (tests/fake_libcuda.c), which runs the
 * same element code on the CPU. So the CPU tests check the kernel's
 * arithmetic (the ops, the f16/bf16 conversions, avg's division) and
 * not a second copy of it.
 *
 * Each rank runs the kernel on its chunk of the buffer: element i of the
 * chunk is reduced over in[0..nin) in rank order (f16 and bf16 in f32,
 * rounded once at the end; avg divides the sum by nin) and stored to
 * every out[0..nout). Reading in[] before storing makes the in-place
 * case (out[q] == in[q]) safe: element i is this thread's alone.
 *
 * Plain C11 and CUDA C++ alike: no headers, fixed-width types spelled
 * out, conversions by bit patterns (round to nearest even).
 */
#ifndef TNT_CORE_DEVMEM_KERNEL_H
#define TNT_CORE_DEVMEM_KERNEL_H

/* Ranks one GPU-side allreduce takes (peers on one host). */
#define TNT_GPU_IPC_MAX 8

/* The ops, as tnt.h numbers them (devmem_ipc.c asserts it). */
enum { TNT_GK_SUM = 0, TNT_GK_AVG, TNT_GK_PROD, TNT_GK_MIN, TNT_GK_MAX };

/* The kernels' names in the PTX, by dtype: f32, f64, f16, bf16. */
#define TNT_GK_F32 "tnt_gpu_reduce_f32"
#define TNT_GK_F64 "tnt_gpu_reduce_f64"
#define TNT_GK_F16 "tnt_gpu_reduce_f16"
#define TNT_GK_BF16 "tnt_gpu_reduce_bf16"

/* The one kernel parameter, passed by value. */
typedef struct tnt_gk_args {
    const void *in[TNT_GPU_IPC_MAX];
    void *out[TNT_GPU_IPC_MAX];
    unsigned long long n;       /* elements of the chunk */
    int nin, nout, op;
} tnt_gk_args_t;

#ifdef __CUDACC__
#define TNT_GK_FN static __device__ __forceinline__
#else
#define TNT_GK_FN static inline
#endif

TNT_GK_FN float tnt_gk_u2f(unsigned u)
{
    union { unsigned u; float f; } x;
    x.u = u;
    return x.f;
}

TNT_GK_FN unsigned tnt_gk_f2u(float f)
{
    union { unsigned u; float f; } x;
    x.f = f;
    return x.u;
}

/* IEEE half to float: exact. */
TNT_GK_FN float tnt_gk_h2f(unsigned short h)
{
    unsigned s = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,
             m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m * 2^-24 */
        float v = (float)m * (1.0f / 16777216.0f);
        return s ? -v : v;
    }
    if (e == 31)
        return tnt_gk_u2f(s | 0x7f800000u | (m << 13));
    return tnt_gk_u2f(s | ((e + 112) << 23) | (m << 13));
}

/* Float to IEEE half, round to nearest even; overflow to infinity, NaN
 * stays NaN (quiet). */
TNT_GK_FN unsigned short tnt_gk_f2h(float f)
{
    unsigned x = tnt_gk_f2u(f), s = (x >> 16) & 0x8000u,
             a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf or NaN */
        return (unsigned short)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    if (a >= 0x477ff000u) /* rounds to 65536 or more */
        return (unsigned short)(s | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
        /* Adding 0.5 leaves an ulp of 2^-24, the half's subnormal step:
         * the float addition rounds to nearest even for us. */
        float t = tnt_gk_u2f(a) + 0.5f;
        return (unsigned short)(s | (tnt_gk_f2u(t) - 0x3f000000u));
    }
    unsigned odd = (a >> 13) & 1u;
    a += 0xc8000fffu + odd; /* exponent 127 -> 15 bias, and rounding */
    return (unsigned short)(s | (a >> 13));
}

TNT_GK_FN float tnt_gk_b2f(unsigned short b)
{
    return tnt_gk_u2f((unsigned)b << 16);
}

TNT_GK_FN unsigned short tnt_gk_f2b(float f)
{
    unsigned x = tnt_gk_f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it one, quiet */
        return (unsigned short)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}

/* The ops on float and double; min and max as the host kernels take
 * them (the comparison, so a NaN operand picks per its position). */
#define TNT_GK_COMBINE(T, name)                                             \
    TNT_GK_FN T name(int op, T acc, T v)                                    \
    {                                                                       \
        switch (op) {                                                       \
        case TNT_GK_PROD: return acc * v;                                   \
        case TNT_GK_MIN: return v < acc ? v : acc;                          \
        case TNT_GK_MAX: return v > acc ? v : acc;                          \
        default: return acc + v; /* sum, avg */                             \
        }                                                                   \
    }
TNT_GK_COMBINE(float, tnt_gk_comb_f)
TNT_GK_COMBINE(double, tnt_gk_comb_d)

/* Element i of the chunk. */
TNT_GK_FN void tnt_gk_f32(const tnt_gk_args_t *a, unsigned long long i)
{
    float acc = ((const float *)a->in[0])[i];
    for (int q = 1; q < a->nin; q++)
        acc = tnt_gk_comb_f(a->op, acc, ((const float *)a->in[q])[i]);
    if (a->op == TNT_GK_AVG)
        acc = acc / (float)a->nin;
    for (int q = 0; q < a->nout; q++)
        ((float *)a->out[q])[i] = acc;
}

TNT_GK_FN void tnt_gk_f64(const tnt_gk_args_t *a, unsigned long long i)
{
    double acc = ((const double *)a->in[0])[i];
    for (int q = 1; q < a->nin; q++)
        acc = tnt_gk_comb_d(a->op, acc, ((const double *)a->in[q])[i]);
    if (a->op == TNT_GK_AVG)
        acc = acc / (double)a->nin;
    for (int q = 0; q < a->nout; q++)
        ((double *)a->out[q])[i] = acc;
}

/* f16 and bf16: loaded to f32, reduced there, rounded once. */
#define TNT_GK_HALF(name, load, store)                                      \
    TNT_GK_FN void name(const tnt_gk_args_t *a, unsigned long long i)       \
    {                                                                       \
        float acc = load(((const unsigned short *)a->in[0])[i]);            \
        for (int q = 1; q < a->nin; q++)                                    \
            acc = tnt_gk_comb_f(a->op, acc,                                 \
                                load(((const unsigned short *)a->in[q])[i])); \
        if (a->op == TNT_GK_AVG)                                            \
            acc = acc / (float)a->nin;                                      \
        unsigned short r = store(acc);                                      \
        for (int q = 0; q < a->nout; q++)                                   \
            ((unsigned short *)a->out[q])[i] = r;                           \
    }
TNT_GK_HALF(tnt_gk_f16, tnt_gk_h2f, tnt_gk_f2h)
TNT_GK_HALF(tnt_gk_bf16, tnt_gk_b2f, tnt_gk_f2b)

#endif /* TNT_CORE_DEVMEM_KERNEL_H */
