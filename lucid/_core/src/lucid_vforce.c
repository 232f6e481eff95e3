/*
 * lucid's portable implementation of the vForce-shaped entry points.
 *
 * Why it is written this way (measured on x86-64 with gcc 12, glibc 2.36):
 * - Functions declared `#pragma omp declare simd notinbranch` and loops marked
 *   `#pragma omp simd`, compiled with -fopenmp(-simd) -fno-math-errno
 *   -fno-trapping-math, make gcc call libmvec (_ZGVeN16v_expf, ...).
 *   glibc only declares those variants itself under fast-math, which we
 *   never use (it breaks inf/nan and sets flush-to-zero process-wide).
 * - target_clones builds baseline (SSE2), AVX2 and AVX-512 versions of every
 *   loop; the loader picks one once (ifunc).
 * - On macOS the forward of the rows in optable.ACCELERATE calls vForce directly;
 *   everything else is the same loops (untested: we have no macOS machine).
 * - Every element goes through the vector variant: the loop runs over fixed
 *   blocks of LV_BLOCK elements and the last partial block is padded into a
 *   stack buffer and sent through the same vector body. No element ever goes
 *   through scalar libm, so a result does not depend on the array's length,
 *   its alignment, or how a caller splits it into chunks.
 */
#include <math.h>
#include <string.h>
#include <stddef.h>

#include "lucid_vforce.h"

#if defined(__APPLE__)
#include <Accelerate/Accelerate.h>   /* vForce: the forward of the rows in optable.ACCELERATE */
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define LV_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define LV_CLONES
#endif

/* libmvec variants of the functions the kernels call (glibc >= 2.35). */
#define LV_SIMD_DECL(ret, fn, arg) _Pragma("omp declare simd notinbranch") extern ret fn(arg);
#define LV_SIMD_PAIR(fn) LV_SIMD_DECL(float, fn##f, float) LV_SIMD_DECL(double, fn, double)
LV_SIMD_PAIR(exp)
LV_SIMD_PAIR(exp2)
LV_SIMD_PAIR(expm1)
LV_SIMD_PAIR(log)
LV_SIMD_PAIR(log2)
LV_SIMD_PAIR(log10)
LV_SIMD_PAIR(log1p)
LV_SIMD_PAIR(erf)
LV_SIMD_PAIR(erfc)
LV_SIMD_PAIR(sin)
LV_SIMD_PAIR(cos)
LV_SIMD_PAIR(tan)
LV_SIMD_PAIR(sinh)
LV_SIMD_PAIR(cosh)
LV_SIMD_PAIR(tanh)
LV_SIMD_PAIR(asin)
LV_SIMD_PAIR(acos)
LV_SIMD_PAIR(atan)
LV_SIMD_PAIR(asinh)
LV_SIMD_PAIR(acosh)
LV_SIMD_PAIR(atanh)
LV_SIMD_PAIR(cbrt)

/* Type-generic spellings for the gradient expressions in the op list. */
#define LV_GENERIC(v, ffn, dfn) _Generic((v), float: ffn, default: dfn)(v)
#define EXP(v) LV_GENERIC(v, expf, exp)
#define LOG(v) LV_GENERIC(v, logf, log)
#define SQRT(v) LV_GENERIC(v, sqrtf, sqrt)
#define SIN(v) LV_GENERIC(v, sinf, sin)
#define COS(v) LV_GENERIC(v, cosf, cos)
#define SINH(v) LV_GENERIC(v, sinhf, sinh)
#define COSH(v) LV_GENERIC(v, coshf, cosh)
#define ERFC(v) LV_GENERIC(v, erfcf, erfc)
#define SIGN(v) LV_GENERIC(v, lv_signf, lv_sign)
#define FABS(v) LV_GENERIC(v, fabsf, fabs)
#define LOG1P(v) LV_GENERIC(v, log1pf, log1p)
#define lv_sigmoid_g(v) LV_GENERIC(v, lv_sigmoidf, lv_sigmoid)
#define lv_softplus_g(v) LV_GENERIC(v, lv_softplusf, lv_softplus)
#define lv_mish_grad_g(v) LV_GENERIC(v, lv_mish_gradf, lv_mish_grad)
#define lv_silu_grad_g(v) LV_GENERIC(v, lv_silu_gradf, lv_silu_grad)
#define lv_gelu_tanh_grad_g(v) LV_GENERIC(v, lv_gelu_tanh_gradf, lv_gelu_tanh_grad)

/* lucid's own element-wise functions: forward kernels for rows whose function is
 * not in libm. Each is written once for a type T and instantiated for float and
 * double; `static inline` so they inline into the vector loops. */
#define LV_FN(name, body)                                                       \
    static inline float lv_##name##f(float x) { typedef float T __attribute__((unused)); body }         \
    static inline double lv_##name(double x) { typedef double T __attribute__((unused)); body }

LV_FN(rsqrt, return (T)1 / SQRT(x);)
LV_FN(reciprocal, return (T)1 / x;)
LV_FN(square, return x * x;)
/* PyTorch's sign: nan -> 0, and -0 -> +0. */
LV_FN(sign, return (T)(x > 0) - (T)(x < 0);)
/* One exp, no overflow: t = e^-|x| in (0, 1]. */
LV_FN(sigmoid, T t = EXP(-FABS(x)); T r = (T)1 / ((T)1 + t); return x >= 0 ? r : t * r;)
LV_FN(softplus, return (x > 0 ? x : (T)0) + LOG1P(EXP(-FABS(x)));)
LV_FN(softsign, return FABS(x) == (T)INFINITY ? (x > 0 ? (T)1 : (T)-1) : x / ((T)1 + FABS(x));)
/* silu(-inf) is the limit -0, not -inf * 0. Where e^x is subnormal (x < -87 in
 * float32, -708 in float64) the result keeps only the bits e^x had: a documented
 * limitation (docs/accuracy.md). */
LV_FN(silu, T r = x * lv_sigmoid_g(x); return x == -(T)INFINITY ? -(T)0 : r;)
/* d/dx silu = s (1 + x (1 - s)), s = sigmoid(x): one exp, not two */
LV_FN(silu_grad, T s = lv_sigmoid_g(x); return x == -(T)INFINITY ? (T)0 : s * ((T)1 + x * ((T)1 - s));)

/* Activations. Kinks follow PyTorch: relu'(0) = 0, and nan passes through. */
LV_FN(relu, return x < 0 ? (T)0 : x;)
LV_FN(relu6, return x < 0 ? (T)0 : (x > 6 ? (T)6 : x);)
LV_FN(selu, return (T)1.0507009873554805 * (x > 0 ? x : (T)1.6732632423543772 * LV_GENERIC(x, expm1f, expm1));)
/* (x + 3) / 6 rather than x / 6 + 0.5: near -3 the sum is exact, so one rounding. */
LV_FN(hardsigmoid, return x <= -3 ? (T)0 : (x >= 3 ? (T)1 : (x + 3) / 6);)
LV_FN(hardswish, return x <= -3 ? -(T)0 : (x >= 3 ? x : x * (x + 3) / 6);)
static inline double lv_mish(double x)
{
    double t = tanh(lv_softplus(x));
    return x == -INFINITY ? -0.0 : x * t;
}
/* float32 through double: softplus, tanh and the product each add float rounding. */
static inline float lv_mishf(float x) { return (float)lv_mish((double)x); }
/* d/dx mish = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x) */
LV_FN(mish_grad, T t = LV_GENERIC(lv_softplus_g(x), tanhf, tanh);
      return x == -(T)INFINITY ? (T)0 : t + x * lv_sigmoid_g(x) * ((T)1 - t * t);)
/* GELU, tanh approximation: x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 * evaluated as x sigmoid(2u), which does not cancel in the negative tail. */
static inline double lv_gelu_tanh(double x)
{
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    double r = x * lv_sigmoid(2 * u);
    return x == -INFINITY ? -0.0 : r;
}
/* float32 through double: the tail amplifies the cubic's rounding by |2u|. */
static inline float lv_gelu_tanhf(float x) { return (float)lv_gelu_tanh((double)x); }
/* d/dx = s + 2 x s (1 - s) u', s = sigmoid(2u), u' = sqrt(2/pi) (1 + 0.134145 x^2) */
LV_FN(gelu_tanh_grad, T u = (T)0.7978845608028654 * (x + (T)0.044715 * x * x * x);
      T s = lv_sigmoid_g(2 * u);
      T r = s + 2 * x * s * ((T)1 - s) * (T)0.7978845608028654 * ((T)1 + (T)0.134145 * x * x);
      return x == -(T)INFINITY ? (T)0 : (x == (T)INFINITY ? (T)1 : r);)

/* Exact GELU, x/2 * erfc(-x/sqrt2). The product x * (1/sqrt2) is carried to double
 * length (fma + the constant's low part), and the rounding it leaves is applied
 * as a first-order correction, so the erfc tail keeps its accuracy. Float32
 * goes through double. */
static inline double lv_gelu(double x)
{
    const double c = 0.7071067811865476, c_lo = -4.8336466567264565e-17;
    double p = x * c;
    double e = fma(x, c, -p) + x * c_lo;
    e = isfinite(p) ? e : 0.0;
    double r = 0.5 * x * (erfc(-p) + e * 1.1283791670955126 * exp(-p * p));
    return x == -INFINITY ? -0.0 : r;     /* the limit, not -inf * 0 */
}
/* float32 through double: erfc of the far left tail is subnormal in float32
 * (x < -13), and the product with x would lift those few bits into a normal result. */
static inline float lv_geluf(float x) { return (float)lv_gelu((double)x); }

/* lucid's own special functions (erfinv): static inline element functions. */
#include "lucid_special.h"

/* A multiple of every vector width we target (16 floats = one AVX-512 register). */
#define LV_BLOCK 16

/* Blocks are visited from the last to the first. The values do not depend on
 * the order (every element goes through the same vector body, and the blocks
 * are the same: full blocks from the start, a padded partial block at the end),
 * but the speed of a fresh output does: the first store into a newly mapped
 * huge page makes the kernel zero all of it, and Linux zeroes the 4 KiB pieces
 * towards the faulting one, last. Faulting at the page's end (a descending
 * pass) gets them zeroed in ascending address order, which measured 2.5x
 * cheaper than the descending order a forward pass triggers (AMD EPYC, KVM,
 * Linux THP): 1e7 float32 outputs 4.8 -> 3.1 ms for a plain scaled copy.
 * glibc's memcpy walks backwards for these (page-aliased) buffers, which is
 * why x.copy() of the same bytes was faster than a forward kernel.
 * Within a block, and for data already in cache, the order makes no difference. */

/* y[i] = EXPR, where EXPR reads `v` (= x[i]) and may use the type name T. */
#define LV_MAP1(fname, TYPE, EXPR)                                              \
    LV_CLONES void fname(TYPE *y, const TYPE *x, const int *np)                 \
    {                                                                           \
        typedef TYPE T;                                                         \
        const ptrdiff_t n = *np;                                                \
        const ptrdiff_t nfull = n - n % LV_BLOCK;                               \
        if (nfull < n) {                                                        \
            T xb[LV_BLOCK] = {0}, yb[LV_BLOCK];                                 \
            memcpy(xb, x + nfull, (size_t)(n - nfull) * sizeof(T));             \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) { T v = xb[j]; yb[j] = (EXPR); }  \
            memcpy(y + nfull, yb, (size_t)(n - nfull) * sizeof(T));             \
        }                                                                       \
        for (ptrdiff_t i = nfull - LV_BLOCK; i >= 0; i -= LV_BLOCK) {           \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) { T v = x[i + j]; y[i + j] = (EXPR); } \
        }                                                                       \
    }

/* gx[i] = EXPR, where EXPR reads g (= g[i]) and SNAME (= s[i], the saved x or y). */
#define LV_MAP2(fname, TYPE, SNAME, EXPR)                                       \
    LV_CLONES void fname(TYPE *gx, const TYPE *gp, const TYPE *sp, const int *np) \
    {                                                                           \
        typedef TYPE T;                                                         \
        const ptrdiff_t n = *np;                                                \
        const ptrdiff_t nfull = n - n % LV_BLOCK;                               \
        if (nfull < n) {                                                        \
            T gb[LV_BLOCK] = {0}, sb[LV_BLOCK] = {0}, ob[LV_BLOCK];             \
            memcpy(gb, gp + nfull, (size_t)(n - nfull) * sizeof(T));            \
            memcpy(sb, sp + nfull, (size_t)(n - nfull) * sizeof(T));            \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) {                                \
                T g = gb[j], SNAME = sb[j];                                     \
                ob[j] = (EXPR);                                                 \
            }                                                                   \
            memcpy(gx + nfull, ob, (size_t)(n - nfull) * sizeof(T));            \
        }                                                                       \
        for (ptrdiff_t i = nfull - LV_BLOCK; i >= 0; i -= LV_BLOCK) {           \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) {                                \
                T g = gp[i + j], SNAME = sp[i + j];                             \
                gx[i + j] = (EXPR);                                             \
            }                                                                   \
        }                                                                       \
    }

#define LV_OP(name, ffn, dfn, SNAME, grad)                                      \
    LV_MAP1(lucid_v##name##f, float, ffn(v))                                    \
    LV_MAP1(lucid_v##name, double, dfn(v))                                      \
    LV_MAP2(lucid_v##name##_gradf, float, SNAME, grad)                          \
    LV_MAP2(lucid_v##name##_grad, double, SNAME, grad)

#define LV_OP_X(name, ffn, dfn, grad) LV_OP(name, ffn, dfn, x, grad)
#define LV_OP_Y(name, ffn, dfn, grad) LV_OP(name, ffn, dfn, y, grad)
#define LV_OP_0(name, ffn, dfn, grad) LV_MAP1(lucid_v##name##f, float, ffn(v)) LV_MAP1(lucid_v##name, double, dfn(v))
#if defined(__APPLE__)
/* A thin mapping: the forward entry point is the vForce function itself. */
#define LV_VV_FWD(name, vvf, vvd)                                                        \
    void lucid_v##name##f(float *y, const float *x, const int *n) { vvf(y, x, n); }     \
    void lucid_v##name(double *y, const double *x, const int *n) { vvd(y, x, n); }
#define LV_VV_X(name, vvf, vvd, grad) LV_VV_FWD(name, vvf, vvd)                          \
    LV_MAP2(lucid_v##name##_gradf, float, x, grad) LV_MAP2(lucid_v##name##_grad, double, x, grad)
#define LV_VV_Y(name, vvf, vvd, grad) LV_VV_FWD(name, vvf, vvd)                          \
    LV_MAP2(lucid_v##name##_gradf, float, y, grad) LV_MAP2(lucid_v##name##_grad, double, y, grad)
#define LV_VV_0(name, vvf, vvd, grad) LV_VV_FWD(name, vvf, vvd)
LUCID_UNARY_OPS_APPLE
#else
LUCID_UNARY_OPS
#endif
#undef LV_OP_X
#undef LV_OP_Y
#undef LV_OP_0

/* ---- reductions -------------------------------------------------------- */

/* Pairwise summation: leaves of 256 elements summed with a vector reduction in the
 * element type (each lane adds 256 / width elements, as NumPy's pairwise sum does),
 * leaves combined as a binary tree in double. Deterministic for a given length: the
 * split points depend only on n. */
#define LV_SUM_LEAF 256
#define LV_SUM(fname, TYPE)                                                     \
    LV_CLONES static double fname##_leaf(const TYPE *x, ptrdiff_t n)            \
    {                                                                           \
        TYPE s = 0;                                                             \
        _Pragma("omp simd reduction(+:s)")                                      \
        for (ptrdiff_t i = 0; i < n; i++) s += x[i];                            \
        return (double)s;                                                       \
    }                                                                           \
    double fname(const TYPE *x, ptrdiff_t n)                                    \
    {                                                                           \
        if (n <= LV_SUM_LEAF) return fname##_leaf(x, n);                        \
        ptrdiff_t h = (n / 2 / LV_SUM_LEAF) * LV_SUM_LEAF;                      \
        if (h == 0) h = n / 2;                                                  \
        return fname(x, h) + fname(x + h, n - h);                               \
    }
LV_SUM(lucid_sumf, float)
LV_SUM(lucid_sum, double)

/* Last to first, for the reason LV_MAP1 is (a fresh output's huge pages are
 * zeroed faster when first touched at their end). */
LV_CLONES void lucid_fillf(float *y, float v, ptrdiff_t n)
{
    for (ptrdiff_t i = n - 1; i >= 0; i--) y[i] = v;
}

LV_CLONES void lucid_fill(double *y, double v, ptrdiff_t n)
{
    for (ptrdiff_t i = n - 1; i >= 0; i--) y[i] = v;
}

/* ---- what was chosen at load time ---------------------------------------- */

const char *lucid_isa(void)
{
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "avx2";
    return "sse2";
#else
    return "baseline";
#endif
}

const char *lucid_mathlib(void)
{
#if defined(__GLIBC__)
    return "glibc-libmvec";
#else
    return "libm";
#endif
}
