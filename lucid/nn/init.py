"""lucid.nn.init: in-place initialisers with torch's names, formulas and defaults.

Values are drawn from lucid's random stream (``lucid.manual_seed`` or ``generator=``)
and written into the tensor's memory; nothing is recorded by autograd.
"""
import math

import numpy as np

import lucid
from lucid._core.core import _assign_, _bump_version


def _fill(tensor, values):
    """Write ``values`` into the tensor's storage (a gpu tensor gets a new MLX array) and
    bump its version, as an in-place op does."""
    if tensor.is_cuda:
        full = np.broadcast_to(np.asarray(values), tuple(tensor.shape))
        _assign_(tensor, lucid.tensor(np.array(full), dtype=tensor.dtype, device="gpu"))
        return tensor
    tensor.numpy(force=True)[...] = values
    _bump_version(tensor)
    return tensor


def calculate_gain(nonlinearity, param=None):
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = int(np.prod(tensor.shape[2:])) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    u = lucid.rand(*tensor.shape, generator=generator, dtype=lucid.float64).numpy()
    return _fill(tensor, a + (b - a) * u)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    z = lucid.randn(*tensor.shape, generator=generator, dtype=lucid.float64).numpy()
    return _fill(tensor, mean + std * z)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) resampled until inside [a, b]."""
    out = np.empty(tensor.shape)
    flat = out.reshape(-1)
    todo = np.arange(flat.size)
    while todo.size:
        z = mean + std * lucid.randn(todo.size, generator=generator, dtype=lucid.float64).numpy()
        ok = (z >= a) & (z <= b)
        flat[todo[ok]] = z[ok]
        todo = todo[~ok]
    return _fill(tensor, out)


def constant_(tensor, val):
    return _fill(tensor, val)


def ones_(tensor):
    return _fill(tensor, 1.0)


def zeros_(tensor):
    return _fill(tensor, 0.0)


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    d = tensor.ndim
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out = np.zeros(tensor.shape)
    o = tensor.shape[0] // groups
    for g in range(groups):
        for i in range(min(o, tensor.shape[1])):
            centre = tuple(s // 2 for s in tensor.shape[2:])
            out[(g * o + i, i) + centre] = 1
    return _fill(tensor, out)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tuple(tensor.shape):
        return tensor
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / _fan(tensor, mode))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tuple(tensor.shape):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = lucid.randn(rows, cols, generator=generator, dtype=lucid.float64).numpy()
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, gain * q.reshape(tensor.shape))
