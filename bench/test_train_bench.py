"""Training steps, lucid vs torch: forward, loss, backward and optimizer step.

* ``Linear(w, w) - ReLU - Linear(w, 10)`` on a batch of 128, widths 128/256/512,
  cross entropy, Adam (the target: lucid at least 1.5x faster than torch);
* the small CNN of examples/digits.py on a batch of 64 8x8 images (target: torch's
  speed).

Both libraries run the same model from the same weights on the same data at the same
thread count (LUCID_BENCH_THREADS, default 1 and 2): lucid's pool, NumPy's BLAS (which
lucid's matmul calls; limited through threadpoolctl, and the count in effect is read
back into extra_info) and torch. Before timing, one step of each is checked against the
other, so the benchmark times equal work. Ratios are printed by bench/conftest.py (peer
median / lucid median, same run); nothing fails on time.

torch's optimizer is ``torch.optim.Adam`` with its defaults, which on CPU tensors is the
per-parameter loop (neither foreach nor fused); LUCID_BENCH_TORCH_ADAM=foreach or fused
times torch's faster variants instead (the choice is in extra_info).

Where the time goes (perf, 1 thread, MLP width 512, lucid's step ~3.7 ms of CPU): 58% in
NumPy's OpenBLAS (SkylakeX kernels; torch uses MKL): per GEMM of these shapes OpenBLAS
measured 10-30% slower than torch.mm; the forward x W^T spends a quarter of its time
packing W (W x^T, the transposed product, ran ~15% faster but gives a transposed
output), and ~5% of the weight-gradient GEMM is OpenBLAS zeroing C for beta = 0, which a
caller cannot avoid (SciPy's sgemm with beta = 1 into an existing gradient measured no
faster). Adam 10% (one AVX-512 pass per parameter, memory-bound: ~0.3 ms for 262k
parameters where torch's fused Adam takes ~0.55 ms), Python 11%, NumPy's ufunc and
reduce machinery 7%, relu forward and backward 3%, bias add and column sums ~1%.

At 2 threads on a loaded machine both libraries run 10-20x slower than at 1 thread
(OpenBLAS's and OpenMP's fork-join: a worker the OS has not scheduled holds up the
call); lucid's own pool is not the cause (lucid at 2 threads with NumPy's BLAS at 1
runs as fast as at 1 thread).

    python -m pytest bench/test_train_bench.py --benchmark-only
"""
import contextlib
import os
import sys

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

from lucid import nn, optim

WIDTHS = [128, 256, 512]
BATCH = 128
TORCH_ADAM = os.environ.get("LUCID_BENCH_TORCH_ADAM", "default").strip().lower()
if TORCH_ADAM not in ("default", "foreach", "fused"):
    raise ValueError(f"LUCID_BENCH_TORCH_ADAM must be default, foreach or fused, "
                     f"got {TORCH_ADAM!r}")


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


def _steps(lm, tm, x_np, y_np, torch_adam=None):
    x, y = lucid.from_numpy(x_np), lucid.from_numpy(y_np)
    tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)
    lopt = optim.Adam(lm.parameters(), lr=1e-3)
    torch_adam = TORCH_ADAM if torch_adam is None else torch_adam
    flags = {} if torch_adam == "default" else {torch_adam: True}
    topt = torch.optim.Adam(tm.parameters(), lr=1e-3, **flags)

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


def _numpy_blas_threads():
    """The thread counts NumPy's BLAS libraries report now (threadpoolctl), or 'unset'."""
    if threadpool_limits is None:
        return "unset"
    from threadpoolctl import threadpool_info
    return ",".join(f"{d.get('internal_api')}:{d.get('architecture')}={d['num_threads']}"
                    for d in threadpool_info() if d.get("user_api") == "blas") or "none"


def _run(benchmark, group, peer, threads, lucid_step, torch_step, **info):
    got = set_threads(threads)
    benchmark.group = group
    benchmark.extra_info.update(peer=peer, threads=threads, lucid_threads=got.get("lucid"),
                                torch_threads=got.get("torch"), torch_adam=TORCH_ADAM,
                                **info)
    with _blas_threads(threads):
        benchmark.extra_info["numpy_blas_threads"] = _numpy_blas_threads()
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


def _interleaved(steps, rounds, inner):
    """Per-step times in us of each of ``steps`` (name -> step), alternating round by
    round (so a change in the machine's load hits all): lists of (wall, cpu of this
    thread) per round."""
    import time
    out = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            for _ in range(inner):
                step()
            out[name].append(((time.perf_counter_ns() - w0) / inner / 1e3,
                              (time.thread_time_ns() - c0) / inner / 1e3))
    return out


def main(argv=None):
    """``python bench/test_train_bench.py [--rounds N] [--threads 1,2]``: the same cases,
    timed interleaved against torch with its default Adam and with its fused Adam (two
    twins of one model, so each torch variant times its own optimizer state); prints median
    wall and median calling-thread CPU time and torch / lucid for each (CPU time is the
    steadier figure on a loaded machine at 1 thread; at 2 threads only wall time counts
    the second thread's work), and the load average when the case ended."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", default=",".join(map(str, THREAD_SET)))
    ap.add_argument("--cases", default="128,256,512,cnn")
    args = ap.parse_args(argv)
    variants = ("default", "fused")
    for threads in [int(t) for t in args.threads.split(",")]:
        got = set_threads(threads)
        with _blas_threads(threads):
            print(f"threads={threads} lucid={got.get('lucid')} torch={got.get('torch')} "
                  f"blas={_numpy_blas_threads()} torch_adam={','.join(variants)}", flush=True)
            for case in args.cases.split(","):
                rng = np.random.default_rng(0)
                if case == "cnn":
                    x_np = rng.random((64, 1, 8, 8)).astype(np.float32)
                    y_np = rng.integers(0, 10, 64)
                else:
                    x_np = rng.standard_normal((BATCH, int(case))).astype(np.float32)
                    y_np = rng.integers(0, 10, BATCH)
                steps = {}
                for v in variants:
                    lm, tm = _cnn_pair() if case == "cnn" else _mlp_pair(int(case))
                    lucid_step, torch_step = _steps(lm, tm, x_np, y_np, torch_adam=v)
                    _check_equal_work(lucid_step, torch_step, lm, tm)
                    if "lucid" not in steps:
                        steps["lucid"] = lucid_step
                    steps[f"torch-{v}"] = torch_step
                _interleaved(steps, 3, 5)       # warm-up
                t = _interleaved(steps, args.rounds, 10)
                med = {k: np.median(np.array(v), axis=0) for k, v in t.items()}
                lw, lc = med["lucid"]
                line = f"  {case:>4}: lucid wall {lw:6.0f}us cpu {lc:6.0f}us"
                for v in variants:
                    tw, tc = med[f"torch-{v}"]
                    line += (f" | torch {v} wall {tw:6.0f} cpu {tc:6.0f}: x{tw / lw:.2f}"
                             f" cpu x{tc / lc:.2f}")
                print(line + f" | load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
