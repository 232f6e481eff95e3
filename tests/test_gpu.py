"""The gpu device (MLX), tested on MLX's CPU stream (LUCID_MLX_DEVICE=cpu): the same
code a Metal or CUDA GPU runs, only the final mx.Device differs.

Every op of the op tables runs on both devices and the gpu path is compared with the
cpu path (itself tested against NumPy, SciPy, mpmath and torch elsewhere): forward
values and dtypes, first derivatives (backward with random upstream weights) and
second derivatives (autograd.grad with create_graph=True, then backward).

Tolerances follow MLX's own float32 accuracy, measured on this machine: erf to about
3e-7 absolute, exp about 2e-6 relative; so float32 compares at rtol 2e-5 (scaled by
the values' magnitude), float64 at 1e-9, except the rows in ``GPU_TOL``.
"""
import os

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("mlx.core")

import lucid  # noqa: E402
from op_data import unary_rows  # noqa: E402
from test_ops_table import (VARIANTS, _as_list, _eval, _grad, _grad_inputs, _inputs,  # noqa: E402
                            _vid)

if not lucid.gpu_available():
    pytest.skip("MLX has no device here (set LUCID_MLX_DEVICE=cpu)", allow_module_level=True)

import math  # noqa: E402
import re  # noqa: E402

RTOL = {"float32": 2e-5, "float64": 1e-9}
# Rows whose gpu kernel is an MLX composition with a looser bound than MLX's builtins,
# {name: {dtype: rtol}} (relative to max(1, |values|)).
GPU_TOL = {
    "erfc": {"float32": 1e-6},     # 1 - erf(x): absolute, not relative, accuracy
    "cbrt": {"float32": 5e-5},
    "exp2": {"float32": 5e-5},
    "hypot": {"float32": 5e-5},
    "tan": {"float32": 1e-4},
    "erfinv": {"float32": 1e-4},
    "selu": {"float32": 5e-5},
    "gelu_tanh": {"float32": 5e-5},
}
# MLX's float64 transcendental functions on its CPU stream are float32-accurate
# (measured here: exp 1.2e-6 relative, erf 3.6e-7, sin/cos 2.4e-7, erfinv 3.3e-7);
# the rows built on them get a float32-sized bound in float64.
for _n in ("erf", "exp", "sin", "cos", "erfc", "erfinv", "sigmoid", "softplus", "gelu", "silu",
           "mish", "exp2", "expm1", "tan", "sinh", "cosh", "tanh", "selu", "elu", "logaddexp",
           "log_softmax", "logsumexp", "softmax", "pow_tensor", "pow_rscalar", "atan2", "hypot",
           "gelu_tanh", "cbrt", "norm", "std", "var"):
    GPU_TOL.setdefault(_n, {}).setdefault("float64", 5e-6)
# The special functions composed from MLX primitives (lucid/_core/mlx_special.py): float32
# accurate by construction, and their float64 rides on MLX's float32-accurate exp/log.
for _n in ("lgamma", "digamma", "sinc", "i0", "erfcx", "log_ndtr", "ndtri"):
    GPU_TOL.setdefault(_n, {}).update(float32=5e-5, float64=2e-5)
DTYPES = ("float32", "float64")


def _tol(name, dt):
    return GPU_TOL.get(name, {}).get(dt, RTOL[dt])


def _close(got, want, rtol, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if want.dtype.kind == "f":
        fin = np.isfinite(want)
        scale = max(1.0, float(np.max(np.abs(want[fin]), initial=0.0)))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=rtol * scale, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _host(t):
    return t.detach().cpu().numpy() if isinstance(t, lucid.Tensor) else np.asarray(t)


def _tensors(arrs, device, grad_names):
    return {n: lucid.tensor(a, device=device, requires_grad=(n in grad_names))
            for n, a in arrs.items()}


def _run(call, arrs, device, grad_names=(), args=None):
    ts = _tensors(arrs, device, grad_names)
    env = dict(args or {})
    env.update(ts, lucid=lucid, np=np, math=math)
    with np.errstate(all="ignore"):
        outs = _as_list(eval(call, env))
    return ts, outs


def _weights(outs, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 1.5, tuple(o.shape)) if o.dtype.is_floating_point else None
            for o in outs]


def _loss(outs, ws, device):
    total = None
    for o, w in zip(outs, ws):
        if w is None or not o.requires_grad:
            continue
        term = (o * lucid.tensor(w, dtype=o.dtype, device=device)).sum()
        total = term if total is None else total + term
    return total


def _check_devices(outs, device):
    for o in outs:
        if isinstance(o, lucid.Tensor):
            assert o.device == device, (o.device, device)


def _compare_all(name, call, arrs, dt, grad_names, args=None, second=True):
    """forward, gradient and second derivative of ``call`` on the gpu vs the cpu."""
    rtol = _tol(name, dt)
    tc, oc = _run(call, arrs, "cpu", grad_names, args)
    tg, og = _run(call, arrs, "gpu", grad_names, args)
    _check_devices(og, "gpu")
    assert len(oc) == len(og)
    for k, (c, g) in enumerate(zip(oc, og)):
        if isinstance(c, lucid.Tensor):
            assert g.dtype is c.dtype, f"{name} output {k}: {g.dtype} on gpu, {c.dtype} on cpu"
        hg, hc = _host(g), _host(c)
        assert hg.dtype == hc.dtype, f"{name} output {k}: MLX holds {hg.dtype}, cpu {hc.dtype}"
        _close(hg, hc, rtol, f"{name} output {k}")
    if not grad_names:
        return
    ws = _weights(oc, 7)
    lc, lg = _loss(oc, ws, "cpu"), _loss(og, ws, "gpu")
    if lc is None:
        return
    gc = lucid.autograd.grad(lc, [tc[n] for n in grad_names], create_graph=second,
                             allow_unused=True)
    gg = lucid.autograd.grad(lg, [tg[n] for n in grad_names], create_graph=second,
                             allow_unused=True)
    for n, a, b in zip(grad_names, gc, gg):
        assert (a is None) == (b is None), n
        if a is not None:
            assert b.device == "gpu"
            _close(_host(b), _host(a), rtol * 10, f"d {name} / d {n}")
    if not second:
        return
    # second derivative: d/dx sum(grad * v)
    pairs = [(a, b, n) for a, b, n in zip(gc, gg, grad_names)
             if a is not None and a.requires_grad and b.requires_grad]
    if not pairs:
        return
    rng = np.random.default_rng(11)
    vs = [rng.uniform(0.5, 1.5, tuple(a.shape)) for a, _, _ in pairs]
    sc = sum((a * lucid.tensor(v, dtype=a.dtype)).sum() for (a, _, _), v in zip(pairs, vs))
    sg = sum((b * lucid.tensor(v, dtype=b.dtype, device="gpu")).sum()
             for (_, b, _), v in zip(pairs, vs))
    hc = lucid.autograd.grad(sc, [tc[n] for n in grad_names], allow_unused=True)
    hg = lucid.autograd.grad(sg, [tg[n] for n in grad_names], allow_unused=True)
    for n, a, b in zip(grad_names, hc, hg):
        if a is None or b is None:
            assert a is None or not np.any(_host(a)), f"d2 {name} / d {n}: missing on gpu"
            continue
        _close(_host(b), _host(a), rtol * 20, f"d2 {name} / d {n}^2")


# -- the unary table -----------------------------------------------------------------------

UNARY = unary_rows()


def _cpu_only_row(row):
    """Rows without an MLX kernel (lgamma, ...) raise lucid's cpu-only error on the gpu."""
    if lucid.ops.schema(row["name"]).gpu is not None:
        return False
    with pytest.raises(lucid.LucidError, match=f"lucid.{row['name']} does not run on the gpu"):
        getattr(lucid, row["name"])(lucid.tensor([0.5], device="gpu"))
    return True


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("row", UNARY, ids=[r["name"] for r in UNARY])
def test_unary_row_gpu_matches_cpu(row, dt):
    if _cpu_only_row(row):
        return
    lo, hi = row["domain"]
    x = np.random.default_rng(3).uniform(lo, hi, (4, 5)).astype(dt)
    grad = ("x",) if row["saves"] else ()
    _compare_all(row["name"], f"lucid.{row['name']}(x)", {"x": x}, dt, grad)


@pytest.mark.parametrize("row", UNARY, ids=[r["name"] for r in UNARY])
def test_unary_row_gpu_special_values(row):
    if _cpu_only_row(row):
        return
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], dtype=np.float32)
    c = getattr(lucid, row["name"])(lucid.tensor(x))
    g = getattr(lucid, row["name"])(lucid.tensor(x, device="gpu"))
    _close(_host(g), _host(c), _tol(row["name"], "float32"), row["name"])


# -- the other ops' table (tests/op_data.py OPS) --------------------------------------------

def _op_cases():
    out = []
    for v in VARIANTS:
        for dt in DTYPES:
            out.append(pytest.param(v, dt, id=f"{_vid(v)}-{dt}"))
    return out


@pytest.mark.parametrize("v,dt", _op_cases())
def test_op_row_gpu_matches_cpu(v, dt):
    arrs = _inputs(v, dt)
    if v.get("gpu"):          # the row says why it cannot run there: a clear error
        with pytest.raises(lucid.LucidError, match="gpu"):
            _run(v["call"], arrs, "gpu", (), v.get("args"))
        return
    grad = tuple(_grad_inputs(v)) if _grad(v) else ()
    second = "gradgrad" not in v.get("limits", {}) and v["name"] not in ("prod", "cumprod")
    _compare_all(v["name"], v["call"], arrs, dt, grad, v.get("args"), second)


# -- the device API ---------------------------------------------------------------------------

def test_devices_and_aliases():
    for name in ("gpu", "metal", "cuda", "gpu:0"):
        t = lucid.ones(2, device=name)
        assert t.device == "gpu" and t.device == lucid.device("gpu") and t.is_cuda
    assert lucid.tensor([1.0]).device == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        lucid.ones(2, device="tpu")


def test_creation_functions_take_device():
    makers = [lambda d: lucid.zeros(2, 3, device=d), lambda d: lucid.ones(2, device=d),
              lambda d: lucid.full((2,), 3.0, device=d), lambda d: lucid.arange(5, device=d),
              lambda d: lucid.linspace(0, 1, 4, device=d), lambda d: lucid.eye(3, device=d),
              lambda d: lucid.empty(2, device=d)]
    for mk in makers:
        c, g = mk("cpu"), mk("gpu")
        assert g.device == "gpu" and g.dtype is c.dtype and g.shape == c.shape
    lucid.manual_seed(5)
    a = lucid.randn(3, 4, device="gpu")
    lucid.manual_seed(5)
    b = lucid.randn(3, 4)
    np.testing.assert_array_equal(a.cpu().numpy(), b.numpy())
    z = lucid.zeros_like(a)
    assert z.device == "gpu"


def test_round_trip_is_exact_and_keeps_dtype():
    import ml_dtypes
    for dt in (np.float32, np.float64, np.int32, np.int64, np.bool_, np.float16,
               ml_dtypes.bfloat16):
        a = (np.random.default_rng(0).standard_normal((3, 4)) * 100).astype(dt)
        t = lucid.from_numpy(a).to("gpu")
        assert t.device == "gpu" and t.dtype.numpy_dtype == np.dtype(dt)
        back = t.to("cpu").numpy()
        assert back.dtype == a.dtype
        np.testing.assert_array_equal(back, a)


def test_to_device_and_dtype_together():
    t = lucid.tensor([1.5, 2.5])
    g = t.to("gpu", lucid.float64)
    assert g.device == "gpu" and g.dtype is lucid.float64
    assert t.to(device="gpu", dtype=lucid.float16).dtype is lucid.float16
    assert g.gpu() is g and t.cpu() is t
    assert t.gpu().cpu().tolist() == [1.5, 2.5]


def test_values_evaluated_when_needed():
    g = lucid.tensor([1.0, 2.0], device="gpu")
    y = lucid.exp(g) + 1
    assert y.item() if y.numel() == 1 else True
    assert abs(y.tolist()[1] - (math.exp(2.0) + 1)) < 1e-5
    assert "device='gpu'" in repr(y)
    y.eval()
    lucid.eval(y, g)
    s = y.sum()
    assert abs(float(s) - (math.exp(1.0) + math.exp(2.0) + 2)) < 1e-4


def test_mixing_devices_names_both():
    c, g = lucid.ones(2), lucid.ones(2, device="gpu")
    with pytest.raises(lucid.LucidError, match="gpu and cpu"):
        c + g
    with pytest.raises(lucid.LucidError, match="gpu and cpu"):
        lucid.mul(g, c)


def test_numpy_never_pulls_gpu_silently():
    g = lucid.ones(3, device="gpu")
    with pytest.raises(TypeError, match="gpu"):
        np.asarray(g)
    np.testing.assert_array_equal(g.numpy(), np.ones(3, np.float32))


def test_gradient_flows_across_devices():
    x = lucid.tensor([0.3, -1.2, 2.0], requires_grad=True)
    y = (lucid.sin(x.to("gpu")) * 3.0).cpu()
    (y * y).sum().backward()
    want = 2 * (3 * np.sin(x.detach().numpy())) * 3 * np.cos(x.detach().numpy())
    assert x.grad.device == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5)


def test_backward_evaluates_leaf_gradients_and_keeps_them_on_gpu():
    w = lucid.tensor(np.linspace(-1, 1, 6).reshape(2, 3), device="gpu", requires_grad=True)
    for _ in range(3):
        w.grad = None
        loss = (lucid.tanh(w) * w).sum()
        loss.backward()
    assert w.grad.device == "gpu"
    wn = np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)
    want = np.tanh(wn) + wn * (1 - np.tanh(wn) ** 2)
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5)


def test_create_graph_stays_on_gpu():
    x = lucid.tensor([0.5, 1.5], device="gpu", requires_grad=True)
    (g,) = lucid.autograd.grad((x ** 3).sum(), [x], create_graph=True)
    assert g.device == "gpu" and g.requires_grad
    (h,) = lucid.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(h.numpy(), 6 * np.array([0.5, 1.5]), rtol=1e-5)


def test_without_a_gpu_asking_for_one_is_an_error(monkeypatch, tmp_path):
    import subprocess
    import sys
    code = ("import lucid\n"
            "print(lucid.gpu_available())\n"
            "try:\n    lucid.ones(2, device='gpu')\nexcept lucid.LucidError as e:\n"
            "    print('error:', e)\n")
    env = dict(os.environ, LUCID_MLX_DEVICE="gpu",
               PYTHONPATH=os.path.dirname(os.path.dirname(lucid.__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    import mlx.core as mx
    if mx.is_available(mx.gpu):
        pytest.skip("this machine has a GPU")
    assert out.stdout.splitlines()[0] == "False", out.stderr
    assert "no GPU" in out.stdout and "LUCID_MLX_DEVICE=cpu" in out.stdout


def test_spirals_classifier_trains_on_gpu_as_on_cpu():
    import runpy
    path = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "train_classifier.py")
    mod = runpy.run_path(path)
    acc_cpu = mod["main"]("cpu")
    acc_gpu = mod["main"]("gpu")
    assert acc_cpu > 0.9
    assert abs(acc_gpu - acc_cpu) <= 0.02, (acc_gpu, acc_cpu)


def test_optimizers_step_gpu_parameters_as_on_cpu():
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    makers = [lambda p: lucid.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
              lambda p: lucid.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.1),
              lambda p: lucid.optim.Adam(p, lr=0.05, amsgrad=True, weight_decay=0.01),
              lambda p: lucid.optim.AdamW(p, lr=0.05),
              lambda p: lucid.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True),
              lambda p: lucid.optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.1)]
    for mk in makers:
        out = {}
        for dev in ("cpu", "gpu"):
            w = lucid.nn.Parameter(lucid.tensor(w0, device=dev))
            opt = mk([w])
            xs = lucid.tensor(x, device=dev)
            for _ in range(4):
                opt.zero_grad()
                (lucid.tanh(xs @ w) ** 2).sum().backward()
                opt.step()
            assert w.device == dev
            out[dev] = w.detach().cpu().numpy()
        np.testing.assert_allclose(out["gpu"], out["cpu"], rtol=2e-5, atol=2e-6,
                                   err_msg=type(opt).__name__)


def test_backward_of_a_chain_is_one_mlx_evaluation(monkeypatch):
    import mlx.core as mx
    calls = []
    real = mx.eval
    monkeypatch.setattr(mx, "eval", lambda *a: (calls.append(len(a)), real(*a))[1])
    x = lucid.tensor(np.linspace(-1, 1, 50), device="gpu", requires_grad=True)
    y = x
    for _ in range(10):
        y = lucid.tanh(lucid.sin(y) * 1.5 + 0.25)
    loss = y.sum()
    assert calls == []                 # the forward stays lazy
    loss.backward()
    assert calls == [1], calls         # one evaluation, for the one leaf gradient


def _nn_cases():
    from lucid import nn
    import lucid.nn.functional as F
    return {
        "Linear": (lambda: nn.Linear(8, 5), (4, 8)),
        "LayerNorm": (lambda: nn.LayerNorm(8), (4, 8)),
        "BatchNorm1d": (lambda: nn.BatchNorm1d(8), (4, 8)),
        "BatchNorm2d": (lambda: nn.BatchNorm2d(3), (2, 3, 6, 6)),
        "Conv1d": (lambda: nn.Conv1d(3, 4, 3, padding=1), (2, 3, 10)),
        "Conv2d": (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 8, 8)),
        "ConvTranspose2d": (lambda: nn.ConvTranspose2d(3, 2, 3, stride=2), (2, 3, 5, 5)),
        "MaxPool2d": (lambda: nn.MaxPool2d(2), (2, 3, 8, 8)),
        "AvgPool2d": (lambda: nn.AvgPool2d(2), (2, 3, 8, 8)),
        "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 7, 6)),
        "MultiheadAttention": (lambda: _MHA(), (2, 5, 8)),
        "GELU": (lambda: nn.GELU(), (4, 8)),
        "Dropout": (lambda: nn.Dropout(0.3), (4, 8)),      # same seed, same mask
        "Embedding_sum": (lambda: _Fn(lambda x: nn.functional.embedding(
            lucid.tensor([[1, 0], [2, 2]], device=x.device), x)), (3, 4)),
        "interpolate": (lambda: _Fn(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear")),
                        (1, 2, 4, 4)),
        "sdpa_causal": (lambda: _Fn(lambda x: F.scaled_dot_product_attention(x, x, x,
                                                                             is_causal=True)),
                        (2, 5, 8)),
        "cross_entropy": (lambda: _Fn(lambda x: F.cross_entropy(
            x, lucid.tensor([0, 2, 1, 4], device=x.device), label_smoothing=0.1)), (4, 5)),
        "one_hot_mse": (lambda: _Fn(lambda x: F.mse_loss(
            x, F.one_hot(lucid.tensor([0, 2, 1, 4], device=x.device), 5).to(x.dtype))), (4, 5)),
    }


class _Fn:
    def __init__(self, f):
        self.f = f

    def to(self, device):
        return self

    def parameters(self):
        return []

    def __call__(self, x):
        return self.f(x)


def _MHA():
    from lucid import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.att = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x):
            return self.att(x, x, x, need_weights=False)[0]
    return M()


@pytest.mark.parametrize("name", list(_nn_cases()))
def test_nn_layers_on_gpu_match_cpu(name):
    make, shape = _nn_cases()[name]
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    out = {}
    for dev in ("cpu", "gpu"):
        lucid.manual_seed(0)
        m = make().to(dev)
        xt = lucid.tensor(x, device=dev, requires_grad=True)
        y = m(xt)
        assert y.device == dev
        w = lucid.tensor(np.linspace(0.5, 1.5, int(np.prod(y.shape))).reshape(tuple(y.shape)),
                         dtype=y.dtype, device=dev)
        (y * w).sum().backward()
        out[dev] = [y] + [xt.grad] + [p.grad for p in m.parameters()]
    for k, (c, g) in enumerate(zip(out["cpu"], out["gpu"])):
        _close(_host(g), _host(c), 1e-4, f"{name} tensor {k}")


def test_autocast_and_grad_scaler_on_gpu():
    rng = np.random.default_rng(6)
    x0, w0 = rng.standard_normal((4, 8)), rng.standard_normal((8, 3))
    got = {}
    for dev in ("cpu", "gpu"):
        x = lucid.tensor(x0, dtype=lucid.float32, device=dev, requires_grad=True)
        w = lucid.tensor(w0, dtype=lucid.float32, device=dev, requires_grad=True)
        with lucid.autocast(dtype=lucid.bfloat16):
            y = x @ w
            assert y.dtype is lucid.bfloat16 and y.device == dev      # Promote: autocast dtype
            z = lucid.exp(y)
            assert z.dtype is lucid.float32                             # ForceFP32
        z.sum().backward()
        assert x.grad.dtype is lucid.float32 and x.grad.device == dev  # the leaf's dtype
        got[dev] = (y.detach().float().cpu().numpy(), x.grad.cpu().numpy())
    for a, b in zip(got["gpu"], got["cpu"]):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=1e-2)
    m = lucid.nn.Linear(8, 3).to("gpu")
    opt = lucid.optim.SGD(m.parameters(), lr=0.1)
    scaler = lucid.amp.GradScaler()
    with lucid.autocast(dtype=lucid.float16):
        loss = m(lucid.tensor(x0, device="gpu", dtype=lucid.float32)).float().pow(2).mean()
    scaler.scale(loss).backward()
    before = m.weight.detach().cpu().numpy().copy()
    scaler.step(opt)
    scaler.update()
    assert m.weight.device == "gpu"
    assert not np.allclose(m.weight.detach().cpu().numpy(), before)


def test_without_mlx_lucid_imports_and_says_what_to_install(tmp_path):
    import subprocess
    import sys
    code = ("import sys\nsys.modules['mlx'] = None\nsys.modules['mlx.core'] = None\n"
            "import lucid\nprint(lucid.gpu_available())\n"
            "print(lucid.exp(lucid.ones(2)).tolist())\n"
            "try:\n    lucid.ones(2).to('gpu')\nexcept lucid.LucidError as e:\n"
            "    print('error:', e)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(lucid.__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    lines = out.stdout.splitlines()
    assert lines[0] == "False", out.stderr
    assert "pip install" in lines[2] and "lucid[gpu]" in lines[2]


def test_module_moves_to_the_gpu_in_place_and_keeps_training():
    """Module.to('gpu') keeps the Parameter objects (an optimizer built before still
    steps them); device= in a constructor and nn.init on a gpu tensor take effect;
    load_state_dict writes into gpu parameters."""
    from lucid import nn
    lucid.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    params = list(m.parameters())
    opt = lucid.optim.Adam(m.parameters(), lr=0.1)
    m.to("gpu")
    assert [id(p) for p in m.parameters()] == [id(p) for p in params]
    assert all(p.device == "gpu" and p.requires_grad for p in params)
    x = lucid.tensor(np.ones((5, 3), np.float32), device="gpu")
    y = lucid.tensor([0, 1, 0, 1, 1], device="gpu")
    before = params[0].detach().cpu().numpy().copy()
    opt.zero_grad()
    nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
    assert params[0].device == "gpu"
    assert not np.array_equal(params[0].detach().cpu().numpy(), before)
    lin = nn.Linear(3, 2, device="gpu")
    assert lin.weight.device == "gpu" and lin.bias.device == "gpu"
    nn.init.constant_(lin.weight, 0.5)
    np.testing.assert_array_equal(lin.weight.detach().cpu().numpy(), np.full((2, 3), 0.5))
    src = nn.Linear(3, 2)
    lin.load_state_dict(src.state_dict())
    assert lin.weight.device == "gpu"
    np.testing.assert_array_equal(lin.weight.detach().cpu().numpy(),
                                  src.weight.detach().numpy())


# -- ops that compute on the cpu only (NumPy / LAPACK / SciPy) name themselves on the gpu ------

def _linalg_calls():
    import lucid.linalg as LA
    import lucid.special as SP
    A = lambda: lucid.tensor(np.eye(3) * 2 + 0.1, dtype=lucid.float32)      # noqa: E731
    v = lambda: lucid.tensor([0.2, 0.5, 0.9], dtype=lucid.float32)          # noqa: E731
    def on(mod, n, arg):
        return lambda d: getattr(mod, n)(arg().to(d))
    calls = {f"linalg.{n}": on(LA, n, A)
             for n in ("inv", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd",
                       "svdvals", "pinv", "matrix_rank", "vector_norm", "matrix_norm", "norm")}
    calls.update({
        "linalg.solve": lambda d: LA.solve(A().to(d), A().to(d)),
        "linalg.lstsq": lambda d: LA.lstsq(A().to(d), A().to(d)),
        "linalg.solve_triangular": lambda d: LA.solve_triangular(A().to(d), A().to(d), upper=True),
        "logdet": lambda d: lucid.logdet(A().to(d)),
        "trace": lambda d: A().to(d).trace(), "tril": lambda d: lucid.tril(A().to(d)),
        "triu": lambda d: lucid.triu(A().to(d)), "diag": lambda d: lucid.diag(v().to(d)),
        "diagonal": lambda d: A().to(d).diagonal(), "diag_embed": lambda d: lucid.diag_embed(v().to(d)),
    })
    # compositions of lucid ops, and the special functions (MLX compositions): they run on
    # the gpu (their accuracy there: tests/test_gpu_host_ops.py)
    gpu_ok = {f"special.{n}": on(SP, n, v)
              for n in ("digamma", "lgamma", "gammaln", "psi", "erfcx", "ndtr", "log_ndtr",
                        "ndtri", "i0", "i0e", "i1", "i1e", "sinc", "entr")}
    gpu_ok.update({
        "special.xlogy": lambda d: lucid.xlogy(v().to(d), v().to(d)),
        "special.xlog1py": lambda d: SP.xlog1py(2.0, v().to(d)),
        "special.polygamma": lambda d: lucid.polygamma(1, v().to(d)),
        "special.multigammaln": lambda d: SP.multigammaln(v().to(d) + 2, 2),
        "linalg.matmul": lambda d: LA.matmul(A().to(d), A().to(d)),
        "linalg.cross": lambda d: LA.cross(v().to(d), v().to(d)),
        "linalg.vecdot": lambda d: LA.vecdot(v().to(d), v().to(d)),
        "kron": lambda d: lucid.kron(A().to(d), A().to(d)),
        "tensordot": lambda d: lucid.tensordot(A().to(d), A().to(d)),
        "einsum": lambda d: lucid.einsum("ij,jk->ik", A().to(d), A().to(d)),
        "linalg.matrix_power": lambda d: LA.matrix_power(A().to(d), 3),
        "linalg.multi_dot": lambda d: LA.multi_dot([A().to(d), A().to(d), A().to(d)]),
        "special.erf": lambda d: SP.erf(v().to(d)), "special.expit": lambda d: SP.expit(v().to(d)),
        "special.logit": lambda d: SP.logit(v().to(d)),
        "special.logsumexp": lambda d: SP.logsumexp(A().to(d), 0),
    })
    return calls, gpu_ok


_CPU_ONLY, _GPU_OK = _linalg_calls()


@pytest.mark.parametrize("name", sorted(_CPU_ONLY))
def test_cpu_only_linalg_and_special_ops_name_themselves_on_the_gpu(name):
    _CPU_ONLY[name]("cpu")      # it runs on the cpu
    named = {"logdet": "linalg.logdet"}.get(name, name)      # aliases name the function
    with pytest.raises(lucid.LucidError, match=f"lucid.{named} does not run on the gpu device; "
                                               r"move its inputs with \.cpu\(\)"):
        _CPU_ONLY[name]("gpu")


@pytest.mark.parametrize("name", sorted(_GPU_OK))
def test_linalg_and_special_compositions_run_on_the_gpu(name):
    got, want = _GPU_OK[name]("gpu"), _GPU_OK[name]("cpu")
    assert got.device == "gpu"
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=2e-5, atol=1e-6)


def test_float64_on_a_metal_gpu_error_names_the_op(monkeypatch):
    from lucid._core import core
    monkeypatch.setattr(core, "_mx_on_metal", lambda: True)     # stand in for Metal
    x64, x32 = lucid.ones(2, dtype=lucid.float64), lucid.ones(2).gpu()
    for call, op in [(lambda: x64.gpu(), "Tensor.gpu()"), (lambda: x64.to("gpu"), "Tensor.to()"),
                     (lambda: x32.to(lucid.float64), "Tensor.to()"),
                     (lambda: x32.double(), "Tensor.double()"),
                     (lambda: lucid.zeros(2, dtype=lucid.float64, device="gpu"), "lucid.zeros()"),
                     (lambda: lucid.randn(2, dtype=lucid.float64, device="gpu"), "lucid.randn()"),
                     (lambda: lucid.tensor(np.ones(2), device="gpu"), "lucid.tensor()")]:
        with pytest.raises(lucid.UnsupportedDTypeError,
                           match=re.escape(op) + ": float64 is not available on the gpu"):
            call()
    assert x32.to("gpu").dtype is lucid.float32        # float32 stays allowed
    monkeypatch.undo()
    assert x64.gpu().dtype is lucid.float64           # MLX's CPU stream has float64


@pytest.mark.parametrize("op", [lambda x: x.unfold(1, 2, 1), lambda x: x.unfold(-1, 2, 2),
                                lambda x: x[0, 0].unfold(0, 1, 1), lambda x: x.select(1, 2),
                                lambda x: lucid.unbind(x, 2)[1], lambda x: lucid.movedim(x, 0, 2),
                                lambda x: lucid.swapaxes(x, 0, 1)])
def test_new_view_ops_on_the_gpu_as_on_the_cpu(op):
    a = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    w = None
    got = {}
    for dev in ("cpu", "gpu"):
        x = lucid.tensor(a, device=dev, requires_grad=True)
        y = op(x)
        if w is None:
            w = np.random.default_rng(4).standard_normal(y.shape).astype(np.float32)
        (y * lucid.tensor(w, device=dev)).sum().backward()
        assert y.device == dev and x.grad.device == dev
        got[dev] = (y.detach().cpu().numpy(), x.grad.cpu().numpy())
    for g, c in zip(got["gpu"], got["cpu"]):
        np.testing.assert_allclose(g, c, rtol=1e-6, atol=1e-6)
    with pytest.raises(lucid.LucidError, match="view of a gpu tensor"):
        op(lucid.tensor(a, device="gpu")).fill_(1.0)
