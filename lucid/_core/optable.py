"""lucid's op tables: what the build renders into the op families, one row per op.

  UNARY        element-wise ops of one tensor    -> unary.pyx (via _unary.pxi.tp) and
                                                     include/lucid_unary_list.h (C kernels)
  ACCELERATE   UNARY rows whose forward is Apple vForce on macOS
  BINARY       element-wise ops of two operands  -> binary.pyx (via _binary.pxi.tp)
  COMPARE      comparisons, logical ops, predicates -> compare.pyx (via _compare.pxi.tp)
  REDUCTIONS   reductions and row-wise ops       -> reduce.pyx (via _reduce.pxi.tp)

A row holds what lucid runs: schema fields, kernels, the graph-mode gradient formula,
the docstring. What only the tests, benchmarks and accuracy tools need (references,
mpmath oracles, sampling domains, known ULP limits, the test cases of the other ops)
lives in tests/op_data.py, keyed by the same names. Adding a unary op is one row here
and one in tests/op_data.py, plus one line in ``src/lucid_vforce.c`` if its forward is
not a libm function; the generated code, tests and benchmarks follow.

UNARY fields
  name      public name: ``lucid.<name>``, ``Tensor.<name>()``, schema name
  amp       AMP policy: "Promote", "KeepInput" or "ForceFP32"
  saves     what the backward node keeps: "x" (the input), "y" (the output), or
            "" (nothing: the gradient is zero, as for floor)
  c         (float32 function, float64 function) the forward kernel applies
            element-wise: libm names (vectorised through libmvec) or lucid's
            own inline functions (``lv_*`` in src/lucid_vforce.c and src/lucid_special.h)
  c_grad    the fused backward, a C expression in g, T and the saved x or y
            (EXP, LOG, SQRT, ... are type-generic; see lucid_vforce.c)
  grad      the graph-mode backward, the same formula written with lucid ops
            in g, x, y (so it is itself differentiable); names of other families'
            ops (where, zeros_like) are looked up when the formula runs
  doc       one-line description for the docstring
  torch     the torch function name, or None
  py_name   optional name of the generated function when a hand-written wrapper
            with extra arguments owns the public name (gelu's approximate=)
  mlx       the gpu kernel: an expression in ``x`` over ``mx`` (mlx.core) and the
            helpers of lucid/_core/gpu.py; default ``mx.<name>(x)``. Where MLX has no
            function of the op's name it is composed from MLX primitives (MLX_UNARY)
  ints      how integer inputs are computed, as PyTorch: None (the default) computes
            int32/int64/bool as float32 (exp, sin, ...); a pair (NumPy expression in
            x for int32/int64, NumPy expression for bool or None when PyTorch refuses
            bool) keeps the integer dtype (abs, floor, sign, relu, square, ...)

On macOS the forward kernel of a row listed in ACCELERATE is Accelerate's vForce
function (vv<name>f / vv<name>); every other row, and every backward kernel, is
the same C loop as on Linux.
"""

_SQRT_PI_2 = "0.886226925452758"      # sqrt(pi) / 2
_TWO_SQRT_PI = "1.1283791670955126"   # 2 / sqrt(pi)
_LN2 = "0.6931471805599453"
_LN10 = "2.302585092994046"
_INV_SQRT_2PI = "0.3989422804014327"  # 1 / sqrt(2 pi)
_INV_SQRT2 = "0.7071067811865476"


# The gpu kernels of the UNARY rows that MLX has no function of the same name for:
# compositions of MLX primitives. _inf0(x, y) is y except at +-inf, where it is the
# limit PyTorch gives (x * 0 -> -0 at -inf, x at +inf); _ints(f, x) leaves integer
# inputs unchanged (floor, ...). Accuracy against the CPU kernels: tests/test_gpu.py.
MLX_UNARY = {
    # the special functions: lucid/_core/mlx_special.py (``_sf``)
    "lgamma": "_sf.lgamma(mx, x)", "digamma": "_sf.digamma(mx, x)", "i0": "_sf.i0(mx, x)",
    "erfcx": "_sf.erfcx(mx, x)", "log_ndtr": "_sf.log_ndtr(mx, x)", "ndtri": "_sf.ndtri(mx, x)",
    "sinc": "_sf.sinc(mx, x)",
    "logsigmoid": "-mx.logaddexp(-x, 0)", "logit": "mx.log(x / (1 - x))",
    "exp2": "mx.power(mx.array(2, x.dtype), x)",
    "cbrt": "mx.sign(x) * mx.power(mx.abs(x), mx.array(1 / 3, x.dtype))",
    "asin": "mx.arcsin(x)", "acos": "mx.arccos(x)", "atan": "mx.arctan(x)",
    "asinh": "mx.arcsinh(x)", "acosh": "mx.arccosh(x)", "atanh": "mx.arctanh(x)",
    "erfc": "1 - mx.erf(x)",
    "softplus": "mx.logaddexp(x, 0)",
    "gelu": f"_inf0(x, x * 0.5 * (1 + mx.erf(x * {_INV_SQRT2})))",
    "silu": "_inf0(x, x * mx.sigmoid(x))",
    "relu": "mx.maximum(x, 0)",
    "relu6": "mx.minimum(mx.maximum(x, 0), 6)",
    "selu": "1.0507009873554805 * mx.where(x > 0, x, 1.6732632423543772 * mx.expm1(x))",
    "mish": "_inf0(x, x * mx.tanh(mx.logaddexp(x, 0)))",
    "hardsigmoid": "mx.clip(x / 6 + 0.5, 0, 1)",
    "hardswish": "_inf0(x, x * mx.clip(x / 6 + 0.5, 0, 1))",
    "gelu_tanh": "_inf0(x, 0.5 * x * (1 + mx.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))))",
    "softsign": "mx.where(mx.isinf(x), mx.sign(x), x / (1 + mx.abs(x)))",
    "sign": "mx.sign(x)",
    "floor": "_ints(mx.floor, x)", "ceil": "_ints(mx.ceil, x)",
    "round": "_ints(mx.round, x)", "trunc": "_ints(mx.trunc, x)",
}


def _row(name, amp, saves, c, c_grad, grad, doc, torch=None, py_name=None, ints=None):
    return dict(name=name, amp=amp, saves=saves, c=c, c_grad=c_grad, grad=grad, doc=doc,
                torch=name if torch is None else (torch or None), py_name=py_name, ints=ints,
                mlx=MLX_UNARY.get(name, f"mx.{name}(x)"))


_INT_COPY = ("x.copy()", None)      # rounding an integer changes nothing; bool is refused


UNARY = [
    # -- the seeds --------------------------------------------------------------
    _row("erf", "Promote", "x", ("erff", "erf"),
         f"g * (T){_TWO_SQRT_PI} * EXP(-(x * x))", f"g * {_TWO_SQRT_PI} * exp(-(x * x))",
         "Error function, erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt."),
    _row("exp", "ForceFP32", "y", ("expf", "exp"), "g * y", "g * y",
         "Exponential, e**x. Saves its output: d/dx e**x = e**x."),
    _row("log2", "ForceFP32", "x", ("log2f", "log2"),
         f"g / (x * (T){_LN2})", f"g / (x * {_LN2})",
         "Base-2 logarithm."),
    # -- exponentials and logarithms ------------------------------------------------
    _row("exp2", "ForceFP32", "y", ("exp2f", "exp2"), f"g * y * (T){_LN2}", f"g * y * {_LN2}",
         "2**x."),
    _row("expm1", "ForceFP32", "y", ("expm1f", "expm1"), "g * (y + (T)1)", "g * (y + 1)",
         "e**x - 1, accurate near 0."),
    _row("log", "ForceFP32", "x", ("logf", "log"), "g / x", "g / x",
         "Natural logarithm."),
    _row("log10", "ForceFP32", "x", ("log10f", "log10"),
         f"g / (x * (T){_LN10})", f"g / (x * {_LN10})",
         "Base-10 logarithm."),
    _row("log1p", "ForceFP32", "x", ("log1pf", "log1p"), "g / (x + (T)1)", "g / (x + 1)",
         "log(1 + x), accurate near 0."),
    # -- powers and roots ------------------------------------------------------------
    _row("sqrt", "Promote", "y", ("sqrtf", "sqrt"), "g / (y * (T)2)", "g / (y * 2)",
         "Square root; sqrt'(0) = inf."),
    _row("rsqrt", "ForceFP32", "y", ("lv_rsqrtf", "lv_rsqrt"), "g * (T)-0.5 * y * y * y",
         "g * -0.5 * y * y * y", "1 / sqrt(x)."),
    _row("reciprocal", "ForceFP32", "y", ("lv_reciprocalf", "lv_reciprocal"), "-(g * y * y)",
         "-(g * y * y)", "1 / x."),
    _row("cbrt", "Promote", "y", ("cbrtf", "cbrt"), "g / (y * y * (T)3)", "g / (y * y * 3)",
         "Cube root.", torch=""),
    _row("square", "Promote", "x", ("lv_squaref", "lv_square"), "g * x * (T)2", "g * x * 2",
         "x * x.", ints=("x * x", "x.astype(np.int64)")),
    # -- trigonometric ----------------------------------------------------------------
    _row("sin", "Promote", "x", ("sinf", "sin"), "g * COS(x)", "g * cos(x)",
         "Sine."),
    _row("cos", "Promote", "x", ("cosf", "cos"), "-(g * SIN(x))", "-(g * sin(x))",
         "Cosine."),
    _row("tan", "ForceFP32", "y", ("tanf", "tan"), "g * ((T)1 + y * y)", "g * (1 + y * y)",
         "Tangent."),
    _row("asin", "ForceFP32", "x", ("asinf", "asin"), "g / SQRT((T)1 - x * x)",
         "g / sqrt(1 - x * x)", "Inverse sine."),
    _row("acos", "ForceFP32", "x", ("acosf", "acos"), "-(g / SQRT((T)1 - x * x))",
         "-(g / sqrt(1 - x * x))", "Inverse cosine."),
    _row("atan", "Promote", "x", ("atanf", "atan"), "g / ((T)1 + x * x)", "g / (1 + x * x)",
         "Inverse tangent."),
    # -- hyperbolic ---------------------------------------------------------------------
    _row("sinh", "ForceFP32", "x", ("sinhf", "sinh"), "g * COSH(x)", "g * cosh(x)",
         "Hyperbolic sine."),
    _row("cosh", "ForceFP32", "x", ("coshf", "cosh"), "g * SINH(x)", "g * sinh(x)",
         "Hyperbolic cosine."),
    _row("tanh", "Promote", "y", ("tanhf", "tanh"), "g * ((T)1 - y * y)", "g * (1 - y * y)",
         "Hyperbolic tangent."),
    _row("asinh", "Promote", "x", ("asinhf", "asinh"), "g / SQRT(x * x + (T)1)",
         "g / sqrt(x * x + 1)", "Inverse hyperbolic sine."),
    # (x - 1)(x + 1) keeps its accuracy near 1; + 0 turns the -0 at x = -1 into +0, so
    # the gradient there is +inf (as 1 / sqrt(x^2 - 1)), not -inf.
    _row("acosh", "Promote", "x", ("acoshf", "acosh"), "g / SQRT((x - (T)1) * (x + (T)1) + (T)0)",
         "g / sqrt((x - 1) * (x + 1) + 0.0)", "Inverse hyperbolic cosine."),
    _row("atanh", "Promote", "x", ("atanhf", "atanh"), "g / ((T)1 - x * x)",
         "g / (1 - x * x)", "Inverse hyperbolic tangent."),
    # -- error function family -------------------------------------------------------
    _row("erfc", "ForceFP32", "x", ("erfcf", "erfc"),
         f"-(g * (T){_TWO_SQRT_PI} * EXP(-(x * x)))", f"-(g * {_TWO_SQRT_PI} * exp(-(x * x)))",
         "Complementary error function, 1 - erf(x)."),
    _row("erfinv", "ForceFP32", "y", ("lv_erfinvf", "lv_erfinv"),
         f"g * (T){_SQRT_PI_2} * EXP(y * y)", f"g * {_SQRT_PI_2} * exp(y * y)",
         "Inverse error function."),
    # -- activations -------------------------------------------------------------------
    _row("sigmoid", "ForceFP32", "y", ("lv_sigmoidf", "lv_sigmoid"), "g * y * ((T)1 - y)",
         "g * y * (1 - y)", "Logistic sigmoid 1 / (1 + e**-x), stable for large |x|."),
    _row("softplus", "ForceFP32", "x", ("lv_softplusf", "lv_softplus"), "g * lv_sigmoid_g(x)",
         "g * sigmoid(x)", "log(1 + e**x), stable for large |x| (beta = 1, no threshold).",
         torch="nn.functional.softplus", py_name="_softplus_plain"),
    _row("logsigmoid", "ForceFP32", "x", ("lv_logsigmoidf", "lv_logsigmoid"),
         "g * lv_sigmoid_g(-x)", "g * sigmoid(-x)",
         "log(sigmoid(x)) = -softplus(-x), stable for large |x|.",
         torch="nn.functional.logsigmoid"),
    _row("logit", "ForceFP32", "x", ("lv_logitf", "lv_logit"),
         # |x|: the derivative at -0 is the one-sided +inf of the domain [0, 1], as at +0
         "(x >= (T)0 && x <= (T)1) ? g / (FABS(x) * ((T)1 - x)) : (T)NAN",
         "where((x >= 0) & (x <= 1), g / (abs(x) * (1 - x)), float('nan'))",
         "log(x / (1 - x)), the inverse of sigmoid; -inf at 0, inf at 1, nan outside [0, 1]."),
    _row("gelu", "Promote", "x", ("lv_geluf", "lv_gelu"),
         "g * lv_gelu_grad_g(x)",
         f"g * (0.5 * erfc(-(x * {_INV_SQRT2})) + clamp(x, -40.0, 40.0) * {_INV_SQRT_2PI} * "
         "exp(-0.5 * (clamp(x, -40.0, 40.0) * clamp(x, -40.0, 40.0))))",
         "Exact GELU, x * Phi(x) = x/2 * erfc(-x/sqrt(2)).", torch="nn.functional.gelu",
         py_name="_gelu_exact"),
    _row("silu", "Promote", "x", ("lv_siluf", "lv_silu"),
         "g * lv_silu_grad_g(x)",
         "g * sigmoid(clamp(x, -760.0, 760.0)) * (1 + clamp(x, -760.0, 760.0) * "
         "(1 - sigmoid(clamp(x, -760.0, 760.0))))",
         "SiLU (swish), x * sigmoid(x).", torch="nn.functional.silu"),
    _row("relu", "Promote", "y", ("lv_reluf", "lv_relu"), "y > 0 ? g : (T)0", "g * (y > 0)",
         "max(x, 0); relu'(0) = 0; relu(-0) = -0 and nan stays nan, as PyTorch.",
         ints=("np.maximum(x, 0)", None)),
    _row("relu6", "Promote", "x", ("lv_relu6f", "lv_relu6"), "x > 0 && x < 6 ? g : (T)0",
         "g * ((x > 0) & (x < 6))", "min(max(x, 0), 6).", torch="nn.functional.relu6",
         ints=("np.clip(x, 0, 6)", None)),
    _row("selu", "Promote", "x", ("lv_seluf", "lv_selu"),
         "g * (x > 0 ? (T)1.0507009873554805 : (T)1.7580993408473766 * EXP(x))",
         "g * where(x > 0, 1.0507009873554805, 1.7580993408473766 * exp(x))",
         "Scaled ELU with the self-normalising constants.", torch="nn.functional.selu"),
    _row("mish", "Promote", "x", ("lv_mishf", "lv_mish"), "g * lv_mish_grad_g(x)",
         "g * (tanh(softplus(x)) + clamp(x, -760.0, 760.0) * sigmoid(x) * "
         "(1 - tanh(softplus(x)) * tanh(softplus(x))))",
         "x * tanh(softplus(x)).", torch="nn.functional.mish"),
    _row("hardsigmoid", "Promote", "x", ("lv_hardsigmoidf", "lv_hardsigmoid"),
         "x > -3 && x < 3 ? g / (T)6 : (T)0", "g * ((x > -3) & (x < 3)) / 6",
         "relu6(x + 3) / 6.", torch="nn.functional.hardsigmoid"),
    _row("hardswish", "Promote", "x", ("lv_hardswishf", "lv_hardswish"),
         "x <= -3 ? (T)0 : (x < 3 ? g * (x / 3 + (T)0.5) : g)",
         "g * where(x <= -3, 0.0, where(x < 3, x / 3 + 0.5, 1.0))",
         "x * relu6(x + 3) / 6.", torch="nn.functional.hardswish"),
    _row("gelu_tanh", "Promote", "x", ("lv_gelu_tanhf", "lv_gelu_tanh"),
         "g * lv_gelu_tanh_grad_g(x)",
         "g * (sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x)) * (1 + 2 * x * "
         "(1 - sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))) * "
         "0.7978845608028654 * (1 + 0.134145 * x * x)))",
         "GELU, tanh approximation (gelu(x, approximate='tanh')).", torch=""),
    _row("softsign", "Promote", "x", ("lv_softsignf", "lv_softsign"),
         "g / (((T)1 + FABS(x)) * ((T)1 + FABS(x)))", "g / ((1 + abs(x)) * (1 + abs(x)))",
         "x / (1 + |x|).", torch="nn.functional.softsign"),
    # -- special functions (src/lucid_special.h; float32 computed in double, rounded once) --
    _row("lgamma", "Promote", "x", ("lv_lgammaf", "lv_lgamma"), "g * lv_digamma_g(x)",
         "g * digamma(x)", "log |Gamma(x)|; inf at 0 and at the negative integers."),
    _row("digamma", "Promote", "x", ("lv_digammaf", "lv_digamma"), "g * lv_trigamma_g(x)",
         "g * polygamma(1, x)",
         "psi(x) = d/dx lgamma(x); -inf at +0, inf at -0, nan at the negative integers (as torch)."),
    _row("sinc", "Promote", "x", ("lv_sincf", "lv_sinc"), "g * lv_sinc_grad_g(x)",
         # at 0 the derivative is 0 and the second derivative -pi^2/3: the where branch
         # -pi^2/3 x has both, so graph-mode derivatives stay right at 0 too
         "g * where(x == 0, -3.289868133696453 * x, "
         "(cos(3.141592653589793 * x) - sinc(x)) / where(x == 0, 1.0, x))",
         "sin(pi x) / (pi x), 1 at 0."),
    _row("i0", "Promote", "x", ("lv_i0f", "lv_i0"), "g * lv_i1_g(x)", "g * i1(x)",
         "Modified Bessel function of the first kind, order 0 (inf at +-inf)."),
    _row("erfcx", "Promote", "x", ("lv_erfcxf", "lv_erfcx"), "g * lv_erfcx_grad_g(x)",
         "g * (2 * x * erfcx(x) - 1.1283791670955126)",
         "Scaled complementary error function exp(x^2) erfc(x), without overflow for large x.",
         torch="special.erfcx"),
    _row("log_ndtr", "Promote", "x", ("lv_log_ndtrf", "lv_log_ndtr"), "g * lv_log_ndtr_grad_g(x)",
         "g * where(x < 0, 0.7978845608028654 / erfcx(-0.7071067811865476 * x), "
         "exp(-0.5 * (x * x) - log_ndtr(x)) * 0.3989422804014327)",
         "log of the standard normal CDF, accurate far into the lower tail.",
         torch="special.log_ndtr"),
    _row("ndtri", "Promote", "y", ("lv_ndtrif", "lv_ndtri"),
         "g * (T)2.5066282746310002 * EXP((T)0.5 * (y * y))",
         "g * 2.5066282746310002 * exp(0.5 * (y * y))",
         "The inverse of the standard normal CDF; -inf at 0, inf at 1, nan outside [0, 1].",
         torch="special.ndtri"),
    # -- piecewise: kinks follow PyTorch (abs'(0) = 0, sign/round/... have zero gradient) --
    _row("abs", "Promote", "x", ("fabsf", "fabs"), "g * SIGN(x)", "g * sign(x)",
         "Absolute value; abs'(0) = 0.", ints=("np.abs(x)", None)),
    _row("sign", "Promote", "", ("lv_signf", "lv_sign"), "(T)0", "zeros_like(g)",
         "-1, 0 or 1 (0 for nan, as PyTorch); zero gradient.", ints=("np.sign(x)", "x.copy()")),
    _row("floor", "Promote", "", ("floorf", "floor"), "(T)0", "zeros_like(g)",
         "Round down; zero gradient.", ints=_INT_COPY),
    _row("ceil", "Promote", "", ("ceilf", "ceil"), "(T)0", "zeros_like(g)",
         "Round up; zero gradient.", ints=_INT_COPY),
    _row("round", "Promote", "", ("rintf", "rint"), "(T)0", "zeros_like(g)",
         "Round half to even, as PyTorch and NumPy; zero gradient.", ints=_INT_COPY),
    _row("trunc", "Promote", "", ("truncf", "trunc"), "(T)0", "zeros_like(g)",
         "Round toward zero; zero gradient.", ints=_INT_COPY),
]

# Rows whose forward maps to Accelerate's vForce on macOS: op name -> vForce stem
# (vv<stem>f for float32, vv<stem> for float64). Untested: no macOS machine here.
ACCELERATE = {
    "exp": "exp",
    "exp2": "exp2",
    "expm1": "expm1",
    "log": "log",
    "log2": "log2",
    "log10": "log10",
    "log1p": "log1p",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "reciprocal": "rec",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "asin": "asin",
    "acos": "acos",
    "atan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "asinh": "asinh",
    "acosh": "acosh",
    "atanh": "atanh",
    "abs": "fabs",
    "floor": "floor",
    "ceil": "ceil",
    "round": "nint",
    "trunc": "int",
}



# =====================================================================================
# BINARY: one row per element-wise op of two operands (tensors, or a tensor and a
# Python scalar), rendered by setup.py through ``_binary.pxi.tp`` into a schema, a node
# class ``<Name>Backward`` and the public function.
#
# Fields
#   name      public name: ``lucid.<name>``, ``Tensor.<name>()`` (if ``method``), schema name
#   amp       AMP policy
#   ufunc     the NumPy ufunc of the forward (all dtypes, or integers where ``c`` is set;
#             None: NumPy has none, and the row's floats and integers all run ``c``)
#   c         True: float32/float64 run lucid's kernels ``lucid_v<name>[f]`` and their
#             fused backward ``lucid_v<name>_grad[f]`` (src/lucid_binary.c)
#   grad_a    the gradient w.r.t. the first operand, in lucid ops of g, a, b, out and
#   grad_b    ``p`` (the op's parameter: add/sub's alpha); what the node saves follows
#             from the names these read
#   int_rule  "keep" (integers compute as integers) or "float" (as the default float)
#   exact_scalar  a Python scalar second operand is read at full precision: a float32
#             result is computed in float64 when float32 cannot hold the scalar
#   method    also a Tensor method
#   torch     the torch function name
#   doc       the docstring
# =====================================================================================

# The gpu kernels of the BINARY rows (``mlx``: an expression in a, b and the op's
# parameter p; default ``mx.<ufunc>(a, b)``).
MLX_BINARY = {
    "add": "mx.add(a, b) if p == 1 else a + b * p",
    "sub": "mx.subtract(a, b) if p == 1 else a - b * p",
    "div": "mx.divide(a, b)",
    "hypot": "mx.sqrt(a * a + b * b)",
    # C's fmod from Python's remainder: where the signs differ, step back by b.
    "fmod": "_fmod(_nonzero('fmod', a, b), b)",
    "remainder": "mx.remainder(_nonzero('remainder', a, b), b)",
    "xlogy": "_sf.xlogy(mx, a, b)",
}


def _bin(name, ufunc, grad_a, grad_b, doc, c=False, amp="Promote", int_rule="keep",
         method=True, torch=None, exact_scalar=False):
    return dict(name=name, amp=amp, ufunc=ufunc, c=c, grad_a=grad_a, grad_b=grad_b,
                int_rule=int_rule, method=method, torch=torch or name, doc=doc,
                exact_scalar=exact_scalar,
                mlx=MLX_BINARY.get(name, f"mx.{ufunc}(a, b)"))


BINARY = [
    _bin("add", "add", "g", "g if p == 1 else g * p", "input + alpha * other, with broadcasting."),
    _bin("sub", "subtract", "g", "-g if p == 1 else g * (-p)",
         "input - alpha * other, with broadcasting."),
    _bin("mul", "multiply", "g * b", "g * a", "input * other, with broadcasting."),
    _bin("div", "true_divide", "g / b", "-g * a / (b * b)",
         "True division input / other; integer inputs give float32.", int_rule="float"),
    _bin("pow", "power", "_pow_grad_a(g, a, b)", "_pow_grad_b(g, a, b, out)",
         "input ** exponent; either may be a tensor or a Python scalar (a Python exponent "
         "is used at its full precision: x ** 1e-50 is 0 at 0).", c=True,
         amp="ForceFP32", exact_scalar=True),
    _bin("maximum", "maximum", "where(a < b, 0.0, where(a == b, g * 0.5, g))",
         "where(a > b, 0.0, where(a == b, g * 0.5, g))",
         "Element-wise maximum (nan if either is nan); ties split the gradient evenly.", c=True),
    _bin("minimum", "minimum", "where(a > b, 0.0, where(a == b, g * 0.5, g))",
         "where(a < b, 0.0, where(a == b, g * 0.5, g))",
         "Element-wise minimum (nan if either is nan); ties split the gradient evenly.", c=True),
    _bin("atan2", "arctan2", "g * b / (a * a + b * b)", "-g * a / (a * a + b * b)",
         "Angle of the point (other, input): atan(input / other) in the right quadrant.",
         c=True, int_rule="float"),
    _bin("hypot", "hypot", "g * a / out", "g * b / out",
         "sqrt(input**2 + other**2) without overflow.", c=True, int_rule="float"),
    _bin("logaddexp", "logaddexp", "g * exp(a - out)", "g * exp(b - out)",
         "log(exp(input) + exp(other)), stable for large arguments.", c=True, int_rule="float"),
    _bin("xlogy", None, "where((a == 0) & (b <= 0), 0.0, xlogy(g, b))", "g * a / b",
         "input * log(other), 0 where input == 0 (unless other is nan), as torch.xlogy.",
         c=True, int_rule="float"),
    _bin("fmod", "fmod", "g", "-g * trunc(a / b)",
         "C fmod: the remainder has the sign of the dividend."),
    _bin("remainder", "remainder", "g", "-g * floor(a / b)",
         "Python's %: the remainder has the sign of the divisor."),
]


# =====================================================================================
# COMPARE: comparisons, logical ops and predicates: bool results, never differentiable.
# ``arity`` 2 takes (input, other) with PyTorch's promotion, 1 takes (input); ``c``: float32
# and float64 run lucid's kernel (src/lucid_compare.c), other dtypes the NumPy ufunc.
# =====================================================================================

def _cmp(name, ufunc, arity, doc, method=True, c=False):
    return dict(name=name, ufunc=ufunc, arity=arity, doc=doc, method=method, c=c,
                mlx=f"mx.{ufunc}(a, b)" if arity == 2 else f"mx.{ufunc}(x)")


COMPARE = [
    _cmp("eq", "equal", 2, "input == other, element-wise.", c=True),
    _cmp("ne", "not_equal", 2, "input != other, element-wise.", c=True),
    _cmp("lt", "less", 2, "input < other, element-wise.", c=True),
    _cmp("le", "less_equal", 2, "input <= other, element-wise.", c=True),
    _cmp("gt", "greater", 2, "input > other, element-wise.", c=True),
    _cmp("ge", "greater_equal", 2, "input >= other, element-wise.", c=True),
    _cmp("logical_and", "logical_and", 2, "input and other (nonzero is true), element-wise."),
    _cmp("logical_or", "logical_or", 2, "input or other (nonzero is true), element-wise."),
    _cmp("logical_xor", "logical_xor", 2, "input xor other (nonzero is true), element-wise."),
    _cmp("logical_not", "logical_not", 1, "not input (nonzero is true), element-wise."),
    _cmp("isnan", "isnan", 1, "True where input is nan."),
    _cmp("isinf", "isinf", 1, "True where input is +inf or -inf."),
    _cmp("isfinite", "isfinite", 1, "True where input is neither inf nor nan."),
]


# =====================================================================================
# REDUCTIONS: one row per reduction or row-wise op; reduce.pyx holds each one's forward
# and node class, the rows give the schema, the exports and the Tensor methods.
#
# Fields
#   name      public name and schema name
#   amp       AMP policy: ForceFP32 where a half result can overflow although the inputs
#             are finite (sum, prod, var, norm, cumulative sums and products, logsumexp) or
#             where PyTorch's autocast runs the op in float32 (softmax, log_softmax);
#             KeepInput where the result stays within the inputs' range (mean, std,
#             max, min, ...)
#   saves     what the node keeps: "x" (the input), "y" (the output), "xy", or ""
#   int_rule  integer inputs: "keep" (sum, prod, max, ... of integers are integers),
#             "float" (computed as float32) or "reject" (mean, var, std, norm)
#   method    also a Tensor method
#   grad      differentiable (False: indices or bools, no backward node)
#   torch     the torch function name (None: no counterpart)
# =====================================================================================

def _red(name, amp="KeepInput", saves="", int_rule="keep", method=True, grad=True, torch=None):
    return dict(name=name, amp=amp, saves=saves, int_rule=int_rule, method=method, grad=grad,
                torch=torch or name)


REDUCTIONS = [
    _red("sum", amp="ForceFP32"),
    _red("mean", int_rule="reject"),
    _red("prod", amp="ForceFP32", saves="xy"),
    _red("amax", saves="xy"),
    _red("amin", saves="xy"),
    _red("max", saves="xy"),
    _red("min", saves="xy"),
    _red("argmax", grad=False),
    _red("argmin", grad=False),
    _red("var", amp="ForceFP32", saves="x", int_rule="reject"),
    _red("std", saves="xy", int_rule="reject"),
    _red("logsumexp", amp="ForceFP32", saves="xy", int_rule="float"),
    _red("norm", amp="ForceFP32", saves="xy", int_rule="reject"),
    _red("cumsum", amp="ForceFP32"),
    _red("cumprod", amp="ForceFP32", saves="xy"),
    _red("softmax", amp="ForceFP32", saves="y", int_rule="float"),
    _red("log_softmax", amp="ForceFP32", saves="y", int_rule="float"),
    _red("all", grad=False),
    _red("any", grad=False),
]


# =====================================================================================
# COMPOSITE: public ops made of other ops. A call records its parts' nodes, so these
# schemas hold no node and no fixed arity; they make every public name reachable through
# lucid.ops.schema and state the op's AMP policy (what its parts do under autocast:
# arithmetic and contractions promote, selection and layout keep the input's dtype).
# Names of lucid.linalg's own functions take the prefix
# "linalg_" (the prefix of the linalg schemas with nodes of their own).
# =====================================================================================

_KEEP = ("zeros_like ones_like empty_like full_like diag diag_embed sort argsort topk "
         "kthvalue median quantile unique unique_consecutive nonzero argwhere masked_select "
         "masked_fill masked_fill_ cummax cummin take_along_dim repeat_interleave unflatten "
         "searchsorted bucketize meshgrid nanquantile")
_PROMOTE = ("clip equal allclose isclose concat inner ger kron tensordot einsum det logdet "
            "slogdet inverse pinverse matrix_power lerp floor_divide "
            "linalg_cross linalg_eigvalsh linalg_lstsq linalg_matrix_norm linalg_matrix_rank "
            "linalg_svdvals linalg_vecdot linalg_multi_dot linalg_matrix_power linalg_norm")

COMPOSITE = ([dict(name=n, amp="KeepInput") for n in _KEEP.split()] +
             [dict(name=n, amp="Promote") for n in _PROMOTE.split()] +
             [dict(name=n, amp="ForceFP32") for n in ("std_mean", "var_mean")])   # as var/std


# =====================================================================================
# MORE_BINARY: element-wise ops of two operands written outside the BINARY table (their
# schemas and nodes live with their families: compare.pyx for the bitwise ops, the
# Python modules for the rest). The rows state each op's AMP policy and torch
# counterpart, so the policy test and the fuzz test (against torch) cover them too.
# =====================================================================================

MORE_BINARY = (
    [dict(name=f"bitwise_{n}", amp="KeepInput", torch=f"bitwise_{n}")
     for n in ("and", "or", "xor", "left_shift", "right_shift")] +
    [dict(name="copysign", amp="Promote", torch="copysign"),
     dict(name="floor_divide", amp="Promote", torch="floor_divide")])
