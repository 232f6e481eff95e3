# Reductions (sum, mean) and the shape ops their gradients need (reshape, expand).

cdef extern from "lucid_vforce.h" nogil:
    double lucid_sumf(const float *x, Py_ssize_t n)
    double lucid_sum(const double *x, Py_ssize_t n)
    void lucid_fillf(float *y, float v, Py_ssize_t n)
    void lucid_fill(double *y, double v, Py_ssize_t n)
    const char *lucid_isa()
    const char *lucid_mathlib()


cdef tuple _norm_dims(object dim, int ndim):
    """``dim`` (None, int or sequence of ints) -> sorted tuple of distinct axes (None = all)."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return None            # as PyTorch: an empty dim list reduces everything
        axes = sorted(_norm_dim(d, ndim) for d in dim)
        for i in range(1, len(axes)):
            if axes[i] == axes[i - 1]:
                raise ValueError(f"dim {axes[i]} appears multiple times in the list of dims")
        return tuple(axes) if ndim > 0 else ()
    return (_norm_dim(dim, ndim),) if ndim > 0 else ()


cdef tuple _keepdim_shape(tuple in_shape, tuple axes):
    if axes is None:
        return (1,) * len(in_shape)
    return tuple(1 if i in axes else s for i, s in enumerate(in_shape))


cdef cnp.ndarray _fill_new(tuple shape, cnp.ndarray g):
    """A new C-contiguous array of ``shape`` with every element = the one value in ``g``."""
    cdef cnp.ndarray out = np.empty(shape, dtype=g.dtype)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(out)
    cdef int num = cnp.PyArray_TYPE(g)
    if num == cnp.NPY_FLOAT:
        lucid_fillf(<float *>cnp.PyArray_DATA(out), (<float *>cnp.PyArray_DATA(g))[0], n)
    elif num == cnp.NPY_DOUBLE:
        lucid_fill(<double *>cnp.PyArray_DATA(out), (<double *>cnp.PyArray_DATA(g))[0], n)
    else:
        out.fill(g.reshape(()).item() if cnp.PyArray_SIZE(g) == 1 else 0)
    return out


cdef cnp.ndarray _expand_grad(cnp.ndarray g, tuple in_shape, tuple axes, bint keepdim):
    """Broadcast a reduction's output gradient back over the reduced axes (a new array)."""
    if cnp.PyArray_SIZE(g) == 1 and cnp.PyArray_IS_C_CONTIGUOUS(g):
        return _fill_new(in_shape, g)
    if not keepdim:
        g = g.reshape(_keepdim_shape(in_shape, axes))
    out = np.empty(in_shape, dtype=g.dtype)
    out[...] = g
    return out


cdef class SumBackward(Node):
    """Backward of sum: the output gradient broadcast back over the reduced dims."""
    schema_v1 = _register("sum", "KeepInput", 1)
    cdef tuple _in_shape, _axes
    cdef bint _keepdim
    cdef DType _in_dtype

    cdef tuple _eager(self, cnp.ndarray g):
        if cnp.PyArray_TYPE(g) != self._in_dtype.typenum:
            g = g.astype(self._in_dtype.numpy_dtype)
        return (_expand_grad(g, self._in_shape, self._axes, self._keepdim),)

    cdef tuple _graph(self, Tensor g):
        return (self.grad_formula_impl(g),)

    def grad_formula_impl(self, g):
        if not self._keepdim:
            g = reshape(g, _keepdim_shape(self._in_shape, self._axes))
        return expand(to_dtype(g, self._in_dtype, False), self._in_shape)


cdef class MeanBackward(SumBackward):
    """Backward of mean: the output gradient / count, broadcast back over the reduced dims."""
    schema_v1 = _register("mean", "KeepInput", 1)
    cdef double _count

    cdef tuple _eager(self, cnp.ndarray g):
        if cnp.PyArray_TYPE(g) != self._in_dtype.typenum:
            g = g.astype(self._in_dtype.numpy_dtype)
        g = _as_ndarray(np.true_divide(g, g.dtype.type(self._count)))
        return (_expand_grad(g, self._in_shape, self._axes, self._keepdim),)

    def grad_formula_impl(self, g):
        return SumBackward.grad_formula_impl(self, g) / self._count


cdef inline double _sum_raw(int num, const void *x, Py_ssize_t n) noexcept nogil:
    if num == cnp.NPY_FLOAT:
        return lucid_sumf(<const float *>x, n)
    return lucid_sum(<const double *>x, n)


cdef cnp.ndarray _sum_array(cnp.ndarray a, tuple axes, bint keepdim, DType out_dt):
    cdef int num = cnp.PyArray_TYPE(a)
    cdef double s
    cdef Py_ssize_t n
    if axes is None and not keepdim and out_dt.typenum == num and cnp.PyArray_IS_C_CONTIGUOUS(a) \
            and (num == cnp.NPY_FLOAT or num == cnp.NPY_DOUBLE):
        # Full reduction: pairwise in double, no NumPy call overhead.
        n = cnp.PyArray_SIZE(a)
        if n < _NOGIL_MIN:
            s = _sum_raw(num, cnp.PyArray_DATA(a), n)
        else:
            with nogil:
                s = _sum_raw(num, cnp.PyArray_DATA(a), n)
        out = cnp.PyArray_EMPTY(0, NULL, num, 0)
        if num == cnp.NPY_FLOAT:
            (<float *>cnp.PyArray_DATA(out))[0] = <float>s
        else:
            (<double *>cnp.PyArray_DATA(out))[0] = s
        return out
    acc = np.float32 if out_dt is float16 else out_dt.numpy_dtype
    r = np.add.reduce(a, axis=axes, dtype=acc, keepdims=keepdim)
    return _as_ndarray(r).astype(out_dt.numpy_dtype, copy=False)


def sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Sum over ``dim`` (int, tuple, or None for all), keeping reduced dims if ``keepdim``.
    Integer and bool inputs sum to int64, as in PyTorch."""
    dim = _np_alias("sum", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("sum", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    cdef DType out_dt
    if dtype is not None:
        out_dt = as_dtype(dtype)
    elif x._dtype.is_floating_point:
        out_dt = x._dtype
    else:
        out_dt = int64
    cdef Tensor y = _wrap(_sum_array(x._data, axes, keepdim, out_dt), out_dt)
    cdef SumBackward node
    if lucid_grad_enabled and x._requires_grad and out_dt.is_floating_point:
        node = SumBackward.__new__(SumBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        node._axes = axes
        node._keepdim = keepdim
        node._in_dtype = x._dtype
        _set_history(y, node)
    return y


def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Mean over ``dim`` (int, tuple, or None for all). Needs a floating dtype, as in PyTorch."""
    dim = _np_alias("mean", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("mean", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    cdef DType out_dt = as_dtype(dtype) if dtype is not None else x._dtype
    if not out_dt.is_floating_point:
        raise UnsupportedDTypeError(
            f"mean(): could not infer output dtype. Input dtype must be a floating point "
            f"dtype, got {x._dtype}; pass dtype=lucid.float32 or convert the input")
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    cdef Py_ssize_t count = 1
    if axes is None:
        count = cnp.PyArray_SIZE(x._data)
    else:
        for a in axes:
            count *= _shp(x._data)[a]
    s = _sum_array(x._data, axes, keepdim, float32 if out_dt is float16 else out_dt)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = _as_ndarray(np.true_divide(s, s.dtype.type(count) if count else s.dtype.type(0)))
    cdef Tensor y = _wrap(m.astype(out_dt.numpy_dtype, copy=False), out_dt)
    cdef MeanBackward node
    if lucid_grad_enabled and x._requires_grad:
        node = MeanBackward.__new__(MeanBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        node._axes = axes
        node._keepdim = keepdim
        node._in_dtype = x._dtype
        node._count = count
        _set_history(y, node)
    return y


# -- shape ops ------------------------------------------------------------------

cdef class ReshapeBackward(Node):
    """Backward of reshape/view: the gradient reshaped back to the input's shape."""
    schema_v1 = _register("reshape", "KeepInput", 1)
    cdef tuple _in_shape

    cdef tuple _eager(self, cnp.ndarray g):
        return (g.reshape(self._in_shape),)

    cdef tuple _graph(self, Tensor g):
        return (self.grad_formula_impl(g),)

    def grad_formula_impl(self, g):
        return reshape(g, self._in_shape)


def reshape(input, shape):
    """The same data with a new shape (a view sharing memory when possible); -1 infers a size."""
    cdef Tensor x = _as_tensor(input)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        arr = x._data.reshape(tuple(shape))
    except ValueError as e:
        raise ShapeError(f"shape {tuple(shape)} is invalid for input of shape {_shp(x._data)}: {e}") from None
    cdef Tensor y = _wrap(arr, x._dtype)
    if arr.base is not None:
        y._vc = x._get_vc()     # a view: in-place writes to either show in both
    cdef ReshapeBackward node
    if lucid_grad_enabled and x._requires_grad:
        node = ReshapeBackward.__new__(ReshapeBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        if arr.base is not None:
            _record_view(y, node)      # a view: a later write to its memory must invalidate it
        else:
            _set_history(y, node)
    return y


cdef class ExpandBackward(Node):
    """Backward of expand/broadcast_to: the gradient summed back to the input's shape."""
    schema_v1 = _register("expand", "KeepInput", 1)
    cdef tuple _in_shape

    cdef tuple _eager(self, cnp.ndarray g):
        return (_sum_to(g, self._in_shape),)

    cdef tuple _graph(self, Tensor g):
        return (self.grad_formula_impl(g),)

    def grad_formula_impl(self, g):
        return _sum_to_t(g, self._in_shape)


def expand(input, shape):
    """A read-only broadcast view of ``input`` with ``shape`` (-1 keeps a size)."""
    cdef Tensor x = _as_tensor(input)
    shape = tuple(shape)
    cdef int lead = len(shape) - cnp.PyArray_NDIM(x._data)
    if lead < 0:
        raise ShapeError(f"cannot expand shape {_shp(x._data)} to {shape}: too few dimensions")
    shape = tuple(_shp(x._data)[i - lead] if (s == -1 and i >= lead) else s
                  for i, s in enumerate(shape))
    try:
        arr = np.broadcast_to(x._data, shape)
    except ValueError as e:
        raise ShapeError(f"cannot expand shape {_shp(x._data)} to {shape}") from None
    cdef Tensor y = _wrap(arr, x._dtype)
    y._vc = x._get_vc()
    cdef ExpandBackward node
    if lucid_grad_enabled and x._requires_grad:
        node = ExpandBackward.__new__(ExpandBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        _record_view(y, node)
    return y


def broadcast_to(input, shape):
    return expand(input, shape)


def backend_info():
    """The CPU path in use: instruction set chosen at load time and the math library."""
    return {"isa": lucid_isa().decode(), "mathlib": lucid_mathlib().decode(),
            "threads": _num_threads, "parallel_min_elements": _PAR_MIN}


# -- more reductions ---------------------------------------------------------------
# Every node here keeps the input's shape, the reduced axes and keepdim, and
# re-inserts the reduced axes into the output gradient before broadcasting it.

from collections import namedtuple

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


cdef inline cnp.ndarray _compute_arr(Tensor x):
    """The array an op computes on: float16 goes through float32."""
    if x._dtype is float16:
        return x._data.astype(np.float32)
    return x._data


cdef inline cnp.ndarray _store(object r, DType dt):
    cdef cnp.ndarray a = _as_ndarray(r)
    if cnp.PyArray_TYPE(a) != dt.typenum:
        with np.errstate(over="ignore"):
            a = a.astype(dt.numpy_dtype)
    return a


cdef class _ReduceNode(Node):
    cdef tuple _in_shape, _axes
    cdef bint _keepdim
    cdef DType _in_dtype
    cdef SavedTensor _saved_x, _saved_y

    cdef list _saved_list(self):
        return [s for s in (self._saved_x, self._saved_y) if s is not None]

    cdef void _release(self):
        self._released = True
        if self._saved_x is not None:
            self._saved_x.release()
        if self._saved_y is not None:
            self._saved_y.release()

    cdef object _k(self, object a):
        """An output-shaped array/tensor with the reduced axes put back (size 1)."""
        if self._keepdim:
            return a
        shape = _keepdim_shape(self._in_shape, self._axes)
        if isinstance(a, Tensor):
            return reshape(a, shape)
        return np.reshape(a, shape)

    cdef object _x(self):
        return self._saved_x.data(self) if self._saved_x is not None else None

    cdef object _y(self):
        return self._saved_y.data(self) if self._saved_y is not None else None

    cdef tuple _graph(self, Tensor g):
        x = self._saved_x.unpack(self) if self._saved_x is not None else None
        y = self._saved_y.unpack(self) if self._saved_y is not None else None
        return (to_dtype(_as_tensor(self.grad_formula_impl(g, x, y)), self._in_dtype, False),)

    cdef tuple _done(self, object r):
        return (_store(np.broadcast_to(r, self._in_shape).copy()
                       if _shp(_as_ndarray(r)) != self._in_shape else r, self._in_dtype),)


cdef _ReduceNode _reduce_node(type cls, Tensor x, tuple axes, bint keepdim):
    cdef _ReduceNode node = <_ReduceNode>(<PyTypeObject *>cls).tp_new(cls, <PyObject *>_EMPTY, NULL)
    node._next = (_edge(x),)
    node._in_shape = _shp(x._data)
    node._axes = axes
    node._keepdim = keepdim
    node._in_dtype = x._dtype
    return node


cdef inline bint _recording(Tensor x):
    return lucid_grad_enabled and x._requires_grad


cdef Py_ssize_t _count(Tensor x, tuple axes):
    if axes is None:
        return cnp.PyArray_SIZE(x._data)
    cdef Py_ssize_t n = 1
    for a in axes:
        n *= _shp(x._data)[a]
    return n


cdef class ProdBackward(_ReduceNode):
    """Backward of prod: g times the product of all other elements (exact with zeros)."""
    schema_v1 = _register("prod", "KeepInput", 1, saves_input=True, saves_output=False)

    cdef tuple _eager(self, cnp.ndarray g):
        x = self._x()
        if x.size == 0:
            return (np.zeros(self._in_shape, dtype=g.dtype),)
        axis = self._axes[0] if self._axes else None
        xs = x.reshape(-1) if axis is None else x
        ax = 0 if axis is None else axis
        ones_shape = list(_shp(xs))
        ones_shape[ax] = 1
        one = np.ones(ones_shape, dtype=xs.dtype)
        # product of everything before / after each element along the axis
        left = np.cumprod(np.concatenate([one, np.delete(xs, -1 + _shp(xs)[ax], axis=ax)], axis=ax), axis=ax)
        right = np.flip(np.cumprod(np.concatenate(
            [one, np.delete(np.flip(xs, ax), -1 + _shp(xs)[ax], axis=ax)], axis=ax), axis=ax), ax)
        others = (left * right).reshape(_shp(x))
        return self._done(self._k(g) * others)

    def grad_formula_impl(self, g, x, y):
        if bool(np.any((<Tensor>x)._data == 0)):
            raise LucidError("graph-mode (create_graph=True) backward of prod is not "
                             "supported when the input contains zeros")
        axis = self._axes[0] if self._axes else None
        return self._k(g) * (prod(x, axis, True) if axis is not None else prod(x)) / x


def prod(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Product of the elements over ``dim`` (an int, or None for all)."""
    dim = _np_alias("prod", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("prod", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    cdef DType out_dt = as_dtype(dtype) if dtype is not None else (
        x._dtype if x._dtype.is_floating_point else int64)
    cdef tuple axes = None if dim is None else (_norm_dim(dim, cnp.PyArray_NDIM(x._data)),)
    if cnp.PyArray_NDIM(x._data) == 0:
        axes = None            # dim 0 of a 0-d tensor is the tensor itself, as PyTorch
    r = np.multiply.reduce(_compute_arr(x), axis=axes, keepdims=keepdim,
                           dtype=np.float32 if out_dt is float16 else out_dt.numpy_dtype)
    cdef Tensor y = _wrap(_store(r, out_dt), out_dt)
    cdef _ReduceNode node
    if _recording(x) and out_dt.is_floating_point:
        node = _reduce_node(ProdBackward, x, axes, keepdim)
        node._saved_x = _save(x, False)
        _set_history(y, node)
    return y


cdef class AmaxBackward(_ReduceNode):
    """Backward of amax/amin and of max/min without dim: g shared evenly by the tied extremes."""
    schema_v1 = _register("amax", "KeepInput", 1, saves_input=True, saves_output=True)

    cdef tuple _eager(self, cnp.ndarray g):
        x = self._x()
        hit = (x == self._k(self._y()))
        count = np.sum(hit, axis=self._axes, keepdims=True)
        return self._done(np.where(hit, self._k(g) / count, 0).astype(g.dtype))

    def grad_formula_impl(self, g, x, y):
        hit = eq(x, self._k(y))
        count = sum(hit, self._axes, True)
        return where(hit, self._k(g) / count, 0.0)


cdef class AminBackward(AmaxBackward):
    schema_v1 = _register("amin", "KeepInput", 1, saves_input=True, saves_output=True)


cdef Tensor _amax(object input, object dim, bint keepdim, bint is_max, type cls=None):
    cdef Tensor x = _as_tensor(input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    if cnp.PyArray_SIZE(x._data) == 0 and (axes is None or any(_shp(x._data)[a] == 0 for a in axes)):
        raise LucidError(f"{'max' if is_max else 'min'}(): cannot reduce over an empty dimension")
    r = (np.max if is_max else np.min)(x._data, axis=axes, keepdims=keepdim)
    cdef Tensor y = _wrap(_store(r, x._dtype), x._dtype)
    cdef _ReduceNode node
    if _recording(x):
        node = _reduce_node(cls if cls is not None else (AmaxBackward if is_max else AminBackward),
                            x, axes, keepdim)
        node._saved_x = _save(x, False)
        node._saved_y = _save(y, True)
        _set_history(y, node)
    return y


def amax(input, dim=(), keepdim=False, *, axis=None, keepdims=None):
    """Maximum over ``dim`` (all dims by default); ties share the gradient evenly."""
    dim = _np_alias("amax", "dim", dim, (), "axis", axis)
    keepdim = _np_alias("amax", "keepdim", keepdim, False, "keepdims", keepdims)
    return _amax(input, dim, keepdim, True)


def amin(input, dim=(), keepdim=False, *, axis=None, keepdims=None):
    """Minimum over ``dim`` (all dims by default); ties share the gradient evenly."""
    dim = _np_alias("amin", "dim", dim, (), "axis", axis)
    keepdim = _np_alias("amin", "keepdim", keepdim, False, "keepdims", keepdims)
    return _amax(input, dim, keepdim, False)


cdef class MaxBackward(AmaxBackward):
    """Backward of max/min. Along a dim, g goes to the selected index only; over all
    elements, the tied extremes share it evenly (both as PyTorch). The dim variant
    keeps the indices (an ndarray: nothing to version), the full one x and the result."""
    schema_v1 = _register("max", "KeepInput", 1, saves_input=True, saves_output=True)
    cdef cnp.ndarray _indices

    cdef tuple _eager(self, cnp.ndarray g):
        if self._indices is None:
            return AmaxBackward._eager(self, g)
        out = np.zeros(self._in_shape, dtype=g.dtype)
        np.put_along_axis(out, self._indices, self._k(g), axis=self._axes[0])
        return (out,)

    def grad_formula_impl(self, g, x, y):
        if self._indices is None:
            return AmaxBackward.grad_formula_impl(self, g, x, y)
        mask = np.zeros(self._in_shape, dtype=bool)
        np.put_along_axis(mask, self._indices, True, axis=self._axes[0])
        return where(_wrap(mask, bool_), self._k(g), 0.0)


cdef class MinBackward(MaxBackward):
    schema_v1 = _register("min", "KeepInput", 1, saves_input=True, saves_output=True)


cdef object _max_min(object input, object dim, bint keepdim, bint is_max):
    if isinstance(dim, Tensor):
        return maximum(input, dim) if is_max else minimum(input, dim)
    if dim is None:
        return _amax(input, None, False, is_max, MaxBackward if is_max else MinBackward)
    cdef Tensor x = _as_tensor(input)
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    if cnp.PyArray_NDIM(x._data) == 0:
        return ValuesIndices(clone(x), _wrap(np.zeros((), dtype=np.int64), int64))
    if _shp(x._data)[d] == 0:
        raise LucidError(f"{'max' if is_max else 'min'}(): cannot reduce over an empty dimension")
    idx = (np.argmax if is_max else np.argmin)(x._data, axis=d, keepdims=True)
    vals = np.take_along_axis(x._data, idx, axis=d)
    if not keepdim:
        vals = np.squeeze(vals, axis=d)
    cdef Tensor y = _wrap(_as_ndarray(vals), x._dtype)
    cdef Tensor ind = _wrap(_as_ndarray(idx if keepdim else np.squeeze(idx, axis=d)), int64)
    cdef MaxBackward node
    if _recording(x):
        node = <MaxBackward>_reduce_node(MaxBackward if is_max else MinBackward, x, (d,), keepdim)
        node._indices = idx
        _set_history(y, node)
    return ValuesIndices(y, ind)


def max(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """max(x): the largest element. max(x, dim): (values, indices) along dim.
    max(x, other): element-wise maximum."""
    dim = _np_alias("max", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("max", "keepdim", keepdim, False, "keepdims", keepdims)
    return _max_min(input, dim, keepdim, True)


def min(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """min(x): the smallest element. min(x, dim): (values, indices). min(x, other): minimum."""
    dim = _np_alias("min", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("min", "keepdim", keepdim, False, "keepdims", keepdims)
    return _max_min(input, dim, keepdim, False)


def argmax(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """Index of the largest element (flat if ``dim`` is None)."""
    dim = _np_alias("argmax", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("argmax", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    if dim is None:
        r = _as_ndarray(np.argmax(x._data)).astype(np.int64)
        return _wrap(r.reshape((1,) * x._data.ndim) if keepdim else r, int64)
    d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    return _wrap(_as_ndarray(np.argmax(x._data, axis=d, keepdims=keepdim)).astype(np.int64), int64)


def argmin(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """Index of the smallest element (flat if ``dim`` is None)."""
    dim = _np_alias("argmin", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("argmin", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    if dim is None:
        r = _as_ndarray(np.argmin(x._data)).astype(np.int64)
        return _wrap(r.reshape((1,) * x._data.ndim) if keepdim else r, int64)
    d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    return _wrap(_as_ndarray(np.argmin(x._data, axis=d, keepdims=keepdim)).astype(np.int64), int64)


cdef class VarBackward(_ReduceNode):
    """Backward of var: g * 2 (x - mean) / (N - correction)."""
    schema_v1 = _register("var", "KeepInput", 1, saves_input=True)
    cdef double _denom

    cdef tuple _eager(self, cnp.ndarray g):
        x = self._x()
        dev = x - np.mean(x, axis=self._axes, keepdims=True, dtype=x.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._done(self._k(g) * dev * x.dtype.type(2.0 / self._denom if self._denom else np.inf))

    def grad_formula_impl(self, g, x, y):
        dev = x - mean(x, self._axes, True)
        return self._k(g) * dev * (2.0 / self._denom if self._denom else float("inf"))


cdef class StdBackward(_ReduceNode):
    """Backward of std: g (x - mean) / ((N - correction) std)."""
    schema_v1 = _register("std", "KeepInput", 1, saves_input=True, saves_output=True)
    cdef double _denom

    cdef tuple _eager(self, cnp.ndarray g):
        x = self._x()
        dev = x - np.mean(x, axis=self._axes, keepdims=True, dtype=x.dtype)
        y = self._k(self._y())
        with np.errstate(divide="ignore", invalid="ignore"):
            r = self._k(g) * dev / (y * x.dtype.type(self._denom))
        return self._done(np.where(y == 0, 0, r).astype(x.dtype, copy=False))   # 0 where std is 0, as PyTorch

    def grad_formula_impl(self, g, x, y):
        dev = x - mean(x, self._axes, True)
        yk = self._k(y)
        safe = where(eq(yk, 0), 1.0, yk)
        return where(eq(yk, 0), 0.0, self._k(g) * dev / (safe * self._denom))


cdef object _var_std(object input, object dim, object unbiased, bint keepdim, object correction,
                     bint is_std):
    cdef Tensor x = _as_tensor(input)
    if not x._dtype.is_floating_point:
        raise UnsupportedDTypeError(f"{'std' if is_std else 'var'}() needs a floating dtype, got {x._dtype}")
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
    a = _compute_arr(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.mean(a, axis=axes, keepdims=True)
        v = np.sum((a - m) ** 2, axis=axes, keepdims=keepdim) / a.dtype.type(denom)
        r = np.sqrt(v) if is_std else v
    cdef Tensor y = _wrap(_store(r, x._dtype), x._dtype)
    cdef _ReduceNode node
    if _recording(x):
        node = _reduce_node(StdBackward if is_std else VarBackward, x, axes, keepdim)
        node._saved_x = _save(x, False)
        if is_std:
            node._saved_y = _save(y, True)
            (<StdBackward>node)._denom = denom
        else:
            (<VarBackward>node)._denom = denom
        _set_history(y, node)
    return y


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None, ddof=None):
    """Variance over ``dim`` with Bessel's ``correction`` (default 1, as PyTorch)."""
    dim = _np_alias("var", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("var", "keepdim", keepdim, False, "keepdims", keepdims)
    correction = _np_alias("var", "correction", correction, None, "ddof", ddof)
    return _var_std(input, dim, unbiased, keepdim, correction, False)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None, ddof=None):
    """Standard deviation over ``dim`` with ``correction`` (default 1)."""
    dim = _np_alias("std", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("std", "keepdim", keepdim, False, "keepdims", keepdims)
    correction = _np_alias("std", "correction", correction, None, "ddof", ddof)
    return _var_std(input, dim, unbiased, keepdim, correction, True)


cdef class LogsumexpBackward(_ReduceNode):
    """Backward of logsumexp: g * exp(x - out)."""
    schema_v1 = _register("logsumexp", "ForceFP32", 1, saves_input=True, saves_output=True)

    cdef tuple _eager(self, cnp.ndarray g):
        with np.errstate(invalid="ignore", over="ignore"):
            return self._done(self._k(g) * np.exp(self._x() - self._k(self._y())))

    def grad_formula_impl(self, g, x, y):
        return self._k(g) * exp(x - self._k(y))


def logsumexp(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """log(sum(exp(x))) over ``dim``, without overflow."""
    dim = _np_alias("logsumexp", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("logsumexp", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    if not x._dtype.is_floating_point:
        x = to_dtype(x, float32, False)
    elif x._dtype is float16:
        x = to_dtype(x, float32, False)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    a = x._data
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(a, axis=axes, keepdims=True) if a.size else np.zeros([1] * a.ndim, a.dtype)
        m = np.where(np.isfinite(m), m, 0)
        r = np.log(np.sum(np.exp(a - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        r = r.reshape(tuple(s for i, s in enumerate(_shp(a))
                            if not (axes is None or i in axes)))
    cdef Tensor y = _wrap(_store(r, x._dtype), x._dtype)
    cdef _ReduceNode node
    if _recording(x):
        node = _reduce_node(LogsumexpBackward, x, axes, keepdim)
        node._saved_x = _save(x, False)
        node._saved_y = _save(y, True)
        _set_history(y, node)
    return y


cdef class NormBackward(_ReduceNode):
    """Backward of the p-norm: g x |x|^(p-2) / norm^(p-1) (0 where the norm is 0)."""
    schema_v1 = _register("norm", "KeepInput", 1, saves_input=True, saves_output=True)
    cdef double _p

    cdef tuple _eager(self, cnp.ndarray g):
        x = self._x()
        y = self._k(self._y())
        gk = self._k(g)
        p = self._p
        with np.errstate(divide="ignore", invalid="ignore"):
            if p == 0:
                r = np.zeros_like(x)
            elif p == 1:
                r = gk * np.sign(x)
            elif p == np.inf:
                hit = np.abs(x) == y
                r = gk * np.sign(x) * hit / np.sum(hit, axis=self._axes, keepdims=True)
            elif p == 2:
                r = np.where(y == 0, 0, gk * x / y)
            else:
                r = np.where(y == 0, 0, gk * x * np.abs(x) ** (p - 2) / y ** (p - 1))
        return self._done(_as_ndarray(r).astype(x.dtype, copy=False))

    def grad_formula_impl(self, g, x, y):
        yk = self._k(y)
        gk = self._k(g)
        p = self._p
        if p == 0:
            return zeros_like(x)
        if p == 1:
            return gk * sign(x)
        if p == np.inf:
            hit = eq(abs(x), yk)
            return gk * sign(x) * hit / sum(hit, self._axes, True)
        safe = where(eq(yk, 0), 1.0, yk)
        if p == 2:
            return where(eq(yk, 0), 0.0, gk * x / safe)
        return where(eq(yk, 0), 0.0, gk * x * abs(x) ** (p - 2) / safe ** (p - 1))


def norm(input, p="fro", dim=None, keepdim=False, *, axis=None, keepdims=None):
    """Vector p-norm over ``dim`` (all elements by default); "fro" is p = 2."""
    dim = _np_alias("norm", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("norm", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    if not x._dtype.is_floating_point:
        raise UnsupportedDTypeError(f"norm() needs a floating dtype, got {x._dtype}")
    cdef double pv
    if p == "fro" or p is None:
        pv = 2.0
    elif isinstance(p, str):
        raise ValueError(f"norm(): unsupported p={p!r} (use a number or 'fro')")
    else:
        pv = float(p)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    a = _as_ndarray(np.abs(_compute_arr(x)))
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
            if not keepdim:
                r = r.reshape(tuple(s for i, s in enumerate(_shp(a)) if not (axes is None or i in axes)))
        else:
            r = np.sum(a ** pv, axis=axes, keepdims=keepdim) ** (1.0 / pv)
    cdef Tensor y = _wrap(_store(r, x._dtype), x._dtype)
    cdef _ReduceNode node
    if _recording(x):
        node = _reduce_node(NormBackward, x, axes, keepdim)
        node._saved_x = _save(x, False)
        node._saved_y = _save(y, True)
        (<NormBackward>node)._p = pv
        _set_history(y, node)
    return y


cdef class CumsumBackward(_ReduceNode):
    """Backward of cumsum: the reverse cumulative sum of g."""
    schema_v1 = _register("cumsum", "KeepInput", 1)

    cdef tuple _eager(self, cnp.ndarray g):
        d = self._axes[0]
        if len(self._in_shape) == 0:
            return (_store(g.copy(), self._in_dtype),)
        return (_store(np.flip(np.cumsum(np.flip(g, d), axis=d), d), self._in_dtype),)

    def grad_formula_impl(self, g, x, y):
        d = self._axes[0]
        if len(self._in_shape) == 0:
            return g
        return sum(g, d, True) - cumsum(g, d) + g


def cumsum(input, dim=None, *, dtype=None, axis=None):
    """Cumulative sum along ``dim``."""
    dim = _np_alias("cumsum", "dim", dim, None, "axis", axis)
    if dim is None:
        raise TypeError("cumsum() missing required argument 'dim' (or axis)")
    cdef Tensor x = _as_tensor(input)
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    cdef DType out_dt = as_dtype(dtype) if dtype is not None else (
        x._dtype if x._dtype.is_floating_point else int64)
    a = _compute_arr(x)
    r = np.cumsum(a, axis=d if a.ndim else None,
                  dtype=np.float32 if out_dt is float16 else out_dt.numpy_dtype).reshape(_shp(a))
    cdef Tensor y = _wrap(_store(r, out_dt), out_dt)
    if _recording(x) and out_dt.is_floating_point:
        node = _reduce_node(CumsumBackward, x, (d,), True)
        _set_history(y, node)
    return y


cdef class CumprodBackward(_ReduceNode):
    """Backward of cumprod, exact when the input has zeros:
    grad_i = (prod_{k<i} x_k) * S_i with S_i = g_i + x_{i+1} S_{i+1}."""
    schema_v1 = _register("cumprod", "KeepInput", 1, saves_input=True, saves_output=True)

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
        if bool(np.any((<Tensor>x)._data == 0)):
            raise LucidError("graph-mode (create_graph=True) backward of cumprod is not "
                             "supported when the input contains zeros")
        d = self._axes[0]
        if len(self._in_shape) == 0:
            return g
        gy = g * y
        return (sum(gy, d, True) - cumsum(gy, d) + gy) / x


def cumprod(input, dim=None, *, dtype=None, axis=None):
    """Cumulative product along ``dim``."""
    dim = _np_alias("cumprod", "dim", dim, None, "axis", axis)
    if dim is None:
        raise TypeError("cumprod() missing required argument 'dim' (or axis)")
    cdef Tensor x = _as_tensor(input)
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    cdef DType out_dt = as_dtype(dtype) if dtype is not None else (
        x._dtype if x._dtype.is_floating_point else int64)
    a = _compute_arr(x)
    r = np.cumprod(a, axis=d if a.ndim else None,
                   dtype=np.float32 if out_dt is float16 else out_dt.numpy_dtype).reshape(_shp(a))
    cdef Tensor y = _wrap(_store(r, out_dt), out_dt)
    cdef _ReduceNode node
    if _recording(x) and out_dt.is_floating_point:
        node = _reduce_node(CumprodBackward, x, (d,), True)
        node._saved_x = _save(x, False)
        node._saved_y = _save(y, True)
        _set_history(y, node)
    return y


cdef class SoftmaxBackward(_ReduceNode):
    """Backward of softmax: y (g - sum(g y, dim))."""
    schema_v1 = _register("softmax", "ForceFP32", 1, saves_input=False, saves_output=True)

    cdef tuple _eager(self, cnp.ndarray g):
        y = self._y()
        d = self._axes[0]
        return (_store(y * (g - np.sum(g * y, axis=d, keepdims=True)), self._in_dtype),)

    def grad_formula_impl(self, g, x, y):
        d = self._axes[0]
        return y * (g - sum(g * y, d, True))


cdef class LogSoftmaxBackward(_ReduceNode):
    """Backward of log_softmax: g - exp(y) sum(g, dim)."""
    schema_v1 = _register("log_softmax", "ForceFP32", 1, saves_input=False, saves_output=True)

    cdef tuple _eager(self, cnp.ndarray g):
        y = self._y()
        d = self._axes[0]
        return (_store(g - np.exp(y) * np.sum(g, axis=d, keepdims=True), self._in_dtype),)

    def grad_formula_impl(self, g, x, y):
        d = self._axes[0]
        return g - exp(y) * sum(g, d, True)


cdef Tensor _softmax(object input, object dim, object dtype, bint log):
    cdef Tensor x = _as_tensor(input)
    if dtype is not None:
        x = to_dtype(x, as_dtype(dtype), False)
    if not x._dtype.is_floating_point or x._dtype is float16:
        x = to_dtype(x, float32, False)
    if dim is None:
        raise TypeError("softmax() needs dim (PyTorch's implicit dim choice is deprecated)")
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data))
    a = x._data
    ax = d if a.ndim else None
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(a, axis=ax, keepdims=True) if a.size else np.zeros_like(a)
        m = np.where(np.isfinite(m), m, 0)
        z = a - m
        e = np.exp(z)
        s = np.sum(e, axis=ax, keepdims=True)
        r = z - np.log(s) if log else e / s
    cdef Tensor y = _wrap(_store(r, x._dtype), x._dtype)
    cdef _ReduceNode node
    if _recording(x):
        node = _reduce_node(LogSoftmaxBackward if log else SoftmaxBackward, x, (d,), True)
        node._saved_y = _save(y, True)
        _set_history(y, node)
    return y


def softmax(input, dim=None, dtype=None, *, axis=None):
    """exp(x) / sum(exp(x)) along ``dim``, computed stably."""
    dim = _np_alias("softmax", "dim", dim, None, "axis", axis)
    return _softmax(input, dim, dtype, False)


def log_softmax(input, dim=None, dtype=None, *, axis=None):
    """x - logsumexp(x) along ``dim``."""
    dim = _np_alias("log_softmax", "dim", dim, None, "axis", axis)
    return _softmax(input, dim, dtype, True)


def all(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """True where every element over ``dim`` is nonzero."""
    dim = _np_alias("all", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("all", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    return _wrap(_as_ndarray(np.all(x._data, axis=axes, keepdims=keepdim)), bool_)


def any(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """True where some element over ``dim`` is nonzero."""
    dim = _np_alias("any", "dim", dim, None, "axis", axis)
    keepdim = _np_alias("any", "keepdim", keepdim, False, "keepdims", keepdims)
    cdef Tensor x = _as_tensor(input)
    cdef tuple axes = _norm_dims(dim, cnp.PyArray_NDIM(x._data))
    return _wrap(_as_ndarray(np.any(x._data, axis=axes, keepdims=keepdim)), bool_)


for _name in ("prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std",
              "logsumexp", "norm", "cumsum", "cumprod", "softmax", "log_softmax", "all", "any"):
    _add_tensor_method(_name, globals()[_name])
