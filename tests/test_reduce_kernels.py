"""lucid's reduction kernels (src/lucid_reduce.c): sum, mean, prod, var, std, norm
(p = 1, 2, inf), amax/amin, max/min with indices, argmax/argmin, logsumexp, softmax,
log_softmax, cumsum and cumprod over the last axis, the first axis, a middle axis and
all axes, float32 and float64, and the fused eager backward of var, std and norm.

Values are compared with float64 NumPy/SciPy (and torch where installed); results
must be bitwise the same on 1, 2 and 4 threads (the summation order is fixed by
the shape). Shapes are large enough to be split into several pieces and blocks.
"""
import numpy as np
import pytest

import lucid
from lucid_testutils import bitwise_across_threads

try:
    import torch
except ImportError:          # pragma: no cover
    torch = None


def _lse(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    return (np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m).squeeze(axis)


def _softmax(a, axis):
    e = np.exp(a - np.max(a, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(a, axis):
    z = a - np.max(a, axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _all_dims(d, t):
    return tuple(range(t.ndim)) if d is None else d


# name -> (lucid call, float64 reference, exact?)
OPS = {
    "prod": (lambda t, d: lucid.prod(1 + t / 300) if d is None else lucid.prod(1 + t / 300, d),
             lambda a, d: np.prod(1 + a / 300, axis=d), False),
    "cumsum": (lambda t, d: lucid.cumsum(t, d), lambda a, d: np.cumsum(a, axis=d), False),
    "cumprod": (lambda t, d: lucid.cumprod(1 + t / 300, d),
                lambda a, d: np.cumprod(1 + a / 300, axis=d), False),
    "var": (lambda t, d: lucid.var(t, d), lambda a, d: a.var(axis=d, ddof=1), False),
    "std": (lambda t, d: lucid.std(t, d), lambda a, d: a.std(axis=d, ddof=1), False),
    "norm2": (lambda t, d: lucid.norm(t, 2, d), lambda a, d: np.sqrt((a * a).sum(axis=d)), False),
    "norm1": (lambda t, d: lucid.norm(t, 1, d), lambda a, d: np.abs(a).sum(axis=d), False),
    "norm_inf": (lambda t, d: lucid.norm(t, float("inf"), d),
                 lambda a, d: np.abs(a).max(axis=d), True),
    "sum": (lambda t, d: lucid.sum(t) if d is None else lucid.sum(t, d),
            lambda a, d: a.sum(axis=d), False),
    "mean": (lambda t, d: lucid.mean(t) if d is None else lucid.mean(t, d),
             lambda a, d: a.mean(axis=d), False),
    "amax": (lambda t, d: lucid.amax(t) if d is None else lucid.amax(t, d),
             lambda a, d: a.max(axis=d), True),
    "amin": (lambda t, d: lucid.amin(t) if d is None else lucid.amin(t, d),
             lambda a, d: a.min(axis=d), True),
    "max_values": (lambda t, d: lucid.max(t) if d is None else lucid.max(t, d).values,
                   lambda a, d: a.max(axis=d), True),
    "max_indices": (lambda t, d: lucid.argmax(t) if d is None else lucid.max(t, d).indices,
                    lambda a, d: a.argmax(axis=d), True),
    "min_indices": (lambda t, d: lucid.argmin(t) if d is None else lucid.min(t, d).indices,
                    lambda a, d: a.argmin(axis=d), True),
    "argmax": (lambda t, d: lucid.argmax(t, d), lambda a, d: a.argmax(axis=d), True),
    "argmin": (lambda t, d: lucid.argmin(t, d), lambda a, d: a.argmin(axis=d), True),
    "logsumexp": (lambda t, d: lucid.logsumexp(t, d if d is not None else tuple(range(t.ndim))),
                  lambda a, d: _lse(a.reshape(-1), 0) if d is None else _lse(a, d), False),
    "softmax": (lambda t, d: lucid.softmax(t, d), _softmax, False),
    "log_softmax": (lambda t, d: lucid.log_softmax(t, d), _log_softmax, False),
}
ROWWISE = {"softmax", "log_softmax", "cumsum", "cumprod"}

# (id, shape, dim): rows, columns, a middle axis, everything (several blocks)
LAYOUTS = [
    ("last", (300, 517), 1),
    ("first", (517, 300), 0),
    ("first_narrow", (40000, 3), 0),
    ("middle", (6, 301, 37), 1),
    ("long_rows", (3, 70001), 1),
    ("all", (300, 517), None),
    ("all_1d", (100003,), None),
    ("one_row", (100003,), 0),
    ("small", (10, 100), 1),
]

CASES = [(op, lay) for op in OPS for lay in LAYOUTS
         if not (op in ROWWISE and lay[2] is None)
         and not (op in ("argmax", "argmin") and lay[2] is None)]


def _data(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype) * 3


def _tol(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,layout", CASES, ids=[f"{o}-{lay[0]}" for o, lay in CASES])
def test_matches_reference_and_isbitwise_across_threads(op, layout, dtype, threads):
    _, shape, dim = layout
    call, ref, exact = OPS[op]
    a = _data(shape, dtype)
    t = lucid.tensor(a)
    outs = []
    for nt in (1, 2, 4):
        lucid.set_num_threads(nt)
        outs.append(np.asarray(call(t, dim).numpy()))
    for o in outs[1:]:
        assert o.dtype == outs[0].dtype and o.shape == outs[0].shape
        assert o.tobytes() == outs[0].tobytes(), f"{op} differs across thread counts"
    want = ref(a.astype(np.float64) if not exact else a, dim)
    got = outs[0]
    assert got.shape == np.shape(want)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want, **_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape,dim", [((300, 517), 1), ((517, 300), 0), ((100003,), 0)])
def test_sum_is_as_accurate_as_numpy(shape, dim, dtype):
    """The blocked pairwise sum is at least as accurate as NumPy's, on data whose
    naive float32 sum loses digits (a large offset)."""
    a = (np.random.default_rng(3).standard_normal(shape) + 100).astype(dtype)
    exact = a.astype(np.float64).sum(axis=dim) if dtype == np.float32 else \
        np.asarray([float(np.sum(np.asarray(r, np.longdouble))) for r in
                    np.moveaxis(a, dim, -1).reshape(-1, shape[dim])]).reshape(
                        np.delete(np.array(shape), dim))
    got = lucid.sum(lucid.tensor(a), dim).numpy().astype(np.float64)
    npy = a.sum(axis=dim).astype(np.float64)
    ulp = np.spacing(np.abs(exact).astype(dtype)).astype(np.float64)
    err, nerr = np.abs(got - exact), np.abs(npy - exact)
    assert np.max(err / ulp) <= np.max(nerr / ulp) + 1       # within one final rounding
    assert np.mean(err) <= 1.5 * np.mean(nerr) + np.mean(ulp) / 2


def _specials(dtype):
    """Rows with NaN, +-inf, all -inf, and ties, long enough for the vector paths."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((8, 97)).astype(dtype)
    a[0, 50] = np.nan
    a[1, 3] = np.inf
    a[2, :] = -np.inf
    a[3, 10] = np.inf
    a[3, 20] = -np.inf
    a[4, 60] = np.nan
    a[4, 70] = np.inf
    a[5, :] = 1.0                      # ties: the first index wins
    a[6, 96] = np.nan                  # in the scalar tail
    a[7, 0] = np.nan
    return a


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [0, 1])
def test_special_values_match_torch(dim, dtype):
    a = _specials(dtype)
    if dim == 0:
        a = np.ascontiguousarray(a.T)
    t, tt = lucid.tensor(a), torch.from_numpy(a.copy())
    pairs = [
        (lucid.amax(t, dim), torch.amax(tt, dim)),
        (lucid.amin(t, dim), torch.amin(tt, dim)),
        (lucid.max(t, dim).values, torch.max(tt, dim).values),
        (lucid.logsumexp(t, dim), torch.logsumexp(tt, dim)),
        (lucid.sum(t, dim), torch.sum(tt, dim)),
    ]
    # softmax / log_softmax as torch: a row holding +inf, or only -inf, gives NaN
    pairs += [(lucid.softmax(t, dim), torch.softmax(tt, dim)),
              (lucid.log_softmax(t, dim), torch.log_softmax(tt, dim))]
    for got, want in pairs:
        want = want.numpy() if hasattr(want, 'numpy') else want
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6,
                                   equal_nan=True)
    # indices: NaN wins, then the first of tied extremes (NumPy's rule; torch agrees
    # on these rows)
    np.testing.assert_array_equal(lucid.max(t, dim).indices.numpy(), np.argmax(a, axis=dim))
    np.testing.assert_array_equal(lucid.argmin(t, dim).numpy(), np.argmin(a, axis=dim))




@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_row_products_fold_as_one_row_alone(dtype):
    # rows of a matrix are folded eight at a time, a 1-D tensor's product alone: the
    # pairs of lanes are the same, so the bits are. Accuracy against the product in
    # extended precision: float32 rows are multiplied in double and rounded once;
    # float64 within the (n - 1) roundings' bound
    rng = np.random.default_rng(4)
    for n in (1, 16, 17, 33, 100, 257):
        for rows in (7, 8, 9, 17, 100):
            a = rng.uniform(0.5, 1.5, (rows, n)).astype(dtype)
            got = lucid.prod(lucid.tensor(a), 1).numpy()
            alone = np.array([lucid.prod(lucid.tensor(a[r].copy())).item()
                              for r in range(rows)], dtype=dtype)
            assert got.tobytes() == alone.tobytes(), (n, rows)
            want = np.prod(a.astype(np.longdouble), 1)
            eps = np.finfo(dtype).eps
            rtol = eps if dtype == np.float32 else max(n - 1, 1) * eps / 2
            assert np.all(np.abs(got - want) <= rtol * np.abs(want)), (n, rows)

@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_row_extremes_and_nan_wherever_they_sit(dtype):
    # row r of an n x n array holds its maximum at r and its minimum at r + 1, so every
    # position is tried: whole vectors, the last vector (read again, overlapping), and
    # each lane of the fold; then a NaN at r, which wins both
    rng = np.random.default_rng(9)
    for n in (32, 33, 47, 48, 100, 131):
        a = rng.uniform(-1, 1, (n, n)).astype(dtype)
        r = np.arange(n)
        a[r, r] = 2.0
        a[r, (r + 1) % n] = -2.0
        t = lucid.tensor(a)
        np.testing.assert_array_equal(lucid.amax(t, 1).numpy(), np.full(n, 2.0, dtype))
        np.testing.assert_array_equal(lucid.amin(t, 1).numpy(), np.full(n, -2.0, dtype))
        np.testing.assert_array_equal(lucid.argmax(t, 1).numpy(), r)
        np.testing.assert_array_equal(lucid.argmin(t, 1).numpy(), (r + 1) % n)
        a[r, r] = np.nan
        t = lucid.tensor(a)
        assert np.isnan(lucid.amax(t, 1).numpy()).all() and np.isnan(lucid.amin(t, 1).numpy()).all()
        np.testing.assert_array_equal(lucid.argmax(t, 1).numpy(), r)
        np.testing.assert_array_equal(lucid.argmin(t, 1).numpy(), r)

@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_column_extremes_with_special_values_in_full_pieces(dtype, threads):
    """Down the first axis of 150 columns (two full 64-column pieces, whose running
    extremes are kept in registers, and a partial one): NaN, +-inf, all -inf and ties
    in columns of every piece; values and first indices as NumPy, bitwise across
    thread counts."""
    a = _data((300, 150), dtype, seed=3)
    for c in (0, 63, 64, 100, 140):
        a[7, c] = np.nan                       # NaN wins
        a[200, c] = np.inf
    for c in (5, 70, 131):
        a[:, c] = -np.inf
    for c in (9, 99, 149):
        a[50, c] = np.inf                      # the only inf: first index 50
        a[250, c] = np.inf
    a[:, 30] = 2.0                             # ties: index 0
    a[299, 127] = np.nan                       # in the last row
    t = lucid.tensor(a)
    got = bitwise_across_threads(lambda: [
        lucid.amax(t, 0).numpy(), lucid.amin(t, 0).numpy(), lucid.argmax(t, 0).numpy(),
        lucid.argmin(t, 0).numpy()])
    want = [a.max(axis=0), a.min(axis=0), a.argmax(axis=0), a.argmin(axis=0)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_full_reductions_with_special_values(dtype):
    a = _data((100003,), dtype)
    a[77777] = np.inf
    t = lucid.tensor(a)
    assert lucid.amax(t).item() == np.inf and lucid.argmax(t).item() == 77777
    a[40000] = np.nan
    t = lucid.tensor(a)
    assert np.isnan(lucid.amax(t).item()) and lucid.argmax(t).item() == 40000
    assert np.isnan(lucid.sum(t).item())


@pytest.mark.parametrize("op", ["sum", "amax", "logsumexp", "softmax", "log_softmax"])
def test_noncontiguous_and_keepdim_agree_with_contiguous(op):
    base = _data((400, 130), np.float32)
    view = lucid.from_numpy(base).transpose(0, 1)          # (130, 400), not contiguous
    dense = lucid.tensor(np.ascontiguousarray(base.T))
    f = {"sum": lambda t: lucid.sum(t, 1, keepdim=True),
         "amax": lambda t: lucid.amax(t, 1, keepdim=True),
         "logsumexp": lambda t: lucid.logsumexp(t, 1, keepdim=True),
         "softmax": lambda t: lucid.softmax(t, 1),
         "log_softmax": lambda t: lucid.log_softmax(t, 1)}[op]
    got, want = f(view).numpy(), f(dense).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)   # NumPy's order vs lucid's


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", [1, 3, 15, 16, 17, 63, 64, 65, 100, 129, 255, 256, 257, 1000])
def test_row_sums_do_not_depend_on_the_rows_around_them(n, dtype, threads):
    """A row's sum is the sum of that row alone, bitwise: the same whether the row is
    summed on its own, among many rows (the inline short-row path, which reads past a
    row's end and masks), as the last row of an array (no read past the end), or on
    1, 2 or 4 threads; and each row sum is as close to the float64 sum as NumPy's."""
    a = _data((300, n), dtype, seed=n)
    lucid.set_num_threads(1)
    single = np.array([lucid.sum(lucid.tensor(a[i])).item() for i in (0, 150, 299)],
                      dtype=dtype)
    for nt in (1, 2, 4):
        lucid.set_num_threads(nt)
        rows = lucid.sum(lucid.tensor(a), 1).numpy()
        assert rows[[0, 150, 299]].tobytes() == single.tobytes()
        for k in (1, 151, 300):                      # the same rows, ending the array
            part = lucid.sum(lucid.tensor(np.ascontiguousarray(a[:k])), 1).numpy()
            assert part.tobytes() == rows[:k].tobytes()
    exact = a.astype(np.float64).sum(axis=1)
    tol = np.spacing(np.abs(a).astype(np.float64).sum(axis=1)) * 8 * np.sqrt(n) \
        if dtype == np.float64 else np.abs(a).sum(axis=1).astype(np.float64) * 2e-6
    assert np.all(np.abs(rows.astype(np.float64) - exact) <= tol + 1e-30)


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_moments_norms_and_prod_with_special_values_match_torch(dim, dtype):
    """NaN and +-inf in rows or columns: var, std, the norms and prod give what torch
    gives (NaN from inf - inf in the deviations, inf for a norm holding inf)."""
    a = _specials(dtype)
    if dim == 0:
        a = np.ascontiguousarray(a.T)
    t, tt = lucid.tensor(a), torch.from_numpy(a.copy())
    td = tuple(range(a.ndim)) if dim is None else dim
    pairs = [
        (lucid.var(t, dim), torch.var(tt, td)),
        (lucid.std(t, dim), torch.std(tt, td)),
        (lucid.norm(t, 2, dim), torch.linalg.vector_norm(tt, 2, td)),
        (lucid.norm(t, 1, dim), torch.linalg.vector_norm(tt, 1, td)),
        (lucid.norm(t, float("inf"), dim), torch.linalg.vector_norm(tt, float("inf"), td)),
    ]
    p = np.where(np.isfinite(a), 1 + a / 100, a)
    if dim is None:
        pairs.append((lucid.prod(lucid.tensor(p)), torch.prod(torch.from_numpy(p.copy()))))
    else:
        pairs.append((lucid.prod(lucid.tensor(p), dim), torch.prod(torch.from_numpy(p.copy()), dim)))
    for got, want in pairs:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6,
                                   equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("scale", [1e-30, 1e-200, 1e30, 1e200, 0.0])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_norm2_without_overflow_or_underflow(scale, dim, dtype):
    """The 2-norm sums unscaled squares; where they over- or underflow (float32 above
    1.8e19 or below 1e-19, float64 above 1e154 or below 1e-154), the scaled formula
    takes over, so the result is the float64 norm of the values, rounded once."""
    if dtype == np.float32 and scale in (1e-200, 1e200):
        pytest.skip("not a float32 value")
    a = (_data((50, 37), np.float64) * scale).astype(dtype)
    b = np.asarray(a, np.float64) / (scale if scale else 1.0)
    want = np.sqrt((b * b).sum(axis=dim)) * (scale if scale else 1.0)
    got = lucid.norm(lucid.tensor(a), 2, dim).numpy().astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.float32 else 1e-13, atol=0)


@pytest.mark.parametrize("op", ["var", "std", "norm2", "norm1", "norm_inf"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_unaligned_and_noncontiguous_inputs(op, dtype):
    """An input whose data pointer is not aligned to its dtype, and a transposed view,
    give the contiguous input's result (the kernels read an aligned copy; views go
    through NumPy, whose order may differ by a rounding)."""
    call, _, _ = OPS[op]
    a = _data((120, 77), dtype)
    buf = np.zeros(a.nbytes + 1, dtype=np.uint8)
    un = np.frombuffer(buf.data, dtype=np.uint8, count=a.nbytes, offset=1).view(dtype)
    un = un.reshape(a.shape)
    un[...] = a
    assert not un.flags.aligned
    for d in (0, 1, None):
        want = call(lucid.tensor(a), d).numpy()
        assert call(lucid.from_numpy(un), d).numpy().tobytes() == want.tobytes()
        view = lucid.from_numpy(np.ascontiguousarray(a.T)).transpose(0, 1)
        np.testing.assert_allclose(call(view, d).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_empty_reductions(dtype):
    """Reducing over an empty dim: var/std NaN, norms 0, prod 1 (torch's values)."""
    a = np.zeros((0, 5), dtype)
    t = lucid.tensor(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        assert np.isnan(lucid.var(t, 0).numpy()).all() and lucid.var(t, 0).shape == (5,)
        assert np.isnan(lucid.std(t, 0).numpy()).all()
    np.testing.assert_array_equal(lucid.norm(t, 2, 0).numpy(), np.zeros(5, dtype))
    np.testing.assert_array_equal(lucid.norm(t, 1, 0).numpy(), np.zeros(5, dtype))
    np.testing.assert_array_equal(lucid.prod(t, 0).numpy(), np.ones(5, dtype))
    assert lucid.var(t, 1).shape == (0,) and lucid.prod(t, 1).shape == (0,)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 255, 256, 257, 1000])
def test_row_exp_sums_do_not_depend_on_the_rows_around_them(op, n, dtype, threads):
    """A row of softmax / log_softmax / logsumexp is computed from that row alone, in an
    order fixed by its length: bitwise the same alone, among other rows, and on 1, 2
    or 4 threads."""
    call = OPS[op][0]
    a = _data((64, n), dtype, seed=n)
    lucid.set_num_threads(1)
    alone = [call(lucid.tensor(np.ascontiguousarray(a[i:i + 1])), 1).numpy() for i in (0, 33, 63)]
    for nt in (1, 2, 4):
        lucid.set_num_threads(nt)
        rows = call(lucid.tensor(a), 1).numpy()
        for k, i in enumerate((0, 33, 63)):
            assert rows[i:i + 1].tobytes() == alone[k].tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumulative_ops_accumulate_in_double(dim, dtype):
    """cumsum / cumprod accumulate in double whatever the axis (as PyTorch for float32):
    a float32 cumsum of 1 + 1e-8 steps keeps the small parts, and a product passing
    through 3.4e38 * 3.4e38 and then 0 ends in 0, not inf * 0 = NaN."""
    a = np.full((4, 3000), 1 + 2 ** -20, dtype=dtype)
    if dim == 0:
        a = np.ascontiguousarray(a.T)
    got = lucid.cumsum(lucid.tensor(a), dim).numpy()
    want = np.cumsum(a.astype(np.float64), axis=dim).astype(dtype)
    np.testing.assert_array_equal(got, want)
    big = np.array([[3e38, 3e38, 0.0, 2.0]], dtype=np.float32)
    big = big if dim == 1 else np.ascontiguousarray(big.T)
    got = lucid.cumprod(lucid.tensor(big), dim).numpy().reshape(-1)
    assert got[1] == np.inf and got[2] == 0 and got[3] == 0


@pytest.mark.parametrize("op", ["var", "std", "norm2", "norm1", "prod"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (None, False)])
def test_fused_backward_matches_the_graph_mode_formula(op, dim, keepdim, dtype):
    """The eager backward of var, std, the 1- and 2-norms and prod (fused NumPy passes;
    prod's divides the product by x where every product is finite and normal, and
    falls back to prefix and suffix products where one overflows: the full product
    here) agrees with the node's graph-mode formula (create_graph=True) and with torch."""
    a = _data((60, 45), dtype)
    a[3, :] = 1.5                   # a row with std 0 (its gradient is 0, as torch)
    if dim is None:
        a[3, :] = _data((45,), dtype, seed=9)
    w = _data((60, 45), dtype, seed=2)
    f = {"var": lambda t: lucid.var(t, dim, keepdim=keepdim),
         "std": lambda t: lucid.std(t, dim, keepdim=keepdim),
         "norm2": lambda t: lucid.norm(t, 2, dim, keepdim=keepdim),
         "norm1": lambda t: lucid.norm(t, 1, dim, keepdim=keepdim),
         "prod": lambda t: lucid.prod(t / 2, dim, keepdim=keepdim)}[op]
    grads = []
    for create in (False, True):
        x = lucid.tensor(a, requires_grad=True)
        y = f(x)
        wt = lucid.tensor(np.linspace(-1, 2, y.numel()).reshape(y.shape).astype(dtype))
        (g,) = lucid.autograd.grad((y * wt).sum(), x, create_graph=create)
        grads.append(g.detach().numpy())
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(grads[0], grads[1], **tol)
    if torch is not None:
        tx = torch.tensor(a.astype(np.float64), requires_grad=True)
        td = tuple(range(2)) if dim is None else dim
        ty = {"var": lambda t: torch.var(t, td, keepdim=keepdim),
              "std": lambda t: torch.std(t, td, keepdim=keepdim),
              "norm2": lambda t: torch.linalg.vector_norm(t, 2, td, keepdim=keepdim),
              "norm1": lambda t: torch.linalg.vector_norm(t, 1, td, keepdim=keepdim),
              "prod": lambda t: torch.prod(t / 2) if dim is None else
              torch.prod(t / 2, dim, keepdim=keepdim)}[op](tx)
        tw = torch.linspace(-1, 2, ty.numel(), dtype=torch.float64).reshape(ty.shape)
        (tg,) = torch.autograd.grad((ty * tw).sum(), tx)
        np.testing.assert_allclose(grads[0], tg.numpy(),
                                   **dict(tol, atol=1e-5 if dtype == np.float32 else 1e-12))
