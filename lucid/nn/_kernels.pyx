# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Window kernels of lucid.nn: thin wrappers over lucid_nn.c.

They work on C-contiguous NumPy arrays (N, C, H, W) of float32 or float64, release the
GIL, and are independent of lucid's core (lucid.nn._im2col records the nodes):

* ``im2col(x, geometry)`` -> (C*kh*kw, N*oh*ow) columns, zeros where a window reaches
  into the padding;
* ``col2im(cols, geometry)`` -> (N, C, H, W), the adjoint (sums overlapping windows);
* ``max_pool(x, geometry)`` -> (values, flat index of each window's first maximum);
* ``max_pool_grad(g, arg, geometry)`` -> the gradient w.r.t. x.

``geometry`` is (n, c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow).
"""
cimport numpy as cnp
import numpy as np

cnp.import_array()

cdef extern from "lucid_nn.h" nogil:
    ctypedef struct lucid_win:
        Py_ssize_t n, c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow
    void lucid_im2col_f32(const float *x, float *cols, const lucid_win *w)
    void lucid_im2col_f64(const double *x, double *cols, const lucid_win *w)
    void lucid_col2im_f32(const float *cols, float *gx, const lucid_win *w)
    void lucid_col2im_f64(const double *cols, double *gx, const lucid_win *w)
    void lucid_maxpool_f32(const float *x, float *y, cnp.int64_t *arg, const lucid_win *w)
    void lucid_maxpool_f64(const double *x, double *y, cnp.int64_t *arg, const lucid_win *w)
    void lucid_maxpool_grad_f32(const float *g, const cnp.int64_t *arg, float *gx,
                                const lucid_win *w)
    void lucid_maxpool_grad_f64(const double *g, const cnp.int64_t *arg, double *gx,
                                const lucid_win *w)


cdef lucid_win _geometry(tuple geo) except *:
    cdef lucid_win w
    (w.n, w.c, w.h, w.w, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, w.ph, w.pw, w.oh, w.ow) = geo
    return w


cdef cnp.ndarray _check(cnp.ndarray a, tuple shape, str what):
    if cnp.PyArray_TYPE(a) != cnp.NPY_FLOAT and cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE:
        raise TypeError(f"{what} must be float32 or float64, got {a.dtype}")
    if (<object>a).shape != shape:
        raise ValueError(f"{what} has shape {(<object>a).shape}, expected {shape}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(a) or not cnp.PyArray_ISALIGNED(a):
        a = np.ascontiguousarray(a)
    return a


def im2col(cnp.ndarray x not None, tuple geo):
    cdef lucid_win w = _geometry(geo)
    x = _check(x, (w.n, w.c, w.h, w.w), "im2col input")
    cdef cnp.ndarray cols = np.empty((w.c * w.kh * w.kw, w.n * w.oh * w.ow), dtype=x.dtype)
    with nogil:
        if cnp.PyArray_TYPE(x) == cnp.NPY_FLOAT:
            lucid_im2col_f32(<float *>cnp.PyArray_DATA(x), <float *>cnp.PyArray_DATA(cols), &w)
        else:
            lucid_im2col_f64(<double *>cnp.PyArray_DATA(x), <double *>cnp.PyArray_DATA(cols), &w)
    return cols


def col2im(cnp.ndarray cols not None, tuple geo):
    cdef lucid_win w = _geometry(geo)
    cols = _check(cols, (w.c * w.kh * w.kw, w.n * w.oh * w.ow), "col2im columns")
    cdef cnp.ndarray gx = np.zeros((w.n, w.c, w.h, w.w), dtype=cols.dtype)
    with nogil:
        if cnp.PyArray_TYPE(cols) == cnp.NPY_FLOAT:
            lucid_col2im_f32(<float *>cnp.PyArray_DATA(cols), <float *>cnp.PyArray_DATA(gx), &w)
        else:
            lucid_col2im_f64(<double *>cnp.PyArray_DATA(cols), <double *>cnp.PyArray_DATA(gx),
                             &w)
    return gx


def max_pool(cnp.ndarray x not None, tuple geo):
    cdef lucid_win w = _geometry(geo)
    x = _check(x, (w.n, w.c, w.h, w.w), "max_pool input")
    cdef cnp.ndarray y = np.empty((w.n, w.c, w.oh, w.ow), dtype=x.dtype)
    cdef cnp.ndarray arg = np.empty((w.n, w.c, w.oh, w.ow), dtype=np.int64)
    with nogil:
        if cnp.PyArray_TYPE(x) == cnp.NPY_FLOAT:
            lucid_maxpool_f32(<float *>cnp.PyArray_DATA(x), <float *>cnp.PyArray_DATA(y),
                              <cnp.int64_t *>cnp.PyArray_DATA(arg), &w)
        else:
            lucid_maxpool_f64(<double *>cnp.PyArray_DATA(x), <double *>cnp.PyArray_DATA(y),
                              <cnp.int64_t *>cnp.PyArray_DATA(arg), &w)
    return y, arg


def max_pool_grad(cnp.ndarray g not None, cnp.ndarray arg not None, tuple geo):
    cdef lucid_win w = _geometry(geo)
    g = _check(g, (w.n, w.c, w.oh, w.ow), "max_pool gradient")
    if cnp.PyArray_TYPE(arg) != cnp.NPY_INT64 or (<object>arg).shape != (w.n, w.c, w.oh, w.ow) \
            or not cnp.PyArray_IS_C_CONTIGUOUS(arg):
        raise ValueError("max_pool_grad: arg must be the C-contiguous int64 indices of max_pool")
    cdef cnp.ndarray gx = np.zeros((w.n, w.c, w.h, w.w), dtype=g.dtype)
    with nogil:
        if cnp.PyArray_TYPE(g) == cnp.NPY_FLOAT:
            lucid_maxpool_grad_f32(<float *>cnp.PyArray_DATA(g),
                                   <cnp.int64_t *>cnp.PyArray_DATA(arg),
                                   <float *>cnp.PyArray_DATA(gx), &w)
        else:
            lucid_maxpool_grad_f64(<double *>cnp.PyArray_DATA(g),
                                   <cnp.int64_t *>cnp.PyArray_DATA(arg),
                                   <double *>cnp.PyArray_DATA(gx), &w)
    return gx
