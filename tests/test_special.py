"""lucid.special against torch.special (values, gradients) and finite differences
(gradcheck, gradgradcheck: every derivative is a formula in lucid ops)."""
import numpy as np
import pytest

import lucid

torch = pytest.importorskip("torch")

ANY = np.array([-2.7, -0.6, -0.1, 0.0, 0.3, 1.7, 4.2])
POS = np.array([0.2, 0.7, 1.0, 2.5, 6.0])
PROB = np.array([0.01, 0.2, 0.5, 0.77, 0.99])

# name, lucid fn, torch fn, input, rtol, gradgradcheck input (None: skip)
CASES = [
    ("lgamma", lucid.lgamma, torch.lgamma, POS, 1e-13, POS),
    ("gammaln", lucid.special.gammaln, torch.special.gammaln, np.array([-2.5, -0.3, 0.4, 3.0]), 1e-13, None),
    # torch's trigamma (the derivative of digamma) is good to ~1e-9 only (mpmath test below)
    ("digamma", lucid.digamma, torch.digamma, POS, 5e-9, POS),
    ("psi", lucid.special.psi, torch.special.psi, np.array([-2.5, -0.3, 0.4, 3.0]), 5e-9, None),
    ("polygamma1", lambda x: lucid.polygamma(1, x), lambda x: torch.polygamma(1, x), POS, 5e-9, POS),
    ("polygamma3", lambda x: x.polygamma(3), lambda x: x.polygamma(3), POS, 1e-11, None),
    ("multigammaln", lambda x: lucid.special.multigammaln(x, 3), lambda x: torch.special.multigammaln(x, 3),
     POS + 1.5, 1e-13, None),
    ("erfcx", lucid.special.erfcx, torch.special.erfcx, np.append(ANY, [8.0, 30.0]), 1e-13, ANY),
    ("ndtr", lucid.special.ndtr, torch.special.ndtr, ANY, 1e-13, ANY),
    ("log_ndtr", lucid.special.log_ndtr, torch.special.log_ndtr, np.append(ANY, [-30.0, 9.0]), 1e-12, ANY),
    ("ndtri", lucid.special.ndtri, torch.special.ndtri, PROB, 1e-12, PROB),
    ("i0", lucid.i0, torch.i0, ANY, 1e-13, ANY),
    ("i0e", lucid.special.i0e, torch.special.i0e, ANY, 1e-13, ANY[ANY != 0]),   # kink at 0
    ("i1", lucid.special.i1, torch.special.i1, ANY, 1e-13, ANY),
    ("i1e", lucid.special.i1e, torch.special.i1e, ANY, 1e-13, ANY),
    ("sinc", lucid.sinc, torch.sinc, ANY, 1e-13, ANY),
    ("entr", lucid.special.entr, torch.special.entr, POS, 1e-13, POS),
    ("logit", lucid.logit, torch.logit, PROB, 1e-13, PROB),
    ("logit_eps", lambda x: lucid.logit(x, 0.05), lambda x: torch.logit(x, 0.05), PROB, 1e-13, None),
    ("expit", lucid.special.expit, torch.special.expit, ANY, 1e-7, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_grad_vs_torch(case):
    _name, fl, ft, a, rtol, _ = case
    x = lucid.tensor(a, dtype=lucid.float64, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    y, yt = fl(x), ft(t)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=1e-300)
    w = np.linspace(-1, 2, a.size)
    (y * lucid.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=max(rtol, 1e-11), atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c[5] is not None],
                         ids=[c[0] for c in CASES if c[5] is not None])
def test_gradcheck_gradgradcheck(case):
    _name, fl, _, _, _, a = case
    x = lucid.tensor(a, dtype=lucid.float64, requires_grad=True)
    assert lucid.autograd.gradcheck(fl, (x,))
    assert lucid.autograd.gradgradcheck(fl, (x,))


@pytest.mark.parametrize("fn", ["xlogy", "xlog1py"])
def test_xlogy(fn):
    a = np.array([0.0, 0.0, 1.5, -2.0, 3.0])
    b = np.array([0.0, 2.0, 0.5, 3.0, np.nan])
    lf, tf = getattr(lucid.special, fn), getattr(torch.special, fn)
    x, y = (lucid.tensor(v, dtype=lucid.float64, requires_grad=True) for v in (a, b))
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (a, b))
    r, rt = lf(x, y), tf(tx, ty)
    np.testing.assert_allclose(r.detach().numpy(), rt.detach().numpy(), rtol=1e-14)
    r[:4].sum().backward()
    rt[:4].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(y.grad.numpy()[1:4], ty.grad.numpy()[1:4], rtol=1e-14)
    p = lucid.tensor([[0.5, 1.5], [2.0, 0.3]], dtype=lucid.float64, requires_grad=True)
    q = lucid.tensor([0.7, 2.2], dtype=lucid.float64, requires_grad=True)
    assert lucid.autograd.gradcheck(lf, (p, q))
    assert lucid.autograd.gradgradcheck(lf, (p, q))
    assert lf(lucid.tensor([2.0]), 3.0).shape == (1,)


def test_dtypes_and_schema():
    for dt in (lucid.float16, lucid.float32, lucid.float64):
        x = lucid.tensor([0.5, 1.5], dtype=dt, requires_grad=True)
        y = lucid.lgamma(x)
        assert y.dtype is dt
        y.sum().backward()
        assert x.grad.dtype is dt
    assert lucid.lgamma(lucid.tensor([1, 2, 3])).dtype is lucid.float32      # as torch
    s = lucid.ops.schema("lgamma")
    assert s.saves_input and not s.saves_output
    assert type(lucid.lgamma(lucid.tensor([1.5], requires_grad=True)).grad_fn).schema_v1 is s
    assert lucid.ops.schema("ndtri").saves_output


def test_lgamma_third_derivative_is_tetragamma():
    import scipy.special as sc
    x = lucid.tensor([0.7, 2.0], dtype=lucid.float64, requires_grad=True)
    (d1,) = lucid.autograd.grad(lucid.lgamma(x).sum(), x, create_graph=True)
    (d2,) = lucid.autograd.grad(d1.sum(), x, create_graph=True)
    (d3,) = lucid.autograd.grad(d2.sum(), x)
    np.testing.assert_allclose(d3.numpy(), sc.polygamma(2, [0.7, 2.0]), rtol=1e-13)


def test_polygamma_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    x = lucid.tensor(POS, dtype=lucid.float64, requires_grad=True)
    for n in range(4):
        want = [float(mpmath.psi(n, v)) for v in POS]
        np.testing.assert_allclose(lucid.polygamma(n, x).detach().numpy(), want, rtol=1e-13)
    (g,) = lucid.autograd.grad(lucid.digamma(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), [float(mpmath.psi(1, v)) for v in POS], rtol=1e-13)


def test_sinc_second_derivative_at_zero():
    x = lucid.tensor([0.0], dtype=lucid.float64, requires_grad=True)
    (d1,) = lucid.autograd.grad(lucid.sinc(x).sum(), x, create_graph=True)
    (d2,) = lucid.autograd.grad(d1.sum(), x)
    assert d1.item() == 0.0
    assert d2.item() == pytest.approx(-np.pi ** 2 / 3, rel=1e-15)
