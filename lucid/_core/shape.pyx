"""The shape family: views (reshape, squeeze, transpose, ...), joins (cat, stack),
flip/roll/tile/pad, indexing (__getitem__ / __setitem__) and gather/scatter.

Views share memory and the version counter with their input. Autograd cannot follow
an in-place write through a view back to its base (no view rebasing), so the cases
that would give a wrong gradient raise instead (see core's view bookkeeping):
  * x[i] = v where x is a view with history (or v needs grad and x is a view);
  * a write into x's memory (x[i] = v) that overwrites part of a view of x taken
    earlier with history: that view's grad_fn becomes ViewModifiedBackward, which
    raises if a gradient ever reaches it.
"""
cimport numpy as cnp
import builtins
import operator

import warnings

import numpy as np

from lucid._core.core cimport *
from lucid._core.core import (ArgumentError, LucidError, ShapeError, UnsupportedDTypeError,
                              _mark_view_node, export, ops, register)
from lucid._core.core import schema as ops_schema

cnp.import_array()

cdef DType bool_ = dtype_of_code(DT_BOOL)
cdef DType int32 = dtype_of_code(DT_INT32)
cdef DType int64 = dtype_of_code(DT_INT64)
cdef tuple _NO_EDGE = (None, 0)


# -- small helpers --------------------------------------------------------------------

cdef inline object _cast_t(object t, DType dt):
    if (<Tensor>t)._dtype is not dt:
        return to_dtype(<Tensor>t, dt, False)
    return t


cdef Tensor _zeros_t(tuple shape, DType dt):
    return _wrap(np.zeros(shape, dtype=dt.numpy_dtype), dt)


cdef Tensor _zeros_like_dev(tuple shape, DType dt, Tensor like):
    """Zeros of ``shape`` on ``like``'s device (backward formulas: the gradient's)."""
    if like._mx is not None:
        return _wrap_mx(mlx().zeros(shape, dtype=mx_dtype(dt)), dt)
    return _zeros_t(shape, dt)


# -- the gpu device ---------------------------------------------------------------------
# A gpu tensor's ``_data`` is a shape-only array (zero strides, no memory), so the CPU
# code's NumPy shape logic runs on it unchanged: a view op applied to it validates the
# arguments and gives the result's shape-only array, whose ``base`` marks the result as
# a view exactly as on the CPU. The values come from the matching mlx.core function.
# MLX arrays are immutable, so a gpu "view" is a copy: an in-place write through it
# could never reach its base, and raises instead (_check_gpu_write).

cdef inline Tensor _gview(Tensor x, object arr, object r):
    """The gpu result of a view op: bookkeeping of a view of x (shared version counter,
    ``arr`` a view of x's shape-only array), values ``r`` (an MLX array)."""
    if arr is x._data:             # NumPy gave x's array back (a no-op squeeze)
        arr = (<cnp.ndarray>arr).view()
    cdef Tensor y = _view(x, arr)
    y._mx = r
    return y


cdef object _devices_error(str op):
    return LucidError(
        f"Expected all tensors to be on the same device, but {op}() got tensors on gpu "
        "and cpu; move one with .gpu() or .cpu()")


cdef bint _same_device(list ts, str op) except -1:
    """Whether the tensors ``ts`` are all on the gpu (raises if they mix devices)."""
    cdef bint g = (<Tensor>ts[0])._mx is not None
    for t in ts:
        if ((<Tensor>t)._mx is not None) != g:
            raise _devices_error(op)
    return g


cdef void _check_gpu_write(Tensor t, str what) except *:
    """An in-place write into a gpu tensor replaces its MLX array; through a view it
    could not reach the base (MLX has no shared storage), so it raises."""
    if _is_view(t):
        raise LucidError(
            f"{what} into a view of a gpu tensor (e.g. x[0], x.T, x.reshape(...)) is not "
            "supported: on the gpu device a view holds a copy (MLX arrays are immutable), "
            "so the write could not reach the base tensor. Write through the base "
            "(x[0, i] = v instead of x[0][i] = v), or clone() the view first")


cdef void _check_bounds_mx(object a, object size, int dim, str op) except *:
    """_check_bounds for an MLX index array (one small evaluation: a wrong index must
    raise, never read out of bounds)."""
    m = mlx()
    if a.size == 0:
        return
    lo = m.min(a).item()
    hi = m.max(a).item()
    if lo < 0 or hi >= size:
        bad = lo if lo < 0 else hi
        raise IndexError(f"{op}(): index {bad} is out of bounds for dimension {dim} with size {size}")


cdef tuple _int_tuple(object v, str what):
    """An int or a sequence of ints -> tuple of Python ints (TypeError otherwise)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return (int(v),)
    if isinstance(v, Tensor) and cnp.PyArray_NDIM((<Tensor>v)._data) == 0:
        return (operator.index(v),)
    try:
        it = iter(v)
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {type(v).__name__}") from None
    out = []
    for s in it:
        if isinstance(s, (bool, np.bool_)):
            raise TypeError(f"{what} must be ints, got {s!r}")
        out.append(operator.index(s))
    return tuple(out)


cdef tuple _dim_list(object dims, int ndim, str op):
    """dims (int or sequence) -> tuple of normalized, distinct dims."""
    cdef tuple raw = _int_tuple(dims, "dims")
    out = []
    for d in raw:
        nd = _norm_dim(d, ndim)
        if nd in out:
            raise ShapeError(f"{op}(): dim {nd} appears multiple times in the list of dims")
        out.append(nd)
    return tuple(out)


# -- shape ops ------------------------------------------------------------------

cdef class ReshapeBackward(Node):
    """Backward of reshape/view: the gradient reshaped back to the input's shape."""
    schema_v1 = register("reshape", "KeepInput", 1)
    cdef tuple _in_shape
    cdef readonly bint aliases          # the result is a view of the input (not a copy)

    def grad_formula_impl(self, g):
        return reshape(g, self._in_shape)


def reshape(input, shape):
    """The same data with a new shape (a view sharing memory when possible); -1 infers a size."""
    cdef Tensor x = _as_tensor_dev(input)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        arr = x._data.reshape(tuple(shape))
    except ValueError as e:
        raise ShapeError(f"shape {tuple(shape)} is invalid for input of shape {_shp(x._data)}: {e}") from None
    cdef Tensor y = _wrap(arr, x._dtype)
    if x._mx is not None:      # arr: a view of x's shape-only array (so a view, as above)
        y._mx = mlx().reshape(x._mx, _shp(arr))
    # A copy NumPy made (of a non-contiguous input) can still have a base: its own buffer.
    cdef bint aliases = arr.base is not None and (x._mx is not None or
                                                  np.may_share_memory(arr, x._data))
    if aliases:
        y._vc = x._get_vc()     # a view: in-place writes to either show in both
    cdef ReshapeBackward node
    if grad_enabled() and x._requires_grad:
        node = ReshapeBackward.__new__(ReshapeBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        node.aliases = aliases
        if aliases:
            _record_view(y, node)      # a view: a later write to its memory must invalidate it
        else:
            _set_history(y, node)
    return y


cdef class ExpandBackward(Node):
    """Backward of expand/broadcast_to: the gradient summed back to the input's shape."""
    schema_v1 = register("expand", "KeepInput", 1)
    cdef tuple _in_shape

    def grad_formula_impl(self, g):
        return _sum_to_t(g, self._in_shape)


def expand(input, shape):
    """A read-only broadcast view of ``input`` with ``shape`` (-1 keeps a size)."""
    cdef Tensor x = _as_tensor_dev(input)
    shape = tuple(shape)
    cdef int lead = len(shape) - cnp.PyArray_NDIM(x._data)
    if lead < 0:
        raise ShapeError(f"cannot expand shape {_shp(x._data)} to {shape}: too few dimensions")
    shape = tuple(_shp(x._data)[i - lead] if (s == -1 and i >= lead) else s
                  for i, s in enumerate(shape))
    try:
        arr = np.broadcast_to(x._data, shape)
    except ValueError as e:
        raise ShapeError(f"cannot expand shape {_shp(x._data)} to {shape}") from None
    cdef Tensor y = _wrap(arr, x._dtype)
    if x._mx is not None:
        y._mx = mlx().broadcast_to(x._mx, shape)
    y._vc = x._get_vc()
    cdef ExpandBackward node
    if grad_enabled() and x._requires_grad:
        node = ExpandBackward.__new__(ExpandBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        _record_view(y, node)
    return y


def broadcast_to(input, shape):
    return expand(input, shape)



# -- flatten / squeeze / unsqueeze -----------------------------------------------------

def flatten(input, start_dim=0, end_dim=-1):
    """Flatten dims start_dim..end_dim into one (a view when possible)."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        _norm_dim(start_dim, 0)
        _norm_dim(end_dim, 0)
        return reshape(x, (1,))
    cdef int s = _norm_dim(start_dim, nd)
    cdef int e = _norm_dim(end_dim, nd)
    if s > e:
        raise ShapeError(f"flatten() has invalid args: start_dim ({start_dim}) cannot come "
                         f"after end_dim ({end_dim})")
    if s == e:
        return x
    shape = _shp(x._data)
    n = 1
    for i in range(s, e + 1):
        n *= shape[i]
    return reshape(x, shape[:s] + (n,) + shape[e + 1:])


cdef class SqueezeBackward(Node):
    """Backward of squeeze: the gradient reshaped back to the input's shape."""
    schema_v1 = register("squeeze", "KeepInput", 1)
    cdef tuple _in_shape

    def grad_formula_impl(self, g):
        return reshape(g, self._in_shape)


def squeeze(input, dim=None, *, axis=None):
    """Remove size-1 dims (all of them, or those in ``dim`` that have size 1). A view."""
    dim = _np_alias("squeeze", "dim", dim, None, "axis", axis)
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    shape = _shp(x._data)
    if dim is None:
        axes = tuple(i for i in range(nd) if shape[i] == 1)
    else:
        axes = _dim_list(dim, nd, "squeeze")
        axes = tuple(a for a in axes if nd > 0 and shape[a] == 1)
    arr = np.squeeze(x._data, axis=axes)
    cdef Tensor y = _view(x, arr) if x._mx is None else _gview(
        x, arr, mlx().reshape(x._mx, _shp(arr)))
    cdef SqueezeBackward node
    if grad_enabled() and x._requires_grad:
        node = SqueezeBackward.__new__(SqueezeBackward)
        node._next = (_edge(x),)
        node._in_shape = shape
        _record_view(y, node)
    return y


cdef class UnsqueezeBackward(Node):
    """Backward of unsqueeze: the inserted dim squeezed out of the gradient."""
    schema_v1 = register("unsqueeze", "KeepInput", 1)
    cdef tuple _in_shape
    cdef int _dim

    def grad_formula_impl(self, g):
        return squeeze(g, self._dim)


def unsqueeze(input, dim=None, *, axis=None):
    """Insert a size-1 dim at ``dim`` (in [-ndim-1, ndim]). A view."""
    dim = _np_alias("unsqueeze", "dim", dim, None, "axis", axis)
    if dim is None:
        raise TypeError("unsqueeze() missing required argument 'dim' (or axis)")
    cdef Tensor x = _as_tensor_dev(input)
    cdef int d = _norm_dim(dim, cnp.PyArray_NDIM(x._data) + 1)
    arr = np.expand_dims(x._data, d)
    cdef Tensor y = _view(x, arr) if x._mx is None else _gview(
        x, arr, mlx().expand_dims(x._mx, d))
    cdef UnsqueezeBackward node
    if grad_enabled() and x._requires_grad:
        node = UnsqueezeBackward.__new__(UnsqueezeBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        node._dim = d
        _record_view(y, node)
    return y


# -- transpose / permute ----------------------------------------------------------------

cdef class TransposeBackward(Node):
    """Backward of transpose: the gradient with the same two dims swapped back."""
    schema_v1 = register("transpose", "KeepInput", 1)
    cdef int _d0, _d1

    def grad_formula_impl(self, g):
        return transpose(g, self._d0, self._d1)


def transpose(input, dim0=None, dim1=None):
    """Swap dims dim0 and dim1. A view."""
    if dim0 is None or dim1 is None:
        raise TypeError("transpose() needs the two dims to swap, dim0 and dim1 (as torch); "
                        "for a 2-D tensor t.t() or t.T, to reverse all dims t.permute(...) "
                        "or numpy.transpose(t)")
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    cdef int d0 = _norm_dim(dim0, nd)
    cdef int d1 = _norm_dim(dim1, nd)
    arr = np.swapaxes(x._data, d0, d1) if nd > 0 else x._data.view()
    cdef Tensor y = _view(x, arr) if x._mx is None else _gview(
        x, arr, mlx().swapaxes(x._mx, d0, d1) if nd > 0 else x._mx)
    cdef TransposeBackward node
    if grad_enabled() and x._requires_grad:
        node = TransposeBackward.__new__(TransposeBackward)
        node._next = (_edge(x),)
        node._d0 = d0
        node._d1 = d1
        _record_view(y, node)
    return y


cdef class PermuteBackward(Node):
    """Backward of permute: the gradient permuted by the inverse permutation."""
    schema_v1 = register("permute", "KeepInput", 1)
    cdef tuple _inv

    def grad_formula_impl(self, g):
        return permute(g, self._inv)


cdef Tensor _permute(Tensor x, tuple perm):
    arr = x._data.transpose(perm)
    cdef Tensor y = _view(x, arr) if x._mx is None else _gview(
        x, arr, mlx().transpose(x._mx, perm))
    cdef PermuteBackward node
    if grad_enabled() and x._requires_grad:
        node = PermuteBackward.__new__(PermuteBackward)
        node._next = (_edge(x),)
        inv = [0] * len(perm)
        for i in range(len(perm)):
            inv[perm[i]] = i
        node._inv = tuple(inv)
        _record_view(y, node)
    return y


def permute(input, *dims):
    """Reorder the dims: ``permute(x, 2, 0, 1)`` or ``permute(x, (2, 0, 1))``. A view."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if len(dims) == 0:
        raise TypeError("permute() missing required argument 'dims'")
    if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
        dims = tuple(dims[0])
    perm = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)):
            raise TypeError(f"permute(): dims must be ints, got {d!r}")
        perm.append(_norm_dim(d, nd))
    if len(perm) != nd:
        raise ShapeError(f"permute(): number of dims don't match: the input has {nd} dims "
                         f"but {len(perm)} were given")
    if len(set(perm)) != len(perm):
        raise ShapeError(f"permute(): repeated dim in {tuple(dims)}")
    return _permute(x, tuple(perm))


def _reverse_dims(Tensor self not None):
    """``x.T``: all dims reversed (as NumPy's .T). A view."""
    cdef int nd = cnp.PyArray_NDIM(self._data)
    return _permute(self, tuple(range(nd - 1, -1, -1)))


# -- cat / stack --------------------------------------------------------------------------

cdef list _tensor_list(object tensors, str op):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}() expects a sequence of tensors, got a single Tensor")
    try:
        ts = [_as_tensor_dev(t) for t in tensors]
    except TypeError:
        raise TypeError(f"{op}() expects a sequence of tensors, got {type(tensors).__name__}") from None
    if not ts:
        raise ShapeError(f"{op}() expects a non-empty sequence of tensors")
    _same_device(ts, op)
    return ts


cdef DType _promote_list(list ts):
    cdef int code = (<Tensor>ts[0])._dtype.code
    for t in ts:
        code = _promote2(code, (<Tensor>t)._dtype.code)
    return dtype_of_code(code)


cdef class CatBackward(Node):
    """Backward of cat: each input gets its slice of the gradient (cast to its dtype)."""
    schema_v1 = register("cat", "Promote", -1)
    cdef int _dim
    cdef list _offsets, _sizes, _dtypes, _skipped

    def grad_formula_impl(self, g):
        out = []
        for i in range(len(self._sizes)):
            if self._next[i][0] is None:
                out.append(None)
            elif self._skipped[i]:
                out.append(_zeros_like_dev((0,), <DType>self._dtypes[i], <Tensor>g))
            else:
                idx = (slice(None),) * self._dim + (
                    slice(self._offsets[i], self._offsets[i] + self._sizes[i]),)
                out.append(_cast_t(_getitem(g, idx), <DType>self._dtypes[i]))
        return tuple(out)


def cat(tensors, dim=0, *, axis=None):
    """Concatenate tensors along an existing dim (dtypes promoted). 1-d empty tensors
    are skipped, as in PyTorch."""
    dim = _np_alias("cat", "dim", dim, 0, "axis", axis)
    cdef list ts = _tensor_list(tensors, "cat")
    cdef Tensor t, ref = None
    cdef list skipped = []
    for t in ts:
        skip = cnp.PyArray_NDIM(t._data) == 1 and _shp(t._data)[0] == 0
        skipped.append(skip)
        if not skip and ref is None:
            ref = t
    if ref is None:
        ref = <Tensor>ts[0]
        skipped = [False] * len(ts)
    cdef int nd = cnp.PyArray_NDIM(ref._data)
    if nd == 0:
        raise ShapeError("cat(): zero-dimensional tensor cannot be concatenated")
    cdef int d = _norm_dim(dim, nd)
    rshape = _shp(ref._data)
    cdef DType dt = _promote_list(ts)
    arrays = []
    offsets = []
    sizes = []
    off = 0
    for i in range(len(ts)):
        t = <Tensor>ts[i]
        s = _shp(t._data)
        offsets.append(off)
        if skipped[i]:
            sizes.append(0)
            continue
        if len(s) != nd:
            raise ShapeError(f"cat(): tensors must have the same number of dims: got {len(s)} "
                             f"for tensor {i} and {nd} for tensor 0")
        for k in range(nd):
            if k != d and s[k] != rshape[k]:
                raise ShapeError(f"cat(): sizes of tensors must match except in dimension {d}; "
                                 f"expected size {rshape[k]} but got size {s[k]} for tensor "
                                 f"number {i} in dimension {k}")
        arrays.append(_store(t._data, dt) if t._mx is None else _mx_of(t, dt))
        sizes.append(s[d])
        off += s[d]
    cdef Tensor y
    if ref._mx is not None:
        y = _wrap_mx(mlx().concatenate(arrays, axis=d), dt)
    else:
        y = _wrap(_as_ndarray(np.concatenate(arrays, axis=d)), dt)
    cdef CatBackward node
    if grad_enabled() and dt.is_floating_point and builtins.any(
            (<Tensor>t)._requires_grad for t in ts):
        node = CatBackward.__new__(CatBackward)
        node._next = tuple(_edge(<Tensor>t) for t in ts)
        node._dim = d
        node._offsets = offsets
        node._sizes = sizes
        node._dtypes = [(<Tensor>t)._dtype for t in ts]
        node._skipped = skipped
        _set_history(y, node)
    return y


def concat(tensors, dim=0, *, axis=None):
    dim = _np_alias("concat", "dim", dim, 0, "axis", axis)
    return cat(tensors, dim)


cdef class StackBackward(Node):
    """Backward of stack: input i gets the gradient's index i along the new dim."""
    schema_v1 = register("stack", "Promote", -1)
    cdef int _dim
    cdef list _dtypes

    def grad_formula_impl(self, g):
        out = []
        for i in range(len(self._dtypes)):
            if self._next[i][0] is None:
                out.append(None)
            else:
                out.append(_cast_t(_getitem(g, (slice(None),) * self._dim + (i,)),
                                   <DType>self._dtypes[i]))
        return tuple(out)


def stack(tensors, dim=0, *, axis=None):
    """Join same-shaped tensors along a new dim (dtypes promoted)."""
    dim = _np_alias("stack", "dim", dim, 0, "axis", axis)
    cdef list ts = _tensor_list(tensors, "stack")
    cdef Tensor t0 = <Tensor>ts[0]
    shape = _shp(t0._data)
    cdef int d = _norm_dim(dim, len(shape) + 1)
    for i in range(len(ts)):
        if _shp((<Tensor>ts[i])._data) != shape:
            raise ShapeError(f"stack expects each tensor to be equal size, but got {shape} at "
                             f"entry 0 and {_shp((<Tensor>ts[i])._data)} at entry {i}")
    cdef DType dt = _promote_list(ts)
    cdef Tensor y
    if t0._mx is not None:
        y = _wrap_mx(mlx().stack([_mx_of(t, dt) for t in ts], axis=d), dt)
    else:
        y = _wrap(_as_ndarray(np.stack([_store((<Tensor>t)._data, dt) for t in ts], axis=d)), dt)
    cdef StackBackward node
    if grad_enabled() and dt.is_floating_point and builtins.any(
            (<Tensor>t)._requires_grad for t in ts):
        node = StackBackward.__new__(StackBackward)
        node._next = tuple(_edge(<Tensor>t) for t in ts)
        node._dim = d
        node._dtypes = [(<Tensor>t)._dtype for t in ts]
        _set_history(y, node)
    return y


# -- narrow / split / chunk (views through basic indexing) -------------------------------

def narrow(input, dim, start, length):
    """``input`` restricted to [start, start + length) along ``dim``. A view."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        raise ShapeError("narrow() cannot be applied to a 0-dim tensor")
    cdef int d = _norm_dim(dim, nd)
    size = _shp(x._data)[d]
    start = operator.index(start)
    length = operator.index(length)
    if start < -size or start > size:
        raise IndexError(f"narrow(): start ({start}) out of range for dimension {d} of size {size}")
    if start < 0:
        start += size
    if length < 0 or start + length > size:
        raise ShapeError(f"narrow(): start ({start}) + length ({length}) exceeds dimension "
                         f"size ({size})")
    return _getitem(x, (slice(None),) * d + (slice(start, start + length),))


def split(tensor, split_size_or_sections, dim=0, *, axis=None):
    """Split into pieces of ``split_size`` (the last may be smaller) or of the given
    section sizes along ``dim``. Returns a tuple of views."""
    dim = _np_alias("split", "dim", dim, 0, "axis", axis)
    cdef Tensor x = _as_tensor_dev(tensor)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        raise ShapeError("split() expects at least a 1-dimensional tensor")
    cdef int d = _norm_dim(dim, nd)
    size = _shp(x._data)[d]
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(
            split_size_or_sections, (bool, np.bool_)):
        step = int(split_size_or_sections)
        if step < 0:
            raise ArgumentError(f"split expects split_size be non-negative, but got {step}")
        if step == 0:
            if size != 0:
                raise ArgumentError(f"split_size can only be 0 if dimension size is 0, got {size}")
            sections = [0]
        else:
            sections = [builtins.min(step, size - s) for s in range(0, size, step)] or [0]
    else:
        sections = list(_int_tuple(split_size_or_sections, "split sections"))
        if builtins.any(s < 0 for s in sections) or builtins.sum(sections) != size:
            raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                             f"(input tensor's size at dimension {d}), but got {sections}")
    out = []
    off = 0
    for s in sections:
        out.append(_getitem(x, (slice(None),) * d + (slice(off, off + s),)))
        off += s
    return tuple(out)


def chunk(input, chunks, dim=0, *, axis=None):
    """Split into ``chunks`` pieces of ceil(size / chunks) (possibly fewer pieces)."""
    dim = _np_alias("chunk", "dim", dim, 0, "axis", axis)
    cdef Tensor x = _as_tensor_dev(input)
    chunks = operator.index(chunks)
    if chunks <= 0:
        raise ArgumentError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        raise ShapeError("chunk() expects at least a 1-dimensional tensor")
    size = _shp(x._data)[_norm_dim(dim, nd)]
    return split(x, (size + chunks - 1) // chunks, dim)


def select(input, dim, index):
    """The slice at ``index`` along ``dim``, which is removed (``x.select(1, i)`` is
    ``x[:, i]``). A view."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor")
    cdef int d = _norm_dim(dim, nd)
    if isinstance(index, (bool, np.bool_)):
        raise TypeError(f"select(): index must be an int, got {index!r}")
    size = _shp(x._data)[d]
    i = operator.index(index)
    if not -size <= i < size:
        raise IndexError(f"select(): index {i} out of range for tensor of size {size} at "
                         f"dimension {d}")
    return _getitem(x, (slice(None),) * d + (i,))


def unbind(input, dim=0):
    """The slices along ``dim``, each without that dim: a tuple of views."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        raise IndexError("unbind() cannot be applied to a 0-dim tensor")
    cdef int d = _norm_dim(dim, nd)
    return tuple(_getitem(x, (slice(None),) * d + (i,)) for i in range(_shp(x._data)[d]))


def movedim(input, source, destination):
    """Dims ``source`` (an int or a sequence) moved to positions ``destination``, the
    others keeping their order. A view."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    src = _int_tuple(source, "movedim(): source")
    dst = _int_tuple(destination, "movedim(): destination")
    if len(src) != len(dst):
        raise ArgumentError(f"movedim(): source {list(src)} and destination {list(dst)} must "
                            "name the same number of dims")
    src = tuple(_norm_dim(d, nd) for d in src)
    dst = tuple(_norm_dim(d, nd) for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ArgumentError(f"movedim(): repeated dim in source {list(src)} or destination "
                            f"{list(dst)}")
    perm = [-1] * nd
    for s_, d_ in zip(src, dst):
        perm[d_] = s_
    rest = iter(d_ for d_ in range(nd) if d_ not in src)
    return _permute(x, tuple(p if p >= 0 else next(rest) for p in perm))


def moveaxis(input, source, destination):
    return movedim(input, source, destination)


def swapaxes(input, axis0, axis1):
    return transpose(input, axis0, axis1)


def swapdims(input, dim0, dim1):
    return transpose(input, dim0, dim1)


# -- unfold: sliding windows --------------------------------------------------------------

cdef class UnfoldBackward(Node):
    """Backward of unfold: each window's gradient added back where the window was read
    (windows overlap when step < size)."""
    schema_v1 = register("unfold", "KeepInput", 1)
    cdef tuple _in_shape
    cdef int _dim, _size, _step

    def grad_formula_impl(self, g):
        cdef int d = self._dim
        shape = self._in_shape
        if len(shape) == 0:
            return reshape(g, ()) if self._size else _zeros_like_dev((), (<Tensor>g)._dtype, g)
        nd = len(shape)
        nw = _shp((<Tensor>g)._data)[d]
        # windows back next to their dim, then one run of nw * size entries along it
        g = movedim(g, nd, d + 1)
        g = reshape(g, shape[:d] + (nw * self._size,) + shape[d + 1:])
        idx = (np.arange(nw)[:, None] * self._step + np.arange(self._size)).reshape(-1)
        if (<Tensor>g)._mx is not None:
            idx = mlx().array(idx)
        cdef Tensor z = _zeros_like_dev(shape, (<Tensor>g)._dtype, <Tensor>g)
        _index_put(z, (slice(None),) * d + (idx,), True, g, True)
        return z


def unfold(input, dimension, size, step):
    """Windows of ``size`` entries every ``step`` along ``dimension``: that dim becomes the
    window count and a last dim of ``size`` is appended. A view; overlapping windows
    (step < size) are read-only, since one write would land in several windows."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    cdef int d = _norm_dim(dimension, nd)
    for name, v in (("size", size), ("step", step)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"unfold(): argument '{name}' must be an int, got "
                            f"{type(v).__name__}")
    n = _shp(x._data)[d] if nd else 1
    if not 0 <= size <= n:
        raise ShapeError(f"unfold(): maximum size for tensor at dimension {d} is {n} but size "
                         f"is {size}")
    if step <= 0:
        raise ArgumentError(f"unfold(): step is {step} but must be > 0")
    if nd == 0:        # as torch: a 0-d tensor unfolds to its first `size` (0 or 1) entries
        arr = x._data.reshape(1)[:size]
    else:
        arr = np.lib.stride_tricks.sliding_window_view(x._data, size, axis=d,
                                                       writeable=step >= size)
        arr = arr[(slice(None),) * d + (slice(None, None, step),)]
    cdef Tensor y
    if x._mx is None:
        y = _view(x, arr)
    elif nd == 0:
        y = _gview(x, arr, x._mx.reshape(1)[:size])
    else:
        nw = _shp(arr)[d]
        idx = (np.arange(nw)[:, None] * step + np.arange(size)).reshape(-1)
        r = mlx().take(x._mx, mlx().array(idx), axis=d)
        r = r.reshape(_shp(x._data)[:d] + (nw, size) + _shp(x._data)[d + 1:])
        y = _gview(x, arr, mlx().moveaxis(r, d + 1, -1))
    cdef UnfoldBackward node
    if grad_enabled() and x._requires_grad:
        node = UnfoldBackward.__new__(UnfoldBackward)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        node._dim = d
        node._size = size
        node._step = step
        _record_view(y, node)
    return y


# -- flip / roll / tile / repeat ----------------------------------------------------------

cdef class FlipBackward(Node):
    """Backward of flip: the gradient flipped along the same dims."""
    schema_v1 = register("flip", "KeepInput", 1)
    cdef tuple _dims

    def grad_formula_impl(self, g):
        return flip(g, self._dims)


def flip(input, dims=None, *, axis=None):
    """Reverse the order of elements along ``dims`` (a copy, as in PyTorch)."""
    dims = _np_alias("flip", "dims", dims, None, "axis", axis)
    if dims is None:
        raise TypeError("flip() missing required argument 'dims' (or axis)")
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    cdef tuple axes = _dim_list(dims, nd, "flip")
    if nd == 0:
        axes = ()
    cdef Tensor y
    if x._mx is not None:
        y = _wrap_mx(mlx().flip(x._mx, axes) if axes else x._mx, x._dtype)
    else:
        arr = np.flip(x._data, axes) if axes else x._data
        y = _wrap(np.array(arr, copy=True, order="C"), x._dtype)
    cdef FlipBackward node
    if grad_enabled() and x._requires_grad:
        node = FlipBackward.__new__(FlipBackward)
        node._next = (_edge(x),)
        node._dims = axes
        _set_history(y, node)
    return y


cdef class RollBackward(Node):
    """Backward of roll: the gradient rolled back by the negated shifts."""
    schema_v1 = register("roll", "KeepInput", 1)
    cdef tuple _shifts
    cdef object _dims

    def grad_formula_impl(self, g):
        return roll(g, tuple(-s for s in self._shifts), self._dims)


def roll(input, shifts, dims=None, *, axis=None):
    """Roll elements along ``dims`` (of the flattened tensor if dims is None)."""
    dims = _np_alias("roll", "dims", dims, None, "axis", axis)
    cdef Tensor x = _as_tensor_dev(input)
    cdef int nd = cnp.PyArray_NDIM(x._data)
    cdef tuple sh = _int_tuple(shifts, "shifts")
    cdef object axes = None
    cdef bint gpu = x._mx is not None
    if dims is None:
        if len(sh) != 1:
            raise ShapeError(f"roll(): with dims=None, shifts must be a single int, got {sh}")
        if gpu:        # MLX rolls the flattened array too, keeping the shape
            arr = mlx().roll(x._mx, sh[0]) if nd > 0 else x._mx
        else:
            arr = np.roll(x._data, sh[0])
    else:
        axes = tuple(_norm_dim(d, nd) for d in _int_tuple(dims, "dims"))
        if len(axes) != len(sh):
            raise ShapeError(f"roll(): shifts and dims must have the same length, got "
                             f"{len(sh)} and {len(axes)}")
        if gpu:
            arr = mlx().roll(x._mx, sh, axes) if nd > 0 and axes else x._mx
        else:
            arr = np.roll(x._data, sh, axes) if nd > 0 else np.array(x._data, copy=True)
    cdef Tensor y = _wrap_mx(arr, x._dtype) if gpu else _wrap(_as_ndarray(arr), x._dtype)
    cdef RollBackward node
    if grad_enabled() and x._requires_grad:
        node = RollBackward.__new__(RollBackward)
        node._next = (_edge(x),)
        node._shifts = sh
        node._dims = axes if nd > 0 or axes is None else None
        _set_history(y, node)
    return y


cdef class TileBackward(Node):
    """Backward of tile: the gradient summed over the copies."""
    schema_v1 = register("tile", "KeepInput", 1)
    cdef tuple _in_shape, _reps

    cdef tuple _layout(self):
        cdef int n = len(self._reps)
        aligned = (1,) * (n - len(self._in_shape)) + self._in_shape
        inter = []
        for i in range(n):
            inter.append(self._reps[i])
            inter.append(aligned[i])
        return tuple(inter), tuple(range(0, 2 * n, 2))

    def grad_formula_impl(self, g):
        inter, axes = self._layout()
        r = reshape(g, inter)
        if axes:
            r = ops.sum(r, axes)
        return reshape(r, self._in_shape)


cdef class RepeatBackward(TileBackward):
    """Backward of repeat (Tensor.repeat): the gradient summed over the copies."""
    schema_v1 = register("repeat", "KeepInput", 1)


cdef Tensor _tile(Tensor x, tuple reps, type node_cls):
    for r in reps:
        if r < 0:
            raise ShapeError(f"repeats can not be negative, got {reps}")
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if len(reps) < nd:
        reps = (1,) * (nd - len(reps)) + reps
    cdef Tensor y
    if x._mx is not None:
        y = _wrap_mx(mlx().tile(x._mx, reps) if reps else x._mx, x._dtype)
    else:
        y = _wrap(_as_ndarray(np.tile(x._data, reps)), x._dtype)
    cdef TileBackward node
    if grad_enabled() and x._requires_grad:
        node = <TileBackward>node_cls.__new__(node_cls)
        node._next = (_edge(x),)
        node._in_shape = _shp(x._data)
        node._reps = reps
        _set_history(y, node)
    return y


def tile(input, dims):
    """Repeat the tensor ``dims[i]`` times along dim i (1s prepended to the shorter of
    dims and the shape)."""
    cdef Tensor x = _as_tensor_dev(input)
    return _tile(x, _int_tuple(dims, "dims"), TileBackward)


def repeat(input, *sizes):
    """Tensor.repeat: like tile, but needs at least as many sizes as the input has dims."""
    cdef Tensor x = _as_tensor_dev(input)
    if len(sizes) == 0:
        raise TypeError("repeat() missing required argument 'sizes'")
    if len(sizes) == 1 and not isinstance(sizes[0], (int, np.integer)):
        sizes = sizes[0]
    cdef tuple reps = _int_tuple(sizes, "sizes")
    if len(reps) < cnp.PyArray_NDIM(x._data):
        raise ShapeError("Number of dimensions of repeat dims can not be smaller than number "
                         f"of dimensions of tensor ({len(reps)} < {cnp.PyArray_NDIM(x._data)})")
    return _tile(x, reps, RepeatBackward)


# -- pad ----------------------------------------------------------------------------------

cdef object _pad_constant(object a, list lr, object value):
    """``a`` padded (or cropped, for negative amounts) by lr[d] = (before, after) per dim."""
    shape = np.shape(a)
    out_shape = []
    src = []
    dst = []
    for d in range(len(shape)):
        l, r = lr[d]
        n = shape[d]
        m = n + l + r
        if m < 0:
            raise ShapeError(f"pad(): the padded size of dimension {d} would be {m} "
                             f"(size {n}, padding ({l}, {r}))")
        s0 = builtins.max(-l, 0)
        s1 = n - builtins.max(-r, 0)
        length = builtins.max(s1 - s0, 0)
        d0 = builtins.max(l, 0)
        src.append(slice(s0, s0 + length))
        dst.append(slice(d0, d0 + length))
        out_shape.append(m)
    out = np.full(tuple(out_shape), value, dtype=(<cnp.ndarray>a).dtype)
    out[tuple(dst)] = (<cnp.ndarray>a)[tuple(src)]
    return out


cdef object _pad_constant_mx(object a, list lr, object value, DType dt):
    """_pad_constant on an MLX array: crop the negative amounts (a slice), then mx.pad
    the positive ones with ``value`` (as NumPy's fill would, cast to the dtype)."""
    m = mlx()
    shape = a.shape
    crop = []
    pos = []
    for d in range(len(shape)):
        l, r = lr[d]
        n = shape[d]
        if n + l + r < 0:
            raise ShapeError(f"pad(): the padded size of dimension {d} would be {n + l + r} "
                             f"(size {n}, padding ({l}, {r}))")
        s0 = builtins.max(-l, 0)
        s1 = builtins.max(n - builtins.max(-r, 0), s0)
        crop.append(slice(s0, s1))
        pos.append((builtins.max(l, 0), builtins.max(r, 0)))
    if builtins.any(c.start != 0 or c.stop != shape[i] for i, c in enumerate(crop)):
        a = a[tuple(crop)]
    if builtins.any(p != (0, 0) for p in pos):
        fill = np.full((), value, dtype=dt.numpy_dtype)      # NumPy's cast of the value
        a = m.pad(a, pos, constant_values=m.array(fill, dtype=mx_dtype(dt)))
    return a


cdef list _pad_pairs(tuple pad, int nd):
    if len(pad) % 2 != 0:
        raise ShapeError(f"pad(): padding length must be even, got {len(pad)}")
    if len(pad) // 2 > nd:
        raise ShapeError(f"pad(): padding length {len(pad)} is too large for a "
                         f"{nd}-dimensional input")
    lr = [(0, 0)] * nd
    for i in range(len(pad) // 2):
        lr[nd - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return lr


cdef class PadBackward(Node):
    """Backward of constant pad: the gradient cropped by the same amounts (negated pad)."""
    schema_v1 = register("pad", "KeepInput", 1)
    cdef tuple _neg_pad

    def grad_formula_impl(self, g):
        return pad(g, self._neg_pad)


_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def pad(input, pad, mode="constant", value=0):
    """torch.nn.functional.pad: ``pad`` = (last-dim before, last-dim after, next-to-last
    before, ...). Modes constant (negative amounts crop), reflect, replicate, circular."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef tuple p = _int_tuple(pad, "pad")
    cdef int nd = cnp.PyArray_NDIM(x._data)
    cdef list lr = _pad_pairs(p, nd)
    cdef Tensor y
    cdef PadBackward node
    if mode == "constant":
        if value is None:
            value = 0
        if x._mx is not None:
            y = _wrap_mx(_pad_constant_mx(x._mx, lr, value, x._dtype), x._dtype)
        else:
            y = _wrap(_as_ndarray(_pad_constant(x._data, lr, value)), x._dtype)
        if grad_enabled() and x._requires_grad:
            node = PadBackward.__new__(PadBackward)
            node._next = (_edge(x),)
            node._neg_pad = tuple(-v for v in p)
            _set_history(y, node)
        return y
    if mode not in _PAD_MODES:
        raise ArgumentError(f"pad(): unknown padding mode {mode!r}; expected 'constant', "
                            "'reflect', 'replicate' or 'circular'")
    if builtins.any(v < 0 for v in p):
        raise ShapeError(f"pad(): negative padding is only supported in constant mode, got {p}")
    # Non-constant modes: an index map into the flattened input, applied by advanced
    # indexing (so the gradient, including second order, is IndexBackward's).
    shape = _shp(x._data)
    idx_map = np.arange(cnp.PyArray_SIZE(x._data), dtype=np.int64).reshape(shape)
    try:
        idx_map = np.pad(idx_map, lr, mode=_PAD_MODES[mode])
    except ValueError as e:
        raise ShapeError(f"pad(): {mode} padding {p} is invalid for input of shape {shape}: {e}") from None
    return _getitem(reshape(x, (-1,)), idx_map)


# -- indexing -----------------------------------------------------------------------------

cdef inline bint _is_mx(object v):
    """An mlx.core array (a gpu index, as kept in an index converted for the gpu)."""
    return type(v).__module__.startswith("mlx")


cdef void _warn_uint8_mask() except *:
    warnings.warn("indexing with dtype lucid.uint8 is deprecated (a uint8 index is a mask, "
                  "as in PyTorch); use a lucid.bool_ mask instead", UserWarning, stacklevel=1)


cdef object _index_component(object it):
    """One index entry -> what NumPy indexing takes; sets nothing. Returns (value, advanced)."""
    if it is None or it is Ellipsis or isinstance(it, slice):
        return it, False
    if isinstance(it, (bool, np.bool_)):
        return bool(it), True
    if isinstance(it, (int, np.integer)):
        return int(it), False
    if _is_mx(it):          # already converted (a node's saved index)
        return it, True
    cdef int code = -1
    if isinstance(it, Tensor):
        code = (<Tensor>it)._dtype.code
        if (code == DT_INT8 or code == DT_INT16) and cnp.PyArray_NDIM((<Tensor>it)._data) > 0:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors, "
                             f"got dtype {(<Tensor>it)._dtype}")
        if code == DT_UINT8:
            _warn_uint8_mask()
    if isinstance(it, Tensor) and (<Tensor>it)._mx is not None:
        # A gpu index stays an MLX array (its values are never read on the host, except
        # a 0-d integer, which is a plain int as on the CPU).
        if not (<Tensor>it)._dtype.is_floating_point:
            if code == DT_UINT8:
                return (<Tensor>it)._mx != 0, True
            if (<Tensor>it)._dtype is not bool_ and cnp.PyArray_NDIM((<Tensor>it)._data) == 0:
                return int((<Tensor>it)._mx.item()), False
            return (<Tensor>it)._mx, True
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors, got "
                         f"dtype {(<Tensor>it)._dtype}")
    if isinstance(it, Tensor):
        a = (<Tensor>it)._data
    elif isinstance(it, (list, tuple, np.ndarray)):      # (a tuple inside an index: as a list)
        try:
            if isinstance(it, (list, tuple)) and _contains_tensor(it):
                it = _tensors_to_nested(it)
            a = np.asarray(it)
        except (ShapeError, ValueError, RecursionError) as e:
            raise IndexError(f"this list is not a valid index: {e}") from None
        if isinstance(it, (list, tuple)) and a.size == 0:
            a = a.astype(np.int64)
    else:
        try:
            return operator.index(it), False
        except TypeError:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean "
                f"tensors/arrays are valid indices, got {type(it).__name__}") from None
    kind = a.dtype.kind
    if a.dtype == np.uint8:          # as PyTorch: a uint8 index is a mask
        if code < 0:
            _warn_uint8_mask()
        kind = "b"
        a = a != 0
    if kind == "b":
        if a.ndim == 0:
            return bool(a), True
        return np.array(a, copy=True), True
    if kind in "iu":
        if a.ndim == 0 and isinstance(it, Tensor):
            return int(a), False
        return np.array(a, dtype=np.int64, copy=True), True
    raise IndexError("tensors used as indices must be long, int or bool tensors, got "
                     f"dtype {a.dtype}")


cdef tuple _host_masks(Tensor self, tuple idx):
    """For a gpu tensor: gpu boolean masks in ``idx`` evaluated to host masks (the result's
    size depends on their values, as torch evaluates a CUDA mask); the host-mask path
    then applies np.nonzero, as NumPy does."""
    if self._mx is None:
        return idx
    m = mlx()
    if not any(_is_mx(v) and v.dtype == m.bool_ for v in idx):
        return idx
    return tuple(np.array(v, dtype=np.bool_) if _is_mx(v) and v.dtype == m.bool_ else v
                 for v in idx)


cdef tuple _convert_index(object index):
    """A user index -> (NumPy index tuple, advanced?). Basic indices get a trailing
    Ellipsis so that NumPy returns a view even for an all-integer index."""
    if not isinstance(index, tuple):
        index = (index,)
    cdef list out = []
    cdef bint adv = False, ell = False
    for it in index:
        v, a = _index_component(it)
        if v is Ellipsis:
            ell = True
        adv = adv or a
        out.append(v)
    if not adv and not ell:
        out.append(Ellipsis)
    return tuple(out), adv


cdef inline int _adv_kind(object v):
    """What an entry of a converted index is, for the placement of advanced dims:
    0 basic (slice, None, Ellipsis), 1 an integer, 2 an index or mask array, a bool."""
    if v is None or v is Ellipsis or isinstance(v, slice):
        return 0
    if isinstance(v, int) and not isinstance(v, bool):
        return 1
    return 2


cdef object _torch_order(tuple idx, int nd):
    """The transpose that takes NumPy's result of ``idx`` to PyTorch's, or None when they
    agree. Both put the dims of the advanced indices (index arrays, masks) where the
    first one stands if they are adjacent, else first. They differ in what adjacency
    means: NumPy counts integers as advanced indices and any Ellipsis as a separator;
    PyTorch applies integers first (a select, which removes the dim) and an Ellipsis
    that stands for no dim separates nothing. So x[1, :, d] puts d's dims first in
    NumPy and after the slice's in PyTorch."""
    cdef int used = 0, nbasic = 0, k, r = 0
    cdef int np_first = -1, np_last = -1, np_pos = 0, t_pos = 0, n_t = 0
    cdef bint np_adj = True, t_adj = True, t_gap = False
    if len(idx) < 2:
        return None          # one entry: nothing for the two rules to place differently
    for v in idx:
        if v is None or v is Ellipsis:
            continue
        used += (<cnp.ndarray>v).ndim if (isinstance(v, np.ndarray) and
                                          (<cnp.ndarray>v).dtype.kind == "b") else (
            0 if isinstance(v, bool) else 1)
    cdef int ell = nd - used
    if ell < 0:
        return None         # too many indices: the indexing itself raises
    cdef int i = 0
    for v in idx:
        k = _adv_kind(v)
        if k == 0:
            w = ell if v is Ellipsis else 1          # the output dims this entry makes
            if w > 0 and n_t > 0:
                t_gap = True
            nbasic += w
        else:
            if np_first < 0:
                np_first, np_pos = i, nbasic
            elif np_last != i - 1:
                np_adj = False
            np_last = i
            if k == 2:
                if n_t == 0:
                    t_pos = nbasic
                elif t_gap:
                    t_adj = False
                n_t += 1
                if isinstance(v, bool):
                    r = builtins.max(r, 1)
                elif isinstance(v, np.ndarray) and (<cnp.ndarray>v).dtype.kind == "b":
                    r = builtins.max(r, 1)
                else:
                    r = builtins.max(r, <int>v.ndim)
        i += 1
    if n_t == 0:
        return None
    if not builtins.any([v is Ellipsis for v in idx]):
        nbasic += ell           # the dims after the last entry, as if by slices
    if not np_adj:
        np_pos = 0
    if not t_adj:
        t_pos = 0
    if np_pos == t_pos:
        return None
    np_lab = list(range(np_pos)) + [-1 - j for j in range(r)] + list(range(np_pos, nbasic))
    t_lab = list(range(t_pos)) + [-1 - j for j in range(r)] + list(range(t_pos, nbasic))
    return tuple([np_lab.index(lab) for lab in t_lab])


cdef tuple _no_ellipsis(tuple idx, int nd):
    """idx with its Ellipsis written out as slices. MLX reads an Ellipsis that stands for
    no dim as PyTorch does, NumPy as a separator; written out, MLX reads as NumPy does."""
    cdef int used = 0
    for v in idx:
        if v is None or v is Ellipsis:
            continue
        used += (<cnp.ndarray>v).ndim if (isinstance(v, np.ndarray) and
                                          (<cnp.ndarray>v).dtype.kind == "b") else (
            0 if isinstance(v, bool) else 1)
    out = []
    for v in idx:
        if v is Ellipsis:
            out.extend([slice(None)] * builtins.max(nd - used, 0))
        else:
            out.append(v)
    return tuple(out)


cdef void _check_host_index(tuple idx) except *:
    """A cpu tensor can't be indexed with a gpu tensor (as PyTorch)."""
    for v in idx:
        if _is_mx(v):
            raise LucidError("indices should be either on cpu or on the same device as the "
                             "indexed tensor (cpu): got a gpu index tensor for a cpu tensor; "
                             "move one with .gpu() or .cpu()")


cdef tuple _gpu_index(Tensor self, tuple idx, str what):
    """A converted index (see _convert_index) made ready for indexing self's MLX array:
    the dims each entry applies to are checked on the host (host integer arrays: bounds;
    host boolean masks: shape, then np.nonzero, as NumPy does), gpu integer indices are
    bounds-checked with one small evaluation (gpu boolean masks were made host masks by
    _host_masks). A Python bool raises."""
    m = mlx()
    shape = _shp(self._data)
    cdef int nd = len(shape), used = 0, k = 0
    for v in idx:
        if v is None or v is Ellipsis:
            continue
        if isinstance(v, bool):
            raise LucidError(f"{what} with a Python bool index is not supported on the gpu "
                             "device; use None (a new dim) or an integer index")
        if isinstance(v, np.ndarray) and (<cnp.ndarray>v).dtype.kind == "b":
            used += (<cnp.ndarray>v).ndim
        else:
            used += 1
    if used > nd:
        raise IndexError(f"too many indices for tensor of dimension {nd} (got {used})")
    out = []
    for v in idx:
        if v is None:
            out.append(None)
        elif v is Ellipsis:
            out.append(Ellipsis)
            k += nd - used
        elif isinstance(v, slice):
            out.append(v)
            k += 1
        elif isinstance(v, int):
            n = shape[k]
            if v < -n or v >= n:
                raise IndexError(f"index {v} is out of bounds for dimension {k} with size {n}")
            out.append(v)
            k += 1
        elif isinstance(v, np.ndarray):
            if (<cnp.ndarray>v).dtype.kind == "b":
                mshape = (<object>v).shape
                if mshape != shape[k:k + len(mshape)]:
                    raise IndexError(f"the shape of the mask {mshape} does not match the shape "
                                     f"{shape[k:k + len(mshape)]} of the indexed tensor at "
                                     f"dimension {k}")
                for a in np.nonzero(v):
                    out.append(m.array(a.astype(np.int64)))
                k += len(mshape)
            else:
                n = shape[k]
                if v.size and (v.min() < -n or v.max() >= n):
                    bad = v.min() if v.min() < -n else v.max()
                    raise IndexError(f"index {bad} is out of bounds for dimension {k} with size {n}")
                out.append(m.array(v))
                k += 1
        else:           # a gpu integer index
            n = shape[k]
            if v.size:
                lo = m.min(v).item()
                hi = m.max(v).item()
                if lo < -n or hi >= n:
                    raise IndexError(f"index {lo if lo < -n else hi} is out of bounds for "
                                     f"dimension {k} with size {n}")
            out.append(v)
            k += 1
    return tuple(out)


cdef class IndexBackward(Node):
    """Backward of indexing: the gradient scattered into zeros of the input's shape
    (accumulating over repeated advanced indices)."""
    schema_v1 = register("index", "KeepInput", 1)
    cdef tuple _in_shape
    cdef tuple _idx
    cdef readonly bint advanced

    def grad_formula_impl(self, g):
        cdef Tensor z = _zeros_like_dev(self._in_shape, (<Tensor>g)._dtype, <Tensor>g)
        _index_put(z, self._idx, self.advanced, g, True)
        return z


def _getitem(Tensor self not None, index):
    """``self[index]`` with NumPy semantics: basic indexing gives a view (shared memory and
    version counter), advanced indexing (integer/bool tensors, lists, arrays) a copy."""
    cdef tuple idx
    cdef bint adv
    idx, adv = _convert_index(index)
    idx = _host_masks(self, idx)
    cdef Tensor y
    perm = None
    if adv and self._mx is not None:
        idx = _no_ellipsis(idx, cnp.PyArray_NDIM(self._data))
    if adv:
        perm = _torch_order(idx, cnp.PyArray_NDIM(self._data))
    if self._mx is not None:
        if adv:
            r = self._mx[_gpu_index(self, idx, "indexing")]
            y = _wrap_mx(r if perm is None else mlx().transpose(r, perm), self._dtype)
        else:         # NumPy on the shape-only array: the checks and the view's shape
            arr = self._data[idx]
            y = _gview(self, arr, self._mx[_gpu_index(self, idx, "indexing")])
    else:
        _check_host_index(idx)
        arr = self._data[idx]
        if adv:
            y = _wrap(_as_ndarray(arr if perm is None else np.ascontiguousarray(
                (<cnp.ndarray>arr).transpose(perm))), self._dtype)
        else:
            y = _view(self, arr)
    cdef IndexBackward node
    if grad_enabled() and self._requires_grad:
        node = IndexBackward.__new__(IndexBackward)
        node._next = (_edge(self),)
        node._in_shape = _shp(self._data)
        node._idx = idx
        node.advanced = adv
        if adv:
            _set_history(y, node)
        else:
            _record_view(y, node)
    return y


cdef class IndexPutBackward(Node):
    """Backward of ``self[index] = value`` (and of the accumulating form used by
    IndexBackward's graph-mode formula): self gets the gradient with the overwritten
    positions zeroed (all of it when accumulating), value gets gradient[index] summed
    back to its shape."""
    schema_v1 = register("index_put", "KeepInput", 2)
    cdef tuple _idx
    cdef bint _advanced, _accumulate
    cdef tuple _val_shape
    cdef DType _val_dtype

    def grad_formula_impl(self, g):
        cdef Tensor c
        gs = gv = None
        if self._next[0][0] is not None:
            if self._accumulate:
                gs = g
            else:
                c = ops.clone(g)
                _index_put(c, self._idx, self._advanced, 0, False)
                gs = c
        if self._next[1][0] is not None:
            gv = _cast_t(_sum_to_t(_getitem(g, self._idx), self._val_shape), self._val_dtype)
        return (gs, gv)


cdef void _index_put(Tensor self, tuple idx, bint adv, object value, bint accumulate) except *:
    """``self[idx] = value`` (or ``+=``, accumulating over repeated indices), in place."""
    cdef Tensor vt = None
    cdef bint gpu = self._mx is not None
    if isinstance(value, Tensor):
        vt = <Tensor>value
        if (vt._mx is not None) != gpu:
            raise _devices_error("index_put_")
        vdata = vt._data
    elif _is_scalar(value):
        vdata = value.item() if isinstance(value, np.generic) else value
    else:
        vt = _as_tensor(value)
        vdata = vt._data
        if gpu:             # host data (a list, an array): one copy to the gpu
            vt = to_device(vt, True)
    cdef bint recording = grad_enabled() and self._dtype.is_floating_point and (
        self._requires_grad or (vt is not None and vt._requires_grad))
    if grad_enabled() and self._requires_grad and self._grad_fn is None:
        raise LucidError(
            "a leaf tensor that requires grad is being used in an in-place operation "
            "(index assignment); wrap it in `with lucid.no_grad():`")
    if gpu:
        _check_gpu_write(self, "index assignment")
    elif recording and _is_view(self):
        raise LucidError(
            "index assignment into a view (a tensor sharing memory with another, e.g. x[0], "
            "x.T or x.squeeze()) can't be tracked by autograd: assign through the base tensor "
            "(x[0, i] = v instead of x[0][i] = v) or clone() the view first")
    if not gpu and not cnp.PyArray_ISWRITEABLE(self._data):
        raise LucidError("this tensor's memory is read-only (e.g. a NumPy array marked "
                         "non-writeable or a broadcast view); clone() it first")
    if vt is not None and not self._dtype.is_floating_point and vt._dtype.is_floating_point:
        raise UnsupportedDTypeError(
            f"index assignment of a {vt._dtype} value into a {self._dtype} tensor; cast it first")
    cdef tuple e_self = _edge(self) if recording else _NO_EDGE
    perm = _torch_order(idx, cnp.PyArray_NDIM(self._data)) if adv and not gpu else None
    if gpu:
        # MLX's assignment already places advanced dims as PyTorch does
        _index_put_mx(self, _gpu_index(self, idx, "index assignment"), vt, vdata, accumulate)
    else:
        _check_host_index(idx)
        if perm is not None and vt is not None:
            vdata = _numpy_order(vdata, np.broadcast_to(np.empty((), np.bool_),
                                                        _shp(self._data))[idx].shape, perm, np)
    try:
        if gpu:
            pass
        elif accumulate and adv:
            np.add.at(self._data, idx, vdata)      # repeated indices accumulate
        elif accumulate:
            self._data[idx] += vdata
        else:
            self._data[idx] = vdata
    except ValueError as e:
        raise ShapeError(f"index assignment: {e}") from None
    self._bump()
    _invalidate_views(self, self._data if adv or gpu else self._data[idx])
    cdef IndexPutBackward node
    if recording:
        node = IndexPutBackward.__new__(IndexPutBackward)
        node._next = (e_self, _edge(vt) if vt is not None else _NO_EDGE)
        node._idx = idx
        node._advanced = adv
        node._accumulate = accumulate
        if vt is not None:
            node._val_shape = _shp(vt._data)
            node._val_dtype = vt._dtype
        _set_history(self, node)


cdef object _numpy_order(object v, tuple np_shape, tuple perm, object xp):
    """A value given in PyTorch's order of an index's result (see _torch_order),
    broadcast and transposed to NumPy's, where the assignment happens."""
    t_shape = tuple([np_shape[p] for p in perm])
    try:
        v = xp.broadcast_to(v, t_shape)
    except ValueError as e:
        raise ShapeError(f"index assignment: a value of shape {tuple(v.shape)} does not "
                         f"broadcast to the indexed shape {t_shape}: {e}") from None
    return xp.transpose(v, tuple([int(j) for j in np.argsort(perm)]))


cdef void _index_put_mx(Tensor self, tuple mi, Tensor vt, object vdata, bint accumulate) except *:
    """The gpu step of _index_put: MLX arrays are immutable, so self's array is replaced
    by the updated one (an indexed add accumulates over repeated indices)."""
    m = mlx()
    mdt = mx_dtype(self._dtype)
    if vt is not None:
        v = vt._mx if vt._mx.dtype == mdt else vt._mx.astype(mdt)
    else:          # a scalar, cast as NumPy's assignment casts it
        v = m.array(np.array(vdata).astype(self._dtype.numpy_dtype), dtype=mdt)
    try:
        if accumulate:
            new = self._mx.at[mi].add(v)
        else:
            new = m.array(self._mx)        # a new handle: self's old array stays as it was
            new[mi] = v
    except ValueError as e:
        raise ShapeError(f"index assignment: {e}") from None
    self._mx = new


def _setitem(Tensor self not None, index, value):
    """``self[index] = value``: writes into self's memory (bumping its version); records
    IndexPutBackward as self's new grad_fn when self or value needs a gradient."""
    cdef tuple idx
    cdef bint adv
    idx, adv = _convert_index(index)
    idx = _host_masks(self, idx)
    _index_put(self, idx, adv, value, False)


def index_put_(input, indices, values, accumulate=False):
    """``input[indices] = values`` (or ``+=`` with accumulate=True), in place."""
    if not isinstance(input, Tensor):
        raise TypeError(f"index_put_(): input must be a lucid Tensor (it is modified in place), "
                        f"got {type(input).__name__}")
    cdef Tensor x = <Tensor>input
    _check_storage(x, "index_put_()'s input")
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put_(): indices must be a tuple of index tensors, got "
                        f"{type(indices).__name__}")
    cdef tuple idx
    cdef bint adv
    idx, adv = _convert_index(tuple(indices) if isinstance(indices, list) else indices)
    idx = _host_masks(x, idx)
    _index_put(x, idx, adv, values, bool(accumulate))
    return x


# -- gather / scatter_add / index_select -------------------------------------------------

cdef Tensor _index_tensor(object index, str op):
    cdef Tensor it = _as_tensor_dev(index)
    if it._dtype is not int64 and it._dtype is not int32:
        raise UnsupportedDTypeError(f"{op}(): expected an int64 index tensor, got {it._dtype}")
    return it


cdef void _check_bounds(object idx, object size, int dim, str op) except *:
    if (<cnp.ndarray>idx).size == 0:
        return
    lo = (<cnp.ndarray>idx).min()
    hi = (<cnp.ndarray>idx).max()
    if lo < 0 or hi >= size:
        bad = lo if lo < 0 else hi
        raise IndexError(f"{op}(): index {bad} is out of bounds for dimension {dim} with size {size}")


cdef void _check_index_shape(tuple ishape, tuple shape, int d, bint all_dims, str what, str op) except *:
    if len(ishape) != len(shape):
        raise ShapeError(f"{op}(): index tensor must have the same number of dimensions as "
                         f"{what} ({len(ishape)} vs {len(shape)})")
    for k in range(len(shape)):
        if (all_dims or k != d) and ishape[k] > shape[k]:
            raise ShapeError(f"{op}(): size of index {ishape} exceeds the size of {what} "
                             f"{shape} in dimension {k}")


cdef object _gather_arr(object a, int d, object idx):
    ishape = np.shape(idx)
    src = a[tuple(slice(None) if k == d else slice(0, ishape[k]) for k in range(len(ishape)))]
    return np.take_along_axis(src, idx, axis=d)


cdef object _gather_mx(object a, int d, object idx):
    ishape = idx.shape
    src = a[tuple(slice(None) if k == d else slice(0, ishape[k]) for k in range(len(ishape)))]
    return mlx().take_along_axis(src, idx, axis=d)


cdef object _scatter_add_mx(object z, int d, object idx, object src):
    """_scatter_add_arr on MLX arrays: returns the new array (an indexed add, repeated
    indices accumulating)."""
    m = mlx()
    ishape = idx.shape
    full = [m.array(a) for a in np.indices(ishape, sparse=True)]
    full[d] = idx
    return z.at[tuple(full)].add(src[tuple(slice(0, s) for s in ishape)])


cdef void _scatter_add_arr(object z, int d, object idx, object src) except *:
    ishape = np.shape(idx)
    full = list(np.indices(ishape, sparse=True))
    full[d] = idx
    np.add.at(z, tuple(full), src[tuple(slice(0, s) for s in ishape)])


cdef class GatherBackward(Node):
    """Backward of gather: the gradient scatter-added into zeros of the input's shape."""
    schema_v1 = register("gather", "KeepInput", 2, saves_input=True)
    cdef tuple _in_shape
    cdef int _dim
    cdef SavedTensor _index

    cdef list _saved_list(self):
        return [self._index]

    def grad_formula_impl(self, g, index):
        return (scatter_add(_zeros_like_dev(self._in_shape, (<Tensor>g)._dtype, <Tensor>g),
                            self._dim, index, g), None)


def gather(input, dim, index):
    """out[i][j][k] = input[index[i][j][k]][j][k] (for dim 0); out has index's shape."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef Tensor it = _index_tensor(index, "gather")
    cdef bint gpu = _same_device([x, it], "gather")
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        _norm_dim(dim, 0)
        if cnp.PyArray_NDIM(it._data) > 1:
            raise ShapeError("gather(): index of a 0-dim input must have at most 1 dim")
        return reshape(gather(reshape(x, (1,)), 0, reshape(it, (-1,))), _shp(it._data))
    cdef int d = _norm_dim(dim, nd)
    shape = _shp(x._data)
    _check_index_shape(_shp(it._data), shape, d, False, "input", "gather")
    cdef Tensor y
    if gpu:
        _check_bounds_mx(it._mx, shape[d], d, "gather")
        y = _wrap_mx(_gather_mx(x._mx, d, it._mx), x._dtype)
    else:
        _check_bounds(it._data, shape[d], d, "gather")
        y = _wrap(_as_ndarray(_gather_arr(x._data, d, it._data)), x._dtype)
    cdef GatherBackward node
    if grad_enabled() and x._requires_grad:
        node = GatherBackward.__new__(GatherBackward)
        node._next = (_edge(x), _NO_EDGE)
        node._in_shape = shape
        node._dim = d
        node._index = _save(it, False)
        _set_history(y, node)
    return y


cdef class ScatterAddBackward(Node):
    """Backward of scatter_add: input gets the gradient, src gets it gathered at index
    (zeros where src was not used)."""
    schema_v1 = register("scatter_add", "KeepInput", 3, saves_input=True)
    cdef int _dim
    cdef tuple _src_shape
    cdef DType _src_dtype
    cdef SavedTensor _index

    cdef list _saved_list(self):
        return [self._index]

    def grad_formula_impl(self, g, it):
        gx = g if self._next[0][0] is not None else None
        gs = None
        if self._next[2][0] is not None:
            gs = gather(g, self._dim, it)
            ishape = _shp((<Tensor>it)._data)
            if ishape != self._src_shape:
                p = []
                for k in range(len(ishape) - 1, -1, -1):
                    p.append(0)
                    p.append(self._src_shape[k] - ishape[k])
                gs = pad(gs, tuple(p))
            gs = _cast_t(gs, self._src_dtype)
        return (gx, None, gs)


def scatter_add(input, dim, index, src):
    """A copy of input with src[i][j][k] added at [index[i][j][k]][j][k] (dim 0), repeated
    indices accumulating."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef Tensor it = _index_tensor(index, "scatter_add")
    cdef Tensor s = _as_tensor_dev(src)
    cdef bint gpu = _same_device([x, it, s], "scatter_add")
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        _norm_dim(dim, 0)
        return reshape(scatter_add(reshape(x, (1,)), 0, reshape(it, (-1,)), reshape(s, (-1,))),
                       ())
    cdef int d = _norm_dim(dim, nd)
    if s._dtype is not x._dtype:
        raise UnsupportedDTypeError(f"scatter_add(): expected self.dtype to be equal to "
                                    f"src.dtype, got {x._dtype} and {s._dtype}")
    shape = _shp(x._data)
    ishape = _shp(it._data)
    _check_index_shape(ishape, shape, d, False, "input", "scatter_add")
    _check_index_shape(ishape, _shp(s._data), d, True, "src", "scatter_add")
    cdef Tensor y
    if gpu:
        _check_bounds_mx(it._mx, shape[d], d, "scatter_add")
        y = _wrap_mx(_scatter_add_mx(x._mx, d, it._mx, s._mx), x._dtype)
    else:
        _check_bounds(it._data, shape[d], d, "scatter_add")
        out = np.array(x._data, copy=True, order="C")
        _scatter_add_arr(out, d, it._data, s._data)
        y = _wrap(out, x._dtype)
    cdef ScatterAddBackward node
    if grad_enabled() and x._dtype.is_floating_point and (x._requires_grad or s._requires_grad):
        node = ScatterAddBackward.__new__(ScatterAddBackward)
        node._next = (_edge(x), _NO_EDGE, _edge(s))
        node._dim = d
        node._src_shape = _shp(s._data)
        node._src_dtype = s._dtype
        node._index = _save(it, False)
        _set_history(y, node)
    return y


cdef class IndexSelectBackward(Node):
    """Backward of index_select: the gradient added into zeros at the selected indices."""
    schema_v1 = register("index_select", "KeepInput", 2, saves_input=True)
    cdef tuple _in_shape
    cdef int _dim
    cdef SavedTensor _index

    cdef list _saved_list(self):
        return [self._index]

    def grad_formula_impl(self, g, index):
        cdef Tensor z = _zeros_like_dev(self._in_shape, (<Tensor>g)._dtype, <Tensor>g)
        if (<Tensor>index)._mx is not None:
            idx = (<Tensor>index)._mx.reshape(-1)
        else:
            idx = np.array((<Tensor>index)._data, dtype=np.int64).reshape(-1)
        _index_put(z, (slice(None),) * self._dim + (idx,), True, g, True)
        return (z, None)


def index_select(input, dim, index):
    """The entries of input at ``index`` (1-d) along ``dim``."""
    cdef Tensor x = _as_tensor_dev(input)
    cdef Tensor it = _index_tensor(index, "index_select")
    cdef bint gpu = _same_device([x, it], "index_select")
    if cnp.PyArray_NDIM(it._data) > 1:
        raise ShapeError(f"index_select(): index must be 1-d, got shape {_shp(it._data)}")
    cdef int nd = cnp.PyArray_NDIM(x._data)
    if nd == 0:
        _norm_dim(dim, 0)
        return reshape(index_select(reshape(x, (1,)), 0, it), (-1,) if
                       cnp.PyArray_NDIM(it._data) else ())
    cdef int d = _norm_dim(dim, nd)
    shape = _shp(x._data)
    cdef Tensor y
    if gpu:
        idx = it._mx.reshape(-1)
        _check_bounds_mx(idx, shape[d], d, "index_select")
        y = _wrap_mx(mlx().take(x._mx, idx, axis=d), x._dtype)
    else:
        idx = it._data.reshape(-1)
        _check_bounds(idx, shape[d], d, "index_select")
        y = _wrap(_as_ndarray(np.take(x._data, idx, axis=d)), x._dtype)
    cdef IndexSelectBackward node
    if grad_enabled() and x._requires_grad:
        node = IndexSelectBackward.__new__(IndexSelectBackward)
        node._next = (_edge(x), _NO_EDGE)
        node._in_shape = shape
        node._dim = d
        node._index = _save(it, False)
        _set_history(y, node)
    return y


# -- Tensor methods --------------------------------------------------------------------------

def _m_permute(self, *dims):
    return permute(self, *dims)


def _m_repeat(self, *sizes):
    return repeat(self, *sizes)


def _m_t(self):
    cdef Tensor x = _as_tensor_dev(self)
    if cnp.PyArray_NDIM(x._data) > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                         f"{cnp.PyArray_NDIM(x._data)}D")
    return _reverse_dims(x)


def _m_reshape(self, *shape):
    return reshape(self, _size_args(shape))


cdef Tensor _view_dtype(Tensor x, DType dt):
    """``x.view(dtype)``: x's bytes read as ``dt``, sharing x's memory, as PyTorch. With a
    different element size the last dim must be contiguous and scales by the size ratio;
    the result has no gradient history (reinterpreting bytes is not differentiable)."""
    cdef cnp.ndarray a = x._data
    cdef int nd = cnp.PyArray_NDIM(a)
    cdef Py_ssize_t old = cnp.PyArray_ITEMSIZE(a), new = dt.numpy_dtype.itemsize
    cdef str what = f"view(dtype): cannot view {x._dtype} as {dt}"
    cdef Tensor y
    if old != new:
        if nd == 0:
            raise ShapeError(f"{what}: element sizes differ ({old} and {new} bytes), and a "
                             "0-d tensor has no last dim to rescale")
        last, step = a.shape[nd - 1], a.strides[nd - 1]
        if x._mx is not None:      # (a gpu tensor's values are one contiguous MLX array)
            step = old
        if step != old and last != 1:
            raise ShapeError(f"{what}: element sizes differ, so the last dim must be "
                             f"contiguous (stride 1), but its stride is {step // old}")
        if new > old:
            ratio = new // old
            if last % ratio:
                raise ShapeError(f"{what}: the last dim ({last}) must be divisible by "
                                 f"{ratio} (element sizes {old} and {new} bytes)")
            for d in range(nd - 1 if x._mx is None else 0):
                if (a.strides[d] // old) % ratio:
                    raise ShapeError(f"{what}: the stride of dim {d} "
                                     f"({a.strides[d] // old}) must be divisible by {ratio}")
    if x._mx is not None:
        y = _wrap_mx(mlx().view(x._mx, mx_dtype(dt)), dt)
        y._vc = x._get_vc()
        return y
    try:
        arr = a.view(dt.numpy_dtype)
    except ValueError as e:
        raise ShapeError(f"{what}: {e}") from None
    y = _wrap(<cnp.ndarray>arr, dt)
    y._vc = x._get_vc()
    return y


def _m_view(self, *shape):
    """``x.view(shape)``: always a view sharing x's memory, as PyTorch; a layout that
    would need a copy raises (a silent copy would make writes through it vanish)."""
    cdef Tensor x = _as_tensor_dev(self)
    if len(shape) == 1 and isinstance(shape[0], DType):
        return _view_dtype(x, <DType>shape[0])
    shape = _size_args(shape)
    try:
        np.reshape(x._data, shape, copy=False)
    except ValueError as e:
        if "copy" in str(e) or "without copying" in str(e):
            raise LucidError(
                f"view size {shape} is not compatible with input tensor's size and stride "
                f"(shape {_shp(x._data)}, strides {(<object>x._data).strides}): the result "
                "would need a copy. Use .reshape(...) (which copies when it must) or "
                ".contiguous().view(...)") from None
        raise ShapeError(f"shape {shape} is invalid for input of shape {_shp(x._data)}: {e}") from None
    return reshape(x, shape)


def _m_unfold(self, dimension, size, step):
    return unfold(self, dimension, size, step)


def _m_expand(self, *sizes):
    return expand(self, _size_args(sizes))


def _m_expand_as(self, other):
    return expand(self, _shp((<Tensor>_as_tensor_dev(other))._data))


for _fn in (flatten, squeeze, unsqueeze, transpose, flip, roll, tile, gather, scatter_add,
            index_select, split, chunk, narrow, cat, concat, stack, pad, broadcast_to,
            index_put_, select, unbind, movedim, moveaxis, swapaxes, swapdims):
    export(_fn, method=_fn.__name__ not in ("cat", "concat", "stack", "pad"))
export(reshape, method=_m_reshape)
export(_m_view, "view", public=False, method=True)
export(expand, method=_m_expand)
export(_m_expand_as, "expand_as", public=False, method=True)
export(permute, method=_m_permute)
export(repeat, method=_m_repeat)
export(_m_t, "t", public=False, method=True)
export(_m_unfold, "unfold", public=False, method=True)
export(_getitem, public=False)
export(_setitem, public=False)
export(_reverse_dims, public=False)

# Which node classes belong to view ops (a write into a view's base must invalidate
# them; in-place ops on their outputs are refused when recording).
for _cls in (SqueezeBackward, UnsqueezeBackward, TransposeBackward, PermuteBackward,
             ExpandBackward, UnfoldBackward):
    _mark_view_node(_cls)
_mark_view_node(ReshapeBackward, lambda node, t: node.aliases)
_mark_view_node(IndexBackward, lambda node, t: not node.advanced)

# Every schema names its node class.
for _cls in (ReshapeBackward, ExpandBackward, SqueezeBackward, UnsqueezeBackward,
             TransposeBackward, PermuteBackward, CatBackward, StackBackward, FlipBackward,
             RollBackward, TileBackward, RepeatBackward, PadBackward, IndexBackward,
             IndexPutBackward, GatherBackward, ScatterAddBackward, IndexSelectBackward,
             UnfoldBackward):
    _cls.schema_v1._bind(_cls)

# Aliases take the schema flags of the op whose node they record.
for _name, _of in (("view", "reshape"), ("flatten", "reshape"), ("broadcast_to", "expand"),
                   ("split", "index"), ("chunk", "index"), ("narrow", "index"),
                   ("select", "index"), ("unbind", "index"), ("movedim", "permute"),
                   ("moveaxis", "permute"), ("swapaxes", "transpose"), ("swapdims", "transpose"),
                   ("index_put_", "index_put")):
    _s = <OpSchema>ops_schema(_of)
    register(_name, _s.amp_policy.value, _s.arity, saves_input=_s.saves_input,
              saves_output=_s.saves_output, deterministic=_s.deterministic, node=_s.node)
register("contiguous", "KeepInput", 1)
