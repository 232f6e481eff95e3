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

# Shape, indexing and linear-algebra ops (shape.pxi, linalg.pxi).
from lucid._core._C import (  # noqa: E402
    cat,
    chunk,
    concat,
    dot,
    flatten,
    flip,
    gather,
    index_put_,
    index_select,
    inner,
    matmul,
    narrow,
    outer,
    pad,
    permute,
    repeat,
    roll,
    scatter_add,
    split,
    squeeze,
    stack,
    tile,
    transpose,
    unsqueeze,
)

globals().update({name: getattr(_C, name) for name in UNARY_OP_NAMES})

__all__ = [
    "add", "broadcast_to", "clone", "div", "expand", "mean", "mul", "neg", "pow", "reshape",
    "sub", "sum",
] + list(UNARY_OP_NAMES)

_SHAPE_OPS = [
    "cat", "chunk", "concat", "dot", "flatten", "flip", "gather", "index_put_", "index_select",
    "inner", "matmul", "narrow", "outer", "pad", "permute", "repeat", "roll", "scatter_add",
    "split", "squeeze", "stack", "tile", "transpose", "unsqueeze",
]
__all__ += _SHAPE_OPS
