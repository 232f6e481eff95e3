"""Training steps, lucid vs torch: forward, loss, backward and optimizer step.

* ``Linear(w, w) - ReLU - Linear(w, 10)`` on a batch of 128, widths 128/256/512,
  cross entropy, Adam (the target: lucid at least 1.5x faster than torch);
* the small CNN of examples/digits.py on a batch of 64 8x8 images (target: torch's
  speed).

Both libraries run the same model from the same weights on the same data at the same
thread count (LUCID_BENCH_THREADS, default 1 and 2): lucid's pool, NumPy's BLAS (which
lucid's matmul calls; limited through threadpoolctl) and torch. Before timing, one step
of each is checked against the other, so the benchmark times equal work. Ratios are
printed by bench/conftest.py (peer median / lucid median, same run); nothing fails on
time.

    python -m pytest bench/test_train_bench.py --benchmark-only
"""
import os
import sys

import contextlib

import numpy as np
import pytest

try:
    from threadpoolctl import threadpool_limits
except ImportError:          # then NumPy's BLAS keeps the count conftest gave OpenBLAS
    threadpool_limits = None

from _lucid_bench import THREAD_SET, import_lucid, set_threads

lucid, _why = import_lucid()
if lucid is None:
    pytest.skip(f"lucid not importable: {_why}", allow_module_level=True)
torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                "examples"))

from lucid import nn, optim  # noqa: E402

WIDTHS = [128, 256, 512]
BATCH = 128


def _torch_twin(lmod, tmod):
    sd = {k: torch.from_numpy(np.array(v.numpy(), copy=True))
          for k, v in lmod.state_dict().items()}
    tmod.load_state_dict(sd)
    return tmod


def _mlp_pair(width):
    lucid.manual_seed(0)
    lm = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    tm = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                             torch.nn.Linear(width, 10))
    return lm, _torch_twin(lm, tm)


def _cnn_pair():
    import digits
    lucid.manual_seed(0)
    lm = digits.cnn()
    tm = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 2 * 2, 10))
    return lm, _torch_twin(lm, tm)


def _steps(lm, tm, x_np, y_np):
    x, y = lucid.from_numpy(x_np), lucid.from_numpy(y_np)
    tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)
    lopt = optim.Adam(lm.parameters(), lr=1e-3)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-3)

    def lucid_step():
        lopt.zero_grad()
        loss = nn.functional.cross_entropy(lm(x), y)
        loss.backward()
        lopt.step()
        return loss

    def torch_step():
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm(tx), ty)
        loss.backward()
        topt.step()
        return loss

    return lucid_step, torch_step


def _check_equal_work(lucid_step, torch_step, lm, tm):
    la, ta = lucid_step().item(), torch_step().item()
    np.testing.assert_allclose(la, ta, rtol=1e-4)
    tparams = dict(tm.named_parameters())
    for name, p in lm.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), tparams[name].detach().numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


def _blas_threads(n):
    """NumPy's BLAS limited to n threads while the block runs (if threadpoolctl is there)."""
    if threadpool_limits is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=n, user_api="blas")


def _run(benchmark, group, peer, threads, lucid_step, torch_step, **info):
    got = set_threads(threads)
    benchmark.group = group
    benchmark.extra_info.update(peer=peer, threads=threads, lucid_threads=got.get("lucid"),
                                torch_threads=got.get("torch"),
                                numpy_blas_threads=threads if threadpool_limits else "unset",
                                **info)
    with _blas_threads(threads):
        benchmark(lucid_step if peer == "lucid" else torch_step)


@pytest.mark.parametrize("threads", THREAD_SET)
@pytest.mark.parametrize("peer", ["lucid", "torch"])
@pytest.mark.parametrize("width", WIDTHS)
def test_mlp_train_step(benchmark, width, peer, threads):
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((BATCH, width)).astype(np.float32)
    y_np = rng.integers(0, 10, BATCH)
    lm, tm = _mlp_pair(width)
    lucid_step, torch_step = _steps(lm, tm, x_np, y_np)
    set_threads(threads)
    _check_equal_work(lucid_step, torch_step, lm, tm)
    _run(benchmark, f"train-mlp{width}-b{BATCH}-float32-t{threads}", peer, threads,
         lucid_step, torch_step, op="train-mlp", size=width, dtype="float32", mode="step")


@pytest.mark.parametrize("threads", THREAD_SET)
@pytest.mark.parametrize("peer", ["lucid", "torch"])
def test_cnn_train_step(benchmark, peer, threads):
    rng = np.random.default_rng(0)
    x_np = rng.random((64, 1, 8, 8)).astype(np.float32)
    y_np = rng.integers(0, 10, 64)
    lm, tm = _cnn_pair()
    lucid_step, torch_step = _steps(lm, tm, x_np, y_np)
    set_threads(threads)
    _check_equal_work(lucid_step, torch_step, lm, tm)
    _run(benchmark, f"train-cnn-b64-float32-t{threads}", peer, threads, lucid_step,
         torch_step, op="train-cnn", size=64, dtype="float32", mode="step")
