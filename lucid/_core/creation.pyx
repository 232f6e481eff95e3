"""The creation family: zeros, ones, full, arange, linspace, eye, the *_like functions,
and random tensors from lucid's generators."""
cimport numpy as cnp

import numpy as np

from lucid._core.core cimport *
from lucid._core.core import (ArgumentError, DTypeOverflowError, LucidError, ShapeError,
                              UnsupportedDTypeError, _check_gpu_dtype, _float_arg, _int_arg,
                              export, ops, register)

cnp.import_array()

cdef DType bool_ = dtype_of_code(DT_BOOL)
cdef DType int64 = dtype_of_code(DT_INT64)
cdef DType float32 = dtype_of_code(DT_FLOAT32)
cdef DType float64 = dtype_of_code(DT_FLOAT64)
from lucid._core.core import device as ops_device

class Generator:
    """A random stream (PCG64). Pass ``generator=`` to rand, randn, randint, normal
    to draw from it instead of the global stream; the same seed gives the same values."""

    def __init__(self, device="cpu"):
        _check_device(device)
        self._seed = int(np.random.SeedSequence().entropy % (1 << 63))
        self._rng = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed):
        if isinstance(seed, (bool, float, np.bool_, np.floating)):      # as torch: int(seed)
            if not np.isfinite(seed):
                raise ArgumentError(f"manual_seed(): argument 'seed' must be finite, got {seed}")
            seed = int(seed)
        seed = _int_arg(seed, "manual_seed", "seed")
        if seed < 0:
            raise ArgumentError(f"seed must be non-negative, got {seed}")
        self._seed = seed
        self._rng = np.random.Generator(np.random.PCG64(seed))
        return self

    def seed(self):
        """Reseed from fresh entropy; returns the new seed."""
        self.manual_seed(int(np.random.SeedSequence().entropy % (1 << 63)))
        return self._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return self._rng.bit_generator.state

    def set_state(self, state):
        self._rng.bit_generator.state = state
        return self

    @property
    def device(self):
        return ops_device("cpu")

    def __repr__(self):
        return f"<lucid.Generator seed={self._seed}>"


_default_generator = Generator()


def manual_seed(seed):
    """Seed lucid's global random stream (rand, randn, randint, normal)."""
    return _default_generator.manual_seed(seed)


def initial_seed():
    return _default_generator.initial_seed()


cdef Tensor _finish(cnp.ndarray a, DType dt, object requires_grad, object dev, str op):
    """The new tensor (made by lucid.``op``) on its device: made on the CPU, one copy to
    the gpu (so that random tensors hold the same values on both devices for one seed)."""
    cdef Tensor t = _wrap(a, dt)
    if _check_device(dev):
        _check_gpu_dtype(dt, f"lucid.{op}()")
        t = to_device(t, True)
    if requires_grad:
        t._set_requires_grad(True)
    return t


cdef inline DType _dt_or(object dtype, DType default):
    return as_dtype(dtype) if dtype is not None else default


def zeros(*size, dtype=None, device="cpu", requires_grad=False):
    """A tensor of zeros; ``zeros(2, 3)`` or ``zeros((2, 3))``."""
    cdef DType dt = _dt_or(dtype, float32)
    return _finish(np.zeros(_size_args(size), dtype=dt.numpy_dtype),
                   dt, requires_grad, device, "zeros")


def ones(*size, dtype=None, device="cpu", requires_grad=False):
    """A tensor of ones."""
    cdef DType dt = _dt_or(dtype, float32)
    return _finish(np.ones(_size_args(size), dtype=dt.numpy_dtype),
                   dt, requires_grad, device, "ones")


def empty(*size, dtype=None, device="cpu", requires_grad=False):
    """An uninitialised tensor."""
    cdef DType dt = _dt_or(dtype, float32)
    return _finish(np.empty(_size_args(size), dtype=dt.numpy_dtype),
                   dt, requires_grad, device, "empty")


cdef DType _dtype_of_value(object v):
    if isinstance(v, Tensor):
        return (<Tensor>v)._dtype
    if isinstance(v, (bool, np.bool_)):
        return bool_
    if isinstance(v, (int, np.integer)):
        return int64
    if isinstance(v, (float, np.floating)) or _is_scalar(v):    # (a NumPy bfloat16 too)
        return float32
    raise TypeError(f"full(): fill_value must be a number, got {type(v).__name__}")


cpdef object _fill_value(object v, DType dt, str fn, str name="fill_value"):
    """``v`` (argument ``name`` of ``fn``) checked against ``dt``, as PyTorch: an integer
    dtype refuses nan, inf and values outside its range (NumPy would store INT64_MIN or
    wrap); finite floats are truncated toward zero."""
    if isinstance(v, Tensor):
        _check_storage(<Tensor>v, f"{fn}()'s fill_value")
        if cnp.PyArray_SIZE((<Tensor>v)._data) != 1:
            raise ShapeError(f"{fn}(): {name} must be a number or a one-element tensor")
        v = (<Tensor>v)._data.item()
    if not _is_scalar(v):
        raise TypeError(f"{fn}(): {name} must be a number, got {type(v).__name__}")
    if dt.is_floating_point:
        # a finite number that the dtype can only hold as inf is an overflow, as PyTorch
        # (1e5 in float16); inf and nan themselves are fine
        try:
            with np.errstate(over="ignore"):
                big = np.isfinite(float(v)) and np.isinf(np.array(v, dtype=np.float64)
                                                         .astype(dt.numpy_dtype))
        except OverflowError:
            big = True
        if big:
            raise DTypeOverflowError(f"{fn}(): {name} {v} cannot be converted to {dt} "
                                     "without overflow")
    if _is_int_code(dt.code):
        info = np.iinfo(dt.numpy_dtype)
        if isinstance(v, (float, np.floating)):
            if not np.isfinite(v):
                raise DTypeOverflowError(f"{fn}(): {name} {v} cannot be converted to {dt} "
                                         "without overflow")
            v = int(v)
        # PyTorch lets uint8 take -255..-1 and wraps them (-1 -> 255)
        if not (-info.max if dt.code == DT_UINT8 else info.min) <= v <= info.max:
            raise DTypeOverflowError(f"{fn}(): {name} {v} cannot be converted to {dt} "
                                     "without overflow")
        if v < 0 and dt.code == DT_UINT8:
            v = int(v) & 0xFF
    return v


def full(size, fill_value, *, dtype=None, device="cpu", requires_grad=False):
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from it, as PyTorch)."""
    cdef DType dt = _dt_or(dtype, _dtype_of_value(fill_value))
    fill_value = _fill_value(fill_value, dt, "full")
    shape = _size_args((size,)) if not isinstance(size, (int, np.integer)) else (int(size),)
    return _finish(np.full(shape, fill_value, dtype=dt.numpy_dtype),
                   dt, requires_grad, device, "full")


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    cdef Tensor x = _as_tensor_dev(input)
    cdef DType dt = _dt_or(dtype, x._dtype)
    device = x.device if device is None else device
    return _finish(np.zeros(_shp(x._data), dtype=dt.numpy_dtype),
                   dt, requires_grad, device, "zeros_like")


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    cdef Tensor x = _as_tensor_dev(input)
    cdef DType dt = _dt_or(dtype, x._dtype)
    device = x.device if device is None else device
    return _finish(np.ones(_shp(x._data), dtype=dt.numpy_dtype),
                   dt, requires_grad, device, "ones_like")


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    cdef Tensor x = _as_tensor_dev(input)
    cdef DType dt = _dt_or(dtype, x._dtype)
    device = x.device if device is None else device
    return _finish(np.empty(_shp(x._data), dtype=dt.numpy_dtype),
                   dt, requires_grad, device, "empty_like")


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    cdef Tensor x = _as_tensor_dev(input)
    cdef DType dt = _dt_or(dtype, x._dtype)
    device = x.device if device is None else device
    fill_value = _fill_value(fill_value, dt, "full_like")
    return _finish(np.full(_shp(x._data), fill_value, dtype=dt.numpy_dtype), dt,
                   requires_grad, device, "full_like")


def arange(start, end=None, step=1, *, dtype=None, device="cpu", requires_grad=False):
    """Values from ``start`` (default 0) up to, not including, ``end`` in steps of ``step``.
    int64 when every argument is an integer, else float32 (as PyTorch)."""
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not _is_scalar(v):
            raise TypeError(f"arange(): argument '{name}' must be a number, got {type(v).__name__}")
        if isinstance(v, (float, np.floating)) and not np.isfinite(v):
            raise ArgumentError(f"arange(): argument '{name}' must be finite, got {v}")
    if step == 0:
        raise ArgumentError("arange(): step must be nonzero")
    if (end - start) * step < 0:
        raise ArgumentError(f"arange(): upper bound {end} and step {step} are inconsistent "
                            f"with lower bound {start}")
    all_int = isinstance(start, (int, np.integer)) and isinstance(end, (int, np.integer)) \
        and isinstance(step, (int, np.integer))
    cdef DType dt = _dt_or(dtype, int64 if all_int else float32)
    # Computed in float64 (or int64) and then cast, so float32 ranges have PyTorch's length.
    try:
        a = np.arange(start, end, step, dtype=np.int64 if all_int else np.float64)
    except (ValueError, OverflowError) as e:     # more elements than an array can hold
        raise ArgumentError(f"arange(): start={start}, end={end}, step={step} give too many "
                            f"elements ({e})") from None
    return _finish(a.astype(dt.numpy_dtype, copy=False), dt, requires_grad, device, "arange")


def linspace(start, end, steps, *, dtype=None, device="cpu", requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    cdef DType dt = _dt_or(dtype, float32)
    start = _float_arg(start, "linspace", "start")
    end = _float_arg(end, "linspace", "end")
    steps = _int_arg(steps, "linspace", "steps")
    if steps < 0:
        raise ArgumentError(f"linspace(): argument 'steps' must be non-negative, got {steps}")
    a = np.linspace(start, end, steps, dtype=np.float64)
    return _finish(a.astype(dt.numpy_dtype), dt, requires_grad, device, "linspace")


def eye(n, m=None, *, dtype=None, device="cpu", requires_grad=False):
    """The n x m identity matrix."""
    cdef DType dt = _dt_or(dtype, float32)
    n = _int_arg(n, "eye", "n")
    m = n if m is None else _int_arg(m, "eye", "m")
    for name, v in (("n", n), ("m", m)):
        if v < 0:
            raise ArgumentError(f"eye(): argument '{name}' must be non-negative, got {v}")
    return _finish(np.eye(n, m, dtype=dt.numpy_dtype), dt, requires_grad, device, "eye")


cdef object _gen(object generator):
    if generator is None:
        return _default_generator._rng
    if isinstance(generator, Generator):
        return generator._rng
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(f"generator must be a lucid.Generator, got {type(generator).__name__}")


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device="cpu",
            requires_grad=False):
    """Integers uniform on [low, high). ``randint(high, size)`` or ``randint(low, high, size)``."""
    if size is None:
        if high is None or isinstance(high, (tuple, list)):
            low, high, size = 0, low, high
        else:
            raise TypeError("randint() needs a size, e.g. randint(0, 10, (3,))")
    if high is None:
        raise TypeError("randint() needs high")
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
            raise TypeError(f"randint(): {name} must be an integer, got {type(v).__name__}")
    if high <= low:
        raise ArgumentError(f"randint(): high ({high}) must be greater than low ({low})")
    cdef DType dt = _dt_or(dtype, int64)
    # As PyTorch: [low, high - 1] must fit the dtype (NumPy would wrap int32 silently).
    lo_ok, hi_ok = _RANDINT_RANGE.get(dt.name, _RANDINT_RANGE["int64"])
    if low < lo_ok:
        raise ArgumentError(f"randint(): low={low} is out of bounds for {dt}")
    if high - 1 > hi_ok:
        raise ArgumentError(f"randint(): high - 1 = {high - 1} is out of bounds for {dt}")
    a = _gen(generator).integers(low, high, size=_size_args((size,)) if not isinstance(
        size, (int, np.integer)) else (int(size),), dtype=np.int64)
    return _finish(a.astype(dt.numpy_dtype, copy=False), dt, requires_grad, device, "randint")


# The values randint can draw for each dtype (floats: those of the int64 draw).
_RANDINT_RANGE = {"bool_": (0, 1), "uint8": (0, 255), "int8": (-128, 127),
                  "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device="cpu",
           requires_grad=False):
    """Normal samples; ``mean`` and ``std`` may be numbers or tensors (broadcast)."""
    m = (<Tensor>mean)._data if isinstance(mean, Tensor) else _float_arg(mean, "normal", "mean")
    s = (<Tensor>std)._data if isinstance(std, Tensor) else _float_arg(std, "normal", "std")
    if not np.all(np.asarray(s) >= 0):
        raise ArgumentError(f"normal(): argument 'std' must be non-negative (and not nan)")
    cdef DType dt
    if dtype is not None:
        dt = as_dtype(dtype)
    elif isinstance(mean, Tensor):
        dt = (<Tensor>mean)._dtype
    elif isinstance(std, Tensor):
        dt = (<Tensor>std)._dtype
    else:
        dt = float32
    if not dt.is_floating_point:
        raise UnsupportedDTypeError(f"normal() needs a floating dtype, got {dt}")
    if size is not None:
        shape = _size_args((size,)) if not isinstance(size, (int, np.integer)) else (int(size),)
    else:
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
    z = _gen(generator).standard_normal(shape)
    return _finish(_as_ndarray(m + s * z).astype(dt.numpy_dtype),
                   dt, requires_grad, device, "normal")


def rand(*size, generator=None, dtype=None, device="cpu", requires_grad=False):
    """Uniform samples on [0, 1)."""
    cdef DType dt = _dt_or(dtype, float32)
    if not dt.is_floating_point:
        raise UnsupportedDTypeError(f"rand() needs a floating dtype, got {dt}")
    a = _gen(generator).random(_size_args(size),
                               dtype=np.float64 if dt is float64 else np.float32)
    return _finish(a.astype(dt.numpy_dtype, copy=False), dt, requires_grad, device, "rand")


def randn(*size, generator=None, dtype=None, device="cpu", requires_grad=False):
    """Standard normal samples."""
    cdef DType dt = _dt_or(dtype, float32)
    if not dt.is_floating_point:
        raise UnsupportedDTypeError(f"randn() needs a floating dtype, got {dt}")
    a = _gen(generator).standard_normal(_size_args(size),
                                        dtype=np.float64 if dt is float64 else np.float32)
    return _finish(a.astype(dt.numpy_dtype, copy=False), dt, requires_grad, device, "randn")


for _fn in (zeros_like, ones_like, empty_like, full_like):
    export(_fn)
