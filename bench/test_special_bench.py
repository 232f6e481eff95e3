"""Benchmarks of the special functions and the activations with parameters: lucid against
torch and SciPy, as ratios in one run.

  group  <op>-1e5-<dtype>-<mode>-t1
  modes  fwd, fwd_bwd (op(x).sum().backward(), x.grad reset each call)
  peers  lucid, torch, scipy (forward only, where scipy.special has the function)

One thread for every peer. Nothing asserts on time; each case first checks lucid's value
against torch's outside the timed function. LUCID_BENCH_OPS filters ops. The same file
runs against an older build (where these computed through SciPy / composites), so
before / after numbers come from one command.
"""

from __future__ import annotations

import numpy as np
import pytest
from _lucid_bench import ONLY_OPS, import_lucid, set_threads

# name, lucid fn (lucid, F, x), torch fn (torch, x), scipy fn or None, input domain
CASES = [
    ("lgamma", lambda L, F, x: L.lgamma(x), lambda T, x: T.lgamma(x), "gammaln", (0.1, 20.0)),
    ("digamma", lambda L, F, x: L.digamma(x), lambda T, x: T.digamma(x), "psi", (0.1, 20.0)),
    ("polygamma2", lambda L, F, x: L.polygamma(2, x), lambda T, x: T.polygamma(2, x), None,
     (0.1, 20.0)),
    ("sinc", lambda L, F, x: L.sinc(x), lambda T, x: T.sinc(x), None, (-10.0, 10.0)),
    ("i0", lambda L, F, x: L.i0(x), lambda T, x: T.i0(x), "i0", (-20.0, 20.0)),
    ("erfcx", lambda L, F, x: L.special.erfcx(x), lambda T, x: T.special.erfcx(x), "erfcx",
     (-5.0, 30.0)),
    ("log_ndtr", lambda L, F, x: L.special.log_ndtr(x), lambda T, x: T.special.log_ndtr(x),
     "log_ndtr", (-30.0, 5.0)),
    ("ndtri", lambda L, F, x: L.special.ndtri(x), lambda T, x: T.special.ndtri(x), "ndtri",
     (0.001, 0.999)),
    # two operands: x log(x) (the gradient reaches both of them)
    ("xlogy", lambda L, F, x: L.xlogy(x, x), lambda T, x: T.xlogy(x, x), "xlogy", (0.0, 20.0)),
    ("hardtanh", lambda L, F, x: F.hardtanh(x, -0.5, 0.5),
     lambda T, x: T.nn.functional.hardtanh(x, -0.5, 0.5), None, (-2.0, 2.0)),
    ("celu", lambda L, F, x: F.celu(x, 0.7), lambda T, x: T.nn.functional.celu(x, 0.7), None,
     (-5.0, 5.0)),
    ("softplus_beta", lambda L, F, x: F.softplus(x, 2.0, 10.0),
     lambda T, x: T.nn.functional.softplus(x, 2.0, 10.0), None, (-10.0, 10.0)),
]
N = 100_000


def _cases():
    out = []
    for name, *_ in CASES:
        if ONLY_OPS and name not in ONLY_OPS:
            continue
        for dt in ("float32", "float64"):
            for mode in ("fwd", "fwd_bwd"):
                for peer in ("lucid", "torch", "scipy"):
                    if peer == "scipy" and (mode != "fwd" or dict((c[0], c[3]) for c in CASES)[name] is None):
                        continue
                    out.append(pytest.param(name, dt, mode, peer,
                                            id=f"{name}-{dt}-{mode}-{peer}"))
    return out


@pytest.mark.parametrize("name,dt,mode,peer", _cases())
def test_special(benchmark, name, dt, mode, peer):
    case = next(c for c in CASES if c[0] == name)
    _, lf, tf, sname, (lo, hi) = case
    benchmark.group = f"{name}-1e5-{dt}-{mode}-t1"
    a = np.random.default_rng(0).uniform(lo, hi, N).astype(dt)
    torch = pytest.importorskip("torch")
    set_threads(1)
    ta = torch.from_numpy(a.copy())
    want = tf(torch, ta).numpy()
    if peer == "scipy":
        sp = pytest.importorskip("scipy.special")
        f = getattr(sp, sname)
        benchmark(f, *((a, a) if name == "xlogy" else (a,)))
        return
    if peer == "torch":
        if mode == "fwd":
            benchmark(tf, torch, ta)
        else:
            x = ta.clone().requires_grad_(True)

            def step():
                x.grad = None
                tf(torch, x).sum().backward()
            benchmark(step)
        return
    lucid, why = import_lucid()
    if lucid is None:
        pytest.skip(why)
    import lucid.nn.functional as F
    x = lucid.tensor(a)
    got = lf(lucid, F, x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4 if dt == "float32" else 1e-9, atol=1e-6)
    if mode == "fwd":
        benchmark(lf, lucid, F, x)
    else:
        xg = lucid.tensor(a, requires_grad=True)

        def step():
            xg.grad = None
            lf(lucid, F, xg).sum().backward()
        benchmark(step)
