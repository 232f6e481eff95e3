"""Reverse-mode automatic differentiation: backward, grad, grad mode, gradcheck."""
from lucid._core.core import AccumulateGrad, Node, SavedTensor, is_grad_enabled
from lucid.autograd.engine import backward, grad
from lucid.autograd.grad_mode import enable_grad, no_grad, set_grad_enabled
from lucid.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = [
    "AccumulateGrad", "GradcheckError", "Node", "SavedTensor", "backward", "enable_grad", "grad",
    "gradcheck", "gradgradcheck", "is_grad_enabled", "no_grad", "set_grad_enabled",
]
