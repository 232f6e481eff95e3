"""Property-based fuzzing of every op in the op tables against torch and NumPy.

Random shapes (0-d, empty, broadcastable and not), dtypes, layouts (transposed, negative
strides, unaligned, read-only) and values (+-0, +-inf, nan, subnormals, huge), forward
and backward, and random graphs of ops with backward.

Bounded by default (CI: a few seconds); ``LUCID_FUZZ=long`` runs the long profile.
The number of cases run is printed at the end of the session (conftest.py).
"""
import collections
import math
import os
import warnings

import numpy as np
import pytest

import lucid
from lucid._core import optable

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
mpmath = pytest.importorskip("mpmath")
from hypothesis import assume, HealthCheck, given, settings, strategies as st  # noqa: E402

from op_data import OPS, REF_HELPERS, UNARY_DATA  # noqa: E402

LONG = os.environ.get("LUCID_FUZZ", "") == "long"
CASES = collections.Counter()      # test family -> cases run (printed by conftest.py)

FUZZ = settings(max_examples=2000 if LONG else 8, deadline=None, derandomize=not LONG,
                suppress_health_check=list(HealthCheck), database=None)

# -- strategies ---------------------------------------------------------------------------

SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 1e-310, 5e-324,
           3.4e38, -3.4e38, 1e300, 65504.0, 1.0, -1.0, 0.5, 88.7, -103.9, 710.0]
FLOAT_DT = ["float16", "float32", "float64"]
ALL_DT = FLOAT_DT + ["uint8", "int8", "int16", "int32", "int64", "bool"]
LAYOUTS = ["contig", "transposed", "negstride", "unaligned", "readonly"]


@st.composite
def values(draw, n, dtype):
    if dtype == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        ints = st.one_of(st.integers(max(-10, int(info.min)), 10),
                         st.integers(int(info.min), int(info.max)))
        return np.array(draw(st.lists(ints, min_size=n, max_size=n)), dtype)
    fl = st.one_of(st.sampled_from(SPECIAL), st.floats(-4, 4),
                   st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True))
    with np.errstate(over="ignore"):
        return np.array(draw(st.lists(fl, min_size=n, max_size=n)), np.float64).astype(dtype)


def laid_out(a, layout):
    """``a``'s values in a given memory layout (what from_numpy shares)."""
    if layout == "transposed" and a.ndim >= 2:
        return np.ascontiguousarray(a.T).T
    if layout == "negstride" and a.ndim >= 1:
        return np.ascontiguousarray(a[::-1])[::-1]
    if layout == "unaligned" and a.dtype.itemsize > 1:
        buf = np.zeros(a.nbytes + 1, np.uint8)[1:].view(a.dtype).reshape(a.shape)
        buf[...] = a
        return buf
    if layout == "readonly":
        a = a.copy()
        a.flags.writeable = False
        return a
    return a


@st.composite
def arrays(draw, dtypes=ALL_DT, shape=None, min_dims=0):
    dtype = draw(st.sampled_from(dtypes))
    if shape is None:
        shape = tuple(draw(st.lists(st.integers(0, 4), min_size=min_dims, max_size=3)))
    a = draw(values(int(np.prod(shape)), dtype)).reshape(shape)
    return laid_out(a, draw(st.sampled_from(LAYOUTS)))


def broadcast_pair(draw, dtypes):
    a = draw(arrays(dtypes))
    shape = list(a.shape)
    mode = draw(st.sampled_from(["same", "ones", "drop", "random"]))
    if mode == "ones":
        shape = [1 if draw(st.booleans()) else s for s in shape]
    elif mode == "drop":
        shape = shape[draw(st.integers(0, len(shape))):]
    elif mode == "random":
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
    b = draw(arrays(dtypes, shape=tuple(shape)))
    return a, b


# -- comparison -------------------------------------------------------------------------

def T(a, requires_grad=False):
    t = torch.tensor(np.array(a, copy=True, order="C"))
    return t.requires_grad_(True) if requires_grad else t


def L(a, requires_grad=False):
    t = lucid.from_numpy(a)
    if requires_grad:
        t = t.detach().clone().requires_grad_(True) if not a.flags.writeable else \
            lucid.from_numpy(a).requires_grad_(True)
    return t


def as_np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    if isinstance(x, lucid.Tensor):
        return x.detach().numpy()
    return np.asarray(x)


def close(got, want, dtype, what, atol=0.0):
    g, w = as_np(got), as_np(want)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    if w.dtype.kind == "b" or w.dtype.kind in "iu":
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    g, w = g.astype(np.float64), w.astype(np.float64)
    rtol = {"float16": 2e-2, "float32": 2e-4}.get(str(dtype), 1e-7)
    fin = np.isfinite(w)
    # Non-finite values must agree exactly (nan where torch has nan, +-inf likewise).
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=what + ": nan pattern")
    np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)], err_msg=what + ": inf")
    scale = np.max(np.abs(w[fin]), initial=1.0)
    np.testing.assert_allclose(g[fin], w[fin], rtol=rtol,
                               atol=rtol * scale * 1e-3 + 1e-30 + atol, err_msg=what)


def both(lucid_fn, torch_fn):
    """Run both; they must both raise (lucid with a standard exception) or both succeed."""
    err_l = err_t = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r_l = lucid_fn()
        except (TypeError, ValueError, IndexError, RuntimeError, OverflowError,
                ZeroDivisionError) as e:
            err_l, r_l = e, None
        try:
            r_t = torch_fn()
        except Exception as e:      # torch's errors are RuntimeError, TypeError, ...
            err_t, r_t = e, None
    return r_l, r_t, err_l, err_t


# -- unary rows ----------------------------------------------------------------------------

def _torch_fn(name):
    obj = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


UNARY = [r for r in optable.UNARY if r["torch"]]

# Findings of the fuzzer that stay: (test, op) -> reason. Data, never ifs in a test. Each is a
# deliberate difference (lucid is the more accurate), not a bug left open.
KNOWN = {
    ("ops", "prod"): "deliberate: prod of values near the float range, where an intermediate "
                     "product overflows to inf and a later factor is 0, is inf * 0 = nan or 0 "
                     "by evaluation order (lucid: pairwise; torch: SIMD lanes); neither order "
                     "is wrong in IEEE arithmetic, lucid's gives the exact 0 more often",
    ("ops", "norm"): "deliberate: norm of huge values: lucid's scaled 2-norm is finite where "
                     "torch overflows to inf",
}

# Deliberate differences at +-inf: torch computes these as x / (1 + |x|), x * sigmoid(x),
# ... and gives nan (inf / inf, -inf * 0) in some dtypes; lucid gives the limit, which is
# torch's own value at the largest finite inputs. op -> {input: (value, gradient)}.
AT_INF = {
    "softsign": {math.inf: (1.0, 0.0), -math.inf: (-1.0, 0.0)},
    "silu": {math.inf: (math.inf, 1.0), -math.inf: (-0.0, 0.0)},
    "gelu": {math.inf: (math.inf, 1.0), -math.inf: (-0.0, 0.0)},
    "mish": {math.inf: (math.inf, 1.0), -math.inf: (-0.0, 0.0)},
    "hardswish": {math.inf: (math.inf, 1.0), -math.inf: (-0.0, 0.0)},
}


# Deliberate differences where torch overflows an intermediate to inf and the true value
# is finite: lucid gives the true value, checked here against the row's mpmath oracle
# (tests/op_data.py, evaluated at 50 digits), which then stands in for torch's.
# op -> why torch overflows.
FINITE_WHERE_TORCH_OVERFLOWS = {
    "sinh": "torch computes exp(|x|) / 2: inf for |x| in (709.78, 710.48] in float64 "
            "((88.72, 89.42] in float32), where sinh is finite",
    "cosh": "as sinh",
    "gelu": "torch's x / 2 * (1 + erf(x / sqrt 2)) overflows above max / 2; gelu(x) = x there",
    "hardswish": "torch's x * min(x + 3, 6) / 6 overflows above max / 6; hardswish(x) = x there",
}

# Deliberate differences where torch's formula cancels: lucid's value is the accurate one.
# Where the two disagree, lucid must agree with an independent reference: the row's mpmath
# oracle (unary rows) or its float64 SciPy reference (tests/op_data.py cases). op -> why.
ACCURATE_WHERE_TORCH_CANCELS = {
    "gelu": "torch's vectorised path (32 or more elements) computes x / 2 * (1 + erf(x / "
            "sqrt 2)), which cancels for x < -3 (gelu(-3.8125) is 0.2% off); lucid uses erfc",
}
TIGHT = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


def _disagree(g, w, rtol):
    """Where lucid's ``g`` and torch's ``w`` (finite) differ beyond close()'s tolerance."""
    fin = np.isfinite(w) & np.isfinite(g)
    scale = np.max(np.abs(w[fin]), initial=1.0)
    return fin & (np.abs(g - w) > rtol * np.abs(w) + rtol * scale * 1e-3 + 1e-30)


def _torch_cancels(name, a, got, want, which, dtype):
    """``want`` with the oracle's value where lucid and torch disagree, for the ops of
    ACCURATE_WHERE_TORCH_CANCELS, after checking lucid's value against it."""
    w = np.array(as_np(want), np.float64)
    if name not in ACCURATE_WHERE_TORCH_CANCELS or dtype == np.float16:
        return w
    g, x = as_np(got).astype(np.float64), np.asarray(a, np.float64)
    rtol = {np.dtype(np.float32): 2e-4}.get(np.dtype(dtype), 1e-7)
    for i in zip(*np.nonzero(np.atleast_1d(_disagree(g, w, rtol)))):
        i = i if w.ndim else ()
        true = _oracle(name, x[i], which)
        np.testing.assert_allclose(g[i], true, rtol=TIGHT[np.dtype(dtype)],
                                   err_msg=f"{name} at {x[i]}")
        w[i] = true
    return w


# Deliberate differences for integer inputs: torch computes these in the integer dtype,
# where an intermediate wraps (softsign: 1 + |x| at x = 2**63 - 1, so softsign(INT64_MAX)
# is -1); lucid computes in float32, checked against the row's NumPy float64 reference.
INTEGER_WRAPS = {"softsign": "torch's 1 + |x| wraps in int64"}


def _oracle(name, x, which):
    """The row's mpmath oracle (which=0) or its derivative (which=1) at the float x."""
    with mpmath.workdps(50):
        f = lambda t: eval(UNARY_DATA[name]["mp"], vars(mpmath), {"x": t})   # noqa: E731
        t = mpmath.mpf(float(x))
        v = f(t) if which == 0 else mpmath.diff(f, t, h=max(abs(t), 1) * mpmath.mpf(10)**-20)
        return float(v)


def _torch_overflows(name, a, got, want, which, dtype):
    """``want`` (torch's, float64) with lucid's value where torch overflowed and the oracle
    is finite in ``dtype``, after checking lucid's value there against the oracle."""
    w = as_np(want).astype(np.float64)
    if name not in FINITE_WHERE_TORCH_OVERFLOWS:
        return w
    g, x = as_np(got).astype(np.float64).ravel(), np.asarray(a, np.float64).ravel()
    w = w.ravel()
    big = np.finfo(dtype).max
    for i in np.flatnonzero(~np.isfinite(w) & np.isfinite(x)):
        true = _oracle(name, x[i], which)
        if math.isfinite(true) and abs(true) <= big:
            np.testing.assert_allclose(g[i], true, rtol=1e-3 if dtype == np.float16 else 1e-6,
                                       err_msg=f"{name} at {x[i]}")
            w[i] = g[i]
    return w.reshape(np.shape(as_np(want)))


def _limits(name, a, got, want, which):
    """Check ``got`` (lucid) against AT_INF[name] where ``a`` is +-inf; return ``want``
    (torch's, as float64) with those positions replaced by the limits."""
    w = as_np(want).astype(np.float64)      # a copy
    g = as_np(got).astype(np.float64)
    for x, limit in AT_INF.get(name, {}).items():
        at = np.asarray(a, np.float64) == x
        np.testing.assert_array_equal(g[at], limit[which], err_msg=f"{name} at {x}")
        if which == 0:      # the sign of a zero value (a gradient's is immaterial)
            np.testing.assert_array_equal(np.signbit(g[at]), math.copysign(1, limit[0]) < 0,
                                          err_msg=f"{name} at {x}: sign")
        w[at] = limit[which]
    return w


def _known(family, name):
    r = KNOWN.get((family, name))
    return [pytest.mark.xfail(reason=r, strict=False)] if r else []


@pytest.mark.parametrize("row", [pytest.param(r, marks=_known("unary", r["name"])) for r in UNARY],
                         ids=[r["name"] for r in UNARY])
@FUZZ
@given(data=st.data())
def test_fuzz_unary(row, data):
    a = data.draw(arrays())
    lf, tf = getattr(lucid, row["name"]), _torch_fn(row["torch"])
    CASES["unary"] += 1
    r_l, r_t, e_l, e_t = both(lambda: lf(L(a)), lambda: tf(T(a)))
    if e_t is not None or e_l is not None:
        if e_l is None and a.dtype.kind in "biu":
            return      # lucid computes integer inputs of float ops as float32; torch refuses some
        if e_l is None and isinstance(e_t, NotImplementedError) and "not implemented for" in str(e_t):
            return      # torch has no kernel for this dtype (erfcx, log_ndtr, ndtri of float16)
        assert e_l is not None and e_t is not None, (row["name"], a.dtype, e_l, e_t)
        return
    want_dt = str(r_t.dtype).split(".")[1]
    if row["amp"] == "ForceFP32" and want_dt == "float16":
        want_dt = "float32"        # lucid's AMP policy: float16 in, float32 out (documented)
    assert str(r_l.dtype).split(".")[1].rstrip("_") == want_dt, \
        (row["name"], a.dtype, r_l.dtype, r_t.dtype)
    if want_dt != str(r_t.dtype).split(".")[1]:
        with np.errstate(over="ignore"):
            r_l = lucid.from_numpy(as_np(r_l).astype(np.float16))   # compare at torch's precision
    if a.dtype.kind in "iu" and row["name"] in INTEGER_WRAPS:
        with np.errstate(all="ignore"):
            r_t = eval(UNARY_DATA[row["name"]]["ref"], {"np": np}, {"x": a.astype(np.float64)})
    elif a.dtype.kind == "f":
        r_t = _torch_overflows(row["name"], a, r_l, r_t, 0, a.dtype)
        r_t = _torch_cancels(row["name"], a, r_l, r_t, 0, a.dtype)
    close(r_l, _limits(row["name"], a, r_l, r_t, 0),
          "float16" if a.dtype == np.float16 else r_l.dtype.name.rstrip("_"),
          f"{row['name']}({a.dtype}{a.shape})")
    if a.dtype.kind == "f" and a.size and a.dtype != np.float16:
        x, xt = L(a, True), T(a, True)
        lf(x).backward(gradient=lucid.ones_like(x))
        tf(xt).backward(torch.ones_like(xt))
        gt = _torch_cancels(row["name"], a, x.grad, _torch_overflows(
            row["name"], a, x.grad, xt.grad, 1, a.dtype), 1, a.dtype)
        gt = _limits(row["name"], a, x.grad, gt, 1)
        finite = np.isfinite(a)     # nan inputs follow no convention (torch's differ by path)
        close(as_np(x.grad)[finite], gt[finite], a.dtype, f"d {row['name']}")


# -- binary rows and comparisons -------------------------------------------------------------

BINARY = [r["name"] for r in optable.BINARY] + \
    [r["name"] for r in optable.COMPARE if r["arity"] == 2] + \
    [r["name"] for r in optable.MORE_BINARY]

# Deliberate differences of binary ops: op -> (why, the exact float64 reference in NumPy).
# Where torch's result is nan and lucid's is not, lucid's must equal the reference.
EXACT_WHERE_TORCH_NAN = {
    "fmod": (("lucid's fmod (NumPy's) is exact; torch's a - trunc(a / b) * b is nan where "
              "a / b overflows (a large dividend, a subnormal divisor)"), np.fmod),
    "remainder": (("as fmod: NumPy's remainder is exact; torch's a - floor(a / b) * b is nan "
                   "where a / b overflows"), np.remainder),
}
# Ops that read a Python scalar operand at its full precision (optable's exact_scalar):
# torch rounds pow's exponent to the input's dtype (float16, bfloat16; float32 in its
# vectorised path for 32 or more contiguous elements), so 0 ** 1e-50 is 1 there; lucid's
# reference is torch on the input in float64, rounded to the result dtype.
SCALAR_AS_GIVEN = {r["name"] for r in optable.BINARY if r["exact_scalar"]}
HALF_T = (torch.float16, torch.bfloat16)


@pytest.mark.parametrize("name", [pytest.param(n, marks=_known("binary", n)) for n in BINARY])
@FUZZ
@given(data=st.data())
def test_fuzz_binary(name, data):
    a, b = broadcast_pair(data.draw, ALL_DT)
    kind = data.draw(st.sampled_from(["tt", "ts", "st"]))
    CASES["binary"] += 1
    lf, tf = getattr(lucid, name), getattr(torch, name)
    if kind == "tt":
        la, lb, ta, tb = L(a), L(b), T(a), T(b)
    else:
        s = data.draw(st.one_of(st.integers(-3, 3), st.floats(-3, 3), st.sampled_from(SPECIAL),
                                st.booleans()))
        la, ta = L(a), T(a)
        lb = tb = s
        if kind == "st":
            la, lb, ta, tb = lb, la, tb, ta
    if kind == "tt" and a.dtype != b.dtype and "float16" in (a.dtype.name, b.dtype.name):
        # torch reads float32 subnormals as zero when it mixes them with float16 (1e-45 / 0
        # is nan there); lucid keeps IEEE semantics
        tiny = [np.abs(v[np.isfinite(v) & (v != 0)]).min(initial=np.inf) for v in (a, b)
                if v.dtype == np.float32]
        assume(not tiny or tiny[0] >= np.finfo(np.float32).tiny)
    r_l, r_t, e_l, e_t = both(lambda: lf(la, lb), lambda: tf(ta, tb))
    if e_t is not None or e_l is not None:
        # lucid is more permissive than torch's function forms (Python scalars on either
        # side, bool remainder, ...): only a refusal where torch computes is a failure.
        assert e_l is None or e_t is not None, (name, a.dtype, b.dtype, kind, e_l, e_t)
        return
    dt = r_t.dtype
    want = str(dt).split(".")[1]
    if want in ("float16", "bfloat16") and lucid.ops.schema(name).amp_policy.name == "ForceFP32":
        want = "float32"    # lucid's AMP policy: half operands computed in float32 (documented)
        r_t = tf(*[v.float() if isinstance(v, torch.Tensor) and v.dtype in HALF_T else v
                   for v in (ta, tb)])
    if name in SCALAR_AS_GIVEN and kind == "ts" and isinstance(s, float) and \
            r_t.dtype != torch.float64 and r_t.is_floating_point():
        r_t = tf(ta.double(), tb).to(r_t.dtype)
    if name in EXACT_WHERE_TORCH_NAN and r_t.is_floating_point():
        r_t = _exact_where_torch_nan(name, la, lb, r_l, r_t)
    assert str(r_l.dtype).split(".")[1].rstrip("_") == want, \
        (name, a.dtype, b.dtype, kind, r_l.dtype, dt)
    close(r_l, r_t, str(dt).split(".")[1], f"{name}({a.dtype}{a.shape}, {b.dtype}{b.shape})")


def _exact_where_torch_nan(name, la, lb, got, want):
    """``want`` with lucid's value where torch's is nan and lucid's is not, after checking
    it there against EXACT_WHERE_TORCH_NAN's float64 reference."""
    g, w = as_np(got), want.numpy().copy()
    at = np.isnan(w) & ~np.isnan(g)
    if at.any():
        ops = [np.asarray(as_np(v) if isinstance(v, lucid.Tensor) else v, np.float64)
               for v in (la, lb)]
        with np.errstate(all="ignore"):
            ref = np.broadcast_to(EXACT_WHERE_TORCH_NAN[name][1](*ops), w.shape).astype(w.dtype)
        np.testing.assert_array_equal(g[at], ref[at], err_msg=f"{name}: the exact value")
        w[at] = ref[at]
    return torch.from_numpy(w)


# -- reductions ------------------------------------------------------------------------------

def _red_calls(name, dim, keepdim):
    """(lucid call, torch call) for a reduction over ``dim`` (None: all)."""
    kw = {} if dim is None else {"dim": dim}
    kwk = dict(kw, keepdim=keepdim) if dim is not None else kw
    if name in ("softmax", "log_softmax", "cumsum", "cumprod"):
        d = 0 if dim is None else dim
        return (lambda x: getattr(lucid, name)(x, d), lambda x: getattr(torch, name)(x, d))
    if name in ("max", "min") and dim is not None:
        return (lambda x: getattr(lucid, name)(x, dim, keepdim)[0],
                lambda x: getattr(torch, name)(x, dim, keepdim)[0])
    if name == "logsumexp":
        d = tuple(range(99)) if dim is None else dim
        return (lambda x: lucid.logsumexp(x, dim if dim is not None else tuple(range(x.ndim)), keepdim),
                lambda x: torch.logsumexp(x, dim if dim is not None else tuple(range(x.ndim)), keepdim))
    if name == "norm":
        return (lambda x: lucid.norm(x, dim=dim, keepdim=keepdim),
                lambda x: torch.linalg.vector_norm(x, dim=dim, keepdim=keepdim))
    if name in ("var", "std"):
        return (lambda x: getattr(lucid, name)(x, **kwk), lambda x: getattr(torch, name)(x, **kwk))
    return (lambda x: getattr(lucid, name)(x, **kwk), lambda x: getattr(torch, name)(x, **kwk))


REDUCTIONS = [r["name"] for r in optable.REDUCTIONS]

# Sums in floating point are exact only up to n * eps * sum |x| (any order of additions;
# Higham, Accuracy and Stability of Numerical Algorithms, 4.2): when values cancel
# (3.4e38 - 3.4e38 + 65504), lucid's pairwise float32 sum and torch's own order may
# differ by that much. The reductions below are compared within this bound.
SUMS = {"sum", "mean", "cumsum"}


def _sum_bound(name, a):
    """The rounding bound of a sum over ``a``'s elements (0 for other reductions)."""
    if name not in SUMS or a.dtype.kind != "f" or not a.size:
        return 0.0
    x = np.abs(np.asarray(a, np.float64))
    x = x[np.isfinite(x)]
    return float(np.finfo(np.float32 if a.dtype == np.float16 else a.dtype).eps * a.size * x.sum())


def _mp_reduction(fn):
    """A reference reduction: ``fn`` (a list of mpmath numbers -> one) over ``dim`` of an
    array (None: all of it), at 30 digits: no overflow, no rounding until the end."""
    def one(v):
        with mpmath.workdps(30):
            return float(fn([mpmath.mpf(float(t)) for t in v]))

    def ref(a, dim, keepdim):
        a = np.asarray(a, np.float64)
        if dim is None or a.ndim == 0:
            r = np.array(one(a.ravel()))
            return r.reshape((1,) * a.ndim) if keepdim else r
        r = np.apply_along_axis(one, dim, a)
        return np.expand_dims(r, dim) if keepdim else r
    return ref


def _mp_var(v):
    m = mpmath.fsum(v) / len(v)
    return mpmath.fsum((t - m) ** 2 for t in v) / (len(v) - 1)


# Deliberate differences of reductions where torch overflows an intermediate and the true
# value is finite: op -> (why, reference(input, dim, keepdim) from mpmath). lucid's value
# is checked against the reference there, which stands in for torch's.
REDUCTION_OVERFLOWS = {
    "norm": (("torch squares the values: |x| above 1.3e154 (float64), 1.8e19 (float32) "
              "overflows; lucid's 2-norm is scaled by the largest |x|"),
             _mp_reduction(lambda v: mpmath.sqrt(mpmath.fsum(t * t for t in v)))),
    "std": (("torch gives inf for values near the float range whose spread is finite "
             "(std([3.4e38, 3.4e38]) is 0); lucid redoes float32 moments that overflow in "
             "float64"), _mp_reduction(lambda v: mpmath.sqrt(_mp_var(v)))),
    "var": ("as std", _mp_reduction(_mp_var)),
}


def _mp_norm_grad(a, dim):
    """d sum(norm(a, dim)) / da = a / norm (0 where the norm is 0), in mpmath."""
    def one(v):
        with mpmath.workdps(30):
            v = [mpmath.mpf(float(t)) for t in v]
            n = mpmath.sqrt(mpmath.fsum(t * t for t in v))
            return np.array([float(t / n) if n else 0.0 for t in v])
    a = np.asarray(a, np.float64)
    if dim is None or a.ndim == 0:
        return one(a.ravel()).reshape(a.shape)
    return np.apply_along_axis(one, dim, a)


# Reductions whose gradient is checked against an independent reference instead of torch:
# op -> (why, reference(input, dim) of d sum(op(input, dim)) / d input).
REDUCTION_GRADS = {
    "norm": ("torch's squares underflow below 1e-23 in float32 (1e-162 in float64), so its "
             "norm and gradient there are 0; lucid's scaled norm gives x / |x|", _mp_norm_grad),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=_known("reduction", n))
                                  for n in REDUCTIONS])
@FUZZ
@given(data=st.data())
def test_fuzz_reduction(name, data):
    a = data.draw(arrays())
    nd = a.ndim
    dim = data.draw(st.one_of(st.none(), st.integers(-nd - 1, nd)))
    keepdim = data.draw(st.booleans())
    lf, tf = _red_calls(name, dim, keepdim)
    CASES["reduction"] += 1
    force32 = a.dtype == np.float16 and lucid.ops.schema(name).amp_policy.name == "ForceFP32"
    # lucid's AMP policy (documented): a ForceFP32 op computes float16 input in float32
    r_l, r_t, e_l, e_t = both(lambda: lf(L(a)), lambda: tf(T(a).float() if force32 else T(a)))
    if e_t is not None or e_l is not None:
        # lucid computes int inputs of softmax, ... as float32 where torch refuses: only a
        # refusal where torch computes is a failure.
        assert e_l is None or e_t is not None, (name, a.dtype, a.shape, dim, e_l, e_t)
        return
    what = f"{name}({a.dtype}{a.shape}, dim={dim}, keepdim={keepdim})"
    dt_out = str(r_t.dtype).split(".")[1]      # the result's precision sets the tolerance
    if name in REDUCTION_OVERFLOWS and isinstance(r_t, torch.Tensor) and r_t.is_floating_point():
        w, g = r_t.double().numpy().copy(), as_np(r_l).astype(np.float64)
        over = np.isinf(w) & np.isfinite(g)
        if over.any():
            ref = np.broadcast_to(REDUCTION_OVERFLOWS[name][1](a, dim, keepdim), w.shape)
            np.testing.assert_allclose(g[over], ref[over], rtol=1e-6, err_msg=what)
            w[over] = ref[over]
            r_t = w
    close(r_l, r_t, dt_out, what, atol=_sum_bound(name, a))
    if a.dtype.kind == "f" and a.dtype != np.float16 and a.size and np.isfinite(a).all() and \
            name not in ("argmax", "argmin", "all", "any") and np.abs(a).max() < 1e3 and \
            np.unique(a).size == a.size:        # ties split the gradient differently
        x, xt = L(a, True), T(a, True)
        y, yt = lf(x), tf(xt)
        y.backward(gradient=lucid.ones_like(y))
        yt.backward(torch.ones_like(yt))
        if name in REDUCTION_GRADS:
            close(x.grad, REDUCTION_GRADS[name][1](a, dim), a.dtype, f"d {name}")
        elif xt.grad is not None:
            close(x.grad, xt.grad, a.dtype, f"d {name}")


# -- the other ops' test cases, with random values and layouts -------------------------------

def _draw_inputs(data, row):
    env = {}
    for name, shape, kind in row["inputs"]:
        if kind == "bool" or (isinstance(kind, str) and kind.startswith("int")):
            a = data.draw(arrays(["bool"] if kind == "bool" else ["int64"], shape=shape))
            if isinstance(kind, str) and kind.startswith("int") and a.dtype != bool:
                a = (np.abs(a) % 3).astype(np.int64)     # a valid index for small dims
        else:
            a = data.draw(arrays(["float32", "float64"], shape=shape))
        env[name] = a
    return env


ROWS = [r for r in OPS if r.get("call") and r.get("inputs")]


@pytest.mark.parametrize("row", [pytest.param(r, marks=_known("ops", r["name"])) for r in ROWS],
                         ids=[r["name"] for r in ROWS])
@FUZZ
@given(data=st.data())
def test_fuzz_op_cases(row, data):
    env = _draw_inputs(data, row)
    args = dict(row.get("args", {}))
    CASES["ops"] += 1
    ln = dict(args, lucid=lucid, np=np, **{k: L(v) for k, v in env.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = eval(row["call"], ln)
        except (TypeError, ValueError, IndexError, RuntimeError, OverflowError,
                ZeroDivisionError):
            return      # refused cleanly (never a crash or a foreign exception type)
    out = r if isinstance(r, (tuple, list)) else (r,)
    if row.get("torch") and all(np.isfinite(v).all() for v in env.values()
                                if v.dtype.kind == "f"):
        tn = dict(args, torch=torch, np=np, **{k: T(v) for k, v in env.items()})
        try:
            rt = eval(row["torch"], tn)
        except Exception:
            return
        outt = rt if isinstance(rt, (tuple, list)) else (rt,)
        for u, v in zip(out, outt):
            if isinstance(u, lucid.Tensor) and isinstance(v, torch.Tensor):
                if row["name"] in EXACT_WHERE_TORCH_NAN and v.is_floating_point():
                    v = _exact_where_torch_nan(row["name"], ln["a"], ln["b"], u, v)
                dt = "float32" if np.float32 in [e.dtype for e in env.values()] else "float64"
                if row["name"] in OP_CASES_REFERENCE:
                    v = _reference_where_torch_differs(row, env, args, u, v, dt)
                close(u, v, dt, row["name"], atol=max(
                    [_sum_bound(row["name"], e) for e in env.values()], default=0.0))


# The same deliberate differences in the test cases of tests/op_data.py: where lucid and
# torch disagree (torch cancels, or overflows to inf where lucid is finite), lucid must
# agree with the row's float64 SciPy / NumPy reference. op -> why.
OP_CASES_REFERENCE = {
    "gelu": ACCURATE_WHERE_TORCH_CANCELS["gelu"] + "; " + FINITE_WHERE_TORCH_OVERFLOWS["gelu"],
    "std": REDUCTION_OVERFLOWS["std"][0],
}


def _reference_where_torch_differs(row, env, args, got, want, dt):
    """``want`` with the row's float64 reference where lucid and torch disagree, after
    checking lucid's value against it."""
    import scipy.special
    g, w = as_np(got).astype(np.float64), want.double().numpy().copy()
    at = _disagree(g, w, {"float32": 2e-4}.get(dt, 1e-7)) | (np.isinf(w) & np.isfinite(g))
    if at.any():
        with np.errstate(all="ignore"):
            ref = eval(row["ref"], dict(REF_HELPERS, np=np, sp=scipy.special),
                       dict(args, **{k: v.astype(np.float64) for k, v in env.items()}))
        ref = np.broadcast_to(np.asarray(ref, np.float64), w.shape)
        np.testing.assert_allclose(g[at], ref[at], rtol=TIGHT[np.dtype(dt)], err_msg=row["name"])
        w[at] = ref[at]
    return w


# -- random graphs of ops with backward -------------------------------------------------------

GRAPH_OPS = [
    ("exp", lambda m, x: m.exp(m.tanh(x))), ("sin", lambda m, x: m.sin(x)),
    ("mul", lambda m, x: x * x), ("add", lambda m, x: x + 1.5),
    ("sigmoid", lambda m, x: m.sigmoid(x)), ("sum0", lambda m, x: x.sum(0, keepdim=True) * x),
    ("softmax", lambda m, x: m.softmax(x, -1)), ("relu", lambda m, x: m.relu(x)),
    ("T", lambda m, x: x.T.reshape(x.shape) if x.ndim == 2 else x),
    ("matmul", lambda m, x: x @ x.T if x.ndim == 2 else x),
    ("abs", lambda m, x: m.abs(x)), ("square", lambda m, x: m.square(x) * 0.1),
    ("div", lambda m, x: x / (1.0 + m.abs(x))), ("mean", lambda m, x: x - x.mean()),
    ("index", lambda m, x: m.cat([x, x[:1]], 0)[1:] if x.ndim else x),
]


@FUZZ
@given(data=st.data())
def test_fuzz_graphs(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    a = data.draw(values(int(np.prod(shape)), "float64")).reshape(shape)
    a = np.clip(np.nan_to_num(a), -3, 3)
    seq = data.draw(st.lists(st.integers(0, len(GRAPH_OPS) - 1), min_size=1, max_size=8))
    CASES["graph"] += 1
    x, xt = lucid.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, yt = x, xt
    for i in seq:
        f = GRAPH_OPS[i][1]
        y, yt = f(lucid, y), f(torch, yt)
    y.sum().backward()
    yt.sum().backward()
    close(y, yt, "float64", "graph " + str([GRAPH_OPS[i][0] for i in seq]))
    close(x.grad, xt.grad, "float64", "graph grad " + str([GRAPH_OPS[i][0] for i in seq]))
