"""Module: the base class of layers and models, with PyTorch's names and behaviour.

Attributes that are Parameters, Modules or buffers are registered on assignment
(``__setattr__``), which is what ``parameters()``, ``state_dict()`` and ``to()`` walk.
"""
from collections import OrderedDict

import numpy as np

import lucid
from lucid._core.core import LucidError, ShapeError, _assign_, _bump_version
from lucid.nn.parameter import Parameter


class StateDictKeyError(LucidError, KeyError):
    """Missing or unexpected keys in a strict ``load_state_dict``: a KeyError, and a
    RuntimeError as torch raises."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class _IncompatibleKeys(tuple):
    """(missing_keys, unexpected_keys), as ``load_state_dict`` returns them."""

    def __new__(cls, missing, unexpected):
        return super().__new__(cls, (missing, unexpected))

    missing_keys = property(lambda self: self[0])
    unexpected_keys = property(lambda self: self[1])

    def __repr__(self):
        return f"<All keys matched successfully>" if not (self[0] or self[1]) else (
            f"_IncompatibleKeys(missing_keys={self[0]}, unexpected_keys={self[1]})")


class Module:
    """Base class for all layers: subclass it, assign layers and Parameters in
    ``__init__``, and write ``forward``; call the module itself (``model(x)``)."""

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())

    # -- calling ---------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # -- registration ------------------------------------------------------------
    def _check_init(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign parameters or modules before {type(self).__name__}.__init__() "
                "calls super().__init__()")

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self._check_init()
            self._remove_from(name, "_buffers", "_modules")
            d.pop(name, None)
            d["_parameters"][name] = value
        elif isinstance(value, Module):
            self._check_init()
            self._remove_from(name, "_parameters", "_buffers")
            d.pop(name, None)
            d["_modules"][name] = value
        elif "_parameters" in d and name in d["_parameters"]:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} "
                                "(lucid.nn.Parameter or None expected)")
            d["_parameters"][name] = None
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module {name!r}")
            d["_modules"][name] = None
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, lucid.Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r}")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_from(self, name, *dicts):
        for dn in dicts:
            self.__dict__[dn].pop(name, None)

    def __getattr__(self, name):  # only called when normal lookup fails
        d = self.__dict__
        for dn in ("_parameters", "_buffers", "_modules"):
            if dn in d and name in d[dn]:
                return d[dn][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for dn in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(dn, {}):
                del self.__dict__[dn][name]
                self.__dict__.get("_non_persistent", set()).discard(name)
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        self._check_init()
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter {name!r}")
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._check_init()
        if tensor is not None and not isinstance(tensor, lucid.Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__} as buffer {name!r}")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        self._check_init()
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self.__dict__.pop(name, None)
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        mod = self
        for part in target.split(".") if target else ():
            mod = mod._modules[part]
        return mod

    # -- walking -----------------------------------------------------------------
    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, attr, prefix, recurse):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, v in getattr(m, attr).items():
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield mp + ("." if mp else "") + name, v

    def named_parameters(self, prefix="", recurse=True):
        yield from self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes -------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with lucid.no_grad():
                    p.grad.zero_()

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- dtype (and device) --------------------------------------------------------
    def _apply_tensors(self, fn):
        """Convert parameters in place (``p.data = fn(p)``: the same Parameter objects, so
        optimizers built before still hold them), their gradients likewise, and buffers
        (replaced, as torch does). ``fn`` returns its argument when nothing changes."""
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    p.data = new.detach()
                g = p.grad
                if g is not None:
                    new = fn(g)
                    if new is not g:
                        p.grad = new
            for name, b in list(m._buffers.items()):
                if b is not None:
                    m._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``: converts the floating
        parameters (in place, as torch: the same Parameter objects) and buffers."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, lucid.DType):
                dtype = a
            else:
                device = a
        if dtype is not None:
            dtype = lucid.DType(dtype) if not isinstance(dtype, lucid.DType) else dtype
            if not dtype.is_floating_point:
                raise TypeError(f"Module.to() only accepts floating dtypes, got {dtype}")
        if device is not None:
            device = lucid.device(device)

        def convert(t):
            with lucid.no_grad():
                if device is not None and t.device != device:
                    t = t.to(device)
                if dtype is not None and t.is_floating_point() and t.dtype != dtype:
                    t = t.to(dtype)
            return t
        return self._apply_tensors(convert)

    def float(self):
        return self.to(lucid.float32)

    def double(self):
        return self.to(lucid.float64)

    def half(self):
        return self.to(lucid.float16)

    def bfloat16(self):
        return self.to(lucid.bfloat16)

    def cpu(self):
        return self.to("cpu")

    def gpu(self):
        """Move the parameters (in place) and buffers to the gpu device."""
        return self.to("gpu")

    # -- state dicts ---------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (detached unless keep_vars)."""
        out = OrderedDict() if destination is None else destination
        for mp, m in self.named_modules(prefix=prefix.rstrip(".")):
            pre = mp + "." if mp else ""
            for name, p in m._parameters.items():
                if p is not None:
                    out[pre + name] = p if keep_vars else p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[pre + name] = b if keep_vars else b.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into this module's parameters and buffers (same shapes, cast to
        their dtypes); with ``strict``, missing or unexpected keys raise a
        StateDictKeyError (a KeyError and RuntimeError) naming them; a shape mismatch
        raises a ShapeError (a ValueError and RuntimeError)."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            msg = [f"Error(s) in loading state_dict for {type(self).__name__}:"]
            if missing:
                msg.append("Missing key(s) in state_dict: " + ", ".join(map(repr, missing)))
            if unexpected:
                msg.append("Unexpected key(s) in state_dict: " +
                           ", ".join(map(repr, unexpected)))
            raise StateDictKeyError("\n\t".join(msg))
        errors = []
        for k, t in own.items():
            if k not in state_dict:
                continue
            src = state_dict[k]
            src_np = src.detach().numpy() if isinstance(src, lucid.Tensor) else src
            dst = t.detach().numpy()
            if tuple(getattr(src_np, "shape", ())) != dst.shape:
                errors.append(f"size mismatch for {k}: copying a param with shape "
                              f"{tuple(src_np.shape)}, the parameter in the current model has "
                              f"shape {dst.shape}")
                continue
            if t.is_cuda:       # MLX arrays are immutable: the tensor gets a new one
                _assign_(t, lucid.tensor(np.array(src_np), dtype=t.dtype, device=t.device))
            else:
                dst[...] = src_np
                _bump_version(t)
        if errors:
            raise ShapeError("Error(s) in loading state_dict for "
                             f"{type(self).__name__}:\n\t" + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # -- repr ------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {sub}")
        main = type(self).__name__ + "("
        if not lines:
            return main + ")"
        if len(lines) == 1 and not self._modules:
            return main + lines[0] + ")"
        return main + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        keys = list(super().__dir__())
        for dn in ("_parameters", "_buffers", "_modules"):
            keys += list(self.__dict__.get(dn, {}))
        return sorted(set(keys))
