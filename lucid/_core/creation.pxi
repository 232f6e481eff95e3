# Creation functions and the global random stream.

cdef object _RNG = np.random.default_rng()


def manual_seed(seed):
    """Seed lucid's global random stream (rand, randn) for reproducible results."""
    global _RNG
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    _RNG = np.random.Generator(np.random.PCG64(seed))
    return _RNG


cdef Tensor _finish(cnp.ndarray a, DType dt, object requires_grad, object dev):
    _check_device(dev)
    cdef Tensor t = _wrap(a, dt)
    if requires_grad:
        t._set_requires_grad(True)
    return t


cdef inline DType _dt_or(object dtype, DType default):
    return as_dtype(dtype) if dtype is not None else default


def zeros(*size, dtype=None, device="cpu", requires_grad=False):
    """A tensor of zeros; ``zeros(2, 3)`` or ``zeros((2, 3))``."""
    cdef DType dt = _dt_or(dtype, float32)
    return _finish(np.zeros(_size_args(size), dtype=dt.numpy_dtype), dt, requires_grad, device)


def ones(*size, dtype=None, device="cpu", requires_grad=False):
    """A tensor of ones."""
    cdef DType dt = _dt_or(dtype, float32)
    return _finish(np.ones(_size_args(size), dtype=dt.numpy_dtype), dt, requires_grad, device)


def empty(*size, dtype=None, device="cpu", requires_grad=False):
    """An uninitialised tensor."""
    cdef DType dt = _dt_or(dtype, float32)
    return _finish(np.empty(_size_args(size), dtype=dt.numpy_dtype), dt, requires_grad, device)


cdef DType _dtype_of_value(object v):
    if isinstance(v, Tensor):
        return (<Tensor>v)._dtype
    if isinstance(v, (bool, np.bool_)):
        return bool_
    if isinstance(v, (int, np.integer)):
        return int64
    if isinstance(v, (float, np.floating)):
        return float32
    raise TypeError(f"fill value must be a number, got {type(v).__name__}")


def full(size, fill_value, *, dtype=None, device="cpu", requires_grad=False):
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from it, as PyTorch)."""
    cdef DType dt = _dt_or(dtype, _dtype_of_value(fill_value))
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    shape = _size_args((size,)) if not isinstance(size, (int, np.integer)) else (int(size),)
    return _finish(np.full(shape, fill_value, dtype=dt.numpy_dtype), dt, requires_grad, device)


def zeros_like(input, *, dtype=None, device="cpu", requires_grad=False):
    cdef Tensor x = _as_tensor(input)
    cdef DType dt = _dt_or(dtype, x._dtype)
    return _finish(np.zeros(_shp(x._data), dtype=dt.numpy_dtype), dt, requires_grad, device)


def ones_like(input, *, dtype=None, device="cpu", requires_grad=False):
    cdef Tensor x = _as_tensor(input)
    cdef DType dt = _dt_or(dtype, x._dtype)
    return _finish(np.ones(_shp(x._data), dtype=dt.numpy_dtype), dt, requires_grad, device)


def empty_like(input, *, dtype=None, device="cpu", requires_grad=False):
    cdef Tensor x = _as_tensor(input)
    cdef DType dt = _dt_or(dtype, x._dtype)
    return _finish(np.empty(_shp(x._data), dtype=dt.numpy_dtype), dt, requires_grad, device)


def full_like(input, fill_value, *, dtype=None, device="cpu", requires_grad=False):
    cdef Tensor x = _as_tensor(input)
    cdef DType dt = _dt_or(dtype, x._dtype)
    return _finish(np.full(_shp(x._data), fill_value, dtype=dt.numpy_dtype), dt,
                   requires_grad, device)


def arange(start, end=None, step=1, *, dtype=None, device="cpu", requires_grad=False):
    """Values from ``start`` (default 0) up to, not including, ``end`` in steps of ``step``.
    int64 when every argument is an integer, else float32 (as PyTorch)."""
    if end is None:
        start, end = 0, start
    for v in (start, end, step):
        if not _is_scalar(v):
            raise TypeError(f"arange() takes numbers, got {type(v).__name__}")
    if step == 0:
        raise ValueError("arange(): step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError(f"arange(): upper bound {end} and step {step} are inconsistent "
                         f"with lower bound {start}")
    all_int = isinstance(start, (int, np.integer)) and isinstance(end, (int, np.integer)) \
        and isinstance(step, (int, np.integer))
    cdef DType dt = _dt_or(dtype, int64 if all_int else float32)
    # Computed in float64 (or int64) and then cast, so float32 ranges have PyTorch's length.
    a = np.arange(start, end, step, dtype=np.int64 if all_int else np.float64)
    return _finish(a.astype(dt.numpy_dtype, copy=False), dt, requires_grad, device)


def linspace(start, end, steps, *, dtype=None, device="cpu", requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    cdef DType dt = _dt_or(dtype, float32)
    if steps < 0:
        raise ValueError("linspace(): number of steps must be non-negative")
    a = np.linspace(start, end, int(steps), dtype=np.float64)
    return _finish(a.astype(dt.numpy_dtype), dt, requires_grad, device)


def eye(n, m=None, *, dtype=None, device="cpu", requires_grad=False):
    """The n x m identity matrix."""
    cdef DType dt = _dt_or(dtype, float32)
    return _finish(np.eye(n, m, dtype=dt.numpy_dtype), dt, requires_grad, device)


cdef object _gen(object generator):
    return _RNG if generator is None else generator


def rand(*size, generator=None, dtype=None, device="cpu", requires_grad=False):
    """Uniform samples on [0, 1)."""
    cdef DType dt = _dt_or(dtype, float32)
    if not dt.is_floating_point:
        raise UnsupportedDTypeError(f"rand() needs a floating dtype, got {dt}")
    a = _gen(generator).random(_size_args(size),
                               dtype=np.float64 if dt is float64 else np.float32)
    return _finish(a.astype(dt.numpy_dtype, copy=False), dt, requires_grad, device)


def randn(*size, generator=None, dtype=None, device="cpu", requires_grad=False):
    """Standard normal samples."""
    cdef DType dt = _dt_or(dtype, float32)
    if not dt.is_floating_point:
        raise UnsupportedDTypeError(f"randn() needs a floating dtype, got {dt}")
    a = _gen(generator).standard_normal(_size_args(size),
                                        dtype=np.float64 if dt is float64 else np.float32)
    return _finish(a.astype(dt.numpy_dtype, copy=False), dt, requires_grad, device)
