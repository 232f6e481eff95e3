"""The gpu device's kernels for the table-driven families.

Each row of ``optable.UNARY``, ``BINARY`` and ``COMPARE`` names its MLX kernel (the
``mlx`` column, an expression over ``mx`` = mlx.core). This module compiles those
expressions into functions of MLX arrays and attaches them to the rows' schemas as
``schema.gpu``; core's dispatcher calls ``schema.gpu`` for gpu tensors. mlx.core is
imported when a gpu kernel first runs, so lucid imports without MLX.
"""
from lucid._core import core, mlx_special, optable


def _namespace():
    import mlx.core as mx

    def _inf0(x, y):
        # x * f(x) with f(-inf) = 0 and f(+inf) = 1: PyTorch gives -0 and +inf there.
        return mx.where(mx.isinf(x), mx.where(x > 0, x, mx.zeros_like(x) * -1), y)

    def _ints(f, x):
        return f(x) if mx.issubdtype(x.dtype, mx.floating) else x

    def _fmod(a, b):
        r = mx.remainder(a, b)
        return mx.where((r != 0) & ((r < 0) != (a < 0)), r - b, r)

    def _nan_to_num(x, nan, posinf, neginf):
        info = mx.finfo(x.dtype)
        x = mx.where(mx.isnan(x), nan, x)
        x = mx.where(x == float("inf"), info.max if posinf is None else posinf, x)
        return mx.where(x == -float("inf"), info.min if neginf is None else neginf, x)

    def _bits(name, f, a, b):
        # as the CPU kernel (compare.BitwiseCPU): integer and bool operands only
        dt = (a if isinstance(a, mx.array) else b).dtype
        if mx.issubdtype(dt, mx.floating):
            raise core.UnsupportedDTypeError(
                f"{name} is only supported for integer and bool tensors, got {dt}")
        if dt == mx.bool_ and name.endswith("shift"):
            raise core.UnsupportedDTypeError(f"{name} is not implemented for bool tensors")
        if not name.endswith("shift"):
            return f(a, b)
        # a shift by the width or more (or by a negative count) is the cpu's and torch's:
        # all bits shifted out (0; -1 for a negative number shifted right), where MLX
        # shifts by the count modulo the width
        a, b = mx.array(a, dtype=dt), mx.array(b, dtype=dt)
        inside = (b >= 0) & (b < dt.size * 8)
        r = f(a, mx.where(inside, b, mx.zeros_like(b)))
        out = mx.zeros_like(r)
        if name.endswith("right_shift") and mx.issubdtype(dt, mx.signedinteger):
            out = mx.where(a < 0, mx.full(r.shape, -1, dtype=dt), out)
        return mx.where(inside, r, out)

    def _nonzero(name, a, b):
        # integer division by zero raises, as on the cpu (one small evaluation of b)
        dt = (b if isinstance(b, mx.array) else a).dtype
        if not mx.issubdtype(dt, mx.floating) and bool(mx.any(mx.array(b) == 0).item()):
            raise ZeroDivisionError(f"integer division by zero in {name}")
        return a

    return {"mx": mx, "_sf": mlx_special, "_bits": _bits, "_inf0": _inf0, "_ints": _ints,
            "_fmod": _fmod, "_nan_to_num": _nan_to_num, "_nonzero": _nonzero}


class _Lazy:
    """A row's kernel before mlx.core is imported: compiles itself on the first call
    and puts the compiled function in its schema's place."""
    __slots__ = ("schema", "args", "expr")

    def __init__(self, schema, args, expr):
        self.schema, self.args, self.expr = schema, args, expr

    def __call__(self, *a):
        fn = eval(f"lambda {self.args}: {self.expr}", _namespace())   # our own table text
        fn.__name__ = f"{self.schema.name}_mlx"
        self.schema.gpu = fn
        return fn(*a)


def _attach(name, args, expr):
    """The row's gpu kernel; expr None: the row has none (the cpu-only error)."""
    s = core.schema(name)
    s.gpu = None if expr is None else _Lazy(s, args, expr)


for _r in optable.UNARY:
    _attach(_r["name"], "x, p", _r["mlx"])
for _r in optable.BINARY:
    _attach(_r["name"], "a, b, p", _r["mlx"])
for _r in optable.COMPARE:
    _attach(_r["name"], "a, b, p" if _r["arity"] == 2 else "x, p", _r["mlx"])
_attach("neg", "x, p", "mx.negative(x)")
# The unary ops with parameters (unary.pyx; p is the op's parameter).
_attach("leaky_relu", "x, p", "mx.where(x > 0, x, x * p)")
_attach("elu", "x, p", "mx.where(x > 0, x, p * mx.expm1(mx.minimum(x, 0)))")
_attach("nan_to_num", "x, p", "_nan_to_num(x, *p)")
_attach("polygamma", "x, p", "_sf.polygamma(mx, int(p[0]), x)")
core.schema("clamp").gpu = True
for _n in ("and", "or", "xor", "left_shift", "right_shift"):
    _attach(f"bitwise_{_n}", "a, b, p", f"_bits('bitwise_{_n}', mx.bitwise_{_n}, a, b)")      # unary.clamp handles gpu tensors itself
