"""Train a two-layer classifier end to end with lucid.nn and lucid.optim.

The data set is three interleaved spirals in the plane, generated here (nothing is
downloaded). The model is a 2 -> 64 -> 3 MLP with tanh (an nn.Module), trained by
full-batch SGD with momentum on nn.CrossEntropyLoss.

    python examples/train_classifier.py
    LUCID_MLX_DEVICE=cpu python examples/train_classifier.py --device gpu   # on MLX
"""
import sys

import numpy as np

import lucid
from lucid import nn, optim


def spirals(n_per_class=200, classes=3, noise=0.15, seed=0):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, noise, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


class MLP(nn.Module):
    """2 -> 64 -> 3 with tanh."""

    def __init__(self, hidden=64, classes=3):
        super().__init__()
        self.hidden = nn.Linear(2, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.out(lucid.tanh(self.hidden(x)))


def main(device="cpu"):
    lucid.manual_seed(0)
    x_np, y_np = spirals()
    perm = np.random.default_rng(1).permutation(len(y_np))
    x_np, y_np = x_np[perm], y_np[perm]
    split = int(0.8 * len(y_np))
    x_train, y_train = lucid.from_numpy(x_np[:split]), lucid.from_numpy(y_np[:split])
    x_test, y_test = lucid.from_numpy(x_np[split:]), lucid.from_numpy(y_np[split:])
    x_train, y_train, x_test, y_test = (t.to(device) for t in (x_train, y_train, x_test, y_test))

    model = MLP().to(device)                # before the optimizer: to() makes new Parameters
    loss_fn = nn.CrossEntropyLoss()
    opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for step in range(1, 1501):
        opt.zero_grad()
        loss = loss_fn(model(x_train), y_train)
        loss.backward()
        opt.step()                          # one fused C pass per parameter, no graph
        if step % 300 == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}")

    model.eval()
    with lucid.no_grad():
        train_acc = (lucid.argmax(model(x_train), dim=1) == y_train).float().mean().item()
        test_acc = (lucid.argmax(model(x_test), dim=1) == y_test).float().mean().item()
    print(f"train accuracy {train_acc:.3f}  test accuracy {test_acc:.3f}")
    return test_acc


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu")
