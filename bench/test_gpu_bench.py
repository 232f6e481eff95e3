"""lucid on the gpu device vs raw MLX running the same ops and graphs, same run.

* element-wise ops on 1e5 and 1e6 float32 elements, evaluated (target: lucid's
  overhead on top of MLX under 10%);
* forward + backward of a 20-op element-wise chain on 100 elements (target: under 2x
  raw MLX, whose backward is ``mx.grad``);
* forward + backward + SGD step of the spirals MLP (2 -> 64 -> 3, tanh) on 480 points.

Runs on whatever device MLX has: a real GPU, or its CPU stream with
LUCID_MLX_DEVICE=cpu (set here by default, so the suite runs on any machine with
``mlx[cpu]``). Ratios are printed by bench/conftest.py; nothing fails on time.

    LUCID_MLX_DEVICE=cpu python -m pytest bench/test_gpu_bench.py --benchmark-only
"""
import os

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from _lucid_bench import import_lucid  # noqa: E402

lucid, _why = import_lucid()
if lucid is None:
    pytest.skip(f"lucid not importable: {_why}", allow_module_level=True)
mx = pytest.importorskip("mlx.core")
if not lucid.gpu_available():
    pytest.skip("MLX has no device here", allow_module_level=True)

PEERS = ("lucid", "mlx")


def _group(benchmark, group, peer, **info):
    benchmark.group = group
    benchmark.extra_info.update(peer=peer, **info)


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("size", [10**5, 10**6])
@pytest.mark.parametrize("op", ["exp", "tanh", "mul"])
def test_gpu_elementwise(benchmark, op, size, peer):
    a = np.random.default_rng(0).uniform(-2, 2, size).astype(np.float32)
    _group(benchmark, f"gpu-{op}-{size:.0e}-float32", peer, op=op, size=size, mode="gpu")
    if peer == "lucid":
        x = lucid.tensor(a, device="gpu")
        fn = {"exp": lambda: lucid.exp(x), "tanh": lambda: lucid.tanh(x),
              "mul": lambda: x * x}[op]
        benchmark(lambda: fn().eval())
    else:
        xa = mx.array(a)
        fn = {"exp": lambda: mx.exp(xa), "tanh": lambda: mx.tanh(xa),
              "mul": lambda: xa * xa}[op]

        def run():
            r = fn()
            mx.eval(r)
        benchmark(run)


def _chain(m, x):
    """20 element-wise ops; ``m`` is lucid or mlx.core (same names)."""
    y = x
    for _ in range(4):
        y = m.sin(y) * 1.5
        y = m.tanh(y) + 0.25
        y = y * y
    return y


@pytest.mark.parametrize("peer", PEERS)
def test_gpu_chain20_fwd_bwd(benchmark, peer):
    a = np.random.default_rng(1).uniform(-1, 1, 100).astype(np.float32)
    _group(benchmark, "gpu-chain20-100-float32-fwd_bwd", peer, mode="gpu_fwd_bwd")
    if peer == "lucid":
        x = lucid.tensor(a, device="gpu", requires_grad=True)

        def run():
            x.grad = None
            _chain(lucid, x).sum().backward()      # evaluates x.grad
        benchmark(run)
    else:
        g = mx.grad(lambda v: _chain(mx, v).sum())
        xa = mx.array(a)
        benchmark(lambda: mx.eval(g(xa)))


def test_gpu_chain20_matches_mlx():
    """The benchmark's two sides compute the same gradient."""
    a = np.random.default_rng(1).uniform(-1, 1, 100).astype(np.float32)
    x = lucid.tensor(a, device="gpu", requires_grad=True)
    _chain(lucid, x).sum().backward()
    want = np.array(mx.grad(lambda v: _chain(mx, v).sum())(mx.array(a)))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("peer", ["lucid", "lucid_cpu"])
def test_gpu_spirals_step(benchmark, peer):
    from lucid import nn, optim
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((480, 2)).astype(np.float32)
    ys = rng.integers(0, 3, 480)
    dev = "gpu" if peer == "lucid" else "cpu"
    lucid.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 3)).to(dev)
    opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    x, y = lucid.tensor(xs, device=dev), lucid.tensor(ys, device=dev)
    loss_fn = nn.CrossEntropyLoss()
    _group(benchmark, "gpu-spirals-step", peer, mode="gpu_train")

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    benchmark(step)
