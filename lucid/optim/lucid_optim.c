/* Fused optimizer kernels (see lucid_optim.h). One template, two precisions.
 *
 * Every loop vectorises on every clone: the arrays of one call never overlap
 * (restrict); state that is read and written only in some configurations (momentum
 * buffers, amsgrad's maximum, the centred average) gets a loop of its own; the other
 * choices are selects between computed values (built with -fno-unswitch-loops, so that
 * gcc keeps them: its unswitched copies of these loops were left scalar). */
#include <math.h>
#include "lucid_optim.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LUCID_OPTIM_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define LUCID_OPTIM_CLONES
#endif

/* torch's vectorised lerp of a towards b: fma(w, b - a, a) for w < 0.5, else
 * fma(w - 1, b - a, b) (one rounding, as torch's AVX2/AVX-512 kernels; fma is one
 * instruction on the clones that have it, elsewhere libm's correctly rounded fma). Both
 * are computed and one selected by ``lo`` = (w < 0.5), computed before the loop. */
#define LERP(T, FMA, a, b, w, lo) __extension__({                                       \
    T lerp_a_ = (a), lerp_b_ = (b), lerp_d_ = lerp_b_ - lerp_a_;                           \
    T lerp_lo_ = FMA((w), lerp_d_, lerp_a_), lerp_hi_ = FMA((w) - (T)1, lerp_d_, lerp_b_); \
    (lo) ? lerp_lo_ : lerp_hi_; })

/* The loop bodies, with the configuration flags as arguments that are constants where
 * each loop is written out. */
#define SGD_STEP(T, HAS_BUF)                                                                 \
    T d = gsign * g[i];                                                                     \
    T dw = d + weight_decay * p[i];                                                         \
    d = l2 ? dw : d;                                                                        \
    if (HAS_BUF) {                                                                          \
        T b = buf[i] * momentum + one_m_damp * d;                                           \
        b = first ? d : b;                                                                  \
        buf[i] = b;                                                                         \
        T dn = d + momentum * b;                                                            \
        d = nesterov ? dn : b;                                                              \
    }                                                                                       \
    p[i] = p[i] + (-lr) * d;

#define ADAM_STEP(T, SQRT, FMA, AMS)                                                         \
    T gi = gsign * g[i], pi = p[i];                                                         \
    T gl = gi + weight_decay * pi, pd = pi * decay;                                         \
    gi = l2 ? gl : gi;                                                                      \
    pi = dw ? pd : pi;                                                                      \
    T mi = LERP(T, FMA, m[i], gi, w1, lo);                                                      \
    T vi = v[i] * beta2 + w2 * gi * gi;                                                     \
    m[i] = mi;                                                                              \
    v[i] = vi;                                                                              \
    T s = vi;                                                                               \
    if (AMS) {                                                                              \
        s = vmax[i] > vi ? vmax[i] : vi;                                                    \
        vmax[i] = s;                                                                        \
    }                                                                                       \
    T denom = SQRT(s) / bc2_sqrt + eps;                                                     \
    p[i] = pi + (-step_size) * mi / denom;

#define RMSPROP_STEP(T, SQRT, FMA, CENTERED, HAS_BUF)                                        \
    T gi = gsign * g[i];                                                                    \
    T gw = gi + weight_decay * p[i];                                                        \
    gi = l2 ? gw : gi;                                                                      \
    T s = sq[i] * alpha + w * gi * gi;                                                      \
    sq[i] = s;                                                                              \
    T avg;                                                                                  \
    if (CENTERED) {                                                                         \
        T ga = LERP(T, FMA, gavg[i], gi, w, lo);                                                \
        gavg[i] = ga;                                                                       \
        avg = SQRT(s + (T)(-1) * (ga * ga)) + eps;                                          \
    } else {                                                                                \
        avg = SQRT(s) + eps;                                                                \
    }                                                                                       \
    if (HAS_BUF) {                                                                          \
        T b = buf[i] * momentum + gi / avg;                                                 \
        buf[i] = b;                                                                         \
        p[i] = p[i] + (-lr) * b;                                                            \
    } else {                                                                                \
        p[i] = p[i] + (-lr) * gi / avg;                                                     \
    }

#define LOOP for (ptrdiff_t i = 0; i < n; i++)

#define LUCID_OPTIM_DEFINE(T, SFX, SQRT, FMA)                                                \
LUCID_OPTIM_CLONES void lucid_sgd_##SFX(T *restrict p, const T *restrict g, T *restrict buf,\
                                        ptrdiff_t n, T lr, T weight_decay, T momentum,      \
                                        T one_m_damp, int nesterov, int first, T gsign)     \
{                                                                                           \
    const int l2 = weight_decay != 0;                                                       \
    if (momentum != 0) LOOP { SGD_STEP(T, 1) }                                              \
    else LOOP { SGD_STEP(T, 0) }                                                            \
}                                                                                           \
                                                                                            \
LUCID_OPTIM_CLONES void lucid_adam_##SFX(T *restrict p, const T *restrict g, T *restrict m, \
                                         T *restrict v, T *restrict vmax, ptrdiff_t n,      \
                                         T w1, T beta2, T w2, T eps, T weight_decay,        \
                                         int decoupled, T decay, T step_size, T bc2_sqrt,   \
                                         T gsign)                                           \
{                                                                                           \
    const int l2 = weight_decay != 0 && !decoupled, dw = weight_decay != 0 && decoupled;    \
    const int lo = w1 < (T)0.5;                                                             \
    if (vmax) LOOP { ADAM_STEP(T, SQRT, FMA, 1) }                                           \
    else LOOP { ADAM_STEP(T, SQRT, FMA, 0) }                                                \
}                                                                                           \
                                                                                            \
LUCID_OPTIM_CLONES void lucid_rmsprop_##SFX(T *restrict p, const T *restrict g,             \
                                            T *restrict sq, T *restrict gavg,               \
                                            T *restrict buf, ptrdiff_t n, T lr, T alpha,    \
                                            T w, T eps, T weight_decay, T momentum,         \
                                            T gsign)                                        \
{                                                                                           \
    const int l2 = weight_decay != 0, lo = w < (T)0.5;                                      \
    if (gavg && buf) LOOP { RMSPROP_STEP(T, SQRT, FMA, 1, 1) }                              \
    else if (gavg) LOOP { RMSPROP_STEP(T, SQRT, FMA, 1, 0) }                                \
    else if (buf) LOOP { RMSPROP_STEP(T, SQRT, FMA, 0, 1) }                                 \
    else LOOP { RMSPROP_STEP(T, SQRT, FMA, 0, 0) }                                          \
}                                                                                           \
                                                                                            \
LUCID_OPTIM_CLONES void lucid_adagrad_##SFX(T *restrict p, const T *restrict g,             \
                                            T *restrict sum, ptrdiff_t n, T clr, T eps,     \
                                            T weight_decay, T gsign)                        \
{                                                                                           \
    const int l2 = weight_decay != 0;                                                       \
    LOOP {                                                                                  \
        T gi = gsign * g[i];                                                                \
        T gw = gi + weight_decay * p[i];                                                    \
        gi = l2 ? gw : gi;                                                                  \
        T s = sum[i] + (T)1 * gi * gi;                                                      \
        sum[i] = s;                                                                         \
        p[i] = p[i] + (-clr) * gi / (SQRT(s) + eps);                                        \
    }                                                                                       \
}

LUCID_OPTIM_DEFINE(float, f32, sqrtf, fmaf)
LUCID_OPTIM_DEFINE(double, f64, sqrt, fma)
