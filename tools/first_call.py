"""First-call and steady-state time of a 1e5-element float32 forward+backward, each
measured in a fresh Python process (nothing else imported, so glibc's malloc is cold).

    python tools/first_call.py [--tree DIR] [--runs 7] [--threads 1]

--tree: the source tree whose lucid is imported (default: this one), e.g. another
worktree to compare against. Each case runs with lucid's caching allocator and its
prefaulted arena (the default), with the allocator but no arena
(LUCID_ALLOCATOR_ARENA_MB=0), and with the allocator off (LUCID_ALLOCATOR=0). Prints the median over the runs of the first call and of the
median of calls 11..110, in microseconds, and the page faults (minor faults, a count
that does not depend on the machine's load) of the same calls.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
import lucid
case = sys.argv[1]
rng = np.random.default_rng(0)
x = lucid.tensor(rng.standard_normal(100_000).astype(np.float32), requires_grad=True)
y = lucid.tensor(rng.standard_normal(100_000).astype(np.float32), requires_grad=True)

def exp_sum():
    lucid.exp(x).sum().backward()

def mul_chain():
    (x * y * x * y).sum().backward()

f = {"exp_sum": exp_sum, "mul_chain": mul_chain}[case]
times, faults = [], []
for _ in range(111):
    x.grad = None
    y.grad = None
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = time.perf_counter()
    f()
    times.append(time.perf_counter() - t)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(json.dumps([times[0], sorted(times[11:])[50], faults[0], sorted(faults[11:])[50]]))
"""


SETTINGS = {"on": {}, "no arena": {"LUCID_ALLOCATOR_ARENA_MB": "0"},
            "off": {"LUCID_ALLOCATOR": "0"}}


def run(tree, case, setting, threads):
    env = dict(os.environ, LUCID_NUM_THREADS=str(threads), PYTHONPATH=tree, **SETTINGS[setting])
    out = subprocess.run([sys.executable, "-c", CHILD, case], env=env, cwd=tree,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    print(f"tree {a.tree}, {a.threads} thread(s), median of {a.runs} fresh processes (us)")
    print(f"{'case':<10} {'allocator':<9} {'first call':>10} {'steady':>8} {'ratio':>6} "
          f"{'faults first':>12} {'faults steady':>13}")
    for case in ("exp_sum", "mul_chain"):
        for setting in SETTINGS:
            r = [run(a.tree, case, setting, a.threads) for _ in range(a.runs)]
            first = statistics.median(t[0] for t in r) * 1e6
            steady = statistics.median(t[1] for t in r) * 1e6
            ff = statistics.median(t[2] for t in r)
            fs = statistics.median(t[3] for t in r)
            print(f"{case:<10} {setting:<9} {first:10.0f} {steady:8.0f} "
                  f"{first / steady:6.2f} {ff:12.0f} {fs:13.0f}")


if __name__ == "__main__":
    main()
