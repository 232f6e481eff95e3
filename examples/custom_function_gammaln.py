"""A custom differentiable op: scipy.special.gammaln wrapped in lucid.autograd.Function.

The derivative of log Gamma is digamma, whose derivative is polygamma(1, .), and so on;
each is its own Function whose backward calls the next, so the backward is written in
differentiable ops and lucid computes derivatives of any order (create_graph=True).
"""
import numpy as np
import scipy.special

import lucid
from lucid.autograd import Function


def _from_scipy(fn, x, *args):
    with np.errstate(all="ignore"):
        r = fn(*args, x.detach().numpy())
    return lucid.tensor(np.asarray(r), dtype=x.dtype)


class Polygamma(Function):
    """polygamma(n, x): the n-th derivative of digamma."""

    @staticmethod
    def forward(ctx, n, x):
        ctx.n = n
        ctx.save_for_backward(x)
        return _from_scipy(scipy.special.polygamma, x, n)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return None, g * Polygamma.apply(ctx.n + 1, x)


class LogGamma(Function):
    """log|Gamma(x)|, d/dx = digamma(x) = polygamma(0, x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _from_scipy(scipy.special.gammaln, x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * Polygamma.apply(0, x)


gammaln = LogGamma.apply


def main():
    x = lucid.tensor([0.5, 1.0, 2.5, 7.0], dtype=lucid.float64, requires_grad=True)
    y = gammaln(x)
    (d1,) = lucid.autograd.grad(y.sum(), x, create_graph=True)
    (d2,) = lucid.autograd.grad(d1.sum(), x, create_graph=True)
    (d3,) = lucid.autograd.grad(d2.sum(), x)
    print("gammaln   ", y.detach().numpy())
    print("digamma   ", d1.detach().numpy())
    print("trigamma  ", d2.detach().numpy())
    print("tetragamma", d3.numpy())
    return x, y, d1, d2, d3


if __name__ == "__main__":
    main()
