/*
 * lucid's select kernels over a 2-D broadcast: comparisons (a bool result), where
 * and clamp.
 *
 *     void lucid_cmp_f32(int op, unsigned char *z, const float *a, const float *b,
 *                        ptrdiff_t m, ptrdiff_t n, const ptrdiff_t *st);
 *     void lucid_where(int itemsize, void *z, const unsigned char *c, const void *a,
 *                      const void *b, ptrdiff_t m, ptrdiff_t n, const ptrdiff_t *st);
 *     void lucid_clamp_f32(float *z, const float *x, const float *lo, const float *hi,
 *                          ptrdiff_t m, ptrdiff_t n, const ptrdiff_t *st);
 *
 * The caller sees the (C-contiguous) output as m rows of n and operand k as its
 * pointer with a row step st[2k] and a column step st[2k + 1] (in elements; the
 * column step is 0 or 1): a full operand has (n, 1), a row (0, 1), a column (1, 0),
 * a single value (0, 0). So a row, a column or a scalar tensor is read in place and
 * never materialised. Each combination of column steps is its own loop, with the
 * steps folded at compile time, so every inner loop vectorises.
 *
 *     void lucid_arith2d_f32(int op, float *z, const float *a, const float *b,
 *                            ptrdiff_t m, ptrdiff_t n, const ptrdiff_t *st);
 *
 * The last (add, sub, mul, div, maximum, minimum) serves binary.pyx for the broadcasts
 * (a kernel call per short row would cost more than the row), and is maximum's and
 * minimum's forward everywhere.
 *
 * Every element is one comparison, select or IEEE operation of its own operands: a result never
 * depends on the array's length or on how a caller split rows (or the columns of a
 * single row) between threads.
 */
#include <stdint.h>

#include "lucid_simd.h"

typedef unsigned char lv_bool;

/* ---- the loops ------------------------------------------------------------- */

/* z[i n + j] = EXPR over x0 = P0[i st[0] + j C0], x1 = P1[i st[2] + j C1]. */
#define LV_LOOP2(ZT, ZP, T0, P0, C0, T1, P1, C1, EXPR)                           \
    for (ptrdiff_t i = 0; i < m; i++) {                                         \
        ZT *zr = (ZP) + i * n;                                                  \
        const T0 *r0 = (P0) + i * st[0];                                        \
        const T1 *r1 = (P1) + i * st[2];                                        \
        _Pragma("omp simd")                                                     \
        for (ptrdiff_t j = 0; j < n; j++) {                                     \
            T0 x0 = r0[(C0) ? j : 0];                                           \
            T1 x1 = r1[(C1) ? j : 0];                                           \
            zr[j] = (EXPR);                                                     \
        }                                                                       \
    }

#define LV_SWITCH2(ZT, ZP, T0, P0, T1, P1, EXPR)                                \
    switch ((st[1] != 0) | (st[3] != 0) << 1) {                                 \
    case 0: LV_LOOP2(ZT, ZP, T0, P0, 0, T1, P1, 0, EXPR) break;                 \
    case 1: LV_LOOP2(ZT, ZP, T0, P0, 1, T1, P1, 0, EXPR) break;                 \
    case 2: LV_LOOP2(ZT, ZP, T0, P0, 0, T1, P1, 1, EXPR) break;                 \
    default: LV_LOOP2(ZT, ZP, T0, P0, 1, T1, P1, 1, EXPR) break;                \
    }

/* The same with a third operand x2 = P2[i st[4] + j C2]. */
#define LV_LOOP3(ZT, ZP, T0, P0, C0, T1, P1, C1, T2, P2, C2, EXPR)               \
    for (ptrdiff_t i = 0; i < m; i++) {                                         \
        ZT *zr = (ZP) + i * n;                                                  \
        const T0 *r0 = (P0) + i * st[0];                                        \
        const T1 *r1 = (P1) + i * st[2];                                        \
        const T2 *r2 = (P2) + i * st[4];                                        \
        _Pragma("omp simd")                                                     \
        for (ptrdiff_t j = 0; j < n; j++) {                                     \
            T0 x0 = r0[(C0) ? j : 0];                                           \
            T1 x1 = r1[(C1) ? j : 0];                                           \
            T2 x2 = r2[(C2) ? j : 0];                                           \
            zr[j] = (EXPR);                                                     \
        }                                                                       \
    }

#define LV_SWITCH3(ZT, ZP, T0, P0, T1, P1, T2, P2, EXPR)                        \
    switch ((st[1] != 0) | (st[3] != 0) << 1 | (st[5] != 0) << 2) {             \
    case 0: LV_LOOP3(ZT, ZP, T0, P0, 0, T1, P1, 0, T2, P2, 0, EXPR) break;      \
    case 1: LV_LOOP3(ZT, ZP, T0, P0, 1, T1, P1, 0, T2, P2, 0, EXPR) break;      \
    case 2: LV_LOOP3(ZT, ZP, T0, P0, 0, T1, P1, 1, T2, P2, 0, EXPR) break;      \
    case 3: LV_LOOP3(ZT, ZP, T0, P0, 1, T1, P1, 1, T2, P2, 0, EXPR) break;      \
    case 4: LV_LOOP3(ZT, ZP, T0, P0, 0, T1, P1, 0, T2, P2, 1, EXPR) break;      \
    case 5: LV_LOOP3(ZT, ZP, T0, P0, 1, T1, P1, 0, T2, P2, 1, EXPR) break;      \
    case 6: LV_LOOP3(ZT, ZP, T0, P0, 0, T1, P1, 1, T2, P2, 1, EXPR) break;      \
    default: LV_LOOP3(ZT, ZP, T0, P0, 1, T1, P1, 1, T2, P2, 1, EXPR) break;     \
    }

/* ---- comparisons: IEEE (a nan compares unequal to everything), as torch ---- */

enum { LV_CMP_EQ, LV_CMP_NE, LV_CMP_LT, LV_CMP_LE, LV_CMP_GT, LV_CMP_GE };

#define LV_CMP_FN(fname, T)                                                     \
    LV_CLONES void fname(int op, lv_bool *z, const T *a, const T *b, ptrdiff_t m, \
                         ptrdiff_t n, const ptrdiff_t *st)                      \
    {                                                                           \
        switch (op) {                                                           \
        case LV_CMP_EQ: LV_SWITCH2(lv_bool, z, T, a, T, b, x0 == x1) break;     \
        case LV_CMP_NE: LV_SWITCH2(lv_bool, z, T, a, T, b, x0 != x1) break;     \
        case LV_CMP_LT: LV_SWITCH2(lv_bool, z, T, a, T, b, x0 < x1) break;      \
        case LV_CMP_LE: LV_SWITCH2(lv_bool, z, T, a, T, b, x0 <= x1) break;     \
        case LV_CMP_GT: LV_SWITCH2(lv_bool, z, T, a, T, b, x0 > x1) break;      \
        default: LV_SWITCH2(lv_bool, z, T, a, T, b, x0 >= x1) break;            \
        }                                                                       \
    }
LV_CMP_FN(lucid_cmp_f32, float)
LV_CMP_FN(lucid_cmp_f64, double)

/* ---- where: a select of bits, so one loop per item size serves every dtype
 * (the chosen element is copied exactly: a nan keeps its payload, -0 its sign) ---- */

#define LV_WHERE_T(T)                                                           \
    do {                                                                        \
        T *zt = (T *)z;                                                         \
        const T *at = (const T *)a, *bt = (const T *)b;                         \
        LV_SWITCH3(T, zt, lv_bool, c, T, at, T, bt, x0 ? x1 : x2)               \
    } while (0)

LV_CLONES void lucid_where(int itemsize, void *z, const lv_bool *c, const void *a,
                           const void *b, ptrdiff_t m, ptrdiff_t n, const ptrdiff_t *st)
{
    switch (itemsize) {
    case 1: LV_WHERE_T(uint8_t); break;
    case 2: LV_WHERE_T(uint16_t); break;
    case 4: LV_WHERE_T(uint32_t); break;
    default: LV_WHERE_T(uint64_t); break;
    }
}

/* ---- clamp: max(x, lo), then min(., hi), as NumPy's maximum / minimum (a nan bound
 * gives nan; of two equal values, -0 and +0, the bound), and a nan x stays nan, as
 * torch. Where lo > hi the result is hi. A missing bound is passed as -inf / +inf,
 * which changes no value. ---- */

#define LV_CLAMP_FN(fname, T)                                                   \
    static inline T fname##_one(T x, T lo, T hi)                                \
    {                                                                           \
        T r = x > lo ? x : lo;                    /* a nan lo: lo */            \
        r = (r < hi || r != r) ? r : hi;          /* a nan hi: hi */            \
        return x != x ? x : r;                                                  \
    }                                                                           \
    LV_CLONES void fname(T *z, const T *x, const T *lo, const T *hi, ptrdiff_t m, \
                         ptrdiff_t n, const ptrdiff_t *st)                      \
    {                                                                           \
        LV_SWITCH3(T, z, T, x, T, lo, T, hi, fname##_one(x0, x1, x2))           \
    }
LV_CLAMP_FN(lucid_clamp_f32, float)
LV_CLAMP_FN(lucid_clamp_f64, double)

/* ---- add, sub, mul, div: one correctly rounded operation per element, so the
 * results are those of the element-wise kernels of src/lucid_vforce.c; maximum and
 * minimum (lucid_binary.c's forward runs these loops too) ---- */

enum { LV_AR_ADD, LV_AR_SUB, LV_AR_MUL, LV_AR_DIV, LV_AR_MAXIMUM, LV_AR_MINIMUM };

/* maximum / minimum as IEEE 754-2019 defines them (and PyTorch for nan): nan if
 * either operand is nan, and -0 < +0, so maximum(-0, +0) = +0 and minimum(-0, +0)
 * = -0 in either order. `a > b ? a : b` and `b > a ? b : a` are one max instruction
 * each; they agree unless a == b, where they are a and b, and the AND (max) or OR
 * (min) of their bits is that value, or +0 / -0 for a pair of zeros. A nan operand
 * gives a + b (that nan). No nested conditionals: gcc computes each select once,
 * and one compare per vector remains (AVX-512's compares into mask registers share
 * one port). */
static inline float lv_bitsf(float x, float y, int or_)
{
    uint32_t u, v;
    memcpy(&u, &x, sizeof u);
    memcpy(&v, &y, sizeof v);
    u = or_ ? u | v : u & v;
    memcpy(&x, &u, sizeof u);
    return x;
}
static inline double lv_bits(double x, double y, int or_)
{
    uint64_t u, v;
    memcpy(&u, &x, sizeof u);
    memcpy(&v, &y, sizeof v);
    u = or_ ? u | v : u & v;
    memcpy(&x, &u, sizeof u);
    return x;
}
#define LV_MINMAX_FN(name, T, bits, CMP, OR)                                    \
    static inline T name(T a, T b)                                              \
    {                                                                           \
        T r = bits(a CMP b ? a : b, b CMP a ? b : a, OR);                       \
        return __builtin_isunordered(a, b) ? a + b : r;                         \
    }
LV_MINMAX_FN(lv_maximumf, float, lv_bitsf, >, 0)
LV_MINMAX_FN(lv_maximum, double, lv_bits, >, 0)
LV_MINMAX_FN(lv_minimumf, float, lv_bitsf, <, 1)
LV_MINMAX_FN(lv_minimum, double, lv_bits, <, 1)
#define LV_MAXIMUM(a, b) _Generic((a), float: lv_maximumf, default: lv_maximum)(a, b)
#define LV_MINIMUM(a, b) _Generic((a), float: lv_minimumf, default: lv_minimum)(a, b)

#define LV_ARITH_FN(fname, T)                                                   \
    LV_CLONES void fname(int op, T *z, const T *a, const T *b, ptrdiff_t m,      \
                         ptrdiff_t n, const ptrdiff_t *st)                      \
    {                                                                           \
        switch (op) {                                                           \
        case LV_AR_ADD: LV_SWITCH2(T, z, T, a, T, b, x0 + x1) break;            \
        case LV_AR_SUB: LV_SWITCH2(T, z, T, a, T, b, x0 - x1) break;            \
        case LV_AR_MUL: LV_SWITCH2(T, z, T, a, T, b, x0 * x1) break;            \
        case LV_AR_DIV: LV_SWITCH2(T, z, T, a, T, b, x0 / x1) break;            \
        case LV_AR_MAXIMUM: LV_SWITCH2(T, z, T, a, T, b, LV_MAXIMUM(x0, x1)) break; \
        default: LV_SWITCH2(T, z, T, a, T, b, LV_MINIMUM(x0, x1)) break;        \
        }                                                                       \
    }
LV_ARITH_FN(lucid_arith2d_f32, float)
LV_ARITH_FN(lucid_arith2d_f64, double)
