# Comparisons and logical ops (bool results, never differentiable), the
# predicates isnan/isinf/isfinite, and where (differentiable in its two values).


cdef inline object _raw(object v):
    """Operand for a NumPy comparison: a tensor's array, or the scalar / array itself."""
    if isinstance(v, Tensor):
        return (<Tensor>v)._data
    if _is_scalar(v) or isinstance(v, np.ndarray):
        return v
    if isinstance(v, (list, tuple)):
        return (<Tensor>tensor(v))._data
    raise TypeError(f"expected a Tensor or a number, got {type(v).__name__}")


cdef Tensor _bool_op(object ufunc, object a, object b):
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError("expected at least one Tensor operand")
    try:
        r = ufunc(_raw(a), _raw(b))
    except ValueError as e:
        raise ShapeError(f"operands do not broadcast: {e}") from None
    return _wrap(_as_ndarray(r), bool_)


def eq(input, other):
    """input == other, element-wise (bool)."""
    return _bool_op(np.equal, input, other)


def ne(input, other):
    """input != other, element-wise (bool)."""
    return _bool_op(np.not_equal, input, other)


def lt(input, other):
    """input < other, element-wise (bool)."""
    return _bool_op(np.less, input, other)


def le(input, other):
    """input <= other, element-wise (bool)."""
    return _bool_op(np.less_equal, input, other)


def gt(input, other):
    """input > other, element-wise (bool)."""
    return _bool_op(np.greater, input, other)


def ge(input, other):
    """input >= other, element-wise (bool)."""
    return _bool_op(np.greater_equal, input, other)


def logical_and(input, other):
    return _bool_op(np.logical_and, input, other)


def logical_or(input, other):
    return _bool_op(np.logical_or, input, other)


def logical_xor(input, other):
    return _bool_op(np.logical_xor, input, other)


def logical_not(input):
    cdef Tensor x = _as_tensor(input)
    return _wrap(_as_ndarray(np.logical_not(x._data)), bool_)


def bitwise_not(input):
    cdef Tensor x = _as_tensor(input)
    if x._dtype.is_floating_point:
        raise UnsupportedDTypeError(f"bitwise_not needs an integer or bool tensor, got {x._dtype}")
    return _wrap(_as_ndarray(np.invert(x._data)), x._dtype)


def isnan(input):
    cdef Tensor x = _as_tensor(input)
    return _wrap(_as_ndarray(np.isnan(x._data)), bool_)


def isinf(input):
    cdef Tensor x = _as_tensor(input)
    return _wrap(_as_ndarray(np.isinf(x._data)), bool_)


def isfinite(input):
    cdef Tensor x = _as_tensor(input)
    return _wrap(_as_ndarray(np.isfinite(x._data)), bool_)


def equal(input, other):
    """True if both tensors have the same shape and elements."""
    cdef Tensor a = _as_tensor(input), b = _as_tensor(other)
    return _shp(a._data) == _shp(b._data) and bool(np.array_equal(a._data, b._data))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    cdef Tensor a = _as_tensor(input), b = _as_tensor(other)
    return bool(np.allclose(a._data, b._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


cdef class WhereBackward(BinaryBackward):
    """Backward of where(cond, a, b): grad_a = g where cond else 0, grad_b = g where not cond."""
    schema_v1 = _register("where", "Promote", 3)
    cdef cnp.ndarray _cond

    cdef tuple _eager(self, cnp.ndarray g):
        zero = g.dtype.type(0)
        return self._finish_eager(
            _as_ndarray(np.where(self._cond, g, zero)) if self._wants(0) else None,
            _as_ndarray(np.where(self._cond, zero, g)) if self._wants(1) else None)

    def grad_formula_impl(self, g, a, b):
        c = _wrap(self._cond, bool_)
        return (where(c, g, 0.0) if self._wants(0) else None,
                where(c, 0.0, g) if self._wants(1) else None)


def where(condition, input=None, other=None):
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (broadcast).
    With only ``condition``, the indices of its nonzero elements (a tuple per dim)."""
    cdef Tensor c = _as_tensor(condition)
    if input is None and other is None:
        return tuple(_wrap(_as_ndarray(i).astype(np.int64), int64) for i in np.nonzero(c._data))
    if c._dtype is not bool_:
        raise UnsupportedDTypeError(f"where expected a bool condition, got {c._dtype}")
    cdef Tensor ta = <Tensor>input if isinstance(input, Tensor) else None
    cdef Tensor tb = <Tensor>other if isinstance(other, Tensor) else None
    sa = None if ta is not None else input
    sb = None if tb is not None else other
    if ta is None and not _is_scalar(sa):
        ta = _as_tensor(sa)
        sa = None
    if tb is None and not _is_scalar(sb):
        tb = _as_tensor(sb)
        sb = None
    cdef DType dt = <DType>_DTYPES[_result_code(ta, sa, tb, sb)] if (ta is not None or tb is not None) \
        else (<DType>_DTYPES[_promote2(_scalar_code(sa), _scalar_code(sb))])
    try:
        r = np.where(c._data, _operand(ta, sa, dt), _operand(tb, sb, dt))
    except ValueError as e:
        raise ShapeError(f"where: shapes do not broadcast: {e}") from None
    cdef Tensor out = _wrap(_as_ndarray(r).astype(dt.numpy_dtype, copy=False), dt)
    cdef WhereBackward node
    if lucid_grad_enabled and ((ta is not None and ta._requires_grad) or
                               (tb is not None and tb._requires_grad)):
        node = WhereBackward.__new__(WhereBackward)
        node._cond = np.broadcast_to(c._data, _shp(out._data))
        node._next = (_edge(ta) if ta is not None else _NO_EDGE,
                      _edge(tb) if tb is not None else _NO_EDGE)
        if ta is not None:
            node._shape_a = _shp(ta._data)
            node._dt_a = ta._dtype
        if tb is not None:
            node._shape_b = _shp(tb._data)
            node._dt_b = tb._dtype
        _set_history(out, node)
    return out
