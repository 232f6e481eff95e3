/* Fused optimizer updates: one pass over a parameter, its gradient and its state.
 *
 * Each function reads p[i], g[i] and the state at i, and writes p[i] and the state
 * back, in the order of operations PyTorch's single-tensor (CPU) implementation uses,
 * in the parameter's own precision (float32 math for float32), so 20 steps agree
 * with torch to rounding. `gsign` is +1, or -1 for maximize=True (exact).
 * Built without the fast-math flags and with -ffp-contract=off: no FMA contraction that
 * torch's kernels would not do either.
 */
#ifndef LUCID_OPTIM_H
#define LUCID_OPTIM_H
#include <stddef.h>

#define LUCID_OPTIM_DECLARE(T, SFX)                                                     \
void lucid_sgd_##SFX(T *p, const T *g, T *buf, ptrdiff_t n, T lr, T weight_decay,      \
                     T momentum, T one_m_damp, int nesterov, int first, T gsign);      \
void lucid_adam_##SFX(T *p, const T *g, T *m, T *v, T *vmax, ptrdiff_t n, T w1,        \
                      T beta2, T w2, T eps, T weight_decay, int decoupled, T decay,    \
                      T step_size, T bc2_sqrt, T gsign);                               \
void lucid_rmsprop_##SFX(T *p, const T *g, T *sq, T *gavg, T *buf, ptrdiff_t n, T lr,  \
                         T alpha, T w, T eps, T weight_decay, T momentum, T gsign);    \
void lucid_adagrad_##SFX(T *p, const T *g, T *sum, ptrdiff_t n, T clr, T eps,          \
                         T weight_decay, T gsign);

LUCID_OPTIM_DECLARE(float, f32)
LUCID_OPTIM_DECLARE(double, f64)

#endif
