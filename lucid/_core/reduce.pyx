"""The reduce family: reductions (sum, mean, prod, max/min, var/std, norm, ...),
cumulative ops and the row-wise softmax / log_softmax.

Schemas, exports and Tensor methods come from the rows of ``optable.REDUCTIONS``
(the generated ``_reduce.pxi``); each op's forward and node are below. Every op goes
through core's dispatcher: prepare() applies the row's integer rule and AMP policy,
record() attaches the node, which keeps the input's shape, the reduced axes and
keepdim, and what the row saves.
"""
cimport numpy as cnp
import builtins
from collections import namedtuple

import numpy as np

from lucid._core.core cimport *
from lucid._core.core import (ArgumentError, LucidError, ShapeError, UnsupportedDTypeError, export,
                              ops, register)

cnp.import_array()

cdef DType bool_ = dtype_of_code(DT_BOOL)
cdef DType int64 = dtype_of_code(DT_INT64)
cdef DType float16 = dtype_of_code(DT_FLOAT16)
cdef DType float32 = dtype_of_code(DT_FLOAT32)

cdef extern from "lucid_vforce.h" nogil:
    enum:
        LUCID_FILL_PIECE
    ctypedef struct lucid_fill_plan:
        void *y
        double v
        Py_ssize_t n
        int dbl
    void lucid_fill_piece(void *plan, Py_ssize_t piece)
    enum:
        LR_SUM
        LR_MAX
        LR_MIN
        LR_LSE
        LR_SOFTMAX
        LR_LOGSOFTMAX
        LR_SUMSQ
        LR_ASUM
        LR_PROD
        LR_CUMSUM
        LR_CUMPROD
        LR_MEAN
        LR_NORM2
        LR_SOFTMAX_BWD
        LR_LOGSOFTMAX_BWD
        LR_LSE_BWD
        LR_ALL
        LR_ANY
        LR_T_F32
        LR_T_F64
        LR_T_I8
        LR_T_I16
        LR_T_I32
        LR_T_I64
        LR_T_U8
    ctypedef struct lucid_red_plan:
        int op, dbl
        const void *x
        void *y
        const void *g
        cnp.npy_int64 *idx
        Py_ssize_t outer, red, inner
        const void *center
        int phase, nphases
        Py_ssize_t npieces
        int flag
    int lucid_red_setup(lucid_red_plan *p)
    void lucid_red_piece(void *plan, Py_ssize_t piece)
    void lucid_red_step(lucid_red_plan *p)
    void lucid_red_free(lucid_red_plan *p)
    double lucid_sumf(const float *x, Py_ssize_t n)
    double lucid_sum(const double *x, Py_ssize_t n)
    ctypedef struct lucid_xent_plan:
        int dbl
        const void *x
        const cnp.npy_int64 *target
        const void *prob
        const void *weight
        Py_ssize_t n, c, inner
        cnp.npy_int64 ignore_index
        double smoothing
        void *loss
        double *denom
        void *grad
        Py_ssize_t npieces
        int bad, oom
    void lucid_xent_setup(lucid_xent_plan *p)
    void lucid_xent_piece(void *plan, Py_ssize_t piece)

# Below this many elements, releasing the GIL costs more than the kernel.
cdef enum:
    _NOGIL_MIN = 8192


# -- lucid's reduction kernels (src/lucid_reduce.c) ------------------------------------
# A C-contiguous float32/float64 array reduced over one run of consecutive axes (one
# axis, or all of them) is seen as (O, R, I): R reduced elements between O outer and
# I inner ones. The kernels split it into pieces that depend on the shape only and run
# them on lucid's pool, so results are bitwise the same for any thread count. Other
# dtypes, layouts and axis sets go through NumPy.

cdef int _run_plan_nogil(lucid_red_plan *p, int nt) noexcept nogil:
    if lucid_red_setup(p) != 0:
        return -1
    while p.phase < p.nphases:
        _parallel_for(lucid_red_piece, p, p.npieces, nt)
        lucid_red_step(p)
    lucid_red_free(p)
    return 0


cdef int _elem_type(int num) noexcept:
    """The kernels' element type (LR_T_*) of a NumPy type number, or -1."""
    if num == cnp.NPY_FLOAT:
        return LR_T_F32
    if num == cnp.NPY_DOUBLE:
        return LR_T_F64
    if num == cnp.NPY_BYTE:
        return LR_T_I8
    if num == cnp.NPY_SHORT:
        return LR_T_I16
    if num == cnp.NPY_INT:
        return LR_T_I32
    if num == cnp.NPY_LONG or num == cnp.NPY_LONGLONG:
        return LR_T_I64 if sizeof(long) == 8 or num == cnp.NPY_LONGLONG else LR_T_I32
    if num == cnp.NPY_UBYTE or num == cnp.NPY_BOOL:
        return LR_T_U8
    return -1


cdef inline cnp.ndarray _aligned(cnp.ndarray a):
    """a, or an aligned copy (the kernels read typed pointers; same result)."""
    return a if cnp.PyArray_ISALIGNED(a) else np.array(a, copy=True)


cdef object _kernel_reduce(int op, cnp.ndarray a, tuple axes, bint keepdim, bint want_idx,
                           cnp.ndarray center=None, cnp.ndarray g=None):
    """(values, indices or None) from lucid's kernels, or None where they do not apply.
    ``axes``: sorted axes (None: all). (log_)softmax, cumsum, cumprod and the backward
    ops get one axis (or all, for LR_LSE_BWD) and return a's shape.
    Float32/float64 inputs: every op. Integer and bool inputs: sum and prod (into
    int64), cumsum and cumprod (int64), max and min (a's dtype), all and any (bool).
    ``center``: LR_SUMSQ's value per result (a C-contiguous array of a's dtype with the
    result's size, e.g. the mean), or None for 0; LR_LSE_BWD's logsumexp per result.
    ``g``: the backward ops' output gradient (a's shape, or one per result for
    LR_LSE_BWD). LR_NORM2 returns (values, flag) instead: flag set where the result
    may have lost accuracy to over- or underflow of the squares."""
    cdef int num = cnp.PyArray_TYPE(a)
    cdef int nd = cnp.PyArray_NDIM(a)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(a)
    cdef Py_ssize_t O = 1, R = 1, I = 1
    cdef int lo, hi, k, rc
    cdef int et = _elem_type(num)
    cdef lucid_red_plan p
    cdef bint floating = et == LR_T_F32 or et == LR_T_F64
    if et < 0 or nd == 0 or n == 0 or not cnp.PyArray_IS_C_CONTIGUOUS(a):
        return None
    if not floating and op not in (LR_SUM, LR_PROD, LR_CUMSUM, LR_CUMPROD, LR_MAX, LR_MIN,
                                   LR_ALL, LR_ANY):
        return None
    a = _aligned(a)
    if axes is None:
        lo, hi = 0, nd
    else:
        lo, hi = axes[0], axes[len(axes) - 1] + 1
        if hi - lo != len(axes):
            return None
    shape = _shp(a)
    for k in range(nd):
        if k < lo:
            O *= shape[k]
        elif k < hi:
            R *= shape[k]
        else:
            I *= shape[k]
    if op in (LR_SOFTMAX, LR_LOGSOFTMAX, LR_CUMSUM, LR_CUMPROD, LR_SOFTMAX_BWD,
              LR_LOGSOFTMAX_BWD, LR_LSE_BWD):
        out_shape = shape
    elif keepdim:
        out_shape = shape[:lo] + (1,) * (hi - lo) + shape[hi:]
    else:
        out_shape = shape[:lo] + shape[hi:]
    if op == LR_ALL or op == LR_ANY:
        out_dt = np.bool_
    elif not floating and op != LR_MAX and op != LR_MIN:
        out_dt = np.int64
    else:
        out_dt = a.dtype
    out = np.empty(out_shape, dtype=out_dt)
    idx = np.empty(out_shape, dtype=np.int64) if want_idx else None
    p.op, p.dbl = op, et
    p.x, p.y = cnp.PyArray_DATA(a), cnp.PyArray_DATA(out)
    p.idx = <cnp.npy_int64 *>cnp.PyArray_DATA(idx) if want_idx else NULL
    p.outer, p.red, p.inner = O, R, I
    p.center = NULL
    p.g = NULL
    if center is not None:
        if cnp.PyArray_TYPE(center) != num or cnp.PyArray_SIZE(center) != O * I \
                or not cnp.PyArray_IS_C_CONTIGUOUS(center) or not cnp.PyArray_ISALIGNED(center):
            raise ArgumentError("reduction kernel: center must be a contiguous array of the "
                                "input's dtype with one value per result")
        p.center = cnp.PyArray_DATA(center)
    if op == LR_SOFTMAX_BWD or op == LR_LOGSOFTMAX_BWD or op == LR_LSE_BWD:
        if g is None or cnp.PyArray_TYPE(g) != num or not cnp.PyArray_IS_C_CONTIGUOUS(g) \
                or cnp.PyArray_SIZE(g) != (O * I if op == LR_LSE_BWD else n) \
                or (op == LR_LSE_BWD and center is None):
            raise ArgumentError("reduction kernel: the backward ops need a contiguous gradient "
                                "of the input's dtype (and logsumexp's results)")
        g = _aligned(g)
        p.g = cnp.PyArray_DATA(g)
    cdef int nt = _threads_for(n)
    if n < _NOGIL_MIN:
        rc = _run_plan_nogil(&p, 1)
    else:
        with nogil:
            rc = _run_plan_nogil(&p, nt)
    if rc != 0:
        raise MemoryError("reduction: out of memory for the partial results")
    if op == LR_NORM2:
        return out, p.flag
    return out, idx

include "_reduce.pxi"

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


cdef class ReduceBackward(Node):
    """Shared part of the reduction nodes: the input's shape and dtype, the reduced
    axes (None: all), keepdim, and the input and/or output as the row says."""
    cdef tuple _in_shape, _axes
    cdef bint _keepdim
    cdef DType _in_dtype
    cdef SavedTensor _saved_x, _saved_y

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        cdef Tensor x = <Tensor>inputs[0]
        self._in_shape = _shp(x._data)
        self._axes, self._keepdim = params
        self._in_dtype = x._dtype
        if s.saves_input:
            self._saved_x = _save(x, False)
        if s.saves_output:
            self._saved_y = _save(out, True)

    cdef list _saved_list(self):
        return [s for s in (self._saved_x, self._saved_y) if s is not None]

    cdef tuple _graph(self, Tensor g):
        x = self._saved_x.unpack(self) if self._saved_x is not None else None
        y = self._saved_y.unpack(self) if self._saved_y is not None else None
        return (to_dtype(_as_tensor_dev(self.grad_formula_impl(g, x, y)), self._in_dtype, False),)

    cdef object _k(self, object a):
        """An output-shaped array/tensor with the reduced axes put back (size 1)."""
        if self._keepdim:
            return a
        shape = _keepdim_shape(self._in_shape, self._axes)
        if isinstance(a, Tensor):
            return ops.reshape(a, shape)
        return np.reshape(a, shape)

    cdef object _x(self):
        return self._saved_x.data(self) if self._saved_x is not None else None

    cdef object _y(self):
        return self._saved_y.data(self) if self._saved_y is not None else None


cdef inline cnp.ndarray _compute_arr(Tensor x):
    """The array an op computes on: float16 and bfloat16 go through float32."""
    if _is_half_code(x._dtype.code):
        return _half_to_f32(x._data)
    return x._data


cdef inline bint _recording(Tensor x):
    return grad_enabled() and x._requires_grad


cdef Py_ssize_t _count(Tensor x, tuple axes):
    if axes is None:
        return cnp.PyArray_SIZE(x._data)
    cdef Py_ssize_t n = 1
    for a in axes:
        n *= _shp(x._data)[a]
    return n


# -- the gpu device --------------------------------------------------------------------
# A gpu tensor (x._mx is not None) is reduced by the matching mlx.core function, in the
# dtype the CPU path computes in (passed explicitly: MLX would otherwise turn float64
# into float32 and sum bools into int32); the node recorded is the CPU path's, and the
# engine runs its graph-mode formula on gpu gradients. Values of a gpu tensor are never
# read from x._data (it only carries shape and dtype).

cdef inline object _ax(tuple axes):
    """lucid's normalised axes as MLX's axis argument: None (all) or a list ([] for a
    0-d input, whose dim 0 is the tensor itself)."""
    return None if axes is None else list(axes)


cdef inline DType _acc(DType dt):
    """The dtype a reduction computes in: half types go through float32, as on the CPU."""
    return float32 if _is_half_code(dt.code) else dt


cdef object _mxa(Tensor x, DType dt):
    """x's MLX array in ``dt``."""
    return x._mx if x._dtype is dt else x._mx.astype(mx_dtype(dt))


cdef Tensor _out_mx(object r, DType dt):
    """A new gpu tensor of ``dt`` around the MLX result ``r`` (cast if needed)."""
    md = mx_dtype(dt)
    return _wrap_mx(r if r.dtype == md else r.astype(md), dt)


cdef object _mx_squeeze(object r, tuple in_shape, tuple axes):
    """A keepdims=True MLX result with the reduced axes dropped."""
    return r.reshape(tuple(n for i, n in enumerate(in_shape) if not (axes is None or i in axes)))


cdef object _mx_sum(Tensor x, DType dt, tuple axes, bint keepdim):
    """MLX's sum of x (in ``dt``) over ``axes``. MLX 0.32 returns an uninitialised value
    for the sum of an empty array over all axes (and 0 for its prod, False for all), so a
    reduction of an empty tensor is built from the identity instead (see _mx_identity)."""
    if cnp.PyArray_SIZE(x._data) == 0:
        return _mx_identity(x, axes, keepdim, 0, dt)
    return mlx().sum(_mxa(x, dt), axis=_ax(axes), keepdims=keepdim)


cdef object _mx_identity(Tensor x, tuple axes, bint keepdim, object value, DType dt):
    """The result of reducing the empty tensor x over ``axes``: ``value`` (the reduction's
    identity) in every element of the output shape."""
    shape = _shp(x._data)
    if keepdim:
        out = _keepdim_shape(shape, axes)
    else:
        out = tuple(n for i, n in enumerate(shape) if not (axes is None or i in axes))
    return mlx().full(out, value, dtype=mx_dtype(dt))


cdef object _mx_exp(object a):
    """mx.exp, to float64 accuracy for float64 arrays: MLX 0.32's float64 exp on the CPU
    is only float32-accurate (5e-7 relative), its log is exact to 1 ulp, so one Newton
    step on log(y) = x (second order in the error) restores it. Non-finite steps (exp
    under- or overflowing, nan) keep MLX's value."""
    m = mlx()
    y = m.exp(a)
    if a.dtype != m.float64:
        return y
    e = a - m.log(y)
    return m.where(m.isfinite(e), y + y * (e + 0.5 * e * e), y)


cdef bint _has_zero(Tensor x) except -1:
    """Whether x holds a zero (a gpu tensor is evaluated for it)."""
    if x._mx is not None:
        return bool(mlx().any(x._mx == 0).item())
    return bool(np.any(x._data == 0))


# -- sum and mean ----------------------------------------------------------------------

cdef cnp.ndarray _fill_new(tuple shape, cnp.ndarray g):
    """A new C-contiguous array of ``shape`` with every element = the one value in ``g``."""
    cdef cnp.ndarray out = np.empty(shape, dtype=g.dtype)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(out)
    cdef int num = cnp.PyArray_TYPE(g)
    cdef lucid_fill_plan fp
    cdef int nt
    if num == cnp.NPY_FLOAT or num == cnp.NPY_DOUBLE:
        fp.y, fp.n, fp.dbl = cnp.PyArray_DATA(out), n, num == cnp.NPY_DOUBLE
        fp.v = (<double *>cnp.PyArray_DATA(g))[0] if fp.dbl else (<float *>cnp.PyArray_DATA(g))[0]
        if n < _NOGIL_MIN:
            lucid_fill_piece(&fp, 0)
        else:
            nt = _threads_for(n)
            with nogil:
                _parallel_for(lucid_fill_piece, &fp, (n + LUCID_FILL_PIECE - 1) // LUCID_FILL_PIECE, nt)
    else:
        out.fill(g.reshape(()).item() if cnp.PyArray_SIZE(g) == 1 else 0)
    return out


cdef cnp.ndarray _expand_grad(cnp.ndarray g, tuple in_shape, tuple axes, bint keepdim):
    """Broadcast a reduction's output gradient back over the reduced axes, into a new
    contiguous array (the fused kernel of sum's and mean's eager backward)."""
    if cnp.PyArray_SIZE(g) == 1 and cnp.PyArray_IS_C_CONTIGUOUS(g) and cnp.PyArray_ISALIGNED(g):
        return _fill_new(in_shape, g)
    if not keepdim:
        g = g.reshape(_keepdim_shape(in_shape, axes))
    out = np.empty(in_shape, dtype=g.dtype)
    out[...] = g
    return out


cdef class SumBackward(ReduceBackward):
    """Backward of sum: the output gradient broadcast back over the reduced dims."""
    schema_v1 = _S_sum

    cdef tuple _eager(self, cnp.ndarray g):
        return (_expand_grad(_store(g, self._in_dtype), self._in_shape, self._axes,
                             self._keepdim),)

    def grad_formula_impl(self, g, x, y):
        return ops.expand(self._k(g), self._in_shape)


cdef class MeanBackward(ReduceBackward):
    """Backward of mean: the output gradient / count, broadcast back over the reduced dims."""
    schema_v1 = _S_mean
    cdef double _count

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        ReduceBackward._setup(self, s, inputs, out, params)
        self._count = _count(<Tensor>inputs[0], self._axes)

    cdef tuple _eager(self, cnp.ndarray g):
        g = _store(g, self._in_dtype)
        g = _as_ndarray(np.true_divide(g, g.dtype.type(self._count)))
        return (_expand_grad(g, self._in_shape, self._axes, self._keepdim),)

    def grad_formula_impl(self, g, x, y):
        return ops.expand(self._k(g), self._in_shape) / self._count


cdef inline bint _kernel_dtype_ok(cnp.ndarray a, DType out_dt):
    """Whether the kernels' sum, prod, cumsum or cumprod of ``a`` has dtype ``out_dt``:
    a float32/float64 array into its own dtype, an integer or bool array into int64."""
    cdef int et = _elem_type(cnp.PyArray_TYPE(a))
    if et == LR_T_F32 or et == LR_T_F64:
        return out_dt.typenum == cnp.PyArray_TYPE(a)
    return et >= 0 and out_dt.code == DT_INT64


cdef cnp.ndarray _sum_array(cnp.ndarray a, tuple axes, bint keepdim, DType out_dt):
    """Sum with lucid's kernels (blocked pairwise, in an order fixed by the shape) for
    contiguous float arrays (integer and bool arrays summed into int64), NumPy's
    pairwise add.reduce otherwise."""
    if _kernel_dtype_ok(a, out_dt):
        r = _kernel_reduce(LR_SUM, a, axes, keepdim, False)
        if r is not None:
            return <cnp.ndarray>r[0]
    acc = np.float32 if _is_half_code(out_dt.code) else out_dt.numpy_dtype
    r = np.add.reduce(a, axis=axes, dtype=acc, keepdims=keepdim)
    return _as_ndarray(r).astype(out_dt.numpy_dtype, copy=False)


def _sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Sum over ``dim`` (int, tuple, or None for all), keeping reduced dims if ``keepdim``.
    Integer and bool inputs sum to int64, as in PyTorch."""
    dim = _np_alias("sum", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("sum", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = prepare(_S_sum, input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    cdef DType out_dt
    if dtype is not None:
        out_dt = as_dtype(dtype)
    elif x._dtype.is_floating_point:
        out_dt = x._dtype
    else:
        out_dt = int64
    cdef Tensor y
    if x._mx is not None:
        y = _out_mx(_mx_sum(x, _acc(out_dt), axes, keepdim), out_dt)
    else:
        y = _wrap(_sum_array(x._data, axes, keepdim, out_dt), out_dt)
    if _recording(x) and out_dt.is_floating_point:
        record(_S_sum, y, (x,), (axes, keepdim))
    return y


def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Mean over ``dim`` (int, tuple, or None for all). Needs a floating dtype, as in PyTorch."""
    dim = _np_alias("mean", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("mean", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor_dev(input)
    cdef DType out_dt = as_dtype(dtype) if dtype is not None else x._dtype
    if not out_dt.is_floating_point:
        raise UnsupportedDTypeError(
            f"mean(): could not infer output dtype. Input dtype must be a floating point "
            f"dtype, got {x._dtype}; pass dtype=lucid.float32 or convert the input")
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    cdef Py_ssize_t count = _count(x, axes)
    cdef Tensor y
    if x._mx is not None:
        mx_ = mlx()
        acc = mx_dtype(_acc(out_dt))
        s = _mx_sum(x, _acc(out_dt), axes, keepdim)
        y = _out_mx(s / mx_.array(count, dtype=acc), out_dt)       # 0 / 0 = nan, as on the CPU
    else:
        k = _kernel_reduce(LR_MEAN, x._data, axes, keepdim, False) \
            if out_dt.typenum == cnp.PyArray_TYPE(x._data) else None
        if k is not None:                  # the sum in x's dtype / count, in the kernel
            m = k[0]
        else:
            s = _sum_array(x._data, axes, keepdim,
                           float32 if _is_half_code(out_dt.code) else out_dt)
            with np.errstate(invalid="ignore", divide="ignore"):
                m = _as_ndarray(np.true_divide(s, s.dtype.type(count) if count else s.dtype.type(0)))
        y = _wrap(m.astype(out_dt.numpy_dtype, copy=False), out_dt)
    if _recording(x):
        record(_S_mean, y, (x,), (axes, keepdim))
    return y


# -- prod ------------------------------------------------------------------------------

cdef class ProdBackward(ReduceBackward):
    """Backward of prod: g times the product of all other elements. The eager kernel is
    exact with zeros (products of the elements before and after each one); the graph-mode
    formula divides by x and so refuses inputs with zeros."""
    schema_v1 = _S_prod

    cdef tuple _eager(self, cnp.ndarray g):
        x = self._x()
        if x.size == 0:
            return (np.zeros(self._in_shape, dtype=g.dtype),)
        if _fused_float(self._in_dtype):
            # Every product normal and finite, so no element is 0 or inf: g prod / x
            # (prod: the saved output), as PyTorch.
            yk = _as_ndarray(self._k(self._y())).astype(x.dtype, copy=False)
            if np.all(np.abs(yk) >= np.finfo(x.dtype).tiny) and np.all(np.abs(yk) < np.inf):
                f = _as_ndarray(np.multiply(self._k(_store(g, self._in_dtype)), yk))
                return (_as_ndarray(np.true_divide(f, x)),)
        axis = self._axes[0] if self._axes else None
        xs = x.reshape(-1) if axis is None else x
        ax = 0 if axis is None else axis
        ones_shape = list(_shp(xs))
        ones_shape[ax] = 1
        one = np.ones(ones_shape, dtype=xs.dtype)
        left = np.cumprod(np.concatenate([one, np.delete(xs, -1 + _shp(xs)[ax], axis=ax)], axis=ax), axis=ax)
        right = np.flip(np.cumprod(np.concatenate(
            [one, np.delete(np.flip(xs, ax), -1 + _shp(xs)[ax], axis=ax)], axis=ax), axis=ax), ax)
        others = (left * right).reshape(_shp(x))
        r = self._k(g) * others
        return (_store(np.broadcast_to(r, self._in_shape).copy()
                       if _shp(_as_ndarray(r)) != self._in_shape else r, self._in_dtype),)

    def grad_formula_impl(self, g, x, y):
        if _has_zero(<Tensor>x):
            if (<Tensor>x)._mx is not None and not grad_enabled():
                return self._gpu_exact(g, x)
            raise LucidError("graph-mode (create_graph=True) backward of prod is not "
                             "supported when the input contains zeros")
        return self._k(g) * self._k(y) / x

    cdef object _gpu_exact(self, Tensor g, Tensor x):
        """The gpu's first derivative when x holds zeros (the engine runs it with grad
        mode off): g times the product of the elements before and after each one, from
        MLX's exclusive cumulative products (as the CPU's eager kernel)."""
        m = mlx()
        a = x._mx
        axis = self._axes[0] if self._axes else None
        if axis is None:
            a = a.reshape(-1)
            axis = 0
        others = m.cumprod(a, axis=axis, inclusive=False) * m.cumprod(
            a, axis=axis, reverse=True, inclusive=False)
        gk = g._mx if self._keepdim else g._mx.reshape(_keepdim_shape(self._in_shape, self._axes))
        r = gk * others.reshape(self._in_shape)
        return _out_mx(m.broadcast_to(r, self._in_shape), self._in_dtype)


def prod(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Product of the elements over ``dim`` (an int, or None for all)."""
    dim = _np_alias("prod", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("prod", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = prepare(_S_prod, input)
    cdef DType out_dt = as_dtype(dtype) if dtype is not None else (
        x._dtype if x._dtype.is_floating_point else int64)
    cdef tuple axes = None if dim is None else (_norm_dim(dim, cnp.PyArray_NDIM(x._data)),)
    if cnp.PyArray_NDIM(x._data) == 0:
        axes = None            # dim 0 of a 0-d tensor is the tensor itself, as PyTorch
    cdef Tensor y
    if x._mx is not None:
        if cnp.PyArray_SIZE(x._data) == 0:
            y = _out_mx(_mx_identity(x, axes, keepdim, 1, _acc(out_dt)), out_dt)
        else:
            y = _out_mx(mlx().prod(_mxa(x, _acc(out_dt)), axis=_ax(axes), keepdims=keepdim),
                        out_dt)
    else:
        r = _kernel_reduce(LR_PROD, x._data, axes, keepdim, False) \
            if _kernel_dtype_ok(x._data, out_dt) else None
        if r is not None:
            r = r[0]
        else:
            r = np.multiply.reduce(_compute_arr(x), axis=axes, keepdims=keepdim,
                                   dtype=np.float32 if _is_half_code(out_dt.code)
                                   else out_dt.numpy_dtype)
        y = _wrap(_store(r, out_dt), out_dt)
    if _recording(x) and out_dt.is_floating_point:
        record(_S_prod, y, (x,), (axes, keepdim))
    return y


# -- amax / amin / max / min / argmax / argmin --------------------------------------------

cdef class AmaxBackward(ReduceBackward):
    """Backward of amax/amin and of max/min without dim: g shared evenly by the tied extremes."""
    schema_v1 = _S_amax

    def grad_formula_impl(self, g, x, y):
        hit = x == self._k(y)
        count = _sum(hit, self._axes, True)
        return ops.where(hit, self._k(g) / count, 0.0)


cdef class AminBackward(AmaxBackward):
    schema_v1 = _S_amin


cdef Tensor _amax(object input, object dim, bint keepdim, bint is_max, OpSchema s):
    cdef Tensor x = prepare(s, input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    if cnp.PyArray_SIZE(x._data) == 0 and (
            axes is None or builtins.any(_shp(x._data)[a] == 0 for a in axes)):
        raise IndexError(f"{s.name}(): Expected reduction dim "
                         f"{'(all)' if axes is None else [a for a in axes if _shp(x._data)[a] == 0][0]}"
                         " to have non-zero size.")
    cdef Tensor y
    if x._mx is not None:
        m = mlx()
        y = _out_mx((m.max if is_max else m.min)(x._mx, axis=_ax(axes), keepdims=keepdim),
                    x._dtype)
    else:
        r = _kernel_reduce(LR_MAX if is_max else LR_MIN, x._data, axes, keepdim, False)
        if r is not None:
            r = r[0]
        else:
            r = (np.max if is_max else np.min)(x._data, axis=axes, keepdims=keepdim)
        y = _wrap(_store(r, x._dtype), x._dtype)
    if _recording(x):
        record(s, y, (x,), (axes, keepdim))
    return y


def amax(input, dim=(), keepdim=False, *, axis=None, keepdims=None):
    """Maximum over ``dim`` (all dims by default); ties share the gradient evenly."""
    dim = _np_alias("amax", "dim", dim, (), "axis", axis)
    keepdim = _np_alias("amax", "keepdim", keepdim, False, "keepdims", keepdims)
    return _amax(input, dim, keepdim, True, _S_amax)


def amin(input, dim=(), keepdim=False, *, axis=None, keepdims=None):
    """Minimum over ``dim`` (all dims by default); ties share the gradient evenly."""
    dim = _np_alias("amin", "dim", dim, (), "axis", axis)
    keepdim = _np_alias("amin", "keepdim", keepdim, False, "keepdims", keepdims)
    return _amax(input, dim, keepdim, False, _S_amin)


cdef class MaxBackward(AmaxBackward):
    """Backward of max/min. Along a dim, g goes to the selected index only; over all
    elements, the tied extremes share it evenly (both as PyTorch). The dim variant
    keeps the indices (an ndarray: nothing to version), the full one x and the result."""
    schema_v1 = _S_max
    cdef cnp.ndarray _indices
    cdef object _mx_indices      # on the gpu: the indices as an MLX array (keepdim shape)

    cdef list _saved_list(self):
        if self._indices is not None or self._mx_indices is not None:
            return []
        return ReduceBackward._saved_list(self)

    def grad_formula_impl(self, g, x, y):
        cdef int d
        if self._mx_indices is not None:
            m = mlx()
            d = self._axes[0]
            at = [1] * len(self._in_shape)
            at[d] = self._in_shape[d]
            hit = m.arange(self._in_shape[d], dtype=m.int64).reshape(at) == self._mx_indices
            return ops.where(_wrap_mx(hit, bool_), self._k(g), 0.0)
        if self._indices is None:
            return AmaxBackward.grad_formula_impl(self, g, x, y)
        mask = np.zeros(self._in_shape, dtype=bool)
        np.put_along_axis(mask, self._indices, True, axis=self._axes[0])
        return ops.where(_wrap(mask, bool_), self._k(g), 0.0)


cdef class MinBackward(MaxBackward):
    schema_v1 = _S_min


cdef object _max_min(object input, object dim, bint keepdim, bint is_max):
    cdef OpSchema s = _S_max if is_max else _S_min
    if isinstance(dim, Tensor):
        return ops.maximum(input, dim) if is_max else ops.minimum(input, dim)
    if dim is None:
        return _amax(input, None, False, is_max, s)
    cdef Tensor x = prepare(s, input)
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    if cnp.PyArray_NDIM(x._data) == 0:
        if x._mx is not None:
            return ValuesIndices(ops.clone(x), _wrap_mx(mlx().zeros((), dtype=mx_dtype(int64)),
                                                        int64))
        return ValuesIndices(ops.clone(x), _wrap(np.zeros((), dtype=np.int64), int64))
    if _shp(x._data)[d] == 0:
        raise IndexError(f"{s.name}(): Expected reduction dim {d} to have non-zero size.")
    cdef Tensor y, ind
    idx_mx = None
    if x._mx is not None:
        m = mlx()
        idx_mx = (m.argmax if is_max else m.argmin)(x._mx, axis=d, keepdims=True).astype(
            mx_dtype(int64))
        vals = m.take_along_axis(x._mx, idx_mx, axis=d)
        y = _wrap_mx(vals if keepdim else m.squeeze(vals, axis=d), x._dtype)
        ind = _wrap_mx(idx_mx if keepdim else m.squeeze(idx_mx, axis=d), int64)
        idx = None
    else:
        r = _kernel_reduce(LR_MAX if is_max else LR_MIN, x._data, (d,), True, True)
        if r is not None:
            vals, idx = r
        else:
            idx = (np.argmax if is_max else np.argmin)(x._data, axis=d, keepdims=True)
            vals = np.take_along_axis(x._data, idx, axis=d)
        if not keepdim:
            vals = np.squeeze(vals, axis=d)
        y = _wrap(_as_ndarray(vals), x._dtype)
        ind = _wrap(_as_ndarray(idx if keepdim else np.squeeze(idx, axis=d)), int64)
    cdef MaxBackward node
    if _recording(x):
        node = <MaxBackward>_new_node(MaxBackward if is_max else MinBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        node._axes = (d,)
        node._keepdim = keepdim
        node._in_dtype = x._dtype
        node._indices = idx
        node._mx_indices = idx_mx
        _set_history(y, node)
    return ValuesIndices(y, ind)


def _max(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """max(x): the largest element. max(x, dim): (values, indices) along dim.
    max(x, other): element-wise maximum."""
    dim = _np_alias("max", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("max", "keepdim", keepdim, False, "keepdims", keepdims)
    return _max_min(input, dim, keepdim, True)


def _min(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """min(x): the smallest element. min(x, dim): (values, indices). min(x, other): minimum."""
    dim = _np_alias("min", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("min", "keepdim", keepdim, False, "keepdims", keepdims)
    return _max_min(input, dim, keepdim, False)


cdef Tensor _arg(object input, object dim, bint keepdim, bint is_max):
    cdef Tensor x = prepare(_S_argmax if is_max else _S_argmin, input)
    f = np.argmax if is_max else np.argmin
    if cnp.PyArray_SIZE(x._data) == 0 and (dim is None or _shp(x._data)[
            _norm_dim(dim, cnp.PyArray_NDIM(x._data))] == 0):
        raise IndexError(f"{'argmax' if is_max else 'argmin'}(): Expected reduction dim to "
                         "have non-zero size.")
    cdef int op = LR_MAX if is_max else LR_MIN
    if x._mx is not None:
        return _arg_mx(x, dim, keepdim, is_max)
    if dim is None:
        k = _kernel_reduce(op, x._data, None, False, True)
        r = k[1] if k is not None else _as_ndarray(f(x._data)).astype(np.int64)
        return _wrap(r.reshape((1,) * x._data.ndim) if keepdim else r, int64)
    d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    k = _kernel_reduce(op, x._data, (d,), keepdim, True)
    if k is not None:
        return _wrap(<cnp.ndarray>k[1], int64)
    return _wrap(_as_ndarray(f(x._data, axis=d, keepdims=keepdim)).astype(np.int64), int64)


cdef Tensor _arg_mx(Tensor x, object dim, bint keepdim, bint is_max):
    """argmax / argmin of a gpu tensor (MLX's, which picks the first of tied extremes
    and a nan as the extreme, as NumPy and PyTorch)."""
    m = mlx()
    f = m.argmax if is_max else m.argmin
    cdef int nd = cnp.PyArray_NDIM(x._data)
    a = x._mx
    if dim is None:
        r = f(a.reshape(-1)) if nd else m.zeros((), dtype=m.uint32)
        if keepdim:
            r = r.reshape((1,) * nd)
    else:
        d = _norm_dim(dim, nd)
        r = f(a, axis=d, keepdims=keepdim) if nd else m.zeros((), dtype=m.uint32)
    return _out_mx(r, int64)


def argmax(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """Index of the largest element (flat if ``dim`` is None)."""
    dim = _np_alias("argmax", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("argmax", "keepdim", keepdim, False, "keepdims", keepdims)
    return _arg(input, dim, keepdim, True)


def argmin(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """Index of the smallest element (flat if ``dim`` is None)."""
    dim = _np_alias("argmin", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("argmin", "keepdim", keepdim, False, "keepdims", keepdims)
    return _arg(input, dim, keepdim, False)


# -- var / std ------------------------------------------------------------------------------

cdef class VarBackward(ReduceBackward):
    """Backward of var: g * 2 (x - mean) / (N - correction)."""
    schema_v1 = _S_var
    cdef double _denom

    cdef tuple _eager(self, cnp.ndarray g):
        if not _fused_float(self._in_dtype):
            return Node._eager(self, g)
        g = _store(g, self._in_dtype)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            f = _as_ndarray(g * g.dtype.type(2.0 / self._denom if self._denom else np.inf))
        return (_scaled_deviations(self._x(), self._axes, self._k(f)),)

    def grad_formula_impl(self, g, x, y):
        dev = x - mean(x, self._axes, True)
        return self._k(g) * dev * (2.0 / self._denom if self._denom else float("inf"))


cdef class StdBackward(ReduceBackward):
    """Backward of std: g (x - mean) / ((N - correction) std), 0 where std is 0 (as PyTorch)."""
    schema_v1 = _S_std
    cdef double _denom

    cdef tuple _eager(self, cnp.ndarray g):
        if not _fused_float(self._in_dtype):
            return Node._eager(self, g)
        g = _store(g, self._in_dtype)
        y = self._y()
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            f = _as_ndarray(np.where(y == 0, 0, g / (y * y.dtype.type(self._denom))))
        return (_scaled_deviations(self._x(), self._axes, self._k(f)),)

    def grad_formula_impl(self, g, x, y):
        dev = x - mean(x, self._axes, True)
        yk = self._k(y)
        safe = ops.where(yk == 0, 1.0, yk)
        return ops.where(yk == 0, 0.0, self._k(g) * dev / (safe * self._denom))


cdef inline bint _fused_float(DType dt):
    """Whether an eager backward below runs its fused NumPy form (float32 / float64
    inputs; half inputs run the graph-mode formula)."""
    return dt.code == DT_FLOAT32 or dt.code == DT_FLOAT64


cdef cnp.ndarray _mean_kept(cnp.ndarray a, tuple axes):
    """The mean of ``a`` over ``axes`` with the reduced axes kept (size 1), in a's dtype:
    lucid's kernel (the pairwise sum / count) where it applies, else NumPy's sum / count
    (0 / 0 = nan for an empty reduction)."""
    k = _kernel_reduce(LR_MEAN, a, axes, True, False)
    if k is not None:
        return k[0]
    s = _as_ndarray(np.add.reduce(a, axis=axes, keepdims=True))
    cdef Py_ssize_t n = cnp.PyArray_SIZE(a)
    count = n // builtins.max(cnp.PyArray_SIZE(s), 1) if n else 0
    with np.errstate(divide="ignore", invalid="ignore"):
        return _as_ndarray(np.true_divide(s, a.dtype.type(count)))


cdef cnp.ndarray _scaled_deviations(cnp.ndarray x, tuple axes, cnp.ndarray f):
    """(x - mean(x over axes)) * f, f broadcast over the reduced axes: the gradients
    of var and std in two passes over x."""
    m = _mean_kept(x, axes)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = _as_ndarray(np.subtract(x, m))
        np.multiply(d, f, out=d)
    return d


cdef object _var_arr(object a, tuple axes, bint keepdim, double denom, bint is_std):
    """Two passes (the mean, then the squared deviations) in ``a``'s dtype: lucid's
    kernels (pairwise, in an order fixed by the shape) where they apply, else NumPy."""
    m = _mean_kept(a, axes)
    q = _kernel_reduce(LR_SUMSQ, a, axes, keepdim, False, m)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if q is not None:
            v = _as_ndarray(np.true_divide(q[0], a.dtype.type(denom)))
        else:
            v = np.sum((a - m) ** 2, axis=axes, keepdims=keepdim) / a.dtype.type(denom)
        return _as_ndarray(np.sqrt(v)) if is_std else v


cdef object _var_std(object input, object dim, object unbiased, bint keepdim, object correction,
                     bint is_std):
    cdef OpSchema s = _S_std if is_std else _S_var
    cdef Tensor x = prepare(s, input)
    if isinstance(dim, bool):          # var(x, False): the old positional `unbiased`
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    elif unbiased is not None:
        raise TypeError("pass either unbiased or correction, not both")
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    cdef double denom = <double>_count(x, axes) - float(correction)
    if denom < 0:
        denom = 0
    cdef Tensor y
    if x._mx is not None:
        # Two passes as on the CPU (the mean, then the squared deviations): more
        # accurate than E[x^2] - E[x]^2. N - correction <= 0 divides by 0 (inf / nan).
        mx_ = mlx()
        cdt = mx_dtype(_acc(x._dtype))
        a = _mxa(x, _acc(x._dtype))
        if cnp.PyArray_SIZE(x._data) == 0:
            v = _mx_identity(x, axes, keepdim, np.nan, _acc(x._dtype))
        else:
            mu = mx_.sum(a, axis=_ax(axes), keepdims=True) / mx_.array(_count(x, axes), dtype=cdt)
            v = mx_.sum(mx_.square(a - mu), axis=_ax(axes), keepdims=keepdim) / mx_.array(
                denom, dtype=cdt)
        y = _out_mx(mx_.sqrt(v) if is_std else v, x._dtype)
    else:
        a = _compute_arr(x)
        r = _var_arr(a, axes, keepdim, denom, is_std)
        if a.dtype == np.float32 and not np.isfinite(r).all():
            # float32 squares overflow above 1.8e19 (std([0, 3.4e38]) is 2.4e38): again
            # in float64, as PyTorch accumulates float32 moments in double
            r = _var_arr(a.astype(np.float64), axes, keepdim, denom, is_std)
        y = _wrap(_store(r, x._dtype), x._dtype)
    cdef Node node
    if _recording(x):
        node = record(s, y, (x,), (axes, keepdim))
        if is_std:
            (<StdBackward>node)._denom = denom
        else:
            (<VarBackward>node)._denom = denom
    return y


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
        keepdims=None, ddof=None):
    """Variance over ``dim`` with Bessel's ``correction`` (default 1, as PyTorch)."""
    dim = _np_alias("var", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("var", "keepdim", keepdim, False, "keepdims", keepdims)
    correction = _np_alias("var", "correction", correction, None, "ddof", ddof)
    return _var_std(input, dim, unbiased, keepdim, correction, False)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
        keepdims=None, ddof=None):
    """Standard deviation over ``dim`` with ``correction`` (default 1)."""
    dim = _np_alias("std", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("std", "keepdim", keepdim, False, "keepdims", keepdims)
    correction = _np_alias("std", "correction", correction, None, "ddof", ddof)
    return _var_std(input, dim, unbiased, keepdim, correction, True)


# -- logsumexp / norm ----------------------------------------------------------------------

cdef class LogsumexpBackward(ReduceBackward):
    """Backward of logsumexp: g * exp(x - out)."""
    schema_v1 = _S_logsumexp

    cdef tuple _eager(self, cnp.ndarray g):
        """g exp(x - lse) in one pass over x (lucid's kernel), where it applies."""
        if _fused_float(self._in_dtype):
            g = _contig(_store(g, self._in_dtype))
            k = _kernel_reduce(LR_LSE_BWD, self._x(), self._axes, True, False,
                               _contig(self._y()), g)
            if k is not None:
                return (k[0],)
        return Node._eager(self, g)

    def grad_formula_impl(self, g, x, y):
        return self._k(g) * ops.exp(x - self._k(y))


def logsumexp(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """log(sum(exp(x))) over ``dim``, without overflow."""
    dim = _np_alias("logsumexp", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("logsumexp", "keepdim", keepdim, False, "keepdims", keepdims)
    if dim is None:
        raise TypeError("logsumexp() missing required argument 'dim' (or axis)")
    cdef Tensor x = prepare(_S_logsumexp, input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    cdef Tensor y
    if x._mx is not None:
        mx_ = mlx()
        a = _mxa(x, _acc(x._dtype))
        if cnp.PyArray_SIZE(x._data) == 0:      # log(0) = -inf over an empty dim
            r = _mx_identity(x, axes, keepdim, -np.inf, _acc(x._dtype))
        else:
            # As the CPU path: shifted by the max (0 where the max is not finite); not
            # mx.logsumexp, whose float64 result is float32-accurate (MLX's exp).
            mxm = mx_.max(a, axis=_ax(axes), keepdims=True)
            mxm = mx_.where(mx_.isfinite(mxm), mxm, mx_.zeros_like(mxm))
            r = mx_.log(mx_.sum(_mx_exp(a - mxm), axis=_ax(axes), keepdims=True)) + mxm
            if not keepdim:
                r = _mx_squeeze(r, _shp(x._data), axes)
        y = _out_mx(r, x._dtype)
        if _recording(x):
            record(_S_logsumexp, y, (x,), (axes, keepdim))
        return y
    a = x._data
    k = _kernel_reduce(LR_LSE, a, axes, keepdim, False)
    if k is not None:
        r = k[0]
    else:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            m = np.max(a, axis=axes, keepdims=True) if a.size else np.zeros([1] * a.ndim, a.dtype)
            m = np.where(np.isfinite(m), m, 0)
            r = np.log(np.sum(np.exp(a - m), axis=axes, keepdims=True)) + m
        if not keepdim:
            r = r.reshape(tuple(s for i, s in enumerate(_shp(a))
                                if not (axes is None or i in axes)))
    y = _wrap(_store(r, x._dtype), x._dtype)
    if _recording(x):
        record(_S_logsumexp, y, (x,), (axes, keepdim))
    return y


cdef class NormBackward(ReduceBackward):
    """Backward of the p-norm: g x |x|^(p-2) / norm^(p-1) (0 where the norm is 0)."""
    schema_v1 = _S_norm
    cdef double _p

    cdef tuple _eager(self, cnp.ndarray g):
        """p = 2: x * (g / norm), 0 where the norm is 0 (one pass over x); p = 1:
        g sign(x). Other p: the graph-mode formula."""
        if (self._p != 2 and self._p != 1) or not _fused_float(self._in_dtype):
            return Node._eager(self, g)
        g = _store(g, self._in_dtype)
        x = self._x()
        if self._p == 1:
            return (_as_ndarray(np.multiply(np.sign(x), self._k(g))),)
        y = self._y()
        with np.errstate(divide="ignore", invalid="ignore"):
            f = _as_ndarray(np.where(y == 0, 0, g / y).astype(x.dtype, copy=False))
        return (_as_ndarray(np.multiply(x, self._k(f))),)

    def grad_formula_impl(self, g, x, y):
        yk = self._k(y)
        gk = self._k(g)
        p = self._p
        if p == 0:
            return ops.zeros_like(x)
        if p == 1:
            return gk * ops.sign(x)
        if p == np.inf:
            hit = ops.abs(x) == yk
            return gk * ops.sign(x) * hit / _sum(hit, self._axes, True)
        safe = ops.where(yk == 0, 1.0, yk)
        if p == 2:
            return ops.where(yk == 0, 0.0, gk * x / safe)
        return ops.where(yk == 0, 0.0, gk * x * ops.abs(x) ** (p - 2) / safe ** (p - 1))


cdef object _norm_mx(Tensor x, double pv, tuple axes, bint keepdim):
    """The p-norm of a gpu tensor, composed from MLX reductions as the CPU path."""
    m = mlx()
    cdt = mx_dtype(_acc(x._dtype))
    a = m.abs(_mxa(x, _acc(x._dtype)))
    ax = _ax(axes)
    if cnp.PyArray_SIZE(x._data) == 0:
        if pv == -np.inf:
            raise ArgumentError("norm(): p=-inf of an empty tensor has no value (a min over "
                                "no elements)")
        return _mx_identity(x, axes, keepdim, 0, _acc(x._dtype))
    if pv == np.inf:
        return m.max(a, axis=ax, keepdims=keepdim)
    if pv == -np.inf:
        return m.min(a, axis=ax, keepdims=keepdim)
    if pv == 0:
        return m.sum((a != 0).astype(cdt), axis=ax, keepdims=keepdim)
    if pv == 1:
        return m.sum(a, axis=ax, keepdims=keepdim)
    if pv == 2:
        scale = m.max(a, axis=ax, keepdims=True)            # no overflow in x*x
        safe = m.where(scale == 0, m.array(1, dtype=cdt), scale)
        r = m.sqrt(m.sum(m.square(a / safe), axis=ax, keepdims=True)) * safe
        r = m.where(scale == np.inf, scale, r)              # inf / inf would give nan
        return r if keepdim else _mx_squeeze(r, _shp(x._data), axes)
    return m.power(m.sum(m.power(a, m.array(pv, dtype=cdt)), axis=ax, keepdims=keepdim),
                   m.array(1.0 / pv, dtype=cdt))


cdef object _norm_kernel(cnp.ndarray a, double pv, tuple axes, bint keepdim):
    """The 1-, 2- and inf-norms from lucid's kernels, or None where they do not apply
    (then the NumPy formulas below). The 2-norm sums unscaled squares; where that may
    have overflowed or lost accuracy to underflow (a result not finite, or so small
    that the squares reached the subnormal range) it returns None, and the scaled
    formula recomputes."""
    if pv == 1:
        r = _kernel_reduce(LR_ASUM, a, axes, keepdim, False)
        return None if r is None else r[0]
    if pv == np.inf:
        if cnp.PyArray_SIZE(a) == 0 or not cnp.PyArray_IS_C_CONTIGUOUS(a):
            return None
        r = _kernel_reduce(LR_MAX, _as_ndarray(np.abs(a)), axes, keepdim, False)
        return None if r is None else r[0]
    if pv != 2:
        return None
    r = _kernel_reduce(LR_NORM2, a, axes, keepdim, False)
    if r is None:
        return None
    v, flag = r
    if flag and not (np.all(v == 0) and not np.any(a)):   # all-zero input: 0 is exact
        return None
    return v


def norm(input, p="fro", dim=None, keepdim=False, *, axis=None, keepdims=None):
    """Vector p-norm over ``dim`` (all elements by default); "fro" is p = 2."""
    dim = _np_alias("norm", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("norm", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = prepare(_S_norm, input)
    cdef double pv
    if p == "fro" or p is None:
        pv = 2.0
    elif isinstance(p, str):
        raise ArgumentError(f"norm(): unsupported p={p!r} (use a number or 'fro')")
    else:
        pv = float(p)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    cdef Tensor y
    if x._mx is not None:
        y = _out_mx(_norm_mx(x, pv, axes, keepdim), x._dtype)
        if _recording(x):
            (<NormBackward>record(_S_norm, y, (x,), (axes, keepdim)))._p = pv
        return y
    xa = _compute_arr(x)
    r = _norm_kernel(xa, pv, axes, keepdim)
    if r is None:
        a = _as_ndarray(np.abs(xa))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if pv == np.inf:
                r = np.max(a, axis=axes, keepdims=keepdim, initial=0)
            elif pv == -np.inf:
                r = np.min(a, axis=axes, keepdims=keepdim)
            elif pv == 0:
                r = np.sum(a != 0, axis=axes, keepdims=keepdim).astype(a.dtype)
            elif pv == 1:
                r = np.sum(a, axis=axes, keepdims=keepdim)
            elif pv == 2:
                scale = np.max(a, axis=axes, keepdims=True, initial=0)   # no overflow in x*x
                safe = np.where(scale == 0, 1, scale)
                r = np.sqrt(np.sum((a / safe) ** 2, axis=axes, keepdims=True)) * safe
                r = np.where(scale == np.inf, scale, r)     # inf / inf would give nan; torch: inf
                if not keepdim:
                    r = r.reshape(tuple(s for i, s in enumerate(_shp(a)) if not (axes is None or i in axes)))
            else:
                r = np.sum(a ** pv, axis=axes, keepdims=keepdim) ** (1.0 / pv)
    y = _wrap(_store(r, x._dtype), x._dtype)
    if _recording(x):
        (<NormBackward>record(_S_norm, y, (x,), (axes, keepdim)))._p = pv
    return y


# -- cumsum / cumprod ------------------------------------------------------------------------

cdef class CumsumBackward(ReduceBackward):
    """Backward of cumsum: the reverse cumulative sum of g."""
    schema_v1 = _S_cumsum

    def grad_formula_impl(self, g, x, y):
        d = self._axes[0]
        if len(self._in_shape) == 0:
            return g
        return _sum(g, d, True) - cumsum(g, d) + g


cdef object _cum_acc(DType dt):
    """The dtype a cumulative sum or product of ``dt`` runs in: float64 for float32, as
    PyTorch (cumprod([3.4e38, 3.4e38, 0]) ends in 0, not inf * 0 = nan), float32 for
    the half dtypes."""
    if dt.code == DT_FLOAT32:
        return np.float64
    return np.float32 if _is_half_code(dt.code) else dt.numpy_dtype


cdef object _cum_kernel(int op, Tensor x, int d, DType out_dt):
    """cumsum / cumprod of x along d from lucid's kernels, or None: a float32 or float64
    x into its own dtype (accumulated in double, as _cum_acc), an integer or bool x
    into int64."""
    if not _kernel_dtype_ok(x._data, out_dt):
        return None
    r = _kernel_reduce(op, x._data, (d,), True, False)
    return None if r is None else r[0]


def cumsum(input, dim=None, *, dtype=None, axis=None):
    """Cumulative sum along ``dim``."""
    dim = _np_alias("cumsum", "dim", dim, None, "axis", axis)
    if dim is None:
        raise TypeError("cumsum() missing required argument 'dim' (or axis)")
    cdef Tensor x = prepare(_S_cumsum, input)
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    cdef DType out_dt = as_dtype(dtype) if dtype is not None else (
        x._dtype if x._dtype.is_floating_point else int64)
    cdef Tensor y
    if x._mx is not None:
        a = _mxa(x, _acc(out_dt))
        y = _out_mx(mlx().cumsum(a, axis=d) if cnp.PyArray_NDIM(x._data) else a, out_dt)
    else:
        r = _cum_kernel(LR_CUMSUM, x, d, out_dt)
        if r is None:
            a = _compute_arr(x)
            r = np.cumsum(a, axis=d if a.ndim else None, dtype=_cum_acc(out_dt)).reshape(_shp(a))
        y = _wrap(_store(r, out_dt), out_dt)
    if _recording(x) and out_dt.is_floating_point:
        record(_S_cumsum, y, (x,), ((d,), True))
    return y


cdef class CumprodBackward(ReduceBackward):
    """Backward of cumprod. The eager kernel is exact when the input has zeros:
    grad_i = (prod_{k<i} x_k) * S_i with S_i = g_i + x_{i+1} S_{i+1}; the graph-mode
    formula divides by x and refuses inputs with zeros."""
    schema_v1 = _S_cumprod

    cdef tuple _eager(self, cnp.ndarray g):
        x = self._x()
        d = self._axes[0]
        if x.ndim == 0:
            return (g.copy(),)
        xm = np.moveaxis(x, d, 0)
        gm = np.moveaxis(g, d, 0)
        n = xm.shape[0]
        excl = np.ones_like(xm)
        if n > 1:
            excl[1:] = np.cumprod(xm[:n - 1], axis=0)
        s = np.empty_like(gm)
        acc = np.zeros_like(gm[0]) if n else None
        for i in range(n - 1, -1, -1):
            acc = gm[i] + (xm[i + 1] * acc if i + 1 < n else 0)
            s[i] = acc
        return (_store(np.moveaxis(excl * s, 0, d), self._in_dtype),)

    def grad_formula_impl(self, g, x, y):
        if _has_zero(<Tensor>x):
            if (<Tensor>x)._mx is not None and not grad_enabled():
                return self._gpu_exact(g, x)
            raise LucidError("graph-mode (create_graph=True) backward of cumprod is not "
                             "supported when the input contains zeros")
        d = self._axes[0]
        if len(self._in_shape) == 0:
            return g
        gy = g * y
        return (_sum(gy, d, True) - cumsum(gy, d) + gy) / x

    cdef object _gpu_exact(self, Tensor g, Tensor x):
        """The gpu's first derivative when x holds zeros (grad mode off), the recurrence
        of the CPU's eager kernel in MLX ops: grad_i = (prod_{k<i} x_k) S_i with
        S_i = g_i + x_{i+1} S_{i+1}."""
        m = mlx()
        cdef int d = self._axes[0]
        if len(self._in_shape) == 0:
            return g
        xm = m.moveaxis(x._mx, d, 0)
        gm = m.moveaxis(g._mx, d, 0)
        n = self._in_shape[d]
        if n == 0:
            return _out_mx(m.zeros_like(x._mx), self._in_dtype)
        excl = m.cumprod(xm, axis=0, inclusive=False)
        acc = gm[n - 1]
        parts = [acc]
        for i in range(n - 2, -1, -1):
            acc = gm[i] + xm[i + 1] * acc
            parts.append(acc)
        parts.reverse()
        return _out_mx(m.moveaxis(excl * m.stack(parts, axis=0), 0, d), self._in_dtype)


def cumprod(input, dim=None, *, dtype=None, axis=None):
    """Cumulative product along ``dim``."""
    dim = _np_alias("cumprod", "dim", dim, None, "axis", axis)
    if dim is None:
        raise TypeError("cumprod() missing required argument 'dim' (or axis)")
    cdef Tensor x = prepare(_S_cumprod, input)
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    cdef DType out_dt = as_dtype(dtype) if dtype is not None else (
        x._dtype if x._dtype.is_floating_point else int64)
    cdef Tensor y
    if x._mx is not None:
        a = _mxa(x, _acc(out_dt))
        y = _out_mx(mlx().cumprod(a, axis=d) if cnp.PyArray_NDIM(x._data) else a, out_dt)
    else:
        r = _cum_kernel(LR_CUMPROD, x, d, out_dt)
        if r is None:
            a = _compute_arr(x)
            r = np.cumprod(a, axis=d if a.ndim else None, dtype=_cum_acc(out_dt)).reshape(_shp(a))
        y = _wrap(_store(r, out_dt), out_dt)
    if _recording(x) and out_dt.is_floating_point:
        record(_S_cumprod, y, (x,), ((d,), True))
    return y


# -- softmax / log_softmax --------------------------------------------------------------------

cdef tuple _softmax_bwd(ReduceBackward node, cnp.ndarray g, int op):
    """The eager backward of (log_)softmax from the saved output y: lucid's fused
    kernel (one dot product and one write pass per row), or the graph-mode formula
    where it does not apply (half dtypes, a 0-d input)."""
    if _fused_float(node._in_dtype):
        g = _contig(_store(g, node._in_dtype))
        k = _kernel_reduce(op, node._y(), node._axes, True, False, None, g)
        if k is not None:
            return (k[0],)
    return Node._eager(node, g)


cdef class SoftmaxBackward(ReduceBackward):
    """Backward of softmax: y (g - sum(g y, dim))."""
    schema_v1 = _S_softmax

    cdef tuple _eager(self, cnp.ndarray g):
        return _softmax_bwd(self, g, LR_SOFTMAX_BWD)

    def grad_formula_impl(self, g, x, y):
        return y * (g - _sum(g * y, self._axes[0], True))


cdef class LogSoftmaxBackward(ReduceBackward):
    """Backward of log_softmax: g - exp(y) sum(g, dim)."""
    schema_v1 = _S_log_softmax

    cdef tuple _eager(self, cnp.ndarray g):
        return _softmax_bwd(self, g, LR_LOGSOFTMAX_BWD)

    def grad_formula_impl(self, g, x, y):
        return g - ops.exp(y) * _sum(g, self._axes[0], True)


cdef object _softmax_mx(Tensor x, int d, bint log):
    """(log_)softmax of a gpu tensor along ``d``: x - max, then exp and the row sum, as
    the CPU path (a row holding +inf, or only -inf, gives nan there too)."""
    m = mlx()
    a = _mxa(x, _acc(x._dtype))
    if cnp.PyArray_SIZE(x._data) == 0:
        return a
    ax = d if cnp.PyArray_NDIM(x._data) else None
    z = a - m.max(a, axis=ax, keepdims=True)
    e = _mx_exp(z)
    ssum = m.sum(e, axis=ax, keepdims=True)
    return z - m.log(ssum) if log else e / ssum


cdef Tensor _softmax(object input, object dim, object dtype, bint log):
    cdef OpSchema s = _S_log_softmax if log else _S_softmax
    cdef Tensor x = _as_tensor_dev(input)
    if dtype is not None:
        x = to_dtype(x, as_dtype(dtype), False)
    x = prepare(s, x)
    if dim is None:
        raise TypeError(f"{s.name}() needs dim (PyTorch's implicit dim choice is deprecated)")
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    cdef Tensor y
    if x._mx is not None:
        y = _out_mx(_softmax_mx(x, d, log), x._dtype)
        if _recording(x):
            record(s, y, (x,), ((d,), True))
        return y
    a = x._data
    ax = d if a.ndim else None
    k = _kernel_reduce(LR_LOGSOFTMAX if log else LR_SOFTMAX, a, (d,), True, False) \
        if a.ndim else None
    if k is not None:
        r = k[0]
    else:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            # No guard for an infinite max: as PyTorch, a row holding +inf (inf - inf) or
            # only -inf gives nan.
            m = np.max(a, axis=ax, keepdims=True) if a.size else np.zeros_like(a)
            z = a - m
            e = np.exp(z)
            ssum = np.sum(e, axis=ax, keepdims=True)
            r = z - np.log(ssum) if log else e / ssum
    y = _wrap(_store(r, x._dtype), x._dtype)
    if _recording(x):
        record(s, y, (x,), ((d,), True))
    return y


def softmax(input, dim=None, dtype=None, *, axis=None):
    """exp(x) / sum(exp(x)) along ``dim``, computed stably."""
    dim = _np_alias("softmax", "dim", dim, None, "axis", axis)
    return _softmax(input, dim, dtype, False)


def log_softmax(input, dim=None, dtype=None, *, axis=None):
    """x - logsumexp(x) along ``dim``."""
    dim = _np_alias("log_softmax", "dim", dim, None, "axis", axis)
    return _softmax(input, dim, dtype, True)


# -- cross entropy ---------------------------------------------------------------------------
# One kernel pass over the logits computes each position's loss and, when the logits need
# a gradient, d loss / d logits (src/lucid_reduce_tpl.h, lucid_xent_plan); the node's
# eager backward only scales that by the output gradient. lucid.nn.functional.cross_entropy
# calls this for cpu inputs and keeps its composite of log_softmax and nll for the rest.

cdef OpSchema _S_cross_entropy = register("cross_entropy", "ForceFP32", 1, saves_input=True,
                                          int_rule=INT_REJECT)


cdef class CrossEntropyBackward(Node):
    """Backward of cross entropy over dim 1 of the logits x: (A softmax(x) - a) times the
    output gradient (divided by the summed target weights for 'mean'), where ``a`` holds
    each position's target weights over the classes and A = sum(a, 1)."""
    schema_v1 = _S_cross_entropy
    cdef SavedTensor _saved_x
    cdef object _grad                 # d loss[position] / d x, from the forward kernel
    cdef object _target, _weight      # index or probability targets; class weights or None
    cdef cnp.npy_int64 _ignore
    cdef double _smoothing, _den
    cdef str _reduction
    cdef DType _dt

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        cdef Tensor x = <Tensor>inputs[0]
        self._saved_x = _save(x, False)
        self._dt = x._dtype
        (self._grad, self._target, self._weight, self._ignore, self._smoothing,
         self._reduction, self._den) = params

    cdef list _saved_list(self):
        return [self._saved_x]

    cdef void _release(self):
        Node._release(self)
        self._grad = None

    cdef object _scale(self, object g):
        """The factor each position's gradient is multiplied by (an array or tensor)."""
        if self._reduction == "none":
            return ops.unsqueeze(g, 1) if isinstance(g, Tensor) else np.expand_dims(g, 1)
        if self._reduction == "mean":
            return g / self._den if self._den != 0 else g * 0
        return g

    cdef tuple _eager(self, cnp.ndarray g):
        if self._grad is None:             # freed by an earlier backward: the usual error
            self._saved_x._check(self)
        g = _store(g, self._dt)
        return (_as_ndarray(np.multiply(self._grad, self._scale(g))),)

    def grad_formula_impl(self, g, x):
        a = _wrap(self._target_weights(), self._dt)
        gx = softmax(x, 1) * _sum(a, 1, True) - a
        return gx * self._scale(g)

    cdef cnp.ndarray _target_weights(self):
        """a: each position's weight of every class, laid out as x."""
        shape = _shp(self._saved_x.data(self))
        c = shape[1]
        w = np.ones(c, dtype=self._dt.numpy_dtype) if self._weight is None else self._weight
        wb = w.reshape((1, c) + (1,) * (len(shape) - 2))
        u = self._smoothing / c
        t = self._target
        if t.dtype != np.int64:                         # probabilities
            return _as_ndarray(wb * ((1 - self._smoothing) * t + u))
        valid = np.expand_dims(t != self._ignore, 1)
        k = np.expand_dims(np.where(t != self._ignore, t, 0), 1)
        a = np.broadcast_to(u * wb, shape).copy()
        np.put_along_axis(a, k, np.take_along_axis(a, k, 1) + (1 - self._smoothing) * w[k], 1)
        return _as_ndarray(np.where(valid, a, 0).astype(self._dt.numpy_dtype))


def cross_entropy(input, target, weight=None, ignore_index=-100, str reduction="mean",
                  double label_smoothing=0.0):
    """Cross entropy of logits (N, C, *) over dim 1 with class-index targets (N, *) or
    class probabilities (N, C, *), fused with its gradient. Returns None where the fused
    kernel does not apply (gpu tensors, a target or weight that requires grad), so that
    the caller runs the composite formula."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef Tensor t = _as_tensor_dev(target)
    cdef Tensor w = _as_tensor_dev(weight) if weight is not None else None
    if x._mx is not None or t._mx is not None or (w is not None and w._mx is not None):
        return None
    cdef bint grad_on = grad_enabled()
    cdef bint prob = t._dtype.is_floating_point
    if grad_on and (t._requires_grad or (w is not None and w._requires_grad)):
        return None
    x = prepare(_S_cross_entropy, x)
    shape = _shp(x._data)
    if len(shape) < 2:
        raise ShapeError(f"cross_entropy: input must be (N, C, ...), got shape {shape}")
    cdef Py_ssize_t N = shape[0], C = shape[1], I = 1, k
    for k in range(2, len(shape)):
        I *= shape[k]
    if C == 0:
        raise ShapeError(f"cross_entropy: input of shape {shape} has no classes")
    tshape = _shp(t._data)
    npdt = x._dtype.numpy_dtype
    if prob:
        if tshape != shape:
            raise ShapeError(f"cross_entropy: probability targets must have the input's shape "
                             f"{shape}, got {tshape}")
        tarr = _contig(_store(t._data, x._dtype))
    else:
        if t._dtype.code == DT_BOOL:
            raise UnsupportedDTypeError("cross_entropy: class-index targets must be integers, "
                                        "got bool")
        if tshape != (shape[0],) + shape[2:]:
            raise ShapeError(f"cross_entropy: class-index targets must have shape "
                             f"{(shape[0],) + shape[2:]} for input of shape {shape}, got {tshape}")
        tarr = _contig(t._data.astype(np.int64, copy=False))
    warr = None
    if w is not None:
        if _shp(w._data) != (C,):
            raise ShapeError(f"cross_entropy: weight must have shape ({C},), got "
                             f"{_shp(w._data)}")
        warr = _contig(_store(w._data, x._dtype))
    xarr = _contig(x._data)
    cdef bint want_grad = grad_on and x._requires_grad
    loss = np.empty((N,) + shape[2:], dtype=npdt)
    den = np.empty(N * I, dtype=np.float64) if not prob and reduction == "mean" else None
    grad = np.empty(shape, dtype=npdt) if want_grad else None
    cdef lucid_xent_plan p
    p.dbl = x._dtype.code == DT_FLOAT64
    p.x = cnp.PyArray_DATA(xarr)
    p.target = NULL if prob else <cnp.npy_int64 *>cnp.PyArray_DATA(tarr)
    p.prob = cnp.PyArray_DATA(tarr) if prob else NULL
    p.weight = NULL if warr is None else cnp.PyArray_DATA(warr)
    p.n, p.c, p.inner = N, C, I
    p.ignore_index = ignore_index
    p.smoothing = label_smoothing
    p.loss = cnp.PyArray_DATA(loss)
    p.denom = NULL if den is None else <double *>cnp.PyArray_DATA(den)
    p.grad = NULL if grad is None else cnp.PyArray_DATA(grad)
    lucid_xent_setup(&p)
    cdef int nt = _threads_for(N * C * I)
    if N * C * I < _NOGIL_MIN:
        _parallel_for(lucid_xent_piece, &p, p.npieces, 1)
    else:
        with nogil:
            _parallel_for(lucid_xent_piece, &p, p.npieces, nt)
    if p.oom:
        raise MemoryError("cross_entropy: out of memory for the class scratch")
    if p.bad:
        bad = tarr[(tarr != ignore_index) & ((tarr < 0) | (tarr >= C))]
        raise IndexError(f"cross_entropy: target {int(bad.reshape(-1)[0])} is out of bounds "
                         f"for {C} classes")
    cdef double den_total = 1.0        # what 'mean' divides by
    if reduction == "none":
        r = loss
    else:
        total = lucid_sum(<double *>cnp.PyArray_DATA(loss), N * I) if p.dbl else \
            lucid_sumf(<float *>cnp.PyArray_DATA(loss), N * I)
        if reduction == "mean":
            den_total = <double>(N * I) if den is None else \
                lucid_sum(<double *>cnp.PyArray_DATA(den), N * I)
            total = total / den_total
        r = np.array(total, dtype=npdt)
    cdef Tensor y = _wrap(_as_ndarray(r), x._dtype)
    if want_grad:
        record(_S_cross_entropy, y, (x,), (grad, tarr, warr, ignore_index, label_smoothing,
                                          reduction, den_total))
    return y


# -- all / any -------------------------------------------------------------------------------

def _all(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """True where every element over ``dim`` is nonzero."""
    dim = _np_alias("all", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("all", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = prepare(_S_all, input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    if x._mx is not None:
        if cnp.PyArray_SIZE(x._data) == 0:
            return _out_mx(_mx_identity(x, axes, keepdim, True, bool_), bool_)
        return _out_mx(mlx().all(x._mx, axis=_ax(axes), keepdims=keepdim), bool_)
    k = _kernel_reduce(LR_ALL, x._data, axes, keepdim, False)
    if k is not None:
        return _wrap(<cnp.ndarray>k[0], bool_)
    return _wrap(_as_ndarray(np.all(x._data, axis=axes, keepdims=keepdim)), bool_)


def _any(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """True where some element over ``dim`` is nonzero."""
    dim = _np_alias("any", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("any", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = prepare(_S_any, input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    if x._mx is not None:
        if cnp.PyArray_SIZE(x._data) == 0:
            return _out_mx(_mx_identity(x, axes, keepdim, False, bool_), bool_)
        return _out_mx(mlx().any(x._mx, axis=_ax(axes), keepdims=keepdim), bool_)
    k = _kernel_reduce(LR_ANY, x._data, axes, keepdim, False)
    if k is not None:
        return _wrap(<cnp.ndarray>k[0], bool_)
    return _wrap(_as_ndarray(np.any(x._data, axis=axes, keepdims=keepdim)), bool_)


for _node in (SumBackward, MeanBackward, ProdBackward, AmaxBackward, AminBackward, MaxBackward,
              MinBackward, VarBackward, StdBackward, LogsumexpBackward, NormBackward,
              CumsumBackward, CumprodBackward, SoftmaxBackward, LogSoftmaxBackward,
              CrossEntropyBackward):
    _node.schema_v1._bind(_node)

# Every reduction runs on the gpu: its function above branches on x._mx itself.
for _s in (_S_sum, _S_mean, _S_prod, _S_amax, _S_amin, _S_max, _S_min, _S_argmax, _S_argmin,
           _S_var, _S_std, _S_logsumexp, _S_norm, _S_cumsum, _S_cumprod, _S_softmax,
           _S_log_softmax, _S_all, _S_any):
    (<OpSchema>_s).gpu = True

for _name, _fn_name, _method in REDUCTION_EXPORTS:
    export(globals()[_fn_name], _name, method=_method)
