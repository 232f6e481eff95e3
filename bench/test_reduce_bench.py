"""Reduction and softmax-family benchmarks: lucid against NumPy and PyTorch, as
ratios in one run (bench/conftest.py prints them per group).

  group  <op>-<size>-<dtype>-<mode>-t<threads>
  ops    sum, mean, amax, amin, argmax, max (values and indices), logsumexp, prod,
         var, std, norm (p=2), all, any, cumsum, cumprod, softmax, log_softmax, each along the last axis (``<op>_last``), the first
         axis (``<op>_first``) and, for the reductions, all axes (``<op>_all``)
  sizes  1e3 as (10, 100), 1e5 as (1000, 100)
  dtypes float32, float64; int32 and int64 too for the ops with integer kernels
         (sum, amax, amin, argmax, max, all, any, cumsum: values in [-3, 3])
  modes  fwd; fwd_bwd (op(x).sum().backward()) for var, norm, softmax and log_softmax
  peers  lucid, numpy (forward; scipy.special for the softmax family, if installed), torch

Thread counts come from LUCID_BENCH_THREADS (default 1,2); 1e3 cases run on the first
only. LUCID_BENCH_OPS filters ops (e.g. sum_last,softmax_last). Nothing asserts on
time; every case first checks its result against float64 NumPy outside the timed
function.

    python -m pytest bench/test_reduce_bench.py --benchmark-only -q
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from _lucid_bench import ONLY_OPS, THREAD_SET, import_lucid, set_threads

try:
    import scipy.special as _sps
except ImportError:            # pragma: no cover
    _sps = None

SHAPES = {"1e3": (10, 100), "1e5": (1000, 100)}
DTYPES = ["float32", "float64"]
INT_DTYPES = ["int32", "int64"]
INT_OPS = {"sum", "amax", "amin", "argmax", "max", "all", "any", "cumsum"}
PEERS = ["lucid", "numpy", "torch"]
AXES = {"last": 1, "first": 0, "all": None}


def _np_lse(a, d):
    m = np.max(a, axis=d, keepdims=True)
    return np.squeeze(np.log(np.sum(np.exp(a - m), axis=d, keepdims=True)) + m, axis=d)


def _np_softmax(a, d):
    if _sps is not None:
        return _sps.softmax(a, axis=d)
    e = np.exp(a - a.max(axis=d, keepdims=True))
    return e / e.sum(axis=d, keepdims=True)


def _np_log_softmax(a, d):
    if _sps is not None:
        return _sps.log_softmax(a, axis=d)
    z = a - a.max(axis=d, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=d, keepdims=True))


def _all(d, t):
    return tuple(range(t.ndim)) if d is None else d


# name -> (lucid(m, x, d), torch(t, x, d), numpy(a, d), axes it runs on, fwd_bwd?)
REDUCTIONS = {
    "sum": (lambda m, x, d: x.sum() if d is None else x.sum(d),
            lambda t, x, d: x.sum() if d is None else x.sum(d),
            lambda a, d: a.sum(axis=d), ("last", "first", "all"), False),
    "mean": (lambda m, x, d: x.mean() if d is None else x.mean(d),
             lambda t, x, d: x.mean() if d is None else x.mean(d),
             lambda a, d: a.mean(axis=d), ("last", "first", "all"), False),
    "amax": (lambda m, x, d: m.amax(x) if d is None else m.amax(x, d),
             lambda t, x, d: t.amax(x) if d is None else t.amax(x, d),
             lambda a, d: a.max(axis=d), ("last", "first", "all"), False),
    "amin": (lambda m, x, d: m.amin(x) if d is None else m.amin(x, d),
             lambda t, x, d: t.amin(x) if d is None else t.amin(x, d),
             lambda a, d: a.min(axis=d), ("last", "first", "all"), False),
    "argmax": (lambda m, x, d: m.argmax(x, d), lambda t, x, d: t.argmax(x, d),
               lambda a, d: a.argmax(axis=d), ("last", "first", "all"), False),
    "max": (lambda m, x, d: m.max(x, d).values, lambda t, x, d: t.max(x, d).values,
            lambda a, d: a.max(axis=d), ("last", "first"), False),
    "logsumexp": (lambda m, x, d: m.logsumexp(x, _all(d, x)),
                  lambda t, x, d: t.logsumexp(x, _all(d, x)),
                  lambda a, d: _np_lse(a.reshape(-1), 0) if d is None else _np_lse(a, d),
                  ("last", "first", "all"), False),
    "prod": (lambda m, x, d: x.prod() if d is None else x.prod(d),
             lambda t, x, d: x.prod() if d is None else x.prod(d),
             lambda a, d: a.prod(axis=d), ("last", "first", "all"), False),
    "var": (lambda m, x, d: m.var(x, d), lambda t, x, d: t.var(x, d),
            lambda a, d: a.var(axis=d, ddof=1), ("last", "first", "all"), True),
    "std": (lambda m, x, d: m.std(x, d), lambda t, x, d: t.std(x, d),
            lambda a, d: a.std(axis=d, ddof=1), ("last", "first", "all"), False),
    "norm": (lambda m, x, d: m.norm(x, 2, d), lambda t, x, d: t.linalg.vector_norm(x, 2, d),
             lambda a, d: np.sqrt((a * a).sum(axis=d)), ("last", "first", "all"), True),
    "all": (lambda m, x, d: m.all(x) if d is None else m.all(x, d),
            lambda t, x, d: t.all(x) if d is None else t.all(x, d),
            lambda a, d: a.all(axis=d), ("last", "first", "all"), False),
    "any": (lambda m, x, d: m.any(x) if d is None else m.any(x, d),
            lambda t, x, d: t.any(x) if d is None else t.any(x, d),
            lambda a, d: a.any(axis=d), ("last", "first", "all"), False),
    "cumsum": (lambda m, x, d: m.cumsum(x, d), lambda t, x, d: t.cumsum(x, d),
               lambda a, d: a.cumsum(axis=d), ("last", "first"), False),
    "cumprod": (lambda m, x, d: m.cumprod(x, d), lambda t, x, d: t.cumprod(x, d),
                lambda a, d: a.cumprod(axis=d), ("last", "first"), False),
    "softmax": (lambda m, x, d: m.softmax(x, d), lambda t, x, d: t.softmax(x, d),
                _np_softmax, ("last", "first"), True),
    "log_softmax": (lambda m, x, d: m.log_softmax(x, d), lambda t, x, d: t.log_softmax(x, d),
                    _np_log_softmax, ("last", "first"), True),
}

OPS = {f"{name}_{ax}": (name, ax) for name, row in REDUCTIONS.items() for ax in row[3]
       if not ONLY_OPS or f"{name}_{ax}" in ONLY_OPS}


def _modes(name):
    return ["fwd", "fwd_bwd"] if REDUCTIONS[name][4] else ["fwd"]


def group_name(op, size, dtype, mode, threads):
    return f"{op}-{size}-{dtype}-{mode}-t{threads}"


def _in_matrix(op, size, mode, threads, peer):
    if size == "1e3" and threads != THREAD_SET[0]:
        return False
    if peer == "numpy":
        return mode == "fwd"
    return True


def _dtypes(name):
    return DTYPES + INT_DTYPES if name in INT_OPS else DTYPES


CASES = [
    pytest.param(o, s, d, m, t, p, id=f"{group_name(o, s, d, m, t)}-{p}")
    for o in OPS for s, t, p in itertools.product(SHAPES, THREAD_SET, PEERS)
    for d in _dtypes(OPS[o][0])
    for m in _modes(OPS[o][0])
    if _in_matrix(o, s, m, t, p)
]

TOL = {"float32": dict(rtol=1e-4, atol=1e-5), "float64": dict(rtol=1e-10, atol=1e-12)}


def _input(shape, dtype):
    if dtype.startswith("int"):
        return np.random.default_rng(1234).integers(-3, 4, size=shape).astype(dtype)
    return np.random.default_rng(1234).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("op_name,size,dtype,mode,threads,peer", CASES)
def test_reduce(benchmark, op_name, size, dtype, mode, threads, peer):
    name, ax = OPS[op_name]
    f_lucid, f_torch, f_numpy, _, _ = REDUCTIONS[name]
    d = AXES[ax]
    got_threads = set_threads(threads)
    a = _input(SHAPES[size], dtype)
    want = f_numpy(a.astype(np.float64) if a.dtype.kind == "f" else a, d)

    if peer == "numpy":
        def timed():
            return f_numpy(a, d)
        # NumPy's float32 cumsum accumulates in float32 (lucid and torch in double)
        tol = dict(rtol=1e-3, atol=1e-3) if name == "cumsum" and dtype == "float32" else \
            TOL.get(dtype, {})
        np.testing.assert_allclose(np.asarray(timed(), np.float64), want, **tol)
    else:
        if peer == "lucid":
            mod, err = import_lucid()
            if mod is None:
                pytest.skip(f"lucid does not import: {err}")
            x = mod.tensor(a, requires_grad=mode == "fwd_bwd")
            call = f_lucid
        else:
            mod = pytest.importorskip("torch")
            x = mod.from_numpy(a.copy()).requires_grad_(mode == "fwd_bwd")
            call = f_torch
        out = call(mod, x, d)
        got = out.detach().numpy() if hasattr(out, "detach") else out.numpy()
        np.testing.assert_allclose(np.asarray(got, np.float64), want, **TOL.get(dtype, {}))
        if mode == "fwd":
            def timed():
                return call(mod, x, d)
        else:
            oshape = tuple(out.shape)         # the output's: reductions shrink it
            w = mod.tensor(np.linspace(-1, 1, int(np.prod(oshape))).reshape(oshape).astype(dtype))

            def timed():
                x.grad = None
                (call(mod, x, d) * w).sum().backward()
            timed()

    benchmark.group = group_name(op_name, size, dtype, mode, threads)
    benchmark.extra_info.update(op=op_name, size=int(np.prod(SHAPES[size])), size_label=size,
                                dtype=dtype, mode=mode, threads=threads, peer=peer,
                                lucid_threads=got_threads.get("lucid"),
                                torch_threads=got_threads.get("torch"))
    benchmark(timed)
