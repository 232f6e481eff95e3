"""Broadcast binary ops at 1e5 elements: a (1000, 100) tensor with a row (100,), a
column (1000, 1) and a 0-d tensor, and two 3-D broadcasts ((10, 1, 100) with (1, 100, 1),
(10, 100, 100) with (10, 1, 100)), lucid against NumPy and torch in one run.

  group  bc_<op>_<kind>-1e5-<dtype>-<mode>-t<threads>
  kinds  row, col, scalar0d, outer3d, mid3d
  modes  fwd, fwd_bwd (op(a, b).sum().backward(), both operands requiring grad)
  peers  lucid, numpy (forward only), torch

Nothing asserts on time; each case first checks its result against NumPy in float64.
"""
import itertools

import numpy as np
import pytest

from _lucid_bench import ONLY_OPS, THREAD_SET, import_lucid, set_threads

OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
       "maximum": np.maximum}
KINDS = {"row": ((1000, 100), (100,)), "col": ((1000, 100), (1000, 1)),
         "scalar0d": ((1000, 100), ()), "outer3d": ((10, 1, 100), (1, 100, 1)),
         "mid3d": ((10, 100, 100), (10, 1, 100))}     # shapes of a and b
CASES = [pytest.param(o, k, d, m, t, p, id=f"bc_{o}_{k}-1e5-{d}-{m}-t{t}-{p}")
         for o, k, d, m, t, p in itertools.product(OPS, KINDS, ["float32", "float64"],
                                                   ["fwd", "fwd_bwd"], THREAD_SET,
                                                   ["lucid", "numpy", "torch"])
         if (not ONLY_OPS or o in ONLY_OPS) and not (p == "numpy" and m == "fwd_bwd")]


@pytest.mark.parametrize("op,kind,dtype,mode,threads,peer", CASES)
def test_broadcast(benchmark, op, kind, dtype, mode, threads, peer):
    set_threads(threads)
    rng = np.random.default_rng(11)
    a = rng.uniform(0.5, 2.0, KINDS[kind][0]).astype(dtype)
    b = np.asarray(rng.uniform(0.5, 2.0, KINDS[kind][1])).astype(dtype)
    want = OPS[op](a.astype(np.float64), b.astype(np.float64))
    if peer == "numpy":
        def timed():
            return OPS[op](a, b)
        got = timed()
    else:
        if peer == "lucid":
            mod, err = import_lucid()
            if mod is None:
                pytest.skip(f"lucid does not import: {err}")
            x, y = mod.tensor(a), mod.tensor(b)
        else:
            mod = pytest.importorskip("torch")
            x, y = mod.from_numpy(a.copy()), mod.from_numpy(b.copy())
        fn = getattr(mod, op)
        if mode == "fwd":
            def timed():
                return fn(x, y)
        else:
            x.requires_grad_(True)
            y.requires_grad_(True)

            def timed():
                x.grad = None
                y.grad = None
                fn(x, y).sum().backward()
        r = fn(x, y)
        got = r.detach().numpy()
        timed()
    rtol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got, want, rtol=rtol)
    benchmark.group = f"bc_{op}_{kind}-1e5-{dtype}-{mode}-t{threads}"
    benchmark.extra_info.update(op=f"bc_{op}_{kind}", size=100_000, dtype=dtype, mode=mode,
                                threads=threads, peer=peer)
    benchmark(timed)


# -- comparisons, where, masked_fill and clamp over the same layouts ------------------------
#   group  sel_<op>_<kind>-<size>-<dtype>-fwd-t<threads>
#   ops    lt, eq (bool result), where (cond full, input full, other of <kind>),
#          masked_fill (mask of <kind>, a number), clamp (tensor bounds of <kind>),
#          clamp_num (number bounds; kind "num" only)
SEL_OPS = ["lt", "eq", "where", "masked_fill", "clamp", "clamp_num"]
SEL_SIZES = {"1e3": 10, "1e5": 1000}          # rows of 100


def _sel_kinds(op):
    return ["num"] if op == "clamp_num" else ["row", "col", "scalar0d"]


SEL_CASES = [pytest.param(o, k, s, d, t, p, id=f"sel_{o}_{k}-{s}-{d}-t{t}-{p}")
             for o in SEL_OPS for k in _sel_kinds(o)
             for s, d, t, p in itertools.product(SEL_SIZES, ["float32", "float64"], THREAD_SET,
                                                 ["lucid", "numpy", "torch"])
             if not ONLY_OPS or o in ONLY_OPS]


def _sel_shape(kind, rows):
    return {"row": (100,), "col": (rows, 1), "scalar0d": (), "num": ()}[kind]


def _sel_numpy(op, a, b, c):
    """The reference, in NumPy: a full, b of the case's kind, c a full bool mask."""
    if op == "lt":
        return a < b
    if op == "eq":
        return a == b
    if op == "where":
        return np.where(c, a, b)
    if op == "masked_fill":
        return np.where(b > 1.0, a.dtype.type(0.5), a)
    if op == "clamp":
        return np.minimum(np.maximum(a, b), b + a.dtype.type(0.5))
    return np.minimum(np.maximum(a, a.dtype.type(0.8)), a.dtype.type(1.5))


@pytest.mark.parametrize("op,kind,size,dtype,threads,peer", SEL_CASES)
def test_broadcast_select(benchmark, op, kind, size, dtype, threads, peer):
    set_threads(threads)
    rows = SEL_SIZES[size]
    rng = np.random.default_rng(12)
    a = rng.uniform(0.5, 2.0, (rows, 100)).astype(dtype)
    b = np.asarray(rng.uniform(0.5, 2.0, _sel_shape(kind, rows))).astype(dtype)
    if op == "eq":
        a[::3] = np.broadcast_to(b, a.shape)[::3]          # some equal elements
    c = rng.uniform(size=(rows, 100)) < 0.5
    want = _sel_numpy(op, a, b, c)
    if peer == "numpy":
        def timed():
            return _sel_numpy(op, a, b, c)
    else:
        if peer == "lucid":
            mod, err = import_lucid()
            if mod is None:
                pytest.skip(f"lucid does not import: {err}")
            x, y, m = mod.tensor(a), mod.tensor(b), mod.tensor(c)
        else:
            mod = pytest.importorskip("torch")
            x, y, m = mod.from_numpy(a.copy()), mod.from_numpy(b.copy()), mod.from_numpy(c.copy())
        half = 0.5
        fns = {"lt": lambda: mod.lt(x, y), "eq": lambda: mod.eq(x, y),
               "where": lambda: mod.where(m, x, y),
               "masked_fill": lambda: mod.masked_fill(x, y > 1.0, half),
               "clamp": lambda: mod.clamp(x, y, yh),
               "clamp_num": lambda: mod.clamp(x, 0.8, 1.5)}
        yh = y + half
        timed = fns[op]
    got = np.asarray(timed().numpy() if peer != "numpy" else timed())
    np.testing.assert_array_equal(got, want)
    benchmark.group = f"sel_{op}_{kind}-{size}-{dtype}-fwd-t{threads}"
    benchmark.extra_info.update(op=f"sel_{op}_{kind}", size=rows * 100, dtype=dtype, mode="fwd",
                                threads=threads, peer=peer)
    benchmark(timed)
