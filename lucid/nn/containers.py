"""Sequential, ModuleList, ModuleDict, ParameterList."""
from collections import OrderedDict

from lucid.nn.module import Module
from lucid.nn.parameter import Parameter


class Sequential(Module):
    """Modules applied in order; ``Sequential(a, b)`` or ``Sequential(OrderedDict(...))``."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (dict, OrderedDict)):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _key(self, idx):
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules)[idx % n]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for k in keys:
            del self._modules[k]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(Module):
    """A list of modules, registered so their parameters are found."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return self._modules[str(idx % n)]

    def __setitem__(self, idx, module):
        self.add_module(str(idx % len(self)), module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it")


class ModuleDict(Module):
    """A dict of modules, registered so their parameters are found."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self.add_module(k, m)

    def pop(self, key):
        return self._modules.pop(key)


class ParameterList(Module):
    """A list of Parameters, registered under "0", "1", ..."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def append(self, value):
        if not isinstance(value, Parameter):
            value = Parameter(value)
        self.register_parameter(str(len(self)), value)
        return self

    def __len__(self):
        return len(self._parameters)

    def __getitem__(self, idx):
        return self._parameters[str(idx % len(self))]

    def __iter__(self):
        return iter(self._parameters.values())
