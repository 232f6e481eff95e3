"""Fixed costs of lucid, for before/after comparisons of changes to the dispatcher:

  op1        exp of a 1-element float32 tensor (no grad)
  op1_grad   the same on a tensor that requires grad (records a node)
  erf_1e5    erf of 1e5 float32 (kernel-bound)
  exp_1e5    exp of 1e5 float32
  chain30    forward + backward of a 30-op chain on 100 float32 elements
  mlp_step   forward, loss, backward and SGD update of a hand-written
             Linear(64, 128)-ReLU-Linear(128, 10) on a batch of 128 (float32)

Each figure is the best of --repeat runs of --number calls, in microseconds per call.
It imports the lucid of the checkout it lives in when that is built in place, so the
same script measures two checkouts:

    python tools/overhead.py                  # this checkout
    farm-bench ... 'python /path/a/tools/overhead.py --only chain30' ...
"""
import argparse
import os
import sys
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import lucid  # noqa: E402


def cases():
    rng = np.random.default_rng(0)
    one = lucid.tensor([0.5])
    one_g = lucid.tensor([0.5], requires_grad=True)
    big = lucid.tensor(rng.uniform(-3, 3, 100_000).astype(np.float32))
    small = lucid.tensor(rng.uniform(0.5, 1.5, 100).astype(np.float32), requires_grad=True)

    def chain30():
        y = small
        for _ in range(6):
            y = lucid.exp(y * 0.5) + y
            y = lucid.tanh(y) * y - 0.25
        y.sum().backward()
        small.grad = None

    x = lucid.tensor(rng.standard_normal((128, 64)).astype(np.float32))
    labels = rng.integers(0, 10, 128)
    onehot = lucid.tensor(np.eye(10, dtype=np.float32)[labels])
    w1 = lucid.tensor((rng.standard_normal((64, 128)) * 0.1).astype(np.float32), requires_grad=True)
    b1 = lucid.zeros(128, requires_grad=True)
    w2 = lucid.tensor((rng.standard_normal((128, 10)) * 0.1).astype(np.float32), requires_grad=True)
    b2 = lucid.zeros(10, requires_grad=True)
    params = (w1, b1, w2, b2)

    def mlp_step():
        h = lucid.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        loss = -(lucid.log_softmax(logits, 1) * onehot).sum(1).mean()
        loss.backward()
        with lucid.no_grad():
            for p in params:
                p.sub_(p.grad * 0.1)
                p.grad = None

    return {
        "op1": lambda: lucid.exp(one),
        "op1_grad": lambda: lucid.exp(one_g),
        "erf_1e5": lambda: lucid.erf(big),
        "exp_1e5": lambda: lucid.exp(big),
        "chain30": chain30,
        "mlp_step": mlp_step,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--number", type=int, default=0, help="calls per run (default: auto)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    lucid.set_num_threads(1)
    todo = cases()
    if args.only:
        todo = {k: v for k, v in todo.items() if k in args.only.split(",")}
    for name, fn in todo.items():
        fn()
        timer = timeit.Timer(fn)
        number = args.number or max(1, timer.autorange()[0])
        best = min(timer.repeat(args.repeat, number)) / number
        print(f"{name:10s} {best * 1e6:10.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
