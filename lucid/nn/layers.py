"""Layers as Modules: each holds its Parameters and calls lucid.nn.functional.

Initialisation follows torch's reset_parameters() for every layer, so the same
seeding strategy gives the same distributions.
"""
import math

import lucid
from lucid.nn import functional as F
from lucid.nn import init
from lucid.nn.module import Module
from lucid.nn.parameter import Parameter


def _empty(*shape, dtype=None):
    return lucid.zeros(*shape, dtype=dtype or lucid.float32)


def _place(module, device):
    """The ``device=`` argument of layer constructors: initialised on the cpu (lucid's
    random stream), then moved."""
    if device is not None:
        module.to(lucid.device(device))


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x W^T + b``; W and b uniform on +-1/sqrt(in_features) (torch's init)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(_empty(out_features, in_features, dtype=dtype))
        self.bias = Parameter(_empty(out_features, dtype=dtype)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()
        _place(self, device)

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = Parameter(_empty(out_features, in1_features, in2_features, dtype=dtype))
        if bias:
            self.bias = Parameter(_empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        bound = 1 / math.sqrt(in1_features)
        init.uniform_(self.weight, -bound, bound)
        if bias:
            init.uniform_(self.bias, -bound, bound)
        _place(self, device)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


# -- activations -------------------------------------------------------------------------------------

def _activation(name, fn, doc, params=()):
    """A Module class whose forward is ``fn(x, **params)``."""
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        vals = dict(params)
        for (k, _), a in zip(params, args):
            vals[k] = a
        for k, v in kwargs.items():
            if k == "inplace":
                continue
            if k not in vals:
                raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")
            vals[k] = v
        for k, v in vals.items():
            object.__setattr__(self, k, v)

    def forward(self, input):
        return fn(input, **{k: getattr(self, k) for k, _ in params})

    def extra_repr(self):
        return ", ".join(f"{k}={getattr(self, k)!r}" if isinstance(getattr(self, k), str)
                         else f"{k}={getattr(self, k)}" for k, _ in params)

    return type(name, (Module,), {"__init__": __init__, "forward": forward,
                                   "extra_repr": extra_repr, "__doc__": doc})


ReLU = _activation("ReLU", F.relu, "max(x, 0)")
ReLU6 = _activation("ReLU6", F.relu6, "min(max(x, 0), 6)")
LeakyReLU = _activation("LeakyReLU", F.leaky_relu, "x if x > 0 else slope x",
                        (("negative_slope", 0.01),))
ELU = _activation("ELU", F.elu, "ELU", (("alpha", 1.0),))
CELU = _activation("CELU", F.celu, "CELU", (("alpha", 1.0),))
SELU = _activation("SELU", F.selu, "SELU")
GELU = _activation("GELU", F.gelu, "GELU (exact erf, or approximate='tanh')",
                   (("approximate", "none"),))
SiLU = _activation("SiLU", F.silu, "x sigmoid(x)")
Mish = _activation("Mish", F.mish, "x tanh(softplus(x))")
Sigmoid = _activation("Sigmoid", F.sigmoid, "1 / (1 + exp(-x))")
Tanh = _activation("Tanh", F.tanh, "tanh")
Hardsigmoid = _activation("Hardsigmoid", F.hardsigmoid, "hard sigmoid")
Hardswish = _activation("Hardswish", F.hardswish, "hard swish")
Hardtanh = _activation("Hardtanh", F.hardtanh, "clamp(x, min_val, max_val)",
                       (("min_val", -1.0), ("max_val", 1.0)))
Softsign = _activation("Softsign", F.softsign, "x / (1 + |x|)")
Softplus = _activation("Softplus", F.softplus, "log(1 + exp(beta x)) / beta",
                       (("beta", 1.0), ("threshold", 20.0)))
LogSigmoid = _activation("LogSigmoid", F.logsigmoid, "log(sigmoid(x))")
Tanhshrink = _activation("Tanhshrink", F.tanhshrink, "x - tanh(x)")
Softmax = _activation("Softmax", F.softmax, "softmax along dim", (("dim", None),))
LogSoftmax = _activation("LogSoftmax", F.log_softmax, "log_softmax along dim", (("dim", None),))
Softmin = _activation("Softmin", F.softmin, "softmax(-x) along dim", (("dim", None),))
GLU = _activation("GLU", F.glu, "a * sigmoid(b), halves of dim", (("dim", -1),))


# -- shape, dropout ---------------------------------------------------------------------------------------

class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return lucid.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        d = self.dim % input.ndim
        shape = tuple(input.shape[:d]) + self.unflattened_size + tuple(input.shape[d + 1:])
        return input.reshape(*shape)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise lucid.ArgumentError(f"dropout probability has to be between 0 and 1, but got "
                                      f"{p}")
        self.p = p

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace=False"


# -- embedding, normalisation ----------------------------------------------------------------------------------

class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors; N(0, 1) init, padding row zeroed."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise lucid.ArgumentError(f"Embedding: padding_idx {padding_idx} must be within "
                                          f"num_embeddings ({num_embeddings})")
            if padding_idx < 0:
                padding_idx += num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(_empty(num_embeddings, embedding_dim, dtype=dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        _place(self, device)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.detach().numpy()[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None):
        n, d = embeddings.shape
        return cls(n, d, padding_idx=padding_idx, _weight=embeddings.detach().clone(),
                   _freeze=freeze)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm,
                           self.norm_type, self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse:
            s += ", sparse=True"
        return s


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(lucid.ones(*self.normalized_shape,
                                               dtype=dtype or lucid.float32))
            if bias:
                self.bias = Parameter(lucid.zeros(*self.normalized_shape,
                                                  dtype=dtype or lucid.float32))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        _place(self, device)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None,
                 *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise lucid.ArgumentError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups, num_channels, eps, affine)
        self.weight = (Parameter(lucid.ones(num_channels, dtype=dtype or lucid.float32))
                       if affine else None)
        self.bias = (Parameter(lucid.zeros(num_channels, dtype=dtype or lucid.float32))
                     if affine and bias else None)
        for name in ("weight", "bias"):
            if getattr(self, name) is None:
                self.register_parameter(name, None)
        _place(self, device)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _BatchNorm(Module):
    _expected_dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        dt = dtype or lucid.float32
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(lucid.ones(num_features, dtype=dt)) if affine else None
        self.bias = Parameter(lucid.zeros(num_features, dtype=dt)) if affine and bias else None
        for name in ("weight", "bias"):
            if getattr(self, name) is None:
                self.register_parameter(name, None)
        if track_running_stats:
            self.register_buffer("running_mean", lucid.zeros(num_features, dtype=dt))
            self.register_buffer("running_var", lucid.ones(num_features, dtype=dt))
            self.register_buffer("num_batches_tracked", lucid.tensor(0, dtype=lucid.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        _place(self, device)

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def forward(self, input):
        if input.ndim not in self._expected_dims:
            raise lucid.ShapeError(f"{type(self).__name__}: expected a "
                                   f"{' or '.join(map(str, self._expected_dims))}-d input, got "
                                   f"{input.ndim}-d")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with lucid.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or not self.track_running_stats
        return F.batch_norm(input, self.running_mean if not use_batch or self.training else None,
                            self.running_var if not use_batch or self.training else None,
                            self.weight, self.bias, use_batch, momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L)."""
    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W)."""
    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    _expected_dims = (5,)


# -- convolutions --------------------------------------------------------------------------------------------

class _ConvNd(Module):
    _nd = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", output_padding=0, device=None,
                 dtype=None):
        super().__init__()
        nd = self._nd
        name = type(self).__name__
        if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
            raise lucid.ArgumentError(f"{name}: groups must be a positive integer, got {groups!r}")
        if in_channels % groups or out_channels % groups:
            raise lucid.ArgumentError(f"{name}: in_channels and out_channels must be divisible "
                                      f"by groups")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise lucid.ArgumentError(f"{name}: invalid padding string {padding!r}, should "
                                          f"be one of 'valid', 'same'")
            if padding == "same" and any(v != 1 for v in F._tuple(stride, nd, "stride", name)):
                raise lucid.ArgumentError(f"{name}: padding='same' is not supported for "
                                          f"strided convolutions")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise lucid.ArgumentError(f"padding_mode {padding_mode!r} is not supported")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = F._tuple(kernel_size, nd, "kernel_size", name)
        self.stride = F._tuple(stride, nd, "stride", name)
        self.padding = (padding if isinstance(padding, str)
                        else F._tuple(padding, nd, "padding", name))
        self.dilation = F._tuple(dilation, nd, "dilation", name)
        self.output_padding = F._tuple(output_padding, nd, "output_padding", name)
        self.groups, self.padding_mode = groups, padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(_empty(*shape, dtype=dtype))
        if bias:
            self.bias = Parameter(_empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        _place(self, device)

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _padded(self, input):
        if self.padding_mode == "zeros" or isinstance(self.padding, str):
            return input, self.padding
        flat = []
        for p in reversed(self.padding):
            flat += [p, p]
        return F.pad(input, tuple(flat), mode=self.padding_mode), 0

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    _nd = 1

    def forward(self, input):
        x, pad = self._padded(input)
        return F.conv1d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class Conv2d(_ConvNd):
    _nd = 2

    def forward(self, input):
        x, pad = self._padded(input)
        return F.conv2d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class Conv3d(_ConvNd):
    _nd = 3

    def forward(self, input):
        x, pad = self._padded(input)
        return F.conv3d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class ConvTranspose1d(_ConvNd):
    _nd = 1
    _transposed = True

    def forward(self, input):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class ConvTranspose2d(_ConvNd):
    _nd = 2
    _transposed = True

    def forward(self, input):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class ConvTranspose3d(_ConvNd):
    _nd = 3
    _transposed = True

    def forward(self, input):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


# -- pools, resizing ------------------------------------------------------------------------------------------------

def _default_stride(stride, kernel_size):
    """torch's pools: stride None (or empty) means the kernel size; 0 stays 0 (and raises
    when the pool runs)."""
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        return kernel_size
    return stride


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = _default_stride(stride, kernel_size)
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(MaxPool2d):
    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = _default_stride(stride, kernel_size)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(AvgPool2d):
    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class MaxPool3d(MaxPool2d):
    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool3d(AvgPool2d):
    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class MaxUnpool2d(Module):
    """The partial inverse of MaxPool2d: ``forward(input, indices, output_size=None)``."""
    _nd = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        name, nd = type(self).__name__, self._nd      # torch keeps tuples of nd ints here
        self.kernel_size = F._tuple(kernel_size, nd, "kernel_size", name)
        self.stride = F._tuple(_default_stride(stride, kernel_size), nd, "stride", name)
        self.padding = F._tuple(padding, nd, "padding", name)

    def forward(self, input, indices, output_size=None):
        fn = F.max_unpool1d if self._nd == 1 else F.max_unpool2d
        return fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    _nd = 1


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool3d(AdaptiveAvgPool2d):
    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class Unfold(Module):
    """Sliding windows as columns: (N, C, H, W) -> (N, C * kH * kW, L)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (
            kernel_size, dilation, padding, stride)

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Columns summed back into windows: (N, C * kH * kW, L) -> (N, C, *output_size)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None):
        super().__init__()
        self.size, self.scale_factor, self.mode, self.align_corners = (
            size, scale_factor, mode, align_corners)

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners)

    def extra_repr(self):
        if self.scale_factor is not None:
            sf = self.scale_factor
            sf = tuple(float(f) for f in sf) if isinstance(sf, (tuple, list)) else float(sf)
            return f"scale_factor={sf!r}, mode={self.mode!r}"
        return f"size={self.size!r}, mode={self.mode!r}"


# -- attention -----------------------------------------------------------------------------------------------------

class NonDynamicallyQuantizableLinear(Linear):
    """The Linear of MultiheadAttention's output projection, named as torch names it."""


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention (same parameter names and init). With kdim or vdim
    other than embed_dim the projections are three parameters (q_proj_weight,
    k_proj_weight, v_proj_weight) and in_proj_weight is None, as torch. add_bias_kv
    appends a learned key and value (bias_k, bias_v) to every sequence, add_zero_attn a
    zero key and value, each one more column that the masks leave open."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise lucid.ArgumentError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.batch_first, self.head_dim = batch_first, embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_empty(3 * embed_dim, embed_dim, dtype=dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(_empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(_empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(_empty(embed_dim, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(_empty(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(_empty(1, 1, embed_dim, dtype=dtype))
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if bias:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        _place(self, device)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        out, w = F.multi_head_attention_forward(
            query, key, value, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.out_proj.weight, self.out_proj.bias, key_padding_mask, need_weights, attn_mask,
            average_attn_weights, is_causal, self.dropout, self.training,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, bias_k=self.bias_k, bias_v=self.bias_v,
            add_zero_attn=self.add_zero_attn)
        if unbatched:
            out = out.squeeze(1)
            w = w.squeeze(0) if w is not None else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, w
