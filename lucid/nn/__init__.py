"""lucid.nn: Module, Parameter, containers, layers and losses (PyTorch's names and defaults)."""
from lucid.nn import functional, init, utils
from lucid.nn.containers import ModuleDict, ModuleList, ParameterList, Sequential
from lucid.nn.layers import (
    CELU, ELU, GELU, GLU, SELU, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d,
    AvgPool1d, AvgPool2d, AvgPool3d, BatchNorm1d, BatchNorm2d, BatchNorm3d, Bilinear, Conv1d,
    Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, Dropout, Embedding,
    Flatten, Fold, GroupNorm, Hardsigmoid, Hardswish, Hardtanh, Identity, LayerNorm, LeakyReLU,
    Linear, LogSigmoid, LogSoftmax, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d,
    Mish,
    MultiheadAttention, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softmin, Softplus, Softsign, Tanh,
    Tanhshrink, Unflatten, Unfold, Upsample,
)
from lucid.nn.loss import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss,
    NLLLoss, SmoothL1Loss, SoftMarginLoss,
)
from lucid.nn.module import Module
from lucid.nn.parameter import Parameter

__all__ = [
    "functional", "init", "utils", "Module", "Parameter", "Sequential", "ModuleList", "ModuleDict",
    "ParameterList",
    "Identity", "Linear", "Bilinear", "Embedding", "LayerNorm", "GroupNorm", "BatchNorm1d",
    "BatchNorm2d", "BatchNorm3d", "Dropout", "Flatten", "Unflatten", "Fold", "Unfold", "Conv1d",
    "Conv2d",
    "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d", "MaxPool2d",
    "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "Upsample",
    "MultiheadAttention",
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "CELU", "SELU", "GELU", "SiLU", "Mish", "Sigmoid",
    "Tanh", "Hardsigmoid", "Hardswish", "Hardtanh", "Softsign", "Softplus", "LogSigmoid",
    "Tanhshrink", "Softmax", "LogSoftmax", "Softmin", "GLU",
    "MSELoss", "L1Loss", "HuberLoss", "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "SoftMarginLoss",
]
