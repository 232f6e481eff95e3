#!/usr/bin/env python
"""Time a few lucid ops at 1 and 2+ threads against x.copy(), in a process
without torch (torch's own OpenMP runtime keeps spinning threads that steal
the cores lucid's threads need, which skews the 2-thread numbers in bench/).

    python tools/thread_scaling.py                 # erf, erfc, exp; 1e5 and 1e7
    python tools/thread_scaling.py --ops sigmoid,gelu --sizes 1e7 --threads 1,2
"""
import argparse
import time

import numpy as np

import lucid


def best_ms(f, reps):
    f()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="erf,erfc,exp")
    ap.add_argument("--sizes", default="1e5,1e7")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    ops = [o for o in args.ops.split(",") if o]
    threads = [int(t) for t in args.threads.split(",")]
    print(f"lucid {lucid.__version__ if hasattr(lucid, '__version__') else ''} "
          f"{lucid.backend_info()}")
    print("size dtype op " + " ".join(f"t{t}_ms" for t in threads) + " copy_ms ratio_to_copy(best)")
    old = lucid.get_num_threads()
    try:
        for size in (int(float(s)) for s in args.sizes.split(",")):
            for dt in (np.float32, np.float64):
                x = np.random.default_rng(0).uniform(-3, 3, size).astype(dt)
                lx = lucid.tensor(x)
                copy = best_ms(x.copy, args.reps)
                for op in ops:
                    f = getattr(lucid, op)
                    times = []
                    for t in threads:
                        lucid.set_num_threads(t)
                        times.append(best_ms(lambda: f(lx), args.reps))
                    print(f"{size:.0e} {dt.__name__} {op} " + " ".join(f"{v:.3f}" for v in times)
                          + f" {copy:.3f} {min(times) / copy:.2f}")
    finally:
        lucid.set_num_threads(old)


if __name__ == "__main__":
    main()
