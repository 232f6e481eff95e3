"""lucid.nn against torch with hostile arguments (issue 28): every window op's parameters
fuzzed (lucid matches torch's values or raises where torch raises, never crashes), huge
values, the new 3-d / unpool ops, interpolate on integer dtypes, embedding's index range,
negative padding, attention's mask checks and the regression losses' target-size warning.
Forward values and gradients come from torch, on the cpu and (float32) on the gpu."""
import importlib.util
import math
import os
import warnings

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import lucid  # noqa: E402
from lucid import nn  # noqa: E402
from lucid.nn import functional as F  # noqa: E402
from nn_torchref import np_of  # noqa: E402

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _gpu_ok():
    return importlib.util.find_spec("mlx") is not None and lucid.gpu_available()


DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.skipif(
    not _gpu_ok(), reason="MLX has no device here (set LUCID_MLX_DEVICE=cpu)"))]
TOL = {"float64": dict(rtol=1e-9, atol=1e-10), "float32": dict(rtol=2e-4, atol=2e-5)}
# what a rejected argument may raise: torch's RuntimeError / ValueError / TypeError
REJECT = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError)


def _close(a, b, dtype="float64", what=""):
    a = np_of(a) if isinstance(a, lucid.Tensor) else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    np.testing.assert_allclose(a, b, err_msg=what, **TOL[dtype])


def _check_vs_torch(lfn, tfn, arrays, dtype="float64", device="cpu", grad=True):
    """Values of ``lfn(*lucid tensors)`` and ``tfn(*torch tensors)``, then the gradients of
    a random weighting of the output(s) w.r.t. every float input. Returns (lucid, torch)."""
    tdt = getattr(torch, dtype)
    lx = [lucid.tensor(a, dtype=getattr(lucid, dtype), device=device,
                       requires_grad=grad and a.dtype.kind == "f")
          if isinstance(a, np.ndarray) else a for a in arrays]
    tx = [torch.tensor(a, dtype=tdt if a.dtype.kind == "f" else None,
                       requires_grad=grad and a.dtype.kind == "f")
          if isinstance(a, np.ndarray) else a for a in arrays]
    ly, ty = lfn(*lx), tfn(*tx)
    lys = ly if isinstance(ly, tuple) else (ly,)
    tys = ty if isinstance(ty, tuple) else (ty,)
    for i, (a, b) in enumerate(zip(lys, tys)):
        if a.dtype == lucid.int64:
            np.testing.assert_array_equal(np_of(a), b.numpy(), err_msg=f"output {i}")
        else:
            assert a.device == device
            _close(a, b, dtype, f"output {i}")
    if grad and lys[0].numel():     # torch refuses the backward of an empty pool
        w = np.random.default_rng(7).standard_normal(tuple(lys[0].shape))
        (lys[0] * lucid.tensor(w, dtype=lys[0].dtype, device=device)).sum().backward()
        (tys[0] * torch.tensor(w, dtype=tdt)).sum().backward()
        for i, (a, b) in enumerate(zip(lx, tx)):
            if isinstance(a, lucid.Tensor) and a.requires_grad:
                _close(a.grad, b.grad, dtype, f"grad {i}")
    return ly, ty


def _same_outcome(lfn, tfn, what, dtype="float64"):
    """lucid raises where torch raises (a catchable error, never a crash) and matches
    torch's values where it computes."""
    try:
        expected = tfn()
    except Exception:   # noqa: BLE001 - any torch error is a rejected argument
        with pytest.raises(REJECT):
            lfn()
        return "raised"
    got = lfn()
    if isinstance(expected, tuple):
        for g, e in zip(got, expected):
            _close(g, e, dtype, what)
    else:
        _close(got, expected, dtype, what)
    return "ok"


# -- 1. every window op's parameters fuzzed against torch -------------------------------------------

def _pick(rng, nd, good, bad=(-1, 0)):
    """An int, or a tuple of nd (now and then nd + 1: the wrong length) ints: mostly from
    ``good``, about one in eight from ``bad``."""
    def one():
        return int(rng.choice(bad)) if bad and rng.random() < 0.12 else int(rng.choice(good))
    r = rng.random()
    if r < 0.5:
        return one()
    return tuple(one() for _ in range(nd + 1 if r > 0.95 else nd))


def _fuzz_cases(name, n, seed):
    rng = np.random.default_rng(seed)
    return [(name, i, np.random.default_rng(rng.integers(2**32))) for i in range(n)]


def _conv_case(rng, nd, transposed):
    c = int(rng.choice([1, 2, 4]))
    groups = int(rng.choice([1, 1, 1, 2, 2, 0, -1, 3]))
    o = int(rng.choice([2, 4, 3]))
    kernel = tuple(int(k) for k in rng.choice([1, 2, 3], nd))
    if rng.random() < 0.05:
        kernel = kernel[:-1] + (0,)
    size = tuple(int(s) for s in rng.choice([3, 4, 5], nd))
    x = rng.standard_normal((2, c) + size)
    cw = int(rng.choice([c // max(groups, 1), c, 1])) if rng.random() < 0.1 else None
    if transposed:
        w = rng.standard_normal((c if cw is None else cw + 1, o // max(groups, 1) or 1) + kernel)
    else:
        w = rng.standard_normal((o, (c // max(groups, 1) if cw is None else cw) or 1) + kernel)
    nb = w.shape[1] * max(groups, 1) if transposed else w.shape[0]
    b = rng.standard_normal(nb if rng.random() < 0.95 else nb + 1) if rng.random() < 0.6 else None
    kw = dict(stride=_pick(rng, nd, (1, 1, 2, 3)), dilation=_pick(rng, nd, (1, 1, 2)),
              groups=groups)
    if transposed:
        kw["padding"] = _pick(rng, nd, (0, 0, 1, 2), (-1,))
        kw["output_padding"] = _pick(rng, nd, (0, 0, 0, 1, 2), (-1,))
    else:
        kw["padding"] = (_pick(rng, nd, (0, 0, 1, 2), (-1,)) if rng.random() < 0.85 else
                         str(rng.choice(["same", "same", "valid", "full"])))
    return x, w, b, kw


@pytest.mark.parametrize("name,i,rng", _fuzz_cases("conv", 160, 1) + _fuzz_cases("convT", 120, 2))
def test_fuzz_convolutions_match_torch_or_raise(name, i, rng):
    nd = int(rng.choice([1, 2, 2, 3]))
    transposed = name == "convT"
    x, w, b, kw = _conv_case(rng, nd, transposed)
    lname = f"conv_transpose{nd}d" if transposed else f"conv{nd}d"
    lfn, tfn = getattr(F, lname), getattr(TF, lname)
    args = [x, w] + ([b] if b is not None else [])

    def run_l():
        t = [lucid.tensor(a) for a in args]
        return lfn(t[0], t[1], t[2] if b is not None else None, **kw)

    def run_t():
        t = [torch.tensor(a) for a in args]
        return tfn(t[0], t[1], t[2] if b is not None else None, **kw)

    if _same_outcome(run_l, run_t, f"{lname} {kw}") == "ok" and rng.random() < 0.3:
        _check_vs_torch(lambda *t: lfn(t[0], t[1], t[2] if b is not None else None, **kw),
                        lambda *t: tfn(t[0], t[1], t[2] if b is not None else None, **kw), args)


POOLS = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"]


@pytest.mark.parametrize("name,i,rng", [c for p in POOLS for c in _fuzz_cases(p, 60, len(p))])
def test_fuzz_pools_match_torch_or_raise(name, i, rng):
    nd = int(name[-2])
    size = tuple(int(s) for s in rng.choice([1, 3, 4, 5, 6] if nd < 3 else [1, 3, 4], nd))
    x = rng.standard_normal((2, 2) + size) if rng.random() < 0.8 else rng.standard_normal(
        (2,) + size)
    kw = dict(kernel_size=_pick(rng, nd, (1, 2, 3, 4)), padding=_pick(rng, nd, (0, 0, 1, 2), (-1,)),
              ceil_mode=bool(rng.random() < 0.4))
    if rng.random() < 0.8:
        kw["stride"] = _pick(rng, nd, (1, 2, 3))
    if name.startswith("max"):
        kw["dilation"] = _pick(rng, nd, (1, 1, 2))
        kw["return_indices"] = bool(rng.random() < 0.3)
    else:
        kw["count_include_pad"] = bool(rng.random() < 0.5)
        if nd >= 2 and rng.random() < 0.3:
            kw["divisor_override"] = int(rng.choice([-2, 0, 3]))
    lfn, tfn = getattr(F, name), getattr(TF, name)
    outcome = _same_outcome(lambda: lfn(lucid.tensor(x), **kw), lambda: tfn(torch.tensor(x), **kw),
                            f"{name} {kw}")
    if outcome == "ok" and rng.random() < 0.4:
        _check_vs_torch(lambda t: lfn(t, **kw), lambda t: tfn(t, **kw), [x])


@pytest.mark.parametrize("name,i,rng",
                         _fuzz_cases("adaptive", 40, 5) + _fuzz_cases("unfold", 60, 6))
def test_fuzz_adaptive_pool_and_unfold_match_torch_or_raise(name, i, rng):
    if name == "adaptive":
        nd = int(rng.choice([1, 2]))
        x = rng.standard_normal((2, 3) + tuple(int(s) for s in rng.choice([1, 4, 5], nd)))
        out = _pick(rng, nd, (0, 1, 2, 3, 7), (-1,))
        lname = f"adaptive_avg_pool{nd}d"
        kw = dict(output_size=out)
    else:
        x = rng.standard_normal((2, 2, int(rng.choice([3, 5])), int(rng.choice([3, 4]))))
        lname = "unfold"
        kw = dict(kernel_size=_pick(rng, 2, (1, 2, 3)), dilation=_pick(rng, 2, (1, 1, 2)),
                  padding=_pick(rng, 2, (0, 0, 1, 2), (-1,)), stride=_pick(rng, 2, (1, 2, 3)))
    lfn, tfn = getattr(F, lname), getattr(TF, lname)
    if _same_outcome(lambda: lfn(lucid.tensor(x), **kw), lambda: tfn(torch.tensor(x), **kw),
                     f"{lname} {kw}") == "ok" and x.size and rng.random() < 0.5:
        _check_vs_torch(lambda t: lfn(t, **kw), lambda t: tfn(t, **kw), [x])


@pytest.mark.parametrize("name,i,rng", _fuzz_cases("interp", 80, 8))
def test_fuzz_interpolate_match_torch_or_raise(name, i, rng):
    nd = int(rng.choice([1, 2, 3]))
    x = rng.standard_normal((1, 2) + tuple(int(s) for s in rng.choice([1, 3, 4], nd)))
    mode = str(rng.choice(["nearest", "nearest-exact", "linear", "bilinear", "bicubic",
                           "trilinear", "area"]))
    kw = dict(mode=mode)
    r = rng.random()
    if r < 0.45:
        kw["size"] = _pick(rng, nd, (1, 2, 5, 6))
    elif r < 0.9:
        f = [0.0, 0.3, 0.5, 1.5, 2.0, -1.0]
        kw["scale_factor"] = (float(rng.choice(f)) if rng.random() < 0.6
                              else tuple(float(v) for v in rng.choice(f, nd)))
        if rng.random() < 0.3:
            kw["recompute_scale_factor"] = True
    if rng.random() < 0.3:
        kw["align_corners"] = bool(rng.random() < 0.5)
    _same_outcome(lambda: F.interpolate(lucid.tensor(x), **kw),
                  lambda: TF.interpolate(torch.tensor(x), **kw), f"interpolate {kw}")


@pytest.mark.parametrize("name,i,rng", _fuzz_cases("fold", 80, 20))
def test_fuzz_fold_matches_torch_or_raises(name, i, rng):
    kernel = _pick(rng, 2, (1, 2, 3))
    kw = dict(kernel_size=kernel, dilation=_pick(rng, 2, (1, 1, 2)),
              padding=_pick(rng, 2, (0, 0, 1), (-1,)), stride=_pick(rng, 2, (1, 2)))
    out = tuple(int(v) for v in rng.integers(2, 7, 2))
    # the input's shape follows from unfold of a matching image, sometimes broken
    try:
        cols = TF.unfold(torch.zeros((2, 3) + out), **kw).shape
    except Exception:  # noqa: BLE001
        cols = (2, 12, 4)
    shape = tuple(int(v) for v in cols)
    if rng.random() < 0.15:
        shape = (shape[0], shape[1] + 1, shape[2])
    elif rng.random() < 0.15:
        shape = (shape[0], shape[1], shape[2] + 1)
    elif rng.random() < 0.15:
        shape = shape[1:]
    x = rng.standard_normal(shape)
    if _same_outcome(lambda: F.fold(lucid.tensor(x), out, **kw),
                     lambda: TF.fold(torch.tensor(x), out, **kw), f"fold {out} {kw}") == "ok" \
            and rng.random() < 0.5:
        _check_vs_torch(lambda t: F.fold(t, out, **kw), lambda t: TF.fold(t, out, **kw), [x])


@pytest.mark.parametrize("device", DEVICES)
def test_fold_unfold_modules_on_both_devices(device):
    dtype = "float32" if device == "gpu" else "float64"
    x = np.random.default_rng(21).standard_normal((2, 3, 6, 5))
    kw = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    lu, tu = _check_vs_torch(lambda t: nn.Unfold(**kw)(t), lambda t: torch.nn.Unfold(**kw)(t),
                             [x], dtype, device)
    _check_vs_torch(lambda t: nn.Fold((6, 5), **kw)(t), lambda t: torch.nn.Fold((6, 5), **kw)(t),
                    [tu.detach().numpy()], dtype, device)
    assert repr(nn.Fold((6, 5), **kw)) == repr(torch.nn.Fold((6, 5), **kw))
    assert repr(nn.Unfold(**kw)) == repr(torch.nn.Unfold(**kw))


@pytest.mark.skipif(not _gpu_ok(), reason="MLX has no device here (set LUCID_MLX_DEVICE=cpu)")
@pytest.mark.parametrize("name,i,rng", _fuzz_cases("gpu", 60, 23))
def test_fuzz_window_ops_on_the_gpu(name, i, rng):
    """The same checks and values on the gpu device (float32)."""
    def gpu(a):
        return lucid.tensor(a, dtype=lucid.float32, device="gpu")
    nd = int(rng.choice([1, 2]))
    if rng.random() < 0.5:
        transposed = bool(rng.random() < 0.4)
        x, w, b, kw = _conv_case(rng, nd, transposed)
        lname = f"conv_transpose{nd}d" if transposed else f"conv{nd}d"
        args = [x, w, b]
        def call(f, m):
            return getattr(f, lname)(*[None if a is None else m(a) for a in args], **kw)
    else:
        lname = str(rng.choice(["max_pool", "avg_pool"])) + f"{nd}d"
        x = rng.standard_normal((2, 2) + tuple(int(s) for s in rng.choice([3, 4, 5], nd)))
        kw = dict(kernel_size=_pick(rng, nd, (1, 2, 3)), padding=_pick(rng, nd, (0, 1), (-1,)),
                  stride=_pick(rng, nd, (1, 2)), ceil_mode=bool(rng.random() < 0.4))
        if lname.startswith("max"):
            kw["dilation"] = _pick(rng, nd, (1, 2))
        def call(f, m):
            return getattr(f, lname)(m(x), **kw)
    out = _same_outcome(lambda: call(F, gpu), lambda: call(TF, torch.tensor), f"{lname} {kw}",
                        "float32")
    if out == "ok":
        assert call(F, gpu).device == "gpu"


HUGE = [2**31, 2**40, 2**63, -2**40]
X2, W2 = np.ones((1, 2, 6, 6)), np.ones((3, 2, 3, 3))


def _huge_calls():
    calls = []
    for v in HUGE:
        for p in ("stride", "dilation", "padding"):
            calls.append((f"conv2d {p}={v}", "conv2d", (X2, W2), {p: v}))
            calls.append((f"conv_transpose2d {p}={v}", "conv_transpose2d",
                          (X2, np.ones((2, 3, 3, 3))), {p: v}))
            calls.append((f"max_pool2d {p}={v}", "max_pool2d", (X2,), {"kernel_size": 2, p: v}))
            calls.append((f"unfold {p}={v}", "unfold", (X2,), {"kernel_size": 2, p: v}))
        calls.append((f"max_pool2d kernel={v}", "max_pool2d", (X2,), {"kernel_size": v}))
        calls.append((f"avg_pool2d stride={v}", "avg_pool2d", (X2,),
                      {"kernel_size": 2, "stride": v}))
        calls.append((f"avg_pool2d kernel={v}", "avg_pool2d", (X2,), {"kernel_size": v}))
        calls.append((f"interpolate size={v}", "interpolate", (X2,), {"size": v}))
        calls.append((f"adaptive_avg_pool2d {v}", "adaptive_avg_pool2d", (X2,), {"output_size": v}))
    calls.append(("max_pool2d stride=2**40 dilation=-2**40", "max_pool2d", (X2,),
                  {"kernel_size": 2, "stride": 2**40, "dilation": -2**40}))
    calls.append(("interpolate scale nan", "interpolate", (X2,), {"scale_factor": math.nan}))
    calls.append(("interpolate scale inf", "interpolate", (X2,), {"scale_factor": math.inf}))
    calls.append(("interpolate scale 1e30", "interpolate", (X2,), {"scale_factor": 1e30}))
    return calls


@pytest.mark.parametrize("what,name,arrays,kw", _huge_calls(), ids=lambda v: None)
def test_huge_values_raise_cleanly_or_match_torch(what, name, arrays, kw):
    lfn, tfn = getattr(F, name), getattr(TF, name)
    _same_outcome(lambda: lfn(*[lucid.tensor(a) for a in arrays], **kw),
                  lambda: tfn(*[torch.tensor(a) for a in arrays], **kw), what)


@pytest.mark.parametrize("device", DEVICES)
def test_the_issue_cases_raise_before_any_kernel_runs(device):
    x = lucid.randn(1, 2, 6, 6, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="dilation"):
        F.max_pool2d(x, 2, stride=2, dilation=-1)
    with pytest.raises(ValueError, match="dilation"):     # ArgumentError is both
        F.max_pool1d(x[0], 2, stride=2, dilation=-1)
    # torch 2.13 returns a (2, 6, 3) result here (its output size overflows); lucid refuses
    with pytest.raises(RuntimeError, match="dilation"):
        F.max_pool1d(x[0], 2, dilation=2**40)
    with pytest.raises(RuntimeError):
        F.max_pool2d(x, 2, stride=2**40, dilation=-2**40)
    with pytest.raises(RuntimeError, match="dilation"):
        nn.MaxPool2d(2, stride=2, dilation=-1)(x)
    with pytest.raises(RuntimeError, match="stride"):
        nn.MaxPool2d(2, stride=0)(x)           # torch: stride 0 is an error, not "the kernel"
    # the conv weight mismatch is a RuntimeError (torch) and a ValueError (NumPy habit)
    for exc in (RuntimeError, ValueError):
        with pytest.raises(exc, match="channels"):
            F.conv2d(x, lucid.randn(3, 3, 3, 3, device=device))
        with pytest.raises(exc, match="channels"):
            nn.Conv2d(3, 4, 3, device=device)(x)
    with pytest.raises(RuntimeError, match="padding"):
        F.conv2d(x, lucid.randn(3, 2, 3, 3, device=device), padding=-1)
    with pytest.raises(TypeError):
        F.conv2d(x, lucid.randn(3, 2, 3, 3, device=device), stride=1.5)
    assert x.grad is None


# -- 2. scaled_dot_product_attention ------------------------------------------------------------------------

def test_sdpa_mask_and_is_causal_is_a_runtime_error():
    # torch documents "An error is thrown if both attn_mask and is_causal are set" (its
    # math backend on the cpu lets it through in 2.13); lucid raises a RuntimeError
    assert "error is thrown if both attn_mask and is_causal" in \
        TF.scaled_dot_product_attention.__doc__
    q = np.random.default_rng(0).standard_normal((1, 2, 3, 4))
    mask = np.tril(np.ones((3, 3), dtype=bool))
    lq = lucid.tensor(q)
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(lq, lq, lq, attn_mask=lucid.tensor(mask), is_causal=True)
    # each alone still matches torch
    for kw, tkw in (({"is_causal": True}, {"is_causal": True}),
                    ({"attn_mask": lucid.tensor(mask)}, {"attn_mask": torch.tensor(mask)})):
        _close(F.scaled_dot_product_attention(lq, lq, lq, **kw),
               TF.scaled_dot_product_attention(*[torch.tensor(q)] * 3, **tkw))


# -- 3. interpolate: every mode on every integer dtype, and the float modes ---------------------------------

MODES = [("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest-exact", 2), ("linear", 1),
         ("bilinear", 2), ("bicubic", 2), ("trilinear", 3), ("area", 2)]
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "bool"]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("mode,nd", MODES)
@pytest.mark.parametrize("device", DEVICES)
def test_interpolate_integer_dtypes_match_torch_exactly_or_raise(mode, nd, dtype, device):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, 3) + (5, 6, 4)[:nd])
    x = x.astype(bool) if dtype == "bool" else x.astype(dtype)
    tx = torch.tensor(x)
    lx = lucid.tensor(x, device=device)
    for kw in ({"size": (9, 7, 6)[:nd]}, {"size": (3, 2, 3)[:nd]}, {"scale_factor": 1.7},
               {"size": (4, 11, 5)[:nd], "align_corners": True}):
        if "align_corners" in kw and mode not in ("linear", "bilinear", "bicubic", "trilinear"):
            continue
        try:
            want = TF.interpolate(tx, mode=mode, **kw)
        except NotImplementedError:
            with pytest.raises(lucid.LucidError, match=f"{mode}.*{dtype}") as err:
                F.interpolate(lx, mode=mode, **kw)
            assert "interpolate" in str(err.value)
            continue
        got = F.interpolate(lx, mode=mode, **kw)
        assert got.dtype == getattr(lucid, dtype) and got.device == device
        np.testing.assert_array_equal(np_of(got), want.numpy(), err_msg=f"{mode} {kw}")


def test_uint8_bilinear_is_not_mostly_zeros():
    x = np.arange(0, 250, 10, dtype=np.uint8).reshape(1, 1, 5, 5)
    got = np_of(F.interpolate(lucid.tensor(x), size=(7, 7), mode="bilinear"))
    want = TF.interpolate(torch.tensor(x), size=(7, 7), mode="bilinear").numpy()
    np.testing.assert_array_equal(got, want)
    assert (got > 0).mean() > 0.9


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_uint8_resize_sweep_matches_torch_exactly(mode):
    """torch's uint8 kernel: fixed-point weights, one rounded pass per dim, and a dim whose
    size does not change is skipped even when the scale factor is not 1."""
    rng = np.random.default_rng(15)
    for _ in range(60):
        x = rng.integers(0, 256, (1, 2) + tuple(int(v) for v in rng.integers(1, 9, 2)))
        x = x.astype(np.uint8)
        if rng.random() < 0.5:
            kw = dict(scale_factor=float(rng.choice([1.1, 1.05, 0.9, 1.0, 2.3, 0.51, 3.0])))
            if rng.random() < 0.3:
                kw["recompute_scale_factor"] = True
        else:
            kw = dict(size=tuple(int(v) for v in rng.integers(1, 12, 2)))
        if rng.random() < 0.3:
            kw["align_corners"] = True
        try:
            want = TF.interpolate(torch.tensor(x), mode=mode, **kw).numpy()
        except RuntimeError:     # an empty output
            with pytest.raises(RuntimeError):
                F.interpolate(lucid.tensor(x), mode=mode, **kw)
            continue
        got = np_of(F.interpolate(lucid.tensor(x), mode=mode, **kw))
        np.testing.assert_array_equal(got, want, err_msg=f"{x.shape} {kw}")


FLOAT_INTERP = [
    ("bicubic", (1, 2, 4, 5), dict(size=(7, 3))),
    ("bicubic", (1, 2, 4, 5), dict(size=(6, 9), align_corners=True)),
    ("bicubic", (2, 1, 5, 5), dict(scale_factor=0.6)),
    ("area", (1, 2, 7, 5), dict(size=(3, 4))),
    ("area", (1, 2, 7), dict(scale_factor=0.5)),
    ("area", (1, 1, 4, 5, 6), dict(size=(2, 3, 4))),
    ("nearest-exact", (1, 2, 5, 3), dict(size=(7, 2))),
    ("trilinear", (1, 2, 3, 4, 2), dict(size=(5, 3, 4), align_corners=False)),
    ("linear", (2, 2, 5), dict(scale_factor=1.5, recompute_scale_factor=True)),
    ("bilinear", (1, 2, 3, 4), dict(scale_factor=(2.5, 0.75))),
    ("bilinear", (1, 2, 4, 3), dict(scale_factor=(1.1, 2.0))),   # unchanged dim: a copy
    ("nearest", (1, 2, 4, 2), dict(scale_factor=2.3)),            # doubled dim: i >> 1
    ("nearest", (1, 2, 6), dict(scale_factor=1.7)),
    # not ("nearest", (1, 2, 6), scale_factor=1.1): torch 2.13's backward of that 1-d
    # nearest copies the unchanged dim while its forward does not (gradients disagree)
]

INTERP_SWEEP_MODES = [("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest-exact", 1),
                      ("nearest-exact", 2), ("linear", 1), ("bilinear", 2), ("bicubic", 2),
                      ("trilinear", 3), ("area", 2)]


@pytest.mark.parametrize("mode,nd", INTERP_SWEEP_MODES)
def test_interpolate_sweep_matches_torch(mode, nd):
    """Random sizes and scale factors: torch's float32 source index of the nearest modes,
    its copy of unchanged dims in the linear modes, its align_corners scales."""
    rng = np.random.default_rng(16)
    factors = [1.1, 1.05, 0.9, 1.0, 2.3, 0.51, 3.0, 0.3, 1.7, 0.77, 2.0, 0.5]
    for _ in range(40):
        x = rng.standard_normal((1, 2) + tuple(int(v) for v in rng.integers(1, 7, nd)))
        r = rng.random()
        if r < 0.4:
            kw = dict(scale_factor=float(rng.choice(factors)))
        elif r < 0.6:
            kw = dict(scale_factor=tuple(float(v) for v in rng.choice(factors, nd)))
        else:
            kw = dict(size=tuple(int(v) for v in rng.integers(1, 13, nd)))
        if mode in ("linear", "bilinear", "bicubic", "trilinear") and rng.random() < 0.3:
            kw["align_corners"] = bool(rng.random() < 0.5)
        if "scale_factor" in kw and rng.random() < 0.3:
            kw["recompute_scale_factor"] = True
        _same_outcome(lambda: F.interpolate(lucid.tensor(x), mode=mode, **kw),
                      lambda: TF.interpolate(torch.tensor(x), mode=mode, **kw),
                      f"{mode} {x.shape} {kw}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode,shape,kw", FLOAT_INTERP)
def test_float_interpolate_modes_values_and_grads(mode, shape, kw, device):
    dtype = "float32" if device == "gpu" else "float64"
    x = np.random.default_rng(4).standard_normal(shape)
    _check_vs_torch(lambda t: F.interpolate(t, mode=mode, **kw),
                    lambda t: TF.interpolate(t, mode=mode, **kw), [x], dtype, device)


def test_interpolate_bfloat16_takes_the_float_path():
    x = np.random.default_rng(5).standard_normal((1, 2, 3, 4)).astype(np.float32)
    got = F.interpolate(lucid.tensor(x, dtype=lucid.bfloat16), size=(5, 6), mode="bilinear")
    want = TF.interpolate(torch.tensor(x, dtype=torch.bfloat16), size=(5, 6), mode="bilinear")
    assert got.dtype == lucid.bfloat16
    np.testing.assert_allclose(np_of(got.float()), want.float().numpy(), rtol=2e-2, atol=2e-2)


# -- 4. embedding's index range -------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_embedding_out_of_range_is_an_index_error_as_torch(device):
    w = np.random.default_rng(6).standard_normal((5, 3)).astype(np.float32)
    for bad in ([0, -1], [5], [[1, 2], [7, 0]], [-6]):
        with pytest.raises(IndexError):
            TF.embedding(torch.tensor(bad), torch.tensor(w))
        with pytest.raises(IndexError):
            F.embedding(lucid.tensor(bad, device=device), lucid.tensor(w, device=device))
    m = nn.Embedding(5, 3)
    with pytest.raises(IndexError):
        m(lucid.tensor([-1]))
    with pytest.raises(IndexError):
        m(lucid.tensor([5]))
    with pytest.raises(ValueError):
        F.embedding(lucid.tensor([0.5]), lucid.tensor(w))
    for bad_pad in (5, -6):
        with pytest.raises(AssertionError):
            torch.nn.Embedding(5, 3, padding_idx=bad_pad)
        with pytest.raises(ValueError, match="padding_idx"):
            nn.Embedding(5, 3, padding_idx=bad_pad)
        with pytest.raises(ValueError, match="padding_idx"):
            F.embedding(lucid.tensor([0]), lucid.tensor(w), padding_idx=bad_pad)


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_values_and_padding_gradient_match_torch(padding_idx):
    w = np.random.default_rng(7).standard_normal((5, 3))
    idx = np.array([[0, 2, 4], [4, 2, 1]])
    _check_vs_torch(lambda t: F.embedding(lucid.tensor(idx), t, padding_idx=padding_idx),
                    lambda t: TF.embedding(torch.tensor(idx), t, padding_idx=padding_idx), [w])


# -- 5. pad with negative amounts ----------------------------------------------------------------------------

PADS = [(-2, 1), (1, -2), (-3, -3), (-4, 2), (-1, 3, -1, 1), (2, -1, -2, 0), (0, -1, 1, -2)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
@pytest.mark.parametrize("pads", PADS)
def test_pad_negative_crops_as_torch(pads, mode, device):
    dtype = "float32" if device == "gpu" else "float64"
    x = np.random.default_rng(8).standard_normal((2, 3, 5, 6)[:2 + len(pads) // 2])
    if mode == "circular" and any(max(pads[2 * i], pads[2 * i + 1]) > x.shape[-1 - i]
                                  + min(pads[2 * i], 0) + min(pads[2 * i + 1], 0)
                                  for i in range(len(pads) // 2)):
        pytest.skip("circular padding wider than the cropped size: torch reads overlapping "
                    "memory (an error or undefined gradients)")
    kw = dict(mode=mode) if mode != "constant" else dict(mode=mode, value=1.5)
    try:
        TF.pad(torch.tensor(x), pads, **kw)
    except Exception:   # noqa: BLE001
        with pytest.raises(REJECT):
            F.pad(lucid.tensor(x, device=device), pads, **kw)
        return
    _check_vs_torch(lambda t: F.pad(t, pads, **kw), lambda t: TF.pad(t, pads, **kw), [x], dtype,
                    device)


@pytest.mark.parametrize("name,i,rng", _fuzz_cases("pad", 150, 17))
def test_fuzz_pad_matches_torch_or_raises(name, i, rng):
    k = int(rng.choice([1, 2, 3]))
    ndim = int(rng.choice([k, k + 1, k + 1, k + 2, k + 2, k + 3]))
    if ndim < 1:
        ndim = 1
    x = rng.standard_normal(tuple(int(s) for s in rng.integers(2, 6, ndim)))
    pads = tuple(int(p) for p in rng.choice([-3, -2, -1, 0, 0, 1, 2, 3, 5], 2 * k))
    mode = str(rng.choice(["constant", "reflect", "replicate", "circular"]))
    kw = dict(mode=mode)
    if rng.random() < 0.2:
        kw["value"] = float(rng.choice([0.0, 2.5]))
    if mode == "circular" and any(
            max(pads[2 * j], pads[2 * j + 1]) > x.shape[-1 - j] + min(pads[2 * j], 0)
            + min(pads[2 * j + 1], 0) for j in range(k) if j < x.ndim):
        return      # torch reads overlapping memory there (see test_pad_negative_crops_as_torch)
    if _same_outcome(lambda: F.pad(lucid.tensor(x), pads, **kw),
                     lambda: TF.pad(torch.tensor(x), pads, **kw), f"pad {pads} {kw}") == "ok" \
            and rng.random() < 0.3:
        _check_vs_torch(lambda t: F.pad(t, pads, **kw), lambda t: TF.pad(t, pads, **kw), [x])


# -- 6. the 3-d ops and max_unpool ---------------------------------------------------------------------------

CONV3D = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(1, 2, 1), padding=(0, 1, 2), dilation=(2, 1, 1)),
    dict(groups=2, padding="same"),
    dict(groups=2, stride=(2, 1, 2), dilation=(1, 2, 1), padding=(1, 0, 1)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kw", CONV3D)
def test_conv3d_matches_torch(kw, bias, device):
    dtype = "float32" if device == "gpu" else "float64"
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 4, 5, 6, 5))
    w = rng.standard_normal((6, 4 // kw.get("groups", 1), 3, 2, 3))
    arrays = [x, w] + ([rng.standard_normal(6)] if bias else [])
    _check_vs_torch(lambda *t: F.conv3d(t[0], t[1], t[2] if bias else None, **kw),
                    lambda *t: TF.conv3d(t[0], t[1], t[2] if bias else None, **kw),
                    arrays, dtype, device)


CONVT3D = [
    dict(),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=(1, 2, 3), padding=(0, 1, 1), output_padding=(0, 1, 2), dilation=(2, 1, 1)),
    dict(groups=2, stride=2, dilation=2, output_padding=1),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kw", CONVT3D)
def test_conv_transpose3d_matches_torch(kw, bias, device):
    dtype = "float32" if device == "gpu" else "float64"
    rng = np.random.default_rng(10)
    g = kw.get("groups", 1)
    x = rng.standard_normal((2, 4, 3, 4, 3))
    w = rng.standard_normal((4, 6 // g, 2, 3, 2))
    arrays = [x, w] + ([rng.standard_normal(6)] if bias else [])
    _check_vs_torch(lambda *t: F.conv_transpose3d(t[0], t[1], t[2] if bias else None, **kw),
                    lambda *t: TF.conv_transpose3d(t[0], t[1], t[2] if bias else None, **kw),
                    arrays, dtype, device)


def test_conv3d_modules_match_torch():
    for lcls, tcls, args in ((nn.Conv3d, torch.nn.Conv3d, (4, 6, 3)),
                             (nn.ConvTranspose3d, torch.nn.ConvTranspose3d, (4, 6, 3))):
        kw = dict(stride=2, padding=1, groups=2, bias=True)
        if lcls is nn.ConvTranspose3d:
            kw["output_padding"] = 1
        lm, tm = lcls(*args, **kw).double(), tcls(*args, **kw).double()
        assert [n for n, _ in lm.named_parameters()] == [n for n, _ in tm.named_parameters()]
        assert all(tuple(p.shape) == tuple(q.shape)
                   for p, q in zip(lm.parameters(), tm.parameters()))
        tm.load_state_dict({k: torch.tensor(np_of(v)) for k, v in lm.state_dict().items()})
        x = np.random.default_rng(11).standard_normal((1, 4, 5, 4, 5))
        _close(lm(lucid.tensor(x)), tm(torch.tensor(x)))
        assert repr(lm) == repr(tm)


AVG3D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
    dict(kernel_size=2, stride=1, divisor_override=3),
    dict(kernel_size=(2, 3, 2), padding=1, divisor_override=-2),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", AVG3D)
def test_avg_pool3d_matches_torch(kw, device):
    dtype = "float32" if device == "gpu" else "float64"
    x = np.random.default_rng(12).standard_normal((2, 3, 5, 6, 5))
    _check_vs_torch(lambda t: F.avg_pool3d(t, **kw), lambda t: TF.avg_pool3d(t, **kw), [x],
                    dtype, device)
    _check_vs_torch(lambda t: nn.AvgPool3d(**kw)(t), lambda t: torch.nn.AvgPool3d(**kw)(t),
                    [x[0]], dtype, device)


UNPOOL = [
    (1, (2, 3, 9), dict(kernel_size=2)),
    (1, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
    (2, (2, 3, 6, 7), dict(kernel_size=2)),
    (2, (2, 3, 7, 7), dict(kernel_size=3, stride=2, padding=1)),
    (2, (3, 6, 5), dict(kernel_size=(2, 3), stride=(2, 1))),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("nd,shape,kw", UNPOOL)
def test_max_unpool_inverts_max_pool_indices_as_torch(nd, shape, kw, device):
    dtype = "float32" if device == "gpu" else "float64"
    x = np.random.default_rng(13).permutation(int(np.prod(shape))).reshape(shape) * 0.1
    pool, unpool = f"max_pool{nd}d", f"max_unpool{nd}d"
    lv, li = getattr(F, pool)(lucid.tensor(x, device=device), return_indices=True, **kw)
    tv, ti = getattr(TF, pool)(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(np_of(li), ti.numpy())     # indices agree with torch's
    assert li.device == device
    size = tuple(shape[-nd:])       # the pooled input's own size (pooling may drop a rim)
    _check_vs_torch(lambda t: getattr(F, unpool)(t, li, output_size=size, **kw),
                    lambda t: getattr(TF, unpool)(t, ti, output_size=size, **kw),
                    [tv.detach().numpy()], dtype, device)
    default = tuple((tv.shape[-nd + a] - 1) * s - 2 * p + k for a, (k, s, p) in enumerate(
        zip(*[np.broadcast_to(kw.get(n, d), (nd,)) for n, d in
              (("kernel_size", 0), ("stride", kw["kernel_size"]), ("padding", 0))])))
    if all(a >= b for a, b in zip(default, size)):   # every index fits the default size
        _close(getattr(F, unpool)(lv, li, **kw), getattr(TF, unpool)(tv, ti, **kw), dtype)
    # output_size: a larger plane in range, given as spatial sizes or the whole shape
    stride = np.broadcast_to(kw.get("stride", kw["kernel_size"]), (nd,))
    size = tuple(int(min(s + 1, d + st - 1)) for s, d, st in zip(size, default, stride))
    want = getattr(TF, unpool)(tv, ti, output_size=size, **kw)
    got = getattr(F, unpool)(lv, li, output_size=tuple(lv.shape[:-nd]) + size, **kw)
    _close(got, want, dtype)
    mod = (nn.MaxUnpool1d if nd == 1 else nn.MaxUnpool2d)(**kw)
    _close(mod(lv, li, output_size=size), want, dtype)
    assert repr(mod) == repr((torch.nn.MaxUnpool1d if nd == 1 else torch.nn.MaxUnpool2d)(**kw))


def test_max_unpool_rejects_what_torch_rejects():
    tv, ti = TF.max_pool2d(torch.randn(1, 1, 4, 4, dtype=torch.float64), 2, return_indices=True)
    lv, li = lucid.tensor(tv.numpy()), lucid.tensor(ti.numpy())
    cases = [(lambda v, i: (v, i + 100, 2), {}), (lambda v, i: (v, -i - 1, 2), {}),
             (lambda v, i: (v, i, 2), {"output_size": (7, 7)}),
             (lambda v, i: (v, i[..., :1], 2), {}), (lambda v, i: (v, i, 2, 0), {})]
    for make, kw in cases:
        with pytest.raises(Exception):  # noqa: B017 - torch's type varies
            TF.max_unpool2d(*make(tv, ti), **kw)
        with pytest.raises(REJECT):
            F.max_unpool2d(*make(lv, li), **kw)
    with pytest.raises(REJECT):
        F.max_unpool2d(lv, li.int(), 2)


# -- 7. regression losses warn on a target shape that differs -----------------------------------------------

LOSSES = [("mse_loss", nn.MSELoss, {}), ("l1_loss", nn.L1Loss, {}),
          ("smooth_l1_loss", nn.SmoothL1Loss, {"beta": 0.5}),
          ("huber_loss", nn.HuberLoss, {"delta": 0.7})]


@pytest.mark.parametrize("name,cls,kw", LOSSES)
def test_regression_losses_warn_and_broadcast_as_torch(name, cls, kw):
    rng = np.random.default_rng(14)
    x, y = rng.standard_normal((4, 1)), rng.standard_normal(4)
    with pytest.warns(UserWarning, match="target size"):
        want = getattr(TF, name)(torch.tensor(x), torch.tensor(y), **kw)
    for fn in (lambda a, b: getattr(F, name)(a, b, **kw), lambda a, b: cls(**kw)(a, b)):
        with pytest.warns(UserWarning, match=r"Using a target size \(\(4,\)\) that is different "
                                             r"to the input size \(\(4, 1\)\)"):
            got = fn(lucid.tensor(x), lucid.tensor(y))
        _close(got, want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # same shapes: no warning
        getattr(F, name)(lucid.tensor(x), lucid.tensor(x), **kw)


# -- 8. softplus: one signature under one name -------------------------------------------------------------

@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 1.0), (0.5, 3.0)])
def test_functional_softplus_beta_threshold_matches_torch(beta, threshold):
    x = np.linspace(-8, 8, 41)
    _check_vs_torch(lambda t: F.softplus(t, beta=beta, threshold=threshold),
                    lambda t: TF.softplus(t, beta=beta, threshold=threshold), [x])


def test_lucid_softplus_takes_beta_and_threshold():
    x = lucid.tensor(np.linspace(-3, 3, 7))
    _close(lucid.softplus(x, beta=2.0, threshold=1.0),
           TF.softplus(torch.tensor(np.linspace(-3, 3, 7)), beta=2.0, threshold=1.0))


# -- the modules keep torch's pool defaults --------------------------------------------------------------------

def test_pool_modules_stride_default_as_torch():
    for lcls, tcls in ((nn.MaxPool2d, torch.nn.MaxPool2d), (nn.AvgPool2d, torch.nn.AvgPool2d),
                       (nn.MaxPool1d, torch.nn.MaxPool1d), (nn.AvgPool3d, torch.nn.AvgPool3d)):
        for stride in (None, 1, 0):
            assert lcls(3, stride=stride).stride == tcls(3, stride=stride).stride


@pytest.mark.parametrize("kw", [dict(groups=0), dict(groups=3), dict(groups=-1),
                                dict(padding="same", stride=2), dict(padding="foo"),
                                dict(padding_mode="foo"), dict(stride=(1, 1, 1))])
def test_conv_module_constructor_rejects_what_torch_rejects(kw):
    args = dict(in_channels=2, out_channels=4, kernel_size=3, **kw)
    with pytest.raises(REJECT):
        torch.nn.Conv2d(**args)(torch.zeros(1, 2, 5, 5))
    with pytest.raises(ValueError):
        nn.Conv2d(**args)


def test_conv3d_second_derivative_matches_torch():
    rng = np.random.default_rng(18)
    x, w = rng.standard_normal((1, 2, 4, 3, 4)), rng.standard_normal((3, 2, 2, 2, 2))
    lx, lw = (lucid.tensor(a, requires_grad=True) for a in (x, w))
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    ly = F.conv_transpose3d(F.conv3d(lx, lw, stride=(1, 2, 1), padding=1), lw)
    ty = TF.conv_transpose3d(TF.conv3d(tx, tw, stride=(1, 2, 1), padding=1), tw)
    (lg,) = lucid.autograd.grad((ly * ly).sum(), [lx], create_graph=True)
    (tg,) = torch.autograd.grad((ty * ty).sum(), [tx], create_graph=True)
    _close(lg, tg)
    (lg * lg).sum().backward()
    (tg * tg).sum().backward()
    _close(lw.grad, tw.grad)


def _both(a):
    return lucid.tensor(a), torch.tensor(a)


BAD_CALLS = [
    ("layer_norm shape", lambda m, f, x: f.layer_norm(x, (5,))),
    ("group_norm groups", lambda m, f, x: f.group_norm(x, 4)),
    ("one_hot negative", lambda m, f, x: f.one_hot(m.tensor([-1, 2]))),
    ("one_hot too small", lambda m, f, x: f.one_hot(m.tensor([3, 2]), 3)),
    ("dropout p", lambda m, f, x: f.dropout(x, 1.5)),
    ("mse reduction", lambda m, f, x: f.mse_loss(x, x, reduction="avg")),
    ("sdpa gqa heads", lambda m, f, x: f.scaled_dot_product_attention(
        x.reshape(1, 3, 2, 2), x[:, :2].reshape(1, 2, 2, 2), x[:, :2].reshape(1, 2, 2, 2),
        enable_gqa=True)),
]


@pytest.mark.parametrize("what,call", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_raise_runtime_and_value_errors(what, call):
    """torch raises (RuntimeError or ValueError) and lucid's error is both kinds."""
    lx, tx = _both(np.random.default_rng(19).standard_normal((2, 6, 2)))
    with pytest.raises((RuntimeError, ValueError)):
        call(torch, TF, tx)
    for exc in (RuntimeError, ValueError):
        with pytest.raises(exc):
            call(lucid, F, lx)


# -- window ops on every dtype: torch's values, or an error naming the op and the dtype -----------------

def _int_image(rng, nd, lo=-20, hi=60):
    return rng.integers(lo, hi, (1, 2) + (5, 6, 4)[:nd])


def _dtype_calls():
    calls = []
    for nd in (1, 2, 3):
        calls += [
            (f"conv{nd}d", lambda f, m, r, nd=nd: getattr(f, f"conv{nd}d")(
                m(_int_image(r, nd)), m(r.integers(-3, 4, (3, 2) + (2,) * nd)), padding=1)),
            (f"conv_transpose{nd}d", lambda f, m, r, nd=nd: getattr(f, f"conv_transpose{nd}d")(
                m(_int_image(r, nd)), m(r.integers(-3, 4, (2, 3) + (2,) * nd)), stride=2)),
            (f"max_pool{nd}d", lambda f, m, r, nd=nd: getattr(f, f"max_pool{nd}d")(
                m(_int_image(r, nd)), 2, padding=1)),
            (f"avg_pool{nd}d", lambda f, m, r, nd=nd: getattr(f, f"avg_pool{nd}d")(
                m(_int_image(r, nd)), 3, stride=2, padding=1, count_include_pad=False,
                ceil_mode=True)),
            (f"adaptive_avg_pool{nd}d", lambda f, m, r, nd=nd: getattr(
                f, f"adaptive_avg_pool{nd}d")(m(_int_image(r, nd)), 3)),
        ]
    calls += [
        ("avg_pool2d", lambda f, m, r: f.avg_pool2d(m(_int_image(r, 2)), 2, divisor_override=-3)),
        ("unfold", lambda f, m, r: f.unfold(m(_int_image(r, 2)), 2)),
        ("fold", lambda f, m, r: f.fold(m(r.integers(0, 9, (1, 8, 20))), (5, 6), 2)),
        ("max_unpool2d", lambda f, m, r: f.max_unpool2d(
            m(_int_image(r, 2)[..., :2, :2]), m(np.array([[[[0, 3], [13, 15]]] * 2]),
                                                 keep=True), 2)),
        ("pad", lambda f, m, r: f.pad(m(_int_image(r, 2)), (1, 2, -1, 1), mode="replicate")),
        ("pad", lambda f, m, r: f.pad(m(_int_image(r, 2)), (1, 2, 2, 1), mode="reflect")),
        ("pad", lambda f, m, r: f.pad(m(_int_image(r, 2)), (1, 2, 2, 1), mode="circular")),
    ]
    return calls


DTYPE_CALLS = _dtype_calls()
ALL_DTYPES = ["int64", "int32", "int16", "int8", "uint8", "bool", "float16", "bfloat16"]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op,call", DTYPE_CALLS, ids=[f"{c[0]}{i}" for i, c in
                                                      enumerate(DTYPE_CALLS)])
def test_window_ops_on_every_dtype_match_torch_or_name_the_dtype(op, call, dtype):
    def maker(lib):
        def make(a, keep=False):
            if keep:                               # indices stay int64
                return lib.tensor(a)
            dt = getattr(lib, "bool" if lib is torch else "bool_") if dtype == "bool" \
                else getattr(lib, dtype)
            return lib.tensor(a.astype(np.float32) if dtype == "bfloat16" else a).to(dt)
        return make
    try:
        want = call(TF, maker(torch), np.random.default_rng(22))
    except NotImplementedError:
        with pytest.raises(lucid.UnsupportedDTypeError, match=f"{op}.*{dtype}"):
            call(F, maker(lucid), np.random.default_rng(22))
        return
    got = call(F, maker(lucid), np.random.default_rng(22))
    assert got.dtype.name.rstrip("_") == str(want.dtype).split(".")[-1]
    w = want.float().numpy() if dtype in ("float16", "bfloat16") else want.numpy()
    g = np_of(got.float()) if dtype in ("float16", "bfloat16") else np_of(got)
    if dtype in ("float16", "bfloat16"):
        np.testing.assert_allclose(g, w, rtol=1e-2, atol=0.5)
    else:
        np.testing.assert_array_equal(g, w)
