"""Check autograd against central finite differences, in float64.

``gradcheck`` compares the Jacobian that backward computes (one vector-Jacobian
product per output element) with ``(f(x + eps) - f(x - eps)) / (2 eps)`` per
input element. ``gradgradcheck`` does the same for the gradient itself, built
with ``create_graph=True``, which checks every graph-mode formula
(``grad_formula_impl``) on the way.
"""
import numpy as np

from lucid._core.core import ArgumentError, Tensor, _dtype_by_name

float64 = _dtype_by_name("float64")
from lucid.autograd.engine import grad
from lucid.autograd.grad_mode import enable_grad


class GradcheckError(RuntimeError):
    """Analytical and numerical derivatives disagree."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def _float64_inputs(inputs):
    out = []
    for x in inputs:
        if isinstance(x, Tensor) and x.requires_grad:
            # A float64 leaf with its own memory: the perturbations never touch the caller's data.
            c = x.detach().to(float64, copy=True)
            out.append(c.requires_grad_(True))
        else:
            out.append(x)
    return out


def _outputs(fn, xs):
    return [o for o in _as_tuple(fn(*xs)) if isinstance(o, Tensor) and o.is_floating_point()]


def _numerical_jacobian(fn, xs, diff_idx, eps):
    """J[i][o] has shape (input i numel, output o numel).

    Grad mode stays on: ``fn`` may itself differentiate (gradgradcheck's first derivative).
    """
    base = _outputs(fn, xs)
    jac = []
    for i in diff_idx:
        data = xs[i].detach().numpy().reshape(-1)   # shares memory with xs[i]
        cols = [np.zeros((data.size, o.numel())) for o in base]
        for k in range(data.size):
            orig = data[k]
            data[k] = orig + eps
            plus = [o.detach().numpy().astype(np.float64).reshape(-1) for o in _outputs(fn, xs)]
            data[k] = orig - eps
            minus = [o.detach().numpy().astype(np.float64).reshape(-1) for o in _outputs(fn, xs)]
            data[k] = orig
            for o in range(len(base)):
                cols[o][k] = (plus[o] - minus[o]) / (2 * eps)
        jac.append(cols)
    return jac


def _analytical_jacobian(fn, xs, diff_idx):
    with enable_grad():
        outs = _outputs(fn, xs)
    if not outs:
        raise ArgumentError("gradcheck: fn returned no floating point tensor")
    jac = [[np.zeros((xs[i].numel(), o.numel())) for o in outs] for i in diff_idx]
    for o, out in enumerate(outs):
        if not out.requires_grad:
            continue
        flat = np.zeros(out.numel())
        for j in range(out.numel()):
            flat[:] = 0
            flat[j] = 1
            g = Tensor(flat.reshape(out.shape), dtype=out.dtype)
            grads = grad((out,), [xs[i] for i in diff_idx], (g,), retain_graph=True,
                         allow_unused=True)
            for n, gi in enumerate(grads):
                if gi is not None:
                    jac[n][o][:, j] = gi.detach().numpy().astype(np.float64).reshape(-1)
    return jac


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """True if backward matches central finite differences for every input that requires grad.

    ``fn`` takes the ``inputs`` (tensors and other values) and returns a tensor or a tuple
    of tensors. Inputs that require grad are copied to float64 first.
    """
    xs = _float64_inputs(_as_tuple(inputs))
    diff_idx = [i for i, x in enumerate(xs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff_idx:
        raise ArgumentError("gradcheck needs at least one input tensor with requires_grad=True")
    numerical = _numerical_jacobian(fn, xs, diff_idx, eps)
    analytical = _analytical_jacobian(fn, xs, diff_idx)
    for n, i in enumerate(diff_idx):
        for o, (a, num) in enumerate(zip(analytical[n], numerical[n])):
            ok = np.allclose(a, num, atol=atol, rtol=rtol, equal_nan=True)
            if not ok:
                if raise_exception:
                    raise GradcheckError(
                        f"Jacobian mismatch for output {o} with respect to input {i}:\n"
                        f"numerical:\n{num}\nanalytical:\n{a}\n"
                        f"max abs difference {np.nanmax(np.abs(a - num)):.3g}")
                return False
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True):
    """gradcheck of the map (inputs, v) -> vJ, built with create_graph=True."""
    xs = _float64_inputs(_as_tuple(inputs))
    diff_idx = [i for i, x in enumerate(xs) if isinstance(x, Tensor) and x.requires_grad]
    with enable_grad():
        outs = _outputs(fn, xs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [Tensor(rng.standard_normal(o.shape), dtype=float64, requires_grad=True)
                        for o in outs]
    else:
        grad_outputs = _float64_inputs(
            [g.detach().requires_grad_(True) if isinstance(g, Tensor) else g
             for g in _as_tuple(grad_outputs)])
    n_in = len(xs)

    def first_derivative(*args):
        ins, vs = args[:n_in], args[n_in:]
        outs = _outputs(fn, ins)
        pairs = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
        if not pairs:
            return ()
        gs = grad([p[0] for p in pairs], [ins[i] for i in diff_idx], [p[1] for p in pairs],
                  create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivative, tuple(xs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
