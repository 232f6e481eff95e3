# Tensor: an ndarray (CPU storage) plus dtype, autograd metadata and a version
# counter shared with its views.

from cpython.buffer cimport PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Malloc

cdef extern from "lucid_state.h":
    int lucid_grad_enabled     # thread-local grad mode, 1 in every new thread


cdef inline tuple _shp(cnp.ndarray a):
    """An ndarray's shape as a tuple (cnp.ndarray.shape is a C pointer in Cython)."""
    return (<object>a).shape


cdef class Device:
    """Where a tensor lives. Only ``cpu`` exists until the MLX backend lands."""
    cdef readonly str type

    def __repr__(self):
        return f"device(type='{self.type}')"

    def __str__(self):
        return self.type

    def __eq__(self, other):
        if isinstance(other, Device):
            return self.type == (<Device>other).type
        if isinstance(other, str):
            return self.type == other
        return NotImplemented

    def __hash__(self):
        return hash(self.type)

    def __reduce__(self):
        return (device, (self.type,))


cdef Device _CPU = Device.__new__(Device)
_CPU.type = "cpu"


cpdef Device device(object spec="cpu"):
    """``lucid.device("cpu")``."""
    if isinstance(spec, Device):
        return <Device>spec
    if isinstance(spec, str) and spec == "cpu":
        return _CPU
    if isinstance(spec, str) and spec.split(":")[0] in ("gpu", "cuda", "mps", "mlx"):
        raise LucidError(
            f"device {spec!r} is not available: lucid's GPU (MLX) backend is not built yet; "
            "use device='cpu'")
    raise ValueError(f"unknown device {spec!r}; expected 'cpu'")


cdef class _VersionCounter:
    """Shared by a tensor and its views; every in-place op bumps it."""
    cdef long long value


cdef class Tensor:
    """An n-dimensional array with reverse-mode autograd.

    Create one with :func:`lucid.tensor`, :func:`lucid.from_numpy` or a creation
    function (``lucid.zeros``, ...). On the CPU the storage is a NumPy ndarray,
    shared without copies with ``from_numpy`` / ``numpy()`` / ``np.asarray``.
    """
    cdef cnp.ndarray _data
    cdef DType _dtype
    cdef bint _requires_grad
    cdef object _grad              # Tensor or None
    cdef Node _grad_fn
    cdef int _output_nr
    cdef _VersionCounter _vc       # created lazily: most tensors are never saved or mutated
    cdef object __weakref__

    # NumPy defers binary operators with a Tensor on the right to Tensor.__radd__ etc.
    __array_priority__ = 1000

    def __init__(self, data, dtype=None, device="cpu", requires_grad=False):
        cdef Tensor t = tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        self._data = t._data
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
        return _CPU

    @property
    def is_cuda(self):
        return False

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
        cdef Tensor t = _wrap(self._data, self._dtype)
        t._vc = self._get_vc()
        return t

    def detach_(self):
        self._grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self):
        """This tensor's values, outside the graph (shares memory)."""
        return _wrap(self._data, self._dtype)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into the ``.grad`` of every leaf that requires grad."""
        _backward((self,), (gradient,), retain_graph, create_graph)

    # -- conversion ------------------------------------------------------------
    def numpy(self, *, force=False):
        """An ndarray sharing memory with this tensor (raises if it requires grad)."""
        if self._requires_grad and not force:
            raise LucidError(
                "Can't call numpy() on a tensor that requires grad. "
                "Use tensor.detach().numpy() instead.")
        return self._data.view()

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad:
            raise LucidError(
                "Can't convert a tensor that requires grad to a NumPy array. "
                "Use tensor.detach().numpy() instead.")
        if copy:
            return np.array(self._data, dtype=dtype, copy=True)
        if dtype is not None and np.dtype(dtype) != self._data.dtype:
            if copy is False:
                raise ValueError("a copy is needed to convert to the requested dtype")
            return self._data.astype(dtype)
        return self._data.view()

    def item(self):
        if cnp.PyArray_SIZE(self._data) != 1:
            raise LucidError(
                f"a Tensor with {cnp.PyArray_SIZE(self._data)} elements cannot be "
                "converted to a Python scalar")
        return self._data.item()

    def tolist(self):
        return self._data.tolist()

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
        return bool(self._data.item())

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
        return (_rebuild, (self._data.copy(), self._dtype.name, self._requires_grad))

    def __repr__(self):
        body = np.array2string(self._data, separator=", ", prefix="tensor(",
                               max_line_width=80, threshold=1000)
        extras = []
        if self._dtype is not float32 and self._dtype is not int64 and self._dtype is not bool_:
            extras.append(f"dtype={self._dtype}")
        elif cnp.PyArray_SIZE(self._data) == 0:
            extras.append(f"size={_shp(self._data)}")
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

    cdef inline void _bump(self):
        if self._vc is None:
            self._vc = _VersionCounter.__new__(_VersionCounter)
        self._vc.value += 1

    # -- copies and dtype casts --------------------------------------------------
    def clone(self):
        return clone(self)

    def contiguous(self):
        if cnp.PyArray_IS_C_CONTIGUOUS(self._data):
            return self
        return clone(self)

    def to(self, dtype=None, device=None, copy=False):
        if device is not None:
            _check_device(device)
        if dtype is None:
            return clone(self) if copy else self
        return to_dtype(self, as_dtype(dtype), copy)

    def float(self):
        return to_dtype(self, float32, False)

    def double(self):
        return to_dtype(self, float64, False)

    def half(self):
        return to_dtype(self, float16, False)

    def long(self):
        return to_dtype(self, int64, False)

    def int(self):
        return to_dtype(self, int32, False)

    def bool(self):
        return to_dtype(self, bool_, False)

    def cpu(self):
        return self

    # -- ops as methods (the functions live in the op modules) --------------------
    def __neg__(self):
        return neg(self)

    def __pos__(self):
        return self

    def __add__(self, other):
        return add(self, other)

    def __radd__(self, other):
        return add(other, self)

    def __sub__(self, other):
        return sub(self, other)

    def __rsub__(self, other):
        return sub(other, self)

    def __mul__(self, other):
        return mul(self, other)

    def __rmul__(self, other):
        return mul(other, self)

    def __truediv__(self, other):
        return div(self, other)

    def __rtruediv__(self, other):
        return div(other, self)

    def __pow__(self, other, modulo):
        if modulo is not None:
            return NotImplemented
        return pow(self, other)

    def __rpow__(self, other, modulo):
        if modulo is not None:
            return NotImplemented
        return pow(other, self)

    def __mod__(self, other):
        return remainder(self, other)

    def __rmod__(self, other):
        return remainder(other, self)

    def __iadd__(self, other):
        return _inplace(self, other, _IP_ADD)

    def __isub__(self, other):
        return _inplace(self, other, _IP_SUB)

    def __imul__(self, other):
        return _inplace(self, other, _IP_MUL)

    def __itruediv__(self, other):
        return _inplace(self, other, _IP_DIV)

    def add(self, other, *, alpha=1):
        return add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return sub(self, other, alpha=alpha)

    def mul(self, other):
        return mul(self, other)

    def div(self, other):
        return div(self, other)

    def neg(self):
        return neg(self)

    def pow(self, exponent):
        return pow(self, exponent)

    def add_(self, other, *, alpha=1):
        if alpha != 1:
            other = mul(other, alpha) if isinstance(other, Tensor) else other * alpha
        return _inplace(self, other, _IP_ADD)

    def sub_(self, other, *, alpha=1):
        if alpha != 1:
            other = mul(other, alpha) if isinstance(other, Tensor) else other * alpha
        return _inplace(self, other, _IP_SUB)

    def mul_(self, other):
        return _inplace(self, other, _IP_MUL)

    def div_(self, other):
        return _inplace(self, other, _IP_DIV)

    def zero_(self):
        return _inplace(self, 0, _IP_FILL)

    def fill_(self, value):
        return _inplace(self, value, _IP_FILL)

    def sum(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
        return sum(self, dim, keepdim, dtype=dtype, axis=axis, keepdims=keepdims)

    def mean(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
        return mean(self, dim, keepdim, dtype=dtype, axis=axis, keepdims=keepdims)

    def reshape(self, *shape):
        return reshape(self, _size_args(shape))

    def view(self, *shape):
        return reshape(self, _size_args(shape))

    def expand(self, *sizes):
        return expand(self, _size_args(sizes))

    def expand_as(self, other):
        return expand(self, _shp((<Tensor>_as_tensor(other))._data))

    def __abs__(self):
        return abs(self)

    def __invert__(self):
        return logical_not(self) if self._dtype is bool_ else bitwise_not(self)

    def __eq__(self, other):
        return eq(self, other)

    def __ne__(self, other):
        return ne(self, other)

    def __lt__(self, other):
        return lt(self, other)

    def __le__(self, other):
        return le(self, other)

    def __gt__(self, other):
        return gt(self, other)

    def __ge__(self, other):
        return ge(self, other)

    def __and__(self, other):
        return logical_and(self, other)

    def __or__(self, other):
        return logical_or(self, other)

    def __xor__(self, other):
        return logical_xor(self, other)

    def __getitem__(self, index):
        return _getitem(self, index)

    def __setitem__(self, index, value):
        _setitem(self, index, value)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    @property
    def T(self):
        return _reverse_dims(self)

    # The element-wise unary ops (x.exp(), x.erf(), ...) are installed as methods by
    # the generated _unary.pxi, one per row of optable.py.


def _rebuild(data, dtype_name, requires_grad):
    cdef Tensor t = _wrap(data, _DTYPE_NAMES[dtype_name])
    t._requires_grad = requires_grad
    return t


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
    return <cnp.ndarray>np.asarray(r)


cdef inline int _norm_dim(object dim, int ndim) except? -1:
    cdef int d
    try:
        d = dim.__index__()
    except AttributeError:
        raise TypeError(f"dim must be an int, got {type(dim).__name__}") from None
    cdef int lo = -ndim if ndim > 0 else -1
    cdef int hi = ndim - 1 if ndim > 0 else 0
    if d < lo or d > hi:
        raise IndexError(
            f"dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return d + ndim if d < 0 else (d if ndim > 0 else 0)


cdef inline object _np_alias(str fn, str torch_name, object torch_value, object torch_default,
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
        args = tuple(args[0])
    for s in args:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"sizes must be integers, got {s!r}")
        if s < -1:
            raise ValueError(f"negative dimension {s}")
    return tuple(int(s) for s in args)


# -- construction from Python data --------------------------------------------

cdef object _NUMERIC_KINDS = frozenset("biuf")


cdef cnp.ndarray _array_from_data(object data, DType dt):
    """Python scalars / nested lists / ndarrays -> a new ndarray of a lucid dtype."""
    cdef cnp.ndarray a
    if isinstance(data, Tensor):
        a = (<Tensor>data)._data
        return a.astype(dt.numpy_dtype if dt is not None else a.dtype, copy=True)
    if isinstance(data, (str, bytes)) or data is None:
        raise TypeError(f"lucid.tensor() needs numeric data, got {type(data).__name__}")
    if isinstance(data, (list, tuple)) and _contains_tensor(data):
        data = _tensors_to_nested(data)
    try:
        a = np.array(data, copy=True)
    except (ValueError, TypeError) as e:
        raise ShapeError(f"could not build a tensor from this data: {e}") from None
    if a.dtype.kind not in _NUMERIC_KINDS:
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
            if a.dtype.kind == "f":
                dt = float64 if a.dtype.itemsize == 8 and _holds_numpy_float64(data) else (
                    float16 if a.dtype.itemsize == 2 else float32)
            elif a.dtype.kind == "b":
                dt = bool_
            else:
                dt = int32 if a.dtype == np.int32 else int64
        elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
            dt = float32 if a.dtype.kind == "f" else (bool_ if a.dtype.kind == "b" else int64)
        elif a.dtype.kind == "u" or a.dtype.kind == "i" and a.dtype.itemsize < 4:
            dt = int64
        else:
            dt = _dtype_of_array(a)
    if a.dtype != dt.numpy_dtype:
        a = a.astype(dt.numpy_dtype)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


cdef bint _holds_numpy_float64(object seq):
    for item in seq:
        if isinstance(item, (list, tuple)):
            if _holds_numpy_float64(item):
                return True
        elif isinstance(item, (np.ndarray, np.generic)) and item.dtype.kind == "f" \
                and item.dtype.itemsize >= 8:
            return True
    return False


cdef bint _contains_tensor(object seq):
    for item in seq:
        if isinstance(item, Tensor):
            return True
        if isinstance(item, (list, tuple)) and _contains_tensor(item):
            return True
    return False


cdef object _tensors_to_nested(object seq):
    out = []
    for item in seq:
        if isinstance(item, Tensor):
            out.append((<Tensor>item)._data)
        elif isinstance(item, (list, tuple)):
            out.append(_tensors_to_nested(item))
        else:
            out.append(item)
    return out


def tensor(data, dtype=None, device="cpu", requires_grad=False):
    """A new tensor holding a copy of ``data``.

    ``data``: a Python scalar, (nested) list or tuple, NumPy array or tensor.
    The dtype defaults to float32 for float data, int64 for int data, bool for
    bool data; a NumPy array keeps its dtype.
    """
    _check_device(device)
    cdef DType dt = as_dtype(dtype) if dtype is not None else None
    cdef Tensor t = _wrap(_array_from_data(data, dt), None)
    t._dtype = _dtype_of_array(t._data)
    if requires_grad:
        t._set_requires_grad(True)
    return t


def from_numpy(cnp.ndarray a not None):
    """A tensor sharing memory with the ndarray ``a`` (no copy)."""
    cdef Tensor t = _wrap(a, _dtype_of_array(a))
    return t


cdef inline void _check_device(object dev) except *:
    if dev is not None and not (isinstance(dev, str) and dev == "cpu") and dev is not _CPU:
        device(dev)


cdef Tensor _as_tensor(object x):
    """Tensors pass through; numbers, lists and ndarrays become (copied) tensors."""
    if isinstance(x, Tensor):
        return <Tensor>x
    if isinstance(x, (bool, int, float, list, tuple, np.ndarray, np.generic)):
        return tensor(x)
    raise TypeError(f"expected a lucid Tensor (or numeric data), got {type(x).__name__}")
