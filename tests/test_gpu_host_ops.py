"""Ops computed on the host (sorting, selection, scatter, special functions through SciPy)
and the special functions composed from MLX primitives, on the gpu device
(LUCID_MLX_DEVICE=cpu): every result is on its inputs' device, with the cpu's dtype and
values, gradients included; inputs on two devices raise naming the op.

The cpu results are themselves tested against torch, NumPy and SciPy (test_sorting.py,
test_special_kernels.py); the special functions are also compared here with SciPy
directly, special values included.
"""
import os

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("mlx.core")

import lucid  # noqa: E402

if not lucid.gpu_available():
    pytest.skip("MLX has no device here (set LUCID_MLX_DEVICE=cpu)", allow_module_level=True)

sp = pytest.importorskip("scipy.special")

_RNG = np.random.default_rng(0)
X = _RNG.standard_normal((3, 5))
Y = _RNG.standard_normal((3, 5))
POS = _RNG.uniform(0.1, 0.9, (3, 5))
IDX = _RNG.integers(0, 3, (3, 5))

# name -> (call over x, y, p (in (0, 1)), i (int64), m (bool mask), is differentiable in x)
CASES = {
    "copysign": ("lucid.copysign(x, y)", True),
    "argsort": ("lucid.argsort(x, 1, descending=True)", False),
    "unique": ("lucid.unique(i, return_inverse=True, return_counts=True)", False),
    "unique_consecutive": ("lucid.unique_consecutive(i, return_counts=True)", False),
    "nonzero": ("lucid.nonzero(m)", False),
    "nonzero_tuple": ("lucid.nonzero(m, as_tuple=True)", False),
    "argwhere": ("lucid.argwhere(x > 0.5)", False),
    "searchsorted": ("lucid.searchsorted(lucid.sort(x, 1).values, y)", False),
    "bucketize": ("lucid.bucketize(x, lucid.tensor([-1.0, 0.0, 1.0], device=x.device))", False),
    "scatter": ("lucid.scatter(x, 1, i, y)", True),
    "scatter_reduce": ("lucid.scatter_reduce(x, 1, i, y, 'amax')", True),
    "scatter_mean": ("lucid.scatter_reduce(x, 1, i, y, 'mean', include_self=False)", True),
    "isclose": ("lucid.isclose(x, x + 1e-9)", False),
    "index_add": ("lucid.index_add(x, 0, lucid.tensor([0, 2], device=x.device), y[:2])", True),
    "logcumsumexp": ("lucid.logcumsumexp(x, 1)", True),
    "sort": ("lucid.sort(x, 1)", True),
    "topk": ("lucid.topk(x, 2)", True),
    "kthvalue": ("lucid.kthvalue(x, 2, 1, keepdim=True)", True),
    "median": ("lucid.median(x, 1)", True),
    "median_all": ("lucid.median(x)", True),
    "quantile": ("lucid.quantile(x, lucid.tensor([0.25, 0.5], dtype=x.dtype, device=x.device), "
                 "dim=1)", True),
    "cummax": ("lucid.cummax(x, 1)", True),
    "cummin": ("lucid.cummin(x, 0)", True),
    "masked_select": ("lucid.masked_select(x, m)", True),
    "repeat_interleave": ("lucid.repeat_interleave(x, 2, dim=0)", True),
    "repeat_interleave_counts": ("lucid.repeat_interleave(lucid.tensor([1, 0, 2], "
                                 "device=x.device))", False),
    "masked_fill": ("lucid.masked_fill(x, m, 3.0)", True),
    "masked_fill_tensor": ("lucid.masked_fill(x, m, lucid.tensor(3.0, dtype=x.dtype, "
                           "device=x.device))", True),
    "take_along_dim": ("lucid.take_along_dim(x, i, 1)", True),
    "div_floor": ("lucid.div(x, y, rounding_mode='floor')", True),
    "floor_divide": ("lucid.floor_divide(x, 0.3)", True),
    "lgamma": ("lucid.lgamma(x * 3)", True),
    "digamma": ("lucid.digamma(x * 3)", True),
    "polygamma1": ("lucid.polygamma(1, x * 3)", True),
    "polygamma2": ("lucid.polygamma(2, p)", True),
    "sinc": ("lucid.sinc(x * 3)", True),
    "i0": ("lucid.i0(x * 4)", True),
    "erfcx": ("lucid.erfcx(x * 3)", True),
    "log_ndtr": ("lucid.log_ndtr(x * 5)", True),
    "ndtri": ("lucid.ndtri(p)", True),
    "special.ndtr": ("lucid.special.ndtr(x * 3)", True),
    "special.i1": ("lucid.special.i1(x * 4)", True),
    "special.i0e": ("lucid.special.i0e(x * 4)", True),
    "special.i1e": ("lucid.special.i1e(x * 4)", True),
    "special.entr": ("lucid.special.entr(p)", True),
    "special.xlog1py": ("lucid.special.xlog1py(x, p)", True),
    "xlogy": ("lucid.xlogy(x, p)", True),
    "xlogy_scalar": ("lucid.xlogy(2.0, p)", True),
    "special.multigammaln": ("lucid.special.multigammaln(p + 2, 3)", True),
}


def _run(call, dev, dt, grad):
    env = dict(lucid=lucid,
               x=lucid.tensor(X, dtype=dt, device=dev, requires_grad=grad),
               y=lucid.tensor(Y, dtype=dt, device=dev),
               p=lucid.tensor(POS, dtype=dt, device=dev, requires_grad=grad),
               i=lucid.tensor(IDX, device=dev), m=lucid.tensor(X > 0, device=dev))
    out = eval(call, env)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return env, outs


def _host(t):
    return t.detach().cpu().numpy()


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", list(CASES))
def test_result_on_input_device_with_cpu_values(name, dt):
    call, _ = CASES[name]
    dt = getattr(lucid, dt)
    _, oc = _run(call, "cpu", dt, False)
    _, og = _run(call, "gpu", dt, False)
    assert len(oc) == len(og)
    for c, g in zip(oc, og):
        assert g.device == "gpu", f"{name}: result on {g.device}"
        assert g.dtype is c.dtype, f"{name}: {g.dtype} on gpu, {c.dtype} on cpu"
        a, b = _host(c), _host(g)
        assert a.shape == b.shape
        if a.dtype.kind == "f":
            scale = max(1.0, float(np.max(np.abs(a[np.isfinite(a)]), initial=0)))
            np.testing.assert_allclose(b, a, rtol=3e-5, atol=3e-5 * scale, equal_nan=True,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(b, a, err_msg=name)


@pytest.mark.parametrize("name", [n for n, (_, d) in CASES.items() if d])
def test_gradients_on_gpu_match_cpu(name):
    call, _ = CASES[name]
    grads = []
    for dev in ("cpu", "gpu"):
        env, outs = _run(call, dev, lucid.float64, True)
        loss = None
        for k, o in enumerate(outs):
            if o.dtype.is_floating_point and o.requires_grad:
                w = lucid.tensor(np.linspace(0.5, 1.5, o.numel()).reshape(tuple(o.shape)) + k,
                                 device=dev)
                term = (o * w).sum()
                loss = term if loss is None else loss + term
        leaves = [env["x"], env["p"]]
        gs = lucid.autograd.grad(loss, leaves, allow_unused=True)
        for g in gs:
            assert g is None or g.device == dev
        grads.append([None if g is None else _host(g) for g in gs])
    for a, b in zip(*grads):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=name)


# -- the special functions on the gpu against SciPy ----------------------------------------

_GRID = np.concatenate([np.linspace(-12, 12, 241), [0.0, -0.0, 1.0, 2.0, -1.0, -2.5, 30.0,
                                                     -30.0, 60.0, np.inf, -np.inf, np.nan]])
_PROBS = np.concatenate([np.linspace(0, 1, 201), [1e-30, 1e-10, 1 - 1e-7, -0.5, 1.5, np.nan]])

SPECIAL = [
    ("lgamma", lambda t: lucid.lgamma(t), lambda a: np.where(a == -np.inf, np.inf, sp.gammaln(a)),
     _GRID),
    ("digamma", lambda t: lucid.digamma(t),
     lambda a: np.where(a == 0, np.where(np.signbit(a), np.inf, -np.inf), sp.psi(a)), _GRID),
    ("trigamma", lambda t: lucid.polygamma(1, t), lambda a: sp.polygamma(1, a),
     _GRID[np.isfinite(_GRID) & ((_GRID > 0) | (_GRID != np.round(_GRID)))]),
    ("polygamma3", lambda t: lucid.polygamma(3, t), lambda a: sp.polygamma(3, a),
     _GRID[np.isfinite(_GRID) & ((_GRID > 0) | (_GRID != np.round(_GRID)))]),
    ("sinc", lambda t: lucid.sinc(t),
     lambda a: np.where(np.isinf(a) | ((a == np.round(a)) & (a != 0)), 0.0, np.sinc(a)), _GRID),
    ("i0", lambda t: lucid.i0(t), lambda a: np.where(np.isinf(a), np.inf, sp.i0(a)), _GRID),
    ("i1", lambda t: lucid.special.i1(t), sp.i1, _GRID),
    ("i0e", lambda t: lucid.special.i0e(t), sp.i0e, _GRID),
    ("i1e", lambda t: lucid.special.i1e(t), sp.i1e, _GRID),
    ("erfcx", lambda t: lucid.erfcx(t), sp.erfcx, _GRID[_GRID > -9]),
    ("log_ndtr", lambda t: lucid.log_ndtr(t), sp.log_ndtr, _GRID),
    ("ndtr", lambda t: lucid.special.ndtr(t), sp.ndtr, _GRID),
    ("ndtri", lambda t: lucid.ndtri(t), sp.ndtri, _PROBS),
    ("entr", lambda t: lucid.special.entr(t), sp.entr, _GRID),
]


@pytest.mark.parametrize("name,fn,ref,grid", SPECIAL, ids=[s[0] for s in SPECIAL])
def test_special_functions_on_gpu_against_scipy(name, fn, ref, grid):
    a = grid.astype(np.float32)
    got = fn(lucid.tensor(a, device="gpu"))
    assert got.device == "gpu" and got.dtype is lucid.float32
    got = _host(got).astype(np.float64)
    with np.errstate(all="ignore"):
        want = ref(a.astype(np.float64))
    want32 = want.astype(np.float32).astype(np.float64)    # what float32 can hold
    fin = np.isfinite(want32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want32), err_msg=f"{name}: nan")
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want32)], want32[~fin & ~np.isnan(want32)],
                                  err_msg=f"{name}: infinities")
    err = np.abs(got[fin] - want[fin]) / np.maximum(1.0, np.abs(want[fin]))
    assert err.max() < 2e-5, f"{name}: max error {err.max():.2e}"


def test_two_devices_raise_naming_the_op():
    c, g = lucid.tensor(X), lucid.tensor(Y, device="gpu")
    calls = {"copysign": lambda: lucid.copysign(g, c),
             "isclose": lambda: lucid.isclose(g, c),
             "scatter": lambda: lucid.scatter(g, 1, lucid.tensor(IDX), g),
             "index_add": lambda: lucid.index_add(g, 0, lucid.tensor([0]), g[:1]),
             "masked_select": lambda: lucid.masked_select(g, c > 0),
             "allclose": lambda: lucid.allclose(g, c),
             "special.xlog1py": lambda: lucid.special.xlog1py(g, c)}
    for name, call in calls.items():
        with pytest.raises(lucid.LucidError, match=rf"lucid\.{name}\(\) got tensors on gpu and cpu"):
            call()


def test_equal_and_allclose_read_gpu_values():
    g = lucid.tensor(X, device="gpu")
    assert lucid.equal(g, g.clone()) and not lucid.equal(g, g + 1)
    assert lucid.allclose(g, g + 1e-9) and not lucid.allclose(g, g + 1)
