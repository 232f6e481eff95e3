# Binary arithmetic with NumPy broadcasting and PyTorch's type promotion, and the
# in-place variants. pow, maximum, minimum, atan2, hypot and logaddexp on floats
# run lucid's own kernels (src/lucid_binary.c), forward and fused backward; the
# rest (add, sub, mul, div, fmod, remainder, and integer pow / maximum / minimum)
# are NumPy's ufuncs, which are already SIMD and broadcast-aware.

cdef extern from "lucid_vforce.h" nogil:
    enum:
        LV_BC_NONE
        LV_BC_A
        LV_BC_B
    void lucid_vnegf(float *y, const float *x, const int *n)
    void lucid_vneg(double *y, const double *x, const int *n)
    void lucid_vpowf(float *, const float *, const float *, const int *, int)
    void lucid_vpow(double *, const double *, const double *, const int *, int)
    void lucid_vmaximumf(float *, const float *, const float *, const int *, int)
    void lucid_vmaximum(double *, const double *, const double *, const int *, int)
    void lucid_vminimumf(float *, const float *, const float *, const int *, int)
    void lucid_vminimum(double *, const double *, const double *, const int *, int)
    void lucid_vatan2f(float *, const float *, const float *, const int *, int)
    void lucid_vatan2(double *, const double *, const double *, const int *, int)
    void lucid_vhypotf(float *, const float *, const float *, const int *, int)
    void lucid_vhypot(double *, const double *, const double *, const int *, int)
    void lucid_vlogaddexpf(float *, const float *, const float *, const int *, int)
    void lucid_vlogaddexp(double *, const double *, const double *, const int *, int)
    void lucid_vpow_gradf(float *, float *, const float *, const float *, const float *,
                          const float *, const int *, int)
    void lucid_vpow_grad(double *, double *, const double *, const double *, const double *,
                         const double *, const int *, int)
    void lucid_vmaximum_gradf(float *, float *, const float *, const float *, const float *,
                              const float *, const int *, int)
    void lucid_vmaximum_grad(double *, double *, const double *, const double *, const double *,
                             const double *, const int *, int)
    void lucid_vminimum_gradf(float *, float *, const float *, const float *, const float *,
                              const float *, const int *, int)
    void lucid_vminimum_grad(double *, double *, const double *, const double *, const double *,
                             const double *, const int *, int)
    void lucid_vatan2_gradf(float *, float *, const float *, const float *, const float *,
                            const float *, const int *, int)
    void lucid_vatan2_grad(double *, double *, const double *, const double *, const double *,
                           const double *, const int *, int)
    void lucid_vhypot_gradf(float *, float *, const float *, const float *, const float *,
                            const float *, const int *, int)
    void lucid_vhypot_grad(double *, double *, const double *, const double *, const double *,
                           const double *, const int *, int)
    void lucid_vlogaddexp_gradf(float *, float *, const float *, const float *, const float *,
                                const float *, const int *, int)
    void lucid_vlogaddexp_grad(double *, double *, const double *, const double *, const double *,
                               const double *, const int *, int)

ctypedef void (*bf32_t)(float *, const float *, const float *, const int *, int) noexcept nogil
ctypedef void (*bf64_t)(double *, const double *, const double *, const int *, int) noexcept nogil
ctypedef void (*bg32_t)(float *, float *, const float *, const float *, const float *,
                        const float *, const int *, int) noexcept nogil
ctypedef void (*bg64_t)(double *, double *, const double *, const double *, const double *,
                        const double *, const int *, int) noexcept nogil

cdef struct BinaryKernels:
    bf32_t f32
    bf64_t f64
    bg32_t g32
    bg64_t g64

cdef enum:
    _OP_ADD = 0
    _OP_SUB = 1
    _OP_MUL = 2
    _OP_DIV = 3
    _OP_POW = 4
    _OP_MAXIMUM = 5
    _OP_MINIMUM = 6
    _OP_ATAN2 = 7
    _OP_HYPOT = 8
    _OP_LOGADDEXP = 9
    _OP_FMOD = 10
    _OP_REMAINDER = 11

# Forward ufunc of the ops from _OP_MAXIMUM on (indexed by op - _OP_MAXIMUM).
_EXTRA_UFUNCS = (np.maximum, np.minimum, np.arctan2, np.hypot, np.logaddexp, np.fmod,
                 np.remainder)

# lucid's kernels for the float ops from _OP_POW to _OP_LOGADDEXP, indexed by op - _OP_POW.
cdef BinaryKernels _BIN_K[6]
_BIN_K[0] = BinaryKernels(lucid_vpowf, lucid_vpow, lucid_vpow_gradf, lucid_vpow_grad)
_BIN_K[1] = BinaryKernels(lucid_vmaximumf, lucid_vmaximum, lucid_vmaximum_gradf, lucid_vmaximum_grad)
_BIN_K[2] = BinaryKernels(lucid_vminimumf, lucid_vminimum, lucid_vminimum_gradf, lucid_vminimum_grad)
_BIN_K[3] = BinaryKernels(lucid_vatan2f, lucid_vatan2, lucid_vatan2_gradf, lucid_vatan2_grad)
_BIN_K[4] = BinaryKernels(lucid_vhypotf, lucid_vhypot, lucid_vhypot_gradf, lucid_vhypot_grad)
_BIN_K[5] = BinaryKernels(lucid_vlogaddexpf, lucid_vlogaddexp, lucid_vlogaddexp_gradf,
                          lucid_vlogaddexp_grad)


cdef void _bin_run(const BinaryKernels *k, int num, char *z, const char *a, const char *b,
                   Py_ssize_t n, int bc, Py_ssize_t isz) noexcept nogil:
    """One contiguous piece of n outputs; a broadcast operand (bc) stays put."""
    cdef Py_ssize_t sa = 0 if bc == LV_BC_A else isz
    cdef Py_ssize_t sb = 0 if bc == LV_BC_B else isz
    cdef int m
    while n > 0:
        m = <int>(n if n < _CHUNK else _CHUNK)
        if num == cnp.NPY_FLOAT:
            k.f32(<float *>z, <const float *>a, <const float *>b, &m, bc)
        else:
            k.f64(<double *>z, <const double *>a, <const double *>b, &m, bc)
        z += m * isz
        a += m * sa
        b += m * sb
        n -= m


cdef void _bin_par(const BinaryKernels *k, int num, char *z, const char *a, const char *b,
                   Py_ssize_t n, int bc, Py_ssize_t isz) noexcept nogil:
    cdef int nt = _threads_for(n)
    cdef Py_ssize_t per, c, start, nchunks
    cdef Py_ssize_t sa = 0 if bc == LV_BC_A else isz
    cdef Py_ssize_t sb = 0 if bc == LV_BC_B else isz
    if nt == 1:
        _bin_run(k, num, z, a, b, n, bc, isz)
        return
    per = _piece_len(n, nt)
    nchunks = (n + per - 1) // per
    for c in prange(nchunks, num_threads=nt, schedule="static"):
        start = c * per
        _bin_run(k, num, z + start * isz, a + start * sa, b + start * sb,
                 per if n - start > per else n - start, bc, isz)


cdef void _bgrad_run(const BinaryKernels *k, int num, char *ga, char *gb, const char *g,
                     const char *a, const char *b, const char *y, Py_ssize_t n, int bc,
                     Py_ssize_t isz) noexcept nogil:
    cdef Py_ssize_t sa = 0 if bc == LV_BC_A else isz
    cdef Py_ssize_t sb = 0 if bc == LV_BC_B else isz
    cdef int m
    while n > 0:
        m = <int>(n if n < _CHUNK else _CHUNK)
        if num == cnp.NPY_FLOAT:
            k.g32(<float *>ga, <float *>gb, <const float *>g, <const float *>a,
                  <const float *>b, <const float *>y, &m, bc)
        else:
            k.g64(<double *>ga, <double *>gb, <const double *>g, <const double *>a,
                  <const double *>b, <const double *>y, &m, bc)
        if ga != NULL:
            ga += m * isz
        if gb != NULL:
            gb += m * isz
        if y != NULL:
            y += m * isz
        g += m * isz
        a += m * sa
        b += m * sb
        n -= m


cdef void _bgrad_par(const BinaryKernels *k, int num, char *ga, char *gb, const char *g,
                     const char *a, const char *b, const char *y, Py_ssize_t n, int bc,
                     Py_ssize_t isz) noexcept nogil:
    cdef int nt = _threads_for(n)
    cdef Py_ssize_t per, c, start, nchunks, off
    cdef Py_ssize_t sa = 0 if bc == LV_BC_A else isz
    cdef Py_ssize_t sb = 0 if bc == LV_BC_B else isz
    if nt == 1:
        _bgrad_run(k, num, ga, gb, g, a, b, y, n, bc, isz)
        return
    per = _piece_len(n, nt)
    nchunks = (n + per - 1) // per
    for c in prange(nchunks, num_threads=nt, schedule="static"):
        start = c * per
        off = start * isz
        _bgrad_run(k, num, ga + off if ga != NULL else NULL, gb + off if gb != NULL else NULL,
                   g + off, a + start * sa, b + start * sb, y + off if y != NULL else NULL,
                   per if n - start > per else n - start, bc, isz)


cdef inline bint _full(cnp.ndarray x, tuple shape):
    return cnp.PyArray_IS_C_CONTIGUOUS(x) and _shp(x) == shape


cdef tuple _bshape(cnp.ndarray a, cnp.ndarray b):
    """The broadcast shape of a and b (the common cases without np.broadcast_shapes,
    which is Python code and costs microseconds)."""
    cdef tuple sa = _shp(a), sb = _shp(b)
    if sa == sb:
        return sa
    if cnp.PyArray_SIZE(a) == 1 and cnp.PyArray_NDIM(a) <= cnp.PyArray_NDIM(b):
        return sb
    if cnp.PyArray_SIZE(b) == 1 and cnp.PyArray_NDIM(b) <= cnp.PyArray_NDIM(a):
        return sa
    return np.broadcast_shapes(sa, sb)


cdef int _bc_mode(cnp.ndarray a, cnp.ndarray b, tuple shape):
    """How the kernels can read a and b for an output of `shape`: LV_BC_NONE (both
    full and contiguous), LV_BC_A / LV_BC_B (that one is a single value), or -1
    (a general broadcast or a strided layout)."""
    cdef bint fa = _full(a, shape), fb = _full(b, shape)
    if fa and fb:
        return LV_BC_NONE
    if cnp.PyArray_SIZE(a) == 1 and fb:
        return LV_BC_A
    if cnp.PyArray_SIZE(b) == 1 and fa:
        return LV_BC_B
    return -1


cdef cnp.ndarray _bin_forward(int idx, object xa, object xb):
    """op(xa, xb) with lucid's kernels, for float16/32/64 operands (ndarrays or NumPy
    scalars) of one dtype. float16 computes in float32."""
    cdef cnp.ndarray a = xa if type(xa) is np.ndarray else np.asarray(xa)
    cdef cnp.ndarray b = xb if type(xb) is np.ndarray else np.asarray(xb)
    if cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT16:
        return _to_half(_bin_forward(idx, a.astype(np.float32), b.astype(np.float32)))
    cdef tuple shape = _bshape(a, b)
    cdef const BinaryKernels *k = &_BIN_K[idx]
    cdef int num = cnp.PyArray_TYPE(a)
    cdef Py_ssize_t isz = cnp.PyArray_ITEMSIZE(a)
    cdef int bc = _bc_mode(a, b, shape)
    cdef cnp.ndarray out, ain, bin_, zout
    if bc < 0 and cnp.PyArray_SIZE(a) == 1 and cnp.PyArray_SIZE(b) == 1:
        a = np.ascontiguousarray(a).reshape(shape)
        b = np.ascontiguousarray(b).reshape(shape)
        bc = LV_BC_NONE
    if bc >= 0:
        out = cnp.PyArray_EMPTY(len(shape), cnp.PyArray_DIMS(a) if bc != LV_BC_A else cnp.PyArray_DIMS(b),
                                num, 0)
        if cnp.PyArray_SIZE(out) < _NOGIL_MIN:
            _bin_run(k, num, cnp.PyArray_BYTES(out), cnp.PyArray_BYTES(a), cnp.PyArray_BYTES(b),
                     cnp.PyArray_SIZE(out), bc, isz)
        else:
            with nogil:
                _bin_par(k, num, cnp.PyArray_BYTES(out), cnp.PyArray_BYTES(a),
                         cnp.PyArray_BYTES(b), cnp.PyArray_SIZE(out), bc, isz)
        return out
    # General broadcasting or strided operands: contiguous pieces of _PIECE elements
    # (NumPy's buffered iterator), never a full copy of either operand.
    it = np.nditer([a, b, None], flags=["external_loop", "buffered", "zerosize_ok"],
                   op_flags=[["readonly", "contig"], ["readonly", "contig"],
                             ["writeonly", "allocate", "contig"]],
                   order="K", buffersize=_PIECE)
    with it:
        for ain, bin_, zout in it:
            with nogil:
                _bin_run(k, num, cnp.PyArray_BYTES(zout), cnp.PyArray_BYTES(ain),
                         cnp.PyArray_BYTES(bin_), cnp.PyArray_SIZE(zout), LV_BC_NONE, isz)
        return it.operands[2]


cdef tuple _bin_backward(int idx, cnp.ndarray g, object xa, object xb, object y,
                         bint want_a, bint want_b):
    """The fused backward of op idx: (grad_a, grad_b) in g's (the output's) shape,
    None where not wanted. xa / xb are the saved operands (arrays or Python
    scalars), y the saved output or None (read only by the ops that need it)."""
    cdef object dt = g.dtype
    if cnp.PyArray_TYPE(g) == cnp.NPY_FLOAT16:
        f32 = np.float32
        ha, hb = _bin_backward(idx, g.astype(f32), np.asarray(xa, f32), np.asarray(xb, f32),
                               None if y is None else np.asarray(y, f32), want_a, want_b)
        return (None if ha is None else _to_half(ha), None if hb is None else _to_half(hb))
    cdef tuple shape = _shp(g)
    cdef cnp.ndarray a = np.asarray(xa, dt), b = np.asarray(xb, dt)
    g = np.ascontiguousarray(g)
    cdef cnp.ndarray yy = None if y is None else np.ascontiguousarray(y, dt)
    cdef int bc = _bc_mode(a, b, shape)
    if bc < 0:       # general broadcasting: give each operand the output's shape
        a = np.ascontiguousarray(np.broadcast_to(a, shape))
        b = np.ascontiguousarray(np.broadcast_to(b, shape))
        bc = LV_BC_NONE
    cdef cnp.ndarray ga = np.empty(shape, dt) if want_a else None
    cdef cnp.ndarray gb = np.empty(shape, dt) if want_b else None
    cdef char *pa = cnp.PyArray_BYTES(ga) if want_a else NULL
    cdef char *pb = cnp.PyArray_BYTES(gb) if want_b else NULL
    cdef const char *py = cnp.PyArray_BYTES(yy) if yy is not None else NULL
    cdef Py_ssize_t n = cnp.PyArray_SIZE(g)
    with nogil:
        _bgrad_par(&_BIN_K[idx], cnp.PyArray_TYPE(g), pa, pb, cnp.PyArray_BYTES(g),
                   cnp.PyArray_BYTES(a), cnp.PyArray_BYTES(b), py, n, bc, cnp.PyArray_ITEMSIZE(g))
    return (ga, gb)


cdef enum:
    _IP_ADD = 0
    _IP_SUB = 1
    _IP_MUL = 2
    _IP_DIV = 3
    _IP_FILL = 4


cdef inline bint _is_scalar(object v):
    return isinstance(v, (int, float)) or (
        isinstance(v, np.generic) and (<object>v).dtype.kind in "biuf")


cdef inline int _scalar_code(object v):
    if isinstance(v, (bool, np.bool_)):
        return DT_BOOL
    if isinstance(v, (int, np.integer)):
        return DT_INT64
    return DT_FLOAT32      # Python floats take the default float dtype, as in PyTorch


cdef inline int _combine(int higher, int lower):
    if higher < 0:
        return lower
    if lower < 0:
        return higher
    if _is_float_code(higher):
        return higher
    if higher == DT_BOOL or _is_float_code(lower):
        return _promote2(higher, lower)
    return higher


cdef int _result_code(Tensor ta, object sa, Tensor tb, object sb):
    """PyTorch's result_type: tensors with dims outrank 0-d tensors, which outrank
    Python scalars, unless a lower category brings a higher kind (int -> float)."""
    cdef int dim_res = -1, zero_res = -1, wrapped = -1
    for t, s in ((ta, sa), (tb, sb)):
        if t is not None:
            if cnp.PyArray_NDIM((<Tensor>t)._data) > 0:
                dim_res = _promote2(dim_res, (<Tensor>t)._dtype.code) if dim_res >= 0 else (<Tensor>t)._dtype.code
            else:
                zero_res = _promote2(zero_res, (<Tensor>t)._dtype.code) if zero_res >= 0 else (<Tensor>t)._dtype.code
        else:
            c = _scalar_code(s)
            wrapped = _promote2(wrapped, c) if wrapped >= 0 else c
    return _combine(dim_res, _combine(zero_res, wrapped))


cdef inline object _operand(Tensor t, object s, DType dt):
    if t is None:
        return dt.numpy_dtype.type(s)
    if t._dtype is dt:
        return t._data
    return t._data.astype(dt.numpy_dtype)


def _broadcast_error(Tensor ta, Tensor tb, e):
    sa = _shp(ta._data) if ta is not None else ()
    sb = _shp(tb._data) if tb is not None else ()
    return ShapeError(f"shapes {sa} and {sb} do not broadcast: {e}")


cdef cnp.ndarray _sum_to(cnp.ndarray g, tuple shape):
    """Sum a broadcast gradient back to ``shape``."""
    if _shp(g) == shape:
        return g
    cdef int lead = cnp.PyArray_NDIM(g) - len(shape)
    cdef object r = g
    if lead > 0:
        r = np.add.reduce(g, axis=tuple(range(lead)))
    axes = tuple(i for i in range(len(shape)) if shape[i] == 1 and r.shape[i] != 1)
    if axes:
        r = np.add.reduce(r, axis=axes, keepdims=True)
    return _as_ndarray(r)


cdef Tensor _sum_to_t(Tensor g, tuple shape):
    """Graph-mode ``_sum_to``, built from lucid ops."""
    if _shp(g._data) == shape:
        return g
    cdef int lead = cnp.PyArray_NDIM(g._data) - len(shape)
    cdef Tensor r = g
    if lead > 0:
        r = sum(r, tuple(range(lead)))
    axes = tuple(i for i in range(len(shape)) if shape[i] == 1 and _shp(r._data)[i] != 1)
    if axes:
        r = sum(r, axes, True)
    return r


cdef class BinaryBackward(Node):
    """Shared part of the binary nodes: the inputs' shapes and dtypes for the
    broadcast reduction, and each operand as a saved tensor or a Python scalar."""
    cdef tuple _shape_a, _shape_b
    cdef DType _dt_a, _dt_b
    cdef SavedTensor _saved_a, _saved_b
    cdef object _scalar_a, _scalar_b

    cdef list _saved_list(self):
        return [s for s in (self._saved_a, self._saved_b) if s is not None]

    cdef object _arr(self, int side):
        s = self._saved_a if side == 0 else self._saved_b
        if s is not None:
            return (<SavedTensor>s).data(self)
        return self._scalar_a if side == 0 else self._scalar_b

    cdef object _ten(self, int side):
        s = self._saved_a if side == 0 else self._saved_b
        if s is not None:
            return (<SavedTensor>s).unpack(self)
        return self._scalar_a if side == 0 else self._scalar_b

    cdef inline bint _wants(self, int side):
        return self._next[side][0] is not None

    cdef object _out_data(self):
        return None

    cdef tuple _kernel_grad(self, cnp.ndarray g, int op):
        """The eager backward of a float op with a lucid kernel: one fused pass."""
        ga, gb = _bin_backward(op - _OP_POW, g, self._arr(0), self._arr(1), self._out_data(),
                               self._wants(0), self._wants(1))
        return self._finish_eager(ga, gb)

    cdef tuple _finish_eager(self, object ga, object gb):
        if ga is not None:
            ga = _sum_to(_as_ndarray(ga), self._shape_a)
            if cnp.PyArray_TYPE(<cnp.ndarray>ga) != self._dt_a.typenum:
                ga = (<cnp.ndarray>ga).astype(self._dt_a.numpy_dtype)
        if gb is not None:
            gb = _sum_to(_as_ndarray(gb), self._shape_b)
            if cnp.PyArray_TYPE(<cnp.ndarray>gb) != self._dt_b.typenum:
                gb = (<cnp.ndarray>gb).astype(self._dt_b.numpy_dtype)
        return (ga, gb)

    cdef tuple _finish_graph(self, object ga, object gb):
        if ga is not None:
            ga = to_dtype(_sum_to_t(_as_tensor(ga), self._shape_a), self._dt_a, False)
        if gb is not None:
            gb = to_dtype(_sum_to_t(_as_tensor(gb), self._shape_b), self._dt_b, False)
        return (ga, gb)

    cdef tuple _graph(self, Tensor g):
        ga, gb = self.grad_formula_impl(g, self._ten(0), self._ten(1))
        return self._finish_graph(ga, gb)

    cdef void _release(self):
        self._released = True
        if self._saved_a is not None:
            self._saved_a.release()
        if self._saved_b is not None:
            self._saved_b.release()

    @property
    def _saved_self(self):
        return self._ten(0)

    @property
    def _saved_other(self):
        return self._ten(1)


cdef class AddBackward(BinaryBackward):
    """Backward of add: grad_a = g, grad_b = alpha * g (summed over broadcast dims)."""
    schema_v1 = _register("add", "Promote", 2)
    cdef object _alpha

    cdef tuple _eager(self, cnp.ndarray g):
        return self._finish_eager(
            g if self._wants(0) else None,
            (g if self._alpha == 1 else g * self._alpha) if self._wants(1) else None)

    def grad_formula_impl(self, g, a, b):
        return (g if self._wants(0) else None,
                (g if self._alpha == 1 else g * self._alpha) if self._wants(1) else None)


cdef class SubBackward(BinaryBackward):
    """Backward of sub: grad_a = g, grad_b = -alpha * g."""
    schema_v1 = _register("sub", "Promote", 2)
    cdef object _alpha

    cdef tuple _eager(self, cnp.ndarray g):
        return self._finish_eager(
            g if self._wants(0) else None,
            (np.negative(g) if self._alpha == 1 else g * (-self._alpha)) if self._wants(1) else None)

    def grad_formula_impl(self, g, a, b):
        return (g if self._wants(0) else None,
                (-g if self._alpha == 1 else g * (-self._alpha)) if self._wants(1) else None)


cdef class MulBackward(BinaryBackward):
    """Backward of mul: grad_a = g * b, grad_b = g * a (each saved only if the other needs it)."""
    schema_v1 = _register("mul", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        return self._finish_eager(
            g * self._arr(1) if self._wants(0) else None,
            g * self._arr(0) if self._wants(1) else None)

    def grad_formula_impl(self, g, a, b):
        return (g * b if self._wants(0) else None, g * a if self._wants(1) else None)


cdef class DivBackward(BinaryBackward):
    """Backward of div: grad_a = g / b, grad_b = -g * a / (b * b)."""
    schema_v1 = _register("div", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        b = self._arr(1)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self._finish_eager(
                g / b if self._wants(0) else None,
                -g * self._arr(0) / (b * b) if self._wants(1) else None)

    def grad_formula_impl(self, g, a, b):
        return (g / b if self._wants(0) else None,
                -g * a / (b * b) if self._wants(1) else None)


cdef class NegBackward(Node):
    """Backward of neg: -g."""
    schema_v1 = _register("neg", "Promote", 1)

    cdef tuple _eager(self, cnp.ndarray g):
        return (_neg_array(g),)

    cdef tuple _graph(self, Tensor g):
        return (self.grad_formula_impl(g),)

    def grad_formula_impl(self, g):
        return -g


cdef class OutBinaryBackward(BinaryBackward):
    """A binary node whose formula may also read the output."""
    cdef SavedTensor _saved_out

    cdef list _saved_list(self):
        return [s for s in (self._saved_a, self._saved_b, self._saved_out) if s is not None]

    cdef void _release(self):
        BinaryBackward._release(self)
        if self._saved_out is not None:
            self._saved_out.release()

    cdef object _out_data(self):
        return self._saved_out.data(self) if self._saved_out is not None else None

    cdef tuple _graph(self, Tensor g):
        out = self._saved_out.unpack(self) if self._saved_out is not None else None
        ga, gb = self.grad_formula_impl(g, self._ten(0), self._ten(1), out)
        return self._finish_graph(ga, gb)


cdef class PowBackward(OutBinaryBackward):
    """Backward of pow(a, b) = a ** b:
    grad_a = g * b * a ** (b - 1)  (0 where b == 0),
    grad_b = g * out * log(a)      (0 where a == 0 and b >= 0).
    Saves a and b as needed, and the output when b needs a gradient."""
    schema_v1 = _register("pow", "Promote", 2, saves_input=True, saves_output=True)

    cdef tuple _eager(self, cnp.ndarray g):
        return self._kernel_grad(g, _OP_POW)

    def grad_formula_impl(self, g, a, b, out=None):
        ga = gb = None
        if self._wants(0):
            if isinstance(b, Tensor):
                keep = tensor(((<Tensor>b)._data != 0).astype((<Tensor>b)._data.dtype))
                ga = g * b * pow(a, b - 1) * keep
            elif b == 0:
                ga = g * 0
            else:
                ga = g * b * pow(a, b - 1)
        if self._wants(1):
            a_arr = (<Tensor>a)._data if isinstance(a, Tensor) else np.asarray(a)
            b_arr = (<Tensor>b)._data
            zero = (a_arr == 0) & (b_arr >= 0)
            keep = tensor((~zero).astype(b_arr.dtype))
            if isinstance(a, Tensor):
                safe_a = a * keep + (1 - keep)     # log(1) = 0 where masked, graph intact elsewhere
            else:
                safe_a = tensor(np.where(zero, 1, a_arr).astype(b_arr.dtype))
            gb = g * out * log(safe_a) * keep
        return (ga, gb)


cdef object _binary(object a, object b, int op, object alpha):
    cdef Tensor ta = None, tb = None
    cdef object sa = None, sb = None
    if isinstance(a, Tensor):
        ta = <Tensor>a
    elif _is_scalar(a):
        sa = a.item() if isinstance(a, np.generic) else a
    else:
        ta = _as_tensor(a)
    if isinstance(b, Tensor):
        tb = <Tensor>b
    elif _is_scalar(b):
        sb = b.item() if isinstance(b, np.generic) else b
    else:
        tb = _as_tensor(b)
    if ta is None and tb is None:
        raise TypeError("expected at least one Tensor operand")
    cdef int code
    if ta is not None and tb is not None and ta._dtype is tb._dtype:
        code = ta._dtype.code          # one dtype: the result's, whatever the dims
    else:
        code = _result_code(ta, sa, tb, sb)
    if (op == _OP_DIV or _OP_ATAN2 <= op <= _OP_LOGADDEXP) and code < DT_FLOAT16:
        code = DT_FLOAT32          # true division (and atan2, ...) of integers gives the default float
    cdef DType dt = <DType>_DTYPES[code]
    xa = _operand(ta, sa, dt)
    xb = _operand(tb, sb, dt)
    try:
        if op == _OP_ADD:
            r = xa + xb if alpha == 1 else xa + xb * dt.numpy_dtype.type(alpha)
        elif op == _OP_SUB:
            if code == DT_BOOL:
                raise UnsupportedDTypeError("subtraction of two bool tensors is not supported; "
                                            "use logical_xor or ~")
            r = xa - xb if alpha == 1 else xa - xb * dt.numpy_dtype.type(alpha)
        elif op == _OP_MUL:
            r = xa * xb
        elif _OP_POW <= op <= _OP_LOGADDEXP and dt.is_floating_point:
            r = _bin_forward(op - _OP_POW, xa, xb)
        elif op == _OP_MAXIMUM or op == _OP_MINIMUM:
            r = _EXTRA_UFUNCS[op - _OP_MAXIMUM](xa, xb)
        else:
            if (op == _OP_FMOD or op == _OP_REMAINDER) and code < DT_FLOAT16 and np.any(np.asarray(xb) == 0):
                raise ZeroDivisionError("integer division by zero in " +
                                        ("fmod" if op == _OP_FMOD else "remainder"))
            # x/0 and (-1)**0.5 are IEEE results (inf, nan), not warnings, as in PyTorch.
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                if op == _OP_DIV:
                    r = np.true_divide(xa, xb)
                elif op == _OP_POW:
                    r = np.power(xa, xb)
                else:
                    r = _EXTRA_UFUNCS[op - _OP_MAXIMUM](xa, xb)
    except ValueError as e:
        if "broadcast" in str(e):
            raise _broadcast_error(ta, tb, e) from None
        raise LucidError(str(e)) from None
    cdef cnp.ndarray arr = _as_ndarray(r)
    if cnp.PyArray_TYPE(arr) != dt.typenum:
        arr = arr.astype(dt.numpy_dtype)
    cdef Tensor out = _wrap(arr, dt)
    if lucid_grad_enabled and ((ta is not None and ta._requires_grad) or
                               (tb is not None and tb._requires_grad)):
        _record_binary(out, op, ta, sa, tb, sb, alpha)
    return out


cdef void _record_binary(Tensor out, int op, Tensor ta, object sa, Tensor tb, object sb,
                         object alpha) except *:
    cdef BinaryBackward node
    if op == _OP_ADD:
        node = AddBackward.__new__(AddBackward)
        (<AddBackward>node)._alpha = alpha
    elif op == _OP_SUB:
        node = SubBackward.__new__(SubBackward)
        (<SubBackward>node)._alpha = alpha
    elif op == _OP_MUL:
        node = MulBackward.__new__(MulBackward)
    elif op == _OP_DIV:
        node = DivBackward.__new__(DivBackward)
    elif op == _OP_POW:
        node = PowBackward.__new__(PowBackward)
    else:
        node = <BinaryBackward>(<PyTypeObject *>_EXTRA_NODES[op - _OP_MAXIMUM]).tp_new(
            _EXTRA_NODES[op - _OP_MAXIMUM], <PyObject *>_EMPTY, NULL)
    cdef bint need_a = ta is not None and ta._requires_grad
    cdef bint need_b = tb is not None and tb._requires_grad
    node._next = (_edge(ta) if ta is not None else _NO_EDGE,
                  _edge(tb) if tb is not None else _NO_EDGE)
    if ta is not None:
        node._shape_a = _shp(ta._data)
        node._dt_a = ta._dtype
    if tb is not None:
        node._shape_b = _shp(tb._data)
        node._dt_b = tb._dtype
    node._scalar_a = sa
    node._scalar_b = sb
    # Save only what the formulas read.
    if op == _OP_MUL:
        if need_a and tb is not None:
            node._saved_b = _save(tb, False)
        if need_b and ta is not None:
            node._saved_a = _save(ta, False)
    elif op == _OP_DIV:
        if tb is not None:
            node._saved_b = _save(tb, False)
        if need_b and ta is not None:
            node._saved_a = _save(ta, False)
    elif op == _OP_POW:
        if ta is not None:
            node._saved_a = _save(ta, False)
        if tb is not None:
            node._saved_b = _save(tb, False)
        if need_b:
            (<OutBinaryBackward>node)._saved_out = _save(out, True)
    elif op >= _OP_MAXIMUM:
        if ta is not None:
            node._saved_a = _save(ta, False)
        if tb is not None:
            node._saved_b = _save(tb, False)
        if op == _OP_HYPOT or op == _OP_LOGADDEXP:
            (<OutBinaryBackward>node)._saved_out = _save(out, True)
    _set_history(out, node)


# -- maximum, minimum, atan2, hypot, logaddexp, fmod, remainder ------------------

cdef class MaximumBackward(BinaryBackward):
    """Backward of maximum: g goes to the larger input; ties split it evenly (as PyTorch)."""
    schema_v1 = _register("maximum", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        return self._kernel_grad(g, _OP_MAXIMUM)

    def grad_formula_impl(self, g, a, b):
        half = where(eq(a, b), g * 0.5, g)
        return (where(lt(a, b), 0.0, half) if self._wants(0) else None,
                where(gt(a, b), 0.0, half) if self._wants(1) else None)


cdef class MinimumBackward(BinaryBackward):
    """Backward of minimum: g goes to the smaller input; ties split it evenly."""
    schema_v1 = _register("minimum", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        return self._kernel_grad(g, _OP_MINIMUM)

    def grad_formula_impl(self, g, a, b):
        half = where(eq(a, b), g * 0.5, g)
        return (where(gt(a, b), 0.0, half) if self._wants(0) else None,
                where(lt(a, b), 0.0, half) if self._wants(1) else None)


cdef class Atan2Backward(BinaryBackward):
    """Backward of atan2(a, b): grad_a = g b / (a^2 + b^2), grad_b = -g a / (a^2 + b^2)."""
    schema_v1 = _register("atan2", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        return self._kernel_grad(g, _OP_ATAN2)

    def grad_formula_impl(self, g, a, b):
        r = g / (a * a + b * b)
        return (r * b if self._wants(0) else None, -r * a if self._wants(1) else None)


cdef class HypotBackward(OutBinaryBackward):
    """Backward of hypot(a, b): grad_a = g a / out, grad_b = g b / out."""
    schema_v1 = _register("hypot", "Promote", 2, saves_input=True, saves_output=True)

    cdef tuple _eager(self, cnp.ndarray g):
        return self._kernel_grad(g, _OP_HYPOT)

    def grad_formula_impl(self, g, a, b, out):
        r = g / out
        return (r * a if self._wants(0) else None, r * b if self._wants(1) else None)


cdef class LogaddexpBackward(OutBinaryBackward):
    """Backward of logaddexp(a, b) = log(e^a + e^b): grad_a = g e^(a - out), grad_b = g e^(b - out)."""
    schema_v1 = _register("logaddexp", "Promote", 2, saves_input=True, saves_output=True)

    cdef tuple _eager(self, cnp.ndarray g):
        return self._kernel_grad(g, _OP_LOGADDEXP)

    def grad_formula_impl(self, g, a, b, out):
        return (g * exp(a - out) if self._wants(0) else None,
                g * exp(b - out) if self._wants(1) else None)


cdef class FmodBackward(BinaryBackward):
    """Backward of fmod(a, b) = a - trunc(a / b) b: grad_a = g, grad_b = -g trunc(a / b)."""
    schema_v1 = _register("fmod", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._finish_eager(
                g if self._wants(0) else None,
                -g * np.trunc(np.true_divide(self._arr(0), self._arr(1))) if self._wants(1) else None)

    def grad_formula_impl(self, g, a, b):
        return (g if self._wants(0) else None, -g * trunc(a / b) if self._wants(1) else None)


cdef class RemainderBackward(BinaryBackward):
    """Backward of remainder(a, b) = a - floor(a / b) b: grad_a = g, grad_b = -g floor(a / b)."""
    schema_v1 = _register("remainder", "Promote", 2, saves_input=True)

    cdef tuple _eager(self, cnp.ndarray g):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._finish_eager(
                g if self._wants(0) else None,
                -g * np.floor(np.true_divide(self._arr(0), self._arr(1))) if self._wants(1) else None)

    def grad_formula_impl(self, g, a, b):
        return (g if self._wants(0) else None, -g * floor(a / b) if self._wants(1) else None)


_EXTRA_NODES = (MaximumBackward, MinimumBackward, Atan2Backward, HypotBackward,
                LogaddexpBackward, FmodBackward, RemainderBackward)


def maximum(input, other):
    """Element-wise maximum (nan if either is nan); ties split the gradient evenly."""
    return _binary(input, other, _OP_MAXIMUM, 1)


def minimum(input, other):
    """Element-wise minimum (nan if either is nan); ties split the gradient evenly."""
    return _binary(input, other, _OP_MINIMUM, 1)


def atan2(input, other):
    """Angle of the point (other, input): atan(input / other) in the right quadrant."""
    return _binary(input, other, _OP_ATAN2, 1)


def hypot(input, other):
    """sqrt(input**2 + other**2) without overflow."""
    return _binary(input, other, _OP_HYPOT, 1)


def logaddexp(input, other):
    """log(exp(input) + exp(other)), stable for large arguments."""
    return _binary(input, other, _OP_LOGADDEXP, 1)


def fmod(input, other):
    """C fmod: the remainder has the sign of the dividend."""
    return _binary(input, other, _OP_FMOD, 1)


def remainder(input, other):
    """Python's %: the remainder has the sign of the divisor."""
    return _binary(input, other, _OP_REMAINDER, 1)


def add(input, other, *, alpha=1):
    """input + alpha * other, with broadcasting."""
    return _binary(input, other, _OP_ADD, alpha)


def sub(input, other, *, alpha=1):
    """input - alpha * other, with broadcasting."""
    return _binary(input, other, _OP_SUB, alpha)


def mul(input, other):
    """input * other, with broadcasting."""
    return _binary(input, other, _OP_MUL, 1)


def div(input, other):
    """True division input / other; integer inputs give float32."""
    return _binary(input, other, _OP_DIV, 1)


def pow(input, exponent):
    """input ** exponent; either may be a tensor or a Python scalar."""
    return _binary(input, exponent, _OP_POW, 1)


cdef cnp.ndarray _neg_array(cnp.ndarray x):
    """-x: lucid's kernel for contiguous float32/64, NumPy otherwise."""
    cdef int num = cnp.PyArray_TYPE(x)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(x)
    cdef int m
    cdef cnp.ndarray y
    if not ((num == cnp.NPY_FLOAT or num == cnp.NPY_DOUBLE) and cnp.PyArray_IS_C_CONTIGUOUS(x)
            and n < _CHUNK):
        return _as_ndarray(np.negative(x))
    y = _empty_like_arr(x, num)
    m = <int>n
    with nogil:
        if num == cnp.NPY_FLOAT:
            lucid_vnegf(<float *>cnp.PyArray_DATA(y), <const float *>cnp.PyArray_DATA(x), &m)
        else:
            lucid_vneg(<double *>cnp.PyArray_DATA(y), <const double *>cnp.PyArray_DATA(x), &m)
    return y


def neg(input):
    """-input."""
    cdef Tensor x = _as_tensor(input)
    if x._dtype is bool_:
        raise UnsupportedDTypeError("negation of a bool tensor is not supported; use ~ instead")
    cdef Tensor y = _wrap(_neg_array(x._data), x._dtype)
    cdef NegBackward node
    if lucid_grad_enabled and x._requires_grad:
        node = NegBackward.__new__(NegBackward)
        node._next = (_edge(x),)
        _set_history(y, node)
    return y


cdef class FillBackward(Node):
    """Backward of fill_/zero_ on a tensor with history: the old values get no gradient."""
    schema_v1 = _register("fill_", "KeepInput", 1)

    cdef tuple _eager(self, cnp.ndarray g):
        return (None,)

    cdef tuple _graph(self, Tensor g):
        return (None,)

    def grad_formula_impl(self, g):
        return None


cdef object _inplace(Tensor self, object other, int op):
    """``self op= other``: writes into self's memory and bumps its version counter."""
    cdef bint recording = lucid_grad_enabled and (
        self._requires_grad or (isinstance(other, Tensor) and (<Tensor>other)._requires_grad))
    if recording and self._requires_grad and self._grad_fn is None:
        raise LucidError(
            "a leaf tensor that requires grad is being used in an in-place operation; "
            "wrap it in `with lucid.no_grad():` (e.g. for an optimizer step)")
    if recording and self._grad_fn is not None and _is_view(self):
        raise LucidError(
            "in-place operation on a view (e.g. x[0], x.T) of a tensor with autograd history "
            "is not supported: lucid can't carry the gradient through the base. Use out-of-place "
            "ops, or write through the base with index assignment (x[0] = ...)")
    cdef Tensor res
    cdef Tensor src
    cdef FillBackward fnode
    if op == _IP_FILL:
        if isinstance(other, Tensor):
            if cnp.PyArray_SIZE((<Tensor>other)._data) != 1:
                raise ShapeError("fill_ takes a Python scalar or a one-element tensor")
            other = (<Tensor>other)._data.item()
        if not _is_scalar(other):
            raise TypeError(f"fill_ takes a number, got {type(other).__name__}")
        if not self._dtype.is_floating_point and isinstance(other, float) and other != int(other):
            raise UnsupportedDTypeError(f"cannot fill a {self._dtype} tensor with {other!r}")
        if not cnp.PyArray_ISWRITEABLE(self._data):
            raise LucidError("this tensor's memory is read-only (e.g. a broadcast view); clone() it first")
        self._data.fill(other)
        self._bump()
        if recording:      # under no_grad a write is invisible to autograd, as in PyTorch
            _invalidate_views(self, self._data)
        if recording and self._requires_grad:
            fnode = FillBackward.__new__(FillBackward)
            fnode._next = (_edge(self),)
            _set_history(self, fnode)
        return self
    if recording:
        # The node must see the old value of self (mul/div save it), not the one we
        # are about to write: give it a snapshot carrying self's history.
        src = _wrap(self._data.copy() if op >= _IP_MUL else self._data, self._dtype)
        src._grad_fn = self._grad_fn
        src._output_nr = self._output_nr
        src._requires_grad = self._requires_grad
    else:
        src = self
    if op == _IP_ADD:
        res = _binary(src, other, _OP_ADD, 1)
    elif op == _IP_SUB:
        res = _binary(src, other, _OP_SUB, 1)
    elif op == _IP_MUL:
        res = _binary(src, other, _OP_MUL, 1)
    else:
        res = _binary(src, other, _OP_DIV, 1)
    if _shp(res._data) != _shp(self._data):
        raise ShapeError(
            f"output with shape {_shp(self._data)} doesn't match the broadcast shape "
            f"{_shp(res._data)}")
    if res._dtype is not self._dtype and not (
            self._dtype.is_floating_point or not res._dtype.is_floating_point) :
        raise UnsupportedDTypeError(
            f"result type {res._dtype} can't be cast to the desired output type {self._dtype}")
    if res._dtype.is_floating_point is False and res._dtype.code > self._dtype.code and self._dtype is bool_:
        raise UnsupportedDTypeError(
            f"result type {res._dtype} can't be cast to the desired output type {self._dtype}")
    if not cnp.PyArray_ISWRITEABLE(self._data):
        raise LucidError("this tensor's memory is read-only (e.g. a NumPy array marked "
                         "non-writeable or a broadcast view); clone() it first")
    np.copyto(self._data, res._data, casting="unsafe")
    self._bump()
    if recording:          # under no_grad a write is invisible to autograd, as in PyTorch
        _invalidate_views(self, self._data)
    if recording:
        self._grad_fn = res._grad_fn
        self._output_nr = 0
        self._requires_grad = True
    return self
