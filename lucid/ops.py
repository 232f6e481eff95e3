"""lucid's ops as functions, and the op schema registry.

Every op is published by its family module in ``lucid/_core`` (one ``export`` per
function, driven by the op tables in ``lucid/_core/optable.py``); this module is that
list, and ``lucid`` re-exports it (``lucid.erf`` is ``lucid.ops.erf``).
"""
import lucid._core  # noqa: F401  (loads every family, which registers its ops)
from lucid._core.core import (are_deterministic_algorithms_enabled, exported, registry, schema,
                              use_deterministic_algorithms)
from lucid._core.unary import UNARY_OP_NAMES  # noqa: F401

globals().update(exported())

__all__ = list(exported())
