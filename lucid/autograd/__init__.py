"""Reverse-mode automatic differentiation: backward, grad, grad mode, gradcheck,
custom Functions and functional transforms."""
from lucid._core.core import AccumulateGrad, Node, SavedTensor, is_grad_enabled
from lucid.autograd import functional
from lucid.autograd.engine import backward, grad
from lucid.autograd.function import Function, FunctionCtx, once_differentiable
from lucid.autograd.grad_mode import enable_grad, no_grad, set_grad_enabled
from lucid.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = [
    "AccumulateGrad", "Function", "FunctionCtx", "GradcheckError", "Node", "SavedTensor",
    "backward", "enable_grad", "functional", "grad", "gradcheck", "gradgradcheck",
    "is_grad_enabled", "no_grad", "once_differentiable", "set_grad_enabled",
]
