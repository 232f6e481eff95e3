"""lucid inside NumPy code: the NumPy protocols on Tensor, DLPack, ``lucid.differentiable``.

NumPy hands a call to the tensor when one of its arguments is a lucid Tensor:

- ``np.exp(t)``, ``a_ndarray * t`` (ufuncs) -> ``Tensor.__array_ufunc__`` -> ``UFUNCS``;
- ``np.sum(t, axis=0)`` (other functions) -> ``Tensor.__array_function__`` -> ``FUNCTIONS``.

The two methods are compiled (core.pyx) and run the common call from these tables
themselves; the other cases come back here (``_ufunc_general``, ``_function_general``).

Both tables map a NumPy callable to the lucid op that records the same backward
node as calling lucid directly, so gradients flow through unmodified NumPy code.
What is not in a table raises ``TypeError`` naming it: NumPy never silently
converts a tensor to an ndarray (which would drop its gradient).

Tensor is a static (compiled) type, so the other methods defined here are installed
on it through ``lucid._core.core._install_tensor_method``.
"""
import copy as _copy
import math
import sys
import types

import numpy as np

import lucid
from lucid import linalg as _la
from lucid._core import core as _C
from lucid._core.core import LucidError, Tensor

_NoValue = getattr(np, "_NoValue", object())
_ARRAYLIKE = (Tensor, np.ndarray)


def _is_t(x):
    return isinstance(x, Tensor)


def _unsupported(what, hint=""):
    return TypeError(f"lucid does not implement {what}{hint}; convert explicitly with "
                     "t.detach().numpy() if dropping the gradient is intended")


def _reject(fn, **given):
    """TypeError for NumPy arguments lucid cannot honour (out=, where=, order=, ...)."""
    for name, (value, default) in given.items():
        if value is not default and value is not _NoValue:
            raise TypeError(f"np.{fn}: lucid does not support the argument {name}={value!r}")


# -- ufuncs ----------------------------------------------------------------------------------

def _deg2rad(x):
    return lucid.mul(x, math.pi / 180)


def _rad2deg(x):
    return lucid.mul(x, 180 / math.pi)


def _logaddexp2(x, y):
    ln2 = math.log(2)
    return lucid.div(lucid.logaddexp(lucid.mul(x, ln2), lucid.mul(y, ln2)), ln2)


def _invert(x):
    return lucid.logical_not(x) if _is_t(x) and x.dtype == lucid.bool_ else lucid.bitwise_not(x)


def _positive(x):
    return lucid.clone(x) if _is_t(x) else lucid.tensor(x)


def _reciprocal(x):
    return lucid.reciprocal(x)


def _arrays_as_tensors(fn):
    """fn (a lucid op that promotes tensors and numbers only) with ndarray operands made
    tensors first, so an ndarray's dtype takes part as a tensor's would."""
    def impl(*operands):
        return fn(*(lucid.tensor(x) if isinstance(x, np.ndarray) else x for x in operands))
    impl.__name__ = fn.__name__
    return impl


# ufunc -> the lucid op (same arguments, same node). np.divide is np.true_divide,
# np.abs is np.absolute, np.mod is np.remainder: one entry each.
UFUNCS = {
    # unary
    np.exp: lucid.exp, np.exp2: lucid.exp2, np.expm1: lucid.expm1,
    np.log: lucid.log, np.log2: lucid.log2, np.log10: lucid.log10, np.log1p: lucid.log1p,
    np.sqrt: lucid.sqrt, np.cbrt: lucid.cbrt, np.square: lucid.square,
    np.reciprocal: _reciprocal,
    np.sin: lucid.sin, np.cos: lucid.cos, np.tan: lucid.tan,
    np.arcsin: lucid.asin, np.arccos: lucid.acos, np.arctan: lucid.atan,
    np.sinh: lucid.sinh, np.cosh: lucid.cosh, np.tanh: lucid.tanh,
    np.arcsinh: lucid.asinh, np.arccosh: lucid.acosh, np.arctanh: lucid.atanh,
    np.deg2rad: _deg2rad, np.radians: _deg2rad, np.rad2deg: _rad2deg, np.degrees: _rad2deg,
    np.absolute: lucid.abs, np.fabs: lucid.abs, np.sign: lucid.sign,
    np.floor: lucid.floor, np.ceil: lucid.ceil, np.trunc: lucid.trunc, np.rint: lucid.round,
    np.negative: lucid.neg, np.positive: _positive,
    np.isnan: lucid.isnan, np.isinf: lucid.isinf, np.isfinite: lucid.isfinite,
    np.logical_not: lucid.logical_not, np.invert: _invert,
    # binary
    np.add: lucid.add, np.subtract: lucid.sub, np.multiply: lucid.mul,
    np.true_divide: lucid.div, np.power: lucid.pow,
    np.maximum: lucid.maximum, np.minimum: lucid.minimum,
    np.arctan2: lucid.atan2, np.hypot: lucid.hypot,
    np.logaddexp: lucid.logaddexp, np.logaddexp2: _logaddexp2,
    np.fmod: lucid.fmod, np.remainder: lucid.remainder,
    np.equal: lucid.eq, np.not_equal: lucid.ne, np.less: lucid.lt, np.less_equal: lucid.le,
    np.greater: lucid.gt, np.greater_equal: lucid.ge,
    np.logical_and: lucid.logical_and, np.logical_or: lucid.logical_or,
    np.logical_xor: lucid.logical_xor,
    np.floor_divide: _arrays_as_tensors(lucid.floor_divide),
    np.copysign: _arrays_as_tensors(lucid.copysign),
    np.bitwise_and: lucid.bitwise_and, np.bitwise_or: lucid.bitwise_or,
    np.bitwise_xor: lucid.bitwise_xor,
    np.left_shift: lucid.bitwise_left_shift, np.right_shift: lucid.bitwise_right_shift,
    np.matmul: lucid.matmul,
}

# scipy.special's ufuncs, by name (scipy is optional: matched only if it is imported).
# scipy.special's ufuncs that lucid.special has under the same name (scipy is optional:
# matched only if it is imported).
SCIPY_UFUNCS = frozenset({
    "erf", "erfc", "erfinv", "erfcx", "expit", "logit", "gammaln", "digamma", "psi", "i0",
    "i0e", "i1", "i1e", "ndtr", "log_ndtr", "ndtri", "entr", "xlogy", "xlog1py", "expm1",
    "exp2", "log1p"})

# ufunc.reduce / ufunc.accumulate -> lucid reductions (NumPy's default axis for both is 0).
_REDUCE = {np.add: lucid.sum, np.multiply: lucid.prod, np.maximum: lucid.amax,
           np.minimum: lucid.amin, np.logical_and: lucid.all, np.logical_or: lucid.any,
           np.logaddexp: lucid.logsumexp}
_ACCUMULATE = {np.add: lucid.cumsum, np.multiply: lucid.cumprod,
               np.maximum: lambda x, d: lucid.cummax(x, d).values,
               np.minimum: lambda x, d: lucid.cummin(x, d).values,
               np.logaddexp: lucid.logcumsumexp}


def _ufunc_op(ufunc):
    fn = UFUNCS.get(ufunc)
    if fn is None:
        name = getattr(ufunc, "__name__", repr(ufunc))
        special = sys.modules.get("scipy.special")
        if special is not None and getattr(special, name, None) is ufunc:
            fn = (_arrays_as_tensors(getattr(lucid.special, name)) if name in SCIPY_UFUNCS
                  else None)
        if fn is None:
            raise _unsupported(f"the NumPy ufunc {name!r}",
                               " (it has no lucid op, so its gradient is unknown)")
    return fn


def _ufunc_general(ufunc, method, inputs, kwargs):
    """A ufunc call Tensor.__array_ufunc__ does not look up itself: keywords (out=, where=,
    dtype=, ...), methods other than ``__call__``, ufuncs outside ``UFUNCS``."""
    name = getattr(ufunc, "__name__", repr(ufunc))
    out = kwargs.pop("out", None)
    if out is not None:
        out = out if isinstance(out, tuple) else (out,)
        if len(out) != 1:
            raise TypeError(f"np.{name}: lucid supports out= with one output only")
        out = out[0]
    if method == "__call__":
        where = kwargs.pop("where", True)
        dtype = kwargs.pop("dtype", None)
        _reject(name, **{k: (v, d) for k, v, d in (
            ("casting", kwargs.pop("casting", "same_kind"), "same_kind"),
            ("order", kwargs.pop("order", "K"), "K"),
            ("subok", kwargs.pop("subok", True), True))})
        if kwargs:
            raise TypeError(f"np.{name}: lucid does not support the argument(s) {sorted(kwargs)}")
        fn = _ufunc_op(ufunc)
        if dtype is not None:
            inputs = tuple(x.to(dtype) if _is_t(x) else lucid.tensor(x, dtype=dtype)
                           for x in inputs)
        result = fn(*inputs)
        if where is not True:
            if out is None:
                raise TypeError(f"np.{name}: where= needs out= (NumPy leaves the other elements "
                                "uninitialised)")
            result = lucid.where(lucid.tensor(where) if not _is_t(where) else where, result,
                                 out if _is_t(out) else lucid.tensor(out))
        r = result
        return r if out is None else _write_out(name, r, out)
    if method == "reduce":
        table, default_axis = _REDUCE, 0
    elif method == "accumulate":
        table, default_axis = _ACCUMULATE, 0
    else:
        table = None
    fn = table.get(ufunc) if table is not None else None
    if fn is None:
        raise _unsupported(f"np.{name}.{method}")
    (x,) = inputs
    axis = kwargs.pop("axis", default_axis)
    dtype = kwargs.pop("dtype", None)
    keepdims = kwargs.pop("keepdims", False)
    _reject(f"{name}.{method}", **{k: (kwargs.pop(k, _NoValue), _NoValue)
                                    for k in ("initial", "where") if k in kwargs})
    if kwargs:
        raise TypeError(f"np.{name}.{method}: lucid does not support the argument(s) "
                        f"{sorted(kwargs)}")
    if dtype is not None:
        x = x.to(dtype)
    if method == "accumulate":
        result = fn(x, axis)
    elif fn is lucid.amax or fn is lucid.amin:
        result = fn(x, () if axis is None else axis, keepdims)
    else:
        result = fn(x, axis, keepdims)
    return _write_out(f"{name}.{method}", result, out)


def _write_out(name, result, out):
    """NumPy's out=: a tensor is written in place (recorded like t[...] = r); an ndarray
    only when nothing would be lost (no gradient to drop)."""
    if out is None:
        return result
    if _is_t(out):
        out[...] = result
        return out
    if isinstance(out, np.ndarray):
        if _is_t(result) and result.requires_grad:
            raise TypeError(f"np.{name}: out= an ndarray would drop the result's gradient; "
                            "pass a lucid tensor as out, or detach() the inputs")
        np.copyto(out, result.numpy() if _is_t(result) else result, casting="same_kind")
        return out
    raise TypeError(f"np.{name}: out= must be a lucid tensor or an ndarray, got "
                    f"{type(out).__name__}")


# -- other NumPy functions (__array_function__) ---------------------------------------------
# Each implementation takes NumPy's signature and calls the lucid op.

def _axis_all(axis):
    return () if axis is None else axis


def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=_NoValue):
    if initial is not _NoValue or where is not _NoValue:
        _reject("sum", initial=(initial, _NoValue), where=(where, _NoValue))
    r = lucid.sum(a, axis, keepdims, dtype=dtype)
    return r if out is None else _write_out("sum", r, out)


def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=_NoValue):
    if where is not _NoValue:
        _reject("mean", where=(where, _NoValue))
    r = lucid.mean(a, axis, keepdims, dtype=dtype)
    return r if out is None else _write_out("mean", r, out)


def _prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=_NoValue):
    if initial is not _NoValue or where is not _NoValue:
        _reject("prod", initial=(initial, _NoValue), where=(where, _NoValue))
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise TypeError("np.prod: lucid reduces a product over one axis or all of them")
        axis = axis[0]
    r = lucid.prod(a, axis, keepdims, dtype=dtype)
    return r if out is None else _write_out("prod", r, out)


def _max(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=_NoValue):
    if initial is not _NoValue or where is not _NoValue:
        _reject("max", initial=(initial, _NoValue), where=(where, _NoValue))
    r = lucid.amax(a, _axis_all(axis), keepdims)
    return r if out is None else _write_out("max", r, out)


def _min(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=_NoValue):
    if initial is not _NoValue or where is not _NoValue:
        _reject("min", initial=(initial, _NoValue), where=(where, _NoValue))
    r = lucid.amin(a, _axis_all(axis), keepdims)
    return r if out is None else _write_out("min", r, out)


def _ptp(a, axis=None, out=None, keepdims=False):
    dims = _axis_all(axis)
    r = lucid.sub(lucid.amax(a, dims, keepdims), lucid.amin(a, dims, keepdims))
    return r if out is None else _write_out("ptp", r, out)


def _var_std(name, fn):
    def impl(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=_NoValue,
             mean=_NoValue, correction=_NoValue):
        if where is not _NoValue or mean is not _NoValue:
            _reject(name, where=(where, _NoValue), mean=(mean, _NoValue))
        if correction is not _NoValue:
            if ddof != 0:
                raise _C.ArgumentError(f"np.{name}: pass ddof or correction, not both")
            ddof = correction
        x = a.to(dtype) if dtype is not None else a
        r = fn(x, axis, keepdim=keepdims, correction=ddof)
        return r if out is None else _write_out(name, r, out)
    impl.__name__ = name
    return impl


def _argmax(a, axis=None, out=None, *, keepdims=False):
    r = lucid.argmax(a, axis, keepdims)
    return r if out is None else _write_out("argmax", r, out)


def _argmin(a, axis=None, out=None, *, keepdims=False):
    r = lucid.argmin(a, axis, keepdims)
    return r if out is None else _write_out("argmin", r, out)


def _all(a, axis=None, out=None, keepdims=False, *, where=_NoValue):
    if where is not _NoValue:
        _reject("all", where=(where, _NoValue))
    r = lucid.all(a, axis, keepdims)
    return r if out is None else _write_out("all", r, out)


def _any(a, axis=None, out=None, keepdims=False, *, where=_NoValue):
    if where is not _NoValue:
        _reject("any", where=(where, _NoValue))
    r = lucid.any(a, axis, keepdims)
    return r if out is None else _write_out("any", r, out)


def _count_nonzero(a, axis=None, *, keepdims=False):
    return lucid.sum(lucid.ne(a, 0), axis, keepdims)


def _flat(a):
    return lucid.reshape(a, (-1,))


def _cum(name, fn):
    def impl(a, axis=None, dtype=None, out=None):
        if axis is None:
            a, axis = _flat(a), 0
        r = fn(a, axis, dtype=dtype)
        return r if out is None else _write_out(name, r, out)
    impl.__name__ = name
    return impl


def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    if weights is None:
        avg = lucid.mean(a, axis, keepdims)
        wsum = None
    else:
        w = weights if _is_t(weights) else lucid.tensor(weights, dtype=a.dtype)
        if w.ndim == 1 and a.ndim > 1 and isinstance(axis, int):
            w = lucid.reshape(w, tuple(-1 if i == axis % a.ndim else 1 for i in range(a.ndim)))
        wsum = lucid.sum(lucid.mul(lucid.ones_like(a), w), axis, keepdims)
        avg = lucid.div(lucid.sum(lucid.mul(a, w), axis, keepdims), wsum)
    if returned:
        return avg, (wsum if wsum is not None else lucid.full_like(avg, a.numel() / avg.numel()))
    return avg


def _reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C" or copy is not None:
        _reject("reshape", order=(order, "C"), copy=(copy, None))
    shape = newshape if shape is None else shape
    if shape is None:
        raise TypeError("np.reshape() missing the shape")
    return lucid.reshape(a, (shape,) if isinstance(shape, int) else tuple(shape))


def _ravel(a, order="C"):
    if order != "C":
        _reject("ravel", order=(order, "C"))
    return _flat(a)


def _transpose(a, axes=None):
    if axes is None:
        axes = tuple(range(a.ndim))[::-1]
    return lucid.permute(a, *axes)


def _swapaxes(a, axis1, axis2):
    return lucid.transpose(a, axis1, axis2)


def _moveaxis(a, source, destination):
    nd = a.ndim
    src = [s % nd for s in ((source,) if isinstance(source, int) else source)]
    dst = [d % nd for d in ((destination,) if isinstance(destination, int) else destination)]
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lucid.permute(a, *order)


def _squeeze(a, axis=None):
    return lucid.squeeze(a, axis)


def _expand_dims(a, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = a.ndim + len(axes)
    for ax in sorted(x % nd for x in axes):
        a = lucid.unsqueeze(a, ax)
    return a


def _concatenate(arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind"):
    if casting != "same_kind":
        _reject("concatenate", casting=(casting, "same_kind"))
    arrays = list(arrays)
    if axis is None:
        arrays, axis = [_flat(x) for x in arrays], 0
    r = lucid.cat([x if _is_t(x) else lucid.tensor(x) for x in arrays], axis)
    r = r.to(dtype) if dtype is not None else r
    return r if out is None else _write_out("concatenate", r, out)


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    if casting != "same_kind":
        _reject("stack", casting=(casting, "same_kind"))
    r = lucid.stack([x if _is_t(x) else lucid.tensor(x) for x in arrays], axis)
    r = r.to(dtype) if dtype is not None else r
    return r if out is None else _write_out("stack", r, out)


def _atleast(nd):
    def one(x):
        x = x if _is_t(x) else lucid.tensor(x)
        if x.ndim >= nd:
            return x
        if nd == 3:
            shape3 = {0: (1, 1, 1), 1: (1, x.shape[0], 1)}.get(x.ndim, x.shape + (1,))
            return lucid.reshape(x, shape3)
        return lucid.reshape(x, (1,) * (nd - x.ndim) + x.shape)

    def impl(*arys):
        r = [one(x) for x in arys]
        return r[0] if len(r) == 1 else tuple(r)
    impl.__name__ = f"atleast_{nd}d"
    return impl


_atleast_1d, _atleast_2d, _atleast_3d = _atleast(1), _atleast(2), _atleast(3)


def _vstack(tup, *, dtype=None, casting="same_kind"):
    return _concatenate([_atleast_2d(x) for x in tup], 0, dtype=dtype, casting=casting)


def _hstack(tup, *, dtype=None, casting="same_kind"):
    arrs = [_atleast_1d(x) for x in tup]
    return _concatenate(arrs, 0 if arrs and arrs[0].ndim == 1 else 1, dtype=dtype, casting=casting)


def _split_impl(name, even):
    def impl(ary, indices_or_sections, axis=0):
        n = ary.shape[axis]
        if isinstance(indices_or_sections, int):
            k = indices_or_sections
            if even and n % k:
                raise _C.ArgumentError("array split does not result in an equal division")
            q, r = divmod(n, k)
            sizes = [q + 1] * r + [q] * (k - r)
            bounds = [sum(sizes[:i]) for i in range(k + 1)]
        else:
            bounds = [0] + [min(max(int(i), 0), n) for i in indices_or_sections] + [n]
        lead = (slice(None),) * (axis % ary.ndim)
        return [ary[lead + (slice(lo, max(lo, hi)),)] for lo, hi in zip(bounds[:-1], bounds[1:])]
    impl.__name__ = name
    return impl


def _flip(m, axis=None):
    return lucid.flip(m, tuple(range(m.ndim)) if axis is None else axis)


def _roll(a, shift, axis=None):
    return lucid.roll(a, shift, axis)


def _tile(A, reps):
    return lucid.tile(A, (reps,) if isinstance(reps, int) else tuple(reps))


def _broadcast_to(array, shape, subok=False):
    return lucid.broadcast_to(array, (shape,) if isinstance(shape, int) else tuple(shape))


def _where(condition, x=None, y=None):
    if x is None and y is None:
        return _nonzero(condition)
    if x is None or y is None:
        raise _C.ArgumentError("np.where: pass both x and y, or neither")
    return lucid.where(condition if _is_t(condition) else lucid.tensor(condition), x, y)


def _clip(a, a_min=_NoValue, a_max=_NoValue, out=None, *, min=_NoValue, max=_NoValue, **kwargs):
    if kwargs:
        raise TypeError(f"np.clip: lucid does not support the argument(s) {sorted(kwargs)}")
    lo = min if min is not _NoValue else a_min
    hi = max if max is not _NoValue else a_max
    lo = None if lo is _NoValue else lo
    hi = None if hi is _NoValue else hi
    r = lucid.clip(a, lo, hi)
    return r if out is None else _write_out("clip", r, out)


def _dot(a, b, out=None):
    ta = a if _is_t(a) else lucid.tensor(a)
    tb = b if _is_t(b) else lucid.tensor(b)
    if ta.ndim == 0 or tb.ndim == 0:
        r = lucid.mul(ta, tb)
    elif ta.ndim == 1 and tb.ndim == 1:
        r = lucid.dot(ta, tb)
    elif tb.ndim <= 2:
        r = lucid.matmul(ta, tb)
    else:
        raise _unsupported("np.dot of arrays with more than 2 dims", " (use np.matmul)")
    return r if out is None else _write_out("dot", r, out)


def _inner(a, b):
    return lucid.inner(a, b)


def _outer(a, b, out=None):
    ta = a if _is_t(a) else lucid.tensor(a)
    tb = b if _is_t(b) else lucid.tensor(b)
    r = lucid.outer(_flat(ta), _flat(tb))
    return r if out is None else _write_out("outer", r, out)


def _norm(x, ord=None, axis=None, keepdims=False):
    if ord is None or ord == "fro":
        p = 2
    elif isinstance(axis, tuple) and len(axis) == 2 or axis is None and x.ndim == 2:
        raise _unsupported(f"np.linalg.norm with a matrix ord={ord!r}")
    else:
        p = ord
    return lucid.norm(x, p, axis, keepdims)


def _copy_fn(a, order="K", subok=False):
    return lucid.clone(a)


def _like(name, fn):
    def impl(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        if shape is not None:
            return getattr(lucid, name[:-5])(shape, dtype=dtype or a.dtype)
        return fn(a, dtype=dtype)
    impl.__name__ = name
    return impl


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    if shape is not None:
        return lucid.full(shape, fill_value, dtype=dtype or a.dtype)
    return lucid.full_like(a, fill_value, dtype=dtype)


def _round(a, decimals=0, out=None):
    if decimals == 0:
        r = lucid.round(a)
    else:
        s = 10.0 ** decimals
        r = lucid.div(lucid.round(lucid.mul(a, s)), s)
    return r if out is None else _write_out("round", r, out)


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    return lucid.nan_to_num(x, nan, posinf, neginf)


def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return lucid.allclose(a if _is_t(a) else lucid.tensor(a), b if _is_t(b) else lucid.tensor(b),
                          rtol, atol, equal_nan)


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    close = lucid.le(lucid.abs(lucid.sub(a, b)), lucid.add(lucid.mul(lucid.abs(b), rtol), atol))
    close = lucid.logical_or(close, lucid.eq(a, b))          # equal infinities
    if equal_nan:
        close = lucid.logical_or(close, lucid.logical_and(lucid.isnan(a), lucid.isnan(b)))
    return close


def _array_equal(a1, a2, equal_nan=False):
    if equal_nan is not False:
        _reject("array_equal", equal_nan=(equal_nan, False))
    t1 = a1 if _is_t(a1) else lucid.tensor(a1)
    t2 = a2 if _is_t(a2) else lucid.tensor(a2)
    return t1.shape == t2.shape and bool(lucid.all(lucid.eq(t1, t2)))


def _diff(a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    if prepend is not _NoValue or append is not _NoValue:
        _reject("diff", prepend=(prepend, _NoValue), append=(append, _NoValue))
    lead = (slice(None),) * (axis % a.ndim)
    for _ in range(n):
        a = lucid.sub(a[lead + (slice(1, None),)], a[lead + (slice(None, -1),)])
    return a


def _take_along_axis(arr, indices, axis=-1):
    if axis is None:
        arr, axis = _flat(arr), 0
    idx = indices if _is_t(indices) else lucid.tensor(np.asarray(indices), dtype=lucid.int64)
    return lucid.gather(arr, axis, idx)


def _pad(array, pad_width, mode="constant", **kwargs):
    modes = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
             "wrap": "circular"}
    if mode not in modes:
        raise _unsupported(f"np.pad with mode={mode!r}")
    value = kwargs.pop("constant_values", 0)
    if kwargs:
        raise TypeError(f"np.pad: lucid does not support the argument(s) {sorted(kwargs)}")
    if not isinstance(value, (int, float)):
        raise _unsupported("np.pad with per-axis constant_values")
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (array.ndim, 2))
    flat = [int(v) for pair in pw[::-1] for v in pair]
    return lucid.pad(array, flat, modes[mode], value if mode == "constant" else 0)


def _result_type(*arrays_and_dtypes):
    return np.result_type(*(x.dtype.numpy_dtype if _is_t(x) else x for x in arrays_and_dtypes))


def _numpy_view(x):
    return x.detach().numpy() if _is_t(x) else x


def _shares_memory(a, b, max_work=None):
    return np.shares_memory(_numpy_view(a), _numpy_view(b), max_work)


def _may_share_memory(a, b, max_work=None):
    return np.may_share_memory(_numpy_view(a), _numpy_view(b), max_work)


# -- sorting, searching, order statistics --

def _flat_axis(a, axis):
    """NumPy's axis=None (the flattened array) as an axis of a tensor."""
    return (_flat(a), 0) if axis is None else (a, axis)


def _sort_kind(name, kind, order, stable):
    if order is not None:
        _reject(name, order=(order, None))
    return bool(stable) or kind in ("stable", "mergesort")


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    a, axis = _flat_axis(a, axis)
    return lucid.sort(a, axis, stable=_sort_kind("sort", kind, order, stable)).values


def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    a, axis = _flat_axis(a, axis)
    return lucid.argsort(a, axis, stable=_sort_kind("argsort", kind, order, stable))


def _over_axes(a, axis, keepdims, reduce_last):
    """Apply reduce_last (a reduction over the last dim) over NumPy's axis (None, an int or
    a tuple): those axes are moved to the end and flattened into one."""
    nd = a.ndim
    axes = tuple(range(nd)) if axis is None else (
        (axis,) if isinstance(axis, int) else tuple(axis))
    axes = tuple(sorted({ax % nd for ax in axes})) if nd else ()
    rest = [d for d in range(nd) if d not in axes]
    moved = lucid.permute(a, *rest, *axes) if nd else a
    r = reduce_last(lucid.reshape(moved, tuple(a.shape[d] for d in rest) + (-1,)))
    if keepdims:
        lead = r.shape[:r.ndim - len(rest)]         # quantile puts q's dims first
        r = lucid.reshape(r, lead + tuple(1 if d in axes else a.shape[d] for d in range(nd)))
    return r


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_impl(name, scale, quantile=lucid.quantile):
    def impl(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
        if weights is not None:
            _reject(name, weights=(weights, None))
        method = interpolation if interpolation is not None else method
        if method not in _QUANTILE_METHODS:
            raise _unsupported(f"np.{name} with method={method!r}",
                               f" (lucid has {', '.join(_QUANTILE_METHODS)})")
        qa = np.asarray(q.detach().numpy() if _is_t(q) else q, dtype=np.float64) / scale
        qv = float(qa) if qa.ndim == 0 else lucid.tensor(qa)      # a tensor q adds a dim
        r = _over_axes(a, axis, keepdims,
                       lambda x: quantile(x, qv, -1, interpolation=method))
        return r if out is None else _write_out(name, r, out)
    impl.__name__ = name
    return impl


_quantile = _quantile_impl("quantile", 1)
_percentile = _quantile_impl("percentile", 100)
_nanquantile = _quantile_impl("nanquantile", 1, lucid.nanquantile)
_nanpercentile = _quantile_impl("nanpercentile", 100, lucid.nanquantile)


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    # NumPy's median averages the two middle values (lucid.median, as torch, takes the lower)
    r = _over_axes(a, axis, keepdims, lambda x: lucid.quantile(x, 0.5, -1))
    return r if out is None else _write_out("median", r, out)


def _searchsorted(a, v, side="left", sorter=None):
    return lucid.searchsorted(a, v, side=side, sorter=sorter)


def _nonzero(a):
    return lucid.nonzero(a if _is_t(a) else lucid.tensor(a), as_tuple=True)


def _unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
            *, equal_nan=True, sorted=True):
    if return_index or equal_nan is not True:
        _reject("unique", return_index=(return_index, False), equal_nan=(equal_nan, True))
    return lucid.unique(ar, return_inverse=return_inverse, return_counts=return_counts,
                        dim=axis)


# -- matrices ---------------------------------------------------------------------------

def _diagonal(a, offset=0, axis1=0, axis2=1):
    return lucid.diagonal(a, offset, axis1, axis2)


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    r = lucid.sum(lucid.diagonal(a, offset, axis1, axis2), -1, dtype=dtype)
    return r if out is None else _write_out("trace", r, out)


def _tensordot(a, b, axes=2):
    return lucid.tensordot(a, b, axes)


def _einsum(*operands, out=None, optimize=False, **kwargs):
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        raise TypeError(f"np.einsum: lucid does not support the argument(s) {sorted(kwargs)}")
    r = lucid.einsum(*operands)        # optimize only picks NumPy's contraction path
    r = r.to(dtype) if dtype is not None else r
    return r if out is None else _write_out("einsum", r, out)


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    if not axisa == axisb == axisc:
        raise _unsupported("np.cross with different axisa, axisb, axisc")
    return lucid.linalg.cross(a, b, dim=axisa)


def _meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if sparse:
        _reject("meshgrid", sparse=(sparse, False))
    return lucid.meshgrid(*(_flat(x if _is_t(x) else lucid.tensor(x)) for x in xi),
                          indexing=indexing)


def _repeat(a, repeats, axis=None):
    return lucid.repeat_interleave(a, repeats, axis)


def _triangle(name, fn):
    def impl(m, k=0):
        return fn(m, k)
    impl.__name__ = name
    return impl


# -- numpy.linalg -------------------------------------------------------------------------




def _solve(a, b):
    # NumPy 2 takes b as a vector only when it is 1-d; otherwise as a stack of matrices
    # (torch also reads b of a's ndim - 1 as vectors: give it a's ndim)
    if 2 <= b.ndim < a.ndim:
        b = lucid.reshape(b, (1,) * (a.ndim - b.ndim) + b.shape)
    return _la.solve(a, b)


def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        _reject("linalg.svd", hermitian=(hermitian, False))
    return _la.svd(a, full_matrices) if compute_uv else _la.svdvals(a)


def _qr(a, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        raise _unsupported(f"np.linalg.qr with mode={mode!r}")
    return _la.qr(a, mode).R if mode == "r" else _la.qr(a, mode)


def _pinv(a, rcond=None, hermitian=False, *, rtol=_NoValue):
    if rcond is None:        # NumPy's defaults: 1e-15, or eps * max(M, N) with rtol=None
        rcond = 1e-15 if rtol is _NoValue else rtol
    elif rtol is not _NoValue:
        raise _C.ArgumentError("np.linalg.pinv: rtol and rcond can't be both set")
    return _la.pinv(a, rtol=rcond, hermitian=hermitian)


def _matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    if tol is not None:
        return _la.matrix_rank(A, atol=tol, rtol=0.0, hermitian=hermitian)
    return _la.matrix_rank(A, rtol=rtol, hermitian=hermitian)


def _lstsq(a, b, rcond=None):
    x = _la.lstsq(a, b, rcond).solution
    s = _la.svdvals(a)
    m, n = a.shape
    cut = (np.finfo(a.dtype.numpy_dtype).eps * max(m, n) if rcond is None or rcond < 0
           else rcond)
    rank = int(lucid.sum(lucid.gt(s, cut * float(lucid.amax(s)))).item()) if s.numel() else 0
    if rank == n and m > n:
        r = lucid.sub(b, lucid.matmul(a, x))
        resid = lucid.sum(lucid.mul(r, r), 0)
        resid = lucid.reshape(resid, (1,)) if b.ndim == 1 else resid
    else:
        resid = lucid.zeros((0,), dtype=x.dtype)
    return x, resid, rank, s


def _linalg_trace(x, /, *, offset=0, dtype=None):
    return lucid.sum(lucid.diagonal(x, offset, -2, -1), -1, dtype=dtype)


LINALG = {
    np.linalg.det: _la.det, np.linalg.inv: _la.inv, np.linalg.slogdet: _la.slogdet,
    np.linalg.solve: _solve,
    np.linalg.cholesky: lambda a, /, *, upper=False: _la.cholesky(a, upper=upper),
    np.linalg.eigh: lambda a, UPLO="L": _la.eigh(a, UPLO),
    np.linalg.eigvalsh: lambda a, UPLO="L": _la.eigvalsh(a, UPLO),
    np.linalg.svd: _svd, np.linalg.qr: _qr, np.linalg.pinv: _pinv,
    np.linalg.matrix_rank: _matrix_rank, np.linalg.lstsq: _lstsq,
    np.linalg.matrix_power: _la.matrix_power,
    np.linalg.multi_dot: lambda arrays, *, out=None: _write_out(
        "linalg.multi_dot", _la.multi_dot(list(arrays)), out),
    np.linalg.norm: _norm,
}
# NumPy 2's array-API additions to numpy.linalg
for _name, _impl in (
        ("svdvals", lambda x, /: _la.svdvals(x)),
        ("matrix_norm", lambda x, /, *, keepdims=False, ord="fro":
            _la.matrix_norm(x, ord, keepdim=keepdims)),
        ("vector_norm", lambda x, /, *, axis=None, keepdims=False, ord=2:
            _la.vector_norm(x, ord, axis, keepdims)),
        ("cross", lambda x1, x2, /, *, axis=-1: _la.cross(x1, x2, dim=axis)),
        ("vecdot", lambda x1, x2, /, *, axis=-1: _la.vecdot(x1, x2, dim=axis)),
        ("matmul", lambda x1, x2, /: lucid.matmul(x1, x2)),
        ("outer", lambda x1, x2, /: lucid.outer(x1, x2)),
        ("tensordot", lambda x1, x2, /, *, axes=2: lucid.tensordot(x1, x2, axes)),
        ("diagonal", lambda x, /, *, offset=0: lucid.diagonal(x, offset, -2, -1)),
        ("trace", _linalg_trace)):
    if hasattr(np.linalg, _name):
        LINALG[getattr(np.linalg, _name)] = _impl


# -- writing tensors out: nothing comes back, so no gradient can be lost --

def _to_file(name):
    fn = getattr(np, name)

    def impl(file, *args, **kwargs):
        conv = [np.asarray(a) if _is_t(a) else a for a in args]    # a copy-free view
        return fn(file, *conv, **{k: np.asarray(v) if _is_t(v) else v for k, v in kwargs.items()})
    impl.__name__ = name
    return impl


FUNCTIONS = {
    np.sum: _sum, np.mean: _mean, np.prod: _prod, np.max: _max, np.min: _min, np.ptp: _ptp,
    np.var: _var_std("var", lucid.var), np.std: _var_std("std", lucid.std),
    np.argmax: _argmax, np.argmin: _argmin, np.all: _all, np.any: _any,
    np.count_nonzero: _count_nonzero,
    np.cumsum: _cum("cumsum", lucid.cumsum), np.cumprod: _cum("cumprod", lucid.cumprod),
    np.average: _average,
    np.reshape: _reshape, np.ravel: _ravel, np.transpose: _transpose, np.swapaxes: _swapaxes,
    np.moveaxis: _moveaxis, np.squeeze: _squeeze, np.expand_dims: _expand_dims,
    np.concatenate: _concatenate, np.stack: _stack, np.vstack: _vstack, np.hstack: _hstack,
    np.atleast_1d: _atleast_1d, np.atleast_2d: _atleast_2d, np.atleast_3d: _atleast_3d,
    np.split: _split_impl("split", True), np.array_split: _split_impl("array_split", False),
    np.flip: _flip, np.fliplr: lambda m: lucid.flip(m, 1), np.flipud: lambda m: lucid.flip(m, 0),
    np.roll: _roll, np.tile: _tile, np.broadcast_to: _broadcast_to,
    np.where: _where, np.clip: _clip,
    np.dot: _dot, np.inner: _inner, np.outer: _outer,
    np.copy: _copy_fn,
    np.zeros_like: _like("zeros_like", lucid.zeros_like),
    np.ones_like: _like("ones_like", lucid.ones_like),
    np.empty_like: _like("empty_like", lucid.empty_like),
    np.full_like: _full_like,
    np.round: _round, np.around: _round, np.nan_to_num: _nan_to_num,
    np.allclose: _allclose, np.isclose: _isclose, np.array_equal: _array_equal,
    np.diff: _diff, np.take_along_axis: _take_along_axis, np.pad: _pad,
    np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.numel() if axis is None else a.shape[axis],
    np.result_type: _result_type,
    np.iscomplexobj: lambda x: False, np.isrealobj: lambda x: True,
    np.shares_memory: _shares_memory, np.may_share_memory: _may_share_memory,
    np.sort: _sort, np.argsort: _argsort, np.median: _median, np.quantile: _quantile,
    np.percentile: _percentile, np.nanquantile: _nanquantile,
    np.nanpercentile: _nanpercentile, np.searchsorted: _searchsorted, np.nonzero: _nonzero,
    np.argwhere: lambda a: lucid.argwhere(a), np.unique: _unique,
    np.diag: lambda v, k=0: lucid.diag(v, k), np.diagonal: _diagonal, np.trace: _trace,
    np.tril: _triangle("tril", lucid.tril), np.triu: _triangle("triu", lucid.triu),
    np.kron: lambda a, b: lucid.kron(a, b), np.tensordot: _tensordot, np.einsum: _einsum,
    np.cross: _cross, np.meshgrid: _meshgrid, np.repeat: _repeat,
    np.sinc: lambda x: lucid.sinc(x), np.i0: lambda x: lucid.i0(x),
    np.save: _to_file("save"), np.savez: _to_file("savez"),
    np.savez_compressed: _to_file("savez_compressed"), np.savetxt: _to_file("savetxt"),
}
FUNCTIONS.update(LINALG)


# NumPy 2 keeps some aliases as separate function objects.
for _alias, _target in (("amax", np.max), ("amin", np.min), ("around", np.round),
                        ("concat", np.concatenate), ("permute_dims", np.transpose)):
    _f = getattr(np, _alias, None)
    if _f is not None and _f not in FUNCTIONS:
        FUNCTIONS[_f] = FUNCTIONS[_target]


def _function_general(func, types, args, kwargs):
    """A NumPy function call Tensor.__array_function__ does not run itself: one outside
    ``FUNCTIONS`` (an error), other array types taking part, NumPy's "not given" keywords."""
    fn = FUNCTIONS.get(func)
    if fn is None:
        mod = getattr(func, "__module__", "numpy") or "numpy"
        mod = "np" if mod.startswith("numpy") and "linalg" not in mod else mod
        raise _unsupported(f"the NumPy function {mod}.{func.__name__}",
                           " (so it cannot carry a gradient)")
    for t in types:
        if not issubclass(t, _ARRAYLIKE):
            return NotImplemented
    if kwargs and any(v is _NoValue for v in kwargs.values()):
        kwargs = {k: v for k, v in kwargs.items() if v is not _NoValue}
    return fn(*args, **kwargs)


# -- Tensor methods for NumPy habits ------------------------------------------------------------

def tensor_format(self, spec):
    """``format(t, ".3f")`` / f-strings: a one-element tensor formats as its value."""
    if not spec:
        return str(self)
    if self.numel() != 1:
        raise TypeError(f"unsupported format string {spec!r} for a tensor with {self.numel()} "
                        "elements (only one-element tensors format as numbers)")
    return format(self.item(), spec)


def astype(self, dtype, copy=True):
    """NumPy's ``a.astype(dtype)`` (NumPy, lucid or Python dtypes); recorded like ``to``."""
    return self.to(dtype=dtype, copy=copy)      # by keyword: "f8" is no device


def _array_interface(self):
    if self.device == "gpu":     # NumPy then tries __array__, which says what to do
        raise AttributeError("a gpu tensor has no __array_interface__; use .cpu()")
    if self.dtype is lucid.bfloat16:
        # its typestr would be "|V2" (raw bytes); without it NumPy asks __array__,
        # which returns the bfloat16 array itself
        raise AttributeError("a bfloat16 tensor has no __array_interface__")
    return self.numpy().__array_interface__


def tensor_deepcopy(self, memo):
    """Data, dtype and ``requires_grad`` (and ``.grad``); never the graph, as torch."""
    if self.grad_fn is not None:
        raise LucidError("only leaf tensors (created by the user, not by an op) support "
                         "deepcopy; detach() it first")
    new = lucid.tensor(self.detach().numpy(), dtype=self.dtype, device=self.device)   # copies
    new.requires_grad_(self.requires_grad)
    if self.grad is not None:
        new.grad = _copy.deepcopy(self.grad, memo)
    memo[id(self)] = new
    return new


# -- DLPack -----------------------------------------------------------------------------------

_KDLCPU = 1

# NumPy's DLPack has no bfloat16: lucid hands bfloat16 over as uint16 and relabels the
# dtype code inside the capsule (kDLUInt <-> kDLBfloat), both ways. The DLTensor starts
# the legacy managed struct and follows a 32-byte header in the versioned one; its dtype
# {code, bits, lanes} follows data (8 bytes), device (8) and ndim (4).
_KDLUINT, _KDLBFLOAT = 1, 4
_DLTENSOR_AT = {b"dltensor": 0, b"dltensor_versioned": 32}
_DTYPE_AT = 20


def _relabel_16bit(capsule, code_from, code_to):
    """Change a 16-bit dtype code in a fresh capsule; whether it held code_from."""
    import ctypes
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    if name not in _DLTENSOR_AT:
        return False
    where = api.PyCapsule_GetPointer(capsule, name) + _DLTENSOR_AT[name] + _DTYPE_AT
    dtype = ctypes.cast(where, ctypes.POINTER(ctypes.c_uint8))
    if dtype[0] != code_from or dtype[1] != 16:
        return False
    dtype[0] = code_to
    return True


def tensor_dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """Export the storage as a DLPack capsule (no copy), through NumPy's exporter."""
    if self.requires_grad:
        raise LucidError("can't export a tensor that requires grad through DLPack (the "
                         "gradient would be lost); use t.detach().__dlpack__()")
    if self.device == "gpu":
        raise BufferError("a gpu tensor does not export DLPack; use t.cpu().__dlpack__() "
                          "(or MLX's own exporter)")
    if dl_device is not None and tuple(dl_device)[0] != _KDLCPU:
        raise BufferError(f"lucid tensors live on the CPU; cannot export to device {dl_device}")
    kw = {k: v for k, v in (("max_version", max_version), ("copy", copy)) if v is not None}
    if self.dtype is lucid.bfloat16:
        capsule = self.numpy().view(np.uint16).__dlpack__(stream=stream, **kw)
        _relabel_16bit(capsule, _KDLUINT, _KDLBFLOAT)
        return capsule
    return self.numpy().__dlpack__(stream=stream, **kw)


def tensor_dlpack_device(self):
    return (_KDLCPU, 0)


class _Capsule:
    """Lets np.from_dlpack read a bare (legacy) DLPack capsule."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (_KDLCPU, 0)


class _Bfloat16AsUint16:
    """A DLPack producer seen through NumPy: bfloat16 capsules are relabelled uint16."""

    def __init__(self, producer):
        self._producer = producer
        self.relabelled = False

    def __dlpack__(self, **kwargs):
        capsule = self._producer.__dlpack__(**kwargs)
        self.relabelled = _relabel_16bit(capsule, _KDLBFLOAT, _KDLUINT)
        return capsule

    def __dlpack_device__(self):
        return self._producer.__dlpack_device__()


def from_dlpack(ext_tensor, *, copy=None):
    """A tensor sharing memory with any DLPack exporter on the CPU (NumPy, torch, JAX, ...).

    Also accepts a bare DLPack capsule. Nothing is copied unless ``copy=True``.
    """
    if type(ext_tensor).__name__ == "PyCapsule":
        ext_tensor = _Capsule(ext_tensor)
    elif not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack() needs an object with __dlpack__ (or a DLPack capsule), "
                        f"got {type(ext_tensor).__name__}")
    producer = _Bfloat16AsUint16(ext_tensor)
    try:
        arr = np.from_dlpack(producer, **({} if copy is None else {"copy": copy}))
    except (BufferError, RuntimeError) as e:
        raise BufferError(f"from_dlpack(): {e}") from None
    return lucid.from_numpy(arr.view(lucid.bfloat16.numpy_dtype) if producer.relabelled else arr)


# -- lucid.differentiable -------------------------------------------------------------------------

def differentiable(fn):
    """Run an unmodified function written against NumPy on lucid tensors.

    NumPy calls on tensors are already routed to lucid by the protocols above; this
    decorator also rebinds the function's global references to ``numpy`` (the module
    and names imported from it) to :mod:`lucid.numpy`, so that ``np.array([...])``,
    ``np.asarray(x)``, ``np.zeros(n)`` and friends keep tensors (and their graph)
    instead of converting them. Then ``lucid.autograd.grad`` of the result works::

        @lucid.differentiable
        def energy(x):                       # plain NumPy code
            return np.sum(np.square(np.diff(x)))

        x = lucid.tensor([0., 1., 3.], dtype=lucid.float64, requires_grad=True)
        (g,) = lucid.autograd.grad(energy(x), x)

    Plain functions of the same module that it calls (helpers) get the same rebinding;
    functions from other modules are left as they are (the protocols still route their
    NumPy calls, but there ``np.array``/``np.asarray`` of a tensor raise, as they would
    drop the gradient). Writes to module globals from inside the function go to a
    private copy of them.
    """
    import functools

    import lucid.numpy as lnp

    def rebind(value):
        if value is np:
            return lnp
        if value is np.linalg:
            return lnp.linalg
        name = getattr(value, "__name__", None)
        if name is not None and getattr(np, name, None) is value:
            return getattr(lnp, "_OVERRIDES", {}).get(name, value)
        return value

    def clone(f, globs):
        g = types.FunctionType(f.__code__, globs, f.__name__, f.__defaults__, f.__closure__)
        g.__kwdefaults__ = f.__kwdefaults__
        g.__qualname__ = f.__qualname__
        return g

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        home = fn.__globals__
        patched = {k: rebind(v) for k, v in home.items()}
        # Plain functions of the same module see the same rebinding (helpers).
        for k, v in list(patched.items()):
            if isinstance(v, types.FunctionType) and v.__globals__ is home:
                patched[k] = clone(v, patched)
        return clone(fn, patched)(*args, **kwargs)

    wrapper.__wrapped_numpy__ = fn
    return wrapper


# -- install -------------------------------------------------------------------------------------

def _install():
    _C._set_numpy_protocol(UFUNCS, FUNCTIONS, _ufunc_general, _function_general)
    put = _C._install_tensor_method
    put("__format__", tensor_format)
    put("astype", astype)
    put("__array_interface__", property(_array_interface))
    put("__deepcopy__", tensor_deepcopy)
    put("__dlpack__", tensor_dlpack)
    put("__dlpack_device__", tensor_dlpack_device)


_install()
