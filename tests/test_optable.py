"""One parametrised suite over the unary op table ``lucid/_core/optable.py``.

Every test below is generated from the rows of ``UNARY``: adding a row adds its
tests, with no edit here.  Per-op behaviour is derived from the row fields:

  * ``mp`` / ``ref`` / ``domain``  accuracy references and where to sample;
  * ``saves == ""``                 piecewise-constant op (zero gradient, jumps at
                                    integers): gradient points are moved to k+0.5+-0.2;
  * ``c`` starting with ``lv_``     lucid's own function (not C99 Annex F): at +-inf
                                    the reference is the limit, not numpy's nan;
  * ``torch``                       the PyTorch function to compare with;
  * ``amp``                         float16 output dtype.

Known library bugs are data: ``XFAIL`` maps (test kind, op name, dtype or None)
to a reason and turns the case into a strict xfail.
"""
import functools
import math
import zlib

import mpmath
import numpy as np
import pytest
import scipy.special as sp

import lucid
from op_data import unary_rows
from lucid_testutils import assert_ulp, lt, to_np, ulp_distance

# ----------------------------------------------------------------------------- data
MAX_ULP = 4            # forward vs mpmath (correctly rounded) reference
REF_ULP = 16           # forward vs the numpy/scipy expression (itself a few ULP off)
TORCH_ULP = 8          # forward vs torch (both sides a few ULP off)
MP_BITS = 100
N_POINTS = {"float32": 2000, "float64": 1000}
N_GRADCHECK = 6
F = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
UINT = {np.dtype(np.float16): np.uint16, np.dtype(np.float32): np.uint32,
        np.dtype(np.float64): np.uint64}

# (kind, op name, dtype name or None for every dtype) -> reason.  Strict xfails:
# the lead removes an entry once the library is fixed.
XFAIL = {}

# special inputs used for the Annex F checks (value, and whether the sign of a zero
# result is checked).  Everything else about the expected result comes from the row.
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
            2.5, -2.5, 1000.0, -1000.0]

ROWS = unary_rows()
NAMES = [r["name"] for r in ROWS]


def _camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _own(row):
    """lucid's own function (lv_*), not a C library one."""
    return row["c"][0].startswith("lv_")


def _marks(kind, name, dt):
    reason = XFAIL.get((kind, name, dt)) or XFAIL.get((kind, name, None))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def cases(kind, dtypes=("float32", "float64"), rows=None):
    rows = ROWS if rows is None else rows
    out = []
    for row in rows:
        for dt in dtypes:
            out.append(pytest.param(row, dt, id="%s-%s" % (row["name"], dt),
                                    marks=_marks(kind, row["name"], dt)))
    return out


def row_cases(kind, rows=None):
    rows = ROWS if rows is None else rows
    return [pytest.param(row, id=row["name"], marks=_marks(kind, row["name"], None))
            for row in rows]


TORCH_ROWS = [r for r in ROWS if r["torch"]]


# ----------------------------------------------------------------------------- helpers
def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _op(row):
    return getattr(lucid, row["name"])


def _torch_fn(torch, row):
    return functools.reduce(getattr, row["torch"].split("."), torch)


@functools.lru_cache(maxsize=None)
def _compiled(src):
    return compile(src, "<optable>", "eval")


_MP_NS = {k: getattr(mpmath, k) for k in dir(mpmath) if not k.startswith("_")}


def _ref(row, x):
    """The row's numpy/scipy reference, evaluated in float64."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        r = eval(_compiled(row["ref"]), {"np": np, "sp": sp}, {"x": x})
    return np.broadcast_to(np.asarray(r, dtype=np.float64), x.shape).copy()


def _mp(row, x):
    """The row's mpmath expression at MP_BITS, rounded to float64."""
    code = _compiled(row["mp"])
    out = np.empty(np.size(x), dtype=np.float64)
    with mpmath.workprec(MP_BITS):
        for i, v in enumerate(np.ravel(np.asarray(x, dtype=np.float64)).tolist()):
            out[i] = float(eval(code, _MP_NS, {"x": mpmath.mpf(v)}))
    return out.reshape(np.shape(x))


def _cast(a, dt):
    with np.errstate(all="ignore"):
        return np.asarray(a, dtype=np.float64).astype(F[dt])


def _bits_equal(actual, expected):
    """Elementwise: same bits (any nan equals any nan)."""
    a = np.atleast_1d(np.asarray(actual))
    e = np.atleast_1d(np.asarray(expected))
    assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, e.dtype, a.shape, e.shape)
    u = UINT[a.dtype]
    return (a.view(u) == e.view(u)) | (np.isnan(a) & np.isnan(e))


def assert_bits(actual, expected, what=""):
    ok = _bits_equal(actual, expected)
    if not ok.all():
        i = np.flatnonzero(~ok)[:6]
        raise AssertionError("%s: %d elements differ at %s: got %r want %r" % (
            what, int((~ok).sum()), i.tolist(), np.ravel(actual)[i].tolist(),
            np.ravel(expected)[i].tolist()))


def _accuracy_points(row, dt):
    """Deterministic sample of the row's domain, cast to dt."""
    lo, hi = row["domain"]
    n = N_POINTS[dt]
    rng = _rng("acc", row["name"], dt)
    parts = [np.array([lo, hi]), rng.uniform(lo, hi, int(n * 0.7))]
    ints = np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=np.float64)[:n // 10]
    parts += [ints, ints + 0.5]
    rest = max(n - sum(p.size for p in parts), n // 10)
    if lo < 0 < hi:  # tiny magnitudes of both signs (expm1, log1p, sin, ... near 0)
        m = min(-lo, hi)
        tmin = -30 if dt == "float32" else -300
        parts += [np.logspace(tmin, math.log10(m), rest // 2),
                  -np.logspace(tmin, math.log10(m), rest - rest // 2)]
    elif lo > 0:  # positive domain: spread over the magnitudes
        parts.append(np.exp(rng.uniform(math.log(lo), math.log(hi), rest)))
    else:
        parts.append(rng.uniform(lo, hi, rest))
    x = np.concatenate(parts)
    x = x[(x >= lo) & (x <= hi)]
    return x.astype(F[dt])


_MP_CACHE = {}
MAX_ULP_SEEN = {}  # (name, dtype) -> max ULP vs mpmath (for the report)


def _mp_reference(row, dt):
    key = (row["name"], dt, row["mp"], row["domain"])
    if key not in _MP_CACHE:
        x = _accuracy_points(row, dt)
        _MP_CACHE[key] = (x, _cast(_mp(row, x), dt))
    return _MP_CACHE[key]


def _grad_points(row, n, dt, kind):
    """Points for derivative checks: inside the domain (5% margin), away from 0 (the
    kink of abs) and, for piecewise-constant rows (saves == ""), at k+0.5+-0.2."""
    lo, hi = row["domain"]
    pad = 0.05 * (hi - lo)
    rng = _rng(kind, row["name"], dt)
    x = rng.uniform(lo + pad, hi - pad, n)
    if row["saves"] == "":
        x = np.floor(x) + 0.5 + rng.uniform(-0.2, 0.2, n)
    x = np.where(np.abs(x) < 0.05, np.copysign(0.05, x), x)
    return x.astype(F[dt])


def _odd_through_zero(row):
    """f(-x) == -f(x) on the domain and f(x) ~ c*x near 0 (sin, atanh, erfinv, ...):
    then f(+-0) must be +-0 whatever the reference library says."""
    lo, hi = row["domain"]
    if not lo < 0 < hi:
        return False
    x = np.linspace(0.1, 0.9, 9) * min(-lo, hi)
    tiny = abs(float(_ref(row, np.array([1e-300]))[0]))
    return bool(np.allclose(_ref(row, -x), -_ref(row, x), rtol=1e-12, atol=0)
                and 0 < tiny < 1e-50)


def _special_reference(row, dt):
    """Expected f(SPECIALS) in dt: numpy/scipy (C99 Annex F) via the row's ``ref``; for
    lucid's own functions, where that gives nan at +-inf the limit is used instead
    (the ref at +-float64 max).  Returns (x, want in float64, check_zero_sign)."""
    fi = np.finfo(F[dt])
    extremes = [fi.max, -fi.max, fi.tiny, -fi.tiny, fi.smallest_subnormal,
                -fi.smallest_subnormal]
    x = np.array(SPECIALS + extremes, dtype=F[dt])
    want = _ref(row, x)
    if _odd_through_zero(row):
        want = np.where(x == 0, x.astype(np.float64), want)
    sign_ok = np.ones(x.shape, dtype=bool)
    if _own(row):
        bad = np.isinf(x) & np.isnan(want)
        big = np.where(x > 0, np.finfo(np.float64).max, -np.finfo(np.float64).max)
        want = np.where(bad, _ref(row, big), want)
        sign_ok &= ~bad  # the sign of a zero limit is not prescribed
    return x, want, sign_ok


# ============================================================================= 1. forward
@pytest.mark.parametrize("row,dt", cases("mpmath"))
def test_forward_vs_mpmath(row, dt):
    x, want = _mp_reference(row, dt)
    y = _op(row)(lucid.from_numpy(x.copy()))
    assert y.dtype is getattr(lucid, dt)
    got = to_np(y)
    d = ulp_distance(got, want)
    MAX_ULP_SEEN[(row["name"], dt)] = float(d.max())
    limit = row.get("max_ulp", {}).get(dt, MAX_ULP)   # a documented limitation lives in the row
    assert_ulp(got, want, limit, x=x, what="%s %s vs mpmath" % (row["name"], dt))


@pytest.mark.parametrize("row,dt", cases("ref"))
def test_forward_vs_numpy_scipy_ref(row, dt):
    x = _accuracy_points(row, dt)
    got = to_np(_op(row)(lt(x)))
    want = _cast(_ref(row, x), dt)
    d = ulp_distance(got, want)
    scale = np.max(np.abs(want[np.isfinite(want)]), initial=1.0)
    ok = (d <= REF_ULP) | (np.abs(got.astype(np.float64) - want) <= 2 * np.finfo(F[dt]).eps * scale)
    assert ok.all(), "%s %s vs %s: x=%r got=%r want=%r ulp=%r" % (
        row["name"], dt, row["ref"], x[~ok][:5], got[~ok][:5], want[~ok][:5], d[~ok][:5])


@pytest.mark.parametrize("row,dt", cases("method"))
def test_method_and_ops_namespace_agree(row, dt):
    x = _grad_points(row, 37, dt, "method")
    t = lt(x)
    a = to_np(_op(row)(t))
    assert_bits(to_np(getattr(t, row["name"])()), a, "Tensor.%s" % row["name"])
    assert_bits(to_np(getattr(lucid.ops, row["name"])(t)), a, "lucid.ops.%s" % row["name"])


@pytest.mark.parametrize("row,dt", cases("torch", rows=TORCH_ROWS))
def test_forward_vs_torch(torch, row, dt):
    x = _accuracy_points(row, dt)
    got = to_np(_op(row)(lt(x)))
    want = _torch_fn(torch, row)(torch.from_numpy(x.copy())).numpy()
    # agree with torch, or be at least as close to the exact value as torch is
    # (torch's own error, e.g. gelu's tail computed as x/2 * (1 + erf(x/sqrt 2)))
    x_mp, exact = _mp_reference(row, dt)
    assert_bits(x_mp, x, "same points")
    ok = ((ulp_distance(got, want) <= TORCH_ULP)
          | (ulp_distance(got, exact) <= ulp_distance(want, exact)))
    assert ok.all(), "%s %s vs torch.%s: x=%r got=%r torch=%r exact=%r" % (
        row["name"], dt, row["torch"], x[~ok][:5], got[~ok][:5], want[~ok][:5], exact[~ok][:5])


# ============================================================================= 2. gradcheck
@pytest.mark.parametrize("row", row_cases("gradcheck"))
def test_gradcheck(row):
    x = lt(_grad_points(row, N_GRADCHECK, "float64", "gc"), requires_grad=True)
    assert lucid.autograd.gradcheck(_op(row), (x,))


@pytest.mark.parametrize("row", row_cases("gradgradcheck"))
def test_gradgradcheck(row):
    x = lt(_grad_points(row, N_GRADCHECK, "float64", "gc"), requires_grad=True)
    assert lucid.autograd.gradgradcheck(_op(row), (x,))


@pytest.mark.parametrize("row", row_cases("graph_grad"))
def test_fused_and_graph_backward_agree(row):
    """The fused C backward (c_grad) and the graph-mode one (grad, create_graph=True)."""
    xn = _grad_points(row, 33, "float64", "graph")
    g = lt(_rng("g", row["name"]).standard_normal(xn.size))
    x1 = lt(xn, requires_grad=True)
    (a,) = lucid.autograd.grad([_op(row)(x1)], [x1], [g])
    x2 = lt(xn, requires_grad=True)
    (b,) = lucid.autograd.grad([_op(row)(x2)], [x2], [g], create_graph=True)
    np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-13, atol=1e-300)


# ============================================================================= 3. torch grads
@pytest.mark.parametrize("row", row_cases("torch_grad", rows=TORCH_ROWS))
def test_float32_grad_vs_torch(torch, row):
    xn = _grad_points(row, 64, "float32", "tgrad")
    gn = _rng("tg", row["name"]).standard_normal(xn.size).astype(np.float32)
    x = lt(xn, requires_grad=True)
    _op(row)(x).backward(lt(gn))
    assert x.grad.dtype is lucid.float32
    got = to_np(x.grad)
    xt = torch.from_numpy(xn.copy()).requires_grad_(True)
    _torch_fn(torch, row)(xt).backward(torch.from_numpy(gn.copy()))
    want = xt.grad.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * max(1.0, np.abs(want).max()),
                               err_msg="%s grad vs torch" % row["name"])


# ============================================================================= 4. schema
@pytest.mark.parametrize("row", row_cases("schema"))
def test_schema_matches_row(row):
    name = row["name"]
    s = lucid.ops.schema(name)
    assert isinstance(s, lucid.OpSchema)
    assert s.name == name
    assert s.version == 1
    assert s.amp_policy == getattr(lucid.AmpPolicy, row["amp"])
    assert bool(s.saves_input) == (row["saves"] == "x")
    assert bool(s.saves_output) == (row["saves"] == "y")
    assert name in lucid.ops.registry()
    assert getattr(lucid, name) is getattr(lucid.ops, name)
    assert row["doc"].split()[0] in (_op(row).__doc__ or "")


@pytest.mark.parametrize("row", row_cases("node"))
def test_backward_node(row):
    x = lt(np.array([0.5, 0.75]), requires_grad=True)
    for y in (_op(row)(x), getattr(x, row["name"])()):
        cls = type(y.grad_fn)
        assert cls.__name__ == _camel(row["name"]) + "Backward"
        assert cls.schema_v1 is lucid.ops.schema(row["name"])
        ((acc, idx),) = y.grad_fn.next_functions
        assert idx == 0 and type(acc).__name__ == "AccumulateGrad"
    with lucid.no_grad():
        assert _op(row)(x).grad_fn is None


# ============================================================================= 5. length / alignment
def _alignment_base(row, dt, n=64):
    lo, hi = row["domain"]
    x = _rng("align", row["name"], dt).uniform(lo, hi, n)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 1e-30, 1e30, 0.5]
    for i, s in enumerate(specials):
        x[(i * 23 + 5) % n] = s
    return x.astype(F[dt])


@pytest.mark.parametrize("row,dt", cases("align"))
def test_independent_of_length_and_alignment(row, dt):
    x = _alignment_base(row, dt)
    f = _op(row)
    full = to_np(f(lucid.from_numpy(x)))
    for i in range(0, x.size, 7):  # 0-d tensors
        assert_bits(to_np(f(lt(x[i]))), full[i:i + 1], "0-d x=%r" % x[i])
    for off in range(18):
        for n in range(1, 41):
            view = x[off:off + n]  # shares memory: element- but not vector-aligned
            assert_bits(to_np(f(lucid.from_numpy(view))), full[off:off + n],
                        "%s off=%d n=%d" % (row["name"], off, n))
        assert_bits(to_np(f(lt(x[off:]))), full[off:], "copy off=%d" % off)


# ============================================================================= 6. special values
@pytest.mark.parametrize("row,dt", cases("special", dtypes=("float16", "float32", "float64")))
def test_special_values(row, dt):
    x, want, sign_checked = _special_reference(row, dt)
    y = _op(row)(lt(x))
    out_dt = y.dtype
    got = to_np(y)
    want = _cast(want, str(got.dtype))  # float32 for ForceFP32 on float16
    # pad each special with ordinary values so it also goes through vector bodies
    for pad in (0, 5, 19):
        for i, v in enumerate(x):
            arr = np.full(2 * pad + 1, 0.5, dtype=x.dtype)
            arr[pad] = v
            assert_bits(to_np(_op(row)(lt(arr)))[pad:pad + 1], got[i:i + 1],
                        "%s(%r) padded by %d" % (row["name"], v, pad))
    assert out_dt is getattr(lucid, str(got.dtype))
    ulp = ulp_distance(got, want)
    fin = np.isfinite(want) & (want != 0)
    exact = ~fin  # nan, inf and zeros: exact (nan == nan)
    bad = (exact & ~_bits_equal(np.abs(got), np.abs(want))) | (fin & (ulp > 2 * MAX_ULP))
    zero = (want == 0) & sign_checked
    bad |= zero & (np.signbit(got) != np.signbit(want))
    assert not bad.any(), "%s %s special values (want from %s): %s" % (
        row["name"], dt, "limit/" + row["ref"] if _own(row) else row["ref"],
        ", ".join("f(%r)=%r want %r" % (a, b, c) for a, b, c in zip(x[bad], got[bad], want[bad])))
    # infinities and nonzero results also carry the right sign
    nz = ~np.isnan(want) & (want != 0)
    assert (np.signbit(got[nz]) == np.signbit(want[nz])).all()


# ============================================================================= 7. dtypes
@pytest.mark.parametrize("row", row_cases("float16"))
def test_float16_policy(row):
    xn = _grad_points(row, 50, "float16", "f16")
    y = _op(row)(lt(xn))
    ref32 = to_np(_op(row)(lt(xn.astype(np.float32))))
    if row["amp"] == "ForceFP32":
        assert y.dtype is lucid.float32
        assert_bits(to_np(y), ref32, "%s float16 -> float32 kernel" % row["name"])
    else:
        assert y.dtype is lucid.float16
        want = _cast(_mp(row, xn), "float16")
        assert_ulp(to_np(y), want, 1, x=xn, what="%s float16" % row["name"])


@pytest.mark.parametrize("row", row_cases("float16_grad"))
def test_float16_leaf_gets_float16_grad(row):
    xn = _grad_points(row, 9, "float16", "f16g")
    x = lt(xn, requires_grad=True)
    _op(row)(x).sum().backward()
    assert x.grad is not None and x.grad.dtype is lucid.float16 and x.grad.shape == x.shape
    # same gradient as in float32, up to float16 rounding (and its overflow to inf)
    x32 = lt(xn.astype(np.float32), requires_grad=True)
    _op(row)(x32).sum().backward()
    want = _cast(to_np(x32.grad), "float16").astype(np.float32)
    got = to_np(x.grad).astype(np.float32)
    atol = 1e-6
    if row["saves"] == "y" and row["amp"] != "ForceFP32":
        # the saved output is float16: its rounding error propagates (1 - y*y for tanh)
        atol = 2 * float(np.finfo(np.float16).eps) * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=4e-3, atol=atol)


@pytest.mark.parametrize("itype", ["int32", "int64", "bool_"])
@pytest.mark.parametrize("row", row_cases("int"))
def test_integer_input_computed_in_float32(row, itype):
    lo, hi = row["domain"]
    xs = np.arange(math.ceil(lo), math.floor(hi) + 1)
    xs = np.array([0, 1]) if itype == "bool_" else xs
    xn = xs.astype(np.dtype(itype.rstrip("_")))
    if row.get("ints"):
        # The row keeps integer dtypes as PyTorch (abs, floor, sign, relu, square, ...);
        # bool is refused unless the row says how to compute it.
        if itype == "bool_" and row["ints"][1] is None:
            with pytest.raises(TypeError, match="bool"):
                _op(row)(lt(xn))
            return
        y = _op(row)(lt(xn))
        assert not y.dtype.is_floating_point
        np.testing.assert_array_equal(to_np(y), to_np(_op(row)(lt(xn.astype(np.float64)))))
        return
    y = _op(row)(lt(xn))
    assert y.dtype is lucid.float32
    assert_bits(to_np(y), to_np(_op(row)(lt(xn.astype(np.float32)))), "%s %s" % (row["name"], itype))


# ============================================================================= 8. shapes / strides
@pytest.mark.parametrize("row,dt", cases("shapes"))
def test_zero_dim_and_empty(row, dt):
    d = getattr(lucid, dt)
    v = _grad_points(row, 1, dt, "0d")
    y = _op(row)(lt(v[0]))
    assert y.shape == () and y.dtype is d
    assert_bits(np.array(y.item(), dtype=F[dt]), to_np(_op(row)(lt(v))), "0-d")
    for shape in [(0,), (2, 0, 3)]:
        e = _op(row)(lucid.zeros(shape, dtype=d))
        assert e.shape == shape and e.dtype is d and to_np(e).size == 0


@pytest.mark.parametrize("row,dt", cases("strided"))
def test_non_contiguous(row, dt):
    lo, hi = row["domain"]
    base = _rng("strided", row["name"], dt).uniform(lo, hi, (24, 20)).astype(F[dt])
    f = _op(row)
    views = {"step3": base.reshape(-1)[1::3], "rows": base[::2, :], "cols": base[:, 1::3],
             "transpose": base.T, "col": base[:, 5], "neg": base[::-1, ::-2]}
    for name, v in views.items():
        t = lucid.from_numpy(v)
        got = to_np(f(t))
        assert got.shape == v.shape
        assert_bits(got, to_np(f(lt(np.ascontiguousarray(v)))), "%s %s" % (row["name"], name))
    row0 = lt(np.ascontiguousarray(base[3]))
    got = to_np(f(row0.reshape(1, 20).expand(5, 20)))  # stride-0 broadcast
    assert_bits(got, np.broadcast_to(to_np(f(row0)), (5, 20)).copy(), "expand")


def test_every_row_has_test_data():
    """A new UNARY row needs its reference, oracle and domain in tests/op_data.py."""
    from lucid._core.optable import UNARY
    from op_data import UNARY_DATA
    missing = [r["name"] for r in UNARY if r["name"] not in UNARY_DATA]
    stale = sorted(set(UNARY_DATA) - {r["name"] for r in UNARY})
    assert not missing and not stale, (missing, stale)
