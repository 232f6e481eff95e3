#!/usr/bin/env python
"""Print lucid / torch and lucid / numpy time ratios for reductions and the softmax
family, measured in one process (median of repeats; the bench/ suite does the same
with pytest-benchmark).

    python tools/reduce_ratios.py                     # the (1000, 100) float32 cases
    python tools/reduce_ratios.py --full              # every op x axis, 1e3/1e5, f32/f64, 1/2 threads
    python tools/reduce_ratios.py --full --ops sum,mean   # those ops only
    python tools/reduce_ratios.py --full --min        # fastest single call of 300 (for a busy machine)
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import lucid  # noqa: E402
import torch  # noqa: E402
from test_reduce_bench import AXES, REDUCTIONS  # noqa: E402

ISSUE = [("sum", "last", "fwd"), ("amax", "last", "fwd"), ("sum", "first", "fwd"),
         ("softmax", "last", "fwd"), ("log_softmax", "last", "fwd_bwd")]


def med(f, reps=9):
    f()
    n, t = 1, 0.0
    while t < 2e-3:                       # calls per repeat: about 2 ms
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        t = time.perf_counter() - t0
        n *= 2
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        ts.append((time.perf_counter() - t0) / n)
    return statistics.median(ts)


def fastest(f, calls=300):
    """The fastest of ``calls`` single calls: on a machine other processes keep busy,
    the median of batches mostly measures them, the fastest call much less so."""
    f()
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def case(name, ax, mode, shape, dtype, threads, timer=med):
    fl, ft, fn, _, _ = REDUCTIONS[name]
    d = AXES[ax]
    lucid.set_num_threads(threads)
    torch.set_num_threads(threads)
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    out = {}
    for peer, mod, make, f in (("lucid", lucid, lambda v, rg: lucid.tensor(v, requires_grad=rg), fl),
                               ("torch", torch, lambda v, rg: torch.from_numpy(v.copy())
                                .requires_grad_(rg), ft)):
        x = make(a, mode == "fwd_bwd")
        if mode == "fwd":
            out[peer] = timer(lambda: f(mod, x, d))
        else:
            oshape = tuple(f(mod, x, d).shape)   # the output's: reductions shrink it
            w = mod.tensor(np.linspace(-1, 1, int(np.prod(oshape))).reshape(oshape).astype(dtype))

            def fb():
                x.grad = None
                (f(mod, x, d) * w).sum().backward()
            out[peer] = timer(fb)
    if mode == "fwd":
        out["numpy"] = timer(lambda: fn(a, d))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--min", action="store_true", help="time the fastest single call")
    ap.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    args = ap.parse_args()
    print(f"lucid from {os.path.dirname(lucid.__file__)}; torch {torch.__version__}")
    print(f"{'case':44s} {'lucid us':>9s} {'torch us':>9s} {'l/torch':>8s} {'l/numpy':>8s}")
    if args.full:
        cases = [(n, ax, m, s, dt, t) for n, row in REDUCTIONS.items() for ax in row[3]
                 for m in (["fwd", "fwd_bwd"] if row[4] else ["fwd"])
                 for s in ((10, 100), (1000, 100)) for dt in ("float32", "float64")
                 for t in (1, 2) if not (s == (10, 100) and t == 2)
                 and (not args.ops or n in args.ops.split(","))]
    else:
        cases = [(n, ax, m, (1000, 100), "float32", 1) for n, ax, m in ISSUE]
    for n, ax, m, s, dt, t in cases:
        r = case(n, ax, m, s, dt, t, timer=fastest if args.min else med)
        label = f"{n}({ax}) {m} {s} {dt} t{t}"
        npr = f"{r['lucid'] / r['numpy']:8.2f}" if "numpy" in r else " " * 8
        print(f"{label:44s} {r['lucid'] * 1e6:9.2f} {r['torch'] * 1e6:9.2f} "
              f"{r['lucid'] / r['torch']:8.2f} {npr}")


if __name__ == "__main__":
    main()
