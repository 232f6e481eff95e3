/*
 * lucid's binary element-wise kernels: pow, atan2, hypot, maximum, minimum,
 * logaddexp, xlogy (forward and one fused backward each), add, sub, mul, div (forward), and neg.
 *
 *     void lucid_v<name>f(float *z, const float *a, const float *b, const int *n, int bc);
 *     void lucid_v<name>_gradf(float *ga, float *gb, const float *g, const float *a,
 *                              const float *b, const float *y, const int *n, int bc);
 *
 * bc says which operand, if any, is a single value broadcast over all n
 * elements (LV_BC_NONE, LV_BC_A, LV_BC_B), so `x ** 2` or `maximum(x, 0)` never
 * materialises the scalar. The backward writes ga and/or gb (either may be NULL)
 * in one pass over g, a, b and, for the ops whose formula reads it, the saved
 * output y. Each (bc, outputs) combination is its own loop with the choice
 * folded at compile time, so every loop vectorises.
 *
 * Loops are blocked and padded as in lucid_vforce.c (see lucid_simd.h): an
 * element's result never depends on the array's length or on how a caller
 * split it.
 */
#include <stdint.h>

#include "lucid_simd.h"
#include "lucid_vforce.h"

#if defined(__APPLE__)
#include <Accelerate/Accelerate.h>   /* vvpowf / vvatan2f for the plain (no broadcast) case */
#endif

LV_SIMD_PAIR(exp)
LV_SIMD_PAIR(log)
LV_SIMD_PAIR(log1p)
LV_SIMD_PAIR2(pow)
LV_SIMD_PAIR2(atan2)
LV_SIMD_PAIR2(hypot)

#define EXP(v) LV_GENERIC(v, expf, exp)
#define LOG(v) LV_GENERIC(v, logf, log)
#define SQRT(v) LV_GENERIC(v, sqrtf, sqrt)
#define POW(u, v) LV_GENERIC2(u, v, powf, pow)
#define ATAN2(u, v) LV_GENERIC2(u, v, atan2f, atan2)
#define HYPOT(u, v) LV_GENERIC2(u, v, hypotf, hypot)

/* ---- element functions ------------------------------------------------- */

/* Written once for a type T, instantiated for float and double; inlined into the loops. */
#define LV_FN2(name, body)                                                      \
    static inline float lv_##name##f(float a, float b) { typedef float T; body }  \
    static inline double lv_##name(double a, double b) { typedef double T; body }

/* maximum / minimum: their forward is src/lucid_compare.c's 2-D arithmetic (where
 * their IEEE 754-2019 semantics are written, once) over one row. */
void lucid_arith2d_f32(int op, float *z, const float *a, const float *b, ptrdiff_t m,
                       ptrdiff_t n, const ptrdiff_t *st);
void lucid_arith2d_f64(int op, double *z, const double *a, const double *b, ptrdiff_t m,
                       ptrdiff_t n, const ptrdiff_t *st);
enum { LV_AR2D_MAXIMUM = 4, LV_AR2D_MINIMUM = 5 };      /* lucid_compare.c's op codes */
#define LV_MINMAX_FWD(fname, T, a2d, code)                                      \
    void fname(T *zp, const T *ap, const T *bp, const int *np, int bc)           \
    {                                                                           \
        const ptrdiff_t st[4] = {0, bc == LV_BC_A ? 0 : 1, 0, bc == LV_BC_B ? 0 : 1}; \
        a2d(code, zp, ap, bp, 1, *np, st);                                      \
    }
LV_MINMAX_FWD(lucid_vmaximumf, float, lucid_arith2d_f32, LV_AR2D_MAXIMUM)
LV_MINMAX_FWD(lucid_vmaximum, double, lucid_arith2d_f64, LV_AR2D_MAXIMUM)
LV_MINMAX_FWD(lucid_vminimumf, float, lucid_arith2d_f32, LV_AR2D_MINIMUM)
LV_MINMAX_FWD(lucid_vminimum, double, lucid_arith2d_f64, LV_AR2D_MINIMUM)

/* log(e^a + e^b) = max + log1p(e^-|a - b|): no overflow, and e^-|a-b| <= 1. Equal
 * operands (the infinities included, where a - b is nan) give a + log 2. */
static inline double lv_logaddexp(double a, double b)
{
    double m = a > b ? a : b;
    double r = m + log1p(exp(-fabs(a - b)));
    return a == b ? a + 0.6931471805599453 : r;
}
/* float32 through double: near the zero of the function (e^a + e^b ~ 1) the sum
 * cancels, and double's extra 29 bits keep the float result accurate there. */
static inline float lv_logaddexpf(float a, float b)
{
    return (float)lv_logaddexp((double)a, (double)b);
}
#define LOGADDEXP(u, v) LV_GENERIC2(u, v, lv_logaddexpf, lv_logaddexp)

/* xlogy(a, b) = a log(b), 0 where a == 0 (log(b) may be -inf or nan there), nan where b
 * is nan: torch's xlogy. In the dtype, as torch: one log and one multiply. */
LV_FN2(xlogy, T r = a * LOG(b); r = a == 0 ? (T)0 : r; return b != b ? b : r;)
#define XLOGY(u, v) LV_GENERIC2(u, v, lv_xlogyf, lv_xlogy)

/* ---- logaddexp near its zero ------------------------------------------------
 * Where e^a + e^b is close to 1 the result r is small and m + log1p(e^-|a-b|)
 * cancels: its error is absolute (~2^-53), so relative to r it grows without bound
 * (NumPy's and PyTorch's do the same). There lucid recomputes r = log1p(s),
 * s = expm1(max) + e^min, with both terms in double-double arithmetic (~2^-106 of
 * their own size): s, and so r, keep their relative accuracy. This runs as a
 * scalar pass over only those elements (|r| < 1/4 in float64, < 2^-24 in
 * float32, which already works in double); whether an element takes it depends
 * on its (a, b) alone. */
typedef struct { double hi, lo; } lv_dd;

static inline lv_dd lv_two_sum(double a, double b)
{
    double s = a + b, bb = s - a;
    return (lv_dd){s, (a - (s - bb)) + (b - bb)};
}

static inline lv_dd lv_dd_mul_add(lv_dd x, lv_dd y, lv_dd c)   /* x * y + c */
{
    double p = x.hi * y.hi;
    double pe = fma(x.hi, y.hi, -p) + (x.hi * y.lo + x.lo * y.hi);
    lv_dd s = lv_two_sum(p, c.hi);
    s.lo += pe + c.lo;
    return lv_two_sum(s.hi, s.lo);
}

/* 1 / n! as double-double, n = 0..22 (from mpmath at 300 bits). */
static const lv_dd lv_inv_fact[23] = {
    {0x1.0000000000000p+0, 0x0.0p+0},
    {0x1.0000000000000p+0, 0x0.0p+0},
    {0x1.0000000000000p-1, 0x0.0p+0},
    {0x1.5555555555555p-3, 0x1.5555555555555p-57},
    {0x1.5555555555555p-5, 0x1.5555555555555p-59},
    {0x1.1111111111111p-7, 0x1.1111111111111p-63},
    {0x1.6c16c16c16c17p-10, -0x1.f49f49f49f49fp-65},
    {0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-73},
    {0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-76},
    {0x1.71de3a556c734p-19, -0x1.c154f8ddc6c00p-73},
    {0x1.27e4fb7789f5cp-22, 0x1.cbbc05b4fa99ap-76},
    {0x1.ae64567f544e4p-26, -0x1.c062e06d1f209p-80},
    {0x1.1eed8eff8d898p-29, -0x1.2aec959e14c06p-83},
    {0x1.6124613a86d09p-33, 0x1.f28e0cc748ebep-87},
    {0x1.93974a8c07c9dp-37, 0x1.05d6f8a2efd1fp-92},
    {0x1.ae7f3e733b81fp-41, 0x1.1d8656b0ee8cbp-97},
    {0x1.ae7f3e733b81fp-45, 0x1.1d8656b0ee8cbp-101},
    {0x1.952c77030ad4ap-49, 0x1.ac981465ddc6cp-103},
    {0x1.6827863b97d97p-53, 0x1.eec01221a8b0bp-107},
    {0x1.2f49b46814157p-57, 0x1.2650f61dbdcb4p-112},
    {0x1.e542ba4020225p-62, 0x1.ea72b4afe3c2fp-120},
    {0x1.71b8ef6dcf572p-66, -0x1.d043ae40c4647p-120},
    {0x1.0ce396db7f853p-70, -0x1.aebcdbd20331cp-124}
};

/* e^x = 2^k (1 + q) for x in [-700, 1]: x = k ln2 + r, |r| <= ln2 / 2, with ln2 in
 * three parts (the first has 42 bits, so k * hi is exact for |k| < 2^11), and
 * q = e^r - 1 by its Taylor series to r^22 / 22! (< 2^-110) in double-double. No
 * branches and no libm calls, so a batch of these vectorises: k by the 1.5 * 2^52
 * rounding trick, 2^k from its exponent bits. */
static inline __attribute__((always_inline)) lv_dd lv_expq_dd(double x, double *scale)
{
    const double shift = 0x1.8p52;
    double k = (x * 0x1.71547652b82fep+0 + shift) - shift;   /* nearest integer */
    double r0 = x - k * 0x1.62e42fefa3800p-1;                 /* exact */
    double p1 = k * 0x1.ef35793c76730p-45, p1e = fma(k, 0x1.ef35793c76730p-45, -p1);
    lv_dd r = lv_two_sum(r0, -p1);
    r.lo -= p1e + k * 0x1.f97b57a079a19p-103;
    r = lv_two_sum(r.hi, r.lo);
    lv_dd q = lv_inv_fact[22];
#pragma GCC unroll 24
    for (int i = 21; i >= 1; i--) q = lv_dd_mul_add(q, r, lv_inv_fact[i]);
    q = lv_dd_mul_add(q, r, (lv_dd){0.0, 0.0});
    double kb = (k + 1023.0) + 0x1p52;                         /* k + 1023 in the low bits */
    uint64_t u;
    memcpy(&u, &kb, sizeof u);
    u <<= 52;
    memcpy(scale, &u, sizeof u);
    return q;
}

/* r = log1p(s), s = (e^max - 1) + e^min, both terms to ~2^-106 of their own size
 * (e^max - 1 = (2^k - 1) + 2^k q, exact in its first part for the small k of this
 * zone), so s is accurate relative to itself unless the two cancel past that. An
 * operand below -700 (e^min < 1e-304) takes libm's exp. */
static inline __attribute__((always_inline)) double lv_logaddexp_dd(double a, double b)
{
    double m = a > b ? a : b, o = a > b ? b : a;
    double sm, so, oc = o < -700.0 ? -700.0 : o;
    lv_dd qm = lv_expq_dd(m, &sm), qo = lv_expq_dd(oc, &so);
    lv_dd em = lv_two_sum(sm - 1.0, sm * qm.hi);               /* e^m - 1 */
    em.lo += sm * qm.lo;
    lv_dd eo = lv_two_sum(so, so * qo.hi);                     /* e^o */
    eo.lo += so * qo.lo;
    eo = o < -700.0 ? (lv_dd){exp(o), 0.0} : eo;
    lv_dd s = lv_two_sum(em.hi, eo.hi);
    return log1p(s.hi + (s.lo + em.lo + eo.lo));
}

/* The fix-up pass: elements with |r| < LIMIT (and finite operands) are gathered in
 * batches of LV_LAE_BATCH and recomputed by one vectorised loop (a partial batch is
 * padded with a harmless pair; each lane's result depends on its own pair only).
 * Cloned like the loops, so fma is an instruction, not a libm call. */
#define LV_LAE_BATCH 64
#define LV_LAE_FIX(name, TYPE, LIMIT)                                           \
    LV_CLONES static void name(TYPE *z, const TYPE *a, const TYPE *b, ptrdiff_t n, int bc) \
    {                                                                           \
        ptrdiff_t idx[LV_LAE_BATCH];                                            \
        double A[LV_LAE_BATCH], B[LV_LAE_BATCH], R[LV_LAE_BATCH];               \
        int cnt = 0;                                                            \
        for (ptrdiff_t i = 0; i <= n; i++) {                                    \
            if (i < n) {                                                        \
                if (!(fabs((double)z[i]) < (LIMIT))) continue;                  \
                double x = a[bc == LV_BC_A ? 0 : i], y = b[bc == LV_BC_B ? 0 : i]; \
                if (!(isfinite(x) && isfinite(y))) continue;                    \
                idx[cnt] = i; A[cnt] = x; B[cnt] = y;                           \
                if (++cnt < LV_LAE_BATCH) continue;                             \
            }                                                                   \
            if (cnt == 0) continue;                                             \
            for (int j = cnt; j < LV_LAE_BATCH; j++) { A[j] = -1.0; B[j] = -1.0; } \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_LAE_BATCH; j++) R[j] = lv_logaddexp_dd(A[j], B[j]); \
            for (int j = 0; j < cnt; j++) z[idx[j]] = (TYPE)R[j];               \
            cnt = 0;                                                            \
        }                                                                       \
    }
LV_LAE_FIX(lv_logaddexp_fixf, float, 0x1p-24)
LV_LAE_FIX(lv_logaddexp_fix, double, 0.25)

/* ---- loops --------------------------------------------------------------- */

/* z[i] = EXPR over a = A[i] (or A[0] when SA), b = B[i] (or B[0] when SB).
 * The padded partial block first, then the full blocks from the last to the first:
 * a fresh (newly mapped) output is cheaper to fault in backwards; see the note
 * on LV_MAP1 in lucid_vforce.c. The order does not change any value. */
#define LV_BIN_LOOP(T, SA, SB, EXPR)                                            \
    do {                                                                        \
        const T a_s = (SA) ? ap[0] : (T)0, b_s = (SB) ? bp[0] : (T)0;           \
        const ptrdiff_t nfull = n - n % LV_BLOCK;                               \
        if (nfull < n) {                                                        \
            T ab[LV_BLOCK] = {0}, bb[LV_BLOCK] = {0}, zb[LV_BLOCK];             \
            size_t rest = (size_t)(n - nfull) * sizeof(T);                      \
            if (!(SA)) memcpy(ab, ap + nfull, rest);                            \
            if (!(SB)) memcpy(bb, bp + nfull, rest);                            \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) {                                \
                T a = (SA) ? a_s : ab[j], b = (SB) ? b_s : bb[j];               \
                (void)a; (void)b;                                               \
                zb[j] = (EXPR);                                                 \
            }                                                                   \
            memcpy(zp + nfull, zb, rest);                                       \
        }                                                                       \
        for (ptrdiff_t i = nfull - LV_BLOCK; i >= 0; i -= LV_BLOCK) {           \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) {                                \
                T a = (SA) ? a_s : ap[i + j], b = (SB) ? b_s : bp[i + j];       \
                (void)a; (void)b;                                               \
                zp[i + j] = (EXPR);                                             \
            }                                                                   \
        }                                                                       \
    } while (0)

/* On macOS the plain (no broadcast) forward of the ops vForce has is the vForce
 * function itself (untested: we have no macOS machine). */
#if defined(__APPLE__)
#define LV_VV(call) if (bc == LV_BC_NONE) { call; return; }
#else
#define LV_VV(call)
#endif

#define LV_BIN_FWD_FN(fname, TYPE, EXPR, VV, AFTER)                             \
    LV_CLONES void fname(TYPE *zp, const TYPE *ap, const TYPE *bp, const int *np, int bc) \
    {                                                                           \
        typedef TYPE T;                                                         \
        const ptrdiff_t n = *np;                                                \
        VV                                                                      \
        if (bc == LV_BC_A) LV_BIN_LOOP(T, 1, 0, EXPR);                          \
        else if (bc == LV_BC_B) LV_BIN_LOOP(T, 0, 1, EXPR);                     \
        else LV_BIN_LOOP(T, 0, 0, EXPR);                                        \
        AFTER                                                                   \
    }

/* ga[i] = GA and/or gb[i] = GB (WA, WB), reading g, a, b and, if RY, y; the same
 * block order as LV_BIN_LOOP. */
#define LV_BIN_GLOOP(T, SA, SB, WA, WB, RY, GA, GB)                             \
    do {                                                                        \
        const T a_s = (SA) ? ap[0] : (T)0, b_s = (SB) ? bp[0] : (T)0;           \
        const ptrdiff_t nfull = n - n % LV_BLOCK;                               \
        if (nfull < n) {                                                        \
            T gb_[LV_BLOCK] = {0}, ab[LV_BLOCK] = {0}, bb[LV_BLOCK] = {0};      \
            T yb[LV_BLOCK] = {0}, oa[LV_BLOCK], ob[LV_BLOCK];                   \
            size_t rest = (size_t)(n - nfull) * sizeof(T);                      \
            memcpy(gb_, gp + nfull, rest);                                      \
            if (!(SA)) memcpy(ab, ap + nfull, rest);                            \
            if (!(SB)) memcpy(bb, bp + nfull, rest);                            \
            if (RY) memcpy(yb, yp + nfull, rest);                               \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) {                                \
                T g = gb_[j], a = (SA) ? a_s : ab[j], b = (SB) ? b_s : bb[j];   \
                T y = yb[j];                                                    \
                (void)a; (void)b; (void)y;                                      \
                oa[j] = (WA) ? (GA) : (T)0;                                     \
                ob[j] = (WB) ? (GB) : (T)0;                                     \
            }                                                                   \
            if (WA) memcpy(gap + nfull, oa, rest);                              \
            if (WB) memcpy(gbp + nfull, ob, rest);                              \
        }                                                                       \
        for (ptrdiff_t i = nfull - LV_BLOCK; i >= 0; i -= LV_BLOCK) {           \
            _Pragma("omp simd")                                                 \
            for (int j = 0; j < LV_BLOCK; j++) {                                \
                T g = gp[i + j], a = (SA) ? a_s : ap[i + j], b = (SB) ? b_s : bp[i + j]; \
                T y = (RY) ? yp[i + j] : (T)0;                                  \
                (void)a; (void)b; (void)y;                                      \
                if (WA) gap[i + j] = (GA);                                      \
                if (WB) gbp[i + j] = (GB);                                      \
            }                                                                   \
        }                                                                       \
    } while (0)

#define LV_BIN_GSWITCH(T, WA, WB, RY, GA, GB)                                   \
    do {                                                                        \
        if (bc == LV_BC_A) LV_BIN_GLOOP(T, 1, 0, WA, WB, RY, GA, GB);           \
        else if (bc == LV_BC_B) LV_BIN_GLOOP(T, 0, 1, WA, WB, RY, GA, GB);      \
        else LV_BIN_GLOOP(T, 0, 0, WA, WB, RY, GA, GB);                         \
    } while (0)

/* YA / YB: whether GA / GB read the saved output y (y may be NULL otherwise). */
#define LV_BIN_GRAD_FN(fname, TYPE, YA, YB, GA, GB)                             \
    LV_CLONES void fname(TYPE *gap, TYPE *gbp, const TYPE *gp, const TYPE *ap,  \
                         const TYPE *bp, const TYPE *yp, const int *np, int bc) \
    {                                                                           \
        typedef TYPE T;                                                         \
        const ptrdiff_t n = *np;                                                \
        if (gap && gbp) LV_BIN_GSWITCH(T, 1, 1, (YA) || (YB), GA, GB);          \
        else if (gap) LV_BIN_GSWITCH(T, 1, 0, YA, GA, GB);                      \
        else if (gbp) LV_BIN_GSWITCH(T, 0, 1, YB, GA, GB);                      \
    }

#define LV_BIN_OP(name, EXPR, VVF, VVD, YA, YB, GA, GB)                         \
    LV_BIN_OP_AFTER(name, EXPR, VVF, VVD, , , YA, YB, GA, GB)
/* AFTERF / AFTERD: a statement run after the forward loops (logaddexp's fix-up). */
#define LV_BIN_OP_AFTER(name, EXPR, VVF, VVD, AFTERF, AFTERD, YA, YB, GA, GB)   \
    LV_BIN_FWD_FN(lucid_v##name##f, float, EXPR, VVF, AFTERF)                   \
    LV_BIN_FWD_FN(lucid_v##name, double, EXPR, VVD, AFTERD)                     \
    LV_BIN_GRAD_FN(lucid_v##name##_gradf, float, YA, YB, GA, GB)                \
    LV_BIN_GRAD_FN(lucid_v##name##_grad, double, YA, YB, GA, GB)

/* ---- the ops --------------------------------------------------------------- */

/* Ties split the gradient evenly, as in PyTorch; a nan operand sends g to both.
 * (Named: the summing backward below uses the same expressions.) */
#define LV_MAXIMUM_GA (a < b ? (T)0 : (a == b ? g * (T)0.5 : g))
#define LV_MAXIMUM_GB (a > b ? (T)0 : (a == b ? g * (T)0.5 : g))
LV_BIN_GRAD_FN(lucid_vmaximum_gradf, float, 0, 0, LV_MAXIMUM_GA, LV_MAXIMUM_GB)
LV_BIN_GRAD_FN(lucid_vmaximum_grad, double, 0, 0, LV_MAXIMUM_GA, LV_MAXIMUM_GB)
LV_BIN_GRAD_FN(lucid_vminimum_gradf, float, 0, 0, LV_MAXIMUM_GB, LV_MAXIMUM_GA)
LV_BIN_GRAD_FN(lucid_vminimum_grad, double, 0, 0, LV_MAXIMUM_GB, LV_MAXIMUM_GA)
/* d atan2(a, b) = (b da - a db) / (a^2 + b^2). vForce: vvatan2f(z, y, x, n) = atan2(y, x). */
LV_BIN_OP(atan2, ATAN2(a, b), LV_VV(vvatan2f(zp, ap, bp, np)), LV_VV(vvatan2(zp, ap, bp, np)), 0, 0,
          g / (a * a + b * b) * b,
          -g / (a * a + b * b) * a)
/* d hypot = (a da + b db) / y */
LV_BIN_OP(hypot, HYPOT(a, b), , , 1, 1, g / y * a, g / y * b)
/* d logaddexp = e^(a - y) da + e^(b - y) db */
LV_BIN_OP_AFTER(logaddexp, LOGADDEXP(a, b), , , lv_logaddexp_fixf(zp, ap, bp, n, bc);,
                lv_logaddexp_fix(zp, ap, bp, n, bc);, 1, 1, g * EXP(a - y), g * EXP(b - y))
/* d xlogy = xlogy(g, b) da + g a / b db, as torch's derivatives.yaml: the first is 0 where
 * a == 0 and b <= 0 (the derivative along a = 0; log(b) is -inf or nan there). */
LV_BIN_OP(xlogy, XLOGY(a, b), , , 0, 0,
          (a == 0 && b <= 0) ? (T)0 : XLOGY(g, b),
          g * a / b)

/* add, sub, mul, div: forward only (their backward is plain arithmetic on arrays).
 * One IEEE operation per element, so the result is NumPy's and PyTorch's bit for bit;
 * lucid runs them for the broadcasts (a row, a column, one value) that the callers
 * split into rows of one of these calls each. */
#define LV_ARITH_OP(name, EXPR)                                                 \
    LV_BIN_FWD_FN(lucid_v##name##f, float, EXPR, , )                            \
    LV_BIN_FWD_FN(lucid_v##name, double, EXPR, , )
LV_ARITH_OP(add, a + b)
LV_ARITH_OP(sub, a - b)
LV_ARITH_OP(mul, a * b)
LV_ARITH_OP(div, a / b)

/* pow. A scalar exponent that one correctly rounded operation gives exactly takes
 * that operation (as NumPy does): x**2, x**-1, x**0.5 cost a multiply, a divide, a
 * square root. x**0.5 follows pow, not sqrt, at -0 (+0) and -inf (+inf). */
enum { LV_POW_ZERO, LV_POW_ONE, LV_POW_TWO, LV_POW_RECIP, LV_POW_SQRT, LV_POW_ANY };

static int lv_pow_kind(double e)
{
    if (e == 0) return LV_POW_ZERO;
    if (e == 1) return LV_POW_ONE;
    if (e == 2) return LV_POW_TWO;
    if (e == -1) return LV_POW_RECIP;
    if (e == 0.5) return LV_POW_SQRT;
    return LV_POW_ANY;
}

#define LV_POW_SQRT_EXPR(T, v) ((v) == -(T)INFINITY ? (T)INFINITY : SQRT(v) + (T)0)

/* LOOP(a^e) for the exponent's kind, as an expression in a; ANY for the rest. */
#define LV_POW_SWITCH(T, kind, LOOP, ANY)                                       \
    switch (kind) {                                                             \
    case LV_POW_ZERO: LOOP((T)1); break;                                        \
    case LV_POW_ONE: LOOP(a); break;                                            \
    case LV_POW_TWO: LOOP(a * a); break;                                        \
    case LV_POW_RECIP: LOOP((T)1 / a); break;                                   \
    case LV_POW_SQRT: LOOP(LV_POW_SQRT_EXPR(T, a)); break;                      \
    default: LOOP(ANY); break;                                                  \
    }

/* d pow = b a^(b-1) da + y log(a) db; as PyTorch, 0 where b == 0 (for da) and
 * where a == 0 and b >= 0 (for db). */
#define LV_POW_GA(T, AB1) (b == 0 ? (T)0 : g * b * (AB1))
#define LV_POW_GB(T) ((a == 0 && b >= 0) ? (T)0 : g * y * LOG(a))
#define LV_POW_FWD_B(EXPR) LV_BIN_LOOP(T, 0, 1, EXPR)
#define LV_POW_GRAD_B(EXPR) LV_BIN_GLOOP(T, 0, 1, 1, 0, 0, LV_POW_GA(T, EXPR), (T)0)

/* vForce: vvpowf(z, y, x, n) = x^y, the exponent first. */
#define LV_POW_FNS(fwd, grad, TYPE, VV)                                         \
    LV_CLONES void fwd(TYPE *zp, const TYPE *ap, const TYPE *bp, const int *np, int bc) \
    {                                                                           \
        typedef TYPE T;                                                         \
        const ptrdiff_t n = *np;                                                \
        VV                                                                      \
        if (bc == LV_BC_B) LV_POW_SWITCH(T, lv_pow_kind(bp[0]), LV_POW_FWD_B, POW(a, b)) \
        else if (bc == LV_BC_A) LV_BIN_LOOP(T, 1, 0, POW(a, b));                \
        else LV_BIN_LOOP(T, 0, 0, POW(a, b));                                   \
    }                                                                           \
    LV_CLONES void grad(TYPE *gap, TYPE *gbp, const TYPE *gp,                   \
            const TYPE *ap, const TYPE *bp, const TYPE *yp, const int *np, int bc) \
    {                                                                           \
        typedef TYPE T;                                                         \
        const ptrdiff_t n = *np;                                                \
        if (bc == LV_BC_B && gap && !gbp)   /* x ** c: the shortcuts for c - 1 */ \
            LV_POW_SWITCH(T, lv_pow_kind(bp[0] - 1), LV_POW_GRAD_B, POW(a, b - 1)) \
        else if (gap && gbp)                                                    \
            LV_BIN_GSWITCH(T, 1, 1, 1, LV_POW_GA(T, POW(a, b - 1)), LV_POW_GB(T)); \
        else if (gap)                                                           \
            LV_BIN_GSWITCH(T, 1, 0, 0, LV_POW_GA(T, POW(a, b - 1)), LV_POW_GB(T)); \
        else if (gbp)                                                           \
            LV_BIN_GSWITCH(T, 0, 1, 1, LV_POW_GA(T, POW(a, b - 1)), LV_POW_GB(T)); \
    }

LV_POW_FNS(lucid_vpowf, lucid_vpow_gradf, float, LV_VV(vvpowf(zp, bp, ap, np)))
LV_POW_FNS(lucid_vpow, lucid_vpow_grad, double, LV_VV(vvpow(zp, bp, ap, np)))

/* ---- neg ------------------------------------------------------------------- */

LV_CLONES void lucid_vnegf(float *y, const float *x, const int *np)
{
#if defined(__APPLE__)
    vDSP_vneg(x, 1, y, 1, (vDSP_Length)*np);
    return;
#endif
    const ptrdiff_t n = *np;
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) y[i] = -x[i];
}

LV_CLONES void lucid_vneg(double *y, const double *x, const int *np)
{
#if defined(__APPLE__)
    vDSP_vnegD(x, 1, y, 1, (vDSP_Length)*np);
    return;
#endif
    const ptrdiff_t n = *np;
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) y[i] = -x[i];
}

/* ---- the backward of add, sub, mul, div, maximum and minimum, summed over the
 * broadcast dims --------------------------------------------------------------------
 *
 *     void lucid_bin_gradsumf(int op, int side, int red, float *z, const float *g,
 *                             const float *a, const float *b, ptrdiff_t m, ptrdiff_t n,
 *                             ptrdiff_t ld, const ptrdiff_t *st);
 *
 * g is m rows of n with row stride ld; a and b are read with a row step and a column
 * step each (st[0], st[1] for a, st[2], st[3] for b, in elements; the column step 0
 * or 1): (ld, 1) a full operand, (0, 1) a row, (1, 0) a column, (0, 0) one value. The
 * gradient of operand `side` (0: a, 1: b) element by element is the BINARY rows'
 * formula, the same operations in the same order:
 *     add  g, g     sub  g, -g     mul  g * b, g * a     div  g / b, -g * a / (b * b)
 *     maximum, minimum  g, g / 2 or 0 by the comparison of a and b (LV_MAXIMUM_GA/GB)
 * (IEEE operations and selects only: a vector lane and a scalar epilogue give the same
 * bits, so no loop needs padding). `red & 3` says where an element e goes, so one pass
 * computes and sums it (a row operand's gradient never exists at the output's size):
 *     LV_RED_NONE  z[i ld + j] = e          (a full operand)
 *     LV_RED_ROWS  z[j] = sum over i of e   (a row operand; rows added in order)
 *     LV_RED_COLS  z[i] = sum over j of e   (a column; LV_BLOCK lanes in double, then a
 *                                           fixed tree: float32 rounds once at the end)
 * and `red & LV_RED_ACC` adds the result to z instead (z += ..., z[j] += row by row,
 * z[i] = z[i] + the row's sum): an N-d caller (binary.pyx) runs the m x n block once
 * per index of the outer dims the operand was broadcast along, in order, so its sum
 * order follows from the shapes alone. A sum never depends on how a caller split the
 * kept axis among threads.
 */
enum { LV_ARITH_ADD, LV_ARITH_SUB, LV_ARITH_MUL, LV_ARITH_DIV, LV_ARITH_MAXIMUM,
       LV_ARITH_MINIMUM };
enum { LV_RED_NONE, LV_RED_ROWS, LV_RED_COLS, LV_RED_ACC = 4 };

#define LV_AG_ROW(T, CA, CB)                                                    \
    const T *gr = gp + i * ld, *ar = ap + i * st[0], *br = bp + i * st[2];

#define LV_AG_ELEM(T, CA, CB)                                                   \
    T g = gr[j], a = ar[(CA) ? j : 0], b = br[(CB) ? j : 0];                    \
    (void)a; (void)b;

#define LV_AG_LOOP(T, CA, CB, E)                                                \
    do {                                                                        \
        if (mode == LV_RED_NONE) {                                              \
            for (ptrdiff_t i = 0; i < m; i++) {                                 \
                LV_AG_ROW(T, CA, CB)                                            \
                T *zr = z + i * ld;                                             \
                if (acc) {                                                      \
                    _Pragma("omp simd")                                         \
                    for (ptrdiff_t j = 0; j < n; j++) {                         \
                        LV_AG_ELEM(T, CA, CB)                                   \
                        zr[j] += (E);                                           \
                    }                                                           \
                } else {                                                        \
                    _Pragma("omp simd")                                         \
                    for (ptrdiff_t j = 0; j < n; j++) {                         \
                        LV_AG_ELEM(T, CA, CB)                                   \
                        zr[j] = (E);                                            \
                    }                                                           \
                }                                                               \
            }                                                                   \
        } else if (mode == LV_RED_ROWS) {                                       \
            for (ptrdiff_t i = 0; i < m; i++) {                                 \
                LV_AG_ROW(T, CA, CB)                                            \
                const int first = i == 0 && !acc;                              \
                _Pragma("omp simd")                                             \
                for (ptrdiff_t j = 0; j < n; j++) {                             \
                    LV_AG_ELEM(T, CA, CB)                                       \
                    T e = (E);                                                  \
                    z[j] = first ? e : z[j] + e;                                \
                }                                                               \
            }                                                                   \
        } else {                                                                \
            for (ptrdiff_t i = 0; i < m; i++) {                                 \
                LV_AG_ROW(T, CA, CB)                                            \
                double s[LV_BLOCK] = {0};                                       \
                ptrdiff_t j0 = 0;                                               \
                for (; j0 + LV_BLOCK <= n; j0 += LV_BLOCK) {                    \
                    _Pragma("omp simd")                                         \
                    for (int k = 0; k < LV_BLOCK; k++) {                        \
                        ptrdiff_t j = j0 + k;                                   \
                        LV_AG_ELEM(T, CA, CB)                                   \
                        s[k] += (double)(E);                                    \
                    }                                                           \
                }                                                               \
                for (ptrdiff_t j = j0; j < n; j++) {                            \
                    LV_AG_ELEM(T, CA, CB)                                       \
                    s[j - j0] += (double)(E);                                   \
                }                                                               \
                for (int w = LV_BLOCK / 2; w > 0; w /= 2)                       \
                    for (int k = 0; k < w; k++) s[k] += s[k + w];               \
                z[i] = acc ? (T)((double)z[i] + s[0]) : (T)s[0];                \
            }                                                                   \
        }                                                                       \
    } while (0)

#define LV_AG_STEPS(T, E)                                                       \
    switch ((st[1] != 0) | (st[3] != 0) << 1) {                                 \
    case 0: LV_AG_LOOP(T, 0, 0, E); break;                                      \
    case 1: LV_AG_LOOP(T, 1, 0, E); break;                                      \
    case 2: LV_AG_LOOP(T, 0, 1, E); break;                                      \
    default: LV_AG_LOOP(T, 1, 1, E); break;                                     \
    }

#define LV_GRADSUM_FN(fname, TYPE)                                              \
    LV_CLONES void fname(int op, int side, int red, TYPE *z, const TYPE *gp,    \
                         const TYPE *ap, const TYPE *bp, ptrdiff_t m, ptrdiff_t n, \
                         ptrdiff_t ld, const ptrdiff_t *st)                     \
    {                                                                           \
        typedef TYPE T;                                                         \
        static const T zero = 0;                                                \
        const int mode = red & 3, acc = (red & LV_RED_ACC) != 0;                \
        if (ap == NULL) ap = &zero;    /* an operand the formula does not read */ \
        if (bp == NULL) bp = &zero;                                             \
        switch (op * 2 + side) {                                                \
        case LV_ARITH_SUB * 2 + 1: LV_AG_STEPS(T, -g); break;                   \
        case LV_ARITH_MUL * 2: LV_AG_STEPS(T, g * b); break;                    \
        case LV_ARITH_MUL * 2 + 1: LV_AG_STEPS(T, g * a); break;                \
        case LV_ARITH_DIV * 2: LV_AG_STEPS(T, g / b); break;                    \
        case LV_ARITH_DIV * 2 + 1: LV_AG_STEPS(T, -g * a / (b * b)); break;     \
        case LV_ARITH_MAXIMUM * 2: case LV_ARITH_MINIMUM * 2 + 1:               \
            LV_AG_STEPS(T, LV_MAXIMUM_GA); break;                               \
        case LV_ARITH_MAXIMUM * 2 + 1: case LV_ARITH_MINIMUM * 2:               \
            LV_AG_STEPS(T, LV_MAXIMUM_GB); break;                               \
        default: LV_AG_STEPS(T, g); break;              /* add, and sub's a */  \
        }                                                                       \
    }
LV_GRADSUM_FN(lucid_bin_gradsumf, float)
LV_GRADSUM_FN(lucid_bin_gradsum, double)
