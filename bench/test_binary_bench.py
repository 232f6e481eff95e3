"""Binary element-wise benchmarks: pow, atan2, hypot, maximum, minimum,
logaddexp (and neg) against NumPy and PyTorch, as ratios in one run.

Same conventions as test_elementwise.py, so bench/conftest.py prints these
groups in its ratio table and checks them against the same rules:

  group  <op>-<size>-<dtype>-<mode>-t<threads>
  modes  fwd (y = op(a, b)), fwd_bwd (op(a, b).sum().backward(), every tensor
         operand requiring grad)
  peers  lucid, numpy (forward only), torch, and "copy" (a.copy()) at 1e7

Ops whose name ends in a number take that Python scalar as the exponent
(pow_s2 is ``a ** 2``, pow_s2.5 is ``a ** 2.5``): the scalar-operand kernels.
Sizes 1e3 and 1e5 for every op, 1e7 for LUCID_BENCH_BIN_1E7_OPS (default
"maximum,atan2") or every op with LUCID_BENCH_FULL=1. LUCID_BENCH_OPS filters
ops here too. Nothing asserts on time; every case first checks its result (and
lucid's) against a float64 NumPy reference outside the timed function.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pytest

from _lucid_bench import FULL, ONLY_OPS, THREAD_SET, import_lucid, set_threads


@dataclass(frozen=True)
class BinOp:
    name: str
    numpy: Callable                  # float64 reference and the numpy peer
    lucid: Callable                  # (lucid module, a, b) -> tensor
    torch: Callable                  # (torch module, a, b) -> tensor
    a_range: tuple = (0.5, 2.0)
    b_range: Optional[tuple] = (-2.0, 2.0)   # None: b is not a tensor (scalar or unary)
    grad: Optional[Callable] = None  # float64 (d/da, d/db) of sum(op); analytic, not
                                     # differences (atan2's branch cut, maximum's ties)


def _scalar_pow(c):
    return BinOp(f"pow_s{c:g}", lambda a, b: np.power(a, c),
                 lambda m, a, b: a ** c, lambda t, a, b: a ** c, b_range=None,
                 grad=lambda a, b: (c * np.power(a, c - 1), None))


def _max_grad(a, b):
    return (a > b) + 0.5 * (a == b), (b > a) + 0.5 * (a == b)


def _min_grad(a, b):
    return (a < b) + 0.5 * (a == b), (b < a) + 0.5 * (a == b)


OPS_LIST = [
    BinOp("pow", np.power, lambda m, a, b: a ** b, lambda t, a, b: a ** b,
          grad=lambda a, b: (b * np.power(a, b - 1), np.power(a, b) * np.log(a))),
    _scalar_pow(2.0),
    _scalar_pow(2.5),
    BinOp("atan2", np.arctan2, lambda m, a, b: m.atan2(a, b), lambda t, a, b: t.atan2(a, b),
          a_range=(-2.0, 2.0), grad=lambda a, b: (b / (a * a + b * b), -a / (a * a + b * b))),
    BinOp("hypot", np.hypot, lambda m, a, b: m.hypot(a, b), lambda t, a, b: t.hypot(a, b),
          a_range=(-2.0, 2.0), grad=lambda a, b: (a / np.hypot(a, b), b / np.hypot(a, b))),
    BinOp("maximum", np.maximum, lambda m, a, b: m.maximum(a, b),
          lambda t, a, b: t.maximum(a, b), a_range=(-2.0, 2.0), grad=_max_grad),
    BinOp("minimum", np.minimum, lambda m, a, b: m.minimum(a, b),
          lambda t, a, b: t.minimum(a, b), a_range=(-2.0, 2.0), grad=_min_grad),
    BinOp("logaddexp", np.logaddexp, lambda m, a, b: m.logaddexp(a, b),
          lambda t, a, b: t.logaddexp(a, b), a_range=(-5.0, 5.0), b_range=(-5.0, 5.0),
          grad=lambda a, b: (np.exp(a - np.logaddexp(a, b)), np.exp(b - np.logaddexp(a, b)))),
    BinOp("neg", lambda a, b: -a, lambda m, a, b: -a, lambda t, a, b: -a,
          a_range=(-2.0, 2.0), b_range=None, grad=lambda a, b: (-np.ones_like(a), None)),
]
OPS = {o.name: o for o in OPS_LIST if not ONLY_OPS or o.name in ONLY_OPS}

SIZES = {"1e3": 10**3, "1e5": 10**5, "1e7": 10**7}
DTYPES = ["float32", "float64"]
MODES = ["fwd", "fwd_bwd"]
PEERS = ["lucid", "numpy", "torch", "copy"]
PARALLEL_MIN = 2**15
SMOKE_MAX = 2**18 + 7          # 1e7 cases shrink to this under --benchmark-disable
OPS_1E7 = [t for t in os.environ.get("LUCID_BENCH_BIN_1E7_OPS", "maximum,atan2").split(",") if t]
TOL = {"float32": dict(rtol=2e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-14)}


def _in_matrix(op, size, mode, threads, peer):
    n = SIZES[size]
    if n == 10**7 and not FULL and op.name not in OPS_1E7:
        return False
    if n < PARALLEL_MIN and threads != THREAD_SET[0]:
        return False
    if peer == "copy":
        return n == 10**7 and mode == "fwd"
    if peer == "numpy":
        return mode == "fwd"
    return True


def group_name(op, size, dtype, mode, threads):
    return f"{op}-{size}-{dtype}-{mode}-t{threads}"


CASES = [
    pytest.param(o, s, d, m, t, p, id=f"{group_name(o, s, d, m, t)}-{p}")
    for o, s, d, m, t, p in itertools.product(OPS, SIZES, DTYPES, MODES, THREAD_SET, PEERS)
    if _in_matrix(OPS[o], s, m, t, p)
]

_data: dict = {}


def _inputs(op, n, dtype):
    key = (op.name, n, dtype)
    if key not in _data:
        _data.clear()                       # keep at most one (1e7) pair alive
        rng = np.random.default_rng(4321 + n)
        a = rng.uniform(*op.a_range, n).astype(dtype)
        b = rng.uniform(*op.b_range, n).astype(dtype) if op.b_range else None
        _data[key] = (a, b)
    return _data[key]


def _reference(op, a, b):
    a64 = a.astype(np.float64)
    b64 = None if b is None else b.astype(np.float64)
    return op.numpy(a64, b64)


def _grad_reference(op, a, b):
    """d/da and d/db of sum(op) in float64, from the op's analytic derivative."""
    a64 = a.astype(np.float64)
    b64 = None if b is None else b.astype(np.float64)
    with np.errstate(all="ignore"):
        return op.grad(a64, b64)


def _check(got, want, dtype, what):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, err_msg=what, **TOL[dtype])


def _grad_tol(dtype):
    return dict(rtol=1e-3, atol=1e-4) if dtype == "float32" else dict(rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op_name,size,dtype,mode,threads,peer", CASES)
def test_binary(request, benchmark, op_name, size, dtype, mode, threads, peer):
    op = OPS[op_name]
    n = SIZES[size]
    if n > SMOKE_MAX and request.config.getoption("benchmark_disable", False):
        n = SMOKE_MAX
    got_threads = set_threads(threads)
    a, b = _inputs(op, n, dtype)

    if peer in ("numpy", "copy"):
        if peer == "numpy":
            def timed():
                return op.numpy(a, b)
            with np.errstate(all="ignore"):
                _check(timed(), _reference(op, a, b), dtype, f"numpy {op_name}")
        else:
            def timed():
                return a.copy()
    else:
        if peer == "lucid":
            mod, err = import_lucid()
            if mod is None:
                pytest.skip(f"lucid does not import: {err}")
            make = lambda v, rg: mod.tensor(v, requires_grad=rg)  # noqa: E731
            call = lambda x, y: op.lucid(mod, x, y)               # noqa: E731
        else:
            mod = pytest.importorskip("torch")
            make = lambda v, rg: mod.from_numpy(v.copy()).requires_grad_(rg)  # noqa: E731
            call = lambda x, y: op.torch(mod, x, y)                           # noqa: E731
        rg = mode == "fwd_bwd"
        x = make(a, rg)
        y = None if b is None else make(b, rg)
        if mode == "fwd":
            def timed():
                return call(x, y)
            out = timed()
            _check(out.detach().numpy() if hasattr(out, "detach") else out.numpy(),
                   _reference(op, a, b), dtype, f"{peer} {op_name}")
            assert str(out.dtype).endswith(dtype)
        else:
            def timed():
                x.grad = None
                if y is not None:
                    y.grad = None
                call(x, y).sum().backward()
            timed()
            ga, gb = _grad_reference(op, a, b)
            tol = _grad_tol(dtype)
            np.testing.assert_allclose(np.asarray(x.grad.numpy(), np.float64), ga,
                                       err_msg=f"{peer} d{op_name}/da", **tol)
            if y is not None:
                np.testing.assert_allclose(np.asarray(y.grad.numpy(), np.float64), gb,
                                           err_msg=f"{peer} d{op_name}/db", **tol)

    benchmark.group = group_name(op_name, size, dtype, mode, threads)
    benchmark.extra_info.update(op=op_name, size=n, size_label=size, dtype=dtype, mode=mode,
                                threads=threads, peer=peer,
                                lucid_threads=got_threads.get("lucid"),
                                torch_threads=got_threads.get("torch"))
    benchmark(timed)
