"""Sorting, selection and scatter ops as torch: sort, argsort, topk, kthvalue, median,
quantile, nanquantile, std_mean, var_mean, unique, searchsorted, nonzero, masked_select, masked_fill, cummax, cummin,
logcumsumexp, scatter, scatter_reduce, take_along_dim, index_add, repeat_interleave,
unflatten, meshgrid, isclose, lerp, copysign, floor_divide, div(rounding_mode=).

Index computations run in NumPy; the values an op returns are taken from its input with
lucid's differentiable ``gather`` / ``index_select`` / ``where`` (so their gradients, and
second derivatives, come from those ops' nodes). Ops whose backward is not a selection
(scatter, scatter_reduce, index_add, logcumsumexp) have a node of their own, a
:class:`lucid._core.core.PyNode` whose ``grad_formula_impl`` is written in lucid ops.
"""
import collections
import operator

import numpy as np

from lucid._core import core, host
from lucid._core.core import (
    ArgumentError,
    PyNode,
    ShapeError,
    Tensor,
    UnsupportedDTypeError,
    _py_attach,
    _py_node,
    export,
)
from lucid._core.creation import _fill_value

ops = core.ops
_int64 = core.as_dtype("int64")
_bool = core.as_dtype("bool_")
_f32 = core.as_dtype("float32")


_t = host.as_tensor
_arr = host.to_host
_need = host.needs_grad
_op = host.op


_from = host.from_host          # (array, dtype=None, device="cpu")
_idx = host.index_tensor        # (positions, device="cpu")


def _dim(d, nd):
    d = operator.index(d)
    n = max(nd, 1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d % n


def _np_kw(fn, name, value, default, np_name, np_value):
    """NumPy's keyword (axis=, keepdims=) next to torch's (dim=, keepdim=); both is an error."""
    if np_value is None:
        return value
    if value is not default:
        raise TypeError(f"{fn}() got both {name}= and {np_name}=; pass one of them")
    return np_value


def _required_dim(fn, dim, axis):
    dim = _np_kw(fn, "dim", dim, None, "axis", axis)
    if dim is None:
        raise TypeError(f"{fn}() missing required argument 'dim' (or axis)")
    return dim


def _gather(x, d, idx):
    """Values of x at idx along d (differentiable through lucid's gather)."""
    if x.ndim == 0:
        return ops.reshape(x, ())
    return ops.gather(x, d, idx)


# -- sort, argsort, topk, kthvalue, median, quantile ------------------------------------

SortResult = collections.namedtuple("sort", ["values", "indices"])
TopkResult = collections.namedtuple("topk", ["values", "indices"])
KthvalueResult = collections.namedtuple("kthvalue", ["values", "indices"])
MedianResult = collections.namedtuple("median", ["values", "indices"])
CumResult = collections.namedtuple("cummax", ["values", "indices"])


def _argsort(a, d, descending):
    """Stable argsort along d; NaN sorts as the largest value (last ascending, first
    descending), as torch."""
    if not descending:
        return np.argsort(a, axis=d, kind="stable")
    n = a.shape[d]
    rev = np.flip(a, d)
    idx = np.flip(np.argsort(rev, axis=d, kind="stable"), d)
    return n - 1 - idx


def argsort(input, dim=-1, descending=False, stable=False, *, axis=None):
    """Indices that sort ``input`` along ``dim`` (stable)."""
    dim = _np_kw("argsort", "dim", dim, -1, "axis", axis)
    x = _t(input)
    if x.ndim == 0:
        return _idx(np.zeros((), np.int64), x.device)
    d = _dim(dim, x.ndim)
    return _idx(_argsort(_arr(x), d, descending), x.device)


def sort(input, dim=-1, descending=False, stable=False, *, axis=None):
    """(values, indices) of ``input`` sorted along ``dim`` (stable; NaN largest)."""
    dim = _np_kw("sort", "dim", dim, -1, "axis", axis)
    x = _t(input)
    idx = argsort(x, dim, descending)
    if x.ndim == 0:
        return SortResult(ops.reshape(x, ()), idx)
    return SortResult(_gather(x, _dim(dim, x.ndim), idx), idx)


def topk(input, k, dim=-1, largest=True, sorted=True, *, axis=None):
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim``."""
    dim = _np_kw("topk", "dim", dim, -1, "axis", axis)
    x = _t(input)
    d = _dim(dim, x.ndim)
    n = x.shape[d] if x.ndim else 1
    k = core._int_arg(k, "topk", "k")
    if not 0 <= k <= n:
        raise IndexError(f"selected index k out of range (k={k}, size {n})")
    if x.ndim == 0:
        return TopkResult(ops.reshape(x, ()), _idx(np.zeros((), np.int64), x.device))
    order = _argsort(_arr(x), d, largest)
    idx = _idx(np.take(order, np.arange(k), axis=d), x.device)
    return TopkResult(_gather(x, d, idx), idx)


def kthvalue(input, k, dim=-1, keepdim=False, *, axis=None, keepdims=None):
    """The ``k``-th smallest element (1-based) along ``dim`` and its index."""
    dim = _np_kw("kthvalue", "dim", dim, -1, "axis", axis)
    keepdim = _np_kw("kthvalue", "keepdim", keepdim, False, "keepdims", keepdims)
    x = _t(input)
    d = _dim(dim, x.ndim)
    n = x.shape[d] if x.ndim else 1
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d}")
    if x.ndim == 0:
        return KthvalueResult(ops.reshape(x, ()), _idx(np.zeros((), np.int64), x.device))
    order = _argsort(_arr(x), d, False)
    idx = np.take(order, [k - 1], axis=d)
    return _keep(x, d, idx, keepdim, KthvalueResult)


def _keep(x, d, idx, keepdim, cls):
    it = _idx(idx, x.device)
    v = _gather(x, d, it)
    if not keepdim:
        v, it = ops.squeeze(v, d), ops.squeeze(it, d)
    return cls(v, it)


def _median_index(a, d, floating):
    """Index of the lower median along d; the first NaN where there is one (torch).
    ``floating``: the lucid dtype's predicate (a bfloat16 array's NumPy kind is 'V')."""
    n = a.shape[d]
    if n == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    order = np.argsort(a, axis=d, kind="stable")
    idx = np.take(order, [(n - 1) // 2], axis=d)
    if floating:
        nan = np.isnan(a)
        has = nan.any(axis=d, keepdims=True)
        first = np.argmax(nan, axis=d)
        idx = np.where(has, np.expand_dims(first, d), idx)
    return idx


def median(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """The lower median (of all elements, or (values, indices) along ``dim``); NaN if any."""
    dim = _np_kw("median", "dim", dim, None, "axis", axis)
    keepdim = _np_kw("median", "keepdim", keepdim, False, "keepdims", keepdims)
    x = _t(input)
    if dim is None:
        if x.numel() == 0:
            return _from(np.array(_empty_median(x.dtype)), x.dtype, x.device)
        flat = ops.reshape(x, (-1,))
        idx = _median_index(_arr(flat), 0, x.dtype.is_floating_point)
        return ops.reshape(_gather(flat, 0, _idx(idx, x.device)), ())
    if x.ndim == 0:
        return MedianResult(ops.reshape(x, ()), _idx(np.zeros((), np.int64), x.device))
    d = _dim(dim, x.ndim)
    return _keep(x, d, _median_index(_arr(x), d, x.dtype.is_floating_point), keepdim,
                 MedianResult)


def _empty_median(dt):
    """torch's median of no elements: NaN, cast to the dtype as its kernel casts it (an
    integer dtype of 4 or 8 bytes gets its minimum, a narrower one 0, bool True)."""
    if dt.is_floating_point:
        return np.nan
    if dt.name == "bool_":
        return True
    return np.iinfo(dt.numpy_dtype).min if dt.itemsize >= 4 else 0


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_q(fn, q, x):
    """q as a 1-d array of the dtype the ranks are computed in (the input's, as torch;
    float32 for a half input, which torch refuses) and whether the result drops the q
    dim. q outside [0, 1] or NaN raises naming ``fn`` and the value."""
    cdt = host.compute_dtype(x.dtype)
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise ShapeError(f"{fn}() q must be a scalar or 1D tensor, got {q.ndim} dims")
        qa = _arr(q).astype(np.float64).reshape(-1)
        bad = qa[~((qa >= 0) & (qa <= 1))]
        if bad.size:
            raise ArgumentError(f"{fn}() q values must be in the range [0, 1], got {bad[0]}")
        return qa.astype(cdt), q.ndim == 0
    qa = np.asarray(q, dtype=np.float64)
    if qa.ndim > 1:
        raise ShapeError(f"{fn}() q must be a scalar or 1D tensor, got {qa.ndim} dims")
    bad = qa[~((qa >= 0) & (qa <= 1))]
    if bad.size:
        raise ArgumentError(f"{fn}() q must be in the range [0, 1] but got {bad.reshape(-1)[0]}")
    return qa.astype(cdt).reshape(-1), qa.ndim == 0


def _quantile(fn, input, q, dim, keepdim, interpolation, ignore_nan):
    """torch's quantile: ranks q (n - 1) in the input's dtype (n: the slice's length, or
    its count of non-NaN values for nanquantile), moved to the last element where a slice
    holds a NaN (quantile) or has no value (nanquantile), so the result is NaN there;
    rounded for lower / higher / nearest; linear and midpoint (weight 0.5) lerp the
    sorted values at floor and ceil of the rank as torch's lerp does, so infinite
    neighbours give what torch gives (-inf + 0 (inf) is NaN). Differentiable through
    sort, gather and lerp."""
    x = _t(input)
    if not x.is_floating_point():
        raise UnsupportedDTypeError(f"{fn}() input tensor must be either float or double "
                                    f"dtype, got {x.dtype}")
    if interpolation not in _QUANTILE_MODES:
        raise ArgumentError(f"{fn}() interpolation must be one of linear, lower, higher, "
                            f"midpoint or nearest, but got {interpolation!r}")
    qa, scalar_q = _quantile_q(fn, q, x)
    if x.numel() == 0:
        raise ShapeError(f"{fn}() input tensor must be non-empty")
    dev = x.device
    if dim is None:
        xs, d = ops.reshape(x, (-1,)), 0
    else:
        d = _dim(dim, x.ndim)
        xs = x if x.ndim else ops.reshape(x, (1,))
    a = _arr(xs)
    cdt = qa.dtype
    n = a.shape[d]
    nan = np.isnan(a.astype(cdt, copy=False))
    qc = qa.reshape((-1,) + (1,) * a.ndim)                    # (nq, 1, ..., 1)
    if ignore_nan:
        valid = (n - nan.sum(axis=d, keepdims=True)).astype(cdt)
        ranks = qc * (valid - 1)
        ranks = np.where(ranks < 0, cdt.type(0), ranks)
    else:
        ranks = np.where(nan.any(axis=d, keepdims=True), cdt.type(n - 1), qc * cdt.type(n - 1))
    if interpolation == "lower":
        ranks = np.floor(ranks)
    elif interpolation == "higher":
        ranks = np.ceil(ranks)
    elif interpolation == "nearest":
        ranks = np.rint(ranks)                                 # half to even, as torch

    def at_d(r):
        """(nq, ... 1 at d+1 ...) -> the slice's shape with nq at d (a gather index)."""
        return np.moveaxis(np.squeeze(r, d + 1), 0, d)

    below = ranks.astype(np.int64)
    srt = sort(xs, d).values
    r = _gather(srt, d, _idx(at_d(below), dev))
    if interpolation in ("linear", "midpoint"):
        above = _gather(srt, d, _idx(at_d(np.ceil(ranks).astype(np.int64)), dev))
        w = np.full(ranks.shape, 0.5, cdt) if interpolation == "midpoint" else ranks - below
        r = lerp(r, above, _from(at_d(w), x.dtype, dev))
    r = ops.movedim(r, d, 0)                                  # (nq, ... without d ...)
    if dim is None:
        r = ops.reshape(r, (len(qa),) + ((1,) * x.ndim if keepdim else ()))
    elif keepdim and x.ndim:
        r = ops.unsqueeze(r, d + 1)
    if scalar_q:
        r = ops.squeeze(r, 0)
    return r


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", axis=None,
             keepdims=None):
    """The ``q``-quantiles (a number or 1-d tensor in [0, 1]) along ``dim`` (all elements if
    None); a 1-d ``q`` adds a leading dim. NaN where the slice holds one."""
    dim = _np_kw("quantile", "dim", dim, None, "axis", axis)
    keepdim = _np_kw("quantile", "keepdim", keepdim, False, "keepdims", keepdims)
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", axis=None,
                keepdims=None):
    """quantile ignoring NaN: the quantiles of each slice's other values (NaN where a
    slice has none)."""
    dim = _np_kw("nanquantile", "dim", dim, None, "axis", axis)
    keepdim = _np_kw("nanquantile", "keepdim", keepdim, False, "keepdims", keepdims)
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# -- std_mean, var_mean ---------------------------------------------------------------

def _moment_mean(fn, moment, input, dim, unbiased, keepdim, correction, axis, keepdims):
    dim = _np_kw(fn, "dim", dim, None, "axis", axis)
    keepdim = _np_kw(fn, "keepdim", keepdim, False, "keepdims", keepdims)
    if isinstance(dim, bool):          # std_mean(x, False): the old positional `unbiased`
        dim, unbiased = None, dim
    x = _t(input)
    return (moment(x, dim, unbiased, keepdim, correction=correction),
            ops.mean(x, dim, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
             keepdims=None):
    """(std, mean) over ``dim`` (all elements if None), std with ``correction`` (default 1;
    ``unbiased=False`` is correction 0), as torch.std_mean; both differentiable."""
    return _moment_mean("std_mean", ops.std, input, dim, unbiased, keepdim, correction, axis,
                        keepdims)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
             keepdims=None):
    """(var, mean) over ``dim`` (all elements if None), var with ``correction`` (default 1;
    ``unbiased=False`` is correction 0), as torch.var_mean; both differentiable."""
    return _moment_mean("var_mean", ops.var, input, dim, unbiased, keepdim, correction, axis,
                        keepdims)


# -- unique, searchsorted, nonzero, masked ops -------------------------------------------

def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None, *,
           axis=None):
    """The distinct values (sorted), optionally with inverse indices and counts."""
    dim = _np_kw("unique", "dim", dim, None, "axis", axis)
    x = _t(input)
    a = _arr(x)
    if dim is None:
        u, inv, cnt = np.unique(a.reshape(-1), return_inverse=True, return_counts=True)
        inv = inv.reshape(a.shape)
    else:
        u, inv, cnt = np.unique(a, return_inverse=True, return_counts=True,
                                axis=_dim(dim, x.ndim))
        inv = inv.reshape(-1)
    out = [_from(u, x.dtype, x.device)]
    if return_inverse:
        out.append(_idx(inv, x.device))
    if return_counts:
        out.append(_idx(cnt, x.device))
    return out[0] if len(out) == 1 else tuple(out)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse runs of equal consecutive values."""
    x = _t(input)
    if dim is not None:
        raise NotImplementedError("unique_consecutive(dim=...) is not implemented")
    a = _arr(x).reshape(-1)
    if a.size == 0:
        keep = np.zeros(0, bool)
    else:
        keep = np.concatenate([[True], a[1:] != a[:-1]])
    out = [_from(a[keep], x.dtype, x.device)]
    if return_inverse:
        out.append(_idx((np.cumsum(keep) - 1).reshape(tuple(x.shape)), x.device))
    if return_counts:
        starts = np.flatnonzero(keep)
        out.append(_idx(np.diff(np.append(starts, a.size)), x.device))
    return out[0] if len(out) == 1 else tuple(out)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Insertion indices of ``input`` into the innermost dim of ``sorted_sequence`` (each
    leading row of a N-d sequence with the matching row of ``input``)."""
    s = _t(sorted_sequence)
    scalar = not isinstance(input, Tensor) and np.ndim(input) == 0
    v = _t(input)
    dev = host.device_of("searchsorted", s, input if isinstance(input, Tensor) else None, sorter)
    if side is not None:
        if side not in ("left", "right") or (right and side == "left"):
            raise ArgumentError("searchsorted: side must be 'left' or 'right' and agree with "
                                f"right=, got side={side!r}, right={right!r}")
        right = side == "right"
    sa, va = _arr(s), _arr(v)
    if sorter is not None:
        sa = np.take_along_axis(sa, _arr(_t(sorter)), -1)
    how = "right" if right else "left"
    if sa.ndim == 1:
        r = np.searchsorted(sa, va, side=how)
    else:
        if sa.shape[:-1] != va.shape[:-1]:
            raise ShapeError("searchsorted: boundaries and input must have the same leading dims")
        r = np.empty(va.shape, np.int64)
        for i in np.ndindex(sa.shape[:-1]):         # (any of the sizes may be 0)
            r[i] = np.searchsorted(sa[i], va[i], side=how)
    r = np.asarray(r, dtype=np.int32 if out_int32 else np.int64)
    if scalar:
        r = r.reshape(())
    return _from(r, None, dev)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """Index of the bucket of each element (``boundaries`` 1-d, sorted)."""
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def nonzero(input, *, as_tuple=False):
    """Indices of the nonzero elements: an (n, ndim) tensor, or one 1-d tensor per dim."""
    x = _t(input)
    a, dev = _arr(x), x.device
    if as_tuple:
        if a.ndim == 0:
            return (_idx(np.flatnonzero(a.reshape(1)), dev),)
        return tuple(_idx(i, dev) for i in np.nonzero(a))
    if a.ndim == 0:
        return _idx(np.zeros((1 if a else 0, 0), np.int64), dev)
    return _idx(np.argwhere(a), dev)


def argwhere(input):
    return nonzero(input)


def _check_mask(mask):
    m = _t(mask)
    if m.dtype is not _bool:
        raise UnsupportedDTypeError(f"expected a bool mask, got {m.dtype}")
    return m


def masked_select(input, mask):
    """The elements of ``input`` where ``mask`` (broadcast together) is True, as a 1-d tensor."""
    x, m = _t(input), _check_mask(mask)
    dev = host.device_of("masked_select", x, m)
    shape = np.broadcast_shapes(tuple(x.shape), tuple(m.shape))
    xb = ops.reshape(ops.broadcast_to(x, shape), (-1,))
    idx = np.flatnonzero(np.broadcast_to(_arr(m), shape))
    return ops.index_select(xb, 0, _idx(idx, dev))


def _broadcasts_to(s, shape):
    """Does shape s broadcast to `shape` (without changing it)? (np.broadcast_shapes
    costs microseconds, more than a small masked_fill itself.)"""
    return s == shape or (len(s) <= len(shape) and all(
        d == 1 or d == e for d, e in zip(reversed(s), reversed(shape))))


def masked_fill(input, mask, value):
    """``input`` with ``value`` where ``mask`` is True (``value``: a number or a 0-d tensor,
    cast to input's dtype); differentiable in ``input`` and a tensor ``value``."""
    x, m = _t(input), _check_mask(mask)
    if not _broadcasts_to(tuple(m.shape), tuple(x.shape)):
        raise ShapeError(f"masked_fill: mask of shape {tuple(m.shape)} does not broadcast to "
                         f"input of shape {tuple(x.shape)}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeError("masked_fill only supports a 0-dimensional value tensor, but got "
                             f"tensor with {value.ndim} dimension(s).")
        v = value if value.dtype is x.dtype else value.to(x.dtype)
    else:
        v = _from(np.asarray(_fill_value(value, x.dtype, "masked_fill", "value")), x.dtype,
                  x.device)
    r = ops.where(m, v, x)
    return r if r.dtype is x.dtype else r.to(x.dtype)


def masked_fill_(input, mask, value):
    """In place: ``input[mask] = value``."""
    x, m = _t(input), _check_mask(mask)
    host.device_of("masked_fill_", x, m, value if isinstance(value, Tensor) else None)
    mb = _from(np.broadcast_to(_arr(m), tuple(x.shape)).copy(), None, x.device)
    if isinstance(value, Tensor) and value.ndim == 0:
        value = value.to(x.dtype) if value.dtype is not x.dtype else value
        x[mb] = ops.expand(ops.reshape(value, (1,)), (int(_arr(mb).sum()),))
    else:
        x[mb] = np.asarray(_fill_value(value, x.dtype, "masked_fill_", "value")) \
            .astype(x.dtype.numpy_dtype).item()
    return x


# -- cumulative ops -----------------------------------------------------------------

def _cum_index(a, d, better, isf):
    """Running arg-extremum along d: the latest index attaining it; NaN sticks (torch).
    ``isf``: the lucid dtype is floating (a bfloat16 array's NumPy kind is 'V')."""
    a = np.moveaxis(a, d, -1)
    idx = np.zeros(a.shape, np.int64)
    if a.shape[-1] == 0:
        return np.moveaxis(idx, -1, d)
    cur = a[..., 0].copy()
    best = np.zeros(a.shape[:-1], np.int64)
    for i in range(a.shape[-1]):
        v = a[..., i]
        take = better(v, cur)
        if isf:
            take = (take & ~np.isnan(cur)) | np.isnan(v)
        cur = np.where(take, v, cur)
        best = np.where(take, i, best)
        idx[..., i] = best
    return np.moveaxis(idx, -1, d)


def cummax(input, dim=None, *, axis=None):
    """Running maximum along ``dim`` and where it was attained."""
    dim = _required_dim("cummax", dim, axis)
    x = _t(input)
    if x.ndim == 0:
        return CumResult(ops.reshape(x, ()), _idx(np.zeros((), np.int64), x.device))
    d = _dim(dim, x.ndim)
    idx = _idx(_cum_index(_arr(x), d, np.greater_equal, x.dtype.is_floating_point), x.device)
    return CumResult(_gather(x, d, idx), idx)


def cummin(input, dim=None, *, axis=None):
    """Running minimum along ``dim`` and where it was attained."""
    dim = _required_dim("cummin", dim, axis)
    x = _t(input)
    if x.ndim == 0:
        return CumResult(ops.reshape(x, ()), _idx(np.zeros((), np.int64), x.device))
    d = _dim(dim, x.ndim)
    idx = _idx(_cum_index(_arr(x), d, np.less_equal, x.dtype.is_floating_point), x.device)
    return CumResult(_gather(x, d, idx), idx)


@_op("logcumsumexp", saves_input=True, saves_output=True)
class LogcumsumexpBackward(PyNode):
    """Backward of y = logcumsumexp(x): gx_j = sum_{i >= j} g_i exp(x_j - y_i), computed in
    log space for the positive and negative parts of g (no overflow; torch's formula):
    gx = exp(x + rlcse(log g+ - y)) - exp(x + rlcse(log g- - y)), rlcse the reversed
    logcumsumexp."""

    def grad_formula_impl(self, g, x, y):
        d = self.ctx
        # the lowest finite value, not -inf (as torch): -inf - -inf would make the second
        # derivative nan
        low = float(np.finfo(g.dtype.numpy_dtype).min)

        def part(gp):
            pos = gp > 0
            lg = ops.where(pos, ops.log(ops.where(pos, gp, 1.0)), low)
            r = ops.flip(logcumsumexp(ops.flip(lg - y, (d,)), d), (d,))
            return ops.exp(x + r)

        return part(g) - part(-g)


def logcumsumexp(input, dim=None, *, axis=None):
    """log(cumsum(exp(input))) along ``dim``, without overflow."""
    dim = _required_dim("logcumsumexp", dim, axis)
    x = _t(input)
    if not x.is_floating_point():
        raise UnsupportedDTypeError("logcumsumexp needs a floating point input")
    if x.ndim == 0:
        return ops.reshape(x, ()) * 1.0
    d = _dim(dim, x.ndim)
    comp = _arr(x).astype(host.compute_dtype(x.dtype), copy=False)
    with np.errstate(all="ignore"):
        r = np.logaddexp.accumulate(comp, axis=d)
    out = _from(r, x.dtype, x.device)
    if _need(x):
        _py_attach(_py_node(LogcumsumexpBackward), out, (x,), (x, out), d)
    return out


# -- scatter family ---------------------------------------------------------------

def _full_index(index, d):
    """An advanced index for ``index`` along ``d`` (the other dims by position)."""
    nd = index.ndim
    return tuple(index if k == d else
                 np.arange(index.shape[k]).reshape((-1,) + (1,) * (nd - 1 - k))
                 for k in range(nd))


def _check_scatter(op, x, d, index, src):
    host.check_index(op, index)
    if index.ndim != x.ndim:
        raise ShapeError("Index tensor must have the same number of dimensions as self tensor")
    for k in range(x.ndim):
        if index.shape[k] > (src.shape[k] if src is not None and src.ndim else index.shape[k]) or \
                (k != d and index.shape[k] > x.shape[k]):
            raise ShapeError(f"Expected index {tuple(index.shape)} to be smaller than self "
                             f"{tuple(x.shape)} apart from dimension {d} and to be smaller size "
                             f"than src {tuple(src.shape) if src is not None else ()}")
    ia = _arr(index)
    if ia.size and (ia.min() < -x.shape[d] or ia.max() >= x.shape[d]):
        raise IndexError(f"index {int(ia.max())} is out of bounds for dimension {d} with size "
                         f"{x.shape[d]}")
    return np.where(ia < 0, ia + x.shape[d], ia)


def _src_part(src, index):
    """src restricted to index's shape (torch reads only that corner)."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    r = src
    for k, n in enumerate(index.shape):
        if r.shape[k] != n:
            r = ops.narrow(r, k, 0, n)
    return r


@_op("scatter", arity=2)
class ScatterBackward(PyNode):
    """Backward of scatter: the input's gradient with the written positions zeroed; the
    source's gradient gathered from them."""

    def grad_formula_impl(self, g):
        d, index, written = self.ctx
        gx = ops.where(written, 0.0, g) if self.needs_input_grad(0) else None
        gs = ops.gather(g, d, index) if self.needs_input_grad(1) else None
        return gx, gs


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """``input`` with ``src`` (or ``value``) written at ``index`` along ``dim``
    (``reduce``: 'add' / 'multiply', as torch's deprecated form)."""
    if src is not None and not isinstance(src, Tensor):
        value, src = src, None
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise ArgumentError(f"scatter(): reduce argument must be either add or multiply, "
                                f"got {reduce!r}")
        s = src if src is not None else _from(
            np.full(tuple(index.shape), value, _t(input).dtype.numpy_dtype), None,
            _t(input).device)
        return scatter_reduce(input, dim, index, _src_part(s, index),
                              "sum" if reduce == "add" else "prod")
    x, index = _t(input), _t(index)
    dev = host.device_of("scatter", x, index, src)
    d = _dim(dim, x.ndim)
    ia = _check_scatter("scatter", x, d, index, src)
    out = _arr(x).copy()
    fi = _full_index(ia, d)
    if src is None:
        if value is None:
            raise TypeError("scatter() needs src or value")
        out[fi] = value
        sp = None
    else:
        sp = _src_part(src, index)
        out[fi] = _arr(sp).astype(out.dtype)
    r = _from(out, x.dtype, dev)
    if x.dtype.is_floating_point and _need(x, sp):
        written = np.zeros(out.shape, bool)
        written[fi] = True
        _py_attach(_py_node(ScatterBackward), r, (x, sp), (),
                   (d, _idx(ia, dev), _from(written, None, dev)))
    return r


_REDUCE_UFUNC = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.maximum,
                 "amin": np.minimum}


@_op("scatter_reduce", arity=2, saves_input=True, saves_output=True)
class ScatterReduceBackward(PyNode):
    """Backward of scatter_reduce (torch's formulas): sum / mean pass g (divided by the
    counts for mean); amax / amin split g evenly among the elements equal to the result;
    prod: g * result / element (elements must be nonzero)."""

    def grad_formula_impl(self, g, x, src, out):
        d, index, reduce, include_self, written, count = self.ctx
        gx = gs = None
        keep_self = 1.0 if include_self else ops.where(written, 0.0, 1.0)
        if reduce == "sum":
            gx = g * keep_self if not include_self else g
            gs = ops.gather(g, d, index)
        elif reduce == "mean":
            gc = g / count
            gx = gc * keep_self if not include_self else gc
            gs = ops.gather(gc, d, index)
        elif reduce == "prod":
            go = g * out
            gx = ops.where(written, go / x, g) if include_self else ops.where(written, 0.0, g)
            gs = ops.gather(go, d, index) / src
        else:
            self_hit = ops.where(x == out, 1.0, 0.0) * keep_self
            self_hit = self_hit.to(g.dtype)
            src_hit = ops.where(src == ops.gather(out, d, index), 1.0, 0.0).to(g.dtype)
            n = self_hit + ops.scatter_add(ops.zeros_like(g), d, index, src_hit)
            gn = g / ops.where(n == 0, 1.0, n)
            gx = gn * self_hit
            gs = ops.gather(gn, d, index) * src_hit
        return (gx if self.needs_input_grad(0) else None,
                gs if self.needs_input_grad(1) else None)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """Reduce ``src`` into ``input`` at ``index`` along ``dim``: 'sum', 'prod', 'mean',
    'amax' or 'amin' (``include_self=False``: written positions ignore input's value)."""
    if reduce not in _REDUCE_UFUNC:
        raise ArgumentError("scatter_reduce(): reduce argument must be either sum, prod, mean, "
                            f"amax or amin, got {reduce!r}")
    x, index, src = _t(input), _t(index), _t(src)
    dev = host.device_of("scatter_reduce", x, index, src)
    d = _dim(dim, x.ndim)
    ia = _check_scatter("scatter_reduce", x, d, index, src)
    sp = _src_part(src, index)
    if sp.dtype is not x.dtype:
        sp = sp.to(x.dtype)
    # float16 / bfloat16 accumulate in float32 and round once, as torch's kernel
    comp = host.compute_dtype(x.dtype)
    floating = x.dtype.is_floating_point
    a_dt = x.dtype.numpy_dtype
    a, s = _arr(x).astype(comp, copy=False), _arr(sp).astype(comp, copy=False)
    fi = _full_index(ia, d)
    written = np.zeros(a.shape, bool)
    written[fi] = True
    uf = _REDUCE_UFUNC[reduce]
    if include_self:
        out = a.copy()
    else:
        ident = {"sum": 0, "mean": 0, "prod": 1,
                 "amax": -np.inf if floating else np.iinfo(comp).min,
                 "amin": np.inf if floating else np.iinfo(comp).max}[reduce]
        out = np.where(written, np.asarray(ident).astype(comp), a)
    uf.at(out, fi, s)
    count = np.ones(a.shape, np.int64) if include_self else np.zeros(a.shape, np.int64)
    np.add.at(count, fi, 1)
    count = np.maximum(count, 1)
    if reduce == "mean":     # torch stores the sum in the input's dtype, then divides it
        out = (out.astype(a_dt).astype(comp) / count).astype(comp) if floating else \
            np.floor_divide(out, count)
    r = _from(out, x.dtype, dev)
    if x.dtype.is_floating_point and _need(x, sp):
        _py_attach(_py_node(ScatterReduceBackward), r, (x, sp), (x, sp, r),
                   (d, _idx(ia, dev), reduce, include_self, _from(written, None, dev),
                    _from(count, x.dtype, dev)))
    return r


@_op("index_add", arity=2)
class IndexAddBackward(PyNode):
    """Backward of index_add: g for the input, alpha * g[index] along dim for the source."""

    def grad_formula_impl(self, g):
        d, index, alpha = self.ctx
        gs = ops.index_select(g, d, index) * alpha if self.needs_input_grad(1) else None
        return (g if self.needs_input_grad(0) else None), gs


def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source`` added at ``index`` along ``dim`` (repeats add up)."""
    x, index, source = _t(input), _t(index), _t(source)
    dev = host.device_of("index_add", x, index, source)
    d = _dim(dim, x.ndim)
    host.check_index("index_add", index)
    if index.ndim > 1:
        raise ShapeError("index_add(): Index is supposed to be a vector")
    ia = _arr(index).reshape(-1)
    if source.ndim and source.shape[d] != ia.size:
        raise ShapeError("index_add_(): Number of indices should be equal to source.size(dim)")
    out = _arr(x).copy()
    sa = _arr(source).astype(out.dtype) * alpha
    np.add.at(np.moveaxis(out, d, 0), ia, np.moveaxis(sa, d, 0) if sa.ndim else sa)
    r = _from(out, x.dtype, dev)
    if x.dtype.is_floating_point and _need(x, source):
        _py_attach(_py_node(IndexAddBackward), r, (x, source), (), (d, _idx(ia, dev), alpha))
    return r


def take_along_dim(input, indices, dim=None, *, axis=None):
    """Values of ``input`` at ``indices`` along ``dim`` (flattened when None); the other
    dims broadcast."""
    dim = _np_kw("take_along_dim", "dim", dim, None, "axis", axis)
    x, i = _t(input), _t(indices)
    if dim is None:
        return ops.gather(ops.reshape(x, (-1,)), 0, ops.reshape(i, (-1,)))
    d = _dim(dim, x.ndim)
    sx, si = list(x.shape), list(i.shape)
    sx[d] = si[d] = 1
    b = np.broadcast_shapes(tuple(sx), tuple(si))
    tx, ti = list(b), list(b)
    tx[d], ti[d] = x.shape[d], i.shape[d]
    return ops.gather(ops.broadcast_to(x, tuple(tx)), d, ops.broadcast_to(i, tuple(ti)))


# -- shape helpers: repeat_interleave, unflatten, meshgrid -----------------------

def repeat_interleave(input, repeats=None, dim=None, *, output_size=None, axis=None):
    """Repeat each element ``repeats`` times (a number or one count per element) along
    ``dim`` (flattened when None). ``repeat_interleave(counts)`` gives the indices."""
    dim = _np_kw("repeat_interleave", "dim", dim, None, "axis", axis)
    x = _t(input)
    if repeats is None:                      # repeat_interleave(repeats): 0,0,1,2,2,...
        r = _arr(x)
        return _idx(np.repeat(np.arange(r.size), r), x.device)
    if dim is None:
        x = ops.reshape(x, (-1,))
        d = 0
    else:
        d = _dim(dim, x.ndim)
    r = _arr(repeats) if isinstance(repeats, Tensor) else np.asarray(repeats)
    n = x.shape[d]
    if r.ndim and r.size != n and r.size != 1:
        raise ShapeError("repeats must have the same size as input along dim")
    idx = np.repeat(np.arange(n), r.reshape(-1) if r.ndim else int(r))
    return ops.index_select(x, d, _idx(idx, x.device))


def unflatten(input, dim, sizes):
    """Split dim ``dim`` into ``sizes`` (one may be -1)."""
    x = _t(input)
    d = _dim(dim, x.ndim)
    sizes = tuple(int(s) for s in sizes)
    n = x.shape[d]
    if not sizes:
        raise ArgumentError("unflatten: sizes must be non-empty")
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        raise ArgumentError(f"unflatten: sizes {list(sizes)} may hold one -1 and otherwise "
                            "sizes >= 0")
    if -1 in sizes:
        known = int(np.prod([s for s in sizes if s != -1]))
        if known == 0:       # -1 next to a 0: any size would do, so the -1 is ambiguous
            raise ShapeError(f"unflatten: sizes {list(sizes)} hold a 0, so the -1 among them "
                             f"cannot be inferred (dim {dim} has size {n})")
        sizes = tuple(n // known if s == -1 else s for s in sizes)
    if int(np.prod(sizes)) != n:
        raise ShapeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size "
                         f"of dim {dim} ({x.shape[d]}) in the input tensor")
    return ops.reshape(x, tuple(x.shape[:d]) + sizes + tuple(x.shape[d + 1:]))


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-d tensors (``indexing`` 'ij' or 'xy')."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    ts = [_t(t) for t in tensors]
    if indexing not in ("ij", "xy"):
        raise ArgumentError(f"meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                            f"received: {indexing!r}")
    for t in ts:
        if t.ndim > 1:
            raise ShapeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list")
    ts = [ops.reshape(t, (-1,)) for t in ts]
    swap = indexing == "xy" and len(ts) >= 2     # 'xy': the first two dims swap roles
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    out = []
    for k, t in enumerate(ts):
        s = [1] * len(ts)
        s[k] = -1
        out.append(ops.expand(ops.reshape(t, tuple(s)), shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


# -- elementwise helpers: isclose, lerp, copysign, floor_divide, div -------------------

def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol |other| element-wise (equal infinities are close)."""
    a, b = _t(input), _t(other)
    dev = host.device_of("isclose", a, b)
    with np.errstate(all="ignore"):
        r = np.isclose(_arr(a), _arr(b), rtol=rtol, atol=atol, equal_nan=equal_nan)
    return _from(r, None, dev)


def lerp(input, end, weight):
    """input + weight (end - input), differentiable in all three; as torch, weights >= 0.5
    are computed from the end (end - (end - input)(1 - weight)), exact at weight 1."""
    x, e = _t(input), _t(end)
    diff = e - x
    if isinstance(weight, Tensor):
        lo = x + weight * diff
        hi = e - diff * (1 - weight)
        return ops.where(abs(weight) < 0.5, lo, hi)
    w = core._float_arg(weight, "lerp", "weight")
    return x + w * diff if abs(w) < 0.5 else e - diff * (1 - w)


def copysign(input, other):
    """|input| with the sign (bit) of ``other``; integers give float32 (as torch). The
    gradient reaches ``input`` (the sign agreement, 0 where input is 0, as torch) and
    ``other`` (zero: the sign is piecewise constant)."""
    x = _t(input)
    if not x.is_floating_point():
        x = x.to(_f32)
    o = _operand(other)
    dev = host.device_of("copysign", x, o)
    xa = _arr(x)
    neg = np.signbit(_arr(o) if isinstance(o, Tensor) else np.asarray(o, np.float64))
    with np.errstate(invalid="ignore"):
        r = np.where(neg, -np.abs(xa), np.abs(xa)).astype(xa.dtype, copy=False)
    out = _from(r, None, dev)
    if _need(x, o):
        ratio = np.where(xa == 0, 0, np.where(neg == np.signbit(xa), 1, -1)).astype(xa.dtype)
        _py_attach(_py_node(CopysignBackward), out, (x, o), (),
                   (tuple(x.shape), tuple(o.shape) if isinstance(o, Tensor) else None,
                    _from(ratio, None, dev)))
    return out


@_op("copysign", arity=2, amp="Promote")
class CopysignBackward(PyNode):
    """Backward of copysign: input gets g times +-1 (whether its sign was kept or
    flipped; 0 at input 0), other gets zeros."""

    def grad_formula_impl(self, g):
        sx, so, ratio = self.ctx
        gx = go = None
        if self.needs_input_grad(0):
            gx = g * (ratio if ratio.dtype is g.dtype else ratio.to(g.dtype))
            lead = gx.ndim - len(sx)
            if lead:
                gx = ops.sum(gx, tuple(range(lead)))
            axes = tuple(i for i, n in enumerate(sx) if n == 1 and gx.shape[i] != 1)
            if axes:
                gx = ops.sum(gx, axes, True)
        if self.needs_input_grad(1):
            go = _from(np.zeros(so, g.dtype.numpy_dtype), None, g.device)
        return gx, go


def _operand(v):
    """A binary op's operand: tensors and numbers as they are, arrays and lists as
    tensors (of their own dtype), as lucid's other binary ops take them."""
    if isinstance(v, (Tensor, int, float, np.bool_, np.number)):
        return v
    return core.tensor(v)


def _kind(dt):
    """0 bool, 1 integer, 2 floating, read from the lucid dtype of NumPy dtype ``dt``
    (bfloat16's NumPy kind is 'V')."""
    d = core.as_dtype(dt)
    return 0 if d.name == "bool_" else (2 if d.is_floating_point else 1)


def _promote_types(a, b):
    """torch.promote_types of two NumPy dtypes (NumPy's differs: int64 with float32 is
    float64 there, float32 here; uint8 with int8 is int16 in both)."""
    kind = _kind
    if a == b:
        return a
    if kind(a) != kind(b):
        return a if kind(a) > kind(b) else b
    if kind(a) == 1:
        return np.promote_types(a, b)          # as torch among lucid's integer types
    if a.itemsize == b.itemsize:               # float16 with bfloat16
        return np.dtype(np.float32)
    return a if a.itemsize > b.itemsize else b


def _result_dtype(a, b):
    """torch's result_type of two operands (tensors with dims > 0-d tensors > numbers)."""
    def cat(v):
        if isinstance(v, Tensor):
            return (2 if v.ndim else 1), v.dtype.numpy_dtype
        if isinstance(v, (bool, np.bool_)):
            return 0, np.dtype(np.bool_)
        if isinstance(v, (int, np.integer)):
            return 0, np.dtype(np.int64)
        return 0, np.dtype(np.float32)

    kind = _kind
    (ca, da), (cb, db) = cat(a), cat(b)
    if ca == cb:
        return _promote_types(da, db)
    hi, lo = (da, db) if ca > cb else (db, da)
    if kind(lo) > kind(hi):
        return lo if kind(lo) == 2 and kind(hi) == 2 else (
            np.dtype(np.float32) if kind(lo) == 2 else lo)
    return hi


def floor_divide(input, other):
    """input // other rounded toward -inf (as Python and torch); integer division by zero
    raises. The result carries no gradient (torch's is not implemented either)."""
    return div(input, other, rounding_mode="floor")


_div_true = core.ops.div


def div(input, other, *, rounding_mode=None):
    """input / other; ``rounding_mode`` 'trunc' or 'floor' rounds the quotient (integers stay
    integers) and gives a result without gradient."""
    if rounding_mode is None:
        return _div_true(input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise ArgumentError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                            f"but found {rounding_mode!r}")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("div(): expected at least one Tensor operand")
    input, other = _operand(input), _operand(other)
    dev = host.device_of("div", input, other)
    dt = _result_dtype(input, other)
    a = _arr(input).astype(dt) if isinstance(input, Tensor) else np.asarray(input).astype(dt)
    b = _arr(other).astype(dt) if isinstance(other, Tensor) else np.asarray(other).astype(dt)
    floating = _kind(dt) == 2
    if not floating:
        if np.any(b == 0) and np.broadcast(a, b).size:     # an empty result divides nothing
            raise ZeroDivisionError(f"div(rounding_mode={rounding_mode!r}): integer division "
                                    "by zero")
        if dt == np.bool_:
            dt = np.dtype(np.int64)
            a, b = a.astype(dt), b.astype(dt)
        q = np.floor_divide(a, b)
        if rounding_mode == "trunc":
            q = q + ((q < 0) & (q * b != a))
    else:
        comp = host.compute_dtype(core.as_dtype(dt))
        with np.errstate(all="ignore"):
            q = np.true_divide(a.astype(comp), b.astype(comp))
            q = np.trunc(q) if rounding_mode == "trunc" else np.floor_divide(a.astype(comp), b.astype(comp))
    r = _from(np.asarray(q).astype(dt), None, dev)
    if floating and _need(input, other):
        _py_attach(_py_node(DivRoundedBackward), r, (input, other), (),
                   tuple(tuple(v.shape) if isinstance(v, Tensor) else None for v in (input, other)))
    return r


@_op("div_rounded", arity=2, amp="Promote")
class DivRoundedBackward(PyNode):
    """Backward of div with rounding_mode (and //): the rounded quotient is piecewise
    constant, so the gradient is zero (as torch's div; its floor_divide has none)."""

    def grad_formula_impl(self, g):
        return tuple(None if s is None or not self.needs_input_grad(k) else
                     _from(np.zeros(s, g.dtype.numpy_dtype), None, g.device)
                     for k, s in enumerate(self.ctx))


def _in_place(op):
    """The in-place variant of ``op``: computed out of place on a copy (so no node saves
    the tensor being overwritten), then written back through ``self[...] = ``, which
    bumps the version counter and records the write."""
    def method(self, *args, **kwargs):
        r = op(ops.clone(self), *args, **kwargs)
        self[...] = r
        return self
    method.__name__ = method.__qualname__ = op.__name__ + "_"
    method.__doc__ = f"In-place {op.__name__}."
    return method


def _m_div(self, other, *, rounding_mode=None):
    return div(self, other, rounding_mode=rounding_mode)


for _fn in (sort, argsort, topk, kthvalue, median, quantile, nanquantile, unique, nonzero,
            masked_select,
            masked_fill, cummax, cummin, logcumsumexp, scatter, scatter_reduce, take_along_dim,
            index_add, repeat_interleave, unflatten, isclose, lerp, copysign, floor_divide,
            argwhere):
    export(_fn, method=True)
for _fn in (unique_consecutive, searchsorted, bucketize, meshgrid, std_mean, var_mean):
    export(_fn)
export(masked_fill_, method=True)
for _fn in (scatter, scatter_reduce, index_add):
    export(_in_place(_fn), _fn.__name__ + "_", public=False, method=True)
export(div, method=_m_div)
core.ops.div = _div_true     # the / operator keeps calling binary's div directly (hot path)
del _fn
