"""lucid: a small tensor library with tape-based reverse-mode autograd.

    >>> import lucid
    >>> x = lucid.tensor([0.5, 1.0], requires_grad=True)
    >>> lucid.erf(x).sum().backward()
    >>> x.grad
"""
try:
    from lucid._core import core as _core
except ImportError as e:  # no pure-Python fallback: say how to build
    raise ImportError(
        "lucid's compiled extensions (lucid._core) could not be imported: "
        f"{e}.\nBuild them with `pip install .` from the source tree (or "
        "`python setup.py build_ext --inplace` for development). It needs a C "
        "compiler, Cython and NumPy."
    ) from e

from lucid._core.core import (  # noqa: E402
    AmpPolicy,
    ArgumentError,
    DType,
    DTypeOverflowError,
    Device,
    LucidError,
    OpSchema,
    ShapeError,
    Tensor,
    UnsupportedDTypeError,
    are_deterministic_algorithms_enabled,
    backend_info,
    device,
    empty_cache,
    from_numpy,
    get_num_threads,
    gpu_available,
    is_grad_enabled,
    set_num_threads,
    tensor,
    use_deterministic_algorithms,
)
from lucid._core.core import eval_tensors as eval  # noqa: E402,A001  (as mlx.core.eval)
from lucid._core.creation import (  # noqa: E402
    Generator,
    arange,
    empty,
    eye,
    full,
    initial_seed,
    linspace,
    manual_seed,
    normal,
    ones,
    rand,
    randint,
    randn,
    zeros,
)
# The dtype singletons (C-level globals in core, looked up by name here).
bool_, uint8, int8, int16, int32, int64, float16, float32, float64, bfloat16 = (
    _core._dtype_by_name(n) for n in ("bool_", "uint8", "int8", "int16", "int32", "int64",
                                      "float16", "float32", "float64", "bfloat16"))
from lucid import autograd, ops  # noqa: E402
from lucid.autograd import enable_grad, no_grad, set_grad_enabled  # noqa: E402
from lucid.ops import *  # noqa: E402,F401,F403
from lucid.ops import __all__ as _ops_all  # noqa: E402

half, double, short, long = float16, float64, int16, int64

from lucid import nn, optim  # noqa: E402
from lucid import utils  # noqa: E402
from lucid import amp  # noqa: E402
from lucid.amp import autocast, get_autocast_dtype, is_autocast_enabled  # noqa: E402
from lucid.serialization import CheckpointError, load, save  # noqa: E402

# NumPy interop: the protocols installed on Tensor, DLPack, lucid.differentiable.
from lucid._interop import differentiable, from_dlpack  # noqa: E402

from lucid import linalg, special  # noqa: E402
from lucid._vmap import vmap  # noqa: E402

pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")
newaxis = None

__version__ = "0.1.0"

__all__ = [
    "AmpPolicy", "ArgumentError", "CheckpointError", "DType", "DTypeOverflowError", "Device",
    "Generator", "LucidError", "OpSchema", "ShapeError", "Tensor",
    "UnsupportedDTypeError", "arange", "are_deterministic_algorithms_enabled", "autograd",
    "backend_info", "bool_", "bfloat16", "autocast", "amp", "is_autocast_enabled",
    "get_autocast_dtype", "device", "double", "empty", "empty_cache", "enable_grad", "eye",
    "float16", "float32", "float64", "from_numpy", "uint8", "int8", "int16", "short", "long",
    "full", "get_num_threads", "gpu_available", "half", "initial_seed", "int32",
    "int64", "is_grad_enabled", "linspace", "manual_seed", "no_grad", "normal", "ones", "ops",
    "rand", "randint", "randn", "set_grad_enabled", "set_num_threads", "tensor",
    "use_deterministic_algorithms", "zeros", "nn", "optim", "utils", "save", "load",
    "differentiable",
    "from_dlpack", "linalg", "special", "vmap", "pi", "e", "inf", "nan", "newaxis",
] + list(_ops_all)

# torch's short dtype names that shadow Python builtins (lucid.bool, lucid.float,
# lucid.int): attributes only, kept out of __all__ so `from lucid import *` leaves the
# builtins alone. Nothing below this line may call bool(), float() or int().
bool, float, int = bool_, float32, int32  # noqa: A001
