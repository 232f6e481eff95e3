# Element-wise ops with parameters (slopes, bounds, replacement values), which the
# one-argument op table cannot express: leaky_relu, elu, clamp, nan_to_num; and
# gelu's `approximate=` switch between the two table rows.


cdef class _PointwiseNode(Node):
    """One input, one saved input x, gradient = g * d(x) with d from the subclass."""
    cdef SavedTensor _saved_x
    cdef DType _in_dtype

    cdef list _saved_list(self):
        return [self._saved_x] if self._saved_x is not None else []

    cdef void _release(self):
        self._released = True
        if self._saved_x is not None:
            self._saved_x.release()

    cdef tuple _eager(self, cnp.ndarray g):
        r = _as_ndarray(self._eager_formula(g, self._saved_x.data(self)))
        return (r.astype(self._in_dtype.numpy_dtype, copy=False),)

    cdef object _eager_formula(self, cnp.ndarray g, cnp.ndarray x):
        raise NotImplementedError

    cdef tuple _graph(self, Tensor g):
        return (to_dtype(_as_tensor(self.grad_formula_impl(g, self._saved_x.unpack(self))),
                         self._in_dtype, False),)


cdef Tensor _pointwise(Tensor x, cnp.ndarray out, type cls):
    """Wrap ``out`` and, if recording, attach a node of ``cls`` saving x."""
    cdef Tensor y = _wrap(out, x._dtype)
    cdef _PointwiseNode node
    if lucid_grad_enabled and x._requires_grad:
        node = <_PointwiseNode>(<PyTypeObject *>cls).tp_new(cls, <PyObject *>_EMPTY, NULL)
        node._next = (_edge(x),)
        node._in_dtype = x._dtype
        node._saved_x = _save(x, False)
        _set_history(y, node)
    return y


cdef Tensor _float_input(object input, str name):
    cdef Tensor x = _as_tensor(input)
    if not x._dtype.is_floating_point:
        raise UnsupportedDTypeError(f"{name}() needs a floating dtype, got {x._dtype}")
    return x


cdef class LeakyReluBackward(_PointwiseNode):
    """Backward of leaky_relu: g where x > 0, g * negative_slope elsewhere."""
    schema_v1 = _register("leaky_relu", "Promote", 1, saves_input=True)
    cdef double _slope

    cdef object _eager_formula(self, cnp.ndarray g, cnp.ndarray x):
        return np.where(x > 0, g, g * g.dtype.type(self._slope))

    def grad_formula_impl(self, g, x):
        return where(gt(x, 0), g, g * self._slope)


def leaky_relu(input, negative_slope=0.01):
    """x where x > 0, negative_slope * x elsewhere."""
    cdef Tensor x = _float_input(input, "leaky_relu")
    a = x._data
    out = _as_ndarray(np.where(a > 0, a, a * a.dtype.type(negative_slope)))
    cdef Tensor y = _pointwise(x, out, LeakyReluBackward)
    if y._grad_fn is not None:
        (<LeakyReluBackward>y._grad_fn)._slope = negative_slope
    return y


cdef class EluBackward(_PointwiseNode):
    """Backward of elu: g where x > 0, g * alpha * exp(x) elsewhere."""
    schema_v1 = _register("elu", "Promote", 1, saves_input=True)
    cdef double _alpha

    cdef object _eager_formula(self, cnp.ndarray g, cnp.ndarray x):
        with np.errstate(over="ignore"):
            return np.where(x > 0, g, g * g.dtype.type(self._alpha) * np.exp(np.minimum(x, 0)))

    def grad_formula_impl(self, g, x):
        return where(gt(x, 0), g, g * self._alpha * exp(minimum(x, 0.0)))


def elu(input, alpha=1.0):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""
    cdef Tensor x = _float_input(input, "elu")
    a = x._data
    with np.errstate(over="ignore"):
        out = _as_ndarray(np.where(a > 0, a, a.dtype.type(alpha) * np.expm1(np.minimum(a, 0))))
    cdef Tensor y = _pointwise(x, out, EluBackward)
    if y._grad_fn is not None:
        (<EluBackward>y._grad_fn)._alpha = alpha
    return y


cdef class ClampBackward(Node):
    """Backward of clamp: g where min <= x <= max (to x), and to tensor bounds where they bind."""
    schema_v1 = _register("clamp", "Promote", 3, saves_input=True)
    cdef SavedTensor _saved_x
    cdef object _lo, _hi          # Python scalars, ndarrays (tensor bounds) or None
    cdef tuple _lo_shape, _hi_shape
    cdef DType _in_dtype, _lo_dtype, _hi_dtype

    cdef list _saved_list(self):
        return [self._saved_x]

    cdef void _release(self):
        self._released = True
        self._saved_x.release()

    cdef tuple _eager(self, cnp.ndarray g):
        x = self._saved_x.data(self)
        zero = g.dtype.type(0)
        keep = np.ones(_shp(x), dtype=bool)
        glo = ghi = None
        if self._lo is not None:
            keep &= x >= self._lo
            if self._next[1][0] is not None:
                glo = _store(_sum_to(_as_ndarray(np.where(x < self._lo, g, zero)), self._lo_shape),
                             self._lo_dtype)
        if self._hi is not None:
            keep &= x <= self._hi
            if self._next[2][0] is not None:
                lo_ok = (x >= self._lo) if self._lo is not None else True
                ghi = _store(_sum_to(_as_ndarray(np.where((x > self._hi) & lo_ok, g, zero)),
                                     self._hi_shape), self._hi_dtype)
        gx = _store(np.where(keep, g, zero), self._in_dtype) if self._next[0][0] is not None else None
        return (gx, glo, ghi)

    cdef tuple _graph(self, Tensor g):
        return self.grad_formula_impl(g, self._saved_x.unpack(self))

    def grad_formula_impl(self, g, x):
        keep = ones_like(x, dtype=bool_)
        glo = ghi = None
        lo = _wrap(self._lo, self._lo_dtype) if isinstance(self._lo, np.ndarray) else self._lo
        hi = _wrap(self._hi, self._hi_dtype) if isinstance(self._hi, np.ndarray) else self._hi
        if lo is not None:
            keep = keep & ge(x, lo)
            if self._next[1][0] is not None:
                glo = _sum_to_t(where(lt(x, lo), g, 0.0), self._lo_shape)
        if hi is not None:
            keep = keep & le(x, hi)
            if self._next[2][0] is not None:
                bind = gt(x, hi) & (ge(x, lo) if lo is not None else True)
                ghi = _sum_to_t(where(bind, g, 0.0), self._hi_shape)
        gx = where(keep, g, 0.0) if self._next[0][0] is not None else None
        return (gx, glo, ghi)


cdef int _combine_codes(int code, Tensor x, Tensor tb, object sb):
    """Fold one more operand into a result type computed for (x, ...)."""
    cdef Tensor probe = _wrap(np.empty((1,) * _bi.max(1, cnp.PyArray_NDIM(x._data)),
                                       dtype=(<DType>_DTYPES[code]).numpy_dtype), <DType>_DTYPES[code])
    if cnp.PyArray_NDIM(x._data) == 0:
        probe = _wrap(np.empty((), dtype=(<DType>_DTYPES[code]).numpy_dtype), <DType>_DTYPES[code])
    return _result_code(probe, None, tb, None if tb is not None else sb)


def clamp(input, min=None, max=None):
    """input limited to [min, max] (either bound may be None, a number or a tensor);
    where min > max the result is max, as PyTorch."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    cdef Tensor x = _as_tensor(input)
    cdef Tensor tlo = <Tensor>min if isinstance(min, Tensor) else None
    cdef Tensor thi = <Tensor>max if isinstance(max, Tensor) else None
    # the result type of (input, min, max), as PyTorch
    cdef int code = _result_code(x, None, tlo, None if tlo is not None else min)
    if thi is not None or max is not None:
        code = _combine_codes(code, x, thi, max)
    if code != x._dtype.code:
        x = to_dtype(x, <DType>_DTYPES[code], False)
    a = x._data
    lo = tlo._data if tlo is not None else min
    hi = thi._data if thi is not None else max
    r = a
    try:
        if lo is not None:
            r = np.where(np.isnan(r) if a.dtype.kind == "f" else False, r, np.maximum(r, lo))
        if hi is not None:
            r = np.where(np.isnan(r) if a.dtype.kind == "f" else False, r, np.minimum(r, hi))
    except ValueError as e:
        raise ShapeError(f"clamp: bounds do not broadcast with the input: {e}") from None
    cdef cnp.ndarray out = _as_ndarray(r)
    if _shp(out) != _shp(a):
        raise ShapeError(f"clamp: bounds of shape {_shp(out)} would change the input's shape {_shp(a)}")
    out = out.astype(a.dtype, copy=False)
    cdef Tensor y = _wrap(out if out is not a else out.copy(), x._dtype)
    cdef ClampBackward node
    if lucid_grad_enabled and (x._requires_grad or (tlo is not None and tlo._requires_grad)
                               or (thi is not None and thi._requires_grad)):
        node = ClampBackward.__new__(ClampBackward)
        node._next = (_edge(x), _edge(tlo) if tlo is not None else _NO_EDGE,
                      _edge(thi) if thi is not None else _NO_EDGE)
        node._saved_x = _save(x, False)
        node._in_dtype = x._dtype
        node._lo, node._hi = lo, hi
        if tlo is not None:
            node._lo_shape, node._lo_dtype = _shp(tlo._data), tlo._dtype
        if thi is not None:
            node._hi_shape, node._hi_dtype = _shp(thi._data), thi._dtype
        _set_history(y, node)
    return y


def clip(input, min=None, max=None):
    """Alias of clamp."""
    return clamp(input, min, max)


cdef class NanToNumBackward(_PointwiseNode):
    """Backward of nan_to_num: g where x is finite, 0 where it was replaced."""
    schema_v1 = _register("nan_to_num", "KeepInput", 1, saves_input=True)

    cdef object _eager_formula(self, cnp.ndarray g, cnp.ndarray x):
        return np.where(np.isfinite(x), g, g.dtype.type(0))

    def grad_formula_impl(self, g, x):
        return where(isfinite(x), g, 0.0)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """nan -> ``nan``, +inf -> ``posinf`` (default: the dtype's max), -inf -> ``neginf``."""
    cdef Tensor x = _as_tensor(input)
    if not x._dtype.is_floating_point:
        return clone(x)
    out = _as_ndarray(np.nan_to_num(x._data, copy=True, nan=nan, posinf=posinf, neginf=neginf))
    return _pointwise(x, out, NanToNumBackward)


def gelu(input, approximate="none"):
    """Exact GELU, x * Phi(x) = x/2 * erfc(-x/sqrt(2)) (``approximate="none"``), or its
    tanh approximation (``approximate="tanh"``)."""
    if approximate == "none":
        return _gelu_exact(input)
    if approximate == "tanh":
        return gelu_tanh(input)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


for _name in ("leaky_relu", "elu", "clamp", "clip", "nan_to_num", "gelu"):
    _add_tensor_method(_name, globals()[_name])
_add_tensor_method("clamp_min", lambda self, min: clamp(self, min, None))
_add_tensor_method("clamp_max", lambda self, max: clamp(self, None, max))
# x.where(condition, y) is where(condition, x, y), as PyTorch's Tensor.where
_add_tensor_method("where", lambda self, condition, other: where(condition, self, other))
for _name in ("isnan", "isinf", "isfinite", "logical_not", "maximum", "minimum", "atan2",
              "hypot", "logaddexp", "fmod", "remainder", "eq", "ne", "lt", "le", "gt", "ge",
              "logical_and", "logical_or", "logical_xor", "bitwise_not"):
    _add_tensor_method(_name, globals()[_name])


# Schemas of ops that record no backward node (bool or index results) and of aliases
# whose node belongs to another op (view/flatten -> ReshapeBackward, broadcast_to ->
# ExpandBackward, split/chunk -> IndexBackward, clip -> ClampBackward), so that
# lucid.ops.schema() answers for every public op.
for _name, _amp, _arity in (
        ("eq", "Promote", 2), ("ne", "Promote", 2), ("lt", "Promote", 2), ("le", "Promote", 2),
        ("gt", "Promote", 2), ("ge", "Promote", 2), ("logical_and", "Promote", 2),
        ("logical_or", "Promote", 2), ("logical_xor", "Promote", 2),
        ("logical_not", "KeepInput", 1), ("isnan", "KeepInput", 1), ("isinf", "KeepInput", 1),
        ("isfinite", "KeepInput", 1), ("argmax", "KeepInput", 1), ("argmin", "KeepInput", 1),
        ("all", "KeepInput", 1), ("any", "KeepInput", 1), ("contiguous", "KeepInput", 1)):
    if _name not in _REGISTRY:
        _register(_name, _amp, _arity)
# aliases take the schema flags of the op whose node they record
for _name, _of in (("clip", "clamp"), ("view", "reshape"), ("flatten", "reshape"),
                   ("broadcast_to", "expand"), ("split", "index"), ("chunk", "index")):
    if _name not in _REGISTRY and _of in _REGISTRY:
        _s = <OpSchema>_REGISTRY[_of]
        _register(_name, _s.amp_policy.value, _s.arity, saves_input=_s.saves_input,
                  saves_output=_s.saves_output, deterministic=_s.deterministic)

_add_tensor_method("broadcast_to", broadcast_to)
