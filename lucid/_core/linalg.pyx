"""The linalg family: matmul, dot, outer through NumPy's BLAS on the cpu, MLX's matmul
and outer on the gpu (the same nodes on both devices)."""
cimport numpy as cnp

import numpy as np

from lucid._core.core cimport *
from lucid._core.core import LucidError, ShapeError, UnsupportedDTypeError, export, ops, register

cnp.import_array()


cdef object _mm(object a, object b, DType dt):
    """np.matmul, with float16 / bfloat16 computed in float32 and rounded once (NumPy has
    no half BLAS)."""
    if _is_half_code(dt.code):
        return _store(np.matmul(_half_to_f32(<cnp.ndarray>a), _half_to_f32(<cnp.ndarray>b)), dt)
    return _as_ndarray(np.matmul(a, b))


cdef class LinalgCPU(Kernel):
    """The BLAS forward of matmul / dot (np.matmul) or outer."""
    cdef bint outer

    cdef object run2(self, object a, object b, DType dt, object params):
        if self.outer:
            if _is_half_code(dt.code):
                return _store(np.multiply.outer(_half_to_f32(<cnp.ndarray>a),
                                                _half_to_f32(<cnp.ndarray>b)), dt)
            return np.multiply.outer(a, b)
        return _mm(a, b, dt)


cdef OpSchema _pair_schema(str name, bint outer):
    cdef OpSchema s = register(name, "Promote", 2, saves_input=True)
    cdef LinalgCPU k = LinalgCPU.__new__(LinalgCPU)
    k.outer = outer
    s.cpu = k
    return s


cdef OpSchema _S_matmul = _pair_schema("matmul", False)
cdef OpSchema _S_dot = _pair_schema("dot", False)
cdef OpSchema _S_outer = _pair_schema("outer", True)


cdef class PairBackward(Node):
    """Shared part of matmul, dot and outer: each operand saved only if the other
    needs a gradient (grad_a reads b, grad_b reads a); shapes and dtypes of both."""
    cdef SavedTensor _saved_a, _saved_b
    cdef tuple _shape_a, _shape_b
    cdef DType _dt_a, _dt_b

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        cdef Tensor a = <Tensor>inputs[0], b = <Tensor>inputs[1]
        self._shape_a, self._dt_a = _shp(a._data), a._dtype
        self._shape_b, self._dt_b = _shp(b._data), b._dtype
        if a._requires_grad:
            self._saved_b = _save(b, False)
        if b._requires_grad:
            self._saved_a = _save(a, False)

    cdef list _saved_list(self):
        return [s for s in (self._saved_a, self._saved_b) if s is not None]

    cdef tuple _graph(self, Tensor g):
        a = self._saved_a.unpack(self) if self._saved_a is not None else None
        b = self._saved_b.unpack(self) if self._saved_b is not None else None
        return self.grad_formula_impl(g, a, b)


cdef class MatmulBackward(PairBackward):
    """Backward of matmul (1-d operands promoted to matrices, batch dims broadcast):
    grad_a = g @ b^T, grad_b = a^T @ g, summed back over broadcast batch dims."""
    schema_v1 = _S_matmul

    def grad_formula_impl(self, g, a, b):
        cdef int nda = len(self._shape_a), ndb = len(self._shape_b)
        G = g
        if ndb == 1:
            G = ops.unsqueeze(G, -1)
        if nda == 1:
            G = ops.unsqueeze(G, -2)
        ga = gb = None
        if self._next[0][0] is not None:
            B = ops.unsqueeze(b, -1) if ndb == 1 else b
            ga = matmul(G, ops.transpose(B, -1, -2))
            ga = _sum_to_t(ga, (1,) + self._shape_a if nda == 1 else self._shape_a)
            ga = to_dtype(ops.reshape(ga, self._shape_a), self._dt_a, False)
        if self._next[1][0] is not None:
            A = ops.unsqueeze(a, 0) if nda == 1 else a
            gb = matmul(ops.transpose(A, -1, -2), G)
            gb = _sum_to_t(gb, self._shape_b + (1,) if ndb == 1 else self._shape_b)
            gb = to_dtype(ops.reshape(gb, self._shape_b), self._dt_b, False)
        return (ga, gb)


cdef class DotBackward(PairBackward):
    """Backward of dot: grad_a = g * b, grad_b = g * a."""
    schema_v1 = _S_dot

    def grad_formula_impl(self, g, a, b):
        ga = to_dtype(g * b, self._dt_a, False) if self._next[0][0] is not None else None
        gb = to_dtype(g * a, self._dt_b, False) if self._next[1][0] is not None else None
        return (ga, gb)


cdef class OuterBackward(PairBackward):
    """Backward of outer: grad_a = g @ b, grad_b = g^T @ a."""
    schema_v1 = _S_outer

    def grad_formula_impl(self, g, a, b):
        ga = to_dtype(matmul(g, b), self._dt_a, False) if self._next[0][0] is not None else None
        gb = to_dtype(matmul(a, g), self._dt_b, False) if self._next[1][0] is not None else None
        return (ga, gb)


_S_matmul._bind(MatmulBackward)
_S_dot._bind(DotBackward)
_S_outer._bind(OuterBackward)
for _s in (_S_matmul, _S_dot, _S_outer):      # _pair() hands gpu operands to MLX
    (<OpSchema>_s).gpu = True


cdef object _mm_mx(object a, object b, DType dt):
    """matmul of two MLX arrays of ``dt``. MLX multiplies floating arrays only; integer
    and bool products are summed from a broadcast element-wise product (exact, in int64
    as NumPy; bool as NumPy's logical or of ands)."""
    m = mlx()
    va, vb = a.ndim == 1, b.ndim == 1
    sa, sb = tuple(a.shape), tuple(b.shape)          # (wraparound is off: no [-1])
    if sa[len(sa) - 1] == 0 and sb[0 if vb else len(sb) - 2] == 0:
        # MLX 0.32 leaves a product over an empty inner dim uninitialised: zeros
        shape = m.matmul(m.zeros(a.shape, dtype=m.float32), m.zeros(b.shape, dtype=m.float32)).shape
        return m.zeros(shape, dtype=mx_dtype(dt))
    if dt.is_floating_point:
        return m.matmul(a, b)
    A = a.reshape(1, -1) if va else a
    B = b.reshape(-1, 1) if vb else b
    if A.shape[A.ndim - 1] != B.shape[B.ndim - 2]:
        m.matmul(A.astype(m.float32), B.astype(m.float32))    # MLX's own shape error
    ai = A.astype(m.int64)
    bi = B.astype(m.int64)
    r = m.sum(m.expand_dims(ai, -1) * m.expand_dims(bi, -3), axis=-2)
    if va:
        r = m.squeeze(r, -2)
    if vb:
        r = m.squeeze(r, -1)
    return r != 0 if dt.code == DT_BOOL else r.astype(mx_dtype(dt))


cdef object _pair_mx(OpSchema s, Tensor a, Tensor b, DType dt):
    """The gpu forward of matmul / dot / outer, both operands cast to ``dt``."""
    m = mlx()
    if (a._mx is None) != (b._mx is None):
        raise LucidError(f"Expected all tensors to be on the same device, but lucid.{s.name}() "
                         f"got tensors on {a.device} and {b.device}; move one with .gpu() "
                         "or .cpu()")
    xa, xb = _mx_of(a, dt), _mx_of(b, dt)
    if s is _S_outer:
        return m.outer(xa, xb)
    return _mm_mx(xa, xb, dt)


cdef str _not_multipliable(str name, tuple sa, tuple sb):
    """Why shapes ``sa`` and ``sb`` (both at least 1-d) have no matrix product, in lucid's
    words rather than NumPy's gufunc signature."""
    cdef Py_ssize_t na = len(sa), nb = len(sb)
    cdef str head = f"{name}: shapes {sa} and {sb} cannot be multiplied"
    k_a = sa[na - 1]
    k_b = sb[0] if nb == 1 else sb[nb - 2]
    if k_a != k_b:
        where = "size" if nb == 1 else "second-to-last dimension"
        return (f"{head}: the first's last dimension ({k_a}) must equal the second's "
                f"{where} ({k_b})")
    return (f"{head}: the batch dimensions {sa[:max(na - 2, 0)]} and {sb[:max(nb - 2, 0)]} "
            "do not broadcast")


cdef Tensor _pair(OpSchema s, Tensor a, Tensor b):
    """Run a pair op in the promoted dtype and record its node. Inside lucid.autocast
    the operands are first cast to the autocast dtype (recorded casts): the matmul
    family is where half precision pays."""
    if autocast_code() >= 0 and s.amp == AMP_PROMOTE:
        a = _amp_lowp(a)
        b = _amp_lowp(b)
    cdef DType dt = dtype_of_code(_promote2(a._dtype.code, b._dtype.code))
    cdef Tensor y
    try:
        if a._mx is not None or b._mx is not None:
            r = _pair_mx(s, a, b, dt)
            y = _wrap_mx(r if r.dtype == mx_dtype(dt) else r.astype(mx_dtype(dt)), dt)
        else:
            r = s.cpu.run2(_store(a._data, dt), _store(b._data, dt), dt, None)
            y = _wrap(_as_ndarray(r), dt)
    except ValueError:
        raise ShapeError(_not_multipliable(s.name, _shp(a._data), _shp(b._data))) from None
    if grad_enabled() and dt.is_floating_point and (a._requires_grad or b._requires_grad):
        record(s, y, (a, b), None)
    return y


def matmul(input, other):
    """Matrix product with NumPy's matmul semantics: 1-d operands are vectors, dims
    beyond the last two are batch dims and broadcast."""
    cdef Tensor a = _as_tensor_dev(input)
    cdef Tensor b = _as_tensor_dev(other)
    if cnp.PyArray_NDIM(a._data) == 0 or cnp.PyArray_NDIM(b._data) == 0:
        raise ShapeError(f"both arguments to matmul need to be at least 1D, but they are "
                         f"{cnp.PyArray_NDIM(a._data)}D and {cnp.PyArray_NDIM(b._data)}D")
    return _pair(_S_matmul, a, b)


cdef void _check_1d(Tensor a, Tensor b, str op) except *:
    if cnp.PyArray_NDIM(a._data) != 1 or cnp.PyArray_NDIM(b._data) != 1:
        raise ShapeError(f"{op}(): 1D tensors expected, but got {cnp.PyArray_NDIM(a._data)}D "
                         f"and {cnp.PyArray_NDIM(b._data)}D tensors")


def dot(input, other):
    """Inner product of two 1-d tensors of the same length."""
    cdef Tensor a = _as_tensor_dev(input)
    cdef Tensor b = _as_tensor_dev(other)
    _check_1d(a, b, "dot")
    if _shp(a._data)[0] != _shp(b._data)[0]:
        raise ShapeError(f"dot(): inconsistent tensor size, expected tensor [{_shp(a._data)[0]}] "
                         f"and src [{_shp(b._data)[0]}] to have the same number of elements")
    return _pair(_S_dot, a, b)


def inner(input, other):
    """dot for 1-d tensors."""
    return dot(input, other)


def outer(input, vec2):
    """Outer product of two 1-d tensors: out[i, j] = input[i] * vec2[j]."""
    cdef Tensor a = _as_tensor_dev(input)
    cdef Tensor b = _as_tensor_dev(vec2)
    _check_1d(a, b, "outer")
    return _pair(_S_outer, a, b)


def ger(input, vec2):
    """Alias of outer."""
    return outer(input, vec2)


# -- linear: x @ W^T + b as one op -------------------------------------------------------
# One node instead of matmul, transpose and add: the forward is one BLAS call with W^T as
# a transposed view (no copy) and the bias added in place; the eager backward is
# grad_x = g W, grad_W = g^T x (both operands as views: BLAS's transpose flag) and
# grad_b = the column sums of g, each computed only when its input needs it.

cdef OpSchema _S_linear = register("linear", "Promote", 3, saves_input=True)


cdef class LinearBackward(Node):
    """Backward of linear (y = x W^T + b, x of shape (..., in)): grad_x = g W,
    grad_W = g^T x and grad_b = sum(g) over the leading dims of x."""
    schema_v1 = _S_linear
    cdef SavedTensor _saved_x, _saved_w
    cdef tuple _x_shape

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        cdef Tensor x = <Tensor>inputs[0], w = <Tensor>inputs[1]
        self._x_shape = _shp(x._data)
        if x._requires_grad:
            self._saved_w = _save(w, False)
        if w._requires_grad:
            self._saved_x = _save(x, False)

    cdef list _saved_list(self):
        return [s for s in (self._saved_x, self._saved_w) if s is not None]

    cdef tuple _graph(self, Tensor g):
        x = self._saved_x.unpack(self) if self._saved_x is not None else None
        w = self._saved_w.unpack(self) if self._saved_w is not None else None
        return self.grad_formula_impl(g, x, w)

    cdef tuple _eager(self, cnp.ndarray g):
        cdef Py_ssize_t nout = _shp(g)[len(_shp(g)) - 1] if cnp.PyArray_NDIM(g) else 1
        g2 = g.reshape(-1, nout)
        gx = gw = gb = None
        if self._next[0][0] is not None:
            gx = _as_ndarray(np.matmul(g, self._saved_w.data(self))).reshape(self._x_shape)
        if self._next[1][0] is not None:
            x = self._saved_x.data(self)
            gw = _as_ndarray(np.matmul(g2.T, x.reshape(-1, _shp(x)[len(_shp(x)) - 1])))
        if self._next[2][0] is not None:
            gb = _as_ndarray(np.add.reduce(g2, axis=0))
        return (gx, gw, gb)

    def grad_formula_impl(self, g, x, w):
        nout = g.shape[g.ndim - 1] if g.ndim else 1
        g2 = ops.reshape(g, (-1, nout))
        gx = gw = gb = None
        if self._next[0][0] is not None:
            gx = ops.reshape(matmul(g, w), self._x_shape)
        if self._next[1][0] is not None:
            gw = matmul(ops.transpose(g2, 0, 1), ops.reshape(x, (-1, x.shape[x.ndim - 1])))
        if self._next[2][0] is not None:
            gb = ops.sum(g2, 0)
        return (gx, gw, gb)


_S_linear._bind(LinearBackward)


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` as one op on cpu float32 / float64 tensors of one dtype
    (weight (out, in), bias (out,)); None for anything else (gpu, half, mixed or integer
    dtypes, autocast), which the caller computes with matmul and add."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor)) or \
            (bias is not None and not isinstance(bias, Tensor)) or autocast_code() >= 0:
        return None
    cdef Tensor x = <Tensor>input, w = <Tensor>weight
    cdef Tensor b = <Tensor>bias if bias is not None else None
    cdef DType dt = x._dtype
    if dt.code != DT_FLOAT32 and dt.code != DT_FLOAT64 or w._dtype is not dt or \
            (b is not None and b._dtype is not dt) or x._mx is not None or w._mx is not None \
            or (b is not None and b._mx is not None):
        return None
    cdef cnp.ndarray xa = x._data, wa = w._data
    cdef int nd = cnp.PyArray_NDIM(xa)
    if cnp.PyArray_NDIM(wa) != 2 or nd == 0 or _shp(xa)[nd - 1] != _shp(wa)[1] or \
            (b is not None and _shp(b._data) != (_shp(wa)[0],)):
        raise ShapeError(f"linear: input {_shp(xa)}, weight {_shp(wa)}"
                         + (f" and bias {_shp(b._data)}" if b is not None else "")
                         + " do not fit (weight (out, in), input (..., in), bias (out,))")
    cdef Py_ssize_t nin = _shp(wa)[1], nout = _shp(wa)[0]
    if nd > 2 and cnp.PyArray_IS_C_CONTIGUOUS(xa):   # one 2-d product, not a batched loop
        r = np.matmul(xa.reshape(-1, nin), wa.T).reshape(_shp(xa)[:nd - 1] + (nout,))
    else:
        r = np.matmul(xa, wa.T)
    cdef cnp.ndarray out = _as_ndarray(r)
    if b is not None:
        np.add(out, b._data, out=out)
    cdef Tensor y = _wrap(out, dt)
    if grad_enabled() and (x._requires_grad or w._requires_grad or
                           (b is not None and b._requires_grad)):
        record(_S_linear, y, (x, w, b), None)
    return y


for _fn in (matmul, dot, inner, outer):
    export(_fn, method=True)
export(ger)
