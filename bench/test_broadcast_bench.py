"""Broadcast binary ops at 1e5 elements: a (1000, 100) tensor with a row (100,), a
column (1000, 1) and a 0-d tensor, lucid against NumPy and torch in one run.

  group  bc_<op>_<kind>-1e5-<dtype>-<mode>-t<threads>
  kinds  row, col, scalar0d
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
KINDS = {"row": (100,), "col": (1000, 1), "scalar0d": ()}
CASES = [pytest.param(o, k, d, m, t, p, id=f"bc_{o}_{k}-1e5-{d}-{m}-t{t}-{p}")
         for o, k, d, m, t, p in itertools.product(OPS, KINDS, ["float32", "float64"],
                                                   ["fwd", "fwd_bwd"], THREAD_SET,
                                                   ["lucid", "numpy", "torch"])
         if (not ONLY_OPS or o in ONLY_OPS) and not (p == "numpy" and m == "fwd_bwd")]


@pytest.mark.parametrize("op,kind,dtype,mode,threads,peer", CASES)
def test_broadcast(benchmark, op, kind, dtype, mode, threads, peer):
    set_threads(threads)
    rng = np.random.default_rng(11)
    a = rng.uniform(0.5, 2.0, (1000, 100)).astype(dtype)
    b = np.asarray(rng.uniform(0.5, 2.0, KINDS[kind])).astype(dtype)
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
