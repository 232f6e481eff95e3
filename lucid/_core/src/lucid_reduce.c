/*
 * lucid_reduce.c -- the reduction kernels behind lucid_vforce.h: pairwise sums, fills,
 * and the reduction plans (sum, sums of squares and of absolute values, prod,
 * max/min with their indices, logsumexp, softmax, log_softmax over rows, columns or
 * everything; see lucid_reduce_tpl.h).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lucid_vforce.h"
#include "lucid_simd.h"   /* LV_CLONES */
#include "lucid_vexpf.h"  /* lv_expf16 */

LV_SIMD_PAIR(exp)
LV_SIMD_DECL(double, log, double)

/* ---- reductions -------------------------------------------------------- */

/* The first of nrows rows of n elements (one after another) without 16 elements
 * after it: the rows before it may read their last vector in place, past their end. */
static inline ptrdiff_t lr_over_end(ptrdiff_t nrows, ptrdiff_t n)
{
    return nrows - (n > 0 ? (16 + n - 1) / n : nrows);
}

/* Pairwise summation: leaves of 256 elements summed in the element type by 64
 * independent lanes (4 AVX-512 / 8 AVX2 registers, so the adds do not wait on each
 * other), the lanes then folded pairwise (lane l += lane l + h for h = 32, 16, ...,
 * 1); leaves combined as a binary tree in double. The order depends only on n, not
 * on the vector width of the clone that runs, so a sum is the same on every machine
 * and for any split into pieces. The 64 lanes are four vectors of 16 (gcc's generic
 * vectors, lowered to whatever width the clone has), which keeps them in registers:
 * a short row costs a few dozen instructions, not a pass over a stack array. Lanes
 * past the end of a short leaf add +0, which changes nothing (a lane is never -0). */
#define LV_SUM_LEAF 256
#define LV_SUM_LANES 64
/* What a sum adds, element-wise on the generic vectors (VT values, MT lane masks),
 * with one scalar c per sum: the elements themselves; their squared deviations from
 * c (var and std with c the mean, the 2-norm with c = 0); their absolute values
 * (the 1-norm). Lanes past the end are masked to +0 after the transform. */
#define LV_XF_ID(v, c, VT, MT) (v)
#define LV_XF_SQ(v, c, VT, MT) (((v) - (c)) * ((v) - (c)))
#define LV_XF_ABS(v, c, VT, MT) ((VT)((MT)(v) & ~(MT)(-(VT){0})))
#define LV_SUM(fname, TYPE, ITYPE, XF)                                          \
    typedef TYPE fname##_v __attribute__((vector_size(16 * sizeof(TYPE))));     \
    typedef ITYPE fname##_m __attribute__((vector_size(16 * sizeof(TYPE))));    \
    static inline __attribute__((always_inline)) fname##_v                      \
    fname##_load(const TYPE *x, TYPE c)                                         \
    {                                                                           \
        fname##_v v;                                                            \
        memcpy(&v, x, sizeof v);                                                \
        (void)c;                                                                \
        return XF(v, c, fname##_v, fname##_m);                                  \
    }                                                                           \
    /* The leaf sum of x[0:n], n <= LV_SUM_LEAF. mask: NULL, or lanes l < n % 16    \
     * all ones and the rest zero, when x[n:n + 16] may be read (the tail is then   \
     * one load and an and, instead of a copy through the stack). */              \
    static inline __attribute__((always_inline)) double                         \
    fname##_leaf_body(const TYPE *x, ptrdiff_t n, const fname##_m *mask, TYPE c) \
    {                                                                           \
        fname##_v a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, z = {0};              \
        ptrdiff_t i = 0;                                                        \
        for (; i + LV_SUM_LANES <= n; i += LV_SUM_LANES) {                      \
            a0 += fname##_load(x + i, c);                                       \
            a1 += fname##_load(x + i + 16, c);                                  \
            a2 += fname##_load(x + i + 32, c);                                  \
            a3 += fname##_load(x + i + 48, c);                                  \
        }                                                                       \
        if (i < n) {                                                            \
            int q = (int)(n - i) / 16, r = (int)(n - i) % 16;                   \
            fname##_v part;                                                     \
            if (mask) {                                                         \
                part = (fname##_v)((fname##_m)fname##_load(x + i + 16 * q, c) & *mask); \
            } else {                                                            \
                TYPE t[16] = {0};                                               \
                fname##_m mk;                                                   \
                for (int l = 0; l < 16; l++) mk[l] = l < r ? -1 : 0;            \
                for (int l = 0; l < r; l++) t[l] = x[i + 16 * q + l];           \
                part = (fname##_v)((fname##_m)fname##_load(t, c) & mk);         \
            }                                                                   \
            a0 += q > 0 ? fname##_load(x + i, c) : part;                        \
            a1 += q > 1 ? fname##_load(x + i + 16, c) : q == 1 ? part : z;      \
            a2 += q == 2 ? part : q > 2 ? fname##_load(x + i + 32, c) : z;      \
            a3 += q == 3 ? part : z;                                            \
        }                                                                       \
        fname##_v s = (a0 + a2) + (a1 + a3);                                    \
        s += __builtin_shuffle(s, (fname##_m){8, 9, 10, 11, 12, 13, 14, 15,     \
                                              8, 9, 10, 11, 12, 13, 14, 15});   \
        s += __builtin_shuffle(s, (fname##_m){4, 5, 6, 7, 4, 5, 6, 7,           \
                                              4, 5, 6, 7, 4, 5, 6, 7});         \
        s += __builtin_shuffle(s, (fname##_m){2, 3, 2, 3, 2, 3, 2, 3,           \
                                              2, 3, 2, 3, 2, 3, 2, 3});         \
        return (double)(s[0] + s[1]);                                           \
    }                                                                           \
    LV_CLONES static double fname##_leaf(const TYPE *x, ptrdiff_t n, TYPE c)    \
    {                                                                           \
        return fname##_leaf_body(x, n, NULL, c);                                \
    }                                                                           \
    static double fname##_t(const TYPE *x, ptrdiff_t n, TYPE c)                 \
    {                                                                           \
        if (n <= LV_SUM_LEAF) return fname##_leaf(x, n, c);                     \
        ptrdiff_t h = (n / 2 / LV_SUM_LEAF) * LV_SUM_LEAF;                      \
        if (h == 0) h = n / 2;                                                  \
        return fname##_t(x, h, c) + fname##_t(x + h, n - h, c);                 \
    }                                                                           \
    /* y[r] = fname(row r) for the rows r0 <= r < r1 of x (rows of n, nrows in  \
     * all), row r with the scalar c[r] (c == NULL: 0); short rows are summed   \
     * inline, without a call per row. */                                       \
    LV_CLONES static void fname##_rows(const TYPE *x, TYPE *y, ptrdiff_t r0,    \
                                       ptrdiff_t r1, ptrdiff_t n, ptrdiff_t nrows, \
                                       const TYPE *c)                           \
    {                                                                           \
        if (n > LV_SUM_LEAF) {                                                  \
            for (ptrdiff_t r = r0; r < r1; r++)                                 \
                y[r] = (TYPE)fname##_t(x + r * n, n, c ? c[r] : 0);             \
            return;                                                             \
        }                                                                       \
        fname##_m mask;                                                         \
        for (int l = 0; l < 16; l++) mask[l] = l < n % 16 ? -1 : 0;             \
        /* rows that have 16 elements after them in x */                        \
        ptrdiff_t safe_end = lr_over_end(nrows, n);                              \
        ptrdiff_t r = r0;                                                       \
        for (; r < r1 && r < safe_end; r++)                                     \
            y[r] = (TYPE)fname##_leaf_body(x + r * n, n, &mask, c ? c[r] : 0);  \
        for (; r < r1; r++)                                                     \
            y[r] = (TYPE)fname##_leaf_body(x + r * n, n, NULL, c ? c[r] : 0);   \
    }
/* The same sums of doubles, bitwise: each 16-lane vector of LV_SUM is held as two
 * vectors of 8 (lo: lanes 0-7, hi: lanes 8-15), which gcc keeps in registers (it
 * lowers generic vectors of 16 doubles and their 64-bit masks to slow code). */
#define LV_SUM8(fname, TYPE, ITYPE, XF)                                         \
    typedef TYPE fname##_v __attribute__((vector_size(8 * sizeof(TYPE))));      \
    typedef ITYPE fname##_m __attribute__((vector_size(8 * sizeof(TYPE))));     \
    static inline __attribute__((always_inline)) fname##_v                      \
    fname##_load(const TYPE *x, TYPE c)                                         \
    {                                                                           \
        fname##_v v;                                                            \
        memcpy(&v, x, sizeof v);                                                \
        (void)c;                                                                \
        return XF(v, c, fname##_v, fname##_m);                                  \
    }                                                                           \
    /* mask: NULL, or the lo and hi masks of lanes l < n % 16 when x[n:n + 16]  \
     * may be read. */                                                          \
    static inline __attribute__((always_inline)) double                         \
    fname##_leaf_body(const TYPE *x, ptrdiff_t n, const fname##_m *mask, TYPE c) \
    {                                                                           \
        fname##_v b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0}, b4 = {0}, b5 = {0},   \
                  b6 = {0}, b7 = {0}, z = {0};                                  \
        ptrdiff_t i = 0;                                                        \
        for (; i + LV_SUM_LANES <= n; i += LV_SUM_LANES) {                      \
            b0 += fname##_load(x + i, c);                                       \
            b1 += fname##_load(x + i + 8, c);                                   \
            b2 += fname##_load(x + i + 16, c);                                  \
            b3 += fname##_load(x + i + 24, c);                                  \
            b4 += fname##_load(x + i + 32, c);                                  \
            b5 += fname##_load(x + i + 40, c);                                  \
            b6 += fname##_load(x + i + 48, c);                                  \
            b7 += fname##_load(x + i + 56, c);                                  \
        }                                                                       \
        if (i < n) {                                                            \
            int q = (int)(n - i) / 16, r = (int)(n - i) % 16;                   \
            fname##_v plo, phi;                                                 \
            const TYPE *xp = x + i + 16 * q;                                    \
            if (mask) {                                                         \
                plo = (fname##_v)((fname##_m)fname##_load(xp, c) & mask[0]);    \
                phi = (fname##_v)((fname##_m)fname##_load(xp + 8, c) & mask[1]); \
            } else {                                                            \
                TYPE t[16] = {0};                                               \
                fname##_m mk0, mk1;                                             \
                for (int l = 0; l < 8; l++) {                                   \
                    mk0[l] = l < r ? -1 : 0;                                    \
                    mk1[l] = l + 8 < r ? -1 : 0;                                \
                }                                                               \
                for (int l = 0; l < r; l++) t[l] = xp[l];                       \
                plo = (fname##_v)((fname##_m)fname##_load(t, c) & mk0);         \
                phi = (fname##_v)((fname##_m)fname##_load(t + 8, c) & mk1);     \
            }                                                                   \
            b0 += q > 0 ? fname##_load(x + i, c) : plo;                         \
            b1 += q > 0 ? fname##_load(x + i + 8, c) : phi;                     \
            b2 += q > 1 ? fname##_load(x + i + 16, c) : q == 1 ? plo : z;       \
            b3 += q > 1 ? fname##_load(x + i + 24, c) : q == 1 ? phi : z;       \
            b4 += q == 2 ? plo : q > 2 ? fname##_load(x + i + 32, c) : z;       \
            b5 += q == 2 ? phi : q > 2 ? fname##_load(x + i + 40, c) : z;       \
            b6 += q == 3 ? plo : z;                                             \
            b7 += q == 3 ? phi : z;                                             \
        }                                                                       \
        fname##_v s = ((b0 + b4) + (b2 + b6)) + ((b1 + b5) + (b3 + b7));        \
        s += __builtin_shuffle(s, (fname##_m){4, 5, 6, 7, 4, 5, 6, 7});         \
        s += __builtin_shuffle(s, (fname##_m){2, 3, 2, 3, 2, 3, 2, 3});         \
        return (double)(s[0] + s[1]);                                           \
    }                                                                           \
    LV_CLONES static double fname##_leaf(const TYPE *x, ptrdiff_t n, TYPE c)    \
    {                                                                           \
        return fname##_leaf_body(x, n, NULL, c);                                \
    }                                                                           \
    static double fname##_t(const TYPE *x, ptrdiff_t n, TYPE c)                 \
    {                                                                           \
        if (n <= LV_SUM_LEAF) return fname##_leaf(x, n, c);                     \
        ptrdiff_t h = (n / 2 / LV_SUM_LEAF) * LV_SUM_LEAF;                      \
        if (h == 0) h = n / 2;                                                  \
        return fname##_t(x, h, c) + fname##_t(x + h, n - h, c);                 \
    }                                                                           \
    LV_CLONES static void fname##_rows(const TYPE *x, TYPE *y, ptrdiff_t r0,    \
                                       ptrdiff_t r1, ptrdiff_t n, ptrdiff_t nrows, \
                                       const TYPE *c)                           \
    {                                                                           \
        if (n > LV_SUM_LEAF) {                                                  \
            for (ptrdiff_t r = r0; r < r1; r++)                                 \
                y[r] = (TYPE)fname##_t(x + r * n, n, c ? c[r] : 0);             \
            return;                                                             \
        }                                                                       \
        fname##_m mask[2];                                                      \
        for (int l = 0; l < 8; l++) {                                           \
            mask[0][l] = l < n % 16 ? -1 : 0;                                   \
            mask[1][l] = l + 8 < n % 16 ? -1 : 0;                               \
        }                                                                       \
        ptrdiff_t safe_end = lr_over_end(nrows, n);                              \
        ptrdiff_t r = r0;                                                       \
        for (; r < r1 && r < safe_end; r++)                                     \
            y[r] = (TYPE)fname##_leaf_body(x + r * n, n, mask, c ? c[r] : 0);   \
        for (; r < r1; r++)                                                     \
            y[r] = (TYPE)fname##_leaf_body(x + r * n, n, NULL, c ? c[r] : 0);   \
    }
LV_SUM(lucid_sumf, float, int32_t, LV_XF_ID)
LV_SUM8(lucid_sum, double, int64_t, LV_XF_ID)
LV_SUM(lr_sumsqf, float, int32_t, LV_XF_SQ)
LV_SUM8(lr_sumsq, double, int64_t, LV_XF_SQ)
LV_SUM(lr_asumf, float, int32_t, LV_XF_ABS)
LV_SUM8(lr_asum, double, int64_t, LV_XF_ABS)

double lucid_sumf(const float *x, ptrdiff_t n) { return lucid_sumf_t(x, n, 0); }
double lucid_sum(const double *x, ptrdiff_t n) { return lucid_sum_t(x, n, 0); }

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

void lucid_fill_piece(void *plan, ptrdiff_t piece)
{
    const lucid_fill_plan *p = (const lucid_fill_plan *)plan;
    ptrdiff_t i0 = piece * LUCID_FILL_PIECE;
    ptrdiff_t n = p->n - i0 < LUCID_FILL_PIECE ? p->n - i0 : LUCID_FILL_PIECE;
    if (p->dbl) lucid_fill((double *)p->y + i0, p->v, n);
    else lucid_fillf((float *)p->y + i0, (float)p->v, n);
}

/* ---- reduction plans ----------------------------------------------------- */

enum { LR_KIND_ROWS = 0, LR_KIND_COLS = 1, LR_KIND_FULL = 2 };
#define LR_COL_W 64          /* columns per piece of a column reduction */
#define LR_COL_LEAF 128      /* rows summed in sequence before the pairwise tree */
#define LR_BLOCK 16384       /* elements per block of a full reduction */
#define LR_ROWS_PIECE 16384  /* about this many elements per piece of rows */

static double lr_pairwise(const double *a, ptrdiff_t n)
{
    if (n <= 0) return 0;
    if (n == 1) return a[0];
    ptrdiff_t h = n / 2;
    return lr_pairwise(a, h) + lr_pairwise(a + h, n - h);
}

/* The blocks' partial products, in block order. */
static double lr_product(const double *a, ptrdiff_t n)
{
    double r = 1;
    for (ptrdiff_t i = 0; i < n; i++) r *= a[i];
    return r;
}

/* The sum of 16 lanes, folded pairwise (lane l += lane l + h for h = 8, 4, 2, 1). */
#define LR_FOLD16(s)                                                     \
    do {                                                                 \
        for (int h_ = 8; h_ >= 1; h_ /= 2)                               \
            for (int l_ = 0; l_ < h_; l_++) (s)[l_] += (s)[l_ + h_];      \
    } while (0)

#define T float
#define IT int32_t
#define LR_GENERIC_VEC 1
#define LR_POLY_EXP 1
#define LR(name) lr_##name##f
#define LR_SUM_ID(f) lucid_sumf_##f
#define LR_SUM_SQ(f) lr_sumsqf_##f
#define LR_SUM_ABS(f) lr_asumf_##f
#define EXPT expf
#include "lucid_reduce_tpl.h"
#undef T
#undef IT
#undef LR_GENERIC_VEC
#undef LR_POLY_EXP
#undef LR
#undef LR_SUM_ID
#undef LR_SUM_SQ
#undef LR_SUM_ABS
#undef EXPT

#define T double
#define IT int64_t
#define LR_GENERIC_VEC 0
#define LR_POLY_EXP 0
#define LR(name) lr_##name
#define LR_SUM_ID(f) lucid_sum_##f
#define LR_SUM_SQ(f) lr_sumsq_##f
#define LR_SUM_ABS(f) lr_asum_##f
#define EXPT exp
#include "lucid_reduce_tpl.h"
#undef T
#undef IT
#undef LR_GENERIC_VEC
#undef LR_POLY_EXP
#undef LR
#undef LR_SUM_ID
#undef LR_SUM_SQ
#undef LR_SUM_ABS
#undef EXPT

/* The ops of lri_run (integer and bool inputs; all / any of any input). */
static int lr_is_lri(const lucid_red_plan *p)
{
    return p->dbl > LR_T_F64 || p->op == LR_ALL || p->op == LR_ANY;
}

int lucid_red_setup(lucid_red_plan *p)
{
    /* ops with a full kind: the float reductions other than the cumulative and the
     * backward ops; of lri's, all but the cumulative ones */
    int cum = p->op == LR_CUMSUM || p->op == LR_CUMPROD;
    int has_full = lr_is_lri(p) ? !cum : !cum && p->op < LR_SOFTMAX_BWD;
    p->phase = 0;
    p->nphases = 1;
    p->part = NULL;
    p->ipart = NULL;
    p->nblocks = 0;
    p->shift = p->total = 0;
    p->flag = 0;
    if (p->inner > 1) {
        p->kind = LR_KIND_COLS;
        p->npieces = p->outer * ((p->inner + LR_COL_W - 1) / LR_COL_W);
    } else if (p->outer > 1 || p->red <= LR_BLOCK || !has_full) {
        /* rows whose elements each cost an exp get pieces a quarter the size: a
         * helper thread that wakes late still finds pieces to take */
        ptrdiff_t piece = p->op == LR_LSE || p->op == LR_SOFTMAX || p->op == LR_LOGSOFTMAX
                          || p->op == LR_LOGSOFTMAX_BWD || p->op == LR_LSE_BWD
                          ? LR_ROWS_PIECE / 4 : LR_ROWS_PIECE;
        p->kind = LR_KIND_ROWS;
        p->per = p->red >= piece ? 1 : piece / (p->red > 0 ? p->red : 1);
        p->npieces = (p->outer + p->per - 1) / p->per;
    } else {
        p->kind = LR_KIND_FULL;
        p->nblocks = p->npieces = (p->red + LR_BLOCK - 1) / LR_BLOCK;
        /* ipart: lri's per-block values, then their indices (max / min) */
        p->part = malloc(sizeof(double) * (size_t)p->nblocks);
        p->ipart = malloc(sizeof(int64_t) * 2 * (size_t)p->nblocks);
        if (!p->part || !p->ipart) {
            lucid_red_free(p);
            return -1;
        }
        if (!lr_is_lri(p))
            p->nphases = p->op == LR_LSE ? 2
                       : (p->op == LR_SOFTMAX || p->op == LR_LOGSOFTMAX) ? 3 : 1;
    }
    return 0;
}

/* ---- integer and bool reductions, all / any -------------------------------- */

/* The results (o, c0:c0 + w) of one (O, R, I) problem whose elements are of type TY:
 * sum and prod into int64 (wrapping, as NumPy and torch; any order gives the same
 * result), cumsum and cumprod into int64, max and min (with the first index) into
 * TY, all and any into uint8. Columns (I > 1) are vectorised across the columns,
 * rows (I == 1, w == 1) along the row. */
#define LRI_DEF(S, TY)                                                            \
LV_CLONES static void lri_run_##S(const lucid_red_plan *p, ptrdiff_t o, ptrdiff_t c0, int w) \
{                                                                                 \
    ptrdiff_t I = p->inner, R = p->red, oi = o * I + c0;                          \
    const TY *x = (const TY *)p->x + o * R * I + c0;                              \
    int op = p->op;                                                               \
    if (op == LR_ALL || op == LR_ANY) {                                           \
        uint8_t *y = (uint8_t *)p->y + oi;                                        \
        if (I == 1) {                                                             \
            int nz = 0, all = 1;                                                  \
            _Pragma("omp simd reduction(|:nz) reduction(&:all)")                  \
            for (ptrdiff_t r = 0; r < R; r++) { nz |= x[r] != 0; all &= x[r] != 0; } \
            y[0] = (uint8_t)(op == LR_ALL ? all : nz);                            \
            return;                                                               \
        }                                                                         \
        uint8_t a[LR_COL_W];                                                      \
        for (int c = 0; c < w; c++) a[c] = op == LR_ALL;                          \
        for (ptrdiff_t r = 0; r < R; r++) {                                       \
            const TY *xr = x + r * I;                                             \
            if (op == LR_ALL) {                                                   \
                _Pragma("omp simd")                                               \
                for (int c = 0; c < w; c++) a[c] &= xr[c] != 0;                   \
            } else {                                                              \
                _Pragma("omp simd")                                               \
                for (int c = 0; c < w; c++) a[c] |= xr[c] != 0;                   \
            }                                                                     \
        }                                                                         \
        for (int c = 0; c < w; c++) y[c] = a[c];                                  \
        return;                                                                   \
    }                                                                             \
    if (op == LR_SUM || op == LR_PROD) {                                          \
        int64_t *y = (int64_t *)p->y + oi;                                        \
        if (I == 1) {                                                             \
            uint64_t a = op == LR_PROD;                                           \
            if (op == LR_PROD) {                                                  \
                _Pragma("omp simd reduction(*:a)")                                \
                for (ptrdiff_t r = 0; r < R; r++) a *= (uint64_t)(int64_t)x[r];   \
            } else {                                                              \
                _Pragma("omp simd reduction(+:a)")                                \
                for (ptrdiff_t r = 0; r < R; r++) a += (uint64_t)(int64_t)x[r];   \
            }                                                                     \
            y[0] = (int64_t)a;                                                    \
            return;                                                               \
        }                                                                         \
        uint64_t a[LR_COL_W];                                                     \
        for (int c = 0; c < w; c++) a[c] = op == LR_PROD;                         \
        for (ptrdiff_t r = 0; r < R; r++) {                                       \
            const TY *xr = x + r * I;                                             \
            if (op == LR_PROD) {                                                  \
                _Pragma("omp simd")                                               \
                for (int c = 0; c < w; c++) a[c] *= (uint64_t)(int64_t)xr[c];     \
            } else {                                                              \
                _Pragma("omp simd")                                               \
                for (int c = 0; c < w; c++) a[c] += (uint64_t)(int64_t)xr[c];     \
            }                                                                     \
        }                                                                         \
        for (int c = 0; c < w; c++) y[c] = (int64_t)a[c];                         \
        return;                                                                   \
    }                                                                             \
    if (op == LR_CUMSUM || op == LR_CUMPROD) {                                    \
        int64_t *y = (int64_t *)p->y + o * R * I + c0;                            \
        uint64_t a[LR_COL_W];                                                     \
        for (int c = 0; c < w; c++) a[c] = op == LR_CUMPROD;                      \
        for (ptrdiff_t r = 0; r < R; r++) {                                       \
            const TY *xr = x + r * I;                                             \
            int64_t *yr = y + r * I;                                              \
            if (op == LR_CUMPROD) {                                               \
                for (int c = 0; c < w; c++) {                                     \
                    a[c] *= (uint64_t)(int64_t)xr[c];                             \
                    yr[c] = (int64_t)a[c];                                        \
                }                                                                 \
            } else {                                                              \
                for (int c = 0; c < w; c++) {                                     \
                    a[c] += (uint64_t)(int64_t)xr[c];                             \
                    yr[c] = (int64_t)a[c];                                        \
                }                                                                 \
            }                                                                     \
        }                                                                         \
        return;                                                                   \
    }                                                                             \
    /* LR_MAX / LR_MIN */                                                         \
    TY *y = (TY *)p->y + oi;                                                      \
    int mx = op == LR_MAX;                                                        \
    if (I == 1) {                                                                 \
        TY m = x[0];                                                              \
        if (mx) {                                                                 \
            _Pragma("omp simd reduction(max:m)")                                  \
            for (ptrdiff_t r = 0; r < R; r++) m = x[r] > m ? x[r] : m;            \
        } else {                                                                  \
            _Pragma("omp simd reduction(min:m)")                                  \
            for (ptrdiff_t r = 0; r < R; r++) m = x[r] < m ? x[r] : m;            \
        }                                                                         \
        y[0] = m;                                                                 \
        if (p->idx) {                                                             \
            ptrdiff_t k = 0;                                                      \
            while (x[k] != m) k++;                                                \
            p->idx[oi] = k;                                                       \
        }                                                                         \
        return;                                                                   \
    }                                                                             \
    TY m[LR_COL_W];                                                               \
    for (int c = 0; c < w; c++) m[c] = x[c];                                      \
    for (ptrdiff_t r = 1; r < R; r++) {                                           \
        const TY *xr = x + r * I;                                                 \
        if (mx) {                                                                 \
            _Pragma("omp simd")                                                   \
            for (int c = 0; c < w; c++) m[c] = xr[c] > m[c] ? xr[c] : m[c];       \
        } else {                                                                  \
            _Pragma("omp simd")                                                   \
            for (int c = 0; c < w; c++) m[c] = xr[c] < m[c] ? xr[c] : m[c];       \
        }                                                                         \
    }                                                                             \
    for (int c = 0; c < w; c++) y[c] = m[c];                                      \
    if (p->idx) {                                                                 \
        int64_t *at = p->idx + oi;                                                \
        for (int c = 0; c < w; c++) at[c] = -1;                                   \
        for (ptrdiff_t r = 0; r < R; r++) {                                       \
            const TY *xr = x + r * I;                                             \
            for (int c = 0; c < w; c++)                                           \
                at[c] = (at[c] < 0 && xr[c] == m[c]) ? (int64_t)r : at[c];        \
        }                                                                         \
    }                                                                             \
}

LRI_DEF(i8, int8_t)
LRI_DEF(i16, int16_t)
LRI_DEF(i32, int32_t)
LRI_DEF(i64, int64_t)
LRI_DEF(u8, uint8_t)
LRI_DEF(f32, float)      /* all / any only */
LRI_DEF(f64, double)     /* all / any only */

/* An lri result of the plan's type at v (int64 for sum and prod, uint8 for all and
 * any, the element type for max and min) widened to int64, and back. */
static int64_t lri_get(const lucid_red_plan *p, const void *v)
{
    if (p->op == LR_SUM || p->op == LR_PROD) return *(const int64_t *)v;
    if (p->op == LR_ALL || p->op == LR_ANY) return *(const uint8_t *)v;
    switch (p->dbl) {
    case LR_T_I8: return *(const int8_t *)v;
    case LR_T_I16: return *(const int16_t *)v;
    case LR_T_I32: return *(const int32_t *)v;
    case LR_T_I64: return *(const int64_t *)v;
    default: return *(const uint8_t *)v;
    }
}

static void lri_put(const lucid_red_plan *p, void *y, int64_t v)
{
    if (p->op == LR_SUM || p->op == LR_PROD) { *(int64_t *)y = v; return; }
    if (p->op == LR_ALL || p->op == LR_ANY) { *(uint8_t *)y = (uint8_t)v; return; }
    switch (p->dbl) {
    case LR_T_I8: *(int8_t *)y = (int8_t)v; break;
    case LR_T_I16: *(int16_t *)y = (int16_t)v; break;
    case LR_T_I32: *(int32_t *)y = (int32_t)v; break;
    case LR_T_I64: *(int64_t *)y = v; break;
    default: *(uint8_t *)y = (uint8_t)v; break;
    }
}

static size_t lri_size(int dbl)
{
    return dbl == LR_T_F64 || dbl == LR_T_I64 ? 8 : dbl == LR_T_F32 || dbl == LR_T_I32 ? 4
         : dbl == LR_T_I16 ? 2 : 1;
}

static void lri_piece(lucid_red_plan *p, ptrdiff_t piece)
{
    void (*run)(const lucid_red_plan *, ptrdiff_t, ptrdiff_t, int) =
        p->dbl == LR_T_I8 ? lri_run_i8 : p->dbl == LR_T_I16 ? lri_run_i16
        : p->dbl == LR_T_I32 ? lri_run_i32 : p->dbl == LR_T_I64 ? lri_run_i64
        : p->dbl == LR_T_U8 ? lri_run_u8 : p->dbl == LR_T_F64 ? lri_run_f64 : lri_run_f32;
    if (p->kind == LR_KIND_ROWS) {
        ptrdiff_t r0 = piece * p->per, r1 = r0 + p->per < p->outer ? r0 + p->per : p->outer;
        for (ptrdiff_t r = r0; r < r1; r++) run(p, r, 0, 1);
    } else if (p->kind == LR_KIND_FULL) {
        /* block `piece` as a one-row problem of its own; lri_step combines the blocks */
        ptrdiff_t s0 = piece * LR_BLOCK;
        lucid_red_plan q = *p;
        int64_t val = 0, at = 0;
        q.x = (const char *)p->x + (size_t)s0 * lri_size(p->dbl);
        q.red = p->red - s0 < LR_BLOCK ? p->red - s0 : LR_BLOCK;
        q.y = &val;
        q.idx = p->idx ? &at : NULL;
        run(&q, 0, 0, 1);
        p->ipart[piece] = lri_get(p, &val);
        p->ipart[p->nblocks + piece] = s0 + at;
    } else {
        ptrdiff_t nch = (p->inner + LR_COL_W - 1) / LR_COL_W;
        ptrdiff_t o = piece / nch, c0 = (piece % nch) * LR_COL_W;
        run(p, o, c0, (int)(p->inner - c0 < LR_COL_W ? p->inner - c0 : LR_COL_W));
    }
}

/* A full lri reduction from its blocks, in block order: sums and products wrap in
 * uint64 (any order gives the same), max / min keep the first best block (its index
 * is the first occurrence, blocks being in order). */
static void lri_step(lucid_red_plan *p)
{
    if (p->kind == LR_KIND_FULL) {
        const int64_t *v = p->ipart, *at = p->ipart + p->nblocks;
        uint64_t a = p->op == LR_PROD || p->op == LR_ALL;
        int64_t m = v[0], k = at[0];
        for (ptrdiff_t b = 0; b < p->nblocks; b++) {
            switch (p->op) {
            case LR_SUM: a += (uint64_t)v[b]; break;
            case LR_PROD: a *= (uint64_t)v[b]; break;
            case LR_ALL: a &= v[b] != 0; break;
            case LR_ANY: a |= v[b] != 0; break;
            default:
                if (p->op == LR_MAX ? v[b] > m : v[b] < m) { m = v[b]; k = at[b]; }
            }
        }
        lri_put(p, p->y, p->op == LR_MAX || p->op == LR_MIN ? m : (int64_t)a);
        if (p->idx) p->idx[0] = k;
    }
    p->phase++;
}

void lucid_red_piece(void *plan, ptrdiff_t piece)
{
    lucid_red_plan *p = (lucid_red_plan *)plan;
    if (lr_is_lri(p)) lri_piece(p, piece);
    else if (p->dbl) lr_piece(p, piece);
    else lr_piecef(p, piece);
}

void lucid_red_step(lucid_red_plan *p)
{
    if (lr_is_lri(p)) lri_step(p);
    else if (p->dbl) lr_step(p);
    else lr_stepf(p);
}

void lucid_xent_setup(lucid_xent_plan *p)
{
    ptrdiff_t P = p->n * p->inner;
    p->per = p->c >= LR_ROWS_PIECE ? 1 : LR_ROWS_PIECE / (p->c > 0 ? p->c : 1);
    p->npieces = (P + p->per - 1) / p->per;
    p->bad = p->oom = 0;
    p->wsum = (double)p->c;
    if (p->weight) {
        p->wsum = 0;
        for (ptrdiff_t j = 0; j < p->c; j++)
            p->wsum += p->dbl ? ((const double *)p->weight)[j] : ((const float *)p->weight)[j];
    }
}

void lucid_xent_piece(void *plan, ptrdiff_t piece)
{
    lucid_xent_plan *p = (lucid_xent_plan *)plan;
    if (p->dbl) lr_xent_piece(p, piece);
    else lr_xent_piecef(p, piece);
}

void lucid_red_free(lucid_red_plan *p)
{
    free(p->part);
    free(p->ipart);
    p->part = NULL;
    p->ipart = NULL;
}
