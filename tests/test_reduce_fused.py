"""lucid's reduction kernels beyond float sums: the fused backward of softmax,
log_softmax and logsumexp, the two-pass (log_)softmax and one-pass logsumexp over long
rows, mean's kernel, and the integer / bool kernels (sum, prod, cumsum, cumprod, max,
min, amax, amin, argmax, argmin, all, any).

References are float64 NumPy and torch (skipped if torch is missing); every kernel
result must be bitwise the same on 1, 2 and 4 threads.
"""
import numpy as np
import pytest

import lucid
from lucid_testutils import bitwise_across_threads

try:
    import torch
except ImportError:          # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _data(shape, dtype, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)


# -- the softmax family: forward over long rows, fused backward ---------------------------

def _np_lse(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    return np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m


FAMILY = {
    "softmax": (lambda t, d: lucid.softmax(t, d),
                lambda a, d: np.exp(a - _np_lse(a, d))),
    "log_softmax": (lambda t, d: lucid.log_softmax(t, d), lambda a, d: a - _np_lse(a, d)),
    "logsumexp": (lambda t, d: lucid.logsumexp(t, d), lambda a, d: _np_lse(a, d).squeeze(d)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", list(FAMILY))
@pytest.mark.parametrize("n", [255, 256, 257, 1000, 5000, 70001])
@pytest.mark.parametrize("order", ["random", "ascending", "descending"])
def test_long_rows_forward(op, n, order, dtype, threads):
    """Rows of several blocks, with the max growing block after block (ascending: the
    running sum is rescaled at every block) or found in the first block."""
    a = _data((3, n), np.float64, seed=n)
    if order == "ascending":
        a = np.sort(a, axis=1) * 10
    elif order == "descending":
        a = -np.sort(a, axis=1) * 10
    a = a.astype(dtype)
    call, ref = FAMILY[op]
    (got,) = bitwise_across_threads(lambda: [call(lucid.tensor(a), 1).numpy()])
    want = ref(a.astype(np.float64), 1)
    tol = dict(rtol=3e-6, atol=1e-30) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-300)
    if op == "log_softmax":
        tol = dict(rtol=1e-6, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-11)
    np.testing.assert_allclose(got.astype(np.float64), want, **tol)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", list(FAMILY))
def test_long_rows_with_special_values_match_torch(op, dtype):
    """A long row holding NaN, +inf, a block of only -inf among finite blocks, or only
    -inf gives what torch gives."""
    a = _data((6, 1300), dtype, seed=4)
    a[0, 700] = np.nan
    a[1, 1000] = np.inf
    a[2, 256:512] = -np.inf
    a[3, :] = -np.inf
    a[4, 0:256] = -np.inf
    a[5, 1299] = np.inf
    call = FAMILY[op][0]
    tf = {"softmax": torch.softmax, "log_softmax": torch.log_softmax,
          "logsumexp": torch.logsumexp}[op]
    np.testing.assert_allclose(call(lucid.tensor(a), 1).numpy(),
                               tf(torch.from_numpy(a.copy()), 1).numpy(),
                               rtol=1e-5, atol=1e-6, equal_nan=True)


def _wide_rows(n, seed):
    """float32 rows whose values below the row's max span (-110, 0]: exp of the shifted
    values runs through normal, subnormal and zero results (and some -inf entries)."""
    rng = np.random.default_rng(seed)
    a = np.empty((8, n), np.float32)
    a[0] = rng.uniform(-3, 3, n)                    # every shifted value in the fast range
    a[1] = rng.uniform(-110, 0, n)                  # subnormal and zero exps
    a[2] = rng.uniform(-95, -80, n)                 # around the smallest normal
    a[3] = rng.uniform(-3, 3, n)
    a[3, 1::7] = -np.inf
    a[4] = rng.uniform(-86.5, 0, n)                 # at the fast path's bound
    a[5] = rng.uniform(-40, 40, n)                  # a large positive max
    a[6] = rng.uniform(-1e4, 0, n)
    a[7] = rng.uniform(-3, 3, n) - 200              # every value far from 0
    return a


def _ulp32(v):
    """The spacing of float32 at |v| (at least the smallest subnormal)."""
    return np.spacing(np.abs(v).astype(np.float32)).astype(np.float64)


@pytest.mark.parametrize("n", [1, 5, 16, 100, 257, 1000])
def test_float32_exp_family_over_the_whole_exp_range(n, threads):
    """float32 softmax, log_softmax and logsumexp (and their backward) where exp gives
    normal, subnormal and zero results, against float64 NumPy, within a few float32
    ulps (softmax: exp, the sum and the scale each round once)."""
    a = _wide_rows(n, seed=n)
    x64 = a.astype(np.float64)
    lse = _np_lse(x64, 1)
    want_sm = np.exp(x64 - lse)
    (sm, lsm, ls) = bitwise_across_threads(lambda: [
        lucid.softmax(lucid.tensor(a), 1).numpy(), lucid.log_softmax(lucid.tensor(a), 1).numpy(),
        lucid.logsumexp(lucid.tensor(a), 1).numpy()])
    # x - max rounds to float32 first (as in torch): a relative error of |x - max| 2^-24
    d = np.abs(x64 - x64.max(1, keepdims=True))
    d[~np.isfinite(d)] = 0
    err = np.abs(sm - want_sm)
    bound = (4 + d) * _ulp32(want_sm) + 2.0 ** -148
    assert np.all(err <= bound), float(np.max(err / bound))
    np.testing.assert_allclose(ls, lse[:, 0], rtol=2e-7)
    # log_softmax: (x - max) - log(sum), each of the three rounded once, and the sum's
    # float32 lanes (a relative error of a few 2^-24: that much absolute in its log)
    want_lsm = x64 - lse
    m = x64.max(1, keepdims=True)
    fin = np.isfinite(want_lsm)
    assert np.array_equal(lsm[~fin], want_lsm[~fin])
    bound = 2 * (_ulp32(x64 - m) + _ulp32(lse - m) + _ulp32(want_lsm)) + 2.0 ** -21
    assert np.all(np.abs(lsm - want_lsm)[fin] <= bound[fin])
    # backward: log_softmax's g - exp(y) sum(g), logsumexp's g exp(x - lse)
    w = _data(a.shape, np.float32, seed=1)
    x = lucid.tensor(a, requires_grad=True)
    (lucid.log_softmax(x, 1) * lucid.tensor(w)).sum().backward()
    w64 = w.astype(np.float64)
    want = w64 - want_sm * w64.sum(1, keepdims=True)
    fin = np.isfinite(want)
    np.testing.assert_allclose(x.grad.numpy()[fin], want[fin],
                               rtol=1e-5, atol=1e-6 * np.abs(w64).sum())
    x = lucid.tensor(a, requires_grad=True)
    wl = w[:, :1].copy()
    (lucid.logsumexp(x, 1) * lucid.tensor(wl[:, 0])).sum().backward()
    d = x64 - ls.astype(np.float64)[:, None]
    want = wl.astype(np.float64) * np.exp(d)
    d[~np.isfinite(d)] = 0
    err = np.abs(x.grad.numpy() - want)
    assert np.all(err <= (4 + np.abs(d)) * _ulp32(want) + 2.0 ** -148)


def test_float32_exp_bounds_do_not_change_other_elements():
    """The float32 exps take a fast form unless some value of the run is beyond |86|,
    and then a full form for the whole run: both give the same exp where both apply, so
    a far-off element changes no other result (its own exp is 0 against a sum >= 1)."""
    a = _data((4, 100), np.float32, seed=2)
    near, far = a.copy(), a.copy()
    near[:, 7] = near.max(1) - 30         # exp 1e-13: the fast form for the whole row
    far[:, 7] = far.max(1) - 300          # exp 0: the full form for the whole row
    for op in ("softmax", "log_softmax"):
        yn = FAMILY[op][0](lucid.tensor(near), 1).numpy()
        yf = FAMILY[op][0](lucid.tensor(far), 1).numpy()
        keep = np.arange(100) != 7
        assert yn[:, keep].tobytes() == yf[:, keep].tobytes(), op
    assert (lucid.logsumexp(lucid.tensor(near), 1).numpy().tobytes()
            == lucid.logsumexp(lucid.tensor(far), 1).numpy().tobytes())


LAYOUTS = [((300, 517), 1), ((517, 300), 0), ((6, 301, 37), 1), ((10, 100), 1), ((3, 20001), 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", list(FAMILY))
@pytest.mark.parametrize("shape,dim", LAYOUTS, ids=[f"{s}-{d}" for s, d in LAYOUTS])
def test_fused_backward_matches_torch_and_the_graph_formula(op, shape, dim, dtype, threads):
    """The eager backward (lucid's kernel) agrees with torch in float64 and with the
    node's graph-mode formula (create_graph=True), and is bitwise the same on 1, 2 and
    4 threads."""
    a = _data(shape, dtype)
    call = FAMILY[op][0]
    out_shape = tuple(call(lucid.tensor(a), dim).shape)
    w = _data(out_shape, dtype, seed=7)

    def grad(create):
        x = lucid.tensor(a, requires_grad=True)
        (g,) = lucid.autograd.grad((call(x, dim) * lucid.tensor(w)).sum(), x,
                                   create_graph=create)
        return [g.detach().numpy()]

    (eager,) = bitwise_across_threads(lambda: grad(False))
    (graph,) = grad(True)
    # float32: the column sums of g cancel (rounding of order 1e-7 of their terms)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(eager, graph, **tol)
    if torch is not None:
        tx = torch.tensor(a.astype(np.float64), requires_grad=True)
        tf = {"softmax": torch.softmax, "log_softmax": torch.log_softmax,
              "logsumexp": torch.logsumexp}[op]
        (tg,) = torch.autograd.grad((tf(tx, dim) * torch.from_numpy(w.astype(np.float64))).sum(),
                                    tx)
        np.testing.assert_allclose(eager, tg.numpy(), **tol)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("axes,keepdim", [((0, 1), False), ((1, 2), True), ((0, 1, 2), False),
                                          ((0, 2), False)])
def test_logsumexp_backward_over_tuple_axes(axes, keepdim, dtype):
    """logsumexp's fused backward over a run of axes, all axes, and (through the graph
    formula) axes that are not consecutive, with keepdim."""
    a = _data((7, 9, 11), dtype)
    x = lucid.tensor(a, requires_grad=True)
    y = lucid.logsumexp(x, axes, keepdim=keepdim)
    w = np.asarray(_data(tuple(y.shape), dtype, seed=3))
    (y * lucid.tensor(w)).sum().backward()
    tx = torch.tensor(a.astype(np.float64), requires_grad=True)
    (torch.logsumexp(tx, axes, keepdim=keepdim) * torch.from_numpy(w.astype(np.float64))).sum().backward()
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)


@needs_torch
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_fused_backward_with_special_values_and_strided_gradient(op):
    """NaN / inf rows in the forward give torch's gradients; a gradient that is a
    transposed (non-contiguous) view is read correctly."""
    a = _data((8, 97), np.float64)
    a[0, 5] = np.nan
    a[1, 9] = np.inf
    a[2, :] = -np.inf
    x = lucid.tensor(a, requires_grad=True)
    y = FAMILY[op][0](x, 1)
    gbase = _data((97, 8), np.float64, seed=8)
    y.backward(lucid.from_numpy(gbase).transpose(0, 1))
    tx = torch.tensor(a, requires_grad=True)
    tf = torch.softmax if op == "softmax" else torch.log_softmax
    tf(tx, 1).backward(torch.from_numpy(gbase.T.copy()))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-13,
                               equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [0, 1, None, (0, 1)])
def test_mean_kernel(dim, dtype, threads):
    """mean: the pairwise sum / count, bitwise the same on 1, 2 and 4 threads."""
    a = _data((300, 517), dtype)
    (got,) = bitwise_across_threads(
        lambda: [lucid.mean(lucid.tensor(a)).numpy() if dim is None
                 else lucid.mean(lucid.tensor(a), dim).numpy()])
    want = a.astype(np.float64).mean(axis=dim)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got.astype(np.float64), want, **tol)
    assert got.dtype == dtype


# -- integer and bool dtypes --------------------------------------------------------------

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]


def _ints(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


INT_LAYOUTS = [((300, 517), 1), ((517, 300), 0), ((6, 301, 37), 1), ((6, 31, 37), (1, 2)),
               ((100003,), None), ((300, 517), None), ((40000, 3), 0)]
INT_OPS = {
    "sum": (lambda t, d: lucid.sum(t) if d is None else lucid.sum(t, d),
            lambda a, d: np.sum(a, axis=d, dtype=np.int64)),
    "prod": (lambda t, d: lucid.prod(t) if d is None else lucid.prod(t, d),
             lambda a, d: np.prod(a, axis=d, dtype=np.int64)),
    "amax": (lambda t, d: lucid.amax(t) if d is None else lucid.amax(t, d),
             lambda a, d: np.max(a, axis=d)),
    "amin": (lambda t, d: lucid.amin(t) if d is None else lucid.amin(t, d),
             lambda a, d: np.min(a, axis=d)),
    "all": (lambda t, d: lucid.all(t) if d is None else lucid.all(t, d),
            lambda a, d: np.all(a, axis=d)),
    "any": (lambda t, d: lucid.any(t) if d is None else lucid.any(t, d),
            lambda a, d: np.any(a, axis=d)),
}
ONE_AXIS_OPS = {
    "cumsum": (lambda t, d: lucid.cumsum(t, d), lambda a, d: np.cumsum(a, axis=d, dtype=np.int64)),
    "cumprod": (lambda t, d: lucid.cumprod(t, d),
                lambda a, d: np.cumprod(a, axis=d, dtype=np.int64)),
    "max_values": (lambda t, d: lucid.max(t, d).values, lambda a, d: np.max(a, axis=d)),
    "max_indices": (lambda t, d: lucid.max(t, d).indices, lambda a, d: np.argmax(a, axis=d)),
    "min_indices": (lambda t, d: lucid.min(t, d).indices, lambda a, d: np.argmin(a, axis=d)),
    "argmax": (lambda t, d: lucid.argmax(t, d), lambda a, d: np.argmax(a, axis=d)),
    "argmin": (lambda t, d: lucid.argmin(t, d), lambda a, d: np.argmin(a, axis=d)),
}
INT_CASES = [(op, lay) for op in INT_OPS for lay in INT_LAYOUTS
             if not (op == "prod" and isinstance(lay[1], tuple))] + \
    [(op, lay) for op in ONE_AXIS_OPS for lay in INT_LAYOUTS if isinstance(lay[1], int)]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op,layout", INT_CASES, ids=[f"{o}-{lay[0]}-{lay[1]}" for o, lay in INT_CASES])
def test_integer_kernels_match_numpy(op, layout, dtype, threads):
    """Exact results (int64 for sum, prod, cumsum and cumprod, wrapping on overflow as
    NumPy; the input's dtype for max and min; bool for all and any), bitwise the same
    on 1, 2 and 4 threads."""
    shape, dim = layout
    call, ref = {**INT_OPS, **ONE_AXIS_OPS}[op]
    a = _ints(shape, dtype)
    if op in ("prod", "cumprod") and dtype != np.bool_:
        a = np.where(np.abs(a.astype(np.int64)) > 3, 1, a).astype(dtype)   # some wrap anyway
    (got,) = bitwise_across_threads(lambda: [call(lucid.tensor(a), dim).numpy()])
    want = np.asarray(ref(a, dim))
    assert got.shape == want.shape
    assert got.dtype == want.dtype or (op.endswith("indices") or op.startswith("arg"))
    np.testing.assert_array_equal(got, want)


@needs_torch
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_integer_results_and_dtypes_match_torch(dim, keepdim, dtype):
    a = _ints((37, 129), dtype, seed=2)
    t, tt = lucid.tensor(a), torch.from_numpy(a.copy())
    pairs = [
        (lucid.sum(t, dim, keepdim=keepdim), torch.sum(tt, dim, keepdim=keepdim)),
        (lucid.amax(t, dim, keepdim=keepdim), torch.amax(tt, dim, keepdim=keepdim)),
        (lucid.amin(t, dim, keepdim=keepdim), torch.amin(tt, dim, keepdim=keepdim)),
        (lucid.cumsum(t, dim), torch.cumsum(tt, dim)),
        (lucid.max(t, dim, keepdim=keepdim).values, torch.max(tt, dim, keepdim=keepdim).values),
        (lucid.min(t, dim, keepdim=keepdim).indices, torch.min(tt, dim, keepdim=keepdim).indices),
    ]
    if dtype != np.bool_:                      # torch has no argmax of bools
        pairs.append((lucid.argmax(t, dim, keepdim=keepdim), torch.argmax(tt, dim, keepdim=keepdim)))
    # all / any: lucid gives bool for every dtype (torch keeps uint8 for uint8)
    for f, tf in ((lucid.all, torch.all), (lucid.any, torch.any)):
        got = f(t, dim, keepdim=keepdim).numpy()
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, tf(tt, dim, keepdim=keepdim).numpy().astype(bool))
    if dtype != np.bool_:
        small = np.where(np.abs(a.astype(np.int64)) > 2, 1, a).astype(dtype)
        pairs += [(lucid.prod(lucid.tensor(small), dim, keepdim=keepdim),
                   torch.prod(torch.from_numpy(small.copy()), dim, keepdim=keepdim)),
                  (lucid.cumprod(lucid.tensor(small), dim),
                   torch.cumprod(torch.from_numpy(small.copy()), dim))]
    for got, want in pairs:
        g, w = got.numpy(), want.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_strided_unaligned_and_empty(dtype):
    a = _ints((120, 77), dtype)
    view = lucid.from_numpy(np.ascontiguousarray(a.T)).transpose(0, 1)
    for d in (0, 1):
        np.testing.assert_array_equal(lucid.sum(view, d).numpy(), a.sum(axis=d, dtype=np.int64))
        np.testing.assert_array_equal(lucid.amax(view, d).numpy(), a.max(axis=d))
        np.testing.assert_array_equal(lucid.any(view, d).numpy(), a.any(axis=d))
    if np.dtype(dtype).itemsize > 1:
        buf = np.zeros(a.nbytes + 1, dtype=np.uint8)
        un = np.frombuffer(buf.data, dtype=np.uint8, count=a.nbytes, offset=1).view(dtype)
        un = un.reshape(a.shape)
        un[...] = a
        assert not un.flags.aligned
        t = lucid.from_numpy(un)
        np.testing.assert_array_equal(lucid.sum(t, 1).numpy(), a.sum(axis=1, dtype=np.int64))
        np.testing.assert_array_equal(lucid.argmin(t, 0).numpy(), a.argmin(axis=0))
        np.testing.assert_array_equal(lucid.cumsum(t, 1).numpy(), a.cumsum(axis=1, dtype=np.int64))
    e = lucid.tensor(np.zeros((0, 4), dtype))
    np.testing.assert_array_equal(lucid.sum(e, 0).numpy(), np.zeros(4, np.int64))
    np.testing.assert_array_equal(lucid.prod(e, 0).numpy(), np.ones(4, np.int64))
    np.testing.assert_array_equal(lucid.all(e, 0).numpy(), np.ones(4, bool))
    np.testing.assert_array_equal(lucid.any(e, 0).numpy(), np.zeros(4, bool))
    assert lucid.cumsum(e, 0).shape == (0, 4)


def test_integer_sums_wrap_as_numpy():
    a = np.full((3, 1000), np.iinfo(np.int64).max // 300, dtype=np.int64)
    np.testing.assert_array_equal(lucid.sum(lucid.tensor(a), 1).numpy(), a.sum(axis=1))
    b = np.full((2, 70), 3, dtype=np.int32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(lucid.prod(lucid.tensor(b), 1).numpy(),
                                      np.prod(b, axis=1, dtype=np.int64))
    c = np.array([[np.iinfo(np.int8).min, -1, np.iinfo(np.int8).max]], dtype=np.int8)
    np.testing.assert_array_equal(lucid.amin(lucid.tensor(c), 1).numpy(), [-128])
    np.testing.assert_array_equal(lucid.argmax(lucid.tensor(c)).numpy(), 2)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_full_integer_reductions_combine_blocks_in_order(dtype, threads):
    """A full reduction of integers runs in blocks on the pool: the extremes and their
    first index where the best value sits in a late block and ties across blocks (the
    first block must win), all / any decided by one element of the last block, and
    int64 sums that wrap across blocks; bitwise the same on 1, 2 and 4 threads."""
    n = 5 * 16384 + 123                        # six blocks, the last one partial
    info = np.iinfo(np.uint8 if dtype == np.bool_ else dtype)
    a = np.zeros(n, dtype=dtype)
    a[[20000, 70000]] = info.max               # tie in blocks 1 and 4: index 20000
    a[[40000, n - 1]] = info.min if dtype != np.bool_ else 0
    ones = np.ones(n, dtype=dtype)
    ones[n - 2] = 0                            # all: false by the last block only
    one_hot = np.zeros(n, dtype=dtype)
    one_hot[n - 3] = 1                         # any: true by the last block only
    calls = [lambda t: lucid.amax(t), lambda t: lucid.amin(t), lambda t: lucid.sum(t)]
    if dtype != np.bool_:
        calls += [lambda t: lucid.argmax(t), lambda t: lucid.argmin(t)]
    got = bitwise_across_threads(lambda: [f(lucid.tensor(a)).numpy() for f in calls] + [
        lucid.all(lucid.tensor(ones)).numpy(), lucid.any(lucid.tensor(one_hot)).numpy(),
        lucid.all(lucid.tensor(a)).numpy(), lucid.any(lucid.tensor(np.zeros(n, dtype))).numpy()])
    want = [a.max(), a.min(), a.sum(dtype=np.int64)]
    if dtype != np.bool_:
        want += [a.argmax(), a.argmin()]
    want += [False, True, False, False]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    if dtype == np.int64:
        big = np.full(n, np.iinfo(np.int64).max // 1000, dtype=np.int64)
        (s,) = bitwise_across_threads(lambda: [lucid.sum(lucid.tensor(big)).numpy()])
        assert s == big.sum()                  # NumPy wraps too
        small = np.where(np.arange(n) % 7 == 0, 3, 1).astype(np.int64)
        (p,) = bitwise_across_threads(lambda: [lucid.prod(lucid.tensor(small)).numpy()])
        with np.errstate(over="ignore"):
            assert p == np.prod(small)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [0, 1, None, (0, 1)])
def test_all_any_of_floats(dim, dtype, threads):
    """Nonzero is true: NaN and inf are true, -0.0 is false."""
    a = np.ones((300, 517), dtype)
    a[3, :] = 0
    a[4, :] = -0.0
    a[5, :] = np.nan
    a[6, 7] = 0
    a[:, 8] = 0
    a[:, 9] = np.inf
    a[:, 10] = -0.0
    a[7, 10] = np.nan
    for f, ref in ((lucid.all, np.all), (lucid.any, np.any)):
        (got,) = bitwise_across_threads(
            lambda: [f(lucid.tensor(a)).numpy() if dim is None else f(lucid.tensor(a), dim).numpy()])
        want = ref(a, axis=dim)
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(lucid.any(lucid.tensor(a), 1, keepdim=True).numpy(),
                                  np.any(a, axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", [100, 32768, 100003])
def test_sum_and_mean_backward_fill_every_element(n, dtype, threads):
    """The full sum's and mean's gradient is one value spread over the input (a fill
    in pieces on the pool): every element, the last piece's too, on 1, 2 and 4
    threads."""
    x = lucid.tensor(np.ones(n, dtype), requires_grad=True)

    def grads():
        x.grad = None
        (lucid.sum(x) * 3).backward()
        g1 = x.grad.numpy().copy()
        x.grad = None
        lucid.mean(x).backward()
        return [g1, x.grad.numpy().copy()]

    g_sum, g_mean = bitwise_across_threads(grads)
    assert g_sum.dtype == dtype and g_mean.dtype == dtype
    np.testing.assert_array_equal(g_sum, np.full(n, 3, dtype))
    np.testing.assert_array_equal(g_mean, np.full(n, dtype(1) / dtype(n), dtype))
