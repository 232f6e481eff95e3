"""lucid.nn.functional: layers, activations and losses as functions (torch.nn.functional).

Most of it is composed from lucid's public ops, so backward and double backward come
from those ops' nodes. The hot paths of training are single ops with one node each:
``linear`` (LinearBackward, lucid._core.linalg), ``cross_entropy`` (one kernel pass for
the loss and its gradient, CrossEntropyBackward, lucid._core.reduce), and 1-d / 2-d
convolution and max pooling (im2col / col2im and max pooling kernels in C,
lucid.nn._im2col). Each of these keeps its composite form, which serves the gpu, half
dtypes and the other cases, and whose derivatives are the single ops' graph-mode
formulas. The composite convolutions and pools gather their windows as strided slices
of the (padded) input, one per kernel offset, stacked into an im2col matrix and reduced
by one batched matmul (or a max/sum over the window axis).
"""
import functools
import math
import numbers

import numpy as np

import lucid
from lucid._core import linalg as _linalg_ops
from lucid._core import reduce as _reduce_ops
from lucid._core import unary as _unary
from lucid._core.core import _bump_version
from lucid.nn import _im2col

_reduction_names = ("none", "mean", "sum")


def _tuple(v, n, name="argument"):
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v}")
        return tuple(int(a) for a in v)
    return (int(v),) * n


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction!r} is not a valid value for reduction; expected one of "
                     f"{_reduction_names}")


def _fp32(fn):
    """The AMP policy ForceFP32 of losses and normalisations, as PyTorch's autocast: half
    (float16 / bfloat16) tensor arguments are upcast to float32 by recorded casts, so the
    result is float32 and each half leaf still gets its gradient in its own dtype."""
    half = (lucid.float16, lucid.bfloat16)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = [a.float() if isinstance(a, lucid.Tensor) and a.dtype in half else a for a in args]
        kwargs = {k: (v.float() if isinstance(v, lucid.Tensor) and v.dtype in half else v)
                  for k, v in kwargs.items()}
        return fn(*args, **kwargs)
    wrapper.amp_policy = "ForceFP32"
    return wrapper


def _const(value, like):
    """A scalar tensor with ``like``'s dtype (keeps float32 graphs in float32)."""
    return lucid.tensor(value, dtype=like.dtype, device=like.device)


# -- linear ------------------------------------------------------------------------------------

def linear(input, weight, bias=None):
    """``input @ weight.T + bias``; weight has shape (out_features, in_features). One op
    (LinearBackward) on cpu float tensors of one dtype; matmul and add otherwise."""
    out = _linalg_ops.linear(input, weight, bias)
    if out is not None:
        return out
    out = lucid.matmul(input, weight.T)
    if bias is not None and lucid.is_autocast_enabled():
        bias = lucid.amp._lowp(bias)    # the matmul family runs in the autocast dtype
    return out + bias if bias is not None else out


def bilinear(input1, input2, weight, bias=None):
    """``y_k = x1 @ W_k @ x2 + b_k``; weight (out, in1, in2)."""
    out = (lucid.matmul(input1.unsqueeze(-2).unsqueeze(-3), weight)  # (..., out, 1, in2)
           .squeeze(-2) * input2.unsqueeze(-2)).sum(-1)
    return out + bias if bias is not None else out


# -- activations ---------------------------------------------------------------------------------

def relu(input, inplace=False):
    return lucid.relu(input)


def relu6(input, inplace=False):
    return lucid.relu6(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return lucid.leaky_relu(input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return lucid.elu(input, alpha)


def selu(input, inplace=False):
    return lucid.selu(input)


def celu(input, alpha=1.0, inplace=False):
    """x for x > 0, alpha * (exp(x / alpha) - 1) elsewhere: one C kernel."""
    return _unary.celu(input, alpha)


def gelu(input, approximate="none"):
    return lucid.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return lucid.silu(input)


def mish(input, inplace=False):
    return lucid.mish(input)


def sigmoid(input):
    return lucid.sigmoid(input)


def tanh(input):
    return lucid.tanh(input)


def hardsigmoid(input, inplace=False):
    return lucid.hardsigmoid(input)


def hardswish(input, inplace=False):
    return lucid.hardswish(input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """min(max(x, min_val), max_val): one C kernel; the gradient is 0 at the bounds."""
    return _unary.hardtanh(input, min_val, max_val)


def softsign(input):
    return lucid.softsign(input)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold`` (as torch):
    one C kernel."""
    return _unary.softplus_beta(input, beta, threshold)


def logsigmoid(input):
    """log(sigmoid(x)), one fused kernel."""
    return lucid.logsigmoid(input)


def tanhshrink(input):
    return input - lucid.tanh(input)


def softmax(input, dim=None, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return lucid.softmax(input, dim=dim if dim is not None else -1)


def log_softmax(input, dim=None, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return lucid.log_softmax(input, dim=dim if dim is not None else -1)


def softmin(input, dim=None, dtype=None):
    return softmax(-input, dim, dtype)


def glu(input, dim=-1):
    a, b = lucid.chunk(input, 2, dim)
    return a * lucid.sigmoid(b)


# -- dropout, normalisation, embedding -------------------------------------------------------------

def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = (lucid.rand(*input.shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype)
    return input * (keep * (1.0 / (1.0 - p)))


@_fp32
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` dims (biased variance)."""
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    n = len(normalized_shape)
    if tuple(input.shape[input.ndim - n:]) != tuple(normalized_shape):
        raise ValueError(f"layer_norm: input shape {tuple(input.shape)} does not end with "
                         f"normalized_shape {tuple(normalized_shape)}")
    dims = tuple(range(input.ndim - n, input.ndim))
    mu = input.mean(dims, keepdim=True)
    xc = input - mu
    var = (xc * xc).mean(dims, keepdim=True)
    out = xc * lucid.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch statistics in training (and running stats updated in place, unbiased
    variance), running statistics in eval. Channels are dim 1."""
    shape = [1] * input.ndim
    shape[1] = input.shape[1]
    dims = tuple(d for d in range(input.ndim) if d != 1)
    if training:
        n = input.numel() // input.shape[1]
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {tuple(input.shape)}")
        mu = input.mean(dims, keepdim=True)
        xc = input - mu
        var = (xc * xc).mean(dims, keepdim=True)
        if running_mean is not None and running_var is not None:
            with lucid.no_grad():
                m = momentum
                rm = running_mean.detach()
                rv = running_var.detach()
                rm.mul_(1 - m).add_(mu.detach().reshape(-1).to(rm.dtype) * m)
                rv.mul_(1 - m).add_(var.detach().reshape(-1).to(rv.dtype) * (m * n / (n - 1)))
        out = xc * lucid.rsqrt(var + eps)
    else:
        mu = running_mean.reshape(shape)
        var = running_var.reshape(shape)
        out = (input - mu) * lucid.rsqrt(var + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@_fp32
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    n, c = input.shape[0], input.shape[1]
    x = input.reshape(n, num_groups, -1)
    mu = x.mean(-1, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdim=True)
    out = (xc * lucid.rsqrt(var + eps)).reshape(*input.shape)
    shape = [1] * input.ndim
    shape[1] = c
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer ``input``; the ``padding_idx`` row gets no
    gradient. With ``max_norm``, each picked row whose ``norm_type``-norm exceeds it is
    first scaled in place to ``max_norm / (norm + 1e-7)`` times itself, as torch's
    embedding_renorm_ (not recorded by autograd). ``scale_grad_by_freq`` divides each
    row's gradient by the number of times the row occurs in ``input``."""
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported")
    if max_norm is not None:
        _embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    out = weight[input]
    if scale_grad_by_freq and out.requires_grad:
        idx = input.detach().numpy(force=True)
        _, inverse, counts = np.unique(idx, return_inverse=True, return_counts=True)
        s = lucid.tensor((1.0 / counts[inverse.reshape(idx.shape)])[..., None],
                         dtype=out.dtype, device=out.device)
        out.register_hook(lambda g: g * s)          # each row's gradient / its count
    if padding_idx is not None and weight.requires_grad:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        keep = (input != padding_idx).unsqueeze(-1)
        out = lucid.where(keep, out, out.detach())
    return out


def _embedding_renorm_(weight, input, max_norm, norm_type):
    if weight.device != "cpu":
        raise NotImplementedError("embedding: max_norm is supported on the cpu device only")
    w = weight.detach().numpy()
    rows = np.unique(input.detach().numpy(force=True))
    if rows.size == 0:
        return
    if rows.min() < -w.shape[0] or rows.max() >= w.shape[0]:
        raise IndexError(f"embedding: index out of range for {w.shape[0]} rows")
    rows = np.unique(rows % w.shape[0])
    norms = np.linalg.norm(w[rows], ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        scale = (max_norm / (norms[big] + 1e-7)).astype(w.dtype)
        w[rows[big]] *= scale[:, None]
        _bump_version(weight)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding along a new last dim."""
    if not isinstance(tensor, lucid.Tensor) or tensor.dtype not in (lucid.int32, lucid.int64):
        raise TypeError("one_hot(): tensor must be an integer (int32 or int64) lucid Tensor, "
                        f"got {getattr(tensor, 'dtype', type(tensor).__name__)}")
    if tensor.numel() and int(tensor.min().item()) < 0:
        raise ValueError("one_hot(): class values must be non-negative")
    if num_classes < 0:
        num_classes = int(tensor.max().item()) + 1
    elif tensor.numel() and int(tensor.max().item()) >= num_classes:
        raise ValueError(f"one_hot(): class values must be smaller than num_classes "
                         f"({num_classes})")
    return (tensor.unsqueeze(-1) == lucid.arange(num_classes, dtype=tensor.dtype, device=tensor.device)).long()


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    n = lucid.norm(input, p, dim=dim, keepdim=True)
    return input / lucid.clamp(n, min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    n1 = lucid.clamp(lucid.norm(x1, 2, dim=dim), min=eps)
    n2 = lucid.clamp(lucid.norm(x2, 2, dim=dim), min=eps)
    return (x1 * x2).sum(dim) / (n1 * n2)


def pad(input, pad, mode="constant", value=None):
    return lucid.pad(input, pad, mode=mode, value=0 if value is None else value)


# -- windows: the shared im2col of convolutions and pools ---------------------------------------------

def _windows(x, kernel, stride, dilation, out_size):
    """(N, C, *spatial) -> (N, C, K, *out), one strided slice per kernel offset."""
    nd = len(kernel)
    cols = []
    for offs in np.ndindex(*kernel):
        idx = [slice(None), slice(None)]
        for a in range(nd):
            start = offs[a] * dilation[a]
            idx.append(slice(start, start + stride[a] * (out_size[a] - 1) + 1, stride[a]))
        cols.append(x[tuple(idx)])
    return lucid.stack(cols, dim=2)


def _conv_out(size, k, s, p_lo, p_hi, d):
    return (size + p_lo + p_hi - d * (k - 1) - 1) // s + 1


def _padding_pairs(padding, kernel, dilation, nd, stride):
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            pairs = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pairs.append((total // 2, total - total // 2))
            return pairs
        raise ValueError(f"invalid padding string {padding!r}, expected 'valid' or 'same'")
    return [(p, p) for p in _tuple(padding, nd, "padding")]


def _pad_spatial(x, pairs, value=0.0):
    if not any(lo or hi for lo, hi in pairs):
        return x
    flat = []
    for lo, hi in reversed(pairs):  # F.pad order: last dim first
        flat += [lo, hi]
    return lucid.pad(x, tuple(flat), value=value)


def _convnd(input, weight, bias, stride, padding, dilation, groups, nd):
    if input.ndim == nd + 1:                    # (C, *spatial), as torch accepts
        return _convnd(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups,
                       nd).squeeze(0)
    if input.ndim != nd + 2:
        raise ValueError(f"conv{nd}d expects a {nd + 2}-d (batched) or {nd + 1}-d "
                         f"(unbatched) input, got shape {tuple(input.shape)}")
    c = input.shape[1]
    o, cg = weight.shape[0], weight.shape[1]
    kernel = tuple(weight.shape[2:])
    stride = _tuple(stride, nd, "stride")
    dilation = _tuple(dilation, nd, "dilation")
    if c != cg * groups or o % groups:
        raise ValueError(f"conv{nd}d: input has {c} channels, weight {tuple(weight.shape)} "
                         f"with groups={groups} expects {cg * groups}")
    pairs = _padding_pairs(padding, kernel, dilation, nd, stride)
    out_size = tuple(_conv_out(input.shape[2 + a], kernel[a], stride[a], *pairs[a], dilation[a])
                     for a in range(nd))
    if any(s <= 0 for s in out_size):
        raise ValueError(f"conv{nd}d: kernel {kernel} is larger than the padded input")
    if groups == 1 and _im2col.applies(nd, input, weight, bias):
        composite = functools.partial(_conv_composite, bias=None, stride=stride, pairs=pairs,
                                      dilation=dilation, groups=1, out_size=out_size)
        return _im2col.convolution(input, weight, bias, stride, pairs, dilation, out_size,
                                   composite)
    return _conv_composite(input, weight, bias, stride, pairs, dilation, groups, out_size)


def _conv_composite(input, weight, bias, stride, pairs, dilation, groups, out_size):
    """Convolution in lucid ops: windows stacked (im2col), one batched matmul."""
    nd = len(out_size)
    n, c = input.shape[0], input.shape[1]
    o, cg = weight.shape[0], weight.shape[1]
    kernel = tuple(weight.shape[2:])
    x = _pad_spatial(input, pairs)
    k = int(np.prod(kernel))
    l_ = int(np.prod(out_size))
    cols = _windows(x, kernel, stride, dilation, out_size)      # (N, C, K, *out)
    if groups == 1:
        out = lucid.matmul(weight.reshape(o, c * k), cols.reshape(n, c * k, l_))
    else:
        cols = cols.reshape(n, groups, cg * k, l_)
        w = weight.reshape(groups, o // groups, cg * k)
        out = lucid.matmul(w, cols)                             # (N, g, O/g, L)
    out = out.reshape(n, o, *out_size)
    if bias is not None:
        out = out + bias.reshape(o, *([1] * nd))
    return out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 2)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 3)


def _dilate(x, axis, s):
    """Insert ``s - 1`` zeros between the elements of ``x`` along ``axis``."""
    if s == 1:
        return x
    size = x.shape[axis]
    x = x.unsqueeze(axis + 1)
    p = [0, 0] * (x.ndim - axis - 2) + [0, s - 1]
    x = lucid.pad(x, tuple(p))
    shape = list(x.shape)
    shape[axis:axis + 2] = [size * s]
    x = x.reshape(*shape)
    return lucid.narrow(x, axis, 0, (size - 1) * s + 1)


def _conv_transposend(input, weight, bias, stride, padding, output_padding, groups, dilation,
                      nd):
    """The adjoint of convolution: dilate the input by the stride, pad by
    ``d (k - 1) - p`` (crop when negative), and convolve with the flipped kernel."""
    if input.ndim == nd + 1:                    # (C, *spatial), as torch accepts
        return _conv_transposend(input.unsqueeze(0), weight, bias, stride, padding,
                                 output_padding, groups, dilation, nd).squeeze(0)
    if input.ndim != nd + 2:
        raise ValueError(f"conv_transpose{nd}d expects a {nd + 2}-d (batched) or {nd + 1}-d "
                         f"(unbatched) input, got shape {tuple(input.shape)}")
    stride = _tuple(stride, nd, "stride")
    padding = _tuple(padding, nd, "padding")
    output_padding = _tuple(output_padding, nd, "output_padding")
    dilation = _tuple(dilation, nd, "dilation")
    cin, og = weight.shape[0], weight.shape[1]
    kernel = tuple(weight.shape[2:])
    x = input
    for a in range(nd):
        x = _dilate(x, 2 + a, stride[a])
    pairs = []
    for a in range(nd):
        e = dilation[a] * (kernel[a] - 1) - padding[a]
        pairs.append((e, e + output_padding[a]))
    x = _pad_spatial(x, pairs)
    w = lucid.flip(weight, tuple(range(2, 2 + nd)))
    w = w.reshape(groups, cin // groups, og, *kernel).transpose(1, 2)
    w = w.reshape(groups * og, cin // groups, *kernel)
    return _convnd(x, w, bias, 1, 0, dilation, groups, nd)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 1)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 2)


# -- pools ----------------------------------------------------------------------------------------------

def _pool_out(size, k, s, p, d, ceil_mode):
    eff = d * (k - 1) + 1
    if ceil_mode:
        out = -(-(size + 2 * p - eff) // s) + 1
        if (out - 1) * s >= size + p:  # the last window must start inside the input or left pad
            out -= 1
    else:
        out = (size + 2 * p - eff) // s + 1
    return out


def _pool_geometry(input, kernel_size, stride, padding, dilation, ceil_mode, nd):
    """kernel, stride, padding, dilation, output size and the (lo, hi) padding of each
    spatial dim (hi grows so that ceil-mode windows fit)."""
    kernel = _tuple(kernel_size, nd, "kernel_size")
    stride = _tuple(stride if stride not in (None, ()) else kernel, nd, "stride")
    padding = _tuple(padding, nd, "padding")
    dilation = _tuple(dilation, nd, "dilation")
    for k, p in zip(kernel, padding):
        if p > k // 2:
            raise ValueError(f"pad should be at most half of effective kernel size, got "
                             f"padding={padding}, kernel_size={kernel}")
    sizes = input.shape[-nd:]
    out = tuple(_pool_out(sizes[a], kernel[a], stride[a], padding[a], dilation[a], ceil_mode)
                for a in range(nd))
    pairs = []
    for a in range(nd):
        need = (out[a] - 1) * stride[a] + dilation[a] * (kernel[a] - 1) + 1
        pairs.append((padding[a], max(padding[a], need - sizes[a] - padding[a])))
    return kernel, stride, padding, dilation, out, pairs


def _pool_prep(input, kernel_size, stride, padding, dilation, ceil_mode, nd, fill):
    kernel, stride, padding, dilation, out, pairs = _pool_geometry(
        input, kernel_size, stride, padding, dilation, ceil_mode, nd)
    x = _pad_spatial(input, pairs, fill)
    return x, kernel, stride, padding, dilation, out


def _batched(input, nd):
    """Pools accept (C, *spatial) as well as (N, C, *spatial)."""
    if input.ndim == nd + 1:
        return input.unsqueeze(0), True
    return input, False


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over each window; ``return_indices`` gives flat indices into each input plane
    (first maximum wins, as torch)."""
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                       2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                       1)


def _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd):
    x0, unb = _batched(input, nd)
    kernel, stride, padding, dilation, out, pairs = _pool_geometry(
        x0, kernel_size, stride, padding, dilation, ceil_mode, nd)
    if _im2col.applies(nd, x0):
        composite = functools.partial(_max_pool_composite, kernel=kernel, stride=stride,
                                      dilation=dilation, out=out, pairs=pairs)
        res = _im2col.max_pool(x0, kernel, stride, pairs, dilation, out, composite,
                               return_indices)
        if unb:
            res = tuple(r.squeeze(0) for r in res) if return_indices else res.squeeze(0)
        return res
    values, arg = _max_pool_composite(x0, kernel, stride, dilation, out, pairs, True)
    if unb:
        values = values.squeeze(0)
    if not return_indices:
        return values
    # window offset -> flat position in the unpadded input plane
    arg = arg.numpy()
    offs = np.array(list(np.ndindex(*kernel)), dtype=np.int64)  # (K, nd)
    sizes = x0.shape[2:]
    flat = np.zeros(arg.shape, dtype=np.int64)
    for a in range(nd):
        base = np.arange(out[a]) * stride[a] - padding[a]
        shape = [1] * arg.ndim
        shape[2 + a] = out[a]
        pos = base.reshape(shape) + offs[arg, a] * dilation[a]
        flat = flat * sizes[a] + pos
    idx = lucid.from_numpy(flat)
    return values, (idx.squeeze(0) if unb else idx)


def _max_pool_composite(x0, kernel, stride, dilation, out, pairs, with_arg=False):
    """Max pooling in lucid ops: the windows stacked, then a max over them."""
    x = _pad_spatial(x0, pairs, -math.inf)
    values, arg = lucid.max(_windows(x, kernel, stride, dilation, out), dim=2)
    return (values, arg) if with_arg else values


def _avg_divisor(sizes, kernel, stride, padding, out, count_include_pad):
    """Per-output-position divisor, as torch computes it (ceil-mode windows that run past
    the padded input count only the padded part)."""
    div = np.ones(out, dtype=np.float64)
    for a in range(len(kernel)):
        start = np.arange(out[a]) * stride[a] - padding[a]
        end = np.minimum(start + kernel[a], sizes[a] + padding[a])
        pool = end - start
        if not count_include_pad:
            pool = np.minimum(end, sizes[a]) - np.maximum(start, 0)
        shape = [1] * len(out)
        shape[a] = out[a]
        div = div * pool.reshape(shape)
    return div


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, 2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None,
                       1)


def _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override, nd):
    x0, unb = _batched(input, nd)
    x, kernel, stride, padding, dilation, out = _pool_prep(
        x0, kernel_size, stride, padding, 1, ceil_mode, nd, 0.0)
    total = _windows(x, kernel, stride, dilation, out).sum(2)
    if divisor_override:
        res = total / float(divisor_override)
    else:
        div = _avg_divisor(x0.shape[2:], kernel, stride, padding, out, count_include_pad)
        res = total * lucid.tensor(1.0 / div, dtype=input.dtype, device=input.device)
    return res.squeeze(0) if unb else res


def _adaptive_matrix(size, out):
    """(out, size) averaging matrix of torch's adaptive pool windows."""
    m = np.zeros((out, size))
    for i in range(out):
        s = (i * size) // out
        e = -(-((i + 1) * size) // out)
        m[i, s:e] = 1.0 / (e - s)
    return m


def adaptive_avg_pool2d(input, output_size):
    x, unb = _batched(input, 2)
    if not isinstance(output_size, (tuple, list)):
        output_size = (output_size, output_size)
    if len(output_size) != 2:
        raise ValueError(f"output_size must be an int or a tuple of 2 (int or None), got "
                         f"{output_size}")
    # None keeps that dimension's input size, as torch
    out = tuple(x.shape[2 + a] if output_size[a] is None else int(output_size[a])
                for a in range(2))
    if min(out) < 1:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be positive, got {out}")
    mh = lucid.tensor(_adaptive_matrix(x.shape[2], out[0]), dtype=x.dtype, device=x.device)
    mw = lucid.tensor(_adaptive_matrix(x.shape[3], out[1]).T, dtype=x.dtype, device=x.device)
    res = lucid.matmul(lucid.matmul(mh, x), mw)
    return res.squeeze(0) if unb else res


def adaptive_avg_pool1d(input, output_size):
    m = lucid.tensor(_adaptive_matrix(input.shape[-1], int(output_size)).T, dtype=input.dtype,
                     device=input.device)
    return lucid.matmul(input, m)


# -- interpolate ---------------------------------------------------------------------------------------------

def _linear_matrix(size, out, align_corners, scale):
    m = np.zeros((out, size))
    for i in range(out):
        if align_corners:
            src = i * (size - 1) / (out - 1) if out > 1 else 0.0
        else:
            src = max((i + 0.5) * scale - 0.5, 0.0)
        i0 = min(int(math.floor(src)), size - 1)
        i1 = min(i0 + 1, size - 1)
        w1 = src - i0
        m[i, i0] += 1.0 - w1
        m[i, i1] += w1
    return m


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims: ``nearest``, ``linear`` (3-d input) or ``bilinear`` (4-d),
    as torch (``align_corners`` for the linear modes)."""
    nd = input.ndim - 2
    if nd < 1:
        raise ValueError("interpolate expects a batched input (N, C, ...)")
    if antialias:
        raise NotImplementedError("interpolate: antialias is not supported")
    in_sizes = input.shape[2:]
    if size is not None:
        out_sizes = _tuple(size, nd, "size")
        scales = [in_sizes[a] / out_sizes[a] for a in range(nd)]
    elif scale_factor is not None:
        sf = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * nd
        out_sizes = tuple(int(math.floor(in_sizes[a] * sf[a])) for a in range(nd))
        if recompute_scale_factor:
            scales = [in_sizes[a] / out_sizes[a] for a in range(nd)]
        else:
            scales = [1.0 / sf[a] for a in range(nd)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if mode in ("nearest", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
        out = input
        for a in range(nd):
            i = np.arange(out_sizes[a])
            if mode == "nearest":
                src = np.floor(i * scales[a])
            else:
                src = np.floor((i + 0.5) * scales[a])
            src = np.minimum(src.astype(np.int64), in_sizes[a] - 1)
            out = lucid.index_select(out, 2 + a, lucid.tensor(src, device=input.device))
        return out
    expected = {"linear": 1, "bilinear": 2, "trilinear": 3}
    if mode not in expected:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported")
    if expected[mode] != nd:
        raise ValueError(f"interpolate: mode {mode!r} expects a {expected[mode] + 2}-d input, "
                         f"got {input.ndim}-d")
    align = bool(align_corners)
    out = input
    for a in range(nd):
        m = lucid.tensor(_linear_matrix(in_sizes[a], out_sizes[a], align, scales[a]),
                         dtype=input.dtype, device=input.device)
        # contract axis 2+a with m: move it last, multiply by m.T, move it back
        out = lucid.matmul(out.transpose(2 + a, -1), m.T).transpose(2 + a, -1)
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


# -- attention ------------------------------------------------------------------------------------------------

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(q k^T * scale + mask) v``; a bool mask keeps the True positions.
    ``enable_gqa``: key and value may have fewer heads (dim -3) than query, a divisor of
    its count; each of their heads serves that many consecutive query heads."""
    l_, s_ = query.shape[-2], key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hq % hk or hq % hv:
            raise ValueError(f"scaled_dot_product_attention: with enable_gqa, the query's "
                             f"{hq} heads must be a multiple of the key's {hk} and the "
                             f"value's {hv}")
        key = lucid.repeat_interleave(key, hq // hk, dim=-3)
        value = lucid.repeat_interleave(value, hq // hv, dim=-3)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = lucid.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: pass attn_mask or is_causal, "
                             "not both")
        attn_mask = lucid.tensor(np.tril(np.ones((l_, s_), dtype=bool)), device=query.device)
    if attn_mask is not None:
        if attn_mask.dtype == lucid.bool_:
            scores = lucid.where(attn_mask, scores, _const(-math.inf, scores))
        else:
            scores = scores + attn_mask
    attn = lucid.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return lucid.matmul(attn, value)


def multi_head_attention_forward(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                                 out_proj_weight, out_proj_bias, key_padding_mask=None,
                                 need_weights=True, attn_mask=None, average_attn_weights=True,
                                 is_causal=False, dropout_p=0.0, training=True, *,
                                 q_proj_weight=None, k_proj_weight=None, v_proj_weight=None,
                                 bias_k=None, bias_v=None, add_zero_attn=False):
    """Inputs are (L, N, E) (sequence first, as torch's functional form). With
    ``in_proj_weight`` None, the three projections are ``q_proj_weight`` (E, E),
    ``k_proj_weight`` (E, kdim) and ``v_proj_weight`` (E, vdim). ``bias_k`` / ``bias_v``
    (1, 1, E) are appended to the projected keys and values, then a zero key and value
    with ``add_zero_attn``; the masks leave those columns open."""
    if (bias_k is None) != (bias_v is None):
        raise ValueError("multi_head_attention_forward: give both bias_k and bias_v or neither")
    l_, n, e = query.shape
    s_ = key.shape[0]
    hd = e // num_heads
    if in_proj_weight is not None:
        wq, wk, wv = lucid.chunk(in_proj_weight, 3, 0)
    elif q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
        raise ValueError("multi_head_attention_forward: without in_proj_weight, "
                         "q_proj_weight, k_proj_weight and v_proj_weight are all needed")
    else:
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = lucid.chunk(in_proj_bias, 3, 0)
    q = linear(query, wq, bq)
    k = linear(key, wk, bk)
    v = linear(value, wv, bv)

    def heads(t, length):  # (L, N, E) -> (N, H, L, hd)
        return t.reshape(length, n, num_heads, hd).permute(1, 2, 0, 3)
    q, k, v = heads(q, l_), heads(k, s_), heads(v, s_)
    extra = []                                   # (1 or N, H, 1, hd) columns to append
    if bias_k is not None:
        extra.append((bias_k.reshape(1, num_heads, 1, hd), bias_v.reshape(1, num_heads, 1, hd)))
    if add_zero_attn:
        z = lucid.zeros(1, num_heads, 1, hd, dtype=q.dtype, device=q.device)
        extra.append((z, z))
    for ek, ev in extra:
        k = lucid.cat([k, ek.expand(n, num_heads, 1, hd)], dim=2)
        v = lucid.cat([v, ev.expand(n, num_heads, 1, hd)], dim=2)
    mask = None
    if is_causal and attn_mask is None:
        attn_mask = lucid.tensor(~np.tril(np.ones((l_, s_), dtype=bool)), device=q.device)
    if attn_mask is not None:  # torch's MHA masks: True (or -inf) means "do not attend"
        if attn_mask.dtype == lucid.bool_:
            mask = lucid.where(attn_mask, _const(-math.inf, q), _const(0.0, q))
        else:
            mask = attn_mask.to(q.dtype)
        if mask.ndim == 3:  # (N*H, L, S)
            mask = mask.reshape(n, num_heads, l_, s_)
    if key_padding_mask is not None:
        if key_padding_mask.dtype == lucid.bool_:
            kpm = lucid.where(key_padding_mask, _const(-math.inf, q), _const(0.0, q))
        else:
            kpm = key_padding_mask.to(q.dtype)
        kpm = kpm.reshape(n, 1, 1, s_)
        mask = kpm if mask is None else mask + kpm
    if mask is not None and extra:
        mask = pad(mask, (0, len(extra)))
    scores = lucid.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    if mask is not None:
        scores = scores + mask
    attn = lucid.softmax(scores, dim=-1)
    if dropout_p > 0.0 and training:
        attn = dropout(attn, dropout_p, True)
    out = lucid.matmul(attn, v)                           # (N, H, L, hd)
    out = out.permute(2, 0, 1, 3).reshape(l_, n, e)
    out = linear(out, out_proj_weight, out_proj_bias)
    if not need_weights:
        return out, None
    if average_attn_weights:
        attn = attn.mean(1)
    return out, attn


# -- losses ---------------------------------------------------------------------------------------------------

@_fp32
def mse_loss(input, target, reduction="mean"):
    d = input - target
    return _reduce(d * d, reduction)


@_fp32
def l1_loss(input, target, reduction="mean"):
    return _reduce(lucid.abs(input - target), reduction)


@_fp32
def huber_loss(input, target, reduction="mean", delta=1.0):
    d = input - target
    a = lucid.abs(d)
    loss = lucid.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
    return _reduce(loss, reduction)


@_fp32
def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    d = input - target
    a = lucid.abs(d)
    if beta == 0.0:
        return _reduce(a, reduction)
    loss = lucid.where(a < beta, (0.5 / beta) * d * d, a - 0.5 * beta)
    return _reduce(loss, reduction)


def _class_weight_shape(ndim):
    return (1, -1) + (1,) * (ndim - 2)


@_fp32
def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """``-input[n, target[n]]`` (times the class weight); class dim is 1. ``mean``
    divides by the summed weights of the targets that are not ignored."""
    if input.ndim == 1:  # unbatched (C,) with a 0-d target
        return nll_loss(input.unsqueeze(0), target.reshape(1), weight, ignore_index, reduction)
    t = target.long()
    valid = t != ignore_index
    safe = lucid.where(valid, t, lucid.zeros_like(t))
    picked = lucid.gather(input, 1, safe.unsqueeze(1)).squeeze(1)
    w = valid.to(input.dtype)
    if weight is not None:
        w = w * weight[safe]
    loss = -picked * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


@_fp32
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """log_softmax over dim 1, then the NLL of class-index targets, or the cross entropy
    with probability targets (same shape as input); torch's label smoothing. On the cpu
    one kernel pass computes the loss and its gradient (lucid's cross_entropy op)."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if reduction not in _reduction_names:
        raise ValueError(f"{reduction!r} is not a valid value for reduction")
    if ignore_index != -100 and target.is_floating_point():
        raise ValueError("cross_entropy: ignore_index is not supported for probability "
                         "targets")
    if input.ndim == 1:  # unbatched: (C,) with a 0-d index or (C,) probabilities
        target = target.unsqueeze(0) if target.is_floating_point() else target.reshape(1)
        out = cross_entropy(input.unsqueeze(0), target, weight, ignore_index, reduction,
                            label_smoothing)
        return out.squeeze(0) if reduction == "none" else out
    out = _reduce_ops.cross_entropy(input, target, weight, ignore_index, reduction,
                                    float(label_smoothing))
    if out is None:
        out = _cross_entropy_composite(input, target, weight, ignore_index, reduction,
                                       label_smoothing)
    return out


def _cross_entropy_composite(input, target, weight, ignore_index, reduction, label_smoothing):
    """cross_entropy in lucid ops (batched input): what runs where the fused kernel does
    not (gpu tensors, targets or weights that require grad)."""
    c = input.shape[1]
    logp = lucid.log_softmax(input, dim=1)
    if target.is_floating_point():  # class probabilities
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(f"cross_entropy: probability targets must have the input's shape "
                             f"{tuple(input.shape)}, got {tuple(target.shape)}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape(*_class_weight_shape(input.ndim))
        if reduction == "mean":
            return -prod.sum() / (input.numel() // c)
        if reduction == "sum":
            return -prod.sum()
        return -prod.sum(1)
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return nll
    t = target.long()
    valid = t != ignore_index
    if weight is not None:
        smooth = -(logp * weight.reshape(*_class_weight_shape(input.ndim))).sum(1)
    else:
        smooth = -logp.sum(1)
    smooth = smooth * valid.to(smooth.dtype)
    if reduction == "mean":
        if weight is not None:
            safe = lucid.where(valid, t, lucid.zeros_like(t))
            denom = (weight[safe] * valid.to(weight.dtype)).sum()
        else:
            denom = valid.to(smooth.dtype).sum()
        ret = smooth.sum() / denom
    elif reduction == "sum":
        ret = smooth.sum()
    else:
        ret = smooth
    return (1 - label_smoothing) * nll + ret * (label_smoothing / c)


@_fp32
def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """``-(y log p + (1 - y) log(1 - p))``, each log clamped at -100 as torch."""
    logp = lucid.clamp(lucid.log(input), min=-100.0)
    log1mp = lucid.clamp(lucid.log1p(-input), min=-100.0)
    loss = -(target * logp + (1 - target) * log1mp)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@_fp32
def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    """Sigmoid + BCE in the stable form ``(1 - y) x + w_pos softplus(-x)``."""
    sp = lucid.softplus(-input)
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * sp
    else:
        loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@_fp32
def kl_div(input, target, reduction="mean", log_target=False):
    if log_target:
        loss = lucid.exp(target) * (target - input)
    else:
        safe = lucid.where(target > 0, target, lucid.ones_like(target, dtype=target.dtype))
        loss = lucid.where(target > 0, target * (lucid.log(safe) - input),
                           lucid.zeros_like(target, dtype=target.dtype))
    if reduction == "batchmean":
        return loss.sum() / input.shape[0]
    return _reduce(loss, reduction)


@_fp32
def soft_margin_loss(input, target, reduction="mean"):
    return _reduce(lucid.softplus(-target * input), reduction)
