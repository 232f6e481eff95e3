"""Gradient clipping and flat parameter vectors (torch.nn.utils): clip_grad_norm_,
clip_grad_value_, get_total_norm, clip_grads_with_norm_, parameters_to_vector,
vector_to_parameters. Gradients are changed in place (on the cpu through their NumPy
storage, on the gpu by replacing their MLX array); nothing is recorded by autograd.
``foreach`` is accepted for torch's signatures: each gradient is one lucid op anyway."""
import math

import numpy as np

import lucid
from lucid._core.core import _assign_, _bump_version


def _as_list(tensors):
    return [tensors] if isinstance(tensors, lucid.Tensor) else list(tensors)


def _grads(parameters):
    return [p.grad for p in _as_list(parameters) if p.grad is not None]


def _scale_(g, coef):
    """g *= coef in place (coef a 0-d tensor), on g's device and in g's dtype."""
    g.mul_(coef.to(g.device))


def _common_float(dtypes):
    """torch's promotion among floating dtypes (float16 with bfloat16 gives float32)."""
    if len(dtypes) == 1:
        return next(iter(dtypes))
    return lucid.float64 if lucid.float64 in dtypes else lucid.float32


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type`` norm of all ``tensors`` together (the norm of their norms), as a
    0-d tensor on the first tensor's device."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return lucid.tensor(0.0)
    with lucid.no_grad():
        device = tensors[0].device
        norms = [lucid.norm(t.reshape(-1), norm_type).to(device) for t in tensors]
        dtype = _common_float({n.dtype for n in norms})
        total = lucid.norm(lucid.stack([n.to(dtype) for n in norms]), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by ``min(1, max_norm / (total_norm + 1e-6))``."""
    grads = _grads(parameters)
    if not grads:
        return
    with lucid.no_grad():
        coef = lucid.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            _scale_(g, coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale the gradients of ``parameters`` so that their total ``norm_type`` norm is at
    most ``max_norm``; returns the total norm before clipping (a 0-d tensor)."""
    parameters = _as_list(parameters)
    total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """Deprecated alias of clip_grad_norm_ (as torch)."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of ``parameters`` to [-clip_value, clip_value] in place."""
    c = float(clip_value)
    for g in _grads(parameters):
        if g.device == "gpu":
            _assign_(g, lucid.clamp(g.detach(), -c, c))
            continue
        a = g.numpy(force=True)
        np.clip(a, -c, c, out=a)
        _bump_version(g)


def parameters_to_vector(parameters):
    """All parameters flattened into one 1-d tensor (a copy), in order."""
    params = _as_list(parameters)
    _same_device(params)
    return lucid.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec, parameters):
    """Give ``parameters``, in order, the values of the 1-d ``vec`` (each parameter's
    ``.data`` becomes a view of its slice of ``vec``, as torch)."""
    if not isinstance(vec, lucid.Tensor):
        raise TypeError(f"expected lucid.Tensor, but got: {type(vec).__name__}")
    params = _as_list(parameters)
    _same_device(params)
    n = sum(p.numel() for p in params)
    if vec.dim() != 1 or vec.shape[0] != n:
        raise lucid.ArgumentError(f"vector_to_parameters: vec has shape {tuple(vec.shape)}, "
                                  f"the parameters hold {n} elements")
    start = 0
    with lucid.no_grad():
        for p in params:
            k = p.numel()
            p.data = vec[start:start + k].detach().reshape(tuple(p.shape))
            start += k


def _same_device(params):
    devices = {str(p.device) for p in params}
    if len(devices) > 1:
        raise TypeError(f"Found two parameters on different devices: {sorted(devices)}")
