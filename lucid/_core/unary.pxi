# Element-wise unary ops: the shared forward/backward machinery. The per-op
# pieces (schema, node class, public function) are generated from optable.py
# into _unary.pxi; this file is what they all call.

ctypedef void (*vf32_t)(float *, const float *, const int *) noexcept nogil
ctypedef void (*vf64_t)(double *, const double *, const int *) noexcept nogil
ctypedef void (*gf32_t)(float *, const float *, const float *, const int *) noexcept nogil
ctypedef void (*gf64_t)(double *, const double *, const double *, const int *) noexcept nogil

cdef struct UnaryKernels:
    vf32_t f32
    vf64_t f64
    gf32_t g32
    gf64_t g64

# Kernels take an int count; longer arrays go through in chunks of this many
# elements (a multiple of the kernels' block, so chunking never changes a result).
# Below _NOGIL_MIN elements, releasing the GIL costs more than the kernel.
cdef enum:
    _CHUNK = 1 << 30
    _NOGIL_MIN = 8192


cdef void _map_f32(vf32_t f, float *y, const float *x, Py_ssize_t n) noexcept nogil:
    cdef int m
    while n > 0:
        m = <int>(n if n < _CHUNK else _CHUNK)
        f(y, x, &m)
        y += m
        x += m
        n -= m


cdef void _map_f64(vf64_t f, double *y, const double *x, Py_ssize_t n) noexcept nogil:
    cdef int m
    while n > 0:
        m = <int>(n if n < _CHUNK else _CHUNK)
        f(y, x, &m)
        y += m
        x += m
        n -= m


cdef void _grad_f32(gf32_t f, float *gx, const float *g, const float *s, Py_ssize_t n) noexcept nogil:
    cdef int m
    while n > 0:
        m = <int>(n if n < _CHUNK else _CHUNK)
        f(gx, g, s, &m)
        gx += m
        g += m
        s += m
        n -= m


cdef void _grad_f64(gf64_t f, double *gx, const double *g, const double *s, Py_ssize_t n) noexcept nogil:
    cdef int m
    while n > 0:
        m = <int>(n if n < _CHUNK else _CHUNK)
        f(gx, g, s, &m)
        gx += m
        g += m
        s += m
        n -= m


cdef inline void _map(const UnaryKernels *k, int num, void *y, const void *x,
                      Py_ssize_t n) noexcept nogil:
    if num == cnp.NPY_FLOAT:
        _map_f32(k.f32, <float *>y, <const float *>x, n)
    else:
        _map_f64(k.f64, <double *>y, <const double *>x, n)


cdef inline void _grad_apply(const UnaryKernels *k, int num, void *gx, const void *g, const void *s,
                       Py_ssize_t n) noexcept nogil:
    if num == cnp.NPY_FLOAT:
        _grad_f32(k.g32, <float *>gx, <const float *>g, <const float *>s, n)
    else:
        _grad_f64(k.g64, <double *>gx, <const double *>g, <const double *>s, n)


# -- threads ---------------------------------------------------------------------
# Arrays of at least _PAR_MIN elements are split into one contiguous piece per
# thread (OpenMP). Each element is computed by the same vector code whichever
# piece it lands in, so the result is bitwise the same for any thread count.
# The threshold comes from bench/ (see the README): below it, waking a second
# thread costs more than it saves.
cdef Py_ssize_t _PAR_MIN = 1 << 15


cdef int _default_threads() except -1:
    import os
    env = os.environ.get("LUCID_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"LUCID_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


cdef int _num_threads = _default_threads()


def set_num_threads(int n):
    """Use ``n`` threads for large element-wise kernels (1 = no threading)."""
    global _num_threads
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    _num_threads = n


def get_num_threads():
    """The number of threads large element-wise kernels use."""
    return _num_threads


cdef inline int _threads_for(Py_ssize_t n) noexcept nogil:
    if _num_threads <= 1 or n < _PAR_MIN:
        return 1
    return _num_threads


cdef inline Py_ssize_t _piece_len(Py_ssize_t n, int nt) noexcept nogil:
    """One thread's share of n elements, rounded up to a multiple of 64."""
    return ((n + nt - 1) // nt + 63) // 64 * 64


cdef void _map_par(const UnaryKernels *k, int num, void *y, const void *x, Py_ssize_t n,
                   Py_ssize_t itemsize) noexcept nogil:
    cdef int nt = _threads_for(n)
    cdef Py_ssize_t per, c, start, nchunks
    if nt == 1:
        _map(k, num, y, x, n)
        return
    per = _piece_len(n, nt)
    nchunks = (n + per - 1) // per
    for c in prange(nchunks, num_threads=nt, schedule="static"):
        start = c * per
        _map(k, num, <char *>y + start * itemsize, <const char *>x + start * itemsize,
             per if n - start > per else n - start)


cdef void _grad_par(const UnaryKernels *k, int num, void *gx, const void *g, const void *s,
                    Py_ssize_t n, Py_ssize_t itemsize) noexcept nogil:
    cdef int nt = _threads_for(n)
    cdef Py_ssize_t per, c, start, nchunks
    if nt == 1:
        _grad_apply(k, num, gx, g, s, n)
        return
    per = _piece_len(n, nt)
    nchunks = (n + per - 1) // per
    for c in prange(nchunks, num_threads=nt, schedule="static"):
        start = c * per
        _grad_apply(k, num, <char *>gx + start * itemsize, <const char *>g + start * itemsize,
                    <const char *>s + start * itemsize, per if n - start > per else n - start)


# Non-contiguous inputs go through in cache-sized contiguous pieces (NumPy's
# buffered iterator), never as one full copy.
cdef enum:
    _PIECE = 1 << 14


cdef cnp.ndarray _to_half(cnp.ndarray a):
    """float32 -> float16; overflow to inf is the IEEE result, not a warning."""
    with np.errstate(over="ignore"):
        return a.astype(np.float16)


cdef inline cnp.ndarray _empty_like_arr(cnp.ndarray a, int typenum):
    return cnp.PyArray_EMPTY(cnp.PyArray_NDIM(a), cnp.PyArray_DIMS(a), typenum, 0)


cdef cnp.ndarray _unary_kernel(const UnaryKernels *k, cnp.ndarray a):
    """y = f(a) for a float16/32/64 ndarray; float16 goes through float32."""
    cdef int num = cnp.PyArray_TYPE(a)
    cdef cnp.ndarray out
    cdef Py_ssize_t n = cnp.PyArray_SIZE(a)
    if num == cnp.NPY_FLOAT16:
        return _to_half(_unary_kernel(k, a.astype(np.float32)))
    if not cnp.PyArray_IS_C_CONTIGUOUS(a):
        return _unary_kernel_strided(k, a, num)
    out = _empty_like_arr(a, num)
    cdef void *y = cnp.PyArray_DATA(out)
    cdef const void *x = cnp.PyArray_DATA(a)
    cdef Py_ssize_t isz = cnp.PyArray_ITEMSIZE(a)
    if n < _NOGIL_MIN:
        _map(k, num, y, x, n)
    else:
        with nogil:
            _map_par(k, num, y, x, n, isz)
    return out


cdef cnp.ndarray _unary_kernel_strided(const UnaryKernels *k, cnp.ndarray a, int num):
    """f(a) for a strided view, in contiguous pieces of _PIECE elements."""
    it = np.nditer([a, None], flags=["external_loop", "buffered", "zerosize_ok"],
                   op_flags=[["readonly", "contig"], ["writeonly", "allocate", "contig"]],
                   order="K", buffersize=_PIECE)
    cdef cnp.ndarray xin, yout
    cdef Py_ssize_t isz = cnp.PyArray_ITEMSIZE(a)
    with it:
        for xin, yout in it:
            with nogil:
                _map_par(k, num, cnp.PyArray_DATA(yout), cnp.PyArray_DATA(xin),
                         cnp.PyArray_SIZE(xin), isz)
        return it.operands[1]


cdef cnp.ndarray _unary_grad_kernel(const UnaryKernels *k, cnp.ndarray g, cnp.ndarray s):
    """gx = fused backward(g, s), where s is the saved input or output."""
    cdef int num = cnp.PyArray_TYPE(s)
    cdef cnp.ndarray out
    cdef Py_ssize_t n = cnp.PyArray_SIZE(s)
    if num == cnp.NPY_FLOAT16:
        return _to_half(_unary_grad_kernel(k, g.astype(np.float32), s.astype(np.float32)))
    if cnp.PyArray_TYPE(g) != num:
        g = g.astype(s.dtype)
    if _shp(g) != _shp(s):
        g = np.broadcast_to(g, _shp(s))
    if not (cnp.PyArray_IS_C_CONTIGUOUS(g) and cnp.PyArray_IS_C_CONTIGUOUS(s)):
        return _unary_grad_strided(k, g, s, num)
    out = _empty_like_arr(s, num)
    cdef void *gx = cnp.PyArray_DATA(out)
    cdef const void *gp = cnp.PyArray_DATA(g)
    cdef const void *sp = cnp.PyArray_DATA(s)
    cdef Py_ssize_t isz = cnp.PyArray_ITEMSIZE(s)
    if n < _NOGIL_MIN:
        _grad_apply(k, num, gx, gp, sp, n)
    else:
        with nogil:
            _grad_par(k, num, gx, gp, sp, n, isz)
    return out


cdef cnp.ndarray _unary_grad_strided(const UnaryKernels *k, cnp.ndarray g, cnp.ndarray s, int num):
    it = np.nditer([g, s, None], flags=["external_loop", "buffered", "zerosize_ok"],
                   op_flags=[["readonly", "contig"], ["readonly", "contig"],
                             ["writeonly", "allocate", "contig"]],
                   order="K", buffersize=_PIECE)
    cdef cnp.ndarray gin, sin, out
    cdef Py_ssize_t isz = cnp.PyArray_ITEMSIZE(s)
    with it:
        for gin, sin, out in it:
            with nogil:
                _grad_par(k, num, cnp.PyArray_DATA(out), cnp.PyArray_DATA(gin),
                          cnp.PyArray_DATA(sin), cnp.PyArray_SIZE(gin), isz)
        return it.operands[2]


cdef class UnaryBackward(Node):
    """Shared part of every element-wise unary node: one saved tensor, one fused kernel."""
    cdef const UnaryKernels *_k
    cdef SavedTensor _saved
    cdef int _saves                  # _SAVES_INPUT, _SAVES_OUTPUT or _SAVES_NOTHING

    cdef list _saved_list(self):
        return [self._saved] if self._saved is not None else []

    @property
    def _saved_self(self):
        if self._saves != _SAVES_INPUT:
            raise AttributeError(f"{type(self).__name__} does not save its input")
        return self._saved.unpack(self)

    @property
    def _saved_result(self):
        if self._saves != _SAVES_OUTPUT:
            raise AttributeError(f"{type(self).__name__} does not save its result")
        return self._saved.unpack(self)

    cdef tuple _eager(self, cnp.ndarray g):
        if self._saves == _SAVES_NOTHING:
            return (np.zeros_like(g),)
        return (_unary_grad_kernel(self._k, g, self._saved.data(self)),)

    cdef tuple _graph(self, Tensor g):
        if self._saves == _SAVES_NOTHING:
            return (self.grad_formula_impl(g, None, None),)
        cdef Tensor s = self._saved.unpack(self)
        if self._saves == _SAVES_OUTPUT:
            return (self.grad_formula_impl(g, None, s),)
        return (self.grad_formula_impl(g, s, None),)

    cdef void _release(self):
        self._released = True
        if self._saved is not None:
            self._saved.release()


cdef enum:
    _SAVES_INPUT = 0
    _SAVES_OUTPUT = 1
    _SAVES_NOTHING = 2


cdef object _unary_op(object input, const UnaryKernels *k, type node_cls, int amp, int saves):
    """Forward of an element-wise op: AMP policy, kernel, and (maybe) a backward node."""
    cdef Tensor x = <Tensor>input if type(input) is Tensor else _as_tensor(input)
    cdef int code = x._dtype.code
    cdef UnaryBackward node
    cdef Tensor y
    if code < DT_FLOAT16:
        # Integer and bool inputs are computed as float32 (they never require grad).
        x = _wrap(x._data.astype(np.float32), float32)
    elif code == DT_FLOAT16 and amp == AMP_FORCE_FP32:
        x = to_dtype(x, float32, False)   # a recorded cast: float16 leaves get float16 grads
    y = _wrap(_unary_kernel(k, x._data), x._dtype)
    if lucid_grad_enabled and x._requires_grad:
        node = <UnaryBackward>(<PyTypeObject *>node_cls).tp_new(node_cls, <PyObject *>_EMPTY, NULL)
        node._k = k
        node._next = (_edge(x),)
        node._saves = saves
        if saves == _SAVES_OUTPUT:
            node._saved = _save(y, True)
        elif saves == _SAVES_INPUT:
            node._saved = _save(x, False)
        _set_history(y, node)
    return y


cdef tuple _EMPTY = ()


cdef extern from "Python.h":
    void PyType_Modified(PyTypeObject *)


cdef void _add_tensor_method(str name, object fn) except *:
    """Install an op as a Tensor method. Tensor is a static type whose class body
    cannot hold generated code, so the generated ops register themselves here."""
    (<dict>(<PyTypeObject *>Tensor).tp_dict)[name] = fn
    PyType_Modified(<PyTypeObject *>Tensor)


def _install_tensor_method(str name, fn):
    """_add_tensor_method for pure-Python modules (lucid/_interop.py: the NumPy protocols)."""
    _add_tensor_method(name, fn)


# -- dtype casts and copies (recorded like any op) ----------------------------

cdef OpSchema _TO_SCHEMA = _register("to", "KeepInput")
cdef OpSchema _CLONE_SCHEMA = _register("clone", "KeepInput")


cdef class ToBackward(Node):
    """Backward of a dtype cast: cast the gradient back to the source dtype."""
    schema_v1 = _TO_SCHEMA
    cdef DType _src

    cdef tuple _eager(self, cnp.ndarray g):
        if self._src is float16:
            return (_to_half(g),)
        return (g.astype(self._src.numpy_dtype),)

    cdef tuple _graph(self, Tensor g):
        return (self.grad_formula_impl(g),)

    def grad_formula_impl(self, g):
        return to_dtype(g, self._src, False)


cdef Tensor to_dtype(Tensor x, DType dt, bint copy):
    """``x`` converted to ``dt`` (differentiable between floating dtypes)."""
    if x._dtype is dt and not copy:
        return x
    cdef Tensor y = _wrap(_to_half(x._data) if dt is float16 else x._data.astype(dt.numpy_dtype), dt)
    cdef ToBackward node
    if lucid_grad_enabled and x._requires_grad and dt.is_floating_point:
        node = ToBackward.__new__(ToBackward)
        node._src = x._dtype
        node._next = (_edge(x),)
        _set_history(y, node)
    return y


cdef class CloneBackward(Node):
    """Backward of clone: the gradient passes through unchanged."""
    schema_v1 = _CLONE_SCHEMA

    cdef tuple _eager(self, cnp.ndarray g):
        return (g,)

    cdef tuple _graph(self, Tensor g):
        return (self.grad_formula_impl(g),)

    def grad_formula_impl(self, g):
        return g


def clone(input):
    """A copy of ``input`` with its own memory (differentiable)."""
    cdef Tensor x = _as_tensor(input)
    cdef Tensor y = _wrap(np.array(x._data, copy=True, order="C"), x._dtype)
    cdef CloneBackward node
    if lucid_grad_enabled and x._requires_grad:
        node = CloneBackward.__new__(CloneBackward)
        node._next = (_edge(x),)
        _set_history(y, node)
    return y
