# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Fused optimizer steps: thin typed wrappers over lucid_optim.c.

Each wrapper takes flat C-contiguous NumPy arrays (a parameter's storage from
``t.detach().numpy()``, its gradient and its state, all of one dtype), releases the
GIL and runs one pass. It is independent of lucid's core extension on purpose.
The scalars arrive as Python floats (double) and are rounded to the array's
precision once, as torch rounds its Python-float arguments.
"""
from cython cimport floating

cdef extern from "lucid_optim.h" nogil:
    void lucid_sgd_f32(float *p, const float *g, float *buf, Py_ssize_t n, float lr,
                       float weight_decay, float momentum, float one_m_damp, int nesterov,
                       int first, float gsign)
    void lucid_sgd_f64(double *p, const double *g, double *buf, Py_ssize_t n, double lr,
                       double weight_decay, double momentum, double one_m_damp, int nesterov,
                       int first, double gsign)
    void lucid_adam_f32(float *p, const float *g, float *m, float *v, float *vmax,
                        Py_ssize_t n, float w1, float beta2, float w2, float eps,
                        float weight_decay, int decoupled, float decay, float step_size,
                        float bc2_sqrt, float gsign)
    void lucid_adam_f64(double *p, const double *g, double *m, double *v, double *vmax,
                        Py_ssize_t n, double w1, double beta2, double w2, double eps,
                        double weight_decay, int decoupled, double decay, double step_size,
                        double bc2_sqrt, double gsign)
    void lucid_rmsprop_f32(float *p, const float *g, float *sq, float *gavg, float *buf,
                           Py_ssize_t n, float lr, float alpha, float w, float eps,
                           float weight_decay, float momentum, float gsign)
    void lucid_rmsprop_f64(double *p, const double *g, double *sq, double *gavg, double *buf,
                           Py_ssize_t n, double lr, double alpha, double w, double eps,
                           double weight_decay, double momentum, double gsign)
    void lucid_adagrad_f32(float *p, const float *g, float *s, Py_ssize_t n, float clr,
                           float eps, float weight_decay, float gsign)
    void lucid_adagrad_f64(double *p, const double *g, double *s, Py_ssize_t n, double clr,
                           double eps, double weight_decay, double gsign)


cdef inline floating *_ptr(floating[::1] a) noexcept nogil:
    return &a[0] if a.shape[0] else NULL


cdef inline void _same_len(Py_ssize_t n, floating[::1] a, str what) except *:
    if a.shape[0] != n:
        raise ValueError(f"fused optimizer: {what} has {a.shape[0]} elements, expected {n}")


def sgd(floating[::1] p, floating[::1] g, floating[::1] buf, double lr, double weight_decay,
        double momentum, double dampening, bint nesterov, bint first, bint maximize):
    """SGD with momentum/dampening/nesterov/weight decay; ``buf`` may be empty when
    momentum is 0. ``first``: the momentum buffer is initialised to the gradient."""
    cdef Py_ssize_t n = p.shape[0]
    _same_len(n, g, "grad")
    if momentum != 0:
        _same_len(n, buf, "momentum_buffer")
    cdef double gs = -1.0 if maximize else 1.0
    cdef double omd = 1.0 - dampening
    with nogil:
        if floating is float:
            lucid_sgd_f32(&p[0] if n else NULL, _ptr(g), _ptr(buf), n, <float>lr,
                          <float>weight_decay, <float>momentum, <float>omd, nesterov, first,
                          <float>gs)
        else:
            lucid_sgd_f64(&p[0] if n else NULL, _ptr(g), _ptr(buf), n, lr, weight_decay,
                          momentum, omd, nesterov, first, gs)


def adam(floating[::1] p, floating[::1] g, floating[::1] m, floating[::1] v,
         floating[::1] vmax, double lr, double beta1, double beta2, double eps,
         double weight_decay, bint decoupled, long long step, bint amsgrad, bint maximize):
    """Adam (``decoupled=False``) or AdamW (``decoupled=True``) at step ``step`` (already
    incremented); ``vmax`` is used only with amsgrad."""
    cdef Py_ssize_t n = p.shape[0]
    _same_len(n, g, "grad")
    _same_len(n, m, "exp_avg")
    _same_len(n, v, "exp_avg_sq")
    if amsgrad:
        _same_len(n, vmax, "max_exp_avg_sq")
    cdef double bc1 = 1.0 - beta1 ** step
    cdef double bc2 = 1.0 - beta2 ** step
    cdef double step_size = lr / bc1
    cdef double bc2_sqrt = bc2 ** 0.5
    cdef double decay = 1.0 - lr * weight_decay
    cdef double gs = -1.0 if maximize else 1.0
    cdef double w1 = 1.0 - beta1, w2 = 1.0 - beta2
    with nogil:
        if floating is float:
            lucid_adam_f32(_ptr(p), _ptr(g), _ptr(m), _ptr(v), _ptr(vmax) if amsgrad else NULL,
                           n, <float>w1, <float>beta2, <float>w2, <float>eps,
                           <float>weight_decay, decoupled, <float>decay, <float>step_size,
                           <float>bc2_sqrt, <float>gs)
        else:
            lucid_adam_f64(_ptr(p), _ptr(g), _ptr(m), _ptr(v), _ptr(vmax) if amsgrad else NULL,
                           n, w1, beta2, w2, eps, weight_decay, decoupled, decay, step_size,
                           bc2_sqrt, gs)


def rmsprop(floating[::1] p, floating[::1] g, floating[::1] sq, floating[::1] gavg,
            floating[::1] buf, double lr, double alpha, double eps, double weight_decay,
            double momentum, bint centered, bint maximize):
    cdef Py_ssize_t n = p.shape[0]
    _same_len(n, g, "grad")
    _same_len(n, sq, "square_avg")
    if centered:
        _same_len(n, gavg, "grad_avg")
    if momentum > 0:
        _same_len(n, buf, "momentum_buffer")
    cdef double gs = -1.0 if maximize else 1.0
    cdef double w = 1.0 - alpha
    with nogil:
        if floating is float:
            lucid_rmsprop_f32(_ptr(p), _ptr(g), _ptr(sq), _ptr(gavg) if centered else NULL,
                              _ptr(buf) if momentum > 0 else NULL, n, <float>lr, <float>alpha,
                              <float>w, <float>eps, <float>weight_decay, <float>momentum,
                              <float>gs)
        else:
            lucid_rmsprop_f64(_ptr(p), _ptr(g), _ptr(sq), _ptr(gavg) if centered else NULL,
                              _ptr(buf) if momentum > 0 else NULL, n, lr, alpha, w, eps,
                              weight_decay, momentum, gs)


def adagrad(floating[::1] p, floating[::1] g, floating[::1] s, double clr, double eps,
            double weight_decay, bint maximize):
    cdef Py_ssize_t n = p.shape[0]
    _same_len(n, g, "grad")
    _same_len(n, s, "sum")
    cdef double gs = -1.0 if maximize else 1.0
    with nogil:
        if floating is float:
            lucid_adagrad_f32(_ptr(p), _ptr(g), _ptr(s), n, <float>clr, <float>eps,
                              <float>weight_decay, <float>gs)
        else:
            lucid_adagrad_f64(_ptr(p), _ptr(g), _ptr(s), n, clr, eps, weight_decay, gs)
