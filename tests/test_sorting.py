"""Sorting, selection, scatter and the elementwise helpers against torch: values (and
indices), gradients with random output weights, gradcheck and gradgradcheck. Each case is
written once for both namespaces; float64 inputs require grad, integer/bool ones don't."""
import numpy as np
import pytest

import lucid

torch = pytest.importorskip("torch")

R = np.random.default_rng(0)
X34 = R.standard_normal((3, 4))
X5 = np.array([0.3, -1.2, 2.5, 0.7, -0.1])
I34 = np.array([[0, 2, 1, 2], [1, 0, 0, 2], [2, 1, 0, 1]])
M34 = R.standard_normal((3, 4)) > 0


def _vals(r):
    """Floating outputs (the differentiable ones) and the others (indices, masks)."""
    return r if isinstance(r, tuple) else (r,)


# name, fn(M, *xs), inputs, gradgradcheck?
CASES = [
    ("sort", lambda M, x: M.sort(x, 1), [X34], True),
    ("sort_desc", lambda M, x: M.sort(x, 0, descending=True), [X34], False),
    ("sort_method", lambda M, x: x.sort(dim=-1, stable=True), [np.array([2.0, 1.0, 2.0, 0.5])], False),
    ("argsort", lambda M, x: M.argsort(x, 1, descending=True) * 1, [X34], False),
    ("topk", lambda M, x: M.topk(x, 2, 1), [X34], True),
    ("topk_small", lambda M, x: M.topk(x, 3, 0, largest=False), [X34], False),
    ("kthvalue", lambda M, x: M.kthvalue(x, 2, 1), [X34], True),
    ("kthvalue_keep", lambda M, x: M.kthvalue(x, 3, 0, keepdim=True), [X34], False),
    ("median_all", lambda M, x: M.median(x), [X34], True),
    ("median_dim", lambda M, x: M.median(x, 1), [X34], False),
    ("median_keep", lambda M, x: M.median(x, 0, keepdim=True), [X34], False),
    ("quantile", lambda M, x: M.quantile(x, 0.3), [X34], True),
    ("quantile_dim", lambda M, x: M.quantile(x, M.tensor([0.1, 0.5, 1.0], dtype=M.float64), dim=1),
     [X34], True),
    ("quantile_keep", lambda M, x: M.quantile(x, 0.75, dim=0, keepdim=True), [X34], False),
    ("quantile_lower", lambda M, x: M.quantile(x, 0.4, dim=1, interpolation="lower"), [X34], False),
    ("quantile_higher", lambda M, x: M.quantile(x, 0.4, interpolation="higher"), [X34], False),
    ("quantile_mid", lambda M, x: M.quantile(x, 0.4, 1, interpolation="midpoint"), [X34], False),
    ("quantile_nearest", lambda M, x: M.quantile(x, 0.5, 1, interpolation="nearest"), [X34], False),
    ("masked_select", lambda M, x, m: M.masked_select(x, m), [X34, M34], True),
    ("masked_select_bcast", lambda M, x, m: M.masked_select(x, m), [X5[:4], M34], False),
    ("masked_fill", lambda M, x, m: M.masked_fill(x, m, -2.5), [X34, M34], True),
    ("masked_fill_bcast", lambda M, x, m: x.masked_fill(m, 1.0), [X34, M34[0]], False),
    ("masked_fill_tensor", lambda M, x, v, m: M.masked_fill(x, m, v.sum()), [X34, X5, M34], False),
    ("cummax", lambda M, x: M.cummax(x, 1), [X34], True),
    ("cummin", lambda M, x: M.cummin(x, 0), [X34], False),
    ("cummax_ties", lambda M, x: M.cummax(x, 0), [np.array([1.0, 3.0, 3.0, 2.0, 3.0])], False),
    ("logcumsumexp", lambda M, x: M.logcumsumexp(x, 1), [X34], True),
    ("logcumsumexp0", lambda M, x: M.logcumsumexp(x, 0), [X34 * 50], False),
    ("scatter", lambda M, x, s, i: M.scatter(x, 1, i, s),
     [X34, R.standard_normal((3, 4)), np.array([[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 3, 2]])], True),
    ("scatter_value", lambda M, x, i: M.scatter(x, 0, i, 1.5), [X34, np.array([[2, 0, 1, 0]])], False),
    ("scatter_small_src", lambda M, x, s, i: x.scatter(1, i, s.detach()),
     [X34, R.standard_normal((3, 5)), np.array([[0, 3], [1, 2], [2, 0]])], False),
    ("scatter_add_reduce", lambda M, x, s, i: M.scatter(x.detach(), 1, i, s.detach(), reduce="add"),
     [X34, R.standard_normal((3, 4)), I34], False),
    ("scatter_reduce_sum", lambda M, x, s, i: M.scatter_reduce(x, 1, i, s, "sum"),
     [X34, R.standard_normal((3, 4)), I34], True),
    ("scatter_reduce_sum_noself", lambda M, x, s, i: M.scatter_reduce(x, 1, i, s, "sum", include_self=False),
     [X34, R.standard_normal((3, 4)), I34], False),
    ("scatter_reduce_mean", lambda M, x, s, i: M.scatter_reduce(x, 1, i, s, "mean"),
     [X34, R.standard_normal((3, 4)), I34], True),
    ("scatter_reduce_mean_noself", lambda M, x, s, i: M.scatter_reduce(x, 1, i, s, "mean", include_self=False),
     [X34, R.standard_normal((3, 4)), I34], False),
    ("scatter_reduce_amax", lambda M, x, s, i: M.scatter_reduce(x, 1, i, s, "amax"),
     [X34, R.standard_normal((3, 4)), I34], False),
    ("scatter_reduce_amin_noself", lambda M, x, s, i: M.scatter_reduce(x, 1, i, s, "amin", include_self=False),
     [X34, R.standard_normal((3, 4)), I34], False),
    ("scatter_reduce_prod", lambda M, x, s, i: M.scatter_reduce(x, 1, i, s, "prod"),
     [X34, R.standard_normal((3, 4)), I34], False),
    ("take_along_dim", lambda M, x, i: M.take_along_dim(x, i, 1), [X34, I34[:, :3]], True),
    ("take_along_dim_bcast", lambda M, x, i: M.take_along_dim(x, i, 0), [X34, I34[:1, :]], False),
    ("take_along_dim_flat", lambda M, x, i: M.take_along_dim(x, i), [X34, np.array([0, 11, 5])], False),
    ("index_add", lambda M, x, s, i: M.index_add(x, 0, i, s, alpha=2.0),
     [X34, R.standard_normal((4, 4)), np.array([0, 2, 0, 1])], True),
    ("index_add_dim1", lambda M, x, s, i: x.index_add(1, i, s), [X34, R.standard_normal((3, 2)), np.array([3, 3])], False),
    ("repeat_interleave", lambda M, x: M.repeat_interleave(x, 2), [X34], True),
    ("repeat_interleave_dim", lambda M, x, r: M.repeat_interleave(x, r, dim=1), [X34, np.array([1, 0, 3, 2])], False),
    ("repeat_interleave_idx", lambda M, r: M.repeat_interleave(r), [np.array([2, 0, 3])], False),
    ("unflatten", lambda M, x: M.unflatten(x, 1, (2, -1)), [X34], False),
    ("unfold", lambda M, x: x.unfold(1, 2, 1), [X34], True),
    ("unfold_step", lambda M, x: x.unfold(0, 2, 2), [R.standard_normal((5, 2))], False),
    ("meshgrid_ij", lambda M, a, b: M.meshgrid(a, b, indexing="ij"), [X5[:3], X5], True),
    ("meshgrid_xy", lambda M, a, b, c: M.meshgrid(a, b, c, indexing="xy"), [X5[:2], X5[:3], X5], False),
    ("lerp", lambda M, a, b: M.lerp(a, b, 0.3), [X34, X34[::-1].copy()], True),
    ("lerp_hi", lambda M, a, b: M.lerp(a, b, 0.8), [X34, X34[::-1].copy()], False),
    ("lerp_tensor", lambda M, a, b, w: M.lerp(a, b, w), [X34, X34[::-1].copy(), R.uniform(0, 1, (3, 4))], True),
    ("copysign", lambda M, a, b: M.copysign(a, b), [X34, X34[::-1].copy()], True),
    ("copysign_scalar", lambda M, a: M.copysign(a, -0.0), [X34], False),
    ("clamp_tensor", lambda M, x, lo, hi: M.clamp(x, lo, hi), [X34, -np.abs(X34[0]) * 0.5 - 0.05, np.abs(X34[:, :1]) + 0.1], True),
    ("isclose", lambda M, a, b: M.isclose(a, b, rtol=1e-2), [X34, X34 * 1.005], False),
    ("nonzero", lambda M, m: M.nonzero(m), [M34], False),
    ("nonzero_tuple", lambda M, m: M.nonzero(m, as_tuple=True), [M34], False),
    ("unique", lambda M, i: M.unique(i, return_inverse=True, return_counts=True), [I34], False),
    ("unique_dim", lambda M, i: M.unique(i, dim=1), [np.array([[1, 2, 1], [3, 4, 3]])], False),
    ("unique_consecutive", lambda M, i: M.unique_consecutive(i, return_inverse=True, return_counts=True),
     [np.array([1, 1, 2, 2, 3, 1, 1, 2])], False),
    ("searchsorted", lambda M, s, v: M.searchsorted(s, v), [np.array([1.0, 3.0, 5.0, 7.0]), X34 * 4], False),
    ("searchsorted_right_2d", lambda M, s, v: M.searchsorted(s, v, right=True),
     [np.array([[1, 3, 5], [2, 4, 6]]), np.array([[3, 0], [6, 4]])], False),
    ("bucketize", lambda M, v, s: M.bucketize(v, s), [X34 * 4, np.array([-1.0, 0.0, 2.0])], False),
    ("floor_divide", lambda M, a, b: M.floor_divide(a, b), [np.array([5, -7, 7, -8]), np.array([2, 2, -3, -4])], False),
    ("floordiv_op", lambda M, a: (a.detach() // 0.7, a.detach() // 2, 3 // a.detach()), [X34], False),
    ("floordiv_int_float", lambda M, a: a // 2.5, [np.array([5, -7, 7], dtype=np.int32)], False),
    ("div_trunc", lambda M, a, b: M.div(a, b, rounding_mode="trunc"), [np.array([5, -7, 7, -8]), np.array([2, 2, -3, -4])], False),
    ("div_trunc_float", lambda M, a: a.div(0.7, rounding_mode="trunc"), [X34], False),
    ("div_floor_float", lambda M, a, b: M.div(a, b, rounding_mode="floor"), [X34, X34[::-1].copy()], False),
    ("mod", lambda M, a, b: (a % b, a % 2), [np.array([5, -7, 7, -8]), np.array([2, 2, -3, -4])], False),
    ("mod_float", lambda M, a: (a % 0.7, a % -0.7), [X34], False),
]


def _conv(M, arrs, grad):
    out = []
    for a in arrs:
        a = np.asarray(a)
        if M is lucid:
            t = lucid.tensor(a, dtype=lucid.float64 if a.dtype.kind == "f" else None)
        else:
            t = torch.tensor(a)
        if grad and a.dtype.kind == "f":
            t.requires_grad_(True)
        out.append(t)
    return out


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in _flat(x)]
    return [r]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(case):
    _name, fn, arrs, _ = case
    xl, xt = _conv(lucid, arrs, True), _conv(torch, arrs, True)
    ol, ot = _flat(fn(lucid, *xl)), _flat(fn(torch, *xt))
    assert len(ol) == len(ot)
    rng = np.random.default_rng(1)
    ll, lt_ = 0, 0
    for o, p in zip(ol, ot):
        assert tuple(o.shape) == tuple(p.shape), (o.shape, p.shape)
        pn = p.detach().numpy()
        on = o.detach().numpy() if o.requires_grad else o.numpy()
        assert on.dtype == pn.dtype or (on.dtype.kind == pn.dtype.kind), (on.dtype, pn.dtype)
        np.testing.assert_allclose(on, pn, rtol=1e-12, atol=1e-12)
        if p.requires_grad:
            w = rng.standard_normal(pn.shape)
            ll = ll + (o * lucid.tensor(w)).sum()
            lt_ = lt_ + (p * torch.tensor(w)).sum()
    if isinstance(lt_, torch.Tensor):
        ll.backward()
        lt_.backward()
        for a, b in zip(xl, xt):
            if b.requires_grad:
                gb = b.grad.numpy() if b.grad is not None else np.zeros(b.shape)
                ga = a.grad.numpy() if a.grad is not None else np.zeros(a.shape)
                np.testing.assert_allclose(ga, gb, rtol=1e-10, atol=1e-12)


def _diff_cases(pred):
    return [c for c in CASES if pred(c)]


@pytest.mark.parametrize("case", _diff_cases(lambda c: c[3]), ids=[c[0] for c in CASES if c[3]])
def test_gradcheck_and_gradgradcheck(case):
    _name, fn, arrs, _ = case
    xs = _conv(lucid, arrs, True)

    def f(*a):
        return tuple(t for t in _flat(fn(lucid, *a)) if t.is_floating_point())

    assert lucid.autograd.gradcheck(f, xs, atol=1e-6)
    assert lucid.autograd.gradgradcheck(f, xs, atol=1e-5)


def test_sort_nan_and_stability():
    a = np.array([2.0, np.nan, 1.0, 2.0, -np.inf])
    for desc in (False, True):
        vl, il = lucid.sort(lucid.tensor(a, dtype=lucid.float64), descending=desc, stable=True)
        vt, it = torch.sort(torch.tensor(a), descending=desc, stable=True)
        np.testing.assert_array_equal(vl.numpy(), vt.numpy())
        np.testing.assert_array_equal(il.numpy(), it.numpy())
    ml, mt = lucid.median(lucid.tensor(a)), torch.median(torch.tensor(a))
    assert np.isnan(ml.item()) and np.isnan(mt.item())
    assert np.isnan(lucid.quantile(lucid.tensor(a, dtype=lucid.float64), 0.5).item())


def test_logcumsumexp_stays_finite():
    a = np.array([-1000.0, 0.0, 1000.0, 1000.0])
    x = lucid.tensor(a, dtype=lucid.float64, requires_grad=True)
    y = lucid.logcumsumexp(x, 0)
    t = torch.tensor(a, requires_grad=True)
    yt = torch.logcumsumexp(t, 0)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-14)
    w = np.array([1.0, -2.0, 0.5, 3.0])
    (y * lucid.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-300)


def test_bitwise_ops_on_integers_as_torch():
    a = np.array([12, -7, 5, 0], dtype=np.int32)
    b = np.array([10, 3, -1, 7], dtype=np.int32)
    la, lb, ta, tb = lucid.tensor(a), lucid.tensor(b), torch.tensor(a), torch.tensor(b)
    for f in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x,
              lambda x, y: x << 2, lambda x, y: x >> 1, lambda x, y: x & 6, lambda x, y: 6 | x,
              lambda x, y: x << (y & 3), lambda x, y: 1 << (y & 3)):
        r, rt = f(la, lb), f(ta, tb)
        assert str(r.dtype).split(".")[-1] == str(rt.dtype).split(".")[-1]
        np.testing.assert_array_equal(r.numpy(), rt.numpy())
    assert (la & la).numpy().tolist() == a.tolist()          # was all True before
    lm, tm = lucid.tensor([True, False, True]), torch.tensor([True, False, True])
    for f in (lambda x: x & ~x, lambda x: x | False, lambda x: x ^ True):
        assert f(lm).dtype is lucid.bool_ and f(lm).numpy().tolist() == f(tm).numpy().tolist()
    li = lucid.tensor(np.array([3, 5], dtype=np.int64))
    assert (lm[:2] & li).numpy().tolist() == (tm[:2] & torch.tensor([3, 5])).numpy().tolist()
    with pytest.raises(TypeError):
        lucid.tensor([1.5]) & lucid.tensor([2.5])
    assert lucid.bitwise_and(la, lb).numpy().tolist() == torch.bitwise_and(ta, tb).tolist()


def test_integer_division_by_zero_raises():
    with pytest.raises(ZeroDivisionError):
        lucid.tensor([5, 7]) // 0
    assert np.isinf((lucid.tensor([1.5]) // 0).item())


def test_masked_fill_in_place_and_grad():
    x = lucid.tensor(X34, dtype=lucid.float64, requires_grad=True)
    h = x * 1.0
    h.masked_fill_(lucid.tensor(M34), 0.0)
    h.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), (~M34).astype(np.float64))
    assert np.array_equal(h.detach().numpy(), np.where(M34, 0.0, X34))


def test_vmap_of_sort_free_function():
    """Selection ops compose with the transforms (a Hessian through quantile-free sort)."""
    from lucid.autograd import functional as F
    x = lucid.tensor(X5, dtype=lucid.float64)
    H = F.hessian(lambda t: (lucid.sort(t).values ** 3 * lucid.arange(5, dtype=lucid.float64)).sum(), x)
    Ht = torch.autograd.functional.hessian(
        lambda t: (torch.sort(t).values ** 3 * torch.arange(5, dtype=torch.float64)).sum(), torch.tensor(X5))
    np.testing.assert_allclose(H.numpy(), Ht.numpy(), rtol=1e-12)


def test_in_place_scatter_variants():
    out = []
    src = np.random.default_rng(7).standard_normal((3, 4))
    for M, T in ((lucid, lambda a: lucid.tensor(a, dtype=lucid.float64, requires_grad=True)),
                 (torch, lambda a: torch.tensor(a, requires_grad=True))):
        x, s = T(X34), T(src)
        idx = M.tensor(I34)
        h = x * 1.0
        h.scatter_(1, M.tensor(np.array([[3, 1, 0, 2], [0, 1, 2, 3], [2, 3, 1, 0]])), s * 2)
        h.index_add_(0, M.tensor([2, 0]), s[:2])
        h.scatter_reduce_(1, idx, s, "amax")
        (h * h).sum().backward()
        out.append([h.detach().numpy(), x.grad.numpy(), s.grad.numpy()])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-12)
