/*
 * lucid_reduce.c -- the reduction kernels behind lucid_vforce.h: pairwise sums and fills.
 */
#include <stddef.h>

#include "lucid_vforce.h"
#include "lucid_simd.h"   /* LV_CLONES */

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
