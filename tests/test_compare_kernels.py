"""Comparisons, where, masked_fill and clamp in lucid's own kernels (src/lucid_compare.c):
values against NumPy and torch over the same shapes, a row, a column, a scalar tensor, a
Python number, the outer broadcast, broadcasts over more dims (outer dims around those),
and the layouts that go to NumPy (strided operands, more than 8 outer dims); IEEE specials (nan, +-0, +-inf); the same bits for any thread count;
every dtype; gradients of where / clamp against torch."""
import numpy as np
import pytest

import lucid

torch = pytest.importorskip("torch")

SHAPES = [((1000, 100), (1000, 100)), ((1000, 100), (100,)), ((1000, 100), (1, 100)),
          ((1000, 100), (1000, 1)), ((100,), (1000, 100)), ((1000, 1), (1000, 100)),
          ((1000, 100), ()), ((), (1000, 100)), ((10, 20, 30), (30,)),
          ((10, 20, 30), (20, 30)), ((10, 20, 30), (10, 20, 1)), ((10, 20, 30), (10, 1, 1)),
          ((64, 1), (1, 48)), ((1, 48), (64, 1)), ((5, 0, 20), (20,)), ((3, 17), (17,)),
          ((4, 1, 30), (1, 6, 1)), ((7,), (7,)), ((), ())] + [
          # outer dims around an m x n split (_bcast2d.pxi), and more outer dims than a
          # plan takes (NumPy's route)
          ((10, 1, 100), (1, 100, 1)), ((3, 1, 5, 40), (1, 4, 1, 40)), ((2, 3, 4, 5, 6), (3, 1, 5, 1)),
          ((6, 1, 3), (1, 5, 1)), ((2, 1) * 5, (1, 2) * 5)]
CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
       "gt": np.greater, "ge": np.greater_equal}
FLOATS = [np.float32, np.float64]
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5]


def _data(shape, dt, seed):
    """Values drawn from a small set with the IEEE specials, so equal elements, nans,
    signed zeros and infinities meet across the broadcast."""
    rng = np.random.default_rng(seed)
    return np.asarray(rng.choice(np.array(SPECIALS), size=shape)).astype(dt)


def _lucid_and_torch(x):
    return lucid.tensor(x), torch.tensor(np.array(x))


@pytest.mark.parametrize("op", list(CMP))
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_comparisons(op, dt, sa, sb):
    a, b = _data(sa, dt, 1), _data(sb, dt, 2)
    (la, ta), (lb, tb) = _lucid_and_torch(a), _lucid_and_torch(b)
    got = getattr(lucid, op)(la, lb)
    assert got.dtype is lucid.bool_
    want = CMP[op](a, b)
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(got.numpy(), getattr(torch, op)(ta, tb).numpy())


@pytest.mark.parametrize("op", list(CMP))
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("s", [0.5, -0.0, float("nan"), float("inf"), 3, True])
def test_comparisons_with_numbers(op, dt, s):
    a = _data((300, 40), dt, 3)
    want = getattr(torch, op)(torch.tensor(a), s).numpy()
    np.testing.assert_array_equal(getattr(lucid, op)(lucid.tensor(a), s).numpy(), want)
    np.testing.assert_array_equal(getattr(lucid, op)(s, lucid.tensor(a)).numpy(),
                                  getattr(torch, op)(torch.full_like(torch.tensor(a), s),
                                                     torch.tensor(a)).numpy())


def test_comparison_operators_and_mixed_dtypes():
    a, b = _data((200, 30), np.float32, 4), _data((30,), np.float64, 5)
    la, lb = lucid.tensor(a), lucid.tensor(b)
    ta, tb = torch.tensor(a), torch.tensor(b)
    for lr, tr in [(la < lb, ta < tb), (la >= lb, ta >= tb), (la == lb, ta == tb),
                   (la != 0.5, ta != 0.5), (lb > la, tb > ta)]:
        np.testing.assert_array_equal(lr.numpy(), tr.numpy())


@pytest.mark.parametrize("dt", [np.float16, "bfloat16", np.int32, np.int64, np.uint8, np.bool_],
                         ids=str)
def test_comparisons_other_dtypes(dt):
    rng = np.random.default_rng(6)
    a, b = rng.integers(0, 3, (50, 20)).astype(np.float64), rng.integers(0, 3, (20,)).astype(
        np.float64)
    ta, tb = torch.tensor(a).to(_torch_dtype(dt)), torch.tensor(b).to(_torch_dtype(dt))
    la, lb = lucid.tensor(a).to(_lucid_dtype(dt)), lucid.tensor(b).to(_lucid_dtype(dt))
    for op in CMP:
        np.testing.assert_array_equal(getattr(lucid, op)(la, lb).numpy(),
                                      getattr(torch, op)(ta, tb).numpy())


def test_strided_operands_take_numpy_route():
    a, b = _data((300, 200), np.float64, 7), _data((200, 300), np.float64, 8)
    la, lb = lucid.tensor(a), lucid.tensor(b)
    np.testing.assert_array_equal(lucid.lt(la, lb.T).numpy(), a < b.T)
    np.testing.assert_array_equal(lucid.eq(la[:, ::2], lb[0, :100]).numpy(), a[:, ::2] == b[0, :100])


def test_bad_shapes_raise():
    with pytest.raises(lucid.ShapeError):
        lucid.lt(lucid.ones((3, 4)), lucid.ones((5,)))
    with pytest.raises(lucid.ShapeError):
        lucid.where(lucid.ones((3, 4)) > 0, lucid.ones((3, 4)), lucid.ones((5,)))
    with pytest.raises(lucid.ShapeError):
        lucid.clamp(lucid.ones((3, 4)), lucid.zeros((2, 3, 4)))
    with pytest.raises(lucid.ShapeError):     # a bound wider than the input in a middle dim
        lucid.clamp(lucid.ones((4, 1, 6)), lucid.zeros((1, 5, 6)), lucid.ones((1, 5, 6)))


# -- the same bits for any thread count (large enough to be split) -------------------------

@pytest.mark.parametrize("sa,sb", [((2000, 300), (300,)), ((2000, 300), (2000, 1)),
                                   ((1, 300000), (1, 300000)), ((600000,), ()),
                                   ((40, 50, 600), (1, 50, 1))], ids=str)
def test_same_bits_for_any_thread_count(sa, sb):
    a = np.random.default_rng(9).standard_normal(sa).astype(np.float32)
    b = np.asarray(np.random.default_rng(10).standard_normal(sb)).astype(np.float32)
    c = np.random.default_rng(11).uniform(size=sa) < 0.5
    la, lb, lc = lucid.tensor(a), lucid.tensor(b), lucid.tensor(c)
    old = lucid.get_num_threads()
    outs = []
    try:
        for nt in (1, 2, 4):
            lucid.set_num_threads(nt)
            outs.append([lucid.lt(la, lb).numpy().copy(), lucid.where(lc, la, lb).numpy().copy(),
                         lucid.clamp(la, lb, lb + 0.5).numpy().copy()])
    finally:
        lucid.set_num_threads(old)
    want = [a < b, np.where(c, a, b), np.minimum(np.maximum(a, b), b + np.float32(0.5))]
    for o in outs:
        for x, y in zip(o, want):
            np.testing.assert_array_equal(x, y)


# -- where and masked_fill ------------------------------------------------------------------

WHERE_SHAPES = [((1000, 100), (1000, 100), (1000, 100)), ((1000, 100), (1000, 100), (100,)),
                ((1000, 100), (1000, 1), (1000, 100)), ((100,), (1000, 100), ()),
                ((1000, 1), (100,), (1000, 100)), ((1000, 100), (), ()),
                ((64, 1), (1, 48), (64, 48)), ((4, 1, 30), (1, 6, 1), (30,)),
                ((0, 5), (5,), ()), ((), (), ())]
WHERE_DTYPES = [np.float32, np.float64, np.float16, "bfloat16", np.int8, np.int16, np.int32,
                np.int64, np.uint8, np.bool_]


def _lucid_dtype(dt):
    return lucid.bfloat16 if dt == "bfloat16" else getattr(lucid, np.dtype(dt).name
                                                           if dt is not np.bool_ else "bool_")


def _torch_dtype(dt):
    return torch.bfloat16 if dt == "bfloat16" else torch.from_numpy(np.zeros(1, dt)).dtype


@pytest.mark.parametrize("dt", WHERE_DTYPES, ids=str)
@pytest.mark.parametrize("sc,sa,sb", WHERE_SHAPES, ids=str)
def test_where(dt, sc, sa, sb):
    rng = np.random.default_rng(12)
    c = np.asarray(rng.uniform(size=sc) < 0.5)
    a = _data(sa, np.float64, 13)
    b = _data(sb, np.float64, 14)
    a, b = np.nan_to_num(a, nan=2.0, posinf=3.0, neginf=-3.0), np.nan_to_num(b, nan=4.0)
    ta = torch.tensor(a).to(_torch_dtype(dt))
    tb = torch.tensor(b).to(_torch_dtype(dt))
    la = lucid.tensor(a).to(_lucid_dtype(dt))
    lb = lucid.tensor(b).to(_lucid_dtype(dt))
    got = lucid.where(lucid.tensor(c), la, lb)
    want = torch.where(torch.tensor(c), ta, tb)
    assert got.dtype is _lucid_dtype(dt)
    np.testing.assert_array_equal(got.float().numpy() if dt == "bfloat16" else got.numpy(),
                                  want.float().numpy() if dt == "bfloat16" else want.numpy())


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.__name__)
def test_where_copies_bits(dt):
    """nan payloads and -0 are picked exactly."""
    ui = np.uint32 if dt == np.float32 else np.uint64
    bits = np.array([0x7FC00001, 0xFFC12345, 0x80000000, 0x7F800000], np.uint32) \
        if dt == np.float32 else np.array([0x7FF8000000000001, 0xFFF8123456789ABC,
                                           0x8000000000000000, 0x7FF0000000000000], np.uint64)
    a = np.tile(bits.view(dt), (300, 25))
    b = np.full((100,), -0.0, dt)
    c = np.random.default_rng(15).uniform(size=a.shape) < 0.5
    got = lucid.where(lucid.tensor(c), lucid.tensor(a), lucid.tensor(b)).numpy()
    np.testing.assert_array_equal(got.view(ui), np.where(c, a, b).view(ui))


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.__name__)
def test_where_numbers_and_gradients(dt):
    rng = np.random.default_rng(16)
    c = rng.uniform(size=(200, 30)) < 0.5
    a = rng.standard_normal((200, 30)).astype(dt)
    b = rng.standard_normal((30,)).astype(dt)
    lc, tc = lucid.tensor(c), torch.tensor(c)
    for s in (0.25, -0.0, float("nan")):
        np.testing.assert_array_equal(lucid.where(lc, lucid.tensor(a), s).numpy(),
                                      torch.where(tc, torch.tensor(a), s).numpy())
        np.testing.assert_array_equal(lucid.where(lc, s, lucid.tensor(b)).numpy(),
                                      torch.where(tc, s, torch.tensor(b)).numpy())
    la, lb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    g = rng.standard_normal((200, 30)).astype(dt)
    lucid.where(lc, la, lb).backward(lucid.tensor(g))
    torch.where(tc, ta, tb).backward(torch.tensor(g))
    np.testing.assert_allclose(la.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(lb.grad.numpy(), tb.grad.numpy(), rtol=1e-5)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int32], ids=str)
@pytest.mark.parametrize("ms", [(300, 40), (40,), (300, 1), ()], ids=str)
def test_masked_fill(dt, ms):
    rng = np.random.default_rng(17)
    x = rng.standard_normal((300, 40)).astype(dt) if dt != np.int32 else \
        rng.integers(-9, 9, (300, 40)).astype(dt)
    m = np.asarray(rng.uniform(size=ms) < 0.5)
    for v in (0.5, -3, float("-inf")) if dt != np.int32 else (7, -3):
        got = lucid.masked_fill(lucid.tensor(x), lucid.tensor(m), v)
        want = torch.tensor(x).masked_fill(torch.tensor(m), v)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("ms", [(1, 40), (1, 1, 40), (40, 300), (300, 2), (2, 300, 40), (1,), (),
                                (300, 40)], ids=str)
def test_masked_fill_mask_shapes(ms):
    """A mask must broadcast onto the input's shape without changing it (lucid's rule:
    NumPy's broadcast of the two shapes is the input's), else a ShapeError."""
    x = np.zeros((300, 40), np.float32)
    m = np.ones(ms, bool)
    try:
        ok = np.broadcast_shapes(ms, x.shape) == x.shape
    except ValueError:
        ok = False
    if ok:
        got = lucid.masked_fill(lucid.tensor(x), lucid.tensor(m), 2.0)
        np.testing.assert_array_equal(got.numpy(), np.full(x.shape, 2.0, np.float32))
    else:
        with pytest.raises(lucid.ShapeError, match="does not broadcast"):
            lucid.masked_fill(lucid.tensor(x), lucid.tensor(m), 2.0)


# -- clamp -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (None, 0.25), (-0.25, None), (1.0, -1.0),
                                    (0.0, 0.0), (-np.inf, np.inf)], ids=str)
def test_clamp_numbers(dt, bounds):
    x = _data((500, 40), dt, 18) * dt(1.5) + _data((40,), dt, 19)
    lo, hi = bounds
    got = lucid.clamp(lucid.tensor(x), lo, hi).numpy()
    want = torch.clamp(torch.tensor(x), lo, hi).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))      # a nan input stays nan


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("sl,sh", [((500, 40), (500, 40)), ((40,), (500, 1)), ((), (40,)),
                                   ((500, 1), None), (None, ()), ((1, 40), (1, 1))], ids=str)
def test_clamp_tensor_bounds_and_gradients(dt, sl, sh):
    rng = np.random.default_rng(20)
    x = rng.standard_normal((500, 40)).astype(dt)
    lo = None if sl is None else np.asarray(rng.standard_normal(sl) - 0.5).astype(dt)
    hi = None if sh is None else np.asarray(rng.standard_normal(sh) + 0.5).astype(dt)
    lx = lucid.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    llo = None if lo is None else lucid.tensor(lo, requires_grad=True)
    lhi = None if hi is None else lucid.tensor(hi, requires_grad=True)
    tlo = None if lo is None else torch.tensor(lo, requires_grad=True)
    thi = None if hi is None else torch.tensor(hi, requires_grad=True)
    r, tr = lucid.clamp(lx, llo, lhi), torch.clamp(tx, tlo, thi)
    np.testing.assert_array_equal(r.detach().numpy(), tr.detach().numpy())
    g = rng.standard_normal((500, 40)).astype(dt)
    r.backward(lucid.tensor(g))
    tr.backward(torch.tensor(g))
    # a bound's gradient sums up to 500 terms, in another order than torch's: both are
    # within a few eps * sum|g| of the exact sum
    atol = 4 * np.finfo(dt).eps * np.abs(g).sum(axis=0).max()
    for lt, tt in [(lx, tx), (llo, tlo), (lhi, thi)]:
        if lt is not None:
            np.testing.assert_allclose(lt.grad.numpy(), tt.grad.numpy(), rtol=1e-5, atol=atol)


def test_clamp_nan_bounds_and_specials():
    """A nan bound gives nan (NumPy's maximum / minimum); lo > hi gives hi."""
    x = np.array([[-np.inf, -1.0, -0.0, 0.0, 2.0, np.inf, np.nan]] * 20, np.float32)
    lo = np.array([np.nan, 0.0, 0.0, -1.0, 3.0, 0.0, 0.0], np.float32)
    hi = np.array([1.0, np.nan, 1.0, -2.0, 1.0, 1.0, 1.0], np.float32)
    got = lucid.clamp(lucid.tensor(x), lucid.tensor(lo), lucid.tensor(hi)).numpy()
    want = np.where(np.isnan(x), x, np.minimum(np.maximum(x, lo), hi))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    got = lucid.clamp(lucid.tensor(x), float("nan"), None).numpy()
    assert np.isnan(got).all()


@pytest.mark.parametrize("dt", [np.float16, "bfloat16", np.int32, np.uint8])
def test_clamp_other_dtypes(dt):
    rng = np.random.default_rng(21)
    x = rng.integers(0, 20, (300, 40)).astype(np.float64) / 2
    tx = torch.tensor(x).to(_torch_dtype(dt))
    lx = lucid.tensor(x).to(_lucid_dtype(dt))
    got = lucid.clamp(lx, 2, 7.0 if dt in (np.float16, "bfloat16") else 7)
    want = torch.clamp(tx, 2, 7.0 if dt in (np.float16, "bfloat16") else 7)
    assert got.dtype is _lucid_dtype(dt)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("bounds", [(0, 1), (-1, 0.5), (1e300, None), (None, -1e300),
                                    (-1e300, 1e300), (float("nan"), 1.0), (2**60, None),
                                    (0.1, 0.3)], ids=str)
def test_clamp_number_bounds_round_to_the_dtype(dt, bounds):
    """Number bounds take x's dtype as a NumPy cast does (1e300 is inf in float32, 0.1 the
    nearest float32), for a contiguous input, a strided one and a 0-d one."""
    x = _data((300, 40), dt, 22) * dt(3)
    lo, hi = bounds
    with np.errstate(over="ignore"):
        clo = None if lo is None else np.asarray(lo, dt)
        chi = None if hi is None else np.asarray(hi, dt)
    want = x
    if clo is not None:
        want = np.where(np.isnan(want), want, np.maximum(want, clo))
    if chi is not None:
        want = np.where(np.isnan(want), want, np.minimum(want, chi))
    for lx, w in [(lucid.tensor(x), want), (lucid.tensor(x)[:, ::3], want[:, ::3]),
                  (lucid.tensor(x)[7, 2], want[7, 2])]:
        got = lucid.clamp(lx, lo, hi)
        assert got.dtype is lx.dtype and got.shape == w.shape
        np.testing.assert_array_equal(got.numpy(), w)
        np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(w))


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.__name__)
def test_clamp_number_bounds_gradient_and_errors(dt):
    rng = np.random.default_rng(23)
    x = rng.standard_normal((200, 50)).astype(dt)
    x[0, :4] = [-0.5, 0.5, 0.0, np.nan]              # on the bounds, and a nan
    lx, tx = lucid.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    g = rng.standard_normal(x.shape).astype(dt)
    lucid.clamp(lx, -0.5, 0.5).backward(lucid.tensor(g))
    torch.clamp(tx, -0.5, 0.5).backward(torch.tensor(g))
    np.testing.assert_array_equal(lx.grad.numpy(), tx.grad.numpy())
    with pytest.raises(OverflowError, match="too large"):
        lucid.clamp(lucid.tensor(x), 10**400, None)
    with pytest.raises(ValueError, match="at least one"):
        lucid.clamp(lucid.tensor(x))
    old = lucid.get_num_threads()
    outs = []
    try:
        big = lucid.tensor(rng.standard_normal((1000, 300)).astype(dt))
        for nt in (1, 2, 4):
            lucid.set_num_threads(nt)
            outs.append(lucid.clamp(big, -0.25, 1).numpy().copy())
    finally:
        lucid.set_num_threads(old)
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    np.testing.assert_array_equal(outs[0], np.clip(big.numpy(), dt(-0.25), dt(1)))
