"""Differentiate an unmodified NumPy routine with lucid.

``gaussian_nll`` below is plain NumPy: it runs on ndarrays as it always did. Wrapped
in ``lucid.differentiable`` and given lucid tensors, the same code records lucid's
autograd graph, so ``lucid.autograd.grad`` fits the Gaussian by gradient descent.

    python examples/numpy_gaussian_fit.py
"""
import numpy as np

import lucid


def gaussian_nll(params, data):
    """Mean negative log-likelihood of ``data`` under N(mu, sigma^2), params = (mu, log sigma)."""
    mu, log_sigma = params[0], params[1]
    sigma = np.exp(log_sigma)
    z = (np.asarray(data) - mu) / sigma
    return np.mean(0.5 * z ** 2 + log_sigma + 0.5 * np.log(2 * np.pi))


def fit(data, steps=300, lr=0.1):
    nll = lucid.differentiable(gaussian_nll)
    params = lucid.tensor([0.0, 0.0], dtype=lucid.float64, requires_grad=True)
    for _ in range(steps):
        (g,) = lucid.autograd.grad(nll(params, data), params)
        with lucid.no_grad():
            params -= lr * g
    return float(params[0]), float(np.exp(params[1].item()))


def main():
    rng = np.random.default_rng(0)
    data = rng.normal(loc=2.0, scale=0.5, size=2000)
    mu, sigma = fit(data)
    print(f"fitted   mu = {mu:.4f}  sigma = {sigma:.4f}")
    print(f"closed form  {data.mean():.4f}          {data.std():.4f}")
    print(f"NumPy nll at the fit: {gaussian_nll(np.array([mu, np.log(sigma)]), data):.6f}")
    return mu, sigma, data


if __name__ == "__main__":
    main()
