"""Entry points into the C-level engine (lucid/_core/core.pyx)."""
from lucid._core import core


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return tuple(x)
    return (x,)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves, or, given
    ``inputs``, into the ``.grad`` of those tensors only."""
    tensors = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors) or (None,) * len(tensors)
    core._backward(tensors, grads, retain_graph, create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """The gradients of ``outputs`` w.r.t. ``inputs``, returned (no ``.grad`` is touched).

    ``grad_outputs`` weights each output (needed for non-scalar outputs);
    ``create_graph=True`` records the backward so it can be differentiated again.
    """
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grads = _as_tuple(grad_outputs) or (None,) * len(outputs)
    return core._grad(outputs, inputs, grads, retain_graph, create_graph, allow_unused)
