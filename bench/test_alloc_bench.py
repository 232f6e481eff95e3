"""A 1e5-element float32 forward+backward (``(x * y * x * y).sum().backward()``),
lucid against torch in one run, with lucid's buffer cache warm (the steady state)
and emptied before every call (``lucid.empty_cache()``: each buffer is a fresh
allocation, as in a new process).

  group  alloc_<case>-1e5-float32-fwd_bwd-t<threads>
  peers  lucid, torch

The first-call figures of a fresh process come from tools/first_call.py (a benchmark
process has long warmed glibc's malloc). Nothing asserts on time; each case first
checks its gradients against NumPy.
"""
import numpy as np
import pytest

from _lucid_bench import THREAD_SET, import_lucid, set_threads

N = 100_000
CASES = [pytest.param(c, t, p, id=f"alloc_{c}-1e5-float32-fwd_bwd-t{t}-{p}")
         for c in ("warm", "cold") for t in THREAD_SET for p in ("lucid", "torch")]


@pytest.mark.parametrize("case,threads,peer", CASES)
def test_alloc(benchmark, case, threads, peer):
    set_threads(threads)
    rng = np.random.default_rng(7)
    a = rng.uniform(0.5, 2.0, N).astype(np.float32)
    b = rng.uniform(0.5, 2.0, N).astype(np.float32)
    if peer == "lucid":
        mod, err = import_lucid()
        if mod is None:
            pytest.skip(f"lucid does not import: {err}")
        x, y = mod.tensor(a, requires_grad=True), mod.tensor(b, requires_grad=True)
        setup = mod.empty_cache if case == "cold" else None
    else:
        mod = pytest.importorskip("torch")
        x = mod.from_numpy(a.copy()).requires_grad_(True)
        y = mod.from_numpy(b.copy()).requires_grad_(True)
        setup = None

    def step():
        x.grad = None
        y.grad = None
        (x * y * x * y).sum().backward()

    step()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(x.grad.numpy(), 2 * a64 * b64 * b64, rtol=1e-5)
    np.testing.assert_allclose(y.grad.numpy(), 2 * a64 * a64 * b64, rtol=1e-5)
    benchmark.group = f"alloc_{case}-1e5-float32-fwd_bwd-t{threads}"
    benchmark.extra_info.update(op=f"alloc_{case}", size=N, dtype="float32", mode="fwd_bwd",
                                threads=threads, peer=peer)
    if setup is None:
        benchmark(step)
    else:
        benchmark.pedantic(step, setup=setup, rounds=50, iterations=1)
