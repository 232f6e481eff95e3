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


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` (int, tuple, or None for all), keeping reduced dims if ``keepdim``.
    Integer and bool inputs sum to int64, as in PyTorch."""
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


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim`` (int, tuple, or None for all). Needs a floating dtype, as in PyTorch."""
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
        _set_history(y, node)
    return y


def broadcast_to(input, shape):
    return expand(input, shape)


def backend_info():
    """The CPU path in use: instruction set chosen at load time and the math library."""
    return {"isa": lucid_isa().decode(), "mathlib": lucid_mathlib().decode(),
            "threads": _num_threads, "parallel_min_elements": _PAR_MIN}
