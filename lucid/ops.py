"""lucid's ops as functions, and the op schema registry.

Every op here is also exported at the top level (``lucid.erf`` is ``lucid.ops.erf``).
The element-wise unary ops come from the op table in ``lucid/_core/optable.py``.
"""
from lucid._core import _C
from lucid._core._C import (
    UNARY_OP_NAMES,
    add,
    broadcast_to,
    clone,
    div,
    expand,
    mean,
    mul,
    neg,
    pow,
    registry,
    reshape,
    schema,
    sub,
    sum,
)

globals().update({name: getattr(_C, name) for name in UNARY_OP_NAMES})

__all__ = [
    "add", "broadcast_to", "clone", "div", "expand", "mean", "mul", "neg", "pow", "reshape",
    "sub", "sum",
] + list(UNARY_OP_NAMES)
