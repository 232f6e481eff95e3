/* Fused optimizer kernels (see lucid_optim.h). One template, two precisions. The arrays
 * of one call never overlap (restrict), so every loop vectorises. */
#include <math.h>
#include "lucid_optim.h"

/* torch's vectorised lerp: fma(w, b - a, a) for w < 0.5, else fma(w - 1, b - a, b) (one
 * rounding, as torch's AVX2/AVX-512 kernels). The clones below make fma one instruction
 * where the CPU has it; elsewhere it is libm's correctly rounded fma, same result. */
#define LERP(T, FMA, a, b, w) ((w) < (T)0.5 ? FMA((w), (b) - (a), (a)) : FMA((w) - (T)1, (b) - (a), (b)))

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LUCID_OPTIM_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define LUCID_OPTIM_CLONES
#endif

#define LUCID_OPTIM_DEFINE(T, SFX, SQRT, FMA)                                                 \
LUCID_OPTIM_CLONES void lucid_sgd_##SFX(T *restrict p, const T *restrict g, T *restrict buf, ptrdiff_t n, T lr, T weight_decay,       \
                     T momentum, T one_m_damp, int nesterov, int first, T gsign)        \
{                                                                                        \
    for (ptrdiff_t i = 0; i < n; i++) {                                                  \
        T d = gsign * g[i];                                                              \
        if (weight_decay != 0) d = d + weight_decay * p[i];                              \
        if (momentum != 0) {                                                             \
            T b = first ? d : buf[i] * momentum + one_m_damp * d;                \
            buf[i] = b;                                                                  \
            d = nesterov ? d + momentum * b : b;                                         \
        }                                                                                \
        p[i] = p[i] + (-lr) * d;                                                         \
    }                                                                                    \
}                                                                                        \
                                                                                         \
/* The per-element choices are selects between computed values, and amsgrad (which reads   \
 * and writes vmax) has a loop of its own, so that both loops vectorise on every clone. */   \
LUCID_OPTIM_CLONES void lucid_adam_##SFX(T *restrict p, const T *restrict g, T *restrict m, \
                      T *restrict v, T *restrict vmax, ptrdiff_t n, T w1,                 \
                      T beta2, T w2, T eps, T weight_decay, int decoupled, T decay,     \
                      T step_size, T bc2_sqrt, T gsign)                                 \
{                                                                                        \
    const int l2 = weight_decay != 0 && !decoupled, dw = weight_decay != 0 && decoupled; \
    const int lo = w1 < (T)0.5;                                                          \
    const T w1m = w1 - (T)1;                                                             \
    if (vmax == NULL) for (ptrdiff_t i = 0; i < n; i++) {                                \
        T gi = gsign * g[i], pi = p[i], wp = weight_decay * pi;                          \
        T pd = pi * decay, gl = gi + wp;                                                 \
        pi = dw ? pd : pi;                                                               \
        gi = l2 ? gl : gi;                                                               \
        T d = gi - m[i];                                                                 \
        T ma = FMA(w1, d, m[i]), mb = FMA(w1m, d, gi);                                   \
        T mi = lo ? ma : mb;                                                             \
        T vi = v[i] * beta2 + w2 * gi * gi;                                              \
        m[i] = mi;                                                                       \
        v[i] = vi;                                                                       \
        T denom = SQRT(vi) / bc2_sqrt + eps;                                             \
        p[i] = pi + (-step_size) * mi / denom;                                           \
    }                                                                                    \
    else for (ptrdiff_t i = 0; i < n; i++) {                                             \
        T gi = gsign * g[i], pi = p[i], wp = weight_decay * pi;                          \
        T pd = pi * decay, gl = gi + wp;                                                 \
        pi = dw ? pd : pi;                                                               \
        gi = l2 ? gl : gi;                                                               \
        T d = gi - m[i];                                                                 \
        T ma = FMA(w1, d, m[i]), mb = FMA(w1m, d, gi);                                   \
        T mi = lo ? ma : mb;                                                             \
        T vi = v[i] * beta2 + w2 * gi * gi;                                              \
        m[i] = mi;                                                                       \
        v[i] = vi;                                                                       \
        T s = vmax[i] > vi ? vmax[i] : vi;                                               \
        vmax[i] = s;                                                                     \
        T denom = SQRT(s) / bc2_sqrt + eps;                                              \
        p[i] = pi + (-step_size) * mi / denom;                                           \
    }                                                                                    \
}                                                                                        \
                                                                                         \
LUCID_OPTIM_CLONES void lucid_rmsprop_##SFX(T *restrict p, const T *restrict g, T *restrict sq, T *restrict gavg, T *restrict buf, ptrdiff_t n, T lr,   \
                         T alpha, T w, T eps, T weight_decay, T momentum, T gsign)      \
{                                                                                        \
    for (ptrdiff_t i = 0; i < n; i++) {                                                  \
        T gi = gsign * g[i];                                                             \
        if (weight_decay != 0) gi = gi + weight_decay * p[i];                            \
        T s = sq[i] * alpha + w * gi * gi;                                             \
        sq[i] = s;                                                                       \
        T avg;                                                                           \
        if (gavg) {                                                                      \
            T ga = LERP(T, FMA, gavg[i], gi, w);                                                 \
            gavg[i] = ga;                                                                \
            avg = SQRT(s + (T)(-1) * (ga * ga)) + eps;                                   \
        } else {                                                                         \
            avg = SQRT(s) + eps;                                                         \
        }                                                                                \
        if (buf) {                                                                       \
            T b = buf[i] * momentum + gi / avg;                                          \
            buf[i] = b;                                                                  \
            p[i] = p[i] + (-lr) * b;                                                     \
        } else {                                                                         \
            p[i] = p[i] + (-lr) * gi / avg;                                              \
        }                                                                                \
    }                                                                                    \
}                                                                                        \
                                                                                         \
LUCID_OPTIM_CLONES void lucid_adagrad_##SFX(T *restrict p, const T *restrict g, T *restrict sum, ptrdiff_t n, T clr, T eps,           \
                         T weight_decay, T gsign)                                       \
{                                                                                        \
    for (ptrdiff_t i = 0; i < n; i++) {                                                  \
        T gi = gsign * g[i];                                                             \
        if (weight_decay != 0) gi = gi + weight_decay * p[i];                            \
        T s = sum[i] + (T)1 * gi * gi;                                                          \
        sum[i] = s;                                                                      \
        p[i] = p[i] + (-clr) * gi / (SQRT(s) + eps);                                     \
    }                                                                                    \
}

LUCID_OPTIM_DEFINE(float, f32, sqrtf, fmaf)
LUCID_OPTIM_DEFINE(double, f64, sqrt, fma)
