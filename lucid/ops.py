"""lucid's ops as functions, and the op schema registry.

Every op is published by its family module in ``lucid/_core`` (one ``export`` per
function, driven by the op tables in ``lucid/_core/optable.py``); this module is that
list, and ``lucid`` re-exports it (``lucid.erf`` is ``lucid.ops.erf``).
"""
import lucid._core  # noqa: F401  (loads every family, which registers its ops)
from lucid._core.core import (are_deterministic_algorithms_enabled, exported, registry, schema,
                              use_deterministic_algorithms)
from lucid._core.unary import UNARY_OP_NAMES  # noqa: F401
from lucid._core import optable as _optable
from lucid._core.core import register as _register

for _row in _optable.COMPOSITE:      # the schemas of the ops made of other ops
    _register(_row["name"], _row["amp"], -1)
del _row

globals().update(exported())

__all__ = list(exported())
