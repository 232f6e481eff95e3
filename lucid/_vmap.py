"""``lucid.vmap(func, in_dims=0, out_dims=0)``: map a function over a batch dimension.

lucid has no batched-tensor tracer. Most functions written for one example are already
correct on a batch when their ops act elementwise or on trailing dims (``x.exp()``,
``x @ W``, ``x.sum(-1)``, ``softmax(x, -1)``), so vmap calls ``func`` once on the whole
batch and checks that guess on the first and the last example (two extra calls of ``func``
on one example each). If the batched call fails, changes the output's shape, or disagrees
with either probe (``x.sum()``, ``x - x.mean()``, ``x @ x``), it falls back to one call
per example and stacks the results. Either way the result is differentiable.
"""
import functools

import numpy as np

from lucid._core import core
from lucid._core.core import Tensor

__all__ = ["vmap"]


def _move(t, src, dst):
    """t with dim src moved to position dst (permute)."""
    nd = t.ndim
    src = src % nd
    dst = dst % nd
    if src == dst:
        return t
    order = [d for d in range(nd) if d != src]
    order.insert(dst, src)
    return core.ops.permute(t, tuple(order))


def _select(t, i):
    return t[i]


def _tree_map(fn, x):
    if isinstance(x, Tensor):
        return fn(x)
    if isinstance(x, tuple):
        return tuple(_tree_map(fn, y) for y in x)
    if isinstance(x, list):
        return [_tree_map(fn, y) for y in x]
    if isinstance(x, dict):
        return {k: _tree_map(fn, v) for k, v in x.items()}
    return x


def _leaves(x):
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _leaves(y)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _leaves(v)]
    return []


def _same(a, b):
    la, lb = _leaves(a), _leaves(b)
    if len(la) != len(lb) or type(a) is not type(b):
        return False
    for x, y in zip(la, lb):
        if tuple(x.shape) != tuple(y.shape) or x.dtype is not y.dtype:
            return False
        xa, ya = x.detach().numpy(), y.detach().numpy()
        if x.is_floating_point():
            tol = 1e-3 if x.dtype.itemsize <= 2 else (1e-5 if x.dtype.itemsize == 4 else 1e-10)
            if not np.allclose(xa, ya, rtol=tol, atol=tol, equal_nan=True):
                return False
        elif not np.array_equal(xa, ya):
            return False
    return True


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Vectorise ``func`` over dim ``in_dims`` of its tensor arguments (an int for all, or
    one entry per positional argument, None for an unbatched one); outputs get the batch
    dim at ``out_dims``. ``func`` runs once on the batch when that is correct (see the
    module docstring)."""

    def wrapped(*args):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise core.ArgumentError(f"vmap: in_dims has {len(dims)} entries for {len(args)} "
                                     "arguments")
        sizes = set()
        moved = []
        for a, d in zip(args, dims):
            if d is None or not isinstance(a, Tensor):
                if d is not None and not isinstance(a, Tensor):
                    raise core.ArgumentError(f"vmap: in_dim {d} given for a non-tensor argument")
                moved.append((a, False))
                continue
            if a.ndim == 0:
                raise core.ArgumentError("vmap: cannot map over dim of a 0-d tensor")
            moved.append((_move(a, d, 0), True))
            sizes.add(a.shape[d])
        if not sizes:
            raise core.ArgumentError("vmap: at least one argument must be mapped (in_dims not "
                                     "None)")
        if len(sizes) > 1:
            raise core.ArgumentError(f"vmap: mapped dims have different sizes {sorted(sizes)}")
        n = sizes.pop()

        def one(i):
            return func(*[_select(a, i) if b else a for a, b in moved])

        try:
            out = func(*[a for a, _ in moved])
            ok = n > 0
            for i in sorted({0, n - 1}) if ok else ():
                ok = ok and _same(_tree_map(functools.partial(_select, i=i), out), one(i))
        except Exception:  # noqa: BLE001  (any failure of the batched guess means: loop)
            ok = False
        if not ok:
            per = [one(i) for i in range(n)]
            if n == 0:
                raise core.ArgumentError("vmap over an empty batch needs a function that batches")
            out = _stack_tree(per)
        wrapped.batched = ok
        od = out_dims
        return _tree_map(lambda t: _move(t, 0, od) if od != 0 else t, out)

    wrapped.batched = None
    return wrapped


def _stack_tree(items):
    first = items[0]
    if isinstance(first, Tensor):
        return core.ops.stack(list(items), 0)
    if isinstance(first, (tuple, list)):
        return type(first)(_stack_tree([it[k] for it in items]) for k in range(len(first)))
    if isinstance(first, dict):
        return {k: _stack_tree([it[k] for it in items]) for k in first}
    return core.tensor(list(items))
