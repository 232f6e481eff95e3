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

# Binary arithmetic, comparisons and logical ops (binary.pxi, compare.pxi).
from lucid._core._C import (  # noqa: E402
    allclose,
    atan2,
    bitwise_not,
    eq,
    equal,
    fmod,
    ge,
    gt,
    hypot,
    isfinite,
    isinf,
    isnan,
    le,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    ne,
    remainder,
    where,
)

# Reductions (reduce.pxi).
from lucid._core._C import (  # noqa: E402
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    cumprod,
    cumsum,
    log_softmax,
    logsumexp,
    max,
    min,
    norm,
    prod,
    softmax,
    std,
    var,
)

# Element-wise ops with parameters (activation.pxi).
from lucid._core._C import clamp, clip, elu, gelu, leaky_relu, nan_to_num  # noqa: E402

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

_ELEMENTWISE_OPS = [
    "allclose", "atan2", "bitwise_not", "eq", "equal", "fmod", "ge", "gt", "hypot", "isfinite",
    "isinf", "isnan", "le", "logaddexp", "logical_and", "logical_not", "logical_or",
    "logical_xor", "lt", "maximum", "minimum", "ne", "remainder", "where",
]
_REDUCTION_OPS = [
    "all", "amax", "amin", "any", "argmax", "argmin", "cumprod", "cumsum", "log_softmax",
    "logsumexp", "max", "min", "norm", "prod", "softmax", "std", "var",
]
__all__ += _ELEMENTWISE_OPS + _REDUCTION_OPS + [
    "clamp", "clip", "elu", "gelu", "leaky_relu", "nan_to_num"]
