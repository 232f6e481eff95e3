/*
 * lucid_reduce.c -- the reduction kernels behind lucid_vforce.h: pairwise sums, fills,
 * and the reduction plans (sum, max/min with their indices, logsumexp, softmax,
 * log_softmax over rows, columns or everything; see lucid_reduce_tpl.h).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "lucid_vforce.h"
#include "lucid_simd.h"   /* LV_CLONES */

LV_SIMD_PAIR(exp)

/* ---- reductions -------------------------------------------------------- */

/* Pairwise summation: leaves of 256 elements summed in the element type by 64
 * independent lanes (4 AVX-512 / 8 AVX2 registers, so the adds do not wait on each
 * other), the lanes then folded pairwise; leaves combined as a binary tree in
 * double. The order depends only on n, not on the vector width of the clone that
 * runs, so a sum is the same on every machine and for any split into pieces. */
#define LV_SUM_LEAF 256
#define LV_SUM_LANES 64
#define LV_SUM(fname, TYPE)                                                     \
    LV_CLONES static double fname##_leaf(const TYPE *x, ptrdiff_t n)            \
    {                                                                           \
        TYPE acc[LV_SUM_LANES] = {0};                                           \
        ptrdiff_t i = 0;                                                        \
        for (; i + LV_SUM_LANES <= n; i += LV_SUM_LANES) {                      \
            _Pragma("omp simd")                                                 \
            for (int l = 0; l < LV_SUM_LANES; l++) acc[l] += x[i + l];          \
        }                                                                       \
        const TYPE *xt = x + i;                                                 \
        int rest = (int)(n - i);                                                \
        _Pragma("omp simd")                                                     \
        for (int l = 0; l < rest; l++) acc[l] += xt[l];                         \
        for (int h = LV_SUM_LANES / 2; h >= 1; h /= 2) {                        \
            _Pragma("omp simd")                                                 \
            for (int l = 0; l < h; l++) acc[l] += acc[l + h];                   \
        }                                                                       \
        return (double)acc[0];                                                  \
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

#define T float
#define LR(name) lr_##name##f
#define LR_SUMN lucid_sumf
#define EXPT expf
#include "lucid_reduce_tpl.h"
#undef T
#undef LR
#undef LR_SUMN
#undef EXPT

#define T double
#define LR(name) lr_##name
#define LR_SUMN lucid_sum
#define EXPT exp
#include "lucid_reduce_tpl.h"
#undef T
#undef LR
#undef LR_SUMN
#undef EXPT

int lucid_red_setup(lucid_red_plan *p)
{
    p->phase = 0;
    p->nphases = 1;
    p->part = NULL;
    p->ipart = NULL;
    p->nblocks = 0;
    p->shift = p->total = 0;
    if (p->inner > 1) {
        p->kind = LR_KIND_COLS;
        p->npieces = p->outer * ((p->inner + LR_COL_W - 1) / LR_COL_W);
    } else if (p->outer > 1 || p->red <= LR_BLOCK) {
        p->kind = LR_KIND_ROWS;
        p->per = p->red >= LR_ROWS_PIECE ? 1 : LR_ROWS_PIECE / (p->red > 0 ? p->red : 1);
        p->npieces = (p->outer + p->per - 1) / p->per;
    } else {
        p->kind = LR_KIND_FULL;
        p->nblocks = p->npieces = (p->red + LR_BLOCK - 1) / LR_BLOCK;
        p->part = malloc(sizeof(double) * (size_t)p->nblocks);
        p->ipart = malloc(sizeof(int64_t) * (size_t)p->nblocks);
        if (!p->part || !p->ipart) {
            lucid_red_free(p);
            return -1;
        }
        p->nphases = p->op == LR_LSE ? 2 : (p->op == LR_SOFTMAX || p->op == LR_LOGSOFTMAX) ? 3 : 1;
    }
    return 0;
}

void lucid_red_piece(void *plan, ptrdiff_t piece)
{
    lucid_red_plan *p = (lucid_red_plan *)plan;
    if (p->dbl) lr_piece(p, piece);
    else lr_piecef(p, piece);
}

void lucid_red_step(lucid_red_plan *p)
{
    if (p->dbl) lr_step(p);
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
