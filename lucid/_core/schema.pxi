# Op schemas: one per registered op, attached to its backward node as ``schema_v1``.

import enum


class AmpPolicy(enum.Enum):
    """How an op treats float16 inputs.

    Promote:   compute in the promoted dtype of the inputs (float16 stays float16;
               the CPU may compute internally in float32).
    KeepInput: the output has the input's dtype (shape ops, reductions).
    ForceFP32: float16 inputs are upcast to float32 before dispatch; the result is float32.
    """
    Promote = "Promote"
    KeepInput = "KeepInput"
    ForceFP32 = "ForceFP32"


cdef enum:
    AMP_PROMOTE = 0
    AMP_KEEP_INPUT = 1
    AMP_FORCE_FP32 = 2


cdef class OpSchema:
    """What the dispatcher and the autograd engine need to know about an op."""
    cdef readonly str name
    cdef readonly int version
    cdef readonly object amp_policy
    cdef readonly bint deterministic
    cdef readonly int arity
    cdef readonly bint saves_input
    cdef readonly bint saves_output

    def __init__(self, str name, int version, amp_policy, bint deterministic=True, int arity=1,
                 bint saves_input=False, bint saves_output=False):
        self.name = name
        self.version = version
        self.amp_policy = AmpPolicy(amp_policy)
        self.deterministic = deterministic
        self.arity = arity
        self.saves_input = saves_input
        self.saves_output = saves_output

    def __repr__(self):
        return (f"OpSchema(name={self.name!r}, version={self.version}, "
                f"amp_policy=AmpPolicy.{self.amp_policy.name}, deterministic={self.deterministic}, "
                f"arity={self.arity}, saves_input={self.saves_input}, "
                f"saves_output={self.saves_output})")


cdef dict _REGISTRY = {}


cdef OpSchema _register(str name, str amp, int arity=1, bint saves_input=False,
                        bint saves_output=False, bint deterministic=True):
    if name in _REGISTRY:
        raise RuntimeError(f"op {name!r} registered twice")
    cdef OpSchema s = OpSchema(name, 1, amp, deterministic, arity, saves_input, saves_output)
    _REGISTRY[name] = s
    return s


def schema(str name):
    """The OpSchema registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} is registered") from None


def registry():
    """A copy of the name -> OpSchema registry."""
    return dict(_REGISTRY)
