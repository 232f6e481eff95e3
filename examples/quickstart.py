"""lucid's main job in a few lines: tensors, ops, and gradients checked against calculus."""
import math

import numpy as np

import lucid

x = lucid.tensor([-1.0, 0.0, 0.5, 2.0], requires_grad=True)
y = (lucid.erf(x) * lucid.exp(-x) + lucid.log2(x * x + 1)).sum()
y.backward()
print("y          =", y.item())
print("dy/dx      =", x.grad)

# The same derivative by hand: d/dx [erf(x) e^-x + log2(x^2+1)]
xs = x.detach().numpy().astype(np.float64)
erf = np.vectorize(math.erf)
by_hand = (2 / math.sqrt(math.pi) * np.exp(-xs * xs) * np.exp(-xs) - erf(xs) * np.exp(-xs)
           + 2 * xs / ((xs * xs + 1) * math.log(2)))
print("by hand    =", by_hand)
assert np.allclose(x.grad.numpy(), by_hand, rtol=1e-5, atol=1e-6)

# Second derivative through create_graph=True.
x64 = lucid.tensor([0.3, 1.2], dtype=lucid.float64, requires_grad=True)
(g,) = lucid.autograd.grad(lucid.erf(x64).sum(), x64, create_graph=True)
(h,) = lucid.autograd.grad(g.sum(), x64)
print("erf''(x)   =", h, " (expected -2x * 2/sqrt(pi) * exp(-x^2))")
print("CPU path   :", lucid.backend_info())
