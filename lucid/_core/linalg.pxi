# Linear algebra through NumPy's BLAS: matmul, dot, outer.


cdef object _mm(object a, object b):
    """np.matmul, with float16 computed in float32 (NumPy has no float16 BLAS)."""
    if (<cnp.ndarray>a).dtype == np.float16:
        return _as_ndarray(np.matmul((<cnp.ndarray>a).astype(np.float32),
                                     (<cnp.ndarray>b).astype(np.float32)).astype(np.float16))
    return _as_ndarray(np.matmul(a, b))


cdef inline DType _promote_pair(Tensor a, Tensor b):
    return <DType>_DTYPES[_promote2(a._dtype.code, b._dtype.code)]


cdef class MatmulBackward(Node):
    """Backward of matmul (1-d operands promoted to matrices, batch dims broadcast):
    grad_a = g @ b^T, grad_b = a^T @ g, summed back over broadcast batch dims."""
    schema_v1 = _register("matmul", "Promote", 2, saves_input=True)
    cdef SavedTensor _saved_a, _saved_b
    cdef tuple _shape_a, _shape_b
    cdef DType _dt_a, _dt_b

    cdef list _saved_list(self):
        return [s for s in (self._saved_a, self._saved_b) if s is not None]

    cdef void _release(self):
        self._released = True
        if self._saved_a is not None:
            self._saved_a.release()
        if self._saved_b is not None:
            self._saved_b.release()

    cdef tuple _eager(self, cnp.ndarray g):
        cdef int nda = len(self._shape_a), ndb = len(self._shape_b)
        G = g
        if ndb == 1:
            G = G[..., None]
        if nda == 1:
            G = np.expand_dims(G, -2)
        ga = gb = None
        if self._next[0][0] is not None:
            b = _cast_arr(self._saved_b.data(self), _dtype_of_array(g))
            B = b[:, None] if ndb == 1 else b
            ga = _mm(G, np.swapaxes(B, -1, -2))
            ga = _sum_to(ga, (1,) + self._shape_a if nda == 1 else self._shape_a)
            ga = _cast_arr(ga.reshape(self._shape_a), self._dt_a)
        if self._next[1][0] is not None:
            a = _cast_arr(self._saved_a.data(self), _dtype_of_array(g))
            A = a[None, :] if nda == 1 else a
            gb = _mm(np.swapaxes(A, -1, -2), G)
            gb = _sum_to(gb, self._shape_b + (1,) if ndb == 1 else self._shape_b)
            gb = _cast_arr(gb.reshape(self._shape_b), self._dt_b)
        return (ga, gb)

    cdef tuple _graph(self, Tensor g):
        a = self._saved_a.unpack(self) if self._saved_a is not None else None
        b = self._saved_b.unpack(self) if self._saved_b is not None else None
        return self.grad_formula_impl(g, a, b)

    def grad_formula_impl(self, g, a, b):
        cdef int nda = len(self._shape_a), ndb = len(self._shape_b)
        G = g
        if ndb == 1:
            G = unsqueeze(G, -1)
        if nda == 1:
            G = unsqueeze(G, -2)
        ga = gb = None
        if self._next[0][0] is not None:
            B = unsqueeze(b, -1) if ndb == 1 else b
            ga = matmul(G, transpose(B, -1, -2))
            ga = _sum_to_t(ga, (1,) + self._shape_a if nda == 1 else self._shape_a)
            ga = _cast_t(reshape(ga, self._shape_a), self._dt_a)
        if self._next[1][0] is not None:
            A = unsqueeze(a, 0) if nda == 1 else a
            gb = matmul(transpose(A, -1, -2), G)
            gb = _sum_to_t(gb, self._shape_b + (1,) if ndb == 1 else self._shape_b)
            gb = _cast_t(reshape(gb, self._shape_b), self._dt_b)
        return (ga, gb)


def matmul(input, other):
    """Matrix product with NumPy's matmul semantics: 1-d operands are vectors, dims
    beyond the last two are batch dims and broadcast."""
    cdef Tensor a = _as_tensor(input)
    cdef Tensor b = _as_tensor(other)
    if cnp.PyArray_NDIM(a._data) == 0 or cnp.PyArray_NDIM(b._data) == 0:
        raise ShapeError(f"both arguments to matmul need to be at least 1D, but they are "
                         f"{cnp.PyArray_NDIM(a._data)}D and {cnp.PyArray_NDIM(b._data)}D")
    cdef DType dt = _promote_pair(a, b)
    try:
        r = _mm(_cast_arr(a._data, dt), _cast_arr(b._data, dt))
    except ValueError as e:
        raise ShapeError(f"matmul: shapes {_shp(a._data)} and {_shp(b._data)} cannot be "
                         f"multiplied: {e}") from None
    cdef Tensor y = _wrap(r, dt)
    cdef MatmulBackward node
    if lucid_grad_enabled and dt.is_floating_point and (a._requires_grad or b._requires_grad):
        node = MatmulBackward.__new__(MatmulBackward)
        node._next = (_edge(a), _edge(b))
        node._shape_a = _shp(a._data)
        node._shape_b = _shp(b._data)
        node._dt_a = a._dtype
        node._dt_b = b._dtype
        if a._requires_grad:
            node._saved_b = _save(b, False)
        if b._requires_grad:
            node._saved_a = _save(a, False)
        _set_history(y, node)
    return y


cdef class _PairBackward(Node):
    """Shared part of dot and outer: two saved operands, each saved only if the other
    needs a gradient."""
    cdef SavedTensor _saved_a, _saved_b
    cdef DType _dt_a, _dt_b

    cdef list _saved_list(self):
        return [s for s in (self._saved_a, self._saved_b) if s is not None]

    cdef void _release(self):
        self._released = True
        if self._saved_a is not None:
            self._saved_a.release()
        if self._saved_b is not None:
            self._saved_b.release()

    cdef tuple _graph(self, Tensor g):
        a = self._saved_a.unpack(self) if self._saved_a is not None else None
        b = self._saved_b.unpack(self) if self._saved_b is not None else None
        return self.grad_formula_impl(g, a, b)


cdef class DotBackward(_PairBackward):
    """Backward of dot: grad_a = g * b, grad_b = g * a."""
    schema_v1 = _register("dot", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        ga = gb = None
        if self._next[0][0] is not None:
            ga = _cast_arr(_as_ndarray(g * self._saved_b.data(self)), self._dt_a)
        if self._next[1][0] is not None:
            gb = _cast_arr(_as_ndarray(g * self._saved_a.data(self)), self._dt_b)
        return (ga, gb)

    def grad_formula_impl(self, g, a, b):
        ga = _cast_t(mul(g, b), self._dt_a) if self._next[0][0] is not None else None
        gb = _cast_t(mul(g, a), self._dt_b) if self._next[1][0] is not None else None
        return (ga, gb)


cdef void _check_1d(Tensor a, Tensor b, str op) except *:
    if cnp.PyArray_NDIM(a._data) != 1 or cnp.PyArray_NDIM(b._data) != 1:
        raise ShapeError(f"{op}(): 1D tensors expected, but got {cnp.PyArray_NDIM(a._data)}D "
                         f"and {cnp.PyArray_NDIM(b._data)}D tensors")


cdef void _record_pair(_PairBackward node, Tensor y, Tensor a, Tensor b) except *:
    node._next = (_edge(a), _edge(b))
    node._dt_a = a._dtype
    node._dt_b = b._dtype
    if a._requires_grad:
        node._saved_b = _save(b, False)
    if b._requires_grad:
        node._saved_a = _save(a, False)
    _set_history(y, node)


def dot(input, other):
    """Inner product of two 1-d tensors of the same length."""
    cdef Tensor a = _as_tensor(input)
    cdef Tensor b = _as_tensor(other)
    _check_1d(a, b, "dot")
    if _shp(a._data)[0] != _shp(b._data)[0]:
        raise ShapeError(f"dot(): inconsistent tensor size, expected tensor [{_shp(a._data)[0]}] "
                         f"and src [{_shp(b._data)[0]}] to have the same number of elements")
    cdef DType dt = _promote_pair(a, b)
    cdef Tensor y = _wrap(_mm(_cast_arr(a._data, dt), _cast_arr(b._data, dt)), dt)
    if lucid_grad_enabled and dt.is_floating_point and (a._requires_grad or b._requires_grad):
        _record_pair(DotBackward.__new__(DotBackward), y, a, b)
    return y


def inner(input, other):
    """dot for 1-d tensors."""
    return dot(input, other)


cdef class OuterBackward(_PairBackward):
    """Backward of outer: grad_a = g @ b, grad_b = g^T @ a."""
    schema_v1 = _register("outer", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        ga = gb = None
        if self._next[0][0] is not None:
            ga = _cast_arr(_mm(g, _cast_arr(self._saved_b.data(self), _dtype_of_array(g))),
                           self._dt_a)
        if self._next[1][0] is not None:
            gb = _cast_arr(_mm(_cast_arr(self._saved_a.data(self), _dtype_of_array(g)), g),
                           self._dt_b)
        return (ga, gb)

    def grad_formula_impl(self, g, a, b):
        ga = _cast_t(matmul(g, b), self._dt_a) if self._next[0][0] is not None else None
        gb = _cast_t(matmul(a, g), self._dt_b) if self._next[1][0] is not None else None
        return (ga, gb)


def outer(input, vec2):
    """Outer product of two 1-d tensors: out[i, j] = input[i] * vec2[j]."""
    cdef Tensor a = _as_tensor(input)
    cdef Tensor b = _as_tensor(vec2)
    _check_1d(a, b, "outer")
    cdef DType dt = _promote_pair(a, b)
    cdef Tensor y = _wrap(_as_ndarray(np.multiply.outer(_cast_arr(a._data, dt),
                                                        _cast_arr(b._data, dt))), dt)
    if lucid_grad_enabled and dt.is_floating_point and (a._requires_grad or b._requires_grad):
        _record_pair(OuterBackward.__new__(OuterBackward), y, a, b)
    return y


def ger(input, vec2):
    return outer(input, vec2)


for _name, _fn in (("matmul", matmul), ("dot", dot), ("outer", outer), ("inner", inner)):
    _add_tensor_method(_name, _fn)
