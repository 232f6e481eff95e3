# dtypes: six singletons, each tied to a NumPy dtype (CPU storage is an ndarray).

cdef enum:
    DT_BOOL = 0
    DT_INT32 = 1
    DT_INT64 = 2
    DT_FLOAT16 = 3
    DT_FLOAT32 = 4
    DT_FLOAT64 = 5


cdef class DType:
    """A lucid dtype (``lucid.float32``, ...). Singletons: compare with ``==`` or ``is``."""
    cdef readonly str name
    cdef readonly int code
    cdef readonly object numpy_dtype
    cdef readonly int itemsize
    cdef readonly bint is_floating_point
    cdef int typenum

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
cdef DType int32 = _make_dtype("int32", DT_INT32, np.int32, False)
cdef DType int64 = _make_dtype("int64", DT_INT64, np.int64, False)
cdef DType float16 = _make_dtype("float16", DT_FLOAT16, np.float16, True)
cdef DType float32 = _make_dtype("float32", DT_FLOAT32, np.float32, True)
cdef DType float64 = _make_dtype("float64", DT_FLOAT64, np.float64, True)

cdef tuple _DTYPES = (bool_, int32, int64, float16, float32, float64)   # indexed by code
_DTYPE_NAMES = {d.name: d for d in _DTYPES}
_DTYPE_NAMES["bool"] = bool_

# NumPy type number -> DType (None where lucid has no such dtype).
cdef list _DT_BY_TYPENUM = [None] * 32
for _d in _DTYPES:
    _DT_BY_TYPENUM[(<DType>_d).typenum] = _d
_DT_BY_TYPENUM[np.dtype(np.longlong).num] = int64 if np.dtype(np.longlong).itemsize == 8 else None
_DT_BY_TYPENUM[np.dtype(np.intc).num] = int32


def _dtype_by_name(str name):
    return _DTYPE_NAMES[name]


cdef inline DType _dtype_of_array(cnp.ndarray a):
    """The lucid dtype of an ndarray, or a clear error."""
    cdef int num = cnp.PyArray_TYPE(a)
    cdef object d = _DT_BY_TYPENUM[num] if 0 <= num < 32 else None
    if d is not None and not cnp.PyArray_ISNOTSWAPPED(a):
        raise UnsupportedDTypeError(
            f"lucid cannot share memory with a NumPy array of non-native byte order ({a.dtype!r}); "
            "use lucid.tensor(a) (it converts) or a.astype(a.dtype.newbyteorder('='))")
    if d is None:
        raise UnsupportedDTypeError(
            f"lucid does not support NumPy dtype {a.dtype!r}; supported: "
            "float16, float32, float64, int32, int64, bool "
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
    raise UnsupportedDTypeError(
        f"unsupported dtype {obj!r}; lucid supports float16, float32, float64, "
        "int32, int64 and bool_")


# Type promotion, as PyTorch: bool < integers < floating, within a kind the wider wins;
# int32 with float16 -> float16 (the floating kind wins).
cdef inline int _promote2(int a, int b) noexcept:
    if a == b:
        return a
    if a > b:
        a, b = b, a
    # now a < b in code order: bool, int32, int64, float16, float32, float64
    return b


cdef inline bint _is_float_code(int c) noexcept:
    return c >= DT_FLOAT16


class LucidError(RuntimeError):
    """Base class of lucid's own errors (a RuntimeError, as PyTorch raises)."""


class ShapeError(LucidError, ValueError):
    """Shapes that do not broadcast or do not match (also a ValueError)."""


class UnsupportedDTypeError(LucidError, TypeError):
    """A dtype lucid cannot store or an op cannot take (also a TypeError)."""
