"""Ties, kinks and edges follow PyTorch's documented choices.

The expected values are mathematical facts of those conventions (abs'(0) = 0,
relu'(0) = 0, sqrt'(0) = inf, ties share or select the gradient), and each is
also compared with torch when it is installed.
"""
import math

import numpy as np
import pytest

import lucid


def grad_of(fn, values, dtype=lucid.float64):
    x = lucid.tensor(np.array(values, dtype=np.float64), dtype=dtype, requires_grad=True)
    fn(x).sum().backward()
    return x.grad.numpy()


def torch_grad_of(torch, fn, values):
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    fn(x).sum().backward()
    return x.grad.numpy()


KINKS = [
    # name, lucid fn, torch fn (by name), inputs, expected gradient
    ("abs'(0)=0", lambda x: lucid.abs(x), lambda t, x: t.abs(x), [-1.0, 0.0, 2.0], [-1, 0, 1]),
    ("relu'(0)=0", lambda x: lucid.relu(x), lambda t, x: t.relu(x), [-1.0, 0.0, 2.0], [0, 0, 1]),
    ("sqrt'(0)=inf", lambda x: lucid.sqrt(x), lambda t, x: t.sqrt(x), [0.0, 4.0], [math.inf, 0.25]),
    ("sign'=0", lambda x: lucid.sign(x), lambda t, x: t.sign(x), [-1.0, 0.0, 2.0], [0, 0, 0]),
    ("floor'=0", lambda x: lucid.floor(x), lambda t, x: t.floor(x), [-1.5, 2.0], [0, 0]),
    ("clamp at the bounds passes g", lambda x: lucid.clamp(x, 0.0, 1.0),
     lambda t, x: t.clamp(x, 0.0, 1.0), [-1.0, 0.0, 0.5, 1.0, 2.0], [0, 1, 1, 1, 0]),
    ("leaky_relu'(0)=slope", lambda x: lucid.leaky_relu(x, 0.1),
     lambda t, x: t.nn.functional.leaky_relu(x, 0.1), [-1.0, 0.0, 1.0], [0.1, 0.1, 1]),
    ("hardtanh-like relu6 at 0 and 6", lambda x: lucid.relu6(x),
     lambda t, x: t.nn.functional.relu6(x), [0.0, 3.0, 6.0], [0, 1, 0]),
]


@pytest.mark.parametrize("name,fn,tfn,xs,want", KINKS, ids=[k[0] for k in KINKS])
def test_kinks(name, fn, tfn, xs, want):
    np.testing.assert_array_equal(grad_of(fn, xs), np.array(want, dtype=np.float64))


@pytest.mark.parametrize("name,fn,tfn,xs,want", KINKS, ids=[k[0] for k in KINKS])
def test_kinks_match_torch(name, fn, tfn, xs, want):
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(grad_of(fn, xs), torch_grad_of(torch, lambda x: tfn(torch, x), xs))


TIES = [
    # full max/min and amax/amin: tied extremes share the gradient evenly
    ("max full", lambda x: lucid.max(x), lambda t, x: t.max(x), [1.0, 3.0, 3.0], [0, 0.5, 0.5]),
    ("min full", lambda x: lucid.min(x), lambda t, x: t.min(x), [1.0, 1.0, 3.0], [0.5, 0.5, 0]),
    ("amax", lambda x: lucid.amax(x, 0), lambda t, x: t.amax(x, 0), [2.0, 2.0, 2.0],
     [1 / 3, 1 / 3, 1 / 3]),
    # max along a dim: only the selected index (the first of the ties) gets it
    ("max dim", lambda x: lucid.max(x, 0).values, lambda t, x: t.max(x, 0).values,
     [3.0, 1.0, 3.0], [1, 0, 0]),
    # maximum/minimum of equal elements: split evenly between the two inputs
    ("maximum tie", lambda x: lucid.maximum(x, x.detach()),
     lambda t, x: t.maximum(x, x.detach()), [1.0, 2.0], [0.5, 0.5]),
]


@pytest.mark.parametrize("name,fn,tfn,xs,want", TIES, ids=[k[0] for k in TIES])
def test_ties(name, fn, tfn, xs, want):
    np.testing.assert_allclose(grad_of(fn, xs), np.array(want), rtol=0, atol=1e-15)


@pytest.mark.parametrize("name,fn,tfn,xs,want", TIES, ids=[k[0] for k in TIES])
def test_ties_match_torch(name, fn, tfn, xs, want):
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(grad_of(fn, xs), torch_grad_of(torch, lambda x: tfn(torch, x), xs),
                               rtol=0, atol=1e-15)


def test_pow_edges_match_torch():
    """0 ** 0 and the exponent gradient at a zero base (masked to 0, as PyTorch)."""
    torch = pytest.importorskip("torch")
    a = np.array([0.0, 0.0, 2.0])
    b = np.array([0.0, 2.0, 0.5])
    la = lucid.tensor(a, dtype=lucid.float64, requires_grad=True)
    lb = lucid.tensor(b, dtype=lucid.float64, requires_grad=True)
    (la ** lb).sum().backward()
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    (ta ** tb).sum().backward()
    np.testing.assert_array_equal(la.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(lb.grad.numpy(), tb.grad.numpy())
