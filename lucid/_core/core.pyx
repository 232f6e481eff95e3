"""lucid's core extension: dtypes, Tensor, the autograd engine, op schemas and the
dispatcher every op goes through.

The op families (unary, binary, compare, reduce, shape, linalg, creation) are
extensions of their own that ``cimport`` this module's ``core.pxd``; they supply
kernels and backward nodes, never their own dispatch. Public functions reach
``lucid`` / ``lucid.ops`` and Tensor methods through :func:`export`.
"""
cimport cython
from libc.string cimport memcmp
cimport numpy as cnp
from cpython.buffer cimport PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_REFCNT
from libc.float cimport FLT_MAX
from libc.math cimport INFINITY, fabs
import builtins
import enum
import functools
import operator
import os
import types
import weakref

import ml_dtypes
import numpy as np

cnp.import_array()

cdef extern from "lucid_state.h":
    int lucid_grad_enabled     # thread-local grad mode, 1 in every new thread
    int lucid_autocast_code    # thread-local autocast dtype code, -1 (off) in every new thread
    int lucid_alloc_depth      # thread-local nesting of lucid's allocator scopes

cdef extern from "lucid_half.h" nogil:
    enum:
        LH_F16
        LH_BF16
    void lucid_half_to_f32(int kind, float *y, const unsigned short *x, Py_ssize_t n)
    void lucid_f32_to_half(int kind, unsigned short *y, const float *x, Py_ssize_t n)
    void lucid_f64_to_half(int kind, unsigned short *y, const double *x, Py_ssize_t n)
    const char *lucid_half_isa()

cdef extern from "lucid_vforce.h" nogil:
    const char *lucid_isa()
    const char *lucid_mathlib()

# dtypes: ten singletons, each tied to a NumPy dtype (CPU storage is an ndarray);
# NumPy has no bfloat16, ml_dtypes registers one.

cdef class DType:
    """A lucid dtype (``lucid.float32``, ...). Singletons: compare with ``==`` or ``is``."""

    def __repr__(self):
        return "lucid." + self.name

    def __str__(self):
        return "lucid." + self.name

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))

    @property
    def dtype(self):
        """The NumPy dtype, so that ``np.dtype(t.dtype)`` (and pandas) understand a lucid dtype."""
        return self.numpy_dtype


cdef DType _make_dtype(str name, int code, object np_dtype, bint is_float):
    cdef DType d = DType.__new__(DType)
    d.name = name
    d.code = code
    d.numpy_dtype = np.dtype(np_dtype)
    d.itemsize = d.numpy_dtype.itemsize
    d.is_floating_point = is_float
    d.typenum = d.numpy_dtype.num
    return d


cdef DType bool_ = _make_dtype("bool_", DT_BOOL, np.bool_, False)
cdef DType uint8 = _make_dtype("uint8", DT_UINT8, np.uint8, False)
cdef DType int8 = _make_dtype("int8", DT_INT8, np.int8, False)
cdef DType int16 = _make_dtype("int16", DT_INT16, np.int16, False)
cdef DType int32 = _make_dtype("int32", DT_INT32, np.int32, False)
cdef DType int64 = _make_dtype("int64", DT_INT64, np.int64, False)
cdef DType float16 = _make_dtype("float16", DT_FLOAT16, np.float16, True)
cdef DType float32 = _make_dtype("float32", DT_FLOAT32, np.float32, True)
cdef DType float64 = _make_dtype("float64", DT_FLOAT64, np.float64, True)
cdef DType bfloat16 = _make_dtype("bfloat16", DT_BFLOAT16, ml_dtypes.bfloat16, True)

cdef tuple _DTYPES = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64,
                     bfloat16)   # indexed by code
# bfloat16 is a user-defined NumPy type: its type number (>= 256) is given at run time.
cdef int _BF16_NUM = bfloat16.typenum

# The storage of a tensor that was never initialised (see Tensor.__cinit__).
cdef cnp.ndarray _NO_STORAGE = np.empty((0,), dtype=np.float32)
_NO_STORAGE.flags.writeable = False


cdef void _check_storage(Tensor t, str what) except *:
    if t._data is _NO_STORAGE:
        raise LucidError(
            f"{what} is a {type(t).__name__} without storage: it was created with "
            f"Tensor.__new__ (or a subclass whose __init__ does not call Tensor.__init__); "
            "create tensors with lucid.tensor(...) or call super().__init__(data)")
_DTYPE_NAMES = {d.name: d for d in _DTYPES}
_DTYPE_NAMES["bool"] = bool_

# NumPy type number -> DType (None where lucid has no such dtype).
cdef list _DT_BY_TYPENUM = [None] * 32
for _d in _DTYPES[:DT_BFLOAT16]:
    _DT_BY_TYPENUM[(<DType>_d).typenum] = _d
_DT_BY_TYPENUM[np.dtype(np.longlong).num] = int64 if np.dtype(np.longlong).itemsize == 8 else None
_DT_BY_TYPENUM[np.dtype(np.intc).num] = int32


# torch's legacy tensor type names, indexed by dtype code (Tensor.type()).
cdef tuple _TENSOR_TYPE_NAMES = ("BoolTensor", "ByteTensor", "CharTensor", "ShortTensor",
                                 "IntTensor", "LongTensor", "HalfTensor", "FloatTensor",
                                 "DoubleTensor", "BFloat16Tensor")


def _dtype_by_name(str name):
    return _DTYPE_NAMES[name]


cdef DType dtype_of_code(int code):
    return <DType>_DTYPES[code]


cdef DType _dtype_of_array(cnp.ndarray a):
    """The lucid dtype of an ndarray, or a clear error."""
    cdef int num = cnp.PyArray_TYPE(a)
    cdef object d = _DT_BY_TYPENUM[num] if 0 <= num < 32 else (bfloat16 if num == _BF16_NUM else None)
    if d is not None and not cnp.PyArray_ISNOTSWAPPED(a):
        raise UnsupportedDTypeError(
            f"lucid cannot share memory with a NumPy array of non-native byte order ({a.dtype!r}); "
            "use lucid.tensor(a) (it converts) or a.astype(a.dtype.newbyteorder('='))")
    if d is None:
        raise UnsupportedDTypeError(
            f"lucid does not support NumPy dtype {a.dtype!r}; supported: "
            "float16, bfloat16, float32, float64, uint8, int8, int16, int32, int64, bool "
            "(convert with .astype(...) first)")
    return <DType>d


cpdef DType as_dtype(object obj):
    """Resolve a dtype argument: a lucid dtype, a NumPy dtype or type, a name, or float/int/bool."""
    if isinstance(obj, DType):
        return <DType>obj
    if obj is float:
        return float64
    if obj is int:
        return int64
    if obj is bool:
        return bool_
    if isinstance(obj, str):
        key = obj[6:] if obj.startswith("lucid.") else obj
        if key in _DTYPE_NAMES:
            return _DTYPE_NAMES[key]
    try:
        npd = np.dtype(obj)
    except TypeError:
        npd = None
    if npd is not None and npd.isnative and npd.num < 32 and _DT_BY_TYPENUM[npd.num] is not None:
        return <DType>_DT_BY_TYPENUM[npd.num]
    if npd is not None and npd.num == _BF16_NUM:
        return bfloat16
    raise UnsupportedDTypeError(
        f"unsupported dtype {obj!r}; lucid supports float16, bfloat16, float32, float64, "
        "uint8, int8, int16, int32, int64 and bool_")


# Type promotion, as PyTorch: bool < integers < floating, within a kind the wider wins;
# int32 with float16 -> float16 (the floating kind wins). uint8 with int8 -> int16, the
# smallest type holding both; likewise float16 with bfloat16 -> float32.
cdef int _promote2(int a, int b) noexcept:
    if a == b:
        return a
    if a == DT_BFLOAT16 or b == DT_BFLOAT16:
        a = b if a == DT_BFLOAT16 else a          # the other one
        if a == DT_FLOAT16:
            return DT_FLOAT32
        return a if a > DT_FLOAT16 else DT_BFLOAT16
    if a > b:
        a, b = b, a
    # now a < b in code order: bool, uint8, int8, int16, int32, int64, float16, float32, float64
    if a == DT_UINT8 and b == DT_INT8:
        return DT_INT16
    return b


class LucidError(RuntimeError):
    """Base class of lucid's own errors (a RuntimeError, as PyTorch raises)."""


class ShapeError(LucidError, ValueError):
    """Shapes that do not broadcast or do not match (also a ValueError)."""


class UnsupportedDTypeError(LucidError, TypeError):
    """A dtype lucid cannot store or an op cannot take (also a TypeError)."""


class DTypeOverflowError(LucidError, OverflowError, ValueError):
    """A value the target dtype cannot hold: nan or inf for an integer dtype, a number
    past the dtype's range (PyTorch raises RuntimeError, Python OverflowError)."""


class ArgumentError(LucidError, ValueError):
    """An argument value an op cannot take: a bad size, stride, mode or reduction
    (a RuntimeError, as PyTorch raises, and a ValueError, as NumPy raises)."""


# Tensor: an ndarray (CPU storage) plus dtype, autograd metadata and a version
# counter shared with its views.

cdef class Device:
    """Where a tensor lives: ``cpu`` (NumPy storage, lucid's kernels) or ``gpu`` (an
    MLX array, MLX's kernels on Metal or CUDA)."""

    def __repr__(self):
        return f"device(type='{self.type}')"

    def __str__(self):
        return self.type

    def __eq__(self, other):
        if isinstance(other, Device):
            return self.type == (<Device>other).type
        if isinstance(other, str):
            try:
                return self.type == device(other).type
            except (ValueError, TypeError):
                return False
        return NotImplemented

    def __hash__(self):
        return hash(self.type)

    def __reduce__(self):
        return (device, (self.type,))


cdef inline bint _defers(object other):
    """Whether a binary operator of Tensor hands over to ``other``'s reflected method
    (returns NotImplemented): objects that set ``__lucid_defer__``, such as vmap's
    batched tensors. Numbers and tensors answer at once."""
    if type(other) is Tensor or isinstance(other, (float, int)):
        return False
    return getattr(type(other), "__lucid_defer__", False)


cdef Device _CPU = Device.__new__(Device)
_CPU.type = "cpu"
cdef Device _GPU = Device.__new__(Device)
_GPU.type = "gpu"

# The names PyTorch and MLX users write for the one GPU lucid drives.
cdef frozenset _GPU_NAMES = frozenset(("gpu", "metal", "cuda", "gpu:0", "cuda:0", "metal:0"))


cpdef Device device(object spec="cpu"):
    """``lucid.device("cpu")`` or ``lucid.device("gpu")`` (aliases: "metal", "cuda",
    "gpu:0")."""
    if isinstance(spec, Device):
        return <Device>spec
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string or a lucid.device, got {type(spec).__name__}")
    if spec == "cpu" or spec == "cpu:0":
        return _CPU
    if spec in _GPU_NAMES:
        return _GPU
    raise ArgumentError(f"unknown device {spec!r}; expected 'cpu' or 'gpu' "
                        "(or its aliases 'metal', 'cuda', 'gpu:0')")


# Freelists: an op's tensors, saved tensors and version counters are created and freed
# on every call; reusing their memory keeps the fixed cost of an op low.
@cython.freelist(64)
cdef class _VersionCounter:
    """Shared by a tensor and its views; every in-place op bumps it."""


@cython.freelist(64)
cdef class Tensor:
    """An n-dimensional array with reverse-mode autograd.

    Create one with :func:`lucid.tensor`, :func:`lucid.from_numpy` or a creation
    function (``lucid.zeros``, ...). On the CPU the storage is a NumPy ndarray,
    shared without copies with ``from_numpy`` / ``numpy()`` / ``np.asarray``.
    """
    # _vc is created lazily: most tensors are never saved or mutated.

    # NumPy defers binary operators with a Tensor on the right to Tensor.__radd__ etc.
    __array_priority__ = 1000

    def __cinit__(self):
        # A tensor always has storage: until __init__ (or _wrap) gives it its own, it
        # holds the empty read-only placeholder, which ops refuse (_as_tensor, prepare,
        # dispatch_binary) and which is memory-safe for everything else. So
        # Tensor.__new__(Tensor), or a subclass whose __init__ skips the base, raises
        # instead of crashing.
        self._data = _NO_STORAGE
        self._dtype = float32

    def __init__(self, data, dtype=None, device="cpu", requires_grad=False):
        cdef Tensor t = tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        self._data = t._data
        self._mx = t._mx
        self._dtype = t._dtype
        self._requires_grad = t._requires_grad

    # -- metadata ----------------------------------------------------------
    @property
    def shape(self):
        return _shp(self._data)

    @property
    def ndim(self):
        return cnp.PyArray_NDIM(self._data)

    @property
    def dtype(self):
        return self._dtype

    @property
    def device(self):
        return _CPU if self._mx is None else _GPU

    @property
    def is_cuda(self):
        """Whether the tensor is on the gpu device (PyTorch's name)."""
        return self._mx is not None

    def size(self, dim=None):
        if dim is None:
            return _shp(self._data)
        return _shp(self._data)[_norm_dim(dim, cnp.PyArray_NDIM(self._data))]

    def dim(self):
        return cnp.PyArray_NDIM(self._data)

    def numel(self):
        return cnp.PyArray_SIZE(self._data)

    def element_size(self):
        return self._dtype.itemsize

    def is_floating_point(self):
        return self._dtype.is_floating_point

    def is_contiguous(self):
        return bool(cnp.PyArray_IS_C_CONTIGUOUS(self._data))

    @property
    def _version(self):
        return 0 if self._vc is None else self._vc.value

    # -- autograd metadata ---------------------------------------------------
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self._set_requires_grad(bool(value))

    cdef _set_requires_grad(self, bint value):
        if self._grad_fn is not None:
            if value:
                return
            raise LucidError(
                "you can only change requires_grad flags of leaf tensors; use "
                "detach() to get a tensor that does not require grad")
        if value and not self._dtype.is_floating_point:
            raise UnsupportedDTypeError(
                f"only tensors of floating point dtype can require gradients, got {self._dtype}")
        self._requires_grad = value

    def requires_grad_(self, requires_grad=True):
        self._set_requires_grad(bool(requires_grad))
        return self

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is None:
            self._grad = None
            return
        if not isinstance(value, Tensor):
            raise TypeError(f"assigned grad must be a Tensor or None, got {type(value).__name__}")
        if _shp((<Tensor>value)._data) != _shp(self._data):
            raise ShapeError(
                f"assigned grad has shape {_shp((<Tensor>value)._data)}, "
                f"but the tensor has shape {_shp(self._data)}")
        if (<Tensor>value)._dtype is not self._dtype:
            raise UnsupportedDTypeError(
                f"assigned grad has dtype {(<Tensor>value)._dtype}, "
                f"but the tensor has dtype {self._dtype}")
        self._grad = value

    @property
    def grad_fn(self):
        return self._grad_fn

    @property
    def is_leaf(self):
        return self._grad_fn is None

    @property
    def output_nr(self):
        return self._output_nr

    def detach(self):
        """A tensor sharing this one's memory and version counter, outside the graph."""
        cdef Tensor t = _alias(self)
        t._vc = self._get_vc()
        return t

    def detach_(self):
        self._grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self):
        """This tensor's values, outside the graph (shares memory). Assigning a tensor
        (``p.data = t``) makes this one use ``t``'s storage, dtype and device in place,
        keeping its identity, grad and requires_grad (what Module.to does to parameters)."""
        return _alias(self)

    @data.setter
    def data(self, value):
        _set_data(self, value)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into the ``.grad`` of every leaf that requires grad,
        or, given ``inputs``, into the ``.grad`` of those tensors only (as PyTorch)."""
        cdef bint cg = bool(create_graph)
        cdef bint keep = cg if retain_graph is None else bool(retain_graph)
        if inputs is None:
            _run_engine((self,), (gradient,), keep, cg, None, False)
        else:
            _backward_into((self,), (gradient,), keep, cg, inputs)

    # -- conversion ------------------------------------------------------------
    def numpy(self, *, force=False):
        """An ndarray sharing memory with this tensor (raises if it requires grad). For a
        gpu tensor it is a read-only view of MLX's memory (``.cpu().numpy()`` or
        ``np.array(t)`` for a writable copy)."""
        if self._requires_grad and not force:
            raise LucidError(
                "Can't call numpy() on a tensor that requires grad. "
                "Use tensor.detach().numpy() instead.")
        if self._mx is not None:
            return _host(self)
        return self._data.view()

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad:
            raise LucidError(
                "Can't convert a tensor that requires grad to a NumPy array. "
                "Use tensor.detach().numpy() instead.")
        if self._mx is not None:
            # As PyTorch: NumPy code never silently pulls a gpu tensor to the host.
            raise TypeError("can't convert a gpu tensor to a NumPy array implicitly; use "
                            ".cpu() (or .numpy(), which evaluates and copies out)")
        if copy:
            return np.array(self._data, dtype=dtype, copy=True)
        if dtype is not None and np.dtype(dtype) != self._data.dtype:
            if copy is False:
                raise ArgumentError("a copy is needed to convert to the requested dtype")
            return self._data.astype(dtype)
        return self._data.view()

    # NumPy hands np.exp(t), a_ndarray * t, np.sum(t), ... to these two methods. NumPy's
    # own dispatch to them already costs about as much as a small lucid op, so the
    # common call (a ufunc without keywords, a function in the table) is looked up here
    # in C; the rest (out=, where=, dtype=, reduce, accumulate, the errors) goes to
    # lucid/_interop.py, which fills the tables.
    def __array_ufunc__(self, ufunc, str method, *inputs, **kwargs):
        if not kwargs and method == "__call__":
            fn = _NP_UFUNCS.get(ufunc)
            if fn is not None:
                return fn(inputs[0]) if len(inputs) == 1 else fn(*inputs)
        _load_numpy_protocol()
        return _NP_UFUNC_GENERAL(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        fn = _NP_FUNCTIONS.get(func)
        if fn is not None and _plain_call(types, kwargs):
            return fn(*args, **kwargs)
        _load_numpy_protocol()
        return _NP_FUNCTION_GENERAL(func, types, args, kwargs)

    def item(self):
        if cnp.PyArray_SIZE(self._data) != 1:
            raise LucidError(
                f"a Tensor with {cnp.PyArray_SIZE(self._data)} elements cannot be "
                "converted to a Python scalar")
        return _values(self).item()

    def tolist(self):
        return _values(self).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._dtype.is_floating_point or self._dtype is bool_:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if cnp.PyArray_SIZE(self._data) != 1:
            raise LucidError(
                f"the truth value of a tensor with {cnp.PyArray_SIZE(self._data)} elements "
                "is ambiguous")
        return bool(_values(self).item())

    def __len__(self):
        if cnp.PyArray_NDIM(self._data) == 0:
            raise TypeError("len() of a 0-d tensor")
        return _shp(self._data)[0]

    def __iter__(self):
        if cnp.PyArray_NDIM(self._data) == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(_shp(self._data)[0]))

    # The buffer protocol (memoryview(t)): the storage ndarray's own buffer, no copy.
    # A tensor that requires grad refuses, so np.asarray(t) falls through to __array__'s error.
    def __getbuffer__(self, Py_buffer *buffer, int flags):
        if self._requires_grad:
            raise BufferError("a tensor that requires grad does not export its buffer; detach() it")
        if self._mx is not None:
            raise BufferError("a gpu tensor does not export a buffer; use .cpu() first")
        if self._dtype is bfloat16:     # no buffer format code: NumPy then uses __array__
            raise BufferError("a bfloat16 tensor has no buffer-protocol format; use numpy()")
        cdef Py_buffer *inner = <Py_buffer *>PyMem_Malloc(sizeof(Py_buffer))
        if inner == NULL:
            raise MemoryError()
        try:
            PyObject_GetBuffer(self._data, inner, flags)   # raises e.g. for writable from read-only
        except BaseException:
            PyMem_Free(inner)
            raise
        buffer.buf = inner.buf
        buffer.len = inner.len
        buffer.itemsize = inner.itemsize
        buffer.readonly = inner.readonly
        buffer.ndim = inner.ndim
        buffer.format = inner.format
        buffer.shape = inner.shape
        buffer.strides = inner.strides
        buffer.suboffsets = inner.suboffsets
        buffer.internal = inner
        buffer.obj = self

    def __releasebuffer__(self, Py_buffer *buffer):
        if buffer.internal != NULL:
            PyBuffer_Release(<Py_buffer *>buffer.internal)
            PyMem_Free(buffer.internal)
            buffer.internal = NULL

    # Elementwise __eq__ makes tensors unhashable by default; hash by identity as PyTorch.
    def __hash__(self):
        return id(self)

    def __reduce__(self):
        if self._requires_grad and self._grad_fn is not None:
            raise LucidError("cannot pickle a non-leaf tensor that requires grad; detach() it first")
        if self._mx is not None:
            return (_rebuild, (_host(self).copy(), self._dtype.name, self._requires_grad, "gpu"))
        return (_rebuild, (self._data.copy(), self._dtype.name, self._requires_grad))

    def __repr__(self):
        body = np.array2string(_values(self), separator=", ", prefix="tensor(",
                               max_line_width=80, threshold=1000)
        extras = []
        if self._dtype is not float32 and self._dtype is not int64 and self._dtype is not bool_:
            extras.append(f"dtype={self._dtype}")
        elif cnp.PyArray_SIZE(self._data) == 0:
            extras.append(f"size={_shp(self._data)}")
        if self._mx is not None:
            extras.append("device='gpu'")
        if self._grad_fn is not None:
            extras.append(f"grad_fn=<{type(self._grad_fn).__name__}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        if extras:
            return f"tensor({body}, {', '.join(extras)})"
        return f"tensor({body})"

    # -- internals ---------------------------------------------------------------
    cdef _VersionCounter _get_vc(self):
        if self._vc is None:
            self._vc = _VersionCounter.__new__(_VersionCounter)
        return self._vc

    cdef void _bump(self):
        if self._vc is None:
            self._vc = _VersionCounter.__new__(_VersionCounter)
        self._vc.value += 1
        if self._gpu_aliases is not None:
            _publish(self)

    # -- copies and dtype casts --------------------------------------------------
    def contiguous(self):
        if self._mx is not None or cnp.PyArray_IS_C_CONTIGUOUS(self._data):
            return self
        return clone(self)

    def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False):
        """``t.to(dtype)``, ``t.to(device)``, ``t.to(device, dtype)``, ``t.to(other)`` or
        keywords: this tensor converted (itself when nothing changes, unless ``copy``)."""
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = (<Tensor>a)._dtype, (<Tensor>a).device
            elif isinstance(a, Device) or isinstance(a, str) and not _is_dtype_name(a):
                device = a
            else:
                dtype = a
        cdef Tensor y = self
        cdef bint gpu = _check_device(device) if device is not None else self._mx is not None
        if gpu:
            _check_gpu_dtype(as_dtype(dtype) if dtype is not None else self._dtype, "Tensor.to()")
        if device is not None:
            y = to_device(y, gpu)
        if dtype is not None:
            y = to_dtype(y, as_dtype(dtype), copy and y is self)
        elif copy and y is self:
            y = clone(self)
        return y

    def float(self):
        return to_dtype(self, float32, False)

    def double(self):
        if self._mx is not None:
            _check_gpu_dtype(float64, "Tensor.double()")
        return to_dtype(self, float64, False)

    def half(self):
        return to_dtype(self, float16, False)

    def bfloat16(self):
        return to_dtype(self, bfloat16, False)

    def long(self):
        return to_dtype(self, int64, False)

    def short(self):
        return to_dtype(self, int16, False)

    def char(self):
        return to_dtype(self, int8, False)

    def byte(self):
        return to_dtype(self, uint8, False)

    def type(self, dtype=None, non_blocking=False):
        """``t.type()``: the tensor type's name ("lucid.FloatTensor", as torch's
        "torch.FloatTensor"); ``t.type(dtype)``: ``t`` converted to ``dtype`` (a lucid
        dtype, a name, or a tensor type name such as "torch.ByteTensor")."""
        if dtype is None:
            return "lucid." + _TENSOR_TYPE_NAMES[self._dtype.code]
        if isinstance(dtype, str):
            key = dtype[dtype.rfind(".") + 1:]
            if key in _TENSOR_TYPE_NAMES:
                dtype = _DTYPES[_TENSOR_TYPE_NAMES.index(key)]
        return to_dtype(self, as_dtype(dtype), False)

    def int(self):
        return to_dtype(self, int32, False)

    def bool(self):
        return to_dtype(self, bool_, False)

    def cpu(self):
        """This tensor on the cpu (itself if it is there)."""
        return to_device(self, False)

    def gpu(self):
        """This tensor on the gpu device (MLX); itself if it is there."""
        _check_gpu_dtype(self._dtype, "Tensor.gpu()")
        return to_device(self, True)

    def eval(self):
        """Evaluate a gpu tensor's pending MLX computation; returns the tensor."""
        if self._mx is not None:
            mlx().eval(self._mx)
        return self

    # -- operators: the functions are the op families' (see export) ---------------
    # Named methods (x.exp(), x.sum(), x.reshape(), ...) are installed by export()
    # from the families' rows; only the operator slots, which a static type must
    # define in its body, are here.
    def __neg__(self):
        return dispatch_unary(_operator_schema(_OP_NEG), self, None)

    def __pos__(self):
        return self

    def __add__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_ADD), self, other, 1)

    def __radd__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_ADD), other, self, 1)

    def __sub__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_SUB), self, other, 1)

    def __rsub__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_SUB), other, self, 1)

    def __mul__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_MUL), self, other, None)

    def __rmul__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_MUL), other, self, None)

    def __truediv__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_DIV), self, other, None)

    def __rtruediv__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_DIV), other, self, None)

    def __pow__(self, other, modulo):
        if _defers(other):
            return NotImplemented
        if modulo is not None:
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_POW), self, other, None)

    def __rpow__(self, other, modulo):
        if _defers(other):
            return NotImplemented
        if modulo is not None:
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_POW), other, self, None)

    def __mod__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_REMAINDER), self, other, None)

    def __rmod__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_REMAINDER), other, self, None)

    def __iadd__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.add_(self, other)

    def __isub__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.sub_(self, other)

    def __imul__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.mul_(self, other)

    def __itruediv__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.div_(self, other)

    def __abs__(self):
        return ops.abs(self)

    def __invert__(self):
        return ops.logical_not(self) if self._dtype is bool_ else ops.bitwise_not(self)

    def __eq__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_EQ), self, other, None)

    def __ne__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_NE), self, other, None)

    def __lt__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_LT), self, other, None)

    def __le__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_LE), self, other, None)

    def __gt__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_GT), self, other, None)

    def __ge__(self, other):
        if _defers(other):
            return NotImplemented
        return dispatch_binary(_operator_schema(_OP_GE), self, other, None)

    # &, |, ^, <<, >>: bitwise on integer tensors as torch (on bool tensors &, |, ^ are
    # the logical ops, which is what bitwise means for bool); floating tensors raise.
    def __and__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_and(self, other)

    def __rand__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_and(other, self)

    def __or__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_or(self, other)

    def __ror__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_or(other, self)

    def __xor__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_xor(self, other)

    def __rxor__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_xor(other, self)

    def __lshift__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_left_shift(self, other)

    def __rlshift__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_left_shift(other, self)

    def __rshift__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_right_shift(self, other)

    def __rrshift__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.bitwise_right_shift(other, self)

    def __floordiv__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.floor_divide(other, self)

    def __getitem__(self, index):
        return ops._getitem(self, index)

    def __setitem__(self, index, value):
        ops._setitem(self, index, value)

    def __matmul__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.matmul(self, other)

    def __rmatmul__(self, other):
        if _defers(other):
            return NotImplemented
        return ops.matmul(other, self)

    @property
    def T(self):
        return ops._reverse_dims(self)


def _rebuild(data, dtype_name, requires_grad, device="cpu"):
    """Unpickle a tensor. The arguments come from a pickle, so nothing is trusted: the
    array must be an ndarray of exactly the named lucid dtype."""
    if type(data) is not np.ndarray:
        raise TypeError(f"_rebuild(): data must be a numpy.ndarray, got {type(data).__name__}")
    if not isinstance(dtype_name, str) or dtype_name not in _DTYPE_NAMES:
        raise UnsupportedDTypeError(f"_rebuild(): unknown dtype name {dtype_name!r}")
    if not isinstance(requires_grad, (bool, np.bool_)):
        raise TypeError(f"_rebuild(): requires_grad must be a bool, got {type(requires_grad).__name__}")
    cdef DType dt = _DTYPE_NAMES[dtype_name]
    cdef DType actual = _dtype_of_array(data)       # raises for object, string, ... arrays
    if actual is not dt:
        raise UnsupportedDTypeError(
            f"_rebuild(): the array has dtype {data.dtype}, but the pickle says {dt}")
    cdef Tensor t = _wrap(data, dt)
    if _check_device(device):
        t = to_device(t, True)
    if requires_grad:
        t._set_requires_grad(True)
    return t


cdef object _INT64_MAX = 2**63 - 1


cdef int _norm_dim(object dim, int ndim) except? -1:
    if isinstance(dim, (bool, np.bool_)):
        raise TypeError(f"dim must be an int, got bool {dim!r}")
    try:
        dim = dim.__index__()
    except AttributeError:
        raise TypeError(f"dim must be an int, got {type(dim).__name__}") from None
    cdef int lo = -ndim if ndim > 0 else -1
    cdef int hi = ndim - 1 if ndim > 0 else 0
    if dim < lo or dim > hi:
        raise IndexError(
            f"dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    cdef int d = dim
    return d + ndim if d < 0 else (d if ndim > 0 else 0)


cdef object _np_alias(str fn, str torch_name, object torch_value, object torch_default,
                      str np_name, object np_value):
    """NumPy's keyword (axis=, keepdims=, ddof=) next to torch's (dim=, keepdim=, correction=):
    whichever is given wins; both is an error."""
    if np_value is None:
        return torch_value
    if torch_value is not torch_default:
        raise TypeError(f"{fn}() got both {torch_name}= and {np_name}=; pass one of them")
    return np_value


cdef tuple _size_args(tuple args):
    """``zeros(2, 3)`` and ``zeros((2, 3))`` both mean the shape (2, 3)."""
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        if isinstance(args[0], (str, bytes)) or not hasattr(args[0], "__iter__"):
            raise TypeError(f"size must be a tuple of ints, got {type(args[0]).__name__}")
        args = tuple(args[0])
    for s in args:
        if not isinstance(s, (int, np.integer)) or isinstance(s, (bool, np.bool_)):
            raise TypeError(f"size must be a tuple of ints, got {s!r} ({type(s).__name__})")
        if s < -1:
            raise ArgumentError(f"size: negative dimension {s}")
        if s > _INT64_MAX:
            raise OverflowError(f"size: dimension {s} does not fit in int64")
    return tuple(int(s) for s in args)


def _int_arg(v, str fn, str name):
    """``v``, the argument ``name`` of ``fn``, as a Python int: bools, floats and other
    types raise a TypeError, ints beyond int64 an OverflowError, both naming it."""
    if isinstance(v, Tensor) and (<Tensor>v)._data.size == 1 and \
            _is_int_code((<Tensor>v)._dtype.code):
        v = (<Tensor>v).item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{fn}(): argument '{name}' must be an int, got {type(v).__name__}")
    v = int(v)
    if not -_INT64_MAX - 1 <= v <= _INT64_MAX:
        raise OverflowError(f"{fn}(): argument '{name}' = {v} does not fit in int64")
    return v


def _float_arg(v, str fn, str name):
    """``v``, the argument ``name`` of ``fn``, as a Python float: a real number (or a
    one-element tensor); anything else raises a TypeError, an int too large for a
    float an OverflowError, both naming it."""
    if isinstance(v, Tensor) and (<Tensor>v)._data.size == 1:
        v = (<Tensor>v).item()
    if not _is_scalar(v):
        raise TypeError(f"{fn}(): argument '{name}' must be a real number, got "
                        f"{type(v).__name__}")
    try:
        return float(v)
    except OverflowError:
        raise OverflowError(f"{fn}(): argument '{name}' = {v} is too large for a float") from None


# -- construction from Python data --------------------------------------------

cdef object _NUMERIC_KINDS = frozenset("biuf")


cdef _check_int_range(cnp.ndarray a, DType dt, str fn):
    """Raise DTypeOverflowError unless every value of ``a`` (ints or floats) fits the
    integer dtype ``dt`` after truncation toward zero."""
    info = np.iinfo(dt.numpy_dtype)
    lo_ok = -info.max if dt.code == DT_UINT8 else info.min
    if a.dtype.kind == "f":
        bad = a[~np.isfinite(a)]
        if bad.size:
            raise DTypeOverflowError(f"{fn}: value {bad[0]} cannot be converted to {dt} "
                                     "without overflow")
        lo, hi = np.trunc(a.min()), np.trunc(a.max())
    else:
        lo, hi = int(a.min()), int(a.max())
    if lo < lo_ok or hi > info.max:
        bad = hi if hi > info.max else lo
        raise DTypeOverflowError(f"{fn}: value {bad} cannot be converted to {dt} without "
                                 "overflow")


cdef cnp.ndarray _array_from_data(object data, DType dt):
    """Python scalars / nested lists / ndarrays -> a new ndarray of a lucid dtype."""
    cdef cnp.ndarray a
    if isinstance(data, Tensor):
        _check_storage(<Tensor>data, "data")
        a = _values(<Tensor>data)
        return a.astype(dt.numpy_dtype if dt is not None else a.dtype, copy=True)
    if isinstance(data, (str, bytes)) or data is None:
        raise TypeError(f"lucid.tensor() needs numeric data, got {type(data).__name__}")
    if isinstance(data, (list, tuple)) and _contains_tensor(data):
        data = _tensors_to_nested(data)
    try:
        a = np.array(data, copy=True)
    except (ValueError, TypeError, RecursionError, OverflowError) as e:
        raise ShapeError(f"could not build a tensor from this data: {e}") from None
    if a.dtype.kind == "O":      # Python ints beyond int64 (NumPy keeps them as objects)
        a = _from_big_ints(a, dt)
    if a.dtype.kind not in _NUMERIC_KINDS and a.dtype.num != _BF16_NUM:
        if a.dtype.kind == "c":
            raise UnsupportedDTypeError("lucid does not support complex numbers")
        raise TypeError(
            f"lucid.tensor() needs numeric data (bool, int or float), got elements of "
            f"NumPy kind {a.dtype.kind!r} ({a.dtype})")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and a.max() > 0x7FFFFFFFFFFFFFFF:
        raise UnsupportedDTypeError(
            f"uint64 value {a.max()} does not fit in lucid's largest integer dtype, int64")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if dt is None:
        # As torch.tensor: Python numbers give the default dtypes (float32, int64); NumPy
        # arrays and scalars, pandas columns and other array-likes keep theirs, also
        # inside lists ([np.float64(.1)] -> float64, [np.float32(1), 2.0] -> float32).
        if isinstance(data, (list, tuple)):
            if a.dtype.num == _BF16_NUM:
                dt = bfloat16
            elif a.dtype.kind == "f":
                dt = float64 if a.dtype.itemsize == 8 and _holds_numpy_float64(data) else (
                    float16 if a.dtype.itemsize == 2 else float32)
            elif a.dtype.kind == "b":
                dt = bool_
            else:
                dt = _dtype_of_array(a) if a.dtype.kind == "i" or a.dtype == np.uint8 else int64
        elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
            dt = float32 if a.dtype.kind == "f" else (bool_ if a.dtype.kind == "b" else int64)
        elif a.dtype.kind == "u" and a.dtype.itemsize > 1:
            dt = int64          # uint16 / uint32 / uint64: lucid's unsigned type is uint8
        else:
            dt = _dtype_of_array(a)
    elif _is_int_code(dt.code) and a.dtype.kind in "iuf" and \
            not isinstance(data, (cnp.ndarray, np.generic)) and a.size:
        # As torch.tensor: Python numbers that an integer dtype cannot hold are an error
        # (nan, inf, out of range; uint8 also takes -255..-1 and wraps them); finite
        # floats are truncated toward zero. NumPy arrays are cast as they are.
        _check_int_range(a, dt, "lucid.tensor()")
    if a.dtype != dt.numpy_dtype:
        a = _cast_array(a, dt)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


cdef cnp.ndarray _from_big_ints(cnp.ndarray a, DType dt):
    """An object array holding ints too large for int64: a floating dtype takes them
    as floats (as torch.tensor(2**70, dtype=float64)); otherwise they are an error."""
    for v in a.flat:
        if isinstance(v, int) and not isinstance(v, bool) and not \
                -_INT64_MAX - 1 <= v <= _INT64_MAX:
            if dt is None or not dt.is_floating_point:
                raise OverflowError(
                    f"lucid.tensor(): data holds the integer {v}, which does not fit in "
                    "int64; write it as a float, or pass a floating dtype")
            try:
                return a.astype(np.float64)
            except OverflowError:
                raise OverflowError(f"lucid.tensor(): the integer {v} in data is too large "
                                    f"for {dt}") from None
    return a


cdef bint _holds_numpy_float64(object seq, int depth=0) except -1:
    _check_depth(depth)
    for item in seq:
        if isinstance(item, (list, tuple)):
            if _holds_numpy_float64(item, depth + 1):
                return True
        elif isinstance(item, (np.ndarray, np.generic)) and item.dtype.kind == "f" \
                and item.dtype.itemsize >= 8:
            return True
    return False


# Nested lists deeper than an array can have dims are refused before anything recurses
# over them (a C recursion with no bound overflows the stack on self-referential or
# very deep lists).
cdef int _MAX_NESTING = 64      # NumPy's maximum number of dimensions


cdef void _check_depth(int depth) except *:
    if depth > _MAX_NESTING:
        raise ShapeError(
            f"data nested more than {_MAX_NESTING} levels deep (or a list that contains "
            "itself) cannot become a tensor: an array has at most 64 dims")


cdef bint _contains_tensor(object seq, int depth=0) except -1:
    _check_depth(depth)
    for item in seq:
        if isinstance(item, Tensor):
            return True
        if isinstance(item, (list, tuple)) and _contains_tensor(item, depth + 1):
            return True
    return False


cdef object _tensors_to_nested(object seq, int depth=0):
    _check_depth(depth)
    out = []
    for item in seq:
        if isinstance(item, Tensor):
            _check_storage(<Tensor>item, "an element")
            out.append(_values(<Tensor>item))
        elif isinstance(item, (list, tuple)):
            out.append(_tensors_to_nested(item, depth + 1))
        else:
            out.append(item)
    return out


def tensor(data, dtype=None, device="cpu", requires_grad=False):
    """A new tensor holding a copy of ``data``.

    ``data``: a Python scalar, (nested) list or tuple, NumPy array or tensor.
    The dtype defaults to float32 for float data, int64 for int data, bool for
    bool data; a NumPy array keeps its dtype.
    """
    cdef bint gpu = _check_device(device)
    cdef DType dt = as_dtype(dtype) if dtype is not None else None
    cdef Tensor t = _wrap(_array_from_data(data, dt), None)
    t._dtype = _dtype_of_array(t._data)
    if gpu:
        _check_gpu_dtype(t._dtype, "lucid.tensor()")
        t = to_device(t, True)
    if requires_grad:
        t._set_requires_grad(True)
    return t


cdef bint _may_overlap(cnp.ndarray a):
    """Whether two elements of ``a`` share memory: a stride-0 (broadcast) or an overlapping
    as_strided layout. Exact, except that a huge layout the quick test cannot clear counts
    as overlapping."""
    cdef Py_ssize_t item = cnp.PyArray_ITEMSIZE(a), span = item
    dims = sorted((abs(st), n) for st, n in zip((<object>a).strides, (<object>a).shape) if n > 1)
    for st, n in dims:         # each dim must step past everything the smaller ones cover
        if st < span:
            break
        span += st * (n - 1)
    else:
        return False
    if cnp.PyArray_SIZE(a) > (1 << 22):
        return True
    offs = np.zeros(1, np.int64)
    for st, n in dims:
        offs = (offs[:, None] + np.arange(n, dtype=np.int64) * st).ravel()
    offs.sort()
    return bool((np.diff(offs) < item).any())


def from_numpy(cnp.ndarray a not None):
    """A tensor sharing memory with the ndarray ``a`` (no copy). An array in which several
    elements share memory (a stride-0 or overlapping layout, e.g. an expanded torch tensor
    through DLPack) gives a read-only tensor, as lucid's own expand(): an in-place write
    into it raises, as in PyTorch, instead of letting the last write win."""
    if cnp.PyArray_ISWRITEABLE(a) and _may_overlap(a):
        a = a.view()
        a.flags.writeable = False
    cdef Tensor t = _wrap(a, _dtype_of_array(a))
    return t


cdef bint _check_device(object dev) except -1:
    """Whether ``dev`` (None: the CPU) names the gpu; raises for anything else."""
    if dev is None or dev is _CPU or (isinstance(dev, str) and dev == "cpu"):
        return False
    return device(dev) is _GPU


cdef Tensor _as_tensor(object x):
    """Tensors pass through; numbers, lists and ndarrays become (copied) tensors.
    A gpu tensor is refused: the caller is a CPU-only op (gpu-aware ones use
    _as_tensor_dev)."""
    if isinstance(x, Tensor):
        if (<Tensor>x)._data is _NO_STORAGE:
            _check_storage(<Tensor>x, "the input")
        if (<Tensor>x)._mx is not None:
            raise _cpu_only(None)
        return <Tensor>x
    if isinstance(x, int) and not -_INT64_MAX - 1 <= x <= _INT64_MAX:
        raise OverflowError(f"the input must be a lucid Tensor or a number; the integer {x} "
                            "does not fit in int64 (write it as a float)")
    if isinstance(x, (bool, int, float, list, tuple, np.ndarray, np.generic)):
        return tensor(x)
    if isinstance(x, complex):
        raise UnsupportedDTypeError(f"lucid does not support complex numbers, got {x!r}")
    refuse = getattr(type(x), "__lucid_refused__", None)
    if refuse is not None:     # e.g. vmap's batched tensor: an op without a batching rule
        refuse(x)
    raise TypeError(f"expected a lucid Tensor (or numeric data), got {type(x).__name__}")


cdef inline cnp.ndarray _values(Tensor t):
    return t._data if t._mx is None else _host(t)


cdef bint _is_dtype_name(str s):
    return s in _DTYPE_NAMES or s in ("float", "double", "half", "long", "int", "bool")


cdef Tensor _as_tensor_dev(object x):
    """_as_tensor for ops that run on both devices."""
    if isinstance(x, Tensor) and (<Tensor>x)._mx is not None:
        return <Tensor>x
    return _as_tensor(x)


cdef object _cpu_only(str op):
    what = f"lucid.{op}" if op else "this op"
    return LucidError(f"{what} does not run on the gpu device; move its inputs with .cpu() "
                      "(and the result back with .gpu())")


def _cpu_only_error(str op):
    """The error of a CPU-only op (``op``: its name after ``lucid.``) given gpu tensors."""
    return _cpu_only(op)


# -- the gpu device: tensors holding MLX arrays --------------------------------------
# A gpu tensor keeps its values in ``_mx`` (an mlx.core array, lazy until evaluated)
# and, in ``_data``, a read-only zero-strided array of the same shape and dtype that
# holds no memory: shape, dtype and the autograd bookkeeping (node setups, dims
# normalisation) read it as for a CPU tensor. Values never come from it: every op
# that computes reaches the tensor through prepare(), _as_tensor() or the dispatcher,
# which hand gpu tensors to MLX or refuse them.

cdef object _mlx_core = None      # mlx.core, imported on first use
cdef dict _MX_DTYPE = {}          # lucid dtype code -> mlx dtype
cdef dict _DT_OF_MX = {}          # mlx dtype -> lucid DType


cdef object mlx():
    """mlx.core, set up for lucid's gpu device on first use (or a clear error)."""
    global _mlx_core
    if _mlx_core is not None:
        return _mlx_core
    try:
        import mlx.core as m
    except ImportError:
        raise LucidError(
            "the gpu device needs MLX: pip install 'lucid[gpu]' (MLX on macOS; on Linux "
            "'mlx[cuda]' for an NVIDIA GPU, or 'mlx[cpu]' with LUCID_MLX_DEVICE=cpu to run "
            "the gpu path on MLX's CPU stream)") from None
    want = os.environ.get("LUCID_MLX_DEVICE", "gpu").strip().lower() or "gpu"
    if want == "cpu":
        m.set_default_device(m.cpu)
    elif want == "gpu":
        if not m.is_available(m.gpu):
            raise LucidError(
                "no GPU: MLX is installed but finds no Metal or CUDA device. Set "
                "LUCID_MLX_DEVICE=cpu to run lucid's gpu path on MLX's CPU stream.")
        m.set_default_device(m.gpu)
    else:
        raise ArgumentError(f"LUCID_MLX_DEVICE={want!r}: expected 'gpu' or 'cpu'")
    for dt, mdt in ((bool_, m.bool_), (uint8, m.uint8), (int8, m.int8), (int16, m.int16),
                    (int32, m.int32), (int64, m.int64),
                    (float16, m.float16), (bfloat16, m.bfloat16), (float32, m.float32),
                    (float64, m.float64)):
        _MX_DTYPE[dt.code] = mdt
        _DT_OF_MX[mdt] = dt
    _mlx_core = m
    return m


def gpu_available():
    """Whether ``device="gpu"`` works here: MLX is installed and has a Metal or CUDA
    device, or LUCID_MLX_DEVICE=cpu puts the gpu path on MLX's CPU stream."""
    try:
        mlx()
    except (LucidError, ValueError):
        return False
    return True


def _mx_on_metal():
    """Whether the gpu device runs on Metal (which has no float64). A Python function,
    looked up when called, so that tests can stand in for a Metal device."""
    m = mlx()
    return m.default_device() == m.gpu and m.metal.is_available()


def _check_gpu_dtype(DType dt, str op):
    """Raise, naming ``op``, if ``dt`` cannot live on the gpu device."""
    if dt is float64 and _mx_on_metal():
        raise UnsupportedDTypeError(
            f"{op}: float64 is not available on the gpu device (Metal has no float64); use "
            "float32 there, or keep float64 tensors on the cpu")


cdef object mx_dtype(DType dt):
    m = mlx()
    if dt is float64:
        _check_gpu_dtype(dt, "an op")
    return _MX_DTYPE[dt.code]


cdef char _NOBUF[16]              # what the shape-only arrays of gpu tensors point at

cdef extern from "numpy/arrayobject.h":
    object _new_from_descr "PyArray_NewFromDescr" (
        void *subtype, void *descr, int nd, cnp.npy_intp *dims, cnp.npy_intp *strides,
        void *data, int flags, void *obj)


cdef cnp.ndarray _shape_only(object shape, DType dt):
    cdef int nd = len(shape), i
    cdef cnp.npy_intp dims[64]
    cdef cnp.npy_intp strides[64]
    if nd > 64:
        raise ArgumentError(f"a tensor has at most 64 dimensions, got {nd}")
    for i in range(nd):
        dims[i] = shape[i]
        strides[i] = 0
    cdef cnp.dtype d = dt.numpy_dtype
    Py_INCREF(d)                  # PyArray_NewFromDescr steals the reference
    return <cnp.ndarray>_new_from_descr(<void *>np.ndarray, <void *>d, nd, dims, strides,
                                        <void *>_NOBUF, 0, NULL)


cdef Tensor _wrap_mx(object arr, DType dt):
    """A new gpu tensor around the MLX array ``arr`` (whose dtype is ``dt``'s)."""
    cdef Tensor t = Tensor.__new__(Tensor)
    t._data = _shape_only(arr.shape, dt)
    t._dtype = dt
    t._mx = arr
    return t


cdef inline bint _same_dims(cnp.ndarray a, cnp.ndarray b):
    cdef int n = cnp.PyArray_NDIM(a), i
    if n != cnp.PyArray_NDIM(b):
        return False
    for i in range(n):
        if cnp.PyArray_DIMS(a)[i] != cnp.PyArray_DIMS(b)[i]:
            return False
    return True


cdef inline Tensor _wrap_mx_like(object arr, DType dt, Tensor like):
    """_wrap_mx for a result of ``like``'s shape: shares like's shape-only array (it
    holds no values) unless that marks a view, saving MLX's shape query."""
    cdef Tensor t
    if like is None or like._dtype is not dt or cnp.PyArray_BASE(like._data) != NULL:
        return _wrap_mx(arr, dt)
    t = _wrap(like._data, dt)
    t._mx = arr
    return t


cdef inline Tensor _alias(Tensor x):
    """A new tensor (no history) on x's storage, on either device."""
    cdef Tensor t = _wrap(x._data, x._dtype)
    t._mx = x._mx
    if x._mx is not None:
        _join_aliases(x, t)
    return t


# gpu storage shared by aliases. MLX arrays are immutable, so an in-place op on a gpu
# tensor gives it a new array; tensors that alias its storage (detach(), .data, a
# Parameter made from it) share one dict {id: weakref}, and every write (every _bump)
# hands the new array to all of them: a write through any alias lands in all, as on the
# cpu. (A dict keyed by id, not a WeakSet: Tensor's == is element-wise.)
def _forget_alias(ref, group, key):
    if group.get(key) is ref:
        del group[key]


cdef void _add_alias(dict group, Tensor t) except *:
    key = id(t)
    group[key] = weakref.ref(t, functools.partial(_forget_alias, group=group, key=key))
    t._gpu_aliases = group


cdef void _join_aliases(Tensor x, Tensor t) except *:
    if x._gpu_aliases is None:
        _add_alias({}, x)
    _add_alias(<dict>x._gpu_aliases, t)


cdef void _leave_aliases(Tensor t) except *:
    if t._gpu_aliases is not None:
        (<dict>t._gpu_aliases).pop(id(t), None)
        t._gpu_aliases = None


cdef void _publish(Tensor t):
    cdef Tensor o
    for ref in list((<dict>t._gpu_aliases).values()):
        other = ref()
        if other is not None and other is not t:
            o = <Tensor>other
            o._mx = t._mx
            o._data = t._data


cdef object _mx_of(object v, DType dt):
    """An operand for MLX: a gpu tensor's array (cast to ``dt``) or a scalar as a 0-d
    array of ``dt``, so that MLX never promotes by its own rules."""
    m = mlx()
    if isinstance(v, Tensor):
        a = (<Tensor>v)._mx
        if a is None:
            raise _device_mismatch(None)
        return a if (<Tensor>v)._dtype is dt else a.astype(mx_dtype(dt))
    return m.array(v, dtype=mx_dtype(dt))


cdef object _device_mismatch(str op):
    what = f"lucid.{op}()" if op else "an op"
    return LucidError(
        f"Expected all tensors to be on the same device, but {what} got tensors on gpu "
        f"and cpu; move one with .gpu() or .cpu()")


cdef cnp.ndarray _host(Tensor t):
    """A gpu tensor's values as a read-only ndarray (evaluates; no copy where MLX's buffer
    allows). Read-only: the memory is MLX's, which other arrays, lazy results and saved
    tensors may share, so a write through it would change them behind lucid's back."""
    m = mlx()
    a = t._mx
    m.eval(a)
    cdef cnp.ndarray r
    if t._dtype is bfloat16:      # no buffer format for bfloat16: move its bits
        r = np.asarray(a.view(m.uint16)).view(bfloat16.numpy_dtype)
    else:
        r = np.asarray(a)
    r.flags.writeable = False
    return r


cdef Tensor to_device(Tensor x, bint gpu):
    """``x`` on the cpu or the gpu: a copy either way (a cpu tensor never aliases MLX's
    memory). Recorded (the gradient goes back to x's device)."""
    if (x._mx is not None) == gpu:
        return x
    cdef Tensor y
    if gpu:
        m = mlx()
        if x._dtype is bfloat16:
            y = _wrap_mx(m.array(x._data.view(np.uint16)).view(m.bfloat16), x._dtype)
        else:
            y = _wrap_mx(m.array(x._data, dtype=mx_dtype(x._dtype)), x._dtype)
    else:           # a copy: the cpu tensor is the user's to write
        y = _wrap(np.array(_host(x), copy=True), x._dtype)
    if lucid_grad_enabled and x._requires_grad:
        _record_cast(x, y)
    return y


def _assign_(Tensor dst not None, Tensor src not None):
    """Give the gpu tensor ``dst`` the values of ``src`` (same shape; cast to dst's
    dtype) and bump its version counter; records nothing. MLX arrays are immutable,
    so an in-place update on the gpu replaces the tensor's array (the optimizers'
    gpu step)."""
    if dst._mx is None or src._mx is None:
        raise LucidError("_assign_ takes two gpu tensors")
    if _shp(src._data) != _shp(dst._data):
        raise ShapeError(f"_assign_: shape {_shp(src._data)} into {_shp(dst._data)}")
    a = src._mx
    dst._mx = a if src._dtype is dst._dtype else a.astype(mx_dtype(dst._dtype))
    dst._bump()
    return dst


cdef void _set_data(Tensor dst, object value) except *:
    if not isinstance(value, Tensor):
        raise TypeError(f"Tensor.data must be set to a Tensor, got {type(value).__name__}")
    cdef Tensor src = <Tensor>value
    if dst._requires_grad and not src._dtype.is_floating_point:
        raise LucidError(f"data set to a {src._dtype} tensor: a tensor that requires grad "
                         "must be floating point")
    _leave_aliases(dst)     # dst now shares src's storage, no longer its old one's
    dst._data, dst._dtype, dst._mx = src._data, src._dtype, src._mx
    if src._mx is not None:
        _join_aliases(src, dst)
    dst._bump()             # graphs that saved the old values refuse to use the new ones


def _bump_version(Tensor t not None):
    """Mark ``t`` as modified in place (its values were written through NumPy or C)."""
    t._bump()


def eval_tensors(*tensors):
    """Evaluate gpu tensors' pending MLX computations (cpu tensors are always ready)."""
    arrs = [(<Tensor>t)._mx for t in tensors
            if isinstance(t, Tensor) and (<Tensor>t)._mx is not None]
    if arrs:
        mlx().eval(*arrs)


# Autograd: backward nodes, saved tensors, and the engine.
#
# Ownership, so that a graph is freed by reference counting alone:
#   output tensor --grad_fn--> node --next_functions--> earlier nodes --> AccumulateGrad --> leaf
#   node --saved input--> input tensor (never its own output)
# A node that needs its output (ExpBackward) saves only the output's storage and
# version counter, and rebuilds a tensor pointing back at itself when graph-mode
# backward asks for it. No edge ever points from a node to its outputs.


cdef class Node:
    """A backward node: one per recorded op application.

    ``next_functions`` holds one ``(node, input_nr)`` edge per input (``(None, 0)``
    for inputs that need no gradient). ``grad_formula(g)`` is the eager backward
    (raw kernels, records nothing); ``grad_formula_impl(...)`` is the same formula
    written with lucid ops, used when ``create_graph=True``.

    A node states its math once, in ``_graph`` (the formula in lucid ops). The eager
    backward runs that same formula on the gradient's array, with grad mode off, unless
    the node has a fused kernel (unary and binary rows that name one override ``_eager``).
    """

    @property
    def next_functions(self):
        return self._next

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    @property
    def saved_tensors(self):
        """The tensors this node keeps for its backward (unpacked)."""
        cdef SavedTensor s
        cdef list out = []
        for s in self._saved_list():
            out.append(s.unpack(self))
        return tuple(out)

    cdef list _saved_list(self):
        return []

    cdef tuple _eager(self, cnp.ndarray g):
        cdef tuple res = self._graph(_wrap(g, _dtype_of_array(g)))
        return tuple(None if r is None else
                     ((<Tensor>r)._data if (<Tensor>r)._mx is None else r) if isinstance(r, Tensor)
                     else _as_ndarray(r) for r in res)

    cdef tuple _graph(self, Tensor g):
        """grad_formula_impl(g, *saved tensors), as a tuple with one entry per input."""
        cdef SavedTensor s
        args = [s.unpack(self) for s in self._saved_list()]
        r = self.grad_formula_impl(g, *args)
        return r if type(r) is tuple else (r,)

    cdef void _release(self):
        cdef SavedTensor s
        self._released = True
        for s in self._saved_list():
            s.release()

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        """Called by record(): keep what the formula needs (nothing by default)."""

    def grad_formula(self, g):
        """Eager backward: the gradient w.r.t. each input, given the output's gradient ``g``."""
        cdef Tensor tg = _as_tensor(g)
        res = self._eager(_contig(tg._data))
        out = tuple(None if r is None else _wrap(_as_ndarray(r), _dtype_of_array(_as_ndarray(r)))
                    for r in res)
        return out[0] if len(out) == 1 else out


cdef cnp.ndarray _contig(cnp.ndarray a):
    """``a`` as a C-contiguous, aligned array (kernels read it through typed pointers)."""
    if cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a):
        return a
    return np.array(a, order="C", copy=True)


@cython.freelist(64)
cdef class SavedTensor:
    """A tensor kept for backward, with the version it had when saved. A saved input
    keeps the tensor itself (_tensor); a saved output only its storage (_data), so
    that no reference cycle runs through the node that produced it."""

    cdef void _check(self, Node owner) except *:
        if self._released:
            raise LucidError(
                f"Trying to backward through {type(owner).__name__} a second time (or to access "
                "its saved tensors after they were freed). Saved values are freed when you call "
                ".backward() or lucid.autograd.grad(); pass retain_graph=True to backward "
                "through the graph again.")
        if self._vc.value != self._version:
            data = self._data if self._is_output else self._tensor._data
            raise LucidError(
                "one of the tensors needed for gradient computation has been modified by an "
                f"in-place operation: [{self._dtype} {list((<object>data).shape)}], saved by "
                f"{type(owner).__name__}, is at version {self._vc.value}; expected version "
                f"{self._version} instead.")

    cdef cnp.ndarray data(self, Node owner):
        self._check(owner)
        return self._data if self._is_output else self._tensor._data

    cdef Tensor unpack(self, Node owner):
        self._check(owner)
        if not self._is_output:
            return self._tensor
        cdef Tensor t = _wrap(self._data, self._dtype)
        t._mx = self._mx          # a saved output keeps its storage, not the tensor
        t._vc = self._vc
        t._grad_fn = owner
        t._requires_grad = True
        return t

    cdef void release(self):
        self._released = True
        self._tensor = None
        self._data = None
        self._mx = None


cdef SavedTensor _save(Tensor t, bint is_output):
    cdef SavedTensor s = SavedTensor.__new__(SavedTensor)
    s._vc = t._get_vc()
    s._version = s._vc.value
    s._is_output = is_output
    s._dtype = t._dtype
    if is_output:
        s._data = t._data
        s._mx = t._mx
    else:
        s._tensor = t
    return s


cdef class AccumulateGrad(Node):
    """The edge into a leaf: adds the incoming gradient to ``variable.grad``."""


cdef tuple _NO_EDGE = (None, 0)


cdef tuple _edge(Tensor t):
    """The edge a new node uses to send gradient to ``t``."""
    cdef AccumulateGrad acc
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    if t._requires_grad:
        acc = AccumulateGrad.__new__(AccumulateGrad)
        acc.variable = t
        acc._next = ()
        return (acc, 0)
    return _NO_EDGE


cdef void _set_history(Tensor out, Node node) noexcept:
    out._grad_fn = node
    out._output_nr = 0
    out._requires_grad = True


cdef tuple _EMPTY = ()


cdef Node _new_node(type cls):
    """An instance of a Node subclass without running __init__."""
    return <Node>(<PyTypeObject *>cls).tp_new(cls, <PyObject *>_EMPTY, NULL)


# -- grad mode ------------------------------------------------------------------
# The flag is a C thread-local in this module; other modules read it through
# grad_enabled(), so there is exactly one per thread.

cdef bint grad_enabled() noexcept nogil:
    return lucid_grad_enabled


def is_grad_enabled():
    """Whether ops record backward nodes on this thread."""
    return bool(lucid_grad_enabled)


def _set_grad_enabled(bint mode):
    global lucid_grad_enabled
    cdef bint prev = lucid_grad_enabled
    lucid_grad_enabled = mode
    return prev


# -- autocast -----------------------------------------------------------------------
# The autocast dtype is a C thread-local beside grad mode (-1: off); lucid.autocast
# (lucid/amp.py) sets and restores it. The dispatcher reads it in one place per entry
# point: _amp_lowp() for the matmul family, prepare() / dispatch_binary() for ForceFP32.

cdef int autocast_code() noexcept nogil:
    return lucid_autocast_code


def _set_autocast(object dtype):
    """Set this thread's autocast dtype (a half DType, or None for off); returns the
    previous one. lucid.autocast is the public interface."""
    global lucid_autocast_code
    cdef int prev = lucid_autocast_code
    cdef DType dt
    if dtype is None:
        lucid_autocast_code = -1
    else:
        dt = as_dtype(dtype)
        if not _is_half_code(dt.code):
            raise UnsupportedDTypeError(
                f"autocast dtype must be lucid.float16 or lucid.bfloat16, got {dt}")
        lucid_autocast_code = dt.code
    return None if prev < 0 else _DTYPES[prev]


def get_autocast_dtype():
    """The autocast dtype on this thread, or None when autocast is off."""
    return None if lucid_autocast_code < 0 else _DTYPES[lucid_autocast_code]


def is_autocast_enabled():
    """Whether autocast is on on this thread."""
    return lucid_autocast_code >= 0


cdef Tensor _amp_lowp(Tensor x):
    """Autocast's cast for the matmul family: float32 and half inputs become the autocast
    dtype (a recorded cast); float64 and integer inputs are left as they are, as PyTorch."""
    cdef int c = lucid_autocast_code
    cdef int code = x._dtype.code
    if c < 0 or code == c or not (code == DT_FLOAT32 or _is_half_code(code)):
        return x
    return to_dtype(x, <DType>_DTYPES[c], False)


# -- the engine -------------------------------------------------------------------

cdef object _root_grad(Tensor t, object g, bint create_graph, Py_ssize_t i):
    cdef Tensor tg
    if g is None:
        if cnp.PyArray_SIZE(t._data) != 1:
            raise LucidError(
                "grad can be implicitly created only for scalar outputs; pass gradient= "
                f"(output {i} has shape {_shp(t._data)})")
        if t._mx is not None:
            return _wrap_mx(mlx().ones(_shp(t._data), dtype=t._mx.dtype), t._dtype)
        arr = np.ones(_shp(t._data), dtype=t._dtype.numpy_dtype)
        return _wrap(arr, t._dtype) if create_graph else arr
    tg = _as_tensor_dev(g)
    if (tg._mx is None) != (t._mx is None):
        raise LucidError(f"grad_output[{i}] is on {tg.device} but output[{i}] is on {t.device}")
    if not _same_shape(tg._data, t._data):
        raise ShapeError(
            f"Mismatch in shape: grad_output[{i}] has a shape of {_shp(tg._data)} and "
            f"output[{i}] has a shape of {_shp(t._data)}")
    if tg._dtype is not t._dtype:
        if not tg._dtype.is_floating_point:
            raise UnsupportedDTypeError(
                f"grad_output[{i}] has dtype {tg._dtype}; a floating point gradient is needed")
        tg = to_dtype(tg, t._dtype, False) if create_graph or tg._mx is not None else _wrap(
            tg._data.astype(t._dtype.numpy_dtype), t._dtype)
    return tg if create_graph or tg._mx is not None else _contig(tg._data)


cdef list _topo_order(list roots):
    """Nodes reachable from ``roots``, each after every node that sends it gradient:
    the reversed post-order of a depth-first walk that explores children in edge order.
    The walk keeps two flat stacks (the node, and whether it is being left) instead of
    a frame object per node; it runs once per backward, over every node."""
    cdef list post = []
    cdef list stack = []
    cdef list leaving = []
    cdef set seen = set()
    cdef Node node
    cdef tuple nxt
    cdef Py_ssize_t i
    for r in roots:
        if r is None or r in seen:
            continue
        stack.append(r)
        leaving.append(False)
        while stack:
            node = <Node>stack.pop()
            if leaving.pop():
                post.append(node)
                continue
            if node in seen:           # reached again through a sibling's subtree
                continue
            seen.add(node)
            stack.append(node)
            leaving.append(True)
            nxt = node._next
            if nxt is None:
                continue
            for i in range(len(nxt) - 1, -1, -1):     # reversed: the first edge pops first
                child = (<tuple>nxt[i])[0]
                if child is not None and child not in seen:
                    stack.append(child)
                    leaving.append(False)
    post.reverse()
    return post


cdef object _sum_grads(object a, object b, bint create_graph):
    cdef cnp.ndarray out
    if create_graph or isinstance(a, Tensor):
        return dispatch_binary(_operator_schema(_OP_ADD), a, b, 1)
    if type(a) is cnp.ndarray and type(b) is cnp.ndarray and _plain_pair(a, b):
        out = _empty_like_arr(<cnp.ndarray>a, cnp.PyArray_TYPE(<cnp.ndarray>a))
        _add_loop(out, a, b)
        return out
    return _as_ndarray(np.add(a, b))


cdef list _gpu_leaf(list acc, Tensor g):
    if acc is None:
        acc = []
    acc.append(g._mx)
    return acc


cdef tuple _run_engine(tuple outputs, tuple grad_outputs, bint keep_graph, bint create_graph,
                       tuple inputs, bint allow_unused):
    """Reverse-mode sweep. ``inputs is None``: accumulate into leaves' ``.grad`` (backward);
    otherwise return the gradients w.r.t. ``inputs`` and touch no ``.grad`` (autograd.grad)."""
    cdef Tensor t
    cdef Node node
    cdef Py_ssize_t i
    cdef bint capture = inputs is not None
    cdef dict buffers = {}
    cdef list roots = []
    if len(grad_outputs) != len(outputs):
        raise ArgumentError(f"got {len(grad_outputs)} gradients for {len(outputs)} outputs")
    for i in range(len(outputs)):
        if not isinstance(outputs[i], Tensor):
            raise TypeError(f"outputs[{i}] is a {type(outputs[i]).__name__}, not a Tensor")
        t = <Tensor>outputs[i]
        if not t._requires_grad:
            raise LucidError(
                f"element {i} of tensors does not require grad and does not have a grad_fn")
        g = _root_grad(t, grad_outputs[i], create_graph, i)
        edge = _edge(t)
        roots.append(edge[0])
        if edge[0] in buffers:
            buffers[edge[0]] = _sum_grads(buffers[edge[0]], g, create_graph)
        else:
            buffers[edge[0]] = g

    # What autograd.grad captures: leaves by identity (every AccumulateGrad of the
    # leaf counts), non-leaves at their grad_fn.
    cdef dict leaf_slot = {}
    cdef dict node_slot = {}
    cdef list captured = None
    if capture:
        captured = [None] * len(inputs)
        for i in range(len(inputs)):
            if not isinstance(inputs[i], Tensor):
                raise TypeError(f"inputs[{i}] is a {type(inputs[i]).__name__}, not a Tensor")
            t = <Tensor>inputs[i]
            if not t._requires_grad:
                raise LucidError(f"One of the differentiated Tensors (inputs[{i}]) does not require grad")
            if t._grad_fn is None:
                leaf_slot.setdefault(id(t), []).append(i)
            else:
                node_slot.setdefault(t._grad_fn, []).append(i)

    cdef list order = _topo_order(roots)
    cdef set needed = None
    if capture:
        # Run only nodes on a path to a captured input.
        needed = set()
        for node in reversed(order):
            if (type(node) is AccumulateGrad and id((<AccumulateGrad>node).variable) in leaf_slot) \
                    or node in node_slot:
                needed.add(node)
                continue
            for e in node._next:
                if e[0] is not None and e[0] in needed:
                    needed.add(node)
                    break

    cdef dict hooked = None        # id(leaf with hooks) -> (leaf, summed gradient)
    cdef tuple grads
    cdef list on_gpu = None        # leaf gradients on the gpu, evaluated at the end
    cdef bint tm
    cdef int prev_mode = lucid_grad_enabled
    global lucid_grad_enabled
    lucid_grad_enabled = 1 if create_graph else 0
    try:
        for node in order:
            g = buffers.pop(node, None)
            if g is None:
                continue
            if _NODE_HOOKS and id(node) in _NODE_HOOKS and _NODE_HOOKS[id(node)][0]() is node:
                g = _run_hooks(_NODE_HOOKS[id(node)], g, create_graph)
            if capture:
                if node in node_slot:
                    for i in node_slot[node]:
                        captured[i] = g if captured[i] is None else _sum_grads(captured[i], g, create_graph)
                if node not in needed:
                    continue
            if type(node) is AccumulateGrad:
                t = (<AccumulateGrad>node).variable
                if (<Tensor>t)._hooks is not None:   # hooks see the summed gradient
                    if hooked is None:
                        hooked = {}
                    hooked[id(t)] = (t, _sum_grads(hooked[id(t)][1], g, create_graph)
                                     if id(t) in hooked else g)
                    continue
                if capture:
                    for i in leaf_slot.get(id(t), ()):
                        captured[i] = g if captured[i] is None else _sum_grads(captured[i], g, create_graph)
                else:
                    _accumulate(t, g, create_graph)
                    if (<Tensor>t._grad)._mx is not None:
                        on_gpu = _gpu_leaf(on_gpu, <Tensor>t._grad)
                continue
            if node._released:
                raise LucidError(
                    f"Trying to backward through {type(node).__name__} a second time: its graph was "
                    "freed by an earlier backward. Pass retain_graph=True to the first "
                    ".backward() (or autograd.grad) to backward through the graph again.")
            # Tensors flow in graph mode and on the gpu (whose nodes run their graph-mode
            # formulas with MLX ops); ndarrays go to the CPU's fused eager kernels.
            tm = create_graph or type(g) is not cnp.ndarray
            if tm:
                grads = node._graph(<Tensor>g)
            elif isinstance(node, PyNode):   # may run user code: NumPy's allocator there
                grads = node._eager(<cnp.ndarray>g)
            else:
                old = _alloc_enter(cnp.PyArray_NBYTES(<cnp.ndarray>g))
                try:
                    grads = node._eager(<cnp.ndarray>g)
                finally:
                    _alloc_exit(old)
            if not keep_graph:
                node._release()
            for i in range(len(node._next)):
                child = (<tuple>node._next[i])[0]
                gi = grads[i]
                if child is None or gi is None:
                    continue
                if not tm and type(gi) is not cnp.ndarray and not isinstance(gi, Tensor):
                    gi = _as_ndarray(gi)       # NumPy hands back scalars from 0-d arithmetic
                if capture and child not in needed and child not in node_slot:
                    continue
                if child in buffers:
                    buffers[child] = _sum_grads(buffers[child], gi, create_graph)
                else:
                    buffers[child] = gi
            grads = gi = None     # the buffers hold the gradients now (_accumulate counts refs)
        for t, g in (hooked.values() if hooked is not None else ()):
            g = _run_hooks((<Tensor>t)._hooks, g, create_graph)
            if capture:
                for i in leaf_slot.get(id(t), ()):
                    captured[i] = g if captured[i] is None else _sum_grads(captured[i], g, create_graph)
            else:
                _accumulate(t, g, create_graph)
                if (<Tensor>t._grad)._mx is not None:
                    on_gpu = _gpu_leaf(on_gpu, <Tensor>t._grad)
    finally:
        lucid_grad_enabled = prev_mode
    if on_gpu:       # the lazy graph ends here: one MLX evaluation for every leaf gradient
        mlx().eval(*on_gpu)

    if not capture:
        return None
    cdef list result = []
    for i in range(len(inputs)):
        g = captured[i]
        t = <Tensor>inputs[i]
        if g is None:
            if not allow_unused:
                raise LucidError(
                    f"One of the differentiated Tensors (inputs[{i}]) appears to not have been "
                    "used in the graph. Set allow_unused=True if this is the desired behavior.")
            result.append(None)
        elif create_graph or isinstance(g, Tensor):
            result.append(g)
        else:
            arr = <cnp.ndarray>g
            if not cnp.PyArray_ISWRITEABLE(arr) or not cnp.PyArray_IS_C_CONTIGUOUS(arr):
                arr = np.array(arr, copy=True)
            if arr.dtype != t._dtype.numpy_dtype:
                arr = arr.astype(t._dtype.numpy_dtype)
            result.append(_wrap(arr, t._dtype))
    return tuple(result)


cdef Tensor _own(Tensor g):
    """A gradient a leaf may keep: a gpu array is immutable and can be shared; a CPU
    array may be shared between inputs (AddBackward), so it is copied."""
    if g._mx is not None:
        return _wrap_mx(g._mx, g._dtype)
    return _wrap(np.array(g._data, copy=True, order="C"), g._dtype)


cdef inline bint _same_shape(cnp.ndarray a, cnp.ndarray b) noexcept:
    cdef int nd = cnp.PyArray_NDIM(a)
    # a 0-d array's dims pointer may be NULL, which memcmp must not get even for 0 bytes
    return nd == cnp.PyArray_NDIM(b) and (nd == 0 or memcmp(
        cnp.PyArray_DIMS(a), cnp.PyArray_DIMS(b), nd * sizeof(cnp.npy_intp)) == 0)


cdef bint _plain_pair(cnp.ndarray a, cnp.ndarray b) noexcept:
    """Both C-contiguous and aligned, of one shape and one dtype, float32 or float64."""
    cdef int t = cnp.PyArray_TYPE(a)
    return (t == cnp.PyArray_TYPE(b) and (t == cnp.NPY_FLOAT32 or t == cnp.NPY_FLOAT64)
            and cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)
            and cnp.PyArray_IS_C_CONTIGUOUS(b) and cnp.PyArray_ISALIGNED(b)
            and _same_shape(a, b))


cdef void _add_run(int t, char *o, const char *x, const char *y, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if t == cnp.NPY_FLOAT32:
        for i in range(n):
            (<float *>o)[i] = (<const float *>x)[i] + (<const float *>y)[i]
    else:
        for i in range(n):
            (<double *>o)[i] = (<const double *>x)[i] + (<const double *>y)[i]


cdef void _add_loop(cnp.ndarray out, cnp.ndarray a, cnp.ndarray b) noexcept:
    """``out = a + b`` (``out`` may be ``a``) for a pair that passed _plain_pair: the same
    bits as np.add, without its ufunc dispatch (most of the cost for a small gradient)."""
    cdef int t = cnp.PyArray_TYPE(a)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(a)
    cdef char *o = <char *>cnp.PyArray_DATA(out)
    cdef char *x = <char *>cnp.PyArray_DATA(a)
    cdef char *y = <char *>cnp.PyArray_DATA(b)
    if n < 16384:                      # releasing the GIL costs more than a small sum
        _add_run(t, o, x, y, n)
    else:
        with nogil:
            _add_run(t, o, x, y, n)


cdef bint _add_into(cnp.ndarray dst, cnp.ndarray src) noexcept:
    """``dst += src`` through _add_loop; False, with nothing written, when the pair is not
    plain or the two partially overlap (NumPy handles those)."""
    if not _plain_pair(dst, src):
        return False
    cdef char *d = <char *>cnp.PyArray_DATA(dst)
    cdef char *s = <char *>cnp.PyArray_DATA(src)
    cdef Py_ssize_t nbytes = cnp.PyArray_NBYTES(dst)
    if d != s and d < s + nbytes and s < d + nbytes:
        return False
    _add_loop(dst, dst, src)
    return True


cdef inline bint _unshared(cnp.ndarray arr) noexcept:
    """A gradient a leaf may take without a copy (torch steals such gradients too): a
    C-contiguous, aligned, writable array owning its memory, referenced only by the
    engine's popped buffer and _accumulate's local, so no view, tensor, saved value,
    hook or user object reaches it."""
    return (Py_REFCNT(arr) <= 2 and cnp.PyArray_BASE(arr) == NULL
            and cnp.PyArray_CHKFLAGS(arr, cnp.NPY_ARRAY_OWNDATA | cnp.NPY_ARRAY_C_CONTIGUOUS
                                     | cnp.NPY_ARRAY_ALIGNED | cnp.NPY_ARRAY_WRITEABLE))


cdef void _accumulate(Tensor leaf, object g, bint create_graph) except *:
    """Add a gradient into ``leaf.grad``: in place when nothing records, else out of place."""
    cdef Tensor old = leaf._grad
    cdef cnp.ndarray arr
    if isinstance(g, Tensor):          # graph mode, or a gpu gradient
        gt = <Tensor>g
        if gt._dtype is not leaf._dtype:
            gt = to_dtype(gt, leaf._dtype, False)
        if not create_graph:
            gt = _own(gt)
        leaf._grad = gt if old is None else ops.add(old, gt)
        return
    arr = <cnp.ndarray>g
    if old is None:
        # The incoming array may be shared (AddBackward passes g to both inputs): copy,
        # unless nothing but this call and the engine's buffer can reach it.
        if cnp.PyArray_TYPE(arr) == leaf._dtype.typenum:
            leaf._grad = _wrap(arr if _unshared(arr) else cnp.PyArray_NewCopy(arr, cnp.NPY_CORDER),
                               leaf._dtype)
        else:
            leaf._grad = _wrap(np.array(arr, dtype=leaf._dtype.numpy_dtype, copy=True, order="C"),
                               leaf._dtype)
    elif old._requires_grad or not cnp.PyArray_ISWRITEABLE(old._data):
        leaf._grad = _wrap(_as_ndarray(np.add(old._data, arr, dtype=leaf._dtype.numpy_dtype)),
                           leaf._dtype)
    else:
        if not _add_into(old._data, arr):
            np.add(old._data, arr, out=old._data, casting="unsafe")
        old._bump()


cdef void _backward_into(tuple tensors, tuple grad_tensors, bint keep, bint create_graph,
                         object inputs) except *:
    """backward(inputs=...): the gradients w.r.t. ``inputs`` only, each added to its
    tensor's ``.grad`` (leaf or not); other leaves are left alone."""
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    if not inputs:
        raise LucidError("backward(): 'inputs' argument should not be empty")
    grads = _run_engine(tensors, grad_tensors, keep, create_graph, inputs, True)
    for t, g in zip(inputs, grads):
        if g is not None:
            _accumulate(<Tensor>t, g, create_graph)


def _backward(tuple tensors, tuple grad_tensors, retain_graph, bint create_graph, inputs=None):
    keep = create_graph if retain_graph is None else bool(retain_graph)
    if inputs is None:
        _run_engine(tensors, grad_tensors, keep, create_graph, None, False)
    else:
        _backward_into(tensors, grad_tensors, keep, create_graph, inputs)


def _grad(tuple outputs, tuple inputs, tuple grad_outputs, retain_graph, bint create_graph,
          bint allow_unused):
    keep = create_graph if retain_graph is None else bool(retain_graph)
    return _run_engine(outputs, grad_outputs, keep, create_graph, inputs, allow_unused)


# -- op schemas and the dispatcher -----------------------------------------------

class AmpPolicy(enum.Enum):
    """How an op treats half-precision inputs.

    Promote:   compute in the promoted dtype of the inputs (float16 / bfloat16 stay half;
               the CPU computes internally in float32 and rounds once). Inside
               lucid.autocast, the matmul family (matmul, dot, outer, linear) runs in the
               autocast dtype: float32 and half inputs are cast to it.
    KeepInput: the output has the input's dtype (shape ops, reductions that cannot
               overflow), inside autocast too.
    ForceFP32: float16 / bfloat16 inputs are upcast to float32 (a recorded cast, so a
               half leaf still gets its gradient in its own dtype); the result is
               float32, inside autocast and outside it.
    """
    Promote = "Promote"
    KeepInput = "KeepInput"
    ForceFP32 = "ForceFP32"


cdef dict _AMP_CODES = {"Promote": AMP_PROMOTE, "KeepInput": AMP_KEEP_INPUT,
                        "ForceFP32": AMP_FORCE_FP32}


cdef class Kernel:
    """One device's forward of an op, supplied by the op's family: ``run1`` for ops of
    one tensor (x is the array after promotion and the AMP policy), ``run2`` for ops of
    two operands (arrays or NumPy scalars, already in the result dtype ``dt``)."""

    cdef object run1(self, cnp.ndarray x, object params):
        raise NotImplementedError(type(self).__name__)

    cdef object run2(self, object a, object b, DType dt, object params):
        raise NotImplementedError(type(self).__name__)


cdef class OpSchema:
    """What the dispatcher and the autograd engine know about an op, and all they read:

    name           the public name (``lucid.<name>``; ``lucid.ops.schema(name)``)
    version        the node's schema version: the node class carries it as ``schema_v<version>``
    amp_policy     Promote / KeepInput / ForceFP32, applied by the dispatcher
    deterministic  False if the op has no bitwise-reproducible kernel; such ops raise
                   while ``lucid.use_deterministic_algorithms(True)`` is on
    arity          number of inputs that get a gradient edge (-1: a list of tensors)
    saves_input    the backward reads the inputs
    saves_output   the backward reads the output
    node           the backward node class (None: the op is not differentiable)
    int_rule       what integer inputs become: kept, cast to float32, or rejected
    cpu            the CPU kernel (a family's Kernel), for ops the dispatcher runs
    """

    def __init__(self, str name, int version, amp_policy, bint deterministic=True, int arity=1,
                 bint saves_input=False, bint saves_output=False, type node=None,
                 int int_rule=INT_KEEP):
        self.name = name
        self.version = version
        self.amp_policy = AmpPolicy(amp_policy)
        self.amp = _AMP_CODES[self.amp_policy.value]
        self.deterministic = deterministic
        self.arity = arity
        self.saves_input = saves_input
        self.saves_output = saves_output
        self.node = node
        self._int_rule = int_rule

    def __repr__(self):
        return (f"OpSchema(name={self.name!r}, version={self.version}, "
                f"amp_policy=AmpPolicy.{self.amp_policy.name}, deterministic={self.deterministic}, "
                f"arity={self.arity}, saves_input={self.saves_input}, "
                f"saves_output={self.saves_output})")

    @property
    def int_rule(self):
        """"keep", "float" (integers compute as the default float dtype) or "reject"."""
        return ("keep", "float", "reject")[self._int_rule]

    def _bind(self, type node):
        """Attach the backward class (defined after its schema, which its body names)."""
        self.node = node


cdef dict _REGISTRY = {}


cdef OpSchema _register(str name, str amp, int arity=1, bint saves_input=False,
                        bint saves_output=False, bint deterministic=True, type node=None,
                        int int_rule=INT_KEEP):
    if name in _REGISTRY:
        raise RuntimeError(f"op {name!r} registered twice")
    cdef OpSchema s = OpSchema(name, 1, amp, deterministic, arity, saves_input, saves_output,
                               node, int_rule)
    _REGISTRY[name] = s
    return s


def register(str name, str amp, int arity=1, bint saves_input=False, bint saves_output=False,
             bint deterministic=True, type node=None, int int_rule=INT_KEEP):
    """Register an op's schema (from Python: the op tables and the generated code)."""
    return _register(name, amp, arity, saves_input, saves_output, deterministic, node, int_rule)


def schema(str name):
    """The OpSchema registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} is registered") from None


def registry():
    """A copy of the name -> OpSchema registry."""
    return dict(_REGISTRY)


cdef bint _deterministic_only = False


def use_deterministic_algorithms(bint mode):
    """Make ops without a bitwise-reproducible kernel raise instead of running."""
    global _deterministic_only
    _deterministic_only = mode


def are_deterministic_algorithms_enabled():
    return bool(_deterministic_only)


cdef Tensor prepare(OpSchema s, object input):
    """The dispatcher's common front for one tensor input: validate it, apply the
    schema's integer rule and AMP policy. Returns the tensor the kernel computes on."""
    cdef Tensor x
    if type(input) is Tensor or isinstance(input, Tensor):
        x = <Tensor>input
    elif _is_scalar(input):
        x = _as_tensor(input)
    else:
        x = _as_operand(input, s, "input")
    if x._data is _NO_STORAGE:
        _check_storage(x, f"{s.name}()'s input")
    if x._mx is not None and s.gpu is None:
        raise _cpu_only(s.name)
    cdef int code = x._dtype.code
    if _deterministic_only and not s.deterministic:
        raise LucidError(f"{s.name} has no deterministic implementation, and "
                         "lucid.use_deterministic_algorithms(True) is on")
    if code < DT_FLOAT16:
        if s._int_rule == INT_TO_FLOAT:
            if x._mx is not None:
                return to_dtype(x, float32, False)
            return _wrap(x._data.astype(np.float32), float32)   # integers never need grad
        if s._int_rule == INT_REJECT:
            raise UnsupportedDTypeError(f"{s.name}() needs a floating point input, got {x._dtype}")
    elif s.amp == AMP_FORCE_FP32 and _is_half_code(code):
        return to_dtype(x, float32, False)      # the AMP step: a recorded cast
    return x


cdef inline tuple _edge_of(object t):
    return _edge(<Tensor>t) if isinstance(t, Tensor) else _NO_EDGE


cdef Node record(OpSchema s, Tensor out, tuple inputs, object params):
    """Attach the schema's backward node to ``out``: one edge per input (Tensors; any
    other input, a Python scalar, gets no edge), then the node keeps what it needs."""
    if s.arity >= 0 and len(inputs) != s.arity:
        raise RuntimeError(f"{s.name}: {len(inputs)} inputs recorded, the schema has {s.arity}")
    cdef Node node = _new_node(s.node)
    cdef Py_ssize_t n = len(inputs)
    if n == 1:
        node._next = (_edge_of(inputs[0]),)
    elif n == 2:
        node._next = (_edge_of(inputs[0]), _edge_of(inputs[1]))
    else:
        node._next = tuple([_edge_of(t) for t in inputs])
    node._setup(s, inputs, out, params)
    _set_history(out, node)
    return node


cdef Tensor dispatch_unary(OpSchema s, object input, object params):
    """Every op of one tensor whose family gives a run1 kernel: prepare, run, record."""
    cdef Tensor x = prepare(s, input)
    if x._mx is not None:
        return _gpu_unary(s, x, params)
    cdef object old = _alloc_enter(cnp.PyArray_NBYTES(x._data))
    try:
        res = s.cpu.run1(x._data, params)
    finally:
        _alloc_exit(old)
    cdef cnp.ndarray r = _as_ndarray(res)
    cdef Tensor y = _wrap(r, x._dtype if cnp.PyArray_TYPE(r) == x._dtype.typenum
                          else _dtype_of_array(r))
    if lucid_grad_enabled and x._requires_grad and s.node is not None:
        record(s, y, (x,), params)
    return y


cdef object dispatch_binary(OpSchema s, object a, object b, object params):
    """Every op of two operands (tensors, or one Python/NumPy scalar): PyTorch's type
    promotion, the integer rule, the kernel, and the node."""
    cdef Tensor ta = None, tb = None
    cdef object sa = None, sb = None
    if type(a) is Tensor or isinstance(a, Tensor):
        ta = <Tensor>a
    elif _is_scalar(a):
        sa = a.item() if isinstance(a, np.generic) else a
    else:
        ta = _as_operand(a, s, "input")
    if type(b) is Tensor or isinstance(b, Tensor):
        tb = <Tensor>b
    elif _is_scalar(b):
        sb = b.item() if isinstance(b, np.generic) else b
    else:
        tb = _as_operand(b, s, "other")
    if ta is None and tb is None:
        raise TypeError(f"{s.name}(): expected at least one Tensor operand")
    if ta is not None and ta._data is _NO_STORAGE:
        _check_storage(ta, f"{s.name}()'s input")
    if tb is not None and tb._data is _NO_STORAGE:
        _check_storage(tb, f"{s.name}()'s other")
    if _deterministic_only and not s.deterministic:
        raise LucidError(f"{s.name} has no deterministic implementation, and "
                         "lucid.use_deterministic_algorithms(True) is on")
    cdef int code
    if ta is not None and tb is not None and ta._dtype is tb._dtype:
        code = ta._dtype.code          # one dtype: the result's, whatever the dims
    else:
        code = _result_code(ta, sa, tb, sb)
    if code < DT_FLOAT16:
        if s._int_rule == INT_TO_FLOAT:
            code = DT_FLOAT32
        elif s._int_rule == INT_REJECT:
            raise UnsupportedDTypeError(f"{s.name}() needs floating point inputs")
    elif s.amp == AMP_FORCE_FP32 and _is_half_code(code):
        # The AMP step: half operands are upcast by a recorded cast (the gradient of a
        # half leaf comes back in its dtype), inside and outside autocast.
        code = DT_FLOAT32
        if ta is not None and _is_half_code(ta._dtype.code):
            ta = to_dtype(ta, float32, False)
        if tb is not None and _is_half_code(tb._dtype.code):
            tb = to_dtype(tb, float32, False)
    cdef DType dt = <DType>_DTYPES[code]
    if (ta is not None and ta._mx is not None) or (tb is not None and tb._mx is not None):
        return _gpu_binary(s, ta, sa, tb, sb, dt, params)
    if _is_half_code(code) and s.node is not None:
        # As PyTorch, a Python scalar takes the half result dtype first (3.4e38 is inf in
        # float16); the arithmetic is then done in float32 and rounded once.
        if ta is None:
            sa = _half_scalar(dt, sa)
        if tb is None:
            sb = _half_scalar(dt, sb)
    # A half_native kernel does this itself, block by block, without copies, when the
    # tensor operands are already in the result dtype (scalars are passed as float32).
    cdef bint native = (_is_half_code(code) and s.node is not None and s.cpu.half_native
                        and (ta is None or ta._dtype is dt) and (tb is None or tb._dtype is dt))
    cdef DType cdt = float32 if (_is_half_code(code) and s.node is not None
                                 and not native) else dt
    if cdt is float32 and ta is not None and tb is None and s in _EXACT_SCALAR and \
            _f32_inexact(sb):
        cdt = float64        # e.g. x ** 1e-50: 0 at 0 and inf at inf, not x ** 0 = 1
    try:
        if cdt is float64 and dt is float32:
            oa = _operand(ta, sa, cdt)
            ob = _operand(tb, sb, cdt)
        elif cdt is not dt:
            # As PyTorch: each operand takes the half result dtype first (int32 65520 is
            # inf in float16), then the arithmetic runs in float32 and rounds once.
            with np.errstate(over="ignore"):
                oa = _as_ndarray(_operand(ta, sa, dt)).astype(np.float32)
                ob = _as_ndarray(_operand(tb, sb, dt)).astype(np.float32)
        else:
            oa = _operand(ta, sa, float32 if native and ta is None else cdt)
            ob = _operand(tb, sb, float32 if native and tb is None else cdt)
    except OverflowError:
        raise OverflowError(
            f"{s.name}(): {'input' if ta is None else 'other'} = {sa if ta is None else sb!r} "
            f"does not fit in the result dtype {dt}") from None
    cdef object old = _alloc_enter(max(_nbytes(oa), _nbytes(ob)))
    try:
        r = s.cpu.run2(oa, ob, cdt, params)
    except ValueError as e:
        if "broadcast" in str(e):
            raise _broadcast_error(ta, tb, e) from None
        raise LucidError(str(e)) from None
    finally:
        _alloc_exit(old)
    cdef cnp.ndarray arr = _as_ndarray(r)
    cdef Tensor out
    if s.node is None:                 # comparisons and predicates: the kernel's dtype
        return _wrap(arr, _dtype_of_array(arr))
    if cnp.PyArray_TYPE(arr) != dt.typenum:
        arr = _store(arr, dt)
    out = _wrap(arr, dt)
    if lucid_grad_enabled and ((ta is not None and ta._requires_grad) or
                               (tb is not None and tb._requires_grad)):
        record(s, out, (ta if ta is not None else sa, tb if tb is not None else sb), params)
    return out


cdef set _EXACT_SCALAR = set()


def _exact_scalar(OpSchema s):
    """Declare that ``s`` reads a Python scalar second operand at its full precision:
    a float32 result is then computed in float64 when float32 cannot hold the scalar
    (pow: x ** 1e-50 is 0 at 0, (-2) ** 2.0000000009 is nan, x ** (1/3) is x's cube
    root to float32 accuracy)."""
    _EXACT_SCALAR.add(s)


cdef bint _f32_inexact(object v) except -1:
    """Whether the Python number ``v`` changes when rounded to float32."""
    cdef double d
    if v is None or isinstance(v, bool):
        return False
    try:
        d = v
    except OverflowError:
        return True
    if d != d or d == INFINITY or d == -INFINITY:
        return False
    return fabs(d) > FLT_MAX or <double>(<float>d) != d


cdef Tensor _as_operand(object x, OpSchema s, str name):
    """``x``, argument ``name`` of ``s`` (not a Tensor or a scalar), as a tensor; what
    cannot be numeric data raises naming both."""
    if x is None or isinstance(x, (str, bytes)) or not (
            isinstance(x, (list, tuple, np.ndarray, np.generic, complex)) or
            hasattr(x, "__array__") or hasattr(x, "__array_interface__")):
        raise TypeError(f"{s.name}(): {name} must be a lucid Tensor or a number, got "
                        f"{type(x).__name__}")
    return _as_tensor(x)


cdef Tensor _gpu_unary(OpSchema s, Tensor x, object params):
    """dispatch_unary's gpu step: the schema's MLX kernel, then the same node."""
    r = s.gpu(x._mx, params)
    # An op with a node keeps its (prepared) input's dtype, as on the cpu; predicates
    # give bool. (Reading an MLX array's dtype costs more than the rest of this step.)
    cdef DType dt = x._dtype if s.node is not None else <DType>_DT_OF_MX[r.dtype]
    cdef Tensor y = _wrap_mx_like(r, dt, x)
    if lucid_grad_enabled and x._requires_grad and s.node is not None:
        record(s, y, (x,), params)
    return y


cdef Tensor _gpu_binary(OpSchema s, Tensor ta, object sa, Tensor tb, object sb, DType dt,
                        object params):
    """dispatch_binary's gpu step: both tensors on the gpu (scalars become 0-d arrays of
    the result dtype, so MLX computes in lucid's promoted dtype), the schema's MLX
    kernel, then the same node."""
    if (ta is not None and ta._mx is None) or (tb is not None and tb._mx is None):
        raise _device_mismatch(s.name)
    if s.gpu is None:
        raise _cpu_only(s.name)
    # Both tensors are cast to the result dtype; a Python scalar goes to MLX as it is,
    # weakly typed, so it takes the other operand's (the result's) dtype.
    r = s.gpu(_mx_of(ta, dt) if ta is not None else sa, _mx_of(tb, dt) if tb is not None else sb,
              params)
    if s.node is None:                 # comparisons and predicates: the kernel's dtype
        return _wrap_mx(r, <DType>_DT_OF_MX[r.dtype])
    # Operands of dt give dt (scalars are weakly typed); the result has the shape of a
    # tensor operand when there is one tensor, or both have the same shape.
    cdef Tensor like = None
    if tb is None or (ta is not None and _same_dims(ta._data, tb._data)):
        like = ta
    elif ta is None:
        like = tb
    cdef Tensor out = _wrap_mx_like(r, dt, like)
    if lucid_grad_enabled and ((ta is not None and ta._requires_grad) or
                               (tb is not None and tb._requires_grad)):
        record(s, out, (ta if ta is not None else sa, tb if tb is not None else sb), params)
    return out


# The operator slots of Tensor (x + y, x == y, -x, ...) go straight to the dispatcher
# with the schemas their families registered (looked up once, on first use), skipping
# the Python-level call of the public function.
cdef enum:
    _OP_ADD = 0
    _OP_SUB = 1
    _OP_MUL = 2
    _OP_DIV = 3
    _OP_POW = 4
    _OP_REMAINDER = 5
    _OP_EQ = 6
    _OP_NE = 7
    _OP_LT = 8
    _OP_LE = 9
    _OP_GT = 10
    _OP_GE = 11
    _OP_NEG = 12

cdef tuple _OPERATOR_NAMES = ("add", "sub", "mul", "div", "pow", "remainder", "eq", "ne", "lt",
                              "le", "gt", "ge", "neg")
cdef list _OPERATORS = None


cdef inline OpSchema _operator_schema(int op):
    global _OPERATORS
    if _OPERATORS is None:
        _OPERATORS = [_REGISTRY[n] for n in _OPERATOR_NAMES]
    return <OpSchema>_OPERATORS[op]


# -- the public surface -------------------------------------------------------------
# Every op function is published once, by its family, through export(): it lands in
# ``ops`` (where core and the families call each other's ops at run time, so their
# import order does not matter), in lucid / lucid.ops unless private, and as a Tensor
# method when the row asks for one.

ops = types.SimpleNamespace()
cdef dict _EXPORTS = {}


def export(fn, str name=None, *, method=None, bint public=True):
    """Publish ``fn`` as ``ops.<name>`` (and ``lucid.<name>`` / ``lucid.ops.<name>`` when
    public). ``method``: True installs it as ``Tensor.<name>`` too, a string under that
    method name, a function installs that function (a method with its own signature)."""
    if name is None:
        name = fn.__name__
    elif getattr(fn, "__name__", name) != name and public:
        fn.__name__ = fn.__qualname__ = name   # _sum is lucid.sum
    setattr(ops, name, fn)
    if public:
        _EXPORTS[name] = fn
    if method is True:
        _add_tensor_method(name, fn)
    elif isinstance(method, str):
        _add_tensor_method(method, fn)
    elif method is not None and method is not False:
        _add_tensor_method(name, method)
    return fn


# The NumPy protocol tables (ufunc -> lucid op, NumPy function -> its lucid
# implementation) and the handlers of everything else, set by lucid/_interop.py.
cdef dict _NP_UFUNCS = {}
cdef dict _NP_FUNCTIONS = {}
cdef object _NP_UFUNC_GENERAL = None
cdef object _NP_FUNCTION_GENERAL = None
cdef object _NP_NOVALUE = getattr(np, "_NoValue", object())


def _set_numpy_protocol(dict ufuncs, dict functions, ufunc_general, function_general):
    """lucid/_interop.py hands over its tables and its handlers of the general cases."""
    global _NP_UFUNCS, _NP_FUNCTIONS, _NP_UFUNC_GENERAL, _NP_FUNCTION_GENERAL
    _NP_UFUNCS, _NP_FUNCTIONS = ufuncs, functions
    _NP_UFUNC_GENERAL, _NP_FUNCTION_GENERAL = ufunc_general, function_general


cdef void _load_numpy_protocol() except *:
    if _NP_UFUNC_GENERAL is None:
        import lucid._interop       # calls _set_numpy_protocol


cdef bint _plain_call(object types, dict kwargs):
    """Only tensors and ndarrays take part, and no keyword is NumPy's "not given"."""
    for t in types:
        if t is not Tensor and t is not np.ndarray:
            return False
    if kwargs:
        for v in kwargs.values():
            if v is _NP_NOVALUE:
                return False
    return True


def _install_tensor_method(str name, fn):
    """Install a Tensor method from Python code (lucid/_interop.py: the NumPy protocols)."""
    _add_tensor_method(name, fn)


def exported():
    """name -> function of every public op, in registration order."""
    return dict(_EXPORTS)


# -- threads ---------------------------------------------------------------------
# Arrays of at least _PAR_MIN elements are split into pieces run by lucid's pool
# (src/lucid_pool.c): the calling thread claims pieces itself, next to the workers,
# so it never waits for a worker the OS has not scheduled. Piece boundaries depend on
# the array's length only, and each element is computed by the same vector code
# whichever piece it lands in, so results are bitwise the same for any thread count.
# The threshold comes from bench/ (see the README): below it, waking a second
# thread costs more than it saves.
cdef extern from "lucid_pool.h" nogil:
    enum:
        LUCID_POOL_MAX_THREADS
    void lucid_pool_run(lucid_piece_fn fn, void *ctx, Py_ssize_t npieces, int nthreads)
    int lucid_pool_init()
    int lucid_pool_resize(int nthreads)
    int lucid_pool_start(int nthreads)
    int lucid_pool_workers()
    void lucid_pool_set_dynamic(int on)
    void lucid_pool_counts(long long *parallel, long long *alone, long long *lean)

cdef Py_ssize_t _PAR_MIN = 1 << 15
# Pieces are at least this many elements (a multiple of 64), and an array is cut into
# at most about 64 of them: small enough that a late or preempted worker holds back
# little work, large enough that claiming a piece costs nothing next to running it.
cdef Py_ssize_t _PIECE_MIN = 1 << 13


cdef int _check_threads(object n, str what) except -1:
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"{what} must be an int, got {type(n).__name__}")
    n = operator.index(n)
    if n < 1 or n > LUCID_POOL_MAX_THREADS:
        raise ArgumentError(f"{what} must be between 1 and {LUCID_POOL_MAX_THREADS}, got {n}")
    return <int>n


cdef int _default_threads() except -1:
    env = os.environ.get("LUCID_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1 or n > LUCID_POOL_MAX_THREADS:
            raise ArgumentError(f"LUCID_NUM_THREADS must be an integer between 1 and "
                                f"{LUCID_POOL_MAX_THREADS}, got {env!r}")
        return n
    if hasattr(os, "sched_getaffinity"):
        n = len(os.sched_getaffinity(0))
    else:
        n = os.cpu_count() or 1
    return max(1, min(n, LUCID_POOL_MAX_THREADS))


cdef int _num_threads = _default_threads()


_ON = ("1", "on", "true", "yes")
_OFF = ("0", "off", "false", "no")


cdef object _env_choice(str name, tuple choices, object default):
    """The environment variable ``name`` (``default`` when unset or empty), which must
    be one of ``choices``: a typo raises at import instead of being ignored."""
    text = os.environ.get(name, "").strip().lower()
    if not text:
        return default
    if text not in choices:
        raise ArgumentError(f"{name} must be one of {', '.join(choices)}; got {text!r}")
    return text


cdef int _dynamic_threads() except -1:
    """LUCID_DYNAMIC_THREADS: 1 (default) lets a job use only the cores other processes
    leave free (on a machine whose cores are all busy, 2 threads then cost what 1 does);
    0 always uses the thread count set."""
    return _env_choice("LUCID_DYNAMIC_THREADS", _ON + _OFF, "1") in _ON


# Read by the C kernels themselves (src/lucid_half.c); checked here so that a bad value
# raises instead of being ignored.
_env_choice("LUCID_HALF_ISA", ("c", "f16c", "avx512", "avx512fp16"), None)
_env_choice("LUCID_HALF_TABLES", ("0", "1", "2"), "1")


lucid_pool_set_dynamic(_dynamic_threads())


def _set_blas_threads(int n):
    """Limit NumPy's BLAS (matmul, linear, convolutions' GEMMs) to n threads through
    threadpoolctl; without threadpoolctl the BLAS keeps its own count (OPENBLAS_NUM_THREADS
    or the core count). Returns True when the limit was applied. It is process-wide, as
    torch.set_num_threads is for torch's BLAS: plain np.matmul sees it too."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return False
    threadpool_limits(limits=n, user_api="blas")
    return True


def set_num_threads(n):
    """Use ``n`` threads (the caller and n - 1 pool workers) for large kernels, and limit
    NumPy's BLAS, which lucid's matrix products call, to ``n`` threads as well when
    threadpoolctl is installed (without it the BLAS keeps its own count).

    1 = no threading. Raises ValueError for n < 1 or above the pool's limit (256),
    RuntimeError if the OS refuses to start the workers (the old count stays)."""
    global _num_threads
    cdef int nt = _check_threads(n, "number of threads")
    cdef int rc
    lucid_pool_resize(nt)
    with nogil:
        rc = lucid_pool_start(nt)
    if rc != 0:
        lucid_pool_resize(_num_threads)
        raise RuntimeError(f"set_num_threads({nt}): could not start the worker threads "
                           f"({os.strerror(rc)})")
    _num_threads = nt
    _set_blas_threads(nt)


def get_num_threads():
    """The number of threads large kernels use."""
    return _num_threads


def _pool_workers():
    """Pool workers alive in this process (0 in a fork child until its first large kernel)."""
    return lucid_pool_workers()


def _pool_counts():
    """Jobs given workers since the process started, as (run with them, run on the
    caller alone because other processes kept every core busy, run lean: every core
    busy and the caller sharing its own, so workers off the caller's core help and
    sleep right after). See src/lucid_pool.c."""
    cdef long long par = 0, alone = 0, lean = 0
    lucid_pool_counts(&par, &alone, &lean)
    return par, alone, lean


cdef void _count_piece(void *ctx, Py_ssize_t i) noexcept nogil:
    (<int *>ctx)[i] += 1


def _pool_check(Py_ssize_t jobs, int nthreads, int max_pieces=97):
    """Test hook: run ``jobs`` pool jobs of 1 to ``max_pieces`` pieces back to back on
    ``nthreads`` threads (every core counted free), each piece adding one to its own
    slot; the number of slots not run exactly once. The pieces are tiny, so workers
    keep joining jobs late, as the next one is being published."""
    cdef int[::1] c = np.zeros(max_pieces, np.intc)
    cdef Py_ssize_t j, i, n, bad = 0
    lucid_pool_set_dynamic(0)
    try:
        with nogil:
            for j in range(jobs):
                n = 1 + (j * 7919) % max_pieces
                for i in range(n):
                    c[i] = 0
                lucid_pool_run(_count_piece, &c[0], n, nthreads)
                for i in range(n):
                    bad += c[i] != 1
    finally:
        lucid_pool_set_dynamic(_dynamic_threads())
    return bad


# -- the caching allocator (src/lucid_alloc.c) -----------------------------------------------
# NumPy asks the handler in a context variable for every array's memory; lucid sets its
# handler only while its own ops run (the kernel call in the dispatcher and the eager
# backward of lucid's nodes), so arrays the user makes with NumPy keep NumPy's. An array
# remembers its handler, so one made by lucid returns its buffer to lucid's cache
# whenever and wherever it dies. LUCID_ALLOCATOR=0 turns it off (sanitizer runs:
# docs/sanitizers.md); LUCID_ALLOCATOR_CACHE_MB bounds the cache (512 by default).
# At import it maps and touches an arena of LUCID_ALLOCATOR_ARENA_MB (16 by default, 0:
# none) that cache misses carve from, so a new process's first ops find their pages
# resident instead of faulting them in.
cdef extern from "lucid_alloc.h" nogil:
    ctypedef struct lucid_alloc_stats_t:
        size_t cached_bytes, cached_blocks, limit, hits, misses
        size_t arena_bytes, arena_carved, arena_cached, arena_live
    void *lucid_alloc_malloc(void *ctx, size_t size)
    void *lucid_alloc_calloc(void *ctx, size_t nelem, size_t elsize)
    void *lucid_alloc_realloc(void *ctx, void *ptr, size_t size)
    void lucid_alloc_free(void *ctx, void *ptr, size_t size)
    void lucid_alloc_init()
    size_t lucid_alloc_release()
    void lucid_alloc_set_limit(size_t nbytes)
    int lucid_alloc_prefault(size_t nbytes)
    void lucid_alloc_stats(lucid_alloc_stats_t *out)

cdef extern from "numpy/ndarraytypes.h":
    ctypedef struct PyDataMemAllocator:
        void *ctx
        void *(*malloc)(void *, size_t) noexcept nogil
        void *(*calloc)(void *, size_t, size_t) noexcept nogil
        void *(*realloc)(void *, void *, size_t) noexcept nogil
        void (*free)(void *, void *, size_t) noexcept nogil
    ctypedef struct PyDataMem_Handler:
        char name[127]
        unsigned char version
        PyDataMemAllocator allocator

cdef extern from "numpy/arrayobject.h":
    object PyDataMem_SetHandler(object handler)

from cpython.pycapsule cimport PyCapsule_New
from libc.string cimport strcpy

cdef PyDataMem_Handler _alloc_handler
cdef object _ALLOC_CAPSULE = None        # None: the allocator is off


# A build under AddressSanitizer leaves every allocation to it (a recycled buffer would
# hide a use-after-free).
cdef extern from *:
    """
    #if defined(__SANITIZE_ADDRESS__)
    #define LUCID_ASAN 1
    #elif defined(__has_feature)
    #if __has_feature(address_sanitizer)
    #define LUCID_ASAN 1
    #endif
    #endif
    #ifndef LUCID_ASAN
    #define LUCID_ASAN 0
    #endif
    """
    int LUCID_ASAN


cdef size_t _env_megabytes(str name, double default) except? 0:
    text = os.environ.get(name, "").strip()
    try:
        mb = float(text) if text else default
    except ValueError:
        raise ArgumentError(f"{name} must be a number of megabytes, got {text!r}") from None
    if not (0 <= mb < 1 << 40):
        raise ArgumentError(f"{name} must be a number of megabytes >= 0, got {text!r}")
    return <size_t>(mb * (1 << 20))


cdef object _alloc_setup():
    cdef size_t limit, arena
    env = _env_choice("LUCID_ALLOCATOR", _ON + _OFF, "1")
    if LUCID_ASAN or env in _OFF:
        return None
    limit = _env_megabytes("LUCID_ALLOCATOR_CACHE_MB", 512)
    arena = _env_megabytes("LUCID_ALLOCATOR_ARENA_MB", 16)
    lucid_alloc_set_limit(limit)
    if arena:
        with nogil:
            lucid_alloc_prefault(arena)     # if it cannot be mapped, lucid runs without
    strcpy(_alloc_handler.name, b"lucid_cache")
    _alloc_handler.version = 1
    _alloc_handler.allocator.ctx = NULL
    _alloc_handler.allocator.malloc = lucid_alloc_malloc
    _alloc_handler.allocator.calloc = lucid_alloc_calloc
    _alloc_handler.allocator.realloc = lucid_alloc_realloc
    _alloc_handler.allocator.free = lucid_alloc_free
    return PyCapsule_New(&_alloc_handler, "mem_handler", NULL)


# The fork handlers of the allocator and the pool are registered now, at import, before
# any thread can hold one of their locks: a fork then always waits for the lock and
# hands the child a free one (registered lazily, a fork during a thread's first
# empty_cache() or job could copy a held lock into the child).
lucid_alloc_init()
lucid_pool_init()
_ALLOC_CAPSULE = _alloc_setup()


# Below this many bytes of operand, an op keeps NumPy's allocator: small buffers come
# back from malloc's free lists without page faults, and setting the handler (a context
# variable, twice per op) would be a large share of a small op's cost.
cdef Py_ssize_t _ALLOC_MIN_BYTES = 1 << 16
cdef object _ALLOC_SKIP = object()


cdef inline Py_ssize_t _nbytes(object a) noexcept:
    return cnp.PyArray_NBYTES(<cnp.ndarray>a) if type(a) is cnp.ndarray else 0


cdef object _alloc_enter(Py_ssize_t nbytes=-1):
    """Make lucid's handler the current one for an op whose largest operand has nbytes
    (-1: whatever the size); returns what _alloc_exit restores (None: nothing to
    restore). A thread-local depth makes nested scopes free."""
    global lucid_alloc_depth
    if _ALLOC_CAPSULE is None:
        return None
    if 0 <= nbytes < _ALLOC_MIN_BYTES:
        return _ALLOC_SKIP
    lucid_alloc_depth += 1
    if lucid_alloc_depth > 1:
        return None
    return PyDataMem_SetHandler(_ALLOC_CAPSULE)


cdef int _alloc_exit(object old) except -1:
    global lucid_alloc_depth
    if _ALLOC_CAPSULE is None or old is _ALLOC_SKIP:
        return 0
    lucid_alloc_depth -= 1
    if old is not None:
        PyDataMem_SetHandler(old)
    return 0


# Functions empty_cache() also calls: other modules' caches (unary's half lookup tables).
_EMPTY_CACHE_HOOKS = []


def empty_cache():
    """Return the memory of freed tensors that lucid keeps for reuse to the system.

    lucid caches the buffers of dead tensors by size class (bounded by
    ``LUCID_ALLOCATOR_CACHE_MB``, 512 MB by default) so that repeated ops do not
    fault in fresh pages; this releases all of them. The arena prefaulted at import
    (``LUCID_ALLOCATOR_ARENA_MB``, 16 MB by default) gives its pages back too, once no
    live tensor uses it. The lookup tables of the half unary kernels are freed too.
    Live tensors are not affected."""
    with nogil:
        lucid_alloc_release()
    for hook in _EMPTY_CACHE_HOOKS:
        hook()


def _allocator_stats():
    """The cache's state: enabled; cached_bytes and cached_blocks (freed buffers from the
    system, bounded by limit); hits and misses; arena_bytes (the prefaulted arena),
    arena_carved (how much of it blocks occupy), arena_cached (freed arena blocks) and
    arena_live (arena blocks in use)."""
    cdef lucid_alloc_stats_t st
    lucid_alloc_stats(&st)
    return {"enabled": _ALLOC_CAPSULE is not None, "cached_bytes": st.cached_bytes,
            "cached_blocks": st.cached_blocks, "limit": st.limit, "hits": st.hits,
            "misses": st.misses, "arena_bytes": st.arena_bytes,
            "arena_carved": st.arena_carved, "arena_cached": st.arena_cached,
            "arena_live": st.arena_live}


def _set_allocator_limit(size_t nbytes):
    """Bound the cache to nbytes (releasing it all if it holds more); for tests."""
    lucid_alloc_set_limit(nbytes)


def _alloc_scope_run(fn, *args):
    """fn(*args) with lucid's handler current (for tests and lucid's Python-level ops)."""
    old = _alloc_enter()
    try:
        return fn(*args)
    finally:
        _alloc_exit(old)


cdef int _threads_for(Py_ssize_t n) noexcept nogil:
    if _num_threads <= 1 or n < _PAR_MIN:
        return 1
    return _num_threads


cdef Py_ssize_t _piece_len(Py_ssize_t n, int nt) noexcept nogil:
    """The piece length for n elements: a multiple of 64 that depends on n only (not
    on nt), at least _PIECE_MIN, so at most about 64 pieces."""
    cdef Py_ssize_t per = ((n + 63) // 64 + 63) // 64 * 64
    return per if per > _PIECE_MIN else _PIECE_MIN


cdef void _parallel_for(lucid_piece_fn fn, void *ctx, Py_ssize_t npieces, int nt) noexcept nogil:
    """fn(ctx, i) for i in range(npieces) on up to nt threads, the caller included."""
    lucid_pool_run(fn, ctx, npieces, nt)




cdef cnp.ndarray _to_half(cnp.ndarray a):
    """float32 -> float16; overflow to inf is the IEEE result, not a warning."""
    return _f32_to_half(a, float16)


cdef inline int _half_kind(int num) noexcept:
    return LH_F16 if num == cnp.NPY_FLOAT16 else (LH_BF16 if num == _BF16_NUM else -1)


cdef double _half_scalar(DType dt, object v) except? -1:
    """A Python number rounded once to the half dtype dt (NumPy's / ml_dtypes' dt(v),
    overflow to inf), as a float; no NumPy call (and no errstate) on this hot path."""
    cdef double d = float(v)
    cdef unsigned short h
    cdef float f
    cdef int kind = _half_kind(dt.typenum)
    lucid_f64_to_half(kind, &h, &d, 1)
    lucid_half_to_f32(kind, &f, &h, 1)
    return f


cdef cnp.ndarray _half_to_f32(cnp.ndarray a):
    """A float16 / bfloat16 array widened to a new C-contiguous float32 array (exact),
    with lucid's vectorised conversion (src/lucid_half.c)."""
    cdef int kind = _half_kind(cnp.PyArray_TYPE(a))
    if kind < 0:
        return _as_ndarray(a.astype(np.float32))
    if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)):
        a = np.array(a, copy=True, order="C")     # (ascontiguousarray makes 0-d 1-d)
    cdef cnp.ndarray out = _empty_like_arr(a, cnp.NPY_FLOAT)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(a)
    with nogil:
        lucid_half_to_f32(kind, <float *>cnp.PyArray_DATA(out),
                          <const unsigned short *>cnp.PyArray_DATA(a), n)
    return out


cdef cnp.ndarray _f32_to_half(cnp.ndarray a, DType dt):
    """A float32 or float64 array rounded (to nearest even, once, from its own value) to
    float16 or bfloat16; other dtypes through NumPy. Overflow to inf is the IEEE result,
    not a warning."""
    cdef int kind = _half_kind(dt.typenum)
    cdef int num = cnp.PyArray_TYPE(a)
    if (num != cnp.NPY_FLOAT and num != cnp.NPY_DOUBLE) or kind < 0:
        with np.errstate(over="ignore"):
            return _as_ndarray(a.astype(dt.numpy_dtype))
    if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)):
        a = np.array(a, copy=True, order="C")     # (ascontiguousarray makes 0-d 1-d)
    cdef cnp.ndarray out = _empty_like_arr(a, dt.typenum)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(a)
    with nogil:
        if num == cnp.NPY_FLOAT:
            lucid_f32_to_half(kind, <unsigned short *>cnp.PyArray_DATA(out),
                              <const float *>cnp.PyArray_DATA(a), n)
        else:
            lucid_f64_to_half(kind, <unsigned short *>cnp.PyArray_DATA(out),
                              <const double *>cnp.PyArray_DATA(a), n)
    return out




cdef extern from "Python.h":
    void PyType_Modified(PyTypeObject *)


cdef void _add_tensor_method(str name, object fn) except *:
    """Install a Tensor method. Tensor is a static type that Python code cannot set
    attributes on; export() is the one caller."""
    (<dict>(<PyTypeObject *>Tensor).tp_dict)[name] = fn
    PyType_Modified(<PyTypeObject *>Tensor)


# -- dtype casts and copies (recorded like any op) ----------------------------

cdef OpSchema _TO_SCHEMA = _register("to", "KeepInput")
cdef OpSchema _CLONE_SCHEMA = _register("clone", "KeepInput")


cdef class ToBackward(Node):
    """Backward of a dtype cast or a device move: the gradient goes back to the source
    dtype and device."""
    schema_v1 = _TO_SCHEMA
    cdef DType _src
    cdef bint _src_gpu

    def grad_formula_impl(self, g):
        return to_dtype(to_device(g, self._src_gpu), self._src, False)


cdef Tensor to_dtype(Tensor x, DType dt, bint copy):
    """``x`` converted to ``dt`` (differentiable between floating dtypes)."""
    if x._dtype is dt and not copy:
        return x
    cdef Tensor y
    if x._mx is not None:
        y = _wrap_mx(x._mx.astype(mx_dtype(dt)), dt)
    else:
        y = _wrap(_cast_array(x._data, dt), dt)
    if lucid_grad_enabled and x._requires_grad and dt.is_floating_point:
        _record_cast(x, y)
    return y


cdef void _record_cast(Tensor x, Tensor y) except *:
    """y is x cast or moved: its node sends the gradient back to x's dtype and device."""
    cdef ToBackward node = ToBackward.__new__(ToBackward)
    node._src = x._dtype
    node._src_gpu = x._mx is not None
    node._next = (_edge(x),)
    _set_history(y, node)


cdef class CloneBackward(Node):
    """Backward of clone: the gradient passes through unchanged."""
    schema_v1 = _CLONE_SCHEMA

    def grad_formula_impl(self, g):
        return g


def clone(input):
    """A copy of ``input`` with its own memory (differentiable)."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef Tensor y
    if x._mx is not None:       # MLX arrays are immutable: a new tensor is a copy
        y = _wrap_mx(x._mx, x._dtype)
    else:
        y = _wrap(np.array(x._data, copy=True, order="C"), x._dtype)
    cdef CloneBackward node
    if lucid_grad_enabled and x._requires_grad:
        node = CloneBackward.__new__(CloneBackward)
        node._next = (_edge(x),)
        _set_history(y, node)
    return y


cdef bint _is_scalar(object v):
    return isinstance(v, (int, float)) or (
        isinstance(v, np.generic) and ((<object>v).dtype.kind in "biuf"
                                       or (<object>v).dtype.num == _BF16_NUM))


cdef int _scalar_code(object v):
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


cdef int _result_code(Tensor ta, object sa, Tensor tb, object sb) except -1:
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


cdef object _operand(Tensor t, object s, DType dt):
    if t is None:
        try:
            return dt.numpy_dtype.type(s)
        except OverflowError:
            if not _is_int_code(dt.code) or not -_INT64_MAX - 1 <= s <= _INT64_MAX:
                raise
            # As PyTorch: an int scalar that fits in int64 but not in the integer
            # dtype wraps (uint8 tensor + 300 adds 44).
            bits = 8 * dt.itemsize
            return dt.numpy_dtype.type(((int(s) + (1 << (bits - 1))) % (1 << bits))
                                       - (1 << (bits - 1)) if dt.code != DT_UINT8
                                       else int(s) % 256)
    if t._dtype is dt:
        return t._data
    return _cast_array(t._data, dt)


cdef cnp.ndarray _cast_array(cnp.ndarray a, DType dt):
    """a converted to dt (a new array); half <-> float32 with lucid's vectorised kernels."""
    cdef int num = cnp.PyArray_TYPE(a)
    if dt.typenum == cnp.NPY_FLOAT and _half_kind(num) >= 0:
        return _half_to_f32(a)
    if (num == cnp.NPY_FLOAT or num == cnp.NPY_DOUBLE) and _half_kind(dt.typenum) >= 0:
        return _f32_to_half(a, dt)
    if _half_kind(num) >= 0 and _half_kind(dt.typenum) >= 0:    # float16 <-> bfloat16
        return _f32_to_half(_half_to_f32(a), dt)
    with np.errstate(over="ignore", invalid="ignore"):
        if dt.code < DT_INT32 and dt.code != DT_BOOL and (
                (<object>a).dtype.kind == "f" or _half_kind(num) >= 0):
            # As PyTorch (a C cast through a wide integer): floats truncate toward zero,
            # then wrap (-1.5 -> uint8 255, 300.5 -> 44).
            return _as_ndarray(a.astype(np.float64).astype(np.int64).astype(dt.numpy_dtype))
        return _as_ndarray(a.astype(dt.numpy_dtype))


def _broadcast_error(Tensor ta, Tensor tb, e):
    sa = _shp(ta._data) if ta is not None else ()
    sb = _shp(tb._data) if tb is not None else ()
    return ShapeError(f"shapes {sa} and {sb} do not broadcast: {e}")


cdef cnp.ndarray _sum_to(cnp.ndarray g, tuple shape):
    """Unbroadcast: sum a gradient of a broadcast result back to an input's ``shape``
    (which may also have more leading 1s than ``g`` has dims)."""
    if _shp(g) == shape:
        return g
    cdef int lead = cnp.PyArray_NDIM(g) - len(shape)
    cdef object r = g
    if lead < 0:
        return _as_ndarray(g.reshape(shape))     # only leading 1s were missing
    if lead > 0:
        r = np.add.reduce(g, axis=tuple(range(lead)))
    axes = tuple(i for i in range(len(shape)) if shape[i] == 1 and r.shape[i] != 1)
    if axes:
        r = np.add.reduce(r, axis=axes, keepdims=True)
    return _as_ndarray(r)


cdef Tensor _sum_to_t(Tensor g, tuple shape):
    """``_sum_to`` in lucid ops, for graph-mode formulas."""
    if _shp(g._data) == shape:
        return g
    cdef int lead = cnp.PyArray_NDIM(g._data) - len(shape)
    cdef Tensor r = g
    if lead < 0:
        return ops.reshape(g, shape)
    if lead > 0:
        r = ops.sum(r, tuple(range(lead)))
    axes = tuple(i for i in range(len(shape)) if shape[i] == 1 and _shp(r._data)[i] != 1)
    if axes:
        r = ops.sum(r, axes, True)
    return r


cdef cnp.ndarray _store(object r, DType dt):
    """A kernel's result as an ndarray of ``dt`` (overflow to inf is the IEEE result)."""
    cdef cnp.ndarray a = _as_ndarray(r)
    if cnp.PyArray_TYPE(a) != dt.typenum:
        if (cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT or cnp.PyArray_TYPE(a) == cnp.NPY_DOUBLE) \
                and _half_kind(dt.typenum) >= 0:
            return _f32_to_half(a, dt)
        with np.errstate(over="ignore"):
            a = a.astype(dt.numpy_dtype)
    return a


# -- view bookkeeping -------------------------------------------------------------

cdef dict _AUTOGRAD_VIEWS = {}   # id(version counter) -> {id(weakref): weakref(view with history)}


def _forget_view(ref, key):
    d = _AUTOGRAD_VIEWS.get(key)
    if d is not None:
        d.pop(id(ref), None)
        if not d:
            del _AUTOGRAD_VIEWS[key]


cdef Tensor _view(Tensor x, object arr):
    """A tensor around ``arr`` (a view of x's storage) sharing x's version counter."""
    cdef Tensor y = _wrap(<cnp.ndarray>arr, x._dtype)
    y._vc = x._get_vc()
    return y


cdef void _record_view(Tensor y, Node node) except *:
    """Give a view its history and remember it, so a later write to its memory can
    invalidate that history."""
    _set_history(y, node)
    key = id(y._vc)
    d = _AUTOGRAD_VIEWS.get(key)
    if d is None:
        d = {}
        _AUTOGRAD_VIEWS[key] = d
    r = weakref.ref(y, functools.partial(_forget_view, key=key))
    d[id(r)] = r


cdef class ViewModifiedBackward(Node):
    """grad_fn of a view whose memory was overwritten through another tensor after the
    view was taken: autograd can't express that, so backward through it raises."""

    cdef tuple _eager(self, cnp.ndarray g):
        raise LucidError(_VIEW_MODIFIED_MSG)

    cdef tuple _graph(self, Tensor g):
        raise LucidError(_VIEW_MODIFIED_MSG)


_VIEW_MODIFIED_MSG = (
    "a view (e.g. x[0], x.T, x.squeeze()) was used after its memory was modified in place "
    "through another tensor sharing it (e.g. x[0] = ...); lucid can't compute this gradient. "
    "clone() the view before modifying its base, or modify it before taking the view.")


cdef bint _overlaps(object a, object b):
    try:
        return bool(np.shares_memory(a, b, max_work=2000))
    except Exception:          # TooHardError: assume they overlap
        return True


cdef void _invalidate_views(Tensor t, object region) except *:
    """``region`` (an ndarray inside t's storage) was just overwritten: views of it taken
    earlier with autograd history are now stale."""
    cdef Tensor w
    cdef ViewModifiedBackward node
    if t._vc is None or not _AUTOGRAD_VIEWS:
        return
    d = _AUTOGRAD_VIEWS.get(id(t._vc))
    if not d:
        return
    for r in list(d.values()):
        o = r()
        if o is None or o is t:
            continue
        w = <Tensor>o
        if w._grad_fn is None or type(w._grad_fn) is ViewModifiedBackward:
            continue
        if _overlaps(w._data, region):
            node = ViewModifiedBackward.__new__(ViewModifiedBackward)
            node._next = ()
            w._grad_fn = node
            w._output_nr = 0


def _autograd_view_count():
    """How many views with autograd history are alive (for tests: the registry must not leak)."""
    return builtins.sum(len(d) for d in _AUTOGRAD_VIEWS.values())


def _views_modified(Tensor t):
    """Hook for in-place ops: t's whole storage was overwritten."""
    _invalidate_views(t, t._data)


cdef dict _VIEW_NODES = {ViewModifiedBackward: None}


def _mark_view_node(type cls, check=None):
    """Declare a node class as the backward of a view op (its output shares memory with
    its input); ``check(node, tensor)``, if given, tells whether a given output is a view."""
    _VIEW_NODES[cls] = check


cdef bint _is_view(Tensor t):
    """Does t share memory with another tensor through a view op?"""
    node = t._grad_fn
    if node is None:
        return (<object>t._data).base is not None
    if type(node) not in _VIEW_NODES:
        return False
    check = _VIEW_NODES[type(node)]
    return check is None or bool(check(node, t))




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
                raise ArgumentError(f"dim {axes[i]} appears multiple times in the list of dims")
        return tuple(axes) if ndim > 0 else ()
    cdef int d = _norm_dim(dim, ndim)       # validates dim even for a 0-d input
    return (d,) if ndim > 0 else ()


cdef tuple _keepdim_shape(tuple in_shape, tuple axes):
    if axes is None:
        return (1,) * len(in_shape)
    return tuple(1 if i in axes else s for i, s in enumerate(in_shape))




def backend_info():
    """The CPU path in use: instruction set chosen at load time, the math library, and
    the instructions of the float16 / bfloat16 kernels ("half_isa")."""
    return {"isa": lucid_isa().decode(), "mathlib": lucid_mathlib().decode(),
            "half_isa": lucid_half_isa().decode(),
            "threads": _num_threads, "parallel_min_elements": _PAR_MIN}




export(clone, method=True)


# -- nodes defined in Python, and tensor hooks ---------------------------------------
# PyNode is the one node class whose subclasses live in Python: autograd.Function's
# nodes and the ops of lucid.linalg / lucid.special / sorting state their backward as
# grad_formula_impl(g, *saved) in lucid ops, like every cdef node (the eager backward
# runs the same formula with grad mode off). _py_attach is their record().

cdef class PyNode(Node):
    """A backward node whose class is written in Python: ``grad_formula_impl(g, *saved)``
    gets the saved tensors (unpacked, version-checked) and returns one gradient (or None)
    per input. ``ctx`` holds whatever else the formula needs (shapes, flags)."""
    cdef list _saved_py
    cdef public object ctx

    cdef list _saved_list(self):
        return self._saved_py if self._saved_py is not None else []

    def needs_input_grad(self, int i):
        """Does input ``i`` get a gradient (an edge that leads somewhere)?"""
        return self._next[i][0] is not None


def _py_attach(PyNode node, Tensor out, tuple inputs, tuple saved=(), ctx=None, bint view=False):
    """Record ``node`` (a fresh PyNode subclass instance from _py_node) as ``out``'s
    grad_fn: one edge per input (non-tensors and tensors without grad get none), and the
    saved tensors (``out`` itself is saved as an output, without a reference cycle).
    ``view``: ``out`` is a view (from _view_of), so a later write to its memory through
    another tensor invalidates this history."""
    node._next = tuple([_edge(<Tensor>t) if isinstance(t, Tensor) else _NO_EDGE for t in inputs])
    node._saved_py = [_save(<Tensor>t, t is out) for t in saved]
    node.ctx = ctx
    if view:
        _record_view(out, node)
    else:
        _set_history(out, node)
    return node


def _mx_array(Tensor t not None):
    """The MLX array of a gpu tensor (None for a cpu tensor): for the gpu lowerings of
    ops written in Python (lucid/_core/host.py)."""
    return t._mx


def _gpu_tensor(arr):
    """A new gpu tensor around the MLX array ``arr``, of the lucid dtype of its dtype."""
    mlx()
    return _wrap_mx(arr, <DType>_DT_OF_MX[arr.dtype])


def _view_of(Tensor x not None, cnp.ndarray arr not None, mx=None):
    """For view ops written in Python: a tensor around ``arr``, a view of x's memory
    (for a gpu tensor, of its shape-only array, with the values ``mx``), sharing x's
    version counter."""
    cdef Tensor y = _view(x, arr)
    y._mx = mx
    return y


def _py_node(type cls):
    """A new, unattached instance of a PyNode subclass."""
    if not issubclass(cls, PyNode):
        raise TypeError(f"{cls.__name__} is not a PyNode subclass")
    return _new_node(cls)


# Tensor hooks. Hooks on a non-leaf live with its grad_fn (a node has one output, so the
# gradient the engine pops for a node is the tensor's whole gradient); hooks on a leaf
# live on the leaf itself (so a hook that refers back to its owner, a module's bound
# method, forms a cycle the garbage collector frees) and run once on its summed
# gradient, before it is accumulated (or returned by grad()).
cdef dict _NODE_HOOKS = {}     # id(node) -> [weakref(node), [hooks], weakref(tensor) or None]


class RemovableHandle:
    """Returned by register_hook; ``remove()`` unregisters the hook."""

    def __init__(self, hooks, hook):
        self._hooks = hooks
        self._hook = hook

    def remove(self):
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            pass


def _drop_hooks(ref, table, key):
    table.pop(key, None)


cdef list _hook_entry(Tensor t):
    if t._grad_fn is None:
        if t._hooks is None:
            t._hooks = [None, [], None]
        return t._hooks
    cdef dict table = _NODE_HOOKS
    owner = t._grad_fn
    key = id(owner)
    entry = table.get(key)
    if entry is None or entry[0]() is not owner:
        entry = [weakref.ref(owner, functools.partial(_drop_hooks, table=table, key=key)), [], None]
        table[key] = entry
    return entry


def _register_hook(Tensor self, hook):
    """Call ``hook(grad)`` with this tensor's gradient whenever it is computed; a Tensor
    returned by the hook replaces the gradient. Returns a handle with ``remove()``."""
    if not self._requires_grad:
        raise LucidError("cannot register a hook on a tensor that doesn't require gradient")
    entry = _hook_entry(self)
    entry[1].append(hook)
    return RemovableHandle(entry[1], hook)


def _retain_grad(Tensor self):
    """Populate ``.grad`` of this non-leaf tensor during backward (accumulating, as a leaf)."""
    if not self._requires_grad:
        raise LucidError("can't retain_grad on Tensor that has requires_grad=False")
    if self._grad_fn is None:
        return
    _hook_entry(self)[2] = weakref.ref(self)


def _retains_grad(Tensor self):
    if self._grad_fn is None:
        return False
    entry = _NODE_HOOKS.get(id(self._grad_fn))
    return entry is not None and entry[0]() is self._grad_fn and entry[2] is not None


cdef object _run_hooks(list entry, object g, bint create_graph):
    """Run a tensor's hooks on its gradient (an ndarray in eager mode, a Tensor in graph
    mode); then, for a retained non-leaf, store the gradient in ``.grad``."""
    cdef bint tm = isinstance(g, Tensor)      # graph mode, or gpu gradients
    cdef Tensor gt = <Tensor>g if tm else _wrap(<cnp.ndarray>g, _dtype_of_array(<cnp.ndarray>g))
    cdef Tensor kept
    for h in list(entry[1]):
        r = h(gt)
        if r is not None:
            if not isinstance(r, Tensor) or _shp((<Tensor>r)._data) != _shp(gt._data):
                raise LucidError("a tensor hook must return None or a Tensor of the gradient's shape")
            gt = <Tensor>r
    if len(entry) > 2 and entry[2] is not None:
        kept = entry[2]()
        if kept is not None:
            add = gt if create_graph else _own(gt)
            kept._grad = add if kept._grad is None else ops.add(kept._grad, add)
    return gt if tm else _contig(gt._data)


_add_tensor_method("register_hook", _register_hook)
_add_tensor_method("retain_grad", _retain_grad)
_add_tensor_method("retains_grad", property(_retains_grad))
