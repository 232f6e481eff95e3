"""Benchmarks of the everyday surface added by issue 15: linear algebra, einsum, sorting
and selection, lucid against torch (and NumPy for the forward), as ratios in one run.

  group  <op>-<size>-float64-<mode>-t1
  modes  fwd, fwd_bwd (op(...) reduced with fixed weights, then .backward())
  peers  lucid, torch, numpy (forward only, where NumPy has the op)

One thread for every peer (lucid's LAPACK calls go through NumPy's BLAS). Nothing asserts
on time; each case first checks lucid's and torch's results against each other (values
and gradients) outside the timed function. LUCID_BENCH_OPS filters ops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from _lucid_bench import ONLY_OPS, import_lucid, set_threads


def _spd(M, a):
    return a @ a.mT + a.shape[-1] * M.eye(a.shape[-1], dtype=M.float64)


def _sym(M, a):
    return a + a.mT


@dataclass(frozen=True)
class Case:
    name: str
    shapes: Callable                 # size label -> list of input shapes
    fn: Callable                     # (namespace, *inputs) -> tensor (a sign-invariant value)
    numpy: Callable | None = None  # (*arrays) -> array


CASES = [
    Case("solve", lambda n: [(n, n), (n, 4)],
         lambda M, a, b: M.linalg.solve(_spd(M, a), b),
         lambda a, b: np.linalg.solve(a @ a.T + a.shape[-1] * np.eye(a.shape[-1]), b)),
    Case("cholesky", lambda n: [(n, n)], lambda M, a: M.linalg.cholesky(_spd(M, a)),
         lambda a: np.linalg.cholesky(a @ a.T + a.shape[-1] * np.eye(a.shape[-1]))),
    Case("eigvalsh", lambda n: [(n, n)], lambda M, a: M.linalg.eigh(_sym(M, a))[0],
         lambda a: np.linalg.eigvalsh(a + a.T)),
    Case("svdvals", lambda n: [(n, n // 2)], lambda M, a: M.linalg.svdvals(a),
         lambda a: np.linalg.svd(a, compute_uv=False)),
    Case("slogdet", lambda n: [(8, n, n)], lambda M, a: M.linalg.slogdet(_spd(M, a))[1],
         lambda a: np.linalg.slogdet(a @ np.swapaxes(a, -1, -2) + a.shape[-1] * np.eye(a.shape[-1]))[1]),
    Case("einsum_attn", lambda n: [(2, 4, n, 16), (2, 4, n, 16)],
         lambda M, q, k: M.einsum("bhqd,bhkd->bhqk", q, k),
         lambda q, k: np.einsum("bhqd,bhkd->bhqk", q, k, optimize=True)),
    Case("sort", lambda n: [(16, n * 8)], lambda M, x: M.sort(x, -1).values,
         lambda x: np.sort(x, -1)),
    Case("topk", lambda n: [(16, n * 8)], lambda M, x: M.topk(x, 10, -1).values, None),
    Case("logcumsumexp", lambda n: [(16, n * 8)], lambda M, x: M.logcumsumexp(x, -1),
         lambda x: np.logaddexp.accumulate(x, -1)),
    Case("scatter_reduce_amax", lambda n: [(16, n * 8), (16, n * 8)],
         lambda M, x, s: M.scatter_reduce(x, 1, M.tensor(_INDEX(s.shape)), s, "amax"), None),
]


def _INDEX(shape):
    return np.random.default_rng(3).integers(0, shape[1], size=shape)


SIZES = {"n64": 64, "n256": 256}
CASES = [c for c in CASES if not ONLY_OPS or c.name in ONLY_OPS]
PARAMS = [pytest.param(c, s, m, p, id=f"{c.name}-{s}-float64-{m}-t1-{p}")
          for c in CASES for s in SIZES for m in ("fwd", "fwd_bwd")
          for p in ("lucid", "torch", "numpy")
          if not (p == "numpy" and (m == "fwd_bwd" or c.numpy is None))]


def _run(M, case, arrays, rg):
    if M.__name__ == "lucid":
        xs = [M.tensor(a, dtype=M.float64, requires_grad=rg) for a in arrays]
    else:
        xs = [M.tensor(a, requires_grad=rg) for a in arrays]
    return xs, case.fn(M, *xs)


@pytest.mark.parametrize("case,size,mode,peer", PARAMS)
def test_surface(benchmark, case, size, mode, peer):
    torch = pytest.importorskip("torch")
    lucid, err = import_lucid()
    if lucid is None:
        pytest.skip(f"lucid does not import: {err}")
    set_threads(1)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in case.shapes(SIZES[size])]
    rg = mode == "fwd_bwd"
    # correctness first, outside the timed function: lucid against torch
    (xl, ol), (xt, ot) = _run(lucid, case, arrays, rg), _run(torch, case, arrays, rg)
    np.testing.assert_allclose(ol.detach().numpy(), ot.detach().numpy(), rtol=1e-7, atol=1e-9)
    w = np.random.default_rng(1).standard_normal(tuple(ot.shape))
    if rg:
        (ol * lucid.tensor(w)).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        for a, b in zip(xl, xt):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-8)
    if peer == "numpy":
        np.testing.assert_allclose(case.numpy(*arrays), ot.detach().numpy(), rtol=1e-7, atol=1e-9)

        def timed():
            return case.numpy(*arrays)
    else:
        M = lucid if peer == "lucid" else torch
        wt = M.tensor(w)

        def timed():
            _xs, out = _run(M, case, arrays, rg)
            if rg:
                (out * wt).sum().backward()
            return out

    benchmark.group = f"{case.name}-{size}-float64-{mode}-t1"
    benchmark.extra_info.update(op=case.name, size_label=size, mode=mode, peer=peer, threads=1)
    benchmark(timed)
