"""Convolution and max pooling as single ops (cpu, float32 / float64, 1-d and 2-d).

The composite forms in lucid.nn.functional gather one strided slice per kernel offset
and stack them, which records a node per slice. Here lucid.nn._kernels builds the
im2col matrix in one C pass (padding read as zeros, no padded copy), the weight
multiplies it in one BLAS call, and the backward is two BLAS calls and one col2im pass;
max pooling is one pass that also keeps each window's argmax. Each op records one node.

A node's eager backward (grad mode off: the engine's ordinary sweep) runs those
kernels; in graph mode (``create_graph=True``) it differentiates the composite form
with lucid ops, so second and higher derivatives come from the same formulas as before.
"""
import numpy as np

import lucid
from lucid._core import core
from lucid._core.core import PyNode, _py_attach, _py_node, register

try:
    from lucid.nn import _kernels
except ImportError as e:  # no silent pure-Python fallback
    raise ImportError(
        f"lucid.nn's window kernels (lucid.nn._kernels) could not be imported: {e}.\n"
        "Build them with `pip install .` or `python setup.py build_ext --inplace`.") from e

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def applies(nd, *tensors):
    """The fused ops serve 1-d and 2-d windows of cpu float32 / float64 tensors of one
    dtype, outside autocast."""
    dt = tensors[0].dtype
    return (nd in (1, 2) and dt.numpy_dtype in _FLOATS and not lucid.is_autocast_enabled()
            and all(t is None or (t.dtype == dt and not t.is_cuda) for t in tensors))


def _geometry(shape, kernel, stride, dilation, pairs, out_size):
    """The kernels' (n, c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow) of an (N, C, L)
    or (N, C, H, W) input; a 1-d op is a 2-d one of height 1."""
    if len(kernel) == 1:
        return (shape[0], shape[1], 1, shape[2], 1, kernel[0], 1, stride[0], 1, dilation[0],
                0, pairs[0][0], 1, out_size[0])
    return (shape[0], shape[1], shape[2], shape[3], kernel[0], kernel[1], stride[0], stride[1],
            dilation[0], dilation[1], pairs[0][0], pairs[1][0], out_size[0], out_size[1])


def _planes(a, geo):
    """``a`` as the kernels' (N, C, H, W) array (1-d: H = 1), C-contiguous."""
    return np.ascontiguousarray(a).reshape(geo[:4])


def _vjp(out, inputs, g):
    """Gradients of ``out`` w.r.t. the tensors in ``inputs`` that need one, recorded."""
    need = [t for t in inputs if t is not None and t.requires_grad]
    got = iter(lucid.autograd.grad(out, need, g, create_graph=True, allow_unused=True)
               if need else ())
    return tuple(next(got) if t is not None and t.requires_grad else None for t in inputs)


# -- convolution ------------------------------------------------------------------------------

class ConvolutionBackward(PyNode):
    """Backward of conv (groups 1): grad_w = g cols^T, grad_b = sum(g) and
    grad_x = col2im(w^T g), cols the forward's im2col matrix; in graph mode the
    composite's derivatives."""

    def grad_formula_impl(self, g, x, w):
        cols, geo, composite = self.ctx
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
            gx = _kernels.col2im(wa.reshape(o, -1).T @ gt, geo)
            gx = lucid.from_numpy(gx.reshape(tuple(x.shape)))
        return gx, gw, gb


ConvolutionBackward.schema_v1 = register("convolution", "Promote", 3, True, False,
                                         node=ConvolutionBackward)


def convolution(x, w, b, stride, pairs, dilation, out_size, composite):
    """conv of x (N, C, *spatial) with w (O, C, *kernel) (1-d or 2-d, groups 1), padding
    ``pairs`` ((lo, hi) per dim); ``composite(x, w)``: the same without bias in lucid
    ops (the graph-mode formula)."""
    wa = w.numpy(force=True)
    o = wa.shape[0]
    n = x.shape[0]
    geo = _geometry(tuple(x.shape), wa.shape[2:], stride, dilation, pairs, out_size)
    cols = _kernels.im2col(_planes(x.numpy(force=True), geo), geo)     # (C * K, N * L)
    y = wa.reshape(o, -1) @ cols                                         # (O, N * L)
    if b is not None:
        y += b.numpy(force=True)[:, None]
    out = lucid.from_numpy(np.ascontiguousarray(y.reshape((o, n) + out_size).swapaxes(0, 1)))
    if core.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w, b)):
        _py_attach(_py_node(ConvolutionBackward), out, (x, w, b), (x, w),
                   (cols if w.requires_grad else None, geo, composite))
    return out


# -- max pooling ---------------------------------------------------------------------------------

class MaxPoolBackward(PyNode):
    """Backward of max pooling: g sent to the first maximum of each window; in graph mode
    the composite's derivative."""

    def grad_formula_impl(self, g, x):
        arg, geo, composite = self.ctx
        if core.is_grad_enabled():
            with lucid.enable_grad():
                return _vjp(composite(x), (x,), g)[0]
        gx = _kernels.max_pool_grad(_planes(g.numpy(), geo[:2] + geo[12:]), arg, geo)
        return lucid.from_numpy(gx.reshape(tuple(x.shape)))


MaxPoolBackward.schema_v1 = register("max_pool", "KeepInput", 1, True, False,
                                     node=MaxPoolBackward)


def max_pool(x, kernel, stride, pairs, dilation, out_size, composite, with_indices=False):
    """Max over each window of x (N, C, *spatial) (1-d or 2-d) padded with -inf by
    ``pairs``; ``composite(x)``: the same in lucid ops (the graph-mode formula).
    ``with_indices``: also each window's argmax as a flat index into its input plane."""
    geo = _geometry(tuple(x.shape), kernel, stride, dilation, pairs, out_size)
    y, arg = _kernels.max_pool(_planes(x.numpy(force=True), geo), geo)
    out = lucid.from_numpy(y.reshape(tuple(x.shape[:2]) + tuple(out_size)))
    if core.is_grad_enabled() and x.requires_grad:
        _py_attach(_py_node(MaxPoolBackward), out, (x,), (x,), (arg, geo, composite))
    if with_indices:
        return out, lucid.from_numpy(arg.reshape(out.shape).copy())   # backward keeps arg
    return out


_C_INT_MAX = 2**31 - 1


def fits(x_shape, w_shape, stride, pairs, dilation, out_size, kernel=None):
    """Every size, step and index the kernels compute stays far inside their integers
    (huge strides or dilations that torch accepts go to the composite form instead)."""
    kernel = tuple(w_shape[2:]) if kernel is None else tuple(kernel)
    vals = list(x_shape) + list(kernel) + list(stride) + list(dilation) + list(out_size)
    vals += [p for pair in pairs for p in pair]
    ext = [d * (k - 1) + s * o + lo + hi for k, s, d, o, (lo, hi)
           in zip(kernel, stride, dilation, out_size, pairs)]
    return max(vals + ext) <= _C_INT_MAX
