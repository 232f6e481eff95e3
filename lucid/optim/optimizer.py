"""Optimizer: parameter groups, per-parameter state and state_dict (torch's layout).

Every update is one fused C pass per parameter (lucid.optim._fused) over NumPy views
of the parameter, its gradient and its state; nothing is recorded by autograd. The
version counter of each parameter is bumped, so a graph that saved the old values
refuses to backward through them.

A parameter on the gpu device is updated by the same rule written in lucid ops
(``_update_gpu``), which MLX runs lazily and fuses; its new values replace the
parameter's MLX array (``core._assign_``), and the state lives on the gpu too.
"""
import copy
import math
from collections import defaultdict

import numpy as np

import lucid
from lucid._core.core import _assign_, _bump_version

try:
    from lucid.optim import _fused
except ImportError as e:  # no silent pure-Python fallback
    raise ImportError(
        f"lucid.optim's fused kernels (lucid.optim._fused) could not be imported: {e}.\n"
        "Build them with `pip install .` or `python setup.py build_ext --inplace`.") from e


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _flat(t):
    """A writable flat C-contiguous view of a cpu tensor's storage."""
    a = t.numpy(force=True)
    if not a.flags.c_contiguous:
        raise ValueError("lucid.optim needs contiguous parameters and gradients")
    return a.reshape(-1)


def _flat_grad(g, dtype):
    a = g.numpy(force=True)
    if a.dtype != dtype:
        a = a.astype(dtype)
    return np.ascontiguousarray(a).reshape(-1)


def _flat_state(state, key, pa):
    """state[key]'s flat storage in the parameter's dtype (state made before a
    ``Module.to(dtype)`` is converted once)."""
    t = state[key]
    a = t.numpy(force=True)
    if a.dtype != pa.dtype:
        t = state[key] = lucid.from_numpy(a.astype(pa.dtype))
        a = t.numpy()
    return a.reshape(-1)


class Optimizer:
    """Base class: ``Optimizer(params, defaults)`` with params an iterable of tensors or
    of dicts (parameter groups with their own options)."""

    # state entries kept as float32 scalars whatever the parameter's dtype (as torch)
    _scalar_state = ("step",)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, lucid.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        group = dict(param_group)
        if group.get("differentiable", self.defaults.get("differentiable")):
            raise lucid.ArgumentError(
                f"{type(self).__name__}: differentiable=True is not supported (lucid's "
                "optimizer steps are not recorded by autograd)")
        params = group["params"]
        group["params"] = [params] if isinstance(params, lucid.Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, lucid.Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                elif p.grad.device == "gpu":
                    p.grad = lucid.zeros_like(p.grad)
                else:
                    _flat(p.grad)[:] = 0

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for k in sorted(group):
                if k != "params":
                    s += f"\n    {k}: {group[k]}"
        return s + "\n)"

    # -- state dicts: state keyed by the parameter's index over all groups -----------------
    def state_dict(self):
        index, groups, start = {}, [], 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = list(range(start, start + len(group["params"])))
            for i, p in zip(ids, group["params"]):
                index.setdefault(id(p), i)
            packed["params"] = ids
            start += len(ids)
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            state[index[id(p)]] = {k: (v.detach().clone() if isinstance(v, lucid.Tensor) else v)
                                   for k, v in s.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        by_index = {}
        for mine, theirs in zip(self.param_groups, groups):
            for p, i in zip(mine["params"], theirs["params"]):
                by_index[int(i)] = p
        self.state = defaultdict(dict)
        for key, s in state_dict["state"].items():
            p = by_index[int(key)]
            new = {}
            for k, v in s.items():
                if isinstance(v, lucid.Tensor):
                    scalar = k in self._scalar_state
                    dt = p.dtype if (v.is_floating_point() and not scalar) else v.dtype
                    new[k] = lucid.tensor(np.array(v.detach().numpy(), copy=True), dtype=dt)
                else:
                    new[k] = copy.deepcopy(v)
            self.state[p] = new
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = copy.deepcopy(v)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with lucid.enable_grad():
                loss = closure()
        on_gpu = []
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if p.is_cuda:
                    with lucid.no_grad():
                        on_gpu += self._step_gpu(p, self.state[p], group)
                    continue
                pa = _flat(p)
                self._update(p, pa, _flat_grad(g, pa.dtype), self.state[p], group)
                _bump_version(p)
        if on_gpu:           # one MLX evaluation for the whole step
            lucid.eval(*on_gpu)
        return loss

    def _update(self, p, pa, ga, state, group):
        raise NotImplementedError

    def _step_gpu(self, p, state, group):
        for k, v in state.items():          # state loaded from a checkpoint lives on the cpu
            if isinstance(v, lucid.Tensor) and k not in self._scalar_state and \
                    v.device != p.device:
                state[k] = v.to(p.device)
        g = p.grad.to(p.dtype)
        if group.get("maximize"):
            g = -g
        _assign_(p, self._update_gpu(p.detach(), g, state, group))
        return [p] + [v for v in state.values() if isinstance(v, lucid.Tensor)]

    def _update_gpu(self, p, g, state, group):
        """The new value of ``p`` (and the new state, in ``state``), in lucid ops."""
        raise NotImplementedError(f"{type(self).__name__} has no gpu step")


def _zeros_state(p):
    return lucid.zeros(*p.shape, dtype=p.dtype, device=p.device)


def _next_step(state):
    """Add one to the state's step count (a float32 tensor, as torch keeps it). The sum is
    exact in double and fill rounds it to float32 once, which is float32's own addition
    (a 0-d in-place ufunc costs several times more than this, per parameter per step)."""
    a = state["step"].numpy(force=True)
    a.fill(float(a) + 1.0)
    return float(a)


_EMPTY = {np.dtype(np.float32): np.empty(0, np.float32),
          np.dtype(np.float64): np.empty(0, np.float64)}


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _update(self, p, pa, ga, state, group):
        mom = group["momentum"]
        first = False
        if mom != 0:
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = _zeros_state(p)
                first = True
            buf = _flat_state(state, "momentum_buffer", pa)
        else:
            buf = _EMPTY[pa.dtype]
        _fused.sgd(pa, ga, buf, group["lr"], group["weight_decay"], mom, group["dampening"],
                   group["nesterov"], first, group["maximize"])

    def _update_gpu(self, p, g, state, group):
        mom, wd = group["momentum"], group["weight_decay"]
        if wd:
            g = g + wd * p
        if mom:
            buf = state.get("momentum_buffer")
            buf = g if buf is None else mom * buf + (1 - group["dampening"]) * g
            state["momentum_buffer"] = buf
            g = g + mom * buf if group["nesterov"] else buf
        return p - group["lr"] * g


class Adam(Optimizer):
    """Adam (L2 weight decay added to the gradient), with amsgrad."""
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=None,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if weight_decay is None:
            weight_decay = 1e-2 if self._decoupled else 0.0
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable,
                                      fused=fused, decoupled_weight_decay=self._decoupled or
                                      decoupled_weight_decay))

    def _update(self, p, pa, ga, state, group):
        if not state:
            state["step"] = lucid.tensor(0.0, dtype=lucid.float32)
            state["exp_avg"] = _zeros_state(p)
            state["exp_avg_sq"] = _zeros_state(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = _zeros_state(p)
        step = int(_next_step(state))
        ams = group["amsgrad"]
        if ams and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = _zeros_state(p)
        vmax = _flat_state(state, "max_exp_avg_sq", pa) if ams else _EMPTY[pa.dtype]
        beta1, beta2 = group["betas"]
        _fused.adam(pa, ga, _flat_state(state, "exp_avg", pa),
                    _flat_state(state, "exp_avg_sq", pa), vmax,
                    group["lr"], beta1, beta2, group["eps"], group["weight_decay"],
                    group["decoupled_weight_decay"], step, ams, group["maximize"])

    def _update_gpu(self, p, g, state, group):
        if "step" not in state:
            state["step"] = lucid.tensor(0.0, dtype=lucid.float32)
            state["exp_avg"], state["exp_avg_sq"] = _zeros_state(p), _zeros_state(p)
        step = _next_step(state)
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        if wd and group["decoupled_weight_decay"]:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = state["exp_avg"] = b1 * state["exp_avg"] + (1 - b1) * g
        v = state["exp_avg_sq"] = b2 * state["exp_avg_sq"] + (1 - b2) * g * g
        if group["amsgrad"]:
            v = state["max_exp_avg_sq"] = lucid.maximum(
                state.get("max_exp_avg_sq", _zeros_state(p)), v)
        denom = lucid.sqrt(v) / math.sqrt(1 - b2 ** step) + group["eps"]
        return p - (lr / (1 - b1 ** step)) * m / denom


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay``), default 1e-2."""
    _decoupled = True


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if alpha < 0.0:
            raise ValueError(f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize,
                                      capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))

    def _update(self, p, pa, ga, state, group):
        if not state:
            state["step"] = lucid.tensor(0.0, dtype=lucid.float32)
            state["square_avg"] = _zeros_state(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = _zeros_state(p)
            if group["centered"]:
                state["grad_avg"] = _zeros_state(p)
        _next_step(state)
        e = _EMPTY[pa.dtype]
        gavg = _flat_state(state, "grad_avg", pa) if group["centered"] else e
        buf = _flat_state(state, "momentum_buffer", pa) if group["momentum"] > 0 else e
        _fused.rmsprop(pa, ga, _flat_state(state, "square_avg", pa), gavg, buf, group["lr"],
                       group["alpha"], group["eps"], group["weight_decay"], group["momentum"],
                       group["centered"], group["maximize"])

    def _update_gpu(self, p, g, state, group):
        if "step" not in state:
            state["step"] = lucid.tensor(0.0, dtype=lucid.float32)
            state["square_avg"] = _zeros_state(p)
        _next_step(state)
        a, wd = group["alpha"], group["weight_decay"]
        if wd:
            g = g + wd * p
        sq = state["square_avg"] = a * state["square_avg"] + (1 - a) * g * g
        if group["centered"]:
            ga = state["grad_avg"] = a * state.get("grad_avg", _zeros_state(p)) + (1 - a) * g
            avg = lucid.sqrt(sq - ga * ga) + group["eps"]
        else:
            avg = lucid.sqrt(sq) + group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"] = (group["momentum"] *
                                              state.get("momentum_buffer", _zeros_state(p)) +
                                              g / avg)
            return p - group["lr"] * buf
        return p - group["lr"] * g / avg


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = lucid.tensor(0.0, dtype=lucid.float32)
                st["sum"] = lucid.full(tuple(p.shape), float(group["initial_accumulator_value"]),
                                       dtype=p.dtype)

    def _update(self, p, pa, ga, state, group):
        step = _next_step(state)
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        _fused.adagrad(pa, ga, _flat_state(state, "sum", pa), clr, group["eps"], group["weight_decay"],
                       group["maximize"])

    def _update_gpu(self, p, g, state, group):
        step = _next_step(state)
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        s = state["sum"] = state["sum"] + g * g
        return p - clr * g / (lucid.sqrt(s) + group["eps"])


# -- optimizers written in lucid ops ---------------------------------------------------------

def _lerp(a, b, w):
    """a + w * (b - a) as torch's lerp_ computes it (from the nearer end)."""
    return a + w * (b - a) if w < 0.5 else b - (b - a) * (1 - w)


def _check_adam_like(lr, betas, eps, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class _OpsOptimizer(Optimizer):
    """An optimizer whose rule is written once in lucid ops (``_update_gpu``) and runs
    on both devices: on the cpu the new values are written into the parameter's storage.
    Slower than a fused pass, but the formula is the whole implementation."""

    def _update(self, p, pa, ga, state, group):
        g = lucid.from_numpy(ga.reshape(tuple(p.shape)))
        with lucid.no_grad():
            if group["maximize"]:
                g = -g
            new = self._update_gpu(p.detach(), g, state, group)
        pa[:] = new.numpy().reshape(-1)

    @staticmethod
    def _start(state, p, *names):
        if "step" not in state:
            state["step"] = lucid.tensor(0.0, dtype=lucid.float32)
            for n in names:
                state[n] = _zeros_state(p)
        return _next_step(state)


class Adamax(_OpsOptimizer):
    """Adam with the infinity norm: ``u = max(beta2 * u, |g| + eps)``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_adam_like(lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _update_gpu(self, p, g, state, group):
        step = self._start(state, p, "exp_avg", "exp_inf")
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        if wd:
            g = g + wd * p
        m = state["exp_avg"] = _lerp(state["exp_avg"], g, 1 - b1)
        u = state["exp_inf"] = lucid.maximum(state["exp_inf"] * b2, lucid.abs(g) + group["eps"])
        return p + (-lr / (1 - b1 ** step)) * (m / u)


class NAdam(_OpsOptimizer):
    """Adam with Nesterov momentum and the momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))``; the running product of
    the mu_t is kept as a float32 scalar, as torch keeps it."""
    _scalar_state = ("step", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_adam_like(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable))

    def _update_gpu(self, p, g, state, group):
        if "mu_product" not in state:
            state["mu_product"] = lucid.tensor(1.0, dtype=lucid.float32)
        step = self._start(state, p, "exp_avg", "exp_avg_sq")
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        if wd and group["decoupled_weight_decay"]:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        md = group["momentum_decay"]
        mu = b1 * (1.0 - 0.5 * 0.96 ** (step * md))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * md))
        # torch multiplies the float32 scalar by mu rounded to float32
        mu_product = float(np.float32(state["mu_product"].item()) * np.float32(mu))
        state["mu_product"] = lucid.tensor(mu_product, dtype=lucid.float32)
        m = state["exp_avg"] = _lerp(state["exp_avg"], g, 1 - b1)
        v = state["exp_avg_sq"] = state["exp_avg_sq"] * b2 + (1 - b2) * g * g
        denom = lucid.sqrt(v / (1 - b2 ** step)) + group["eps"]
        p = p + (-lr * (1.0 - mu) / (1.0 - mu_product)) * (g / denom)
        return p + ((-lr * mu_next) / (1.0 - mu_product * mu_next)) * (m / denom)


class RAdam(_OpsOptimizer):
    """Rectified Adam: plain momentum steps while the variance estimate is unreliable
    (rho_t <= 5), rectified adaptive steps after."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_adam_like(lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))

    def _update_gpu(self, p, g, state, group):
        step = self._start(state, p, "exp_avg", "exp_avg_sq")
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        if wd and group["decoupled_weight_decay"]:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = state["exp_avg"] = _lerp(state["exp_avg"], g, 1 - b1)
        v = state["exp_avg_sq"] = state["exp_avg_sq"] * b2 + (1 - b2) * g * g
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        m_hat = m / bc1
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                    / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = (bc2 ** 0.5) / (lucid.sqrt(v) + group["eps"])
            return p - m_hat * lr * adaptive * rect
        return p - m_hat * lr * 1.0


# -- L-BFGS ------------------------------------------------------------------------------------
# The vector algebra runs in NumPy on flat host copies in the parameters' dtype (float32
# arrays and NumPy scalars, so the arithmetic rounds where torch's 0-d tensors do); the
# cost of a step is in the closure's evaluations, not here.

def _axpy(y, a, x):
    """y + a * x rounded once, as torch's add_(x, alpha=a) (a fused multiply-add); exact
    for float32 through float64, two roundings for float64."""
    if y.dtype == np.float32:
        return (y.astype(np.float64) + np.float64(np.float32(a)) * x).astype(np.float32)
    return y + a * x


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), inside bounds."""
    if bounds is not None:
        lo, hi = bounds
    else:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(pos, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """torch's strong-Wolfe line search (a port of minFunc's): a step size t along d
    with sufficient decrease and curvature; returns (f, g, t, evaluations)."""
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    it = 0
    while it < max_ls:
        if f_new > (f + c1 * t * gtd) or (it > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        it += 1
    if it == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
    insuf_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) \
                    else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        it += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.copy(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.copy(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS (torch's, after minFunc): ``step(closure)`` runs up to ``max_iter``
    iterations, each a quasi-Newton direction from the last ``history_size`` curvature
    pairs, then a fixed step ``lr`` or a strong-Wolfe line search. One parameter group."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._dtype = np.result_type(*[p.dtype.numpy_dtype for p in self._params])

    def _flat_grad(self):
        return np.concatenate([
            np.zeros(p.numel(), self._dtype) if p.grad is None
            else p.grad.numpy(force=True).reshape(-1).astype(self._dtype, copy=False)
            for p in self._params])

    def _get_params(self):
        return [p.numpy(force=True).reshape(-1).copy() for p in self._params]

    def _set_params(self, values):
        for p, v in zip(self._params, values):
            if p.device == "gpu":
                _assign_(p, lucid.from_numpy(v.reshape(tuple(p.shape))).to(p.device))
            else:
                _flat(p)[:] = v
                _bump_version(p)

    def _add_grad(self, t, d):
        """params += t * d (d flat over all parameters), in each parameter's dtype."""
        new, start = [], 0
        for p, v in zip(self._params, self._get_params()):
            k = v.size
            new.append(_axpy(v, t, d[start:start + k].astype(v.dtype, copy=False)))
            start += k
        self._set_params(new)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        g = self._flat_grad()
        self._set_params(x)
        return loss, g

    def step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        def evaluate():
            with lucid.enable_grad():
                return closure()

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss

        d = _host(state.get("d"))
        t = state.get("t")
        old_dirs = [_host(v) for v in state.get("old_dirs", [])]
        old_stps = [_host(v) for v in state.get("old_stps", [])]
        ro = list(state.get("ro", []))
        H_diag = state.get("H_diag")
        prev_flat_grad = _host(state.get("prev_flat_grad"))
        prev_loss = state.get("prev_loss")
        scalar = self._dtype.type

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(scalar(1.0) / ys)
                    H_diag = ys / y.dot(y)
                al = [None] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q = _axpy(q, -al[i], old_dirs[i])
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r[:] = _axpy(r, al[i] - be_i, old_stps[i])
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, scalar(1.0) / np.abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:
                break

            evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._get_params()
                loss, flat_grad, t, evals = _strong_wolfe(
                    lambda x, t, d: self._directional_evaluate(evaluate, x, t, d),
                    x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    evals = 1
            current_evals += evals
            state["func_evals"] += evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = _tensor_of(d)
        state["t"] = float(t)
        state["old_dirs"] = [_tensor_of(v) for v in old_dirs]
        state["old_stps"] = [_tensor_of(v) for v in old_stps]
        state["ro"] = [float(v) for v in ro]
        state["H_diag"] = float(H_diag)
        state["prev_flat_grad"] = _tensor_of(prev_flat_grad)
        state["prev_loss"] = prev_loss
        return orig_loss


def _host(t):
    return None if t is None else t.numpy(force=True)


def _tensor_of(a):
    return None if a is None else lucid.from_numpy(a)
