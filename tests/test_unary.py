"""erf / exp / log2: values, edge cases, shapes, length/alignment, dtypes."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import lucid
from lucid_testutils import (NP_OF, assert_same_bits, assert_ulp, ldt, lt, mp_ref,
                             to_np, ulp_distance)

OPS = ["erf", "exp", "log2"]
MAX_ULP = 4
F = {"float32": np.float32, "float64": np.float64}


def _points(op, dt, rng):
    """Deterministic sample of inputs covering the op's interesting range."""
    info = np.finfo(dt)
    if op == "erf":
        pts = [np.linspace(-6.5, 6.5, 1301),
               np.logspace(-40 if dt == np.float32 else -300, 0, 150),
               -np.logspace(-40 if dt == np.float32 else -300, 0, 150),
               rng.uniform(-4, 4, 400)]
    elif op == "exp":
        lo, hi = (-104.0, 88.7) if dt == np.float32 else (-745.0, 709.7)
        pts = [np.linspace(lo, hi, 1500),
               np.logspace(-30, 0, 100), -np.logspace(-30, 0, 100),
               rng.uniform(-20, 20, 400)]
    else:
        emin = -149 if dt == np.float32 else -1074
        emax = 127.99 if dt == np.float32 else 1023.99
        pts = [2.0 ** np.linspace(emin, emax, 1500),
               1 + np.linspace(-0.02, 0.02, 201),
               rng.uniform(0, 8, 300),
               np.float64(info.tiny) * np.array([0.5, 1, 1.5, 2])]
    x = np.concatenate(pts).astype(dt)
    return x[np.isfinite(x)]


def _apply(op, t):
    return getattr(lucid, op)(t)


# ---------------------------------------------------------------- accuracy
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_accuracy_vs_mpmath(op, dt):
    x = _points(op, F[dt], np.random.default_rng(7))
    got = to_np(_apply(op, lucid.from_numpy(x.copy())))
    assert got.dtype == F[dt]
    want = mp_ref(op, x, F[dt])
    assert_ulp(got, want, MAX_ULP, x=x, what="%s %s vs mpmath" % (op, dt))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_accuracy_vs_scipy_numpy(op, dt):
    import scipy.special as sp
    x = _points(op, F[dt], np.random.default_rng(8))
    got = to_np(_apply(op, lt(x)))
    x64 = x.astype(np.float64)
    ref = {"erf": sp.erf, "exp": np.exp, "log2": np.log2}[op]
    with np.errstate(over="ignore", under="ignore"):
        want = ref(x64).astype(F[dt])
    # scipy/numpy are themselves ~1 ULP off in float64: allow a bit more
    assert_ulp(got, want, MAX_ULP + 2, x=x, what="%s %s vs scipy/numpy" % (op, dt))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_values_vs_torch(torch, op, dt):
    x = _points(op, F[dt], np.random.default_rng(9))
    got = to_np(_apply(op, lt(x)))
    want = getattr(torch, op)(torch.from_numpy(x.copy())).numpy()
    assert_ulp(got, want, 2 * MAX_ULP, x=x, what="%s %s vs torch" % (op, dt))


@given(x=hnp.arrays(np.float32, st.integers(0, 40),
                    elements=st.floats(width=32, allow_nan=True, allow_infinity=True)),
       op=st.sampled_from(OPS))
def test_hypothesis_float32_vs_mpmath(x, op):
    got = to_np(_apply(op, lt(x)))
    with np.errstate(invalid="ignore"):
        want = mp_ref(op, x, np.float32)
    assert_ulp(got, want, MAX_ULP, x=x, what=op)


@given(x=hnp.arrays(np.float64, st.integers(0, 20),
                    elements=st.floats(allow_nan=True, allow_infinity=True)),
       op=st.sampled_from(OPS))
def test_hypothesis_float64_vs_mpmath(x, op):
    got = to_np(_apply(op, lt(x)))
    want = mp_ref(op, x, np.float64)
    assert_ulp(got, want, MAX_ULP, x=x, what=op)


# ---------------------------------------------------------------- spellings
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_function_ops_and_method_agree(op, dt, rng):
    x = rng.uniform(0.1, 3, 37).astype(F[dt])
    t = lt(x)
    a = to_np(getattr(lucid, op)(t))
    b = to_np(getattr(lucid.ops, op)(t))
    c = to_np(getattr(t, op)())
    assert_same_bits(b, a, "lucid.ops.%s" % op)
    assert_same_bits(c, a, "Tensor.%s" % op)


@pytest.mark.parametrize("op", OPS)
def test_input_not_modified_and_new_tensor(op, rng):
    x = rng.uniform(0.5, 2, 10).astype(np.float32)
    t = lt(x)
    y = _apply(op, t)
    assert y is not t
    np.testing.assert_array_equal(to_np(t), x)
    assert not np.shares_memory(y.numpy(), t.numpy())


@pytest.mark.parametrize("op", OPS)
def test_same_values_with_requires_grad(op, rng):
    x = rng.uniform(0.5, 2, 33)
    a = to_np(_apply(op, lt(x)))
    b = to_np(_apply(op, lt(x, dtype=lucid.float64, requires_grad=True)))
    with lucid.no_grad():
        c = to_np(_apply(op, lt(x, dtype=lucid.float64, requires_grad=True)))
    assert_same_bits(b, a)
    assert_same_bits(c, a)


# ---------------------------------------------------------------- edge values
INF, NAN = math.inf, math.nan
EDGE = [
    ("erf", INF, 1.0), ("erf", -INF, -1.0), ("erf", 0.0, 0.0), ("erf", -0.0, -0.0),
    ("erf", NAN, NAN), ("erf", 30.0, 1.0), ("erf", -30.0, -1.0),
    ("exp", -INF, 0.0), ("exp", INF, INF), ("exp", 0.0, 1.0), ("exp", -0.0, 1.0),
    ("exp", NAN, NAN), ("exp", 1000.0, INF), ("exp", -1000.0, 0.0),
    ("log2", 0.0, -INF), ("log2", -0.0, -INF), ("log2", -1.0, NAN), ("log2", -INF, NAN),
    ("log2", -1e-3, NAN), ("log2", INF, INF), ("log2", NAN, NAN), ("log2", 1.0, 0.0),
    ("log2", 2.0, 1.0), ("log2", 0.5, -1.0), ("log2", 1024.0, 10.0),
]


@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
@pytest.mark.parametrize("op,x,want", EDGE)
def test_edge_values(op, x, want, dt):
    # pad with ordinary values so both the vector body and the tail are exercised
    for n_pad in (0, 3, 17):
        arr = np.full(n_pad + 1, 1.25, dtype=NP_OF[dt])
        arr[n_pad // 2] = x
        got = to_np(_apply(op, lt(arr)))[n_pad // 2]
        if math.isnan(want):
            assert math.isnan(got), (op, x, dt, got)
        else:
            assert got == want, (op, x, dt, got)
            assert np.signbit(got) == np.signbit(np.float64(want)), (op, x, dt, got)


@pytest.mark.parametrize("dt,x", [("float32", 88.8), ("float32", 89.0), ("float32", 3e38),
                                  ("float64", 709.8), ("float64", 1e300)])
def test_exp_overflow_is_inf(dt, x):
    got = to_np(lucid.exp(lt([x] * 9, dtype=ldt(dt))))
    assert (got == np.inf).all()


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_exp_largest_finite(dt):
    # the largest input whose exp is finite must give a finite result
    d = F[dt]
    x = d(np.log(np.finfo(d).max))
    while not np.isfinite(mp_ref("exp", np.array([x]), d)[0]):
        x = np.nextafter(x, d(0))
    got = to_np(lucid.exp(lt(np.array([x] * 5, dtype=d))))
    assert np.isfinite(got).all()
    assert_ulp(got, mp_ref("exp", np.array([x] * 5), d), MAX_ULP)


@pytest.mark.parametrize("dt,kmin,kmax", [("float32", -149, 127), ("float64", -1074, 1023)])
def test_log2_exact_powers_of_two(dt, kmin, kmax):
    k = np.arange(kmin, kmax + 1)
    x = np.ldexp(np.ones(k.size), k).astype(F[dt])
    got = to_np(lucid.log2(lt(x)))
    np.testing.assert_array_equal(got, k.astype(F[dt]))


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_subnormal_inputs(dt):
    d = F[dt]
    tiny = np.finfo(d).smallest_subnormal
    x = np.array([tiny, 2 * tiny, 1000 * tiny, -tiny, -1000 * tiny], dtype=d)
    for op in OPS:
        got = to_np(_apply(op, lt(x)))
        with np.errstate(invalid="ignore"):
            want = mp_ref(op, x, d)
        assert_ulp(got, want, MAX_ULP, x=x, what=op)


# ---------------------------------------------------------------- shapes
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_zero_dim(op, dt):
    t = lt(0.75, dtype=ldt(dt))
    y = _apply(op, t)
    assert y.shape == () and y.ndim == 0 and y.dtype is ldt(dt)
    assert_ulp(np.array(y.item(), dtype=F[dt]), mp_ref(op, np.array(0.75), F[dt]), MAX_ULP)


@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), (0, 0)])
@pytest.mark.parametrize("dt", ["float16", "float32", "float64", "int64", "bool_"])
@pytest.mark.parametrize("op", OPS)
def test_empty(op, dt, shape):
    y = _apply(op, lucid.zeros(shape, dtype=ldt(dt)))
    assert y.shape == shape
    assert to_np(y).size == 0


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_shape_preserved(op, dt, rng):
    x = rng.uniform(0.1, 2, (3, 1, 4, 5)).astype(F[dt])
    y = _apply(op, lt(x))
    assert y.shape == x.shape
    ref = to_np(_apply(op, lt(x.reshape(-1)))).reshape(x.shape)
    assert_same_bits(to_np(y), ref)


def _views(base):
    return {
        "step2": base[::2, :],
        "cols": base[:, 1::3],
        "transpose": base.T,
        "col": base[:, 5],
        "step7": base.reshape(-1)[3::7],
    }


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_non_contiguous(op, dt, rng):
    base = rng.uniform(0.05, 3, (24, 20)).astype(F[dt])
    for name, v in _views(base).items():
        want = to_np(_apply(op, lt(np.ascontiguousarray(v))))
        got = to_np(_apply(op, lucid.from_numpy(v)))
        assert got.shape == v.shape
        assert_same_bits(got, want, "%s %s" % (op, name))
        assert_ulp(got, mp_ref(op, v, F[dt]), MAX_ULP, what=name)


# ---------------------------------------------------------------- length / alignment
def _base(op, d, n=168):
    rng = np.random.default_rng(99)
    if op == "log2":
        x = np.exp(rng.uniform(-20, 20, n))
    elif op == "exp":
        x = rng.uniform(-30, 30, n)
    else:
        x = rng.uniform(-5, 5, n)
    x = x.astype(d)
    # sprinkle special values so they land both in vector bodies and tails
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30]
    for i, s in enumerate(specials):
        x[(i * 23 + 5) % n] = s
    return x


def _singles(op, x):
    """Each element computed alone (1-element tensor and 0-d tensor)."""
    out = np.empty_like(x)
    for i in range(x.size):
        a = to_np(_apply(op, lt(x[i:i + 1])))
        b = to_np(_apply(op, lt(np.array(x[i]))))
        assert b.shape == ()
        assert_same_bits(a[0:1], np.array([b]), "0-d vs 1-element")
        out[i] = a[0]
    return out


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_result_independent_of_length_and_alignment(op, dt):
    d = F[dt]
    with np.errstate(invalid="ignore"):
        x = _base(op, d)
    single = _singles(op, x)
    # whole array at once
    assert_same_bits(to_np(_apply(op, lt(x))), single, "full array")
    for off in range(8):
        for n in range(0, 101):
            view = x[off:off + n]  # element-aligned but not vector-aligned
            got_shared = to_np(_apply(op, lucid.from_numpy(view)))
            assert_same_bits(got_shared, single[off:off + n], "from_numpy off=%d n=%d" % (off, n))
            if off == 0:
                got_copy = to_np(_apply(op, lt(view)))
                assert_same_bits(got_copy, single[:n], "copy n=%d" % n)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_result_independent_of_byte_misalignment(op, dt):
    d = F[dt]
    x = _base(op, d, 40)
    with np.errstate(invalid="ignore"):
        want = to_np(_apply(op, lt(x)))
    for shift in (1, 2, 3):
        buf = bytearray(x.nbytes + 8)
        un = np.frombuffer(buf, dtype=d, count=x.size, offset=shift)
        un[...] = x
        assert not un.flags.aligned or shift == 0
        got = to_np(_apply(op, lt(un)))  # copy: must always work
        assert_same_bits(got, want, "tensor(unaligned) shift=%d" % shift)
        try:
            t = lucid.from_numpy(un)
        except (ValueError, RuntimeError, TypeError):
            continue  # refusing unaligned memory is acceptable
        assert_same_bits(to_np(_apply(op, t)), want, "from_numpy(unaligned) shift=%d" % shift)


# ---------------------------------------------------------------- dtypes / AMP policies
def test_float16_erf_promote_keeps_float16(rng):
    x = np.concatenate([rng.uniform(-4, 4, 300), [0.0, -0.0, np.inf, -np.inf]]).astype(np.float16)
    y = lucid.erf(lt(x))
    assert y.dtype is lucid.float16
    got = to_np(y)
    assert got.dtype == np.float16
    want = mp_ref("erf", x, np.float16)
    assert_ulp(got, want, 1, x=x, what="erf float16")


@pytest.mark.parametrize("op", ["exp", "log2"])
def test_float16_force_fp32(op, rng):
    x = (rng.uniform(0.01, 10, 300) if op == "log2" else rng.uniform(-10, 10, 300)).astype(np.float16)
    y = _apply(op, lt(x))
    assert y.dtype is lucid.float32
    got = to_np(y)
    # upcast first, then exactly the float32 kernel
    want = to_np(_apply(op, lt(x.astype(np.float32))))
    assert_same_bits(got, want, "%s float16 -> float32" % op)
    assert_ulp(got, mp_ref(op, x, np.float32), MAX_ULP)


@pytest.mark.parametrize("op", ["exp", "log2"])
def test_float16_force_fp32_range_and_precision(op):
    # exp: result overflows float16 but not float32; log2: float32 precision needed
    x = np.array([12.0, 15.0] if op == "exp" else [1e-7, 6e-8], dtype=np.float16)
    got = to_np(_apply(op, lt(x)))
    assert np.isfinite(got).all()
    assert_ulp(got, mp_ref(op, x, np.float32), MAX_ULP)


@pytest.mark.parametrize("name", ["int32", "int64", "bool_"])
@pytest.mark.parametrize("op", OPS)
def test_int_bool_computed_as_float32(op, name):
    vals = [0, 1] if name == "bool_" else ([0, 1, 2, 3, 7, 100, 1024] if op == "log2"
                                           else [-3, -1, 0, 1, 2, 5, 20])
    x = np.array(vals).astype(NP_OF[name])
    y = _apply(op, lt(x))
    assert y.dtype is lucid.float32
    want = to_np(_apply(op, lt(x.astype(np.float32))))
    assert_same_bits(to_np(y), want, "%s %s" % (op, name))
    assert_ulp(to_np(y), mp_ref(op, x.astype(np.float64), np.float32), MAX_ULP)


@pytest.mark.parametrize("op", OPS)
def test_float64_stays_float64(op):
    y = _apply(op, lt([0.5, 1.5], dtype=lucid.float64))
    assert y.dtype is lucid.float64
    y = _apply(op, lt([0.5, 1.5], dtype=lucid.float32))
    assert y.dtype is lucid.float32


@pytest.mark.parametrize("op", OPS)
def test_float16_zero_dim_and_empty(op):
    y = _apply(op, lt(0.5, dtype=lucid.float16))
    assert y.shape == ()
    want_dt = lucid.float16 if op == "erf" else lucid.float32
    assert y.dtype is want_dt
    assert _apply(op, lucid.zeros(0, dtype=lucid.float16)).dtype is want_dt


def test_ulp_helper_sanity():
    # the comparison helper itself must detect a 1-ULP difference and signed zeros
    a = np.array([1.0, 0.0], dtype=np.float32)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)), -0.0], dtype=np.float32)
    assert ulp_distance(a, b).tolist() == [1.0, 0.0]
    with pytest.raises(AssertionError):
        assert_same_bits(a, b)
    with pytest.raises(AssertionError):
        assert_ulp(a, b, 0)


def _ulp_err32(got, x):
    """|got - exp(x)| in float32 ulps of exp(x), exp in float64 (exact enough here)."""
    want = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        w32 = want.astype(np.float32)
        spacing = np.spacing(np.abs(w32)).astype(np.float64)
        return np.where(np.isfinite(w32) & (w32 != 0),
                        np.abs(got.astype(np.float64) - want) / spacing, 0.0), want


def test_exp_float32_random_bits_within_claimed_ulps():
    """float32 exp (lucid's own vector exp) over 2^20 random floats of its whole finite
    range: within 1.2 ulp of exp (0.91 measured over every float with fused
    multiply-adds, 1.17 without); 0, inf and nan where exp gives them."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-105, 90, 1 << 20).astype(np.float32)
    got = to_np(lucid.exp(lt(x)))
    err, want = _ulp_err32(got, x)
    assert err.max() <= 1.2, (float(err.max()), float(x[np.argmax(err)]))
    with np.errstate(over="ignore"):
        w32 = want.astype(np.float32)
    assert np.array_equal(got[w32 == 0], w32[w32 == 0])
    assert np.array_equal(got[np.isinf(w32)], w32[np.isinf(w32)])


@pytest.mark.parametrize("n", [15, 16, 255, 256, 257, 1000, 4099])
def test_exp_float32_blocks_mixing_ranges(n):
    """Runs where a few values lie beyond the fast form's range (|x| > 86: subnormal,
    zero, inf, nan results) among ordinary ones: every element as exp of it alone, so
    the full form agrees with the fast one wherever both apply."""
    rng = np.random.default_rng(n)
    x = rng.uniform(-3, 3, n).astype(np.float32)
    specials = np.array([-95.5, -103.9, -200, 88.5, 100, -np.inf, np.inf, np.nan], np.float32)
    x[:: max(1, n // 9)][: specials.size] = specials[: len(x[:: max(1, n // 9)])]
    got = to_np(lucid.exp(lt(x)))
    alone = np.array([to_np(lucid.exp(lt(x[i:i + 1])))[0] for i in range(n)], np.float32)
    assert got.tobytes() == alone.tobytes()
    err, want = _ulp_err32(got, x)
    assert err.max() <= 1.2
    with np.errstate(over="ignore"):
        w32 = want.astype(np.float32)
    special = ~np.isfinite(w32) | (w32 == 0)
    np.testing.assert_array_equal(got[special], w32[special])
