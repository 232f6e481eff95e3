"""Mixed precision: ``lucid.autocast`` and ``lucid.amp.GradScaler`` (as torch.amp).

Inside ``autocast(dtype)`` the dispatcher applies each op's AMP policy (its schema's
``amp_policy``): the matmul family (matmul, dot, outer, nn.functional.linear) runs in
``dtype``; ForceFP32 ops (exp, log, pow, softmax, sum, norms, losses, ...) run in
float32; KeepInput ops keep their input's dtype; other Promote ops follow ordinary
promotion. The casts it inserts are recorded, so each leaf's gradient comes back in the
leaf's own dtype.

``GradScaler`` multiplies the loss by a scale so that small float16 gradients do not
underflow, unscales the gradients before the optimizer step, skips steps whose gradients
hold inf or nan, and adapts the scale (halved after a skipped step, doubled after
``growth_interval`` clean steps).
"""
import functools
import threading

import numpy as np

import lucid
from lucid._core import core as _core

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype"]

is_autocast_enabled = _core.is_autocast_enabled
get_autocast_dtype = _core.get_autocast_dtype
_HALF = ("float16", "bfloat16")


def _device_type(device, who):
    """'cpu' or 'gpu' for a device name as torch spells it ('cuda', 'mps', 'cuda:0', ...) or
    a lucid.Device; lucid's gpu device stands in for every accelerator."""
    if device is None:
        return "cpu"
    if isinstance(device, lucid.Device):
        return device.type
    if not isinstance(device, str):
        hint = ""
        if isinstance(device, (int, float)) and not isinstance(device, bool):
            hint = (f"; the first argument is the device, as in torch.amp.GradScaler(device, "
                    f"init_scale, ...): write {who}(init_scale={device!r})")
        raise TypeError(f"{who}: device must be a str or a lucid.Device, got "
                        f"{type(device).__name__}{hint}")
    if device.split(":")[0] in ("mps", "mlx", "metal"):
        return "gpu"
    return lucid.device(device).type                 # a clear error for unknown devices


def _is_dtype_name(name):
    try:
        _core.as_dtype(name)
    except (TypeError, ValueError):
        return False
    return True


class autocast:
    """Run the ops inside in mixed precision: a context manager and a decorator.

    ``dtype``: lucid.float16 (default) or lucid.bfloat16. ``enabled=False`` switches
    autocast off inside (also within an enclosing autocast). Thread-local: other threads
    are not affected; nested blocks restore the enclosing state on exit.

        with lucid.autocast(dtype=lucid.bfloat16):
            loss = model(x)

        @lucid.autocast()
        def forward(x): ...

    torch's order (``autocast(device_type, dtype, enabled)``: ``autocast("cuda",
    dtype=lucid.bfloat16)``) and lucid's own (``autocast(lucid.bfloat16)``,
    ``autocast(dtype, enabled)``) both work: a first argument that is not a device name is
    the dtype.
    """

    def __init__(self, device_type=None, dtype=None, enabled=True, cache_enabled=None):
        is_device = isinstance(device_type, lucid.Device) or (
            isinstance(device_type, str) and not _is_dtype_name(device_type))
        if device_type is not None and not is_device:       # autocast(dtype[, enabled])
            if isinstance(dtype, (bool, np.bool_)):
                device_type, dtype, enabled = None, device_type, dtype
            elif dtype is None:
                device_type, dtype = None, device_type
            else:
                raise TypeError(f"autocast: the first argument must be a device type ('cpu', "
                                f"'cuda', ...) when dtype= is given, got {device_type!r}")
        if device_type is not None:
            _device_type(device_type, "autocast")
        self.dtype = lucid.float16 if dtype is None else _core.as_dtype(dtype)
        if self.dtype.name not in _HALF:
            raise lucid.UnsupportedDTypeError(
                f"autocast dtype must be lucid.float16 or lucid.bfloat16, got {self.dtype}")
        if not isinstance(enabled, (bool, np.bool_)):
            raise TypeError(f"autocast: enabled must be a bool, got {type(enabled).__name__}")
        self.enabled = bool(enabled)
        self._saved = threading.local()     # one object may be entered on several threads

    def __enter__(self):
        prev = _core._set_autocast(self.dtype if self.enabled else None)
        stack = getattr(self._saved, "stack", None)
        if stack is None:
            stack = self._saved.stack = []
        stack.append(prev)
        return self

    def __exit__(self, *exc):
        _core._set_autocast(self._saved.stack.pop())
        return False

    def __call__(self, fn):
        dtype, enabled = self.dtype, self.enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(dtype=dtype, enabled=enabled):
                return fn(*args, **kwargs)
        return wrapper

    def __repr__(self):
        return f"lucid.autocast(dtype={self.dtype}, enabled={self.enabled})"


def _lowp(t):
    """t cast to the autocast dtype if it is float32 or half (the matmul family's cast)."""
    dt = _core.get_autocast_dtype()
    if dt is None or not isinstance(t, lucid.Tensor) or t.dtype is dt:
        return t
    if t.dtype in (lucid.float32, lucid.float16, lucid.bfloat16):
        return t.to(dt)
    return t


# -- GradScaler ------------------------------------------------------------------------

_READY, _UNSCALED, _STEPPED = 0, 1, 2


def _params_of(optimizer):
    if hasattr(optimizer, "param_groups"):
        return [p for g in optimizer.param_groups for p in g["params"]]
    if isinstance(optimizer, lucid.Tensor):
        return [optimizer]
    try:
        params = list(optimizer)
    except TypeError:
        raise TypeError("GradScaler: expected an optimizer or a list of parameters, got "
                        f"{type(optimizer).__name__}") from None
    for p in params:
        if not isinstance(p, lucid.Tensor):
            raise TypeError(f"GradScaler: parameters must be Tensors, got {type(p).__name__}")
    return params


class GradScaler:
    """Dynamic loss scaling for float16 training, as ``torch.amp.GradScaler``::

        scaler = lucid.amp.GradScaler()
        for x, y in data:
            opt.zero_grad()
            with lucid.autocast():
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)          # unscales, skips the step if a gradient is inf/nan
            scaler.update()           # halves the scale after a skip, grows it after
                                      # growth_interval clean steps

    The arguments are torch.amp.GradScaler's, device first: ``GradScaler("cpu")``,
    ``GradScaler("cuda", init_scale=1024.0)``. ``device`` ("cpu", "cuda", "gpu", "mps", or a
    lucid.Device) is recorded, not enforced: one scaler handles gradients on either of
    lucid's devices, so unlike torch a "cuda" scaler without a gpu is not disabled.

    ``step`` also takes a plain list of parameters instead of an optimizer: it then
    unscales their gradients and returns True if the update may be applied (all
    finite), False if it must be skipped.
    """

    def __init__(self, device="cpu", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = _device_type(device, "GradScaler")
        if float(init_scale) <= 0:
            raise ValueError(f"GradScaler: init_scale must be positive, got {init_scale}")
        if float(growth_factor) <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < float(backoff_factor) < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if int(growth_interval) != growth_interval or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got "
                             f"{growth_interval}")
        self._enabled = bool(enabled)
        self._init_scale = float(init_scale)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}        # id(optimizer) -> {"stage", "found_inf"}

    # -- scaling ----------------------------------------------------------------------
    def scale(self, outputs):
        """outputs * scale (a tensor, or a list / tuple of them, nested)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, lucid.Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: expected a Tensor or a list/tuple of Tensors, got "
                        f"{type(outputs).__name__}")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide the gradients of the optimizer's parameters by the scale, in place, and
        record whether any of them is inf or nan. At most once per optimizer between
        two update() calls."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if st["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = np.float32(1.0 / self._scale)   # float32, as torch's reciprocal of its scale
        found = False
        for p in _params_of(optimizer):
            g = p.grad
            if g is None:
                continue
            if g.device == "gpu":     # MLX arrays are immutable: a new gradient tensor
                u = g.detach() * float(inv)
                found = found or not bool(lucid.isfinite(u).all())
                p.grad = u
                continue
            a = g.detach().numpy()
            with np.errstate(over="ignore", invalid="ignore"):
                u = a.astype(np.float32) * inv if a.dtype != np.float64 else a * float(inv)
            if not np.all(np.isfinite(u)):
                found = True
            with np.errstate(over="ignore", invalid="ignore"):
                a[...] = u.astype(a.dtype)
            g.detach().reshape(-1)[:0].mul_(1)    # bump the version counter (written in place)
        st["found_inf"] = found
        st["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless unscale_ was called) and run ``optimizer.step(*args, **kwargs)``
        unless a gradient is inf or nan. Returns the optimizer's return value (None when
        skipped); with a list of parameters, True if the update may be applied."""
        is_opt = hasattr(optimizer, "step") and hasattr(optimizer, "param_groups")
        if not self._enabled:
            return optimizer.step(*args, **kwargs) if is_opt else True
        if kwargs.pop("closure", None) is not None:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == _READY:
            self.unscale_(optimizer)
        st["stage"] = _STEPPED
        if st["found_inf"]:
            return None if is_opt else False
        return optimizer.step(*args, **kwargs) if is_opt else True

    def update(self, new_scale=None):
        """Set the scale for the next iteration: ``new_scale`` if given, else halved
        (backoff_factor) if any step since the last update saw inf/nan, else grown
        (growth_factor) after growth_interval consecutive clean steps."""
        if not self._enabled:
            return
        if new_scale is not None:
            v = float(new_scale.item() if isinstance(new_scale, lucid.Tensor) else new_scale)
            self._scale = v
        else:
            states = list(self._per_optimizer.values())
            if not states:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(s["found_inf"] for s in states):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = np.float32(self._scale) * np.float32(self._growth_factor)
                    if np.isfinite(grown):          # never grow to inf (as torch)
                        self._scale = float(grown)
                    self._growth_tracker = 0
            self._scale = float(np.float32(self._scale))    # a float32, as torch's
        self._per_optimizer = {}

    # -- accessors and state -------------------------------------------------------------
    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """The scale and its schedule (torch's keys); {} when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_per_optimizer"] = {}
        return state
