"""Train a two-layer classifier end to end with lucid alone.

The data set is three interleaved spirals in the plane, generated here (nothing is
downloaded). The model is a 2 -> 64 -> 3 MLP with tanh, trained by full-batch
gradient descent with momentum on the softmax cross-entropy.

    python examples/train_classifier.py
"""
import numpy as np

import lucid


def spirals(n_per_class=200, classes=3, noise=0.15, seed=0):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, noise, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


def cross_entropy(logits, targets):
    """Mean negative log-likelihood of the target classes."""
    logp = lucid.log_softmax(logits, dim=1)
    return -lucid.gather(logp, 1, targets.reshape(-1, 1)).mean()


def main():
    lucid.manual_seed(0)
    x_np, y_np = spirals()
    perm = np.random.default_rng(1).permutation(len(y_np))
    x_np, y_np = x_np[perm], y_np[perm]
    split = int(0.8 * len(y_np))
    x_train, y_train = lucid.from_numpy(x_np[:split]), lucid.from_numpy(y_np[:split])
    x_test, y_test = lucid.from_numpy(x_np[split:]), lucid.from_numpy(y_np[split:])

    hidden, classes = 64, 3
    w1 = (lucid.randn(2, hidden) * (1 / np.sqrt(2))).requires_grad_()
    b1 = lucid.zeros(hidden, requires_grad=True)
    w2 = (lucid.randn(hidden, classes) * (1 / np.sqrt(hidden))).requires_grad_()
    b2 = lucid.zeros(classes, requires_grad=True)
    params = [w1, b1, w2, b2]
    velocity = [lucid.zeros_like(p) for p in params]

    def forward(x):
        return lucid.tanh(x @ w1 + b1) @ w2 + b2

    lr, momentum = 0.5, 0.9
    for step in range(1, 1501):
        loss = cross_entropy(forward(x_train), y_train)
        loss.backward()
        with lucid.no_grad():               # the optimizer step is not part of the graph
            for p, v in zip(params, velocity):
                v.mul_(momentum).add_(p.grad)
                p.sub_(v * lr)
                p.grad = None
        if step % 300 == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}")

    with lucid.no_grad():
        train_acc = (lucid.argmax(forward(x_train), dim=1) == y_train).float().mean().item()
        test_acc = (lucid.argmax(forward(x_test), dim=1) == y_test).float().mean().item()
    print(f"train accuracy {train_acc:.3f}  test accuracy {test_acc:.3f}")
    return test_acc


if __name__ == "__main__":
    main()
