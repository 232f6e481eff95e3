"""The C kernels of the special functions (src/lucid_special.h) and of the activations with
parameters (hardtanh, celu, softplus(beta, threshold); unary.pyx): values against mpmath
and torch over the whole range (tails, poles, negative arguments), special values as torch,
fused eager backward against the graph-mode formula, gradcheck / gradgradcheck, errors."""
import math

import numpy as np
import pytest

import lucid
import lucid.nn.functional as F

mpmath = pytest.importorskip("mpmath")


def _mp(f, xs, dps=40):
    with mpmath.workdps(dps):
        return np.array([float(f(mpmath.mpf(float(v)))) for v in xs])


def _rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.abs(got - want) / np.maximum(np.abs(want), 1e-300)


def _f64(a):
    return lucid.tensor(np.asarray(a, dtype=np.float64))


# -- values against mpmath, far beyond the op-table domains ---------------------------------

RNG = np.random.default_rng(7)
WIDE = {
    # the negative axis of lgamma / digamma cancels near their zeros: checked away from them
    "lgamma": (np.concatenate([RNG.uniform(0, 12, 200), np.exp(RNG.uniform(-600, 600, 100)),
                               [1.0, 2.0, 1 - 1e-9, 2 + 1e-9, 10.0]]),
               lambda x: mpmath.log(abs(mpmath.gamma(x))), 2e-15),
    "digamma": (np.concatenate([RNG.uniform(0, 12, 200), np.exp(RNG.uniform(-600, 600, 100)),
                                [1.4616321449683622, 10.0, 1e-300]]), mpmath.digamma, 2e-15),
    "sinc": (np.concatenate([RNG.uniform(-20, 20, 200), np.exp(RNG.uniform(-40, 40, 100)),
                             [0.999999999, 1e5 + 0.25]]),
             lambda x: mpmath.sincpi(x), 2e-15),
    "i0": (np.concatenate([RNG.uniform(-40, 40, 200), RNG.uniform(600, 713, 50)]),
           lambda x: mpmath.besseli(0, x), 2e-15),
    "erfcx": (np.concatenate([RNG.uniform(-26, 40, 200), np.exp(RNG.uniform(3, 9, 50))]),
              lambda x: mpmath.exp(x * x) * mpmath.erfc(x), 2e-15),
    "log_ndtr": (np.concatenate([RNG.uniform(-40, 8, 200), -np.exp(RNG.uniform(3, 300, 50))]),
                 lambda x: mpmath.log(mpmath.ncdf(x)), 2e-15),
}


@pytest.mark.parametrize("name", sorted(WIDE))
def test_wide_range_vs_mpmath(name):
    xs, f, rtol = WIDE[name]
    dps = 40 if name != "log_ndtr" else 400     # ncdf far in the tail
    want = _mp(f, xs, dps)
    got = getattr(lucid.special, name)(_f64(xs)).numpy()
    r = _rel(got, want)
    assert r.max() <= rtol, (name, xs[r.argmax()], got[r.argmax()], want[r.argmax()])
    x32 = xs[(np.abs(xs) < 1e38) & (np.abs(xs) > 1e-38)].astype(np.float32)
    got32 = getattr(lucid.special, name)(lucid.tensor(x32)).numpy()
    want32 = _mp(f, x32, dps)
    fin = np.isfinite(want32.astype(np.float32)) & (np.abs(want32) > 1e-37)
    # float32 is computed in double and rounded once: within one float32 ulp
    assert (_rel(got32, want32)[fin] <= 2 ** -23).all()


def test_ndtri_tails_vs_mpmath():
    p = np.concatenate([RNG.uniform(0, 1, 100), np.exp(RNG.uniform(-744, -2, 100)),
                        [5e-324, 1e-310, 1e-300, 1e-45, 1e-17, 6e-17, 0.5, 1 - 2 ** -53]])
    with mpmath.workdps(60):
        want = []
        for v in p:
            v = mpmath.mpf(float(v))
            if v > 1e-10:
                want.append(float(mpmath.sqrt(2) * mpmath.erfinv(2 * v - 1)))
            else:           # the lower tail: solve ncdf(y) = p
                y0 = -mpmath.sqrt(-2 * mpmath.log(v))
                want.append(float(mpmath.findroot(lambda y: mpmath.log(mpmath.ncdf(y)) - mpmath.log(v), y0)))
    got = lucid.special.ndtri(_f64(p)).numpy()
    r = _rel(got, np.array(want))
    assert r.max() <= 2e-15, (p[r.argmax()], got[r.argmax()], want[r.argmax()])


def test_ndtri_float32_vs_mpmath():
    # float32 leaves out float64's Newton step in the far tail (the fit alone is 7e-12):
    # within one float32 ulp of the exact value everywhere, down to the smallest subnormal
    p = np.concatenate([RNG.uniform(0, 1, 300), np.exp(RNG.uniform(-103, -1, 300)),
                        [1e-45, 1.2e-38, 6e-17, 1e-30, 0.5]]).astype(np.float32)
    p = p[(p > 0) & (p < 1)]
    want = _mp(lambda v: mpmath.findroot(lambda y: mpmath.log(mpmath.ncdf(y)) - mpmath.log(v),
                                         -mpmath.sqrt(-2 * mpmath.log(v))) if v < 1e-10
               else mpmath.sqrt(2) * mpmath.erfinv(2 * v - 1), p, 60)
    got = lucid.special.ndtri(lucid.tensor(p)).numpy()
    assert got.dtype == np.float32
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(got - want) / ulp
    assert err.max() <= 1.0, (p[err.argmax()], got[err.argmax()], want[err.argmax()])


def test_trigamma_vs_mpmath():
    # digamma's backward and polygamma(1, .): one branch-free kernel
    xs = np.concatenate([RNG.uniform(0, 12, 300), np.exp(RNG.uniform(-30, 600, 100)),
                         np.floor(RNG.uniform(-30, 0, 60)) + RNG.uniform(0.05, 0.95, 60),
                         [1.0, 2.0, 9.999999999, 10.0, 1e-150, 0.5]])
    want = _mp(lambda v: mpmath.psi(1, v), xs)
    x = lucid.tensor(xs, requires_grad=True)
    (g,) = lucid.autograd.grad(lucid.digamma(x).sum(), x)
    p1 = lucid.polygamma(1, _f64(xs)).numpy()
    # one function; polygamma's loop (any order) calls the scalar sin, digamma's backward
    # the vector one: the negative axis may differ in the last bit
    np.testing.assert_allclose(g.numpy(), p1, rtol=2e-15, atol=0)
    r = _rel(p1, want)
    pos = xs > 0
    assert r[pos].max() <= 4e-15, (xs[pos][r[pos].argmax()], r[pos].max())
    # the reflection cancels between (pi / sin(pi x))^2 and psi1(1 - x): bound by those terms
    neg = ~pos
    scale = (np.pi / np.sin(np.pi * xs[neg])) ** 2 + np.abs(want[neg])
    assert (np.abs(p1[neg] - want[neg]) <= 4e-15 * scale).all()
    x32 = xs[pos & (xs < 1e18) & (xs > 1e-18)].astype(np.float32)
    want32 = _mp(lambda v: mpmath.psi(1, v), x32)
    got32 = lucid.polygamma(1, lucid.tensor(x32)).numpy()
    assert (_rel(got32, want32) <= 2 ** -23).all()
    # poles +inf, 0 at +inf, nan at -inf and nan
    sp = lucid.polygamma(1, _f64([0.0, -0.0, -3.0, math.inf, -math.inf, math.nan])).numpy()
    np.testing.assert_array_equal(sp, [math.inf, math.inf, math.inf, 0.0, math.nan, math.nan])


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8])
def test_polygamma_vs_mpmath_both_signs(n):
    xs = np.concatenate([RNG.uniform(0.05, 30, 40), np.floor(RNG.uniform(-8, 0, 40)) + 0.013,
                         [1e-3, 1e3, -100.5, -20.75]])
    want = _mp(lambda v: mpmath.polygamma(n, v), xs)
    got = lucid.polygamma(n, _f64(xs)).numpy()
    ok = _rel(got, want) <= 1e-13
    # the negative axis cancels near the zeros of odd orders: an absolute bound there
    # the negative axis cancels between the poles either side (exactly so at the
    # half-integers for even n): a bound relative to the size of those terms
    neg = xs < 0
    f = xs - np.floor(xs)
    scale = math.factorial(n) * (f ** -(n + 1.0) + (1 - f) ** -(n + 1.0)) + np.abs(want)
    ok |= neg & (np.abs(got - want) <= 1e-13 * scale)
    assert ok.all(), (xs[~ok], got[~ok], want[~ok])


# -- special values as torch ---------------------------------------------------------------

SPECIAL_X = [0.0, -0.0, -1.0, -2.0, -2.5, -0.5, 1e-300, 1.0, 2.0, math.inf, -math.inf, math.nan]
# ndtri's tiny arguments are checked against mpmath (test_ndtri_tails_vs_mpmath)
SPECIAL_P = [0.0, -0.0, 1.0, -0.1, 1.1, 0.5, math.nan, math.inf]


@pytest.mark.parametrize("name,xs", [
    ("lgamma", SPECIAL_X), ("digamma", SPECIAL_X), ("erfcx", SPECIAL_X),
    ("log_ndtr", SPECIAL_X), ("ndtri", SPECIAL_P), ("i0", SPECIAL_X[:-3] + [math.nan]),
    ("sinc", [0.0, -0.0, 0.5, -2.5, 1e-300, math.nan])])
def test_special_values_as_torch(torch, name, xs):
    x = np.array(xs)
    got = getattr(lucid.special, name)(_f64(x)).numpy()
    want = getattr(torch.special, name, getattr(torch, name, None))(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, equal_nan=True,
                               err_msg=f"{name}({x})")


def test_documented_departures_from_torch(torch):
    # i0 grows without bound (torch gives nan at +-inf); sinc tends to 0 (torch: nan);
    # sinc is exactly 0 at the nonzero integers (torch: sin(pi x) rounded, e.g. 3.9e-17)
    assert lucid.i0(_f64([math.inf, -math.inf])).numpy().tolist() == [math.inf, math.inf]
    assert lucid.sinc(_f64([math.inf, -math.inf, 1.0, -3.0])).numpy().tolist() == [0.0] * 4


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_poles_as_torch(torch, n):
    x = np.array([0.0, -1.0, -2.0, math.inf, math.nan, -math.inf])
    got = lucid.polygamma(n, _f64(x)).numpy()
    # at the poles lucid gives the signed infinity of the order (torch's trigamma gives a
    # large finite number at the negative integers), 0 at +inf, nan at -inf and nan
    want = np.array([math.inf * (-1) ** (n + 1)] * 3 + [0.0, math.nan, math.nan])
    np.testing.assert_array_equal(got, want)


def test_polygamma_argument_errors():
    x = lucid.tensor([1.5])
    with pytest.raises(ValueError, match="negative n"):
        lucid.polygamma(-1, x)
    with pytest.raises(TypeError):
        lucid.polygamma(1.5, x)
    assert lucid.polygamma(1, lucid.tensor([1, 2])).dtype is lucid.float32     # as torch
    assert lucid.tensor([1.5]).polygamma(2).shape == (1,)


# -- dtypes, layouts, lengths ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["lgamma", "digamma", "sinc", "i0", "erfcx", "log_ndtr", "ndtri"])
def test_half_dtypes_and_views(name):
    f = getattr(lucid.special, name)
    a = np.linspace(0.05, 0.95, 48).reshape(6, 8)
    ref = f(_f64(a)).numpy()
    for dt in (lucid.float16, lucid.bfloat16, lucid.float32):
        xd = lucid.tensor(a, dtype=dt)
        y = f(xd)
        assert y.dtype is dt
        # the half result is f of the rounded input, computed in float32 and rounded once
        want = f(xd.double()).numpy()
        np.testing.assert_allclose(y.float().numpy(), want, rtol=1e-2 if dt is not lucid.float32 else 1e-6)
    v = _f64(a).T[1:, ::2]
    np.testing.assert_array_equal(f(v).numpy(), ref.T[1:, ::2])


@pytest.mark.parametrize("fn", [lambda x: F.hardtanh(x, -0.5, 2.0), lambda x: F.celu(x, 0.7),
                                lambda x: F.softplus(x, 2.0, 5.0), lambda x: lucid.polygamma(2, x)])
def test_param_ops_independent_of_length(fn):
    a = np.random.default_rng(1).uniform(0.1, 4.0, 131)
    full = fn(_f64(a)).numpy()
    for n in (1, 15, 16, 17, 33):
        np.testing.assert_array_equal(fn(_f64(a[:n])).numpy(), full[:n])


# -- activations with parameters against torch ------------------------------------------------

ACTS = [
    ("hardtanh", lambda m, x: m.hardtanh(x), {}),
    ("hardtanh", lambda m, x: m.hardtanh(x, -0.25, 1.5), {}),
    ("celu", lambda m, x: m.celu(x), {}),
    ("celu", lambda m, x: m.celu(x, 0.3), {}),
    ("celu", lambda m, x: m.celu(x, -2.0), {}),
    ("softplus", lambda m, x: m.softplus(x), {}),
    ("softplus", lambda m, x: m.softplus(x, 2.5, 4.0), {}),
    ("softplus", lambda m, x: m.softplus(x, 0.5, 1.0), {}),
    ("softplus", lambda m, x: m.softplus(x, -1.5, 3.0), {}),
]
ACT_X = np.array([-30.0, -3.0, -1.0, -0.6, -0.25, -0.1, 0.0, 0.1, 0.7, 1.5, 1.7, 3.0, 25.0, 900.0])


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("i", range(len(ACTS)), ids=[f"{a[0]}{i}" for i, a in enumerate(ACTS)])
def test_activation_values_and_grads_vs_torch(torch, i, dt):
    _, call, _ = ACTS[i]
    tf = torch.nn.functional
    x = lucid.tensor(ACT_X, dtype=getattr(lucid, dt), requires_grad=True)
    t = torch.tensor(ACT_X, dtype=getattr(torch, dt), requires_grad=True)
    y, yt = call(F, x), call(tf, t)
    assert y.dtype is getattr(lucid, dt)
    rtol = 1e-6 if dt == "float32" else 1e-14
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=1e-30)
    w = np.linspace(-1, 2, ACT_X.size)
    (y * lucid.tensor(w, dtype=y.dtype)).sum().backward()
    (yt * torch.tensor(w, dtype=yt.dtype)).sum().backward()
    # torch's celu backward scales by 1/alpha rounded to float32 (3.6e-7 off at alpha 0.3);
    # lucid's is exp(x / alpha) in the dtype, checked against the formula below
    grtol = max(rtol, 1e-6) if ACTS[i][0] == "celu" else rtol
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=grtol, atol=1e-30)
    if ACTS[i][0] == "celu" and dt == "float64":
        alpha = {2: 1.0, 3: 0.3, 4: -2.0}[i]
        np.testing.assert_allclose(x.grad.numpy(), w * np.where(ACT_X > 0, 1.0, np.exp(np.minimum(ACT_X, 0) / alpha)),
                                   rtol=1e-15)


@pytest.mark.parametrize("i", range(len(ACTS)), ids=[f"{a[0]}{i}" for i, a in enumerate(ACTS)])
def test_activation_gradcheck_and_fused_vs_graph(i):
    _, call, _ = ACTS[i]
    # away from the kinks (0, the bounds, the thresholds), where finite differences hold
    a = np.array([-2.3, -0.8, -0.37, 0.42, 0.9, 1.2, 2.2, 3.3])
    x = lucid.tensor(a, dtype=lucid.float64, requires_grad=True)
    fn = lambda v: call(F, v)                              # noqa: E731
    assert lucid.autograd.gradcheck(fn, (x,))
    assert lucid.autograd.gradgradcheck(fn, (x,))
    g = lucid.tensor(np.random.default_rng(i).standard_normal(a.size))
    (e,) = lucid.autograd.grad([fn(x)], [x], [g])
    (h,) = lucid.autograd.grad([fn(x)], [x], [g], create_graph=True)
    np.testing.assert_allclose(e.numpy(), h.detach().numpy(), rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_polygamma_gradcheck_and_fused_vs_graph(n):
    x = lucid.tensor([0.3, 1.7, 4.2, -0.6], dtype=lucid.float64, requires_grad=True)
    fn = lambda v: lucid.polygamma(n, v)                   # noqa: E731
    assert lucid.autograd.gradcheck(fn, (x,))
    assert lucid.autograd.gradgradcheck(fn, (x,))
    (e,) = lucid.autograd.grad([fn(x)], [x], [lucid.ones_like(x)])
    (h,) = lucid.autograd.grad([fn(x)], [x], [lucid.ones_like(x)], create_graph=True)
    np.testing.assert_allclose(e.numpy(), h.detach().numpy(), rtol=1e-14)
    want = _mp(lambda v: mpmath.polygamma(n + 1, v), x.detach().numpy())
    np.testing.assert_allclose(e.numpy(), want, rtol=1e-13)


def test_activation_special_values_and_half(torch):
    x = np.array([math.nan, math.inf, -math.inf, -0.0, 0.0])
    tf = torch.nn.functional
    for call in (lambda m, v: m.hardtanh(v), lambda m, v: m.celu(v, 0.5),
                 lambda m, v: m.softplus(v, 2.0, 10.0)):
        got = call(F, _f64(x)).numpy()
        want = call(tf, torch.tensor(x)).numpy()
        np.testing.assert_array_equal(got, want)
        num = ~np.isnan(want)         # the sign of a nan is not specified
        np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))
        h = call(F, lucid.tensor(ACT_X, dtype=lucid.float16))
        assert h.dtype is lucid.float16
        np.testing.assert_allclose(h.float().numpy(),
                                   call(tf, torch.tensor(ACT_X, dtype=torch.float16)).float().numpy(),
                                   rtol=2e-3, atol=1e-3)


def test_activation_argument_errors():
    x = lucid.tensor([1.0, -2.0])
    with pytest.raises(ValueError, match="alpha"):
        F.celu(x, 0.0)
    with pytest.raises(ValueError, match="min_val"):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(ValueError, match="beta"):
        F.softplus(x, 0.0)
    with pytest.raises(TypeError, match="alpha"):
        F.celu(x, "a")


def test_softmin_vs_torch(torch):
    a = np.random.default_rng(3).standard_normal((3, 5))
    x = lucid.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    for dim in (0, 1, -1):
        y, yt = F.softmin(x, dim), torch.nn.functional.softmin(t, dim)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-14)
    w = np.linspace(-1, 1, a.size).reshape(a.shape)
    (F.softmin(x, 1) * lucid.tensor(w)).sum().backward()
    (torch.nn.functional.softmin(t, 1) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-13, atol=1e-15)
    assert lucid.autograd.gradgradcheck(lambda v: F.softmin(v, 1), (x,))


def test_celu_in_lucid_as_torch(torch):
    x = np.array([-3.0, -0.5, 0.0, 0.5, 2.0])
    t = torch.tensor(x, requires_grad=True)
    v = lucid.tensor(x, requires_grad=True)
    np.testing.assert_allclose(lucid.celu(v, 0.5).detach().numpy(),
                               torch.celu(t, 0.5).detach().numpy(), rtol=1e-15)
    lucid.celu(v).sum().backward()
    torch.celu(t).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), t.grad.numpy(), rtol=1e-15)


def test_schemas():
    for name in ("hardtanh", "celu", "softplus_beta", "polygamma"):
        s = lucid.ops.schema(name)
        assert s.saves_input and not s.saves_output
    x = lucid.tensor([0.5], requires_grad=True)
    assert type(F.celu(x).grad_fn).schema_v1 is lucid.ops.schema("celu")
    assert type(lucid.polygamma(1, x).grad_fn).__name__ == "PolygammaBackward"


# -- xlogy: a binary kernel row (src/lucid_binary.c) ----------------------------------------

XA = np.array([0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 1.5, -2.0, 3.0, np.nan, np.inf, 0.0, 2.0, 1e-300])
XB = np.array([0.0, 2.0, -1.0, np.inf, np.nan, 1e-300, 0.5, 3.0, np.nan, 2.0, 0.0, -np.inf, -1.0, 0.0])


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_xlogy_values_and_grads_vs_torch(torch, dt):
    tdt = getattr(torch, dt)
    x = lucid.tensor(XA, dtype=getattr(lucid, dt), requires_grad=True)
    y = lucid.tensor(XB, dtype=getattr(lucid, dt), requires_grad=True)
    tx, ty = (torch.tensor(v, dtype=tdt, requires_grad=True) for v in (XA, XB))
    r, rt = lucid.xlogy(x, y), torch.xlogy(tx, ty)
    assert r.dtype is getattr(lucid, dt)
    # one log and one multiply in the dtype (torch's log and glibc's may differ by an ulp)
    tol = dict(rtol=1e-6 if dt == "float32" else 1e-15, atol=0)
    np.testing.assert_allclose(r.detach().numpy(), rt.detach().numpy(), **tol)
    w = np.linspace(-1, 2, XA.size)
    w[3] = 0.0          # g = 0 where log(b) = inf: xlogy(g, b) = 0, as torch
    (r * lucid.tensor(w, dtype=r.dtype)).sum().backward()
    (rt * torch.tensor(w, dtype=tdt)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), **tol)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_xlogy_accuracy_vs_mpmath(dt):
    a = np.concatenate([RNG.uniform(-10, 10, 200), np.exp(RNG.uniform(-80, 80, 100))]).astype(dt)
    b = np.concatenate([np.exp(RNG.uniform(-80, 80, 200)), RNG.uniform(0, 3, 100)]).astype(dt)
    want = np.array([float(mpmath.mpf(float(u)) * mpmath.log(mpmath.mpf(float(v))))
                     for u, v in zip(a, b)])
    got = lucid.xlogy(lucid.tensor(a), lucid.tensor(b)).numpy()
    # one log and one multiply in the dtype: a few ulp of the result
    ulp = np.spacing(np.abs(want).astype(dt)).astype(np.float64)
    assert (np.abs(got - want) / ulp).max() <= 5


def test_xlogy_broadcasting_scalars_dtypes(torch):
    a = np.random.default_rng(2).uniform(-2, 2, (3, 4))
    b = np.random.default_rng(3).uniform(0.1, 3, (4,))
    for la, lb, ta, tb in [(a, b, a, b), (a, 2.5, a, 2.5), (1.5, b, 1.5, b),
                           (a[:, :1], b, a[:, :1], b), (a.T[1:, ::2], b[:3, None], a.T[1:, ::2], b[:3, None])]:
        L_ = [lucid.tensor(v) if isinstance(v, np.ndarray) else v for v in (la, lb)]
        T_ = [torch.tensor(v) if isinstance(v, np.ndarray) else v for v in (ta, tb)]
        np.testing.assert_allclose(lucid.xlogy(*L_).numpy(), torch.xlogy(*T_).numpy(), rtol=1e-15)
    i = lucid.tensor([1, 2, 3])
    assert lucid.xlogy(i, i).dtype is lucid.float32           # as torch
    assert lucid.xlogy(lucid.tensor([1.0], dtype=lucid.float16), 2.0).dtype is lucid.float16
    assert lucid.tensor([2.0]).xlogy(3.0).shape == (1,)
    assert lucid.special.xlogy is lucid.xlogy
    s = lucid.ops.schema("xlogy")
    assert s.saves_input and not s.saves_output
    np.testing.assert_allclose(lucid.xlogy(lucid.tensor(a), lucid.tensor(b)).numpy(),
                               torch.xlogy(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-15)


def test_xlogy_length_independent():
    a = np.random.default_rng(1).uniform(-2, 2, 131)
    b = np.random.default_rng(2).uniform(0, 3, 131)
    full = lucid.xlogy(_f64(a), _f64(b)).numpy()
    for n in (1, 15, 16, 17, 33):
        np.testing.assert_array_equal(lucid.xlogy(_f64(a[:n]), _f64(b[:n])).numpy(), full[:n])


def test_xlogy_gradcheck_and_fused_vs_graph():
    p = lucid.tensor([[0.5, -1.5], [2.0, 0.3]], dtype=lucid.float64, requires_grad=True)
    q = lucid.tensor([0.7, 2.2], dtype=lucid.float64, requires_grad=True)
    assert lucid.autograd.gradcheck(lucid.xlogy, (p, q))
    assert lucid.autograd.gradgradcheck(lucid.xlogy, (p, q))
    assert lucid.autograd.gradgradcheck(lambda u: lucid.xlogy(u, 1.7), (p,))
    assert lucid.autograd.gradgradcheck(lambda v: lucid.xlogy(0.6, v), (q,))
    # the fused C backward and the graph-mode formula, edge values included
    x = lucid.tensor(XA, requires_grad=True)
    y = lucid.tensor(XB, requires_grad=True)
    g = lucid.tensor(np.linspace(-1, 2, XA.size))
    fused = lucid.autograd.grad(lucid.xlogy(x, y), (x, y), g)
    graph = lucid.autograd.grad(lucid.xlogy(x, y), (x, y), g, create_graph=True)
    for f, h in zip(fused, graph):
        np.testing.assert_array_equal(f.numpy(), h.detach().numpy())


def test_xlogy_needs_no_scipy():
    from lucid_testutils import run_child     # the lucid under test, from a temporary dir
    code = ("import sys; sys.modules['scipy'] = None; sys.modules['scipy.special'] = None\n"
            "import lucid\n"
            "x = lucid.tensor([0.0, 2.0], dtype=lucid.float64, requires_grad=True)\n"
            "r = lucid.special.xlogy(x, lucid.tensor([0.0, 3.0], dtype=lucid.float64))\n"
            "r.sum().backward()\n"
            "print(*r.tolist(), *x.grad.tolist())")
    out = run_child(code)
    assert out.returncode == 0, out.stderr
    got = [float(v) for v in out.stdout.split()]
    assert got == pytest.approx([0.0, 2 * math.log(3.0), 0.0, math.log(3.0)], rel=1e-15)
