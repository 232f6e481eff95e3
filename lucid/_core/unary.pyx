"""The unary family: element-wise ops of one tensor.

The rows of ``optable.UNARY`` become, through the generated ``_unary.pxi``, one
schema, one node class and one public function each; their C kernels live in
src/lucid_vforce.c. The ops with parameters (leaky_relu, elu, clamp, nan_to_num,
gelu's ``approximate=``) are written by hand below. All of them run through core's
dispatcher.
"""
cimport cython
cimport numpy as cnp
import builtins

import numpy as np

from lucid._core.core cimport *
from lucid._core.core import (ArgumentError, LucidError, ShapeError, UnsupportedDTypeError,
                              _EMPTY_CACHE_HOOKS, _float_arg, export, ops, register)

cnp.import_array()

cdef DType bool_ = dtype_of_code(DT_BOOL)
cdef DType float16 = dtype_of_code(DT_FLOAT16)
cdef DType float32 = dtype_of_code(DT_FLOAT32)
cdef tuple _NO_EDGE = (None, 0)
cdef int _BF16_NUM = dtype_of_code(DT_BFLOAT16).typenum

cdef extern from "lucid_half.h" nogil:
    enum:
        LH_F16
        LH_BF16
    ctypedef void (*lucid_f32_map)(float *, const float *, const int *) noexcept nogil
    ctypedef void (*lucid_f32_grad)(float *, const float *, const float *, const int *) noexcept nogil
    void lucid_half_map(int kind, lucid_f32_map f, unsigned short *y, const unsigned short *x,
                        Py_ssize_t n)
    void lucid_half_grad(int kind, lucid_f32_grad f, unsigned short *gx, const unsigned short *g,
                         const unsigned short *s, Py_ssize_t n)
    void lucid_half_relu(int kind, unsigned short *y, const unsigned short *x, Py_ssize_t n)
    int lucid_half_tables(int mode)
    int lucid_half_table_count()
    void lucid_half_tables_release()

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
    elif num == cnp.NPY_DOUBLE:
        _map_f64(k.f64, <double *>y, <const double *>x, n)
    elif k.f32 == lucid_vreluf:     # exact in half: no widening (lucid_half.c)
        lucid_half_relu(LH_F16 if num == cnp.NPY_FLOAT16 else LH_BF16,
                        <unsigned short *>y, <const unsigned short *>x, n)
    else:       # float16 / bfloat16: the float32 kernel on blocks, rounded once, or the
                # table of its 65536 results once it has one (lucid_half.c)
        lucid_half_map(LH_F16 if num == cnp.NPY_FLOAT16 else LH_BF16, <lucid_f32_map>k.f32,
                       <unsigned short *>y, <const unsigned short *>x, n)


cdef inline void _grad_apply(const UnaryKernels *k, int num, void *gx, const void *g, const void *s,
                       Py_ssize_t n) noexcept nogil:
    if num == cnp.NPY_FLOAT:
        _grad_f32(k.g32, <float *>gx, <const float *>g, <const float *>s, n)
    elif num == cnp.NPY_DOUBLE:
        _grad_f64(k.g64, <double *>gx, <const double *>g, <const double *>s, n)
    else:
        lucid_half_grad(LH_F16 if num == cnp.NPY_FLOAT16 else LH_BF16, <lucid_f32_grad>k.g32,
                        <unsigned short *>gx, <const unsigned short *>g,
                        <const unsigned short *>s, n)



def _half_tables(mode=None):
    """The lookup tables of the half unary forwards (src/lucid_half.c): returns
    (mode, tables held) -- mode 0 off, 1 used where they win (the default), 2 built on
    first use without timing -- and first sets the mode when one is given."""
    if mode is not None and mode not in (0, 1, 2):
        raise ArgumentError(f"half table mode must be 0, 1 or 2, not {mode!r}")
    old = lucid_half_tables(-1 if mode is None else mode)
    return old, lucid_half_table_count()


def _release_half_tables():
    with nogil:
        lucid_half_tables_release()


_EMPTY_CACHE_HOOKS.append(_release_half_tables)     # lucid.empty_cache() frees them

# Large arrays run on lucid's pool (core's _parallel_for): one piece per
# _piece_len(n) elements, claimed by the caller and the workers alike.
cdef struct _UnaryJob:
    const UnaryKernels *k
    int num
    char *y
    const char *x
    const char *s
    Py_ssize_t n, per, isz


cdef void _map_piece(void *ctx, Py_ssize_t c) noexcept nogil:
    cdef _UnaryJob *j = <_UnaryJob *>ctx
    cdef Py_ssize_t start = c * j.per
    cdef Py_ssize_t off = start * j.isz
    _map(j.k, j.num, j.y + off, j.x + off, j.per if j.n - start > j.per else j.n - start)


cdef void _grad_piece(void *ctx, Py_ssize_t c) noexcept nogil:
    cdef _UnaryJob *j = <_UnaryJob *>ctx
    cdef Py_ssize_t start = c * j.per
    cdef Py_ssize_t off = start * j.isz
    _grad_apply(j.k, j.num, j.y + off, j.x + off, j.s + off,
                j.per if j.n - start > j.per else j.n - start)


cdef void _map_par(const UnaryKernels *k, int num, void *y, const void *x, Py_ssize_t n,
                   Py_ssize_t itemsize) noexcept nogil:
    cdef int nt = _threads_for(n)
    cdef _UnaryJob j
    if nt == 1:
        _map(k, num, y, x, n)
        return
    j.k, j.num, j.y, j.x, j.s = k, num, <char *>y, <const char *>x, NULL
    j.n, j.per, j.isz = n, _piece_len(n, nt), itemsize
    _parallel_for(_map_piece, &j, (n + j.per - 1) // j.per, nt)


cdef void _grad_par(const UnaryKernels *k, int num, void *gx, const void *g, const void *s,
                    Py_ssize_t n, Py_ssize_t itemsize) noexcept nogil:
    cdef int nt = _threads_for(n)
    cdef _UnaryJob j
    if nt == 1:
        _grad_apply(k, num, gx, g, s, n)
        return
    j.k, j.num, j.y, j.x, j.s = k, num, <char *>gx, <const char *>g, <const char *>s
    j.n, j.per, j.isz = n, _piece_len(n, nt), itemsize
    _parallel_for(_grad_piece, &j, (n + j.per - 1) // j.per, nt)


# Non-contiguous inputs go through in cache-sized contiguous pieces (NumPy's
# buffered iterator), never as one full copy.
cdef enum:
    _PIECE = 1 << 14


cdef cnp.ndarray _unary_kernel(const UnaryKernels *k, cnp.ndarray a):
    """y = f(a) for a float16 / bfloat16 / float32 / float64 ndarray; half goes through
    the float32 kernel block by block (_map)."""
    cdef int num = cnp.PyArray_TYPE(a)
    cdef cnp.ndarray out
    cdef Py_ssize_t n = cnp.PyArray_SIZE(a)
    if not cnp.PyArray_IS_C_CONTIGUOUS(a):
        return _unary_kernel_strided(k, a, num)
    if not cnp.PyArray_ISALIGNED(a):      # e.g. from_numpy of a byte buffer at an odd offset
        a = np.array(a, copy=True)
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
                   op_flags=[["readonly", "contig", "aligned"],
                             ["writeonly", "allocate", "contig", "aligned"]],
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
    if cnp.PyArray_TYPE(g) != num:
        g = _store(g, _dtype_of_array(s))
    if _shp(g) != _shp(s):
        g = np.broadcast_to(g, _shp(s))
    if not (cnp.PyArray_IS_C_CONTIGUOUS(g) and cnp.PyArray_IS_C_CONTIGUOUS(s)
            and cnp.PyArray_ISALIGNED(g) and cnp.PyArray_ISALIGNED(s)):
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
                   op_flags=[["readonly", "contig", "aligned"], ["readonly", "contig", "aligned"],
                             ["writeonly", "allocate", "contig", "aligned"]],
                   order="K", buffersize=_PIECE)
    cdef cnp.ndarray gin, sin, out
    cdef Py_ssize_t isz = cnp.PyArray_ITEMSIZE(s)
    with it:
        for gin, sin, out in it:
            with nogil:
                _grad_par(k, num, cnp.PyArray_DATA(out), cnp.PyArray_DATA(gin),
                          cnp.PyArray_DATA(sin), cnp.PyArray_SIZE(gin), isz)
        return it.operands[2]


cdef class UnaryCPU(Kernel):
    """The CPU kernels of one unary row: forward and fused backward, and for rows that
    keep integer dtypes (the row's ``ints``) the integer forward, a NumPy function."""
    cdef const UnaryKernels *k
    cdef object int_fn

    cdef object run1(self, cnp.ndarray x, object params):
        if (self.int_fn is not None and not cnp.PyArray_ISFLOAT(x)      # bool, int32, int64
                and cnp.PyArray_TYPE(x) != _BF16_NUM):
            return self.int_fn(x)
        return _unary_kernel(self.k, x)


cdef UnaryCPU _unary_kernel_of(const UnaryKernels *k, object int_fn):
    cdef UnaryCPU c = UnaryCPU.__new__(UnaryCPU)
    c.k = k
    c.int_fn = int_fn
    return c


cdef class ConstantGradBackward(Node):
    """Backward of a gradient that does not vary with the input it depends on: zeros."""
    schema_v1 = register("constant_grad", "KeepInput", 1)

    def grad_formula_impl(self, g):
        return ops.zeros_like(g)


ConstantGradBackward.schema_v1._bind(ConstantGradBackward)


cdef object _depend_on_input(Node node, object r):
    """A graph-mode gradient that came out constant (relu's g * (y > 0) with g constant,
    sign's zeros) still depends on the op's input, with zero derivative: as in PyTorch,
    differentiating it again gives zeros, not "does not require grad"."""
    cdef Tensor t
    cdef ConstantGradBackward c
    if not isinstance(r, Tensor) or (<Tensor>r)._requires_grad or not grad_enabled() \
            or node._next[0][0] is None:
        return r
    t = _wrap((<Tensor>r)._data, (<Tensor>r)._dtype)     # never the caller's tensor
    t._mx = (<Tensor>r)._mx
    c = <ConstantGradBackward>_new_node(ConstantGradBackward)
    c._next = (node._next[0],)
    _set_history(t, c)
    return t


cdef class UnaryBackward(Node):
    """Shared part of every element-wise unary node: one saved tensor (the input or
    the output, as the row says), the row's fused kernel as the eager backward."""
    cdef const UnaryKernels *_k
    cdef SavedTensor _saved
    cdef bint _saves_output

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        self._k = (<UnaryCPU>s.cpu).k
        self._saves_output = s.saves_output
        if s.saves_output:
            self._saved = _save(out, True)
        elif s.saves_input:
            self._saved = _save(<Tensor>inputs[0], False)

    cdef list _saved_list(self):
        return [self._saved] if self._saved is not None else []

    cdef void _release(self):
        self._released = True
        if self._saved is not None:
            self._saved.release()

    @property
    def _saved_self(self):
        if self._saved is None or self._saves_output:
            raise AttributeError(f"{type(self).__name__} does not save its input")
        return self._saved.unpack(self)

    @property
    def _saved_result(self):
        if self._saved is None or not self._saves_output:
            raise AttributeError(f"{type(self).__name__} does not save its result")
        return self._saved.unpack(self)

    cdef tuple _eager(self, cnp.ndarray g):
        if self._saved is None:
            return (np.zeros_like(g),)
        return (_unary_grad_kernel(self._k, g, self._saved.data(self)),)

    cdef tuple _graph(self, Tensor g):
        cdef Tensor s
        if self._saved is None:
            r = self.grad_formula_impl(g, None, None)
        else:
            s = self._saved.unpack(self)
            r = self.grad_formula_impl(g, None, s) if self._saves_output else \
                self.grad_formula_impl(g, s, None)
        return (_depend_on_input(self, r),)



include "_unary.pxi"


# -- element-wise ops with parameters --------------------------------------------
# leaky_relu, elu and nan_to_num: a NumPy forward of (x, params) and a formula in
# lucid ops, through the same dispatcher as the table rows.

cdef class PointwiseCPU(Kernel):
    """A forward written as a NumPy function of (x, params)."""
    cdef object f

    cdef object run1(self, cnp.ndarray x, object params):
        return self.f(x, params)


cdef OpSchema _pointwise(str name, str amp, forward, int int_rule):
    cdef OpSchema s = register(name, amp, 1, saves_input=True, int_rule=int_rule)
    cdef PointwiseCPU k = PointwiseCPU.__new__(PointwiseCPU)
    k.f = forward
    s.cpu = k
    return s


cdef class PointwiseBackward(Node):
    """One saved input x and the op's parameters; the formula is the subclass's."""
    cdef SavedTensor _saved_x
    cdef DType _in_dtype
    cdef readonly object params

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        self._saved_x = _save(<Tensor>inputs[0], False)
        self._in_dtype = (<Tensor>inputs[0])._dtype
        self.params = params

    cdef list _saved_list(self):
        return [self._saved_x]


def _leaky_relu_fwd(a, slope):
    return np.where(a > 0, a, a * a.dtype.type(slope))


def _elu_fwd(a, alpha):
    with np.errstate(over="ignore"):
        return np.where(a > 0, a, a.dtype.type(alpha) * np.expm1(np.minimum(a, 0)))


_BF16_MAX = 3.3895313892515355e38     # the largest finite bfloat16 (0x7F7F)


def _nan_to_num_fwd(a, p):
    if a.dtype.kind == "f":
        return np.nan_to_num(a, copy=True, nan=p[0], posinf=p[1], neginf=p[2])
    # bfloat16, which NumPy does not count as a float: in float32, with bfloat16's limits
    hi = _BF16_MAX if p[1] is None else p[1]
    lo = -_BF16_MAX if p[2] is None else p[2]
    return np.nan_to_num(a.astype(np.float32), nan=p[0], posinf=hi, neginf=lo).astype(a.dtype)


cdef OpSchema _S_leaky_relu = _pointwise("leaky_relu", "Promote", _leaky_relu_fwd, INT_REJECT)
cdef OpSchema _S_elu = _pointwise("elu", "Promote", _elu_fwd, INT_REJECT)
cdef OpSchema _S_nan_to_num = _pointwise("nan_to_num", "KeepInput", _nan_to_num_fwd, INT_KEEP)


cdef class LeakyReluBackward(PointwiseBackward):
    """Backward of leaky_relu: g where x > 0, g * negative_slope elsewhere."""
    schema_v1 = _S_leaky_relu

    def grad_formula_impl(self, g, x):
        return ops.where(x > 0, g, g * self.params)


cdef class EluBackward(PointwiseBackward):
    """Backward of elu: g where x > 0, g * alpha * exp(x) elsewhere."""
    schema_v1 = _S_elu

    def grad_formula_impl(self, g, x):
        return ops.where(x > 0, g, g * self.params * exp(ops.minimum(x, 0.0)))


cdef class NanToNumBackward(PointwiseBackward):
    """Backward of nan_to_num: g where x is finite, 0 where it was replaced."""
    schema_v1 = _S_nan_to_num

    def grad_formula_impl(self, g, x):
        return ops.where(ops.isfinite(x), g, 0.0)


_S_leaky_relu._bind(LeakyReluBackward)
_S_elu._bind(EluBackward)
_S_nan_to_num._bind(NanToNumBackward)


def leaky_relu(input, negative_slope=0.01):
    """x where x > 0, negative_slope * x elsewhere."""
    return dispatch_unary(_S_leaky_relu, input,
                          _float_arg(negative_slope, "leaky_relu", "negative_slope"))


def elu(input, alpha=1.0):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""
    return dispatch_unary(_S_elu, input, _float_arg(alpha, "elu", "alpha"))


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """nan -> ``nan``, +inf -> ``posinf`` (default: the dtype's max), -inf -> ``neginf``."""
    cdef Tensor x = _as_tensor_dev(input)
    nan, posinf, neginf = [v if v is None else _float_arg(v, "nan_to_num", name)
                           for v, name in ((nan, "nan"), (posinf, "posinf"), (neginf, "neginf"))]
    nan = 0.0 if nan is None else nan
    if not x._dtype.is_floating_point:
        return ops.clone(x)
    return dispatch_unary(_S_nan_to_num, x, (nan, posinf, neginf))


# -- element-wise ops with parameters, on C kernels ------------------------------------
# hardtanh, celu, softplus(beta, threshold) and polygamma(n, x): the forward and the fused
# backward are loops of src/lucid_vforce.c taking the parameters (two doubles); float16 and
# bfloat16 go through the float32 kernels and are rounded once. The graph-mode formulas
# are the nodes' grad_formula_impl.

ctypedef void (*pf32_t)(float *, const float *, const int *, const double *) noexcept nogil
ctypedef void (*pf64_t)(double *, const double *, const int *, const double *) noexcept nogil
ctypedef void (*pg32_t)(float *, const float *, const float *, const int *, const double *) noexcept nogil
ctypedef void (*pg64_t)(double *, const double *, const double *, const int *, const double *) noexcept nogil

cdef extern from "lucid_vforce.h" nogil:
    void lucid_vhardtanhf(float *y, const float *x, const int *n, const double *p)
    void lucid_vhardtanh(double *y, const double *x, const int *n, const double *p)
    void lucid_vhardtanh_gradf(float *gx, const float *g, const float *s, const int *n, const double *p)
    void lucid_vhardtanh_grad(double *gx, const double *g, const double *s, const int *n, const double *p)
    void lucid_vceluf(float *y, const float *x, const int *n, const double *p)
    void lucid_vcelu(double *y, const double *x, const int *n, const double *p)
    void lucid_vcelu_gradf(float *gx, const float *g, const float *s, const int *n, const double *p)
    void lucid_vcelu_grad(double *gx, const double *g, const double *s, const int *n, const double *p)
    void lucid_vsoftplus_betaf(float *y, const float *x, const int *n, const double *p)
    void lucid_vsoftplus_beta(double *y, const double *x, const int *n, const double *p)
    void lucid_vsoftplus_beta_gradf(float *gx, const float *g, const float *s, const int *n, const double *p)
    void lucid_vsoftplus_beta_grad(double *gx, const double *g, const double *s, const int *n, const double *p)
    void lucid_vpolygammaf(float *y, const float *x, const int *n, const double *p)
    void lucid_vpolygamma(double *y, const double *x, const int *n, const double *p)
    void lucid_vpolygamma_gradf(float *gx, const float *g, const float *s, const int *n, const double *p)
    void lucid_vpolygamma_grad(double *gx, const double *g, const double *s, const int *n, const double *p)

cdef struct ParamKernels:
    pf32_t f32
    pf64_t f64
    pg32_t g32
    pg64_t g64


cdef ParamKernels _PK_hardtanh = ParamKernels(lucid_vhardtanhf, lucid_vhardtanh,
                                              lucid_vhardtanh_gradf, lucid_vhardtanh_grad)
cdef ParamKernels _PK_celu = ParamKernels(lucid_vceluf, lucid_vcelu, lucid_vcelu_gradf,
                                          lucid_vcelu_grad)
cdef ParamKernels _PK_softplus_beta = ParamKernels(
    lucid_vsoftplus_betaf, lucid_vsoftplus_beta, lucid_vsoftplus_beta_gradf,
    lucid_vsoftplus_beta_grad)
cdef ParamKernels _PK_polygamma = ParamKernels(lucid_vpolygammaf, lucid_vpolygamma,
                                               lucid_vpolygamma_gradf, lucid_vpolygamma_grad)


cdef cnp.ndarray _param_run(const ParamKernels *k, cnp.ndarray x, cnp.ndarray g, tuple params):
    """f(x; params), or with g the fused backward g f'(x; params), in x's dtype."""
    cdef double p[2]
    p[0] = params[0]
    p[1] = params[1] if len(params) > 1 else 0.0
    dt = x.dtype
    comp = dt if (dt == np.float32 or dt == np.float64) else np.dtype(np.float32)
    cdef cnp.ndarray xa = np.ascontiguousarray(x, dtype=comp)
    cdef cnp.ndarray ga = None if g is None else np.ascontiguousarray(
        np.broadcast_to(g, _shp(x)), dtype=comp)
    cdef cnp.ndarray out = np.empty(_shp(x), dtype=comp)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(xa), done = 0
    cdef int m
    cdef bint f32 = comp == np.float32
    cdef char *yp = <char *>cnp.PyArray_DATA(out)
    cdef char *xp = <char *>cnp.PyArray_DATA(xa)
    cdef char *gp = NULL if ga is None else <char *>cnp.PyArray_DATA(ga)
    cdef Py_ssize_t isz = cnp.PyArray_ITEMSIZE(xa)
    with nogil:
        while done < n:
            m = <int>(n - done if n - done < _CHUNK else _CHUNK)
            if gp == NULL:
                if f32:
                    k.f32(<float *>(yp + done * isz), <const float *>(xp + done * isz), &m, p)
                else:
                    k.f64(<double *>(yp + done * isz), <const double *>(xp + done * isz), &m, p)
            elif f32:
                k.g32(<float *>(yp + done * isz), <const float *>(gp + done * isz),
                      <const float *>(xp + done * isz), &m, p)
            else:
                k.g64(<double *>(yp + done * isz), <const double *>(gp + done * isz),
                      <const double *>(xp + done * isz), &m, p)
            done += m
    return out if comp == dt else out.astype(dt)


cdef class ParamCPU(Kernel):
    """The C kernels of an element-wise op with parameters."""
    cdef const ParamKernels *k

    cdef object run1(self, cnp.ndarray x, object params):
        return _param_run(self.k, x, None, params)


cdef OpSchema _param_schema(str name, const ParamKernels *k, int int_rule):
    cdef OpSchema s = register(name, "Promote", 1, saves_input=True, int_rule=int_rule)
    cdef ParamCPU c = ParamCPU.__new__(ParamCPU)
    c.k = k
    s.cpu = c
    return s


cdef class ParamBackward(PointwiseBackward):
    """A saved input and the parameters; the eager backward is the op's fused C kernel."""
    cdef const ParamKernels *_pk

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        PointwiseBackward._setup(self, s, inputs, out, params)
        self._pk = (<ParamCPU>s.cpu).k

    cdef tuple _eager(self, cnp.ndarray g):
        return (_param_run(self._pk, self._saved_x.data(self), g, self.params),)


cdef OpSchema _S_hardtanh = _param_schema("hardtanh", &_PK_hardtanh, INT_REJECT)
cdef OpSchema _S_celu = _param_schema("celu", &_PK_celu, INT_REJECT)
cdef OpSchema _S_softplus_beta = _param_schema("softplus_beta", &_PK_softplus_beta, INT_REJECT)
cdef OpSchema _S_polygamma = _param_schema("polygamma", &_PK_polygamma, INT_TO_FLOAT)


cdef class HardtanhBackward(ParamBackward):
    """Backward of hardtanh: g strictly between min_val and max_val, 0 elsewhere."""
    schema_v1 = _S_hardtanh

    def grad_formula_impl(self, g, x):
        lo, hi = self.params
        return ops.where((x > lo) & (x < hi), g, 0.0)


cdef class CeluBackward(ParamBackward):
    """Backward of celu: g where x > 0, g * exp(x / alpha) elsewhere."""
    schema_v1 = _S_celu

    def grad_formula_impl(self, g, x):
        (alpha,) = self.params
        return ops.where(x > 0, g, g * exp(ops.minimum(x, 0.0) / alpha))


cdef class SoftplusBetaBackward(ParamBackward):
    """Backward of softplus(beta, threshold): g where beta x > threshold, else
    g * sigmoid(beta x)."""
    schema_v1 = _S_softplus_beta

    def grad_formula_impl(self, g, x):
        beta, threshold = self.params
        return ops.where(x * beta > threshold, g, g * sigmoid(x * beta))


cdef class PolygammaBackward(ParamBackward):
    """Backward of polygamma(n, x): g * polygamma(n + 1, x)."""
    schema_v1 = _S_polygamma

    def grad_formula_impl(self, g, x):
        (n,) = self.params
        return g * _polygamma(int(n) + 1, x)


_S_hardtanh._bind(HardtanhBackward)
_S_celu._bind(CeluBackward)
_S_softplus_beta._bind(SoftplusBetaBackward)
_S_polygamma._bind(PolygammaBackward)


def hardtanh(input, min_val=-1.0, max_val=1.0):
    """min(max(x, min_val), max_val); nan passes through."""
    lo = _float_arg(min_val, "hardtanh", "min_val")
    hi = _float_arg(max_val, "hardtanh", "max_val")
    if lo > hi:
        raise ArgumentError(f"hardtanh: min_val ({lo}) cannot be greater than max_val ({hi})")
    return dispatch_unary(_S_hardtanh, input, (lo, hi))


def celu(input, alpha=1.0):
    """x where x > 0, alpha * (exp(x / alpha) - 1) elsewhere."""
    a = _float_arg(alpha, "celu", "alpha")
    if a == 0:
        raise ArgumentError("celu: alpha must not be 0 (the formula divides by it)")
    return dispatch_unary(_S_celu, input, (a,))


export(celu)     # lucid.celu, as torch.celu (nn.functional.celu adds inplace)


def softplus_beta(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x where beta x > threshold (torch's softplus)."""
    b = _float_arg(beta, "softplus", "beta")
    t = _float_arg(threshold, "softplus", "threshold")
    if b == 0:
        raise ArgumentError("softplus: beta must not be 0 (the formula divides by it)")
    return dispatch_unary(_S_softplus_beta, input, (b, t))


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + e**(beta x)) / beta, and x where beta x > threshold: PyTorch's softplus,
    with the signature of ``nn.functional.softplus``. With the default arguments it is
    the table's softplus row (AMP policy ForceFP32, SoftplusBackward, integer inputs
    computed in float32; above the threshold log1p(e**x) is x to within e**-20
    relative); other arguments take the parametrised kernel (integers refused, as
    torch)."""
    if beta == 1.0 and threshold == 20.0:
        return _softplus_plain(input)
    return softplus_beta(input, beta, threshold)


def _polygamma(n, input):
    """polygamma(n, x): the n-th derivative of digamma (n >= 0 an int); lucid.special
    checks n."""
    return dispatch_unary(_S_polygamma, input, (float(n),))


def gelu(input, approximate="none"):
    """Exact GELU, x * Phi(x) = x/2 * erfc(-x/sqrt(2)) (``approximate="none"``), or its
    tanh approximation (``approximate="tanh"``)."""
    if approximate == "none":
        return _gelu_exact(input)
    if approximate == "tanh":
        return gelu_tanh(input)
    raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


# -- clamp ------------------------------------------------------------------------
# Three inputs (the bounds may be tensors that get gradients), PyTorch's result type
# over all three.

cdef OpSchema _S_clamp = register("clamp", "Promote", 3, saves_input=True)


cdef class ClampBackward(Node):
    """Backward of clamp: g where min <= x <= max (to x), and to tensor bounds where they bind."""
    schema_v1 = _S_clamp
    cdef SavedTensor _saved_x
    cdef object _lo, _hi          # Python scalars, tensors (tensor bounds) or None
    cdef tuple _lo_shape, _hi_shape
    cdef DType _lo_dtype, _hi_dtype

    cdef list _saved_list(self):
        return [self._saved_x]

    def grad_formula_impl(self, g, x):
        keep = ops.ones_like(x, dtype=bool_)
        glo = ghi = None
        lo, hi = self._lo, self._hi
        # As PyTorch: where lo > hi the result is hi, so hi gets the gradient (lo
        # none); where lo == hi neither bound does.
        if lo is not None:
            keep = keep & (x >= lo)
            if self._next[1][0] is not None:
                bind = (x < lo) & (lo < hi) if hi is not None else (x < lo)
                glo = to_dtype(_sum_to_t(ops.where(bind, g, 0.0), self._lo_shape),
                               self._lo_dtype, False)
        if hi is not None:
            keep = keep & (x <= hi)
            if self._next[2][0] is not None:
                bind = (x > hi) | (hi < lo) if lo is not None else (x > hi)
                ghi = to_dtype(_sum_to_t(ops.where(bind, g, 0.0), self._hi_shape),
                               self._hi_dtype, False)
        gx = ops.where(keep, g, 0.0) if self._next[0][0] is not None else None
        return (gx, glo, ghi)


_S_clamp._bind(ClampBackward)


# clamp's kernel (src/lucid_compare.c) over the 2-D broadcasts of _bcast2d.pxi.
cdef extern from *:
    """
    void lucid_clamp_f32(float *, const float *, const float *, const float *, ptrdiff_t,
                         ptrdiff_t, const ptrdiff_t *);
    void lucid_clamp_f64(double *, const double *, const double *, const double *, ptrdiff_t,
                         ptrdiff_t, const ptrdiff_t *);
    """
    void lucid_clamp_f32(float *, const float *, const float *, const float *, Py_ssize_t,
                         Py_ssize_t, const Py_ssize_t *) noexcept nogil
    void lucid_clamp_f64(double *, const double *, const double *, const double *, Py_ssize_t,
                         Py_ssize_t, const Py_ssize_t *) noexcept nogil

include "_bcast2d.pxi"


cdef void _clamp_run(void *job, char *z, const char **p, Py_ssize_t m,
                     Py_ssize_t n) noexcept nogil:
    cdef _Job2D *j = <_Job2D *>job
    if j.isz[0] == 4:
        lucid_clamp_f32(<float *>z, <const float *>p[0], <const float *>p[1],
                        <const float *>p[2], m, n, j.st)
    else:
        lucid_clamp_f64(<double *>z, <const double *>p[0], <const double *>p[1],
                        <const double *>p[2], m, n, j.st)


cdef object _clamp_cpu(cnp.ndarray a, object lo, object hi):
    """clamp of a float32 / float64 array by lucid's kernel, the bounds (None, numbers or
    arrays) in a's dtype, a missing one as an infinity; None where the layout is not one
    of _bcast2d.pxi's (the caller then runs NumPy, which also reports bad shapes)."""
    cdef _Job2D j
    try:
        with np.errstate(over="ignore"):
            xl = np.asarray(-np.inf if lo is None else lo, dtype=a.dtype)
            xh = np.asarray(np.inf if hi is None else hi, dtype=a.dtype)
    except (OverflowError, TypeError, ValueError):
        return None
    arrs = (a, xl, xh)
    cdef tuple shape = _shp(a)
    if not _plan2d(shape, arrs, &j):
        return None
    j.run = _clamp_run
    return _go2d(&j, shape, cnp.PyArray_TYPE(a))


cdef int _combine_codes(int code, Tensor x, Tensor tb, object sb) except -1:
    """Fold one more operand into a result type computed for (x, ...)."""
    cdef DType dt = dtype_of_code(code)
    cdef Tensor probe = _wrap(np.empty((1,) * builtins.max(1, cnp.PyArray_NDIM(x._data))
                                       if cnp.PyArray_NDIM(x._data) else (), dtype=dt.numpy_dtype), dt)
    return _result_code(probe, None, tb, None if tb is not None else sb)


cdef object _clamp_numbers(Tensor x, object lo, object hi):
    """clamp of a cpu float32 / float64 tensor (C-contiguous, aligned) by number bounds
    (a float, an int or None): no promotion to work out and no arrays for the bounds,
    which round to x's dtype as NumPy's cast does (out of range: an infinity). None
    where this does not apply (the general route then runs)."""
    cdef cnp.ndarray a = x._data
    cdef int num = cnp.PyArray_TYPE(a)
    cdef double dlo, dhi
    cdef float flo, fhi
    cdef _Job2D j
    if x._mx is not None or (num != cnp.NPY_FLOAT and num != cnp.NPY_DOUBLE) or \
            not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)):
        return None
    try:
        dlo = -np.inf if lo is None else float(lo)
        dhi = np.inf if hi is None else float(hi)
    except OverflowError:                   # an int beyond float64: the general route's error
        return None
    flo, fhi = <float>dlo, <float>dhi
    j.nops, j.od, j.outer, j.m = 3, 0, 1, 1
    j.n = cnp.PyArray_SIZE(a)
    j.st[0], j.st[1], j.st[2], j.st[3], j.st[4], j.st[5] = j.n, 1, 0, 0, 0, 0
    j.isz[0] = j.isz[1] = j.isz[2] = cnp.PyArray_ITEMSIZE(a)
    j.p[0] = cnp.PyArray_BYTES(a)
    j.p[1] = <const char *>&flo if num == cnp.NPY_FLOAT else <const char *>&dlo
    j.p[2] = <const char *>&fhi if num == cnp.NPY_FLOAT else <const char *>&dhi
    j.run = _clamp_run
    cdef Tensor y = _wrap(_go2d(&j, _shp(a), num), x._dtype)
    _record_clamp(x, None, None, lo, hi, y)
    return y


def clamp(input, min=None, max=None):
    """input limited to [min, max] (either bound may be None, a number or a tensor);
    where min > max the result is max, as PyTorch."""
    if isinstance(input, Tensor) and (min is None or type(min) is float or type(min) is int) \
            and (max is None or type(max) is float or type(max) is int) \
            and (min is not None or max is not None):
        r = _clamp_numbers(<Tensor>input, min, max)
        if r is not None:
            return r
    if min is None and max is None:
        raise ArgumentError("clamp: at least one of min and max must be given")
    for arg, bound in (("min", min), ("max", max)):
        if bound is not None and not isinstance(bound, Tensor) and \
                (not _is_scalar(bound) or isinstance(bound, (str, bytes))):
            raise TypeError(f"clamp(): {arg} must be a number or a lucid Tensor, "
                            f"got {type(bound).__name__}")
        if isinstance(bound, int) and not isinstance(bound, bool):
            try:
                float(bound)
            except OverflowError:
                raise OverflowError(f"clamp(): {arg} = {bound} is too large for a float") from None
    cdef Tensor x = _as_tensor_dev(input)
    cdef Tensor tlo = <Tensor>min if isinstance(min, Tensor) else None
    cdef Tensor thi = <Tensor>max if isinstance(max, Tensor) else None
    if x._mx is not None or (tlo is not None and tlo._mx is not None) or (
            thi is not None and thi._mx is not None):
        return _clamp_gpu(x, tlo, thi, min, max)
    cdef int code = _result_code(x, None, tlo, None if tlo is not None else min)
    if thi is not None or max is not None:
        code = _combine_codes(code, x, thi, max)
    if code != x._dtype.code:
        x = to_dtype(x, dtype_of_code(code), False)
    a = x._data
    lo = tlo._data if tlo is not None else min
    hi = thi._data if thi is not None else max
    if not x._dtype.is_floating_point and x._dtype is not bool_:
        # integer bounds take the input's dtype as PyTorch's do (a uint8 bound -3 is 253;
        # one out of range is an error)
        from lucid._core.creation import _fill_value
        if tlo is None and lo is not None:
            lo = x._dtype.numpy_dtype.type(_fill_value(lo, x._dtype, "clamp", "min"))
        if thi is None and hi is not None:
            hi = x._dtype.numpy_dtype.type(_fill_value(hi, x._dtype, "clamp", "max"))
    r = _clamp_cpu(a, lo, hi) if (cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT or
                                   cnp.PyArray_TYPE(a) == cnp.NPY_DOUBLE) else None
    if r is not None:
        yc = _wrap(<cnp.ndarray>r, x._dtype)
        _record_clamp(x, tlo, thi, min, max, yc)
        return yc
    r = a
    try:
        with np.errstate(over="ignore"):    # a number bound beyond the dtype is an infinity
            if lo is not None:
                r = np.where(np.isnan(r) if x._dtype.is_floating_point else False, r,
                             np.maximum(r, lo))
            if hi is not None:
                r = np.where(np.isnan(r) if x._dtype.is_floating_point else False, r,
                             np.minimum(r, hi))
    except ValueError as e:
        raise ShapeError(f"clamp: bounds do not broadcast with the input: {e}") from None
    cdef cnp.ndarray out = _as_ndarray(r)
    if _shp(out) != _shp(a):
        raise ShapeError(f"clamp: bounds of shape {_shp(out)} would change the input's shape {_shp(a)}")
    out = out.astype(a.dtype, copy=False)
    cdef Tensor y = _wrap(out if out is not a else out.copy(), x._dtype)
    _record_clamp(x, tlo, thi, min, max, y)
    return y


cdef void _record_clamp(Tensor x, Tensor tlo, Tensor thi, object min, object max,
                        Tensor y) except *:
    """clamp's node, the same on both devices: x, the bounds (scalars or detached
    tensors) and the bound tensors' shapes and dtypes."""
    cdef ClampBackward node
    if not grad_enabled() or not (x._requires_grad or (tlo is not None and tlo._requires_grad)
                                  or (thi is not None and thi._requires_grad)):
        return
    node = <ClampBackward>record(_S_clamp, y, (x, tlo, thi), None)
    node._saved_x = _save(x, False)
    node._lo = tlo.detach() if tlo is not None else min
    node._hi = thi.detach() if thi is not None else max
    if tlo is not None:
        node._lo_shape, node._lo_dtype = _shp(tlo._data), tlo._dtype
    if thi is not None:
        node._hi_shape, node._hi_dtype = _shp(thi._data), thi._dtype


cdef Tensor _clamp_gpu(Tensor x, Tensor tlo, Tensor thi, object min, object max):
    """clamp on the gpu: the same result type, nan handling and node as on the cpu."""
    for t in (x, tlo, thi):
        if t is not None and t._mx is None:
            raise LucidError("clamp(): expected input, min and max on the same device, got "
                             "tensors on gpu and cpu")
    cdef int code = _result_code(x, None, tlo, None if tlo is not None else min)
    if thi is not None or max is not None:
        code = _result_code(to_dtype(x, dtype_of_code(code), False), None, thi,
                            None if thi is not None else max)
    cdef DType dt = dtype_of_code(code)
    x = to_dtype(x, dt, False)
    m = mlx()
    r = x._mx
    nan = m.isnan(r) if dt.is_floating_point else None
    try:
        if tlo is not None or min is not None:
            r = m.maximum(r, _mx_of(tlo if tlo is not None else min, dt))
        if thi is not None or max is not None:
            r = m.minimum(r, _mx_of(thi if thi is not None else max, dt))
    except ValueError as e:
        raise ShapeError(f"clamp: bounds do not broadcast with the input: {e}") from None
    if tuple(r.shape) != _shp(x._data):
        raise ShapeError(f"clamp: bounds of shape {tuple(r.shape)} would change the input's "
                         f"shape {_shp(x._data)}")
    if nan is not None:
        r = m.where(nan, x._mx, r)
    cdef Tensor y = _wrap_mx(r, dt)
    _record_clamp(x, tlo, thi, min, max, y)
    return y


def clip(input, min=None, max=None):
    """Alias of clamp."""
    return clamp(input, min, max)


for _fn in (leaky_relu, elu, clamp, clip, nan_to_num, gelu, softplus):
    export(_fn, method=True)
export(lambda self, min: clamp(self, min, None), "clamp_min", public=False, method=True)
export(lambda self, max: clamp(self, None, max), "clamp_max", public=False, method=True)
