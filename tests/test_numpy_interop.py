"""NumPy's protocols on Tensor: np.* on tensors runs lucid's ops and keeps the graph.

Values are compared with NumPy itself on the same data; gradients with central
finite differences in float64 (and torch where it is installed).
"""
import math

import numpy as np
import pytest

import lucid
from lucid import _interop


def _fd_grad(f, x, eps=1e-6):
    """Central differences of a scalar function of a float64 ndarray."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def _grad_via_numpy(np_fn, x):
    """d sum(np_fn(t)) / dt, through the NumPy call on a lucid tensor."""
    t = lucid.tensor(x, requires_grad=True)
    out = np_fn(t)
    assert isinstance(out, lucid.Tensor)
    (g,) = lucid.autograd.grad(out.sum(), t)
    return out, g


# -- ufuncs: one row per ufunc, as data ------------------------------------------------------

UNARY = [  # (ufunc, domain)
    (np.exp, (-2, 2)), (np.exp2, (-2, 2)), (np.expm1, (-2, 2)), (np.log, (0.2, 3)),
    (np.log2, (0.2, 3)), (np.log10, (0.2, 3)), (np.log1p, (-0.5, 3)), (np.sqrt, (0.2, 3)),
    (np.cbrt, (0.2, 3)), (np.square, (-2, 2)), (np.reciprocal, (0.5, 2)),
    (np.sin, (-3, 3)), (np.cos, (-3, 3)), (np.tan, (-1, 1)),
    (np.arcsin, (-0.9, 0.9)), (np.arccos, (-0.9, 0.9)), (np.arctan, (-3, 3)),
    (np.sinh, (-2, 2)), (np.cosh, (-2, 2)), (np.tanh, (-2, 2)),
    (np.arcsinh, (-2, 2)), (np.arccosh, (1.2, 3)), (np.arctanh, (-0.9, 0.9)),
    (np.absolute, (-2, 2)), (np.fabs, (-2, 2)), (np.negative, (-2, 2)), (np.positive, (-2, 2)),
    (np.deg2rad, (-90, 90)), (np.rad2deg, (-2, 2)),
]
SMOOTH_NO_GRAD = [np.sign, np.floor, np.ceil, np.trunc, np.rint]
BINARY = [  # (ufunc, domain of a, domain of b)
    (np.add, (-2, 2), (-2, 2)), (np.subtract, (-2, 2), (-2, 2)), (np.multiply, (-2, 2), (-2, 2)),
    (np.true_divide, (-2, 2), (0.5, 2)), (np.power, (0.5, 2), (-2, 2)),
    (np.maximum, (-2, 2), (-2, 2)), (np.minimum, (-2, 2), (-2, 2)),
    (np.arctan2, (-2, 2), (0.5, 2)), (np.hypot, (0.5, 2), (-2, 2)),
    (np.logaddexp, (-2, 2), (-2, 2)), (np.logaddexp2, (-2, 2), (-2, 2)),
    (np.fmod, (0.5, 3), (0.7, 1.3)), (np.remainder, (0.5, 3), (0.7, 1.3)),
]
COMPARE = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]


@pytest.mark.parametrize("uf,dom", UNARY, ids=lambda v: getattr(v, "__name__", ""))
def test_unary_ufunc_value_and_gradient(uf, dom, rng):
    x = rng.uniform(*dom, size=(3, 4))
    out, g = _grad_via_numpy(uf, lucid.tensor(x, dtype=lucid.float64).numpy())
    np.testing.assert_allclose(out.detach().numpy(), uf(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g.numpy(), _fd_grad(lambda v: uf(v).sum(), x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("uf", SMOOTH_NO_GRAD, ids=lambda v: v.__name__)
def test_piecewise_constant_ufuncs(uf, rng):
    x = rng.uniform(-3, 3, size=7)
    t = lucid.tensor(x, requires_grad=True)
    out = uf(t)
    np.testing.assert_array_equal(out.detach().numpy(), uf(x))
    (g,) = lucid.autograd.grad(out.sum(), t)
    np.testing.assert_array_equal(g.numpy(), np.zeros(7))


@pytest.mark.parametrize("uf,da,db", BINARY, ids=lambda v: getattr(v, "__name__", ""))
def test_binary_ufunc_value_and_gradient_both_sides(uf, da, db, rng):
    a = rng.uniform(*da, size=(3, 4))
    b = rng.uniform(*db, size=(4,))
    ta = lucid.tensor(a, requires_grad=True)
    tb = lucid.tensor(b, requires_grad=True)
    out = uf(ta, tb)
    assert isinstance(out, lucid.Tensor)
    np.testing.assert_allclose(out.detach().numpy(), uf(a, b), rtol=1e-12)
    ga, gb = lucid.autograd.grad(out.sum(), (ta, tb))
    fd_a = _fd_grad(lambda v: uf(v, b).sum(), a)
    fd_b = _fd_grad(lambda v: uf(a, v).sum(), b)
    np.testing.assert_allclose(ga.numpy(), fd_a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb.numpy(), fd_b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("uf", COMPARE, ids=lambda v: v.__name__)
def test_comparison_ufuncs(uf, rng):
    a = rng.integers(0, 3, size=(5,)).astype(np.float32)
    b = rng.integers(0, 3, size=(5,)).astype(np.float32)
    out = uf(lucid.tensor(a), b)
    assert out.dtype == lucid.bool_
    np.testing.assert_array_equal(out.numpy(), uf(a, b))


def test_copysign(rng):
    a, b = rng.uniform(-2, 2, size=(2, 5))
    out, g = _grad_via_numpy(lambda t: np.copysign(t, b), a)
    np.testing.assert_array_equal(out.detach().numpy(), np.copysign(a, b))
    np.testing.assert_array_equal(g.numpy(), np.sign(a) * np.sign(b))
    np.testing.assert_array_equal(np.copysign(a, lucid.tensor(b)).numpy(), np.copysign(a, b))


def test_integer_ufuncs(rng):
    a = rng.integers(-20, 20, size=6)
    b = rng.integers(1, 4, size=6)
    ta = lucid.tensor(a)
    for uf in (np.floor_divide, np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.left_shift,
               np.right_shift):
        out = uf(ta, b)
        assert isinstance(out, lucid.Tensor) and out.dtype == lucid.int64, uf
        np.testing.assert_array_equal(out.numpy(), uf(a, b))
    np.testing.assert_array_equal((a // lucid.tensor(b)).numpy(), a // b)
    x = rng.uniform(-5, 5, size=6)
    np.testing.assert_array_equal(np.floor_divide(lucid.tensor(x), 1.5).numpy(),
                                  np.floor_divide(x, 1.5))


def test_logical_ufuncs():
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    ta = lucid.tensor(a)
    for uf in (np.logical_and, np.logical_or, np.logical_xor):
        np.testing.assert_array_equal(uf(ta, b).numpy(), uf(a, b))
    np.testing.assert_array_equal(np.logical_not(ta).numpy(), ~a)
    np.testing.assert_array_equal(np.invert(ta).numpy(), ~a)
    np.testing.assert_array_equal(np.isnan(lucid.tensor([1.0, np.nan])).numpy(), [False, True])


def test_same_backward_node_as_the_lucid_op():
    t = lucid.tensor([0.5, 1.0], requires_grad=True)
    assert type(np.exp(t).grad_fn) is type(lucid.exp(t).grad_fn)
    assert type(np.arctan2(t, 2.0).grad_fn) is type(lucid.atan2(t, 2.0).grad_fn)
    assert type(np.sum(t).grad_fn) is type(lucid.sum(t).grad_fn)
    assert type((np.ones(2) * t).grad_fn) is type((t * 2).grad_fn)


@pytest.mark.parametrize("expr", [
    lambda a, t: a * t, lambda a, t: t * a, lambda a, t: np.multiply(a, t),
    lambda a, t: a + t, lambda a, t: a - t, lambda a, t: a / t, lambda a, t: a ** t,
    lambda a, t: np.add(t, a), lambda a, t: a @ t,
])
def test_ndarray_on_either_side_keeps_the_graph(expr, rng):
    a = rng.uniform(0.5, 2, size=(3, 3))
    x = rng.uniform(0.5, 2, size=(3, 3))
    t = lucid.tensor(x, requires_grad=True)
    out = expr(a, t)
    assert isinstance(out, lucid.Tensor) and out.requires_grad
    np.testing.assert_allclose(out.detach().numpy(), expr(a, x), rtol=1e-12)
    (g,) = lucid.autograd.grad(out.sum(), t)
    np.testing.assert_allclose(g.numpy(), _fd_grad(lambda v: expr(a, v).sum(), x), rtol=1e-5)


def test_promotion_follows_lucid_not_numpy():
    t = lucid.ones(3)                                     # float32
    assert np.multiply(t, 2.5).dtype == lucid.float32
    assert np.add(t, np.float64(0.1)).dtype == lucid.float32
    assert (np.float64(0.1) * t).dtype == lucid.float32
    assert (t * np.float64(0.1)).dtype == lucid.float32
    assert np.exp(t).dtype == lucid.float32
    assert np.add(t, np.ones(3)).dtype == lucid.float64   # a float64 array with dims wins, as torch
    assert np.true_divide(lucid.tensor([1, 2]), 2).dtype == lucid.float32


def test_scipy_special_ufuncs_route_to_lucid(rng):
    special = pytest.importorskip("scipy.special")
    x = rng.uniform(0.1, 1.9, size=6)            # inside every listed function's domain
    for name in ("erf", "erfc", "expit", "gammaln", "digamma", "ndtr", "log_ndtr", "i0e",
                 "erfcx", "entr", "expm1"):
        fn = getattr(special, name)
        out, g = _grad_via_numpy(fn, x)
        assert type(out.grad_fn) is type(getattr(lucid.special, name)(
            lucid.tensor(x, requires_grad=True)).grad_fn), name
        np.testing.assert_allclose(out.detach().numpy(), fn(x), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(g.numpy(), _fd_grad(lambda v, f=fn: f(v).sum(), x),
                                   rtol=1e-6, err_msg=name)
    out = special.xlogy(lucid.tensor(x), x[::-1])
    np.testing.assert_allclose(out.numpy(), special.xlogy(x, x[::-1]), rtol=1e-12)


# -- out=, where=, dtype=, reduce, accumulate ---------------------------------------------------

def test_ufunc_out_tensor_is_written_in_place():
    t = lucid.tensor([0.0, 1.0, 2.0])
    out = lucid.zeros(3)
    r = np.exp(t, out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), np.exp([0.0, 1.0, 2.0]), rtol=1e-6)


def test_ufunc_out_ndarray_only_without_grad():
    t = lucid.tensor([0.0, 1.0])
    buf = np.zeros(2, np.float32)
    assert np.exp(t, out=buf) is buf
    np.testing.assert_allclose(buf, np.exp([0.0, 1.0]), rtol=1e-6)
    with pytest.raises(TypeError, match="drop the result's gradient"):
        np.exp(lucid.tensor([0.0], requires_grad=True), out=np.zeros(1, np.float32))


def test_ufunc_where_with_out():
    t = lucid.tensor([1.0, 2.0, 3.0])
    out = lucid.full((3,), -1.0)
    np.multiply(t, 10.0, out=out, where=np.array([True, False, True]))
    np.testing.assert_array_equal(out.numpy(), [10.0, -1.0, 30.0])
    with pytest.raises(TypeError, match="where= needs out="):
        np.exp(t, where=np.array([True, False, True]))


def test_ufunc_dtype_argument():
    t = lucid.tensor([1.0, 2.0])
    assert np.exp(t, dtype=np.float64).dtype == lucid.float64


def test_ufunc_reduce_and_accumulate(rng):
    x = rng.uniform(0.5, 2, size=(3, 4))
    t = lucid.tensor(x, requires_grad=True)
    for uf, kw in ((np.add, {}), (np.add, {"axis": 1}), (np.multiply, {}), (np.maximum, {}),
                   (np.minimum, {"axis": None}), (np.logaddexp, {"axis": 1, "keepdims": True})):
        out = uf.reduce(t, **kw)
        np.testing.assert_allclose(out.detach().numpy(), uf.reduce(x, **kw), rtol=1e-12)
    for uf in (np.add, np.maximum, np.minimum, np.logaddexp):
        out = uf.accumulate(t, axis=1)
        np.testing.assert_allclose(out.detach().numpy(), uf.accumulate(x, axis=1), rtol=1e-12)
    (g,) = lucid.autograd.grad(np.maximum.accumulate(t).sum(), t)
    np.testing.assert_allclose(g.numpy(), _fd_grad(lambda v: np.maximum.accumulate(v).sum(), x),
                               rtol=1e-6)
    (g,) = lucid.autograd.grad(np.multiply.accumulate(t).sum(), t)
    np.testing.assert_allclose(g.numpy(), _fd_grad(lambda v: np.multiply.accumulate(v).sum(), x),
                               rtol=1e-6)


def test_unsupported_ufuncs_and_methods_name_themselves():
    t = lucid.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="spacing"):
        np.spacing(t)
    with pytest.raises(TypeError, match="np.add.outer"):
        np.add.outer(t, t)
    with pytest.raises(TypeError, match="np.subtract.reduce"):
        np.subtract.reduce(t)
    with pytest.raises(TypeError, match="initial"):
        np.add.reduce(t, initial=1.0)


# -- __array_function__ ------------------------------------------------------------------------

X = np.random.default_rng(7).uniform(0.5, 2.0, size=(3, 4))

FUNCS = [  # (label, f(np_namespace_or_ndarray...)); each runs on X and on a tensor of X
    ("sum", lambda a: np.sum(a)), ("sum_axis", lambda a: np.sum(a, axis=0)),
    ("sum_keep", lambda a: np.sum(a, axis=(0, 1), keepdims=True)),
    ("mean", lambda a: np.mean(a, axis=1)), ("prod", lambda a: np.prod(a, axis=1)),
    ("max", lambda a: np.max(a, axis=0)), ("amin", lambda a: np.amin(a)),
    ("ptp", lambda a: np.ptp(a, axis=1)),
    ("var", lambda a: np.var(a)), ("var_ddof", lambda a: np.var(a, axis=0, ddof=1)),
    ("std", lambda a: np.std(a, axis=1, keepdims=True)),
    ("cumsum", lambda a: np.cumsum(a, axis=1)), ("cumsum_flat", lambda a: np.cumsum(a)),
    ("cumprod", lambda a: np.cumprod(a, axis=0)),
    ("average", lambda a: np.average(a, axis=1, weights=np.arange(1.0, 5.0))),
    ("reshape", lambda a: np.reshape(a, (4, 3)) * np.arange(3.0)),
    ("ravel", lambda a: np.ravel(a) * np.arange(12.0)),
    ("transpose", lambda a: np.transpose(a) * np.arange(3.0)),
    ("swapaxes", lambda a: np.swapaxes(a[None], 0, 2) * np.arange(3.0)),
    ("moveaxis", lambda a: np.moveaxis(a[None], 0, 2) * 2),
    ("squeeze", lambda a: np.squeeze(a[None], axis=0) * 2),
    ("expand_dims", lambda a: np.expand_dims(a, (0, 2)) * 2),
    ("concatenate", lambda a: np.concatenate([a, a * 2], axis=1) * np.arange(8.0)),
    ("concatenate_none", lambda a: np.concatenate([a, a], axis=None) * np.arange(24.0)),
    ("stack", lambda a: np.stack([a, a ** 2], axis=-1) * np.arange(2.0)),
    ("vstack", lambda a: np.vstack([a, a[0]]) * 3),
    ("hstack", lambda a: np.hstack([a, a]) * np.arange(8.0)),
    ("split", lambda a: np.split(a, 2, axis=1)[1] * 3),
    ("array_split", lambda a: np.array_split(a, [1], axis=0)[1] ** 2),
    ("flip", lambda a: np.flip(a, axis=1) * np.arange(4.0)),
    ("roll", lambda a: np.roll(a, 1, axis=0) * np.arange(3.0)[:, None]),
    ("tile", lambda a: np.tile(a, (1, 2)) * np.arange(8.0)),
    ("broadcast_to", lambda a: np.broadcast_to(a[0], (2, 4)) * np.arange(8.0).reshape(2, 4)),
    ("where", lambda a: np.where(X > 1, a, a ** 2)),
    ("clip", lambda a: np.clip(a, 0.8, 1.5)),
    ("dot", lambda a: np.dot(a, np.arange(4.0))), ("matmul", lambda a: np.matmul(a, a.T)),
    ("dot2", lambda a: np.dot(a.T, a)), ("inner", lambda a: np.inner(a[0], a[1])),
    ("outer", lambda a: np.outer(a[0], a[1])),
    ("norm", lambda a: np.linalg.norm(a)), ("norm_axis", lambda a: np.linalg.norm(a, axis=1)),
    ("norm_ord1", lambda a: np.linalg.norm(a[0], ord=1)),
    ("round", lambda a: np.round(a, 1) + a), ("diff", lambda a: np.diff(a, axis=1) ** 2),
    ("diff2", lambda a: np.diff(a, n=2) ** 2),
    ("take_along_axis", lambda a: np.take_along_axis(a, np.argsort(X, axis=1), axis=1)
     * np.arange(4.0)),
    ("pad", lambda a: np.pad(a, ((1, 0), (0, 2))) * np.arange(6.0)),
    ("pad_edge", lambda a: np.pad(a, 1, mode="edge") * np.arange(6.0)),
    ("copy", lambda a: np.copy(a) * 2), ("zeros_like", lambda a: np.zeros_like(a) + a),
    ("full_like", lambda a: np.full_like(a, 3.0) * a),
    ("sort", lambda a: np.sort(a, axis=0) * np.arange(4.0)),
    ("sort_flat", lambda a: np.sort(a, axis=None) * np.arange(12.0)),
    ("median", lambda a: np.median(a)), ("median_even", lambda a: np.median(a, axis=1)),
    ("median_axes", lambda a: np.median(a[None], axis=(0, 2), keepdims=True)),
    ("quantile", lambda a: np.quantile(a, [0.2, 0.7], axis=0)),
    ("quantile_lower", lambda a: np.quantile(a, 0.4, axis=1, method="lower")),
    ("percentile", lambda a: np.percentile(a, 30, keepdims=True)),
    ("diag", lambda a: np.diag(a[:, :3]) * np.arange(3.0)), ("diag_v", lambda a: np.diag(a[0], 1)),
    ("diagonal", lambda a: np.diagonal(a, 1)), ("trace", lambda a: np.trace(a[:, :3] * a[:, 1:])),
    ("tril", lambda a: np.tril(a, -1) * 2), ("triu", lambda a: np.triu(a, 1) * 2),
    ("kron", lambda a: np.kron(a[:2, :2], a[1:, 2:])),
    ("tensordot", lambda a: np.tensordot(a, a, axes=([1], [1]))),
    ("einsum", lambda a: np.einsum("ij,kj->ik", a, a ** 2)),
    ("einsum_trace", lambda a: np.einsum("ii", a[:, :3])),
    ("cross", lambda a: np.cross(a[:, :3], a[:, 1:])),
    ("repeat", lambda a: np.repeat(a, 2, axis=1) * np.arange(8.0)),
    ("repeat_flat", lambda a: np.repeat(a, [1, 0, 2], axis=0) ** 2),
    ("sinc", lambda a: np.sinc(a)), ("i0", lambda a: np.i0(a)),
    ("where_nonzero", lambda a: a[np.where(a > 1)] ** 2),
    ("nonzero", lambda a: a[np.nonzero(a < 1)] * 3),
]

def _rebuild_svd(r):
    return (r.U * r.S) @ r.Vh


def _rebuild_qr(r):
    return r.Q @ r.R


LINALG_X = np.random.default_rng(8).uniform(-1, 1, size=(3, 3)) + 3 * np.eye(3)
SPD = LINALG_X @ LINALG_X.T
RHS = np.random.default_rng(9).uniform(-1, 1, size=(3, 2))
LINALG = [  # (label, f(a)) on the well-conditioned LINALG_X
    ("det", lambda a: np.linalg.det(a)), ("inv", lambda a: np.linalg.inv(a)),
    ("slogdet", lambda a: np.linalg.slogdet(a)[1]),
    ("solve_vec", lambda a: np.linalg.solve(a, RHS[:, 0])),
    ("solve_mat", lambda a: np.linalg.solve(a, RHS)),
    ("solve_batch", lambda a: np.linalg.solve(np.stack([a, a.T]), RHS.T[:, :, None] * 1.0)),
    ("cholesky", lambda a: np.linalg.cholesky(a @ a.T)),
    ("eigvalsh", lambda a: np.linalg.eigvalsh(a @ a.T)),
    ("eigh_values", lambda a: np.linalg.eigh(a + a.T).eigenvalues),
    ("svd_values", lambda a: np.linalg.svd(a, compute_uv=False)),
    ("svd_usv", lambda a: _rebuild_svd(np.linalg.svd(a))),
    ("qr_rebuild", lambda a: _rebuild_qr(np.linalg.qr(a))),
    ("pinv", lambda a: np.linalg.pinv(a[:, :2])),
    ("lstsq", lambda a: np.linalg.lstsq(a[:, :2], RHS[:, 0])[0]),
    ("lstsq_resid", lambda a: np.linalg.lstsq(a[:, :2], RHS)[1]),
    ("matrix_power", lambda a: np.linalg.matrix_power(a, 3)),
    ("multi_dot", lambda a: np.linalg.multi_dot([a, a.T, a])),
    ("norm_fro", lambda a: np.linalg.norm(a, "fro")),
]
if hasattr(np.linalg, "svdvals"):          # NumPy 2's array-API additions
    LINALG += [
        ("svdvals", lambda a: np.linalg.svdvals(a)),
        ("matrix_norm", lambda a: np.linalg.matrix_norm(a, keepdims=True)),
        ("vector_norm", lambda a: np.linalg.vector_norm(a, axis=0, ord=3)),
        ("linalg_cross", lambda a: np.linalg.cross(a, a ** 2)),
        ("vecdot", lambda a: np.linalg.vecdot(a, a.T, axis=0)),
        ("linalg_trace", lambda a: np.linalg.trace(a, offset=1)),
        ("linalg_diagonal", lambda a: np.linalg.diagonal(a)),
        ("linalg_tensordot", lambda a: np.linalg.tensordot(a, a, axes=1)),
        ("linalg_outer", lambda a: np.linalg.outer(a[0], a[1])),
        ("linalg_matmul", lambda a: np.linalg.matmul(a, a)),
    ]


@pytest.mark.parametrize("label,f", LINALG, ids=[f[0] for f in LINALG])
def test_numpy_linalg_value_and_gradient(label, f):
    t = lucid.tensor(LINALG_X, requires_grad=True)
    out = f(t)
    assert isinstance(out, lucid.Tensor), type(out)
    np.testing.assert_allclose(out.detach().numpy(), f(LINALG_X), rtol=1e-10, atol=1e-12)
    w = np.random.default_rng(1).uniform(0.5, 1.5, size=out.shape)     # a generic direction
    (g,) = lucid.autograd.grad(lucid.sum(out * lucid.tensor(w)), t)
    np.testing.assert_allclose(g.numpy(), _fd_grad(lambda v: np.sum(f(v) * w), LINALG_X),
                               rtol=1e-5, atol=1e-7)


def test_numpy_linalg_non_tensor_parts():
    a = LINALG_X[:, :2]
    t = lucid.tensor(a)
    for b in (RHS[:, 0], RHS):
        x, resid, rank, s = np.linalg.lstsq(t, b)
        want = np.linalg.lstsq(a, b)
        np.testing.assert_allclose(x.numpy(), want[0], rtol=1e-12)
        np.testing.assert_allclose(resid.numpy(), want[1], rtol=1e-10)
        assert rank == want[2]
        np.testing.assert_allclose(s.numpy(), want[3], rtol=1e-12)
    square = lucid.tensor(np.ones((3, 3)))
    assert np.linalg.lstsq(square, np.ones(3))[1].shape == (0,)    # rank-deficient: none
    low = np.outer(np.arange(1.0, 4.0), np.arange(1.0, 4.0))
    assert int(np.linalg.matrix_rank(lucid.tensor(low))) == np.linalg.matrix_rank(low)
    assert int(np.linalg.matrix_rank(lucid.tensor(SPD), tol=1e9)) == 0
    sign, _ = np.linalg.slogdet(lucid.tensor(-SPD))
    assert float(sign) == np.linalg.slogdet(-SPD)[0]
    with pytest.raises(TypeError, match="hermitian"):
        np.linalg.svd(lucid.tensor(SPD), hermitian=True)
    np.testing.assert_allclose(np.abs(np.linalg.qr(lucid.tensor(SPD), mode="r")),
                               np.abs(np.linalg.qr(SPD, mode="r")), rtol=1e-10)
    with pytest.raises(TypeError, match="raw"):
        np.linalg.qr(lucid.tensor(SPD), mode="raw")


def test_searching_and_set_functions(rng):
    x = np.array([[3.0, np.nan, 1.0], [1.0, 3.0, 0.0]])
    t = lucid.tensor(x)
    for args in ({}, {"return_inverse": True}, {"return_counts": True},
                 {"return_inverse": True, "return_counts": True}, {"axis": 1}):
        got, want = np.unique(t, **args), np.unique(x, **args)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(g.numpy(), w)
    with pytest.raises(TypeError, match="return_index"):
        np.unique(t, return_index=True)
    srt = np.array([0.5, 1.0, 1.0, 2.0])
    v = rng.uniform(0, 3, size=5)
    for side in ("left", "right"):
        np.testing.assert_array_equal(np.searchsorted(lucid.tensor(srt), v, side=side).numpy(),
                                      np.searchsorted(srt, v, side=side))
    np.testing.assert_array_equal(np.argwhere(t > 1).numpy(), np.argwhere(x > 1))
    for got, want in zip(np.nonzero(t), np.nonzero(x)):
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(np.argsort(lucid.tensor([3.0, 1.0, 2.0])).numpy(), [1, 2, 0])
    np.testing.assert_array_equal(np.argsort(t, axis=None, kind="stable").numpy(),
                                  np.argsort(x, axis=None, kind="stable"))
    for indexing in ("xy", "ij"):
        got = np.meshgrid(lucid.tensor([1.0, 2.0]), np.arange(3.0), indexing=indexing)
        for g, w in zip(got, np.meshgrid([1.0, 2.0], np.arange(3.0), indexing=indexing)):
            np.testing.assert_array_equal(g.numpy(), w)
    with pytest.raises(TypeError, match="sparse"):
        np.meshgrid(lucid.ones(2), lucid.ones(2), sparse=True)


def test_numpy_file_writers_take_tensors(tmp_path):
    t = lucid.tensor([[1.5, -2.0]], dtype=lucid.float64)
    np.save(tmp_path / "a.npy", t)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), t.numpy())
    np.savez(tmp_path / "b.npz", t, named=t)
    with np.load(tmp_path / "b.npz") as z:
        np.testing.assert_array_equal(z["arr_0"], t.numpy())
        np.testing.assert_array_equal(z["named"], t.numpy())
    np.savetxt(tmp_path / "c.txt", t)
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "c.txt", ndmin=2), t.numpy())
    with pytest.raises(lucid.LucidError, match="detach"):      # its values, not its graph
        np.save(tmp_path / "d.npy", lucid.tensor([1.0], requires_grad=True))


@pytest.mark.parametrize("label,f", FUNCS, ids=[f[0] for f in FUNCS])
def test_numpy_function_value_and_gradient(label, f):
    t = lucid.tensor(X, requires_grad=True)
    out = f(t)
    assert isinstance(out, lucid.Tensor), type(out)
    np.testing.assert_allclose(out.detach().numpy(), f(X), rtol=1e-12, atol=1e-12)
    (g,) = lucid.autograd.grad(out.sum(), t)
    np.testing.assert_allclose(g.numpy(), _fd_grad(lambda v: np.sum(f(v)), X), rtol=1e-5, atol=1e-7)


def test_functions_with_non_tensor_results():
    t = lucid.tensor(X)
    assert np.shape(t) == X.shape and np.ndim(t) == 2 and np.size(t) == 12 and np.size(t, 1) == 4
    assert np.argmax(t, axis=1).numpy().tolist() == np.argmax(X, axis=1).tolist()
    assert int(np.argmin(t)) == int(np.argmin(X))
    assert bool(np.all(t > 0)) and not bool(np.any(t > 5))
    assert int(np.count_nonzero(t > 1)) == int(np.count_nonzero(X > 1))
    assert np.allclose(t, X) and np.array_equal(t, X) and not np.array_equal(t, X + 1)
    np.testing.assert_array_equal(np.isclose(t, X + 1e-9).numpy(), np.isclose(X, X + 1e-9))
    assert np.result_type(t, 1.0) == np.float64
    assert np.nan_to_num(lucid.tensor([np.nan, 1.0])).numpy().tolist() == [0.0, 1.0]


def test_float32_stays_float32_through_functions():
    t = lucid.ones((2, 3))
    for f in (np.sum, np.mean, np.var, lambda a: np.clip(a, 0.0, np.float64(0.5)),
              lambda a: np.where(a > 0, a, np.float64(0.0))):
        assert f(t).dtype == lucid.float32


def test_unimplemented_numpy_function_raises_naming_it():
    t = lucid.tensor([3.0, 1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"np\.nanmedian"):
        np.nanmedian(t)
    with pytest.raises(TypeError, match=r"np\.histogram"):
        np.histogram(t)
    with pytest.raises(TypeError, match="linalg.*eig"):
        np.linalg.eig(lucid.eye(2))
    with pytest.raises(TypeError, match="method='weibull'"):
        np.quantile(t, 0.5, method="weibull")
    with pytest.raises(TypeError, match=r"np\.sum: .*where"):
        np.sum(t, where=np.array([True, False, True]))


def test_function_table_covers_what_the_issue_names():
    for f in (np.sum, np.mean, np.prod, np.max, np.min, np.var, np.std, np.reshape,
              np.transpose, np.concatenate, np.stack, np.where, np.dot, np.clip):
        assert f in _interop.FUNCTIONS, f
    for uf in (np.exp, np.log, np.sqrt, np.square, np.absolute, np.negative, np.add,
               np.subtract, np.multiply, np.true_divide, np.power, np.maximum, np.minimum,
               np.arctan2, np.hypot, np.logaddexp, np.matmul):
        assert uf in _interop.UFUNCS, uf


def _numpy_twin(name, namespace):
    f = getattr(namespace, name, None)
    return f if callable(f) and not isinstance(f, type) else None


# lucid names that NumPy also has but for which the NumPy function is not lucid's op:
# creation from data or shapes (no tensor argument to dispatch on) and file I/O by name.
NOT_DISPATCHED = {"arange", "empty", "eye", "full", "linspace", "ones", "zeros", "load",
                  "save", "from_dlpack",
                  # same name, another function: np.select(condlist, choicelist) picks
                  # among arrays, lucid.select(input, dim, index) is torch's slicing view
                  "select"}


def test_every_numpy_function_lucid_implements_is_routed():
    tables = set(_interop.UFUNCS) | set(_interop.FUNCTIONS)
    missing = [n for n in dir(lucid) if not n.startswith("_") and n not in NOT_DISPATCHED
               and _numpy_twin(n, np) is not None and _numpy_twin(n, np) not in tables]
    missing += ["linalg." + n for n in dir(lucid.linalg) if not n.startswith("_")
                and _numpy_twin(n, np.linalg) is not None
                and _numpy_twin(n, np.linalg) not in tables]
    assert not missing


# -- torch as an independent reference for gradients -----------------------------------------

def test_gradients_match_torch(torch):
    x = np.random.default_rng(3).uniform(0.5, 2, size=(4, 5))
    a = np.random.default_rng(4).uniform(-1, 1, size=(5,))

    def f(m, v):       # m: numpy (for lucid) or torch
        if m is np:
            return np.sum(np.logaddexp(v, a) * np.sqrt(v), axis=1).var()
        return (torch.logaddexp(v, torch.from_numpy(a)) * torch.sqrt(v)).sum(1).var()

    t = lucid.tensor(x, requires_grad=True)
    (g,) = lucid.autograd.grad(f(np, t), t)
    tt = torch.tensor(x, requires_grad=True)
    f(torch, tt).backward()
    np.testing.assert_allclose(g.numpy(), tt.grad.numpy(), rtol=1e-10)


# -- lucid.differentiable and lucid.numpy ---------------------------------------------------

def _gaussian_nll(params, data):
    """Plain NumPy: the negative log-likelihood of data under N(mu, exp(log_sigma)^2)."""
    mu, log_sigma = params[0], params[1]
    sigma = np.exp(log_sigma)
    z = (np.asarray(data) - mu) / sigma
    return np.sum(0.5 * z ** 2 + log_sigma + 0.5 * np.log(2 * np.pi))


def _springs(x):
    return np.array([x[1] - x[0], x[2] - x[1]])


def _chain_energy(x):
    """Plain NumPy, with np.array of parts (in a helper) and np.zeros written into."""
    springs = _springs(x)
    y = np.zeros(3)
    y[0] = x[0] ** 2
    return np.sum(springs ** 2) + np.sum(y) + np.linalg.norm(x)


def test_differentiable_gaussian_nll(rng):
    data = rng.normal(1.5, 0.7, size=50)
    f = lucid.differentiable(_gaussian_nll)
    p = np.array([0.3, -0.2])
    t = lucid.tensor(p, requires_grad=True)
    val = f(t, data)
    np.testing.assert_allclose(float(val), _gaussian_nll(p, data), rtol=1e-12)
    (g,) = lucid.autograd.grad(val, t)
    np.testing.assert_allclose(g.numpy(), _fd_grad(lambda v: _gaussian_nll(v, data), p), rtol=1e-6)
    assert _gaussian_nll(p, data) == pytest.approx(float(val))    # the original is untouched
    assert np is __import__("numpy") and isinstance(_springs(np.ones(3)), np.ndarray)


def test_differentiable_with_array_and_item_assignment():
    f = lucid.differentiable(_chain_energy)
    x = np.array([0.3, -1.2, 2.0])
    t = lucid.tensor(x, requires_grad=True)
    val = f(t)
    np.testing.assert_allclose(float(val), _chain_energy(x), rtol=1e-12)
    (g,) = lucid.autograd.grad(val, t)
    np.testing.assert_allclose(g.numpy(), _fd_grad(_chain_energy, x), rtol=1e-6)


def test_differentiable_second_derivative():
    f = lucid.differentiable(lambda x: np.sum(np.sin(x) * x))
    t = lucid.tensor([0.4, 1.1], dtype=lucid.float64, requires_grad=True)
    (g,) = lucid.autograd.grad(f(t), t, create_graph=True)
    (h,) = lucid.autograd.grad(g.sum(), t)
    x = np.array([0.4, 1.1])
    np.testing.assert_allclose(h.numpy(), 2 * np.cos(x) - x * np.sin(x), rtol=1e-12)


def test_lucid_numpy_namespace():
    import lucid.numpy as lnp
    t = lucid.tensor([0.5, 1.0], dtype=lucid.float64, requires_grad=True)
    out = lnp.sum(lnp.arctan2(t, 2.0) * lnp.linspace(0, 1, 2))
    (g,) = lucid.autograd.grad(out, t)
    x = np.array([0.5, 1.0])
    np.testing.assert_allclose(g.numpy(), 2 / (4 + x ** 2) * np.linspace(0, 1, 2), rtol=1e-12)
    assert lnp.concatenate is np.concatenate and lnp.exp is np.exp and lnp.pi == math.pi
    assert isinstance(lnp.zeros(3), lucid.Tensor) and lnp.zeros(3).dtype == lucid.float64
    assert lnp.asarray(t) is t
    a = np.arange(3.0)
    assert np.shares_memory(lnp.asarray(a), a)
    with pytest.raises(AttributeError, match="numpy.nanmedian"):
        lnp.nanmedian
    with pytest.raises(AttributeError, match="numpy.linalg.eig"):
        lnp.linalg.eig
    assert lnp.linalg.inv is np.linalg.inv and "det" in dir(lnp.linalg)
    assert not hasattr(lnp, "det")        # numpy.linalg's names stay in linalg
    assert lnp.exp(1.0) == np.exp(1.0)         # plain data stays plain NumPy


def test_without_the_decorator_np_array_of_tensors_refuses_to_drop_the_graph():
    t = lucid.tensor([0.3, -1.2, 2.0], requires_grad=True)
    with pytest.raises(lucid.LucidError, match="detach"):
        _chain_energy(t)


@pytest.mark.parametrize("shape", [(), (0,), (2, 0), (1, 3)])
def test_edge_shapes_through_numpy(shape):
    x = np.random.default_rng(1).uniform(0.5, 1.5, size=shape)
    t = lucid.tensor(x, requires_grad=True)
    out = np.log(t) * np.float64(2.0) + np.ones(shape)
    np.testing.assert_allclose(out.detach().numpy(), np.log(x) * 2 + 1, rtol=1e-12)
    assert out.shape == x.shape
    (g,) = lucid.autograd.grad(np.sum(out), t)
    np.testing.assert_allclose(g.numpy(), 2 / x, rtol=1e-12)


def test_scalar_on_the_left_and_special_values():
    t = lucid.tensor([0.0, np.inf, -np.inf, np.nan])
    r = np.float64(2.0) ** t
    assert r.dtype == lucid.float32
    np.testing.assert_array_equal(r.numpy(), np.float32(2.0) ** t.numpy())
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(np.log(lucid.tensor([0.0, -0.0])).numpy(), [-np.inf, -np.inf])
    np.testing.assert_array_equal(np.maximum(t, 1.0).numpy()[:3], [1.0, np.inf, 1.0])
    assert np.isnan(np.maximum(t, 1.0).numpy()[3])


def test_non_contiguous_tensor_through_ufuncs(rng):
    x = rng.uniform(-1, 1, size=(4, 6))
    t = lucid.tensor(x, requires_grad=True)
    view = t.T[::2]
    out = np.tanh(view) * np.arange(4.0)
    np.testing.assert_allclose(out.detach().numpy(), np.tanh(x.T[::2]) * np.arange(4.0), rtol=1e-12)
    (g,) = lucid.autograd.grad(out.sum(), t)
    expect = np.zeros_like(x)
    expect.T[::2] = (1 - np.tanh(x.T[::2]) ** 2) * np.arange(4.0)
    np.testing.assert_allclose(g.numpy(), expect, rtol=1e-12)
