"""Hostile inputs to the host-computed ops (issue 28), each against torch 2.13 or NumPy:
half precision (bfloat16's NumPy kind is 'V', so kind tests took it for a non-float),
quantile at infinities and NaN, int32 / refused index dtypes, empty inputs, bad
arguments (a RuntimeError for torch's callers and a ValueError for NumPy's), std_mean /
var_mean, and the gpu device where the op has a gpu path."""
import os

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import lucid  # noqa: E402

torch = pytest.importorskip("torch")

HALVES = [("float16", 2e-3), ("bfloat16", 1.6e-2)]       # (dtype, one-ulp relative step)
INF, NAN = np.inf, np.nan
DEVICES = ["cpu"] + (["gpu"] if lucid.gpu_available() else [])


def _np(t):
    """Values of a lucid or torch tensor as float64 (int64 for integer tensors)."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return t.double().numpy() if t.is_floating_point() else t.numpy()
    a = t.numpy(force=True)
    return a.astype(np.float64) if t.is_floating_point() else a


def _same(got, want, rtol=0.0, what=""):
    g, w = _np(got), _np(want)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=0, equal_nan=True, err_msg=what)


def _pair(values, dt, device="cpu"):
    return (lucid.tensor(np.asarray(values, np.float64), dtype=dt, device=device),
            torch.tensor(np.asarray(values, np.float64), dtype=getattr(torch, dt)))


def _both_raise(lucid_call, torch_call, match):
    """torch raises a RuntimeError (or IndexError); lucid's error is one too, and a
    ValueError when it is about a value, with a message naming the op."""
    with pytest.raises((RuntimeError, IndexError)):
        torch_call()
    with pytest.raises((RuntimeError, IndexError), match=match) as e:
        lucid_call()
    return e.value


# -- 1. half precision --------------------------------------------------------------

ROW = [1.0, NAN, 3.0, -2.0, 5.0, 0.5]
NAN2D = [[1.0, NAN, 3.0, 4.0], [2.0, 0.5, -1.0, 7.0], [NAN, NAN, 1.0, 2.0]]


@pytest.mark.parametrize("dt,tol", HALVES)
def test_median_of_half_propagates_nan(dt, tol):
    x, tx = _pair(ROW, dt)
    _same(lucid.median(x), tx.median(), what="median()")
    x, tx = _pair(NAN2D, dt)
    v, i = lucid.median(x, 1)
    tv, ti = tx.median(1)
    _same(v, tv, what="median(dim) values")
    _same(i, ti, what="median(dim) indices")


@pytest.mark.parametrize("dt,tol", HALVES)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_of_half_keep_nan(dt, tol, op):
    x, tx = _pair(NAN2D, dt)
    v, i = getattr(lucid, op)(x, 1)
    tv, ti = getattr(torch, op)(tx, 1)
    _same(v, tv, what=op)
    _same(i, ti, what=op + " indices")


@pytest.mark.parametrize("dt,tol", HALVES)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_of_half(dt, tol, reduce, include_self):
    x, tx = _pair([1.0, 2.0, 3.0, -4.0], dt)
    s, ts = _pair([1.0, 1.01, 2.0, 5.0, 2048.0, 1.0, 0.25], dt)
    idx = [0, 0, 0, 1, 3, 3, 3]
    got = lucid.scatter_reduce(x, 0, lucid.tensor(idx), s, reduce, include_self=include_self)
    want = torch.scatter_reduce(tx, 0, torch.tensor(idx), ts, reduce, include_self=include_self)
    assert got.dtype is getattr(lucid, dt)
    _same(got, want, what=f"scatter_reduce {reduce}")


@pytest.mark.parametrize("dt,tol", HALVES)
def test_logcumsumexp_of_half(dt, tol):
    x, tx = _pair([0.1, 0.2, 0.3, 5.0, 6.0, -3.0], dt)
    _same(lucid.logcumsumexp(x, 0), torch.logcumsumexp(tx, 0), rtol=tol, what="logcumsumexp")


@pytest.mark.parametrize("dt,tol", HALVES)
@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_rounding_of_half_values_and_graph(dt, tol, mode):
    x, tx = _pair([7.1, -7.3, 0.5, -0.25], dt)
    x.requires_grad_(True)
    tx.requires_grad_(True)
    got = lucid.div(x, 0.3, rounding_mode=mode)
    want = torch.div(tx, 0.3, rounding_mode=mode)
    _same(got, want, what=f"div {mode}")
    assert got.requires_grad == want.requires_grad


@pytest.mark.parametrize("dt,tol", HALVES)
def test_sort_topk_searchsorted_of_half_with_nan(dt, tol):
    x, tx = _pair(ROW, dt)
    for got, want in zip(lucid.sort(x, descending=True), torch.sort(tx, descending=True)):
        _same(got, want, what="sort")
    _same(lucid.topk(x, 3).values, torch.topk(tx, 3).values, what="topk")
    b, tb = _pair([-1.0, 0.5, 2.0, 4.0], dt)
    v, tv = _pair([-3.0, 0.5, 3.0, 9.0], dt)
    _same(lucid.searchsorted(b, v, right=True), torch.searchsorted(tb, tv, right=True))


@pytest.mark.parametrize("dt,tol", HALVES)
def test_vector_norm_of_half_accumulates_in_float32(dt, tol):
    x, tx = _pair(np.linspace(0.01, 3.0, 400), dt)
    for ord in (2, 1, 3):
        _same(lucid.linalg.vector_norm(x, ord), torch.linalg.vector_norm(tx, ord), rtol=tol,
              what=f"vector_norm {ord}")


@pytest.mark.parametrize("dt,tol", HALVES)
@pytest.mark.parametrize("fn", ["inv", "det", "cholesky", "eigvalsh", "svdvals", "qr"])
def test_lapack_ops_refuse_half_as_torch(dt, tol, fn):
    a = [[2.0, 1.0], [1.0, 3.0]]
    x, tx = _pair(a, dt)
    with pytest.raises((RuntimeError, NotImplementedError)):
        getattr(torch.linalg, fn)(tx)
    with pytest.raises(lucid.UnsupportedDTypeError, match=dt):
        getattr(lucid.linalg, fn)(x)


@pytest.mark.parametrize("dt,tol", HALVES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["gammaln", "digamma", "polygamma1", "i0", "sinc"])
def test_special_functions_of_half_against_torch(dt, tol, device, name):
    """float16 / bfloat16 computed in float32 and rounded once on both devices (the gpu's
    series overflowed float16: lgamma(2.7) was -inf)."""
    vals = [0.3, 1.5, 2.7, 7.9, 20.5]
    x, tx = _pair(vals, dt, device)
    if name == "polygamma1":
        got, want = lucid.special.polygamma(1, x), torch.special.polygamma(1, tx.float())
    else:
        got, want = getattr(lucid.special, name)(x), getattr(torch.special, name)(tx.float())
    assert got.dtype is getattr(lucid, dt) and got.device == device
    # torch in float32, rounded to the half type: lucid's result is within one rounding
    _same(got, want.to(getattr(torch, dt)), rtol=tol, what=name)


def test_nan_to_num_of_bfloat16():
    x, tx = _pair([1.0, NAN, INF, -INF], "bfloat16")
    _same(lucid.nan_to_num(x), torch.nan_to_num(tx))


def test_nan_to_num_of_float16():
    x, tx = _pair([1.0, NAN, INF, -INF], "float16")
    _same(lucid.nan_to_num(x), torch.nan_to_num(tx))


# -- 2. quantile at infinities and NaN ------------------------------------------------

Q_ROWS = [[-INF, 1.0, 2.0], [1.0, 2.0, INF], [-INF, INF], [-INF, -INF, 1.0], [1.0, INF, INF],
          [-INF, 0.0, INF], [3.0, 1.0, NAN, 2.0], [NAN, NAN, NAN], [5.0, 1.0, 2.0, 4.0, 7.0, 2.0],
          [4.0]]
QS = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
MODES = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_quantile_with_infinities_and_nan_as_torch(fn, mode, dt):
    for row in Q_ROWS:
        x, tx = _pair(row, dt)
        q, tq = _pair(QS, dt)
        got = getattr(lucid, fn)(x, q, interpolation=mode)
        want = getattr(torch, fn)(tx, tq, interpolation=mode)
        _same(got, want, what=f"{fn}({row}, {mode})")


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile_shapes_and_gradients_as_torch(fn):
    a = np.random.default_rng(1).standard_normal((3, 4, 5))
    a[0, 1, 2] = NAN
    for dim in (None, 0, 1, -1):
        for keepdim in (False, True):
            for q in (0.3, [0.2, 0.9], np.float64(0.6)):
                x = lucid.tensor(a, requires_grad=True)
                tx = torch.tensor(a, requires_grad=True)
                lq = lucid.tensor(q, dtype=lucid.float64) if isinstance(q, list) else q
                tq = torch.tensor(q, dtype=torch.float64) if isinstance(q, list) else float(q)
                got = getattr(lucid, fn)(x, lq, dim=dim, keepdim=keepdim)
                want = getattr(torch, fn)(tx, tq, dim=dim, keepdim=keepdim)
                _same(got, want, rtol=1e-12, what=f"{fn} dim={dim} keepdim={keepdim} q={q}")
                w = np.random.default_rng(2).standard_normal(tuple(want.shape))
                (got * lucid.tensor(w)).nan_to_num().sum().backward()
                (want * torch.tensor(w)).nan_to_num().sum().backward()
                _same(x.grad, tx.grad, rtol=1e-12, what=f"{fn} grad dim={dim}")


def test_quantile_zero_dim_q_tensor_gives_no_q_dim():
    a = np.arange(6.0).reshape(2, 3)
    got = lucid.quantile(lucid.tensor(a), lucid.tensor(0.4, dtype=lucid.float64), dim=1)
    _same(got, torch.quantile(torch.tensor(a), torch.tensor(0.4, dtype=torch.float64), dim=1))


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("q", [NAN, -0.1, 1.5, [0.5, NAN]])
def test_quantile_q_outside_unit_interval_raises_naming_q(fn, q):
    a = np.arange(6.0)
    lq = lucid.tensor(q) if isinstance(q, list) else q
    tq = torch.tensor(q, dtype=torch.float64) if isinstance(q, list) else q
    e = _both_raise(lambda: getattr(lucid, fn)(lucid.tensor(a), lq),
                    lambda: getattr(torch, fn)(torch.tensor(a), tq), rf"{fn}\(\) q")
    assert isinstance(e, ValueError)


def test_quantile_bad_interpolation_raises():
    e = _both_raise(lambda: lucid.quantile(lucid.tensor([1.0, 2.0]), 0.5, interpolation="cubic"),
                    lambda: torch.quantile(torch.tensor([1.0, 2.0]), 0.5, interpolation="cubic"),
                    "quantile.*interpolation")
    assert isinstance(e, ValueError)


@pytest.mark.parametrize("shape,dim", [((0,), None), ((0, 3), 1), ((2, 0), 0)])
def test_quantile_of_empty_input_raises_as_torch(shape, dim):
    e = _both_raise(lambda: lucid.quantile(lucid.zeros(shape), 0.5, dim=dim),
                    lambda: torch.quantile(torch.zeros(shape), 0.5, dim=dim),
                    r"quantile\(\) input tensor must be non-empty")
    assert isinstance(e, ValueError)


def test_np_nanquantile_and_nanpercentile_route_to_lucid():
    a = np.array([[1.0, NAN, 3.0, 4.0], [2.0, 5.0, NAN, NAN]])
    got = np.nanquantile(lucid.tensor(a), [0.3, 0.5], axis=1)
    assert isinstance(got, lucid.Tensor)
    _same(got, torch.tensor(np.nanquantile(a, [0.3, 0.5], axis=1)), rtol=1e-12)
    got = np.nanpercentile(lucid.tensor(a), 30)
    assert isinstance(got, lucid.Tensor)
    np.testing.assert_allclose(_np(got), np.nanpercentile(a, 30), rtol=1e-12)


# -- 3. index dtypes ------------------------------------------------------------------

SCATTER_OPS = {
    "scatter": lambda M, x, i, s: M.scatter(x, 1, i, s),
    "scatter_value": lambda M, x, i, s: M.scatter(x, 1, i, 2.5),
    "scatter_add": lambda M, x, i, s: M.scatter_add(x, 1, i, s),
    "scatter_reduce_amax": lambda M, x, i, s: M.scatter_reduce(x, 1, i, s, "amax"),
    "scatter_reduce_mean": lambda M, x, i, s: M.scatter_reduce(x, 1, i, s, "mean",
                                                              include_self=False),
    "index_add": lambda M, x, i, s: M.index_add(x, 1, i[0], s),
    "gather": lambda M, x, i, s: M.gather(x, 1, i),
    "take_along_dim": lambda M, x, i, s: M.take_along_dim(x, i),
    "index_select": lambda M, x, i, s: M.index_select(x, 1, i[0]),
}
XS = np.random.default_rng(3).standard_normal((2, 4))
IS = np.array([[0, 3, 0], [2, 1, 1]])
SS = np.random.default_rng(4).standard_normal((2, 3))


def _lt(name, dt, rg=False):
    return lucid.tensor(name, dtype=dt, requires_grad=rg)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("idt", ["int32", "int64"])
@pytest.mark.parametrize("name", sorted(SCATTER_OPS))
def test_int32_and_int64_index_as_torch(name, idt, device):
    f = SCATTER_OPS[name]
    x = lucid.tensor(XS, requires_grad=True, device=device)
    s = lucid.tensor(SS, requires_grad=True, device=device)
    tx = torch.tensor(XS, requires_grad=True)
    ts = torch.tensor(SS, requires_grad=True)
    got = f(lucid, x, lucid.tensor(IS, dtype=getattr(lucid, idt), device=device), s)
    want = f(torch, tx, torch.tensor(IS, dtype=getattr(torch, idt)), ts)
    assert got.device == device
    _same(got, want, rtol=1e-12, what=name)
    got.sum().backward()
    want.sum().backward()
    for a, b in ((x, tx), (s, ts)):
        if b.grad is not None:
            _same(a.grad, b.grad, rtol=1e-12, what=name + " grad")


@pytest.mark.parametrize("idt", ["uint8", "int16", "float32"])
@pytest.mark.parametrize("name", ["scatter", "scatter_value", "scatter_add", "scatter_reduce_amax",
                                  "index_add", "gather", "index_select"])
def test_other_index_dtypes_refused_as_torch(name, idt):
    f = SCATTER_OPS[name]
    index = IS.astype(np.float32) if idt == "float32" else IS
    with pytest.raises(RuntimeError):
        f(torch, torch.tensor(XS), torch.tensor(index, dtype=getattr(torch, idt)),
          torch.tensor(SS))
    with pytest.raises(lucid.UnsupportedDTypeError, match="index"):
        f(lucid, lucid.tensor(XS), lucid.tensor(index, dtype=getattr(lucid, idt)),
          lucid.tensor(SS))


# -- 4. empty inputs and bad arguments --------------------------------------------------

@pytest.mark.parametrize("dt", ["int64", "int32", "int16", "int8", "uint8", "bool",
                                "float16", "bfloat16", "float32"])
def test_median_of_no_elements_as_torch(dt):
    ldt = lucid.bool_ if dt == "bool" else getattr(lucid, dt)
    got = lucid.median(lucid.zeros(0, dtype=ldt))
    want = torch.median(torch.zeros(0, dtype=getattr(torch, dt)))
    assert got.dtype is ldt
    _same(got, want)


@pytest.mark.parametrize("shape,dim", [((0, 3), 0), ((3, 0), 1)])
def test_median_over_an_empty_dim_raises_as_torch(shape, dim):
    with pytest.raises(IndexError, match="median"):
        torch.median(torch.zeros(shape, dtype=torch.int64), dim)
    with pytest.raises(IndexError, match=r"median\(\).*non-zero size"):
        lucid.median(lucid.zeros(shape, dtype=lucid.int64), dim)


def test_median_over_a_full_dim_of_an_empty_tensor_as_torch():
    v, i = lucid.median(lucid.zeros((0, 3), dtype=lucid.int64), 1)
    tv, ti = torch.median(torch.zeros((0, 3), dtype=torch.int64), 1)
    _same(v, tv)
    _same(i, ti)


@pytest.mark.parametrize("seq,val", [((0,), (2,)), ((2,), (0,)), ((2, 0), (2, 3)),
                                     ((0, 3), (0, 2)), ((2, 3), (2, 0)), ((0,), ())])
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_with_zero_sizes_as_torch(seq, val, right):
    s = np.sort(np.random.default_rng(5).standard_normal(seq), axis=-1)
    v = np.random.default_rng(6).standard_normal(val)
    lv = float(v) if val == () else lucid.tensor(v)
    tv = float(v) if val == () else torch.tensor(v)
    _same(lucid.searchsorted(lucid.tensor(s), lv, right=right),
          torch.searchsorted(torch.tensor(s), tv, right=right))


BAD_ARGS = [
    ("div", lambda M: M.div(M.ones(2), 2.0, rounding_mode="round"), "rounding_mode"),
    ("meshgrid", lambda M: M.meshgrid(M.ones(2), M.ones(3), indexing="ab"), "meshgrid.*indexing"),
    ("scatter_reduce", lambda M: M.scatter_reduce(M.ones(2), 0, M.tensor([0]), M.ones(1), "foo"),
     "scatter_reduce.*reduce"),
    ("scatter_reduce_add", lambda M: M.scatter_reduce(M.ones(2), 0, M.tensor([0]), M.ones(1),
                                                      "add"), "scatter_reduce.*reduce"),
    ("einsum_count", lambda M: M.einsum("ij,jk", M.ones((2, 2))), "einsum"),
    ("einsum_output", lambda M: M.einsum("ij->ik", M.ones((2, 2))), "einsum.*subscript k"),
    ("einsum_char", lambda M: M.einsum("i1", M.ones((2, 2))), "einsum.*subscript"),
    ("einsum_dot", lambda M: M.einsum("i..j.,j", M.ones((2, 3)), M.ones(3)), "einsum.*'.'"),
    ("einsum_arrows", lambda M: M.einsum("i->i->i", M.ones(2)), "einsum"),
    ("einsum_ndim", lambda M: M.einsum("ijk", M.ones((2, 3))), "einsum.*dimensions"),
    ("einsum_repeat_out", lambda M: M.einsum("i->ii", M.ones(2)), "einsum.*more than once"),
    ("einsum_diag_sizes", lambda M: M.einsum("ii->i", M.ones((2, 3))), "einsum.*repeated"),
    ("einsum_sizes", lambda M: M.einsum("ij,jk->ik", M.ones((2, 3)), M.ones((2, 3))),
     "einsum.*subscript j"),
    ("einsum_ellipsis_sizes", lambda M: M.einsum("...i,...i", M.ones((2, 3)), M.ones((3, 3))),
     "einsum.*ellipsis"),
    ("einsum_two_ellipses_out", lambda M: M.einsum("i...->...i...", M.ones(2)), "einsum"),
]


@pytest.mark.parametrize("name,call,match", BAD_ARGS, ids=[b[0] for b in BAD_ARGS])
def test_bad_arguments_raise_runtime_and_value_errors(name, call, match):
    e = _both_raise(lambda: call(lucid), lambda: call(torch), match)
    assert isinstance(e, ValueError) and isinstance(e, lucid.LucidError), type(e)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 1), (3, 4)]),
                                       ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
                                       ("i,i,i->", [(3,), (1,), (3,)]), ("I,i", [(2,), (2,)]),
                                       ("ii", [(3, 3)]), ("i,", [(2,), ()])])
def test_einsum_equations_torch_accepts(eq, shapes):
    rng = np.random.default_rng(7)
    arrs = [rng.standard_normal(s) for s in shapes]
    _same(lucid.einsum(eq, *[lucid.tensor(a) for a in arrs]),
          torch.einsum(eq, *[torch.tensor(a) for a in arrs]), rtol=1e-12, what=eq)


# -- 5. std_mean, var_mean ------------------------------------------------------------

MOMENT_KW = [dict(), dict(dim=1), dict(dim=(0, 2), keepdim=True), dict(dim=0, correction=0),
             dict(dim=1, unbiased=False), dict(keepdim=True), dict(dim=-1, correction=2)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["std_mean", "var_mean"])
@pytest.mark.parametrize("kw", MOMENT_KW, ids=str)
def test_std_mean_var_mean_as_torch(fn, kw, device):
    a = np.random.default_rng(8).standard_normal((3, 4, 5))
    x = lucid.tensor(a, requires_grad=True, device=device)
    tx = torch.tensor(a, requires_grad=True)
    got, want = getattr(lucid, fn)(x, **kw), getattr(torch, fn)(tx, **kw)
    assert isinstance(got, tuple) and len(got) == 2
    w = np.random.default_rng(9).standard_normal(tuple(want[0].shape))
    for g, t in zip(got, want):
        assert g.device == device
        _same(g, t, rtol=1e-6 if device == "gpu" else 1e-12, what=f"{fn} {kw}")
    (got[0] * lucid.tensor(w, device=device) + 3 * got[1].sum()).sum().backward()
    (want[0] * torch.tensor(w) + 3 * want[1].sum()).sum().backward()
    _same(x.grad, tx.grad, rtol=1e-5 if device == "gpu" else 1e-10, what=f"{fn} grad {kw}")


@pytest.mark.parametrize("fn", ["std_mean", "var_mean"])
def test_std_mean_positional_unbiased_as_torch(fn):
    a = np.random.default_rng(10).standard_normal((3, 4))
    for args in ((False,), (True,), (1, False), (0, True, True)):
        for g, t in zip(getattr(lucid, fn)(lucid.tensor(a), *args),
                        getattr(torch, fn)(torch.tensor(a), *args)):
            _same(g, t, rtol=1e-12, what=f"{fn}{args}")
