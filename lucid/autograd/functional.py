"""Functional transforms over lucid functions, with ``torch.autograd.functional``'s
signatures: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``vhp``, ``hvp``.

``inputs`` is a tensor or a tuple of tensors; results follow the same structure (a tensor
for a tensor, a tuple for a tuple). Results are detached unless ``create_graph=True``,
when they are differentiable (so transforms nest: a Hessian is the Jacobian of a
gradient). Every transform is reverse-mode; ``jvp`` uses the double-backward trick
(the vjp is linear in its cotangent ``u``, so d(vjp(u))/du applied to ``v`` is J v), which
needs only graph-mode backward formulas, and every lucid node has one.
"""
import numpy as np

from lucid._core import core
from lucid._core.core import Tensor
from lucid.autograd.engine import grad as _grad
from lucid.autograd.grad_mode import enable_grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(x, arg, fn):
    is_tuple = isinstance(x, (tuple, list))
    xs = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of "
                            f"Tensors but the value at index {i} has type {type(t).__name__}.")
    return is_tuple, xs


def _prep(inputs, create_graph):
    """Inputs the transform differentiates: kept in the caller's graph when create_graph
    (so the result can be differentiated w.r.t. them), fresh leaves otherwise."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(core.ops.reshape(t, t.shape))
        else:
            out.append(t.detach().requires_grad_(t.is_floating_point()))
    return tuple(out)


def _post(xs, create_graph):
    if isinstance(xs, tuple):
        return tuple(_post(x, create_graph) for x in xs)
    if xs is None or create_graph:
        return xs
    return xs.detach()


def _zeros_like(t):
    return core.from_numpy(np.zeros(t.shape, dtype=t.dtype.numpy_dtype))


def _autograd(outputs, inputs, grad_outputs, create_graph, strict, what):
    """grad() with unused inputs as zeros (strict=False) or an error (strict=True), and
    outputs that do not require grad contributing nothing."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        res = (None,) * len(inputs)
    else:
        res = _grad(tuple(o for o, _ in pairs), inputs, tuple(g for _, g in pairs),
                    retain_graph=True, create_graph=create_graph, allow_unused=True)
    out = []
    for i, (r, x) in enumerate(zip(res, inputs)):
        if r is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode ({what}).")
            r = _zeros_like(x)
        out.append(r)
    return tuple(out)


def _check_v(v, outputs, fn, what="outputs"):
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if the user-provided function "
                               f"returns a single Tensor with a single element ({fn}).")
        return (core.from_numpy(np.ones(outputs[0].shape, outputs[0].dtype.numpy_dtype)),)
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(outputs):
        raise RuntimeError(f"v has {len(vs)} entries but the function has {len(outputs)} {what}")
    for a, b in zip(vs, outputs):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"Mismatch in shape in {fn}: v has shape {tuple(a.shape)}, the "
                               f"{what[:-1]} has shape {tuple(b.shape)}")
    return vs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T J)``: the vector-Jacobian product at ``inputs``."""
    with enable_grad():
        is_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
        xs = _prep(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "vjp")
        vs = _check_v(v, outs, "vjp")
        res = _autograd(outs, xs, vs, create_graph, strict, "vjp")
    return _post(outs if out_tuple else outs[0], create_graph), \
        _post(res if is_tuple else res[0], create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), J v)``: the Jacobian-vector product at ``inputs``."""
    with enable_grad():
        _is_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
        xs = _prep(xs, create_graph)
        if v is None:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the "
                                   "user-provided function is a single Tensor with a single "
                                   "element.")
            vs = (core.from_numpy(np.ones(xs[0].shape, xs[0].dtype.numpy_dtype)),)
        else:
            vs = _check_v(v, xs, "jvp", "inputs")
        out = func(*xs)
        out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "jvp")
        # u: a dummy cotangent; vjp(u) = J^T u is linear in u, and d(vjp(u).v)/du = J v
        us = tuple(_zeros_like(o).requires_grad_(True) for o in outs)
        gs = _autograd(outs, xs, us, True, strict, "jvp")
        pairs = [(g, w) for g, w in zip(gs, vs) if g.requires_grad]
        if pairs:
            res = _grad(tuple(g for g, _ in pairs), us, tuple(w for _, w in pairs),
                        retain_graph=True, create_graph=create_graph, allow_unused=True)
        else:
            res = (None,) * len(us)
        res = tuple(_zeros_like(o) if r is None else r for r, o in zip(res, outs))
    return _post(outs if out_tuple else outs[0], create_graph), \
        _post(res if out_tuple else res[0], create_graph)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output i and input j a tensor of shape
    ``out_i.shape + in_j.shape`` (nested tuples as torch: outputs first, then inputs).
    ``vectorize`` is accepted for torch compatibility (one backward per output element)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise core.ArgumentError(
            "Expected strategy to be either \"forward-mode\" or \"reverse-mode\".")
    with enable_grad():
        is_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
        xs = _prep(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "jacobian")
        jac = []
        for o in outs:
            rows = [[] for _ in xs]
            n = o.numel()
            for k in range(n):
                e = np.zeros(n, dtype=o.dtype.numpy_dtype)
                e[k] = 1
                g = core.from_numpy(e.reshape(o.shape))
                gs = _autograd((o,), xs, (g,), create_graph, strict, "jacobian")
                for j, gj in enumerate(gs):
                    rows[j].append(gj)
            blocks = []
            for j, x in enumerate(xs):
                if n:
                    b = core.ops.reshape(core.ops.stack(rows[j], 0), tuple(o.shape) + tuple(x.shape))
                else:
                    b = core.from_numpy(np.zeros(tuple(o.shape) + tuple(x.shape), x.dtype.numpy_dtype))
                blocks.append(_post(b, create_graph))
            jac.append(tuple(blocks))
    if not out_tuple and not is_tuple:
        return jac[0][0]
    if not out_tuple:
        return jac[0]
    if not is_tuple:
        return tuple(j[0] for j in jac)
    return tuple(jac)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs`` (the Jacobian of its gradient):
    ``in_i.shape + in_j.shape`` blocks, nested as torch."""
    is_tuple, xs = _as_tuple(inputs, "inputs", "hessian")

    def grad_fn(*ys):
        out = func(*ys)
        _, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor "
                               "containing a single element")
        g = _autograd(outs, ys, (None,), True, strict, "hessian") if outs[0].requires_grad \
            else tuple(_zeros_like(y) for y in ys)
        return g

    res = jacobian(grad_fn, xs, create_graph=create_graph, strict=strict)
    if not is_tuple:
        return res[0][0]
    return res


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T H)`` for a scalar ``func``."""
    with enable_grad():
        is_tuple, xs = _as_tuple(inputs, "inputs", "vhp")
        xs = _prep(xs, create_graph)
        out = func(*xs)
        _, outs = _as_tuple(out, "outputs of the user-provided function", "vhp")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The function given to vhp should return a single Tensor "
                               "containing a single element")
        if v is None:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the "
                                   "user-provided function is a single Tensor with a single "
                                   "element.")
            vs = (core.from_numpy(np.ones(xs[0].shape, xs[0].dtype.numpy_dtype)),)
        else:
            vs = _check_v(v, xs, "vhp", "inputs")
        gs = _autograd(outs, xs, (None,), True, strict, "vhp")
        pairs = [(g, w) for g, w in zip(gs, vs) if g.requires_grad]
        if pairs:
            res = _grad(tuple(g for g, _ in pairs), xs, tuple(w for _, w in pairs),
                        retain_graph=True, create_graph=create_graph, allow_unused=True)
        else:
            res = (None,) * len(xs)
        if strict and any(r is None for r in res):
            raise RuntimeError("The second derivative of the user-provided function is "
                               "independent of an input; not allowed in strict mode (vhp).")
        res = tuple(_zeros_like(x) if r is None else r for r, x in zip(res, xs))
    return _post(outs[0], create_graph), _post(res if is_tuple else res[0], create_graph)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), H v)`` for a scalar ``func``. The Hessian of a twice continuously
    differentiable function is symmetric, so H v is v^T H (one double backward)."""
    return vhp(func, inputs, v, create_graph, strict)
