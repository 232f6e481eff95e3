"""lucid.linalg and the matrix helpers against torch: values, gradients (random output
weights), gradcheck and gradgradcheck. One row per case; each case is a function of a
namespace (lucid or torch) and the inputs, written once for both."""
import numpy as np
import pytest

import lucid

torch = pytest.importorskip("torch")


def spd(M, a):
    n = a.shape[-1]
    return a @ a.mT + 3 * M.eye(n, dtype=M.float64)


def sym(M, a):
    return a + a.mT


# Losses that do not depend on the sign each singular/eigen vector happens to get.
def _eig_inv(w, v):
    return w, v * v


def _svd_inv(u, s, vh):
    return u * u, s, vh * vh


def _svd_uvh(u, s, vh):
    return u @ vh


def _qr_q(M, q, r):
    return q * M.sign(M.diagonal(r, 0, -2, -1)).unsqueeze(-2)


# name, fn(M, *xs), input shapes, gradgradcheck?
CASES = [
    ("inv", lambda M, a: M.linalg.inv(a + 3 * M.eye(3, dtype=M.float64)), [(2, 3, 3)], True),
    ("det", lambda M, a: M.linalg.det(a), [(2, 3, 3)], True),
    ("slogdet", lambda M, a: M.linalg.slogdet(a)[1], [(2, 3, 3)], True),
    ("slogdet_sign", lambda M, a: M.linalg.slogdet(a)[0] * M.linalg.slogdet(a)[1], [(3, 3)], False),
    ("solve", lambda M, a, b: M.linalg.solve(a + 3 * M.eye(3, dtype=M.float64), b),
     [(2, 3, 3), (2, 3, 2)], True),
    ("solve_vec", lambda M, a, b: M.linalg.solve(a + 3 * M.eye(3, dtype=M.float64), b),
     [(3, 3), (3,)], True),
    ("solve_bcast", lambda M, a, b: M.linalg.solve(a + 3 * M.eye(3, dtype=M.float64), b),
     [(2, 3, 3), (3, 2)], False),
    ("solve_right", lambda M, a, b: M.linalg.solve(a + 3 * M.eye(3, dtype=M.float64), b, left=False),
     [(3, 3), (2, 3)], False),
    ("cholesky", lambda M, a: M.linalg.cholesky(spd(M, a)), [(2, 3, 3)], True),
    ("cholesky_upper", lambda M, a: M.linalg.cholesky(spd(M, a), upper=True), [(3, 3)], True),
    ("qr", lambda M, a: tuple(t * t for t in M.linalg.qr(a)), [(4, 3)], True),
    ("qr_square", lambda M, a: tuple(t * t for t in M.linalg.qr(a)), [(2, 3, 3)], False),
    ("qr_wide", lambda M, a: tuple(t * t for t in M.linalg.qr(a)), [(2, 4)], True),
    ("qr_wide_batch", lambda M, a: tuple(t * t for t in M.linalg.qr(a)), [(2, 3, 5)], False),
    ("qr_q", lambda M, a: _qr_q(M, *M.linalg.qr(a)), [(4, 3)], False),
    ("eigh", lambda M, a: _eig_inv(*M.linalg.eigh(sym(M, a))), [(2, 3, 3)], True),
    ("eigh_U", lambda M, a: _eig_inv(*M.linalg.eigh(sym(M, a), UPLO="U")), [(3, 3)], False),
    ("eigvalsh", lambda M, a: M.linalg.eigvalsh(sym(M, a)), [(3, 3)], True),
    ("svd_tall", lambda M, a: _svd_inv(*M.linalg.svd(a, full_matrices=False)), [(4, 3)], True),
    ("svd_wide", lambda M, a: _svd_inv(*M.linalg.svd(a, full_matrices=False)), [(2, 5)], True),
    ("svd_square", lambda M, a: _svd_inv(*M.linalg.svd(a)), [(2, 3, 3)], False),
    ("svd_uvh", lambda M, a: _svd_uvh(*M.linalg.svd(a, full_matrices=False)), [(4, 3)], False),
    ("svdvals", lambda M, a: M.linalg.svdvals(a), [(4, 3)], True),
    ("pinv_tall", lambda M, a: M.linalg.pinv(a), [(4, 3)], True),
    ("pinv_wide", lambda M, a: M.linalg.pinv(a), [(2, 4)], True),
    ("lstsq", lambda M, a, b: M.linalg.lstsq(a, b).solution, [(5, 3), (5, 2)], True),
    ("vector_norm", lambda M, a: M.linalg.vector_norm(a), [(3, 4)], True),
    ("vector_norm_dim", lambda M, a: M.linalg.vector_norm(a, 2, (0, 2), True), [(2, 3, 2)], True),
    ("vector_norm_1", lambda M, a: M.linalg.vector_norm(a, 1, -1), [(3, 4)], False),
    ("vector_norm_inf", lambda M, a: M.linalg.vector_norm(a, float("inf"), 1), [(3, 4)], False),
    ("vector_norm_ninf", lambda M, a: M.linalg.vector_norm(a, -float("inf")), [(3, 4)], False),
    ("vector_norm_3", lambda M, a: M.linalg.vector_norm(a, 3, 0), [(3, 4)], True),
    ("vector_norm_half", lambda M, a: M.linalg.vector_norm(a, 0.5), [(5,)], True),
    ("vector_norm_0", lambda M, a: M.linalg.vector_norm(a, 0) * a.sum(), [(5,)], False),
    ("matrix_norm_fro", lambda M, a: M.linalg.matrix_norm(a), [(2, 3, 4)], True),
    ("matrix_norm_nuc", lambda M, a: M.linalg.matrix_norm(a, "nuc"), [(3, 4)], True),
    ("matrix_norm_2", lambda M, a: M.linalg.matrix_norm(a, 2), [(3, 4)], True),
    ("matrix_norm_m2", lambda M, a: M.linalg.matrix_norm(a, -2, keepdim=True), [(2, 3, 3)], False),
    ("matrix_norm_1", lambda M, a: M.linalg.matrix_norm(a, 1), [(3, 4)], False),
    ("matrix_norm_inf", lambda M, a: M.linalg.matrix_norm(a, float("inf"), dim=(0, 2)),
     [(3, 2, 4)], False),
    ("norm", lambda M, a: M.linalg.norm(a), [(2, 3, 4)], True),
    ("norm_mat", lambda M, a: M.linalg.norm(a, "fro", (1, 2)), [(2, 3, 4)], False),
    ("norm_ord_2d", lambda M, a: M.linalg.norm(a, 1), [(3, 4)], False),
    ("cross", lambda M, a, b: M.linalg.cross(a, b), [(4, 3), (4, 3)], True),
    ("cross_bcast", lambda M, a, b: M.linalg.cross(a, b, dim=1), [(2, 3, 1), (1, 3, 4)], False),
    ("vecdot", lambda M, a, b: M.linalg.vecdot(a, b), [(2, 4), (4,)], False),
    ("trace", lambda M, a: M.trace(a), [(3, 4)], True),
    ("diag_1d", lambda M, a: M.diag(a, 1), [(3,)], True),
    ("diag_2d", lambda M, a: M.diag(a, -1), [(3, 4)], True),
    ("diagonal", lambda M, a: M.diagonal(a, 1, 0, 2), [(3, 2, 4)], True),
    ("diagonal_neg", lambda M, a: M.diagonal(a, -2, -1, 0), [(4, 2, 3)], False),
    ("diag_embed", lambda M, a: M.diag_embed(a, 1, 0, 2), [(2, 3)], True),
    ("diag_embed_default", lambda M, a: M.diag_embed(a), [(2, 3)], False),
    ("tril", lambda M, a: M.tril(a, -1), [(2, 3, 4)], True),
    ("triu", lambda M, a: M.triu(a, 1), [(3, 4)], True),
    ("kron", lambda M, a, b: M.kron(a, b), [(2, 3), (3, 2)], True),
    ("kron_ndim", lambda M, a, b: M.kron(a, b), [(2,), (2, 3, 2)], False),
    ("tensordot", lambda M, a, b: M.tensordot(a, b, 1), [(2, 3), (3, 4)], True),
    ("tensordot_pairs", lambda M, a, b: M.tensordot(a, b, ([1, 0], [0, 2])), [(3, 2, 4), (2, 5, 3)], False),
    ("einsum_mm", lambda M, a, b: M.einsum("ij,jk->ik", a, b), [(2, 3), (3, 4)], True),
    ("einsum_bmm", lambda M, a, b: M.einsum("bij,bjk->bik", a, b), [(2, 2, 3), (2, 3, 2)], True),
    ("einsum_diag", lambda M, a: M.einsum("ii->i", a), [(3, 3)], True),
    ("einsum_trace", lambda M, a: M.einsum("ii", a), [(3, 3)], False),
    ("einsum_dot", lambda M, a, b: M.einsum("i,i", a, b), [(4,), (4,)], True),
    ("einsum_sum", lambda M, a: M.einsum("ij->", a), [(3, 4)], False),
    ("einsum_outer", lambda M, a, b: M.einsum("i,j->ij", a, b), [(3,), (4,)], False),
    ("einsum_ellipsis", lambda M, a, b: M.einsum("...ij,...jk", a, b), [(2, 2, 3), (3, 2)], True),
    ("einsum_chain", lambda M, a, b, c: M.einsum("ij,jk,kl->il", a, b, c),
     [(2, 3), (3, 4), (4, 2)], True),
    ("einsum_attn", lambda M, q, k: M.einsum("bhqd,bhkd->bhqk", q, k),
     [(1, 2, 3, 2), (1, 2, 4, 2)], False),
    ("einsum_transpose", lambda M, a: M.einsum("ijk->kji", a), [(2, 3, 4)], False),
    ("einsum_implicit", lambda M, a, b: M.einsum("ba,cb", a, b), [(3, 2), (4, 3)], False),
    ("einsum_sum_one", lambda M, a, b: M.einsum("ij,kj->i", a, b), [(2, 3), (4, 3)], False),
    ("einsum_bilinear", lambda M, x, A, y: M.einsum("bn,anm,bm->ba", x, A, y),
     [(2, 3), (4, 3, 2), (2, 2)], False),
    ("einsum_list", lambda M, a, b: M.einsum("ij,jk", [a, b]), [(2, 3), (3, 2)], False),
    ("einsum_sublist", lambda M, a, b: M.einsum(a, [0, 1], b, [1, 2], [0, 2]), [(2, 3), (3, 2)], False),
    ("einsum_sublist_ellipsis", lambda M, a, b: M.einsum(a, [Ellipsis, 0], b, [Ellipsis, 0]),
     [(2, 3), (2, 3)], False),
    ("matrix_power", lambda M, a: M.linalg.matrix_power(a, 3), [(2, 3, 3)], True),
    ("matrix_power_neg", lambda M, a: M.linalg.matrix_power(a + 3 * M.eye(3, dtype=M.float64), -2),
     [(3, 3)], True),
    ("matrix_power_0", lambda M, a: M.linalg.matrix_power(a, 0) + a, [(3, 3)], False),
    ("multi_dot", lambda M, a, b, c: M.linalg.multi_dot([a, b, c]), [(3,), (3, 4), (4, 2)], True),
    ("solve_triangular", lambda M, a, b: M.linalg.solve_triangular(a + 3 * M.eye(3, dtype=M.float64), b, upper=True),
     [(2, 3, 3), (2, 3, 2)], True),
    ("solve_triangular_lower_right", lambda M, a, b: M.linalg.solve_triangular(
        a + 3 * M.eye(3, dtype=M.float64), b, upper=False, left=False), [(3, 3), (2, 3)], True),
    ("solve_triangular_unit", lambda M, a, b: M.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
     [(3, 3), (3, 1)], False),
    ("det_top", lambda M, a: M.det(a) + M.logdet(a @ a.mT) + a.inverse().sum() + M.pinverse(a).sum(),
     [(3, 3)], False),
    ("slogdet_top", lambda M, a: M.slogdet(a)[1], [(3, 3)], False),
]


def _inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def _tup(x):
    return tuple(x) if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_grads_match_torch(case):
    _name, fn, shapes, _ = case
    arrs = _inputs(shapes)
    xl = [lucid.tensor(a, dtype=lucid.float64, requires_grad=True) for a in arrs]
    xt = [torch.tensor(a, requires_grad=True) for a in arrs]
    ol, ot = _tup(fn(lucid, *xl)), _tup(fn(torch, *xt))
    assert len(ol) == len(ot)
    rng = np.random.default_rng(1)
    lossl, losst = 0, 0
    for o, p in zip(ol, ot):
        assert tuple(o.shape) == tuple(p.shape), (o.shape, p.shape)
        np.testing.assert_allclose(o.detach().numpy(), p.detach().numpy(), rtol=1e-9, atol=1e-10)
        w = rng.standard_normal(tuple(p.shape))
        lossl = lossl + (o * lucid.tensor(w)).sum()
        losst = losst + (p * torch.tensor(w)).sum()
    lossl.backward()
    losst.backward()
    for a, b in zip(xl, xt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(case):
    _name, fn, shapes, _ = case
    xs = [lucid.tensor(a, dtype=lucid.float64, requires_grad=True) for a in _inputs(shapes, 2)]
    assert lucid.autograd.gradcheck(lambda *x: fn(lucid, *x), xs, atol=1e-6)


@pytest.mark.parametrize("case", [c for c in CASES if c[3]], ids=[c[0] for c in CASES if c[3]])
def test_gradgradcheck(case):
    _name, fn, shapes, _ = case
    xs = [lucid.tensor(a, dtype=lucid.float64, requires_grad=True) for a in _inputs(shapes, 3)]
    assert lucid.autograd.gradgradcheck(lambda *x: fn(lucid, *x), xs, atol=1e-5)


def test_schemas_and_node_names():
    a = lucid.tensor(np.eye(3) * 2, dtype=lucid.float64, requires_grad=True)
    for op, node, y in [("linalg_inv", "LinalgInvBackward", lucid.linalg.inv(a)),
                        ("linalg_det", "LinalgDetBackward", lucid.linalg.det(a)),
                        ("trace", "TraceBackward", lucid.trace(a)),
                        ("tril", "TrilBackward", lucid.tril(a)),
                        ("linalg_cholesky", "LinalgCholeskyBackward", lucid.linalg.cholesky(a))]:
        assert type(y.grad_fn).__name__ == node
        assert type(y.grad_fn).schema_v1 is lucid.ops.schema(op)
    s = lucid.ops.schema("linalg_solve")
    assert s.arity == 2 and s.saves_input and s.saves_output
    with lucid.no_grad():
        assert lucid.linalg.inv(a).grad_fn is None


def test_saved_input_modified_in_place_raises():
    a = lucid.tensor(np.eye(3) * 2, dtype=lucid.float64, requires_grad=True)
    h = a * 1.0
    d = lucid.linalg.det(h)
    with lucid.no_grad():
        h.mul_(2.0)
    with pytest.raises(RuntimeError):
        d.backward()


def test_slogdet_finite_where_det_overflows():
    a = np.diag([1e200, 1e200, -1e200])
    sl, ll = lucid.linalg.slogdet(lucid.tensor(a, dtype=lucid.float64))
    st, lt = torch.linalg.slogdet(torch.tensor(a))
    assert np.isfinite(ll.item()) and sl.item() == st.item() == -1.0
    np.testing.assert_allclose(ll.item(), lt.item(), rtol=1e-14)
    assert not np.isfinite(lucid.linalg.det(lucid.tensor(a, dtype=lucid.float64)).item())


def test_vector_norm_no_overflow_and_zero_grad():
    x = lucid.tensor([3e200, 4e200], dtype=lucid.float64)
    assert lucid.linalg.vector_norm(x).item() == pytest.approx(5e200)
    z = lucid.zeros(3, dtype=lucid.float64).requires_grad_()
    lucid.linalg.vector_norm(z).backward()
    assert np.array_equal(z.grad.numpy(), np.zeros(3))   # as torch: 0, not nan


@pytest.mark.parametrize("which", ["eigh", "svd"])
def test_repeated_eigenvalues(which):
    """Eigen/singular values alone: finite gradient (as torch) even when repeated; with a
    loss on the vectors, torch's gradient is not finite and neither is lucid's."""
    a = np.diag([1.0, 1.0, 2.0])
    res = {}
    for M, T in ((lucid, lambda x: lucid.tensor(x, dtype=lucid.float64, requires_grad=True)),
                 (torch, lambda x: torch.tensor(x, requires_grad=True))):
        out = []
        for vec in (False, True):
            x = T(a)
            if which == "eigh":
                w, v = M.linalg.eigh(x)
                loss = (w * w).sum() + (v.sum() if vec else 0)
            else:
                u, s, vh = M.linalg.svd(x)
                loss = (s * s).sum() + ((u[:, 0] * vh[0]).sum() * 0 + u.sum() if vec else 0)
            loss.backward()
            g = x.grad.detach().numpy() if M is lucid else x.grad.numpy()
            out.append(g)
        res[M.__name__] = out
    np.testing.assert_allclose(res["lucid"][0], res["torch"][0], rtol=1e-12, atol=1e-12)
    assert np.isfinite(res["lucid"][0]).all()
    assert np.isfinite(res["lucid"][1]).all() == np.isfinite(res["torch"][1]).all()


def test_errors_as_torch():
    a = lucid.tensor(np.ones((2, 3)), dtype=lucid.float64, requires_grad=True)
    with pytest.raises(ValueError):
        lucid.linalg.inv(a)
    sing = lucid.tensor(np.ones((2, 2)), dtype=lucid.float64)
    with pytest.raises(RuntimeError):
        lucid.linalg.inv(sing)
    with pytest.raises(RuntimeError):
        lucid.linalg.cholesky(lucid.tensor(-np.eye(2), dtype=lucid.float64))
    u, s, _vh = lucid.linalg.svd(a)             # full_matrices=True, m != n
    with pytest.raises(RuntimeError, match="full_matrices"):
        (u.sum() + s.sum()).backward()
    with pytest.raises(RuntimeError, match="mode='r'"):
        lucid.linalg.qr(a, mode="r")
    with pytest.raises(TypeError):
        lucid.linalg.inv(lucid.tensor(np.eye(2), dtype=lucid.float16))


def test_float32_and_methods():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 3)).astype(np.float32)
    x = lucid.tensor(a)
    assert lucid.linalg.inv(x).dtype is lucid.float32
    np.testing.assert_allclose(lucid.linalg.inv(x).numpy(), np.linalg.inv(a), rtol=1e-4)
    assert x.tril().numpy().tolist() == np.tril(a).tolist()
    assert x.trace().item() == pytest.approx(np.trace(a), rel=1e-6)
    assert x.mT.shape == (3, 3) and np.array_equal(x.mT.numpy(), a.T)


def test_einsum_chain_memory():
    """A long chain contracts pairwise: no intermediate larger than the operands' products."""
    rng = np.random.default_rng(0)
    xs = [lucid.tensor(rng.standard_normal((30, 30))) for _ in range(6)]
    out = lucid.einsum("ab,bc,cd,de,ef,fg->ag", *xs)
    ref = np.linalg.multi_dot([x.numpy() for x in xs])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-3, atol=1e-3)


def _cofactors(a):
    n = a.shape[0]
    return np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                      for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("a", [np.array([[1.0, 2.0], [2.0, 4.0]]),
                               np.arange(1.0, 10.0).reshape(3, 3),
                               np.diag([2.0, 0.0, 3.0]), np.zeros((3, 3))])
def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(a):
    """det is a polynomial: its gradient at a singular matrix is the cofactor matrix
    (torch 2.13 returns zeros there; finite differences agree with the cofactors)."""
    x = lucid.tensor(a, dtype=lucid.float64, requires_grad=True)
    lucid.linalg.det(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), _cofactors(a), atol=1e-12)
    assert lucid.autograd.gradcheck(lucid.linalg.det, (lucid.tensor(a, dtype=lucid.float64,
                                                                    requires_grad=True),))
