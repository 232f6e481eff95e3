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


# -- the summing backward over any broadcast (outer dims kept and summed) -----------------
# add / sub / mul / div / maximum / minimum sum an operand's gradient over its broadcast
# dims in one pass, whatever the broadcast: the dims are merged into groups and the
# groups before the last two are outer dims that the operand keeps or sums over.
ND_SHAPES = [((10, 1, 100), (1, 100, 1)), ((10, 100, 100), (10, 1, 100)),
             ((1, 100, 100), (10, 100, 1)), ((6, 1, 8, 1, 20), (1, 5, 1, 7, 1)),
             ((3, 1, 5, 40), (1, 4, 1, 40)), ((2, 3, 4, 5, 6), (3, 1, 5, 1)),
             ((4, 1, 30), (1, 6, 1)), ((1, 6, 1), (4, 1, 30)), ((2, 1) * 5, (1, 2) * 5),
             ((7, 1, 1, 9), (1, 3, 5, 1)), ((5, 1, 3), ()), ((1, 1, 33), (4, 5, 1))]
SUMMED = list(ARITH) + ["maximum", "minimum"]


def _torch64_grads(op, a, b, g):
    xa = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    xb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    getattr(torch, op)(xa, xb).backward(torch.tensor(g, dtype=torch.float64))
    return xa.grad.numpy(), xb.grad.numpy()


def _terms(op, a, b, g):
    """Each output element's gradient term for a and for b, in float64 (NumPy)."""
    a, b, g = (np.broadcast_to(np.asarray(v, np.float64), g.shape) for v in (a, b, g))
    sel = {"maximum": (a < b, a > b), "minimum": (a > b, a < b)}
    if op in sel:
        za, zb = sel[op]
        half = np.where(a == b, g * 0.5, g)
        return np.where(za, 0.0, half), np.where(zb, 0.0, half)
    return {"add": (g, g), "sub": (g, -g), "mul": (g * b, g * a),
            "div": (g / b, -g * a / (b * b))}[op]


def _sum_to(x, shape):
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead)))
    return x.sum(axis=tuple(i for i, s in enumerate(shape) if s == 1), keepdims=True)


@pytest.mark.parametrize("op", SUMMED)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("sa,sb", ND_SHAPES, ids=str)
def test_nd_broadcast_gradients_against_torch_float64(op, dt, sa, sb):
    a, b = _pair(sa, sb, dt, seed=7)
    if op in ("maximum", "minimum"):                   # ties: the gradient is split
        a.reshape(-1)[::5] = 1.0
        b.reshape(-1)[::3] = 1.0
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    r = getattr(lucid, op)(ta, tb)
    g = np.random.default_rng(8).standard_normal(r.shape).astype(dt)
    r.backward(lucid.tensor(g))
    wa, wb = _torch64_grads(op, a, b, g)
    assert ta.grad.shape == a.shape and tb.grad.shape == b.shape
    assert ta.grad.dtype is r.dtype and tb.grad.dtype is r.dtype
    # a summed gradient is within (its term count) * eps * (the sum of its terms' sizes)
    # of the exact one (float32 adds rows in float32, as the 2-D backward)
    eps = np.finfo(dt).eps
    ea, eb = _terms(op, a, b, g)
    for got, want, e, shape in ((ta.grad.numpy(), wa, ea, sa), (tb.grad.numpy(), wb, eb, sb)):
        n = e.size // max(1, int(np.prod(shape)))
        bound = (n + 1) * eps * _sum_to(np.abs(e), shape).reshape(shape)
        assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)


@pytest.mark.parametrize("op", SUMMED)
def test_nd_broadcast_full_operand_gradient_is_elementwise(op):
    """The operand with the output's shape gets the element-wise formula, bit for bit
    NumPy's (one IEEE operation or a select per element)."""
    a, b = _pair((10, 100, 100), (10, 1, 100), np.float64, seed=9)
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    g = np.random.default_rng(10).standard_normal(a.shape)
    getattr(lucid, op)(ta, tb).backward(lucid.tensor(g))
    want = {"add": g, "sub": g, "mul": g * b, "div": g / b,
            "maximum": np.where(a < b, 0.0, np.where(a == b, g * 0.5, g)),
            "minimum": np.where(a > b, 0.0, np.where(a == b, g * 0.5, g))}[op]
    np.testing.assert_array_equal(ta.grad.numpy(), want)


def test_nd_broadcast_sums_match_an_exact_reference():
    """grad of b in (10, 1, 100) * (1, 100, 1): sums over an outer dim and the row, in
    float64, against math.fsum; and a's, summed over the middle dim."""
    import math
    a, b = _pair((10, 1, 100), (1, 100, 1), np.float64, seed=11)
    g = np.random.default_rng(12).standard_normal((10, 100, 100))
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    (ta * tb).backward(lucid.tensor(g))
    prod_a = g * a                                     # (10, 100, 100)
    want_b = [math.fsum(prod_a[:, j, :].ravel()) for j in range(100)]
    np.testing.assert_allclose(tb.grad.numpy().ravel(), want_b, rtol=1e-12, atol=1e-12)
    prod_b = g * b
    want_a = [[math.fsum(prod_b[i, :, k]) for k in range(100)] for i in range(10)]
    np.testing.assert_allclose(ta.grad.numpy()[:, 0, :], want_a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", SUMMED)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("sa,sb", [((40, 1, 600), (1, 50, 600)), ((30, 1, 40), (1, 200, 1)),
                                   ((64, 100, 100), (64, 1, 100)), ((1, 300, 200), (40, 300, 1)),
                                   ((6, 1, 40, 1, 64), (1, 10, 1, 8, 1)),
                                   ((2000, 300), ()), ((300, 1), (1, 2000))], ids=str)
def test_nd_broadcast_same_bits_for_any_thread_count(op, dt, sa, sb):
    a, b = _pair(sa, sb, dt, seed=13)
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    g = lucid.tensor(np.random.default_rng(14).standard_normal(np.broadcast_shapes(sa, sb))
                     .astype(dt))
    old = lucid.get_num_threads()
    outs = []
    try:
        for nt in (1, 2, 4):
            lucid.set_num_threads(nt)
            ta.grad = tb.grad = None
            getattr(lucid, op)(ta, tb).backward(g)
            outs.append((ta.grad.numpy().copy(), tb.grad.numpy().copy()))
    finally:
        lucid.set_num_threads(old)
    for o in outs[1:]:
        for x, y in zip(outs[0], o):
            np.testing.assert_array_equal(x, y)


def test_nd_broadcast_backward_other_routes():
    """Mixed dtypes, a strided saved operand, float16 and a Python number keep their
    routes and their gradients (against torch)."""
    a, b = _pair((6, 1, 20), (1, 5, 1), np.float64, seed=15)
    for la, lb, xa, xb in [
            (lucid.tensor(a.astype(np.float32)), lucid.tensor(b), torch.tensor(a.astype(np.float32)),
             torch.tensor(b)),
            (lucid.tensor(a.transpose(2, 1, 0).copy()).permute(2, 1, 0), lucid.tensor(b),
             torch.tensor(a), torch.tensor(b)),
            (lucid.tensor(a).half(), lucid.tensor(b).half(), torch.tensor(a).half(),
             torch.tensor(b).half())]:
        for op in SUMMED:
            la_, lb_ = la.detach().requires_grad_(True), lb.detach().requires_grad_(True)
            xa_, xb_ = xa.detach().requires_grad_(True), xb.detach().requires_grad_(True)
            getattr(lucid, op)(la_, lb_).sum().backward()
            getattr(torch, op)(xa_, xb_).sum().backward()
            tol = 1e-2 if la.dtype is lucid.float16 else 1e-5
            np.testing.assert_allclose(la_.grad.float().numpy(), xa_.grad.float().numpy(), rtol=tol)
            np.testing.assert_allclose(lb_.grad.float().numpy(), xb_.grad.float().numpy(), rtol=tol)
    la = lucid.tensor(a, requires_grad=True)
    (la * 2.5 - 1.0).sum().backward()
    np.testing.assert_array_equal(la.grad.numpy(), np.full(a.shape, 2.5))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("sa,sb", [((30, 24), (24,)), ((30, 24), (30, 1)), ((30, 24), ()),
                                   ((6, 1, 24), (1, 5, 1)), ((30, 24), (30, 24))], ids=str)
def test_maximum_minimum_ieee_specials_in_every_layout(dt, sa, sb):
    """IEEE 754-2019 maximum / minimum (nan wins, -0 < +0) in each loop of the 2-D kernel,
    against a NumPy reference that spells the rule out."""
    vals = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.5], dt)
    rng = np.random.default_rng(16)
    a, b = rng.choice(vals, sa).astype(dt), np.asarray(rng.choice(vals, sb)).astype(dt)
    A, B = np.broadcast_arrays(a, b)
    nan = np.isnan(A) | np.isnan(B)
    with np.errstate(invalid="ignore"):
        want_max = np.where(nan, np.nan, np.where(A == B, np.where(np.signbit(A), B, A),
                                                  np.maximum(A, B))).astype(dt)
        want_min = np.where(nan, np.nan, np.where(A == B, np.where(np.signbit(A), A, B),
                                                  np.minimum(A, B))).astype(dt)
    for op, want in (("maximum", want_max), ("minimum", want_min)):
        got = getattr(lucid, op)(lucid.tensor(a), lucid.tensor(b)).numpy()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
