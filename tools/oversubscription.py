#!/usr/bin/env python
"""Oversubscription: lucid.erf (and torch.erf) on 2 threads vs 1 while every core is busy.

Starts one busy process per core (a Python spin loop), then in a fresh process per
library runs 7 alternating rounds (1 thread, 2 threads, 1, 2, ...) of 200 consecutive
calls of erf on 1e5 float32, and prints the median round on each thread count, the
ratio median(2 threads) / median(1 thread), the worst round and the slowest call.
lucid and torch run one after the other in separate processes (torch's OpenMP workers
would otherwise spin on the cores lucid's measurement needs), under the same load.

    python tools/oversubscription.py                 # lucid and torch
    python tools/oversubscription.py --libs lucid --rounds 7 --calls 200
    python tools/oversubscription.py --busy 0        # no load, for comparison
    python tools/oversubscription.py --root ../main  # another checkout's (built) lucid
    LUCID_DYNAMIC_THREADS=0 python tools/oversubscription.py --libs lucid
                                                     # workers even with no core free

With every core busy, lucid runs a call on the calling thread alone (README, "Threads"),
so its 2-thread rounds are its 1-thread rounds: their ratio is then 1 up to the
scheduler's placement of the busy processes, which can change between rounds (the
caller alone on a core, or sharing one, halves or doubles a round).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r'''
import json, sys, time
import numpy as np
lib, rounds, calls, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
x = np.random.default_rng(0).uniform(-3, 3, n).astype(np.float32)
if lib == "lucid":
    import lucid
    t = lucid.tensor(x)
    f, setn = (lambda: lucid.erf(t)), lucid.set_num_threads
else:
    import torch
    t = torch.from_numpy(x)
    f, setn = (lambda: torch.erf(t)), torch.set_num_threads
res = {1: [], 2: []}
worst = {1: 0.0, 2: 0.0}
for nt in (1, 2):                      # warm both thread counts up
    setn(nt)
    for _ in range(20):
        f()
for r in range(rounds):
    for nt in (1, 2):
        setn(nt)
        t0 = time.perf_counter()
        for _ in range(calls):
            c0 = time.perf_counter()
            f()
            worst[nt] = max(worst[nt], time.perf_counter() - c0)
        res[nt].append(time.perf_counter() - t0)
print(json.dumps({"rounds": res, "worst_call": worst}))
'''


def busy_procs(k):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]


def median(v):
    v = sorted(v)
    m = len(v) // 2
    return v[m] if len(v) % 2 else 0.5 * (v[m - 1] + v[m])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libs", default="lucid,torch")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--size", type=float, default=1e5)
    ncores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ap.add_argument("--busy", type=int, default=ncores, help="busy processes (default: one per core)")
    ap.add_argument("--root", default=ROOT, help="the checkout whose lucid is measured")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONPATH=args.root + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    print(f"cores {ncores}, busy processes {args.busy}, {args.rounds} alternating rounds of "
          f"{args.calls} erf calls on {int(args.size)} float32")
    busy = busy_procs(args.busy)
    try:
        time.sleep(0.5)
        for lib in [s for s in args.libs.split(",") if s]:
            out = subprocess.run([sys.executable, "-c", CHILD, lib, str(args.rounds),
                                  str(args.calls), str(int(args.size))],
                                 env=env, capture_output=True, text=True, cwd=args.root)
            if out.returncode != 0:
                print(f"{lib}: failed\n{out.stderr}")
                continue
            r = json.loads(out.stdout)
            rounds = {int(k): v for k, v in r["rounds"].items()}
            worst = {int(k): v for k, v in r["worst_call"].items()}
            m1, m2 = median(rounds[1]), median(rounds[2])
            print(f"{lib:6s} median round 1 thread {m1 * 1e3:8.2f} ms, 2 threads {m2 * 1e3:8.2f} ms,"
                  f" ratio 2t/1t {m2 / m1:5.2f}x; worst round 2t/1t-median "
                  f"{max(rounds[2]) / m1:5.2f}x; slowest call 1t {worst[1] * 1e3:.2f} ms, "
                  f"2t {worst[2] * 1e3:.2f} ms")
            print(f"       rounds 1t (ms): {' '.join(f'{v * 1e3:.1f}' for v in rounds[1])}")
            print(f"       rounds 2t (ms): {' '.join(f'{v * 1e3:.1f}' for v in rounds[2])}")
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()


if __name__ == "__main__":
    main()
