"""Convolution and max pooling as single ops over NumPy (cpu, float32 / float64).

The composite forms in lucid.nn.functional gather one strided slice per kernel offset
and stack them, which records a node per slice. Here the windows of the padded input
are one strided view (no copy), copied once into the im2col matrix and multiplied
by the weight in one BLAS call; the backward is two BLAS calls and a col2im that adds
one strided slice per kernel offset. Each op records one node.

A node's eager backward (grad mode off, the engine's ordinary sweep) runs that NumPy
code; in graph mode (``create_graph=True``) it differentiates the composite form with
lucid ops, so second and higher derivatives come from the same formulas as before.
"""
import numpy as np

import lucid
from lucid._core import core
from lucid._core.core import PyNode, _py_attach, _py_node, register

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def applies(*tensors):
    """The fused ops serve cpu float32 / float64 tensors of one dtype, outside autocast."""
    dt = tensors[0].dtype
    return (dt.numpy_dtype in _FLOATS and not lucid.is_autocast_enabled()
            and all(t is None or (t.dtype == dt and not t.is_cuda) for t in tensors))


def _pad(a, pairs, value):
    """``a`` (N, C, *spatial) padded by (lo, hi) per spatial dim, C-contiguous."""
    if not any(lo or hi for lo, hi in pairs):
        return np.ascontiguousarray(a)
    shape = a.shape[:2] + tuple(n + lo + hi for n, (lo, hi) in zip(a.shape[2:], pairs))
    out = np.full(shape, value, dtype=a.dtype)
    out[(slice(None), slice(None)) + tuple(slice(lo, lo + n)
                                          for n, (lo, _) in zip(a.shape[2:], pairs))] = a
    return out


def _windows(xp, kernel, stride, dilation, out_size, channels_first):
    """The windows of the padded input xp (N, C, *spatial) as one strided view:
    (C, *kernel, N, *out) if channels_first, else (N, C, *out, *kernel)."""
    s = xp.strides
    nd = len(kernel)
    ks = tuple(s[2 + a] * dilation[a] for a in range(nd))
    os_ = tuple(s[2 + a] * stride[a] for a in range(nd))
    n, c = xp.shape[:2]
    if channels_first:
        shape, strides = (c,) + kernel + (n,) + out_size, (s[1],) + ks + (s[0],) + os_
    else:
        shape, strides = (n, c) + out_size + kernel, (s[0], s[1]) + os_ + ks
    return np.ndarray(shape, xp.dtype, buffer=xp, strides=strides)


def _col2im(cols, padded_shape, kernel, stride, dilation, out_size):
    """The adjoint of _windows: cols (N, C, *kernel, *out) summed into the padded input."""
    gxp = np.zeros(padded_shape, dtype=cols.dtype)
    nd = len(kernel)
    for offs in np.ndindex(*kernel):
        idx = (slice(None), slice(None)) + tuple(
            slice(offs[a] * dilation[a], offs[a] * dilation[a] + stride[a] * (out_size[a] - 1) + 1,
                  stride[a]) for a in range(nd))
        gxp[idx] += cols[(slice(None), slice(None)) + offs]
    return gxp


def _crop(gxp, pairs):
    if not any(lo or hi for lo, hi in pairs):
        return gxp
    return np.ascontiguousarray(gxp[(slice(None), slice(None)) + tuple(
        slice(lo, gxp.shape[2 + a] - hi) for a, (lo, hi) in enumerate(pairs))])


def _vjp(out, inputs, g):
    """Gradients of ``out`` w.r.t. the tensors in ``inputs`` that need one, recorded."""
    need = [t for t in inputs if t is not None and t.requires_grad]
    got = iter(lucid.autograd.grad(out, need, g, create_graph=True, allow_unused=True)
               if need else ())
    return tuple(next(got) if t is not None and t.requires_grad else None for t in inputs)


# -- convolution ------------------------------------------------------------------------------

class ConvolutionBackward(PyNode):
    """Backward of conv (groups 1): grad_w = g im2col(x)^T, grad_b = sum(g),
    grad_x = col2im(w^T g); in graph mode the composite's derivatives."""

    def grad_formula_impl(self, g, x, w):
        cols, pairs, stride, dilation, out_size, composite = self.ctx
        if core.is_grad_enabled():
            with lucid.enable_grad():
                gx, gw = _vjp(composite(x, w), (x, w), g)
            gb = g.sum((0,) + tuple(range(2, g.ndim))) if self.needs_input_grad(2) else None
            return gx, gw, gb
        ga = g.numpy()
        n, o = ga.shape[:2]
        wa = w.numpy(force=True)
        gt = np.ascontiguousarray(ga.reshape(n, o, -1).swapaxes(0, 1)).reshape(o, -1)
        gx = gw = gb = None
        if self.needs_input_grad(1):
            gw = lucid.from_numpy((gt @ cols.T).reshape(wa.shape))
        if self.needs_input_grad(2):
            gb = lucid.from_numpy(np.add.reduce(gt, axis=1))
        if self.needs_input_grad(0):
            kernel = wa.shape[2:]
            c = wa.shape[1]
            gcols = (wa.reshape(o, -1).T @ gt).reshape((c,) + kernel + (n,) + out_size)
            gcols = np.moveaxis(gcols, 1 + len(kernel), 0)          # (N, C, *kernel, *out)
            padded = (n, c) + tuple(x.shape[2 + a] + lo + hi for a, (lo, hi) in enumerate(pairs))
            gx = lucid.from_numpy(_crop(_col2im(gcols, padded, kernel, stride, dilation,
                                                out_size), pairs))
        return gx, gw, gb


ConvolutionBackward.schema_v1 = register("convolution", "Promote", 3, True, False,
                                         node=ConvolutionBackward)


def convolution(x, w, b, stride, pairs, dilation, out_size, composite):
    """conv of x (N, C, *spatial) with w (O, C, *kernel), groups 1, padding ``pairs``;
    ``composite(x, w)``: the same without bias in lucid ops (the graph-mode formula)."""
    xa = x.numpy(force=True)
    wa = w.numpy(force=True)
    o, c = wa.shape[:2]
    kernel = wa.shape[2:]
    n = xa.shape[0]
    xp = _pad(xa, pairs, 0)
    cols = _windows(xp, kernel, stride, dilation, out_size, True).reshape(c * int(np.prod(kernel)),
                                                                          -1)
    y = wa.reshape(o, -1) @ cols                              # (O, N * L)
    if b is not None:
        y += b.numpy(force=True)[:, None]
    out = lucid.from_numpy(np.ascontiguousarray(y.reshape((o, n) + out_size).swapaxes(0, 1)))
    if core.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w, b)):
        _py_attach(_py_node(ConvolutionBackward), out, (x, w, b), (x, w),
                   (cols, pairs, stride, dilation, out_size, composite))
    return out


# -- max pooling ---------------------------------------------------------------------------------

class MaxPoolBackward(PyNode):
    """Backward of max pooling: g sent to the first maximum of each window; in graph mode
    the composite's derivative."""

    def grad_formula_impl(self, g, x):
        arg, pairs, stride, dilation, out_size, kernel, composite = self.ctx
        if core.is_grad_enabled():
            with lucid.enable_grad():
                return _vjp(composite(x), (x,), g)[0]
        ga = g.numpy()
        k = int(np.prod(kernel))
        win = np.zeros(ga.shape + (k,), dtype=ga.dtype)
        np.put_along_axis(win, arg[..., None], ga[..., None], -1)
        nd = len(kernel)
        win = win.reshape(ga.shape + kernel)
        win = np.moveaxis(win, tuple(range(2 + nd, 2 + 2 * nd)), tuple(range(2, 2 + nd)))
        padded = x.shape[:2] + tuple(x.shape[2 + a] + lo + hi for a, (lo, hi) in enumerate(pairs))
        return lucid.from_numpy(_crop(_col2im(win, padded, kernel, stride, dilation, out_size),
                                      pairs))


MaxPoolBackward.schema_v1 = register("max_pool", "KeepInput", 1, True, False,
                                     node=MaxPoolBackward)


def max_pool(x, kernel, stride, pairs, dilation, out_size, composite):
    """Max over each window of x (N, C, *spatial) padded with -inf by ``pairs``;
    ``composite(x)``: the same in lucid ops (the graph-mode formula)."""
    xa = x.numpy(force=True)
    xp = _pad(xa, pairs, -np.inf)
    win = _windows(xp, kernel, stride, dilation, out_size, False)
    win = win.reshape(win.shape[:2 + len(kernel)] + (-1,))      # (N, C, *out, K), a copy
    arg = np.argmax(win, axis=-1)                                # first max; NaN wins
    out = lucid.from_numpy(np.take_along_axis(win, arg[..., None], -1)[..., 0])
    if core.is_grad_enabled() and x.requires_grad:
        _py_attach(_py_node(MaxPoolBackward), out, (x,), (x,),
                   (arg, pairs, stride, dilation, out_size, kernel, composite))
    return out
