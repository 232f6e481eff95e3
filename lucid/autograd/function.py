"""Extending autograd from Python: ``lucid.autograd.Function``, as ``torch.autograd.Function``.

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y

    Exp.apply(x)

``forward`` runs with grad mode off; ``backward`` runs with grad mode as the engine sets it,
so a backward written in lucid ops is itself differentiated under ``create_graph=True``
(second and higher derivatives). Each Function gets its own node class,
``<Name>Backward``, a :class:`lucid._core.core.PyNode`; the node is the ``ctx``.

A node has one output. A Function with several differentiable outputs records its node on
one flat tensor holding them all and hands out reshaped slices of it (recorded views), so
the backward gets every output's gradient at once (zeros for outputs that were unused).
The flat tensor's dtype holds each output's values exactly (float16 and bfloat16 share
float32), and each slice is cast back to its output's dtype and moved to its device, so
outputs and the gradients handed to backward keep their own dtype and device, as torch's.
"""
import functools

import numpy as np

from lucid._core import core
from lucid._core.core import PyNode, Tensor, _py_attach, _py_node, _set_grad_enabled

__all__ = ["Function", "FunctionCtx", "once_differentiable", "record_multi"]


def _ops():
    return core.ops


class FunctionCtx(PyNode):
    """The ``ctx`` of a Function (and its backward node)."""

    def save_for_backward(self, *tensors):
        """Keep tensors (inputs, outputs or intermediates; None allowed) for backward. They
        are version-checked: modifying one in place before backward raises there."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save tensors (or None), got "
                                f"{type(t).__name__}; store other values as ctx attributes")
        self._to_save = tensors

    def mark_non_differentiable(self, *tensors):
        """Outputs that get no gradient (indices, masks); backward receives zeros for them."""
        self._non_diff = tuple(tensors)

    def mark_dirty(self, *tensors):
        raise NotImplementedError("lucid.autograd.Function does not support in-place forwards "
                                  "(mark_dirty); return a new tensor")

    def set_materialize_grads(self, value):
        """False: backward gets None (not zeros) for outputs that received no gradient."""
        self._materialize = bool(value)

    @property
    def saved_tensors(self):
        vals = getattr(self, "_unpacked", None)
        if vals is None:
            vals = PyNode.saved_tensors.__get__(self)
        out = []
        for kind, j in getattr(self, "_save_map", ()):
            if kind == "none":
                out.append(None)
            elif kind == "saved":
                out.append(vals[j])
            else:                      # output j of a packed (multi-output) node
                out.append(self._slice(vals[self._packed_slot], j))
        return tuple(out)

    def _slice(self, packed, k):
        off, n, shape, dt, dev = self._layout[k]
        o = _ops().reshape(_ops().narrow(packed, 0, off, n), shape)
        if o.dtype is not dt:
            o = o.to(dt)            # (before the move: the gpu has no float64)
        return o if o.device == dev else o.to(dev)

    def grad_formula_impl(self, g, *saved):
        self._unpacked = saved
        try:
            grad_outputs = self._grad_outputs(g)
            res = self._function.backward(self, *grad_outputs)
        finally:
            self._unpacked = None
        return self._check_grads(res)

    def _grad_outputs(self, g):
        gos = []
        for k, (diff, shape, dt, dev) in enumerate(self._out_info):
            if diff is None:           # not a tensor output
                gos.append(None)
            elif not diff:
                gos.append(_zeros(shape, dt, dev) if self._materialize else None)
            elif self._layout is None:
                gos.append(g)
            else:
                gos.append(self._slice(g, k))
        return gos

    def _check_grads(self, res):
        name = type(self).__name__
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self._inputs_meta)
        if len(res) > n and all(r is None for r in res[n:]):
            res = res[:n]
        if len(res) != n:
            raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                               f"(expected {n}, got {len(res)})")
        out = []
        for i, (r, meta) in enumerate(zip(res, self._inputs_meta)):
            if r is None:
                out.append(None)
                continue
            if meta is None:
                raise RuntimeError(f"function {name} returned a gradient different than None at "
                                   f"position {i + 1}, but the corresponding forward input was "
                                   "not a Tensor")
            if not self.needs_input_grad[i]:
                out.append(None)
                continue
            if not isinstance(r, Tensor):
                r = core.tensor(r)
            shape, dt, dev = meta
            if r.shape != shape:
                try:
                    ok = np.broadcast_shapes(shape, r.shape) == r.shape
                except ValueError:
                    ok = False
                if not ok:
                    raise RuntimeError(f"function {name} returned an invalid gradient at index "
                                       f"{i} - got {list(r.shape)} but expected shape compatible "
                                       f"with {list(shape)}")
                r = _sum_to(r, shape)
            if r.dtype is not dt:
                r = r.to(dt)
            if r.device != dev:        # each input's gradient on its own device
                r = r.to(dev)
            out.append(r)
        return tuple(out)


def _zeros(shape, dt, dev):
    z = core.from_numpy(np.zeros(shape, dtype=dt.numpy_dtype))
    return z if z.device == dev else z.to(dev)


def _sum_to(g, shape):
    lead = g.ndim - len(shape)
    if lead:
        g = _ops().sum(g, tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    if axes:
        g = _ops().sum(g, axes, True)
    return g


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``
    (or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``); call ``apply``."""

    _node_cls = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._node_cls = type(cls.__name__ + "Backward", (FunctionCtx,),
                             {"_function": cls, "__module__": cls.__module__})

    def __init__(self, *args, **kwargs):
        raise RuntimeError("lucid.autograd.Function is used through its class: call "
                           f"{type(self).__name__}.apply(...), never an instance")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward to be differentiated")

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        if cls._node_cls is None:
            raise RuntimeError("apply() is called on a subclass of Function")
        ctx = _py_node(cls._node_cls)
        grad_on = core.is_grad_enabled()
        ctx.needs_input_grad = tuple(bool(grad_on and isinstance(a, Tensor) and a.requires_grad)
                                     for a in args)
        ctx._to_save = ()
        ctx._non_diff = ()
        ctx._materialize = True
        ctx._unpacked = None
        ctx._layout = None
        split = cls.setup_context is not Function.setup_context
        prev = _set_grad_enabled(False)
        try:
            if split:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        finally:
            _set_grad_enabled(prev)
        if not any(ctx.needs_input_grad):
            return out
        return _record(ctx, args, out)


def _record(ctx, args, out):
    is_tuple = isinstance(out, tuple)
    raw = out if is_tuple else (out,)
    non_diff = {id(t) for t in ctx._non_diff}
    arg_ids = {id(a) for a in args if isinstance(a, Tensor)}
    # an output that is an input (or already has a history) gets an alias of its own
    outs = [o.detach() if isinstance(o, Tensor) and (id(o) in arg_ids or o.requires_grad) else o
            for o in raw]
    alias = {id(r): o for r, o in zip(raw, outs)}
    diff = [isinstance(o, Tensor) and o.is_floating_point() and id(r) not in non_diff
            for r, o in zip(raw, outs)]
    ctx._out_info = [(None, None, None, None) if not isinstance(o, Tensor)
                     else (d, o.shape, o.dtype, o.device) for o, d in zip(outs, diff)]
    ctx._inputs_meta = [(a.shape, a.dtype, a.device) if isinstance(a, Tensor) else None
                        for a in args]
    n_diff = sum(diff)
    if n_diff == 0:
        return out
    out_index = {id(r): k for k, r in enumerate(raw)}
    save_map, saved = [], []
    for t in ctx._to_save:
        if t is None:
            save_map.append(("none", 0))
        elif n_diff > 1 and id(t) in out_index and diff[out_index[id(t)]]:
            save_map.append(("out", out_index[id(t)]))
        else:
            save_map.append(("saved", len(saved)))
            saved.append(alias.get(id(t), t))
    ctx._save_map = save_map
    ctx._non_diff = ()             # identities are read; keep no output alive through the node
    if n_diff == 1:
        target = outs[diff.index(True)]
        _py_attach(ctx, target, tuple(args), tuple(saved))
        ctx._to_save = ()
        final = outs
    else:
        packed, layout = _pack([o if d else None for o, d in zip(outs, diff)])
        ctx._layout = layout
        if any(k == "out" for k, _ in save_map):
            ctx._packed_slot = len(saved)
            saved.append(packed)
        _py_attach(ctx, packed, tuple(args), tuple(saved))
        ctx._to_save = ()
        final = [ctx._slice(packed, k) if d else o for k, (o, d) in enumerate(zip(outs, diff))]
    return tuple(final) if is_tuple else final[0]


def _exact_common_dtype(dts):
    """The narrowest float dtype holding every value of each of ``dts`` exactly."""
    names = {d.name for d in dts}
    if len(names) == 1:
        return dts[0]
    return core.as_dtype("float64" if "float64" in names else "float32")


def _pack(outs):
    """One flat tensor holding every differentiable output's values exactly: on the gpu if
    every output is there, else on the cpu (a slice moves back to its output's device)."""
    live = [o for o in outs if o is not None]
    dt = _exact_common_dtype([o.dtype for o in live])
    dev = live[0].device if all(o.device == live[0].device for o in live) else core.device("cpu")
    layout, parts, off = {}, [], 0
    prev = _set_grad_enabled(False)
    try:
        for k, o in enumerate(outs):
            if o is None:
                continue
            n = o.numel()
            layout[k] = (off, n, o.shape, o.dtype, o.device)
            parts.append(_ops().reshape(o.to(dev).to(dt), (n,)))
            off += n
        packed = _ops().cat(parts)          # (a Function packs two or more outputs)
    finally:
        _set_grad_enabled(prev)
    return packed, layout


def record_multi(node_cls, inputs, outputs, saved=(), ctx=None):
    """Record one PyNode for an op with several differentiable outputs (ndarrays of one
    dtype): returns the output tensors, reshaped slices of the packed tensor the node is
    recorded on. ``node_cls.grad_formula_impl(g, *saved)`` gets the packed gradient; its
    ``ctx`` is ``(user ctx, layout)``, and :func:`unpack` splits a packed tensor."""
    if len({np.asarray(o).dtype for o in outputs}) > 1:   # concatenate would promote them
        raise TypeError("record_multi: the outputs must share one dtype, got "
                        f"{sorted({str(np.asarray(o).dtype) for o in outputs})}; a "
                        "Function keeps outputs of several dtypes apart")
    parts = [np.ascontiguousarray(o).reshape(-1) for o in outputs]
    dt = core.as_dtype(outputs[0].dtype)
    packed = core.from_numpy(np.concatenate(parts) if parts else np.zeros(0, dt.numpy_dtype))
    layout, off = [], 0
    for o in outputs:
        layout.append((off, o.size, o.shape))
        off += o.size
    node = _py_node(node_cls)
    _py_attach(node, packed, tuple(inputs), tuple(saved), (ctx, layout))
    return unpack(packed, layout)


def unpack(packed, layout):
    """The outputs held by a packed tensor (or gradient), as recorded slices."""
    ops = _ops()
    return [ops.reshape(ops.narrow(packed, 0, off, n), shape) for off, n, shape in layout]


def once_differentiable(fn):
    """Decorate a backward that is not itself differentiable: it runs with grad mode off."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = _set_grad_enabled(False)
        try:
            return fn(ctx, *args)
        finally:
            _set_grad_enabled(prev)
    return wrapper
