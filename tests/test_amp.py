"""Mixed precision: bfloat16, half kernels, lucid.autocast, the AMP policy of every op,
and lucid.amp.GradScaler.

References are independent of lucid: NumPy / SciPy in float64 (or float32, then rounded
by NumPy / ml_dtypes), and torch where it is installed.
"""
import io
import math
import pickle
import sys
import threading

import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

import lucid
from lucid._core import optable
from op_data import UNARY_DATA
import test_ops_table as T

HALF = ("float16", "bfloat16")
NP_HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# Relative precision of one rounding to each type (unit roundoff), with room for one
# float32 kernel's few ULPs and a tie that rounds the other way: 4 eps.
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23}


def _tol(dtname):
    return 4 * EPS[dtname]


def _close(got, want, dtname, what):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    rt = _tol(dtname) if dtname in HALF else 1e-5
    fin = np.isfinite(want)
    scale = max(1.0, float(np.max(np.abs(want[fin]), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rt, atol=rt * scale, equal_nan=True, err_msg=what)


def _half_array(a, dtname):
    """a (float64) rounded to the half type, by NumPy / ml_dtypes."""
    return np.asarray(a, np.float32).astype(NP_HALF[dtname])


def _policy(op):
    return lucid.ops.schema(op).amp_policy.name


# ============================================================================ policies
TABLE_OPS = ([r["name"] for r in optable.UNARY] + [r["name"] for r in optable.BINARY] +
             [r["name"] for r in optable.COMPARE] + [r["name"] for r in optable.REDUCTIONS] +
             [r["name"] for r in optable.COMPOSITE] + [r["name"] for r in optable.MORE_BINARY])


@pytest.mark.parametrize("op", sorted(set(TABLE_OPS) | {v["op"] for v in T.VARIANTS}))
def test_every_op_has_a_policy(op):
    s = lucid.ops.schema(op)
    assert isinstance(s.amp_policy, lucid.AmpPolicy), (op, s.amp_policy)


def test_table_rows_declare_the_schema_policy():
    for table in (optable.UNARY, optable.BINARY, optable.REDUCTIONS, optable.COMPOSITE,
                  optable.MORE_BINARY):
        for row in table:
            assert row["amp"] in ("Promote", "KeepInput", "ForceFP32"), row["name"]
            assert _policy(row["name"]) == row["amp"], row["name"]


def test_policy_audit():
    """ForceFP32: the ops that must run in float32 under autocast (exp, log, softmax, pow,
    norms, ...) and the reductions whose half result can overflow although the inputs
    are finite; the rest keep their dtype."""
    force = {"exp", "log", "log2", "softmax", "log_softmax", "pow", "norm", "logsumexp",
             "sum", "prod", "cumsum", "cumprod", "var"}
    for op in force:
        assert _policy(op) == "ForceFP32", op
    for op in ("mean", "std", "amax", "amin", "max", "min", "argmax", "argmin", "all", "any"):
        assert _policy(op) == "KeepInput", op
    for op in ("matmul", "dot", "outer", "add", "mul", "sin", "relu"):
        assert _policy(op) == "Promote", op
    # an overflow the policy prevents: 40000 + 40000 fits float32, not float16
    x = lucid.tensor([40000.0, 40000.0], dtype=lucid.float16)
    assert lucid.sum(x).item() == 80000.0
    assert lucid.norm(lucid.full((100,), 30000.0, dtype=lucid.float16)).item() == \
        pytest.approx(300000.0)
    # losses and layer norms are ForceFP32 too
    for fn in (lucid.nn.functional.mse_loss, lucid.nn.functional.cross_entropy,
               lucid.nn.functional.layer_norm):
        assert fn.amp_policy == "ForceFP32"


# ============================================================ every op under autocast
def _expected(op, dtname, ref):
    if ref.dtype.kind == "b":
        return lucid.bool_
    if ref.dtype.kind in "iu":
        return lucid.int64
    return lucid.float32 if _policy(op) == "ForceFP32" else getattr(lucid, dtname)


def _unary_cases():
    return [pytest.param(r["name"], d, id=f"{r['name']}-{d}") for r in optable.UNARY
            for d in HALF]


@pytest.mark.parametrize("op,dtname", _unary_cases())
def test_unary_under_autocast(op, dtname):
    data = UNARY_DATA[op]
    lo, hi = data["domain"]
    x = _half_array(np.linspace(lo, hi, 257), dtname)
    xs = x.astype(np.float64)
    ref = eval(data["ref"], {"np": np, "sp": sp, "x": xs})
    dt = getattr(lucid, dtname)
    with lucid.autocast(dtype=dt):
        y = getattr(lucid, op)(lucid.tensor(x))
    want = lucid.float32 if _policy(op) == "ForceFP32" else dt
    assert y.dtype is want, (op, y.dtype, want)
    _close(y.float().numpy(), ref, want.name if want is not lucid.float32 else "float32", op)
    if want is dt:    # correctly rounded float32 results, rounded once: within 1 half ULP
        y32 = np.asarray(ref, np.float32).astype(NP_HALF[dtname]).astype(np.float64)
        ulp = np.abs(np.spacing(y32.astype(NP_HALF[dtname])).astype(np.float64))
        assert np.all((np.abs(y.float().numpy() - y32) <= ulp) | ~np.isfinite(y32)), op


def _ops_cases():
    return [pytest.param(v, d, id=f"{T._vid(v)}-{d}") for v in T.VARIANTS for d in HALF]


def _half_inputs(v, dtname):
    """The row's sampled inputs, floats rounded to the half type: lucid tensors and the
    same values as float32 arrays for the reference."""
    arrs = T._inputs(v, "float32")
    ts, ref_arrs = {}, {}
    for name, _, kind in v["inputs"]:
        a = arrs[name]
        if T._is_float_kind(kind):
            a = _half_array(a, dtname)
            ref_arrs[name] = a.astype(np.float32)
        else:
            ref_arrs[name] = a
        ts[name] = lucid.tensor(a)
    return ts, ref_arrs


@pytest.mark.parametrize("v,dtname", _ops_cases())
def test_ops_table_under_autocast(v, dtname):
    """Every row of the op table with float16 / bfloat16 inputs inside autocast: the
    output dtype follows the op's policy, the values the float64 reference of the same
    (half-rounded) inputs within the output type's precision."""
    ts, ref_arrs = _half_inputs(v, dtname)
    with lucid.autocast(dtype=getattr(lucid, dtname)):
        outs = T._as_list(T._eval(v, "call", dict(ts, lucid=lucid, np=np, math=math)))
    refs = T.run_ref(v, ref_arrs)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        want = _expected(v["op"], dtname, r)
        assert o.dtype is want, (T._vid(v), o.dtype, want)
        if not v.get("ref_in_dtype"):
            _close(o.detach().float().numpy() if want.is_floating_point else o.numpy(), r,
                   want.name if want.name in HALF else "float32", T._vid(v))


@pytest.mark.parametrize("op,dtname", _unary_cases())
def test_unary_leaf_grad_in_leaf_dtype(op, dtname):
    data = UNARY_DATA[op]
    lo, hi = data["domain"]
    x = _half_array(np.linspace(lo, hi, 33), dtname)
    dt = getattr(lucid, dtname)
    leaf = lucid.tensor(x, requires_grad=True)
    with lucid.autocast(dtype=dt):
        getattr(lucid, op)(leaf).float().sum().backward()
    assert leaf.grad.dtype is dt
    x32 = lucid.tensor(x.astype(np.float32), requires_grad=True)
    getattr(lucid, op)(x32).sum().backward()
    g, g32 = leaf.grad.float().numpy(), x32.grad.numpy()
    fits = np.abs(g32) <= float(ml_dtypes.finfo(NP_HALF[dtname]).max)   # else inf, as torch
    assert np.isinf(g[~fits]).all(), op
    _close(g[fits], g32[fits], dtname, op)


def _grad_cases():
    return [pytest.param(v, d, id=f"{T._vid(v)}-{d}") for v in T.VARIANTS
            if v.get("grad") and v["id"] == "base" for d in HALF]


@pytest.mark.parametrize("v,dtname", _grad_cases())
def test_ops_leaf_grad_in_leaf_dtype(v, dtname):
    """The casts autocast and the policies insert are recorded: each half leaf gets its
    gradient in its own dtype."""
    ts, _ = _half_inputs(v, dtname)
    leaves = [ts[n] for n in T._grad_inputs(v)]
    for t in leaves:
        t.requires_grad_(True)
    with lucid.autocast(dtype=getattr(lucid, dtname)):
        outs = T._as_list(T._eval(v, "call", dict(ts, lucid=lucid, np=np, math=math)))
    total = sum(o.float().sum() for o in outs if o.dtype.is_floating_point and o.requires_grad)
    if not isinstance(total, lucid.Tensor):
        pytest.skip("no differentiable output")
    total.backward()
    for t in leaves:
        assert t.grad is None or t.grad.dtype is t.dtype, (T._vid(v), t.grad.dtype, t.dtype)


# ===================================================================== autocast itself
def _mm_inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((8, 16)).astype(np.float32),
            rng.standard_normal((16, 4)).astype(np.float32))


@pytest.mark.parametrize("dtname", HALF)
def test_matmul_family_runs_in_the_autocast_dtype(dtname):
    a, b = _mm_inputs()
    dt = getattr(lucid, dtname)
    la, lb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    with lucid.autocast(dtype=dt):
        y = la @ lb
        assert lucid.dot(la[0], lb[:, 0]).dtype is dt
        assert lucid.outer(la[0], lb[0]).dtype is dt
        assert lucid.matmul(la.double(), lb.double()).dtype is lucid.float64   # as PyTorch
        assert (la + la).dtype is lucid.float32              # elementwise: ordinary promotion
        assert lucid.exp(la.to(dt)).dtype is lucid.float32   # ForceFP32
        assert lucid.matmul(la.to(dt), lb).dtype is dt       # mixed: the policy, not promotion
    assert y.dtype is dt
    want = (_half_array(a, dtname).astype(np.float64) @ _half_array(b, dtname).astype(np.float64))
    _close(y.detach().float().numpy(), want, dtname, "matmul")
    y.float().sum().backward()
    assert la.grad.dtype is lucid.float32 and lb.grad.dtype is lucid.float32
    # outside autocast: ordinary promotion
    assert (la @ lb).dtype is lucid.float32


@pytest.mark.parametrize("dtname", HALF)
def test_matmul_and_linear_vs_torch_autocast(torch, dtname):
    a, b = _mm_inputs()
    tdt = getattr(torch, dtname)
    with torch.autocast("cpu", dtype=tdt):
        want = torch.from_numpy(a) @ torch.from_numpy(b)
        lin = torch.nn.functional.linear(torch.from_numpy(a), torch.from_numpy(b.T.copy()),
                                         torch.ones(4))
    with lucid.autocast(dtype=getattr(lucid, dtname)):
        got = lucid.tensor(a) @ lucid.tensor(b)
        lgot = lucid.nn.functional.linear(lucid.tensor(a), lucid.tensor(b.T.copy()),
                                          lucid.ones(4))
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    assert str(lgot.dtype).split(".")[1] == str(lin.dtype).split(".")[1]
    _close(got.float().numpy(), want.float().numpy(), dtname, "matmul vs torch")
    _close(lgot.float().numpy(), lin.float().numpy(), dtname, "linear vs torch")


def test_nn_linear_under_autocast_keeps_float32_master_weights():
    lucid.manual_seed(0)
    layer = lucid.nn.Linear(5, 3)
    x = lucid.randn(4, 5)
    with lucid.autocast():
        y = layer(x)
    assert y.dtype is lucid.float16
    y.float().sum().backward()
    assert layer.weight.grad.dtype is lucid.float32 and layer.bias.grad.dtype is lucid.float32


def test_autocast_nesting_disable_and_restore():
    assert not lucid.is_autocast_enabled() and lucid.get_autocast_dtype() is None
    with lucid.autocast(dtype=lucid.bfloat16):
        assert lucid.get_autocast_dtype() is lucid.bfloat16
        with lucid.autocast(dtype=lucid.float16):
            assert lucid.get_autocast_dtype() is lucid.float16
            with lucid.autocast(enabled=False):
                assert not lucid.is_autocast_enabled()
                assert (lucid.ones(2, 2) @ lucid.ones(2, 2)).dtype is lucid.float32
            assert lucid.get_autocast_dtype() is lucid.float16
        assert lucid.get_autocast_dtype() is lucid.bfloat16
    assert not lucid.is_autocast_enabled()
    with pytest.raises(ZeroDivisionError):
        with lucid.autocast():
            1 / 0
    assert not lucid.is_autocast_enabled()      # restored on an exception


def test_autocast_decorator():
    @lucid.autocast(dtype=lucid.bfloat16)
    def f(a, b):
        return a @ b, lucid.get_autocast_dtype()

    y, inside = f(lucid.ones(2, 3), lucid.ones(3, 2))
    assert y.dtype is lucid.bfloat16 and inside is lucid.bfloat16
    assert not lucid.is_autocast_enabled()

    @lucid.autocast(enabled=False)
    def g():
        return lucid.is_autocast_enabled()

    with lucid.autocast():
        assert g() is False
        assert lucid.is_autocast_enabled()


def test_autocast_is_thread_local():
    seen = {}
    started, release = threading.Event(), threading.Event()

    def worker():
        seen["start"] = lucid.get_autocast_dtype()        # a new thread starts with it off
        with lucid.autocast(dtype=lucid.float16):
            started.set()
            release.wait(10)
            seen["inside"] = (lucid.ones(2, 2) @ lucid.ones(2, 2)).dtype

    with lucid.autocast(dtype=lucid.bfloat16):
        th = threading.Thread(target=worker)
        th.start()
        assert started.wait(10)
        assert lucid.get_autocast_dtype() is lucid.bfloat16    # not the other thread's
        release.set()
        th.join()
    assert seen == {"start": None, "inside": lucid.float16}
    assert not lucid.is_autocast_enabled()


def test_autocast_rejects_bad_dtypes():
    for bad in (lucid.float32, lucid.int64, "float64"):
        with pytest.raises(TypeError):
            lucid.autocast(dtype=bad)
    with pytest.raises(TypeError):
        lucid.autocast(enabled="yes")


# ============================================================================ bfloat16
def test_bfloat16_storage_and_conversions():
    x = lucid.tensor([1.0, 2.5, -3.0, 1e30], dtype=lucid.bfloat16)
    assert x.dtype is lucid.bfloat16 and x.element_size() == 2
    assert x.numpy().dtype == np.dtype(ml_dtypes.bfloat16)
    assert x.tolist() == [1.0, 2.5, -3.0, float(np.float32(ml_dtypes.bfloat16(1e30)))]
    assert "dtype=lucid.bfloat16" in repr(x)
    a = np.array([0.1, 0.2], dtype=ml_dtypes.bfloat16)
    t = lucid.from_numpy(a)
    assert t.dtype is lucid.bfloat16 and np.shares_memory(t.numpy(), a)
    assert np.asarray(t).dtype == a.dtype
    assert lucid.tensor(a).dtype is lucid.bfloat16
    assert lucid.tensor([np.float32(1.5)], dtype="bfloat16").dtype is lucid.bfloat16
    assert x.float().dtype is lucid.float32 and lucid.ones(2).bfloat16().dtype is lucid.bfloat16
    assert pickle.loads(pickle.dumps(x)).tolist() == x.tolist()
    buf = io.BytesIO()
    lucid.save({"w": x, "h": x.half()}, buf)
    buf.seek(0)
    back = lucid.load(buf)
    assert back["w"].dtype is lucid.bfloat16 and back["w"].tolist() == x.tolist()
    assert back["h"].dtype is lucid.float16
    assert lucid.zeros(3, dtype=lucid.bfloat16).dtype is lucid.bfloat16


DTS = ["bool_", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("a", DTS)
@pytest.mark.parametrize("b", DTS)
def test_bfloat16_promotion_vs_torch(torch, a, b):
    tdt = {"bool_": torch.bool}
    ta = torch.ones(2, dtype=tdt.get(a, getattr(torch, a.rstrip("_"))))
    tb = torch.ones(2, dtype=tdt.get(b, getattr(torch, b.rstrip("_"))))
    want = str((ta + tb).dtype).replace("torch.", "")
    got = (lucid.ones(2, dtype=getattr(lucid, a)) + lucid.ones(2, dtype=getattr(lucid, b))).dtype
    assert got.name.rstrip("_") == want, (a, b, got, want)
    # a Python scalar does not change a half tensor's dtype; a 0-d float32 tensor neither
    if a in HALF:
        assert (lucid.ones(2, dtype=getattr(lucid, a)) * 2.5).dtype.name == a
        assert (lucid.ones(2, dtype=getattr(lucid, a)) * lucid.tensor(2.5)).dtype.name == a


# ======================================================================= half kernels
def test_conversions_match_numpy_and_ml_dtypes():
    bits = np.arange(1 << 16, dtype=np.uint16)
    for name in HALF:
        h = bits.view(NP_HALF[name])
        got = lucid.from_numpy(h).float().numpy()
        want = h.astype(np.float32)
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), name
        rng = np.random.default_rng(1)
        f = rng.integers(0, 1 << 32, 300_001, dtype=np.uint64).astype(np.uint32).view(np.float32)
        f = np.concatenate([f, np.float32([65504, 65519.99, 65520, 2 ** -25, 3 * 2 ** -26,
                                           1e-45, -0.0, np.inf, -np.inf, np.nan])])
        got = lucid.from_numpy(f).to(getattr(lucid, name)).numpy()
        with np.errstate(all="ignore"):
            want = f.astype(NP_HALF[name])
        nan = np.isnan(f)
        assert (got.view(np.uint16) == want.view(np.uint16))[~nan].all(), name
        assert np.isnan(got[nan].astype(np.float32)).all()


@pytest.mark.parametrize("dtname", HALF)
@pytest.mark.parametrize("n", [1, 15, 17, 1023, 1025, 70_001])
def test_half_unary_kernel_lengths_and_layouts(dtname, n):
    rng = np.random.default_rng(n)
    x = _half_array(rng.uniform(-4, 4, n), dtname)
    for op, ref in (("tanh", np.tanh), ("sin", np.sin), ("sqrt", None)):
        xx = np.abs(x) if op == "sqrt" else x
        want = (np.sqrt if ref is None else ref)(xx.astype(np.float32)).astype(NP_HALF[dtname])
        got = getattr(lucid, op)(lucid.tensor(xx)).numpy()
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        ulp = np.abs(np.spacing(want)).astype(np.float64)
        assert (diff <= ulp).all(), (op, n)
    if n > 2:   # a strided view
        got = lucid.tanh(lucid.tensor(x)[::2]).numpy()
        want = np.tanh(x[::2].astype(np.float32)).astype(NP_HALF[dtname])
        assert (np.abs(got.astype(np.float64) - want.astype(np.float64))
                <= np.abs(np.spacing(want)).astype(np.float64)).all()


@pytest.mark.parametrize("dtname", HALF)
@pytest.mark.parametrize("n", [3, 1025, 50_000])
def test_half_binary_kernels_round_once(dtname, n):
    """a op b for half operands is the float32 result rounded once: bit for bit what
    NumPy gives in float32 then rounded (float32 arithmetic is exact IEEE)."""
    rng = np.random.default_rng(n)
    a = _half_array(rng.uniform(-100, 100, n), dtname)
    b = _half_array(rng.uniform(0.5, 100, n), dtname)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    la, lb = lucid.tensor(a), lucid.tensor(b)
    for got, want in ((la + lb, a32 + b32), (la - lb, a32 - b32), (la * lb, a32 * b32),
                      (la / lb, a32 / b32), (la * 3.5, a32 * np.float32(3.5)),
                      (2.0 - la, np.float32(2.0) - a32), (lucid.add(la, lb, alpha=2.5),
                                                          a32 + np.float32(2.5) * b32)):
        assert got.dtype.name == dtname
        assert np.array_equal(got.numpy().view(np.uint16), want.astype(NP_HALF[dtname]).view(np.uint16))
    # As PyTorch, an integer operand takes the half result dtype first: 65520 is inf in
    # float16 (0 * inf = nan) and 65536 in bfloat16 (0 * 65536 = 0)
    z = lucid.zeros(2, dtype=getattr(lucid, dtname)) * lucid.tensor([65520, 1], dtype=lucid.int32)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.float32(0) * np.array([65520, 1]).astype(NP_HALF[dtname]).astype(np.float32)
    np.testing.assert_array_equal(z.numpy().astype(np.float32), want)


@pytest.mark.parametrize("dtname", HALF)
def test_half_tensors_use_half_the_memory(dtname):
    x = lucid.zeros(1000, dtype=getattr(lucid, dtname))
    assert x.numpy().nbytes == 2000 and lucid.zeros(1000).numpy().nbytes == 4000


# ========================================================================== GradScaler
def _torch_sgd_pair(torch, steps):
    """Run the same schedule of gradients through torch's and lucid's GradScaler + SGD;
    None in ``steps`` marks an iteration whose gradient holds inf."""
    w0 = np.array([0.5, -1.0, 2.0], np.float32)
    tw = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    topt = torch.optim.SGD([tw], lr=0.1)
    ts = torch.amp.GradScaler("cpu", init_scale=8.0, growth_factor=2.0, backoff_factor=0.5,
                              growth_interval=3)
    lw = lucid.tensor(w0.copy(), requires_grad=True)
    lopt = lucid.optim.SGD([lw], lr=0.1)
    ls = lucid.amp.GradScaler(init_scale=8.0, growth_factor=2.0, backoff_factor=0.5,
                              growth_interval=3)
    log = []
    for k in steps:
        topt.zero_grad()
        lopt.zero_grad()
        coef = np.float32(k if k is not None else np.inf)
        ts.scale((tw * torch.tensor(coef)).sum()).backward()
        ls.scale((lw * lucid.tensor(coef)).sum()).backward()
        tr = ts.step(topt)
        lr_ = ls.step(lopt)
        ts.update()
        ls.update()
        log.append((ts.get_scale(), ls.get_scale(), tw.detach().numpy().copy(),
                    lw.detach().numpy().copy(), tr is None, lr_ is None))
    return log, ts, ls


def test_grad_scaler_matches_torch(torch):
    steps = [1.0, 2.0, None, 0.5, 1.0, 1.0, 1.0, None, None, 3.0, 1.0, 1.0, 1.0]
    log, ts, ls = _torch_sgd_pair(torch, steps)
    for i, (tscale, lscale, tw, lw, tskip, lskip) in enumerate(log):
        assert tscale == lscale, (i, tscale, lscale)
        np.testing.assert_allclose(lw, tw, rtol=1e-6, err_msg=f"step {i}")
    tsd, lsd = ts.state_dict(), ls.state_dict()
    for k in ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"):
        assert float(lsd[k]) == float(tsd[k]), k


def test_grad_scaler_unit_behaviour():
    s = lucid.amp.GradScaler()
    assert s.get_scale() == 2.0 ** 16
    w = lucid.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * 3).sum()
    scaled = s.scale(loss)
    assert scaled.item() == pytest.approx(loss.item() * 2 ** 16)
    scaled.backward()
    assert w.grad.tolist() == [3 * 2 ** 16] * 2
    opt = lucid.optim.SGD([w], lr=1.0)
    s.unscale_(opt)
    assert w.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    assert w.detach().tolist() == [-2.0, -1.0]
    s.update()
    assert s.get_scale() == 2.0 ** 16
    # a plain list of parameters: step unscales and says whether to apply the update
    p = lucid.tensor([1.0], requires_grad=True)
    s.scale((p * float("nan")).sum()).backward()
    assert s.step([p]) is False
    s.update()
    assert s.get_scale() == 2.0 ** 15
    p.grad = None
    s.scale((p * 2).sum()).backward()
    assert s.step([p]) is True and p.grad.tolist() == [2.0]
    s.update(new_scale=4.0)
    assert s.get_scale() == 4.0
    sd = s.state_dict()
    s2 = lucid.amp.GradScaler(init_scale=1.0)
    s2.load_state_dict(sd)
    assert s2.state_dict() == sd
    off = lucid.amp.GradScaler(enabled=False)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(ValueError):
        lucid.amp.GradScaler(growth_factor=0.5)


def test_grad_scaler_float16_gradients_do_not_underflow():
    """A gradient of 1e-8 through a float16 part of the graph flushes to 0 unscaled;
    scaled by 2**16 it survives, and the float32 master weight gets it back unscaled."""
    a = lucid.tensor([1e-4], dtype=lucid.float16)

    def loss_of(w):
        return ((w.half() * a) * a).float().sum()

    w = lucid.tensor([1.0], requires_grad=True)
    loss_of(w).backward()
    assert w.grad.item() == 0.0
    w.grad = None
    s = lucid.amp.GradScaler(init_scale=2.0 ** 14)   # (2**16 itself overflows float16)
    s.scale(loss_of(w)).backward()
    assert s.step([w]) is True
    want = float(np.float16(1e-4)) ** 2
    assert w.grad.dtype is lucid.float32 and w.grad.item() == pytest.approx(want, rel=2e-3)


def test_train_spirals_in_float16_with_grad_scaler():
    """The spirals classifier of examples/train_classifier.py: float32 master weights,
    the forward in float16 under autocast, GradScaler; it reaches the float32 accuracy."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "examples"))
    import train_classifier as ex

    def run(amp):
        lucid.manual_seed(0)
        x_np, y_np = ex.spirals()
        perm = np.random.default_rng(1).permutation(len(y_np))
        x_np, y_np = x_np[perm], y_np[perm]
        x, y = lucid.from_numpy(x_np), lucid.from_numpy(y_np)
        model = ex.MLP()
        loss_fn = lucid.nn.CrossEntropyLoss()
        opt = lucid.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        scaler = lucid.amp.GradScaler(enabled=amp)
        for _ in range(600):
            opt.zero_grad()
            with lucid.autocast(dtype=lucid.float16, enabled=amp):
                out = model(x)
                if amp:
                    assert out.dtype is lucid.float16
                loss = loss_fn(out, y)
            assert loss.dtype is lucid.float32
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        with lucid.no_grad(), lucid.autocast(dtype=lucid.float16, enabled=amp):
            acc = (lucid.argmax(model(x), dim=1) == y).float().mean().item()
        for p in model.parameters():
            assert p.dtype is lucid.float32
        return acc, scaler.get_scale()

    acc32, _ = run(False)
    acc16, scale = run(True)
    assert acc32 > 0.9
    assert acc16 >= acc32 - 0.02, (acc16, acc32)
    assert scale >= 1.0
