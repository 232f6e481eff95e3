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
#include <stdint.h>

#include "lucid_vforce.h"

#if defined(__APPLE__)
#include <Accelerate/Accelerate.h>   /* vForce: the forward of the rows in optable.ACCELERATE */
#endif

#include "lucid_simd.h"   /* LV_CLONES, LV_SIMD_PAIR, LV_BLOCK, LV_GENERIC */
#include "lucid_vexpf.h"  /* lv_expf16: float exp */

/* libmvec variants of the functions the kernels call (glibc >= 2.35). */
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
#define lv_gelu_grad_g(v) LV_GENERIC(v, lv_gelu_gradf, lv_gelu_grad)
#define lv_digamma_g(v) LV_GENERIC(v, lv_digammaf, lv_digamma)
#define lv_trigamma_g(v) LV_GENERIC(v, lv_trigammaf, lv_trigamma)
#define lv_sinc_grad_g(v) LV_GENERIC(v, lv_sinc_gradf, lv_sinc_grad)
#define lv_i1_g(v) LV_GENERIC(v, lv_i1f, lv_i1)
#define lv_erfcx_grad_g(v) LV_GENERIC(v, lv_erfcx_gradf, lv_erfcx_grad)
#define lv_log_ndtr_grad_g(v) LV_GENERIC(v, lv_log_ndtr_gradf, lv_log_ndtr_grad)

/* lucid's own element-wise functions: forward kernels for rows whose function is
 * not in libm. Each is written once for a type T and instantiated for float and
 * double; `static inline` so they inline into the vector loops. */
#define LV_FN(name, body)                                                       \
    static inline float lv_##name##f(float x) { typedef float T __attribute__((unused)); body }         \
    static inline double lv_##name(double x) { typedef double T __attribute__((unused)); body }

/* ---- exp with the exponent kept apart ------------------------------------------
 * e^y = 2^k (1 + em1): k = round(y / ln2), r = y - k ln2 reduced with ln2 in two parts
 * (ln2_hi on a coarse grid, so k ln2_hi is exact and y - k ln2_hi is exact or rounded
 * once), em1 = e^r - 1 a polynomial in r (|r| <= ln2/2): a minimax fit of degree 6
 * (float, 0.08 ULP) and the degree-12 Chebyshev fit (double, 0.004 ULP), both derived
 * with mpmath. The caller applies 2^k itself (lv_pow2k*), scaled up where the result
 * would be subnormal, so it is rounded once at the end. k comes back in the low bits
 * of *kf (the round-to-integer shift trick); everything is plain arithmetic and bit
 * moves, so gcc vectorises it in every clone. */
static inline float lv_bitsf(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t lv_ibitsf(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static inline double lv_bits(int64_t i) { double f; memcpy(&f, &i, 8); return f; }
static inline int64_t lv_ibits(double f) { int64_t i; memcpy(&i, &f, 8); return i; }
#define LV_SHIFTF 0x1.8p23f
#define LV_SHIFT 0x1.8p52
/* 2^(k + e) for the k in kf's low bits; k + e must stay in the normal range. */
static inline float lv_pow2kf(float kf, int e)
{
    return lv_bitsf((int32_t)(((uint32_t)lv_ibitsf(kf) << 23) + ((uint32_t)(127 + e) << 23)));
}
static inline double lv_pow2k(double kf, int e)
{
    return lv_bits((int64_t)(((uint64_t)lv_ibits(kf) << 52) + ((uint64_t)(1023 + e) << 52)));
}
static inline float lv_expm1_polyf(float r)
{
    float p = 0.00138131564f;
    p = p * r + 0.00836941134f;
    p = p * r + 0.0416684560f;
    p = p * r + 0.166665152f;
    p = p * r + 0.499999940f;
    return (r * r) * p + r;
}
static inline double lv_expm1_poly(double r)
{
    double p = 2.0915433598076003e-09;
    p = p * r + 2.5106262550879078e-08;
    p = p * r + 2.755727183153613e-07;
    p = p * r + 2.755725286336732e-06;
    p = p * r + 2.480158732699005e-05;
    p = p * r + 0.00019841269876840357;
    p = p * r + 0.0013888888888883332;
    p = p * r + 0.008333333333325551;
    p = p * r + 0.04166666666666667;
    p = p * r + 0.1666666666666667;
    p = p * r + 0.5;
    return (r * r) * p + r;
}
/* e^-a, a >= 0 exact (a <= 110 float, 760 double): r = -a - k ln2_hi is exact (Sterbenz). */
static inline float lv_expm1_negf(float a, float *kfp)
{
    float kf = a * -1.44269504f + LV_SHIFTF;
    float k = kf - LV_SHIFTF;
    float r = k * -0.693145751953125f - a;
    r = k * -1.42860677e-06f + r;
    *kfp = kf;
    return lv_expm1_polyf(r);
}
static inline double lv_expm1_neg(double a, double *kfp)
{
    double kf = a * -1.4426950408889634 + LV_SHIFT;
    double k = kf - LV_SHIFT;
    double r = k * -0.6931471803691238 - a;
    r = k * -1.9082149292705877e-10 + r;
    *kfp = kf;
    return lv_expm1_poly(r);
}
/* e^(-t^2/2), t in [0, 40]: fma(t, -t/2, -k ln2_hi) is the exact -t^2/2 - k ln2_hi
 * rounded once, so t^2 needs no double-length split. */
static inline double lv_expm1_gauss(double t, double *kfp)
{
    double m = -0.5 * t;
    double kf = (t * m) * 1.4426950408889634 + LV_SHIFT;
    double k = kf - LV_SHIFT;
    double r = fma(t, m, -(k * 0.6931471803691238));
    r = k * -1.9082149292705877e-10 + r;
    *kfp = kf;
    return lv_expm1_poly(r);
}

LV_FN(rsqrt, return (T)1 / SQRT(x);)
LV_FN(reciprocal, return (T)1 / x;)
LV_FN(square, return x * x;)
/* PyTorch's sign: nan -> 0, and -0 -> +0. */
LV_FN(sign, return (T)(x > 0) - (T)(x < 0);)
/* One exp, no overflow: t = e^-|x| in (0, 1]. */
LV_FN(sigmoid, T t = EXP(-FABS(x)); T r = (T)1 / ((T)1 + t); return x >= 0 ? r : t * r;)
LV_FN(softplus, return (x > 0 ? x : (T)0) + LOG1P(EXP(-FABS(x)));)
LV_FN(softsign, return FABS(x) == (T)INFINITY ? (x > 0 ? (T)1 : (T)-1) : x / ((T)1 + FABS(x));)
/* silu = x / (1 + u) for x >= 0 and x u / (1 + u) for x < 0, u = e^-|x| = 2^k (1 + em1).
 * For x < 0, x u is formed at 2^64 (float) / 2^600 (double) times its size and scaled
 * down once at the end, so where e^x is subnormal (x < -87 float, -708 double) the
 * result is still rounded once. x is clamped to -110 / -760 first (silu rounds to -0
 * there, and -inf gives the limit -0); nan passes through. */
static inline float lv_siluf(float x)
{
    float xc = -110.0f > x ? -110.0f : x;
    int32_t ia = lv_ibitsf(xc) & 0x7fffffff;
    float a = lv_bitsf(ia < 0x42dc0000 ? ia : 0x42dc0000);   /* min(|x|, 110); 110 for nan */
    float kf;
    float em1 = lv_expm1_negf(a, &kf);
    float S = lv_pow2kf(kf, 64);
    float uS = S * em1 + S;                                    /* e^-|x| 2^64 */
    float d = uS * 0x1p-64f + 1.0f;
    float r = (xc < 0 ? xc * uS : xc) / d;
    return xc < 0 ? r * 0x1p-64f : r;
}
static inline double lv_silu(double x)
{
    double xc = -760.0 > x ? -760.0 : x;
    int64_t ia = lv_ibits(xc) & 0x7fffffffffffffffLL;
    double a = lv_bits(ia < 0x4087c00000000000LL ? ia : 0x4087c00000000000LL);   /* min(|x|, 760) */
    double kf;
    double em1 = lv_expm1_neg(a, &kf);
    double S = lv_pow2k(kf, 600);
    double uS = S * em1 + S;                                   /* e^-|x| 2^600 */
    double d = uS * 0x1p-600 + 1.0;
    double r = (xc < 0 ? xc * uS : xc) / d;
    return xc < 0 ? r * 0x1p-600 : r;
}
/* d/dx silu = s (1 + x (1 - s)), s = sigmoid(x) = 1/(1 + w) or w/(1 + w), w = e^-|x|,
 * and 1 - s the other one: one exp, one division. x is clamped to +-110 (float) / 760
 * (double), so +-inf give the limits 1 and 0; nan stays nan. */
static inline float lv_silu_gradf(float x)
{
    float xc = -110.0f > x ? -110.0f : x;
    xc = xc > 110.0f ? 110.0f : xc;
    int32_t ia = lv_ibitsf(xc) & 0x7fffffff;
    float kf;
    float em1 = lv_expm1_negf(lv_bitsf(ia), &kf);
    float S = lv_pow2kf(kf, 64);
    float w = (S * em1 + S) * 0x1p-64f;
    float inv = 1.0f / (1.0f + w), winv = w * inv;
    float s = xc < 0 ? winv : inv, oms = xc < 0 ? inv : winv;
    return s + xc * (s * oms);
}
static inline double lv_silu_grad(double x)
{
    double xc = -760.0 > x ? -760.0 : x;
    xc = xc > 760.0 ? 760.0 : xc;
    int64_t ia = lv_ibits(xc) & 0x7fffffffffffffffLL;
    double kf;
    double em1 = lv_expm1_neg(lv_bits(ia), &kf);
    double S = lv_pow2k(kf, 600);
    double w = (S * em1 + S) * 0x1p-600;
    double inv = 1.0 / (1.0 + w), winv = w * inv;
    double s = xc < 0 ? winv : inv, oms = xc < 0 ? inv : winv;
    return s + xc * (s * oms);
}

/* log sigmoid(x) = -softplus(-x) = min(x, 0) - log1p(e^-|x|): no overflow, no
 * cancellation (both terms have the result's sign). -0 for large x, where log sigmoid
 * approaches 0 from below (torch gives +0 at +inf). */
LV_FN(logsigmoid, return -lv_softplus_g(-x);)
/* logit(x) = log(x / (1 - x)). float32 through double: 1 - x and the ratio are exact or
 * rounded once at double precision, so the result is rounded once, to float. float64:
 * log1p((2x - 1) / (1 - x)) on (0.3, 0.65), where the log would cancel (2x - 1 is exact
 * there), log(x / (1 - x)) elsewhere (1 - x exact above 0.5; the log's argument is far
 * from 1). 0 and 1 give -inf and inf; outside [0, 1] and nan give nan. */
static inline float lv_logitf(float xf)
{
    double x = xf;
    return (float)log(x / (1.0 - x));
}
static inline double lv_logit(double x)
{
    double om = 1.0 - x;
    double c = log1p((2.0 * x - 1.0) / om);
    double t = log(x / om);
    return x > 0.3 && x < 0.65 ? c : t;
}

/* Activations. Kinks follow PyTorch: relu'(0) = 0, and nan passes through. */
LV_FN(relu, return x < 0 ? (T)0 : x;)
LV_FN(relu6, return x < 0 ? (T)0 : (x > 6 ? (T)6 : x);)
LV_FN(selu, return (T)1.0507009873554805 * (x > 0 ? x : (T)1.6732632423543772 * LV_GENERIC(x, expm1f, expm1));)
/* (x + 3) / 6 rather than x / 6 + 0.5: near -3 the sum is exact, so one rounding. */
LV_FN(hardsigmoid, return x <= -3 ? (T)0 : (x >= 3 ? (T)1 : (x + 3) / 6);)
LV_FN(hardswish, return x <= -3 ? -(T)0 : (x >= 3 ? x : x * (x + 3) / 6);)
/* mish = x tanh(log1p(e^x)), one exp: with w = e^-|x|, tanh(softplus(x)) is
 * (1 + 2w) / (1 + 2w + 2w^2) for x >= 0 and n / (n + 2), n = w (w + 2), for x < 0 (no
 * cancellation either side). For x < 0, w and n are kept at 2^600 times their size and
 * the result scaled down once, as in silu. Float32 goes through this double kernel:
 * one rounding, to float, and still ~2.5x faster than torch. */
static inline double lv_mish(double x)
{
    double xc = -760.0 > x ? -760.0 : x;                     /* mish rounds to -0 there */
    int64_t ia = lv_ibits(xc) & 0x7fffffffffffffffLL;
    double a = lv_bits(ia < 0x4087c00000000000LL ? ia : 0x4087c00000000000LL);   /* min(|x|, 760) */
    double kf;
    double em1 = lv_expm1_neg(a, &kf);
    double S = lv_pow2k(kf, 600);
    double wS = S * em1 + S;                                 /* w 2^600 */
    double w = wS * 0x1p-600;
    double nS = fma(wS, w, 2.0 * wS);                        /* w (w + 2) 2^600 */
    double np = 2.0 * w + 1.0;
    double num = xc < 0 ? nS : np;
    double den = xc < 0 ? nS * 0x1p-600 + 2.0 : fma(2.0 * w, w, np);
    double r = (xc * num) / den;
    return xc < 0 ? r * 0x1p-600 : r;
}
static inline float lv_mishf(float x) { return (float)lv_mish((double)x); }
/* d/dx mish = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x); +-inf give
 * the limits 1 and 0 (x times the vanished factor would be nan). */
LV_FN(mish_grad, T t = LV_GENERIC(lv_softplus_g(x), tanhf, tanh);
      return FABS(x) == (T)INFINITY ? (x > 0 ? (T)1 : (T)0) :
             t + x * lv_sigmoid_g(x) * ((T)1 - t * t);)
/* GELU, tanh approximation: x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 * evaluated as x sigmoid(v), v = 2u, which does not cancel in the negative tail. There
 * e^v's relative error is v's absolute error, amplified by |v| (up to 745), so in float64
 * v is carried to double length (fma products, constants in two parts, a two-sum) and
 * enters the exp's reduction whole; e^-|v| is kept at 2^600 for x < 0 as in silu. x is
 * clamped to [-40, 40] in v (the result is -0 below, x above). */
static inline double lv_gelu_tanh(double x)
{
    double xm = -40.0 > x ? -40.0 : x;                       /* nan stays */
    double xv = xm > 40.0 ? 40.0 : xm;
    double h = xv * xv, l = fma(xv, xv, -h);
    double x3 = xv * h, x3l = fma(xv, h, -x3) + xv * l;
    const double c1 = 1.5957691216057308, c1l = -9.96930880911092e-17;     /* 2 sqrt(2/pi) */
    const double c3 = 0.07135481627260025, c3l = -4.1218577217431825e-18;   /* c1 * 0.044715 */
    double A = c1 * xv, Al = fma(c1, xv, -A) + c1l * xv;
    double B = c3 * x3, Bl = fma(c3, x3, -B) + (c3 * x3l + c3l * x3);
    double v = A + B, bb = v - A;
    double vl = ((A - (v - bb)) + (B - bb)) + (Al + Bl);    /* v + vl = c1 x + c3 x^3 */
    double av = fabs(v);
    double sl = v < 0 ? vl : -vl;                            /* -|v + vl| = -av + sl */
    int big = av > 760.0;
    av = big ? 760.0 : av;
    sl = big ? 0.0 : sl;
    double kf = av * -1.4426950408889634 + LV_SHIFT;
    double k = kf - LV_SHIFT;
    double r = k * -0.6931471803691238 - av;                 /* exact */
    r = k * -1.9082149292705877e-10 + (r + sl);
    double em1 = lv_expm1_poly(r);
    double S = lv_pow2k(kf, 600);
    double wS = S * em1 + S;                                 /* e^-|v| 2^600 */
    double d = wS * 0x1p-600 + 1.0;
    double rr = (v < 0 ? xm * wS : xm) / d;
    return v < 0 ? rr * 0x1p-600 : rr;
}
/* float32 through double: v in double is exact enough (|v| < 110 where the float result
 * is not 0: e^v within 1e-14), a degree-8 Taylor exp, and the result is rounded once. */
static inline float lv_gelu_tanhf(float xf)
{
    double x = xf;
    double xm = -12.0 > x ? -12.0 : x;
    double xv = xm > 12.0 ? 12.0 : xm;
    double v = xv * (1.5957691216057308 + 0.07135481627260025 * (xv * xv));
    double av = fabs(v);
    double kf = av * -1.4426950408889634 + LV_SHIFT;
    double k = kf - LV_SHIFT;
    double r = k * -0.6931471803691238 - av;
    r = k * -1.9082149292705877e-10 + r;
    double p = 2.4801587301587302e-05;
    p = p * r + 0.00019841269841269841;
    p = p * r + 0.0013888888888888889;
    p = p * r + 0.0083333333333333332;
    p = p * r + 0.041666666666666664;
    p = p * r + 0.16666666666666666;
    p = p * r + 0.5;
    double em1 = (r * r) * p + r;
    double S = lv_pow2k(kf, 0);
    double w = S * em1 + S;                                  /* e^-|v| */
    return (float)((v < 0 ? xm * w : xm) / (w + 1.0));
}
/* d/dx = s + 2 x s (1 - s) u', s = sigmoid(2u), u' = sqrt(2/pi) (1 + 0.134145 x^2) */
LV_FN(gelu_tanh_grad, T u = (T)0.7978845608028654 * (x + (T)0.044715 * x * x * x);
      T s = lv_sigmoid_g(2 * u);
      T r = s + 2 * x * s * ((T)1 - s) * (T)0.7978845608028654 * ((T)1 + (T)0.134145 * x * x);
      return x == -(T)INFINITY ? (T)0 : (x == (T)INFINITY ? (T)1 : r);)

/* Exact GELU, x Phi(x), Phi(x) = erfc(-x/sqrt2) / 2.
 *
 * float32: no erfc (libmvec's erfcf alone costs twice torch's whole gelu). With t = |x|,
 *   gelu(x) = max(x, -0) - t Phi(-t),   Phi(-t) = phi(t) m(t),
 * phi(t) = e^(-t^2/2) / sqrt(2 pi) and m the Mills ratio, m(t) = Q(t) / (t Q(t) + P(t)),
 * P, Q of degree 4 fitted with mpmath (relative error 2e-8 on [0, 15] with the float
 * coefficients). That form has the right ends (m(0) = sqrt(pi/2): Q(0) / P(0) is that to
 * 1e-13; m ~ 1/t) and is forgiving of rounding: for large t an error in Q cancels.
 * 1/sqrt(2 pi) is folded into the exponent (ln c on the same 2^-16 grid as ln2_hi, so
 * k ln2_hi - lnc_hi is exact), so 2^k stays a power of two and t 2^(k+64) is exact.
 * t Phi(-t) is formed at 2^64 times its size and the one fma at the end both scales it
 * down and subtracts, so a subnormal result (x < -13) is rounded once, and t is clamped
 * to 15 (x < -14.5 rounds to -0, the limit at -inf; nan stays nan through max(x, -0)).
 * Max error 3.91 ULP over every float in [-15, 15] against a double reference (3.92
 * with the unfused multiply-adds of the baseline clone), 3.3 on tools/accuracy.py's
 * sample: six roundings (P, Q, D, N, the e^r product, the division) at 0.5-1 unit each. */
static inline float lv_gelu_partsf(float t, float *kfp, float *em1, float *Q, float *D)
{
    float m = -0.5f * t;
    float kf = (t * m + -0.918938533f) * 1.44269504f + LV_SHIFTF;
    float k = kf - LV_SHIFTF;
    float A = k * 0.693145751953125f + 0.9189453125f;        /* k ln2_hi - lnc_hi, exact */
    float r = fmaf(t, m, -A);                                /* -t^2/2 + ln c - k ln2, rounded once */
    r = k * -1.42860677e-06f + (r + 6.77929529e-06f);         /* ln2_lo, lnc_lo */
    *kfp = kf;
    *em1 = lv_expm1_polyf(r);                                /* c e^(-t^2/2) = 2^k (1 + em1) */
    float p = 1.79797962e-06f, q = 0.0187014602f;
    p = p * t + 0.0186186042f;  q = q * t + 0.175449342f;
    p = p * t + 0.177062199f;   q = q * t + 0.761703551f;
    p = p * t + 0.706483066f;   q = q * t + 1.76363266f;
    p = p * t + 1.53853285f;    q = q * t + 1.92826498f;
    *Q = q;
    *D = t * q + p;                                          /* m(t) = Q / D */
    return m;
}
static inline float lv_geluf(float x)
{
    int32_t ia = lv_ibitsf(x) & 0x7fffffff;
    float t = lv_bitsf(ia < 0x41700000 ? ia : 0x41700000);   /* min(|x|, 15); 15 for nan */
    float kf, em1, Q, D;
    lv_gelu_partsf(t, &kf, &em1, &Q, &D);
    float N = (t * lv_pow2kf(kf, 64)) * Q;
    float tq = (N * em1 + N) / D;                            /* t Phi(-t) 2^64 */
    float relu = -0.0f > x ? -0.0f : x;
    return tq * -0x1p-64f + relu;
}
/* d/dx gelu = Phi(x) + x phi(x) = [x >= 0] - s phi(t) (m(t) - t), s = sign(x) */
static inline float lv_gelu_gradf(float x)
{
    int32_t ia = lv_ibitsf(x) & 0x7fffffff;
    float t = lv_bitsf(ia < 0x41700000 ? ia : 0x41700000);
    float kf, em1, Q, D;
    lv_gelu_partsf(t, &kf, &em1, &Q, &D);
    float S = lv_pow2kf(kf, 64);
    float G = ((S * em1 + S) * 0x1p-64f) * (Q / D - t);      /* phi(t) (m(t) - t) */
    float r = x < 0 ? G : 1.0f - G;
    return x != x ? x : r;
}
/* float64: erfc(-p) with the product p = x/sqrt2 carried to double length (fma + the
 * constant's low part) and its rounding applied as a first-order correction, so the
 * erfc tail keeps its accuracy. Where erfc(-p) would be subnormal (x < -37.5) the
 * result is instead phi(t) t m(t) from the asymptotic series of the Mills ratio,
 * t m(t) = sum (-1)^n (2n-1)!! / t^(2n) (8 terms: 2e-21 at t = 37), with e^(-t^2/2)
 * from lv_expm1_gauss formed at 2^600 times its size and scaled down once at the end. */
static inline double lv_gelu(double x)
{
    const double c = 0.7071067811865476, c_lo = -4.8336466567264565e-17;
    int64_t ia = lv_ibits(x) & 0x7fffffffffffffffLL;
    double t = lv_bits(ia < 0x4044000000000000LL ? ia : 0x4044000000000000LL);   /* min(|x|, 40) */
    double kf;
    double em1 = lv_expm1_gauss(t, &kf);
    double S = lv_pow2k(kf, 600);
    double E = S * em1 + S;                                  /* e^(-t^2/2) 2^600 */
    double p = x * c;
    double e = fma(x, c, -p) + x * c_lo;
    e = isfinite(p) ? e : 0.0;
    double r = 0.5 * x * (erfc(-p) + e * 1.1283791670955126 * (E * 0x1p-600));
    double s = 1.0 / (t * t);
    double q = 808665.975930714;                             /* (2n-1)!! / sqrt(2 pi) */
    q = q * s + -53911.06506204761;
    q = q * s + 4147.005004772893;
    q = q * s + -377.0004549793539;
    q = q * s + 41.88893944215043;
    q = q * s + -5.984134206021491;
    q = q * s + 1.196826841204298;
    q = q * s + -0.3989422804014327;
    q = q * s + 0.3989422804014327;                          /* t m(t) / sqrt(2 pi) */
    double tail = -(q * E) * 0x1p-600;                       /* -0 past underflow and at -inf */
    return x < -37.0 ? tail : r;
}
/* d/dx gelu = Phi(x) + x phi(x); x is clamped to +-40 in the second term (phi is 0 there
 * in double) so +-inf give the limits 1 and 0. */
static inline double lv_gelu_grad(double x)
{
    int64_t ia = lv_ibits(x) & 0x7fffffffffffffffLL;
    double t = lv_bits(ia < 0x4044000000000000LL ? ia : 0x4044000000000000LL);
    double kf;
    double em1 = lv_expm1_gauss(t, &kf);
    double S = lv_pow2k(kf, 600);
    double xc = -40.0 > x ? -40.0 : x;
    xc = xc > 40.0 ? 40.0 : xc;
    return 0.5 * erfc(-(x * 0.7071067811865476)) + (xc * 0.3989422804014327) * ((S * em1 + S) * 0x1p-600);
}

/* lucid's own special functions (erfinv, the gamma family, sinc, i0, erfcx, log_ndtr,
 * ndtri): static inline element functions. */
#include "lucid_special.h"


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
/* float exp's forward is lucid's inline vector exp (below), not the table's libmvec
 * map, which is built under another name and left unused */
#define lucid_vexpf lv_vexpf_libmvec
LUCID_UNARY_OPS
#undef lucid_vexpf
#endif
#undef LV_OP_X
#undef LV_OP_Y
#undef LV_OP_0

#if !defined(__APPLE__)
/* y = exp(x) with lucid_vexpf.h (faster than libmvec's expf here, and within 0.91 ulp
 * rather than 2.6): blocks of 256 from the last (the page order of LV_MAP1), each in
 * the fast form and redone in the full form if a value was beyond its range; when y is
 * x (in place) the block is checked first instead, as nothing can be redone after the
 * write. The last partial vector goes through a padded copy. */
LV_CLONES void lucid_vexpf(float *y, const float *x, const int *np)
{
    const ptrdiff_t n = *np, nfull = n - n % 16;
    if (nfull < n) {
        float xb[16] = {0};
        memcpy(xb, x + nfull, (size_t)(n - nfull) * sizeof(float));
        lv_f16 v, e;
        lv_i16 bad = {0};
        memcpy(&v, xb, sizeof v);
        e = lv_expf16(v, &bad, 0);
        if (lv_any16(bad)) e = lv_expf16(v, &bad, 1);
        memcpy(y + nfull, &e, (size_t)(n - nfull) * sizeof(float));
    }
    for (ptrdiff_t b = (nfull - 1) / 256 * 256; nfull > 0 && b >= 0; b -= 256) {
        ptrdiff_t e = nfull - b < 256 ? nfull : b + 256;
        lv_i16 bad = {0};
        lv_f16 v, r;
        if (y != x) {
            for (ptrdiff_t i = b; i < e; i += 16) {
                memcpy(&v, x + i, sizeof v);
                r = lv_expf16(v, &bad, 0);
                memcpy(y + i, &r, sizeof r);
            }
            if (!lv_any16(bad)) continue;
        } else {
            for (ptrdiff_t i = b; i < e; i += 16) {
                memcpy(&v, x + i, sizeof v);
                bad |= lv_expf16_outside(v);
            }
        }
        int full = lv_any16(bad);        /* gcc unswitches the loop on it */
        for (ptrdiff_t i = b; i < e; i += 16) {
            memcpy(&v, x + i, sizeof v);
            r = lv_expf16(v, &bad, full);
            memcpy(y + i, &r, sizeof r);
        }
    }
}
#endif


/* ---- element-wise ops with parameters ---------------------------------------------
 * y = f(x; p[0], p[1]) and the fused backward gx = g f'(x; p), in the same padded
 * blocks as the table rows (unary.pyx: hardtanh, celu, softplus(beta, threshold),
 * polygamma(n, x)). */
#define LV_PMAP1(fname, TYPE, EXPR)                                             \
    LV_CLONES void fname(TYPE *y, const TYPE *x, const int *np, const double *p) \
    {                                                                           \
        typedef TYPE T;                                                         \
        const T p0 = (T)p[0], p1 = (T)p[1];                                     \
        const ptrdiff_t n = *np;                                                \
        const ptrdiff_t nfull = n - n % LV_BLOCK;                               \
        (void)p0; (void)p1;                                                     \
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
#define LV_PMAP2(fname, TYPE, EXPR)                                             \
    LV_CLONES void fname(TYPE *gx, const TYPE *gp, const TYPE *sp, const int *np, \
                         const double *p)                                       \
    {                                                                           \
        typedef TYPE T;                                                         \
        const T p0 = (T)p[0], p1 = (T)p[1];                                     \
        const ptrdiff_t n = *np;                                                \
        const ptrdiff_t nfull = n - n % LV_BLOCK;                               \
        (void)p0; (void)p1;                                                     \
        if (nfull < n) {                                                        \
            T gb[LV_BLOCK] = {0}, sb[LV_BLOCK] = {0}, ob[LV_BLOCK];             \
            memcpy(gb, gp + nfull, (size_t)(n - nfull) * sizeof(T));            \
            memcpy(sb, sp + nfull, (size_t)(n - nfull) * sizeof(T));            \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) { T g = gb[j], x = sb[j]; ob[j] = (EXPR); } \
            memcpy(gx + nfull, ob, (size_t)(n - nfull) * sizeof(T));            \
        }                                                                       \
        for (ptrdiff_t i = nfull - LV_BLOCK; i >= 0; i -= LV_BLOCK) {           \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) {                                \
                T g = gp[i + j], x = sp[i + j];                                 \
                gx[i + j] = (EXPR);                                             \
            }                                                                   \
        }                                                                       \
    }
#define LV_POP(name, fwd, grad)                                                 \
    LV_PMAP1(lucid_v##name##f, float, fwd) LV_PMAP1(lucid_v##name, double, fwd) \
    LV_PMAP2(lucid_v##name##_gradf, float, grad) LV_PMAP2(lucid_v##name##_grad, double, grad)

/* hardtanh: min(max(x, lo), hi), nan passes; the gradient is g strictly inside (lo, hi). */
LV_POP(hardtanh, v < p0 ? p0 : (v > p1 ? p1 : v), x > p0 && x < p1 ? g : (T)0)
/* celu: x for x > 0, alpha expm1(x / alpha) elsewhere (alpha != 0, checked by the caller). */
LV_POP(celu, v > 0 ? v : p0 * LV_GENERIC(v / p0, expm1f, expm1),
       x > 0 ? g : g * EXP((x > 0 ? (T)0 : x) / p0))
/* softplus(beta, threshold): x where beta x > threshold, else
 * (max(beta x, 0) + log1p(e^-|beta x|)) / beta, which does not overflow. */
LV_POP(softplus_beta, v * p0 > p1 ? v : lv_softplus_g(v * p0) / p0,
       x * p0 > p1 ? g : g * lv_sigmoid_g(x * p0))
/* polygamma(n, x), n = p[0]: digamma for n = 0, trigamma for 1 (both branch-free, as
 * the backward of digamma); computed in double, rounded once. */
static inline double lv_polygamma_any(double n, double x)
{
    return n == 0.0 ? lv_digamma(x) : (n == 1.0 ? lv_trigamma(x) : lv_polygamma_n((int)n, x));
}
LV_POP(polygamma, (T)lv_polygamma_any(p[0], (double)v), g * (T)lv_polygamma_any(p[0] + 1.0, (double)x))
