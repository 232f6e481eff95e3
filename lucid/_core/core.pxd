# What the op families cimport from lucid's core: dtypes, Tensor, the autograd
# node types, op schemas and the dispatcher's entry points. Everything here is
# implemented in core.pyx; the small inline helpers are defined here so that
# every family compiles them into its own hot paths.

cimport numpy as cnp

# Codes in promotion order: bool < the integers by width < the floating types.
# Only the two half types are unordered (see _promote2); int8 with uint8 -> int16.
cdef enum:
    DT_BOOL = 0
    DT_UINT8 = 1
    DT_INT8 = 2
    DT_INT16 = 3
    DT_INT32 = 4
    DT_INT64 = 5
    DT_FLOAT16 = 6
    DT_FLOAT32 = 7
    DT_FLOAT64 = 8
    DT_BFLOAT16 = 9

cdef enum:
    AMP_PROMOTE = 0
    AMP_KEEP_INPUT = 1
    AMP_FORCE_FP32 = 2

# How a floating-point op treats integer and bool inputs (OpSchema.int_rule).
cdef enum:
    INT_KEEP = 0        # compute in the integer dtype (add, maximum, abs, ...)
    INT_TO_FLOAT = 1    # compute in the default float dtype (div, atan2, exp, ...)
    INT_REJECT = 2      # raise: the op needs a floating input (mean, var, ...)


cdef class DType:
    cdef readonly str name
    cdef readonly int code
    cdef readonly object numpy_dtype
    cdef readonly int itemsize
    cdef readonly bint is_floating_point
    cdef int typenum


cdef class Device:
    cdef readonly str type


cdef class _VersionCounter:
    cdef long long value


cdef class Node:
    cdef tuple _next
    cdef bint _released
    cdef object __weakref__
    cdef list _saved_list(self)
    cdef tuple _eager(self, cnp.ndarray g)
    cdef tuple _graph(self, Tensor g)
    cdef void _release(self)
    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *


cdef class Tensor:
    cdef cnp.ndarray _data
    cdef DType _dtype
    cdef bint _requires_grad
    cdef object _grad
    cdef Node _grad_fn
    cdef int _output_nr
    cdef _VersionCounter _vc
    cdef object _mx             # the mlx.core array of a "gpu" tensor, else None
    cdef list _hooks            # a leaf's [None, [hooks], None] (see _hook_entry), else None
    cdef object _gpu_aliases    # gpu: {id: weakref} of the tensors sharing this storage, else None
    cdef object __weakref__
    cdef _set_requires_grad(self, bint value)
    cdef _VersionCounter _get_vc(self)
    cdef void _bump(self)


cdef class SavedTensor:
    cdef Tensor _tensor
    cdef cnp.ndarray _data
    cdef object _mx
    cdef DType _dtype
    cdef _VersionCounter _vc
    cdef long long _version
    cdef bint _is_output
    cdef bint _released
    cdef void _check(self, Node owner) except *
    cdef cnp.ndarray data(self, Node owner)
    cdef Tensor unpack(self, Node owner)
    cdef void release(self)


cdef class AccumulateGrad(Node):
    cdef readonly Tensor variable


cdef class Kernel:
    """One device's forward of an op, supplied by the op's family."""
    cdef bint half_native       # run2 takes float16/bfloat16 operands, computes in float32
    cdef object run1(self, cnp.ndarray x, object params)
    cdef object run2(self, object a, object b, DType dt, object params)


cdef class OpSchema:
    cdef readonly str name
    cdef readonly int version
    cdef readonly object amp_policy
    cdef readonly bint deterministic
    cdef readonly int arity
    cdef readonly bint saves_input
    cdef readonly bint saves_output
    cdef readonly type node
    cdef int _int_rule
    cdef public Kernel cpu
    cdef public object gpu      # the MLX kernel (a callable), or True where the family's
                                # function handles gpu tensors itself; None: CPU only
    cdef int amp


# -- dtypes and promotion ----------------------------------------------------------
cdef DType dtype_of_code(int code)
cdef DType _dtype_of_array(cnp.ndarray a)
cpdef DType as_dtype(object obj)
cdef int _promote2(int a, int b) noexcept
cdef bint _is_scalar(object v)
cdef int _scalar_code(object v)
cdef int _result_code(Tensor ta, object sa, Tensor tb, object sb) except -1
cdef object _operand(Tensor t, object s, DType dt)

# -- tensors ---------------------------------------------------------------------------
cdef Tensor _as_tensor(object x)
cdef int _norm_dim(object dim, int ndim) except? -1
cdef tuple _norm_dims(object dim, int ndim)
cdef tuple _keepdim_shape(tuple in_shape, tuple axes)
cdef tuple _size_args(tuple args)
cdef object _np_alias(str fn, str torch_name, object torch_value, object torch_default,
                      str np_name, object np_value)
cdef bint _check_device(object dev) except -1
cdef bint _contains_tensor(object seq, int depth=*) except -1
cdef object _tensors_to_nested(object seq, int depth=*)
cdef void _check_storage(Tensor t, str what) except *
cdef cnp.ndarray _to_half(cnp.ndarray a)
cdef cnp.ndarray _half_to_f32(cnp.ndarray a)
cdef cnp.ndarray _f32_to_half(cnp.ndarray a, DType dt)
cdef double _half_scalar(DType dt, object v) except? -1
cdef cnp.ndarray _contig(cnp.ndarray a)
cdef cnp.ndarray _store(object r, DType dt)
cdef Tensor to_dtype(Tensor x, DType dt, bint copy)

# -- the gpu device (MLX) ---------------------------------------------------------------
cdef object mlx()
cdef object mx_dtype(DType dt)
cdef Tensor _wrap_mx(object arr, DType dt)
cdef Tensor _as_tensor_dev(object x)
cdef Tensor to_device(Tensor x, bint gpu)
cdef object _mx_of(object v, DType dt)

# -- autograd ---------------------------------------------------------------------------
cdef bint grad_enabled() noexcept nogil
cdef int autocast_code() noexcept nogil
cdef Tensor _amp_lowp(Tensor x)
cdef SavedTensor _save(Tensor t, bint is_output)
cdef tuple _edge(Tensor t)
cdef void _set_history(Tensor out, Node node) noexcept
cdef Node _new_node(type cls)
cdef cnp.ndarray _sum_to(cnp.ndarray g, tuple shape)
cdef Tensor _sum_to_t(Tensor g, tuple shape)

# -- views -------------------------------------------------------------------------------
cdef Tensor _view(Tensor x, object arr)
cdef void _record_view(Tensor y, Node node) except *
cdef void _invalidate_views(Tensor t, object region) except *
cdef bint _is_view(Tensor t)

# -- threads -----------------------------------------------------------------------------
cdef extern from "lucid_pool.h" nogil:
    ctypedef void (*lucid_piece_fn)(void *ctx, Py_ssize_t piece) noexcept nogil

cdef int _threads_for(Py_ssize_t n) noexcept nogil
cdef Py_ssize_t _piece_len(Py_ssize_t n, int nt) noexcept nogil
cdef void _parallel_for(lucid_piece_fn fn, void *ctx, Py_ssize_t npieces, int nt) noexcept nogil

# -- the dispatcher -------------------------------------------------------------------------
cdef OpSchema _register(str name, str amp, int arity=*, bint saves_input=*, bint saves_output=*,
                        bint deterministic=*, type node=*, int int_rule=*)
cdef Tensor prepare(OpSchema s, object input)
cdef Tensor dispatch_unary(OpSchema s, object input, object params)
cdef object dispatch_binary(OpSchema s, object a, object b, object params)
cdef Node record(OpSchema s, Tensor out, tuple inputs, object params)
cdef void _add_tensor_method(str name, object fn) except *


cdef inline tuple _shp(cnp.ndarray a):
    """An ndarray's shape as a tuple (cnp.ndarray.shape is a C pointer in Cython)."""
    return (<object>a).shape


cdef inline Tensor _wrap(cnp.ndarray data, DType dt):
    """A new tensor around ``data`` (no copy)."""
    cdef Tensor t = Tensor.__new__(Tensor)
    t._data = data
    t._dtype = dt
    return t


cdef inline cnp.ndarray _as_ndarray(object r):
    """NumPy returns scalars from 0-d arithmetic; lucid always stores an ndarray."""
    if type(r) is cnp.ndarray:
        return <cnp.ndarray>r
    return <cnp.ndarray>cnp.PyArray_FROM_O(r)


cdef inline cnp.ndarray _empty_like_arr(cnp.ndarray a, int typenum):
    return cnp.PyArray_EMPTY(cnp.PyArray_NDIM(a), cnp.PyArray_DIMS(a), typenum, 0)


cdef inline bint _is_float_code(int c) noexcept:
    return c >= DT_FLOAT16


cdef inline bint _is_half_code(int c) noexcept:
    """float16 or bfloat16: stored in 2 bytes, computed in float32 and rounded once."""
    return c == DT_FLOAT16 or c == DT_BFLOAT16


cdef inline bint _is_int_code(int c) noexcept:
    """An integer dtype (not bool, not floating)."""
    return DT_UINT8 <= c <= DT_INT64
