"""Row, column and single-value broadcasts of the binary ops in lucid's own kernels:
values against NumPy (add/sub/mul/div are one IEEE operation, so bit for bit) and
torch, gradients (summed back over the broadcast axes) against torch, the same bits
for any thread count, and strided operands (NumPy's route) alike."""
import itertools

import numpy as np
import pytest

import lucid

torch = pytest.importorskip("torch")

SHAPES = [((1000, 100), (100,)), ((1000, 100), (1, 100)), ((1000, 100), (1000, 1)),
          ((100,), (1000, 100)), ((1000, 1), (1000, 100)), ((1000, 100), ()),
          ((10, 20, 30), (30,)), ((10, 20, 30), (20, 30)), ((10, 20, 30), (10, 20, 1)),
          ((10, 20, 30), (10, 1, 1)), ((64, 1), (1, 48)), ((1, 48), (64, 1)),
          ((5, 0, 20), (20,)), ((3, 17), (17,)), ((300, 40), (40,)), ((7, 2100), (2100,)),
          # outer dims around an m x n split (_bcast2d.pxi); rows shorter than 16 for the
          # kernels with a call per row, and more outer dims than a plan takes (NumPy)
          ((10, 1, 100), (1, 100, 1)), ((3, 1, 5, 40), (1, 4, 1, 40)), ((2, 3, 4, 5, 6), (3, 1, 5, 1)),
          ((6, 1, 3), (1, 5, 1)), ((2, 1) * 5, (1, 2) * 5), ((4, 1, 30), (1, 6, 1))]
ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}
FUSED = ["maximum", "minimum", "atan2", "hypot", "logaddexp", "pow"]
DTYPES = [np.float32, np.float64]


def _pair(sa, sb, dt, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.uniform(0.5, 2, sb) * rng.choice([-1.0, 1.0], sb)     # |b| >= 0.5: div's gradient
    return rng.uniform(0.5, 2, sa).astype(dt), np.asarray(b).astype(dt)     # stays moderate


@pytest.mark.parametrize("op", list(ARITH) + FUSED)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_values_and_gradients(op, dt, sa, sb):
    a, b = _pair(sa, sb, dt)
    if op == "pow":
        b = np.abs(b) + dt(0.25)
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    xa, xb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    r, tr = getattr(lucid, op)(ta, tb), getattr(torch, op)(xa, xb)
    assert r.shape == tuple(tr.shape)
    if op in ARITH:
        np.testing.assert_array_equal(r.detach().numpy(), ARITH[op](a, b))
    else:
        tol = dict(rtol=2e-6, atol=1e-7) if dt == np.float32 else dict(rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(r.detach().numpy(), tr.detach().numpy(), **tol)
    g = np.random.default_rng(1).standard_normal(tr.shape).astype(dt)
    r.backward(lucid.tensor(g))
    tr.backward(torch.tensor(g))
    tol = dict(rtol=1e-4, atol=1e-5) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ta.grad.numpy(), xa.grad.numpy(), **tol)
    np.testing.assert_allclose(tb.grad.numpy(), xb.grad.numpy(), **tol)


@pytest.mark.parametrize("op", ["mul", "div", "maximum", "hypot"])
@pytest.mark.parametrize("sa,sb", [((2000, 300), (300,)), ((2000, 300), (2000, 1)),
                                   ((300, 2000), (2000,)), ((40, 50, 60), (50, 60)),
                                   ((40, 1, 600), (1, 50, 600)), ((30, 1, 40), (1, 200, 1))],
                         ids=str)
def test_same_bits_for_any_thread_count(op, sa, sb):
    a, b = _pair(sa, sb, np.float32, seed=3)
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    old = lucid.get_num_threads()
    outs = []
    try:
        for nt in (1, 2, 4):
            lucid.set_num_threads(nt)
            ta.grad = tb.grad = None
            r = getattr(lucid, op)(ta, tb)
            r.sum().backward()
            outs.append((r.detach().numpy().copy(), ta.grad.numpy().copy(), tb.grad.numpy().copy()))
    finally:
        lucid.set_num_threads(old)
    for o in outs[1:]:
        for x, y in zip(outs[0], o):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("op", ["add", "mul", "atan2"])
def test_strided_and_transposed_operands(op):
    a, b = _pair((200, 300), (300, 200), np.float64)
    ref = getattr(torch, op)(torch.tensor(a), torch.tensor(b).T).numpy()
    got = getattr(lucid, op)(lucid.tensor(a), lucid.tensor(b).T).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-14)
    row = lucid.tensor(b)[:, ::2]                  # (300, 100): a strided row source
    got = getattr(lucid, op)(lucid.tensor(a)[:, :100], row[0])
    ref = getattr(torch, op)(torch.tensor(a)[:, :100], torch.tensor(b)[0, ::2]).numpy()
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-14)


def test_alpha_and_integer_operands_keep_their_route():
    a, b = _pair((100, 50), (50,), np.float32)
    np.testing.assert_array_equal(lucid.add(lucid.tensor(a), lucid.tensor(b), alpha=2).numpy(),
                                  torch.add(torch.tensor(a), torch.tensor(b), alpha=2).numpy())
    ia = np.arange(5000, dtype=np.int64).reshape(100, 50)
    np.testing.assert_array_equal((lucid.tensor(ia) * lucid.tensor(ia[0])).numpy(), ia * ia[0])
    d = (lucid.tensor(ia) / lucid.tensor(ia[:, :1] + 1)).numpy()
    np.testing.assert_array_equal(d, (torch.tensor(ia) / torch.tensor(ia[:, :1] + 1)).numpy())


def test_ieee_specials_in_broadcast_rows():
    a = np.array([[0.0, -0.0, np.inf, -np.inf, np.nan, 1.0] * 4] * 30, np.float32)
    b = np.array([0.0, -0.0, np.inf, 1.0, -1.0, np.nan] * 4, np.float32)
    for op, ref in ARITH.items():
        with np.errstate(all="ignore"):
            want = ref(a, b)
        got = getattr(lucid, op)(lucid.tensor(a), lucid.tensor(b)).numpy()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("sa,sb", list(itertools.product([(4, 1, 30), (1, 6, 30)],
                                                         [(6, 1), (30,)])), ids=str)
def test_3d_broadcasts_of_rows_and_columns(sa, sb):
    a, b = _pair(sa, sb, np.float64)
    np.testing.assert_array_equal((lucid.tensor(a) - lucid.tensor(b)).numpy(), a - b)


@pytest.mark.parametrize("op", list(ARITH))
@pytest.mark.parametrize("sa,sb", [((300, 40), (40,)), ((300, 40), (300, 1)), ((300, 40), ()),
                                   ((1, 40), (300, 1)), ((300, 40), (300, 40)),
                                   ((4, 1, 30), (1, 6, 1))], ids=str)
def test_backward_mixed_dtypes_numbers_and_alpha(op, sa, sb):
    """The one-pass backward of add/sub/mul/div (gradient and broadcast sum together) and
    the routes it leaves to the array formula: mixed dtypes, Python numbers, alpha."""
    a, b = _pair(sa, sb, np.float32)
    b64 = b.astype(np.float64)
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b64, requires_grad=True)
    xa, xb = torch.tensor(a, requires_grad=True), torch.tensor(b64, requires_grad=True)
    getattr(lucid, op)(ta, tb).sum().backward()
    getattr(torch, op)(xa, xb).sum().backward()
    assert ta.grad.dtype is lucid.float32 and tb.grad.dtype is lucid.float64
    np.testing.assert_allclose(ta.grad.numpy(), xa.grad.numpy(), rtol=1e-5)
    # a 0-d b does not promote a's dtype: then the gradient is summed in float32
    np.testing.assert_allclose(tb.grad.numpy(), xb.grad.numpy(), rtol=1e-10 if sb else 1e-5)
    for s in (0.3, 2):
        ta.grad = None
        xa.grad = None
        getattr(lucid, op)(ta, s).sum().backward()
        getattr(torch, op)(xa, s).sum().backward()
        np.testing.assert_allclose(ta.grad.numpy(), xa.grad.numpy(), rtol=1e-6)
    if op in ("add", "sub"):
        ta.grad = tb.grad = None
        xa.grad = xb.grad = None
        getattr(lucid, op)(ta, tb, alpha=3).sum().backward()
        getattr(torch, op)(xa, xb, alpha=3).sum().backward()
        np.testing.assert_allclose(tb.grad.numpy(), xb.grad.numpy(), rtol=1e-10 if sb else 1e-5)


def test_backward_sums_in_float64_match_an_exact_reference():
    """grad_b of mul with a row b is sum over rows of g * a: compared with math.fsum."""
    import math
    rng = np.random.default_rng(5)
    a = rng.standard_normal((500, 70))
    b = rng.standard_normal(70)
    g = rng.standard_normal((500, 70))
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    (ta * tb).backward(lucid.tensor(g))
    want = [math.fsum(g[:, j] * a[:, j]) for j in range(70)]
    np.testing.assert_allclose(tb.grad.numpy(), want, rtol=1e-12, atol=1e-12)
    tc = lucid.tensor(b[:50].reshape(50, 1) + 3, requires_grad=True)
    tx = lucid.tensor(a[:50], requires_grad=True)
    (tx / tc).backward(lucid.tensor(g[:50]))
    want = [math.fsum(-g[i] * a[i] / (tc.detach().numpy()[i, 0] ** 2)) for i in range(50)]
    np.testing.assert_allclose(tc.grad.numpy()[:, 0], want, rtol=1e-12, atol=1e-12)
