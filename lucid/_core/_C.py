"""The former single extension module: every name of core and of the op families, for
code written against ``lucid._core._C``."""
from lucid._core import FAMILIES as _FAMILIES
from lucid._core import core as _core


def _public(mod):
    return {k: v for k, v in vars(mod).items() if not (k.startswith("__") and k.endswith("__"))}


for _mod in (_core,) + _FAMILIES:
    globals().update(_public(_mod))
globals().update(_core.exported())
del _mod
