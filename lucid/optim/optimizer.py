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
                    dt = p.dtype if (v.is_floating_point() and k != "step") else v.dtype
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
            if isinstance(v, lucid.Tensor) and k != "step" and v.device != p.device:
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
                                      maximize=maximize))

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
        self._decoupled = self._decoupled or decoupled_weight_decay
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

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
                    self._decoupled, step, ams, group["maximize"])

    def _update_gpu(self, p, g, state, group):
        if "step" not in state:
            state["step"] = lucid.tensor(0.0, dtype=lucid.float32)
            state["exp_avg"], state["exp_avg_sq"] = _zeros_state(p), _zeros_state(p)
        step = _next_step(state)
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        if wd and self._decoupled:
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
                                      momentum=momentum, centered=centered, maximize=maximize))

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
                                      eps=eps, maximize=maximize))
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
