"""What the tests, benchmarks and accuracy tools know about lucid's ops and the package
does not need: references, mpmath oracles, sampling domains, known ULP limits
(``UNARY_DATA``, keyed by the names of ``lucid._core.optable.UNARY``), and the test
cases of every other op (``OPS``).

``unary_rows()`` joins each UNARY row of the package with its data here, so the
parametrised suites, the benchmarks and tools/accuracy.py read one row per op. A row
of UNARY without data here fails tests/test_optable.py::test_every_row_has_test_data.
"""
import importlib.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_INV_SQRT2 = "0.7071067811865476"


def _data(ref, mp, domain, max_ulp=None):
    """ref: an independent reference, an expression in x over ``np`` and ``sp``
    (scipy.special); mp: the same as an mpmath expression in x; domain: (lo, hi)
    where tests sample inputs (away from poles and kinks); max_ulp: optional
    {dtype name: ULP bound} where a row is known to miss the 4-ULP contract (a
    documented limitation, checked by the tests)."""
    return dict(ref=ref, mp=mp, domain=domain, max_ulp=max_ulp or {})


UNARY_DATA = {
    "erf": _data("sp.erf(x)", "erf(x)", (-5.0, 5.0)),
    "exp": _data("np.exp(x)", "exp(x)", (-20.0, 20.0)),
    "log2": _data("np.log2(x)", "log(x, 2)", (0.01, 100.0)),
    "exp2": _data("np.exp2(x)", "power(2, x)", (-20.0, 20.0)),
    "expm1": _data("np.expm1(x)", "expm1(x)", (-5.0, 5.0)),
    "log": _data("np.log(x)", "log(x)", (0.01, 100.0)),
    "log10": _data("np.log10(x)", "log10(x)", (0.01, 100.0)),
    "log1p": _data("np.log1p(x)", "log1p(x)", (-0.9, 10.0)),
    "sqrt": _data("np.sqrt(x)", "sqrt(x)", (0.01, 100.0)),
    "rsqrt": _data("1 / np.sqrt(x)", "1 / sqrt(x)", (0.01, 100.0)),
    "reciprocal": _data("1 / x", "1 / x", (0.1, 10.0)),
    "cbrt": _data("np.cbrt(x)", "cbrt(x)", (0.1, 100.0)),
    "square": _data("x * x", "x * x", (-10.0, 10.0)),
    "sin": _data("np.sin(x)", "sin(x)", (-6.0, 6.0)),
    "cos": _data("np.cos(x)", "cos(x)", (-6.0, 6.0)),
    "tan": _data("np.tan(x)", "tan(x)", (-1.4, 1.4)),
    "asin": _data("np.arcsin(x)", "asin(x)", (-0.95, 0.95)),
    "acos": _data("np.arccos(x)", "acos(x)", (-0.95, 0.95)),
    "atan": _data("np.arctan(x)", "atan(x)", (-10.0, 10.0)),
    "sinh": _data("np.sinh(x)", "sinh(x)", (-10.0, 10.0)),
    "cosh": _data("np.cosh(x)", "cosh(x)", (-10.0, 10.0)),
    "tanh": _data("np.tanh(x)", "tanh(x)", (-5.0, 5.0)),
    "asinh": _data("np.arcsinh(x)", "asinh(x)", (-10.0, 10.0)),
    "acosh": _data("np.arccosh(x)", "acosh(x)", (1.1, 10.0)),
    "atanh": _data("np.arctanh(x)", "atanh(x)", (-0.95, 0.95)),
    "erfc": _data("sp.erfc(x)", "erfc(x)", (-5.0, 9.0)),
    "erfinv": _data("sp.erfinv(x)", "erfinv(x)", (-0.99, 0.99)),
    "sigmoid": _data("sp.expit(x)", "1 / (1 + exp(-x))", (-20.0, 20.0)),
    "softplus": _data("np.logaddexp(0, x)", "log1p(exp(x))", (-20.0, 20.0)),
    "logsigmoid": _data("-np.logaddexp(0, -x)", "-log1p(exp(-x))", (-20.0, 20.0)),
    "logit": _data("sp.logit(x)", "log(x / (1 - x))", (0.01, 0.99)),
    "gelu": _data(f"0.5 * x * sp.erfc(-x * {_INV_SQRT2})", "x / 2 * erfc(-x / sqrt(2))", (-8.0, 8.0)),
    "silu": _data("x * sp.expit(x)", "x / (1 + exp(-x))", (-20.0, 20.0)),
    "relu": _data("np.where(x < 0, 0.0, x)", "max(x, 0)", (-5.0, 5.0)),
    "relu6": _data("np.clip(x, 0, 6)", "min(max(x, 0), 6)", (-3.0, 9.0)),
    "selu": _data("1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))", "1.0507009873554805 * (x if x > 0 else 1.6732632423543772 * expm1(x))", (-5.0, 5.0)),
    "mish": _data("x * np.tanh(np.logaddexp(0, x))", "x * tanh(log1p(exp(x)))", (-10.0, 10.0)),
    "hardsigmoid": _data("np.clip((x + 3) / 6, 0, 1)", "min(max(x / 6 + 0.5, 0), 1)", (-5.0, 5.0)),
    "hardswish": _data("np.where(x <= -3, -0.0, np.where(x >= 3, x, x * (x + 3) / 6))", "x * min(max(x + 3, 0), 6) / 6", (-5.0, 5.0)),
    "gelu_tanh": _data("x * sp.expit(1.5957691216057308 * (x + 0.044715 * x ** 3))", "x / (1 + exp(-2 * sqrt(2 / pi) * (x + 0.044715 * x ** 3)))", (-8.0, 8.0)),
    "softsign": _data("x / (1 + np.abs(x))", "x / (1 + fabs(x))", (-10.0, 10.0)),
    # torch's convention at -inf (scipy's gammaln gives -inf there); -log|x| for |x| < 1e-300,
    # exact to double there (scipy's gammaln overflows to inf at the subnormals)
    "lgamma": _data("np.where(x == -np.inf, np.inf, np.where(np.abs(x) < 1e-300, "
                    "-np.log(np.abs(x)), sp.gammaln(x)))", "log(fabs(gamma(x)))", (0.1, 10.0)),
    "digamma": _data("sp.psi(x)", "digamma(x)", (0.1, 10.0)),
    # exact zeros at the nonzero integers (np.sinc rounds pi x there)
    "sinc": _data("np.where(np.isfinite(x) & (x == np.round(x)) & (x != 0), 0.0, np.sinc(x))",
                  "sincpi(x)", (-5.0, 5.0)),
    "i0": _data("sp.i0(x)", "besseli(0, x)", (-10.0, 10.0)),
    # erfcx(-3) = 1.6e4: the float16 tests under autocast hold it (erfcx(-5) overflows)
    "erfcx": _data("sp.erfcx(x)", "exp(x * x) * erfc(x)", (-3.0, 10.0)),
    # for x > 0, 1 - ncdf(-x) would need more bits than the oracle's working precision
    "log_ndtr": _data("sp.log_ndtr(x)", "log(ncdf(x)) if x < 0 else log1p(-ncdf(-x))",
                      (-20.0, 5.0)),
    # below 1e-10, 2 x - 1 would round to -1 at the oracle's precision (x < 1e-39 at 128
    # bits): there the root of log(ncdf(y)) = log(x)
    "ndtri": _data("sp.ndtri(x)", "findroot(lambda y: log(ncdf(y)) - log(x), -sqrt(-2 * log(x))) "
                   "if 0 < x < 1e-10 else sqrt(2) * erfinv(2 * x - 1)", (0.01, 0.99)),
    "abs": _data("np.abs(x)", "fabs(x)", (-10.0, 10.0)),
    "sign": _data("np.sign(np.nan_to_num(x))", "sign(x)", (-10.0, 10.0)),
    "floor": _data("np.floor(x)", "floor(x)", (-10.0, 10.0)),
    "ceil": _data("np.ceil(x)", "ceil(x)", (-10.0, 10.0)),
    "round": _data("np.round(x)", "nint(x)", (-10.0, 10.0)),
    "trunc": _data("np.trunc(x)", "floor(x) if x >= 0 else ceil(x)", (-10.0, 10.0)),
}


def _package_table():
    """lucid/_core/optable.py: from the installed package, or straight from the source
    tree when lucid is not built (the benchmarks still collect and the peers still run)."""
    try:
        from lucid._core import optable
        return optable
    except ImportError:
        path = os.path.join(_HERE, os.pardir, "lucid", "_core", "optable.py")
        spec = importlib.util.spec_from_file_location("_lucid_optable", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


def unary_rows():
    """Every UNARY row of the package joined with its test data (rows without data are
    left out here; a test reports them)."""
    return [dict(row, **UNARY_DATA[row["name"]]) for row in _package_table().UNARY
            if row["name"] in UNARY_DATA]


# =====================================================================================
# OPS: the test cases of every other public op (binary, comparison, parametrised
# element-wise, reductions, shape/indexing, linear algebra), run by tests/test_ops_table.py.
#
# Row fields
#   name        unique row id (``op`` defaults to it)
#   op          the lucid op the row exercises: its schema name (``lucid.ops.schema(op)``)
#   call        expression evaluated with ``lucid``, ``np`` and the inputs/args in scope
#   ref         the same as a NumPy/SciPy expression (``np``, ``sp``, ``math`` and the
#               helpers in REF_HELPERS in scope) over float64 copies of the inputs
#   torch       the same as a torch expression; default: ``call`` with lucid. -> torch.;
#               None: no torch counterpart
#   inputs      [(name, shape, kind)] with kind (lo, hi) uniform floats, "int:lo:hi"
#               int64 in [lo, hi), "intf:lo:hi" integer-valued floats (for ties),
#               "bool", "perm" (int64 permutation of range(numel)), "nanmix" (floats
#               with nan/+inf/-inf mixed in), or a literal list (fixed values, shape None)
#   args        extra names in scope of call/ref/torch (python values: dim, keepdim, ...)
#   grad        differentiable (gradcheck/gradgradcheck, torch autograd, node checks)
#   grad_inputs which inputs are differentiable (default: every float input)
#   distinct    sample the float inputs with no two values within 1e-4 (ties make max,
#               sort-like ops and maximum non-differentiable)
#   ref_in_dtype evaluate ``ref`` on the inputs in their own dtype, not float64 (the
#               result depends on the dtype: nan_to_num's default posinf is its max)
#   rtol        optional {dtype name: rtol} replacing the suite's default
#   avoid       points (kinks) float inputs keep >= 0.05 away from
#   node        backward node class name if not CamelCase(op) + "Backward"
#               (None: the op returns its input or records no node)
#   variants    [dict(id=..., <any row field overridden>)]; the row itself is the
#               variant "base"
#   limits      {test kind: reason} known limitations (strict xfails in the suite);
#               kinds: forward, torch, gradcheck, gradgrad, torch_grad, noncontig,
#               node, promote
# =====================================================================================

# Reference helpers (NumPy/SciPy imported on call: this module stays import-free).
def _np_scatter_add(a, dim, index, src):
    import numpy as np
    out = np.array(a, copy=True)
    idx = list(np.indices(index.shape))
    idx[dim] = index
    np.add.at(out, tuple(idx), src[tuple(slice(0, n) for n in index.shape)])
    return out


def _np_vnorm(a, p, dim=None, keepdim=False):
    import numpy as np
    if p == float("inf"):
        return np.max(np.abs(a), axis=dim, keepdims=keepdim)
    return np.sum(np.abs(a) ** p, axis=dim, keepdims=keepdim) ** (1.0 / p)


def _np_logsumexp(a, dim, keepdim=False):
    import scipy.special
    return scipy.special.logsumexp(a, axis=dim, keepdims=keepdim)


def _np_softmax(a, dim):
    import numpy as np
    e = np.exp(a - np.max(a, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def _np_gelu_tanh(a):
    import numpy as np
    return 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))


REF_HELPERS = dict(scatter_add=_np_scatter_add, vnorm=_np_vnorm, logsumexp=_np_logsumexp,
                   softmax=_np_softmax, gelu_tanh=_np_gelu_tanh)

_F = (-2.0, 2.0)
_POS = (0.5, 2.0)


def _op(name, call, ref, inputs, torch=Ellipsis, **kw):
    row = dict(name=name, op=kw.pop("op", name), call=call, ref=ref,
               torch=call.replace("lucid.", "torch.") if torch is Ellipsis else torch,
               inputs=inputs)
    row.update(kw)
    return row


def _same(expr, ref=None):
    """call, ref and torch are the same expression (operators, methods, indexing)."""
    return dict(call=expr, ref=expr if ref is None else ref, torch=expr)


def _v(id, *inputs, **kw):
    """A variant overriding ``inputs`` (when given) and any other row field."""
    if inputs:
        kw["inputs"] = list(inputs)
    return dict(id=id, **kw)


def _binary(name, np_name, lo=_F, blo=None, torch_name=None, **kw):
    blo = lo if blo is None else blo
    t = "torch.%s(a, b)" % (torch_name or name)
    variants = [
        _v("bcast_row", ("a", (3, 4), lo), ("b", (4,), blo)),
        _v("bcast_both", ("a", (2, 1, 3), lo), ("b", (4, 1), blo)),
        _v("0d_b", ("a", (3,), lo), ("b", (), blo)),
        _v("0d", ("a", (), lo), ("b", (), blo)),
        _v("empty", ("a", (0, 3), lo), ("b", (3,), blo)),
    ] + kw.pop("variants", [])
    return _op(name, "lucid.%s(a, b)" % name, "np.%s(a, b)" % np_name,
               [("a", (3, 4), lo), ("b", (3, 4), blo)], torch=t, grad=True,
               variants=variants, **kw)


def _compare(name, np_name):
    return _op(name, "lucid.%s(a, b)" % name, "np.%s(a, b)" % np_name,
               [("a", (3, 4), "intf:-2:3"), ("b", (4,), "intf:-2:3")], grad=False,
               variants=[_v("scalar", ("a", (3, 4), "intf:-2:3"),
                            call="lucid.%s(a, 1.0)" % name, ref="np.%s(a, 1.0)" % np_name,
                            torch="torch.%s(a, 1.0)" % name),
                         _v("0d", ("a", (), "intf:-2:3"), ("b", (2,), "intf:-2:3")),
                         _v("empty", ("a", (0, 4), "intf:-2:3"), ("b", (4,), "intf:-2:3"))])


def _logical(name):
    return _op(name, "lucid.%s(a, b)" % name, "np.%s(a, b)" % name,
               [("a", (3, 4), "bool"), ("b", (4,), "bool")], grad=False,
               variants=[_v("float", ("a", (3, 4), "intf:-1:2"), ("b", (3, 4), "intf:-1:2")),
                         _v("0d", ("a", (), "bool"), ("b", (3,), "bool"))])


# ``gpu``: why a row or variant cannot run on the gpu device (it raises LucidError there).

_RED = (2, 3, 4)
_NO_GG_ZEROS = {"gradgrad": "graph-mode (create_graph=True) backward of prod/cumprod raises "
                            "LucidError when the input contains zeros"}


def _reduction(name, call, ref, torch=Ellipsis, tuple_dims=True, full=True, empty=True,
               kind=_F, extra=(), ref0d="a", zero_d=None, **kw):
    """Rows for ``f(a, dim=dim, keepdim=keepdim)``: full, int dim, negative dim, tuple dims,
    keepdim both ways, 0-d input and (where PyTorch allows) empty input.  ``ref0d`` is the
    reference on a 0-d input (NumPy has no axis 0 there); ``zero_d`` overrides fields of
    the 0-d variant."""
    variants = [_v("dim1", args=dict(dim=1, keepdim=False)),
                _v("dim-1_keep", args=dict(dim=-1, keepdim=True)),
                _v("0d", ("a", (), kind), args=dict(dim=0, keepdim=False), ref=ref0d,
                   **(zero_d or {}))]
    if full:
        variants.insert(0, _v("full_keep", args=dict(dim=None, keepdim=True)))
    if tuple_dims:
        variants += [_v("dims02", args=dict(dim=(0, 2), keepdim=False)),
                     _v("dims-1_0_keep", args=dict(dim=(-1, 0), keepdim=True))]
    if empty:
        variants.append(_v("empty", ("a", (2, 0, 3), kind), args=dict(dim=1, keepdim=False)))
    variants += list(extra)
    base_args = dict(dim=None, keepdim=False) if full else dict(dim=1, keepdim=False)
    base_args.update(kw.pop("args", {}))
    return _op(name, call, ref, [("a", _RED, kind)], torch=torch, grad=kw.pop("grad", True),
               args=base_args, variants=variants, **kw)


def _shape(name, expr_or_call, ref=None, shape=(3, 4), torch=Ellipsis, **kw):
    if ref is None:
        d = _same(expr_or_call)
    else:
        d = dict(call=expr_or_call, ref=ref,
                 torch=expr_or_call.replace("lucid.", "torch.") if torch is Ellipsis else torch)
    inputs = kw.pop("inputs", [("a", shape, _F)])
    return dict(name=name, op=kw.pop("op", name), inputs=inputs, grad=kw.pop("grad", True),
                **d, **kw)


OPS = [
    # -- arithmetic -------------------------------------------------------------------
    _binary("add", "add"),
    _op("add_alpha", "lucid.add(a, b, alpha=alpha)", "a + alpha * b",
        [("a", (3, 4), _F), ("b", (4,), _F)], op="add", grad=True, args=dict(alpha=2.5)),
    _binary("sub", "subtract"),
    _op("sub_alpha", "lucid.sub(a, b, alpha=alpha)", "a - alpha * b",
        [("a", (3, 4), _F), ("b", (4,), _F)], op="sub", grad=True, args=dict(alpha=-0.5)),
    _binary("mul", "multiply"),
    _binary("div", "divide", blo=_POS,
            variants=[_v("neg_divisor", ("a", (3, 4), _F), ("b", (3, 4), (-2.0, -0.5)))]),
    _op("pow_scalar", "lucid.pow(a, p)", "np.power(a, p)",
        [("a", (3, 4), _F)], op="pow", grad=True, args=dict(p=3),
        variants=[_v("p2.5", ("a", (3, 4), _POS), args=dict(p=2.5)),
                  _v("p-1.5", ("a", (3, 4), _POS), args=dict(p=-1.5)),
                  _v("p0.5_0d", ("a", (), _POS), args=dict(p=0.5)),
                  _v("p2_empty", ("a", (0, 2), _F), args=dict(p=2)),
                  _v("p2.0_neg_base", ("a", (3, 4), (-2.0, -0.5)), args=dict(p=2.0)),
                  _v("p0", args=dict(p=0)),
                  _v("operator", ("a", (3, 4), _F), args=dict(p=2),
                     **_same("a ** p"))]),
    _op("pow_tensor", "lucid.pow(a, b)", "np.power(a, b)",
        [("a", (3, 4), (0.5, 2.0)), ("b", (4,), _F)], op="pow", grad=True,
        variants=[_v("0d_exp", ("a", (3, 4), _POS), ("b", (), _F)),
                  _v("operator", ("a", (2, 3), _POS), ("b", (2, 3), _F), **_same("a ** b"))]),
    _op("pow_rscalar", "2.5 ** a", "np.power(2.5, a)", [("a", (3, 4), _F)], op="pow",
        torch="2.5 ** a", grad=True,
        variants=[_v("fn", call="lucid.pow(2.5, a)", torch="torch.pow(2.5, a)"),
                  _v("0d", ("a", (), _F))]),
    _op("neg", "lucid.neg(a)", "-a", [("a", (3, 4), _F)], grad=True,
        variants=[_v("operator", **_same("-a")), _v("0d", ("a", (), _F)),
                  _v("empty", ("a", (0,), _F))]),
    # -- binary element-wise with kinks -------------------------------------------------
    _binary("maximum", "maximum", distinct=True),
    _binary("minimum", "minimum", distinct=True),
    _binary("atan2", "arctan2", avoid=[0.0]),
    _binary("hypot", "hypot", avoid=[0.0]),
    _binary("logaddexp", "logaddexp", lo=(-5.0, 5.0)),
    _binary("fmod", "fmod", lo=(-3.0, 3.0), blo=_POS,
            variants=[_v("neg_divisor", ("a", (3, 4), (-3.0, 3.0)), ("b", (4,), (-2.0, -0.5))),
                      _v("scalar", ("a", (3, 4), (-3.0, 3.0)), call="lucid.fmod(a, 0.75)",
                         ref="np.fmod(a, 0.75)", torch="torch.fmod(a, 0.75)")]),
    _binary("remainder", "mod", lo=(-3.0, 3.0), blo=_POS,
            variants=[_v("neg_divisor", ("a", (3, 4), (-3.0, 3.0)), ("b", (4,), (-2.0, -0.5))),
                      _v("operator", ("a", (3, 4), (-3.0, 3.0)), ("b", (4,), _POS),
                         **_same("a % b"))]),
    _op("where", "lucid.where(c, a, b)", "np.where(c, a, b)",
        [("c", (3, 4), "bool"), ("a", (3, 4), _F), ("b", (4,), _F)], grad=True,
        variants=[_v("bcast_cond", ("c", (4,), "bool"), ("a", (3, 1), _F), ("b", (3, 4), _F)),
                  _v("scalar_other", ("c", (3, 4), "bool"), ("a", (3, 4), _F),
                     call="lucid.where(c, a, 0.5)", ref="np.where(c, a, 0.5)",
                     torch="torch.where(c, a, 0.5)"),
                  _v("scalar_input", ("c", (3, 4), "bool"), ("b", (3, 4), _F),
                     call="lucid.where(c, -1.5, b)", ref="np.where(c, -1.5, b)",
                     torch="torch.where(c, -1.5, b)"),
                  _v("0d", ("c", (), "bool"), ("a", (), _F), ("b", (), _F)),
                  _v("empty", ("c", (0, 4), "bool"), ("a", (0, 4), _F), ("b", (4,), _F))]),
    # -- comparisons and logical ---------------------------------------------------------
    _compare("eq", "equal"), _compare("ne", "not_equal"), _compare("lt", "less"),
    _compare("le", "less_equal"), _compare("gt", "greater"), _compare("ge", "greater_equal"),
    _logical("logical_and"), _logical("logical_or"), _logical("logical_xor"),
    _op("logical_not", "lucid.logical_not(a)", "np.logical_not(a)", [("a", (3, 4), "bool")],
        grad=False, variants=[_v("float", ("a", (3, 4), "intf:-1:2")),
                              _v("0d", ("a", (), "bool"))]),
    _op("isnan", "lucid.isnan(a)", "np.isnan(a)", [("a", (4, 5), "nanmix")], grad=False,
        variants=[_v("0d", ("a", (), "nanmix")), _v("empty", ("a", (0,), "nanmix"))]),
    _op("isinf", "lucid.isinf(a)", "np.isinf(a)", [("a", (4, 5), "nanmix")], grad=False,
        variants=[_v("0d", ("a", (), "nanmix"))]),
    _op("isfinite", "lucid.isfinite(a)", "np.isfinite(a)", [("a", (4, 5), "nanmix")],
        grad=False, variants=[_v("0d", ("a", (), "nanmix"))]),
    # -- element-wise with parameters ---------------------------------------------------------
    _op("nan_to_num", "lucid.nan_to_num(a, nan=nan, posinf=posinf, neginf=neginf)",
        "np.nan_to_num(a, nan=nan, posinf=posinf, neginf=neginf)", [("a", (4, 5), "nanmix")],
        grad=False, args=dict(nan=0.0, posinf=None, neginf=None), ref_in_dtype=True,
        variants=[_v("values", args=dict(nan=1.5, posinf=9.0, neginf=-7.0)),
                  _v("finite_grad", ("a", (3, 4), _F), grad=True)]),
    _op("clamp", "lucid.clamp(a, min=lo, max=hi)", "np.clip(a, lo, hi)", [("a", (3, 4), _F)],
        grad=True, args=dict(lo=-0.5, hi=0.7), avoid=[-0.5, 0.7],
        variants=[_v("min_only", call="lucid.clamp(a, min=lo)", ref="np.maximum(a, lo)",
                     torch="torch.clamp(a, min=lo)"),
                  _v("max_only", call="lucid.clamp(a, max=hi)", ref="np.minimum(a, hi)",
                     torch="torch.clamp(a, max=hi)"),
                  _v("clip", call="lucid.clip(a, lo, hi)", torch="torch.clip(a, lo, hi)"),
                  _v("0d", ("a", (), _F)), _v("empty", ("a", (0, 3), _F))]),
    _op("clamp_tensor", "lucid.clamp(a, min=lo, max=hi)", "np.minimum(np.maximum(a, lo), hi)",
        [("a", (3, 4), _F), ("lo", (4,), (-1.5, -0.1)), ("hi", (3, 1), (0.1, 1.5))],
        op="clamp", grad=True, distinct=True,
        variants=[_v("min_only", ("a", (3, 4), _F), ("lo", (3, 4), _F), distinct=True,
                     call="lucid.clamp(a, min=lo)", ref="np.maximum(a, lo)",
                     torch="torch.clamp(a, min=lo)"),
                  _v("0d_bounds", ("a", (3, 4), _F), ("lo", (), (-1.5, -0.1)),
                     ("hi", (), (0.1, 1.5)))]),
    _op("leaky_relu", "lucid.leaky_relu(a, slope)", "np.where(a > 0, a, slope * a)",
        [("a", (3, 4), _F)], torch="torch.nn.functional.leaky_relu(a, slope)", grad=True,
        avoid=[0.0], args=dict(slope=0.01),
        variants=[_v("slope0.2", args=dict(slope=0.2)), _v("0d", ("a", (), _F)),
                  _v("empty", ("a", (0,), _F))]),
    _op("elu", "lucid.elu(a, alpha=alpha)", "np.where(a > 0, a, alpha * np.expm1(a))",
        [("a", (3, 4), _F)], torch="torch.nn.functional.elu(a, alpha=alpha)", grad=True,
        avoid=[0.0], args=dict(alpha=1.0),
        variants=[_v("alpha1.5", args=dict(alpha=1.5)), _v("0d", ("a", (), _F))]),
    _op("gelu", "lucid.gelu(a, approximate=approx)", "0.5 * a * sp.erfc(-a / np.sqrt(2))",
        [("a", (3, 4), (-4.0, 4.0))], torch="torch.nn.functional.gelu(a, approximate=approx)",
        grad=True, args=dict(approx="none"),
        variants=[_v("tanh", args=dict(approx="tanh"), ref="gelu_tanh(a)",
                     node="GeluTanhBackward", op="gelu_tanh"),
                  _v("method", call="a.gelu()", torch="torch.nn.functional.gelu(a)"),
                  _v("0d", ("a", (), _F))]),
    # -- reductions ----------------------------------------------------------------------
    _reduction("sum", "lucid.sum(a, dim=dim, keepdim=keepdim)",
               "np.sum(a, axis=dim, keepdims=keepdim)",
               extra=[_v("method", call="a.sum(dim, keepdim)", torch="a.sum(dim, keepdim)",
                         args=dict(dim=(1,), keepdim=False)),
                      _v("empty_full", ("a", (0, 3), _F))]),
    _reduction("mean", "lucid.mean(a, dim=dim, keepdim=keepdim)",
               "np.mean(a, axis=dim, keepdims=keepdim)",
               extra=[_v("empty_full", ("a", (0, 3), _F))]),
    # torch.prod takes one int dim; full reduction is prod(a)
    _reduction("prod", "lucid.prod(a, dim=dim, keepdim=keepdim)",
               "np.prod(a, axis=dim, keepdims=keepdim)",
               torch="(torch.prod(a).reshape((1,) * a.ndim if keepdim else ()) if dim is None "
                     "else torch.prod(a, dim=dim, keepdim=keepdim))",
               tuple_dims=False, kind=(-1.5, 1.5), avoid=[0.0],
               extra=[_v("one_zero", ("a", None, [[0.5, 0.0, -1.5], [1.2, -0.7, 0.9]]),
                         args=dict(dim=1, keepdim=False), limits=_NO_GG_ZEROS),
                      _v("one_zero_full", ("a", None, [[0.5, 0.0, -1.5], [1.2, -0.7, 0.9]]),
                         limits=_NO_GG_ZEROS),
                      _v("two_zeros", ("a", None, [[0.5, 0.0, 0.0], [1.2, -0.7, 0.9]]),
                         args=dict(dim=1, keepdim=False), limits=_NO_GG_ZEROS)]),
    _op("max", "lucid.max(a)", "np.max(a)", [("a", _RED, _F)], grad=True, distinct=True,
        variants=[_v("0d", ("a", (), _F)), _v("method", **_same("a.max()", ref="np.max(a)"))]),
    _reduction("max_dim", "lucid.max(a, dim=dim, keepdim=keepdim).values",
               "np.max(a, axis=dim, keepdims=keepdim)", op="max", full=False,
               tuple_dims=False, empty=False, distinct=True,
               zero_d=dict(node="CloneBackward", op="clone"),
               extra=[_v("indices", grad=False,
                         call="lucid.max(a, dim=dim, keepdim=keepdim).indices",
                         torch="torch.max(a, dim=dim, keepdim=keepdim).indices",
                         ref="np.argmax(a, axis=dim, keepdims=keepdim)")]),
    _op("min", "lucid.min(a)", "np.min(a)", [("a", _RED, _F)], grad=True, distinct=True,
        variants=[_v("0d", ("a", (), _F))]),
    _reduction("min_dim", "lucid.min(a, dim=dim, keepdim=keepdim).values",
               "np.min(a, axis=dim, keepdims=keepdim)", op="min", full=False,
               tuple_dims=False, empty=False, distinct=True,
               zero_d=dict(node="CloneBackward", op="clone"),
               extra=[_v("indices", grad=False,
                         call="lucid.min(a, dim=dim, keepdim=keepdim).indices",
                         torch="torch.min(a, dim=dim, keepdim=keepdim).indices",
                         ref="np.argmin(a, axis=dim, keepdims=keepdim)")]),
    _reduction("amax", "lucid.amax(a, dim=dim, keepdim=keepdim)",
               "np.amax(a, axis=dim if dim != () else None, keepdims=keepdim)", empty=False, distinct=True,
               args=dict(dim=())),
    _reduction("amin", "lucid.amin(a, dim=dim, keepdim=keepdim)",
               "np.amin(a, axis=dim if dim != () else None, keepdims=keepdim)", empty=False, distinct=True,
               args=dict(dim=())),
    _reduction("argmax", "lucid.argmax(a, dim=dim, keepdim=keepdim)",
               "np.argmax(a, axis=dim, keepdims=keepdim)", tuple_dims=False, empty=False, ref0d="0",
               grad=False, distinct=True),
    _reduction("argmin", "lucid.argmin(a, dim=dim, keepdim=keepdim)",
               "np.argmin(a, axis=dim, keepdims=keepdim)", tuple_dims=False, empty=False, ref0d="0",
               grad=False, distinct=True),
    _reduction("var", "lucid.var(a, dim=dim, correction=c, keepdim=keepdim)",
               "np.var(a, axis=dim, ddof=c, keepdims=keepdim)", empty=False,
               ref0d="a * np.nan",
               args=dict(c=1), extra=[_v("c0", args=dict(dim=1, keepdim=False, c=0)),
                                      _v("c0_full", args=dict(dim=None, keepdim=False, c=0)),
                                      _v("unbiased_false",
                                         call="lucid.var(a, 1, False)",
                                         torch="torch.var(a, 1, False)",
                                         ref="np.var(a, axis=1)")]),
    _reduction("std", "lucid.std(a, dim=dim, correction=c, keepdim=keepdim)",
               "np.std(a, axis=dim, ddof=c, keepdims=keepdim)", empty=False,
               ref0d="a * np.nan",
               args=dict(c=1), extra=[_v("c0", args=dict(dim=(0, 1), keepdim=True, c=0)),
                                      # torch: zero gradient where the std is 0
                                      _v("constant_row", ("a", None, [[0.5, 0.5, 0.5],
                                                                      [1.0, -2.0, 0.25]]),
                                         args=dict(dim=1, keepdim=False),
                                         limits={"gradgrad": "std is not twice differentiable "
                                                             "where the variance is 0"})]),
    _reduction("logsumexp", "lucid.logsumexp(a, dim=dim, keepdim=keepdim)",
               "logsumexp(a, dim, keepdim)", full=False, empty=False, kind=(-5.0, 5.0),
               extra=[_v("large", ("a", _RED, (500.0, 1000.0)), args=dict(dim=1, keepdim=False)),
                      _v("very_negative", ("a", _RED, (-1000.0, -500.0)),
                         args=dict(dim=(0, 2), keepdim=False))]),
    _reduction("norm", "lucid.norm(a, p=p, dim=dim, keepdim=keepdim)", "vnorm(a, p, dim, keepdim)",
               empty=False, ref0d="np.abs(a)", avoid=[0.0], args=dict(p=2),
               extra=[_v("p1", args=dict(p=1, dim=1, keepdim=False)),
                      _v("p3", args=dict(p=3, dim=(0, 2), keepdim=False)),
                      _v("p3_full", args=dict(p=3, dim=None, keepdim=False)),
                      _v("pinf", args=dict(p=float("inf"), dim=-1, keepdim=True), distinct=True),
                      _v("pinf_full", args=dict(p=float("inf"), dim=None, keepdim=False),
                         distinct=True),
                      _v("default", call="lucid.norm(a)", torch="torch.norm(a)",
                         ref="vnorm(a, 2)")]),
    _op("cumsum", "lucid.cumsum(a, dim=dim)", "np.cumsum(a, axis=dim)", [("a", _RED, _F)],
        grad=True, args=dict(dim=1),
        variants=[_v("dim-1", args=dict(dim=-1)), _v("0d", ("a", (), _F), args=dict(dim=0), ref="a"),
                  _v("empty", ("a", (2, 0), _F), args=dict(dim=1))]),
    _op("cumprod", "lucid.cumprod(a, dim=dim)", "np.cumprod(a, axis=dim)",
        [("a", _RED, (-1.5, 1.5))], grad=True, args=dict(dim=1), avoid=[0.0],
        variants=[_v("dim-1", args=dict(dim=-1)), _v("0d", ("a", (), _F), args=dict(dim=0), ref="a"),
                  _v("one_zero", ("a", None, [[0.5, 0.0, -1.5, 2.0], [1.2, -0.7, 0.9, 0.0]]),
                     args=dict(dim=1), limits=_NO_GG_ZEROS)]),
    _op("softmax", "lucid.softmax(a, dim=dim)", "softmax(a, dim)", [("a", _RED, (-5.0, 5.0))],
        grad=True, args=dict(dim=1),
        variants=[_v("dim-1", args=dict(dim=-1)), _v("0d", ("a", (), _F), args=dict(dim=0), ref="np.ones_like(a)"),
                  _v("large", ("a", _RED, (500.0, 1000.0)))]),
    _op("log_softmax", "lucid.log_softmax(a, dim=dim)", "np.log(softmax(a, dim))",
        [("a", _RED, (-5.0, 5.0))], grad=True, args=dict(dim=1),
        variants=[_v("dim-1", args=dict(dim=-1)), _v("0d", ("a", (), _F), args=dict(dim=0), ref="np.zeros_like(a)"),
                  _v("large", ("a", _RED, (500.0, 1000.0)))]),
    _reduction("all", "lucid.all(a, dim=dim, keepdim=keepdim)",
               "np.all(a, axis=dim, keepdims=keepdim)", kind="bool", grad=False,
               torch="torch.all(a) if dim is None and not keepdim else "
                     "torch.all(a, dim=dim, keepdim=keepdim)",
               extra=[_v("float", ("a", _RED, "intf:0:3"), args=dict(dim=1, keepdim=False))]),
    _reduction("any", "lucid.any(a, dim=dim, keepdim=keepdim)",
               "np.any(a, axis=dim, keepdims=keepdim)", kind="bool", grad=False,
               torch="torch.any(a) if dim is None and not keepdim else "
                     "torch.any(a, dim=dim, keepdim=keepdim)",
               extra=[_v("float", ("a", _RED, "intf:0:2"), args=dict(dim=1, keepdim=False))]),
    # -- shape ---------------------------------------------------------------------------------
    _shape("reshape", "lucid.reshape(a, (4, -1))", "np.reshape(a, (4, -1))",
           variants=[_v("method", **_same("a.reshape(2, 6)", ref="np.reshape(a, (2, 6))")),
                     _v("to_0d", ("a", (1, 1), _F), call="lucid.reshape(a, ())",
                        torch="torch.reshape(a, ())", ref="np.reshape(a, ())"),
                     _v("empty", ("a", (0, 4), _F), call="lucid.reshape(a, (2, 0, 5))",
                        torch="torch.reshape(a, (2, 0, 5))", ref="np.reshape(a, (2, 0, 5))")]),
    _shape("view", "a.view(4, 3)", "np.reshape(a, (4, 3))", op="reshape",
           node="ReshapeBackward", torch="a.view(4, 3)",
           limits={"noncontig": "view never copies: a strided input it cannot alias raises, "
                                "as in PyTorch (reshape copies)"},
           variants=[_v("flat", call="a.view(-1)", torch="a.view(-1)", ref="np.reshape(a, -1)")]),
    _shape("flatten", "lucid.flatten(a)", "np.reshape(a, -1)", op="reshape",
           node="ReshapeBackward", shape=(2, 3, 4),
           variants=[_v("start1", call="lucid.flatten(a, 1)", torch="torch.flatten(a, 1)",
                        ref="np.reshape(a, (2, 12))"),
                     _v("0d", ("a", (), _F), ref="np.reshape(a, 1)")]),
    _shape("squeeze", "lucid.squeeze(a, dim)", "np.squeeze(a, dim)", shape=(3, 1, 4, 1),
           args=dict(dim=1),
           variants=[_v("all", call="lucid.squeeze(a)", torch="torch.squeeze(a)",
                        ref="np.squeeze(a)"),
                     _v("tuple", args=dict(dim=(1, 3))),
                     _v("noop", args=dict(dim=0), ref="a")]),
    _shape("unsqueeze", "lucid.unsqueeze(a, dim)", "np.expand_dims(a, dim)", args=dict(dim=0),
           variants=[_v("last", args=dict(dim=-1)), _v("0d", ("a", (), _F))]),
    _shape("transpose", "lucid.transpose(a, 0, 2)", "np.swapaxes(a, 0, 2)", shape=(2, 3, 4),
           variants=[_v("method_neg", **_same("a.transpose(-1, 0)", ref="np.swapaxes(a, -1, 0)"))]),
    _shape("permute", "a.permute(2, 0, 1)", shape=(2, 3, 4), ref="np.transpose(a, (2, 0, 1))",
           torch="a.permute(2, 0, 1)",
           variants=[_v("fn", call="lucid.permute(a, (1, 2, 0))",
                        torch="torch.permute(a, (1, 2, 0))", ref="np.transpose(a, (1, 2, 0))")]),
    _shape("T", "a.T", op="permute", node="PermuteBackward",
           variants=[_v("1d", ("a", (4,), _F))]),
    _shape("expand", "a.expand(2, 3, 4)", "np.broadcast_to(a, (2, 3, 4))", shape=(3, 1),
           torch="a.expand(2, 3, 4)",
           variants=[_v("minus1", call="a.expand(2, -1, 4)", torch="a.expand(2, -1, 4)"),
                     _v("0d", ("a", (), _F))]),
    _shape("broadcast_to", "lucid.broadcast_to(a, (2, 3, 4))", "np.broadcast_to(a, (2, 3, 4))",
           shape=(3, 1), op="expand", node="ExpandBackward"),
    _shape("cat", "lucid.cat([a, b], dim=1)", "np.concatenate([a, b], axis=1)",
           inputs=[("a", (3, 2), _F), ("b", (3, 4), _F)],
           variants=[_v("dim0_three", ("a", (1, 4), _F), ("b", (3, 4), _F),
                        call="lucid.cat([a, b, a], dim=0)", torch="torch.cat([a, b, a], dim=0)",
                        ref="np.concatenate([a, b, a], axis=0)"),
                     _v("neg_dim", ("a", (2, 1), _F), ("b", (2, 3), _F),
                        call="lucid.cat([a, b], dim=-1)", torch="torch.cat([a, b], dim=-1)",
                        ref="np.concatenate([a, b], axis=-1)"),
                     _v("empty_part", ("a", (3, 0), _F), ("b", (3, 4), _F)),
                     _v("concat", call="lucid.concat([a, b], dim=1)",
                        torch="torch.concat([a, b], dim=1)")]),
    _shape("stack", "lucid.stack([a, b], dim=dim)", "np.stack([a, b], axis=dim)",
           inputs=[("a", (3, 4), _F), ("b", (3, 4), _F)], args=dict(dim=0),
           variants=[_v("last", args=dict(dim=-1)), _v("mid", args=dict(dim=1)),
                     _v("0d", ("a", (), _F), ("b", (), _F)),
                     _v("empty", ("a", (0, 2), _F), ("b", (0, 2), _F))]),
    _shape("split", "lucid.split(a, 2, dim=1)", "np.split(a, [2, 4], axis=1)", shape=(3, 5),
           op="index", node="IndexBackward",
           variants=[_v("sections", call="lucid.split(a, [1, 4], dim=1)",
                        torch="torch.split(a, [1, 4], dim=1)", ref="np.split(a, [1], axis=1)"),
                     _v("method", call="a.split(2, 0)", torch="a.split(2, 0)",
                        ref="np.split(a, [2], axis=0)")]),
    _shape("chunk", "lucid.chunk(a, 3, dim=1)", "np.split(a, [2, 4], axis=1)", shape=(3, 5),
           op="index", node="IndexBackward",
           variants=[_v("even", call="lucid.chunk(a, 3, dim=0)", torch="torch.chunk(a, 3, dim=0)",
                        ref="np.split(a, 3, axis=0)")]),
    _shape("flip", "lucid.flip(a, dims)", "np.flip(a, dims)", shape=(2, 3, 4),
           args=dict(dims=(0, 2)), variants=[_v("one", args=dict(dims=(-1,)))]),
    _shape("roll", "lucid.roll(a, shifts, dims)", "np.roll(a, shifts, dims)", shape=(3, 4),
           args=dict(shifts=1, dims=1),
           variants=[_v("tuple", args=dict(shifts=(2, -1), dims=(0, 1))),
                     _v("flat", call="lucid.roll(a, 5)", torch="torch.roll(a, 5)",
                        ref="np.roll(a, 5)")]),
    _shape("tile", "lucid.tile(a, reps)", "np.tile(a, reps)", args=dict(reps=(2, 1)),
           variants=[_v("more_dims", args=dict(reps=(2, 1, 3))), _v("fewer", args=dict(reps=(2,)))]),
    _shape("repeat", "a.repeat(2, 1, 3)", "np.tile(a, (2, 1, 3))", torch="a.repeat(2, 1, 3)",
           variants=[_v("same_ndim", call="a.repeat(1, 2)", torch="a.repeat(1, 2)",
                        ref="np.tile(a, (1, 2))")]),
    _shape("pad", "lucid.pad(a, (1, 2), value=v)",
           "np.pad(a, ((0, 0), (1, 2)), constant_values=v)",
           torch="torch.nn.functional.pad(a, (1, 2), value=v)", args=dict(v=0.0),
           variants=[_v("two_dims", args=dict(v=0.5), call="lucid.pad(a, (0, 1, 2, 0), value=v)",
                        torch="torch.nn.functional.pad(a, (0, 1, 2, 0), value=v)",
                        ref="np.pad(a, ((2, 0), (0, 1)), constant_values=v)")]),
    _shape("gather", "lucid.gather(a, 1, i)", "np.take_along_axis(a, i, axis=1)",
           inputs=[("a", (3, 4), _F), ("i", (3, 6), "int:0:4")], grad_inputs=["a"],
           variants=[_v("dim0", ("a", (3, 4), _F), ("i", (5, 4), "int:0:3"),
                        call="lucid.gather(a, 0, i)", torch="torch.gather(a, 0, i)",
                        ref="np.take_along_axis(a, i, axis=0)")]),
    _shape("scatter_add", "lucid.scatter_add(a, 1, i, s)", "scatter_add(a, 1, i, s)",
           inputs=[("a", (3, 4), _F), ("i", (3, 5), "int:0:4"), ("s", (3, 5), _F)],
           grad_inputs=["a", "s"],
           variants=[_v("src_larger", ("a", (3, 4), _F), ("i", (2, 3), "int:0:4"),
                        ("s", (3, 5), _F),
                        limits={"torch_grad": "torch's own ScatterAddBackward0 rejects src larger "
                                              "than index"})]),
    _shape("index_select", "lucid.index_select(a, 1, i)", "np.take(a, i, axis=1)",
           inputs=[("a", (3, 4), _F), ("i", None, [3, 0, 3, 1])], grad_inputs=["a"],
           variants=[_v("dim0", ("a", (3, 4), _F), ("i", None, [2, 2]),
                        call="lucid.index_select(a, 0, i)", torch="torch.index_select(a, 0, i)",
                        ref="np.take(a, i, axis=0)")]),
    _shape("getitem", "a[1]", shape=(4, 5, 3), op="index", node="IndexBackward",
           variants=[_v("slices_step", **_same("a[1:4:2, ::2]")),
                     _v("neg_int", **_same("a[-1, 1:, -2]")),
                     _v("ellipsis_none", **_same("a[..., None, 1]")),
                     _v("int_array_repeats", ("a", (4, 5, 3), _F), ("i", None, [0, 2, 2, 3]),
                        **_same("a[i]")),
                     _v("int_array_mid", ("a", (4, 5, 3), _F), ("i", None, [4, 0, 4]),
                        **_same("a[:, i]")),
                     _v("two_arrays", ("a", (4, 5, 3), _F), ("i", None, [0, 3, 3]),
                        ("j", None, [1, 1, 4]), **_same("a[i, j]")),
                     _v("bool_mask_full", ("a", (4, 5, 3), _F), ("m", (4, 5, 3), "bool"),
                        **_same("a[m]")),
                     _v("bool_mask_lead", ("a", (4, 5, 3), _F), ("m", (4,), "bool"),
                        **_same("a[m]")),
                     _v("0d_result", **_same("a[1, 2, 0]")),
                     _v("empty_slice", **_same("a[2:2]"))]),
    _shape("contiguous", "a.contiguous()", "a", torch="a.contiguous()", node=None,
           variants=[_v("transposed", **_same("a.T.contiguous()", ref="a.T"), node="CloneBackward",
                        op="clone")]),
    _shape("clone", "lucid.clone(a)", "np.copy(a)",
           variants=[_v("method", call="a.clone()", torch="a.clone()"), _v("0d", ("a", (), _F))]),
    # -- linear algebra -------------------------------------------------------------------------
    _op("matmul", "lucid.matmul(a, b)", "np.matmul(a, b)",
        [("a", (3, 4), _F), ("b", (4, 2), _F)], grad=True,
        variants=[_v("1d_1d", ("a", (4,), _F), ("b", (4,), _F)),
                  _v("2d_1d", ("a", (3, 4), _F), ("b", (4,), _F)),
                  _v("1d_2d", ("a", (4,), _F), ("b", (4, 2), _F)),
                  _v("batched_bcast", ("a", (2, 1, 3, 4), _F), ("b", (5, 4, 2), _F)),
                  _v("batched_1d", ("a", (2, 3, 4), _F), ("b", (4,), _F)),
                  _v("empty_k", ("a", (3, 0), _F), ("b", (0, 2), _F)),
                  _v("operator", ("a", (2, 3, 4), _F), ("b", (4, 2), _F), **_same("a @ b"))]),
    _op("dot", "lucid.dot(a, b)", "np.dot(a, b)", [("a", (5,), _F), ("b", (5,), _F)], grad=True,
        variants=[_v("empty", ("a", (0,), _F), ("b", (0,), _F))]),
    _op("outer", "lucid.outer(a, b)", "np.outer(a, b)", [("a", (3,), _F), ("b", (4,), _F)],
        grad=True, variants=[_v("empty", ("a", (0,), _F), ("b", (4,), _F))]),
]
