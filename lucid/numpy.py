"""``import lucid.numpy as np``: NumPy's names for what lucid implements.

HIPS-autograd-style code written against this module runs on lucid tensors and is
differentiable. The rules:

- ufuncs (``np.exp``, ``np.arctan2``, ...) and the dispatched functions (``np.sum``,
  ``np.concatenate``, ...) are NumPy's own objects: on a tensor NumPy hands the call
  to lucid (``Tensor.__array_ufunc__`` / ``__array_function__``), on plain data they
  behave exactly as NumPy.
- ``array``/``asarray`` keep tensors (``np.array([x[0], 2 * x[1]])`` stacks them, graph
  intact); creation functions (``zeros``, ``linspace``, ...) return lucid tensors with
  NumPy's default dtypes (float64), so writing a tensor into them records the gradient.
- A NumPy name lucid does not implement raises ``AttributeError`` naming it.
"""
import builtins as _b

import numpy as _np

import lucid as _lucid
from lucid import _interop

_T = _lucid.Tensor

# (This module's globals shadow max, min, sum, all, any, abs, round: use _b.*.)
# NumPy's own callables, routed to lucid by the protocols when given a tensor.
_ROUTED = {}
for _f in list(_interop.UFUNCS) + list(_interop.FUNCTIONS):
    if getattr(_np, _f.__name__, None) is _f:
        _ROUTED[_f.__name__] = _f
# NumPy aliases of the same objects.
for _alias in ("abs", "divide", "mod", "conj", "amax", "amin", "round", "around", "acos",
               "asin", "atan", "acosh", "asinh", "atanh", "atan2", "pow", "concat",
               "permute_dims", "bitwise_invert", "max", "min"):
    _obj = getattr(_np, _alias, None)
    if _obj is not None and (_obj in _interop.UFUNCS or _obj in _interop.FUNCTIONS):
        _ROUTED[_alias] = _obj
globals().update(_ROUTED)

pi, e, inf, nan, newaxis, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, None, _np.euler_gamma
float16, float32, float64, int32, int64, bool_ = (
    _np.float16, _np.float32, _np.float64, _np.int32, _np.int64, _np.bool_)
dtype = _np.dtype
ndarray = _np.ndarray
random = _np.random          # data generation: plain ndarrays, constants to lucid


def _holds_tensor(obj):
    if isinstance(obj, _T):
        return True
    return isinstance(obj, (list, tuple)) and _b.any(_holds_tensor(x) for x in obj)


_ORDER = ("bool_", "int32", "int64", "float16", "float32", "float64")


def _leaf_dtype(obj, best=-1):
    if isinstance(obj, _T):
        return _b.max(best, _ORDER.index(obj.dtype.name))
    if isinstance(obj, (list, tuple)):
        for x in obj:
            best = _leaf_dtype(x, best)
    return best


def _stack_nested(obj, dt):
    if isinstance(obj, _T):
        return obj
    if isinstance(obj, (list, tuple)):
        return _lucid.stack([_stack_nested(x, dt) for x in obj])
    return _lucid.tensor(obj, dtype=dt)


def array(object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    """``np.array``: tensors (also nested in lists) stay in the graph; other data
    becomes a tensor of NumPy's dtype."""
    if ndmin or like is not None or order not in ("K", "C", "A"):
        raise TypeError("lucid.numpy.array: ndmin=, like= and order='F' are not supported")
    if _holds_tensor(object):
        code = _leaf_dtype(object)
        dt = getattr(_lucid, _ORDER[code]) if code >= 3 else _lucid.float64
        t = _stack_nested(object, dt)
        if dtype is not None:
            t = t.to(dtype)
        return _lucid.clone(t) if copy and t is object else t
    return _lucid.tensor(_np.array(object, dtype=dtype))


def asarray(a, dtype=None, order=None, *, copy=None, like=None):
    """``np.asarray``: a tensor passes through (cast if ``dtype``), an ndarray is shared
    without a copy, other data becomes a tensor of NumPy's dtype."""
    if isinstance(a, _T):
        return a.to(dtype) if dtype is not None else a
    if isinstance(a, _np.ndarray) and dtype is None and copy is not True:
        try:
            return _lucid.from_numpy(a)
        except TypeError:
            pass
    return array(a, dtype=dtype, copy=bool(copy))


asanyarray = asarray


def zeros(shape, dtype=float, order="C", *, like=None):
    return _lucid.zeros(shape, dtype=dtype)


def ones(shape, dtype=float, order="C", *, like=None):
    return _lucid.ones(shape, dtype=dtype)


def empty(shape, dtype=float, order="C", *, like=None):
    return _lucid.empty(shape, dtype=dtype)


def full(shape, fill_value, dtype=None, order="C", *, like=None):
    if dtype is None:
        dtype = _np.array(fill_value).dtype
    return _lucid.full((shape,) if isinstance(shape, int) else tuple(shape), fill_value,
                       dtype=dtype)


def eye(N, M=None, k=0, dtype=float, order="C", *, like=None):
    if k:
        return _lucid.tensor(_np.eye(N, M, k, dtype=dtype))
    return _lucid.eye(N, M, dtype=dtype)


def identity(n, dtype=None, *, like=None):
    return eye(n, dtype=float if dtype is None else dtype)


def arange(*args, dtype=None, like=None, **kwargs):
    return _lucid.tensor(_np.arange(*args, dtype=dtype, **kwargs))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    r = _np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
    if retstep:
        return _lucid.tensor(r[0]), r[1]
    return _lucid.tensor(r)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    return _lucid.tensor(_np.logspace(start, stop, num, endpoint, base, dtype, axis))


# Names whose NumPy version would convert a tensor or build an ndarray: what
# lucid.differentiable swaps in for them.
_OVERRIDES = {n: globals()[n] for n in (
    "array", "asarray", "asanyarray", "zeros", "ones", "empty", "full", "eye", "identity",
    "arange", "linspace", "logspace")}


class _Linalg:
    """``lucid.numpy.linalg``: NumPy's own functions, for those lucid implements."""

    def __init__(self):
        for f in _interop.LINALG:
            setattr(self, f.__name__, f)

    def __getattr__(self, name):
        raise AttributeError(f"lucid.numpy.linalg has no {name!r}: lucid does not implement "
                             f"numpy.linalg.{name}")

    def __dir__(self):
        return sorted(f.__name__ for f in _interop.LINALG)


linalg = _Linalg()


def __getattr__(name):
    raise AttributeError(f"lucid.numpy has no {name!r}: lucid does not implement numpy.{name}")


__all__ = sorted(set(_ROUTED) | set(_OVERRIDES) | {
    "pi", "e", "inf", "nan", "newaxis", "euler_gamma", "float16", "float32", "float64",
    "int32", "int64", "bool_", "dtype", "ndarray", "random", "linalg"})

del _f, _alias, _obj
