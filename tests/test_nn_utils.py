"""lucid.nn.utils against torch.nn.utils: clip_grad_norm_ (every norm type, clipping or
not, mixed dtypes, non-finite norms), clip_grad_value_, parameters_to_vector and
vector_to_parameters, on the cpu and the gpu (MLX on its CPU stream)."""
import math
import os

import numpy as np
import pytest

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import lucid  # noqa: E402
from lucid.nn import utils as U  # noqa: E402

torch = pytest.importorskip("torch")
tu = torch.nn.utils

DEVICES = ["cpu"] + (["gpu"] if lucid.gpu_available() else [])
SHAPES = [(3, 4), (5,), (2, 1, 3), ()]


def _params(dtypes=("float32",), device="cpu", seed=0, scale=1.0, with_none=True):
    """Parameters with gradients (the second one without) in lucid and torch."""
    rng = np.random.default_rng(seed)
    mine, theirs = [], []
    for i, shape in enumerate(SHAPES):
        dt = dtypes[i % len(dtypes)]
        v = rng.standard_normal(shape)
        g = rng.standard_normal(shape) * scale
        p = lucid.nn.Parameter(lucid.tensor(v, dtype=getattr(lucid, dt)).to(device))
        t = torch.nn.Parameter(torch.tensor(v, dtype=getattr(torch, dt)))
        if not (with_none and i == 1):
            p.grad = lucid.tensor(g, dtype=getattr(lucid, dt)).to(device)
            t.grad = torch.tensor(g, dtype=getattr(torch, dt))
        mine.append(p)
        theirs.append(t)
    return mine, theirs


def _check_grads(mine, theirs, rtol):
    for p, t in zip(mine, theirs):
        if t.grad is None:
            assert p.grad is None
            continue
        assert p.grad.device == p.device
        np.testing.assert_allclose(p.grad.numpy(force=True), t.grad.numpy(), rtol=rtol,
                                   atol=rtol * 1e-3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, -math.inf, 0.5, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_matches_torch(device, norm_type, max_norm, dtype):
    mine, theirs = _params((dtype,), device)
    nt = float(norm_type)
    a = U.clip_grad_norm_(mine, max_norm, norm_type=nt)
    b = tu.clip_grad_norm_(theirs, max_norm, norm_type=nt)
    rtol = 1e-6 if dtype == "float32" else 1e-12
    assert a.dtype == getattr(lucid, dtype) and tuple(a.shape) == ()
    assert a.device == device
    np.testing.assert_allclose(a.item(), b.item(), rtol=rtol)
    _check_grads(mine, theirs, rtol)


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_norm_mixed_dtypes_and_single_tensor(device):
    mine, theirs = _params(("float32", "float64"), device)
    a = U.clip_grad_norm_(iter(mine), 0.3)              # a generator of parameters
    b = tu.clip_grad_norm_(iter(theirs), 0.3)
    assert a.dtype == lucid.float64 and b.dtype == torch.float64
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-6)
    _check_grads(mine, theirs, 1e-6)
    p, t = mine[0], theirs[0]
    np.testing.assert_allclose(U.clip_grad_norm_(p, 0.01).item(),
                               tu.clip_grad_norm_(t, 0.01).item(), rtol=1e-6)
    _check_grads([p], [t], 1e-6)


def test_clip_grad_norm_without_gradients():
    p = lucid.nn.Parameter(lucid.ones(3))
    n = U.clip_grad_norm_([p], 1.0)
    assert n.item() == tu.clip_grad_norm_([torch.nn.Parameter(torch.ones(3))], 1.0).item() == 0
    assert p.grad is None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_non_finite_norm(device, bad):
    mine, theirs = _params(device=device)
    mine[0].grad = lucid.tensor(np.full((3, 4), bad, np.float32)).to(device)
    theirs[0].grad = torch.full((3, 4), bad)
    with pytest.raises(RuntimeError, match="non-finite"):
        tu.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        U.clip_grad_norm_(mine, 1.0, error_if_nonfinite=True)
    a = U.clip_grad_norm_(mine, 1.0)
    b = tu.clip_grad_norm_(theirs, 1.0)
    assert (math.isnan(a.item()) and math.isnan(b.item())) or a.item() == b.item()
    for p, t in zip(mine, theirs):
        if t.grad is not None:
            np.testing.assert_array_equal(p.grad.numpy(force=True), t.grad.numpy())


def test_large_norms_clip_to_max_norm():
    mine, theirs = _params(scale=1e4)
    U.clip_grad_norm_(mine, 2.0)
    after = U.clip_grad_norm_(mine, 1e9)
    assert abs(after.item() - 2.0) < 1e-5
    assert after.item() <= 2.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("clip", [0.3, 1, 5.0])
def test_clip_grad_value_matches_torch(device, clip):
    mine, theirs = _params(("float32", "float64"), device, scale=2.0)
    U.clip_grad_value_(mine, clip)
    tu.clip_grad_value_(theirs, clip)
    _check_grads(mine, theirs, 0)
    assert max(abs(p.grad.numpy(force=True)).max() for p in mine if p.grad is not None) <= clip


def test_clip_grad_value_keeps_nan_as_torch():
    p = lucid.nn.Parameter(lucid.zeros(3))
    p.grad = lucid.tensor([math.nan, 5.0, -5.0])
    t = torch.nn.Parameter(torch.zeros(3))
    t.grad = torch.tensor([math.nan, 5.0, -5.0])
    U.clip_grad_value_(p, 1.0)
    tu.clip_grad_value_(t, 1.0)
    np.testing.assert_array_equal(p.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_parameters_to_vector_and_back(device):
    mine, theirs = _params(device=device)
    v = U.parameters_to_vector(mine)
    w = tu.parameters_to_vector(theirs)
    np.testing.assert_array_equal(v.numpy(force=True), w.detach().numpy())
    assert v.device == device
    new = np.arange(v.shape[0], dtype=np.float32)
    U.vector_to_parameters(lucid.tensor(new).to(device), mine)
    tu.vector_to_parameters(torch.tensor(new), theirs)
    for p, t in zip(mine, theirs):
        assert tuple(p.shape) == tuple(t.shape) and p.requires_grad
        np.testing.assert_array_equal(p.numpy(force=True), t.detach().numpy())
    with pytest.raises(TypeError):
        U.vector_to_parameters(new, mine)
    with pytest.raises(ValueError):
        U.vector_to_parameters(lucid.zeros(3).to(device), mine)


def test_parameters_to_vector_of_a_model_trains_through_it():
    model = lucid.nn.Linear(3, 2)
    v = U.parameters_to_vector(model.parameters())
    assert v.shape == (8,)
    (v * v).sum().backward()
    np.testing.assert_allclose(model.weight.grad.numpy(), 2 * model.weight.numpy(force=True))
