/*
 * lucid_vforce.h -- the one C header the Cython layer sees.
 *
 * Every CPU math entry point has Apple vForce's shape:
 *
 *     void lucid_v<name>f(float  *y, const float  *x, const int *n);   // float32
 *     void lucid_v<name> (double *y, const double *x, const int *n);   // float64
 *
 * and every differentiable one has a fused single-pass backward kernel
 *
 *     void lucid_v<name>_gradf(float *gx, const float *g, const float *s, const int *n);
 *
 * where s is the tensor the op saves (its input x or its output y). Ops with a
 * zero gradient (floor, sign, ...) have no backward kernel.
 *
 * On macOS the forward entry points of the rows in optable.ACCELERATE are
 * Accelerate's vForce functions; elsewhere they are lucid's own loops in
 * src/lucid_vforce.c, which gcc turns into calls to glibc's vector math library
 * (libmvec) with SSE / AVX2 / AVX-512 clones chosen once at load time. The
 * macOS branch cannot be built on our Linux machines and is untested.
 */
#ifndef LUCID_VFORCE_H
#define LUCID_VFORCE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Declare the forward, float32 and float64, and the fused backward kernels. */
#define LV_DECLARE(name)                                                        \
    void lucid_v##name##f(float *y, const float *x, const int *n);              \
    void lucid_v##name(double *y, const double *x, const int *n);               \
    void lucid_v##name##_gradf(float *gx, const float *g, const float *s,       \
                               const int *n);                                   \
    void lucid_v##name##_grad(double *gx, const double *g, const double *s,     \
                              const int *n);

/* The unary op list; one line per op (kept in step with lucid/_core/optable.py). */
#include "lucid_unary_list.h"
#define LV_DECLARE_FWD(name)                                                    \
    void lucid_v##name##f(float *y, const float *x, const int *n);              \
    void lucid_v##name(double *y, const double *x, const int *n);
#define LV_OP_X(name, ffn, dfn, grad) LV_DECLARE(name)
#define LV_OP_Y(name, ffn, dfn, grad) LV_DECLARE(name)
#define LV_OP_0(name, ffn, dfn, grad) LV_DECLARE_FWD(name)
LUCID_UNARY_OPS
#undef LV_OP_X
#undef LV_OP_Y
#undef LV_OP_0

/* Binary ops (src/lucid_binary.c): z = f(a, b) over n elements, and one fused
 * backward writing ga and/or gb (either may be NULL) from g, a, b and the saved
 * output y (read only by the ops whose formula needs it). `bc` says which
 * operand, if any, is a single value broadcast over all n elements. */
enum { LV_BC_NONE = 0, LV_BC_A = 1, LV_BC_B = 2 };
#define LV_DECLARE_BINARY(name)                                                 \
    void lucid_v##name##f(float *z, const float *a, const float *b,             \
                          const int *n, int bc);                                \
    void lucid_v##name(double *z, const double *a, const double *b,             \
                       const int *n, int bc);                                   \
    void lucid_v##name##_gradf(float *ga, float *gb, const float *g,            \
                               const float *a, const float *b, const float *y,  \
                               const int *n, int bc);                           \
    void lucid_v##name##_grad(double *ga, double *gb, const double *g,          \
                              const double *a, const double *b, const double *y, \
                              const int *n, int bc);
LV_DECLARE_BINARY(pow)
LV_DECLARE_BINARY(atan2)
LV_DECLARE_BINARY(hypot)
LV_DECLARE_BINARY(maximum)
LV_DECLARE_BINARY(minimum)
LV_DECLARE_BINARY(logaddexp)
LV_DECLARE_BINARY(xlogy)

/* Element-wise ops with parameters (src/lucid_vforce.c, driven by unary.pyx): y = f(x; p)
 * and gx = g f'(x; p), p pointing at two doubles. */
#define LV_DECLARE_PARAM(name)                                                  \
    void lucid_v##name##f(float *y, const float *x, const int *n, const double *p); \
    void lucid_v##name(double *y, const double *x, const int *n, const double *p); \
    void lucid_v##name##_gradf(float *gx, const float *g, const float *s,       \
                               const int *n, const double *p);                  \
    void lucid_v##name##_grad(double *gx, const double *g, const double *s,     \
                              const int *n, const double *p);
LV_DECLARE_PARAM(hardtanh)
LV_DECLARE_PARAM(celu)
LV_DECLARE_PARAM(softplus_beta)
LV_DECLARE_PARAM(polygamma)

/* y = -x (also neg's backward). */
void lucid_vnegf(float *y, const float *x, const int *n);
void lucid_vneg(double *y, const double *x, const int *n);

/* Full reductions of contiguous data, accumulated in double (pairwise). */
double lucid_sumf(const float *x, ptrdiff_t n);
double lucid_sum(const double *x, ptrdiff_t n);

/* Reductions and row-wise ops over one run of axes of a C-contiguous array seen as
 * (O, R, I): O outer blocks, R reduced elements, I inner elements (I == 1: rows).
 * A plan is set up once, then runs phase by phase; each phase is npieces
 * independent pieces (lucid_red_piece has lucid_pool.h's piece signature) that
 * may run on any threads, and lucid_red_step combines them. Pieces and the order
 * of every sum depend on (op, O, R, I) only, never on the thread count. */
#include <stdint.h>
enum { LR_SUM = 0, LR_MAX = 1, LR_MIN = 2, LR_LSE = 3, LR_SOFTMAX = 4, LR_LOGSOFTMAX = 5,
       LR_SUMSQ = 6,        /* sum((x - center)^2), center per result (NULL: 0) */
       LR_ASUM = 7,         /* sum(|x|) */
       LR_PROD = 8,         /* the product, in double */
       LR_CUMSUM = 9, LR_CUMPROD = 10,     /* along R, in double; y is O*R*I */
       LR_MEAN = 11,        /* the sum / R */
       LR_NORM2 = 12,       /* sqrt(sum(x^2)); flag = 1 where a result may have lost
                               accuracy to over- or underflow of the squares */
       LR_SOFTMAX_BWD = 13, /* x = softmax's y, g: y (g - sum(g y)); y is O*R*I */
       LR_LOGSOFTMAX_BWD = 14,  /* x = log_softmax's y, g: g - exp(x) sum(g) */
       LR_LSE_BWD = 15,     /* x, center = logsumexp's O*I results, g = their O*I
                               gradients: g exp(x - center); y is O*R*I */
       LR_ALL = 16, LR_ANY = 17 };   /* y: O*I bools (uint8) */
/* Element types of lucid_red_plan.dbl beyond float (0) and double (1): the integer
 * ops (sum and prod into int64, cumsum, cumprod, max, min, all, any) and bool (all,
 * any, max, min). */
enum { LR_T_F32 = 0, LR_T_F64 = 1, LR_T_I8 = 2, LR_T_I16 = 3, LR_T_I32 = 4, LR_T_I64 = 5,
       LR_T_U8 = 6 };
typedef struct {
    int op;                 /* LR_* */
    int dbl;                /* element type: LR_T_* (1: double, 0: float) */
    const void *x;
    void *y;                /* O*I results, or O*R*I for (log_)softmax, cumsum, cumprod */
    const void *g;          /* the backward ops' output gradient, or NULL */
    int64_t *idx;           /* LR_MAX / LR_MIN: O*I indices along R, or NULL */
    ptrdiff_t outer, red, inner;   /* O, R, I */
    const void *center;     /* LR_SUMSQ: O*I values of x's type, or NULL */
    /* set by lucid_red_setup */
    int kind, phase, nphases;
    ptrdiff_t npieces, per, nblocks;
    double *part;           /* per-block partial results of a full reduction */
    int64_t *ipart;
    double shift, total;
    int flag;               /* LR_NORM2: set by a piece (see above) */
} lucid_red_plan;
int lucid_red_setup(lucid_red_plan *p);      /* 0, or -1 when out of memory */
void lucid_red_piece(void *plan, ptrdiff_t piece);
void lucid_red_step(lucid_red_plan *p);      /* after a phase: combine, next phase */
void lucid_red_free(lucid_red_plan *p);

/* Cross entropy over the class dim of logits seen as (N, C, I) (C classes, N*I
 * positions), fused with its gradient. Each position has target weights a[0:C] --
 * a class index k: (1 - ls) w[k] at k plus ls/C w[j] at every j; probabilities q:
 * w[j] ((1 - ls) q[j] + ls/C) -- and A = sum(a); then
 *     loss = A logsumexp(x) - sum(a x),   d loss / d x = A softmax(x) - a.
 * Positions whose index is ignore_index get 0. Positions are split into npieces
 * pieces fixed by the shape, and a position's results depend on its values only. */
typedef struct {
    int dbl;                /* 1: double, 0: float */
    const void *x;          /* logits, C-contiguous */
    const int64_t *target;  /* N*I class indices, or NULL (then prob) */
    const void *prob;       /* class probabilities laid out as x, or NULL */
    const void *weight;     /* C class weights, or NULL */
    ptrdiff_t n, c, inner;
    int64_t ignore_index;
    double smoothing;
    void *loss;             /* N*I losses, x's type */
    double *denom;          /* N*I target weights (index targets; 0 where ignored), or NULL */
    void *grad;             /* d loss[position] / d x, laid out as x, or NULL */
    /* set by lucid_xent_setup; bad / oom are raised by the pieces */
    ptrdiff_t npieces, per;
    double wsum;
    int bad, oom;
} lucid_xent_plan;
void lucid_xent_setup(lucid_xent_plan *p);
void lucid_xent_piece(void *plan, ptrdiff_t piece);

/* Fill y[0:n] with v. */
void lucid_fillf(float *y, float v, ptrdiff_t n);
void lucid_fill(double *y, double v, ptrdiff_t n);
/* The same fill in pieces of LUCID_FILL_PIECE elements, for lucid's pool
 * (lucid_fill_piece has lucid_pool.h's piece signature). */
#define LUCID_FILL_PIECE 32768
typedef struct {
    void *y;
    double v;               /* a float's value, for float */
    ptrdiff_t n;
    int dbl;                /* 1: double, 0: float */
} lucid_fill_plan;
void lucid_fill_piece(void *plan, ptrdiff_t piece);

/* Human-readable name of the kernel variant chosen at load time. */
const char *lucid_isa(void);
const char *lucid_mathlib(void);

#ifdef __cplusplus
}
#endif

#endif /* LUCID_VFORCE_H */
