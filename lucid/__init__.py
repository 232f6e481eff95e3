"""lucid: a small tensor library with tape-based reverse-mode autograd.

    >>> import lucid
    >>> x = lucid.tensor([0.5, 1.0], requires_grad=True)
    >>> lucid.erf(x).sum().backward()
    >>> x.grad
"""
try:
    from lucid._core import _C
except ImportError as e:  # no pure-Python fallback: say how to build
    raise ImportError(
        "lucid's compiled extension (lucid._core._C) could not be imported: "
        f"{e}.\nBuild it with `pip install .` from the source tree (or "
        "`python setup.py build_ext --inplace` for development). It needs a C "
        "compiler, Cython and NumPy."
    ) from e

from lucid._core._C import (  # noqa: E402
    AmpPolicy,
    DType,
    Device,
    Generator,
    LucidError,
    OpSchema,
    ShapeError,
    Tensor,
    UnsupportedDTypeError,
    arange,
    backend_info,
    device,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    initial_seed,
    normal,
    randint,
    get_num_threads,
    set_num_threads,
    full_like,
    is_grad_enabled,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    randn,
    tensor,
    zeros,
    zeros_like,
)
# The dtype singletons (C-level globals in _C, looked up by name here).
bool_, int32, int64, float16, float32, float64 = (
    _C._dtype_by_name(n) for n in ("bool_", "int32", "int64", "float16", "float32", "float64"))
from lucid import autograd, ops  # noqa: E402
from lucid.autograd import enable_grad, no_grad, set_grad_enabled  # noqa: E402
from lucid.ops import *  # noqa: E402,F401,F403
from lucid.ops import __all__ as _ops_all  # noqa: E402

half, double = float16, float64

# NumPy interop: the protocols installed on Tensor, DLPack, lucid.differentiable.
from lucid._interop import differentiable, from_dlpack  # noqa: E402

pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")
newaxis = None

__version__ = "0.1.0"

__all__ = [
    "AmpPolicy", "DType", "Device", "Generator", "LucidError", "get_num_threads", "initial_seed",
    "normal", "randint", "set_num_threads", "OpSchema", "ShapeError", "Tensor",
    "UnsupportedDTypeError", "arange", "autograd", "backend_info", "bool_", "device", "empty",
    "empty_like", "enable_grad", "eye", "float16", "float32", "float64", "from_numpy", "full",
    "full_like", "int32", "int64", "is_grad_enabled", "linspace", "manual_seed", "no_grad",
    "ones", "ones_like", "ops", "rand", "randn", "set_grad_enabled", "tensor", "zeros",
    "zeros_like", "differentiable", "from_dlpack", "pi", "e", "inf", "nan", "newaxis",
] + list(_ops_all)
