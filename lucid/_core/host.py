"""Ops whose values are computed on the host (NumPy, SciPy, LAPACK): the one set of
helpers that ``lucid._sorting``, ``lucid.special``, ``lucid.linalg`` and ``lucid.nn``'s
pooling use, so that each of those files states its op's math and nothing else.

The device rule lives here: such an op reads its inputs' values on the host, computes,
and hands back tensors on the device its inputs are on (``from_host(..., device)``), so a
gpu input gives a gpu result, as every other op does. Inputs on two devices raise the
same error the dispatcher raises. Index tensors the op builds for lucid's differentiable
``gather`` / ``index_select`` / ``where`` are made on that device too.

Nothing here imports a module above ``lucid._core``.
"""
import numpy as np

from lucid._core import core
from lucid._core.core import Tensor, register

_int64 = core.as_dtype("int64")
_int32 = core.as_dtype("int32")
_HALF = (core.as_dtype("float16"), core.as_dtype("bfloat16"))
_F32 = np.dtype(np.float32)

# Dtype kinds are read from the lucid dtype (``dt.is_floating_point``), never from the
# NumPy array: NumPy's bfloat16 (ml_dtypes) has kind 'V', so ``a.dtype.kind == "f"``,
# ``np.issubdtype(.., np.floating)`` and NumPy functions that test them (np.nan_to_num,
# np.iinfo / np.finfo guards) take a bfloat16 array for a non-float one.


def is_half(dt):
    """Is lucid dtype ``dt`` float16 or bfloat16 (stored in 2 bytes, computed in float32)?"""
    return dt in _HALF


def compute_dtype(dt):
    """The NumPy dtype a host op computes lucid dtype ``dt`` in: float32 for float16 and
    bfloat16 (as lucid's kernels: widen, compute, round once), its own otherwise."""
    return _F32 if dt in _HALF else dt.numpy_dtype


def check_index(op, index, dtypes=(_int64, _int32)):
    """An index tensor's dtype as torch checks it: int64 or int32 (some ops int64 only);
    anything else raises naming ``op``."""
    if index.dtype not in dtypes:
        want = "/".join(d.name for d in dtypes)
        raise core.UnsupportedDTypeError(
            f"{op}(): Expected dtype {want} for index, but got {index.dtype}")


def as_tensor(x):
    """A tensor as it is; numbers, lists and arrays as a new cpu tensor."""
    return x if isinstance(x, Tensor) else core.tensor(x)


def needs_grad(*xs):
    """Does the op record a node: grad mode on and some tensor input requires grad?"""
    return core.is_grad_enabled() and any(isinstance(x, Tensor) and x.requires_grad for x in xs)


def device_of(op, *xs):
    """The device of the tensors among ``xs`` (cpu when there are none); tensors on two
    devices raise lucid's device-mismatch error naming ``op``."""
    dev = None
    for x in xs:
        if isinstance(x, Tensor):
            d = "gpu" if x.is_cuda else "cpu"
            if dev is None:
                dev = d
            elif d != dev:
                raise core.LucidError(
                    f"Expected all tensors to be on the same device, but lucid.{op}() got "
                    "tensors on gpu and cpu; move one with .gpu() or .cpu()")
    return dev or "cpu"


def to_host(x):
    """A tensor's values as a NumPy array (a gpu tensor's are evaluated and copied)."""
    return x.numpy(force=True)


def from_host(arr, dtype=None, device="cpu"):
    """A NumPy result as a tensor of ``dtype`` (default: the array's) on ``device``."""
    arr = np.asarray(arr)
    if dtype is not None and arr.dtype != dtype.numpy_dtype:
        arr = arr.astype(dtype.numpy_dtype)
    if arr.dtype == np.intp and np.dtype(np.intp) != np.int64:
        arr = arr.astype(np.int64)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")       # (np.ascontiguousarray would make a 0-d array 1-d)
    t = core.from_numpy(arr)
    return t if device == "cpu" else t.to(device)


def index_tensor(arr, device="cpu"):
    """Integer positions as an int64 tensor on ``device`` (for gather / index_select)."""
    return from_host(np.asarray(arr, dtype=np.int64), None, device)


def op(name, arity=1, saves_input=False, saves_output=False, amp="KeepInput"):
    """Class decorator of a host op's backward node (a ``PyNode`` subclass): registers
    the op's schema and binds it to the class as ``schema_v1``."""
    def deco(cls):
        cls.schema_v1 = register(name, amp, arity, saves_input, saves_output, node=cls)
        return cls
    return deco


def run_mlx(fn, *xs):
    """The gpu lowering of a host op: ``fn(mx, *arrays)`` over the MLX arrays of gpu
    tensors ``xs``, as a new gpu tensor (no node: the caller records it)."""
    import mlx.core as mx
    return core._gpu_tensor(fn(mx, *(core._mx_array(x) for x in xs)))
