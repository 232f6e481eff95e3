"""The compare family: comparisons, logical ops and predicates (bool results, never
differentiable; rows of ``optable.COMPARE``), and where, which is differentiable in its
two values.
"""
cimport numpy as cnp

import numpy as np

from lucid._core.core cimport *
from lucid._core.core import LucidError, ShapeError, UnsupportedDTypeError, export, ops, register

cnp.import_array()

cdef DType bool_ = dtype_of_code(DT_BOOL)
cdef DType int64 = dtype_of_code(DT_INT64)
cdef tuple _NO_EDGE = (None, 0)


cdef class UfuncCPU(Kernel):
    """A NumPy ufunc as the CPU kernel of one or two operands."""
    cdef object ufunc

    cdef object run1(self, cnp.ndarray x, object params):
        return self.ufunc(x)

    cdef object run2(self, object a, object b, DType dt, object params):
        return self.ufunc(a, b)


cdef UfuncCPU _ufunc_kernel(object ufunc):
    cdef UfuncCPU k = UfuncCPU.__new__(UfuncCPU)
    k.ufunc = ufunc
    return k


# -- lucid's own kernels (src/lucid_compare.c) over the 2-D broadcasts of _bcast2d.pxi --

cdef extern from *:
    """
    void lucid_cmp_f32(int, unsigned char *, const float *, const float *, ptrdiff_t,
                       ptrdiff_t, const ptrdiff_t *);
    void lucid_cmp_f64(int, unsigned char *, const double *, const double *, ptrdiff_t,
                       ptrdiff_t, const ptrdiff_t *);
    void lucid_where(int, void *, const unsigned char *, const void *, const void *,
                     ptrdiff_t, ptrdiff_t, const ptrdiff_t *);
    """
    void lucid_cmp_f32(int, cnp.npy_bool *, const float *, const float *, Py_ssize_t,
                       Py_ssize_t, const Py_ssize_t *) noexcept nogil
    void lucid_cmp_f64(int, cnp.npy_bool *, const double *, const double *, Py_ssize_t,
                       Py_ssize_t, const Py_ssize_t *) noexcept nogil
    void lucid_where(int, void *, const cnp.npy_bool *, const void *, const void *,
                     Py_ssize_t, Py_ssize_t, const Py_ssize_t *) noexcept nogil

include "_bcast2d.pxi"

# the comparisons' op codes in src/lucid_compare.c
cdef dict _CMP_CODE = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5}


cdef void _cmp_run(void *job, char *z, const char **p, Py_ssize_t m, Py_ssize_t n) noexcept nogil:
    cdef _Job2D *j = <_Job2D *>job
    if j.isz[0] == 4:
        lucid_cmp_f32(j.op, <cnp.npy_bool *>z, <const float *>p[0], <const float *>p[1], m, n, j.st)
    else:
        lucid_cmp_f64(j.op, <cnp.npy_bool *>z, <const double *>p[0], <const double *>p[1], m, n,
                      j.st)


cdef void _where_run(void *job, char *z, const char **p, Py_ssize_t m, Py_ssize_t n) noexcept nogil:
    cdef _Job2D *j = <_Job2D *>job
    lucid_where(<int>j.isz[1], z, <const cnp.npy_bool *>p[0], p[1], p[2], m, n, j.st)


cdef class CompareCPU(Kernel):
    """A comparison's CPU forward: lucid's kernel for float32 / float64 operands in the
    layouts of _bcast2d.pxi, else the NumPy ufunc (other dtypes, other layouts)."""
    cdef object ufunc
    cdef int op

    cdef object run2(self, object a, object b, DType dt, object params):
        cdef cnp.ndarray xa, xb
        cdef _Job2D j
        if dt.typenum == cnp.NPY_FLOAT or dt.typenum == cnp.NPY_DOUBLE:
            xa, xb = _as_ndarray(a), _as_ndarray(b)
            if cnp.PyArray_TYPE(xa) == dt.typenum and cnp.PyArray_TYPE(xb) == dt.typenum:
                arrs = (xa, xb)
                shape = _bshape_of(arrs)
                if _plan2d(shape, arrs, &j):
                    j.run, j.op = _cmp_run, self.op
                    return _go2d(&j, shape, cnp.NPY_BOOL)
        return self.ufunc(a, b)


cdef CompareCPU _cmp_kernel(str name, object ufunc):
    cdef CompareCPU k = CompareCPU.__new__(CompareCPU)
    k.ufunc = ufunc
    k.op = _CMP_CODE[name]
    return k


cdef object _where_cpu(cnp.ndarray c, object a, object b, DType dt):
    """where(c, a, b) on the CPU: lucid's select for the layouts of _bcast2d.pxi (any
    dtype: it copies bits), else NumPy's."""
    cdef cnp.ndarray xa = _as_ndarray(a), xb = _as_ndarray(b)
    cdef _Job2D j
    if cnp.PyArray_TYPE(c) == cnp.NPY_BOOL and cnp.PyArray_TYPE(xa) == dt.typenum and \
            cnp.PyArray_TYPE(xb) == dt.typenum and cnp.PyArray_ITEMSIZE(xa) in (1, 2, 4, 8):
        arrs = (c, xa, xb)
        shape = _bshape_of(arrs)
        if _plan2d(shape, arrs, &j):
            j.run = _where_run
            return _go2d(&j, shape, dt.typenum)
    return np.where(c, a, b)


include "_compare.pxi"


cdef OpSchema _S_bitwise_not = register("bitwise_not", "KeepInput", 1)


def bitwise_not(input):
    """~input for integer and bool tensors."""
    cdef Tensor x = _as_tensor_dev(input)
    if x._dtype.is_floating_point:
        raise UnsupportedDTypeError(f"bitwise_not needs an integer or bool tensor, got {x._dtype}")
    if x._mx is not None:
        m = mlx()
        return _wrap_mx(m.logical_not(x._mx) if x._dtype is bool_ else m.bitwise_invert(x._mx),
                        x._dtype)
    return _wrap(_as_ndarray(np.invert(x._data)), x._dtype)


cdef tuple _host_pair(str op, object input, object other):
    """Both operands' values on the host, for the ops that answer one Python bool: the
    answer needs the values wherever they are (as torch's does); two tensors on two
    devices raise."""
    cdef Tensor a = _as_tensor_dev(input), b = _as_tensor_dev(other)
    if isinstance(input, Tensor) and isinstance(other, Tensor) and \
            (a._mx is None) != (b._mx is None):
        raise LucidError(f"Expected all tensors to be on the same device, but lucid.{op}() "
                         "got tensors on gpu and cpu; move one with .gpu() or .cpu()")
    return a.numpy(force=True), b.numpy(force=True)


def equal(input, other):
    """True if both tensors have the same shape and elements."""
    a, b = _host_pair("equal", input, other)
    return a.shape == b.shape and bool(np.array_equal(a, b))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True if |input - other| <= atol + rtol |other| everywhere."""
    a, b = _host_pair("allclose", input, other)
    return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


# -- where --------------------------------------------------------------------------

cdef OpSchema _S_where = register("where", "Promote", 2)


cdef class WhereBackward(Node):
    """Backward of where(cond, a, b): grad_a = g where cond else 0, grad_b = g where not cond
    (summed back over broadcast dims)."""
    schema_v1 = _S_where
    cdef Tensor _cond
    cdef tuple _shape_a, _shape_b
    cdef DType _dt_a, _dt_b

    def grad_formula_impl(self, g):
        ga = gb = None
        if self._next[0][0] is not None:
            ga = to_dtype(_sum_to_t(where(self._cond, g, 0.0), self._shape_a), self._dt_a, False)
        if self._next[1][0] is not None:
            gb = to_dtype(_sum_to_t(where(self._cond, 0.0, g), self._shape_b), self._dt_b, False)
        return (ga, gb)


_S_where._bind(WhereBackward)


def where(condition, input=None, other=None):
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (broadcast).
    With only ``condition``, the indices of its nonzero elements (a tuple per dim)."""
    cdef Tensor c = _as_tensor_dev(condition)
    if input is None and other is None:
        if c._mx is not None:
            raise LucidError("where(condition) (nonzero) does not run on the gpu device: its "
                             "result's size depends on the values; use condition.cpu()")
        return tuple(_wrap(_as_ndarray(i).astype(np.int64), int64) for i in np.nonzero(c._data))
    if c._dtype is not bool_:
        raise UnsupportedDTypeError(f"where expected a bool condition, got {c._dtype}")
    cdef Tensor ta = <Tensor>input if isinstance(input, Tensor) else None
    cdef Tensor tb = <Tensor>other if isinstance(other, Tensor) else None
    sa = None if ta is not None else input
    sb = None if tb is not None else other
    if ta is None and not _is_scalar(sa):
        ta = _as_tensor_dev(sa)
        sa = None
    if tb is None and not _is_scalar(sb):
        tb = _as_tensor_dev(sb)
        sb = None
    cdef DType dt = dtype_of_code(_result_code(ta, sa, tb, sb) if (ta is not None or tb is not None)
                                  else _promote2(_scalar_code(sa), _scalar_code(sb)))
    cdef bint gpu = c._mx is not None
    cdef Tensor out
    if gpu or (ta is not None and ta._mx is not None) or (tb is not None and tb._mx is not None):
        if not gpu or (ta is not None and ta._mx is None) or (tb is not None and tb._mx is None):
            raise LucidError("where(): expected condition, input and other on the same device, "
                             "got tensors on gpu and cpu")
        m = mlx()
        try:
            r = m.where(c._mx, _mx_of(ta if ta is not None else sa, dt),
                        _mx_of(tb if tb is not None else sb, dt))
        except ValueError as e:
            raise ShapeError(f"where: shapes do not broadcast: {e}") from None
        out = _wrap_mx(r, dt)
    else:
        try:
            r = _where_cpu(c._data, _operand(ta, sa, dt), _operand(tb, sb, dt), dt)
        except ValueError as e:
            raise ShapeError(f"where: shapes do not broadcast: {e}") from None
        out = _wrap(_as_ndarray(r).astype(dt.numpy_dtype, copy=False), dt)
    cdef WhereBackward node
    if grad_enabled() and ((ta is not None and ta._requires_grad) or
                           (tb is not None and tb._requires_grad)):
        node = <WhereBackward>record(_S_where, out, (ta, tb), None)
        node._cond = (_wrap_mx(mlx().broadcast_to(c._mx, _shp(out._data)), bool_) if gpu
                      else _wrap(np.broadcast_to(c._data, _shp(out._data)), bool_))
        if ta is not None:
            node._shape_a, node._dt_a = _shp(ta._data), ta._dtype
        if tb is not None:
            node._shape_b, node._dt_b = _shp(tb._data), tb._dtype
    return out


export(bitwise_not, method=True)
export(equal, method=True)
export(allclose, method=True)
# x.where(condition, y) is where(condition, x, y), as PyTorch's Tensor.where
export(where, method=lambda self, condition, other: where(condition, self, other))


# -- bitwise ops: integer and bool tensors, torch's promotion, never differentiable -----

cdef class BitwiseCPU(Kernel):
    """A NumPy bitwise ufunc; floating operands are refused, as torch does."""
    cdef object ufunc
    cdef str name

    cdef object run2(self, object a, object b, DType dt, object params):
        if dt.is_floating_point:
            raise UnsupportedDTypeError(f"{self.name} is only supported for integer and bool "
                                        f"tensors, got {dt}")
        if dt is bool_ and self.name.endswith("shift"):
            raise UnsupportedDTypeError(f"{self.name} is not implemented for bool tensors")
        return self.ufunc(a, b)


cdef OpSchema _bitwise_schema(str name, object ufunc):
    cdef OpSchema s = register(name, "KeepInput", 2)
    cdef BitwiseCPU k = BitwiseCPU.__new__(BitwiseCPU)
    k.ufunc = ufunc
    k.name = name
    s.cpu = k
    return s


cdef OpSchema _S_bitwise_and = _bitwise_schema("bitwise_and", np.bitwise_and)
cdef OpSchema _S_bitwise_or = _bitwise_schema("bitwise_or", np.bitwise_or)
cdef OpSchema _S_bitwise_xor = _bitwise_schema("bitwise_xor", np.bitwise_xor)
cdef OpSchema _S_bitwise_left_shift = _bitwise_schema("bitwise_left_shift", np.left_shift)
cdef OpSchema _S_bitwise_right_shift = _bitwise_schema("bitwise_right_shift", np.right_shift)


def bitwise_and(input, other):
    """input & other: bitwise for integers, logical for bool."""
    return dispatch_binary(_S_bitwise_and, input, other, None)


def bitwise_or(input, other):
    """input | other: bitwise for integers, logical for bool."""
    return dispatch_binary(_S_bitwise_or, input, other, None)


def bitwise_xor(input, other):
    """input ^ other: bitwise for integers, logical for bool."""
    return dispatch_binary(_S_bitwise_xor, input, other, None)


def bitwise_left_shift(input, other):
    """input << other for integer tensors (arithmetic shift)."""
    return dispatch_binary(_S_bitwise_left_shift, input, other, None)


def bitwise_right_shift(input, other):
    """input >> other for integer tensors (arithmetic shift: the sign is kept)."""
    return dispatch_binary(_S_bitwise_right_shift, input, other, None)


for _fn in (bitwise_and, bitwise_or, bitwise_xor, bitwise_left_shift, bitwise_right_shift):
    export(_fn, method=True)
