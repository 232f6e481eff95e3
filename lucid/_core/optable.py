"""The unary op table: one row per element-wise op, the single source of truth.

The build (setup.py) renders this table twice with Tempita:
  * ``_unary.pxi.tp`` -> ``_unary.pxi``: for each row, the ``cdef extern``
    declarations of its kernels, its ``OpSchema``, its backward node
    ``<Name>Backward`` (a cdef class) and the public ``lucid.<name>`` function;
  * ``include/lucid_unary_list.h.tp`` -> ``include/lucid_unary_list.h``: the
    X-macro list the C layer expands into forward and fused backward kernels.
The tests and benchmarks read the same rows (reference, domain), so adding an
op is one row here, plus one line in ``src/lucid_vforce.c`` if its forward is
not a libm function.

Fields
  name      public name: ``lucid.<name>``, ``Tensor.<name>()``, schema name
  amp       AMP policy: "Promote", "KeepInput" or "ForceFP32"
  saves     what the backward node keeps: "x" (the input), "y" (the output), or
            "" (nothing: the gradient is zero, as for floor)
  c         (float32 function, float64 function) the forward kernel applies
            element-wise: libm names (vectorised through libmvec) or lucid's
            own inline functions (``lv_*`` in src/lucid_vforce.c)
  c_grad    the fused backward, a C expression in g, T and the saved x or y
            (EXP, LOG, SQRT, ... are type-generic; see lucid_vforce.c)
  grad      the graph-mode backward, the same formula written with lucid ops
            in g, x, y (so it is itself differentiable)
  ref       an independent reference: an expression in x over ``np`` and
            ``sp`` (scipy.special)
  mp        the same function as an mpmath expression in x
  domain    (lo, hi) where tests sample inputs (away from poles and kinks)
  torch     the torch function name, or None
  doc       one-line description for the docstring
  max_ulp   optional {dtype name: ULP bound} where a row is known to miss the
            4-ULP contract (a documented limitation, checked by the tests)
  py_name   optional name of the generated function when a hand-written wrapper
            with extra arguments owns the public name (gelu's approximate=)
"""

_SQRT_PI_2 = "0.886226925452758"      # sqrt(pi) / 2
_TWO_SQRT_PI = "1.1283791670955126"   # 2 / sqrt(pi)
_LN2 = "0.6931471805599453"
_LN10 = "2.302585092994046"
_INV_SQRT_2PI = "0.3989422804014327"  # 1 / sqrt(2 pi)
_INV_SQRT2 = "0.7071067811865476"


def _row(name, amp, saves, c, c_grad, grad, ref, mp, domain, doc, torch=None, max_ulp=None,
         py_name=None):
    return dict(name=name, amp=amp, saves=saves, c=c, c_grad=c_grad, grad=grad, ref=ref,
                mp=mp, domain=domain, doc=doc, torch=name if torch is None else (torch or None),
                max_ulp=max_ulp or {}, py_name=py_name)


UNARY = [
    # -- the seeds --------------------------------------------------------------
    _row("erf", "Promote", "x", ("erff", "erf"),
         f"g * (T){_TWO_SQRT_PI} * EXP(-(x * x))", f"g * {_TWO_SQRT_PI} * exp(-(x * x))",
         "sp.erf(x)", "erf(x)", (-5.0, 5.0),
         "Error function, erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt."),
    _row("exp", "ForceFP32", "y", ("expf", "exp"), "g * y", "g * y",
         "np.exp(x)", "exp(x)", (-20.0, 20.0),
         "Exponential, e**x. Saves its output: d/dx e**x = e**x."),
    _row("log2", "ForceFP32", "x", ("log2f", "log2"),
         f"g / (x * (T){_LN2})", f"g / (x * {_LN2})",
         "np.log2(x)", "log(x, 2)", (0.01, 100.0), "Base-2 logarithm."),
    # -- exponentials and logarithms ------------------------------------------------
    _row("exp2", "ForceFP32", "y", ("exp2f", "exp2"), f"g * y * (T){_LN2}", f"g * y * {_LN2}",
         "np.exp2(x)", "power(2, x)", (-20.0, 20.0), "2**x."),
    _row("expm1", "ForceFP32", "y", ("expm1f", "expm1"), "g * (y + (T)1)", "g * (y + 1)",
         "np.expm1(x)", "expm1(x)", (-5.0, 5.0), "e**x - 1, accurate near 0."),
    _row("log", "ForceFP32", "x", ("logf", "log"), "g / x", "g / x",
         "np.log(x)", "log(x)", (0.01, 100.0), "Natural logarithm."),
    _row("log10", "ForceFP32", "x", ("log10f", "log10"),
         f"g / (x * (T){_LN10})", f"g / (x * {_LN10})",
         "np.log10(x)", "log10(x)", (0.01, 100.0), "Base-10 logarithm."),
    _row("log1p", "ForceFP32", "x", ("log1pf", "log1p"), "g / (x + (T)1)", "g / (x + 1)",
         "np.log1p(x)", "log1p(x)", (-0.9, 10.0), "log(1 + x), accurate near 0."),
    # -- powers and roots ------------------------------------------------------------
    _row("sqrt", "Promote", "y", ("sqrtf", "sqrt"), "g / (y * (T)2)", "g / (y * 2)",
         "np.sqrt(x)", "sqrt(x)", (0.01, 100.0), "Square root; sqrt'(0) = inf."),
    _row("rsqrt", "ForceFP32", "y", ("lv_rsqrtf", "lv_rsqrt"), "g * (T)-0.5 * y * y * y",
         "g * -0.5 * y * y * y", "1 / np.sqrt(x)", "1 / sqrt(x)", (0.01, 100.0),
         "1 / sqrt(x)."),
    _row("reciprocal", "ForceFP32", "y", ("lv_reciprocalf", "lv_reciprocal"), "-(g * y * y)",
         "-(g * y * y)", "1 / x", "1 / x", (0.1, 10.0), "1 / x."),
    _row("cbrt", "Promote", "y", ("cbrtf", "cbrt"), "g / (y * y * (T)3)", "g / (y * y * 3)",
         "np.cbrt(x)", "cbrt(x)", (0.1, 100.0), "Cube root.", torch=""),
    _row("square", "Promote", "x", ("lv_squaref", "lv_square"), "g * x * (T)2", "g * x * 2",
         "x * x", "x * x", (-10.0, 10.0), "x * x."),
    # -- trigonometric ----------------------------------------------------------------
    _row("sin", "Promote", "x", ("sinf", "sin"), "g * COS(x)", "g * cos(x)",
         "np.sin(x)", "sin(x)", (-6.0, 6.0), "Sine."),
    _row("cos", "Promote", "x", ("cosf", "cos"), "-(g * SIN(x))", "-(g * sin(x))",
         "np.cos(x)", "cos(x)", (-6.0, 6.0), "Cosine."),
    _row("tan", "ForceFP32", "y", ("tanf", "tan"), "g * ((T)1 + y * y)", "g * (1 + y * y)",
         "np.tan(x)", "tan(x)", (-1.4, 1.4), "Tangent."),
    _row("asin", "ForceFP32", "x", ("asinf", "asin"), "g / SQRT((T)1 - x * x)",
         "g / sqrt(1 - x * x)", "np.arcsin(x)", "asin(x)", (-0.95, 0.95), "Inverse sine."),
    _row("acos", "ForceFP32", "x", ("acosf", "acos"), "-(g / SQRT((T)1 - x * x))",
         "-(g / sqrt(1 - x * x))", "np.arccos(x)", "acos(x)", (-0.95, 0.95), "Inverse cosine."),
    _row("atan", "Promote", "x", ("atanf", "atan"), "g / ((T)1 + x * x)", "g / (1 + x * x)",
         "np.arctan(x)", "atan(x)", (-10.0, 10.0), "Inverse tangent."),
    # -- hyperbolic ---------------------------------------------------------------------
    _row("sinh", "ForceFP32", "x", ("sinhf", "sinh"), "g * COSH(x)", "g * cosh(x)",
         "np.sinh(x)", "sinh(x)", (-10.0, 10.0), "Hyperbolic sine."),
    _row("cosh", "ForceFP32", "x", ("coshf", "cosh"), "g * SINH(x)", "g * sinh(x)",
         "np.cosh(x)", "cosh(x)", (-10.0, 10.0), "Hyperbolic cosine."),
    _row("tanh", "Promote", "y", ("tanhf", "tanh"), "g * ((T)1 - y * y)", "g * (1 - y * y)",
         "np.tanh(x)", "tanh(x)", (-5.0, 5.0), "Hyperbolic tangent."),
    _row("asinh", "Promote", "x", ("asinhf", "asinh"), "g / SQRT(x * x + (T)1)",
         "g / sqrt(x * x + 1)", "np.arcsinh(x)", "asinh(x)", (-10.0, 10.0),
         "Inverse hyperbolic sine."),
    _row("acosh", "Promote", "x", ("acoshf", "acosh"), "g / SQRT((x - (T)1) * (x + (T)1))",
         "g / sqrt((x - 1) * (x + 1))", "np.arccosh(x)", "acosh(x)", (1.1, 10.0),
         "Inverse hyperbolic cosine."),
    _row("atanh", "Promote", "x", ("atanhf", "atanh"), "g / ((T)1 - x * x)",
         "g / (1 - x * x)", "np.arctanh(x)", "atanh(x)", (-0.95, 0.95),
         "Inverse hyperbolic tangent."),
    # -- error function family -------------------------------------------------------
    _row("erfc", "ForceFP32", "x", ("erfcf", "erfc"),
         f"-(g * (T){_TWO_SQRT_PI} * EXP(-(x * x)))", f"-(g * {_TWO_SQRT_PI} * exp(-(x * x)))",
         "sp.erfc(x)", "erfc(x)", (-5.0, 9.0), "Complementary error function, 1 - erf(x)."),
    _row("erfinv", "ForceFP32", "y", ("lv_erfinvf", "lv_erfinv"),
         f"g * (T){_SQRT_PI_2} * EXP(y * y)", f"g * {_SQRT_PI_2} * exp(y * y)",
         "sp.erfinv(x)", "erfinv(x)", (-0.99, 0.99), "Inverse error function."),
    # -- activations -------------------------------------------------------------------
    _row("sigmoid", "ForceFP32", "y", ("lv_sigmoidf", "lv_sigmoid"), "g * y * ((T)1 - y)",
         "g * y * (1 - y)", "sp.expit(x)", "1 / (1 + exp(-x))", (-20.0, 20.0),
         "Logistic sigmoid 1 / (1 + e**-x), stable for large |x|."),
    _row("softplus", "ForceFP32", "x", ("lv_softplusf", "lv_softplus"), "g * lv_sigmoid_g(x)",
         "g * sigmoid(x)", "np.logaddexp(0, x)", "log1p(exp(x))", (-20.0, 20.0),
         "log(1 + e**x), stable for large |x| (beta = 1, no threshold).",
         torch="nn.functional.softplus"),
    _row("gelu", "Promote", "x", ("lv_geluf", "lv_gelu"),
         f"g * ((T)0.5 * ERFC(-x * (T){_INV_SQRT2}) + x * (T){_INV_SQRT_2PI} * EXP((T)-0.5 * x * x))",
         f"g * (0.5 * erfc(-(x * {_INV_SQRT2})) + x * {_INV_SQRT_2PI} * exp(-0.5 * (x * x)))",
         f"0.5 * x * sp.erfc(-x * {_INV_SQRT2})", "x / 2 * erfc(-x / sqrt(2))", (-8.0, 8.0),
         "Exact GELU, x * Phi(x) = x/2 * erfc(-x/sqrt(2)).", torch="nn.functional.gelu",
         py_name="_gelu_exact"),
    _row("silu", "Promote", "x", ("lv_siluf", "lv_silu"),
         "g * lv_sigmoid_g(x) * ((T)1 + x * ((T)1 - lv_sigmoid_g(x)))",
         "g * sigmoid(x) * (1 + x * (1 - sigmoid(x)))", "x * sp.expit(x)", "x / (1 + exp(-x))",
         (-20.0, 20.0), "SiLU (swish), x * sigmoid(x).", torch="nn.functional.silu"),
    _row("relu", "Promote", "y", ("lv_reluf", "lv_relu"), "y > 0 ? g : (T)0", "g * (y > 0)",
         "np.where(x < 0, 0.0, x)", "max(x, 0)", (-5.0, 5.0),
         "max(x, 0); relu'(0) = 0; relu(-0) = -0 and nan stays nan, as PyTorch."),
    _row("relu6", "Promote", "x", ("lv_relu6f", "lv_relu6"), "x > 0 && x < 6 ? g : (T)0",
         "g * ((x > 0) & (x < 6))", "np.clip(x, 0, 6)", "min(max(x, 0), 6)", (-3.0, 9.0),
         "min(max(x, 0), 6).", torch="nn.functional.relu6"),
    _row("selu", "Promote", "x", ("lv_seluf", "lv_selu"),
         "g * (x > 0 ? (T)1.0507009873554805 : (T)1.7580993408473766 * EXP(x))",
         "g * where(x > 0, 1.0507009873554805, 1.7580993408473766 * exp(x))",
         "1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))",
         "1.0507009873554805 * (x if x > 0 else 1.6732632423543772 * expm1(x))", (-5.0, 5.0),
         "Scaled ELU with the self-normalising constants.", torch="nn.functional.selu"),
    _row("mish", "Promote", "x", ("lv_mishf", "lv_mish"), "g * lv_mish_grad_g(x)",
         "g * (tanh(softplus(x)) + x * sigmoid(x) * (1 - tanh(softplus(x)) * tanh(softplus(x))))",
         "x * np.tanh(np.logaddexp(0, x))", "x * tanh(log1p(exp(x)))", (-10.0, 10.0),
         "x * tanh(softplus(x)).", torch="nn.functional.mish"),
    _row("hardsigmoid", "Promote", "x", ("lv_hardsigmoidf", "lv_hardsigmoid"),
         "x > -3 && x < 3 ? g / (T)6 : (T)0", "g * ((x > -3) & (x < 3)) / 6",
         "np.clip((x + 3) / 6, 0, 1)", "min(max(x / 6 + 0.5, 0), 1)", (-5.0, 5.0),
         "relu6(x + 3) / 6.", torch="nn.functional.hardsigmoid"),
    _row("hardswish", "Promote", "x", ("lv_hardswishf", "lv_hardswish"),
         "x < -3 ? (T)0 : (x <= 3 ? g * (x / 3 + (T)0.5) : g)",
         "g * where(x < -3, 0.0, where(x <= 3, x / 3 + 0.5, 1.0))",
         "np.where(x <= -3, -0.0, np.where(x >= 3, x, x * (x + 3) / 6))",
         "x * min(max(x + 3, 0), 6) / 6", (-5.0, 5.0),
         "x * relu6(x + 3) / 6.", torch="nn.functional.hardswish"),
    _row("gelu_tanh", "Promote", "x", ("lv_gelu_tanhf", "lv_gelu_tanh"),
         "g * lv_gelu_tanh_grad_g(x)",
         "g * (sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x)) * (1 + 2 * x * "
         "(1 - sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))) * "
         "0.7978845608028654 * (1 + 0.134145 * x * x)))",
         "x * sp.expit(1.5957691216057308 * (x + 0.044715 * x ** 3))",
         "x / (1 + exp(-2 * sqrt(2 / pi) * (x + 0.044715 * x ** 3)))", (-8.0, 8.0),
         "GELU, tanh approximation (gelu(x, approximate='tanh')).", torch="",
         # the cubic's rounding is amplified by |2u| in the far negative tail
         max_ulp={"float64": 128}),
    # -- piecewise: kinks follow PyTorch (abs'(0) = 0, sign/round/... have zero gradient) --
    _row("abs", "Promote", "x", ("fabsf", "fabs"), "g * SIGN(x)", "g * sign(x)",
         "np.abs(x)", "fabs(x)", (-10.0, 10.0), "Absolute value; abs'(0) = 0."),
    _row("sign", "Promote", "", ("lv_signf", "lv_sign"), "(T)0", "zeros_like(g)",
         "np.sign(np.nan_to_num(x))", "sign(x)", (-10.0, 10.0),
         "-1, 0 or 1 (0 for nan, as PyTorch); zero gradient."),
    _row("floor", "Promote", "", ("floorf", "floor"), "(T)0", "zeros_like(g)",
         "np.floor(x)", "floor(x)", (-10.0, 10.0), "Round down; zero gradient."),
    _row("ceil", "Promote", "", ("ceilf", "ceil"), "(T)0", "zeros_like(g)",
         "np.ceil(x)", "ceil(x)", (-10.0, 10.0), "Round up; zero gradient."),
    _row("round", "Promote", "", ("rintf", "rint"), "(T)0", "zeros_like(g)",
         "np.round(x)", "nint(x)", (-10.0, 10.0),
         "Round half to even, as PyTorch and NumPy; zero gradient."),
    _row("trunc", "Promote", "", ("truncf", "trunc"), "(T)0", "zeros_like(g)",
         "np.trunc(x)", "floor(x) if x >= 0 else ceil(x)", (-10.0, 10.0),
         "Round toward zero; zero gradient."),
]
