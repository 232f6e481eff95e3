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
by one batched matmul (or a max/sum over the window axis); 3-d convolutions and pools
are that composite form only.

Every window op (convolutions, pools, unfold, interpolate, pad) checks its arguments as
torch does before any kernel runs (``_conv_args``, ``_conv_transpose_args``,
``_pool_args``, ...): a bad value raises lucid.ArgumentError and a shape mismatch
lucid.ShapeError, both a RuntimeError (torch's habit) and a ValueError; an int-list
argument that is not ints raises TypeError; sizes beyond the machine's memory raise
before anything is allocated.
"""
import functools
import math
import numbers
import os
import warnings

import numpy as np

import lucid
from lucid._core import linalg as _linalg_ops
from lucid._core import reduce as _reduce_ops
from lucid._core import unary as _unary
from lucid._core.core import _bump_version
from lucid.nn import _im2col

_reduction_names = ("none", "mean", "sum")


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise lucid.ArgumentError(f"{reduction!r} is not a valid value for reduction; expected one of "
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
        raise lucid.ArgumentError(f"dropout probability has to be between 0 and 1, but got {p}")
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
        raise lucid.ShapeError(f"layer_norm: input shape {tuple(input.shape)} does not end with "
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
            raise lucid.ArgumentError(f"Expected more than 1 value per channel when training, "
                                      f"got input size {tuple(input.shape)}")
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
    if input.ndim < 2 or num_groups <= 0 or input.shape[1] % num_groups:
        raise lucid.ShapeError(f"group_norm(): expected an input (N, C, ...) whose C is "
                               f"divisible by num_groups={num_groups}, got shape "
                               f"{tuple(input.shape)}")
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
    if not isinstance(input, lucid.Tensor) or input.dtype not in _INDEX_DTYPES:
        raise lucid.ArgumentError(f"embedding(): indices must be an integer tensor (int32 or "
                                  f"int64), got {getattr(input, 'dtype', type(input).__name__)}")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise lucid.ArgumentError(f"embedding(): padding_idx {padding_idx} must be within "
                                      f"num_embeddings ({num})")
        if padding_idx < 0:
            padding_idx += num
    if input.numel():    # torch: no wrap-around, -1 is out of range too
        lo, hi = int(input.min().item()), int(input.max().item())
        if lo < 0 or hi >= num:
            raise IndexError(f"embedding(): index {lo if lo < 0 else hi} is out of range for "
                             f"{num} embeddings")
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
        keep = (input != padding_idx).unsqueeze(-1)
        out = lucid.where(keep, out, out.detach())
    return out


_INDEX_DTYPES = (lucid.int32, lucid.int64)


def _embedding_renorm_(weight, input, max_norm, norm_type):
    if weight.device != "cpu":
        raise NotImplementedError("embedding: max_norm is supported on the cpu device only")
    w = weight.detach().numpy()
    rows = np.unique(input.detach().numpy(force=True))
    if rows.size == 0:
        return
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
        raise lucid.ArgumentError("one_hot(): class values must be non-negative")
    if num_classes < 0:
        num_classes = int(tensor.max().item()) + 1
    elif tensor.numel() and int(tensor.max().item()) >= num_classes:
        raise lucid.ArgumentError(f"one_hot(): class values must be smaller than num_classes "
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


# -- argument checks: every window op checks its arguments as torch does, before any kernel runs -------

_INT32_MAX = 2**31 - 1   # torch's pools, transposed convolutions and interpolate read 32-bit ints
_INT64_MAX = 2**63 - 1


def _memory_bytes():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**40


_MEMORY = _memory_bytes()


def _tuple(v, n, name="argument", op="argument", limit=_INT64_MAX):
    """``v`` (an int, or a sequence of 1 or ``n`` ints) as a tuple of ``n`` Python ints, as
    torch reads its int-list arguments: anything but ints is a TypeError, a wrong length or
    a value beyond ``limit`` (what torch's kernel stores it in) an ArgumentError."""
    items = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    for a in items:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral):
            raise TypeError(f"{op}(): {name} must be an int or a tuple of {n} ints, got {v!r}")
    if len(items) == 1:
        items = items * n
    if len(items) != n:
        raise lucid.ArgumentError(f"{op}(): {name} must be an int or a tuple of {n} ints, "
                                  f"got {v!r}")
    out = tuple(int(a) for a in items)
    if any(abs(a) > limit for a in out):
        raise lucid.ArgumentError(f"{op}(): {name}={v!r} does not fit in a "
                                  f"{limit.bit_length() + 1}-bit int")
    return out


def _positive(op, name, values, strict=True):
    if any(a <= 0 if strict else a < 0 for a in values):
        rule = "greater than zero" if strict else "non-negative"
        raise lucid.ArgumentError(f"{op}(): {name} must be {rule}, got {values}")


def _check_alloc(op, shape, dtype):
    """Refuse, before allocating, an array larger than this machine's memory (huge
    padding, sizes or scale factors)."""
    n = math.prod(int(s) for s in shape) * dtype.itemsize
    if n > _MEMORY:
        raise lucid.ArgumentError(f"{op}(): an array of shape {tuple(shape)} ({n} bytes) "
                                  f"would not fit in this machine's memory ({_MEMORY} bytes)")


# The dtypes each window op computes in, as torch 2.13 on the cpu (a data row per op
# family): any other dtype raises naming the op and the dtype, as torch's "not implemented
# for 'Int'", instead of computing in a dtype that truncates (an integer average is 0).
_HALF_AND_FLOAT = ("float16", "bfloat16", "float32", "float64")
_INTS = ("int64", "int32", "int16", "int8", "uint8")
_WINDOW_DTYPES = {
    "conv": _HALF_AND_FLOAT + _INTS,
    "conv_transpose": _HALF_AND_FLOAT + ("int64",),
    "max_pool1d": _HALF_AND_FLOAT,
    "max_pool": _HALF_AND_FLOAT + _INTS,                  # 2-d and 3-d
    "avg_pool": _HALF_AND_FLOAT + ("int64",),             # 1-d and 2-d
    "avg_pool3d": ("float32", "float64", "int64"),
    "adaptive_avg_pool": _HALF_AND_FLOAT,
    "unfold": _HALF_AND_FLOAT + ("bool_",),                # and fold
    "max_unpool": _HALF_AND_FLOAT,
    "pad": _HALF_AND_FLOAT + _INTS,                       # reflect and replicate
}


def _check_dtype(op, family, input):
    if input.dtype.name not in _WINDOW_DTYPES[family]:
        raise lucid.UnsupportedDTypeError(f"{op}(): not implemented for dtype {input.dtype}")


def _check_input_dims(op, input, nd):
    if input.ndim not in (nd + 1, nd + 2) or 0 in input.shape[1:]:
        raise lucid.ShapeError(f"{op}(): expected a non-empty {nd + 1}-d (unbatched) or "
                               f"{nd + 2}-d (batched) input, got shape {tuple(input.shape)}")


def _check_groups(op, groups):
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral):
        raise TypeError(f"{op}(): groups must be an int, got {groups!r}")
    if groups <= 0:
        raise lucid.ArgumentError(f"{op}(): non-positive groups is not supported, got {groups}")
    return int(groups)


def _check_weight(op, weight, bias, nd, n_out):
    """weight has nd + 2 dims and a positive kernel; bias is (n_out,)."""
    if weight.ndim != nd + 2:
        raise lucid.ShapeError(f"{op}(): weight should have {nd + 2} dimensions, got shape "
                               f"{tuple(weight.shape)}")
    if any(k <= 0 for k in weight.shape[2:]):
        raise lucid.ArgumentError(f"{op}(): kernel size should be greater than zero, got "
                                  f"weight of shape {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (n_out,):
        raise lucid.ShapeError(f"{op}(): weight of shape {tuple(weight.shape)} expects a bias "
                               f"of shape ({n_out},), got {tuple(bias.shape)}")


def _conv_args(op, input, weight, bias, stride, padding, dilation, groups, nd):
    """A convolution's stride, dilation, (lo, hi) padding per dim and output size, every
    argument checked as torch checks it."""
    _check_dtype(op, "conv", input)
    if input.ndim != nd + 2:
        raise lucid.ShapeError(f"{op}(): expected a {nd + 1}-d (unbatched) or {nd + 2}-d "
                               f"(batched) input, got shape {tuple(input.shape)}")
    stride = _tuple(stride, nd, "stride", op)
    dilation = _tuple(dilation, nd, "dilation", op)
    _positive(op, "stride", stride)
    _positive(op, "dilation", dilation)
    groups = _check_groups(op, groups)
    o = weight.shape[0] if weight.ndim else 0
    _check_weight(op, weight, bias, nd, o)
    c, cg = input.shape[1], weight.shape[1]
    if o % groups:
        raise lucid.ShapeError(f"{op}(): given groups={groups}, expected weight to be divisible "
                               f"by {groups} at dimension 0, got weight of shape "
                               f"{tuple(weight.shape)}")
    if c != cg * groups:
        raise lucid.ShapeError(f"{op}(): given groups={groups}, weight of shape "
                               f"{tuple(weight.shape)} expects an input with {cg * groups} "
                               f"channels, got {c} channels (input shape {tuple(input.shape)})")
    kernel = tuple(weight.shape[2:])
    pairs = _padding_pairs(padding, kernel, dilation, nd, stride, op)
    sizes = input.shape[2:]
    padded = tuple(sizes[a] + pairs[a][0] + pairs[a][1] for a in range(nd))
    if any(padded[a] < dilation[a] * (kernel[a] - 1) + 1 for a in range(nd)):
        raise lucid.ShapeError(f"{op}(): padded input size {padded} is smaller than the "
                               f"kernel {kernel} with dilation {dilation}")
    out_size = tuple(_conv_out(sizes[a], kernel[a], stride[a], *pairs[a], dilation[a])
                     for a in range(nd))
    _check_alloc(op, (input.shape[0], o) + out_size, input.dtype)
    _check_alloc(op, (input.shape[0], c * math.prod(kernel)) + out_size, input.dtype)
    _check_alloc(op, (input.shape[0], c) + padded, input.dtype)
    return stride, dilation, pairs, out_size, groups


def _conv_transpose_args(op, input, weight, bias, stride, padding, output_padding, groups,
                         dilation, nd):
    _check_dtype(op, "conv_transpose", input)
    if input.ndim != nd + 2:
        raise lucid.ShapeError(f"{op}(): expected a {nd + 1}-d (unbatched) or {nd + 2}-d "
                               f"(batched) input, got shape {tuple(input.shape)}")
    stride = _tuple(stride, nd, "stride", op, _INT32_MAX)
    padding = _tuple(padding, nd, "padding", op, _INT32_MAX)
    output_padding = _tuple(output_padding, nd, "output_padding", op, _INT32_MAX)
    dilation = _tuple(dilation, nd, "dilation", op, _INT32_MAX)
    _positive(op, "stride", stride)
    _positive(op, "dilation", dilation)
    _positive(op, "padding", padding, strict=False)
    _positive(op, "output_padding", output_padding, strict=False)
    groups = _check_groups(op, groups)
    for a in range(nd):
        if output_padding[a] >= max(stride[a], dilation[a]):
            raise lucid.ArgumentError(
                f"{op}(): output padding must be smaller than either stride or dilation, got "
                f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    cin = weight.shape[0] if weight.ndim else 0
    og = weight.shape[1] if weight.ndim > 1 else 0
    _check_weight(op, weight, bias, nd, og * groups)
    if cin % groups:
        raise lucid.ShapeError(f"{op}(): given groups={groups}, expected weight to be divisible "
                               f"by {groups} at dimension 0, got weight of shape "
                               f"{tuple(weight.shape)}")
    if input.shape[1] != cin:
        raise lucid.ShapeError(f"{op}(): weight of shape {tuple(weight.shape)} expects an input "
                               f"with {cin} channels, got {input.shape[1]} channels (input "
                               f"shape {tuple(input.shape)})")
    kernel = tuple(weight.shape[2:])
    out = tuple((input.shape[2 + a] - 1) * stride[a] - 2 * padding[a]
                + dilation[a] * (kernel[a] - 1) + output_padding[a] + 1 for a in range(nd))
    if any(s <= 0 for s in out):
        raise lucid.ShapeError(f"{op}(): input of spatial size {tuple(input.shape[2:])} gives "
                               f"output size {out}, which is too small")
    big = tuple(input.shape[2 + a] * stride[a] + 2 * dilation[a] * kernel[a]
                + output_padding[a] for a in range(nd))
    _check_alloc(op, (input.shape[0], og * groups) + out, input.dtype)
    _check_alloc(op, (input.shape[0], cin) + big, input.dtype)
    return stride, padding, output_padding, dilation, groups, out


def _pool_args(op, input, kernel_size, stride, padding, dilation, ceil_mode, nd):
    """kernel, stride, padding, dilation and output size of a pool, checked as torch."""
    _check_input_dims(op, input, nd)
    kernel = _tuple(kernel_size, nd, "kernel_size", op, _INT32_MAX)
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        stride = kernel
    stride = _tuple(stride, nd, "stride", op, _INT32_MAX)
    padding = _tuple(padding, nd, "padding", op, _INT32_MAX)
    dilation = _tuple(dilation, nd, "dilation", op, _INT32_MAX)
    _positive(op, "kernel_size", kernel)
    _positive(op, "stride", stride)
    _positive(op, "dilation", dilation)
    _positive(op, "padding", padding, strict=False)
    if any(p > k // 2 for k, p in zip(kernel, padding)):
        raise lucid.ArgumentError(f"{op}(): pad should be at most half of kernel size, got "
                                  f"padding={padding}, kernel_size={kernel}")
    sizes = input.shape[-nd:]
    out = tuple(_pool_out(sizes[a], kernel[a], stride[a], padding[a], dilation[a], ceil_mode)
                for a in range(nd))
    if any(s <= 0 for s in out):
        raise lucid.ShapeError(f"{op}(): input of spatial size {tuple(sizes)} gives output "
                               f"size {out}, which is too small")
    _check_alloc(op, tuple(input.shape[:-nd]) + out + (math.prod(kernel),), input.dtype)
    return kernel, stride, padding, dilation, out


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad. Negative amounts crop, as torch: in reflect and replicate
    modes after the positive amounts are padded from the whole input, in circular mode
    before (the wrap reads the cropped tensor). The other modes than constant pad the last
    1, 2 or 3 dims of a batched or unbatched input, by less than each dim's size (reflect)
    or at most its size (circular), as torch checks."""
    if isinstance(pad, (tuple, list)) and all(isinstance(p, numbers.Integral)
                                              and not isinstance(p, bool) for p in pad):
        pad = tuple(int(p) for p in pad)
        k = len(pad) // 2
        if len(pad) % 2 == 0 and k <= input.ndim:
            sizes = [input.shape[-1 - i] for i in range(k)]
            grown = [sizes[i] + pad[2 * i] + pad[2 * i + 1] for i in range(k)]
            if mode in ("reflect", "replicate"):
                _check_dtype(f"pad({mode})", "pad", input)
            if mode != "constant":
                if not k + 1 <= input.ndim <= k + 2 or k > 3:
                    raise NotImplementedError(
                        f"pad(): {mode} padding of {k} dims needs a {k + 1}-d or {k + 2}-d "
                        f"input, got shape {tuple(input.shape)}")
                if value not in (None, 0, 0.0):
                    raise lucid.ArgumentError(f"pad(): padding mode {mode!r} doesn't take in "
                                              f"value argument")
                for i in range(k):
                    lo, hi, n = pad[2 * i], pad[2 * i + 1], sizes[i]
                    if mode == "reflect" and max(lo, hi) >= n:
                        raise lucid.ArgumentError(
                            f"pad(): reflect padding ({lo}, {hi}) should be less than the "
                            f"size {n} of dimension {input.ndim - 1 - i}")
                    if mode == "circular" and max(lo, hi) > n:
                        raise lucid.ArgumentError(
                            f"pad(): circular padding ({lo}, {hi}) of dimension "
                            f"{input.ndim - 1 - i} (size {n}) wraps around more than once")
                    # torch's 1-d kernels refuse an empty result, its 2-d and 3-d ones not
                    if mode in ("reflect", "replicate") and grown[i] < (k == 1):
                        raise lucid.ShapeError(
                            f"pad(): dimension {input.ndim - 1 - i} of size {n} padded by "
                            f"({lo}, {hi}) would have size {grown[i]}")
            for i in range(k if mode in ("constant", "circular") else 0):   # crop first
                if sizes[i] + min(pad[2 * i], 0) + min(pad[2 * i + 1], 0) < 0:
                    raise lucid.ShapeError(
                        f"pad(): cropping dimension {input.ndim - 1 - i} of size {sizes[i]} by "
                        f"({pad[2 * i]}, {pad[2 * i + 1]}) leaves a negative size")
            if all(g >= 0 for g in grown):
                _check_alloc("pad", tuple(input.shape[:input.ndim - k]) + tuple(reversed(grown)),
                             input.dtype)
    elif not isinstance(pad, (tuple, list)):
        raise TypeError(f"pad(): pad must be a tuple of ints, got {pad!r}")
    if mode == "constant" or not any(p < 0 for p in pad):
        return lucid.pad(input, pad, mode=mode, value=0 if value is None else value)
    grow = tuple(max(p, 0) for p in pad)
    crop = tuple(min(p, 0) for p in pad)
    if mode == "circular":
        return lucid.pad(lucid.pad(input, crop), grow, mode=mode)
    return lucid.pad(lucid.pad(input, grow, mode=mode), crop)


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


def _padding_pairs(padding, kernel, dilation, nd, stride, op="conv"):
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise lucid.ArgumentError(f"{op}(): padding='same' is not supported for "
                                          "strided convolutions")
            pairs = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pairs.append((total // 2, total - total // 2))
            return pairs
        raise lucid.ArgumentError(f"{op}(): invalid padding string {padding!r}, expected "
                                  "'valid' or 'same'")
    padding = _tuple(padding, nd, "padding", op)
    _positive(op, "padding", padding, strict=False)
    return [(p, p) for p in padding]


def _pad_spatial(x, pairs, value=0.0):
    if not any(lo or hi for lo, hi in pairs):
        return x
    flat = []
    for lo, hi in reversed(pairs):  # F.pad order: last dim first
        flat += [lo, hi]
    return lucid.pad(x, tuple(flat), value=value)


def _convnd(input, weight, bias, stride, padding, dilation, groups, nd):
    op = f"conv{nd}d"
    if input.ndim == nd + 1:                    # (C, *spatial), as torch accepts
        return _convnd(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups,
                       nd).squeeze(0)
    stride, dilation, pairs, out_size, groups = _conv_args(op, input, weight, bias, stride,
                                                           padding, dilation, groups, nd)
    if groups == 1 and _im2col.applies(nd, input, weight, bias) and _im2col.fits(
            input.shape, weight.shape, stride, pairs, dilation, out_size):
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
    """3-d convolution, (N, C, D, H, W) with weight (O, C / groups, kD, kH, kW): the
    composite form (windows stacked, one batched matmul), on either device."""
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 3)


def _dilate(x, axis, s):
    """Insert ``s - 1`` zeros between the elements of ``x`` along ``axis``."""
    size = x.shape[axis]
    if s == 1 or size <= 1:
        return x
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
    op = f"conv_transpose{nd}d"
    if input.ndim == nd + 1:                    # (C, *spatial), as torch accepts
        return _conv_transposend(input.unsqueeze(0), weight, bias, stride, padding,
                                 output_padding, groups, dilation, nd).squeeze(0)
    stride, padding, output_padding, dilation, groups, _ = _conv_transpose_args(
        op, input, weight, bias, stride, padding, output_padding, groups, dilation, nd)
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


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-d transposed convolution, weight (C_in, C_out / groups, kD, kH, kW), as torch."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 3)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C * kH * kW, L), each column one sliding window (zero
    padding), as torch.nn.functional.unfold."""
    op = "unfold"
    _check_dtype(op, "unfold", input)
    if input.ndim not in (3, 4) or 0 in input.shape[1:]:
        raise lucid.ShapeError(f"{op}(): expected a non-empty 3-d or 4-d input, got shape "
                               f"{tuple(input.shape)}")
    if input.ndim == 3:
        return unfold(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    kernel, dilation, padding, stride = _fold_args(op, kernel_size, dilation, padding, stride)
    pairs = [(p, p) for p in padding]
    out = tuple(_conv_out(input.shape[2 + a], kernel[a], stride[a], *pairs[a], dilation[a])
                for a in range(2))
    if any(s <= 0 for s in out):
        raise lucid.ShapeError(f"{op}(): input of spatial size {tuple(input.shape[2:])} with "
                               f"kernel_size={kernel}, dilation={dilation}, padding={padding} "
                               f"gives {out} sliding blocks, which is too small")
    n, c = input.shape[:2]
    k = kernel[0] * kernel[1]
    _check_alloc(op, (n, c * k) + out, input.dtype)
    _check_alloc(op, (n, c) + tuple(input.shape[2 + a] + 2 * padding[a] for a in range(2)),
                 input.dtype)
    cols = _windows(_pad_spatial(input, pairs), kernel, stride, dilation, out)
    return cols.reshape(n, c * k, out[0] * out[1])


def _fold_args(op, kernel_size, dilation, padding, stride):
    kernel = _tuple(kernel_size, 2, "kernel_size", op)
    dilation = _tuple(dilation, 2, "dilation", op)
    padding = _tuple(padding, 2, "padding", op)
    stride = _tuple(stride, 2, "stride", op)
    _positive(op, "kernel_size", kernel)
    _positive(op, "dilation", dilation)
    _positive(op, "padding", padding, strict=False)
    _positive(op, "stride", stride)
    return kernel, dilation, padding, stride


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: (N, C * kH * kW, L) -> (N, C, *output_size), each
    column's values summed into its window, as torch.nn.functional.fold. Composed of
    lucid ops (one dilated, padded slice per kernel offset), so it runs on either device
    and is differentiable."""
    op = "fold"
    _check_dtype(op, "unfold", input)
    if input.ndim not in (2, 3) or 0 in input.shape[1:]:
        raise lucid.ShapeError(f"{op}(): expected a non-empty 2-d or 3-d input, got shape "
                               f"{tuple(input.shape)}")
    if input.ndim == 2:
        return fold(input.unsqueeze(0), output_size, kernel_size, dilation, padding,
                    stride).squeeze(0)
    if isinstance(output_size, (tuple, list)) and len(output_size) != 2:
        raise lucid.ArgumentError(f"{op}(): output_size must have 2 elements, got "
                                  f"{tuple(output_size)}")
    out = _tuple(output_size, 2, "output_size", op)
    kernel, dilation, padding, stride = _fold_args(op, kernel_size, dilation, padding, stride)
    n, ck, l_ = input.shape
    k = kernel[0] * kernel[1]
    if ck % k:
        raise lucid.ShapeError(f"{op}(): input's dimension 1 ({ck}) must be divisible by the "
                               f"product of kernel_size {kernel}")
    blocks = tuple(_conv_out(out[a], kernel[a], stride[a], padding[a], padding[a], dilation[a])
                   for a in range(2))
    if any(b <= 0 for b in blocks) or blocks[0] * blocks[1] != l_:
        raise lucid.ShapeError(f"{op}(): output_size={out}, kernel_size={kernel}, "
                               f"dilation={dilation}, padding={padding}, stride={stride} give "
                               f"{blocks} blocks, but the input has {l_} columns")
    c = ck // k
    padded = tuple(out[a] + 2 * padding[a] for a in range(2))
    _check_alloc(op, (n, c) + padded, input.dtype)
    cols = input.reshape(n, c, kernel[0], kernel[1], blocks[0], blocks[1])
    total = None
    for i, j in np.ndindex(*kernel):
        piece = _dilate(_dilate(cols[:, :, i, j], 2, stride[0]), 3, stride[1])
        top, left = i * dilation[0], j * dilation[1]
        piece = lucid.pad(piece, (left, padded[1] - left - piece.shape[3],
                                  top, padded[0] - top - piece.shape[2]))
        total = piece if total is None else total + piece
    return total[:, :, padding[0]:padding[0] + out[0], padding[1]:padding[1] + out[1]]


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


def _pool_pairs(sizes, kernel, stride, padding, dilation, out):
    """The (lo, hi) padding of each spatial dim (hi grows so that ceil-mode windows fit)."""
    pairs = []
    for a in range(len(kernel)):
        need = (out[a] - 1) * stride[a] + dilation[a] * (kernel[a] - 1) + 1
        pairs.append((padding[a], max(padding[a], need - sizes[a] - padding[a])))
    return pairs


def _batched(input, nd):
    """Pools accept (C, *spatial) as well as (N, C, *spatial)."""
    if input.ndim == nd + 1:
        return input.unsqueeze(0), True
    return input, False


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                       3)


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
    op = f"max_pool{nd}d"
    _check_dtype(op, "max_pool1d" if nd == 1 else "max_pool", input)
    kernel, stride, padding, dilation, out = _pool_args(op, input, kernel_size, stride, padding,
                                                        dilation, ceil_mode, nd)
    x0, unb = _batched(input, nd)
    pairs = _pool_pairs(x0.shape[2:], kernel, stride, padding, dilation, out)
    if _im2col.applies(nd, x0) and _im2col.fits(x0.shape, None, stride, pairs, dilation, out,
                                                 kernel):
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
    arg = arg.numpy(force=True)
    offs = np.array(list(np.ndindex(*kernel)), dtype=np.int64)  # (K, nd)
    sizes = x0.shape[2:]
    flat = np.zeros(arg.shape, dtype=np.int64)
    for a in range(nd):
        base = np.arange(out[a]) * stride[a] - padding[a]
        shape = [1] * arg.ndim
        shape[2 + a] = out[a]
        pos = base.reshape(shape) + offs[arg, a] * dilation[a]
        flat = flat * sizes[a] + pos
    idx = lucid.tensor(flat, device=input.device)
    return values, (idx.squeeze(0) if unb else idx)


def _max_pool_composite(x0, kernel, stride, dilation, out, pairs, with_arg=False):
    """Max pooling in lucid ops: the windows stacked, then a max over them (padding reads
    as -inf, or an integer dtype's minimum)."""
    dt = x0.dtype.numpy_dtype
    fill = -math.inf if x0.dtype.is_floating_point else int(np.iinfo(dt).min)
    x = _pad_spatial(x0, pairs, fill)
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


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over each (kD, kH, kW) window of (N, C, D, H, W) (or (C, D, H, W)), as torch."""
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, 3)


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
    op = f"avg_pool{nd}d"
    _check_dtype(op, "avg_pool3d" if nd == 3 else "avg_pool", input)
    kernel, stride, padding, dilation, out = _pool_args(op, input, kernel_size, stride, padding,
                                                        1, ceil_mode, nd)
    if nd == 3 and any(s < k for s, k in zip(input.shape[-3:], kernel)):
        # torch's 3-d average pool compares the unpadded input with the kernel
        raise lucid.ShapeError(f"{op}(): input of spatial size {tuple(input.shape[-3:])} is "
                               f"smaller than the kernel size {kernel}")
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or not isinstance(divisor_override,
                                                                numbers.Integral):
            raise TypeError(f"{op}(): divisor_override must be an int, got "
                            f"{divisor_override!r}")
        if divisor_override == 0:
            raise lucid.ArgumentError(f"{op}(): divisor must be not zero")
    x0, unb = _batched(input, nd)
    pairs = _pool_pairs(x0.shape[2:], kernel, stride, padding, dilation, out)
    x = _pad_spatial(x0, pairs, 0.0)
    total = _windows(x, kernel, stride, dilation, out).sum(2)
    if divisor_override is not None:
        div = np.full(out, float(divisor_override))
    else:
        div = _avg_divisor(x0.shape[2:], kernel, stride, padding, out, count_include_pad)
    if input.dtype.is_floating_point:
        res = total * lucid.tensor(1.0 / div, dtype=total.dtype, device=input.device)
        res = res.to(input.dtype)      # half inputs: summed in float32, as torch
    else:                              # int64: C's truncating division, as torch
        res = lucid.div(total, lucid.tensor(div.astype(np.int64), device=input.device),
                        rounding_mode="trunc")
    return res.squeeze(0) if unb else res


def _max_unpoolnd(input, indices, kernel_size, stride, padding, output_size, nd):
    """The values of ``input`` written at ``indices`` (flat positions in each output plane,
    as max_pool's ``return_indices`` gives them) of a zero output: a scatter, whose
    gradient gathers."""
    op = f"max_unpool{nd}d"
    _check_dtype(op, "max_unpool", input)
    _check_input_dims(op, input, nd)
    if not isinstance(indices, lucid.Tensor) or indices.dtype != lucid.int64:
        raise lucid.ArgumentError(f"{op}(): indices must be an int64 tensor, got "
                                  f"{getattr(indices, 'dtype', type(indices).__name__)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise lucid.ShapeError(f"{op}(): indices of shape {tuple(indices.shape)} must have the "
                               f"input's shape {tuple(input.shape)}")
    kernel = _tuple(kernel_size, nd, "kernel_size", op, _INT32_MAX)
    stride = kernel if stride is None else _tuple(stride, nd, "stride", op, _INT32_MAX)
    padding = _tuple(padding, nd, "padding", op, _INT32_MAX)
    sizes = input.shape[-nd:]
    default = tuple((sizes[a] - 1) * stride[a] - 2 * padding[a] + kernel[a] for a in range(nd))
    if output_size is None:
        out = default
    else:
        out = tuple(output_size)
        if len(out) == input.ndim:     # torch also takes the whole output shape
            out = out[-nd:]
        out = _tuple(out, nd, "output_size", op, _INT32_MAX) if len(out) == nd else None
        if out is None:
            raise lucid.ArgumentError(f"{op}(): output_size should have {nd} or "
                                      f"{input.ndim} elements, got {tuple(output_size)}")
        for a in range(nd):
            lo, hi = default[a] - stride[a], default[a] + stride[a]
            if not lo < out[a] < hi:
                raise lucid.ArgumentError(f"{op}(): invalid output_size {tuple(output_size)} "
                                          f"(dim {a} must be between {lo + 1} and {hi - 1})")
    if any(s < 0 for s in out):
        raise lucid.ArgumentError(f"{op}(): kernel_size={kernel}, stride={stride} and "
                                  f"padding={padding} give a negative output size {out}")
    x, unb = _batched(input, nd)
    idx = indices.unsqueeze(0) if unb else indices
    _check_alloc(op, tuple(x.shape[:2]) + out, input.dtype)
    plane = math.prod(out)
    flat_idx = idx.reshape(x.shape[0], x.shape[1], -1)
    if flat_idx.numel():
        lo, hi = int(flat_idx.min().item()), int(flat_idx.max().item())
        if lo < 0 or hi >= plane:
            bad = lo if lo < 0 else hi
            raise lucid.ArgumentError(f"{op}(): found an invalid max index {bad} (output "
                                      f"planes are of size {'x'.join(map(str, out))})")
    res = lucid.zeros(x.shape[0], x.shape[1], plane, dtype=input.dtype, device=input.device)
    res = lucid.scatter(res, 2, flat_idx, x.reshape(x.shape[0], x.shape[1], -1))
    res = res.reshape(*x.shape[:2], *out)
    return res.squeeze(0) if unb else res


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool1d: each value written at its index, zeros elsewhere."""
    return _max_unpoolnd(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool2d: each value written at its index, zeros elsewhere."""
    return _max_unpoolnd(input, indices, kernel_size, stride, padding, output_size, 2)


def _adaptive_matrix(size, out):
    """(out, size) averaging matrix of torch's adaptive pool windows."""
    m = np.zeros((out, size))
    for i in range(out):
        s = (i * size) // out
        e = -(-((i + 1) * size) // out)
        m[i, s:e] = 1.0 / (e - s)
    return m


def _adaptive_sizes(op, input, output_size, nd):
    _check_dtype(op, "adaptive_avg_pool", input)
    _check_input_dims(op, input, nd)
    sizes = input.shape[-nd:]
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != nd:
            raise lucid.ArgumentError(f"{op}(): output_size must have {nd} elements, got "
                                      f"{output_size!r}")
        items = output_size
    else:
        items = (output_size,) * nd
    # None keeps that dimension's input size, as torch
    out = tuple(sizes[a] if items[a] is None else _tuple(items[a], 1, "output_size", op,
                                                         _INT32_MAX)[0] for a in range(nd))
    if any(s < 0 for s in out):
        raise lucid.ArgumentError(f"{op}(): elements of output_size must be greater than or "
                                  f"equal to 0, got {out}")
    _check_alloc(op, tuple(input.shape[:-nd]) + out, input.dtype)
    return out


def _adaptive_avg(x, out):
    """Averages over torch's adaptive windows: one matrix product per spatial dim."""
    nd = len(out)
    for a in range(nd):
        axis = x.ndim - nd + a
        m = lucid.tensor(_adaptive_matrix(x.shape[axis], out[a]).T, dtype=x.dtype,
                         device=x.device)
        x = lucid.matmul(x.transpose(axis, -1), m).transpose(axis, -1)
    return x


def adaptive_avg_pool2d(input, output_size):
    return _adaptive_avg(input, _adaptive_sizes("adaptive_avg_pool2d", input, output_size, 2))


def adaptive_avg_pool1d(input, output_size):
    return _adaptive_avg(input, _adaptive_sizes("adaptive_avg_pool1d", input, output_size, 1))


def adaptive_avg_pool3d(input, output_size):
    return _adaptive_avg(input, _adaptive_sizes("adaptive_avg_pool3d", input, output_size, 3))


# -- interpolate ---------------------------------------------------------------------------------------------

_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_INTERP_ND = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
# the integer dtypes torch interpolates (uint8 images); every other mode / integer dtype
# pair raises, as torch's "not implemented for 'Int'"
_INTERP_UINT8 = ("nearest", "nearest-exact", "bilinear", "bicubic")


def _source_scale(size, out, align_corners, scale):
    """torch's area_pixel_compute_scale."""
    if align_corners:
        return (size - 1) / (out - 1) if out > 1 else 0.0
    return scale


def _linear_matrix(size, out, align_corners, scale):
    """(out, size) weights of linear interpolation along one dim, as torch."""
    m = np.zeros((out, size))
    s = _source_scale(size, out, align_corners, scale)
    for i in range(out):
        src = i * s if align_corners else max((i + 0.5) * s - 0.5, 0.0)
        i0 = min(int(math.floor(src)), size - 1)
        i1 = min(i0 + 1, size - 1)
        w1 = src - i0
        m[i, i0] += 1.0 - w1
        m[i, i1] += w1
    return m


def _cubic_weights(t, a=-0.75):
    """The four weights of torch's cubic convolution at fractional offset ``t``."""
    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return (far(t + 1), near(t), near(1 - t), far(2 - t))


def _cubic_matrix(size, out, align_corners, scale):
    """(out, size) weights of bicubic interpolation along one dim, as torch: source index
    not clamped at 0, the four taps clamped into the input."""
    m = np.zeros((out, size))
    s = _source_scale(size, out, align_corners, scale)
    for i in range(out):
        src = i * s if align_corners else (i + 0.5) * s - 0.5
        i0 = int(math.floor(src))
        for j, w in enumerate(_cubic_weights(src - i0)):
            m[i, min(max(i0 - 1 + j, 0), size - 1)] += w
    return m


def _nearest_index(size, out, scale, exact, shortcuts):
    """Source index of each output position, as torch computes it: in float32, floor of
    ``i * scale`` (``(i + 0.5) * scale`` for nearest-exact); torch's 2-d nearest kernel
    copies a dim whose size is unchanged and halves the index of one that doubles, whatever
    the scale factor."""
    i = np.arange(out)
    if shortcuts and out == size:
        return i
    if shortcuts and out == 2 * size:
        return i >> 1
    src = np.floor((i.astype(np.float32) + np.float32(0.5 if exact else 0.0))
                   * np.float32(scale))
    return np.minimum(src.astype(np.int64), size - 1)


def _interp_sizes(input, size, scale_factor, recompute_scale_factor, nd, mode):
    """Output sizes and the per-dim scales (input / output) the kernels use, as torch
    (``area`` is adaptive pooling, which allows an empty output)."""
    in_sizes = tuple(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise lucid.ArgumentError("interpolate(): only one of size or scale_factor should be "
                                  "defined")
    if size is not None:
        if isinstance(size, (tuple, list)) and len(size) != nd:
            raise lucid.ArgumentError(f"interpolate(): the input has {nd} spatial dims "
                                      f"{in_sizes}, size {tuple(size)} has {len(size)}")
        out = _tuple(size, nd, "size", "interpolate", _INT32_MAX)
        scales = [None] * nd
    elif scale_factor is not None:
        sf = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (
            scale_factor,) * nd
        if len(sf) != nd:
            raise lucid.ArgumentError(f"interpolate(): the input has {nd} spatial dims, "
                                      f"scale_factor {scale_factor!r} has {len(sf)}")
        for f in sf:
            if isinstance(f, bool) or not isinstance(f, numbers.Real) or not math.isfinite(f):
                raise lucid.ArgumentError(f"interpolate(): scale_factor must be finite "
                                          f"numbers, got {scale_factor!r}")
        out = tuple(int(math.floor(in_sizes[a] * float(sf[a]))) for a in range(nd))
        scales = [None if recompute_scale_factor else float(f) for f in sf]   # inverted below
    else:
        raise lucid.ArgumentError("interpolate(): either size or scale_factor should be "
                                  "defined")
    if any(s <= 0 for s in in_sizes) or any(s < (mode != "area") for s in out):
        raise lucid.ArgumentError(f"interpolate(): input and output sizes should be greater "
                                  f"than 0, got input {in_sizes} and output {out}")
    if any(s > _INT32_MAX for s in out):
        raise lucid.ArgumentError(f"interpolate(): output size {out} does not fit in a 32-bit "
                                  f"int")
    _check_alloc("interpolate", tuple(input.shape[:2]) + out, input.dtype)
    scales = [in_sizes[a] / max(out[a], 1) if not scales[a] else 1.0 / scales[a]
              for a in range(nd)]
    return in_sizes, out, scales


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, ...) as torch: ``nearest``, ``nearest-exact``,
    ``linear`` (3-d input), ``bilinear`` and ``bicubic`` (4-d), ``trilinear`` (5-d),
    ``area`` (adaptive average pooling); ``align_corners`` for the interpolating modes.
    Float inputs are differentiable (a matrix product per dim, or an index_select);
    uint8 inputs take nearest, bilinear and bicubic, rounded as torch rounds them."""
    if mode not in _INTERP_MODES:
        raise NotImplementedError(f"interpolate(): mode {mode!r} is not supported; expected "
                                  f"one of {', '.join(_INTERP_MODES)}")
    nd = input.ndim - 2
    if not 1 <= nd <= 3:
        raise lucid.ShapeError(f"interpolate(): expected a 3-d, 4-d or 5-d input (N, C, ...), "
                               f"got shape {tuple(input.shape)}")
    if mode in _INTERP_ND and _INTERP_ND[mode] != nd:
        raise lucid.ShapeError(f"interpolate(): mode {mode!r} needs a {_INTERP_ND[mode] + 2}-d "
                               f"input, got shape {tuple(input.shape)}")
    if align_corners is not None and mode not in _INTERP_ND:
        raise lucid.ArgumentError("interpolate(): align_corners option can only be set with "
                                  "the interpolating modes: linear | bilinear | bicubic | "
                                  "trilinear")
    if antialias:
        raise NotImplementedError("interpolate(): antialias is not supported")
    dt = input.dtype
    if not dt.is_floating_point and not (dt == lucid.uint8 and mode in _INTERP_UINT8):
        raise lucid.UnsupportedDTypeError(f"interpolate(): mode {mode!r} is not implemented "
                                          f"for dtype {dt}")
    in_sizes, out_sizes, scales = _interp_sizes(input, size, scale_factor,
                                                recompute_scale_factor, nd, mode)
    if mode in ("nearest", "nearest-exact"):
        out = input
        for a in range(nd):
            src = _nearest_index(in_sizes[a], out_sizes[a], scales[a], mode == "nearest-exact",
                                 mode == "nearest" and nd == 2)
            out = lucid.index_select(out, 2 + a, lucid.tensor(src, device=input.device))
        return out
    if mode == "area":
        return _adaptive_avg(input, out_sizes)
    align = bool(align_corners)
    make = _cubic_matrix if mode == "bicubic" else _linear_matrix
    mats = [make(in_sizes[a], out_sizes[a], align, scales[a]) for a in range(nd)]
    if dt == lucid.uint8:
        return _interpolate_uint8(input, mats)
    out = input
    for a in range(nd):
        if mode != "bicubic" and in_sizes[a] == out_sizes[a]:
            continue            # torch's linear modes copy a dim whose size is unchanged
        m = lucid.tensor(mats[a], dtype=dt, device=input.device)
        # contract axis 2+a with m: move it last, multiply by m.T, move it back
        out = lucid.matmul(out.transpose(2 + a, -1), m.T).transpose(2 + a, -1)
    return out


def _interpolate_uint8(input, mats):
    """uint8 bilinear / bicubic, as torch's uint8 kernel: per dim (the last first), weights
    in fixed point (int16, the most fraction bits that keep the largest weight below
    2**15), each pass rounded and clamped to 0..255."""
    x = input.numpy(force=True).astype(np.int64)
    nd = len(mats)
    for a in reversed(range(nd)):
        m = mats[a]
        if m.shape[0] == m.shape[1]:
            continue          # torch skips a dim whose size is unchanged, whatever the scale
        peak = np.abs(m).max()
        bits = 0
        while bits < 22 and int(0.5 + peak * (1 << (bits + 1))) < (1 << 15):
            bits += 1
        w = np.where(m < 0, np.ceil(m * (1 << bits) - 0.5),
                     np.floor(m * (1 << bits) + 0.5)).astype(np.int64)
        axis = 2 + a
        acc = np.moveaxis(np.tensordot(x, w, axes=([axis], [1])), -1, axis)
        acc = (acc + (1 << (bits - 1))) >> bits
        x = np.clip(acc, 0, 255)
    return lucid.tensor(x.astype(np.uint8), device=input.device)


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
            raise lucid.ShapeError(f"scaled_dot_product_attention: with enable_gqa, the query's "
                                   f"{hq} heads must be a multiple of the key's {hk} and the "
                                   f"value's {hv}")
        key = lucid.repeat_interleave(key, hq // hk, dim=-3)
        value = lucid.repeat_interleave(value, hq // hv, dim=-3)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = lucid.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:   # torch raises a RuntimeError; ArgumentError is one
            raise lucid.ArgumentError("scaled_dot_product_attention(): explicit attn_mask "
                                      "should not be set when is_causal=True")
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
        raise lucid.ArgumentError("multi_head_attention_forward: give both bias_k and bias_v "
                                  "or neither")
    l_, n, e = query.shape
    s_ = key.shape[0]
    hd = e // num_heads
    if in_proj_weight is not None:
        wq, wk, wv = lucid.chunk(in_proj_weight, 3, 0)
    elif q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
        raise lucid.ArgumentError("multi_head_attention_forward: without in_proj_weight, "
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

def _warn_target_size(input, target, op):
    """torch warns (and then broadcasts) when a regression target's shape differs from the
    input's: (4, 1) against (4,) broadcasts to (4, 4), rarely what was meant."""
    if tuple(getattr(target, "shape", ())) != tuple(input.shape):
        warnings.warn(f"{op}: Using a target size ({tuple(target.shape)}) that is different to "
                      f"the input size ({tuple(input.shape)}). This will likely lead to "
                      f"incorrect results due to broadcasting. Please ensure they have the "
                      f"same size.", UserWarning, stacklevel=4)


@_fp32
def mse_loss(input, target, reduction="mean"):
    _warn_target_size(input, target, "mse_loss")
    d = input - target
    return _reduce(d * d, reduction)


@_fp32
def l1_loss(input, target, reduction="mean"):
    _warn_target_size(input, target, "l1_loss")
    return _reduce(lucid.abs(input - target), reduction)


@_fp32
def huber_loss(input, target, reduction="mean", delta=1.0):
    _warn_target_size(input, target, "huber_loss")
    d = input - target
    a = lucid.abs(d)
    loss = lucid.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
    return _reduce(loss, reduction)


@_fp32
def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    _warn_target_size(input, target, "smooth_l1_loss")
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
        raise lucid.ArgumentError(f"label_smoothing must be between 0.0 and 1.0, got "
                                  f"{label_smoothing}")
    if reduction not in _reduction_names:
        raise lucid.ArgumentError(f"{reduction!r} is not a valid value for reduction")
    if ignore_index != -100 and target.is_floating_point():
        raise lucid.ArgumentError("cross_entropy: ignore_index is not supported for probability "
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
            raise lucid.ShapeError(f"cross_entropy: probability targets must have the input's "
                                   f"shape {tuple(input.shape)}, got {tuple(target.shape)}")
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
