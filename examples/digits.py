"""Train an MLP and a small CNN on scikit-learn's bundled 8x8 digits with lucid.nn/optim.

The data ships inside scikit-learn (no download). Prints the test accuracy and the
time per epoch of each model.

    python examples/digits.py
"""
import time

import numpy as np

import lucid
from lucid import nn, optim
from lucid.nn import functional as F


def load_data(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)          # (1797, 8, 8) in [0, 1]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),    # 32 x 2 x 2
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10))


def accuracy(model, x, y):
    model.eval()
    with lucid.no_grad():
        pred = lucid.argmax(model(x), dim=1)
    model.train()
    return float((pred == y).float().mean().item())


def train(model, x_train, y_train, x_test, y_test, epochs, lr, batch=64, seed=0):
    opt = optim.Adam(model.parameters(), lr=lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    rng = np.random.default_rng(seed)
    n = len(y_train)
    times = []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        perm = rng.permutation(n)
        for i in range(0, n, batch):
            idx = perm[i:i + batch]
            xb, yb = lucid.from_numpy(x_train[idx]), lucid.from_numpy(y_train[idx])
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
        sched.step()
        times.append(time.perf_counter() - t0)
    acc = accuracy(model, lucid.from_numpy(x_test), lucid.from_numpy(y_test))
    return acc, float(np.median(times))


def main(epochs_mlp=40, epochs_cnn=15):
    lucid.manual_seed(0)
    x_train, x_test, y_train, y_test = load_data()
    results = {}
    acc, t = train(mlp(), x_train, y_train, x_test, y_test, epochs_mlp, lr=3e-3)
    print(f"MLP  test accuracy {acc:.4f}  {t * 1e3:7.1f} ms/epoch")
    results["mlp"] = acc
    xtr, xte = x_train[:, None], x_test[:, None]                         # (N, 1, 8, 8)
    acc, t = train(cnn(), xtr, y_train, xte, y_test, epochs_cnn, lr=3e-3)
    print(f"CNN  test accuracy {acc:.4f}  {t * 1e3:7.1f} ms/epoch")
    results["cnn"] = acc
    return results


if __name__ == "__main__":
    main()
