"""lucid's binary float kernels (pow, atan2, hypot, maximum, minimum, logaddexp)
and neg: accuracy against mpmath, C99 Annex F special values against NumPy, PyTorch's maximum/minimum rules, and
results that do not depend on length, threads or how an operand is broadcast."""

import itertools
import math

import numpy as np
import pytest

import lucid

mpmath = pytest.importorskip("mpmath")

DTYPES = [np.float32, np.float64]


def _t(a):
    return lucid.tensor(np.asarray(a))


def _ulps(got, exact, dt):
    """|got - exact| in units of the last place of exact rounded to dt (mpmath values)."""
    fi = np.finfo(dt)
    out = []
    for g, e in zip(np.asarray(got, np.float64), exact):
        ef = float(e)
        if math.isnan(g) or math.isnan(ef):
            out.append(0.0 if math.isnan(g) and math.isnan(ef) else math.inf)
            continue
        with np.errstate(over="ignore"):
            rd = dt(ef)
        if np.isinf(rd) or np.isinf(g):
            out.append(0.0 if g == rd else math.inf)
            continue
        u = max(float(np.spacing(abs(rd))), float(fi.smallest_subnormal))
        out.append(float(abs(mpmath.mpf(g) - e) / u))
    return np.array(out)


def _wide(rng, n, lo, hi):
    """Signed values whose magnitudes span 10**lo .. 10**hi."""
    return rng.standard_normal(n) * 10.0 ** rng.uniform(lo, hi, n)


# (name, lucid function, exact function, input generator(rng, n, dt))
ACCURACY = [
    ("pow", lucid.pow, mpmath.power,
     lambda r, n, dt: (r.uniform(0, 4, n), r.uniform(-30, 30, n))),
    ("pow_small_base", lucid.pow, mpmath.power,
     lambda r, n, dt: (10.0 ** r.uniform(-30, 0, n), r.uniform(-1.2, 1.2, n))),
    ("atan2", lucid.atan2, mpmath.atan2, lambda r, n, dt: (_wide(r, n, -5, 5), _wide(r, n, -5, 5))),
    ("hypot", lucid.hypot, lambda a, b: mpmath.sqrt(a * a + b * b),
     lambda r, n, dt: (_wide(r, n, -35, 35), _wide(r, n, -35, 35))),
    ("logaddexp", lucid.logaddexp, lambda a, b: mpmath.log(mpmath.exp(a) + mpmath.exp(b)),
     lambda r, n, dt: (r.uniform(-60, 60, n), r.uniform(-60, 60, n))),
]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name,fn,exact,gen", ACCURACY, ids=[a[0] for a in ACCURACY])
def test_within_4_ulp_of_mpmath(name, fn, exact, gen, dt):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    a, b = (v.astype(dt) for v in gen(rng, 1500, dt))
    got = fn(_t(a), _t(b)).numpy()
    with mpmath.workprec(160):
        ref = [exact(mpmath.mpf(float(x)), mpmath.mpf(float(y))) for x, y in zip(a, b)]
        err = _ulps(got, ref, dt)
    worst = int(np.argmax(err))
    assert err.max() <= 4, f"{name}({a[worst]!r}, {b[worst]!r}) = {got[worst]!r}: {err.max():.2f} ulp"


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("spread", [1e-2, 1e-6, 1e-12])
def test_logaddexp_accurate_near_its_zero(dt, spread):
    """e^a + e^b ~ 1: the naive sum cancels (NumPy and PyTorch lose all relative
    accuracy there); lucid recomputes those elements in double-double."""
    rng = np.random.default_rng(7)
    a = rng.uniform(-3, -1e-3, 800)
    b = np.log(-np.expm1(a) * (1 + rng.uniform(-spread, spread, a.size)))
    a, b = a.astype(dt), b.astype(dt)
    got = lucid.logaddexp(_t(a), _t(b)).numpy()
    with mpmath.workprec(300):
        ref = [mpmath.log(mpmath.exp(mpmath.mpf(float(x))) + mpmath.exp(mpmath.mpf(float(y))))
               for x, y in zip(a, b)]
        err = _ulps(got, ref, dt)
    worst = int(np.argmax(err))
    assert err.max() <= 4, f"logaddexp({a[worst]!r}, {b[worst]!r}): {err.max():.2f} ulp"


# ---- special values ----------------------------------------------------------

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, 1e-310, -1e-310,
            1e300, -1e300, math.inf, -math.inf, math.nan]


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    return both_nan | same


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name,ref", [("pow", np.power), ("atan2", np.arctan2),
                                      ("hypot", np.hypot)])
def test_c99_special_values(name, ref, dt):
    """Every pair of special operands against NumPy's ufunc on two equal-shape arrays
    (glibc's libm, or SVML where NumPy has it: the two agree on Annex F's cases),
    zeros' signs included."""
    pairs = np.array(list(itertools.product(_SPECIAL, _SPECIAL)))
    with np.errstate(all="ignore"):
        a, b = pairs[:, 0].astype(dt), pairs[:, 1].astype(dt)
        want = ref(a, b)
    got = getattr(lucid, name)(_t(a), _t(b)).numpy()
    # Exact where an operand or the result is a zero, an infinity or a nan (Annex F's
    # cases); elsewhere (3 ** 0.5, ...) both are roundings of the same number.
    special = ~np.isfinite(a) | ~np.isfinite(b) | (a == 0) | (b == 0) | ~np.isfinite(want) | (want == 0)
    bad = special & ~_same_bits(got, want)
    assert not bad.any(), [(x, y, g, w) for x, y, g, w in zip(a[bad], b[bad], got[bad], want[bad])]
    close = np.abs(got[~special] - want[~special]) <= 2 * np.spacing(np.abs(want[~special]))
    assert close.all()


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("c", [0.0, 1.0, 2.0, -1.0, 0.5, 3.0, -0.5, 2.5])
def test_pow_scalar_exponent_special_values(c, dt):
    """x ** c takes shortcuts for some c (a multiply, a divide, a square root); they
    must give pow's C99 results, e.g. (-0) ** 0.5 = +0 and (-inf) ** 0.5 = +inf."""
    a = np.array(_SPECIAL, dt)
    with np.errstate(all="ignore"):
        want = np.power(a, np.full_like(a, c))     # array exponent: libm pow itself
    special = ~np.isfinite(a) | (a == 0) | ~np.isfinite(want) | (want == 0)
    for got in (lucid.pow(_t(a), c).numpy(), (_t(a) ** c).numpy()):
        bad = special & ~_same_bits(got, want)
        assert not bad.any(), list(zip(a[bad], got[bad], want[bad]))
        # glibc's pow is within 1 ulp; 1 / 1e300 and 2.5 * 2.5 are correctly rounded
        g, w = got[~special], want[~special]
        assert (np.abs(g - w) <= np.spacing(np.abs(w))).all()


def test_pow_scalar_shortcuts_are_correctly_rounded():
    rng = np.random.default_rng(3)
    x = rng.uniform(-100, 100, 4000)
    for dt in DTYPES:
        a = x.astype(dt)
        np.testing.assert_array_equal(lucid.pow(_t(a), 2.0).numpy(), a * a)
        np.testing.assert_array_equal(lucid.pow(_t(a), -1.0).numpy(), dt(1) / a)
        np.testing.assert_array_equal(lucid.pow(_t(np.abs(a)), 0.5).numpy(), np.sqrt(np.abs(a)))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_logaddexp_special_values(dt):
    inf, nan = math.inf, math.nan
    cases = [(inf, inf, inf), (-inf, -inf, -inf), (inf, -inf, inf), (-inf, inf, inf),
             (-inf, 0.0, 0.0), (0.0, -inf, 0.0), (nan, 1.0, nan), (1.0, nan, nan),
             (nan, inf, nan), (inf, 5.0, inf), (1e30, 1e30, 1e30), (0.0, 0.0, math.log(2))]
    a, b, want = (np.array(c, dt) for c in zip(*cases))
    got = lucid.logaddexp(_t(a), _t(b)).numpy()
    assert _same_bits(got, want).all(), list(zip(a, b, got, want))


def test_maximum_minimum_values_follow_pytorch():
    torch = pytest.importorskip("torch")
    vals = [0.0, -0.0, 1.0, -1.0, 2.5, math.inf, -math.inf, math.nan]
    pairs = np.array(list(itertools.product(vals, vals)))
    for dt in DTYPES:
        a, b = pairs[:, 0].astype(dt), pairs[:, 1].astype(dt)
        for name in ("maximum", "minimum"):
            got = getattr(lucid, name)(_t(a), _t(b)).numpy()
            want = getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
            # values and nans as torch; the sign of a zero tie is not stable in torch
            # itself (its scalar and vector paths differ), so it is checked below
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
def test_maximum_minimum_ieee754_2019(dt):
    a = _t(np.array([math.nan, 1.0, -0.0, 0.0, -0.0, 0.0], dt))
    b = _t(np.array([1.0, math.nan, 0.0, -0.0, -0.0, 0.0], dt))
    mx, mn = lucid.maximum(a, b).numpy(), lucid.minimum(a, b).numpy()
    assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()
    # -0 < +0 in either order
    assert list(np.signbit(mx[2:])) == [False, False, True, False]
    assert list(np.signbit(mn[2:])) == [True, True, True, False]


# ---- determinism and broadcasting ---------------------------------------------

OPS = ["pow", "atan2", "hypot", "maximum", "minimum", "logaddexp"]


@pytest.mark.parametrize("name", OPS)
def test_result_independent_of_length_threads_and_layout(name):
    rng = np.random.default_rng(11)
    n = 70001
    for dt in DTYPES:
        a = rng.uniform(0.1, 3, n).astype(dt)
        b = rng.uniform(-3, 3, n).astype(dt)
        fn = getattr(lucid, name)
        old = lucid.get_num_threads()
        try:
            lucid.set_num_threads(1)
            full = fn(_t(a), _t(b)).numpy()
            for nt in (2, 3):
                lucid.set_num_threads(nt)
                np.testing.assert_array_equal(fn(_t(a), _t(b)).numpy(), full)
        finally:
            lucid.set_num_threads(old)
        for m in (1, 15, 16, 17, 33, 1000):
            np.testing.assert_array_equal(fn(_t(a[:m]), _t(b[:m])).numpy(), full[:m])
            np.testing.assert_array_equal(fn(_t(a[1:m + 1]), _t(b[1:m + 1])).numpy(), full[1:m + 1])
        # strided operands and a general broadcast go through other code paths
        a2, b2 = a[:70000].reshape(350, 200), b[:70000].reshape(350, 200)
        np.testing.assert_array_equal(fn(_t(a2.T.copy()).T, _t(b2)).numpy(), full[:70000].reshape(350, 200))
        np.testing.assert_array_equal(fn(_t(a2[:, ::2]), _t(b2[:, ::2])).numpy(),
                                      full[:70000].reshape(350, 200)[:, ::2])
        col = fn(_t(a[:350, None]), _t(b[None, :200])).numpy()
        want = fn(_t(np.repeat(a[:350, None], 200, 1)), _t(np.tile(b[:200], (350, 1)))).numpy()
        np.testing.assert_array_equal(col, want)


@pytest.mark.parametrize("name", ["atan2", "hypot", "maximum", "minimum", "logaddexp"])
def test_scalar_operand_same_as_full_array(name):
    rng = np.random.default_rng(12)
    fn = getattr(lucid, name)
    for dt in DTYPES:
        x = rng.uniform(-3, 3, 50000).astype(dt)
        c = dt(0.75)
        full = np.full_like(x, c)
        np.testing.assert_array_equal(fn(_t(x), float(c)).numpy(), fn(_t(x), _t(full)).numpy())
        np.testing.assert_array_equal(fn(float(c), _t(x)).numpy(), fn(_t(full), _t(x)).numpy())
        np.testing.assert_array_equal(fn(_t(x), _t(np.array([c]))).numpy(), fn(_t(x), _t(full)).numpy())


def test_float16_goes_through_float32():
    a = np.array([0.5, 2.0, -3.0, 65000.0], np.float16)
    b = np.array([2.0, 0.5, 2.0, 2.0], np.float16)
    got = lucid.pow(_t(a), _t(b))
    assert got.dtype == lucid.float32       # pow is ForceFP32: half inputs are upcast
    np.testing.assert_array_equal(got.numpy(), np.power(a.astype(np.float32), b.astype(np.float32)))
    got = lucid.hypot(_t(a), _t(b))          # Promote: computed in float32, rounded once
    assert got.dtype == lucid.float16
    with np.errstate(over="ignore"):
        want = np.hypot(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(got.numpy(), want)


# ---- fused backward -------------------------------------------------------------

def _num_grad(f, a, b, h=1e-6):
    ga = (f(a + h, b) - f(a - h, b)) / (2 * h)
    gb = (f(a, b + h) - f(a, b - h)) / (2 * h)
    return ga, gb


@pytest.mark.parametrize("name,ref", [("pow", np.power), ("atan2", np.arctan2),
                                      ("hypot", np.hypot), ("logaddexp", np.logaddexp)])
@pytest.mark.parametrize("shape_b", [(40,), (1,), (7, 40)])
def test_backward_vs_central_differences(name, ref, shape_b):
    rng = np.random.default_rng(5)
    a = rng.uniform(0.5, 2, (7, 40))
    b = rng.uniform(-2, 2, shape_b)
    ta = lucid.tensor(a, requires_grad=True)
    tb = lucid.tensor(b, requires_grad=True)
    getattr(lucid, name)(ta, tb).sum().backward()
    ga, gb = _num_grad(ref, a, np.broadcast_to(b, a.shape).copy())
    np.testing.assert_allclose(ta.grad.numpy(), ga, rtol=1e-6, atol=1e-8)
    gb = gb.reshape((-1,) + shape_b).sum(0) if shape_b != a.shape else gb
    np.testing.assert_allclose(tb.grad.numpy(), gb.reshape(shape_b), rtol=1e-6, atol=1e-7)


def test_pow_scalar_exponent_backward():
    rng = np.random.default_rng(6)
    a = rng.uniform(-3, 3, 1000)
    for c in (0.0, 1.0, 2.0, 3.0, -1.0, 0.5, 2.5):
        x = lucid.tensor(np.abs(a) if c in (0.5, 2.5) else a, requires_grad=True)
        (x ** c).sum().backward()
        xv = x.detach().numpy()
        with np.errstate(all="ignore"):
            want = np.zeros_like(xv) if c == 0 else c * np.power(xv, c - 1)
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-14, atol=0)


def test_neg_kernel_and_backward():
    for dt in DTYPES:
        a = np.array([0.0, -0.0, 1.5, -math.inf, math.nan], dt)
        got = lucid.neg(_t(a)).numpy()
        assert _same_bits(got, -a).all()
    x = lucid.tensor(np.arange(5.0), requires_grad=True)
    (-x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), -np.ones(5))
